//! The error lines an item shown reduced still names: what a model most needs of an output it
//! no longer sees.

use crate::domain::diagnostic::{self, Located};
use crate::domain::text;

/// The characters of each error line a reduced item names (of its message, for a group).
const ERROR_LINE_CHARS: usize = 160;

/// The distinct lines of `text` that read as errors (`error:`, `error[E…]`, `FAILED`,
/// `panicked at`, exceptions), whole, at most `max` of them, each with how many times the
/// output printed it: what a model most needs of an output it no longer sees ([`error_entries`]
/// names them). Lines that differ only in their numbers (a process id, a time, a worker's
/// number: [`text::numbers_blanked`]) or in a terminal's colours are one line, the first
/// printed; a compiler's diagnostics stay one line per place, to be grouped by message.
pub(super) fn error_lines(text: &str, max: usize) -> Vec<(&str, usize)> {
    let mut found: Vec<(&str, usize)> = Vec::new();
    if max == 0 {
        return found;
    }
    // Where each shape was found first.
    let mut shapes: std::collections::HashMap<String, usize> = Default::default();
    let bytes = text.as_bytes();
    // Where each needle next occurs: each is searched for again only once passed, so the text
    // is read once per needle however many lines are found.
    let mut next = ERROR_NEEDLES.each_ref().map(|n| n.find(bytes));
    // The line the last hit was in: a long line (an output encoded in one line) is searched
    // for its ends once, however many hits it holds.
    let mut current = 0..0;
    while let Some(hit) = next.iter().flatten().copied().min() {
        if !current.contains(&hit) {
            let start = memchr::memrchr(b'\n', &bytes[..hit]).map_or(0, |i| i + 1);
            let end = memchr::memchr(b'\n', &bytes[hit..]).map_or(bytes.len(), |i| hit + i);
            current = start..end;
        }
        let start = current.start;
        // A line an output encodes in one long line (JSON's `\n`) is a line of its own.
        let within = text::output_line_around(&text[current.clone()], hit - start);
        let line = text[start + within.start..start + within.end].trim();
        // A line is read without a terminal's colours (`ESC[31merrorESC[0m: …`).
        let plain = text::without_terminal_escapes(line);
        if reads_as_error(&plain) {
            let shape = shape_of_plain(plain);
            match shapes.get(&shape) {
                Some(&i) => found[i].1 += 1,
                None if found.len() < max => {
                    shapes.insert(shape, found.len());
                    found.push((line, 1));
                }
                // Full: no new line is kept; those found are still counted.
                None => {}
            }
        }
        let after = (start + within.end + 1).min(bytes.len());
        for (position, needle) in next.iter_mut().zip(ERROR_NEEDLES.iter()) {
            if position.is_some_and(|p| p < after) {
                *position = needle.find(&bytes[after..]).map(|p| after + p);
            }
        }
    }
    found
}

/// What an error line is the same as: itself without a terminal's colours, and but for its
/// numbers unless it is a compiler's diagnostic at a place (whose places are grouped by
/// message, each named).
pub fn error_shape(line: &str) -> String {
    shape_of_plain(text::without_terminal_escapes(line))
}

/// [`error_shape`] of a line without a terminal's escapes.
fn shape_of_plain(plain: std::borrow::Cow<'_, str>) -> String {
    if Located::parse(&plain).is_some() {
        plain.into_owned()
    } else {
        text::numbers_blanked(&plain)
    }
}

/// How often an error line was seen, after it: `line (seen 3 times)`, in a reduced item and in
/// the summary alike.
pub const SEEN: &str = " (seen ";
pub const TIMES: &str = " times)";

/// Lines read from an output per error entry: a compiler's message at many places of one file
/// is one entry.
const LINES_PER_ERROR_ENTRY: usize = 8;
/// The places an entry of one compiler message at many places names, in characters, in a
/// reduced item and in the summary alike: about thirty `line:column` pairs. A preview that named
/// fewer than the summary lost the places past its half until the output was folded.
pub const PLACES_CHARS: usize = 240;

/// At most `max` entries (a session's
/// [`error_lines`](crate::domain::session::SessionConfig::error_lines)) for the error lines of
/// `text` ([`error_lines`]), each cut to [`ERROR_LINE_CHARS`], a compiler's diagnostics of one
/// message in one file at many places as one entry naming the places in at most
/// `places_chars` characters (`src/a.c: error: … (at 12:5, 14:5)`):
/// a build's distinct errors, where its first lines could all be one message, in the order it
/// printed them ([`diagnostic::grouped_in_reading_order`]).
pub fn error_entries(text: &str, max: usize, places_chars: usize) -> Vec<String> {
    // Grouped whole, so that two messages are one only when they read the same; each entry
    // is cut afterwards.
    let lines = error_lines(text, max.saturating_mul(LINES_PER_ERROR_ENTRY));
    let times: Vec<(String, usize)> = lines
        .into_iter()
        .map(|(line, n)| (text::without_terminal_escapes(line).into_owned(), n))
        .collect();
    let lines = times.iter().map(|(line, _)| line.clone());
    let mut entries: Vec<String> = diagnostic::grouped_in_reading_order(lines)
        .into_iter()
        .map(|entry| match entry {
            diagnostic::Entry::Group(mut group) => {
                group.message = text::bounded(&group.message, ERROR_LINE_CHARS);
                group.render(places_chars)
            }
            diagnostic::Entry::Line(line) => {
                let n = times.iter().find(|(l, _)| *l == line).map_or(1, |t| t.1);
                let shown = text::prefix_chars(&line, ERROR_LINE_CHARS);
                if n > 1 {
                    format!("{shown}{SEEN}{n}{TIMES}")
                } else {
                    shown.to_owned()
                }
            }
        })
        .collect();
    entries.truncate(max);
    entries
}

/// Every line that [`reads_as_error`] holds one of these (its words in lower, capitalised or
/// upper case): searching for them skips most of a long output.
static ERROR_NEEDLES: std::sync::LazyLock<[memchr::memmem::Finder<'static>; 6]> =
    std::sync::LazyLock::new(|| {
        ["rror", "RROR", "FAIL", "panicked", "xception", "XCEPTION"]
            .map(memchr::memmem::Finder::new)
    });

/// Whether a line says what failed: `error…`, `error:`, `error[`, `FAILED`, `panicked at`,
/// an exception raised ([`raises_exception`]). What a reduced tool result keeps, and what the
/// replay counts as an error fact.
/// Source code is not what a run said, however it names errors ([`is_source`]), and neither
/// is a field for errors that holds none or declares its type ([`holds_no_error`]).
pub fn reads_as_error(line: &str) -> bool {
    let lower = line.to_ascii_lowercase();
    // The words first: the replay asks this of every line of every output, and few name an
    // error; only those are read for the shape of code.
    line.len() >= 8
        && (lower.starts_with("error")
            || lower.contains("error:")
            || lower.contains("error[")
            || line.contains("FAILED")
            || line.contains("panicked at")
            || raises_exception(&lower))
        && !is_source(line)
        && !holds_no_error(line)
}

/// Whether `line` is a field named for errors that holds none, or declares of what type they
/// are: a schema, a type or a record printed (`error_reason: VARCHAR`, `error: str | None`,
/// `Errors: []`, `last_error: null`), not an error a run met. A log's level (`ERROR: …`) and
/// an exception's name (`TypeError: …`) are no field: what follows them is what went wrong.
fn holds_no_error(line: &str) -> bool {
    const EMPTY: [&str; 12] = [
        "",
        "[]",
        "{}",
        "\"\"",
        "''",
        "0",
        "none",
        "null",
        "nil",
        "undefined",
        "false",
        "n/a",
    ];
    #[rustfmt::skip]
    const TYPES: [&str; 44] = [
        "str", "string", "int", "integer", "bool", "boolean", "float", "double", "text", "varchar",
        "char", "any", "object", "dict", "list", "none", "null", "optional", "option", "number",
        "bytes", "datetime", "uuid", "json", "jsonb", "timestamp", "timestamptz", "bigint",
        "smallint", "nil", "undefined", "array", "map", "record", "set", "tuple", "date",
        "decimal", "numeric", "real", "u32", "u64", "i32", "i64",
    ];
    let Some((key, value)) = line.trim().split_once(':') else {
        return false;
    };
    let is_word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let named = !key.is_empty()
        && key.chars().all(|c| is_word(c) || c == '.')
        && key.to_ascii_lowercase().contains("error");
    let level_or_exception = key.starts_with(|c: char| c.is_ascii_uppercase())
        && (key.ends_with("Error") || key == key.to_ascii_uppercase());
    if !named || level_or_exception {
        return false;
    }
    let value = value.trim().trim_end_matches([',', ';']).trim();
    if EMPTY.contains(&value.to_ascii_lowercase().as_str()) {
        return true;
    }
    let mut words = value
        .split(|c: char| !is_word(c))
        .filter(|w| !w.is_empty() && !w.bytes().all(|b| b.is_ascii_digit()))
        .peekable();
    words.peek().is_some()
        && words.all(|w| TYPES.contains(&w.to_ascii_lowercase().as_str()))
        && value
            .chars()
            .all(|c| is_word(c) || "|[]<>(),?=. ".contains(c))
}

/// Whether a line (in lower case) says an exception was raised: an exception named and then
/// what it says (`TimeoutException: timed out`, `caught exception: …`), the thread it killed,
/// or ending the line (PowerShell's `…, CommandNotFoundException`); not code that catches,
/// throws or defines one (`except Exception as e:`, `throw new IOException(…)`), nor prose
/// that mentions one (`an exception is approved`).
fn raises_exception(lower: &str) -> bool {
    const STARTS: [&str; 8] = [
        "except ", "except:", "catch", "} catch", "raise ", "from ", "import ", "class ",
    ];
    const HOLDS: [&str; 3] = [" class ", "throw ", "catch ("];
    let code = lower.trim_start();
    let handles =
        STARTS.iter().any(|c| code.starts_with(c)) || HOLDS.iter().any(|c| code.contains(c));
    !handles
        && lower.match_indices("exception").any(|(at, _)| {
            let after = &lower[at + "exception".len()..];
            let before = lower[..at].trim_end();
            after.starts_with(':')
                || after.starts_with(" in thread")
                || after.starts_with(" occurred")
                || after.trim().is_empty()
                || before.ends_with("unhandled")
                || before.ends_with("uncaught")
        })
}

/// Whether `line` is a line of source code rather than what a run said: a line of a file as a
/// read tool numbers it (`  106→  printf("FAILED");`, `cat -n`'s number and tab, rustc's
/// `12 |     return Err(e);`), as `grep -n` or `rg -n` shows it (`559:        except
/// Exception: pass`, `src/api.ts:59:    { error: "not found" },`: the code indented after
/// the place), or code as a file read or a diff shows it ([`is_code`]). A compiler's
/// diagnostic (`src/a.c:12:5: error: …`) is no source line: its message follows the place
/// after one space.
pub fn is_source(line: &str) -> bool {
    let line = line.trim();
    if is_numbered(line) {
        return true;
    }
    let Some(located) = Located::parse(line) else {
        return is_code(line);
    };
    // After the path: the line's number, then its code indented, or the column and a message.
    let rest = &line[located.path.len() + 1..];
    let message = located.message.to_ascii_lowercase();
    let diagnostic = SEVERITIES.iter().any(|s| message.starts_with(s));
    is_numbered(rest) || (!diagnostic && is_code(located.message))
}

/// How a compiler's or a linter's message at a place starts.
const SEVERITIES: [&str; 5] = ["error", "warning", "fatal", "syntax error", "note"];

/// Whether `line` starts with a line number and then the line of a file: after `→`, a tab,
/// a gutter (`12 |     code`), or a colon and the code's indentation (two spaces or a tab).
fn is_numbered(line: &str) -> bool {
    let digits = line.bytes().take_while(u8::is_ascii_digit).count();
    let after = &line[digits..];
    digits > 0
        && (after.starts_with('→')
            || after.starts_with('\t')
            || after.trim_start_matches(' ').starts_with("| ")
            || after
                .strip_prefix(':')
                .is_some_and(|code| code.starts_with("  ") || code.starts_with('\t')))
}

/// Whether a line (trimmed) reads as code, or as a diff's added or removed line of code: a
/// statement or a literal left open (`{ error: "not found" },`, `} catch (error) {`,
/// `error: string | null;`), a declaration, a return or a throw, a log call
/// (`console.error("failed:", e)`, `error!("…")`), an `echo` of a message or a test that passed
/// (`test error::tests::formats ... ok`). A line that opens with a quote is a line of JSON
/// (`"message": "Error: quota exceeded",`), which says what a run returned.
fn is_code(line: &str) -> bool {
    #[rustfmt::skip]
    const STARTS: [&str; 25] = [
        "return ", "throw ", "const ", "let ", "var ", "if (", "} ", "//", "/*", "console.",
        "pub ", "fn ", "def ", "async ", "await ", "export ", "use ", "#[", "Err(", "Ok(",
        "echo ", "printf ", "except ", "println!(", "error!(",
    ];
    const HOLDS: [&str; 4] = ["console.error(", "new Error(", "error?:", ".json({"];
    const ENDS: [char; 5] = ['{', ';', ',', '(', '['];
    const PASSED: [&str; 2] = [" ... ok", " ... ignored"];
    let code = match line.strip_prefix(['+', '-']) {
        Some(rest) if rest.starts_with([' ', '\t']) => rest.trim_start(),
        _ => line,
    };
    STARTS.iter().any(|s| code.starts_with(s))
        || HOLDS.iter().any(|s| code.contains(s))
        || (code.ends_with(ENDS) && !code.starts_with('"'))
        || PASSED.iter().any(|s| code.ends_with(s))
}
