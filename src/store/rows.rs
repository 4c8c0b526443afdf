//! Stored rows as both backends read them (`sqlx::FromRow`), and how they become the domain's
//! types. JSON columns are decoded here, once, whatever the backend stores them as.

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use sqlx::encode::IsNull;
use sqlx::error::BoxDynError;
use sqlx::{Database, Decode, Encode, Postgres, Sqlite, Type};
use uuid::Uuid;

use super::{ItemRow, StoreError, StoredState};
use crate::auth::{ApiKey, KeyRole, StoredKey, Tenant};
use crate::domain::compaction::{CompactionRecord, Reason, Summary};
use crate::domain::event::{Event, EventBody};
use crate::domain::session::{Labels, Session, SessionConfig};
use crate::domain::state::{CompactionState, FoldedRange, JobStatus, PreparedSummary, SummaryJob};

/// A UUID column: PostgreSQL stores `uuid`, SQLite its hyphenated text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct DbUuid(pub Uuid);

impl Type<Postgres> for DbUuid {
    fn type_info() -> <Postgres as Database>::TypeInfo {
        <Uuid as Type<Postgres>>::type_info()
    }
}

impl<'q> Encode<'q, Postgres> for DbUuid {
    fn encode_by_ref(
        &self,
        buf: &mut <Postgres as Database>::ArgumentBuffer<'q>,
    ) -> Result<IsNull, BoxDynError> {
        <Uuid as Encode<'q, Postgres>>::encode_by_ref(&self.0, buf)
    }
}

impl<'r> Decode<'r, Postgres> for DbUuid {
    fn decode(value: <Postgres as Database>::ValueRef<'r>) -> Result<Self, BoxDynError> {
        <Uuid as Decode<'r, Postgres>>::decode(value).map(Self)
    }
}

impl Type<Sqlite> for DbUuid {
    fn type_info() -> <Sqlite as Database>::TypeInfo {
        <uuid::fmt::Hyphenated as Type<Sqlite>>::type_info()
    }
}

impl<'q> Encode<'q, Sqlite> for DbUuid {
    fn encode_by_ref(
        &self,
        buf: &mut <Sqlite as Database>::ArgumentBuffer<'q>,
    ) -> Result<IsNull, BoxDynError> {
        <uuid::fmt::Hyphenated as Encode<'q, Sqlite>>::encode_by_ref(&self.0.hyphenated(), buf)
    }
}

impl<'r> Decode<'r, Sqlite> for DbUuid {
    fn decode(value: <Sqlite as Database>::ValueRef<'r>) -> Result<Self, BoxDynError> {
        <uuid::fmt::Hyphenated as Decode<'r, Sqlite>>::decode(value).map(|h| Self(h.into_uuid()))
    }
}

/// A session row.
#[derive(sqlx::FromRow)]
pub(super) struct SessionRow {
    session_id: DbUuid,
    tenant: String,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    #[sqlx(json)]
    config: SessionConfig,
    #[sqlx(json)]
    metadata: Labels,
    head_seq: i64,
    total_tokens: i64,
}

impl From<SessionRow> for Session {
    fn from(row: SessionRow) -> Self {
        Session {
            id: row.session_id.0,
            tenant: row.tenant,
            created_at: row.created_at,
            updated_at: row.updated_at,
            config: row.config,
            metadata: row.metadata,
            head_seq: row.head_seq,
            total_tokens: row.total_tokens,
        }
    }
}

/// An API key row.
#[derive(sqlx::FromRow)]
pub(super) struct KeyRow {
    key_id: String,
    tenant: String,
    role: String,
    secret_hash: Vec<u8>,
    name: String,
    created_at: DateTime<Utc>,
    revoked_at: Option<DateTime<Utc>>,
}

impl TryFrom<KeyRow> for StoredKey {
    type Error = StoreError;
    fn try_from(row: KeyRow) -> Result<Self, StoreError> {
        let role = KeyRole::parse(&row.role).ok_or_else(|| {
            StoreError::Corrupt(format!(
                "key {} has the unknown role `{}`",
                row.key_id, row.role
            ))
        })?;
        Ok(StoredKey {
            key: ApiKey {
                id: row.key_id,
                tenant: row.tenant,
                role,
                name: row.name,
                created_at: row.created_at,
                revoked_at: row.revoked_at,
            },
            secret_hash: row.secret_hash,
        })
    }
}

/// A tenant row.
#[derive(sqlx::FromRow)]
pub(super) struct TenantRow {
    tenant: String,
    created_at: DateTime<Utc>,
}

impl From<TenantRow> for Tenant {
    fn from(row: TenantRow) -> Self {
        Tenant {
            id: row.tenant,
            created_at: row.created_at,
        }
    }
}

/// A compaction state row (the version it was read at and the document).
#[derive(sqlx::FromRow)]
pub(super) struct StateRow {
    version: i64,
    #[sqlx(json)]
    state: CompactionState,
}

impl From<StateRow> for StoredState {
    fn from(row: StateRow) -> Self {
        StoredState {
            version: row.version,
            state: row.state,
        }
    }
}

/// A session joined with its compaction state, when one was written.
#[derive(sqlx::FromRow)]
pub(super) struct SessionStateRow {
    #[sqlx(flatten)]
    session: SessionRow,
    version: Option<i64>,
    #[sqlx(json(nullable))]
    state: Option<CompactionState>,
}

impl SessionStateRow {
    pub fn into_parts(self) -> (Session, StoredState) {
        let stored = match (self.version, self.state) {
            (Some(version), Some(state)) => StoredState { version, state },
            _ => StoredState::default(),
        };
        (self.session.into(), stored)
    }
}

/// An event row.
#[derive(sqlx::FromRow)]
pub(super) struct EventRow {
    seq: i64,
    client_id: Option<String>,
    #[sqlx(json)]
    body: EventBody,
    pinned: bool,
    #[sqlx(json(nullable))]
    metadata: Option<Map<String, Value>>,
    tokens: i64,
    created_at: DateTime<Utc>,
}

impl From<EventRow> for Event {
    fn from(mut row: EventRow) -> Self {
        row.body.hold_arguments_as_text();
        Event {
            seq: row.seq,
            id: row.client_id,
            body: row.body,
            pinned: row.pinned,
            metadata: row.metadata,
            tokens: row.tokens,
            created_at: row.created_at,
            derived: Default::default(),
        }
    }
}

/// The event columns of a row that joins events to something else: null when no event joined.
/// The event's metadata and creation time are named `event_metadata` and `event_created_at`, so
/// that they do not clash with a session's.
#[derive(sqlx::FromRow)]
pub(super) struct JoinedEventRow {
    seq: Option<i64>,
    client_id: Option<String>,
    #[sqlx(json(nullable))]
    body: Option<EventBody>,
    pinned: Option<bool>,
    #[sqlx(rename = "event_metadata", json(nullable))]
    metadata: Option<Map<String, Value>>,
    tokens: Option<i64>,
    #[sqlx(rename = "event_created_at")]
    created_at: Option<DateTime<Utc>>,
}

impl JoinedEventRow {
    /// The event, if one joined.
    pub fn into_event(self) -> Result<Option<Event>, StoreError> {
        let Some(seq) = self.seq else {
            return Ok(None);
        };
        let missing = |column: &str| StoreError::Corrupt(format!("event {seq}: no {column}"));
        let mut body = self.body.ok_or_else(|| missing("body"))?;
        body.hold_arguments_as_text();
        Ok(Some(Event {
            seq,
            id: self.client_id,
            body,
            pinned: self.pinned.ok_or_else(|| missing("pinned"))?,
            metadata: self.metadata,
            tokens: self.tokens.ok_or_else(|| missing("tokens"))?,
            created_at: self.created_at.ok_or_else(|| missing("created_at"))?,
            derived: Default::default(),
        }))
    }
}

/// A session joined with its state's version and one of its events (none: no event joined).
#[derive(sqlx::FromRow)]
pub(super) struct SessionEventRow {
    #[sqlx(flatten)]
    pub session: SessionRow,
    pub version: Option<i64>,
    #[sqlx(flatten)]
    pub event: JoinedEventRow,
}

/// An event without its content.
#[derive(sqlx::FromRow)]
pub(super) struct ItemColumns {
    seq: i64,
    client_id: Option<String>,
    #[sqlx(rename = "type")]
    event_type: String,
    role: Option<String>,
    pinned: bool,
    tokens: i64,
}

impl TryFrom<ItemColumns> for ItemRow {
    type Error = StoreError;

    fn try_from(row: ItemColumns) -> Result<Self, StoreError> {
        Ok(ItemRow {
            seq: row.seq,
            id: row.client_id,
            event_type: name("event type", &row.event_type)?,
            role: row.role.map(|r| name("role", &r)).transpose()?,
            pinned: row.pinned,
            tokens: row.tokens,
        })
    }
}

/// A folded range row.
#[derive(sqlx::FromRow)]
pub(super) struct FoldedRangeRow {
    from_seq: i64,
    to_seq: i64,
    compaction_id: DbUuid,
    reason: String,
}

impl TryFrom<FoldedRangeRow> for FoldedRange {
    type Error = StoreError;

    fn try_from(row: FoldedRangeRow) -> Result<Self, StoreError> {
        Ok(FoldedRange {
            from_seq: row.from_seq,
            to_seq: row.to_seq,
            compaction_id: row.compaction_id.0,
            reason: name::<Reason>("folded range reason", &row.reason)?,
        })
    }
}

/// A compaction record row.
#[derive(sqlx::FromRow)]
pub(super) struct RecordRow {
    #[sqlx(json)]
    record: CompactionRecord,
}

impl From<RecordRow> for CompactionRecord {
    fn from(row: RecordRow) -> Self {
        row.record
    }
}

/// A summary job row.
#[derive(sqlx::FromRow)]
pub(super) struct JobRow {
    session_id: DbUuid,
    checkpoint_seq: i64,
    to_seq: i64,
    #[sqlx(json)]
    previous: Summary,
    max_chars: i64,
    status: String,
    #[sqlx(json(nullable))]
    result: Option<PreparedSummary>,
}

impl JobRow {
    pub(super) fn job(&self) -> SummaryJob {
        SummaryJob {
            session_id: self.session_id.0,
            checkpoint_seq: self.checkpoint_seq,
            to_seq: self.to_seq,
            previous: self.previous.clone(),
            max_chars: usize::try_from(self.max_chars).unwrap_or(0),
        }
    }

    pub(super) fn status(self) -> JobStatus {
        match (self.status.as_str(), self.result) {
            ("done", Some(prepared)) => JobStatus::Done(Box::new(prepared)),
            ("failed", _) | ("done", None) => JobStatus::Failed,
            _ => JobStatus::InFlight,
        }
    }
}

/// A value of one of the domain's enums stored by its serde name.
fn name<T: serde::de::DeserializeOwned>(what: &str, text: &str) -> Result<T, StoreError> {
    T::deserialize(serde::de::value::StrDeserializer::<serde::de::value::Error>::new(text))
        .map_err(|e| StoreError::Corrupt(format!("{what} `{text}`: {e}")))
}
