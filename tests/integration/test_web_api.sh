#!/usr/bin/env bash
# web API: every REST endpoint of sm-web (../shared/spec/rest.md) against
# hand-built streams stored by the real sm-ingest and a run mined by sm-web's
# embedded worker: exact costs, counts, ranks and frame names (a hostile frame
# name and non-ASCII ones round-trip through JSON exactly), exact error bodies
# and status codes, authentication (bearer, cookie with the cross-site token,
# revoked tokens, anonymous reads), body limits, and the security headers of
# every answer.
. "$(dirname "$0")/../lib.sh"

PY=/usr/bin/python3
CSP="default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
# frame names that must come back exactly: HTML/JS metacharacters and quotes; non-ASCII with a backslash
HOSTILE=$'app!std::map<K, V>::find&"\'<script>alert(1)</script>'
UNI=$'app!überprüfe<日本語>\\路径 ✓'
export HOSTILE UNI
SA=11111111-1111-4111-8111-111111111111
SB=22222222-2222-4222-8222-222222222222
SC=33333333-3333-4333-8333-333333333333
SD=44444444-4444-4444-8444-444444444444

sm_admin migrate >/dev/null || t_bail "migrate"
INGEST=$(mk_token ingest 2>/dev/null)
ANALYST=$(mk_token analyst 2>/dev/null)
ADMIN=$(mk_token admin 2>/dev/null)
[ -n "$INGEST" ] && [ -n "$ANALYST" ] && [ -n "$ADMIN" ] || t_bail "tokens"
AN=(-H "Authorization: Bearer $ANALYST")
AD=(-H "Authorization: Bearer $ADMIN")
JS=(-H 'Content-Type: application/json')

# j EXPR: EXPR (Python, j = the last answer's JSON, E = the environment) printed:
# strings as they are, anything else as compact JSON (non-ASCII unescaped; with
# JSORT=1 objects' keys sorted). The body must be UTF-8 JSON.
j() {
	"$PY" -c '
import json, os, sys
E = os.environ
try:
    j = json.loads(sys.stdin.buffer.read().decode("utf-8", errors="strict"))
except ValueError as e:
    print("<not UTF-8 JSON: %s>" % e)
    sys.exit(0)
try:
    v = eval(sys.argv[1])
except Exception as e:
    print("<%s: %s>" % (type(e).__name__, e))
    sys.exit(0)
print(v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, separators=(",", ":"),
                                              sort_keys=E.get("JSORT") == "1"))
' "$1" <<<"$HTTP_BODY"
}

# api METHOD PATH [CURL ARGS]: http against sm-web; every answer must carry the
# security headers, and those of the API JSON (checked once at the end over all)
HDR_N=0
HDR_BAD=
api() {
	local m=$1 p=$2 h
	shift 2
	http "$m" "$WEB_URL$p" "$@"
	HDR_N=$((HDR_N + 1))
	h=${HTTP_HEADERS//$'\r'/}
	if ! grep -qxF "Content-Security-Policy: $CSP" <<<"$h" || ! grep -qxF 'X-Content-Type-Options: nosniff' <<<"$h" ||
		! grep -qxF 'X-Frame-Options: DENY' <<<"$h" || ! grep -qxF 'Cache-Control: no-store' <<<"$h" ||
		{ [[ $p == /api/* ]] && ! grep -qxF 'Content-Type: application/json' <<<"$h"; }; then
		HDR_BAD+="$m $p ($HTTP_STATUS); "
	fi
}
header() { # header NAME: the value of a header of the last answer
	local h=${HTTP_HEADERS//$'\r'/}
	grep -i "^$1: " <<<"$h" | head -n 1 | cut -d' ' -f2-
}
# t_err NAME STATUS MESSAGE: the last answer is exactly {"error": MESSAGE} with STATUS
t_err() {
	local want
	want=$("$PY" -c 'import json, sys; print(json.dumps({"error": sys.argv[1]}, ensure_ascii=False))' "$3")
	t_eq "$1" "$HTTP_STATUS $HTTP_BODY" "$2 $want"$'\n'
}

# ---- the streams: A, B, C of app webapp, D of otherapp, posted one at a time ----
# A, B, C: thread 1 waits (the symptom) on the hostile stack, woken by thread 2 (A, B) whose run
# on the non-ASCII stack overlaps it; thread 3 idles (outside the wait graph); C's thread 1 also
# waits 4000 ns in fsync, and its first wait has no readier (so its thread 2 is outside the AOI)
"$PY" - "$T_TMP" "$SA" "$SB" "$SC" "$SD" <<'EOF'
import json, os, sys
out, sa, sb, sc, sd = sys.argv[1:]
H, U = os.environ["HOSTILE"], os.environ["UNI"]
frames = ["app!main", H, "libc!futex_wait", U, "app!compute", "app!idle", "libc!epoll_wait", "app!disk", "libc!fsync"]
stacks = [[0, 1, 2], [0, 3, 4], [0, 5, 6], [0, 7, 8]]
def s(sid, host, ver, labels, wait, readier, extra=(), symptom_extra=None, build=None):
    sym = {"kind": "unit_violation", "tid": 1, "start_ns": 1000, "end_ns": 2000}
    sym.update(symptom_extra or {})
    ev = [{"kind": "wait", "tid": 1, "ts_ns": 1000, "dur_ns": wait, "stack": 0, "readier_tid": readier},
          {"kind": "run", "tid": 2, "ts_ns": 1100, "dur_ns": 300, "stack": 1},
          {"kind": "wait", "tid": 3, "ts_ns": 1000, "dur_ns": 900, "stack": 2, "readier_tid": 0}] + list(extra)
    o = {"v": 1, "stream_id": sid, "host": host, "app": "webapp", "labels": labels, "symptom": sym,
         "frames": frames, "stacks": stacks, "events": ev}
    if ver is not None:
        o["version"] = ver
    if build is not None:
        o["build_id"] = build
    return o
docs = {
    "a": s(sa, "h-alpha", "1.0", {"region": "eu", "tier": "web"}, 500, 2,
           symptom_extra={"unit_type": "u7", "threshold_ns": 500}, build="abc123"),
    "b": dict(s(sb, "h-beta", "1.0", {"region": "us"}, 600, 2),
              threads={"1": H[4:], "2": "überprüfer ✓", "77": "not in the stream"}),
    "c": s(sc, "h-beta", "2.0", {"region": "eu", "tier": "db"}, 700, 0,
           extra=[{"kind": "wait", "tid": 1, "ts_ns": 1800, "dur_ns": 4000, "stack": 3, "readier_tid": 0}]),
    "d": {"v": 1, "stream_id": sd, "host": "h-delta", "app": "otherapp", "weight": 2.5,
          "symptom": {"kind": "hang", "tid": 5, "start_ns": 0, "end_ns": 10},
          "frames": ["app!main"], "stacks": [[0]], "events": [{"kind": "run", "tid": 5, "ts_ns": 0, "dur_ns": 10, "stack": 0}]},
}
for k, o in docs.items():
    with open(os.path.join(out, k + ".json"), "w", encoding="utf-8") as f:
        f.write(json.dumps(o, ensure_ascii=(k == "a")))
EOF
start_ingest || t_bail "sm-ingest starts"
stored=
for k in a b c d; do
	[ "$k" = c ] && { sleep 0.05; T_MID=$(date +%s%N); sleep 0.05; }
	http POST "$INGEST_URL/api/v1/streams" -H "Authorization: Bearer $INGEST" "${JS[@]}" --data-binary "@$T_TMP/$k.json"
	stored+="$HTTP_STATUS $HTTP_BODY"
done
t_eq "four streams stored" "$stored" "$(printf '200 {"accepted":1,"duplicates":0,"rejected":[]}%.0s' 1 2 3 4)"
stop_ingest

start_web --auth-cache-ms 200 || t_bail "sm-web starts"

# ---- authentication of reads and writes ----
api GET /api/v1/streams
t_err "read without a token: 401" 401 "an analyst or admin token is required (Authorization: Bearer TOKEN)"
api GET /api/v1/streams -H "Authorization: Bearer $INGEST"
t_err "read with an ingest token: 401" 401 "an analyst or admin token is required (Authorization: Bearer TOKEN)"
api GET /api/v1/streams -H "Authorization: Bearer smk_not_a_real_token"
t_eq "read with an unknown token: 401" "$HTTP_STATUS" 401
api POST /api/v1/runs "${JS[@]}" --data-binary '{"app": "webapp"}'
t_err "write without a token: 401" 401 "an analyst or admin token is required"
api POST /api/v1/runs -H "Authorization: Bearer $INGEST" "${JS[@]}" --data-binary '{"app": "webapp"}'
t_err "write with an ingest token: 403" 403 "this token may not change anything (analyst or admin needed)"
t_eq "refused writes queued nothing" "$(pg_q "SELECT count(*) FROM runs")" 0
REVOKE=$(sm_admin token create --role analyst --name web-api-revoked 2>/dev/null)
api GET /api/v1/signatures -H "Authorization: Bearer $REVOKE"
t_eq "a fresh analyst token reads" "$HTTP_STATUS" 200
sm_admin token revoke "$(pg_q "SELECT id FROM tokens WHERE name = 'web-api-revoked'")" >/dev/null 2>&1
sleep 0.5   # past --auth-cache-ms
api GET /api/v1/signatures -H "Authorization: Bearer $REVOKE"
t_err "a revoked token: 401" 401 "an analyst or admin token is required (Authorization: Bearer TOKEN)"

# ---- GET streams ----
api GET /api/v1/streams "${AN[@]}"
t_eq "streams: newest first, total" "$HTTP_STATUS $(j '[s["stream_id"] for s in j["streams"]]') $(j 'j["total"]')" \
	"200 [\"$SD\",\"$SC\",\"$SB\",\"$SA\"] 4"
t_eq "streams: the fields of one" "$(JSORT=1 j '{k: v for k, v in j["streams"][3].items() if k != "received_at"}')" \
	"{\"app\":\"webapp\",\"events\":3,\"host\":\"h-alpha\",\"labels\":{\"region\":\"eu\",\"tier\":\"web\"},\"role\":\"violation\",\"stream_id\":\"$SA\",\"symptom\":{\"end_ns\":2000,\"kind\":\"unit_violation\",\"start_ns\":1000,\"threshold_ns\":500,\"tid\":1,\"unit_type\":\"u7\"},\"version\":\"1.0\",\"weight\":1}"
t_eq "streams: a sampled stream's weight" "$(j '[j["streams"][0]["weight"], j["streams"][0]["role"]]')" '[2.5,"violation"]'
t_eq "streams: absent version and symptom fields are null" \
	"$(j '[j["streams"][0]["version"], j["streams"][0]["labels"], j["streams"][0]["symptom"], j["streams"][1]["events"]]')" \
	'[null,{},{"kind":"hang","tid":5,"start_ns":0,"end_ns":10,"unit_type":null,"threshold_ns":null},4]'
t_match "streams: received_at in RFC 3339 UTC" "$(j 'j["streams"][0]["received_at"]')" \
	'^20[0-9]{2}-[01][0-9]-[0-3][0-9]T[0-2][0-9]:[0-5][0-9]:[0-5][0-9]\.[0-9]{6}Z$'
sl() { j '" ".join(s["stream_id"][:1] for s in j["streams"]) + " %d" % j["total"]'; }
api GET '/api/v1/streams?app=webapp&limit=2' "${AN[@]}"
t_eq "streams: app filter, limit" "$(sl)" "3 2 3"
api GET '/api/v1/streams?app=webapp&limit=2&offset=2' "${AN[@]}"
t_eq "streams: offset" "$(sl)" "1 3"
api GET '/api/v1/streams?host=h-beta' "${AN[@]}"
t_eq "streams: host filter" "$(sl)" "3 2 2"
api GET '/api/v1/streams?version=1.0' "${AN[@]}"
t_eq "streams: version filter" "$(sl)" "2 1 2"
api GET '/api/v1/streams?label.region=eu' "${AN[@]}"
t_eq "streams: label filter" "$(sl)" "3 1 2"
api GET '/api/v1/streams?label.region=eu&label.tier=db' "${AN[@]}"
t_eq "streams: two label filters" "$(sl)" "3 1"
api GET "/api/v1/streams?since=$T_MID" "${AN[@]}"
t_eq "streams: since (ns)" "$(sl)" "4 3 2"
api GET "/api/v1/streams?until=$T_MID" "${AN[@]}"
t_eq "streams: until (ns)" "$(sl)" "2 1 2"
api GET '/api/v1/streams?since=2000-01-01T00:00:00Z&until=2000-01-02T00:00:00Z' "${AN[@]}"
t_eq "streams: an RFC 3339 range with nothing in it" "$HTTP_BODY" $'{"streams": [], "total": 0, "more": false}\n'
# counted up to 10,000 (an app's million streams took 300 ms to count on every page of them)
pg_q "INSERT INTO streams (stream_id, host, app, labels, symptom_kind, symptom_tid, symptom_start_ns, symptom_end_ns,
	n_events, received_at, role, weight)
      SELECT gen_random_uuid(), 'h-many', 'many', '{}', 'hang', 1, 0, 10, 1, now(), 'violation', 1
      FROM generate_series(1, 10001)" >/dev/null
api GET '/api/v1/streams?app=many&limit=3' "${AN[@]}"
t_eq "streams: past 10,000, the count stops and says so" "$HTTP_STATUS $(j '[len(j["streams"]), j["total"], j["more"]]')" "200 [3,10000,true]"
api GET '/streams?app=many' "${AN[@]}"
t_eq "streams page: past 10,000, its pager says so and goes on" \
	"$HTTP_STATUS $(grep -o '<span>1–50 of more than 10,000</span>' <<<"$HTTP_BODY") $(grep -c 'rel="next"' <<<"$HTTP_BODY")" \
	"200 <span>1–50 of more than 10,000</span> 1"
pg_q "DELETE FROM streams WHERE app = 'many' AND id > (SELECT min(id) + 1 FROM streams WHERE app = 'many')" >/dev/null
api GET '/api/v1/streams?app=many' "${AN[@]}"
t_eq "streams: under it, exact" "$(j '[j["total"], j["more"]]')" "[2,false]"
pg_q "DELETE FROM streams WHERE app = 'many'" >/dev/null
api GET '/api/v1/streams?hots=h-beta' "${AN[@]}"
t_err "streams: unknown parameter named" 400 "hots: unknown parameter"
api GET '/api/v1/streams?limit=0' "${AN[@]}"
t_err "streams: limit 0" 400 "limit: must be a whole number from 1 to 1000"
api GET '/api/v1/streams?limit=1001' "${AN[@]}"
t_err "streams: limit 1001" 400 "limit: must be a whole number from 1 to 1000"
api GET '/api/v1/streams?limit=ten' "${AN[@]}"
t_err "streams: limit not a number" 400 "limit: must be a whole number from 1 to 1000"
api GET '/api/v1/streams?offset=-1' "${AN[@]}"
t_err "streams: negative offset" 400 "offset: must be a whole number from 0 to 1000000000"
api GET '/api/v1/streams?since=yesterday' "${AN[@]}"
t_err "streams: bad since" 400 "since: an RFC 3339 time or nanoseconds since the epoch"
# error messages quoting what was sent stay UTF-8 JSON (bytes that are not, or cut in the middle of a character)
api GET '/api/v1/streams?%ff=1' "${AN[@]}"
t_eq "streams: a parameter name that is not UTF-8: 400, UTF-8 JSON" "$HTTP_STATUS $(j 'j["error"].endswith(": a query parameter must be UTF-8")')" "400 true"
LONG=$(printf 'a%.0s' $(seq 63))
api GET "/api/v1/streams?${LONG}%C3%A9=1" "${AN[@]}"
t_eq "streams: a long unknown parameter: 400, UTF-8 JSON" "$HTTP_STATUS $(j 'j["error"].startswith("a" * 63) and j["error"].endswith(": unknown parameter")')" "400 true"

# ---- the streams' order (sort, dir), role and time range (range) ----
# A, B, C: 1000 ns delays, 3, 3 and 4 events; D: 10 ns, 1 event; received A, B, C, D; equal keys newest first
api GET '/api/v1/streams?sort=events' "${AN[@]}"
t_eq "streams: sort=events, the most first, ties newest first" "$(sl)" "3 2 1 4 4"
api GET '/api/v1/streams?sort=events&dir=asc' "${AN[@]}"
t_eq "streams: sort=events&dir=asc" "$(sl)" "4 2 1 3 4"
api GET '/api/v1/streams?sort=delay&dir=asc' "${AN[@]}"
t_eq "streams: sort=delay&dir=asc" "$(sl)" "4 3 2 1 4"
api GET '/api/v1/streams?sort=host' "${AN[@]}"
t_eq "streams: sort=host, A to Z by default" "$(sl)" "1 3 2 4 4"
api GET '/api/v1/streams?sort=host&dir=desc' "${AN[@]}"
t_eq "streams: sort=host&dir=desc" "$(sl)" "4 3 2 1 4"
api GET '/api/v1/streams?sort=host&limit=2&offset=2' "${AN[@]}"
t_eq "streams: a later page keeps the order" "$(sl)" "2 4 4"
api GET '/api/v1/streams?sort=received&dir=asc' "${AN[@]}"
t_eq "streams: sort=received&dir=asc" "$(sl)" "1 2 3 4 4"
pg_q "UPDATE streams SET role = 'baseline' WHERE stream_id = '$SB'" >/dev/null
api GET '/api/v1/streams?role=baseline' "${AN[@]}"
t_eq "streams: role=baseline" "$(sl)" "2 1"
api GET '/api/v1/streams?role=violation&app=webapp' "${AN[@]}"
t_eq "streams: role=violation" "$(sl)" "3 1 2"
api GET '/api/v1/streams?sort=role' "${AN[@]}"
t_eq "streams: sort=role, baseline first" "$(sl)" "2 4 3 1 4"
api GET '/streams?sort=role&dir=desc' "${AN[@]}"
t_eq "streams page: sorted by role, descending, aria-sort on its header" \
	"$HTTP_STATUS $(grep -o 'aria-sort="[a-z]*"><a href="[^"]*" data-sort="[a-z]*"' <<<"$HTTP_BODY")" \
	'200 aria-sort="descending"><a href="?sort=role&amp;dir=asc" data-sort="role"'
t_eq "streams page: the rows in that order, the baseline last" \
	"$(grep -o 'href="/streams/[0-9a-f-]*"' <<<"$HTTP_BODY" | cut -c16 | tr '\n' ' ')" "4 3 1 2 "
t_eq "streams page: the baseline stream's role marked" \
	"$(grep -c '<span class="role baseline">baseline</span>' <<<"$HTTP_BODY")" 1
api GET '/streams?role=baseline&sort=events&dir=asc&offset=0' "${AN[@]}"
t_eq "streams page: the range presets keep the filters and the order" \
	"$(grep -o 'href="?range=24h[^"]*"' <<<"$HTTP_BODY")" 'href="?range=24h&amp;role=baseline&amp;sort=events&amp;dir=asc"'
pg_q "UPDATE streams SET role = 'violation' WHERE stream_id = '$SB'" >/dev/null
api GET '/api/v1/streams?range=1h' "${AN[@]}"
t_eq "streams: range=1h" "$(sl)" "4 3 2 1 4"
api GET '/api/v1/streams?range=all&sort=received&dir=asc&limit=1' "${AN[@]}"
t_eq "streams: range=all" "$(sl)" "1 4"
pg_q "UPDATE streams SET received_at = received_at - interval '2 hours' WHERE stream_id = '$SA'" >/dev/null
api GET '/api/v1/streams?range=1h' "${AN[@]}"
t_eq "streams: range=1h leaves out a stream of 2 hours ago" "$(sl)" "4 3 2 3"
api GET '/streams?range=1h' "${AN[@]}"
t_eq "streams page: range=1h, its preset marked" \
	"$(grep -o 'href="/streams/[0-9a-f-]*"' <<<"$HTTP_BODY" | wc -l) $(grep -o 'data-range="[a-z0-9]*" aria-current' <<<"$HTTP_BODY")" \
	'3 data-range="1h" aria-current'
FROM=$(pg_q "SELECT to_char((SELECT received_at FROM streams WHERE stream_id = '$SA') AT TIME ZONE 'UTC' - interval '1 minute', 'YYYY-MM-DD\"T\"HH24:MI')")
TO=$(pg_q "SELECT to_char((SELECT received_at FROM streams WHERE stream_id = '$SA') AT TIME ZONE 'UTC' + interval '1 minute', 'YYYY-MM-DD\"T\"HH24:MI')")
api GET "/streams?from=$FROM&to=$TO" "${AN[@]}"
t_eq "streams page: from and to (datetime-local, UTC) hold only A" \
	"$HTTP_STATUS $(grep -o 'href="/streams/[0-9a-f-]*"' <<<"$HTTP_BODY" | cut -c16 | tr '\n' ' ')" "200 1 "
pg_q "UPDATE streams SET received_at = received_at + interval '2 hours' WHERE stream_id = '$SA'" >/dev/null
api GET '/api/v1/streams?sort=cost' "${AN[@]}"
t_err "streams: an unknown sort" 400 "sort: must be received, host, app, version, delay, events or role"
api GET '/api/v1/streams?sort=host&dir=up' "${AN[@]}"
t_err "streams: a bad dir" 400 "dir: must be asc or desc"
api GET '/api/v1/streams?role=admin' "${AN[@]}"
t_err "streams: a bad role" 400 "role: must be violation or baseline"
api GET '/api/v1/streams?range=2h' "${AN[@]}"
t_err "streams: a bad range" 400 "range: must be 1h, 24h, 7d or all"
api GET "/api/v1/streams?range=24h&since=$T_MID" "${AN[@]}"
t_err "streams: range and since" 400 "range: give either range or since/until, not both"
api GET "/api/v1/streams?since=$T_MID&until=$T_MID" "${AN[@]}"
t_err "streams: until not after since" 400 "until: must be after since"
api GET '/streams?from=2026-11-29&to=2026-11-30T00:00' "${AN[@]}"
t_eq "streams page: a bad from: 400, the error line names it" \
	"$HTTP_STATUS $(grep -o '<p class="error" role="alert">[^<]*</p>' <<<"$HTTP_BODY") $(grep -c '<table class="streams"' <<<"$HTTP_BODY")" \
	'400 <p class="error" role="alert">from: a date and time such as 2026-11-29T14:00 (UTC)</p> 0'
api GET '/streams?from=2026-11-30T00:00&to=2026-11-29T00:00' "${AN[@]}"
t_eq "streams page: to before from: 400" \
	"$HTTP_STATUS $(grep -o '<p class="error" role="alert">[^<]*</p>' <<<"$HTTP_BODY")" \
	'400 <p class="error" role="alert">to: must be after from</p>'
api GET '/streams?range=1h&from=2026-11-30T00:00' "${AN[@]}"
t_eq "streams page: a preset and from: 400" \
	"$HTTP_STATUS $(grep -o '<p class="error" role="alert">[^<]*</p>' <<<"$HTTP_BODY")" \
	'400 <p class="error" role="alert">range: give either range or from/to, not both</p>'
api GET '/streams?sort=cost' "${AN[@]}"
t_eq "streams page: an unknown sort: 400" "$HTTP_STATUS $(grep -o '<p class="error" role="alert">[^<]*</p>' <<<"$HTTP_BODY")" \
	'400 <p class="error" role="alert">sort: must be received, host, app, version, delay, events or role</p>'

# ---- GET streams/{uuid} ----
# events resolved: kind tid ts dur frames readier aoi
ev() { j '";".join("%s %d %d %d %s %s %s" % (e["kind"], e["tid"], e["ts_ns"], e["dur_ns"], ">".join(j["stacks"][e["stack"]]), e.get("readier_tid", "-"), "T" if e["aoi"] else "F") for e in j["events"])'; }
api GET "/api/v1/streams/$SA" "${AN[@]}"
t_eq "stream: the fields" "$HTTP_STATUS $(JSORT=1 j '{k: v for k, v in j.items() if k not in ("received_at", "stacks", "events")}')" \
	"200 {\"aoi_mode\":\"waitgraph\",\"app\":\"webapp\",\"build_id\":\"abc123\",\"event_count\":3,\"events_truncated\":false,\"host\":\"h-alpha\",\"labels\":{\"region\":\"eu\",\"tier\":\"web\"},\"role\":\"violation\",\"stream_id\":\"$SA\",\"symptom\":{\"end_ns\":2000,\"kind\":\"unit_violation\",\"start_ns\":1000,\"threshold_ns\":500,\"tid\":1,\"unit_type\":\"u7\"},\"version\":\"1.0\",\"weight\":1}"
t_eq "stream: three distinct stacks, frames outermost first" "$(j 'sorted(j["stacks"])')" \
	"$(j 'sorted([["app!main", E["HOSTILE"], "libc!futex_wait"], ["app!main", E["UNI"], "app!compute"], ["app!main", "app!idle", "libc!epoll_wait"]])')"
t_eq "stream: events by time, waitgraph AOI" "$(ev)" \
	"wait 1 1000 500 app!main>$HOSTILE>libc!futex_wait 2 T;wait 3 1000 900 app!main>app!idle>libc!epoll_wait 0 F;run 2 1100 300 app!main>$UNI>app!compute - T"
# the events' objects are written whole (streams.c event_json()): exactly as the JSON writer writes
t_eq "stream: the events' exact JSON text, a wait's and a run's" \
	"$(grep -oE '"events": \[\{"kind": "wait", "tid": 1, "ts_ns": 1000, "dur_ns": 500, "stack": [0-2], "readier_tid": 2, "aoi": true\}, \{"kind": "wait", "tid": 3, "ts_ns": 1000, "dur_ns": 900, "stack": [0-2], "readier_tid": 0, "aoi": false\}, \{"kind": "run", "tid": 2, "ts_ns": 1100, "dur_ns": 300, "stack": [0-2], "aoi": true\}\]\}$' <<<"$HTTP_BODY" | wc -l)" 1
t_eq "stream: the hostile frame's exact JSON text" "$(grep -cF '"app!std::map<K, V>::find&\"'"'"'<script>alert(1)</script>"' <<<"$HTTP_BODY")" 1
t_eq "stream: non-ASCII and backslash exact JSON text" "$(grep -cF '"app!überprüfe<日本語>\\路径 ✓"' <<<"$HTTP_BODY")" 1
# a stream past the 200,000 events a page reads, one of exactly 200,000, one of none; their chunks
# written here in time's reverse order (so the page sorts them), the kinds alternating
pg_q "WITH s AS (INSERT INTO streams (stream_id, host, app, symptom_kind, symptom_tid, symptom_start_ns,
	symptom_end_ns, n_events) VALUES ('00000000-0000-4000-8000-00000000b201', 'h-big', 'bigapp', 'hang', 1, 0, 10, 200001),
	('00000000-0000-4000-8000-00000000b200', 'h-big', 'bigapp', 'hang', 1, 0, 10, 200000),
	('00000000-0000-4000-8000-00000000b000', 'h-big', 'bigapp', 'hang', 1, 0, 10, 0) RETURNING id, n_events, received_at)
	INSERT INTO event_chunks (stream_ref, received_at, first_seq, stack_ids, data)
	SELECT id, received_at, k * 1024, ARRAY[(SELECT min(id) FROM stacks)]::int[],
	       string_agg(sm_event_record(CASE WHEN i % 2 = 0 THEN 'w' ELSE 'r' END::\"char\", 1, 1000000000 - i, 5, (SELECT min(id) FROM stacks), 2), ''::bytea ORDER BY i)
	FROM s, generate_series(0, s.n_events - 1) i, LATERAL (SELECT i / 1024 AS k) c
	GROUP BY id, received_at, k" >/dev/null || t_bail "the big streams' chunks"
api GET /api/v1/streams/00000000-0000-4000-8000-00000000b201 "${AN[@]}"
t_eq "stream of 200,001 events: the first 200,000 by time, cut and said so" \
	"$HTTP_STATUS $(j '[j["event_count"], j["events_truncated"], len(j["events"]), j["events"][0]["ts_ns"], j["events"][-1]["ts_ns"], len(j["stacks"]), j["events"][1]["kind"], "readier_tid" in j["events"][1], j["events"][0]["readier_tid"]]')" \
	"200 [200001,true,200000,999800000,999999999,1,\"run\",false,2]"
api GET /streams/00000000-0000-4000-8000-00000000b201 "${AN[@]}"
t_eq "stream page of 200,001 events: says only the first are shown" "$HTTP_STATUS $(grep -c '(first 200,000 shown)' <<<"$HTTP_BODY")" "200 1"
api GET /api/v1/streams/00000000-0000-4000-8000-00000000b200 "${AN[@]}"
t_eq "stream of exactly 200,000 events: all of them, not cut" \
	"$HTTP_STATUS $(j '[j["event_count"], j["events_truncated"], len(j["events"]), j["events"][0]["ts_ns"], j["events"][-1]["ts_ns"]]')" \
	"200 [200000,false,200000,999800001,1000000000]"
api GET /streams/00000000-0000-4000-8000-00000000b200 "${AN[@]}"
t_eq "stream page of exactly 200,000 events: nothing said cut" "$HTTP_STATUS $(grep -c 'first 200,000 shown' <<<"$HTTP_BODY")" "200 0"
api GET /api/v1/streams/00000000-0000-4000-8000-00000000b000 "${AN[@]}"
t_eq "stream of no event: empty lists" "$HTTP_STATUS $(j '[j["event_count"], j["events_truncated"], j["events"], j["stacks"]]')" "200 [0,false,[],[]]"
api GET /streams/00000000-0000-4000-8000-00000000b000 "${AN[@]}"
t_eq "stream page of no event: answered" "$HTTP_STATUS $(grep -c '<h2>Timeline</h2>' <<<"$HTTP_BODY")" "200 1"
# a stream one of whose events names a stack the stacks table does not hold (a chunk written by
# hand, a stack lost): the event stays, with no frames; the profile leaves it out; the page answers
pg_q "WITH s AS (INSERT INTO streams (stream_id, host, app, symptom_kind, symptom_tid, symptom_start_ns,
	symptom_end_ns, n_events) VALUES ('00000000-0000-4000-8000-00000000b404', 'h-big', 'bigapp', 'hang', 1, 0, 10, 2)
	RETURNING id, received_at), k AS (SELECT min(id) AS have, max(id) + 1000 AS lost FROM stacks)
	INSERT INTO event_chunks (stream_ref, received_at, first_seq, stack_ids, data)
	SELECT id, received_at, 0, ARRAY[have, lost],
	       sm_event_record('w', 1, 100, 50, lost, 0) || sm_event_record('r', 2, 200, 60, have, 0)
	FROM s, k" >/dev/null || t_bail "the stream of a lost stack"
api GET /api/v1/streams/00000000-0000-4000-8000-00000000b404 "${AN[@]}"
t_eq "stream with a lost stack: both events, the lost one's stack empty" \
	"$HTTP_STATUS $(j '[j["event_count"], [(e["kind"], e["ts_ns"], e["dur_ns"], len(j["stacks"][e["stack"]])) for e in j["events"]], len(j["stacks"])]')" \
	"200 [2,[[\"wait\",100,50,0],[\"run\",200,60,$(pg_q "SELECT cardinality(frame_ids) FROM stacks ORDER BY id LIMIT 1")]],2]"
# (a profile is no JSON: asked past api(), whose every answer is checked for it)
http GET "$WEB_URL/api/v1/streams/00000000-0000-4000-8000-00000000b404/profile?format=folded" "${AN[@]}"
t_eq "stream with a lost stack: its profile holds the other event alone" "$HTTP_STATUS $(printf %s "$HTTP_BODY" | wc -l) $(grep -c ' 60$' <<<"$HTTP_BODY")" "200 1 1"
t_eq "stream with a lost stack: the other event's line, exactly" "$HTTP_BODY" "$(pg_q "SELECT string_agg(f.name, ';' ORDER BY u.o) FROM stacks s, unnest(s.frame_ids) WITH ORDINALITY u(fid, o) JOIN frames f ON f.id = u.fid WHERE s.id = (SELECT min(id) FROM stacks)") 60"$'\n'
api GET /streams/00000000-0000-4000-8000-00000000b404 "${AN[@]}"
t_eq "stream page with a lost stack: both events drawn, the lost one's with no frames" \
	"$HTTP_STATUS $(python3 -c 'import re, sys; print(" ".join(sorted("%s:%s" % (m.group(1), "frames" if "!" in m.group(2) else "none") for m in re.finditer(r"<title>(wait tid 1|run tid 2)\n(.*?)</title>", sys.stdin.read(), re.S))))' <<<"$HTTP_BODY")" \
	"200 run tid 2:frames wait tid 1:none"
# a damaged chunk: a record cut short is refused by the table itself; a record of a kind neither 'w'
# nor 'r' makes the stream's API, page and profile a 500 that names no cause (the log says which);
# other streams answer
pg_q "INSERT INTO streams (stream_id, host, app, symptom_kind, symptom_tid, symptom_start_ns, symptom_end_ns, n_events)
	VALUES ('00000000-0000-4000-8000-00000000bad1', 'h-big', 'bigapp', 'hang', 1, 0, 10, 2)" >/dev/null
t_eq "a chunk of a record cut short: refused by the table" \
	"$(pg_q "INSERT INTO event_chunks (stream_ref, received_at, first_seq, stack_ids, data)
	SELECT id, received_at, 0, '{1}', substring(sm_event_record('w', 1, 100, 50, 1, 0) FROM 1 FOR 20)
	FROM streams WHERE stream_id = '00000000-0000-4000-8000-00000000bad1'" 2>&1 | grep -o 'violates check constraint')" \
	"violates check constraint"
pg_q "INSERT INTO event_chunks (stream_ref, received_at, first_seq, stack_ids, data)
	SELECT id, received_at, 0, ARRAY[(SELECT min(id) FROM stacks)],
	       sm_event_record('r', 1, 100, 50, 1, 0) || overlay(sm_event_record('r', 1, 200, 50, 1, 0) PLACING '\\x78'::bytea FROM 29)
	FROM streams WHERE stream_id = '00000000-0000-4000-8000-00000000bad1'" >/dev/null || t_bail "the stream of a damaged chunk"
n0=$(grep -c "a chunk of the stream's events is damaged" "$WEB_LOG")
api GET "/api/v1/streams/00000000-0000-4000-8000-00000000bad1" "${AN[@]}"
t_eq "a damaged chunk: the stream's API a 500 that names no cause" "$HTTP_STATUS $HTTP_BODY" \
	'500 {"error": "internal error: the request failed on the server (its log says why)"}'$'\n'
api GET "/streams/00000000-0000-4000-8000-00000000bad1" "${AN[@]}"
t_match "a damaged chunk: its page a 500 too" "$HTTP_STATUS $HTTP_BODY" \
	'^500 .*<p class="error">The request failed on the server; its log says why.</p>'
http GET "$WEB_URL/api/v1/streams/00000000-0000-4000-8000-00000000bad1/profile?format=folded" "${AN[@]}"
t_eq "a damaged chunk: its profile a 500" "$HTTP_STATUS" 500
t_eq "a damaged chunk: the log says so, once an answer" \
	"$(($(grep -c "a chunk of the stream's events is damaged" "$WEB_LOG") - n0))" 3
api GET "/api/v1/streams/$SA" "${AN[@]}"
t_eq "after the damaged chunks, another stream answers" "$HTTP_STATUS $(j 'len(j["events"])')" "200 3"
pg_q "DELETE FROM event_chunks WHERE stream_ref IN (SELECT id FROM streams WHERE app = 'bigapp');
	DELETE FROM streams WHERE app = 'bigapp'" >/dev/null
api GET "/api/v1/streams/$SB" "${AN[@]}"
t_eq "stream: the names of its threads (only those it shows), exactly" "$(JSORT=1 j 'j["threads"]')" \
	"$(JSORT=1 j '{"1": E["HOSTILE"][4:], "2": "überprüfer ✓"}')"
api GET "/streams/$SB" "${AN[@]}"
# 46 characters fit the named gutter: the hostile name is cut to 27 and "…" before " (tid 1) (symptom)"
t_eq "stream page: the timeline's rows named, escaped, the symptom marked" \
	"$(grep -o '<text class="tid[^"]*" x="4" y="[0-9]*">[^<]*</text>' <<<"$HTTP_BODY")" \
	'<text class="tid symptom" x="4" y="18">std::map&lt;K, V&gt;::find&amp;&quot;&#39;&lt;scr… (tid 1) (symptom)</text>
<text class="tid" x="4" y="38">überprüfer ✓ (tid 2)</text>
<text class="tid" x="4" y="58">tid 3</text>'
api GET "/api/v1/streams/$SA?aoi=thread" "${AN[@]}"
t_eq "stream: thread AOI" "$(j 'j["aoi_mode"] + " " + "".join("T" if e["aoi"] else "F" for e in j["events"])')" "thread TFF"
api GET "/api/v1/streams/$SA?aoi=critical" "${AN[@]}"
t_eq "stream: critical AOI" "$(j 'j["aoi_mode"] + " " + "".join("T" if e["aoi"] else "F" for e in j["events"])')" "critical TFT"
api GET "/api/v1/streams/$SA?aoi=stream" "${AN[@]}"
t_eq "stream: stream AOI" "$(j 'j["aoi_mode"] + " " + "".join("T" if e["aoi"] else "F" for e in j["events"])')" "stream TTT"
api GET "/api/v1/streams/${SC^^}" "${AN[@]}"
t_eq "stream: an upper-case UUID, C's AOI without its unwoken thread 2" \
	"$HTTP_STATUS $(j 'j["stream_id"] + " " + "".join("T" if e["aoi"] else "F" for e in j["events"])')" "200 $SC TFFT"
api GET "/api/v1/streams/$SA?aoi=bogus" "${AN[@]}"
t_err "stream: bad aoi" 400 "aoi: must be waitgraph, thread, critical or stream"
api GET "/api/v1/streams/not-a-uuid" "${AN[@]}"
t_err "stream: not a UUID" 404 "stream 'not-a-uuid': no such stream (not a UUID)"
api GET "/api/v1/streams/99999999-9999-4999-8999-999999999999" "${AN[@]}"
t_err "stream: unknown UUID" 404 "stream 99999999-9999-4999-8999-999999999999: no such stream"
api GET "/api/v1/streams/${LONG}%C3%A9" "${AN[@]}"
t_eq "stream: a long non-UUID: 404, UTF-8 JSON" "$HTTP_STATUS $(j 'j["error"].startswith("stream ") and j["error"].endswith("no such stream (not a UUID)")')" "404 true"

# ---- POST runs, GET runs, GET runs/{id} ----
api POST /api/v1/runs "${AN[@]}" "${JS[@]}" --data-binary '{"app": "webapp", "threshold_ns": 500, "cut": 0.1}'
RUN=$(j 'j["run_id"]')
t_eq "run: 202 with its id" "$HTTP_STATUS $HTTP_BODY" "202 {\"run_id\": $RUN}"$'\n'
t_eq "run: Location" "$(header Location)" "/api/v1/runs/$RUN"
api POST /api/v1/runs "${AD[@]}" "${JS[@]}" --data-binary '{"app": "nosuchapp", "kind": "wait"}'
RUN0=$(j 'j["run_id"]')
t_eq "run: an admin token may start one too" "$HTTP_STATUS" 202
wait_run() { # wait_run ID: polls until done or failed (60 s); RUN_STATUS, and the run as the last answer
	local i
	RUN_STATUS=
	for i in $(seq 1 600); do
		api GET "/api/v1/runs/$1" "${AN[@]}"
		RUN_STATUS=$(j 'j["status"]')
		[ "$RUN_STATUS" = done ] || [ "$RUN_STATUS" = failed ] && break
		sleep 0.1
	done
}
wait_run "$RUN"
t_eq "run: mined by the embedded worker" "$RUN_STATUS" done
t_eq "run: the fields" "$(j 'sorted(j)')" \
	'["app","attempts","counts","created_at","error","finished_at","last_retry","params","phase","progress","run_id","started_at","status","timings_ms"]'
t_eq "run: done, its phase says so" "$(j '[j["phase"], j["progress"]["phase"]]')" '["done","done"]'
t_eq "run: values, the parameters with their defaults" "$(JSORT=1 j '[j["run_id"], j["status"], j["app"], j["error"], j["params"]]')" \
	"[$RUN,\"done\",\"webapp\",null,{\"aoi\":\"waitgraph\",\"app\":\"webapp\",\"baseline\":true,\"bootstrap\":200,\"cut\":0.1,\"exclude\":[],\"filter\":{},\"include\":[],\"kind\":\"both\",\"linkage\":\"average\",\"threshold_ns\":500}]"
t_eq "run: counts" "$(j '[j["counts"][k] for k in ("streams", "aoi_events", "distinct_stacks", "patterns", "clusters")]')" "[3,6,3,3,3]"
t_match "run: times" "$(j '[j["created_at"], j["started_at"], j["finished_at"], sorted(j["timings_ms"])]')" \
	'^\["[0-9-]+T[0-9:.]+Z","[0-9-]+T[0-9:.]+Z","[0-9-]+T[0-9:.]+Z",\[.*"mine".*\]\]$'
wait_run "$RUN0"
t_eq "run: the second one too" "$RUN_STATUS $(j 'j["counts"]["streams"]')" "done 0"
api GET /api/v1/runs "${AN[@]}"
t_eq "runs: newest first" "$HTTP_STATUS $(j '[[r["run_id"], r["status"], r["app"]] for r in j["runs"]]') $(j 'j["total"]')" \
	"200 [[$RUN0,\"done\",\"nosuchapp\"],[$RUN,\"done\",\"webapp\"]] 2"
api GET '/api/v1/runs?app=webapp&status=done' "${AN[@]}"
t_eq "runs: app and status filters" "$(j '[r["run_id"] for r in j["runs"]]') $(j 'j["total"]')" "[$RUN] 1"
api GET '/api/v1/runs?status=queued' "${AN[@]}"
t_eq "runs: nothing queued" "$HTTP_BODY" $'{"runs": [], "total": 0}\n'
api GET '/api/v1/runs?limit=1&offset=1' "${AN[@]}"
t_eq "runs: paged" "$(j '[r["run_id"] for r in j["runs"]]') $(j 'j["total"]')" "[$RUN] 2"
api GET '/api/v1/runs?status=finished' "${AN[@]}"
t_err "runs: bad status" 400 "status: must be queued, running, done or failed"
api GET '/api/v1/runs/999999' "${AN[@]}"
t_err "run: missing" 404 "run 999999: no such run"
api GET '/api/v1/runs/abc' "${AN[@]}"
t_err "run: not an id" 404 "run 'abc': no such run (ids are positive whole numbers)"
api POST /api/v1/runs "${AN[@]}" "${JS[@]}" --data-binary '{"app": "webapp", "treshold_ns": 5}'
t_err "run: unknown field named" 400 "treshold_ns: unknown field"
api POST /api/v1/runs "${AN[@]}" "${JS[@]}" --data-binary '{"kind": "wait"}'
t_err "run: app required" 400 "app: required"
api POST /api/v1/runs "${AN[@]}" "${JS[@]}" --data-binary '{"app": "webapp", "aoi": "everything"}'
t_err "run: bad aoi" 400 "aoi: must be waitgraph, thread, critical or stream"
api POST /api/v1/runs "${AN[@]}" "${JS[@]}" --data-binary '{"app": "webapp", "threshold_ns": 5, "threshold_fraction": 0.1}'
t_err "run: both thresholds" 400 "threshold_ns: give one of threshold_ns, threshold_fraction and threshold_guideline"
api POST /api/v1/runs "${AN[@]}" "${JS[@]}" --data-binary '{"app": "webapp", "filter": {"hostname": "x"}}'
t_err "run: unknown filter field" 400 "filter.hostname: unknown field (version, host, labels, since, until)"
api POST /api/v1/runs "${AN[@]}" "${JS[@]}" --data-binary '[1, 2]'
t_err "run: not an object" 400 "body: must be a JSON object"
api POST /api/v1/runs "${AN[@]}" "${JS[@]}" --data-binary '{"app": "webapp", "threshold_guideline": {"share": 2, "delay_ns": 5}}'
t_err "run: bad guideline share" 400 "threshold_guideline.share: must be more than 0 and at most 1"
t_eq "run: refused bodies queued nothing" "$(pg_q "SELECT count(*) FROM runs")" 2

# ---- GET runs/{id}/clusters ----
# the run's clusters: W2 fsync (4000 ns, 1 stream, 1 event), W1 hostile (1800, 3, 3), R1 non-ASCII (600, 2, 2)
cl() { j '" ".join("%s:%d:%d" % (c["kind"][0], c["total_cost_ns"], c["rank"]) for c in j["clusters"]) + " %s %d" % (j["sort"], j["total"])'; }
api GET "/api/v1/runs/$RUN/clusters" "${AN[@]}"
t_eq "clusters: by total cost (default)" "$HTTP_STATUS $(cl)" "200 w:4000:1 w:1800:2 r:600:3 total_cost 3"
t_eq "clusters: the fields" "$(j 'sorted(j["clusters"][0])')" \
	'["avg_cost_ns","baseline_cost_ns","baseline_streams","cluster_id","common","est_cost_ns","est_streams","events","excess_cost_ns","excess_hi_ns","excess_lo_ns","expected_cost_ns","kind","own_cost_ns","patterns","patterns_total","problem_id","rank","rank_avg_cost","rank_events","rank_excess_cost","rank_streams","rank_total_cost","run_id","streams","title","total_cost_ns"]'
W1=$(j 'j["clusters"][1]["cluster_id"]')
W2=$(j 'j["clusters"][0]["cluster_id"]')
R1=$(j 'j["clusters"][2]["cluster_id"]')
t_eq "clusters: the hostile one exactly" "$(j '{k: v for k, v in j["clusters"][1].items() if k not in ("cluster_id", "patterns")}')" \
	"{\"run_id\":$RUN,\"kind\":\"wait\",\"rank\":2,\"rank_total_cost\":2,\"rank_streams\":1,\"rank_events\":1,\"rank_avg_cost\":2,\"total_cost_ns\":1800,\"streams\":3,\"events\":3,\"avg_cost_ns\":600,\"rank_excess_cost\":null,\"excess_cost_ns\":null,\"excess_lo_ns\":null,\"excess_hi_ns\":null,\"own_cost_ns\":null,\"expected_cost_ns\":null,\"baseline_cost_ns\":null,\"baseline_streams\":null,\"est_cost_ns\":1800,\"est_streams\":3,\"problem_id\":$(pg_q "SELECT problem_id FROM clusters WHERE id = $(j 'j["clusters"][1]["cluster_id"]')"),\"common\":$(j '["app!main", E["HOSTILE"], "libc!futex_wait"]'),\"title\":$(j '[E["HOSTILE"], "libc!futex_wait"]'),\"patterns_total\":1}"
t_eq "clusters: its pattern" "$(j '[{k: v for k, v in p.items() if k != "pattern_id"} for p in j["clusters"][1]["patterns"]]')" \
	"[{\"frames\":$(j '["app!main", E["HOSTILE"], "libc!futex_wait"]'),\"cost_ns\":1800,\"events\":3,\"streams\":3,\"est_cost_ns\":1800}]"
t_eq "clusters: the non-ASCII one's common part" "$(j 'j["clusters"][2]["common"] == ["app!main", E["UNI"], "app!compute"]')" true
api GET "/api/v1/runs/$RUN/clusters?sort=streams" "${AN[@]}"
t_eq "clusters: by streams" "$(cl)" "w:1800:1 r:600:2 w:4000:3 streams 3"
api GET "/api/v1/runs/$RUN/clusters?sort=events" "${AN[@]}"
t_eq "clusters: by events" "$(cl)" "w:1800:1 r:600:2 w:4000:3 events 3"
api GET "/api/v1/runs/$RUN/clusters?sort=avg_cost" "${AN[@]}"
t_eq "clusters: by average cost" "$(cl) $(j '[c["avg_cost_ns"] for c in j["clusters"]]')" "w:4000:1 w:1800:2 r:600:3 avg_cost 3 [4000,600,300]"
api GET "/api/v1/runs/$RUN/clusters?kind=run" "${AN[@]}"
t_eq "clusters: kind filter (the rank is still the run's)" "$(cl)" "r:600:3 total_cost 1"
api GET "/api/v1/runs/$RUN/clusters?q=FSYNC" "${AN[@]}"
t_eq "clusters: frame text, any case" "$(cl)" "w:4000:1 total_cost 1"
api GET "/api/v1/runs/$RUN/clusters" -G --data-urlencode "q=find&\"'<script>" "${AN[@]}"
t_eq "clusters: frame text with metacharacters" "$(cl)" "w:1800:2 total_cost 1"
api GET "/api/v1/runs/$RUN/clusters" -G --data-urlencode "q=日本語>\\路" "${AN[@]}"
t_eq "clusters: non-ASCII frame text" "$(cl)" "r:600:3 total_cost 1"
api GET "/api/v1/runs/$RUN/clusters?limit=1&offset=1&patterns=0" "${AN[@]}"
t_eq "clusters: paged, no patterns" "$(cl) $(j '[j["clusters"][0]["patterns"], j["clusters"][0]["patterns_total"]]')" "w:1800:2 total_cost 3 [[],1]"
api GET "/api/v1/runs/$RUN/clusters?sort=cost" "${AN[@]}"
t_err "clusters: bad sort" 400 "sort: must be total_cost, streams, events, avg_cost or excess_cost"
api GET "/api/v1/runs/$RUN/clusters?sort=excess_cost" "${AN[@]}"
t_err "clusters: excess cost without a baseline" 400 "sort: excess_cost needs a run with baseline streams (run $RUN has none)"
api GET "/api/v1/runs/$RUN/clusters?kind=both" "${AN[@]}"
t_err "clusters: bad kind" 400 "kind: must be wait or run"
api GET "/api/v1/runs/$RUN/clusters?q=" "${AN[@]}"
t_err "clusters: empty text" 400 "q: 1 to 1024 bytes of frame text"
api GET "/api/v1/runs/$RUN/clusters?order=streams" "${AN[@]}"
t_err "clusters: unknown parameter" 400 "order: unknown parameter"
api GET "/api/v1/runs/$RUN/clusters?patterns=1001" "${AN[@]}"
t_err "clusters: too many patterns" 400 "patterns: must be a whole number from 0 to 1000"
api GET "/api/v1/runs/999999/clusters" "${AN[@]}"
t_err "clusters: missing run" 404 "run 999999: no such run"

# ---- GET runs/{id}/problems, problems/{id} ----
# W1 (the waits on the hostile stack, in A, B, C) and R1 (the holder's CPU in A, B) are one problem:
# R1 has all of its cost in W1's streams, W1 1100 of 1800 in R1's; W2 (fsync, in C, on h-beta as
# B) has all of its cost in W1's stream C, but W1 only 700 of 1800 in C: apart
PW1=$(pg_q "SELECT problem_id FROM clusters WHERE id = $W1")
PW2=$(pg_q "SELECT problem_id FROM clusters WHERE id = $W2")
t_eq "problems: stored rows" "$(pg_q "SELECT p.rank, p.total_cost_ns, p.streams, p.events, p.avg_cost_ns, p.members = ARRAY[c.id], p.title_frame_ids = c.title_frame_ids FROM problems p JOIN clusters c ON c.problem_id = p.id WHERE p.run_id = $RUN AND cardinality(p.members) = 1") $(pg_q "SELECT rank, total_cost_ns, streams, events, avg_cost_ns, members = ARRAY[$W1, $R1]::bigint[] FROM problems WHERE id = $PW1")" \
	"1|4000|1|1|4000|t|t 2|2400|3|5|480|t"
t_eq "problems: every cluster in one, the run's count" "$(pg_q "SELECT count(*) FILTER (WHERE problem_id IS NULL), count(DISTINCT problem_id) FROM clusters WHERE run_id = $RUN") $(pg_q "SELECT counts->>'problems' FROM runs WHERE id = $RUN")" "0|2 2"
PCL() { # PCL ID KIND RANK COST STREAMS EVENTS AVG TITLE COMMON: a member cluster's JSON
	printf '{"cluster_id":%s,"kind":"%s","rank":%s,"total_cost_ns":%s,"streams":%s,"events":%s,"avg_cost_ns":%s,"excess_cost_ns":null,"title":%s,"common":%s}' "$@"
}
NOEX='"excess_cost_ns":null,"excess_lo_ns":null,"excess_hi_ns":null,"own_cost_ns":null,"expected_cost_ns":null,"baseline_streams":null'
P2JSON="{\"problem_id\":$PW2,\"run_id\":$RUN,\"rank\":1,\"total_cost_ns\":4000,\"streams\":1,\"events\":1,\"avg_cost_ns\":4000,$NOEX,\"est_cost_ns\":4000,\"est_streams\":1,\"cause\":\"code\",\"title\":[\"app!disk\",\"libc!fsync\"],\"clusters\":[$(PCL "$W2" wait 1 4000 1 1 4000 '["app!disk","libc!fsync"]' '["app!main","app!disk","libc!fsync"]')]}"
P1JSON="{\"problem_id\":$PW1,\"run_id\":$RUN,\"rank\":2,\"total_cost_ns\":2400,\"streams\":3,\"events\":5,\"avg_cost_ns\":480,$NOEX,\"est_cost_ns\":2400,\"est_streams\":3,\"cause\":\"code\",\"title\":$(j '[E["HOSTILE"], "libc!futex_wait"]'),\"clusters\":[$(PCL "$W1" wait 2 1800 3 3 600 "$(j '[E["HOSTILE"], "libc!futex_wait"]')" "$(j '["app!main", E["HOSTILE"], "libc!futex_wait"]')"),$(PCL "$R1" run 3 600 2 2 300 "$(j '[E["UNI"], "app!compute"]')" "$(j '["app!main", E["UNI"], "app!compute"]')")]}"
api GET "/api/v1/runs/$RUN/problems" "${AN[@]}"
t_eq "problems: the worst first, run and wait clusters of the same streams together, exactly" "$HTTP_STATUS $(j 'j')" \
	"200 {\"problems\":[$P2JSON,$P1JSON],\"total\":2,\"reason\":null}"
t_eq "problems: the hostile frame's exact JSON text" "$(grep -cF '"title": ["app!std::map<K, V>::find&\"'"'"'<script>alert(1)</script>", "libc!futex_wait"]' <<<"$HTTP_BODY")" 1
api GET "/api/v1/runs/$RUN/problems?limit=1&offset=1" "${AN[@]}"
t_eq "problems: paged" "$HTTP_STATUS $(j 'j')" "200 {\"problems\":[$P1JSON],\"total\":2,\"reason\":null}"
api GET "/api/v1/runs/$RUN/problems?limit=0" "${AN[@]}"
t_err "problems: limit 0" 400 "limit: must be a whole number from 1 to 1000"
api GET "/api/v1/runs/$RUN/problems?sort=streams" "${AN[@]}"
t_err "problems: unknown parameter" 400 "sort: unknown parameter"
api GET "/api/v1/runs/999999/problems" "${AN[@]}"
t_err "problems: missing run" 404 "run 999999: no such run"
api GET "/api/v1/problems/$PW1" "${AN[@]}"
t_eq "problem: one, its clusters, streams and hosts" "$HTTP_STATUS $(j '{k: v for k, v in j.items() if k not in ("top_streams", "hosts")}') $(j '[[s["stream_id"], s["host"], s["cost_ns"], s["events"]] for s in j["top_streams"]]') $(j 'j["hosts"]')" \
	"200 $P1JSON [[\"$SB\",\"h-beta\",900,2],[\"$SA\",\"h-alpha\",800,2],[\"$SC\",\"h-beta\",700,1]] [{\"host\":\"h-beta\",\"streams\":2,\"cost_ns\":1600},{\"host\":\"h-alpha\",\"streams\":1,\"cost_ns\":800}]"
api GET "/api/v1/problems/999999" "${AN[@]}"
t_err "problem: missing" 404 "problem 999999: no such problem"
# attribution per problem (docs/analysis.md): its streams and cost are its members' events, each
# once (PW1: W1's waits in A, B, C and R1's CPU in A, B: 900 in B, 800 in A, 700 in C); the run's
# streams R = A, B, C (both kinds), no baseline. Values one stream has are not stored (run_values):
# h-beta (B, C), 1.0 (A, B), eu (A, C) are tested. PW1 has every stream: p = 1, lift 1.
ATOT='[j[k] for k in ("problem_id", "run_streams", "cluster_streams", "baseline_streams", "cost_ns", "tested", "keys_skipped", "summary")]'
AVAL='[[v["key"], v["value"], v["cost_ns"], round(v["cost_share"], 6), v["cluster_streams"], v["run_streams"], v["baseline_streams"], round(v["cluster_share"], 6), round(v["run_share"], 6), v["baseline_share"], round(v["lift"], 6), v["lift_baseline"], round(v["p"], 6), round(v["q"], 6), v["p_baseline"], v["q_baseline"]] for v in j["values"]]'
api GET "/api/v1/problems/$PW1/attribution" "${AN[@]}"
t_eq "problem attribution: totals over both kinds, each event once" "$HTTP_STATUS $(j "$ATOT")" \
	"200 [$PW1,3,3,0,2400,3,0,\"No host, version or label value stands out among this problem's 3 streams (the smallest adjusted p is 1)\"]"
t_eq "problem attribution: every value exactly, by cost share when p ties" "$(j "$AVAL")" \
	'[["version","1.0",1700,0.708333,2,2,0,0.666667,0.666667,null,1,null,1,1,null,null],["host","h-beta",1600,0.666667,2,2,0,0.666667,0.666667,null,1,null,1,1,null,null],["region","eu",1500,0.625,2,2,0,0.666667,0.666667,null,1,null,1,1,null,null]]'
PAKEYS=$(j 'sorted(j)')
# PW2 (W2's fsync wait, in C only): h-beta and eu, 1 of its 1 stream against 2 of the run's 3:
# Fisher's one-sided p = 2/3; version 1.0 (not C's) tested too, so q = min(2/3 x 3/2, 1 x 3/3) = 1
api GET "/api/v1/problems/$PW2/attribution?limit=1" "${AN[@]}"
t_eq "problem attribution: a one-stream problem, limit" "$HTTP_STATUS $(j "$ATOT") $(j "$AVAL")" \
	"200 [$PW2,3,1,0,4000,3,0,\"No host, version or label value stands out among this problem's 1 stream (the smallest adjusted p is 1)\"] [[\"host\",\"h-beta\",4000,1,1,2,0,1,0.666667,null,1.5,null,0.666667,1,null,null]]"
api GET "/api/v1/clusters/$W1/attribution" "${AN[@]}"
t_eq "problem attribution: the cluster's shape, the id's key apart" "$PAKEYS" "$(j 'sorted(k if k != "cluster_id" else "problem_id" for k in j)')"
# a run stored before run_values: every value counted on request, over both kinds' streams (8 values
# tested; C's 2.0 and db have p = 1/3, its h-beta and eu 2/3; BH over 8: q = 1)
pg_q "DELETE FROM run_values WHERE run_id = $RUN"
# (this server keeps the attribution it computed first: a run's counted values never change)
api GET "/api/v1/problems/$PW2/attribution" "${AN[@]}"
t_eq "problem attribution: kept, the run's values gone since" "$HTTP_STATUS $(j "$ATOT")" \
	"200 [$PW2,3,1,0,4000,3,0,\"No host, version or label value stands out among this problem's 1 stream (the smallest adjusted p is 1)\"]"
start_web --auth-cache-ms 200 || t_bail "sm-web starts again"
api GET "/api/v1/problems/$PW2/attribution" "${AN[@]}"
t_eq "problem attribution: an older run, counted on request" "$HTTP_STATUS $(j "$ATOT") $(j '[[v["key"], v["value"], v["run_streams"], round(v["p"], 6), round(v["q"], 6)] for v in j["values"]]')" \
	"200 [$PW2,3,1,0,4000,8,0,\"No host, version or label value stands out among this problem's 1 stream (the smallest adjusted p is 1)\"] [[\"tier\",\"db\",1,0.333333,1],[\"version\",\"2.0\",1,0.333333,1],[\"host\",\"h-beta\",2,0.666667,1],[\"region\",\"eu\",2,0.666667,1]]"
pg_q "SELECT sm_run_values($RUN)" >/dev/null
api GET "/api/v1/problems/999999/attribution" "${AN[@]}"
t_err "problem attribution: missing" 404 "problem 999999: no such problem"
api GET "/api/v1/problems/$PW1/attribution?limit=0" "${AN[@]}"
t_err "problem attribution: limit 0" 400 "limit: must be a whole number from 1 to 1000"
api GET "/api/v1/problems/$PW1/attribution?sort=q" "${AN[@]}"
t_err "problem attribution: unknown parameter" 400 "sort: unknown parameter"
# a run mined before problems existed (migration 023): said so, nothing invented
pg_q "INSERT INTO runs (params, status, counts) SELECT params, 'done', counts - 'problems' FROM runs WHERE id = $RUN RETURNING id" >"$T_TMP/oldrun"
OLDRUN=$(head -n 1 "$T_TMP/oldrun")
api GET "/api/v1/runs/$OLDRUN/problems" "${AN[@]}"
t_eq "problems: an old run's empty list says why" "$HTTP_STATUS $(j 'j')" \
	"200 {\"problems\":[],\"total\":0,\"reason\":\"the run was mined before problems existed: mine it again to group its clusters into problems\"}"
api GET "/runs/$OLDRUN" "${AN[@]}"
t_match "run page: an old run says it has no problems" "$HTTP_STATUS $HTTP_BODY" '^200 .*<section id="problems"><h2>Problems</h2><p class="hint">This run was mined before problems existed'
pg_q "DELETE FROM runs WHERE id = $OLDRUN"
# ---- compare: only runs of one kind, and of one app unless forced ----
cmp_copy() { # cmp_copy JSON: a done copy of $RUN with params JSON merged in; its id
	pg_q "INSERT INTO runs (params, status, counts) SELECT params || :'p'::jsonb, 'done', counts FROM runs WHERE id = $RUN RETURNING id" -v p="$1" | head -n 1
}
CRUN=$(cmp_copy '{"kind": "run"}')
WRUN=$(cmp_copy '{"kind": "wait", "app": "otherapp"}')
ORUN=$(cmp_copy '{"app": "otherapp"}')
api GET "/api/v1/runs/$CRUN/compare/$WRUN" "${AN[@]}"
t_err "compare: CPU against wait refused" 400 "b: run $WRUN mined wait events of app otherapp, run $CRUN CPU samples of app webapp: not comparable"
api GET "/api/v1/runs/$CRUN/compare/$WRUN?force=1" "${AN[@]}"
t_eq "compare: CPU against wait refused even forced" "$HTTP_STATUS" 400
api GET "/api/v1/runs/$RUN/compare/$ORUN" "${AN[@]}"
t_err "compare: another app refused" 400 "b: run $ORUN mined app otherapp, run $RUN app webapp: not comparable without force=1"
api GET "/api/v1/runs/$RUN/compare/$ORUN?force=1" "${AN[@]}"
t_eq "compare: another app of the same kind, forced" "$HTTP_STATUS $(j '[j["a"], j["b"], j["total"] > 0]')" "200 [$RUN,$ORUN,true]"
api GET "/api/v1/runs/$RUN/compare/$ORUN?force=yes" "${AN[@]}"
t_err "compare: a bad force" 400 "force: must be a whole number from 0 to 1"
api GET "/api/v1/runs/$RUN/compare/999999" "${AN[@]}"
t_err "compare: a missing run stays 404" 404 "run 999999: no such run"
api GET "/compare?a=$CRUN&b=$WRUN" "${AN[@]}"
t_match "compare page: CPU against wait, a warning at the top and no table" "$HTTP_STATUS $(tr -d '\n' <<<"$HTTP_BODY")" \
	"^200 .*<h1>Compare two runs</h1><div class=\"warning\" id=\"compare-warning\" role=\"alert\"><p><strong>Nothing in common to compare.</strong> Run $WRUN mined wait events of app otherapp, run $CRUN CPU samples of app webapp: not comparable.</p></div>"
t_eq "compare page: refused, nothing compared nor a way to force" "$(grep -c 'id="compare"\|compare-force' <<<"$HTTP_BODY")" 0
api GET "/compare?a=$RUN&b=$ORUN" "${AN[@]}"
t_match "compare page: another app, a warning with a link that forces" "$HTTP_STATUS $(tr -d '\n' <<<"$HTTP_BODY")" \
	"^200 .*<div class=\"warning\" id=\"compare-warning\" role=\"alert\">.*<a id=\"compare-force\" href=\"/compare\\?a=$RUN&amp;b=$ORUN&amp;force=1\">"
api GET "/compare?a=$RUN&b=$ORUN&force=1" "${AN[@]}"
t_match "compare page: forced, compared" "$HTTP_STATUS $(tr -d '\n' <<<"$HTTP_BODY")" '^200 .*<table class="compare" id="compare">'
t_eq "compare page: forced, no warning" "$(grep -c 'compare-warning' <<<"$HTTP_BODY")" 0
# the page's order: new first, then the most grown; new, grown and gone carry a badge
api GET "/api/v1/runs/$ORUN/compare/$RUN?force=1" "${AN[@]}"
want=$(j '" ".join(str(c["b_cluster"]) for c in sorted(j["clusters"], key=lambda c: (c["status"] != "new", -c["change_ns"], c["b_cluster"])))')
api GET "/compare?a=$ORUN&b=$RUN&force=1" "${AN[@]}"
t_eq "compare page: new first, then by growth, each new one with a badge" "$HTTP_STATUS $("$PY" -c '
import re, sys
rows = re.findall(r"<tr class=\"(\w+)\">(.*?)</tr>", sys.stdin.read())
print(" ".join(re.search(r"/clusters/(\d+)", r).group(1) for _, r in rows),
      all(("<span class=\"badge %s\">%s</span>" % (st, st) in r) == (st in ("new", "grown", "gone")) for st, r in rows))' <<<"$HTTP_BODY")" \
	"200 $want True"
# the picker: A among every done run, B among those of A's app and kind, newest first
CRUN2=$(cmp_copy '{"kind": "run"}')
api GET "/compare?a=$CRUN" "${AN[@]}"
t_eq "compare picker: B offers the runs of A's app and kind only" \
	"$HTTP_STATUS $(tr -d '\n' <<<"$HTTP_BODY" | sed -n 's/.*<select name="b" id="compare-b">\(.*\)<\/select><\/label> <button.*/\1/p' | grep -o 'option value="[0-9][0-9]*"' | tr '\n' ' ')" \
	"200 option value=\"$CRUN2\" "
t_eq "compare picker: A offers every done run, newest first, A chosen" \
	"$(tr -d '\n' <<<"$HTTP_BODY" | sed -n 's/.*<select name="a" id="compare-a">\(.*\)<\/select><\/label> <label>Run B.*/\1/p' | grep -o 'option value="[0-9][0-9]*"[^>]*' | head -n 4 | tr '\n' ' ')" \
	"option value=\"$CRUN2\" data-app=\"webapp\" data-kind=\"run\" option value=\"$ORUN\" data-app=\"otherapp\" data-kind=\"both\" option value=\"$WRUN\" data-app=\"otherapp\" data-kind=\"wait\" option value=\"$CRUN\" data-app=\"webapp\" data-kind=\"run\" selected "
api GET "/compare" "${AN[@]}"
t_match "compare picker: no A, B waits for it" "$HTTP_STATUS $HTTP_BODY" '^200 .*<select name="b" id="compare-b"><option value="">— choose run A first —</option></select>'
api GET "/runs/$RUN" "${AN[@]}"
t_match "run page: Compare with… opens the picker with this run as A" "$HTTP_STATUS $HTTP_BODY" "^200 .*<a id=\"compare-with\" href=\"/compare\\?a=$RUN\">Compare with…</a>"
pg_q "DELETE FROM runs WHERE id IN ($CRUN, $WRUN, $ORUN, $CRUN2)"
api GET "/runs/$RUN" "${AN[@]}"
t_match "run page: leads with the problems, the worst first, escaped" "$HTTP_STATUS $(tr -d '\n' <<<"$HTTP_BODY")" \
	"^200 .*<h1>Run #$RUN: .*<section id=\"problems\"><h2>Problems</h2><ol class=\"problems\"><li class=\"problem\" id=\"problem-$PW2\"><h3><a href=\"/problems/$PW2\">.*libc!fsync.*</li><li class=\"problem\" id=\"problem-$PW1\">.*std::map&lt;K, V&gt;::find&amp;&quot;&#39;&lt;script&gt;alert\(1\)&lt;/script&gt;.*href=\"/clusters/$R1\".*</ol></section>.*<table class=\"clusters\""
t_eq "run page: no raw hostile frame" "$(grep -c '<script>alert' <<<"$HTTP_BODY")" 0
api GET "/problems/$PW1" "${AN[@]}"
t_match "problem page: its clusters and hosts" "$HTTP_STATUS $(tr -d '\n' <<<"$HTTP_BODY")" \
	"^200 .*<h1>Problem #$PW1, rank 2 of <a href=\"/runs/$RUN\">run #$RUN</a>: .*href=\"/clusters/$W1\".*href=\"/clusters/$R1\".*<td>h-beta</td><td class=\"n\">2</td>.*$SB"
t_match "problem page: where it happens, in one sentence and a table" "$(tr -d '\n' <<<"$HTTP_BODY")" \
	"<section class=\"attribution\"><h2>Where it happens</h2><p class=\"lead\">No host, version or label value stands out among this problem&#39;s 3 streams \(the smallest adjusted p is 1\)\.</p><table class=\"attribution\">.*<tbody><tr><td>version</td><td>1\.0</td><td class=\"n\">70.8 %</td><td class=\"n\">66.7 %</td><td class=\"n\">66.7 %</td><td class=\"n\">1\.00</td><td class=\"n\">1</td></tr><tr><td>host</td><td>h-beta</td>.*</tbody></table></section><h2>Clusters</h2>"
api GET "/problems/999999" "${AN[@]}"
t_eq "problem page: missing" "$HTTP_STATUS" 404

# ---- GET clusters/{id}, clusters/{id}/stacks ----
api GET "/api/v1/clusters/$W1" "${AN[@]}"
P1=$(j 'j["patterns"][0]["pattern_id"]')
t_eq "cluster: 200, the list's fields and more" "$HTTP_STATUS $(j 'sorted(j)')" \
	'200 ["alignment","avg_cost_ns","baseline_cost_ns","baseline_streams","by_host","by_label","by_version","cluster_id","common","est_cost_ns","est_streams","events","excess_cost_ns","excess_hi_ns","excess_lo_ns","expected_cost_ns","has_stacks","kind","medoid","own_cost_ns","patterns","patterns_total","problem_id","rank","rank_avg_cost","rank_events","rank_excess_cost","rank_streams","rank_total_cost","run_id","streams","title","top_streams","total_cost_ns"]'
t_eq "cluster: metrics" "$(j '[j["cluster_id"], j["kind"], j["total_cost_ns"], j["streams"], j["events"], j["avg_cost_ns"], j["medoid"], j["has_stacks"]]')" \
	"[$W1,\"wait\",1800,3,3,600,$P1,true]"
t_eq "cluster: alignment" "$(j 'j["alignment"]')" "[{\"pattern_id\":$P1,\"sim\":1,\"ops\":\"MMM\"}]"
t_eq "cluster: top streams" "$(j 'j["top_streams"]')" \
	"[{\"stream_id\":\"$SC\",\"host\":\"h-beta\",\"app\":\"webapp\",\"version\":\"2.0\",\"cost_ns\":700,\"events\":1,\"expired\":false},{\"stream_id\":\"$SB\",\"host\":\"h-beta\",\"app\":\"webapp\",\"version\":\"1.0\",\"cost_ns\":600,\"events\":1,\"expired\":false},{\"stream_id\":\"$SA\",\"host\":\"h-alpha\",\"app\":\"webapp\",\"version\":\"1.0\",\"cost_ns\":500,\"events\":1,\"expired\":false}]"
t_eq "cluster: by host and version" "$(j '[j["by_host"], j["by_version"]]')" \
	'[[{"value":"h-beta","cost_ns":1300,"events":2,"streams":2},{"value":"h-alpha","cost_ns":500,"events":1,"streams":1}],[{"value":"1.0","cost_ns":1100,"events":2,"streams":2},{"value":"2.0","cost_ns":700,"events":1,"streams":1}]]'
t_eq "cluster: by label" "$(j 'j["by_label"]')" \
	'[{"key":"region","value":"eu","cost_ns":1200,"events":2,"streams":2},{"key":"tier","value":"db","cost_ns":700,"events":1,"streams":1},{"key":"region","value":"us","cost_ns":600,"events":1,"streams":1},{"key":"tier","value":"web","cost_ns":500,"events":1,"streams":1}]'
api GET "/api/v1/clusters/$W1/stacks" "${AN[@]}"
t_eq "cluster stacks: exact body" "$HTTP_STATUS $HTTP_BODY" \
	"200 {\"stacks\": [[\"app!main\", \"app!std::map<K, V>::find&\\\"'<script>alert(1)</script>\", \"libc!futex_wait\"]], \"costs\": [{\"stack\": 0, \"cost_ns\": 1800, \"events\": 3}]}"$'\n'
api GET "/api/v1/clusters/$R1/stacks" "${AN[@]}"
t_eq "cluster stacks: non-ASCII exact body" "$HTTP_BODY" \
	"{\"stacks\": [[\"app!main\", \"app!überprüfe<日本語>\\\\路径 ✓\", \"app!compute\"]], \"costs\": [{\"stack\": 0, \"cost_ns\": 600, \"events\": 2}]}"$'\n'
# one rank per cluster: the run page's row number (by total cost among all the run's clusters, both
# kinds), the cluster page's heading, the problems' members and the API's rank_total_cost agree
api GET "/runs/$RUN?sort=streams" "${AN[@]}"
RANKROWS=$(grep -o '<td class="n rank"><a href="/clusters/[0-9]*">[0-9]*</a>' <<<"$HTTP_BODY" | sed 's|.*/clusters/\([0-9]*\)">\([0-9]*\)<.*|\1:\2|' | tr '\n' ' ')
t_eq "ranks: the run page's rows, sorted by streams, keep their rank by total cost" "$RANKROWS" "$W1:2 $R1:3 $W2:1 "
for c in "$W2" "$W1" "$R1"; do
	api GET "/clusters/$c" "${AN[@]}"
	want=$(grep -o "$c:[0-9]*" <<<"$RANKROWS" | cut -d: -f2)
	t_eq "ranks: cluster $c's heading says the rank of its row" "$(grep -o 'rank [0-9]* by total cost' <<<"$HTTP_BODY")" "rank $want by total cost"
	api GET "/api/v1/clusters/$c" "${AN[@]}"
	t_eq "ranks: cluster $c's rank_total_cost in the API" "$(j 'j["rank_total_cost"]')" "$want"
done
t_eq "ranks: stored by the miner with the clusters (025_run_ranks)" \
	"$(pg_q "SELECT string_agg(id || ':' || run_rank_total_cost || ':' || run_rank_streams, ' ' ORDER BY id) FROM clusters WHERE run_id = $RUN")" \
	"$(printf '%s\n' "$W2:1:3" "$W1:2:1" "$R1:3:2" | sort -t: -k1,1n | tr '\n' ' ' | sed 's/ $//')"
api GET "/runs/$RUN" "${AN[@]}"
t_match "ranks: a problem's member shows the same rank" "$HTTP_BODY" "run cluster <a href=\"/clusters/$R1\">#$R1</a> \\(rank 3\\)"

# the runs' page leads with the latest runs and their worst problem, and sorts
api GET /runs "${AN[@]}"
t_match "runs page: a done run's worst problem, linked, with its total cost" "$HTTP_STATUS $HTTP_BODY" \
	"^200 .*<tr><td><a href=\"/runs/$RUN\">#$RUN</a></td><td>webapp</td><td><span class=\"status done\">done</span></td><td class=\"worst\"><a class=\"worst-link\" href=\"/problems/$PW2\"><span class=\"frames\">.*libc!fsync.*</span></a> <span class=\"cost\">[^<]+</span></td>"
t_match "runs page: newest first by default, said so" "$HTTP_BODY" '<th aria-sort="descending"><a href="/runs\?sort=newest" data-sort="newest">Run ▼</a></th>'
runorder() { grep -o '<tr><td><a href="/runs/[0-9]*">' <<<"$HTTP_BODY" | grep -o '[0-9]*' | tr '\n' ' '; }
t_eq "runs page: newest first" "$(runorder)" "$(pg_q "SELECT id FROM runs ORDER BY id DESC" | tr '\n' ' ')"
api GET "/runs?sort=worst" "${AN[@]}"
t_eq "runs page: by the worst problem's cost" "$(runorder)" \
	"$(pg_q "SELECT r.id FROM runs r LEFT JOIN problems p ON p.run_id = r.id AND p.rank = 1 ORDER BY p.total_cost_ns DESC NULLS LAST, r.id DESC" | tr '\n' ' ')"
t_match "runs page: the sorted column's header" "$HTTP_BODY" '<th aria-sort="descending"><a href="/runs\?sort=worst" data-sort="worst">Worst problem \(total cost\) ▼</a></th>'
api GET "/runs?sort=app" "${AN[@]}"
t_eq "runs page: by app" "$(runorder) $(grep -c 'aria-sort="ascending"><a href="/runs?sort=app"' <<<"$HTTP_BODY")" \
	"$(pg_q "SELECT id FROM runs ORDER BY params->>'app', id DESC" | tr '\n' ' ') 1"
api GET "/runs?sort=x%27%3B--" "${AN[@]}"
t_eq "runs page: an unknown order is the default" "$HTTP_STATUS $(runorder)" "200 $(pg_q "SELECT id FROM runs ORDER BY id DESC" | tr '\n' ' ')"

api GET "/api/v1/clusters/999999" "${AN[@]}"
t_err "cluster: missing" 404 "cluster 999999: no such cluster"
api GET "/api/v1/clusters/999999/stacks" "${AN[@]}"
t_err "cluster stacks: missing" 404 "cluster 999999: no such cluster"
api GET "/api/v1/clusters/x1" "${AN[@]}"
t_err "cluster: not an id" 404 "cluster 'x1': no such cluster (ids are positive whole numbers)"

# ---- signatures ----
sig() { # sig JSON: POST signatures as the analyst
	api POST /api/v1/signatures "${AN[@]}" "${JS[@]}" --data-binary "$1"
}
sig "$(W1=$W1 "$PY" -c 'import json, os; print(json.dumps({"name": "hostile-wait", "frames": [os.environ["HOSTILE"]], "note": "<b>n\u00f6te</b> \"q\"", "from_cluster": int(os.environ["W1"])}))')"
S1=$(j 'j["signature_id"]')
t_eq "signature: 201 with its id" "$HTTP_STATUS $HTTP_BODY" "201 {\"signature_id\": $S1}"$'\n'
t_eq "signature: Location" "$(header Location)" "/api/v1/signatures/$S1"
sig '{"name": "disk-flush", "frames": ["libc!fsync"], "status": "known"}'
S2=$(j 'j["signature_id"]')
t_eq "signature: a second one" "$HTTP_STATUS" 201
sig '{"name": "hostile-wait", "frames": ["x!y"]}'
t_err "signature: duplicate name" 409 "name: a signature named 'hostile-wait' exists already"
sig '{"name": "s", "frames": ["x!y"], "colour": "red"}'
t_err "signature: unknown field named" 400 "colour: unknown field"
sig '{"name": "s", "frames": ["x!y"], "status": "done"}'
t_err "signature: bad status" 400 "status: must be open, known or fixed"
sig '{"name": "s"}'
t_err "signature: frames required" 400 "frames: required, an array of frame names (outermost first)"
sig '{"name": "s", "frames": ["x!y", 3]}'
t_err "signature: a frame not a string" 400 "frames[1]: must be a string"
sig '{"name": "s", "frames": ["x!y"], "from_cluster": "one"}'
t_err "signature: bad from_cluster" 400 "from_cluster: must be a cluster id"
sig '{"name": "s", "frames": ["x!y"], "from_cluster": 999999}'
t_err "signature: from a missing cluster" 400 "from_cluster: no cluster 999999"
sig '{"name": "s", "frames": []}'
t_err "signature: no frames" 400 "frames: 1 to 512 frames, not 0"
sig '{"name": "s", "frames": ["x!y"]} trailing'
t_err "signature: not one JSON object" 400 "the body must be one JSON object: body: unexpected 't' after the value at byte 33"
api GET "/api/v1/signatures/$S1" "${AN[@]}"
t_eq "signature: read back" "$HTTP_STATUS $(j '{k: v for k, v in j.items() if k not in ("created_at", "updated_at")}')" \
	"200 {\"signature_id\":$S1,\"name\":\"hostile-wait\",\"frames\":$(j '[E["HOSTILE"]]'),\"status\":\"open\",\"note\":\"<b>nöte</b> \\\"q\\\"\",\"from_cluster\":$W1,\"from_run\":$RUN,\"from_expired\":false}"
api GET /api/v1/signatures "${AN[@]}"
t_eq "signatures: all, by name" "$(j '[[s["signature_id"], s["name"], s["status"]] for s in j["signatures"]]') $(j 'j["total"]')" \
	"[[$S2,\"disk-flush\",\"known\"],[$S1,\"hostile-wait\",\"open\"]] 2"
api GET '/api/v1/signatures?limit=1&offset=1' "${AN[@]}"
t_eq "signatures: paged" "$(j '[s["name"] for s in j["signatures"]]') $(j 'j["total"]')" '["hostile-wait"] 2'
api PATCH "/api/v1/signatures/$S2" "${AN[@]}" "${JS[@]}" --data-binary '{"status": "fixed", "note": "fixed in 2.1"}'
t_eq "signature: patched" "$HTTP_STATUS $(j '[j["signature_id"], j["status"], j["note"], j["frames"]]')" \
	"200 [$S2,\"fixed\",\"fixed in 2.1\",[\"libc!fsync\"]]"
api PATCH "/api/v1/signatures/$S2" "${AN[@]}" "${JS[@]}" --data-binary '{"status": "closed"}'
t_err "signature: patch with a bad status" 400 "status: must be open, known or fixed"
api PATCH "/api/v1/signatures/$S2" "${AN[@]}" "${JS[@]}" --data-binary '{"name": "renamed"}'
t_err "signature: patch of a field that cannot change" 400 "name: unknown field"
api PATCH "/api/v1/signatures/999999" "${AN[@]}" "${JS[@]}" --data-binary '{"status": "known"}'
t_eq "signature: patch of a missing one" "$HTTP_STATUS" 404
api PATCH "/api/v1/signatures/$S2" "${AN[@]}" "${JS[@]}" --data-binary '{}'
t_eq "signature: an empty patch changes nothing" "$HTTP_STATUS $(j '[j["status"], j["note"]]')" '200 ["fixed","fixed in 2.1"]'
api GET "/api/v1/signatures/999999" "${AN[@]}"
t_err "signature: missing" 404 "signature 999999: no such signature"

# ---- coverage and triage (AOI cost of the run: waits 1800 + 4000, CPU 600; per kind) ----
api GET "/api/v1/runs/$RUN/coverage" "${AN[@]}"
t_eq "coverage: all signatures, wait events (the default)" "$HTTP_STATUS $HTTP_BODY" \
	"200 {\"run_id\": $RUN, \"kind\": \"wait\", \"coverage\": 1, \"covered_cost_ns\": 5800, \"total_cost_ns\": 5800, \"by_signature\": [{\"signature_id\": $S1, \"name\": \"hostile-wait\", \"cost_ns\": 1800, \"coverage\": 0.3103448275862069}, {\"signature_id\": $S2, \"name\": \"disk-flush\", \"cost_ns\": 4000, \"coverage\": 0.6896551724137931}]}"$'\n'
api GET "/api/v1/runs/$RUN/coverage?signatures=$S2" "${AN[@]}"
t_eq "coverage: one signature" "$(j '[j["coverage"], j["covered_cost_ns"], j["total_cost_ns"], [s["signature_id"] for s in j["by_signature"]]]')" "[0.6896551724137931,4000,5800,[$S2]]"
api GET "/api/v1/runs/$RUN/coverage?kind=run" "${AN[@]}"
t_eq "coverage: run events, which no signature matches" "$HTTP_STATUS $(j '[j["kind"], j["coverage"], j["covered_cost_ns"], j["total_cost_ns"]]')" '200 ["run",0,0,600]'
api GET "/api/v1/runs/$RUN/coverage?kind=cpu" "${AN[@]}"
t_err "coverage: a bad kind" 400 "kind: must be wait or run"
api GET "/api/v1/runs/$RUN/coverage?signatures=all" "${AN[@]}"
t_eq "coverage: 'all'" "$(j 'j["covered_cost_ns"]')" 5800
api GET "/api/v1/runs/$RUN/coverage?signatures=$S1,$S1" "${AN[@]}"
t_eq "coverage: an id given twice counts once" "$HTTP_STATUS $(j 'j.get("error") or [j["covered_cost_ns"], len(j["by_signature"])]')" "200 [1800,1]"
api GET "/api/v1/runs/$RUN/coverage?signatures=1,x" "${AN[@]}"
t_err "coverage: bad list" 400 "signatures: 'all' or signature ids separated by commas"
api GET "/api/v1/runs/$RUN/coverage?signatures=" "${AN[@]}"
t_err "coverage: empty list" 400 "signatures: 'all' or signature ids separated by commas"
api GET "/api/v1/runs/$RUN/coverage?signatures=999999" "${AN[@]}"
t_err "coverage: unknown signature" 400 "signatures: 1 of the 1 ids given do not exist"
api GET "/api/v1/runs/999999/coverage" "${AN[@]}"
t_err "coverage: missing run" 404 "run 999999: no such run"
# triage of the wait events: opening A or B reveals hostile-wait (31 % of the 100 % reachable), C
# reveals both
api GET "/api/v1/runs/$RUN/triage" "${AN[@]}"
t_eq "triage: streams, maximum, levels (tenths of the maximum)" "$HTTP_STATUS $(j '[j["run_id"], j["kind"], j["streams"], j["max_coverage"], j["levels"]]')" \
	"200 [$RUN,\"wait\",3,1,[0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,1]]"
# greedy-total: symptom delays tie, so A, B, C; greedy-max and signature: C first; random: C's
# mean position over the 100 fixed shuffles (33, 34 and 33 times first, second, third) is 2
t_eq "triage: the four orders" "$(j 'j["orders"]')" \
	'{"random":[1,1,1,2,2,2,2,2,2,2],"greedy-total":[1,1,1,3,3,3,3,3,3,3],"greedy-max":[1,1,1,1,1,1,1,1,1,1],"signature":[1,1,1,1,1,1,1,1,1,1]}'
api GET "/api/v1/runs/999999/triage" "${AN[@]}"
t_err "triage: missing run" 404 "run 999999: no such run"
api GET "/api/v1/runs/$RUN/triage?order=random" "${AN[@]}"
t_err "triage: unknown parameter" 400 "order: unknown parameter"

# ---- export, import ----
api GET /api/v1/signatures/export "${AN[@]}"
EXPORT=$HTTP_BODY
t_eq "export: 200, an attachment" "$HTTP_STATUS $(header Content-Disposition)" '200 attachment; filename="signatures.json"'
t_eq "export: the document" "$(j 'j')" \
	"$(j '{"version": 1, "signatures": [{"name": "disk-flush", "note": "fixed in 2.1", "frames": ["libc!fsync"], "status": "fixed"}, {"name": "hostile-wait", "note": "<b>nöte</b> \"q\"", "frames": [E["HOSTILE"]], "status": "open"}]}')"
api POST /api/v1/signatures/import "${AN[@]}" "${JS[@]}" --data-binary '{"version": 1, "signatures": [{"name": "x", "frames": []}]}'
t_err "import: names the bad field" 400 "signatures[0].frames: an array of 1 to 512 frames"
api POST /api/v1/signatures/import "${AN[@]}" "${JS[@]}" --data-binary '{"version": 2, "signatures": []}'
t_err "import: another version" 400 "version: unsupported (this program reads 1)"

# ---- routing ----
api GET /api/v1/nothing "${AN[@]}"
t_err "unknown endpoint: 404" 404 "no such endpoint"
api GET /api/v2/streams "${AN[@]}"
t_err "outside /api/v1/: 404" 404 "no such endpoint (the API is under /api/v1/)"
api GET "/api/v1/runs/$RUN/nothing" "${AN[@]}"
t_err "unknown part of a run: 404" 404 "no such endpoint"
api GET "/api/v1/clusters/$W1/nothing" "${AN[@]}"
t_err "unknown part of a cluster: 404" 404 "no such endpoint"
api DELETE /api/v1/runs "${AN[@]}"
t_err "DELETE on runs: 405" 405 "method not allowed here"
t_match "405 says what is allowed (Allow header)" "$(header Allow)" 'GET.*POST|POST.*GET'
api PUT "/api/v1/signatures/$S1" "${AN[@]}" "${JS[@]}" --data-binary '{}'
t_err "PUT on a signature: 405" 405 "method not allowed here"
api POST /api/v1/streams "${AN[@]}" "${JS[@]}" --data-binary '{}'
t_err "POST on streams (ingest's, not here): 405" 405 "method not allowed here"
api GET /api/v1/signatures/import "${AN[@]}"
t_eq "GET on signatures/import: 405" "$HTTP_STATUS" 405

# ---- cookie sessions: the cross-site request token and Origin ----
# session TOKEN: logs in; prints the cookie (name=value) the login set
session() {
	http POST "$WEB_URL/login" -H 'Content-Type: application/x-www-form-urlencoded' --data-urlencode "token=$1" >/dev/null
	header Set-Cookie | cut -d';' -f1
}
CK=(-H "Cookie: $(session "$ANALYST")")
api GET /api/v1/signatures "${CK[@]}"
t_eq "cookie: reads" "$HTTP_STATUS $(j 'j["total"]')" "200 2"
api GET /signatures "${CK[@]}"
CSRF=$(grep -o 'data-csrf="[0-9a-f]*"' <<<"$HTTP_BODY" | head -n 1 | cut -d'"' -f2)
t_match "cookie: the page holds the session's cross-site token" "$CSRF" '^[0-9a-f]{32}$'
api POST /api/v1/runs "${CK[@]}" "${JS[@]}" --data-binary '{"app": "nosuchapp"}'
t_err "cookie: a write without X-CSRF-Token: 403" 403 "cross-site request token missing or wrong (reload the page)"
api POST /api/v1/runs "${CK[@]}" "${JS[@]}" -H "X-CSRF-Token: 0123456789abcdef0123456789abcdef" --data-binary '{"app": "nosuchapp"}'
t_err "cookie: a wrong X-CSRF-Token: 403" 403 "cross-site request token missing or wrong (reload the page)"
api POST /api/v1/runs "${CK[@]}" "${JS[@]}" -H "X-CSRF-Token: $CSRF" -H 'Origin: http://evil.example' --data-binary '{"app": "nosuchapp"}'
t_err "cookie: another Origin: 403" 403 "cross-site request refused (Origin is not this server)"
api PATCH "/api/v1/signatures/$S1" "${CK[@]}" "${JS[@]}" --data-binary '{"note": "csrf"}'
t_eq "cookie: a PATCH without the token: 403" "$HTTP_STATUS" 403
t_eq "refused cookie writes changed nothing" "$(pg_q "SELECT count(*) FROM runs")|$(pg_q "SELECT note FROM signatures WHERE id = $S1")" \
	'2|<b>nöte</b> "q"'
api POST /api/v1/runs "${CK[@]}" "${JS[@]}" -H "X-CSRF-Token: $CSRF" -H "Origin: $WEB_URL" --data-binary '{"app": "nosuchapp"}'
t_eq "cookie: with the token and this Origin: 202" "$HTTP_STATUS" 202
api POST /api/v1/runs -H "Cookie: x=1; $(session "$INGEST")" "${JS[@]}" -H "X-CSRF-Token: $CSRF" --data-binary '{"app": "nosuchapp"}'
t_eq "cookie: an ingest token gets no session, may not write" "$HTTP_STATUS" 401
api POST /api/v1/runs -H "Cookie: sm_token=$ANALYST" "${JS[@]}" -H "X-CSRF-Token: $CSRF" --data-binary '{"app": "nosuchapp"}'
t_eq "cookie: an old cookie holding the token itself is no session" "$HTTP_STATUS" 401

# ---- starting a run without scripts: the page form, posted as a browser does (cookie, its token) ----
RF=(-H 'Content-Type: application/x-www-form-urlencoded')
NRUNS=$(pg_q "SELECT count(*) FROM runs")
api GET /runs "${CK[@]}"
t_eq "runs page: no form, a link to it" "$HTTP_STATUS $(grep -c 'id="run-form"' <<<"$HTTP_BODY") $(grep -o '<a id="new-run" class="button" href="/runs/new">New run</a>' <<<"$HTTP_BODY")" \
	'200 0 <a id="new-run" class="button" href="/runs/new">New run</a>'
api GET /runs/new "${CK[@]}"
t_match "run form: a plain POST to /runs/new with the token" "$HTTP_BODY" \
	"<form id=\"run-form\" class=\"grid\" method=\"post\" action=\"/runs/new\"><input type=\"hidden\" name=\"csrf\" value=\"$CSRF\">"
api POST /runs/new "${CK[@]}" "${RF[@]}" --data-binary 'app=nosuchapp&kind=wait&aoi=thread&threshold_mode=ns&threshold=750&delay_ms=300&linkage=single&cut=0.25'
t_eq "run form: without the token: 403, nothing queued" "$HTTP_STATUS $(pg_q "SELECT count(*) FROM runs")" "403 $NRUNS"
api POST /runs/new "${CK[@]}" "${RF[@]}" --data-binary "csrf=$CSRF&app=nosuchapp&kind=wait&aoi=thread&threshold_mode=ns&threshold=750&delay_ms=300&linkage=single&cut=0.25&version=2.1&host=&since=&until=&labels=env%3Dprod%0D%0A&include=app%21*%0D%0A&exclude="
FRUN=$(pg_q "SELECT max(id) FROM runs")
t_eq "run form: queued, 303 to the run's page" "$HTTP_STATUS $(header Location)" "303 /runs/$FRUN"
t_eq "run form: the API's parameters" "$(pg_q "SELECT params->>'app', params->>'kind', params->>'aoi', params->>'threshold_ns', params->>'linkage', params->>'cut', params->'filter'->>'version', params->'filter'->'labels'->>'env', params->>'include' FROM runs WHERE id = $FRUN")" \
	'nosuchapp|wait|thread|750|single|0.25|2.1|prod|["app!*"]'
NRUNS=$(pg_q "SELECT count(*) FROM runs")
api POST /runs/new "${CK[@]}" "${RF[@]}" --data-binary "csrf=$CSRF&app=nosuchapp&kind=wait&aoi=thread&threshold_mode=guideline&threshold=0.1&delay_ms=300&linkage=single&cut=lots"
t_eq "run form: a bad number: 400, the form again naming the field" "$HTTP_STATUS $(grep -o '<span id="run-form-error" class="error" role="alert">[^<]*</span>' <<<"$HTTP_BODY")" \
	'400 <span id="run-form-error" class="error" role="alert">cut: must be a number</span>'
t_match "run form: shown again as sent" "$HTTP_BODY" '<option value="thread" selected>thread</option>.*<input name="cut" value="lots"'
api POST /runs/new "${CK[@]}" "${RF[@]}" --data-binary "csrf=$CSRF&app=nosuchapp&kind=wait&aoi=thread&threshold_mode=fraction&threshold=1.5&delay_ms=300&linkage=single&cut=0.5"
t_eq "run form: the API's validator: the same message" "$HTTP_STATUS $(grep -o 'role="alert">[^<]*<' <<<"$HTTP_BODY")" \
	'400 role="alert">threshold_fraction: must be more than 0 and at most 1<'
api POST /runs/new "${CK[@]}" "${RF[@]}" --data-binary "csrf=$CSRF&app=nosuchapp&kind=sideways&threshold_mode=ns&threshold=5&cut=0.5"
t_match "run form: a bad choice names the field" "$HTTP_STATUS $HTTP_BODY" '^400 .*role="alert">kind: [^<]+<'
api POST /runs/new "${CK[@]}" "${RF[@]}" --data-binary "csrf=$CSRF&app=nosuchapp&threshold_mode=ns&threshold=5&cut=0.5&labels=noequals"
t_match "run form: bad labels" "$HTTP_STATUS $HTTP_BODY" '^400 .*role="alert">labels: write key=value, one per line<'
t_eq "run form: refused forms queued nothing" "$(pg_q "SELECT count(*) FROM runs")" "$NRUNS"

# ---- tokens: an admin's ----
api POST /api/v1/tokens "${AD[@]}" "${JS[@]}" --data-binary '{"role": "ingest", "name": "web-1 agent", "host": "web-1"}'
TOK=$(j 'j["token"]')
export TOKID=$(j 'j["token_id"]')
t_eq "token: created, shown once" "$HTTP_STATUS $(j '[j["role"], j["name"], j["host"], len(j["token"])]') $(header Location)" \
	"201 [\"ingest\",\"web-1 agent\",\"web-1\",67] /api/v1/tokens/$TOKID"
t_eq "token: only its hash is stored" "$(pg_q "SELECT count(*) FROM tokens WHERE token_hash = sha256('$TOK'::bytea) AND host = 'web-1'")" 1
api GET /api/v1/tokens "${AD[@]}"
t_eq "tokens: listed, without hashes" "$HTTP_STATUS $(j 'sorted(j["tokens"][-1])') $(j '[t["host"] for t in j["tokens"] if t["token_id"] == int(E["TOKID"])]')" \
	'200 ["created_at","host","name","revoked_at","role","token_id"] ["web-1"]'
api GET /api/v1/tokens "${AN[@]}"
t_err "tokens: not an analyst's" 403 "tokens are an admin's"
api POST /api/v1/tokens "${AN[@]}" "${JS[@]}" --data-binary '{"role": "admin"}'
t_err "tokens: an analyst may not create one" 403 "tokens are an admin's"
api POST /api/v1/tokens "${AD[@]}" "${JS[@]}" --data-binary '{"role": "analyst", "host": "web-1"}'
t_err "token: a host for an analyst" 400 "host: only ingest tokens are bound to a host"
api POST /api/v1/tokens "${AD[@]}" "${JS[@]}" --data-binary '{"role": "root"}'
t_err "token: a bad role" 400 "role: required, ingest, analyst or admin"
api DELETE "/api/v1/tokens/$TOKID" "${AD[@]}"
t_eq "token: revoked" "$HTTP_STATUS $HTTP_BODY $(pg_q "SELECT revoked_at IS NOT NULL FROM tokens WHERE id = $TOKID")" \
	"200 {\"token_id\": $TOKID, \"revoked\": true}"$'\n'" t"
api DELETE "/api/v1/tokens/$TOKID" "${AD[@]}"
t_err "token: revoked already" 404 "token $TOKID: no active token with that id"

# the dashboard's tokens page: an admin's
api GET /tokens "${AD[@]}"
t_match "tokens page: lists them" "$HTTP_STATUS $HTTP_BODY" '^200 .*<h1>API tokens</h1>.*<td>web-1 agent</td><td>web-1</td>'
api GET /tokens "${AN[@]}"
t_eq "tokens page: not an analyst's" "$HTTP_STATUS" 403
api POST /tokens/new "${AD[@]}" -H 'Content-Type: application/x-www-form-urlencoded' --data-binary 'role=ingest&name=web-2+agent&host=web-2'
t_match "tokens page: a new one shown once" "$HTTP_STATUS $HTTP_BODY" '^200 .*<code class="token">sm_[0-9a-f]{64}</code>'
NEWTOK=$(pg_q "SELECT id FROM tokens WHERE host = 'web-2'")
# the form's first POST only asks (docs/web.md, "Destructive actions"); with confirm=1 it revokes
api POST "/tokens/$NEWTOK/revoke" "${AD[@]}" -H 'Content-Type: application/x-www-form-urlencoded' --data-binary ''
t_match "tokens page: revoke without confirm=1 asks" "$HTTP_STATUS $HTTP_BODY" \
	"^200 .*<h1>Revoke token $NEWTOK\\?</h1>.*action=\"/tokens/$NEWTOK/revoke\".*name=\"confirm\" value=\"1\".*class=\"danger\""
t_eq "tokens page: ... and revokes nothing" "$(pg_q "SELECT revoked_at IS NULL FROM tokens WHERE id = $NEWTOK")" t
api POST "/tokens/$NEWTOK/revoke" "${AD[@]}" -H 'Content-Type: application/x-www-form-urlencoded' --data-binary 'confirm=1'
t_eq "tokens page: revoked, back to the list" "$HTTP_STATUS $(header Location) $(pg_q "SELECT revoked_at IS NOT NULL FROM tokens WHERE id = $NEWTOK")" \
	"303 /tokens t"
# a form field that storing would change (cut at a NUL, a control character, not UTF-8): refused,
# naming the field, and nothing stored
FORM=(-H 'Content-Type: application/x-www-form-urlencoded')
api POST /tokens/new "${AD[@]}" "${FORM[@]}" --data-binary 'role=ingest&name=web-3%00agent&host=web-3'
t_eq "form: a NUL in a token's name" "$HTTP_STATUS $HTTP_BODY" "400 form field 'name' holds a NUL byte"$'\n'
api POST /tokens/new "${AD[@]}" "${FORM[@]}" --data-binary 'role=ingest&name=web-3&host=web-3%00.evil'
t_eq "form: a NUL in a token's host" "$HTTP_STATUS $HTTP_BODY" "400 form field 'host' holds a NUL byte"$'\n'
api POST /tokens/new "${AD[@]}" "${FORM[@]}" --data-binary 'role=ingest&name=web-3%1b%5b31m&host=web-3'
t_eq "form: an escape character" "$HTTP_STATUS $HTTP_BODY" "400 form field 'name' holds a control character"$'\n'
api POST /tokens/new "${AD[@]}" "${FORM[@]}" --data-binary 'role=ingest&name=web-3%ff&host=web-3'
t_eq "form: not UTF-8" "$HTTP_STATUS $HTTP_BODY" "400 form field 'name' is not UTF-8"$'\n'
api POST /signatures/new "${AN[@]}" "${FORM[@]}" --data-binary 'name=sig%00hidden&frames=a%0Ab'
t_eq "form: a NUL in a signature's name" "$HTTP_STATUS $HTTP_BODY" "400 form field 'name' holds a NUL byte"$'\n'
api POST /fleet/settings "${AD[@]}" "${FORM[@]}" --data-binary 'app=nginx%00x&sample_hz=97'
t_eq "form: a NUL in the fleet settings' app" "$HTTP_STATUS $HTTP_BODY" "400 form field 'app' holds a NUL byte"$'\n'
t_eq "form: nothing stored from refused forms" \
	"$(pg_q "SELECT (SELECT count(*) FROM tokens WHERE host LIKE 'web-3%' OR name LIKE 'web-3%'),
		(SELECT count(*) FROM signatures WHERE name LIKE 'sig%'), (SELECT count(*) FROM agent_settings WHERE app LIKE 'nginx%')")" \
	'0|0|0'
api POST /tokens/new "${AD[@]}" "${FORM[@]}" --data-binary 'role=ingest&name=web-3%09agent%0D%0A&host=web-3'
t_eq "form: tab, CR and newline are text" "$HTTP_STATUS $(pg_q "SELECT count(*) FROM tokens WHERE host = 'web-3'")" '200 1'

# ---- the fleet: what agents reported (rows as sm-ingest's POST /api/v1/agents/report writes them) ----
pg_q "INSERT INTO agent_procs (host, pid, started_at, exe, build_id, mode, agent_version, app, first_seen, last_seen,
	exited, units, violations, drops, spool_backlog, ship_errors, collector) VALUES
	('web-1', 100, now() - interval '2 hours', '/usr/sbin/nginx', 'aaaabbbbccccdddd', 'guard', '1.0', 'nginx',
	 now() - interval '2 hours', now() - interval '20 seconds', false, 5000, 12, 1, 0, 0, 'host'),
	('web-1', 90, now() - interval '3 hours', '/usr/sbin/nginx', 'old0build', 'train', '0.9', 'nginx',
	 now() - interval '3 hours', now() - interval '2 hours', true, 900, 0, 0, 0, 0, 'process'),
	('db-1', 200, now() - interval '1 day', '/usr/lib/postgresql/15/bin/postgres', 'pgpgpgpg', 'guard', '1.0', 'pg',
	 now() - interval '1 day', now() - interval '10 minutes', false, 800, 3, 0, 4, 2, 'process'),
	('<b>x</b>', 300, now() - interval '1 day', '/bin/x', '', 'train', '1.0', 'x',
	 now() - interval '1 day', now() - interval '1 hour', true, 10, 0, 0, 0, 0, 'process');
	INSERT INTO agent_hours VALUES ('web-1', date_trunc('hour', now()), 3000, 5),
	 ('web-1', date_trunc('hour', now()) - interval '2 hours', 2000, 7),
	 ('web-1', date_trunc('hour', now()) - interval '30 hours', 100, 50),
	 ('db-1', date_trunc('hour', now()) - interval '1 hour', 800, 3)" >/dev/null
api GET /api/v1/hosts "${AN[@]}"
t_eq "hosts: silent first, then by violations; status, processes and what they run" \
	"$HTTP_STATUS $(j '[[h["host"], h["status"], h["processes_live"], h["processes_silent"], h["apps"], h["modes"], h["build_ids"], h["agent_versions"]] for h in j["hosts"]]') $(j 'j["total"]')" \
	'200 [["db-1","silent",0,1,["pg"],["guard"],["pgpgpgpg"],["1.0"]],["web-1","live",1,0,["nginx"],["guard"],["aaaabbbbccccdddd"],["1.0"]],["<b>x</b>","stopped",0,0,["x"],["train"],[""],["1.0"]]] 3'
t_eq "hosts: the last 24 hours, by hour, oldest first" \
	"$(j '[[h["host"], h["violations_24h"], h["units_24h"], len(h["violations_by_hour"]), h["violations_by_hour"][-3:]] for h in j["hosts"][:2]]')" \
	'[["db-1",3,800,24,[0,3,0]],["web-1",12,5000,24,[7,0,5]]]'
t_eq "hosts: counters of the processes still running, seconds since the last report" \
	"$(j '[[h["drops"], h["spool_backlog"], h["ship_errors"], 500 < h["seconds_since_report"] < 700] for h in j["hosts"][:1]]')" '[[0,4,2,true]]'
api GET '/api/v1/hosts?silent_after=3600' "${AN[@]}"
t_eq "hosts: silent_after moves the line" "$(j '[h["status"] for h in j["hosts"]]')" '["live","live","stopped"]'
api GET '/api/v1/hosts?status=silent' "${AN[@]}"
t_eq "hosts: by status" "$(j '[h["host"] for h in j["hosts"]]') $(j 'j["total"]')" '["db-1"] 1'
api GET '/api/v1/hosts?status=down' "${AN[@]}"
t_err "hosts: a bad status" 400 "status: must be live, silent or stopped"
api GET '/api/v1/hosts?silent_after=1' "${AN[@]}"
t_err "hosts: silent_after too small" 400 "silent_after: must be a whole number from 10 to 604800"
api GET /api/v1/hosts -H "Authorization: Bearer $INGEST"
t_eq "hosts: not an ingest token's" "$HTTP_STATUS" 401
api GET /api/v1/hosts/web-1 "${AN[@]}"
t_eq "host: its processes, live first, and its hours" \
	"$HTTP_STATUS $(j '[[p["pid"], p["status"], p["mode"], p["collector"], p["build_id"], p["units"]] for p in j["processes"]]') $(j '[len(j["hours"]), j["hours"][-1]["violations"], j["hours"][-3]["units"]]') $(j 'j["status"]')" \
	'200 [[100,"live","guard","host","aaaabbbbccccdddd",5000],[90,"exited","train","process","old0build",900]] [24,5,2000] live'
api GET '/api/v1/hosts/web-1?hours=48' "${AN[@]}"
t_eq "host: hours=48 reaches the older hour" "$(j '[len(j["hours"]), sum(h["violations"] for h in j["hours"])]')" '[48,62]'
api GET /api/v1/hosts/%3Cb%3Ex%3C%2Fb%3E "${AN[@]}"
t_eq "host: any name, percent-encoded" "$HTTP_STATUS $(j 'j["host"]')" '200 <b>x</b>'
api GET /api/v1/hosts/nosuchhost "${AN[@]}"
t_err "host: unknown" 404 "host 'nosuchhost': no agent has reported from it"
api GET /fleet "${AN[@]}"
t_match "fleet page: hosts, silent first, with the alert" "$HTTP_STATUS $HTTP_BODY" \
	'^200 .*<h1>Fleet</h1>.*<a href="/fleet\?status=silent">1 host is silent</a>.*<a href="/fleet/db-1">db-1</a></td><td><span class="status silent">silent</span>.*<a href="/fleet/web-1">web-1</a></td><td><span class="status live">live</span>'
t_match "fleet page: violations per hour drawn, with their total" "$HTTP_BODY" '<title>12 violations in 24 h \(most in an hour: 7\)</title>'
t_match "fleet page: a host's name is escaped" "$HTTP_BODY" '<a href="/fleet/%3Cb%3Ex%3C%2Fb%3E">&lt;b&gt;x&lt;/b&gt;</a>'
t_match "fleet page: what the shipping budget sampled away, per app and host" "$HTTP_BODY" \
	'<h2>Sampled away</h2>.*<tr><td>nginx</td><td><a href="/fleet/web-1">web-1</a></td><td class="n">12</td><td class="n">1</td><td class="n">[0-9]+</td><td class="n">[0-9]+</td><td class="n">[0-9.]+ %</td></tr>'
t_eq "fleet page: nothing unescaped" "$(grep -c '<b>x' <<<"$HTTP_BODY")" 0
api GET '/fleet?status=stopped' "${AN[@]}"
t_match "fleet page: filtered" "$HTTP_BODY" '<span>1–1 of 1</span>'
api GET /fleet/web-1 "${AN[@]}"
t_match "host page: processes and the link to its streams" "$HTTP_STATUS $HTTP_BODY" \
	'^200 .*<h1><bdi>web-1</bdi> <span class="status live">.*<a href="/streams\?host=web-1">its streams</a>.*<td class="n">100</td><td>nginx</td><td><code>/usr/sbin/nginx</code></td><td><code title="aaaabbbbccccdddd">aaaabbbbcccc</code></td><td>guard</td><td>host</td><td><span class="status live">'
api GET /fleet/nosuchhost "${AN[@]}"
t_eq "host page: unknown host" "$HTTP_STATUS" 404
# two saturated hours of a host and counters at the largest bigint: answered, sums clamped
pg_q "INSERT INTO agent_procs (host, pid, started_at, exe, mode, agent_version, units, violations, drops, ship_errors)
	SELECT 'big-1', pid, now() - interval '1 hour', '/bin/big', 'guard', '1.0', 9223372036854775807,
	 9223372036854775807, 9223372036854775807, 9223372036854775807 FROM generate_series(1, 2) pid;
	INSERT INTO agent_hours VALUES ('big-1', date_trunc('hour', now()), 9223372036854775807, 9223372036854775807),
	 ('big-1', date_trunc('hour', now()) - interval '1 hour', 9223372036854775807, 9223372036854775807)" >/dev/null
api GET /api/v1/hosts "${AN[@]}"
t_eq "hosts: two saturated hours and huge counters answered, sums clamped to the largest bigint" \
	"$HTTP_STATUS $(j '[[h["host"], h["units_24h"], h["violations_24h"], h["violations_by_hour"][-2:], h["drops"], h["ship_errors"]] for h in j["hosts"] if h["host"] == "big-1"]') $(j 'j["total"]')" \
	'200 [["big-1",9223372036854775807,9223372036854775807,[9223372036854775807,9223372036854775807],9223372036854775807,9223372036854775807]] 4'
api GET /fleet "${AN[@]}"
t_match "fleet page: the same, its total clamped" "$HTTP_STATUS $HTTP_BODY" \
	'^200 .*<title>9223372036854775807 violations in 24 h \(most in an hour: 9223372036854775807\)</title>'
pg_q "DELETE FROM agent_procs WHERE host = 'big-1'; DELETE FROM agent_hours WHERE host = 'big-1'" >/dev/null
# a build's profile as sm-ingest merges it from the uploads (summary as gp_summary writes it)
pg_q "INSERT INTO profile_uploads VALUES ('aaaabbbbccccdddd', 'web-1', 100, now(), '/usr/sbin/nginx', 5000, '{}', now());
	INSERT INTO profiles_merged (build_id, exe, profile, hosts, processes, units, summary, merge_ms) VALUES
	('aaaabbbbccccdddd', '/usr/sbin/nginx', '{}', 3, 7, 5000, '{\"exe\": \"/usr/sbin/nginx\", \"units\": 5000,
	 \"k\": 4, \"loops\": [{\"symbol\": \"nginx!ngx_process_events_and_timers\", \"call\": \"epoll_wait\",
	 \"units\": 5000, \"mean_ns\": 2000000, \"threshold_ns\": 9000000, \"types\": [{\"name\": \"u0\",
	 \"units\": 4000, \"mean_ns\": 1500000, \"sd_ns\": 500000, \"threshold_ns\": 3500000,
	 \"contexts\": [\"read in nginx!ngx_unix_recv\", \"<script>\"]}]}]}', 12.5);
	UPDATE profiles_merged SET held_back = '[{\"host\": \"<i>evil</i>\", \"reason\": \"loop nginx!x: threshold 9000000000 ns, 1e+03 times the median of 3 hosts (9000000 ns): more than 4 times and 3 MADs off\"}]'" >/dev/null
api GET /api/v1/profiles "${AN[@]}"
t_eq "profiles: each build's merged profile, where it was learnt" \
	"$HTTP_STATUS $(j '[[p["build_id"], p["hosts"], p["processes"], p["units"], p["stale"], p["summary"]["loops"][0]["types"][0]["threshold_ns"]] for p in j["profiles"]]') $(j 'j["total"]')" \
	'200 [["aaaabbbbccccdddd",3,7,5000,false,3500000]] 1'
t_eq "profiles: the hosts the merge held back, with the reason" "$(j '[p["held_back"] for p in j["profiles"]]')" \
	'[[{"host":"<i>evil</i>","reason":"loop nginx!x: threshold 9000000000 ns, 1e+03 times the median of 3 hosts (9000000 ns): more than 4 times and 3 MADs off"}]]'
api GET /fleet "${AN[@]}"
t_match "fleet page: the profiles with their unit types and thresholds" "$HTTP_BODY" \
	'<h2>Profiles learnt by the fleet</h2>.*<td><code>/usr/sbin/nginx</code></td><td><code title="aaaabbbbccccdddd">aaaabbbbcccc</code></td><td class="n">3</td><td class="n">7</td><td class="n">5,000</td>.*<td>u0</td><td class="n">4,000</td><td class="n">1.5 ms</td><td class="n">500 µs</td><td class="n">3.5 ms</td><td><bdi>read in nginx!ngx_unix_recv</bdi>; <bdi>&lt;script&gt;</bdi></td>'
t_match "fleet page: the hosts held back, escaped" "$HTTP_BODY" \
	'<tr class="held"><td colspan="13">Held back from the merge \(far off the other hosts\): <b>&lt;i&gt;evil&lt;/i&gt;</b>: loop nginx!x: threshold 9000000000 ns, 1e\+03 times the median of 3 hosts \(9000000 ns\): more than 4 times and 3 MADs off</td></tr>'

# ---- settings pushed to the agents: an admin's ----
api POST /api/v1/agent-settings "${AD[@]}" "${JS[@]}" --data-binary '{"app": "nginx", "guard": false, "k": 6.5, "note": "noisy after the 2.5 rollout"}'
t_eq "agent settings: set for an app" "$HTTP_STATUS $(j '[[s["app"], s["guard"], s["k"], s["sample_hz"], s["min_wait_us"], s["reports_per_min"], s["note"]] for s in j["settings"]]')" \
	'200 [["nginx",false,6.5,null,null,null,"noisy after the 2.5 rollout"]]'
api POST /api/v1/agent-settings "${AD[@]}" "${JS[@]}" --data-binary '{"app": "*", "sample_hz": 20, "min_wait_us": 5000, "reports_per_min": 2}'
t_eq "agent settings: every app's row first" "$(j '[[s["app"], s["sample_hz"], s["min_wait_us"], s["reports_per_min"]] for s in j["settings"]]')" \
	'[["*",20,5000,2],["nginx",null,null,null]]'
api POST /api/v1/agent-settings "${AD[@]}" "${JS[@]}" --data-binary '{"app": "nginx", "guard": true}'
t_eq "agent settings: a new post replaces the app's row" "$(j '[[s["app"], s["guard"], s["k"], s["note"]] for s in j["settings"] if s["app"] == "nginx"]')" \
	'[["nginx",true,null,""]]'
api POST /api/v1/agent-settings "${AD[@]}" "${JS[@]}" --data-binary '{"app": "nginx", "k": -1}'
t_err "agent settings: k out of range" 400 "k: a number from 0 to 1000, or null (as the agents were started)"
api POST /api/v1/agent-settings "${AD[@]}" "${JS[@]}" --data-binary '{"app": "nginx", "sample_hz": 2.5}'
t_err "agent settings: a whole number" 400 "sample_hz: a whole number from 1 to 10000, or null (as the agents were started)"
api POST /api/v1/agent-settings "${AD[@]}" "${JS[@]}" --data-binary '{"app": "nginx", "guard": "no"}'
t_err "agent settings: guard is a boolean" 400 "guard: true, false, or null (as the agents were started)"
api POST /api/v1/agent-settings "${AD[@]}" "${JS[@]}" --data-binary '{"guard": false}'
t_err "agent settings: the app is required" 400 "app: required, 1 to 255 bytes ('*': every app)"
api POST /api/v1/agent-settings "${AD[@]}" "${JS[@]}" --data-binary '{"app": "x", "gaurd": false}'
t_err "agent settings: an unknown field" 400 "gaurd: unknown field"
api POST /api/v1/agent-settings "${AN[@]}" "${JS[@]}" --data-binary '{"app": "nginx", "guard": false}'
t_err "agent settings: not an analyst's to change" 403 "agent settings are an admin's"
api GET /api/v1/agent-settings "${AN[@]}"
t_eq "agent settings: an analyst reads them" "$HTTP_STATUS $(j 'len(j["settings"])')" "200 2"
api DELETE "/api/v1/agent-settings/%2A" "${AD[@]}"
t_eq "agent settings: deleted" "$HTTP_STATUS $(j '[s["app"] for s in j["settings"]]')" '200 ["nginx"]'
api DELETE "/api/v1/agent-settings/%2A" "${AD[@]}"
t_err "agent settings: nothing to delete" 404 "app '*': no settings pushed to it"
t_eq "agent settings: stored" "$(pg_q "SELECT app, guard FROM agent_settings")" "nginx|t"
api POST /fleet/settings "${AD[@]}" "${FORM[@]}" --data-binary 'app=redis&guard=off&k=&sample_hz=10&min_wait_us=&reports_per_min=1&note=calm+%3Cit%3E'
t_eq "fleet page: an admin pushes settings with the form" "$HTTP_STATUS $(header Location) $(pg_q "SELECT guard, k IS NULL, sample_hz, min_wait_us IS NULL, reports_per_min, note FROM agent_settings WHERE app = 'redis'")" \
	"303 /fleet f|t|10|t|1|calm <it>"
api POST /fleet/settings "${AD[@]}" "${FORM[@]}" --data-binary 'app=redis&sample_hz=0.5'
t_match "fleet page: a bad number is refused with the reason" "$HTTP_STATUS $HTTP_BODY" \
	'^400 .*sample_hz: a whole number from 1 to 10000, or empty \(as the agents were started\)'
api POST /fleet/settings "${AN[@]}" "${FORM[@]}" --data-binary 'app=redis&guard=on'
t_eq "fleet page: not an analyst's" "$HTTP_STATUS $(pg_q "SELECT guard FROM agent_settings WHERE app = 'redis'")" "403 f"
api GET /fleet "${AD[@]}"
t_match "fleet page: the settings, escaped, with a remove button for an admin" "$HTTP_BODY" \
	'<h2>Settings pushed to the agents</h2>.*<td>redis</td><td><span class="bad">off</span></td><td class="n">–</td><td class="n">10</td><td class="n">–</td><td class="n">1</td><td>calm &lt;it&gt;</td>.*action="/fleet/settings/delete"'
t_match "fleet page: Remove is a danger button that asks first" "$HTTP_BODY" \
	'<form method="post" action="/fleet/settings/delete" data-confirm="Remove the settings pushed to redis\? Its agents go back to the settings they were started with."><input type="hidden" name="app" value="redis"><input type="hidden" name="csrf" value=""><button type="submit" class="danger">Remove</button></form>'
api POST /fleet/settings/delete "${AD[@]}" "${FORM[@]}" --data-binary 'app=redis'
t_eq "fleet page: Remove asks first (no script): the app carried, nothing removed" \
	"$HTTP_STATUS $(grep -o '<form class="confirm" method="post" action="/fleet/settings/delete"><input type="hidden" name="csrf" value=""><input type="hidden" name="app" value="redis"><p>' <<<"$HTTP_BODY") $(pg_q "SELECT count(*) FROM agent_settings WHERE app = 'redis'")" \
	'200 <form class="confirm" method="post" action="/fleet/settings/delete"><input type="hidden" name="csrf" value=""><input type="hidden" name="app" value="redis"><p> 1'
api POST /fleet/settings/delete "${AD[@]}" "${FORM[@]}" --data-binary 'app=redis&confirm=1'
t_eq "fleet page: removed" "$HTTP_STATUS $(pg_q "SELECT count(*) FROM agent_settings WHERE app = 'redis'")" "303 0"

# ---- alert rules and schedules: one validator for the API's body and the Alerts page's form ----
HOOKURL=https://hooks.example.com/stackmine
# page_err: the error paragraph of the form that was refused
page_err() { grep -o "<form id=\"$1\"[^>]*>.*" <<<"$HTTP_BODY" | grep -o '<p class="error" role="alert">[^<]*</p>' | head -n 1; }
api POST /api/v1/alert-rules "${AD[@]}" "${JS[@]}" --data-binary "{\"name\": \"big\", \"type\": \"new_cluster\", \"min_share\": 2, \"webhook\": \"$HOOKURL\"}"
t_err "alert rule API: min_share out of range" 400 "min_share: a number from 1e-09 to 1"
api POST /alerts/rules "${AD[@]}" "${FORM[@]}" --data-binary "name=big&type=new_cluster&min_share=2&webhook=$HOOKURL"
t_eq "alert rule form: the same message, on the page, in its form" "$HTTP_STATUS $(page_err rule-form)" \
	'400 <p class="error" role="alert">min_share: a number from 1e-09 to 1</p>'
t_match "alert rule form: the fields as sent" "$HTTP_BODY" '<input name="name" value="big" required maxlength="255">.*<option value="new_cluster" selected>.*<input name="min_share" value="2" inputmode="decimal">'
api POST /api/v1/alert-rules "${AD[@]}" "${JS[@]}" --data-binary "{\"name\": \"sig\", \"type\": \"signature_cost\", \"limit_ns_per_hour\": 5, \"webhook\": \"$HOOKURL\"}"
t_err "alert rule API: signature_cost without its signature" 400 "signature_id: required for signature_cost"
api POST /alerts/rules "${AD[@]}" "${FORM[@]}" --data-binary "name=sig&type=signature_cost&signature_id=&limit_ns_per_hour=5&webhook=$HOOKURL"
t_eq "alert rule form: an empty field is one not given" "$HTTP_STATUS $(page_err rule-form)" \
	'400 <p class="error" role="alert">signature_id: required for signature_cost</p>'
api POST /alerts/rules "${AD[@]}" "${FORM[@]}" --data-binary "name=sig&type=signature_cost&signature_id=1.5&limit_ns_per_hour=5&webhook=$HOOKURL"
t_eq "alert rule form: a whole number" "$HTTP_STATUS $(page_err rule-form)" \
	'400 <p class="error" role="alert">signature_id: a whole number from 1 to 9e+15</p>'
api POST /alerts/rules "${AD[@]}" "${FORM[@]}" --data-binary "name=&type=new_cluster&min_share=0.5&webhook=$HOOKURL"
t_eq "alert rule form: the name" "$HTTP_STATUS $(page_err rule-form)" '400 <p class="error" role="alert">name: required, 1 to 255 bytes</p>'
api POST /alerts/rules "${AD[@]}" "${FORM[@]}" --data-binary "name=x&type=new_cluster&min_share=0.5&webhook=ftp%3A%2F%2Fx"
t_match "alert rule form: the webhook's check" "$HTTP_STATUS $(page_err rule-form)" '^400 <p class="error" role="alert">webhook: [^<]+</p>$'
api POST /alerts/rules "${AN[@]}" "${FORM[@]}" --data-binary "name=x&type=new_cluster&min_share=0.5&webhook=$HOOKURL"
t_eq "alert rule form: an admin's, as in the API" "$HTTP_STATUS $(pg_q "SELECT count(*) FROM alert_rules")" "403 0"
api POST /alerts/rules "${CK[@]}" "${FORM[@]}" --data-binary "name=x&type=new_cluster&min_share=0.5&webhook=$HOOKURL"
t_eq "alert rule form: a cookie without the request token" "$HTTP_STATUS $(pg_q "SELECT count(*) FROM alert_rules")" "403 0"
api POST /alerts/rules "${AD[@]}" "${FORM[@]}" --data-binary "name=new+clusters+%3Cb%3E&app=webapp&type=new_cluster&min_share=+0.05+&webhook=$HOOKURL"
t_eq "alert rule form: made, 303 back to the page" "$HTTP_STATUS $(header Location) $(pg_q "SELECT name, app, type, min_share, webhook, signature_id IS NULL FROM alert_rules")" \
	"303 /alerts new clusters <b>|webapp|new_cluster|0.05|$HOOKURL|t"
FRULE=$(pg_q "SELECT id FROM alert_rules")
api GET /api/v1/alert-rules "${AD[@]}"
t_eq "alert rule form: the API lists it" "$(j '[(r["rule_id"], r["name"], r["min_share"]) for r in j["rules"]]')" "[[$FRULE,\"new clusters <b>\",0.05]]"

api POST /api/v1/schedules "${AD[@]}" "${JS[@]}" --data-binary '{"app": "webapp", "kind": "run", "every_s": 600.5, "window_s": 3600}'
t_err "schedule API: every_s whole" 400 "every_s: a whole number from 60 to 604800"
api POST /alerts/schedules "${AD[@]}" "${FORM[@]}" --data-binary 'app=webapp&kind=run&every_s=600.5&window_s=3600'
t_eq "schedule form: the same message" "$HTTP_STATUS $(page_err schedule-form)" '400 <p class="error" role="alert">every_s: a whole number from 60 to 604800</p>'
api POST /api/v1/schedules "${AD[@]}" "${JS[@]}" --data-binary '{"app": "webapp", "kind": "run", "every_s": 600}'
t_err "schedule API: window_s required" 400 "window_s: required, a whole number from 60 to 2592000"
api POST /alerts/schedules "${AD[@]}" "${FORM[@]}" --data-binary 'app=webapp&kind=run&every_s=600&window_s='
t_eq "schedule form: window_s required" "$HTTP_STATUS $(page_err schedule-form)" '400 <p class="error" role="alert">window_s: required, a whole number from 60 to 2592000</p>'
api POST /api/v1/schedules "${AD[@]}" "${JS[@]}" --data-binary '{"app": "webapp", "kind": "run", "every_s": 600, "window_s": 3600, "params": [1]}'
t_err "schedule API: params an object" 400 "params: an object of run parameters (POST /api/v1/runs)"
api POST /alerts/schedules "${AD[@]}" "${FORM[@]}" --data-binary 'app=webapp&kind=run&every_s=600&window_s=3600&params=%5B1%5D'
t_eq "schedule form: params an object" "$HTTP_STATUS $(page_err schedule-form)" '400 <p class="error" role="alert">params: an object of run parameters (POST /api/v1/runs)</p>'
api POST /alerts/schedules "${AD[@]}" "${FORM[@]}" --data-binary 'app=webapp&kind=run&every_s=600&window_s=3600&params=%7B%22cut%22%3A+7%7D'
t_eq "schedule form: the run parameters checked as a run's" "$HTTP_STATUS $(page_err schedule-form)" '400 <p class="error" role="alert">params: cut: must be from 0 to 1</p>'
t_match "schedule form: the fields as sent" "$HTTP_BODY" '<textarea name="params" rows="2"[^>]*>\{&quot;cut&quot;: 7\}</textarea>'
api POST /alerts/schedules "${AD[@]}" "${FORM[@]}" --data-binary 'app=webapp&kind=run&every_s=600&window_s=3600&params=%7Boops'
t_match "schedule form: params not JSON" "$HTTP_STATUS $(page_err schedule-form)" '^400 <p class="error" role="alert">params: not JSON: [^<]+</p>$'
api POST /alerts/schedules "${AD[@]}" "${FORM[@]}" --data-binary 'app=webapp&kind=sideways&every_s=600&window_s=3600'
t_eq "schedule form: the kind" "$HTTP_STATUS $(page_err schedule-form) $(pg_q "SELECT count(*) FROM schedules")" '400 <p class="error" role="alert">kind: required, wait, run or both</p> 0'
api POST /alerts/schedules "${AN[@]}" "${FORM[@]}" --data-binary 'app=webapp&kind=run&every_s=600&window_s=3600'
t_eq "schedule form: an admin's" "$HTTP_STATUS $(pg_q "SELECT count(*) FROM schedules")" "403 0"
api POST /alerts/schedules "${AD[@]}" "${FORM[@]}" --data-binary 'app=webapp&kind=run&every_s=900&window_s=7200&params=%7B%22cut%22%3A+0.6%7D'
t_eq "schedule form: made, 303 back to the page" "$HTTP_STATUS $(header Location) $(pg_q "SELECT app, kind, every_s, window_s, params->>'cut' FROM schedules")" \
	"303 /alerts webapp|run|900|7200|0.6"
FSCHED=$(pg_q "SELECT id FROM schedules")
api GET /api/v1/schedules "${AD[@]}"
t_eq "schedule form: the API lists it" "$(j '[(r["schedule_id"], r["app"], r["every_s"]) for r in j["schedules"]]')" "[[$FSCHED,\"webapp\",900]]"

api GET /alerts "${AD[@]}"
t_match "alerts page: the rule and schedule, each with a Delete that asks" "$HTTP_STATUS $HTTP_BODY" \
	"^200 .*<table id=\"rules\">.*<tr data-id=\"$FRULE\"><td>$FRULE</td><td>new clusters &lt;b&gt;</td>.*<form method=\"post\" action=\"/alerts/rules/$FRULE/delete\" data-confirm=\"Delete alert rule $FRULE\\? This cannot be undone.\"><input type=\"hidden\" name=\"csrf\" value=\"\"><button type=\"submit\" class=\"danger\">Delete</button></form>.*<form id=\"rule-form\" class=\"grid\" method=\"post\" action=\"/alerts/rules\">.*<table id=\"schedules\">.*<form method=\"post\" action=\"/alerts/schedules/$FSCHED/delete\" data-confirm=.*<form id=\"schedule-form\""
t_eq "alerts page: no error shown first" "$(grep -c 'class="error"' <<<"$HTTP_BODY")" 0
api GET /alerts "${AN[@]}"
t_eq "alerts page: an analyst sees no forms" "$HTTP_STATUS $(grep -c 'rule-form\|schedule-form\|/delete' <<<"$HTTP_BODY")" "200 0"
api POST "/alerts/rules/$FRULE/delete" "${AD[@]}" "${FORM[@]}" --data-binary ''
t_eq "alert rule delete: asks first (no script), deletes nothing" "$HTTP_STATUS $(grep -o "<h1>Delete alert rule $FRULE?</h1><form class=\"confirm\" method=\"post\" action=\"/alerts/rules/$FRULE/delete\">" <<<"$HTTP_BODY" | wc -l) $(pg_q "SELECT count(*) FROM alert_rules")" "200 1 1"
api POST "/alerts/rules/$FRULE/delete" "${AN[@]}" "${FORM[@]}" --data-binary 'confirm=1'
t_eq "alert rule delete: an admin's" "$HTTP_STATUS $(pg_q "SELECT count(*) FROM alert_rules")" "403 1"
api POST "/alerts/rules/$FRULE/delete" "${AD[@]}" "${FORM[@]}" --data-binary 'confirm=1'
t_eq "alert rule delete: confirmed, 303 back" "$HTTP_STATUS $(header Location) $(pg_q "SELECT count(*) FROM alert_rules")" "303 /alerts 0"
api POST "/alerts/rules/$FRULE/delete" "${AD[@]}" "${FORM[@]}" --data-binary 'confirm=1'
t_eq "alert rule delete: once" "$HTTP_STATUS" 404
api POST "/alerts/schedules/$FSCHED/delete" "${AD[@]}" "${FORM[@]}" --data-binary ''
t_eq "schedule delete: asks first" "$HTTP_STATUS $(pg_q "SELECT count(*) FROM schedules")" "200 1"
api POST "/alerts/schedules/$FSCHED/delete" "${AD[@]}" "${FORM[@]}" --data-binary 'confirm=1'
t_eq "schedule delete: confirmed" "$HTTP_STATUS $(header Location) $(pg_q "SELECT count(*) FROM schedules")" "303 /alerts 0"

# ---- a stream that retention removed after the run: listed, marked expired, no link ----
pg_q "DELETE FROM event_chunks WHERE stream_ref = (SELECT id FROM streams WHERE stream_id = '$SA');
	DELETE FROM streams WHERE stream_id = '$SA'" >/dev/null
api GET "/api/v1/clusters/$W1" "${AN[@]}"
t_eq "expired stream: still in the cluster's top streams, marked" \
	"$(j '[[s["stream_id"], s["expired"], s["cost_ns"]] for s in j["top_streams"]]')" "[[\"$SC\",false,700],[\"$SB\",false,600],[null,true,500]]"
api GET "/clusters/$W1" "${AN[@]}"
t_match "expired stream: the page says so" "$HTTP_BODY" '<td class="expired" title="[^"]*">stream expired</td>'

# ---- deleting a run: an admin's ----
api DELETE "/api/v1/runs/$RUN" "${AN[@]}"
t_err "delete run: an analyst may not" 403 "deleting a run needs an admin token"
api DELETE "/api/v1/runs/999999" "${AD[@]}"
t_err "delete run: missing" 404 "run 999999: no such run"
LIVE=$(pg_q "INSERT INTO runs (status, params, started_at, heartbeat_at, worker) VALUES ('running', '{}', now(), now(), 'x:1') RETURNING id")
api DELETE "/api/v1/runs/$LIVE" "${AD[@]}"
t_err "delete run: not while it runs" 409 "run $LIVE is running: it can be deleted when it has ended"
pg_q "DELETE FROM runs WHERE id = $LIVE" >/dev/null

# ---- a run being mined: its phase and progress as the heartbeat wrote them (miner/heartbeat.c) ----
LIVE=$(pg_q "INSERT INTO runs (status, params, started_at, heartbeat_at, worker, progress) VALUES ('running', '{\"app\": \"webapp\"}',
	now(), now(), 'x:1', '{\"phase\": \"reading events and extracting the AOI\", \"streams_read\": 412, \"streams\": 689,
	\"aoi_events\": 1234567, \"distinct_stacks\": 0, \"patterns\": 0}') RETURNING id")
api GET "/api/v1/runs/$LIVE" "${AN[@]}"
t_eq "live run: the API's phase and progress" "$(j '[j["status"], j["phase"], j["progress"]["streams_read"], j["progress"]["streams"]]')" \
	'["running","reading events and extracting the AOI",412,689]'
api GET "/runs/$LIVE" "${AN[@]}"
t_match "live run page: the phase and progress instead of counts" "$HTTP_BODY" \
	"<p class=\"progress\" data-progress=\"$LIVE\">reading events and extracting the AOI: 412 of 689 streams, 1,234,567 AOI events</p>"
t_match "live run page: reloads itself without scripts" "$HTTP_BODY" '<noscript><meta http-equiv="refresh" content="2"></noscript>'
t_eq "live run page: no counts" "$(grep -c '<dl class="counts">' <<<"$HTTP_BODY")" 0
pg_q "UPDATE runs SET progress = '{\"phase\": \"clustering\", \"streams_read\": 689, \"streams\": 689, \"patterns\": 1234, \"parts\": 3, \"parts_done\": 3}' WHERE id = $LIVE" >/dev/null
api GET /runs "${AN[@]}"
t_match "runs list: a running run's phase in place of its counts" "$HTTP_BODY" \
	"<td colspan=\"4\" class=\"progress\" data-progress=\"$LIVE\">clustering 1,234 patterns \\(parts: 3 of 3 done\\)</td>"
api GET "/runs/$RUN" "${AN[@]}"
t_eq "done run page: counts, no refresh" "$(grep -c '<dl class="counts">' <<<"$HTTP_BODY") $(grep -c 'http-equiv="refresh"' <<<"$HTTP_BODY")" "1 0"
pg_q "DELETE FROM runs WHERE id = $LIVE" >/dev/null
api DELETE "/api/v1/runs/$RUN" "${AD[@]}"
t_eq "delete run: done, with its results" "$HTTP_STATUS $HTTP_BODY $(pg_q "SELECT count(*) FROM clusters WHERE run_id = $RUN")|$(pg_q "SELECT count(*) FROM patterns WHERE run_id = $RUN")" \
	"200 {\"run_id\": $RUN, \"deleted\": true}"$'\n'" 0|0"
api GET "/api/v1/runs/$RUN" "${AN[@]}"
t_err "delete run: gone" 404 "run $RUN: no such run"
api GET "/signatures" "${AN[@]}"
t_match "delete run: a signature from its cluster says it expired" "$HTTP_BODY" "cluster $W1 of run $RUN \\(expired\\)"

t_eq "every answer had CSP, nosniff, X-Frame-Options, no-store (and JSON for the API) ($HDR_N answers)" "$HDR_BAD" ""
HDR_BAD=
stop_web

# ---- anonymous reads, the body limit ----
start_web --anonymous-read --max-body 1k --no-worker || t_bail "sm-web --anonymous-read starts"
# a queued run (no worker here to take it): waiting, in the API and the list
QUEUED=$(pg_q "INSERT INTO runs (status, params) VALUES ('queued', '{\"app\": \"webapp\"}') RETURNING id")
api GET "/api/v1/runs/$QUEUED" "${AN[@]}"
t_eq "queued run: phase queued" "$(j '[j["status"], j["phase"]]')" '["queued","queued"]'
api GET /runs "${AN[@]}"
t_match "runs list: a queued one waits" "$HTTP_BODY" "<td colspan=\"4\" class=\"progress\" data-progress=\"$QUEUED\">waiting for a worker</td>"
pg_q "DELETE FROM runs WHERE id = $QUEUED" >/dev/null
api GET /api/v1/streams
t_eq "anonymous reads: allowed" "$HTTP_STATUS $(j 'j["total"]')" "200 3"
api POST /api/v1/runs "${JS[@]}" --data-binary '{"app": "webapp"}'
t_err "anonymous reads: writes still need a token" 401 "an analyst or admin token is required"
bhead='{"app": "nosuchapp",' btail='"kind": "wait"}'
body=$bhead$(printf '%*s' $((1024 - ${#bhead} - ${#btail})) '')$btail
api POST /api/v1/runs "${AN[@]}" "${JS[@]}" --data-binary "$body"
t_eq "a body of exactly --max-body (${#body} bytes) is read" "$HTTP_STATUS" 202
api POST /api/v1/runs "${AN[@]}" "${JS[@]}" --data-binary "$body "
t_err "a body over --max-body: 413" 413 "the request body is larger than 1024 bytes"
t_eq "every answer had the security headers here too ($HDR_N answers)" "$HDR_BAD" ""
stop_web

# ---- the export imported into a fresh database exports the same document ----
DB2=${PGDATABASE}_import
pg_q "CREATE DATABASE \"$DB2\"" -d postgres
t_cleanup "pg_q 'DROP DATABASE IF EXISTS \"$DB2\" WITH (FORCE)' -d postgres"
PGDATABASE=$DB2 sm_admin migrate >/dev/null
ADMIN2=$(PGDATABASE=$DB2 mk_token admin 2>/dev/null)
PGDATABASE=$DB2 start_web --no-worker || t_bail "sm-web on the fresh database starts"
api POST /api/v1/signatures/import -H "Authorization: Bearer $ADMIN2" "${JS[@]}" --data-binary "$EXPORT"
t_eq "import: into a fresh database" "$HTTP_STATUS $HTTP_BODY" "200 {\"imported\": 2}"$'\n'
api GET /api/v1/signatures/export -H "Authorization: Bearer $ADMIN2"
t_eq "import: exported again, the identical document" "$HTTP_BODY" "$EXPORT"
api POST /api/v1/signatures/import -H "Authorization: Bearer $ADMIN2" "${JS[@]}" --data-binary "$EXPORT"
t_eq "import: again (updated by name)" "$HTTP_STATUS $HTTP_BODY $(PGDATABASE=$DB2 pg_q "SELECT count(*) FROM signatures")" "200 {\"imported\": 2}"$'\n'" 2"
t_eq "every answer had the security headers on this one too" "$HDR_BAD" ""

# ---- a failure inside the server: its cause is logged, never sent (PostgreSQL's text names tables) ----
PGDATABASE=$DB2 pg_q "ALTER TABLE agent_settings RENAME TO agent_settings_gone"
api GET /api/v1/agent-settings -H "Authorization: Bearer $ADMIN2"
t_eq "a 500 of the API says nothing of the cause" "$HTTP_STATUS $HTTP_BODY" \
	'500 {"error": "internal error: the request failed on the server (its log says why)"}'$'\n'
api GET /fleet -H "Authorization: Bearer $ADMIN2"
t_match "a 500 page says nothing of the cause" "$HTTP_STATUS $HTTP_BODY" \
	'^500 .*<p class="error">The request failed on the server; its log says why.</p>'
t_eq "neither names the table" "$(grep -c 'agent_settings' <<<"$HTTP_BODY")" 0
t_match "the log has the cause" "$(grep 'msg="internal error"' "$WEB_LOG" | tail -n 1)" 'agent_settings.*does not exist'
PGDATABASE=$DB2 pg_q "ALTER TABLE agent_settings_gone RENAME TO agent_settings"

t_done
