//! What each provider's rules ask of a rendered request: error results, participant names,
//! arguments as strings or objects, system prompts.

use serde_json::json;

use super::super::anthropic::*;
use super::super::openai::*;
use super::*;
use crate::engine::validate::validate_anthropic;

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
    let anthropic = without_breakpoints(render_anthropic(&view));
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
    let anthropic = without_breakpoints(render_anthropic(&view));
    assert_eq!(
        anthropic,
        json!({
            "system": [{"type": "text", "text": "Be brief.\n\nUse British spelling."}],
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

/// Anthropic caches a prompt only up to a block marked with `cache_control`: a view marks the
/// last block of its last message, which the next view repeats, and its system prompt, which
/// a compaction keeps, and no other. The next view repeats this one but for the mark. A
/// thinking block takes none: the block before it does.
#[test]
fn anthropic_marks_the_last_block_for_the_prompt_cache() {
    let mut view = vec![
        system("Be brief."),
        user("go"),
        calls("", &["c1", "c2"]),
        result("c1", "a"),
        result("c2", "b"),
        assistant("Done?"),
        user("yes"),
        calls("", &["c3"]),
        result("c3", "c"),
    ];
    let anthropic = render_anthropic(&view);
    assert_eq!(validate_anthropic(&anthropic), Ok(()), "{anthropic:#}");
    let mut marked = Vec::new();
    for (m, message) in anthropic["messages"].as_array().unwrap().iter().enumerate() {
        for (b, block) in message["content"].as_array().unwrap().iter().enumerate() {
            if let Some(mark) = block.get("cache_control") {
                assert_eq!(*mark, json!({"type": "ephemeral"}));
                marked.push((m, b));
            }
        }
    }
    // user(go), assistant, user(results), assistant(Done?), user(yes), assistant, user(result).
    assert_eq!(marked, [(6, 0)], "{anthropic:#}");
    assert_eq!(
        anthropic["system"],
        json!([{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}])
    );

    view.extend([calls("", &["c4"]), result("c4", "d")]);
    let next = without_breakpoints(render_anthropic(&view));
    let before = without_breakpoints(anthropic);
    assert_eq!(next["system"], before["system"]);
    assert_eq!(
        next["messages"].as_array().unwrap()[..7],
        before["messages"].as_array().unwrap()[..]
    );

    let assistant_turn = |blocks: Vec<Block<'static>>| AnthropicMessage {
        role: "assistant",
        content: blocks.into_iter().map(Keyed::fresh).collect(),
    };
    let text = || Block::Text { text: "x".into() };
    let thought = || Block::Thinking {
        thinking: "hmm",
        signature: "s",
    };
    for (blocks, expected) in [
        (vec![text(), thought()], vec![true, false]),
        (vec![Block::RedactedThinking { data: "r" }], vec![false]),
    ] {
        let mut messages = vec![assistant_turn(vec![text()]), assistant_turn(blocks)];
        mark_breakpoints(&mut messages);
        let marks: Vec<Vec<bool>> = messages
            .iter()
            .map(|m| m.content.iter().map(|b| b.breakpoint).collect())
            .collect();
        assert_eq!(marks, [vec![false], expected]);
    }
}
