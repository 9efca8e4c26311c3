-- 014_run_values: per run, how many of its streams have each host, version
-- and label value, among its violating streams (those with AOI events) and
-- its baseline streams, so that attribution (docs/analysis.md) counts only a
-- cluster's own streams on request. The row with key '' holds the totals; a
-- value only one stream has is left out (identifiers, durations).
-- Written by the miner with the run's results (sm_run_values), in the same
-- transaction.
CREATE TABLE run_values (
	run_id bigint NOT NULL REFERENCES runs ON DELETE CASCADE,
	key text NOT NULL,
	value text NOT NULL,
	run_streams integer NOT NULL,
	baseline_streams integer NOT NULL,
	PRIMARY KEY (run_id, key, value)
);

CREATE FUNCTION sm_run_values(run bigint) RETURNS void LANGUAGE sql AS $$
	DELETE FROM run_values WHERE run_id = run;
	WITH a AS (SELECT DISTINCT stream_ref, false AS base FROM run_stacks WHERE run_id = run
		   UNION ALL SELECT stream_ref, true FROM run_baseline WHERE run_id = run),
	kv AS (SELECT a.base, x.key, x.value FROM a JOIN streams s ON s.id = a.stream_ref,
		LATERAL (SELECT 'host' AS key, s.host AS value UNION ALL
			 SELECT 'version', s.version WHERE s.version IS NOT NULL UNION ALL
			 SELECT l.key, l.value FROM jsonb_each_text(s.labels) AS l(key, value)
			 WHERE l.key NOT IN ('host', 'version')) x)
	INSERT INTO run_values (run_id, key, value, run_streams, baseline_streams)
		SELECT run, key, value, count(*) FILTER (WHERE NOT base), count(*) FILTER (WHERE base)
		FROM kv GROUP BY key, value HAVING count(*) > 1   -- a value of one stream explains nothing
		UNION ALL SELECT run, '', '', count(*) FILTER (WHERE NOT base), count(*) FILTER (WHERE base) FROM a;
$$;
