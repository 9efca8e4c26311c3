-- 020_sessions: sm-web's browser sessions. A login makes a random session of its own, bound to
-- the token it was made with; the cookie holds the session, never the token. Only the session's
-- SHA-256 is stored. A session ends on logout, when its token is revoked or deleted, after
-- sm-web's idle time (last_seen_at) or its absolute lifetime (created_at).
CREATE TABLE sessions (
	id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	session_hash bytea NOT NULL UNIQUE CHECK (length(session_hash) = 32),
	token_id integer NOT NULL REFERENCES tokens (id) ON DELETE CASCADE,
	created_at timestamptz NOT NULL DEFAULT now(),
	last_seen_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX sessions_token_id ON sessions (token_id);
CREATE INDEX sessions_last_seen_at ON sessions (last_seen_at);
