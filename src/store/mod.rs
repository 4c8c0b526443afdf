//! Persistence: one [`Store`] trait, implemented for PostgreSQL (production) and SQLite (the
//! embedded default). The URL scheme of the database URL picks the backend.
//!
//! The event log is append-only: the trait can add events and delete a whole session, never
//! change or remove one event. Every table is keyed by `session_id` first.
//!
//! The SQL both backends share is written once in `sql`, over rows decoded in `rows`; each
//! backend's file keeps only what its dialect does differently: connecting, the append's write
//! path, reading a view's events in pages, and the fragments of the label filter and seq lists.

mod postgres;
mod rows;
mod sql;
mod sqlite;

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::auth::{ApiKey, StoredKey, Tenant};
use crate::domain::append::{Ack, AppendRejection, CallFacts, CountedEvent};
use crate::domain::compaction::CompactionRecord;
use crate::domain::event::Event;
use crate::domain::session::{Labels, NewSession, Session};
use crate::domain::state::{CompactionState, FoldedRange, JobStatus, PreparedSummary, SummaryJob};

pub use postgres::PostgresStore;
pub use sqlite::SqliteStore;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    #[error("migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("stored data is unreadable: {0}")]
    Corrupt(String),
    #[error("{0}")]
    Config(String),
}

/// Why an append did not happen.
#[derive(Debug, thiserror::Error)]
pub enum AppendError {
    #[error("session not found")]
    SessionNotFound,
    #[error("append rejected: {0:?}")]
    Rejected(AppendRejection),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<sqlx::Error> for AppendError {
    fn from(e: sqlx::Error) -> Self {
        Self::Store(StoreError::Database(e))
    }
}

/// What an append did, per event in batch order.
#[derive(Debug, Clone)]
pub struct AppendOutcome {
    pub head_seq: i64,
    pub acks: Vec<Ack>,
}

/// Which sessions to list: a tenant's, newest first, optionally below a cursor and matching
/// labels.
#[derive(Debug, Clone)]
pub struct SessionFilter {
    /// Only this tenant's sessions.
    pub tenant: String,
    pub labels: Labels,
    /// Only sessions after this one in the order (the previous page's last id, and its last
    /// activity when ordered by activity).
    pub before: Option<Uuid>,
    /// Order by last activity (the newest append first) rather than by creation.
    pub by_activity: Option<DateTime<Utc>>,
    pub limit: u32,
}

impl Default for SessionFilter {
    fn default() -> Self {
        Self {
            tenant: crate::auth::DEFAULT_TENANT.to_owned(),
            labels: Labels::default(),
            before: None,
            by_activity: None,
            limit: 50,
        }
    }
}

#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// `postgres` or `sqlite`.
    fn backend(&self) -> &'static str;
    /// Applies pending migrations.
    async fn migrate(&self) -> Result<(), StoreError>;
    /// Succeeds when the database answers.
    async fn ping(&self) -> Result<(), StoreError>;
    /// The connection pool as it stands: connections open, and idle among them.
    fn pool_status(&self) -> (u32, usize);

    /// Creates a session owned by `tenant`.
    async fn create_session(&self, new: &NewSession, tenant: &str) -> Result<Session, StoreError>;
    async fn get_session(&self, id: Uuid) -> Result<Option<Session>, StoreError>;
    async fn list_sessions(&self, filter: &SessionFilter) -> Result<Vec<Session>, StoreError>;
    /// Deletes the session and everything of it. False when there was no such session.
    async fn delete_session(&self, id: Uuid) -> Result<bool, StoreError>;
    /// Deletes at most `limit` sessions idle since before `idle_since` (no append since), the
    /// longest idle first, with everything they own; how many it deleted.
    async fn delete_idle_sessions(
        &self,
        idle_since: DateTime<Utc>,
        limit: u32,
    ) -> Result<u64, StoreError>;

    /// Creates a tenant; None when it exists already.
    async fn create_tenant(&self, tenant: &str) -> Result<Option<Tenant>, StoreError>;
    async fn list_tenants(&self) -> Result<Vec<Tenant>, StoreError>;
    /// Stores a new key (its tenant must exist).
    async fn create_key(&self, key: &StoredKey) -> Result<(), StoreError>;
    async fn get_key(&self, id: &str) -> Result<Option<StoredKey>, StoreError>;
    /// Every key, or one tenant's, oldest first; never their secrets.
    async fn list_keys(&self, tenant: Option<&str>) -> Result<Vec<ApiKey>, StoreError>;
    /// Revokes a key; false when there is no such key.
    async fn revoke_key(&self, id: &str) -> Result<bool, StoreError>;
    /// Whether any key was ever created: from then on every request needs one.
    async fn any_keys(&self) -> Result<bool, StoreError>;

    /// Appends a batch in one transaction, or nothing of it. Seqs are allocated under a
    /// per-session lock, so concurrent appends to one session never collide or leave gaps.
    async fn append_events(
        &self,
        session_id: Uuid,
        batch: &[CountedEvent],
        expected_seq: Option<i64>,
    ) -> Result<AppendOutcome, AppendError>;
    /// Events with seq greater than `after_seq`, in seq order, at most `limit`.
    async fn list_events(
        &self,
        session_id: Uuid,
        after_seq: i64,
        limit: u32,
    ) -> Result<Vec<Event>, StoreError>;
    /// One event by seq.
    async fn get_event(&self, session_id: Uuid, seq: i64) -> Result<Option<Event>, StoreError>;
    /// One event by the `id` its client gave it at append (unique within a session).
    async fn get_event_by_client_id(
        &self,
        session_id: Uuid,
        client_id: &str,
    ) -> Result<Option<Event>, StoreError>;
    /// Events with `after_seq < seq ≤ to_seq` without their content, in seq order, at most
    /// `limit`.
    async fn item_rows(
        &self,
        session_id: Uuid,
        after_seq: i64,
        to_seq: i64,
        limit: u32,
    ) -> Result<Vec<ItemRow>, StoreError>;
    /// The events a view is made of, without their content: those with
    /// `after_seq < seq ≤ to_seq` and those at the seqs in `also`, in seq order.
    async fn view_item_rows(
        &self,
        session_id: Uuid,
        after_seq: i64,
        to_seq: i64,
        also: &[i64],
    ) -> Result<Vec<ItemRow>, StoreError>;

    /// The compaction state (the default at version 0 when none was written).
    async fn load_state(&self, session_id: Uuid) -> Result<StoredState, StoreError>;
    /// The session and its compaction state in one read; None when there is no such session.
    async fn load_session_state(
        &self,
        session_id: Uuid,
    ) -> Result<Option<(Session, StoredState)>, StoreError>;
    /// What a replica holding a session's view up to `after_seq` needs to continue it, in one
    /// read: the session, its state's version (the state itself only when that version is not
    /// the one the replica holds) and the events after `after_seq`. None when there is no such
    /// session.
    async fn session_since(
        &self,
        session_id: Uuid,
        after_seq: i64,
    ) -> Result<Option<SessionSince>, StoreError>;
    /// The events a view is made of: every event after `after_seq` and those in `also`.
    async fn view_events(
        &self,
        session_id: Uuid,
        after_seq: i64,
        also: &[i64],
    ) -> Result<Vec<Event>, StoreError>;
    /// Writes `state` over `expected_version` with its record and newly folded ranges, in one
    /// transaction. False, and nothing written, when another writer changed the state first.
    async fn save_compaction(
        &self,
        session_id: Uuid,
        expected_version: i64,
        state: &CompactionState,
        record: Option<&CompactionRecord>,
        folded: &[FoldedRange],
    ) -> Result<bool, StoreError>;
    /// Compaction records, newest first, older than `before` when given.
    async fn list_compactions(
        &self,
        session_id: Uuid,
        before: Option<Uuid>,
        limit: u32,
    ) -> Result<Vec<CompactionRecord>, StoreError>;
    /// The records after `after` (all when None), oldest first, at most `limit`.
    async fn compactions_after(
        &self,
        session_id: Uuid,
        after: Option<Uuid>,
        limit: u32,
    ) -> Result<Vec<CompactionRecord>, StoreError>;
    async fn get_compaction(
        &self,
        session_id: Uuid,
        id: Uuid,
    ) -> Result<Option<CompactionRecord>, StoreError>;
    /// Adds a background summary job unless the session has one at its checkpoint; whether
    /// it was added.
    async fn enqueue_summary_job(&self, job: &SummaryJob) -> Result<bool, StoreError>;
    /// Claims a job no replica holds (pending, or its lease ran out) for `lease_ms`.
    async fn claim_summary_job(
        &self,
        now_ms: i64,
        lease_ms: i64,
        max_attempts: i64,
    ) -> Result<Option<SummaryJob>, StoreError>;
    /// Ends a job with what it prepared (None: failed).
    async fn finish_summary_job(
        &self,
        job: &SummaryJob,
        prepared: Option<&PreparedSummary>,
    ) -> Result<(), StoreError>;
    /// The session's job at `checkpoint_seq`, and where it stands.
    async fn summary_job(
        &self,
        session_id: Uuid,
        checkpoint_seq: i64,
    ) -> Result<Option<(SummaryJob, JobStatus)>, StoreError>;
    /// The session's `episode_start` and `episode_end` events, in seq order.
    async fn episode_events(&self, session_id: Uuid) -> Result<Vec<Event>, StoreError>;
    /// The folded ranges that hold a seq in `from_seq..=to_seq`, in seq order.
    async fn folded_ranges(
        &self,
        session_id: Uuid,
        from_seq: i64,
        to_seq: i64,
    ) -> Result<Vec<FoldedRange>, StoreError>;
}

/// A session's compaction state and the version it was read at (0: never written).
#[derive(Debug, Clone, Default)]
pub struct StoredState {
    pub version: i64,
    pub state: CompactionState,
}

/// A session as [`Store::session_since`] reads it.
#[derive(Debug, Clone)]
pub struct SessionSince {
    pub session: Session,
    /// The compaction state's version (0: never written).
    pub version: i64,
    /// Events after the seq asked for, in seq order.
    pub events: Vec<Event>,
    /// False when more events may follow `events` (a long stretch is read in bounded pages).
    pub complete: bool,
}

/// An event without its content, as the context report reads it.
pub use crate::domain::event::Item as ItemRow;

/// [`Store::session_since`] reads at most this many events at once.
const SESSION_SINCE_RANGE: i64 = 1_000;

/// Connection settings common to both backends.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    pub url: String,
    pub max_connections: u32,
}

/// Opens the store the URL names: `postgres://…` or `postgresql://…` for PostgreSQL,
/// `sqlite:…` for SQLite (the file is created when missing).
pub async fn connect(options: &StoreOptions) -> Result<Arc<dyn Store>, StoreError> {
    let url = options.url.as_str();
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Ok(Arc::new(
            PostgresStore::connect(url, options.max_connections).await?,
        ))
    } else if url.starts_with("sqlite:") {
        Ok(Arc::new(
            SqliteStore::connect(url, options.max_connections).await?,
        ))
    } else {
        Err(StoreError::Config(format!(
            "unsupported database URL `{}`: use postgres://… or sqlite:…",
            redact(url)
        )))
    }
}

/// The current time at the precision both backends store (microseconds), so that what a
/// write returns is exactly what a later read returns.
fn now() -> DateTime<Utc> {
    use chrono::SubsecRound;
    Utc::now().trunc_subsecs(6)
}

/// The URL without its password, for messages and logs.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme_end), Some(at)) if at > scheme_end => {
            let userinfo = &url[scheme_end + 3..at];
            match userinfo.find(':') {
                Some(colon) => format!(
                    "{}{}:***{}",
                    &url[..scheme_end + 3],
                    &userinfo[..colon],
                    &url[at..]
                ),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

/// The facts about each referenced call id, folded from its stored rows
/// (call id, call seq, result seq).
fn fold_call_rows(rows: Vec<(String, i64, Option<i64>)>) -> HashMap<String, CallFacts> {
    let mut calls: HashMap<String, CallFacts> = HashMap::new();
    for (id, call_seq, result_seq) in rows {
        let facts = calls.entry(id).or_default();
        match result_seq {
            None => facts.open_call_seq = Some(call_seq),
            Some(_) => facts.answered = true,
        }
    }
    calls
}

/// The columns of an event row to insert, serialised once for either backend.
struct EventInsert<'a> {
    seq: i64,
    client_id: Option<&'a str>,
    event_type: &'static str,
    role: Option<&'static str>,
    body: String,
    pinned: bool,
    metadata: Option<String>,
    tokens: i64,
}

fn event_inserts<'a>(
    batch: &'a [CountedEvent],
    inserts: &[(usize, i64)],
) -> Result<Vec<EventInsert<'a>>, StoreError> {
    inserts
        .iter()
        .map(|&(index, seq)| {
            let counted = &batch[index];
            let event = &counted.event;
            let encode = |e: serde_json::Error| StoreError::Corrupt(format!("encoding event: {e}"));
            Ok(EventInsert {
                seq,
                client_id: event.id.as_deref(),
                event_type: event.body.event_type().as_str(),
                role: event.body.role().map(|r| r.as_str()),
                body: serde_json::to_string(&event.body).map_err(encode)?,
                pinned: event.pinned,
                metadata: event
                    .metadata
                    .as_ref()
                    .map(serde_json::to_string)
                    .transpose()
                    .map_err(encode)?,
                tokens: counted.tokens,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn passwords_never_reach_messages() {
        assert_eq!(
            redact("postgres://ctxd:secret@db:5432/ctxd"),
            "postgres://ctxd:***@db:5432/ctxd"
        );
        assert_eq!(redact("sqlite://ctxd.db"), "sqlite://ctxd.db");
        assert_eq!(redact("postgres://ctxd@db/x"), "postgres://ctxd@db/x");
    }
}
