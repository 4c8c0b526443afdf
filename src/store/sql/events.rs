//! The event log: events by seq or client id, episodes, and the item rows a view and an
//! inspection read.

use sqlx::Executor;
use uuid::Uuid;

use crate::domain::event::Event;
use crate::store::rows::{DbUuid, EventRow, ItemColumns};
use crate::store::{ItemRow, StoreError};

use super::{EVENT_COLUMNS, ITEM_COLUMNS};

shared_queries! {
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
}
