#!/usr/bin/env bash
# Acceptance on real servers from Debian's packages with realistic problems (issue 26): no sleeps,
# the slowness comes from real work. Each server is trained on its normal load, then guarded
# (default agent settings) under that load with problems mixed in, and what arrives at a real
# sm-ingest is mined with default settings:
#   - PostgreSQL under a pgbench -S-like load, about 1 % each of: lock waits on one hot row
#     (transactions that update it, then work while holding it), a selective query on an unindexed
#     column of a 400,000-row table (sequential scan), a sort that spills to disk (work_mem 1MB);
#   - redis under redis-benchmark GET/SET, with a driver mixing in KEYS over 100,000 keys, DEL of a
#     100,000-member set (the driver builds it again between deletions) and a CPU-heavy EVAL;
#   - nginx under wrk, 1 in 2000 requests each: a slow upstream behind proxy_pass (a CPU-bound
#     upstream), and a 100 KB response gzipped at level 9. The slow upstream is also run alone:
#     an event-driven worker never blocks on it, so no unit is slow; the agent sees it as deferred
#     requests, each with the upstream's wait as an [async wait] event (docs/guard.md).
# Per problem it prints its rank among the run's problems, the clusters it spans, its streams, the
# violations they count, and the load tool's own count of slow requests (recall); and how many
# shipped streams belong to no problem. The load tools' counts: pgbench --log per script and
# PostgreSQL's log_lock_waits; the redis driver's own timing of each command; nginx's access log
# ($request_time) for the upstream; for the gzip, which nginx finishes within one iteration of its
# loop (its cached clock logs 0.000 s), every request of the access log, each timed apart by curl.
#
# The goal (issue 26: every problem among the top 3 of its app, normal work below it) is asserted
# only with SM_PROBLEMS_GOAL=1; what holds today is asserted always. tests/bench/problems.sh runs
# this file with longer loads (SM_PROBLEMS_TRAIN_S, SM_PROBLEMS_LOAD_S) and SM_PROBLEMS_APPS.
# The servers run on ports of their own and stop by themselves.
. "$(dirname "$0")/../lib.sh"

TRAIN_S=${SM_PROBLEMS_TRAIN_S:-12}
LOAD_S=${SM_PROBLEMS_LOAD_S:-25}
APPS=" ${SM_PROBLEMS_APPS:-postgres redis nginx} "
GOAL=${SM_PROBLEMS_GOAL:-0}
# what holds today: most problems have a cluster among the run's top 15
# (ranks seen here: 1 to 14, or none when the budget suppressed all of a problem's streams; the goal is 3)
TOP_TODAY=15
want() { [[ $APPS == *" $1 "* ]]; }

BIN=$SM_BIN_DIR
PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
for tool in "$PGBIN/postgres" "$PGBIN/pgbench" /usr/bin/redis-server /usr/bin/redis-benchmark /usr/sbin/nginx \
	/usr/bin/wrk /usr/bin/python3; do
	[ -x "$tool" ] || t_bail "$tool is installed (deploy/deps.sh test)"
done

sm_admin migrate >/dev/null || t_bail "migrate"
TOKEN=$(mk_token ingest 2>/dev/null)
start_ingest || t_bail "sm-ingest starts"

# Everything the servers' own users read lives here (the checkout may be private to root).
W=$T_TMP/w
mkdir -p "$W/prof"
cp "$BIN/sm-guard" "$W/sm-guard"
cp "$SM_BIN_DIR/../lib/libsmguard.so" "$W/libsmguard.so"
printf '%s\n' "$TOKEN" >"$W/token"
chmod 755 "$W" "$W/sm-guard" "$T_TMP"
chmod 644 "$W/libsmguard.so" "$W/token"
chmod 1777 "$W/prof"
touch "$W/guard.log"
chmod 666 "$W/guard.log"
export SM_GUARD_LIB=$W/libsmguard.so
# the agent's command lines, training and (with the streams' label run=LABEL) guarding with its default
# settings, shipping to sm-ingest: arrays, so that runuser can start them too
TRAIN=("$W/sm-guard" run --train --profile-dir "$W/prof" --log "$W/guard.log")
guard_args() {
	GUARD=("$W/sm-guard" run --profile-dir "$W/prof" --log "$W/guard.log" --url "$INGEST_URL" --token-file "$W/token"
		--label "run=$1")
}
# exits EXE FIELD MARK: a field of the agent's exit lines for that executable since line MARK, summed
exits() {
	tail -n +"$3" "$W/guard.log" | grep "msg=\"exit\".* exe=$1 " | sed -n "s/.* $2=\([0-9]*\).*/\1/p" |
		awk '{s += $1} END {print s + 0}'
}
mark() { wc -l <"$W/guard.log" | awk '{print $1 + 1}'; }
pct() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.1f", b ? 100 * a / b : 0}'; }

# ---- what a run found, per problem ----
#
# A problem is named by a marker: a regular expression over frame names that only its stacks hold.
# Its streams: the shipped violation streams whose symptom thread has an event with such a frame;
# the other shipped streams belong to no problem (normal work that crossed its threshold).

# weight of a stream: the agent's sampling weight where the schema has one (old agents weigh 1)
WEIGHT=1
[ "$(pg_q "SELECT count(*) FROM information_schema.columns WHERE table_name = 'streams' AND column_name = 'weight'")" = 1 ] &&
	WEIGHT='coalesce(s.weight, 1)'

# problem_rank RUN MARKER: "RANK CLUSTERS OWN_RANK" of the problem, from the run's problems
# (GET /api/v1/runs/{id}/problems; docs/mining.md "Problems"): RANK is the best rank of a problem
# with a member cluster whose patterns hold a marker frame, CLUSTERS how many member clusters that
# problem has; OWN_RANK the best rank of a problem with a member cluster whose medoid (what the
# cluster is titled by) holds a marker frame: a cluster that glued the problem to other work does
# not count ("-" when none).
problem_rank() {
	pg_q "WITH m AS (SELECT c.problem_id,
	                        bool_or(EXISTS (SELECT 1 FROM patterns p, unnest(p.frame_ids) fid, frame_names f
	                                        WHERE p.id = ANY (c.members) AND f.id = fid AND f.name ~ :'re')) AS any,
	                        bool_or(EXISTS (SELECT 1 FROM patterns p, unnest(p.frame_ids) fid, frame_names f
	                                        WHERE p.id = c.medoid AND f.id = fid AND f.name ~ :'re')) AS own
	                 FROM clusters c WHERE c.run_id = :'run' GROUP BY c.problem_id),
	      hit AS (SELECT pr.rank, cardinality(pr.members) AS n, m.own FROM problems pr JOIN m ON m.problem_id = pr.id
	              WHERE m.any)
	      SELECT coalesce(min(rank)::text, '-') || ' ' ||
	             coalesce((SELECT n FROM hit ORDER BY rank LIMIT 1), 0) || ' ' ||
	             coalesce(min(rank) FILTER (WHERE own)::text, '-')
	      FROM hit" -v run="$1" -v re="$2"
}

# problem_streams LABEL MARKER: "STREAMS VIOLATIONS THRESHOLD_NS" of the shipped violation streams whose
# symptom thread has an event with a marker frame (violations: their weights summed; threshold: the
# median of their units' thresholds, 1 ms without streams: the agent's floor)
problem_streams() {
	pg_q "SELECT count(*) || ' ' || coalesce(sum($WEIGHT)::bigint, 0) || ' ' ||
	             coalesce(percentile_disc(0.5) WITHIN GROUP (ORDER BY s.symptom_threshold_ns), 1000000)
	      FROM streams s WHERE s.labels->>'run' = :'lab' AND s.role = 'violation' AND EXISTS (
	        SELECT 1 FROM events e JOIN stacks k ON k.id = e.stack_id JOIN frame_names f ON f.id = ANY (k.frame_ids)
	        WHERE e.stream_ref = s.id AND e.tid = s.symptom_tid AND f.name ~ :'re')" -v lab="$1" -v re="$2"
}

# report APP LABEL RUN: per problem (PROBLEMS: "name slow marker" lines; slow: a command that prints
# the load tool's count of requests slower than the threshold given as its argument, in ns), then
# the run's top clusters. Sets RANK_<name>, OWN_<name>, RECALL_<name> (percent), NOPROB (streams of no problem),
# SHIPPED, and NORMAL_RANK (best rank of a cluster of no problem).
report() {
	local app=$1 label=$2 run=$3 name re slow rk ncl own st viol thr truth all_re=
	SHIPPED=$(pg_q "SELECT count(*) FROM streams s WHERE s.labels->>'run' = :'lab' AND s.role = 'violation'" -v lab="$label")
	echo "$app: run $run; $SHIPPED violation streams shipped"
	printf '  %-10s %5s %8s %8s %7s %10s %9s %7s %12s\n' problem rank own-rank clusters streams violations slow recall threshold
	while read -r name slow re; do
		[ -n "$name" ] || continue
		all_re=${all_re:+$all_re|}$re
		read -r rk ncl own < <(problem_rank "$run" "$re")
		read -r st viol thr < <(problem_streams "$label" "$re")
		truth=$($slow "$thr")
		printf '  %-10s %5s %8s %8s %7s %10s %9s %6s%% %9.1f ms\n' "$name" "$rk" "$own" "$ncl" "$st" "$viol" "$truth" \
			"$(pct "$st" "$truth")" "$(awk -v t="$thr" 'BEGIN {print t / 1e6}')"
		printf -v "RANK_$name" '%s' "$rk"
		printf -v "OWN_$name" '%s' "$own"
		printf -v "CLUSTERS_$name" '%s' "$ncl"
		printf -v "STREAMS_$name" '%s' "$st"
		printf -v "RECALL_$name" '%s' "$(pct "$st" "$truth")"
	done <<<"$PROBLEMS"
	NOPROB=$(pg_q "SELECT count(*) FROM streams s WHERE s.labels->>'run' = :'lab' AND s.role = 'violation' AND NOT EXISTS (
	        SELECT 1 FROM events e JOIN stacks k ON k.id = e.stack_id JOIN frame_names f ON f.id = ANY (k.frame_ids)
	        WHERE e.stream_ref = s.id AND e.tid = s.symptom_tid AND f.name ~ :'re')" -v lab="$label" -v re="$all_re")
	echo "  streams of no problem (normal work over its threshold): $NOPROB of $SHIPPED ($(pct "$NOPROB" "$SHIPPED") %)"
	# the top problems: each with the marker frames its clusters hold (or "-": normal work) and its title
	pg_q "SELECT pr.rank || '|' || pr.cause || ' ' || cardinality(pr.members) || '|' || round(pr.total_cost_ns / 1e6, 1) || '|' || pr.streams || '|' ||
	             coalesce((SELECT string_agg(DISTINCT f.name, ',') FROM clusters c, patterns p, unnest(p.frame_ids) fid, frame_names f
	                       WHERE c.problem_id = pr.id AND p.id = ANY (c.members) AND f.id = fid AND f.name ~ :'re'), '-') || '|' ||
	             (SELECT string_agg(f.name, ' > ' ORDER BY u.ord) FROM unnest(pr.title_frame_ids) WITH ORDINALITY u(fid, ord)
	                     JOIN frame_names f ON f.id = u.fid)
	      FROM problems pr WHERE pr.run_id = :'run' ORDER BY pr.rank LIMIT 8" -v run="$run" -v re="$all_re" >"$T_TMP/top"
	NORMAL_RANK=$(pg_q "SELECT coalesce(min(pr.rank), 0) FROM problems pr WHERE pr.run_id = :'run' AND pr.cause = 'code' AND NOT EXISTS (
	                 SELECT 1 FROM clusters c, patterns p, unnest(p.frame_ids) fid, frame_names f
	                 WHERE c.problem_id = pr.id AND p.id = ANY (c.members) AND f.id = fid AND f.name ~ :'re')" \
		-v run="$run" -v re="$all_re")
	echo "  the machine's problems (CPU starvation, ranked after the code's): $(pg_q "SELECT count(*) || ', ' ||
	      coalesce(sum(streams), 0) || ' streams, ' || round(coalesce(sum(total_cost_ns), 0) / 1e6, 1) || ' ms'
	      FROM problems WHERE run_id = :'run' AND cause = 'cpu'" -v run="$run")"
	echo "  top problems (rank cause clusters cost-ms streams marker-frames title); best code problem of no marker (normal work): #$NORMAL_RANK"
	awk -F'|' '{printf "  | #%-3s %-4s %2s clusters %9s ms %4s  %-40.40s %s\n", $1, substr($2, 1, index($2, " ") - 1),
		substr($2, index($2, " ") + 1), $3, $4, $5, $6}' "$T_TMP/top"
}

# mine APP LABEL: a run with default settings over APP's streams labelled run=LABEL; prints its id
mine() {
	"$BIN/sm-miner" run --quiet --app "$1" --label "run=$2" 2>"$T_TMP/miner.err" ||
		t_fail "sm-miner run --app $1" "$(cat "$T_TMP/miner.err")"
}

# found_today APP MIN NAME...: what holds today, that at least MIN of these problems are among
# the run's top TOP_TODAY
found_today() {
	local app=$1 min=$2 n r found=0
	shift 2
	for n in "$@"; do
		r=RANK_$n
		awk -v r="${!r}" -v t="$TOP_TODAY" 'BEGIN {exit !(r ~ /^[0-9]+$/ && r <= t)}' && found=$((found + 1))
	done
	t_eq "$app: at least $min of its $# problems found among the run's top $TOP_TODAY problems" "$((found >= min))" 1
}

# goal NAME...: the issue's goal for these problems of the report just printed (asserted with SM_PROBLEMS_GOAL=1):
# each one of the top 3 problems, normal work below it, and each its own entry (no two the same problem)
goal() {
	local n r ranks=
	for n in "$@"; do
		r=OWN_$n
		r=${!r}
		ranks="$ranks $r"
		if [ "$GOAL" = 1 ]; then
			t_eq "goal: $n is one of the top 3 problems, normal work below it" \
				"$(awk -v r="$r" -v b="$NORMAL_RANK" 'BEGIN {print (r ~ /^[0-9]+$/ && r <= 3 && (b == 0 || b > r))}')" 1
		else
			echo "  goal (SM_PROBLEMS_GOAL=1): $n own rank $r (top 3 wanted), best normal cluster #$NORMAL_RANK (below it wanted)"
		fi
	done
	r=$(tr ' ' '\n' <<<"$ranks" | grep -E '^[0-9]+$' | sort | uniq -d | tr '\n' ' ')
	if [ "$GOAL" = 1 ]; then
		t_eq "goal: $* are each a problem of their own" "$r" ""
	else
		echo "  goal (SM_PROBLEMS_GOAL=1): $* each a problem of their own (own ranks:$ranks)"
	fi
}

# ---- PostgreSQL ----

if want postgres; then
	PGPORT_T=$(free_port)
	PGD=$W/pg
	mkdir -p "$PGD"
	chown postgres "$PGD"
	# the server here is the test's own: nothing of the caller's PG* environment applies to it
	as_pg() {
		runuser -u postgres -- env -u PGHOST -u PGPORT -u PGUSER -u PGDATABASE -u PGPASSWORD -u PGPASSFILE \
			-u PGSERVICE -u PGOPTIONS SM_GUARD_LIB="$SM_GUARD_LIB" "$@"
	}
	as_pg "$PGBIN/initdb" -D "$PGD/data" -A trust >/dev/null 2>&1 || t_bail "initdb"
	# the tables fit in shared_buffers, which autoprewarm fills at every start as the last shutdown left
	# them: a production server's cache is warm (cold, every read of a page is a violation);
	# work_mem 1MB: the sort below spills; log_lock_waits with deadlock_timeout 1ms logs every lock
	# wait of 1 ms or more with its duration, per transaction (%v): the lock problem's ground truth;
	# no parallel query (2 cores, 4 clients): a parallel scan's workers run outside any unit
	# The three problems cost about alike (EXPLAIN ANALYZE alone on the reference machine: a scan of
	# 200,000 rows 8 to 14 ms, of 600,000 41 ms; the aggregate over 300,000 rows 36 ms; the sort 12 to
	# 15 ms): the budget ships the worst violations first, and a problem many times cheaper than the
	# others (the scan of 200,000 rows beside a 300,000-row holder) is rightly ranked below them
	cat >>"$PGD/data/postgresql.conf" <<-EOF
		port = $PGPORT_T
		unix_socket_directories = '$PGD'
		listen_addresses = ''
		shared_buffers = 192MB
		shared_preload_libraries = 'pg_prewarm'
		max_connections = 20
		work_mem = 1MB
		log_lock_waits = on
		deadlock_timeout = 1ms
		max_parallel_workers_per_gather = 0
		log_line_prefix = '%v '
	EOF
	pgstart() {
		as_pg "$@" "$PGBIN/postgres" -D "$PGD/data" >>"$PGD/server.log" 2>&1 &
		for _ in $(seq 1 100); do
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
	as_pg "$PGBIN/psql" -X -q -h "$PGD" -p "$PGPORT_T" -d postgres -v ON_ERROR_STOP=1 -c "
		CREATE TABLE customers AS SELECT i AS id, 'user' || i || '@example.com' AS email, md5(i::text) AS name
		FROM generate_series(1, 400000) i;
		ALTER TABLE customers ADD PRIMARY KEY (id);" -c 'VACUUM ANALYZE customers' -c 'VACUUM ANALYZE pgbench_accounts' \
		-c "CREATE EXTENSION pg_prewarm; SELECT pg_prewarm(c) FROM unnest(ARRAY['customers', 'pgbench_accounts',
		    'pgbench_accounts_pkey', 'pgbench_branches']::regclass[]) c" >/dev/null ||
		t_bail "the customers table"
	pgstop

	cd "$PGD" || t_bail "cd $PGD"
	cat >select.sql <<-'EOF'
		\set aid random(1, 100000 * :scale)
		SELECT abalance FROM pgbench_accounts WHERE aid = :aid;
	EOF
	# the hot row: updated, then work (an aggregate over 150,000 rows, in memory: its own work_mem)
	# while the lock is held; the lock problem is the waiters' wait and the holder's work (the only
	# set-returning function and tuplestore of this load: its marker frames)
	cat >lock.sql <<-'EOF'
		\set delta random(-100, 100)
		BEGIN;
		SET LOCAL work_mem = '64MB';
		UPDATE pgbench_branches SET bbalance = bbalance + :delta WHERE bid = 1;
		SELECT count(*) FROM generate_series(1, 150000);
		COMMIT;
	EOF
	# the index on email is missing
	cat >seqscan.sql <<-'EOF'
		\set n random(1, 400000)
		SELECT id, name FROM customers WHERE email = 'user' || :n || '@example.com';
	EOF
	# 30,000 rows of 130 bytes ordered by a wide column: an external merge sort with work_mem 1MB
	cat >sort.sql <<-'EOF'
		\set a random(1, 100000 * :scale - 30000)
		SELECT aid, abalance FROM pgbench_accounts WHERE aid BETWEEN :a AND :a + 30000 ORDER BY filler, abalance DESC OFFSET 29990;
	EOF
	chmod 644 ./*.sql
	LOAD="-c 4 -j 2 -R 600 --latency-limit 200"
	pgstart "${TRAIN[@]}" --only postgres --
	pgbench -f select.sql -T "$TRAIN_S" $LOAD >train.out 2>&1 || t_fail "pgbench (training)" "$(cat train.out)"
	pgstop
	m=$(mark)
	: >"$PGD/server.log"
	guard_args pg
	pgstart "${GUARD[@]}" --only postgres --
	rm -f pgb.*
	pgbench -f select.sql@97 -f lock.sql@1 -f seqscan.sql@1 -f sort.sql@1 -T "$LOAD_S" $LOAD --log --log-prefix=pgb \
		>load.out 2>&1 || t_fail "pgbench (problems)" "$(cat load.out; echo '-- the server log:'
			tail -n 40 "$PGD/server.log"; echo '-- the agent log:'; tail -n 20 "$W/guard.log")"
	pgstop
	cd "$SM_REPO" || t_bail "cd $SM_REPO"
	echo "postgres: agent $(exits postgres units "$m") units, $(exits postgres violations "$m") violations," \
		"$(exits postgres suppressed "$m") suppressed; pgbench $(cat "$PGD"/pgb.* | wc -l) transactions" \
		"($(cat "$PGD"/pgb.* | awk '$3 == "skipped"' | wc -l) skipped)"
	# pg_slow SCRIPT THRESHOLD_NS: pgbench's transactions of script SCRIPT (0-based) that took longer (with
	# --rate pgbench's time counts from the scheduled start: less the schedule lag, the server's time)
	pg_slow() { cat "$PGD"/pgb.* | awk -v s="$1" -v t="$2" '$4 == s && $3 != "skipped" && ($3 - $7) * 1000 >= t' | wc -l; }
	# lock_waits THRESHOLD_NS: transactions that waited that long for a lock (log_lock_waits)
	lock_waits() {
		sed -n 's/^\([0-9/]*\) .*acquired .* after \([0-9.]*\) ms.*/\1 \2/p' "$PGD/server.log" |
			awk -v t="$1" '{w[$1] += $2} END {for (v in w) n += (w[v] * 1e6 >= t); print n + 0}'
	}
	# the lock problem's slow transactions: the holders' and the waiters' (pgbench's log)
	pg_slow_lock() { pg_slow 1 "$1"; }
	pg_slow_seqscan() { pg_slow 2 "$1"; }
	pg_slow_sort() { pg_slow 3 "$1"; }
	# pg_slow_normal: the normal selects over the threshold (printed below, not a problem)
	PROBLEMS="lock pg_slow_lock postgres!(ProcSleep|XactLockTableWait|LockAcquire|generate_series_step_int4|ExecMakeTableFunctionResult|tuplestore_)
seqscan pg_slow_seqscan postgres!(heap_getnextslot|texteq)
sort pg_slow_sort postgres!(tuplesort_|LogicalTape)"
	run=$(mine postgres pg)
	report postgres pg "$run"
	n_sel=$(cat "$PGD"/pgb.* | awk '$4 == 0 && $3 != "skipped"' | wc -l)
	echo "  normal selects over 1 ms: $(pg_slow 0 1000000) of $n_sel ($(pct "$(pg_slow 0 1000000)" "$n_sel") %)"
	# what holds today (figures of the runs here in the report of issue 26)
	echo "  lock waits of 1 ms or more (log_lock_waits): $(lock_waits 1000000)"
	t_eq "postgres: lock waits happened (log_lock_waits)" "$(awk '{print ($1 > 0)}' <<<"$(lock_waits 1000000)")" 1
	# the lock waits' streams were all suppressed by the first-come budget in one run of make bench
	found_today postgres 2 lock seqscan sort
	goal lock seqscan sort
fi

# ---- redis ----

if want redis; then
	RPORT=$(free_port)
	RD=$W/redis
	mkdir -p "$RD"
	redis() {
		"$@" /usr/bin/redis-server --port "$RPORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$RD" \
			--enable-debug-command yes \
			--logfile "$RD/redis.log" &
		RPID=$!
		for _ in $(seq 1 100); do
			redis-cli -p "$RPORT" ping >/dev/null 2>&1 && return 0
			sleep 0.05
		done
		t_bail "redis starts"
	}
	rstop() { redis-cli -p "$RPORT" shutdown nosave >/dev/null 2>&1; wait "$RPID"; }
	t_cleanup "redis-cli -p $RPORT shutdown nosave >/dev/null 2>&1"
	# The driver: normal GETs (100 between two problem commands), and in turn KEYS over the
	# keyspace, DEL of the big set (built again by SADDs of 100 members after) and a CPU-heavy EVAL;
	# it times every command itself: one line "command microseconds" per command. Training: the same
	# GETs and SADDs (to a set never deleted), none of the three problems.
	cat >"$RD/driver.py" <<-'EOF'
		import random, socket, sys, time
		port, secs, out = int(sys.argv[1]), float(sys.argv[2]), open(sys.argv[3], "w")
		s = socket.create_connection(("127.0.0.1", port))
		f = s.makefile("rb")
		def resp():
		    line = f.readline()
		    t = line[:1]
		    if t == b"$":
		        n = int(line[1:])
		        return None if n < 0 else f.read(n + 2)
		    if t == b"*":
		        return [resp() for _ in range(max(int(line[1:]), 0))]
		    if t == b"-":
		        raise RuntimeError(line)
		    return line
		def cmd(*args):
		    b = b"*%d\r\n" % len(args)
		    for a in args:
		        a = str(a).encode()
		        b += b"$%d\r\n%s\r\n" % (len(a), a)
		    s.sendall(b)
		    return resp()
		def timed(name, *args):
		    t0 = time.perf_counter_ns()
		    cmd(*args)
		    out.write("%s %d\n" % (name, (time.perf_counter_ns() - t0) // 1000))
		def build(key):
		    for c in range(1000):
		        cmd("SADD", key, *("m%d" % i for i in range(c * 100, c * 100 + 100)))
		lua = "local s = 0 for i = 1, tonumber(ARGV[1]) do s = s + i % 7 end return s"
		problems = [lambda: timed("keys", "KEYS", "key:12345*"), lambda: timed("del", "DEL", "bigset"),
		            lambda: timed("eval", "EVAL", lua, 0, 1000000)]
		train = sys.argv[4:] == ["train"]
		build("trainset" if train else "bigset")
		end, i = time.monotonic() + secs, 0
		while time.monotonic() < end:
		    for _ in range(100):
		        timed("get", "GET", "key:%d" % random.randrange(100000))
		    if not train:
		        problems[i % 3]()
		    if i % 3 == 1:
		        build("trainset" if train else "bigset")
		    i += 1
	EOF
	chmod 644 "$RD/driver.py"
	# the keyspace: 100,000 keys, loaded by every instance from the same file
	redis env
	redis-cli -p "$RPORT" debug populate 100000 key 10 >/dev/null
	redis-cli -p "$RPORT" save >/dev/null
	rstop
	rbench() { redis-benchmark -p "$RPORT" -t get,set -r 100000 -c 10 -n 100000000 -q >"$RD/rb.out" 2>&1 & }
	redis "${TRAIN[@]}" --
	rbench
	bpid=$!
	timeout $((TRAIN_S + 30)) python3 "$RD/driver.py" "$RPORT" "$TRAIN_S" /dev/null train || t_fail "the redis driver (training)"
	kill "$bpid" 2>/dev/null || t_fail "redis-benchmark ran throughout" "$(tail -c 300 "$RD/rb.out")"
	wait "$bpid" 2>/dev/null
	rstop
	m=$(mark)
	guard_args redis
	redis "${GUARD[@]}" --
	rbench
	bpid=$!
	timeout $((LOAD_S + 60)) python3 "$RD/driver.py" "$RPORT" "$LOAD_S" "$RD/times" || t_fail "the redis driver"
	kill "$bpid" 2>/dev/null || t_fail "redis-benchmark ran throughout" "$(tail -c 300 "$RD/rb.out")"
	wait "$bpid" 2>/dev/null
	rstop
	echo "redis: agent $(exits redis-server units "$m") units, $(exits redis-server violations "$m") violations," \
		"$(exits redis-server suppressed "$m") suppressed; driver: $(awk '{n[$1]++} END {for (c in n) printf "%s %d ", c, n[c]}' "$RD/times")"
	r_slow() { awk -v c="$1" -v t="$2" '$1 == c && $2 * 1000 >= t' "$RD/times" | wc -l; }
	r_slow_keys() { r_slow keys "$1"; }
	r_slow_del() { r_slow del "$1"; }
	r_slow_eval() { r_slow eval "$1"; }
	M='redis-(server|check-rdb)'
	PROBLEMS="keys r_slow_keys $M!keysCommand
del r_slow_del $M!(delCommand|delGenericCommand)
eval r_slow_eval $M!(evalCommand|evalGenericCommand)"
	run=$(mine redis-server redis)
	report redis redis "$run"
	n_get=$(awk '$1 == "get"' "$RD/times" | wc -l)
	echo "  the driver's GETs over 1 ms: $(r_slow get 1000000) of $n_get ($(pct "$(r_slow get 1000000)" "$n_get") %)"
	# the first 6 violations of a minute per unit type are shipped, whichever they are: on a loaded
	# machine normal work takes them often enough that a problem's streams are all suppressed (DEL, or
	# EVAL, in some runs here); severity-first sampling is to fix that (the goal below)
	found_today redis 1 keys del eval
	goal keys del eval
fi

# ---- nginx ----

if want nginx; then
	NPORT=$(free_port)
	UPORT=$(free_port)
	ND=$W/nginx
	mkdir -p "$ND/www" "$ND/logs"
	head -c 4096 /dev/urandom | base64 >"$ND/www/index.html"
	# a 100 KB report, text that compresses (words from a small vocabulary)
	python3 -c "
import random
r = random.Random(7); words = ['order', 'customer', 'invoice', 'total', 'paid', 'shipped', 'pending', 'refund']
print('\n'.join(' '.join(r.choice(words) + str(r.randrange(1000)) for _ in range(12)) for _ in range(800)))" \
		>"$ND/www/export.txt"
	# the upstream: every request costs it real CPU work (a key derivation, tens of ms), one at a time
	cat >"$ND/upstream.py" <<-'EOF'
		import hashlib, http.server, sys
		class H(http.server.BaseHTTPRequestHandler):
		    def do_GET(self):
		        body = hashlib.pbkdf2_hmac("sha256", self.path.encode(), b"salt", 60000).hex().encode()
		        self.send_response(200)
		        self.send_header("Content-Length", str(len(body)))
		        self.end_headers()
		        self.wfile.write(body)
		    def log_message(self, *a):
		        pass
		http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
	EOF
	cat >"$ND/nginx.conf" <<-EOF
		worker_processes 1;
		daemon off;
		pid $ND/nginx.pid;
		error_log $ND/logs/error.log;
		events { worker_connections 512; }
		http {
			access_log off;
			log_format t '\$uri \$request_time';
			server {
				listen 127.0.0.1:$NPORT;
				root $ND/www;
				location /report { proxy_pass http://127.0.0.1:$UPORT; access_log $ND/logs/slow.log t; }
				location /export.txt { gzip on; gzip_comp_level 9; gzip_types text/plain; access_log $ND/logs/slow.log t; }
			}
		}
	EOF
	# wrk: 1 request in 2000 each to the upstream and the gzipped export (wrk's thread counts them)
	cat >"$ND/mix.lua" <<-'EOF'
		local n = 0
		local mix = os.getenv("MIX") or ""
		request = function()
		    n = n + 1
		    if n % 2000 == 0 and mix:find("report") then return wrk.format("GET", "/report/" .. n) end
		    if n % 2000 == 1000 and mix:find("export") then
		        return wrk.format("GET", "/export.txt", {["Accept-Encoding"] = "gzip"})
		    end
		    return wrk.format("GET", "/")
		end
	EOF
	chmod -R a+rX "$ND"
	python3 "$ND/upstream.py" "$UPORT" 2>/dev/null &
	UPID=$!
	t_cleanup "kill $UPID 2>/dev/null"
	nginx_run() {
		"$@" /usr/sbin/nginx -c "$ND/nginx.conf" -p "$ND" &
		NPID=$!
		for _ in $(seq 1 100); do
			curl -sf -o /dev/null "http://127.0.0.1:$NPORT/" && return 0
			sleep 0.05
		done
		t_bail "nginx starts" "$(cat "$ND/logs/error.log")"
	}
	nstop() { /usr/sbin/nginx -c "$ND/nginx.conf" -p "$ND" -s quit 2>/dev/null; wait "$NPID"; }
	t_cleanup "/usr/sbin/nginx -c $ND/nginx.conf -p $ND -s stop 2>/dev/null"
	# nload MIX SECONDS: wrk with 1 thread and 20 connections
	nload() { MIX=$1 wrk -t 1 -c 20 -d "$2" -s "$ND/mix.lua" "http://127.0.0.1:$NPORT/" >"$ND/wrk.out" 2>&1; }
	nginx_run "${TRAIN[@]}" --
	nload "" "$TRAIN_S"
	# n_slow URI_PREFIX THRESHOLD_NS: requests of the access log that took longer (its times are in ms)
	n_slow() { awk -v u="$1" -v t="$2" 'index($1, u) == 1 && $2 * 1e9 >= t' "$ND/logs/slow.log" | wc -l; }

	# what one gzipped export costs, alone (curl's time; the fastest of three)
	t_gzip=$(for _ in 1 2 3; do curl -s -H 'Accept-Encoding: gzip' -o /dev/null -w '%{time_total}\n' \
		"http://127.0.0.1:$NPORT/export.txt"; done | sort -g | head -n 1)
	nstop
	echo "nginx: one gzipped export alone takes $t_gzip s"

	# the normal load alone, then with the slow upstream: does the guard see it? (that phase ships
	# every violation: a budget would hide the units that waited for the upstream, if any did)
	m=$(mark)
	guard_args nginx-control
	nginx_run "${GUARD[@]}" --
	nload "" "$TRAIN_S"
	nstop
	c_units=$(exits nginx units "$m")
	c_v=$(exits nginx violations "$m")
	echo "nginx, normal load alone: agent $c_units units, $c_v violations ($(pct "$c_v" "$c_units") %)"

	m=$(mark)
	: >"$ND/logs/slow.log"
	guard_args nginx-upstream
	SM_GUARD_REPORTS_PER_MIN=100000 nginx_run "${GUARD[@]}" --
	nload report "$LOAD_S"
	nstop
	u_units=$(exits nginx units "$m")
	u_v=$(exits nginx violations "$m")
	n_up=$(wc -l <"$ND/logs/slow.log")
	echo "nginx, slow upstream alone: agent $u_units units, $u_v violations; $n_up upstream requests," \
		"$(n_slow /report 10000000) over 10 ms (median $(awk '{print $2}' "$ND/logs/slow.log" | sort -g |
			awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}') s); $(grep 'Requests/sec' "$ND/wrk.out")"
	t_eq "nginx: the upstream's requests were slow (over 10 ms each, at least 90 % of them)" \
		"$(awk -v a="$(n_slow /report 10000000)" -v b="$n_up" 'BEGIN {print (b > 0 && a >= 0.9 * b)}')" 1
	# an event-driven worker does not wait for its upstream: no unit is slow because of it, but each
	# request it forwards is a deferred request (docs/guard.md), over its threshold a stream of its own
	# whose events hold the upstream's wait: an [async wait] under nginx's recv of the reply
	u_long=$(pg_q "SELECT count(DISTINCT s.id) FROM events e JOIN streams s ON s.id = e.stream_ref
	        JOIN stacks k ON k.id = e.stack_id
	        WHERE s.labels->>'run' = 'nginx-upstream' AND s.labels->>'unit.async' = '1' AND e.kind = 'w'
	          AND e.tid = s.symptom_tid AND e.dur_ns >= 10000000
	          AND k.frame_ids[cardinality(k.frame_ids)] = (SELECT id FROM frames WHERE name = '[async wait]')
	          AND k.frame_ids[cardinality(k.frame_ids) - 1] = (SELECT id FROM frames WHERE name = 'libc.so.6!recv')")
	u_st=$(pg_q "SELECT count(*) FROM streams WHERE labels->>'run' = 'nginx-upstream' AND role = 'violation'")
	u_units_st=$(pg_q "SELECT count(*) FROM streams WHERE labels->>'run' = 'nginx-upstream' AND role = 'violation'
	        AND coalesce(labels->>'unit.async', '') <> '1'")
	echo "  its violations: $(pct "$u_v" "$u_units") % of units (normal load alone: $(pct "$c_v" "$c_units") %);" \
		"$u_st streams shipped, $u_long deferred requests with an [async wait] of 10 ms or more, $u_units_st units;" \
		"the longest unit shipped: $(pg_q "SELECT coalesce(max(symptom_end_ns - symptom_start_ns) / 1000000, 0)
		       FROM streams WHERE labels->>'run' = 'nginx-upstream' AND role = 'violation'
		       AND coalesce(labels->>'unit.async', '') <> '1'") ms"
	# (counted by the agent: on a loaded machine the units' violations can outrun the candidates held,
	# GUARD_HELD, and push some of the requests' streams out as queue drops)
	u_async=$(exits nginx async_violations "$m")
	u_async_st=$(pg_q "SELECT count(*) FROM streams WHERE labels->>'run' = 'nginx-upstream' AND role = 'violation'
	        AND labels->>'unit.async' = '1'")
	echo "  deferred-request violations: $u_async counted by the agent, $u_async_st shipped; queue drops" \
		"$(exits nginx queue_drops "$m")"
	t_eq "nginx: each upstream request over 10 ms is a deferred-request violation (90 % at least)" \
		"$(awk -v a="$u_async" -v b="$(n_slow /report 10000000)" 'BEGIN {print (b > 0 && a >= 0.9 * b)}')" 1
	t_eq "nginx: and every one shipped holds its [async wait] of 10 ms or more under recv" "$u_long" "$u_async_st"

	# both problems
	m=$(mark)
	: >"$ND/logs/slow.log"
	guard_args nginx
	nginx_run "${GUARD[@]}" --
	nload report,export "$LOAD_S"
	nstop
	echo "nginx: agent $(exits nginx units "$m") units, $(exits nginx violations "$m") violations," \
		"$(exits nginx suppressed "$m") suppressed; $(grep 'Requests/sec' "$ND/wrk.out")"
	n_slow_upstream() { n_slow /report "$1"; }
	# every gzipped export is slow: it takes tens of ms alone (printed above), over the agent's 1 ms floor
	n_slow_gzip() { grep -c '^/export' "$ND/logs/slow.log"; }
	# the upstream's wait: nginx is stripped and its proxy code is static (nginx+0x... frames), the
	# agent's pseudo-frame under its recv of the reply names it
	PROBLEMS="upstream n_slow_upstream ^\[async wait\]\$
gzip n_slow_gzip libz\.so\.1!deflate"
	run=$(mine nginx nginx)
	report nginx nginx "$run"
	t_eq "nginx: the gzip problem is found among the run's top $TOP_TODAY problems" \
		"$(awk -v r="$RANK_gzip" -v t="$TOP_TODAY" 'BEGIN {print (r ~ /^[0-9]+$/ && r <= t)}')" 1
	t_eq "nginx: the slow upstream is found among the run's top $TOP_TODAY problems" \
		"$(awk -v r="$RANK_upstream" -v t="$TOP_TODAY" 'BEGIN {print (r ~ /^[0-9]+$/ && r <= t)}')" 1
	goal upstream gzip
fi

stop_ingest
t_done
