-- 009_fleet: what the guard agents report about themselves (POST
-- /api/v1/agents/report to sm-ingest, docs/wire-format.md): one row per guarded
-- process, its counters as last reported, and violations per host and hour.
CREATE TABLE agent_procs (
	host text NOT NULL,
	pid integer NOT NULL,
	started_at timestamptz NOT NULL,     -- with host and pid: one process
	exe text NOT NULL,
	build_id text NOT NULL DEFAULT '',
	mode text NOT NULL CHECK (mode IN ('train', 'guard', 'inert')),
	agent_version text NOT NULL,
	app text NOT NULL DEFAULT '',
	first_seen timestamptz NOT NULL DEFAULT now(),
	last_seen timestamptz NOT NULL DEFAULT now(),
	exited boolean NOT NULL DEFAULT false,
	units bigint NOT NULL DEFAULT 0,
	violations bigint NOT NULL DEFAULT 0,
	drops bigint NOT NULL DEFAULT 0,
	spool_backlog bigint NOT NULL DEFAULT 0,
	ship_errors bigint NOT NULL DEFAULT 0,
	PRIMARY KEY (host, pid, started_at)
);
CREATE INDEX agent_procs_seen ON agent_procs (last_seen DESC);

CREATE TABLE agent_hours (
	host text NOT NULL,
	hour timestamptz NOT NULL,
	units bigint NOT NULL DEFAULT 0,
	violations bigint NOT NULL DEFAULT 0,
	PRIMARY KEY (host, hour)
);

-- What agents reported expires with the events (retention_days): a process
-- silent since the cutoff, an hour before it. Later migrations add their
-- fleet tables here.
CREATE OR REPLACE FUNCTION sm_expire_fleet(cutoff timestamptz) RETURNS void
LANGUAGE sql AS $$
	DELETE FROM agent_procs WHERE last_seen < cutoff;
	DELETE FROM agent_hours WHERE hour < cutoff;
$$;

-- sm_apply_retention() as in 007, plus sm_expire_fleet().
CREATE OR REPLACE FUNCTION sm_apply_retention(now_ts timestamptz) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
	days integer;
	run_days integer;
	cutoff date;
	r record;
	dropped integer := 0;
BEGIN
	SELECT value::integer INTO run_days FROM settings WHERE key = 'run_retention_days';
	IF run_days > 0 THEN
		DELETE FROM runs WHERE status IN ('done', 'failed')
			AND coalesce(finished_at, created_at) < now_ts - make_interval(days => run_days);
	END IF;
	SELECT value::integer INTO days FROM settings WHERE key = 'retention_days';
	IF days IS NULL OR days <= 0 THEN
		RETURN 0;
	END IF;
	PERFORM pg_advisory_xact_lock(hashtext('stackmine.partitions'));
	cutoff := (now_ts AT TIME ZONE 'UTC')::date - days;
	FOR r IN SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		 WHERE i.inhparent = 'events'::regclass AND c.relname ~ '^events_p[0-9]{8}$'
		   AND to_date(substr(c.relname, 9), 'YYYYMMDD') < cutoff LOOP
		EXECUTE format('DROP TABLE %I', r.relname);
		dropped := dropped + 1;
	END LOOP;
	DELETE FROM streams WHERE received_at < cutoff::timestamp AT TIME ZONE 'UTC';
	DELETE FROM stat_deltas WHERE day < cutoff;
	DELETE FROM stat_streams WHERE day < cutoff;
	DELETE FROM stat_frames WHERE day < cutoff;
	DELETE FROM stat_calls WHERE day < cutoff;
	PERFORM sm_expire_fleet(cutoff::timestamp AT TIME ZONE 'UTC');
	RETURN dropped;
END $$;
