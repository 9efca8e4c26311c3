#!/usr/bin/env bash
# run.sh BUILD_DIR: the whole test suite, as `make test` runs it (BUILD_DIR is
# build/asan there).
#
# 1. every unit-test binary BUILD_DIR/tests/test_*, from the repository root;
# 2. every tests/integration/test_*.sh, against a real PostgreSQL: a throw-away
#    cluster made by pg_virtualenv (postgresql-common), or by deploy/pg.sh in a
#    temporary directory when pg_virtualenv is missing.
#
# Each test prints "N passed, N failed" as its last count line. This script adds
# them up, prints a line per file and ends with exactly "N passed, N failed".
# A test that crashes, times out, exits non-zero or prints no count line counts
# as one more failure. Exit status: 0 when nothing failed.
#
# Environment given to the tests: SM_DATA (../shared/data), SM_BIN_DIR
# (BUILD_DIR/bin), SM_REPO, and the sanitizer options below.
# SM_TEST_TIMEOUT (seconds per test file, default 900; a script may ask for more with a line
# "# sm-test-timeout: SECONDS" of its own: the larger applies); SM_TEST_ONLY (a glob
# on the file name, e.g. 'test_wire*', to run a subset); SM_TEST_PG=pg.sh (use
# deploy/pg.sh even where pg_virtualenv exists). Every file's output is kept in
# BUILD_DIR/test-logs/.
set -uo pipefail

if [ "${1:-}" = --integration ]; then
	inner=1
	shift
else
	inner=0
fi
if [ $# -lt 1 ] || [ ! -d "$1" ]; then
	echo "usage: tests/run.sh BUILD_DIR   (e.g. build/asan; 'make test' builds and runs it)" >&2
	exit 2
fi

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$repo" || exit 2
build=$(cd "$1" && pwd -P)
export SM_REPO=$repo
export SM_BIN_DIR=$build/bin
export SM_DATA=$repo/../shared/data
[ -d "$SM_DATA" ] && SM_DATA=$(cd "$SM_DATA" && pwd -P)
limit=${SM_TEST_TIMEOUT:-900}
only=${SM_TEST_ONLY:-*}

# Runs a command in the background and waits for it: bash runs a trap only when
# the foreground command ends, and ^C or a TERM from CI must stop the tests at
# once. With child_group=1 the command is the leader of a process group
# (setsid), and the signal goes to the whole group.
child=
child_group=0
bg_wait() {
	local rc
	"$@" &
	child=$!
	# the braces keep bash's own "Segmentation fault" line out of the report
	{ wait "$child"; } 2>/dev/null
	rc=$?
	child=
	return $rc
}

on_signal() {
	if [ -n "$child" ]; then
		if [ "$child_group" = 1 ]; then
			kill -TERM -- "-$child" 2>/dev/null
		else
			kill -TERM "$child" 2>/dev/null
		fi
		wait "$child" 2>/dev/null
	fi
	exit 130
}
trap on_signal INT TERM

# Runs one test file: "$1" is its name in the report, the rest the command.
# Appends "name passed failed seconds note" to $results.
run_one() {
	local name=$1 log rc line p f t0 ms secs why note= limit=$limit own
	shift
	log=$logs/${name//\//_}.log
	own=$(sed -n 's/^# sm-test-timeout: \([0-9][0-9]*\)$/\1/p' "$name" 2>/dev/null | head -n 1)
	[ -n "$own" ] && [ "$own" -gt "$limit" ] && limit=$own
	t0=$(date +%s%N)
	# timeout gives the test a process group of its own (out of reach of ^C,
	# which on_signal covers) and kills all of it, servers it started included
	bg_wait timeout -k 10 "$limit" "$@" </dev/null >"$log" 2>&1 3>&-
	rc=$?
	ms=$(( ($(date +%s%N) - t0) / 1000000 ))
	secs=$((ms / 1000)).$((ms % 1000 / 100))
	line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$log" | tail -n 1)
	if [ -n "$line" ]; then
		p=${line%% *}
		f=${line#*, }
		f=${f%% *}
	else
		p=0 f=0
	fi
	if [ "$rc" -gt 128 ] && [ "$rc" -lt 160 ]; then
		why="killed by SIG$(kill -l $((rc - 128)))"
	else
		why="exit status $rc"
	fi
	if grep -q -E 'ERROR: (Address|Leak|Thread)Sanitizer|runtime error: ' "$log"; then
		why="$why, sanitizer report"
	fi
	if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
		note="timed out after $limit s"
		f=$((f + 1))
	elif [ -z "$line" ]; then
		note="no count line, $why"
		f=$((f + 1))
	elif [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		note=$why
		f=1
	fi
	if [ "$f" -eq 0 ]; then
		printf '  ok    %-40s %5d passed  %6s s\n' "$name" "$p" "$secs"
	else
		printf '  FAIL  %-40s %5d passed %4d failed  %6s s%s\n' "$name" "$p" "$f" "$secs" "${note:+  ($note)}"
		# the failed checks first (a reader of a long log sees its head), each with its next lines
		if grep -q '^FAIL ' "$log"; then
			echo "  ---- $name: its failed checks ----"
			grep -A 4 '^FAIL ' "$log" | head -n 60 | cut -c 1-400 | sed 's/^/  | /'
		fi
		echo "  ---- $name: last 80 lines of its output ($log) ----"
		tail -n 80 "$log" | sed 's/^/  | /'
		echo "  ----"
	fi
	printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$p" "$f" "$secs" "$note" >>"$results"
}

run_integration() {
	local s
	for s in tests/integration/test_*.sh; do
		[ -f "$s" ] || continue
		# shellcheck disable=SC2053 # $only is a glob
		[[ $(basename "$s") == $only ]] || continue
		run_one "$s" bash "$s"
	done
}

# Inside pg_virtualenv (or the fallback cluster): integration scripts only,
# reporting on fd 3, the outer run's standard output.
if [ "$inner" = 1 ]; then
	results=$2
	logs=$3
	exec >&3
	run_integration
	exit 0
fi

# Sanitizers: report leaks, stop on the first UB with a stack trace. LeakSanitizer
# needs ptrace-like access to the process's threads and dies with a fatal error
# where that is forbidden (some containers, running under strace or gdb); it
# works under pg_virtualenv, which only sets environment variables. Probe once
# and turn leak detection off, saying so, where it cannot work.
export ASAN_OPTIONS=detect_leaks=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/sm-test.XXXXXX") || exit 2
cleanup() {
	# the fallback cluster, if an interrupt left it running
	[ ! -d "$tmp/pg" ] || deploy/pg.sh destroy "$tmp/pg" >/dev/null 2>&1
	rm -rf "$tmp"
}
trap cleanup EXIT
chmod 755 "$tmp" # the fallback cluster below runs as the postgres user
results=$tmp/results
# kept after the run (CI can save them); emptied at the start of each run
logs=$build/test-logs
rm -rf "$logs"
mkdir -p "$logs"
: >"$results"
if command -v gcc >/dev/null; then
	printf '#include <stdlib.h>\nint main(void) { volatile void *p = malloc(7); p = 0; return 0; }\n' >"$tmp/leak.c"
	if gcc -fsanitize=address -o "$tmp/leak" "$tmp/leak.c" 2>/dev/null; then
		"$tmp/leak" >"$tmp/leak.out" 2>&1
		if ! grep -q 'detected memory leaks' "$tmp/leak.out"; then
			echo "run.sh: LeakSanitizer does not work here ($(grep -m1 -i 'error' "$tmp/leak.out")); leak checks are off"
			ASAN_OPTIONS=${ASAN_OPTIONS/detect_leaks=1/detect_leaks=0}
		fi
	fi
fi

echo "== unit tests ($build/tests)"
nunit=0
for t in "$build"/tests/test_*; do
	if [ ! -f "$t" ] || [ ! -x "$t" ]; then
		continue
	fi
	# shellcheck disable=SC2053 # $only is a glob
	[[ $(basename "$t") == $only ]] || continue
	nunit=$((nunit + 1))
	run_one "tests/$(basename "$t")" "$t"
done
if [ "$nunit" -eq 0 ] && [ "$only" = '*' ]; then
	echo "  FAIL  no unit-test binaries in $build/tests (build them: make SAN=1 binaries)"
	printf 'unit tests\t0\t1\t0\tnone found\n' >>"$results"
fi

scripts=0
for s in tests/integration/test_*.sh; do
	# shellcheck disable=SC2053
	if [ -f "$s" ] && [[ $(basename "$s") == $only ]]; then
		scripts=$((scripts + 1))
	fi
done
if [ "$scripts" -gt 0 ]; then
	# what the scripts connect to comes from the cluster made for them
	unset PGHOST PGHOSTADDR PGPORT PGUSER PGPASSWORD PGDATABASE PGSERVICE PGSERVICEFILE PGPASSFILE
	if command -v pg_virtualenv >/dev/null && [ "${SM_TEST_PG:-}" != pg.sh ]; then
		echo "== integration tests (pg_virtualenv)"
		# -t: a cluster in a temporary directory even as root, so that parallel
		# runs (and the machine's own clusters) never meet
		# (its own messages go to a file, shown when it fails)
		child_group=1
		bg_wait setsid pg_virtualenv -t "$repo/tests/run.sh" --integration "$build" "$results" "$logs" \
			3>&1 >"$tmp/pgenv.log" 2>&1
		rc=$?
		child_group=0
		if [ "$rc" -ne 0 ]; then
			echo "  FAIL  pg_virtualenv exited with status $rc:"
			tail -n 40 "$tmp/pgenv.log" | sed 's/^/  | /'
			printf 'pg_virtualenv\t0\t1\t0\texit status %s\n' "$rc" >>"$results"
		fi
	else
		echo "== integration tests (no pg_virtualenv: a cluster from deploy/pg.sh)"
		# a port below the kernel's ephemeral range (32768-60999), which the
		# tests' own connections and port-0 servers draw from
		if SM_PGPORT=$((25000 + RANDOM % 5000)) deploy/pg.sh start "$tmp/pg" >"$tmp/pg.log" 2>&1; then
			eval "$(deploy/pg.sh env "$tmp/pg" --admin)"
			bg_wait "$repo/tests/run.sh" --integration "$build" "$results" "$logs" 3>&1
			unset PGHOST PGPORT PGUSER PGDATABASE
			deploy/pg.sh destroy "$tmp/pg" >>"$tmp/pg.log" 2>&1
		else
			echo "  FAIL  deploy/pg.sh start failed:"
			sed 's/^/  | /' "$tmp/pg.log"
			printf 'postgresql\t0\t1\t0\tdeploy/pg.sh start failed\n' >>"$results"
		fi
	fi
fi

echo "== summary"
awk -F'\t' '
	{ printf "  %-4s  %-40s %5d passed %4d failed  %6s s%s\n", ($3 > 0 ? "FAIL" : "ok"), $1, $2, $3, $4,
	         ($5 != "" ? "  (" $5 ")" : "")
	  p += $2; f += $3 }
	END { printf "%d passed, %d failed\n", p, f; exit (f > 0 || NR == 0) }' "$results"
