#!/usr/bin/env bash
# formats: every capture in ../shared/data/pprof, otel and bcc imports with sm-agent
# (its format told from its bytes, and named), and the streams, events, wait events
# and total cost agree with an independent decoding of the same file
# (formats_oracle.py: Python's protobuf library on code protoc generates from
# common/proto/profile.proto, plain readings of the legacy, OTLP and bcc layouts);
# memory profiles are refused with the reason; a file of one format named as
# another is refused; the same file imported twice gives the same stream ids.
# POST /api/v1/import on sm-ingest stores the very streams sm-agent makes of each
# file (compressed or not, format told or named by query or Content-Type); a
# second push is a duplicate; bad queries, bad files, tokens of another host and
# missing tokens get their status and exact error and store nothing.
. "$(dirname "$0")/../lib.sh"

AGENT=$SM_BIN_DIR/sm-agent
ORACLE=$SM_REPO/tests/integration/formats_oracle.py
PY=/usr/bin/python3

[ -x "$AGENT" ] || t_bail "sm-agent" "$AGENT is missing"
command -v protoc >/dev/null || t_bail "protoc" "protoc is missing (Debian: protobuf-compiler)"
"$PY" -c 'import google.protobuf' 2>/dev/null || t_bail "python3-protobuf" "Python's protobuf is missing (Debian: python3-protobuf)"
for d in pprof otel bcc; do
	[ -d "$SM_DATA/$d" ] || t_bail "test data" "$SM_DATA/$d is missing"
done

mkdir -p "$T_TMP/py"
protoc -I"$SM_REPO/common/proto" --python_out="$T_TMP/py" "$SM_REPO/common/proto/profile.proto" ||
	t_bail "protoc" "cannot generate Python code for profile.proto"

# summary NDJSON: the same fields the oracle prints, from what sm-agent wrote
summary() {
	"$PY" - "$1" <<'EOF'
import json, sys
n = ev = w = tot = 0
for l in open(sys.argv[1]):
    s = json.loads(l)
    n += 1
    for e in s["events"]:
        ev += 1
        tot += e["dur_ns"]
        w += e["kind"] == "wait"
print(json.dumps({"streams": n, "events": ev, "wait": w, "total_ns": tot}, sort_keys=True))
EOF
}

mapfile -t files < <(find "$SM_DATA/pprof" "$SM_DATA/otel" "$SM_DATA/bcc" -type f | sort)
[ ${#files[@]} -ge 20 ] || t_bail "test data" "only ${#files[@]} files in pprof, otel and bcc"
"$PY" "$ORACLE" "$T_TMP/py" "${files[@]}" >"$T_TMP/oracle.ndjson" || t_bail "oracle" "formats_oracle.py failed"

imported=0
refused=0
while IFS= read -r line; do
	f=$("$PY" -c 'import json,sys; print(json.loads(sys.argv[1])["file"])' "$line")
	fmt=$("$PY" -c 'import json,sys; print(json.loads(sys.argv[1])["format"])' "$line")
	want=$("$PY" -c 'import json,sys; d=json.loads(sys.argv[1]); [d.pop(k) for k in ("file","format")]; print(json.dumps(d, sort_keys=True))' "$line")
	name=${f#"$SM_DATA"/}
	out=$T_TMP/$(basename "$f").ndjson
	err=$("$AGENT" import --host h -v -o "$out" "$f" 2>&1)
	rc=$?
	if grep -q '"refused"' <<<"$want"; then
		t_eq "$name: refused, the reason named" "$rc|$(sed "s|$f|F|" <<<"$err")" \
			"1|sm-agent: F: a memory profile (alloc_objects/count, alloc_space/bytes, inuse_objects/count, inuse_space/bytes): stackmine's costs are time, so it cannot be imported"
		refused=$((refused + 1))
		continue
	fi
	if [ "$rc" != 0 ]; then
		t_fail "$name: imports" "exit $rc: $err"
		continue
	fi
	t_match "$name: told as $fmt" "$err" "\\($fmt\\): stream"
	t_eq "$name: streams, events, waits and cost as decoded independently" "$(summary "$out")" "$want"
	# named instead of told: the very same streams
	"$AGENT" import --host h --format "$fmt" -o "$out.named" "$f" 2>/dev/null
	t_eq "$name: --format $fmt gives the same streams" "$(cksum <"$out.named")" "$(cksum <"$out")"
	imported=$((imported + 1))
done <"$T_TMP/oracle.ndjson"
t_eq "files imported and refused" "$imported $refused" "16 10"

# a pprof file named as bcc output, and bcc output named as pprof
"$AGENT" import --host h --format bcc-profile -o /dev/null "$SM_DATA/pprof/pprof-java.contention" 2>"$T_TMP/err"
t_eq "pprof named as bcc: refused" "$?|$(cat "$T_TMP/err")" \
	"1|sm-agent: $SM_DATA/pprof/pprof-java.contention:43: no profile output found (stack blocks ending in a count, or folded lines)"
"$AGENT" import --host h --format pprof -o /dev/null "$SM_DATA/bcc/bcc-profile_example.txt" 2>"$T_TMP/err"
t_eq "bcc named as pprof: refused" "$?|$(cat "$T_TMP/err")" \
	"1|sm-agent: $SM_DATA/bcc/bcc-profile_example.txt: text, but not a legacy pprof profile (\"--- contention\"): not a pprof profile"
"$AGENT" import --host h --format otlp -o /dev/null "$SM_DATA/pprof/parca-profile1.pb.gz" 2>"$T_TMP/err"
t_match "pprof named as OTLP: refused" "$?|$(cat "$T_TMP/err")" "^1\\|sm-agent: .*parca-profile1.pb.gz: not JSON: "
printf 'hello\nworld\n' >"$T_TMP/prose.txt"
"$AGENT" import --host h -o /dev/null "$T_TMP/prose.txt" 2>"$T_TMP/err"
t_eq "a file of no format: refused with the reason" "$?|$(cat "$T_TMP/err")" \
	"1|sm-agent: $T_TMP/prose.txt: cannot tell which format this is: name it with --format (bcc's offcputime and profile print alike, and their folded -f output looks like any folded file)"
"$AGENT" import --host h --sample-type alloc_space -o /dev/null "$SM_DATA/pprof/parca-profile1.pb.gz" 2>"$T_TMP/err"
t_eq "--sample-type not in the profile: refused, the types listed" "$?|$(sed "s|$SM_DATA/||" "$T_TMP/err")" \
	"1|sm-agent: pprof/parca-profile1.pb.gz: sample type \"alloc_space\" is not in the profile (it has samples/count, cpu/nanoseconds)"

# ids come from the content: the same capture twice is the same stream, another host another
"$AGENT" import --host h -o "$T_TMP/a1" "$SM_DATA/pprof/parca-fgprof.pb.gz" 2>/dev/null
"$AGENT" import --host h -o "$T_TMP/a2" "$SM_DATA/pprof/parca-fgprof.pb.gz" 2>/dev/null
"$AGENT" import --host other -o "$T_TMP/a3" "$SM_DATA/pprof/parca-fgprof.pb.gz" 2>/dev/null
ids() { grep -oE '"stream_id": ?"[0-9a-f-]{36}"' "$1"; }
t_eq "the same import twice: the same stream id" "$(ids "$T_TMP/a1")" "$(ids "$T_TMP/a2")"
t_ok_if() { if [ "$2" != "$3" ]; then t_ok "$1"; else t_fail "$1" "both $2"; fi; }
t_ok_if "another host: another stream id" "$(ids "$T_TMP/a1")" "$(ids "$T_TMP/a3")"

# ---- POST /api/v1/import ----
sm_admin migrate >/dev/null || t_bail "migrate"
TOKEN=$(mk_token ingest 2>/dev/null)
HOSTTOK=$(sm_admin token create --role ingest --host web-3 2>/dev/null)
start_ingest --workers 2 --max-body 4M --max-decoded 32M || t_bail "sm-ingest starts"
push() { # push FILE QUERY [CURL ARGS...]
	local f=$1 q=$2
	shift 2
	http POST "$INGEST_URL/api/v1/import?$q" -H "Authorization: Bearer $TOKEN" --data-binary "@$f" "$@"
}
# stored HOST: streams, events, waits and cost of what the server holds for HOST
stored() {
	pg_q "SELECT json_build_object('events', count(e.*), 'streams', count(DISTINCT s.id),
		'total_ns', coalesce(sum(e.dur_ns), 0), 'wait', count(*) FILTER (WHERE e.kind = 'w'))
		FROM streams s JOIN events e ON e.stream_ref = s.id WHERE s.host = '$1'" |
		"$PY" -c 'import json,sys; print(json.dumps(json.load(sys.stdin), sort_keys=True))'
}
i=0
while IFS= read -r line; do
	grep -q '"refused"' <<<"$line" && continue
	f=$("$PY" -c 'import json,sys; print(json.loads(sys.argv[1])["file"])' "$line")
	want=$("$PY" -c 'import json,sys; d=json.loads(sys.argv[1]); [d.pop(k) for k in ("file","format")]; print(json.dumps(d, sort_keys=True))' "$line")
	name=${f#"$SM_DATA"/}
	i=$((i + 1))
	push "$f" "host=imp$i&app=pushed"
	t_eq "POST $name: 200" "$HTTP_STATUS" 200
	t_eq "POST $name: stored as decoded independently" "$(stored "imp$i")" "$want"
	# the same streams as sm-agent makes, ids included
	"$AGENT" import --host "imp$i" --app pushed -o "$T_TMP/agent.ndjson" "$f" 2>/dev/null
	t_eq "POST $name: the stream ids sm-agent gives" \
		"$(pg_q "SELECT string_agg(stream_id::text, ' ' ORDER BY stream_id) FROM streams WHERE host = 'imp$i'")" \
		"$(grep -oE '"stream_id": ?"[0-9a-f-]{36}"' "$T_TMP/agent.ndjson" | grep -oE '[0-9a-f-]{36}' | sort | tr '\n' ' ' | sed 's/ $//')"
done <"$T_TMP/oracle.ndjson"

f=$SM_DATA/pprof/parca-profile-with-labels.pb.gz
push "$f" "host=imp1&app=again"
t_eq "a push with other options: new streams" "$HTTP_STATUS $(grep -o '"accepted":[0-9]*' <<<"$HTTP_BODY")" '200 "accepted":1'
LAST_BODY=$HTTP_BODY
push "$f" "host=imp1&app=again"
t_eq "the same push again: a duplicate, nothing stored twice" "$HTTP_STATUS $HTTP_BODY" \
	"200 $(sed 's/"accepted":1,"duplicates":0/"accepted":0,"duplicates":1/; s/"status":"accepted"/"status":"duplicate"/' <<<"$LAST_BODY")"
LAST_BODY=$HTTP_BODY
zcat "$f" >"$T_TMP/plain.pb"
push "$T_TMP/plain.pb" "host=imp1&app=again" -H "Content-Type: application/x-protobuf"
t_eq "the same profile uncompressed, as application/x-protobuf: the same stream" "$HTTP_BODY" "$LAST_BODY"
zstd -q -c "$T_TMP/plain.pb" >"$T_TMP/plain.pb.zst"
push "$T_TMP/plain.pb.zst" "host=imp1&app=again" -H "Content-Encoding: zstd"
t_eq "... with Content-Encoding: zstd: the same stream" "$HTTP_BODY" "$LAST_BODY"
push "$SM_DATA/bcc/bcc-offcputime_example.txt" "host=imp1&app=bcc&format=bcc-offcpu&label=team:db&role=baseline"
t_eq "?format=, labels and role: stored" "$HTTP_STATUS|$(pg_q "SELECT labels::text, role FROM streams WHERE app = 'bcc'")" \
	'200|{"team": "db"}|baseline'

# perf's comm per sample names the stream's threads (the wire's "threads"), stored as sent
printf 'nginx: worker 4211/4211 [001] 1.000000: 250000 cpu-clock:\n\t1 f (/bin/a)\n\nhelper 17/4300 [002] 1.001000: 250000 cpu-clock:\n\t1 g (/bin/a)\n' \
	>"$T_TMP/names.perf"
push "$T_TMP/names.perf" "host=imp1&app=names&format=perf"
t_eq "perf's comms name the stored stream's threads" \
	"$HTTP_STATUS|$(pg_q "SELECT thread_names::text FROM streams WHERE app = 'names'")" \
	'200|{"4211": "nginx: worker", "4300": "helper"}'
before=$(pg_q "SELECT count(*) FROM streams")
push "$SM_DATA/pprof/parca-many/1644509272337470000.pb.gz" "host=x"
t_eq "a memory profile: 400 and why" "$HTTP_STATUS $HTTP_BODY" \
	'400 {"error":"body: a memory profile (alloc_objects/count, alloc_space/bytes, inuse_objects/count, inuse_space/bytes): stackmine'"'"'s costs are time, so it cannot be imported"}'
push "$f" "host=x&colour=red"
t_eq "an unknown parameter: 400 and which" "$HTTP_STATUS $HTTP_BODY" \
	'400 {"error":"query: unknown parameter '"'"'colour'"'"' (format, host, app, version, build_id, label, role, sample_type, event, symptom_comm, symptom_tid, sample_period_ns)"}'
push "$f" "app=x"
t_eq "no host: 400" "$HTTP_STATUS $HTTP_BODY" '400 {"error":"host: required (?host=NAME), unless the token is bound to a host"}'
push "$f" "host=x&format=jfr"
t_match "an unknown format: 400 and the formats" "$HTTP_STATUS $HTTP_BODY" "^400 \\{\"error\":\"format: 'jfr' is not one of perf, folded, pprof, otlp, "
push "$SM_DATA/bcc/bcc-profile_example.txt" "host=x&format=pprof"
t_eq "bcc named pprof: 400" "$HTTP_STATUS $HTTP_BODY" '400 {"error":"body: text, but not a legacy pprof profile (\"--- contention\"): not a pprof profile"}'
head -c 3000 "$f" >"$T_TMP/cut.gz"
push "$T_TMP/cut.gz" "host=x"
t_match "a gzip body cut short: 400, a read error" "$HTTP_STATUS $HTTP_BODY" '^400 \{"error":"body:1: read error: unexpected end of file'
push "$f" "host=x&label=a:1&label=a:2"
t_eq "a label given twice: 400" "$HTTP_STATUS $HTTP_BODY" "400 {\"error\":\"label: 'a' given twice\"}"
push "$f" "host=x&label=a:"
t_eq "a label without a value: 400" "$HTTP_STATUS $HTTP_BODY" "400 {\"error\":\"label: 'a:' must be KEY:VALUE, both not empty\"}"
head -c 40000000 /dev/zero | zstd -q -c >"$T_TMP/zeros.zst"
push "$T_TMP/zeros.zst" "host=x" -H "Content-Encoding: zstd"
t_eq "a zstd body of more than 32 MiB decompressed: 413" "$HTTP_STATUS $HTTP_BODY" \
	'413 {"error":"body: decompresses to more than the limit of 33554432 bytes"}'
yes "$(printf 'f%.0s' $(seq 300));b 1" | head -c 40000000 | gzip -c >"$T_TMP/zeros.gz"
push "$T_TMP/zeros.gz" "host=x&format=folded&sample_type=once%20decompressed"
t_match "a gzip body of more than 32 MiB decompressed: 413 (told by its class, not its words)" "$HTTP_STATUS $HTTP_BODY" \
	'^413 \{"error":"body:[0-9]+: more than 33554432 bytes once decompressed"\}$'
push "$SM_DATA/bcc/bcc-offcputime_example.txt" "host=imp1&app=bcc&format=bcc-offcpu&label=team:db&role=violation"
t_eq "the same capture as a violation: another stream than the baseline" "$HTTP_STATUS $(grep -o '"accepted":1' <<<"$HTTP_BODY")" \
	'200 "accepted":1'
before=$((before + 1))
http POST "$INGEST_URL/api/v1/import?host=web-4" -H "Authorization: Bearer $HOSTTOK" --data-binary "@$f"
t_eq "a token of another host: 403" "$HTTP_STATUS $HTTP_BODY" "403 {\"error\":\"host: this token sends streams for host 'web-3' only\"}"
http POST "$INGEST_URL/api/v1/import" -H "Authorization: Bearer $HOSTTOK" --data-binary "@$f"
t_eq "a host-bound token without ?host=: its host" "$HTTP_STATUS $(pg_q "SELECT count(*) FROM streams WHERE host = 'web-3'")" "200 1"
before=$((before + 1))
http POST "$INGEST_URL/api/v1/import?host=x" --data-binary "@$f"
t_eq "no token: 401" "$HTTP_STATUS $HTTP_BODY" '401 {"error":"authorization: missing bearer token"}'
http GET "$INGEST_URL/api/v1/import"
t_eq "GET: 405" "$HTTP_STATUS" 405
t_eq "refused pushes stored nothing" "$(pg_q "SELECT count(*) FROM streams")" "$before"

t_done
