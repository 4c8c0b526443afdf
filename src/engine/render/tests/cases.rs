//! Hand-made views, one per situation a renderer meets, with the shape each provider gets;
//! how results pair with calls; input outside the engine's contract; the formats.

use serde_json::json;

use super::*;
use crate::domain::event::CallKind;
use crate::engine::validate::{validate_anthropic, validate_openai, validate_responses};

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
            // A provider takes an id once a request: the later call goes by another.
            openai: &[
                "user",
                "assistant: c1",
                "tool: c1",
                "assistant: c1_2 c2",
                "tool: c1_2",
                "tool: c2",
                "user",
            ],
            anthropic: &[
                "user: text",
                "assistant: tool_use(c1)",
                "user: tool_result(c1)",
                "assistant: text tool_use(c1_2) tool_use(c2)",
                "user: tool_result(c1_2) tool_result(c2) text",
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
    // The second call goes by an id of its own, and so does the result that answers it.
    assert_eq!(openai["messages"][3]["tool_calls"][0]["id"], "c1_2");
    assert_eq!(openai["messages"][4]["tool_call_id"], "c1_2");
    assert_eq!(validate_openai(&openai), Ok(()), "{openai:#}");
    let anthropic = render_anthropic(&view);
    assert_eq!(validate_anthropic(&anthropic), Ok(()), "{anthropic:#}");
    let responses = render_responses(&view);
    assert_eq!(validate_responses(&responses), Ok(()), "{responses:#}");
}

#[test]
fn a_reused_id_stays_within_the_length_openai_takes() {
    let id = "call_0123456789abcdefghijklmnopqrstuvwxy";
    assert_eq!(id.len(), 40);
    let view = vec![
        user("go"),
        calls("", &[id]),
        result(id, "first"),
        calls("", &[id]),
        result(id, "second"),
    ];
    let openai = render_openai(&view);
    let renamed = openai["messages"][3]["tool_calls"][0]["id"]
        .as_str()
        .unwrap();
    assert_eq!(renamed, "call_0123456789abcdefghijklmnopqrstuvw_2");
    assert_eq!(openai["messages"][4]["tool_call_id"], renamed);
}

#[test]
fn a_reused_call_id_is_sent_once_a_request_and_the_view_still_extends_the_previous() {
    let before = vec![user("go"), calls("", &["c1"]), result("c1", "first")];
    let mut view = before.clone();
    // `c1_2` is a call of the view too, so the reused id goes by `c1_3`.
    view.extend([calls("", &["c1_2"]), result("c1_2", "taken")]);
    view.extend([calls("", &["c1"]), result("c1", "second")]);
    let responses = render_responses(&view);
    assert_eq!(validate_responses(&responses), Ok(()), "{responses:#}");
    let ids: Vec<&str> = responses["input"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|item| item["call_id"].as_str())
        .collect();
    assert_eq!(ids, ["c1", "c1", "c1_2", "c1_2", "c1_3", "c1_3"]);
    let anthropic = render_anthropic(&view);
    assert_eq!(validate_anthropic(&anthropic), Ok(()), "{anthropic:#}");
    assert_eq!(anthropic["messages"][5]["content"][0]["id"], "c1_3");
    assert_eq!(anthropic["messages"][6]["content"][0]["content"], "second");
    // The messages before the reuse render as they did without it.
    let earlier = render_anthropic(&before);
    let messages = |request: &Value| {
        let request = without_breakpoints(request.clone());
        request["messages"].as_array().unwrap()[..3].to_vec()
    };
    assert_eq!(messages(&anthropic), messages(&earlier));
    // ctxd's own messages keep the ids the client gave.
    let raw = render(Format::Raw, &view);
    assert_eq!(raw["items"][5]["tool_calls"][0]["id"], "c1");
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
    assert_eq!(anthropic["system"][0]["text"], "a late system message");
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
        json!({"system": [{"type": "text", "text": "Be brief.",
            "cache_control": {"type": "ephemeral"}}], "messages": [{"role": "user",
            "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}]}]})
    );
    let raw = render(Format::Raw, &view);
    assert_eq!(raw["items"][1]["content"], "hi");
    assert_eq!(raw["items"][1]["role"], "user");
}

/// A freeform tool's call goes to each provider as the call it takes: a custom tool call (its
/// input the text) in Responses and in chat, a `tool_use` with the input object for Anthropic.
#[test]
fn a_freeform_call_renders_as_each_providers_custom_call() {
    let patch = "*** Begin Patch\n*** Update File: src/app.ts\n@@\n-a\n+b\n*** End Patch\n";
    let view = vec![
        user("patch it"),
        ViewMessage {
            tool_calls: vec![ToolCall::custom("p1".into(), "apply_patch".into(), patch)].into(),
            ..assistant("")
        },
        result("p1", "Success. Updated the following files:\nM src/app.ts"),
    ];
    let responses = render_responses(&view);
    assert_eq!(validate_responses(&responses), Ok(()), "{responses:#}");
    assert_eq!(
        responses["input"][1],
        json!({"type": "custom_tool_call", "call_id": "p1", "name": "apply_patch", "input": patch})
    );
    assert_eq!(responses["input"][2]["type"], "custom_tool_call_output");
    assert_eq!(responses["input"][2]["call_id"], "p1");
    let openai = render_openai(&view);
    assert_eq!(validate_openai(&openai), Ok(()), "{openai:#}");
    assert_eq!(
        openai["messages"][1]["tool_calls"][0],
        json!({"id": "p1", "type": "custom", "custom": {"name": "apply_patch", "input": patch}})
    );
    let anthropic = render_anthropic(&view);
    assert_eq!(validate_anthropic(&anthropic), Ok(()), "{anthropic:#}");
    assert_eq!(
        anthropic["messages"][1]["content"][0]["input"],
        json!({"input": patch})
    );
    // An output answers a call of its own kind only.
    let mut wrong = responses.clone();
    wrong["input"][2]["type"] = json!("function_call_output");
    let refused = validate_responses(&wrong).unwrap_err();
    assert!(refused.contains("of its kind"), "{refused}");
}

#[test]
fn openai_shell_and_apply_patch_calls_render_as_their_own_items_in_responses() {
    let call = |id: &str, kind, arguments: Value| ToolCall {
        id: id.into(),
        name: if kind == CallKind::Shell {
            "shell"
        } else {
            "apply_patch"
        }
        .into(),
        arguments: Value::String(arguments.to_string()),
        kind,
    };
    let action = json!({"commands": ["cargo test"], "timeout_ms": 60000});
    let operation = json!({"type": "update_file", "path": "src/a.rs", "diff": "@@\n-a\n+b\n"});
    // An archived call keeps its short arguments and a note in place of the rest.
    let note = "1200 characters archived; recall observation://7?offset=20";
    let archived = json!({"timeout_ms": 1000, "archived_arguments": note});
    let view = vec![
        user("fix it"),
        ViewMessage {
            tool_calls: vec![
                call("s1", CallKind::Shell, action.clone()),
                call("p1", CallKind::ApplyPatch, operation.clone()),
                call("s2", CallKind::Shell, archived),
            ]
            .into(),
            ..assistant("")
        },
        error_result(
            "s1",
            "running 3 tests\nerror[E0425]: cannot find value `x`\n[exit code 101]",
        ),
        error_result("p1", "patch does not apply"),
        result("s2", "ok"),
    ];
    let responses = render_responses(&view);
    assert_eq!(validate_responses(&responses), Ok(()), "{responses:#}");
    let input = &responses["input"];
    assert_eq!(
        input[1],
        json!({"type": "shell_call", "call_id": "s1", "action": action, "status": "completed"})
    );
    assert_eq!(
        input[2],
        json!({"type": "apply_patch_call", "call_id": "p1", "operation": operation, "status": "completed"})
    );
    assert_eq!(input[3]["action"]["commands"], json!([format!("# {note}")]));
    // How a command ended goes back as the outcome, not as a line of its output.
    assert_eq!(
        input[4]["output"],
        json!([{"stdout": "running 3 tests\nerror[E0425]: cannot find value `x`", "stderr": "",
                "outcome": {"type": "exit", "exit_code": 101}}])
    );
    assert_eq!(
        input[5],
        json!({"type": "apply_patch_call_output", "call_id": "p1", "status": "failed",
               "output": "patch does not apply"})
    );
    assert_eq!(
        input[6]["output"][0]["outcome"],
        json!({"type": "exit", "exit_code": 0})
    );
    // Chat and Anthropic have no such tools: a function call or tool_use taking the action.
    let openai = render_openai(&view);
    assert_eq!(validate_openai(&openai), Ok(()), "{openai:#}");
    let function = &openai["messages"][1]["tool_calls"][0]["function"];
    assert_eq!(function["name"], "shell");
    assert_eq!(
        serde_json::from_str::<Value>(function["arguments"].as_str().unwrap()).unwrap(),
        action
    );
    let anthropic = render_anthropic(&view);
    assert_eq!(validate_anthropic(&anthropic), Ok(()), "{anthropic:#}");
    assert_eq!(anthropic["messages"][1]["content"][1]["input"], operation);
    // An output answers a call of its own kind only.
    let mut wrong = responses.clone();
    wrong["input"][5]["type"] = json!("function_call_output");
    let refused = validate_responses(&wrong).unwrap_err();
    assert!(refused.contains("of its kind"), "{refused}");
}
