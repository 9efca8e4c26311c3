#!/usr/bin/env bash
# run retry: a PostgreSQL restart while a run is being mined is not the run's fault. The run is
# held at a known point (a session keeps run_stacks locked, so storing the results waits), the
# database is restarted under it, and the run is mined again to done: by a worker (sm-miner
# worker) and by sm-miner run in the foreground. Its attempts and why the last one ended are on
# the run (API and page); after MINER_MAX_ATTEMPTS (3) attempts the run fails, saying why.
: "${SM_TEST_FRESH_DB:=0}"   # its own PostgreSQL cluster, which the test restarts
. "$(dirname "$0")/../lib.sh"

PG=$SM_REPO/deploy/pg.sh
P1=$T_TMP/p1
t_cleanup '"$PG" destroy "$P1" >/dev/null 2>&1'
SM_PGPORT=$(free_port) "$PG" start "$P1" >"$T_TMP/pg.log" 2>&1 || { cat "$T_TMP/pg.log"; t_bail "PostgreSQL starts"; }
CONN=$("$PG" url "$P1")
q() { "$PG" psql "$P1" -XAtc "$1"; }
restart_db() {
	"$PG" stop "$P1" >>"$T_TMP/pg.log" 2>&1
	"$PG" start "$P1" >>"$T_TMP/pg.log" 2>&1
}
# lock_stacks: a session that holds run_stacks until the database stops
lock_stacks() {
	"$PG" psql "$P1" -XAtq -c "BEGIN" -c "LOCK TABLE run_stacks IN ACCESS EXCLUSIVE MODE" \
		-c "SELECT pg_sleep(600)" >/dev/null 2>&1 &
	for _ in $(seq 100); do
		[ "$(q "SELECT count(*) FROM pg_locks WHERE relation = 'run_stacks'::regclass AND granted
			AND mode = 'AccessExclusiveLock'")" = 1 ] && return 0
		sleep 0.1
	done
	return 1
}
# wait_blocked: a miner's statement waits for that lock
wait_blocked() {
	for _ in $(seq 600); do
		[ "$(q "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'
			AND query LIKE '%run_stacks%'")" -ge 1 ] && return 0
		sleep 0.1
	done
	return 1
}
# wait_ended RUN: until the run is done or failed (60 s at most)
wait_ended() {
	local st
	for _ in $(seq 300); do
		st=$(q "SELECT status FROM runs WHERE id = $1" 2>/dev/null)
		[ "$st" = done ] || [ "$st" = failed ] && return 0
		sleep 0.2
	done
	return 1
}

"$SM_BIN_DIR/sm-admin" --db "$CONN" migrate >/dev/null 2>&1 || t_bail "migrate"
TOKEN=$("$SM_BIN_DIR/sm-admin" --db "$CONN" token create --role ingest --name retry 2>/dev/null)
ANALYST=$("$SM_BIN_DIR/sm-admin" --db "$CONN" token create --role analyst --name retry-read 2>/dev/null)
srv_start ingest --db "$CONN" || t_bail "sm-ingest starts"
I_PID=$SRV_PID I_URL=$SRV_URL I_LOG=$SRV_LOG
t_ndjson "$T_TMP/s.ndjson" 20
http POST "$I_URL/api/v1/streams" -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/x-ndjson' \
	--data-binary "@$T_TMP/s.ndjson"
t_eq "streams stored" "$HTTP_STATUS $(q "SELECT count(*) FROM streams")" "200 20"
srv_stop ingest "$I_PID" "$I_LOG"
APP=$(q "SELECT app FROM streams LIMIT 1")

# ---- a worker's run ----
lock_stacks || t_bail "run_stacks locked"
"$SM_BIN_DIR/sm-miner" --db "$CONN" worker --lease 5 >"$T_TMP/worker.log" 2>&1 &
WK=$!
t_cleanup '[ -z "$WK" ] || kill -TERM "$WK" 2>/dev/null'
RUN=$("$SM_BIN_DIR/sm-miner" --db "$CONN" run --queue --app "$APP" --threshold-ns 1000 2>/dev/null)
t_match "a run queued" "$RUN" '^[0-9]+$'
wait_blocked || t_fail "the run waits for run_stacks" "$(q "SELECT status, error FROM runs WHERE id = $RUN")"
restart_db
wait_ended "$RUN"
t_eq "worker: the run is done after the restart, at its second attempt" \
	"$(q "SELECT status, attempts, error IS NULL, last_retry LIKE 'the database went away: %' FROM runs WHERE id = $RUN")" \
	"done|2|t|t"
t_match "worker: its results are stored" "$(q "SELECT counts->>'clusters' FROM runs WHERE id = $RUN")" '^[1-9][0-9]*$'
t_match "worker: the log says the run went again" "$(grep 'run queued again' "$T_TMP/worker.log")" "run=$RUN"
t_ok_alive=$(t_alive "$WK" && echo yes)
t_eq "worker: still working" "$t_ok_alive" yes

# the run's page and the API show the attempts
srv_start web --db "$CONN" --no-worker || t_bail "sm-web starts"
W_PID=$SRV_PID W_URL=$SRV_URL W_LOG=$SRV_LOG
http GET "$W_URL/api/v1/runs/$RUN" -H "Authorization: Bearer $ANALYST"
t_eq "API: attempts and the last retry's reason" \
	"$HTTP_STATUS $(python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["attempts"], j["last_retry"].startswith("the database went away: "))' <<<"$HTTP_BODY")" \
	"200 2 True"
http GET "$W_URL/runs/$RUN" -H "Authorization: Bearer $ANALYST"
t_match "page: the attempt and why the previous one ended" "$HTTP_STATUS $HTTP_BODY" \
	'^200 .*<p class="hint">Attempt 2 of 3; the previous one ended: the database went away: '
srv_stop web "$W_PID" "$W_LOG"

# ---- a run that had its last attempt fails, saying why ----
lock_stacks || t_bail "run_stacks locked again"
RUN3=$("$SM_BIN_DIR/sm-miner" --db "$CONN" run --queue --app "$APP" --threshold-ns 1000 2>/dev/null)
wait_blocked || t_fail "the third run waits" "$(q "SELECT status, error FROM runs WHERE id = $RUN3")"
q "UPDATE runs SET attempts = 3 WHERE id = $RUN3" >/dev/null
restart_db
wait_ended "$RUN3"
t_eq "after 3 attempts: failed, saying why" \
	"$(q "SELECT status, attempts, error LIKE 'the database went away during each of its 3 attempts; the last: the database went away: %' FROM runs WHERE id = $RUN3")" \
	"failed|3|t"
kill -TERM "$WK" 2>/dev/null
wait "$WK"
t_eq "worker: stops cleanly" "$?" 0
WK=

# ---- sm-miner run in the foreground ----
lock_stacks || t_bail "run_stacks locked for the foreground run"
"$SM_BIN_DIR/sm-miner" --db "$CONN" run --app "$APP" --threshold-ns 1000 >"$T_TMP/run.out" 2>"$T_TMP/run.err" &
FG=$!
wait_blocked || t_fail "the foreground run waits" "$(cat "$T_TMP/run.err")"
restart_db
wait "$FG"
rc=$?
RUN2=$(cat "$T_TMP/run.out")
t_eq "sm-miner run: exit status 0 and the run's id" "$rc $(grep -c '^[0-9]*$' "$T_TMP/run.out")" "0 1"
t_match "sm-miner run: says it tries again" "$(cat "$T_TMP/run.err")" "run $RUN2: the database went away: .*; trying again"
t_eq "sm-miner run: done at its second attempt" \
	"$(q "SELECT status, attempts, last_retry LIKE 'the database went away: %' FROM runs WHERE id = ${RUN2:-0}")" "done|2|t"
t_done
