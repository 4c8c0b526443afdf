-- Compaction state, records and folded ranges (the SQLite twin of migrations/postgres).

CREATE TABLE compaction_states (
    session_id TEXT    PRIMARY KEY REFERENCES sessions (session_id) ON DELETE CASCADE,
    version    INTEGER NOT NULL,
    state      TEXT    NOT NULL,
    updated_at TEXT    NOT NULL
);

CREATE TABLE compactions (
    session_id    TEXT NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
    compaction_id TEXT NOT NULL,
    created_at    TEXT NOT NULL,
    record        TEXT NOT NULL,
    PRIMARY KEY (session_id, compaction_id)
);

CREATE TABLE folded_ranges (
    session_id    TEXT    NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
    from_seq      INTEGER NOT NULL,
    to_seq        INTEGER NOT NULL,
    compaction_id TEXT    NOT NULL,
    reason        TEXT    NOT NULL,
    PRIMARY KEY (session_id, from_seq)
) WITHOUT ROWID;
