#!/usr/bin/env bash
# Slowness that is the machine's, not the code's (docs/guard.md "CPU starvation"): a guarded server
# whose units do a fixed amount of CPU work, made slow by busy processes on the same CPU (taskset) and
# by a cgroup's CPU limit; a control server doing the same work alone at a real-time priority (nothing
# takes its CPU: its units are slow for their own reasons). Stored rows: run delay, cause, the
# [cpu run queue] / [cgroup throttled] events, the host's load and CPUs; mined, the run queue is one
# cluster listing both starved hosts. The same through the host's collector: starved units, starved
# units still in flight (hangs, in the process too), and the cgroup's throttled time (of a hang too).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../guard_lib.sh"

N=12          # slow requests per server
WORK_MS=10    # CPU time of each (cpu_work)
BUSY=3        # busy processes beside the starved server on its CPU

sm_admin migrate >/dev/null || t_bail "migrate"
TOKEN=$(mk_token ingest 2>/dev/null)
printf '%s\n' "$TOKEN" >"$T_TMP/token"
AN=$(mk_token analyst 2>/dev/null)
start_ingest || t_bail "sm-ingest starts"
q() { pg_q "$1"; }

# serve PORT PREFIX...: runs guardtest epoll under the agent (PREFIX: taskset, chrt, env; TRAIN=--train
# to learn) as GPID
TRAIN=
serve() {
	local port=$1 out=$T_TMP/server-$1.out
	rm -f "$out"
	shift
	"$@" "$GUARD" run $TRAIN --profile-dir "$PROF" --log "$T_TMP/guard.log" --url "$INGEST_URL" \
		--token-file "$T_TMP/token" -- "$GT" epoll "$port" >"$out" 2>&1 &
	GPID=$!
	gt_ready "$out" server || t_done
}
# shipped WHERE COUNT: waits (at most 60 s) until at least COUNT violation streams matching WHERE are
# stored and no more came for a second: a server stopped earlier would leave its queue unsent (exit
# never waits on the network)
shipped() {
	local n last=-1 same=0
	for _ in $(seq 1 600); do
		n=$(pg_q "SELECT count(*) FROM streams s WHERE role = 'violation' AND $1")
		if [ "$n" -ge "$2" ]; then
			[ "$n" = "$last" ] && same=$((same + 1)) || same=0
			[ "$same" -ge 10 ] && return 0
		fi
		last=$n
		sleep 0.1
	done
	t_fail "streams shipped: $1" "$n, fewer than $2 or still coming after 60 s"
}

# ---- training, on a quiet CPU ----
PORT=$(free_port)
TRAIN=--train serve "$PORT" env
"$GT" client "$PORT" 5000 2 fast:80,file:20 >/dev/null || t_fail "training load"
gt_stop "$PORT"

# the cpu_work units: not a sleep, and at least WORK_MS long (their CPU time alone). Their stack may
# not show cpu_work (a unit found slow at its first call, and no CPU sample in it), so: by what they are not.
# Under starvation another unit may be this slow too (an accept waiting for the CPU): it is starved as well.
work="(NOT EXISTS (SELECT 1 FROM events e JOIN stacks k ON k.id = e.stack_id WHERE e.stream_ref = s.id AND
	(SELECT id FROM frames WHERE name = 'guardtest!handle_sleep') = ANY(k.frame_ids))
	AND (s.labels->>'unit.duration_ns')::bigint >= $WORK_MS * 1000000)"
# the figures of the run delay: of the cpu_work units but those that began before the watchdog first
# looked at the server's thread (they have none: docs/guard.md, "CPU starvation"; starved, the first
# units may be this slow), known as the ones without a run delay that began before the first unit with one
measured="($work AND (s.labels ? 'unit.run_delay_window' OR s.symptom_start_ns > (SELECT min(x.symptom_start_ns)
	FROM streams x WHERE x.app = s.app AND x.host = s.host AND x.labels ? 'unit.run_delay_window')))"
rd="(s.labels->>'unit.run_delay_ns')::bigint"

# ---- starved: BUSY processes on CPU 0 with the server, at a higher priority (nice -5: the server
# gets about a tenth of the CPU, so that its run delay dominates even where a hypervisor takes time
# that neither the run delay nor the CPU time counts); the client on CPU 1 ----
busy=()
declare -A sent
for _ in $(seq 1 "$BUSY"); do
	nice -n -5 taskset -c 0 sh -c 'while :; do :; done' &
	busy+=($!)
done
t_cleanup "kill ${busy[*]} 2>/dev/null; true"
for host in starve-a starve-b; do
	PORT=$(free_port)
	serve "$PORT" env SM_GUARD_HOST=$host SM_GUARD_APP=starved SM_GUARD_REPORTS_PER_MIN=100000 taskset -c 0
	# a few sleeps: a normal code path's waits beside the run queue's (long enough to be a problem of the code)
	mix=$(taskset -c 1 "$GT" client "$PORT" $((N + 4)) 1 "cpu=$WORK_MS:$N,sleep=60:4") || t_fail "starved load ($host)"
	sent[$host]=$(awk '$1 == "cpu" {print $3}' <<<"$mix")
	shipped "host = '$host' AND $work" "${sent[$host]:-1}"
	gt_stop "$PORT"
done
# the same with the host's collector, whose watchdog takes the threads' run delays (the process has no
# thread of the agent's); it ships a process's violations when their minute closes or the process ends
CDIR=$T_TMP/collector
collector_start "$CDIR" "$T_TMP/collector.log" --spool "$T_TMP/cspool" --report-s 0 --tick-ms 20
PORT=$(free_port)
serve "$PORT" env SM_GUARD_HOST=starve-h SM_GUARD_APP=starvedh SM_GUARD_REPORTS_PER_MIN=100000 \
	SM_GUARD_COLLECTOR=host SM_GUARD_COLLECTOR_DIR="$CDIR" taskset -c 0
t_match "with the host's collector: the server is guarded through it" \
	"$(grep "pid=$GPID " "$T_TMP/guard.log" | grep 'msg="guarding"')" 'collector=host'
mix=$(taskset -c 1 "$GT" client "$PORT" $((N + 4)) 1 "cpu=$WORK_MS:$N,sleep=60:4") || t_fail "starved load (collector)"
sent[starve-h]=$(awk '$1 == "cpu" {print $3}' <<<"$mix")
gt_stop "$PORT"
shipped "host = 'starve-h' AND $work" "${sent[starve-h]:-1}"
# units still in flight long after their start (hangs), shipped as they stand by the collector
# (app starvedhang) and by the process's own watchdog (starvedhangp): with the run delay of their
# thread so far. One hangs in a sleep after its CPU work; the other still computes, starved, with
# few CPU samples if any (they come with its CPU time): its wait for the CPU is in its stream anyway.
for app in starvedhang starvedhangp; do
	mode=host
	[ "$app" = starvedhangp ] && mode=process
	PORT=$(free_port)
	serve "$PORT" env SM_GUARD_HOST=starve-h SM_GUARD_APP=$app SM_GUARD_REPORTS_PER_MIN=100000 \
		SM_GUARD_HANG_MS=1500 SM_GUARD_COLLECTOR=$mode SM_GUARD_COLLECTOR_DIR="$CDIR" taskset -c 0
	taskset -c 1 "$GT" client "$PORT" 2 1 fast:1 >/dev/null || t_fail "starved load ($app)"
	taskset -c 1 "$GT" client "$PORT" 1 1 "stall=$((5 * WORK_MS)):1" >/dev/null || t_fail "starved stall ($app)"
	taskset -c 1 "$GT" client "$PORT" 1 1 "cpu=$((30 * WORK_MS)):1" >/dev/null || t_fail "starved hang in cpu_work ($app)"
	inflight="app = '$app' AND s.labels->>'unit.state' = 'in_flight'"
	if [ "$mode" = process ]; then
		shipped "$inflight" 2
		gt_stop "$PORT"
	else
		gt_stop "$PORT"
		shipped "$inflight" 2
	fi
done
# where a stream's symptom thread was: in handle_sleep, or in cpu_work
in_fn() {
	echo "EXISTS (SELECT 1 FROM events e JOIN stacks k ON k.id = e.stack_id WHERE e.stream_ref = s.id AND
		e.tid = s.symptom_tid AND (SELECT id FROM frames WHERE name = 'guardtest!$1') = ANY(k.frame_ids))"
}
q "SELECT s.app, s.labels->>'unit.duration_ns', $rd, s.labels->>'unit.run_delay_window', $(in_fn cpu_work)
	FROM streams s WHERE s.app IN ('starvedhang', 'starvedhangp') AND s.labels->>'unit.state' = 'in_flight'
	ORDER BY 1, 2" | sed 's/^/  hang | /'
t_eq "starved units in flight (one asleep, one computing): shipped with their run delay so far and a [cpu run queue] wait, by the collector and in the process (one in handle_sleep)" \
	"$(q "SELECT s.app, count(*), count(*) FILTER (WHERE $rd >= $WORK_MS * 1000000
	       AND $rd <= (s.labels->>'unit.duration_ns')::bigint AND EXISTS (SELECT 1 FROM events e JOIN stacks k ON k.id = e.stack_id
	         WHERE e.stream_ref = s.id AND e.kind = 'w' AND e.tid = s.symptom_tid
	         AND k.frame_ids = ARRAY[(SELECT id FROM frames WHERE name = '[cpu run queue]')]::int[])),
	       count(*) FILTER (WHERE $(in_fn handle_sleep)), count(*) FILTER (WHERE NOT $(in_fn handle_sleep))
	       FROM streams s WHERE s.app IN ('starvedhang', 'starvedhangp') AND s.labels->>'unit.state' = 'in_flight'
	       GROUP BY 1 ORDER BY 1")" "starvedhang|2|2|1|1
starvedhangp|2|2|1|1"
kill "${busy[@]}" 2>/dev/null
wait "${busy[@]}" 2>/dev/null

# ---- the control: the same work, alone at a real-time priority (no one takes its CPU) ----
PORT=$(free_port)
serve "$PORT" env SM_GUARD_HOST=calm SM_GUARD_APP=calm SM_GUARD_REPORTS_PER_MIN=100000 chrt -f 10
"$GT" client "$PORT" "$N" 1 "cpu=$((2 * WORK_MS)):1" >/dev/null || t_fail "control load"
shipped "host = 'calm' AND $work" "$N"
gt_stop "$PORT"

echo "starved units (duration, threshold, run delay, window, cause):"
q "SELECT s.host, s.labels->>'unit.duration_ns', s.labels->>'unit.threshold_ns', $rd, s.labels->>'unit.run_delay_window',
	coalesce(s.labels->>'unit.cause', '-') FROM streams s WHERE s.app IN ('starved', 'calm') AND s.role = 'violation'
	AND $work ORDER BY s.app, s.host, s.symptom_start_ns" | sed 's/^/  | /'
echo "cpu_work requests sent: ${sent[starve-a]} to starve-a, ${sent[starve-b]} to starve-b"
# a starved unit that waited less than its work for the CPU: what else it waited for (its events)
q "SELECT s.host, s.id, e.kind, e.tid = s.symptom_tid, e.dur_ns / 1000000, (SELECT string_agg(f.name, '<' ORDER BY i DESC)
	FROM unnest(k.frame_ids[greatest(1, cardinality(k.frame_ids) - 3):]) WITH ORDINALITY u(fid, i) JOIN frames f ON f.id = u.fid)
	FROM streams s JOIN events e ON e.stream_ref = s.id JOIN stacks k ON k.id = e.stack_id
	WHERE s.app = 'starved' AND s.role = 'violation' AND $work AND $rd < $WORK_MS * 1000000
	AND e.ts_ns < s.symptom_end_ns AND e.ts_ns + e.dur_ns > s.symptom_start_ns ORDER BY s.id, e.ts_ns" | sed 's/^/  short | /'

t_eq "with the host's collector: every starved cpu_work request is a violation stream, its CPU wait measured within the unit (most at least its work), with its [cpu run queue] wait" \
	"$(q "SELECT count(*) >= ${sent[starve-h]:-0},
	       count(*) FILTER (WHERE $measured AND $rd > 0 AND $rd <= (s.labels->>'unit.duration_ns')::bigint + 5000000) =
	       count(*) FILTER (WHERE $measured),
	       2 * count(*) FILTER (WHERE $measured AND $rd >= $WORK_MS * 1000000) >= count(*) FILTER (WHERE $measured),
	       count(*) FILTER (WHERE $measured) >= ${sent[starve-h]:-0} / 2,
	       count(*) FILTER (WHERE $measured AND EXISTS (SELECT 1 FROM events e JOIN stacks k ON k.id = e.stack_id
	         WHERE e.stream_ref = s.id AND e.kind = 'w' AND e.tid = s.symptom_tid
	         AND k.frame_ids = ARRAY[(SELECT id FROM frames WHERE name = '[cpu run queue]')]::int[])) = count(*) FILTER (WHERE $measured)
	       FROM streams s WHERE app = 'starvedh' AND role = 'violation' AND $work")" "t|t|t|t|t"
t_eq "every starved cpu_work request is a violation stream" \
	"$(q "SELECT host, count(*) >= CASE host WHEN 'starve-a' THEN ${sent[starve-a]:-0} ELSE ${sent[starve-b]:-0} END
	       FROM streams s WHERE app = 'starved' AND role = 'violation' AND $work GROUP BY 1 ORDER BY 1")" "starve-a|t
starve-b|t"
nwork=$(q "SELECT count(*) FROM streams s WHERE app = 'starved' AND role = 'violation' AND $measured")
# BUSY spinners at nice -5 share CPU 0 with the server: of each unit's wall time it runs about a tenth,
# so a unit of WORK_MS of CPU waits about 9 x WORK_MS for the CPU. Not every one: a thread waking from a long
# sleep is placed ahead by the scheduler, and a virtual machine's hypervisor takes CPU time the guest
# never sees (no steal in /proc/stat), so the bound WORK_MS holds for most units, not all; what holds
# for all is that the delay is measured, within the unit, and that the label follows the rule exactly
t_eq "each starved unit's CPU wait measured (unit.run_delay_ns), within the unit; most waited at least their work" \
	"$(q "SELECT host, count(*) FILTER (WHERE $rd > 0 AND $rd <= (s.labels->>'unit.duration_ns')::bigint + 5000000) = count(*),
	       2 * count(*) FILTER (WHERE $rd >= $WORK_MS * 1000000) >= count(*)
	       FROM streams s WHERE app = 'starved' AND role = 'violation' AND $measured GROUP BY 1 ORDER BY 1")" "starve-a|t|t
starve-b|t|t"
t_eq "unit.cause=cpu exactly where the run delay is at least half the excess over the threshold" \
	"$(q "SELECT count(*) FROM streams s WHERE app = 'starved' AND role = 'violation' AND $measured AND
	       (s.labels->>'unit.cause' IS NOT DISTINCT FROM 'cpu') = (2 * $rd >= (s.labels->>'unit.duration_ns')::bigint -
	       (s.labels->>'unit.threshold_ns')::bigint)")" "$nwork"
t_eq "most starved units are labelled unit.cause=cpu" \
	"$(q "SELECT host, 2 * count(*) FILTER (WHERE s.labels->>'unit.cause' = 'cpu') >= count(*) FROM streams s
	       WHERE app = 'starved' AND role = 'violation' AND $work GROUP BY 1 ORDER BY 1")" "starve-a|t
starve-b|t"
# (the run delay as for the starved units: of those that began once the watchdog had looked at the
# server's thread; in one CI run the first 4 of 12 had begun before)
t_eq "the control's units: violations, their run delay measured, not unit.cause=cpu" \
	"$(q "SELECT count(*), count(*) FILTER (WHERE $measured AND s.labels ? 'unit.run_delay_ns') =
	       count(*) FILTER (WHERE $measured), 2 * count(*) FILTER (WHERE $measured) >= count(*),
	       count(*) FILTER (WHERE s.labels->>'unit.cause' = 'cpu') FROM streams s WHERE app = 'calm' AND
	       role = 'violation' AND $work")" "$N|t|t|0"
# a unit over its threshold is sampled at SM_GUARD_VIOLATION_HZ (1000) for the rest of it: 20 ms of CPU
# make one sample at 10 ms (100 a second), then shorter ones (a CPU-time timer fires at the kernel's tick,
# 4 ms at 250 Hz: a sample stands for the ticks' milliseconds); the samples add up to its CPU time, give
# or take a period (the first may hold CPU time from before the unit, the end's is not sampled). Not
# every unit: the timer runs on from the unit before, and a unit whose first sample came before its
# threshold and second one late in it has no time left for a short one
ctl="SELECT count(*) FILTER (WHERE e.dur_ns < 10000000) short, sum(e.dur_ns) / 1000000 ms, string_agg((e.dur_ns / 1000000)::text, ' ' ORDER BY e.ts_ns) samples
	FROM streams s JOIN events e ON e.stream_ref = s.id WHERE s.app = 'calm' AND s.role = 'violation' AND $work
	AND e.kind = 'r' AND e.tid = s.symptom_tid AND e.dur_ns > 0 AND e.ts_ns < s.symptom_end_ns
	AND e.ts_ns + e.dur_ns > s.symptom_start_ns GROUP BY s.id"
q "$ctl" | sed 's/^/  control unit: short samples, ms, samples (ms): /'
t_eq "the control's units: most sampled more often once over their threshold, each one's samples adding up to its CPU time" \
	"$(q "SELECT 2 * count(*) FILTER (WHERE short >= 1) >= count(*), count(*) FILTER (WHERE ms BETWEEN 10 AND 30) FROM ($ctl) x")" "t|$N"
# the run queue's event: on the symptom thread, inside the symptom window, its duration the label's
# (no cgroup limit here: nothing of it is throttled time)
t_eq "each starved unit has a [cpu run queue] wait of its run delay, inside the unit" \
	"$(q "SELECT count(*) FROM streams s JOIN events e ON e.stream_ref = s.id JOIN stacks k ON k.id = e.stack_id
	       WHERE s.app = 'starved' AND $measured AND e.kind = 'w' AND e.tid = s.symptom_tid
	       AND k.frame_ids = ARRAY[(SELECT id FROM frames WHERE name = '[cpu run queue]')]::int[]
	       AND e.dur_ns = $rd - coalesce((s.labels->>'unit.throttled_ns')::bigint, 0)
	       AND e.ts_ns >= s.symptom_start_ns AND e.ts_ns + e.dur_ns <= s.symptom_end_ns")" "$nwork"
t_eq "the host's CPUs and load on every stream" \
	"$(q "SELECT DISTINCT labels->>'host.cpus', labels->>'host.load1' ~ '^[0-9]+\.[0-9]+\$' FROM streams
	       WHERE app IN ('starved', 'calm')")" "$(getconf _NPROCESSORS_ONLN)|t"

# ---- mined: the run queue is one cluster, with both starved hosts ----
run=$("$BIN/sm-miner" run --quiet --app starved --kind wait --aoi waitgraph --threshold-fraction 0.1 \
	2>"$T_TMP/miner.err") || t_bail "sm-miner run" "$(cat "$T_TMP/miner.err")"
clu=$(q "SELECT string_agg(c.id::text, ',') FROM clusters c WHERE c.run_id = $run AND
	c.common_frame_ids = ARRAY[(SELECT id FROM frames WHERE name = '[cpu run queue]')]::int[]")
t_match "one cluster whose common part is [cpu run queue]" "$clu" '^[0-9]+$'
t_eq "and no other cluster has the run queue's frame" \
	"$(q "SELECT count(*) FROM clusters c WHERE c.run_id = $run AND c.id <> ${clu:-0} AND
	       (SELECT id FROM frames WHERE name = '[cpu run queue]') = ANY(c.common_frame_ids)")" 0
t_eq "its problem is the machine's, ranked after every problem of the code" \
	"$(q "SELECT p.cause, p.rank > ALL (SELECT o.rank FROM problems o WHERE o.run_id = $run AND o.cause = 'code')
	       FROM problems p JOIN clusters c ON c.problem_id = p.id WHERE c.id = ${clu:-0}")" "cpu|t"
t_match "and the code's problems are there too" "$(q "SELECT count(*) FROM problems WHERE run_id = $run AND cause = 'code'")" '^[1-9][0-9]*$'
start_web || t_bail "sm-web starts"
http GET "$WEB_URL/api/v1/clusters/$clu" -H "Authorization: Bearer $AN"
t_eq "the cluster's API lists both hosts" "$HTTP_STATUS $(printf '%s' "$HTTP_BODY" | python3 -c '
import json, sys
j = json.load(sys.stdin)
print(sorted(r["value"] for r in j["by_host"]))' 2>&1)" "200 ['starve-a', 'starve-b']"
http GET "$WEB_URL/clusters/$clu" -H "Authorization: Bearer $AN"
t_eq "and its page, by host" \
	"$HTTP_STATUS $(grep -c '<td>starve-a</td>' <<<"$HTTP_BODY" | sed 's/^[1-9][0-9]*$/a/') $(grep -c '<td>starve-b</td>' <<<"$HTTP_BODY" | sed 's/^[1-9][0-9]*$/b/') $(grep -c 'cpu run queue' <<<"$HTTP_BODY" | sed 's/^[1-9][0-9]*$/named/')" \
	"200 a b named"
http GET "$WEB_URL/runs/$run" -H "Authorization: Bearer $AN"
t_eq "the run page says which problem is the machine's" "$HTTP_STATUS $(grep -o 'The machine, not the code' <<<"$HTTP_BODY" | wc -l)" "200 1"
stop_web

# ---- a cgroup's CPU limit: 10 ms per 100 ms ----
# cgroup v2 with the cpu controller, else v1's cpu hierarchy (a hybrid host binds cpu to v1)
cgdir=
v2=$(awk '$9 == "cgroup2" {print $5; exit}' /proc/self/mountinfo)
v1=$(awk '$9 == "cgroup" && $0 ~ /[ ,]cpu(,|$)/ {print $5; exit}' /proc/self/mountinfo)
if [ -n "$v2" ] && grep -qw cpu "$v2/cgroup.controllers" 2>/dev/null; then
	grep -qw cpu "$v2/cgroup.subtree_control" || echo +cpu >"$v2/cgroup.subtree_control" 2>/dev/null
	cgdir=$v2/sm-starve-$$
	mkdir "$cgdir" 2>/dev/null && echo "10000 100000" >"$cgdir/cpu.max" 2>/dev/null || cgdir=
elif [ -n "$v1" ]; then
	cgdir=$v1/sm-starve-$$
	mkdir "$cgdir" 2>/dev/null && echo 100000 >"$cgdir/cpu.cfs_period_us" && echo 10000 >"$cgdir/cpu.cfs_quota_us" ||
		cgdir=
fi
if [ -z "$cgdir" ]; then
	t_ok "SKIP cgroup throttling: no writable cgroup with the cpu controller (v2: ${v2:-none}, v1: ${v1:-none})"
else
	t_cleanup "rmdir $cgdir 2>/dev/null; true"
	echo "cgroup: $cgdir"
	# the server (and its agent) in the cgroup from its start; guarded in the process (app tight), then
	# through the host's collector (tighth): there, the program's own thread takes the throttled time's
	# samples at a unit's start, and ships when it ends
	for app in tight tighth; do
		mode=process
		[ "$app" = tighth ] && mode=host
		PORT=$(free_port)
		serve "$PORT" env SM_GUARD_HOST=$app SM_GUARD_APP=$app SM_GUARD_REPORTS_PER_MIN=100000 SM_GUARD_HANG_MS=1500 \
			SM_GUARD_COLLECTOR=$mode SM_GUARD_COLLECTOR_DIR="$CDIR" sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$cgdir"
		# a first unit starts the watchdog, which finds the limit and keeps the throttled time's history
		"$GT" client "$PORT" 5 1 fast:1 >/dev/null
		sleep 0.5
		"$GT" client "$PORT" 4 1 "cpu=30:1" >/dev/null || t_fail "throttled load ($app)"
		# and a hang: 300 ms of CPU take 3 s at the limit, shipped in flight at 1.5 s
		"$GT" client "$PORT" 1 1 "cpu=300:1" >/dev/null || t_fail "throttled hang ($app)"
		long="app = '$app' AND (s.labels->>'unit.duration_ns')::bigint >= 100000000"
		if [ "$mode" = process ]; then
			shipped "$long" 5
			gt_stop "$PORT"
		else
			gt_stop "$PORT"
			shipped "$long" 5
		fi
	done
	thr="(s.labels->>'unit.throttled_ns')::bigint"
	ended="coalesce(s.labels->>'unit.state', '') <> 'in_flight'"
	# the four cpu=30 units, by the time they were not throttled: their 30 ms of CPU run outside it
	# (29 to 44 ms seen; a unit may take from 135 ms to 390 ms). A short unit that begins in a period
	# already spent is throttled for all of its few tens of ms and may be shipped too (one of 47 ms,
	# one of 76 ms throttled for 75.6 ms, under 1 ms unthrottled): right, but not one of these. The
	# bound lies between, away from both (the throttled time is interpolated at the unit's start).
	cpu30="(s.labels->>'unit.duration_ns')::bigint - $thr >= 12000000"
	q "SELECT s.app, s.labels->>'unit.duration_ns', $rd, $thr, s.labels->>'host.cpu_limit', coalesce(s.labels->>'unit.cause', '-'),
		coalesce(s.labels->>'unit.state', '-')
		FROM streams s WHERE app IN ('tight', 'tighth') AND role = 'violation' AND $work ORDER BY 1" | sed 's/^/  | /'
	# the cgroup's counter sums each CPU's throttled run queue (the agent's threads are in the cgroup too):
	# 208 ms of a 210 ms unit whose own run delay was 188 ms was seen before the thread's delay bounded it
	t_eq "the throttled time is the thread's: never more than its run delay" \
		"$(q "SELECT count(*) FILTER (WHERE $thr > $rd), count(*) FILTER (WHERE $thr > 0) > 0 FROM streams s
		       WHERE app IN ('tight', 'tighth') AND s.labels ? 'unit.run_delay_ns'")" "0|t"
	# 30 ms of CPU at 10 ms per 100 ms period spans at least two period boundaries: throttled for one
	# period's 90 ms at least; the start's value is interpolated between the watchdog's samples (100 ms
	# apart, the cgroup itself throttling the watchdog), so the bound is 60 ms; but one of the four may be
	# throttled less (144 ms with 46 ms throttled, in one run of nine): three of them at least.
	# unit.cause=cpu as the rule says (docs/guard.md), not for every one of them: a unit that ran much of
	# its length between throttled periods (269 ms with 105 ms throttled, in one run) is not starved
	# enough for it
	t_eq "throttled units, in the process and through the collector: unit.throttled_ns over 60 ms, the limit, cause=cpu where the rule says, for most" \
		"$(q "SELECT app, count(*) >= 3, count(*) FILTER (WHERE (s.labels->>'unit.cause' IS NOT DISTINCT FROM 'cpu') =
		       (2 * (coalesce($rd, $thr) + coalesce((s.labels->>'unit.steal_ns')::bigint, 0)) >=
		        (s.labels->>'unit.duration_ns')::bigint - (s.labels->>'unit.threshold_ns')::bigint)) = count(*),
		       2 * count(*) FILTER (WHERE s.labels->>'unit.cause' = 'cpu') >= count(*)
		       FROM streams s WHERE app IN ('tight', 'tighth') AND role = 'violation' AND $work AND
		       $ended AND $cpu30 AND $thr > 60000000 AND $thr <= (s.labels->>'unit.duration_ns')::bigint + 1000000
		       AND s.labels->>'host.cpu_limit' = '0.1' GROUP BY 1 ORDER BY 1")" "tight|t|t|t
tighth|t|t|t"
	t_eq "each has a [cgroup throttled] wait of the throttled time (the run queue's wait the rest)" \
		"$(q "SELECT s.app, count(*) >= 3, count(*) FILTER (WHERE NOT EXISTS (SELECT 1 FROM events e JOIN stacks k ON k.id = e.stack_id
		         WHERE e.stream_ref = s.id AND e.kind = 'w' AND e.tid = s.symptom_tid
		         AND k.frame_ids = ARRAY[(SELECT id FROM frames WHERE name = '[cgroup throttled]')]::int[]
		         AND e.dur_ns = least($thr, $rd)))
		       FROM streams s WHERE s.app IN ('tight', 'tighth') AND role = 'violation' AND $work AND $ended AND $cpu30
		       AND $thr > 60000000 GROUP BY 1 ORDER BY 1")" "tight|t|0
tighth|t|0"
	# the hang: 1.5 s at a tenth of a CPU is throttled for about 1.35 s; the bound leaves the start's
	# interpolation and the sanitizers' slowness room. Through the collector, its own history of the
	# cgroup (the process's is in the process) gives the figure.
	t_eq "a throttled unit in flight, in the process and through the collector: unit.throttled_ns over 600 ms, a [cgroup throttled] wait" \
		"$(q "SELECT s.app, count(*) FROM streams s WHERE s.app IN ('tight', 'tighth') AND NOT $ended
		       AND $thr > 600000000 AND $thr <= (s.labels->>'unit.duration_ns')::bigint
		       AND s.labels->>'host.cpu_limit' = '0.1' AND EXISTS (SELECT 1 FROM events e JOIN stacks k ON k.id = e.stack_id
		         WHERE e.stream_ref = s.id AND e.kind = 'w' AND e.tid = s.symptom_tid
		         AND k.frame_ids = ARRAY[(SELECT id FROM frames WHERE name = '[cgroup throttled]')]::int[])
		       GROUP BY 1 ORDER BY 1")" "tight|1
tighth|1"
	t_eq "no limit: no host.cpu_limit label, no throttled time" \
		"$(q "SELECT count(*) FILTER (WHERE labels ? 'host.cpu_limit'), count(*) FILTER (WHERE labels ? 'unit.throttled_ns')
		       FROM streams WHERE app IN ('starved', 'starvedh', 'calm')")" "0|0"
fi

# ---- the hypervisor's steal (/proc/stat's eighth column): labelled where the host counts it ----
# (its figures and events: test_guard's unit tests, with a /proc/stat of their own)
steal_ticks=$(awk '$1 == "cpu" { print $9; exit }' /proc/stat)
if [ "${steal_ticks:-0}" -gt 0 ]; then want='^(all|some) [1-9][0-9]*\|0$'; else want='^none [1-9][0-9]*\|0$'; fi
t_match "unit.steal_ns where the host has counted steal (here ${steal_ticks:-no} ticks), never more than the unit" \
	"$(q "SELECT CASE WHEN count(*) FILTER (WHERE labels ? 'unit.steal_ns') = 0 THEN 'none'
	               WHEN count(*) FILTER (WHERE NOT labels ? 'unit.steal_ns') = 0 THEN 'all' ELSE 'some' END
	          || ' ' || count(*) || '|' || count(*) FILTER (WHERE (labels->>'unit.steal_ns')::bigint >
	                                                       (labels->>'unit.duration_ns')::bigint)
	        FROM streams")" "$want"

stop_ingest
t_done
