-- 013_run_baseline: the baseline streams a run measured its clusters in, so
-- that attribution (docs/analysis.md) compares a cluster's streams with the
-- same normal units. Written with the run's results, in one transaction.
CREATE TABLE run_baseline (
	run_id bigint NOT NULL REFERENCES runs ON DELETE CASCADE,
	stream_ref bigint NOT NULL,
	PRIMARY KEY (run_id, stream_ref)
);
