-- One of the schema's functions, defined here only: `sm-admin migrate` applies every file of
-- sql/functions/ (CREATE OR REPLACE) after the migrations, so a database made fresh and one
-- upgraded from any version end with the same definition (tests/integration/test_schema.sh).
--
-- sm_collect_interned(): frames and stacks nothing refers to any more, collected by
-- sm_collect_interned_local() unless there are shards: through postgres_fdw both of its scans of
-- events see the shards as of the first, so a batch committed in between would lose its stacks.
-- While there are shards, frames and stacks are not collected (they are stored once; what stays is
-- what the shards' days may use).
CREATE OR REPLACE FUNCTION sm_collect_interned(OUT stacks integer, OUT frames integer)
LANGUAGE plpgsql AS $$
BEGIN
	IF EXISTS (SELECT 1 FROM shards) THEN
		stacks := 0;
		frames := 0;
		RETURN;
	END IF;
	SELECT c.stacks, c.frames INTO stacks, frames FROM sm_collect_interned_local() c;
END $$;
