-- 016_alerts_once: an alert is made once per rule, run and cluster while its run
-- exists. 015's constraint treated NULLs as equal, so two signature_cost alerts
-- (cluster NULL) of a rule collided once both their runs were deleted (run_id
-- set NULL), and the deletion - retention's included - failed.
ALTER TABLE alerts DROP CONSTRAINT alerts_rule_id_run_id_cluster_id_key;
CREATE UNIQUE INDEX alerts_once ON alerts (rule_id, run_id, coalesce(cluster_id, 0)) WHERE run_id IS NOT NULL;
