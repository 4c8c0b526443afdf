//! The files a text names: the words that read as paths, the strings of a call's arguments
//! that may name them, and the patch bodies whose lines name none.

use std::borrow::Cow;

use serde_json::{Map, Value};

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
/// an option, a glob or a slash command (`src/lib.rs`, `/etc/hosts.conf`; `--out=x` and
/// `/speckit.plan` are not), each read as the file it names ([`named_path`]: `**src/a.rs**`
/// and `src/a.rs:58:13` are `src/a.rs`).
pub fn file_paths(text: &str) -> impl Iterator<Item = &str> {
    words(text, "\"'`,;|&<>=")
        .map(named_path)
        .filter(|w| (3..=200).contains(&w.len()) && w.contains('/') && !w.contains("://"))
        .filter(|w| !is_slash_command(w))
        .filter(|w| !w.starts_with('-') && !w.contains('*'))
        .filter(|w| {
            w.rsplit('/')
                .next()
                .is_some_and(|name| name.contains('.') && !name.starts_with('.'))
        })
}

/// The namespaces of slash commands whose names read as files (Spec Kit's `/speckit.plan`).
const COMMAND_NAMESPACES: [&str; 1] = ["speckit."];

/// Whether a word is a slash command a harness defines (`/speckit.plan`, `/speckit.tasks`),
/// no file at the file system's root; `/README.md` may be a file named from a project's root.
pub fn is_slash_command(word: &str) -> bool {
    word.strip_prefix('/').is_some_and(|name| {
        !name.contains('/') && COMMAND_NAMESPACES.iter().any(|n| name.starts_with(n))
    })
}

/// The words of `text`: split at whitespace, at `separators` and at brackets, but for the
/// brackets of a path's segment (a Next.js route group: `app/(auth)/login/page.tsx`), so that
/// `f(src/a.rs)` and `(see src/a.rs)` name `src/a.rs` and the route group's page names itself.
pub fn words<'a>(text: &'a str, separators: &'a str) -> impl Iterator<Item = &'a str> {
    text.split(move |c: char| c.is_whitespace() || separators.contains(c))
        .flat_map(|word| BracketSplit { rest: Some(word) })
}

/// The parts of a word between its brackets, those of a path's segment aside (see [`words`]).
struct BracketSplit<'a> {
    rest: Option<&'a str>,
}

impl<'a> Iterator for BracketSplit<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        let rest = self.rest?;
        let bytes = rest.as_bytes();
        let mut at = 0;
        while at < bytes.len() {
            match bytes[at] {
                // A segment in brackets: after a `/` or at the start, and a `/` after it.
                b'(' if at == 0 || bytes[at - 1] == b'/' => {
                    let end = bytes[at + 1..]
                        .iter()
                        .position(|b| matches!(b, b'(' | b')' | b'/'))
                        .map(|end| at + 1 + end);
                    match end {
                        Some(end)
                            if bytes[end] == b')'
                                && end > at + 1
                                && bytes.get(end + 1) == Some(&b'/') =>
                        {
                            at = end + 2
                        }
                        _ => break,
                    }
                }
                b'(' | b')' => break,
                _ => at += 1,
            }
        }
        if at >= bytes.len() {
            self.rest = None;
            return Some(rest);
        }
        // Brackets are ASCII: the byte after one starts a character.
        self.rest = Some(&rest[at + 1..]);
        Some(&rest[..at])
    }
}

/// A text without what it writes into files: the bodies of its patches
/// ([`without_patch_bodies`]) and the here-documents its commands write into a file
/// (`cat > a.md << 'EOF'`, `cat <<EOF > a.md`, `tee a.md <<EOF`), whose text is what the file
/// will say, as a Write call's `content` is ([`WRITTEN_TEXT_KEYS`]). A document fed to a
/// program (`python - <<'PY'`) is what the program runs, and stays. What remains may name the
/// files a call acts on.
pub fn without_written_text(text: &str) -> Cow<'_, str> {
    match without_patch_bodies(text) {
        Cow::Borrowed(text) => without_here_documents(text, true),
        Cow::Owned(text) => Cow::Owned(without_here_documents(&text, true).into_owned()),
    }
}

/// A command without the text of its here-documents, and the lines that end them: all of them,
/// or only those it writes into a file (`written_only`, see [`without_written_text`]).
/// The documents a line opens are read in order, each up to the line that is its delimiter (or
/// the text's end, as the shell reads one left open); a document's lines open none.
pub fn without_here_documents(text: &str, written_only: bool) -> Cow<'_, str> {
    if !text.contains("<<") || !text.contains('\n') {
        return Cow::Borrowed(text);
    }
    let mut kept: Vec<&str> = Vec::new();
    let mut changed = false;
    let mut lines = text.split('\n');
    while let Some(line) = lines.next() {
        kept.push(line);
        for (delimiter, written) in here_documents(line) {
            let dropped = written || !written_only;
            for body in lines.by_ref() {
                let end = body.trim() == delimiter;
                if dropped {
                    changed = true;
                } else {
                    kept.push(body);
                }
                if end {
                    break;
                }
            }
        }
    }
    match changed {
        true => Cow::Owned(kept.join("\n")),
        false => Cow::Borrowed(text),
    }
}

/// The here-documents a line of shell opens, in order: each one's delimiter, and whether the
/// command it feeds writes it into a file ([`writes_into_a_file`]). A `<<` in quotes or in an
/// arithmetic expansion (`$((1 << 4))`), and a here-string (`<<<`), open none.
fn here_documents(line: &str) -> Vec<(&str, bool)> {
    let bytes = line.as_bytes();
    let mut documents = Vec::new();
    let (mut single, mut double, mut arithmetic) = (false, false, 0usize);
    let mut command_start = 0;
    let mut at = 0;
    while at < bytes.len() {
        let quoted = single || double;
        match bytes[at] {
            b'\\' if !single => at += 1,
            b'\'' if !double => single = !single,
            b'"' if !single => double = !double,
            b'$' if !quoted && line[at..].starts_with("$((") => {
                arithmetic += 1;
                at += 2;
            }
            b')' if !quoted && arithmetic > 0 && line[at..].starts_with("))") => {
                arithmetic -= 1;
                at += 1;
            }
            b'|' | b';' | b'&' if !quoted => command_start = at + 1,
            b'<' if !quoted && arithmetic == 0 && line[at..].starts_with("<<") => {
                if line[at..].starts_with("<<<") {
                    at += 3;
                    continue;
                }
                if let Some(delimiter) = delimiter_of(&line[at + 2..]) {
                    let rest = &line[at..];
                    let command_end = rest.find(['|', ';', '&']).map_or(line.len(), |e| at + e);
                    let command = &line[command_start..command_end];
                    documents.push((delimiter, writes_into_a_file(command)));
                }
                at += 1;
            }
            _ => {}
        }
        at += 1;
    }
    documents
}

/// The word after `<<` that ends the document (`EOF` of `<< 'EOF'`, `<<-EOF`, `<<\EOF`,
/// `<<EOF>out.md`): a name, quoted or not; none for anything else.
fn delimiter_of(after: &str) -> Option<&str> {
    let word = after.strip_prefix('-').unwrap_or(after).trim_start();
    let word = word.strip_prefix('\\').unwrap_or(word);
    let (word, end) = match word.strip_prefix(['\'', '"']) {
        Some(quoted) => (quoted, quoted.find(['\'', '"'])?),
        None => (
            word,
            word.find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '-' || c == '.'))
                .unwrap_or(word.len()),
        ),
    };
    let word = &word[..end];
    let name = word.starts_with(|c: char| c.is_alphabetic() || c == '_')
        && word
            .chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == '-' || c == '.');
    name.then_some(word)
}

/// Whether the command a here-document feeds writes it into a file: `cat` redirected
/// (`cat > a.md <<EOF`, `cat <<EOF >> a.md`, `bash -lc cat <<'EOF' > a.md`) or `tee`.
fn writes_into_a_file(command: &str) -> bool {
    const BEFORE_PROGRAM: [&str; 7] = ["bash", "sh", "zsh", "-lc", "-c", "sudo", "env"];
    let mut words = command
        .split_whitespace()
        .skip_while(|w| BEFORE_PROGRAM.contains(w));
    match words.next().map(|w| w.trim_matches(['\'', '"'])) {
        // A redirection, not the `<<` that opens the document.
        Some("cat") => command.split("<<").any(|part| part.contains('>')),
        Some("tee") => true,
        _ => false,
    }
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

/// The text an argument value shows: strings as they are, lists of scalars joined by spaces.
pub fn argument_text(value: &Value) -> Option<String> {
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

/// The extensions of files written as prose for people to read (Markdown, reStructuredText,
/// AsciiDoc): what such a file says of errors (`- Errors: { error: { code, message } }`, a
/// troubleshooting section) is what the document says, not an error the agent's run met.
const DOCUMENT_EXTENSIONS: [&str; 6] = [".md", ".mdx", ".markdown", ".rst", ".adoc", ".mdc"];

/// The wrappers a harness runs a command in (`["bash", "-lc", "…"]`, joined by spaces).
const SHELL_WRAPPERS: [&str; 6] = [
    "bash -lc ",
    "bash -c ",
    "zsh -lc ",
    "zsh -c ",
    "sh -c ",
    "sh -lc ",
];

/// `command` without the shell a harness wrapped it in, nor the quotes around it there.
pub fn unwrapped(command: &str) -> &str {
    let Some(inner) = SHELL_WRAPPERS
        .iter()
        .find_map(|shell| command.strip_prefix(shell))
    else {
        return command;
    };
    let inner = inner.trim();
    for quote in ['\'', '"'] {
        if let Some(quoted) = inner
            .strip_prefix(quote)
            .and_then(|i| i.strip_suffix(quote))
        {
            if !quoted.contains(quote) {
                return quoted;
            }
        }
    }
    inner
}

/// The programs that print a file they are given, or the lines of it they keep.
const READERS: [&str; 9] = [
    "cat", "head", "tail", "sed", "nl", "less", "bat", "rg", "grep",
];

/// The tools that read the file their path argument names (Claude Code's `Read`, and the
/// usual names of others).
const READING_TOOLS: [&str; 5] = ["read", "read_file", "view", "view_file", "open_file"];

/// What the text editor tool (Anthropic's `str_replace_based_edit_tool`, OpenHands' and
/// SWE-agent's `str_replace_editor`) was asked to do, whatever the tool is named: its
/// `command` argument when that is one of the editor's (`view`, `create`, `str_replace`,
/// `insert`, `undo_edit`) beside a `path`. That `command` is no shell command; it is what the
/// call did to the file.
pub fn editor_command(arguments: &Map<String, Value>) -> Option<&str> {
    const EDITOR_COMMANDS: [&str; 5] = ["view", "create", "str_replace", "insert", "undo_edit"];
    let command = arguments.get("command")?.as_str()?;
    (EDITOR_COMMANDS.contains(&command) && arguments.contains_key("path")).then_some(command)
}

/// Whether a tool call (its `name` and its `arguments`, an object) did nothing but read or
/// search documents ([`DOCUMENT_EXTENSIONS`]): a reading tool on one (`Read` of
/// `docs/architecture.md`, the text editor's `view`), or a shell command whose programs only
/// print files, every one of them a document (`cat docs/a.md`, `sed -n '1,80p' README.md |
/// nl`). Its output is the documents' text, whose lines about errors are none the agent met.
pub fn reads_documents_only(name: &str, arguments: &Value) -> bool {
    let Value::Object(map) = arguments else {
        return false;
    };
    let is_document = |word: &str| {
        let word = word.trim_matches(['"', '\'']).to_ascii_lowercase();
        DOCUMENT_EXTENSIONS.iter().any(|e| word.ends_with(e)) && !word.contains('*')
    };
    let name = name.to_ascii_lowercase();
    let viewing = editor_command(map) == Some("view");
    if READING_TOOLS.contains(&name.as_str()) || viewing {
        let path = ["file_path", "path", "filePath", "target_file"]
            .iter()
            .find_map(|key| map.get(*key)?.as_str());
        return path.is_some_and(is_document);
    }
    let text = |key: &str| map.get(key).and_then(argument_text);
    let Some(command) = text("command").or_else(|| text("cmd")) else {
        return false;
    };
    let command = unwrapped(command.trim());
    // One pipe of readers: no list, substitution, redirection or variable.
    if command.contains(['&', ';', '>', '<', '$', '`', '(', '\n']) {
        return false;
    }
    let mut documents = 0;
    for stage in command.split('|') {
        let mut words = stage.split_whitespace();
        if !words
            .next()
            .is_some_and(|program| READERS.contains(&program))
        {
            return false;
        }
        for word in words.filter(|w| !w.starts_with('-')) {
            let word = word.trim_matches(['"', '\'']);
            let extension = word.rsplit_once('.').map(|(_, e)| e);
            let names_file = word.contains('/')
                || extension.is_some_and(|e| {
                    (1..=5).contains(&e.len()) && e.chars().all(char::is_alphanumeric)
                });
            if is_document(word) {
                documents += 1;
            } else if names_file {
                // Another file (or a pattern that reads as one): its output may be a run's.
                return false;
            }
        }
    }
    documents > 0
}
