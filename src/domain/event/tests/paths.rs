//! The paths a call or a text names, and what a command writes rather than acts on.

use super::*;

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
