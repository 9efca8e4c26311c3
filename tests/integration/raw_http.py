#!/usr/bin/python3
"""raw_http: one connection, the bytes of stdin sent as they are, every answer read.

usage: raw_http.py HOST PORT [WAIT_S] < REQUEST_BYTES

For what curl will not send: duplicate or conflicting framing headers, a request
smuggled behind a body, header names with spaces. Prints one line
"STATUS[ STATUS...] closed|open" (every status line the server sent on this
connection, then whether it closed the connection within WAIT_S seconds, default
5), then the body of the first answer as received.
"""
import re
import socket
import sys
import time

host, port = sys.argv[1], int(sys.argv[2])
wait = float(sys.argv[3]) if len(sys.argv) > 3 else 5.0
data = sys.stdin.buffer.read()
s = socket.create_connection((host, port), timeout=wait)
try:
    s.sendall(data)
except OSError:
    pass
got, closed, deadline = b"", False, time.monotonic() + wait
while time.monotonic() < deadline:
    s.settimeout(max(0.05, deadline - time.monotonic()))
    try:
        chunk = s.recv(65536)
    except socket.timeout:
        break
    except ConnectionResetError:
        closed = True
        break
    if not chunk:
        closed = True
        break
    got += chunk
s.close()
statuses = re.findall(rb"(?:^|\r\n)HTTP/1\.[01] (\d{3}) ", got)
print(" ".join(x.decode() for x in statuses) or "none", "closed" if closed else "open")
head, _, rest = got.partition(b"\r\n\r\n")
m = re.search(rb"\r\ncontent-length: *(\d+)", head, re.I)
body = rest[:int(m.group(1))] if m else rest
sys.stdout.write(body.decode("utf-8", "replace"))
