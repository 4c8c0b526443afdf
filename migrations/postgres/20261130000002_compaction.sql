-- Compaction: the state each session's view is derived from, the record of every compaction,
-- and which compaction folded which runs of events into the summary.

CREATE TABLE compaction_states (
    session_id UUID        PRIMARY KEY REFERENCES sessions (session_id) ON DELETE CASCADE,
    -- Incremented by every write; a compaction writes only over the version it read.
    version    BIGINT      NOT NULL,
    state      JSONB       NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL
);

CREATE TABLE compactions (
    session_id    UUID        NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
    compaction_id UUID        NOT NULL,
    created_at    TIMESTAMPTZ NOT NULL,
    record        JSONB       NOT NULL,
    PRIMARY KEY (session_id, compaction_id)
);

CREATE TABLE folded_ranges (
    session_id    UUID   NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
    from_seq      BIGINT NOT NULL,
    to_seq        BIGINT NOT NULL,
    compaction_id UUID   NOT NULL,
    reason        TEXT   NOT NULL,
    PRIMARY KEY (session_id, from_seq)
);
