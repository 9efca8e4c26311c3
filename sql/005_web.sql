-- 005_web: what the dashboard and the REST API read fast.

-- The stacks a cluster matches (the union of its members' supporting stacks), so
-- that a cluster's breakdowns by stream, host, version and label, and its flame
-- graph, are one indexed join with run_stacks. Runs clustered before this
-- migration have none (their cluster pages say so).
ALTER TABLE clusters ADD COLUMN stack_ids integer[] NOT NULL DEFAULT '{}';

-- The ranked list of a run's clusters under each metric, paged.
CREATE INDEX clusters_run_cost ON clusters (run_id, total_cost_ns DESC, id);
CREATE INDEX clusters_run_streams ON clusters (run_id, streams DESC, id);
CREATE INDEX clusters_run_events ON clusters (run_id, events DESC, id);
CREATE INDEX clusters_run_avg ON clusters (run_id, avg_cost_ns DESC, id);
