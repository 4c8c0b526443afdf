use super::*;
use crate::domain::FieldError;
use serde_json::json;

fn validate(v: Value) -> Result<NewEvent, Vec<FieldError>> {
    serde_json::from_value::<EventInput>(v).unwrap().validate(3)
}

fn fields(v: Value) -> Vec<String> {
    validate(v)
        .expect_err("expected a validation error")
        .into_iter()
        .map(|e| {
            assert_eq!(e.index, Some(3));
            e.field
        })
        .collect()
}

#[test]
fn a_valid_message_of_each_role() {
    for role in ["system", "user", "assistant"] {
        let e = validate(json!({"type": "message", "role": role, "content": "hi"})).unwrap();
        assert_eq!(e.body.role().unwrap().as_str(), role);
    }
    let e = validate(json!({"type":"message","role":"tool","tool_call_id":"c1","content":"ok"}))
        .unwrap();
    assert_eq!(e.body.tool_call_id(), Some("c1"));
    let EventBody::Message(m) = e.body else {
        panic!()
    };
    assert_eq!(
        m.is_error,
        Some(false),
        "a tool result's is_error defaults to false"
    );
}

#[test]
fn empty_content_only_on_a_tool_result_or_an_assistant_tool_call() {
    let ok = validate(json!({"type":"message","role":"assistant",
        "tool_calls":[{"id":"c1","name":"ls","arguments":"{}"}]}));
    assert!(ok.is_ok());
    for result in [
        json!({"type":"message","role":"tool","tool_call_id":"c1","content":""}),
        json!({"type":"message","role":"tool","tool_call_id":"c1"}),
    ] {
        let event = validate(result).expect("a result with no output is valid");
        assert_eq!(event.body.shown_text(), "");
    }
    assert_eq!(
        fields(json!({"type":"message","role":"user","content":""})),
        ["content"]
    );
    assert_eq!(
        fields(json!({"type":"message","role":"assistant"})),
        ["content"]
    );
    assert_eq!(
        fields(json!({"type":"message","role":"system","content":""})),
        ["content"]
    );
}

#[test]
fn fields_of_other_roles_and_types_are_named() {
    assert_eq!(fields(json!({"type":"message","content":"x"})), ["role"]);
    assert_eq!(
        fields(json!({"type":"message","role":"tool","content":"x"})),
        ["tool_call_id"]
    );
    assert_eq!(
        fields(json!({"type":"message","role":"user","content":"x","tool_call_id":"c"})),
        ["tool_call_id"]
    );
    assert_eq!(
        fields(json!({"type":"message","role":"user","content":"x",
            "tool_calls":[{"id":"c","name":"n"}]})),
        ["tool_calls"]
    );
    assert_eq!(
        fields(json!({"type":"message","role":"assistant",
            "tool_calls":[{"id":"c","name":"n"},{"id":"c","name":""}]})),
        ["tool_calls[1].id", "tool_calls[1].name"]
    );
    assert_eq!(fields(json!({"type":"note","content":""})), ["content"]);
    assert_eq!(
        fields(json!({"type":"note","content":"x","role":"user"})),
        ["role"]
    );
    assert_eq!(fields(json!({"type":"episode_start","name":"e"})), ["kind"]);
    assert_eq!(
        fields(json!({"type":"episode_end","kind":"action"})),
        ["name", "kind"]
    );
    assert_eq!(
        fields(json!({"type":"message","role":"user","content":"x","id":""})),
        ["id"]
    );
}

#[test]
fn ids_names_and_metadata_refuse_the_nul_character() {
    let nul = "a\u{0}b";
    assert_eq!(
        fields(json!({"type":"message","role":"user","content":"x","id":nul})),
        ["id"]
    );
    assert_eq!(
        fields(json!({"type":"message","role":"user","content":"x","name":nul})),
        ["name"]
    );
    assert_eq!(
        fields(json!({"type":"message","role":"tool","content":"x","tool_call_id":nul})),
        ["tool_call_id"]
    );
    assert_eq!(
        fields(json!({"type":"message","role":"assistant",
            "tool_calls":[{"id":"c","name":"n"},{"id":nul,"name":nul}]})),
        ["tool_calls[1].id", "tool_calls[1].name"]
    );
    assert_eq!(
        fields(json!({"type":"episode_start","name":nul,"kind":"action"})),
        ["name"]
    );
    assert_eq!(
        fields(json!({"type":"episode_start","name":"e","kind":"action",
            "dependencies":["a",nul]})),
        ["dependencies[1]"]
    );
    assert_eq!(
        fields(json!({"type":"note","content":"x","metadata":{"a":[1,{"b":nul}]}})),
        ["metadata.a[1].b"]
    );
    assert_eq!(
        fields(json!({"type":"note","content":"x","metadata":{"a":{nul:1}}})),
        [format!("metadata.a.{nul}")]
    );
    // Nor does any text that compaction may copy into its (PostgreSQL `jsonb`) state.
    assert_eq!(
        fields(json!({"type":"message","role":"user","content":nul})),
        ["content"]
    );
    assert_eq!(fields(json!({"type":"note","content":nul})), ["content"]);
    assert_eq!(
        fields(json!({"type":"episode_end","name":"e","conclusion":nul})),
        ["conclusion"]
    );
    assert_eq!(
        fields(json!({"type":"message","role":"assistant",
            "tool_calls":[{"id":"c","name":"n","arguments":nul},
                {"id":"d","name":"n","arguments":{"cmd":[nul]}}]})),
        ["tool_calls[0].arguments", "tool_calls[1].arguments.cmd[0]"]
    );
}

#[test]
fn unknown_type_role_or_field_fails_to_parse() {
    for v in [
        json!({"type":"thought","content":"x"}),
        json!({"type":"message","role":"bot","content":"x"}),
        json!({"type":"message","role":"user","content":"x","colour":"red"}),
    ] {
        assert!(serde_json::from_value::<EventInput>(v).is_err());
    }
}

#[test]
fn stored_form_round_trips_and_is_flat() {
    let e = validate(
        json!({"type":"episode_start","name":"explore","kind":"exploration",
        "dependencies":["setup"],"pinned":true}),
    )
    .unwrap();
    let json = serde_json::to_value(&e.body).unwrap();
    assert_eq!(
        json,
        json!({"type":"episode_start","name":"explore","kind":"exploration","dependencies":["setup"]})
    );
    assert_eq!(serde_json::from_value::<EventBody>(json).unwrap(), e.body);
    assert!(e.pinned);
}

#[test]
fn a_retry_is_the_same_event_whichever_form_its_arguments_take() {
    let call = |arguments: Value| {
        validate(json!({"type": "message", "role": "assistant",
            "tool_calls": [{"id": "c1", "name": "ls", "arguments": arguments}]}))
        .expect("valid")
    };
    let stored = |new: NewEvent| Event {
        seq: 1,
        id: None,
        tokens: 1,
        body: new.body,
        pinned: new.pinned,
        metadata: new.metadata,
        created_at: Utc::now(),
        derived: Default::default(),
    };
    let object = stored(call(json!({"path": "src"})));
    assert!(object.same_as(&call(json!("{\"path\":\"src\"}"))));
    assert!(object.same_as(&call(json!({"path": "src"}))));
    assert!(!object.same_as(&call(json!({"path": "lib"}))));
}

#[test]
fn a_path_in_a_string_of_code_ends_at_the_escaped_line_break_after_it() {
    // A patch passed to a tool in source text, and a shell line continued with a backslash.
    assert_eq!(named_path("src/a.rs\\n+fn"), "src/a.rs");
    assert_eq!(
        named_path("crates/x/src/lib.rs\\n@@\\n-use"),
        "crates/x/src/lib.rs"
    );
    assert_eq!(named_path("./styles.css\\"), "./styles.css");
    assert_eq!(named_path("docs/a.md\\t"), "docs/a.md");
    // A Windows path's backslashes are no escapes; nor is an escape before any `/`.
    assert_eq!(named_path("C:\\Users\\notes.txt"), "C:\\Users\\notes.txt");
    assert_eq!(named_path("\\nsrc/a.rs"), "\\nsrc/a.rs");
}

/// A freeform tool's call is taken with its input as `{"input": text}`, and refused, naming
/// the field, with arguments of any other shape; a function call's kind is left unsaid.
#[test]
fn a_custom_call_holds_its_input_as_text() {
    let custom = |arguments: Value| {
        json!({"type": "message", "role": "assistant",
            "tool_calls": [{"id": "c1", "name": "apply_patch", "kind": "custom", "arguments": arguments}]})
    };
    let new = validate(custom(json!({"input": "*** Begin Patch\n"}))).expect("valid");
    let EventBody::Message(message) = &new.body else {
        panic!("a message")
    };
    assert_eq!(message.tool_calls[0].kind, CallKind::Custom);
    assert_eq!(message.tool_calls[0].custom_input(), "*** Begin Patch\n");
    let stored = serde_json::to_value(&message.tool_calls[0]).unwrap();
    assert_eq!(stored["kind"], "custom");
    for wrong in [
        json!({"patch": "x"}),
        json!({"input": 3}),
        json!("*** Begin Patch"),
    ] {
        assert_eq!(fields(custom(wrong)), ["tool_calls[0].arguments"]);
    }
    let function = validate(json!({"type": "message", "role": "assistant",
        "tool_calls": [{"id": "c1", "name": "ls", "arguments": "{}"}]}))
    .expect("valid");
    let EventBody::Message(message) = &function.body else {
        panic!("a message")
    };
    let stored = serde_json::to_value(&message.tool_calls[0]).unwrap();
    assert!(stored.get("kind").is_none(), "{stored}");
}

/// A call of OpenAI's built-in shell or apply_patch tool holds its action or operation, and is
/// refused, naming the field, with arguments that are neither.
#[test]
fn a_shell_or_apply_patch_call_holds_its_action_or_operation() {
    let call = |kind: &str, arguments: Value| {
        json!({"type": "message", "role": "assistant",
            "tool_calls": [{"id": "c1", "name": kind, "kind": kind, "arguments": arguments.to_string()}]})
    };
    for (kind, arguments) in [
        (
            "shell",
            json!({"commands": ["ls", "cargo test"], "timeout_ms": 1000}),
        ),
        (
            "apply_patch",
            json!({"type": "update_file", "path": "src/a.rs", "diff": "@@\n-a\n+b\n"}),
        ),
        (
            "apply_patch",
            json!({"type": "delete_file", "path": "src/b.rs"}),
        ),
    ] {
        let new = validate(call(kind, arguments.clone())).expect("valid");
        let stored = serde_json::to_value(&new.body.tool_calls()[0]).unwrap();
        assert_eq!(stored["kind"], kind);
        assert_eq!(*new.body.tool_calls()[0].arguments_value(), arguments);
    }
    for (kind, wrong) in [
        ("shell", json!({"command": "ls"})),
        ("shell", json!({"commands": []})),
        ("shell", json!({"commands": [["ls"]]})),
        (
            "apply_patch",
            json!({"type": "update_file", "path": "src/a.rs"}),
        ),
        (
            "apply_patch",
            json!({"type": "rename_file", "path": "src/a.rs", "diff": ""}),
        ),
        ("apply_patch", json!({"diff": "@@"})),
    ] {
        assert_eq!(
            fields(call(kind, wrong)),
            ["tool_calls[0].arguments"],
            "{kind}"
        );
    }
}

#[test]
fn a_slash_command_is_no_path_and_a_file_named_from_a_projects_root_is_one() {
    let text = "Run /speckit.plan then /speckit.tasks; see /README.md and /etc/hosts.conf";
    assert_eq!(
        file_paths(text).collect::<Vec<_>>(),
        ["/README.md", "/etc/hosts.conf"]
    );
}

#[test]
fn a_path_with_a_segment_in_brackets_is_one_path_and_brackets_around_a_path_are_not_its() {
    let text = "Edit app/(auth)/login/page.tsx and (auth)/layout.tsx, then f(src/a.rs) \
                (see docs/b.md) and app/(app)/(nested)/x.ts; not a/(b.ts";
    let paths: Vec<&str> = file_paths(text).collect();
    assert_eq!(
        paths,
        [
            "app/(auth)/login/page.tsx",
            "(auth)/layout.tsx",
            "src/a.rs",
            "docs/b.md",
            "app/(app)/(nested)/x.ts",
        ]
    );
}

#[test]
fn a_here_document_written_into_a_file_goes_and_one_a_program_runs_stays() {
    let cases = [
        (
            "bash -lc cat <<'EOF' > docs/plan.md\nsee src/a.rs\nEOF\ngit add docs/plan.md",
            "bash -lc cat <<'EOF' > docs/plan.md\ngit add docs/plan.md",
        ),
        (
            "cat > notes.md << EOF\nsrc/b.rs\nEOF",
            "cat > notes.md << EOF",
        ),
        (
            "cat <<\\EOF>notes.md\nsrc/b.rs\nEOF",
            "cat <<\\EOF>notes.md",
        ),
        (
            "tee -a log.md <<-END\n\tsrc/c.rs\n\tEND\necho done",
            "tee -a log.md <<-END\necho done",
        ),
        // Two documents on a line, each up to its own delimiter.
        (
            "cat > a.md <<A && python - <<B\nsrc/a.rs\nA\nopen('src/b.rs')\nB\nls src/c.rs",
            "cat > a.md <<A && python - <<B\nopen('src/b.rs')\nB\nls src/c.rs",
        ),
    ];
    for (command, without) in cases {
        assert_eq!(without_written_text(command), without, "{command}");
    }
    // A program's document, a piped `cat`, a here-string, a shift, a `<<` in quotes: what
    // runs, and they stay.
    for kept in [
        "python - <<'PY'\nopen('data/in.csv')\nPY",
        "python - <<'PY' 2>&1 | tee run.log\nopen('data/in.csv')\nPY",
        "cat <<EOF | sh\nrm build/out.o\nEOF",
        "cat <<< src/d.rs > x.md\nsrc/e.rs",
        "echo $((1 << 4)) | tee out.txt\ncat src/main.rs\n4",
        "echo $((x << y)) | tee out.txt\ncat src/main.rs\ny",
        "echo \"a << b\" | tee log.txt\ncat src/main.rs\nb",
    ] {
        assert!(
            matches!(without_written_text(kept), Cow::Borrowed(_)),
            "{kept}"
        );
    }
    // What a command's entry shows: without any document.
    assert_eq!(
        without_here_documents("python - <<'PY'\nprint(1)\nPY\nls", false),
        "python - <<'PY'\nls"
    );
}

proptest::proptest! {
    /// A patch's body goes and what names its files stays: every header line, and every line
    /// around the patch (the command that applies it), in order; a text with no patch is the
    /// text itself.
    #[test]
    fn a_patch_body_goes_and_its_headers_and_surroundings_stay(
        before in proptest::collection::vec("[a-z./ ]{0,20}", 0..4),
        files in proptest::collection::vec("[a-z]{1,6}/[a-z]{1,6}\\.rs", 1..4),
        body in proptest::collection::vec("[-+ ][a-z./{}();]{0,20}", 0..6),
        after in proptest::collection::vec("[a-z./ ]{0,20}", 0..4),
    ) {
        let plain = before.join("\n");
        proptest::prop_assert!(matches!(without_patch_bodies(&plain), Cow::Borrowed(_)));
        let mut lines: Vec<String> = before.clone();
        lines.push("*** Begin Patch".into());
        let mut expected: Vec<String> = lines.clone();
        for file in &files {
            let header = format!("*** Update File: {file}");
            lines.push(header.clone());
            expected.push(header);
            lines.push("@@ fn main".into());
            lines.extend(body.iter().cloned());
        }
        lines.push("*** End Patch".into());
        expected.push("*** End Patch".into());
        lines.extend(after.iter().cloned());
        expected.extend(after.iter().cloned());
        let text = lines.join("\n");
        proptest::prop_assert_eq!(without_patch_bodies(&text).into_owned(), expected.join("\n"));
    }
}

/// A command's template as Spec Kit writes it, with what the user typed after the command.
fn command_template(input: &str) -> String {
    format!(
        "\n## User Input\n\n```text\n{input}\n```\n\nYou **MUST** consider the user input before \
         proceeding (if not empty).\n\n## Outline\n\n1. Run `.specify/scripts/bash/setup-plan.sh \
         --json` from repo root.\n2. Load the spec.\n"
    )
}

#[test]
fn a_request_sent_as_a_commands_template_is_what_the_user_typed_after_the_command() {
    assert_eq!(request_text(&command_template("Phase 5")), "Phase 5");
    let two_lines = command_template("Add auth.\nUse OAuth only.");
    assert_eq!(request_text(&two_lines), "Add auth.\nUse OAuth only.");
    // Nothing typed: the template's own words, from its first instruction on.
    let bare = command_template("");
    let request = request_text(&bare);
    assert!(
        request.starts_with("1. Run `.specify/scripts/bash/setup-plan.sh"),
        "{request}"
    );
    assert!(request.ends_with("2. Load the spec."), "{request}");
    // The heading quoted, or a block that never closes, is the user's own text.
    let quoted = "What does `## User Input` in the template mean?";
    assert_eq!(request_text(quoted), quoted);
    let unclosed = "## User Input\n\n```text\nPhase 5\n";
    assert_eq!(request_text(unclosed), unclosed);
    let unfenced = "## User Input\n\nPhase 5";
    assert_eq!(request_text(unfenced), unfenced);
    // A fence with an info string opens no block and closes none, as in Markdown.
    let nested = "## User Input\n\n```text\nAdd this:\n```json\n{}\n```\n\nYou **MUST** …";
    assert_eq!(request_text(nested), "Add this:\n```json\n{}");
}

#[test]
fn a_request_is_the_words_after_an_ides_heading_or_the_whole_text() {
    let ide = "# Context from my IDE setup:\n\n## Open tabs:\n- a.ts\n\n## My request for Codex:\nfix it\n";
    assert_eq!(request_text(ide), "fix it\n");
    assert_eq!(request_text("\n## My request for Codex:\nfix it"), "fix it");
    // Named inside a line, or with nothing after it, the heading is the user's own text.
    let quoted = "what does `## My request for Codex:` mean?";
    assert_eq!(request_text(quoted), quoted);
    let both = format!("# Context:\n- tab: {quoted}\n## My request for Codex:\nfix it");
    assert_eq!(request_text(&both), "fix it");
    let bare = "## My request for Codex:\n  ";
    assert_eq!(request_text(bare), bare);
    assert_eq!(request_text("fix it"), "fix it");
}

#[test]
fn a_projects_instructions_from_the_harness_are_no_request() {
    let agents = "# AGENTS.md instructions for /home/me/app\n\n<INSTRUCTIONS>\nNever push to main.\n</INSTRUCTIONS>";
    assert_eq!(
        instructions_title(agents),
        Some("AGENTS.md instructions for /home/me/app")
    );
    let older = "<user_instructions>\n\n# Repository Guidelines\n\n</user_instructions>";
    assert!(instructions_title(older).is_some());
    assert!(!is_request(agents) && !is_request(older));
    // The environment's context sent after them changes nothing; the user's own words do.
    let with_context =
        format!("{agents}\n<environment_context>\n  <cwd>/app</cwd>\n</environment_context>");
    assert!(!is_request(&with_context));
    let with_words = format!("{agents}\n\nFix the login page.");
    assert!(is_request(&with_words) && instructions_title(&with_words).is_none());
    // Markup a harness wrote is no request either; the user's words are, whatever they name.
    assert!(!is_request(
        "<environment_context>\n  <cwd>/app</cwd>\n</environment_context>"
    ));
    for text in [
        "fix it",
        "read # AGENTS.md instructions for x",
        "## My request for Codex:\nfix it",
    ] {
        assert!(is_request(text), "{text}");
        assert_eq!(instructions_title(text), None);
    }
}

/// The working directory is what the environment's context a harness sends states, not a
/// `<cwd>` the user's own words quote, nor a directory other than an absolute POSIX one.
#[test]
fn the_working_directory_is_the_one_the_environments_context_states() {
    let codex = "<environment_context>\n  <cwd>/Users/me/app/</cwd>\n  <approval_policy>never</approval_policy>\n</environment_context>";
    assert_eq!(stated_working_directory(codex), Some("/Users/me/app"));
    let after_instructions = format!(
        "# AGENTS.md instructions for /Users/me/app\n<INSTRUCTIONS>\nBe brief.\n</INSTRUCTIONS>\n{codex}"
    );
    assert_eq!(
        stated_working_directory(&after_instructions),
        Some("/Users/me/app")
    );
    for other in [
        "Why does my prompt say <environment_context><cwd>/tmp/x</cwd></environment_context>?",
        "<environment_context>\n<cwd>g:\\work\\app</cwd>\n</environment_context>",
        "<environment_context>\n<shell>zsh</shell>\n</environment_context>\n<cwd>/tmp/x</cwd>",
        "cd /home/me/app && ls",
    ] {
        assert_eq!(stated_working_directory(other), None, "{other}");
    }
}

#[test]
fn a_call_that_only_reads_documents_is_told_from_one_that_runs_or_reads_other_files() {
    let shell = |command: &str| json!({ "command": ["bash", "-lc", command] });
    for (name, arguments) in [
        (
            "Read",
            json!({ "file_path": "/home/me/app/docs/architecture.md" }),
        ),
        ("read_file", json!({ "path": "README.md" })),
        (
            "str_replace_based_edit_tool",
            json!({ "command": "view", "path": "docs/api.rst" }),
        ),
        ("shell", shell("cat docs/architecture.md")),
        ("shell", shell("sed -n '1,80p' README.md | nl -ba")),
        ("shell", shell("rg -n Error docs/api.md docs/errors.md")),
        ("exec_command", json!({ "cmd": "head -n 40 CHANGELOG.md" })),
    ] {
        assert!(reads_documents_only(name, &arguments), "{name} {arguments}");
    }
    for (name, arguments) in [
        ("Read", json!({ "file_path": "src/lib.rs" })),
        ("Edit", json!({ "file_path": "docs/a.md" })),
        ("shell", shell("npm test")),
        ("shell", shell("cat build.log")),
        ("shell", shell("cat docs/a.md && npm test")),
        ("shell", shell("cat docs/a.md src/lib.rs")),
        ("shell", shell("cat docs/a.md > out.md")),
        ("shell", shell("rg -n Error docs/")),
        ("shell", shell("python3 tools/check.py docs/a.md")),
        ("shell", json!({ "command": 3 })),
    ] {
        assert!(
            !reads_documents_only(name, &arguments),
            "{name} {arguments}"
        );
    }
}

/// A rule written as a list item is the rule: the summary lists it under its own marker, so
/// the item's marker went with it (`- - never push`).
#[test]
fn a_constraint_written_as_a_list_item_is_its_words() {
    let text = "Rules:\n- Never push to main\n  * **IMPORTANT**: do not edit the lockfile\n\
        2. Always run the tests\n10) must pass clippy\n3.5 must be the version\n\
        -x must stay as it is\n• only ASCII please";
    assert_eq!(
        constraint_lines(text).collect::<Vec<_>>(),
        [
            "Never push to main",
            "**IMPORTANT**: do not edit the lockfile",
            "Always run the tests",
            "must pass clippy",
            "3.5 must be the version",
            "-x must stay as it is",
            "only ASCII please",
        ]
    );
    assert_eq!(without_list_marker("**bold** must"), "**bold** must");
    assert_eq!(
        without_list_marker("1234. four digits"),
        "1234. four digits"
    );
}

/// The skills catalogue Codex writes into a project's instructions states how to use its
/// skills, the same for every user: none of its lines is a rule of the user's, and the
/// project's rules around it still are.
#[test]
fn a_harness_skills_catalogue_states_no_rule_of_the_users() {
    let text = "# AGENTS.md instructions for /home/me/app\n\n<INSTRUCTIONS>\n\
        - Never push to main.\n\
        ## Skills\n\
        A skill is a set of local instructions to follow that is stored in a `SKILL.md` file.\n\
        ### Available skills\n\
        - audit: Use only when the user asks for an audit. (file: /s/audit/SKILL.md)\n\
        ### How to use skills\n\
        - Trigger rules: you must use that skill for that turn.\n\
        - Keep context small: only load extra files when needed.\n\
        ## Testing\n\
        - Always run `make test` before a commit.\n\
        </INSTRUCTIONS>\n\
        <skills_instructions>\n- You must open SKILL.md first.\n</skills_instructions>\n\
        Do not edit the lockfile.";
    assert_eq!(
        constraint_lines(text).collect::<Vec<_>>(),
        [
            "Never push to main.",
            "Always run `make test` before a commit.",
            "Do not edit the lockfile."
        ]
    );
    // A section named so that is not the catalogue stays.
    let own = "## Skills\nWe must only hire people who can write.";
    assert_eq!(lines_outside_skills(own).count(), 2);
}
