-- 022_weight: priority-sampled violations (guard.md "Shipping budget") carry a
-- sampling weight; sums of weight x cost estimate the fleet's true cost without
-- bias (docs/mining.md, "Estimated metrics"). Streams stored before weigh 1.
ALTER TABLE streams ADD COLUMN weight double precision NOT NULL DEFAULT 1 CHECK (weight >= 1);

-- Per pattern and per cluster, next to the sampled metrics (which keep the ranks):
-- est_cost_ns = round(sum over the matched AOI events of their stream's weight x cost),
-- est_streams = sum of the weights of the distinct streams. NULL for runs mined before.
ALTER TABLE patterns ADD COLUMN est_cost_ns bigint;
ALTER TABLE clusters
	ADD COLUMN est_cost_ns bigint,
	ADD COLUMN est_streams double precision;
