#!/usr/bin/env bash
# agent: sm-agent against the real sm-ingest and PostgreSQL, with faultproxy
# (tests/tools/faultproxy.c) in front of the server where faults are wanted.
# Shipped streams are stored exactly once, whole, as sent; resends are
# duplicates; invalid streams are reported with file:line and never sent;
# retries honour Retry-After and survive 503, 429, dropped connections,
# timeouts and 413 splits; an unreachable server or a wrong token leaves the
# streams in the spool, which drain delivers (and moves what the server refuses
# to rejected/ with its reason); imported perf and folded captures are stored
# with their metadata and exactly the events `import -o` writes; usage and
# exit statuses are as docs/agent.md says.
. "$(dirname "$0")/../lib.sh"

DATA=$SM_REPO/tests/integration/data
AGENT=$SM_BIN_DIR/sm-agent
FAULTPROXY=$(dirname "$SM_BIN_DIR")/tests/faultproxy
PERF=$SM_DATA/perf/dspeyer-sched-61cb776.perf.txt
FOLDED=$SM_DATA/folded/flamegraph-iperf-collapsed-tid.txt
SUMMARY_RE='^sm-agent: (ship|drain|import): '

[ -x "$AGENT" ] || t_bail "sm-agent" "$AGENT is missing"
[ -x "$FAULTPROXY" ] || t_bail "faultproxy" "$FAULTPROXY is missing (make binaries builds it)"
[ -r "$PERF" ] && [ -r "$FOLDED" ] || t_bail "test data" "$PERF or $FOLDED is missing"
# nothing from the caller's environment, and never a spool outside T_TMP
unset SM_URL SM_TOKEN
export SM_SPOOL=$T_TMP/default-spool

newid() { cat /proc/sys/kernel/random/uuid; }
# stream ID [SED ARGS...]: the template stream on one line, with its id set.
stream() {
	local id=$1
	shift
	sed -e "s/@ID@/$id/" "$@" "$DATA/stream.json" | tr -d '\n'
	echo
}
# ndjson FILE N: N template streams with new ids, one a line; their ids in FILE.ids.
ndjson() {
	local i id
	: >"$1"
	: >"$1.ids"
	for i in $(seq "$2"); do
		id=$(newid)
		stream "$id" >>"$1"
		echo "$id" >>"$1.ids"
	done
}
# The two-event variant of the template (its third event removed).
TWO_EVENTS=(-e '/"tid": 4212/d' -e 's/"stack": 1},/"stack": 1}/')

# agent ARGS...: runs sm-agent; AG_RC, AG_OUT (stdout), AG_ERR (stderr), AG_MS (wall time).
agent() {
	local t0
	t0=$(date +%s%N)
	"$AGENT" "$@" >"$T_TMP/ag.out" 2>"$T_TMP/ag.err" </dev/null
	AG_RC=$?
	AG_MS=$((($(date +%s%N) - t0) / 1000000))
	AG_OUT=$(cat "$T_TMP/ag.out")
	AG_ERR=$(cat "$T_TMP/ag.err")
}
# The summary line of the last run (the last stderr line that is one).
summary() { grep -E "$SUMMARY_RE" <<<"$AG_ERR" | tail -n 1; }

ids_of() { tr '\n' ' ' <"$1" | sed 's/ $//'; }
# stored IDFILE: "S|W": how many of its streams are stored, and how many of those whole
# (n_events as many rows in events as the template has for them: 3).
stored() {
	pg_q "SELECT count(*), count(*) FILTER (WHERE n_events = 3 AND
		(SELECT count(*) FROM events e WHERE e.stream_ref = s.id) = 3)
		FROM streams s WHERE stream_id::text = ANY(string_to_array(:'ids', ' '))" -v ids="$(ids_of "$1")"
}
nstreams() { pg_q "SELECT count(*) FROM streams"; }
nevents() { pg_q "SELECT count(*) FROM events"; }
# The spool's stream files, sorted; and the ids in IDFILE as such file names.
spool_files() { (cd "$1" 2>/dev/null && ls -1 -- *.json 2>/dev/null | sort | tr '\n' ' ' | sed 's/ $//'); }
as_files() { sed 's/$/.json/' "$1" | sort | tr '\n' ' ' | sed 's/ $//'; }

# ---- faultproxy ----
PROXY_PID=
PROXY_URL=
PROXY_LOG=
t_cleanup '[ -z "$PROXY_PID" ] || { kill -TERM "$PROXY_PID"; wait "$PROXY_PID"; } 2>/dev/null'
# proxy_start SCRIPT [FAULTPROXY ARGS...]: a faultproxy in front of sm-ingest (unless the
# arguments say otherwise); PROXY_URL, PROXY_PID, PROXY_LOG.
proxy_start() {
	local pf=$T_TMP/proxy.port i port script=$1
	shift
	[ -z "$PROXY_PID" ] || proxy_stop
	PROXY_LOG=$T_TMP/proxy.$RANDOM.log
	rm -f "$pf"
	"$FAULTPROXY" --listen 127.0.0.1:0 --upstream "$INGEST_URL" --script "$script" --log "$PROXY_LOG" "$@" \
		>"$pf" 2>>"$PROXY_LOG" </dev/null &
	PROXY_PID=$!
	for i in $(seq 1 100); do
		port=$(head -n 1 "$pf" 2>/dev/null)
		if [ "$(wc -l <"$pf")" -ge 1 ] && [[ $port =~ ^[0-9]+$ ]]; then
			PROXY_URL=http://127.0.0.1:$port
			return 0
		fi
		t_alive "$PROXY_PID" || break
		sleep 0.1
	done
	echo "faultproxy did not start; its log:"
	sed 's/^/  | /' "$PROXY_LOG"
	return 1
}
proxy_stop() {
	local rc
	[ -n "$PROXY_PID" ] || return 0
	kill -TERM "$PROXY_PID"
	wait "$PROXY_PID"
	rc=$?
	PROXY_PID=
	[ "$rc" -eq 0 ] || t_fail "faultproxy exits 0 on SIGTERM" "exit status $rc"
}
# The actions the proxy took on the POSTs of streams, in the order they came
# ("503 drop pass"; a line is logged when its answer is done, so sorted by n=).
proxy_posts() {
	grep ' path=/api/v1/streams ' "$PROXY_LOG" | sed -n 's/^faultproxy: n=\([0-9]*\) .* action=\([^ ]*\) .*/\1 \2/p' |
		sort -n | cut -d' ' -f2 | tr '\n' ' ' | sed 's/ $//'
}

# ---- usage (no server needed) ----
agent --help
t_eq "--help: exit status" "$AG_RC" 0
t_match "--help: usage on stdout" "$AG_OUT" $'^usage: sm-agent ship \\[options\\] FILE\\.\\.\\.\n       sm-agent drain \\[options\\]\n       sm-agent import \\[--format FORMAT\\]'
t_eq "--help: nothing on stderr" "$AG_ERR" ""
for cmd in ship drain import; do
	agent "$cmd" --help
	t_eq "$cmd --help: exit status" "$AG_RC" 0
	t_match "$cmd --help: usage with the options" "$AG_OUT" '^usage: sm-agent .*--spool DIR .*--retries N .*--format FORMAT .*--label K=V .*Exit status:'
	t_eq "$cmd --help: nothing on stderr" "$AG_ERR" ""
done
agent ship --no-such-option x.json
t_eq "unknown option: exit status 2" "$AG_RC" 2
t_match "unknown option: named, with a pointer to --help" "$AG_ERR" \
	"unrecognized option '--no-such-option'.*"$'\n'"sm-agent: bad option"$'\n'"\\(sm-agent --help lists the options\\)$"
agent --no-such-option
t_eq "unknown option before a command: exit status 2" "$AG_RC" 2
agent frobnicate x.json
t_eq "unknown command: exit status and message" "$AG_RC $AG_ERR" \
	"2 sm-agent: unknown command 'frobnicate'; it is ship, drain, import or collect"$'\n'"(sm-agent --help lists the options)"
agent
t_eq "no command: exit status 2" "$AG_RC" 2
t_match "no command: usage on stderr" "$AG_ERR" '^usage: sm-agent ship'
agent ship --url http://127.0.0.1:1
t_eq "ship without FILE: exit status and message" "$AG_RC $(head -n 1 <<<"$AG_ERR")" "2 sm-agent: ship: no FILE given"
agent drain extra.json
t_eq "drain with a FILE: exit status and message" "$AG_RC $(head -n 1 <<<"$AG_ERR")" "2 sm-agent: drain takes no files (got 'extra.json')"
agent ship --retries 101 x.json
t_eq "bad --retries: exit status and message" "$AG_RC $AG_ERR" "2 sm-agent: --retries '101': must be a whole number from 0 to 100"
agent ship --format perf x.json
t_eq "import option on ship: exit status" "$AG_RC $(head -n 1 <<<"$AG_ERR")" "2 sm-agent: import options do not apply to 'ship'"
agent import --host h -o - "$PERF"
a=$AG_OUT
agent import --format perf --host h -o - "$PERF"
t_eq "import without --format: told from the file, the very stream --format perf gives" \
	"$(cksum <<<"$a")" "$(cksum <<<"$AG_OUT")"
agent import --format pprof2 x.txt
t_eq "unknown --format: exit status and message" "$AG_RC $AG_ERR" "2 sm-agent: --format 'pprof2': must be perf, folded, pprof, otlp, bcc-offcpu, bcc-offwaketime, bcc-wakeuptime, bcc-profile or auto"
agent import --format perf --label novalue x.txt
t_eq "bad --label: exit status and message" "$AG_RC $AG_ERR" "2 sm-agent: --label 'novalue': must be KEY=VALUE"
agent ship --token-file "$T_TMP/no-such-token" x.json
t_match "unreadable token file: exit status 2 and the file named" "$AG_RC $AG_ERR" "^2 sm-agent: --token-file $T_TMP/no-such-token: No such file or directory$"

# ---- the server ----
sm_admin migrate >/dev/null || t_bail "migrate"
TOKEN=$(mk_token ingest 2>/dev/null)
[ -n "$TOKEN" ] || t_bail "token"
printf '  %s  \n# the token is the first line\n' "$TOKEN" >"$T_TMP/token"
start_ingest --workers 2 --auth-cache-ms 0 || t_bail "sm-ingest starts"
REAL=(--url "$INGEST_URL" --token-file "$T_TMP/token")

# ---- 1. ship an NDJSON file, then again ----
ndjson "$T_TMP/six.ndjson" 6
agent ship "${REAL[@]}" --spool "$T_TMP/spool1" --batch 4 "$T_TMP/six.ndjson"
t_eq "ship NDJSON: exit status" "$AG_RC" 0
t_eq "ship NDJSON: stderr is the summary" "$AG_ERR" \
	"sm-agent: ship: 6 accepted, 0 duplicates, 0 rejected, 0 invalid, 0 spooled, 0 lost (2 requests)"
t_eq "ship NDJSON: every stream stored whole" "$(stored "$T_TMP/six.ndjson.ids")" "6|6"
t_eq "ship NDJSON: nothing else stored" "$(nstreams)|$(nevents)" "6|18"
t_eq "ship NDJSON: stored as sent" "$(pg_q "SELECT DISTINCT host, app, version, build_id, labels::text,
	symptom_kind, symptom_tid, symptom_start_ns, symptom_end_ns, symptom_unit_type, symptom_threshold_ns
	FROM streams")" \
	"web-17|nginx|1.22.1|3f9a0c|{\"os\": \"debian-12\", \"region\": \"eu-west\", \"conf.worker_processes\": \"4\"}|unit_violation|4211|81234000000|81684000000|u7|120000000"
t_eq "ship NDJSON: events as sent" "$(pg_q "SELECT DISTINCT ev FROM (SELECT string_agg(e.kind::text || ' ' || e.tid || ' ' ||
	e.ts_ns || ' ' || e.dur_ns || ' ' || coalesce(e.readier_tid::text, '-'), ', ' ORDER BY e.seq) AS ev
	FROM events e GROUP BY e.stream_ref) t")" \
	"w 4211 81300000000 240000000 0, r 4211 81550000000 10000000 -, w 4212 81560000000 5000000 4211"
t_eq "ship NDJSON: no spool made" "$([ -e "$T_TMP/spool1" ] && echo made || echo none)" none

agent ship "${REAL[@]}" --spool "$T_TMP/spool1" --batch 4 "$T_TMP/six.ndjson"
t_eq "ship again: exit status" "$AG_RC" 0
t_eq "ship again: all duplicates" "$AG_ERR" \
	"sm-agent: ship: 0 accepted, 6 duplicates, 0 rejected, 0 invalid, 0 spooled, 0 lost (2 requests)"
t_eq "ship again: nothing new stored" "$(nstreams)|$(nevents)" "6|18"

# standard input, with the server and token from the environment
ndjson "$T_TMP/stdin.ndjson" 2
SM_URL=$INGEST_URL SM_TOKEN=$TOKEN SM_SPOOL=$T_TMP/spool1 "$AGENT" ship - <"$T_TMP/stdin.ndjson" >"$T_TMP/ag.out" 2>"$T_TMP/ag.err"
t_eq "ship -: exit status and summary (SM_URL, SM_TOKEN)" "$? $(cat "$T_TMP/ag.err")" \
	"0 sm-agent: ship: 2 accepted, 0 duplicates, 0 rejected, 0 invalid, 0 spooled, 0 lost (1 requests)"
t_eq "ship -: stored" "$(stored "$T_TMP/stdin.ndjson.ids")" "2|2"

# CRLF lines, unknown fields (sent as read), a URL with a trailing slash
ndjson "$T_TMP/crlf.ndjson" 2
sed -i -e 's/"v": 1,/"v": 1, "x_unknown": {"a": [1, "}"]},/' -e 's/$/\r/' "$T_TMP/crlf.ndjson"
agent ship --url "$INGEST_URL/" --token-file "$T_TMP/token" --spool "$T_TMP/spool1" "$T_TMP/crlf.ndjson"
t_eq "CRLF, unknown fields, URL/: exit status and summary" "$AG_RC $AG_ERR" \
	"0 sm-agent: ship: 2 accepted, 0 duplicates, 0 rejected, 0 invalid, 0 spooled, 0 lost (1 requests)"
t_eq "CRLF, unknown fields, URL/: stored" "$(stored "$T_TMP/crlf.ndjson.ids")" "2|2"

# batches: at most --batch-bytes of text (987 bytes a stream here: 2 fit in 2k)
ndjson "$T_TMP/bytes.ndjson" 5
agent ship "${REAL[@]}" --spool "$T_TMP/spool1" --batch-bytes 2k "$T_TMP/bytes.ndjson"
t_eq "--batch-bytes 2k: 3 requests for 5 streams" "$AG_RC $AG_ERR" \
	"0 sm-agent: ship: 5 accepted, 0 duplicates, 0 rejected, 0 invalid, 0 spooled, 0 lost (3 requests)"
t_eq "--batch-bytes 2k: stored" "$(stored "$T_TMP/bytes.ndjson.ids")" "5|5"

# ---- 2. pretty-printed streams, invalid ones ----
P1=$(newid)
sed "s/@ID@/$P1/" "$DATA/stream.json" >"$T_TMP/pretty.json"
agent ship "${REAL[@]}" --spool "$T_TMP/spool2" "$T_TMP/pretty.json"
t_eq "pretty stream: exit status and summary" "$AG_RC $AG_ERR" \
	"0 sm-agent: ship: 1 accepted, 0 duplicates, 0 rejected, 0 invalid, 0 spooled, 0 lost (1 requests)"
t_eq "pretty stream: stored whole, as sent" "$(pg_q "SELECT host, labels->>'region', symptom_unit_type, n_events,
	(SELECT count(*) FROM events e WHERE e.stream_ref = s.id) FROM streams s WHERE stream_id = '$P1'")" "web-17|eu-west|u7|3|3"

# two pretty objects one after the other, the second invalid; then a third, valid
P2=$(newid) P3=$(newid) P4=$(newid)
{
	# blank lines first; brackets, a quote and a backslash inside strings
	printf '\n  \n'
	sed -e "s/@ID@/$P2/" -e 's/"nginx!ngx_http_handler"/"nginx!handler}{[\\"\\\\"/' "$DATA/stream.json"
	sed -e "s/@ID@/$P3/" -e 's/"host": "web-17",//' "$DATA/stream.json"
	sed -e "s/@ID@/$P4/" "$DATA/stream.json"
} >"$T_TMP/pretty3.json"
n=$(wc -l <"$DATA/stream.json")
agent ship "${REAL[@]}" --spool "$T_TMP/spool2" "$T_TMP/pretty3.json"
t_eq "pretty objects: exit status 1 (one invalid)" "$AG_RC" 1
t_eq "pretty objects: the invalid one reported at the line it starts on" "$AG_ERR" \
	"sm-agent: $T_TMP/pretty3.json:$((n + 3)): invalid stream $P3: host: required field missing
sm-agent: ship: 2 accepted, 0 duplicates, 0 rejected, 1 invalid, 0 spooled, 0 lost (1 requests)"
t_eq "pretty objects: the valid ones stored, the invalid not" \
	"$(pg_q "SELECT string_agg(c, '' ORDER BY c) FROM (SELECT CASE stream_id WHEN '$P2' THEN '2' WHEN '$P3' THEN '3' WHEN '$P4' THEN '4' END AS c
		 FROM streams WHERE stream_id IN ('$P2', '$P3', '$P4')) s")" "24"
t_eq "pretty objects: brackets and escapes inside strings kept" "$(pg_q "SELECT f.name FROM frames f
	WHERE f.name LIKE 'nginx!handler%'")" 'nginx!handler}{["\'

# NDJSON with invalid lines
IA=$(newid) IB=$(newid) IC=$(newid)
{
	stream "$IA"
	stream "$IB" -e 's/"stack": 0, "readier_tid": 0/"stack": 9, "readier_tid": 0/'
	echo '{"v": 1, "stream_id": oops}'
	echo
	stream "$IC"
} >"$T_TMP/invalid.ndjson"
before="$(nstreams)|$(nevents)"
agent ship "${REAL[@]}" --spool "$T_TMP/spool2" "$T_TMP/invalid.ndjson"
t_eq "invalid lines: exit status 1" "$AG_RC" 1
t_eq "invalid lines: each reported with file:line and the reason, then the summary" "$AG_ERR" \
	"sm-agent: $T_TMP/invalid.ndjson:2: invalid stream $IB: events[0].stack: index 9 out of range (3 stacks)
sm-agent: $T_TMP/invalid.ndjson:3: invalid stream: not JSON: stream_id: unexpected 'o' where a value belongs at byte 22
sm-agent: ship: 2 accepted, 0 duplicates, 0 rejected, 2 invalid, 0 spooled, 0 lost (1 requests)"
t_eq "invalid lines: the valid streams stored, the invalid not" \
	"$(pg_q "SELECT string_agg(c, '' ORDER BY c) FROM (SELECT CASE stream_id WHEN '$IA' THEN 'A' WHEN '$IB' THEN 'B' WHEN '$IC' THEN 'C' END AS c
		 FROM streams WHERE stream_id IN ('$IA', '$IB', '$IC')) s")" "AC"
t_eq "invalid lines: 2 streams, 6 events more" "$(nstreams)|$(nevents)" \
	"$((${before%|*} + 2))|$((${before#*|} + 6))"
t_eq "invalid lines: nothing spooled" "$([ -e "$T_TMP/spool2" ] && echo made || echo none)" none
agent ship "${REAL[@]}" --spool "$T_TMP/spool2" "$T_TMP/no-such-file.ndjson" "$T_TMP/pretty.json"
t_eq "unreadable file: exit status 1, the others still shipped" "$AG_RC $AG_ERR" \
	"1 sm-agent: $T_TMP/no-such-file.ndjson: No such file or directory
sm-agent: ship: 0 accepted, 1 duplicates, 0 rejected, 0 invalid, 0 spooled, 0 lost (1 requests)"

# ---- 3. faults between the agent and the server ----
ndjson "$T_TMP/faults.ndjson" 5
proxy_start '503:1,drop*2,429:1,pass' || t_bail "faultproxy starts"
agent ship --url "$PROXY_URL" --token-file "$T_TMP/token" --spool "$T_TMP/spool3" --batch 3 -v "$T_TMP/faults.ndjson"
t_eq "faults: exit status" "$AG_RC" 0
t_match "faults: summary" "$(summary)" \
	'^sm-agent: ship: 5 accepted, 0 duplicates, 0 rejected, 0 invalid, 0 spooled, 0 lost \((5|6) requests\)$'
t_eq "faults: the proxy saw every attempt" "$(proxy_posts)" "503 drop drop 429 pass pass"
t_eq "faults: every request zstd-compressed NDJSON" \
	"$(grep ' path=/api/v1/streams ' "$PROXY_LOG" | grep -vc ' encoding=zstd type=application/x-ndjson ')" 0
t_eq "faults: every stream stored once, whole" "$(stored "$T_TMP/faults.ndjson.ids")" "5|5"
# The retry log (-v): before attempt A the wait is the jitter, 0 to 200 ms * 2^(A-2),
# plus 1 s after the answers that had Retry-After: 1 (the 503 and the 429).
policy=$(grep 'msg="retrying"' <<<"$AG_ERR" | sed -n 's/.* attempt=\([0-9]*\) delay_ms=\([0-9]*\) reason="\(.*\)"$/\1 \2 \3/p' |
	awk '{ ra = ($0 ~ / server answered (503|429): /) ? 1000 : 0; cap = 200 * 2 ^ ($1 - 2)
	       n++; nra += ra > 0; if ($2 < ra || $2 > ra + cap) bad = bad " attempt " $1 ": " $2 " ms" }
	     END { print n + 0 " retries, " nra + 0 " after Retry-After, out of bounds:" bad }')
t_match "faults: every wait as the retry policy says" "$policy" '^[34] retries, 2 after Retry-After, out of bounds:$'
t_eq "faults: the run took at least the 2 s asked for ($AG_MS ms)" "$([ "$AG_MS" -ge 2000 ] && echo yes)" yes
t_eq "faults: ... and not much more ($AG_MS ms)" "$([ "$AG_MS" -lt 15000 ] && echo yes)" yes
t_eq "faults: nothing spooled" "$([ -e "$T_TMP/spool3" ] && echo made || echo none)" none
proxy_stop

# a list of servers: one that cannot be reached, one that answers 503, then the real one
dead=$(free_port)
ndjson "$T_TMP/fo.ndjson" 4
proxy_start '503:0*100' || t_bail "faultproxy starts"
agent ship --url "http://127.0.0.1:$dead,$PROXY_URL,$INGEST_URL" --token-file "$T_TMP/token" \
	--spool "$T_TMP/spool-fo" --batch 2 -v "$T_TMP/fo.ndjson"
t_eq "servers in turn: exit status, every stream delivered, the switches counted" "$AG_RC $(summary)" \
	"0 sm-agent: ship: 4 accepted, 0 duplicates, 0 rejected, 0 invalid, 0 spooled, 0 lost (4 requests, 2 switches to the next server)"
t_eq "servers in turn: the unreachable one and the 503 tried once, then the next batch stays on the good one" \
	"$(grep -o 'msg="switching server" url=[^ ]*' <<<"$AG_ERR" | sed 's/.*url=//' | tr '\n' ' ')" "$PROXY_URL $INGEST_URL "
t_eq "servers in turn: no pause between servers" "$(grep -c 'msg="retrying"' <<<"$AG_ERR")" 0
t_eq "servers in turn: every stream stored once" "$(stored "$T_TMP/fo.ndjson.ids")" "4|4"
proxy_stop
ndjson "$T_TMP/fo2.ndjson" 1
agent ship --url "http://127.0.0.1:$dead,http://127.0.0.1:$(free_port)" --token-file "$T_TMP/token" \
	--spool "$T_TMP/spool-fo2" --retries 1 "$T_TMP/fo2.ndjson"
t_match "no server reachable: rounds of the list, then spooled" "$AG_RC $AG_ERR" \
	"^1 sm-agent: gave up after 2 rounds of the 2 servers: http://127.0.0.1:[0-9]+/api/v1/streams: .*"$'\n'"sm-agent: ship: 0 accepted, 0 duplicates, 0 rejected, 0 invalid, 1 spooled, 0 lost \\(4 requests, 4 switches to the next server\\)$"
agent ship --url "$INGEST_URL,ftp://x" x.json
t_eq "a list with a bad URL: refused" "$AG_RC $(head -n 1 <<<"$AG_ERR")" "2 sm-agent: url 'ftp://x': must start with http:// or https://"

# a timeout: the request the agent gave up on still reaches the server; the retry must not double it
ndjson "$T_TMP/hang.ndjson" 3
proxy_start 'hang:4000' || t_bail "faultproxy starts"
agent ship --url "$PROXY_URL" --token-file "$T_TMP/token" --spool "$T_TMP/spool3" --timeout 1 "$T_TMP/hang.ndjson"
t_eq "timeout: exit status and summary" "$AG_RC $AG_ERR" \
	"0 sm-agent: ship: 3 accepted, 0 duplicates, 0 rejected, 0 invalid, 0 spooled, 0 lost (2 requests)"
for i in $(seq 1 100); do
	[ "$(grep -c ' path=/api/v1/streams ' "$PROXY_LOG")" -ge 2 ] && break
	sleep 0.1
done
t_eq "timeout: the proxy passed the hung request and the retry" "$(proxy_posts)" "hang:4000 pass"
t_match "timeout: the hung request was passed on as well" "$(grep 'action=hang' "$PROXY_LOG")" ' status=200$'
t_eq "timeout: every stream stored once, whole" "$(stored "$T_TMP/hang.ndjson.ids")" "3|3"
proxy_stop

# 413: the batch is split in halves
ndjson "$T_TMP/split.ndjson" 3
proxy_start '413' || t_bail "faultproxy starts"
agent ship --url "$PROXY_URL" --token-file "$T_TMP/token" --spool "$T_TMP/spool3" "$T_TMP/split.ndjson"
t_eq "413: exit status and summary" "$AG_RC $AG_ERR" \
	"0 sm-agent: ship: 3 accepted, 0 duplicates, 0 rejected, 0 invalid, 0 spooled, 0 lost (3 requests)"
t_eq "413: one request, then the two halves" "$(proxy_posts)" "413 pass pass"
t_eq "413: every stream stored once, whole" "$(stored "$T_TMP/split.ndjson.ids")" "3|3"
proxy_stop

# 400: not retried, that batch spooled, the next one sent
ndjson "$T_TMP/b400.ndjson" 4
proxy_start '400' || t_bail "faultproxy starts"
agent ship --url "$PROXY_URL" --token-file "$T_TMP/token" --spool "$T_TMP/spool400" --batch 2 "$T_TMP/b400.ndjson"
t_eq "400: exit status, the reason once, the summary" "$AG_RC $AG_ERR" \
	"1 sm-agent: $T_TMP/b400.ndjson:1: streams spooled: server answered 400: faultproxy: injected 400
sm-agent: ship: 2 accepted, 0 duplicates, 0 rejected, 0 invalid, 2 spooled, 0 lost (2 requests)"
t_eq "400: not retried" "$(proxy_posts)" "400 pass"
t_eq "400: the first batch spooled" "$(spool_files "$T_TMP/spool400")" "$(head -n 2 "$T_TMP/b400.ndjson.ids" | sed 's/$/.json/' | sort | tr '\n' ' ' | sed 's/ $//')"
t_eq "400: the second stored" "$(stored "$T_TMP/b400.ndjson.ids")" "2|2"
proxy_stop

# 413 also for the halves of one stream each: rejected, neither retried nor spooled
ndjson "$T_TMP/b413.ndjson" 2
proxy_start '413*3' || t_bail "faultproxy starts"
agent ship --url "$PROXY_URL" --token-file "$T_TMP/token" --spool "$T_TMP/spool413" "$T_TMP/b413.ndjson"
t_eq "413 for single streams: exit status" "$AG_RC" 1
t_eq "413 for single streams: each rejected, with the answer" "$AG_ERR" \
	"sm-agent: $T_TMP/b413.ndjson:1: rejected by the server $(sed -n 1p "$T_TMP/b413.ndjson.ids"): server answered 413: faultproxy: injected 413
sm-agent: $T_TMP/b413.ndjson:2: rejected by the server $(sed -n 2p "$T_TMP/b413.ndjson.ids"): server answered 413: faultproxy: injected 413
sm-agent: ship: 0 accepted, 0 duplicates, 2 rejected, 0 invalid, 0 spooled, 0 lost (3 requests)"
t_eq "413 for single streams: requests" "$(proxy_posts)" "413 413 413"
t_eq "413 for single streams: nothing stored, nothing spooled" \
	"$(stored "$T_TMP/b413.ndjson.ids") $([ -e "$T_TMP/spool413" ] && echo made || echo none)" "0|0 none"
proxy_stop

# a 200 whose counts do not add up: like a 400, spooled (-v: one line per stream, with the reason)
ndjson "$T_TMP/sum.ndjson" 2
proxy_start '' --upstream none --answer '{"accepted": 1, "duplicates": 0, "rejected": []}' || t_bail "faultproxy starts"
agent ship --url "$PROXY_URL" --token-file "$T_TMP/token" --spool "$T_TMP/spoolsum" -v "$T_TMP/sum.ndjson"
why="server's answer does not add up: 1 accepted + 0 duplicates + 0 rejected for 2 streams"
t_eq "answer that does not add up: exit status, spooled, not retried" "$AG_RC|$(grep '^sm-agent: ' <<<"$AG_ERR")|$(proxy_posts)" \
	"1|sm-agent: $T_TMP/sum.ndjson:1: spooled $(sed -n 1p "$T_TMP/sum.ndjson.ids"): $why
sm-agent: $T_TMP/sum.ndjson:2: spooled $(sed -n 2p "$T_TMP/sum.ndjson.ids"): $why
sm-agent: ship: 0 accepted, 0 duplicates, 0 rejected, 0 invalid, 2 spooled, 0 lost (1 requests)|pass"
t_eq "answer that does not add up: both in the spool" "$(spool_files "$T_TMP/spoolsum")" "$(as_files "$T_TMP/sum.ndjson.ids")"
proxy_stop

# SIGTERM while waiting out a Retry-After: stops at once, spools, exit 1
ndjson "$T_TMP/term.ndjson" 3
proxy_start '503:30*10' || t_bail "faultproxy starts"
"$AGENT" ship --url "$PROXY_URL" --token-file "$T_TMP/token" --spool "$T_TMP/spoolterm" "$T_TMP/term.ndjson" \
	>"$T_TMP/term.out" 2>"$T_TMP/term.err" </dev/null &
apid=$!
for i in $(seq 1 100); do
	[ "$(grep -c ' path=/api/v1/streams ' "$PROXY_LOG")" -ge 1 ] && break
	sleep 0.1
done
sleep 0.3
t0=$(date +%s%N)
kill -TERM "$apid"
for i in $(seq 1 100); do
	t_alive "$apid" || break
	sleep 0.1
done
ms=$((($(date +%s%N) - t0) / 1000000))
if t_alive "$apid"; then
	kill -KILL "$apid"
	t_fail "SIGTERM: exits at once" "still running 10 s after SIGTERM; killed"
fi
wait "$apid"
t_eq "SIGTERM: exit status" "$?" 1
t_eq "SIGTERM: it stopped waiting (${ms} ms)" "$([ "$ms" -lt 5000 ] && echo yes)" yes
t_eq "SIGTERM: says so, spooled everything" "$(cat "$T_TMP/term.err")" \
	"sm-agent: interrupted
sm-agent: ship: 0 accepted, 0 duplicates, 0 rejected, 0 invalid, 3 spooled, 0 lost (1 requests)"
t_eq "SIGTERM: the streams are in the spool" "$(spool_files "$T_TMP/spoolterm")" "$(as_files "$T_TMP/term.ndjson.ids")"
t_eq "SIGTERM: one request only" "$(proxy_posts)" "503"
proxy_stop

# SIGTERM while reading a pipe: the stream already read cannot be read again, so it is spooled
mkfifo "$T_TMP/fifo"
"$AGENT" ship "${REAL[@]}" --spool "$T_TMP/spoolpipe" - <"$T_TMP/fifo" >"$T_TMP/pipe.out" 2>"$T_TMP/pipe.err" &
apid=$!
exec 7>"$T_TMP/fifo"
PIPED=$(newid)
stream "$PIPED" >&7
# once the line is read the agent blocks reading fd 0 again (read is syscall 0 on
# x86-64, 63 on arm64)
for i in $(seq 1 100); do
	[[ $(cat "/proc/$apid/syscall" 2>/dev/null) =~ ^(0|63)\ 0x0\  ]] && break
	sleep 0.1
done
kill -TERM "$apid"
for i in $(seq 1 100); do
	t_alive "$apid" || break
	sleep 0.1
done
if t_alive "$apid"; then
	kill -KILL "$apid"
	t_fail "SIGTERM while reading a pipe: exits at once" "still running 10 s after SIGTERM; killed"
fi
wait "$apid"
rc=$?
exec 7>&-
t_eq "SIGTERM while reading a pipe: exit status and summary" "$rc $(cat "$T_TMP/pipe.err")" \
	"1 sm-agent: interrupted
sm-agent: ship: 0 accepted, 0 duplicates, 0 rejected, 0 invalid, 1 spooled, 0 lost (0 requests)"
t_eq "SIGTERM while reading a pipe: the stream read is in the spool" "$(cat "$T_TMP/spoolpipe/$PIPED.json" 2>&1)" "$(stream "$PIPED")"

# ---- 4. server unreachable: spool, then drain ----
ndjson "$T_TMP/down.ndjson" 5
proxy_start '503:0*50' || t_bail "faultproxy starts"
SP=$T_TMP/spool4
agent ship --url "$PROXY_URL" --token-file "$T_TMP/token" --spool "$SP" --retries 2 --batch 2 "$T_TMP/down.ndjson"
t_eq "server down: exit status" "$AG_RC" 1
t_eq "server down: gives up on the first batch, spools everything" "$AG_ERR" \
	"sm-agent: gave up after 3 attempts: server answered 503: faultproxy: injected 503
sm-agent: ship: 0 accepted, 0 duplicates, 0 rejected, 0 invalid, 5 spooled, 0 lost (3 requests)"
t_eq "server down: 3 attempts, then no more requests" "$(proxy_posts)" "503 503 503"
t_eq "server down: nothing stored" "$(stored "$T_TMP/down.ndjson.ids")" "0|0"
t_eq "server down: one <uuid>.json per stream" "$(spool_files "$SP")" "$(as_files "$T_TMP/down.ndjson.ids")"
t_eq "server down: nothing else in the spool" "$(ls -A "$SP" | wc -l)" 5
t_eq "server down: spool directory mode 0700" "$(stat -c %a "$SP")" 700
same=0
while read -r id; do
	line=$(grep -F "\"$id\"" "$T_TMP/down.ndjson")
	[ "$(cat "$SP/$id.json")" = "$line" ] && [ "$(wc -l <"$SP/$id.json")" = 1 ] && same=$((same + 1))
done <"$T_TMP/down.ndjson.ids"
t_eq "server down: each spool file is its stream's line, as read" "$same" 5
proxy_stop

port=$(free_port)
agent drain --url "http://127.0.0.1:$port" --token-file "$T_TMP/token" --spool "$SP" --retries 0
t_eq "drain, server unreachable: exit status" "$AG_RC" 1
t_match "drain, server unreachable: says why" "$(head -n 1 <<<"$AG_ERR")" \
	"^sm-agent: gave up after 1 attempt: http://127\\.0\\.0\\.1:$port/api/v1/streams: "
t_eq "drain, server unreachable: summary" "$(summary)" \
	"sm-agent: drain: 0 accepted, 0 duplicates, 0 rejected, 0 invalid, 5 spooled, 0 lost (1 requests)"
t_eq "drain, server unreachable: the spool is kept" "$(spool_files "$SP")" "$(as_files "$T_TMP/down.ndjson.ids")"

# oldest first: make the last stream of the file the oldest spool file
i=0
while read -r id; do
	i=$((i + 1))
	touch -d "$i minutes ago" "$SP/$id.json"
done <"$T_TMP/down.ndjson.ids"
agent drain "${REAL[@]}" --spool "$SP" --batch 1
t_eq "drain: exit status and summary" "$AG_RC $AG_ERR" \
	"0 sm-agent: drain: 5 accepted, 0 duplicates, 0 rejected, 0 invalid, 0 spooled, 0 lost (5 requests)"
t_eq "drain: every stream stored once, whole" "$(stored "$T_TMP/down.ndjson.ids")" "5|5"
t_eq "drain: oldest first" "$(pg_q "SELECT stream_id FROM streams WHERE stream_id::text = ANY(string_to_array(:'ids', ' '))
	ORDER BY id" -v ids="$(ids_of "$T_TMP/down.ndjson.ids")")" "$(tac "$T_TMP/down.ndjson.ids")"
t_eq "drain: spool empty afterwards" "$(ls -A "$SP")" ""
agent drain "${REAL[@]}" --spool "$SP"
t_eq "drain of an empty spool: exit status and summary" "$AG_RC $AG_ERR" \
	"0 sm-agent: drain: 0 accepted, 0 duplicates, 0 rejected, 0 invalid, 0 spooled, 0 lost (0 requests)"
agent drain "${REAL[@]}" --spool "$T_TMP/never-made"
t_eq "drain of a spool that does not exist: exit 0, nothing made" \
	"$AG_RC $([ -e "$T_TMP/never-made" ] && echo made || echo none)" "0 none"

# a pretty stream is spooled as one line; without --spool and SM_SPOOL the spool is in ~/.cache
# (unless /var/spool/stackmine is writable, which this test must not touch)
if [ ! -e /var/spool/stackmine ]; then
	port=$(free_port)
	HOME=$T_TMP/home SM_SPOOL='' agent ship --url "http://127.0.0.1:$port" --token-file "$T_TMP/token" --retries 0 "$T_TMP/pretty.json"
	t_eq "default spool: exit status" "$AG_RC" 1
	t_eq "default spool: ~/.cache/stackmine/spool, the pretty stream on one line" \
		"$(cat "$T_TMP/home/.cache/stackmine/spool/$P1.json" 2>&1)" "$(tr '\n' ' ' <"$T_TMP/pretty.json" | sed 's/ $//')"
fi

# a bounded spool: what does not fit is reported as lost (987 bytes a stream: 2 fit in 2k)
port=$(free_port)
ndjson "$T_TMP/full.ndjson" 3
lost=$(sed -n 3p "$T_TMP/full.ndjson.ids")
agent ship --url "http://127.0.0.1:$port" --token-file "$T_TMP/token" --spool "$T_TMP/spoolfull" --spool-max 2k \
	--retries 0 "$T_TMP/full.ndjson"
t_eq "spool full: exit status" "$AG_RC" 1
t_match "spool full: the third stream NOT delivered and NOT spooled, with the spool's size" \
	"$(grep -F 'NOT delivered' <<<"$AG_ERR")" \
	"^sm-agent: $T_TMP/full\\.ndjson:3: NOT delivered and NOT spooled $lost: gave up after 1 attempt: .*; and spool $T_TMP/spoolfull: full: 1974 of 2048 bytes used, stream $lost needs 987 more; drain it or raise --spool-max\$"
t_eq "spool full: summary" "$(summary)" \
	"sm-agent: ship: 0 accepted, 0 duplicates, 0 rejected, 0 invalid, 2 spooled, 1 lost (1 requests)"
t_eq "spool full: two streams spooled" "$(spool_files "$T_TMP/spoolfull")" "$(head -n 2 "$T_TMP/full.ndjson.ids" | sed 's/$/.json/' | sort | tr '\n' ' ' | sed 's/ $//')"
# a later run counts what the spool holds; a temporary file a crash left an hour ago is removed
head -c 5000 /dev/zero >"$T_TMP/spoolfull/.tmp.crashed.1.0a0a"
touch -d '2 hours ago' "$T_TMP/spoolfull/.tmp.crashed.1.0a0a"
: >"$T_TMP/spoolfull/.tmp.writing.2.0b0b"
agent ship --url "http://127.0.0.1:$port" --token-file "$T_TMP/token" --spool "$T_TMP/spoolfull" --spool-max 2k \
	--retries 0 "$T_TMP/pretty.json"
t_match "spool full, next run: counts the spool, without the stale temporary file" "$AG_RC $AG_ERR" \
	"^1 sm-agent: $T_TMP/pretty\\.json:1: NOT delivered and NOT spooled $P1: .*; and spool $T_TMP/spoolfull: full: 1974 of 2048 bytes used, "
t_eq "spool full, next run: the stale temporary file removed, a fresh one kept" \
	"$(cd "$T_TMP/spoolfull" && ls -A | grep -c '^\.tmp\.crashed')$(cd "$T_TMP/spoolfull" && ls -A | grep -c '^\.tmp\.writing')" "01"

# two drains of one spool at the same time: every stream stored once, spool empty
port=$(free_port)
SP=$T_TMP/spoolpar
ndjson "$T_TMP/par.ndjson" 24
agent ship --url "http://127.0.0.1:$port" --token-file "$T_TMP/token" --spool "$SP" --retries 0 "$T_TMP/par.ndjson"
t_eq "parallel drains: 24 spooled first" "$AG_RC $(summary)" \
	"1 sm-agent: ship: 0 accepted, 0 duplicates, 0 rejected, 0 invalid, 24 spooled, 0 lost (1 requests)"
pids=
for n in 1 2; do
	"$AGENT" drain "${REAL[@]}" --spool "$SP" --batch 2 >/dev/null 2>"$T_TMP/par.$n.err" </dev/null &
	pids="$pids $!"
done
rcs=
for p in $pids; do
	wait "$p"
	rcs="$rcs$?"
done
t_eq "parallel drains: both exit 0" "$rcs" 00
acc=$(cat "$T_TMP"/par.[12].err | sed -n 's/^sm-agent: drain: \([0-9]*\) accepted, .* 0 rejected, 0 invalid, 0 spooled, 0 lost .*/\1/p' | awk '{s += $1} END {print NR, s}')
t_eq "parallel drains: accepted 24 between them" "$acc" "2 24"
t_eq "parallel drains: every stream stored once, whole" "$(stored "$T_TMP/par.ndjson.ids")" "24|24"
t_eq "parallel drains: spool empty" "$(ls -A "$SP")" ""

# a closed port: spooled at once with --retries 0; then drained to a server that refuses one
port=$(free_port)
R3=$(newid) R2=$(newid)
{ stream "$R3"; stream "$R2" "${TWO_EVENTS[@]}"; } >"$T_TMP/mixed.ndjson"
SP=$T_TMP/spool4b
agent ship --url "http://127.0.0.1:$port" --token-file "$T_TMP/token" --spool "$SP" --retries 0 "$T_TMP/mixed.ndjson"
t_eq "closed port: exit status and summary" "$AG_RC $(summary)" \
	"1 sm-agent: ship: 0 accepted, 0 duplicates, 0 rejected, 0 invalid, 2 spooled, 0 lost (1 requests)"
t_eq "closed port: both spooled" "$(spool_files "$SP")" "$(printf '%s.json\n' "$R3" "$R2" | sort | tr '\n' ' ' | sed 's/ $//')"
# a file in the spool that is not a stream at all
BAD=$(newid)
echo '{"v": 1, "host": "x"}' >"$SP/$BAD.json"

stop_ingest
start_ingest --max-events 2 --auth-cache-ms 0 || t_bail "sm-ingest starts with --max-events 2"
R3B=$(newid) R2B=$(newid)
{ stream "$R3B"; stream "$R2B" "${TWO_EVENTS[@]}"; } >"$T_TMP/mixed2.ndjson"
agent ship --url "$INGEST_URL" --token-file "$T_TMP/token" --spool "$T_TMP/spoolrej" "$T_TMP/mixed2.ndjson"
t_eq "ship, a stream refused: reported, neither retried nor spooled" \
	"$AG_RC|$AG_ERR|$([ -e "$T_TMP/spoolrej" ] && echo made || echo none)" \
	"1|sm-agent: $T_TMP/mixed2.ndjson:1: rejected by the server $R3B: events: 3 events, at most 2 allowed
sm-agent: ship: 1 accepted, 0 duplicates, 1 rejected, 0 invalid, 0 spooled, 0 lost (1 requests)|none"
t_eq "ship, a stream refused: the other one stored" \
	"$(pg_q "SELECT stream_id FROM streams WHERE stream_id IN ('$R2B', '$R3B')")" "$R2B"
agent drain --url "$INGEST_URL" --token-file "$T_TMP/token" --spool "$SP"
t_eq "drain, a stream refused: exit status" "$AG_RC" 1
t_eq "drain, a stream refused: reported with the server's message" \
	"$(grep -F 'rejected by the server' <<<"$AG_ERR")" \
	"sm-agent: $SP/$R3.json: rejected by the server $R3: events: 3 events, at most 2 allowed"
t_eq "drain, a stream refused: summary" "$(summary)" \
	"sm-agent: drain: 1 accepted, 0 duplicates, 1 rejected, 1 invalid, 0 spooled, 0 lost (1 requests)"
t_eq "drain, a stream refused: the other one stored" \
	"$(pg_q "SELECT stream_id, n_events, (SELECT count(*) FROM events e WHERE e.stream_ref = s.id)
		 FROM streams s WHERE stream_id IN ('$R2', '$R3')")" "$R2|2|2"
t_eq "drain, a stream refused: only rejected/ left in the spool" "$(ls -A "$SP")" "rejected"
t_eq "drain, a stream refused: rejected/ holds it and the reasons" "$(ls "$SP/rejected" | tr '\n' ' ')" \
	"$(printf '%s\n' "$R3.error" "$R3.json" "$BAD.error" "$BAD.json" | sort | tr '\n' ' ')"
t_eq "drain, a stream refused: the .error is the server's message" "$(cat "$SP/rejected/$R3.error")" \
	"events: 3 events, at most 2 allowed"
t_eq "drain, a stream refused: the stream is kept as it was" "$(cat "$SP/rejected/$R3.json")" "$(head -n 1 "$T_TMP/mixed.ndjson")"
t_eq "drain, not a stream: the .error is the validator's message" "$(cat "$SP/rejected/$BAD.error")" \
	"stream_id: required field missing"
agent drain --url "$INGEST_URL" --token-file "$T_TMP/token" --spool "$SP"
t_eq "drain again: rejected/ is not retried" "$AG_RC $AG_ERR" \
	"0 sm-agent: drain: 0 accepted, 0 duplicates, 0 rejected, 0 invalid, 0 spooled, 0 lost (0 requests)"
stop_ingest
start_ingest --workers 2 --auth-cache-ms 0 || t_bail "sm-ingest starts again"
REAL=(--url "$INGEST_URL" --token-file "$T_TMP/token")
mv "$SP/rejected/$R3.json" "$SP/"
agent drain "${REAL[@]}" --spool "$SP"
t_eq "drain after moving a rejected stream back: delivered" "$AG_RC $AG_ERR" \
	"0 sm-agent: drain: 1 accepted, 0 duplicates, 0 rejected, 0 invalid, 0 spooled, 0 lost (1 requests)"
t_eq "drain after moving a rejected stream back: stored whole" \
	"$(pg_q "SELECT n_events, (SELECT count(*) FROM events e WHERE e.stream_ref = s.id) FROM streams s WHERE stream_id = '$R3'")" "3|3"

# ---- 5. a wrong token ----
ndjson "$T_TMP/auth.ndjson" 3
SP=$T_TMP/spool5
before="$(nstreams)|$(nevents)"
agent ship --url "$INGEST_URL" --token sm_0000 --spool "$SP" --batch 2 "$T_TMP/auth.ndjson"
t_eq "wrong token: exit status" "$AG_RC" 1
t_eq "wrong token: stops at once, names the token problem" "$AG_ERR" \
	"sm-agent: stopped: server answered 401: authorization: unknown or revoked token
sm-agent: ship: 0 accepted, 0 duplicates, 0 rejected, 0 invalid, 3 spooled, 0 lost (1 requests)"
t_eq "wrong token: nothing stored" "$(nstreams)|$(nevents)" "$before"
t_eq "wrong token: every stream spooled" "$(spool_files "$SP")" "$(as_files "$T_TMP/auth.ndjson.ids")"
I1=$(newid)
stream "$I1" >"$T_TMP/notoken.json"
agent ship --url "$INGEST_URL" --spool "$SP" "$T_TMP/notoken.json"
t_eq "no token: exit status and message" "$AG_RC $AG_ERR" \
	"1 sm-agent: stopped: server answered 401: authorization: missing bearer token
sm-agent: ship: 0 accepted, 0 duplicates, 0 rejected, 0 invalid, 1 spooled, 0 lost (1 requests)"
echo "$I1" >>"$T_TMP/auth.ndjson.ids"
agent drain --url "$INGEST_URL" --token sm_0000 --spool "$SP"
t_eq "drain with a wrong token: stops at once, keeps the spool" "$AG_RC|$AG_ERR|$(spool_files "$SP")" \
	"1|sm-agent: stopped: server answered 401: authorization: unknown or revoked token
sm-agent: drain: 0 accepted, 0 duplicates, 0 rejected, 0 invalid, 4 spooled, 0 lost (1 requests)|$(as_files "$T_TMP/auth.ndjson.ids")"
SM_TOKEN=$TOKEN agent drain --url "$INGEST_URL" --spool "$SP"
t_eq "drain with the right token (SM_TOKEN): exit status and summary" "$AG_RC $AG_ERR" \
	"0 sm-agent: drain: 4 accepted, 0 duplicates, 0 rejected, 0 invalid, 0 spooled, 0 lost (1 requests)"
t_eq "drain with the right token: stored" "$(stored "$T_TMP/auth.ndjson.ids")" "4|4"
t_eq "drain with the right token: spool empty" "$(ls -A "$SP")" ""

# ---- 6. import ----
IMP=(--format perf --host perfhost --app sched-demo --label k=v --label team=db --symptom-comm pass)
agent import "${IMP[@]}" -o - "$PERF"
t_eq "import perf -o -: exit status, nothing on stderr" "$AG_RC $AG_ERR" "0 "
printf '%s\n' "$AG_OUT" >"$T_TMP/perf.ndjson"
t_eq "import perf -o -: one stream, one line" "$(wc -l <"$T_TMP/perf.ndjson")" 1
n_run=$(grep -o '"kind":"run"' "$T_TMP/perf.ndjson" | wc -l)
n_wait=$(grep -o '"kind":"wait"' "$T_TMP/perf.ndjson" | wc -l)
n_ready=$(grep -oE '"readier_tid":[1-9][0-9]*' "$T_TMP/perf.ndjson" | wc -l)
sym_tid=$(grep -oE '"symptom":\{"kind":"import","tid":[0-9]+' "$T_TMP/perf.ndjson" | grep -oE '[0-9]+$')
t_eq "import perf -o -: run and wait events, wakers known ($n_run run, $n_wait wait, $n_ready with a readier)" \
	"$([ "$n_run" -gt 0 ] && [ "$n_wait" -gt 0 ] && [ "$n_ready" -gt 0 ] && echo yes)" yes
t_eq "import perf -o -: the symptom thread is named pass (tid $sym_tid)" \
	"$(grep -cE "^pass +$sym_tid " "$PERF" | awk '{print ($1 > 0) ? "yes" : "no"}')" yes

before=$(nstreams)
agent import "${IMP[@]}" "${REAL[@]}" --spool "$T_TMP/spool6" "$PERF"
t_eq "import perf, shipped: exit status and summary" "$AG_RC $AG_ERR" \
	"0 sm-agent: import: 1 accepted, 0 duplicates, 0 rejected, 0 invalid, 0 spooled, 0 lost (1 requests)"
t_eq "import perf, shipped: one stream more" "$(nstreams)" "$((before + 1))"
t_eq "import perf, shipped: its metadata" "$(pg_q "SELECT host, app, version IS NULL, build_id IS NULL, labels::text,
	symptom_kind, symptom_tid FROM streams WHERE host = 'perfhost'")" \
	"perfhost|sched-demo|t|t|{\"k\": \"v\", \"team\": \"db\"}|import|$sym_tid"
t_eq "import perf, shipped: events as import -o writes them" "$(pg_q "SELECT s.n_events,
	count(*) FILTER (WHERE e.kind = 'r'), count(*) FILTER (WHERE e.kind = 'w'),
	count(*) FILTER (WHERE e.kind = 'w' AND e.readier_tid <> 0), count(*) FILTER (WHERE e.kind = 'r' AND e.readier_tid IS NOT NULL)
	FROM streams s JOIN events e ON e.stream_ref = s.id WHERE s.host = 'perfhost' GROUP BY s.n_events")" \
	"$((n_run + n_wait))|$n_run|$n_wait|$n_ready|0"
# the -o output is the same stream: its id comes from the content, so shipping it is a duplicate
agent ship "${REAL[@]}" --spool "$T_TMP/spool6" "$T_TMP/perf.ndjson"
t_eq "import -o then ship: the stream imported and shipped before, a duplicate" "$AG_RC $AG_ERR" \
	"0 sm-agent: ship: 0 accepted, 1 duplicates, 0 rejected, 0 invalid, 0 spooled, 0 lost (1 requests)"
oid=$(grep -oE '"stream_id":"[0-9a-f-]{36}"' "$T_TMP/perf.ndjson" | cut -d'"' -f4)
t_eq "import -o then ship: the stored stream is the one -o wrote" \
	"$(pg_q "SELECT stream_id FROM streams WHERE host = 'perfhost'")" "$oid"
# evsig WHERE: the number of events of the streams s that match, and a digest of them all
evsig() {
	pg_q "SELECT count(*) || ' ' || md5(string_agg(concat_ws(' ', e.seq, e.kind, e.tid, e.ts_ns, e.dur_ns,
		e.stack_id, e.readier_tid), ',' ORDER BY e.seq)) FROM events e JOIN streams s ON s.id = e.stream_ref WHERE $1"
}
t_match "import -o then ship: all $((n_run + n_wait)) events stored once" \
	"$(evsig "s.host = 'perfhost'")" "^$((n_run + n_wait)) [0-9a-f]{32}\$"

# folded: one run event per line with a count, 10 ms per count, threads from comm-PID/TID
lines=$(awk 'NF && $NF > 0' "$FOLDED" | wc -l)
counts=$(awk 'NF {s += $NF} END {print s}' "$FOLDED")
tids=$(sed -n 's/^[^;]*-[0-9]*\/\([0-9]*\);.*/\1/p' "$FOLDED" | sort -n | uniq | tr '\n' ' ' | sed 's/ $//')
gzip -c "$FOLDED" >"$T_TMP/folded.txt.gz"
agent import --format folded --host foldhost "${REAL[@]}" --spool "$T_TMP/spool6" "$T_TMP/folded.txt.gz"
t_eq "import folded (gzip), shipped: exit status and summary" "$AG_RC $AG_ERR" \
	"0 sm-agent: import: 1 accepted, 0 duplicates, 0 rejected, 0 invalid, 0 spooled, 0 lost (1 requests)"
t_eq "import folded: stored events ($lines lines, $counts counts, threads $tids)" "$(pg_q "SELECT s.app, s.n_events, count(*),
	count(*) FILTER (WHERE e.kind = 'r'), sum(e.dur_ns), string_agg(DISTINCT e.tid::text, ' ')
	FROM streams s JOIN events e ON e.stream_ref = s.id WHERE s.host = 'foldhost' GROUP BY s.id, s.app, s.n_events")" \
	"imported|$lines|$lines|$lines|$((counts * 10000000))|$tids"

agent import --format folded -o "$T_TMP/two.ndjson" "$FOLDED" "$SM_DATA/folded/inferno-async-profiler-collapsed-part.txt"
t_eq "import of two files -o FILE: exit status, two streams, two ids" \
	"$AG_RC $(wc -l <"$T_TMP/two.ndjson") $(grep -oE '"stream_id":"[0-9a-f-]{36}"' "$T_TMP/two.ndjson" | sort -u | wc -l)" "0 2 2"
agent import --format folded --host foldhost -o - "$T_TMP/folded.txt.gz"
a=$(sed 's/"stream_id":"[0-9a-f-]*"//' <<<"$AG_OUT")
agent import --format folded --host foldhost -o - "$FOLDED"
t_eq "import of a gzip file: the same stream as of the plain file" "$(sed 's/"stream_id":"[0-9a-f-]*"//' <<<"$AG_OUT" | cksum)" "$(cksum <<<"$a")"

# a folded file given as perf: refused at line 1, nothing sent
before=$(nstreams)
agent import --format perf "${REAL[@]}" --spool "$T_TMP/spool6" "$FOLDED"
t_eq "wrong format: exit status 1" "$AG_RC" 1
t_eq "wrong format: PATH:LINE: reason, and nothing sent" "$AG_ERR" \
	"sm-agent: $FOLDED:1: expected a sample header (COMM PID/TID [CPU] SECONDS.MICROS: [PERIOD] EVENT:)
sm-agent: import: 0 accepted, 0 duplicates, 0 rejected, 0 invalid, 0 spooled, 0 lost (0 requests)"
t_eq "wrong format: nothing stored" "$(nstreams)" "$before"
agent import --format folded -o - "$PERF"
t_eq "wrong format (perf as folded, -o -): exit status, message, no output" "$AG_RC|$AG_ERR|$AG_OUT" \
	"1|sm-agent: $PERF:22: expected a collapsed stack (FRAME;FRAME;...;FRAME COUNT, outermost frame first)|"
agent import "${IMP[@]}" --symptom-comm no-such-comm -o - "$PERF"
t_eq "import, unknown symptom comm: exit status and message" "$AG_RC|$AG_ERR|$AG_OUT" \
	"1|sm-agent: $PERF: no thread named \"no-such-comm\" in the capture|"

t_done
