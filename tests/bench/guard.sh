#!/usr/bin/env bash
# bench/guard.sh: what the guard agent costs the programs it guards (make bench,
# section "guard"; a report, not a test). Each server is trained once; then two
# instances of it run, one unguarded and one guarded, and are measured in
# interleaved rounds: in each round one instance gets the load, then the other,
# then the first again (A B B A, each with the machine to itself; which one is
# A alternates from round to round):
#   pgbench -S (2 clients, 1 thread each) against PostgreSQL
#   redis-benchmark GET and SET (20 clients each) against redis-server
#   wrk (1 thread, 20 connections each) against nginx (1 worker) serving a 16 KiB file
# The machine is shared with neighbours whose load moves a round's throughput by
# 10 % and more, so one round tells little: the figure is the median of the
# rounds' ratios (guarded / unguarded), i.e. the throughput lost. Both
# instances start afresh in every round and which one is guarded alternates,
# so that nothing about one instance (its port, where its memory landed, its
# files' place in the cache) passes for the agent's cost. Then the agent's
# memory per process (private memory, guarded minus unguarded, after the same
# load), and the CPU of its own threads: while guarding a normal load, and while
# shipping violation streams (redis DEBUG SLEEP) to a real sm-ingest.
#
# Then a control: the nginx rounds with neither instance guarded, the noise
# floor of these figures. Last, nginx under CPU contention: both instances
# loaded at the same moment (four busy processes on the machine's cores), which
# costs a guarded server more than the quiet rounds do, and the same with
# neither instance guarded: the noise floor of that figure.
#
# First, the agent's bookkeeping per wrapped call (tests/guard/callcost: the
# cheapest system call, in units, without and with the agent): unlike the
# throughputs, it does not move with the machine's neighbours. Then the same
# call with cold caches (callcost cold), what it costs in a server. Then what loading
# the agent costs every process (`env true`; a process that starts 1,000 others,
# each of which loads it; git and sqlite3; 2,000 threads), plainly, with the agent
# loaded but off, training, and guarding.
#
# Every guarded measurement runs in both of the agent's ways of working (SM_BENCH_GUARD_MODES, "host
# process"): with the host's collector (sm-agent collect: the program starts no thread of the
# agent's) and in the process (the agent's own threads); with the collector, its own CPU and memory
# per guarded process too.
#
# Environment: SM_BENCH_GUARD_ROUNDS (rounds per server, 20), SM_BENCH_GUARD_SECS
# (seconds per pgbench and wrk round, 6), SM_BENCH_GUARD_REQUESTS (redis-benchmark
# requests per test per round, 200000), SM_BENCH_GUARD_SERVERS (which parts run: a
# list of callcost load postgres redis shipping nginx control contention nginxcpu nginxvg, all by default;
# nginxvg's range of CPU lost needs callcost's figures), SM_BENCH_GUARD_KEEP (set: its
# working directory, with callgrind's files, is kept and named at the end). Needs
# root (PostgreSQL runs as postgres).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
cd "$repo"
bin=$repo/bin
rounds=${SM_BENCH_GUARD_ROUNDS:-20}
secs=${SM_BENCH_GUARD_SECS:-6}
requests=${SM_BENCH_GUARD_REQUESTS:-200000}
pgbin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
servers=" ${SM_BENCH_GUARD_SERVERS:-callcost load postgres redis shipping nginx control contention nginxcpu nginxvg} "
modes=${SM_BENCH_GUARD_MODES:-host process}
want() { [[ $servers == *" $1 "* ]]; }

# the servers here are this script's own: nothing from the caller's PostgreSQL settings applies
unset PGHOST PGPORT PGUSER PGDATABASE PGPASSWORD PGPASSFILE PGSERVICE PGOPTIONS
W=$(mktemp -d /var/tmp/sm-bench-guard.XXXXXX)
chmod 755 "$W"
pids=()
rport=(0 0)
cleanup() {
	local i
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for d in "$W"/pg/data* "$W/ingdb/data"; do
		[ -d "$d" ] && runuser -u postgres -- "$pgbin/pg_ctl" -D "$d" stop -m immediate >/dev/null 2>&1 || true
	done
	for i in 0 1 2; do
		[ "$i" = 2 ] || redis-cli -p "${rport[i]}" shutdown nosave >/dev/null 2>&1 || true
		[ -f "$W/nginx$i/nginx.conf" ] &&
			/usr/sbin/nginx -c "$W/nginx$i/nginx.conf" -p "$W/nginx$i" -s stop >/dev/null 2>&1 || true
	done
	if [ -n "${SM_BENCH_GUARD_KEEP:-}" ]; then
		echo "guard bench: its files kept in $W" >&2
	else
		rm -rf "$W"
	fi
}
trap cleanup EXIT

cp "$bin/sm-guard" "$repo/lib/libsmguard.so" "$W/"
# the host's collector, for the guarded instances of mode host (spool only: no server in the rounds)
CDIR=$W/collector
"$bin/sm-agent" collect --dir "$CDIR" --url '' --spool "$W/cspool" --report-s 0 2>"$W/collector.log" &
COLLECTOR=$!
pids+=("$COLLECTOR")
for _ in $(seq 50); do [ -e "$CDIR/collector.lock" ] && break; sleep 0.05; done
# G_OF MODE: the guarded command of that mode (after "$G", before "--")
g_of() {
	case $1 in
	host) echo "env SM_GUARD_COLLECTOR=host SM_GUARD_COLLECTOR_DIR=$CDIR $G" ;;
	*) echo "env SM_GUARD_COLLECTOR=process SM_GUARD_COLLECTOR_DIR=$CDIR $G" ;;
	esac
}
mode_name() { [ "$1" = host ] && echo "host's collector" || echo "in the process"; }
# CPU seconds and private memory (MB) of the collector
collector_cpu() { awk '{ printf "%.3f", ($14 + $15) / 100 }' "/proc/$COLLECTOR/stat"; }
chmod 755 "$W/sm-guard"
chmod 644 "$W/libsmguard.so"
mkdir -p "$W/prof" "$W/spool"
chmod 1777 "$W/prof" "$W/spool"
export SM_GUARD_LIB=$W/libsmguard.so
free_port() { # below the ephemeral range (tests/lib.sh)
	local p lo=32768
	read -r lo _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || lo=32768
	[ "$lo" -gt 12000 ] 2>/dev/null || lo=32768
	for _ in $(seq 100); do
		p=$((10000 + RANDOM % (lo - 10000)))
		(: <>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
	done
}
median() { sort -g | awk '{ v[NR] = $1 } END { print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# private memory (USS: what the process alone holds; RSS would count shared buffers and libraries)
uss_mb() { awk '/^Private_(Clean|Dirty):/ { s += $2 } END { printf "%.2f", s / 1024 }' "/proc/$1/smaps_rollup"; }
# the largest USS among the backends of pgbench's connections, during a load
backend_uss() {
	local m=0 p u
	for p in $(pgrep -u postgres -f 'postgres: postgres postgres'); do
		u=$(uss_mb "$p" 2>/dev/null) || continue
		m=$(awk -v a="$m" -v b="$u" 'BEGIN { print (b > a ? b : a) }')
	done
	echo "$m"
}
# CPU seconds of the agent's threads (smguard-*) of process $1
agent_cpu() {
	local s=0 t
	for t in /proc/"$1"/task/*; do
		grep -q '^smguard' "$t/comm" 2>/dev/null || continue
		s=$(awk -v s="$s" '{ printf "%.3f", s + ($14 + $15) / 100 }' "$t/stat")
	done
	echo "$s"
}

# Each round starts both instances afresh, and which one is guarded alternates
# from round to round: a started server keeps a speed of its own (where its
# memory landed, which core it settled on) a few percent off the other's, which
# a median over two long-lived pairs would take for the agent's cost.
# START I COMMAND... starts instance I (0 or 1) under COMMAND (env, or the agent
# as $G), STOP I stops it, LOAD I prints the throughput of one load against it
# (for $secs seconds or $requests requests: a warm-up takes a third of that).

# rounds START STOP LOAD MEASURE: each round starts both instances afresh (the
# guarded one is $((r % 2))), warms them up, then MEASURE LOAD G R prints the
# round's "unguarded guarded" pair, and both stop.
rounds() {
	local start=$1 stop=$2 load=$3 measure=$4 g r
	for r in $(seq "$rounds"); do
		g=$((r % 2))
		$start $((1 - g)) env
		$start "$g" $G --
		# a short load on each, not counted: caches, connections, the agent's first units
		(
			secs=$(((secs + 2) / 3)) requests=$((requests / 3))
			$load 0 >/dev/null
			$load 1 >/dev/null
		)
		$measure "$load" "$g" "$r"
		$stop 0
		$stop 1
	done
}

# interleaved START STOP LOAD: each instance loaded alone, in the order A B B A
# (each A half as long as B, the first instance alternating from round to
# round): a neighbour's load that rises or falls through the round weighs on
# both instances alike.
interleaved() { rounds "$1" "$2" "$3" one_then_other; }
one_then_other() {
	local load=$1 g=$2 r=$3 first second x1 x2 y
	if [ $(((r + 1) / 2 % 2)) = 1 ]; then
		first=$((1 - g)) second=$g
	else
		first=$g second=$((1 - g))
	fi
	x1=$(secs=$(((secs + 1) / 2)) requests=$((requests / 2)) && $load "$first")
	y=$($load "$second")
	x2=$(secs=$(((secs + 1) / 2)) requests=$((requests / 2)) && $load "$first")
	x1=$(awk -v a="$x1" -v b="$x2" 'BEGIN { printf "%.2f", (a + b) / 2 }')
	if [ "$first" = "$g" ]; then
		echo "$y $x1"
	else
		echo "$x1 $y"
	fi
}

# side_by_side START STOP LOAD: both instances loaded at the same moment.
side_by_side() { rounds "$1" "$2" "$3" both_at_once; }
both_at_once() {
	local load=$1 g=$2 p0 p1
	$load 0 >"$W/round0" &
	p0=$!
	$load 1 >"$W/round1" &
	p1=$!
	wait "$p0" "$p1"
	echo "$(cat "$W/round$((1 - g))") $(cat "$W/round$g")"
}

# report NAME UNIT: reads "unguarded guarded" pairs on stdin, prints rounds and the median loss
report() {
	local name=$1 unit=$2
	awk -v name="$name" -v unit="$unit" '
		{ n++; a[n] = $1; b[n] = $2; r[n] = $1 > 0 ? $2 / $1 : 0 }
		END {
			printf "guard %-34s", name ":"
			for (i = 1; i <= n; i++) printf " %.0f/%.0f", a[i], b[i]
			printf " %s (without/with)\n", unit
			# median of the per-round ratios
			for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (r[j] < r[i]) { t = r[i]; r[i] = r[j]; r[j] = t }
			m = n % 2 ? r[(n + 1) / 2] : (r[n / 2] + r[n / 2 + 1]) / 2
			printf "guard %-34s median ratio %.4f: %.2f %% of throughput lost, ratios %.3f .. %.3f (must: at most 3 %%, goal: under 1 %%)\n",
				name ":", m, 100 * (1 - m), r[1], r[n]
		}'
}

echo
echo "== guard: the agent inside real servers, $rounds interleaved rounds each of an unguarded and a guarded instance"

if want callcost; then
# ---- one wrapped call ----
cc=$repo/build/rel/tests/callcost
# cc_lines N PROFILE_DIR OFF ARGS...: N lines, each of callcost ARGS's figures without the agent,
# loaded but off (OFF=1 only), guarded in the process and with the host's collector
cc_lines() {
	local n=$1 prof=$2 off=$3 plain off_ns
	shift 3
	for _ in $(seq "$n"); do
		plain=$("$cc" "$@")
		off_ns=
		if [ "$off" = 1 ]; then off_ns=$(env LD_PRELOAD="$W/libsmguard.so" SM_GUARD_MODE=off "$cc" "$@"); fi
		echo "$plain $off_ns $("$W/sm-guard" run --profile-dir "$prof" --log "$W/guard.log" -- "$cc" "$@") $(
			env SM_GUARD_COLLECTOR=host SM_GUARD_COLLECTOR_DIR="$CDIR" "$W/sm-guard" run --profile-dir "$prof" \
				--log "$W/guard.log" -- "$cc" "$@")"
	done
}
# col FILE K [J]: the median of column K (less column J) of FILE's lines
col() { awk -v k="$2" -v j="${3:-0}" '{ print $k - (j ? $j : 0) }' "$1" | median; }
"$W/sm-guard" run --train --profile-dir "$W/prof" --log "$W/guard.log" -- "$cc" 3000 200 >/dev/null
cc_lines 5 "$W/prof" 0 20000 200 >"$W/cc.warm"
printf 'guard one wrapped call inside a unit:       %.0f ns without, %.0f ns with the agent in the process, %.0f ns with the host'"'"'s collector: %.0f and %.0f ns of bookkeeping (median of 5; read() of nothing from /dev/null)\n' \
	"$(col "$W/cc.warm" 1)" "$(col "$W/cc.warm" 2)" "$(col "$W/cc.warm" 3)" \
	"$(col "$W/cc.warm" 2 1)" "$(col "$W/cc.warm" 3 1)"
# the same call with cold caches, as in a server whose requests run the kernel and the program
# between two wrapped calls: each call's time above the same system call made bare, in one process
# (callcost cold). Trained on its own (its units are longer): no unit is a violation.
mkdir -p "$W/profcold"
"$W/sm-guard" run --train --profile-dir "$W/profcold" --log "$W/guard.log" -- "$cc" 300 50 cold >/dev/null
cc_lines 9 "$W/profcold" 1 300 50 cold >"$W/cc"
printf 'guard one wrapped call, caches cold:        %.0f ns without, %.0f ns loaded but off, %.0f ns in the process, %.0f ns with the host'"'"'s collector, above the bare system call: %.0f and %.0f ns of bookkeeping (median of 9; after a 4 MiB walk each)\n' \
	"$(col "$W/cc" 1)" "$(col "$W/cc" 2)" "$(col "$W/cc" 3)" "$(col "$W/cc" 4)" \
	"$(col "$W/cc" 3 1)" "$(col "$W/cc" 4 1)"
cc_cold_ns=$(col "$W/cc" 3 1)
# the same cold call as valgrind counts it, which no neighbour moves: instructions, and the data
# lines that miss its simulated L1 (32 KiB). In the process (the collector changes nothing in the
# call); thresholds and the shortest wait raised past valgrind's slowness, so that each call takes
# the common path: a call inside a unit, not a violation, not a wait event.
vg_read() {   # $1: callgrind's file, $2: the function's name in it; its 400 calls from cold_calls
	callgrind_annotate --tree=calling --inclusive=yes --threshold=100 "$1" 2>/dev/null |
		grep -E "> .*$2 \(400x\)" | head -n 1 | sed -E 's/\([^)]*%\)//g; s/,//g; s/ \. / 0 /g' |
		awk '{ printf "%.0f %.1f %.1f", $1 / 400, $5 / 400, $6 / 400 }'
}
vgenv=(SM_GUARD_MIN_THRESHOLD_US=10000000 SM_GUARD_MIN_WAIT_US=100000 SM_GUARD_BASELINE_PER_MIN=0
       SM_GUARD_SAMPLE_HZ=0 SM_GUARD_COLLECTOR=process)
vg=(valgrind --tool=callgrind --cache-sim=yes)
env "${vgenv[@]}" "$W/sm-guard" run --profile-dir "$W/profcold" --log "$W/guard.log" -- \
	"${vg[@]}" --callgrind-out-file="$W/cg.guarded" "$cc" 20 20 cold >/dev/null 2>&1
"${vg[@]}" --callgrind-out-file="$W/cg.plain" "$cc" 20 20 cold >/dev/null 2>&1
read -r gi gr gw <<<"$(vg_read "$W/cg.guarded" 'interpose\.c:read')"
read -r pi pr pw <<<"$(vg_read "$W/cg.plain" 'linux/read\.c:read')"
cc_added=$(awk -v g="${gi:-0}" -v p="${pi:-0}" 'BEGIN { print g - p }')
printf 'guard one wrapped call, as valgrind counts: %s instructions, %s data lines read and %s written that miss L1, against %s, %s and %s bare (callcost cold: after a 4 MiB walk; callgrind'"'"'s cache model)\n' \
	"${gi:-?}" "${gr:-?}" "${gw:-?}" "${pi:-?}" "${pr:-?}" "${pw:-?}"

fi

if want load; then
# ---- loading the agent: every exec, and programs made of many processes or threads ----
L=$W/load
mkdir -p "$L/prof" "$L/repo"
chmod 1777 "$L" "$L/prof"
tort=$repo/build/rel/tests/torture
# a git repository of 200 files in 20 commits, and 3,000 sqlite transactions (each a write and an fsync)
(
	cd "$L/repo" && git init -q && git config user.email b@x && git config user.name bench
	for c in $(seq 20); do
		for f in $(seq 10); do echo "$c $f" >"f$c-$f"; done
		git add -A && git commit -qm "c$c"
	done
)
{
	echo 'PRAGMA journal_mode=WAL; CREATE TABLE IF NOT EXISTS t (k INTEGER PRIMARY KEY, v TEXT);'
	for i in $(seq 3000); do echo "INSERT INTO t (v) VALUES ('row $i');"; done
} >"$L/ins.sql"
# usecs N COMMAND...: microseconds for N runs of COMMAND, one after the other
usecs() {
	local n=$1 t0
	shift
	t0=$(date +%s%N)
	for _ in $(seq "$n"); do "$@" >/dev/null 2>&1; done
	echo $((($(date +%s%N) - t0) / 1000))
}
# modes: the environment of each way of running a program
mode_env() {
	case $1 in
	plain) echo "" ;;
	off) echo "LD_PRELOAD=$W/libsmguard.so SM_GUARD_MODE=off" ;;
	train) echo "LD_PRELOAD=$W/libsmguard.so SM_GUARD_MODE=train SM_GUARD_PROFILE_DIR=$L/prof" ;;
	guard) echo "LD_PRELOAD=$W/libsmguard.so SM_GUARD_MODE=guard SM_GUARD_PROFILE_DIR=$L/prof SM_GUARD_SPOOL=$L/spool" ;;
	esac
}
# load NAME PER COUNT COMMAND...: median of 5 batches of COUNT runs of COMMAND in each mode (the
# training batches come first: guarding uses what they learnt); PER divides into the unit printed
load() {
	local name=$1 per=$2 n=$3 m b line=""
	shift 3
	for m in plain off train guard; do
		for b in 1 2 3 4 5; do
			# shellcheck disable=SC2046
			usecs "$n" env $(mode_env "$m") "$@"
		done >"$L/t.$m"
	done
	for m in plain off train guard; do
		line+=$(printf ' %s %.2f' "$m" "$(median <"$L/t.$m" | awk -v n="$n" -v p="$per" '{ print $1 / n / p }')")
	done
	echo "guard load $name:$line"
}
echo "guard load: per run, median of 5 batches; plain, the agent loaded but off (SM_GUARD_MODE=off), training, guarding"
load "env true (ms per exec)" 1000 200 /usr/bin/true
load "1,000 posix_spawn()s of /bin/true by one process (s)" 1000000 1 "$tort" spawns 1000
load "git status in a 200-file repository (ms)" 1000 20 git -C "$L/repo" status --short
load "sqlite3, 3,000 transactions in WAL mode (s)" 1000000 1 sqlite3 "$L/db.sqlite" ".read $L/ins.sql"
"$W/sm-guard" run --train --profile-dir "$L/prof" --log "$W/guard.log" -- "$tort" train 400 >/dev/null
load "2,000 threads that lock and sleep (s)" 1000000 1 "$tort" threads 2000
echo "guard load: libsmguard.so needs $(readelf -d "$W/libsmguard.so" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')"
echo "guard load: libraries mapped by an inert agent: $(SM_GUARD_MODE=off LD_PRELOAD=$W/libsmguard.so cat /proc/self/maps |
	awk '$6 ~ /\.so/ {n = split($6, p, "/"); print p[n]}' | sort -u | wc -l), without the agent $(cat /proc/self/maps |
	awk '$6 ~ /\.so/ {n = split($6, p, "/"); print p[n]}' | sort -u | wc -l)"
fi

# ---- PostgreSQL: pgbench -S ----
if want postgres; then
pport=(0 0)
mkdir -p "$W/pg"
chown postgres "$W/pg"
as_pg() { runuser -u postgres -- env SM_GUARD_LIB="$SM_GUARD_LIB" "$@"; }
for i in 0 1; do
	pport[i]=$(free_port)
	as_pg "$pgbin/initdb" -D "$W/pg/data$i" -A trust >/dev/null 2>&1
	printf "port = %s\nunix_socket_directories = '%s'\nlisten_addresses = ''\nshared_buffers = 128MB\nmax_connections = 20\n" \
		"${pport[i]}" "$W/pg" >>"$W/pg/data$i/postgresql.conf"
done
# pgstart I COMMAND...
pgstart() {
	local i=$1
	shift
	as_pg "$@" "$pgbin/postgres" -D "$W/pg/data$i" >"$W/pg/log$i" 2>&1 &
	for _ in $(seq 100); do as_pg "$pgbin/pg_isready" -q -h "$W/pg" -p "${pport[i]}" && return; sleep 0.1; done
	echo "bench: postgres does not start" >&2
	exit 1
}
pgstop() { as_pg "$pgbin/pg_ctl" -D "$W/pg/data$1" stop -m fast >/dev/null; }
pgb() {
	local i=$1
	shift
	as_pg "$pgbin/pgbench" -h "$W/pg" -p "${pport[i]}" "$@" postgres 2>&1
}
pgload() { pgb "$1" -S -c 2 -j 1 -T "$secs" | sed -n 's/^tps = \([0-9.]*\) .*/\1/p'; }
for i in 0 1; do
	pgstart "$i" env
	pgb "$i" -i -s 10 -q >/dev/null
	pgstop "$i"
done
G="$W/sm-guard run --profile-dir $W/prof --log $W/guard.log --only postgres"
pgstart 0 $G --train --
pgb 0 -S -c 4 -j 2 -T "$secs" >/dev/null
pgstop 0
G0=$G
for m in $modes; do
	G=$(g_of "$m")
	c0=$(collector_cpu)
	interleaved pgstart pgstop pgload >"$W/pairs"
	report "pgbench -S (tps), $(mode_name "$m")" tps <"$W/pairs"
	[ "$m" = host ] && echo "guard postgres collector CPU:             $(awk -v a="$c0" -v b="$(collector_cpu)" -v n="$rounds" 'BEGIN { printf "%.3f s over %d rounds (%.1f ms per guarded instance and round)", b - a, n, 1000 * (b - a) / n }')"
	rm -f "$W/pgmem"
	for g in env "$G --"; do
		pgstart 0 $g
		pgb 0 -S -c 4 -j 2 -T 6 >/dev/null &
		sleep 4
		backend_uss >>"$W/pgmem"
		[ "$g" != env ] && [ "$m" = host ] && collector_uss=$(uss_mb "$COLLECTOR")
		wait $!
		pgstop 0
	done
	plain=$(sed -n 1p "$W/pgmem")
	guarded=$(sed -n 2p "$W/pgmem")
	echo "guard postgres backend private memory, $(mode_name "$m"): $plain MB without, $guarded MB with the agent ($(awk -v a="$plain" -v b="$guarded" 'BEGIN { printf "%+.2f", b - a }') MB)"
	[ "$m" = host ] && echo "guard postgres collector private memory:  $collector_uss MB (guarding the postmaster and its backends)"
done
G=$G0

fi

# ---- redis ----
rpid=(0 0)
for i in 0 1; do
	rport[i]=$(free_port)
	mkdir -p "$W/redis$i"
done
# redis I COMMAND...
redis() {
	local i=$1
	shift
	"$@" /usr/bin/redis-server --port "${rport[i]}" --bind 127.0.0.1 --save '' --appendonly no --dir "$W/redis$i" \
		--enable-debug-command yes --logfile "$W/redis$i/log" &
	rpid[i]=$!
	for _ in $(seq 100); do redis-cli -p "${rport[i]}" ping >/dev/null 2>&1 && return; sleep 0.05; done
	echo "bench: redis does not start" >&2
	exit 1
}
rstop() { redis-cli -p "${rport[$1]}" shutdown nosave >/dev/null 2>&1; wait "${rpid[$1]}" || true; }
rb() { redis-benchmark -p "${rport[$1]}" -t "$2" -n "$requests" -c 20 -q 2>/dev/null | sed -n 's/.*: \([0-9.]*\) requests per second.*/\1/p'; }
rget() { rb "$1" get; }
rset() { rb "$1" set; }
G="$W/sm-guard run --profile-dir $W/prof --log $W/guard.log"
if want redis; then
redis 0 $G --train --
rb 0 get,set >/dev/null
rstop 0
G0=$G
for m in $modes; do
	G=$(g_of "$m")
	interleaved redis rstop rget >"$W/get"
	report "redis-benchmark GET (req/s), $(mode_name "$m")" req/s <"$W/get"
	interleaved redis rstop rset >"$W/set"
	report "redis-benchmark SET (req/s), $(mode_name "$m")" req/s <"$W/set"
	# redis's own heap moves by a few hundred KB from run to run: three pairs, the median difference
	: >"$W/rmem"
	for _ in 1 2 3; do
		redis 0 env
		rb 0 get,set >/dev/null
		plain=$(uss_mb "${rpid[0]}")
		rstop 0
		redis 0 $G --
		c0=$(collector_cpu)
		rb 0 get,set >/dev/null
		guarded=$(uss_mb "${rpid[0]}")
		cpu=$(agent_cpu "${rpid[0]}")
		c1=$(collector_cpu)
		cmem=$(uss_mb "$COLLECTOR")
		rstop 0
		echo "$plain $guarded" >>"$W/rmem"
	done
	echo "guard redis-server private memory, $(mode_name "$m"): $(awk '{ print $1 }' "$W/rmem" | median) MB without, $(awk '{ print $2 }' "$W/rmem" | median) MB with the agent (median difference $(awk '{ print $2 - $1 }' "$W/rmem" | median | awk '{ printf "%+.2f", $1 }') MB; differences $(awk '{ printf "%+.2f ", $2 - $1 }' "$W/rmem")MB)"
	if [ "$m" = host ]; then
		echo "guard redis collector, one guarded redis:   $(awk -v a="$c0" -v b="$c1" 'BEGIN { printf "%.3f", b - a }') s CPU over $((2 * requests)) requests, $cmem MB private memory (the program: $cpu s in threads of the agent's)"
	else
		echo "guard redis agent threads' CPU:            $cpu s over $((2 * requests)) requests (watchdog, shipping; no violation)"
	fi
done
G=$G0

fi

# shipping: violations sent to a real sm-ingest
if want shipping; then
ingdb=$W/ingdb
mkdir -p "$ingdb"
chown postgres "$ingdb"
iport=$(free_port)
as_pg "$pgbin/initdb" -D "$ingdb/data" -A trust >/dev/null 2>&1
printf "port = %s\nunix_socket_directories = '%s'\nlisten_addresses = ''\n" "$iport" "$ingdb" >>"$ingdb/data/postgresql.conf"
as_pg "$pgbin/postgres" -D "$ingdb/data" >"$ingdb/log" 2>&1 &
for _ in $(seq 100); do as_pg "$pgbin/pg_isready" -q -h "$ingdb" -p "$iport" && break; sleep 0.1; done
export PGHOST=$ingdb PGPORT=$iport PGUSER=postgres PGDATABASE=postgres
"$bin/sm-admin" migrate >/dev/null
"$bin/sm-admin" token create --role ingest --name bench >"$W/token" 2>/dev/null
chmod 644 "$W/token"
"$bin/sm-ingest" --listen 127.0.0.1:0 --port-file "$W/iport" --log-level warn 2>"$W/ingest.log" &
pids+=($!)
for _ in $(seq 100); do [ -s "$W/iport" ] && break; sleep 0.1; done
redis 0 env SM_GUARD_REPORTS_PER_MIN=100000 $G --url "http://127.0.0.1:$(cat "$W/iport")" --token-file "$W/token" --
t0=$(agent_cpu "${rpid[0]}")
for _ in $(seq 50); do redis-cli -p "${rport[0]}" debug sleep 0.02 >/dev/null; done
sleep 2
t1=$(agent_cpu "${rpid[0]}")
rstop 0
n=$(psql -XAtc "SELECT count(*) FROM streams")
echo "guard shipping, redis DEBUG SLEEP x 50:     $n streams stored; agent threads $(awk -v a="$t0" -v b="$t1" -v n="$n" 'BEGIN { printf "%.3f s CPU, %.1f ms per stream", b - a, n ? 1000 * (b - a) / n : 0 }')"
as_pg "$pgbin/pg_ctl" -D "$ingdb/data" stop -m fast >/dev/null

fi

# ---- nginx ----
nport=(0 0)
npid=(0 0)
head -c 12288 /dev/urandom | base64 -w 0 >"$W/index.html"
for i in 0 1 2; do
	N=$W/nginx$i
	nport[i]=$(free_port)
	mkdir -p "$N/www" "$N/logs"
	cp "$W/index.html" "$N/www/"
	cat >"$N/nginx.conf" <<EOF
worker_processes 1;
daemon off;
pid $N/nginx.pid;
error_log $N/logs/error.log;
events { worker_connections 1024; }
http { access_log off; server { listen 127.0.0.1:${nport[i]}; root $N/www; } }
EOF
	chmod -R a+rX "$N"
done
# ngx I COMMAND...
ngx() {
	local i=$1
	shift
	"$@" /usr/sbin/nginx -c "$W/nginx$i/nginx.conf" -p "$W/nginx$i" &
	npid[i]=$!
	for _ in $(seq 100); do curl -sf -o /dev/null "http://127.0.0.1:${nport[i]}/" && return; sleep 0.05; done
	echo "bench: nginx does not start" >&2
	exit 1
}
nstop() { /usr/sbin/nginx -c "$W/nginx$1/nginx.conf" -p "$W/nginx$1" -s quit 2>/dev/null; wait "${npid[$1]}" || true; }
rps() { wrk -t 1 -c 20 -d "$secs" "http://127.0.0.1:${nport[$1]}/" 2>/dev/null | sed -n 's/^Requests\/sec: *\([0-9.]*\)/\1/p'; }
# ngx_train: nginx's training, once, by whichever part needs it first
ngx_trained=
ngx_train() {
	[ -n "$ngx_trained" ] && return
	ngx 0 $G --train --
	rps 0 >/dev/null
	nstop 0
	ngx_trained=1
}
if want nginx; then
ngx_train
G0=$G
for m in $modes; do
	G=$(g_of "$m")
	c0=$(collector_cpu)
	interleaved ngx nstop rps >"$W/pairs"
	c1=$(collector_cpu)
	report "wrk against nginx (req/s), $(mode_name "$m")" req/s <"$W/pairs"
	# the collector's CPU is taken from the cores nginx and wrk share: as a share of the time the
	# guarded instance was loaded (its warm-up and its measure, a round), about what it takes from
	# the throughput
	if [ "$m" = host ]; then
		echo "guard nginx collector CPU:                $(awk -v a="$c0" -v b="$c1" -v n="$rounds" \
			-v s="$((secs + (secs + 2) / 3))" 'BEGIN { printf "%.3f s over %d rounds, %d s of load on the guarded nginx each: %.2f %% of one core", b - a, n, s, 100 * (b - a) / (n * s) }')"
	fi
done
G=$G0
fi
# the same rounds with neither instance guarded: the noise floor of the ratios above
if want control; then
G=env interleaved ngx nstop rps >"$W/pairs"
report "control, nginx, neither guarded" req/s <"$W/pairs" | sed -e "s/ (must: .*//" -e "s/(without\/with)/(both without)/"
G="$W/sm-guard run --profile-dir $W/prof --log $W/guard.log"
fi
# nginx under CPU contention: both loaded at once; then neither guarded, the noise floor of such ratios
if want contention; then
G0=$G
for m in $modes; do
	G=$(g_of "$m")
	side_by_side ngx nstop rps >"$W/pairs"
	report "contended wrk against nginx (req/s), $(mode_name "$m")" req/s <"$W/pairs" | sed -e "s/ (must: .*//"
done
G=$G0
G=env side_by_side ngx nstop rps >"$W/pairs"
report "contended, neither guarded (req/s)" req/s <"$W/pairs" | sed -e "s/ (must: .*//" -e "s/(without\/with)/(both without)/"
fi

# ---- nginx's CPU per request: one guarded and two unguarded instances, each loaded in turn ----
# The throughput rounds above spread by ±15 % on a shared machine. A worker's CPU time per request
# (its threads' run time from /proc, in ns, over a wrk window of 1 s) moves less, and short windows
# in turn leave a neighbour little time to weigh on one instance more than on the others. Each
# round starts three instances afresh (which one is guarded rotates), warms each up, then loads
# them in turn, one window each, $cpu_windows times (the order rotating too). The figure is the
# median over all windows of the guarded instance's ns per request against the mean of the two
# unguarded ones of the same window; the same for the second unguarded instance against the
# first is its noise floor, printed beside it.
if want nginxcpu; then
cpu_rounds=${SM_BENCH_GUARD_CPU_ROUNDS:-6}
cpu_windows=${SM_BENCH_GUARD_CPU_WINDOWS:-10}
# task_ns PID: the run time of all its threads so far, in ns
task_ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{ s += $1 } END { printf "%.0f", s }'; }
# cpu_window I: "ns-per-request requests-per-second" of one 1 s wrk against instance I's worker
cpu_window() {
	local c0 c1 out n rps
	c0=$(task_ns "${wk[$1]}")
	out=$(wrk -t 1 -c 20 -d 1 "http://127.0.0.1:${nport[$1]}/" 2>/dev/null)
	c1=$(task_ns "${wk[$1]}")
	n=$(sed -n 's/^ *\([0-9]*\) requests in.*/\1/p' <<<"$out")
	rps=$(sed -n 's/^Requests\/sec: *\([0-9.]*\)/\1/p' <<<"$out")
	awk -v a="$c0" -v b="$c1" -v n="${n:-0}" -v r="${rps:-0}" 'BEGIN { printf "%.0f %.0f", (n > 0 ? (b - a) / n : 0), r }'
}
ngx_train
G0=$G
for m in $modes; do
	G=$(g_of "$m")
	: >"$W/cpuwin"
	for r in $(seq "$cpu_rounds"); do
		g=$((r % 3))
		for i in 0 1 2; do
			if [ "$i" = "$g" ]; then ngx "$i" $G --; else ngx "$i" env; fi
		done
		for i in 0 1 2; do
			wk[i]=$(pgrep -P "${npid[i]}" | head -n 1)
			wrk -t 1 -c 20 -d 2 "http://127.0.0.1:${nport[i]}/" >/dev/null
		done
		for k in $(seq "$cpu_windows"); do
			for s in 0 1 2; do
				i=$(((s + k + r) % 3))
				v[i]=$(cpu_window "$i")
			done
			# guarded, then the two unguarded ones in instance order: "ns rps" each
			line="${v[g]}"
			for i in 0 1 2; do [ "$i" = "$g" ] || line+=" ${v[i]}"; done
			echo "$line" >>"$W/cpuwin"
		done
		for i in 0 1 2; do nstop "$i"; done
	done
	awk -v name="$(mode_name "$m")" '
		function med(a, k,   i, j, t) {
			for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
			return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
		}
		$1 > 0 && $3 > 0 && $5 > 0 {
			w++; g[w] = $1 / (($3 + $5) / 2); c[w] = $5 / $3
			tg[w] = $2 / (($4 + $6) / 2); tc[w] = $6 / $4
			sg += $1; su += ($3 + $5) / 2
		}
		END {
			if (!w) { print "guard nginx CPU per request: no window measured"; exit }
			printf "guard nginx CPU per request, %-17s %+.2f %% (median over %d windows of 1 s; mean %.0f against %.0f ns); throughput %.2f %% lost; control, neither guarded: %+.2f %% CPU, %.2f %% throughput\n",
				name ":", 100 * (med(g, w) - 1), w, sg / w, su / w, 100 * (1 - med(tg, w)), 100 * (med(c, w) - 1), 100 * (1 - med(tc, w))
		}' "$W/cpuwin"
done
G=$G0
fi

# ---- nginx as valgrind counts: what the agent adds to a request, without the machine's noise ----
# Throughput on a shared 2-core VM moves by more than 1 % from one second to the next (a round's
# ratio spreads by ±15 % above), so the rounds cannot tell 1 % from 3 %. Counted instead: one nginx
# (master_process off) under callgrind, per request of wrk, unguarded and guarded both ways, after
# a warm-up: the instructions it runs in user space and the data lines that miss L1 (callgrind's
# cache model). Thresholds and the shortest wait raised past valgrind's slowness and sampling off
# (valgrind is 50 times slower: units would be violations, waits events, CPU samples 50 times
# as many), so that what is counted is what a guarded request costs on its common path. Then the
# same request's CPU time in a native run, to put the added instructions against: at the
# bookkeeping's own rate (callcost: ns per instruction, warm, and caches cold), a range of the CPU
# a request loses.
if want nginxvg; then
V=$W/nginxvg
mkdir -p "$V/www" "$V/logs" "$V/prof"
chmod 1777 "$V/prof"
cp "$W/index.html" "$V/www/"
vport=$(free_port)
cat >"$V/nginx.conf" <<NGX
worker_processes 1;
master_process off;
daemon off;
pid $V/nginx.pid;
error_log $V/logs/error.log;
events { worker_connections 1024; }
http { access_log off; server { listen 127.0.0.1:$vport; root $V/www; } }
NGX
chmod -R a+rX "$V"
vgngx_env=(SM_GUARD_MIN_THRESHOLD_US=10000000 SM_GUARD_MIN_WAIT_US=100000 SM_GUARD_BASELINE_PER_MIN=0
	   SM_GUARD_SAMPLE_HZ=0)
# vg_nginx OUT PREFIX...: requests of a 5 s wrk after a 2 s warm-up; callgrind's counts of them on
# nginx's own thread in OUT.1-01. The agent's threads (in the process) are left out: they work by
# the clock, which valgrind does not slow as it slows the requests, so per request their share
# would be tens of times what it is natively.
vg_nginx() {
	local out=$1 vp n
	shift
	"$@" valgrind --tool=callgrind --cache-sim=yes --separate-threads=yes --callgrind-out-file="$out" \
		/usr/sbin/nginx -c "$V/nginx.conf" -p "$V" >/dev/null 2>&1 &
	vp=$!
	for _ in $(seq 300); do curl -sf -o /dev/null "http://127.0.0.1:$vport/" && break; sleep 0.1; done
	wrk -t 1 -c 20 -d 2 "http://127.0.0.1:$vport/" >/dev/null
	callgrind_control -z "$vp" >/dev/null 2>&1
	n=$(wrk -t 1 -c 20 -d 5 "http://127.0.0.1:$vport/" | sed -n 's/^ *\([0-9]*\) requests in.*/\1/p')
	callgrind_control -d "$vp" >/dev/null 2>&1
	vg_stop "$vp"
	echo "${n:-0}"
}
# vg_stop PID: nginx's graceful stop, then a kill (what is counted was dumped already)
vg_stop() {
	kill -QUIT "$1" 2>/dev/null || true
	for _ in $(seq 100); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
	kill -KILL "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
}
# vg_units FILE: the units begun in what callgrind counted (unit_begin's calls; none: empty)
vg_units() {
	# from another directory than the repository's: there, callgrind_annotate takes the file for
	# one of the sources it auto-annotates, without the calls out of it
	{ (cd "$V" && callgrind_annotate "$1" "$repo/agent/guard/unit.c" 2>/dev/null) |
		grep -oE '=> [^ ]*unit\.c:unit_begin[^ ]* \([0-9,]+x\)' || true; } |
		sed -E 's/.*\(([0-9,]+)x\)/\1/; s/,//g' | sort -n | tail -n 1
}
# vg_totals FILE N: instructions, code lines, data lines read and written that miss L1, per request
vg_totals() {
	callgrind_annotate "$1" 2>/dev/null | grep 'PROGRAM TOTALS' | sed -E 's/\([^)]*%\)//g; s/,//g' |
		awk -v n="$2" 'n > 0 { printf "%.0f %.1f %.1f %.1f", $1 / n, $4 / n, $5 / n, $6 / n }'
}
# training, natively (under valgrind, training finds no unit: its loop waits do not block as
# natively); the same process without a master, so its loop is where valgrind's runs have it
"$W/sm-guard" run --train --profile-dir "$V/prof" --log "$W/guard.log" -- \
	/usr/sbin/nginx -c "$V/nginx.conf" -p "$V" >/dev/null 2>&1 &
vp=$!
for _ in $(seq 100); do curl -sf -o /dev/null "http://127.0.0.1:$vport/" && break; sleep 0.05; done
wrk -t 1 -c 20 -d "$secs" "http://127.0.0.1:$vport/" >/dev/null
vg_stop "$vp"
n=$(vg_nginx "$V/cg.plain" env)
read -r pi pc pr pw <<<"$(vg_totals "$V/cg.plain.1-01" "$n")"
line="guard nginx request, as valgrind counts:    ${pi:-?} instructions, ${pc:-?} code lines, ${pr:-?} and ${pw:-?} data lines read and written missing L1 unguarded"
added=()
where=()
for m in $modes; do
	n=$(vg_nginx "$V/cg.$m" env "${vgngx_env[@]}" SM_GUARD_COLLECTOR="$m" SM_GUARD_COLLECTOR_DIR="$CDIR" \
		"$W/sm-guard" run --guard --profile-dir "$V/prof" --log "$W/guard.log" --)
	read -r gi gc gr gw <<<"$(vg_totals "$V/cg.$m.1-01" "$n")"
	# a guarded run that checked no unit (no profile, a loop not found) would count nothing of it
	u=$(vg_units "$V/cg.$m.1-01")
	line+="; $(mode_name "$m"): ${gi:-?}, ${gc:-?}, ${gr:-?} and ${gw:-?} (${u:-no} units)"
	added+=("$(awk -v a="${gi:-0}" -v b="${pi:-0}" 'BEGIN { print a - b }')")
	# the library's own functions, by their own instructions: where a guarded request's go
	where+=("$(python3 "$repo/tests/bench/cg_self.py" "$V/cg.$m.1-01" "${n:-0}" libsmguard.so 2>&1 || true)")
done
echo "$line"
# the same request natively: the worker's CPU time per request (user and system)
ngx 0 env
wpid=$(pgrep -P "${npid[0]}" | head -n 1)
c0=$(awk '{ print $14 + $15 }' "/proc/$wpid/stat")
n=$(wrk -t 1 -c 20 -d "$secs" "http://127.0.0.1:${nport[0]}/" | sed -n 's/^ *\([0-9]*\) requests in.*/\1/p')
c1=$(awk '{ print $14 + $15 }' "/proc/$wpid/stat")
nstop 0
cpu_us=$(awk -v a="$c0" -v b="$c1" -v n="${n:-0}" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.2f", n ? (b - a) / hz * 1e6 / n : 0 }')
# ns per bookkeeping instruction: callcost's warm and cold ns over valgrind's count of the same call
# (its instructions above the bare read)
rate_warm=$(awk -v ns="$( [ -s "$W/cc.warm" ] && col "$W/cc.warm" 2 1)" -v i="${cc_added:-0}" 'BEGIN { printf "%.3f", (i > 0 ? ns / i : 0) }')
rate_cold=$(awk -v ns="${cc_cold_ns:-0}" -v i="${cc_added:-0}" 'BEGIN { printf "%.3f", (i > 0 ? ns / i : 0) }')
i=0
for m in $modes; do
	awk -v add="${added[i]}" -v cpu="$cpu_us" -v w="$rate_warm" -v c="$rate_cold" -v name="$(mode_name "$m")" 'BEGIN {
		lo = add * w / 1000; hi = add * c / 1000
		plo = cpu > 0 ? 100 * lo / cpu : 0; phi = cpu > 0 ? 100 * hi / cpu : 0
		printf "guard nginx request, %-22s %+.0f instructions per request; at %.2f to %.2f ns each (callcost warm, cold) %.2f to %.2f us of the %.1f us of CPU a native request takes: %.2f to %.2f %%\n",
			name ":", add, w, c, lo, hi, cpu, plo, phi }'
	i=$((i + 1))
done
i=0
for m in $modes; do
	printf 'guard nginx request, %-22s %s\n' "$(mode_name "$m"), where:" "${where[i]}"
	i=$((i + 1))
done
fi
