//! Properties of the engine over random sessions: appends and compactions interleaved.

use std::collections::HashSet;

use proptest::prelude::*;

use super::episodic_tests::names;
use super::render::{render_anthropic, render_openai, render_responses};
use super::tests::{config, run_full, run_with, Log, Run};
use super::validate::{validate_anthropic, validate_openai, validate_responses};
use crate::domain::compaction::{
    is_unknown, Anchors, FallbackReason, Mode, Projection, Reason, SummarizerInfo,
    SummarizerOutcome, Tier, ViewMessage,
};
use crate::domain::condensation::Condensation;
use crate::domain::episodes::Episodes;
use crate::domain::event::{EpisodeKind, EventBody, Role};
use crate::domain::session::Policy;
use crate::domain::state::CompactionState;
use crate::summarize::{deterministic, SummaryOutcome, SummaryOutput, SummaryRequest};

/// `PROPTEST_CASES` when set (a longer soak), otherwise `default`.
fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[derive(Debug, Clone)]
enum Step {
    User(usize),
    Assistant(usize),
    /// A call and its result of the given size (0: a command that printed nothing).
    Exchange(usize),
    /// Two calls in one message, answered in reverse order.
    Parallel(usize, usize),
    /// A pinned note of the given size.
    Note(usize),
    /// An episode around a tool exchange with a result of the given size: an exploration, or
    /// (true) an action on the latest exploration when there is one.
    Episode(usize, bool),
    Compact(Mode),
    /// A compaction after the provider refused the last view for its length.
    Overflow(u8),
    /// The provider counted this many times our tokens for the last view.
    Usage(f64),
    /// A call with thinking and reasoning before it (of the given size), answered by a
    /// screenshot of the given width.
    Screenshot(usize, u32),
    /// The agent's condensation with this many completed-work entries.
    Condense(usize),
    /// A file of the given size written: a call with long arguments and a short result.
    Write(usize),
    /// What a harness sends as the user: a project's instructions of the given size, or
    /// (true) the environment's context.
    Harness(usize, bool),
}

/// The base64 of a PNG's signature and header for a `width` × 800 image: enough to read its
/// size from.
fn png(width: u32) -> String {
    use base64::Engine as _;
    let mut bytes = vec![0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13];
    bytes.extend_from_slice(b"IHDR");
    bytes.extend_from_slice(&width.to_be_bytes());
    bytes.extend_from_slice(&800u32.to_be_bytes());
    bytes.extend_from_slice(&[8, 6, 0, 0, 0, 0, 0, 0, 0]);
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Who writes the summaries of a run.
#[derive(Debug, Clone, Copy)]
enum Summariser {
    Deterministic,
    /// A model that fills the summary's whole bound.
    Verbose,
    /// A model that fails: the deterministic summary stands in, and the record says why.
    Failing,
}

fn summarise(who: Summariser, request: SummaryRequest<'_>) -> SummaryOutcome {
    match who {
        Summariser::Deterministic => {
            SummaryOutcome::deterministic(request, FallbackReason::NoneConfigured, None)
        }
        Summariser::Failing => SummaryOutcome::deterministic(
            request,
            FallbackReason::HttpStatus,
            Some("the model answered HTTP 500".into()),
        ),
        Summariser::Verbose => {
            // As the LLM summariser writes it: the model's narrative, as long as allowed,
            // beside the facts of the events.
            let seqs: Vec<String> = request.events.iter().map(|e| e.seq.to_string()).collect();
            let narrative: String = format!("Covered {}. ", seqs.join(", "))
                .chars()
                .cycle()
                .take(request.max_chars)
                .collect();
            let mut summary = deterministic::summarize_with_narrative(request, &narrative).summary;
            summary.anchors.merge(&Anchors {
                next_step: "carry on with the parser".into(),
                ..Anchors::default()
            });
            SummaryOutcome {
                output: SummaryOutput {
                    summary,
                    info: SummarizerInfo {
                        kind: "openai".into(),
                        model: Some("verbose".into()),
                        outcome: SummarizerOutcome::Used,
                        fallback_reason: None,
                        attempts: 1,
                        latency_ms: 1.0,
                        input_tokens: None,
                        output_tokens: None,
                        output_truncated: false,
                    },
                },
                error: None,
            }
        }
    }
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        // Now and then a pasted document, larger than a small window's room.
        3 => prop_oneof![6 => 1usize..1_500, 1 => 1usize..20_000].prop_map(Step::User),
        1 => (1usize..6_000, any::<bool>()).prop_map(|(n, context)| Step::Harness(n, context)),
        2 => (1usize..1_500).prop_map(Step::Assistant),
        4 => prop_oneof![1 => Just(0usize), 5 => 1usize..12_000].prop_map(Step::Exchange),
        1 => (1usize..6_000, 1usize..6_000).prop_map(|(a, b)| Step::Parallel(a, b)),
        1 => prop_oneof![4 => 1usize..200, 1 => 1usize..20_000].prop_map(Step::Note),
        2 => (1usize..6_000, any::<bool>()).prop_map(|(n, action)| Step::Episode(n, action)),
        4 => prop_oneof![Just(Mode::Auto), Just(Mode::Auto), Just(Mode::Force), Just(Mode::DryRun)]
            .prop_map(Step::Compact),
        1 => (1u8..=2).prop_map(Step::Overflow),
        1 => prop_oneof![Just(0.8), Just(1.0), Just(1.3), Just(2.5)].prop_map(Step::Usage),
        2 => (1usize..3_000, 100u32..2_000).prop_map(|(n, w)| Step::Screenshot(n, w)),
        1 => (0usize..20).prop_map(Step::Condense),
        2 => (1usize..8_000).prop_map(Step::Write),
    ]
}

fn anchor_values(a: &Anchors) -> [&str; 5] {
    [
        &a.user_intent,
        &a.execution_progress,
        &a.key_decision,
        &a.tried_solution,
        &a.next_step,
    ]
}

fn text(n: usize, seed: usize) -> String {
    let words = [
        "fix",
        "the",
        "parser",
        "in",
        "src/lib.rs",
        "error:",
        "ok",
        "café",
        "→",
    ];
    (0..n)
        .map(|i| words[(i * 7 + seed) % words.len()])
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .take(n.max(1))
        .collect()
}

/// Appends what `step` (the `i`th) adds to the log; false for the steps that append nothing.
/// `calls` numbers the tool calls so far.
fn append(log: &mut Log, step: &Step, i: usize, calls: &mut usize) -> bool {
    match step {
        Step::User(n) => {
            log.user(&text(*n, i));
        }
        Step::Harness(_, true) => {
            log.user(&format!(
                "<environment_context>\n  <cwd>/work/{i}</cwd>\n</environment_context>"
            ));
        }
        Step::Harness(n, false) => {
            let rules = text(*n, i);
            log.user(&format!("# AGENTS.md instructions for /work/{i}\n\n<INSTRUCTIONS>\n{rules}\nNever push to main.\n</INSTRUCTIONS>"));
        }
        Step::Assistant(n) => {
            log.assistant(&text(*n, i));
        }
        Step::Exchange(n) => {
            *calls += 1;
            log.exchange(&format!("c{calls}"), *n);
        }
        Step::Parallel(a, b) => {
            *calls += 1;
            let (x, y) = (format!("p{calls}a"), format!("p{calls}b"));
            log.push(
                serde_json::json!({"type": "message", "role": "assistant", "tool_calls": [
                {"id": x, "name": "read", "arguments": "{}"},
                {"id": y, "name": "grep", "arguments": {"q": "fn"}}]}),
            );
            log.result(&y, *b);
            log.result(&x, *a);
        }
        Step::Note(n) => {
            log.push(serde_json::json!({"type": "note", "content": text(*n, i), "pinned": true}));
        }
        Step::Write(n) => {
            *calls += 1;
            let id = format!("w{calls}");
            log.push(serde_json::json!({"type": "message", "role": "assistant",
                "tool_calls": [{"id": id, "name": "write",
                    "arguments": {"path": format!("src/f{i}.rs"), "content": text(*n, i)}}]}));
            log.push(
                serde_json::json!({"type": "message", "role": "tool", "tool_call_id": id,
                "name": "write", "content": "ok"}),
            );
        }
        Step::Episode(n, action) => {
            *calls += 1;
            let explored = log.events.iter().rev().find_map(|e| match &e.body {
                EventBody::EpisodeEnd(end) if !end.conclusion.is_empty() => Some(end.name.clone()),
                _ => None,
            });
            let name = format!("e{i}");
            let (kind, dependencies, conclusion) = match explored {
                Some(explored) if *action => ("action", vec![explored], String::new()),
                _ => ("exploration", vec![], text(*n / 50 + 1, i)),
            };
            log.push(
                serde_json::json!({"type": "episode_start", "name": name, "kind": kind,
                "dependencies": dependencies}),
            );
            log.exchange(&format!("c{calls}"), *n);
            log.push(serde_json::json!({"type": "episode_end", "name": name,
                "conclusion": conclusion}));
        }
        Step::Screenshot(n, width) => {
            *calls += 1;
            let id = format!("s{calls}");
            log.push(
                serde_json::json!({"type": "message", "role": "assistant", "content": [
                {"type": "thinking", "thinking": text(*n, i), "signature": "c2ln"},
                {"type": "reasoning", "id": format!("rs_{i}"), "summary": [text(*n / 4, i)],
                    "encrypted_content": "gAAA".repeat(*n / 8 + 1)},
                {"type": "text", "text": "Looking."}],
                "tool_calls": [{"id": id, "name": "screenshot", "arguments": "{}"}]}),
            );
            log.push(
                serde_json::json!({"type": "message", "role": "tool", "tool_call_id": id,
                "content": [{"type": "text", "text": text(*n / 10, i)},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                        "data": png(*width)}}]}),
            );
        }
        _ => return false,
    }
    true
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(64), ..ProptestConfig::default() })]

    #[test]
    fn views_fit_are_valid_and_lose_nothing(
        window in prop_oneof![Just(3_000u32), Just(8_000u32), Just(30_000u32)],
        min_tail in 1u32..6,
        offload in 100u32..2_000,
        tools in 0i64..400,
        system_chars in prop_oneof![4 => 1usize..500, 1 => 1usize..30_000],
        summariser in prop_oneof![Just(Summariser::Deterministic), Just(Summariser::Verbose), Just(Summariser::Failing)],
        policy in prop_oneof![Just(Policy::Progressive), Just(Policy::Episodic)],
        steps in proptest::collection::vec(step(), 1..60),
    ) {
        let mut cfg = config(window);
        cfg.policy = policy;
        cfg.min_tail_messages = min_tail;
        cfg.offload_threshold_chars = offload;
        let mut log = Log::default();
        log.system(&text(system_chars, 0));
        let mut state = CompactionState::default();
        // Every seq any record listed as offloaded, summarised or evicted.
        let mut membership: HashSet<i64> = HashSet::new();
        let mut known_anchors = [false; 5];
        let mut calls = 0;
        // The last view an automatic compaction answered, while nothing since could change
        // how old items are shown (a calibration, an overflow retry, a forced compaction).
        let mut previous: Option<Vec<ViewMessage<'static>>> = None;
        for (i, step) in steps.iter().enumerate() {
            if append(&mut log, step, i, &mut calls) {
                continue;
            }
            match step {
                Step::Usage(factor) => {
                    previous = None;
                    let ours = state.last_view.message_tokens + state.last_view.tools_tokens;
                    state.calibrate((ours as f64 * factor).ceil() as i64, ours);
                }
                _ => {
                    let (mode, overflow, condensation) = match step {
                        Step::Overflow(n) => (Mode::Auto, *n, None),
                        Step::Compact(mode) => (*mode, 0, None),
                        Step::Condense(n) => (Mode::Auto, 0, Some(Condensation {
                            milestone: format!("milestone {i}"),
                            completed_work: (0..*n).map(|k| text(40, k)).collect(),
                            strategies: vec![],
                            environment_changes: vec![],
                            constraints: vec![],
                            open_questions: vec![],
                            references: vec![],
                        })),
                        _ => unreachable!(),
                    };
                    let asked = Run { mode, overflow_retry: overflow, condensation: condensation.as_ref() };
                    // A condensation has no active episode to wait for here: the engine takes it.
                    let out = run_full(&cfg, &state, &log, tools, asked, &|r| summarise(summariser, r)).unwrap();
                    let r = &out.record;
                    prop_assert!(r.tokens_after <= i64::from(window),
                        "over budget: {} > {window} ({:?})", r.tokens_after, r.tier);
                    // What the budget counts is what every message costs as shown.
                    for m in &out.messages {
                        prop_assert_eq!(m.tokens, m.cost(cfg.tokenizer),
                            "a {:?} message claims other tokens than it costs", m.projection);
                    }
                    let counted: i64 = out.messages.iter().map(|m| m.tokens).sum();
                    prop_assert_eq!(counted, out.state.last_view.message_tokens);
                    let openai = render_openai(&out.messages);
                    prop_assert!(validate_openai(&openai).is_ok(), "{:?}", validate_openai(&openai));
                    let anthropic = render_anthropic(&out.messages);
                    prop_assert!(validate_anthropic(&anthropic).is_ok(), "{:?}", validate_anthropic(&anthropic));
                    let responses = render_responses(&out.messages);
                    prop_assert!(validate_responses(&responses).is_ok(), "{:?}", validate_responses(&responses));
                    if mode == Mode::DryRun {
                        continue;
                    }
                    // Between compactions that act on old items, the view only grows at its end.
                    if let Some(before) = previous.take() {
                        let newest = before.iter().filter_map(|m| m.seq).max().unwrap_or(0);
                        // A summary cut shorter or the memory dropped (the emergency's last
                        // resorts) is an old item changed, as much as a fold.
                        let untouched = r.summarized_seqs.is_empty() && r.evicted_seqs.is_empty()
                            && r.offloaded.iter().all(|o| o.seq > newest)
                            && out.state.summary_cap == state.summary_cap
                            && out.state.memory == state.memory;
                        if untouched && mode == Mode::Auto && overflow == 0 && condensation.is_none() {
                            // Reasoning is sent with the current turn only, as providers take it.
                            let key = |m: &ViewMessage<'_>| (m.seq, m.role, m.content.to_string(), m.projection, m.tool_calls.to_vec());
                            let now: Vec<_> = out.messages.iter().take(before.len()).map(key).collect();
                            let then: Vec<_> = before.iter().map(key).collect();
                            prop_assert!(now == then, "the view changed before its end ({:?})", r.tier);
                        }
                    }
                    if mode == Mode::Auto && overflow == 0 && condensation.is_none() {
                        previous = Some(out.messages.clone());
                    }
                    membership.extend(r.offloaded.iter().map(|o| o.seq));
                    membership.extend(&r.summarized_seqs);
                    membership.extend(&r.evicted_seqs);
                    let shown: HashSet<i64> = out.messages.iter()
                        .filter(|m| m.projection == Projection::Full)
                        .filter_map(|m| m.seq)
                        .collect();
                    for e in &log.events {
                        prop_assert!(shown.contains(&e.seq) || membership.contains(&e.seq),
                            "seq {} is neither shown in full nor in any record", e.seq);
                    }
                    // User content never leaves without a reference: every user message and
                    // note is in the view (in full or reduced, with its reference), or the
                    // summary names it by reference, unless an emergency had to cut the
                    // summary itself.
                    if out.state.summary_cap.is_none() {
                        let in_view: HashSet<i64> = out.messages.iter().filter_map(|m| m.seq).collect();
                        let text: Vec<&str> = out.messages.iter().map(|m| m.content.as_ref()).collect();
                        let text = text.join("\n");
                        for e in &log.events {
                            let user = e.body.role() == Some(Role::User) || matches!(e.body, EventBody::Note(_));
                            prop_assert!(!user || in_view.contains(&e.seq) || names(&text, e.seq),
                                "seq {} left the view with no reference ({:?}):\n{}", e.seq, r.tier, text);
                        }
                    }
                    // No exploration leaves before an action that depends on it.
                    prop_assert!(explorations_follow_their_actions(&log, &out.state, r.id, cfg.error_lines()),
                        "an exploration was archived before an action depending on it");
                    for (known, value) in known_anchors.iter_mut().zip(anchor_values(&out.state.summary.anchors)) {
                        prop_assert!(!(*known && is_unknown(value)), "an anchor regressed to N/A");
                        *known |= !is_unknown(value);
                    }
                    // A retry with no new events changes nothing.
                    let retry = run_with(&cfg, &out.state, &log, tools, Mode::Auto, 0, &|r| summarise(summariser, r)).unwrap();
                    prop_assert!(!retry.changed, "a retry acted: {:?}", retry.record.tier);
                    prop_assert_eq!(&retry.messages, &out.messages);
                    state = out.state;
                }
            }
        }
    }
}

/// Whether a result costs no more in full than archived: archiving it would save nothing.
fn not_worth_archiving(event: &crate::domain::event::Event, errors: usize) -> bool {
    let chars = super::view::content_chars(event);
    let archived = super::view::archived_message(event, chars, errors);
    archived.cost(crate::tokens::Tokenizer::Chars4) >= event.tokens
}

/// Whether every exploration compaction `id` archived (an item of it) has every action
/// depending on it archived too (its results reduced, folded, or not worth archiving). An
/// action that starts after its exploration was archived cannot be waited for.
fn explorations_follow_their_actions(
    log: &Log,
    state: &CompactionState,
    id: uuid::Uuid,
    errors: usize,
) -> bool {
    let episodes = Episodes::from_events(&log.events);
    let inside = |e: &crate::domain::episodes::Episode| -> Vec<&crate::domain::event::Event> {
        let end = e.end_seq.unwrap_or(i64::MAX);
        log.events
            .iter()
            .filter(|x| x.seq > e.start_seq && x.seq < end)
            .collect()
    };
    episodes
        .list()
        .iter()
        .filter(|e| e.kind == EpisodeKind::Exploration)
        .all(|exploration| {
            let archived = inside(exploration).into_iter().any(|x| {
                state
                    .reduced
                    .get(&x.seq)
                    .is_some_and(|r| r.reason == Reason::EpisodeArchived && r.compaction_id == id)
            });
            !archived
                || episodes
                    .list()
                    .iter()
                    .filter(|a| a.dependencies.contains(&exploration.name))
                    .all(|action| {
                        inside(action)
                            .into_iter()
                            .filter(|x| x.body.tool_call_id().is_some())
                            .all(|x| {
                                x.seq <= state.checkpoint_seq
                                    || state.reduced.contains_key(&x.seq)
                                    || not_worth_archiving(x, errors)
                            })
                    })
        })
}

/// What only agents' ordinary traffic makes: short messages and tool results of any size.
fn ordinary_step() -> impl Strategy<Value = Step> {
    prop_oneof![
        2 => (1usize..400).prop_map(Step::User),
        2 => (1usize..400).prop_map(Step::Assistant),
        5 => prop_oneof![1 => Just(0usize), 5 => 1usize..40_000].prop_map(Step::Exchange),
        1 => (1usize..20_000, 1usize..20_000).prop_map(|(a, b)| Step::Parallel(a, b)),
        3 => Just(Step::Compact(Mode::Auto)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(48), ..ProptestConfig::default() })]

    /// Large tool results alone never need emergency truncation: capping, offloading, masking
    /// and folding always bring such a session within its window.
    #[test]
    fn tool_output_alone_never_forces_an_emergency(
        window in prop_oneof![Just(8_000u32), Just(16_000u32), Just(30_000u32)],
        min_tail in 1u32..8,
        summariser in prop_oneof![Just(Summariser::Deterministic), Just(Summariser::Verbose)],
        steps in proptest::collection::vec(ordinary_step(), 1..80),
    ) {
        let mut cfg = config(window);
        cfg.min_tail_messages = min_tail;
        let mut log = Log::default();
        log.system("You are a careful agent.");
        let mut state = CompactionState::default();
        let mut calls = 0;
        for (i, step) in steps.iter().enumerate() {
            if append(&mut log, step, i, &mut calls) {
                continue;
            }
            // Only compactions are left: the ordinary steps append.
            let out = run_with(&cfg, &state, &log, 0, Mode::Auto, 0, &|r| summarise(summariser, r)).unwrap();
            let r = &out.record;
            prop_assert!(r.tokens_after <= i64::from(window));
            prop_assert!(r.tier != Tier::Emergency && r.evicted_seqs.is_empty(),
                "emergency truncation at step {i}: evicted {:?}", r.evicted_seqs);
            state = out.state;
        }
    }
}
