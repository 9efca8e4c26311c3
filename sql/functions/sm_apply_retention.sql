-- One of the schema's functions, defined here only: `sm-admin migrate` applies every file of
-- sql/functions/ (CREATE OR REPLACE) after the migrations, so a database made fresh and one
-- upgraded from any version end with the same definition (tests/integration/test_schema.sh).
--
-- sm_apply_retention(now): retention. Runs finished more than run_retention_days ago are deleted;
-- then everything received before the retention cutoff (retention_days, whole days, UTC): the
-- day partitions of the events (event_chunks, sm_drop_event_partition(), on the shards too), their streams, their
-- share of the frame statistics, and what agents reported (sm_expire_fleet()). Returns the number
-- of partitions dropped.
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
		 WHERE i.inhparent = 'event_chunks'::regclass AND c.relname ~ '^event_chunks_p[0-9]{8}$'
		   AND to_date(substr(c.relname, 15), 'YYYYMMDD') < cutoff LOOP
		PERFORM sm_drop_event_partition(r.relname);
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
