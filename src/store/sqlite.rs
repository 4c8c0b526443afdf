//! The SQLite store: the embedded default, so that `ctxd serve` needs nothing else installed.
//!
//! Writes go through a single-connection pool and `BEGIN IMMEDIATE`, so concurrent appends
//! queue for the write lock instead of failing; reads use their own pool (WAL mode).

use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteRow,
    SqliteSynchronous,
};
use sqlx::{QueryBuilder, Row, Sqlite};
use uuid::Uuid;

use super::{
    decode, encode, event_inserts, fold_call_rows, folded_range, item_row, now, reason_text,
    session_since_rows, stored_state, AppendError, AppendOutcome, EventRow, ItemRow, SessionFilter,
    SessionRow, SessionSince, Store, StoreError, StoredState, SESSION_STATE_COLUMNS,
};
use crate::domain::append::{client_ids, plan_append, referenced_call_ids, CountedEvent, LogFacts};
use crate::domain::compaction::CompactionRecord;
use crate::domain::event::Event;
use crate::domain::session::{NewSession, Session};
use crate::domain::state::{CompactionState, FoldedRange};

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("migrations/sqlite");

const SESSION_COLUMNS: &str =
    "session_id, created_at, updated_at, config, metadata, head_seq, total_tokens";
const EVENT_COLUMNS: &str = "seq, client_id, body, pinned, metadata, tokens, created_at";

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

fn parse_uuid(text: &str) -> Result<Uuid, StoreError> {
    Uuid::parse_str(text).map_err(|e| StoreError::Corrupt(format!("session id `{text}`: {e}")))
}

fn session_row(row: SqliteRow) -> Result<Session, StoreError> {
    let id: String = row.try_get("session_id")?;
    SessionRow {
        session_id: parse_uuid(&id)?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
        config: row.try_get("config")?,
        metadata: row.try_get("metadata")?,
        head_seq: row.try_get("head_seq")?,
        total_tokens: row.try_get("total_tokens")?,
    }
    .into_session()
}

fn event_row(row: SqliteRow) -> Result<Event, StoreError> {
    event_columns(&row, "metadata", "created_at")
}

/// An event from a row whose event metadata and creation time are named `metadata` and
/// `created_at` (rows that also hold a session's columns name them otherwise).
fn event_columns(row: &SqliteRow, metadata: &str, created_at: &str) -> Result<Event, StoreError> {
    EventRow {
        seq: row.try_get("seq")?,
        client_id: row.try_get("client_id")?,
        body: row.try_get("body")?,
        pinned: row.try_get("pinned")?,
        metadata: row.try_get(metadata)?,
        tokens: row.try_get("tokens")?,
        created_at: row.try_get(created_at)?,
    }
    .into_event()
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

    async fn create_session(&self, new: &NewSession) -> Result<Session, StoreError> {
        let now = now();
        let session = Session {
            id: Uuid::now_v7(),
            created_at: now,
            updated_at: now,
            config: new.config.clone(),
            metadata: new.metadata.clone(),
            head_seq: 0,
            total_tokens: 0,
        };
        sqlx::query(
            "INSERT INTO sessions (session_id, created_at, updated_at, config, metadata) \
             VALUES (?1, ?2, ?2, ?3, ?4)",
        )
        .bind(session.id.to_string())
        .bind(now)
        .bind(sqlx::types::Json(&session.config))
        .bind(sqlx::types::Json(&session.metadata))
        .execute(&self.writer)
        .await?;
        Ok(session)
    }

    async fn get_session(&self, id: Uuid) -> Result<Option<Session>, StoreError> {
        sqlx::query(&format!(
            "SELECT {SESSION_COLUMNS} FROM sessions WHERE session_id = ?1"
        ))
        .bind(id.to_string())
        .fetch_optional(&self.reader)
        .await?
        .map(session_row)
        .transpose()
    }

    async fn list_sessions(&self, filter: &SessionFilter) -> Result<Vec<Session>, StoreError> {
        let mut q: QueryBuilder<Sqlite> =
            QueryBuilder::new(format!("SELECT {SESSION_COLUMNS} FROM sessions WHERE 1"));
        for (key, value) in &filter.labels {
            q.push(" AND EXISTS (SELECT 1 FROM json_each(sessions.metadata) WHERE key = ")
                .push_bind(key)
                .push(" AND value = ")
                .push_bind(value)
                .push(")");
        }
        if let Some(before) = filter.before {
            q.push(" AND session_id < ").push_bind(before.to_string());
        }
        q.push(" ORDER BY session_id DESC LIMIT ")
            .push_bind(i64::from(filter.limit));
        q.build()
            .fetch_all(&self.reader)
            .await?
            .into_iter()
            .map(session_row)
            .collect()
    }

    async fn delete_session(&self, id: Uuid) -> Result<bool, StoreError> {
        let done = sqlx::query("DELETE FROM sessions WHERE session_id = ?1")
            .bind(id.to_string())
            .execute(&self.writer)
            .await?;
        Ok(done.rows_affected() > 0)
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
            let rows = sqlx::query(&format!(
                "SELECT {EVENT_COLUMNS} FROM events WHERE session_id = ?1 \
                 AND client_id IN (SELECT value FROM json_each(?2))"
            ))
            .bind(&sid)
            .bind(json_array(&ids))
            .fetch_all(&mut *tx)
            .await?;
            for row in rows {
                let event = event_row(row)?;
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
        sqlx::query(&format!(
            "SELECT {EVENT_COLUMNS} FROM events \
             WHERE session_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3"
        ))
        .bind(session_id.to_string())
        .bind(after_seq)
        .bind(i64::from(limit))
        .fetch_all(&self.reader)
        .await?
        .into_iter()
        .map(event_row)
        .collect()
    }

    async fn get_event(&self, session_id: Uuid, seq: i64) -> Result<Option<Event>, StoreError> {
        sqlx::query(&format!(
            "SELECT {EVENT_COLUMNS} FROM events WHERE session_id = ?1 AND seq = ?2"
        ))
        .bind(session_id.to_string())
        .bind(seq)
        .fetch_optional(&self.reader)
        .await?
        .map(event_row)
        .transpose()
    }

    async fn item_rows(&self, session_id: Uuid) -> Result<Vec<ItemRow>, StoreError> {
        let rows: Vec<(i64, Option<String>, String, Option<String>, bool, i64)> = sqlx::query_as(
            "SELECT seq, client_id, type, role, pinned, tokens FROM events \
             WHERE session_id = ?1 ORDER BY seq",
        )
        .bind(session_id.to_string())
        .fetch_all(&self.reader)
        .await?;
        rows.into_iter().map(item_row).collect()
    }

    async fn load_state(&self, session_id: Uuid) -> Result<StoredState, StoreError> {
        let row: Option<(i64, String)> =
            sqlx::query_as("SELECT version, state FROM compaction_states WHERE session_id = ?1")
                .bind(session_id.to_string())
                .fetch_optional(&self.reader)
                .await?;
        stored_state(row)
    }

    async fn load_session_state(
        &self,
        session_id: Uuid,
    ) -> Result<Option<(Session, StoredState)>, StoreError> {
        let Some(row) = sqlx::query(&format!(
            "SELECT {SESSION_STATE_COLUMNS} FROM sessions s \
             LEFT JOIN compaction_states c ON c.session_id = s.session_id \
             WHERE s.session_id = ?1"
        ))
        .bind(session_id.to_string())
        .fetch_optional(&self.reader)
        .await?
        else {
            return Ok(None);
        };
        let state = stored_state(match row.try_get::<Option<i64>, _>("version")? {
            Some(version) => Some((version, row.try_get("state")?)),
            None => None,
        })?;
        Ok(Some((session_row(row)?, state)))
    }

    async fn session_since(
        &self,
        session_id: Uuid,
        after_seq: i64,
    ) -> Result<Option<SessionSince>, StoreError> {
        let rows = sqlx::query(
            "SELECT s.session_id, s.created_at, s.updated_at, s.config, s.metadata, s.head_seq, \
             s.total_tokens, c.version, e.seq, e.client_id, e.body, e.pinned, \
             e.metadata AS event_metadata, e.tokens, e.created_at AS event_created_at \
             FROM sessions s \
             LEFT JOIN compaction_states c ON c.session_id = s.session_id \
             LEFT JOIN events e ON e.session_id = s.session_id AND e.seq > ?2 \
             WHERE s.session_id = ?1 ORDER BY e.seq",
        )
        .bind(session_id.to_string())
        .bind(after_seq)
        .fetch_all(&self.reader)
        .await?;
        session_since_rows(rows, session_row, |row| {
            event_columns(row, "event_metadata", "event_created_at")
        })
    }

    async fn view_events(
        &self,
        session_id: Uuid,
        after_seq: i64,
        also: &[i64],
    ) -> Result<Vec<Event>, StoreError> {
        // Two index range scans rather than one scan of the session filtered by an OR.
        sqlx::query(&format!(
            "SELECT {EVENT_COLUMNS} FROM events WHERE session_id = ?1 AND seq > ?2 \
             UNION ALL \
             SELECT {EVENT_COLUMNS} FROM events WHERE session_id = ?1 AND seq <= ?2 \
             AND seq IN (SELECT value FROM json_each(?3)) \
             ORDER BY seq"
        ))
        .bind(session_id.to_string())
        .bind(after_seq)
        .bind(serde_json::Value::from(also.to_vec()).to_string())
        .fetch_all(&self.reader)
        .await?
        .into_iter()
        .map(event_row)
        .collect()
    }

    async fn save_compaction(
        &self,
        session_id: Uuid,
        expected_version: i64,
        state: &CompactionState,
        record: Option<&CompactionRecord>,
        folded: &[FoldedRange],
    ) -> Result<bool, StoreError> {
        let sid = session_id.to_string();
        let mut tx = self.writer.begin_with("BEGIN IMMEDIATE").await?;
        let state_json = encode(state)?;
        let written = if expected_version == 0 {
            sqlx::query(
                "INSERT INTO compaction_states (session_id, version, state, updated_at) \
                 VALUES (?1, 1, ?2, ?3) ON CONFLICT (session_id) DO NOTHING",
            )
            .bind(&sid)
            .bind(&state_json)
            .bind(now())
            .execute(&mut *tx)
            .await?
        } else {
            sqlx::query(
                "UPDATE compaction_states SET version = version + 1, state = ?3, updated_at = ?4 \
                 WHERE session_id = ?1 AND version = ?2",
            )
            .bind(&sid)
            .bind(expected_version)
            .bind(&state_json)
            .bind(now())
            .execute(&mut *tx)
            .await?
        };
        if written.rows_affected() == 0 {
            return Ok(false);
        }
        if let Some(record) = record {
            sqlx::query(
                "INSERT INTO compactions (session_id, compaction_id, created_at, record) \
                 VALUES (?1, ?2, ?3, ?4)",
            )
            .bind(&sid)
            .bind(record.id.to_string())
            .bind(record.created_at)
            .bind(encode(record)?)
            .execute(&mut *tx)
            .await?;
        }
        for range in folded {
            sqlx::query(
                "INSERT INTO folded_ranges (session_id, from_seq, to_seq, compaction_id, reason) \
                 VALUES (?1, ?2, ?3, ?4, ?5)",
            )
            .bind(&sid)
            .bind(range.from_seq)
            .bind(range.to_seq)
            .bind(range.compaction_id.to_string())
            .bind(reason_text(range.reason)?)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(true)
    }

    async fn list_compactions(
        &self,
        session_id: Uuid,
        before: Option<Uuid>,
        limit: u32,
    ) -> Result<Vec<CompactionRecord>, StoreError> {
        let rows: Vec<(String,)> = sqlx::query_as(
            "SELECT record FROM compactions WHERE session_id = ?1 \
             AND (?2 IS NULL OR compaction_id < ?2) ORDER BY compaction_id DESC LIMIT ?3",
        )
        .bind(session_id.to_string())
        .bind(before.map(|b| b.to_string()))
        .bind(i64::from(limit))
        .fetch_all(&self.reader)
        .await?;
        rows.iter()
            .map(|(record,)| decode("compaction record", record))
            .collect()
    }

    async fn get_compaction(
        &self,
        session_id: Uuid,
        id: Uuid,
    ) -> Result<Option<CompactionRecord>, StoreError> {
        let row: Option<(String,)> = sqlx::query_as(
            "SELECT record FROM compactions WHERE session_id = ?1 AND compaction_id = ?2",
        )
        .bind(session_id.to_string())
        .bind(id.to_string())
        .fetch_optional(&self.reader)
        .await?;
        row.map(|(record,)| decode("compaction record", &record))
            .transpose()
    }

    async fn folded_ranges(&self, session_id: Uuid) -> Result<Vec<FoldedRange>, StoreError> {
        let rows: Vec<(i64, i64, String, String)> = sqlx::query_as(
            "SELECT from_seq, to_seq, compaction_id, reason FROM folded_ranges \
             WHERE session_id = ?1 ORDER BY from_seq",
        )
        .bind(session_id.to_string())
        .fetch_all(&self.reader)
        .await?;
        rows.into_iter()
            .map(|(from_seq, to_seq, compaction_id, reason)| {
                let id = Uuid::parse_str(&compaction_id)
                    .map_err(|e| StoreError::Corrupt(format!("compaction id: {e}")))?;
                folded_range(from_seq, to_seq, id, &reason)
            })
            .collect()
    }
}
