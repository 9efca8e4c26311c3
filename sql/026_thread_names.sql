-- 026_thread_names: the names of a stream's threads (the wire format's optional "threads",
-- docs/wire-format.md), for the timeline's row labels: {"4211": "nginx: worker", ...}, only
-- the threads its events or symptom name. NULL when the sender named none, which costs nothing
-- (a NULL column takes no room in the row); streams stored before have none.
ALTER TABLE streams ADD COLUMN thread_names jsonb CHECK (jsonb_typeof(thread_names) = 'object');
