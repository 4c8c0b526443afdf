//! OpenAI Responses `input` items: messages, each assistant turn as its reasoning items (in
//! the current tool loop), its text and one `function_call` item per call (`custom_tool_call`
//! for a freeform tool, `shell_call` and `apply_patch_call` for the built-in tools), each
//! call's `function_call_output` (`custom_tool_call_output`, `shell_call_output`,
//! `apply_patch_call_output`) after them in call order.

use std::borrow::Cow;

use serde::Serialize;
use serde_json::{Map, Value};

use super::openai::{error_text, openai_result_content, says_nothing, ArgumentsText};
use super::MISSING_RESULT;
use super::{orphan_result_text, pair_tool_results, tool_calls_of, Keyed, PartKey, Placed};
use crate::domain::compaction::ViewMessage;
use crate::domain::content::Part;
use crate::domain::event::{CallKind, Role, ShellOutcome, ToolCall, ARCHIVED_ARGUMENTS_KEY};

/// `{"input": [...]}` for the OpenAI Responses API.
#[derive(Serialize)]
pub struct ResponsesRequest<'a> {
    pub(super) input: Vec<Keyed<ResponsesItem<'a>>>,
}

/// One input item, made only when serialised.
pub(super) enum ResponsesItem<'a> {
    /// A message's reasoning part (`index` among its parts), sent back in the current loop.
    Reasoning(&'a Part),
    /// A message's text (and images, from the user).
    Message(&'a ViewMessage<'a>),
    Call(&'a ToolCall),
    /// The output of `call`; `None` when the call was never answered.
    Output {
        call: &'a ToolCall,
        result: Option<&'a ViewMessage<'a>>,
    },
    /// A tool result that answers no earlier call, shown as user text.
    Orphan(&'a ViewMessage<'a>),
}

#[derive(Serialize)]
struct EasyMessage<'a> {
    role: &'static str,
    content: EasyContent<'a>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum EasyContent<'a> {
    Text(Cow<'a, str>),
    Parts(Vec<InputPart<'a>>),
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum InputPart<'a> {
    InputText {
        text: Cow<'a, str>,
    },
    InputImage {
        image_url: Cow<'a, str>,
        detail: &'a str,
    },
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Item<'a> {
    Reasoning {
        id: &'a str,
        summary: Vec<SummaryText<'a>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        encrypted_content: Option<&'a str>,
    },
    FunctionCall {
        call_id: &'a str,
        name: &'a str,
        arguments: ArgumentsText<'a>,
    },
    FunctionCallOutput {
        call_id: &'a str,
        output: EasyContent<'a>,
    },
    CustomToolCall {
        call_id: &'a str,
        name: &'a str,
        input: Cow<'a, str>,
    },
    CustomToolCallOutput {
        call_id: &'a str,
        output: EasyContent<'a>,
    },
    ShellCall {
        call_id: &'a str,
        action: Value,
        status: &'static str,
    },
    ShellCallOutput {
        call_id: &'a str,
        output: [ShellChunk<'a>; 1],
    },
    ApplyPatchCall {
        call_id: &'a str,
        operation: Value,
        status: &'static str,
    },
    ApplyPatchCallOutput {
        call_id: &'a str,
        status: &'static str,
        output: Cow<'a, str>,
    },
}

/// A shell call's output as one chunk: its text, with how it ended as the outcome.
#[derive(Serialize)]
struct ShellChunk<'a> {
    stdout: &'a str,
    stderr: &'static str,
    outcome: Outcome,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Outcome {
    Exit { exit_code: i64 },
    Timeout,
}

#[derive(Serialize)]
struct SummaryText<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    text: &'a str,
}

impl Serialize for ResponsesItem<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match *self {
            Self::Reasoning(Part::Reasoning {
                id,
                summary,
                encrypted_content,
            }) => Item::Reasoning {
                id,
                summary: summary
                    .iter()
                    .map(|text| SummaryText {
                        kind: "summary_text",
                        text,
                    })
                    .collect(),
                encrypted_content: encrypted_content.as_deref(),
            }
            .serialize(serializer),
            // Only reasoning parts are made into reasoning items.
            Self::Reasoning(_) => serializer.serialize_none(),
            Self::Message(message) => EasyMessage {
                role: match message.role {
                    Role::System => "system",
                    Role::Assistant => "assistant",
                    Role::User | Role::Tool => "user",
                },
                content: message_content(message),
            }
            .serialize(serializer),
            Self::Call(call) if call.kind == CallKind::Custom => Item::CustomToolCall {
                call_id: &call.id,
                name: &call.name,
                input: call.custom_input(),
            }
            .serialize(serializer),
            Self::Call(call) if call.kind == CallKind::Shell => Item::ShellCall {
                call_id: &call.id,
                action: shell_action(call),
                status: "completed",
            }
            .serialize(serializer),
            Self::Call(call) if call.kind == CallKind::ApplyPatch => Item::ApplyPatchCall {
                call_id: &call.id,
                operation: patch_operation(call),
                status: "completed",
            }
            .serialize(serializer),
            Self::Call(call) => Item::FunctionCall {
                call_id: &call.id,
                name: &call.name,
                arguments: ArgumentsText(&call.arguments),
            }
            .serialize(serializer),
            Self::Output { call, result } if call.kind == CallKind::Shell => {
                let text = result.map_or(MISSING_RESULT, |r| &*r.content);
                let failed = result.is_none_or(|r| r.is_error);
                let (stdout, outcome) = ShellOutcome::split(text, failed);
                Item::ShellCallOutput {
                    call_id: &call.id,
                    output: [ShellChunk {
                        stdout,
                        stderr: "",
                        outcome: match outcome {
                            ShellOutcome::Exit(exit_code) => Outcome::Exit { exit_code },
                            ShellOutcome::Timeout => Outcome::Timeout,
                        },
                    }],
                }
                .serialize(serializer)
            }
            Self::Output { call, result } if call.kind == CallKind::ApplyPatch => {
                Item::ApplyPatchCallOutput {
                    call_id: &call.id,
                    status: match result {
                        Some(result) if !result.is_error => "completed",
                        _ => "failed",
                    },
                    output: result.map_or(MISSING_RESULT.into(), |r| Cow::Borrowed(&r.content)),
                }
                .serialize(serializer)
            }
            Self::Output { call, result } => {
                let call_id = &call.id;
                let output = match result {
                    Some(result) if has_images(result) => with_images(result),
                    _ => EasyContent::Text(openai_result_content(result)),
                };
                match call.kind {
                    CallKind::Custom => Item::CustomToolCallOutput { call_id, output },
                    _ => Item::FunctionCallOutput { call_id, output },
                }
                .serialize(serializer)
            }
            Self::Orphan(result) => EasyMessage {
                role: "user",
                content: EasyContent::Text(orphan_result_text(result).into()),
            }
            .serialize(serializer),
        }
    }
}

/// A shell call's `action` from its arguments: the commands and limits it took, or, once its
/// arguments are archived, a shell comment naming where to recall them.
fn shell_action(call: &ToolCall) -> Value {
    let arguments = call.arguments_value();
    let mut action = Map::new();
    if let Value::Object(fields) = &*arguments {
        for key in ["commands", "timeout_ms", "max_output_length"] {
            if let Some(value) = fields.get(key).filter(|v| !v.is_null()) {
                action.insert(key.into(), value.clone());
            }
        }
    }
    let commands = action.get("commands").and_then(Value::as_array);
    if !commands.is_some_and(|c| c.iter().all(Value::is_string)) {
        let comment = format!(
            "# {}",
            archived_note(&arguments).unwrap_or(&call.arguments_text())
        );
        action.insert("commands".into(), Value::from(vec![comment]));
    }
    Value::Object(action)
}

/// An apply_patch call's `operation` from its arguments: the file and diff it took, or, once
/// its diff is archived, the note naming where to recall it as the diff.
fn patch_operation(call: &ToolCall) -> Value {
    let arguments = call.arguments_value();
    let field = |key| arguments.get(key).and_then(Value::as_str);
    let kind = field("type").unwrap_or("update_file");
    let mut operation = Map::new();
    operation.insert("type".into(), kind.into());
    operation.insert("path".into(), field("path").unwrap_or_default().into());
    if kind != "delete_file" {
        let diff = field("diff").or(archived_note(&arguments));
        operation.insert("diff".into(), diff.unwrap_or_default().into());
    }
    Value::Object(operation)
}

/// The note an archived call's arguments hold in place of what they took.
fn archived_note(arguments: &Value) -> Option<&str> {
    arguments
        .get(ARCHIVED_ARGUMENTS_KEY)
        .and_then(Value::as_str)
}

fn has_images(message: &ViewMessage<'_>) -> bool {
    message.parts.iter().any(|p| matches!(p, Part::Image(_)))
}

/// A message's content: text, or (from the user) text and image parts.
fn message_content<'a>(message: &'a ViewMessage<'a>) -> EasyContent<'a> {
    if message.role == Role::User && has_images(message) {
        with_images(message)
    } else {
        EasyContent::Text(Cow::Borrowed(&message.content))
    }
}

/// Text and image parts, in order (a failed result's text marked as an error).
fn with_images<'a>(message: &'a ViewMessage<'a>) -> EasyContent<'a> {
    let mut parts = Vec::with_capacity(message.parts.len());
    for part in message.parts.iter() {
        match part {
            Part::Text { text } if message.is_error && parts.is_empty() => {
                parts.push(InputPart::InputText {
                    text: error_text(text),
                })
            }
            Part::Text { text } => parts.push(InputPart::InputText { text: text.into() }),
            Part::Image(image) => parts.push(InputPart::InputImage {
                image_url: image.as_url(),
                detail: image.detail.as_deref().unwrap_or("auto"),
            }),
            _ => {}
        }
    }
    EasyContent::Parts(parts)
}

/// `{"input": [...]}` in OpenAI Responses form.
pub(super) fn responses<'a>(messages: &'a [ViewMessage<'a>]) -> ResponsesRequest<'a> {
    let mut input = Vec::with_capacity(messages.len());
    for placed in pair_tool_results(messages) {
        match placed {
            Placed::OrphanResult(result) => input.push(Keyed::fresh(ResponsesItem::Orphan(result))),
            Placed::Message { message, results } => {
                let mut index = 0;
                let mut push = |item| {
                    input.push(Keyed::by(PartKey::of(message, index), item));
                    index += 1;
                };
                if message.role == Role::Assistant && message.reasoning {
                    let reasoning = message
                        .parts
                        .iter()
                        .filter(|p| matches!(p, Part::Reasoning { .. }));
                    reasoning.for_each(|part| push(ResponsesItem::Reasoning(part)));
                }
                let text_less = message.role == Role::Assistant && message.content.is_empty();
                if !text_less && !says_nothing(message) {
                    push(ResponsesItem::Message(message));
                }
                let calls = tool_calls_of(message);
                calls
                    .iter()
                    .for_each(|call| push(ResponsesItem::Call(call)));
                for (call, result) in calls.iter().zip(results) {
                    let key = result.and_then(|r| PartKey::of(r, 0));
                    input.push(Keyed::by(key, ResponsesItem::Output { call, result }));
                }
            }
        }
    }
    ResponsesRequest { input }
}
