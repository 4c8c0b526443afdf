//! The facts a session establishes, and whether a view still holds them: paths the agent acted
//! on (in user messages and tool-call arguments, not in the text a call writes into a file),
//! error lines of tool outputs, the user's requests and the constraints they state ("never…",
//! "do not…", "must…"). A fact is kept when its text is in the view's text (verbatim, or in the
//! summary; its words in order, whatever their spacing), or, for a compiler's diagnostic, when a
//! line names its message in its file at its place among others. A line that lists what shares
//! a place (a directory's files, a file's diagnostics) stands for the lines it lists.

use std::collections::{BTreeSet, HashSet};

use serde_json::Value;

use crate::domain::diagnostic::{Group, Located};
use crate::domain::event::{
    instructions_title, is_request, is_slash_command, named_path, reads_documents_only,
    request_text, rule_lines, states_a_rule, walk_strings, without_written_text, words,
    WRITTEN_TEXT_KEYS,
};
use crate::domain::text::{numbers_blanked, output_lines, without_terminal_escapes};
use crate::engine::view::{error_shape, reads_as_error};

/// A session's facts, by kind.
#[derive(Debug, Default, Clone)]
pub struct Facts {
    pub paths: BTreeSet<String>,
    pub errors: BTreeSet<String>,
    pub requests: BTreeSet<String>,
    pub constraints: BTreeSet<String>,
    /// Facts a synthetic session planted (`ctxd synth --facts`), looked for verbatim.
    pub planted: BTreeSet<String>,
    /// The shapes of the error facts, to learn each error once.
    error_shapes: HashSet<String>,
    /// The session's working directory, as its harness last stated it (see [`stated_cwd`]):
    /// a file named by its absolute path under it is the file named by its relative one.
    cwd: Option<String>,
    /// The calls that only read documents ([`reads_documents_only`]): the lines of their
    /// output about errors are the documents' text, no error facts.
    document_reads: HashSet<String>,
}

/// How many facts of each kind a view holds, of how many.
#[derive(Debug, Default, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Kept {
    pub paths: (usize, usize),
    pub errors: (usize, usize),
    pub requests: (usize, usize),
    pub constraints: (usize, usize),
    pub planted: (usize, usize),
}

impl Kept {
    /// Adds `other`'s counts, kind by kind.
    pub fn add(&mut self, other: &Kept) {
        let add = |a: &mut (usize, usize), b: (usize, usize)| *a = (a.0 + b.0, a.1 + b.1);
        add(&mut self.paths, other.paths);
        add(&mut self.errors, other.errors);
        add(&mut self.requests, other.requests);
        add(&mut self.constraints, other.constraints);
        add(&mut self.planted, other.planted);
    }

    /// The share of all facts kept (1 when there are none).
    pub fn share(&self) -> f64 {
        let kinds = [
            self.paths,
            self.errors,
            self.requests,
            self.constraints,
            self.planted,
        ];
        let kept: usize = kinds.iter().map(|k| k.0).sum();
        let all: usize = kinds.iter().map(|k| k.1).sum();
        if all == 0 {
            1.0
        } else {
            kept as f64 / all as f64
        }
    }
}

/// The longest fact kept, in characters: a longer one is cut to it.
const FACT_CHARS: usize = 120;

impl Facts {
    /// No facts learnt yet, besides those a synthetic session planted.
    pub fn planted(planted: impl IntoIterator<Item = String>) -> Self {
        Self {
            planted: planted.into_iter().collect(),
            ..Self::default()
        }
    }

    /// Takes in the facts of one chat message.
    pub fn learn(&mut self, message: &Value) {
        let text = message["content"].as_str().unwrap_or_default();
        match message["role"].as_str() {
            Some("user") => {
                if let Some(cwd) = stated_cwd(text) {
                    self.cwd = Some(cwd.to_owned());
                }
                // What a harness wrote on the user's behalf is no request or constraint, but
                // for a project's instructions it sent: they state constraints.
                let (request, instructions) =
                    (is_request(text), instructions_title(text).is_some());
                if request {
                    // The user's own words, not an IDE's context before them.
                    let request = request_text(text);
                    if let Some(first) = request.lines().map(str::trim).find(|l| !l.is_empty()) {
                        self.requests.insert(cut(first));
                    }
                }
                if request || instructions {
                    let stated = rule_lines(text).filter(|l| states_a_rule(l));
                    self.constraints.extend(stated.map(cut));
                }
                // The files a project's instructions list (a catalogue of skills) are none the
                // agent acted on, unless it does later.
                if !instructions {
                    self.add_paths(paths(text));
                }
            }
            Some("assistant") => {
                for text in acted_on_strings(message) {
                    self.add_paths(paths(&text));
                }
                for call in message["tool_calls"].as_array().into_iter().flatten() {
                    let (name, arguments) = super::input::chat_call(call);
                    let arguments = serde_json::from_str(&arguments).unwrap_or(Value::Null);
                    if reads_documents_only(name, &arguments) {
                        let id = call["id"].as_str().unwrap_or_default();
                        self.document_reads.insert(id.to_owned());
                    }
                }
            }
            Some("tool")
                if message["tool_call_id"]
                    .as_str()
                    .is_some_and(|id| self.document_reads.contains(id)) => {}
            Some("tool") => {
                // An error printed again with other numbers (a process id, a time) is the same
                // fact, as the summary tells it once ([`error_shape`]); a terminal's colours are
                // no part of it.
                let plain = without_terminal_escapes(text);
                for line in output_lines(&plain).filter(|l| reads_as_error(l)) {
                    if self.error_shapes.insert(error_shape(line)) {
                        self.errors.insert(cut(line));
                    }
                }
            }
            _ => {}
        }
    }

    /// Learns `found` as path facts, those under the working directory by their relative path:
    /// one fact, kept where either is named.
    /// A file at the directory's top (`README.md`) keeps its absolute path: a view naming
    /// `docs/README.md` would hold its bare name.
    fn add_paths(&mut self, found: impl Iterator<Item = String>) {
        let cwd = self.cwd.as_deref().map(|cwd| cwd.trim_end_matches('/'));
        let cwd = cwd.filter(|cwd| !cwd.is_empty());
        self.paths.extend(found.map(|path| {
            let relative = cwd
                .and_then(|cwd| path.strip_prefix(cwd)?.strip_prefix('/'))
                .filter(|rest| rest.contains('/'));
            relative.map_or(path.clone(), str::to_owned)
        }));
    }

    /// How many of these facts `view_text` holds.
    pub fn kept_in(&self, view_text: &str) -> Kept {
        self.kept(&self.missed_in(view_text))
    }

    /// How many of these facts a view holds that misses `missed` of them.
    pub fn kept(&self, missed: &Missed) -> Kept {
        let count = |set: &BTreeSet<String>, missed: &[String]| {
            (set.len().saturating_sub(missed.len()), set.len())
        };
        Kept {
            paths: count(&self.paths, &missed.paths),
            errors: count(&self.errors, &missed.errors),
            requests: count(&self.requests, &missed.requests),
            constraints: count(&self.constraints, &missed.constraints),
            planted: count(&self.planted, &missed.planted),
        }
    }

    /// The facts `view_text` does not hold, by kind, in order.
    pub fn missed_in(&self, view_text: &str) -> Missed {
        let plain = without_terminal_escapes(view_text);
        let view_text: &str = &plain;
        // A line that lists what shares a place stands for the lines it lists.
        let listed = expanded_places(view_text);
        let expanded;
        let view_text = if listed.is_empty() {
            view_text
        } else {
            expanded = format!("{view_text}\n{listed}");
            expanded.as_str()
        };
        // A fact kept with its spacing changed is kept: a summary writes a line's runs of
        // spaces (a table's columns, a request typed with two spaces) as one.
        let squeezed_view = squeezed(view_text);
        let holds = |fact: &str| {
            view_text.contains(fact) || squeezed_view.contains(squeezed(fact).as_str())
        };
        let missed = |set: &BTreeSet<String>| set.iter().filter(|f| !holds(f)).cloned().collect();
        // A compiler's diagnostic is kept, too, where a line names its message in its file at
        // its place among others (`src/a.c: error: … (at 12:5, 14:5)`): the same fact, told once
        // for every place.
        let groups: Vec<Group> = view_text
            .lines()
            .filter(|l| l.contains(" (at "))
            .filter_map(|l| Group::parse(l.trim_start_matches(['-', '>', '*', ' '])))
            .collect();
        // An error is kept, too, where the view tells it with other numbers (as the newest of
        // the times it was printed).
        let mut shaped_view: Option<String> = None;
        let mut told_with_other_numbers = |fact: &str| {
            let shaped = shaped_view.get_or_insert_with(|| numbers_blanked(&squeezed_view));
            shaped.contains(numbers_blanked(&squeezed(fact)).as_str())
        };
        let errors = self.errors.iter().filter(|f| {
            !holds(f)
                && match Located::parse(f) {
                    Some(located) => !groups.iter().any(|g| g.names(&located)),
                    None => !told_with_other_numbers(f),
                }
        });
        Missed {
            paths: missed(&self.paths),
            errors: errors.cloned().collect(),
            requests: missed(&self.requests),
            constraints: missed(&self.constraints),
            planted: missed(&self.planted),
        }
    }
}

/// The facts a view does not hold, by kind (`ctxd replay --json` names those of the last view).
#[derive(Debug, Default, Clone, PartialEq, serde::Serialize)]
pub struct Missed {
    pub paths: Vec<String>,
    pub errors: Vec<String>,
    pub requests: Vec<String>,
    pub constraints: Vec<String>,
    pub planted: Vec<String>,
}

/// The lines that lines listing what shares a place stand for, one per line: a directory's
/// files (`in src/: a.c (Edit), b.c (Read)` names `src/a.c` and `src/b.c`) and a file's
/// diagnostics (`in src/a.c: 12:5: error: x; error: y (at 3:1, 4:1)` states
/// `src/a.c:12:5: error: x` and `src/a.c: error: y (at 3:1, 4:1)`).
fn expanded_places(view_text: &str) -> String {
    let mut out = String::new();
    for line in view_text.lines() {
        let line = line.trim_start_matches(['-', '>', '*', ' ']);
        let Some((place, items)) = line.strip_prefix("in ").and_then(|l| l.split_once(": ")) else {
            continue;
        };
        if place.contains(' ') {
            continue;
        }
        if place.ends_with('/') {
            for item in items.split(", ") {
                if let Some((name, _)) = item.split_once(" (") {
                    out.push_str(&format!("{place}{name}\n"));
                }
            }
        } else {
            for item in items.split("; ") {
                let at_place = item.starts_with(|c: char| c.is_ascii_digit());
                let between = if at_place { ":" } else { ": " };
                out.push_str(&format!("{place}{between}{item}\n"));
            }
        }
    }
    out
}

/// `text` with each run of whitespace (line breaks too) written as one space.
fn squeezed(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for word in text.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    out
}

fn cut(text: &str) -> String {
    crate::domain::text::prefix_chars(text, FACT_CHARS).to_owned()
}

/// Words that look like file paths: a `/` and an extension. A word is read as the path it
/// names: without the markup around it (`**src/a.rs**`, `<created>src/a.rs`), the question
/// that ends it (`~/.ssh?`) or the place after it (`src/a.rs:58:13`, `tests/t.py::test_x`), and
/// without a leading `./`.
/// A glob (`src/**/*.rs`, `include/*.{c,h}`) is a search, not a file, and no fact.
fn paths(text: &str) -> impl Iterator<Item = String> + '_ {
    words(text, "\"'`,<>")
        .map(named_path)
        .filter(|w| !w.contains('*'))
        .filter(|w| (3..=200).contains(&w.len()) && w.contains('/') && !w.contains("://"))
        .filter(|w| !is_slash_command(w))
        .filter(|w| w.rsplit('/').next().is_some_and(|name| name.contains('.')))
        // `./lib/a.ex` is the file `lib/a.ex`: one fact, kept where either is named.
        .map(|w| w.trim_start_matches("./"))
        .map(str::to_owned)
}

/// The working directory a harness states in the environment's context it sends as the user
/// (Codex: `<environment_context>` with `<cwd>/home/me/app</cwd>`, alone or after a project's
/// instructions), not a `<cwd>` the user's own words name.
fn stated_cwd(text: &str) -> Option<&str> {
    let (at, _) = text
        .match_indices("<environment_context>")
        .find(|(at, _)| {
            text[..*at].trim_end_matches([' ', '\t']).ends_with('\n')
                || text[..*at].trim().is_empty()
        })?;
    let context = &text[at..];
    let context = context
        .split_once("</environment_context>")
        .map_or(context, |(c, _)| c);
    let (_, rest) = context.split_once("<cwd>")?;
    let (cwd, _) = rest.split_once("</cwd>")?;
    Some(cwd.trim()).filter(|cwd| cwd.starts_with('/'))
}

/// The strings of a message's tool-call arguments as they read, not as their JSON (where a line
/// break is `\n`, part of the word before it): each argument's, or the text that is not JSON.
pub(super) fn argument_strings(message: &Value) -> Vec<String> {
    strings_of_arguments(message, &[])
}

/// The strings of a message's tool-call arguments that may name a file the agent acts on: every
/// string but the text it writes into a file: a Write's content, a patch's added, removed and
/// context lines, a here-document a command writes (`cat <<'EOF' > plan.md`).
fn acted_on_strings(message: &Value) -> Vec<String> {
    let strings = strings_of_arguments(message, &WRITTEN_TEXT_KEYS).into_iter();
    strings
        .map(|s| without_written_text(&s).into_owned())
        .collect()
}

/// The strings of a message's tool-call arguments but those under the `skipped` keys.
fn strings_of_arguments(message: &Value, skipped: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    for call in message["tool_calls"].as_array().into_iter().flatten() {
        let (_, arguments) = super::input::chat_call(call);
        match serde_json::from_str::<Value>(&arguments) {
            Ok(value) => {
                let mut strings = Vec::new();
                walk_strings(&value, skipped, &mut strings);
                out.extend(strings.into_iter().map(str::to_owned));
            }
            Err(_) => out.push(arguments.to_owned()),
        }
    }
    out
}

/// Every string of a rendered view, joined: what the model reads.
pub fn view_text(view: &Value) -> String {
    let mut strings = Vec::new();
    walk_strings(view, &[], &mut strings);
    let mut out = String::with_capacity(strings.iter().map(|s| s.len() + 1).sum());
    for s in strings {
        out.push_str(s);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// An assistant message of one call to `name` with `arguments`, as OpenAI's chat sends it.
    fn call(name: &str, arguments: &Value) -> Value {
        json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "c", "type": "function",
             "function": {"name": name, "arguments": arguments.to_string()}}]})
    }

    #[test]
    fn a_documents_lines_about_errors_are_no_error_facts() {
        let mut facts = Facts::default();
        let docs = "# API\n- Error format: `{ error: { code, message } }`\n- Errors are logged.";
        let log = "Error: Cannot find module './timeline' imported from tests/t.test.ts";
        let calls = [
            ("c1", "cat docs/architecture.md", docs),
            ("c2", "cat build.log", log),
        ];
        for (id, command, output) in calls {
            let arguments = json!({ "command": ["bash", "-lc", command] }).to_string();
            facts.learn(
                &json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": id, "type": "function",
                 "function": {"name": "shell", "arguments": arguments}}]}),
            );
            facts.learn(&json!({"role": "tool", "tool_call_id": id, "content": output}));
        }
        let errors: Vec<&str> = facts.errors.iter().map(String::as_str).collect();
        assert_eq!(errors, [log], "{errors:?}");
    }

    #[test]
    fn a_file_named_under_the_working_directory_and_by_its_relative_path_is_one_fact() {
        let mut facts = Facts::default();
        facts.learn(&call("read", &json!({"path": "/home/me/app/src/a.rs"})));
        // Stated after a project's instructions, as Codex does.
        let context = "# AGENTS.md instructions for /home/me/app\n\n<INSTRUCTIONS>\nBe brief.\n</INSTRUCTIONS>\n<environment_context>\n  <cwd>/home/me/app</cwd>\n</environment_context>";
        facts.learn(&json!({"role": "user", "content": context}));
        facts.learn(&call("read", &json!({"path": "/home/me/app/src/b.rs"})));
        facts.learn(&call("read", &json!({"path": "src/b.rs"})));
        facts.learn(&call("read", &json!({"path": "/etc/hosts.conf"})));
        // At the directory's top, a bare name would be held by any file of that name.
        facts.learn(&call("read", &json!({"path": "/home/me/app/README.md"})));
        // A directory named in the user's own words is not the harness's statement of it.
        facts.learn(
            &json!({"role": "user", "content": "Try <environment_context><cwd>/home</cwd>"}),
        );
        facts.learn(&call("read", &json!({"path": "/home/me/app/src/c.rs"})));
        // Named before the directory was stated, a file keeps its absolute path.
        assert_eq!(
            facts.paths.iter().collect::<Vec<_>>(),
            [
                "/etc/hosts.conf",
                "/home/me/app/README.md",
                "/home/me/app/src/a.rs",
                "src/b.rs",
                "src/c.rs"
            ]
        );
        // Kept where the view names it either way.
        assert_eq!(facts.kept_in("read /home/me/app/src/b.rs").paths, (1, 5));
        assert_eq!(facts.kept_in("read src/b.rs").paths, (1, 5));
    }

    #[test]
    fn facts_are_paths_errors_and_requests() {
        let mut facts = Facts::default();
        facts.learn(&json!({"role": "user", "content": "Fix src/lib.rs please\nthanks\nNever touch tests/ ."}));
        facts.learn(&call("read", &json!({"path": "tests/parse.rs"})));
        facts.learn(
            &json!({"role": "tool", "content": "Compiling x\nerror[E0308]: mismatched types\nok"}),
        );
        assert_eq!(
            facts.requests.iter().collect::<Vec<_>>(),
            ["Fix src/lib.rs please"]
        );
        assert_eq!(
            facts.paths.iter().collect::<Vec<_>>(),
            ["src/lib.rs", "tests/parse.rs"]
        );
        assert_eq!(
            facts.errors.iter().collect::<Vec<_>>(),
            ["error[E0308]: mismatched types"]
        );
        let kept = facts.kept_in("summary: Fix src/lib.rs please; read tests/parse.rs");
        assert_eq!(kept.paths, (2, 2));
        assert_eq!(kept.errors, (0, 1));
        assert_eq!(
            facts.constraints.iter().collect::<Vec<_>>(),
            ["Never touch tests/ ."]
        );
        assert_eq!(kept.constraints, (0, 1));
        assert!((kept.share() - 0.6).abs() < 1e-9);
    }

    /// The skills catalogue a harness writes into a project's instructions holds no fact of
    /// the user's rules; the project's own rules do.
    #[test]
    fn a_harness_skills_catalogue_is_no_constraint() {
        let mut facts = Facts::default();
        let instructions = "# AGENTS.md instructions for /home/me/app\n\n<INSTRUCTIONS>\n\
            - Never push to main.\n## Skills\n\
            A skill is a set of local instructions to follow that is stored in a `SKILL.md` file.\n\
            ### How to use skills\n- Trigger rules: you must use that skill for that turn.\n\
            </INSTRUCTIONS>";
        facts.learn(&json!({"role": "user", "content": instructions}));
        assert_eq!(
            facts.constraints.iter().collect::<Vec<_>>(),
            ["Never push to main."]
        );
    }

    /// A rule the user wrote as a list item is its words: a view that lists it under another
    /// marker keeps it.
    #[test]
    fn a_constraint_is_kept_under_any_list_marker() {
        let mut facts = Facts::default();
        facts.learn(&json!({"role": "user", "content": "Rules:\n- Never push to main\n2. Always run the tests"}));
        assert_eq!(
            facts.constraints.iter().collect::<Vec<_>>(),
            ["Always run the tests", "Never push to main"]
        );
        let kept = facts.kept_in("## Constraints\n* Never push to main\n- Always run the tests");
        assert_eq!(kept.constraints, (2, 2));
    }

    #[test]
    fn a_fact_is_kept_with_its_spacing_changed_not_with_its_words_changed() {
        let mut facts = Facts::default();
        facts.learn(&json!({"role": "user", "content": "1.  audit the  firewall"}));
        facts.learn(&json!({"role": "tool",
            "content": "    + CategoryInfo          : ObjectNotFound: (Get-Acl:String) [], CommandNotFoundException"}));
        let summary = "## Later user requests\n- 1. audit the firewall\n## Errors seen\n- + CategoryInfo : ObjectNotFound: (Get-Acl:String) [],\n  CommandNotFoundException";
        let kept = facts.kept_in(summary);
        assert_eq!((kept.requests, kept.errors), ((1, 1), (1, 1)));
        let kept = facts
            .kept_in("- 1. audit the router\n- + CategoryInfo : ObjectNotFound: (Get-Item:String)");
        assert_eq!((kept.requests, kept.errors), ((0, 1), (0, 1)));
    }

    #[test]
    fn a_diagnostic_is_kept_where_its_message_is_named_at_its_place() {
        let mut facts = Facts::default();
        let build = "src/t.c:84:11: error: invalid use of ‘t’\nsrc/t.c:85:11: error: invalid use of ‘t’\nsrc/t.c:90:2: error: no member named ‘data’";
        facts.learn(&json!({"role": "tool", "content": build}));
        let summary = "## Errors seen\n- src/t.c: error: invalid use of ‘t’ (at 84:11, 85:11)\n- src/t.c: error: no member named ‘data’ (at 91:2, 92:2)";
        assert_eq!(facts.kept_in(summary).errors, (2, 3));
        // A place alone, or the message elsewhere, is not the fact.
        assert_eq!(
            facts
                .kept_in("84:11 85:11 90:2; error: invalid use of ‘t’")
                .errors,
            (0, 3)
        );
    }

    #[test]
    fn paths_are_read_from_the_arguments_strings_not_their_json() {
        let mut facts = Facts::default();
        let command = "cat src/a.rs\nls src/b.rs";
        facts.learn(&call("bash", &json!({"command": command, "cwd": "/w"})));
        assert_eq!(
            facts.paths.iter().collect::<Vec<_>>(),
            ["src/a.rs", "src/b.rs"]
        );
    }

    #[test]
    fn the_text_a_call_writes_into_a_file_names_no_path_acted_on() {
        let mut facts = Facts::default();
        let content = "#include <vsla/core.h>\nsee /path/to/your.db";
        let write = json!({"file_path": "src/c.rs", "content": content}).to_string();
        let edit = json!({"file_path": "src/d.rs", "edits": [
            {"old_string": "use a/b.rs;", "new_string": "use a/c.rs;"}]})
        .to_string();
        facts.learn(
            &json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "w", "type": "function", "function": {"name": "Write", "arguments": write}},
            {"id": "e", "type": "function", "function": {"name": "MultiEdit", "arguments": edit}}]}),
        );
        assert_eq!(
            facts.paths.iter().collect::<Vec<_>>(),
            ["src/c.rs", "src/d.rs"]
        );
    }

    #[test]
    fn a_slash_command_the_user_runs_is_no_path() {
        let mut facts = Facts::default();
        facts.learn(&json!({"role": "user", "content": "/speckit.plan then fix /docs/a.md"}));
        assert_eq!(facts.paths.iter().collect::<Vec<_>>(), ["/docs/a.md"]);
    }

    #[test]
    fn a_here_document_written_into_a_file_names_no_path_acted_on() {
        let mut facts = Facts::default();
        let plan = "cat <<'EOF' > specs/plan.md\n- `app/(auth)/signup/page.tsx`: the form\nEOF\n\
                    python - <<'PY'\nopen('data/in.csv')\nPY";
        facts.learn(&call("shell", &json!({"command": ["bash", "-lc", plan]})));
        let page = "sed -n '1,40p' app/(auth)/login/page.tsx";
        facts.learn(&call("shell", &json!({"command": page})));
        assert_eq!(
            facts.paths.iter().collect::<Vec<_>>(),
            ["app/(auth)/login/page.tsx", "data/in.csv", "specs/plan.md"]
        );
    }

    #[test]
    fn a_patch_names_the_files_it_changes_not_those_its_lines_name() {
        let mut facts = Facts::default();
        let patch = "cd web && apply_patch <<'PATCH'\n*** Begin Patch\n*** Update File: app/page.tsx\n\
            @@\n-  <img src=\"/logo/old.png\" />\n+  <img src=\"/logo/new.png\" className=\"bg-white/[0.05]\" />\n\
            *** Move to: app/home.tsx\n*** End Patch\nPATCH\ngit diff --stat docs/a.md";
        facts.learn(&call("shell", &json!({"command": ["bash", "-lc", patch]})));
        let diff = "git apply <<'EOF'\n--- a/src/x.rs\n+++ b/src/x.rs\n@@ -1 +1 @@\n-use y/z.rs;\n+use y/w.rs;\nEOF";
        facts.learn(&call("shell", &json!({"command": diff})));
        assert_eq!(
            facts.paths.iter().collect::<Vec<_>>(),
            [
                "a/src/x.rs",
                "app/home.tsx",
                "app/page.tsx",
                "b/src/x.rs",
                "docs/a.md"
            ]
        );
    }

    #[test]
    fn a_path_is_the_file_a_word_names_without_its_markup_or_place() {
        let mut facts = Facts::default();
        let text = "Changed **lib/a.ex** and <created>lib/b.ts</created>; see lib/c.ex:58:13, \
                    tests/t.py::test_x, ~/.ssh/id.pub? and **/*.json; **lib/d.ex**: and \
                    ../shared/e.rs. Then ./lib/a.ex and ./lib/f.ex.";
        facts.learn(&json!({"role": "user", "content": text}));
        assert_eq!(
            facts.paths.iter().collect::<Vec<_>>(),
            [
                "../shared/e.rs",
                "lib/a.ex",
                "lib/b.ts",
                "lib/c.ex",
                "lib/d.ex",
                "lib/f.ex",
                "tests/t.py",
                "~/.ssh/id.pub"
            ]
        );
        // The summary's plain `lib/a.ex` keeps the fact the emphasised word named, and
        // `./lib/a.ex` is the same file. `**/*.json` is a glob: no file, no fact.
        assert_eq!(facts.kept_in("- lib/a.ex (last: Edit)").paths, (1, 8));
        assert_eq!(facts.kept_in("- ./lib/f.ex (last: Edit)").paths, (1, 8));
    }

    #[test]
    fn a_glob_is_a_search_not_a_path_acted_on() {
        let mut facts = Facts::default();
        for (name, arguments) in [
            ("Glob", json!({"pattern": "include/**/*.{c,h}"})),
            ("bash", json!({"command": "ls src/*.rs && cat src/main.rs"})),
        ] {
            facts.learn(&call(name, &arguments));
        }
        facts.learn(&json!({"role": "user", "content": "look at docs/*.md and docs/a.md"}));
        assert_eq!(
            facts.paths.iter().collect::<Vec<_>>(),
            ["docs/a.md", "src/main.rs"]
        );
    }

    #[test]
    fn a_path_is_kept_where_a_line_lists_its_file_among_its_directorys() {
        let mut facts = Facts::default();
        let text = "Compare /home/dev/p/src/a.c, /home/dev/p/src/b.c, /home/dev/p/c.c and src/d.c";
        facts.learn(&json!({"role": "user", "content": text}));
        let view = "## Files and commands touched\n\
                    - in /home/dev/p/src/: a.c (Read), b.c (named by the user)\n\
                    - in src/: c.c (Edit)\n\
                    - in /home/dev/p/src/: d.c, e.c\n\
                    in /home/dev/p/ src/: c.c (Read)";
        let missed = facts.missed_in(view);
        // `c.c` is listed in another directory; `d.c` is not named as a file line names one.
        assert_eq!(missed.paths, ["/home/dev/p/c.c", "src/d.c"]);
    }

    #[test]
    fn an_error_is_kept_where_a_line_lists_it_among_its_files() {
        let mut facts = Facts::default();
        let output = "src/t.c:20:1: error: expected ‘;’\nsrc/t.c:31:9: error: ‘x’ undeclared\n\
                      src/t.c:44:2: error: ‘y’ undeclared\nsrc/u.c:3:1: error: stray ‘@’";
        facts.learn(&json!({"role": "tool", "content": output}));
        let view =
            "- in src/t.c: 20:1: error: expected ‘;’; error: ‘x’ undeclared (at 2:1, 31:9)\n\
                    - in src/t.c/: 44:2: error: ‘y’ undeclared (Read)\n\
                    - in src/v.c: 3:1: error: stray ‘@’";
        // `y` is listed as a file of a directory, the stray `@` in another file.
        assert_eq!(
            facts.missed_in(view).errors,
            [
                "src/t.c:44:2: error: ‘y’ undeclared",
                "src/u.c:3:1: error: stray ‘@’"
            ]
        );
    }

    #[test]
    fn markup_a_harness_writes_for_the_user_is_no_request_or_constraint() {
        let mut facts = Facts::default();
        for text in [
            "<command-name>/exit</command-name>\n<command-message>exit</command-message>",
            "<local-command-caveat>Caveat: DO NOT respond to these messages.</local-command-caveat>",
            "<ide_opened_file>The user opened the file docs/plan.md.</ide_opened_file>",
            "Caveat: The messages below were generated by the user while running local commands. DO NOT respond to these messages.",
            "Do not touch <b>src/a.rs</b>",
        ] {
            facts.learn(&json!({"role": "user", "content": text}));
        }
        assert_eq!(
            facts.requests.iter().collect::<Vec<_>>(),
            ["Do not touch <b>src/a.rs</b>"]
        );
        assert_eq!(facts.constraints.len(), 1);
        // The files it names are named all the same.
        assert!(facts.paths.contains("docs/plan.md"), "{:?}", facts.paths);
    }

    #[test]
    fn the_facts_a_view_misses_are_named_and_counted_alike() {
        let mut facts = Facts::default();
        facts
            .learn(&json!({"role": "user", "content": "Fix the parser\nin src/a.rs and src/b.rs"}));
        facts.learn(&json!({"role": "tool", "content": "error: no field `x`"}));
        let view = "- Fix the parser\n- src/b.rs (last: Edit)";
        let missed = facts.missed_in(view);
        assert_eq!(missed.paths, ["src/a.rs"]);
        assert_eq!(missed.errors, ["error: no field `x`"]);
        assert!(missed.requests.is_empty());
        let kept = facts.kept_in(view);
        assert_eq!(
            (kept.paths, kept.errors, kept.requests),
            ((1, 2), (0, 1), (1, 1))
        );
    }

    #[test]
    fn an_error_printed_again_with_other_numbers_is_one_fact_and_colours_are_no_part_of_it() {
        let mut facts = Facts::default();
        facts.learn(&json!({"role": "tool", "content":
            "[Worker 0] API ERROR: (node:2174) Warning: NO_COLOR is ignored\n\
             [Worker 1] API ERROR: (node:8425) Warning: NO_COLOR is ignored\n\
             Error: \u{1b}[2mexpect(\u{1b}[22mreceived).toBe\u{1b}[22m\n\
             src/a.c:12:5: error: expected ';'\nsrc/a.c:14:5: error: expected ';'"}));
        facts.learn(&json!({"role": "tool", "content":
            "[Worker 3] API ERROR: (node:97083) Warning: NO_COLOR is ignored"}));
        assert_eq!(facts.errors.len(), 4, "{:?}", facts.errors);
        assert!(facts.errors.contains("Error: expect(received).toBe"));
        // Told once as the newest, with its count; the colours as printed are the same fact.
        let view =
            "[Worker 3] API ERROR: (node:97083) Warning: NO_COLOR is ignored (seen 3 times)\n\
                    Error: \u{1b}[2mexpect(\u{1b}[22mreceived).toBe\n\
                    src/a.c:12:5: error: expected ';'";
        let missed = facts.missed_in(view);
        // A compiler's message at another place is another fact: its place is not a number to
        // blank.
        assert_eq!(missed.errors, ["src/a.c:14:5: error: expected ';'"]);
        // Another message is another fact.
        assert_eq!(
            facts
                .missed_in("[Worker 3] API ERROR: (node:1) Warning: FORCE_COLOR is set")
                .errors
                .len(),
            4
        );
    }
}
