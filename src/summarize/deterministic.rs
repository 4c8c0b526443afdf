//! The deterministic summariser: builds the summary and its anchors from the events themselves,
//! with no model involved. It is the fallback whenever no LLM summariser is configured or one
//! fails, so it always succeeds, stays within the size bound and runs in linear time.
//!
//! The text is a series of labelled sections (`## Title`). Every line under a title is either a
//! list item (`- `) or a quoted line (`> `), so that a later call can read its own previous summary
//! back and extend it instead of nesting it. A previous summary in any other shape (written by an
//! LLM) is kept, bounded, as the "Earlier summary" section.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::{SummaryOutput, SummaryRequest};
use crate::domain::compaction::{is_unknown, Anchors, SummarizerInfo, Summary, NOT_AVAILABLE};
use crate::domain::event::{Event, EventBody, Role, ToolCall};

/// The first user request, kept verbatim up to this many characters.
const FIRST_REQUEST_CHARS: usize = 400;
const REQUEST_CHARS: usize = 200;
const TOOL_CALL_CHARS: usize = 200;
const ARGUMENT_CHARS: usize = 80;
const TOUCHED_CHARS: usize = 160;
const ERROR_CHARS: usize = 200;
const NOTE_CHARS: usize = 300;
const PLAN_CHARS: usize = 400;
const ANCHOR_CHARS: usize = 300;
/// How many of the newest items each list keeps while older items of other lists can still go.
const ITEMS_KEPT_LONGEST: usize = 3;
/// How many recent tool calls and episodes the progress anchor names.
const PROGRESS_ITEMS: usize = 3;

const ELLIPSIS: char = '…';
const LATEST_REQUEST: &str = " (latest request: ";

/// Argument keys that name a file or directory.
const PATH_KEYS: [&str; 8] = [
    "path",
    "file",
    "file_path",
    "filepath",
    "filename",
    "target_file",
    "directory",
    "dir",
];
/// Argument keys that hold a shell command.
const COMMAND_KEYS: [&str; 2] = ["cmd", "command"];
/// Other arguments worth naming in a tool call.
const OTHER_KEYS: [&str; 3] = ["query", "pattern", "url"];

/// Summarises the request's events into the previous summary.
pub fn summarize(request: SummaryRequest<'_>) -> SummaryOutput {
    let previous = request.previous;

    let (mut digest, foreign) = match read_back(&previous.text) {
        Some(digest) => (digest, false),
        None => (
            Digest::with_earlier(&previous.text, request.max_chars / 2),
            true,
        ),
    };
    let facts = digest.add_events(request.events, !foreign);
    digest.dedupe_touched();

    let mut anchors = previous.anchors.clone();
    anchors.merge(&digest.anchors(&facts, &previous.anchors));
    let text = digest.render_within(request.max_chars);

    SummaryOutput {
        summary: Summary { text, anchors },
        info: SummarizerInfo {
            kind: "deterministic".into(),
            model: None,
            // Pure and fast: its time is part of the compaction's own duration.
            latency_ms: 0.0,
            input_tokens: None,
            output_tokens: None,
        },
    }
}

/// The sections of the text, in the order they are shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Section {
    FirstRequest,
    Earlier,
    Requests,
    Notes,
    Episodes,
    Errors,
    ToolCalls,
    Touched,
    Plan,
}

impl Section {
    const ALL: [Section; 9] = [
        Section::FirstRequest,
        Section::Earlier,
        Section::Requests,
        Section::Notes,
        Section::Episodes,
        Section::Errors,
        Section::ToolCalls,
        Section::Touched,
        Section::Plan,
    ];

    /// Lists whose oldest items go first when the text is too long, least important first.
    const DROP_ORDER: [Section; 6] = [
        Section::ToolCalls,
        Section::Touched,
        Section::Errors,
        Section::Requests,
        Section::Episodes,
        Section::Notes,
    ];

    /// Quoted blocks, shortened when the lists alone cannot make room, last resort last.
    const SHORTEN_ORDER: [Section; 3] = [Section::Earlier, Section::Plan, Section::FirstRequest];

    fn title(self) -> &'static str {
        match self {
            Section::FirstRequest => "First user request",
            Section::Earlier => "Earlier summary",
            Section::Requests => "Later user requests",
            Section::Notes => "Pinned notes and decisions",
            Section::Episodes => "Episode conclusions",
            Section::Errors => "Errors seen",
            Section::ToolCalls => "Tool calls made",
            Section::Touched => "Files and commands touched",
            Section::Plan => "Last stated plan",
        }
    }

    fn from_title(title: &str) -> Option<Section> {
        Section::ALL.into_iter().find(|s| s.title() == title)
    }

    /// Quoted sections hold one verbatim block; the others hold one-line items.
    fn is_quoted(self) -> bool {
        matches!(
            self,
            Section::FirstRequest | Section::Earlier | Section::Plan
        )
    }

    fn header_chars(self) -> usize {
        "## ".len() + self.title().chars().count() + 1
    }

    /// Characters an entry takes once rendered, with its line prefixes and newlines.
    fn entry_chars(self, entry: &str) -> usize {
        let chars = entry.chars().count();
        if self.is_quoted() {
            let lines = entry.matches('\n').count() + 1;
            // Each line gets "> " and a newline; the entry's own newlines are counted in `chars`.
            chars + 2 * lines + 1
        } else {
            "- ".len() + chars + 1
        }
    }
}

/// The facts of a summary, by section, oldest first.
#[derive(Debug, Default)]
struct Digest {
    sections: [Vec<String>; 9],
}

/// What the newly covered events said last, for the anchors.
#[derive(Debug, Default)]
struct LatestFacts {
    decision: Option<String>,
    error: Option<String>,
    plan: Option<String>,
}

impl Digest {
    fn with_earlier(text: &str, max_chars: usize) -> Self {
        let mut digest = Digest::default();
        digest.push_quoted(Section::Earlier, text, max_chars);
        digest
    }

    fn get(&self, section: Section) -> &Vec<String> {
        &self.sections[section as usize]
    }

    fn get_mut(&mut self, section: Section) -> &mut Vec<String> {
        &mut self.sections[section as usize]
    }

    fn push(&mut self, section: Section, entry: String) {
        if !entry.is_empty() {
            self.get_mut(section).push(entry);
        }
    }

    /// Sets a quoted section to `text`, trimmed and bounded.
    fn push_quoted(&mut self, section: Section, text: &str, max_chars: usize) {
        let block = bounded(text.trim(), max_chars);
        let entries = self.get_mut(section);
        entries.clear();
        if !block.is_empty() {
            entries.push(block);
        }
    }

    /// Adds the facts of `events`. `may_set_first_request` is false when the previous summary is
    /// not ours: the first user message seen now is then not the first of the session.
    fn add_events(&mut self, events: &[&Event], may_set_first_request: bool) -> LatestFacts {
        let mut latest = LatestFacts::default();
        // Tool results name their call by id; remember each call's description to say what failed.
        let mut calls: HashMap<&str, String> = HashMap::new();

        for event in events {
            match &event.body {
                EventBody::Message(m) => match m.role {
                    Role::System => {}
                    Role::User => {
                        if may_set_first_request && self.get(Section::FirstRequest).is_empty() {
                            self.push_quoted(
                                Section::FirstRequest,
                                &m.content,
                                FIRST_REQUEST_CHARS,
                            );
                        } else {
                            self.push(Section::Requests, one_line(&m.content, REQUEST_CHARS));
                        }
                    }
                    Role::Assistant => {
                        if !m.content.trim().is_empty() {
                            latest.plan = Some(m.content.clone());
                        }
                        for call in &m.tool_calls {
                            let described = self.add_tool_call(call);
                            calls.insert(call.id.as_str(), described);
                        }
                    }
                    Role::Tool => {
                        if m.is_error == Some(true) {
                            let attempt = m
                                .tool_call_id
                                .as_deref()
                                .and_then(|id| calls.get(id).cloned())
                                .or_else(|| m.name.clone())
                                .unwrap_or_else(|| "a tool call".into());
                            let line = first_line(&m.content, ERROR_CHARS);
                            let line = if line.is_empty() {
                                "failed with no output".to_owned()
                            } else {
                                line
                            };
                            let error = bounded(&format!("{attempt} → {line}"), ERROR_CHARS);
                            latest.error = Some(error.clone());
                            self.push(Section::Errors, error);
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
                    self.push(Section::Notes, note);
                }
            }
            // Pinned messages are constraints the agent chose to keep; notes are listed already.
            if let (true, EventBody::Message(m)) = (event.pinned, &event.body) {
                if m.role != Role::System && !m.content.trim().is_empty() {
                    let note = one_line(&format!("{}: {}", m.role.as_str(), m.content), NOTE_CHARS);
                    latest.decision = Some(note.clone());
                    self.push(Section::Notes, note);
                }
            }
        }
        if let Some(plan) = &latest.plan {
            self.push_quoted(Section::Plan, plan, PLAN_CHARS);
        }
        latest
    }

    /// Lists the call and what it touched; returns its description.
    fn add_tool_call(&mut self, call: &ToolCall) -> String {
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
                    self.push(Section::Touched, one_line(&value, TOUCHED_CHARS));
                } else if COMMAND_KEYS.contains(key) {
                    self.push(
                        Section::Touched,
                        one_line(&format!("$ {value}"), TOUCHED_CHARS),
                    );
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
        self.push(Section::ToolCalls, described.clone());
        described
    }

    /// Keeps one entry per file or command, at the place it was last touched.
    fn dedupe_touched(&mut self) {
        let touched = std::mem::take(self.get_mut(Section::Touched));
        let mut seen = HashSet::new();
        let mut newest_first: Vec<String> = touched
            .into_iter()
            .rev()
            .filter(|entry| seen.insert(entry.clone()))
            .collect();
        newest_first.reverse();
        *self.get_mut(Section::Touched) = newest_first;
    }

    /// The anchors these facts support; "N/A" where they say nothing.
    fn anchors(&self, latest: &LatestFacts, previous: &Anchors) -> Anchors {
        let intent_base = match self.get(Section::FirstRequest).first() {
            Some(first) => Some(one_line(first, REQUEST_CHARS)),
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
        let latest_request = self.get(Section::Requests).last();
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

    /// Renders the sections, dropping the oldest, least important items first until the text
    /// fits in `max_chars` characters. The first user request is shortened only as a last resort.
    fn render_within(mut self, max_chars: usize) -> String {
        let costs: Vec<Vec<usize>> = Section::ALL
            .iter()
            .map(|&s| self.get(s).iter().map(|e| s.entry_chars(e)).collect())
            .collect();
        let section_chars = |s: Section, costs: &[usize]| -> usize {
            if costs.is_empty() {
                0
            } else {
                s.header_chars() + costs.iter().sum::<usize>()
            }
        };
        let mut total: usize = Section::ALL
            .iter()
            .map(|&s| section_chars(s, &costs[s as usize]))
            .sum();

        // Lists drop their oldest items from `start`; each drop is O(1).
        let mut start = [0usize; 9];
        for floor in [ITEMS_KEPT_LONGEST, 0] {
            for section in Section::DROP_ORDER {
                let i = section as usize;
                while total > max_chars && costs[i].len() - start[i] > floor {
                    total -= costs[i][start[i]];
                    start[i] += 1;
                    if start[i] == costs[i].len() {
                        total -= section.header_chars();
                    }
                }
            }
        }
        for section in Section::SHORTEN_ORDER {
            let i = section as usize;
            let Some(block) = self.sections[i].first() else {
                continue;
            };
            if total <= max_chars {
                break;
            }
            let excess = total - max_chars;
            let cost = costs[i][0];
            total -= cost + section.header_chars();
            // A quoted block's cost shrinks at least as fast as its text (fewer chars, no more lines).
            let keep = block.chars().count().saturating_sub(excess);
            let shortened = if keep > 1 {
                bounded(block, keep)
            } else {
                String::new()
            };
            if shortened.is_empty() {
                self.sections[i].clear();
            } else {
                total += section.entry_chars(&shortened) + section.header_chars();
                self.sections[i] = vec![shortened];
            }
        }

        let mut text = String::with_capacity(total.min(max_chars) * 4);
        for section in Section::ALL {
            let i = section as usize;
            let entries = self.sections[i].get(start[i]..).unwrap_or_default();
            if entries.is_empty() {
                continue;
            }
            text.push_str("## ");
            text.push_str(section.title());
            text.push('\n');
            for entry in entries {
                if section.is_quoted() {
                    for line in entry.split('\n') {
                        text.push_str("> ");
                        text.push_str(line);
                        text.push('\n');
                    }
                } else {
                    text.push_str("- ");
                    text.push_str(entry);
                    text.push('\n');
                }
            }
        }
        let text = text.trim_end();
        // Only headers too long for a tiny bound get here; the bound holds regardless.
        truncate_chars(text, max_chars).to_owned()
    }
}

/// Reads back a summary this module wrote; `None` when the text is in any other shape.
fn read_back(text: &str) -> Option<Digest> {
    let mut digest = Digest::default();
    if text.trim().is_empty() {
        return Some(digest);
    }
    let mut current: Option<Section> = None;
    let mut quoted: Vec<&str> = Vec::new();
    for line in text.split('\n') {
        if let Some(section) = line.strip_prefix("## ").and_then(Section::from_title) {
            flush_quoted(&mut digest, current, &mut quoted);
            current = Some(section);
            continue;
        }
        let section = current?;
        if section.is_quoted() {
            let content = line.strip_prefix("> ").or_else(|| line.strip_prefix('>'))?;
            quoted.push(content);
        } else {
            let item = line.strip_prefix("- ")?;
            digest.push(section, item.to_owned());
        }
    }
    flush_quoted(&mut digest, current, &mut quoted);
    Some(digest)
}

fn flush_quoted(digest: &mut Digest, section: Option<Section>, lines: &mut Vec<&str>) {
    if let Some(section) = section.filter(|s| s.is_quoted()) {
        if !lines.is_empty() {
            digest.push(section, lines.join("\n"));
        }
    }
    lines.clear();
}

/// The text an argument value shows: strings as they are, lists of scalars joined by spaces.
fn argument_text(value: &Value) -> Option<String> {
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

fn newest(entries: &[String], n: usize) -> &[String] {
    &entries[entries.len().saturating_sub(n)..]
}

/// The first `max_chars` characters of `text`, never splitting a character.
pub(super) fn truncate_chars(text: &str, max_chars: usize) -> &str {
    match text.char_indices().nth(max_chars) {
        Some((end, _)) => &text[..end],
        None => text,
    }
}

/// `text` in at most `max_chars` characters, ending with "…" when it was cut.
pub(super) fn bounded(text: &str, max_chars: usize) -> String {
    let head = truncate_chars(text, max_chars);
    if head.len() == text.len() {
        return head.to_owned();
    }
    let mut cut = truncate_chars(head, max_chars.saturating_sub(1)).to_owned();
    if max_chars > 0 {
        cut.push(ELLIPSIS);
    }
    cut
}

/// `text` on one line, whitespace runs collapsed, bounded to `max_chars` characters. Reads no
/// further into `text` than it needs to.
fn one_line(text: &str, max_chars: usize) -> String {
    let mut out = String::new();
    let mut chars = 0;
    let mut pending_space = false;
    for c in text.chars() {
        if c.is_whitespace() {
            pending_space = chars > 0;
            continue;
        }
        let needed = usize::from(pending_space) + 1;
        if chars + needed > max_chars {
            if max_chars > 0 {
                // Make room for the ellipsis.
                if chars == max_chars {
                    out.pop();
                }
                out.truncate(out.trim_end().len());
                out.push(ELLIPSIS);
            }
            return out;
        }
        if pending_space {
            out.push(' ');
        }
        out.push(c);
        chars += needed;
        pending_space = false;
    }
    out
}

/// The first non-blank line of `text`, on one line and bounded.
fn first_line(text: &str, max_chars: usize) -> String {
    let line = text.trim_start().split('\n').next().unwrap_or_default();
    one_line(line, max_chars)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::event::{EpisodeEnd, EpisodeKind, EpisodeStart, Message, Note};
    use chrono::DateTime;
    use proptest::prelude::*;
    use serde_json::json;

    fn event(seq: i64, body: EventBody) -> Event {
        Event {
            seq,
            id: None,
            body,
            pinned: false,
            metadata: None,
            tokens: 0,
            created_at: DateTime::UNIX_EPOCH,
        }
    }

    fn message(role: Role, content: &str) -> Message {
        Message {
            role,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
            name: None,
            is_error: None,
        }
    }

    fn user(seq: i64, content: &str) -> Event {
        event(seq, EventBody::Message(message(Role::User, content)))
    }

    fn assistant(seq: i64, content: &str) -> Event {
        event(seq, EventBody::Message(message(Role::Assistant, content)))
    }

    fn call(seq: i64, id: &str, name: &str, arguments: Value) -> Event {
        event(
            seq,
            EventBody::Message(Message {
                tool_calls: vec![ToolCall {
                    id: id.into(),
                    name: name.into(),
                    arguments,
                }],
                ..message(Role::Assistant, "")
            }),
        )
    }

    fn result(seq: i64, id: &str, content: &str, is_error: bool) -> Event {
        event(
            seq,
            EventBody::Message(Message {
                tool_call_id: Some(id.into()),
                is_error: Some(is_error),
                ..message(Role::Tool, content)
            }),
        )
    }

    fn note(seq: i64, content: &str) -> Event {
        event(
            seq,
            EventBody::Note(Note {
                content: content.into(),
            }),
        )
    }

    fn episode(seq: i64, name: &str, conclusion: &str) -> [Event; 2] {
        [
            event(
                seq,
                EventBody::EpisodeStart(EpisodeStart {
                    name: name.into(),
                    kind: EpisodeKind::Exploration,
                    dependencies: Vec::new(),
                }),
            ),
            event(
                seq + 1,
                EventBody::EpisodeEnd(EpisodeEnd {
                    name: name.into(),
                    conclusion: conclusion.into(),
                }),
            ),
        ]
    }

    fn run(previous: &Summary, events: &[Event], max_chars: usize) -> SummaryOutput {
        let events: Vec<&Event> = events.iter().collect();
        summarize(SummaryRequest {
            previous,
            events: &events,
            max_chars,
        })
    }

    fn session() -> Vec<Event> {
        let mut events = vec![
            event(
                1,
                EventBody::Message(message(Role::System, "You are a coding agent.")),
            ),
            user(
                2,
                "Fix the login bug in auth.rs.\nIt rejects valid passwords.",
            ),
            call(3, "c1", "read_file", json!("{\"path\": \"src/auth.rs\"}")),
            result(4, "c1", "fn login() { ... }", false),
            call(
                5,
                "c2",
                "shell",
                json!({"command": "cargo test auth", "timeout": 60}),
            ),
            result(
                6,
                "c2",
                "\nerror[E0425]: cannot find value `hash`\n  --> src/auth.rs:3",
                true,
            ),
            note(7, "Never touch the database schema."),
        ];
        events.extend(episode(
            8,
            "explore-auth",
            "The hash is compared before salting.",
        ));
        events.push(user(10, "Also keep the old API working."));
        let mut pinned = user(11, "Use bcrypt, not sha1.");
        pinned.pinned = true;
        events.push(pinned);
        events.push(assistant(
            12,
            "Plan: salt first, then compare; rerun the tests.",
        ));
        events
    }

    #[test]
    fn every_kind_of_fact_appears() {
        let out = run(&Summary::default(), &session(), 4000);
        let text = &out.summary.text;
        for expected in [
            "## First user request\n> Fix the login bug in auth.rs.\n> It rejects valid passwords.",
            "## Later user requests\n- Also keep the old API working.",
            "- read_file(path=src/auth.rs)",
            "- shell(command=cargo test auth)",
            "## Files and commands touched\n- src/auth.rs\n- $ cargo test auth",
            "- shell(command=cargo test auth) → error[E0425]: cannot find value `hash`",
            "- Never touch the database schema.",
            "- user: Use bcrypt, not sha1.",
            "- explore-auth: The hash is compared before salting.",
            "## Last stated plan\n> Plan: salt first, then compare; rerun the tests.",
        ] {
            assert!(text.contains(expected), "missing {expected:?} in\n{text}");
        }
        assert!(!text.contains("You are a coding agent"), "{text}");
        assert!(
            !text.contains("src/auth.rs:3"),
            "only the first line of an error: {text}"
        );

        let anchors = &out.summary.anchors;
        assert!(
            anchors.user_intent.starts_with("Fix the login bug"),
            "{anchors:?}"
        );
        assert!(anchors.user_intent.contains("Use bcrypt"), "{anchors:?}");
        assert!(
            anchors.execution_progress.contains("explore-auth"),
            "{anchors:?}"
        );
        assert!(anchors
            .execution_progress
            .contains("shell(command=cargo test auth)"));
        assert_eq!(anchors.key_decision, "user: Use bcrypt, not sha1.");
        assert!(
            anchors.tried_solution.contains("cannot find value"),
            "{anchors:?}"
        );
        assert_eq!(
            anchors.next_step,
            "Plan: salt first, then compare; rerun the tests."
        );
        assert_eq!(out.info.kind, "deterministic");
        assert_eq!(out.info.model, None);
    }

    #[test]
    fn anchors_are_not_available_when_nothing_supports_them() {
        let out = run(&Summary::default(), &[user(1, "Hello")], 1000);
        let a = &out.summary.anchors;
        assert_eq!(a.user_intent, "Hello");
        for v in [
            &a.execution_progress,
            &a.key_decision,
            &a.tried_solution,
            &a.next_step,
        ] {
            assert_eq!(v, NOT_AVAILABLE);
        }
    }

    #[test]
    fn a_second_call_keeps_the_first_request_and_adds_new_facts() {
        let first = run(&Summary::default(), &session(), 4000);
        let more = [
            user(13, "Now add a test for it."),
            call(
                14,
                "c3",
                "write_file",
                json!({"file_path": "tests/auth.rs"}),
            ),
            result(15, "c3", "permission denied", true),
        ];
        let second = run(&first.summary, &more, 4000);
        let text = &second.summary.text;
        assert!(text.starts_with(
            "## First user request\n> Fix the login bug in auth.rs.\n> It rejects valid passwords."
        ));
        for kept in [
            "- read_file(path=src/auth.rs)",
            "- Never touch the database schema.",
        ] {
            assert!(text.contains(kept), "lost {kept:?}:\n{text}");
        }
        for added in [
            "- Now add a test for it.",
            "- write_file(file_path=tests/auth.rs) → permission denied",
            "- tests/auth.rs",
        ] {
            assert!(text.contains(added), "missing {added:?}:\n{text}");
        }
        // The plan and decision of the first call stay known; the new error replaces the old one.
        let a = &second.summary.anchors;
        assert_eq!(a.next_step, first.summary.anchors.next_step);
        assert_eq!(a.key_decision, first.summary.anchors.key_decision);
        assert!(a.tried_solution.contains("permission denied"), "{a:?}");
        assert!(a.user_intent.starts_with("Fix the login bug"), "{a:?}");
        assert!(a.user_intent.contains("Now add a test"), "{a:?}");
        // Reading the summary back and writing it again changes nothing.
        assert_eq!(run(&second.summary, &[], 4000).summary, second.summary);
    }

    #[test]
    fn a_summary_from_another_summariser_is_kept_as_the_earlier_summary() {
        let previous = Summary {
            text: "The user wants the login bug fixed.\n## Not a section of ours".into(),
            anchors: Anchors {
                user_intent: "Fix the login bug".into(),
                ..Anchors::default()
            },
        };
        let out = run(&previous, &[user(20, "Ship it.")], 2000);
        let text = &out.summary.text;
        assert!(text.starts_with(
            "## Earlier summary\n> The user wants the login bug fixed.\n> ## Not a section of ours"
        ), "{text}");
        assert!(!text.contains("## First user request"), "{text}");
        assert!(
            text.contains("## Later user requests\n- Ship it."),
            "{text}"
        );
        assert_eq!(
            out.summary.anchors.user_intent,
            "Fix the login bug (latest request: Ship it.)"
        );
    }

    #[test]
    fn known_anchors_never_regress() {
        let previous = Summary {
            text: String::new(),
            anchors: Anchors {
                user_intent: "Fix the login bug".into(),
                execution_progress: "read auth.rs".into(),
                key_decision: "use bcrypt".into(),
                tried_solution: "sha1 failed".into(),
                next_step: "rerun tests".into(),
            },
        };
        let events = [result(1, "x", "ok", false)];
        assert_eq!(
            run(&previous, &events, 500).summary.anchors,
            previous.anchors
        );
        assert_eq!(run(&previous, &[], 500).summary.anchors, previous.anchors);
    }

    #[test]
    fn same_input_gives_the_same_output() {
        let events = session();
        let a = run(&Summary::default(), &events, 700);
        let b = run(&Summary::default(), &events, 700);
        assert_eq!(a.summary, b.summary);
    }

    #[test]
    fn huge_non_ascii_inputs_stay_bounded_and_keep_the_first_request() {
        let long = "日本語のテキスト🙂 é ".repeat(1_000);
        let mut events = vec![user(1, &format!("Première demande : {long}"))];
        for i in 0..500 {
            let seq = 2 + 4 * i;
            events.push(call(
                seq,
                &format!("c{i}"),
                "run",
                json!({"cmd": format!("echo {i} {long}")}),
            ));
            events.push(result(seq + 1, &format!("c{i}"), &long, i % 3 == 0));
            events.push(user(seq + 2, &long));
            events.push(note(seq + 3, &long));
        }
        for max_chars in [0, 1, 7, 40, 300, 1_000, 8_000] {
            let out = run(&Summary::default(), &events, max_chars);
            let chars = out.summary.text.chars().count();
            assert!(chars <= max_chars, "{chars} > {max_chars}");
            if max_chars >= 1_000 {
                assert!(
                    out.summary
                        .text
                        .starts_with("## First user request\n> Première demande : 日本語"),
                    "{}",
                    out.summary.text
                );
            }
            if max_chars >= 8_000 {
                // The newest facts survive, the oldest went first.
                assert!(
                    out.summary.text.contains("echo 499"),
                    "{}",
                    out.summary.text
                );
                assert!(
                    !out.summary.text.contains("echo 0 "),
                    "{}",
                    out.summary.text
                );
            }
            for anchor in [
                &out.summary.anchors.user_intent,
                &out.summary.anchors.key_decision,
                &out.summary.anchors.tried_solution,
            ] {
                assert!(anchor.chars().count() <= ANCHOR_CHARS);
            }
        }
    }

    #[test]
    fn one_line_collapses_whitespace_and_bounds() {
        assert_eq!(one_line("  a \n\t b  ", 10), "a b");
        assert_eq!(one_line("abcdef", 4), "abc…");
        assert_eq!(one_line("ab   cdef", 4), "ab…");
        assert_eq!(one_line("éééé", 3), "éé…");
        assert_eq!(one_line("abc", 0), "");
        assert_eq!(bounded("ééé", 2), "é…");
        assert_eq!(bounded("ééé", 3), "ééé");
        assert_eq!(truncate_chars("🙂🙂", 1), "🙂");
    }

    proptest! {
        #[test]
        fn the_text_never_exceeds_the_bound(
            contents in proptest::collection::vec("\\PC{0,300}|[ \n\t>#-]{0,20}", 1..30),
            max_chars in 0usize..2_000,
        ) {
            let events: Vec<Event> = contents
                .iter()
                .enumerate()
                .map(|(i, c)| match i % 4 {
                    0 => user(i as i64, c),
                    1 => call(i as i64, "c", "t", json!({ "path": c })),
                    2 => result(i as i64, "c", c, true),
                    _ => note(i as i64, c),
                })
                .collect();
            let first = run(&Summary::default(), &events, max_chars);
            prop_assert!(first.summary.text.chars().count() <= max_chars);
            let second = run(&first.summary, &events, max_chars);
            prop_assert!(second.summary.text.chars().count() <= max_chars);
        }
    }
}
