//! The error lines a tool result shown reduced names of what it no longer shows: more in a
//! larger window, one line for a message at many places, those of an output wrapped in JSON,
//! none of a document's.

use serde_json::json;

use crate::domain::compaction::{Mode, Projection};
use crate::domain::state::CompactionState;
use crate::engine::tests::{config, run, Log};

/// A compiler run that prints dozens of distinct diagnostics, shown as an excerpt: a small
/// window names four of its middle's error lines, a large one many more, and the same ones on
/// every later call.
#[tokio::test]
async fn a_larger_window_names_more_error_lines_of_a_reduced_result() {
    let mut text: String = (0..1_500)
        .map(|i| format!("   Compiling crate{i} v0.1.0\n"))
        .collect();
    text.extend((0..40).map(|i| format!("error[E0308]: mismatched types at src/m{i}.rs:{i}:9\n")));
    text.extend((1_500..4_000).map(|i| format!("   Compiling crate{i} v0.1.0\n")));
    assert_eq!(error_lines_named(16_000, &text).await, 4);
    assert_eq!(error_lines_named(128_000, &text).await, 31);
}

/// A C build that reports one message at thirty places of a file and two other errors, shown
/// as an excerpt in a small window: the message is one line naming its thirty places, as the
/// summary would, so the other errors are named too, where the first four lines would all have
/// been the one message.
#[tokio::test]
async fn one_message_at_many_places_is_one_error_line_of_a_reduced_result() {
    let mut text: String = (0..1_500).map(|i| format!("gcc -c src/f{i}.c\n")).collect();
    text.extend(
        (80..110).map(|l| format!("src/t.c:{l}:5: error: invalid use of incomplete typedef ‘t’\n")),
    );
    text.push_str("src/k.c:437:46: error: ‘t’ has no member named ‘data’\n");
    text.push_str("collect2: error: ld returned 1 exit status\n");
    text.extend((1_500..3_000).map(|i| format!("gcc -c src/f{i}.c\n")));
    let shown = error_lines_shown(16_000, &text).await;
    let entries: Vec<&str> = shown.lines().filter(|l| l.contains("error")).collect();
    assert_eq!(entries.len(), 3, "{shown}");
    assert!(
        entries[0]
            .starts_with("src/t.c: error: invalid use of incomplete typedef ‘t’ (at 80:5, 81:5,"),
        "{shown}"
    );
    assert!(entries[0].ends_with(", 108:5, 109:5)"), "{shown}");
    assert_eq!(
        entries[1],
        "src/k.c:437:46: error: ‘t’ has no member named ‘data’"
    );
    assert_eq!(entries[2], "collect2: error: ld returned 1 exit status");
}

/// A build's output as a harness wraps it, in one line of JSON (`{"output": "…\\n…",
/// "metadata": …}`): the reduced result names each of its error lines, not the wrapper's
/// first characters.
#[tokio::test]
async fn an_output_wrapped_in_one_line_of_json_names_its_error_line() {
    let mut output: String = (0..1_500).map(|i| format!("gcc -c src/f{i}.c\n")).collect();
    output.push_str("src/k.c:437:46: error: ‘t’ has no member named ‘data’\n");
    output.extend((1_500..2_000).map(|i| format!("gcc -c src/f{i}.c\n")));
    output.push_str("src/m.c:12:3: error: expected ‘;’ before ‘}’ token\n");
    output.extend((2_000..3_000).map(|i| format!("gcc -c src/f{i}.c\n")));
    let wrapped = json!({"output": output, "metadata": {"exit_code": 1}}).to_string();
    assert_eq!(wrapped.lines().count(), 1);
    let shown = error_lines_shown(16_000, &wrapped).await;
    let named: Vec<&str> = shown.lines().filter(|l| l.contains("error")).collect();
    assert_eq!(
        named,
        [
            "src/k.c:437:46: error: ‘t’ has no member named ‘data’",
            "src/m.c:12:3: error: expected ‘;’ before ‘}’ token"
        ],
        "{shown}"
    );
}

/// A long Markdown document read whole and shown reduced names none of its lines about
/// errors: they are the document's text, no error seen. The same text printed by a build
/// names them.
#[tokio::test]
async fn a_document_read_shown_reduced_names_none_of_its_lines_about_errors() {
    let rules = |range: std::ops::Range<usize>| -> String {
        range
            .map(|i| format!("- Rule {i}: keep each handler small.\n"))
            .collect()
    };
    let mut text = rules(0..1_500);
    // A troubleshooting section quotes the errors a reader may meet.
    text.push_str("error[E0599]: no method named `handle` found for struct `Router`\n");
    text.push_str("TypeError: a handler that throws is logged with the request id\n");
    text.push_str(&rules(1_500..3_000));
    let built = output_shown(16_000, "cargo build", &text).await;
    assert!(built.contains("error[E0599]"), "{built}");
    assert!(built.contains("TypeError:"), "{built}");
    for command in ["cat docs/api.md", "sed -n '1,4000p' docs/API.MD"] {
        let read = output_shown(16_000, command, &text).await;
        assert!(read.contains("recall observation://"), "{read}");
        assert!(!read.contains("E0599"), "{command}: {read}");
        assert!(!read.contains("TypeError"), "{command}: {read}");
    }
}

/// How many error lines the view of a window shows of one large build output, checking that
/// the next call shows it the same way.
async fn error_lines_named(window: u32, text: &str) -> usize {
    error_lines_shown(window, text)
        .await
        .matches("error[E0308]")
        .count()
}

/// What the view of a window shows of one large build output, checking that the next call
/// shows it the same way.
async fn error_lines_shown(window: u32, text: &str) -> String {
    output_shown(window, "cargo build", text).await
}

/// What the view of a window shows of one large output of shell `command`, checking that the
/// next call shows it the same way.
async fn output_shown(window: u32, command: &str, text: &str) -> String {
    let config = config(window);
    let mut log = Log::default();
    log.system("sys");
    log.user("Build it.");
    log.push(json!({"type": "message", "role": "assistant",
        "tool_calls": [{"id": "b", "name": "shell", "arguments": {"command": command}}]}));
    let seq = log.push(
        json!({"type": "message", "role": "tool", "tool_call_id": "b",
        "name": "shell", "content": text}),
    );
    let out = run(&config, &CompactionState::default(), &log, 0, Mode::Auto, 0)
        .await
        .unwrap();
    let shown = out.messages.iter().find(|m| m.seq == Some(seq)).unwrap();
    assert_eq!(shown.projection, Projection::Preview, "{window}");
    log.user("Go on.");
    let next = run(&config, &out.state, &log, 0, Mode::Auto, 0)
        .await
        .unwrap();
    assert_eq!(next.messages[..out.messages.len()], out.messages[..]);
    shown.content.to_string()
}
