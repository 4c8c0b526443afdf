-- Retention finds the sessions idle the longest without reading every session.
CREATE INDEX sessions_idle ON sessions (updated_at);
