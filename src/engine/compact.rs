//! The progressive policy as a plan that may pause once: a tier decided on the view that would
//! be sent, then the least rewriting that brings the view back within bounds.
//!
//! [`compact`] is pure: the compaction's id and `now` come in, nothing is read from a clock and
//! nothing waits. When folding calls for a summary, it returns the request for one with a
//! continuation ([`Pending`]); whoever runs the engine asks a summariser (owning its deadline
//! and fallback) and hands the outcome to [`Pending::resume`].

use uuid::Uuid;

use super::progressive::{self, Bounds};
use super::render::Format;
use super::run::{EngineError, EngineInput, EngineOutput, Pending, Run};
use super::working::Working;
use crate::domain::compaction::ViewMessage;
use crate::domain::event::Event;
use crate::domain::session::{Policy, SessionConfig};
use crate::domain::state::CompactionState;

/// Where a compaction stands: done, or waiting for a summary.
#[derive(Debug)]
// Made and taken apart once per compaction: boxing the larger variant would only add an
// allocation.
#[allow(clippy::large_enum_variant)]
pub enum Step<'a> {
    Done(EngineOutput<'a>),
    Summarize(Pending<'a>),
}

/// Runs one compaction as far as it goes without a summary.
pub fn compact(input: EngineInput<'_>) -> Result<Step<'_>, EngineError> {
    let mut run = Run::start(input)?;
    if let Some(condensation) = run.input.condensation {
        run.condense(condensation);
        return Ok(Step::Done(run.finish()));
    }
    match run.input.overflow_retry {
        0 => match run.policy_step() {
            progressive::Step::Go(go) => run = go,
            progressive::Step::Wait(pending) => return Ok(Step::Summarize(pending)),
        },
        // A retry never shows more than an ordinary compaction would; the second one also
        // masks what the first did, for when the last user turn leaves nothing to fold.
        retry => {
            run.cap_items();
            run.mask_completed_exchanges();
            if retry > 1 {
                run.keep_last_user_turn();
            }
            if run.input.config.policy == Policy::Episodic {
                run.reduce_user_turn(retry);
            }
        }
    }
    Ok(Step::Done(run.finish()))
}

impl<'a> Run<'a> {
    /// The session's policy's step.
    fn policy_step(self) -> progressive::Step<'a> {
        match self.input.config.policy {
            Policy::Progressive => self.progressive(),
            Policy::Episodic => self.episodic(),
        }
    }
}

/// The view `state` shows over `events` as they stand, compacting nothing, and its tokens:
/// what the last compaction answered when nothing was appended since.
pub fn current_view<'a>(
    config: &SessionConfig,
    state: &CompactionState,
    events: &'a [Event],
    format: Format,
) -> (Vec<ViewMessage<'a>>, i64) {
    let (messages, _, tokens) = Working::from_state(config, state, events, format).render();
    (messages, tokens)
}

/// The last seq the next soft compaction (or episodic eviction) would fold as the view stands:
/// what a summary can be prepared for ahead of it (the view only grows until then, so the fold
/// then reaches at least as far). None when it would fold nothing.
pub fn next_fold(
    config: &SessionConfig,
    state: &CompactionState,
    events: &[Event],
    format: Format,
) -> Option<i64> {
    if config.policy == Policy::Episodic {
        let input = EngineInput {
            session_id: Uuid::nil(),
            compaction_id: Uuid::nil(),
            config,
            state,
            events,
            head_seq: events.last().map_or(state.checkpoint_seq, |e| e.seq),
            tools_tokens: state.last_view.tools_tokens,
            format,
            mode: crate::domain::compaction::Mode::Auto,
            overflow_retry: 0,
            condensation: None,
            now: chrono::DateTime::UNIX_EPOCH,
        };
        return Run::start(input).ok()?.next_fold();
    }
    let mut work = Working::from_state(config, state, events, format);
    let bounds = Bounds::new(
        config,
        state.last_view.tools_tokens,
        state.calibration_factor(),
        work.pinned_tokens(),
    );
    progressive::cap_items(&mut work, &bounds, Uuid::nil());
    let tokens = work.tokens();
    let plan = progressive::plan(&work, config, &bounds, tokens, Uuid::nil());
    (plan.cut > 0).then(|| plan.candidate.live[plan.cut - 1].event.seq)
}
