-- 021_run_retry: a run whose database went away while it was mined is queued
-- again (at most miner's MINER_MAX_ATTEMPTS attempts in all, counted by
-- runs.attempts) instead of failing; last_retry says why the previous attempt
-- ended, for the run's page and the API.
ALTER TABLE runs ADD COLUMN last_retry text;
