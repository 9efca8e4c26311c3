#!/usr/bin/env bash
# bench/guard.sh: what the guard agent costs the programs it guards (make bench,
# section "guard"; a report, not a test). Each server is trained once, then run
# in interleaved rounds without and with the agent guarding, under its own load
# tool:
#   pgbench -S (4 clients, 2 threads) against PostgreSQL
#   redis-benchmark GET and SET (20 clients) against redis-server
#   wrk (1 thread, 20 connections) against nginx (1 worker) serving a 16 KiB file
# and reports each round's throughput and the median over the pairs of
# (guarded / unguarded), i.e. the throughput lost. Then the agent's memory per
# process (resident set, guarded minus unguarded, after the same load), and the
# CPU of its own threads: while guarding a normal load, and while shipping
# violation streams (redis DEBUG SLEEP) to a real sm-ingest.
#
# First, the agent's bookkeeping per wrapped call (tests/guard/callcost: the
# cheapest system call, in units, without and with the agent): unlike the
# throughputs, it does not move with the machine's neighbours.
#
# Environment: SM_BENCH_GUARD_ROUNDS (pairs per server, 9), SM_BENCH_GUARD_SECS
# (seconds per pgbench and wrk round, 6), SM_BENCH_GUARD_REQUESTS (redis-benchmark
# requests per test per round, 200000). Needs root (PostgreSQL runs as postgres).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
cd "$repo"
bin=$repo/bin
rounds=${SM_BENCH_GUARD_ROUNDS:-9}
secs=${SM_BENCH_GUARD_SECS:-6}
requests=${SM_BENCH_GUARD_REQUESTS:-200000}
pgbin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)

# the servers here are this script's own: nothing from the caller's PostgreSQL settings applies
unset PGHOST PGPORT PGUSER PGDATABASE PGPASSWORD PGPASSFILE PGSERVICE PGOPTIONS
W=$(mktemp -d /var/tmp/sm-bench-guard.XXXXXX)
chmod 755 "$W"
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	runuser -u postgres -- "$pgbin/pg_ctl" -D "$W/pg/data" stop -m immediate >/dev/null 2>&1 || true
	redis-cli -p "${rport:-0}" shutdown nosave >/dev/null 2>&1 || true
	/usr/sbin/nginx -c "$W/nginx/nginx.conf" -p "$W/nginx" -s stop >/dev/null 2>&1 || true
	rm -rf "$W"
}
trap cleanup EXIT

cp "$bin/sm-guard" "$repo/lib/libsmguard.so" "$W/"
chmod 755 "$W/sm-guard"
chmod 644 "$W/libsmguard.so"
mkdir -p "$W/prof" "$W/spool"
chmod 1777 "$W/prof" "$W/spool"
export SM_GUARD_LIB=$W/libsmguard.so
free_port() {
	local p
	for _ in $(seq 100); do
		p=$((20000 + RANDOM % 30000))
		(: <>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
	done
}
median() { sort -g | awk '{ v[NR] = $1 } END { print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# private memory (USS: what the process alone holds; RSS would count shared buffers and libraries)
uss_mb() { awk '/^Private_(Clean|Dirty):/ { s += $2 } END { printf "%.1f", s / 1024 }' "/proc/$1/smaps_rollup"; }
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

# report NAME UNIT: reads "none guarded" pairs on stdin, prints rounds and the median loss
report() {
	local name=$1 unit=$2
	awk -v name="$name" -v unit="$unit" '
		{ n++; a[n] = $1; b[n] = $2; r[n] = $2 / $1 }
		END {
			printf "guard %-34s", name ":"
			for (i = 1; i <= n; i++) printf " %.0f/%.0f", a[i], b[i]
			printf " %s (without/with)\n", unit
			# median of the per-pair ratios
			for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (r[j] < r[i]) { t = r[i]; r[i] = r[j]; r[j] = t }
			m = n % 2 ? r[(n + 1) / 2] : (r[n / 2] + r[n / 2 + 1]) / 2
			printf "guard %-34s median ratio %.4f: %.2f %% of throughput lost (must: at most 3 %%, goal: under 1 %%)\n",
				name ":", m, 100 * (1 - m)
		}'
}

echo
echo "== guard: the agent inside real servers, $rounds interleaved pairs of rounds each"

# ---- one wrapped call ----
cc=$repo/build/rel/tests/callcost
"$W/sm-guard" run --train --profile-dir "$W/prof" --log "$W/guard.log" -- "$cc" 3000 200 >/dev/null
: >"$W/cc"
for _ in $(seq 5); do
	echo "$("$cc" 20000 200) $("$W/sm-guard" run --profile-dir "$W/prof" --log "$W/guard.log" -- "$cc" 20000 200)" >>"$W/cc"
done
printf 'guard one wrapped call inside a unit:       %.0f ns without, %.0f ns with the agent: %.0f ns of bookkeeping (median of 5; read() of nothing from /dev/null)\n' \
	"$(awk '{ print $1 }' "$W/cc" | median)" "$(awk '{ print $2 }' "$W/cc" | median)" \
	"$(awk '{ print $2 - $1 }' "$W/cc" | median)"

# ---- PostgreSQL: pgbench -S ----
pport=$(free_port)
mkdir -p "$W/pg"
chown postgres "$W/pg"
as_pg() { runuser -u postgres -- env SM_GUARD_LIB="$SM_GUARD_LIB" "$@"; }
as_pg "$pgbin/initdb" -D "$W/pg/data" -A trust >/dev/null 2>&1
cat >>"$W/pg/data/postgresql.conf" <<EOF
port = $pport
unix_socket_directories = '$W/pg'
listen_addresses = ''
shared_buffers = 128MB
max_connections = 20
EOF
pgstart() {
	as_pg "$@" "$pgbin/postgres" -D "$W/pg/data" >"$W/pg/log" 2>&1 &
	for _ in $(seq 100); do as_pg "$pgbin/pg_isready" -q -h "$W/pg" -p "$pport" && return; sleep 0.1; done
	echo "bench: postgres does not start" >&2
	exit 1
}
pgstop() { as_pg "$pgbin/pg_ctl" -D "$W/pg/data" stop -m fast >/dev/null; }
pgb() { as_pg "$pgbin/pgbench" -h "$W/pg" -p "$pport" "$@" postgres 2>&1; }
tps() { sed -n 's/^tps = \([0-9.]*\) .*/\1/p'; }
pgstart env
pgb -i -s 10 -q >/dev/null
pgstop
G="$W/sm-guard run --profile-dir $W/prof --log $W/guard.log --only postgres"
pgstart $G --train --
pgb -S -c 4 -j 2 -T "$secs" >/dev/null
pgstop
: >"$W/pairs"
for _ in $(seq "$rounds"); do
	pgstart env
	a=$(pgb -S -c 4 -j 2 -T "$secs" | tps)
	pgstop
	pgstart $G --
	b=$(pgb -S -c 4 -j 2 -T "$secs" | tps)
	pgstop
	echo "$a $b" >>"$W/pairs"
done
report "pgbench -S (tps)" tps <"$W/pairs"
pgstart env
pgb -S -c 4 -j 2 -T 6 >/dev/null &
sleep 4
plain=$(backend_uss)
wait $!
pgstop
pgstart $G --
pgb -S -c 4 -j 2 -T 6 >/dev/null &
sleep 4
guarded=$(backend_uss)
wait $!
pgstop
echo "guard postgres backend private memory:     $plain MB without, $guarded MB with the agent ($(awk -v a="$plain" -v b="$guarded" 'BEGIN { printf "%+.1f", b - a }') MB)"

# ---- redis ----
rport=$(free_port)
redis() {
	"$@" /usr/bin/redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no --dir "$W" \
		--enable-debug-command yes --logfile "$W/redis.log" &
	rpid=$!
	for _ in $(seq 100); do redis-cli -p "$rport" ping >/dev/null 2>&1 && return; sleep 0.05; done
	echo "bench: redis does not start" >&2
	exit 1
}
rstop() { redis-cli -p "$rport" shutdown nosave >/dev/null 2>&1; wait "$rpid" || true; }
rb() { redis-benchmark -p "$rport" -t "$1" -n "$requests" -c 20 -q 2>/dev/null | sed -n 's/.*: \([0-9.]*\) requests per second.*/\1/p'; }
G="$W/sm-guard run --profile-dir $W/prof --log $W/guard.log"
redis $G --train --
rb get,set >/dev/null
rstop
: >"$W/get"
: >"$W/set"
for _ in $(seq "$rounds"); do
	redis env
	ag=$(rb get)
	as=$(rb set)
	rstop
	redis $G --
	bg=$(rb get)
	bs=$(rb set)
	rstop
	echo "$ag $bg" >>"$W/get"
	echo "$as $bs" >>"$W/set"
done
report "redis-benchmark GET (req/s)" req/s <"$W/get"
report "redis-benchmark SET (req/s)" req/s <"$W/set"
redis env
rb get,set >/dev/null
plain=$(uss_mb "$rpid")
rstop
redis $G --
rb get,set >/dev/null
guarded=$(uss_mb "$rpid")
cpu=$(agent_cpu "$rpid")
rstop
echo "guard redis-server private memory:         $plain MB without, $guarded MB with the agent ($(awk -v a="$plain" -v b="$guarded" 'BEGIN { printf "%+.1f", b - a }') MB)"
echo "guard redis agent threads' CPU:            $cpu s over $((2 * requests)) requests (watchdog, shipping; no violation)"

# shipping: violations sent to a real sm-ingest
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
redis env SM_GUARD_REPORTS_PER_MIN=100000 $G --url "http://127.0.0.1:$(cat "$W/iport")" --token-file "$W/token" --
t0=$(agent_cpu "$rpid")
for _ in $(seq 50); do redis-cli -p "$rport" debug sleep 0.02 >/dev/null; done
sleep 2
t1=$(agent_cpu "$rpid")
rstop
n=$(psql -XAtc "SELECT count(*) FROM streams")
echo "guard shipping, redis DEBUG SLEEP x 50:     $n streams stored; agent threads $(awk -v a="$t0" -v b="$t1" -v n="$n" 'BEGIN { printf "%.3f s CPU, %.1f ms per stream", b - a, n ? 1000 * (b - a) / n : 0 }')"
as_pg "$pgbin/pg_ctl" -D "$ingdb/data" stop -m fast >/dev/null

# ---- nginx ----
nport=$(free_port)
N=$W/nginx
mkdir -p "$N/www" "$N/logs"
head -c 12288 /dev/urandom | base64 -w 0 >"$N/www/index.html"
cat >"$N/nginx.conf" <<EOF
worker_processes 1;
daemon off;
pid $N/nginx.pid;
error_log $N/logs/error.log;
events { worker_connections 1024; }
http { access_log off; server { listen 127.0.0.1:$nport; root $N/www; } }
EOF
chmod -R a+rX "$N"
ngx() {
	"$@" /usr/sbin/nginx -c "$N/nginx.conf" -p "$N" &
	npid=$!
	for _ in $(seq 100); do curl -sf -o /dev/null "http://127.0.0.1:$nport/" && return; sleep 0.05; done
	echo "bench: nginx does not start" >&2
	exit 1
}
nstop() { /usr/sbin/nginx -c "$N/nginx.conf" -p "$N" -s quit 2>/dev/null; wait "$npid" || true; }
rps() { wrk -t 1 -c 20 -d "$secs" "http://127.0.0.1:$nport/" 2>/dev/null | sed -n 's/^Requests\/sec: *\([0-9.]*\)/\1/p'; }
ngx $G --train --
rps >/dev/null
nstop
: >"$W/pairs"
for _ in $(seq "$rounds"); do
	ngx env
	a=$(rps)
	nstop
	ngx $G --
	b=$(rps)
	nstop
	echo "$a $b" >>"$W/pairs"
done
report "wrk against nginx (req/s)" req/s <"$W/pairs"
