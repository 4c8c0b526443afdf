-- Tenants own sessions and API keys (the SQLite twin of migrations/postgres).

CREATE TABLE tenants (
    tenant     TEXT PRIMARY KEY,
    created_at TEXT NOT NULL
) WITHOUT ROWID;

INSERT INTO tenants (tenant, created_at) VALUES ('default', strftime('%Y-%m-%dT%H:%M:%fZ', 'now'));

CREATE TABLE api_keys (
    key_id      TEXT PRIMARY KEY,
    tenant      TEXT NOT NULL REFERENCES tenants (tenant),
    role        TEXT NOT NULL CHECK (role IN ('agent', 'operator', 'admin')),
    secret_hash BLOB NOT NULL,
    name        TEXT NOT NULL DEFAULT '',
    created_at  TEXT NOT NULL,
    revoked_at  TEXT
) WITHOUT ROWID;

ALTER TABLE sessions ADD COLUMN tenant TEXT NOT NULL DEFAULT 'default';

CREATE INDEX sessions_tenant_idx ON sessions (tenant, session_id);
