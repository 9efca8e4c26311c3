-- 010_profiles: performance profiles learnt on many hosts (docs/fleet.md,
-- "Thresholds learnt by the fleet"). Each training process uploads what it
-- learnt itself (POST /api/v1/profiles to sm-ingest), replacing its previous
-- upload; the merged profile of a build pools every process's statistics and
-- is made again, when asked for, once an upload made it stale.
CREATE TABLE profile_uploads (
	build_id text NOT NULL,
	host text NOT NULL,
	pid integer NOT NULL,
	started_at timestamptz NOT NULL,
	exe text NOT NULL DEFAULT '',
	units bigint NOT NULL,
	profile text NOT NULL,               -- the profile file format (docs/guard.md)
	uploaded_at timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (build_id, host, pid, started_at)
);
CREATE INDEX profile_uploads_time ON profile_uploads (uploaded_at);

CREATE TABLE profiles_merged (
	build_id text PRIMARY KEY,
	exe text NOT NULL DEFAULT '',
	profile text NOT NULL,
	hosts integer NOT NULL,
	processes integer NOT NULL,
	units bigint NOT NULL,
	summary jsonb NOT NULL,              -- loops, unit types, thresholds: for the Fleet page
	merge_ms double precision NOT NULL,
	merged_at timestamptz NOT NULL DEFAULT now(),
	stale boolean NOT NULL DEFAULT false
);

-- sm_expire_fleet(): defined in sql/functions/sm_expire_fleet.sql (applied after every migration).
