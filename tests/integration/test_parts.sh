#!/usr/bin/env bash
# parts: a run's AOI extraction cut into parts that several workers take
# (miner/parts.h, docs/scaling.md). Against one run in one piece as reference:
#   - the same run in parts by one process, and by two workers sharing the
#     parts, stores exactly the same collapsed stacks, patterns and clusters;
#     every part is extracted once, and no part is left in the table;
#   - read on several connections at once (shares, miner/extract.c), in one
#     piece and in parts: the same result, every event read once; a run of
#     wait stacks reads only the waits, with the same wait stacks and patterns
#     (in parts too, those another worker reads);
#     a share's connection ended in the middle: the run goes again, the same;
#   - events stored out of time order (reversed, interleaved, shuffled): the same;
#   - a coordinator killed (SIGKILL) in the middle of its run: another worker
#     takes the run after the lease and finishes it, with the same result;
#   - a worker killed in the middle of a part: the coordinator takes the part
#     after the lease, with the same result.
. "$(dirname "$0")/../lib.sh"

genfleet=${SM_GENFLEET:-$SM_BIN_DIR/../tests/genfleet}
[ -x "$genfleet" ] || t_bail "genfleet" "$genfleet is missing (build first)"
miner() { "$SM_BIN_DIR/sm-miner" "$@"; }

sm_admin migrate >/dev/null || t_bail "migrate"
TOKEN=$(mk_token ingest 2>/dev/null)
start_ingest || t_bail "sm-ingest starts"
"$genfleet" --streams 240 --events 1000 --apps partapp --hosts 12 --seed 11 --out "$T_TMP/fleet.ndjson" 2>/dev/null ||
	t_bail "genfleet"
split -l 40 "$T_TMP/fleet.ndjson" "$T_TMP/batch."
for f in "$T_TMP"/batch.*; do
	http POST "$INGEST_URL/api/v1/streams" -H "Authorization: Bearer $TOKEN" \
		-H 'Content-Type: application/x-ndjson' --data-binary "@$f"
	[ "$HTTP_STATUS" = 200 ] || t_fail "fleet stored" "$HTTP_STATUS $HTTP_BODY"
done
stop_ingest
t_eq "fleet stored" "$(pg_q "SELECT count(*), sum(n_events) FROM streams")" "240|240000"

# digest RUN: the run's collapsed stacks, patterns and clusters, in one line each
digest() {
	pg_q "SELECT count(*), md5(string_agg(concat_ws(':', kind, stack_id, stream_ref, cost_ns, events), ','
		ORDER BY kind, stack_id, stream_ref)) FROM run_stacks WHERE run_id = $1"
	pg_q "SELECT count(*), md5(string_agg(concat_ws(':', kind, rank, cost_ns, events, streams, frame_ids::text,
		stack_ids::text), ',' ORDER BY kind, rank)) FROM patterns WHERE run_id = $1"
	pg_q "SELECT count(*), md5(string_agg(concat_ws(':', kind, total_cost_ns, streams, events, rank_total_cost,
		common_frame_ids::text, cardinality(members)), ',' ORDER BY kind, rank_total_cost)) FROM clusters
		WHERE run_id = $1"
}
ARGS=(--app partapp --threshold-fraction 0.01)
# wait_run ID SECONDS: until the run is done or failed
wait_run() {
	local i
	for i in $(seq 1 $(($2 * 10))); do
		case $(pg_q "SELECT status FROM runs WHERE id = $1") in done|failed) return 0 ;; esac
		sleep 0.1
	done
	return 1
}
# wait_sql TRIES PAUSE SQL: until SQL prints t, at most TRIES looks PAUSE seconds apart
wait_sql() {
	local i
	for i in $(seq 1 "$1"); do
		[ "$(pg_q "$3")" = t ] && return 0
		sleep "$2"
	done
	return 1
}
WORKERS=()
worker() { # worker LOG ARGS...: a worker in the background; its pid in WPID
	"$SM_BIN_DIR/sm-miner" worker --quiet --threads 1 "${@:2}" 2>"$1" &
	WPID=$!
	WORKERS+=("$WPID")
}
stop_workers() { # a stopped worker is continued first: SIGTERM would wait for it forever
	local p
	for p in "${WORKERS[@]}"; do kill -CONT "$p" 2>/dev/null; kill "$p" 2>/dev/null; done
	for p in "${WORKERS[@]}"; do wait "$p" 2>/dev/null; done
	WORKERS=()
}
t_cleanup stop_workers

# ---- the reference: one piece, on the worker's connection ----
REF=$(miner run --quiet "${ARGS[@]}" --part-streams 0 --threads 1 2>"$T_TMP/ref.err") || t_bail "reference run" "$(cat "$T_TMP/ref.err")"
WANT=$(digest "$REF")
t_match "reference: patterns and clusters found" "$(pg_q "SELECT counts->>'patterns', counts->>'clusters' FROM runs WHERE id = $REF")" '^[1-9][0-9]*\|[1-9]'
t_eq "reference: not cut into parts" "$(grep -c "parts extracted" "$T_TMP/ref.err")" 0
t_eq "reference: every event read, on one connection" \
	"$(pg_q "SELECT counts->>'events_read', counts->>'read_connections' FROM runs WHERE id = $REF")" "240000|1"

# ---- shares: one piece read on several connections at once (miner/extract.c) ----
R=$(miner run --quiet "${ARGS[@]}" --part-streams 0 --threads 4 2>"$T_TMP/shares.err")
t_eq "4 threads: run done, read on 4 connections, every event once" \
	"$(pg_q "SELECT status, counts->>'read_connections', counts->>'events_read' FROM runs WHERE id = $R")" "done|4|240000"
t_eq "4 threads: the same result" "$(digest "$R")" "$WANT"
# parts of 120,000 events, each cut in 3 shares; the part's streams only
R=$(miner run --quiet "${ARGS[@]}" --part-streams 120 --threads 3 2>"$T_TMP/shares.err")
t_eq "parts in 3 shares: run done, on 3 connections, every event once" \
	"$(pg_q "SELECT status, counts->>'read_connections', counts->>'events_read' FROM runs WHERE id = $R")" "done|3|240000"
t_match "parts in 3 shares: both parts here" "$(cat "$T_TMP/shares.err")" "run=$R parts=2 here=2 others=0"
t_eq "parts in 3 shares: the same result" "$(digest "$R")" "$WANT"
# a run of wait stacks under the wait graph reads only the waits: the same waits' stacks and patterns
WAITS=$(pg_q "SELECT count(*) FROM events WHERE kind = 'w'")
REF_WAITS=$(pg_q "SELECT count(*), md5(string_agg(concat_ws(':', kind, stack_id, stream_ref, cost_ns, events), ','
	ORDER BY kind, stack_id, stream_ref)) FROM run_stacks WHERE run_id = $REF AND kind = 'w'"
	pg_q "SELECT count(*), md5(string_agg(concat_ws(':', kind, rank, cost_ns, events, streams, frame_ids::text,
	stack_ids::text), ',' ORDER BY kind, rank)) FROM patterns WHERE run_id = $REF AND kind = 'w'")
for threads in 1 2; do
	R=$(miner run --quiet "${ARGS[@]}" --kind wait --part-streams 0 --threads $threads 2>"$T_TMP/wait.err")
	t_eq "wait stacks, $threads thread(s): run done, only the $WAITS waits read" \
		"$(pg_q "SELECT status, counts->>'events_read' FROM runs WHERE id = $R")" "done|$WAITS"
	t_eq "wait stacks, $threads thread(s): the reference's wait stacks and patterns" \
		"$(digest "$R" | head -n 2)" "$REF_WAITS"
	t_eq "wait stacks, $threads thread(s): its counts are of the waits" \
		"$(pg_q "SELECT (counts->>'aoi_events')::bigint = (SELECT sum(events) FROM run_stacks WHERE run_id = $R),
			(counts->>'distinct_stacks')::bigint = (SELECT count(DISTINCT stack_id) FROM run_stacks WHERE run_id = $R)
			FROM runs WHERE id = $R")" "t|t"
done
t_eq "wait stacks: the fleet has waits and running events ($WAITS waits)" \
	"$([ "$WAITS" -gt 0 ] && [ "$WAITS" -lt 240000 ] && echo both)" both

# a share's connection lost in the middle of its read (its backend ended, as a restart would): the
# other share stops, the run goes again, with the same result. Both shares wait on a lock until one
# of them is ended.
psql -X -q -c "BEGIN" -c "LOCK TABLE event_chunks IN ACCESS EXCLUSIVE MODE" -c "SELECT pg_sleep(120)" >/dev/null 2>&1 &
LOCKER=$!
t_cleanup "kill $LOCKER 2>/dev/null || :"
pg_until t "SELECT count(*) > 0 FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
	WHERE c.relname = 'event_chunks' AND l.mode = 'AccessExclusiveLock' AND l.granted" 100 >/dev/null
miner run --quiet "${ARGS[@]}" --part-streams 0 --threads 2 >"$T_TMP/lost.out" 2>"$T_TMP/lost.err" &
RUNNER=$!
SHARES="FROM pg_stat_activity WHERE query LIKE 'COPY (SELECT c.stream_ref%sm_slice%' AND wait_event_type = 'Lock'"
t_eq "a share lost: both shares wait for the lock" "$(pg_until 2 "SELECT count(*) $SHARES" 200)" 2
t_eq "a share lost: one share's backend ended" "$(pg_q "SELECT pg_terminate_backend(min(pid)) $SHARES")" t
pg_q "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(120)'" >/dev/null
wait "$RUNNER"
t_eq "a share lost: sm-miner run ends well" "$?" 0
R=$(cat "$T_TMP/lost.out")
t_eq "a share lost: the run went again, and is done" "$(pg_q "SELECT status, attempts FROM runs WHERE id = $R")" "done|2"
t_match "a share lost: why it went again" "$(pg_q "SELECT last_retry FROM runs WHERE id = $R")" \
	'^the database went away: reading events: (.*terminating connection|server closed the connection)'

t_eq "a share lost: the same result" "$(digest "$R")" "$WANT"

# ---- in parts, one process ----
R=$(miner run --quiet "${ARGS[@]}" --part-streams 50 2>"$T_TMP/one.err")
t_eq "one process, 5 parts: run done" "$(pg_q "SELECT status FROM runs WHERE id = $R")" done
t_match "one process: every part extracted here" "$(cat "$T_TMP/one.err")" "run=$R parts=5 here=5 others=0"
t_eq "one process: the same result" "$(digest "$R")" "$WANT"
t_eq "one process: no part left" "$(pg_q "SELECT count(*) FROM run_parts")" 0

# ---- in parts, two workers ----
worker "$T_TMP/w1.log" --part-streams 25
worker "$T_TMP/w2.log" --part-streams 25
R=$(miner run --queue --quiet "${ARGS[@]}")
wait_run "$R" 120 || t_fail "two workers: run ends" "still $(pg_q "SELECT status FROM runs WHERE id = $R")"
stop_workers
t_eq "two workers: run done, taken once" "$(pg_q "SELECT status, attempts FROM runs WHERE id = $R")" "done|1"
t_eq "two workers: the same result" "$(digest "$R")" "$WANT"
split_line=$(cat "$T_TMP/w1.log" "$T_TMP/w2.log" | grep -o "run=$R parts=[0-9]* here=[0-9]* others=[0-9]*")
t_match "two workers: 10 parts" "$split_line" "parts=10 "
here=$(echo "$split_line" | sed 's/.*here=\([0-9]*\).*/\1/')
others=$(echo "$split_line" | sed 's/.*others=\([0-9]*\)/\1/')
t_eq "two workers: each part extracted once (here + others)" "$((here + others))" 10
t_match "two workers: the other worker did some" "$others" '^[1-9]' 
t_eq "two workers: the other worker's log names the parts it did, once each" \
	"$(cat "$T_TMP/w1.log" "$T_TMP/w2.log" | grep -o "msg=\"part done\" run=$R part=[0-9]*" | sort -u | wc -l)" "$others"
t_eq "two workers: no part left" "$(pg_q "SELECT count(*) FROM run_parts")" 0

# ---- a run of wait stacks in parts of 70,000 events, read in shares by two workers ----
worker "$T_TMP/w11.log" --part-streams 70 --threads 2
worker "$T_TMP/w12.log" --part-streams 70 --threads 2
R=$(miner run --queue --quiet "${ARGS[@]}" --kind wait)
wait_run "$R" 120 || t_fail "wait stacks, two workers: run ends" "still $(pg_q "SELECT status FROM runs WHERE id = $R")"
stop_workers
t_eq "wait stacks, two workers: run done, only the waits read, in shares" \
	"$(pg_q "SELECT status, counts->>'events_read', counts->>'read_connections' FROM runs WHERE id = $R")" "done|$WAITS|2"
split_line=$(cat "$T_TMP/w11.log" "$T_TMP/w12.log" | grep -o "run=$R parts=[0-9]* here=[0-9]* others=[0-9]*")
t_match "wait stacks, two workers: 4 parts, the other worker did some" "$split_line" "parts=4 here=[0-9] others=[1-9]"
t_eq "wait stacks, two workers: the reference's wait stacks and patterns" "$(digest "$R" | head -n 2)" "$REF_WAITS"

# ---- the coordinator killed in the middle of its run ----
worker "$T_TMP/w3.log" --part-streams 20 --lease 5
W3=$WPID
R=$(miner run --queue --quiet "${ARGS[@]}")
wait_sql 500 0.01 "SELECT count(*) > 0 FROM run_parts WHERE run_id = $R"
kill -STOP "$W3"
t_eq "coordinator: took the run and cut it, then stopped" \
	"$(pg_q "SELECT r.status, r.worker LIKE '%:$W3', count(p.*) FROM runs r JOIN run_parts p ON p.run_id = r.id
		WHERE r.id = $R GROUP BY r.id")" "running|t|12"
kill -9 "$W3"
wait "$W3" 2>/dev/null
killed_at=$(date +%s.%N)
worker "$T_TMP/w4.log" --part-streams 20 --lease 5
wait_run "$R" 120 || t_fail "coordinator killed: run ends" "still $(pg_q "SELECT status FROM runs WHERE id = $R")"
took=$(awk -v a="$killed_at" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
stop_workers
t_eq "coordinator killed: run done by the other worker (second attempt)" \
	"$(pg_q "SELECT status, attempts FROM runs WHERE id = $R")" "done|2"
t_match "coordinator killed: the other worker took the run" "$(cat "$T_TMP/w4.log")" "msg=\"run taken\" run=$R"
t_eq "coordinator killed: the same result" "$(digest "$R")" "$WANT"
t_eq "coordinator killed: no part left" "$(pg_q "SELECT count(*) FROM run_parts")" 0
echo "# coordinator killed: run done ${took} s after the kill (lease 5 s)"

# ---- a worker killed in the middle of a part ----
# the second worker waits, stopped, until the first has taken the run and cut it
worker "$T_TMP/w6.log" --part-streams 20 --lease 5
W6=$WPID
for _ in $(seq 1 100); do grep -q "worker started" "$T_TMP/w6.log" && break; sleep 0.1; done
sleep 1
kill -STOP "$W6"
worker "$T_TMP/w5.log" --part-streams 20 --lease 5
W5=$WPID
R=$(miner run --queue --quiet "${ARGS[@]}")
wait_sql 500 0.02 "SELECT count(*) > 0 FROM run_parts WHERE run_id = $R"
# the coordinator paused (well within its lease) while the other takes a part: on a loaded machine
# it could otherwise do every part before the other holds one
kill -STOP "$W5"
kill -CONT "$W6"
# stopped first, then looked at: a part it holds then is held for good
caught= held=
for _ in $(seq 1 300); do
	kill -STOP "$W6"
	caught=$(pg_q "SELECT part FROM run_parts WHERE run_id = $R AND status = 'running' AND worker LIKE '%:$W6'")
	[ -n "$caught" ] && { held=running; break; }
	kill -CONT "$W6"
	sleep 0.01
done
kill -9 "$W6"
kill -CONT "$W6" 2>/dev/null
wait "$W6" 2>/dev/null
kill -CONT "$W5"
t_eq "worker killed: it held part ${caught:-?} when it died" "$held" running
wait_run "$R" 120 || t_fail "worker killed: run ends" "still $(pg_q "SELECT status FROM runs WHERE id = $R")"
stop_workers
t_eq "worker killed: run done by its coordinator, first attempt" "$(pg_q "SELECT status, attempts FROM runs WHERE id = $R")" "done|1"
t_eq "worker killed: the killed worker's part is not in its log as done" \
	"$(grep -c "msg=\"part done\" run=$R part=${caught:-x}\$" "$T_TMP/w6.log")" 0
split_line=$(grep -o "run=$R parts=[0-9]* here=[0-9]* others=[0-9]*" "$T_TMP/w5.log")
t_match "worker killed: the coordinator did the rest" "$split_line" "parts=12 "
t_eq "worker killed: the same result" "$(digest "$R")" "$WANT"
t_eq "worker killed: no part left" "$(pg_q "SELECT count(*) FROM run_parts")" 0

# ---- a coordinator that stalls past the lease and comes back ----
# (a paused machine, a database failover longer than the lease): the worker that took its run over
# keeps its own parts, the stalled one gives up at its next look, and the result is whole
worker "$T_TMP/w7.log" --part-streams 5 --lease 5
W7=$WPID
R=$(miner run --queue --quiet "${ARGS[@]}")
wait_sql 1000 0.01 "SELECT count(*) >= 5 FROM run_parts WHERE run_id = $R AND status = 'done'"
kill -STOP "$W7"
t_eq "stalled coordinator: stopped in the middle of its parts" \
	"$(pg_q "SELECT r.status, count(*) > 0 FROM runs r JOIN run_parts p ON p.run_id = r.id AND p.status = 'queued'
		WHERE r.id = $R GROUP BY r.status")" "running|t"
sleep 6
worker "$T_TMP/w8.log" --part-streams 5 --lease 5
W8=$WPID
wait_sql 300 0.05 "SELECT worker LIKE '%:$W8' FROM runs WHERE id = $R"
kill -CONT "$W7"
wait_run "$R" 120
stop_workers
t_eq "stalled coordinator: the run done by the other worker" "$(pg_q "SELECT status, attempts, worker LIKE '%:$W8' FROM runs WHERE id = $R")" "done|2|t"
t_match "stalled coordinator: it noticed and stopped" "$(cat "$T_TMP/w7.log")" "run $R was taken over by another worker"
t_eq "stalled coordinator: the same result" "$(digest "$R")" "$WANT"
t_eq "stalled coordinator: no part left" "$(pg_q "SELECT count(*) FROM run_parts")" 0

# ---- events stored out of time order ----
# (miner/extract.c sorts a stream's events: those out of order aside, merged back) each stream's
# events packed again reversed, in interleaved runs, and shuffled: the same result, in one share and in two
for order in "ts_ns DESC, seq DESC" "seq % 5, seq" "md5(seq::text)"; do
	pg_q "BEGIN; CREATE TABLE t_events AS SELECT * FROM events; DELETE FROM event_chunks;
		INSERT INTO event_chunks SELECT stream_ref, min(received_at), (o / 1024 * 1024)::integer,
			array_agg(DISTINCT stack_id ORDER BY stack_id),
			string_agg(sm_event_record(kind, tid, ts_ns, dur_ns, stack_id, readier_tid), ''::bytea ORDER BY o)
		FROM (SELECT t.*, row_number() OVER (PARTITION BY stream_ref ORDER BY $order) - 1 AS o FROM t_events t) x
		GROUP BY stream_ref, o / 1024; DROP TABLE t_events; COMMIT" >/dev/null
	t_eq "stored by $order: every stream out of time order" "$(pg_q "SELECT count(DISTINCT stream_ref) FILTER (WHERE down)
		FROM (SELECT stream_ref, ts_ns < lag(ts_ns) OVER (PARTITION BY stream_ref ORDER BY seq) AS down FROM events) x")" 240
	for threads in 1 2; do
		R=$(miner run --quiet "${ARGS[@]}" --part-streams 0 --threads $threads 2>"$T_TMP/order.err")
		t_eq "stored by $order, $threads thread(s): the same result" "$(digest "$R")" "$WANT"
	done
done

# ---- refusals ----
out=$(miner worker --part-streams -1 2>&1)
t_match "--part-streams -1 refused" "$out" "--part-streams '-1': a count of streams, 0 for never"
out=$(miner worker --lease 2 2>&1)
t_match "--lease 2 refused" "$out" "--lease '2': seconds, from 5 to 86400"

t_done
