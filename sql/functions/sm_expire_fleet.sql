-- One of the schema's functions, defined here only: `sm-admin migrate` applies every file of
-- sql/functions/ (CREATE OR REPLACE) after the migrations, so a database made fresh and one
-- upgraded from any version end with the same definition (tests/integration/test_schema.sh).
--
-- sm_expire_fleet(cutoff): what agents reported expires with the events (retention_days,
-- through sm_apply_retention()): a process silent since the cutoff, an hour before it, a profile
-- upload; a merged profile stays while any of its uploads does.
CREATE OR REPLACE FUNCTION sm_expire_fleet(cutoff timestamptz) RETURNS void
LANGUAGE sql AS $$
	DELETE FROM agent_procs WHERE last_seen < cutoff;
	DELETE FROM agent_hours WHERE hour < cutoff;
	DELETE FROM profile_uploads WHERE uploaded_at < cutoff;
	DELETE FROM profiles_merged m WHERE NOT EXISTS (SELECT 1 FROM profile_uploads u WHERE u.build_id = m.build_id);
$$;
