-- Event bodies are stored and read whole, never queried inside: `json` keeps the text as sent,
-- so reading a view's events no longer re-serialises every body from jsonb (the largest cost
-- of a compaction over HTTP, docs/benchmarks-compaction.md). It keeps lz4 compression.
ALTER TABLE events ALTER COLUMN body TYPE json USING body::json;
