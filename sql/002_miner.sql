-- 002_miner: mining runs, their collapsed AOI stacks and their costly maximal patterns.

-- A run is a unit of work taken by one miner worker (FOR UPDATE SKIP LOCKED);
-- a worker that dies stops its heartbeat and the run is taken again.
CREATE TABLE runs (
	id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	status text NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'running', 'done', 'failed')),
	params jsonb NOT NULL,           -- as POST /api/v1/runs takes them, with defaults filled in
	error text,
	created_at timestamptz NOT NULL DEFAULT now(),
	started_at timestamptz,
	finished_at timestamptz,
	worker text,                     -- host:pid of the worker that has it
	heartbeat_at timestamptz,
	attempts integer NOT NULL DEFAULT 0,
	progress jsonb NOT NULL DEFAULT '{}',    -- phase, streams read, AOI events, stacks, patterns
	counts jsonb NOT NULL DEFAULT '{}',      -- streams, aoi_events, distinct_stacks, patterns, clusters
	timings_ms jsonb NOT NULL DEFAULT '{}'   -- per phase
);
CREATE INDEX runs_queue ON runs (id) WHERE status IN ('queued', 'running');
CREATE INDEX runs_created ON runs (created_at DESC);

-- The mining database of a run: AOI events collapsed by (kind, stack), split by
-- stream so that cluster metrics can count distinct streams exactly.
CREATE TABLE run_stacks (
	run_id bigint NOT NULL REFERENCES runs ON DELETE CASCADE,
	kind "char" NOT NULL CHECK (kind IN ('r', 'w')),
	stack_id integer NOT NULL,
	stream_ref bigint NOT NULL,
	cost_ns bigint NOT NULL,         -- summed cost of the AOI events with this stack in this stream
	events integer NOT NULL,         -- how many AOI events
	PRIMARY KEY (run_id, kind, stack_id, stream_ref)
);

CREATE TABLE patterns (
	id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	run_id bigint NOT NULL REFERENCES runs ON DELETE CASCADE,
	kind "char" NOT NULL CHECK (kind IN ('r', 'w')),
	rank integer NOT NULL,           -- 1 = costliest of its kind in the run
	frame_ids integer[] NOT NULL,    -- outermost first
	cost_ns bigint NOT NULL,         -- cost(P) over the run's AOI events
	events bigint NOT NULL,          -- AOI events whose stack contains P
	streams integer NOT NULL,        -- distinct streams with such an event
	stack_ids integer[] NOT NULL     -- the collapsed stacks that support P
);
CREATE INDEX patterns_run ON patterns (run_id, kind, rank);
