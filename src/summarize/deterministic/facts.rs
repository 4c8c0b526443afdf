//! Fact extraction: what the newly covered events say (requests, tool calls, files and
//! commands touched, errors, notes, episode conclusions, the last plan), and the anchors.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::*;
use crate::domain::compaction::{is_unknown, Anchors, NOT_AVAILABLE};
use crate::domain::diagnostic;
use crate::domain::event::{
    is_markup_only, named_path, walk_strings, Event, EventBody, Role, ToolCall, WRITTEN_TEXT_KEYS,
};
use crate::engine::view;

impl Digest {
    /// Adds the facts of `events`. `may_set_first_request` is false when the previous summary is
    /// not ours: the first user message seen now is then not the first of the session.
    pub(super) fn add_events(
        &mut self,
        events: &[&Event],
        may_set_first_request: bool,
        errors: ErrorLines,
    ) -> LatestFacts {
        let mut latest = LatestFacts::default();
        // Tool results name their call by id; remember what each call was to say what failed.
        let mut calls: HashMap<&str, CallFacts> = HashMap::new();
        // Errors not yet followed by a success of the same call, with the files touched since.
        let mut open_errors: Vec<(String, usize, Vec<String>)> = Vec::new();
        // The findings listed so far, to list each once; made at the first finding.
        let mut findings: Option<HashSet<String>> = None;

        for event in events {
            match &event.body {
                EventBody::Message(m) => match m.role {
                    Role::System => {}
                    Role::User => {
                        let text = m.content.text();
                        // What a harness wrote on the user's behalf (a slash command, its
                        // output) is no request or constraint; the files it names are touched
                        // all the same.
                        let shown = if is_markup_only(text) {
                            String::new()
                        } else {
                            for line in constraint_lines(text) {
                                let line = one_line(line, CONSTRAINT_CHARS);
                                if !self.get(Section::Constraints).contains(&line) {
                                    self.push(Section::Constraints, line);
                                }
                            }
                            self.add_request(event.seq, text, may_set_first_request)
                        };
                        // The files a long request names past what its entry shows.
                        for path in unshown_paths(text, &shown) {
                            self.push(
                                Section::Touched,
                                format!("{path}{LAST_ACTION}named by the user)"),
                            );
                        }
                    }
                    Role::Assistant => {
                        if !m.content.text().trim().is_empty() {
                            latest.plan = Some(m.content.text().to_owned());
                        }
                        for finding in finding_sentences(m.content.text()) {
                            let finding = one_line(finding, FINDING_CHARS);
                            let findings = findings.get_or_insert_with(|| {
                                let known = self.get(Section::Findings).iter();
                                known.map(|e| unreferenced(e).to_owned()).collect()
                            });
                            if findings.insert(finding.clone()) {
                                self.push(Section::Findings, referenced(event.seq, finding));
                            }
                        }
                        for call in &m.tool_calls {
                            let facts = self.add_tool_call(call);
                            for (_, _, touched) in &mut open_errors {
                                touched.extend(facts.paths.iter().cloned());
                            }
                            calls.insert(call.id.as_str(), facts);
                        }
                    }
                    Role::Tool => {
                        let failed = m.is_error == Some(true);
                        let call = m.tool_call_id.as_deref().and_then(|id| calls.get(id));
                        let attempt = call
                            .map(|c| c.described.clone())
                            .or_else(|| m.name.clone())
                            .unwrap_or_else(|| "a tool call".into());
                        let outcome = if failed { "failed" } else { "ok" };
                        if let Some(i) = call.and_then(|c| c.command) {
                            let entry = &mut self.get_mut(Section::Touched)[i];
                            entry.push_str(OUTCOME);
                            entry.push_str(outcome);
                        }
                        self.push(
                            Section::Folded,
                            one_line(
                                &format!("observation://{} {attempt}{OUTCOME}{outcome}", event.seq),
                                TOOL_CALL_CHARS,
                            ),
                        );
                        if failed {
                            let line = error_line(m.content.text(), ERROR_CHARS);
                            let line = if line.is_empty() {
                                "failed with no output".to_owned()
                            } else {
                                line
                            };
                            let error = bounded(&format!("{attempt} → {line}"), ERROR_CHARS);
                            latest.error = Some(error.clone());
                            self.push(Section::Errors, error);
                            let index = self.get(Section::Errors).len() - 1;
                            open_errors.push((attempt, index, Vec::new()));
                            // The other lines that say what went wrong, as they read.
                            let more = error_entries(m.content.text(), errors.failed + 1);
                            for other in more.into_iter().filter(|l| !line.starts_with(l.as_str()))
                            {
                                if self.get(Section::Errors).len() - index > errors.failed {
                                    break;
                                }
                                self.push(Section::Errors, other);
                            }
                        } else {
                            // A run that succeeded may still report errors (a test log, a
                            // linter): its error lines are facts too.
                            for entry in error_entries(m.content.text(), errors.ok) {
                                self.push(Section::Errors, entry);
                            }
                            self.note_fixes(&mut open_errors, &attempt);
                        }
                    }
                },
                EventBody::EpisodeStart(_) => {}
                EventBody::EpisodeEnd(e) => {
                    let conclusion = one_line(&e.conclusion, NOTE_CHARS);
                    let entry = if conclusion.is_empty() {
                        one_line(
                            &format!("{}: ended without a conclusion", e.name),
                            NOTE_CHARS,
                        )
                    } else {
                        one_line(&format!("{}: {conclusion}", e.name), NOTE_CHARS)
                    };
                    latest.decision = Some(entry.clone());
                    self.push(Section::Episodes, entry);
                }
                EventBody::Note(n) => {
                    let note = one_line(&n.content, NOTE_CHARS);
                    latest.decision = Some(note.clone());
                    self.push(Section::Notes, referenced(event.seq, note));
                }
            }
            // Pinned messages are constraints the agent chose to keep; notes are listed already.
            if let (true, EventBody::Message(m)) = (event.pinned, &event.body) {
                if m.role != Role::System && !m.content.text().trim().is_empty() {
                    let note = one_line(
                        &format!("{}: {}", m.role.as_str(), m.content.text()),
                        NOTE_CHARS,
                    );
                    latest.decision = Some(note.clone());
                    self.push(Section::Notes, referenced(event.seq, note));
                }
            }
        }
        if let Some(plan) = &latest.plan {
            self.push_quoted(Section::Plan, plan, PLAN_CHARS);
        }
        latest
    }

    /// Marks the errors of `attempt` as fixed by its success, naming the files touched since.
    fn note_fixes(&mut self, open_errors: &mut Vec<(String, usize, Vec<String>)>, attempt: &str) {
        open_errors.retain(|(failed, index, touched)| {
            if failed != attempt {
                return true;
            }
            let mut files: Vec<&str> = Vec::new();
            for file in touched.iter().rev() {
                if files.len() < FIX_FILES && !files.contains(&file.as_str()) {
                    files.push(file);
                }
            }
            let fix = if files.is_empty() {
                "(later succeeded)".to_owned()
            } else {
                format!("(fixed after changing {})", files.join(", "))
            };
            if let Some(entry) = self.get_mut(Section::Errors).get_mut(*index) {
                entry.push(' ');
                entry.push_str(&one_line(&fix, ERROR_CHARS));
            }
            false
        });
    }

    /// Lists a user's message as the first request (quoted; when `may_set_first` and none is
    /// yet) or as a later one, referenced by `seq`; returns the entry as shown.
    fn add_request(&mut self, seq: i64, text: &str, may_set_first: bool) -> String {
        if may_set_first && self.get(Section::FirstRequest).is_empty() {
            self.push_quoted(Section::FirstRequest, text, FIRST_REQUEST_CHARS);
            let block = self.get_mut(Section::FirstRequest).first_mut();
            block.map_or_else(String::new, |block| {
                *block = referenced(seq, std::mem::take(block));
                block.clone()
            })
        } else {
            let request = referenced(seq, one_line(text, REQUEST_CHARS));
            self.push(Section::Requests, request.clone());
            request
        }
    }

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
        if let Some(Value::Object(map)) = arguments {
            for key in PATH_KEYS.iter().chain(&COMMAND_KEYS).chain(&OTHER_KEYS) {
                let Some(value) = map.get(*key).and_then(argument_text) else {
                    continue;
                };
                if PATH_KEYS.contains(key) {
                    let path = one_line(&value, TOUCHED_CHARS);
                    self.push(
                        Section::Touched,
                        format!(
                            "{path}{LAST_ACTION}{})",
                            one_line(&call.name, ARGUMENT_CHARS)
                        ),
                    );
                    paths.push(path);
                } else if COMMAND_KEYS.contains(key) {
                    let shown = one_line(&format!("$ {value}"), TOUCHED_CHARS);
                    // A long command (a build line, a `git add` of many files) names files
                    // past what its entry shows: each is listed as touched by the call.
                    for path in unshown_paths(&value, &shown) {
                        let action = one_line(&call.name, ARGUMENT_CHARS);
                        self.push(Section::Touched, format!("{path}{LAST_ACTION}{action})"));
                        paths.push(path);
                    }
                    self.push(Section::Touched, shown);
                    command = Some(self.get(Section::Touched).len() - 1);
                }
                named.push(format!("{key}={}", one_line(&value, ARGUMENT_CHARS)));
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
            let mut listed: HashSet<String> = paths.iter().cloned().collect();
            let action = one_line(&call.name, ARGUMENT_CHARS);
            for path in strings.iter().flat_map(|s| unshown_paths(s, &described)) {
                if listed.insert(path.clone()) {
                    self.push(
                        Section::Touched,
                        format!("{path}{LAST_ACTION}named by {action})"),
                    );
                }
            }
        }
        self.push(Section::ToolCalls, described.clone());
        CallFacts {
            described,
            command,
            paths,
        }
    }

    /// Keeps one entry per file or command, at the place it was last touched, with its last
    /// action or outcome.
    pub(super) fn dedupe_touched(&mut self) {
        let touched = std::mem::take(self.get_mut(Section::Touched));
        let mut seen = HashSet::new();
        let key = |entry: &str| -> String {
            let marker = if entry.starts_with("$ ") {
                OUTCOME
            } else {
                LAST_ACTION
            };
            entry
                .rsplit_once(marker)
                .map_or(entry, |(k, _)| k)
                .to_owned()
        };
        let mut newest_first: Vec<String> = touched
            .into_iter()
            .rev()
            .filter(|entry| seen.insert(key(entry)))
            .collect();
        newest_first.reverse();
        *self.get_mut(Section::Touched) = newest_first;
    }

    /// Keeps one entry per error line, where it was last seen, with how many times it was: a
    /// test that fails run after run is one line, not one per run, and the room goes to
    /// distinct errors. A compiler's message in one file is one entry naming its places, the
    /// places of every run it was seen in ([`grouped_entries`]).
    pub(super) fn dedupe_errors(&mut self) {
        let errors = grouped_entries(std::mem::take(self.get_mut(Section::Errors)));
        let mut times: HashMap<String, usize> = HashMap::new();
        let lines: Vec<String> = errors
            .into_iter()
            .map(|entry| {
                let (line, n) = split_times(entry);
                *times.entry(line.clone()).or_default() += n;
                line
            })
            .collect();
        let mut newest_first: Vec<String> = lines
            .into_iter()
            .rev()
            .filter_map(|line| {
                let n = times.remove(&line)?;
                Some(if n > 1 {
                    format!("{line}{SEEN}{n}{TIMES}")
                } else {
                    line
                })
            })
            .collect();
        newest_first.reverse();
        *self.get_mut(Section::Errors) = newest_first;
    }

    /// The anchors these facts support; "N/A" where they say nothing.
    pub(super) fn anchors(&self, latest: &LatestFacts, previous: &Anchors) -> Anchors {
        let intent_base = match self.get(Section::FirstRequest).first() {
            Some(first) => Some(one_line(unreferenced(first), REQUEST_CHARS)),
            None if !is_unknown(&previous.user_intent) => Some(
                previous
                    .user_intent
                    .split(LATEST_REQUEST)
                    .next()
                    .unwrap_or_default()
                    .to_owned(),
            ),
            None => None,
        };
        let latest_request = self.get(Section::Requests).last().map(|r| unreferenced(r));
        let user_intent = match (intent_base, latest_request) {
            (Some(base), Some(latest)) => format!("{base}{LATEST_REQUEST}{latest})"),
            (Some(base), None) => base,
            (None, Some(latest)) => format!("latest request: {latest}"),
            (None, None) => String::new(),
        };

        let mut progress = Vec::new();
        let episodes = newest(self.get(Section::Episodes), PROGRESS_ITEMS);
        if !episodes.is_empty() {
            progress.push(format!("episodes done: {}", episodes.join("; ")));
        }
        let calls = newest(self.get(Section::ToolCalls), PROGRESS_ITEMS);
        if !calls.is_empty() {
            progress.push(format!("recent tool calls: {}", calls.join("; ")));
        }

        let anchor = |value: Option<&str>| match value {
            Some(v) if !v.trim().is_empty() => one_line(v, ANCHOR_CHARS),
            _ => NOT_AVAILABLE.to_owned(),
        };
        Anchors {
            user_intent: anchor(Some(&user_intent)),
            execution_progress: anchor(Some(&progress.join(". "))),
            key_decision: anchor(latest.decision.as_deref()),
            tried_solution: anchor(latest.error.as_deref()),
            next_step: anchor(latest.plan.as_deref()),
        }
    }
}

/// What a tool call was: its description, its command's entry in the touched list, the files
/// it named.
pub(super) struct CallFacts {
    described: String,
    command: Option<usize>,
    paths: Vec<String>,
}

/// The lines of a user's message that state a constraint: "never…", "do not…", "must…",
/// "always…", "only…", "without…". What the agent must keep honouring long after the turn.
pub(super) fn constraint_lines(text: &str) -> impl Iterator<Item = &str> {
    const WORDS: [&str; 8] = [
        " never ",
        " do not ",
        " don't ",
        " must ",
        " always ",
        " only ",
        " without ",
        " should not ",
    ];
    text.lines()
        .map(str::trim)
        .filter(|line| says_any(line, 8, &WORDS))
}

/// Whether `text`, at least `min_len` bytes long, holds one of `words` in any case. The words
/// are lower case, with a space on each side that must be a word's edge.
fn says_any(text: &str, min_len: usize, words: &[&str]) -> bool {
    if text.len() < min_len {
        return false;
    }
    let lower = format!(" {} ", text.to_lowercase());
    words.iter().any(|w| lower.contains(w))
}

/// The sentences of an assistant's message that say what it found or decided, and why: "…
/// because …", "the issue is …", "instead of …", "… didn't work". A fold keeps them, so that the
/// agent does not try again what it ruled out or forget why it chose what it did.
pub(super) fn finding_sentences(text: &str) -> impl Iterator<Item = &str> {
    const WORDS: [&str; 14] = [
        " because ",
        " decided ",
        " decision",
        " instead of ",
        " root cause",
        " the issue is ",
        " the problem is ",
        " the bug is ",
        " turns out ",
        " doesn't work",
        " does not work",
        " didn't work",
        " did not work",
        " won't work",
    ];
    text.lines()
        .flat_map(sentences)
        .filter(|sentence| says_any(sentence, 20, &WORDS))
}

/// The sentences of one line: split after `.`, `!` or `?` and a space, trimmed. Reads the line
/// once.
fn sentences(line: &str) -> impl Iterator<Item = &str> {
    let mut rest = line.trim();
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        // After an ASCII mark: a character boundary.
        let end = rest
            .as_bytes()
            .windows(2)
            .position(|w| matches!(w[0], b'.' | b'!' | b'?') && w[1] == b' ')
            .map_or(rest.len(), |i| i + 1);
        let (sentence, after) = rest.split_at(end);
        rest = after.trim_start();
        Some(sentence.trim())
    })
}

/// The line of a failed tool's output that says what went wrong: the last line of a Python
/// traceback, else the first line that reads as an error (`error[E…]`, `error:`, `Error:`,
/// `FAILED`, `panicked at`), else the first line. Build tools print progress first
/// ("Compiling billing v0.3.1"), which says nothing of the failure.
pub(super) fn error_line(text: &str, max_chars: usize) -> String {
    let lines = || text.lines().map(str::trim).filter(|l| !l.is_empty());
    if text.contains("Traceback (most recent call last):") {
        if let Some(last) = lines().next_back() {
            return one_line(last, max_chars);
        }
    }
    let reads_as_error = |line: &str| {
        let lower = line.to_ascii_lowercase();
        lower.starts_with("error[e")
            || lower.starts_with("error:")
            || line.starts_with("FAILED")
            || line.contains(" FAILED")
            || line.contains("panicked at")
            || line.contains("Error:")
    };
    match lines().find(|l| reads_as_error(l)) {
        Some(line) => one_line(line, max_chars),
        None => first_line(text, max_chars),
    }
}

/// At most `max` entries for the error lines of one output ([`view::error_entries`]).
fn error_entries(text: &str, max: usize) -> Vec<String> {
    let entries = view::error_entries(text, max, PLACES_CHARS);
    let entries = entries.iter();
    entries
        .map(|e| one_line(e, ERROR_CHARS + PLACES_CHARS))
        .collect()
}

/// `entries` with the diagnostics of one message in one file merged where the newest was
/// ([`diagnostic::grouped`]); an entry that says how often it was seen stays as it is.
fn grouped_entries(entries: Vec<String>) -> Vec<String> {
    let mut counted = Vec::new();
    let once = entries.into_iter().enumerate().filter_map(|(i, entry)| {
        let (line, n) = split_times(entry);
        if n > 1 {
            counted.push((i, format!("{line}{SEEN}{n}{TIMES}")));
            None
        } else {
            Some(line)
        }
    });
    let mut out: Vec<String> = diagnostic::grouped(once)
        .into_iter()
        .map(|entry| entry.render(PLACES_CHARS))
        .collect();
    // Counted entries are not grouped: back where they were, as near as the merges allow.
    for (i, entry) in counted {
        out.insert(i.min(out.len()), entry);
    }
    out
}

/// How many times an error entry says its line was seen, and the line without it.
fn split_times(entry: String) -> (String, usize) {
    let counted = entry
        .strip_suffix(TIMES)
        .and_then(|rest| rest.rsplit_once(SEEN))
        .and_then(|(line, n)| Some((line.len(), n.parse::<usize>().ok()?)));
    match counted {
        Some((len, n)) if n > 1 => {
            let mut line = entry;
            line.truncate(len);
            (line, n)
        }
        _ => (entry, 1),
    }
}

/// The file paths `text` names that its summary entry `shown` does not, once each, in order.
fn unshown_paths(text: &str, shown: &str) -> Vec<String> {
    let mut seen = HashSet::new();
    file_paths(text)
        .filter(|p| !shown.contains(p) && seen.insert(*p))
        .map(|p| one_line(p, TOUCHED_CHARS))
        .collect()
}

/// The words of a text that read as file paths: a `/` and a name with an extension, not a URL,
/// an option or a glob (`src/lib.rs`, `/etc/hosts.conf`; `--out=x` is not one), each read as
/// the file it names ([`named_path`]: `**src/a.rs**` and `src/a.rs:58:13` are `src/a.rs`).
pub(super) fn file_paths(text: &str) -> impl Iterator<Item = &str> {
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

/// The text an argument value shows: strings as they are, lists of scalars joined by spaces.
pub(super) fn argument_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) if !s.trim().is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Array(items) => {
            let parts: Vec<String> = items
                .iter()
                .filter_map(|v| match v {
                    Value::String(s) => Some(s.clone()),
                    Value::Number(n) => Some(n.to_string()),
                    _ => None,
                })
                .collect();
            (!parts.is_empty()).then(|| parts.join(" "))
        }
        _ => None,
    }
}
