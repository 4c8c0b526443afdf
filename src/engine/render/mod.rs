//! Renderers: a view's messages as the request a provider accepts.
//!
//! The engine hands over messages in log order, where a tool result may stand after other
//! messages and the results of one turn may come in any order. Every renderer for a provider
//! first gives a call whose id an earlier call reused an id of its own (`distinct_call_ids`),
//! attaches each result to the call it answers (`pair_tool_results`) and then writes the
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

use foldhash::{HashMap, HashSet};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::domain::compaction::{Projection, ViewMessage};
use crate::domain::content::Part;
use crate::domain::event::{Role, ToolCall};
use crate::domain::pairing::OpenCalls;

mod anthropic;
mod fragments;
mod openai;
mod responses;
#[cfg(test)]
mod tests;

use anthropic::anthropic;
use openai::openai;
use responses::responses;

pub use anthropic::{without_cache_control, AnthropicRequest};
pub use fragments::{write_view, Fragments, ReusingView};
pub use openai::OpenaiRequest;
pub use responses::ResponsesRequest;

/// The first user message of an Anthropic request whose view would start with the assistant
/// (or has no message besides the system prompt): Anthropic requires a user message first.
pub const CONVERSATION_CONTINUES: &str = "(conversation continues)";

/// The result shown for a call that has none in the view.
const MISSING_RESULT: &str = "No result was recorded for this tool call.";

/// The content of a failed result that has none: Anthropic rejects an empty error result.
const EMPTY_ERROR_RESULT: &str = "The tool failed without output.";

/// The provider shape a view is rendered in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    /// OpenAI chat-completions `messages`.
    #[default]
    Openai,
    /// OpenAI Responses `input` items.
    OpenaiResponses,
    /// Anthropic Messages `system` and `messages`.
    Anthropic,
    /// ctxd's view messages as they are.
    Raw,
}

impl Format {
    /// Whether a view in this format sends `part` back when it is reasoning of the current
    /// tool loop: Anthropic takes its thinking, Responses its reasoning items, chat
    /// completions neither; `raw` shows every part.
    pub fn sends_reasoning(self, part: &Part) -> bool {
        match self {
            Self::Openai => false,
            Self::OpenaiResponses => matches!(part, Part::Reasoning { .. }),
            Self::Anthropic => {
                matches!(part, Part::Thinking { .. } | Part::RedactedThinking { .. })
            }
            Self::Raw => part.is_reasoning(),
        }
    }
}

/// A view rendered for a provider, borrowing the view's text; serialise it to get the request.
#[derive(Serialize)]
#[serde(untagged)]
pub enum Rendered<'a> {
    Openai(OpenaiRequest<'a>),
    OpenaiResponses(ResponsesRequest<'a>),
    Anthropic(AnthropicRequest<'a>),
    Raw(RawRequest<'a>),
}

/// Renders `messages` in `format`, ready to serialise; for a provider, `messages` must have
/// been through [`as_sent`].
fn rendered<'a>(format: Format, messages: &'a [ViewMessage<'a>]) -> Rendered<'a> {
    match format {
        Format::Openai => Rendered::Openai(openai(messages)),
        Format::OpenaiResponses => Rendered::OpenaiResponses(responses(messages)),
        Format::Anthropic => Rendered::Anthropic(anthropic(messages)),
        Format::Raw => Rendered::Raw(RawRequest { items: messages }),
    }
}

/// Renders `messages` in `format` as a JSON value.
pub fn render(format: Format, messages: &[ViewMessage<'_>]) -> Value {
    to_value(&rendered(format, &as_sent(format, messages)))
}

/// `{"messages": [...]}` in OpenAI chat-completions form, as a JSON value.
pub fn render_openai(messages: &[ViewMessage<'_>]) -> Value {
    to_value(&openai(&distinct_call_ids(messages)))
}

/// `{"input": [...]}` in OpenAI Responses form, as a JSON value.
pub fn render_responses(messages: &[ViewMessage<'_>]) -> Value {
    to_value(&responses(&distinct_call_ids(messages)))
}

/// `{"system": "...", "messages": [...]}` in Anthropic Messages form, as a JSON value.
pub fn render_anthropic(messages: &[ViewMessage<'_>]) -> Value {
    to_value(&anthropic(&distinct_call_ids(messages)))
}

/// `messages` as `format` sends them: to a provider, with every call's id its own
/// ([`distinct_call_ids`]); `raw` as ctxd holds them.
fn as_sent<'v, 'a>(format: Format, messages: &'v [ViewMessage<'a>]) -> Cow<'v, [ViewMessage<'a>]> {
    match format {
        Format::Raw => Cow::Borrowed(messages),
        _ => distinct_call_ids(messages),
    }
}

/// `messages` with no call id used twice. A provider takes a call id once a request (Anthropic:
/// "`tool_use` ids must be unique"; Responses: one `function_call` a `call_id`), but a client
/// may reuse one, and a result answers the most recent open call of its id
/// ([`OpenCalls`]). A call whose id an earlier call of the view already has goes by
/// `{id}_{n}` (the smallest n from 2 that no earlier call of the view goes by, the id cut so
/// that the whole stays within OpenAI's 40 characters when it was), and so does the result
/// that answers it. Only earlier calls count, so a call goes by the same id as the view grows
/// at its end and the view still extends the previous one. A message this changes is a copy
/// without its seq, so that no writer reuses the JSON of the message as stored (see
/// [`PartKey`]). Borrowed when no id is reused.
fn distinct_call_ids<'v, 'a>(messages: &'v [ViewMessage<'a>]) -> Cow<'v, [ViewMessage<'a>]> {
    let mut seen: HashSet<&str> = HashSet::default();
    let mut calls = messages.iter().flat_map(|m| tool_calls_of(m).iter());
    if calls.all(|call| seen.insert(&call.id)) {
        return Cow::Borrowed(messages);
    }
    let mut sent = messages.to_vec();
    let mut issued: HashSet<String> = HashSet::default();
    let mut open: OpenCalls<'v, (usize, usize)> = OpenCalls::default();
    // The id each renamed call goes by, by (message, call).
    let mut renamed: HashMap<(usize, usize), String> = HashMap::default();
    for (i, message) in messages.iter().enumerate() {
        if message.role == Role::Tool {
            let call = message
                .tool_call_id
                .as_deref()
                .and_then(|id| open.answer(id));
            if let Some(id) = call.and_then(|at| renamed.get(&at)) {
                sent[i].tool_call_id = Some(Cow::Owned(id.clone()));
                sent[i].seq = None;
            }
            continue;
        }
        for (k, call) in tool_calls_of(message).iter().enumerate() {
            open.issue(&call.id, (i, k));
            if issued.insert(call.id.clone()) {
                continue;
            }
            let id = (2..)
                .map(|n| another_id(&call.id, n))
                .find(|id| !issued.contains(id))
                .unwrap_or_default();
            issued.insert(id.clone());
            sent[i].tool_calls.to_mut()[k].id = id.clone();
            sent[i].seq = None;
            renamed.insert((i, k), id);
        }
    }
    Cow::Owned(sent)
}

/// The longest call id OpenAI's chat completions take.
const MAX_CALL_ID_CHARS: usize = 40;

/// `{id}_{n}`; when `id` is within [`MAX_CALL_ID_CHARS`], cut so that the whole stays within.
fn another_id(id: &str, n: usize) -> String {
    let suffix = format!("_{n}");
    let chars = id.chars().count();
    let keep = if chars <= MAX_CALL_ID_CHARS {
        chars.min(MAX_CALL_ID_CHARS.saturating_sub(suffix.len()))
    } else {
        chars
    };
    format!("{}{suffix}", crate::domain::text::prefix_chars(id, keep))
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
/// event it shows, how it is shown (with its reasoning or not), and which of the message's
/// parts it is. Such a part renders
/// the same on every call, so a writer may reuse its JSON (see [`write_view`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PartKey {
    pub seq: i64,
    pub projection: Projection,
    /// Whether the message's reasoning is sent: its parts differ when it is.
    pub reasoning: bool,
    pub index: u16,
}

impl PartKey {
    fn of(message: &ViewMessage<'_>, index: usize) -> Option<Self> {
        Some(Self {
            seq: message.seq?,
            projection: message.projection,
            reasoning: message.reasoning,
            index: u16::try_from(index).ok()?,
        })
    }
}

/// A part of a request with what it is made from, when that is one message alone; it
/// serialises as the part.
pub struct Keyed<T> {
    key: Option<PartKey>,
    part: T,
    /// An Anthropic cache breakpoint: the part is sent with `cache_control` (see
    /// [`anthropic::mark_breakpoints`]), and written afresh, as it is marked on this call only.
    breakpoint: bool,
}

impl<T> Keyed<T> {
    fn by(key: Option<PartKey>, part: T) -> Self {
        Self {
            key,
            part,
            breakpoint: false,
        }
    }

    fn fresh(part: T) -> Self {
        Self::by(None, part)
    }

    /// A part sent with an Anthropic cache breakpoint.
    fn marked(part: T) -> Self {
        Self {
            breakpoint: true,
            ..Self::fresh(part)
        }
    }

    /// What a writer may reuse the part's JSON by: none for a breakpoint.
    fn reusable_key(&self) -> Option<PartKey> {
        self.key.filter(|_| !self.breakpoint)
    }
}

impl<T: Serialize> Serialize for Keyed<T> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if !self.breakpoint {
            return self.part.serialize(serializer);
        }
        #[derive(Serialize)]
        struct Marked<'p, T> {
            #[serde(flatten)]
            part: &'p T,
            cache_control: anthropic::CacheControl,
        }
        Marked {
            part: &self.part,
            cache_control: anthropic::CacheControl::EPHEMERAL,
        }
        .serialize(serializer)
    }
}

/// `{"items": [...]}`.
#[derive(Serialize)]
pub struct RawRequest<'a> {
    items: &'a [ViewMessage<'a>],
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
    // Each unanswered call by (index in `placed`, index of the call in its message).
    let mut open = OpenCalls::with_capacity(messages.len() / 2);
    for message in messages {
        if message.role == Role::Tool {
            let call = message
                .tool_call_id
                .as_deref()
                .and_then(|id| open.answer(id));
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
            open.issue(call.id.as_str(), (placed.len(), k));
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
