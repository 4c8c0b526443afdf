//! The passes: completed exchanges by priority and age, episodes by their dependencies, what
//! stays; an archived call's arguments. What a fold keeps of the user's words is in `requests`.

use super::*;

/// The issue's scenario: two explorations and an action depending on one of them, pushed past
/// the trigger. The action goes first, then the exploration nothing depends on, and the
/// dependent exploration's conclusion stays in the view.
#[tokio::test]
async fn actions_go_before_the_explorations_they_depend_on() {
    let mut log = Log::default();
    log.system("You are a coding agent.");
    log.user("Fix the parser and update the docs.");
    start(&mut log, "parser", "exploration", &[]);
    let parser_read = exchange(&mut log, "p1", "read", 8_000);
    let parser_end = end(&mut log, "parser", "the bug is in src/parse.rs line 40");
    start(&mut log, "docs", "exploration", &[]);
    let docs_read = exchange(&mut log, "d1", "read", 8_000);
    let docs_end = end(&mut log, "docs", "the docs are generated from doc comments");
    start(&mut log, "fix", "action", &["parser"]);
    let fix_edit = exchange(&mut log, "f1", "edit", 8_000);
    end(&mut log, "fix", "");
    log.user("Now check it.");
    let compact = |target: f64| {
        let mut cfg = config(8_000);
        cfg.episodic.target = target;
        cfg
    };
    let (near, far) = (compact(0.7), compact(0.6));
    // With a near target the action alone goes.
    let state = CompactionState::default();
    let out = run(&near, &state, &log, 0, Mode::Auto, 0).await.unwrap();
    assert_eq!(out.record.tier, Tier::Soft, "past the trigger");
    assert_eq!(projection(&out, fix_edit), Some(Projection::Reference));
    assert_eq!(
        projection(&out, docs_read),
        Some(Projection::Full),
        "the action alone fits"
    );
    assert_eq!(projection(&out, parser_read), Some(Projection::Full));
    assert_eq!(
        out.state.reduced.get(&fix_edit).unwrap().reason,
        Reason::EpisodeArchived
    );

    // A farther target: the exploration nothing depends on goes next; the other stays.
    let out = run(&far, &state, &log, 0, Mode::Auto, 0).await.unwrap();
    assert_eq!(projection(&out, fix_edit), Some(Projection::Reference));
    assert_eq!(projection(&out, docs_read), Some(Projection::Reference));
    assert_eq!(
        projection(&out, parser_read),
        Some(Projection::Full),
        "depended on: last"
    );
    for (seq, text) in [
        (parser_end, "the bug is in src/parse.rs line 40"),
        (docs_end, "the docs are generated"),
    ] {
        let (p, content) = shown(&out, seq).unwrap();
        assert_eq!(p, Projection::Full);
        assert!(content.contains(text), "{content}");
    }
    // An archived result names its tool and its reference.
    let (_, content) = shown(&out, docs_read).unwrap();
    assert!(
        content.starts_with(&format!(
            "[read result archived, 8000 characters; recall observation://{docs_read}]"
        )),
        "{content}"
    );
}

/// Pass 1 takes completed exchanges by their tool's priority: writes and edits, then reads,
/// then shell output; oldest first within a priority. It stops at the target.
#[tokio::test]
async fn completed_exchanges_leave_by_tool_priority_and_age() {
    let mut cfg = config(8_000);
    // A target the edits and the oldest read reach, short of the shell output.
    cfg.episodic.target = 0.6;
    let target = (cfg.episodic.target * 8_000.0) as i64;
    let mut log = Log::default();
    log.system("sys");
    log.user("Work.");
    let shell = exchange(&mut log, "a", "bash", 5_000);
    let read = exchange(&mut log, "b", "read_file", 5_000);
    let edit_old = exchange(&mut log, "c", "str_replace_editor", 5_000);
    let edit_new = exchange(&mut log, "d", "write", 5_000);
    let read_new = exchange(&mut log, "e", "grep", 5_000);
    let shell_new = exchange(&mut log, "f", "run_tests", 5_000);
    log.user("Go on.");
    let out = run(&cfg, &CompactionState::default(), &log, 0, Mode::Auto, 0)
        .await
        .unwrap();
    let archived = |seq| projection(&out, seq) == Some(Projection::Reference);
    // The order they leave in; what left is a prefix of it, and the view is down to the target.
    let order = [edit_old, edit_new, read, read_new, shell, shell_new];
    let gone = order.iter().take_while(|&&seq| archived(seq)).count();
    assert!(gone >= 3, "edits, then the oldest read: {gone}");
    assert!(order[gone..].iter().all(|&seq| !archived(seq)), "in order");
    assert!(
        !archived(shell) && !archived(shell_new),
        "shell output last"
    );
    assert!(out.record.tokens_after <= target);
    // It stops at the target: one result fewer would not have reached it.
    let result_tokens = 5_000 / 4;
    assert!(out.record.tokens_after + result_tokens > target);
}

/// The active items (the current turn, the active episode) are never archived, and nothing
/// happens below the trigger.
#[tokio::test]
async fn the_current_turn_and_the_active_episode_stay() {
    let cfg = config(20_000);
    let mut log = Log::default();
    log.system("sys");
    log.user("Investigate.");
    let old = exchange(&mut log, "o", "read", 2_000);
    let below = run(&cfg, &CompactionState::default(), &log, 0, Mode::Auto, 0)
        .await
        .unwrap();
    assert_eq!(below.record.tier, Tier::None);
    assert!(!below.changed);
    start(&mut log, "survey", "exploration", &[]);
    // Within the tail's cap together (0.10 of the room: 1,900 tokens).
    let in_episode = exchange(&mut log, "s", "read", 3_400);
    log.user("Keep going.");
    let in_turn = exchange(&mut log, "t", "read", 3_400);
    let out = run(&cfg, &CompactionState::default(), &log, 0, Mode::Force, 0)
        .await
        .unwrap();
    // A forced compaction takes all it may: the old exchange is archived, then folded.
    assert!(
        out.record.summarized_seqs.contains(&old),
        "{:?}",
        out.record
    );
    for seq in [in_episode, in_turn] {
        assert_eq!(projection(&out, seq), Some(Projection::Full), "seq {seq}");
    }
    assert!(out.record.tokens_after <= 20_000);

    // A long active episode's older results beyond the cap are not held: they go by priority.
    let more: Vec<i64> = (0..4)
        .map(|i| exchange(&mut log, &format!("m{i}"), "read", 8_000))
        .collect();
    let out = run(&cfg, &out.state, &log, 0, Mode::Force, 0)
        .await
        .unwrap();
    assert_eq!(
        projection(&out, more[3]),
        Some(Projection::Full),
        "the newest stays"
    );
    let archived = out.state.reduced.get(&in_episode).map(|r| r.reason);
    assert!(
        archived == Some(Reason::ArchivedToolExchange)
            || out.record.summarized_seqs.contains(&in_episode),
        "archived, then folded by the forced compaction: {archived:?}"
    );
}

/// Archiving an exchange takes its call's long arguments too (a write's content): the call
/// shows its short arguments (the file it wrote) and an object naming the size of the rest and
/// the reference that recalls them exactly, its text stays, and a short call is left as it was.
#[tokio::test]
async fn an_archived_write_leaves_with_its_content() {
    let cfg = config(8_000);
    let mut log = Log::default();
    log.system("sys");
    log.user("Write the module.");
    let content = format!("pub fn parse() {{}}\n{}", "// grammar rule\n".repeat(300));
    let write = log.push(json!({"type": "message", "role": "assistant",
        "content": "Writing the parser.",
        "tool_calls": [{"id": "w", "name": "write",
            "arguments": {"path": "src/parse.rs", "content": content}}]}));
    log.push(
        json!({"type": "message", "role": "tool", "tool_call_id": "w", "name": "write",
        "content": "wrote 4,800 bytes"}),
    );
    let read = exchange(&mut log, "r", "read", 9_000);
    exchange(&mut log, "s", "read", 9_000);
    log.user("Now test it.");
    exchange(&mut log, "t", "bash", 400);
    let out = run(&cfg, &CompactionState::default(), &log, 0, Mode::Auto, 0)
        .await
        .unwrap();
    assert_eq!(out.record.tier, Tier::Soft, "past the trigger");
    let message = out.messages.iter().find(|m| m.seq == Some(write)).unwrap();
    assert_eq!(message.projection, Projection::Reference);
    assert_eq!(message.content, "Writing the parser.", "its text stays");
    let shown = &message.tool_calls[0].arguments;
    assert_eq!(
        shown["path"], "src/parse.rs",
        "the file written stays named: {shown}"
    );
    assert!(shown.get("content").is_none(), "{shown}");
    let arguments = shown["archived_arguments"]
        .as_str()
        .unwrap_or_else(|| panic!("{:?}", message.tool_calls));
    let offset: usize = arguments
        .rsplit_once("?offset=")
        .and_then(|(_, o)| o.parse().ok())
        .unwrap_or_else(|| panic!("{arguments}"));
    // The reference recalls the arguments exactly as they were sent.
    let event = log.events.iter().find(|e| e.seq == write).unwrap();
    let sent = event.body.tool_calls()[0].arguments_text();
    let lead = format!(
        "{} characters archived; recall observation://{write}?offset=",
        sent.chars().count()
    );
    assert!(arguments.starts_with(&lead), "{arguments}");
    let recalled: String = crate::engine::view::recall_text(event)
        .chars()
        .skip(offset)
        .collect();
    assert_eq!(recalled, sent);
    assert_eq!(
        out.state.reduced[&write].reason,
        Reason::ArchivedToolExchange
    );
    // What the call freed counts: more than the results alone would have.
    let freed = out.record.tokens_before - out.record.tokens_after;
    assert!(freed > 9_000 / 4 + 4_800 / 4 - 100, "{freed}");
    assert_eq!(projection(&out, read), Some(Projection::Reference));
    // A call with short arguments is left whole: the read's call is shown as it was.
    let read_call = out
        .messages
        .iter()
        .find(|m| m.seq == Some(read - 1))
        .unwrap();
    assert_eq!(read_call.projection, Projection::Full);
}

/// A patch passed as a call's one argument (a freeform `apply_patch`) names the files it
/// changes: archived, the call's note still names them, and where to recall the patch, but
/// not the files its lines name (`./old.ts` in an import it changes).
#[tokio::test]
async fn an_archived_patch_still_names_the_files_it_changed() {
    let cfg = config(8_000);
    let mut log = Log::default();
    log.system("sys");
    log.user("Fix the routes.");
    let patch = format!(
        "*** Begin Patch\n*** Update File: app/api/init/route.ts\n@@\n{}*** Add File: app/api/commit/route.ts\n+export {{}}\n*** End Patch",
        "-import { a } from './old.ts'\n+import { b } from './new.ts'\n".repeat(60)
    );
    let patched = log.push(
        json!({"type": "message", "role": "assistant", "content": "",
        "tool_calls": [{"id": "p", "name": "apply_patch", "arguments": {"input": patch}}]}),
    );
    log.push(
        json!({"type": "message", "role": "tool", "tool_call_id": "p", "name": "apply_patch",
        "content": "Success. Updated the following files:\nM app/api/init/route.ts"}),
    );
    exchange(&mut log, "r", "read", 9_000);
    exchange(&mut log, "s", "read", 9_000);
    log.user("Now test it.");
    exchange(&mut log, "t", "bash", 400);
    let out = run(&cfg, &CompactionState::default(), &log, 0, Mode::Auto, 0)
        .await
        .unwrap();
    let message = out
        .messages
        .iter()
        .find(|m| m.seq == Some(patched))
        .unwrap();
    assert_eq!(message.projection, Projection::Reference);
    let note = message.tool_calls[0].arguments["archived_arguments"]
        .as_str()
        .unwrap_or_else(|| panic!("{:?}", message.tool_calls));
    assert!(
        note.contains(
            ", naming app/api/init/route.ts, app/api/commit/route.ts; recall observation://"
        ),
        "{note}"
    );
    assert!(message.tool_calls[0].arguments.get("input").is_none());
}
