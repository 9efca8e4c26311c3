# lib.sh: helpers for the integration tests (tests/integration/test_*.sh), which
# run the real programs against a real PostgreSQL. Source it first:
#
#   . "$(dirname "$0")/../lib.sh"
#
# It expects the PG* environment variables of a server it may create databases
# on (tests/run.sh runs the scripts inside pg_virtualenv), and SM_BIN_DIR, the
# directory of the programs under test. Each script gets a database of its own,
# dropped at exit (SM_TEST_FRESH_DB=0: use $PGDATABASE as it is).
#
# Checks:   t_ok NAME | t_fail NAME WHY | t_eq NAME GOT WANT | t_match NAME GOT REGEX
# End:      t_done (prints "N passed, N failed"; exits 1 when anything failed)
# Database: pg_q SQL [PSQL ARGS]   (prints the result; -v x=V makes :'x' usable in SQL)
#           pg_until VALUE SQL [TRIES]   (waits for SQL to print VALUE, 5 s at most)
# Servers:  start_ingest [ARGS] / stop_ingest ; sets INGEST_URL, INGEST_PID, INGEST_LOG
# Tokens:   mk_token ROLE          (prints the token)
# Packages: build_debs VERSION...   (stackmine-agent and -server of each version in $T_TMP/deb)
# HTTP:     http METHOD URL [CURL ARGS]   sets HTTP_STATUS, HTTP_BODY, HTTP_HEADERS
# Streams:  stream_events WHERE [PSQL ARGS]   (events of the matching streams with their stacks)
# Probes:   t_probe_methods URL   (/healthz and /metrics: HEAD, OPTIONS, POST)
# Misc:     free_port, t_cleanup 'COMMAND' (run at exit, last registered first),
#           T_TMP (a temporary directory removed at exit), SM_REPO, SM_DATA
#
# Scripts should not use set -e: a failed check must not end the run.
#
# One script by hand, against the private cluster of deploy/pg.sh:
#   eval "$(deploy/pg.sh env --admin)"; SM_BIN_DIR=bin bash tests/integration/test_smoke.sh

set -u -o pipefail

SM_REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
: "${SM_DATA:=$SM_REPO/../shared/data}"
: "${SM_BIN_DIR:=$SM_REPO/build/asan/bin}"
export SM_REPO SM_DATA SM_BIN_DIR

T_NAME=$(basename "$0" .sh)
T_PASSED=0
T_FAILED=0
T_CLEANUPS=()
INGEST_PID=
INGEST_URL=
INGEST_LOG=
INGEST_RC=
WEB_PID=
WEB_URL=
WEB_LOG=
WEB_RC=
SRV_RC=
T_TMP=$(mktemp -d "${TMPDIR:-/tmp}/$T_NAME.XXXXXX") || { echo "lib.sh: mktemp failed" >&2; exit 1; }

t_ok() {
	T_PASSED=$((T_PASSED + 1))
	echo "ok   $1"
}

t_fail() {
	T_FAILED=$((T_FAILED + 1))
	echo "FAIL $1: ${2:-}"
}

t_eq() {
	if [ "$2" = "$3" ]; then
		t_ok "$1"
	else
		t_fail "$1" "got '$2', expected '$3'"
	fi
}

t_match() {
	if [[ $2 =~ $3 ]]; then
		t_ok "$1"
	else
		t_fail "$1" "'$2' does not match /$3/"
	fi
}

# build_debs VERSION...: stackmine's packages of each version in $T_TMP/deb, from the release
# build (the tests otherwise run the sanitizer one); sets arch.
build_debs() {
	local v
	make --no-print-directory -C "$SM_REPO" -j2 binaries >"$T_TMP/make.log" 2>&1 || {
		tail -n 20 "$T_TMP/make.log"
		t_bail "make binaries" "the release build failed"
	}
	for v in "$@"; do
		SM_DEB_VERSION=$v "$SM_REPO/deploy/deb/build.sh" "$T_TMP/deb" >"$T_TMP/build.log" 2>&1 ||
			{ cat "$T_TMP/build.log"; t_bail "deb build" "deploy/deb/build.sh failed"; }
	done
	arch=$(dpkg --print-architecture)
}

t_cleanup() {
	T_CLEANUPS+=("$1")
}

_t_exit() {
	local i p
	for p in "$INGEST_PID" "$WEB_PID"; do
		[ -n "$p" ] || continue
		kill -KILL "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	for ((i = ${#T_CLEANUPS[@]} - 1; i >= 0; i--)); do
		eval "${T_CLEANUPS[i]}" || echo "lib.sh: cleanup failed: ${T_CLEANUPS[i]}" >&2
	done
	rm -rf "$T_TMP"
}
trap _t_exit EXIT
trap 'exit 130' INT TERM

t_done() {
	[ -z "$INGEST_PID" ] || stop_ingest
	[ -z "$WEB_PID" ] || stop_web
	echo "$T_PASSED passed, $T_FAILED failed"
	[ "$T_FAILED" -eq 0 ] && exit 0
	exit 1
}

# Stops the script when something it cannot go on without fails.
t_bail() {
	t_fail "$1" "${2:-} (giving up)"
	t_done
}

pg_q() {
	local sql=$1
	shift
	psql -X -A -t -q -v ON_ERROR_STOP=1 "$@" <<<"$sql"
}

# pg_until VALUE SQL [TRIES]: pg_q SQL every 0.1 s until it prints VALUE, TRIES times at most
# (50: 5 s); prints its last answer, for the check that follows.
pg_until() {
	local want=$1 sql=$2 tries=${3:-50} got=
	while [ "$tries" -gt 0 ]; do
		got=$(pg_q "$sql")
		[ "$got" = "$want" ] && break
		tries=$((tries - 1))
		sleep 0.1
	done
	printf '%s\n' "$got"
}

# stream_events WHERE [PSQL ARGS]: the events of the streams matching WHERE (aliases
# s = streams, e = events, k = stacks), one per line in stream and sequence order:
#   kind tid dur_ns readier_tid frame;frame;...      (kind r or w, frames outermost first)
stream_events() {
	local where=$1
	shift
	pg_q "SELECT e.kind::text || ' ' || e.tid || ' ' || e.dur_ns || ' ' || coalesce(e.readier_tid, 0) || ' ' ||
	        (SELECT string_agg(f.name, ';' ORDER BY u.ord) FROM unnest(k.frame_ids) WITH ORDINALITY u(fid, ord)
	         JOIN frames f ON f.id = u.fid)
	      FROM events e JOIN streams s ON s.id = e.stream_ref JOIN stacks k ON k.id = e.stack_id
	      WHERE $where ORDER BY s.id, e.seq" "$@"
}

# A TCP port nothing on 127.0.0.1 listens on (for tests that need one up front;
# start_ingest lets the server choose instead, which cannot race).
free_port() {
	local p i lo=32768
	# below the ephemeral range: a client's connection may hold any port of it (nginx's bind then fails)
	read -r lo _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || lo=32768
	[ "$lo" -gt 12000 ] 2>/dev/null || lo=32768
	for i in $(seq 1 100); do
		p=$((10000 + RANDOM % (lo - 10000)))
		if ! (: <>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return 0
		fi
	done
	return 1
}

# True while pid $1 runs (kill -0 also succeeds for a zombie, which an exited
# child stays until it is waited for).
t_alive() {
	local st
	st=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	st=${st##*) }
	[ "${st%% *}" != Z ]
}

# srv_start NAME [ARGS...]: starts bin/sm-NAME on a port of its choosing, waits
# for /healthz to answer 200; sets SRV_PID, SRV_URL, SRV_LOG. Returns 1 (after
# printing its log) when it does not come up.
srv_start() {
	local name=$1 pf i port
	shift
	SRV_LOG=$T_TMP/$name.$RANDOM.log
	pf=$T_TMP/$name.port
	rm -f "$pf"
	"$SM_BIN_DIR/sm-$name" --listen 127.0.0.1:0 --port-file "$pf" "$@" </dev/null >"$SRV_LOG" 2>&1 &
	SRV_PID=$!
	SRV_URL=
	# sanitizer builds start slowly; 30 s is generous
	for i in $(seq 1 300); do
		if ! t_alive "$SRV_PID"; then
			wait "$SRV_PID"
			SRV_RC=$?
			SRV_PID=
			echo "sm-$name exited with status $SRV_RC while starting; its log:"
			sed 's/^/  | /' "$SRV_LOG"
			return 1
		fi
		port=$(cat "$pf" 2>/dev/null)
		if [[ $port =~ ^[0-9]+$ ]]; then
			SRV_URL=http://127.0.0.1:$port
			if [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$SRV_URL/healthz")" = 200 ]; then
				return 0
			fi
		fi
		sleep 0.1
	done
	echo "sm-$name did not answer /healthz within 30 s; its log:"
	sed 's/^/  | /' "$SRV_LOG"
	return 1
}

# srv_stop NAME PID LOG: SIGTERM and wait (at most 40 s) for a clean exit; SRV_RC
# holds the exit status; a status other than 0 is a failed check, with the log.
srv_stop() {
	local name=$1 pid=$2 log=$3 i
	kill -TERM "$pid" 2>/dev/null
	for i in $(seq 1 400); do
		t_alive "$pid" || break
		sleep 0.1
	done
	if t_alive "$pid"; then
		# where it is stuck, for the log
		command -v gdb >/dev/null && timeout 60 gdb -p "$pid" -batch -ex "thread apply all bt 20" 2>/dev/null |
			grep -E '^(#|Thread)' | sed 's/^/  | /' | head -n 300
		kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
		SRV_RC=killed
		t_fail "sm-$name stops on SIGTERM" "still running after 40 s; killed"
		sed 's/^/  | /' "$log"
		return 1
	fi
	wait "$pid"
	SRV_RC=$?
	if [ "$SRV_RC" -ne 0 ]; then
		t_fail "sm-$name exits 0 on SIGTERM" "exit status $SRV_RC; its log:"
		sed 's/^/  | /' "$log"
		return 1
	fi
	return 0
}

# start_ingest [ARGS...]: sm-ingest, as INGEST_PID, INGEST_URL, INGEST_LOG.
start_ingest() {
	[ -z "$INGEST_PID" ] || stop_ingest
	INGEST_URL=
	srv_start ingest "$@"
	local rc=$?
	INGEST_PID=$SRV_PID INGEST_URL=$SRV_URL INGEST_LOG=$SRV_LOG INGEST_RC=${SRV_RC:-}
	return $rc
}

# Stops sm-ingest (SIGTERM); INGEST_RC holds its exit status.
stop_ingest() {
	[ -n "$INGEST_PID" ] || return 0
	srv_stop ingest "$INGEST_PID" "$INGEST_LOG"
	local rc=$?
	INGEST_PID= INGEST_RC=$SRV_RC
	return $rc
}

# start_web [ARGS...]: sm-web, as WEB_PID, WEB_URL, WEB_LOG.
start_web() {
	[ -z "$WEB_PID" ] || stop_web
	WEB_URL=
	srv_start web "$@"
	local rc=$?
	WEB_PID=$SRV_PID WEB_URL=$SRV_URL WEB_LOG=$SRV_LOG WEB_RC=${SRV_RC:-}
	return $rc
}

# Stops sm-web (SIGTERM); WEB_RC holds its exit status.
stop_web() {
	[ -n "$WEB_PID" ] || return 0
	srv_stop web "$WEB_PID" "$WEB_LOG"
	local rc=$?
	WEB_PID= WEB_RC=$SRV_RC
	return $rc
}

# sm-admin with the test database; its messages go to stderr as usual.
sm_admin() {
	"$SM_BIN_DIR/sm-admin" "$@"
}

# t_verdicts FILE: a checker's output: its figures shown, each "PASS name" or "FAIL name: why"
# line turned into a test result; T_VERDICTS is how many there were.
t_verdicts() {
	local line name
	grep -v '^PASS \|^FAIL ' "$1"
	T_VERDICTS=0
	while IFS= read -r line; do
		T_VERDICTS=$((T_VERDICTS + 1))
		case $line in
		PASS\ *) t_ok "${line#PASS }" ;;
		FAIL\ *) name=${line#FAIL }; t_fail "${name%%: *}" "${name#*: }" ;;
		esac
	done < <(grep '^PASS \|^FAIL ' "$1")
}

# t_ndjson FILE N: N copies of tests/integration/data/stream.json, one a line, each with a new
# stream id; the ids in FILE.ids.
t_ndjson() {
	local id i
	: >"$1"
	: >"$1.ids"
	for i in $(seq 1 "$2"); do
		id=$(cat /proc/sys/kernel/random/uuid)
		echo "$id" >>"$1.ids"
		sed -e "s/@ID@/$id/" "$SM_REPO/tests/integration/data/stream.json" | tr -d '\n' >>"$1"
		echo >>"$1"
	done
}

mk_token() {
	sm_admin token create --role "$1" --name "$T_NAME-$1"
}

# shellcheck disable=SC2034 # HTTP_* are for the calling script
# http METHOD URL [CURL ARGS...]: HTTP_STATUS (000 when there was no answer),
# HTTP_BODY (exactly as received), HTTP_HEADERS (the raw response headers).
http() {
	local method=$1 url=$2 out hf=$T_TMP/http.headers
	shift 2
	rm -f "$hf"
	# the x keeps the body's own trailing newlines from $(...)
	out=$(curl -sS --max-time 60 -D "$hf" -X "$method" -w '\n%{http_code}' "$@" "$url"; echo x)
	out=${out%x}
	HTTP_STATUS=${out##*$'\n'}
	HTTP_BODY=${out%$'\n'*}
	HTTP_HEADERS=$(cat "$hf" 2>/dev/null)
}

# t_probe_methods URL [CURL ARGS...]: /healthz and /metrics of the server at URL (http://HOST:PORT)
# answer HEAD like GET without a body, OPTIONS 204 and POST 405, both with Allow.
t_probe_methods() {
	local base=$1 u got hp=${1#http://}
	shift
	for u in /healthz /metrics; do
		got=$(printf 'HEAD %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n' "$u" "$hp" |
			"$SM_REPO/tests/integration/raw_http.py" "${hp%:*}" "${hp##*:}" 3)
		t_eq "HEAD $u: 200 without a body" "$got" "200 closed"
		http OPTIONS "$base$u" "$@"
		t_eq "OPTIONS $u: 204 with Allow" "$HTTP_STATUS|$(grep -i '^allow:' <<<"$HTTP_HEADERS" | tr -d '\r')" \
			"204|Allow: GET, HEAD, OPTIONS"
		http POST "$base$u" "$@"
		t_eq "POST $u: 405 with Allow" "$HTTP_STATUS|$(grep -i '^allow:' <<<"$HTTP_HEADERS" | tr -d '\r')|$HTTP_BODY" \
			$'405|Allow: GET, HEAD, OPTIONS|{"error": "method: use GET or HEAD"}\n'
	done
}

# A database of this script's own, so that scripts cannot see each other's rows.
if [ "${SM_TEST_FRESH_DB:-1}" != 0 ]; then
	# never the machine's default server by accident
	if [ -z "${PGHOST:-}${PGSERVICE:-}" ]; then
		t_bail "database" "no PGHOST: run this through tests/run.sh, or see the top of tests/lib.sh"
	fi
	T_DB="smtest_${T_NAME//[^a-zA-Z0-9_]/_}_$$"
	if ! pg_q "CREATE DATABASE \"$T_DB\"" -d postgres; then
		t_bail "create database $T_DB" "cannot create a database with the PG* environment (PGHOST=${PGHOST:-})"
	fi
	t_cleanup "pg_q 'DROP DATABASE IF EXISTS \"$T_DB\" WITH (FORCE)' -d postgres"
	export PGDATABASE=$T_DB
fi
