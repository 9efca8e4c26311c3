#!/usr/bin/env bash
# db failover: sm-ingest and sm-web given a multi-host connection string (the primary and a
# streaming standby made by deploy/pg.sh replica, target_session_attrs=read-write). The
# primary is killed (SIGKILL of its postmaster) and the standby promoted, as Patroni would:
# both servers reconnect by themselves to the new primary, forget the ids cached from the old
# one, and every stream an agent sends is stored exactly once. Prints the time from the kill
# to the first stream stored on the new primary.
. "$(dirname "$0")/../lib.sh"

PG=$SM_REPO/deploy/pg.sh
P1=$T_TMP/p1 P2=$T_TMP/p2
t_cleanup '"$PG" destroy "$P2" >/dev/null 2>&1; "$PG" destroy "$P1" >/dev/null 2>&1'
SM_PGPORT=$(free_port) "$PG" start "$P1" >"$T_TMP/pg1.log" 2>&1 || { cat "$T_TMP/pg1.log"; t_bail "primary starts"; }
"$PG" replica "$P1" "$P2" >"$T_TMP/pg2.log" 2>&1 || { cat "$T_TMP/pg2.log"; t_bail "standby starts"; }
u1=$("$PG" url "$P1") u2=$("$PG" url "$P2")
host1=$(sed 's/.*host=\([^ ]*\) port=\([0-9]*\).*/\1/' <<<"$u1") port1=$(sed 's/.*port=\([0-9]*\).*/\1/' <<<"$u1")
host2=$(sed 's/.*host=\([^ ]*\) port=\([0-9]*\).*/\1/' <<<"$u2") port2=$(sed 's/.*port=\([0-9]*\).*/\1/' <<<"$u2")
CONN="host=$host1,$host2 port=$port1,$port2 dbname=stackmine user=stackmine target_session_attrs=read-write connect_timeout=2"
q2() { "$PG" psql "$P2" -XAtc "$1"; }

"$SM_BIN_DIR/sm-admin" --db "$CONN" migrate >/dev/null 2>&1 || t_bail "migrate through the multi-host string"
TOKEN=$("$SM_BIN_DIR/sm-admin" --db "$CONN" token create --role ingest --name failover 2>/dev/null)
ANALYST=$("$SM_BIN_DIR/sm-admin" --db "$CONN" token create --role analyst --name failover-read 2>/dev/null)
printf '%s\n' "$TOKEN" >"$T_TMP/token"
srv_start ingest --db "$CONN" --auth-cache-ms 0 || t_bail "sm-ingest starts"
I_PID=$SRV_PID I_URL=$SRV_URL I_LOG=$SRV_LOG
srv_start web --db "$CONN" --no-worker || t_bail "sm-web starts"
W_PID=$SRV_PID W_URL=$SRV_URL W_LOG=$SRV_LOG
t_cleanup '[ -z "$I_PID" ] || kill -TERM "$I_PID" 2>/dev/null; [ -z "$W_PID" ] || kill -TERM "$W_PID" 2>/dev/null'

ship() { # ship FILE SPOOL: sm-agent with its retries; the summary line
	"$SM_BIN_DIR/sm-agent" ship --url "$I_URL" --token-file "$T_TMP/token" --spool "$2" --batch 2 \
		--retries 8 "$1" 2>&1 | tail -n 1
}

t_ndjson "$T_TMP/before.ndjson" 10
t_match "10 streams before the failover" "$(ship "$T_TMP/before.ndjson" "$T_TMP/s1")" \
	'^sm-agent: ship: 10 accepted, 0 duplicates, 0 rejected, 0 invalid, 0 spooled, 0 lost '
for _ in $(seq 100); do
	[ "$(q2 "SELECT count(*) FROM streams")" = 10 ] && break
	sleep 0.1
done
t_eq "the standby has them" "$(q2 "SELECT pg_is_in_recovery(), count(*) FROM streams" | tr '|' ' ')" "t 10"

# sm-web reading from the standby (--db-read, prefer-standby) and writing to the primary: with the
# standby's replay paused, a read does not see what the primary has since; a write reaches it
srv_start web --db "host=$host1 port=$port1 dbname=stackmine user=stackmine" --no-worker \
	--db-read "host=$host2,$host1 port=$port2,$port1 dbname=stackmine user=stackmine target_session_attrs=prefer-standby" ||
	t_bail "sm-web with --db-read starts"
R_PID=$SRV_PID R_URL=$SRV_URL R_LOG=$SRV_LOG
t_cleanup '[ -z "$R_PID" ] || kill -TERM "$R_PID" 2>/dev/null'
q2admin() { (cd / && runuser -u postgres -- psql -XAtq -c "$1" "$("$PG" url "$P2" --admin)"); }
q2admin "SELECT pg_wal_replay_pause()"
t_ndjson "$T_TMP/paused.ndjson" 2
ship "$T_TMP/paused.ndjson" "$T_TMP/s0" >/dev/null
http GET "$R_URL/api/v1/streams?limit=1" -H "Authorization: Bearer $ANALYST"
t_eq "--db-read: a read comes from the standby (replay paused: 10, the primary has 12)" \
	"$HTTP_STATUS $(sed -n 's/.*"total": *\([0-9]*\).*/\1/p' <<<"$HTTP_BODY")" "200 10"
http POST "$R_URL/api/v1/runs" -H "Authorization: Bearer $ANALYST" -H 'Content-Type: application/json' \
	--data-binary '{"app": "nginx"}'
t_eq "--db-read: a write goes to the primary" "$HTTP_STATUS $("$PG" psql "$P1" -XAtc "SELECT count(*) FROM runs")" "202 1"
q2admin "SELECT pg_wal_replay_resume()"
for _ in $(seq 100); do
	[ "$(q2 "SELECT count(*) FROM streams")" = 12 ] && break
	sleep 0.1
done
srv_stop web "$R_PID" "$R_LOG"
R_PID=

# the miner reading events from the standby (--db-read) once it has replayed what the run selected:
# the standby paused one stream behind, the run waits for it, then reads every part there
READ="host=$host2 port=$port2 dbname=stackmine user=stackmine"
REF=$("$SM_BIN_DIR/sm-miner" --db "$CONN" run --quiet --app nginx --threshold-ns 1 2>/dev/null)
q2admin "SELECT pg_wal_replay_pause()"
t_ndjson "$T_TMP/paused2.ndjson" 1
ship "$T_TMP/paused2.ndjson" "$T_TMP/s0" >/dev/null
"$SM_BIN_DIR/sm-miner" --db "$CONN" run --quiet --app nginx --threshold-ns 1 --part-streams 5 --db-read "$READ" \
	>"$T_TMP/mread.id" 2>"$T_TMP/mread.err" &
M_PID=$!
sleep 1.5
t_eq "--db-read miner: waits while the standby is behind" "$(kill -0 "$M_PID" 2>/dev/null && echo waiting)" waiting
q2admin "SELECT pg_wal_replay_resume()"
wait "$M_PID"
t_eq "--db-read miner: run done" "$?|$("$PG" psql "$P1" -XAtc "SELECT status, counts->>'streams' FROM runs WHERE id = $(cat "$T_TMP/mread.id")")" "0|done|13"
t_eq "--db-read miner: every part's events read from the standby" \
	"$(grep -o 'msg="events read from the standby" streams=[0-9]*' "$T_TMP/mread.err" | sed 's/.*=//' | tr '\n' ' ')" "5 5 3 "
REF2=$("$SM_BIN_DIR/sm-miner" --db "$CONN" run --quiet --app nginx --threshold-ns 1 2>/dev/null)
pat() { "$PG" psql "$P1" -XAtc "SELECT string_agg(concat_ws(':', kind, rank, cost_ns, events, streams), ',' ORDER BY kind, rank) FROM patterns WHERE run_id = $1"; }
t_eq "--db-read miner: the same patterns as a run on the primary" "$(pat "$(cat "$T_TMP/mread.id")")" "$(pat "$REF2")"
t_eq "--db-read miner: the stream the standby lacked at first is in them (13 streams; before it, 12)" \
	"$("$PG" psql "$P1" -XAtc "SELECT string_agg(counts->>'streams', ' ' ORDER BY id) FROM runs
		WHERE id IN ($REF, $(cat "$T_TMP/mread.id"), $REF2)")" "12 13 13"

http GET "$W_URL/api/v1/runs/999999" -H "Authorization: Bearer $ANALYST"
t_eq "sm-web before the failover: a prepared statement's query (no such run)" "$HTTP_STATUS" 404

# the primary dies; the standby takes over
pm=$(head -n 1 "$(readlink -f "$P1")/data/postmaster.pid")
t0=$(date +%s%N)
kill -KILL "$pm"
"$PG" promote "$P2" >/dev/null 2>&1 || t_bail "promote"
t_eq "the standby is the primary" "$(q2 "SELECT pg_is_in_recovery()")" f

t_ndjson "$T_TMP/after.ndjson" 10
summary=$(ship "$T_TMP/after.ndjson" "$T_TMP/s2")
t1=$(date +%s%N)
t_match "10 streams after it: all accepted" "$summary" \
	'^sm-agent: ship: 10 accepted, 0 duplicates, 0 rejected, 0 invalid, 0 spooled, 0 lost '
t_eq "every stream stored once on the new primary" "$(q2 "SELECT count(DISTINCT stream_id) || '|' || count(*) FROM streams")" "23|23"
t_eq "... with all its events and stacks" "$(q2 "SELECT count(*) FROM streams s WHERE n_events <> (SELECT count(*) FROM events e WHERE e.stream_ref = s.id)")" 0
t_match "sm-ingest says it reconnected, and where" "$(cat "$I_LOG")" "database connection re-established.*$host2:$port2"
echo "from the primary's death to 10 more streams stored on the promoted standby: $(( (t1 - t0) / 1000000 )) ms"
# the cache each worker emptied as it met the new primary is warmed again from it, once they all have
warm=
for _ in $(seq 100); do
	warm=$(grep 'id cache warmed' "$I_LOG" | sed -n '2p')
	[ -n "$warm" ] && break
	sleep 0.1
done
t_match "the id cache, emptied, is warmed again" "$(grep -A1 'id cache emptied: warming it again' "$I_LOG" | tail -n 1)" \
	'id cache warmed'
t_eq "... with the new primary's frames and stacks, once" \
	"$(sed -n 's/.*\(frames=[0-9]* stacks=[0-9]*\).*/\1/p' <<<"$warm") $(grep -c 'id cache warmed' "$I_LOG")" \
	"frames=$(q2 "SELECT count(*) FROM frames") stacks=$(q2 "SELECT count(*) FROM stacks") 2"

# sm-web reads from the new primary, the first request included
http GET "$W_URL/api/v1/streams?limit=1" -H "Authorization: Bearer $ANALYST"
t_eq "sm-web after the failover: its first request answered from the new primary" "$HTTP_STATUS $(sed -n 's/.*"total": *\([0-9]*\).*/\1/p' <<<"$HTTP_BODY")" "200 23"
for _ in 1 2 3; do
	http GET "$W_URL/api/v1/runs/999999" -H "Authorization: Bearer $ANALYST"
done
t_eq "sm-web after the failover: the prepared statement on the new primary" "$HTTP_STATUS" 404
# each new session prepares before it executes: no "does not exist" error in either server's log
t_eq "no prepared statement executed before it was prepared (server.log)" \
	"$(cat "$P1/server.log" "$P2/server.log" | grep 'prepared statement .* does not exist' | head -n 3)" ""

srv_stop web "$W_PID" "$W_LOG"
W_PID=
srv_stop ingest "$I_PID" "$I_LOG"
I_PID=
t_done
