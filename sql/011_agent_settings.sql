-- 011_agent_settings: settings an operator pushes to the guard agents of an
-- app without a redeploy (docs/fleet.md, "Settings pushed to the agents").
-- The row of app '*' applies to every app, an app's own row over it; a NULL
-- column leaves that setting as the agent was started with. Agents receive
-- them in the answer to their reports (at most a report interval later).
CREATE TABLE agent_settings (
	app text PRIMARY KEY CHECK (app <> ''),
	guard boolean,                       -- false: no units, no samples, no violations
	k double precision CHECK (k >= 0 AND k <= 1000),
	sample_hz integer CHECK (sample_hz >= 1 AND sample_hz <= 10000),
	min_wait_us integer CHECK (min_wait_us >= 1 AND min_wait_us <= 60000000),
	reports_per_min integer CHECK (reports_per_min >= 0 AND reports_per_min <= 100000),
	note text NOT NULL DEFAULT '',
	updated_at timestamptz NOT NULL DEFAULT now()
);
