#!/usr/bin/env python3
"""Streams whose every value sits at a limit of the wire format (common/wire.h), for ingest's tests.

    edge_streams.py N BATCH.ndjson WANT.tsv

Writes N new streams to BATCH.ndjson, and to WANT.tsv one line per stream: its stream_id, then the
JSON object the stored row must equal (test_ingest.sh builds the same object from the row):
names of 255 bytes of multibyte UTF-8, bidi controls, BOM and line separators in every string,
64 labels, thread names of 64 bytes, a frame of 1024 bytes, a stack of 512 frames, times and ids
at their largest, the largest finite weight.
"""
import json
import sys
import uuid

MAX_NAME, MAX_FRAME, MAX_LABELS, MAX_DEPTH, MAX_THREAD_NAME = 255, 1024, 64, 512, 64
MAX_TIME, MAX_TID = 1 << 62, 2**31 - 1
ODD = "\u202e\u2066\ufeff\u2028\"\\{},'"   # bidi override and isolate, BOM, line separator, quoting


def fill(prefix, nbytes, unit="\u20ac"):
    """prefix, then unit (3 bytes in UTF-8) and ASCII up to exactly nbytes bytes"""
    s = prefix
    while len((s + unit).encode()) <= nbytes:
        s += unit
    while len(s.encode()) < nbytes:
        s += "x"
    assert len(s.encode()) == nbytes
    return s


def stream(i):
    sid = str(uuid.uuid4())
    labels = {fill(f"k{k:02d}{ODD}", MAX_NAME if k % 2 else 32): fill(f"v{ODD}", MAX_NAME)
              for k in range(MAX_LABELS)}
    frames = [fill(f"mod{ODD}!deep_{d}", 40) for d in range(MAX_DEPTH - 1)]
    frames.append(fill(f"mod!{ODD}long", MAX_FRAME))
    s = {
        "v": 1, "stream_id": sid,
        "host": fill(f"h{i}{ODD}", MAX_NAME), "app": fill(f"a{ODD}", MAX_NAME),
        "version": fill(ODD, MAX_NAME), "build_id": fill("b" + ODD, MAX_NAME),
        "labels": labels,
        "threads": {str(MAX_TID): fill("t" + ODD, MAX_THREAD_NAME), "0": "swapper"},
        "weight": 1.7976931348623157e308,
        "symptom": {"kind": "unit_violation", "tid": MAX_TID, "start_ns": 0, "end_ns": MAX_TIME,
                    "unit_type": fill("u" + ODD, MAX_NAME), "threshold_ns": MAX_TIME},
        "frames": frames,
        "stacks": [list(range(MAX_DEPTH)), [MAX_DEPTH - 1]],
        "events": [
            {"kind": "wait", "tid": MAX_TID, "ts_ns": MAX_TIME, "dur_ns": MAX_TIME, "stack": 0,
             "readier_tid": MAX_TID},
            {"kind": "run", "tid": 0, "ts_ns": 0, "dur_ns": 0, "stack": 1},
        ],
    }
    want = {"host": s["host"], "app": s["app"], "version": s["version"], "build_id": s["build_id"],
            "labels": labels, "threads": s["threads"], "weight": s["weight"],
            "symptom": [MAX_TID, 0, MAX_TIME, s["symptom"]["unit_type"], MAX_TIME],
            "events": [[MAX_TID, MAX_TIME, MAX_TIME, MAX_TID, MAX_DEPTH, MAX_FRAME], [0, 0, 0, 0, 1, MAX_FRAME]]}
    return sid, s, want


def main():
    n, batch, wants = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    with open(batch, "w", encoding="utf-8") as b, open(wants, "w", encoding="utf-8") as w:
        for i in range(n):
            sid, s, want = stream(i)
            b.write(json.dumps(s, ensure_ascii=False, separators=(",", ":")) + "\n")
            w.write(sid + "\t" + json.dumps(want, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
