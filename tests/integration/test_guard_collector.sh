#!/usr/bin/env bash
# The host's collector (sm-agent collect, docs/guard.md "The host's collector"): a guarded epoll
# server starts no thread of the agent's and leaves a region in the collector's directory; the
# collector watches its units, ships its violations (symbolized, labelled, through its budget) and a
# unit still in flight as it stands, reports the process with "collector": "host", and removes the
# region when the process ends, or at its own stop when the process ended just before; a hang's lock
# wait has its readier. The settings the server pushes (guarding off, a report limit, a new
# k) and the fleet's profile reach the process through the collector. Without a collector, auto
# guards in the process and host keeps the violations in the region's queue, bounded, until a
# collector starts. A forked child gets a region of its own. Regions that are not what they claim
# are refused and never signalled; one its process truncates does not take the collector down.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../guard_lib.sh"

sm_admin migrate >/dev/null || t_bail "migrate"
TOKEN=$(mk_token ingest 2>/dev/null)
printf '%s\n' "$TOKEN" >"$T_TMP/token"
start_ingest || t_bail "sm-ingest starts"
DIR=$T_TMP/collector
export SM_GUARD_COLLECTOR_DIR=$DIR

q() { pg_q "$1" -v bid="$bid"; }
wait_ready() { gt_ready "$T_TMP/server.out" server; }
start_collector() { collector_start "$DIR" "$T_TMP/collector.log" --spool "$T_TMP/cspool" --report-s 1 --tick-ms 20; }

# guarded SERVER_ARGS...: guardtest under the agent, as GPID
guarded() {
	rm -f "$T_TMP/server.out"
	"$GUARD" run --profile-dir "$PROF" --log "$T_TMP/guard.log" --url "$INGEST_URL" \
		--token-file "$T_TMP/token" --label run="$RUN" -- "$@" >"$T_TMP/server.out" 2>&1 &
	GPID=$!
	wait_ready
}

# the agent's threads in process $1 (smguard-watch, smguard-ship)
agent_threads() {
	cat /proc/"$1"/task/*/comm 2>/dev/null | grep -c '^smguard-'
}
# the guarded process's lines in the agent's log saying a collector is of another build
other_build_said() { grep "pid=$GPID " "$T_TMP/guard.log" | grep 'another build'; }
# its regions in the collector's directory, and the agent's threads in it: "REGIONS|THREADS"
regions_threads() { echo "$(ls "$DIR" | grep -c "^$GPID\." || true)|$(agent_threads "$GPID")"; }

# ---- train ----

PORT=$(free_port)
rm -f "$T_TMP/server.out"
"$GUARD" run --train --profile-dir "$PROF" --log "$T_TMP/guard.log" -- "$GT" epoll "$PORT" >"$T_TMP/server.out" 2>&1 &
GPID=$!
wait_ready
"$GT" client "$PORT" 20000 4 fast:80,file:20 >/dev/null || t_fail "training load"
gt_stop "$PORT"
bid=$(readelf -n "$GT" | sed -n 's/.*Build ID: //p')

# ---- with the collector ----

start_collector
t_eq "the collector's directory: every process may write, none list or remove another's" \
	"$(stat -c %a "$DIR")" 1733
out=$("$BIN/sm-agent" collect --dir "$DIR" --url "$INGEST_URL" 2>&1)
t_eq "one collector per directory" "$?|$out" "2|sm-agent: collect: $DIR/collector.lock: another collector runs here"
t_match "the running collector's stamp, the region layout it reads, kept by the one refused" \
	"$(cat "$DIR/collector.lock")" '^stackmine-collector magic=31474552474d53 layout=[0-9]+ slot=[0-9]+ threads=[0-9]+$'

RUN=host
SM_GUARD_REPORTS_PER_MIN=100000 SM_GUARD_HANG_MS=400 guarded "$GT" epoll "$PORT"
regions=$(ls "$DIR" | grep -c "^$GPID\.")
t_eq "the guarded process has a region in the collector's directory" "$regions" 1
t_match "and says so in its log" "$(grep "pid=$GPID " "$T_TMP/guard.log" | grep 'msg="guarding"')" 'collector=host'
mix=$("$GT" client "$PORT" 600 1 fast:96,sleep=60:2,spin=60:2) || t_fail "guarded load"
t_eq "no thread of the agent's in the guarded process" "$(agent_threads "$GPID")" 0
sleeps=$(awk '$1 == "sleep" {print $3}' <<<"$mix")
spins=$(awk '$1 == "spin" {print $3}' <<<"$mix")
# a unit in flight past SM_GUARD_HANG_MS: shipped as it stood then (at the end of its minute, as every
# violation the budget keeps)
"$GT" client "$PORT" 1 1 sleep=1500:1 >/dev/null
gt_stop "$PORT"
for _ in $(seq 1 150); do
	[ -z "$(ls "$DIR" | grep "^$GPID\.")" ] && break
	sleep 0.1
done
t_eq "the region is removed once the process ended and its streams went" "$(ls "$DIR" | grep -c "^$GPID\.")" 0
t_eq "a unit still in flight past its hang time was shipped as it stood" \
	"$(q "SELECT count(*) FROM streams WHERE labels->>'run' = 'host' AND labels->>'unit.state' = 'in_flight'")" 1
t_eq "a stream per slow request at least" \
	"$(q "SELECT count(*) >= $((sleeps + spins)) FROM streams WHERE labels->>'run' = 'host' AND role = 'violation'")" t
t_eq "the streams are the program's: build, app, unit type and threshold labels" \
	"$(q "SELECT bool_and(build_id = :'bid'), bool_and(app = 'guardtest'), bool_and(labels->>'unit.type' ~ '^u[0-9]+$'),
	       bool_and((labels->>'unit.threshold_ns')::bigint > 0), bool_and(labels->>'guard.exe' = '$GT')
	  FROM streams WHERE labels->>'run' = 'host' AND role = 'violation'")" "t|t|t|t|t"
ev=$(stream_events "s.labels->>'run' = 'host' AND s.role = 'violation' AND s.labels->>'unit.state' = 'ended'")
t_eq "each sleep is a wait event, its stack named from the process's own modules down to nanosleep" \
	"$(grep -c '^w .*guardtest!handle_sleep;libc\.so\.6!nanosleep$' <<<"$ev")" "$sleeps"
t_eq "each spin has run events in spin_cpu (CPU samples the process took itself)" \
	"$(q "SELECT count(*) >= $spins FROM streams s WHERE labels->>'run' = 'host' AND role = 'violation' AND EXISTS (
	        SELECT 1 FROM events e JOIN stacks k ON k.id = e.stack_id JOIN frames f ON f.id = ANY(k.frame_ids)
	         WHERE e.stream_ref = s.id AND e.kind = 'run' AND f.name = 'guardtest!spin_cpu')")" t
# (but the agent's pseudo-frames: a [cpu run queue] wait on a loaded machine, from the collector's
# run-delay snapshots, guard.md "CPU starvation")
t_eq "stacks start at the process's entry" "$(grep -v 'libc\.so\.6!__libc_start_main' <<<"$ev" |
	grep -Ev '^w [0-9]+ [0-9]+ 0 \[(cpu run queue|cgroup throttled|cpu steal)\]$' | grep -v '^$')" ""
t_eq "the stack of the unit in flight was asked of its thread (the agent's signal, from the collector)" \
	"$(stream_events "s.labels->>'run' = 'host' AND s.labels->>'unit.state' = 'in_flight'" |
	   grep -c '^w .*guardtest!handle_sleep;libc\.so\.6!nanosleep$')" 1
t_eq "the collector reported the process, in guard mode, with its collector, and that it exited" \
	"$(q "SELECT mode, collector, exited, units >= 600, violations >= $((sleeps + spins)) FROM agent_procs
	       WHERE pid = $GPID")" "guard|host|t|t|t"

# ---- a fork: the child's own region ----

RUN=fork
rm -f "$T_TMP/server.out"
"$GUARD" run --profile-dir "$PROF" --log "$T_TMP/guard.log" --url "$INGEST_URL" --token-file "$T_TMP/token" \
	--label run=fork -- bash -c "\"$GT\" epoll $PORT & wait" >"$T_TMP/server.out" 2>&1 &
GPID=$!
wait_ready
child=$(pgrep -P "$GPID" -f "guardtest epoll" | head -n 1)
"$GT" client "$PORT" 200 1 fast:90,sleep=60:10 >/dev/null || t_fail "forked load"
t_eq "an exec'd child has a region of its own" "$(ls "$DIR" | grep -c "^$child\.")" 1
"$GT" client "$PORT" 1 1 quit:1 >/dev/null 2>&1
wait "$GPID"
for _ in $(seq 1 150); do
	[ "$(q "SELECT count(*) FROM streams WHERE labels->>'run' = 'fork' AND role = 'violation'")" -ge 1 ] && break
	sleep 0.1
done
t_match "its streams arrive" "$(q "SELECT count(*) FROM streams WHERE labels->>'run' = 'fork' AND role = 'violation'")" \
	'^[1-9][0-9]*$'

# the collector log's line matching $1 for process GPID, waited for up to 15 s
col_said() {
	for _ in $(seq 1 150); do
		grep "pid=$GPID " "$T_TMP/collector.log" | grep -q "$1" && return 0
		sleep 0.1
	done
	return 1
}

# ---- a thread asleep outside a wrapped call is never signalled ----

# a unit hangs in a nanosleep the agent does not wrap: the watchdog (the collector's, or the
# process's own) counts it as a hang, but signals only a thread asleep in a wrapped call; this one's
# sleep the signal would cut short (with EINTR: a nanosleep is not restarted). It is shipped with the
# system call it sleeps in.
for mode in host process; do
	RUN=raw-$mode
	SM_GUARD_COLLECTOR=$mode SM_GUARD_HANG_MS=300 guarded "$GT" epoll "$PORT"
	"$GT" client "$PORT" 1 1 rawsleep=1200:1 >/dev/null || t_fail "raw sleep ($mode)"
	gt_stop "$PORT"
	if [ "$mode" = host ]; then
		col_said 'msg="guarded process ended"' || t_fail "raw sleep: the process's end was not seen in 15 s"
		said=$(grep "pid=$GPID " "$T_TMP/collector.log" | grep 'msg="guarded process ended"')
	else
		said=$(grep "pid=$GPID " "$T_TMP/guard.log" | grep 'msg="exit"')
	fi
	t_match "a hang in a call the agent does not wrap: counted ($mode)" "$said" ' violations=[1-9]'
	t_eq "and not cut short ($mode)" "$(grep -c 'cut short' "$T_TMP/server.out")" 0
	for _ in $(seq 1 150); do
		[ "$(q "SELECT count(*) FROM streams WHERE labels->>'run' = '$RUN' AND labels->>'unit.state' = 'in_flight'")" -ge 1 ] &&
			break
		sleep 0.1
	done
	# its wait: the call and where the program made it (in the C library's syscall()), read from
	# /proc/PID/task/TID/syscall, and its callers, walked up from the stack pointer shown there (no
	# signal) to the program's start: guardtest is built without frame pointers
	# (the names between: as the compiler made them)
	t_match "and shipped with its wait in the system call and its callers, 200 ms and more ($mode)" \
		"$(stream_events "s.labels->>'run' = '$RUN' AND s.labels->>'unit.state' = 'in_flight' AND e.tid = s.symptom_tid" |
		   awk '$1 == "w" && $3 >= 200000000' | cut -d' ' -f5-)" \
		'^guardtest!_start;libc\.so\.6!__libc_start_main;(.*;)?guardtest!run_epoll;(.*;)?guardtest!raw_sleep;libc\.so\.6!syscall;\[syscall nanosleep\]$'
done

# ---- a hang in a lock wait: its readier ----

# A pool worker waits for the lock the holder thread keeps for 1.5 s, past SM_GUARD_HANG_MS: shipped
# in flight, its wait has the lock's last releaser as its readier (the previous convoy's worker), from
# the process's table, which the collector reads in the region.
rm -f "$T_TMP/server.out"
"$GUARD" run --train --profile-dir "$PROF" --log "$T_TMP/guard.log" -- "$GT" pool "$PORT" 2 >"$T_TMP/server.out" 2>&1 &
GPID=$!
wait_ready
"$GT" client "$PORT" 3000 4 fast:90,file:10 >/dev/null || t_fail "pool training load"
pool_stop() {
	"$GT" client "$PORT" 1 1 quit:1 >/dev/null 2>&1
	"$GT" client "$PORT" 1 1 fast:1 >/dev/null 2>&1
	wait "$GPID"
}
pool_stop
for mode in host process; do
	RUN=lock-$mode
	SM_GUARD_COLLECTOR=$mode SM_GUARD_HANG_MS=400 SM_GUARD_REPORTS_PER_MIN=100000 guarded "$GT" pool "$PORT" 2
	"$GT" client "$PORT" 1 1 convoy=20:1 >/dev/null || t_fail "first convoy ($mode)"
	"$GT" client "$PORT" 1 1 convoy=1500:1 >/dev/null || t_fail "hung convoy ($mode)"
	pool_stop
	for _ in $(seq 1 150); do
		[ "$(q "SELECT count(*) FROM streams WHERE labels->>'run' = '$RUN' AND labels->>'unit.state' = 'in_flight'")" -ge 1 ] &&
			break
		sleep 0.1
	done
done
t_eq "a unit hung in a lock wait: its wait (300 ms and more) has a readier, through the collector and in the process" \
	"$(q "SELECT s.labels->>'run', count(DISTINCT s.id) FROM streams s JOIN events e ON e.stream_ref = s.id
	       WHERE s.labels->>'run' IN ('lock-host', 'lock-process') AND s.labels->>'unit.state' = 'in_flight'
	       AND e.kind = 'w' AND e.tid = s.symptom_tid AND e.dur_ns >= 300000000 AND e.readier_tid > 0
	       GROUP BY 1 ORDER BY 1")" "lock-host|1
lock-process|1"

# ---- the process's own log lines, through the collector's log ----

# the program ignores the agent's signal, then takes its default back: the agent says so on the
# program's thread, where nothing of the agent's writes its log file; the collector logs the lines
RUN=logs
guarded "$GT" epoll "$PORT"
SIG=$(($(kill -l SIGRTMAX) - 7))   # SM_GUARD_SIGNAL's default
"$GT" client "$PORT" 1 1 "sigign=$SIG:1" >/dev/null
"$GT" client "$PORT" 1 1 "sigdfl=$SIG:1" >/dev/null
if col_said 'msg="guarded process logged".*CPU samples resume'; then
	t_ok "logs: the process's lines are in the collector's log"
else
	t_fail "logs: the process's lines are in the collector's log" "not in 15 s"
fi
# each line whole, as one value (quoted, its quotes escaped), in the order written
lines=$(grep "pid=$GPID " "$T_TMP/collector.log" | grep 'msg="guarded process logged"' |
	sed -E 's/.* line="ts=[0-9T:.-]+Z (.*)"$/\1/')
t_eq "logs: as they were written, in their order, escaped as a value" "$lines" \
"level=info comp=smguard msg=\\\"the program ignores the sampling signal; CPU samples pause\\\" pid=$GPID exe=guardtest signal=$SIG
level=info comp=smguard msg=\\\"CPU samples resume\\\" pid=$GPID exe=guardtest signal=$SIG"
# more than the collector shows in a minute: three times 30 lines, each read whole (the region holds
# 32), then a flood of 100 in a moment (most written over before they are read)
ended_line() { grep "pid=$GPID " "$T_TMP/collector.log" | grep 'msg="guarded process ended"'; }
shown_lines() { grep "pid=$GPID " "$T_TMP/collector.log" | grep -c 'msg="guarded process logged"'; }
for _ in 1 2 3; do
	"$GT" client "$PORT" 30 1 "sigign=$SIG:1" >/dev/null
	sleep 0.5
done
t_eq "logs: 60 lines shown in a minute (2 + 58 of 90)" "$(shown_lines)" 60
"$GT" client "$PORT" 100 1 "sigign=$SIG:1" >/dev/null
gt_stop "$PORT"
col_said 'msg="guarded process ended"' || t_fail "logs: the process's end was not seen in 15 s"
t_match "logs: the others counted when the process ended (32 + 100: over the minute's share, or written over)" \
	"$(shown_lines) $(ended_line)" '^60 .* log_lines_lost=132( |$)'

# ---- what the server pushes reaches the process through the collector ----
RUN=pushed
q "INSERT INTO agent_settings (app, guard, min_wait_us, reports_per_min) VALUES ('pushed', false, 5000, 100000)" >/dev/null
SM_GUARD_APP=pushed guarded "$GT" epoll "$PORT"
col_said 'msg="settings pushed".* guard=off min_wait_us=5000' || t_fail "pushed: guarding off was not pushed in 15 s"
"$GT" client "$PORT" 20 1 fast:1 >/dev/null   # a unit's start takes it
col_said 'msg="the process took what was pushed".* guard=off' || t_fail "pushed: guarding off was not taken in 15 s"
"$GT" client "$PORT" 10 1 sleep=60:1 >/dev/null
sleep 0.5
muted=$(q "SELECT count(*) FROM streams WHERE labels->>'run' = 'pushed' AND role = 'violation'")
q "UPDATE agent_settings SET guard = NULL, k = 7 WHERE app = 'pushed'" >/dev/null
col_said 'msg="guard table pushed".* k=7 profile=own' || t_fail "pushed: no table for k=7 in 15 s"
"$GT" client "$PORT" 20 1 fast:1 >/dev/null
col_said 'msg="the process took what was pushed".* guard=on k=7 profile=own' || t_fail "pushed: k=7 was not taken in 15 s"
"$GT" client "$PORT" 10 1 sleep=60:1 >/dev/null
gt_stop "$PORT"
for _ in $(seq 1 150); do
	[ "$(q "SELECT count(*) FROM streams WHERE labels->>'run' = 'pushed' AND role = 'violation'")" -ge 10 ] && break
	sleep 0.1
done
t_eq "pushed: guarding off, slow requests are not violations" "$muted" 0
t_eq "pushed: guarding on again, every slow request is (reports_per_min pushed to the collector's budget)" \
	"$(q "SELECT count(*) FROM streams WHERE labels->>'run' = 'pushed' AND role = 'violation'
	       AND (labels->>'unit.duration_ns')::bigint >= 60000000")" 10
t_match "pushed: the collector says what it applied" "$(grep "pid=$GPID " "$T_TMP/collector.log")" \
	'msg="new report limit".* reports_per_min=100000'
# the process guards with the collector's table: each unit type's threshold is its k=7 one, not below k=4's
t_eq "pushed: the process's thresholds are the new k's (not below the ones it started with, type by type)" \
	"$(q "SELECT count(*) > 0 AND bool_and(p.thr >= h.thr) FROM
	       (SELECT labels->>'unit.type' AS ty, max((labels->>'unit.threshold_ns')::bigint) AS thr FROM streams
	         WHERE labels->>'run' = 'pushed' AND role = 'violation' GROUP BY 1) p JOIN
	       (SELECT labels->>'unit.type' AS ty, max((labels->>'unit.threshold_ns')::bigint) AS thr FROM streams
	         WHERE labels->>'run' = 'host' AND role = 'violation' GROUP BY 1) h USING (ty)")" t

# the fleet's profile of the build, fetched by the collector (at the process's SM_GUARD_PROFILE_FETCH_S)
RUN=fleet
PJ=$(tr -d '\n' <"$PROF/$bid.json")
code=$(curl -s -o "$T_TMP/upload.body" -w '%{http_code}' -X POST "$INGEST_URL/api/v1/profiles" -H "Authorization: Bearer $TOKEN" \
	-H "Content-Type: application/json" --data-binary "{\"v\":1,\"host\":\"fleet-a\",\"pid\":7,\"started_ns\":1,\"profile\":$PJ}")
t_eq "fleet: the build's profile uploaded" "$code $(cat "$T_TMP/upload.body")" "200 $(cat "$T_TMP/upload.body")"
SM_GUARD_PROFILE_FETCH_S=1 guarded "$GT" epoll "$PORT"
col_said 'msg="guard table pushed".* profile=fleet' || t_fail "fleet: no table of the fleet's profile in 15 s"
"$GT" client "$PORT" 20 1 fast:1 >/dev/null
if col_said 'msg="the process took what was pushed".* profile=fleet'; then
	t_ok "fleet: the process guards with the fleet's profile of its build, taken from the collector"
else
	t_fail "fleet: the process guards with the fleet's profile of its build, taken from the collector" "not in 15 s"
fi
gt_stop "$PORT"

# ---- a region cut short under the collector ----

# (the process stopped meanwhile: its own mapping is cut too, and would take it down first)
RUN=cut
guarded "$GT" epoll "$PORT"
"$GT" client "$PORT" 20 1 fast:1 >/dev/null
col_said 'msg="guarded process"' || t_fail "cut: the collector did not map the region in 15 s"
real=$(ls "$DIR" | grep "^$GPID\." | head -n 1)
kill -STOP "$GPID"
truncate -s 4096 "$DIR/$real"
col_said 'msg="region cut short by its process; finished"' || t_fail "cut: the collector did not notice in 15 s"
t_eq "cut: the collector runs on after a process truncated its region under it" \
	"$(t_alive "$COL_PID" && echo alive)" alive
t_eq "cut: and removes the region" "$(sleep 1; ls "$DIR" | grep -c "^$GPID\.")" 0
kill -KILL "$GPID" 2>/dev/null
wait "$GPID" 2>/dev/null

# ---- a region that lies is refused ----

# a live region copied whole (a unit in flight in it), naming a process of root's, owned by nobody: the
# collector must neither read it as that process's nor ever signal that process (its default action
# for the agent's signal would end it)
RUN=liar
SM_GUARD_HANG_MS=400 guarded "$GT" epoll "$PORT"
"$GT" client "$PORT" 1 1 sleep=2000:1 >/dev/null &
cpid=$!
sleep 0.5
real=$(ls "$DIR" | grep "^$GPID\." | head -n 1)
sleep 30 &
victim=$!
vst=$(sed 's/.*) //' /proc/$victim/stat | awk '{print $20}')
cp --sparse=always "$DIR/$real" "$T_TMP/liar"
python3 - "$T_TMP/liar" "$victim" "$vst" <<'EOF'
import struct, sys
path, pid, st = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with open(path, 'r+b') as f:
    h = bytearray(f.read(64))
    # after the layout (magic 8, layout 4, slot_bytes 4, bytes 8, max_slots 4, ring_bytes 4, slots_off 8,
    # rings_off 8): pid (int32) at 48, sig (int32) at 52, starttime (uint64) at 56
    struct.pack_into('<i', h, 48, pid)
    struct.pack_into('<Q', h, 56, st)
    f.seek(0)
    f.write(h)
EOF
chown nobody "$T_TMP/liar"
mv "$T_TMP/liar" "$DIR/$victim.$vst.0"
sleep 1
t_match "the collector refuses a region whose owner does not own the process it names" \
	"$(grep 'region refused' "$T_TMP/collector.log")" "region=$victim\.$vst\.0 owner=65534 reason=\"the file's owner is not the process's\""
t_eq "and never signals that process" "$(t_alive "$victim" && echo alive)" alive
kill "$victim" 2>/dev/null
wait "$victim" 2>/dev/null
wait "$cpid"
rm -f "$DIR/$victim.$vst.0"
gt_stop "$PORT"
collector_stop

# ---- no collector ----

rm -f "$DIR"/[0-9]*
RUN=process
guarded "$GT" epoll "$PORT"
"$GT" client "$PORT" 100 1 fast:90,sleep=60:10 >/dev/null || t_fail "in-process load"
t_match "auto without a collector: the agent works in the process" \
	"$(grep "pid=$GPID " "$T_TMP/guard.log" | grep 'msg="guarding"')" 'collector=process'
t_eq "with its own threads" "$(agent_threads "$GPID")" 2
gt_stop "$PORT"

# A collector of another build holds the lock (its stamp another layout): it would refuse the region
# and nobody would watch the process. auto works in the process and says why.
printf 'stackmine-collector magic=31474552474d53 layout=2 slot=192 threads=4096\n' >"$DIR/collector.lock"
flock -o -x "$DIR/collector.lock" sleep 120 &   # -o: the lock is flock's own, gone with it
other=$!
sleep 0.2
RUN=otherbuild
guarded "$GT" epoll "$PORT"
"$GT" client "$PORT" 100 1 fast:90,sleep=60:10 >/dev/null || t_fail "load beside another build's collector"
t_match "auto with a collector of another build: the agent works in the process" \
	"$(grep "pid=$GPID " "$T_TMP/guard.log" | grep 'msg="guarding"')" 'collector=process'
t_match "and says why, with that collector's stamp" "$(other_build_said)" \
	'collector="stackmine-collector magic=31474552474d53 layout=2 slot=192 threads=4096"'
t_eq "no region made for it, and its own threads" "$(regions_threads)" "0|2"
gt_stop "$PORT"
# host, chosen: the region is made for a collector of this build to come, and the log says why none reads it
RUN=otherbuild
SM_GUARD_COLLECTOR=host guarded "$GT" epoll "$PORT"
t_match "host beside a collector of another build: says that one will not read its region" "$(other_build_said)" \
	'will not read this process.s region until one of this build runs" .*layout=2 '
t_eq "and makes its region, with no thread of the agent's" "$(regions_threads)" "1|0"
gt_stop "$PORT"
rm -f "$DIR/$GPID".*
kill "$other" 2>/dev/null
wait "$other" 2>/dev/null

RUN=queued
SM_GUARD_COLLECTOR=host guarded "$GT" epoll "$PORT"
"$GT" client "$PORT" 100 1 fast:90,sleep=60:10 >/dev/null || t_fail "queued load"
t_eq "host without a collector: still no thread of the agent's" "$(agent_threads "$GPID")" 0
t_eq "and nothing shipped meanwhile" "$(q "SELECT count(*) FROM streams WHERE labels->>'run' = 'queued'")" 0
start_collector
sleep 0.5
gt_stop "$PORT"
for _ in $(seq 1 150); do
	[ "$(q "SELECT count(*) FROM streams WHERE labels->>'run' = 'queued' AND role = 'violation'")" -ge 1 ] && break
	sleep 0.1
done
t_match "a collector that starts later ships what the process queued meanwhile" \
	"$(q "SELECT count(*) FROM streams WHERE labels->>'run' = 'queued' AND role = 'violation'")" '^[1-9][0-9]*$'

# The collector's stop, held (SIGSTOP) while one process ends that it watched and another comes and
# goes unseen: each gets its last round there, its end logged and its file removed. Before, they were
# left for the next collector.
RUN=last
SM_GUARD_COLLECTOR=host guarded "$GT" epoll "$PORT"
seen=$GPID
for _ in $(seq 1 100); do
	grep -q "msg=\"guarded process\" pid=$seen " "$T_TMP/collector.log" && break
	sleep 0.05
done
kill -STOP "$COL_PID"
gt_stop "$PORT"
SM_GUARD_COLLECTOR=host guarded "$GT" epoll "$PORT"
unseen=$GPID
gt_stop "$PORT"
t_eq "(both regions there as the collector stops)" "$(ls "$DIR" | grep -cE "^($seen|$unseen)\.")" 2
kill -TERM "$COL_PID"
kill -CONT "$COL_PID"
wait "$COL_PID"
t_eq "the collector stopped after the processes ended exits 0" "$?" 0
COL_PID=
t_eq "and removed both regions" "$(ls "$DIR" | grep -cE "^($seen|$unseen)\.")" 0
t_eq "with their end logged, the unseen one's after it was found" \
	"$(grep -oE "msg=\"guarded process( ended)?\" pid=($seen|$unseen) " "$T_TMP/collector.log" |
		sed "s/pid=$seen /pid=SEEN /; s/pid=$unseen /pid=UNSEEN /" | tr '\n' ';')" \
	'msg="guarded process" pid=SEEN ;msg="guarded process" pid=UNSEEN ;msg="guarded process ended" pid=SEEN ;msg="guarded process ended" pid=UNSEEN ;'

# ---- a real program's threads: the agent starts none, and makes the program start none ----
# A new thread that entered the program's allocator on the agent's account (its trampoline's
# argument freed there) got a cache and an arena of its own, and jemalloc a background thread per
# arena: a guarded redis had 8 threads for 5.
if command -v redis-server >/dev/null; then
	start_collector
	RP=$(free_port)
	# rthreads CMD...: redis's sorted thread names after a load, under CMD
	rthreads() {
		"$@" /usr/bin/redis-server --port "$RP" --bind 127.0.0.1 --save '' --appendonly no --dir "$T_TMP" \
			--logfile "$T_TMP/redis.log" &
		local pid=$! names
		for _ in $(seq 1 300); do redis-cli -p "$RP" ping >/dev/null 2>&1 && break; sleep 0.05; done
		redis-benchmark -p "$RP" -t get,set -n 20000 -c 20 -q >/dev/null 2>&1
		names=$(cat /proc/"$pid"/task/*/comm 2>/dev/null | sort | tr '\n' ' ')
		redis-cli -p "$RP" shutdown nosave >/dev/null 2>&1
		wait "$pid"
		echo "$names"
	}
	plain=$(rthreads env)
	# (training goes through the collector too: redis's exit waits for its profile's last save)
	rthreads "$GUARD" run --train --profile-dir "$PROF" --log "$T_TMP/guard.log" -- >/dev/null
	guarded_names=$(SM_GUARD_COLLECTOR=host rthreads "$GUARD" run --profile-dir "$PROF" --log "$T_TMP/guard.log" \
		--url "$INGEST_URL" --token-file "$T_TMP/token" --label run=redis --)
	echo "redis's threads: $plain"
	t_eq "redis under the agent with the collector: the threads it has without the agent" \
		"$(grep -c 'msg="guarding" .*exe=redis-server mode=guard .*collector=host' "$T_TMP/guard.log")|$guarded_names" "1|$plain"
	collector_stop
fi

if [ "$T_FAILED" -gt 0 ]; then
	echo "the collector's log:"
	tail -n 60 "$T_TMP/collector.log" | sed 's/^/  | /'
fi
t_done
