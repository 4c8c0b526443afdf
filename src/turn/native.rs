//! Provider-native messages read as ctxd events: OpenAI chat `messages`, Anthropic `system`
//! and `messages` (tool_use and tool_result blocks become tool calls and tool results), and
//! OpenAI Responses `input` items (a turn's reasoning, text and tool calls become one
//! assistant message).
//!
//! Reading is deterministic, so two lists that read to the same events say the same thing:
//! that is how a turn tells what is new (see `matching`). Keys a provider's SDK adds that say
//! nothing to the model (`annotations`, `cache_control`, nulls) are ignored; parts ctxd cannot
//! carry are refused by name.

use std::collections::HashMap;

use serde_json::{Map, Value};

use crate::domain::event::{
    CallKind, ContentInput, EventInput, EventType, NewEvent, Role, ShellOutcome, ToolCall,
};
use crate::domain::FieldError;
use crate::engine::render::Format;

/// An event read from the request, with the place it came from.
#[derive(Debug, Clone)]
pub struct Native {
    /// Index in the request's `messages` (`input`) list.
    pub origin: usize,
    pub event: NewEvent,
}

/// What a request's conversation reads as: the system prompt given apart (Anthropic), and the
/// events of `messages`, in order.
#[derive(Debug, Default)]
pub struct Read {
    pub system: Option<NewEvent>,
    pub events: Vec<Native>,
}

/// Reads `messages` (and Anthropic's `system`) in `format`. Errors name `messages[i]...`.
pub fn read(
    format: Format,
    system: Option<&Value>,
    messages: &[Value],
) -> Result<Read, Vec<FieldError>> {
    let mut reader = Reader::default();
    if let Some(system) = system.filter(|s| !s.is_null()) {
        if format != Format::Anthropic {
            reader.fail(
                "system",
                "only the anthropic format takes `system`; send a system message",
            );
        } else {
            reader.read_anthropic_system(system);
        }
    }
    for (i, message) in messages.iter().enumerate() {
        let Value::Object(message) = message else {
            reader.fail(format!("messages[{i}]"), "must be an object");
            continue;
        };
        match format {
            Format::Openai | Format::Raw => reader.read_chat(i, message),
            Format::Anthropic => reader.read_anthropic(i, message),
            Format::OpenaiResponses => reader.read_responses_item(i, message),
        }
    }
    reader.flush_assistant();
    if reader.errors.is_empty() {
        Ok(Read {
            system: reader.system,
            events: reader.events,
        })
    } else {
        Err(reader.errors)
    }
}

#[derive(Default)]
struct Reader {
    system: Option<NewEvent>,
    events: Vec<Native>,
    errors: Vec<FieldError>,
    /// The names of the calls issued so far, by id: a result carries its call's name.
    call_names: HashMap<String, String>,
    /// A Responses assistant turn being gathered from its items.
    assistant: Option<Draft>,
}

/// An assistant turn read from several Responses items.
struct Draft {
    origin: usize,
    parts: Vec<Value>,
    calls: Vec<ToolCall>,
    has_text: bool,
}

fn message_input(role: Role) -> EventInput {
    EventInput {
        id: None,
        kind: EventType::Message,
        role: Some(role),
        content: None,
        tool_calls: None,
        tool_call_id: None,
        name: None,
        is_error: None,
        episode_kind: None,
        dependencies: None,
        conclusion: None,
        pinned: None,
        metadata: None,
    }
}

/// Parts as content: one text part is held as plain text.
fn content_of(parts: Vec<Value>) -> Option<ContentInput> {
    if let [only] = parts.as_slice() {
        let kind = only.get("type").and_then(Value::as_str);
        if matches!(kind, Some("text" | "input_text" | "output_text")) {
            if let Some(text) = only.get("text").and_then(Value::as_str) {
                return Some(ContentInput::Text(text.to_owned()));
            }
        }
    }
    (!parts.is_empty()).then_some(ContentInput::Parts(parts))
}

/// A `content` that is a string, null or an array of parts.
fn content_value(value: Option<&Value>) -> Result<Option<ContentInput>, &'static str> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(ContentInput::Text(text.clone()))),
        Some(Value::Array(parts)) => Ok(content_of(parts.clone())),
        Some(_) => Err("must be a string, null or an array of parts"),
    }
}

impl Reader {
    fn fail(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.errors.push(FieldError::new(field, message));
    }

    /// Validates `input` as the event read from `messages[origin]` and keeps it.
    fn push(&mut self, origin: usize, input: EventInput) {
        match input.validate(origin) {
            Ok(event) => {
                for call in event.body.tool_calls() {
                    self.call_names.insert(call.id.clone(), call.name.clone());
                }
                self.events.push(Native { origin, event });
            }
            Err(errors) => self.errors.extend(
                errors
                    .into_iter()
                    .map(|e| FieldError::new(format!("messages[{origin}].{}", e.field), e.message)),
            ),
        }
    }

    fn result_name(&self, call_id: Option<&str>) -> Option<String> {
        call_id.and_then(|id| self.call_names.get(id).cloned())
    }

    // --- OpenAI chat ---------------------------------------------------------------------

    fn read_chat(&mut self, i: usize, message: &Map<String, Value>) {
        let at = format!("messages[{i}]");
        let role = match message.get("role").and_then(Value::as_str) {
            Some("system" | "developer") => Role::System,
            Some("user") => Role::User,
            Some("assistant") => Role::Assistant,
            Some("tool") => Role::Tool,
            other => {
                return self.fail(
                    format!("{at}.role"),
                    format!(
                        "{other:?} is not a chat role: system, developer, user, assistant or tool"
                    ),
                )
            }
        };
        let mut input = message_input(role);
        match content_value(message.get("content")) {
            Ok(content) => input.content = content,
            Err(e) => return self.fail(format!("{at}.content"), e),
        }
        if input.content.is_none() {
            if let Some(Value::String(refusal)) = message.get("refusal") {
                input.content = Some(ContentInput::Text(refusal.clone()));
            }
        }
        match role {
            Role::Assistant => match message.get("tool_calls") {
                None | Some(Value::Null) => {}
                Some(Value::Array(calls)) if !calls.is_empty() => {
                    let mut read = Vec::with_capacity(calls.len());
                    for (k, call) in calls.iter().enumerate() {
                        if call.get("type").and_then(Value::as_str) == Some("custom") {
                            let custom = call.get("custom");
                            let field = |key| str_of(custom.and_then(|c| c.get(key)));
                            let id = str_of(call.get("id")).to_owned();
                            read.push(ToolCall::custom(
                                id,
                                field("name").to_owned(),
                                field("input"),
                            ));
                            continue;
                        }
                        let function = call.get("function");
                        let arguments = function.and_then(|f| f.get("arguments"));
                        let arguments = match arguments {
                            Some(a @ (Value::String(_) | Value::Object(_))) => a.clone(),
                            None | Some(Value::Null) => Value::String(String::new()),
                            Some(_) => {
                                self.fail(
                                    format!("{at}.tool_calls[{k}].function.arguments"),
                                    "must be a JSON string",
                                );
                                continue;
                            }
                        };
                        read.push(ToolCall {
                            id: str_of(call.get("id")).to_owned(),
                            name: str_of(function.and_then(|f| f.get("name"))).to_owned(),
                            arguments,
                            kind: CallKind::Function,
                        });
                    }
                    input.tool_calls = Some(read);
                }
                Some(Value::Array(_)) => {}
                Some(_) => return self.fail(format!("{at}.tool_calls"), "must be an array"),
            },
            Role::Tool => {
                let id = message.get("tool_call_id").and_then(Value::as_str);
                input.tool_call_id = id.map(str::to_owned);
                input.name = self.result_name(id);
            }
            _ => {}
        }
        if matches!(role, Role::User | Role::Assistant) {
            if let Some(Value::String(name)) = message.get("name") {
                input.name = Some(name.clone());
            }
        }
        self.push(i, input);
    }

    // --- Anthropic -----------------------------------------------------------------------

    fn read_anthropic_system(&mut self, system: &Value) {
        let text = match system {
            Value::String(text) => text.clone(),
            Value::Array(blocks) => {
                let texts: Option<Vec<&str>> = blocks
                    .iter()
                    .map(|b| b.get("text").and_then(Value::as_str))
                    .collect();
                match texts {
                    Some(texts) => texts.join("\n\n"),
                    None => return self.fail("system", "must be a string or text blocks"),
                }
            }
            _ => return self.fail("system", "must be a string or text blocks"),
        };
        if text.trim().is_empty() {
            return;
        }
        let mut input = message_input(Role::System);
        input.content = Some(ContentInput::Text(text));
        match input.validate(0) {
            Ok(event) => self.system = Some(event),
            Err(errors) => self.errors.extend(
                errors
                    .into_iter()
                    .map(|e| FieldError::new(format!("system.{}", e.field), e.message)),
            ),
        }
    }

    fn read_anthropic(&mut self, i: usize, message: &Map<String, Value>) {
        let at = format!("messages[{i}]");
        let role = match message.get("role").and_then(Value::as_str) {
            Some("user") => Role::User,
            Some("assistant") => Role::Assistant,
            other => {
                return self.fail(
                    format!("{at}.role"),
                    format!("{other:?}: Anthropic messages are user or assistant (the system prompt goes in `system`)"),
                )
            }
        };
        let blocks = match message.get("content") {
            Some(Value::String(text)) => {
                let mut input = message_input(role);
                input.content = Some(ContentInput::Text(text.clone()));
                return self.push(i, input);
            }
            Some(Value::Array(blocks)) => blocks,
            _ => {
                return self.fail(
                    format!("{at}.content"),
                    "must be a string or an array of blocks",
                )
            }
        };
        let mut parts = Vec::new();
        let mut calls = Vec::new();
        for (k, block) in blocks.iter().enumerate() {
            let kind = block
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or_default();
            match (role, kind) {
                (Role::Assistant, "tool_use") => {
                    let field = |key| block.get(key).and_then(Value::as_str).unwrap_or_default();
                    calls.push(ToolCall {
                        id: field("id").to_owned(),
                        name: field("name").to_owned(),
                        arguments: block
                            .get("input")
                            .cloned()
                            .unwrap_or(Value::Object(Map::new())),
                        kind: CallKind::Function,
                    });
                }
                (Role::User, "tool_result") => {
                    let id = block.get("tool_use_id").and_then(Value::as_str);
                    let mut input = message_input(Role::Tool);
                    input.tool_call_id = id.map(str::to_owned);
                    input.name = self.result_name(id);
                    input.is_error = Some(
                        block
                            .get("is_error")
                            .and_then(Value::as_bool)
                            .unwrap_or(false),
                    );
                    match content_value(block.get("content")) {
                        Ok(content) => input.content = content,
                        Err(e) => return self.fail(format!("{at}.content[{k}].content"), e),
                    }
                    self.push(i, input);
                }
                (_, "tool_use" | "tool_result") => {
                    return self.fail(
                        format!("{at}.content[{k}]"),
                        format!(
                            "a {kind} block does not belong in a {} message",
                            role.as_str()
                        ),
                    )
                }
                _ => parts.push(without_cache_control(block)),
            }
        }
        if parts.is_empty() && calls.is_empty() {
            return;
        }
        let mut input = message_input(role);
        input.content = content_of(parts);
        input.tool_calls = (!calls.is_empty()).then_some(calls);
        self.push(i, input);
    }

    // --- OpenAI Responses ------------------------------------------------------------------

    fn read_responses_item(&mut self, i: usize, item: &Map<String, Value>) {
        let at = format!("messages[{i}]");
        let kind = item
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("message");
        match kind {
            "message" => {
                let role = match item.get("role").and_then(Value::as_str) {
                    Some("system" | "developer") => Role::System,
                    Some("user") => Role::User,
                    Some("assistant") => Role::Assistant,
                    other => {
                        return self.fail(
                            format!("{at}.role"),
                            format!("{other:?}: system, developer, user or assistant"),
                        )
                    }
                };
                let parts = match item.get("content") {
                    Some(Value::String(text)) => vec![serde_json::json!({"type": "text", "text": text})],
                    Some(Value::Array(parts)) => parts.clone(),
                    _ => return self.fail(format!("{at}.content"), "must be a string or an array of parts"),
                };
                if role == Role::Assistant {
                    let draft = self.draft(i, true);
                    draft.parts.extend(parts);
                    draft.has_text = true;
                    return;
                }
                self.flush_assistant();
                let mut input = message_input(role);
                input.content = content_of(parts);
                self.push(i, input);
            }
            "reasoning" => {
                let draft = self.draft(i, true);
                draft.parts.push(Value::Object(item.clone()));
            }
            "function_call" => {
                let field = |key| item.get(key).and_then(Value::as_str).unwrap_or_default();
                let call = ToolCall {
                    id: field("call_id").to_owned(),
                    name: field("name").to_owned(),
                    arguments: item.get("arguments").cloned().unwrap_or(Value::String(String::new())),
                    kind: CallKind::Function,
                };
                self.draft(i, false).calls.push(call);
            }
            "custom_tool_call" => {
                let field = |key| item.get(key).and_then(Value::as_str).unwrap_or_default();
                let id = field("call_id").to_owned();
                let call = ToolCall::custom(id, field("name").to_owned(), field("input"));
                self.draft(i, false).calls.push(call);
            }
            "shell_call" | "apply_patch_call" => {
                let (name, key, kind) = match kind {
                    "shell_call" => ("shell", "action", CallKind::Shell),
                    _ => ("apply_patch", "operation", CallKind::ApplyPatch),
                };
                let call = ToolCall {
                    id: str_of(item.get("call_id")).to_owned(),
                    name: name.to_owned(),
                    arguments: Value::String(item.get(key).cloned().unwrap_or_default().to_string()),
                    kind,
                };
                self.draft(i, false).calls.push(call);
            }
            "function_call_output"
            | "custom_tool_call_output"
            | "shell_call_output"
            | "apply_patch_call_output" => {
                // The content and whether it failed: a built-in tool's output says both.
                let read = match kind {
                    "shell_call_output" => shell_output(item.get("output")),
                    "apply_patch_call_output" => patch_output(item),
                    _ => content_value(item.get("output"))
                        .map(|content| (content, None))
                        .map_err(|e| ("output".to_owned(), e)),
                };
                let (content, is_error) = match read {
                    Ok(read) => read,
                    Err((field, e)) => return self.fail(format!("{at}.{field}"), e),
                };
                self.flush_assistant();
                let id = item.get("call_id").and_then(Value::as_str);
                let mut input = message_input(Role::Tool);
                input.tool_call_id = id.map(str::to_owned);
                input.name = self.result_name(id);
                input.content = content;
                input.is_error = is_error;
                self.push(i, input);
            }
            other => self.fail(
                format!("{at}.type"),
                format!("`{other}` items are not supported: send message, reasoning, function_call, custom_tool_call, shell_call and apply_patch_call items and their outputs"),
            ),
        }
    }

    /// The assistant turn item `i` belongs to: the one being gathered, unless `starts_turn`
    /// and that one already has text or calls (then a new turn starts).
    fn draft(&mut self, i: usize, starts_turn: bool) -> &mut Draft {
        let done = self
            .assistant
            .as_ref()
            .is_some_and(|d| starts_turn && (d.has_text || !d.calls.is_empty()));
        if done {
            self.flush_assistant();
        }
        self.assistant.get_or_insert(Draft {
            origin: i,
            parts: Vec::new(),
            calls: Vec::new(),
            has_text: false,
        })
    }

    fn flush_assistant(&mut self) {
        let Some(draft) = self.assistant.take() else {
            return;
        };
        let mut input = message_input(Role::Assistant);
        input.content = content_of(draft.parts);
        input.tool_calls = (!draft.calls.is_empty()).then_some(draft.calls);
        self.push(draft.origin, input);
    }
}

/// A `shell_call_output`'s `output` as one text ([`ShellOutcome::output_text`]) and whether a
/// command failed; an output sent as text is taken as it is.
fn shell_output(output: Option<&Value>) -> ReadOutput {
    match output {
        Some(Value::Array(chunks)) => ShellOutcome::output_text(chunks).map(said),
        // Some clients send the output already as text.
        Some(Value::String(text)) => Ok(said((text.clone(), false))),
        _ => Err((
            "output".into(),
            "must be an array of {stdout, stderr, outcome}, or text",
        )),
    }
}

/// An `apply_patch_call_output`'s text and whether the patch failed.
fn patch_output(item: &Map<String, Value>) -> ReadOutput {
    let failed = match item.get("status").and_then(Value::as_str) {
        Some("completed") => false,
        Some("failed") => true,
        _ => return Err(("status".into(), "must be \"completed\" or \"failed\"")),
    };
    match item.get("output") {
        None | Some(Value::Null) => Ok(said((String::new(), failed))),
        Some(Value::String(text)) => Ok(said((text.clone(), failed))),
        Some(_) => Err(("output".into(), "must be text or null")),
    }
}

/// A tool output as read: its content and whether it failed (unsaid by a function's output),
/// or the field that is wrong and why.
type ReadOutput = Result<(Option<ContentInput>, Option<bool>), (String, &'static str)>;

/// A built-in tool's output text and whether it failed, as read.
fn said((text, failed): (String, bool)) -> (Option<ContentInput>, Option<bool>) {
    (Some(ContentInput::Text(text)), Some(failed))
}

fn str_of(value: Option<&Value>) -> &str {
    value.and_then(Value::as_str).unwrap_or_default()
}

/// A block without Anthropic's `cache_control` (ctxd decides what it sends).
fn without_cache_control(block: &Value) -> Value {
    match block {
        Value::Object(map) if map.contains_key("cache_control") => {
            let mut map = map.clone();
            map.remove("cache_control");
            Value::Object(map)
        }
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::domain::event::EventBody;

    fn roles(read: &Read) -> Vec<String> {
        read.events
            .iter()
            .map(|n| {
                let EventBody::Message(m) = &n.event.body else {
                    panic!("messages only")
                };
                format!("{}@{}", m.role.as_str(), n.origin)
            })
            .collect()
    }

    #[test]
    fn anthropic_blocks_become_calls_and_results() {
        let messages = [
            json!({"role": "user", "content": "Fix it"}),
            json!({"role": "assistant", "content": [
                {"type": "thinking", "thinking": "Look first.", "signature": "sig"},
                {"type": "tool_use", "id": "t1", "name": "bash", "input": {"cmd": "ls"}},
                {"type": "tool_use", "id": "t2", "name": "bash", "input": {"cmd": "pwd"}}]}),
            json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "a.rs"},
                {"type": "tool_result", "tool_use_id": "t2"},
                {"type": "text", "text": "and hurry", "cache_control": {"type": "ephemeral"}}]}),
        ];
        let read = read(Format::Anthropic, Some(&json!("Be brief.")), &messages).unwrap();
        assert!(read.system.is_some());
        assert_eq!(
            roles(&read),
            ["user@0", "assistant@1", "tool@2", "tool@2", "user@2"]
        );
        assert_eq!(read.events[2].event.body.name(), Some("bash"));
        assert_eq!(read.events[1].event.body.parts().len(), 1);
        assert_eq!(read.events[1].event.body.tool_calls().len(), 2);
    }

    #[test]
    fn a_responses_turn_is_one_assistant_message() {
        let items = [
            json!({"role": "user", "content": "Book it"}),
            json!({"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA"}),
            json!({"type": "function_call", "call_id": "c1", "name": "book", "arguments": "{}"}),
            json!({"type": "function_call_output", "call_id": "c1", "output": "done"}),
            json!({"type": "reasoning", "id": "rs_2", "summary": []}),
            json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Booked.", "annotations": []}]}),
            json!({"type": "reasoning", "id": "rs_3", "summary": []}),
            json!({"role": "assistant", "content": "Anything else?"}),
        ];
        let read = read(Format::OpenaiResponses, None, &items).unwrap();
        assert_eq!(
            roles(&read),
            [
                "user@0",
                "assistant@1",
                "tool@3",
                "assistant@4",
                "assistant@6"
            ]
        );
        assert_eq!(read.events[3].event.body.shown_text(), "Booked.");
    }

    #[test]
    fn chat_messages_read_as_they_are_and_errors_name_the_message() {
        let messages = [
            json!({"role": "system", "content": "Be brief."}),
            json!({"role": "user", "content": [{"type": "text", "text": "hi"}]}),
            json!({"role": "assistant", "content": null, "refusal": null,
                "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]}),
            json!({"role": "tool", "tool_call_id": "c1", "content": ""}),
        ];
        let read = read(Format::Openai, None, &messages).unwrap();
        assert_eq!(
            roles(&read),
            ["system@0", "user@1", "assistant@2", "tool@3"]
        );
        let broken = [
            json!({"role": "user", "content": [{"type": "input_audio"}]}),
            json!({"role": "robot"}),
        ];
        let errors = super::read(Format::Openai, None, &broken).unwrap_err();
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["messages[0].content[0].type", "messages[1].role"]);
    }

    #[test]
    fn openai_shell_and_apply_patch_items_read_as_calls_and_their_results() {
        let action = json!({"commands": ["ls", "cargo test"], "timeout_ms": 60000});
        let operation = json!({"type": "update_file", "path": "src/a.rs", "diff": "@@\n-a\n+b\n"});
        let items = [
            json!({"role": "user", "content": "Fix the test"}),
            json!({"type": "shell_call", "id": "sh_1", "call_id": "s1", "status": "completed", "action": action}),
            json!({"type": "apply_patch_call", "call_id": "p1", "status": "completed", "operation": operation}),
            json!({"type": "shell_call_output", "call_id": "s1", "max_output_length": 1000, "output": [
                {"stdout": "Cargo.toml\nsrc\n", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}},
                {"stdout": "", "stderr": "error[E0425]: cannot find value `x`\n",
                 "outcome": {"type": "exit", "exit_code": 101}}]}),
            json!({"type": "apply_patch_call_output", "call_id": "p1", "status": "failed", "output": "no such file"}),
        ];
        let read = read(Format::OpenaiResponses, None, &items).unwrap();
        assert_eq!(roles(&read), ["user@0", "assistant@1", "tool@3", "tool@4"]);
        let calls = read.events[1].event.body.tool_calls();
        assert_eq!(calls[0].kind, CallKind::Shell);
        assert_eq!(calls[0].name, "shell");
        assert_eq!(*calls[0].arguments_value(), action);
        assert_eq!(calls[1].kind, CallKind::ApplyPatch);
        assert_eq!(*calls[1].arguments_value(), operation);
        let EventBody::Message(shell) = &read.events[2].event.body else {
            panic!("a tool result")
        };
        // Each command's output, then how the failed one ended; the result is marked failed.
        assert_eq!(
            shell.content.text(),
            "Cargo.toml\nsrc\nerror[E0425]: cannot find value `x`\n[exit code 101]"
        );
        assert_eq!(
            (shell.is_error, shell.name.as_deref()),
            (Some(true), Some("shell"))
        );
        let EventBody::Message(patch) = &read.events[3].event.body else {
            panic!("a tool result")
        };
        assert_eq!(
            (patch.content.text(), patch.is_error),
            ("no such file", Some(true))
        );

        let broken = [
            json!({"type": "shell_call", "call_id": "s1", "action": {"commands": []}}),
            json!({"type": "shell_call_output", "call_id": "s1", "output": [{"stdout": "", "stderr": "", "outcome": {"type": "crash"}}]}),
            json!({"type": "apply_patch_call_output", "call_id": "p1", "status": "done"}),
            json!({"type": "local_shell_call", "call_id": "l1", "action": {"type": "exec", "command": ["ls"]}}),
        ];
        let errors = super::read(Format::OpenaiResponses, None, &broken).unwrap_err();
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "messages[1].output[0].outcome",
                "messages[2].status",
                "messages[3].type",
                "messages[0].tool_calls[0].arguments"
            ]
        );
    }
}
