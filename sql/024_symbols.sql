-- 024_symbols: names for the frames agents could not name (docs/symbols.md).
--
-- An agent ships a frame it cannot name as `module+0xOFFSET` with the module's build id
-- (the stream's `modules`); ingest records each such frame's (build id, offset) in
-- frame_addrs. When the function symbols of that build id become known (debug_symbols:
-- fetched through debuginfod or a local .build-id tree, or uploaded by an operator),
-- sm_resolve_frames() makes every frame of that build id whose offset lies inside a
-- function an alias of the frame `module!function` (frames.canon_id). Stacks are never
-- rewritten: readers show an alias under its canonical frame's name, the miner maps alias
-- ids to canonical ids when it loads stacks, and the frame statistics count a frame's
-- class (the canonical frame and its aliases) as one frame, exactly.

-- The frame this one stands for, once resolved; NULL for a frame that is its own name.
-- A canonical frame never has a canon_id itself.
ALTER TABLE frames ADD COLUMN canon_id integer REFERENCES frames (id);
CREATE INDEX frames_canon ON frames (canon_id) WHERE canon_id IS NOT NULL;

-- Where an unnamed frame is: the module's build id (lower-case hex) and the ELF address.
CREATE TABLE frame_addrs (
	frame_id integer PRIMARY KEY REFERENCES frames (id) ON DELETE CASCADE,
	build_id text NOT NULL CHECK (build_id ~ '^[0-9a-f]{2,80}$'),
	addr bigint NOT NULL CHECK (addr >= 0)
);
CREATE INDEX frame_addrs_build ON frame_addrs (build_id);

-- The function symbols of a build: [addr, addr + size), name demangled.
CREATE TABLE debug_symbols (
	build_id text NOT NULL CHECK (build_id ~ '^[0-9a-f]{2,80}$'),
	addr bigint NOT NULL CHECK (addr >= 0),
	size bigint NOT NULL CHECK (size > 0),
	name text NOT NULL,
	PRIMARY KEY (build_id, addr)
);

-- Every build id whose debug file was looked for: where it came from, or when the
-- search failed (and why), so that a failed one is tried again only after a while.
CREATE TABLE debug_files (
	build_id text PRIMARY KEY CHECK (build_id ~ '^[0-9a-f]{2,80}$'),
	source text,                  -- 'upload', 'debuginfod', 'build-id tree'; NULL: not found
	path text,                    -- the file read (or uploaded file's name)
	symbols integer NOT NULL DEFAULT 0,
	tried_at timestamptz NOT NULL DEFAULT now(),
	error text                    -- why the last search failed
);

-- Resolves the unresolved frames of build id bid from debug_symbols, then recounts the
-- statistics of every frame class that changed. Returns how many frames were resolved.
--
-- It holds the intern lock exclusively (as the collection of frames does): no batch is
-- written meanwhile, and the epoch it bumps makes every ingest worker map its next batch
-- again, so new batches count the aliases under their canonical frame (ingest/store.c).
-- Pending deltas are folded first (stat_deltas locked against a concurrent fold); then,
-- for the classes that changed, n(f) and n(g->f) are counted again from the events: a
-- stream holding two offsets of one function counts once. This scans the events once.
CREATE FUNCTION sm_resolve_frames(bid text) RETURNS integer
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
		SELECT DISTINCT (e.received_at AT TIME ZONE 'UTC')::date AS day, e.stream_ref, e.stack_id
		FROM events e WHERE e.stack_id IN (SELECT id FROM stacks WHERE frame_ids && mem);
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

-- sm_collect_interned_local(): defined in sql/functions/sm_collect_interned_local.sql (applied after every migration).

-- What every reader shows: each frame under its canonical frame's name and id.
CREATE VIEW frame_names AS
	SELECT f.id, coalesce(c.name, f.name) AS name, coalesce(f.canon_id, f.id) AS canon_id
	FROM frames f LEFT JOIN frames c ON c.id = f.canon_id;

-- A stack's frames as the miner reads them: each alias as its canonical frame.
CREATE FUNCTION sm_canon_frames(ids integer[]) RETURNS integer[]
LANGUAGE sql STABLE AS $$
	SELECT array_agg(coalesce(f.canon_id, u.id) ORDER BY u.o)
	FROM unnest(ids) WITH ORDINALITY AS u(id, o) LEFT JOIN frames f ON f.id = u.id
$$;
