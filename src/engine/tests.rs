//! Engine tests: every tier and boundary, table-driven over small logs, and properties over
//! random sessions. Costs use the chars4 tokenizer so that they are easy to reason about.

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
    })
}

fn seqs(out: &EngineOutput<'_>) -> Vec<Option<i64>> {
    out.messages.iter().map(|m| m.seq).collect()
}

fn projection_of(out: &EngineOutput<'_>, seq: i64) -> Option<Projection> {
    out.messages
        .iter()
        .find(|m| m.seq == Some(seq))
        .map(|m| m.projection)
}

/// Tools tokens that put the view at exactly `utilization` of the window.
fn tools_for(utilization: f64, config: &SessionConfig, log: &Log) -> i64 {
    let messages: i64 = log.events.iter().map(|e| e.tokens).sum();
    (utilization * f64::from(config.context_window)).round() as i64
        - messages
        - i64::from(config.max_output_tokens)
}

#[tokio::test]
async fn below_warn_the_view_is_the_log() {
    let config = config(10_000);
    let mut log = Log::default();
    log.system("You are a careful agent.");
    log.user("Please read the files.");
    log.exchange("a", 100);
    let out = run(&config, &CompactionState::default(), &log, 0, Mode::Auto, 0)
        .await
        .unwrap();
    assert_eq!(out.record.tier, Tier::None);
    assert!(!out.record.acted && !out.changed);
    assert_eq!(seqs(&out), [Some(1), Some(2), Some(3), Some(4)]);
    assert_eq!(out.record.prefix_kept, 4);
}

#[tokio::test]
async fn tier_boundaries_are_inclusive() {
    let config = config(10_000);
    let mut log = Log::default();
    // Large enough that the tool schemas filling the rest leave the safety margin free.
    log.user(&"hello ".repeat(800));
    let state = CompactionState::default();
    for (utilization, tier) in [
        (0.69, Tier::None),
        (0.70, Tier::Warn),
        (0.80, Tier::Soft),
        (0.90, Tier::Full),
        // Nothing is over the window, so nothing is truncated: the gentle steps suffice.
        (0.95, Tier::Full),
    ] {
        let tools = tools_for(utilization, &config, &log);
        let out = run(&config, &state, &log, tools, Mode::Auto, 0)
            .await
            .unwrap();
        assert_eq!(out.record.tier, tier, "at {utilization}");
        assert!(out.record.tokens_after <= 10_000);
    }
}

/// A log at the warn tier whose head holds `count` results of `chars` characters, each under
/// the per-item cap (its own step is tested on its own), with the tools taking what brings the
/// request to 72 % of the window.
fn warn_log(count: usize, chars: usize) -> (SessionConfig, Log, i64) {
    let config = SessionConfig {
        item_max_share: 0.2,
        ..config(10_000)
    };
    let mut log = Log::default();
    log.system("sys");
    log.user("Investigate the crash.");
    for i in 0..count {
        log.exchange(&format!("c{i}"), chars);
    }
    log.user("Now summarise what you found.");
    log.assistant("Working on it.");
    let tools = tools_for(0.72, &config, &log);
    (config, log, tools)
}

#[tokio::test]
async fn warn_offloads_large_head_results_and_keeps_the_tail() {
    // About 1,000 tokens each, 300 as a preview: offloading the five beyond the tail brings
    // the request from 72 % of the window to the low-water mark (40 %).
    let (config, log, tools) = warn_log(6, 4_000);
    let out = run(
        &config,
        &CompactionState::default(),
        &log,
        tools,
        Mode::Auto,
        0,
    )
    .await
    .unwrap();
    assert_eq!(out.record.tier, Tier::Warn);
    assert!(out.record.acted, "{:?}", out.record);
    // Down to the low-water mark at once, so the next compaction is many turns away.
    assert!(out.record.tokens_after <= 4_000, "{:?}", out.record);
    // The head's large results are previews; the last four messages are untouched.
    let offloaded: Vec<i64> = out.record.offloaded.iter().map(|o| o.seq).collect();
    assert!(!offloaded.is_empty());
    for seq in &offloaded {
        assert_eq!(projection_of(&out, *seq), Some(Projection::Preview));
        let m = out.messages.iter().find(|m| m.seq == Some(*seq)).unwrap();
        assert!(m.content.contains(&format!("observation://{seq}")));
    }
    let tail_start = log.head() - 3;
    for seq in tail_start..=log.head() {
        assert_eq!(
            projection_of(&out, seq),
            Some(Projection::Full),
            "tail seq {seq}"
        );
        assert!(!offloaded.contains(&seq));
    }
    // Nothing was folded, so there is no summary message: each preview carries its own
    // reference where it stands.
    assert!(out
        .messages
        .iter()
        .all(|m| m.projection != Projection::Summary));
    assert!(
        out.record.summarized_seqs.is_empty(),
        "warn does not summarise"
    );
}

/// Offloading that frees a worthwhile share but leaves the view above the low-water mark
/// would rewrite the view's middle and leave it at the tier, to be rewritten again a few turns
/// later: the warn tier leaves it alone, and the soft tier brings it down when it comes.
#[tokio::test]
async fn a_warn_offload_short_of_low_water_waits_for_the_soft_tier() {
    // About 500 tokens each, 300 as a preview: offloading the eleven beyond the tail frees
    // about 2,000 tokens (more than the 5 % a compaction must free) but leaves the request at
    // about 50 % of the window, over the low-water mark (40 %).
    let (config, log, tools) = warn_log(12, 2_000);
    let state = CompactionState::default();
    let out = run(&config, &state, &log, tools, Mode::Auto, 0)
        .await
        .unwrap();
    assert_eq!(out.record.tier, Tier::Warn);
    assert!(!out.record.acted && !out.changed, "{:?}", out.record);
    assert_eq!(out.record.prefix_kept, out.messages.len() as i64);

    // The same log past the soft tier: brought down to the mark, the head folded.
    let tools = tools_for(0.81, &config, &log);
    let out = run(&config, &state, &log, tools, Mode::Auto, 0)
        .await
        .unwrap();
    assert_eq!(out.record.tier, Tier::Soft);
    assert!(out.record.acted, "{:?}", out.record);
    assert!(out.record.tokens_after <= 4_000, "{:?}", out.record);
}

#[tokio::test]
async fn a_small_gain_leaves_the_view_alone() {
    let config = config(10_000);
    let mut log = Log::default();
    log.user("Investigate.");
    log.exchange("c0", 500); // one small offload candidate: ~100 tokens freed < 5 % of 10k
    for i in 0..4 {
        log.user(&format!("message {i}"));
    }
    let tools = tools_for(0.71, &config, &log);
    let out = run(
        &config,
        &CompactionState::default(),
        &log,
        tools,
        Mode::Auto,
        0,
    )
    .await
    .unwrap();
    assert_eq!(out.record.tier, Tier::Warn);
    assert!(!out.record.acted && !out.changed);
    assert_eq!(out.record.prefix_kept, out.messages.len() as i64);
}

#[tokio::test]
async fn soft_folds_the_oldest_of_the_head_down_to_low_water() {
    let config = config(10_000);
    let mut log = Log::default();
    log.system("sys");
    for i in 0..20 {
        log.user(&format!("request {i}: {}", "y".repeat(700)));
        log.assistant(&format!("answer {i}: {}", "z".repeat(700)));
    }
    let out = run(&config, &CompactionState::default(), &log, 0, Mode::Auto, 0)
        .await
        .unwrap();
    assert_eq!(out.record.tier, Tier::Soft);
    assert!(out.record.acted);
    let summarized = &out.record.summarized_seqs;
    // The oldest of the head (seqs 2..=37), never the tail (38..=41), as far as the low-water
    // mark (40 % of the window: 3,000 message tokens after the reserved output) needs.
    let head: Vec<i64> = (2..=37).collect();
    assert!(!summarized.is_empty());
    assert_eq!(summarized[..], head[..summarized.len()]);
    assert!(summarized.len() < head.len(), "{summarized:?}");
    assert!(
        out.record.tokens_after <= 1_000 + 3_000 + 600,
        "down to about low water: {}",
        out.record.tokens_after
    );
    for seq in summarized {
        assert_eq!(projection_of(&out, *seq), None);
    }
    for seq in (*summarized.last().unwrap() + 1)..=log.head() {
        assert_eq!(projection_of(&out, seq), Some(Projection::Full));
    }
    assert_eq!(out.state.checkpoint_seq, *summarized.last().unwrap());
    assert_eq!(out.state.kept, [1], "the system prompt stays");
    assert!(
        out.record.summary_text.contains("request 0"),
        "{}",
        out.record.summary_text
    );
}

#[tokio::test]
async fn full_summarises_the_head_without_splitting_a_tool_pair() {
    let config = config(10_000);
    let mut log = Log::default();
    log.system("sys");
    for i in 0..12 {
        log.user(&format!("step {i}: {}", "q".repeat(600)));
    }
    // The tail's last four messages start at a result whose call stands before them.
    log.assistant("calling");
    let call = log.call("last");
    log.user("interjection");
    log.user("another");
    log.result("last", 100);
    log.user("go on");
    let tools = tools_for(0.92, &config, &log);
    let out = run(
        &config,
        &CompactionState::default(),
        &log,
        tools,
        Mode::Auto,
        0,
    )
    .await
    .unwrap();
    assert_eq!(out.record.tier, Tier::Full);
    assert!(out.record.acted);
    assert_eq!(
        projection_of(&out, call),
        Some(Projection::Full),
        "the call moved into the tail"
    );
    assert_eq!(out.state.checkpoint_seq, call - 1);
    assert_eq!(
        out.record.preserved_tail,
        (call..=log.head()).collect::<Vec<_>>()
    );
    assert_eq!(out.record.repairs.orphan_results_dropped, 0);
}

#[tokio::test]
async fn emergency_keeps_a_preview_of_a_message_too_large_for_the_window() {
    let config = config(4_000);
    let mut log = Log::default();
    log.system("sys");
    // A pasted file of ~10,000 tokens: more than the window, and no tool result to cap.
    log.user(&"pasted line\n".repeat(3_400));
    log.exchange("small", 100);
    let out = run(&config, &CompactionState::default(), &log, 0, Mode::Auto, 0)
        .await
        .unwrap();
    assert_eq!(out.record.tier, Tier::Emergency);
    assert!(
        out.record.tokens_after <= 4_000,
        "{}",
        out.record.tokens_after
    );
    // The paste is folded or reduced, never silently lost: listed, and its start still seen.
    let r = &out.record;
    let listed = r.summarized_seqs.contains(&2)
        || r.evicted_seqs.contains(&2)
        || r.offloaded.iter().any(|o| o.seq == 2);
    assert!(listed, "{r:?}");
    assert!(out
        .messages
        .iter()
        .any(|m| m.content.contains("pasted line")));
}

/// A result too large for the window alone is capped to its head and tail: no emergency.
#[tokio::test]
async fn a_tool_result_too_large_for_the_window_is_capped_not_truncated() {
    let config = config(4_000);
    let mut log = Log::default();
    log.system("sys");
    log.user("read the big file");
    log.exchange("big", 40_000); // ~10,000 tokens: more than the window
    let out = run(&config, &CompactionState::default(), &log, 0, Mode::Auto, 0)
        .await
        .unwrap();
    assert_ne!(out.record.tier, Tier::Emergency);
    assert!(out.record.evicted_seqs.is_empty());
    assert!(out.record.tokens_after <= 4_000);
    let result = out.messages.iter().find(|m| m.seq == Some(4)).unwrap();
    assert_eq!(result.projection, Projection::Preview);
    assert!(result.content.contains("observation://4?offset="));
}

#[tokio::test]
async fn force_compacts_at_low_utilization_and_a_retry_changes_nothing() {
    let config = config(100_000);
    let mut log = Log::default();
    log.system("sys");
    for i in 0..10 {
        log.user(&format!("request {i}"));
        log.exchange(&format!("c{i}"), 50);
    }
    let out = run(
        &config,
        &CompactionState::default(),
        &log,
        0,
        Mode::Force,
        0,
    )
    .await
    .unwrap();
    assert_eq!(out.record.tier, Tier::Full);
    assert!(out.record.acted);
    assert!(!out.record.summarized_seqs.is_empty());
    let again = run(&config, &out.state, &log, 0, Mode::Auto, 0)
        .await
        .unwrap();
    assert!(!again.changed, "{:?}", again.record);
    assert_eq!(again.messages, out.messages);
    let forced_again = run(&config, &out.state, &log, 0, Mode::Force, 0)
        .await
        .unwrap();
    assert!(forced_again.record.summarized_seqs.is_empty());
    assert_eq!(forced_again.messages, out.messages);
}

#[tokio::test]
async fn overflow_retries_shrink_the_view() {
    let config = config(100_000);
    let mut log = Log::default();
    log.system("sys");
    log.user("first");
    log.exchange("a", 2_000);
    log.user("second");
    log.exchange("b", 2_000);
    log.user("last request");
    log.assistant("on it");
    let one = run(&config, &CompactionState::default(), &log, 0, Mode::Auto, 1)
        .await
        .unwrap();
    for seq in [4, 7] {
        assert_eq!(projection_of(&one, seq), Some(Projection::Reference));
    }
    assert!(one.record.tokens_after < one.record.tokens_before);
    let two = run(&config, &CompactionState::default(), &log, 0, Mode::Auto, 2)
        .await
        .unwrap();
    let shown: Vec<i64> = two.messages.iter().filter_map(|m| m.seq).collect();
    assert_eq!(shown, [1, 8, 9], "system and the last user turn");
    assert!(two.record.summary_text.contains("first"));
}

#[tokio::test]
async fn tools_and_reserve_must_leave_room() {
    let config = config(2_000);
    let mut log = Log::default();
    log.user("hi");
    let err = run(
        &config,
        &CompactionState::default(),
        &log,
        1_500,
        Mode::Auto,
        0,
    )
    .await
    .unwrap_err();
    assert!(matches!(err, EngineError::NoRoom { .. }));
    assert_eq!(err.need_and_ceiling(), (1_500 + 1_000 + 512, 2_000));
    // Within the margin of the window is no room either: the smallest view would not fit.
    let err = run(
        &config,
        &CompactionState::default(),
        &log,
        489,
        Mode::Auto,
        0,
    )
    .await
    .unwrap_err();
    assert_eq!(err.need_and_ceiling(), (2_001, 2_000));
    assert!(run(
        &config,
        &CompactionState::default(),
        &log,
        488,
        Mode::Auto,
        0
    )
    .await
    .is_ok());
}

#[test]
fn pending_calls_get_a_placeholder_result() {
    let mut log = Log::default();
    log.user("go");
    log.call("pending");
    let messages: Vec<_> = log.events.iter().map(ViewMessage::full).collect();
    let (repaired, repairs) = super::repair(messages, Tokenizer::Chars4);
    assert_eq!(repairs.placeholder_results_inserted, 1);
    assert_eq!(repaired.len(), 3);
    assert_eq!(repaired[2].tool_call_id.as_deref(), Some("pending"));
    assert!(repaired[2].content.starts_with("[tool result unavailable"));
    // The placeholder costs what it claims, and the repaired view is a valid request.
    assert_eq!(repaired[2].tokens, repaired[2].cost(Tokenizer::Chars4));
    let openai = super::render::render_openai(&repaired);
    assert_eq!(super::validate::validate_openai(&openai), Ok(()));
    let anthropic = super::render::render_anthropic(&repaired);
    assert_eq!(super::validate::validate_anthropic(&anthropic), Ok(()));
}
