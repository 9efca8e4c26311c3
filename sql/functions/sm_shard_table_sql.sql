-- One of the schema's functions, defined here only: `sm-admin migrate` applies every file of
-- sql/functions/ (CREATE OR REPLACE) after the migrations, so a database made fresh and one
-- upgraded from any version end with the same definition (tests/integration/test_schema.sh).
--
-- sm_shard_table_sql(pname): the statements that make one day's table on a shard (event_chunks'
-- columns, and the index the miner reads through), sent through dblink.
CREATE OR REPLACE FUNCTION sm_shard_table_sql(pname text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
	SELECT sm_shard_sql(format('CREATE TABLE IF NOT EXISTS stackmine_events.%I (stream_ref bigint NOT NULL,'
		' received_at timestamptz NOT NULL, first_seq integer NOT NULL CHECK (first_seq >= 0),'
		' stack_ids integer[] NOT NULL, data bytea COMPRESSION lz4 NOT NULL'
		' CHECK (length(data) BETWEEN 29 AND 29 * 1024 AND length(data) %% 29 = 0));'
		' CREATE INDEX IF NOT EXISTS %I ON stackmine_events.%I (stream_ref)', pname, pname || '_stream', pname))
$$;
