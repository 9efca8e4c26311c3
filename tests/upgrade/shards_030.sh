#!/usr/bin/env bash
# Migration 030 on a sharded database, by hand (not in `make test`: it builds the programs of
# schema 029, a23ba06, in a worktree, some minutes on two cores). Three clusters of deploy/pg.sh:
# the main database and two shards. The programs of 029 migrate, add both shards and store 300
# streams of 3,000 events (their events on the shards, a row an event); this checkout's sm-admin
# then migrates to 030. Checks: every event read back equal through the view `events` (count,
# sum, and a digest of every field in order); today's chunks on both shards, as foreign hash
# partitions; the old tables gone from the main database, and from the shards by sm_shard_drops();
# the next days made again by this sm-ingest, which stores 100 more streams; a mining run over all.
# Usage: tests/upgrade/shards_030.sh (after `make binaries`); exit status 0 when every check held.
set -u
NEW=$(cd "$(dirname "$0")/../.." && pwd)
PG=$NEW/deploy/pg.sh
T=$(mktemp -d /var/tmp/sm-upgrade-030.XXXXXX)
chmod 755 "$T"
OLD=$T/old
C=$T/main S1=$T/s1 S2=$T/s2
fails=0
cleanup() {
	for d in "$C" "$S1" "$S2"; do "$PG" destroy "$d" >/dev/null 2>&1; done
	git -C "$NEW" worktree remove --force "$OLD" >/dev/null 2>&1
	rm -rf "$T"
}
trap cleanup EXIT
check() { # check WHAT GOT WANT
	if [ "$2" = "$3" ]; then echo "ok    $1"; else echo "FAIL  $1: got '$2', want '$3'"; fails=$((fails + 1)); fi
}
fp() {
	local p
	for _ in $(seq 100); do
		p=$((10000 + RANDOM % 20000))
		(: <>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
	done
}
git -C "$NEW" worktree add --detach "$OLD" a23ba06 >/dev/null 2>&1 || { echo "worktree of a23ba06 failed"; exit 1; }
ln -sfn "$NEW/../shared" "$T/shared"
(cd "$OLD" && nice make -j2 binaries >"$T/build.log" 2>&1) || { tail "$T/build.log"; exit 1; }
for d in "$C" "$S1" "$S2"; do
	SM_PGPORT=$(fp) "$PG" start "$d" >"$d.log" 2>&1 || { cat "$d.log"; exit 1; }
done
MAIN=$("$PG" url "$C")
admin_main() { (cd / && runuser -u "$(stat -c %U "$C/data")" -- psql -XAtq -c "$1" "$("$PG" url "$C" --admin) dbname=stackmine"); }
qc() { psql -XAt "$MAIN" -c "$1"; }
qs() { psql -XAt "$("$PG" url "$1")" -c "$2"; }
adm() { env -u PGPASSWORD "$1/bin/sm-admin" --db "$MAIN" "${@:2}"; }
# ingest BIN: that sm-ingest on the main database, every batch of $T/batch.* sent; their statuses
ingest() {
	local p f
	rm -f "$T/port"
	"$1/bin/sm-ingest" --db "$MAIN" --max-body 100M --max-decoded 200M --listen 127.0.0.1:0 \
		--port-file "$T/port" 2>"$T/ingest.log" &
	p=$!
	for _ in $(seq 100); do [ -s "$T/port" ] && break; sleep 0.1; done
	for f in "$T"/batch.*; do
		curl -s -o /dev/null -w '%{http_code}\n' -H "Authorization: Bearer $TOKEN" \
			-H 'Content-Type: application/x-ndjson' --data-binary "@$f" "http://127.0.0.1:$(cat "$T/port")/api/v1/streams"
	done | sort -u | tr '\n' ' '
	kill "$p"
	wait "$p"
}
fleet() { # fleet GENFLEET STREAMS SEED: batches of 50 streams of 3,000 events
	rm -f "$T"/batch.*
	"$1" --streams "$2" --events 3000 --apps shardapp --hosts 10 --seed "$3" --out "$T/fleet.ndjson" 2>/dev/null
	split -l 50 "$T/fleet.ndjson" "$T/batch."
}

adm "$OLD" migrate >/dev/null
check "the old programs' schema" "$(qc 'SELECT max(version) FROM schema_migrations')" 29
admin_main "CREATE EXTENSION postgres_fdw; CREATE EXTENSION dblink; GRANT USAGE ON FOREIGN DATA WRAPPER postgres_fdw TO stackmine"
adm "$OLD" shard add s1 "$("$PG" url "$S1" --tcp)" >/dev/null
adm "$OLD" shard add s2 "$("$PG" url "$S2" --tcp)" >/dev/null
TOKEN=$(adm "$OLD" token create --role ingest --name upgrade 2>/dev/null)
fleet "$OLD/build/rel/tests/genfleet" 300 9
check "300 streams stored by the old sm-ingest" "$(ingest "$OLD")" "200 "
DAY=$(date -u +%Y%m%d)
check "their events on the shards, a row an event, none here" \
	"$(($(qs "$S1" "SELECT count(*) FROM stackmine_events.events_p$DAY") + $(qs "$S2" "SELECT count(*) FROM stackmine_events.events_p$DAY")))|$(qc 'SELECT count(*) FROM events')" \
	"900000|900000"
DIG="SELECT count(*), sum(dur_ns), md5(string_agg(concat_ws(',', stream_ref, seq, kind, tid, ts_ns, dur_ns, stack_id,
	readier_tid), ';' ORDER BY stream_ref, seq)) FROM events"
before=$(qc "$DIG")

start=$(date +%s.%N)
adm "$NEW" migrate >/dev/null || { echo "FAIL  migrate"; exit 1; }
echo "      migrate: $(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f s", b - a }')"
check "schema 30" "$(qc 'SELECT max(version) FROM schema_migrations')" 30
check "every event read back equal through the view" "$(qc "$DIG")" "$before"
check "today: a foreign hash partition per shard" \
	"$(qc "SELECT string_agg(c.relname || ':' || c.relkind::text || ':' || pg_get_expr(c.relpartbound, c.oid), ' ' ORDER BY c.relname)
		FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'event_chunks_p$DAY'::regclass")" \
	"event_chunks_p${DAY}_s1:f:FOR VALUES WITH (modulus 2, remainder 0) event_chunks_p${DAY}_s2:f:FOR VALUES WITH (modulus 2, remainder 1)"
e1=$(qs "$S1" "SELECT sum(length(data) / 29) FROM stackmine_events.event_chunks_p$DAY")
e2=$(qs "$S2" "SELECT sum(length(data) / 29) FROM stackmine_events.event_chunks_p$DAY")
echo "      chunks: $(qs "$S1" "SELECT count(*) FROM stackmine_events.event_chunks_p$DAY") on s1 ($e1 events), $(qs "$S2" "SELECT count(*) FROM stackmine_events.event_chunks_p$DAY") on s2 ($e2 events)"
check "the events packed on the shards, all of them" "$((e1 + e2))" 900000
check "each stream's chunks on one shard" \
	"$(qs "$S1" "SELECT count(DISTINCT stream_ref) FROM stackmine_events.event_chunks_p$DAY") $(qs "$S2" "SELECT count(DISTINCT stream_ref) FROM stackmine_events.event_chunks_p$DAY")" \
	"$(qc "SELECT count(*) FILTER (WHERE satisfies_hash_partition('event_chunks_p$DAY'::regclass, 2, 0, id)) || ' ' ||
		count(*) FILTER (WHERE satisfies_hash_partition('event_chunks_p$DAY'::regclass, 2, 1, id)) FROM streams")"
check "no partition of the old table left here" "$(qc "SELECT count(*) FROM pg_class WHERE relname ~ '^events_p[0-9]'")" 0
check "the old tables dropped on the shards by sm_shard_drops()" \
	"$(qc 'SELECT sm_shard_drops() > 0')|$(qs "$S1" "SELECT count(*) FROM pg_tables WHERE schemaname = 'stackmine_events' AND tablename ~ '^events_p'")|$(qs "$S2" "SELECT count(*) FROM pg_tables WHERE schemaname = 'stackmine_events' AND tablename ~ '^events_p'")|$(qc 'SELECT count(*) FROM shard_drops')" \
	"t|0|0|0"
fleet "$NEW/build/rel/tests/genfleet" 100 10
check "100 more streams stored by this sm-ingest" "$(ingest "$NEW")" "200 "
check "the days ahead made again, each over both shards" \
	"$(qc "SELECT count(*) >= 2, bool_and((SELECT count(*) FROM pg_inherits j WHERE j.inhparent = i.inhrelid) = 2)
		FROM pg_inherits i WHERE i.inhparent = 'event_chunks'::regclass")" "t|t"
check "all the events, read through the main database" "$(qc 'SELECT sum(n_events) FROM streams')|$(qc 'SELECT count(*) FROM events')" "1200000|1200000"
R=$(env -u PGPASSWORD "$NEW/bin/sm-miner" --db "$MAIN" run --quiet --app shardapp --threshold-fraction 0.01 2>"$T/run.err")
check "a mining run over all of them" "$(qc "SELECT status, counts->>'streams', counts->>'events_read' FROM runs WHERE id = ${R:-0}")" "done|400|1200000"
echo "$fails failed"
[ "$fails" = 0 ]
