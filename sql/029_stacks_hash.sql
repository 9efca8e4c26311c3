-- 029_stacks_hash: stacks unique by (hash, frame_ids), hash computed by the server from frame_ids.
-- The same uniqueness as frame_ids alone (equal arrays have equal hashes), but a descent of the
-- index compares 64-bit integers instead of arrays that share their outermost frames over long
-- prefixes: interning a new build's stacks spent two thirds of an insert in those comparisons
-- (ingest/store.c). A collision of hashes costs a comparison of the arrays, nothing else.
ALTER TABLE stacks ADD COLUMN hash bigint NOT NULL
	GENERATED ALWAYS AS (hash_array_extended(frame_ids, 0)) STORED;
ALTER TABLE stacks DROP CONSTRAINT stacks_frame_ids_key;
ALTER TABLE stacks ADD CONSTRAINT stacks_hash_frame_ids_key UNIQUE (hash, frame_ids);
