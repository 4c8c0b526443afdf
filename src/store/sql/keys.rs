//! Tenants and API keys: small tables every session shares (reference tables when the
//! schema is distributed).

use sqlx::Executor;

use crate::auth::{ApiKey, StoredKey, Tenant};
use crate::store::rows::{KeyRow, TenantRow};
use crate::store::{now, StoreError};

use super::KEY_COLUMNS;

shared_queries! {
    /// Creates a tenant; None when it exists already. (Tenants and keys are small reference
    /// tables, read across sessions by design.)
    pub async fn create_tenant<'e>(
        db: impl Executor<'e, Database = DB>,
        tenant: &str,
    ) -> Result<Option<Tenant>, StoreError> {
        let created = Tenant {
            id: tenant.to_owned(),
            created_at: now(),
        };
        let done = sqlx::query(
            "INSERT INTO tenants (tenant, created_at) VALUES ($1, $2) \
             ON CONFLICT (tenant) DO NOTHING",
        )
        .bind(created.id.clone())
        .bind(created.created_at)
        .execute(db)
        .await?;
        Ok((DB::rows_affected(&done) > 0).then_some(created))
    }

    pub async fn list_tenants<'e>(
        db: impl Executor<'e, Database = DB>,
    ) -> Result<Vec<Tenant>, StoreError> {
        let rows: Vec<TenantRow> =
            sqlx::query_as("SELECT tenant, created_at FROM tenants ORDER BY tenant")
                .fetch_all(db)
                .await?;
        Ok(rows.into_iter().map(Tenant::from).collect())
    }

    pub async fn create_key<'e>(
        db: impl Executor<'e, Database = DB>,
        key: &StoredKey,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO api_keys (key_id, tenant, role, secret_hash, name, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(key.key.id.clone())
        .bind(key.key.tenant.clone())
        .bind(key.key.role.as_str().to_owned())
        .bind(key.secret_hash.clone())
        .bind(key.key.name.clone())
        .bind(key.key.created_at)
        .execute(db)
        .await?;
        Ok(())
    }

    pub async fn get_key<'e>(
        db: impl Executor<'e, Database = DB>,
        id: &str,
    ) -> Result<Option<StoredKey>, StoreError> {
        let row: Option<KeyRow> = sqlx::query_as(&format!(
            "SELECT {KEY_COLUMNS} FROM api_keys WHERE key_id = $1"
        ))
        .bind(id.to_owned())
        .fetch_optional(db)
        .await?;
        row.map(StoredKey::try_from).transpose()
    }

    /// Every key, or one tenant's, oldest first.
    pub async fn list_keys<'e>(
        db: impl Executor<'e, Database = DB>,
        tenant: Option<&str>,
    ) -> Result<Vec<ApiKey>, StoreError> {
        let rows: Vec<KeyRow> = sqlx::query_as(&format!(
            "SELECT {KEY_COLUMNS} FROM api_keys WHERE $1 = '' OR tenant = $1 \
             ORDER BY created_at, key_id"
        ))
        .bind(tenant.unwrap_or_default().to_owned())
        .fetch_all(db)
        .await?;
        rows.into_iter()
            .map(|row| StoredKey::try_from(row).map(|k| k.key))
            .collect()
    }

    /// Revokes a key (a revoked one stays revoked since its first revocation); false when
    /// there is no such key.
    pub async fn revoke_key<'e>(
        db: impl Executor<'e, Database = DB>,
        id: &str,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE api_keys SET revoked_at = COALESCE(revoked_at, $2) WHERE key_id = $1",
        )
        .bind(id.to_owned())
        .bind(now())
        .execute(db)
        .await?;
        Ok(DB::rows_affected(&done) > 0)
    }

    /// Whether any key was ever created (revoked ones included): then every request needs one.
    pub async fn any_keys<'e>(db: impl Executor<'e, Database = DB>) -> Result<bool, StoreError> {
        let found: Option<KeyRow> =
            sqlx::query_as(&format!("SELECT {KEY_COLUMNS} FROM api_keys LIMIT 1"))
                .fetch_optional(db)
                .await?;
        Ok(found.is_some())
    }
}
