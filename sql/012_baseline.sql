-- 012_baseline: streams of normal units, and what the slow ones spend beyond
-- them (docs/analysis.md). A baseline stream is a unit that was not slow,
-- sampled by the agent for comparison: never mined, only measured against.
ALTER TABLE streams ADD COLUMN role text NOT NULL DEFAULT 'violation'
	CHECK (role IN ('violation', 'baseline'));

-- Per cluster, measured in the baseline streams of the run's selection
-- (NULL: the run had no baseline stream), over the events the cluster owns
-- (an event matched by several clusters belongs to one: docs/analysis.md).
-- own_cost_ns: the violating streams' cost in them; baseline_cost_ns: the
-- cost per baseline stream; expected_cost_ns: what the violating streams
-- would have spent at the baseline's rate; excess = own - expected, with a
-- 95 % bootstrap interval.
ALTER TABLE clusters
	ADD COLUMN baseline_streams integer,
	ADD COLUMN own_cost_ns bigint,
	ADD COLUMN baseline_cost_ns bigint,
	ADD COLUMN expected_cost_ns bigint,
	ADD COLUMN excess_cost_ns bigint,
	ADD COLUMN excess_lo_ns bigint,
	ADD COLUMN excess_hi_ns bigint,
	ADD COLUMN rank_excess_cost integer;
CREATE INDEX clusters_run_excess ON clusters (run_id, kind, rank_excess_cost);
