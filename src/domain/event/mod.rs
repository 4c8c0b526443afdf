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
pub use call::{CallKind, ShellOutcome, ToolCall, ARCHIVED_ARGUMENTS_KEY};

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

/// Tool-call argument keys whose value is text an agent writes into a file (Claude Code's
/// Write, Edit, MultiEdit and NotebookEdit, the text editor tool's `create`, `str_replace` and
/// `insert`): the paths such text names (an `#include`, a README's example) are what the file
/// says, not files the call acts on.
pub const WRITTEN_TEXT_KEYS: [&str; 9] = [
    "content",
    "contents",
    "file_text",
    "old_string",
    "new_string",
    "old_str",
    "new_str",
    "insert_text",
    "new_source",
];

/// Every string in `value` but those under the `skipped` keys, in order.
pub fn walk_strings<'a>(value: &'a Value, skipped: &[&str], out: &mut Vec<&'a str>) {
    match value {
        Value::String(s) => out.push(s),
        Value::Array(items) => items.iter().for_each(|v| walk_strings(v, skipped, out)),
        Value::Object(map) => map
            .iter()
            .filter(|(key, _)| !skipped.contains(&key.as_str()))
            .for_each(|(_, v)| walk_strings(v, skipped, out)),
        _ => {}
    }
}

/// The path a word names, read without what surrounds it in prose or a tool's output: the
/// emphasis around it (`**src/a.rs**`), the punctuation after it (`src/a.rs:`, `~/.ssh?`) and
/// its place (`src/a.rs:58:13`, `tests/t.py::test_x`), and the escaped line break after it
/// where the path is written inside a string of code (a patch a tool call passes in source
/// text: `"*** Add File: src/a.rs\n+fn a() {}"`). A leading `./` or `../` is kept: it is part
/// of the path. Whether the word is a path at all is the caller's to judge.
pub fn named_path(word: &str) -> &str {
    fn trim_end(w: &str) -> &str {
        w.trim_end_matches([':', ';', '.', '[', ']', '{', '}', '?', '!', '\\'])
    }
    let word = before_escaped_break(word);
    let word = trim_end(word.trim_start_matches([':', ';', '[', ']', '{', '}']));
    let word = match word.strip_prefix("**").and_then(|w| w.strip_suffix("**")) {
        Some(emphasised) => trim_end(emphasised),
        None => word,
    };
    without_place(word)
}

/// The words of a text that read as file paths: a `/` and a name with an extension, not a URL,
/// an option or a glob (`src/lib.rs`, `/etc/hosts.conf`; `--out=x` is not one), each read as
/// the file it names ([`named_path`]: `**src/a.rs**` and `src/a.rs:58:13` are `src/a.rs`).
pub fn file_paths(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| c.is_whitespace() || "\"'`,;|&()<>=".contains(c))
        .map(named_path)
        .filter(|w| (3..=200).contains(&w.len()) && w.contains('/') && !w.contains("://"))
        .filter(|w| !w.starts_with('-') && !w.contains('*'))
        .filter(|w| {
            w.rsplit('/')
                .next()
                .is_some_and(|name| name.contains('.') && !name.starts_with('.'))
        })
}

/// A text without the bodies of the patches it holds (`apply_patch`'s `*** Begin Patch`, a
/// unified diff): their added, removed and context lines are what the files hold, not files
/// the agent acted on. The lines that name the files stay (`*** Update File: src/a.rs`,
/// `+++ b/src/a.rs`), as does the text around the patch (the command that applies it).
pub fn without_patch_bodies(text: &str) -> Cow<'_, str> {
    if !text.contains("*** Begin Patch") && !text.contains("\n+++ ") {
        return Cow::Borrowed(text);
    }
    let mut kept: Vec<&str> = Vec::new();
    let mut in_patch = false;
    for line in text.split('\n') {
        if line.starts_with("*** Begin Patch") || line.starts_with("--- ") {
            in_patch = true;
        } else if line.starts_with("*** End Patch") {
            in_patch = false;
        }
        let header = line.starts_with("+++ ") || line.starts_with("--- ");
        let body = line.starts_with(['+', '-', ' ']) || line.starts_with("@@");
        if !(in_patch && body && !header) {
            kept.push(line);
        }
    }
    Cow::Owned(kept.join("\n"))
}

/// The heading the Codex IDE extension writes before the user's own words, after the editor's
/// context (`# Context from my IDE setup:`, the active file, the open tabs).
const IDE_REQUEST_HEADING: &str = "## My request for Codex:";

/// The part of a user message's text that is the user's own request: what follows the heading
/// an IDE extension writes before it ([`IDE_REQUEST_HEADING`]), else the whole text.
pub fn request_text(text: &str) -> &str {
    let heading = text
        .match_indices(IDE_REQUEST_HEADING)
        .find(|(at, _)| text[..*at].is_empty() || text[..*at].ends_with('\n'));
    match heading {
        Some((at, _)) => {
            let after = &text[at + IDE_REQUEST_HEADING.len()..];
            if after.trim().is_empty() {
                text
            } else {
                after.trim_start()
            }
        }
        None => text,
    }
}

/// The heading Codex writes before a project's AGENTS.md, which it sends as a user message.
const AGENTS_HEADING: &str = "# AGENTS.md instructions for ";

/// The tag an older Codex wraps a project's AGENTS.md in.
const USER_INSTRUCTIONS_TAG: &str = "<user_instructions>";

/// What a user message is named by when its text is a project's standing instructions that the
/// agent's harness sends on the user's behalf, rather than a request: a project's AGENTS.md as
/// Codex sends it (`# AGENTS.md instructions for DIR`, then `<INSTRUCTIONS>…</INSTRUCTIONS>`,
/// or wrapped in `<user_instructions>` by older versions), followed by nothing or by markup
/// only. `None` for any other text: the user's own words after the instructions make it a
/// request.
pub fn instructions_title(text: &str) -> Option<&str> {
    let text = text.trim_start();
    let (title, close) = if text.starts_with(AGENTS_HEADING) {
        let heading = text.lines().next().unwrap_or_default().trim_end();
        (&heading["# ".len()..], "</INSTRUCTIONS>")
    } else if text.starts_with(USER_INSTRUCTIONS_TAG) {
        (
            "the user's instructions (<user_instructions>)",
            "</user_instructions>",
        )
    } else {
        return None;
    };
    let after = text.split_once(close).map_or("", |(_, after)| after.trim());
    (after.is_empty() || is_markup_only(after)).then_some(title)
}

/// Whether a user message's text is a request of the user's: neither markup a harness wrote
/// (see [`is_markup_only`]) nor a project's instructions it sent ([`instructions_title`]).
pub fn is_request(text: &str) -> bool {
    instructions_title(text).is_none() && !is_markup_only(text)
}

/// Whether a user message's text is markup only: it opens with a tag and ends by closing one,
/// as an agent's harness writes on the user's behalf (a slash command's name and its output, a
/// caveat about them, a file opened in the editor: `<command-name>/exit</command-name>`).
/// Such text states no request or constraint of the user's, though it may name files.
pub fn is_markup_only(text: &str) -> bool {
    fn is_tag_name(name: &str) -> bool {
        let mut chars = name.chars();
        chars.next().is_some_and(|c| c.is_ascii_alphabetic())
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    }
    let text = text.trim();
    let opens = text
        .strip_prefix('<')
        .and_then(|t| t.split_once('>'))
        .is_some_and(|(name, _)| is_tag_name(name));
    let closes = text
        .strip_suffix('>')
        .and_then(|t| t.rsplit_once("</"))
        .is_some_and(|(_, name)| is_tag_name(name));
    opens && closes
}

/// `word` up to an escaped line break or tab (`\n`, `\r`, `\t`) after a `/`: a path in a
/// string of source code ends there. A Windows path (`C:\Users\notes.txt`) names no `/`
/// before its backslashes and is left whole.
fn before_escaped_break(word: &str) -> &str {
    for (at, _) in word.match_indices('\\') {
        let escape = word[at + 1..].chars().next();
        if matches!(escape, Some('n' | 'r' | 't')) && word[..at].contains('/') {
            return &word[..at];
        }
    }
    word
}

/// `path` without a place after it: `:line`, `:line:column` or a test's `::name`.
fn without_place(path: &str) -> &str {
    if let Some((file, _)) = path.split_once("::") {
        return file;
    }
    let mut file = path;
    for _ in 0..2 {
        match file.rsplit_once(':') {
            Some((head, number))
                if !number.is_empty() && number.bytes().all(|b| b.is_ascii_digit()) =>
            {
                file = head
            }
            _ => break,
        }
    }
    file
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
/// of each way the event can be shown reduced. A view shows many items reduced, and each would
/// otherwise be cut and searched for its error lines again on every call. It never makes two
/// events differ.
#[derive(Debug, Clone, Default)]
pub struct Derived {
    shown: [std::sync::OnceLock<ShownText>; 5],
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
