//! Renderers: a view's messages as the request a provider accepts.
//!
//! The engine hands over messages in log order, where a tool result may stand after other
//! messages and the results of one turn may come in any order. Every renderer for a provider
//! first attaches each result to the call it answers (`pair_tool_results`) and then writes the
//! provider's shape: OpenAI chat-completions `messages`, Anthropic `system` + `messages` with
//! `tool_use`/`tool_result` blocks, or ctxd's own messages (`raw`).
//!
//! A rendered request borrows the view's text and serialises straight from it: the view is
//! usually most of a response, and copying it into a `serde_json::Value` first would double
//! the work of every compact call.
//!
//! Input outside the engine's contract still renders as a valid request: a call with no result
//! gets a placeholder error result, and a result that answers no earlier call becomes user text.

use std::borrow::Cow;

use foldhash::{HashMap, HashMapExt};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::domain::compaction::{Projection, ViewMessage};
use crate::domain::event::{Role, ToolCall};

mod fragments;

pub use fragments::{write_view, Fragments};

/// The first user message of an Anthropic request whose view would start with the assistant
/// (or has no message besides the system prompt): Anthropic requires a user message first.
pub const CONVERSATION_CONTINUES: &str = "(conversation continues)";

/// The result shown for a call that has none in the view.
const MISSING_RESULT: &str = "No result was recorded for this tool call.";

/// The content of a failed result that has none: Anthropic rejects an empty error result.
const EMPTY_ERROR_RESULT: &str = "The tool failed without output.";

/// The provider shape a view is rendered in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// OpenAI chat-completions `messages`.
    #[default]
    Openai,
    /// Anthropic Messages `system` and `messages`.
    Anthropic,
    /// ctxd's view messages as they are.
    Raw,
}

/// A view rendered for a provider, borrowing the view's text; serialise it to get the request.
#[derive(Serialize)]
#[serde(untagged)]
pub enum Rendered<'a> {
    Openai(OpenaiRequest<'a>),
    Anthropic(AnthropicRequest<'a>),
    Raw(RawRequest<'a>),
}

/// Renders `messages` in `format`, ready to serialise.
pub fn rendered<'a>(format: Format, messages: &'a [ViewMessage<'a>]) -> Rendered<'a> {
    match format {
        Format::Openai => Rendered::Openai(openai(messages)),
        Format::Anthropic => Rendered::Anthropic(anthropic(messages)),
        Format::Raw => Rendered::Raw(RawRequest { items: messages }),
    }
}

/// Renders `messages` in `format` as a JSON value.
pub fn render(format: Format, messages: &[ViewMessage<'_>]) -> Value {
    to_value(&rendered(format, messages))
}

/// `{"messages": [...]}` in OpenAI chat-completions form, as a JSON value.
pub fn render_openai(messages: &[ViewMessage<'_>]) -> Value {
    to_value(&openai(messages))
}

/// `{"system": "...", "messages": [...]}` in Anthropic Messages form, as a JSON value.
pub fn render_anthropic(messages: &[ViewMessage<'_>]) -> Value {
    to_value(&anthropic(messages))
}

/// `{"items": [...]}`: the view's messages as ctxd holds them, as a JSON value.
pub fn render_raw(messages: &[ViewMessage<'_>]) -> Value {
    to_value(&RawRequest { items: messages })
}

fn to_value(request: &impl Serialize) -> Value {
    // Strings, numbers, booleans and string-keyed maps only: serialising cannot fail.
    serde_json::to_value(request).unwrap_or(Value::Null)
}

/// What a part of a rendered request is made from, when that is one view message alone: the
/// event it shows, how it is shown, and which of the message's parts it is. Such a part renders
/// the same on every call, so a writer may reuse its JSON (see [`write_view`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PartKey {
    pub seq: i64,
    pub projection: Projection,
    pub index: u16,
}

impl PartKey {
    fn of(message: &ViewMessage<'_>, index: usize) -> Option<Self> {
        Some(Self {
            seq: message.seq?,
            projection: message.projection,
            index: u16::try_from(index).ok()?,
        })
    }
}

/// A part of a request with what it is made from, when that is one message alone; it
/// serialises as the part.
pub struct Keyed<T> {
    key: Option<PartKey>,
    part: T,
}

impl<T> Keyed<T> {
    fn by(key: Option<PartKey>, part: T) -> Self {
        Self { key, part }
    }

    fn fresh(part: T) -> Self {
        Self { key: None, part }
    }
}

impl<T: Serialize> Serialize for Keyed<T> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.part.serialize(serializer)
    }
}

/// `{"items": [...]}`.
#[derive(Serialize)]
pub struct RawRequest<'a> {
    items: &'a [ViewMessage<'a>],
}

/// `{"messages": [...]}` for OpenAI chat completions.
#[derive(Serialize)]
pub struct OpenaiRequest<'a> {
    messages: Vec<Keyed<OpenaiPart<'a>>>,
}

/// One message of an OpenAI request, made only when serialised: a replica that kept its JSON
/// from an earlier call copies that instead.
enum OpenaiPart<'a> {
    /// A message as it stands (results of its tool calls follow it as parts of their own).
    Message(&'a ViewMessage<'a>),
    /// The result of `call`; `None` when the call was never answered.
    Result {
        call: &'a ToolCall,
        result: Option<&'a ViewMessage<'a>>,
    },
    /// A tool result that answers no earlier call, shown as user text.
    Orphan(&'a ViewMessage<'a>),
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
        }
    }
}

#[derive(Serialize)]
struct OpenaiMessage<'a> {
    role: &'static str,
    /// Null only for an assistant message with tool calls and no text.
    content: Option<Cow<'a, str>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<OpenaiCall<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<Cow<'a, str>>,
}

impl<'a> OpenaiMessage<'a> {
    fn text(role: &'static str, content: Cow<'a, str>) -> Self {
        Self {
            role,
            content: Some(content),
            tool_calls: Vec::new(),
            tool_call_id: None,
            name: None,
        }
    }
}

#[derive(Serialize)]
struct OpenaiCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: OpenaiFunction<'a>,
}

#[derive(Serialize)]
struct OpenaiFunction<'a> {
    name: &'a str,
    /// The arguments as the JSON string OpenAI takes, written when serialised.
    arguments: ArgumentsText<'a>,
}

/// `{"messages": [...]}` in OpenAI chat-completions form. Each assistant message with tool calls
/// is followed by its results in call order, then by whatever stood between the calls and the
/// results. A failed result's content is prefixed with `Error: ` (OpenAI has no error flag)
/// unless it already starts with "error".
fn openai<'a>(messages: &'a [ViewMessage<'a>]) -> OpenaiRequest<'a> {
    let mut rendered = Vec::with_capacity(messages.len());
    for placed in pair_tool_results(messages) {
        match placed {
            Placed::OrphanResult(result) => {
                rendered.push(Keyed::fresh(OpenaiPart::Orphan(result)));
            }
            Placed::Message { message, results } => {
                rendered.push(Keyed::by(
                    PartKey::of(message, 0),
                    OpenaiPart::Message(message),
                ));
                for (call, result) in tool_calls_of(message).iter().zip(results) {
                    let key = result.and_then(|r| PartKey::of(r, 0));
                    rendered.push(Keyed::by(key, OpenaiPart::Result { call, result }));
                }
            }
        }
    }
    OpenaiRequest { messages: rendered }
}

/// `{"system": "...", "messages": [...]}` for Anthropic Messages.
#[derive(Serialize)]
pub struct AnthropicRequest<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    system: Option<Cow<'a, str>>,
    messages: Vec<AnthropicMessage<'a>>,
}

#[derive(Serialize)]
struct AnthropicMessage<'a> {
    role: &'static str,
    content: Vec<Keyed<Block<'a>>>,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block<'a> {
    Text {
        text: Cow<'a, str>,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        /// The arguments as the object Anthropic takes, made when serialised.
        input: ToolInput<'a>,
    },
    ToolResult {
        tool_use_id: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        content: Option<Cow<'a, str>>,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
    },
}

/// `{"system": "...", "messages": [...]}` in Anthropic Messages form (`system` only when there
/// is one): system prompts joined by blank lines; user and assistant strictly alternating,
/// starting with the user; all results of an assistant turn as `tool_result` blocks leading the
/// next user message.
fn anthropic<'a>(messages: &'a [ViewMessage<'a>]) -> AnthropicRequest<'a> {
    let mut system: Vec<&str> = Vec::new();
    let mut turns = AnthropicTurns::default();
    for placed in pair_tool_results(messages) {
        match placed {
            Placed::OrphanResult(result) => {
                let text = text_blocks(orphan_result_text(result).into());
                turns.push(Role::User, text.into_iter().map(Keyed::fresh).collect());
            }
            Placed::Message { message, results } => match message.role {
                Role::System => {
                    if !message.content.trim().is_empty() {
                        system.push(&message.content);
                    }
                }
                Role::User | Role::Tool => {
                    let text = text_blocks(Cow::Borrowed(&message.content));
                    turns.push(Role::User, keyed_blocks(message, text));
                }
                Role::Assistant => {
                    let calls = tool_calls_of(message);
                    let mut blocks = text_blocks(Cow::Borrowed(&message.content));
                    blocks.extend(calls.iter().map(tool_use_block));
                    turns.push(Role::Assistant, keyed_blocks(message, blocks));
                    let results = calls.iter().zip(results).map(|(call, result)| {
                        let key = result.and_then(|r| PartKey::of(r, 0));
                        Keyed::by(key, tool_result_block(call, result))
                    });
                    turns.push(Role::User, results.collect());
                }
            },
        }
    }
    // `system` is optional; an empty one is left out rather than sent blank.
    let system = match system.as_slice() {
        [] => None,
        [one] => Some(Cow::Borrowed(*one)),
        many => Some(Cow::Owned(many.join("\n\n"))),
    };
    AnthropicRequest {
        system,
        messages: turns.into_messages(),
    }
}

/// A view message in the order a provider needs it.
enum Placed<'v, 'a> {
    /// Any message but a tool result. For an assistant message, `results` holds the result of
    /// each of its tool calls, in call order (`None`: never answered).
    Message {
        message: &'v ViewMessage<'a>,
        results: Vec<Option<&'v ViewMessage<'a>>>,
    },
    /// A tool result that answers no earlier unanswered call.
    OrphanResult(&'v ViewMessage<'a>),
}

/// Takes every tool result out of its place and attaches it to the call it answers: the most
/// recent earlier call with its id that is still unanswered. Other messages keep their order, so
/// whatever stood between a call and its result ends up after the result.
fn pair_tool_results<'v, 'a>(messages: &'v [ViewMessage<'a>]) -> Vec<Placed<'v, 'a>> {
    let mut placed = Vec::with_capacity(messages.len());
    // call id -> (index in `placed`, index of the call in its message) of the most recent
    // unanswered call with that id; earlier unanswered calls with a reused id wait in
    // `shadowed`, most recent last.
    let mut unanswered: HashMap<&str, (usize, usize)> = HashMap::with_capacity(messages.len() / 2);
    let mut shadowed: Vec<(&str, (usize, usize))> = Vec::new();
    for message in messages {
        if message.role == Role::Tool {
            let call = message.tool_call_id.as_deref().and_then(|id| {
                let call = unanswered.remove(id)?;
                if let Some(i) = shadowed.iter().rposition(|(other, _)| *other == id) {
                    let (id, earlier) = shadowed.remove(i);
                    unanswered.insert(id, earlier);
                }
                Some(call)
            });
            let slot = call.and_then(|(at, k)| match placed.get_mut(at) {
                Some(Placed::Message { results, .. }) => results.get_mut(k),
                _ => None,
            });
            match slot {
                Some(slot) => *slot = Some(message),
                None => placed.push(Placed::OrphanResult(message)),
            }
            continue;
        }
        let calls = tool_calls_of(message);
        for (k, call) in calls.iter().enumerate() {
            let id = call.id.as_str();
            if let Some(earlier) = unanswered.insert(id, (placed.len(), k)) {
                shadowed.push((id, earlier));
            }
        }
        placed.push(Placed::Message {
            message,
            results: vec![None; calls.len()],
        });
    }
    placed
}

/// The tool calls a message issues: only an assistant's count.
fn tool_calls_of<'v>(message: &'v ViewMessage<'_>) -> &'v [ToolCall] {
    match message.role {
        Role::Assistant => &message.tool_calls,
        _ => &[],
    }
}

fn orphan_result_text(result: &ViewMessage<'_>) -> String {
    let id = result.tool_call_id.as_deref().unwrap_or("unknown");
    format!("Result of tool call {id}:\n{}", result.content)
}

fn openai_message<'a>(message: &'a ViewMessage<'a>) -> OpenaiMessage<'a> {
    let calls = tool_calls_of(message);
    let content: &str = &message.content;
    let mut rendered = OpenaiMessage::text(message.role.as_str(), content.into());
    if !calls.is_empty() {
        rendered.content = (!content.is_empty()).then_some(content.into());
        rendered.tool_calls = calls
            .iter()
            .map(|call| OpenaiCall {
                id: &call.id,
                kind: "function",
                function: OpenaiFunction {
                    name: &call.name,
                    arguments: ArgumentsText(&call.arguments),
                },
            })
            .collect();
    }
    if let (Role::User | Role::Assistant, Some(name)) = (message.role, &message.name) {
        rendered.name = Some(participant_name(name));
    }
    rendered
}

fn openai_result_content<'a>(result: Option<&'a ViewMessage<'a>>) -> Cow<'a, str> {
    match result {
        Some(result) if !result.is_error => Cow::Borrowed(&result.content),
        Some(result) => error_text(&result.content),
        None => error_text(MISSING_RESULT),
    }
}

/// A failed result's content marked as an error, for a provider with no error flag.
fn error_text(content: &str) -> Cow<'_, str> {
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

/// The blocks a message renders to, each keyed by the message and its place among them.
fn keyed_blocks<'a>(message: &ViewMessage<'_>, blocks: Vec<Block<'a>>) -> Vec<Keyed<Block<'a>>> {
    let keyed = blocks.into_iter().enumerate();
    keyed
        .map(|(i, block)| Keyed::by(PartKey::of(message, i), block))
        .collect()
}

/// Anthropic messages under construction: consecutive blocks of one role share a message.
#[derive(Default)]
struct AnthropicTurns<'a>(Vec<(Role, Vec<Keyed<Block<'a>>>)>);

impl<'a> AnthropicTurns<'a> {
    /// Appends `blocks` to the last message when it has the same role, else starts a message.
    /// No blocks, no message: Anthropic rejects empty content.
    fn push(&mut self, role: Role, blocks: Vec<Keyed<Block<'a>>>) {
        if blocks.is_empty() {
            return;
        }
        match self.0.last_mut() {
            Some((last, content)) if *last == role => content.extend(blocks),
            _ => self.0.push((role, blocks)),
        }
    }

    fn into_messages(mut self) -> Vec<AnthropicMessage<'a>> {
        if self.0.first().is_none_or(|(role, _)| *role != Role::User) {
            let opening = text_blocks(CONVERSATION_CONTINUES.into());
            let opening = opening.into_iter().map(Keyed::fresh).collect();
            self.0.insert(0, (Role::User, opening));
        }
        self.0
            .into_iter()
            .map(|(role, content)| AnthropicMessage {
                role: role.as_str(),
                content,
            })
            .collect()
    }
}

/// A text block, or none for blank text (Anthropic rejects whitespace-only text blocks).
fn text_blocks(text: Cow<'_, str>) -> Vec<Block<'_>> {
    if text.trim().is_empty() {
        Vec::new()
    } else {
        vec![Block::Text { text }]
    }
}

fn tool_use_block(call: &ToolCall) -> Block<'_> {
    Block::ToolUse {
        id: &call.id,
        name: &call.name,
        input: ToolInput(&call.arguments),
    }
}

/// Tool-call arguments as OpenAI takes them (see [`ToolCall::arguments_text`]). Converted only
/// when serialised: a part whose JSON a writer reuses is never converted.
struct ArgumentsText<'a>(&'a Value);

impl Serialize for ArgumentsText<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Value::String(text) => serializer.serialize_str(text),
            other => serializer.serialize_str(&other.to_string()),
        }
    }
}

/// Tool-call arguments as Anthropic takes them (see [`tool_input`]), converted only when
/// serialised.
struct ToolInput<'a>(&'a Value);

impl Serialize for ToolInput<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        tool_input(self.0).serialize(serializer)
    }
}

/// The arguments as the JSON object Anthropic requires: the object itself, a string parsed as
/// one, or — so that nothing the model wrote is lost — `{"arguments": <what it was>}`.
fn tool_input(arguments: &Value) -> Cow<'_, Value> {
    let wrapped = |value: Value| Cow::Owned(serde_json::json!({ "arguments": value }));
    match arguments {
        Value::Object(_) => Cow::Borrowed(arguments),
        Value::Null => Cow::Owned(serde_json::json!({})),
        Value::String(text) if text.trim().is_empty() => Cow::Owned(serde_json::json!({})),
        Value::String(text) => match serde_json::from_str(text) {
            Ok(object @ Value::Object(_)) => Cow::Owned(object),
            _ => wrapped(Value::String(text.clone())),
        },
        other => wrapped(other.clone()),
    }
}

fn tool_result_block<'a>(call: &'a ToolCall, result: Option<&'a ViewMessage<'a>>) -> Block<'a> {
    let (content, is_error) = match result {
        Some(result) => (&*result.content, result.is_error),
        None => (MISSING_RESULT, true),
    };
    let content = if !content.trim().is_empty() {
        Some(Cow::Borrowed(content))
    } else if is_error {
        Some(Cow::Borrowed(EMPTY_ERROR_RESULT))
    } else {
        None
    };
    Block::ToolResult {
        tool_use_id: &call.id,
        content,
        is_error,
    }
}

/// OpenAI accepts participant names of 1 to 64 letters, digits, `_` and `-`: anything else
/// becomes `_`.
fn participant_name(name: &str) -> Cow<'_, str> {
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

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

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
}
