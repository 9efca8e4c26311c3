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

-- sm_shard_table_sql(): defined in sql/functions/sm_shard_table_sql.sql (applied after every migration).

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

-- sm_shard_add(): defined in sql/functions/sm_shard_add.sql (applied after every migration).

-- sm_collect_interned(): while there are shards, collects nothing; else sm_collect_interned_local(),
-- the collection of 007: both in sql/functions/ (applied after every migration).
