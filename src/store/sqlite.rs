//! The SQLite store: the embedded default, so that `ctxd serve` needs nothing else installed.
//!
//! Writes go through a single-connection pool and `BEGIN IMMEDIATE`, so concurrent appends
//! queue for the write lock instead of failing; reads use their own pool (WAL mode).

use chrono::{DateTime, Utc};
use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteQueryResult,
    SqliteSynchronous,
};
use sqlx::Sqlite;
use uuid::Uuid;

use super::rows::{DbUuid, EventRow};
use super::sql::{Dialect, Sql};
use super::{
    event_inserts, fold_call_rows, now, AppendError, AppendOutcome, ItemRow, SessionFilter,
    SessionSince, Store, StoreError, StoredState,
};
use crate::auth::{ApiKey, StoredKey, Tenant};
use crate::domain::append::{
    client_ids, has_episode_events, plan_append, referenced_call_ids, CountedEvent, LogFacts,
};
use crate::domain::compaction::CompactionRecord;
use crate::domain::episodes::Episodes;
use crate::domain::event::Event;
use crate::domain::session::{NewSession, Session};
use crate::domain::state::{CompactionState, FoldedRange, JobStatus, PreparedSummary, SummaryJob};

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("migrations/sqlite");

const EVENT_COLUMNS: &str = "seq, client_id, body, pinned, metadata, tokens, created_at";

type Q = Sql<Sqlite>;

impl Dialect for Sqlite {
    /// A JSON array, read with `json_each`.
    type SeqList = String;
    const SEQ_IN: (&'static str, &'static str) = ("IN (SELECT value FROM json_each(", "))");

    const SKIP_LOCKED: &'static str = "";
    const LABELS_INCLUDE: (&'static str, &'static str) = (
        "NOT EXISTS (SELECT 1 FROM json_each(",
        ") l WHERE NOT EXISTS (SELECT 1 FROM json_each(sessions.metadata) m \
         WHERE m.key = l.key AND m.value = l.value))",
    );

    fn seq_list(seqs: &[i64]) -> String {
        serde_json::Value::from(seqs.to_vec()).to_string()
    }

    fn rows_affected(done: &SqliteQueryResult) -> u64 {
        done.rows_affected()
    }
}

pub struct SqliteStore {
    writer: SqlitePool,
    reader: SqlitePool,
}

impl SqliteStore {
    pub async fn connect(url: &str, max_connections: u32) -> Result<Self, StoreError> {
        let options = SqliteConnectOptions::from_str(url)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(30))
            .foreign_keys(true);
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(options.clone())
            .await?;
        // An in-memory database exists once per connection: share the writer.
        let reader = if url.contains(":memory:") || url.contains("mode=memory") {
            writer.clone()
        } else {
            SqlitePoolOptions::new()
                .max_connections(max_connections.max(1))
                .connect_with(options.read_only(true))
                .await?
        };
        Ok(Self { writer, reader })
    }
}

fn json_array(items: &[String]) -> String {
    serde_json::Value::from(items.to_vec()).to_string()
}

#[async_trait]
impl Store for SqliteStore {
    fn backend(&self) -> &'static str {
        "sqlite"
    }

    async fn migrate(&self) -> Result<(), StoreError> {
        MIGRATOR.run(&self.writer).await?;
        Ok(())
    }

    async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1").execute(&self.reader).await?;
        Ok(())
    }

    fn pool_status(&self) -> (u32, usize) {
        let pools = [&self.reader, &self.writer];
        (
            pools.iter().map(|p| p.size()).sum(),
            pools.iter().map(|p| p.num_idle()).sum(),
        )
    }

    async fn create_session(&self, new: &NewSession, tenant: &str) -> Result<Session, StoreError> {
        Q::create_session(&self.writer, new, tenant).await
    }

    async fn create_tenant(&self, tenant: &str) -> Result<Option<Tenant>, StoreError> {
        Q::create_tenant(&self.writer, tenant).await
    }

    async fn list_tenants(&self) -> Result<Vec<Tenant>, StoreError> {
        Q::list_tenants(&self.reader).await
    }

    async fn create_key(&self, key: &StoredKey) -> Result<(), StoreError> {
        Q::create_key(&self.writer, key).await
    }

    async fn get_key(&self, id: &str) -> Result<Option<StoredKey>, StoreError> {
        Q::get_key(&self.reader, id).await
    }

    async fn list_keys(&self, tenant: Option<&str>) -> Result<Vec<ApiKey>, StoreError> {
        Q::list_keys(&self.reader, tenant).await
    }

    async fn revoke_key(&self, id: &str) -> Result<bool, StoreError> {
        Q::revoke_key(&self.writer, id).await
    }

    async fn any_keys(&self) -> Result<bool, StoreError> {
        Q::any_keys(&self.reader).await
    }

    async fn get_session(&self, id: Uuid) -> Result<Option<Session>, StoreError> {
        Q::get_session(&self.reader, id).await
    }

    async fn list_sessions(&self, filter: &SessionFilter) -> Result<Vec<Session>, StoreError> {
        Q::list_sessions(&self.reader, filter).await
    }

    async fn delete_session(&self, id: Uuid) -> Result<bool, StoreError> {
        Q::delete_session(&self.writer, id).await
    }

    async fn delete_idle_sessions(
        &self,
        idle_since: DateTime<Utc>,
        limit: u32,
    ) -> Result<u64, StoreError> {
        Q::delete_idle_sessions(&self.writer, idle_since, limit).await
    }

    async fn append_events(
        &self,
        session_id: Uuid,
        batch: &[CountedEvent],
        expected_seq: Option<i64>,
    ) -> Result<AppendOutcome, AppendError> {
        let sid = session_id.to_string();
        // IMMEDIATE takes the write lock up front: a deferred transaction that read first could
        // not upgrade while another process writes.
        let mut tx = self.writer.begin_with("BEGIN IMMEDIATE").await?;
        let head_seq: i64 =
            sqlx::query_scalar("SELECT head_seq FROM sessions WHERE session_id = ?1")
                .bind(&sid)
                .fetch_optional(&mut *tx)
                .await?
                .ok_or(AppendError::SessionNotFound)?;

        let mut facts = LogFacts {
            head_seq,
            ..LogFacts::default()
        };
        let ids = client_ids(batch);
        if !ids.is_empty() {
            let rows: Vec<EventRow> = sqlx::query_as(&format!(
                "SELECT {EVENT_COLUMNS} FROM events WHERE session_id = ?1 \
                 AND client_id IN (SELECT value FROM json_each(?2))"
            ))
            .bind(&sid)
            .bind(json_array(&ids))
            .fetch_all(&mut *tx)
            .await?;
            for row in rows {
                let event = Event::from(row);
                if let Some(id) = event.id.clone() {
                    facts.existing.insert(id, event);
                }
            }
        }
        let call_ids = referenced_call_ids(batch);
        if !call_ids.is_empty() {
            let rows: Vec<(String, i64, Option<i64>)> = sqlx::query_as(
                "SELECT call_id, call_seq, result_seq FROM tool_calls \
                 WHERE session_id = ?1 AND call_id IN (SELECT value FROM json_each(?2))",
            )
            .bind(&sid)
            .bind(json_array(&call_ids))
            .fetch_all(&mut *tx)
            .await?;
            facts.calls = fold_call_rows(rows);
        }

        if has_episode_events(batch) {
            facts.episodes = Episodes::from_events(&Q::episode_events(&mut *tx, session_id).await?);
        }
        let plan = plan_append(batch, expected_seq, &facts).map_err(AppendError::Rejected)?;
        if plan.inserts.is_empty() {
            return Ok(AppendOutcome {
                head_seq,
                acks: plan.acks,
            });
        }

        let now = now();
        for row in event_inserts(batch, &plan.inserts)? {
            sqlx::query(
                "INSERT INTO events (session_id, seq, client_id, type, role, body, pinned, \
                 metadata, tokens, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            )
            .bind(&sid)
            .bind(row.seq)
            .bind(row.client_id)
            .bind(row.event_type)
            .bind(row.role)
            .bind(row.body)
            .bind(row.pinned)
            .bind(row.metadata)
            .bind(row.tokens)
            .bind(now)
            .execute(&mut *tx)
            .await?;
        }
        // Close stored calls before opening new ones (see the Postgres store).
        for (call_id, call_seq, result_seq) in &plan.answered_calls {
            sqlx::query(
                "UPDATE tool_calls SET result_seq = ?4 \
                 WHERE session_id = ?1 AND call_id = ?2 AND call_seq = ?3",
            )
            .bind(&sid)
            .bind(call_id)
            .bind(call_seq)
            .bind(result_seq)
            .execute(&mut *tx)
            .await?;
        }
        for call in &plan.new_calls {
            sqlx::query(
                "INSERT INTO tool_calls (session_id, call_id, call_seq, result_seq) \
                 VALUES (?1, ?2, ?3, ?4)",
            )
            .bind(&sid)
            .bind(&call.call_id)
            .bind(call.call_seq)
            .bind(call.result_seq)
            .execute(&mut *tx)
            .await?;
        }
        sqlx::query(
            "UPDATE sessions SET head_seq = ?2, total_tokens = total_tokens + ?3, updated_at = ?4 \
             WHERE session_id = ?1",
        )
        .bind(&sid)
        .bind(plan.new_head_seq)
        .bind(plan.added_tokens)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(AppendOutcome {
            head_seq: plan.new_head_seq,
            acks: plan.acks,
        })
    }

    async fn list_events(
        &self,
        session_id: Uuid,
        after_seq: i64,
        limit: u32,
    ) -> Result<Vec<Event>, StoreError> {
        Q::list_events(&self.reader, session_id, after_seq, limit).await
    }

    async fn get_event(&self, session_id: Uuid, seq: i64) -> Result<Option<Event>, StoreError> {
        Q::get_event(&self.reader, session_id, seq).await
    }

    async fn get_event_by_client_id(
        &self,
        session_id: Uuid,
        client_id: &str,
    ) -> Result<Option<Event>, StoreError> {
        Q::get_event_by_client_id(&self.reader, session_id, client_id).await
    }

    async fn item_rows(
        &self,
        session_id: Uuid,
        after_seq: i64,
        to_seq: i64,
        limit: u32,
    ) -> Result<Vec<ItemRow>, StoreError> {
        Q::item_rows(&self.reader, session_id, after_seq, to_seq, limit.into()).await
    }

    async fn view_item_rows(
        &self,
        session_id: Uuid,
        after_seq: i64,
        to_seq: i64,
        also: &[i64],
    ) -> Result<Vec<ItemRow>, StoreError> {
        Q::view_item_rows(&self.reader, session_id, after_seq, to_seq, also).await
    }

    async fn load_state(&self, session_id: Uuid) -> Result<StoredState, StoreError> {
        Q::load_state(&self.reader, session_id).await
    }

    async fn load_session_state(
        &self,
        session_id: Uuid,
    ) -> Result<Option<(Session, StoredState)>, StoreError> {
        Q::load_session_state(&self.reader, session_id).await
    }

    async fn session_since(
        &self,
        session_id: Uuid,
        after_seq: i64,
    ) -> Result<Option<SessionSince>, StoreError> {
        Q::session_since(&self.reader, session_id, after_seq).await
    }

    async fn view_events(
        &self,
        session_id: Uuid,
        after_seq: i64,
        also: &[i64],
    ) -> Result<Vec<Event>, StoreError> {
        // Two index range scans rather than one scan of the session filtered by an OR.
        let rows: Vec<EventRow> = sqlx::query_as(&format!(
            "SELECT {EVENT_COLUMNS} FROM events WHERE session_id = ?1 AND seq > ?2 \
             UNION ALL \
             SELECT {EVENT_COLUMNS} FROM events WHERE session_id = ?1 AND seq <= ?2 \
             AND seq IN (SELECT value FROM json_each(?3)) \
             ORDER BY seq"
        ))
        .bind(DbUuid(session_id))
        .bind(after_seq)
        .bind(Sqlite::seq_list(also))
        .fetch_all(&self.reader)
        .await?;
        Ok(rows.into_iter().map(Event::from).collect())
    }

    async fn save_compaction(
        &self,
        session_id: Uuid,
        expected_version: i64,
        state: &CompactionState,
        record: Option<&CompactionRecord>,
        folded: &[FoldedRange],
    ) -> Result<bool, StoreError> {
        let mut tx = self.writer.begin_with("BEGIN IMMEDIATE").await?;
        let written =
            Q::save_compaction(&mut tx, session_id, expected_version, state, record, folded)
                .await?;
        if written {
            tx.commit().await?;
        }
        Ok(written)
    }

    async fn list_compactions(
        &self,
        session_id: Uuid,
        before: Option<Uuid>,
        limit: u32,
    ) -> Result<Vec<CompactionRecord>, StoreError> {
        Q::list_compactions(&self.reader, session_id, before, limit).await
    }

    async fn compactions_after(
        &self,
        session_id: Uuid,
        after: Option<Uuid>,
        limit: u32,
    ) -> Result<Vec<CompactionRecord>, StoreError> {
        Q::compactions_after(&self.reader, session_id, after, limit).await
    }

    async fn get_compaction(
        &self,
        session_id: Uuid,
        id: Uuid,
    ) -> Result<Option<CompactionRecord>, StoreError> {
        Q::get_compaction(&self.reader, session_id, id).await
    }

    async fn enqueue_summary_job(&self, job: &SummaryJob) -> Result<bool, StoreError> {
        Q::enqueue_summary_job(&self.writer, job).await
    }

    async fn claim_summary_job(
        &self,
        now_ms: i64,
        lease_ms: i64,
        max_attempts: i64,
    ) -> Result<Option<SummaryJob>, StoreError> {
        Q::claim_summary_job(&self.writer, now_ms, lease_ms, max_attempts).await
    }

    async fn finish_summary_job(
        &self,
        job: &SummaryJob,
        prepared: Option<&PreparedSummary>,
    ) -> Result<(), StoreError> {
        Q::finish_summary_job(&self.writer, job, prepared).await
    }

    async fn summary_job(
        &self,
        session_id: Uuid,
        checkpoint_seq: i64,
    ) -> Result<Option<(SummaryJob, JobStatus)>, StoreError> {
        Q::summary_job(&self.reader, session_id, checkpoint_seq).await
    }

    async fn folded_ranges(
        &self,
        session_id: Uuid,
        from_seq: i64,
        to_seq: i64,
    ) -> Result<Vec<FoldedRange>, StoreError> {
        Q::folded_ranges(&self.reader, session_id, from_seq, to_seq).await
    }

    async fn episode_events(&self, session_id: Uuid) -> Result<Vec<Event>, StoreError> {
        Q::episode_events(&self.reader, session_id).await
    }
}
