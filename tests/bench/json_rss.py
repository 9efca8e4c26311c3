#!/usr/bin/env python3
"""bench/json_rss.py: peak RSS growth per byte of body for each JSON endpoint of one server (make
bench, section "json"; a report, not a test). For each endpoint, a large legitimate body and a
node bomb ({} repeated, in an unknown field, or in a known array where the body is closed) of
about 4 MB: the server's VmHWM is reset (/proc/PID/clear_refs) before each request, and the
figure is (peak RSS - RSS before) / body bytes. Goal: at most 4.

usage: json_rss.py ingest|web BASE_URL PID TOKEN [ADMIN_TOKEN]"""
import http.client
import json
import sys
import urllib.parse

KIND, BASE, PID, TOKEN = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
ADMIN = sys.argv[5] if len(sys.argv) > 5 else TOKEN
U = urllib.parse.urlsplit(BASE)
SIZE = 4 << 20


def status(field):
    with open(f"/proc/{PID}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def post(method, path, body, token):
    with open(f"/proc/{PID}/clear_refs", "w") as f:
        f.write("5")  # VmHWM := VmRSS
    before = status("VmRSS")
    c = http.client.HTTPConnection(U.hostname, U.port, timeout=300)
    c.request(method, path, body=body, headers={"Authorization": "Bearer " + token,
                                                "Content-Type": "application/json"})
    r = c.getresponse()
    r.read()
    c.close()
    return r.status, (status("VmHWM") - before) / len(body)


def strings(n_bytes, width=40):
    return ["f%0*d" % (width - 1, i) for i in range(n_bytes // (width + 3))]


def bomb(n_bytes):
    return "[" + ",".join(["{}"] * (n_bytes // 3)) + "]"


def body_with(base, key, raw):
    return ("{" + json.dumps(key) + ":" + raw + "," + json.dumps(base)[1:]).encode()


if KIND == "ingest":
    uid = "5f0c6f0e-3d0b-4a53-9a43-6d1c2f0a9b1"
    nf = SIZE // 120
    stream = {"v": 1, "stream_id": uid + "1", "host": "h", "app": "jb",
              "symptom": {"kind": "unit_violation", "tid": 1, "start_ns": 1000, "end_ns": 2000},
              "frames": ["app!f%d" % i for i in range(1000)], "stacks": [[0, i] for i in range(1, 1000)],
              "events": [{"kind": "wait", "tid": 1, "ts_ns": 1000 + i, "dur_ns": 500, "stack": i % 999,
                          "readier_tid": 2} for i in range(nf)]}
    report = {"v": 1, "host": "h", "exe": "/bin/x", "mode": "guard", "agent_version": "1", "pid": 7,
              "started_ns": 1000}
    upload = {"v": 1, "host": "h", "pid": 7, "started_ns": 1000,
              "profile": {"format": "stackmine-guard-profile", "v": 1, "build_id": "ab", "exe": "/bin/x",
                          "frames": strings(SIZE)}}
    eps = [("streams", "/api/v1/streams", json.dumps(stream).encode(), body_with(stream, "zz", bomb(SIZE)), TOKEN),
           ("report", "/api/v1/agents/report", body_with(report, "zz", json.dumps(strings(SIZE))),
            body_with(report, "zz", bomb(SIZE)), TOKEN),
           ("profiles", "/api/v1/profiles", json.dumps(upload).encode(), body_with(upload, "zz", bomb(SIZE)), TOKEN)]
    method = {}
else:
    imp = {"version": 1, "signatures": [{"name": "s%d" % i, "frames": strings(400)} for i in range(SIZE // 440)]}
    # a run's parameters are small by nature: the largest legitimate one is 128 globs of 1,000 bytes
    globs = {"include": strings(64 * 1003, 1000), "exclude": strings(64 * 1003, 1000)}
    eps = [("runs", "/api/v1/runs", json.dumps(dict({"app": "jb"}, **globs)).encode(),
            body_with({"app": "jb"}, "include", bomb(SIZE)), TOKEN),
           ("signatures", "/api/v1/signatures", json.dumps({"name": "big", "frames": strings(SIZE)}).encode(),
            body_with({"name": "jb"}, "frames", bomb(SIZE)), TOKEN),
           ("signatures/import", "/api/v1/signatures/import", json.dumps(imp).encode(),
            body_with({"version": 1}, "signatures", bomb(SIZE)), TOKEN),
           ("signatures/1 PATCH", "/api/v1/signatures/1", json.dumps({"note": "n" * SIZE}).encode(),
            ("{\"note\":" + bomb(SIZE) + "}").encode(), TOKEN),
           ("schedules", "/api/v1/schedules", json.dumps({"app": "jb", "kind": "wait", "every_s": 3600,
                                                          "window_s": 3600, "params": globs}).encode(),
            ("{\"app\":\"jb\",\"params\":" + bomb(SIZE) + "}").encode(), ADMIN),
           ("alert-rules", "/api/v1/alert-rules", json.dumps({"name": "n" * SIZE, "type": "new_cluster"}).encode(),
            ("{\"name\":" + bomb(SIZE) + "}").encode(), ADMIN),
           ("agent-settings", "/api/v1/agent-settings", json.dumps({"app": "jb", "note": "n" * SIZE}).encode(),
            ("{\"app\":\"jb\",\"note\":" + bomb(SIZE) + "}").encode(), ADMIN),
           ("tokens", "/api/v1/tokens", json.dumps({"role": "analyst", "name": "n" * SIZE}).encode(),
            ("{\"role\":" + bomb(SIZE) + "}").encode(), ADMIN)]
    method = {"signatures/1 PATCH": "PATCH"}

worst = 0
for name, path, legit, nodes, tok in eps:
    st1, g1 = post(method.get(name, "POST"), path, legit, tok)
    st2, g2 = post(method.get(name, "POST"), path, nodes, tok)
    worst = max(worst, g1, g2)
    print(f"  {KIND:<6} {name:<19} legitimate {len(legit) / 1e6:5.2f} MB ({st1}): peak RSS {g1:+5.2f} B/B;"
          f"  node bomb {len(nodes) / 1e6:5.2f} MB ({st2}): {g2:+5.2f} B/B")
print(f"  {KIND}: the worst {worst:.2f} bytes of peak RSS per body byte (goal <= 4)")
