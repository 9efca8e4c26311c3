-- 017_run_parts: a run's AOI extraction cut into parts that any worker takes.
-- The worker that took the run (its coordinator) selects the streams, cuts them
-- into parts of consecutive stream ids and queues them here; workers take parts
-- with FOR UPDATE SKIP LOCKED as they take runs, and a part whose worker stops
-- beating is taken again. A part's result is its weighted sequence database: the
-- AOI events of its streams collapsed by (stream, kind, stack), packed in
-- `entries` (format in miner/parts.h). The coordinator merges the parts and
-- deletes them when the run ends.
CREATE TABLE run_parts (
	run_id bigint NOT NULL REFERENCES runs ON DELETE CASCADE,
	part integer NOT NULL,
	stream_refs bigint[] NOT NULL,   -- the part's streams, ascending
	status text NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'running', 'done', 'failed')),
	worker text,                     -- host:pid of the worker that has it
	heartbeat_at timestamptz,
	attempts integer NOT NULL DEFAULT 0,
	error text,
	entries bytea,                   -- when done: the packed collapsed AOI
	events bigint,                   -- when done: events read, AOI events
	aoi_events bigint,
	ms integer,                      -- when done: time the worker took
	PRIMARY KEY (run_id, part)
);
ALTER TABLE run_parts ALTER COLUMN entries SET STORAGE EXTERNAL;   -- packed integers do not compress
CREATE INDEX run_parts_queue ON run_parts (run_id, part) WHERE status IN ('queued', 'running');
