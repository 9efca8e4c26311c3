-- 027_match: what the pages of a cluster or a problem show about the streams it matched, counted
-- once when the run is stored instead of on every request. Counted on request from run_stacks
-- (one row per stack and stream), a cluster matching 17,500 of a run's 20,000 streams took 0.5 s
-- for its breakdowns and 2.5 s for its page, growing with the streams (docs/scaling.md); read from
-- these tables a page reads rows in proportion to what it shows.
--
-- Written by the miner with the run's results (sm_match_streams(), after the clusters and
-- problems and sm_run_values()), in the same transaction; here for the runs mined before. What
-- they hold is the run as it was mined: a stream retention removed later is still counted (the
-- top streams mark it expired), as run_values counts it.

-- A run's collapsed stacks summed over its streams: the flame graph of a cluster reads one row
-- per stack, not one per stack and stream.
CREATE TABLE run_stack_totals (
	run_id bigint NOT NULL,        -- deleted with its run (runs_deleted, below)
	kind "char" NOT NULL CHECK (kind IN ('r', 'w')),
	stack_id integer NOT NULL,
	cost_ns bigint NOT NULL,
	events bigint NOT NULL,
	streams integer NOT NULL,
	PRIMARY KEY (run_id, kind, stack_id)
);

-- The streams a cluster ('c') or a problem ('p') matched that its pages read, with the cost and
-- events of its matched stacks there (a problem's stacks each counted once): its 1,000 costliest
-- (the API's largest limit) and a deterministic sample of 2,000 for the cost model (the first by
-- the SHA-256 of the id's text, then the id; pick: the place in it, NULL outside it).
CREATE TABLE match_streams (
	run_id bigint NOT NULL,        -- deleted with its run (runs_deleted, below)
	of "char" NOT NULL CHECK (of IN ('c', 'p')),
	id bigint NOT NULL,
	stream_ref bigint NOT NULL,
	cost_ns bigint NOT NULL,
	events bigint NOT NULL,
	pick integer,
	PRIMARY KEY (run_id, of, id, stream_ref)
);
CREATE INDEX match_streams_cost ON match_streams (of, id, cost_ns DESC, stream_ref);
CREATE INDEX match_streams_pick ON match_streams (of, id, pick) WHERE pick IS NOT NULL;

-- The same streams by host, version ('' for none) and label value, with their cost and events;
-- key '' holds the totals.
CREATE TABLE match_values (
	run_id bigint NOT NULL,        -- deleted with its run (runs_deleted, below)
	of "char" NOT NULL CHECK (of IN ('c', 'p')),
	id bigint NOT NULL,
	key text NOT NULL,
	value text NOT NULL,
	streams integer NOT NULL,
	cost_ns bigint NOT NULL,
	events bigint NOT NULL,
	PRIMARY KEY (run_id, of, id, key, value)
);
CREATE INDEX match_values_of ON match_values (of, id, key, cost_ns DESC);

-- The run's bulk rows without a per-row foreign key check. Each checked row locks the run's row
-- (FOR KEY SHARE) while the worker's heartbeat updates it every second from another connection, so
-- that the row's lock is a multixact every check reads: storing the 15 million run_stacks rows of
-- a run of a million streams took more than 6 minutes, 65 % of it in GetMultiXactIdMembers. The
-- miner writes them only for the run it holds, in the transaction that marks it done (or rolls
-- back when the run is gone); a statement trigger deletes them with their run.
ALTER TABLE run_stacks DROP CONSTRAINT run_stacks_run_id_fkey;

CREATE FUNCTION sm_runs_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	DELETE FROM run_stacks WHERE run_id IN (SELECT id FROM gone);
	DELETE FROM run_stack_totals WHERE run_id IN (SELECT id FROM gone);
	DELETE FROM match_streams WHERE run_id IN (SELECT id FROM gone);
	DELETE FROM match_values WHERE run_id IN (SELECT id FROM gone);
	RETURN NULL;
END
$$;
CREATE TRIGGER runs_deleted AFTER DELETE ON runs REFERENCING OLD TABLE AS gone
	FOR EACH STATEMENT EXECUTE FUNCTION sm_runs_deleted();

-- The miner counts the same rows in memory (miner/matches.c); this is their definition, for the
-- runs mined before and for tests (tests/integration/test_miner.sh compares the two).
CREATE FUNCTION sm_match_streams(run bigint) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	DELETE FROM run_stack_totals WHERE run_id = run;
	DELETE FROM match_streams WHERE run_id = run;
	DELETE FROM match_values WHERE run_id = run;
	INSERT INTO run_stack_totals (run_id, kind, stack_id, cost_ns, events, streams)
		SELECT run, kind, stack_id, sum(cost_ns), sum(events), count(*)
		FROM run_stacks WHERE run_id = run GROUP BY kind, stack_id;
	-- each stack id looked up in run_stacks' key (a filter `= ANY(stack_ids)` compares every row
	-- of the run with the whole array)
	DROP TABLE IF EXISTS sm_match;
	CREATE TEMP TABLE sm_match AS
		SELECT m.of, m.id, m.stream_ref, m.cost, m.ev,
			row_number() OVER (PARTITION BY m.of, m.id
				ORDER BY sha256(m.stream_ref::text::bytea), m.stream_ref) AS pick,
			row_number() OVER (PARTITION BY m.of, m.id ORDER BY m.cost DESC, m.stream_ref) AS top
		FROM (SELECT 'c'::"char" AS of, c.id, rs.stream_ref, sum(rs.cost_ns) AS cost, sum(rs.events) AS ev
		      FROM clusters c CROSS JOIN LATERAL unnest(c.stack_ids) AS u(stack_id)
		      JOIN run_stacks rs ON rs.run_id = run AND rs.kind = c.kind AND rs.stack_id = u.stack_id
		      WHERE c.run_id = run GROUP BY c.id, rs.stream_ref
		      UNION ALL
		      SELECT 'p', u.problem_id, rs.stream_ref, sum(rs.cost_ns), sum(rs.events)
		      FROM (SELECT DISTINCT c.problem_id, c.kind, unnest(c.stack_ids) AS stack_id FROM clusters c
			    WHERE c.run_id = run AND c.problem_id IS NOT NULL) u
		      JOIN run_stacks rs ON rs.run_id = run AND rs.kind = u.kind AND rs.stack_id = u.stack_id
		      GROUP BY u.problem_id, rs.stream_ref) m;
	INSERT INTO match_streams (run_id, of, id, stream_ref, cost_ns, events, pick)
		SELECT run, of, id, stream_ref, cost, ev, CASE WHEN pick <= 2000 THEN pick END
		FROM sm_match WHERE pick <= 2000 OR top <= 1000;
	INSERT INTO match_values (run_id, of, id, key, value, streams, cost_ns, events)
		SELECT run, m.of, m.id, x.key, x.value, count(*), sum(m.cost), sum(m.ev)
		FROM sm_match m JOIN streams s ON s.id = m.stream_ref,
		LATERAL (SELECT 'host' AS key, s.host AS value UNION ALL
			 SELECT 'version', coalesce(s.version, '') UNION ALL
			 SELECT l.key, l.value FROM jsonb_each_text(s.labels) AS l(key, value)
			 WHERE l.key NOT IN ('', 'host', 'version')) x
		GROUP BY m.of, m.id, x.key, x.value
		UNION ALL
		SELECT run, of, id, '', '', count(*), sum(cost), sum(ev) FROM sm_match GROUP BY of, id;
	DROP TABLE sm_match;
END
$$;

SELECT sm_match_streams(id) FROM runs WHERE status = 'done';

-- A cluster's stack_ids costliest first (then by id), as the miner writes them now: its page reads
-- the costliest of thousands of stacks as a slice.
UPDATE clusters c SET stack_ids = s.ids
FROM (SELECT c.id, array_agg(u.stack_id ORDER BY coalesce(t.cost_ns, 0) DESC, u.stack_id) AS ids
      FROM clusters c CROSS JOIN LATERAL unnest(c.stack_ids) AS u(stack_id)
      LEFT JOIN run_stack_totals t ON t.run_id = c.run_id AND t.kind = c.kind AND t.stack_id = u.stack_id
      GROUP BY c.id) s
WHERE c.id = s.id AND cardinality(c.stack_ids) > 1;
