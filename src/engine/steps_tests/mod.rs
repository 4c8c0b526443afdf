//! The gentle steps before emergency truncation: per-item and tail caps, masking, hysteresis;
//! the error lines a reduced result names (`error_lines`), and recalled slices kept while
//! recent (`recall`).

mod error_lines;
mod recall;

use serde_json::json;

use super::tests::{config, projection_of, run, run_with, Log};
use super::view;
use crate::domain::compaction::FallbackReason;
use crate::domain::compaction::{Mode, Projection, Reason, Tier};
use crate::domain::event::Role;
use crate::domain::session::{Policy, SessionConfig};
use crate::domain::state::CompactionState;
use crate::summarize::SummaryOutcome;

/// A 4K window with twelve 2 KB results fits by offloading and masking: no emergency.
#[tokio::test]
async fn many_mid_sized_results_never_need_an_emergency() {
    let config = config(4_000);
    let mut log = Log::default();
    log.system("sys");
    log.user("Read every module.");
    let mut state = CompactionState::default();
    let mut tiers = Vec::new();
    for i in 0..12 {
        log.exchange(&format!("c{i}"), 2_000);
        let out = run(&config, &state, &log, 0, Mode::Auto, 0).await.unwrap();
        assert!(out.record.tokens_after <= 4_000);
        assert!(
            out.record.evicted_seqs.is_empty(),
            "turn {i}: evicted {:?}",
            out.record.evicted_seqs
        );
        tiers.push(out.record.tier);
        state = out.state;
    }
    assert!(!tiers.contains(&Tier::Emergency), "{tiers:?}");
}

/// A system prompt that takes most of the room leaves each turn's results a share of what is
/// left, not of the whole room: a turn of parallel reads (as a coding agent makes them) is
/// capped to fit beside it, where caps sized to the whole room left only emergencies.
#[tokio::test]
async fn a_long_system_prompt_leaves_the_results_caps_that_fit_beside_it() {
    let config = config(16_000);
    let mut log = Log::default();
    log.system(&"Follow the repository's rules. ".repeat(1_300));
    log.user("Rework the employer pages.");
    let mut state = CompactionState::default();
    let mut tiers = Vec::new();
    for turn in 0..20 {
        let ids: Vec<String> = (0..5).map(|k| format!("t{turn}r{k}")).collect();
        let calls: Vec<_> = ids
            .iter()
            .map(|id| json!({"id": id, "name": "read", "arguments": {"path": format!("src/{id}.ts")}}))
            .collect();
        log.push(json!({"type": "message", "role": "assistant", "tool_calls": calls}));
        for id in &ids {
            log.result(id, 6_000);
        }
        let out = run(&config, &state, &log, 0, Mode::Auto, 0).await.unwrap();
        assert!(out.record.tokens_after <= out.record.budget, "turn {turn}");
        tiers.push(out.record.tier);
        state = out.state;
    }
    assert!(!tiers.contains(&Tier::Emergency), "{tiers:?}");
}

/// A harness's instructions in a small window: system prompts of 0.9 of the room for messages
/// (rules, then a long catalogue of skills, then closing rules) and turns of reads.
async fn turns_beside_a_system_prompt_of_most_of_the_room(
    config: &SessionConfig,
) -> (i64, Vec<crate::engine::EngineOutput<'static>>) {
    let mut log = Log::default();
    let mut prompt: String = (0..100)
        .map(|i| format!("Rule {i}: never write outside the workspace of module {i}.\n"))
        .collect();
    prompt.extend((0..680).map(|i| {
        format!("- skill-{i}: drafts release notes from commits (file: skills/{i}/SKILL.md)\n")
    }));
    prompt.push_str("Closing rule: answer in English.");
    let system = log.system(&prompt);
    log.user("Rework the employer pages.");
    let mut state = CompactionState::default();
    let mut outs = Vec::new();
    for turn in 0..20 {
        log.exchange(&format!("t{turn}"), 2_400);
        let out = run(config, &state, &log, 0, Mode::Auto, 0).await.unwrap();
        assert!(out.record.tokens_after <= out.record.budget, "turn {turn}");
        state = out.state.clone();
        outs.push(out);
    }
    (system, outs)
}

/// System prompts over `system_max_share` of the room leave the conversation room: the first
/// compaction shows the longest as its head and tail with its reference, once (every later view
/// opens with the same message), and the turns that follow need no emergency. With the share
/// at 1 the same session lives in emergency truncation.
#[tokio::test]
async fn system_prompts_over_their_share_are_shown_as_head_and_tail_once() {
    let config = config(16_000);
    let (system, outs) = turns_beside_a_system_prompt_of_most_of_the_room(&config).await;
    let tiers: Vec<Tier> = outs.iter().map(|o| o.record.tier).collect();
    assert!(!tiers.contains(&Tier::Emergency), "{tiers:?}");
    let first = outs
        .iter()
        .position(|o| o.record.acted)
        .expect("a compaction acts");
    let offloaded = &outs[first].record.offloaded;
    assert!(offloaded.iter().any(|o| o.seq == system), "{offloaded:?}");
    let shown = &outs[first].messages[0];
    assert_eq!(
        (shown.seq, shown.projection),
        (Some(system), Projection::Preview)
    );
    assert!(
        shown.content.starts_with("Rule 0: never write"),
        "{}",
        shown.content
    );
    assert!(shown.content.ends_with("Closing rule: answer in English."));
    assert!(
        shown
            .content
            .contains(&format!("observation://{system}?offset=")),
        "the middle's reference: {}",
        shown.content
    );
    let room = i64::from(config.context_window - config.max_output_tokens);
    assert!(shown.tokens <= room / 4, "{} of {room}", shown.tokens);
    for out in &outs[first..] {
        assert_eq!(
            out.messages[0].content, shown.content,
            "cut once, shown the same after"
        );
    }
    let whole = SessionConfig {
        system_max_share: 1.0,
        ..config
    };
    let (_, outs) = turns_beside_a_system_prompt_of_most_of_the_room(&whole).await;
    let emergencies = outs.iter().filter(|o| o.record.tier == Tier::Emergency);
    assert!(
        emergencies.count() > 0,
        "the share at 1 keeps it whole, and no room"
    );
}

/// A user who pastes a document of most of the room as the request: under either policy the
/// request is shown as its head and tail with its reference (the rest of the view as the
/// steps left it), not truncated with everything before it, and later turns keep it so.
#[tokio::test]
async fn a_request_of_most_of_the_room_is_shown_as_head_and_tail_not_truncated() {
    for policy in [Policy::Progressive, Policy::Episodic] {
        let config = SessionConfig {
            policy,
            ..config(16_000)
        };
        let mut log = Log::default();
        log.system("sys");
        log.user("Set up the project.");
        let mut state = CompactionState::default();
        for turn in 0..6 {
            log.exchange(&format!("a{turn}"), 1_500);
            let out = run(&config, &state, &log, 0, Mode::Auto, 0).await.unwrap();
            state = out.state;
        }
        log.assistant("Done: the project is set up.");
        let mut text = String::from("Review this specification:\n");
        text.extend(
            (0..1_260).map(|i| format!("Clause {i}: the service answers within budget.\n")),
        );
        text.push_str("Then tell me which clauses we break.");
        let request = log.user(&text);
        let mut outs = Vec::new();
        for turn in 0..8 {
            log.exchange(&format!("b{turn}"), 2_000);
            let out = run(&config, &state, &log, 0, Mode::Auto, 0).await.unwrap();
            assert!(
                out.record.tokens_after <= out.record.budget,
                "{policy:?} turn {turn}"
            );
            state = out.state.clone();
            outs.push(out);
        }
        let tiers: Vec<Tier> = outs.iter().map(|o| o.record.tier).collect();
        assert!(!tiers.contains(&Tier::Emergency), "{policy:?}: {tiers:?}");
        // Cut at the turn it no longer fits, while it is the current request.
        let cut = &outs[0];
        assert!(
            cut.record.offloaded.iter().any(|o| o.seq == request),
            "{policy:?}: {:?}",
            cut.record.offloaded
        );
        let reduced = cut.state.reduced.get(&request).map(|r| r.reason);
        assert_eq!(reduced, Some(Reason::OffloadedLargeRequest), "{policy:?}");
        let shown = cut.messages.iter().find(|m| m.seq == Some(request));
        let shown = shown.expect("the request stays in the view");
        assert_eq!(shown.projection, Projection::Preview, "{policy:?}");
        assert!(shown
            .content
            .starts_with("Review this specification:\nClause 0:"));
        assert!(
            shown.content.ends_with("which clauses we break."),
            "{policy:?}"
        );
        assert!(
            shown
                .content
                .contains(&format!("observation://{request}?offset=")),
            "{policy:?}: {}",
            shown.content
        );
        // Far more than a preview (about 25 clauses): the tail's cap.
        let clauses = shown.content.matches("Clause").count();
        assert!(clauses > 60, "{policy:?}: {clauses}");
        // Cut once: shown the same while it is in the view.
        for out in &outs[1..] {
            if let Some(later) = out.messages.iter().find(|m| m.seq == Some(request)) {
                assert_eq!(later.content, shown.content, "{policy:?}");
            }
        }
    }
}

/// One result larger than the per-item cap is shown as head and tail even while it is the
/// newest item, and the record lists it as offloaded with how much it shows.
#[tokio::test]
async fn a_result_over_the_item_cap_is_an_excerpt_even_while_recent() {
    let config = config(20_000);
    let mut log = Log::default();
    log.system("sys");
    log.user("Read the log.");
    let mut text: String = (0..400).map(|i| format!("line {i} ok\n")).collect();
    text.push_str("error[E0308]: mismatched types in src/parser.rs\n");
    text.extend((400..800).map(|i| format!("line {i} ok\n")));
    log.push(json!({"type": "message", "role": "assistant",
        "tool_calls": [{"id": "big", "name": "shell", "arguments": {"command": "cargo build"}}]}));
    let seq = log.push(
        json!({"type": "message", "role": "tool", "tool_call_id": "big",
        "name": "shell", "content": text}),
    );
    let out = run(&config, &CompactionState::default(), &log, 0, Mode::Auto, 0)
        .await
        .unwrap();
    assert_eq!(
        out.record.tier,
        Tier::None,
        "the excerpt keeps the view small"
    );
    let shown = out.messages.iter().find(|m| m.seq == Some(seq)).unwrap();
    assert_eq!(shown.projection, Projection::Preview);
    assert!(shown.content.starts_with("line 0 ok"), "{}", shown.content);
    assert!(shown.content.trim_end().ends_with("line 799 ok"));
    assert!(
        shown
            .content
            .contains(&format!("observation://{seq}?offset=")),
        "the reference to the middle: {}",
        shown.content
    );
    assert!(
        shown.content.contains("error[E0308]"),
        "the middle's error line is kept"
    );
    let item = out.record.offloaded.iter().find(|o| o.seq == seq).unwrap();
    assert!(
        shown.tokens < item.tokens,
        "{} of {}",
        shown.tokens,
        item.tokens
    );
    // The next call shows it the same way: the view only grows at its end.
    log.user("Thanks.");
    let next = run(&config, &out.state, &log, 0, Mode::Auto, 0)
        .await
        .unwrap();
    assert_eq!(next.messages[..out.messages.len()], out.messages[..]);
}

/// A compaction that acts frees down to the low-water mark, so the next one is many turns
/// away; in between the view only grows at its end.
#[tokio::test]
async fn a_compaction_frees_down_to_low_water_and_the_next_turns_only_append() {
    let config = config(20_000);
    let room = 20_000 - 1_000;
    let mut log = Log::default();
    log.system("sys");
    let mut state = CompactionState::default();
    let mut acted_at = Vec::new();
    let mut previous: Option<Vec<crate::domain::compaction::ViewMessage<'static>>> = None;
    for turn in 0..80 {
        log.user(&format!("step {turn}: {}", "u".repeat(200)));
        log.exchange(&format!("c{turn}"), 900);
        log.assistant(&format!("done {turn}"));
        let out = run(&config, &state, &log, 0, Mode::Auto, 0).await.unwrap();
        assert!(out.record.tier != Tier::Emergency, "turn {turn}");
        if out.changed && out.record.acted {
            acted_at.push(turn);
            assert!(
                out.record.tokens_after <= room * 45 / 100,
                "turn {turn}: down to {} of {room}",
                out.record.tokens_after
            );
        } else if let Some(previous) = &previous {
            assert_eq!(
                out.messages[..previous.len()],
                previous[..],
                "turn {turn}: the view changed before its end"
            );
        }
        previous = Some(out.messages);
        state = out.state;
    }
    assert!(acted_at.len() >= 2, "{acted_at:?}");
    let gaps: Vec<usize> = acted_at.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(
        gaps.iter().all(|g| *g >= 5),
        "compactions too close: {acted_at:?}"
    );
}

/// Before folding anything, older tool results are masked to one line while every assistant
/// message and tool call stays verbatim.
#[tokio::test]
async fn masking_comes_before_summarising() {
    let mut config = config(10_000);
    // Results under the offload threshold: masked rather than previewed.
    config.offload_threshold_chars = 4_000;
    let mut log = Log::default();
    log.system("sys");
    log.user("Find the bug.");
    let mut results = Vec::new();
    let mut calls = Vec::new();
    // ~400 tokens each: under the per-item cap.
    for i in 0..20 {
        calls.push(log.call(&format!("c{i}")));
        results.push(log.result(&format!("c{i}"), 1_600));
    }
    log.user("What did you find?");
    let out = run(&config, &CompactionState::default(), &log, 0, Mode::Auto, 0)
        .await
        .unwrap();
    assert!(matches!(out.record.tier, Tier::Soft | Tier::Full));
    assert!(out.record.acted);
    assert!(
        out.record.summarized_seqs.is_empty(),
        "masking alone reaches the mark: {:?}",
        out.record.summarized_seqs
    );
    for seq in &calls {
        assert_eq!(projection_of(&out, *seq), Some(Projection::Full));
    }
    let masked: Vec<i64> = results
        .iter()
        .copied()
        .filter(|s| projection_of(&out, *s) == Some(Projection::Reference))
        .collect();
    assert!(!masked.is_empty());
    // Oldest first.
    assert_eq!(masked[..], results[..masked.len()]);
    for seq in masked {
        let m = out.messages.iter().find(|m| m.seq == Some(seq)).unwrap();
        assert!(m.content.contains(&format!("observation://{seq}")));
        assert!(out.record.offloaded.iter().any(|o| o.seq == seq));
    }
}

/// The provider refused a view whose last user turn starts it: retry 2 has nothing to fold,
/// so it shows the answered results by reference as retry 1 would, instead of sending the same
/// view again.
#[tokio::test]
async fn a_second_overflow_retry_with_nothing_to_fold_still_shrinks_the_view() {
    let config = config(8_000);
    let mut log = Log::default();
    log.system("sys");
    log.user("Read it.");
    log.exchange("a", 1_000);
    log.exchange("b", 1_000);
    let result = log.head();
    let state = CompactionState::default();
    let ordinary = run(&config, &state, &log, 0, Mode::Auto, 0).await.unwrap();
    let retry = run(&config, &state, &log, 0, Mode::Auto, 2).await.unwrap();
    assert!(
        retry.record.evicted_seqs.is_empty(),
        "nothing before the turn"
    );
    assert!(
        retry.record.tokens_after < ordinary.record.tokens_after,
        "retry {} vs ordinary {}",
        retry.record.tokens_after,
        ordinary.record.tokens_after
    );
    assert_eq!(
        projection_of(&retry, result - 2),
        Some(Projection::Reference)
    );
    assert!(retry.record.offloaded.iter().any(|o| o.seq == result - 2));
}

/// A compaction whose fold would pass over pinned items only writes no summary: the
/// summariser is not asked to summarise nothing.
#[tokio::test]
async fn a_fold_over_pinned_items_only_writes_no_summary() {
    let mut config = config(3_000);
    config.min_tail_messages = 1;
    let mut log = Log::default();
    log.system("sys");
    for i in 0..3 {
        log.push(
            json!({"type": "note", "content": format!("note {i}: {}", "keep ".repeat(300)),
            "pinned": true}),
        );
    }
    log.user("Go on.");
    let state = CompactionState::default();
    let out = run_with(&config, &state, &log, 0, Mode::Force, 0, &|request| {
        assert!(!request.events.is_empty(), "asked to summarise nothing");
        SummaryOutcome::deterministic(request, FallbackReason::NoneConfigured, None)
    })
    .unwrap();
    assert!(
        out.record.summarized_seqs.is_empty(),
        "{:?}",
        out.record.summarized_seqs
    );
    assert_eq!(out.state.summary, state.summary);
    assert!(
        out.messages
            .iter()
            .all(|m| m.projection != Projection::Summary),
        "no summary message"
    );
}

/// One large result arriving in a view under the thresholds is capped where it stands, and
/// the tier is taken from the view after the cap: nothing before it is rewritten, so the
/// provider's cache of the earlier view still holds.
#[tokio::test]
async fn a_capped_result_under_the_thresholds_only_appends() {
    let config = config(20_000);
    let mut log = Log::default();
    log.system("sys");
    log.user("Read the modules, then the build log.");
    for i in 0..8 {
        log.exchange(&format!("c{i}"), 2_000);
    }
    let first = run(&config, &CompactionState::default(), &log, 0, Mode::Auto, 0)
        .await
        .unwrap();
    assert!(first.record.tier < Tier::Warn, "{:?}", first.record.tier);
    // About 16,000 tokens: alone past the emergency tier before its cap.
    log.exchange("log", 64_000);
    let out = run(&config, &first.state, &log, 0, Mode::Auto, 0)
        .await
        .unwrap();
    assert!(
        out.record.tier < Tier::Soft,
        "the cap brings the view under the soft tier: {:?}",
        out.record.tier
    );
    assert_eq!(
        out.messages[..first.messages.len()],
        first.messages[..],
        "the view changed before its end"
    );
    assert_eq!(projection_of(&out, log.head()), Some(Projection::Preview));
    assert!(out.record.evicted_seqs.is_empty() && out.record.summarized_seqs.is_empty());
}

/// Files the agent wrote make the tail long through their calls' arguments: once answered,
/// the older ones are shown by reference (the turn's text kept), the newest turn whole, and
/// the reference recalls the arguments.
#[tokio::test]
async fn long_arguments_of_answered_turns_leave_a_tail_over_its_cap() {
    // A tail cap (750 tokens) that holds the newest write's arguments but not two.
    let config = SessionConfig {
        tail_max_share: 0.15,
        ..config(6_000)
    };
    let mut log = Log::default();
    log.system("sys");
    log.user("Write the modules.");
    let mut state = CompactionState::default();
    let mut by_reference = Vec::new();
    for i in 0..12 {
        let body: String = (0..120).map(|l| format!("fn f{i}_{l}() {{}}\n")).collect();
        let seq = log.push(json!({"type": "message", "role": "assistant",
            "content": format!("Writing module {i}."),
            "tool_calls": [{"id": format!("w{i}"), "name": "write",
                "arguments": {"path": format!("src/m{i}.rs"), "content": body}}]}));
        log.push(
            json!({"type": "message", "role": "tool", "tool_call_id": format!("w{i}"),
            "name": "write", "content": "ok"}),
        );
        let out = run(&config, &state, &log, 0, Mode::Auto, 0).await.unwrap();
        assert_eq!(projection_of(&out, seq), Some(Projection::Full), "turn {i}");
        let offloaded: Vec<i64> = out.record.offloaded.iter().map(|o| o.seq).collect();
        for m in &out.messages {
            if m.role == Role::Assistant && m.projection == Projection::Reference {
                let seq = m.seq.unwrap();
                if offloaded.contains(&seq) {
                    let arguments = &m.tool_calls[0].arguments;
                    // The file written stays named beside the reference.
                    assert_eq!(arguments["path"], format!("src/m{}.rs", seq / 2 - 1));
                    by_reference.push((
                        seq,
                        m.content.to_string(),
                        arguments["archived_arguments"]
                            .as_str()
                            .unwrap_or("")
                            .to_owned(),
                    ));
                }
            }
        }
        state = out.state;
    }
    assert!(!by_reference.is_empty(), "no argument was offloaded");
    for (seq, content, arguments) in &by_reference {
        assert!(content.starts_with("Writing module"), "{content}");
        assert!(arguments.contains("observation://"), "{arguments}");
        // The reference's offset is where the recall of the turn shows the arguments.
        let offset: usize = arguments
            .split("offset=")
            .nth(1)
            .unwrap()
            .trim_end_matches(|c: char| !c.is_ascii_digit())
            .parse()
            .unwrap();
        let event = &log.events[(*seq - 1) as usize];
        let recalled: String = view::recall_text(event).chars().skip(offset).collect();
        let call = &event.body.tool_calls()[0];
        assert!(
            recalled.starts_with(call.arguments_text().as_ref()),
            "{recalled}"
        );
    }
}

/// A call whose arguments alone are about the room (a large file written) still fits: an
/// emergency shows its arguments by reference, whatever the policy.
#[tokio::test]
async fn a_call_with_arguments_over_the_room_still_fits() {
    for policy in [Policy::Progressive, Policy::Episodic] {
        let mut config = config(3_000);
        config.policy = policy;
        config.min_tail_messages = 1;
        config.offload_threshold_chars = 100;
        let mut log = Log::default();
        log.system("s");
        let first = run(&config, &CompactionState::default(), &log, 0, Mode::Auto, 0)
            .await
            .unwrap();
        let mut state = first.state;
        // The provider counts 1.3 times ctxd's tokens.
        let ours = state.last_view.message_tokens;
        state.calibrate((ours as f64 * 1.3).ceil() as i64, ours);
        let body = "fn main() {}\n".repeat(600);
        let seq = log.push(json!({"type": "message", "role": "assistant",
            "tool_calls": [{"id": "w", "name": "write",
                "arguments": {"path": "src/main.rs", "content": body}}]}));
        log.push(
            json!({"type": "message", "role": "tool", "tool_call_id": "w",
            "name": "write", "content": "ok"}),
        );
        let out = run(&config, &state, &log, 0, Mode::Auto, 0).await.unwrap();
        assert!(
            out.record.tokens_after <= 3_000,
            "{policy:?}: {} over the window",
            out.record.tokens_after
        );
        let call = out.messages.iter().find(|m| m.seq == Some(seq)).unwrap();
        assert!(
            call.tool_calls[0]
                .arguments
                .to_string()
                .contains("archived_arguments"),
            "{policy:?}: {:?}",
            call.tool_calls[0].arguments
        );
    }
}
