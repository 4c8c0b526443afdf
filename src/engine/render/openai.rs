//! OpenAI chat-completions `messages`: each assistant message with tool calls followed by its
//! results in call order; failed results marked in their text (OpenAI has no error flag).

use std::borrow::Cow;

use serde::Serialize;
use serde_json::Value;

use super::{
    orphan_result_text, pair_tool_results, tool_calls_of, Keyed, PartKey, Placed,
    EMPTY_ERROR_RESULT, MISSING_RESULT,
};
use crate::domain::compaction::ViewMessage;
use crate::domain::content::Part;
use crate::domain::event::{CallKind, Role, ToolCall};

/// `{"messages": [...]}` for OpenAI chat completions.
#[derive(Serialize)]
pub struct OpenaiRequest<'a> {
    pub(super) messages: Vec<Keyed<OpenaiPart<'a>>>,
}

/// One message of an OpenAI request, made only when serialised: a replica that kept its JSON
/// from an earlier call copies that instead.
pub(super) enum OpenaiPart<'a> {
    /// A message as it stands (results of its tool calls follow it as parts of their own).
    Message(&'a ViewMessage<'a>),
    /// The result of `call`; `None` when the call was never answered.
    Result {
        call: &'a ToolCall,
        result: Option<&'a ViewMessage<'a>>,
    },
    /// A tool result that answers no earlier call, shown as user text.
    Orphan(&'a ViewMessage<'a>),
    /// The images of a tool result, as a user message after the results (a chat-completions
    /// tool message takes only text).
    ResultImages(&'a ViewMessage<'a>),
}

impl Serialize for OpenaiPart<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match *self {
            Self::Message(message) => openai_message(message).serialize(serializer),
            Self::Result { call, result } => OpenaiMessage {
                tool_call_id: Some(&call.id),
                ..OpenaiMessage::text("tool", openai_result_content(result))
            }
            .serialize(serializer),
            Self::Orphan(result) => {
                OpenaiMessage::text("user", orphan_result_text(result).into()).serialize(serializer)
            }
            Self::ResultImages(result) => {
                let id = result.tool_call_id.as_deref().unwrap_or("unknown");
                let mut parts = vec![OpenaiContentPart::Text {
                    text: format!("Images returned by tool call {id}:").into(),
                }];
                parts.extend(result.parts.iter().filter_map(image_part));
                OpenaiMessage {
                    content: Some(OpenaiContent::Parts(parts)),
                    ..OpenaiMessage::text("user", "".into())
                }
                .serialize(serializer)
            }
        }
    }
}

#[derive(Serialize)]
pub(super) struct OpenaiMessage<'a> {
    role: &'static str,
    /// Null only for an assistant message with tool calls and no text.
    content: Option<OpenaiContent<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<OpenaiCall<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<Cow<'a, str>>,
}

/// A message's content: its text, or text and image parts.
#[derive(Serialize)]
#[serde(untagged)]
pub(super) enum OpenaiContent<'a> {
    Text(Cow<'a, str>),
    Parts(Vec<OpenaiContentPart<'a>>),
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(super) enum OpenaiContentPart<'a> {
    Text { text: Cow<'a, str> },
    ImageUrl { image_url: OpenaiImage<'a> },
}

#[derive(Serialize)]
pub(super) struct OpenaiImage<'a> {
    url: Cow<'a, str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    detail: Option<&'a str>,
}

fn image_part(part: &Part) -> Option<OpenaiContentPart<'_>> {
    match part {
        Part::Image(image) => Some(OpenaiContentPart::ImageUrl {
            image_url: OpenaiImage {
                url: image.as_url(),
                detail: image.detail.as_deref(),
            },
        }),
        _ => None,
    }
}

/// Whether a result carries images that a chat-completions tool message cannot.
pub(super) fn has_images(message: &ViewMessage<'_>) -> bool {
    message.parts.iter().any(|p| matches!(p, Part::Image(_)))
}

/// Whether a message says nothing in chat completions: an assistant message with only
/// reasoning, which chat completions do not take back.
pub(super) fn says_nothing(message: &ViewMessage<'_>) -> bool {
    message.role == Role::Assistant
        && message.tool_calls.is_empty()
        && message.content.is_empty()
        && !message.parts.is_empty()
}

impl<'a> OpenaiMessage<'a> {
    fn text(role: &'static str, content: Cow<'a, str>) -> Self {
        Self {
            role,
            content: Some(OpenaiContent::Text(content)),
            tool_calls: Vec::new(),
            tool_call_id: None,
            name: None,
        }
    }
}

#[derive(Serialize)]
pub(super) struct OpenaiCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    function: Option<OpenaiFunction<'a>>,
    /// A freeform tool's call: its name and input text.
    #[serde(skip_serializing_if = "Option::is_none")]
    custom: Option<OpenaiCustom<'a>>,
}

#[derive(Serialize)]
pub(super) struct OpenaiCustom<'a> {
    name: &'a str,
    input: Cow<'a, str>,
}

#[derive(Serialize)]
pub(super) struct OpenaiFunction<'a> {
    name: &'a str,
    /// The arguments as the JSON string OpenAI takes, written when serialised.
    arguments: ArgumentsText<'a>,
}

/// `{"messages": [...]}` in OpenAI chat-completions form. Each assistant message with tool calls
/// is followed by its results in call order, then by whatever stood between the calls and the
/// results. A failed result's content is prefixed with `Error: ` (OpenAI has no error flag)
/// unless it already starts with "error".
pub(super) fn openai<'a>(messages: &'a [ViewMessage<'a>]) -> OpenaiRequest<'a> {
    let mut rendered = Vec::with_capacity(messages.len());
    for placed in pair_tool_results(messages) {
        match placed {
            Placed::OrphanResult(result) => {
                rendered.push(Keyed::fresh(OpenaiPart::Orphan(result)));
            }
            Placed::Message { message, results } => {
                if !says_nothing(message) {
                    rendered.push(Keyed::by(
                        PartKey::of(message, 0),
                        OpenaiPart::Message(message),
                    ));
                }
                let calls = tool_calls_of(message);
                for (call, result) in calls.iter().zip(&results) {
                    let key = result.and_then(|r| PartKey::of(r, 0));
                    rendered.push(Keyed::by(
                        key,
                        OpenaiPart::Result {
                            call,
                            result: *result,
                        },
                    ));
                }
                for result in results.into_iter().flatten().filter(|r| has_images(r)) {
                    let key = PartKey::of(result, 1);
                    rendered.push(Keyed::by(key, OpenaiPart::ResultImages(result)));
                }
            }
        }
    }
    OpenaiRequest { messages: rendered }
}

pub(super) fn openai_message<'a>(message: &'a ViewMessage<'a>) -> OpenaiMessage<'a> {
    let calls = tool_calls_of(message);
    let content: &str = &message.content;
    let mut rendered = OpenaiMessage::text(message.role.as_str(), content.into());
    // Only user messages take images; the others get their text.
    if message.role == Role::User && has_images(message) {
        let parts = message.parts.iter().filter_map(|part| match part {
            Part::Text { text } => Some(OpenaiContentPart::Text {
                text: text.as_str().into(),
            }),
            other => image_part(other),
        });
        rendered.content = Some(OpenaiContent::Parts(parts.collect()));
    }
    if !calls.is_empty() {
        rendered.content = (!content.is_empty()).then_some(OpenaiContent::Text(content.into()));
        rendered.tool_calls = calls
            .iter()
            .map(|call| match call.kind {
                // Chat has no shell or apply_patch tool: their calls are function calls taking
                // the action or operation.
                CallKind::Function | CallKind::Shell | CallKind::ApplyPatch => OpenaiCall {
                    id: &call.id,
                    kind: "function",
                    function: Some(OpenaiFunction {
                        name: &call.name,
                        arguments: ArgumentsText(&call.arguments),
                    }),
                    custom: None,
                },
                CallKind::Custom => OpenaiCall {
                    id: &call.id,
                    kind: "custom",
                    function: None,
                    custom: Some(OpenaiCustom {
                        name: &call.name,
                        input: call.custom_input(),
                    }),
                },
            })
            .collect();
    }
    if let (Role::User | Role::Assistant, Some(name)) = (message.role, &message.name) {
        rendered.name = Some(participant_name(name));
    }
    rendered
}

pub(super) fn openai_result_content<'a>(result: Option<&'a ViewMessage<'a>>) -> Cow<'a, str> {
    match result {
        Some(result) if !result.is_error => Cow::Borrowed(&result.content),
        Some(result) => error_text(&result.content),
        None => error_text(MISSING_RESULT),
    }
}

/// A failed result's content marked as an error, for a provider with no error flag.
pub(super) fn error_text(content: &str) -> Cow<'_, str> {
    let already_says_so = content
        .trim_start()
        .get(..5)
        .is_some_and(|head| head.eq_ignore_ascii_case("error"));
    if already_says_so {
        Cow::Borrowed(content)
    } else if content.trim().is_empty() {
        Cow::Owned(format!("Error: {EMPTY_ERROR_RESULT}"))
    } else {
        Cow::Owned(format!("Error: {content}"))
    }
}

/// Tool-call arguments as OpenAI takes them (see [`ToolCall::arguments_text`]). Converted only
/// when serialised: a part whose JSON a writer reuses is never converted.
pub(super) struct ArgumentsText<'a>(pub(super) &'a Value);

impl Serialize for ArgumentsText<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Value::String(text) => serializer.serialize_str(text),
            other => serializer.serialize_str(&other.to_string()),
        }
    }
}

/// OpenAI accepts participant names of 1 to 64 letters, digits, `_` and `-`: anything else
/// becomes `_`.
pub(super) fn participant_name(name: &str) -> Cow<'_, str> {
    let valid = |c: char| c.is_ascii_alphanumeric() || c == '-';
    if !name.is_empty() && name.len() <= 64 && name.chars().all(|c| valid(c) || c == '_') {
        return Cow::Borrowed(name);
    }
    let cleaned: String = name
        .chars()
        .take(64)
        .map(|c| if valid(c) { c } else { '_' })
        .collect();
    if cleaned.is_empty() {
        "_".into()
    } else {
        cleaned.into()
    }
}
