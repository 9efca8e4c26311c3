-- One of the schema's functions, defined here only: `sm-admin migrate` applies every file of
-- sql/functions/ (CREATE OR REPLACE) after the migrations, so a database made fresh and one
-- upgraded from any version end with the same definition (tests/integration/test_schema.sh).
--
-- sm_shard_add(srv, opts, usr, pw): adds a shard: a postgres_fdw server named srv with the libpq
-- options opts (name, value, name, value, ...) and TCP keepalives, this role's user mapping (usr,
-- pw), a check that it answers and the schema stackmine_events there; then every day partition of
-- event_chunks from today on that holds no event yet is dropped here, for sm_ensure_partitions() to
-- make it again over all the shards (the shards' empty tables are used again). DDL takes no
-- parameters: format() quotes every name and value. Returns the shard's id.
CREATE OR REPLACE FUNCTION sm_shard_add(srv text, opts text[], usr text, pw text) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
	sid integer;
	o text := '';
	r record;
BEGIN
	IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'postgres_fdw')
	   OR NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'dblink') THEN
		RAISE EXCEPTION 'shards need the extensions postgres_fdw and dblink in this database'
			USING HINT = format('as a superuser: CREATE EXTENSION postgres_fdw; CREATE EXTENSION dblink;'
				' GRANT USAGE ON FOREIGN DATA WRAPPER postgres_fdw TO %I', current_user);
	END IF;
	-- the user mapping is this role's: the programs' role, which owns the tables
	IF NOT pg_has_role(current_user, (SELECT relowner FROM pg_class WHERE oid = 'event_chunks'::regclass), 'USAGE') THEN
		RAISE EXCEPTION 'shards are added by the role that owns the tables (%), not by %',
			(SELECT pg_get_userbyid(relowner) FROM pg_class WHERE oid = 'event_chunks'::regclass), current_user;
	END IF;
	IF EXISTS (SELECT 1 FROM shards WHERE server = srv) THEN
		RAISE EXCEPTION 'shard %: already added', srv;
	END IF;
	FOR i IN 1 .. coalesce(array_length(opts, 1), 0) / 2 LOOP
		o := o || format('%I %L, ', opts[2 * i - 1], opts[2 * i]);
	END LOOP;
	EXECUTE format('CREATE SERVER %I FOREIGN DATA WRAPPER postgres_fdw OPTIONS (%s'
		' keepalives_idle %L, keepalives_interval %L, keepalives_count %L, tcp_user_timeout %L,'
		' async_capable %L, fetch_size %L, batch_size %L)',
		srv, o, '5', '2', '3', '30000', 'true', '10000', '1000');
	EXECUTE format('CREATE USER MAPPING FOR CURRENT_USER SERVER %I OPTIONS (user %L, password %L)',
		srv, usr, pw);
	PERFORM dblink_exec(srv, sm_shard_sql('CREATE SCHEMA IF NOT EXISTS stackmine_events'));
	INSERT INTO shards (server) VALUES (srv) RETURNING id INTO sid;
	-- the events' table first, then a partition: the order ingest takes them in (no deadlock with it)
	SET LOCAL lock_timeout = '10s';
	PERFORM pg_advisory_xact_lock(hashtext('stackmine.partitions'));
	LOCK TABLE ONLY event_chunks IN ACCESS EXCLUSIVE MODE;
	FOR r IN SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		 WHERE i.inhparent = 'event_chunks'::regclass AND c.relname ~ '^event_chunks_p[0-9]{8}$'
		   AND to_date(substr(c.relname, 15), 'YYYYMMDD') >= (now() AT TIME ZONE 'UTC')::date LOOP
		IF sm_event_partition_empty(r.relname) THEN
			EXECUTE format('DROP TABLE %I', r.relname);
		END IF;
	END LOOP;
	RETURN sid;
END $$;
