//! When an eviction acts, and what it does when the view does not fit: overflow retries, a
//! long tool loop, a current turn over the room, an eviction short of the target.

use super::*;

/// Overflow retries reduce the current user turn: a bounded preview with its reference, then
/// the reference alone.
#[tokio::test]
async fn overflow_retries_reduce_the_current_user_turn() {
    let cfg = config(20_000);
    let mut log = Log::default();
    log.system("sys");
    log.user("Earlier.");
    exchange(&mut log, "a", "read", 3_000);
    let turn = log.user(&"A very long request with pasted logs. ".repeat(300));
    let state = CompactionState::default();
    let first = run(&cfg, &state, &log, 0, Mode::Auto, 1).await.unwrap();
    let (p, content) = shown(&first, turn).unwrap();
    assert_eq!(p, Projection::Preview);
    assert!(
        content.contains(&format!("observation://{turn}?offset=")),
        "{content}"
    );
    let second = run(&cfg, &state, &log, 0, Mode::Auto, 2).await.unwrap();
    let (p, content) = shown(&second, turn).unwrap();
    assert_eq!(p, Projection::Reference);
    assert!(
        content.contains(&format!("observation://{turn}")),
        "{content}"
    );
    assert!(second.record.tokens_after < first.record.tokens_after);
    assert_eq!(
        second.state.reduced.get(&turn).unwrap().reason,
        Reason::OverflowRetry
    );
}

/// A long autonomous loop after one user message: only its newest exchanges (at most four,
/// within the tail's token cap) are the current turn, so the older ones are archived and folded
/// as the view grows, and no compaction is an emergency.
#[tokio::test]
async fn a_long_tool_loop_is_not_all_current() {
    let cfg = config(8_000);
    let mut log = Log::default();
    log.system("sys");
    let request = log.user("Fix every failing test.");
    let mut state = CompactionState::default();
    let mut results = Vec::new();
    for i in 0..160 {
        results.push(exchange(&mut log, &format!("c{i}"), "read", 1_200));
        let out = run(&cfg, &state, &log, 0, Mode::Auto, 0).await.unwrap();
        assert_ne!(out.record.tier, Tier::Emergency, "turn {i}");
        assert!(out.record.tokens_after <= 8_000);
        assert_eq!(
            projection(&out, request),
            Some(Projection::Full),
            "turn {i}"
        );
        // The newest results stay, as many as the tail's cap holds (two of these here).
        for &seq in results.iter().rev().take(2) {
            assert_eq!(
                projection(&out, seq),
                Some(Projection::Full),
                "turn {i}: {seq}"
            );
        }
        state = out.state;
    }
    assert!(
        state.checkpoint_seq > 0,
        "the oldest exchanges were archived, then folded"
    );
}

/// A current turn whose results alone overflow the room: its answered results but the newest
/// are archived, oldest first, instead of truncating anything.
#[tokio::test]
async fn a_current_turn_too_large_for_the_room_archives_its_older_results() {
    let cfg = config(8_000);
    let mut log = Log::default();
    log.system("sys");
    log.user("Read the four logs.");
    let results: Vec<i64> = (0..4)
        .map(|i| exchange(&mut log, &format!("l{i}"), "read", 9_000))
        .collect();
    let out = run(&cfg, &CompactionState::default(), &log, 0, Mode::Auto, 0)
        .await
        .unwrap();
    assert!(
        out.record.tokens_before > 8_000,
        "{}",
        out.record.tokens_before
    );
    assert_ne!(out.record.tier, Tier::Emergency);
    assert!(out.record.evicted_seqs.is_empty());
    // Every answered result but the newest goes; the view fits the room (the window less the
    // reserved output), though the newest alone keeps it over a low target.
    assert!(
        out.record.tokens_after <= 7_000,
        "{}",
        out.record.tokens_after
    );
    for &seq in &results[..3] {
        assert_eq!(projection(&out, seq), Some(Projection::Reference));
    }
    assert_eq!(
        projection(&out, results[3]),
        Some(Projection::Full),
        "the newest stays"
    );
}

/// A current turn of files written, each a few thousand tokens of arguments (an agent writing a
/// report in parts) after one request: `writes` returns the calls' seqs; `id` names each call
/// (one id for all, as a client that reuses ids once answered); each result echoes
/// `result_chars` characters.
fn writes(log: &mut Log, id: impl Fn(usize) -> String, result_chars: usize) -> Vec<i64> {
    log.system("sys");
    log.user("Write the audit report, one part a file.");
    (0..4)
        .map(|i| {
            let call = log.push(json!({"type": "message", "role": "assistant", "tool_calls": [{
                "id": id(i), "name": "Write",
                "arguments": {"file_path": format!("report/{i}.md"), "content": "Finding. ".repeat(1_000)}}]}));
            let echo = format!("File created: report/{i}.md\n{}", "| row |\n".repeat(result_chars / 8));
            log.push(json!({"type": "message", "role": "tool", "tool_call_id": id(i),
                "name": "Write", "content": echo}));
            call
        })
        .collect()
}

/// The older calls' arguments of such a turn go by reference, oldest first, the newest stays
/// whole, and no compaction is an emergency: with short results, with results too large for
/// the tail's cap (archived by pass 1 while their calls are current), and with one call id
/// reused for every call.
#[tokio::test]
async fn a_current_turn_of_large_writes_shows_the_older_arguments_by_reference() {
    type Case = (&'static str, fn(usize) -> String, usize);
    let cases: [Case; 3] = [
        ("short results", |i| format!("w{i}"), 0),
        ("large results", |i| format!("w{i}"), 1_600),
        ("one id reused", |_| "w".to_owned(), 0),
    ];
    for (name, id, result_chars) in cases {
        let cfg = config(8_000);
        let mut log = Log::default();
        let calls = writes(&mut log, id, result_chars);
        let out = run(&cfg, &CompactionState::default(), &log, 0, Mode::Auto, 0)
            .await
            .unwrap();
        let record = &out.record;
        assert!(
            record.tokens_before > 8_000,
            "{name}: {}",
            record.tokens_before
        );
        assert_ne!(record.tier, Tier::Emergency, "{name}");
        assert!(record.evicted_seqs.is_empty(), "{name}");
        assert!(
            record.tokens_after <= 7_000,
            "{name}: {}",
            record.tokens_after
        );
        let arguments = |seq: i64| {
            let message = out.messages.iter().find(|m| m.seq == Some(seq)).unwrap();
            message.tool_calls[0].arguments.to_string()
        };
        let oldest = arguments(calls[0]);
        assert!(oldest.contains("archived_arguments"), "{name}: {oldest}");
        assert!(
            oldest.contains(&format!("observation://{}", calls[0])),
            "{name}"
        );
        assert!(
            arguments(calls[3]).contains("Finding."),
            "{name}: the newest is whole"
        );
    }
}

/// An eviction that cannot bring the view down to the target (a long recent request the client
/// pinned stays verbatim) does not act at the trigger, where it would free a little and the view would be
/// back there a few turns later: it waits until the view no longer fits.
#[tokio::test]
async fn an_eviction_short_of_the_target_waits_until_the_view_does_not_fit() {
    let cfg = config(8_000);
    let (trigger, target, room) = (5_400, 2_200, 7_000);
    let mut log = Log::default();
    log.system("sys");
    log.user("Start.");
    let old = [
        exchange(&mut log, "a", "read", 3_200),
        exchange(&mut log, "b", "read", 3_200),
    ];
    log.push(json!({"type": "message", "role": "user", "pinned": true,
        "content": "The spec, pasted in full. ".repeat(400)}));
    log.user("Go on.");
    exchange(&mut log, "c", "read", 2_400);
    exchange(&mut log, "d", "read", 2_400);
    let state = CompactionState::default();
    let out = run(&cfg, &state, &log, 0, Mode::Auto, 0).await.unwrap();
    let before = out.record.tokens_before;
    assert!(before > trigger && before < room, "{before}");
    // The old reads could free a worthwhile 1,600 tokens, not the view down to the target.
    assert!(before - 1_700 > target, "{before}");
    assert_eq!(out.record.tokens_after, before, "nothing rewritten");
    for seq in old {
        assert_eq!(projection(&out, seq), Some(Projection::Full));
    }

    // A turn later the view is over the room: the eviction acts, and the view fits.
    exchange(&mut log, "e", "read", 8_000);
    let out = run(&cfg, &out.state, &log, 0, Mode::Auto, 0).await.unwrap();
    assert!(
        out.record.tokens_before > room,
        "{}",
        out.record.tokens_before
    );
    assert!(
        out.record.tokens_after <= room,
        "{}",
        out.record.tokens_after
    );
    assert_ne!(out.record.tier, Tier::Emergency);
    for seq in old {
        assert_ne!(
            projection(&out, seq),
            Some(Projection::Full),
            "archived or folded"
        );
    }
}

/// A turn that writes a file larger than the room beside what must stay: before anything is
/// truncated, that answered call's long arguments are shown by reference (the newest call
/// too), so the compaction is no emergency and nothing is folded.
#[tokio::test]
async fn a_file_written_larger_than_the_room_is_shown_by_reference_not_truncated() {
    let cfg = config(8_000);
    let mut log = Log::default();
    log.system("sys");
    let request = log.user("Write the parser.");
    let read = exchange(&mut log, "a", "read", 1_000);
    let file: String = (0..900)
        .map(|i| format!("fn rule_{i}() -> Rule {{ todo!() }}\n"))
        .collect();
    let call = log.push(
        json!({"type": "message", "role": "assistant", "tool_calls": [
        {"id": "w", "name": "write", "arguments": {"path": "src/parser.rs", "content": file}}]}),
    );
    log.push(
        json!({"type": "message", "role": "tool", "tool_call_id": "w", "name": "write",
        "content": "wrote src/parser.rs"}),
    );
    let out = run(&cfg, &CompactionState::default(), &log, 0, Mode::Auto, 0)
        .await
        .unwrap();
    assert_ne!(out.record.tier, Tier::Emergency);
    assert!(
        out.record.evicted_seqs.is_empty(),
        "{:?}",
        out.record.evicted_seqs
    );
    assert!(out.record.tokens_after <= 8_000);
    assert_eq!(
        out.state.reduced[&call].reason,
        Reason::OffloadedLongArguments
    );
    let (_, content) = shown(&out, call).unwrap();
    assert!(!content.contains("fn rule_1()"));
    assert_eq!(projection(&out, request), Some(Projection::Full));
    assert!(
        projection(&out, read).is_some(),
        "the read is shown, by reference at least"
    );
}
