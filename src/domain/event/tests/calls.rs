//! Tool calls of each kind: what their arguments hold, and what is refused.

use super::*;

/// A freeform tool's call is taken with its input as `{"input": text}`, and refused, naming
/// the field, with arguments of any other shape; a function call's kind is left unsaid.
#[test]
fn a_custom_call_holds_its_input_as_text() {
    let custom = |arguments: Value| {
        json!({"type": "message", "role": "assistant",
            "tool_calls": [{"id": "c1", "name": "apply_patch", "kind": "custom", "arguments": arguments}]})
    };
    let new = validate(custom(json!({"input": "*** Begin Patch\n"}))).expect("valid");
    let EventBody::Message(message) = &new.body else {
        panic!("a message")
    };
    assert_eq!(message.tool_calls[0].kind, CallKind::Custom);
    assert_eq!(message.tool_calls[0].custom_input(), "*** Begin Patch\n");
    let stored = serde_json::to_value(&message.tool_calls[0]).unwrap();
    assert_eq!(stored["kind"], "custom");
    for wrong in [
        json!({"patch": "x"}),
        json!({"input": 3}),
        json!("*** Begin Patch"),
    ] {
        assert_eq!(fields(custom(wrong)), ["tool_calls[0].arguments"]);
    }
    let function = validate(json!({"type": "message", "role": "assistant",
        "tool_calls": [{"id": "c1", "name": "ls", "arguments": "{}"}]}))
    .expect("valid");
    let EventBody::Message(message) = &function.body else {
        panic!("a message")
    };
    let stored = serde_json::to_value(&message.tool_calls[0]).unwrap();
    assert!(stored.get("kind").is_none(), "{stored}");
}

/// A call of OpenAI's built-in shell or apply_patch tool holds its action or operation, and is
/// refused, naming the field, with arguments that are neither.
#[test]
fn a_shell_or_apply_patch_call_holds_its_action_or_operation() {
    let call = |kind: &str, arguments: Value| {
        json!({"type": "message", "role": "assistant",
            "tool_calls": [{"id": "c1", "name": kind, "kind": kind, "arguments": arguments.to_string()}]})
    };
    for (kind, arguments) in [
        (
            "shell",
            json!({"commands": ["ls", "cargo test"], "timeout_ms": 1000}),
        ),
        (
            "apply_patch",
            json!({"type": "update_file", "path": "src/a.rs", "diff": "@@\n-a\n+b\n"}),
        ),
        (
            "apply_patch",
            json!({"type": "delete_file", "path": "src/b.rs"}),
        ),
    ] {
        let new = validate(call(kind, arguments.clone())).expect("valid");
        let stored = serde_json::to_value(&new.body.tool_calls()[0]).unwrap();
        assert_eq!(stored["kind"], kind);
        assert_eq!(*new.body.tool_calls()[0].arguments_value(), arguments);
    }
    for (kind, wrong) in [
        ("shell", json!({"command": "ls"})),
        ("shell", json!({"commands": []})),
        ("shell", json!({"commands": [["ls"]]})),
        (
            "apply_patch",
            json!({"type": "update_file", "path": "src/a.rs"}),
        ),
        (
            "apply_patch",
            json!({"type": "rename_file", "path": "src/a.rs", "diff": ""}),
        ),
        ("apply_patch", json!({"diff": "@@"})),
    ] {
        assert_eq!(
            fields(call(kind, wrong)),
            ["tool_calls[0].arguments"],
            "{kind}"
        );
    }
}
