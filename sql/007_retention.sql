-- 007_retention: results expire too, and frames and stacks nothing refers to
-- any more are collected.
--
-- Runs (with their run_stacks, patterns and clusters) finished longer ago than
-- run_retention_days are deleted by sm_apply_retention(), like streams older
-- than retention_days. A signature keeps all it holds (names of frames, status,
-- note): it refers to frames by name, not id. It remembers the cluster and the
-- run it came from (from_cluster, from_run) as plain numbers, which outlive
-- them: the pages say "expired" where they are gone.
INSERT INTO settings (key, value) VALUES ('run_retention_days', '90'), ('intern_epoch', '0')
	ON CONFLICT (key) DO NOTHING;

ALTER TABLE signatures DROP CONSTRAINT IF EXISTS signatures_from_cluster_fkey;
ALTER TABLE signatures ADD COLUMN from_run bigint;
UPDATE signatures g SET from_run = c.run_id FROM clusters c WHERE c.id = g.from_cluster;

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
	RETURN dropped;
END $$;

-- Collects the stacks no event, run or cluster refers to, then the frames no
-- stack, pattern, cluster or statistic refers to. Returns how many of each were
-- deleted.
--
-- Against concurrent ingest: ingest interns frames and stacks (and caches their
-- ids) before the transaction that writes the events, which takes the lock
-- 'stackmine.intern' shared and reads intern_epoch. The candidate stacks are
-- found first, without the lock (a scan of the events); then, holding the lock
-- exclusively (no batch in flight, none starting), the epoch is bumped (every
-- ingest worker forgets its cached ids and maps its batch again) and only the
-- candidates that nothing written since refers to are deleted: the events
-- checked again are those of transactions that were open when the scan began,
-- or began since. The frame step, under the lock, reads the stacks, patterns,
-- clusters and statistics (not the events): ingest waits for it.
CREATE FUNCTION sm_collect_interned(OUT stacks integer, OUT frames integer)
LANGUAGE plpgsql AS $$
DECLARE
	since timestamptz;
	max_stack integer;
BEGIN
	-- the oldest transaction open now (its events may be invisible to the scan below)
	SELECT least(clock_timestamp() - interval '10 minutes', min(xact_start)) INTO since
		FROM pg_stat_activity WHERE xact_start IS NOT NULL;
	SELECT coalesce(max(id), 0) INTO max_stack FROM stacks;
	CREATE TEMP TABLE sm_gc_stacks ON COMMIT DROP AS
		SELECT id FROM stacks WHERE id <= max_stack
		EXCEPT SELECT stack_id FROM events
		EXCEPT SELECT stack_id FROM run_stacks
		EXCEPT SELECT unnest(stack_ids) FROM patterns
		EXCEPT SELECT unnest(stack_ids) FROM clusters;
	PERFORM pg_advisory_xact_lock(hashtext('stackmine.intern'));
	UPDATE settings SET value = (value::bigint + 1)::text WHERE key = 'intern_epoch';
	DELETE FROM stacks s USING sm_gc_stacks g WHERE s.id = g.id
		AND NOT EXISTS (SELECT 1 FROM events e WHERE e.stack_id = s.id AND e.received_at >= since)
		AND NOT EXISTS (SELECT 1 FROM run_stacks r WHERE r.stack_id = s.id)
		AND NOT EXISTS (SELECT 1 FROM patterns p WHERE s.id = ANY (p.stack_ids))
		AND NOT EXISTS (SELECT 1 FROM clusters c WHERE s.id = ANY (c.stack_ids));
	GET DIAGNOSTICS stacks = ROW_COUNT;
	DELETE FROM frames f WHERE f.id IN (
		SELECT id FROM frames
		EXCEPT SELECT unnest(frame_ids) FROM stacks
		EXCEPT SELECT unnest(frame_ids) FROM patterns
		EXCEPT SELECT unnest(common_frame_ids) FROM clusters
		EXCEPT SELECT frame_id FROM stat_frames
		EXCEPT SELECT caller FROM stat_calls
		EXCEPT SELECT callee FROM stat_calls
		EXCEPT SELECT unnest(frame_ids) FROM stat_deltas
		EXCEPT SELECT unnest(callers) FROM stat_deltas
		EXCEPT SELECT unnest(callees) FROM stat_deltas);
	GET DIAGNOSTICS frames = ROW_COUNT;
END $$;
