//! What a summary keeps, how it grows from an earlier one, and its bounds.

use super::*;
use crate::domain::compaction::{Anchors, NOT_AVAILABLE};
use proptest::prelude::*;

#[test]
fn every_kind_of_fact_appears() {
    let out = run(&Summary::default(), &session(), 4000);
    let text = &out.summary.text;
    for expected in [
        "## First user request\n> observation://2 Fix the login bug in auth.rs.\n> It rejects valid passwords.",
        "## Later user requests\n- observation://10 Also keep the old API working.",
        "- read_file(path=src/auth.rs)",
        "- shell(command=cargo test auth)",
        "## Files and commands touched\n- src/auth.rs (last: read_file)\n- $ cargo test auth → failed",
        "- observation://6 shell(command=cargo test auth) → failed",
        "- shell(command=cargo test auth) → error[E0425]: cannot find value `hash`",
        "- observation://7 Never touch the database schema.",
        "- observation://11 user: Use bcrypt, not sha1.",
        "- explore-auth: The hash is compared before salting.",
        "## Last stated plan\n> Plan: salt first, then compare; rerun the tests.",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in\n{text}");
    }
    assert!(!text.contains("You are a coding agent"), "{text}");
    assert!(
        !text.contains("src/auth.rs:3"),
        "only the first line of an error: {text}"
    );

    let anchors = &out.summary.anchors;
    assert!(
        anchors.user_intent.starts_with("Fix the login bug"),
        "{anchors:?}"
    );
    assert!(anchors.user_intent.contains("Use bcrypt"), "{anchors:?}");
    assert!(
        anchors.execution_progress.contains("explore-auth"),
        "{anchors:?}"
    );
    assert!(anchors
        .execution_progress
        .contains("shell(command=cargo test auth)"));
    assert_eq!(anchors.key_decision, "user: Use bcrypt, not sha1.");
    assert!(
        anchors.tried_solution.contains("cannot find value"),
        "{anchors:?}"
    );
    assert_eq!(
        anchors.next_step,
        "Plan: salt first, then compare; rerun the tests."
    );
    assert_eq!(out.info.kind, "deterministic");
    assert_eq!(out.info.model, None);
}

#[test]
fn anchors_are_not_available_when_nothing_supports_them() {
    let out = run(&Summary::default(), &[user(1, "Hello")], 1000);
    let a = &out.summary.anchors;
    assert_eq!(a.user_intent, "Hello");
    for v in [
        &a.execution_progress,
        &a.key_decision,
        &a.tried_solution,
        &a.next_step,
    ] {
        assert_eq!(v, NOT_AVAILABLE);
    }
}

#[test]
fn a_second_call_keeps_the_first_request_and_adds_new_facts() {
    let first = run(&Summary::default(), &session(), 4000);
    let more = [
        user(13, "Now add a test for it."),
        call(
            14,
            "c3",
            "write_file",
            json!({"file_path": "tests/auth.rs"}),
        ),
        result(15, "c3", "permission denied", true),
    ];
    let second = run(&first.summary, &more, 4000);
    let text = &second.summary.text;
    assert!(text.starts_with(
        "## First user request\n> observation://2 Fix the login bug in auth.rs.\n> It rejects valid passwords."
    ));
    for kept in [
        "- read_file(path=src/auth.rs)",
        "- observation://7 Never touch the database schema.",
    ] {
        assert!(text.contains(kept), "lost {kept:?}:\n{text}");
    }
    for added in [
        "- observation://13 Now add a test for it.",
        "- write_file(file_path=tests/auth.rs) → permission denied",
        "- tests/auth.rs",
    ] {
        assert!(text.contains(added), "missing {added:?}:\n{text}");
    }
    // The plan and decision of the first call stay known; the new error replaces the old one.
    let a = &second.summary.anchors;
    assert_eq!(a.next_step, first.summary.anchors.next_step);
    assert_eq!(a.key_decision, first.summary.anchors.key_decision);
    assert!(a.tried_solution.contains("permission denied"), "{a:?}");
    assert!(a.user_intent.starts_with("Fix the login bug"), "{a:?}");
    assert!(a.user_intent.contains("Now add a test"), "{a:?}");
    // Reading the summary back and writing it again changes nothing.
    assert_eq!(run(&second.summary, &[], 4000).summary, second.summary);
}

#[test]
fn a_summary_from_another_summariser_is_kept_as_the_earlier_summary() {
    let previous = Summary {
        text: "The user wants the login bug fixed.\n## Not a section of ours".into(),
        anchors: Anchors {
            user_intent: "Fix the login bug".into(),
            ..Anchors::default()
        },
    };
    let out = run(&previous, &[user(20, "Ship it.")], 2000);
    let text = &out.summary.text;
    assert!(
        text.starts_with(
            "## Earlier summary\n> The user wants the login bug fixed.\n> ## Not a section of ours"
        ),
        "{text}"
    );
    assert!(!text.contains("## First user request"), "{text}");
    assert!(
        text.contains("## Later user requests\n- observation://20 Ship it."),
        "{text}"
    );
    assert_eq!(
        out.summary.anchors.user_intent,
        "Fix the login bug (latest request: Ship it.)"
    );
}

#[test]
fn known_anchors_never_regress() {
    let previous = Summary {
        text: String::new(),
        anchors: Anchors {
            user_intent: "Fix the login bug".into(),
            execution_progress: "read auth.rs".into(),
            key_decision: "use bcrypt".into(),
            tried_solution: "sha1 failed".into(),
            next_step: "rerun tests".into(),
        },
    };
    let events = [result(1, "x", "ok", false)];
    assert_eq!(
        run(&previous, &events, 500).summary.anchors,
        previous.anchors
    );
    assert_eq!(run(&previous, &[], 500).summary.anchors, previous.anchors);
}

#[test]
fn same_input_gives_the_same_output() {
    let events = session();
    let a = run(&Summary::default(), &events, 700);
    let b = run(&Summary::default(), &events, 700);
    assert_eq!(a.summary, b.summary);
}

#[test]
fn huge_non_ascii_inputs_stay_bounded_and_keep_the_first_request() {
    let long = "日本語のテキスト🙂 é ".repeat(1_000);
    let mut events = vec![user(1, &format!("Première demande : {long}"))];
    for i in 0..500 {
        let seq = 2 + 4 * i;
        events.push(call(
            seq,
            &format!("c{i}"),
            "run",
            json!({"cmd": format!("echo {i} {long}")}),
        ));
        events.push(result(seq + 1, &format!("c{i}"), &long, i % 3 == 0));
        events.push(user(seq + 2, &long));
        events.push(note(seq + 3, &long));
    }
    for max_chars in [0, 1, 7, 40, 300, 1_000, 8_000] {
        let out = run(&Summary::default(), &events, max_chars);
        let chars = out.summary.text.chars().count();
        assert!(chars <= max_chars, "{chars} > {max_chars}");
        if max_chars >= 1_000 {
            assert!(
                out.summary.text.starts_with(
                    "## First user request\n> observation://1 Première demande : 日本語"
                ),
                "{}",
                out.summary.text
            );
        }
        if max_chars >= 8_000 {
            // The newest facts survive, the oldest went first.
            assert!(
                out.summary.text.contains("echo 499"),
                "{}",
                out.summary.text
            );
            assert!(
                !out.summary.text.contains("echo 0 "),
                "{}",
                out.summary.text
            );
        }
        for anchor in [
            &out.summary.anchors.user_intent,
            &out.summary.anchors.key_decision,
            &out.summary.anchors.tried_solution,
        ] {
            assert!(anchor.chars().count() <= ANCHOR_CHARS);
        }
    }
}

#[test]
fn one_line_collapses_whitespace_and_bounds() {
    assert_eq!(one_line("  a \n\t b  ", 10), "a b");
    assert_eq!(one_line("abcdef", 4), "abc…");
    assert_eq!(one_line("ab   cdef", 4), "ab…");
    assert_eq!(one_line("éééé", 3), "éé…");
    assert_eq!(one_line("abc", 0), "");
}

proptest! {
    #[test]
    fn the_text_never_exceeds_the_bound(
        contents in proptest::collection::vec("\\PC{0,300}|[ \n\t>#-]{0,20}", 1..30),
        max_chars in 0usize..2_000,
    ) {
        let events: Vec<Event> = contents
            .iter()
            .enumerate()
            .map(|(i, c)| match i % 4 {
                0 => user(i as i64, c),
                1 => call(i as i64, "c", "t", json!({ "path": c })),
                2 => result(i as i64, "c", c, true),
                _ => note(i as i64, c),
            })
            .collect();
        let first = run(&Summary::default(), &events, max_chars);
        prop_assert!(first.summary.text.chars().count() <= max_chars);
        let second = run(&first.summary, &events, max_chars);
        prop_assert!(second.summary.text.chars().count() <= max_chars);
    }
}

#[test]
fn dropped_requests_and_notes_stay_recallable_by_seq() {
    // Many long requests and notes in a small summary: most entries go, their seqs stay.
    let mut events = vec![user(1, "Port the parser to the new grammar.")];
    for i in 0..40 {
        let seq = 2 + 2 * i;
        events.push(user(seq, &format!("request {i}: {}", "detail ".repeat(30))));
        events.push(note(
            seq + 1,
            &format!("note {i}: {}", "decided ".repeat(30)),
        ));
    }
    let out = run(&Summary::default(), &events, 2_000);
    let text = &out.summary.text;
    assert!(text.chars().count() <= 2_000);
    let line = text
        .lines()
        .skip_while(|l| *l != "## Earlier user messages and notes (recall by URI)")
        .nth(1)
        .unwrap_or_else(|| panic!("no recall list in\n{text}"));
    assert!(
        line.starts_with("- recall observation://<seq> for seq 2, 3, 4"),
        "{line}"
    );
    // Every request and note is either listed with its reference or in the recall line.
    for seq in 2..82 {
        let listed = text.contains(&format!("- observation://{seq} "));
        let recalled = line
            .split(", ")
            .any(|s| s.ends_with(&format!(" {seq}")) || s == seq.to_string());
        assert!(listed || recalled, "seq {seq} left no reference in\n{text}");
    }
    // A later summary extends the same list rather than losing it.
    let more = [
        user(100, &"again ".repeat(60)),
        note(101, &"again ".repeat(60)),
    ];
    let next = run(&out.summary, &more, 2_000);
    assert!(
        next.summary.text.contains("for seq 2, 3, 4"),
        "{}",
        next.summary.text
    );
}

/// The newest tool calls are in the folded list with their outcomes and references: in a
/// tight summary the list of calls gives way before the folded list's newest entries.
#[test]
fn a_tight_summary_names_the_newest_calls_once_with_their_outcomes() {
    let mut events = vec![user(1, "Read the modules.")];
    for i in 0..20 {
        let id = format!("c{i}");
        let seq = 2 + 2 * i;
        events.push(call(
            seq,
            &id,
            "read_file",
            // A directory each: no line lists two of them.
            json!({"path": format!("src/m{i}/mod.rs")}),
        ));
        events.push(result(seq + 1, &id, "fn f() {}", false));
    }
    let text = run(&Summary::default(), &events, 1_000).summary.text;
    assert!(text.chars().count() <= 1_000, "{text}");
    for i in 17..20 {
        let seq = 3 + 2 * i;
        let folded = format!("- observation://{seq} read_file(path=src/m{i}/mod.rs) → ok");
        assert!(text.contains(&folded), "missing {folded:?} in\n{text}");
    }
    assert!(!text.contains("## Tool calls made"), "{text}");
}

/// A terminal polled, a page read again: the same call run again and again is one entry.
#[test]
fn a_call_run_again_and_again_is_one_entry_saying_how_many_times() {
    let poll = |seq: i64, id: &str| call(seq, id, "write_stdin", json!({"chars": ""}));
    let mut events = vec![
        user(1, "Run the suite."),
        call(2, "run", "exec_command", json!({"cmd": "pnpm test"})),
        result(3, "run", "started", false),
    ];
    for i in 0..5 {
        let id = format!("p{i}");
        events.push(poll(4 + 2 * i, &id));
        events.push(result(5 + 2 * i, &id, "still running", false));
    }
    let first = run(&Summary::default(), &events, 4_000).summary;
    let text = &first.text;
    assert!(
        text.contains(
            "## Tool calls made\n- exec_command(cmd=pnpm test)\n- write_stdin (5 times in a row)\n"
        ),
        "{text}"
    );
    assert!(
        first
            .anchors
            .execution_progress
            .ends_with("write_stdin (5 times in a row)"),
        "{:?}",
        first.anchors
    );

    // The run goes on across summaries; another call ends it.
    let more = [
        poll(14, "p5"),
        result(15, "p5", "done", false),
        poll(16, "p6"),
        result(17, "p6", "done", false),
        call(18, "read", "read_file", json!({"path": "report.txt"})),
        result(19, "read", "ok", false),
        poll(20, "p7"),
        result(21, "p7", "done", false),
    ];
    let text = run(&first, &more, 4_000).summary.text;
    assert!(
        text.contains(
            "- write_stdin (7 times in a row)\n- read_file(path=report.txt)\n- write_stdin\n"
        ),
        "{text}"
    );

    // Calls listed cut short may differ past the cut: each keeps its line.
    let long = |seq: i64, id: &str, file: &str| {
        let cmd = format!(
            "cd /home/me/projects/{}/backend && pnpm vitest run src/{file}",
            "x".repeat(80)
        );
        call(seq, id, "exec_command", json!({"cmd": cmd}))
    };
    let cut = [
        long(1, "a", "a.test.ts"),
        result(2, "a", "ok", false),
        long(3, "b", "b.test.ts"),
        result(4, "b", "ok", false),
    ];
    let text = run(&Summary::default(), &cut, 4_000).summary.text;
    assert!(!text.contains("in a row"), "{text}");
}
