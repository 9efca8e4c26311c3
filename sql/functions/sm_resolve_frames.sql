-- One of the schema's functions, defined here only: `sm-admin migrate` applies every file of
-- sql/functions/ (CREATE OR REPLACE) after the migrations, so a database made fresh and one
-- upgraded from any version end with the same definition (tests/integration/test_schema.sh).
--
-- sm_resolve_frames(bid): resolves the unresolved frames of build id bid from debug_symbols, then
-- recounts the statistics of every frame class that changed. Returns how many frames were resolved.
--
-- It holds the intern lock exclusively (as the collection of frames does): no batch is
-- written meanwhile, and the epoch it bumps makes every ingest worker map its next batch
-- again, so new batches count the aliases under their canonical frame (ingest/store.c).
-- Pending deltas are folded first (stat_deltas locked against a concurrent fold); then,
-- for the classes that changed, n(f) and n(g->f) are counted again from the events: a
-- stream holding two offsets of one function counts once. This scans the chunks' stack_ids once.
CREATE OR REPLACE FUNCTION sm_resolve_frames(bid text) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
	n integer;
	k integer[];
	mem integer[];
BEGIN
	PERFORM pg_advisory_xact_lock(hashtext('stackmine.intern'));
	CREATE TEMP TABLE sm_res ON COMMIT DROP AS
		SELECT a.frame_id, left(regexp_replace(f.name, '\+0x[0-9a-fA-F]+$', ''), 255) || '!' ||
		       left(s.name, 767) AS name
		FROM frame_addrs a JOIN frames f ON f.id = a.frame_id AND f.canon_id IS NULL
		CROSS JOIN LATERAL (SELECT d.addr, d.size, d.name FROM debug_symbols d
				    WHERE d.build_id = a.build_id AND d.addr <= a.addr
				    ORDER BY d.addr DESC LIMIT 1) s
		WHERE a.build_id = bid AND a.addr < s.addr + s.size AND f.name ~ '\+0x[0-9a-fA-F]+$';
	GET DIAGNOSTICS n = ROW_COUNT;
	IF n = 0 THEN
		DROP TABLE sm_res;
		RETURN 0;
	END IF;
	INSERT INTO frames (name) SELECT DISTINCT name FROM sm_res ORDER BY name ON CONFLICT (name) DO NOTHING;
	UPDATE frames f SET canon_id = c.id FROM sm_res r JOIN frames c ON c.name = r.name
		WHERE f.id = r.frame_id AND c.id <> f.id;
	SELECT array_agg(DISTINCT c.id) INTO k FROM sm_res r JOIN frames c ON c.name = r.name;
	SELECT array_agg(id) INTO mem FROM frames WHERE id = ANY (k) OR canon_id = ANY (k);
	UPDATE settings SET value = (value::bigint + 1)::text WHERE key = 'intern_epoch';
	-- every delta folded, none folding: the totals are complete before they are recounted
	LOCK TABLE stat_deltas IN EXCLUSIVE MODE;
	LOOP
		EXIT WHEN sm_fold_stats(10000) = 0;
	END LOOP;
	CREATE TEMP TABLE sm_res_ev ON COMMIT DROP AS
		SELECT DISTINCT (c.received_at AT TIME ZONE 'UTC')::date AS day, c.stream_ref, u.id AS stack_id
		FROM event_chunks c CROSS JOIN LATERAL unnest(c.stack_ids) AS u(id)
		WHERE u.id IN (SELECT id FROM stacks WHERE frame_ids && mem);
	DELETE FROM stat_frames WHERE frame_id = ANY (mem);
	INSERT INTO stat_frames (day, frame_id, n)
		SELECT v.day, coalesce(f.canon_id, f.id), count(DISTINCT v.stream_ref)
		FROM sm_res_ev v JOIN stacks s ON s.id = v.stack_id
		CROSS JOIN LATERAL unnest(s.frame_ids) AS u(fid) JOIN frames f ON f.id = u.fid
		WHERE u.fid = ANY (mem) GROUP BY 1, 2;
	DELETE FROM stat_calls WHERE caller = ANY (mem) OR callee = ANY (mem);
	INSERT INTO stat_calls (day, caller, callee, n)
		SELECT x.day, x.a, x.b, count(DISTINCT x.stream_ref) FROM (
			SELECT v.day, v.stream_ref, coalesce(fa.canon_id, fa.id) AS a, coalesce(fb.canon_id, fb.id) AS b
			FROM sm_res_ev v JOIN stacks s ON s.id = v.stack_id
			CROSS JOIN LATERAL generate_subscripts(s.frame_ids, 1) AS i
			JOIN frames fa ON fa.id = s.frame_ids[i - 1] JOIN frames fb ON fb.id = s.frame_ids[i]
			WHERE i > 1 AND (s.frame_ids[i - 1] = ANY (mem) OR s.frame_ids[i] = ANY (mem))) x
		GROUP BY 1, 2, 3;
	DROP TABLE sm_res;
	DROP TABLE sm_res_ev;
	RETURN n;
END $$;
