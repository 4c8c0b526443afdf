//! How items appear in a view: events as messages, previews and references of offloaded
//! content, the summary message and placeholder results.

use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt::Write;

use crate::domain::compaction::{Projection, Summary, ViewMessage};
use crate::domain::condensation::Memory;
use crate::domain::content::Part;
use crate::domain::event::{
    constraint_lines, file_paths, Event, EventBody, Role, ShownAs, ToolCall,
};
use crate::domain::{observation, text};
use crate::tokens::Tokenizer;

mod anchors;
mod archived;
mod errors;

use archived::archived_calls;
pub use archived::{archived_calls_message, has_long_arguments, recall_text};
pub use errors::{
    error_entries, error_shape, is_source, reads_as_error, PLACES_CHARS, SEEN, TIMES,
};

/// Marks the summary message so that models (and people) can tell it from the conversation.
pub const SUMMARY_HEADER: &str = "[ctxd: summary of the earlier conversation]";
/// The most lines and characters a preview shows.
pub const PREVIEW_LINES: usize = 20;
pub const PREVIEW_CHARS: usize = 1_200;

/// The address an observation is recalled by.
pub fn observation_uri(seq: i64) -> String {
    ObservationUri(seq).to_string()
}

/// [`observation_uri`], written where it is formatted.
pub struct ObservationUri(pub i64);

impl std::fmt::Display for ObservationUri {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}{}", observation::SCHEME, self.0)
    }
}

/// The characters of an event's main text.
pub fn content_chars(event: &Event) -> i64 {
    text_of(event).chars().count() as i64
}

/// The main text of an event: what an observation recalls.
pub fn text_of(event: &Event) -> &str {
    match &event.body {
        EventBody::Message(m) => m.content.text(),
        EventBody::Note(n) => &n.content,
        EventBody::EpisodeEnd(e) => &e.conclusion,
        EventBody::EpisodeStart(_) => "",
    }
}

/// The first lines of `text`, at most `PREVIEW_LINES` lines and `max_chars` characters.
fn head_of(text: &str, max_chars: usize) -> &str {
    // Tool output is mostly ASCII: there a character is a byte, and no character is decoded.
    let window = &text.as_bytes()[..text.len().min(max_chars)];
    if window.is_ascii() {
        let end = memchr::memchr_iter(b'\n', window)
            .nth(PREVIEW_LINES - 1)
            .unwrap_or(window.len());
        return &text[..end];
    }
    head_of_chars(text, max_chars)
}

/// [`head_of`], a character at a time.
fn head_of_chars(text: &str, max_chars: usize) -> &str {
    let mut lines = 0;
    for (count, (i, c)) in text.char_indices().enumerate() {
        if count >= max_chars {
            return &text[..i];
        }
        if c == '\n' {
            lines += 1;
            if lines >= PREVIEW_LINES {
                return &text[..i];
            }
        }
    }
    text
}

/// The text a reduced event is cut from and its length in characters: a message's own content
/// (borrowed, however large; `chars` is its length, as [`content_chars`] counts it), or the
/// rendering of a small non-message event.
fn shown_text(event: &Event, chars: i64) -> (Cow<'_, str>, i64) {
    match &event.body {
        EventBody::Message(m) => (Cow::Borrowed(m.content.text()), chars),
        _ => {
            let text = event.body.shown_text().into_owned();
            let chars = text.chars().count() as i64;
            (Cow::Owned(text), chars)
        }
    }
}

/// An event's message with `content` in place of its own.
fn reduced_message<'e>(
    event: &'e Event,
    content: Cow<'e, str>,
    projection: Projection,
) -> ViewMessage<'e> {
    ViewMessage {
        content,
        parts: Cow::Borrowed(&[]),
        projection,
        tokens: 0,
        ..ViewMessage::full(event)
    }
}

/// An event shown as its first lines and its observation reference, in at most `max_chars`
/// characters of content, then at most `errors` error lines of the rest. `chars` is the
/// event's [`content_chars`]. Its `tokens` are left for the caller to set (see [`cost`]).
pub fn preview_message(
    event: &Event,
    max_chars: usize,
    chars: i64,
    errors: usize,
) -> ViewMessage<'_> {
    let errors = errors_named(event, errors);
    let key = [max_chars as i64, errors as i64, chars];
    let content = event.derived.shown(ShownAs::Preview, key, || {
        let (text, total) = shown_text(event, chars);
        let shown = head_of(&text, max_chars);
        let shown_chars = if shown.is_ascii() {
            shown.len()
        } else {
            shown.chars().count()
        } as i64;
        let mut content = String::with_capacity(shown.len() + 96);
        content.push_str(shown);
        if shown_chars < total || !has_images(event) {
            let _ = write!(
                content,
                "\n[… {} more characters offloaded; recall {}?offset={shown_chars}]",
                total - shown_chars,
                ObservationUri(event.seq)
            );
            push_lines(
                &mut content,
                &error_entries(&text[shown.len()..], errors, PLACES_CHARS),
            );
        }
        image_references(event, &mut content);
        content
    });
    reduced_message(event, content, Projection::Preview)
}

/// What a user's `text` says that its reference alone would not: the constraint lines it states
/// ([`constraint_lines`]), each once and on one line of at most 200 characters, then the files
/// it names on one line (`files named: src/a.rs, docs/b.md`), as many as fit `max_chars`
/// together.
fn request_entries(text: &str, max_chars: usize) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut used = 0;
    for line in constraint_lines(text) {
        let line = text::bounded(line, 200);
        let chars = line.chars().count() + 1;
        if used + chars > max_chars {
            break;
        }
        if !out.contains(&line) {
            used += chars;
            out.push(line);
        }
    }
    let mut files = String::new();
    let mut named = HashSet::new();
    for path in file_paths(text) {
        let entry = if files.is_empty() {
            format!("files named: {path}")
        } else {
            format!(", {path}")
        };
        if named.contains(path) || used + files.len() + entry.len() + 1 > max_chars {
            continue;
        }
        named.insert(path);
        files.push_str(&entry);
    }
    if !files.is_empty() {
        out.push(files);
    }
    out
}

/// How many error lines `event` shown reduced names, of at most `errors`: none for the
/// result of a call that only read documents, whose lines about errors (`- Error format: …`)
/// are the documents' text, no error seen.
fn errors_named(event: &Event, errors: usize) -> usize {
    if event.derived.answers_document_read() {
        0
    } else {
        errors
    }
}

/// Writes each of `lines` on a line of its own.
fn push_lines(content: &mut String, lines: &[String]) {
    for line in lines {
        content.push('\n');
        content.push_str(line);
    }
}

/// Whether an event's content holds images.
pub fn has_images(event: &Event) -> bool {
    event
        .body
        .parts()
        .iter()
        .any(|p| matches!(p, Part::Image(_)))
}

/// One line per image of `event`, in place of the image.
fn image_references(event: &Event, content: &mut String) {
    for part in event.body.parts() {
        if let Part::Image(image) = part {
            if !content.is_empty() {
                content.push('\n');
            }
            let _ = write!(
                content,
                "[{} offloaded; kept in event {}]",
                image.describe(),
                ObservationUri(event.seq)
            );
        }
    }
}

/// An event shown as its head and its tail in about `max_chars` characters, with the
/// observation reference of the middle and at most `errors` of the middle's error lines between
/// them; for a user's message, the constraints its middle states instead (in at most a quarter
/// of `max_chars`): the rules of a long request the view keeps are not left to its reference.
/// `chars` is the event's [`content_chars`]. Its `tokens` are left for the caller.
pub fn excerpt_message(
    event: &Event,
    max_chars: usize,
    chars: i64,
    errors: usize,
) -> ViewMessage<'_> {
    let errors = errors_named(event, errors);
    let key = [max_chars as i64, errors as i64, chars];
    let content = event.derived.shown(ShownAs::Excerpt, key, || {
        let (text, total) = shown_text(event, chars);
        let head = text::prefix_chars(&text, max_chars * 2 / 3);
        let rest = &text[head.len()..];
        let tail = text::suffix_chars(rest, max_chars / 3);
        let middle = &rest[..rest.len() - tail.len()];
        let count = |s: &str| if s.is_ascii() { s.len() } else { s.chars().count() } as i64;
        let offset = count(head);
        let mut content = String::with_capacity(head.len() + tail.len() + 200);
        content.push_str(head);
        let _ = write!(
            content,
            "\n[… {} characters offloaded; recall {}?offset={offset}]",
            total - offset - count(tail),
            ObservationUri(event.seq)
        );
        let lines = match event.body.role() {
            Some(Role::User) => request_entries(middle, max_chars / 4),
            // A harness's instructions name no error the agent met.
            Some(Role::System) => Vec::new(),
            _ => error_entries(middle, errors, PLACES_CHARS),
        };
        push_lines(&mut content, &lines);
        content.push('\n');
        content.push_str(tail);
        image_references(event, &mut content);
        content
    });
    reduced_message(event, content, Projection::Preview)
}

/// An event shown only by its observation reference, and at most `errors` error lines of its
/// text. `chars` is the event's [`content_chars`]. Its `tokens` are left for the caller.
pub fn reference_message(event: &Event, chars: i64, errors: usize) -> ViewMessage<'_> {
    referenced(event, chars, errors, ShownAs::Reference, |total, uri| {
        format!("[{total} characters offloaded; recall {uri}]")
    })
}

/// A tool result the episodic policy archived: one line naming the tool and the observation's
/// reference, and the error lines it had. The turn that made the calls keeps its text and
/// shows long arguments by reference ([`archived_calls_message`]); other archived items show
/// as their reference.
pub fn archived_message(event: &Event, chars: i64, errors: usize) -> ViewMessage<'_> {
    match &event.body {
        EventBody::Message(message) if message.role == Role::Tool => {
            let tool = message.name.as_deref().unwrap_or("tool");
            referenced(event, chars, errors, ShownAs::Archived, |total, uri| {
                format!("[{tool} result archived, {total} characters; recall {uri}]")
            })
        }
        EventBody::Message(message) if !message.tool_calls.is_empty() => {
            archived_calls_message(event, chars, errors)
        }
        _ => reference_message(event, chars, errors),
    }
}

/// An event shown as the line `head` writes from its characters and its reference, then at
/// most `errors` error lines of its text and a line for each image.
fn referenced(
    event: &Event,
    chars: i64,
    errors: usize,
    kind: ShownAs,
    head: impl Fn(i64, ObservationUri) -> String,
) -> ViewMessage<'_> {
    let errors = errors_named(event, errors);
    let content = event.derived.shown(kind, [0, errors as i64, chars], || {
        let (text, total) = shown_text(event, chars);
        let mut content = head(total, ObservationUri(event.seq));
        push_lines(&mut content, &error_entries(&text, errors, PLACES_CHARS));
        image_references(event, &mut content);
        content
    });
    let mut message = reduced_message(event, content, Projection::Reference);
    // A call's long arguments go by reference too: an item shown by reference is small.
    if has_long_arguments(event) {
        message.tool_calls = Cow::Owned(archived_calls(event));
    }
    message
}

/// The summary message: the running summary and its anchors. None when nothing was folded.
/// Items shown reduced carry their own observation reference where they stand, so the message
/// does not list them: offloading at the view's end never rewrites its start.
pub fn summary_message(
    summary: &Summary,
    max_chars: usize,
    tokenizer: Tokenizer,
) -> Option<ViewMessage<'static>> {
    let said = summary.text.trim();
    if said.is_empty() {
        return None;
    }
    let mut text = String::with_capacity(SUMMARY_HEADER.len() + said.len() + 1_024);
    text.push_str(SUMMARY_HEADER);
    text.push_str("\n\n");
    text.push_str(said);
    anchors::push_anchors(&mut text, said, &summary.anchors);
    // Bound what the anchors add, like the summary itself.
    text::cut_marked(&mut text, max_chars + 2_000, "\n[…]");
    Some(ctxd_message(text, tokenizer))
}

/// The memory message: the agent's last condensation, shown right after the summary.
pub fn memory_message(memory: &Memory, tokenizer: Tokenizer) -> ViewMessage<'static> {
    ctxd_message(memory.condensation.render(), tokenizer)
}

/// A user message ctxd writes into the view (the summary, the memory), of no event, counted.
fn ctxd_message(text: String, tokenizer: Tokenizer) -> ViewMessage<'static> {
    let mut message = ViewMessage {
        seq: None,
        role: Role::User,
        content: Cow::Owned(text),
        tool_calls: Cow::Borrowed(&[]),
        parts: Cow::Borrowed(&[]),
        reasoning: false,
        tool_call_id: None,
        name: None,
        is_error: false,
        projection: Projection::Summary,
        tokens: 0,
    };
    message.tokens = message.cost(tokenizer);
    message
}

/// A result for a call whose result is not in the view.
pub fn placeholder_result(
    call: &ToolCall,
    observation: Option<i64>,
    tokenizer: Tokenizer,
) -> ViewMessage<'_> {
    let content = match observation {
        Some(seq) => format!(
            "[tool result unavailable: context was compacted; recall {}]",
            ObservationUri(seq)
        ),
        None => "[tool result unavailable: no result was recorded for this call]".to_owned(),
    };
    let mut message = ViewMessage {
        seq: None,
        role: Role::Tool,
        content: Cow::Owned(content),
        tool_calls: Cow::Borrowed(&[]),
        parts: Cow::Borrowed(&[]),
        reasoning: false,
        tool_call_id: Some(Cow::Borrowed(&call.id)),
        name: Some(Cow::Borrowed(&call.name)),
        is_error: false,
        projection: Projection::Reference,
        tokens: 0,
    };
    message.tokens = message.cost(tokenizer);
    message
}

#[cfg(test)]
mod tests {
    use super::errors::error_shape;
    use super::*;

    /// The error lines of `text`, without how many times each was printed.
    fn error_lines(text: &str, max: usize) -> Vec<&str> {
        let lines = super::errors::error_lines(text, max).into_iter();
        lines.map(|(line, _)| line).collect()
    }

    #[test]
    fn an_error_printed_again_with_other_numbers_or_colours_is_one_entry_that_says_how_often() {
        let output = "[Worker 0] API ERROR: (node:2174) Warning: The 'NO_COLOR' env is ignored\n\
            [Worker 1] API ERROR: (node:8425) Warning: The 'NO_COLOR' env is ignored\n\
            \u{1b}[1A\u{1b}[2K[Worker 1] API ERROR: (node:47944) Warning: The 'NO_COLOR' env is ignored\n\
            Error: \u{1b}[2mexpect(\u{1b}[22m\u{1b}[31mreceived\u{1b}[39m\u{1b}[2m).toBe\u{1b}[22m\n\
            src/a.c:12:5: error: expected ';'\n\
            src/a.c:14:5: error: expected ';'\n\
            \u{1b}[1m\u{1b}[91merror\u{1b}[0m\u{1b}[1m: could not compile `app`\u{1b}[0m\n\
            error: 2 tests failed";
        assert_eq!(
            error_entries(output, 10, PLACES_CHARS),
            [
                "[Worker 0] API ERROR: (node:2174) Warning: The 'NO_COLOR' env is ignored (seen 3 times)",
                "Error: expect(received).toBe",
                // A compiler's message at two places is one entry naming both places.
                "src/a.c: error: expected ';' (at 12:5, 14:5)",
                // Read as it shows, without its colours.
                "error: could not compile `app`",
                "error: 2 tests failed",
            ]
        );
        // Lines that differ in more than their numbers are two errors.
        let two = "error: no field `a` on type `T1`\nerror: no method `a` on type `T2`";
        assert_eq!(error_entries(two, 10, PLACES_CHARS).len(), 2);
    }

    proptest::proptest! {
        #[test]
        fn previews_cut_ascii_as_any_text(
            text in "[ab\n]{0,300}|[aé→\n]{0,300}",
            max_chars in 0usize..400,
        ) {
            proptest::prop_assert_eq!(head_of(&text, max_chars), head_of_chars(&text, max_chars));
        }
    }

    #[test]
    fn a_numbered_line_of_a_file_read_is_source_not_an_error() {
        let read = "    58→    if (!ok) {\n    59→        printf(\"ASSERTION FAILED: %s\\n\", x);\n   60\tfputs(\"error: bad\", f);";
        assert_eq!(error_lines(read, 10), Vec::<&str>::new());
        // `grep -n` or `rg -n` on one file: the line number, a colon, the indented code.
        let search = "559:        except Exception: pass\n561:\tthrow new Error(\"bad\");";
        assert_eq!(error_lines(search, 10), Vec::<&str>::new());
        let run =
            "tests/t.c:59: ASSERTION FAILED: x\nerror: 2 tests failed\n3: error: no such file";
        assert_eq!(
            error_lines(run, 10),
            [
                "tests/t.c:59: ASSERTION FAILED: x",
                "error: 2 tests failed",
                "3: error: no such file"
            ]
        );
    }

    #[test]
    fn code_that_names_an_error_is_source_not_an_error_line() {
        // As `rg -n` shows it, as a file read shows it, and as a diff shows it.
        let code = [
            "app/api/vault/init/route.ts:59:        { error: \"Vault already initialized\" },",
            "src/lib.rs:12:pub fn api_key(&self) -> crate::error::Result<String> {",
            "  23 |         return Err(Error::new(kind));",
            "return NextResponse.json({ error: \"Payroll run not found\" }, { status: 404 });",
            "console.error(\"List auditors error:\", error);",
            "} catch (error: any) {",
            "error: string | null;",
            "{ error: error.message || \"Failed to register auditor\" },",
            "+    error: vaultError,",
            "-      console.error(\"Import error:\", err)",
            "error!(error = %e, \"Failed to start server\");",
            "echo 'Error: --number requires a value' >&2",
            "except json.JSONDecodeError:",
            "use thiserror::Error;",
            "test error::tests::formats_the_default_plan ... ok",
        ];
        assert_eq!(error_lines(&code.join("\n"), 100), Vec::<&str>::new());
        let run = [
            "src/a.c:12:5: error: expected ';' before '}' token",
            "app.py:3: error: Incompatible return value type (got \"int\", expected \"str\")",
            "x.go:3:1: syntax error: unexpected {",
            "error[E0599]: no method named `query` found for struct `RequestBuilder`",
            "error: could not compile `app` (lib) due to 5 previous errors; 2 warnings emitted",
            "E   json.decoder.JSONDecodeError: Expecting ',' delimiter: line 221 column 9",
            "test shell::tests::detects_zsh ... FAILED",
            "+ CategoryInfo : ParserError: (:) [], ParentContainsErrorRecordException",
            "Error: listen EADDRINUSE: address already in use :::3000",
        ];
        assert_eq!(error_lines(&run.join("\n"), 100), run);
    }

    #[test]
    fn a_field_for_errors_that_holds_none_or_names_its_type_is_no_error_line() {
        // A schema, a type, a record printed: the field says what an error would be, or that
        // there is none.
        let fields = [
            "error_reason: VARCHAR",
            "grounding_error: VARCHAR(255)",
            "error: str | None",
            "error_reason: str | None = None",
            "Errors: []",
            "last_error: null",
            "fail_ci_if_error: false",
            "accumulated_errors: list[str]",
        ];
        assert_eq!(error_lines(&fields.join("\n"), 100), Vec::<&str>::new());
        // A field that holds an error, a log's level and an exception's name say what went
        // wrong, whatever follows.
        let run = [
            "last_error: connection refused",
            "error: expected type, found `None`",
            "ERROR: null",
            "TypeError: None",
            "Error: undefined",
            "error_reason: str | None but got int",
        ];
        assert_eq!(error_lines(&run.join("\n"), 100), run);
    }

    #[test]
    fn an_exception_raised_is_an_error_line_and_code_or_prose_naming_one_is_not() {
        let output = "except Exception as e:\n\
            internal sealed class FormulaParseException : Exception\n\
            throw new ArgumentOutOfRangeException(nameof(row));\n\
            - **Exception policy**: an exception must expire within 14 days\n\
            from .exceptions import AuthenticationError\n\
            TimeoutException: The operation has timed out.\n\
            LH:dom-size-insight:warn Caught exception: CHROME_INTERSTITIAL_ERROR\n\
            Exception in thread \"main\" java.lang.NullPointerException\n\
            + CategoryInfo : ObjectNotFound: (cal:String) [], CommandNotFoundException";
        assert_eq!(
            error_lines(output, 10),
            [
                "TimeoutException: The operation has timed out.",
                "LH:dom-size-insight:warn Caught exception: CHROME_INTERSTITIAL_ERROR",
                "Exception in thread \"main\" java.lang.NullPointerException",
                "+ CategoryInfo : ObjectNotFound: (cal:String) [], CommandNotFoundException"
            ]
        );
    }

    proptest::proptest! {
        /// A compiler's or a linter's error at a place reads as an error line whatever its
        /// message holds, even where the message ends as code would (`unexpected {`,
        /// `expected ';'`): code is told from it by the place's shape, not by its words.
        #[test]
        fn a_diagnostic_at_a_place_is_an_error_line_whatever_its_message(
            path in "(\\./)?[a-z]{1,8}/[a-z_]{1,8}\\.(c|rs|ts|py|go)",
            place in "[1-9][0-9]{0,3}(:[1-9][0-9]?)?",
            severity in "error|fatal error|syntax error|error\\[E0[0-9]{3}\\]",
            message in "[a-z';{}(),\\[ ]{1,40}",
        ) {
            let line = format!("{path}:{place}: {severity}: {message}");
            proptest::prop_assert!(reads_as_error(&line), "{}", line);
        }

        /// The search for error lines finds every line that reads as one, in lower, capitalised
        /// or upper case: `ERROR: not built` is an error line as much as `error: not built`.
        #[test]
        fn error_lines_are_every_line_that_reads_as_an_error(
            lines in proptest::collection::vec(
                "(  )?(ok|error|Error|ERROR|FAILED|panicked at|exception|Exception|EXCEPTION)(:|\\[E1\\])? [a-z]{1,12}( \\(pid [0-9]{1,3}\\))?",
                0..30,
            ),
        ) {
            let text = lines.join("\n");
            let mut expected: Vec<&str> = Vec::new();
            let mut shapes = Vec::new();
            let mut printed = 0;
            for line in text.lines().map(str::trim) {
                if reads_as_error(line) {
                    printed += 1;
                    if !shapes.contains(&error_shape(line)) {
                        expected.push(line);
                        shapes.push(error_shape(line));
                    }
                }
            }
            proptest::prop_assert_eq!(error_lines(&text, 100), expected);
            // Every line printed is counted once, under the first line of its shape.
            let counted: usize = super::errors::error_lines(&text, 100).iter().map(|l| l.1).sum();
            proptest::prop_assert_eq!(counted, printed);
        }
    }

    /// A shell's result event at `seq` with `output` as its content.
    fn shell_result(seq: i64, output: &str) -> Event {
        Event {
            seq,
            id: None,
            body: EventBody::Message(crate::domain::event::Message {
                role: Role::Tool,
                content: output.into(),
                tool_calls: Vec::new(),
                tool_call_id: Some("c".into()),
                name: Some("shell".into()),
                is_error: None,
            }),
            pinned: false,
            metadata: None,
            tokens: 0,
            created_at: chrono::DateTime::UNIX_EPOCH,
            derived: Default::default(),
        }
    }

    /// The text of a reduced item is kept with the event: shown again as another projection,
    /// at another size or naming another number of error lines, it reads as the same event read
    /// afresh shows it.
    #[test]
    fn a_reduced_text_kept_with_an_event_is_what_a_fresh_copy_shows() {
        let output: String = (0..60)
            .map(|i| format!("ok {i}\nerror[E{i:04}]: at src/m{i}.rs\n"))
            .collect();
        let event = shell_result(7, &output);
        let chars = content_chars(&event);
        type Render = fn(&Event, i64, usize) -> ViewMessage<'_>;
        let renders: [(&str, Render); 4] = [
            ("reference", reference_message),
            ("preview", |e, c, n| preview_message(e, 200, c, n)),
            ("wider preview", |e, c, n| preview_message(e, 900, c, n)),
            ("excerpt", |e, c, n| excerpt_message(e, 600, c, n)),
        ];
        for max in [4, 31, 2, 48, 4] {
            for (name, render) in renders {
                let kept = render(&event, chars, max).content.into_owned();
                let fresh = Event {
                    derived: Default::default(),
                    ..event.clone()
                };
                let found = render(&fresh, chars, max).content.into_owned();
                assert_eq!(kept, found, "{name} naming {max}");
                let named = kept.lines().filter(|l| l.starts_with("error[")).count();
                assert!(named >= max.min(20), "{name} named {named} of {max}");
            }
        }
    }

    /// A reduced item's text is made once: shown again with the same sizes, the view borrows
    /// the text kept with the event instead of cutting and searching the output again (what
    /// keeps a view of many reduced items fast, `benches/compact.rs`).
    #[test]
    fn a_reduced_text_is_made_once_and_borrowed_after() {
        let output = "error: the build failed\n".repeat(400);
        let event = shell_result(9, &output);
        let chars = content_chars(&event);
        type Render = fn(&Event, i64, usize) -> ViewMessage<'_>;
        let renders: [(&str, Render); 4] = [
            ("preview", |e, c, n| preview_message(e, PREVIEW_CHARS, c, n)),
            ("excerpt", |e, c, n| excerpt_message(e, 3_000, c, n)),
            ("reference", reference_message),
            ("archived", archived_message),
        ];
        for (name, render) in renders {
            let first = render(&event, chars, 4).content;
            let again = render(&event, chars, 4).content;
            let (Cow::Borrowed(first), Cow::Borrowed(again)) = (first, again) else {
                panic!("{name}: made again");
            };
            assert!(std::ptr::eq(first, again), "{name}: another copy");
            // Another size is made afresh, and the kept text stays.
            assert!(
                matches!(render(&event, chars, 5).content, Cow::Owned(_)),
                "{name}"
            );
            assert!(
                matches!(render(&event, chars, 4).content, Cow::Borrowed(_)),
                "{name}"
            );
        }
    }

    #[test]
    fn previews_stop_at_the_line_or_character_bound() {
        let many_lines: String = (0..100).map(|i| format!("line {i}\n")).collect();
        let h = head_of(&many_lines, 10_000);
        assert_eq!(h.lines().count(), PREVIEW_LINES);
        let long = "é".repeat(5_000);
        assert_eq!(head_of(&long, 100).chars().count(), 100);
        assert_eq!(head_of("", 100), "");
    }
}
