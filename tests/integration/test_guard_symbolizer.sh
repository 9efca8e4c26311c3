#!/usr/bin/env bash
# The host's collector names a build's frames with one symbolizer (docs/guard.md "The host's
# collector"): two guardtest servers of one build, the first started without address space
# randomization and the second with it, so their modules lie at different addresses. The second
# process must share the first's symbolizer (the collector's log says so) and its sleeps' stacks must
# be named exactly as the first's, from the program's entry down to nanosleep.
#
# (It runs after test_guard_servers on purpose: with these two servers in test_guard_collector,
# the false-positive bar of the PostgreSQL run that follows it failed in five runs of six.)
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../guard_lib.sh"

DIR=$T_TMP/collector
export SM_GUARD_COLLECTOR_DIR=$DIR

sm_admin migrate >/dev/null || t_bail "migrate"
TOKEN=$(mk_token ingest 2>/dev/null)
printf '%s\n' "$TOKEN" >"$T_TMP/token"
start_ingest || t_bail "sm-ingest starts"

# serve RUN PORT PREFIX...: guardtest epoll on PORT under the agent, labelled run=RUN, as GPID
serve() {
	local run=$1 port=$2 out=$T_TMP/server-$2.out
	shift 2
	rm -f "$out"
	SM_GUARD_ONLY=guardtest SM_GUARD_REPORTS_PER_MIN=100000 "$GUARD" run --profile-dir "$PROF" \
		--log "$T_TMP/guard.log" --url "$INGEST_URL" --token-file "$T_TMP/token" --label run="$run" \
		-- "$@" "$GT" epoll "$port" >"$out" 2>&1 &
	GPID=$!
	gt_ready "$out" "server $run" || t_done
}
# the address where process $1 maps guardtest's first segment
base_of() { awk -v gt="$GT" '$6 == gt { print $1; exit }' /proc/"$1"/maps; }
# the sleeps' stacks in the streams of run $1, as "w FRAMES" lines
sleep_stacks() {
	stream_events "s.labels->>'run' = '$1' AND s.role = 'violation'" | cut -d' ' -f1,5- |
		grep '^w .*handle_sleep' | sort -u
}

# ---- train (no collector: a trained profile is the process's own) ----
PORT1=$(free_port)
rm -f "$T_TMP/train.out"
"$GUARD" run --train --profile-dir "$PROF" --log "$T_TMP/guard.log" -- "$GT" epoll "$PORT1" >"$T_TMP/train.out" 2>&1 &
GPID=$!
gt_ready "$T_TMP/train.out" "the training server" || t_done
"$GT" client "$PORT1" 5000 2 fast:80,file:20 >/dev/null || t_fail "training load"
gt_stop "$PORT1"

# ---- two servers of one build, apart ----
collector_start "$DIR" "$T_TMP/collector.log" --spool "$T_TMP/cspool" --report-s 1 --tick-ms 20
serve apart1 "$PORT1" setarch "$(uname -m)" -R
G1=$GPID
"$GT" client "$PORT1" 40 1 fast:35,sleep=60:5 >/dev/null || t_fail "the first one's load"
PORT2=$(free_port)
serve apart2 "$PORT2"
G2=$GPID
"$GT" client "$PORT2" 40 1 fast:35,sleep=60:5 >/dev/null || t_fail "the second one's load"

t_match "both are guarded through the collector" \
	"$(grep -E "pid=($G1|$G2) " "$T_TMP/guard.log" | grep -c 'msg="guarding".*collector=host')" '^2$'
b1=$(base_of "$G1")
b2=$(base_of "$G2")
t_eq "the two processes have guardtest at different addresses" "$([ -n "$b1" ] && [ "$b1" != "$b2" ] && echo yes)" yes
for _ in $(seq 1 300); do
	grep -q "msg=\"symbolizer [a-z]*\" pid=$G2 " "$T_TMP/collector.log" && break
	sleep 0.05
done
t_match "the first one opened a symbolizer" "$(grep "msg=\"symbolizer [a-z]*\" pid=$G1 " "$T_TMP/collector.log")" \
	'msg="symbolizer opened"'
t_match "the second one's frames are named by the first one's symbolizer" \
	"$(grep "msg=\"symbolizer [a-z]*\" pid=$G2 " "$T_TMP/collector.log")" 'msg="symbolizer shared".* processes=2( |$)'
GPID=$G2
gt_stop "$PORT2"
GPID=$G1
gt_stop "$PORT1"
for _ in $(seq 1 300); do
	[ "$(pg_q "SELECT count(DISTINCT labels->>'run') FROM streams
	           WHERE labels->>'run' IN ('apart1', 'apart2') AND role = 'violation'")" = 2 ] && break
	sleep 0.1
done
ev1=$(sleep_stacks apart1)
t_match "the first one's sleeps are named from its entry down to nanosleep" "$ev1" \
	'^w [^ ]*libc\.so\.6!__libc_start_main;.*guardtest!handle_sleep;libc\.so\.6!nanosleep$'
t_eq "the second one's are named alike" "$(sleep_stacks apart2)" "$ev1"
t_eq "no frame of either is unknown" \
	"$(stream_events "s.labels->>'run' IN ('apart1', 'apart2')" | grep -c 'unknown\]')" 0

# ---- the same modules in another order ----
# two more of the build, each with the same two libraries preloaded, in opposite orders: their
# addresses put the modules in different orders, and the symbolizer is shared all the same
Z=/usr/lib/x86_64-linux-gnu/libz.so.1
C=/usr/lib/x86_64-linux-gnu/libcrypt.so.1
LIB=$("$GUARD" lib)
PORT3=$(free_port)
serve order1 "$PORT3" env LD_PRELOAD="$LIB $Z $C"
G3=$GPID
"$GT" client "$PORT3" 20 1 fast:15,sleep=60:5 >/dev/null || t_fail "the third one's load"
PORT4=$(free_port)
serve order2 "$PORT4" env LD_PRELOAD="$LIB $C $Z"
G4=$GPID
"$GT" client "$PORT4" 20 1 fast:15,sleep=60:5 >/dev/null || t_fail "the fourth one's load"
# which of the two lies higher in each (the maps name the files the links lead to)
higher() { awk '$6 ~ /\/libz\.so/ && !zs { zs = $1 } $6 ~ /\/libcrypt\.so/ && !cs { cs = $1 }
	END { print (!zs || !cs ? "none" : zs > cs ? "libz" : "libcrypt") }' /proc/"$1"/maps; }
t_match "the two have the libraries in opposite orders" "$(higher "$G3") $(higher "$G4")" '^(libz libcrypt|libcrypt libz)$'
for _ in $(seq 1 300); do
	grep -q "msg=\"symbolizer [a-z]*\" pid=$G4 " "$T_TMP/collector.log" && break
	sleep 0.05
done
t_match "the first of them opened a symbolizer of their modules" \
	"$(grep "msg=\"symbolizer [a-z]*\" pid=$G3 " "$T_TMP/collector.log")" 'msg="symbolizer opened"'
t_match "the other shares it" \
	"$(grep "msg=\"symbolizer [a-z]*\" pid=$G4 " "$T_TMP/collector.log")" 'msg="symbolizer shared".* processes=2( |$)'
GPID=$G4
gt_stop "$PORT4"
GPID=$G3
gt_stop "$PORT3"
collector_stop

t_done
