-- 004_signatures: analyst-approved performance signatures (mining.md section 7).
-- Frames are kept as names, not ids, so that a signature means the same in any
-- database it is exported to.
CREATE TABLE signatures (
	id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	name text NOT NULL UNIQUE CHECK (length(name) BETWEEN 1 AND 255),
	frames text[] NOT NULL CHECK (cardinality(frames) BETWEEN 1 AND 512),
	status text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'known', 'fixed')),
	note text NOT NULL DEFAULT '',
	from_cluster bigint REFERENCES clusters ON DELETE SET NULL,
	created_at timestamptz NOT NULL DEFAULT now(),
	updated_at timestamptz NOT NULL DEFAULT now()
);
