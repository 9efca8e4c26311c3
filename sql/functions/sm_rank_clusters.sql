-- One of the schema's functions, defined here only: `sm-admin migrate` applies every file of
-- sql/functions/ (CREATE OR REPLACE) after the migrations, so a database made fresh and one
-- upgraded from any version end with the same definition (tests/integration/test_schema.sh).
--
-- sm_rank_clusters(run): the run's clusters' ranks among all of them, both kinds (025_run_ranks),
-- by each metric descending, ties by id, as the dashboard orders them. The miner calls it once it
-- has stored the clusters, in the same transaction.
CREATE OR REPLACE FUNCTION sm_rank_clusters(run bigint) RETURNS void
LANGUAGE sql AS $$
	UPDATE clusters c SET run_rank_total_cost = r.total_cost, run_rank_streams = r.streams,
		run_rank_events = r.events, run_rank_avg_cost = r.avg_cost, run_rank_excess_cost = r.excess_cost
	FROM (SELECT id,
		row_number() OVER (ORDER BY total_cost_ns DESC, id) AS total_cost,
		row_number() OVER (ORDER BY streams DESC, id) AS streams,
		row_number() OVER (ORDER BY events DESC, id) AS events,
		row_number() OVER (ORDER BY avg_cost_ns DESC, id) AS avg_cost,
		CASE WHEN excess_cost_ns IS NOT NULL
		     THEN row_number() OVER (ORDER BY excess_cost_ns DESC NULLS LAST, id) END AS excess_cost
	      FROM clusters WHERE run_id = run) r
	WHERE c.id = r.id;
$$;
