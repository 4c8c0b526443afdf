//! OpenAI Responses `input` items: messages, each assistant turn as its reasoning items (in
//! the current tool loop), its text and one `function_call` item per call (`custom_tool_call`
//! for a freeform tool), each call's `function_call_output` (`custom_tool_call_output`) after
//! them in call order.

use std::borrow::Cow;

use serde::Serialize;

use super::openai::{error_text, openai_result_content, says_nothing, ArgumentsText};
use super::{orphan_result_text, pair_tool_results, tool_calls_of, Keyed, PartKey, Placed};
use crate::domain::compaction::ViewMessage;
use crate::domain::content::Part;
use crate::domain::event::{CallKind, Role, ToolCall};

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
            Self::Call(call) => Item::FunctionCall {
                call_id: &call.id,
                name: &call.name,
                arguments: ArgumentsText(&call.arguments),
            }
            .serialize(serializer),
            Self::Output { call, result } => {
                let call_id = &call.id;
                let output = match result {
                    Some(result) if has_images(result) => with_images(result),
                    _ => EasyContent::Text(openai_result_content(result)),
                };
                match call.kind {
                    CallKind::Function => Item::FunctionCallOutput { call_id, output },
                    CallKind::Custom => Item::CustomToolCallOutput { call_id, output },
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
