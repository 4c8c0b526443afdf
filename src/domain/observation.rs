//! Observations: the exact text of an event, addressed as
//! `observation://<seq or client event id>`, optionally with `?offset=N&limit=M`. This module
//! owns that address (reading it as models and agents write it), the character slices recall
//! answers, and the tool-result text a model gets back, whose closing line is again an address
//! the recall tool takes.

use std::fmt::Write;

/// The name of the tool through which models recall observations.
pub const RECALL_TOOL: &str = "recall_observation";
/// What every observation reference starts with.
pub const SCHEME: &str = "observation://";
/// Characters a recall answers when no limit is given.
pub const DEFAULT_LIMIT: usize = 4_000;
/// The most characters one recall answers.
pub const MAX_LIMIT: usize = 200_000;
/// The longest reference taken (a client id of 256 characters, percent-encoded, and a query).
pub const MAX_URI_CHARS: usize = 4_096;

/// The event a reference or a path names: all ASCII digits are a seq, anything else is the `id`
/// a client gave the event at append. (A client id made only of digits is reached by its seq.)
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventRef {
    Seq(i64),
    ClientId(String),
}

impl EventRef {
    /// The event `id` names; None when it can name none (empty, or digits past any seq).
    pub fn parse(id: &str) -> Option<Self> {
        if id.is_empty() {
            None
        } else if id.bytes().all(|b| b.is_ascii_digit()) {
            id.parse().ok().map(Self::Seq)
        } else {
            Some(Self::ClientId(id.to_owned()))
        }
    }
}

/// An observation reference as read from `observation://<id>?offset=N&limit=M`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// The id, percent-decoded: a seq when all digits, else a client event id.
    pub id: String,
    pub offset: Option<usize>,
    pub limit: Option<usize>,
}

impl Reference {
    /// The event the reference names (see [`EventRef::parse`]).
    pub fn event(&self) -> Option<EventRef> {
        EventRef::parse(&self.id)
    }
}

/// Why a string is not an observation reference. The messages never repeat the input, which
/// may be large; they complete "uri …".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReferenceError {
    #[error("must have at most {MAX_URI_CHARS} characters")]
    TooLong,
    #[error(
        "must be an observation reference: observation://<seq or event id>, optionally \
         followed by ?offset=N&limit=M"
    )]
    NotObservation,
    #[error("names no event: observation:// must be followed by a seq or an event id")]
    EmptyId,
    #[error(
        "has a `%` that does not start an escape of UTF-8 (two hex digits); write `%` itself as \
         %25"
    )]
    BadEscape,
    #[error("has an unknown query parameter `{0}`: only offset and limit are taken")]
    UnknownParameter(String),
    #[error("gives {0} more than once")]
    Repeated(&'static str),
    #[error("offset must be a whole number of characters, 0 or more")]
    BadOffset,
    #[error("limit must be a whole number from 1 to {MAX_LIMIT}")]
    BadLimit,
}

/// Reads `observation://<id>[?offset=N&limit=M]`, exactly as ctxd writes it (the scheme in
/// lower case, nothing around it). In the id, `%XX` escapes are decoded (an id holding `?` or
/// `%` is written with `%3F` and `%25`); any other character, non-ASCII included, stands for
/// itself. Empty query parameters (`?&offset=1&`) are skipped; any parameter other than offset
/// and limit, or either given twice, is refused rather than guessed at.
pub fn parse_reference(uri: &str) -> Result<Reference, ReferenceError> {
    if uri.len() > MAX_URI_CHARS && uri.chars().count() > MAX_URI_CHARS {
        return Err(ReferenceError::TooLong);
    }
    let rest = uri
        .strip_prefix(SCHEME)
        .ok_or(ReferenceError::NotObservation)?;
    let (id, query) = rest.split_once('?').unwrap_or((rest, ""));
    let id = percent_decode(id)?;
    if id.is_empty() {
        return Err(ReferenceError::EmptyId);
    }
    let mut reference = Reference {
        id,
        offset: None,
        limit: None,
    };
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match key {
            "offset" => {
                let offset = parse_offset(value).ok_or(ReferenceError::BadOffset)?;
                if reference.offset.replace(offset).is_some() {
                    return Err(ReferenceError::Repeated("offset"));
                }
            }
            "limit" => {
                let limit = parse_limit(value).ok_or(ReferenceError::BadLimit)?;
                if reference.limit.replace(limit).is_some() {
                    return Err(ReferenceError::Repeated("limit"));
                }
            }
            other => return Err(ReferenceError::UnknownParameter(shorten(other, 32))),
        }
    }
    Ok(reference)
}

/// An offset written in decimal digits. One past any text is as good as any larger one, so
/// digits too many for a `usize` read as the largest.
fn parse_offset(value: &str) -> Option<usize> {
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(value.parse().unwrap_or(usize::MAX))
}

/// A limit written in decimal digits, 1 to [`MAX_LIMIT`].
fn parse_limit(value: &str) -> Option<usize> {
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    value
        .parse()
        .ok()
        .filter(|limit| (1..=MAX_LIMIT).contains(limit))
}

/// `text` with its `%XX` escapes decoded; the result must be UTF-8.
fn percent_decode(text: &str) -> Result<String, ReferenceError> {
    if !text.contains('%') {
        return Ok(text.to_owned());
    }
    let bytes = text.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text.get(i + 1..i + 3).ok_or(ReferenceError::BadEscape)?;
            if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(ReferenceError::BadEscape);
            }
            decoded.push(u8::from_str_radix(hex, 16).map_err(|_| ReferenceError::BadEscape)?);
            i += 3;
        } else {
            decoded.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(decoded).map_err(|_| ReferenceError::BadEscape)
}

/// At most `max` characters of `text`, with an ellipsis when cut: for messages that name what
/// a client sent without repeating all of it.
pub fn shorten(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

/// The reference recall continues from: `observation://<seq>?offset=N`, with `&limit=M` when a
/// limit other than the default was asked for.
pub fn continuation(seq: i64, offset: usize, limit: usize) -> String {
    let mut uri = format!("{SCHEME}{seq}?offset={offset}");
    if limit != DEFAULT_LIMIT {
        let _ = write!(uri, "&limit={limit}");
    }
    uri
}

/// Characters `offset..offset + length` of a text of `total_chars` characters, never splitting
/// one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slice<'a> {
    pub text: &'a str,
    pub offset: usize,
    pub length: usize,
    pub total_chars: usize,
}

impl<'a> Slice<'a> {
    /// At most `limit` characters of `text` from character `offset` (empty past the end).
    pub fn of(text: &'a str, offset: usize, limit: usize) -> Self {
        let total_chars = if text.is_ascii() {
            text.len()
        } else {
            text.chars().count()
        };
        let length = limit.min(total_chars.saturating_sub(offset));
        let start = byte_at(text, offset.min(total_chars));
        let end = start + byte_at(&text[start..], length);
        Self {
            text: &text[start..end],
            offset,
            length,
            total_chars,
        }
    }

    /// Where the next slice starts; None when this one reaches the end.
    pub fn next_offset(&self) -> Option<usize> {
        let next = self.offset.saturating_add(self.length);
        (next < self.total_chars).then_some(next)
    }

    /// The text to answer a model's recall with: the slice itself and, when more follows, a
    /// newline and one line with the reference that recalls the rest. An empty slice is a
    /// sentence saying why. `limit` is the one this slice was asked with, kept for the next.
    pub fn tool_result(&self, seq: i64, limit: usize) -> String {
        let uri = format!("{SCHEME}{seq}");
        if self.total_chars == 0 {
            return format!("[{uri} holds no text to recall]");
        }
        if self.length == 0 {
            return format!(
                "[nothing to recall at offset {}: {uri} has {} characters, so offsets run \
                 from 0 to {}]",
                self.offset,
                self.total_chars,
                self.total_chars - 1
            );
        }
        let Some(next) = self.next_offset() else {
            return self.text.to_owned();
        };
        let mut content = String::with_capacity(self.text.len() + 96);
        content.push_str(self.text);
        let _ = write!(
            content,
            "\n[characters {}–{next} of {}; recall {} for the rest]",
            self.offset,
            self.total_chars,
            continuation(seq, next, limit)
        );
        content
    }
}

/// The byte index of character `n` of `text` (its length when `n` is at or past the end).
fn byte_at(text: &str, n: usize) -> usize {
    if text.is_ascii() {
        return n.min(text.len());
    }
    text.char_indices().nth(n).map_or(text.len(), |(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(id: &str, offset: Option<usize>, limit: Option<usize>) -> Reference {
        Reference {
            id: id.to_owned(),
            offset,
            limit,
        }
    }

    #[test]
    fn references_read_as_views_and_models_write_them() {
        for (uri, expected) in [
            ("observation://42", reference("42", None, None)),
            (
                "observation://42?offset=4000",
                reference("42", Some(4000), None),
            ),
            (
                "observation://42?offset=10&limit=5",
                reference("42", Some(10), Some(5)),
            ),
            (
                "observation://42?limit=5&offset=10",
                reference("42", Some(10), Some(5)),
            ),
            ("observation://42?", reference("42", None, None)),
            (
                "observation://42?&offset=1&",
                reference("42", Some(1), None),
            ),
            ("observation://m3", reference("m3", None, None)),
            ("observation://étape-3", reference("étape-3", None, None)),
            (
                "observation://a%3Fb%25c?offset=2",
                reference("a?b%c", Some(2), None),
            ),
            ("observation://%C3%A9", reference("é", None, None)),
            (
                "observation://99999999999999999999999?offset=99999999999999999999999",
                reference("99999999999999999999999", Some(usize::MAX), None),
            ),
        ] {
            assert_eq!(parse_reference(uri), Ok(expected), "{uri}");
        }
    }

    #[test]
    fn what_is_not_a_reference_is_named() {
        use ReferenceError::*;
        for (uri, error) in [
            ("42", NotObservation),
            ("obs://42", NotObservation),
            ("https://example.com/42", NotObservation),
            ("observation:/42", NotObservation),
            ("", NotObservation),
            ("observé://42", NotObservation),
            ("Observation://42", NotObservation),
            (" observation://42", NotObservation),
            ("observation://", EmptyId),
            ("observation://?offset=3", EmptyId),
            ("observation://%", BadEscape),
            ("observation://a%2", BadEscape),
            ("observation://a%zz", BadEscape),
            ("observation://%FF", BadEscape),
            ("observation://42?offset=-1", BadOffset),
            ("observation://42?offset=", BadOffset),
            ("observation://42?offset", BadOffset),
            ("observation://42?offset=1e3", BadOffset),
            ("observation://42?offset=+3", BadOffset),
            ("observation://42?offset=٣", BadOffset),
            ("observation://42?limit=0", BadLimit),
            ("observation://42?limit=200001", BadLimit),
            ("observation://42?limit=99999999999999999999999", BadLimit),
            ("observation://42?offset=1&offset=2", Repeated("offset")),
            ("observation://42?limit=1&limit=1", Repeated("limit")),
            (
                "observation://42?ofset=4000",
                UnknownParameter("ofset".into()),
            ),
        ] {
            assert_eq!(parse_reference(uri), Err(error), "{uri}");
        }
        let long = format!("observation://42?{}=1", "k".repeat(100));
        let Err(UnknownParameter(key)) = parse_reference(&long) else {
            panic!("an unknown parameter")
        };
        assert_eq!(key.chars().count(), 33, "named, not repeated whole");
        let huge = format!("observation://{}", "é".repeat(MAX_URI_CHARS));
        assert_eq!(parse_reference(&huge), Err(TooLong));
        let most = format!("observation://{}", "é".repeat(MAX_URI_CHARS - SCHEME.len()));
        assert!(parse_reference(&most).is_ok(), "the bound is in characters");
    }

    #[test]
    fn digits_are_a_seq_and_anything_else_a_client_id() {
        assert_eq!(EventRef::parse("42"), Some(EventRef::Seq(42)));
        assert_eq!(EventRef::parse("007"), Some(EventRef::Seq(7)));
        assert_eq!(EventRef::parse("m3"), Some(EventRef::ClientId("m3".into())));
        assert_eq!(EventRef::parse("-1"), Some(EventRef::ClientId("-1".into())));
        assert_eq!(
            EventRef::parse("４２"),
            Some(EventRef::ClientId("４２".into()))
        );
        assert_eq!(EventRef::parse("99999999999999999999"), None);
        assert_eq!(EventRef::parse(""), None);
    }

    #[test]
    fn slices_count_characters_and_never_split_one() {
        let text = "héllo 🚀 wörld";
        let s = Slice::of(text, 4, 4);
        assert_eq!((s.text, s.length, s.total_chars), ("o 🚀 ", 4, 13));
        assert_eq!(s.next_offset(), Some(8));
        let end = Slice::of(text, 8, 100);
        assert_eq!(
            (end.text, end.length, end.next_offset()),
            ("wörld", 5, None)
        );
        let past = Slice::of(text, 50, 10);
        assert_eq!((past.text, past.length, past.next_offset()), ("", 0, None));
        let huge = Slice::of(text, usize::MAX, MAX_LIMIT);
        assert_eq!((huge.text, huge.next_offset()), ("", None));
        let ascii = Slice::of("abcdef", 2, 3);
        assert_eq!((ascii.text, ascii.next_offset()), ("cde", Some(5)));
    }

    proptest::proptest! {
        #[test]
        fn slices_reassemble_the_text(
            text in "[ab\n]{0,200}|[aé→🚀\n]{0,200}",
            limit in 1usize..50,
        ) {
            let mut whole = String::new();
            let mut offset = 0;
            loop {
                let slice = Slice::of(&text, offset, limit);
                whole.push_str(slice.text);
                match slice.next_offset() {
                    Some(next) => offset = next,
                    None => break,
                }
            }
            proptest::prop_assert_eq!(whole, text);
        }
    }

    #[test]
    fn a_tool_result_ends_with_the_reference_that_continues_it() {
        let text = "x".repeat(12_000);
        let first = Slice::of(&text, 0, DEFAULT_LIMIT).tool_result(42, DEFAULT_LIMIT);
        let (shown, line) = first.rsplit_once('\n').unwrap();
        assert_eq!(shown, "x".repeat(4_000));
        assert_eq!(
            line,
            "[characters 0–4000 of 12000; recall observation://42?offset=4000 for the rest]"
        );
        let next = line
            .split("recall ")
            .nth(1)
            .and_then(|l| l.strip_suffix(" for the rest]"))
            .unwrap();
        assert_eq!(
            parse_reference(next),
            Ok(reference("42", Some(4_000), None))
        );

        let small = Slice::of(&text, 100, 50).tool_result(42, 50);
        assert!(small.ends_with("recall observation://42?offset=150&limit=50 for the rest]"));

        let last = Slice::of(&text, 8_000, DEFAULT_LIMIT).tool_result(42, DEFAULT_LIMIT);
        assert_eq!(last, "x".repeat(4_000), "the end is the text alone");
        let past = Slice::of(&text, 12_000, DEFAULT_LIMIT).tool_result(42, DEFAULT_LIMIT);
        assert_eq!(
            past,
            "[nothing to recall at offset 12000: observation://42 has 12000 characters, so \
             offsets run from 0 to 11999]"
        );
        let empty = Slice::of("", 0, DEFAULT_LIMIT).tool_result(7, DEFAULT_LIMIT);
        assert_eq!(empty, "[observation://7 holds no text to recall]");
    }
}
