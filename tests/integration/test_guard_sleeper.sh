#!/usr/bin/env bash
# A background thread that waits for work at two call sites of one loop (docs/guard.md "Loop
# sites"): jemalloc's sleeps in a pthread_cond_timedwait between purges and, with nothing to purge,
# in a pthread_cond_wait on the same condition from the same frame. guardtest's sweeper does the
# same (every 2 ms a timed wait; told "idle", a wait with no timeout until woken). The untimed
# sleep is the loop waiting, not a unit: neither training nor guarding makes it one, so it is never
# a violation, a hang or a unit in flight (redis under its stock jemalloc shipped 10 and 20 s
# "units" of libjemalloc.so.2 this way, and their streams glued unrelated problems together).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../guard_lib.sh"

sm_admin migrate >/dev/null || t_bail "migrate"
TOKEN=$(mk_token ingest 2>/dev/null)
printf '%s\n' "$TOKEN" >"$T_TMP/token"
start_ingest || t_bail "sm-ingest starts"
PORT=$(free_port)

wait_ready() { gt_ready "$T_TMP/server.out" "the pool" || t_done; }
stop_pool() {
	"$GT" client "$PORT" 1 1 quit:1 >/dev/null 2>&1
	"$GT" client "$PORT" 1 1 fast:1 >/dev/null 2>&1
	wait "$GPID"
}
# idle_load: fast requests, with the sweeper sent idle for 400 ms twice on the way
idle_load() {
	"$GT" client "$PORT" 1 1 idle=400:1 >/dev/null || t_fail "idle request"
	"$GT" client "$PORT" 2000 2 fast:1 >/dev/null || t_fail "load"
	sleep 0.5
	"$GT" client "$PORT" 1 1 idle=400:1 >/dev/null || t_fail "idle request"
	sleep 0.6
}

# ---- training ----
rm -f "$T_TMP/server.out"
"$GUARD" run --train --profile-dir "$PROF" --log "$T_TMP/guard.log" -- "$GT" pool "$PORT" 2 sweep \
	>"$T_TMP/server.out" 2>&1 &
GPID=$!
wait_ready
sleep 0.3
idle_load
stop_pool
bid=$(readelf -n "$GT" | sed -n 's/.*Build ID: //p')
show=$("$GUARD" profile show "$PROF/$bid.json")
sweeper=$(grep -A2 '^loop [0-9]*: guardtest!sweeper_sleep' <<<"$show")
echo "$sweeper" | sed 's/^/  | /'
t_match "the sweeper's loop site is learnt" "$sweeper" '^loop [0-9]+: guardtest!sweeper_sleep'
# the loop's units are its work between sleeps: microseconds, not the 400 ms idle sleeps
t_match "its units do not hold the untimed sleep (threshold under 100 ms)" \
	"$(sed -n 's/.*   threshold \([0-9.]*\) \(ns\|us\).*/short/p; s/.*   threshold \([0-9.]*\) ms.*/\1 ms/p' <<<"$sweeper" | head -n 1)" \
	'^(short|[0-9]{1,2}(\.[0-9]+)? ms)$'

# ---- guarding ----
rm -f "$T_TMP/server.out"
SM_GUARD_REPORTS_PER_MIN=100000 "$GUARD" run --profile-dir "$PROF" --log "$T_TMP/guard.log" --url "$INGEST_URL" \
	--token-file "$T_TMP/token" --label run=sleeper -- "$GT" pool "$PORT" 2 sweep >"$T_TMP/server.out" 2>&1 &
GPID=$!
wait_ready
sleep 0.3
idle_load
stop_pool
q() { pg_q "$1"; }
S="labels->>'run' = 'sleeper' AND labels->>'unit.loop' = 'guardtest!sweeper_sleep'"
echo "the sweeper's streams: $(q "SELECT coalesce(string_agg(role || ' ' || (labels->>'unit.state') || ' ' ||
	(labels->>'unit.duration_ns'), '; '), 'none') FROM streams WHERE $S")"
t_eq "no stream of the sweeper holds an idle sleep (a unit of 400 ms or one in flight)" \
	"$(q "SELECT count(*) FROM streams WHERE $S AND ((labels->>'unit.duration_ns')::bigint >= 300000000
	       OR labels->>'unit.state' <> 'ended')")" 0

stop_ingest
t_done
