-- Tenants own sessions and API keys. Sessions created without a key belong to `default`.
-- `tenants` and `api_keys` are small reference tables (Citus: reference tables); `sessions`
-- stays distributed by session_id, its tenant a column like any other.

CREATE TABLE tenants (
    tenant     TEXT        PRIMARY KEY,
    created_at TIMESTAMPTZ NOT NULL
);

INSERT INTO tenants (tenant, created_at) VALUES ('default', now());

CREATE TABLE api_keys (
    key_id      TEXT        PRIMARY KEY,
    tenant      TEXT        NOT NULL REFERENCES tenants (tenant),
    role        TEXT        NOT NULL CHECK (role IN ('agent', 'operator', 'admin')),
    secret_hash BYTEA       NOT NULL,
    name        TEXT        NOT NULL DEFAULT '',
    created_at  TIMESTAMPTZ NOT NULL,
    revoked_at  TIMESTAMPTZ
);

ALTER TABLE sessions ADD COLUMN tenant TEXT NOT NULL DEFAULT 'default';

-- A tenant's session list, newest first.
CREATE INDEX sessions_tenant_idx ON sessions (tenant, session_id);
