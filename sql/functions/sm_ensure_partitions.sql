-- One of the schema's functions, defined here only: `sm-admin migrate` applies every file of
-- sql/functions/ (CREATE OR REPLACE) after the migrations, so a database made fresh and one
-- upgraded from any version end with the same definition (tests/integration/test_schema.sh).
--
-- sm_ensure_partitions(first_day, ndays): the daily event partitions for
-- [first_day, first_day + ndays), each hash-partitioned over the shards when there are any (a
-- foreign table per shard, its table there made through dblink; 64 rows a fetch and an insert,
-- a row being a chunk of up to 1,024 events). DDL cannot take parameters:
-- format() with %I and %L quotes every name. Returns how many were created.
CREATE OR REPLACE FUNCTION sm_ensure_partitions(first_day date, ndays integer) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
	d date;
	pname text;
	created integer := 0;
	nshards integer;
	remainder integer;
	s record;
BEGIN
	PERFORM pg_advisory_xact_lock(hashtext('stackmine.partitions'));
	SELECT count(*) INTO nshards FROM shards;
	FOR i IN 0 .. ndays - 1 LOOP
		d := first_day + i;
		pname := 'event_chunks_p' || to_char(d, 'YYYYMMDD');
		CONTINUE WHEN to_regclass(pname) IS NOT NULL;
		IF nshards = 0 THEN
			EXECUTE format('CREATE TABLE %I PARTITION OF event_chunks FOR VALUES FROM (%L) TO (%L)',
				pname, d::timestamp AT TIME ZONE 'UTC', (d + 1)::timestamp AT TIME ZONE 'UTC');
		ELSE
			EXECUTE format('CREATE TABLE %I PARTITION OF event_chunks FOR VALUES FROM (%L) TO (%L)'
				' PARTITION BY HASH (stream_ref)',
				pname, d::timestamp AT TIME ZONE 'UTC', (d + 1)::timestamp AT TIME ZONE 'UTC');
			remainder := 0;
			FOR s IN SELECT id, server FROM shards ORDER BY id LOOP
				PERFORM dblink_exec(s.server, sm_shard_table_sql(pname));
				EXECUTE format('CREATE FOREIGN TABLE %I PARTITION OF %I'
					' FOR VALUES WITH (MODULUS %s, REMAINDER %s) SERVER %I'
					' OPTIONS (schema_name %L, table_name %L, fetch_size %L, batch_size %L)',
					pname || '_s' || s.id, pname, nshards, remainder, s.server, 'stackmine_events', pname,
					'64', '64');
				remainder := remainder + 1;
			END LOOP;
		END IF;
		created := created + 1;
	END LOOP;
	RETURN created;
END $$;
