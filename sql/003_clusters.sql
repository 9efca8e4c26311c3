-- 003_clusters: clusters of a run's patterns (mining.md sections 5 and 6).

CREATE TABLE clusters (
	id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	run_id bigint NOT NULL REFERENCES runs ON DELETE CASCADE,
	kind "char" NOT NULL CHECK (kind IN ('r', 'w')),
	-- metrics over the run's AOI events matched by any member (each event once)
	total_cost_ns bigint NOT NULL,
	streams integer NOT NULL,
	events bigint NOT NULL,
	avg_cost_ns bigint NOT NULL,
	-- 1 = first of its kind in the run under that metric (ties: lower cluster number)
	rank_total_cost integer NOT NULL,
	rank_streams integer NOT NULL,
	rank_events integer NOT NULL,
	rank_avg_cost integer NOT NULL,
	medoid bigint NOT NULL REFERENCES patterns ON DELETE CASCADE,
	common_frame_ids integer[] NOT NULL,   -- the common part, outermost first
	members bigint[] NOT NULL,             -- pattern ids, ascending
	-- per member, its alignment with the medoid (medoid on the left): one letter per
	-- step, M match, S substitution, D a medoid frame only, I a member frame only
	alignment jsonb NOT NULL
);
CREATE INDEX clusters_run ON clusters (run_id, kind, rank_total_cost);
