//! Renderer tests: every provider shape over hand-made and random views.

use std::borrow::Cow;

use proptest::prelude::*;
use serde_json::json;

use super::anthropic::*;
use super::openai::*;
use super::*;
use crate::domain::compaction::Projection;
use crate::engine::validate::{validate_anthropic, validate_openai};

fn message(role: Role, content: &str) -> ViewMessage<'static> {
    ViewMessage {
        seq: Some(1),
        role,
        content: content.to_owned().into(),
        tool_calls: Cow::Borrowed(&[]),
        tool_call_id: None,
        name: None,
        is_error: false,
        projection: Projection::Full,
        tokens: 1,
    }
}

fn system(content: &str) -> ViewMessage<'static> {
    message(Role::System, content)
}

fn user(content: &str) -> ViewMessage<'static> {
    message(Role::User, content)
}

fn summary(content: &str) -> ViewMessage<'static> {
    ViewMessage {
        seq: None,
        projection: Projection::Summary,
        ..user(content)
    }
}

fn assistant(content: &str) -> ViewMessage<'static> {
    message(Role::Assistant, content)
}

fn call(id: &str, arguments: Value) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: "shell".into(),
        arguments,
    }
}

fn calls(content: &str, ids: &[&str]) -> ViewMessage<'static> {
    ViewMessage {
        tool_calls: ids
            .iter()
            .map(|id| call(id, json!({"cmd": id})))
            .collect::<Vec<_>>()
            .into(),
        ..assistant(content)
    }
}

fn result(id: &str, content: &str) -> ViewMessage<'static> {
    ViewMessage {
        tool_call_id: Some(id.to_owned().into()),
        name: Some("shell".into()),
        ..message(Role::Tool, content)
    }
}

fn error_result(id: &str, content: &str) -> ViewMessage<'static> {
    ViewMessage {
        is_error: true,
        ..result(id, content)
    }
}

/// One line per OpenAI message: its role, with the call ids it issues or answers.
fn openai_shape(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| {
            let role = m["role"].as_str().unwrap_or("?");
            let ids: Vec<&str> = match m.get("tool_calls").and_then(Value::as_array) {
                Some(calls) => calls.iter().filter_map(|c| c["id"].as_str()).collect(),
                None => m["tool_call_id"].as_str().into_iter().collect(),
            };
            if ids.is_empty() {
                role.to_owned()
            } else {
                format!("{role}: {}", ids.join(" "))
            }
        })
        .collect()
}

/// One line per Anthropic message: its role and its blocks' types (with their tool ids).
fn anthropic_shape(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| {
            let blocks: Vec<String> = m["content"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|b| {
                    let kind = b["type"].as_str().unwrap_or("?");
                    match b.get("id").or(b.get("tool_use_id")).and_then(Value::as_str) {
                        Some(id) => format!("{kind}({id})"),
                        None => kind.to_owned(),
                    }
                })
                .collect();
            format!(
                "{}: {}",
                m["role"].as_str().unwrap_or("?"),
                blocks.join(" ")
            )
        })
        .collect()
}

struct Case {
    name: &'static str,
    view: Vec<ViewMessage<'static>>,
    openai: &'static [&'static str],
    anthropic: &'static [&'static str],
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "plain chat",
            view: vec![
                system("Be brief."),
                user("hi"),
                assistant("hello"),
                user("bye"),
            ],
            openai: &["system", "user", "assistant", "user"],
            anthropic: &["user: text", "assistant: text", "user: text"],
        },
        Case {
            name: "tool exchange",
            view: vec![
                user("list files"),
                calls("", &["c1"]),
                result("c1", "a.txt"),
                assistant("one file"),
            ],
            openai: &["user", "assistant: c1", "tool: c1", "assistant"],
            anthropic: &[
                "user: text",
                "assistant: tool_use(c1)",
                "user: tool_result(c1)",
                "assistant: text",
            ],
        },
        Case {
            name: "parallel calls with results in reverse order",
            view: vec![
                user("check everything"),
                calls("checking", &["c1", "c2", "c3"]),
                result("c3", "three"),
                result("c2", "two"),
                result("c1", "one"),
                assistant("done"),
            ],
            openai: &[
                "user",
                "assistant: c1 c2 c3",
                "tool: c1",
                "tool: c2",
                "tool: c3",
                "assistant",
            ],
            anthropic: &[
                "user: text",
                "assistant: text tool_use(c1) tool_use(c2) tool_use(c3)",
                "user: tool_result(c1) tool_result(c2) tool_result(c3)",
                "assistant: text",
            ],
        },
        Case {
            name: "a user message between a call and its result",
            view: vec![
                user("run the tests"),
                calls("", &["c1", "c2"]),
                result("c2", "lint ok"),
                user("also check the docs"),
                result("c1", "tests ok"),
                assistant("all green"),
            ],
            openai: &[
                "user",
                "assistant: c1 c2",
                "tool: c1",
                "tool: c2",
                "user",
                "assistant",
            ],
            anthropic: &[
                "user: text",
                "assistant: tool_use(c1) tool_use(c2)",
                "user: tool_result(c1) tool_result(c2) text",
                "assistant: text",
            ],
        },
        Case {
            name: "a call id reused after its first call was answered",
            view: vec![
                user("retry until it works"),
                calls("", &["c1"]),
                result("c1", "first"),
                calls("again", &["c1", "c2"]),
                user("hurry"),
                result("c2", "other"),
                result("c1", "second"),
            ],
            openai: &[
                "user",
                "assistant: c1",
                "tool: c1",
                "assistant: c1 c2",
                "tool: c1",
                "tool: c2",
                "user",
            ],
            anthropic: &[
                "user: text",
                "assistant: tool_use(c1)",
                "user: tool_result(c1)",
                "assistant: text tool_use(c1) tool_use(c2)",
                "user: tool_result(c1) tool_result(c2) text",
            ],
        },
        Case {
            name: "an error result",
            view: vec![
                user("delete it"),
                calls("", &["c1"]),
                error_result("c1", "permission denied"),
            ],
            openai: &["user", "assistant: c1", "tool: c1"],
            anthropic: &[
                "user: text",
                "assistant: tool_use(c1)",
                "user: tool_result(c1)",
            ],
        },
        Case {
            name: "a view that starts with the assistant",
            view: vec![
                system("Be brief."),
                calls("Resuming.", &["c1"]),
                result("c1", "ok"),
                user("continue"),
            ],
            openai: &["system", "assistant: c1", "tool: c1", "user"],
            anthropic: &[
                "user: text",
                "assistant: text tool_use(c1)",
                "user: tool_result(c1) text",
            ],
        },
        Case {
            name: "a summary message after the system prompt",
            view: vec![
                system("Be brief."),
                summary("Summary: the user wants the login bug fixed."),
                user("go on"),
                assistant("on it"),
            ],
            openai: &["system", "user", "user", "assistant"],
            anthropic: &["user: text text", "assistant: text"],
        },
        Case {
            name: "consecutive user and assistant messages",
            view: vec![
                user("one"),
                user("two"),
                assistant("three"),
                assistant(""),
                calls("four", &["c1"]),
                result("c1", ""),
                user(" "),
                user("five"),
            ],
            openai: &[
                "user",
                "user",
                "assistant",
                "assistant",
                "assistant: c1",
                "tool: c1",
                "user",
                "user",
            ],
            anthropic: &[
                "user: text text",
                "assistant: text text tool_use(c1)",
                "user: tool_result(c1) text",
            ],
        },
        Case {
            name: "a view with only the system prompt",
            view: vec![system("Be brief.")],
            openai: &["system"],
            anthropic: &["user: text"],
        },
    ]
}

#[test]
fn renders_every_case_as_a_valid_request_of_the_expected_shape() {
    for case in cases() {
        let openai = render_openai(&case.view);
        assert_eq!(
            validate_openai(&openai),
            Ok(()),
            "{}: {openai:#}",
            case.name
        );
        assert_eq!(openai_shape(&openai), case.openai, "{}", case.name);

        let anthropic = render_anthropic(&case.view);
        let valid = validate_anthropic(&anthropic);
        assert_eq!(valid, Ok(()), "{}: {anthropic:#}", case.name);
        assert_eq!(anthropic_shape(&anthropic), case.anthropic, "{}", case.name);
    }
}

#[test]
fn results_pair_with_the_most_recent_unanswered_call_of_their_id() {
    let view = vec![
        user("go"),
        calls("", &["c1"]),
        result("c1", "first"),
        calls("", &["c1"]),
        user("note while it runs"),
        result("c1", "second"),
    ];
    let openai = render_openai(&view);
    let contents: Vec<&Value> = openai["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| &m["content"])
        .collect();
    assert_eq!(
        contents,
        [
            &json!("go"),
            &Value::Null,
            &json!("first"),
            &Value::Null,
            &json!("second"),
            &json!("note while it runs"),
        ]
    );
}

#[test]
fn with_two_calls_of_one_id_open_a_result_answers_the_later_one() {
    let view = vec![
        user("go"),
        calls("", &["c1"]),
        calls("", &["c1"]),
        result("c1", "answers the second call"),
        result("c1", "answers the first call"),
    ];
    let openai = render_openai(&view);
    assert_eq!(openai["messages"][2]["content"], "answers the first call");
    assert_eq!(openai["messages"][4]["content"], "answers the second call");
}

#[test]
fn openai_marks_error_results_in_their_content() {
    let view = vec![
        user("try"),
        calls("", &["c1", "c2", "c3", "c4"]),
        error_result("c1", "permission denied"),
        error_result("c2", "error: no such file"),
        error_result("c3", ""),
        result("c4", "fine"),
    ];
    let openai = render_openai(&view);
    let results: Vec<&str> = openai["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "tool")
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert_eq!(
        results,
        [
            "Error: permission denied",
            "error: no such file",
            "Error: The tool failed without output.",
            "fine",
        ]
    );
}

#[test]
fn anthropic_flags_error_results_only_when_they_failed() {
    let view = vec![
        user("try"),
        calls("", &["c1", "c2", "c3", "c4"]),
        error_result("c1", "permission denied"),
        error_result("c2", ""),
        result("c3", "fine"),
        result("c4", ""),
    ];
    let anthropic = render_anthropic(&view);
    assert_eq!(
        anthropic["messages"][2]["content"],
        json!([
            {"type": "tool_result", "tool_use_id": "c1", "content": "permission denied", "is_error": true},
            {"type": "tool_result", "tool_use_id": "c2", "content": EMPTY_ERROR_RESULT, "is_error": true},
            {"type": "tool_result", "tool_use_id": "c3", "content": "fine"},
            {"type": "tool_result", "tool_use_id": "c4"},
        ])
    );
}

#[test]
fn openai_participant_names_follow_its_pattern() {
    assert_eq!(participant_name("Ana María (ops)"), "Ana_Mar_a__ops_");
    assert_eq!(participant_name(&"x".repeat(100)).len(), 64);
    assert_eq!(participant_name("coder-1_a"), "coder-1_a");
}

#[test]
fn openai_arguments_are_always_strings() {
    let view = vec![
        user("go"),
        ViewMessage {
            tool_calls: vec![
                call("c1", json!({"path": "a.txt"})),
                call("c2", json!("{\"path\": \"b.txt\"}")),
                call("c3", json!("not json {")),
            ]
            .into(),
            name: Some("coder".into()),
            ..assistant("")
        },
        result("c1", "a"),
        result("c2", "b"),
        result("c3", "c"),
    ];
    let openai = render_openai(&view);
    assert_eq!(
        openai["messages"][1],
        json!({
            "role": "assistant",
            "content": null,
            "name": "coder",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "shell", "arguments": "{\"path\":\"a.txt\"}"}},
                {"id": "c2", "type": "function", "function": {"name": "shell", "arguments": "{\"path\": \"b.txt\"}"}},
                {"id": "c3", "type": "function", "function": {"name": "shell", "arguments": "not json {"}},
            ],
        })
    );
}

#[test]
fn anthropic_input_is_always_an_object() {
    for (arguments, input) in [
        (json!({"path": "a.txt"}), json!({"path": "a.txt"})),
        (json!("{\"path\": \"b.txt\"}"), json!({"path": "b.txt"})),
        (json!("not json {"), json!({"arguments": "not json {"})),
        (json!("[1, 2]"), json!({"arguments": "[1, 2]"})),
        (json!(""), json!({})),
        (Value::Null, json!({})),
    ] {
        assert_eq!(*tool_input(&arguments), input, "{arguments}");
    }
}

#[test]
fn anthropic_joins_system_prompts_and_opens_with_the_user() {
    let view = vec![
        system("Be brief."),
        system("Use British spelling."),
        assistant("Welcome back."),
    ];
    let anthropic = render_anthropic(&view);
    assert_eq!(
        anthropic,
        json!({
            "system": "Be brief.\n\nUse British spelling.",
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": CONVERSATION_CONTINUES}]},
                {"role": "assistant", "content": [{"type": "text", "text": "Welcome back."}]},
            ],
        })
    );
}

#[test]
fn anthropic_leaves_out_an_empty_system() {
    let anthropic = render_anthropic(&[user("hi")]);
    assert!(anthropic.get("system").is_none(), "{anthropic}");
    assert_eq!(validate_anthropic(&anthropic), Ok(()));
}

#[test]
fn input_outside_the_contract_still_renders_a_valid_request() {
    let view = vec![
        user("go"),
        result("ghost", "a result with no call"),
        calls("", &["c1", "c2"]),
        result("c1", "only one answer"),
        system("a late system message"),
    ];
    let openai = render_openai(&view);
    assert_eq!(validate_openai(&openai), Ok(()), "{openai:#}");
    assert_eq!(
        openai["messages"][1]["content"],
        "Result of tool call ghost:\na result with no call"
    );
    assert_eq!(
        openai["messages"][4]["content"],
        format!("Error: {MISSING_RESULT}")
    );
    let anthropic = render_anthropic(&view);
    assert_eq!(validate_anthropic(&anthropic), Ok(()), "{anthropic:#}");
    assert_eq!(anthropic["system"], "a late system message");
}

#[test]
fn raw_keeps_the_messages_as_they_are() {
    let view = vec![
        system("s"),
        summary("sum"),
        calls("", &["c1"]),
        error_result("c1", "x"),
    ];
    let raw = render(Format::Raw, &view);
    let items: Vec<ViewMessage> = serde_json::from_value(raw["items"].clone()).unwrap();
    assert_eq!(items, view);
    assert_eq!(raw["items"][1].get("seq"), None);
}

#[test]
fn format_is_lowercase_and_defaults_to_openai() {
    assert_eq!(Format::default(), Format::Openai);
    for (format, name) in [
        (Format::Openai, "openai"),
        (Format::Anthropic, "anthropic"),
        (Format::Raw, "raw"),
    ] {
        assert_eq!(serde_json::to_value(format).unwrap(), name);
        assert_eq!(
            serde_json::from_value::<Format>(json!(name)).unwrap(),
            format
        );
    }
    let view = [system("Be brief."), user("hi")];
    assert_eq!(
        render(Format::Openai, &view),
        json!({"messages": [{"role": "system", "content": "Be brief."},
            {"role": "user", "content": "hi"}]})
    );
    assert_eq!(
        render(Format::Anthropic, &view),
        json!({"system": "Be brief.", "messages": [{"role": "user",
            "content": [{"type": "text", "text": "hi"}]}]})
    );
    let raw = render(Format::Raw, &view);
    assert_eq!(raw["items"][1]["content"], "hi");
    assert_eq!(raw["items"][1]["role"], "user");
}

/// One step of a random session, as the engine could hand it over.
#[derive(Debug, Clone)]
enum Step {
    User,
    Note,
    AssistantText,
    Calls {
        count: usize,
        with_text: bool,
        arguments: u8,
    },
    Result {
        pick: prop::sample::Index,
        is_error: bool,
    },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        2 => Just(Step::User),
        1 => Just(Step::Note),
        1 => Just(Step::AssistantText),
        2 => (1..=3usize, any::<bool>(), 0..4u8).prop_map(|(count, with_text, arguments)| {
            Step::Calls { count, with_text, arguments }
        }),
        4 => (any::<prop::sample::Index>(), any::<bool>())
            .prop_map(|(pick, is_error)| Step::Result { pick, is_error }),
    ]
}

/// Few ids, so that ids are often reused once answered.
const CALL_IDS: [&str; 4] = ["call_a", "call_b", "call_c", "call_d"];

/// A view that keeps the engine's contract: system prompts, maybe a summary, then the steps,
/// each result after its call, and every call answered by the end.
fn view_of(systems: usize, with_summary: bool, steps: &[Step]) -> Vec<ViewMessage<'static>> {
    let mut view: Vec<ViewMessage<'static>> = (0..systems)
        .map(|n| system(&format!("system prompt {n}")))
        .collect();
    if with_summary {
        view.push(summary("summary of earlier work"));
    }
    let mut unanswered: Vec<&str> = Vec::new();
    for (n, step) in steps.iter().enumerate() {
        match step {
            Step::User => view.push(user(&format!("user message {n}"))),
            Step::Note => view.push(user(&format!("[note] decision {n}"))),
            Step::AssistantText => view.push(assistant(&format!("assistant reply {n}"))),
            Step::Calls {
                count,
                with_text,
                arguments,
            } => {
                let free = CALL_IDS.iter().filter(|id| !unanswered.contains(id));
                let ids: Vec<&str> = free.take(*count).copied().collect();
                if ids.is_empty() {
                    continue;
                }
                unanswered.extend(&ids);
                let arguments = |id: &str| match arguments {
                    0 => json!({"step": n, "id": id}),
                    1 => json!(format!("{{\"step\": {n}}}")),
                    2 => json!(format!("not json {n}")),
                    _ => json!(""),
                };
                let content = if *with_text {
                    format!("assistant calls {n}")
                } else {
                    String::new()
                };
                view.push(ViewMessage {
                    tool_calls: ids
                        .iter()
                        .map(|id| call(id, arguments(id)))
                        .collect::<Vec<_>>()
                        .into(),
                    ..assistant(&content)
                });
            }
            Step::Result { pick, is_error } => {
                if unanswered.is_empty() {
                    continue;
                }
                let id = unanswered.remove(pick.index(unanswered.len()));
                let content = format!("result {n} of {id}");
                view.push(ViewMessage {
                    is_error: *is_error,
                    ..result(id, &content)
                });
            }
        }
    }
    // The engine inserts placeholder results for calls still open at the end of the view.
    while let Some(id) = unanswered.pop() {
        view.push(result(id, &format!("placeholder for {id}")));
    }
    view
}

fn strings_in<'a>(value: &'a Value, found: &mut Vec<&'a str>) {
    match value {
        Value::String(s) => found.push(s),
        Value::Array(items) => items.iter().for_each(|v| strings_in(v, found)),
        Value::Object(fields) => fields.values().for_each(|v| strings_in(v, found)),
        _ => {}
    }
}

fn assert_no_content_lost(view: &[ViewMessage], request: &Value) {
    let mut found = Vec::new();
    strings_in(request, &mut found);
    for message in view {
        assert!(
            found.iter().any(|s| s.contains(&*message.content)),
            "{:?} is missing from {request:#}",
            message.content
        );
    }
}

/// How many blocks or messages of `request` have `field` equal to `value`, at any depth.
fn count(request: &Value, field: &str, value: &str) -> usize {
    let here = usize::from(request.get(field).and_then(Value::as_str) == Some(value));
    let below: usize = match request {
        Value::Array(items) => items.iter().map(|v| count(v, field, value)).sum(),
        Value::Object(fields) => fields.values().map(|v| count(v, field, value)).sum(),
        _ => 0,
    };
    here + below
}

proptest! {
    #[test]
    fn every_view_renders_as_a_valid_request_that_loses_no_content(
        systems in 0..3usize,
        with_summary in any::<bool>(),
        steps in prop::collection::vec(step(), 0..40),
    ) {
        let view = view_of(systems, with_summary, &steps);
        // Every result stays a result: none shown as text, no placeholder added.
        let results = view.iter().filter(|m| m.role == Role::Tool).count();

        let openai = render_openai(&view);
        prop_assert_eq!(validate_openai(&openai), Ok(()), "{:#}", openai);
        assert_no_content_lost(&view, &openai);
        prop_assert_eq!(count(&openai, "role", "tool"), results);

        let anthropic = render_anthropic(&view);
        prop_assert_eq!(validate_anthropic(&anthropic), Ok(()), "{:#}", anthropic);
        assert_no_content_lost(&view, &anthropic);
        prop_assert_eq!(count(&anthropic, "type", "tool_result"), results);
    }

    /// A view written after an earlier one (a prefix of it, as between compactions that do
    /// not act), some of its messages since reduced, is exactly the view rendered afresh.
    #[test]
    fn views_written_with_reused_parts_are_the_views_rendered(
        systems in 0..3usize,
        with_summary in any::<bool>(),
        steps in prop::collection::vec(step(), 0..40),
        earlier in any::<prop::sample::Index>(),
        reduced in prop::collection::vec(any::<bool>(), 0..50),
    ) {
        let mut view = view_of(systems, with_summary, &steps);
        for (i, m) in view.iter_mut().enumerate() {
            m.seq = m.seq.map(|_| i as i64 + 1);
        }
        let earlier = view[..earlier.index(view.len() + 1)].to_vec();
        for (i, m) in view.iter_mut().enumerate() {
            if m.seq.is_some() && reduced.get(i).copied().unwrap_or(false) {
                m.content = format!("[preview {i}]").into();
                m.projection = Projection::Preview;
            }
        }
        for format in [Format::Openai, Format::Anthropic, Format::Raw] {
            let mut fragments = Fragments::default();
            for v in [&earlier, &view] {
                let mut written = Vec::new();
                write_view(format, v, &mut fragments, &mut written).unwrap();
                let fresh = serde_json::to_vec(&rendered(format, v)).unwrap();
                prop_assert_eq!(
                    String::from_utf8(written).unwrap(),
                    String::from_utf8(fresh).unwrap(),
                    "{:?}", format
                );
            }
        }
    }
}
