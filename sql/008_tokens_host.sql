-- 008_tokens_host: an ingest token may be bound to one host: sm-ingest then
-- refuses a stream whose host differs (a leaked token speaks for its host only).
ALTER TABLE tokens ADD COLUMN host text CHECK (host IS NULL OR length(host) BETWEEN 1 AND 255);
