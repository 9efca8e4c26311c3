#!/usr/bin/python3
"""export_check.py PROTO_PY_DIR WHAT FILE: reads a profile file independently of stackmine and
prints what it holds as sorted JSON {"KIND STACK": cost_ns}, STACK the frames outermost first
joined with ';' (or, for speedscope, {"PROFILE NAME": total weight}). It exits 1 with the reason
when the file breaks its format's rules.

WHAT: pprof (a gzipped profile.proto, decoded with Python's protobuf library: string_table[0]
is "", ids are unique and non-zero, every reference resolves, one value per sample type),
pprof-threads (the same keyed "KIND TID STACK"), ndjson (sm-agent import -o output; with
"TID" too when WHAT is ndjson-threads), folded (STACK COUNT lines, or STACK A B for a
comparison), speedscope (speedscope's file format: shared frames, sampled profiles with as
many weights as samples and frame indexes in range)."""
import gzip
import json
import sys

sys.path.insert(0, sys.argv[1])
import profile_pb2  # noqa: E402


def die(msg):
    print(msg)
    sys.exit(1)


def add(d, k, v):
    d[k] = d.get(k, 0) + v


def pprof(path, threads):
    raw = open(path, "rb").read()
    if raw[:2] != b"\x1f\x8b":
        die("pprof: not gzip-compressed")
    p = profile_pb2.Profile()
    p.ParseFromString(gzip.decompress(raw))
    st = p.string_table
    if not st or st[0] != "":
        die("pprof: string_table[0] is not empty")
    fn = {}
    for f in p.function:
        if f.id == 0 or f.id in fn:
            die("pprof: function id %d zero or repeated" % f.id)
        if not 0 <= f.name < len(st):
            die("pprof: function name out of range")
        fn[f.id] = st[f.name]
    loc = {}
    for l in p.location:
        if l.id == 0 or l.id in loc:
            die("pprof: location id %d zero or repeated" % l.id)
        if l.mapping_id:
            die("pprof: location %d has a mapping, none was written" % l.id)
        names = []
        for ln in reversed(l.line):
            if ln.function_id not in fn:
                die("pprof: location %d names no function %d" % (l.id, ln.function_id))
            names.append(fn[ln.function_id])
        loc[l.id] = names
    types = [(st[t.type], st[t.unit]) for t in p.sample_type]
    out = {}
    for s in p.sample:
        if len(s.value) != len(types):
            die("pprof: a sample with %d values for %d types" % (len(s.value), len(types)))
        frames = []
        for i in reversed(s.location_id):
            if i not in loc:
                die("pprof: a sample names no location %d" % i)
            frames += loc[i]
        stack = ";".join(frames)
        tid = [l.num for l in s.label if st[l.key] == "thread_id"]
        kind = [st[l.str] for l in s.label if st[l.key] == "kind"]
        for (t, u), v in zip(types, s.value):
            if u != "nanoseconds" or not v:
                continue
            k = kind[0] if kind else ("wait" if t == "off_cpu" else "run")
            if t in ("a", "b", "diff"):
                add(out, "%s %s %s" % (t, k, stack), v)
            elif threads:
                add(out, "%s %s %s" % (k, tid[0] if tid else "-", stack), v)
            else:
                add(out, "%s %s" % (k, stack), v)
    return out


def ndjson(path, threads):
    out = {}
    for line in open(path, encoding="utf-8"):
        s = json.loads(line)
        for e in s["events"]:
            stack = ";".join(s["frames"][f] for f in s["stacks"][e["stack"]])
            if threads:
                add(out, "%s %s %s" % (e["kind"], e["tid"], stack), e["dur_ns"])
            else:
                add(out, "%s %s" % (e["kind"], stack), e["dur_ns"])
    return out


def folded(path):
    out = {}
    for line in open(path, encoding="utf-8"):
        line = line.rstrip("\n")
        parts = line.rsplit(" ", 2)
        if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
            add(out, "a " + parts[0], int(parts[1]))
            add(out, "b " + parts[0], int(parts[2]))
            continue
        stack, _, n = line.rpartition(" ")
        if not stack or not n.isdigit():
            die("folded: a line that is not STACK COUNT: %r" % line)
        add(out, stack, int(n))
    return out


def speedscope(path):
    d = json.load(open(path, encoding="utf-8"))
    if d.get("$schema") != "https://www.speedscope.app/file-format-schema.json":
        die("speedscope: no $schema")
    frames = d["shared"]["frames"]
    if not all(isinstance(f.get("name"), str) for f in frames):
        die("speedscope: a frame without a name")
    out = {}
    for p in d["profiles"]:
        if p["type"] != "sampled" or p["unit"] != "nanoseconds":
            die("speedscope: profile %r is not sampled in nanoseconds" % p["name"])
        if len(p["samples"]) != len(p["weights"]):
            die("speedscope: %d samples, %d weights" % (len(p["samples"]), len(p["weights"])))
        for s in p["samples"]:
            if not all(isinstance(i, int) and 0 <= i < len(frames) for i in s):
                die("speedscope: a frame index out of range")
        if sum(p["weights"]) != p["endValue"] - p["startValue"]:
            die("speedscope: weights do not add up to endValue")
        out[p["name"]] = sum(p["weights"])
    return out


what, path = sys.argv[2], sys.argv[3]
r = {"pprof": lambda: pprof(path, False), "pprof-threads": lambda: pprof(path, True),
     "ndjson": lambda: ndjson(path, False), "ndjson-threads": lambda: ndjson(path, True),
     "folded": lambda: folded(path), "speedscope": lambda: speedscope(path)}[what]()
print(json.dumps(r, sort_keys=True, ensure_ascii=False))
