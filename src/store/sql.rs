//! The SQL both backends share, written once and generic over the backend's `sqlx::Database`.
//! Where the dialects differ, a [`Dialect`] says so with constant fragments: the label filter
//! and how a list of seqs is bound and read. Placeholders are `$n` in both.

use std::marker::PhantomData;

use chrono::{DateTime, Utc};
use serde_json::value::RawValue;
use sqlx::types::Json;
use sqlx::{Database, Encode, Executor, FromRow, IntoArguments, Type};
use uuid::Uuid;

use super::rows::{
    DbUuid, EventRow, FoldedRangeRow, ItemColumns, JobRow, KeyRow, RecordRow, SessionEventRow,
    SessionRow, SessionStateRow, StateRow, TenantRow,
};
use super::{
    now, ItemRow, SessionFilter, SessionSince, StoreError, StoredState, SESSION_SINCE_RANGE,
};
use crate::auth::{ApiKey, StoredKey, Tenant};
use crate::domain::compaction::CompactionRecord;
use crate::domain::event::Event;
use crate::domain::session::{NewSession, Session};
use crate::domain::state::{CompactionState, FoldedRange, JobStatus, PreparedSummary, SummaryJob};

/// What differs between the backends in the queries they share.
pub(super) trait Dialect: Database {
    /// A list of seqs as one bind parameter.
    type SeqList: for<'q> Encode<'q, Self> + Type<Self> + Send;
    /// The fragments around that parameter's placeholder that test `seq` for membership.
    const SEQ_IN: (&'static str, &'static str);
    fn seq_list(seqs: &[i64]) -> Self::SeqList;
    /// The fragments around a parameter's placeholder, bound to a JSON object of labels, that
    /// test whether a session's labels include them all.
    const LABELS_INCLUDE: (&'static str, &'static str);
    /// What makes a claim skip rows another transaction holds (PostgreSQL); empty where one
    /// writer serialises every claim (SQLite).
    const SKIP_LOCKED: &'static str;
    fn rows_affected(done: &Self::QueryResult) -> u64;
}

const SESSION_COLUMNS: &str =
    "session_id, tenant, created_at, updated_at, config, metadata, head_seq, total_tokens";
const KEY_COLUMNS: &str = "key_id, tenant, role, secret_hash, name, created_at, revoked_at";
const EVENT_COLUMNS: &str = "seq, client_id, body, pinned, metadata, tokens, created_at";
const ITEM_COLUMNS: &str = "seq, client_id, type, role, pinned, tokens";

/// A JSON document to bind, serialised once.
fn json<T: serde::Serialize>(value: &T) -> Result<Json<Box<RawValue>>, StoreError> {
    serde_json::value::to_raw_value(value)
        .map(Json)
        .map_err(|e| StoreError::Corrupt(format!("encoding: {e}")))
}

/// The shared queries of one backend.
pub(super) struct Sql<DB>(PhantomData<DB>);

impl<DB> Sql<DB>
where
    DB: Dialect,
    for<'q> DB::Arguments<'q>: IntoArguments<'q, DB>,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'q> i64: Encode<'q, DB> + Type<DB>,
    for<'q> DbUuid: Encode<'q, DB> + Type<DB>,
    for<'q> DateTime<Utc>: Encode<'q, DB> + Type<DB>,
    for<'q> String: Encode<'q, DB> + Type<DB>,
    for<'q> Json<Box<RawValue>>: Encode<'q, DB> + Type<DB>,
    for<'q> Option<Json<Box<RawValue>>>: Encode<'q, DB>,
    for<'r> SessionRow: FromRow<'r, DB::Row>,
    for<'r> SessionStateRow: FromRow<'r, DB::Row>,
    for<'r> SessionEventRow: FromRow<'r, DB::Row>,
    for<'r> StateRow: FromRow<'r, DB::Row>,
    for<'r> EventRow: FromRow<'r, DB::Row>,
    for<'r> ItemColumns: FromRow<'r, DB::Row>,
    for<'r> FoldedRangeRow: FromRow<'r, DB::Row>,
    for<'r> RecordRow: FromRow<'r, DB::Row>,
    for<'r> JobRow: FromRow<'r, DB::Row>,
    for<'q> Vec<u8>: Encode<'q, DB> + Type<DB>,
    for<'r> KeyRow: FromRow<'r, DB::Row>,
    for<'r> TenantRow: FromRow<'r, DB::Row>,
{
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

    /// Creates a tenant; false when it exists already. (Tenants and keys are small reference
    /// tables, read across sessions by design.)
    pub async fn create_tenant<'e>(
        db: impl Executor<'e, Database = DB>,
        tenant: &str,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "INSERT INTO tenants (tenant, created_at) VALUES ($1, $2) \
             ON CONFLICT (tenant) DO NOTHING",
        )
        .bind(tenant.to_owned())
        .bind(now())
        .execute(db)
        .await?;
        Ok(DB::rows_affected(&done) > 0)
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

    pub async fn list_events<'e>(
        db: impl Executor<'e, Database = DB>,
        session_id: Uuid,
        after_seq: i64,
        limit: u32,
    ) -> Result<Vec<Event>, StoreError> {
        let sql = format!(
            "SELECT {EVENT_COLUMNS} FROM events \
             WHERE session_id = $1 AND seq > $2 ORDER BY seq LIMIT $3"
        );
        let rows: Vec<EventRow> = sqlx::query_as(&sql)
            .bind(DbUuid(session_id))
            .bind(after_seq)
            .bind(i64::from(limit))
            .fetch_all(db)
            .await?;
        Ok(rows.into_iter().map(Event::from).collect())
    }

    pub async fn get_event<'e>(
        db: impl Executor<'e, Database = DB>,
        session_id: Uuid,
        seq: i64,
    ) -> Result<Option<Event>, StoreError> {
        let sql = format!("SELECT {EVENT_COLUMNS} FROM events WHERE session_id = $1 AND seq = $2");
        let row: Option<EventRow> = sqlx::query_as(&sql)
            .bind(DbUuid(session_id))
            .bind(seq)
            .fetch_optional(db)
            .await?;
        Ok(row.map(Event::from))
    }

    /// The session's `episode_start` and `episode_end` events in seq order, served by their
    /// partial index.
    pub async fn episode_events<'e>(
        db: impl Executor<'e, Database = DB>,
        session_id: Uuid,
    ) -> Result<Vec<Event>, StoreError> {
        let sql = format!(
            "SELECT {EVENT_COLUMNS} FROM events WHERE session_id = $1 \
             AND type IN ('episode_start', 'episode_end') ORDER BY seq"
        );
        let rows: Vec<EventRow> = sqlx::query_as(&sql)
            .bind(DbUuid(session_id))
            .fetch_all(db)
            .await?;
        Ok(rows.into_iter().map(Event::from).collect())
    }

    /// Served by the unique index on `(session_id, client_id)`, which also keeps appends
    /// idempotent.
    pub async fn get_event_by_client_id<'e>(
        db: impl Executor<'e, Database = DB>,
        session_id: Uuid,
        client_id: &str,
    ) -> Result<Option<Event>, StoreError> {
        let sql =
            format!("SELECT {EVENT_COLUMNS} FROM events WHERE session_id = $1 AND client_id = $2");
        let row: Option<EventRow> = sqlx::query_as(&sql)
            .bind(DbUuid(session_id))
            .bind(client_id.to_owned())
            .fetch_optional(db)
            .await?;
        Ok(row.map(Event::from))
    }

    /// Item rows with `after_seq < seq ≤ to_seq`, in seq order, at most `limit`.
    pub async fn item_rows<'e>(
        db: impl Executor<'e, Database = DB>,
        session_id: Uuid,
        after_seq: i64,
        to_seq: i64,
        limit: i64,
    ) -> Result<Vec<ItemRow>, StoreError> {
        let sql = format!(
            "SELECT {ITEM_COLUMNS} FROM events \
             WHERE session_id = $1 AND seq > $2 AND seq <= $3 ORDER BY seq LIMIT $4"
        );
        let rows: Vec<ItemColumns> = sqlx::query_as(&sql)
            .bind(DbUuid(session_id))
            .bind(after_seq)
            .bind(to_seq)
            .bind(limit)
            .fetch_all(db)
            .await?;
        rows.into_iter().map(ItemRow::try_from).collect()
    }

    /// Item rows with `after_seq < seq ≤ to_seq` and those at the seqs of `also`, in seq order.
    pub async fn view_item_rows<'e>(
        db: impl Executor<'e, Database = DB>,
        session_id: Uuid,
        after_seq: i64,
        to_seq: i64,
        also: &[i64],
    ) -> Result<Vec<ItemRow>, StoreError> {
        let (open, close) = DB::SEQ_IN;
        // Two index range scans rather than one scan of the session filtered by an OR.
        let sql = format!(
            "SELECT {ITEM_COLUMNS} FROM events WHERE session_id = $1 AND seq > $2 AND seq <= $3 \
             UNION ALL \
             SELECT {ITEM_COLUMNS} FROM events WHERE session_id = $1 AND seq <= $2 \
             AND seq {open}$4{close} \
             ORDER BY seq"
        );
        let rows: Vec<ItemColumns> = sqlx::query_as(&sql)
            .bind(DbUuid(session_id))
            .bind(after_seq)
            .bind(to_seq)
            .bind(DB::seq_list(also))
            .fetch_all(db)
            .await?;
        rows.into_iter().map(ItemRow::try_from).collect()
    }

    pub async fn load_state<'e>(
        db: impl Executor<'e, Database = DB>,
        session_id: Uuid,
    ) -> Result<StoredState, StoreError> {
        let row: Option<StateRow> =
            sqlx::query_as("SELECT version, state FROM compaction_states WHERE session_id = $1")
                .bind(DbUuid(session_id))
                .fetch_optional(db)
                .await?;
        Ok(row.map(StoredState::from).unwrap_or_default())
    }

    pub async fn load_session_state<'e>(
        db: impl Executor<'e, Database = DB>,
        session_id: Uuid,
    ) -> Result<Option<(Session, StoredState)>, StoreError> {
        let row: Option<SessionStateRow> = sqlx::query_as(
            "SELECT s.session_id, s.tenant, s.created_at, s.updated_at, s.config, s.metadata, s.head_seq, \
             s.total_tokens, c.version, c.state \
             FROM sessions s LEFT JOIN compaction_states c ON c.session_id = s.session_id \
             WHERE s.session_id = $1",
        )
        .bind(DbUuid(session_id))
        .fetch_optional(db)
        .await?;
        Ok(row.map(SessionStateRow::into_parts))
    }

    pub async fn session_since<'e>(
        db: impl Executor<'e, Database = DB>,
        session_id: Uuid,
        after_seq: i64,
    ) -> Result<Option<SessionSince>, StoreError> {
        // One round trip: the session row joined with its state's version and with the events
        // after `after_seq` (one row when there are none), read from one snapshot. A bounded
        // range of seqs is an index range scan in any plan.
        let rows: Vec<SessionEventRow> = sqlx::query_as(
            "SELECT s.session_id, s.tenant, s.created_at, s.updated_at, s.config, s.metadata, s.head_seq, \
             s.total_tokens, c.version, e.seq, e.client_id, e.body, e.pinned, \
             e.metadata AS event_metadata, e.tokens, e.created_at AS event_created_at \
             FROM sessions s \
             LEFT JOIN compaction_states c ON c.session_id = s.session_id \
             LEFT JOIN events e ON e.session_id = s.session_id AND e.seq > $2 AND e.seq <= $3 \
             WHERE s.session_id = $1 ORDER BY e.seq",
        )
        .bind(DbUuid(session_id))
        .bind(after_seq)
        .bind(after_seq + SESSION_SINCE_RANGE)
        .fetch_all(db)
        .await?;
        let mut rows = rows.into_iter();
        let Some(first) = rows.next() else {
            return Ok(None);
        };
        let version = first.version.unwrap_or(0);
        let mut events = Vec::with_capacity(rows.len() + 1);
        events.extend(first.event.into_event()?);
        for row in rows {
            events.extend(row.event.into_event()?);
        }
        Ok(Some(SessionSince {
            session: first.session.into(),
            version,
            // A full range may be followed by more.
            complete: events.len() < SESSION_SINCE_RANGE as usize,
            events,
        }))
    }

    /// Writes a compaction on a connection in a transaction the caller commits when this
    /// returns true.
    pub async fn save_compaction(
        tx: &mut DB::Connection,
        session_id: Uuid,
        expected_version: i64,
        state: &CompactionState,
        record: Option<&CompactionRecord>,
        folded: &[FoldedRange],
    ) -> Result<bool, StoreError> {
        let sid = DbUuid(session_id);
        // The write serialises compactions of one session; a writer that read an older version
        // changes nothing and is told so.
        let written = if expected_version == 0 {
            sqlx::query(
                "INSERT INTO compaction_states (session_id, version, state, updated_at) \
                 VALUES ($1, 1, $2, $3) ON CONFLICT (session_id) DO NOTHING",
            )
            .bind(sid)
            .bind(json(state)?)
            .bind(now())
            .execute(&mut *tx)
            .await?
        } else {
            sqlx::query(
                "UPDATE compaction_states SET version = version + 1, state = $3, updated_at = $4 \
                 WHERE session_id = $1 AND version = $2",
            )
            .bind(sid)
            .bind(expected_version)
            .bind(json(state)?)
            .bind(now())
            .execute(&mut *tx)
            .await?
        };
        if DB::rows_affected(&written) == 0 {
            return Ok(false);
        }
        if let Some(record) = record {
            sqlx::query(
                "INSERT INTO compactions (session_id, compaction_id, created_at, record) \
                 VALUES ($1, $2, $3, $4)",
            )
            .bind(sid)
            .bind(DbUuid(record.id))
            .bind(record.created_at)
            .bind(json(record)?)
            .execute(&mut *tx)
            .await?;
        }
        for range in folded {
            sqlx::query(
                "INSERT INTO folded_ranges (session_id, from_seq, to_seq, compaction_id, reason) \
                 VALUES ($1, $2, $3, $4, $5)",
            )
            .bind(sid)
            .bind(range.from_seq)
            .bind(range.to_seq)
            .bind(DbUuid(range.compaction_id))
            .bind(reason_text(range.reason)?)
            .execute(&mut *tx)
            .await?;
        }
        Ok(true)
    }

    pub async fn list_compactions<'e>(
        db: impl Executor<'e, Database = DB>,
        session_id: Uuid,
        before: Option<Uuid>,
        limit: u32,
    ) -> Result<Vec<CompactionRecord>, StoreError> {
        // Every id is below the largest UUID, so no cursor and the largest read the same.
        let rows: Vec<RecordRow> = sqlx::query_as(
            "SELECT record FROM compactions WHERE session_id = $1 AND compaction_id < $2 \
             ORDER BY compaction_id DESC LIMIT $3",
        )
        .bind(DbUuid(session_id))
        .bind(DbUuid(before.unwrap_or(Uuid::max())))
        .bind(i64::from(limit))
        .fetch_all(db)
        .await?;
        Ok(rows.into_iter().map(CompactionRecord::from).collect())
    }

    pub async fn get_compaction<'e>(
        db: impl Executor<'e, Database = DB>,
        session_id: Uuid,
        id: Uuid,
    ) -> Result<Option<CompactionRecord>, StoreError> {
        let row: Option<RecordRow> = sqlx::query_as(
            "SELECT record FROM compactions WHERE session_id = $1 AND compaction_id = $2",
        )
        .bind(DbUuid(session_id))
        .bind(DbUuid(id))
        .fetch_optional(db)
        .await?;
        Ok(row.map(CompactionRecord::from))
    }

    /// Adds `job` unless the session has one at its checkpoint already; whether it was added.
    pub async fn enqueue_summary_job<'e>(
        db: impl Executor<'e, Database = DB>,
        job: &SummaryJob,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "INSERT INTO summary_jobs (session_id, checkpoint_seq, to_seq, previous, max_chars, \
             status, created_at) VALUES ($1, $2, $3, $4, $5, 'pending', $6) \
             ON CONFLICT (session_id, checkpoint_seq) DO NOTHING",
        )
        .bind(DbUuid(job.session_id))
        .bind(job.checkpoint_seq)
        .bind(job.to_seq)
        .bind(json(&job.previous)?)
        .bind(i64::try_from(job.max_chars).unwrap_or(i64::MAX))
        .bind(now())
        .execute(db)
        .await?;
        Ok(DB::rows_affected(&done) > 0)
    }

    /// Claims the oldest job that is pending, or whose lease ran out (its replica died), for
    /// `lease_ms` from `now_ms`; jobs tried `max_attempts` times are left.
    pub async fn claim_summary_job<'e>(
        db: impl Executor<'e, Database = DB>,
        now_ms: i64,
        lease_ms: i64,
        max_attempts: i64,
    ) -> Result<Option<SummaryJob>, StoreError> {
        let query = format!(
            "UPDATE summary_jobs SET status = 'running', attempts = attempts + 1, \
             lease_until = $1 WHERE (session_id, checkpoint_seq) = (\
             SELECT session_id, checkpoint_seq FROM summary_jobs \
             WHERE (status = 'pending' OR (status = 'running' AND lease_until < $2)) \
             AND attempts < $3 ORDER BY created_at LIMIT 1{}) \
             RETURNING session_id, checkpoint_seq, to_seq, previous, max_chars, status, result",
            DB::SKIP_LOCKED
        );
        let row: Option<JobRow> = sqlx::query_as(&query)
            .bind(now_ms + lease_ms)
            .bind(now_ms)
            .bind(max_attempts)
            .fetch_optional(db)
            .await?;
        Ok(row.map(|r| r.job()))
    }

    /// Ends a job with the summary it prepared, or as failed.
    pub async fn finish_summary_job<'e>(
        db: impl Executor<'e, Database = DB>,
        job: &SummaryJob,
        prepared: Option<&PreparedSummary>,
    ) -> Result<(), StoreError> {
        let result = prepared.map(json).transpose()?;
        let status = if prepared.is_some() { "done" } else { "failed" };
        sqlx::query(
            "UPDATE summary_jobs SET status = $3, result = $4, lease_until = 0 \
             WHERE session_id = $1 AND checkpoint_seq = $2",
        )
        .bind(DbUuid(job.session_id))
        .bind(job.checkpoint_seq)
        .bind(status.to_owned())
        .bind(result)
        .execute(db)
        .await?;
        Ok(())
    }

    /// The session's job at `checkpoint_seq`, and where it stands.
    pub async fn summary_job<'e>(
        db: impl Executor<'e, Database = DB>,
        session_id: Uuid,
        checkpoint_seq: i64,
    ) -> Result<Option<(SummaryJob, JobStatus)>, StoreError> {
        let row: Option<JobRow> = sqlx::query_as(
            "SELECT session_id, checkpoint_seq, to_seq, previous, max_chars, status, result \
             FROM summary_jobs WHERE session_id = $1 AND checkpoint_seq = $2",
        )
        .bind(DbUuid(session_id))
        .bind(checkpoint_seq)
        .fetch_optional(db)
        .await?;
        Ok(row.map(|r| (r.job(), r.status())))
    }

    /// The folded ranges that hold a seq in `from_seq..=to_seq`, in seq order.
    pub async fn folded_ranges<'e>(
        db: impl Executor<'e, Database = DB>,
        session_id: Uuid,
        from_seq: i64,
        to_seq: i64,
    ) -> Result<Vec<FoldedRange>, StoreError> {
        // Ranges are disjoint and ordered, so the first one to read is the last that starts at
        // or before `from_seq`: both bounds are index range scans.
        let rows: Vec<FoldedRangeRow> = sqlx::query_as(
            "SELECT from_seq, to_seq, compaction_id, reason FROM folded_ranges \
             WHERE session_id = $1 AND from_seq <= $3 AND to_seq >= $2 AND from_seq >= \
               coalesce((SELECT max(from_seq) FROM folded_ranges \
                         WHERE session_id = $1 AND from_seq <= $2), $2) \
             ORDER BY from_seq",
        )
        .bind(DbUuid(session_id))
        .bind(from_seq)
        .bind(to_seq)
        .fetch_all(db)
        .await?;
        rows.into_iter().map(FoldedRange::try_from).collect()
    }
}

fn reason_text(reason: crate::domain::compaction::Reason) -> Result<String, StoreError> {
    match serde_json::to_value(reason) {
        Ok(serde_json::Value::String(text)) => Ok(text),
        other => Err(StoreError::Corrupt(format!(
            "encoding reason {reason:?}: {other:?}"
        ))),
    }
}
