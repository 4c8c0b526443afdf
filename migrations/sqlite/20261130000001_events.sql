-- Sessions and their append-only event log (the SQLite twin of migrations/postgres).

CREATE TABLE sessions (
    session_id   TEXT    PRIMARY KEY,
    created_at   TEXT    NOT NULL,
    updated_at   TEXT    NOT NULL,
    config       TEXT    NOT NULL,
    metadata     TEXT    NOT NULL DEFAULT '{}',
    head_seq     INTEGER NOT NULL DEFAULT 0,
    total_tokens INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;

CREATE TABLE events (
    session_id TEXT    NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
    seq        INTEGER NOT NULL,
    client_id  TEXT,
    type       TEXT    NOT NULL,
    role       TEXT,
    body       TEXT    NOT NULL,
    pinned     INTEGER NOT NULL DEFAULT 0,
    metadata   TEXT,
    tokens     INTEGER NOT NULL,
    created_at TEXT    NOT NULL,
    PRIMARY KEY (session_id, seq)
);  -- a rowid table: event bodies can be large

CREATE UNIQUE INDEX events_client_id_idx ON events (session_id, client_id)
    WHERE client_id IS NOT NULL;

-- History is never rewritten.
CREATE TRIGGER events_append_only BEFORE UPDATE ON events
BEGIN
    SELECT RAISE(ABORT, 'events are append-only');
END;

CREATE TABLE tool_calls (
    session_id TEXT    NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
    call_id    TEXT    NOT NULL,
    call_seq   INTEGER NOT NULL,
    result_seq INTEGER,
    PRIMARY KEY (session_id, call_id, call_seq)
) WITHOUT ROWID;

CREATE UNIQUE INDEX tool_calls_open_idx ON tool_calls (session_id, call_id)
    WHERE result_seq IS NULL;
