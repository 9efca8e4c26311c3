#!/usr/bin/env bash
# schema: every function of the schema has one definition (sql/functions/ for those that changed
# over the migrations), and a database made fresh ends with the same functions as one upgraded
# from an old version: tests/integration/data/schema-v006.sql (migrations 001 to 006 as they were
# released, with their own bodies of sm_apply_retention and sm_ensure_partitions) restored, then
# migrated. A program older than the schema puts back none of its older bodies.
. "$(dirname "$0")/../lib.sh"

# ---- one definition per function ----
defined() { grep -ho '^CREATE \(OR REPLACE \)\?FUNCTION [a-z_0-9]*' "$@" | awk '{print $NF}'; }
t_eq "no function is defined twice in sql/" \
	"$(defined "$SM_REPO"/sql/[0-9]*.sql "$SM_REPO"/sql/functions/*.sql | sort | uniq -d)" ""
bad=
for f in "$SM_REPO"/sql/functions/*.sql; do
	[ "$(defined "$f")" = "$(basename "$f" .sql)" ] || bad="$bad $(basename "$f")"
done
t_eq "each file of sql/functions/ defines the function it is named after, and only it" "$bad" ""

# ---- fresh and upgraded alike ----
fns() {
	pg_q "SELECT p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ') ' ||
	       md5(pg_get_functiondef(p.oid)) FROM pg_proc p WHERE p.pronamespace = 'public'::regnamespace
	       ORDER BY 1" "$@"
}
sm_admin migrate >/dev/null || t_bail "migrate"
fresh=$(fns)
target=$(pg_q "SELECT max(version) FROM schema_migrations")
t_match "the fresh database has the functions of sql/functions/" "$fresh" \
	$'sm_apply_retention\\(now_ts timestamp with time zone\\) .*\nsm_collect_interned\\(OUT stacks integer, OUT frames integer\\) .*\nsm_collect_interned_local\\(OUT stacks integer, OUT frames integer\\) .*\nsm_drop_event_partition.*sm_ensure_partitions\\(first_day date, ndays integer\\) .*sm_expire_fleet\\(cutoff timestamp with time zone\\) '

UP=${PGDATABASE}_up
createdb "$UP" || t_bail "createdb $UP"
t_cleanup "dropdb --if-exists '$UP'"
psql -X -q -v ON_ERROR_STOP=1 -d "$UP" -f "$SM_REPO/tests/integration/data/schema-v006.sql" >/dev/null ||
	t_bail "restore schema-v006.sql"
t_eq "the old database is at version 6, with its own sm_apply_retention" \
	"$(pg_q "SELECT max(version), (SELECT count(*) FROM pg_proc WHERE proname = 'sm_apply_retention')
	       FROM schema_migrations" -d "$UP")" "6|1"
old_body=$(pg_q "SELECT md5(pg_get_functiondef('sm_apply_retention'::regproc))" -d "$UP")
# a run of that version, its clusters of both kinds ranked within their kind only; two cost the same
pg_q "WITH r AS (INSERT INTO runs (status, params) VALUES ('done', '{\"app\": \"a\"}') RETURNING id),
	p AS (INSERT INTO patterns (run_id, kind, rank, frame_ids, cost_ns, events, streams, stack_ids)
	      SELECT id, 'w', 1, '{1}', 1, 1, 1, '{}' FROM r RETURNING id, run_id)
	INSERT INTO clusters (run_id, kind, total_cost_ns, streams, events, avg_cost_ns, rank_total_cost, rank_streams,
	                      rank_events, rank_avg_cost, medoid, common_frame_ids, members, alignment)
	SELECT p.run_id, v.k::\"char\", v.c, v.s, 1, 1, 1, 1, 1, 1, p.id, '{1}', ARRAY[p.id], '[]'
	FROM p, (VALUES (1, 'w', 1800, 3), (2, 'r', 4000, 1), (3, 'w', 4000, 2), (4, 'r', 600, 3)) v(o, k, c, s) ORDER BY v.o" \
	-d "$UP" >/dev/null || t_bail "clusters of version 6"
# stacks of that version, unique by their frames alone (029 keys them by a hash of the frames too)
pg_q "INSERT INTO stacks (frame_ids) VALUES ('{1,2,3}'), ('{1,2}'), ('{3,2,1}')" -d "$UP" >/dev/null ||
	t_bail "stacks of version 6"
# events of that version, a row each, on two days: a stream of 2,500 (seq with gaps) and one of 3
pg_q "SELECT sm_ensure_partitions((now() AT TIME ZONE 'UTC')::date - 3, 4);
	INSERT INTO events (stream_ref, received_at, seq, kind, tid, ts_ns, dur_ns, stack_id, readier_tid)
	SELECT 7, now() - interval '3 days', g * 2, CASE WHEN g % 4 = 0 THEN 'r' ELSE 'w' END, 100 + g % 9,
	       1000000000000 - g * 1000, g * 3, 1 + g % 3, CASE WHEN g % 4 = 0 THEN NULL ELSE g % 5 END
	FROM generate_series(0, 2499) g;
	INSERT INTO events VALUES (8, now(), 0, 'w', 5, 50, 2, 2, 0), (8, now(), 1, 'r', 5, 60, 1, 3, NULL),
	                          (8, now(), 2, 'w', -6, -70, 9223372036854775807, 1, 2147483647)" -d "$UP" >/dev/null ||
	t_bail "events of version 6"
old_events=$(pg_q "SELECT string_agg(concat_ws(':', stream_ref, received_at, kind, tid, ts_ns, dur_ns, stack_id,
	coalesce(readier_tid::text, '-')), ',' ORDER BY stream_ref, seq) FROM events" -d "$UP")
out=$(PGDATABASE=$UP sm_admin migrate 2>&1)
# counted, not subtracted: version numbers may leave gaps (two branches each taking a number)
nmig=$(pg_q "SELECT count(*) FROM schema_migrations WHERE version > 6")
t_eq "upgraded to the fresh version" "$out" "schema at version $target ($nmig migrations applied)"
up=$(fns -d "$UP")
t_eq "030: the events stored before it packed, read back through the view as they were, seq closed up" \
	"$(pg_q "SELECT string_agg(concat_ws(':', stream_ref, received_at, kind, tid, ts_ns, dur_ns, stack_id,
		coalesce(readier_tid::text, '-')), ',' ORDER BY stream_ref, seq),
		count(*) FILTER (WHERE seq <> x.n), count(*) FROM (SELECT e.*, row_number() OVER
		(PARTITION BY stream_ref ORDER BY seq) - 1 AS n FROM events e) x" -d "$UP")" "$old_events|0|2503"
t_eq "030: a record's bytes as common/evpack.h writes them (tests/unit/test_extract.c), and read back" \
	"$(pg_q "SELECT encode(sm_event_record('w', 286397204, 72623859790382856, -10, 2147483647, -2), 'hex');
		SELECT * FROM sm_event_unpack(sm_event_record('w', 286397204, 72623859790382856, -10, 2147483647, -2)
			|| sm_event_record('r', -1, -9223372036854775808, 9223372036854775807, 0, 5))")" \
	"0102030405060708fffffffffffffff6111213147ffffffffffffffe77
0|w|286397204|72623859790382856|-10|2147483647|-2
1|r|-1|-9223372036854775808|9223372036854775807|0|5"
t_eq "030: in chunks of 1,024 in day partitions of event_chunks, the rows' partitions gone" \
	"$(pg_q "SELECT string_agg(concat_ws(':', stream_ref, first_seq, length(data) / 29, stack_ids::text,
		tableoid::regclass = ('event_chunks_p' || to_char(received_at AT TIME ZONE 'UTC', 'YYYYMMDD'))::regclass), ' '
		ORDER BY stream_ref, first_seq) FROM event_chunks" -d "$UP")|$(pg_q "SELECT count(*) FROM pg_class
		WHERE relname ~ '^events_' OR relname = 'events_unpacked'" -d "$UP")" \
	"7:0:1024:{1,2,3}:t 7:1024:1024:{1,2,3}:t 7:2048:452:{1,2,3}:t 8:0:3:{1,2,3}:t|0"

t_eq "upgraded from version 6, it has the same functions as the fresh one, body for body" "$up" "$fresh"
# the tables' constraints alike (the day partitions' aside: the upgraded one has days), and the stacks' as 029 made them
cons() { pg_q "SELECT string_agg(conrelid::regclass || ' ' || conname || ' ' || pg_get_constraintdef(oid), E'\\n'
	ORDER BY conrelid::regclass::text, conname) FROM pg_constraint WHERE connamespace = 'public'::regnamespace
	AND NOT (SELECT relispartition FROM pg_class c WHERE c.oid = conrelid)" "$@"; }
t_eq "upgraded from version 6, it has the same constraints as the fresh one" "$(cons -d "$UP")" "$(cons)"
t_match "029: stacks unique by (hash, frame_ids)" "$(cons)" \
	$'\nstacks stacks_hash_frame_ids_key UNIQUE \\(hash, frame_ids\\)\n'
t_eq "029: the stacks stored before it hashed by the server, as new ones are" \
	"$(pg_q "INSERT INTO stacks (frame_ids) VALUES ('{2,1}');
		SELECT count(*), count(*) FILTER (WHERE hash = hash_array_extended(frame_ids, 0)),
		count(DISTINCT hash) FROM stacks" -d "$UP")" "4|4|4"
t_match "029: the same frames again are refused" \
	"$(pg_q "INSERT INTO stacks (frame_ids) VALUES ('{3,2,1}')" -d "$UP" 2>&1)" \
	'duplicate key value violates unique constraint "stacks_hash_frame_ids_key"'
t_eq "(its sm_apply_retention changed on the way)" \
	"$([ "$(pg_q "SELECT md5(pg_get_functiondef('sm_apply_retention'::regproc))" -d "$UP")" != "$old_body" ] &&
		echo changed)" changed
# ranks among all the run's clusters (by total cost, by streams), ties by id, as the pages order them
ranks() { pg_q "SELECT string_agg(run_rank_total_cost || ':' || run_rank_streams || ':' ||
	coalesce(run_rank_excess_cost::text, '-'), ' ' ORDER BY id) FROM clusters" -d "$UP"; }
t_eq "025: the clusters of the runs before it ranked among all their run's clusters" "$(ranks)" "3:1:- 1:4:- 2:3:- 4:2:-"
pg_q "UPDATE clusters SET run_rank_total_cost = NULL, run_rank_streams = NULL" -d "$UP" >/dev/null
pg_q "SELECT sm_rank_clusters(run_id) FROM clusters LIMIT 1" -d "$UP" >/dev/null
t_eq "sm_rank_clusters(): the same ranks" "$(ranks)" "3:1:- 1:4:- 2:3:- 4:2:-"

# ---- a program older than the schema ----
# (the schema one version ahead of this program, a function body of that version)
pg_q "INSERT INTO schema_migrations (version, name) VALUES ($((target + 1)), 'from_the_future');
      CREATE OR REPLACE FUNCTION sm_expire_fleet(cutoff timestamptz) RETURNS void LANGUAGE sql AS
      \$\$ DELETE FROM agent_procs WHERE last_seen < cutoff - interval '1 day' \$\$" -d "$UP" >/dev/null
newer=$(pg_q "SELECT md5(pg_get_functiondef('sm_expire_fleet'::regproc))" -d "$UP")
out=$(PGDATABASE=$UP sm_admin migrate 2>&1)
t_eq "migrate by an older program applies nothing" "$out" "schema at version $((target + 1)) (0 migrations applied)"
t_eq "and leaves the newer version's function bodies alone" \
	"$(pg_q "SELECT md5(pg_get_functiondef('sm_expire_fleet'::regproc))" -d "$UP")" "$newer"

t_done
