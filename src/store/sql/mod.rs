//! The SQL both backends share, written once and generic over the backend's `sqlx::Database`.
//! Where the dialects differ, a [`Dialect`] says so with constant fragments: the label filter
//! and how a list of seqs is bound and read. Placeholders are `$n` in both.
//!
//! One file per part of the schema: `sessions` (sessions), `keys` (tenants and API keys),
//! `events` (the log and its items), `state` (compaction state, records and folded ranges) and
//! `jobs` (the background summary jobs).

use std::marker::PhantomData;

use serde_json::value::RawValue;
use sqlx::types::Json;
use sqlx::{Database, Encode, Type};

use super::StoreError;

/// Opens an `impl Sql<DB>` block with every bound the shared queries need, so that each file
/// of queries states them once, here.
macro_rules! shared_queries {
    ($($body:tt)*) => {
        impl<DB> $crate::store::sql::Sql<DB>
        where
            DB: $crate::store::sql::Dialect,
            for<'q> DB::Arguments<'q>: ::sqlx::IntoArguments<'q, DB>,
            for<'c> &'c mut DB::Connection: ::sqlx::Executor<'c, Database = DB>,
            for<'q> i64: ::sqlx::Encode<'q, DB> + ::sqlx::Type<DB>,
            for<'q> Vec<u8>: ::sqlx::Encode<'q, DB> + ::sqlx::Type<DB>,
            for<'q> String: ::sqlx::Encode<'q, DB> + ::sqlx::Type<DB>,
            for<'q> ::chrono::DateTime<::chrono::Utc>: ::sqlx::Encode<'q, DB> + ::sqlx::Type<DB>,
            for<'q> $crate::store::rows::DbUuid: ::sqlx::Encode<'q, DB> + ::sqlx::Type<DB>,
            for<'q> ::sqlx::types::Json<Box<::serde_json::value::RawValue>>:
                ::sqlx::Encode<'q, DB> + ::sqlx::Type<DB>,
            for<'q> Option<::sqlx::types::Json<Box<::serde_json::value::RawValue>>>:
                ::sqlx::Encode<'q, DB>,
            for<'r> $crate::store::rows::SessionRow: ::sqlx::FromRow<'r, DB::Row>,
            for<'r> $crate::store::rows::SessionStateRow: ::sqlx::FromRow<'r, DB::Row>,
            for<'r> $crate::store::rows::SessionEventRow: ::sqlx::FromRow<'r, DB::Row>,
            for<'r> $crate::store::rows::StateRow: ::sqlx::FromRow<'r, DB::Row>,
            for<'r> $crate::store::rows::EventRow: ::sqlx::FromRow<'r, DB::Row>,
            for<'r> $crate::store::rows::ItemColumns: ::sqlx::FromRow<'r, DB::Row>,
            for<'r> $crate::store::rows::FoldedRangeRow: ::sqlx::FromRow<'r, DB::Row>,
            for<'r> $crate::store::rows::RecordRow: ::sqlx::FromRow<'r, DB::Row>,
            for<'r> $crate::store::rows::JobRow: ::sqlx::FromRow<'r, DB::Row>,
            for<'r> $crate::store::rows::KeyRow: ::sqlx::FromRow<'r, DB::Row>,
            for<'r> $crate::store::rows::TenantRow: ::sqlx::FromRow<'r, DB::Row>,
        {
            $($body)*
        }
    };
}

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

mod events;
mod jobs;
mod keys;
mod sessions;
mod state;
