#!/usr/bin/env bash
# The guard agent on programs of our own (tests/guard/), end to end: sm-guard's
# commands and settings; the safety checks run from inside a guarded program;
# an epoll server trained, then guarded while it serves slow requests, its
# violation streams stored by the real sm-ingest with the right stacks, labels
# and symbols (a stripped copy too); a thread pool with a lock convoy whose
# holder is found through the readier edge, and mined; a backend that is down
# (streams wait in the spool, the program is not slowed); profiles merged.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../guard_lib.sh"

py=python3

sm_admin migrate >/dev/null || t_bail "migrate"
TOKEN=$(mk_token ingest 2>/dev/null)
printf '%s\n' "$TOKEN" >"$T_TMP/token"
start_ingest --profile-merge-ms 0 || t_bail "sm-ingest starts"

# guarded SERVER_ARGS...: runs guardtest with the agent in the background as GPID
# (extra settings in the environment of the call)
guarded() {
	rm -f "$T_TMP/server.out"
	"$GUARD" run --profile-dir "$PROF" --log "$T_TMP/guard.log" --url "$INGEST_URL" \
		--token-file "$T_TMP/token" --label region=test-1 --label "conf.mix=a,b" -- "$@" >"$T_TMP/server.out" 2>&1 &
	GPID=$!
	gt_ready "$T_TMP/server.out" server
}

# wait_ready: the server started in the background (output in server.out) listens
wait_ready() { gt_ready "$T_TMP/server.out" server; }
# the last guarded guardtest's exit line, into $line; kv NAME: a counter of it
exit_line() { line=$(grep 'msg="exit".* exe=guardtest ' "$T_TMP/guard.log" | tail -n 1); }
kv() { sed -n "s/.* $1=\([0-9]*\).*/\1/p" <<<"$line"; }

# ---- the command ----

out=$("$GUARD" env)
for v in SM_GUARD_MODE SM_GUARD_PROFILE_DIR SM_GUARD_K SM_GUARD_URL SM_GUARD_TOKEN_FILE SM_GUARD_SPOOL \
	SM_GUARD_LABELS SM_GUARD_ONLY SM_GUARD_MIN_THRESHOLD_US SM_GUARD_SIGNAL; do
	[[ $out == *"#$v="* ]] || t_fail "sm-guard env lists $v" "$out"
done
t_ok "sm-guard env lists the settings"
out=$(SM_GUARD_K=4.5 "$GUARD" env | grep '^SM_GUARD_K=')
t_eq "sm-guard env shows a value that is set" "$out" "SM_GUARD_K=4.5"
# docs/guard.md's table is the agent's own
t_eq "docs/guard.md lists the settings as the agent parses them" \
	"$(sed -n '/^| variable | default | meaning |$/,/^$/p' "$SM_REPO/docs/guard.md" | sed '/^$/d')" \
	"$("$GUARD" env --markdown)"
t_match "sm-guard lib prints the library" "$("$GUARD" lib)" '/libsmguard\.so$'
out=$("$GUARD" run --k abc -- true 2>&1)
t_eq "a bad setting is refused (status)" "$?" 2
t_eq "a bad setting is refused (message)" "$out" "sm-guard: SM_GUARD_K: not a number from 0 to 1000: 'abc'"
out=$(SM_GUARD_LABELS='=x' "$GUARD" run -- true 2>&1)
t_eq "a bad label is refused" "$out" \
	"sm-guard: SM_GUARD_LABELS: each label is KEY=VALUE with a non-empty KEY: '=x'"
out=$("$GUARD" run --url ftp://x -- true 2>&1)
t_eq "a URL that is not http is refused" "$out" "sm-guard: SM_GUARD_URL: not an http:// or https:// URL (or a list of them): 'ftp://x'"
out=$("$GUARD" run -- /nonexistent 2>&1)
t_eq "a missing command: status 127" "$?" 127
# the agent stays inert on a bad setting when loaded without the wrapper, and says why in its log
out=$(LD_PRELOAD=$("$GUARD" lib) SM_GUARD_K=x SM_GUARD_LOG=$T_TMP/inert.log sh -c 'echo hi')
t_eq "an inert agent does not change the program" "$out" hi
t_match "and logs the reason" "$(cat "$T_TMP/inert.log")" "bad setting; the agent stays inert.*SM_GUARD_K: not a number"

# ---- the clock: the TSC where the kernel vouches for it ----
# What the agent should read, found independently: an invariant TSC (nonstop_tsc) and AVX, and
# either the kernel's own clocksource on it, or kvm-clock whose vDSO answers without a system call
# (it does only while the host marks the TSC stable across vCPUs); else clock_gettime.
clock_want=monotonic
cpu_flags=" $(grep -m 1 '^flags' /proc/cpuinfo | cut -d: -f2) "
if [[ $cpu_flags == *" nonstop_tsc "* && $cpu_flags == *" avx "* ]]; then
	case $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource) in
	tsc) clock_want=tsc ;;
	kvm-clock)
		st=$(strace -f -q -e trace=clock_gettime date +%N 2>&1 >/dev/null) ||
			t_bail "strace runs date (ptrace allowed?)" "$st"
		[[ $st == *"+++ exited with 0 +++"* ]] || t_bail "strace shows date's exit" "$st"
		[[ $st == *clock_gettime* ]] || clock_want=kvm-tsc ;;
	esac
fi
"$GUARD" run --train --profile-dir "$PROF" --log "$T_TMP/clock.log" -- "$TOOLS/callcost" 3000 200 >/dev/null
t_match "clock: the agent reads the clock the kernel vouches for ($clock_want)" \
	"$(grep 'msg="guarding"' "$T_TMP/clock.log" | tail -n 1)" " clock=$clock_want\$"
# guarding, the watchdog re-anchors on time: at 0.1 s, then every second, each compared with
# CLOCK_MONOTONIC first (callcost 30000 200: 3 to 10 s here, as fast as the machine's system calls
# are at the moment; 12000 took as little as 1.1 s, when a skew's re-anchoring raced the exit)
"$GUARD" run --profile-dir "$PROF" --log "$T_TMP/clock.log" -- "$TOOLS/callcost" 30000 200 >/dev/null
t_match "clock: no recalibration in a run" "$(grep 'msg="exit"' "$T_TMP/clock.log" | tail -n 1)" \
	" clock=$clock_want clock_restarts=0\$"
if [ "$clock_want" != monotonic ]; then
	# put 50 ms off after its first anchor, as a virtual machine restored from a snapshot finds its
	# TSC: the next re-anchoring (a second later) calibrates again; the tests' build checks every
	# anchor after that against CLOCK_MONOTONIC
	# (a log of its own, where the test build says when it put the clock off, and what it found when
	# it did not calibrate again or an anchor was off (which aborts the program); the program's
	# status and error output. A second restart is allowed: it costs 0.1 s of clock_gettime)
	SM_GUARD_TEST_CLOCK_SKEW_US=50000 "$GUARD" run --profile-dir "$PROF" --log "$T_TMP/skew.log" -- \
		"$TOOLS/callcost" 30000 200 >/dev/null 2>"$T_TMP/skew.err"
	out="$?|$(grep 'msg="exit"' "$T_TMP/skew.log" | grep -o ' clock=.*')|$(grep -o 'msg="test: .*' "$T_TMP/skew.log" |
		sed 's/ pid=[0-9]* exe=[^ ]*//')|$(cat "$T_TMP/skew.err")"
	echo "clock: skewed by 50 ms: $out"
	t_match "clock: a TSC that strayed from the monotonic clock is calibrated again" "$out" \
		"^0\| clock=$clock_want clock_restarts=[12]\|msg=\"test: the clock put off after its first anchor\" skew_ns=50000000\|\$"
fi

# ---- safety, from inside ----

"$GUARD" run --train --profile-dir "$PROF" --log "$T_TMP/guard.log" -- "$TOOLS/safety" train 300 >/dev/null ||
	t_fail "safety trains"
"$GUARD" run --profile-dir "$PROF" --log "$T_TMP/guard.log" --spool "$T_TMP/safety-spool" -- \
	"$TOOLS/safety" check >"$T_TMP/safety.out" 2>&1
while IFS= read -r line; do
	case $line in
	ok\ *) t_ok "safety: ${line#ok   }" ;;
	FAIL\ *) name=${line#FAIL }; t_fail "safety: ${name%%: *}" "${name#*: }" ;;
	esac
done <"$T_TMP/safety.out"
t_match "safety: every check ran" "$(tail -n 1 "$T_TMP/safety.out")" '^24 passed, 0 failed$'
n=$(ls "$T_TMP/safety-spool"/*.json 2>/dev/null | wc -l)
t_match "safety: units that ran after every descriptor was closed still reach the spool" "$n" '^[5-9]$'

# ---- an epoll server: train, then guard ----

PORT=$(free_port)
rm -f "$T_TMP/server.out"
"$GUARD" run --train --profile-dir "$PROF" --log "$T_TMP/guard.log" -- "$GT" epoll "$PORT" >"$T_TMP/server.out" 2>&1 &
GPID=$!
wait_ready
"$GT" client "$PORT" 20000 4 fast:80,file:20 >/dev/null || t_fail "training load"
gt_stop "$PORT"
bid=$(readelf -n "$GT" | sed -n 's/.*Build ID: //p')
t_match "the profile is named by the build id" "$(ls "$PROF")" "$bid\.json"
show=$("$GUARD" profile show "$PROF/$bid.json")
t_match "the loop site is the server's epoll_wait" "$show" "loop 0: guardtest!run_epoll"
t_match "a unit type has the read of the request as a context" "$show" "read +in guardtest!serve_readable"
t_match "and another the accept" "$show" "accept +in guardtest!run_epoll"

events_of() { stream_events "$1" -v bid="$bid"; }
q() { pg_q "$1" -v bid="$bid"; }

# every violation shipped (no rate limit here); one connection, so that each unit serves one request
SM_GUARD_REPORTS_PER_MIN=100000 guarded "$GT" epoll "$PORT" || t_bail "guarded server"
mix=$("$GT" client "$PORT" 1500 1 fast:95,sleep=60:2,spin=60:2,tmo=30:1) || t_fail "guarded load"
gt_stop "$PORT"
sleeps=$(awk '$1 == "sleep" {print $3}' <<<"$mix")
spins=$(awk '$1 == "spin" {print $3}' <<<"$mix")
echo "slow requests sent: $sleeps sleeps, $spins spins"
t_eq "a stream per slow request at least" \
	"$(q "SELECT count(*) >= $((sleeps + spins)) FROM streams WHERE build_id = :'bid' AND role = 'violation'")" t
# the process reported itself: at its first unit, and once more as it exited
t_eq "the process's report: what it guards, in which mode, and that it exited" \
	"$(q "SELECT app, exe = '$GT', build_id = :'bid', mode, agent_version, exited, pid = $GPID,
	       units >= 1500, violations >= $((sleeps + spins)), drops, ship_errors FROM agent_procs")" \
	"guardtest|t|t|guard|1.0|t|t|t|t|0|0"
t_eq "the report's violations are the streams it shipped" \
	"$(q "SELECT violations FROM agent_procs")" "$(q "SELECT count(*) FROM streams WHERE build_id = :'bid' AND role = 'violation'")"
t_eq "and the host's hour has them" "$(q "SELECT h.violations = p.violations AND h.units = p.units
	FROM agent_hours h, agent_procs p")" t
t_eq "app, labels and symptom kind" \
	"$(q "SELECT DISTINCT app || ' ' || (labels->>'region') || ' ' || (labels->>'conf.mix') || ' ' ||
	       symptom_kind FROM streams WHERE build_id = :'bid' AND role = 'violation'")" "guardtest test-1 a,b unit_violation"
t_eq "unit type, threshold, duration and size labels" \
	"$(q "SELECT count(*) FROM streams WHERE build_id = :'bid' AND role = 'violation' AND labels->>'unit.type' ~ '^u[0-9]+\$'
	       AND (labels->>'unit.threshold_ns')::bigint >= 1000000
	       AND (labels->>'unit.duration_ns')::bigint > (labels->>'unit.threshold_ns')::bigint
	       AND (labels->>'unit.calls')::int >= 1 AND labels->>'unit.loop' = 'guardtest!run_epoll'
	       AND symptom_unit_type = labels->>'unit.type' AND symptom_threshold_ns::text = labels->>'unit.threshold_ns'
	       AND symptom_end_ns - symptom_start_ns >= (labels->>'unit.duration_ns')::bigint")" \
	"$(q "SELECT count(*) FROM streams WHERE build_id = :'bid' AND role = 'violation'")"
t_eq "the symptom thread is the server's loop thread" \
	"$(q "SELECT DISTINCT symptom_tid FROM streams WHERE build_id = :'bid'")" "$GPID"
t_eq "every stream names its symptom thread by its comm (the wire's threads)" \
	"$(q "SELECT DISTINCT thread_names->>(symptom_tid::text) FROM streams WHERE build_id = :'bid'")" "guardtest"
ev=$(events_of "s.build_id = :'bid' AND e.tid = s.symptom_tid")
n=$(grep -c '^w .*;guardtest!run_epoll;guardtest!serve_readable;.*guardtest!handle_sleep;libc\.so\.6!nanosleep$' <<<"$ev")
t_eq "each sleep is a wait event: the server's stack down to nanosleep" "$n" "$sleeps"
n=$(awk '$1 == "w" && $4 == 0 && $3 >= 60000000 && $3 < 70000000' <<<"$ev" | grep -c 'handle_sleep')
t_eq "lasting the 60 ms, with no readier" "$n" "$sleeps"
tmos=$(awk '$1 == "tmo" {print $3}' <<<"$mix")
# a condition another thread signalled before the wait began: the wait timed out, no one readied it.
# It lasts the 30 ms less the time from taking the deadline to the wrapper's entry, which a
# preemption on a busy machine stretches (a CI run once counted 20 of 21 at 30 ms or more).
n=$(awk '$1 == "w" && $4 == 0 && $3 >= 25000000' <<<"$ev" | grep -c 'guardtest!timed_out_wait;libc\.so\.6!pthread_cond_timedwait')
t_eq "a timed wait that timed out has no readier (the condition's last signaller is not one)" "$n|$(awk '$1 == "w" && $4 != 0' <<<"$ev" | grep -c 'timed_out_wait')" "$tmos|0"
# a late timer signal stands for every period that passed: multiples of 10 ms, and once a sample finds
# the unit over its threshold, of 1 ms (SM_GUARD_VIOLATION_HZ; a CPU-time timer fires at the kernel's tick).
# But the thread's CPU clock runs on between units: a unit's first sample stands only for the time
# since the unit began, when its period began in the unit before. Back-dated whole, it lay in the last
# unit's window: in the stream of a fast request a loaded machine made slow, a spin of the unit after.
spin="(SELECT id FROM frames WHERE name = 'guardtest!spin_cpu')"
t_eq "spins are run events in spin_cpu, 10 ms of CPU each (or a multiple), then 1 ms each (or a multiple)" \
	"$(q "SELECT count(*) FROM streams s JOIN events e ON e.stream_ref = s.id JOIN stacks k ON k.id = e.stack_id
	       WHERE s.build_id = :'bid' AND e.kind = 'r' AND e.tid = s.symptom_tid AND $spin = ANY(k.frame_ids) AND
	       e.ts_ns > s.symptom_start_ns AND e.ts_ns <= s.symptom_end_ns AND e.dur_ns % 1000000 <> 0")" 0
t_eq "no sample of the symptom thread begins before its unit and ends inside it" \
	"$(q "SELECT count(*) FROM streams s JOIN events e ON e.stream_ref = s.id WHERE s.build_id = :'bid' AND
	       e.kind = 'r' AND e.tid = s.symptom_tid AND e.ts_ns < s.symptom_start_ns AND
	       e.ts_ns + e.dur_ns > s.symptom_start_ns")" 0
t_eq "a spinning unit over its threshold is sampled more often (samples under 10 ms in each)" \
	"$(q "SELECT count(*) FROM streams s WHERE build_id = :'bid' AND EXISTS (SELECT 1 FROM events e JOIN stacks k
	       ON k.id = e.stack_id WHERE e.stream_ref = s.id AND e.kind = 'r' AND e.dur_ns > 0 AND e.dur_ns < 10000000 AND
	       (SELECT id FROM frames WHERE name = 'guardtest!spin_cpu') = ANY(k.frame_ids))")" "$spins"
# and the stack taken when the violation is detected: a run event of no cost
t_eq "each violation has its inspection stack" \
	"$(q "SELECT count(*) FROM streams s WHERE build_id = :'bid' AND NOT EXISTS (SELECT 1 FROM events e WHERE
	       e.stream_ref = s.id AND e.tid = s.symptom_tid AND e.kind = 'r' AND e.dur_ns = 0)")" 0
# (inside the symptom's unit: a fast request that a loaded machine made slow, right after a spin, is a
# stream too, whose events before its unit may be the spin's)
t_eq "every spinning unit has some" \
	"$(q "SELECT count(DISTINCT s.id) FROM streams s JOIN events e ON e.stream_ref = s.id JOIN stacks k ON
	       k.id = e.stack_id WHERE s.build_id = :'bid' AND e.kind = 'r' AND e.dur_ns > 0 AND
	       e.ts_ns BETWEEN s.symptom_start_ns AND s.symptom_end_ns AND
	       (SELECT id FROM frames WHERE name = 'guardtest!spin_cpu') = ANY(k.frame_ids)")" "$spins"
t_match "the static function under spin_cpu has its name from .symtab" "$ev" 'guardtest!spin_cpu;guardtest!spin_inner'
# (but the agent's pseudo-frames: a [cpu run queue] wait on a loaded machine, guard.md "CPU starvation")
t_eq "stacks start at the process's entry" "$(grep -v 'libc\.so\.6!__libc_start_main' <<<"$ev" |
	grep -Ev '^w [0-9]+ [0-9]+ 0 \[(cpu run queue|cgroup throttled|cpu steal)\]$')" ""
fp=$(q "SELECT count(*) FROM streams s WHERE build_id = :'bid' AND NOT EXISTS (SELECT 1 FROM events e JOIN stacks k
	ON k.id = e.stack_id WHERE e.stream_ref = s.id AND e.tid = s.symptom_tid AND k.frame_ids && ARRAY(SELECT id
	FROM frames WHERE name IN ('guardtest!handle_sleep', 'guardtest!spin_cpu', 'guardtest!timed_out_wait')))")
echo "fast requests reported as violations: $fp of $(awk '$1 == "fast" {print $2}' <<<"$mix")"
t_match "almost no fast request is reported" "$fp" '^[0-9]$'

# the path (unit.c): a unit that repeats the last one's contexts takes their types from it, one
# that goes on past its 64 or turns elsewhere counts again. In this build the library also counts
# every context as it comes and stops the program at the first difference (GUARD_CHECK_PATH).
# Units of 3, 4 and 203 or so calls, each kind again and again, then mixed, then the longest again.
SM_GUARD_REPORTS_PER_MIN=100000 SM_GUARD_LABELS=run=path guarded "$GT" epoll "$PORT" || t_bail "guarded server"
ok=1
for load in "3 files=1=60:1" "3 files=2=60:1" "5 files=100=60:1" "300 files=100=0:1,files=70=0:1,files=30=0:1,fast:2,file:1" \
	"3 files=100=60:1"; do
	"$GT" client "$PORT" ${load% *} 1 "${load#* }" >/dev/null || ok=0
done
gt_stop "$PORT"
t_eq "path: the server answered every unit, each type as counted" "$ok $(grep -c "path's unit type" "$T_TMP/server.out")" "1 0"
# the slow ones' sizes (those that slept: a first unit may be slow on a loaded machine): n files
# make c1 + (n - 1) * (c2 - c1) calls, c1 the size of a unit with one
calls=$(q "SELECT string_agg(c || 'x' || n, ' ' ORDER BY c) FROM (SELECT (labels->>'unit.calls')::int c, count(*) n
	FROM streams WHERE build_id = :'bid' AND labels->>'run' = 'path'
	AND (labels->>'unit.duration_ns')::bigint >= 60000000 GROUP BY 1) x")
read -r c1 c2 c100 _ <<<"$(sed 's/x[0-9]*//g' <<<"$calls")"
t_eq "path: 3, 3 and 8 slow units of 1, 2 and 100 files, their calls counted whole" \
	"$calls $(awk -v a="$c1" -v b="$c2" -v c="$c100" 'BEGIN { print (c - a == 99 * (b - a) && b > a) }')" \
	"${c1}x3 ${c2}x3 ${c100}x8 1"
t_eq "path: the longest units (followed or not) all of one type and threshold" \
	"$(q "SELECT count(DISTINCT (labels->>'unit.type', labels->>'unit.threshold_ns')) FROM streams
	WHERE build_id = :'bid' AND labels->>'run' = 'path' AND labels->>'unit.calls' = '$c100'")" 1

# the rate limit: a storm is counted, at most 6 streams per type and minute shipped
SM_GUARD_REPORT_S=1 SM_GUARD_LABELS=run=limited guarded "$GT" epoll "$PORT" || t_bail "guarded server"
"$GT" client "$PORT" 400 2 sleep=5:1 >/dev/null || t_fail "storm load"
seen=$(q "SELECT last_seen > first_seen FROM agent_procs WHERE pid = $GPID")
gt_stop "$PORT"
t_eq "reports every second while the process runs (SM_GUARD_REPORT_S=1)" "$seen" t
t_eq "the suppressed violations are reported as drops" \
	"$(q "SELECT violations >= 200, violations - drops, exited FROM agent_procs WHERE pid = $GPID")" "t|6|t"
t_eq "a storm ships 6 streams" "$(q "SELECT count(*) FROM streams WHERE labels->>'run' = 'limited' AND role = 'violation'")" 6
exit_line
v=$(kv violations)
sup=$(kv suppressed)
echo "storm: $v violations, $sup suppressed"
t_eq "and counts the rest" "$((v - sup)):$([ "${v:-0}" -ge 200 ] && echo all)" "6:all"
# their stacks (unwind.h): walked through libunwind's trace cache, which learns each frame once;
# a refused write of its own context sends every walk the slow way and makes no entry at all
walks=$(kv walks) frames=$(kv walk_frames) entries=$(kv walk_cache_entries) slow=$(kv slow_walks)
echo "storm: $walks walks through the cache, $frames frames, $entries entries made, $slow slow"
t_eq "the storm's stacks came from the trace cache: at most one frame in ten new, none the slow way" \
	"$([ "${walks:-0}" -ge 200 ] && [ "${entries:-0}" -gt 0 ] && [ $((entries * 10)) -le "${frames:-0}" ] && echo yes) ${slow:-none}" \
	"yes 0"

# after a dlclose (unwind.h) the cache may hold the unwind rules of code no longer mapped: the
# walks go the slow way, whose reads are checked
SM_GUARD_LABELS=run=unload guarded "$GT" epoll "$PORT" || t_bail "guarded server"
{ "$GT" client "$PORT" 20 1 sleep=5:1 && "$GT" client "$PORT" 1 1 unload:1 &&
	"$GT" client "$PORT" 20 1 sleep=5:1; } >/dev/null || t_fail "unload load"
gt_stop "$PORT"
exit_line
walks=$(kv walks) slow=$(kv slow_walks)
echo "unload: $walks walks through the cache, $slow slow"
t_eq "walks through the cache before a dlclose, the slow way after it" \
	"$([ "${walks:-0}" -gt 0 ] && echo cached) $([ "${slow:-0}" -gt 0 ] && echo slow)" "cached slow"

# cache_case NAME LOAD...: a guarded epoll server (run=NAME) given each LOAD ("COUNT REQUEST") in
# turn, then stopped; walks, entries and uncached from its exit line (the trace cache's counters)
cache_case() {
	local name=$1 l
	shift
	SM_GUARD_LABELS=run=$name guarded "$GT" epoll "$PORT" || t_bail "guarded server"
	for l in "$@"; do
		"$GT" client "$PORT" "${l%% *}" 1 "${l#* }" >/dev/null || t_fail "$name load"
	done
	gt_stop "$PORT"
	exit_line
	walks=$(kv walks) entries=$(kv walk_cache_entries) uncached=$(kv uncached_walks)
	echo "$name: $walks walks through the cache, $entries entries made, $uncached before a cache"
}

# libunwind's trace cache is a quarter of a megabyte a thread, filled when made (unwind.h): a thread
# makes it only after 16 walks the slow way, so a process that walks a few times has none
cache_case few "2 sleep=5:1"
t_eq "a few walks, the slow way, make no trace cache" \
	"${walks:-none} ${entries:-none} $([ "${uncached:-0}" -gt 0 ] && [ "${uncached:-0}" -lt 16 ] && echo some)" "0 0 some"
# but a fork makes it first, for the children to share (copy on write) rather than fill their own
cache_case fork "2 sleep=5:1" "1 fork:1"
t_eq "a fork makes the trace cache first (before the thread's sixteenth walk)" \
	"$([ "${walks:-0}" -ge 1 ] && [ "${entries:-0}" -gt 0 ] && echo made) $([ "${uncached:-0}" -gt 0 ] && [ "${uncached:-0}" -lt 16 ] && echo early)" "made early"
# but not from a signal handler of the program's, where making it (libunwind's thread key may
# allocate) could meet a lock the handler interrupted: the walks after it still go the slow way
cache_case sigfork "2 sleep=5:1" "1 sigfork:1" "2 sleep=5:1"
t_eq "a fork from the program's signal handler makes no trace cache" \
	"${walks:-none} ${entries:-none} $([ "${uncached:-0}" -ge 3 ] && [ "${uncached:-0}" -lt 16 ] && echo some)" "0 0 some"
# nor from a one-shot handler (SA_RESETHAND: a crash handler's way), which the kernel then resets to
# SIG_DFL, reported with the flags the program gave (guardtest checks them)
cache_case sigfork1 "2 sleep=5:1" "1 sigfork1:1" "2 sleep=5:1"
t_eq "a fork from the program's one-shot signal handler makes no trace cache" \
	"${walks:-none} ${entries:-none} $([ "${uncached:-0}" -ge 3 ] && [ "${uncached:-0}" -lt 16 ] && echo some)" "0 0 some"
# a handler left by siglongjmp is over once the thread runs above its frame again: the thread's walks
# make the cache after all (counted as still running, it would walk the slow way for good)
cache_case sigjmp "2 sleep=5:1" "1 sigjmp:1" "12 sleep=5:1"
t_eq "a handler left by siglongjmp does not keep the thread from its trace cache" \
	"$([ "${walks:-0}" -ge 1 ] && [ "${entries:-0}" -gt 0 ] && echo made) $([ "${uncached:-0}" -ge 16 ] && echo after16)" "made after16"
# nor from a handler a library's constructor set before the agent started (libearlysig.so, preloaded
# after the agent's library and so initialised first): the agent takes it into the trampoline too,
# and the program still sees its own handler (guardtest checks it). (sm-guard passes LD_PRELOAD on
# after its library; the sanitizer build's sm-guard must not mind a library before its runtime.)
LD_PRELOAD=$TOOLS/libearlysig.so ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0 \
	cache_case earlysig "2 sleep=5:1" "1 earlysig:1" "2 sleep=5:1"
t_eq "a fork from a handler set before the agent started makes no trace cache" \
	"${walks:-none} ${entries:-none} $([ "${uncached:-0}" -ge 3 ] && [ "${uncached:-0}" -lt 16 ] && echo some)" "0 0 some"

# ---- the shipping budget (guard.md "Shipping budget"): the worst of the minute first, weighted ----
# about 290 slow requests of 5 ms and 8 of 300 ms in one minute, a budget of 40: every 300 ms one is
# shipped (its priority beats the small ones' but by a chance of about 1e-7), with weight 1; the
# others are a priority sample whose weights add up to about the violations counted
SM_GUARD_REPORTS_PER_MIN=40 SM_GUARD_APP=budget SM_GUARD_LABELS=run=budget guarded "$GT" epoll "$PORT" ||
	t_bail "guarded server"
mix=$("$GT" client "$PORT" 300 1 sleep=5:292,sleep=300:8) || t_fail "budget load"
gt_stop "$PORT"
big=$(awk '$1 == "sleep" && $2 == 300 {print $3}' <<<"$mix")
bq() { q "$1 FROM streams WHERE app = 'budget' AND role = 'violation'"; }
echo "budget: $big requests of 300 ms; $(bq "SELECT count(*) || ' streams, weights ' || min(weight) || ' to ' ||
	round(max(weight)::numeric, 2) || ', sum ' || round(sum(weight)::numeric, 1)"); counted:
	$(q "SELECT violations || ' violations, ' || drops || ' drops' FROM agent_procs WHERE app = 'budget'")"
t_eq "budget: every one of the worst violations is shipped, with weight 1" \
	"$(bq "SELECT count(*) FILTER (WHERE (labels->>'unit.duration_ns')::bigint >= 300000000 AND weight = 1),
	       count(*) FILTER (WHERE (labels->>'unit.duration_ns')::bigint >= 300000000)")" "$big|$big"
t_eq "budget: at most 40 streams per unit type, every weight at least 1, some above" \
	"$(q "SELECT max(n) <= 40, bool_and(ok), bool_or(above) FROM (SELECT count(*) AS n, bool_and(weight >= 1) AS ok,
	       bool_or(weight > 1) AS above FROM streams WHERE app = 'budget' AND role = 'violation'
	       GROUP BY symptom_unit_type) x")" "t|t|t"
# (the agent's exit line: a report's drops also count streams lost in sending, baselines' too)
line=$(grep "msg=\"exit\".* pid=$GPID " "$T_TMP/guard.log" | tail -n 1)
echo "budget: the agent's exit line: $line"
kept=$(($(kv violations) - $(kv suppressed) - $(kv queue_drops)))
stored=$(bq "SELECT count(*)")
t_eq "budget: the streams shipped are the violations counted less those sampled away (less any lost in sending)" \
	"$((stored <= kept && stored >= kept - $(kv lost)))" 1
# its last report says the same, if it arrived: a send that failed at the exit (lost) leaves the
# server out, the last report with it, and the report can fail on its own; an earlier report's
# counts stand then
procs=$(q "SELECT exited, violations, drops FROM agent_procs WHERE app = 'budget'")
IFS='|' read -r p_exited p_viol p_drops <<<"$procs"
if [ "$p_exited" = t ]; then
	t_eq "budget: the agent's last report has the exit line's counts" \
		"$p_viol|$((p_viol - p_drops))" "$(kv violations)|$((kept - $(kv lost)))"
else
	t_eq "budget: the agent's last report lost only with a send that failed at the exit, an earlier one's counts below" \
		"$([ -n "$procs" ] && echo reported)|$(($(kv lost) > 0 || $(grep -c "msg=\"report not delivered\".* pid=$GPID " "$T_TMP/guard.log") > 0))|$((p_viol <= $(kv violations)))" \
		"reported|1|1"
fi
# sum(weight) estimates the count: within a factor of 2 but with a chance of about 1e-4 (40 kept of ~300)
t_eq "budget: the weights add up to the violations counted (within a factor of 2)" \
	"$(bq "SELECT sum(weight) BETWEEN $(kv violations) / 2.0 AND $(kv violations) * 2.0")" t
# mined: each cluster's estimated cost is sum(weight x cost) over the AOI events it matched, exactly
run=$("$BIN/sm-miner" run --quiet --app budget --kind wait --aoi thread --threshold-fraction 0.05 \
	--no-baseline 2>"$T_TMP/miner.err") || t_fail "sm-miner run (budget)" "$(cat "$T_TMP/miner.err")"
t_eq "budget: a cluster's est_cost_ns is sum(weight x cost) over its matched stacks, and its est_streams" \
	"$(q "SELECT count(*), count(*) FILTER (WHERE c.est_cost_ns = x.est AND abs(c.est_streams - x.w) < 1e-6
	       AND c.total_cost_ns = x.cost), count(*) FILTER (WHERE c.est_cost_ns > c.total_cost_ns)
	       FROM clusters c, LATERAL (SELECT round(sum(s.weight::numeric * rs.cost_ns)) AS est, sum(rs.cost_ns) AS cost,
	        (SELECT sum(s2.weight) FROM streams s2 WHERE s2.id IN (SELECT rs2.stream_ref FROM run_stacks rs2
	         WHERE rs2.run_id = c.run_id AND rs2.kind = c.kind AND rs2.stack_id = ANY(c.stack_ids))) AS w
	        FROM run_stacks rs JOIN streams s ON s.id = rs.stream_ref
	        WHERE rs.run_id = c.run_id AND rs.kind = c.kind AND rs.stack_id = ANY(c.stack_ids)) x
	       WHERE c.run_id = $run" | sed 's/^\([0-9]*\)|\1|[1-9][0-9]*$/same/')" same
t_eq "budget: a pattern's est_cost_ns is sum(weight x cost) over its stacks" \
	"$(q "SELECT count(*) FILTER (WHERE p.est_cost_ns IS DISTINCT FROM (SELECT round(sum(s.weight::numeric * rs.cost_ns))
	       FROM run_stacks rs JOIN streams s ON s.id = rs.stream_ref WHERE rs.run_id = p.run_id AND rs.kind = p.kind
	       AND rs.stack_id = ANY(p.stack_ids))) FROM patterns p WHERE p.run_id = $run")" 0
t_eq "budget: a problem's est_cost_ns and est_streams weigh the events of its clusters, each once" \
	"$(q "SELECT count(*), count(*) FILTER (WHERE pr.est_cost_ns = x.est AND abs(pr.est_streams - x.w) < 1e-6
	       AND pr.total_cost_ns = x.cost) FROM problems pr, LATERAL (SELECT round(sum(s.weight::numeric * rs.cost_ns)) AS est,
	        sum(rs.cost_ns) AS cost, (SELECT sum(weight) FROM streams WHERE id IN (SELECT rs2.stream_ref FROM run_stacks rs2
	         WHERE rs2.run_id = pr.run_id AND (rs2.kind, rs2.stack_id) IN (SELECT c.kind, unnest(c.stack_ids)
	          FROM clusters c WHERE c.problem_id = pr.id))) AS w
	        FROM run_stacks rs JOIN streams s ON s.id = rs.stream_ref WHERE rs.run_id = pr.run_id
	        AND (rs.kind, rs.stack_id) IN (SELECT c.kind, unnest(c.stack_ids) FROM clusters c WHERE c.problem_id = pr.id)) x
	       WHERE pr.run_id = $run" | sed 's/^\([1-9][0-9]*\)|\1$/same/')" same

# ---- settings pushed by the server in the reports' answers: guarding off for an app, then on again ----
q "INSERT INTO agent_settings (app, guard, min_wait_us, reports_per_min) VALUES ('pushed', false, 5000, 100000)" >/dev/null
SM_GUARD_REPORT_S=1 SM_GUARD_APP=pushed guarded "$GT" epoll "$PORT" || t_bail "guarded server"
"$GT" client "$PORT" 20 1 fast:1 >/dev/null    # the first unit starts the agent's threads and its first report
# each step waits for the agent to say it applied the answer (a loaded machine's report may take longer
# than a fixed sleep: a slow request before it would count against the check)
pushed_applied() {
	for _ in $(seq 1 100); do
		grep "exe=guardtest" "$T_TMP/guard.log" 2>/dev/null | grep -q "$1" && return 0
		sleep 0.1
	done
	return 1
}
pushed_applied 'msg="guarding off (pushed by the server)"' || t_fail "pushed: guarding off was not applied in 10 s"
"$GT" client "$PORT" 10 1 sleep=60:1 >/dev/null
sleep 0.5
# (the slow requests only: a fast one slow on a loaded machine before the answer came is a violation
# that the new report limit ships at once)
slow="(labels->>'unit.duration_ns')::bigint >= 60000000"
muted=$(q "SELECT count(*) FROM streams WHERE app = 'pushed' AND role = 'violation' AND $slow")
q "UPDATE agent_settings SET guard = NULL, k = 7 WHERE app = 'pushed'" >/dev/null
pushed_applied 'msg="new thresholds"' || t_fail "pushed: guarding on again was not applied in 10 s"
"$GT" client "$PORT" 10 1 sleep=60:1 >/dev/null
gt_stop "$PORT"
t_eq "pushed: guarding off, slow requests are not violations" "$muted" 0
t_eq "pushed: guarding on again, every slow request is (reports_per_min pushed too)" \
	"$(q "SELECT count(*) FROM streams WHERE app = 'pushed' AND role = 'violation' AND $slow")" 10
log=$(grep "exe=guardtest" "$T_TMP/guard.log" | grep -A100 'msg="guarding off (pushed by the server)"')
t_match "pushed: the agent says what it applied" "$log" \
	'msg="new minimum wait".* min_wait_us=5000.*msg="new report limit".* reports_per_min=100000.*msg="guarding on again".*msg="new thresholds".* k=7'

# ---- the stripped copy: no symbol table, exported names from .dynsym only ----

read -r sa ss < <(nm -S "$GT" | awk '$4 == "spin_inner" {print $1, $2}')
SM_GUARD_REPORTS_PER_MIN=100000 guarded "$TOOLS/guardtest-stripped" epoll "$PORT" || t_bail "stripped server"
"$GT" client "$PORT" 200 2 fast:90,spin=40:10 >/dev/null || t_fail "stripped load"
gt_stop "$PORT"
ev=$(events_of "s.app = 'guardtest-stripped' AND e.kind = 'r' AND e.dur_ns > 0")
t_match "exported functions keep their names" "$ev" 'guardtest-stripped!spin_cpu'
inner=$(grep -o 'guardtest-stripped!spin_cpu;guardtest-stripped+0x[0-9a-f]*' <<<"$ev" | sed 's/.*+0x//' | sort -u)
# (or in the PLT, on the way to clock_gettime: a slow unit is sampled often enough to land there)
read -r pa ps < <(readelf -SW "$TOOLS/guardtest-stripped" | awk '$2 == ".plt" {print $4, $6}')
ok=1
for off in $inner; do
	(( (16#$off >= 16#$sa && 16#$off < 16#$sa + 16#$ss) || (16#$off >= 16#$pa && 16#$off < 16#$pa + 16#$ps) )) ||
		{ ok=0; echo "  under spin_cpu, outside spin_inner ($sa +$ss) and the PLT ($pa +$ps): 0x$off"; }
done
t_eq "the static function below it is module+offset, inside its own extent" "$ok:$([ -n "$inner" ] && echo some)" 1:some
t_eq "and never borrows a neighbour's name" "$(grep -c 'guardtest-stripped!\(handle_sleep\|read_file\|holder_work\)' <<<"$ev")" 0

# ---- a thread pool and a lock convoy ----

rm -f "$T_TMP/server.out"
"$GUARD" run --train --profile-dir "$PROF" --log "$T_TMP/guard.log" -- "$GT" pool "$PORT" 4 >"$T_TMP/server.out" 2>&1 &
GPID=$!
wait_ready
"$GT" client "$PORT" 20000 8 fast:90,file:10 >/dev/null || t_fail "pool training load"
"$GT" client "$PORT" 1 1 quit:1 >/dev/null 2>&1
"$GT" client "$PORT" 1 1 fast:1 >/dev/null 2>&1
wait "$GPID"
t_match "the pool's loop sites: the workers' condition wait" "$("$GUARD" profile show "$PROF/$bid.json")" \
	"loop [0-9]+: guardtest!worker_main"
SM_GUARD_REPORTS_PER_MIN=100000 SM_GUARD_APP=pool guarded "$GT" pool "$PORT" 4 || t_bail "pool server"
mix=$("$GT" client "$PORT" 400 4 fast:90,convoy=50:10) || t_fail "convoy load"
"$GT" client "$PORT" 1 1 quit:1 >/dev/null 2>&1
"$GT" client "$PORT" 1 1 fast:1 >/dev/null 2>&1
wait "$GPID"
convoys=$(awk '$1 == "convoy" {print $3}' <<<"$mix")
ev=$(events_of "s.app = 'pool' AND e.kind = 'w'")
lockwaits=$(grep '^w .*guardtest!take_big_lock;libc\.so\.6!pthread_mutex_lock$' <<<"$ev")
t_match "the convoy's lock waits are there" "$(grep -c . <<<"$lockwaits")" '^[1-9][0-9]*$'
t_eq "each has a readier" "$(awk '$4 == 0' <<<"$lockwaits")" ""
# the first waiter is readied by the holder, the next by the first, and so on: the holder is reached
# (a stream whose unit only overlapped a convoy, its own thread never in it, is not one of them)
t_eq "the holder readies a lock wait in every stream whose unit waited in the convoy" \
	"$(q "SELECT count(*) FROM streams s WHERE app = 'pool' AND EXISTS (SELECT 1 FROM events e JOIN stacks k ON
	       k.id = e.stack_id JOIN events h ON h.stream_ref = s.id AND h.tid = e.readier_tid AND h.kind = 'w'
	       JOIN stacks hk ON hk.id = h.stack_id WHERE e.stream_ref = s.id AND e.kind = 'w' AND
	       (SELECT id FROM frames WHERE name = 'guardtest!take_big_lock') = ANY(k.frame_ids) AND
	       (SELECT id FROM frames WHERE name = 'guardtest!holder_work') = ANY(hk.frame_ids))
	       AND EXISTS (SELECT 1 FROM events e JOIN stacks k ON k.id = e.stack_id WHERE e.stream_ref = s.id
	       AND e.tid = s.symptom_tid AND e.kind = 'w' AND
	       (SELECT id FROM frames WHERE name = 'guardtest!take_big_lock') = ANY(k.frame_ids))")" \
	"$(q "SELECT count(*) FROM streams s WHERE app = 'pool' AND EXISTS (SELECT 1 FROM events e JOIN stacks k ON
	       k.id = e.stack_id WHERE e.stream_ref = s.id AND e.tid = s.symptom_tid AND e.kind = 'w' AND
	       (SELECT id FROM frames WHERE name = 'guardtest!take_big_lock') = ANY(k.frame_ids))")"
echo "streams with a convoy lock wait of another thread only: $(q "SELECT coalesce(string_agg(s.role || ' ' ||
	(s.labels->>'unit.state') || ' ' || (s.labels->>'unit.duration_ns') || ' ' || s.weight, '; '), 'none')
	FROM streams s WHERE app = 'pool' AND NOT EXISTS (SELECT 1 FROM events e JOIN stacks k ON k.id = e.stack_id
	WHERE e.stream_ref = s.id AND e.tid = s.symptom_tid AND e.kind = 'w' AND (SELECT id FROM frames WHERE
	name = 'guardtest!take_big_lock') = ANY(k.frame_ids)) AND EXISTS (SELECT 1 FROM events e JOIN stacks k ON
	k.id = e.stack_id WHERE e.stream_ref = s.id AND e.kind = 'w' AND (SELECT id FROM frames WHERE
	name = 'guardtest!take_big_lock') = ANY(k.frame_ids))")"
# a worker may take two queued jobs in one unit: count the convoys by their distinct lock waits, the
# ones behind the holder's 50 ms (not a short wait for the holder's hand-off mutex on a busy machine)
t_eq "every convoy's lock wait is reported" \
	"$(q "SELECT count(DISTINCT (e.tid, e.ts_ns)) FROM events e JOIN streams s ON s.id = e.stream_ref JOIN stacks k
	       ON k.id = e.stack_id WHERE s.app = 'pool' AND e.kind = 'w' AND e.dur_ns >= 25000000 AND
	       (SELECT id FROM frames WHERE name = 'guardtest!take_big_lock') = ANY(k.frame_ids) AND
	       k.frame_ids[cardinality(k.frame_ids)] = (SELECT id FROM frames WHERE name = 'libc.so.6!pthread_mutex_lock')")" \
	"$convoys"
# the workers, the connections' threads and the holder named themselves (pthread_setname_np), the
# accepting main thread is the program's comm: the agent read each thread's comm (a connection's
# thread may have ended before its stream was built, on a loaded machine: it has no name then)
t_eq "the pool's streams name their symptom thread (workers among them) and the holder that readies the convoy" \
	"$(q "SELECT count(*) FILTER (WHERE thread_names->>(symptom_tid::text) = 'gt-worker') > 0,
	       count(*) FILTER (WHERE coalesce(thread_names->>(symptom_tid::text), 'gone')
	                        IN ('gt-worker', 'gt-conn', 'guardtest', 'gone')) = count(*),
	       bool_or(EXISTS (SELECT 1 FROM jsonb_each_text(thread_names) t WHERE t.value = 'gt-holder'))
	       FROM streams WHERE app = 'pool'")" "t|t|t"
run=$("$BIN/sm-miner" run --quiet --app pool --kind wait --aoi waitgraph --threshold-fraction 0.2 2>"$T_TMP/miner.err") ||
	t_fail "sm-miner run" "$(cat "$T_TMP/miner.err")"
top=$("$BIN/sm-miner" show "$run" --limit 2)
echo "$top" | sed 's/^/  | /'
t_match "mined through the readier edges, the holder's sleep is a top pattern" "$top" 'guardtest!holder_work'
t_match "beside the lock waits" "$top" 'guardtest!take_big_lock'

# ---- the backend hangs: the program goes on, streams wait in the spool ----

# a server that accepts connections and never answers: the worst case for a sender
"$py" -c 'import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(64)
print(s.getsockname()[1], flush=True); time.sleep(120)' >"$T_TMP/hole.port" &
HOLE=$!
t_cleanup "kill $HOLE 2>/dev/null"
for _ in $(seq 1 50); do [ -s "$T_TMP/hole.port" ] && break; sleep 0.1; done
rm -f "$T_TMP/server.out"
"$GUARD" run --profile-dir "$PROF" --log "$T_TMP/guard.log" --url "http://127.0.0.1:$(cat "$T_TMP/hole.port")" \
	--spool "$T_TMP/spool" --label run=offline -- "$GT" epoll "$PORT" >"$T_TMP/server.out" 2>&1 &
GPID=$!
wait_ready
"$GT" client "$PORT" 3 1 sleep=30:1 >/dev/null || t_fail "offline slow requests"
# the shipping thread is stuck on the black hole now; the program must not notice
mix=$("$GT" client "$PORT" 4000 4 fast:1) || t_fail "offline load"
slowest=$(awk '$1 == "fast" {print $3}' <<<"$mix")
echo "slowest of 4000 fast requests while the backend hangs: $slowest us"
t_eq "fast requests stay fast (under 50 ms)" "$([ "${slowest:-999999}" -lt 50000 ] && echo yes)" yes
start=$(date +%s%N)
gt_stop "$PORT"
echo "exit took $(( ($(date +%s%N) - start) / 1000000 )) ms"
spooled=$(ls "$T_TMP/spool"/*.json 2>/dev/null | wc -l)
# the three slow requests at least (a fast one slowed past its 1 ms threshold on a busy machine counts too)
exit_line
viol=$(kv violations)
base=$(kv baseline)
# those the shipping budget kept (6 per unit type and minute; more violate on a busy machine)
sup=$(kv suppressed)
t_eq "at exit, the violations kept (and the baseline units) go to the spool" \
	"$spooled|$([ "${viol:-0}" -ge 3 ] && echo 3+)" "$((${viol:-0} - ${sup:-0} + ${base:-0}))|3+"
"$BIN/sm-agent" drain --url "$INGEST_URL" --token-file "$T_TMP/token" --spool "$T_TMP/spool" >/dev/null 2>&1 ||
	t_fail "sm-agent drain"
t_eq "a later drain delivers them" "$(q "SELECT count(*) FROM streams WHERE labels->>'run' = 'offline'")" "$spooled"

# ---- profiles of one build learnt apart, merged ----

for part in a b; do
	mix=fast:1
	[ $part = b ] && mix=fast:50,file:50
	# each "host" uploads what it learnt when it exits (and every SM_GUARD_PROFILE_UPLOAD_S)
	rm -f "$T_TMP/server.out"
	"$GUARD" run --train --profile-dir "$T_TMP/prof-$part" --log "$T_TMP/guard.log" --url "$INGEST_URL" \
		--token-file "$T_TMP/token" --host "train-$part" -- "$GT" epoll "$PORT" >"$T_TMP/server.out" 2>&1 &
	GPID=$!
	wait_ready
	"$GT" client "$PORT" 5000 2 "$mix" >/dev/null
	gt_stop "$PORT"
done
"$GUARD" profile merge "$T_TMP/prof-a/$bid.json" "$T_TMP/prof-b/$bid.json" >"$T_TMP/merged.json" ||
	t_fail "sm-guard profile merge"
"$py" - "$T_TMP/prof-a/$bid.json" "$T_TMP/prof-b/$bid.json" "$T_TMP/merged.json" <<'PY' >"$T_TMP/merge.out" 2>&1
import json, sys
a, b, m = (json.load(open(p)) for p in sys.argv[1:])
def loop(p):
    return p["loops"][0]["units"]
la, lb, lm = loop(a), loop(b), loop(m)
n = la["n"] + lb["n"]
mean = (la["n"] * la["mean_ns"] + lb["n"] * lb["mean_ns"]) / n
m2 = la["m2"] + lb["m2"] + (lb["mean_ns"] - la["mean_ns"]) ** 2 * la["n"] * lb["n"] / n
print("units", lm["n"] == n and m["units"] == a["units"] + b["units"])
print("mean", abs(lm["mean_ns"] - mean) < 1e-6 * mean)
print("variance", abs(lm["m2"] - m2) < 1e-6 * m2)
tn = sum(t["n"] for t in m["loops"][0]["types"])
print("types", tn == sum(c["n"] for c in m["loops"][0]["classes"]))
PY
t_eq "merged: units add up" "$(grep '^units' "$T_TMP/merge.out")" "units True"
t_eq "merged: the pooled mean" "$(grep '^mean' "$T_TMP/merge.out")" "mean True"
t_eq "merged: the pooled variance" "$(grep '^variance' "$T_TMP/merge.out")" "variance True"
t_eq "merged: the types cover every class" "$(grep '^types' "$T_TMP/merge.out")" "types True"
other=$(ls "$PROF"/*.json | grep -v "$bid" | head -n 1)
out=$("$GUARD" profile merge "$T_TMP/merged.json" "$other" 2>&1)
t_match "profiles of two builds are not merged" "$out" "profiles of different builds .* cannot be merged"
# ---- the fleet's profile: uploaded by both, merged by the server, fetched by a new host ----
t_eq "fleet: each training process uploaded what it learnt" \
	"$(q "SELECT string_agg(host || ':' || (units > 0)::text, ',' ORDER BY host) FROM profile_uploads WHERE build_id = :'bid'")" \
	"train-a:true,train-b:true"
t_eq "fleet: the server merged them" \
	"$(q "SELECT hosts, processes, units = (SELECT sum(units) FROM profile_uploads WHERE build_id = :'bid'), stale,
	       jsonb_array_length(summary->'loops') > 0 FROM profiles_merged WHERE build_id = :'bid'")" "2|2|t|f|t"
out=$("$GUARD" profile fetch --url "$INGEST_URL" --token-file "$T_TMP/token" --profile-dir "$T_TMP/prof-fleet" "$GT")
t_match "fleet: sm-guard profile fetch writes the build's profile" "$out" "^$T_TMP/prof-fleet/$bid\.json: the fleet's profile of "
# (but its thresholds: the server keeps each within the hosts' own, which pooling the two hosts' spread
# may pass; checked below with "a merged threshold stays within the hosts' own")
nothr() { sed -E 's/threshold [0-9.]+ [mun]?s//g'; }
t_eq "fleet: the server's merge is sm-guard profile merge's (same units, types, statistics)" \
	"$("$GUARD" profile show "$T_TMP/prof-fleet/$bid.json" | nothr)" "$("$GUARD" profile show "$T_TMP/merged.json" | nothr)"
out=$("$GUARD" profile fetch --url "$INGEST_URL" --token-file "$T_TMP/token" --profile-dir "$T_TMP/prof-fleet" /bin/true 2>&1)
t_eq "fleet: a build nobody trained" "$?|$out" "3|sm-guard: profile fetch: the server has no profile of this build yet"
# a host new to the build: sm-guard run fetches the fleet's profile first, so the agent guards at once
rm -f "$T_TMP/server.out"
"$GUARD" run --profile-dir "$T_TMP/prof-new" --log "$T_TMP/guard.log" --url "$INGEST_URL" --token-file "$T_TMP/token" \
	--host new-host -- "$GT" epoll "$PORT" >"$T_TMP/server.out" 2>&1 &
GPID=$!
wait_ready
"$GT" client "$PORT" 200 1 fast:1 >/dev/null
sleep 1   # the baseline unit's stream on its way (at exit it would go to the spool)
gt_stop "$PORT"
t_eq "fleet: a new host guards at once with the fleet's profile" \
	"$(q "SELECT mode FROM agent_procs WHERE host = 'new-host'")|$(ls "$T_TMP/prof-new")" "guard|$bid.json"
# its normal units: the first of each unit type is shipped as a baseline stream (one a minute)
t_eq "baseline: one normal unit per unit type shipped, built like a violation" \
	"$(q "SELECT count(*) >= 1, count(*) = count(DISTINCT coalesce(symptom_unit_type, '')), min(symptom_kind),
	       bool_and(coalesce(symptom_unit_type, 'unknown') = labels->>'unit.type'), bool_and(n_events > 0),
	       min(labels->>'unit.state'), bool_and((labels->>'unit.duration_ns')::bigint <= symptom_threshold_ns)
	      FROM streams WHERE host = 'new-host' AND role = 'baseline'")" "t|t|unit_sample|t|t|ended|t"
t_eq "baseline: counted at exit" "$(grep 'msg="exit"' "$T_TMP/guard.log" | tail -n 1 | sed -n 's/.* baseline=\([0-9]*\).*/\1/p')" \
	"$(q "SELECT count(*) FROM streams WHERE host = 'new-host' AND role = 'baseline'")"
# a guarding process takes a newer fleet profile of its build while it runs (same loops: swapped at once)
mkdir -p "$T_TMP/prof-own" && cp "$T_TMP/prof-a/$bid.json" "$T_TMP/prof-own/"
rm -f "$T_TMP/server.out"
SM_GUARD_PROFILE_FETCH_S=1 "$GUARD" run --profile-dir "$T_TMP/prof-own" --log "$T_TMP/refresh.log" --url "$INGEST_URL" \
	--token-file "$T_TMP/token" --host train-a -- "$GT" epoll "$PORT" >"$T_TMP/server.out" 2>&1 &
GPID=$!
wait_ready
"$GT" client "$PORT" 300 1 fast:1 >/dev/null
sleep 1.5
"$GT" client "$PORT" 300 1 fast:1 >/dev/null
gt_stop "$PORT"
t_match "fleet: a guarding process takes the fleet's newer profile of its build" "$(cat "$T_TMP/refresh.log")" \
	"msg=\"guarding with the fleet's profile\".* units=$(q "SELECT units FROM profiles_merged WHERE build_id = :'bid'")"

# uploads that are refused, with the field and the reason
upload() { # upload TOKEN BODY
	http POST "$INGEST_URL/api/v1/profiles" -H "Authorization: Bearer $1" -H "Content-Type: application/json" \
		--data-binary "$2"
}
PJ=$(tr -d '\n' <"$T_TMP/prof-a/$bid.json")
HT=$(sm_admin token create --role ingest --host train-a 2>/dev/null)
upload "$HT" "{\"v\":1,\"host\":\"train-b\",\"pid\":7,\"started_ns\":1,\"profile\":$PJ}"
t_eq "fleet upload: a host token uploads for its host only" "$HTTP_STATUS $HTTP_BODY" \
	"403 {\"error\":\"host: this token uploads for host 'train-a' only\"}"
upload "$HT" "{\"v\":1,\"host\":\"train-a\",\"pid\":7,\"started_ns\":1,\"profile\":{\"format\":\"stackmine-guard-profile\",\"v\":1}}"
t_eq "fleet upload: a damaged profile" "$HTTP_STATUS $HTTP_BODY" '400 {"error":"profile: build_id: missing or not a string"}'
upload "$HT" "{\"v\":1,\"host\":\"train-a\",\"started_ns\":1,\"profile\":$PJ}"
t_eq "fleet upload: pid missing" "$HTTP_STATUS $HTTP_BODY" '400 {"error":"pid: required, a whole number from 1 to 2147483647"}'
upload "$HT" "{\"v\":1,\"host\":\"train-a\",\"pid\":7,\"started_ns\":1,\"profile\":[]}"
t_eq "fleet upload: no profile object" "$HTTP_STATUS $HTTP_BODY" '400 {"error":"profile: required, the profile object (docs/guard.md)"}'
# the tree the loader builds is bounded: one object or array per 24 bytes at most, 2 MiB at most
# (arrays of 9 zeros are one per 20 bytes; of 13, one per 28: past the budget, to the profile's check)
pad() { python3 -c "import sys; print('[' + ','.join(['[' + ','.join(['0'] * int(sys.argv[2])) + ']'] * int(sys.argv[1])) + ']')" "$@"; }
upload "$HT" "{\"v\":1,\"host\":\"train-a\",\"pid\":7,\"started_ns\":1,\"profile\":{\"pad\":$(pad 2000 9)}}"
t_match "fleet upload: a bomb of arrays" "$HTTP_STATUS $HTTP_BODY" \
	'^400 \{"error":"not JSON: body: more than [0-9]+ objects and arrays in [0-9]+ bytes, over the budget of 64 plus one per 24 bytes'
upload "$HT" "{\"v\":1,\"host\":\"train-a\",\"pid\":7,\"started_ns\":1,\"profile\":{\"pad\":$(pad 2000 13)}}"
t_eq "fleet upload: one array per 28 bytes is within the budget" "$HTTP_STATUS $HTTP_BODY" \
	'400 {"error":"profile: format: missing or not a string"}'
python3 -c "import sys; sys.stdout.write('{\"v\":1,\"host\":\"train-a\",\"pid\":7,\"started_ns\":1,\"profile\":{\"pad\":\"' + 'x' * (2 << 20) + '\"}}')" \
	>"$T_TMP/big-upload.json"
upload "$HT" "@$T_TMP/big-upload.json"
t_eq "fleet upload: over 2 MiB" "$HTTP_STATUS $HTTP_BODY" \
	"400 {\"error\":\"body: a profile upload is at most 2097152 bytes, this one $(stat -c %s "$T_TMP/big-upload.json")\"}"
# a real profile written without a space (its contexts, one object and one array each, in 66 bytes)
PC=$(python3 -c "import json, sys; print(json.dumps(json.load(open(sys.argv[1])), separators=(',', ':')))" "$T_TMP/prof-a/$bid.json")
upload "$HT" "{\"v\":1,\"host\":\"train-a\",\"pid\":7,\"started_ns\":1,\"profile\":$PC}"
t_eq "fleet upload: a real profile with no space in it is taken" "$HTTP_STATUS" 200
t_eq "fleet upload: nothing refused was stored (beside it)" "$(q "SELECT count(*) FROM profile_uploads")" 3
upload "$HT" "{\"v\":1,\"host\":\"train-a\",\"pid\":7,\"started_ns\":1,\"profile\":$PJ}"
# (the same process again: its upload replaced)
t_eq "fleet upload: another process of a host is stored, its host still merged once" \
	"$HTTP_STATUS $HTTP_BODY|$(q "SELECT hosts, processes FROM profiles_merged WHERE build_id = :'bid'")" '200 {"ok":true}|2|3'
http GET "$INGEST_URL/api/v1/profiles/ABC" -H "Authorization: Bearer $TOKEN"
t_eq "fleet fetch: not a build id" "$HTTP_STATUS $HTTP_BODY" \
	'404 {"error":"build_id: lower-case hex (or path- and hex), 1 to 128 characters"}'
http GET "$INGEST_URL/api/v1/profiles/abc123" -H "Authorization: Bearer $TOKEN"
t_eq "fleet fetch: a build nobody trained" "$HTTP_STATUS $HTTP_BODY" '404 {"error":"build_id abc123: no profile learnt yet"}'
http GET "$INGEST_URL/api/v1/profiles/$bid"
t_eq "fleet fetch: a token is needed" "$HTTP_STATUS" 401
http POST "$INGEST_URL/api/v1/profiles/$bid" -H "Authorization: Bearer $TOKEN"
t_eq "fleet fetch: GET only" "$HTTP_STATUS $HTTP_BODY" '405 {"error":"method: use GET"}'
# ---- a host cannot poison a build's profile: bounded uploads, a host counted once, a robust merge ----
# (docs/fleet.md, "Bounds and a robust merge"); uploads made from the seed profile of
# tests/guard/ (one loop, 554131 units), its durations scaled per host
SEED=$SM_REPO/tests/guard/profile-seed.json
sbid=a50d6825e71f1473372299161f75fe50e80452de
# seed_upload HOST PID AGE_S SCALE [N MEAN_NS]: the body of an upload by a process started AGE_S ago
# (AGE_S "epoch": in 1970); N and MEAN_NS replace the loop's count and mean
seed_upload() {
	"$py" - "$SEED" "$@" <<'PY'
import json, sys, time
seed, host, pid, age, scale = sys.argv[1:6]
p = json.load(open(seed))
s = float(scale)
def sc(st):
    st["mean_ns"] *= s
    st["m2"] *= s * s
for l in p["loops"]:
    sc(l["units"])
    for c in l["classes"] + l["types"]:
        sc(c)
        c["sizes"] = [[b, n, m * s, m2 * s * s] for b, n, m, m2 in c["sizes"]]
if len(sys.argv) > 6:
    p["loops"][0]["units"]["n"] = int(sys.argv[6])
    p["loops"][0]["units"]["mean_ns"] = float(sys.argv[7])
started = 1 if age == "epoch" else time.time_ns() - int(age) * 10**9
print(json.dumps({"v": 1, "host": host, "pid": int(pid), "started_ns": started, "profile": p}))
PY
}
# loop_thr < PROFILE: its first loop's n, and the lowest and highest of its thresholds (the loop's,
# its types', by size)
loop_thr() {
	"$py" -c 'import json, sys
l = json.load(sys.stdin)["loops"][0]
t = [l["threshold_ns"]] + [x["threshold_ns"] for x in l["types"]] + [v for x in l["types"] for v in x["size_thresholds_ns"]]
print(l["units"]["n"], min(t), max(t))'
}
merged_loop() { # that of the build's merged profile
	http GET "$INGEST_URL/api/v1/profiles/$sbid" -H "Authorization: Bearer $TOKEN"
	loop_thr <<<"$HTTP_BODY"
}
for h in 1:1.0 2:1.2 3:0.8; do
	upload "$TOKEN" "$(seed_upload "honest-${h%%:*}" 1 86400 "${h#*:}")"
done
t_eq "poisoning: three honest hosts merged" "$HTTP_STATUS|$(q "SELECT hosts, processes, units, held_back FROM profiles_merged WHERE build_id = '$sbid'")" \
	"200|3|3|1662393|[]"
read -r hn hlo hhi <<<"$(merged_loop)"
read -r _ slo shi < <(loop_thr <"$SEED")
t_eq "poisoning: the honest merge within the honest hosts' thresholds" \
	"$hn $((hlo >= slo * 8 / 10 && hhi <= shi * 12 / 10 && hlo > 0))" "1662393 1"
# the upload of issue 25: n = 2^63-1, mean 9e18 ns, from a process started a day ago
upload "$TOKEN" "$(seed_upload evil 1 86400 1 9223372036854775807 9e18)"
t_match "poisoning: counts beyond what one process can have learnt are refused, naming the field" "$HTTP_STATUS $HTTP_BODY" \
	'^400 \{"error":"profile: loops\[0\]\.units\.n: 9223372036854775807 units in 864[0-9]{2} s since started_ns; at most 864[0-9]{10} \(one per 10 ns\)"\}$'
upload "$TOKEN" "$(seed_upload evil 1 86400 1 1000 9e18)"
t_match "poisoning: a mean longer than the process has lived is refused" "$HTTP_STATUS $HTTP_BODY" \
	'^400 \{"error":"profile: loops\[0\]\.units\.mean_ns: 9000000000000000000 ns is longer than the process has lived \(864[0-9]{2} s\)"\}$'
t_eq "poisoning: the merge unchanged" "$(merged_loop)" "$hn $hlo $hhi"
# within the bounds (a process "started" in 1970) but far off the others: held back, and shown
upload "$TOKEN" "$(seed_upload evil 1 epoch 1000)"
upload "$TOKEN" "$(seed_upload evil-low 1 epoch 0.0001)"
t_eq "poisoning: hosts far off the others are held back" \
	"$HTTP_STATUS|$(q "SELECT hosts, processes, units, jsonb_path_query_array(held_back, '\$[*].host') FROM profiles_merged WHERE build_id = '$sbid'")" \
	'200|3|5|1662393|["evil", "evil-low"]'
t_match "poisoning: with the reason" "$(q "SELECT held_back->0->>'reason' FROM profiles_merged WHERE build_id = '$sbid'")" \
	'^loop redis-check-rdb\+0x64e50: threshold [0-9.,]+ (s|ms|µs|ns), 1,000 times the median of 5 hosts \([0-9.,]+ (s|ms|µs|ns)\): more than 4 times and 3 MADs off$'
t_eq "poisoning: the merged profile's n and thresholds are the honest hosts'" "$(merged_loop)" "$hn $hlo $hhi"
echo "merge of 5 hosts' uploads of the seed profile, 2 held back: $(q "SELECT merge_ms FROM profiles_merged WHERE build_id = '$sbid'") ms"
# a host counts once: its latest upload (another process's) replaces its earlier one
upload "$TOKEN" "$(seed_upload honest-1 2 60 1.0)"
t_eq "a host uploading twice is counted once" \
	"$HTTP_STATUS|$(q "SELECT hosts, processes, units FROM profiles_merged WHERE build_id = '$sbid'")|$(merged_loop)" \
	"200|3|6|1662393|$hn $hlo $hhi"
upload "$TOKEN" "$(seed_upload honest-1 3 60 1.1)"
t_eq "its latest upload is the one merged" "$(merged_loop | cut -d' ' -f1)|$([ "$(merged_loop)" != "$hn $hlo $hhi" ] && echo changed)" \
	"1662393|changed"
# two hosts learnt tight, apart: pooled, the spread between them would make a threshold above both
# tight HOST MEAN_NS [ASYNC_MEAN_NS BUILD]: 1000 units of MEAN_NS, sd 1 us (and 1000 deferred requests)
tight() {
	"$py" - "$@" <<'PY'
import json, sys, time
host, mean = sys.argv[1], float(sys.argv[2])
st = {"n": 1000, "mean_ns": mean, "m2": 1e6 * 999}
bid = sys.argv[4] if len(sys.argv) > 4 else "7e57"
p = {"format": "stackmine-guard-profile", "v": 1, "build_id": bid, "exe": "/bin/tight", "k": 4, "cut": 0.5,
     "updated": "2026-11-24T13:25:34Z", "units": 1000, "modules": [{"name": "tight", "build_id": "7e57"}], "frames": [],
     "loops": [{"site": {"module": 0, "offset": "0x10", "depth": 64, "call": "epoll_wait"}, "symbol": "tight!loop",
                "threads": 1, "units": st, "threshold_ns": 0, "contexts": [],
                "classes": [dict(st, contexts=[], sizes=[[0, 1000, mean, 1e6 * 999]], type=0)], "types": []}]}
if len(sys.argv) > 3:
    p["loops"][0]["async"] = {"n": 1000, "mean_ns": float(sys.argv[3]), "m2": 1e6 * 999}
    p["loops"][0]["async_threshold_ns"] = 0
print(json.dumps({"v": 1, "host": host, "pid": 1, "started_ns": time.time_ns() - 3600 * 10**9, "profile": p}))
PY
}
upload "$TOKEN" "$(tight tight-1 1000000)"
upload "$TOKEN" "$(tight tight-2 3000000)"
http GET "$INGEST_URL/api/v1/profiles/7e57" -H "Authorization: Bearer $TOKEN"
t_eq "a merged threshold stays within the hosts' own (1.004 to 3.004 ms: 6 ms pooled, kept at 3.004)" "$HTTP_STATUS $(loop_thr <<<"$HTTP_BODY")" \
	"200 2000 3004000 3004000"
# deferred requests (docs/guard.md "Deferred requests") have their own threshold, held back and clamped
# apart: one host's slow ones cannot raise it for the fleet
async_thr() { "$py" -c 'import json, sys; print(json.load(sys.stdin)["loops"][0]["async_threshold_ns"])'; }
for h in 1:1000000 2:1200000 3:900000; do
	upload "$TOKEN" "$(tight "async-${h%%:*}" 1000000 "${h#*:}" 7e58)"
done
http GET "$INGEST_URL/api/v1/profiles/7e58" -H "Authorization: Bearer $TOKEN"
honest=$(async_thr <<<"$HTTP_BODY")
upload "$TOKEN" "$(tight async-evil 1000000 3000000000 7e58)"
http GET "$INGEST_URL/api/v1/profiles/7e58" -H "Authorization: Bearer $TOKEN"
t_eq "deferred requests: a host's far slower ones are held back; the merged threshold the honest hosts'" \
	"$HTTP_STATUS $(async_thr <<<"$HTTP_BODY") $(q "SELECT jsonb_path_query_array(held_back, '\$[*].host') FROM profiles_merged WHERE build_id = '7e58'")" \
	"200 $honest [\"async-evil\"]"
t_match "deferred requests: the reason names them" "$(q "SELECT held_back->0->>'reason' FROM profiles_merged WHERE build_id = '7e58'")" \
	'^loop tight!loop async: threshold 3(\.[0-9]+)? s, '
upload "$TOKEN" "$(tight apart-1 1000000 1000000 7e59)"
upload "$TOKEN" "$(tight apart-2 1000000 3000000 7e59)"
http GET "$INGEST_URL/api/v1/profiles/7e59" -H "Authorization: Bearer $TOKEN"
t_eq "deferred requests: the merged threshold within the hosts' own (kept at 3.004 ms)" "$HTTP_STATUS $(async_thr <<<"$HTTP_BODY")" \
	"200 3004000"
printf '{"format":"stackmine-guard-profile","v":1}' >"$T_TMP/bad.json"
t_eq "a damaged profile is named with its field" "$("$GUARD" profile show "$T_TMP/bad.json" 2>&1)" \
	"sm-guard: $T_TMP/bad.json: build_id: missing or not a string"

stop_ingest
t_done
