#!/usr/bin/env bash
# Deferred requests (docs/guard.md "Deferred requests"): an epoll proxy of our own (guardtest proxy,
# nginx's shape: the client's request read in one iteration, a non-blocking connection to the
# upstream, its reply read and the answer written in a later one) in front of an upstream that
# sleeps for "up MS". Trained on fast upstream replies, then guarded: every slow reply is a violation
# stream of its own (unit.async=1) whose events hold the [async wait] wait with the stack at the
# upstream's read and the upstream's time; fast replies are none; mined, the wait is the top
# cluster; SM_GUARD_ASYNC=0 turns it off. Real nginx behind proxy_pass: test_real_problems.sh
# (SM_PROBLEMS_APPS=nginx runs its nginx part alone).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../guard_lib.sh"

sm_admin migrate >/dev/null || t_bail "migrate"
TOKEN=$(mk_token ingest 2>/dev/null)
printf '%s\n' "$TOKEN" >"$T_TMP/token"
start_ingest || t_bail "sm-ingest starts"

UPORT=$(free_port)
"$GT" pool "$UPORT" 4 >"$T_TMP/upstream.out" 2>&1 &
UPID=$!
t_cleanup "kill $UPID 2>/dev/null"
PORT=$(free_port)

wait_ready() { gt_ready "$T_TMP/server.out" "the proxy" || t_done; }
stop_proxy() { gt_stop "$PORT"; }
# guarded LABEL: the proxy guarded, shipping to sm-ingest with run=LABEL (more settings in the environment)
guarded() {
	rm -f "$T_TMP/server.out"
	"$GUARD" run --profile-dir "$PROF" --log "$T_TMP/guard.log" --url "$INGEST_URL" --token-file "$T_TMP/token" \
		--label "run=$1" -- "$GT" proxy "$PORT" "$UPORT" >"$T_TMP/server.out" 2>&1 &
	GPID=$!
	wait_ready
}

# ---- training: upstream replies of a fraction of a millisecond ----
rm -f "$T_TMP/server.out"
"$GUARD" run --train --profile-dir "$PROF" --log "$T_TMP/guard.log" -- "$GT" proxy "$PORT" "$UPORT" \
	>"$T_TMP/server.out" 2>&1 &
GPID=$!
wait_ready
# No warm-up: the load's four connections are accepted before the loop site is found (its fourth
# blocking wait), as a server's kept-alive clients are; the table tells them by the port they came
# in on (guessed by their first call, a client answered while the unit works for another looked
# like an upstream: one connection in four was learnt).
"$GT" client "$PORT" 3000 4 up:80,fast:20 >"$T_TMP/train.mix" || t_fail "training load"
stop_proxy
bid=$(readelf -n "$GT" | sed -n 's/.*Build ID: //p')
show=$("$GUARD" profile show "$PROF/$bid.json")
ups=$(awk '$1 == "up" {print $2}' "$T_TMP/train.mix")
learnt=$(sed -n 's/^  deferred requests \([0-9]*\) .*/\1/p' <<<"$show")
echo "training: $ups requests forwarded, $learnt deferred requests learnt"
# (all but those begun before the loop site was known or in flight then: a few per connection)
t_eq "training learns every forwarded request as a deferred request of the epoll loop" \
	"$(( learnt <= ups && learnt >= ups - 16 ))" 1
thr_ms=$(grep '^  deferred requests' <<<"$show")
echo "  $thr_ms"
q() { pg_q "$1" -v bid="$bid"; }

# ---- guarding: 2 % of the upstream's replies take 300 ms ----
# (far over the threshold learnt: on a loaded machine a stall in training can raise it to 100 ms).
# No threshold under 10 ms (SM_GUARD_MIN_THRESHOLD_US): a quiet training learns about 1 ms, which a
# fast reply of the sanitizer build on two busy cores (the guard's shipping, sm-ingest and
# PostgreSQL beside it) exceeded one time in twelve; fast and slow are told apart by far more
SM_GUARD_MIN_THRESHOLD_US=10000 SM_GUARD_REPORTS_PER_MIN=100000 guarded async
mix=$("$GT" client "$PORT" 800 1 up:96,up=300:2,fast:2) || t_fail "guarded load"
# then, while slow replies are in flight, another client's requests that the proxy serves at once
# but slowly (12 ms of CPU in spin_cpu): unit violations of their own, sampled. Not beside the fast
# replies: a reply that waits for a spin of the loop is rightly over its threshold
(for _ in $(seq 1 25); do "$GT" client "$PORT" 4 1 spin=12:1 >/dev/null; sleep 0.15; done) &
SPIN=$!
mix2=$("$GT" client "$PORT" 12 1 up=300:1) || t_fail "guarded load beside the spins"
wait "$SPIN"
stop_proxy
mix=$(printf '%s\n%s\n' "$mix" "$mix2")
slow=$(awk '$1 == "up" && NF == 4 && $2 == 300 {n += $3} END {print n + 0}' <<<"$mix")
fast=$(awk '$1 == "up" && NF == 3 {n += $2} END {print n + 0}' <<<"$mix")
echo "guarded: $slow slow upstream replies, $fast fast ones"
A="labels->>'run' = 'async' AND role = 'violation' AND labels->>'unit.async' = '1'"
echo "deferred-request streams: $(q "SELECT count(*) FROM streams WHERE $A")"
# the [async wait]: on the symptom thread, the stack at the proxy's read of the reply, as long as the
# upstream's 300 ms (from the connect to the read: the sleep plus a connect, a send and a wake-up,
# and a spin of the loop it may wait behind)
W="e.tid = s.symptom_tid AND e.kind = 'w' AND k.frame_ids[cardinality(k.frame_ids)] =
	(SELECT id FROM frames WHERE name = '[async wait]')"
waits=$(stream_events "s.labels->>'run' = 'async' AND s.labels->>'unit.async' = '1' AND $W")
echo "$waits" | awk '{print $3}' | sort -n | awk '{v[NR] = $1} END {if (NR) print "  async waits: " NR ", " v[1] / 1e6 " to " v[NR] / 1e6 " ms"}'
n=$(grep -c '^w [0-9]* [0-9]* 0 .*guardtest!run_proxy;guardtest!read_upstream;libc\.so\.6!read;\[async wait\]$' <<<"$waits")
long=$(awk '$3 >= 300000000 && $3 < 345000000' <<<"$waits" | wc -l)
t_eq "each slow reply is a violation stream with an [async wait] under the upstream's read" \
	"$(q "SELECT count(DISTINCT s.id) FROM streams s JOIN events e ON e.stream_ref = s.id JOIN stacks k ON k.id = e.stack_id
	       WHERE s.$A AND $W AND e.dur_ns BETWEEN 300000000 AND 345000000")" "$slow"
t_eq "the wait's stack: the proxy's loop, its read of the reply, [async wait]" "$n" "$(grep -c . <<<"$waits")"
t_eq "lasting the upstream's 300 ms (300 to 345 ms)" "$long" "$slow"
fp=$(q "SELECT count(*) FROM streams WHERE $A")
echo "fast replies reported: $((fp - slow)) of $fast"
# (the threshold is 1 ms or more: a loaded machine's stalls make a few per cent of them slower)
t_eq "fast replies are hardly reported (under 5 % of them)" "$(( (fp - slow) * 20 < fast ))" 1
t_eq "the stream's symptom spans the request: unit.type async, its threshold learnt, duration over it" \
	"$(q "SELECT count(*) FROM streams WHERE $A AND symptom_unit_type = 'async' AND labels->>'unit.type' = 'async'
	       AND symptom_threshold_ns >= 1000000 AND symptom_threshold_ns::text = labels->>'unit.threshold_ns'
	       AND (labels->>'unit.duration_ns')::bigint > symptom_threshold_ns
	       AND symptom_end_ns - symptom_start_ns = (labels->>'unit.duration_ns')::bigint
	       AND labels->>'unit.loop' = 'guardtest!run_proxy' AND symptom_tid = $GPID")" "$fp"
t_eq "a slow request's duration holds its upstream's wait, and its window the wait" \
	"$(q "SELECT count(DISTINCT s.id) FROM streams s JOIN events e ON e.stream_ref = s.id JOIN stacks k ON k.id = e.stack_id
	       WHERE s.$A AND $W AND e.dur_ns >= 300000000 AND (s.labels->>'unit.duration_ns')::bigint >= e.dur_ns
	       AND e.ts_ns >= s.symptom_start_ns AND e.ts_ns + e.dur_ns <= s.symptom_end_ns")" "$slow"
# a deferred request's stream holds the events recorded while the proxy worked for its client, not those
# of the requests the loop served meanwhile (the spins: they are in their own streams)
spin_in() { q "SELECT count(DISTINCT s.id) FROM streams s JOIN events e ON e.stream_ref = s.id JOIN stacks k ON
	k.id = e.stack_id WHERE s.labels->>'run' = 'async' AND $1 AND
	(SELECT id FROM frames WHERE name = 'guardtest!spin_cpu') = ANY (k.frame_ids)"; }
echo "streams with spin_cpu's events: $(spin_in "s.labels->>'unit.async' IS NULL") of units, $(spin_in "s.labels->>'unit.async' = '1'") of deferred requests"
t_match "the spins are sampled in their own units' streams" "$(spin_in "s.labels->>'unit.async' IS NULL")" '^[1-9][0-9]*$'
t_eq "a deferred request's stream holds none of them: only its own events" \
	"$(spin_in "s.labels->>'unit.async' = '1'")" 0
# nor does a unit's stream hold the [async wait] of a request in flight meanwhile
t_eq "no unit's stream holds an [async wait]: the loop never blocked in one" \
	"$(q "SELECT count(DISTINCT s.id) FROM streams s JOIN events e ON e.stream_ref = s.id JOIN stacks k ON
	       k.id = e.stack_id WHERE s.labels->>'run' = 'async' AND s.labels->>'unit.async' IS NULL AND
	       (SELECT id FROM frames WHERE name = '[async wait]') = ANY (k.frame_ids)")" 0
line=$(grep 'msg="exit".* exe=guardtest ' "$T_TMP/guard.log" | tail -n 1)
t_eq "the agent counts them as violations" "$(sed -n 's/.* violations=\([0-9]*\).*/\1/p' <<<"$line")" \
	"$(q "SELECT count(*) FROM streams WHERE labels->>'run' = 'async' AND role = 'violation'")"
t_eq "and as deferred-request violations, of every forwarded request" \
	"$(sed -n 's/.* async_requests=\([0-9]*\) async_violations=\([0-9]*\).*/\1 \2/p' <<<"$line")" \
	"$(awk '$1 == "up" {n += NF == 4 ? $3 : $2} END {print n}' <<<"$mix") $fp"

# mined with default settings: the upstream's wait is the run's costliest cluster
run=$("$BIN/sm-miner" run --quiet --app guardtest --label run=async 2>"$T_TMP/miner.err") ||
	t_fail "sm-miner run" "$(cat "$T_TMP/miner.err")"
top=$(pg_q "SELECT (SELECT string_agg(f.name, ' > ' ORDER BY u.ord) FROM patterns p, unnest(p.frame_ids) WITH ORDINALITY u(fid, ord),
	       frames f WHERE p.id = c.medoid AND f.id = u.fid) FROM clusters c WHERE c.run_id = :'run'
	       ORDER BY c.total_cost_ns DESC LIMIT 1" -v run="$run")
echo "top cluster: $top"
t_match "mined, the top cluster is the upstream's wait" "$top" '\[async wait\]$'

# ---- SM_GUARD_ASYNC=0: units only ----
SM_GUARD_ASYNC=0 SM_GUARD_REPORTS_PER_MIN=100000 guarded async-off
"$GT" client "$PORT" 200 1 up:95,up=300:5 >/dev/null || t_fail "load without deferred requests"
stop_proxy
t_eq "SM_GUARD_ASYNC=0: no deferred-request stream, no [async wait]" \
	"$(q "SELECT count(*) FROM streams s WHERE labels->>'run' = 'async-off' AND (labels->>'unit.async' = '1' OR EXISTS (
	       SELECT 1 FROM events e JOIN stacks k ON k.id = e.stack_id WHERE e.stream_ref = s.id AND
	       (SELECT id FROM frames WHERE name = '[async wait]') = ANY (k.frame_ids)))")" 0

stop_ingest
t_done
