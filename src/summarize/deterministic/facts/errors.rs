//! The error lines of tool outputs: the one that says what failed, and one entry per
//! compiler message, counted across runs.

use std::collections::HashMap;

use super::super::*;
use crate::domain::diagnostic;
use crate::engine::view;

impl Digest {
    /// Keeps one entry per error line, where it was last seen, with how many times it was: a
    /// test that fails run after run is one line, not one per run, and the room goes to
    /// distinct errors. Lines that differ only in their numbers (a process id, a time) are one
    /// ([`view::error_shape`]), told as the newest. A compiler's message in one file is one
    /// entry naming its places, the places of every run it was seen in ([`grouped_entries`]).
    pub(in crate::summarize::deterministic) fn dedupe_errors(&mut self) {
        let errors = grouped_entries(std::mem::take(self.get_mut(Section::Errors)));
        // Lines that differ only in their numbers or a terminal's colours are one error.
        let mut times: HashMap<String, usize> = HashMap::new();
        let lines: Vec<(String, String)> = errors
            .into_iter()
            .map(|entry| {
                let (line, n) = split_times(entry);
                // A failed call's headline (`bash(command=make) → src/a.c:12:5: error: …`):
                // the call as it reads, the line it printed by its shape.
                let shape = match line.split_once(OUTCOME) {
                    Some((call, said)) => format!("{call}{OUTCOME}{}", view::error_shape(said)),
                    None => view::error_shape(&line),
                };
                let count = times.entry(shape.clone()).or_default();
                *count = count.saturating_add(n);
                (line, shape)
            })
            .collect();
        let mut newest_first: Vec<String> = lines
            .into_iter()
            .rev()
            .filter_map(|(line, shape)| {
                let n = times.remove(&shape)?;
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
}

/// The line of a failed tool's output that says what went wrong: the last line of a Python
/// traceback, else the first line that reads as an error (`error[E…]`, `error:`, `Error:`,
/// `FAILED`, `panicked at`) and is no line of code the run printed ([`view::is_source`]),
/// else the first line. Build tools print progress first
/// ("Compiling billing v0.3.1"), which says nothing of the failure.
pub(in crate::summarize::deterministic) fn error_line(text: &str, max_chars: usize) -> String {
    // A terminal's colours say nothing to a model.
    headline(
        &crate::domain::text::without_terminal_escapes(text),
        max_chars,
    )
}

/// [`error_line`] of an output without a terminal's escapes.
fn headline(text: &str, max_chars: usize) -> String {
    let lines = || crate::domain::text::output_lines(text);
    if text.contains("Traceback (most recent call last):") {
        if let Some(last) = lines().next_back() {
            return one_line(last, max_chars);
        }
    }
    let reads_as_error = |line: &str| {
        let lower = line.to_ascii_lowercase();
        (lower.starts_with("error[e")
            || lower.starts_with("error:")
            || line.starts_with("FAILED")
            || line.contains(" FAILED")
            || line.contains("panicked at")
            || line.contains("Error:"))
            && !view::is_source(line)
    };
    match lines().find(|l| reads_as_error(l)) {
        Some(line) => one_line(line, max_chars),
        None => first_line(text, max_chars),
    }
}

/// At most `max` entries for the error lines of one output ([`view::error_entries`]).
pub(super) fn error_entries(text: &str, max: usize) -> Vec<String> {
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
    match counted(&entry) {
        Some((len, n)) if n > 1 => {
            let mut line = entry;
            line.truncate(len);
            (line, n)
        }
        _ => (entry, 1),
    }
}

/// The length of an error entry's line before how many times it says it was seen, and that
/// number, when it says so.
fn counted(entry: &str) -> Option<(usize, usize)> {
    entry
        .strip_suffix(TIMES)
        .and_then(|rest| rest.rsplit_once(SEEN))
        .and_then(|(line, n)| Some((line.len(), n.parse::<usize>().ok()?)))
}

/// An error entry's line without how many times it says it was seen.
pub(super) fn printed_line(entry: &str) -> &str {
    counted(entry).map_or(entry, |(len, _)| &entry[..len])
}
