//! The deterministic summariser: builds the summary and its anchors from the events themselves,
//! with no model involved. It is the fallback whenever no LLM summariser is configured or one
//! fails, so it always succeeds, stays within the size bound and runs in linear time.
//!
//! The text is a series of labelled sections (`## Title`). Every line under a title is either a
//! list item (`- `) or a quoted line (`> `), so that a later call can read its own previous summary
//! back and extend it instead of nesting it. A previous summary in any other shape (written by an
//! LLM) is kept, bounded, as the "Earlier summary" section.

mod facts;
mod format;
mod lines;
#[cfg(test)]
mod tests;

use super::{SummaryOutput, SummaryRequest};
use crate::domain::compaction::{FallbackReason, SummarizerInfo, Summary};
use crate::domain::text::bounded;
use crate::engine::view::{self, PLACES_CHARS, SEEN, TIMES};
use format::read_back;

/// The first user request, kept verbatim up to this many characters.
const FIRST_REQUEST_CHARS: usize = 400;
const REQUEST_CHARS: usize = 200;
const TOOL_CALL_CHARS: usize = 200;
const ARGUMENT_CHARS: usize = 80;
const TOUCHED_CHARS: usize = 160;
const ERROR_CHARS: usize = 200;
const CONSTRAINT_CHARS: usize = 200;
const FINDING_CHARS: usize = 200;
/// The most error lines named for a failed tool run, besides the one that says what failed, and
/// for a run that did not fail, in a summary of `max_chars`: one per 800 characters, at least
/// 3 and 2 (10 in a 16K window's summary, 40 at 128K). A compiler run may print dozens of
/// distinct diagnostics, and a run that did not fail names as many: an agent that pipes a build
/// through `head` or `grep` loses its exit status, and the errors it printed are the same facts.
fn error_lines(max_chars: usize) -> ErrorLines {
    ErrorLines {
        failed: (max_chars / 800).max(3),
        ok: (max_chars / 800).max(2),
    }
}

/// See [`error_lines`].
#[derive(Debug, Clone, Copy)]
struct ErrorLines {
    failed: usize,
    ok: usize,
}
const NOTE_CHARS: usize = 300;
const PLAN_CHARS: usize = 400;
const ANCHOR_CHARS: usize = 300;
/// How many of the newest items each list keeps while older items of other lists can still go.
const ITEMS_KEPT_LONGEST: usize = 3;

/// The share of the summary error lines keep while touched files would be dropped for them:
/// a long build's errors, one file's messages after another's, otherwise take the whole
/// summary and leave none of the files the agent worked on (measured in docs/benchmarks.md,
/// "Error lines past half the summary").
const ERRORS_SHARE: f64 = 0.5;
/// How many recent tool calls and episodes the progress anchor names.
const PROGRESS_ITEMS: usize = 3;

const ELLIPSIS: char = '…';

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
/// Marks the last action on a file, and the outcome of a command, in the touched list.
const LAST_ACTION: &str = " (last: ";
const OUTCOME: &str = " → ";
/// How the entry of a command that succeeded ends.
const QUIET_OUTCOME: &str = " → ok";
/// Files touched between an error and a later success of the same call, named as its fix.
const FIX_FILES: usize = 3;

/// Argument keys that hold a shell command.
const COMMAND_KEYS: [&str; 2] = ["cmd", "command"];
/// Arguments naming the directory a call runs its command in.
const DIRECTORY_KEYS: [&str; 2] = ["workdir", "cwd"];
/// Other arguments worth naming in a tool call.
const OTHER_KEYS: [&str; 3] = ["query", "pattern", "url"];

/// The largest narrative a model may write for a summary of `max_chars` characters: the rest
/// is kept for the facts.
pub fn narrative_chars(max_chars: usize) -> usize {
    max_chars / 2
}

/// Summarises the request's events into the previous summary.
pub fn summarize(request: SummaryRequest<'_>) -> SummaryOutput {
    summarize_with(request, None)
}

/// The facts of the request's events beside a model's `narrative`, which replaces the previous
/// one. The model's anchors are not merged here.
pub fn summarize_with_narrative(request: SummaryRequest<'_>, narrative: &str) -> SummaryOutput {
    summarize_with(request, Some(narrative))
}

fn summarize_with(request: SummaryRequest<'_>, narrative: Option<&str>) -> SummaryOutput {
    let previous = request.previous;

    let (mut digest, foreign) = match read_back(&previous.text) {
        Some(digest) => (digest, false),
        None => (
            Digest::with_earlier(&previous.text, request.max_chars / 2),
            true,
        ),
    };
    let facts = digest.add_events(request.events, !foreign, error_lines(request.max_chars));
    digest.dedupe_touched();
    digest.dedupe_errors();
    if let Some(narrative) = narrative {
        // The model read the earlier summary: its narrative takes that one's place.
        digest.get_mut(Section::Earlier).clear();
        digest.push_quoted(
            Section::Narrative,
            narrative,
            narrative_chars(request.max_chars),
        );
    }

    let mut anchors = previous.anchors.clone();
    anchors.merge(&digest.anchors(&facts, &previous.anchors));
    let text = digest.render_within(request.max_chars);

    SummaryOutput {
        summary: Summary { text, anchors },
        // Pure and fast: its time is part of the compaction's own duration.
        info: SummarizerInfo::deterministic(FallbackReason::NoneConfigured),
    }
}

/// The sections of the text, in the order they are shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Section {
    FirstRequest,
    Narrative,
    Earlier,
    Constraints,
    Requests,
    Notes,
    /// The references of requests and notes dropped from their lists: one item.
    Recall,
    Episodes,
    /// What the assistant said it found or decided, and why.
    Findings,
    /// The working directory the harness stated first: the touched files under it are listed
    /// by their paths relative to it. One item, never dropped.
    Workdir,
    Errors,
    ToolCalls,
    Touched,
    Folded,
    Plan,
}

impl Section {
    const ALL: [Section; 15] = [
        Section::FirstRequest,
        Section::Narrative,
        Section::Earlier,
        Section::Constraints,
        Section::Requests,
        Section::Notes,
        Section::Recall,
        Section::Episodes,
        Section::Findings,
        Section::Workdir,
        Section::Errors,
        Section::ToolCalls,
        Section::Touched,
        Section::Folded,
        Section::Plan,
    ];

    /// Lists whose oldest items go first when the text is too long, least important first.
    const DROP_ORDER: [Section; 9] = [
        Section::Findings,
        Section::Folded,
        Section::ToolCalls,
        // Touched files and commands before errors: a failed build's errors, a line for each
        // message however many places, are what the agent acts on next. Only while the errors
        // keep no more than their share (`drop_steps`).
        Section::Touched,
        Section::Errors,
        Section::Requests,
        Section::Episodes,
        Section::Notes,
        Section::Constraints,
    ];

    /// `DROP_ORDER` as steps, each dropping a list's oldest entries while the list takes more
    /// than a share of the summary: error lines past `ERRORS_SHARE` of it go before touched
    /// files, then the files, then the other errors.
    fn drop_steps() -> impl Iterator<Item = (Section, f64)> {
        Section::DROP_ORDER.into_iter().flat_map(|s| {
            let before = (s == Section::Touched).then_some((Section::Errors, ERRORS_SHARE));
            before.into_iter().chain([(s, 0.0)])
        })
    }

    /// Quoted blocks, shortened when the lists alone cannot make room, last resort last.
    const SHORTEN_ORDER: [Section; 4] = [
        Section::Earlier,
        Section::Narrative,
        Section::Plan,
        Section::FirstRequest,
    ];

    /// How many of a list's newest items stay while older items of other lists can still go.
    /// The newest tool calls are in the folded list too, with their outcomes and references.
    fn kept_longest(self) -> usize {
        match self {
            Section::ToolCalls => 0,
            _ => ITEMS_KEPT_LONGEST,
        }
    }

    /// The order a list's entries go in when the text is too long: oldest first; in the touched
    /// list, commands that succeeded and name no file before the files and the other commands
    /// (`$ git status → ok` says the least: nothing failed, and no file is lost with it).
    fn drop_order(self, entries: &[String]) -> Vec<usize> {
        let mut order: Vec<usize> = (0..entries.len()).collect();
        if self == Section::Touched {
            let quiet = |e: &str| {
                e.starts_with("$ ")
                    && e.ends_with(QUIET_OUTCOME)
                    && facts::file_paths(e).next().is_none()
            };
            // A stable sort: each group keeps its oldest first.
            order.sort_by_key(|&i| !quiet(&entries[i]));
        }
        order
    }

    fn title(self) -> &'static str {
        match self {
            Section::FirstRequest => "First user request",
            Section::Narrative => "Narrative",
            Section::Earlier => "Earlier summary",
            Section::Constraints => "Constraints the user stated",
            Section::Requests => "Later user requests",
            Section::Notes => "Pinned notes and decisions",
            Section::Recall => "Earlier user messages and notes (recall by URI)",
            Section::Episodes => "Episode conclusions",
            Section::Findings => "What the assistant found or decided",
            Section::Workdir => "Working directory (relative paths below are in it)",
            Section::Errors => "Errors seen",
            Section::ToolCalls => "Tool calls made",
            Section::Touched => "Files and commands touched",
            Section::Folded => "Tool outputs folded (recall by URI)",
            Section::Plan => "Last stated plan",
        }
    }

    fn from_title(title: &str) -> Option<Section> {
        Section::ALL.into_iter().find(|s| s.title() == title)
    }

    /// What the entries of a list share, shown once on a line for all of them (`lines`).
    fn shared(self) -> Option<lines::Kind> {
        match self {
            Section::Touched => Some(lines::Kind::Directories),
            Section::Errors => Some(lines::Kind::Files),
            _ => None,
        }
    }

    /// Quoted sections hold one verbatim block; the others hold one-line items.
    fn is_quoted(self) -> bool {
        matches!(
            self,
            Section::FirstRequest | Section::Narrative | Section::Earlier | Section::Plan
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
    sections: [Vec<String>; Section::ALL.len()],
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
}

/// A list entry about the event at `seq`, led by its observation reference: the model can
/// recall the whole event, and the reference outlives the entry (see `Section::Recall`).
fn referenced(seq: i64, entry: String) -> String {
    if entry.is_empty() {
        return entry;
    }
    format!("{} {entry}", view::observation_uri(seq))
}

/// The observation reference an entry starts with.
fn reference_of(entry: &str) -> Option<&str> {
    entry
        .split_once(' ')
        .map(|(uri, _)| uri)
        .filter(|uri| uri.starts_with(crate::domain::observation::SCHEME))
}

/// An entry without the reference it starts with.
fn unreferenced(entry: &str) -> &str {
    match reference_of(entry) {
        Some(uri) => &entry[uri.len() + 1..],
        None => entry,
    }
}

fn newest(entries: &[String], n: usize) -> &[String] {
    &entries[entries.len().saturating_sub(n)..]
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
