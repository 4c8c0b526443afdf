//! Engine tests: the logs they compact and the runs that compact them, here; the tests by what
//! they check (the tiers and their boundaries; the edges: emergency, force, overflow retries,
//! room, pending calls). Costs use the chars4 tokenizer so that they are easy to reason about.

mod limits;
mod tiers;

use chrono::Utc;
use serde_json::json;
use uuid::Uuid;

use super::{compact, EngineError, EngineInput, EngineOutput, Step};
use crate::domain::compaction::{FallbackReason, Mode, Projection, Tier, ViewMessage};
use crate::domain::condensation::Condensation;
use crate::domain::event::{Event, EventInput};
use crate::domain::session::SessionConfig;
use crate::domain::state::CompactionState;
use crate::summarize::{SummaryOutcome, SummaryRequest};
use crate::tokens::Tokenizer;

/// A session's log under construction.
#[derive(Default, Clone)]
pub(super) struct Log {
    pub events: Vec<Event>,
}

impl Log {
    pub fn push(&mut self, value: serde_json::Value) -> i64 {
        let input: EventInput = serde_json::from_value(value).unwrap();
        let new = input.validate(0).unwrap();
        let seq = self.events.len() as i64 + 1;
        self.events.push(Event {
            seq,
            id: None,
            tokens: new.body.tokens(Tokenizer::Chars4),
            body: new.body,
            pinned: new.pinned,
            metadata: None,
            created_at: Utc::now(),
            derived: Default::default(),
        });
        seq
    }
    pub fn system(&mut self, text: &str) -> i64 {
        self.push(json!({"type": "message", "role": "system", "content": text}))
    }
    pub fn user(&mut self, text: &str) -> i64 {
        self.push(json!({"type": "message", "role": "user", "content": text}))
    }
    pub fn assistant(&mut self, text: &str) -> i64 {
        self.push(json!({"type": "message", "role": "assistant", "content": text}))
    }
    pub fn call(&mut self, id: &str) -> i64 {
        self.push(json!({"type": "message", "role": "assistant",
            "tool_calls": [{"id": id, "name": "read", "arguments": {"path": format!("src/{id}.rs")}}]}))
    }
    pub fn result(&mut self, id: &str, chars: usize) -> i64 {
        let content: String = (0..chars)
            .map(|i| if i % 80 == 79 { '\n' } else { 'x' })
            .collect();
        self.push(
            json!({"type": "message", "role": "tool", "tool_call_id": id, "name": "read",
            "content": content}),
        )
    }
    /// A call and its result.
    pub fn exchange(&mut self, id: &str, chars: usize) {
        self.call(id);
        self.result(id, chars);
    }
    pub fn head(&self) -> i64 {
        self.events.len() as i64
    }
    /// The events a view of `state` is made of, as a store loads them.
    pub fn view_events(&self, state: &CompactionState) -> Vec<Event> {
        self.events
            .iter()
            .filter(|e| e.seq > state.checkpoint_seq || state.kept.contains(&e.seq))
            .cloned()
            .collect()
    }
}

pub(super) fn config(window: u32) -> SessionConfig {
    SessionConfig {
        context_window: window,
        max_output_tokens: 1_000,
        tokenizer: Tokenizer::Chars4,
        min_tail_messages: 4,
        offload_threshold_chars: 400,
        ..SessionConfig::default()
    }
}

pub(super) async fn run(
    config: &SessionConfig,
    state: &CompactionState,
    log: &Log,
    tools_tokens: i64,
    mode: Mode,
    overflow_retry: u8,
) -> Result<EngineOutput<'static>, EngineError> {
    run_with(
        config,
        state,
        log,
        tools_tokens,
        mode,
        overflow_retry,
        &|request| SummaryOutcome::deterministic(request, FallbackReason::NoneConfigured, None),
    )
}

/// Runs a compaction to its end, answering the summary it asks for with `summarize`.
pub(super) fn run_with(
    config: &SessionConfig,
    state: &CompactionState,
    log: &Log,
    tools_tokens: i64,
    mode: Mode,
    overflow_retry: u8,
    summarize: &dyn Fn(SummaryRequest<'_>) -> SummaryOutcome,
) -> Result<EngineOutput<'static>, EngineError> {
    let run = Run {
        mode,
        overflow_retry,
        condensation: None,
    };
    run_full(config, state, log, tools_tokens, run, summarize)
}

/// What a compaction is asked for.
pub(super) struct Run<'c> {
    pub mode: Mode,
    pub overflow_retry: u8,
    pub condensation: Option<&'c Condensation>,
}

/// [`run_with`], with the agent's condensation when there is one.
pub(super) fn run_full(
    config: &SessionConfig,
    state: &CompactionState,
    log: &Log,
    tools_tokens: i64,
    run: Run<'_>,
    summarize: &dyn Fn(SummaryRequest<'_>) -> SummaryOutcome,
) -> Result<EngineOutput<'static>, EngineError> {
    let Run {
        mode,
        overflow_retry,
        condensation,
    } = run;
    let events = log.view_events(state);
    let step = compact(EngineInput {
        session_id: Uuid::nil(),
        compaction_id: Uuid::now_v7(),
        config,
        state,
        events: &events,
        head_seq: log.head(),
        tools_tokens,
        format: crate::engine::render::Format::Raw,
        mode,
        overflow_retry,
        condensation,
        now: Utc::now(),
    })?;
    let out = match step {
        Step::Done(out) => out,
        Step::Summarize(pending) => {
            let outcome = summarize(pending.request());
            pending.resume(outcome)
        }
    };
    Ok(EngineOutput {
        messages: out
            .messages
            .into_iter()
            .map(ViewMessage::into_owned)
            .collect(),
        state: out.state,
        record: out.record,
        folded: out.folded,
        changed: out.changed,
        declined_fold: out.declined_fold,
    })
}

pub(super) fn seqs(out: &EngineOutput<'_>) -> Vec<Option<i64>> {
    out.messages.iter().map(|m| m.seq).collect()
}

pub(super) fn projection_of(out: &EngineOutput<'_>, seq: i64) -> Option<Projection> {
    out.messages
        .iter()
        .find(|m| m.seq == Some(seq))
        .map(|m| m.projection)
}

/// Tools tokens that put the view at exactly `utilization` of the window.
pub(super) fn tools_for(utilization: f64, config: &SessionConfig, log: &Log) -> i64 {
    let messages: i64 = log.events.iter().map(|e| e.tokens).sum();
    (utilization * f64::from(config.context_window)).round() as i64
        - messages
        - i64::from(config.max_output_tokens)
}
