//! How items appear in a view: events as messages, previews and references of offloaded
//! content, the summary message and placeholder results.

use std::borrow::Cow;
use std::fmt::Write;

use crate::domain::compaction::{Projection, Summary, ViewMessage, NOT_AVAILABLE};
use crate::domain::condensation::Memory;
use crate::domain::content::Part;
use crate::domain::event::{Event, EventBody, Role, ShownAs, ToolCall};
use crate::domain::{diagnostic, observation, text};
use crate::tokens::Tokenizer;

/// Marks the summary message so that models (and people) can tell it from the conversation.
pub const SUMMARY_HEADER: &str = "[ctxd: summary of the earlier conversation]";
/// The most lines and characters a preview shows.
pub const PREVIEW_LINES: usize = 20;
pub const PREVIEW_CHARS: usize = 1_200;

/// The address an observation is recalled by.
pub fn observation_uri(seq: i64) -> String {
    ObservationUri(seq).to_string()
}

/// [`observation_uri`], written where it is formatted.
pub struct ObservationUri(pub i64);

impl std::fmt::Display for ObservationUri {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}{}", observation::SCHEME, self.0)
    }
}

/// The characters of an event's main text.
pub fn content_chars(event: &Event) -> i64 {
    text_of(event).chars().count() as i64
}

/// The main text of an event: what an observation recalls.
pub fn text_of(event: &Event) -> &str {
    match &event.body {
        EventBody::Message(m) => m.content.text(),
        EventBody::Note(n) => &n.content,
        EventBody::EpisodeEnd(e) => &e.conclusion,
        EventBody::EpisodeStart(_) => "",
    }
}

/// What recalling an event returns: its text, then each tool call it makes on a line of its
/// own, `[tool call <name> <id>]` and the arguments as sent. A reference into the text keeps its
/// offset; a call's arguments are reached at [`arguments_offset`].
pub fn recall_text(event: &Event) -> Cow<'_, str> {
    let calls = event.body.tool_calls();
    if calls.is_empty() {
        return Cow::Borrowed(text_of(event));
    }
    let mut text = text_of(event).to_owned();
    for call in calls {
        text.push_str(&call_lead(call));
        text.push_str(&call.arguments_text());
    }
    Cow::Owned(text)
}

/// What precedes a call's arguments in [`recall_text`].
fn call_lead(call: &ToolCall) -> String {
    format!("\n[tool call {} {}] ", call.name, call.id)
}

/// The character offset of call `k`'s arguments in the event's [`recall_text`].
fn arguments_offset(event: &Event, k: usize) -> usize {
    let calls = event.body.tool_calls();
    let mut offset = text_of(event).chars().count();
    for call in &calls[..k] {
        offset += call_lead(call).chars().count() + call.arguments_text().chars().count();
    }
    offset + call_lead(&calls[k]).chars().count()
}

/// Arguments at most this long stay when their call is archived: a reference would not be
/// shorter.
const ARCHIVED_ARGUMENTS_CHARS: usize = 160;

/// An assistant turn whose tool exchanges the episodic policy archived: its text as it was
/// (previewed when long), each call's arguments, when long, replaced by their short ones and
/// `archived_arguments`, naming their size and where to recall them. Providers take any
/// object as a past call's input.
pub fn archived_calls_message(event: &Event, chars: i64, errors: usize) -> ViewMessage<'_> {
    let mut message = if chars > PREVIEW_CHARS as i64 {
        preview_message(event, PREVIEW_CHARS, chars, errors)
    } else {
        ViewMessage {
            parts: Cow::Borrowed(&[]),
            reasoning: false,
            ..ViewMessage::full(event)
        }
    };
    let archived = archived_calls(event);
    message.tool_calls = Cow::Owned(archived);
    message.projection = Projection::Reference;
    message.tokens = 0;
    message
}

/// `event`'s tool calls with each long argument text replaced by its short arguments and
/// `archived_arguments`, naming its size, the files it names and where to recall it
/// (`{"path": "src/a.rs", "archived_arguments": "4812 characters archived; recall
/// observation://7?offset=0"}`; a patch's: `"6053 characters archived, naming src/a.ts; recall
/// observation://9?offset=0"`).
fn archived_calls(event: &Event) -> Vec<ToolCall> {
    let calls = event.body.tool_calls();
    // Made once an event: each call's archived arguments as JSON text, a line each (JSON text
    // holds no line break), an empty line for a call shown as it was.
    let shown = event.derived.shown(ShownAs::ArchivedCalls, [0; 3], || {
        let lines = calls.iter().enumerate().map(|(k, call)| {
            let length = call.arguments_text().chars().count();
            if length <= ARCHIVED_ARGUMENTS_CHARS {
                return String::new();
            }
            let mut arguments = short_arguments(&call.arguments);
            let note = format!(
                "{length} characters archived{}; recall {}?offset={}",
                named_files(&call.arguments, &arguments),
                ObservationUri(event.seq),
                arguments_offset(event, k)
            );
            arguments.insert(ARCHIVED_ARGUMENTS_KEY.into(), note.into());
            serde_json::Value::Object(arguments).to_string()
        });
        lines.collect::<Vec<_>>().join("\n")
    });
    calls
        .iter()
        .zip(shown.split('\n'))
        .map(|(call, line)| match serde_json::from_str(line) {
            Ok(arguments) => ToolCall {
                arguments,
                ..call.clone()
            },
            Err(_) => call.clone(),
        })
        .collect()
}

/// The key of an archived call's arguments that names their size and where to recall them.
const ARCHIVED_ARGUMENTS_KEY: &str = "archived_arguments";

/// The short scalar arguments of a call, in order, within `ARCHIVED_ARGUMENTS_CHARS`: what an
/// archived call still shows (the file a write named, the pattern a search took), its long
/// ones (the file's content) by reference.
fn short_arguments(arguments: &serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
    use serde_json::Value;
    let mut kept = serde_json::Map::new();
    // Arguments are held as the JSON text a provider sees.
    let parsed = match arguments {
        Value::String(text) => serde_json::from_str(text).ok(),
        other => Some(other.clone()),
    };
    let Some(Value::Object(fields)) = parsed else {
        return kept;
    };
    let mut room = ARCHIVED_ARGUMENTS_CHARS;
    for (key, value) in fields {
        let chars = match &value {
            Value::String(s) => s.chars().count(),
            Value::Number(_) | Value::Bool(_) => value.to_string().len(),
            _ => continue,
        };
        let cost = key.chars().count() + chars;
        if key != ARCHIVED_ARGUMENTS_KEY && cost <= room {
            room -= cost;
            kept.insert(key, value);
        }
    }
    kept
}

/// The most characters of file paths an archived call's note names.
const ARCHIVED_FILES_CHARS: usize = 320;

/// The files a call's long arguments name, for its archived note (`, naming src/a.rs, src/b.rs`,
/// as many as fit in `ARCHIVED_FILES_CHARS`, then how many more): a patch passed as one
/// argument names the files it changes. Text the call writes into a file is left out (what it
/// names is what the file says), as are the files its kept short arguments show.
fn named_files(
    arguments: &serde_json::Value,
    kept: &serde_json::Map<String, serde_json::Value>,
) -> String {
    use crate::domain::event::{file_paths, walk_strings, WRITTEN_TEXT_KEYS};
    let parsed = match arguments {
        serde_json::Value::String(text) => {
            serde_json::from_str(text).unwrap_or_else(|_| serde_json::Value::String(text.clone()))
        }
        other => other.clone(),
    };
    let mut strings = Vec::new();
    walk_strings(&parsed, &WRITTEN_TEXT_KEYS, &mut strings);
    let shown: Vec<&str> = kept
        .values()
        .filter_map(serde_json::Value::as_str)
        .collect();
    let mut files: Vec<&str> = Vec::new();
    for path in strings.iter().flat_map(|s| file_paths(s)) {
        if !files.contains(&path) && !shown.iter().any(|s| s.contains(path)) {
            files.push(path);
        }
    }
    let mut out = String::new();
    let mut listed = 0;
    for path in &files {
        if out.len() + path.len() + 2 > ARCHIVED_FILES_CHARS {
            break;
        }
        out.push_str(if listed == 0 { ", naming " } else { ", " });
        out.push_str(path);
        listed += 1;
    }
    if listed < files.len() && listed > 0 {
        let _ = write!(out, " and {} more", files.len() - listed);
    }
    out
}

/// Whether archiving `event`'s calls would shorten any of them.
pub fn has_long_arguments(event: &Event) -> bool {
    event
        .body
        .tool_calls()
        .iter()
        // Reads no further than the bound into each argument text.
        .any(|c| {
            c.arguments_text()
                .chars()
                .nth(ARCHIVED_ARGUMENTS_CHARS)
                .is_some()
        })
}

/// The first lines of `text`, at most `PREVIEW_LINES` lines and `max_chars` characters.
fn head_of(text: &str, max_chars: usize) -> &str {
    // Tool output is mostly ASCII: there a character is a byte, and no character is decoded.
    let window = &text.as_bytes()[..text.len().min(max_chars)];
    if window.is_ascii() {
        let end = memchr::memchr_iter(b'\n', window)
            .nth(PREVIEW_LINES - 1)
            .unwrap_or(window.len());
        return &text[..end];
    }
    head_of_chars(text, max_chars)
}

/// [`head_of`], a character at a time.
fn head_of_chars(text: &str, max_chars: usize) -> &str {
    let mut lines = 0;
    for (count, (i, c)) in text.char_indices().enumerate() {
        if count >= max_chars {
            return &text[..i];
        }
        if c == '\n' {
            lines += 1;
            if lines >= PREVIEW_LINES {
                return &text[..i];
            }
        }
    }
    text
}

/// The text a reduced event is cut from and its length in characters: a message's own content
/// (borrowed, however large; `chars` is its length, as [`content_chars`] counts it), or the
/// rendering of a small non-message event.
fn shown_text(event: &Event, chars: i64) -> (Cow<'_, str>, i64) {
    match &event.body {
        EventBody::Message(m) => (Cow::Borrowed(m.content.text()), chars),
        _ => {
            let text = event.body.shown_text().into_owned();
            let chars = text.chars().count() as i64;
            (Cow::Owned(text), chars)
        }
    }
}

/// An event's message with `content` in place of its own.
fn reduced_message<'e>(
    event: &'e Event,
    content: Cow<'e, str>,
    projection: Projection,
) -> ViewMessage<'e> {
    ViewMessage {
        content,
        parts: Cow::Borrowed(&[]),
        projection,
        tokens: 0,
        ..ViewMessage::full(event)
    }
}

/// An event shown as its first lines and its observation reference, in at most `max_chars`
/// characters of content, then at most `errors` error lines of the rest. `chars` is the
/// event's [`content_chars`]. Its `tokens` are left for the caller to set (see [`cost`]).
pub fn preview_message(
    event: &Event,
    max_chars: usize,
    chars: i64,
    errors: usize,
) -> ViewMessage<'_> {
    let key = [max_chars as i64, errors as i64, chars];
    let content = event.derived.shown(ShownAs::Preview, key, || {
        let (text, total) = shown_text(event, chars);
        let shown = head_of(&text, max_chars);
        let shown_chars = if shown.is_ascii() {
            shown.len()
        } else {
            shown.chars().count()
        } as i64;
        let mut content = String::with_capacity(shown.len() + 96);
        content.push_str(shown);
        if shown_chars < total || !has_images(event) {
            let _ = write!(
                content,
                "\n[… {} more characters offloaded; recall {}?offset={shown_chars}]",
                total - shown_chars,
                ObservationUri(event.seq)
            );
            push_lines(
                &mut content,
                &error_entries(&text[shown.len()..], errors, PLACES_CHARS),
            );
        }
        image_references(event, &mut content);
        content
    });
    reduced_message(event, content, Projection::Preview)
}

/// Writes each of `lines` on a line of its own.
fn push_lines(content: &mut String, lines: &[String]) {
    for line in lines {
        content.push('\n');
        content.push_str(line);
    }
}

/// Whether an event's content holds images.
pub fn has_images(event: &Event) -> bool {
    event
        .body
        .parts()
        .iter()
        .any(|p| matches!(p, Part::Image(_)))
}

/// One line per image of `event`, in place of the image.
fn image_references(event: &Event, content: &mut String) {
    for part in event.body.parts() {
        if let Part::Image(image) = part {
            if !content.is_empty() {
                content.push('\n');
            }
            let _ = write!(
                content,
                "[{} offloaded; kept in event {}]",
                image.describe(),
                ObservationUri(event.seq)
            );
        }
    }
}

/// An event shown as its head and its tail in about `max_chars` characters, with the
/// observation reference of the middle and at most `errors` of the middle's error lines between
/// them. `chars` is the event's [`content_chars`]. Its `tokens` are left for the caller.
pub fn excerpt_message(
    event: &Event,
    max_chars: usize,
    chars: i64,
    errors: usize,
) -> ViewMessage<'_> {
    let key = [max_chars as i64, errors as i64, chars];
    let content = event.derived.shown(ShownAs::Excerpt, key, || {
        let (text, total) = shown_text(event, chars);
        let head = text::prefix_chars(&text, max_chars * 2 / 3);
        let rest = &text[head.len()..];
        let tail = text::suffix_chars(rest, max_chars / 3);
        let middle = &rest[..rest.len() - tail.len()];
        let count = |s: &str| if s.is_ascii() { s.len() } else { s.chars().count() } as i64;
        let offset = count(head);
        let mut content = String::with_capacity(head.len() + tail.len() + 200);
        content.push_str(head);
        let _ = write!(
            content,
            "\n[… {} characters offloaded; recall {}?offset={offset}]",
            total - offset - count(tail),
            ObservationUri(event.seq)
        );
        push_lines(&mut content, &error_entries(middle, errors, PLACES_CHARS));
        content.push('\n');
        content.push_str(tail);
        image_references(event, &mut content);
        content
    });
    reduced_message(event, content, Projection::Preview)
}

/// The characters of each error line a reduced item names (of its message, for a group).
const ERROR_LINE_CHARS: usize = 160;

/// The distinct lines of `text` that read as errors (`error:`, `error[E…]`, `FAILED`,
/// `panicked at`, exceptions), whole, at most `max` of them: what a model most needs of an
/// output it no longer sees ([`error_entries`] names them).
fn error_lines(text: &str, max: usize) -> Vec<&str> {
    let mut found: Vec<&str> = Vec::new();
    let bytes = text.as_bytes();
    // Where each needle next occurs: each is searched for again only once passed, so the text
    // is read once per needle however many lines are found.
    let mut next = ERROR_NEEDLES.each_ref().map(|n| n.find(bytes));
    while found.len() < max {
        let Some(hit) = next.iter().flatten().copied().min() else {
            break;
        };
        let start = memchr::memrchr(b'\n', &bytes[..hit]).map_or(0, |i| i + 1);
        let end = memchr::memchr(b'\n', &bytes[hit..]).map_or(bytes.len(), |i| hit + i);
        let line = text[start..end].trim();
        if reads_as_error(line) && !found.contains(&line) {
            found.push(line);
        }
        let after = (end + 1).min(bytes.len());
        for (position, needle) in next.iter_mut().zip(ERROR_NEEDLES.iter()) {
            if position.is_some_and(|p| p < after) {
                *position = needle.find(&bytes[after..]).map(|p| after + p);
            }
        }
    }
    found
}

/// Lines read from an output per error entry: a compiler's message at many places of one file
/// is one entry.
const LINES_PER_ERROR_ENTRY: usize = 8;
/// The places an entry of one compiler message at many places names, in characters, in a
/// reduced item and in the summary alike: about thirty `line:column` pairs. A preview that named
/// fewer than the summary lost the places past its half until the output was folded.
pub const PLACES_CHARS: usize = 240;

/// At most `max` entries (a session's
/// [`error_lines`](crate::domain::session::SessionConfig::error_lines)) for the error lines of
/// `text` ([`error_lines`]), each cut to [`ERROR_LINE_CHARS`], a compiler's diagnostics of one
/// message in one file at many places as one entry naming the places in at most
/// `places_chars` characters (`src/a.c: error: … (at 12:5, 14:5)`):
/// a build's distinct errors, where its first lines could all be one message, in the order it
/// printed them ([`diagnostic::grouped_in_reading_order`]).
pub fn error_entries(text: &str, max: usize, places_chars: usize) -> Vec<String> {
    // Grouped whole, so that two messages are one only when they read the same; each entry
    // is cut afterwards.
    let lines = error_lines(text, max.saturating_mul(LINES_PER_ERROR_ENTRY));
    let lines = lines.into_iter().map(str::to_owned);
    let mut entries: Vec<String> = diagnostic::grouped_in_reading_order(lines)
        .into_iter()
        .map(|entry| match entry {
            diagnostic::Entry::Group(mut group) => {
                group.message = text::bounded(&group.message, ERROR_LINE_CHARS);
                group.render(places_chars)
            }
            diagnostic::Entry::Line(line) => text::prefix_chars(&line, ERROR_LINE_CHARS).to_owned(),
        })
        .collect();
    entries.truncate(max);
    entries
}

/// Every line that [`reads_as_error`] holds one of these (its words in lower, capitalised or
/// upper case): searching for them skips most of a long output.
static ERROR_NEEDLES: std::sync::LazyLock<[memchr::memmem::Finder<'static>; 6]> =
    std::sync::LazyLock::new(|| {
        ["rror", "RROR", "FAIL", "panicked", "xception", "XCEPTION"]
            .map(memchr::memmem::Finder::new)
    });

/// Whether a line says what failed: `error…`, `error:`, `error[`, `FAILED`, `panicked at`,
/// `exception`. What a reduced tool result keeps, and what the replay counts as an error fact.
/// A line of a file as a read tool numbers it (`  106→  printf("FAILED");`, or `cat -n`'s
/// number and tab) is source, not what a run said.
pub fn reads_as_error(line: &str) -> bool {
    let lower = line.to_ascii_lowercase();
    line.len() >= 8
        && !is_numbered_source(line)
        && (lower.starts_with("error")
            || lower.contains("error:")
            || lower.contains("error[")
            || line.contains("FAILED")
            || line.contains("panicked at")
            || lower.contains("exception"))
}

/// Whether `line` is a numbered line of a file: a line number, then `→` or a tab.
fn is_numbered_source(line: &str) -> bool {
    let rest = line.trim_start();
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    digits > 0 && (rest[digits..].starts_with('→') || rest[digits..].starts_with('\t'))
}

/// An event shown only by its observation reference, and at most `errors` error lines of its
/// text. `chars` is the event's [`content_chars`]. Its `tokens` are left for the caller.
pub fn reference_message(event: &Event, chars: i64, errors: usize) -> ViewMessage<'_> {
    referenced(event, chars, errors, ShownAs::Reference, |total, uri| {
        format!("[{total} characters offloaded; recall {uri}]")
    })
}

/// A tool result the episodic policy archived: one line naming the tool and the observation's
/// reference, and the error lines it had. The turn that made the calls keeps its text and
/// shows long arguments by reference ([`archived_calls_message`]); other archived items show
/// as their reference.
pub fn archived_message(event: &Event, chars: i64, errors: usize) -> ViewMessage<'_> {
    match &event.body {
        EventBody::Message(message) if message.role == Role::Tool => {
            let tool = message.name.as_deref().unwrap_or("tool");
            referenced(event, chars, errors, ShownAs::Archived, |total, uri| {
                format!("[{tool} result archived, {total} characters; recall {uri}]")
            })
        }
        EventBody::Message(message) if !message.tool_calls.is_empty() => {
            archived_calls_message(event, chars, errors)
        }
        _ => reference_message(event, chars, errors),
    }
}

/// An event shown as the line `head` writes from its characters and its reference, then at
/// most `errors` error lines of its text and a line for each image.
fn referenced(
    event: &Event,
    chars: i64,
    errors: usize,
    kind: ShownAs,
    head: impl Fn(i64, ObservationUri) -> String,
) -> ViewMessage<'_> {
    let content = event.derived.shown(kind, [0, errors as i64, chars], || {
        let (text, total) = shown_text(event, chars);
        let mut content = head(total, ObservationUri(event.seq));
        push_lines(&mut content, &error_entries(&text, errors, PLACES_CHARS));
        image_references(event, &mut content);
        content
    });
    let mut message = reduced_message(event, content, Projection::Reference);
    // A call's long arguments go by reference too: an item shown by reference is small.
    if has_long_arguments(event) {
        message.tool_calls = Cow::Owned(archived_calls(event));
    }
    message
}

/// The summary message: the running summary and its anchors. None when nothing was folded.
/// Items shown reduced carry their own observation reference where they stand, so the message
/// does not list them: offloading at the view's end never rewrites its start.
pub fn summary_message(
    summary: &Summary,
    max_chars: usize,
    tokenizer: Tokenizer,
) -> Option<ViewMessage<'static>> {
    if summary.text.trim().is_empty() {
        return None;
    }
    let mut text = String::with_capacity(SUMMARY_HEADER.len() + summary.text.len() + 1_024);
    text.push_str(SUMMARY_HEADER);
    if !summary.text.trim().is_empty() {
        text.push_str("\n\n");
        text.push_str(summary.text.trim());
        let a = &summary.anchors;
        let anchors = [
            ("User intent", &a.user_intent),
            ("Progress", &a.execution_progress),
            ("Key decisions", &a.key_decision),
            ("Tried", &a.tried_solution),
            ("Next step", &a.next_step),
        ];
        if anchors.iter().any(|(_, v)| v.as_str() != NOT_AVAILABLE) {
            text.push_str("\n\nAnchors:");
            for (label, value) in anchors {
                let _ = write!(text, "\n- {label}: {value}");
            }
        }
    }
    // Bound what the anchors add, like the summary itself.
    text::cut_marked(&mut text, max_chars + 2_000, "\n[…]");
    Some(ctxd_message(text, tokenizer))
}

/// The memory message: the agent's last condensation, shown right after the summary.
pub fn memory_message(memory: &Memory, tokenizer: Tokenizer) -> ViewMessage<'static> {
    ctxd_message(memory.condensation.render(), tokenizer)
}

/// A user message ctxd writes into the view (the summary, the memory), of no event, counted.
fn ctxd_message(text: String, tokenizer: Tokenizer) -> ViewMessage<'static> {
    let mut message = ViewMessage {
        seq: None,
        role: Role::User,
        content: Cow::Owned(text),
        tool_calls: Cow::Borrowed(&[]),
        parts: Cow::Borrowed(&[]),
        reasoning: false,
        tool_call_id: None,
        name: None,
        is_error: false,
        projection: Projection::Summary,
        tokens: 0,
    };
    message.tokens = message.cost(tokenizer);
    message
}

/// A result for a call whose result is not in the view.
pub fn placeholder_result(
    call: &ToolCall,
    observation: Option<i64>,
    tokenizer: Tokenizer,
) -> ViewMessage<'_> {
    let content = match observation {
        Some(seq) => format!(
            "[tool result unavailable: context was compacted; recall {}]",
            ObservationUri(seq)
        ),
        None => "[tool result unavailable: no result was recorded for this call]".to_owned(),
    };
    let mut message = ViewMessage {
        seq: None,
        role: Role::Tool,
        content: Cow::Owned(content),
        tool_calls: Cow::Borrowed(&[]),
        parts: Cow::Borrowed(&[]),
        reasoning: false,
        tool_call_id: Some(Cow::Borrowed(&call.id)),
        name: Some(Cow::Borrowed(&call.name)),
        is_error: false,
        projection: Projection::Reference,
        tokens: 0,
    };
    message.tokens = message.cost(tokenizer);
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        #[test]
        fn previews_cut_ascii_as_any_text(
            text in "[ab\n]{0,300}|[aé→\n]{0,300}",
            max_chars in 0usize..400,
        ) {
            proptest::prop_assert_eq!(head_of(&text, max_chars), head_of_chars(&text, max_chars));
        }
    }

    #[test]
    fn a_numbered_line_of_a_file_read_is_source_not_an_error() {
        let read = "    58→    if (!ok) {\n    59→        printf(\"ASSERTION FAILED: %s\\n\", x);\n   60\tfputs(\"error: bad\", f);";
        assert_eq!(error_lines(read, 10), Vec::<&str>::new());
        let run = "tests/t.c:59: ASSERTION FAILED: x\nerror: 2 tests failed";
        assert_eq!(
            error_lines(run, 10),
            ["tests/t.c:59: ASSERTION FAILED: x", "error: 2 tests failed"]
        );
    }

    proptest::proptest! {
        /// The search for error lines finds every line that reads as one, in lower, capitalised
        /// or upper case: `ERROR: not built` is an error line as much as `error: not built`.
        #[test]
        fn error_lines_are_every_line_that_reads_as_an_error(
            lines in proptest::collection::vec(
                "(  )?(ok|error|Error|ERROR|FAILED|panicked at|exception|Exception|EXCEPTION)(:|\\[E1\\])? [a-z]{1,12}",
                0..30,
            ),
        ) {
            let text = lines.join("\n");
            let mut expected: Vec<&str> = Vec::new();
            for line in text.lines().map(str::trim) {
                if reads_as_error(line) && !expected.contains(&line) {
                    expected.push(line);
                }
            }
            proptest::prop_assert_eq!(error_lines(&text, 100), expected);
        }
    }

    /// A shell's result event at `seq` with `output` as its content.
    fn shell_result(seq: i64, output: &str) -> Event {
        Event {
            seq,
            id: None,
            body: EventBody::Message(crate::domain::event::Message {
                role: Role::Tool,
                content: output.into(),
                tool_calls: Vec::new(),
                tool_call_id: Some("c".into()),
                name: Some("shell".into()),
                is_error: None,
            }),
            pinned: false,
            metadata: None,
            tokens: 0,
            created_at: chrono::DateTime::UNIX_EPOCH,
            derived: Default::default(),
        }
    }

    /// The text of a reduced item is kept with the event: shown again as another projection,
    /// at another size or naming another number of error lines, it reads as the same event read
    /// afresh shows it.
    #[test]
    fn a_reduced_text_kept_with_an_event_is_what_a_fresh_copy_shows() {
        let output: String = (0..60)
            .map(|i| format!("ok {i}\nerror[E{i:04}]: at src/m{i}.rs\n"))
            .collect();
        let event = shell_result(7, &output);
        let chars = content_chars(&event);
        type Render = fn(&Event, i64, usize) -> ViewMessage<'_>;
        let renders: [(&str, Render); 4] = [
            ("reference", reference_message),
            ("preview", |e, c, n| preview_message(e, 200, c, n)),
            ("wider preview", |e, c, n| preview_message(e, 900, c, n)),
            ("excerpt", |e, c, n| excerpt_message(e, 600, c, n)),
        ];
        for max in [4, 31, 2, 48, 4] {
            for (name, render) in renders {
                let kept = render(&event, chars, max).content.into_owned();
                let fresh = Event {
                    derived: Default::default(),
                    ..event.clone()
                };
                let found = render(&fresh, chars, max).content.into_owned();
                assert_eq!(kept, found, "{name} naming {max}");
                let named = kept.lines().filter(|l| l.starts_with("error[")).count();
                assert!(named >= max.min(20), "{name} named {named} of {max}");
            }
        }
    }

    /// A reduced item's text is made once: shown again with the same sizes, the view borrows
    /// the text kept with the event instead of cutting and searching the output again (what
    /// keeps a view of many reduced items fast, `benches/compact.rs`).
    #[test]
    fn a_reduced_text_is_made_once_and_borrowed_after() {
        let output = "error: the build failed\n".repeat(400);
        let event = shell_result(9, &output);
        let chars = content_chars(&event);
        type Render = fn(&Event, i64, usize) -> ViewMessage<'_>;
        let renders: [(&str, Render); 4] = [
            ("preview", |e, c, n| preview_message(e, PREVIEW_CHARS, c, n)),
            ("excerpt", |e, c, n| excerpt_message(e, 3_000, c, n)),
            ("reference", reference_message),
            ("archived", archived_message),
        ];
        for (name, render) in renders {
            let first = render(&event, chars, 4).content;
            let again = render(&event, chars, 4).content;
            let (Cow::Borrowed(first), Cow::Borrowed(again)) = (first, again) else {
                panic!("{name}: made again");
            };
            assert!(std::ptr::eq(first, again), "{name}: another copy");
            // Another size is made afresh, and the kept text stays.
            assert!(
                matches!(render(&event, chars, 5).content, Cow::Owned(_)),
                "{name}"
            );
            assert!(
                matches!(render(&event, chars, 4).content, Cow::Borrowed(_)),
                "{name}"
            );
        }
    }

    #[test]
    fn previews_stop_at_the_line_or_character_bound() {
        let many_lines: String = (0..100).map(|i| format!("line {i}\n")).collect();
        let h = head_of(&many_lines, 10_000);
        assert_eq!(h.lines().count(), PREVIEW_LINES);
        let long = "é".repeat(5_000);
        assert_eq!(head_of(&long, 100).chars().count(), 100);
        assert_eq!(head_of("", 100), "");
    }
}
