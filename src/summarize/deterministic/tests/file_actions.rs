//! What the touched list says a command did to a file, and where the file is: a command that
//! only read, searched or wrote one file told as that file's action, and paths under the
//! working directory the harness stated, from the directory a command ran in.

use super::*;

/// The environment's context Codex sends as the user, stating `directory` as the working one.
fn environment_context(directory: &str) -> String {
    format!(
        "<environment_context>\n  <cwd>{directory}</cwd>\n  <shell>zsh</shell>\n</environment_context>"
    )
}

/// A call that edits `path` (seq `seq`) and its result (the next seq).
fn edit(seq: i64, path: &str) -> [Event; 2] {
    let id = format!("c{seq}");
    [
        call(seq, &id, "edit", json!({ "path": path })),
        result(seq + 1, &id, "done", false),
    ]
}

/// An agent reads a long file a range at a time: the summary lists the file once, with the
/// newest range read, and keeps room for other entries; reads of two files stay two, a number
/// in a file's name is part of the file, and so is a number in a task's or a host's.
#[test]
fn reads_of_one_file_at_other_lines_are_one_entry() {
    let commands = [
        "sed -n '1,200p' src/db/hybrid.rs",
        "sed -n '200,400p' src/db/hybrid.rs",
        "sed -n '400,520p' src/db/hybrid.rs",
        "sed -n '1,200p' src/db/schema.rs",
        "sed -n '1,80p' specs/001-startup/plan.md",
        "sed -n '1,80p' specs/002-startup/plan.md",
        "head -n 50 src/db/pool.rs",
        "head -n 200 src/db/pool.rs",
        "cd /repo && bd show task-7",
        "cd /repo && bd show task-8",
        "ssh host1 cat /etc/hosts",
        "ssh host2 cat /etc/hosts",
    ];
    let mut events = vec![user(1, "find where created_at is written")];
    for (i, command) in commands.iter().enumerate() {
        let seq = 2 + 2 * i as i64;
        let id = format!("c{seq}");
        events.push(call(seq, &id, "shell", json!({ "command": command })));
        events.push(result(seq + 1, &id, "fn write() {}", false));
    }
    let out = run(&Summary::default(), &events, 8_000);
    let text = &out.summary.text;
    for (file, action) in [
        ("src/db/hybrid.rs", "read lines 400-520"),
        ("src/db/schema.rs", "read lines 1-200"),
        ("specs/001-startup/plan.md", "read lines 1-80"),
        ("specs/002-startup/plan.md", "read lines 1-80"),
        ("src/db/pool.rs", "read lines 1-200"),
    ] {
        assert!(
            lists_file(text, file, action),
            "{file} ({action}) in\n{text}"
        );
    }
    for expected in [
        "- $ cd /repo && bd show task-7 → ok\n",
        "- $ cd /repo && bd show task-8 → ok\n",
        "- $ ssh host1 cat /etc/hosts → ok\n",
        "- $ ssh host2 cat /etc/hosts → ok\n",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in\n{text}");
    }
    let touched = text
        .split("## Files and commands touched\n")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .unwrap();
    // `src/db/`'s three files on one line, each spec's on its own, and the four commands.
    assert_eq!(touched.lines().count(), 7, "{text}");
    assert!(!touched.contains("lines 1-50)"), "{text}");
    assert!(!touched.contains("lines 200-400"), "{text}");
}

/// A command that succeeded and only read, searched or wrote one file is listed as that file's
/// action, among its directory's files; reading a file does not hide that the agent changed it; a read that failed, and a command that does more,
/// keep their own entries. A later summary reads the actions back.
#[test]
fn a_command_that_only_reads_searches_or_writes_one_file_is_told_as_the_files_action() {
    let steps: [(&str, Value, &str, bool); 6] = [
        (
            "edit",
            json!({ "path": "/home/dev/app/src/fold.rs" }),
            "done",
            false,
        ),
        (
            "shell",
            json!({ "command": ["bash", "-lc", "sed -n '1,40p' /home/dev/app/src/fold.rs"] }),
            "fn fold() {}",
            false,
        ),
        (
            "shell",
            json!({ "command": ["bash", "-lc", "rg -n \"fn plan\" /home/dev/app/src/plan.rs"] }),
            "12:fn plan()",
            false,
        ),
        (
            "shell",
            json!({ "command": ["bash", "-lc", "cat <<'EOF' > /home/dev/app/docs/notes.md\nsee src/other.rs\nEOF"] }),
            "",
            false,
        ),
        (
            "shell",
            json!({ "command": ["bash", "-lc", "sed -n '1,5p' /home/dev/app/src/gone.rs"] }),
            "sed: can't read /home/dev/app/src/gone.rs: No such file or directory",
            true,
        ),
        (
            "shell",
            json!({ "command": ["bash", "-lc", "cargo test && sed -n '1,5p' /home/dev/app/src/plan.rs"] }),
            "ok",
            false,
        ),
    ];
    let mut events = vec![user(1, "make plan() fold")];
    for (i, (tool, arguments, output, failed)) in steps.into_iter().enumerate() {
        let seq = 2 + 2 * i as i64;
        let id = format!("c{seq}");
        events.push(call(seq, &id, tool, arguments));
        events.push(result(seq + 1, &id, output, failed));
    }
    let out = run(&Summary::default(), &events, 8_000);
    let text = &out.summary.text;
    assert!(
        lists_file(text, "/home/dev/app/src/fold.rs", "edit"),
        "{text}"
    );
    assert!(
        lists_file(text, "/home/dev/app/src/plan.rs", "searched for fn plan"),
        "{text}"
    );
    assert!(
        lists_file(text, "/home/dev/app/docs/notes.md", "written"),
        "{text}"
    );
    assert!(
        text.contains("- in /home/dev/app/src/: fold.rs (edit), plan.rs (searched for fn plan)\n"),
        "{text}"
    );
    assert!(
        text.contains("- $ bash -lc sed -n '1,5p' /home/dev/app/src/gone.rs → failed\n"),
        "{text}"
    );
    assert!(
        text.contains("- $ bash -lc cargo test && sed -n '1,5p' /home/dev/app/src/plan.rs → ok\n"),
        "{text}"
    );
    assert!(!text.contains("$ bash -lc rg"), "{text}");
    assert!(!text.contains("$ bash -lc sed -n '1,40p'"), "{text}");

    // Read back by the next summary, and a later read of the written file does not hide it.
    let more = [
        call(
            20,
            "c20",
            "shell",
            json!({ "command": "nl -ba /home/dev/app/docs/notes.md | sed -n '1,20p'" }),
        ),
        result(21, "c20", "1 see src/other.rs", false),
    ];
    let next = run(&out.summary, &more, 8_000);
    let text = &next.summary.text;
    assert!(
        lists_file(text, "/home/dev/app/src/fold.rs", "edit"),
        "{text}"
    );
    assert!(
        lists_file(text, "/home/dev/app/docs/notes.md", "written"),
        "{text}"
    );
    assert!(
        lists_file(text, "/home/dev/app/src/plan.rs", "searched for fn plan"),
        "{text}"
    );
}

/// Codex states the session's working directory in the environment's context it sends as the
/// user: the summary names the directory once and lists the files in folders under it by their
/// relative paths, one entry for a file the agent named both ways; a file at its top, and a
/// file elsewhere, keep their absolute paths. A later summary keeps the first directory, even
/// when another is stated, and lists a new file under it the same way.
#[test]
fn files_in_the_working_directory_are_listed_by_their_relative_paths() {
    let mut events = vec![
        user(1, &environment_context("/home/dev/app")),
        user(2, "Fix the fold."),
    ];
    events.extend(edit(3, "/home/dev/app/src/fold.rs"));
    events.push(call(
        5,
        "c5",
        "shell",
        json!({ "command": "sed -n '1,40p' src/fold.rs" }),
    ));
    events.push(result(6, "c5", "fn fold() {}", false));
    events.extend(edit(7, "/home/dev/app/Cargo.toml"));
    events.extend(edit(9, "/home/dev/other/src/b.rs"));
    let out = run(&Summary::default(), &events, 8_000);
    let text = &out.summary.text;
    assert!(
        text.contains("## Working directory (relative paths below are in it)\n- /home/dev/app\n"),
        "{text}"
    );
    assert!(lists_file(text, "src/fold.rs", "edit"), "{text}");
    let touched = text
        .split("## Files and commands touched\n")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .unwrap();
    assert!(!touched.contains("/home/dev/app/src"), "{text}");
    assert!(
        lists_file(text, "/home/dev/app/Cargo.toml", "edit"),
        "{text}"
    );
    assert!(
        lists_file(text, "/home/dev/other/src/b.rs", "edit"),
        "{text}"
    );

    let mut more = vec![user(11, &environment_context("/home/dev/other"))];
    more.extend(edit(12, "/home/dev/app/tests/t.rs"));
    let next = run(&out.summary, &more, 8_000);
    let text = &next.summary.text;
    assert!(text.contains("\n- /home/dev/app\n"), "{text}");
    assert!(!text.contains("\n- /home/dev/other\n"), "{text}");
    assert!(lists_file(text, "src/fold.rs", "edit"), "{text}");
    assert!(lists_file(text, "tests/t.rs", "edit"), "{text}");
    assert!(
        lists_file(text, "/home/dev/other/src/b.rs", "edit"),
        "{text}"
    );
}

/// A command that names files under the working directory by their absolute paths is shown
/// with them relative to it, as the files are listed: in the touched list, the calls made and
/// the outputs folded. A file at the directory's top, the directory itself, a path that only
/// starts with it and one inside a longer word or after a host keep their text, as does every
/// path of a command that changes its directory or runs in another one.
#[test]
fn a_commands_paths_under_the_working_directory_are_shown_relative_to_it() {
    let mut events = vec![
        user(1, &environment_context("/home/dev/app")),
        user(2, "Fix the build."),
    ];
    let command = "cat /home/dev/app/Cargo.toml /home/dev/app/tests/a.rs>/tmp/o && ls \
                   /home/dev/app/src/bin /home/dev/app /home/dev/apps/x/y.rs x/home/dev/app/src/z.rs";
    let elsewhere = "cd /home/dev/app/web && cat /home/dev/app/src/lib.rs";
    let shell = |seq: i64, command: &str, workdir: Option<&str>| {
        let id = format!("c{seq}");
        let mut arguments = json!({ "command": ["bash", "-lc", command] });
        if let Some(workdir) = workdir {
            arguments["workdir"] = json!(workdir);
        }
        call(seq, &id, "shell", arguments)
    };
    events.push(shell(3, command, None));
    events.push(result(4, "c3", "ok", false));
    events.push(shell(5, elsewhere, None));
    events.push(result(6, "c5", "pub fn a() {}", false));
    events.push(shell(
        7,
        "scp host:/home/dev/app/src/a.rs /home/dev/app/src/b.rs",
        None,
    ));
    events.push(result(8, "c7", "", false));
    let run_in_web = "sed -n '1,40p' /home/dev/app/src/lib.rs";
    events.push(shell(9, run_in_web, Some("/home/dev/app/web")));
    events.push(result(10, "c9", "pub fn a() {}", false));
    let out = run(&Summary::default(), &events, 8_000);
    let text = &out.summary.text;
    let shown = "cat /home/dev/app/Cargo.toml tests/a.rs>/tmp/o && ls src/bin /home/dev/app \
                 /home/dev/apps/x/y.rs x/home/dev/app/src/z.rs";
    assert!(
        text.contains(&format!("- $ bash -lc {shown} → ok")),
        "{text}"
    );
    let call = "shell(command=bash -lc cat /home/dev/app/Cargo.toml tests/a.rs>/tmp/o && ls";
    assert!(text.contains(&format!("- {call}")), "{text}");
    assert!(
        text.contains(&format!("- observation://4 {call}")),
        "{text}"
    );
    assert!(
        text.contains("scp host:/home/dev/app/src/a.rs src/b.rs"),
        "{text}"
    );
    // Both name the file at the top's src/, read as its action.
    assert!(
        text.contains(&format!("- shell(command=bash -lc {elsewhere})")),
        "{text}"
    );
    assert!(
        text.contains(&format!("- shell(command=bash -lc {run_in_web})")),
        "{text}"
    );
    assert!(lists_file(text, "src/lib.rs", "read lines 1-40"), "{text}");
    assert!(!text.contains("web/src/lib.rs"), "{text}");
    // Without a working directory stated, the command is shown as it ran.
    let out = run(&Summary::default(), &events[1..], 8_000);
    assert!(
        out.summary.text.contains("/home/dev/app/tests/a.rs"),
        "{}",
        out.summary.text
    );
}

/// A call's path too long for its entry keeps its end, where the file's name is, from a
/// directory's start; the touched list names the whole path.
#[test]
fn a_long_path_in_a_calls_entry_keeps_its_end() {
    let path =
        "/Users/dev/Documents/code/@orgs/my-company/web-app/packages/site/src/components/ui/Button.tsx";
    let events = [
        user(1, "Style the button."),
        call(2, "c2", "Read", json!({ "file_path": path })),
        result(3, "c2", "export function Button() {}", false),
    ];
    let out = run(&Summary::default(), &events, 8_000);
    let text = &out.summary.text;
    let tail = "…/code/@orgs/my-company/web-app/packages/site/src/components/ui/Button.tsx";
    assert!(
        text.contains(&format!("- Read(file_path={tail})\n")),
        "{text}"
    );
    assert!(
        text.contains(&format!("- observation://3 Read(file_path={tail}) → ok")),
        "{text}"
    );
    assert!(lists_file(text, path, "Read"), "{text}");
}

#[test]
fn a_command_run_in_another_directory_names_its_files_from_there() {
    let context = environment_context("/home/dev/app");
    let mut events = vec![user(1, &context), user(2, "Fix the build.")];
    events.extend(edit(3, "/home/dev/app/src/lib.rs"));
    let shell = |seq: i64, command: &str, workdir: &str| {
        let id = format!("c{seq}");
        call(
            seq,
            &id,
            "shell",
            json!({ "command": ["bash", "-lc", command], "workdir": workdir }),
        )
    };
    events.push(shell(5, "sed -n '1,40p' src/lib.rs", "/home/dev/app/web/"));
    events.push(result(6, "c5", "export {}", false));
    events.push(shell(7, "cat ../notes/b.md", "/home/dev/other/docs"));
    events.push(result(8, "c7", "# notes", false));
    events.push(shell(9, "npm test", "/home/dev/app/web"));
    events.push(result(10, "c9", "npm ERR! missing script: test", true));
    events.push(shell(11, "cat Cargo.toml", "/home/dev/app"));
    events.push(result(12, "c11", "[package]", false));
    let out = run(&Summary::default(), &events, 8_000);
    let text = &out.summary.text;
    // The file read in web/ is not the one edited at the top's src/.
    assert!(
        lists_file(text, "web/src/lib.rs", "read lines 1-40"),
        "{text}"
    );
    assert!(lists_file(text, "src/lib.rs", "edit"), "{text}");
    assert!(
        lists_file(text, "/home/dev/other/notes/b.md", "read"),
        "{text}"
    );
    assert!(text.contains("$ cd web && bash -lc npm test"), "{text}");
    // A call in the stated directory itself is shown as it ran.
    assert!(text.contains("- $ bash -lc cat Cargo.toml → ok"), "{text}");
}

#[test]
fn a_working_directory_longer_than_an_entry_or_a_doubled_slash_is_not_taken() {
    let long = format!("/home/{}", "a".repeat(300));
    let events = vec![
        user(1, &environment_context(&long)),
        user(2, "Fix the build."),
    ];
    let out = run(&Summary::default(), &events, 2_000);
    let text = &out.summary.text;
    assert!(!text.contains("## Working directory"), "{text}");
    assert!(text.contains("Fix the build."), "{text}");

    let context = environment_context("/home/dev/app");
    let mut events = vec![user(1, &context), user(2, "Fix the build.")];
    events.extend(edit(3, "/home/dev/app//src/lib.rs"));
    let out = run(&Summary::default(), &events, 8_000);
    let text = &out.summary.text;
    assert!(!lists_file(text, "/src/lib.rs", "edit"), "{text}");
}

/// The text editor tool (`str_replace_editor`, `str_replace_based_edit_tool`) names what it
/// did to its file in its `command` argument: the file is listed with that action, a `view` is
/// no change (a view after an edit leaves the edit as the file's last change), and the
/// editor's command is no shell command run (`$ view → ok`).
#[test]
fn the_text_editors_command_is_what_it_did_to_the_file_not_a_command_run() {
    let calls = [
        ("str_replace_editor", "view", "/repo/Makefile"),
        ("str_replace_editor", "str_replace", "/repo/src/match.c"),
        ("str_replace_editor", "view", "/repo/src/match.c"),
        ("str_replace_based_edit_tool", "create", "/repo/src/new.c"),
        (
            "str_replace_based_edit_tool",
            "undo_edit",
            "/repo/src/old.c",
        ),
    ];
    let mut events = vec![user(1, "fix the match of iso fields")];
    for (i, (tool, command, path)) in calls.iter().enumerate() {
        let seq = 2 + 2 * i as i64;
        let id = format!("c{seq}");
        let arguments = json!({ "command": command, "path": path, "old_str": "a", "new_str": "b" });
        events.push(call(seq, &id, tool, arguments));
        events.push(result(seq + 1, &id, "done", false));
    }
    let out = run(&Summary::default(), &events, 8_000);
    let text = &out.summary.text;
    for (file, action) in [
        ("/repo/Makefile", "view"),
        ("/repo/src/match.c", "str_replace"),
        ("/repo/src/new.c", "create"),
        ("/repo/src/old.c", "undo_edit"),
    ] {
        assert!(
            lists_file(text, file, action),
            "{file} ({action}) in\n{text}"
        );
    }
    for command in ["view", "str_replace", "create", "undo_edit"] {
        assert!(
            !text.contains(&format!("$ {command}")),
            "{command} in\n{text}"
        );
    }
}
