//! The files a text names: the words that read as paths, the strings of a call's arguments
//! that may name them, and the patch bodies whose lines name none.

use std::borrow::Cow;

use serde_json::Value;

/// Tool-call argument keys whose value is text an agent writes into a file (Claude Code's
/// Write, Edit, MultiEdit and NotebookEdit, the text editor tool's `create`, `str_replace` and
/// `insert`): the paths such text names (an `#include`, a README's example) are what the file
/// says, not files the call acts on.
pub const WRITTEN_TEXT_KEYS: [&str; 9] = [
    "content",
    "contents",
    "file_text",
    "old_string",
    "new_string",
    "old_str",
    "new_str",
    "insert_text",
    "new_source",
];

/// Every string in `value` but those under the `skipped` keys, in order.
pub fn walk_strings<'a>(value: &'a Value, skipped: &[&str], out: &mut Vec<&'a str>) {
    match value {
        Value::String(s) => out.push(s),
        Value::Array(items) => items.iter().for_each(|v| walk_strings(v, skipped, out)),
        Value::Object(map) => map
            .iter()
            .filter(|(key, _)| !skipped.contains(&key.as_str()))
            .for_each(|(_, v)| walk_strings(v, skipped, out)),
        _ => {}
    }
}

/// The path a word names, read without what surrounds it in prose or a tool's output: the
/// emphasis around it (`**src/a.rs**`), the punctuation after it (`src/a.rs:`, `~/.ssh?`) and
/// its place (`src/a.rs:58:13`, `tests/t.py::test_x`), and the escaped line break after it
/// where the path is written inside a string of code (a patch a tool call passes in source
/// text: `"*** Add File: src/a.rs\n+fn a() {}"`). A leading `./` or `../` is kept: it is part
/// of the path. Whether the word is a path at all is the caller's to judge.
pub fn named_path(word: &str) -> &str {
    fn trim_end(w: &str) -> &str {
        w.trim_end_matches([':', ';', '.', '[', ']', '{', '}', '?', '!', '\\'])
    }
    let word = before_escaped_break(word);
    let word = trim_end(word.trim_start_matches([':', ';', '[', ']', '{', '}']));
    let word = match word.strip_prefix("**").and_then(|w| w.strip_suffix("**")) {
        Some(emphasised) => trim_end(emphasised),
        None => word,
    };
    without_place(word)
}

/// The words of a text that read as file paths: a `/` and a name with an extension, not a URL,
/// an option or a glob (`src/lib.rs`, `/etc/hosts.conf`; `--out=x` is not one), each read as
/// the file it names ([`named_path`]: `**src/a.rs**` and `src/a.rs:58:13` are `src/a.rs`).
pub fn file_paths(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| c.is_whitespace() || "\"'`,;|&()<>=".contains(c))
        .map(named_path)
        .filter(|w| (3..=200).contains(&w.len()) && w.contains('/') && !w.contains("://"))
        .filter(|w| !w.starts_with('-') && !w.contains('*'))
        .filter(|w| {
            w.rsplit('/')
                .next()
                .is_some_and(|name| name.contains('.') && !name.starts_with('.'))
        })
}

/// A text without the bodies of the patches it holds (`apply_patch`'s `*** Begin Patch`, a
/// unified diff): their added, removed and context lines are what the files hold, not files
/// the agent acted on. The lines that name the files stay (`*** Update File: src/a.rs`,
/// `+++ b/src/a.rs`), as does the text around the patch (the command that applies it).
pub fn without_patch_bodies(text: &str) -> Cow<'_, str> {
    if !text.contains("*** Begin Patch") && !text.contains("\n+++ ") {
        return Cow::Borrowed(text);
    }
    let mut kept: Vec<&str> = Vec::new();
    let mut in_patch = false;
    for line in text.split('\n') {
        if line.starts_with("*** Begin Patch") || line.starts_with("--- ") {
            in_patch = true;
        } else if line.starts_with("*** End Patch") {
            in_patch = false;
        }
        let header = line.starts_with("+++ ") || line.starts_with("--- ");
        let body = line.starts_with(['+', '-', ' ']) || line.starts_with("@@");
        if !(in_patch && body && !header) {
            kept.push(line);
        }
    }
    Cow::Owned(kept.join("\n"))
}

/// `word` up to an escaped line break or tab (`\n`, `\r`, `\t`) after a `/`: a path in a
/// string of source code ends there. A Windows path (`C:\Users\notes.txt`) names no `/`
/// before its backslashes and is left whole.
fn before_escaped_break(word: &str) -> &str {
    for (at, _) in word.match_indices('\\') {
        let escape = word[at + 1..].chars().next();
        if matches!(escape, Some('n' | 'r' | 't')) && word[..at].contains('/') {
            return &word[..at];
        }
    }
    word
}

/// `path` without a place after it: `:line`, `:line:column` or a test's `::name`.
fn without_place(path: &str) -> &str {
    if let Some((file, _)) = path.split_once("::") {
        return file;
    }
    let mut file = path;
    for _ in 0..2 {
        match file.rsplit_once(':') {
            Some((head, number))
                if !number.is_empty() && number.bytes().all(|b| b.is_ascii_digit()) =>
            {
                file = head
            }
            _ => break,
        }
    }
    file
}
