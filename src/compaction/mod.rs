//! Running compactions against the store: load the state and the view's events, run the engine,
//! persist what changed. Compactions of one session are serialised by the state's version: a
//! compaction writes only over the version it read, and one that loses starts again from the
//! winner's state, so concurrent calls never lose or corrupt state.

pub mod cache;

use chrono::Utc;
use uuid::Uuid;

use cache::{CachedView, ViewCache};

use crate::domain::compaction::{CompactionRecord, Mode, ViewMessage};
use crate::domain::session::Session;
use crate::engine::render::Fragments;
use crate::engine::{self, EngineError, EngineInput, EngineOutput};
use crate::store::{Store, StoreError, StoredState};
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

/// The view, as the caller presented it, and the record that explains it.
#[derive(Debug)]
pub struct Compacted<V> {
    pub view: V,
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

/// Compacts a session's context and returns the view to send, as `present` makes it from the
/// view's messages (which borrow from the events, so nothing is copied unless `present` copies
/// it) and the JSON this replica keeps of their rendering. The view's events come from `cache`
/// when this replica has them, else from the store.
pub async fn compact_session<V>(
    store: &dyn Store,
    summarizer: Option<&dyn Summarizer>,
    cache: &ViewCache,
    session_id: Uuid,
    request: CompactRequest,
    present: impl FnOnce(&[ViewMessage<'_>], &mut Fragments) -> V,
) -> Result<Compacted<V>, CompactError> {
    let mut cached = cache.take(session_id);
    for _ in 0..ATTEMPTS {
        let (session, stored, view) = load(store, session_id, cached).await?;
        cached = view;
        let state = &stored.state;
        let (events, fragments) = cached.parts();
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
        let persist = request.mode != Mode::DryRun && out.changed;
        let saved = persist
            && store
                .save_compaction(
                    session_id,
                    stored.version,
                    &out.state,
                    Some(&out.record),
                    &out.folded,
                )
                .await?;
        if saved || !persist {
            let EngineOutput {
                messages,
                state: new_state,
                record,
                ..
            } = out;
            let view = present(&messages, fragments);
            // The messages borrow the cached events and state: done with them, the cache takes
            // them back, with the state as now stored.
            drop(messages);
            cached.keep_state(if saved {
                StoredState {
                    version: stored.version + 1,
                    state: new_state,
                }
            } else {
                stored
            });
            cache.put(session_id, cached);
            return Ok(Compacted {
                view,
                record,
                persisted: saved,
            });
        }
        tracing::debug!(%session_id, "a concurrent compaction won; starting again from its state");
    }
    Err(CompactError::Contended)
}

/// Loads a session, its compaction state and the events of its view, on top of what `cached`
/// holds. When the cache is warm, one read brings the session, the state's version and the
/// events appended since; the state itself is read only when it is not the cached one (another
/// replica compacted since, or the cached one was never saved). Keep the state in the view
/// (see [`CachedView::keep_state`]) before caching it again.
pub async fn load(
    store: &dyn Store,
    session_id: Uuid,
    mut cached: CachedView,
) -> Result<(Session, StoredState, CachedView), CompactError> {
    let (session, stored, current) = match cached.newest_read() {
        Some(newest) => {
            let since = store
                .session_since(session_id, newest)
                .await?
                .ok_or(CompactError::NotFound)?;
            cached.extend(since.events);
            let stored = match cached.take_state(since.version) {
                Some(stored) => stored,
                None if since.version == 0 => StoredState::default(),
                None => store.load_state(session_id).await?,
            };
            (since.session, stored, since.complete)
        }
        None => {
            let (session, stored) = store
                .load_session_state(session_id)
                .await?
                .ok_or(CompactError::NotFound)?;
            (session, stored, false)
        }
    };
    let view = cached
        .refresh(store, session_id, &stored.state, current)
        .await?;
    Ok((session, stored, view))
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
