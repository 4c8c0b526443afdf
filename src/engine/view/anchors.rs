//! The anchors under the summary in a view: those that say something the summary above them
//! does not. The record and the context endpoint keep all five; the view leaves out a line
//! that is "N/A" or that repeats the summary (the deterministic summary quotes the first and
//! latest requests and the last stated plan that its intent and next-step anchors hold).

use std::fmt::Write;

use memchr::memmem;

use crate::domain::compaction::{
    is_unknown, Anchors, EPISODES_DONE, LATEST_REQUEST, RECENT_TOOL_CALLS,
};

/// Writes `\n\nAnchors:` and a line for each anchor of `anchors` worth showing under
/// `summary`; nothing when none is.
pub(super) fn push_anchors(text: &mut String, summary: &str, anchors: &Anchors) {
    let lines = [
        ("User intent", &anchors.user_intent),
        ("Progress", &anchors.execution_progress),
        ("Key decisions", &anchors.key_decision),
        ("Tried", &anchors.tried_solution),
        ("Next step", &anchors.next_step),
    ];
    let mut header = false;
    for (label, value) in lines {
        if is_unknown(value) || already_said(summary, value) {
            continue;
        }
        if !header {
            text.push_str("\n\nAnchors:");
            header = true;
        }
        let _ = write!(text, "\n- {label}: {value}");
    }
}

/// Whether `summary` says all that `value` says: each of its parts (an intent's first and
/// latest requests, the calls and episodes progress lists) found whole in it, as whole words,
/// with whitespace and quote marks (`>`) read as nothing, since the summary quotes what an
/// anchor puts on one line; a part cut short (`…`) may go on in the summary.
fn already_said(summary: &str, value: &str) -> bool {
    let mut parts = value.split(LATEST_REQUEST);
    let first = parts.next().unwrap_or_default();
    // The latest request closes the intent's parenthesis.
    let latest = parts.map(|latest| latest.strip_suffix(')').unwrap_or(latest));
    std::iter::once(first)
        .chain(latest)
        .flat_map(|part| part.split(". ").flat_map(|clause| clause.split("; ")))
        .all(|part| {
            let part = [
                LATEST_REQUEST.trim_start_matches(" ("),
                EPISODES_DONE,
                RECENT_TOOL_CALLS,
            ]
            .iter()
            .find_map(|label| part.strip_prefix(label))
            .unwrap_or(part)
            .trim();
            match part.strip_suffix('…') {
                Some(cut) => found(summary, cut, true),
                None => found(summary, part, false),
            }
        })
}

/// The most places [`found`] tries for a part: past them the part counts as not said and its
/// anchor is shown, so that a summary repeating one word thousands of times costs no more.
const PLACES_TRIED: usize = 64;

/// Whether `needle`, read as in [`already_said`], occurs in `haystack` as whole words: not
/// inside a longer word at its start, nor at its end unless `open`. The places tried are those
/// of its longest word: a short one (`i`, `a`, `the`) occurs in most lines of a summary.
fn found(haystack: &str, needle: &str, open: bool) -> bool {
    let needle = needle.trim_start_matches(is_ignored);
    let Some(key) = needle
        .split(is_ignored)
        .max_by_key(|w| w.len())
        .filter(|w| !w.is_empty())
    else {
        return true;
    };
    // The words before the key, which the text before each place must end with.
    let before = &needle[..key.as_ptr() as usize - needle.as_ptr() as usize];
    let in_a_word = needle.starts_with(char::is_alphanumeric);
    memmem::find_iter(haystack.as_bytes(), key.as_bytes())
        .take(PLACES_TRIED)
        .any(|at| {
            let Some(start) = start_before(&haystack[..at], before) else {
                return false;
            };
            let starts_a_word = !(in_a_word
                && haystack[..start]
                    .chars()
                    .next_back()
                    .is_some_and(char::is_alphanumeric));
            starts_a_word && matches_from(&haystack[start..], needle, open)
        })
}

/// Where `needle` starts when `haystack` ends with it, ignored characters aside.
fn start_before(haystack: &str, needle: &str) -> Option<usize> {
    let mut hay = haystack.char_indices().rev().peekable();
    let mut start = haystack.len();
    for c in needle.chars().rev().filter(|c| !is_ignored(*c)) {
        while hay.next_if(|(_, h)| is_ignored(*h)).is_some() {}
        match hay.next() {
            Some((at, h)) if h == c => start = at,
            _ => return None,
        }
    }
    Some(start)
}

/// Whether `haystack` begins with `needle`, ignored characters aside, and then ends a word
/// unless `open`.
fn matches_from(haystack: &str, needle: &str, open: bool) -> bool {
    let mut hay = haystack.chars().peekable();
    for c in needle.chars().filter(|c| !is_ignored(*c)) {
        while hay.next_if(|h| is_ignored(*h)).is_some() {}
        if hay.next() != Some(c) {
            return false;
        }
    }
    let ends_in_a_word = needle
        .trim_end_matches(is_ignored)
        .ends_with(char::is_alphanumeric);
    open || !ends_in_a_word || !hay.next().is_some_and(char::is_alphanumeric)
}

fn is_ignored(c: char) -> bool {
    c.is_whitespace() || c == '>'
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::compaction::NOT_AVAILABLE;

    fn anchors(user_intent: &str, next_step: &str) -> Anchors {
        Anchors {
            user_intent: user_intent.into(),
            execution_progress: "recent tool calls: shell; shell".into(),
            next_step: next_step.into(),
            ..Anchors::default()
        }
    }

    fn shown(summary: &str, anchors: &Anchors) -> String {
        let mut text = String::new();
        push_anchors(&mut text, summary, anchors);
        text
    }

    #[test]
    fn an_anchor_the_summary_quotes_is_left_out_and_one_it_does_not_is_shown() {
        let summary = "## First user request\n> observation://2 Fix the login\n> bug in auth.rs\n\
                       ## Later user requests\n- observation://9 Ship it.\n\
                       ## Last stated plan\n> Run the tests,\n> then commit.";
        let said = anchors(
            "Fix the login bug in auth.rs (latest request: Ship it.)",
            "Run the tests, then commit.",
        );
        assert_eq!(
            shown(summary, &said),
            "\n\nAnchors:\n- Progress: recent tool calls: shell; shell"
        );

        // A latest request the summary no longer holds keeps the intent's line.
        let newer = anchors(
            "Fix the login bug in auth.rs (latest request: Also fix logout.)",
            "Run the tests, then commit.",
        );
        assert!(shown(summary, &newer).contains("- User intent: Fix the login bug"));
        // So does a plan that says more than the summary's.
        let longer = anchors(
            "Fix the login bug in auth.rs (latest request: Ship it.)",
            "Run the tests, then commit and push.",
        );
        assert!(
            shown(summary, &longer).contains("- Next step: Run the tests, then commit and push.")
        );
    }

    #[test]
    fn an_anchor_cut_short_is_said_by_a_summary_that_holds_it_whole() {
        let summary = "## Last stated plan\n> Run the tests, then commit.";
        let cut = anchors(NOT_AVAILABLE, "Run the tests, then…");
        assert_eq!(
            shown(summary, &cut),
            "\n\nAnchors:\n- Progress: recent tool calls: shell; shell"
        );
    }

    #[test]
    fn progress_is_left_out_when_the_summary_lists_its_calls() {
        let summary = "## Tool outputs folded (recall by URI)\n\
                       - observation://7 shell(cmd=cargo test 2>&1) → ok\n\
                       - observation://9 Edit(file_path=/home/me/app/src/lib…) → ok";
        let mut listed = anchors(NOT_AVAILABLE, NOT_AVAILABLE);
        listed.execution_progress =
            "recent tool calls: shell(cmd=cargo test 2>&1); Edit(file_path=/home/me/app/src/lib…)"
                .into();
        assert_eq!(shown(summary, &listed), "");
        // A call the summary does not list, or episodes it does not name, keep the line.
        listed.execution_progress =
            "recent tool calls: shell(cmd=cargo test 2>&1); grep(pattern=TODO)".into();
        assert!(shown(summary, &listed).contains("- Progress: recent tool calls:"));
        listed.execution_progress =
            "episodes done: explore the build. recent tool calls: shell(cmd=cargo test 2>&1)"
                .into();
        assert!(shown(summary, &listed).contains("- Progress: episodes done: explore the build."));
    }

    #[test]
    fn an_anchor_is_said_only_by_the_same_whole_words() {
        let summary = "## Errors seen\n- Deployment failed: quota\n\
                       ## Later user requests\n- observation://9 Run the tests with coverage";
        for step in ["Deploy.", "Run the tests.", "ploy"] {
            let shown = shown(summary, &anchors(NOT_AVAILABLE, step));
            assert!(
                shown.contains(&format!("- Next step: {step}")),
                "{step}: {shown}"
            );
        }
        // Cut short, a part may go on in the summary.
        let said = shown(summary, &anchors(NOT_AVAILABLE, "Run the tests with…"));
        assert!(!said.contains("Next step"), "{said}");
    }

    #[test]
    fn a_summary_repeating_a_word_is_searched_a_bounded_number_of_places() {
        // The places tried are those of the part's longest word.
        let at_the_end = format!("{}- Run the tests.", "Ran the tests. ".repeat(PLACES_TRIED));
        let step = anchors(NOT_AVAILABLE, "Run the tests.");
        assert!(shown(&at_the_end, &step).contains("- Next step: Run the tests."));
        let near = format!(
            "- Run the tests.\n{}",
            "Ran the tests. ".repeat(10 * PLACES_TRIED)
        );
        assert!(!shown(&near, &step).contains("Next step"));
    }

    #[test]
    fn a_part_whose_first_word_is_inside_many_words_is_found_where_it_starts_one() {
        // `i` occurs in nearly every word before the request that starts with it.
        let long = "- the missing imports fixed in the idle initialiser\n".repeat(20);
        let summary = format!(
            "## Errors seen\n{long}## Later user requests\n- observation://9 i want to finish it"
        );
        let intent = anchors(
            "finish it (latest request: i want to finish it)",
            NOT_AVAILABLE,
        );
        assert!(
            !shown(&summary, &intent).contains("User intent"),
            "{}",
            shown(&summary, &intent)
        );
        // The words before the longest one must be there too, from the start of a word.
        for other in [
            "hi want to finish it",
            "we want to finish it",
            "want to finish it",
        ] {
            let summary = summary.replace("i want to finish it", other);
            assert!(shown(&summary, &intent).contains("User intent"), "{other}");
        }
    }

    #[test]
    fn no_header_when_every_anchor_is_unknown_or_said() {
        let summary = "## Last stated plan\n> Run the tests.";
        let mut all = anchors(NOT_AVAILABLE, "Run the tests.");
        all.execution_progress = NOT_AVAILABLE.into();
        assert_eq!(shown(summary, &all), "");
    }
}
