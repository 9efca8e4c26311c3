#!/usr/bin/env bash
# bench/run.sh: `make bench`, a report of figures, not a test. Runs on the
# release build (bin/) against a private PostgreSQL made for the run with
# deploy/pg.sh (the same settings as a deployment), and removes it afterwards.
#
# Sections (SM_BENCH_ONLY=ingest, =mining or =clustering runs one):
#   ingest  a generated fleet (SM_BENCH_STREAMS streams, default 1000, of
#           SM_BENCH_EVENTS events, default 2000) sent over HTTP by
#           SM_BENCH_SENDERS parallel senders (default 4) in zstd NDJSON batches
#           of SM_BENCH_BATCH streams (default 10), against a raw `psql \copy` of
#           the very rows it stored into the same tables. Prints events/s,
#           streams/s, their ratio and the server's peak memory.
#   mining  the BIDE engine on SPMF databases (closed and maximal), and on
#           generated call-stack databases; then end-to-end mining runs over a
#           stored fleet of about 1,000,000 AOI events and 50,000 distinct stacks.
#   clustering  2,000, 10,000 and 50,000 generated patterns of average length 36,
#           and dense 10,000-point linkages against SciPy's when it is installed.
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
cleanup() {
	[ -z "$ingest_pid" ] || { kill "$ingest_pid" 2>/dev/null; wait "$ingest_pid" 2>/dev/null || true; }
	deploy/pg.sh destroy "$work/pg" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT

now() { date +%s.%N; }
rate() { awk -v n="$1" -v s="$2" 'BEGIN { printf "%.0f", n / s }'; }
cpu_s() { awk '{ printf "%.1f", ($14 + $15) / 100 }' "/proc/$1/stat"; }

# send_fleet FILE BATCH SENDERS: split, compress and POST a fleet to a fresh
# sm-ingest; sets SEND_SECS, SEND_PEAK_MB, SEND_CPU and leaves the codes in $work/codes.
send_fleet() {
	local token url t0 t1
	rm -rf "$work/batches" "$work/port"
	mkdir "$work/batches"
	split -l "$2" -d -a 5 "$1" "$work/batches/b"
	for f in "$work"/batches/b*; do zstd -q -1 --rm "$f" -o "$f.zst"; done
	token=$("$bin/sm-admin" token create --role ingest --name bench 2>/dev/null)
	"$bin/sm-ingest" --listen 127.0.0.1:0 --port-file "$work/port" --log-level warn 2>"$work/ingest.log" &
	ingest_pid=$!
	for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.1; done
	url=http://127.0.0.1:$(cat "$work/port")/api/v1/streams
	t0=$(now)
	ls "$work"/batches/*.zst | xargs -P "$3" -I{} curl -s -o /dev/null -w '%{http_code}\n' \
		-H "Authorization: Bearer $token" -H 'Content-Type: application/x-ndjson' \
		-H 'Content-Encoding: zstd' --data-binary @{} "$url" >"$work/codes"
	t1=$(now)
	SEND_SECS=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
	SEND_PEAK_MB=$(awk '/VmHWM/ { printf "%.0f", $2 / 1024 }' "/proc/$ingest_pid/status")
	SEND_CPU=$(cpu_s "$ingest_pid")
	kill "$ingest_pid"
	wait "$ingest_pid" || true
	ingest_pid=
	if grep -qv '^200$' "$work/codes"; then
		echo "bench: not every request was stored: $(sort "$work/codes" | uniq -c | tr '\n' ' ')" >&2
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

echo "stackmine bench, $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)"
deploy/pg.sh start "$work/pg" >/dev/null 2>&1 || { echo "bench: cannot start PostgreSQL" >&2; exit 1; }
eval "$(deploy/pg.sh env "$work/pg")"
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
	echo "sm-ingest:  $secs s  $(rate "$nevents" "$secs") events/s  $(rate "$nstreams" "$secs") streams/s  peak RSS $peak MB  server CPU $icpu s"

	# the same rows, straight into the same tables
	psql -Xqc "\\copy (SELECT * FROM streams ORDER BY id) TO '$work/streams.tsv'" \
		-c "\\copy (SELECT * FROM events) TO '$work/events.tsv'"
	psql -Xqc "TRUNCATE streams, events"
	t0=$(now)
	psql -Xqc "\\copy streams FROM '$work/streams.tsv'" -c "\\copy events FROM '$work/events.tsv'"
	t1=$(now)
	csecs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
	echo "psql \\copy: $csecs s  $(rate "$nevents" "$csecs") events/s  $(rate "$nstreams" "$csecs") streams/s"
	echo "ratio:      $(awk -v a="$secs" -v b="$csecs" 'BEGIN { printf "%.0f %%", 100 * b / a }') of the raw COPY rate (goal: at least 50 %)"
	psql -Xqc "TRUNCATE streams, events, stat_deltas, stat_frames, stat_calls, stat_streams"
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
	for aoi in stream waitgraph; do
		t=$(timed "$bin/sm-miner" run --app minebench --aoi "$aoi" --threshold-fraction 0.01 --quiet)
		id=$(cat "$work/out")
		echo "run --aoi $aoi: $t  $(psql -XAtc "SELECT counts->>'aoi_events' || ' AOI events, ' || (counts->>'distinct_stacks') || ' distinct stacks, ' || (counts->>'patterns') || ' patterns; ms: ' || timings_ms::text FROM runs WHERE id = $id")"
	done
fi

if [ "$only" = all ] || [ "$only" = clustering ]; then
	echo
	echo "== clustering: generated patterns of average length 36 in families of variants (goals: 2,000 < 1 s, 10,000 < 10 s, 50,000 < 120 s)"
	for n in 2000 10000 50000; do
		"$tools/clusterbench" --patterns "$n"
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
