-- 028_agent_collector: where a guarded process's agent does its work beyond the measurement (an
-- agent report's "collector", docs/wire-format.md): 'host', the host's collector (sm-agent collect),
-- or 'process', the agent's own threads in the program. Reports of agents older than the field, and
-- every process reported before this migration, worked in the process.
ALTER TABLE agent_procs ADD COLUMN collector text NOT NULL DEFAULT 'process'
	CHECK (collector IN ('host', 'process'));
