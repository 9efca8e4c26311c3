#!/usr/bin/python3
"""web_hostile: seeded random hostile HTTP requests against sm-web over raw sockets.

usage: web_hostile.py HOST PORT TOKEN COUNT SEED [SESSION [STREAM-IDS]]

Paths, query strings, headers and bodies mix the server's real routes with
percent-escapes of every byte, invalid UTF-8, NULs, huge numbers, SQL and
markup fragments, very long values and broken framing (truncated bodies,
bad Content-Length). Every request must get a complete HTTP answer or a
closed connection, never a hang (a body that stops short is waited for until
the server's connection timeout: status -2 here); the server must not answer
5xx except 503.
Prints "requests N, statuses {...}, problems P" and the first problems.
"""
import random
import socket
import sys

host, port, token, count, seed = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
# the browser session's cookie (name=value, from a login), for the cookie-authenticated requests
session = sys.argv[6] if len(sys.argv) > 6 else "sm_session=" + token
# stored streams' ids (comma-separated): a path's id is one of them a third of the time, so that
# the hostile parameters reach the code that reads a stream's events, not only its 404
ids = [i for i in (sys.argv[7] if len(sys.argv) > 7 else "").split(",") if i]
rnd = random.Random(seed)

ROUTES = ["/api/v1/streams", "/api/v1/streams/%s", "/api/v1/streams/%s/profile", "/api/v1/runs/%s/profile",
          "/api/v1/clusters/%s/profile", "/api/v1/runs", "/api/v1/runs/%s", "/api/v1/runs/%s/clusters",
          "/api/v1/runs/%s/coverage", "/api/v1/runs/%s/triage", "/api/v1/clusters/%s", "/api/v1/clusters/%s/stacks",
          "/api/v1/clusters/%s/attribution", "/api/v1/problems/%s", "/api/v1/problems/%s/attribution", "/problems/%s",
          "/api/v1/signatures", "/api/v1/signatures/%s", "/api/v1/signatures/export", "/api/v1/signatures/import",
          "/runs", "/runs/%s", "/clusters/%s", "/streams", "/streams/%s", "/signatures", "/signatures/new",
          "/signatures/%s", "/login", "/logout", "/static/app.js", "/static/%s", "/healthz", "/%s"]
PARAMS = ["limit", "offset", "sort", "kind", "q", "patterns", "app", "host", "version", "label.os", "label.",
          "since", "until", "aoi", "signatures", "focus", "t", "next", "sig", "run", "x", "format"]
NASTY = ["1", "0", "-1", "99999999999999999999999", "abc", "%00", "%ff", "%C3%28", "%E2%82", "'; DROP TABLE runs;--",
         "<script>alert(1)</script>", "\"", "1,2,,3", "all", "1e308", "NaN", "..%2F..%2Fetc%2Fpasswd", "%",
         "%%", "a" * 5000, "\u00e9".encode().decode("latin-1"), "1-2", "5-", "-", "total_cost", "streams",
         "00000000-0000-0000-0000-000000000000", "7fffffffffffffff", "9223372036854775807", "2026-11-22T03:00:00Z",
         "%E2%80%AE", "%ED%A0%80", "%ED%B0%80", "a%00b", "pprof", "folded", "speedscope"]
BODIES = [b"", b"{", b"[]", b"{}", b'{"app": "x"}', b'{"app": "x", "threshold_ns": 1}', b"\x00\xff\xfe",
          b'{"name": "<b>", "frames": ["a"]}', b'{"signatures": [{"name": "n", "frames": []}]}',
          b"csrf=x&name=a&frames=b", b'{"app": ' + b'[' * 5000, b"a" * 20000, b'{"status": "fixed"}']
METHODS = ["GET", "POST", "PATCH", "DELETE", "PUT", "HEAD", "OPTIONS", "GE T", "get"]


def piece():
    v = rnd.choice(NASTY)
    if rnd.random() < 0.2:
        v = "".join("%%%02X" % rnd.randrange(256) for _ in range(rnd.randrange(1, 8)))
    return v


def request():
    path = rnd.choice(ROUTES)
    if "%s" in path:
        path = path % (rnd.choice(ids) if ids and rnd.random() < 0.33 else piece())
    if rnd.random() < 0.7:
        path += "?" + "&".join("%s=%s" % (rnd.choice(PARAMS), piece()) for _ in range(rnd.randrange(1, 5)))
    method = rnd.choice(METHODS)
    body = rnd.choice(BODIES)
    headers = []
    r = rnd.random()
    if r < 0.4:
        headers.append("Authorization: Bearer " + token)
    elif r < 0.6:
        headers.append("Cookie: " + session)
        if rnd.random() < 0.5:
            headers.append("X-CSRF-Token: " + piece())
        if rnd.random() < 0.3:
            headers.append("Origin: " + rnd.choice(["http://evil.example", "null", "http://%s:%d" % (host, port)]))
    elif r < 0.7:
        headers.append("Authorization: " + piece())
    headers.append("Content-Type: " + rnd.choice(["application/json", "application/x-www-form-urlencoded", "text/x",
                                                   piece()]))
    length = len(body)
    if rnd.random() < 0.1:
        length = rnd.choice([len(body) + 10, 0, 999999999])
        if length > len(body) + 10:
            length = len(body) + 5          # a body that stops short: the server must time out or close, not hang forever
    headers.append("Content-Length: %d" % length)
    raw = ("%s %s HTTP/1.1\r\nHost: %s:%d\r\nConnection: close\r\n%s\r\n\r\n" %
           (method, path, host, port, "\r\n".join(headers))).encode("latin-1", "replace") + body
    return raw, length > len(body)


statuses, problems = {}, []
for i in range(count):
    raw, short = request()
    try:
        with socket.create_connection((host, port), timeout=1 if short else 30) as s:
            s.sendall(raw)
            if short:
                s.shutdown(socket.SHUT_WR)    # the server sees the body end early
            data = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
        line = data.split(b"\r\n", 1)[0].decode("latin-1")
        code = int(line.split()[1]) if line.startswith("HTTP/1.") and len(line.split()) > 1 else 0
    except socket.timeout:
        # a body that stops short is waited for until the server's connection timeout (30 s): fine
        code = -2 if short else -1
    except (ConnectionResetError, BrokenPipeError):
        code = 0
    statuses[code] = statuses.get(code, 0) + 1
    if code == -1 or (code >= 500 and code != 503):
        problems.append("%s -> %s" % (raw[:300], code))
print("requests %d, statuses %s, problems %d" % (count, dict(sorted(statuses.items())), len(problems)))
for p in problems[:10]:
    print("  ", p)
