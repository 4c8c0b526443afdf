//! Running compactions against the store: load the state and the view's events, run the engine
//! (off the async workers), get it the summary it asks for within a deadline, persist what
//! changed. Compactions of one session are serialised by the state's version: a
//! compaction writes only over the version it read, and one that loses starts again from the
//! winner's state, so concurrent calls never lose or corrupt state.

pub mod cache;
pub mod prepare;
pub mod summary;

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use uuid::Uuid;

use cache::{CachedView, ViewCache};
use prepare::Readiness;
use summary::SummaryKey;

use crate::domain::compaction::{
    unrecorded_id, CompactionRecord, FallbackReason, Mode, Tier, ViewMessage,
};
use crate::domain::condensation::Condensation;
use crate::domain::session::Session;
use crate::domain::state::CompactionState;
use crate::domain::state::SummaryJob;
use crate::engine::render::{Format, Fragments};
use crate::engine::{self, EngineError, EngineInput, EngineOutput, Step};
use crate::store::{Store, StoreError, StoredState};
use crate::summarize::{Summarizer, SummaryOutcome, SummaryRequest};

/// How many times a compaction starts again after losing a race before giving up.
const ATTEMPTS: usize = 8;

/// What the caller asked for.
#[derive(Debug, Clone)]
pub struct CompactRequest {
    /// The format the view is rendered in: it decides which reasoning is sent back.
    pub format: Format,
    pub mode: Mode,
    pub overflow_retry: u8,
    /// Tokens of the tool schemas sent with the request.
    pub tools_tokens: i64,
    /// The longest a summariser may take for this request (it never takes longer than the
    /// operator's timeout either): past it, the deterministic summary is used.
    pub summary_deadline: Duration,
    /// The agent's condensation to take instead of compacting by the policy.
    pub condensation: Option<Arc<Condensation>>,
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
    #[error("the compaction's worker stopped: {0}")]
    Worker(String),
    #[error("this replica is running as many compactions as it may; retry")]
    Busy,
}

/// Compactions one replica runs at once (each holds a thread of the blocking pool while it
/// computes); beyond them a compaction waits for a slot, at most [`SLOT_WAIT`], then is
/// answered 503 with Retry-After.
fn max_concurrent() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get()) * 4
}

/// How long a compaction waits for a slot before it is answered 503.
const SLOT_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

static SLOTS: std::sync::LazyLock<tokio::sync::Semaphore> =
    std::sync::LazyLock::new(|| tokio::sync::Semaphore::new(max_concurrent()));

/// One compaction of a session at a time on this replica: the next waits and then reads what
/// the first wrote, rather than computing the same view and losing the race to write it.
/// (Across replicas the state's version settles races.)
static SESSIONS: std::sync::LazyLock<
    std::sync::Mutex<std::collections::HashMap<Uuid, std::sync::Weak<tokio::sync::Mutex<()>>>>,
> = std::sync::LazyLock::new(Default::default);

/// What a compaction holds while it runs: its session's turn and a slot.
struct Admitted {
    _session: tokio::sync::OwnedMutexGuard<()>,
    _slot: tokio::sync::SemaphorePermit<'static>,
}

async fn admit(session_id: Uuid) -> Result<Admitted, CompactError> {
    let lock = {
        let mut sessions = SESSIONS.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(lock) = sessions.get(&session_id).and_then(std::sync::Weak::upgrade) {
            lock
        } else {
            // Forget the sessions no compaction holds any more, now and then.
            if sessions.len() >= 1_024 {
                sessions.retain(|_, lock| lock.strong_count() > 0);
            }
            let lock = Arc::new(tokio::sync::Mutex::new(()));
            sessions.insert(session_id, Arc::downgrade(&lock));
            lock
        }
    };
    // The session's turn comes within the request's own timeout.
    let session = lock.lock_owned().await;
    let slot = tokio::time::timeout(SLOT_WAIT, SLOTS.acquire())
        .await
        .map_err(|_| CompactError::Busy)?
        .map_err(|_| CompactError::Busy)?;
    Ok(Admitted {
        _session: session,
        _slot: slot,
    })
}

/// What one attempt came to.
// Made and taken apart once per compaction: boxing the larger variant would only add an
// allocation.
#[allow(clippy::large_enum_variant)]
enum Attempt<V> {
    /// The view, presented, with the state as now stored when it was written.
    Done {
        view: V,
        saved: Option<CompactionState>,
    },
    /// Another compaction wrote first: start again from its state.
    Lost,
}

/// The summary a compaction got, kept across attempts: a compaction that lost the race to
/// another one and must fold the same events again reuses it instead of asking again.
#[derive(Default)]
struct Summaries {
    kept: Option<(SummaryKey, SummaryOutcome)>,
    /// Whether a model has been asked already for this compaction.
    asked_model: bool,
}

/// The view a compaction ended with, as `present` sees it: its messages (which borrow from
/// the events), the JSON this replica keeps of their rendering, the record, and whether the
/// record was stored (false for dry runs and for calls that changed nothing).
pub struct Presented<'p, 'a> {
    pub messages: &'p [ViewMessage<'a>],
    pub fragments: &'p mut Fragments,
    pub record: &'p CompactionRecord,
    pub persisted: bool,
}

/// Compacts a session's context and returns the view to send, as `present` makes it (with the
/// record that explains it, and whether it was stored). The
/// view's events come from `cache` when this replica has them, else from the store.
///
/// Each attempt (the engine, the summary it may ask for, writing the state and `present`)
/// runs on the blocking pool, off the async workers. A model is asked at most once per call: a
/// compaction that lost the race and folds the same events again reuses the summary it has.
pub async fn compact_session<V, P>(
    store: Arc<dyn Store>,
    summarizer: Option<Arc<dyn Summarizer>>,
    cache: &ViewCache,
    session_id: Uuid,
    request: CompactRequest,
    present: P,
) -> Result<V, CompactError>
where
    V: Send + 'static,
    P: Fn(Presented<'_, '_>) -> V + Send + Sync + 'static,
{
    let _admitted = admit(session_id).await?;
    let present = Arc::new(present);
    let mut summaries = Summaries::default();
    let mut cached = cache.take(session_id);
    for _ in 0..ATTEMPTS {
        let started = Instant::now();
        let (session, stored, view) = load(&*store, session_id, cached).await?;
        let job = Job {
            handle: tokio::runtime::Handle::current(),
            store: Arc::clone(&store),
            summarizer: summarizer.clone(),
            session,
            stored,
            request: request.clone(),
            started,
        };
        let present = Arc::clone(&present);
        let (view, stored, attempt, kept) = tokio::task::spawn_blocking(move || {
            let mut view = view;
            let mut summaries = summaries;
            let attempt = job.run(&mut view, &mut summaries, &*present);
            (view, job.stored, attempt, summaries)
        })
        .await
        .map_err(|e| CompactError::Worker(e.to_string()))?;
        cached = view;
        summaries = kept;
        match attempt? {
            Attempt::Done {
                view: presented,
                saved,
            } => {
                cached.keep_state(match saved {
                    Some(state) => StoredState {
                        version: stored.version + 1,
                        state,
                    },
                    None => stored,
                });
                cache.put(session_id, cached);
                return Ok(presented);
            }
            Attempt::Lost => {
                tracing::debug!(%session_id, "a concurrent compaction won; starting again from its state")
            }
        }
    }
    Err(CompactError::Contended)
}

/// One attempt at a compaction, over a loaded session and state.
struct Job {
    handle: tokio::runtime::Handle,
    store: Arc<dyn Store>,
    summarizer: Option<Arc<dyn Summarizer>>,
    session: Session,
    stored: StoredState,
    request: CompactRequest,
    started: Instant,
}

impl Job {
    /// Runs the engine over `view`, gets it the summary it asks for, writes what changed over
    /// the version read, and presents the view.
    fn run<V>(
        &self,
        view: &mut CachedView,
        summaries: &mut Summaries,
        present: &dyn Fn(Presented<'_, '_>) -> V,
    ) -> Result<Attempt<V>, CompactError> {
        let (session, state, request) = (&self.session, &self.stored.state, &self.request);
        let (events, fragments, view_prepared) = view.parts();
        let head_seq = events
            .last()
            .map_or(state.checkpoint_seq, |e| e.seq)
            .max(state.checkpoint_seq);
        let step = engine::compact(EngineInput {
            session_id: session.id,
            compaction_id: Uuid::now_v7(),
            config: &session.config,
            state,
            events,
            head_seq,
            tools_tokens: request.tools_tokens,
            format: request.format,
            mode: request.mode,
            overflow_retry: request.overflow_retry,
            condensation: request.condensation.as_deref(),
            now: Utc::now(),
        })?;
        // With a model, a fold takes the summary prepared for it. While it is being prepared,
        // a soft fold waits for a later call, and a fold that cannot wait takes the
        // deterministic summary: only a forced compaction asks the model itself.
        let preparing = self.summarizer.is_some() && request.mode != Mode::DryRun;
        let out = match step {
            Step::Done(out) => out,
            Step::Summarize(pending) => {
                let readiness = if preparing && request.mode != Mode::Force {
                    let job = self
                        .handle
                        .block_on(self.store.summary_job(session.id, state.checkpoint_seq))?;
                    prepare::readiness(job, pending.request())
                } else {
                    Readiness::Unusable
                };
                if let Readiness::Absent = readiness {
                    let r = pending.request();
                    let to_seq = r.events.last().map_or(state.checkpoint_seq, |e| e.seq);
                    let job = prepare::job_for(
                        session.id,
                        state.checkpoint_seq,
                        to_seq,
                        r.previous,
                        r.max_chars,
                    );
                    self.queue(&job, view_prepared)?;
                }
                match readiness {
                    Readiness::Ready(outcome) => pending.resume(*outcome),
                    Readiness::Preparing | Readiness::Absent
                        if pending.tier() == Tier::Soft && !pending.must_fold() =>
                    {
                        pending.without_fold()
                    }
                    Readiness::Unusable if !preparing || request.mode == Mode::Force => {
                        let outcome = self.summary(pending.request(), summaries);
                        pending.resume(outcome)
                    }
                    _ => {
                        let outcome = SummaryOutcome::deterministic(
                            pending.request(),
                            FallbackReason::NotPrepared,
                            None,
                        );
                        pending.resume(outcome)
                    }
                }
            }
        };
        let EngineOutput {
            messages,
            state: new_state,
            mut record,
            folded,
            changed,
            declined_fold,
        } = out;
        // From the warn tier on, the next fold's summary is prepared in the background (once
        // per checkpoint: the span is worked out only when none was queued at it).
        let queued_here = *view_prepared == Some(new_state.checkpoint_seq);
        if preparing && record.tier >= Tier::Warn && !queued_here {
            let next = declined_fold
                .or_else(|| engine::next_fold(&session.config, &new_state, events, request.format));
            if let Some(to_seq) = next {
                let job = prepare::job_for(
                    session.id,
                    new_state.checkpoint_seq,
                    to_seq,
                    &new_state.summary,
                    session.config.summary_max_chars(),
                );
                self.queue(&job, view_prepared)?;
            }
        }
        record.duration_ms = self.started.elapsed().as_secs_f64() * 1e3;
        crate::metrics::METRICS.compaction(&record);
        let persist = request.mode != Mode::DryRun && changed;
        let saved = persist
            && self.handle.block_on(self.store.save_compaction(
                session.id,
                self.stored.version,
                &new_state,
                Some(&record),
                &folded,
            ))?;
        if persist && !saved {
            return Ok(Attempt::Lost);
        }
        if !saved {
            record.id = unrecorded_id(record.id, record.input_tokens_estimate);
        }
        let view = present(Presented {
            messages: &messages,
            fragments,
            record: &record,
            persisted: saved,
        });
        Ok(Attempt::Done {
            view,
            saved: saved.then_some(new_state),
        })
    }

    /// Queues `job` unless this replica queued one at its checkpoint already (the store keeps
    /// one per checkpoint whoever queues it), and wakes the worker.
    fn queue(&self, job: &SummaryJob, queued: &mut Option<i64>) -> Result<(), CompactError> {
        if *queued == Some(job.checkpoint_seq) {
            return Ok(());
        }
        if self.handle.block_on(self.store.enqueue_summary_job(job))? {
            prepare::queued();
        }
        *queued = Some(job.checkpoint_seq);
        Ok(())
    }

    /// The summary of `request`: the one this compaction already has for the same events, the
    /// operator's summariser's within the deadline, or the deterministic one.
    fn summary(&self, request: SummaryRequest<'_>, summaries: &mut Summaries) -> SummaryOutcome {
        let key = SummaryKey::of(&request);
        let outcome = match summaries.kept.take() {
            Some((kept, outcome)) if kept == key => outcome,
            // A dry run shows what a compaction would do; it never spends a model call.
            _ if self.request.mode == Mode::DryRun => {
                SummaryOutcome::deterministic(request, FallbackReason::DryRun, None)
            }
            _ if summaries.asked_model => SummaryOutcome::deterministic(
                request,
                FallbackReason::AlreadyAsked,
                Some(
                    "a concurrent compaction changed what this one folds; deterministic \
                     summary used rather than asking the summariser twice"
                        .into(),
                ),
            ),
            _ => match self.summarizer.as_deref() {
                // Nothing to wait for: the deterministic summary is pure.
                None => {
                    SummaryOutcome::deterministic(request, FallbackReason::NoneConfigured, None)
                }
                Some(s) => {
                    summaries.asked_model = true;
                    let deadline = s.timeout().min(self.request.summary_deadline);
                    self.handle
                        .block_on(summary::summarize(Some(s), request, deadline))
                }
            },
        };
        summaries.kept = Some((key, outcome.clone()));
        outcome
    }
}

/// The view the session's last compaction answered, if nothing was appended since (its state
/// over the events as they stand, compacting nothing), as `present` makes it from its messages
/// and their tokens (before calibration).
pub async fn last_view<V, P>(
    store: Arc<dyn Store>,
    cache: &ViewCache,
    session_id: Uuid,
    format: Format,
    present: P,
) -> Result<V, CompactError>
where
    V: Send + 'static,
    P: FnOnce(&[ViewMessage<'_>], i64) -> V + Send + 'static,
{
    let (session, stored, view) = load(&*store, session_id, cache.take(session_id)).await?;
    let (mut view, stored, presented) = tokio::task::spawn_blocking(move || {
        let (messages, tokens) =
            engine::current_view(&session.config, &stored.state, view.events(), format);
        let presented = present(&messages, tokens);
        (view, stored, presented)
    })
    .await
    .map_err(|e| CompactError::Worker(e.to_string()))?;
    view.keep_state(stored);
    cache.put(session_id, view);
    Ok(presented)
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
/// calibration factor now applied.
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
            return Ok(stored.state.calibration_factor());
        }
    }
    Err(CompactError::Contended)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// Two compactions of one session take turns on a replica; another session's does not
    /// wait for them.
    #[tokio::test]
    async fn compactions_of_one_session_take_turns() {
        let (one, other) = (Uuid::now_v7(), Uuid::now_v7());
        let first = admit(one).await.unwrap();
        let second = tokio::spawn(admit(one));
        let elsewhere = tokio::spawn(admit(other));
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(elsewhere.is_finished(), "another session does not wait");
        assert!(!second.is_finished(), "the same session waits its turn");
        drop(first);
        second.await.unwrap().unwrap();
        // Nothing holds the session now: it is forgotten when the map is next pruned.
        let sessions = SESSIONS.lock().unwrap();
        assert!(sessions.get(&one).is_some_and(|w| w.strong_count() == 0));
    }
}
