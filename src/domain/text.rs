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
/// encodes with escaped line breaks (`\n`, a Windows `\r\n` too), each trimmed, the empty ones
/// left out.
pub fn output_lines(text: &str) -> impl DoubleEndedIterator<Item = &str> {
    text.lines().flat_map(|line| {
        let encoded = line.len() > ENCODED_LINE_CHARS && line.contains("\\n");
        let parts = if encoded {
            line.split("\\n").map(without_escaped_return).collect()
        } else {
            vec![line]
        };
        parts.into_iter().map(str::trim).filter(|l| !l.is_empty())
    })
}

/// A line an output encodes, without the escaped carriage return (`\r`) of a Windows line
/// break before its escaped `\n`.
fn without_escaped_return(line: &str) -> &str {
    line.strip_suffix("\\r").unwrap_or(line)
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
    let end = start + without_escaped_return(&line[start..end]).len();
    start..end
}

/// `text` without the terminal's escape sequences (colours, cursor moves: `ESC[2m`, `ESC[1A`,
/// `ESC]8;;url ESC\`) that a command run under a terminal prints around its words: borrowed
/// when it holds none.
pub fn without_terminal_escapes(text: &str) -> std::borrow::Cow<'_, str> {
    const ESC: char = '\u{1b}';
    if !text.contains(ESC) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != ESC {
            out.push(c);
            continue;
        }
        // A sequence cut short (a truncated output) ends at the line's end: the next line stays.
        match chars.peek().copied() {
            // A control sequence: parameters and intermediates, then one final byte.
            Some('[') => {
                chars.next();
                while let Some(c) = chars.next_if(|&c| c != '\n') {
                    if ('\u{40}'..='\u{7e}').contains(&c) {
                        break;
                    }
                }
            }
            // An operating-system command (a title, a link): up to BEL or `ESC \`.
            Some(']') => {
                chars.next();
                while let Some(c) = chars.next_if(|&c| c != '\n') {
                    if c == '\u{7}' {
                        break;
                    }
                    if c == ESC {
                        chars.next_if_eq(&'\\');
                        break;
                    }
                }
            }
            // A character set chosen (`ESC(B`): its two characters go.
            Some('(' | ')') => {
                chars.next();
                chars.next_if(|&c| c != '\n');
            }
            // Another escape (`ESC=`, `ESC7`): the printable character after it goes.
            Some(' '..='~') => {
                chars.next();
            }
            _ => {}
        }
    }
    std::borrow::Cow::Owned(out)
}

/// What two lines that differ only in their numbers (a process id, a time, a worker's or a
/// run's number) have in common: `line` with each number written as `#`. A number is a run of
/// digits that no letter or `_` touches, outside a word that names a file: `E0308`, `m3.rs`,
/// `v2` and `src/a.rs:88:5` keep theirs. A log that prints one warning per process or one
/// failure per retry says one thing many times.
pub fn numbers_blanked(line: &str) -> String {
    let is_word = |c: Option<char>| c.is_some_and(|c| c.is_alphabetic() || c == '_');
    // A word that names a file keeps its numbers: they are its name or its place
    // (`src/a.rs:88:5`, `src/a.ts(12,5):`, `data/2023.csv`).
    // It opens as a path does, so a log line's bracketed prefix (`[89686:0711/002023.38:ERROR:
    // src/io.cc:145]`, a process id and a time) is no file's name.
    let names_file = |word: &str| {
        let path = word.trim_start_matches(['(', '"', '\'', '`', '<']);
        path.starts_with(|c: char| c.is_ascii_alphabetic() || matches!(c, '.' | '/' | '~'))
            && path.contains('/')
            && path
                .match_indices('.')
                .any(|(at, _)| path[at + 1..].starts_with(|c: char| c.is_ascii_alphabetic()))
    };
    let mut out = String::with_capacity(line.len());
    for word in line.split_inclusive(char::is_whitespace) {
        if names_file(word) {
            out.push_str(word);
        } else {
            out.push_str(&blanked(word, |before, after| {
                is_word(before) || is_word(after)
            }));
        }
    }
    out
}

/// `word` with each run of digits written as `#`, wherever it is (`'1,200p'` is `'#,#p'`).
pub fn digit_runs_blanked(word: &str) -> String {
    blanked(word, |_, _| false)
}

/// `text` with each run of digits written as `#`, unless `kept` says otherwise of the
/// characters before and after it.
fn blanked(text: &str, kept: impl Fn(Option<char>, Option<char>) -> bool) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut before: Option<char> = None;
    while let Some(c) = rest.chars().next() {
        if !c.is_ascii_digit() {
            out.push(c);
            before = Some(c);
            rest = &rest[c.len_utf8()..];
            continue;
        }
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let (number, after) = rest.split_at(digits);
        if kept(before, after.chars().next()) {
            out.push_str(number);
        } else {
            out.push('#');
        }
        before = number.chars().last();
        rest = after;
    }
    out
}

/// Whether `text`, at least `min_len` bytes long, holds one of `words` in any case. The words
/// are lower case, with a space on each side that must be a word's edge.
pub fn says_any(text: &str, min_len: usize, words: &[&str]) -> bool {
    if text.len() < min_len {
        return false;
    }
    let lower = format!(" {} ", text.to_lowercase());
    words.iter().any(|w| lower.contains(w))
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
        // A Windows line break (`\r\n` written out) ends its line as `\n` does.
        let windows = wrapped.replace("\\n", "\\r\\n");
        let lines: Vec<&str> = output_lines(&windows).collect();
        assert!(lines.contains(&"error: disk full"), "{lines:?}");
        let at = windows.find("disk").unwrap();
        assert_eq!(
            &windows[output_line_around(&windows, at)],
            "error: disk full"
        );
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
    fn a_terminals_escapes_go_and_its_words_stay() {
        let coloured =
            "Error: \u{1b}[2mexpect(\u{1b}[22m\u{1b}[31mreceived\u{1b}[39m\u{1b}[2m)\u{1b}[22m";
        assert_eq!(
            without_terminal_escapes(coloured),
            "Error: expect(received)"
        );
        assert_eq!(
            without_terminal_escapes("\u{1b}[1A\u{1b}[2K[Worker 1] API ERROR"),
            "[Worker 1] API ERROR"
        );
        let link = "see \u{1b}]8;;https://x.test\u{1b}\\here\u{1b}]8;;\u{7} now\u{1b}(B";
        assert_eq!(without_terminal_escapes(link), "see here now");
        let plain = "error: no escapes [2m here";
        assert!(matches!(
            without_terminal_escapes(plain),
            std::borrow::Cow::Borrowed(p) if p == plain
        ));
        // A lone escape at the end is dropped, never panics.
        assert_eq!(without_terminal_escapes("ok\u{1b}"), "ok");
        // A sequence cut short never takes the next line with it.
        for cut in [
            "50%\u{1b}\nerror: x",
            "50%\u{1b}[3\nerror: x",
            "50%\u{1b}]8;;x\nerror: x",
        ] {
            assert_eq!(without_terminal_escapes(cut), "50%\nerror: x", "{cut:?}");
        }
    }

    #[test]
    fn lines_that_differ_in_their_numbers_alone_have_one_shape() {
        let a = "[Worker 0] API ERROR: (node:2174) Warning: NO_COLOR ignored";
        let b = "[Worker 12] API ERROR: (node:80995) Warning: NO_COLOR ignored";
        assert_eq!(numbers_blanked(a), numbers_blanked(b));
        assert_eq!(
            numbers_blanked(a),
            "[Worker #] API ERROR: (node:#) Warning: NO_COLOR ignored"
        );
        assert_ne!(numbers_blanked("error: x"), numbers_blanked("error: y"));
        // Codes, names and versions that hold digits are words.
        assert_eq!(
            numbers_blanked("error[E0308]: in src/m3.rs at v2 (line 221, 0312/181706.5)"),
            "error[E0308]: in src/m3.rs at v2 (line #, #/#.#)"
        );
        assert_eq!(digit_runs_blanked("'1,200p'"), "'#,#p'");
        // A file's name and place are not numbers to blank.
        assert_eq!(
            numbers_blanked("panicked at src/invoice.rs:88:5: (pid 42) in data/2023.csv"),
            "panicked at src/invoice.rs:88:5: (pid #) in data/2023.csv"
        );
        assert_eq!(
            numbers_blanked("[89686:644439:0711/002023.387744:ERROR:third_party/io.cc:145] open"),
            "[#:#:#/#.#:ERROR:third_party/io.cc:#] open"
        );
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
