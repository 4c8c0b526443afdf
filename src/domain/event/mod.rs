//! Events: the immutable entries of a session's log, as clients send them and as ctxd stores them.

use std::borrow::Cow;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

use super::content::schema::MessageContent;
use super::content::{parts_tokens, Content, Part};
use crate::tokens::Tokenizer;

mod call;
mod paths;
mod requests;
pub use call::{CallKind, ShellOutcome, ToolCall, ARCHIVED_ARGUMENTS_KEY};
pub use paths::{
    argument_text, editor_command, file_paths, is_slash_command, named_path, reads_documents_only,
    unwrapped, walk_strings, without_here_documents, without_patch_bodies, without_written_text,
    words, WRITTEN_TEXT_KEYS,
};
pub use requests::{
    constraint_lines, instructions_title, is_markup_only, is_request, request_text, rule_lines,
    stated_working_directory, states_a_rule,
};

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
    /// What a replica works out from the content once and keeps while it holds the event in
    /// memory; never stored or sent.
    #[serde(skip)]
    pub derived: Derived,
}

/// What a replica works out from an event once and keeps while it holds the event: the text
/// of each way the event can be shown reduced, and for a tool result whether its call only
/// read documents. A view shows many items reduced, and each would otherwise be cut and
/// searched for its error lines again on every call. It never makes two events differ.
#[derive(Debug, Clone, Default)]
pub struct Derived {
    shown: [std::sync::OnceLock<ShownText>; 5],
    answers_document_read: std::sync::OnceLock<bool>,
}

/// The ways the engine shows an event reduced, each kept with the event once made.
#[derive(Debug, Clone, Copy)]
pub enum ShownAs {
    Preview,
    Excerpt,
    Reference,
    Archived,
    /// A call's long arguments by reference (`view::archived`).
    ArchivedCalls,
}

/// A reduced text and what it was made from.
#[derive(Debug, Clone)]
struct ShownText {
    key: [i64; 3],
    text: String,
}

impl Derived {
    /// The text the event is shown as `kind`, made from `key` (the sizes it depends on) by
    /// `make`. The first text of each kind is kept and borrowed while its key is asked for
    /// again; another key's is made afresh each time.
    pub fn shown(&self, kind: ShownAs, key: [i64; 3], make: impl Fn() -> String) -> Cow<'_, str> {
        let kept = self.shown[kind as usize].get_or_init(|| ShownText { key, text: make() });
        if kept.key == key {
            Cow::Borrowed(&kept.text)
        } else {
            Cow::Owned(make())
        }
    }

    /// Whether this tool result answers a call that only read documents
    /// ([`reads_documents_only`]): its lines about errors are the documents' text, none an
    /// error seen. False until [`answers_call`](Self::answers_call) said otherwise.
    pub fn answers_document_read(&self) -> bool {
        self.answers_document_read.get().copied().unwrap_or(false)
    }

    /// Notes the call this tool result answers (`None`: it is not at hand), once: a later
    /// note changes nothing.
    pub fn answers_call(&self, call: Option<&ToolCall>) {
        self.answers_document_read
            .get_or_init(|| call.is_some_and(ToolCall::reads_documents_only));
    }

    /// Whether the call this tool result answers has been noted.
    pub fn knows_its_call(&self) -> bool {
        self.answers_document_read.get().is_some()
    }

    /// The bytes the kept texts hold.
    pub fn bytes(&self) -> usize {
        let kept = self.shown.iter().filter_map(|shown| shown.get());
        kept.map(|shown| std::mem::size_of::<ShownText>() + shown.text.len())
            .sum()
    }
}

impl PartialEq for Derived {
    fn eq(&self, _: &Self) -> bool {
        true
    }
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
            x.id == y.id
                && x.name == y.name
                && x.kind == y.kind
                && x.arguments_text() == y.arguments_text()
        })
}

#[cfg(test)]
mod tests;
mod validate;
