//! Fact extraction: what the newly covered events say (requests, tool calls, files and
//! commands touched, errors, notes, episode conclusions, the last plan), and the anchors.
//! A tool call's facts are read in [`calls`], the error lines of outputs in [`errors`], the
//! sentences of messages that state a constraint or a finding in [`sentences`], the commands
//! that only read, search or write one file in [`reads`].

mod calls;
mod errors;
mod reads;
mod sentences;

use std::borrow::Cow;
use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};

use super::*;
use crate::domain::compaction::{
    is_unknown, Anchors, EPISODES_DONE, LATEST_REQUEST, NOT_AVAILABLE, RECENT_TOOL_CALLS,
};
use crate::domain::event::{
    instructions_title, is_markup_only, request_text, stated_working_directory, Event, EventBody,
    Role,
};
use crate::domain::text::digit_runs_blanked;
pub(super) use calls::file_paths;
use calls::{unshown_paths, CallFacts};
pub(super) use errors::error_line;
use errors::{error_entries, printed_line};
use sentences::constraint_lines;
pub(super) use sentences::finding_sentences;

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
        // User messages named only in the recall list: markup a harness sent as the user, and
        // a request listed again in the same words later.
        let mut recalled = Vec::new();

        for event in events {
            match &event.body {
                EventBody::Message(m) => match m.role {
                    Role::System => {}
                    Role::User => {
                        let text = m.content.text();
                        // The first working directory stated stays the one relative paths
                        // are in: entries listed relative to it stay right if it changes. One
                        // longer than an entry is not taken: never dropped, it could crowd
                        // the user's requests out of a small summary.
                        if self.get(Section::Workdir).is_empty() {
                            let stated = stated_working_directory(text)
                                .filter(|d| d.chars().count() <= TOUCHED_CHARS);
                            if let Some(directory) = stated {
                                self.push(Section::Workdir, directory.to_owned());
                            }
                        }
                        if let Some(title) = instructions_title(text) {
                            // A project's instructions the harness sent: no request, but named
                            // by reference among the constraints, before the rules they state.
                            // The files they list (a catalogue of skills) are no files the
                            // agent touched: the reference recalls them.
                            let entry = referenced(event.seq, one_line(title, REQUEST_CHARS));
                            self.push(Section::Constraints, entry);
                            self.add_constraints(text);
                        } else {
                            let first = may_set_first_request;
                            self.add_user_message(event.seq, text, first, &mut recalled);
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
                            // The headline's own line is not listed again, however often
                            // the output printed it.
                            let headline = |entry: &String| line.starts_with(printed_line(entry));
                            for other in more.into_iter().filter(|l| !headline(l)) {
                                if self.get(Section::Errors).len() - index > errors.failed {
                                    break;
                                }
                                self.push(Section::Errors, other);
                            }
                        } else {
                            // A run that succeeded may still report errors (a test log, a
                            // linter): its error lines are facts too. A document's lines about
                            // errors (an API's error format) are none the agent met.
                            if !call.is_some_and(|c| c.reads_documents) {
                                for entry in error_entries(m.content.text(), errors.ok) {
                                    self.push(Section::Errors, entry);
                                }
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
        self.recall_only(&recalled);
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

    /// Adds a user message's request and constraints, and the files it names past what its
    /// entry shows. What a harness wrote on the user's behalf (a slash command, its output, the
    /// environment's context) is no request or constraint, but stays reachable by its reference
    /// (its seq joins `recalled`, for the recall list); the files it names are touched all the
    /// same.
    fn add_user_message(
        &mut self,
        seq: i64,
        text: &str,
        may_set_first_request: bool,
        recalled: &mut Vec<i64>,
    ) {
        let shown = if is_markup_only(text) {
            recalled.push(seq);
            String::new()
        } else {
            self.add_constraints(text);
            // The user's own words, not the editor's context before them.
            self.add_request(seq, request_text(text), may_set_first_request, recalled)
        };
        for path in unshown_paths(text, &shown) {
            self.push(
                Section::Touched,
                format!("{path}{LAST_ACTION}named by the user)"),
            );
        }
    }

    /// Lists the constraints `text` states that are not listed yet.
    fn add_constraints(&mut self, text: &str) {
        for line in constraint_lines(text) {
            let line = one_line(line, CONSTRAINT_CHARS);
            if !self.get(Section::Constraints).contains(&line) {
                self.push(Section::Constraints, line);
            }
        }
    }

    /// Lists a user's message as the first request (quoted; when `may_set_first` and none is
    /// yet) or as a later one, referenced by `seq`; returns the entry as shown. A later request
    /// in the same words as one listed before ("yes please") is listed once, as the newest: the
    /// earlier one's seq joins `recalled`, for the recall list.
    fn add_request(
        &mut self,
        seq: i64,
        text: &str,
        may_set_first: bool,
        recalled: &mut Vec<i64>,
    ) -> String {
        if may_set_first && self.get(Section::FirstRequest).is_empty() {
            self.push_quoted(Section::FirstRequest, text, FIRST_REQUEST_CHARS);
            let block = self.get_mut(Section::FirstRequest).first_mut();
            block.map_or_else(String::new, |block| {
                *block = referenced(seq, std::mem::take(block));
                block.clone()
            })
        } else {
            let request = referenced(seq, one_line(text, REQUEST_CHARS));
            let words = unreferenced(&request);
            // Only a request listed whole is known to be in the same words: two long ones
            // that differ past what their entries show are two requests.
            let whole = one_line(text, REQUEST_CHARS + 1).chars().count() <= REQUEST_CHARS;
            let requests = self.get_mut(Section::Requests);
            let same = requests
                .iter()
                .position(|e| whole && unreferenced(e) == words);
            if let Some(at) = same {
                let earlier = requests.remove(at);
                let seq = reference_of(&earlier)
                    .and_then(|uri| uri.strip_prefix(crate::domain::observation::SCHEME))
                    .and_then(|seq| seq.parse::<i64>().ok());
                recalled.extend(seq);
            }
            self.push(Section::Requests, request.clone());
            request
        }
    }

    /// Keeps one entry per file or command, at the place it was last touched, with its last
    /// action or outcome; a file's last change is not hidden by a later entry that changes
    /// nothing (a read, a search, a mention), which takes its place but not its action.
    ///
    /// A command that succeeded and only read, searched or wrote one file is told as that
    /// file's action (see [`reads`]). Other commands on the same files that differ only in a
    /// count or a range of lines (`sed -n '1,80p' a.rs | grep x`, then `sed -n '80,160p' a.rs |
    /// grep x`) are one command, told as the newest: only such a word is read apart from its
    /// numbers (`task-7`, `host1` and `test_2` keep theirs), and only in a command that names a
    /// file. The files in folders under the working directory the harness stated are listed by
    /// their relative paths.
    pub(super) fn dedupe_touched(&mut self) {
        let touched = std::mem::take(self.get_mut(Section::Touched));
        let workdir = self.get(Section::Workdir).first().cloned();
        let touched = touched
            .into_iter()
            .map(|entry| told_as_file(&entry).unwrap_or(entry))
            .map(|entry| match &workdir {
                Some(directory) => relative_to(directory, entry),
                None => entry,
            });
        let mut kept_at: HashMap<String, usize> = HashMap::new();
        let key = |entry: &str| -> String {
            if entry.starts_with("$ ") {
                let command = entry.rsplit_once(OUTCOME).map_or(entry, |(k, _)| k);
                let names_file = |word: &str| word.contains('/') && word != "/dev/null";
                if !command.split(' ').any(names_file) {
                    return command.to_owned();
                }
                let words = command.split(' ').map(|word| {
                    if is_line_count_or_range(word) {
                        Cow::Owned(digit_runs_blanked(word))
                    } else {
                        Cow::Borrowed(word)
                    }
                });
                words.collect::<Vec<_>>().join(" ")
            } else {
                entry
                    .rsplit_once(LAST_ACTION)
                    .map_or(entry, |(k, _)| k)
                    .to_owned()
            }
        };
        let mut newest_first: Vec<String> = Vec::new();
        for entry in touched.rev() {
            match kept_at.entry(key(&entry)) {
                Entry::Vacant(at) => {
                    at.insert(newest_first.len());
                    newest_first.push(entry);
                }
                Entry::Occupied(at) => {
                    let kept = &mut newest_first[*at.get()];
                    if action_of(kept).is_some_and(|a| !reads::changes(a))
                        && action_of(&entry).is_some_and(reads::changes)
                    {
                        *kept = entry;
                    }
                }
            }
        }
        newest_first.reverse();
        *self.get_mut(Section::Touched) = newest_first;
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
            progress.push(format!("{EPISODES_DONE}{}", episodes.join("; ")));
        }
        let calls = newest(self.get(Section::ToolCalls), PROGRESS_ITEMS);
        if !calls.is_empty() {
            progress.push(format!("{RECENT_TOOL_CALLS}{}", calls.join("; ")));
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

/// A command's entry told as the one file it read, searched or wrote (`src/a.rs (last: read
/// lines 1-80)`), when it succeeded and did nothing else; `None` for any other entry.
fn told_as_file(entry: &str) -> Option<String> {
    let (command, outcome) = entry.strip_prefix("$ ")?.rsplit_once(OUTCOME)?;
    if outcome != "ok" || command.ends_with(ELLIPSIS) {
        return None;
    }
    let told = reads::file_action(command)?;
    Some(format!("{}{LAST_ACTION}{})", told.path, told.action))
}

/// A file's entry (`/home/me/app/src/a.rs (last: Edit)`) by its path relative to `directory`
/// (`src/a.rs (last: Edit)`) when the file is in a folder under it: one entry for the file
/// however the agent named it, listed in fewer characters. A file at the directory's top keeps
/// its absolute path, which its bare name would not say; a command's entry is left as it ran.
fn relative_to(directory: &str, entry: String) -> String {
    if entry.starts_with("$ ") {
        return entry;
    }
    let relative = entry
        .strip_prefix(directory)
        .and_then(|rest| rest.strip_prefix('/'))
        .filter(|rest| !rest.starts_with('/'))
        .filter(|rest| {
            let path = rest
                .rsplit_once(LAST_ACTION)
                .map_or(*rest, |(path, _)| path);
            path.contains('/')
        });
    match relative {
        Some(rest) => rest.to_owned(),
        None => entry,
    }
}

/// The last action a file's entry names (`Edit` in `src/a.rs (last: Edit)`).
fn action_of(entry: &str) -> Option<&str> {
    let (_, action) = entry.rsplit_once(LAST_ACTION)?;
    action.strip_suffix(')')
}

/// Whether a command's word is a count or a range of lines, as `head`, `tail` and `sed` take
/// them (`50`, `-200`, `+3`, `'1,200p'`, `"80,$p"`, `10:20`).
fn is_line_count_or_range(word: &str) -> bool {
    let word = word.trim_matches(['\'', '"']);
    let word = word.strip_suffix('p').unwrap_or(word);
    let word = word.trim_start_matches(['-', '+']);
    word.chars().any(|c| c.is_ascii_digit())
        && word
            .chars()
            .all(|c| c.is_ascii_digit() || matches!(c, ',' | ':' | '$'))
}
