#!/usr/bin/python3
"""formats_oracle.py PROTO_PY_DIR FILE...: what each profiler capture holds, decoded
independently of stackmine's C importers, as one JSON line per file:

    {"file": F, "format": ..., "streams": n, "events": n, "wait": n, "total_ns": n}

or {"file": F, "refused": "memory"} for memory profiles. pprof's protobuf is decoded with
Python's protobuf library from code that protoc generated into PROTO_PY_DIR; the legacy pprof
formats, OTLP JSON and bcc's text by the plain reading of their layouts (docs/import.md
gives the mapping that both sides follow: which sample type, units, one stream per label
set or process, events of zero value dropped, waker events of duration 0)."""
import gzip
import json
import re
import struct
import sys

sys.path.insert(0, sys.argv[1])
import profile_pb2  # noqa: E402

TIME = {"nanoseconds": 1, "ns": 1, "microseconds": 1000, "us": 1000,
        "milliseconds": 10**6, "ms": 10**6, "seconds": 10**9, "s": 10**9}
WAIT_WORDS = ("delay", "contention", "block", "off_cpu", "offcpu", "off-cpu", "wait", "lock",
              "mutex", "sleep")
THREAD_KEYS = ("thread_id", "tid", "thread.id", "thread", "thread_name", "thread.name", "comm")


def is_wait(t):
    """Whole words only: "wallclock" is not a lock."""
    return any(re.search(r"(?<![A-Za-z])" + re.escape(w) + r"(?![A-Za-z])", t)
               for w in WAIT_WORDS + ("contentions",))


def read(path):
    b = open(path, "rb").read()
    if b[:2] == b"\x1f\x8b":
        b = gzip.decompress(b)
    return b


def pprof_proto(b):
    p = profile_pb2.Profile()
    p.ParseFromString(b)
    st = p.string_table
    types = [(st[t.type], st[t.unit]) for t in p.sample_type]
    prefer = ["cpu", "delay", "off_cpu", "wall", "time"]

    def rank(i):
        if p.default_sample_type and p.default_sample_type == p.sample_type[i].type:
            return 0
        return 1 + prefer.index(types[i][0]) if types[i][0] in prefer else 100
    timed = [i for i, (t, u) in enumerate(types) if u in TIME]
    ptype, punit = (st[p.period_type.type], st[p.period_type.unit]) if p.HasField("period_type") else ("", "")
    if timed:
        idx = min(timed, key=lambda i: (rank(i), i))
        scale = TIME[types[idx][1]]
        wait = is_wait(types[idx][0]) or is_wait(ptype)
    else:
        memory = any(u == "bytes" or t.startswith(("alloc_", "inuse_")) for t, u in types)
        counts = [i for i, (t, u) in enumerate(types) if u == "count"]
        if memory or not counts or punit not in TIME:
            return {"refused": "memory" if memory else "no time"}
        idx = next((i for i in counts if types[i][0] == "samples"), counts[-1])
        scale = p.period * TIME[punit] if p.period > 0 else 10**7
        wait = is_wait(ptype) or is_wait(types[idx][0])
    groups, events, total = set(), 0, 0
    for s in p.sample:
        v = s.value[idx]
        if not v:
            continue
        events += 1
        total += v * scale
        key = []
        for l in s.label:
            k = st[l.key]
            if k in THREAD_KEYS or not k:
                continue
            key.append((k, st[l.str] if l.str else l.num))
        groups.add(tuple(key))
    return {"streams": len(groups), "events": events, "wait": events if wait else 0,
            "total_ns": total}


def legacy_cpu(b):
    for fmt, ws in (("<I", 4), (">I", 4), ("<Q", 8), (">Q", 8)):
        if len(b) < 5 * ws:
            continue
        w = [struct.unpack_from(fmt, b, i * ws)[0] for i in range(5)]
        if w[0] == 0 and w[1] == 3 and w[2] <= 1 and w[3] > 0 and w[4] == 0:
            period_ns, i, events, total = w[3] * 1000, 5, 0, 0
            while True:
                count, depth = (struct.unpack_from(fmt, b, (i + k) * ws)[0] for k in (0, 1))
                if count == 0 and depth == 1 and struct.unpack_from(fmt, b, (i + 2) * ws)[0] == 0:
                    break
                if count:
                    events += 1
                    total += count * period_ns
                i += 2 + depth
            return {"streams": 1, "events": events, "wait": 0, "total_ns": total}
    return None


def legacy_contention(b):
    text = b.decode("utf-8", "replace").splitlines()
    attrs, events, total = {}, 0, 0
    for line in text[1:]:
        m = re.match(r"\s*([\w/ ]+?)\s*=\s*(\S+)", line)
        if m and not events:
            attrs[m.group(1)] = m.group(2)
            continue
        m = re.match(r"\s*(\d+)\s+(\d+)\s*@", line)
        if not m:
            if events:
                break
            continue
        delay = int(m.group(1))
        period = int(attrs.get("sampling period", "1"))
        if attrs.get("format") == "java":
            ns = delay * TIME.get(attrs.get("resolution", "microseconds"), 1000) * period
        else:
            ns = round(delay * 1e9 / int(attrs["cycles/second"]) * period)
        if ns > 0:
            events += 1
            total += ns
    return {"streams": 1, "events": events, "wait": events, "total_ns": total}


def otlp(b):
    d = json.loads(b)
    strings = d["dictionary"]["stringTable"]
    streams, events, wait, total = 0, 0, 0, 0
    for rp in d["resourceProfiles"]:
        n = 0
        for sp in rp.get("scopeProfiles", []):
            for pr in sp.get("profiles", []):
                st = pr.get("sampleType", {})
                t, u = strings[st.get("typeStrindex", 0)], strings[st.get("unitStrindex", 0)]
                pt = pr.get("periodType", {})
                ptype = strings[pt.get("typeStrindex", 0)]
                if u in TIME:
                    scale, counted = TIME[u], False
                else:
                    scale = int(pr.get("period", 0)) * TIME[strings[pt.get("unitStrindex", 0)]]
                    counted = True
                for s in pr.get("samples", []):
                    values = s.get("values") or ([1] * len(s.get("timestampsUnixNano", []))
                                                 if counted else [])
                    for v in values:
                        v = int(v)
                        if v:
                            n += 1
                            total += v * scale
                            wait += is_wait(t) or is_wait(ptype)
        streams += n > 0
        events += n
    return {"streams": streams, "events": events, "wait": wait, "total_ns": total}


def bcc(path, tool):
    """Blocks of indented lines ended by an indented count; unindented "a;b N" lines."""
    lines = open(path, encoding="utf-8", errors="replace").read().splitlines()
    unit = 10**9 // 49 if tool == "bcc-profile" else 1000
    events, total, block, wakers = 0, 0, 0, 0
    for l in lines:
        # each capture's banner gives the frequency of the samples that follow it
        m = re.match(r"Sampling at (\d+) Hertz", l)
        if m and tool == "bcc-profile":
            unit = 10**9 // int(m.group(1))
        s = l.strip()
        if not s:
            block = 0
        elif not l[0].isspace():
            block = 0
            m = re.match(r"(.*;.*)\s(\d+)$", l)
            if m and not l.startswith("#") and int(m.group(2)):
                events += 1
                total += int(m.group(2)) * unit
                segs = m.group(1).strip().split(";")
                if tool == "bcc-offwaketime":
                    # the middle "-" separates the target's part from the waker's (frames, comm)
                    dashes = [i for i, x in enumerate(segs) if x == "-" and i > 0]
                    sep = dashes[(len(dashes) - 1) // 2]
                    wakers += any(x for x in segs[sep + 1:] if x != "-")
                elif tool == "bcc-wakeuptime":
                    wakers += any(x for x in segs[:-1] if x != "-")
        elif re.fullmatch(r"\d+", s):
            if block and int(s):
                events += 1
                total += int(s) * unit
                wakers += 1   # a block names its waker
            block = 0
        else:
            block += 1
    waker = tool in ("bcc-offwaketime", "bcc-wakeuptime")
    # a wait with a waker also gives the waker's stack as an event of duration 0
    return {"streams": 1, "events": events + (wakers if waker else 0),
            "wait": 0 if tool == "bcc-profile" else events, "total_ns": total}


def main():
    for f in sys.argv[2:]:
        fmt = None
        if "/bcc/" in f:
            fmt = {"offcputime": "bcc-offcpu", "offwaketime": "bcc-offwaketime",
                   "wakeuptime": "bcc-wakeuptime", "profile": "bcc-profile"}[
                re.search(r"bcc-(\w+)_example", f).group(1)]
            r = bcc(f, fmt)
        elif "/otel/" in f:
            fmt, r = "otlp", otlp(read(f))
        else:
            b = read(f)
            fmt = "pprof"
            r = legacy_cpu(b)
            if r is None:
                r = legacy_contention(b) if b.lstrip().startswith(b"--- contention") else pprof_proto(b)
        r = dict(file=f, format=fmt, **r)
        print(json.dumps(r, sort_keys=True))


main()
