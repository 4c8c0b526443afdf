//! The edges of a compaction: emergency, a result too large for the window, forced compactions,
//! overflow retries, tools that leave no room, and calls still waiting for their results.

use super::*;

/// A pasted file larger than the window is shown as its head and tail with its reference, as
/// large as the room allows: nothing else need be truncated for it.
#[tokio::test]
async fn a_request_too_large_for_the_window_is_shown_as_head_and_tail() {
    let config = config(4_000);
    let mut log = Log::default();
    log.system("sys");
    let paste: String = (0..3_400).map(|i| format!("pasted line {i}\n")).collect();
    log.user(&paste);
    log.exchange("small", 100);
    let out = run(&config, &CompactionState::default(), &log, 0, Mode::Auto, 0)
        .await
        .unwrap();
    assert_ne!(out.record.tier, Tier::Emergency);
    assert!(out.record.tokens_after <= 4_000);
    assert!(out.record.offloaded.iter().any(|o| o.seq == 2));
    let shown = out.messages.iter().find(|m| m.seq == Some(2)).unwrap();
    assert!(shown.content.starts_with("pasted line 0\n"));
    assert!(shown.content.trim_end().ends_with("pasted line 3399"));
    assert!(shown.content.contains("observation://2?offset="));
    // More than a preview (about 80 lines): the tail's cap.
    let lines = shown.content.matches("pasted line").count();
    assert!(lines > 100, "{lines}");
    // The exchange after it stays whole.
    assert_eq!(out.messages.last().unwrap().projection, Projection::Full);
}

/// A pinned paste is never cut by the gentle steps: emergency truncation keeps its preview.
#[tokio::test]
async fn emergency_keeps_a_preview_of_a_message_too_large_for_the_window() {
    let config = config(4_000);
    let mut log = Log::default();
    log.system("sys");
    // A pasted file of ~10,000 tokens: more than the window, and no tool result to cap.
    log.push(json!({"type": "message", "role": "user", "pinned": true,
        "content": "pasted line\n".repeat(3_400)}));
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
    let (repaired, repairs) = crate::engine::repair(messages, Tokenizer::Chars4);
    assert_eq!(repairs.placeholder_results_inserted, 1);
    assert_eq!(repaired.len(), 3);
    assert_eq!(repaired[2].tool_call_id.as_deref(), Some("pending"));
    assert!(repaired[2].content.starts_with("[tool result unavailable"));
    // The placeholder costs what it claims, and the repaired view is a valid request.
    assert_eq!(repaired[2].tokens, repaired[2].cost(Tokenizer::Chars4));
    let openai = crate::engine::render::render_openai(&repaired);
    assert_eq!(crate::engine::validate::validate_openai(&openai), Ok(()));
    let anthropic = crate::engine::render::render_anthropic(&repaired);
    assert_eq!(
        crate::engine::validate::validate_anthropic(&anthropic),
        Ok(())
    );
}

/// Twelve reads of 2,000 characters in a 4K window: a summary, and items shown reduced.
async fn twelve_reads(config: &SessionConfig) -> (Log, CompactionState) {
    let mut log = Log::default();
    log.system("sys");
    log.user("Read every module.");
    let mut state = CompactionState::default();
    for i in 0..12 {
        log.exchange(&format!("c{i}"), 2_000);
        state = run(config, &state, &log, 0, Mode::Auto, 0)
            .await
            .unwrap()
            .state;
    }
    (log, state)
}

/// A state whose summary was counted as another version of ctxd showed it (or written before
/// the length it counted was kept) is counted again: the view costs what it shows, and the
/// budget holds after an upgrade. A count of the message as shown is used as it is.
#[tokio::test]
async fn a_summary_counted_by_another_version_is_counted_again() {
    let config = config(4_000);
    let (log, state) = twelve_reads(&config).await;
    assert!(state.summary_bytes > 0, "a summary was made");
    let summary_of = |out: &EngineOutput<'static>| {
        let header = crate::engine::view::SUMMARY_HEADER;
        let m = out.messages.iter().find(|m| m.content.starts_with(header));
        let m = m.expect("the summary is shown");
        (m.tokens, m.cost(config.tokenizer))
    };
    let older = CompactionState {
        summary_tokens: 1,
        summary_bytes: 0,
        ..state.clone()
    };
    let out = run(&config, &older, &log, 0, Mode::Auto, 0).await.unwrap();
    let (tokens, cost) = summary_of(&out);
    assert_eq!(tokens, cost);
    let counted: i64 = out.messages.iter().map(|m| m.tokens).sum();
    assert_eq!(counted, out.state.last_view.message_tokens);
    let same = run(&config, &state, &log, 0, Mode::Auto, 0).await.unwrap();
    assert_eq!(summary_of(&same).0, state.summary_tokens);
    assert_eq!(same.messages, out.messages);
}

/// The same for the items shown reduced: a state whose previews and references were counted
/// as another version showed them (or written before the length counted was kept) has them
/// counted again, so the view costs what it shows; a count of the message as shown stands.
#[tokio::test]
async fn reduced_items_counted_by_another_version_are_counted_again() {
    let config = config(4_000);
    let (log, state) = twelve_reads(&config).await;
    let shown: Vec<i64> = state
        .reduced
        .iter()
        .filter(|(_, r)| r.projection != Projection::Summary)
        .map(|(&seq, _)| seq)
        .collect();
    assert!(shown.len() > 2, "items are shown reduced: {shown:?}");
    assert!(state
        .reduced
        .values()
        .all(|r| r.projection == Projection::Summary || r.bytes_in_view > 0));
    let mut older = state.clone();
    for r in older.reduced.values_mut() {
        r.tokens_in_view = 1;
        r.bytes_in_view = 0;
    }
    let out = run(&config, &older, &log, 0, Mode::Auto, 0).await.unwrap();
    for m in out
        .messages
        .iter()
        .filter(|m| m.seq.is_some_and(|s| shown.contains(&s)))
    {
        assert_eq!(m.tokens, m.cost(config.tokenizer), "{:?}", m.seq);
    }
    let counted: i64 = out.messages.iter().map(|m| m.tokens).sum();
    assert_eq!(counted, out.state.last_view.message_tokens);
    let same = run(&config, &state, &log, 0, Mode::Auto, 0).await.unwrap();
    for m in same
        .messages
        .iter()
        .filter(|m| m.seq.is_some_and(|s| shown.contains(&s)))
    {
        let seq = m.seq.unwrap();
        assert_eq!(m.tokens, state.reduced[&seq].tokens_in_view, "{seq}");
    }
    assert_eq!(same.messages, out.messages);
}
