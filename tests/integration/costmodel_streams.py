#!/usr/bin/env python3
"""Streams whose cost depends on their numeric labels, for the cost model's tests
(test_costmodel.sh, test_web_browser.sh; docs/analysis.md, "What the cost depends on").

One stream per line: a single run event on [main work leaf] whose duration is the stream's cost.
  - app lin: 2 ms + 0.8 ms per unit.calls (1 to 40 calls), with an id, the unit's own duration,
    a constant, a label numeric on 39 of 40 streams and one numeric on 30;
  - app bi: 80 % of the streams near 3 ms, 20 % near 45 ms, the slow ones those with body.size
    above 3200; unit.calls unrelated;
  - app none: one mode (5 ms give or take 4 %) and an unrelated numeric label.
Usage: costmodel_streams.py OUT [APP...] (default: every app).
"""
import json, sys

apps = set(sys.argv[2:]) or {"lin", "bi", "none"}
out = open(sys.argv[1], "w")
def stream(n, app, cost, labels):
    if app in apps:
        out.write(json.dumps({"v": 1, "stream_id": "00000000-0000-4000-8000-%012d" % n, "host": "h%d" % (n % 3),
            "app": app, "labels": labels,
            "symptom": {"kind": "unit_violation", "tid": 1, "start_ns": 0, "end_ns": cost},
            "frames": ["app!main", "app!work", "app!leaf"], "stacks": [[0, 1, 2]],
            "events": [{"kind": "run", "tid": 1, "ts_ns": 0, "dur_ns": cost, "stack": 0}]}) + "\n")
for i in range(40):
    calls = (i * 17) % 40 + 1
    cost = 2000000 + 800000 * calls
    stream(i, "lin", cost, {"unit.calls": str(calls), "unit.duration_ns": str(cost + 1000),
                            "req.id": str(9000 + i), "conf.pool": "16", "region": "eu",
                            # a number on 39 of the 40 streams: numeric, fitted on those 39
                            "batch.size": "n/a" if i == 7 else str(2 * calls + 5 * (i % 3 - 1)),
                            # on 30 of them: not numeric
                            "mixed": "x%d" % i if i % 4 == 0 else str(calls)})
jitter = [0.96, 0.98, 1.0, 1.02, 1.04]
for i in range(50):
    slow = i % 5 == 0
    size = 8192 + 64 * i if slow else 64 * (i + 1)
    cost = int((45000000 if slow else 3000000) * jitter[(i // 5) % 5])
    stream(100 + i, "bi", cost, {"body.size": str(size), "unit.calls": str((i * 7) % 13 + 1)})
for i in range(25):
    stream(200 + i, "none", int(5000000 * jitter[i % 5]), {"queue.depth": str((i * 11) % 25)})
