-- Sessions and their append-only event log. Every table is keyed by session_id first, so the
-- schema can be distributed by session (Citus: distribute each table by session_id).

CREATE TABLE sessions (
    session_id   UUID        PRIMARY KEY,
    created_at   TIMESTAMPTZ NOT NULL,
    updated_at   TIMESTAMPTZ NOT NULL,
    config       JSONB       NOT NULL,
    metadata     JSONB       NOT NULL DEFAULT '{}'::jsonb,
    head_seq     BIGINT      NOT NULL DEFAULT 0,
    total_tokens BIGINT      NOT NULL DEFAULT 0
);

CREATE INDEX sessions_metadata_idx ON sessions USING GIN (metadata jsonb_path_ops);

CREATE TABLE events (
    session_id UUID        NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
    seq        BIGINT      NOT NULL,
    client_id  TEXT,
    type       TEXT        NOT NULL,
    role       TEXT,
    body       JSONB       NOT NULL,
    pinned     BOOLEAN     NOT NULL DEFAULT FALSE,
    metadata   JSONB,
    tokens     BIGINT      NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (session_id, seq)
);

CREATE UNIQUE INDEX events_client_id_idx ON events (session_id, client_id)
    WHERE client_id IS NOT NULL;

-- History is never rewritten: an event, once appended, cannot be changed. (Deleting a whole
-- session removes its events through the cascade.)
CREATE FUNCTION events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'events are append-only';
END;
$$;

CREATE TRIGGER events_append_only BEFORE UPDATE ON events
    FOR EACH ROW EXECUTE FUNCTION events_append_only();

-- Tool-call pairing: every call a session issued, and the seq of its result once answered.
CREATE TABLE tool_calls (
    session_id UUID   NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
    call_id    TEXT   NOT NULL,
    call_seq   BIGINT NOT NULL,
    result_seq BIGINT,
    PRIMARY KEY (session_id, call_id, call_seq)
);

-- At most one unanswered call per id.
CREATE UNIQUE INDEX tool_calls_open_idx ON tool_calls (session_id, call_id)
    WHERE result_seq IS NULL;
