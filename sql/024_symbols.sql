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

-- sm_resolve_frames(): defined in sql/functions/sm_resolve_frames.sql (applied after every migration).

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
