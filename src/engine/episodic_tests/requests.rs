//! What a fold keeps of the user's words: the first request and the two most recent verbatim
//! (the user's own, not what a harness sends in their name), a long one as its head and tail
//! when folding cannot make room, and pinned messages and notes collapsed last, by reference.

use super::*;

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

/// A long request shown as its head and tail names the constraints its middle states: the
/// rules a long specification sets are not left to its reference while the view keeps it.
#[tokio::test]
async fn a_long_request_shown_as_head_and_tail_names_the_rules_of_its_middle() {
    let cfg = config(8_000);
    let spec = format!(
        "Write the importer as specified:\n{}- Never edit the generated files.\n{}- Do not add dependencies.\nThe entry point is src/import/mod.rs, the format docs/format.md.\n{}Start with the parser.",
        "a line of the specification\n".repeat(200),
        "another line of the specification\n".repeat(100),
        "a last line of the specification\n".repeat(200),
    );
    let mut log = Log::default();
    log.system("sys");
    log.user("Port the parser to the new grammar.");
    let long = log.user(&spec);
    for i in 0..6 {
        log.assistant(&format!("Looking at step {i}. {}", "notes ".repeat(40)));
        exchange(&mut log, &format!("c{i}"), "read", 1_600);
    }
    log.user("Now fix it.");
    let out = run(&cfg, &CompactionState::default(), &log, 0, Mode::Auto, 0)
        .await
        .unwrap();
    let (shown_as, content) = shown(&out, long).expect("the long request is in the view");
    assert_eq!(shown_as, Projection::Preview, "{content}");
    assert!(content.starts_with("Write the importer"), "{content}");
    // Each rule on a line of its own, by its words (the list marker it had goes).
    for rule in [
        "Never edit the generated files.",
        "Do not add dependencies.",
    ] {
        assert!(
            content.contains(&format!("\n{rule}\n")),
            "{rule} not in {content}"
        );
    }
    assert!(
        content.contains("\nfiles named: src/import/mod.rs, docs/format.md\n"),
        "{content}"
    );
    assert!(
        content.len() < spec.len() / 3,
        "{} characters",
        content.len()
    );
    assert!(
        out.record.tokens_after <= 3_200,
        "{}",
        out.record.tokens_after
    );
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
