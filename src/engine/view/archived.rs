//! How an event's tool calls are recalled and shown archived: the recall text that lays them
//! out, and an archived call's short arguments beside the reference to the rest.

use std::borrow::Cow;
use std::fmt::Write;

use super::{preview_message, text_of, ObservationUri, PREVIEW_CHARS};
use crate::domain::compaction::{Projection, ViewMessage};
use crate::domain::event::{Event, ShownAs, ToolCall, ARCHIVED_ARGUMENTS_KEY};

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
pub(super) fn archived_calls(event: &Event) -> Vec<ToolCall> {
    let calls = event.body.tool_calls();
    // Made once an event: each call's archived arguments as JSON text, a line each (JSON text
    // holds no line break), an empty line for a call shown as it was.
    let shown = event.derived.shown(ShownAs::ArchivedCalls, [0; 3], || {
        let lines = calls.iter().enumerate().map(|(k, call)| {
            let length = call.arguments_text().chars().count();
            if length <= ARCHIVED_ARGUMENTS_CHARS {
                return String::new();
            }
            let parsed = call.arguments_value();
            let mut arguments = short_arguments(&parsed);
            let note = format!(
                "{length} characters archived{}; recall {}?offset={}",
                named_files(&parsed, &arguments),
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

/// The short scalar arguments of a call, in order, within `ARCHIVED_ARGUMENTS_CHARS`: what an
/// archived call still shows (the file a write named, the pattern a search took), its long
/// ones (the file's content) by reference.
fn short_arguments(arguments: &serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
    use serde_json::Value;
    let mut kept = serde_json::Map::new();
    let Value::Object(fields) = arguments else {
        return kept;
    };
    let mut room = ARCHIVED_ARGUMENTS_CHARS;
    for (key, value) in fields {
        let chars = match value {
            Value::String(s) => s.chars().count(),
            Value::Number(_) | Value::Bool(_) => value.to_string().len(),
            _ => continue,
        };
        let cost = key.chars().count() + chars;
        if key != ARCHIVED_ARGUMENTS_KEY && cost <= room {
            room -= cost;
            kept.insert(key.clone(), value.clone());
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
    use crate::domain::event::{file_paths, walk_strings, without_written_text, WRITTEN_TEXT_KEYS};
    let mut strings = Vec::new();
    walk_strings(arguments, &WRITTEN_TEXT_KEYS, &mut strings);
    let strings: Vec<_> = strings.into_iter().map(without_written_text).collect();
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
