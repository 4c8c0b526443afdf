//! Deterministic summariser tests.

use super::*;
use crate::domain::compaction::{Anchors, NOT_AVAILABLE};
use crate::domain::event::{
    EpisodeEnd, EpisodeKind, EpisodeStart, Event, EventBody, Message, Note, Role, ToolCall,
};
use chrono::DateTime;
use proptest::prelude::*;
use serde_json::{json, Value};

fn event(seq: i64, body: EventBody) -> Event {
    Event {
        seq,
        id: None,
        body,
        pinned: false,
        metadata: None,
        tokens: 0,
        created_at: DateTime::UNIX_EPOCH,
        derived: Default::default(),
    }
}

fn message(role: Role, content: &str) -> Message {
    Message {
        role,
        content: content.into(),
        tool_calls: Vec::new(),
        tool_call_id: None,
        name: None,
        is_error: None,
    }
}

fn user(seq: i64, content: &str) -> Event {
    event(seq, EventBody::Message(message(Role::User, content)))
}

fn assistant(seq: i64, content: &str) -> Event {
    event(seq, EventBody::Message(message(Role::Assistant, content)))
}

fn call(seq: i64, id: &str, name: &str, arguments: Value) -> Event {
    event(
        seq,
        EventBody::Message(Message {
            tool_calls: vec![ToolCall {
                id: id.into(),
                name: name.into(),
                arguments,
            }],
            ..message(Role::Assistant, "")
        }),
    )
}

fn result(seq: i64, id: &str, content: &str, is_error: bool) -> Event {
    event(
        seq,
        EventBody::Message(Message {
            tool_call_id: Some(id.into()),
            is_error: Some(is_error),
            ..message(Role::Tool, content)
        }),
    )
}

fn note(seq: i64, content: &str) -> Event {
    event(
        seq,
        EventBody::Note(Note {
            content: content.into(),
        }),
    )
}

fn episode(seq: i64, name: &str, conclusion: &str) -> [Event; 2] {
    [
        event(
            seq,
            EventBody::EpisodeStart(EpisodeStart {
                name: name.into(),
                kind: EpisodeKind::Exploration,
                dependencies: Vec::new(),
            }),
        ),
        event(
            seq + 1,
            EventBody::EpisodeEnd(EpisodeEnd {
                name: name.into(),
                conclusion: conclusion.into(),
            }),
        ),
    ]
}

fn run(previous: &Summary, events: &[Event], max_chars: usize) -> SummaryOutput {
    let events: Vec<&Event> = events.iter().collect();
    summarize(SummaryRequest {
        previous,
        events: &events,
        max_chars,
    })
}

fn session() -> Vec<Event> {
    let mut events = vec![
        event(
            1,
            EventBody::Message(message(Role::System, "You are a coding agent.")),
        ),
        user(
            2,
            "Fix the login bug in auth.rs.\nIt rejects valid passwords.",
        ),
        call(3, "c1", "read_file", json!("{\"path\": \"src/auth.rs\"}")),
        result(4, "c1", "fn login() { ... }", false),
        call(
            5,
            "c2",
            "shell",
            json!({"command": "cargo test auth", "timeout": 60}),
        ),
        result(
            6,
            "c2",
            "\nerror[E0425]: cannot find value `hash`\n  --> src/auth.rs:3",
            true,
        ),
        note(7, "Never touch the database schema."),
    ];
    events.extend(episode(
        8,
        "explore-auth",
        "The hash is compared before salting.",
    ));
    events.push(user(10, "Also keep the old API working."));
    let mut pinned = user(11, "Use bcrypt, not sha1.");
    pinned.pinned = true;
    events.push(pinned);
    events.push(assistant(
        12,
        "Plan: salt first, then compare; rerun the tests.",
    ));
    events
}

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
fn the_error_line_of_a_failed_output_is_the_one_that_says_what_failed() {
    let cases = [
        (
            "   Compiling billing v0.3.1 (/src/billing)\nerror[E0308]: mismatched types\n  --> src/lib.rs:3:5",
            "error[E0308]: mismatched types",
        ),
        (
            "Compiling billing v0.3.1\nerror: could not compile `billing`",
            "error: could not compile `billing`",
        ),
        (
            "Traceback (most recent call last):\n  File \"a.py\", line 1, in <module>\n    import foo\nModuleNotFoundError: No module named 'foo'\n",
            "ModuleNotFoundError: No module named 'foo'",
        ),
        (
            "collected 3 items\n\ntests/test_a.py ..F\nFAILED tests/test_a.py::test_c - assert 1 == 2",
            "FAILED tests/test_a.py::test_c - assert 1 == 2",
        ),
        (
            "running 1 test\nthread 'main' panicked at src/main.rs:2:5:\nboom",
            "thread 'main' panicked at src/main.rs:2:5:",
        ),
        (
            "> build\n> tsc\nError: Cannot find module 'x'",
            "Error: Cannot find module 'x'",
        ),
        // Nothing reads as an error: the first line is all there is.
        ("\n permission denied \nmore", "permission denied"),
    ];
    for (output, expected) in cases {
        assert_eq!(facts::error_line(output, 200), expected, "{output:?}");
    }
}

#[test]
fn a_failed_build_is_listed_by_its_error_not_its_progress() {
    let call = ToolCall {
        id: "c1".into(),
        name: "bash".into(),
        arguments: json!({"command": "cargo build"}),
    };
    let mut asking = message(Role::Assistant, "");
    asking.tool_calls = vec![call];
    let events = [
        user(1, "fix the build"),
        event(2, EventBody::Message(asking)),
        result(
            3,
            "c1",
            "   Compiling billing v0.3.1\nerror[E0425]: cannot find value `rate` in this scope",
            true,
        ),
    ];
    let events: Vec<&Event> = events.iter().collect();
    let previous = Summary::default();
    let out = summarize(SummaryRequest {
        previous: &previous,
        events: &events,
        max_chars: 2_000,
    });
    let text = &out.summary.text;
    assert!(
        text.contains("error[E0425]: cannot find value `rate` in this scope"),
        "{text}"
    );
    assert!(!text.contains("Compiling billing"), "{text}");
    assert!(out.summary.anchors.tried_solution.contains("error[E0425]"));
}

/// A compiler run that printed dozens of distinct diagnostics: a small summary names the first
/// few, a larger one more of them, each as it read.
#[test]
fn a_larger_summary_names_more_error_lines_of_a_failed_run() {
    let call = ToolCall {
        id: "c1".into(),
        name: "bash".into(),
        arguments: json!({"command": "make"}),
    };
    let mut asking = message(Role::Assistant, "");
    asking.tool_calls = vec![call];
    let output: String = (1..=40)
        .map(|i| format!("src/unified.c:{i}:12: error: no member named 'field{i}'\n"))
        .collect();
    let events = [
        user(1, "fix the build"),
        event(2, EventBody::Message(asking)),
        result(3, "c1", &output, true),
    ];
    let events: Vec<&Event> = events.iter().collect();
    let named = |max_chars: usize| {
        let out = summarize(SummaryRequest {
            previous: &Summary::default(),
            events: &events,
            max_chars,
        });
        assert!(out.summary.text.chars().count() <= max_chars);
        (1..=40)
            .filter(|i| {
                let line = format!("src/unified.c:{i}:12: error: no member named 'field{i}'");
                out.summary.text.contains(&line)
            })
            .count()
    };
    // The line that says what failed and three more; then one more a thousand characters.
    assert_eq!(named(2_000), 4);
    assert_eq!(named(12_800), 13);
    assert_eq!(named(32_000), 33);
}

/// A long request and a long command name more files than their entries show: each file is
/// listed as touched, with who named it, and no option or URL is taken for one.
#[test]
fn files_named_past_an_entry_are_listed_as_touched() {
    let files: Vec<String> = (1..=12)
        .map(|i| format!("/home/dev/vsla/src/part_{i}.c"))
        .collect();
    let request = format!(
        "First, read every file in src ({}) and explain them in docs/PLAN.md.",
        files.join(" ")
    );
    let command = format!(
        "gcc -O2 --std=c99 -o build/vsla {} && curl https://example.com/a.txt",
        files.join(" ")
    );
    let mut asking = message(Role::Assistant, "");
    asking.tool_calls = vec![ToolCall {
        id: "c1".into(),
        name: "bash".into(),
        arguments: json!({ "command": command }),
    }];
    let events = [
        user(1, "Set up the build."),
        user(2, &request),
        event(3, EventBody::Message(asking)),
        result(4, "c1", "done", false),
    ];
    let events: Vec<&Event> = events.iter().collect();
    let out = summarize(SummaryRequest {
        previous: &Summary::default(),
        events: &events,
        max_chars: 12_800,
    });
    let text = &out.summary.text;
    for file in &files {
        assert!(text.contains(file.as_str()), "{file}: {text}");
    }
    // The request's own entry shows the first files; the others are named by the user, then
    // touched by the command, which is their last action.
    assert!(
        text.contains("/home/dev/vsla/src/part_12.c (last: bash)"),
        "{text}"
    );
    assert!(
        text.contains("docs/PLAN.md (last: named by the user)"),
        "{text}"
    );
    assert!(!text.contains("--std=c99 (last"), "{text}");
    assert!(!text.contains("example.com/a.txt (last"), "{text}");
    assert!(text.contains("build/vsla"), "{text}");
}

#[test]
fn commands_keep_their_outcome_files_their_last_action_and_errors_their_fix() {
    let call = |id: &str, name: &str, arguments: Value| ToolCall {
        id: id.into(),
        name: name.into(),
        arguments,
    };
    let calling = |seq, call: ToolCall| {
        let mut m = message(Role::Assistant, "");
        m.tool_calls = vec![call];
        event(seq, EventBody::Message(m))
    };
    let test = json!({"command": "cargo test"});
    let events = [
        user(1, "make the tests pass"),
        calling(2, call("a", "shell", test.clone())),
        result(3, "a", "running 3 tests\nFAILED tests::rounding", true),
        calling(4, call("b", "read_file", json!({"path": "src/money.rs"}))),
        result(5, "b", "pub fn round() {}", false),
        calling(6, call("c", "edit_file", json!({"path": "src/money.rs"}))),
        result(7, "c", "ok", false),
        calling(8, call("d", "shell", test)),
        result(9, "d", "test result: ok. 3 passed", false),
    ];
    let out = run(&Summary::default(), &events, 4000);
    let text = &out.summary.text;
    for expected in [
        "- src/money.rs (last: edit_file)\n",
        "- $ cargo test → ok\n",
        "shell(command=cargo test) → FAILED tests::rounding (fixed after changing src/money.rs)",
        "- observation://3 shell(command=cargo test) → failed",
        "- observation://9 shell(command=cargo test) → ok",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in\n{text}");
    }
    assert!(!text.contains("(last: read_file)"), "{text}");
    assert!(!text.contains("$ cargo test → failed"), "{text}");
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
