//! Fact extraction: what the newly covered events say (requests, tool calls, files and
//! commands touched, errors, notes, episode conclusions, the last plan), and the anchors.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::*;
use crate::domain::compaction::{is_unknown, Anchors, NOT_AVAILABLE};
use crate::domain::event::{Event, EventBody, Role, ToolCall};

impl Digest {
    /// Adds the facts of `events`. `may_set_first_request` is false when the previous summary is
    /// not ours: the first user message seen now is then not the first of the session.
    pub(super) fn add_events(
        &mut self,
        events: &[&Event],
        may_set_first_request: bool,
    ) -> LatestFacts {
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
                                m.content.text(),
                                FIRST_REQUEST_CHARS,
                            );
                        } else {
                            self.push(Section::Requests, one_line(m.content.text(), REQUEST_CHARS));
                        }
                    }
                    Role::Assistant => {
                        if !m.content.text().trim().is_empty() {
                            latest.plan = Some(m.content.text().to_owned());
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
                            let line = error_line(m.content.text(), ERROR_CHARS);
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
                if m.role != Role::System && !m.content.text().trim().is_empty() {
                    let note = one_line(
                        &format!("{}: {}", m.role.as_str(), m.content.text()),
                        NOTE_CHARS,
                    );
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
    pub(super) fn add_tool_call(&mut self, call: &ToolCall) -> String {
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
    pub(super) fn dedupe_touched(&mut self) {
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
    pub(super) fn anchors(&self, latest: &LatestFacts, previous: &Anchors) -> Anchors {
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
