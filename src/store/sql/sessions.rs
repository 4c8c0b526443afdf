//! Sessions: create, read, list (by creation or by activity), delete, and retention.

use chrono::{DateTime, Utc};
use sqlx::Executor;
use uuid::Uuid;

use crate::domain::session::{NewSession, Session};
use crate::store::rows::{DbUuid, SessionRow};
use crate::store::{now, SessionFilter, StoreError};

use super::{json, SESSION_COLUMNS};

shared_queries! {
    pub async fn create_session<'e>(
        db: impl Executor<'e, Database = DB>,
        new: &NewSession,
        tenant: &str,
    ) -> Result<Session, StoreError> {
        let now = now();
        let session = Session {
            id: Uuid::now_v7(),
            tenant: tenant.to_owned(),
            created_at: now,
            updated_at: now,
            config: new.config.clone(),
            metadata: new.metadata.clone(),
            head_seq: 0,
            total_tokens: 0,
        };
        sqlx::query(
            "INSERT INTO sessions (session_id, created_at, updated_at, config, metadata, tenant) \
             VALUES ($1, $2, $2, $3, $4, $5)",
        )
        .bind(DbUuid(session.id))
        .bind(now)
        .bind(json(&session.config)?)
        .bind(json(&session.metadata)?)
        .bind(tenant.to_owned())
        .execute(db)
        .await?;
        Ok(session)
    }

    pub async fn get_session<'e>(
        db: impl Executor<'e, Database = DB>,
        id: Uuid,
    ) -> Result<Option<Session>, StoreError> {
        let sql = format!("SELECT {SESSION_COLUMNS} FROM sessions WHERE session_id = $1");
        let row: Option<SessionRow> = sqlx::query_as(&sql)
            .bind(DbUuid(id))
            .fetch_optional(db)
            .await?;
        Ok(row.map(Session::from))
    }

    pub async fn list_sessions<'e>(
        db: impl Executor<'e, Database = DB>,
        filter: &SessionFilter,
    ) -> Result<Vec<Session>, StoreError> {
        let (open, close) = DB::LABELS_INCLUDE;
        let labels = if filter.labels.is_empty() {
            String::new()
        } else {
            format!(" AND {open}$4{close}")
        };
        // Every id is below the largest UUID, so no cursor and the largest read the same; by
        // activity, the cursor is the previous page's last (updated_at, id).
        let at = if filter.labels.is_empty() { 4 } else { 5 };
        let (after, order) = match filter.by_activity {
            Some(_) => (
                format!(" AND (updated_at < ${at} OR (updated_at = ${at} AND session_id < $1))"),
                "updated_at DESC, session_id DESC",
            ),
            None => (" AND session_id < $1".to_owned(), "session_id DESC"),
        };
        let sql = format!(
            "SELECT {SESSION_COLUMNS} FROM sessions WHERE tenant = $3{after}{labels} \
             ORDER BY {order} LIMIT $2"
        );
        let mut query = sqlx::query_as(&sql)
            .bind(DbUuid(filter.before.unwrap_or(Uuid::max())))
            .bind(i64::from(filter.limit))
            .bind(filter.tenant.clone());
        if !filter.labels.is_empty() {
            query = query.bind(json(&filter.labels)?);
        }
        if let Some(updated) = filter.by_activity {
            query = query.bind(updated);
        }
        let rows: Vec<SessionRow> = query.fetch_all(db).await?;
        Ok(rows.into_iter().map(Session::from).collect())
    }

    pub async fn delete_session<'e>(
        db: impl Executor<'e, Database = DB>,
        id: Uuid,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query("DELETE FROM sessions WHERE session_id = $1")
            .bind(DbUuid(id))
            .execute(db)
            .await?;
        Ok(DB::rows_affected(&done) > 0)
    }

    /// Deletes at most `limit` of the sessions not appended to since `idle_since` (the longest
    /// idle first), with everything they own. A documented cross-session statement: retention.
    pub async fn delete_idle_sessions<'e>(
        db: impl Executor<'e, Database = DB>,
        idle_since: DateTime<Utc>,
        limit: u32,
    ) -> Result<u64, StoreError> {
        let done = sqlx::query(
            "DELETE FROM sessions WHERE session_id IN (SELECT session_id FROM sessions \
             WHERE updated_at < $1 ORDER BY updated_at LIMIT $2)",
        )
        .bind(idle_since)
        .bind(i64::from(limit))
        .execute(db)
        .await?;
        Ok(DB::rows_affected(&done))
    }

}
