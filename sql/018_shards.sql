-- 018_shards: events held by other PostgreSQL servers (shards), with PostgreSQL's
-- own partitioning and postgres_fdw (docs/scaling.md, "Sharding the events").
--
-- Without shards nothing changes. With shards (sm-admin shard add), every day
-- partition created from then on is itself partitioned by hash of stream_ref,
-- one foreign partition per shard; the rows live on the shard in the schema
-- stackmine_events, in a table of the same name as the day partition
-- (events_pYYYYMMDD), made there through dblink when the day partition is made
-- here. Retention drops a day here first and records its shards' tables in
-- shard_drops, which sm_shard_drops() drops on the shards afterwards, in
-- transactions of their own. A day keeps the shards it was made with: adding a
-- shard spreads the days created afterwards (and the empty ones) over one more
-- server.
--
-- Needs, created once by a superuser: CREATE EXTENSION postgres_fdw; CREATE
-- EXTENSION dblink; GRANT USAGE ON FOREIGN DATA WRAPPER postgres_fdw TO <the
-- stackmine role>. Installations without shards need neither.
CREATE TABLE shards (
	id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	server text NOT NULL UNIQUE,        -- its postgres_fdw foreign server
	added_at timestamptz NOT NULL DEFAULT now()
);

-- Tables on the shards whose day retention dropped here, to drop there.
CREATE TABLE shard_drops (
	server text NOT NULL,
	remote text NOT NULL,
	PRIMARY KEY (server, remote)
);

-- What every statement sent to a shard through dblink starts with: dblink waits for its
-- answer where a cancel cannot reach it, so the shard itself must give up.
CREATE FUNCTION sm_shard_sql(body text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
	SELECT 'SET lock_timeout = ''5s''; SET statement_timeout = ''60s''; ' || body
$$;

-- The statements that make one day's table on a shard (events' columns, and the index
-- the miner reads through).
CREATE FUNCTION sm_shard_table_sql(pname text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
	SELECT sm_shard_sql(format('CREATE TABLE IF NOT EXISTS stackmine_events.%I (stream_ref bigint NOT NULL,'
		' received_at timestamptz NOT NULL, seq integer NOT NULL,'
		' kind "char" NOT NULL CHECK (kind IN (''r'', ''w'')), tid integer NOT NULL,'
		' ts_ns bigint NOT NULL, dur_ns bigint NOT NULL CHECK (dur_ns >= 0),'
		' stack_id integer NOT NULL, readier_tid integer);'
		' CREATE INDEX IF NOT EXISTS %I ON stackmine_events.%I (stream_ref)', pname, pname || '_stream', pname))
$$;

-- sm_ensure_partitions(): defined in sql/functions/sm_ensure_partitions.sql (applied after every migration).

-- The shards a day partition's rows are on: each foreign server and the table there.
CREATE FUNCTION sm_event_partition_shards(pname text) RETURNS TABLE (srvname name, remote text)
LANGUAGE sql STABLE AS $$
	SELECT s.srvname, (SELECT substr(o, 12) FROM unnest(t.ftoptions) o WHERE o LIKE 'table_name=%')
	FROM pg_inherits i JOIN pg_foreign_table t ON t.ftrelid = i.inhrelid
	JOIN pg_foreign_server s ON s.oid = t.ftserver
	WHERE i.inhparent = to_regclass(pname)
$$;

-- Drops one day partition here; its tables on the shards are recorded in shard_drops for
-- sm_shard_drops() to drop once this transaction has committed (a shard's table never goes
-- while a partition here still points at it).
CREATE FUNCTION sm_drop_event_partition(pname text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO shard_drops (server, remote) SELECT srvname, remote FROM sm_event_partition_shards(pname)
		ON CONFLICT DO NOTHING;
	EXECUTE format('DROP TABLE %I', pname);
END $$;

-- Drops on the shards the tables recorded in shard_drops, each in a transaction of its own
-- (called on its own, after retention). A shard that cannot be reached keeps its rows in
-- shard_drops for the next call. Returns how many tables were dropped.
CREATE FUNCTION sm_shard_drops() RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
	d record;
	n integer := 0;
BEGIN
	FOR d IN SELECT server, remote FROM shard_drops ORDER BY server, remote LOOP
		BEGIN
			PERFORM dblink_exec(d.server, sm_shard_sql(format('DROP TABLE IF EXISTS stackmine_events.%I',
				d.remote)));
			DELETE FROM shard_drops WHERE server = d.server AND remote = d.remote;
			n := n + 1;
		EXCEPTION WHEN OTHERS THEN
			RAISE WARNING 'shard %: cannot drop %: %', d.server, d.remote, SQLERRM;
		END;
	END LOOP;
	RETURN n;
END $$;

-- Whether a day partition holds no event. A sharded day's tables are looked at through dblink,
-- not through its foreign partitions: postgres_fdw would keep the remote transaction (and its
-- lock on the table) open to the end of this one, and a drop through dblink would wait for it.
CREATE FUNCTION sm_event_partition_empty(pname text) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
	f record;
	found boolean;
BEGIN
	FOR f IN SELECT * FROM sm_event_partition_shards(pname) LOOP
		SELECT x INTO found FROM dblink(f.srvname,
			sm_shard_sql(format('SELECT EXISTS (SELECT 1 FROM stackmine_events.%I)', f.remote)))
			AS t(x boolean);
		IF found THEN
			RETURN false;
		END IF;
	END LOOP;
	IF EXISTS (SELECT 1 FROM pg_class WHERE oid = to_regclass(pname) AND relkind = 'r') THEN
		EXECUTE format('SELECT NOT EXISTS (SELECT 1 FROM %I)', pname) INTO found;
		RETURN found;
	END IF;
	RETURN true;
END $$;

-- sm_apply_retention(): defined in sql/functions/sm_apply_retention.sql (applied after every migration).

-- Adds a shard: a postgres_fdw server named srv with the libpq options opts (name, value,
-- name, value, ...) and TCP keepalives, this role's user mapping (usr, pw), a check that it
-- answers and the schema stackmine_events there; then every day partition from today on that
-- holds no event yet is dropped here, for sm_ensure_partitions() to make it again over all the
-- shards (the shards' empty tables are used again). DDL takes no parameters: format() quotes
-- every name and value. Returns the shard's id.
CREATE FUNCTION sm_shard_add(srv text, opts text[], usr text, pw text) RETURNS integer
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
	IF NOT pg_has_role(current_user, (SELECT relowner FROM pg_class WHERE oid = 'events'::regclass), 'USAGE') THEN
		RAISE EXCEPTION 'shards are added by the role that owns the tables (%), not by %',
			(SELECT pg_get_userbyid(relowner) FROM pg_class WHERE oid = 'events'::regclass), current_user;
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
	-- events first, then a partition: the order ingest takes them in (no deadlock with it)
	SET LOCAL lock_timeout = '10s';
	PERFORM pg_advisory_xact_lock(hashtext('stackmine.partitions'));
	LOCK TABLE ONLY events IN ACCESS EXCLUSIVE MODE;
	FOR r IN SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		 WHERE i.inhparent = 'events'::regclass AND c.relname ~ '^events_p[0-9]{8}$'
		   AND to_date(substr(c.relname, 9), 'YYYYMMDD') >= (now() AT TIME ZONE 'UTC')::date LOOP
		IF sm_event_partition_empty(r.relname) THEN
			EXECUTE format('DROP TABLE %I', r.relname);
		END IF;
	END LOOP;
	RETURN sid;
END $$;

-- sm_collect_interned(): while there are shards, collects nothing; else sm_collect_interned_local(),
-- the collection of 007: both in sql/functions/ (applied after every migration).
