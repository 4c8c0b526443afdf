//! The PostgreSQL store: production storage, safe for many replicas.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions, PgQueryResult};
use sqlx::Postgres;
use uuid::Uuid;

use super::rows::{DbUuid, EventRow, JoinedEventRow};
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

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("migrations/postgres");

/// Events are read after a seq in ranges of this many seqs (see `view_events`).
const RANGE: i64 = 1_000;
const EVENT_COLUMNS: &str = "seq, client_id, body, pinned, metadata, tokens, created_at";

type Q = Sql<Postgres>;

impl Dialect for Postgres {
    type SeqList = Vec<i64>;
    const SEQ_IN: (&'static str, &'static str) = ("= ANY(", ")");

    // Containment answers from the GIN index on metadata.
    const SKIP_LOCKED: &'static str = " FOR UPDATE SKIP LOCKED";
    const LABELS_INCLUDE: (&'static str, &'static str) = ("metadata @> ", "");

    fn seq_list(seqs: &[i64]) -> Vec<i64> {
        seqs.to_vec()
    }

    fn rows_affected(done: &PgQueryResult) -> u64 {
        done.rows_affected()
    }
}

/// The rows of the append's fact lookup: the stored events with the batch's client ids (none:
/// one row without an event) and, on every row, the stored rows of the call ids it references.
#[derive(sqlx::FromRow)]
struct AppendFactsRow {
    #[sqlx(json)]
    calls: Vec<(String, i64, Option<i64>)>,
    #[sqlx(flatten)]
    event: JoinedEventRow,
}

/// How long a request waits for a pooled connection.
const ACQUIRE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);
/// How long connecting at start may take before ctxd gives up, saying so.
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

pub struct PostgresStore {
    pool: PgPool,
}

impl PostgresStore {
    /// Connects, failing within [`CONNECT_TIMEOUT`] with the cause (connection refused, an
    /// unknown host, a wrong password) when the server cannot be used.
    pub async fn connect(url: &str, max_connections: u32) -> Result<Self, StoreError> {
        use sqlx::{ConnectOptions, Connection};
        let options: PgConnectOptions = url.parse()?;
        // One direct attempt first: the pool retries a refused connection until its acquire
        // timeout runs out and then says only that it timed out.
        match tokio::time::timeout(CONNECT_TIMEOUT, options.connect()).await {
            Ok(Ok(connection)) => {
                let _ = connection.close().await;
            }
            Ok(Err(error)) => return Err(error.into()),
            Err(_) => {
                return Err(StoreError::Config(format!(
                    "PostgreSQL at {} did not answer within {} s",
                    super::redact(url),
                    CONNECT_TIMEOUT.as_secs()
                )))
            }
        }
        let pool = Self::pool_options(max_connections)
            .connect_with(options)
            .await?;
        Ok(Self { pool })
    }

    /// The connection pool settings ctxd runs with.
    pub fn pool_options(max_connections: u32) -> PgPoolOptions {
        PgPoolOptions::new()
            .max_connections(max_connections)
            // A request waits at most this long for a connection: with the server down, it
            // answers 503 (Retry-After) within seconds instead of at the request timeout.
            .acquire_timeout(ACQUIRE_TIMEOUT)
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

    fn pool_status(&self) -> (u32, usize) {
        (self.pool.size(), self.pool.num_idle())
    }

    async fn create_session(&self, new: &NewSession, tenant: &str) -> Result<Session, StoreError> {
        Q::create_session(&self.pool, new, tenant).await
    }

    async fn create_tenant(&self, tenant: &str) -> Result<Option<Tenant>, StoreError> {
        Q::create_tenant(&self.pool, tenant).await
    }

    async fn list_tenants(&self) -> Result<Vec<Tenant>, StoreError> {
        Q::list_tenants(&self.pool).await
    }

    async fn create_key(&self, key: &StoredKey) -> Result<(), StoreError> {
        Q::create_key(&self.pool, key).await
    }

    async fn get_key(&self, id: &str) -> Result<Option<StoredKey>, StoreError> {
        Q::get_key(&self.pool, id).await
    }

    async fn list_keys(&self, tenant: Option<&str>) -> Result<Vec<ApiKey>, StoreError> {
        Q::list_keys(&self.pool, tenant).await
    }

    async fn revoke_key(&self, id: &str) -> Result<bool, StoreError> {
        Q::revoke_key(&self.pool, id).await
    }

    async fn any_keys(&self) -> Result<bool, StoreError> {
        Q::any_keys(&self.pool).await
    }

    async fn get_session(&self, id: Uuid) -> Result<Option<Session>, StoreError> {
        Q::get_session(&self.pool, id).await
    }

    async fn list_sessions(&self, filter: &SessionFilter) -> Result<Vec<Session>, StoreError> {
        Q::list_sessions(&self.pool, filter).await
    }

    async fn delete_session(&self, id: Uuid) -> Result<bool, StoreError> {
        Q::delete_session(&self.pool, id).await
    }

    async fn delete_idle_sessions(
        &self,
        idle_since: DateTime<Utc>,
        limit: u32,
    ) -> Result<u64, StoreError> {
        Q::delete_idle_sessions(&self.pool, idle_since, limit).await
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
            let rows: Vec<AppendFactsRow> = sqlx::query_as(
                "SELECT c.calls, e.seq, e.client_id, e.body, e.pinned, \
                 e.metadata AS event_metadata, e.tokens, e.created_at AS event_created_at \
                 FROM (SELECT coalesce(json_agg(json_build_array(call_id, call_seq, result_seq)), \
                         '[]') AS calls \
                       FROM tool_calls WHERE session_id = $1 AND call_id = ANY($3)) c \
                 LEFT JOIN events e ON e.session_id = $1 AND e.client_id = ANY($2)",
            )
            .bind(DbUuid(session_id))
            .bind(&ids)
            .bind(&call_ids)
            .fetch_all(&mut *tx)
            .await?;
            let mut calls = Vec::new();
            for row in rows {
                calls = row.calls;
                if let Some(event) = row.event.into_event()? {
                    if let Some(id) = event.id.clone() {
                        facts.existing.insert(id, event);
                    }
                }
            }
            facts.calls = fold_call_rows(calls);
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
        Q::list_events(&self.pool, session_id, after_seq, limit).await
    }

    async fn get_event(&self, session_id: Uuid, seq: i64) -> Result<Option<Event>, StoreError> {
        Q::get_event(&self.pool, session_id, seq).await
    }

    async fn get_event_by_client_id(
        &self,
        session_id: Uuid,
        client_id: &str,
    ) -> Result<Option<Event>, StoreError> {
        Q::get_event_by_client_id(&self.pool, session_id, client_id).await
    }

    async fn item_rows(
        &self,
        session_id: Uuid,
        after_seq: i64,
        to_seq: i64,
        limit: u32,
    ) -> Result<Vec<ItemRow>, StoreError> {
        Q::item_rows(&self.pool, session_id, after_seq, to_seq, limit.into()).await
    }

    async fn view_item_rows(
        &self,
        session_id: Uuid,
        after_seq: i64,
        to_seq: i64,
        also: &[i64],
    ) -> Result<Vec<ItemRow>, StoreError> {
        Q::view_item_rows(&self.pool, session_id, after_seq, to_seq, also).await
    }

    async fn load_state(&self, session_id: Uuid) -> Result<StoredState, StoreError> {
        Q::load_state(&self.pool, session_id).await
    }

    async fn load_session_state(
        &self,
        session_id: Uuid,
    ) -> Result<Option<(Session, StoredState)>, StoreError> {
        Q::load_session_state(&self.pool, session_id).await
    }

    async fn session_since(
        &self,
        session_id: Uuid,
        after_seq: i64,
    ) -> Result<Option<SessionSince>, StoreError> {
        Q::session_since(&self.pool, session_id, after_seq).await
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
            let rows: Vec<EventRow> = sqlx::query_as(&format!(
                "SELECT {EVENT_COLUMNS} FROM events \
                 WHERE session_id = $1 AND seq = ANY($2) AND seq <= $3 ORDER BY seq"
            ))
            .bind(DbUuid(session_id))
            .bind(also)
            .bind(after_seq)
            .fetch_all(&self.pool)
            .await?;
            rows.into_iter().map(Event::from).collect()
        };
        let mut after = after_seq;
        loop {
            let rows: Vec<EventRow> = sqlx::query_as(&format!(
                "SELECT {EVENT_COLUMNS} FROM events \
                 WHERE session_id = $1 AND seq > $2 AND seq <= $3 ORDER BY seq"
            ))
            .bind(DbUuid(session_id))
            .bind(after)
            .bind(after + RANGE)
            .fetch_all(&self.pool)
            .await?;
            let len = events.len();
            events.extend(rows.into_iter().map(Event::from));
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
        // The row lock taken by the write serialises compactions of one session.
        let mut tx = self.pool.begin().await?;
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
        Q::list_compactions(&self.pool, session_id, before, limit).await
    }

    async fn compactions_after(
        &self,
        session_id: Uuid,
        after: Option<Uuid>,
        limit: u32,
    ) -> Result<Vec<CompactionRecord>, StoreError> {
        Q::compactions_after(&self.pool, session_id, after, limit).await
    }

    async fn get_compaction(
        &self,
        session_id: Uuid,
        id: Uuid,
    ) -> Result<Option<CompactionRecord>, StoreError> {
        Q::get_compaction(&self.pool, session_id, id).await
    }

    async fn enqueue_summary_job(&self, job: &SummaryJob) -> Result<bool, StoreError> {
        Q::enqueue_summary_job(&self.pool, job).await
    }

    async fn claim_summary_job(
        &self,
        now_ms: i64,
        lease_ms: i64,
        max_attempts: i64,
    ) -> Result<Option<SummaryJob>, StoreError> {
        Q::claim_summary_job(&self.pool, now_ms, lease_ms, max_attempts).await
    }

    async fn finish_summary_job(
        &self,
        job: &SummaryJob,
        prepared: Option<&PreparedSummary>,
    ) -> Result<(), StoreError> {
        Q::finish_summary_job(&self.pool, job, prepared).await
    }

    async fn summary_job(
        &self,
        session_id: Uuid,
        checkpoint_seq: i64,
    ) -> Result<Option<(SummaryJob, JobStatus)>, StoreError> {
        Q::summary_job(&self.pool, session_id, checkpoint_seq).await
    }

    async fn folded_ranges(
        &self,
        session_id: Uuid,
        from_seq: i64,
        to_seq: i64,
    ) -> Result<Vec<FoldedRange>, StoreError> {
        Q::folded_ranges(&self.pool, session_id, from_seq, to_seq).await
    }

    async fn episode_events(&self, session_id: Uuid) -> Result<Vec<Event>, StoreError> {
        Q::episode_events(&self.pool, session_id).await
    }
}
