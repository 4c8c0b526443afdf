//! Cutting text on character boundaries: the one place that bounds a text to a number of
//! characters, for previews, summaries and anchors alike.

/// The first `max_chars` characters of `text`, never splitting a character.
pub fn prefix_chars(text: &str, max_chars: usize) -> &str {
    // A text of at most `max_chars` bytes has at most as many characters.
    if text.len() <= max_chars {
        return text;
    }
    match text.char_indices().nth(max_chars) {
        Some((end, _)) => &text[..end],
        None => text,
    }
}

/// The last `max_chars` characters of `text`, never splitting a character.
pub fn suffix_chars(text: &str, max_chars: usize) -> &str {
    if text.len() <= max_chars {
        return text;
    }
    if max_chars == 0 {
        return "";
    }
    match text.char_indices().rev().nth(max_chars - 1) {
        Some((start, _)) => &text[start..],
        None => text,
    }
}

/// `text` in at most `max_chars` characters, ending with "…" when it was cut.
pub fn bounded(text: &str, max_chars: usize) -> String {
    let head = prefix_chars(text, max_chars);
    if head.len() == text.len() {
        return head.to_owned();
    }
    let mut cut = prefix_chars(head, max_chars.saturating_sub(1)).to_owned();
    if max_chars > 0 {
        cut.push('…');
    }
    cut
}

/// Cuts `text` to its first `max_chars` characters and appends `marker` when anything was cut.
/// Returns whether it cut.
pub fn cut_marked(text: &mut String, max_chars: usize, marker: &str) -> bool {
    let keep = prefix_chars(text, max_chars).len();
    if keep == text.len() {
        return false;
    }
    text.truncate(keep);
    text.push_str(marker);
    true
}

/// A line longer than this that holds escaped line breaks (`\n` written out) is an output
/// encoded in one line (a harness's JSON wrapper, `{"output": "…\nerror: …\n"}`), and is read
/// as the lines it encodes.
const ENCODED_LINE_CHARS: usize = 320;

/// The lines of a tool's output as a reader sees them: its lines, and the lines a long line
/// encodes with escaped line breaks (`\n`), each trimmed, the empty ones left out.
pub fn output_lines(text: &str) -> impl DoubleEndedIterator<Item = &str> {
    text.lines().flat_map(|line| {
        let encoded = line.len() > ENCODED_LINE_CHARS && line.contains("\\n");
        let parts = if encoded {
            line.split("\\n").collect()
        } else {
            vec![line]
        };
        parts.into_iter().map(str::trim).filter(|l| !l.is_empty())
    })
}

/// Within `line` (one line of an output), the byte range around `at` that [`output_lines`]
/// reads as a line of its own: the whole line unless it encodes lines with escaped breaks.
pub fn output_line_around(line: &str, at: usize) -> std::ops::Range<usize> {
    // Only the escapes around `at` are looked for: a line with none is whole all the same.
    if line.len() <= ENCODED_LINE_CHARS {
        return 0..line.len();
    }
    let start = line[..at].rfind("\\n").map_or(0, |i| i + 2);
    let end = line[at..].find("\\n").map_or(line.len(), |i| at + i);
    start..end
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_line_with_escaped_breaks_reads_as_the_lines_it_encodes() {
        let body: String = (0..40).map(|i| format!("line {i} ok\\n")).collect();
        let wrapped = format!("{{\"output\":\"{body}error: disk full\\nmore\",\"exit\":1}}");
        let lines: Vec<&str> = output_lines(&wrapped).collect();
        assert!(lines.contains(&"error: disk full"), "{lines:?}");
        assert_eq!(lines[1], "line 1 ok");
        let at = wrapped.find("disk").unwrap();
        assert_eq!(
            &wrapped[output_line_around(&wrapped, at)],
            "error: disk full"
        );
        // A short line, or one of code that prints a line break, is left whole.
        let code = r#"printf("error: %s\n", msg);"#;
        assert_eq!(output_lines(code).collect::<Vec<_>>(), [code]);
        assert_eq!(output_line_around(code, 8), 0..code.len());
    }

    #[test]
    fn cuts_never_split_a_character() {
        assert_eq!(prefix_chars("🙂🙂", 1), "🙂");
        assert_eq!(prefix_chars("héllo", 2), "hé");
        assert_eq!(prefix_chars("abc", 10), "abc");
        assert_eq!(suffix_chars("🙂a🙂", 2), "a🙂");
        assert_eq!(suffix_chars("héllo", 0), "");
        assert_eq!(suffix_chars("héllo", 9), "héllo");
        assert_eq!(bounded("abcdef", 4), "abc…");
        assert_eq!(bounded("abc", 3), "abc");
        assert_eq!(bounded("abc", 0), "");
        assert_eq!(bounded("ééé", 2), "é…");
        let mut text = "été à Zürich".to_owned();
        assert!(cut_marked(&mut text, 3, "[…]"));
        assert_eq!(text, "été[…]");
        assert!(!cut_marked(&mut text, 100, "[…]"));
    }

    proptest::proptest! {
        #[test]
        fn a_bounded_text_is_a_prefix_within_the_bound(text in "[aé🙂 ]{0,40}", max in 0usize..50) {
            let out = bounded(&text, max);
            proptest::prop_assert!(out.chars().count() <= max);
            let kept = out.strip_suffix('…').unwrap_or(&out);
            proptest::prop_assert!(text.starts_with(kept));
        }
    }
}
