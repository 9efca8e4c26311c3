#!/usr/bin/env bash
# ingest: sm-ingest against a real PostgreSQL. What is sent is what is stored, values at
# every limit of the wire format too (frames, stacks, events, labels, symptom, statistics); resends are
# idempotent; NDJSON batches store their valid lines only; every class of bad
# input gets its status and exact error and stores nothing; concurrent senders
# and a SIGTERM under load lose no acknowledged stream and leave nothing half
# written; a full queue answers 503 with Retry-After; retention drops old days.
. "$(dirname "$0")/../lib.sh"

DATA=$SM_REPO/tests/integration/data

# stream ID [SED-EXPR]: the template stream on one line, with its id set.
stream() {
	sed -e "s/@ID@/$1/" ${2:+-e "$2"} "$DATA/stream.json" | tr -d '\n'
	echo
}
newid() { cat /proc/sys/kernel/random/uuid; }
post() { # post BODYFILE [CONTENT-TYPE] [CURL ARGS...]
	local f=$1 ct=${2:-application/json}
	shift 2 2>/dev/null || shift $#
	http POST "$INGEST_URL/api/v1/streams" -H "Authorization: Bearer $TOKEN" \
		-H "Content-Type: $ct" --data-binary "@$f" "$@"
}
nstreams() { pg_q "SELECT count(*) FROM streams"; }
nevents() { pg_q "SELECT coalesce(sum(length(data) / 29), 0) FROM event_chunks"; }

sm_admin migrate >/dev/null || t_bail "migrate"
TOKEN=$(mk_token ingest 2>/dev/null)
ANALYST=$(mk_token analyst 2>/dev/null)
# (no fold in the background here: the checks below fold when they count, and delete what they add)
start_ingest --workers 2 --max-body 1M --max-decoded 8M --auth-cache-ms 0 --fold-interval 3600 || t_bail "sm-ingest starts"

# ---- round trip ----
ID1=$(newid)
stream "$ID1" >"$T_TMP/s1.json"
post "$T_TMP/s1.json"
t_eq "round trip: status" "$HTTP_STATUS" 200
t_eq "round trip: answer" "$HTTP_BODY" '{"accepted":1,"duplicates":0,"rejected":[]}'
t_eq "round trip: stream row" "$(pg_q "SELECT stream_id, host, app, version, build_id, labels::text,
	symptom_kind, symptom_tid, symptom_start_ns, symptom_end_ns, symptom_unit_type, symptom_threshold_ns,
	n_events FROM streams")" \
	"$ID1|web-17|nginx|1.22.1|3f9a0c|{\"os\": \"debian-12\", \"region\": \"eu-west\", \"conf.worker_processes\": \"4\"}|unit_violation|4211|81234000000|81684000000|u7|120000000|3"
t_eq "round trip: events with their frames" "$(pg_q "SELECT e.seq, e.kind, e.tid, e.ts_ns, e.dur_ns,
	coalesce(e.readier_tid::text, '-'),
	(SELECT string_agg(f.name, ' > ' ORDER BY u.o) FROM stacks s,
	   unnest(s.frame_ids) WITH ORDINALITY AS u(fid, o) JOIN frames f ON f.id = u.fid WHERE s.id = e.stack_id)
	FROM events e ORDER BY e.seq")" \
"0|w|4211|81300000000|240000000|0|nginx!main > nginx!ngx_worker_process_cycle > nginx!ngx_http_handler > libc.so.6!fdatasync
1|r|4211|81550000000|10000000|-|nginx!main > nginx!ngx_worker_process_cycle > nginx!ngx_http_handler > nginx!std::map<K, V>::find \"q\"
2|w|4212|81560000000|5000000|4211|nginx!main > nginx!ngx_worker_process_cycle > nginx!ngx_http_handler > nginx!std::map<K, V>::find \"q\""
t_eq "round trip: frames and stacks interned once" "$(pg_q "SELECT (SELECT count(*) FROM frames), (SELECT count(*) FROM stacks)")" "5|2"
t_eq "round trip: frames no event uses are not stored" \
	"$(pg_q "SELECT count(*) FROM frames WHERE name IN ('nginx!unused_frame', 'libc.so.6!__libc_write')")" 0
t_eq "round trip: events are in today's partition" \
	"$(pg_q "SELECT DISTINCT tableoid::regclass FROM event_chunks")" "event_chunks_p$(date -u +%Y%m%d)"

pg_q "SELECT sm_fold_stats(1000)" >/dev/null
t_eq "statistics: N" "$(pg_q "SELECT n FROM stream_total")" 1
t_eq "statistics: n(f)" "$(pg_q "SELECT f.name, s.n FROM frame_stats s JOIN frames f ON f.id = s.frame_id
	WHERE f.name IN ('nginx!main', 'libc.so.6!fdatasync') ORDER BY 1")" "libc.so.6!fdatasync|1
nginx!main|1"
t_eq "statistics: n(g->f)" "$(pg_q "SELECT a.name || ' -> ' || b.name, c.n FROM call_stats c
	JOIN frames a ON a.id = c.caller JOIN frames b ON b.id = c.callee ORDER BY 1")" \
"nginx!main -> nginx!ngx_worker_process_cycle|1
nginx!ngx_http_handler -> libc.so.6!fdatasync|1
nginx!ngx_http_handler -> nginx!std::map<K, V>::find \"q\"|1
nginx!ngx_worker_process_cycle -> nginx!ngx_http_handler|1"

# ---- idempotent resend ----
post "$T_TMP/s1.json"
t_eq "resend: status" "$HTTP_STATUS" 200
t_eq "resend: answer" "$HTTP_BODY" '{"accepted":0,"duplicates":1,"rejected":[]}'
t_eq "resend: nothing more stored" "$(nstreams)|$(nevents)" "1|3"
pg_q "SELECT sm_fold_stats(1000)" >/dev/null
t_eq "resend: statistics unchanged" "$(pg_q "SELECT n FROM stream_total")" 1

# ---- one batch: an id twice, an id stored before, values an array literal must quote ----
IDA=$(newid) IDB=$(newid)
{
	stream "$IDA" 's/"web-17"/"NULL"/; s/"eu-west"/"a \\"quoted\\" {x,y} \\\\ back"/; s/"1.22.1"/"{}"/'
	stream "$IDB" 's/"app": "nginx"/"app": "nginx", "weight": 2.5/; s/"version": "1.22.1",//; s/"build_id": "3f9a0c",//'
	stream "$IDA" 's/"web-17"/"second"/'
	stream "$ID1"
} >"$T_TMP/dups.ndjson"
post "$T_TMP/dups.ndjson" application/x-ndjson
t_eq "one batch, an id twice and one stored before: the first stored, the others duplicates" \
	"$HTTP_STATUS $HTTP_BODY" '200 {"accepted":2,"duplicates":2,"rejected":[]}'
t_eq "one batch: its rows as sent, quotes, braces, backslash, NULL as a name, absent values as NULL" \
	"$(pg_q "SELECT host, labels->>'region', coalesce(version, '<null>'), coalesce(build_id, '<null>'), weight, n_events
		FROM streams WHERE stream_id IN ('$IDA', '$IDB') ORDER BY host")" \
	'NULL|a "quoted" {x,y} \ back|{}|3f9a0c|1|3
web-17|eu-west|<null>|<null>|2.5|3'
t_eq "one batch: events for the two stored only" \
	"$(pg_q "SELECT count(*) FROM events e JOIN streams s ON s.id = e.stream_ref WHERE s.stream_id IN ('$IDA', '$IDB')")" 6
pg_q "DELETE FROM event_chunks WHERE stream_ref IN (SELECT id FROM streams WHERE stream_id IN ('$IDA', '$IDB'))" >/dev/null
pg_q "DELETE FROM streams WHERE stream_id IN ('$IDA', '$IDB')" >/dev/null
pg_q "DELETE FROM stat_deltas" >/dev/null

# ---- the same values in a batch of new streams: one binary COPY (ingest/store.c copy_streams) ----
IDC=$(newid) IDD=$(newid)
{
	stream "$IDC" 's/"web-17"/"NULL"/; s/"eu-west"/"a \\"quoted\\" {x,y} \\\\ back"/; s/"1.22.1"/"{}"/'
	stream "$IDD" 's/"app": "nginx"/"app": "nginx", "weight": 2.5, "role": "baseline"/; s/"version": "1.22.1",//; s/"build_id": "3f9a0c",//; s/"end_ns": 81684000000,/"end_ns": 81684000000/; s/"unit_type": "u7", "threshold_ns": 120000000//'
} >"$T_TMP/new2.ndjson"
post "$T_TMP/new2.ndjson" application/x-ndjson
t_eq "a batch of new streams: both stored" "$HTTP_STATUS $HTTP_BODY" '200 {"accepted":2,"duplicates":0,"rejected":[]}'
t_eq "a batch of new streams: its rows as sent, absent values as NULL, received now" \
	"$(pg_q "SELECT host, labels->>'region', coalesce(version, '<null>'), coalesce(build_id, '<null>'), weight, role,
		coalesce(symptom_unit_type, '<null>'), coalesce(symptom_threshold_ns::text, '<null>'), symptom_tid,
		symptom_start_ns, n_events, abs(extract(epoch FROM now() - received_at)) < 60
		FROM streams WHERE stream_id IN ('$IDC', '$IDD') ORDER BY host")" \
	'NULL|a "quoted" {x,y} \ back|{}|3f9a0c|1|violation|u7|120000000|4211|81234000000|3|t
web-17|eu-west|<null>|<null>|2.5|baseline|<null>|<null>|4211|81234000000|3|t'
t_eq "a batch of new streams: their events under their ids, received when they were" \
	"$(pg_q "SELECT count(*), count(*) FILTER (WHERE e.received_at = s.received_at) FROM events e
		JOIN streams s ON s.id = e.stream_ref WHERE s.stream_id IN ('$IDC', '$IDD')")" "6|6"
post "$T_TMP/new2.ndjson" application/x-ndjson
t_eq "the batch again: duplicates, nothing more stored" "$HTTP_STATUS $HTTP_BODY $(pg_q "SELECT count(*) FROM streams WHERE stream_id IN ('$IDC', '$IDD')")" \
	'200 {"accepted":0,"duplicates":2,"rejected":[]} 2'
pg_q "DELETE FROM event_chunks WHERE stream_ref IN (SELECT id FROM streams WHERE stream_id IN ('$IDC', '$IDD'))" >/dev/null
pg_q "DELETE FROM streams WHERE stream_id IN ('$IDC', '$IDD')" >/dev/null
pg_q "DELETE FROM stat_deltas" >/dev/null

# every value at a limit of the wire format, through the COPY (edge_streams.py): multibyte names of
# 255 bytes, bidi controls, a BOM, a line separator and quoting in every string, 64 labels, thread
# names of 64 bytes, a stack of 512 frames, a frame of 1024 bytes, times and ids at their largest,
# the largest finite weight. Each row read back equals what was sent.
python3 "$SM_REPO/tests/integration/edge_streams.py" 3 "$T_TMP/edge.ndjson" "$T_TMP/edge.want" || t_bail "edge_streams.py"
post "$T_TMP/edge.ndjson" application/x-ndjson
t_eq "values at the limits: stored" "$HTTP_STATUS $HTTP_BODY" '200 {"accepted":3,"duplicates":0,"rejected":[]}'
# edge_row ID: the stored row as edge_streams.py writes what it sent
edge_row() {
	pg_q "SELECT jsonb_build_object('host', host, 'app', app, 'version', version, 'build_id', build_id, 'labels', labels,
		'threads', thread_names, 'weight', weight, 'symptom', jsonb_build_array(symptom_tid, symptom_start_ns,
		symptom_end_ns, symptom_unit_type, symptom_threshold_ns),
		'events', (SELECT jsonb_agg(jsonb_build_array(e.tid, e.ts_ns, e.dur_ns, coalesce(e.readier_tid, 0),
			cardinality(k.frame_ids), (SELECT max(octet_length(f.name)) FROM frames f WHERE f.id = ANY(k.frame_ids)))
			ORDER BY e.seq) FROM events e JOIN stacks k ON k.id = e.stack_id WHERE e.stream_ref = s.id))
		FROM streams s WHERE stream_id = :'id'" -v id="$1"
}
n=0
while IFS=$'\t' read -r id want; do
	got=$(edge_row "$id")
	t_eq "values at the limits: stream $((++n)) read back as sent" \
		"$(pg_q "SELECT CASE WHEN :'got'::jsonb = :'want'::jsonb THEN 'as sent' ELSE :'got' END" -v got="$got" -v want="$want")" \
		"as sent"
done <"$T_TMP/edge.want"
post "$T_TMP/edge.ndjson" application/x-ndjson
t_eq "values at the limits, again: duplicates" "$HTTP_STATUS $HTTP_BODY" '200 {"accepted":0,"duplicates":3,"rejected":[]}'
ids=$(cut -f1 "$T_TMP/edge.want" | sed "s/.*/'&'/" | paste -sd,)
pg_q "DELETE FROM event_chunks WHERE stream_ref IN (SELECT id FROM streams WHERE stream_id IN ($ids))" >/dev/null
pg_q "DELETE FROM streams WHERE stream_id IN ($ids)" >/dev/null
pg_q "DELETE FROM stat_deltas" >/dev/null

# ---- packed events: a chunk a row of up to 1,024 events (common/evpack.h) ----
# 2,049 events, each value different, so that a record read at a wrong offset or a chunk cut at a
# wrong place shows: three chunks of 1,024, 1,024 and 1 events, each with its own sorted stacks,
# read back through the view events in the order sent.
IDK=$(newid)
python3 - "$IDK" "$T_TMP/chunks.json" "$T_TMP/chunks.want" <<'PYK'
import json, sys
sid, out, want = sys.argv[1:4]
ev, lines = [], []
for i in range(2049):
    kind = "wait" if i % 3 else "run"
    stack = 2 if i == 2048 else (i * 7) % 5 if i < 1024 else 3 + (i % 2)
    e = {"kind": kind, "tid": 1000 + i % 17, "ts_ns": (1 << 40) + i * 1000003 - (i % 5) * 7919,
         "dur_ns": (i * 7) % 100003, "stack": stack}
    if kind == "wait":
        e["readier_tid"] = (i * 13) % 2003
    ev.append(e)
    lines.append("%d|%s|%d|%d|%d|%s|%d" % (i, kind[0], e["tid"], e["ts_ns"], e["dur_ns"],
                 e.get("readier_tid", "-"), stack))
doc = {"v": 1, "stream_id": sid, "host": "chunks", "app": "chunks",
       "symptom": {"kind": "manual", "tid": 1000, "start_ns": 1 << 40, "end_ns": (1 << 40) + 3000000000},
       "frames": ["a!main", "a!f0", "a!f1", "a!f2", "a!f3", "a!f4"],
       "stacks": [[0, 1], [0, 2], [0, 3], [0, 4], [0, 5]], "events": ev}
open(out, "w").write(json.dumps(doc))
open(want, "w").write("\n".join(lines))
PYK
post "$T_TMP/chunks.json"
t_eq "packed events: stored" "$HTTP_STATUS $HTTP_BODY" '200 {"accepted":1,"duplicates":0,"rejected":[]}'
# a stack's place in the stream's list, from its frames (the stream's stack k is [a!main, a!f<k>])
t_eq "packed events: three chunks, each with its events' stacks, distinct and sorted" \
	"$(pg_q "SELECT c.first_seq, length(c.data) / 29,
		(SELECT string_agg(substr(f.name, 4), ',' ORDER BY k.id) FROM unnest(c.stack_ids) AS k(id)
		 JOIN stacks st ON st.id = k.id JOIN frames f ON f.id = st.frame_ids[2]),
		c.stack_ids = (SELECT array_agg(DISTINCT x ORDER BY x) FROM unnest(c.stack_ids) x)
		FROM event_chunks c JOIN streams s ON s.id = c.stream_ref WHERE s.stream_id = '$IDK' ORDER BY c.first_seq")" \
	"$(printf '0|1024|%s|t\n1024|1024|%s|t\n2048|1|2|t' \
		"$(pg_q "SELECT string_agg(substr(f.name, 4), ',' ORDER BY st.id) FROM stacks st JOIN frames f ON f.id = st.frame_ids[2]
			WHERE f.name IN ('a!f0', 'a!f1', 'a!f2', 'a!f3', 'a!f4')")" \
		"$(pg_q "SELECT string_agg(substr(f.name, 4), ',' ORDER BY st.id) FROM stacks st JOIN frames f ON f.id = st.frame_ids[2]
			WHERE f.name IN ('a!f3', 'a!f4')")")"
t_eq "packed events: read back as sent, in order" \
	"$(pg_q "SELECT e.seq, e.kind, e.tid, e.ts_ns, e.dur_ns, coalesce(e.readier_tid::text, '-'),
		(SELECT substr(f.name, 4)::int FROM stacks st JOIN frames f ON f.id = st.frame_ids[2] WHERE st.id = e.stack_id)
		FROM events e JOIN streams s ON s.id = e.stream_ref WHERE s.stream_id = '$IDK' ORDER BY e.seq")" \
	"$(cat "$T_TMP/chunks.want")"
pg_q "DELETE FROM event_chunks WHERE stream_ref IN (SELECT id FROM streams WHERE stream_id = '$IDK')" >/dev/null
pg_q "DELETE FROM streams WHERE stream_id = '$IDK'" >/dev/null
pg_q "DELETE FROM stat_deltas" >/dev/null

# ---- zstd, one frame and several ----
ID2=$(newid)
stream "$ID2" | zstd -q -c >"$T_TMP/s2.zst"
post "$T_TMP/s2.zst" application/json -H 'Content-Encoding: zstd'
t_eq "zstd: answer" "$HTTP_STATUS $HTTP_BODY" '200 {"accepted":1,"duplicates":0,"rejected":[]}'
ID3=$(newid) ID4=$(newid)
{ stream "$ID3" | zstd -q -c; stream "$ID4" | zstd -q -c; } >"$T_TMP/two-frames.zst"
post "$T_TMP/two-frames.zst" application/x-ndjson -H 'Content-Encoding: zstd'
t_eq "zstd with two frames: answer" "$HTTP_STATUS $HTTP_BODY" '200 {"accepted":2,"duplicates":0,"rejected":[]}'
t_eq "zstd: stored" "$(pg_q "SELECT count(*) FROM streams WHERE stream_id IN ('$ID2', '$ID3', '$ID4')")" 3
# frames that declare their size (zstd of a file, as sm-agent sends): decompressed in one call
ID5=$(newid) ID6=$(newid)
stream "$ID5" >"$T_TMP/s5.json"
stream "$ID6" >"$T_TMP/s6.json"
zstd -q -c "$T_TMP/s5.json" >"$T_TMP/s5.zst"
zstd -q -c "$T_TMP/s6.json" >"$T_TMP/s6.zst"
t_eq "zstd, sizes declared: the frames say so" \
	"$(zstd -lv "$T_TMP/s5.zst" "$T_TMP/s6.zst" 2>/dev/null | grep -c 'Decompressed Size:')" 2
cat "$T_TMP/s6.zst" >>"$T_TMP/s5.zst"
post "$T_TMP/s5.zst" application/x-ndjson -H 'Content-Encoding: zstd'
t_eq "zstd, sizes declared: answer" "$HTTP_STATUS $HTTP_BODY" '200 {"accepted":2,"duplicates":0,"rejected":[]}'
t_eq "zstd, sizes declared: stored whole" "$(pg_q "SELECT count(*), sum(n_events) FROM streams WHERE stream_id IN ('$ID5', '$ID6')")" "2|6"
# a frame whose header lies about its size (one byte more, one less): refused, nothing stored
zstd_lie() { # zstd_lie FILE DELTA: the frame content size field of FILE's frame moved by DELTA
	python3 - "$1" "$2" <<'PY'
import sys
p, d = sys.argv[1], int(sys.argv[2])
b = bytearray(open(p, 'rb').read())
fhd = b[4]
single, dict_flag, fcs_flag = (fhd >> 5) & 1, fhd & 3, fhd >> 6
off = 5 + (0 if single else 1) + (0, 1, 2, 4)[dict_flag]
size = (1 if single else 0, 2, 4, 8)[fcs_flag]
v = int.from_bytes(b[off:off + size], 'little') + d
b[off:off + size] = v.to_bytes(size, 'little')
open(p, 'wb').write(bytes(b))
PY
}
for lie in 1 -1; do
	ID7=$(newid)
	stream "$ID7" >"$T_TMP/s7.json"
	zstd -q -c "$T_TMP/s7.json" >"$T_TMP/s7.zst"
	zstd_lie "$T_TMP/s7.zst" "$lie"
	post "$T_TMP/s7.zst" application/json -H 'Content-Encoding: zstd'
	t_eq "zstd, a size declared $lie byte off: refused" "$HTTP_STATUS $HTTP_BODY" \
		'400 {"error":"body: bad zstd data: Data corruption detected"}'
	t_eq "zstd, a size declared $lie byte off: nothing stored" "$(pg_q "SELECT count(*) FROM streams WHERE stream_id = '$ID7'")" 0
done
# a frame whose checksum fails once the whole of it is written: refused by the stream's check too
head -c 4M /dev/zero >"$T_TMP/zeros"
zstd -q -1 -c "$T_TMP/zeros" >"$T_TMP/badsum.zst"
rm -f "$T_TMP/zeros"
python3 -c 'import sys; b = bytearray(open(sys.argv[1], "rb").read()); b[-1] ^= 0xff; open(sys.argv[1], "wb").write(bytes(b))' \
	"$T_TMP/badsum.zst"
post "$T_TMP/badsum.zst" application/json -H 'Content-Encoding: zstd'
t_eq "zstd, a size declared and a bad checksum: refused" "$HTTP_STATUS $HTTP_BODY" \
	'400 {"error":"body: bad zstd data: Restored data doesn'"'"'t match checksum"}'
# a frame that declares more than the limit is never inflated: the stream stops at the limit
head -c 64M /dev/zero >"$T_TMP/zeros"
zstd -q -1 -c "$T_TMP/zeros" >"$T_TMP/declared-bomb.zst"
rm -f "$T_TMP/zeros"
post "$T_TMP/declared-bomb.zst" application/json -H 'Content-Encoding: zstd'
t_eq "zstd, 64 MiB declared: refused at the limit" "$HTTP_STATUS $HTTP_BODY" \
	'413 {"error":"body: decompresses to more than the limit of 8388608 bytes"}'

# ---- NDJSON batch with valid and invalid lines ----
IDA=$(newid) IDB=$(newid) IDC=$(newid)
{
	stream "$IDA"
	stream "$IDB" 's/"stack": 0, "readier_tid": 0/"stack": 9, "readier_tid": 0/'
	echo '{"v": 1, "stream_id": oops}'
	echo
	stream "$IDC"
	stream "$IDA"
} >"$T_TMP/batch.ndjson"
post "$T_TMP/batch.ndjson" application/x-ndjson
t_eq "batch: status" "$HTTP_STATUS" 200
t_eq "batch: answer" "$HTTP_BODY" "{\"accepted\":2,\"duplicates\":1,\"rejected\":[{\"line\":2,\"stream_id\":\"$IDB\",\"error\":\"events[0].stack: index 9 out of range (3 stacks)\"},{\"line\":3,\"stream_id\":null,\"error\":\"not JSON: stream_id: unexpected 'o' where a value belongs at byte 22\"}]}"
t_eq "batch: valid lines stored, invalid not" \
	"$(pg_q "SELECT string_agg(c, '' ORDER BY c) FROM (SELECT CASE stream_id WHEN '$IDA' THEN 'A' WHEN '$IDB' THEN 'B' WHEN '$IDC' THEN 'C' END AS c
		 FROM streams WHERE stream_id IN ('$IDA', '$IDB', '$IDC')) s")" "AC"

# ---- bad input: each class, its status and error, nothing stored ----
before="$(nstreams)|$(nevents)"
# bad NAME STATUS ERROR SED-EXPR: a single stream edited by SED-EXPR
bad() {
	local id
	id=$(newid)
	stream "$id" "$4" >"$T_TMP/bad.json"
	post "$T_TMP/bad.json"
	t_eq "bad input, $1" "$HTTP_STATUS $HTTP_BODY" "$2 {\"error\":\"$3\",\"stream_id\":\"$id\"}"
}
bad "wrong type" 400 'events[1].tid: must be an integer, not a string' 's/"tid": 4211, "ts_ns": 81550000000/"tid": "4211", "ts_ns": 81550000000/'
bad "missing field" 400 'host: required field missing' 's/"host": "web-17",//'
bad "stack index out of range" 400 'stacks[0][3]: index 99 out of range (7 frames)' 's/\[0, 1, 2, 4\]/[0, 1, 2, 99]/'
bad "negative duration" 400 'events[0].dur_ns: -240000000 is negative or too small (at least 0)' 's/"dur_ns": 240000000/"dur_ns": -240000000/'
bad "oversized string" 400 "host: 300 bytes long, at most 255 allowed" "s/\"web-17\"/\"$(printf 'h%.0s' $(seq 300))\"/"
bad "end before start" 400 'symptom.end_ns: 1 is before start_ns 81234000000' 's/"end_ns": 81684000000/"end_ns": 1/'
bad "readier on a run event" 400 'events[1].readier_tid: only wait events have a readier' 's/"stack": 1},/"stack": 1, "readier_tid": 5},/'
# NUL is refused by the JSON check itself (issue 25), with the field's path
stream "$(newid)" 's/"nginx!main"/"nginx!\\u0000main"/' >"$T_TMP/bad.json"
post "$T_TMP/bad.json"
t_eq "bad input, NUL in a frame" "$HTTP_STATUS $(printf '%s' "$HTTP_BODY" | grep -o 'frames\[0\]: [^(]*(NUL')" \
	"400 frames[0]: unexpected '\\\\' (NUL"
bad "unsupported version" 400 'v: unsupported version 2 (this server speaks 1)' 's/"v": 1/"v": 2/'

printf 'hello' >"$T_TMP/notjson"
post "$T_TMP/notjson"
t_eq "bad input, not JSON" "$HTTP_STATUS $HTTP_BODY" "400 {\"error\":\"not JSON: body: unexpected 'h' where a value belongs at byte 0\"}"
{ printf '{"v": 1, "labels": '; printf '[%.0s' $(seq 20); printf ']%.0s' $(seq 20); printf '}'; } >"$T_TMP/deep.json"
post "$T_TMP/deep.json"
t_eq "bad input, deep nesting" "$HTTP_STATUS $HTTP_BODY" '400 {"error":"not JSON: labels[0][0][0][0][0][0][0][0][0][0][0][0][0][0][0]: nested deeper than 16 levels at byte 34"}'
stream "$(newid)" 's/"web-17"/"web-\xff\xfe"/' >"$T_TMP/utf8.json"
post "$T_TMP/utf8.json"
t_eq "bad input, invalid UTF-8" "$HTTP_STATUS $HTTP_BODY" '400 {"error":"not JSON: host: unexpected byte 0xff (invalid UTF-8) at byte 79"}'
# a frame name holding a lone surrogate, escaped (high, then low) or encoded as UTF-8: not text
n0=$(nstreams)
stream "$(newid)" 's/"nginx!unused_frame"/"nginx!ab\\ud800"/' >"$T_TMP/sur1.json"
post "$T_TMP/sur1.json"
t_eq "bad input, a lone high surrogate escaped" "$HTTP_STATUS $HTTP_BODY" \
	"400 {\"error\":\"not JSON: frames[6]: unexpected '\\\\' (a lone high surrogate) at byte 606\"}"
stream "$(newid)" 's/"nginx!unused_frame"/"nginx!ab\\udc00x"/' >"$T_TMP/sur2.json"
post "$T_TMP/sur2.json"
t_eq "bad input, a lone low surrogate escaped" "$HTTP_STATUS $HTTP_BODY" \
	"400 {\"error\":\"not JSON: frames[6]: unexpected '\\\\' (a lone low surrogate) at byte 606\"}"
stream "$(newid)" 's/"nginx!unused_frame"/"nginx!ab\xed\xa0\x80"/' >"$T_TMP/sur3.json"
post "$T_TMP/sur3.json"
t_eq "bad input, a surrogate encoded in UTF-8" "$HTTP_STATUS $HTTP_BODY" \
	'400 {"error":"not JSON: frames[6]: unexpected byte 0xed (invalid UTF-8) at byte 606"}'
t_eq "and none of the three stored" "$(nstreams)" "$n0"
stream "$(newid)" | zstd -q -c >"$T_TMP/full.zst"
head -c $(( $(stat -c %s "$T_TMP/full.zst") / 2 )) "$T_TMP/full.zst" >"$T_TMP/trunc.zst"
post "$T_TMP/trunc.zst" application/json -H 'Content-Encoding: zstd'
t_eq "bad input, truncated zstd" "$HTTP_STATUS $HTTP_BODY" '400 {"error":"body: truncated zstd frame"}'
printf 'this is not zstd' >"$T_TMP/notzstd"
post "$T_TMP/notzstd" application/json -H 'Content-Encoding: zstd'
t_eq "bad input, not zstd" "$HTTP_STATUS $HTTP_BODY" '400 {"error":"body: bad zstd data: Unknown frame descriptor"}'
head -c 1G /dev/zero | zstd -q -19 -c >"$T_TMP/bomb.zst"
post "$T_TMP/bomb.zst" application/json -H 'Content-Encoding: zstd'
t_eq "bad input, zstd bomb (1 GiB of zeros in $(stat -c %s "$T_TMP/bomb.zst") bytes)" "$HTTP_STATUS $HTTP_BODY" \
	'413 {"error":"body: decompresses to more than the limit of 8388608 bytes"}'
hwm=$(awk '/VmHWM/ {print $2}' "/proc/$INGEST_PID/status")
t_eq "the bomb was never inflated (peak RSS $hwm kB under 200 MB)" "$([ "$hwm" -lt 204800 ] && echo yes)" yes
post "$T_TMP/s1.json" text/plain
t_eq "bad input, unknown content type" "$HTTP_STATUS $HTTP_BODY" '415 {"error":"Content-Type: must be application/json or application/x-ndjson"}'
post "$T_TMP/s1.json" application/json -H 'Content-Encoding: gzip'
t_eq "bad input, unknown encoding" "$HTTP_STATUS $HTTP_BODY" '415 {"error":"Content-Encoding: only zstd is supported"}'
http POST "$INGEST_URL/api/v1/streams" -H 'Content-Type: application/json' --data-binary "@$T_TMP/s1.json"
t_eq "bad input, missing token" "$HTTP_STATUS $HTTP_BODY" '401 {"error":"authorization: missing bearer token"}'
http POST "$INGEST_URL/api/v1/streams" -H 'Authorization: Bearer sm_0000' -H 'Content-Type: application/json' --data-binary "@$T_TMP/s1.json"
t_eq "bad input, wrong token" "$HTTP_STATUS $HTTP_BODY" '401 {"error":"authorization: unknown or revoked token"}'
# a token nobody has checked yet is checked before the body is read: a random token
# with a 15 MB body is refused while most of the body is still unsent
head -c 15000000 /dev/zero | tr '\0' ' ' >"$T_TMP/big.json"
sent=$(curl -s -o "$T_TMP/big.out" -w '%{http_code} %{size_upload}' -H "Authorization: Bearer sm_$(printf '%064d' 42)" \
	-H 'Content-Type: application/json' -H 'Expect:' --data-binary "@$T_TMP/big.json" "$INGEST_URL/api/v1/streams")
t_eq "an unchecked token: 401 before the body" "${sent% *} $(cat "$T_TMP/big.out")" \
	'401 {"error":"authorization: unknown or revoked token"}'
t_eq "an unchecked token: the body was not read (${sent#* } of 15000000 bytes sent)" \
	"$([ "${sent#* }" -lt 15000000 ] && echo yes)" yes
# its answer reaches the client every time: the connection's unread input is drained before the
# close, where a close with input unread sends a reset that may destroy the answer unread
answers=
for i in $(seq 10); do
	answers+="$(curl -s -o "$T_TMP/big.out" -w '%{http_code}' -H "Authorization: Bearer sm_$(printf '%064d' "$((42 + i))")" \
		-H 'Content-Type: application/json' -H 'Expect:' --data-binary "@$T_TMP/big.json" "$INGEST_URL/api/v1/streams")"
	answers+=" $(cat "$T_TMP/big.out")"$'\n'
done
t_eq "refused before the body, ten times: ten answers read whole" "$(sort <<<"${answers%$'\n'}" | uniq -c | sed 's/^ *//')" \
	'10 401 {"error":"authorization: unknown or revoked token"}'
# early.py URL before|after: a POST behind an unknown token. before: its body sent until the server
# stops reading, a wait, then the answer read to the end of the stream (or an error); after: the
# answer read to the end first, then the body sent in pieces apart (a reset, if any, comes back
# between them and fails the next send). Prints the answer and whether all of the body was sent.
cat >"$T_TMP/early.py" <<'PY'
import socket, sys, time, urllib.parse
u, mode = urllib.parse.urlsplit(sys.argv[1]), sys.argv[2]
size = 15000000 if mode == 'before' else 3 * 16384
s = socket.create_connection((u.hostname, u.port))
s.sendall(b'POST /api/v1/streams HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sm_' + mode[0].encode() * 64 +
          b'\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n' % size)
def answer():
    s.settimeout(5)
    got = b''
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            got += b
        return got.split(b'\r\n', 1)[0].decode() + ' ' + got.rsplit(b'\r\n\r\n', 1)[-1].decode() + ' end'
    except OSError as e:
        return (got.split(b'\r\n', 1)[0].decode() or '-') + ' ' + type(e).__name__
sent = 0
try:
    if mode == 'before':
        s.setblocking(False)
        end = time.time() + 1
        while time.time() < end and sent < size:   # a second, the server's buffers filling
            try:
                sent += s.send(b' ' * min(65536, size - sent))
            except BlockingIOError:
                time.sleep(0.05)
        time.sleep(0.5)
        s.setblocking(True)
        print(answer())
    else:
        print(answer(), end=' ')
        while sent < size:
            s.sendall(b' ' * 16384)
            sent += 16384
            time.sleep(0.15)
        print('sent', sent)
except OSError as e:
    print('sending:', type(e).__name__)
PY
# a client that sends until the server stops reading, waits, then reads: the answer, then the end
# of the stream (not a reset, which a close with the body unread sends, and which loses the answer)
t_eq "refused before the body, read only a second later: the answer, then the end" \
	"$(python3 "$T_TMP/early.py" "$INGEST_URL" before)" \
	'HTTP/1.1 401 Unauthorized {"error":"authorization: unknown or revoked token"} end'
# one that reads the answer and the end of the stream, then sends its body: its bytes arrive at a
# socket closed with nothing unread, which the kernel would answer with a reset (the next send fails:
# a transport error); the request was answered before its body was in, so the connection lingers
t_eq "refused before the body, the body sent after the answer and the close: all of it taken" \
	"$(python3 "$T_TMP/early.py" "$INGEST_URL" after)" \
	'HTTP/1.1 401 Unauthorized {"error":"authorization: unknown or revoked token"} end sent 49152'
http GET "$INGEST_URL/metrics"
t_match "and those connections were drained before their close" "$HTTP_BODY" \
	$'sm_ingest_connections_lingered_total (1[1-9]|[2-9][0-9])\n'
rm -f "$T_TMP/big.json"
http POST "$INGEST_URL/api/v1/streams" -H "Authorization: Bearer $ANALYST" -H 'Content-Type: application/json' --data-binary "@$T_TMP/s1.json"
t_eq "bad input, analyst token" "$HTTP_STATUS $HTTP_BODY" '401 {"error":"authorization: this token'"'"'s role may not send streams (needs ingest)"}'
http GET "$INGEST_URL/api/v1/streams"
t_eq "GET on the streams endpoint" "$HTTP_STATUS $HTTP_BODY" '405 {"error":"method: use POST"}'
http GET "$INGEST_URL/nope"
t_eq "unknown path" "$HTTP_STATUS" 404
# threads (the optional names of the stream's threads): each rule, its exact error
# bad_threads NAME ERROR JSON-TEXT: the template stream with "threads": JSON-TEXT, as written
bad_threads() {
	local id
	id=$(newid)
	stream "$id" | python3 -c 'import sys; sys.stdout.write(sys.stdin.read().replace("\"app\": \"nginx\",", "\"app\": \"nginx\", \"threads\": " + sys.argv[1] + ",", 1))' "$3" >"$T_TMP/bad.json"
	post "$T_TMP/bad.json"
	t_eq "bad threads, $1" "$HTTP_STATUS $HTTP_BODY" "400 {\"error\":\"$2\",\"stream_id\":\"$id\"}"
}
bad_threads "not an object" 'threads: must be an object, not an array' '["nginx"]'
bad_threads "a key that is no tid" 'threads.12x: not a thread id (a decimal integer from 0 to 2147483647)' '{"4211": "a", "12x": "b"}'
bad_threads "a leading zero" 'threads.04211: not a thread id (a decimal integer from 0 to 2147483647)' '{"04211": "a"}'
bad_threads "tid 0 with a leading zero" 'threads.00: not a thread id (a decimal integer from 0 to 2147483647)' '{"0": "swapper", "00": "a"}'
bad_threads "a sign" 'threads.-5: not a thread id (a decimal integer from 0 to 2147483647)' '{"-5": "a"}'
bad_threads "a tid past 2^31-1" 'threads.2147483648: not a thread id (a decimal integer from 0 to 2147483647)' '{"2147483648": "a"}'
bad_threads "a long key" 'threads: a key of 40 bytes is not a thread id' "{\"$(printf '1%.0s' $(seq 40))\": \"a\"}"
bad_threads "a name not a string" 'threads.4211: must be a string, not an integer' '{"4211": 5}'
bad_threads "an empty name" 'threads.4211: must not be empty' '{"4211": ""}'
bad_threads "a name of 65 bytes" 'threads.4211: 65 bytes long, at most 64 allowed' "{\"4211\": \"$(printf 'n%.0s' $(seq 65))\"}"
bad_threads "a control character" 'threads.4212: contains a control character' '{"4211": "ok", "4212": "a\tb"}'
bad_threads "a tid twice" 'threads.4211: duplicate key' '{"4211": "a", "4212": "b", "4211": "c"}'
bad_threads "4097 entries" 'threads: 4097 entries, at most 4096 allowed' \
	"{$(seq 1 4097 | sed 's/.*/"&": "t"/' | paste -sd,)}"
t_eq "bad input stored nothing" "$(nstreams)|$(nevents)" "$before"

# accepted: only the names of threads the stream shows (its events, readiers, symptom) are stored;
# a stream without them, or naming only others, stores NULL
THA=$(newid) THB=$(newid)
stream "$THA" 's/"app": "nginx",/"app": "nginx", "threads": {"99": "not in the stream", "4212": "<b>io<\/b> \\"q\\" \\u00e9\\u2713", "4211": "nginx: worker", "7": "x"},/' >"$T_TMP/th.json"
post "$T_TMP/th.json"
t_eq "threads: accepted" "$HTTP_STATUS $HTTP_BODY" '200 {"accepted":1,"duplicates":0,"rejected":[]}'
t_eq "threads: the names of the stream's threads stored, the others not" \
	"$(pg_q "SELECT thread_names->>'4211', thread_names->>'4212', thread_names ? '99', thread_names ? '7' FROM streams WHERE stream_id = '$THA'")" \
	'nginx: worker|<b>io</b> "q" é✓|f|f'
stream "$THB" 's/"app": "nginx",/"app": "nginx", "threads": {"99": "not in the stream"},/' >"$T_TMP/th.json"
post "$T_TMP/th.json"
t_eq "threads: none of the stream's named: accepted" "$HTTP_STATUS" 200
t_eq "threads: NULL without names, and with none of the stream's" \
	"$(pg_q "SELECT count(*) FROM streams WHERE stream_id IN ('$ID1', '$THB') AND thread_names IS NULL")" 2
before="$(nstreams)|$(nevents)"

# revocation takes effect (this server caches nothing)
REVOKED=$(mk_token ingest 2>/dev/null)
rid=$(pg_q "SELECT id FROM tokens WHERE token_hash = sha256(convert_to(:'t', 'UTF8'))" -v t="$REVOKED")
stream "$(newid)" >"$T_TMP/r.json"
http POST "$INGEST_URL/api/v1/streams" -H "Authorization: Bearer $REVOKED" -H 'Content-Type: application/json' --data-binary "@$T_TMP/r.json"
t_eq "a new token works" "$HTTP_STATUS" 200
sm_admin token revoke "$rid" >/dev/null
stream "$(newid)" >"$T_TMP/r.json"
http POST "$INGEST_URL/api/v1/streams" -H "Authorization: Bearer $REVOKED" -H 'Content-Type: application/json' --data-binary "@$T_TMP/r.json"
t_eq "a revoked token is refused" "$HTTP_STATUS $HTTP_BODY" '401 {"error":"authorization: unknown or revoked token"}'

http GET "$INGEST_URL/metrics"
t_match "metrics count accepted streams" "$HTTP_BODY" $'sm_ingest_streams_total\\{result="accepted"\\} 19\n'
t_match "metrics count the bombs as too large" "$HTTP_BODY" $'sm_ingest_rejections_total\\{reason="too_large"\\} 2\n'
t_match "metrics have a latency histogram" "$HTTP_BODY" 'sm_ingest_request_duration_seconds_bucket\{le="\+Inf"\} [0-9]+'
stop_ingest && t_ok "sm-ingest stops cleanly"

# ---- limits given on the command line ----
start_ingest --max-batch 2 --max-events 2 --max-body 4k || t_bail "sm-ingest starts with limits"
{ stream "$(newid)"; stream "$(newid)"; stream "$(newid)"; } >"$T_TMP/three.ndjson"
post "$T_TMP/three.ndjson" application/x-ndjson
t_eq "limit: streams per batch" "$HTTP_STATUS $HTTP_BODY" '413 {"error":"body: more than 2 streams in one batch"}'
id=$(newid)
stream "$id" >"$T_TMP/three-events.json"
post "$T_TMP/three-events.json"
t_eq "limit: events per stream" "$HTTP_STATUS $HTTP_BODY" "400 {\"error\":\"events: 3 events, at most 2 allowed\",\"stream_id\":\"$id\"}"
head -c 5000 /dev/zero | tr '\0' ' ' >"$T_TMP/big.json"
post "$T_TMP/big.json"
t_eq "limit: body size" "$HTTP_STATUS $HTTP_BODY" '413 {"error":"body: larger than the limit of 4096 bytes"}'
stop_ingest

# ---- concurrent senders ----
ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=0 start_ingest --workers 3 || t_bail "sm-ingest starts again"
before=$(nstreams)
sender() { # sender N: 25 requests of 2 streams each; prints the answers
	local i
	for i in $(seq 25); do
		{ stream "$(newid)"; stream "$(newid)"; } >"$T_TMP/c$1.ndjson"
		curl -s -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/x-ndjson' \
			--data-binary "@$T_TMP/c$1.ndjson" "$INGEST_URL/api/v1/streams"
		echo
	done
}
pids=
for n in 1 2 3 4; do sender $n >"$T_TMP/answers.$n" & pids="$pids $!"; done
wait $pids
t_eq "concurrent: every answer accepted 2" "$(sort "$T_TMP"/answers.* | uniq -c | sed 's/^ *//')" \
	'100 {"accepted":2,"duplicates":0,"rejected":[]}'
t_eq "concurrent: 200 streams stored" "$(( $(nstreams) - before ))" 200
t_eq "concurrent: every stream whole" "$(pg_q "SELECT count(*) FROM streams s
	WHERE n_events <> (SELECT count(*) FROM events e WHERE e.stream_ref = s.id)")" 0
pg_q "SELECT sm_fold_stats(100000)" >/dev/null
pg_until 0 "SELECT count(*) FROM stat_deltas" >/dev/null   # (a fold in the background may hold some)
t_eq "concurrent: statistics count every stream" "$(pg_q "SELECT n FROM stream_total")" "$(nstreams)"
t_eq "concurrent: n(main) counts every stream" \
	"$(pg_q "SELECT s.n FROM frame_stats s JOIN frames f ON f.id = s.frame_id WHERE f.name = 'nginx!main'")" "$(nstreams)"
# the statistics against a count from the stored events: streams of random stacks (recursion, a
# call repeated, stacks no event uses, each stream its own frame order) in batches sent at once
python3 - "$T_TMP/rnd" <<'PY'
import json, random, sys, uuid
random.seed(29)
pool = ['stat!f%d' % i for i in range(40)]
for b in range(4):
    with open('%s.%d' % (sys.argv[1], b), 'w') as out:
        for _ in range(50):
            names = random.sample(pool, random.randint(3, 25))
            stacks = [[random.randrange(len(names)) for _ in range(random.randint(1, 9))]
                      for _ in range(random.randint(1, 12))]
            used = random.sample(range(len(stacks)), random.randint(1, len(stacks)))
            ev = [{'kind': random.choice(['wait', 'run']), 'tid': 7, 'ts_ns': 1000 + i, 'dur_ns': 5,
                   'stack': k} for i, k in enumerate(used)]
            out.write(json.dumps({'v': 1, 'stream_id': str(uuid.UUID(int=random.getrandbits(128))),
                                  'host': 'stat-%d' % b, 'app': 'stat', 'version': '1', 'build_id': 'b',
                                  'symptom': {'kind': 'unit_violation', 'tid': 7, 'start_ns': 1000,
                                              'end_ns': 2000}, 'frames': names, 'stacks': stacks,
                                  'events': ev}) + '\n')
PY
pids=
for b in 0 1 2 3; do post "$T_TMP/rnd.$b" application/x-ndjson >"$T_TMP/rnd.out.$b" & pids="$pids $!"; done
wait $pids
t_eq "random stacks: 200 streams stored" "$(pg_q "SELECT count(*) FROM streams WHERE app = 'stat'")" 200
pg_q "SELECT sm_fold_stats(100000)" >/dev/null
pg_until 0 "SELECT count(*) FROM stat_deltas" >/dev/null
used="streams s JOIN events e ON e.stream_ref = s.id JOIN stacks k ON k.id = e.stack_id"
t_eq "random stacks: n(f) of every frame is the number of streams whose events' stacks hold it" \
	"$(pg_q "(SELECT f, count(DISTINCT s.id) FROM $used, unnest(k.frame_ids) f GROUP BY f
	          EXCEPT SELECT frame_id, n FROM frame_stats)
	         UNION ALL (SELECT frame_id, n FROM frame_stats
	          EXCEPT SELECT f, count(DISTINCT s.id) FROM $used, unnest(k.frame_ids) f GROUP BY f)")" ""
t_eq "random stacks: n(g->f) of every direct call, likewise" \
	"$(pg_q "(SELECT k.frame_ids[i], k.frame_ids[i + 1], count(DISTINCT s.id) FROM $used,
	            generate_series(1, cardinality(k.frame_ids) - 1) i GROUP BY 1, 2
	          EXCEPT SELECT caller, callee, n FROM call_stats)
	         UNION ALL (SELECT caller, callee, n FROM call_stats
	          EXCEPT SELECT k.frame_ids[i], k.frame_ids[i + 1], count(DISTINCT s.id) FROM $used,
	            generate_series(1, cardinality(k.frame_ids) - 1) i GROUP BY 1, 2)")" ""
t_eq "random stacks: the check sees recursion and calls of many counts" \
	"$(pg_q "SELECT count(*) FILTER (WHERE k.frame_ids[i] = k.frame_ids[i + 1]) > 0, count(DISTINCT (k.frame_ids[i], k.frame_ids[i + 1])) > 500
	         FROM $used, generate_series(1, cardinality(k.frame_ids) - 1) i WHERE s.app = 'stat'")" "t|t"

# ---- new stacks inserted meanwhile by writers without the stacks' lock (a script, psql): the
# batch's INSERT under the lock meets the unique violation of the first; the way with ON CONFLICT
# finds that one by its lookup, skips the second (committed while it waited on it) and finds it
# with get_stacks; the stream is stored on those writers' stacks ----
IDL=$(newid)
# the stream's stacks 0 and 1: [ngx_http_handler, main, fdatasync], [ngx_http_handler,
# ngx_worker_process_cycle, std::map find]; "lo" the one the INSERT under the lock meets first
# (key order: hash, frame_ids), its writer committing at 3 s, "hi" the other, at 6 s
# (each as its frames' ids; "s0" the stream's stack 0)
read -r lo hi s0 < <(pg_q "SELECT string_agg(a::text, ' ' ORDER BY hash_array_extended(a, 0), a) || ' ' ||
	(array_agg(a::text ORDER BY k))[1]
	FROM (SELECT k, ARRAY(SELECT f.id FROM unnest(n) WITH ORDINALITY u(name, o) JOIN frames f USING (name) ORDER BY o) AS a
	      FROM (VALUES (1, ARRAY['nginx!ngx_http_handler', 'nginx!main', 'libc.so.6!fdatasync']),
	                   (2, ARRAY['nginx!ngx_http_handler', 'nginx!ngx_worker_process_cycle', :'mapfind'])) v(k, n)) x" \
	-v mapfind='nginx!std::map<K, V>::find "q"')
lockless() { # lockless NAME STACK SECONDS: a writer inserting STACK, committing after SECONDS
	{ echo "BEGIN; INSERT INTO stacks (frame_ids) VALUES ('$2') RETURNING id;"; sleep "$3"; echo "COMMIT;"; } |
		psql -X -A -t -q -v ON_ERROR_STOP=1 >"$T_TMP/lockless-$1.out" 2>&1
}
lockless lo "$lo" 3 &
pid_lo=$!
lockless hi "$hi" 6 &
pid_hi=$!
t_eq "two writers hold new stacks without the lock ($lo, $hi)" \
	"$(pg_until 2 "SELECT count(*) FROM pg_stat_activity WHERE state = 'idle in transaction' AND query LIKE 'INSERT INTO stacks%'")|$(
	   [[ $lo =~ ^\{[0-9]+(,[0-9]+){2}\}$ && $hi =~ ^\{[0-9]+(,[0-9]+){2}\}$ && $lo != "$hi" ]] && echo two)" "2|two"
stream "$IDL" 's/"stacks": \[\[0, 1, 2, 4\], \[0, 1, 2, 5\]/"stacks": [[2, 0, 4], [2, 1, 5]/' >"$T_TMP/lockless.json"
post "$T_TMP/lockless.json"
wait "$pid_lo" "$pid_hi"
t_eq "stacks inserted meanwhile without the lock: answer" "$HTTP_STATUS $HTTP_BODY" '200 {"accepted":1,"duplicates":0,"rejected":[]}'
id_lo=$(head -n 1 "$T_TMP/lockless-lo.out")
id_hi=$(head -n 1 "$T_TMP/lockless-hi.out")
if [ "$s0" = "$lo" ]; then want_ev="$id_lo,$id_hi,$id_hi"; else want_ev="$id_hi,$id_lo,$id_lo"; fi
t_eq "and the stream's events are on those writers' stacks, each stored once" \
	"$(pg_q "SELECT string_agg(e.stack_id::text, ',' ORDER BY e.seq),
		(SELECT count(*) FROM stacks WHERE frame_ids IN ('$lo', '$hi')) FROM events e
		JOIN streams s ON s.id = e.stream_ref WHERE s.stream_id = '$IDL'")" "$want_ev|2"
t_eq "and the batch took the way with ON CONFLICT, reading the skipped stack back" \
	"$(grep -c 'a new stack was inserted meanwhile by a writer without' "$INGEST_LOG")|$(
	   grep -c 'msg="new stacks committed meanwhile by another writer, read back" stacks=1$' "$INGEST_LOG")" "1|1"
pg_q "DELETE FROM event_chunks WHERE stream_ref IN (SELECT id FROM streams WHERE stream_id = '$IDL')" >/dev/null
pg_q "DELETE FROM streams WHERE stream_id = '$IDL'" >/dev/null

# ---- an id the interning statements did not return (a trigger drops one frame's INSERT, as a
# collection of unused frames would remove one meanwhile): nothing of the batch is stored, and the
# answer says the frames changed meanwhile, to be sent again; neither the database down nor this
# server's failure ----
IDN=$(newid)
pg_q "CREATE FUNCTION sm_test_drop_row() RETURNS trigger LANGUAGE plpgsql AS \$\$ BEGIN RETURN NULL; END \$\$;
      CREATE TRIGGER sm_test_drop_frame BEFORE INSERT ON frames FOR EACH ROW
      WHEN (NEW.name = 'nginx!never_stored') EXECUTE FUNCTION sm_test_drop_row()" >/dev/null
stream "$IDN" 's/"nginx!main"/"nginx!never_stored"/' >"$T_TMP/noid.json"
rejections() { # rejections REASON: sm-ingest's count of them
	http GET "$INGEST_URL/metrics"
	sed -n "s/^sm_ingest_rejections_total{reason=\"$1\"} //p" <<<"$HTTP_BODY"
}
db0=$(rejections db_error)
post "$T_TMP/noid.json"
t_eq "an interned id not returned: 503, frames changed meanwhile" "$HTTP_STATUS $HTTP_BODY" \
	'503 {"error":"busy: frames and stacks changed while the batch was stored (interning frames: an id was not returned); nothing of this request was stored, retry later"}'
t_eq "and nothing of it stored, the failure logged" \
	"$(pg_q "SELECT count(*) FROM streams WHERE stream_id = '$IDN'")|$(
	   grep -c 'storing streams failed.*error="interning frames: an id was not returned"' "$INGEST_LOG")" "0|1"
t_eq "and counted with the database's failures, not the server's (db_error before $db0)" \
	"$(( $(rejections db_error) - db0 ))|$(rejections server_error)" "1|0"
pg_q "DROP TRIGGER sm_test_drop_frame ON frames; DROP FUNCTION sm_test_drop_row()" >/dev/null
post "$T_TMP/noid.json"
t_eq "sent again once the trigger is gone: stored" "$HTTP_STATUS $HTTP_BODY" '200 {"accepted":1,"duplicates":0,"rejected":[]}'
pg_q "DELETE FROM event_chunks WHERE stream_ref IN (SELECT id FROM streams WHERE stream_id = '$IDN')" >/dev/null
pg_q "DELETE FROM streams WHERE stream_id = '$IDN'" >/dev/null

# ---- a zstd body's frame names, read in place (wire_parse_in_place()): stored as sent ----
# plain names beside escaped ones (copied), bidi controls, a BOM, multibyte, a name of 1024 bytes,
# names that end where the next begins
IDZ=$(newid)
python3 - "$IDZ" "$T_TMP/inplace.json" "$T_TMP/inplace.want" <<'PY2'
import json, sys
names = ['ip!main', 'ip!\u202eevil\u202c', 'ip!\ufeffbom', 'ip!q "x" \\ y', 'ip!\u00e9t\u00e9', 'ip!' + 'z' * 1021,
         'ip!a', 'ip!b', 'ip!tab\tin', 'ip!\u2028sep']
s = {'v': 1, 'stream_id': sys.argv[1], 'host': 'inplace', 'app': 'inplace', 'version': '1', 'build_id': 'b',
     'symptom': {'kind': 'unit_violation', 'tid': 7, 'start_ns': 1000, 'end_ns': 2000},
     'frames': names, 'stacks': [list(range(len(names)))],
     'events': [{'kind': 'wait', 'tid': 7, 'ts_ns': 1000, 'dur_ns': 5, 'stack': 0, 'readier_tid': 8}]}
open(sys.argv[2], 'w', encoding='utf-8').write(json.dumps(s, separators=(',', ':'), ensure_ascii=False) + '\n')
open(sys.argv[3], 'w').write(json.dumps(names))
PY2
zstd -q -c "$T_TMP/inplace.json" >"$T_TMP/inplace.zst"
post "$T_TMP/inplace.zst" application/x-ndjson -H 'Content-Encoding: zstd'
t_eq "zstd, names read in place: answer" "$HTTP_STATUS $HTTP_BODY" '200 {"accepted":1,"duplicates":0,"rejected":[]}'
t_eq "zstd, names read in place: each stored as sent" \
	"$(pg_q "SELECT (SELECT jsonb_agg(f.name ORDER BY o) FROM unnest(k.frame_ids) WITH ORDINALITY u(fid, o)
		JOIN frames f ON f.id = u.fid) = :'want'::jsonb FROM streams s JOIN events e ON e.stream_ref = s.id
		JOIN stacks k ON k.id = e.stack_id WHERE s.stream_id = :'id'" -v id="$IDZ" -v want="$(cat "$T_TMP/inplace.want")")" t
pg_q "DELETE FROM event_chunks WHERE stream_ref IN (SELECT id FROM streams WHERE stream_id = '$IDZ')" >/dev/null
pg_q "DELETE FROM streams WHERE stream_id = '$IDZ'" >/dev/null

# a body whose frame declares its size and fails only at its end (its checksum), under the default
# limit of 128 MiB: the 100 MiB written into a worker's buffer are given back, not kept for the
# next request (the sanitizers' quarantine, which would keep any freed block, is off here)
head -c 100M /dev/zero | zstd -q -1 -c >"$T_TMP/late.zst"
python3 -c 'import sys; b = bytearray(open(sys.argv[1], "rb").read()); b[-1] ^= 0xff; open(sys.argv[1], "wb").write(bytes(b))' \
	"$T_TMP/late.zst"
rss0=$(awk '/VmRSS/ {print $2}' "/proc/$INGEST_PID/status")
for i in 1 2 3; do   # each of the three workers, most likely
	post "$T_TMP/late.zst" application/json -H 'Content-Encoding: zstd'
	t_eq "zstd, 100 MiB declared, a bad checksum ($(stat -c %s "$T_TMP/late.zst") bytes sent, try $i): refused" \
		"$HTTP_STATUS $HTTP_BODY" '400 {"error":"body: bad zstd data: Restored data doesn'"'"'t match checksum"}'
done
rss1=$(awk '/VmRSS/ {print $2}' "/proc/$INGEST_PID/status")
t_eq "and its decoded bytes are given back (resident $rss0 kB before, $rss1 kB after)" \
	"$([ $((rss1 - rss0)) -lt 32768 ] && echo yes)" yes
# batches of streams at every limit (2 MB each, through the COPY): what a worker needs for one is
# reused for the next, nothing grows with their number. Three first, one for each worker most likely.
for i in $(seq 15); do
	python3 "$SM_REPO/tests/integration/edge_streams.py" 40 "$T_TMP/edge$i.ndjson" "$T_TMP/edge$i.want"
done
edge_batches() { # edge_batches FROM TO: post them, print the answers that are not 40 accepted
	for i in $(seq "$1" "$2"); do
		post "$T_TMP/edge$i.ndjson" application/x-ndjson
		[ "$HTTP_STATUS $HTTP_BODY" = '200 {"accepted":40,"duplicates":0,"rejected":[]}' ] ||
			echo "$i: $HTTP_STATUS $HTTP_BODY"
	done
}
t_eq "batches at the limits: the first three stored" "$(edge_batches 1 3)" ""
rss0=$(awk '/VmRSS/ {print $2}' "/proc/$INGEST_PID/status")
t_eq "batches at the limits: twelve more stored" "$(edge_batches 4 15)" ""
rss1=$(awk '/VmRSS/ {print $2}' "/proc/$INGEST_PID/status")
t_eq "and the server did not grow with them (resident $rss0 kB after three, $rss1 kB after fifteen)" \
	"$([ $((rss1 - rss0)) -lt 16384 ] && echo yes)" yes
# a node bomb through the compact runs: one stack of 3.5 million integers ("1,1,1,..."), 7 MB decoded
RID=$(newid)
stream "$RID" | python3 -c 'import sys; sys.stdout.write(sys.stdin.read().replace("[6]", "[" + ",".join(["1"] * 3500000) + "]", 1))' \
	| zstd -q -1 -c >"$T_TMP/runs.zst"
rss0=$(awk '/VmRSS/ {print $2}' "/proc/$INGEST_PID/status")
post "$T_TMP/runs.zst" application/json -H 'Content-Encoding: zstd'
rss1=$(awk '/VmRSS/ {print $2}' "/proc/$INGEST_PID/status")
t_eq "bad input, a stack of 3.5 million compact integers" "$HTTP_STATUS $HTTP_BODY" \
	'400 {"error":"stacks[2]: 3500000 frames, at most 512 allowed","stream_id":"'"$RID"'"}'
t_eq "and the server did not grow with it (resident $rss0 kB before, $rss1 kB after)" \
	"$([ $((rss1 - rss0)) -lt 32768 ] && echo yes)" yes
ids=$(cut -f1 "$T_TMP"/edge*.want | sed "s/.*/'&'/" | paste -sd,)
pg_q "DELETE FROM event_chunks WHERE stream_ref IN (SELECT id FROM streams WHERE stream_id IN ($ids))" >/dev/null
pg_q "DELETE FROM streams WHERE stream_id IN ($ids)" >/dev/null
stop_ingest

# ---- the statistics are folded in the background, every --fold-interval seconds ----
start_ingest --fold-interval 1 || t_bail "sm-ingest starts with --fold-interval 1"
pg_q "SELECT sm_fold_stats(100000)" >/dev/null
n0=$(pg_q "SELECT n FROM stream_total")
{ stream "$(newid)"; stream "$(newid)"; } >"$T_TMP/fold.ndjson"
t0=$(date +%s%N)
post "$T_TMP/fold.ndjson" application/x-ndjson
left=$(pg_until 0 "SELECT count(*) FROM stat_deltas")
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
t_eq "background fold: no delta left within 5 s ($ms ms; the default would be 10 s), N counts the two streams sent" \
	"$HTTP_STATUS $left $((ms < 5000)) $(pg_q "SELECT n FROM stream_total")" "200 0 1 $((n0 + 2))"
stop_ingest

# ---- the background fold (common/statfold.c) sums as sm_fold_stats() does ----
# Deltas of two days, a frame and a call in several of them, one with no call, a total already
# there: sm-ingest's fold and the SQL function, each on the same deltas, give the same rows.
fold_input() {
	pg_q "DELETE FROM stat_streams WHERE day < '2002-01-01';
		DELETE FROM stat_frames WHERE day < '2002-01-01'; DELETE FROM stat_calls WHERE day < '2002-01-01';
		INSERT INTO stat_frames VALUES ('2001-01-01', 7, 10);
		INSERT INTO stat_deltas (day, streams, frame_ids, frame_counts, callers, callees, call_counts) VALUES
		('2001-01-01', 3, '{7,8}', '{3,1}', '{7}', '{8}', '{1}'),
		('2001-01-02', 1, '{7}', '{1}', '{}', '{}', '{}'),
		('2001-01-01', 2, '{8,9}', '{2,2}', '{7,8}', '{8,9}', '{1,2}')" >/dev/null
}
fold_output() {
	pg_q "SELECT (SELECT string_agg(day || ':' || n, ' ' ORDER BY day) FROM stat_streams WHERE day < '2002-01-01')
		|| ' | ' || (SELECT string_agg(day || ':' || frame_id || ':' || n, ' ' ORDER BY day, frame_id)
			FROM stat_frames WHERE day < '2002-01-01')
		|| ' | ' || (SELECT string_agg(day || ':' || caller || '>' || callee || ':' || n, ' ' ORDER BY day, caller, callee)
			FROM stat_calls WHERE day < '2002-01-01')"
}
fold_want="2001-01-01:5 2001-01-02:1 | 2001-01-01:7:13 2001-01-01:8:3 2001-01-01:9:2 2001-01-02:7:1 | 2001-01-01:7>8:2 2001-01-01:8>9:2"
start_ingest --fold-interval 1 || t_bail "sm-ingest starts with --fold-interval 1"
fold_input
left=$(pg_until 0 "SELECT count(*) FROM stat_deltas")
t_eq "background fold: the deltas summed per day, frame and call, added to what was there" \
	"$left | $(fold_output)" "0 | $fold_want"
# a delta that is no such arrays (a NULL element) is refused whole, as the SQL function refuses it
pg_q "INSERT INTO stat_deltas (day, streams, frame_ids, frame_counts, callers, callees, call_counts)
	VALUES ('2001-01-01', 1, '{7,NULL}', '{1,1}', '{}', '{}', '{}')" >/dev/null
for _ in $(seq 50); do grep -q 'folding statistics failed' "$INGEST_LOG" && break; sleep 0.1; done
t_eq "background fold: a delta with a NULL frame is refused, kept, nothing of it counted" \
	"$(pg_q "SELECT count(*) FROM stat_deltas") | $(fold_output) | $(grep -q "folding statistics failed.*not integer arrays" "$INGEST_LOG" && echo logged)" \
	"1 | $fold_want | logged"
pg_q "DELETE FROM stat_deltas" >/dev/null
stop_ingest
fold_input
pg_q "SELECT sm_fold_stats(1000)" >/dev/null
t_eq "sm_fold_stats(): the same rows from the same deltas" "$(fold_output)" "$fold_want"
pg_q "DELETE FROM stat_streams WHERE day < '2002-01-01'; DELETE FROM stat_frames WHERE day < '2002-01-01';
	DELETE FROM stat_calls WHERE day < '2002-01-01'" >/dev/null

# ---- SIGTERM under load: every acknowledged stream is stored, whole ----
start_ingest --workers 2 || t_bail "sm-ingest starts for the SIGTERM test"
loader() { # loader N: single-stream requests until the server goes away
	local id i
	for i in $(seq 200); do
		id=$(newid)
		stream "$id" >"$T_TMP/l$1.json"
		if curl -s --max-time 20 -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
			--data-binary "@$T_TMP/l$1.json" "$INGEST_URL/api/v1/streams" | grep -q '"accepted":1'; then
			echo "$id"
		fi
	done
}
pids=
for n in 1 2 3 4; do loader $n >"$T_TMP/acked.$n" & pids="$pids $!"; done
sleep 1.5
stop_ingest && t_ok "SIGTERM under load: clean exit"
wait $pids
cat "$T_TMP"/acked.* >"$T_TMP/acked"
acked=$(wc -l <"$T_TMP/acked")
t_eq "SIGTERM under load: some streams were acknowledged first ($acked)" "$([ "$acked" -gt 0 ] && echo yes)" yes
t_eq "SIGTERM under load: every acknowledged stream is stored" \
	"$(pg_q "SELECT count(*) FROM streams WHERE stream_id::text = ANY(string_to_array(:'ids', ' '))" \
		-v ids="$(tr '\n' ' ' <"$T_TMP/acked" | sed 's/ $//')")" "$acked"
t_eq "SIGTERM under load: nothing half written" "$(pg_q "SELECT count(*) FROM streams s
	WHERE n_events <> (SELECT count(*) FROM events e WHERE e.stream_ref = s.id)")" 0

# ---- SIGTERM while a request waits on the database: it is answered, then the server exits 0 ----
start_ingest --workers 1 --drain-timeout 1 || t_bail "sm-ingest starts for the slow-database test"
psql -X -q -c "BEGIN; LOCK TABLE streams IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(8); COMMIT;" >/dev/null 2>&1 &
lockpid=$!
sleep 0.5
ID=$(newid)
stream "$ID" >"$T_TMP/slow.json"
curl -s -o "$T_TMP/slow.out" -w '%{http_code}' -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
	--data-binary "@$T_TMP/slow.json" "$INGEST_URL/api/v1/streams" >"$T_TMP/slow.code" &
curlpid=$!
sleep 0.5
stop_ingest && t_ok "slow database: clean exit after the drain"
wait $curlpid $lockpid
t_eq "slow database: the held request was answered" "$(cat "$T_TMP/slow.code") $(cat "$T_TMP/slow.out")" \
	'200 {"accepted":1,"duplicates":0,"rejected":[]}'
t_eq "slow database: and stored" "$(pg_q "SELECT count(*) FROM streams WHERE stream_id = '$ID'")" 1

# ---- a full queue sheds load with 503 and Retry-After ----
awk 'BEGIN {
	printf "{\"v\":1,\"stream_id\":\"@ID@\",\"host\":\"big\",\"app\":\"big\",";
	printf "\"symptom\":{\"kind\":\"manual\",\"tid\":1,\"start_ns\":0,\"end_ns\":1},";
	printf "\"frames\":[\"a!f\",\"a!g\"],\"stacks\":[[0,1]],\"events\":[";
	for (i = 0; i < 150000; i++) printf "%s{\"kind\":\"run\",\"tid\":1,\"ts_ns\":%d,\"dur_ns\":1,\"stack\":0}", (i ? "," : ""), i;
	printf "]}\n" }' >"$T_TMP/big.tpl"
start_ingest --workers 1 --queue 1 || t_bail "sm-ingest starts with a queue of 1"
# the one worker held by a lock on the streams while the six arrive: one request in the worker, one
# in the queue, the others shed (without it, a fast enough database could leave nothing to shed)
psql -X -q -c "BEGIN; LOCK TABLE streams IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(4); COMMIT;" >/dev/null 2>&1 &
lockpid=$!
sleep 0.5
pids=
for n in 1 2 3 4 5 6; do
	sed "s/@ID@/$(newid)/" "$T_TMP/big.tpl" >"$T_TMP/big$n.json"
	curl -s -D "$T_TMP/h$n" -o "$T_TMP/b$n" -w '%{http_code}\n' -H "Authorization: Bearer $TOKEN" \
		-H 'Content-Type: application/json' --data-binary "@$T_TMP/big$n.json" \
		"$INGEST_URL/api/v1/streams" >"$T_TMP/code$n" &
	pids="$pids $!"
done
wait $pids $lockpid
codes=$(cat "$T_TMP"/code* | sort | uniq -c | sed 's/^ *//' | tr '\n' ' ')
n503=$(grep -l '^503$' "$T_TMP"/code* | wc -l)
n200=$(grep -l '^200$' "$T_TMP"/code* | wc -l)
t_eq "full queue: some requests are shed ($codes)" "$([ "$n503" -ge 1 ] && [ "$n200" -ge 1 ] && echo yes)" yes
f=$(grep -l '^503$' "$T_TMP"/code* | head -n 1)
f=${f#"$T_TMP"/code}
t_eq "full queue: the 503 says why" "$(cat "$T_TMP/b$f")" '{"error":"server busy: request queue full; retry later"}'
t_match "full queue: the 503 has Retry-After" "$(cat "$T_TMP/h$f")" $'Retry-After: 1\r'
t_eq "full queue: what was answered 200 is stored" "$(pg_q "SELECT count(*) FROM streams WHERE host = 'big'")" "$n200"
stop_ingest

# ---- the server refuses a schema that is behind ----
pg_q "CREATE DATABASE \"${PGDATABASE}_empty\"" -d postgres
t_cleanup "pg_q 'DROP DATABASE IF EXISTS \"${PGDATABASE}_empty\" WITH (FORCE)' -d postgres"
out=$(PGDATABASE=${PGDATABASE}_empty timeout 30 "$SM_BIN_DIR/sm-ingest" --listen 127.0.0.1:0 2>&1)
t_eq "schema behind: exit status" "$?" 1
t_match "schema behind: says what to do" "$out" "database schema is at version 0, this program needs [0-9]+: run 'sm-admin migrate'"

# ---- retention drops whole old days ----
pg_q "SELECT sm_ensure_partitions((now() AT TIME ZONE 'UTC')::date - 40, 1)" >/dev/null
old=$(newid)
pg_q "WITH s AS (INSERT INTO streams (stream_id, host, app, symptom_kind, symptom_tid, symptom_start_ns,
	symptom_end_ns, n_events, received_at) VALUES ('$old', 'old', 'old', 'manual', 1, 0, 1, 1, now() - interval '40 days')
	RETURNING id, received_at)
	INSERT INTO event_chunks SELECT id, received_at, 0, '{1}', sm_event_record('r', 1, 0, 1, 1, NULL) FROM s" >/dev/null
pg_q "INSERT INTO stat_deltas (day, streams, frame_ids, frame_counts, callers, callees, call_counts)
	VALUES ((now() AT TIME ZONE 'UTC')::date - 40, 1, '{1}', '{1}', '{}', '{}', '{}')" >/dev/null
pg_q "SELECT sm_fold_stats(1000)" >/dev/null
total_before=$(pg_q "SELECT n FROM stream_total")
recent=$(pg_q "SELECT count(*) FROM streams WHERE host <> 'old'")
sm_admin retention --days 30 >/dev/null
out=$(sm_admin maintain)
t_match "retention: maintain reports a dropped partition" "$out" "dropped by retention: 1,"
t_eq "retention: the old stream and its events are gone" \
	"$(pg_q "SELECT count(*) FROM streams WHERE stream_id = '$old'")|$(pg_q "SELECT count(*) FROM events WHERE stream_ref NOT IN (SELECT id FROM streams)")" "0|0"
t_eq "retention: the old partition is gone" \
	"$(pg_q "SELECT count(*) FROM pg_class WHERE relname = 'event_chunks_p' || to_char((now() AT TIME ZONE 'UTC')::date - 40, 'YYYYMMDD')")" 0
t_eq "retention: recent streams are kept" "$(pg_q "SELECT count(*) FROM streams")" "$recent"
t_eq "retention: statistics lose exactly the old day" "$(pg_q "SELECT n FROM stream_total")" "$((total_before - 1))"

# ---- runs expire too: an old run goes with its stacks, patterns and clusters ----
run_old=$(pg_q "INSERT INTO runs (status, params, created_at, finished_at) VALUES ('done', '{}',
	now() - interval '100 days', now() - interval '100 days') RETURNING id")
run_new=$(pg_q "INSERT INTO runs (status, params, finished_at) VALUES ('done', '{}', now()) RETURNING id")
run_live=$(pg_q "INSERT INTO runs (status, params, created_at, started_at, heartbeat_at, worker)
	VALUES ('running', '{}', now() - interval '100 days', now(), now(), 'x:1') RETURNING id")
pat=$(pg_q "INSERT INTO patterns (run_id, kind, rank, frame_ids, cost_ns, events, streams, stack_ids)
	VALUES ($run_old, 'w', 1, '{1}', 1, 1, 1, '{1}') RETURNING id")
clu=$(pg_q "INSERT INTO clusters (run_id, kind, total_cost_ns, streams, events, avg_cost_ns, rank_total_cost,
	rank_streams, rank_events, rank_avg_cost, medoid, common_frame_ids, members, alignment)
	VALUES ($run_old, 'w', 1, 1, 1, 1, 1, 1, 1, 1, $pat, '{1}', '{$pat}', '[]') RETURNING id")
pg_q "INSERT INTO run_stacks VALUES ($run_old, 'w', 1, 1, 1, 1)" >/dev/null
sig=$("$SM_BIN_DIR/sm-cluster" signatures create --name from-an-old-run --frame 'x!y' --from-cluster "$clu")
t_eq "signature: remembers its cluster's run" "$(pg_q "SELECT from_cluster, from_run FROM signatures WHERE id = $sig")" "$clu|$run_old"
t_eq "retention: both shown" "$(sm_admin retention)" "retention:
  days=30 run_days=90"
t_eq "retention: run days set" "$(sm_admin retention --run-days 90)" "run retention set to 90 days"
sm_admin retention --run-days x >/dev/null 2>"$T_TMP/e"
t_eq "retention: a bad number" "$?|$(cat "$T_TMP/e")" \
	"2|sm-admin: retention: --days and --run-days take a whole number of days (0: keep forever)"
sm_admin maintain >/dev/null
t_eq "run retention: the old run and its results are gone, the new and the running one kept" \
	"$(pg_q "SELECT (SELECT string_agg(id::text, ',' ORDER BY id) FROM runs WHERE id IN ($run_old, $run_new, $run_live)),
	 (SELECT count(*) FROM patterns WHERE run_id = $run_old), (SELECT count(*) FROM clusters WHERE run_id = $run_old),
	 (SELECT count(*) FROM run_stacks WHERE run_id = $run_old)")" "$run_new,$run_live|0|0|0"
t_eq "run retention: the signature keeps its frames and where it came from" \
	"$(pg_q "SELECT name, array_to_string(frames, '>'), from_cluster, from_run FROM signatures WHERE id = $sig")" \
	"from-an-old-run|x!y|$clu|$run_old"

# ---- frames and stacks nothing refers to are collected, while ingest has their ids cached ----
start_ingest --auth-cache-ms 0 || t_bail "sm-ingest starts again"
GC1=$(newid)
stream "$GC1" 's/"nginx!/"gc!/g; s/"libc\.so\.6!/"gc!libc./g' >"$T_TMP/gc1.json"
post "$T_TMP/gc1.json"
t_eq "collection: a stream with frames of its own stored" "$HTTP_STATUS" 200
gcframes="SELECT count(*) FROM frames WHERE name LIKE 'gc!%'"
gcstacks="SELECT count(*) FROM stacks s WHERE EXISTS (SELECT 1 FROM frames f WHERE f.id = ANY (s.frame_ids) AND f.name LIKE 'gc!%')"
t_eq "collection: its frames (those its events use) and stacks exist" "$(pg_q "$gcframes")|$(pg_q "$gcstacks")" "5|2"
epoch0=$(pg_q "SELECT value FROM settings WHERE key = 'intern_epoch'")
# as retention would do: the stream, its events and its day's statistics go
pg_q "SELECT sm_fold_stats(1000000)" >/dev/null
pg_q "DELETE FROM event_chunks WHERE stream_ref = (SELECT id FROM streams WHERE stream_id = '$GC1');
	DELETE FROM streams WHERE stream_id = '$GC1';
	DELETE FROM stat_frames WHERE frame_id IN (SELECT id FROM frames WHERE name LIKE 'gc!%');
	DELETE FROM stat_calls WHERE caller IN (SELECT id FROM frames WHERE name LIKE 'gc!%')
		OR callee IN (SELECT id FROM frames WHERE name LIKE 'gc!%')" >/dev/null
out=$(sm_admin collect)
t_match "collection: reports what it deleted" "$out" "^stacks collected: [1-9][0-9]*, frames collected: [1-9][0-9]*$"
t_eq "collection: the stream's own frames and stacks are gone" "$(pg_q "$gcframes")|$(pg_q "$gcstacks")" "0|0"
t_eq "collection: every event's stack, every stack's frames remain" \
	"$(pg_q "SELECT count(*) FROM events e WHERE NOT EXISTS (SELECT 1 FROM stacks s WHERE s.id = e.stack_id)")|$(pg_q "SELECT count(*) FROM stacks s, unnest(s.frame_ids) u(f) WHERE NOT EXISTS (SELECT 1 FROM frames WHERE id = u.f)")" "0|0"
t_eq "collection: a new epoch" "$(pg_q "SELECT value::bigint - $epoch0 FROM settings WHERE key = 'intern_epoch'")" 1
# the same frames again: the server must not use the ids it cached before the collection
GC2=$(newid)
stream "$GC2" 's/"nginx!/"gc!/g; s/"libc\.so\.6!/"gc!libc./g' >"$T_TMP/gc2.json"
post "$T_TMP/gc2.json"
t_eq "collection: the same frames stored again" "$HTTP_STATUS|$(pg_q "$gcframes")|$(pg_q "$gcstacks")" "200|5|2"
t_eq "collection: the new events' stacks and frames exist" \
	"$(pg_q "SELECT count(*) FROM events e WHERE NOT EXISTS (SELECT 1 FROM stacks s WHERE s.id = e.stack_id)")|$(pg_q "SELECT count(*) FROM stacks s, unnest(s.frame_ids) u(f) WHERE NOT EXISTS (SELECT 1 FROM frames WHERE id = u.f)")" "0|0"
t_match "collection: the server mapped its ids again" "$(cat "$SRV_LOG")" "interned ids of a new epoch"
stop_ingest

# ---- a token bound to a host sends that host's streams only ----
start_ingest --auth-cache-ms 0 || t_bail "sm-ingest starts once more"
HOSTTOK=$(sm_admin token create --role ingest --host web-17 2>/dev/null)
t_eq "host token: stored with its host" "$(pg_q "SELECT role, host FROM tokens WHERE host IS NOT NULL")" "ingest|web-17"
H1=$(newid)
stream "$H1" >"$T_TMP/h1.json"
http POST "$INGEST_URL/api/v1/streams" -H "Authorization: Bearer $HOSTTOK" -H "Content-Type: application/json" \
	--data-binary "@$T_TMP/h1.json"
t_eq "host token: its own host's stream accepted" "$HTTP_STATUS $HTTP_BODY" '200 {"accepted":1,"duplicates":0,"rejected":[]}'
H2=$(newid)
stream "$H2" 's/"web-17"/"web-18"/' >"$T_TMP/h2.json"
http POST "$INGEST_URL/api/v1/streams" -H "Authorization: Bearer $HOSTTOK" -H "Content-Type: application/json" \
	--data-binary "@$T_TMP/h2.json"
t_eq "host token: another host's stream refused" "$HTTP_STATUS $HTTP_BODY" \
	"403 {\"error\":\"host: this token sends streams of host 'web-17' only\",\"stream_id\":\"$H2\"}"
{ stream "$(newid)"; stream "$H2" 's/"web-17"/"web-18"/'; } >"$T_TMP/h3.ndjson"
http POST "$INGEST_URL/api/v1/streams" -H "Authorization: Bearer $HOSTTOK" -H "Content-Type: application/x-ndjson" \
	--data-binary "@$T_TMP/h3.ndjson"
t_eq "host token: in a batch, the other host's line is refused, the rest stored" "$HTTP_STATUS $HTTP_BODY" \
	"200 {\"accepted\":1,\"duplicates\":0,\"rejected\":[{\"line\":2,\"stream_id\":\"$H2\",\"error\":\"host: this token sends streams of host 'web-17' only\"}]}"
t_eq "host token: nothing of web-18 stored" "$(pg_q "SELECT count(*) FROM streams WHERE host = 'web-18'")" 0
out=$(sm_admin token create --role analyst --host web-17 2>&1)
t_eq "host token: only ingest tokens have a host" "$?|$out" "1|sm-admin: host: only ingest tokens are bound to a host"
# ---- a guard agent's report about itself ----
report() { # report TOKEN JSON: POST it to /api/v1/agents/report
	http POST "$INGEST_URL/api/v1/agents/report" -H "Authorization: Bearer $1" -H "Content-Type: application/json" \
		--data-binary "$2"
}
REP='{"v":1,"host":"web-17","exe":"/usr/sbin/nginx","build_id":"3f9a0c","mode":"guard","agent_version":"0.9.0","app":"nginx","pid":4211,"started_ns":1700000000000000000,"units":100,"violations":3,"drops":1,"spool_backlog":2,"ship_errors":0,"future_field":[1]}'
report "$HOSTTOK" "$REP"
t_eq "report: accepted; no settings pushed" "$HTTP_STATUS $HTTP_BODY" '200 {"ok":true,"settings":{}}'
t_eq "report: the process's row" "$(pg_q "SELECT host, pid, extract(epoch FROM started_at)::bigint, exe, build_id, mode,
	agent_version, app, exited, units, violations, drops, spool_backlog, ship_errors, collector FROM agent_procs")" \
	"web-17|4211|1700000000|/usr/sbin/nginx|3f9a0c|guard|0.9.0|nginx|f|100|3|1|2|0|process"
report "$HOSTTOK" "${REP/\"units\":100,\"violations\":3/\"units\":250,\"violations\":7}"
t_eq "report: a second report updates the row" "$HTTP_STATUS|$(pg_q "SELECT count(*), sum(units), sum(violations) FROM agent_procs")" "200|1|250|7"
t_eq "report: the hour counts what grew" "$(pg_q "SELECT host, units, violations, hour = date_trunc('hour', now()) FROM agent_hours")" "web-17|250|7|t"
report "$HOSTTOK" "${REP/\"pid\":4211/\"pid\":4300}"
t_eq "report: another process of the host" "$(pg_q "SELECT count(*) FROM agent_procs")|$(pg_q "SELECT units, violations FROM agent_hours")" "2|350|10"
pg_q "INSERT INTO agent_settings (app, guard, k, sample_hz) VALUES ('*', NULL, 5, 50), ('nginx', false, NULL, NULL),
	('redis', NULL, 9, NULL)" >/dev/null
report "$HOSTTOK" "$REP"
t_eq "report: the answer carries the app's settings over every app's" "$HTTP_BODY" \
	'{"ok":true,"settings":{"guard":false,"k":5,"sample_hz":50}}'
report "$HOSTTOK" "${REP/\"app\":\"nginx\"/\"app\":\"other\"}"
t_eq "report: an app without a row of its own gets every app's" "$HTTP_BODY" '{"ok":true,"settings":{"k":5,"sample_hz":50}}'
pg_q "DELETE FROM agent_settings" >/dev/null
report "$HOSTTOK" "${REP/\"web-17\"/\"web-18\"}"
t_eq "report: another host's report refused" "$HTTP_STATUS $HTTP_BODY|$(pg_q "SELECT count(*) FROM agent_procs WHERE host = 'web-18'")" \
	"403 {\"error\":\"host: this token reports for host 'web-17' only\"}|0"
report "$HOSTTOK" "${REP/\"mode\":\"guard\"/\"mode\":\"sleep\"}"
t_eq "report: a bad mode" "$HTTP_STATUS $HTTP_BODY" '400 {"error":"mode: must be train, guard or inert"}'
report "$HOSTTOK" "${REP/\"future_field\"/\"collector\":\"host\",\"future_field\"}"
t_eq "report: the host's collector reports for the process" \
	"$HTTP_STATUS|$(pg_q "SELECT collector FROM agent_procs WHERE pid = 4211")" "200|host"
report "$HOSTTOK" "${REP/\"future_field\"/\"collector\":\"sidecar\",\"future_field\"}"
t_eq "report: a bad collector" "$HTTP_STATUS $HTTP_BODY|$(pg_q "SELECT collector FROM agent_procs WHERE pid = 4211")" \
	'400 {"error":"collector: must be host or process"}|host'
report "$HOSTTOK" "${REP/\"pid\":4211,/}"
t_eq "report: pid missing" "$HTTP_STATUS $HTTP_BODY" '400 {"error":"pid: required"}'
report "$HOSTTOK" "${REP/\"units\":100/\"units\":-5}"
t_eq "report: a negative counter" "$HTTP_STATUS $HTTP_BODY" '400 {"error":"units: a whole number from 0 to 9223372036854775807"}'
report "$HOSTTOK" "${REP/\"v\":1/\"v\":2}"
t_eq "report: an unknown version" "$HTTP_STATUS $HTTP_BODY" '400 {"error":"v: must be 1"}'
report "$HOSTTOK" '{"v":1,'
t_match "report: not JSON" "$HTTP_STATUS $HTTP_BODY" '^400 \{"error":"not JSON: '
report "$ANALYST" "$REP"
t_eq "report: an analyst token may not report" "$HTTP_STATUS" 401
http POST "$INGEST_URL/api/v1/agents/report" -H "Authorization: Bearer $HOSTTOK" -H "Content-Type: text/plain" --data-binary "$REP"
t_eq "report: JSON only" "$HTTP_STATUS $HTTP_BODY" '415 {"error":"Content-Type: must be application/json"}'
report "$HOSTTOK" "${REP/\"ship_errors\":0/\"ship_errors\":0,\"exiting\":true}"
t_eq "report: the last report marks the process exited" "$(pg_q "SELECT exited FROM agent_procs WHERE pid = 4211")" t
t_eq "report: counters that fell add nothing to the hour; refused reports added nothing" \
	"$(pg_q "SELECT count(*), sum(units) FROM agent_procs")|$(pg_q "SELECT units, violations FROM agent_hours")" "2|200|350|10"
# counters at the largest bigint: counted only as far as a process can have counted (one per 10 ns
# of its life, and of the interval since its previous report, each plus a minute); the hour's sums
# saturate. rep_big PID UNITS VIOLATIONS: a report of a process started an hour ago
BIGSTART=$(($(date +%s) - 3600))000000000
rep_big() {
	report "$HOSTTOK" "${REP/\"pid\":4211,\"started_ns\":1700000000000000000,\"units\":100,\"violations\":3/\"pid\":$1,\"started_ns\":$BIGSTART,\"units\":$2,\"violations\":$3}"
}
for pid in 5001 5002; do
	rep_big $pid 9223372036854775807 9223372036854775807
	t_eq "report: counters at 2^63-1 accepted (pid $pid)" "$HTTP_STATUS $HTTP_BODY" '200 {"ok":true,"settings":{}}'
done
t_eq "report: a process's counters bounded by its life (an hour and a minute: 3.66e11, a few seconds' slack)" \
	"$(pg_q "SELECT count(*), bool_and(units BETWEEN 366000000000 AND 366500000000 AND violations = units)
	 FROM agent_procs WHERE pid IN (5001, 5002)")" "2|t"
report "$HOSTTOK" "${REP/\"pid\":4211/\"pid\":5003}"
t_eq "report: a normal report after them is stored, the hour counts all three" \
	"$HTTP_STATUS|$(pg_q "SELECT units, violations FROM agent_procs WHERE pid = 5003")|$(pg_q "SELECT
	 units = 450 + (SELECT sum(units) FROM agent_procs WHERE pid IN (5001, 5002)),
	 violations = 13 + (SELECT sum(violations) FROM agent_procs WHERE pid IN (5001, 5002)) FROM agent_hours")" \
	"200|100|3|t|t"
before=$(pg_q "SELECT units FROM agent_hours")
rep_big 5005 100 0
rep_big 5005 9223372036854775807 0
t_eq "report: what grew since a process's last report counts at most for the interval (a minute and seconds)" \
	"$HTTP_STATUS|$(pg_q "SELECT units - $before BETWEEN 6000000100 AND 6050000100 FROM agent_hours")" "200|t"
# issue 25: two processes at the old largest counter (2^62-1) overflowed the hour (503 for the rest of it)
rep_big 5006 4611686018427387903 4611686018427387903
out="$HTTP_STATUS"
rep_big 5007 4611686018427387903 4611686018427387903
out="$out $HTTP_STATUS"
report "$HOSTTOK" "${REP/\"pid\":4211/\"pid\":5008}"
t_eq "report: two processes at 2^62-1, then a normal report: all answered, the last stored" \
	"$out $HTTP_STATUS|$(pg_q "SELECT units, violations FROM agent_procs WHERE pid = 5008")" "200 200 200|100|3"
pg_q "UPDATE agent_hours SET units = 9223372036854775000, violations = 9223372036854775000" >/dev/null
rep_big 5004 1000 1000
t_eq "report: the hour's sums saturate at the largest bigint, the report stored" \
	"$HTTP_STATUS|$(pg_q "SELECT units, violations FROM agent_hours")|$(pg_q "SELECT count(*) FROM agent_procs WHERE pid = 5004")" \
	"200|9223372036854775807|9223372036854775807|1"
pg_q "DELETE FROM agent_procs WHERE pid > 5000; UPDATE agent_hours SET units = 350, violations = 10" >/dev/null
pg_q "UPDATE agent_procs SET last_seen = now() - interval '40 days' WHERE pid = 4300;
	INSERT INTO agent_hours VALUES ('web-17', date_trunc('hour', now()) - interval '40 days', 5, 5)" >/dev/null
pg_q "SELECT sm_apply_retention(now())" >/dev/null
t_eq "report: retention drops processes silent and hours older than retention_days" \
	"$(pg_q "SELECT string_agg(pid::text, ',') FROM agent_procs")|$(pg_q "SELECT count(*), sum(units) FROM agent_hours")" "4211|1|350"

# ---- strict framing (RFC 9112): what two parsers could read differently is refused and the
# connection closed, before any body is read; a request smuggled behind the body never runs ----
ihost=${INGEST_URL#http://}
ihost=${ihost%:*}
iport=${INGEST_URL##*:}
raw() { "$SM_REPO/tests/integration/raw_http.py" "$ihost" "$iport" 3; }
SMUG1=$(newid) SMUG2=$(newid)
stream "$SMUG1" | tr -d '\n' >"$T_TMP/smug1.json"
stream "$SMUG2" | tr -d '\n' >"$T_TMP/smug2.json"
inner=$(printf 'POST /api/v1/streams HTTP/1.1\r\nHost: i\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s' \
	"$TOKEN" "$(stat -c %s "$T_TMP/smug2.json")" "$(cat "$T_TMP/smug2.json")")
outer() { # outer FRAMING-HEADERS: the first stream, the smuggled request behind it
	printf 'POST /api/v1/streams HTTP/1.1\r\nHost: i\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n%s\r\n%s%s' \
		"$TOKEN" "$1" "$(cat "$T_TMP/smug1.json")" "$inner"
}
n1=$(stat -c %s "$T_TMP/smug1.json")
n2=$((n1 + ${#inner}))
got=$(outer "Content-Length: $n1"$'\r\n'"Content-Length: $n2"$'\r\n' | raw)
t_eq "framing: two different Content-Length: 400, closed" "$got" \
	$'400 closed\n{"error": "Content-Length: more than one"}'
got=$(outer "Content-Length: $n1"$'\r\n'"Content-Length: $n1"$'\r\n' | raw)
t_eq "framing: two equal Content-Length: 400, closed" "${got%%$'\n'*}" "400 closed"
chunked=$(printf '%x\r\n%s\r\n0\r\n\r\n' "$n1" "$(cat "$T_TMP/smug1.json")")
got=$( { printf 'POST /api/v1/streams HTTP/1.1\r\nHost: i\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n%s%s' \
	"$TOKEN" "${#chunked}" "$chunked" "$inner"; } | raw)
t_eq "framing: Content-Length with Transfer-Encoding: 400, closed" "$got" \
	$'400 closed\n{"error": "Content-Length: not allowed with Transfer-Encoding"}'
got=$(outer "Transfer-Encoding: gzip, chunked"$'\r\n' | raw)
t_eq "framing: a transfer coding other than chunked: 501, closed" "$got" \
	$'501 closed\n{"error": "Transfer-Encoding: only chunked is supported"}'
got=$(outer "Content-Length : $n1"$'\r\n' | raw)
t_eq "framing: a header name with a space: 400, closed" "${got%%$'\n'*}" "400 closed"
got=$(printf 'GET /healthz HTTP/1.1\r\n\r\n' | raw)
t_eq "framing: HTTP/1.1 without Host: 400, closed" "$got" \
	$'400 closed\n{"error": "Host: missing (HTTP/1.1 requires it)"}'
got=$(printf 'GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n' | raw)
t_eq "framing: two Host headers: 400, closed" "$got" $'400 closed\n{"error": "Host: more than one"}'
got=$(printf 'GET /healthz HTTP/1.0\r\n\r\n' | raw)
t_eq "framing: HTTP/1.0 may omit Host" "${got%%$'\n'*}" "200 closed"
# fields read as one value, sent twice: the server and a proxy in front could each use another
# (the first token valid and the second not, or the other way round)
for extra in "Authorization: Bearer sm_not_a_token|Authorization" "Content-Type: application/x-ndjson|Content-Type" \
	"Content-Encoding: identity"$'\r\n'"Content-Encoding: identity|Content-Encoding"; do
	got=$(outer "${extra%|*}"$'\r\n'"Content-Length: $n1"$'\r\n' | raw)
	t_eq "framing: two ${extra#*|} headers: 400, closed" "$got" \
		$'400 closed\n{"error": "'"${extra#*|}"': more than one"}'
done
got=$( { printf 'POST /api/v1/streams HTTP/1.1\r\nHost: i\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s' \
	"$TOKEN" "$n1" "$(cat "$T_TMP/smug1.json")"; } | raw)
t_eq "framing: the same request framed once is stored" "${got%%$'\n'*}" "200 open"
t_eq "framing: the smuggled requests were never run" \
	"$(pg_q "SELECT count(*) FROM streams WHERE stream_id IN ('$SMUG1', '$SMUG2')")" 1

# ---- /healthz and /metrics: GET and HEAD, OPTIONS, other methods 405; the database's state as
# soon as a request finds it (it lagged up to 2 s behind, the maintenance thread's check) ----
t_probe_methods "$INGEST_URL"
pg_q "ALTER DATABASE \"$PGDATABASE\" WITH ALLOW_CONNECTIONS false" -d postgres
pg_q "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = :'d'" -d postgres -v d="$PGDATABASE" >/dev/null
for i in $(seq 1 100); do
	[ "$(curl -s -o /dev/null -w '%{http_code}' "$INGEST_URL/healthz")" = 503 ] && break
	sleep 0.1
done
t_eq "database gone: /healthz 503" "$(curl -s -o /dev/null -w '%{http_code}' "$INGEST_URL/healthz")" 503
pg_q "ALTER DATABASE \"$PGDATABASE\" WITH ALLOW_CONNECTIONS true" -d postgres
stream "$(newid)" >"$T_TMP/back.json"
post "$T_TMP/back.json"
back=$HTTP_STATUS
http GET "$INGEST_URL/healthz"
t_eq "database back: the first POST succeeds, and /healthz says so at once" "$back|$HTTP_STATUS" "200|200"

# ---- log lines: a path from a client is one escaped value, on one line, after the route ----
http GET "$INGEST_URL/nope%22%20level=error%20msg=%22forged%0D%0Alevel=error"
t_eq "log: a path no endpoint took: one escaped value, one line" \
	"$HTTP_STATUS|$(grep -c forged "$INGEST_LOG")|$(grep forged "$INGEST_LOG" | grep -o ' route=.* status=404')" \
	'404|1| route=- path="/nope\" level=error msg=\"forged\r\nlevel=error" status=404'

# ---- a client gone while the database held its request: the server still stops at once ----
# (libmicrohttpd ends such a request without asking the handler again: the count of requests held
# by workers, which shutdown waits for, must drop all the same; it waited 70 s before)
t_ndjson "$T_TMP/held.ndjson" 1
pg_q "BEGIN; LOCK TABLE streams IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(3); COMMIT;" >/dev/null &
lockpid=$!
sleep 0.5
curl -s --max-time 1 -o /dev/null -X POST "$INGEST_URL/api/v1/streams" -H "Authorization: Bearer $TOKEN" \
	-H "Content-Type: application/x-ndjson" --data-binary @"$T_TMP/held.ndjson"
wait "$lockpid"
sleep 1
t_eq "a client gone while the database held its request: stored all the same" \
	"$(pg_q "SELECT count(*) FROM streams WHERE stream_id = '$(cat "$T_TMP/held.ndjson.ids")'")" 1
t0=$SECONDS
stop_ingest
t_eq "and the server stops at once on SIGTERM (under 5 s), exit status 0" "$((SECONDS - t0 < 5))|$INGEST_RC" "1|0"

# ---- a started server's id cache is warmed from the database ----
# metric NAME LABELS: a sample of the last GET /metrics
metric() { awk -v k="$1{$2}" '$1 == k { print $2 }' <<<"$HTTP_BODY"; }
lookups() {
	http GET "$INGEST_URL/metrics"
	echo "$(metric sm_ingest_idcache_lookups_total 'kind="frame",result="hit"') $(metric sm_ingest_idcache_lookups_total 'kind="frame",result="miss"') $(metric sm_ingest_idcache_lookups_total 'kind="stack",result="hit"') $(metric sm_ingest_idcache_lookups_total 'kind="stack",result="miss"')"
}
# warmed: waits for the log's line of the warm-up (the maintenance thread's first step); prints it
warmed() {
	local i
	for i in $(seq 100); do
		grep -q 'msg="id cache warmed"\|msg="warming the id cache failed"' "$INGEST_LOG" && break
		sleep 0.1
	done
	grep -o 'msg="id cache warmed" frames=[0-9]* stacks=[0-9]*\|msg="warming the id cache failed".*' "$INGEST_LOG"
}
# events_of ID: the stream's events with their stacks' frame names
events_of() {
	pg_q "SELECT e.seq, (SELECT string_agg(f.name, ' > ' ORDER BY u.o) FROM stacks s,
		unnest(s.frame_ids) WITH ORDINALITY AS u(fid, o) JOIN frames f ON f.id = u.fid WHERE s.id = e.stack_id)
		FROM events e JOIN streams r ON r.id = e.stream_ref WHERE r.stream_id = :'id' ORDER BY e.seq" -v id="$1"
}
WARM_EVENTS="0|nginx!main > nginx!ngx_worker_process_cycle > nginx!ngx_http_handler > libc.so.6!fdatasync
1|nginx!main > nginx!ngx_worker_process_cycle > nginx!ngx_http_handler > nginx!std::map<K, V>::find \"q\"
2|nginx!main > nginx!ngx_worker_process_cycle > nginx!ngx_http_handler > nginx!std::map<K, V>::find \"q\""
drop_stream() {
	pg_q "DELETE FROM event_chunks WHERE stream_ref = (SELECT id FROM streams WHERE stream_id = :'id');
		DELETE FROM streams WHERE stream_id = :'id'" -v id="$1" >/dev/null
}
# a stream of known frames and stacks only, stored by a server that warmed its cache: no lookup asks
# the database, and the events name the frames sent (the ids read back are the right ones)
warm_round() { # warm_round WHAT
	local id nf ns
	nf=$(pg_q "SELECT count(*) FROM frames") ns=$(pg_q "SELECT count(*) FROM stacks")
	t_eq "$1: the log says what was read" "$(warmed)" "msg=\"id cache warmed\" frames=$nf stacks=$ns"
	http GET "$INGEST_URL/metrics"
	t_eq "$1: the cache holds them" "$(metric sm_ingest_idcache_entries 'kind="frame"') $(metric sm_ingest_idcache_entries 'kind="stack"')" "$nf $ns"
	id=$(newid)
	stream "$id" >"$T_TMP/w.json"
	post "$T_TMP/w.json"
	t_eq "$1: a stream of known frames is stored" "$HTTP_STATUS" 200
	t_eq "$1: its frames and stacks found in the cache, none asked of the database" "$(lookups)" "5 0 2 0"
	t_eq "$1: its events name the frames sent" "$(events_of "$id")" "$WARM_EVENTS"
	drop_stream "$id"
}
# more frames and stacks than the template's, so that an id read back wrong names another frame
start_ingest --workers 1 || t_bail "sm-ingest starts"
stream "$(newid)" 's/"nginx!main"/"nginx!main2"/; s/"nginx!ngx_http_handler"/"nginx!ngx_http_handler2"/' >"$T_TMP/w0.json"
post "$T_TMP/w0.json"
t_eq "warmed cache: a stream of other frames first" "$HTTP_STATUS" 200
stop_ingest
start_ingest --workers 1 || t_bail "sm-ingest starts to warm its cache"
warm_round "warmed cache"
stop_ingest
# a collection of frames and stacks since (the epoch moved): the ids read are of the new epoch, kept
epoch=$(pg_q "SELECT value FROM settings WHERE key = 'intern_epoch'")
pg_q "UPDATE settings SET value = (value::bigint + 7)::text WHERE key = 'intern_epoch'" >/dev/null
start_ingest --workers 1 || t_bail "sm-ingest starts at a new epoch"
warm_round "warmed cache, a new epoch"
# a collection after the warm-up, which a batch waits for (its ids were mapped before it): the batch
# reads the epoch after the wait and maps again, so none of the warmed ids is used
pg_q "BEGIN; SELECT pg_advisory_xact_lock(hashtext('stackmine.intern'));
	UPDATE settings SET value = (value::bigint + 1)::text WHERE key = 'intern_epoch';
	SELECT pg_sleep(2); COMMIT;" >/dev/null &
lockpid=$!
sleep 0.5
id=$(newid)
stream "$id" >"$T_TMP/w.json"
post "$T_TMP/w.json"
wait "$lockpid"
t_eq "a collection while a batch waits: stored" "$HTTP_STATUS" 200
t_eq "a collection while a batch waits: mapped again after it (found, then asked of the database)" \
	"$(lookups)" "10 5 4 2"
t_eq "a collection while a batch waits: its events name the frames sent" "$(events_of "$id")" "$WARM_EVENTS"
t_match "a collection while a batch waits: the log says so" "$(cat "$INGEST_LOG")" 'msg="interned ids of a new epoch"'
drop_stream "$id"
stop_ingest
pg_q "UPDATE settings SET value = :'e' WHERE key = 'intern_epoch'" -v e="$epoch" >/dev/null

# ---- the id cache's size (--id-cache-frames, --id-cache-stacks): a fleet with more live stacks than
# it holds is stored all the same, the cache never holding more ----
t_eq "--id-cache-stacks below its least: a usage error" "$("$SM_BIN_DIR/sm-ingest" --id-cache-stacks 1023 2>&1; echo "rc=$?")" \
	"sm-ingest: --id-cache-frames and --id-cache-stacks: must be from 1024 to 4194304
rc=2"
ns=$(pg_q "SELECT count(*) FROM stacks")
t_eq "a small id cache: the database holds more stacks than half of it" "$((ns > 512))" 1
start_ingest --workers 1 --id-cache-frames 1024 --id-cache-stacks 1024 || t_bail "sm-ingest starts with a small id cache"
nf=$(pg_q "SELECT count(*) FROM frames")
t_eq "a small id cache: warmed with half of each map at most" "$(warmed)" \
	"msg=\"id cache warmed\" frames=$((nf < 512 ? nf : 512)) stacks=512"
IDC=$(newid)
python3 - "$IDC" "$T_TMP/idc.json" "$T_TMP/idc.want" <<'PY3'
import json, sys
names = ['idc!f%d' % i for i in range(60)]
stacks = [[k % 50, 50 + (k // 50) % 10, (k // 500) % 60] for k in range(1500)]
ev = [{'kind': 'wait', 'tid': 7, 'ts_ns': 1000 + k, 'dur_ns': 5, 'stack': k, 'readier_tid': 8} for k in range(1500)]
s = {'v': 1, 'stream_id': sys.argv[1], 'host': 'idc', 'app': 'idc', 'version': '1', 'build_id': 'b',
     'symptom': {'kind': 'unit_violation', 'tid': 7, 'start_ns': 1000, 'end_ns': 3000},
     'frames': names, 'stacks': stacks, 'events': ev}
open(sys.argv[2], 'w').write(json.dumps(s) + '\n')
open(sys.argv[3], 'w').write(''.join('%d|%s\n' % (k, ' > '.join(names[f] for f in st)) for k, st in enumerate(stacks)))
PY3
post "$T_TMP/idc.json"
t_eq "a small id cache: a stream of 1,500 new stacks stored" "$HTTP_STATUS $HTTP_BODY" '200 {"accepted":1,"duplicates":0,"rejected":[]}'
t_eq "and each event names the frames sent" "$(events_of "$IDC")" "$(cat "$T_TMP/idc.want")"
http GET "$INGEST_URL/metrics"
miss0=$(metric sm_ingest_idcache_lookups_total 'kind="stack",result="miss"')
post "$T_TMP/idc.json"
t_eq "sent again: a duplicate" "$HTTP_STATUS $HTTP_BODY" '200 {"accepted":0,"duplicates":1,"rejected":[]}'
http GET "$INGEST_URL/metrics"
t_eq "and its 1,500 stacks all found in the cache's two generations (none asked of the database)" \
	"$(( $(metric sm_ingest_idcache_lookups_total 'kind="stack",result="miss"') - miss0 ))" 0
t_eq "and the cache never held more than it may (two generations of 1,024)" \
	"$(( $(metric sm_ingest_idcache_entries 'kind="frame"') <= 2048 )) $(( $(metric sm_ingest_idcache_entries 'kind="stack"') <= 2048 ))" "1 1"
# the stacks' map in two generations of 1,024, the young one warmed with 512: the stream's 1,500
# new stacks turn it over once, dropping nothing (the old one empty); its resend finds the last 988
# in the young one and the first 512 in the old, which move to the young one and turn it over
# again, dropping what the old one held
t_eq "and /metrics counts its stacks' map dropping entries (once, at the resend), not its frames'" \
	"$(metric sm_ingest_idcache_full_total 'kind="frame"') $(metric sm_ingest_idcache_full_total 'kind="stack"')" "0 1"
drop_stream "$IDC"
stop_ingest

t_done
