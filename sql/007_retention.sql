-- 007_retention: results expire too, and frames and stacks nothing refers to
-- any more are collected.
--
-- Runs (with their run_stacks, patterns and clusters) finished longer ago than
-- run_retention_days are deleted by sm_apply_retention(), like streams older
-- than retention_days. A signature keeps all it holds (names of frames, status,
-- note): it refers to frames by name, not id. It remembers the cluster and the
-- run it came from (from_cluster, from_run) as plain numbers, which outlive
-- them: the pages say "expired" where they are gone.
INSERT INTO settings (key, value) VALUES ('run_retention_days', '90'), ('intern_epoch', '0')
	ON CONFLICT (key) DO NOTHING;

ALTER TABLE signatures DROP CONSTRAINT IF EXISTS signatures_from_cluster_fkey;
ALTER TABLE signatures ADD COLUMN from_run bigint;
UPDATE signatures g SET from_run = c.run_id FROM clusters c WHERE c.id = g.from_cluster;

-- sm_apply_retention(): defined in sql/functions/sm_apply_retention.sql (applied after every migration).

-- sm_collect_interned(): the collection of frames and stacks nothing refers to, today
-- sm_collect_interned_local() behind it: both in sql/functions/ (applied after every migration).
