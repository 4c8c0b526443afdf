//! The stored event as the OpenAPI document describes it: one named schema per event type,
//! discriminated on `type`, so that a generated client gets one class per type. These types only
//! describe the wire format of [`crate::domain::event::Event`] (its body flattened beside the
//! stored fields); tests/api/schema.rs validates real answers against them.
#![allow(dead_code)]

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{Map, Value};
use utoipa::ToSchema;

use crate::domain::content::schema::MessageContent;
use crate::domain::event::{EpisodeKind, Role, ToolCall};

/// An event as stored: immutable once appended. `type` says which fields it has.
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
#[schema(as = Event, discriminator(property_name = "type", mapping(
    ("message" = "#/components/schemas/MessageEvent"),
    ("episode_start" = "#/components/schemas/EpisodeStartEvent"),
    ("episode_end" = "#/components/schemas/EpisodeEndEvent"),
    ("note" = "#/components/schemas/NoteEvent")
)))]
pub enum StoredEvent {
    Message(MessageEvent),
    EpisodeStart(EpisodeStartEvent),
    EpisodeEnd(EpisodeEndEvent),
    Note(NoteEvent),
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum MessageType {
    Message,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum EpisodeStartType {
    EpisodeStart,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum EpisodeEndType {
    EpisodeEnd,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum NoteType {
    Note,
}

/// A stored tool call.
#[derive(Serialize, ToSchema)]
pub struct StoredToolCall {
    /// The provider's call id; the tool result answers it with `tool_call_id`.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments as the JSON text a provider sees, whether they were sent as a string or as
    /// an object.
    pub arguments: String,
    /// `custom` for a call of a freeform tool, whose arguments are `{"input": text}`; `shell`
    /// or `apply_patch` for a call of OpenAI's built-in tool of that name, whose arguments are
    /// its `action` or `operation`; omitted for a function call.
    #[schema(required = false)]
    pub kind: crate::domain::event::CallKind,
}

/// A message of the conversation, as stored.
#[derive(Serialize, ToSchema)]
pub struct MessageEvent {
    #[serde(rename = "type")]
    #[schema(inline)]
    pub kind: MessageType,
    /// Position in the session's log: 1, 2, 3…
    pub seq: i64,
    /// The client's id, when one was given.
    #[schema(required = false)]
    pub id: String,
    pub role: Role,
    /// The text, or the parts; may be empty on a tool result and on an assistant message with
    /// tool calls or reasoning.
    #[schema(value_type = MessageContent)]
    pub content: Value,
    /// Assistant messages: the tool calls it issues (absent when none).
    #[schema(required = false)]
    pub tool_calls: Vec<StoredToolCall>,
    /// Tool results: the call this result answers.
    #[schema(required = false)]
    pub tool_call_id: String,
    /// The participant or tool name, when one was given.
    #[schema(required = false)]
    pub name: String,
    /// Tool results: whether the tool failed.
    #[schema(required = false)]
    pub is_error: bool,
    pub pinned: bool,
    /// The client's free-form JSON object, when one was given.
    #[schema(value_type = Object, required = false)]
    pub metadata: Map<String, Value>,
    /// Token cost of the event with the session's tokenizer, computed once at append.
    pub tokens: i64,
    pub created_at: DateTime<Utc>,
}

/// The start of an exploration or action episode, as stored.
#[derive(Serialize, ToSchema)]
pub struct EpisodeStartEvent {
    #[serde(rename = "type")]
    #[schema(inline)]
    pub kind: EpisodeStartType,
    /// Position in the session's log: 1, 2, 3…
    pub seq: i64,
    /// The client's id, when one was given.
    #[schema(required = false)]
    pub id: String,
    /// The episode's name.
    pub name: String,
    #[serde(rename = "kind")]
    pub episode_kind: EpisodeKind,
    /// Names of the episodes this one depends on.
    pub dependencies: Vec<String>,
    pub pinned: bool,
    /// The client's free-form JSON object, when one was given.
    #[schema(value_type = Object, required = false)]
    pub metadata: Map<String, Value>,
    /// Token cost of the event with the session's tokenizer, computed once at append.
    pub tokens: i64,
    pub created_at: DateTime<Utc>,
}

/// The end of an episode, with what it established, as stored.
#[derive(Serialize, ToSchema)]
pub struct EpisodeEndEvent {
    #[serde(rename = "type")]
    #[schema(inline)]
    pub kind: EpisodeEndType,
    /// Position in the session's log: 1, 2, 3…
    pub seq: i64,
    /// The client's id, when one was given.
    #[schema(required = false)]
    pub id: String,
    /// The episode's name.
    pub name: String,
    /// What the episode established.
    pub conclusion: String,
    pub pinned: bool,
    /// The client's free-form JSON object, when one was given.
    #[schema(value_type = Object, required = false)]
    pub metadata: Map<String, Value>,
    /// Token cost of the event with the session's tokenizer, computed once at append.
    pub tokens: i64,
    pub created_at: DateTime<Utc>,
}

/// A pinned decision or constraint, as stored.
#[derive(Serialize, ToSchema)]
pub struct NoteEvent {
    #[serde(rename = "type")]
    #[schema(inline)]
    pub kind: NoteType,
    /// Position in the session's log: 1, 2, 3…
    pub seq: i64,
    /// The client's id, when one was given.
    #[schema(required = false)]
    pub id: String,
    /// The note's text.
    pub content: String,
    pub pinned: bool,
    /// The client's free-form JSON object, when one was given.
    #[schema(value_type = Object, required = false)]
    pub metadata: Map<String, Value>,
    /// Token cost of the event with the session's tokenizer, computed once at append.
    pub tokens: i64,
    pub created_at: DateTime<Utc>,
}

/// One event of a batch, as a client sends it. `type` says which fields it takes; a field of
/// another type is refused.
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
#[schema(as = EventInput, discriminator(property_name = "type", mapping(
    ("message" = "#/components/schemas/MessageInput"),
    ("episode_start" = "#/components/schemas/EpisodeStartInput"),
    ("episode_end" = "#/components/schemas/EpisodeEndInput"),
    ("note" = "#/components/schemas/NoteInput")
)))]
pub enum EventInputSchema {
    Message(MessageInput),
    EpisodeStart(EpisodeStartInput),
    EpisodeEnd(EpisodeEndInput),
    Note(NoteInput),
}

/// A message to append.
#[derive(Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MessageInput {
    #[serde(rename = "type")]
    #[schema(inline)]
    pub kind: MessageType,
    /// The client's id for this event; appending it again is idempotent.
    #[schema(required = false, min_length = 1, max_length = 256)]
    pub id: String,
    pub role: Role,
    /// The text, or the provider's parts (OpenAI content parts, Anthropic content blocks,
    /// Responses content or `reasoning` items, or ctxd's own parts). May be empty or absent only
    /// on a tool result and on an assistant message with tool calls or reasoning.
    #[schema(value_type = MessageContent, required = false)]
    pub content: Value,
    /// Assistant messages: the tool calls it issues.
    #[schema(required = false)]
    pub tool_calls: Vec<ToolCall>,
    /// Tool results (required there): the call this result answers.
    #[schema(required = false, min_length = 1, max_length = 256)]
    pub tool_call_id: String,
    /// The participant or tool name.
    #[schema(required = false, min_length = 1, max_length = 256)]
    pub name: String,
    /// Tool results: whether the tool failed (default false).
    #[schema(required = false)]
    pub is_error: bool,
    /// Pinned events are never evicted from a view (default false).
    #[schema(required = false)]
    pub pinned: bool,
    /// Free-form JSON object kept with the event.
    #[schema(value_type = Object, required = false)]
    pub metadata: Map<String, Value>,
}

/// The start of an episode, to append.
#[derive(Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EpisodeStartInput {
    #[serde(rename = "type")]
    #[schema(inline)]
    pub kind: EpisodeStartType,
    /// The client's id for this event; appending it again is idempotent.
    #[schema(required = false, min_length = 1, max_length = 256)]
    pub id: String,
    /// The episode's name.
    #[schema(min_length = 1, max_length = 256)]
    pub name: String,
    #[serde(rename = "kind")]
    pub episode_kind: EpisodeKind,
    /// Names of the episodes this one depends on.
    #[schema(required = false)]
    pub dependencies: Vec<String>,
    /// Pinned events are never evicted from a view (default false).
    #[schema(required = false)]
    pub pinned: bool,
    /// Free-form JSON object kept with the event.
    #[schema(value_type = Object, required = false)]
    pub metadata: Map<String, Value>,
}

/// The end of an episode, to append.
#[derive(Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EpisodeEndInput {
    #[serde(rename = "type")]
    #[schema(inline)]
    pub kind: EpisodeEndType,
    /// The client's id for this event; appending it again is idempotent.
    #[schema(required = false, min_length = 1, max_length = 256)]
    pub id: String,
    /// The episode's name.
    #[schema(min_length = 1, max_length = 256)]
    pub name: String,
    /// What the episode established.
    #[schema(required = false)]
    pub conclusion: String,
    /// Pinned events are never evicted from a view (default false).
    #[schema(required = false)]
    pub pinned: bool,
    /// Free-form JSON object kept with the event.
    #[schema(value_type = Object, required = false)]
    pub metadata: Map<String, Value>,
}

/// A pinned decision or constraint, to append.
#[derive(Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NoteInput {
    #[serde(rename = "type")]
    #[schema(inline)]
    pub kind: NoteType,
    /// The client's id for this event; appending it again is idempotent.
    #[schema(required = false, min_length = 1, max_length = 256)]
    pub id: String,
    /// The note's text.
    #[schema(min_length = 1)]
    pub content: String,
    /// Pinned events are never evicted from a view (default false).
    #[schema(required = false)]
    pub pinned: bool,
    /// Free-form JSON object kept with the event.
    #[schema(value_type = Object, required = false)]
    pub metadata: Map<String, Value>,
}
