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

-- sm_expire_fleet(): defined in sql/functions/sm_expire_fleet.sql (applied after every migration).

-- sm_apply_retention(): defined in sql/functions/sm_apply_retention.sql (applied after every migration).
