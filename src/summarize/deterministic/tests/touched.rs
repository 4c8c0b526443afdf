//! The files and commands a summary lists as touched.

use super::*;

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
