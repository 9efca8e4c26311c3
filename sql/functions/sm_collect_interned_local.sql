-- One of the schema's functions, defined here only: `sm-admin migrate` applies every file of
-- sql/functions/ (CREATE OR REPLACE) after the migrations, so a database made fresh and one
-- upgraded from any version end with the same definition (tests/integration/test_schema.sh).
--
-- sm_collect_interned_local(): collects the stacks no event, run or cluster refers to, then the
-- frames no stack, pattern, cluster or statistic refers to (keeping a canonical frame that only its
-- aliases refer to: the aliases among them go first). Returns how many of each were deleted.
--
-- Against concurrent ingest: ingest interns frames and stacks (and caches their ids) before the
-- transaction that writes the events, which takes the lock 'stackmine.intern' shared and reads
-- intern_epoch. The candidate stacks are found first, without the lock (a scan of the chunks' stack_ids);
-- then, holding the lock exclusively (no batch in flight, none starting), the epoch is bumped
-- (every ingest worker forgets its cached ids and maps its batch again) and only the candidates
-- that nothing written since refers to are deleted: the events checked again are those of
-- transactions that were open when the scan began, or began since. The frame step, under the
-- lock, reads the stacks, patterns, clusters and statistics (not the events): ingest waits for it.
CREATE OR REPLACE FUNCTION sm_collect_interned_local(OUT stacks integer, OUT frames integer)
LANGUAGE plpgsql AS $$
DECLARE
	since timestamptz;
	max_stack integer;
	canon integer;
BEGIN
	SELECT least(clock_timestamp() - interval '10 minutes', min(xact_start)) INTO since
		FROM pg_stat_activity WHERE xact_start IS NOT NULL;
	SELECT coalesce(max(id), 0) INTO max_stack FROM stacks;
	CREATE TEMP TABLE sm_gc_stacks ON COMMIT DROP AS
		SELECT id FROM stacks WHERE id <= max_stack
		EXCEPT SELECT unnest(stack_ids) FROM event_chunks
		EXCEPT SELECT stack_id FROM run_stacks
		EXCEPT SELECT unnest(stack_ids) FROM patterns
		EXCEPT SELECT unnest(stack_ids) FROM clusters;
	PERFORM pg_advisory_xact_lock(hashtext('stackmine.intern'));
	UPDATE settings SET value = (value::bigint + 1)::text WHERE key = 'intern_epoch';
	DELETE FROM stacks s USING sm_gc_stacks g WHERE s.id = g.id
		AND NOT EXISTS (SELECT 1 FROM event_chunks e CROSS JOIN LATERAL unnest(e.stack_ids) AS u(id)
				WHERE e.received_at >= since AND u.id = s.id)
		AND NOT EXISTS (SELECT 1 FROM run_stacks r WHERE r.stack_id = s.id)
		AND NOT EXISTS (SELECT 1 FROM patterns p WHERE s.id = ANY (p.stack_ids))
		AND NOT EXISTS (SELECT 1 FROM clusters c WHERE s.id = ANY (c.stack_ids));
	GET DIAGNOSTICS stacks = ROW_COUNT;
	-- what nothing refers to: the aliases among it first, then the canonical frames no alias keeps
	CREATE TEMP TABLE sm_gc_frames ON COMMIT DROP AS
		SELECT id FROM frames
		EXCEPT SELECT unnest(frame_ids) FROM stacks
		EXCEPT SELECT unnest(frame_ids) FROM patterns
		EXCEPT SELECT unnest(common_frame_ids) FROM clusters
		EXCEPT SELECT frame_id FROM stat_frames
		EXCEPT SELECT caller FROM stat_calls
		EXCEPT SELECT callee FROM stat_calls
		EXCEPT SELECT unnest(frame_ids) FROM stat_deltas
		EXCEPT SELECT unnest(callers) FROM stat_deltas
		EXCEPT SELECT unnest(callees) FROM stat_deltas;
	DELETE FROM frames f USING sm_gc_frames g WHERE f.id = g.id AND f.canon_id IS NOT NULL;
	GET DIAGNOSTICS frames = ROW_COUNT;
	DELETE FROM frames f USING sm_gc_frames g WHERE f.id = g.id
		AND NOT EXISTS (SELECT 1 FROM frames a WHERE a.canon_id = f.id);
	GET DIAGNOSTICS canon = ROW_COUNT;
	frames := frames + canon;
	DROP TABLE sm_gc_frames;
END $$;
