-- 015_watch: scheduled runs and alert rules (docs/analysis.md, "Watching").
-- A schedule queues a run of its app and kind every every_s seconds over the
-- last window_s seconds; the workers take due schedules (FOR UPDATE SKIP
-- LOCKED), evaluate the alert rules on every run they finish, and deliver the
-- alerts to their webhooks (retried with backoff).
CREATE TABLE schedules (
	id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	app text NOT NULL CHECK (length(app) BETWEEN 1 AND 255),
	kind text NOT NULL CHECK (kind IN ('wait', 'run', 'both')),
	every_s integer NOT NULL CHECK (every_s BETWEEN 60 AND 604800),
	window_s integer NOT NULL CHECK (window_s BETWEEN 60 AND 2592000),
	params jsonb NOT NULL DEFAULT '{}',      -- the other run parameters (threshold, filters, ...)
	enabled boolean NOT NULL DEFAULT true,
	next_at timestamptz NOT NULL DEFAULT now(),
	last_run bigint REFERENCES runs ON DELETE SET NULL,
	created_at timestamptz NOT NULL DEFAULT now(),
	UNIQUE (app, kind)
);
ALTER TABLE runs ADD COLUMN schedule_id bigint REFERENCES schedules ON DELETE SET NULL;

CREATE TABLE alert_rules (
	id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	name text NOT NULL UNIQUE CHECK (length(name) BETWEEN 1 AND 255),
	app text,                                -- NULL: every app
	type text NOT NULL CHECK (type IN ('signature_cost', 'new_cluster')),
	signature_id bigint REFERENCES signatures ON DELETE CASCADE,
	limit_ns_per_hour bigint CHECK (limit_ns_per_hour > 0),
	min_share double precision CHECK (min_share > 0 AND min_share <= 1),
	webhook text NOT NULL CHECK (webhook ~ '^https?://' AND length(webhook) <= 2048),
	enabled boolean NOT NULL DEFAULT true,
	created_at timestamptz NOT NULL DEFAULT now(),
	CHECK (type <> 'signature_cost' OR (signature_id IS NOT NULL AND limit_ns_per_hour IS NOT NULL)),
	CHECK (type <> 'new_cluster' OR min_share IS NOT NULL)
);

CREATE TABLE alerts (
	id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	rule_id bigint NOT NULL REFERENCES alert_rules ON DELETE CASCADE,
	run_id bigint REFERENCES runs ON DELETE SET NULL,
	cluster_id bigint,                       -- new_cluster: the cluster (it may expire with its run)
	message text NOT NULL,
	payload jsonb NOT NULL,                  -- what the webhook receives
	created_at timestamptz NOT NULL DEFAULT now(),
	delivery text NOT NULL DEFAULT 'pending' CHECK (delivery IN ('pending', 'delivered', 'failed')),
	attempts integer NOT NULL DEFAULT 0,
	next_attempt_at timestamptz NOT NULL DEFAULT now(),
	last_error text,
	delivered_at timestamptz,
	UNIQUE NULLS NOT DISTINCT (rule_id, run_id, cluster_id)
);
CREATE INDEX alerts_pending ON alerts (next_attempt_at) WHERE delivery = 'pending';
CREATE INDEX alerts_created ON alerts (created_at DESC);
