//! Running compactions against the store: load the state and the view's events, run the engine,
//! persist what changed. Compactions of one session are serialised by the state's version: a
//! compaction writes only over the version it read, and one that loses starts again from the
//! winner's state, so concurrent calls never lose or corrupt state.

pub mod cache;

use chrono::Utc;
use uuid::Uuid;

use cache::ViewCache;

use crate::domain::compaction::{CompactionRecord, Mode, ViewMessage};
use crate::engine::{self, EngineError, EngineInput};
use crate::store::{Store, StoreError};
use crate::summarize::Summarizer;

/// How many times a compaction starts again after losing a race before giving up.
const ATTEMPTS: usize = 8;

/// What the caller asked for.
#[derive(Debug, Clone, Copy)]
pub struct CompactRequest {
    pub mode: Mode,
    pub overflow_retry: u8,
    /// Tokens of the tool schemas sent with the request.
    pub tools_tokens: i64,
}

/// The view and the record that explains it.
#[derive(Debug)]
pub struct Compacted {
    pub messages: Vec<ViewMessage>,
    pub record: CompactionRecord,
    /// Whether the state and the record were written (false for dry runs and for calls that
    /// changed nothing).
    pub persisted: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum CompactError {
    #[error("session not found")]
    NotFound,
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error("other compactions of this session kept winning; retry")]
    Contended,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Compacts a session's context and returns the view to send. The view's events come from
/// `cache` when this replica has them, else from the store.
pub async fn compact_session(
    store: &dyn Store,
    summarizer: Option<&dyn Summarizer>,
    cache: &ViewCache,
    session_id: Uuid,
    request: CompactRequest,
) -> Result<Compacted, CompactError> {
    let mut cached = cache.take(session_id);
    for _ in 0..ATTEMPTS {
        let (session, stored) = store
            .load_session_state(session_id)
            .await?
            .ok_or(CompactError::NotFound)?;
        let state = &stored.state;
        cached = cached.refresh(store, session_id, state).await?;
        let events = cached.events();
        let head_seq = events
            .last()
            .map_or(state.checkpoint_seq, |e| e.seq)
            .max(state.checkpoint_seq);
        let out = engine::compact(
            EngineInput {
                session_id,
                config: &session.config,
                state,
                events,
                head_seq,
                tools_tokens: request.tools_tokens,
                mode: request.mode,
                overflow_retry: request.overflow_retry,
                now: Utc::now(),
            },
            summarizer,
        )
        .await?;
        if request.mode == Mode::DryRun || !out.changed {
            cache.put(session_id, cached);
            return Ok(Compacted {
                messages: out.messages,
                record: out.record,
                persisted: false,
            });
        }
        let saved = store
            .save_compaction(
                session_id,
                stored.version,
                &out.state,
                Some(&out.record),
                &out.folded,
            )
            .await?;
        if saved {
            cache.put(session_id, cached);
            return Ok(Compacted {
                messages: out.messages,
                record: out.record,
                persisted: true,
            });
        }
        tracing::debug!(%session_id, "a concurrent compaction won; starting again from its state");
    }
    Err(CompactError::Contended)
}

/// Folds the provider's real input-token count for a view into the session's calibration.
/// `our_tokens` is ctxd's count of the same request (messages and tool schemas). Returns the
/// new calibration ratio.
pub async fn record_usage(
    store: &dyn Store,
    session_id: Uuid,
    provider_tokens: i64,
    our_tokens: i64,
) -> Result<f64, CompactError> {
    for _ in 0..ATTEMPTS {
        let mut stored = store.load_state(session_id).await?;
        stored.state.calibrate(provider_tokens, our_tokens);
        if store
            .save_compaction(session_id, stored.version, &stored.state, None, &[])
            .await?
        {
            return Ok(stored.state.calibration);
        }
    }
    Err(CompactError::Contended)
}
