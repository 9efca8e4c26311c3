#!/usr/bin/env bash
# bench/workers.sh: one mining run split across 1, 2 and 4 worker processes
# (make bench, section "workers"; a report, not a test). Sourced by
# tests/bench/run.sh with its PostgreSQL (PG* in the environment), $bin, $tools,
# $work and send_fleet.
#
# A stored fleet of 4,000 streams x 1,000 events is mined by one process in one
# piece (the reference), then by N workers of one thread each (N = 1, 2, 4) with
# parts of 250 streams: the run's total and its extraction phase (reading and AOI,
# with the wait for the other workers' parts and their merge), the speed-up over
# one worker, and the CPU that PostgreSQL and the workers spent meanwhile - on
# this machine's two cores the database's share is what bounds the speed-up.
set -euo pipefail

wk_streams=${SM_BENCH_WORKER_STREAMS:-4000}
wk_events=${SM_BENCH_WORKER_EVENTS:-1000}
wk_part=250

wk_pg_cpu_ms() { # CPU of PostgreSQL in ms: its live processes, and the backends that ended (the postmaster's children)
	local pg=0 p pm
	pm=$(head -n 1 "$PGHOST/postmaster.pid")
	for p in /proc/[0-9]*; do
		[ "$(cat "$p/comm" 2>/dev/null)" = postgres ] || continue
		pg=$((pg + $(awk '{ print $14 + $15 }' "$p/stat" 2>/dev/null || echo 0)))
	done
	echo $(( (pg + $(awk '{ print $16 + $17 }' "/proc/$pm/stat")) * 10 ))
}
wk_cpu_ms() { awk '{ print ($14 + $15) * 10 }' "/proc/$1/stat" 2>/dev/null || echo 0; }
wk_wait_run() {
	local s
	for _ in $(seq 1 6000); do
		s=$(psql -XAtc "SELECT status FROM runs WHERE id = $1")
		case $s in done) return 0 ;; failed) echo "bench: run $1 failed: $(psql -XAtc "SELECT error FROM runs WHERE id = $1")" >&2; exit 1 ;; esac
		sleep 0.05
	done
	echo "bench: run $1 did not end" >&2
	exit 1
}
# wk_line LABEL RUN PG_MS MINER_MS [BASE_TOTAL BASE_EXTRACT]
wk_line() {
	psql -XAtc "SELECT timings_ms->>'total', timings_ms->>'read_aoi' FROM runs WHERE id = $2" | tr '|' ' ' >"$work/wk.t"
	read -r tot ext <"$work/wk.t"
	awk -v l="$1" -v t="$tot" -v e="$ext" -v pg="$3" -v mi="$4" -v bt="${5:-}" -v be="${6:-}" 'BEGIN {
		s = bt == "" ? "" : sprintf("  speed-up %.2f (extraction %.2f)", bt / t, be / e)
		printf "%-26s total %5.2f s  extraction %5.2f s%s  CPU: PostgreSQL %4.1f s, miner %4.1f s (database %2.0f %%)\n",
			l, t / 1000, e / 1000, s, pg / 1000, mi / 1000, 100 * pg / (pg + mi) }'
}

echo
echo "== workers: one run over $wk_streams streams x $wk_events events, parts of $wk_part streams, workers of one thread each"
"$tools/genfleet" --streams "$wk_streams" --events "$wk_events" --apps workbench --hosts 100 --seed 5 \
	--out "$work/workers.ndjson" 2>/dev/null
send_fleet "$work/workers.ndjson" 20 3
rm -f "$work/workers.ndjson"
psql -XqAtc "VACUUM ANALYZE streams, events" >/dev/null
args=(--app workbench --threshold-fraction 0.01)
# warm the page cache, then the reference: one process, one piece, one thread
"$bin/sm-miner" run --quiet "${args[@]}" --part-streams 0 --threads 1 >/dev/null 2>&1
pg0=$(wk_pg_cpu_ms)
/usr/bin/time -f '%U %S' -o "$work/wk.cpu" "$bin/sm-miner" run --quiet "${args[@]}" --part-streams 0 --threads 1 >"$work/wk.id" 2>/dev/null
pg1=$(wk_pg_cpu_ms)
wk_line "one process, one piece:" "$(cat "$work/wk.id")" $((pg1 - pg0)) "$(awk '{ printf "%d", ($1 + $2) * 1000 }' "$work/wk.cpu")"
base_t= base_e=
for n in 1 2 4; do
	pids=()
	for _ in $(seq 1 "$n"); do
		"$bin/sm-miner" worker --quiet --threads 1 --part-streams "$wk_part" 2>>"$work/workers.log" &
		pids+=("$!")
	done
	sleep 1
	c0=0
	for p in "${pids[@]}"; do c0=$((c0 + $(wk_cpu_ms "$p"))); done
	pg0=$(wk_pg_cpu_ms)
	id=$("$bin/sm-miner" run --queue --quiet "${args[@]}")
	wk_wait_run "$id"
	pg1=$(wk_pg_cpu_ms)
	c1=0
	for p in "${pids[@]}"; do c1=$((c1 + $(wk_cpu_ms "$p"))); done
	kill "${pids[@]}"
	wait "${pids[@]}" 2>/dev/null || true
	if [ -z "$base_t" ]; then
		base_t=$(psql -XAtc "SELECT timings_ms->>'total' FROM runs WHERE id = $id")
		base_e=$(psql -XAtc "SELECT timings_ms->>'read_aoi' FROM runs WHERE id = $id")
	fi
	wk_line "$n worker$([ "$n" = 1 ] || echo s), $((wk_streams / wk_part)) parts:" "$id" $((pg1 - pg0)) $((c1 - c0)) "$base_t" "$base_e"
done
echo "same result in every run: $(psql -XAtc "SELECT CASE WHEN count(DISTINCT d) = 1 THEN 'yes' ELSE 'NO' END FROM (
	SELECT md5(string_agg(concat_ws(':', kind, rank, cost_ns, events, streams, frame_ids::text), ',' ORDER BY kind, rank)) AS d
	FROM patterns GROUP BY run_id) x")"
psql -Xqc "TRUNCATE streams, events, stat_deltas, stat_frames, stat_calls, stat_streams" -c "DELETE FROM runs"
