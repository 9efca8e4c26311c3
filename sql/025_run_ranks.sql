-- 025_run_ranks: each cluster's rank among all its run's clusters, both kinds, by each metric
-- descending, ties by id: the one rank the dashboard's pages and the API show (docs/web.md, "A
-- run"). The clusterer's rank_* columns stay ranks within the cluster's kind. Written by the miner
-- with the clusters (sm_rank_clusters(), sql/functions/); here for the runs mined before.
ALTER TABLE clusters
	ADD COLUMN run_rank_total_cost integer,
	ADD COLUMN run_rank_streams integer,
	ADD COLUMN run_rank_events integer,
	ADD COLUMN run_rank_avg_cost integer,
	ADD COLUMN run_rank_excess_cost integer;    -- NULL without an excess (no baseline)

UPDATE clusters c SET run_rank_total_cost = r.total_cost, run_rank_streams = r.streams,
	run_rank_events = r.events, run_rank_avg_cost = r.avg_cost, run_rank_excess_cost = r.excess_cost
FROM (SELECT id,
	row_number() OVER (PARTITION BY run_id ORDER BY total_cost_ns DESC, id) AS total_cost,
	row_number() OVER (PARTITION BY run_id ORDER BY streams DESC, id) AS streams,
	row_number() OVER (PARTITION BY run_id ORDER BY events DESC, id) AS events,
	row_number() OVER (PARTITION BY run_id ORDER BY avg_cost_ns DESC, id) AS avg_cost,
	CASE WHEN excess_cost_ns IS NOT NULL
	     THEN row_number() OVER (PARTITION BY run_id ORDER BY excess_cost_ns DESC NULLS LAST, id) END AS excess_cost
      FROM clusters) r
WHERE c.id = r.id;
