-- Summaries prepared in the background (the SQLite twin of migrations/postgres): one job per
-- session and checkpoint, claimed under a lease by the database's single writer.

CREATE TABLE summary_jobs (
    session_id     TEXT    NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
    checkpoint_seq INTEGER NOT NULL,
    to_seq         INTEGER NOT NULL,
    previous       TEXT    NOT NULL,
    max_chars      INTEGER NOT NULL,
    status         TEXT    NOT NULL,
    attempts       INTEGER NOT NULL DEFAULT 0,
    lease_until    INTEGER NOT NULL DEFAULT 0,
    result         TEXT,
    error          TEXT,
    created_at     TEXT    NOT NULL,
    PRIMARY KEY (session_id, checkpoint_seq)
);

CREATE INDEX summary_jobs_claimable ON summary_jobs (status, lease_until);
