#!/usr/bin/env bash
# shards: events held by two other PostgreSQL servers (sql/018_shards.sql,
# sm-admin shard add; docs/scaling.md, "Sharding the events"). Three clusters
# made by deploy/pg.sh: the main database and two shards, over TCP with
# passwords. Shows: the refusals (no extensions, a shard that is not there, a
# login without a password, a name given twice); the day partitions spread over
# both shards as foreign partitions; a fleet stored through sm-ingest with its
# streams here and its events there, about half on each, none left here; a
# mining run (in one piece, and in parts by two workers) with exactly the
# patterns and clusters of the same fleet in an unsharded database; retention
# dropping a day here and on both shards.
. "$(dirname "$0")/../lib.sh"

genfleet=${SM_GENFLEET:-$SM_BIN_DIR/../tests/genfleet}
[ -x "$genfleet" ] || t_bail "genfleet" "$genfleet is missing (build first)"
PG=$SM_REPO/deploy/pg.sh
C=$T_TMP/main S1=$T_TMP/shard1 S2=$T_TMP/shard2 S3=$T_TMP/shard3
t_cleanup 'for d in "$C" "$S1" "$S2" "$S3"; do "$PG" destroy "$d" >/dev/null 2>&1; done'
# a free port may be taken before the server binds it (another test's outgoing connection): try again
for d in "$C" "$S1" "$S2" "$S3"; do
	for try in 1 2 3; do
		SM_PGPORT=$(free_port) "$PG" start "$d" >"$d.log" 2>&1 && break
		"$PG" destroy "$d" >/dev/null 2>&1
		[ "$try" = 3 ] && { cat "$d.log"; t_bail "cluster $d starts"; }
	done
done
MAIN=$("$PG" url "$C")
admin_main() { (cd / && runuser -u "$(stat -c %U "$C/data")" -- psql -XAtq -c "$1" "$("$PG" url "$C" --admin) dbname=stackmine"); }
qc() { psql -XAt "$MAIN" -c "$1"; }
qs() { psql -XAt "$("$PG" url "$1")" -c "$2"; }
# the runner's PGPASSWORD would beat the shards' password files
sm_admin_main() { env -u PGPASSWORD "$SM_BIN_DIR/sm-admin" --db "$MAIN" "$@"; }

sm_admin_main migrate >/dev/null || t_bail "migrate"

# ---- refusals ----
out=$(sm_admin_main shard add s1 "$("$PG" url "$S1" --tcp)" 2>&1)
t_match "shard add without the extensions: refused, with what to do" "$out" \
	"shards need the extensions postgres_fdw and dblink in this database.*hint: as a superuser: CREATE EXTENSION postgres_fdw; CREATE EXTENSION dblink; GRANT USAGE ON FOREIGN DATA WRAPPER postgres_fdw TO stackmine"
admin_main "CREATE EXTENSION postgres_fdw; CREATE EXTENSION dblink; GRANT USAGE ON FOREIGN DATA WRAPPER postgres_fdw TO stackmine"
out=$(sm_admin_main shard add s1 "host=127.0.0.1 port=$(free_port) dbname=stackmine user=stackmine connect_timeout=2" 2>&1)
t_match "a shard that does not answer: refused, named" "$out" "^sm-admin: shard s1: database connection failed: "
out=$(sm_admin_main shard add s1 "$("$PG" url "$S1")" 2>&1)
t_match "a login without a password: refused" "$out" "^sm-admin: shard s1: the connection logged in without a password"
out=$(sm_admin_main shard add 'S-1' "$("$PG" url "$S1" --tcp)" 2>&1)
t_eq "a bad name: refused" "$out" "sm-admin: shard add: NAME 'S-1': 1 to 48 of a-z, 0-9 and _"
t_eq "nothing added by the refusals" "$(qc "SELECT count(*) FROM shards")|$(qc "SELECT count(*) FROM pg_foreign_server")" "0|0"

# ---- two shards ----
t_match "shard s1 added" "$(sm_admin_main shard add s1 "$("$PG" url "$S1" --tcp)")" "^shard s1 added \(id 1\)"
t_match "shard s2 added" "$(sm_admin_main shard add s2 "$("$PG" url "$S2" --tcp)")" "spread over 2 shards$"
out=$(sm_admin_main shard add s2 "$("$PG" url "$S2" --tcp)" 2>&1)
t_match "a shard added twice: refused" "$out" "shard s2: already added"
TODAY=event_chunks_p$(date -u +%Y%m%d)
t_eq "today's partition: a hash partition per shard, foreign" \
	"$(qc "SELECT string_agg(c.relname || ':' || c.relkind::text || ':' || pg_get_expr(c.relpartbound, c.oid), ' ' ORDER BY c.relname)
		FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = '$TODAY'::regclass")" \
	"${TODAY}_s1:f:FOR VALUES WITH (modulus 2, remainder 0) ${TODAY}_s2:f:FOR VALUES WITH (modulus 2, remainder 1)"
t_eq "... with its table on each shard, in the schema stackmine_events" \
	"$(qs "$S1" "SELECT to_regclass('stackmine_events.$TODAY') IS NOT NULL")|$(qs "$S2" "SELECT to_regclass('stackmine_events.$TODAY') IS NOT NULL")" "t|t"
t_match "shard list: both, with their servers and days" "$(sm_admin_main shard list)" \
	"id=1 server=s1 options=connect_timeout=10 dbname=stackmine host=127.0.0.1 port=[0-9]+ keepalives_idle=5 keepalives_interval=2 keepalives_count=3 tcp_user_timeout=30000 async_capable=true fetch_size=10000 batch_size=1000 days=9 .*
  id=2 server=s2 options=.* days=8 "

# ---- a fleet through sm-ingest, and the same into an unsharded database ----
"$genfleet" --streams 300 --events 400 --apps shardapp --hosts 10 --seed 9 --out "$T_TMP/fleet.ndjson" 2>/dev/null ||
	t_bail "genfleet"
split -l 50 "$T_TMP/fleet.ndjson" "$T_TMP/batch."
TOKEN=$(sm_admin_main token create --role ingest --name shards 2>/dev/null)
send() { # send URL TOKEN: every batch; the distinct status codes
	local f
	for f in "$T_TMP"/batch.*; do
		curl -s -o /dev/null -w '%{http_code}\n' -H "Authorization: Bearer $2" -H 'Content-Type: application/x-ndjson' \
			--data-binary "@$f" "$1/api/v1/streams"
	done | sort -u | tr '\n' ' '
}
srv_start ingest --db "$MAIN" || t_bail "sm-ingest on the main database"
t_eq "fleet sent to the sharded database" "$(send "$SRV_URL" "$TOKEN")" "200 "
srv_stop ingest "$SRV_PID" "$SRV_LOG"
sm_admin migrate >/dev/null || t_bail "migrate the reference"
REF_TOKEN=$(mk_token ingest 2>/dev/null)
start_ingest || t_bail "sm-ingest on the reference database"
t_eq "fleet sent to the reference database" "$(send "$INGEST_URL" "$REF_TOKEN")" "200 "
stop_ingest

t_eq "streams here" "$(qc "SELECT count(*), sum(n_events) FROM streams")" "300|120000"
e1=$(qs "$S1" "SELECT coalesce(sum(length(data) / 29), 0) FROM stackmine_events.$TODAY") e2=$(qs "$S2" "SELECT coalesce(sum(length(data) / 29), 0) FROM stackmine_events.$TODAY")
t_eq "events on the shards: all of them" "$((e1 + e2))" 120000
t_eq "... about half on each (35 to 65 %)" "$(awk -v a="$e1" 'BEGIN { print (a >= 42000 && a <= 78000) ? "yes" : "no (" a ")" }')" yes
t_eq "... each stream whole on one shard" \
	"$(qs "$S1" "SELECT count(DISTINCT stream_ref) FROM stackmine_events.$TODAY") $(qs "$S2" "SELECT count(DISTINCT stream_ref) FROM stackmine_events.$TODAY")" \
	"$(qc "SELECT count(*) FILTER (WHERE satisfies_hash_partition('$TODAY'::regclass, 2, 0, id)) || ' ' ||
		count(*) FILTER (WHERE satisfies_hash_partition('$TODAY'::regclass, 2, 1, id)) FROM streams")"
t_eq "no event stored here: what the main database reads is the shards' rows" \
	"$(qc "SELECT count(*) FROM events")" "$((e1 + e2))"
t_eq "events read back through the main database" "$(qc "SELECT count(*), sum(dur_ns) FROM events")" \
	"$(pg_q "SELECT count(*), sum(dur_ns) FROM events")"

# ---- mining: the same patterns and clusters as unsharded ----
digest() { # digest PSQL-FUNCTION RUN: the run's patterns and clusters by frame names
	"$1" "SELECT md5(string_agg(concat_ws(':', p.kind, p.rank, p.cost_ns, p.events, p.streams,
		(SELECT string_agg(f.name, '>' ORDER BY u.o) FROM unnest(p.frame_ids) WITH ORDINALITY u(fid, o)
		 JOIN frames f ON f.id = u.fid)), ',' ORDER BY p.kind, p.rank)) || ' ' ||
		(SELECT count(*) || ':' || coalesce(sum(total_cost_ns), 0) FROM clusters WHERE run_id = $2)
		FROM patterns p WHERE p.run_id = $2"
}
ARGS=(--app shardapp --threshold-fraction 0.01)
REF=$("$SM_BIN_DIR/sm-miner" run --quiet "${ARGS[@]}" 2>"$T_TMP/ref.err") || t_bail "reference run" "$(cat "$T_TMP/ref.err")"
WANT=$(digest pg_q "$REF")
R1=$("$SM_BIN_DIR/sm-miner" --db "$MAIN" run --quiet "${ARGS[@]}" --part-streams 0 2>"$T_TMP/r1.err")
t_eq "sharded, one piece: run done" "$(qc "SELECT status FROM runs WHERE id = ${R1:-0}")" done
t_eq "sharded, one piece: the reference's patterns and clusters" "$(digest qc "$R1")" "$WANT"
"$SM_BIN_DIR/sm-miner" --db "$MAIN" worker --quiet --threads 1 --part-streams 40 2>"$T_TMP/w1.log" &
W1=$!
"$SM_BIN_DIR/sm-miner" --db "$MAIN" worker --quiet --threads 1 --part-streams 40 2>"$T_TMP/w2.log" &
W2=$!
t_cleanup "kill $W1 $W2 2>/dev/null"
R2=$("$SM_BIN_DIR/sm-miner" --db "$MAIN" run --queue --quiet "${ARGS[@]}")
for _ in $(seq 600); do
	case $(qc "SELECT status FROM runs WHERE id = $R2") in done|failed) break ;; esac
	sleep 0.1
done
kill "$W1" "$W2" 2>/dev/null
wait "$W1" "$W2" 2>/dev/null
t_eq "sharded, 8 parts over two workers: run done" "$(qc "SELECT status FROM runs WHERE id = $R2")" done
t_eq "sharded, 8 parts over two workers: the same patterns and clusters" "$(digest qc "$R2")" "$WANT"

# ---- a third shard, added while today holds events ----
t_match "shard s3 added with today's events stored" "$(sm_admin_main shard add s3 "$("$PG" url "$S3" --tcp)")" "spread over 3 shards$"
TOMORROW=event_chunks_p$(date -u -d tomorrow +%Y%m%d)
t_eq "today's partition keeps its two shards and its events" \
	"$(qc "SELECT count(*) FROM pg_inherits WHERE inhparent = '$TODAY'::regclass")|$(qc "SELECT count(*) FROM events")" "2|120000"
t_eq "tomorrow's partition is over three" "$(qc "SELECT count(*) FROM pg_inherits WHERE inhparent = '$TOMORROW'::regclass")" 3
t_eq "frames and stacks are not collected while there are shards" "$(qc "SELECT stacks, frames FROM sm_collect_interned()")" "0|0"

# ---- retention: the day goes here, then on the shards ----
qc "UPDATE settings SET value = '1' WHERE key = 'retention_days'" >/dev/null
t_eq "retention two days on: today's partition dropped here" \
	"$(qc "SELECT sm_apply_retention(now() + interval '2 days') >= 1, to_regclass('$TODAY') IS NULL")" "t|t"
t_eq "... its shards' tables recorded, still there" \
	"$(qc "SELECT string_agg(server, ' ' ORDER BY server) FROM shard_drops WHERE remote = '$TODAY'")|$(qs "$S1" "SELECT to_regclass('stackmine_events.$TODAY') IS NOT NULL")" "s1 s2|t"
t_eq "... then dropped there by sm_shard_drops()" "$(qc "SELECT sm_shard_drops() >= 2")|$(qc "SELECT count(*) FROM shard_drops")" "t|0"
t_eq "... gone from both shards, tomorrow's kept on the third" \
	"$(qs "$S1" "SELECT to_regclass('stackmine_events.$TODAY') IS NULL")|$(qs "$S2" "SELECT to_regclass('stackmine_events.$TODAY') IS NULL")|$(qs "$S3" "SELECT to_regclass('stackmine_events.$TOMORROW') IS NOT NULL")" "t|t|t"
t_eq "... and its streams" "$(qc "SELECT count(*) FROM streams")" 0
# a shard that does not answer keeps its tables in shard_drops for the next time
"$PG" stop "$S2" >/dev/null 2>&1
qc "INSERT INTO shard_drops VALUES ('s2', 'event_chunks_p20000101'), ('s1', 'event_chunks_p20000101')" >/dev/null
t_eq "a shard down: the other's table dropped, its own kept for later" \
	"$(qc "SELECT sm_shard_drops()" 2>/dev/null)|$(qc "SELECT string_agg(server, ' ') FROM shard_drops")" "1|s2"

t_done
