# guard_lib.sh: what the guard agent's integration tests share, sourced after lib.sh: waiting for a
# guardtest server under sm-guard, stopping it, and the host's collector (sm-agent collect).
#
# Sets BIN, TOOLS (the test programs' directory), GUARD (sm-guard), GT (guardtest) and PROF (a profile
# directory in T_TMP). Uses INGEST_URL and the ingest token in $T_TMP/token. collector_start sets
# COL_PID.

BIN=$SM_BIN_DIR
TOOLS=$(cd "$SM_BIN_DIR/../tests" && pwd -P)
GUARD=$BIN/sm-guard
GT=$TOOLS/guardtest
PROF=$T_TMP/profiles
COL_PID=

# gt_ready OUT WHAT: waits up to 15 s for the server writing OUT to print "ready"; otherwise fails
# "WHAT starts" with what it printed, and returns 1. (Under ASan on a busy machine a server takes
# seconds, not the fraction it takes alone.) Remove OUT before starting the server: the shell
# truncates it in the child, which may come after gt_ready's first look at an earlier "ready".
gt_ready() {
	local i
	for i in $(seq 1 300); do
		grep -q '^ready' "$1" 2>/dev/null && return 0
		sleep 0.05
	done
	t_fail "$2 starts" "$(cat "$1" 2>/dev/null)"
	return 1
}

# gt_stop PORT: asks the guardtest server on PORT to quit, and waits for it (GPID)
gt_stop() {
	"$GT" client "$1" 1 1 quit:1 >/dev/null 2>&1
	wait "$GPID"
}

# collector_start DIR LOG [ARGS...]: the host's collector on DIR, logging (-v) to LOG, shipping to
# sm-ingest with the test's token (more options in ARGS), as COL_PID; waits until it collects. Killed
# when the script ends, if still running.
collector_start() {
	local dir=$1 log=$2 i
	shift 2
	"$BIN/sm-agent" collect --dir "$dir" --url "$INGEST_URL" --token-file "$T_TMP/token" -v "$@" >>"$log" 2>&1 &
	COL_PID=$!
	if [ -z "${_GUARD_LIB_CLEANUP:-}" ]; then
		t_cleanup 'if [ -n "$COL_PID" ]; then kill -KILL "$COL_PID" 2>/dev/null; wait "$COL_PID" 2>/dev/null; fi; true'
		_GUARD_LIB_CLEANUP=1
	fi
	for i in $(seq 1 200); do
		grep -q 'collecting' "$log" 2>/dev/null && return 0
		sleep 0.05
	done
	t_fail "the collector starts" "$(cat "$log")"
	return 1
}

# collector_stop: SIGTERM to the collector; it must exit 0
collector_stop() {
	kill -TERM "$COL_PID" 2>/dev/null
	wait "$COL_PID"
	t_eq "the collector exits 0 on SIGTERM" "$?" 0
	COL_PID=
}
