//! OpenAI Responses items read as chat messages: an `input` list as an agent sends it, or a
//! Codex CLI rollout (one `{type, payload}` row a line, the items in `response_item` rows; an
//! older rollout's items bare after a header line that holds the instructions).
//!
//! A turn's text and its calls (`function_call`, the freeform `custom_tool_call` such as
//! `apply_patch`, `local_shell_call`, the built-in `shell_call` and `apply_patch_call`) become
//! one assistant message; each output a tool message. Reasoning is left out, as thinking is
//! from other logs: its text is not sent back as context the way messages are. A developer message is the system's.

use serde_json::{json, Map, Value};

use crate::domain::event::ShellOutcome;

/// The rows of a rollout that carry no item the model was sent: the session's metadata, a
/// turn's settings, the UI's events (which repeat the messages), and the summary Codex wrote
/// when it compacted its own context (the turns it stands for are in the log before it).
const ROLLOUT_ROWS: [&str; 4] = ["session_meta", "turn_context", "event_msg", "compacted"];

/// Item types only the Responses API has (a `message` is told by its parts).
const ITEMS: [&str; 13] = [
    "function_call",
    "function_call_output",
    "custom_tool_call",
    "custom_tool_call_output",
    "local_shell_call",
    "local_shell_call_output",
    "shell_call",
    "shell_call_output",
    "apply_patch_call",
    "apply_patch_call_output",
    "reasoning",
    "web_search_call",
    "image_generation_call",
];

/// What a row of a Responses list or rollout is.
pub(super) enum Row {
    /// A Responses item (unwrapped from its rollout row).
    Item(Map<String, Value>),
    /// The instructions the model was given (an older rollout's header).
    Instructions(String),
    /// A rollout row that carries nothing for the model.
    Skip,
    /// Another shape's row.
    Other(Map<String, Value>),
}

impl Row {
    pub(super) fn of(mut object: Map<String, Value>) -> Self {
        let kind = object
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if kind == "response_item" {
            return match object.remove("payload") {
                Some(Value::Object(item)) => Row::Item(item),
                _ => Row::Skip,
            };
        }
        if ROLLOUT_ROWS.contains(&kind) && object.get("payload").is_some_and(Value::is_object) {
            return Row::Skip;
        }
        if ITEMS.contains(&kind) || (kind == "message" && has_responses_parts(&object)) {
            return Row::Item(object);
        }
        // An older rollout: a header (`id`, `timestamp`, `instructions`), then state rows.
        if kind.is_empty() && object.get("role").is_none() {
            if object.contains_key("record_type") {
                return Row::Skip;
            }
            if let Some(Value::String(text)) = object.get("instructions") {
                return if text.trim().is_empty() {
                    Row::Skip
                } else {
                    Row::Instructions(text.clone())
                };
            }
        }
        Row::Other(object)
    }
}

/// A message whose parts are the Responses API's (`input_text`, `output_text`, …).
fn has_responses_parts(item: &Map<String, Value>) -> bool {
    item.get("content")
        .and_then(Value::as_array)
        .is_some_and(|parts| {
            parts.iter().any(|p| {
                matches!(
                    p["type"].as_str(),
                    Some("input_text" | "output_text" | "refusal" | "input_image" | "input_file")
                )
            })
        })
}

/// Gathers a turn's text and calls into one assistant message.
#[derive(Default)]
pub(super) struct Responses {
    assistant: Option<Value>,
}

/// What a call passes: a function's arguments (JSON text), or a freeform tool's input.
enum Call<'a> {
    Function(String),
    Custom(&'a str),
}

impl Responses {
    /// The chat messages `item` completes (the assistant turn before it, then its own).
    pub(super) fn read(&mut self, item: &Map<String, Value>) -> Vec<Value> {
        let field = |key: &str| item.get(key).and_then(Value::as_str).unwrap_or_default();
        let kind = item
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("message");
        let call = match kind {
            "function_call" => Some((
                field("name"),
                Call::Function(
                    item.get("arguments")
                        .map_or_else(|| "{}".to_owned(), text_or_json),
                ),
            )),
            "custom_tool_call" => Some((field("name"), Call::Custom(field("input")))),
            "local_shell_call" | "shell_call" | "apply_patch_call" => {
                let (name, key) = match kind {
                    "local_shell_call" => ("local_shell", "action"),
                    "shell_call" => ("shell", "action"),
                    _ => ("apply_patch", "operation"),
                };
                let arguments = item
                    .get(key)
                    .map_or_else(|| "{}".to_owned(), Value::to_string);
                Some((name, Call::Function(arguments)))
            }
            _ => None,
        };
        if let Some((name, arguments)) = call {
            let id = call_id(item);
            let turn = self
                .assistant
                .get_or_insert_with(|| json!({"role": "assistant", "content": ""}));
            if turn["tool_calls"].is_null() {
                turn["tool_calls"] = json!([]);
            }
            if let Some(calls) = turn["tool_calls"].as_array_mut() {
                calls.push(match arguments {
                    Call::Function(arguments) => json!({"id": id, "type": "function",
                        "function": {"name": name, "arguments": arguments}}),
                    Call::Custom(input) => json!({"id": id, "type": "custom",
                        "custom": {"name": name, "input": input}}),
                });
            }
            return Vec::new();
        }
        match kind {
            "function_call_output"
            | "custom_tool_call_output"
            | "local_shell_call_output"
            | "shell_call_output"
            | "apply_patch_call_output" => {
                let id = call_id(item);
                let content = match item.get("output") {
                    Some(Value::Array(chunks)) if kind == "shell_call_output" => {
                        let text = ShellOutcome::output_text(chunks).map(|(text, _)| text);
                        text.unwrap_or_else(|_| output_text(&item["output"]))
                    }
                    output => output.map(output_text).unwrap_or_default(),
                };
                let mut out = self.finish();
                out.push(json!({"role": "tool", "tool_call_id": id, "content": content}));
                out
            }
            "message" => {
                let text = message_text(item.get("content"));
                match item.get("role").and_then(Value::as_str) {
                    Some("assistant") => {
                        let mut out = Vec::new();
                        if self
                            .assistant
                            .as_ref()
                            .is_some_and(|a| a.get("tool_calls").is_some() || a["content"] != "")
                        {
                            out = self.finish();
                        }
                        if !text.is_empty() {
                            self.assistant = Some(json!({"role": "assistant", "content": text}));
                        }
                        out
                    }
                    role => {
                        let mut out = self.finish();
                        let role = match role {
                            Some("system" | "developer") => "system",
                            _ => "user",
                        };
                        if !text.is_empty() {
                            out.push(json!({"role": role, "content": text}));
                        }
                        out
                    }
                }
            }
            // Reasoning, and calls the provider ran itself (a web search): nothing to pair.
            _ => Vec::new(),
        }
    }

    /// The assistant turn gathered so far, if any.
    pub(super) fn finish(&mut self) -> Vec<Value> {
        self.assistant.take().into_iter().collect()
    }
}

/// The id that pairs a call with its output: `call_id`, or the item's `id` without one.
fn call_id(item: &Map<String, Value>) -> &str {
    ["call_id", "id"]
        .iter()
        .filter_map(|key| item.get(*key).and_then(Value::as_str))
        .find(|id| !id.is_empty())
        .unwrap_or_default()
}

/// A string as it is; anything else as its JSON text.
fn text_or_json(value: &Value) -> String {
    value
        .as_str()
        .map_or_else(|| value.to_string(), str::to_owned)
}

/// A call's output: a string, or a list of parts (their text, an image as `[image]`).
fn output_text(output: &Value) -> String {
    match output {
        Value::Array(_) => message_text(Some(output)),
        Value::Object(fields) => fields
            .get("content")
            .and_then(Value::as_str)
            .map_or_else(|| output.to_string(), str::to_owned),
        other => text_or_json(other),
    }
}

/// The text of a message's content: a string, or its parts' text joined.
fn message_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| match p["type"].as_str() {
                Some("input_text" | "output_text" | "text") => {
                    p["text"].as_str().map(str::to_owned)
                }
                Some("refusal") => p["refusal"].as_str().map(str::to_owned),
                Some("input_image" | "image") => Some("[image]".to_owned()),
                Some("input_file") => Some("[file]".to_owned()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}
