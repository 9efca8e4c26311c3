#!/usr/bin/env bash
# The guard agent inside real servers from Debian's packages, each trained on a
# normal load and then guarded while the real sm-ingest takes what it ships:
#   - PostgreSQL (backends fork from the postmaster): trained on pgbench -S,
#     then a pgbench script in which about 1 % of transactions call
#     pg_sleep(0.1) and about 1 % run a CPU-heavy query; prints recall and
#     false positives; mined, the two are the top wait and run clusters;
#   - redis under redis-benchmark: no violation storm; DEBUG SLEEP and a slow
#     EVAL are caught with their stacks;
#   - nginx (a forked worker) serving a static file to wrk: no violation storm.
# The servers run on ports of their own and stop by themselves.
. "$(dirname "$0")/../lib.sh"

BIN=$SM_BIN_DIR
PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
for tool in "$PGBIN/postgres" "$PGBIN/pgbench" /usr/bin/redis-server /usr/bin/redis-benchmark /usr/sbin/nginx /usr/bin/wrk; do
	[ -x "$tool" ] || t_bail "$tool is installed (deploy/deps.sh test)"
done

sm_admin migrate >/dev/null || t_bail "migrate"
# the tests before this one filled the shared database: its vacuum and checkpoint now, not while
# the false positives are counted (a busy machine slows the guarded servers' requests)
pg_q "VACUUM ANALYZE" >/dev/null && pg_q "CHECKPOINT" >/dev/null || t_bail "vacuum"
TOKEN=$(mk_token ingest 2>/dev/null)
start_ingest || t_bail "sm-ingest starts"

# Everything the servers' own users read lives here (the checkout may be private to root).
W=$T_TMP/w
mkdir -p "$W/prof" "$W/spool"
cp "$BIN/sm-guard" "$W/sm-guard"
cp "$SM_BIN_DIR/../lib/libsmguard.so" "$W/libsmguard.so"
printf '%s\n' "$TOKEN" >"$W/token"
chmod 755 "$W" "$W/sm-guard"
chmod 644 "$W/libsmguard.so" "$W/token"
chmod 1777 "$W/prof" "$W/spool"
chmod 755 "$T_TMP"
export SM_GUARD_LIB=$W/libsmguard.so

# guard_run ARGS...: sm-guard run with the test's profiles, log and ingest (as the caller's user)
guard_run() {
	"$W/sm-guard" run --profile-dir "$W/prof" --log "$W/guard.log" --url "$INGEST_URL" --token-file "$W/token" "$@"
}

# last_exit EXE FIELD: a field of the agent's last exit line for that executable, summed over its processes
# since the mark MARK (a line count of the log)
sum_exits() {
	tail -n +"$2" "$W/guard.log" | grep "msg=\"exit\".* exe=$1 " | sed -n "s/.* $3=\([0-9]*\).*/\1/p" |
		awk '{s += $1} END {print s + 0}'
}
mark() { wc -l <"$W/guard.log" 2>/dev/null | awk '{print $1 + 1}'; }
touch "$W/guard.log"
chmod 666 "$W/guard.log"

# ---- PostgreSQL ----

PGPORT_T=$(free_port)
PGD=$W/pg
mkdir -p "$PGD"
chown postgres "$PGD"
as_pg() { runuser -u postgres -- env SM_GUARD_LIB="$SM_GUARD_LIB" "$@"; }
as_pg "$PGBIN/initdb" -D "$PGD/data" -A trust >/dev/null 2>&1 || t_bail "initdb"
cat >>"$PGD/data/postgresql.conf" <<EOF
port = $PGPORT_T
unix_socket_directories = '$PGD'
listen_addresses = ''
shared_buffers = 64MB
max_connections = 20
EOF
pgstart() {
	as_pg "$@" "$PGBIN/postgres" -D "$PGD/data" >"$PGD/server.log" 2>&1 &
	for _ in $(seq 1 300); do
		as_pg "$PGBIN/pg_isready" -q -h "$PGD" -p "$PGPORT_T" && return 0
		sleep 0.1
	done
	t_bail "postgres starts" "$(tail -n 20 "$PGD/server.log")"
}
pgstop() { as_pg "$PGBIN/pg_ctl" -D "$PGD/data" stop -m fast >/dev/null; }
pgbench() { as_pg "$PGBIN/pgbench" -h "$PGD" -p "$PGPORT_T" "$@" postgres; }
t_cleanup "runuser -u postgres -- $PGBIN/pg_ctl -D $PGD/data stop -m immediate >/dev/null 2>&1"

pgstart env
pgbench -i -s 5 -q >/dev/null 2>&1 || t_bail "pgbench -i"
pgstop

# a rate below saturation, skipping transactions already late rather than sending them in a burst
LOAD="-c 4 -j 2 -R 1000 --latency-limit 20 -T 15"
pgstart "$W/sm-guard" run --train --profile-dir "$W/prof" --log "$W/guard.log" --only postgres --
pgbench -S $LOAD >"$PGD/train.out" 2>&1 || t_fail "pgbench -S (training)" "$(cat "$PGD/train.out")"
pgstop
pgbid=$(readelf -n "$PGBIN/postgres" | sed -n 's/.*Build ID: //p')
show=$("$W/sm-guard" profile show "$W/prof/$pgbid.json")
t_match "postgres: the backends' loop site is WaitEventSetWait's epoll_wait" "$show" \
	"loop [0-9]+: postgres!WaitEventSetWait"
t_match "postgres: a unit type reads the query and sends the result" "$show" \
	"recv +in postgres!secure_read.*send +in postgres!secure_write"
echo "$show" | head -n 12 | sed 's/^/  | /'

cat >"$PGD/select.sql" <<'EOF'
\set aid random(1, 100000 * :scale)
SELECT abalance FROM pgbench_accounts WHERE aid = :aid;
EOF
echo 'SELECT pg_sleep(0.1);' >"$PGD/sleep.sql"
echo 'SELECT count(*) FROM generate_series(1, 200000);' >"$PGD/heavy.sql"
chmod 644 "$PGD"/*.sql
m=$(mark)
pgstart env SM_GUARD_REPORTS_PER_MIN=100000 "$W/sm-guard" run --profile-dir "$W/prof" --log "$W/guard.log" \
	--only postgres --url "$INGEST_URL" --token-file "$W/token" --spool "$W/spool" --app pg --label run=mixed --
postmaster=$(head -n 1 "$PGD/data/postmaster.pid")
# the CPU time the hypervisor took from this machine meanwhile (steal, /proc/stat's 8th column: no
# thread's run delay shows it, so a unit it slows is not labelled starved)
steal0=$(awk '/^cpu / { s = 0; for (i = 2; i <= NF; i++) s += $i; print $9, s }' /proc/stat)
pgbench -f "$PGD/select.sql@98" -f "$PGD/sleep.sql@1" -f "$PGD/heavy.sql@1" $LOAD >"$PGD/mixed.out" 2>&1 ||
	t_fail "pgbench (mixed)" "$(cat "$PGD/mixed.out")"
steal=$(awk -v b="$steal0" '/^cpu / { s = 0; for (i = 2; i <= NF; i++) s += $i; split(b, a, " ");
	printf "%.1f", (s > a[2] ? 100 * ($9 - a[1]) / (s - a[2]) : 0) }' /proc/stat)
pgstop
per_script() { awk -v s="$1" '/^SQL script/ {cur = ($0 ~ s)} cur && /^ - [0-9]+ transactions/ {print $2; exit}' "$PGD/mixed.out"; }
n_select=$(per_script select.sql)
n_sleep=$(per_script sleep.sql)
n_heavy=$(per_script heavy.sql)
echo "pgbench: $n_select selects, $n_sleep pg_sleep(0.1), $n_heavy heavy queries"
echo "agent: $(sum_exits postgres "$m" units) units, $(sum_exits postgres "$m" violations) violations," \
	"$(sum_exits postgres "$m" lost) lost"

# a stream is the pg_sleep's when its symptom thread waited in pg_sleep; the heavy query's when it ran the
# function scan; each pg_sleep is one wait of 100 ms: counted one by one (a unit may hold two)
fid() { echo "(SELECT id FROM frames WHERE name = '$1')"; }
mixed="s.labels->>'run' = 'mixed' AND s.role = 'violation'"
got_sleep=$(pg_q "SELECT count(DISTINCT (e.tid, e.ts_ns)) FROM events e JOIN streams s ON s.id = e.stream_ref JOIN stacks k
	ON k.id = e.stack_id WHERE $mixed AND e.tid = s.symptom_tid AND e.kind = 'w' AND e.dur_ns >= 90000000 AND
	$(fid 'postgres!pg_sleep') = ANY(k.frame_ids)")
heavy_frames="ARRAY[$(fid 'postgres!ExecMakeTableFunctionResult'), $(fid 'postgres!tuplestore_putvalues'),
	$(fid 'postgres!tuplestore_gettupleslot')]"
got_heavy=$(pg_q "SELECT count(*) FROM streams s WHERE $mixed AND EXISTS (SELECT 1 FROM events e JOIN stacks k ON
	k.id = e.stack_id WHERE e.stream_ref = s.id AND e.tid = s.symptom_tid AND e.kind = 'r' AND k.frame_ids && $heavy_frames)")
# neither: a false positive, unless the agent found the unit starved of CPU (unit.cause cpu: the
# machine's problem, which a loaded test machine has, reported as such)
others="$mixed AND NOT EXISTS (SELECT 1 FROM events e JOIN stacks k ON
	k.id = e.stack_id WHERE e.stream_ref = s.id AND e.tid = s.symptom_tid AND
	(k.frame_ids && $heavy_frames OR $(fid 'postgres!pg_sleep') = ANY(k.frame_ids)))"
IFS='|' read -r starved fp <<<"$(pg_q "SELECT count(*) FILTER (WHERE s.labels->>'unit.cause' = 'cpu'),
	count(*) FILTER (WHERE s.labels->>'unit.cause' IS DISTINCT FROM 'cpu') FROM streams s WHERE $others")"
rs=$(awk -v a="$got_sleep" -v b="$n_sleep" 'BEGIN {printf "%.1f", b ? 100 * a / b : 0}')
rh=$(awk -v a="$got_heavy" -v b="$n_heavy" 'BEGIN {printf "%.1f", b ? 100 * a / b : 0}')
fpr=$(awk -v a="$fp" -v b="$n_select" 'BEGIN {printf "%.2f", b ? 100 * a / b : 0}')
echo "recall: pg_sleep $got_sleep/$n_sleep ($rs %), heavy query $got_heavy/$n_heavy ($rh %);" \
	"false positives: $fp streams for $n_select other transactions ($fpr %), besides $starved starved of CPU;" \
	"the hypervisor took $steal % of the machine's CPU time meanwhile"
t_eq "postgres: almost every pg_sleep is caught (at least 90 %)" "$(awk -v r="$rs" 'BEGIN {print (r >= 90)}')" 1
t_eq "postgres: almost every heavy query is caught (at least 90 %)" "$(awk -v r="$rh" 'BEGIN {print (r >= 90)}')" 1
# 0.34 to 0.40 % on quiet runs; 1.09 % in a CI run with 49 starved (docs/guard.md: steal time is not
# labelled). 2 % still fails a threshold that is off (every slower than usual transaction reported).
t_eq "postgres: almost nothing else is reported (under 2 % of the other transactions)" \
	"$(awk -v r="$fpr" 'BEGIN {print (r < 2)}')" 1
t_eq "postgres: the slow transactions' symptom threads are the four backends, not the postmaster" \
	"$(pg_q "SELECT count(DISTINCT symptom_tid) = 4 AND bool_and(symptom_tid <> $postmaster) FROM streams s WHERE $mixed AND
	       EXISTS (SELECT 1 FROM events e JOIN stacks k ON k.id = e.stack_id WHERE e.stream_ref = s.id AND
	       e.tid = s.symptom_tid AND $(fid 'postgres!pg_sleep') = ANY(k.frame_ids))")" t

run=$("$BIN/sm-miner" run --quiet --app pg --kind wait 2>"$T_TMP/miner.err") || t_fail "sm-miner run (wait)" "$(cat "$T_TMP/miner.err")"
top=$("$BIN/sm-miner" show "$run" --limit 1)
echo "$top" | sed 's/^/  | /'
t_match "postgres: mined, pg_sleep is the top wait cluster" "$(grep -A1 -E '^wait +#1 ' <<<"$top")" 'postgres!pg_sleep'
run=$("$BIN/sm-miner" run --quiet --app pg --kind run 2>"$T_TMP/miner.err") || t_fail "sm-miner run (run)" "$(cat "$T_TMP/miner.err")"
top=$("$BIN/sm-miner" show "$run" --limit 1)
echo "$top" | sed 's/^/  | /'
t_match "postgres: and the heavy query's executor the top run cluster" "$(grep -A1 -E '^run +#1 ' <<<"$top")" \
	'postgres!(ExecMakeTableFunctionResult|standard_ExecutorRun|tuplestore_)'

# ---- redis ----

RPORT=$(free_port)
redis() {
	"$@" /usr/bin/redis-server --port "$RPORT" --bind 127.0.0.1 --save '' --appendonly no --enable-debug-command yes \
		--dir "$W" --logfile "$W/redis.log" &
	RPID=$!
	# a loaded machine may take seconds (the agent symbolizes the program at start): 30 s at most,
	# unless it exited
	for _ in $(seq 1 600); do
		redis-cli -p "$RPORT" ping >/dev/null 2>&1 && return 0
		kill -0 "$RPID" 2>/dev/null || break
		sleep 0.05
	done
	t_bail "redis starts" "$(kill -0 "$RPID" 2>/dev/null && echo "alive, no answer in 30 s" || echo "exited")
$(tail -n 20 "$W/redis.log" 2>/dev/null)
$(tail -n 20 "$W/guard.log" 2>/dev/null)"
}
rstop() { redis-cli -p "$RPORT" shutdown nosave >/dev/null 2>&1; wait "$RPID"; }
t_cleanup "redis-cli -p $RPORT shutdown nosave >/dev/null 2>&1"
redis "$W/sm-guard" run --train --profile-dir "$W/prof" --log "$W/guard.log" --
redis-benchmark -p "$RPORT" -t get,set -n 200000 -c 20 -q >/dev/null 2>&1
rstop
m=$(mark)
# the two injected slow commands must ship whatever a loaded machine made slow before them (the
# default rate limit, 6 streams per unit type a minute, could be spent already)
SM_GUARD_REPORTS_PER_MIN=1000 redis guard_run --label run=redis --
redis-benchmark -p "$RPORT" -t get,set -n 200000 -c 20 -q >"$W/rb.out" 2>&1
sleep 1
redis-cli -p "$RPORT" debug sleep 0.3 >/dev/null
redis-cli -p "$RPORT" eval 'local i = 0 while i < 20000000 do i = i + 1 end return i' 0 >/dev/null
sleep 2
rstop
units=$(sum_exits redis-server "$m" units)
v=$(sum_exits redis-server "$m" violations)
echo "redis: $units units, $v violations (two injected)"
t_eq "redis: no violation storm under redis-benchmark (at most 2 in 1000 units besides the two injected)" \
	"$(awk -v u="$units" -v v="$v" 'BEGIN {print (u > 10000 && v - 2 <= u / 500)}')" 1
ev=$(stream_events "s.labels->>'run' = 'redis' AND s.app = 'redis-server' AND e.tid = s.symptom_tid")
t_match "redis: DEBUG SLEEP is a wait of 300 ms in debugCommand's nanosleep" "$(awk '$1 == "w" && $3 >= 290000000' <<<"$ev")" \
	'redis-server!debugCommand;libc\.so\.6!nanosleep'
t_match "redis: the slow EVAL is run events in the Lua interpreter" "$(awk '$1 == "r" && $3 > 0' <<<"$ev")" \
	'redis-server!(evalGenericCommand|luaV_execute)'
# /usr/bin/redis-server links to redis-check-rdb: frames carry the name the program was started as
t_eq "redis: the main module is named as started (redis-server)" \
	"$(pg_q "SELECT count(*) FROM frames WHERE name LIKE 'redis-check-rdb%'")" 0

# ---- nginx ----

NPORT=$(free_port)
ND=$W/nginx
mkdir -p "$ND/www" "$ND/logs"
head -c 4096 /dev/urandom | base64 >"$ND/www/index.html"
cat >"$ND/nginx.conf" <<EOF
worker_processes 1;
daemon off;
pid $ND/nginx.pid;
error_log $ND/logs/error.log;
events { worker_connections 512; }
http {
	access_log off;
	server { listen 127.0.0.1:$NPORT; root $ND/www; }
}
EOF
chmod -R a+rX "$ND"
nginx_run() {
	"$@" /usr/sbin/nginx -c "$ND/nginx.conf" -p "$ND" &
	NPID=$!
	for _ in $(seq 1 600); do
		curl -sf -o /dev/null "http://127.0.0.1:$NPORT/" && return 0
		sleep 0.05
	done
	t_bail "nginx starts" "$(cat "$ND/logs/error.log")"
}
nstop() { /usr/sbin/nginx -c "$ND/nginx.conf" -p "$ND" -s quit 2>/dev/null; wait "$NPID"; }
t_cleanup "/usr/sbin/nginx -c $ND/nginx.conf -p $ND -s stop 2>/dev/null"
nginx_run "$W/sm-guard" run --train --profile-dir "$W/prof" --log "$W/guard.log" --
wrk -t 1 -c 20 -d 8 "http://127.0.0.1:$NPORT/" >/dev/null 2>&1
nstop
t_match "nginx: the workers learnt their loop" "$("$W/sm-guard" profile show "$W/prof/$(readelf -n /usr/sbin/nginx |
	sed -n 's/.*Build ID: //p').json")" "loop [0-9]+: nginx[!+].*epoll_wait at nginx"
# nginx_guarded: nginx guarded under wrk; sets m (the log's mark), units, v (violations) and steal
nginx_guarded() {
	local steal0
	m=$(mark)
	nginx_run guard_run --label run=nginx --
	steal0=$(awk '/^cpu / { s = 0; for (i = 2; i <= NF; i++) s += $i; print $9, s }' /proc/stat)
	wrk -t 1 -c 20 -d 8 "http://127.0.0.1:$NPORT/" >"$W/wrk.out" 2>&1
	steal=$(awk -v b="$steal0" '/^cpu / { s = 0; for (i = 2; i <= NF; i++) s += $i; split(b, a, " ");
		printf "%.1f", (s > a[2] ? 100 * ($9 - a[1]) / (s - a[2]) : 0) }' /proc/stat)
	nstop
	units=$(sum_exits nginx "$m" units)
	v=$(sum_exits nginx "$m" violations)
	echo "nginx: $units units, $v violations; $(grep 'Requests/sec' "$W/wrk.out");" \
		"the hypervisor took $steal % of the machine's CPU time meanwhile"
}
nginx_guarded
# a storm (thresholds learnt wrong) comes back in a second run; a busy neighbour's hour mostly
# does not (one CI run had 803 violations in 13,389 units, 60 in 1000, with nothing of the
# agent's changed): a run over the bound is run once more, and the second decides
if [ "$(awk -v u="$units" -v v="$v" 'BEGIN {print (u > 10000 && v <= u / 25)}')" != 1 ]; then
	echo "nginx: over the bound of 40 in 1000 units; once more"
	nginx_guarded
fi
# nginx holds a libcrypto before the agent loads libcurl, and OpenSSL's exit handler with it: each
# process's exit work runs in the agent's own exit handler, ahead of OpenSSL's (docs/guard.md, Exit)
gates=$(tail -n +"$m" "$W/guard.log" | grep -c "msg=\"exit work ahead of the program's exit handlers\".* exe=nginx ")
exits=$(tail -n +"$m" "$W/guard.log" | grep -c "msg=\"exit\".* exe=nginx ")
echo "nginx: $exits exits, $gates of them through the agent's exit handler"
t_eq "nginx: its processes' exit work ran ahead of OpenSSL's exit handler" \
	"$(awk -v g="$gates" -v e="$exits" 'BEGIN {print (g >= 1 && g <= e)}')" 1
# one worker and one wrk thread on two cores: nobody waits for a core (with more threads than cores,
# units preempted for milliseconds are real violations: about 1 % of them here). The machine's
# neighbours still preempt now and then: 0.2 to 1.2 in 1000 units in runs here, and on busier days
# 4 to 20 in 1000 (2026-11-30: 6 and 7 with the library of 1fad589, 4 and 10 with the day's,
# 20 once under the tests); a storm (thresholds learnt wrong) is tens of percent
t_eq "nginx: no violation storm under wrk (at most 40 in 1000 units; $v in $units, steal $steal %)" \
	"$(awk -v u="$units" -v v="$v" 'BEGIN {print (u > 10000 && v <= u / 25)}')" 1
t_eq "nginx: and at most 6 streams shipped per worker and unit type (the run lasts under a minute)" \
	"$(pg_q "SELECT coalesce(max(n), 0) <= 6 FROM (SELECT count(*) AS n FROM streams WHERE labels->>'run' = 'nginx' AND role = 'violation'
	       GROUP BY symptom_tid, symptom_unit_type) x")" t

stop_ingest
t_done
