-- 030_event_chunks: the events stored packed, up to 1,024 consecutive events of a stream a row
-- (docs/scaling.md, "Packed events"; the record layout in common/evpack.h). A row an event cost
-- PostgreSQL a tuple header, an index entry and the parse of nine fields an event: in the paper's
-- study it took 3.7 µs of the server's CPU an event to store and most of a mining run to read.
-- A chunk is one tuple, one index entry and one lz4-compressed datum for 1,024 of them.
--
-- event_chunks is partitioned by day of arrival as events was (sm_ensure_partitions(), retention,
-- the shards of 018: day partitions event_chunks_pYYYYMMDD). stack_ids holds the chunk's distinct
-- stacks, sorted, for the stacks' collection (sm_collect_interned_local()). The view events
-- unpacks the chunks into the rows of before, for SQL that reads events (operators' queries, the
-- tests); the programs read the chunks themselves.
--
-- The days already stored are packed here (below). seq becomes the position in the stream's
-- chunks: a stream whose seqs had gaps gets them closed up, in order.
CREATE TABLE event_chunks (
	stream_ref bigint NOT NULL,
	received_at timestamptz NOT NULL,
	first_seq integer NOT NULL CHECK (first_seq >= 0),
	stack_ids integer[] NOT NULL,
	data bytea COMPRESSION lz4 NOT NULL CHECK (length(data) BETWEEN 29 AND 29 * 1024 AND length(data) % 29 = 0)
) PARTITION BY RANGE (received_at);
CREATE INDEX event_chunks_stream ON event_chunks (stream_ref);

-- One event as a record of a chunk (common/evpack.h).
CREATE FUNCTION sm_event_record(kind "char", tid integer, ts_ns bigint, dur_ns bigint, stack_id integer,
				readier_tid integer) RETURNS bytea
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
	SELECT int8send(ts_ns) || int8send(dur_ns) || int4send(tid) || int4send(stack_id)
		|| int4send(coalesce(readier_tid, 0)) || CASE kind WHEN 'w' THEN '\x77'::bytea ELSE '\x72'::bytea END
$$;

-- The records of a chunk's data, i from 0.
CREATE FUNCTION sm_event_unpack(data bytea) RETURNS TABLE (i integer, kind "char", tid integer, ts_ns bigint,
	dur_ns bigint, stack_id integer, readier_tid integer)
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
	-- decompressed once (a compressed datum would be decompressed again by every substring)
	d bytea := data || ''::bytea;
BEGIN
	-- a kind neither 'w' nor 'r' (a damaged record) is NULL
	RETURN QUERY SELECT g, CASE get_byte(d, g * 29 + 28) WHEN 119 THEN 'w'::"char" WHEN 114 THEN 'r'::"char" END,
		('x' || encode(substring(d FROM g * 29 + 17 FOR 4), 'hex'))::bit(32)::integer,
		('x' || encode(substring(d FROM g * 29 + 1 FOR 8), 'hex'))::bit(64)::bigint,
		('x' || encode(substring(d FROM g * 29 + 9 FOR 8), 'hex'))::bit(64)::bigint,
		('x' || encode(substring(d FROM g * 29 + 21 FOR 4), 'hex'))::bit(32)::integer,
		('x' || encode(substring(d FROM g * 29 + 25 FOR 4), 'hex'))::bit(32)::integer
		FROM generate_series(0, length(d) / 29 - 1) g;
END $$;

-- The events of before, one row each. readier_tid is NULL for run events, as it was stored.
ALTER TABLE events RENAME TO events_unpacked;
CREATE VIEW events AS
	SELECT c.stream_ref, c.received_at, c.first_seq + u.i AS seq, u.kind, u.tid, u.ts_ns, u.dur_ns, u.stack_id,
		CASE WHEN u.kind = 'w' THEN u.readier_tid END AS readier_tid
	FROM event_chunks c CROSS JOIN LATERAL sm_event_unpack(c.data) u;

-- sm_shard_table_sql() and sm_shard_add(), which name the chunks' table and partitions now: in
-- sql/functions/ (applied after every migration).

-- The days stored so far, packed: a chunk holds the events of seq 1024 k .. 1024 k + 1023 of a
-- stream's rows in seq order (received_at is the stream's: one batch stored all its events). A day
-- with no event is dropped, for sm_ensure_partitions() to make again (over the shards, if there are
-- any). A day on shards is packed onto the shards there are now, as sm_ensure_partitions() would
-- spread a new day (the table there made by the statements of sm_shard_table_sql(), written out
-- here: the function's new body is applied after the migrations). Everything in the migration's
-- one transaction: ingest and the miner wait for it.
DO $$
DECLARE
	r record;
	s record;
	d date;
	pname text;
	nshards integer;
	remainder integer;
BEGIN
	FOR r IN SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		 WHERE i.inhparent = 'events_unpacked'::regclass AND c.relname ~ '^events_p[0-9]{8}$'
		 ORDER BY c.relname LOOP
		IF sm_event_partition_empty(r.relname) THEN
			PERFORM sm_drop_event_partition(r.relname);
			CONTINUE;
		END IF;
		d := to_date(substr(r.relname, 9), 'YYYYMMDD');
		pname := 'event_chunks_p' || to_char(d, 'YYYYMMDD');
		SELECT count(*) INTO nshards FROM shards;
		IF NOT EXISTS (SELECT 1 FROM sm_event_partition_shards(r.relname)) OR nshards = 0 THEN
			EXECUTE format('CREATE TABLE %I PARTITION OF event_chunks FOR VALUES FROM (%L) TO (%L)',
				pname, d::timestamp AT TIME ZONE 'UTC', (d + 1)::timestamp AT TIME ZONE 'UTC');
		ELSE
			EXECUTE format('CREATE TABLE %I PARTITION OF event_chunks FOR VALUES FROM (%L) TO (%L)'
				' PARTITION BY HASH (stream_ref)',
				pname, d::timestamp AT TIME ZONE 'UTC', (d + 1)::timestamp AT TIME ZONE 'UTC');
			remainder := 0;
			FOR s IN SELECT id, server FROM shards ORDER BY id LOOP
				PERFORM dblink_exec(s.server, sm_shard_sql(format('CREATE TABLE IF NOT EXISTS stackmine_events.%I'
					' (stream_ref bigint NOT NULL, received_at timestamptz NOT NULL,'
					' first_seq integer NOT NULL CHECK (first_seq >= 0), stack_ids integer[] NOT NULL,'
					' data bytea COMPRESSION lz4 NOT NULL'
					' CHECK (length(data) BETWEEN 29 AND 29 * 1024 AND length(data) %% 29 = 0));'
					' CREATE INDEX IF NOT EXISTS %I ON stackmine_events.%I (stream_ref)',
					pname, pname || '_stream', pname)));
				EXECUTE format('CREATE FOREIGN TABLE %I PARTITION OF %I'
					' FOR VALUES WITH (MODULUS %s, REMAINDER %s) SERVER %I'
					' OPTIONS (schema_name %L, table_name %L, fetch_size %L, batch_size %L)',
					pname || '_s' || s.id, pname, nshards, remainder, s.server, 'stackmine_events', pname,
					'64', '64');
				remainder := remainder + 1;
			END LOOP;
		END IF;
		EXECUTE format('INSERT INTO event_chunks (stream_ref, received_at, first_seq, stack_ids, data)'
			' SELECT stream_ref, min(received_at), (k * 1024)::integer,'
			'  array_agg(DISTINCT stack_id ORDER BY stack_id),'
			'  string_agg(sm_event_record(kind, tid, ts_ns, dur_ns, stack_id, readier_tid), ''''::bytea ORDER BY seq)'
			' FROM (SELECT e.*, (row_number() OVER (PARTITION BY stream_ref ORDER BY seq) - 1) / 1024 AS k'
			'  FROM %I e) x GROUP BY stream_ref, k', r.relname);
		PERFORM sm_drop_event_partition(r.relname);
	END LOOP;
	FOR r IN SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		 WHERE i.inhparent = 'events_unpacked'::regclass LOOP
		RAISE EXCEPTION 'migration 030: % is a partition of events but not a day''s (events_pYYYYMMDD):'
			' rename it to its day, or move its rows into one, and migrate again', r.relname;
	END LOOP;
END $$;
DROP TABLE events_unpacked;
