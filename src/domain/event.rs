//! Events: the immutable entries of a session's log, as clients send them and as ctxd stores them.

use std::borrow::Cow;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

use super::content::schema::MessageContent;
use super::content::{parts_tokens, read_parts, Content, Part};
use super::{has_nul, nul_in_json, nul_in_object, FieldError, NUL_MESSAGE};
use crate::tokens::Tokenizer;

const MAX_ID_CHARS: usize = 256;
const MAX_NAME_CHARS: usize = 256;

/// The kind of an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum EventType {
    Message,
    EpisodeStart,
    EpisodeEnd,
    Note,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Message => "message",
            Self::EpisodeStart => "episode_start",
            Self::EpisodeEnd => "episode_end",
            Self::Note => "note",
        }
    }
}

/// Who speaks a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::System => "system",
            Self::User => "user",
            Self::Assistant => "assistant",
            Self::Tool => "tool",
        }
    }
}

/// Whether an episode explores (reads, searches) or acts (edits, runs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum EpisodeKind {
    Exploration,
    Action,
}

/// A tool call issued by an assistant message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolCall {
    /// The provider's call id; the tool result answers it with `tool_call_id`.
    #[schema(min_length = 1, max_length = 256)]
    pub id: String,
    /// The tool's name.
    #[schema(min_length = 1, max_length = 256)]
    pub name: String,
    /// The arguments, as the provider gave them: a JSON string (OpenAI) or an object (Anthropic).
    /// Stored and returned as the JSON string either way.
    #[serde(default = "empty_arguments")]
    #[schema(value_type = ToolArguments)]
    pub arguments: Value,
}

/// Tool-call arguments as a client may send them (documentation only: the field is a `Value`).
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
#[allow(dead_code)]
enum ToolArguments {
    /// The JSON text, as OpenAI gives it.
    Text(String),
    /// The object, as Anthropic gives it.
    Object(Map<String, Value>),
}

fn empty_arguments() -> Value {
    Value::Object(Map::new())
}

impl ToolCall {
    /// The arguments as the text a provider sees.
    pub fn arguments_text(&self) -> Cow<'_, str> {
        match &self.arguments {
            Value::String(s) => s.as_str().into(),
            other => other.to_string().into(),
        }
    }
}

/// One event of a batch, as a client sends it. Which fields apply depends on `type`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EventInput {
    /// The client's id for this event; appending it again is idempotent.
    #[schema(min_length = 1, max_length = 256)]
    pub id: Option<String>,
    #[serde(rename = "type")]
    pub kind: EventType,
    /// `message`: who speaks.
    pub role: Option<Role>,
    /// `message`: the text, or the provider's parts (OpenAI content parts, Anthropic content
    /// blocks, Responses content or `reasoning` items: text, images, thinking); `note`: the
    /// text. May be empty or absent only on a tool result (a command that printed nothing) and on
    /// an assistant message that carries tool calls or reasoning.
    #[schema(value_type = Option<MessageContent>)]
    pub content: Option<ContentInput>,
    /// `message` with role `assistant`: the tool calls it issues.
    pub tool_calls: Option<Vec<ToolCall>>,
    /// `message` with role `tool`: the call this result answers.
    #[schema(min_length = 1, max_length = 256)]
    pub tool_call_id: Option<String>,
    /// `message`: the participant or tool name; `episode_start`/`episode_end`: the episode's name.
    #[schema(min_length = 1, max_length = 256)]
    pub name: Option<String>,
    /// `message` with role `tool`: whether the tool failed.
    pub is_error: Option<bool>,
    /// `episode_start`: exploration or action.
    #[serde(rename = "kind")]
    pub episode_kind: Option<EpisodeKind>,
    /// `episode_start`: names of the episodes this one depends on.
    pub dependencies: Option<Vec<String>>,
    /// `episode_end`: what the episode established.
    pub conclusion: Option<String>,
    /// Pinned events are never evicted from a view.
    pub pinned: Option<bool>,
    /// Free-form JSON object kept with the event.
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<Map<String, Value>>,
}

/// A message's content as a client sends it: one text, or parts in any provider's spelling.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum ContentInput {
    Text(String),
    Parts(Vec<Value>),
}

/// A message of the conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Message {
    pub role: Role,
    /// The text, or the parts (see [`Content`]).
    #[schema(value_type = MessageContent)]
    pub content: Content,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Present on tool results only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
}

/// The start of an exploration or action episode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct EpisodeStart {
    pub name: String,
    pub kind: EpisodeKind,
    #[serde(default)]
    pub dependencies: Vec<String>,
}

/// The end of an episode, with what it established.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct EpisodeEnd {
    pub name: String,
    #[serde(default)]
    pub conclusion: String,
}

/// A pinned decision or constraint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Note {
    pub content: String,
}

/// What an event says, by type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EventBody {
    Message(Message),
    EpisodeStart(EpisodeStart),
    EpisodeEnd(EpisodeEnd),
    Note(Note),
}

impl EventBody {
    pub fn event_type(&self) -> EventType {
        match self {
            Self::Message(_) => EventType::Message,
            Self::EpisodeStart(_) => EventType::EpisodeStart,
            Self::EpisodeEnd(_) => EventType::EpisodeEnd,
            Self::Note(_) => EventType::Note,
        }
    }

    pub fn role(&self) -> Option<Role> {
        match self {
            Self::Message(m) => Some(m.role),
            _ => None,
        }
    }

    /// The tool calls this event issues.
    pub fn tool_calls(&self) -> &[ToolCall] {
        match self {
            Self::Message(m) => &m.tool_calls,
            _ => &[],
        }
    }

    /// The call this event answers, when it is a tool result.
    pub fn tool_call_id(&self) -> Option<&str> {
        match self {
            Self::Message(m) => m.tool_call_id.as_deref(),
            _ => None,
        }
    }

    /// Holds tool-call arguments as the JSON text a provider sees, whichever form a client sent
    /// (the canonical form, which the token count measures); events stored before arguments
    /// were held as text are brought to it when read.
    pub fn hold_arguments_as_text(&mut self) {
        if let Self::Message(message) = self {
            for call in &mut message.tool_calls {
                if !call.arguments.is_string() {
                    call.arguments = Value::String(call.arguments_text().into_owned());
                }
            }
        }
    }

    /// A message's participant or tool name.
    pub fn name(&self) -> Option<&str> {
        match self {
            Self::Message(m) => m.name.as_deref(),
            _ => None,
        }
    }

    /// The role this event is shown with: a message's own; notes and episodes speak as the user.
    pub fn shown_role(&self) -> Role {
        self.role().unwrap_or(Role::User)
    }

    /// The text of this event as a view shows it in full: a message's own content (borrowed);
    /// notes and episodes as one line of user text.
    pub fn shown_text(&self) -> Cow<'_, str> {
        match self {
            Self::Message(m) => Cow::Borrowed(m.content.text()),
            Self::Note(n) => format!("[note] {}", n.content).into(),
            Self::EpisodeStart(e) => {
                let kind = match e.kind {
                    EpisodeKind::Exploration => "exploration",
                    EpisodeKind::Action => "action",
                };
                let mut text = format!("[episode started: {} ({kind})", e.name);
                if !e.dependencies.is_empty() {
                    text.push_str("; depends on ");
                    text.push_str(&e.dependencies.join(", "));
                }
                text.push(']');
                text.into()
            }
            Self::EpisodeEnd(e) => {
                format!("[episode finished: {}] {}", e.name, e.conclusion).into()
            }
        }
    }

    /// The token cost of this event shown in full: exactly what [`Tokenizer::count_message`]
    /// counts of the message a view shows for it.
    pub fn tokens(&self, tokenizer: Tokenizer) -> i64 {
        let calls = self
            .tool_calls()
            .iter()
            .map(|c| (c.name.as_str(), c.arguments_text()));
        let parts = match self {
            Self::Message(m) => parts_tokens(m.content.part_list(), tokenizer, false),
            _ => 0,
        };
        tokenizer.count_message(&self.shown_text(), calls, self.sent_name()) + parts
    }

    /// The name a provider is sent with the message: a participant's; a tool result's name is
    /// ctxd's own (no provider takes one).
    pub fn sent_name(&self) -> Option<&str> {
        match self.role() {
            Some(Role::Tool) => None,
            _ => self.name(),
        }
    }

    /// Whether this body says the same as `other` (tool-call arguments compared by their text).
    pub fn same_as(&self, other: &EventBody) -> bool {
        same_body(self, other)
    }

    /// The parts of a message's content (none for text content and other events).
    pub fn parts(&self) -> &[Part] {
        match self {
            Self::Message(m) => m.content.part_list(),
            _ => &[],
        }
    }

    /// The tokens of this event's reasoning, when it is sent back to the provider.
    pub fn reasoning_tokens(&self, tokenizer: Tokenizer) -> i64 {
        let parts = self.parts();
        if parts.iter().any(Part::is_reasoning) {
            parts_tokens(parts, tokenizer, true) - parts_tokens(parts, tokenizer, false)
        } else {
            0
        }
    }
}

/// A validated event, ready to be appended.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEvent {
    pub id: Option<String>,
    pub body: EventBody,
    pub pinned: bool,
    pub metadata: Option<Map<String, Value>>,
}

/// A stored event without its content: what the context report needs of an item.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    pub seq: i64,
    pub id: Option<String>,
    pub event_type: EventType,
    pub role: Option<Role>,
    pub pinned: bool,
    pub tokens: i64,
}

/// An event as stored: immutable once appended.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Event {
    /// Position in the session's log: 1, 2, 3…
    pub seq: i64,
    /// The client's id, when one was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(flatten)]
    pub body: EventBody,
    pub pinned: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<Map<String, Value>>,
    /// Token cost of the event with the session's tokenizer, computed once at append.
    pub tokens: i64,
    pub created_at: DateTime<Utc>,
}

impl Event {
    /// Whether `new` is the same event as this one (an idempotent retry).
    pub fn same_as(&self, new: &NewEvent) -> bool {
        self.pinned == new.pinned
            && self.metadata == new.metadata
            && same_body(&self.body, &new.body)
    }
}

/// Whether two bodies say the same. Tool-call arguments compare by the text a provider sees:
/// an event stored with its arguments as an object is the same as one that holds their text.
fn same_body(stored: &EventBody, new: &EventBody) -> bool {
    let (EventBody::Message(a), EventBody::Message(b)) = (stored, new) else {
        return stored == new;
    };
    a.role == b.role
        && a.content == b.content
        && a.tool_call_id == b.tool_call_id
        && a.name == b.name
        && a.is_error == b.is_error
        && a.tool_calls.len() == b.tool_calls.len()
        && a.tool_calls.iter().zip(&b.tool_calls).all(|(x, y)| {
            x.id == y.id && x.name == y.name && x.arguments_text() == y.arguments_text()
        })
}

impl EventInput {
    /// Checks every rule for this event's type and returns the event in its canonical form.
    /// `index` is the event's place in its batch, for the error messages.
    pub fn validate(mut self, index: usize) -> Result<NewEvent, Vec<FieldError>> {
        let id = self.id.take();
        let pinned = self.pinned.unwrap_or(false);
        let metadata = self.metadata.take();
        let mut errors = Vec::new();
        let mut fail = |field: &str, message: String| {
            errors.push(FieldError::at(index, field, message));
        };
        let type_name = self.kind.as_str();
        let forbid = |present: bool, field: &str, fail: &mut dyn FnMut(&str, String)| {
            if present {
                fail(field, format!("not allowed on a {type_name} event"));
            }
        };

        if let Some(id) = &id {
            if id.is_empty() || id.chars().count() > MAX_ID_CHARS {
                fail("id", format!("must have 1 to {MAX_ID_CHARS} characters"));
            } else if has_nul(id) {
                fail("id", NUL_MESSAGE.into());
            }
        }
        if let Some(metadata) = &metadata {
            if let Some(path) = nul_in_object("metadata", metadata) {
                fail(&path, NUL_MESSAGE.into());
            }
        }
        let text_content = match &self.content {
            Some(ContentInput::Text(text)) => Some(text.as_str()),
            _ => None,
        };
        for (field, text) in [
            ("name", self.name.as_deref()),
            ("content", text_content),
            ("conclusion", self.conclusion.as_deref()),
        ] {
            if text.is_some_and(has_nul) {
                fail(field, NUL_MESSAGE.into());
            }
        }

        let body = match self.kind {
            EventType::Message => {
                forbid(self.episode_kind.is_some(), "kind", &mut fail);
                forbid(self.dependencies.is_some(), "dependencies", &mut fail);
                forbid(self.conclusion.is_some(), "conclusion", &mut fail);
                validate_message(self, &mut fail).map(EventBody::Message)
            }
            EventType::EpisodeStart | EventType::EpisodeEnd => {
                forbid(self.role.is_some(), "role", &mut fail);
                forbid(self.content.is_some(), "content", &mut fail);
                forbid(self.tool_calls.is_some(), "tool_calls", &mut fail);
                forbid(self.tool_call_id.is_some(), "tool_call_id", &mut fail);
                forbid(self.is_error.is_some(), "is_error", &mut fail);
                let name = required_name(self.name, "name", &mut fail);
                if self.kind == EventType::EpisodeStart {
                    forbid(self.conclusion.is_some(), "conclusion", &mut fail);
                    let dependencies = self.dependencies.unwrap_or_default();
                    if dependencies.iter().any(|d| d.is_empty()) {
                        fail("dependencies", "episode names must not be empty".into());
                    }
                    if let Some(i) = dependencies.iter().position(|d| has_nul(d)) {
                        fail(&format!("dependencies[{i}]"), NUL_MESSAGE.into());
                    }
                    match (name, self.episode_kind) {
                        (Some(name), Some(kind)) => Some(EventBody::EpisodeStart(EpisodeStart {
                            name,
                            kind,
                            dependencies,
                        })),
                        (_, None) => {
                            fail("kind", "required: exploration or action".into());
                            None
                        }
                        _ => None,
                    }
                } else {
                    forbid(self.episode_kind.is_some(), "kind", &mut fail);
                    forbid(self.dependencies.is_some(), "dependencies", &mut fail);
                    name.map(|name| {
                        EventBody::EpisodeEnd(EpisodeEnd {
                            name,
                            conclusion: self.conclusion.unwrap_or_default(),
                        })
                    })
                }
            }
            EventType::Note => {
                forbid(self.role.is_some(), "role", &mut fail);
                forbid(self.tool_calls.is_some(), "tool_calls", &mut fail);
                forbid(self.tool_call_id.is_some(), "tool_call_id", &mut fail);
                forbid(self.name.is_some(), "name", &mut fail);
                forbid(self.is_error.is_some(), "is_error", &mut fail);
                forbid(self.episode_kind.is_some(), "kind", &mut fail);
                forbid(self.dependencies.is_some(), "dependencies", &mut fail);
                forbid(self.conclusion.is_some(), "conclusion", &mut fail);
                match self.content {
                    Some(ContentInput::Text(content)) if !content.is_empty() => {
                        Some(EventBody::Note(Note { content }))
                    }
                    _ => {
                        fail("content", "required: a non-empty string".into());
                        None
                    }
                }
            }
        };

        match body {
            Some(mut body) if errors.is_empty() => {
                body.hold_arguments_as_text();
                Ok(NewEvent {
                    id,
                    body,
                    pinned,
                    metadata,
                })
            }
            _ => Err(errors),
        }
    }
}

fn required_name(
    name: Option<String>,
    field: &str,
    fail: &mut dyn FnMut(&str, String),
) -> Option<String> {
    match name {
        Some(n) if !n.is_empty() && n.chars().count() <= MAX_NAME_CHARS => Some(n),
        _ => {
            fail(
                field,
                format!("required, with 1 to {MAX_NAME_CHARS} characters"),
            );
            None
        }
    }
}

fn validate_message(input: EventInput, fail: &mut dyn FnMut(&str, String)) -> Option<Message> {
    let Some(role) = input.role else {
        fail(
            "role",
            "required on a message: system, user, assistant or tool".into(),
        );
        return None;
    };
    let tool_calls = input.tool_calls.unwrap_or_default();
    if role != Role::Assistant && !tool_calls.is_empty() {
        fail(
            "tool_calls",
            format!(
                "only assistant messages issue tool calls, not {}",
                role.as_str()
            ),
        );
    }
    for (i, call) in tool_calls.iter().enumerate() {
        if call.id.is_empty() || call.id.chars().count() > MAX_ID_CHARS {
            fail(
                &format!("tool_calls[{i}].id"),
                format!("must have 1 to {MAX_ID_CHARS} characters"),
            );
        } else if has_nul(&call.id) {
            fail(&format!("tool_calls[{i}].id"), NUL_MESSAGE.into());
        } else if tool_calls[..i].iter().any(|c| c.id == call.id) {
            fail(
                &format!("tool_calls[{i}].id"),
                format!("call id `{}` appears twice in this message", call.id),
            );
        }
        if call.name.is_empty() || call.name.chars().count() > MAX_NAME_CHARS {
            fail(
                &format!("tool_calls[{i}].name"),
                format!("must have 1 to {MAX_NAME_CHARS} characters"),
            );
        } else if has_nul(&call.name) {
            fail(&format!("tool_calls[{i}].name"), NUL_MESSAGE.into());
        }
        let arguments = format!("tool_calls[{i}].arguments");
        if !matches!(call.arguments, Value::String(_) | Value::Object(_)) {
            fail(&arguments, "must be a JSON string or object".into());
        } else if let Some(path) = nul_in_json(&arguments, &call.arguments) {
            fail(&path, NUL_MESSAGE.into());
        }
    }
    let mut unreadable = false;
    let content = match input.content {
        Some(ContentInput::Parts(items)) => match read_parts(&items, "content") {
            Ok(parts) => Content::parts(parts),
            Err(errors) => {
                for (path, message) in errors {
                    fail(&path, message);
                }
                unreadable = true;
                Content::default()
            }
        },
        Some(ContentInput::Text(text)) => Content::Text(text),
        None => Content::default(),
    };
    let parts = content.part_list();
    if role != Role::Assistant && parts.iter().any(Part::is_reasoning) {
        fail(
            "content",
            "only assistant messages carry thinking or reasoning".into(),
        );
    }
    // A command that prints nothing has a result with no output; an assistant message may carry
    // only tool calls or only reasoning.
    let may_be_empty = role == Role::Tool
        || (role == Role::Assistant
            && (!tool_calls.is_empty() || parts.iter().any(Part::is_reasoning)));
    let says_nothing =
        content.text().is_empty() && !parts.iter().any(|p| matches!(p, Part::Image(_)));
    if says_nothing && !may_be_empty && !unreadable {
        fail(
            "content",
            "required and must not be empty (only a tool result, or an assistant message with \
             tool calls or reasoning, may be empty)"
                .into(),
        );
    }
    let (tool_call_id, is_error) = if role == Role::Tool {
        let id = match input.tool_call_id {
            Some(id) if has_nul(&id) => {
                fail("tool_call_id", NUL_MESSAGE.into());
                None
            }
            Some(id) if !id.is_empty() => Some(id),
            _ => {
                fail(
                    "tool_call_id",
                    "required on a tool result: the id of the call it answers".into(),
                );
                None
            }
        };
        (id, Some(input.is_error.unwrap_or(false)))
    } else {
        if input.tool_call_id.is_some() {
            fail("tool_call_id", "only tool messages answer a call".into());
        }
        if input.is_error.is_some() {
            fail("is_error", "only tool messages carry is_error".into());
        }
        (None, None)
    };
    if let Some(name) = &input.name {
        if name.is_empty() || name.chars().count() > MAX_NAME_CHARS {
            fail(
                "name",
                format!("must have 1 to {MAX_NAME_CHARS} characters"),
            );
        }
    }
    Some(Message {
        role,
        content,
        tool_calls,
        tool_call_id,
        name: input.name,
        is_error,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn validate(v: Value) -> Result<NewEvent, Vec<FieldError>> {
        serde_json::from_value::<EventInput>(v).unwrap().validate(3)
    }

    fn fields(v: Value) -> Vec<String> {
        validate(v)
            .expect_err("expected a validation error")
            .into_iter()
            .map(|e| {
                assert_eq!(e.index, Some(3));
                e.field
            })
            .collect()
    }

    #[test]
    fn a_valid_message_of_each_role() {
        for role in ["system", "user", "assistant"] {
            let e = validate(json!({"type": "message", "role": role, "content": "hi"})).unwrap();
            assert_eq!(e.body.role().unwrap().as_str(), role);
        }
        let e =
            validate(json!({"type":"message","role":"tool","tool_call_id":"c1","content":"ok"}))
                .unwrap();
        assert_eq!(e.body.tool_call_id(), Some("c1"));
        let EventBody::Message(m) = e.body else {
            panic!()
        };
        assert_eq!(
            m.is_error,
            Some(false),
            "a tool result's is_error defaults to false"
        );
    }

    #[test]
    fn empty_content_only_on_a_tool_result_or_an_assistant_tool_call() {
        let ok = validate(json!({"type":"message","role":"assistant",
            "tool_calls":[{"id":"c1","name":"ls","arguments":"{}"}]}));
        assert!(ok.is_ok());
        for result in [
            json!({"type":"message","role":"tool","tool_call_id":"c1","content":""}),
            json!({"type":"message","role":"tool","tool_call_id":"c1"}),
        ] {
            let event = validate(result).expect("a result with no output is valid");
            assert_eq!(event.body.shown_text(), "");
        }
        assert_eq!(
            fields(json!({"type":"message","role":"user","content":""})),
            ["content"]
        );
        assert_eq!(
            fields(json!({"type":"message","role":"assistant"})),
            ["content"]
        );
        assert_eq!(
            fields(json!({"type":"message","role":"system","content":""})),
            ["content"]
        );
    }

    #[test]
    fn fields_of_other_roles_and_types_are_named() {
        assert_eq!(fields(json!({"type":"message","content":"x"})), ["role"]);
        assert_eq!(
            fields(json!({"type":"message","role":"tool","content":"x"})),
            ["tool_call_id"]
        );
        assert_eq!(
            fields(json!({"type":"message","role":"user","content":"x","tool_call_id":"c"})),
            ["tool_call_id"]
        );
        assert_eq!(
            fields(json!({"type":"message","role":"user","content":"x",
                "tool_calls":[{"id":"c","name":"n"}]})),
            ["tool_calls"]
        );
        assert_eq!(
            fields(json!({"type":"message","role":"assistant",
                "tool_calls":[{"id":"c","name":"n"},{"id":"c","name":""}]})),
            ["tool_calls[1].id", "tool_calls[1].name"]
        );
        assert_eq!(fields(json!({"type":"note","content":""})), ["content"]);
        assert_eq!(
            fields(json!({"type":"note","content":"x","role":"user"})),
            ["role"]
        );
        assert_eq!(fields(json!({"type":"episode_start","name":"e"})), ["kind"]);
        assert_eq!(
            fields(json!({"type":"episode_end","kind":"action"})),
            ["name", "kind"]
        );
        assert_eq!(
            fields(json!({"type":"message","role":"user","content":"x","id":""})),
            ["id"]
        );
    }

    #[test]
    fn ids_names_and_metadata_refuse_the_nul_character() {
        let nul = "a\u{0}b";
        assert_eq!(
            fields(json!({"type":"message","role":"user","content":"x","id":nul})),
            ["id"]
        );
        assert_eq!(
            fields(json!({"type":"message","role":"user","content":"x","name":nul})),
            ["name"]
        );
        assert_eq!(
            fields(json!({"type":"message","role":"tool","content":"x","tool_call_id":nul})),
            ["tool_call_id"]
        );
        assert_eq!(
            fields(json!({"type":"message","role":"assistant",
                "tool_calls":[{"id":"c","name":"n"},{"id":nul,"name":nul}]})),
            ["tool_calls[1].id", "tool_calls[1].name"]
        );
        assert_eq!(
            fields(json!({"type":"episode_start","name":nul,"kind":"action"})),
            ["name"]
        );
        assert_eq!(
            fields(json!({"type":"episode_start","name":"e","kind":"action",
                "dependencies":["a",nul]})),
            ["dependencies[1]"]
        );
        assert_eq!(
            fields(json!({"type":"note","content":"x","metadata":{"a":[1,{"b":nul}]}})),
            ["metadata.a[1].b"]
        );
        assert_eq!(
            fields(json!({"type":"note","content":"x","metadata":{"a":{nul:1}}})),
            [format!("metadata.a.{nul}")]
        );
        // Nor does any text that compaction may copy into its (PostgreSQL `jsonb`) state.
        assert_eq!(
            fields(json!({"type":"message","role":"user","content":nul})),
            ["content"]
        );
        assert_eq!(fields(json!({"type":"note","content":nul})), ["content"]);
        assert_eq!(
            fields(json!({"type":"episode_end","name":"e","conclusion":nul})),
            ["conclusion"]
        );
        assert_eq!(
            fields(json!({"type":"message","role":"assistant",
                "tool_calls":[{"id":"c","name":"n","arguments":nul},
                    {"id":"d","name":"n","arguments":{"cmd":[nul]}}]})),
            ["tool_calls[0].arguments", "tool_calls[1].arguments.cmd[0]"]
        );
    }

    #[test]
    fn unknown_type_role_or_field_fails_to_parse() {
        for v in [
            json!({"type":"thought","content":"x"}),
            json!({"type":"message","role":"bot","content":"x"}),
            json!({"type":"message","role":"user","content":"x","colour":"red"}),
        ] {
            assert!(serde_json::from_value::<EventInput>(v).is_err());
        }
    }

    #[test]
    fn stored_form_round_trips_and_is_flat() {
        let e = validate(
            json!({"type":"episode_start","name":"explore","kind":"exploration",
            "dependencies":["setup"],"pinned":true}),
        )
        .unwrap();
        let json = serde_json::to_value(&e.body).unwrap();
        assert_eq!(
            json,
            json!({"type":"episode_start","name":"explore","kind":"exploration","dependencies":["setup"]})
        );
        assert_eq!(serde_json::from_value::<EventBody>(json).unwrap(), e.body);
        assert!(e.pinned);
    }

    #[test]
    fn a_retry_is_the_same_event_whichever_form_its_arguments_take() {
        let call = |arguments: Value| {
            validate(json!({"type": "message", "role": "assistant",
                "tool_calls": [{"id": "c1", "name": "ls", "arguments": arguments}]}))
            .expect("valid")
        };
        let stored = |new: NewEvent| Event {
            seq: 1,
            id: None,
            tokens: 1,
            body: new.body,
            pinned: new.pinned,
            metadata: new.metadata,
            created_at: Utc::now(),
        };
        let object = stored(call(json!({"path": "src"})));
        assert!(object.same_as(&call(json!("{\"path\":\"src\"}"))));
        assert!(object.same_as(&call(json!({"path": "src"}))));
        assert!(!object.same_as(&call(json!({"path": "lib"}))));
    }
}
