//! The passes: completed exchanges by priority and age, episodes by their dependencies, the
//! oldest conversation folded, pinned messages collapsed last; what stays.

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

/// History without episodes: pass 1, then the oldest conversation folded into the summary,
/// the first user request and the two most recent kept verbatim.
#[tokio::test]
async fn unannotated_history_folds_the_oldest_and_keeps_the_first_request() {
    let cfg = config(8_000);
    let mut log = Log::default();
    log.system("sys");
    let first = log.user("Port the parser to the new grammar; never change the public API.");
    for i in 0..12 {
        log.user(&format!("Step {i}: {}", "details ".repeat(100)));
        log.assistant(&format!("Done with step {i}. {}", "notes ".repeat(100)));
        exchange(&mut log, &format!("c{i}"), "read", 600);
    }
    let last_two = [log.user("Almost there."), log.user("Finish it.")];
    let out = run(&cfg, &CompactionState::default(), &log, 0, Mode::Auto, 0)
        .await
        .unwrap();
    assert!(!out.record.summarized_seqs.is_empty(), "pass 3 folded");
    assert!(!out.record.summarized_seqs.contains(&first));
    for seq in std::iter::once(first).chain(last_two) {
        assert_eq!(projection(&out, seq), Some(Projection::Full), "seq {seq}");
    }
    // Down from past the trigger to about the target (the summary's size is estimated).
    assert!(out.record.tokens_before >= (0.80 * 8_000.0) as i64);
    assert!(
        out.record.tokens_after <= (0.70 * 8_000.0) as i64,
        "{} {:?}",
        out.record.tokens_after,
        out.messages
            .iter()
            .map(|m| (m.seq, m.projection, m.tokens))
            .collect::<Vec<_>>()
    );
    assert_eq!(out.record.policy, Policy::Episodic);
    // An archived exchange's lifecycle state is archived, though its reference is shown.
    let (&seq, _) = out
        .state
        .reduced
        .iter()
        .find(|(_, r)| r.reason == Reason::ArchivedToolExchange)
        .expect("pass 1 archived results");
    assert_eq!(projection(&out, seq), Some(Projection::Reference));
    let standing = crate::engine::inspect::standing(seq, None, false, 1, &out.state, &[]);
    assert_eq!(standing.state, ItemState::Archived);
    assert_eq!(standing.reason, Reason::ArchivedToolExchange);
}

/// What a harness sends as the user (a project's AGENTS.md, the environment's context) is no
/// request: the first request the fold keeps verbatim is the user's own, and the instructions
/// fold with the rest, named in the summary by their reference with the rule they state.
#[tokio::test]
async fn a_projects_instructions_fold_and_the_users_first_request_stays() {
    let cfg = config(8_000);
    let mut log = Log::default();
    log.system("sys");
    let guide = "Layout, tests and release steps of the app. ".repeat(40);
    let agents = log.user(&format!(
        "# AGENTS.md instructions for /app\n\n<INSTRUCTIONS>\n{guide}\nNever push to main.\n</INSTRUCTIONS>"
    ));
    let context = log.user("<environment_context>\n  <cwd>/app</cwd>\n</environment_context>");
    let first = log.user("Port the parser to the new grammar.");
    for i in 0..12 {
        log.user(&format!("Step {i}: {}", "details ".repeat(100)));
        log.assistant(&format!("Done with step {i}. {}", "notes ".repeat(100)));
        exchange(&mut log, &format!("c{i}"), "read", 600);
    }
    log.user("Finish it.");
    let out = run(&cfg, &CompactionState::default(), &log, 0, Mode::Auto, 0)
        .await
        .unwrap();
    assert_eq!(projection(&out, first), Some(Projection::Full));
    assert!(out.record.summarized_seqs.contains(&agents));
    let summary = &out.state.summary.text;
    assert!(
        summary.contains(&format!(
            "- observation://{agents} AGENTS.md instructions for /app\n- Never push to main."
        )),
        "{summary}"
    );
    // The environment's context folds too, named in the recall list.
    assert!(out.record.summarized_seqs.contains(&context));
    let recall = summary
        .split("(recall by URI)\n")
        .nth(1)
        .unwrap_or_default();
    let listed = recall.lines().next().unwrap_or_default();
    assert!(
        listed.contains(&format!("for seq {context}")) || listed.contains(&format!(", {context}")),
        "{summary}"
    );
}

/// A log of `lines` lines pasted by the user; about 6 tokens a line.
fn pasted(lines: usize) -> String {
    format!(
        "Here is the log of the last run:\n{}What failed?",
        "a line of the build log\n".repeat(lines)
    )
}

/// A request the fold keeps verbatim but the current one, longer than the tail's cap (a pasted
/// log, a harness's summary of an earlier conversation), is shown as its head and tail with its
/// reference when folding the conversation cannot bring the view to the target (the fold goes
/// as far as it would have); the first and the current requests stay whole, and the next
/// compaction shows it the same. One that folding can make room beside stays whole.
#[tokio::test]
async fn a_long_earlier_request_is_shown_as_head_and_tail_when_folding_cannot_make_room() {
    let cfg = config(8_000);
    // Records count the reserved output (1,000): the trigger is at 6,400, the target at 3,200
    // (2,200 of messages), the tail's cap 700 tokens (4 characters a token).
    let session = |lines: usize, exchanges: usize| {
        let mut log = Log::default();
        log.system("sys");
        let first = log.user("Port the parser to the new grammar.");
        let long = log.user(&pasted(lines));
        for i in 0..exchanges {
            log.assistant(&format!("Looking at step {i}. {}", "notes ".repeat(40)));
            exchange(&mut log, &format!("c{i}"), "read", 1_600);
        }
        let current = log.user("Now fix it.");
        (log, [first, long, current])
    };

    // 3,000 tokens: more than the target alone.
    let (mut log, [first, long, current]) = session(500, 6);
    let out = run(&cfg, &CompactionState::default(), &log, 0, Mode::Auto, 0)
        .await
        .unwrap();
    assert!(
        out.record.tokens_before >= 6_400,
        "{}",
        out.record.tokens_before
    );
    let (shown_as, content) = shown(&out, long).expect("the long request is in the view");
    assert_eq!(shown_as, Projection::Preview, "{content}");
    assert!(
        content.starts_with("Here is the log of the last run:"),
        "{content}"
    );
    assert!(content.ends_with("What failed?"), "{content}");
    assert!(
        content.contains(&format!("recall observation://{long}?offset=")),
        "{content}"
    );
    assert!(
        content.len() < pasted(500).len() / 3,
        "{} characters",
        content.len()
    );
    assert_eq!(
        out.state.reduced.get(&long).map(|r| r.reason),
        Some(Reason::OffloadedLargeRequest)
    );
    // The conversation before it folds too: the request stays in the view past the
    // checkpoint, as its head and tail, and the record says so.
    assert!(!out.record.summarized_seqs.is_empty(), "folded");
    assert!(out.state.checkpoint_seq > long);
    for seq in [first, current] {
        assert_eq!(projection(&out, seq), Some(Projection::Full), "seq {seq}");
    }
    assert!(out.record.offloaded.iter().any(|o| o.seq == long));
    assert!(
        out.record.tokens_after <= 3_200,
        "{}",
        out.record.tokens_after
    );

    let answer = log.assistant("Fixed.");
    let again = run(&cfg, &out.state, &log, 0, Mode::Force, 0)
        .await
        .unwrap();
    assert_eq!(shown(&again, long), Some((Projection::Preview, content)));
    assert_eq!(projection(&again, answer), Some(Projection::Full));

    // 1,500 tokens, over the tail's cap, but folding the conversation makes room beside it.
    let (log, [_, long, _]) = session(250, 10);
    let out = run(&cfg, &CompactionState::default(), &log, 0, Mode::Auto, 0)
        .await
        .unwrap();
    assert!(!out.record.summarized_seqs.is_empty(), "folded");
    assert_eq!(projection(&out, long), Some(Projection::Full));
}

/// A PNG of one pixel, in base64.
const PIXEL: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";

/// What a long request is not cut for: being the current one, being inside the active
/// episode, carrying an image, or a forced compaction of a view the configured target has room
/// in.
#[tokio::test]
async fn a_long_request_stays_whole_while_current_or_active_or_when_there_is_room() {
    let cfg = config(8_000);
    // The current request: the agent is still working on it.
    let mut log = Log::default();
    log.user("Port the parser to the new grammar.");
    for i in 0..6 {
        exchange(&mut log, &format!("c{i}"), "read", 1_600);
    }
    let current = log.user(&pasted(500));
    exchange(&mut log, "d", "read", 1_600);
    let out = run(&cfg, &CompactionState::default(), &log, 0, Mode::Auto, 0)
        .await
        .unwrap();
    assert!(
        out.record.tokens_before >= 6_400,
        "{}",
        out.record.tokens_before
    );
    assert_eq!(projection(&out, current), Some(Projection::Full));

    // Inside the active episode, though a later request is the current one.
    let in_episode = long_request_shown(&cfg, Mode::Auto, |log| {
        start(log, "port", "exploration", &[]);
        log.user(&pasted(500))
    });
    assert_eq!(in_episode.await, Some(Projection::Full));

    // With an image, which its head and tail would not show.
    let with_image = long_request_shown(&cfg, Mode::Auto, |log| {
        log.push(json!({"type": "message", "role": "user", "content": [
            {"type": "text", "text": pasted(500)},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                "data": PIXEL}}]}))
    });
    assert_eq!(with_image.await, Some(Projection::Full));

    // Forced in a larger window (the target 12,800, the tail's cap 3,100 tokens): folding
    // reaches the configured target, so the request of 4,200 tokens stays.
    let larger = config(32_000);
    let forced = long_request_shown(&larger, Mode::Force, |log| log.user(&pasted(700)));
    assert_eq!(forced.await, Some(Projection::Full));
}

/// How the long request `add` appends is shown after a compaction in `mode`, in a session of a
/// short first request, that request, six reads of 1,600 characters and a short current
/// request. The compaction is at the trigger, or forced and folding.
async fn long_request_shown(
    cfg: &SessionConfig,
    mode: Mode,
    add: impl FnOnce(&mut Log) -> i64,
) -> Option<Projection> {
    let mut log = Log::default();
    log.user("Port the parser to the new grammar.");
    let long = add(&mut log);
    for i in 0..6 {
        exchange(&mut log, &format!("c{i}"), "read", 1_600);
    }
    log.user("Now fix it.");
    let out = run(cfg, &CompactionState::default(), &log, 0, mode, 0)
        .await
        .unwrap();
    let trigger = (cfg.episodic.trigger * f64::from(cfg.context_window)) as i64;
    match mode {
        Mode::Auto => assert!(
            out.record.tokens_before >= trigger,
            "{}",
            out.record.tokens_before
        ),
        _ => assert!(!out.record.summarized_seqs.is_empty(), "folded"),
    }
    projection(&out, long)
}

/// Pass 3's last resort: when folding the unpinned conversation cannot reach the target,
/// pinned user messages and notes collapse into the summary, oldest first. The first request
/// and the two most recent stay verbatim, and the summary names every collapsed one by its
/// reference; the state says why each left, and the next compaction keeps it so.
#[tokio::test]
async fn pinned_messages_and_notes_collapse_oldest_first_each_by_reference() {
    let cfg = config(8_000);
    let mut log = Log::default();
    log.system("sys");
    let first = log.push(json!({"type": "message", "role": "user", "pinned": true,
        "content": "Port the parser to the new grammar."}));
    let mut pinned = Vec::new();
    for i in 0..8 {
        pinned.push(
            log.push(json!({"type": "message", "role": "user", "pinned": true,
            "content": format!("Requirement {i}: {}", "keep the error messages ".repeat(50))})),
        );
        pinned.push(log.push(json!({"type": "note", "pinned": true,
            "content": format!("Decision {i}: {}", "use the table-driven lexer ".repeat(50))})));
        exchange(&mut log, &format!("c{i}"), "read", 400);
    }
    let recent = [
        log.push(json!({"type": "message", "role": "user", "pinned": true,
            "content": "Almost there."})),
        log.push(json!({"type": "message", "role": "user", "pinned": true,
            "content": "Finish it."})),
    ];
    let out = run(&cfg, &CompactionState::default(), &log, 0, Mode::Auto, 0)
        .await
        .unwrap();
    let collapsed: Vec<i64> = out
        .state
        .reduced
        .iter()
        .filter(|(_, r)| r.reason == Reason::PinnedCollapsed)
        .map(|(&seq, _)| seq)
        .collect();
    assert!(
        !collapsed.is_empty(),
        "pinned items collapsed: {:?}",
        out.record
    );
    assert!(collapsed.len() < pinned.len(), "only what the target needs");
    // Oldest first: the collapsed ones are the oldest pinned items.
    assert_eq!(collapsed, pinned[..collapsed.len()], "oldest first");
    for seq in std::iter::once(first).chain(recent) {
        assert_eq!(projection(&out, seq), Some(Projection::Full), "seq {seq}");
    }
    for &seq in &pinned[collapsed.len()..] {
        assert_eq!(projection(&out, seq), Some(Projection::Full), "seq {seq}");
    }
    let summary = &out.messages[1];
    assert_eq!(summary.projection, Projection::Summary);
    for &seq in &collapsed {
        assert_eq!(projection(&out, seq), None, "seq {seq} left the view");
        assert!(
            names(&summary.content, seq),
            "seq {seq} has no reference in\n{}",
            summary.content
        );
        let standing = crate::engine::inspect::standing(seq, None, true, 1, &out.state, &[]);
        assert_eq!(standing.state, ItemState::Archived);
        assert_eq!(standing.projection, Projection::Summary);
        assert_eq!(standing.reason, Reason::PinnedCollapsed);
        assert_eq!(standing.compaction_id, Some(out.record.id));
    }
    assert!(out.record.tokens_after <= (0.70 * 8_000.0) as i64);
    // The next compaction, with more to fold, keeps saying why they left.
    log.user(&"more ".repeat(800));
    let next = run(&cfg, &out.state, &log, 0, Mode::Force, 0)
        .await
        .unwrap();
    for &seq in &collapsed {
        let r = next.state.reduced.get(&seq).expect("still explained");
        assert_eq!(
            (r.reason, r.compaction_id),
            (Reason::PinnedCollapsed, out.record.id)
        );
    }
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
/// changes: archived, the call's note still names them, and where to recall the patch.
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
            ", naming app/api/init/route.ts, ./old.ts, ./new.ts, app/api/commit/route.ts; recall observation://"
        ),
        "{note}"
    );
    assert!(message.tool_calls[0].arguments.get("input").is_none());
}
