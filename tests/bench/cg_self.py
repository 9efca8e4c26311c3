#!/usr/bin/env python3
"""cg_self.py FILE N OBJECT [TOP]: the functions of one shared object in a callgrind file, by their
own instructions (not their callees'), per unit of N (requests): instructions and first-level code
lines missed, the TOP largest (8) on one line.

callgrind_annotate reads the files of a --separate-threads run dumped with callgrind_control as one
function; this reads the format itself (compressed names, costs after a calls= line being the
callee's inclusive cost, not the caller's own)."""
import re
import sys
from collections import defaultdict


def main():
    path, n, obj = sys.argv[1], float(sys.argv[2]), sys.argv[3]
    if n <= 0:
        sys.exit("cg_self: no requests counted")
    top = int(sys.argv[4]) if len(sys.argv) > 4 else 8
    names = {"ob": {}, "fn": {}}
    events = []
    cost = defaultdict(lambda: [0, 0])
    cur_ob = cur = i1 = None
    skip = False

    def name(kind, v):
        m = re.match(r"\((\d+)\)(?: (.*))?$", v)
        if not m:
            return v
        if m.group(2) is not None:
            names[kind][m.group(1)] = m.group(2)
        return names[kind].get(m.group(1), v)

    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            c = line[0]
            if c.isdigit() or c in "+-*":
                if skip:
                    skip = False
                elif cur is not None:
                    v = line.split()
                    k = cost[cur]
                    k[0] += int(v[1]) if len(v) > 1 else 0
                    k[1] += int(v[1 + i1]) if i1 is not None and len(v) > 1 + i1 else 0
                continue
            key, _, val = line.partition("=")
            if key == "ob":
                cur_ob = name("ob", val)
            elif key == "fn":
                cur = (cur_ob, name("fn", val)) if cur_ob and cur_ob.endswith("/" + obj) else None
            elif key == "cob":
                name("ob", val)
            elif key == "cfn":
                name("fn", val)
            elif key == "calls":
                skip = True
            elif line.startswith("events:"):
                events = line.split()[1:]
                i1 = events.index("I1mr") if "I1mr" in events else None
    if not events or events[0] != "Ir":
        sys.exit("cg_self: %s: no Ir events" % path)
    rows = sorted(cost.items(), key=lambda kv: -kv[1][0])
    total = sum(v[0] for _, v in rows)
    print("%.0f instructions, %.1f code lines missed per request in %s; %s" % (
        total / n, sum(v[1] for _, v in rows) / n, obj,
        ", ".join("%s %.0f" % (k[1].split("'")[0], v[0] / n) for k, v in rows[:top] if v[0] / n >= 0.5)))


if __name__ == "__main__":
    main()
