//! Compaction state: the state a compaction resumes from, its records and the folded ranges
//! that name which compaction archived an item.

use sqlx::Executor;
use uuid::Uuid;

use crate::domain::compaction::CompactionRecord;
use crate::domain::session::Session;
use crate::domain::state::{CompactionState, FoldedRange};
use crate::store::rows::{
    DbUuid, FoldedRangeRow, RecordRow, SessionEventRow, SessionStateRow, StateRow,
};
use crate::store::{now, SessionSince, StoreError, StoredState, SESSION_SINCE_RANGE};

use super::json;

shared_queries! {
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

    /// The records after `after` (all when None), oldest first, at most `limit`.
    pub async fn compactions_after<'e>(
        db: impl Executor<'e, Database = DB>,
        session_id: Uuid,
        after: Option<Uuid>,
        limit: u32,
    ) -> Result<Vec<CompactionRecord>, StoreError> {
        let rows: Vec<RecordRow> = sqlx::query_as(
            "SELECT record FROM compactions WHERE session_id = $1 AND compaction_id > $2 \
             ORDER BY compaction_id LIMIT $3",
        )
        .bind(DbUuid(session_id))
        .bind(DbUuid(after.unwrap_or(Uuid::nil())))
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
