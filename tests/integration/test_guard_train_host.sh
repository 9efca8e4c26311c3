#!/usr/bin/env bash
# Training through the host's collector (docs/guard.md "Training through the collector"): a process
# with no profile learns in its region and starts no thread of the agent's; the collector saves what
# it learnt into the process's profile file as the process's own user (never as root: a path the
# process cannot write stays unwritten), uploads it to the server and reports the process in train
# mode. A collector stopped and started again in the middle neither loses nor counts twice: the file,
# the collector's saves and the server's upload hold the same number of units. The profile learnt so
# is the one the process would have learnt itself (the same loop), and the next start guards with it.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../guard_lib.sh"

sm_admin migrate >/dev/null || t_bail "migrate"
TOKEN=$(mk_token ingest 2>/dev/null)
printf '%s\n' "$TOKEN" >"$T_TMP/token"
start_ingest || t_bail "sm-ingest starts"

# the guarded programs run as nobody: their program, the agent, the collector's directory and the
# profiles where that user reaches them (the test's own directory is root's alone)
PUB=$(mktemp -d /tmp/sm-train-host.XXXXXX)
t_cleanup "rm -rf '$PUB'"
chmod 755 "$PUB"
cp "$GT" "$PUB/guardtest"
cp "$("$GUARD" lib)" "$PUB/libsmguard.so"
mkdir -m 1777 "$PUB/prof" "$PUB/log" "$PUB/pprof"
mkdir -m 755 "$PUB/rootonly"
DIR=$PUB/collector
CLOG=$T_TMP/collector.log
bid=$(readelf -n "$GT" | sed -n 's/.*Build ID: //p')
FILE=$PUB/prof/$bid.json

q() { pg_q "$1"; }
start_collector() { collector_start "$DIR" "$CLOG" --report-s 1 --tick-ms 20; }
# as_nobody ENV...: guardtest epoll $PORT as nobody, under the agent, in $GPID
as_nobody() {
	rm -f "$T_TMP/server.out"
	setpriv --reuid=nobody --regid=nogroup --clear-groups env SM_GUARD_COLLECTOR_DIR="$DIR" \
		SM_GUARD_LOG="$PUB/log/guard.log" SM_GUARD_URL="$INGEST_URL" SM_GUARD_SAVE_S=1 \
		SM_GUARD_PROFILE_UPLOAD_S=1 SM_GUARD_PROFILE_DIR="$PUB/prof" "$@" LD_PRELOAD="$PUB/libsmguard.so" "$PUB/guardtest" epoll "$PORT" \
		>"$T_TMP/server.out" 2>&1 &
	GPID=$!
	gt_ready "$T_TMP/server.out" server
}
agent_threads() { cat /proc/"$1"/task/*/comm 2>/dev/null | grep -c '^smguard-'; }
# saved_units PID: the units of the collector's "training saved" lines of PID, summed
saved_units() {
	awk -v pid="pid=$1" '/msg="training saved"/ && $0 ~ pid" " {
		for (i = 1; i <= NF; i++) if ($i ~ /^units=/) { split($i, kv, "="); u += kv[2] } } END { print u + 0 }' "$CLOG"
}
file_units() { "$GUARD" profile show "$1" | sed -n 's/.*   units \([0-9]*\)$/\1/p' | head -n 1; }
# wait_mapped PID N: until the collectors have mapped PID's region N times
wait_mapped() {
	for _ in $(seq 1 100); do
		[ "$(grep -c "msg=\"guarded process\" pid=$1 " "$CLOG")" -ge "$2" ] && return 0
		sleep 0.05
	done
}
wait_gone() {
	for _ in $(seq 1 150); do
		[ -z "$(ls "$DIR" | grep "^$1\.")" ] && return 0
		sleep 0.1
	done
	return 1
}

start_collector
PORT=$(free_port)
as_nobody SM_GUARD_MODE=auto
t_match "no profile yet: the process trains, through the host's collector" \
	"$(grep "pid=$GPID " "$PUB/log/guard.log" | grep 'msg="guarding"')" 'mode=train .*collector=host clock=[a-z-]*$'
t_eq "its region is in the collector's directory" "$(ls "$DIR" | grep -c "^$GPID\.")" 1
"$GT" client "$PORT" 3000 2 fast:80,file:20 >/dev/null || t_fail "training load"
t_eq "no thread of the agent's in the training process" "$(agent_threads "$GPID")|$(ls /proc/"$GPID"/task | wc -l)" "0|1"
for _ in $(seq 1 100); do
	[ -s "$FILE" ] && break
	sleep 0.1
done
t_eq "the collector saved the profile as the process's user" "$(stat -c '%U:%G' "$FILE" 2>&1)" "nobody:nogroup"
first=$(saved_units "$GPID")
t_match "after some units" "$first" '^[1-9][0-9]*$'
t_eq "and each of its threads is root again after it (real, effective, saved and file system user)" \
	"$(grep -h '^Uid:' /proc/"$COL_PID"/task/*/status | sort -u | tr -s '\t ' ' ')" "Uid: 0 0 0 0"

# the collector stops (it saves what the process learnt so far) and starts again: nothing learnt
# meanwhile is lost, nothing saved before is saved again
collector_stop
"$GT" client "$PORT" 2000 2 fast:70,file:30 >/dev/null || t_fail "training load while no collector runs"
start_collector
wait_mapped "$GPID" 2
"$GT" client "$PORT" 1000 2 fast:90,file:10 >/dev/null || t_fail "training load, the collector back"
gt_stop "$PORT"
wait_gone "$GPID" || t_fail "the region goes once the process ended"
t_match "the collector's last round for the process: its saves and its upload" \
	"$(grep "pid=$GPID " "$CLOG" | grep 'msg="guarded process ended"')" 'mode=train saves=[1-9][0-9]* save_errors=0 uploads=[1-9]'
saved=$(saved_units "$GPID")
uploaded=$(q "SELECT units FROM profile_uploads WHERE pid = $GPID AND build_id = '$bid'")
t_eq "the file, the collector's saves and the server's upload hold the same units: none lost, none twice" \
	"$(file_units "$FILE")|$saved" "$uploaded|$uploaded"
t_eq "more than the first collector saw" "$((uploaded > first))" 1
t_eq "the collector reported the process: train mode, through it, exited" \
	"$(q "SELECT mode, collector, exited FROM agent_procs WHERE pid = $GPID")" "train|host|t"

# the exit waits for the collector's save: with none before it (SM_GUARD_SAVE_S=60), the profile is
# there the moment the process is gone, as when the process saves it itself
mkdir -m 1777 "$PUB/exitsave"
as_nobody SM_GUARD_MODE=train SM_GUARD_SAVE_S=60 SM_GUARD_PROFILE_DIR="$PUB/exitsave"
wait_mapped "$GPID" 1
"$GT" client "$PORT" 500 1 fast:100 >/dev/null || t_fail "training load, saved at exit"
exiting=$GPID
gt_stop "$PORT"
[ -s "$PUB/exitsave/$bid.json" ] && there=yes || there=no
t_eq "a training process's exit waited for its profile's save" "$there" yes
wait_gone "$exiting" || t_fail "the region goes once the process ended"
t_eq "saved once, at the exit" "$(grep "pid=$exiting " "$CLOG" | grep -c 'msg="training saved"')" 1

# the same load learnt in the process: the same loop
PPID_FILE=$PUB/pprof/$bid.json
as_nobody SM_GUARD_MODE=train SM_GUARD_COLLECTOR=process SM_GUARD_PROFILE_DIR="$PUB/pprof"
t_match "in the process: its own threads" "$(grep "pid=$GPID " "$PUB/log/guard.log" | grep 'msg="guarding"')" \
	'mode=train .*collector=process clock=[a-z-]*$'
"$GT" client "$PORT" 3000 2 fast:80,file:20 >/dev/null || t_fail "training load in the process"
gt_stop "$PORT"
loop_of() { "$GUARD" profile show "$1" | sed -n '/^loop 0:/,/^  threads/p' | head -n 2; }
t_eq "the loop learnt through the collector is the one learnt in the process" "$(loop_of "$FILE")" \
	"$(loop_of "$PPID_FILE")"
t_match "and its unit types have the same calls" "$("$GUARD" profile show "$FILE" | grep -c 'read     in guardtest!read_file')" '^[1-9]'

# a path the process may not write: the collector (root) does not write it either
as_nobody SM_GUARD_MODE=train SM_GUARD_PROFILE_DIR="$PUB/rootonly"
wait_mapped "$GPID" 1
"$GT" client "$PORT" 500 1 fast:100 >/dev/null || t_fail "training load, a profile directory of root's"
bad=$GPID
gt_stop "$PORT"
wait_gone "$bad" || t_fail "the region goes once the process ended"
t_match "a profile directory the process cannot write: not saved, and said why" \
	"$(grep "pid=$bad " "$CLOG" | grep 'msg="cannot save the profile"' | head -n 1)" "path=$PUB/rootonly/$bid.json error=\".*Permission denied\""
t_eq "nothing written there" "$(ls -A "$PUB/rootonly")" ""

# a process that came and went while no collector ran: named from the modules it listed in its region
collector_stop
mkdir -m 1777 "$PUB/gone"
as_nobody SM_GUARD_MODE=train SM_GUARD_COLLECTOR=host SM_GUARD_PROFILE_DIR="$PUB/gone"
"$GT" client "$PORT" 2000 2 fast:80,file:20 >/dev/null || t_fail "training load, no collector running"
gone=$GPID
gt_stop "$PORT"
start_collector
wait_gone "$gone" || t_fail "the region goes once the process ended"
t_match "a process that ended while no collector ran: what it learnt saved by the next, named from its region's modules" \
	"$(grep "pid=$gone " "$CLOG" | grep -e 'msg="symbolizer opened"' -e 'msg="guarded process ended"' | tr '\n' ' ')" \
	'modules=[1-9][0-9]* from=region .*mode=train saves=1 save_errors=0 uploads=1'
GONE_FILE=$PUB/gone/$bid.json
t_eq "its profile: the same loop, the units it uploaded, the process's user's" \
	"$(loop_of "$GONE_FILE" | head -n 1)|$(file_units "$GONE_FILE")|$(stat -c %U "$GONE_FILE")" \
	"$(loop_of "$FILE" | head -n 1)|$(q "SELECT units FROM profile_uploads WHERE pid = $gone AND build_id = '$bid'")|nobody"

# the next start finds the profile and guards with it
as_nobody SM_GUARD_MODE=auto
t_match "with the profile saved: guarding" "$(grep "pid=$GPID " "$PUB/log/guard.log" | grep 'msg="guarding"')" \
	"mode=guard .*profile=$FILE collector=host clock=[a-z-]*$"
gt_stop "$PORT"

# a guarding process that came and went while no collector ran, its program unreadable to its user
# since: the collector opens the files its region names as that user, not as root, so the program's
# own frames stay unnamed while the C library's are named
collector_stop
as_nobody SM_GUARD_MODE=auto SM_GUARD_COLLECTOR=host SM_GUARD_LABELS=run=claimed
"$GT" client "$PORT" 100 1 fast:90,sleep=60:10 >/dev/null || t_fail "guarded load, no collector running"
claimed=$GPID
gt_stop "$PORT"
chmod 0711 "$PUB/guardtest"
start_collector
wait_gone "$claimed" || t_fail "the region goes once the process ended"
ev=$(stream_events "s.labels->>'run' = 'claimed' AND s.role = 'violation'")
t_match "a guarding process named from its region: symbolizer from its modules" \
	"$(grep "pid=$claimed " "$CLOG" | grep 'msg="symbolizer opened"')" 'from=region'
t_match "as its user: its program's frames unnamed, the C library's named" \
	"$(grep -c 'guardtest+0x[0-9a-f]*;libc\.so\.6!nanosleep$' <<<"$ev")|$(grep -c 'guardtest!' <<<"$ev")" '^[1-9][0-9]*\|0$'
collector_stop
if [ "$T_FAILED" -gt 0 ]; then
	echo "the collector's log:"
	tail -n 40 "$CLOG" | sed 's/^/  | /'
fi
t_done
