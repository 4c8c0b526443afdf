//! The files and commands a summary lists as touched.

use super::*;

/// A long request and a long command name more files than their entries show: each file is
/// listed as touched, with who named it, and no option or URL is taken for one.
#[test]
fn files_named_past_an_entry_are_listed_as_touched() {
    let files: Vec<String> = (1..=12)
        .map(|i| format!("/home/dev/vsla/src/part_{i}.c"))
        .collect();
    let request = format!(
        "First, read every file in src ({}) and explain them in docs/PLAN.md.",
        files.join(" ")
    );
    let command = format!(
        "gcc -O2 --std=c99 -o build/vsla {} && curl https://example.com/a.txt",
        files.join(" ")
    );
    let mut asking = message(Role::Assistant, "");
    asking.tool_calls = vec![ToolCall {
        id: "c1".into(),
        name: "bash".into(),
        arguments: json!({ "command": command }),
        kind: Default::default(),
    }];
    let events = [
        user(1, "Set up the build."),
        user(2, &request),
        event(3, EventBody::Message(asking)),
        result(4, "c1", "done", false),
    ];
    let out = run(&Summary::default(), &events, 12_800);
    let text = &out.summary.text;
    // The request's entry shows the first files; the others are listed among their
    // directory's files.
    for file in &files {
        let named = text.contains(file.as_str()) || lists_file(text, file, "bash");
        assert!(named, "{file}: {text}");
    }
    // The request's own entry shows the first files; the others are named by the user, then
    // touched by the command, which is their last action.
    assert!(
        lists_file(text, "/home/dev/vsla/src/part_12.c", "bash"),
        "{text}"
    );
    assert!(
        lists_file(text, "docs/PLAN.md", "named by the user"),
        "{text}"
    );
    assert!(!text.contains("--std=c99 (last"), "{text}");
    assert!(!text.contains("example.com/a.txt (last"), "{text}");
    assert!(text.contains("build/vsla"), "{text}");
}

/// The files a sub-agent is asked to read, named in its prompt, are touched by the call; the
/// paths in the text a call writes into a file are not.
#[test]
fn files_named_by_any_argument_are_touched_but_not_those_of_text_written_into_a_file() {
    let prompt = "Examine the CPU backend:\n- src/backends/cpu/vsla_cpu_linalg.c\n\
                  - src/backends/cpu/vsla_cpu_advanced.c\nReport what is missing.";
    let readme = "Point it at /path/to/your.db, see docs/example.md";
    let events = [
        user(1, "Review the CPU backend."),
        call(
            2,
            "t1",
            "Task",
            json!({"description": "Analyze it", "prompt": prompt}),
        ),
        result(3, "t1", "Two functions are missing.", false),
        call(
            4,
            "w1",
            "Write",
            json!({"file_path": "README.md", "content": readme}),
        ),
        result(5, "w1", "written", false),
        call(
            6,
            "e1",
            "MultiEdit",
            json!({"file_path": "src/a.c",
            "edits": [{"old_string": "#include <old/x.h>", "new_string": "#include <new/y.h>"}]}),
        ),
        result(7, "e1", "edited", false),
        call(
            8,
            "r1",
            "read_many",
            json!({"files": [{"path": "src/b.rs"}, {"path": "src/c.rs"}]}),
        ),
        result(9, "r1", "two files", false),
    ];
    let out = run(&Summary::default(), &events, 12_800);
    let text = &out.summary.text;
    for (file, action) in [
        ("src/backends/cpu/vsla_cpu_linalg.c", "named by Task"),
        ("src/backends/cpu/vsla_cpu_advanced.c", "named by Task"),
        ("README.md", "Write"),
        ("src/a.c", "MultiEdit"),
        ("src/b.rs", "named by read_many"),
        ("src/c.rs", "named by read_many"),
    ] {
        assert!(lists_file(text, file, action), "{file}: {text}");
    }
    for written in ["your.db", "docs/example.md", "new/y.h", "old/x.h"] {
        assert!(!text.contains(written), "{written}: {text}");
    }
}

#[test]
fn commands_keep_their_outcome_files_their_last_action_and_errors_their_fix() {
    let call = |id: &str, name: &str, arguments: Value| ToolCall {
        id: id.into(),
        name: name.into(),
        arguments,
        kind: Default::default(),
    };
    let calling = |seq, call: ToolCall| {
        let mut m = message(Role::Assistant, "");
        m.tool_calls = vec![call];
        event(seq, EventBody::Message(m))
    };
    let test = json!({"command": "cargo test"});
    let events = [
        user(1, "make the tests pass"),
        calling(2, call("a", "shell", test.clone())),
        result(3, "a", "running 3 tests\nFAILED tests::rounding", true),
        calling(4, call("b", "read_file", json!({"path": "src/money.rs"}))),
        result(5, "b", "pub fn round() {}", false),
        calling(6, call("c", "edit_file", json!({"path": "src/money.rs"}))),
        result(7, "c", "ok", false),
        calling(8, call("d", "shell", test)),
        result(9, "d", "test result: ok. 3 passed", false),
    ];
    let out = run(&Summary::default(), &events, 4000);
    let text = &out.summary.text;
    for expected in [
        "- src/money.rs (last: edit_file)\n",
        "- $ cargo test → ok\n",
        "shell(command=cargo test) → FAILED tests::rounding (fixed after changing src/money.rs)",
        "- observation://3 shell(command=cargo test) → failed",
        "- observation://9 shell(command=cargo test) → ok",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in\n{text}");
    }
    assert!(!text.contains("(last: read_file)"), "{text}");
    assert!(!text.contains("$ cargo test → failed"), "{text}");
}

/// A file a call only names (a to-do item, a sub-agent's prompt) is listed as named by it, read
/// as the file it is (without its emphasis, punctuation or place; `../` kept), and is not
/// counted as a change that fixed an error.
#[test]
fn a_file_a_call_only_names_is_listed_as_named_and_is_not_a_fix() {
    let test = json!({"command": "cargo test"});
    let todo = json!({"todos": [{"content": "Fix src/z.rs", "status": "in_progress",
        "activeForm": "Fixing **src/z.rs**: the rounding at src/y.rs:58:13, then ../lib/x.rs?"}]});
    let events = [
        user(1, "make the tests pass"),
        call(2, "a", "shell", test.clone()),
        result(3, "a", "running 3 tests\nFAILED tests::rounding", true),
        call(4, "b", "TodoWrite", todo),
        result(5, "b", "ok", false),
        call(6, "c", "shell", test),
        result(7, "c", "test result: ok. 3 passed", false),
    ];
    let out = run(&Summary::default(), &events, 4000);
    let text = &out.summary.text;
    for file in ["src/z.rs", "src/y.rs", "../lib/x.rs"] {
        assert!(
            lists_file(text, file, "named by TodoWrite"),
            "{file}: {text}"
        );
    }
    assert!(
        text.contains("FAILED tests::rounding (later succeeded)"),
        "{text}"
    );
    assert!(!text.contains("58:13 (last"), "{text}");
    assert!(!text.contains("fixed after changing"), "{text}");
}

/// When the touched list must give way, commands that succeeded and name no file go first,
/// oldest first: the files, the failed command and a command naming a file stay.
#[test]
fn commands_that_succeeded_and_name_no_file_give_way_before_files() {
    let mut events = vec![user(1, "Find why the parser is slow.")];
    let mut seq = 2;
    let mut add = |events: &mut Vec<Event>, name: &str, arguments: Value, failed: bool| {
        let id = format!("c{seq}");
        events.push(call(seq, &id, name, arguments));
        events.push(result(
            seq + 1,
            &id,
            if failed { "error: boom" } else { "fine" },
            failed,
        ));
        seq += 2;
    };
    for i in 0..8 {
        add(
            &mut events,
            "bash",
            json!({"command": format!("bd show task-{i}")}),
            false,
        );
        let path = format!("/home/dev/parser/src/stage_{i}.rs");
        add(&mut events, "read_file", json!({ "path": path }), false);
    }
    add(
        &mut events,
        "bash",
        json!({"command": "cargo build --release"}),
        true,
    );
    add(
        &mut events,
        "bash",
        json!({"command": "wc -l src/lexer.rs"}),
        false,
    );
    for i in 8..11 {
        add(
            &mut events,
            "bash",
            json!({"command": format!("bd show task-{i}")}),
            false,
        );
    }

    let whole = run(&Summary::default(), &events, 100_000).summary.text;
    assert!(whole.contains("- $ bd show task-0 → ok"), "{whole}");
    let mut quiet_went_first = false;
    for bound in (300..whole.chars().count()).rev().step_by(25) {
        let text = run(&Summary::default(), &events, bound).summary.text;
        assert!(text.chars().count() <= bound);
        let list = text
            .split("## Files and commands touched\n")
            .nth(1)
            .unwrap_or_default();
        let list = list.split("\n## ").next().unwrap_or_default();
        let files = (0..8)
            .filter(|i| {
                let path = format!("/home/dev/parser/src/stage_{i}.rs");
                lists_file(list, &path, "read_file")
            })
            .count();
        let quiet = list.matches("- $ bd show task-").count();
        // No file goes while more than the newest three quiet commands stay.
        if files < 8 {
            assert!(
                quiet <= 3,
                "a file went before a quiet command at {bound}:\n{list}"
            );
        } else if quiet < 11 {
            quiet_went_first = true;
            // The oldest went; the failed command and the one naming a file stay.
            assert!(!list.contains("bd show task-0 "), "{list}");
            assert!(
                list.contains("- $ cargo build --release → failed"),
                "{list}"
            );
            assert!(list.contains("- $ wc -l src/lexer.rs → ok"), "{list}");
        }
    }
    assert!(quiet_went_first, "no bound made the touched list give way");
}

/// The files of one directory share a line, each with its last action; a file alone in its
/// directory keeps a line of its own. A later summary reads the line back as the same files:
/// a file touched again moves to its new action, once, and nothing is listed twice.
#[test]
fn a_directorys_files_share_a_line_that_a_later_summary_reads_back() {
    let read = |seq: i64, path: &str| {
        let id = format!("c{seq}");
        [
            call(seq, &id, "read_file", json!({ "path": path })),
            result(seq + 1, &id, "int x;", false),
        ]
    };
    let mut events = vec![user(1, "Port the backend.")];
    for (i, path) in [
        "/home/dev/p/src/cpu/add.c",
        "/home/dev/p/src/cpu/mul.c",
        "/home/dev/p/README.md",
        "/home/dev/p/src/cpu/div.c",
    ]
    .iter()
    .enumerate()
    {
        events.extend(read(2 + 2 * i as i64, path));
    }
    let first = run(&Summary::default(), &events, 4_000).summary;
    assert!(
        first.text.contains(
            "- /home/dev/p/README.md (last: read_file)\n\
             - in /home/dev/p/src/cpu/: add.c (read_file), mul.c (read_file), div.c (read_file)\n"
        ),
        "{}",
        first.text
    );

    let edit = [
        call(
            20,
            "e",
            "edit_file",
            json!({"path": "/home/dev/p/src/cpu/add.c"}),
        ),
        result(21, "e", "ok", false),
    ];
    let text = run(&first, &edit, 4_000).summary.text;
    assert!(
        text.contains(
            "- in /home/dev/p/src/cpu/: mul.c (read_file), div.c (read_file), add.c (edit_file)"
        ),
        "{text}"
    );
    let list = text
        .split("## Files and commands touched\n")
        .nth(1)
        .unwrap_or_default();
    let list = list.split("\n## ").next().unwrap_or_default();
    assert_eq!(list.matches("add.c").count(), 1, "{list}");
    // Read back with nothing new, the text is the same.
    let again = Summary {
        text: text.clone(),
        ..Summary::default()
    };
    assert_eq!(run(&again, &[], 4_000).summary.text, text);
}

/// One assistant message calling `shell` with each `(id, command)`, as Codex sends them.
fn shell_calls(commands: &[(&str, &str)]) -> Event {
    let mut asking = message(Role::Assistant, "");
    asking.tool_calls = commands
        .iter()
        .map(|(id, command)| ToolCall {
            id: (*id).into(),
            name: "shell".into(),
            arguments: json!({ "command": ["bash", "-lc", command] }),
            kind: Default::default(),
        })
        .collect();
    event(2, EventBody::Message(asking))
}

/// A command that writes a here-document (a patch piped to `apply_patch`, a file written with
/// `cat`) is listed and described by its command lines, not the document's text; of a patch,
/// only the files it changes are listed, not those its lines name.
#[test]
fn a_here_documents_text_is_left_out_of_its_commands_entry() {
    let patch = "apply_patch << 'PATCH'\n*** Begin Patch\n*** Update File: opk/ui/editor.py\n\
                 @@\n-    self.f_abl = QCheckBox()\n+    self.f_abl = QCheckBox(); self.f_probe = QComboBox()\n\
                 +    self.icon = QIcon(\"icons/printer.svg\")\n\
                 *** Add File: examples/printers/Prusa_MK4.json\n+{\"name\": \"MK4\"}\n*** End Patch\nPATCH";
    let write =
        "cat > docs/notes.md << 'EOF'\n# Notes\nThe editor lives in opk/ui/editor.py.\nEOF\n\
                 git add docs/notes.md";
    let asking = shell_calls(&[("c1", patch), ("c2", write)]);
    let events = [
        user(1, "Add the printer."),
        asking,
        result(3, "c1", "Done!", false),
        result(4, "c2", "", false),
    ];
    let out = run(&Summary::default(), &events, 12_800);
    let text = &out.summary.text;
    assert!(
        text.contains("$ bash -lc apply_patch << 'PATCH' → ok"),
        "{text}"
    );
    assert!(
        text.contains("$ bash -lc cat > docs/notes.md << 'EOF' git add docs/notes.md → ok"),
        "{text}"
    );
    assert!(
        text.contains("- shell(command=bash -lc apply_patch << 'PATCH')\n"),
        "{text}"
    );
    assert!(!text.contains("QCheckBox"), "{text}");
    assert!(!text.contains("printer.svg"), "{text}");
    // The patch's files as it changes them: the note written next names one, which changes
    // nothing of it.
    assert!(lists_file(text, "opk/ui/editor.py", "updated"), "{text}");
    assert!(
        lists_file(text, "examples/printers/Prusa_MK4.json", "added"),
        "{text}"
    );
}

/// The files a document written with `cat <<'EOF' > file` names are what the file says, none
/// the call touched; a program's document (`python - <<'PY'`) names those the program opens.
/// A route group's file (`app/(auth)/login/page.tsx`) is listed by its whole path.
#[test]
fn a_written_documents_files_are_not_touched_and_a_route_groups_file_is_named_whole() {
    let plan = "cat <<'EOF' > specs/plan.md\n- `app/(auth)/signup/page.tsx`: the form\n\
                - `lib/auth.ts`: sessions\nEOF";
    let script = "python - <<'PY'\nopen('data/users.csv')\nPY";
    let read = "sed -n '1,40p' \"app/(auth)/login/page.tsx\"";
    let asking = shell_calls(&[("c1", plan), ("c2", script), ("c3", read)]);
    let events = [
        user(1, "Plan the sign-up page."),
        asking,
        result(3, "c1", "", false),
        result(4, "c2", "", false),
        result(5, "c3", "export default function Login() {}", false),
    ];
    let out = run(&Summary::default(), &events, 12_800);
    let text = &out.summary.text;
    assert!(lists_file(text, "specs/plan.md", "written"), "{text}");
    assert!(lists_file(text, "data/users.csv", "shell"), "{text}");
    assert!(
        lists_file(text, "app/(auth)/login/page.tsx", "read lines 1-40"),
        "{text}"
    );
    for unnamed in ["signup/page.tsx", "lib/auth.ts", "- /login/page.tsx"] {
        assert!(!text.contains(unnamed), "{unnamed}: {text}");
    }
}

/// A patch (Codex's `apply_patch`, its text the call's input) lists each file it changes with
/// how it changes it, not as a file the call merely names; a build that failed and then
/// succeeded names the patched files as its fix.
#[test]
fn a_patch_lists_the_files_it_changes_as_it_changes_them() {
    let patch = "*** Begin Patch\n*** Update File: src/a.rs\n@@\n-let x = 1;\n+let y = 1;\n\
                 *** Update File: src/we\\\"ird.rs\n*** Move to: src/renamed.rs\n\
                 *** Update File: src/old.rs\n*** Move to: src/new.rs\n@@\n-a\n+b\n\
                 *** Delete File: src/gone.rs\n*** Add File: src/added.rs\n+use crate::x::y;\n\
                 *** End Patch";
    let events = [
        user(1, "Fix the build."),
        call(2, "c2", "shell", json!({ "command": "cargo build" })),
        result(
            3,
            "c2",
            "error[E0425]: cannot find value `x` in this scope",
            true,
        ),
        call(4, "c4", "apply_patch", json!({ "input": patch })),
        result(
            5,
            "c4",
            "Success. Updated the following files: M src/a.rs",
            false,
        ),
        call(6, "c6", "shell", json!({ "command": "cargo build" })),
        result(7, "c6", "Finished", false),
    ];
    let out = run(&Summary::default(), &events, 8_000);
    let text = &out.summary.text;
    for (file, action) in [
        ("src/a.rs", "updated"),
        ("src/old.rs", "moved"),
        ("src/new.rs", "moved here"),
        ("src/gone.rs", "deleted"),
        ("src/added.rs", "added"),
        // Moved from a path no list can name: where it went, and nothing else moved.
        ("src/renamed.rs", "moved here"),
    ] {
        assert!(
            lists_file(text, file, action),
            "{file} ({action}) in\n{text}"
        );
    }
    assert!(!text.contains("named by apply_patch"), "{text}");
    assert!(!text.contains("crate::x"), "{text}");
    assert!(
        text.contains("(fixed after changing src/added.rs, src/gone.rs, src/new.rs)"),
        "{text}"
    );
}
