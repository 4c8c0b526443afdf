-- Summaries prepared in the background: one job per session and checkpoint, claimed by any
-- replica (FOR UPDATE SKIP LOCKED) under a lease, so that a crash loses none and two replicas
-- never run the same one.

CREATE TABLE summary_jobs (
    session_id     UUID        NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
    -- The summary so far is the one of everything up to this seq; the job summarises the events
    -- after it, up to `to_seq`, on top of `previous`.
    checkpoint_seq BIGINT      NOT NULL,
    to_seq         BIGINT      NOT NULL,
    previous       JSONB       NOT NULL,
    max_chars      BIGINT      NOT NULL,
    -- pending | running | done | failed
    status         TEXT        NOT NULL,
    attempts       INTEGER     NOT NULL DEFAULT 0,
    -- Unix milliseconds until which the replica that claimed it owns it.
    lease_until    BIGINT      NOT NULL DEFAULT 0,
    result         JSONB,
    error          TEXT,
    created_at     TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (session_id, checkpoint_seq)
);

CREATE INDEX summary_jobs_claimable ON summary_jobs (status, lease_until);
