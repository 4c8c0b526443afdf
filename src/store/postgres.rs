//! The PostgreSQL store: production storage, safe for many replicas.

use async_trait::async_trait;
use sqlx::postgres::{PgPool, PgPoolOptions, PgRow};
use sqlx::{Postgres, QueryBuilder, Row};
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

/// A stored event as the append's fact lookup returns it (JSON built by the database).
#[derive(serde::Deserialize)]
struct StoredEvent {
    seq: i64,
    id: Option<String>,
    body: crate::domain::event::EventBody,
    pinned: bool,
    metadata: Option<serde_json::Map<String, serde_json::Value>>,
    tokens: i64,
    created_at: chrono::DateTime<chrono::Utc>,
}

impl StoredEvent {
    fn into_event(self) -> Event {
        Event {
            seq: self.seq,
            id: self.id,
            body: self.body,
            pinned: self.pinned,
            metadata: self.metadata,
            tokens: self.tokens,
            created_at: self.created_at,
        }
    }
}

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("migrations/postgres");

const SESSION_COLUMNS: &str = "session_id, created_at, updated_at, config::text AS config, \
     metadata::text AS metadata, head_seq, total_tokens";
/// Events are read after a seq in ranges of this many seqs (see `view_events`).
const RANGE: i64 = 1_000;
const EVENT_COLUMNS: &str =
    "seq, client_id, body::text AS body, pinned, metadata::text AS metadata, tokens, created_at";

pub struct PostgresStore {
    pool: PgPool,
}

impl PostgresStore {
    pub async fn connect(url: &str, max_connections: u32) -> Result<Self, StoreError> {
        let pool = Self::pool_options(max_connections).connect(url).await?;
        Ok(Self { pool })
    }

    /// The connection pool settings ctxd runs with.
    pub fn pool_options(max_connections: u32) -> PgPoolOptions {
        PgPoolOptions::new()
            .max_connections(max_connections)
            // No ping before handing out a connection: it doubles the round trips of the short
            // queries a compact call makes. A connection that died fails the query that uses it
            // (the request answers 503 and the connection is dropped), as a ping would only
            // narrow, not close, that window.
            .test_before_acquire(false)
    }

    /// A store over an existing pool (tests point it at their own schema).
    pub fn from_pool(pool: PgPool) -> Self {
        Self { pool }
    }
}

fn session_row(row: PgRow) -> Result<Session, StoreError> {
    SessionRow {
        session_id: row.try_get("session_id")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
        config: row.try_get("config")?,
        metadata: row.try_get("metadata")?,
        head_seq: row.try_get("head_seq")?,
        total_tokens: row.try_get("total_tokens")?,
    }
    .into_session()
}

fn event_row(row: PgRow) -> Result<Event, StoreError> {
    event_columns(&row, "metadata", "created_at")
}

/// An event from a row whose event metadata and creation time are named `metadata` and
/// `created_at` (rows that also hold a session's columns name them otherwise).
fn event_columns(row: &PgRow, metadata: &str, created_at: &str) -> Result<Event, StoreError> {
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

#[async_trait]
impl Store for PostgresStore {
    fn backend(&self) -> &'static str {
        "postgres"
    }

    async fn migrate(&self) -> Result<(), StoreError> {
        MIGRATOR.run(&self.pool).await?;
        Ok(())
    }

    async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
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
             VALUES ($1, $2, $2, $3, $4)",
        )
        .bind(session.id)
        .bind(now)
        .bind(sqlx::types::Json(&session.config))
        .bind(sqlx::types::Json(&session.metadata))
        .execute(&self.pool)
        .await?;
        Ok(session)
    }

    async fn get_session(&self, id: Uuid) -> Result<Option<Session>, StoreError> {
        sqlx::query(&format!(
            "SELECT {SESSION_COLUMNS} FROM sessions WHERE session_id = $1"
        ))
        .bind(id)
        .fetch_optional(&self.pool)
        .await?
        .map(session_row)
        .transpose()
    }

    async fn list_sessions(&self, filter: &SessionFilter) -> Result<Vec<Session>, StoreError> {
        let mut q: QueryBuilder<Postgres> =
            QueryBuilder::new(format!("SELECT {SESSION_COLUMNS} FROM sessions WHERE true"));
        if !filter.labels.is_empty() {
            q.push(" AND metadata @> ")
                .push_bind(sqlx::types::Json(&filter.labels));
        }
        if let Some(before) = filter.before {
            q.push(" AND session_id < ").push_bind(before);
        }
        q.push(" ORDER BY session_id DESC LIMIT ")
            .push_bind(i64::from(filter.limit));
        q.build()
            .fetch_all(&self.pool)
            .await?
            .into_iter()
            .map(session_row)
            .collect()
    }

    async fn delete_session(&self, id: Uuid) -> Result<bool, StoreError> {
        let done = sqlx::query("DELETE FROM sessions WHERE session_id = $1")
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() > 0)
    }

    async fn append_events(
        &self,
        session_id: Uuid,
        batch: &[CountedEvent],
        expected_seq: Option<i64>,
    ) -> Result<AppendOutcome, AppendError> {
        let mut tx = self.pool.begin().await?;
        // The row lock serialises appends to one session across every connection and replica.
        // The facts are read by a later statement, whose snapshot then sees every append that
        // committed before the lock was granted.
        let head_seq: i64 =
            sqlx::query_scalar("SELECT head_seq FROM sessions WHERE session_id = $1 FOR UPDATE")
                .bind(session_id)
                .fetch_optional(&mut *tx)
                .await?
                .ok_or(AppendError::SessionNotFound)?;

        let mut facts = LogFacts {
            head_seq,
            ..LogFacts::default()
        };
        let ids = client_ids(batch);
        let call_ids = referenced_call_ids(batch);
        if !ids.is_empty() || !call_ids.is_empty() {
            // Both lookups in one round trip.
            let (existing, calls): (String, String) = sqlx::query_as(
                "SELECT \
                   (SELECT coalesce(json_agg(json_build_object('seq', seq, 'id', client_id, \
                       'body', body, 'pinned', pinned, 'metadata', metadata, 'tokens', tokens, \
                       'created_at', created_at)), '[]') \
                    FROM events WHERE session_id = $1 AND client_id = ANY($2))::text, \
                   (SELECT coalesce(json_agg(json_build_array(call_id, call_seq, result_seq)), '[]') \
                    FROM tool_calls WHERE session_id = $1 AND call_id = ANY($3))::text",
            )
            .bind(session_id)
            .bind(&ids)
            .bind(&call_ids)
            .fetch_one(&mut *tx)
            .await?;
            let existing: Vec<StoredEvent> = decode("stored events", &existing)?;
            for stored in existing {
                let event = stored.into_event();
                if let Some(id) = event.id.clone() {
                    facts.existing.insert(id, event);
                }
            }
            facts.calls = fold_call_rows(decode("tool calls", &calls)?);
        }

        let plan = plan_append(batch, expected_seq, &facts).map_err(AppendError::Rejected)?;
        if plan.inserts.is_empty() {
            return Ok(AppendOutcome {
                head_seq,
                acks: plan.acks,
            });
        }

        // Close stored calls before opening new ones: an id may be answered and reissued in one
        // batch, and only one call per id may be open. The sub-statements of one statement run
        // in no set order, so such a batch closes its calls in a statement of their own.
        let reissued = plan
            .answered_calls
            .iter()
            .any(|(id, ..)| plan.new_calls.iter().any(|c| &c.call_id == id));
        let (closed_ids, (closed_calls, closed_results)): (Vec<&str>, (Vec<i64>, Vec<i64>)) = plan
            .answered_calls
            .iter()
            .map(|(id, c, r)| (id.as_str(), (*c, *r)))
            .unzip();
        const CLOSE_CALLS: &str = "UPDATE tool_calls t SET result_seq = a.result_seq \
            FROM UNNEST($2::text[], $3::bigint[], $4::bigint[]) AS a(call_id, call_seq, result_seq) \
            WHERE t.session_id = $1 AND t.call_id = a.call_id AND t.call_seq = a.call_seq";
        if reissued {
            sqlx::query(CLOSE_CALLS)
                .bind(session_id)
                .bind(&closed_ids)
                .bind(&closed_calls)
                .bind(&closed_results)
                .execute(&mut *tx)
                .await?;
        }
        let empty: (Vec<&str>, Vec<i64>, Vec<i64>) = Default::default();
        let closing = if reissued {
            &empty
        } else {
            &(closed_ids, closed_calls, closed_results)
        };

        // Everything else in one statement: the events, the calls and the session's head.
        let now = now();
        let rows = event_inserts(batch, &plan.inserts)?;
        sqlx::query(
            "WITH new_events AS ( \
               INSERT INTO events \
                 (session_id, seq, client_id, type, role, body, pinned, metadata, tokens, created_at) \
               SELECT $1, r.seq, r.client_id, r.type, r.role, r.body::json, r.pinned, \
                      r.metadata::jsonb, r.tokens, $10 \
               FROM UNNEST($2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[], \
                           $7::bool[], $8::text[], $9::bigint[]) \
                 AS r(seq, client_id, type, role, body, pinned, metadata, tokens) \
             ), closed_calls AS ( \
               UPDATE tool_calls t SET result_seq = a.result_seq \
               FROM UNNEST($11::text[], $12::bigint[], $13::bigint[]) \
                 AS a(call_id, call_seq, result_seq) \
               WHERE t.session_id = $1 AND t.call_id = a.call_id AND t.call_seq = a.call_seq \
             ), new_calls AS ( \
               INSERT INTO tool_calls (session_id, call_id, call_seq, result_seq) \
               SELECT $1, * FROM UNNEST($14::text[], $15::bigint[], $16::bigint[]) \
             ) \
             UPDATE sessions SET head_seq = $17, total_tokens = total_tokens + $18, updated_at = $10 \
             WHERE session_id = $1",
        )
        .bind(session_id)
        .bind(rows.iter().map(|r| r.seq).collect::<Vec<_>>())
        .bind(rows.iter().map(|r| r.client_id).collect::<Vec<_>>())
        .bind(rows.iter().map(|r| r.event_type).collect::<Vec<_>>())
        .bind(rows.iter().map(|r| r.role).collect::<Vec<_>>())
        .bind(rows.iter().map(|r| r.body.as_str()).collect::<Vec<_>>())
        .bind(rows.iter().map(|r| r.pinned).collect::<Vec<_>>())
        .bind(rows.iter().map(|r| r.metadata.as_deref()).collect::<Vec<_>>())
        .bind(rows.iter().map(|r| r.tokens).collect::<Vec<_>>())
        .bind(now)
        .bind(&closing.0)
        .bind(&closing.1)
        .bind(&closing.2)
        .bind(plan.new_calls.iter().map(|c| c.call_id.as_str()).collect::<Vec<_>>())
        .bind(plan.new_calls.iter().map(|c| c.call_seq).collect::<Vec<_>>())
        .bind(plan.new_calls.iter().map(|c| c.result_seq).collect::<Vec<_>>())
        .bind(plan.new_head_seq)
        .bind(plan.added_tokens)
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
             WHERE session_id = $1 AND seq > $2 ORDER BY seq LIMIT $3"
        ))
        .bind(session_id)
        .bind(after_seq)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?
        .into_iter()
        .map(event_row)
        .collect()
    }

    async fn get_event(&self, session_id: Uuid, seq: i64) -> Result<Option<Event>, StoreError> {
        sqlx::query(&format!(
            "SELECT {EVENT_COLUMNS} FROM events WHERE session_id = $1 AND seq = $2"
        ))
        .bind(session_id)
        .bind(seq)
        .fetch_optional(&self.pool)
        .await?
        .map(event_row)
        .transpose()
    }

    async fn item_rows(&self, session_id: Uuid) -> Result<Vec<ItemRow>, StoreError> {
        let rows: Vec<(i64, Option<String>, String, Option<String>, bool, i64)> = sqlx::query_as(
            "SELECT seq, client_id, type, role, pinned, tokens FROM events \
             WHERE session_id = $1 ORDER BY seq",
        )
        .bind(session_id)
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter().map(item_row).collect()
    }

    async fn load_state(&self, session_id: Uuid) -> Result<StoredState, StoreError> {
        let row: Option<(i64, String)> = sqlx::query_as(
            "SELECT version, state::text FROM compaction_states WHERE session_id = $1",
        )
        .bind(session_id)
        .fetch_optional(&self.pool)
        .await?;
        stored_state(row)
    }

    async fn load_session_state(
        &self,
        session_id: Uuid,
    ) -> Result<Option<(Session, StoredState)>, StoreError> {
        let columns = SESSION_STATE_COLUMNS
            .replace("s.config", "s.config::text AS config")
            .replace("s.metadata", "s.metadata::text AS metadata")
            .replace("c.state", "c.state::text AS state");
        let Some(row) = sqlx::query(&format!(
            "SELECT {columns} FROM sessions s \
             LEFT JOIN compaction_states c ON c.session_id = s.session_id \
             WHERE s.session_id = $1"
        ))
        .bind(session_id)
        .fetch_optional(&self.pool)
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
        // One round trip: the session row joined with its state's version and with the events
        // after `after_seq` (one row when there are none), read from one snapshot.
        let rows = sqlx::query(
            "SELECT s.session_id, s.created_at, s.updated_at, s.config::text AS config, \
             s.metadata::text AS metadata, s.head_seq, s.total_tokens, c.version, \
             e.seq, e.client_id, e.body::text AS body, e.pinned, \
             e.metadata::text AS event_metadata, e.tokens, e.created_at AS event_created_at \
             FROM sessions s \
             LEFT JOIN compaction_states c ON c.session_id = s.session_id \
             LEFT JOIN events e ON e.session_id = s.session_id AND e.seq > $2 AND e.seq <= $3 \
             WHERE s.session_id = $1 ORDER BY e.seq",
        )
        .bind(session_id)
        .bind(after_seq)
        .bind(after_seq + RANGE)
        .fetch_all(&self.pool)
        .await?;
        let since = session_since_rows(rows, session_row, |row| {
            event_columns(row, "event_metadata", "event_created_at")
        })?;
        // A full range may be followed by more.
        Ok(since.map(|since| SessionSince {
            complete: since.events.len() < RANGE as usize,
            ..since
        }))
    }

    async fn view_events(
        &self,
        session_id: Uuid,
        after_seq: i64,
        also: &[i64],
    ) -> Result<Vec<Event>, StoreError> {
        // Seqs are dense, so the events after `after_seq` are read as bounded seq ranges: a
        // query with `seq > $2` alone lets a cached generic plan guess that a third of the table
        // matches and, with stale statistics, scan all of it to return the one or two events
        // appended since the last call. A bounded range is an index range scan in any plan.
        let mut events = if also.is_empty() {
            Vec::new()
        } else {
            sqlx::query(&format!(
                "SELECT {EVENT_COLUMNS} FROM events \
                 WHERE session_id = $1 AND seq = ANY($2) AND seq <= $3 ORDER BY seq"
            ))
            .bind(session_id)
            .bind(also)
            .bind(after_seq)
            .fetch_all(&self.pool)
            .await?
            .into_iter()
            .map(event_row)
            .collect::<Result<Vec<_>, _>>()?
        };
        let mut after = after_seq;
        loop {
            let rows = sqlx::query(&format!(
                "SELECT {EVENT_COLUMNS} FROM events \
                 WHERE session_id = $1 AND seq > $2 AND seq <= $3 ORDER BY seq"
            ))
            .bind(session_id)
            .bind(after)
            .bind(after + RANGE)
            .fetch_all(&self.pool)
            .await?;
            let len = events.len();
            for row in rows {
                events.push(event_row(row)?);
            }
            let filled =
                events.len() > len && events.last().is_some_and(|e| e.seq == after + RANGE);
            if !filled {
                return Ok(events);
            }
            after += RANGE;
        }
    }

    async fn save_compaction(
        &self,
        session_id: Uuid,
        expected_version: i64,
        state: &CompactionState,
        record: Option<&CompactionRecord>,
        folded: &[FoldedRange],
    ) -> Result<bool, StoreError> {
        let mut tx = self.pool.begin().await?;
        let state_json = encode(state)?;
        // The row lock taken by the write serialises compactions of one session; a writer that
        // read an older version changes nothing and is told so.
        let written = if expected_version == 0 {
            sqlx::query(
                "INSERT INTO compaction_states (session_id, version, state, updated_at) \
                 VALUES ($1, 1, $2::jsonb, $3) ON CONFLICT (session_id) DO NOTHING",
            )
            .bind(session_id)
            .bind(&state_json)
            .bind(now())
            .execute(&mut *tx)
            .await?
        } else {
            sqlx::query(
                "UPDATE compaction_states SET version = version + 1, state = $3::jsonb, \
                 updated_at = $4 WHERE session_id = $1 AND version = $2",
            )
            .bind(session_id)
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
                 VALUES ($1, $2, $3, $4::jsonb)",
            )
            .bind(session_id)
            .bind(record.id)
            .bind(record.created_at)
            .bind(encode(record)?)
            .execute(&mut *tx)
            .await?;
        }
        for range in folded {
            sqlx::query(
                "INSERT INTO folded_ranges (session_id, from_seq, to_seq, compaction_id, reason) \
                 VALUES ($1, $2, $3, $4, $5)",
            )
            .bind(session_id)
            .bind(range.from_seq)
            .bind(range.to_seq)
            .bind(range.compaction_id)
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
            "SELECT record::text FROM compactions WHERE session_id = $1 \
             AND ($2::uuid IS NULL OR compaction_id < $2) \
             ORDER BY compaction_id DESC LIMIT $3",
        )
        .bind(session_id)
        .bind(before)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
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
            "SELECT record::text FROM compactions WHERE session_id = $1 AND compaction_id = $2",
        )
        .bind(session_id)
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|(record,)| decode("compaction record", &record))
            .transpose()
    }

    async fn folded_ranges(&self, session_id: Uuid) -> Result<Vec<FoldedRange>, StoreError> {
        let rows: Vec<(i64, i64, Uuid, String)> = sqlx::query_as(
            "SELECT from_seq, to_seq, compaction_id, reason FROM folded_ranges \
             WHERE session_id = $1 ORDER BY from_seq",
        )
        .bind(session_id)
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter()
            .map(|(from_seq, to_seq, compaction_id, reason)| {
                folded_range(from_seq, to_seq, compaction_id, &reason)
            })
            .collect()
    }
}
