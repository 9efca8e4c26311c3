#!/usr/bin/env bash
# backup: the restore drill of docs/operations.md. A cluster made by deploy/pg.sh stores
# streams through sm-ingest; `deploy/pg.sh backup` copies it while sm-ingest keeps storing;
# `deploy/pg.sh restore` makes a new cluster from the file, checked against the backup's
# manifest: it holds every stream stored before the backup began, whole, and none stored
# after it ended, and sm-admin finds its schema current. Prints the backup's size and time.
. "$(dirname "$0")/../lib.sh"

PG=$SM_REPO/deploy/pg.sh
P1=$T_TMP/p1 P2=$T_TMP/p2
t_cleanup '"$PG" destroy "$P2" >/dev/null 2>&1; "$PG" destroy "$P1" >/dev/null 2>&1'
SM_PGPORT=$(free_port) "$PG" start "$P1" >"$T_TMP/pg1.log" 2>&1 || { cat "$T_TMP/pg1.log"; t_bail "cluster starts"; }
CONN=$("$PG" url "$P1")
"$SM_BIN_DIR/sm-admin" --db "$CONN" migrate >/dev/null 2>&1 || t_bail "migrate"
"$SM_BIN_DIR/sm-admin" --db "$CONN" token create --role ingest --name backup >"$T_TMP/token" 2>/dev/null
srv_start ingest --db "$CONN" || t_bail "sm-ingest starts"
I_PID=$SRV_PID I_URL=$SRV_URL I_LOG=$SRV_LOG
t_cleanup '[ -z "$I_PID" ] || kill -TERM "$I_PID" 2>/dev/null'
ship() {
	"$SM_BIN_DIR/sm-agent" ship --url "$I_URL" --token-file "$T_TMP/token" --spool "$T_TMP/spool" "$1" 2>&1 | tail -n 1
}
ids() { paste -sd, "$1"; }

t_ndjson "$T_TMP/before.ndjson" 10
t_match "10 streams before the backup" "$(ship "$T_TMP/before.ndjson")" '^sm-agent: ship: 10 accepted, '
# the backup runs while more streams come in
t_ndjson "$T_TMP/during.ndjson" 5
t0=$(date +%s%N)
"$PG" backup "$P1" "$T_TMP/stackmine.tgz" >"$T_TMP/backup.log" 2>&1 &
bpid=$!
ship "$T_TMP/during.ndjson" >/dev/null
wait "$bpid"
t_eq "pg.sh backup: exit status" "$?" 0
t1=$(date +%s%N)
t_ndjson "$T_TMP/after.ndjson" 5
t_match "5 streams after the backup" "$(ship "$T_TMP/after.ndjson")" '^sm-agent: ship: 5 accepted, '
echo "backup of $(wc -l <"$T_TMP/before.ndjson" | tr -d ' ')+ streams: $(du -h "$T_TMP/stackmine.tgz" | cut -f1), $(( (t1 - t0) / 1000000 )) ms (the server kept storing)"

"$PG" restore "$T_TMP/stackmine.tgz" "$P2" >"$T_TMP/restore.log" 2>&1
t_eq "pg.sh restore: exit status" "$?" 0
q2() { "$PG" psql "$P2" -XAtc "$1"; }
t_eq "the restored cluster: every stream from before the backup, whole" \
	"$(q2 "SELECT count(*), count(*) FILTER (WHERE n_events = (SELECT count(*) FROM events e WHERE e.stream_ref = s.id))
	FROM streams s WHERE stream_id = ANY('{$(ids "$T_TMP/before.ndjson.ids")}'::uuid[])" | tr '|' ' ')" "10 10"
t_eq "... none from after it" \
	"$(q2 "SELECT count(*) FROM streams WHERE stream_id = ANY('{$(ids "$T_TMP/after.ndjson.ids")}'::uuid[])")" 0
t_eq "... its schema current for sm-admin" "$("$SM_BIN_DIR/sm-admin" --db "$("$PG" url "$P2")" status >/dev/null 2>&1; echo $?)" 0
echo "$(q2 "SELECT count(*) FROM streams WHERE stream_id = ANY('{$(ids "$T_TMP/during.ndjson.ids")}'::uuid[])") of the 5 streams stored during the backup are in it"
"$PG" restore "$T_TMP/stackmine.tgz" "$P2" >"$T_TMP/restore2.log" 2>&1
t_eq "restoring over a cluster: refused" "$?|$(tail -n 1 "$T_TMP/restore2.log" | sed "s|$P2|DIR|")" "1|pg.sh: DIR holds a cluster already"
printf 'not a backup' | gzip >"$T_TMP/bad.tgz"
"$PG" restore "$T_TMP/bad.tgz" "$T_TMP/p3" >"$T_TMP/restore3.log" 2>&1
t_eq "restoring what is not a backup: refused" "$?" 1

srv_stop ingest "$I_PID" "$I_LOG"
I_PID=
t_done
