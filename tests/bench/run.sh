#!/usr/bin/env bash
# bench/run.sh: `make bench`, a report of figures, not a test. Runs on the
# release build (bin/) against a private PostgreSQL made for the run with
# deploy/pg.sh (the same settings as a deployment; shared memory in huge pages,
# reserved for the run as root, unless SM_PG_HUGE_PAGES=0), and removes it afterwards.
#
# Sections (SM_BENCH_ONLY=ingest, =mining, =clustering, =web, =analysis, =signatures, =fleet, =formats,
# =workers, =guard, =problems, =flood, =json, =shards or =scale runs one):
#   ingest  a generated fleet (SM_BENCH_STREAMS streams, default 1000, of
#           SM_BENCH_EVENTS events, default 2000) sent over HTTP by
#           SM_BENCH_SENDERS parallel senders (default 4) in zstd NDJSON batches
#           of SM_BENCH_BATCH streams (default 10), against a raw `psql \copy` of
#           the very rows it stored into the same tables. Prints events/s,
#           streams/s, their ratio and the server's peak memory; then the wire parser
#           alone on one core (tests/tools/wirebench) over a day's and the study's streams.
#   mining  the BIDE engine on SPMF databases (closed and maximal), and on
#           generated call-stack databases; then end-to-end mining runs over a
#           stored fleet of about 1,000,000 AOI events and 50,000 distinct stacks.
#   clustering  2,000, 10,000 and 50,000 generated patterns of average length 36,
#           and dense 10,000-point linkages against SciPy's when it is installed.
#   web     sm-web over a done run of 10,000 clusters written straight into the
#           tables: requests/s, median and p99 latency of the cluster list (API,
#           first page and a deep page), a cluster (API) and their HTML pages,
#           measured with wrk (2 threads, 8 connections, 10 s each); peak memory.
#   analysis  the baseline measurement (pattern matching, excess cost with its bootstrap)
#           on 10,000 clusters over 100,000 streams, a run with and without its baseline,
#           and attribution through sm-web over 100,000 streams (tests/bench/analysis.sh).
#   signatures  coverage and triage at 60,000 signatures: sm-cluster triage, the API's coverage and
#           triage, the signature page with ?run=N and the API's list (tests/bench/signatures.sh).
#   fleet   agents' reports from 1,000 simulated hosts (CPU per report, what 1,000
#           hosts cost) and the merge of 10, 100 and 1,000 uploaded profiles
#           (tests/bench/fleet.sh).
#   formats the importers of pprof, OTLP, bcc and perf and the exporters on one core, and
#           pprof pushed to POST /api/v1/import (tests/bench/formats.sh).
#   workers one mining run over 4,000 streams split across 1, 2 and 4 worker processes: the
#           speed-up and the database's share of the CPU (tests/bench/workers.sh).
#   shards  the events of a fleet on two shards (sm-admin shard add): ingest and mining rates
#           (tests/bench/shards.sh).
#   flood   sm-ingest and sm-web under thousands of half-open and trickling connections: the
#           latency of a legitimate client's requests meanwhile, the servers' memory and
#           descriptors (tests/bench/flood.sh; SM_BENCH_FLOOD_S seconds a phase, default 30).
#   json    every JSON endpoint of both servers: peak RSS growth per body byte for a large
#           legitimate body and a node bomb of about 4 MB (tests/bench/json.sh; goal <= 4).
#   guard   the guard agent's overhead inside PostgreSQL (pgbench -S), redis
#           (redis-benchmark) and nginx (wrk) in interleaved rounds, its memory
#           per process and the CPU of its threads (tests/bench/guard.sh).
#   scale   (tens of minutes, about 40 GB of disk) the paper's study, 900 streams x 200,000 events,
#           and a fleet's day, 1,000,000 streams of 100 events from 10,000 hosts, through
#           sm-agent and sm-ingest, mined and shown: each phase's time, rate, memory and disk, the
#           injected bugs' ranks (tests/bench/scale.sh; docs/scaling.md).
#   problems  PostgreSQL, redis and nginx guarded with realistic problems mixed into their loads,
#           mined with default settings: per problem its rank, clusters, streams, violations and
#           the load tool's count of slow requests (tests/bench/problems.sh; issue 26's acceptance).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
cd "$repo"
bin=$repo/bin
tools=$repo/build/rel/tests
SM_DATA_DIR=${SM_DATA:-$repo/../shared/data}
only=${SM_BENCH_ONLY:-all}
streams=${SM_BENCH_STREAMS:-1000}
events=${SM_BENCH_EVENTS:-2000}
senders=${SM_BENCH_SENDERS:-4}
batch=${SM_BENCH_BATCH:-10}

work=$(mktemp -d /var/tmp/sm-bench.XXXXXX)
ingest_pid=
web_pid=
cleanup() {
	[ -z "$ingest_pid" ] || { kill "$ingest_pid" 2>/dev/null; wait "$ingest_pid" 2>/dev/null || true; }
	[ -z "$web_pid" ] || { kill "$web_pid" 2>/dev/null; wait "$web_pid" 2>/dev/null || true; }
	deploy/pg.sh destroy "$work/pg" >/dev/null 2>&1 || true
	for d in "$work"/shard?; do [ -d "$d" ] && deploy/pg.sh destroy "$d" >/dev/null 2>&1; done
	rm -rf "$work"
}
trap cleanup EXIT

now() { date +%s.%N; }
rate() { awk -v n="$1" -v s="$2" 'BEGIN { printf "%.0f", n / s }'; }
cpu_s() { awk '{ printf "%.1f", ($14 + $15) / 100 }' "/proc/$1/stat"; }
# CPU time in ticks (1/100 s): the whole machine's busy time (steal not counted), and that of
# PostgreSQL's processes alive at the moment (the postmaster and its children)
busy_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 }' /proc/stat; }
# raw_rows_table: sm_bench_rows, empty, a table of the events a row each as they were stored before
# sql/030_event_chunks.sql (one partition, the index on stream_ref): what a COPY of the events as
# rows costs, the measure of the ingest goals ("raw COPY, a row an event").
raw_rows_table() {
	psql -Xq -v ON_ERROR_STOP=1 -c "SET client_min_messages = warning" -c "DROP TABLE IF EXISTS sm_bench_rows" \
		-c "CREATE TABLE sm_bench_rows (stream_ref bigint NOT NULL, received_at timestamptz NOT NULL,
			seq integer NOT NULL, kind \"char\" NOT NULL CHECK (kind IN ('r', 'w')), tid integer NOT NULL,
			ts_ns bigint NOT NULL, dur_ns bigint NOT NULL CHECK (dur_ns >= 0), stack_id integer NOT NULL,
			readier_tid integer) PARTITION BY RANGE (received_at)" \
		-c "CREATE TABLE sm_bench_rows_all PARTITION OF sm_bench_rows FOR VALUES FROM (MINVALUE) TO (MAXVALUE)" \
		-c "CREATE INDEX ON sm_bench_rows (stream_ref)"
}
pg_ticks() {
	local pm p t=0
	pm=$(head -n 1 "$work/pg/data/postmaster.pid")
	for p in "$pm" $(pgrep -P "$pm"); do
		t=$(( t + $(awk '{ print $14 + $15 }' "/proc/$p/stat" 2>/dev/null || echo 0) ))
	done
	echo "$t"
}
ticks_s() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", (b - a) / 100 }'; }

# curl_conf URL TOKEN FILE...: a curl config that POSTs each zstd batch, printing its status
curl_conf() {
	local url=$1 token=$2 f
	shift 2
	for f in "$@"; do
		printf 'url = "%s"\ndata-binary = "@%s"\noutput = "/dev/null"\nsilent\nwrite-out = "%%{http_code}\\n"\n' "$url" "$f"
		printf 'header = "%s"\n' "Authorization: Bearer $token" 'Content-Type: application/x-ndjson' 'Content-Encoding: zstd'
		echo next
	done | sed '$d'
}

# send_fleet FILE BATCH SENDERS [WARM-FILE]: split, compress and POST a fleet to a fresh
# sm-ingest; sets SEND_SECS, SEND_PEAK_MB, SEND_CPU (sm-ingest's CPU seconds during the timed
# send), SEND_BUSY (the machine's busy core-seconds meanwhile), SEND_PG_CPU (PostgreSQL's CPU
# seconds meanwhile) and leaves the codes in
# $work/codes. WARM-FILE's streams, when given, go first, untimed (a running server's rate: see
# below); SEND_TOP and SEND_STACKS are then the largest stream id stored (the timed part's
# streams are numbered above it) and the number of stacks, SEND_FRAME_TOP and SEND_STACK_TOP the
# largest frame and stack ids, and the command SEND_SETTLE, if set, runs between the two.
send_fleet() {
	local token url t0 t1 f
	rm -rf "$work/batches" "$work/port"
	mkdir "$work/batches"
	split -l "$2" -d -a 5 "$1" "$work/batches/b"
	[ -z "${4:-}" ] || split -l "$2" -d -a 5 "$4" "$work/batches/w"
	for f in "$work"/batches/[bw]*; do zstd -q -1 --rm "$f" -o "$f.zst"; done
	# the frame statistics a section before left unfolded are not this one's work
	local left
	while left=$(psql -XAtc "SELECT sm_fold_stats(1000)") && [ "$left" != 0 ]; do :; done
	[ "$left" = 0 ] || { echo "send_fleet: folding the frame statistics failed" >&2; return 1; }
	token=$("$bin/sm-admin" token create --role ingest --name bench 2>/dev/null)
	"$bin/sm-ingest" --listen 127.0.0.1:0 --port-file "$work/port" --log-level info 2>"$work/ingest.log" &
	ingest_pid=$!
	for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.1; done
	url=http://127.0.0.1:$(cat "$work/port")/api/v1/streams
	# a running server's rate: its id cache warmed first (at its start it reads the database's newest
	# frames and stacks, 0.4 s for a fleet's day, which a server serving for hours paid once)
	for _ in $(seq 600); do
		grep -q 'id cache warmed\|warming the id cache failed' "$work/ingest.log" && break
		sleep 0.1
	done
	# one curl for all the batches, SENDERS at a time: a process per batch spent as much of this
	# machine's two cores starting up as sm-ingest spent storing small streams (docs/scaling.md)
	: >"$work/codes.warm"
	SEND_TOP= SEND_STACKS= SEND_FRAME_TOP= SEND_STACK_TOP=
	if [ -n "${4:-}" ]; then
		# and its workers' memory touched: a fresh server's first batches fault in each worker's
		# buffers (26,000 page faults in the first 50 of a day's batches, 145 in the next 50)
		curl_conf "$url" "$token" "$work"/batches/w*.zst >"$work/warm.curl"
		curl --parallel --parallel-max "$3" --no-progress-meter -K "$work/warm.curl" >"$work/codes.warm"
		SEND_TOP=$(psql -XAtc "SELECT coalesce(max(id), 0) FROM streams")
		SEND_STACKS=$(psql -XAtc "SELECT count(*) FROM stacks")
		read -r SEND_FRAME_TOP SEND_STACK_TOP <<<"$(psql -XAtF ' ' -c "SELECT (SELECT coalesce(max(id), 0) FROM frames),
			(SELECT coalesce(max(id), 0) FROM stacks)")"
		# the caller's settling (SEND_SETTLE, a command) again, so that the timed part does not
		# pay for the warm-up's writes
		[ -z "${SEND_SETTLE:-}" ] || "$SEND_SETTLE"
	fi
	curl_conf "$url" "$token" "$work"/batches/b*.zst >"$work/send.curl"
	local b0 p0 c0
	b0=$(busy_ticks) p0=$(pg_ticks) c0=$(awk '{ print $14 + $15 }' "/proc/$ingest_pid/stat")
	t0=$(now)
	curl --parallel --parallel-max "$3" --no-progress-meter -K "$work/send.curl" >"$work/codes"
	t1=$(now)
	SEND_BUSY=$(ticks_s "$b0" "$(busy_ticks)") SEND_PG_CPU=$(ticks_s "$p0" "$(pg_ticks)")
	SEND_CPU=$(ticks_s "$c0" "$(awk '{ print $14 + $15 }' "/proc/$ingest_pid/stat")")
	SEND_SECS=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
	SEND_PEAK_MB=$(awk '/VmHWM/ { printf "%.0f", $2 / 1024 }' "/proc/$ingest_pid/status")
	kill "$ingest_pid"
	wait "$ingest_pid" || true
	ingest_pid=
	if grep -qv '^200$' "$work/codes.warm" "$work/codes"; then
		echo "bench: not every request was stored: $(cat "$work/codes.warm" "$work/codes" | sort | uniq -c | tr '\n' ' ')" >&2
		exit 1
	fi
}

# peak RSS and wall time of a command: "SECONDS MB"
timed() {
	/usr/bin/time -f '%e %M' -o "$work/time" "$@" >"$work/out" 2>"$work/err" || {
		echo "bench: $* failed:" >&2
		cat "$work/err" >&2
		exit 1
	}
	awk '{ printf "%.2f s  peak RSS %.0f MB", $1, $2 / 1024 }' "$work/time"
}

# wrk_line LABEL URL HEADER: 10 s of wrk with 8 connections; one line of figures.
# The URL must answer 200 first (wrk counts a redirect to the login page as a
# success); the timeout is long so that slow answers are measured, not dropped.
wrk_line() {
	local code first
	# the first request alone: what a page's first viewer waits (caches of the server still empty)
	read -r code first <<<"$(curl -s -o "$work/page" -w '%{http_code} %{time_total}' -H "$3" "$2")"
	if [ "$code" != 200 ]; then
		echo "bench: GET $2 answered $code:" >&2
		head -c 500 "$work/page" >&2
		exit 1
	fi
	wrk -t2 -c8 -d10s --timeout 30s --latency -H "$3" "$2" >"$work/wrk" 2>&1 || {
		echo "bench: wrk $2 failed:" >&2
		cat "$work/wrk" >&2
		exit 1
	}
	awk -v label="$1" -v first="$first" '
		function ms(v) { return v ~ /us$/ ? v / 1000 : v ~ /ms$/ ? v + 0 : v ~ /m$/ ? v * 60000 : v * 1000 }
		$1 == "Requests/sec:" { rps = $2 }
		$1 == "50%" { p50 = ms($2) }
		$1 == "99%" { p99 = ms($2) }
		/Non-2xx or 3xx responses:/ { bad = $NF }
		/Socket errors:/ { sub(/^ */, ""); errs = "  " $0 }
		END { printf "web %-36s %6s req/s  median %5.1f ms  p99 %6.1f ms  non-2xx %d  (8 connections; the first alone %.1f ms)%s\n",
			label ":", sprintf(rps < 10 ? "%.1f" : "%.0f", rps), p50, p99, bad, first * 1000, errs }' "$work/wrk"
	# requests still in flight when wrk stops would slow the next measurement down
	for _ in $(seq 300); do
		[ "$(psql -XAtc "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND pid <> pg_backend_pid() AND backend_type = 'client backend'")" = 0 ] && break
		sleep 0.1
	done
}

echo "stackmine bench, $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)"
# huge pages for shared_buffers, as docs/deployment.md advises (SM_PG_HUGE_PAGES=0: 4 KiB pages)
SM_PG_HUGE_PAGES=${SM_PG_HUGE_PAGES-1} deploy/pg.sh start "$work/pg" >"$work/pg.start" 2>&1 ||
	{ cat "$work/pg.start" >&2; echo "bench: cannot start PostgreSQL" >&2; exit 1; }
eval "$(deploy/pg.sh env "$work/pg")"
echo "PostgreSQL: shared_buffers $(psql -XAtc 'SHOW shared_buffers'), huge_pages = $(sed -n 's/^huge_pages = //p' "$PGHOST/stackmine.conf")$(sed -n 's/^pg\.sh: huge pages: \(.*[0-9] needed.*\|.*offers none.*\|.*holds .*\)/ (\1)/p' "$work/pg.start" | head -n 1)"
"$bin/sm-admin" migrate >/dev/null

if [ "$only" = all ] || [ "$only" = ingest ]; then
	echo
	echo "== ingest: $streams streams x $events events, $senders senders, $batch streams per request"
	"$tools/genfleet" --streams "$streams" --events "$events" --seed 42 --out "$work/fleet.ndjson" 2>/dev/null
	echo "fleet: $(du -m "$work/fleet.ndjson" | cut -f1) MB of NDJSON in $(( (streams + batch - 1) / batch )) requests"
	send_fleet "$work/fleet.ndjson" "$batch" "$senders"
	secs=$SEND_SECS peak=$SEND_PEAK_MB icpu=$SEND_CPU
	stored=$(psql -XAtc "SELECT count(*) || ' ' || coalesce(sum(n_events), 0) FROM streams")
	nstreams=${stored% *}
	nevents=${stored#* }
	if [ "$nstreams" != "$streams" ]; then
		echo "bench: $nstreams streams stored, $streams sent" >&2
		exit 1
	fi
	echo "sm-ingest:  $secs s  $(rate "$nevents" "$secs") events/s  $(rate "$nstreams" "$secs") streams/s  peak RSS $peak MB  server CPU $icpu s" \
		"(the machine busy $SEND_BUSY core-s, PostgreSQL $SEND_PG_CPU s of it)"
	# what it takes on disk (docs/scaling.md, "Sizing"): tables with their indexes and TOAST
	psql -XAtc "SELECT format('on disk:    events %s MB (%s bytes per event), streams %s MB (%s bytes per stream),'
		' frames and stacks %s MB, the rest %s MB', round(ev / 1e6), round(ev / $nevents::numeric),
		round(st / 1e6), round(st / $nstreams::numeric), round(fs / 1e6), round((db - ev - st - fs) / 1e6))
		FROM (SELECT (SELECT sum(pg_total_relation_size(inhrelid)) FROM pg_inherits
		              WHERE inhparent = 'event_chunks'::regclass) AS ev,
		             pg_total_relation_size('streams') AS st,
		             pg_total_relation_size('frames') + pg_total_relation_size('stacks') AS fs,
		             pg_database_size(current_database()) AS db) x"

	# the same rows, straight into the same tables; and the events a row each, as before 030
	psql -Xqc "\\copy (SELECT * FROM streams ORDER BY id) TO '$work/streams.tsv'" \
		-c "\\copy (SELECT * FROM event_chunks) TO '$work/chunks.tsv'" -c "\\copy (SELECT * FROM events) TO '$work/events.tsv'"
	psql -Xqc "TRUNCATE streams, event_chunks"
	raw_rows_table
	b0=$(busy_ticks)
	t0=$(now)
	psql -Xqc "\\copy streams FROM '$work/streams.tsv'"
	t1=$(now) b1=$(busy_ticks)
	psql -Xqc "\\copy event_chunks FROM '$work/chunks.tsv'"
	t2=$(now) b2=$(busy_ticks)
	psql -Xqc "\\copy sm_bench_rows FROM '$work/events.tsv'"
	t3=$(now) b3=$(busy_ticks)
	csecs=$(awk -v a="$t0" -v b="$t2" 'BEGIN { printf "%.2f", b - a }')
	rsecs=$(awk -v a="$t0" -v b="$t1" -v c="$t2" -v d="$t3" 'BEGIN { printf "%.2f", b - a + d - c }')
	echo "psql \\copy: $csecs s  $(rate "$nevents" "$csecs") events/s  $(rate "$nstreams" "$csecs") streams/s" \
		"(the machine busy $(ticks_s "$b0" "$b2") core-s; the rows as stored, the events in chunks)"
	echo "            a row an event (events before 030): $rsecs s  $(rate "$nevents" "$rsecs") events/s" \
		"(the machine busy $(ticks_s 0 $(( b1 - b0 + b3 - b2 ))) core-s)"
	echo "ratio:      $(awk -v a="$secs" -v b="$rsecs" 'BEGIN { printf "%.0f %%", 100 * b / a }') of the raw COPY rate of a row an event (goal: at least 50 %);" \
		"$(awk -v a="$secs" -v b="$csecs" 'BEGIN { printf "%.0f %%", 100 * b / a }') of the chunks' own"
	psql -Xqc "DROP TABLE sm_bench_rows" -c "TRUNCATE streams, event_chunks, stat_deltas, stat_frames, stat_calls, stat_streams"
	# the parser alone, on one core: a guard agent's streams (a fleet's day: 100 events, most of
	# the text the frames' names) and the paper study's (200,000 events)
	"$tools/genfleet" --streams 500 --events 100 --hosts 10000 --apps day --distinct-stacks 50000 --bugs 5 \
		--seed 30 --out "$work/wire-day.ndjson" 2>/dev/null
	"$tools/genfleet" --streams 4 --events 200000 --hosts 300 --apps paper --wait-share 0.75 \
		--distinct-stacks 50000 --bugs 5 --seed 29 --out "$work/wire-paper.ndjson" 2>/dev/null
	"$tools/wirebench" "$work/wire-day.ndjson" "$work/wire-paper.ndjson"
	rm -f "$work/wire-day.ndjson" "$work/wire-paper.ndjson"
fi

if [ "$only" = all ] || [ "$only" = mining ]; then
	echo
	echo "== mining engine (sm-miner spmf, both cores)"
	spmf=$SM_DATA_DIR/spmf
	for db in "kosarak10k_seq.txt 0.002" "dataVMSP.txt 0.02"; do
		set -- $db
		for mode in closed maximal; do
			t=$(timed "$bin/sm-miner" spmf --$mode --minsup-rel "$2" "$spmf/$1" "$work/patterns.txt")
			printf '%-20s %-8s minsup %-6s %7d patterns  %s\n' "$1" "$mode" "$2" "$(wc -l <"$work/patterns.txt")" "$t"
		done
	done
	for n in 100000 1000000; do
		for mode in closed maximal; do
			t=$(timed "$tools/bidebench" --$mode --minsup-rel 0.01 --gen-callstacks "$n")
			printf 'callstacks %-9s %-8s minsup 1%%   %s   (%s)\n' "$n" "$mode" "$t" "$(tail -n 1 "$work/out")"
		done
	done

	echo
	echo "== mining runs: 500 streams x 2000 events, pools of 200,000 stacks of depth 36"
	"$tools/genfleet" --streams 500 --events 2000 --apps minebench --hosts 50 --distinct-stacks 200000 \
		--depth 36 --seed 7 --out "$work/mine.ndjson" 2>/dev/null
	send_fleet "$work/mine.ndjson" 10 4
	# --threads 1 against 2: the read on one connection, or on one per thread (miner/extract.c)
	for aoi in stream waitgraph; do
		for threads in 1 2; do
			t=$(timed "$bin/sm-miner" run --app minebench --aoi "$aoi" --threshold-fraction 0.01 --threads "$threads" --quiet)
			id=$(cat "$work/out")
			echo "run --aoi $aoi --threads $threads: $t  $(psql -XAtc "SELECT (counts->>'events_read') || ' events read on ' || (counts->>'read_connections') || ' connection(s), ' || (counts->>'aoi_events') || ' AOI events, ' || (counts->>'distinct_stacks') || ' distinct stacks, ' || (counts->>'patterns') || ' patterns; ms: ' || timings_ms::text FROM runs WHERE id = $id")"
		done
	done
fi

if [ "$only" = all ] || [ "$only" = clustering ]; then
	echo
	echo "== clustering: generated patterns of average length 36 in families of variants (goals: 2,000 < 1 s, 10,000 < 10 s, 50,000 < 120 s)"
	# average linkage (the default) keeps the exact distances beyond the cut inside components;
	# complete linkage on the same fleet needs only the pairs within the cut: the difference is
	# what exact UPGMA costs
	for n in 2000 10000 50000; do
		"$tools/clusterbench" --patterns "$n"
		"$tools/clusterbench" --patterns "$n" --method complete
	done
	echo
	echo "== dense linkage, 10,000 points (goal: no slower than SciPy)"
	py=
	for cand in python3 /usr/bin/python3; do
		if command -v "$cand" >/dev/null && "$cand" -c 'import scipy.cluster.hierarchy' 2>/dev/null; then
			py=$cand
			break
		fi
	done
	for m in average complete single; do
		"$tools/clusterbench" --dense 10000 --method "$m" --write "$work/dense.f64"
		if [ -n "$py" ]; then
			"$py" -c 'import sys, time, numpy as np
from scipy.cluster.hierarchy import linkage
y = np.fromfile(sys.argv[1], dtype="<f8")
t = time.monotonic(); linkage(y, sys.argv[2]); t = time.monotonic() - t
print("scipy %s, %s linkage: %.2f s" % (__import__("scipy").__version__, sys.argv[2], t))' "$work/dense.f64" "$m"
		else
			echo "scipy: not installed (apt-get install python3-scipy), no comparison"
		fi
	done
	rm -f "$work/dense.f64"
fi

if [ "$only" = all ] || [ "$only" = web ]; then
	echo
	echo "== web: sm-web over a run of 10,000 clusters, wrk 2 threads x 8 connections x 10 s each (goal: p99 under 50 ms for the list and the cluster page)"
	# 3,000 frames, 2,000 streams, a done run, 30,000 patterns of length about 36, and
	# 10,000 clusters of 3 members (common part of 15 frames, alignments, matched stacks
	# and their run_stacks rows), written straight into the tables
	t0=$(now)
	psql -XAtq -v ON_ERROR_STOP=1 >"$work/webrun" <<-'SQL'
	SELECT setseed(0.42) \g /dev/null
	-- C++ frame names: 12 namespaces x 25 classes x 10 methods
	CREATE TEMP TABLE wf AS
		SELECT (row_number() OVER (ORDER BY n, c, m) - 1)::int AS i,
		       (ARRAY['std', 'boost::asio::detail', 'absl::internal', 'v8::internal', 'app::core', 'app::ui',
			      'app::storage', 'app::net', 'app::render', 'folly', 'grpc_core', 'sqlite'])[n] || '::' ||
		       (ARRAY['ThreadPool', 'Scheduler', 'EventLoop', 'HttpSession', 'Connection', 'BufferPool',
			      'Document', 'LayoutEngine', 'Compositor', 'FontCache', 'ImageDecoder', 'IndexWriter',
			      'BTreeCursor', 'Journal', 'Mutex', 'ConditionVariable', 'FileStream', 'Resolver', 'TlsChannel',
			      'Parser', 'Serializer', 'Registry', 'Observer', 'TaskRunner', 'Allocator'])[c] || '::' ||
		       (ARRAY['Run', 'Lock', 'Wait', 'Flush', 'Read', 'Write', 'Dispatch', 'Commit', 'Resolve',
			      'Update'])[m] ||
		       (ARRAY['()', '(int)', '(std::string const&)', '(void*, unsigned long)', '(std::chrono::nanoseconds)',
			      '(Task&&)'])[1 + (n + c + m) % 6] AS name
		FROM generate_series(1, 12) n, generate_series(1, 25) c, generate_series(1, 10) m;
	INSERT INTO frames (name) SELECT name FROM wf ORDER BY i ON CONFLICT (name) DO NOTHING;
	CREATE TEMP TABLE wfid AS SELECT wf.i, f.id FROM wf JOIN frames f USING (name);
	ALTER TABLE wfid ADD PRIMARY KEY (i);
	ANALYZE wfid;

	-- streams on 40 hosts, 6 versions, two labels
	INSERT INTO streams (stream_id, host, app, version, labels, symptom_kind, symptom_tid, symptom_start_ns,
			     symptom_end_ns, n_events)
		SELECT md5('webbench-' || i)::uuid, 'ws-' || lpad((i % 40)::text, 3, '0'), 'webbench',
		       '4.' || (i % 6) || '.0', jsonb_build_object('region', (ARRAY['eu-west', 'us-east', 'us-west',
		       'ap-south'])[1 + i % 4], 'channel', (ARRAY['stable', 'beta', 'dev'])[1 + i % 3]),
		       'ui-delay', 1, 0, 2000000000, 2000
		FROM generate_series(0, 1999) i ON CONFLICT (stream_id) DO NOTHING;
	CREATE TEMP TABLE wstr AS
		SELECT i, s.id FROM generate_series(0, 1999) i JOIN streams s ON s.stream_id = md5('webbench-' || i)::uuid;

	INSERT INTO runs (status, params, created_at, started_at, finished_at, timings_ms)
		VALUES ('done', '{"app": "webbench", "kind": "both", "aoi": "stream", "threshold_fraction": 0.01,
			"linkage": "average", "cut": 0.5, "filter": {}}', now() - interval '10 minutes',
			now() - interval '9 minutes', now() - interval '5 minutes',
			'{"read": 61000, "mine": 120000, "cluster": 59000, "total": 240000}')
		RETURNING id AS run \gset

	-- clusters: 70 % wait, a heavy-tailed cost weight, 3 to 6 matched stacks
	CREATE TEMP TABLE wc AS
		SELECT c, CASE WHEN c % 10 < 7 THEN 'w' ELSE 'r' END::"char" AS kind, exp(random() * 5) AS w,
		       3 + c % 4 AS nstacks, nextval(pg_get_serial_sequence('clusters', 'id')) AS id
		FROM generate_series(0, 9999) c;
	-- members aligned with member 0, the medoid: 10 steps of prefix (members 1 and 2
	-- substitute alternate frames), 15 common frames, 11 of suffix (member 1 substitutes
	-- the first 6, member 2 the last 5 and has 2 frames more)
	CREATE TEMP TABLE wl AS
		SELECT m, s, CASE WHEN s < 10 THEN CASE WHEN m = 0 OR (s % 2 = 0) = (m = 1) THEN 'M' ELSE 'S' END
				  WHEN s < 25 THEN 'M'
				  WHEN s < 31 THEN CASE WHEN m = 1 THEN 'S' ELSE 'M' END
				  WHEN s < 36 THEN CASE WHEN m = 2 THEN 'S' ELSE 'M' END
				  ELSE 'I' END AS op
		FROM generate_series(0, 2) m, generate_series(0, 37) s WHERE s < 36 OR m = 2;
	CREATE TEMP TABLE wp AS
		SELECT c, m, array_agg(f.id ORDER BY s) AS frame_ids, string_agg(op, '' ORDER BY s) AS ops,
		       array_agg(f.id ORDER BY s) FILTER (WHERE m = 0 AND s BETWEEN 10 AND 24) AS common,
		       round((count(*) FILTER (WHERE op = 'M') + 0.5 * count(*) FILTER (WHERE op = 'S')) / count(*), 6)
		       AS sim, nextval(pg_get_serial_sequence('patterns', 'id')) AS id
		FROM (SELECT c, m, s, op, abs(hashint4(c * 256 + CASE op WHEN 'M' THEN 0 ELSE m END * 64 + s)) % 3000 AS fi
		      FROM generate_series(0, 9999) c, wl) x
		JOIN wfid f ON f.i = x.fi GROUP BY c, m;

	-- the matched stacks: a member's frames and 3 inner frames of their own, each in 1
	-- to 24 streams (most in few)
	CREATE TEMP TABLE ws AS
		SELECT wc.c, k AS idx, wp.frame_ids || ARRAY(SELECT f.id FROM generate_series(0, 2) e
			JOIN wfid f ON f.i = abs(hashint4(wc.c * 256 + 192 + k * 8 + e)) % 3000 ORDER BY e) AS frame_ids
		FROM wc, generate_series(0, 5) k, wp WHERE k < wc.nstacks AND wp.c = wc.c AND wp.m = k % 3;
	INSERT INTO stacks (frame_ids) SELECT frame_ids FROM ws ON CONFLICT (hash, frame_ids) DO NOTHING;
	CREATE TEMP TABLE wsid AS SELECT ws.c, ws.idx, s.id FROM ws JOIN stacks s USING (frame_ids);
	INSERT INTO run_stacks (run_id, kind, stack_id, stream_ref, cost_ns, events)
		SELECT :run, wc.kind, wsid.id, wstr.id, ev * (1000000 + floor(random() * 2000000 * wc.w)::bigint), ev
		FROM wsid JOIN wc USING (c) CROSS JOIN
		     LATERAL (SELECT t, 1 + floor(random() * 20)::int AS ev
			      FROM generate_series(0, floor(24 * random() ^ 3)::int + 0 * wsid.id) t) n
		JOIN wstr ON wstr.i = (abs(hashint4(wsid.c * 8 + wsid.idx)) + n.t * 7919) % 2000;

	-- metrics of a member over its stacks, of a cluster over all of them; ranks by kind
	CREATE TEMP TABLE wpm AS
		SELECT wsid.c, wsid.idx % 3 AS m, array_agg(DISTINCT wsid.id) AS stack_ids,
		       sum(rs.cost_ns)::bigint AS cost_ns, sum(rs.events)::bigint AS events,
		       count(DISTINCT rs.stream_ref)::int AS streams
		FROM wsid JOIN run_stacks rs ON rs.run_id = :run AND rs.stack_id = wsid.id GROUP BY 1, 2;
	INSERT INTO patterns (id, run_id, kind, rank, frame_ids, cost_ns, events, streams, stack_ids)
		OVERRIDING SYSTEM VALUE
		SELECT wp.id, :run, wc.kind, row_number() OVER (PARTITION BY wc.kind ORDER BY wpm.cost_ns DESC, wp.id),
		       wp.frame_ids, wpm.cost_ns, wpm.events, wpm.streams, wpm.stack_ids
		FROM wp JOIN wc USING (c) JOIN wpm USING (c, m);
	INSERT INTO clusters (id, run_id, kind, total_cost_ns, streams, events, avg_cost_ns, rank_total_cost,
			      rank_streams, rank_events, rank_avg_cost, medoid, common_frame_ids, members, stack_ids,
			      alignment)
		OVERRIDING SYSTEM VALUE
		SELECT id, :run, kind, cost, streams, events, avg,
		       row_number() OVER (PARTITION BY kind ORDER BY cost DESC, id),
		       row_number() OVER (PARTITION BY kind ORDER BY streams DESC, id),
		       row_number() OVER (PARTITION BY kind ORDER BY events DESC, id),
		       row_number() OVER (PARTITION BY kind ORDER BY avg DESC, id),
		       medoid, common, members, stack_ids, alignment
		FROM (SELECT wc.id, wc.c, wc.kind, sum(rs.cost_ns)::bigint AS cost,
			     count(DISTINCT rs.stream_ref)::int AS streams, sum(rs.events)::bigint AS events,
			     (sum(rs.cost_ns) / sum(rs.events))::bigint AS avg, array_agg(DISTINCT wsid.id) AS stack_ids
		      FROM wc JOIN wsid USING (c) JOIN run_stacks rs ON rs.run_id = :run AND rs.stack_id = wsid.id
		      GROUP BY wc.id, wc.c, wc.kind) k
		JOIN (SELECT c, (array_agg(id ORDER BY m))[1] AS medoid, max(common) AS common,
			     array_agg(id ORDER BY id) AS members,
			     jsonb_agg(jsonb_build_object('pattern', id, 'sim', sim, 'ops', ops) ORDER BY m) AS alignment
		      FROM wp GROUP BY c) a ON a.c = k.c;
	-- the ranks among the run's clusters, the value counts attribution reads and the clusters'
	-- streams (sm_match_streams, 027_match), as the miner stores them (without the counts the cluster page measured the fallback for runs stored before
	-- run_values, which counts every value of the run's streams on each request)
	SELECT sm_rank_clusters(:run) \g /dev/null
	SELECT sm_run_values(:run) \g /dev/null
	SELECT sm_match_streams(:run) \g /dev/null
	UPDATE runs SET counts = jsonb_build_object('streams', 2000,
		'aoi_events', (SELECT sum(events) FROM run_stacks WHERE run_id = :run),
		'distinct_stacks', (SELECT count(*) FROM wsid), 'patterns', (SELECT count(*) FROM wp), 'clusters', 10000)
		WHERE id = :run;
	VACUUM (ANALYZE) frames, streams, stacks, runs, run_stacks, patterns, clusters;
	-- the run, the cluster in the middle of its default order, the run_stacks rows
	SELECT :run, (SELECT id FROM clusters WHERE run_id = :run ORDER BY total_cost_ns DESC, id OFFSET 5000 LIMIT 1),
	       (SELECT count(*) FROM run_stacks WHERE run_id = :run);
	SQL
	t1=$(now)
	IFS='|' read -r run cid nrs <"$work/webrun"
	echo "data: run $run, 10000 clusters, 30000 patterns, $nrs run_stacks rows, written in $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s"

	token=$("$bin/sm-admin" token create --role analyst --name bench 2>/dev/null)
	rm -f "$work/port"
	"$bin/sm-web" --db "$(deploy/pg.sh url "$work/pg")" --listen 127.0.0.1:0 --port-file "$work/port" --no-worker \
		--log-level warn 2>"$work/web.log" &
	web_pid=$!
	for _ in $(seq 100); do
		[ -s "$work/port" ] && curl -sf -o /dev/null "http://127.0.0.1:$(cat "$work/port")/healthz" && break
		sleep 0.1
	done
	[ -s "$work/port" ] || { echo "bench: sm-web did not start:" >&2; cat "$work/web.log" >&2; exit 1; }
	url=http://127.0.0.1:$(cat "$work/port")
	# the list has its 50 of 10,000 clusters
	curl -s -H "Authorization: Bearer $token" "$url/api/v1/runs/$run/clusters" >"$work/page"
	n=$(grep -o '"cluster_id":' "$work/page" | wc -l)
	if [ "$n" != 50 ] || ! grep -q '"total": 10000}$' "$work/page"; then
		echo "bench: GET /api/v1/runs/$run/clusters: $n clusters, $(grep -o '"total": [0-9]*' "$work/page" || echo 'no total')" >&2
		exit 1
	fi

	wrk_line "clusters list (API)" "$url/api/v1/runs/$run/clusters" "Authorization: Bearer $token"
	wrk_line "clusters by streams, offset 5000 (API)" "$url/api/v1/runs/$run/clusters?sort=streams&offset=5000" \
		"Authorization: Bearer $token"
	wrk_line "cluster $cid (API)" "$url/api/v1/clusters/$cid" "Authorization: Bearer $token"
	wrk_line "run page (HTML)" "$url/runs/$run" "Authorization: Bearer $token"
	wrk_line "cluster page (HTML)" "$url/clusters/$cid" "Authorization: Bearer $token"
	echo "sm-web: peak RSS $(awk '/VmHWM/ { printf "%.0f", $2 / 1024 }' "/proc/$web_pid/status") MB  CPU $(cpu_s "$web_pid") s"
	if [ -s "$work/web.log" ]; then
		echo "sm-web warnings (count, message):"
		sed 's/^ts=[^ ]* //' "$work/web.log" | sort | uniq -c | sort -rn | head -5
	fi
	kill "$web_pid"
	wait "$web_pid" || true
	web_pid=
fi

if [ "$only" = all ] || [ "$only" = analysis ]; then
	. "$repo/tests/bench/analysis.sh"
fi

if [ "$only" = all ] || [ "$only" = signatures ]; then
	. "$repo/tests/bench/signatures.sh"
fi

if [ "$only" = all ] || [ "$only" = fleet ]; then
	. "$repo/tests/bench/fleet.sh"
fi

if [ "$only" = all ] || [ "$only" = formats ]; then
	. "$repo/tests/bench/formats.sh"
fi

if [ "$only" = all ] || [ "$only" = workers ]; then
	. "$repo/tests/bench/workers.sh"
fi

if [ "$only" = all ] || [ "$only" = guard ]; then
	bash "$repo/tests/bench/guard.sh"
fi

if [ "$only" = all ] || [ "$only" = problems ]; then
	bash "$repo/tests/bench/problems.sh"
fi

if [ "$only" = all ] || [ "$only" = flood ]; then
	. "$repo/tests/bench/flood.sh"
fi

# last: it leaves the database sharded
if [ "$only" = all ] || [ "$only" = json ]; then
	. "$repo/tests/bench/json.sh"
fi

if [ "$only" = all ] || [ "$only" = shards ]; then
	. "$repo/tests/bench/shards.sh"
fi

# last: it runs for tens of minutes and needs about 40 GB of disk
if [ "$only" = all ] || [ "$only" = scale ]; then
	. "$repo/tests/bench/scale.sh"
fi
