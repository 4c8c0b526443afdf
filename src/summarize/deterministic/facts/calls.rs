//! A tool call's facts: its entry, the files and command it touched, the files its other
//! arguments name.

use std::borrow::Cow;
use std::collections::HashSet;

use serde_json::Value;

use super::super::*;
pub(in crate::summarize::deterministic) use crate::domain::event::file_paths;
use crate::domain::event::{
    argument_text, editor_command, reads_documents_only, walk_strings, without_here_documents,
    without_written_text, ToolCall, WRITTEN_TEXT_KEYS,
};

impl Digest {
    /// Lists the call and what it touched.
    pub(super) fn add_tool_call(&mut self, call: &ToolCall) -> CallFacts {
        let mut paths = Vec::new();
        let mut command = None;
        let parsed;
        let arguments = match &call.arguments {
            Value::String(text) => {
                parsed = serde_json::from_str::<Value>(text).ok();
                parsed.as_ref()
            }
            other => Some(other),
        };
        let mut named = Vec::new();
        let workdir = self.get(Section::Workdir).first().cloned();
        let workdir = workdir.as_deref();
        if let Some(Value::Object(map)) = arguments {
            let moved_to = self.directory_moved_to(map);
            // The text editor's command is what it did to the file, no command run.
            let editing = editor_command(map);
            for key in PATH_KEYS.iter().chain(&COMMAND_KEYS).chain(&OTHER_KEYS) {
                let Some(mut value) = map.get(*key).and_then(argument_text) else {
                    continue;
                };
                // A call run in another directory names its paths from there.
                if moved_to.is_none() {
                    if let Cow::Owned(relative) = relative_paths(&value, workdir) {
                        value = relative;
                    }
                }
                if editing.is_some() && COMMAND_KEYS.contains(key) {
                    named.push(format!("{key}={}", one_line(&value, ARGUMENT_CHARS)));
                    continue;
                }
                // A command is shown without the text of its here-documents.
                let shown_value = match COMMAND_KEYS.contains(key) {
                    true => without_here_documents(&value, false),
                    false => Cow::Borrowed(value.as_str()),
                };
                if PATH_KEYS.contains(key) {
                    let path = one_line(&value, TOUCHED_CHARS);
                    let action = editing.unwrap_or(&call.name);
                    let action = one_line(action, ARGUMENT_CHARS);
                    self.push(Section::Touched, format!("{path}{LAST_ACTION}{action})"));
                    paths.push(path);
                } else if COMMAND_KEYS.contains(key) {
                    let shown = match &moved_to {
                        Some(directory) => format!("$ cd {directory} && {shown_value}"),
                        None => format!("$ {shown_value}"),
                    };
                    let shown = one_line(&shown, TOUCHED_CHARS);
                    // The files a patch it applies changes, as it changes them.
                    let patched = match value.contains(APPLY_PATCH) {
                        true => self.add_patched_files(&value, &mut paths),
                        false => Vec::new(),
                    };
                    // A long command (a build line, a `git add` of many files) names files
                    // past what its entry shows: each is listed as touched by the call.
                    let unshown = unshown_paths(&without_written_text(&value), &shown);
                    for path in unshown.into_iter().filter(|p| !patched.contains(p)) {
                        let action = one_line(&call.name, ARGUMENT_CHARS);
                        self.push(Section::Touched, format!("{path}{LAST_ACTION}{action})"));
                        paths.push(path);
                    }
                    self.push(Section::Touched, shown);
                    command = Some(self.get(Section::Touched).len() - 1);
                }
                let shown_value = match PATH_KEYS.contains(key) {
                    true => path_tail(&shown_value, ARGUMENT_CHARS),
                    false => one_line(&shown_value, ARGUMENT_CHARS),
                };
                named.push(format!("{key}={shown_value}"));
            }
        } else if arguments.is_none() {
            // Arguments that are not JSON at all: show their start, it is all there is.
            named.push(one_line(&call.arguments_text(), ARGUMENT_CHARS));
        }
        let described = if named.is_empty() {
            one_line(&call.name, TOOL_CALL_CHARS)
        } else {
            one_line(
                &format!("{}({})", call.name, named.join(", ")),
                TOOL_CALL_CHARS,
            )
        };
        // Files its other arguments name (a sub-agent's prompt, a to-do item, a `path` inside a
        // list of files: only the top level's path and command keys were read above) are
        // listed as named by the call, but not those of the text it writes into a file. Named
        // is not changed: they are not among the files a later success counts as its fix.
        if let Some(Value::Object(map)) = arguments {
            let mut strings = Vec::new();
            for (key, value) in map {
                let key = key.as_str();
                let read_above = PATH_KEYS.contains(&key) || COMMAND_KEYS.contains(&key);
                if !read_above && !WRITTEN_TEXT_KEYS.contains(&key) {
                    walk_strings(value, &WRITTEN_TEXT_KEYS, &mut strings);
                }
            }
            // The files a patch among them changes (Codex's `apply_patch` takes it as its
            // `input`), as it changes them: changed, so among the files a later success counts
            // as its fix.
            if call.name.contains(APPLY_PATCH) {
                for text in &strings {
                    self.add_patched_files(text, &mut paths);
                }
            }
            let mut listed: HashSet<String> = paths.iter().cloned().collect();
            let action = one_line(&call.name, ARGUMENT_CHARS);
            for text in strings {
                let text = without_written_text(text);
                for path in unshown_paths(&relative_paths(&text, workdir), &described) {
                    if listed.insert(path.clone()) {
                        self.push(
                            Section::Touched,
                            format!("{path}{LAST_ACTION}named by {action})"),
                        );
                    }
                }
            }
        }
        self.push_call(described.clone());
        let reads_documents = arguments.is_some_and(|a| reads_documents_only(&call.name, a));
        CallFacts {
            described,
            command,
            paths,
            reads_documents,
        }
    }
}

impl Digest {
    /// Lists a call made; a run of calls listed alike (a terminal polled, a page read again) is
    /// one entry that says how many times it ran: `write_stdin (6 times in a row)`. An entry cut
    /// short (`…`) is not merged: the calls may differ past the cut.
    fn push_call(&mut self, described: String) {
        let calls = self.get_mut(Section::ToolCalls);
        if let Some(last) = calls.last_mut() {
            let (call, times) = split_run(last);
            if call == described && !described.contains(ELLIPSIS) {
                *last = format!("{described} ({}{IN_A_ROW}", times.saturating_add(1));
                return;
            }
        }
        self.push(Section::ToolCalls, described);
    }

    /// The directory a call runs its command in (Codex's `workdir`) when the harness stated
    /// the session's working directory and this is another: relative to it when under it
    /// (`web`), else as given. The call's relative paths are in that directory, which its entry
    /// says as the shell would (`$ cd web && cat src/a.ts`).
    fn directory_moved_to(&self, arguments: &serde_json::Map<String, Value>) -> Option<String> {
        let stated = self.get(Section::Workdir).first()?;
        let directory = DIRECTORY_KEYS
            .iter()
            .find_map(|key| arguments.get(*key)?.as_str())?
            .trim()
            .trim_end_matches('/');
        if directory.is_empty() || directory == stated || directory.contains(char::is_whitespace) {
            return None;
        }
        let under = directory
            .strip_prefix(stated.as_str())
            .and_then(|rest| rest.strip_prefix('/'))
            .filter(|rest| !rest.is_empty() && !rest.starts_with('/'));
        Some(under.unwrap_or(directory).to_owned())
    }

    /// Lists the files a patch in `text` changes, each with how (`src/a.rs (last: updated)`),
    /// and adds them to `paths`; returns them.
    fn add_patched_files(&mut self, text: &str, paths: &mut Vec<String>) -> Vec<String> {
        let patched = patched_files(text);
        for (path, action) in &patched {
            self.push(Section::Touched, format!("{path}{LAST_ACTION}{action})"));
            paths.push(path.clone());
        }
        patched.into_iter().map(|(path, _)| path).collect()
    }
}

/// How the entry of a call that ran several times in a row ends: `write_stdin (6 times in a
/// row)`.
const IN_A_ROW: &str = " times in a row)";

/// A call's entry as the call and how many times in a row it ran.
fn split_run(entry: &str) -> (&str, u32) {
    let run = entry.strip_suffix(IN_A_ROW).and_then(|rest| {
        let (call, times) = rest.rsplit_once(" (")?;
        Some((call, times.parse().ok()?))
    });
    run.unwrap_or((entry, 1))
}

/// The tool that applies a patch in Codex's format, called as a tool or as a command.
const APPLY_PATCH: &str = "apply_patch";

/// The headers of a patch in Codex's `apply_patch` format, and how each changes its file.
const PATCH_HEADERS: [(&str, &str); 4] = [
    ("*** Add File: ", "added"),
    ("*** Update File: ", "updated"),
    ("*** Delete File: ", "deleted"),
    ("*** Move to: ", "moved here"),
];

/// The files the patches in `text` change (between `*** Begin Patch` and `*** End Patch`), in
/// order, each with how: a file its patch moves is `moved`, and where it goes `moved here`.
/// A header whose path is not plain text (a patch quoted in a string of code) is skipped.
fn patched_files(text: &str) -> Vec<(String, &'static str)> {
    let mut out: Vec<(String, &'static str)> = Vec::new();
    if !text.contains("*** Begin Patch") {
        return out;
    }
    let mut in_patch = false;
    // The file of the `*** Update File:` a `*** Move to:` moves.
    let mut updated: Option<usize> = None;
    for line in text.lines() {
        let line = line.trim_end();
        if line.starts_with("*** Begin Patch") {
            in_patch = true;
            continue;
        }
        if line.starts_with("*** End Patch") {
            in_patch = false;
        }
        if !in_patch || !line.starts_with("*** ") {
            continue;
        }
        let header = PATCH_HEADERS
            .iter()
            .find_map(|(header, action)| Some((line.strip_prefix(header)?.trim(), *action)));
        let Some((path, action)) = header else {
            continue;
        };
        if path.is_empty() || path.contains(['\\', '"', '\'']) {
            updated = None;
            continue;
        }
        if action == "moved here" {
            if let Some(moved) = updated.take().and_then(|at| out.get_mut(at)) {
                moved.1 = "moved";
            }
        }
        updated = (action == "updated").then_some(out.len());
        out.push((one_line(path, TOUCHED_CHARS), action));
    }
    out
}

/// What a tool call was: its description, its command's entry in the touched list, the files
/// it named.
pub(super) struct CallFacts {
    pub(super) described: String,
    pub(super) command: Option<usize>,
    pub(super) paths: Vec<String>,
    /// It only read or searched documents (see [`reads_documents_only`]): what its output
    /// says of errors is the documents' text.
    pub(super) reads_documents: bool,
}

/// `text` with the paths under `directory` (the working directory the harness stated) written
/// relative to it where a word starts, as the touched list writes a file's
/// (`cat /home/me/app/src/a.rs` is `cat src/a.rs`): the summary says its relative paths are in
/// that directory, and a long session's commands otherwise repeat it in each entry. A file at
/// the directory's top keeps its absolute path, as in the touched list.
pub(in crate::summarize::deterministic) fn relative_paths<'a>(
    text: &'a str,
    directory: Option<&str>,
) -> Cow<'a, str> {
    let Some(directory) = directory.map(|d| d.trim_end_matches('/')) else {
        return Cow::Borrowed(text);
    };
    if !directory.starts_with('/') || directory.len() < 2 {
        return Cow::Borrowed(text);
    }
    let prefix = format!("{directory}/");
    if !text.contains(&prefix) {
        return Cow::Borrowed(text);
    }
    // A command that changes its directory names its paths from there, not from this one.
    let changes_directory = text
        .split(|c: char| c.is_whitespace() || matches!(c, ';' | '&' | '|' | '(' | '\'' | '"'))
        .any(|word| matches!(word, "cd" | "pushd"));
    if changes_directory {
        return Cow::Borrowed(text);
    }
    let ends_word = |c: char| {
        c.is_whitespace()
            || matches!(
                c,
                '\'' | '"' | '`' | ')' | ',' | ';' | '<' | '>' | '|' | '&'
            )
    };
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    for (at, _) in text.match_indices(&prefix) {
        let starts_word = text[..at]
            .chars()
            .next_back()
            .is_none_or(|c| ends_word(c) || matches!(c, '=' | '(' | '[' | '{'));
        // Under a folder of the directory: a name, then a `/` before the word ends. The search
        // stops at the first `/`, so that each match reads only up to the next.
        let rest = &text[at + prefix.len()..];
        let nested = rest
            .find(|c: char| c == '/' || ends_word(c))
            .is_some_and(|end| end > 0 && rest[end..].starts_with('/'));
        if starts_word && nested {
            out.push_str(&text[copied..at]);
            copied = at + prefix.len();
        }
    }
    if copied == 0 {
        return Cow::Borrowed(text);
    }
    out.push_str(&text[copied..]);
    Cow::Owned(out)
}

/// A path on one line in at most `max_chars` characters: a longer one keeps its end, from a
/// directory's start (`…/components/ui/Button.tsx`), where the file's name is, rather than the
/// start that every file of the project shares.
fn path_tail(path: &str, max_chars: usize) -> String {
    let path = one_line(path, usize::MAX);
    let chars = path.chars().count();
    if chars <= max_chars {
        return path;
    }
    if max_chars < 2 {
        return one_line(&path, max_chars);
    }
    let tail = &path[path
        .char_indices()
        .nth(chars - (max_chars - 1))
        .map_or(0, |(at, _)| at)..];
    let tail = match tail.find('/') {
        Some(at) if at + 1 < tail.len() => &tail[at..],
        _ => tail,
    };
    format!("{ELLIPSIS}{tail}")
}

/// The file paths `text` names that its summary entry `shown` does not, once each, in order.
pub(super) fn unshown_paths(text: &str, shown: &str) -> Vec<String> {
    let mut seen = HashSet::new();
    file_paths(text)
        .filter(|p| !shown.contains(p) && seen.insert(*p))
        .map(|p| one_line(p, TOUCHED_CHARS))
        .collect()
}
