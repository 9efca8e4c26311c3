#!/usr/bin/env python3
"""json_bodies: the same battery of hostile JSON bodies against every JSON endpoint of one server
(issue 25): node bombs in an unknown field and in a known array, a depth bomb, numbers at the
limits, NUL and lone surrogates in strings and keys, a bidi control, a key given twice. Each case
names the status and the start of the error it expects; after each bomb the server's peak RSS
(VmHWM) may have grown by at most 64 MB + 4x the body. Prints one line per problem and, last,
"cases N problems M".

usage: json_bodies.py ingest|web BASE_URL PID TOKEN [ADMIN_TOKEN]"""
import http.client
import json
import sys
import urllib.parse

KIND, BASE, PID, TOKEN = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
ADMIN = sys.argv[5] if len(sys.argv) > 5 else TOKEN
U = urllib.parse.urlsplit(BASE)
problems = []
cases = 0


def hwm():
    with open(f"/proc/{PID}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def req(method, path, body, token):
    c = http.client.HTTPConnection(U.hostname, U.port, timeout=120)
    c.request(method, path, body=body, headers={"Authorization": "Bearer " + token,
                                                "Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read().decode("utf-8", "replace")
    c.close()
    return r.status, data


def error_of(data):
    try:
        return json.loads(data).get("error", "")
    except ValueError:
        return "(not JSON) " + data[:80]


def case(name, ep, body, status, error=None, bomb=False):
    """status: an int or a set; error: the start of the error, or a substring after '~'."""
    global cases
    cases += 1
    before = hwm()
    try:
        st, data = req(ep["method"], ep["path"], body, ep["token"])
    except Exception as e:  # noqa: BLE001 - any failure to answer is a problem
        problems.append(f"{ep['name']}: {name}: no answer ({e})")
        return
    want = status if isinstance(status, set) else {status}
    err = error_of(data) if st >= 400 else ""
    if st not in want:
        problems.append(f"{ep['name']}: {name}: status {st}, expected {sorted(want)}: {data[:200]}")
    elif error and st >= 400:
        ok = error[1:] in err if error.startswith("~") else err.startswith(error)
        if not ok:
            problems.append(f"{ep['name']}: {name}: error {err[:200]!r}, expected {error!r}")
    if st >= 500 and "ERROR" in data:
        problems.append(f"{ep['name']}: {name}: the database's message in a 5xx: {data[:200]}")
    if bomb:
        grown = hwm() - before
        if grown > (64 << 20) + 4 * len(body):
            problems.append(f"{ep['name']}: {name}: peak RSS grew by {grown >> 20} MB for a body of "
                            f"{len(body) >> 20} MB")


def with_member(base, key, raw):
    """base (a JSON object text) with the member "key": raw (raw JSON text) first."""
    return ("{" + json.dumps(key) + ":" + raw + ("," + base[1:] if base.strip() != "{}" else "}")).encode()


def bomb_array(unit, size):
    n = size // (len(unit) + 1)
    return "[" + ",".join([unit] * n) + "]"


def endpoints():
    uid = "5f0c6f0e-3d0b-4a53-9a43-6d1c2f0a9b1"
    if KIND == "ingest":
        stream = {"v": 1, "stream_id": uid + "1", "host": "h", "app": "jb",
                  "symptom": {"kind": "unit_violation", "tid": 1, "start_ns": 1000, "end_ns": 2000},
                  "frames": ["app!main", "libc!wait"], "stacks": [[0, 1]],
                  "events": [{"kind": "wait", "tid": 1, "ts_ns": 1000, "dur_ns": 500, "stack": 0}]}
        report = {"v": 1, "host": "h", "exe": "/bin/x", "mode": "guard", "agent_version": "1",
                  "pid": 7, "started_ns": 1000}
        return [
            # streams ignore unknown fields (wire format) and allocate nothing per value
            {"name": "streams", "method": "POST", "path": "/api/v1/streams", "token": TOKEN,
             "body": stream, "ok": {200}, "closed": False, "array": "frames", "str": "host",
             "num": "events", "numpath": None, "open_bomb_ok": True},
            {"name": "report", "method": "POST", "path": "/api/v1/agents/report", "token": TOKEN,
             "body": report, "ok": {200}, "closed": False, "array": None, "str": "exe", "num": "units",
             "open_bomb_ok": False},
            {"name": "profiles", "method": "POST", "path": "/api/v1/profiles", "token": TOKEN,
             "body": {"v": 1, "host": "h", "pid": 7, "started_ns": 1000, "profile": {"format": "x"}},
             "ok": {400}, "closed": False, "array": None, "str": "host", "num": "pid",
             "open_bomb_ok": False},
        ]
    return [
        {"name": "runs", "method": "POST", "path": "/api/v1/runs", "token": TOKEN,
         "body": {"app": "jb", "threshold_ns": 100}, "ok": {202}, "closed": True, "array": "include",
         "str": "app", "num": "threshold_ns"},
        {"name": "signatures", "method": "POST", "path": "/api/v1/signatures", "token": TOKEN,
         "body": {"name": "jb", "frames": ["app!main"]}, "ok": {201, 409}, "closed": True,
         "array": "frames", "str": "name", "num": "from_cluster"},
        {"name": "signatures/import", "method": "POST", "path": "/api/v1/signatures/import", "token": TOKEN,
         "body": {"version": 1, "signatures": [{"name": "jbi", "frames": ["app!x"]}]}, "ok": {200},
         "closed": True, "array": "signatures", "str": None, "num": "version"},
        {"name": "signatures/1 PATCH", "method": "PATCH", "path": "/api/v1/signatures/1", "token": TOKEN,
         "body": {"note": "n"}, "ok": {200, 404}, "closed": True, "array": None, "str": "note", "num": None},
        {"name": "schedules", "method": "POST", "path": "/api/v1/schedules", "token": ADMIN,
         "body": {"app": "jb", "kind": "wait", "every_s": 3600, "window_s": 3600}, "ok": {201},
         "closed": True, "array": None, "str": "app", "num": "every_s"},
        {"name": "alert-rules", "method": "POST", "path": "/api/v1/alert-rules", "token": ADMIN,
         "body": {"name": "jb", "type": "new_cluster", "min_share": 0.5, "webhook": "http://example.com/x"},
         "ok": {201}, "closed": True, "array": None, "str": "name", "num": "min_share"},
        {"name": "agent-settings", "method": "POST", "path": "/api/v1/agent-settings", "token": ADMIN,
         "body": {"app": "jb", "k": 3}, "ok": {200}, "closed": True, "array": None, "str": "note",
         "num": "sample_hz"},
        {"name": "tokens", "method": "POST", "path": "/api/v1/tokens", "token": ADMIN,
         "body": {"role": "analyst", "name": "jb"}, "ok": {201}, "closed": True, "array": None,
         "str": "name", "num": None},
    ]


SIZE = 2 << 20
for ep in endpoints():
    base = json.dumps(ep["body"])
    # the endpoint works at all
    case("a valid body", ep, base.encode(), ep["ok"])
    # node bombs in an unknown field: refused by the budget, or (streams: skipped unread) accepted
    for unit in ("{}", "[]"):
        body = with_member(base, "zz_unknown", bomb_array(unit, SIZE))
        if ep.get("open_bomb_ok"):
            case(f"a bomb of {unit} in an unknown field", ep, body, ep["ok"], bomb=True)
        else:
            case(f"a bomb of {unit} in an unknown field", ep, body, 400, "~body: more than", bomb=True)
    # a node bomb in a known array
    if ep["array"]:
        body = json.dumps(dict(ep["body"], **{ep["array"]: ["@"]})).replace('["@"]', bomb_array("{}", SIZE))
        case("a bomb of {} in " + ep["array"], ep, body.encode(), 400, None, bomb=True)
    # depth
    case("a depth bomb", ep, with_member(base, "zz_unknown", "[" * 100000 + "]" * 100000), 400,
         "~nested deeper than", bomb=True)
    # unknown field where the contract is closed
    if ep["closed"]:
        case("an unknown field", ep, with_member(base, "zz_unknown", "1"), 400, "zz_unknown: unknown field")
    # NUL, lone surrogates, in a value and in a key
    if ep["str"]:
        for raw, why in (('"a\\u0000b"', "NUL"), ('"a\\ud800"', "lone high surrogate"),
                         ('"a\\udc00"', "lone low surrogate")):
            body = json.dumps(dict(ep["body"], **{ep["str"]: "@@"})).replace('"@@"', raw)
            case(f"{why} in {ep['str']}", ep, body.encode(), 400, f"~{why}")
    case("NUL in a key", ep, with_member(base, "a\\u0000b", "1").replace(b"\\\\u0000", b"\\u0000"), 400,
         "~NUL")
    # a key given twice
    first = next(iter(ep["body"]))
    case(f"{first} given twice", ep, with_member(base, first, json.dumps(ep["body"][first])), 400,
         f"~{first}: duplicate key")
    # numbers at the limits: never a 5xx (each field says what it takes)
    if ep["num"]:
        for n in ("9223372036854775807", "9223372036854775808", "-1", "1e400", "-0"):
            body = json.dumps(dict(ep["body"], **{ep["num"]: "@@"})).replace('"@@"', n)
            st_ok = set(range(200, 500)) - {401, 403, 413}
            case(f"{ep['num']} = {n}", ep, body.encode(), st_ok)
        body = json.dumps(dict(ep["body"], **{ep["num"]: "@@"})).replace('"@@"', "1e400")
        if ep["name"] not in ("streams",):
            case(f"{ep['num']} = 1e400 refused", ep, body.encode(), 400, f"~{ep['num']}")
    # a bidi control (U+202E) is text like any other: accepted as the valid body is
    if ep["str"]:
        body = json.dumps(dict(ep["body"], **{ep["str"]: "x\u202ey"}), ensure_ascii=False).encode()
        case(f"U+202E in {ep['str']}", ep, body, ep["ok"] | {409})

# the report's collector (host or process): everything else is refused, naming the field; a long value
# is measured like a bomb (the server must not grow with it)
if KIND == "ingest":
    ep = next(e for e in endpoints() if e["name"] == "report")
    for raw, why, err in (('"host\\u0000"', "NUL", "~NUL"), ('"host\\ud800"', "a lone surrogate", "~surrogate"),
                          ('"host\u202e"', "a bidi control", "collector: must be host or process"),
                          ('"' + "h" * (4 << 20) + '"', "4 MB", "~"), ('7', "a number", "~collector"),
                          ('["host"]', "an array", "~collector"), ('"HOST"', "another case",
                                                                  "collector: must be host or process")):
        body = json.dumps(dict(ep["body"], collector="@@")).replace('"@@"', raw)
        case(f"collector: {why}", ep, body.encode(), {400, 413}, err, bomb=True)
    body = json.dumps(dict(ep["body"], collector="host")).encode()
    case("collector: host", ep, body, 200)

for p in problems:
    print("  " + p)
print(f"cases {cases} problems {len(problems)}")
