//! The sentences of messages worth keeping through a fold: a user's constraints, what the
//! assistant found or decided.

pub(super) use crate::domain::event::constraint_lines;
use crate::domain::text::says_any;

/// The sentences of an assistant's message that say what it found or decided, and why: "…
/// because …", "the issue is …", "instead of …", "… didn't work". A fold keeps them, so that the
/// agent does not try again what it ruled out or forget why it chose what it did.
pub(in crate::summarize::deterministic) fn finding_sentences(
    text: &str,
) -> impl Iterator<Item = &str> {
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
