//! Commands that only read, search or write one file (`sed -n '1,80p' src/a.rs`,
//! `rg -n "fold" src/a.rs`, `cat <<'EOF' > docs/b.md`), told in the touched list as that file's
//! last action (`src/a.rs (last: read lines 1-80)`) rather than as a command of their own: the
//! file's entry is listed among its directory's files, in a fraction of the characters, and the
//! command adds nothing but the range or the pattern, which the action keeps.
//!
//! Only a command that succeeded, that names one file and that runs nothing else (no `&&`, `;`,
//! substitution or other redirection; a pipe only into a reader of what it reads) is told so.
//! Anything else keeps its own entry as it ran.

use crate::domain::event::{file_paths, unwrapped};

/// The longest pattern a search's action names; a longer one is told as `searched`.
const PATTERN_CHARS: usize = 40;

/// How a command that read or wrote only `path` is told as its action.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct FileAction {
    pub(super) path: String,
    pub(super) action: String,
}

/// Whether a file's entry with `action` says the file was changed: written, patched (see
/// `calls::PATCH_HEADERS`) or edited by a tool that edits files. A later entry that does not
/// (a read, a search, a mention) does not hide that change as the file's last action.
pub(super) fn changes(action: &str) -> bool {
    const CHANGED: [&str; 6] = [
        "written",
        "updated",
        "added",
        "deleted",
        "moved",
        "moved here",
    ];
    // Tools that change the file their path argument names (Claude Code's, the text editor
    // tool's, and the usual names of others).
    const EDITING_TOOLS: [&str; 11] = [
        "edit",
        "multiedit",
        "write",
        "notebookedit",
        "create",
        "str_replace",
        "insert",
        "undo_edit",
        "str_replace_editor",
        "str_replace_based_edit_tool",
        "write_file",
    ];
    CHANGED.contains(&action) || EDITING_TOOLS.contains(&action.to_lowercase().as_str())
}

/// The file `command` reads, searches or writes and how, when that is all it does. A command
/// run in another directory (`cd web && cat src/a.ts`, as the summary shows a call that set
/// its own working directory) names the file by its path from where the `cd` started
/// (`web/src/a.ts`).
pub(super) fn file_action(command: &str) -> Option<FileAction> {
    let (outer, command) = in_directory(command.trim());
    let (inner, command) = in_directory(unwrapped(command));
    let mut told = read_or_written(command)?;
    for directory in [inner, outer].into_iter().flatten() {
        told.path = joined(directory, &told.path)?;
    }
    Some(told)
}

/// `command` split into the directory a leading `cd DIR && ` moves to, and the rest.
fn in_directory(command: &str) -> (Option<&str>, &str) {
    let split = command
        .strip_prefix("cd ")
        .and_then(|rest| rest.split_once(" && "))
        .filter(|(directory, _)| {
            let plain = |c: char| c.is_whitespace() || "?[]$*{}'\"`;&|<>()\\".contains(c);
            let directory = directory.trim();
            !directory.is_empty() && !directory.starts_with('-') && !directory.contains(plain)
        });
    match split {
        Some((directory, rest)) => (Some(directory.trim()), rest.trim_start()),
        None => (None, command),
    }
}

/// `path` as named from where `cd directory` was run: itself when absolute, else joined, with
/// `.` and `..` taken out where they can be; `None` for a directory of the user's home.
fn joined(directory: &str, path: &str) -> Option<String> {
    if path.starts_with('/') {
        return Some(path.to_owned());
    }
    if directory.starts_with('~') {
        return None;
    }
    let mut parts: Vec<&str> = Vec::new();
    let absolute = directory.starts_with('/');
    for part in directory.split('/').chain(path.split('/')) {
        match part {
            "" | "." => {}
            ".." if parts.last().is_some_and(|p| *p != "..") => {
                parts.pop();
            }
            ".." if absolute => {}
            part => parts.push(part),
        }
    }
    let joined = parts.join("/");
    Some(if absolute {
        format!("/{joined}")
    } else {
        joined
    })
}

/// The file `command` (one pipe, unwrapped) reads, searches or writes and how.
fn read_or_written(command: &str) -> Option<FileAction> {
    let tokens = tokens(command)?;
    let stages = stages(&tokens)?;
    let (first, rest) = stages.split_first()?;
    if let Some(path) = written(first) {
        return rest.is_empty().then(|| FileAction {
            path,
            action: "written".to_owned(),
        });
    }
    let words = plain_words(first)?;
    let (program, args) = words.split_first()?;
    let mut action = match program.as_str() {
        "cat" | "nl" | "head" | "tail" | "sed" | "less" | "bat" => stage_of(program, args, true)?,
        "rg" | "grep" => searched(args)?,
        _ => return None,
    };
    // A pipe into readers of what it read (`nl -ba a.rs | sed -n '80,140p'`): the range they
    // keep is the range read, when only one stage gives one.
    let mut ranges = usize::from(action.range.is_some());
    for stage in rest {
        let words = plain_words(stage)?;
        let (program, args) = words.split_first()?;
        if !matches!(program.as_str(), "head" | "tail" | "sed" | "nl" | "cat") {
            return None;
        }
        let filter = stage_of(program, args, false)?;
        if filter.range.is_some() {
            ranges += 1;
            action.range = filter.range;
        }
        if action.searched.is_some() {
            action.range = None;
        }
    }
    let told = match (action.searched, action.range) {
        (Some(pattern), _) => match pattern {
            Some(pattern) => format!("searched for {pattern}"),
            None => "searched".to_owned(),
        },
        (None, Some(range)) if ranges == 1 => format!("read {range}"),
        (None, _) => "read".to_owned(),
    };
    Some(FileAction {
        path: action.path,
        action: told,
    })
}

/// A word of a command, or what joins or redirects them.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Word(String),
    Pipe,
    /// `>`: the output into a file.
    Into,
    /// `<<`: a here-document.
    HereDocument,
}

/// The words of a shell command, unquoted; `None` for one that does more than run programs
/// in a pipe (a list, a substitution, another redirection) or that does not parse.
fn tokens(command: &str) -> Option<Vec<Token>> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = command.chars().peekable();
    let flush = |word: &mut String, in_word: &mut bool, out: &mut Vec<Token>| {
        if *in_word {
            out.push(Token::Word(std::mem::take(word)));
            *in_word = false;
        }
    };
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                loop {
                    match chars.next()? {
                        '\'' => break,
                        c => word.push(c),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next()? {
                        '"' => break,
                        // Inside double quotes a backslash escapes only these.
                        '\\' => match chars.next()? {
                            c @ ('$' | '`' | '"' | '\\' | '\n') => word.push(c),
                            c => {
                                word.push('\\');
                                word.push(c);
                            }
                        },
                        '`' => return None,
                        '$' if chars.peek() == Some(&'(') => return None,
                        c => word.push(c),
                    }
                }
            }
            '\\' => {
                in_word = true;
                word.push(chars.next()?);
            }
            c if c.is_whitespace() => flush(&mut word, &mut in_word, &mut out),
            '|' => {
                if chars.peek() == Some(&'|') {
                    return None;
                }
                flush(&mut word, &mut in_word, &mut out);
                out.push(Token::Pipe);
            }
            '>' => {
                // `2>` or `>>`, or a descriptor joined: more than one file's output.
                if in_word || chars.peek() == Some(&'>') || chars.peek() == Some(&'&') {
                    return None;
                }
                out.push(Token::Into);
            }
            '<' => {
                if in_word || chars.next()? != '<' || matches!(chars.peek(), Some('<' | '-')) {
                    return None;
                }
                out.push(Token::HereDocument);
            }
            ';' | '&' | '`' | '(' | ')' | '{' | '}' => return None,
            '$' if chars.peek() == Some(&'(') => return None,
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    flush(&mut word, &mut in_word, &mut out);
    Some(out)
}

/// The stages of a pipe; `None` when one is empty.
fn stages(tokens: &[Token]) -> Option<Vec<&[Token]>> {
    let stages: Vec<&[Token]> = tokens.split(|t| *t == Token::Pipe).collect();
    stages.iter().all(|s| !s.is_empty()).then_some(stages)
}

/// A stage's words, when it has no redirection.
fn plain_words(stage: &[Token]) -> Option<Vec<String>> {
    stage
        .iter()
        .map(|t| match t {
            Token::Word(w) => Some(w.clone()),
            _ => None,
        })
        .collect()
}

/// The file `cat <<'EOF' > path` writes (its document's text was left out of the entry).
fn written(stage: &[Token]) -> Option<String> {
    let (Token::Word(program), rest) = stage.split_first()? else {
        return None;
    };
    if program != "cat" {
        return None;
    }
    let (mut path, mut document) = (None, false);
    let mut rest = rest.iter();
    while let Some(token) = rest.next() {
        match (token, rest.next()) {
            (Token::Into, Some(Token::Word(p))) if path.is_none() => path = Some(p.clone()),
            (Token::HereDocument, Some(Token::Word(_))) if !document => document = true,
            _ => return None,
        }
    }
    path.filter(|p| document && is_file(p))
}

/// Whether `word` is one file's path as the summary reads one: not a pattern the shell
/// expands (`src/a?.rs`, `src/[ab].rs`, `$DIR/a.rs`) into other or several files. A directory
/// named in brackets (a dynamic route: `app/trips/[tripId]/page.tsx`) is no pattern: the
/// agent names that directory, and the shell leaves the word as it is when nothing else
/// matches.
fn is_file(word: &str) -> bool {
    let mut paths = file_paths(word);
    !word.contains(['?', '$', '*', '{'])
        && !has_pattern_brackets(word)
        && paths.next() == Some(word)
        && paths.next().is_none()
}

/// Whether `path` holds brackets other than a directory's whole name (`[tripId]/`, an
/// optional catch-all's `[[...slug]]/`).
fn has_pattern_brackets(path: &str) -> bool {
    let mut segments = path.split('/').rev();
    let name = segments.next().unwrap_or_default();
    let bracketed = |s: &str| s.contains(['[', ']']);
    let directory = |s: &str| {
        let inner = s.strip_prefix('[').and_then(|s| s.strip_suffix(']'));
        let inner = inner.map(|i| {
            i.strip_prefix('[')
                .and_then(|i| i.strip_suffix(']'))
                .unwrap_or(i)
        });
        inner.is_some_and(|inner| !inner.is_empty() && !bracketed(inner))
    };
    bracketed(name) || segments.any(|s| bracketed(s) && !directory(s))
}

/// What a stage of a pipe that reads or searches does: the file it names (none for a filter
/// after the first stage), the lines it keeps, the pattern it looks for.
struct Stage {
    path: String,
    range: Option<String>,
    /// `Some` for a search: its pattern, when the action can name it.
    searched: Option<Option<String>>,
}

/// A reader's stage (`sed -n '1,80p' a.rs`, `head -n 40`): with `file`, it must name one
/// file; without, none.
fn stage_of(program: &str, args: &[String], file: bool) -> Option<Stage> {
    let mut path = None;
    let mut range = None;
    let mut quiet = false;
    let mut args = args.iter().peekable();
    while let Some(arg) = args.next() {
        match (program, arg.as_str()) {
            ("sed", "-n") => quiet = true,
            ("sed", script) if quiet && range.is_none() && !is_file(script) => {
                range = Some(sed_range(script)?);
            }
            // `head -n -5` prints all but the last five lines: no count of lines read.
            ("head" | "tail", "-n") => {
                range = Some(lines_counted(program, args.next()?)?);
            }
            ("head" | "tail", flag) if flag.starts_with("-n") => {
                range = Some(lines_counted(program, &flag["-n".len()..])?);
            }
            // The old form, `head -50`.
            ("head" | "tail", flag) if is_count(flag) => {
                range = Some(lines_counted(program, &flag[1..])?);
            }
            ("cat" | "nl" | "less" | "bat", flag) if flag.starts_with('-') && flag.len() > 1 => {}
            (_, word) if file && path.is_none() && is_file(word) => path = Some(word.to_owned()),
            _ => return None,
        }
    }
    if program == "sed" && !quiet {
        return None;
    }
    if file && path.is_none() {
        return None;
    }
    Some(Stage {
        path: path.unwrap_or_default(),
        range,
        searched: None,
    })
}

/// `1,80p` as `lines 1-80`, `12p` as `line 12`, `40,$p` as `lines 40-end`.
fn sed_range(script: &str) -> Option<String> {
    let range = script.strip_suffix('p')?;
    let (from, to) = match range.split_once(',') {
        Some((from, to)) => (from, Some(to)),
        None => (range, None),
    };
    let number = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
    match to {
        None if number(from) => Some(format!("line {from}")),
        Some("$") if number(from) => Some(format!("lines {from}-end")),
        Some(to) if number(from) && number(to) => Some(format!("lines {from}-{to}")),
        _ => None,
    }
}

/// Whether `word` is a count of lines in the old form (`-50`).
fn is_count(word: &str) -> bool {
    word.strip_prefix('-')
        .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
}

/// `head -n 40` as `lines 1-40`, `tail -n 40` as `the last 40 lines`; `None` for a count that
/// is not a plain number of lines (`-5`, `+5`, `40K`).
fn lines_counted(program: &str, count: &str) -> Option<String> {
    if count.is_empty() || !count.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    Some(match program {
        "head" => format!("lines 1-{count}"),
        _ => format!("the last {count} lines"),
    })
}

/// A search of one file: `rg -n "fold" src/a.rs`, `grep -n -e x src/a.rs`.
fn searched(args: &[String]) -> Option<Stage> {
    // Options that take the next word as their value.
    const VALUED: [&str; 11] = [
        "-e",
        "-g",
        "--glob",
        "-t",
        "--type",
        "-A",
        "-B",
        "-C",
        "-m",
        "--max-count",
        "-f",
    ];
    let mut pattern = None;
    let mut words = Vec::new();
    let mut args = args.iter();
    let mut options = true;
    while let Some(arg) = args.next() {
        if options && arg == "--" {
            options = false;
        } else if options && VALUED.contains(&arg.as_str()) {
            let value = args.next()?;
            match arg.as_str() {
                "-e" if pattern.is_none() => pattern = Some(value.clone()),
                "-e" | "-f" | "-g" | "--glob" => return None,
                _ => {}
            }
        } else if options && arg.starts_with('-') && arg.len() > 1 {
        } else {
            words.push(arg.clone());
        }
    }
    let (pattern, path) = match (pattern, words.as_slice()) {
        (Some(pattern), [path]) => (pattern, path),
        (None, [pattern, path]) => (pattern.clone(), path),
        _ => return None,
    };
    if !is_file(path) {
        return None;
    }
    // The action is read back from the list of a directory's files: no brackets or commas.
    let nameable = !pattern.trim().is_empty()
        && pattern.chars().count() <= PATTERN_CHARS
        && !pattern.contains(['(', ')', ',', '\n']);
    Some(Stage {
        path: path.clone(),
        range: None,
        searched: Some(nameable.then(|| pattern.split_whitespace().collect::<Vec<_>>().join(" "))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn told(command: &str) -> Option<(String, String)> {
        file_action(command).map(|a| (a.path, a.action))
    }

    fn pair(path: &str, action: &str) -> Option<(String, String)> {
        Some((path.to_owned(), action.to_owned()))
    }

    #[test]
    fn a_read_of_one_file_is_told_with_the_lines_it_read() {
        let cases = [
            (
                "sed -n '1,80p' src/a.rs",
                pair("src/a.rs", "read lines 1-80"),
            ),
            (
                "bash -lc sed -n '40,$p' src/a.rs",
                pair("src/a.rs", "read lines 40-end"),
            ),
            (
                "bash -lc 'sed -n 12p src/a.rs'",
                pair("src/a.rs", "read line 12"),
            ),
            ("cat docs/plan.md", pair("docs/plan.md", "read")),
            (
                "head -n 120 .specify/memory/constitution.md",
                pair(".specify/memory/constitution.md", "read lines 1-120"),
            ),
            (
                "tail -n 40 specs/001/plan.md",
                pair("specs/001/plan.md", "read the last 40 lines"),
            ),
            ("head -50 src/a.rs", pair("src/a.rs", "read lines 1-50")),
            (
                "nl -ba src/lib.rs | sed -n '80,140p'",
                pair("src/lib.rs", "read lines 80-140"),
            ),
            (
                "nl -ba specs/r.md | head -n 120",
                pair("specs/r.md", "read lines 1-120"),
            ),
            (
                "rg -n \"LogBuffer\" /home/me/app/src/ipc.rs",
                pair("/home/me/app/src/ipc.rs", "searched for LogBuffer"),
            ),
            (
                "rg -n \"get_logs|clear_logs\" src/lib.rs",
                pair("src/lib.rs", "searched for get_logs|clear_logs"),
            ),
            (
                "grep -n -e 'fn main' src/main.rs",
                pair("src/main.rs", "searched for fn main"),
            ),
            ("rg -n \"fold(\" src/a.rs", pair("src/a.rs", "searched")),
            (
                "bash -lc cat <<'EOF' > specs/001/research.md",
                pair("specs/001/research.md", "written"),
            ),
            // Run in another directory: the path from where the `cd` started.
            (
                "cd /repo && sed -n '1,80p' src/a.rs",
                pair("/repo/src/a.rs", "read lines 1-80"),
            ),
            (
                "cd web && bash -lc 'cd src && cat ../../docs/b.md'",
                pair("docs/b.md", "read"),
            ),
            (
                "cd /repo/web && cat /repo/docs/b.md",
                pair("/repo/docs/b.md", "read"),
            ),
            // Directories named in brackets and in parentheses (a Next.js app's routes).
            (
                "sed -n '1,200p' 'src/app/trips/[tripId]/overview/page.tsx'",
                pair(
                    "src/app/trips/[tripId]/overview/page.tsx",
                    "read lines 1-200",
                ),
            ),
            (
                "cat \"app/(auth)/[...slug]/page.tsx\"",
                pair("app/(auth)/[...slug]/page.tsx", "read"),
            ),
            (
                "head -n 20 'app/docs/[[...slug]]/page.tsx'",
                pair("app/docs/[[...slug]]/page.tsx", "read lines 1-20"),
            ),
        ];
        for (command, expected) in cases {
            assert_eq!(told(command), expected, "{command}");
        }
    }

    #[test]
    fn a_command_that_does_more_or_names_no_single_file_keeps_its_entry() {
        for command in [
            "cargo test",
            "cd ~/repo && sed -n '1,80p' src/a.rs",
            "cd \"my repo\" && cat src/a.rs",
            "cd /repo && cargo test",
            "sed -n '1,80p' src/a.rs src/b.rs",
            "sed -i 's/a/b/' src/a.rs",
            "sed 's/a/b/' src/a.rs",
            "cat src/a.rs > src/b.rs",
            "cat src/a.rs >> src/b.rs",
            "cat src/a.rs 2>&1",
            "cat $(find . -name a.rs)",
            "rg -n fold src/",
            "rg -n fold src/a.rs src/b.rs",
            "rg -n fold src/a.rs | wc -l",
            "sed -n '1,80p' src/a.rs; cargo test",
            "head -c 100 src/a.rs",
            "cat src/a.rs || true",
            "python3 -c 'print(1)' src/a.rs",
            "ssh host cat /etc/hosts",
            "sed -n '1,80p' 'src/a.rs",
        ] {
            assert_eq!(told(command), None, "{command}");
        }
    }

    #[test]
    fn a_count_that_is_no_number_of_lines_read_and_a_pattern_the_shell_expands_are_no_read() {
        for command in [
            "head -n -5 src/a.rs",
            "head -n-5 src/a.rs",
            "tail -n +5 src/a.rs",
            "cat src/a?.rs",
            "sed -n '1,5p' src/[ab].rs",
            "cat src/[ab]x/a.rs",
            "cat src/[]/a.rs",
            "cat $DIR/src/a.rs",
        ] {
            assert_eq!(told(command), None, "{command}");
        }
        // A backslash in double quotes is kept unless it escapes what the shell escapes there.
        assert_eq!(
            told(r#"rg "foo\|bar" src/a.rs"#),
            pair("src/a.rs", r"searched for foo\|bar")
        );
        assert_eq!(
            told(r#"rg "cost \"x\"" src/a.rs"#),
            pair("src/a.rs", "searched for cost \"x\"")
        );
    }

    #[test]
    fn a_change_is_a_write_a_patch_or_an_editing_tool_not_a_read_or_a_mention() {
        for action in [
            "written",
            "updated",
            "deleted",
            "moved here",
            "Edit",
            "str_replace_based_edit_tool",
        ] {
            assert!(changes(action), "{action}");
        }
        for action in [
            "read lines 1-80",
            "searched for x",
            "Read",
            "named by the user",
            "shell",
        ] {
            assert!(!changes(action), "{action}");
        }
    }
}
