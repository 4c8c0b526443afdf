//! The error lines a summary names for the runs it folds.

use super::*;

#[test]
fn the_error_line_of_a_failed_output_is_the_one_that_says_what_failed() {
    let cases = [
        (
            "   Compiling billing v0.3.1 (/src/billing)\nerror[E0308]: mismatched types\n  --> src/lib.rs:3:5",
            "error[E0308]: mismatched types",
        ),
        (
            "Compiling billing v0.3.1\nerror: could not compile `billing`",
            "error: could not compile `billing`",
        ),
        (
            "Traceback (most recent call last):\n  File \"a.py\", line 1, in <module>\n    import foo\nModuleNotFoundError: No module named 'foo'\n",
            "ModuleNotFoundError: No module named 'foo'",
        ),
        (
            "collected 3 items\n\ntests/test_a.py ..F\nFAILED tests/test_a.py::test_c - assert 1 == 2",
            "FAILED tests/test_a.py::test_c - assert 1 == 2",
        ),
        (
            "running 1 test\nthread 'main' panicked at src/main.rs:2:5:\nboom",
            "thread 'main' panicked at src/main.rs:2:5:",
        ),
        (
            "> build\n> tsc\nError: Cannot find module 'x'",
            "Error: Cannot find module 'x'",
        ),
        // A test run that printed the code it failed in: the code is not what failed.
        (
            "FAIL src/api.test.ts\n  12 |     throw new Error(\"Error: boom\");\n    console.error(\"Error: x\", e);\nError: expected 200, got 404",
            "Error: expected 200, got 404",
        ),
        // Nothing reads as an error: the first line is all there is.
        ("\n permission denied \nmore", "permission denied"),
    ];
    for (output, expected) in cases {
        assert_eq!(facts::error_line(output, 200), expected, "{output:?}");
    }
}

#[test]
fn a_failed_build_is_listed_by_its_error_not_its_progress() {
    let events = [
        user(1, "fix the build"),
        call(2, "c1", "bash", json!({"command": "cargo build"})),
        result(
            3,
            "c1",
            "   Compiling billing v0.3.1\nerror[E0425]: cannot find value `rate` in this scope",
            true,
        ),
    ];
    let out = run(&Summary::default(), &events, 2_000);
    let text = &out.summary.text;
    assert!(
        text.contains("error[E0425]: cannot find value `rate` in this scope"),
        "{text}"
    );
    assert!(!text.contains("Compiling billing"), "{text}");
    assert!(out.summary.anchors.tried_solution.contains("error[E0425]"));
}

/// A compiler run that printed dozens of distinct diagnostics: a small summary names the first
/// few, a larger one more of them, each as it read.
#[test]
fn a_larger_summary_names_more_error_lines_of_a_failed_run() {
    let output: String = (1..=60)
        .map(|i| format!("src/unified.c:{i}:12: error: no member named 'field{i}'\n"))
        .collect();
    let events = [
        user(1, "fix the build"),
        call(2, "c1", "bash", json!({"command": "make"})),
        result(3, "c1", &output, true),
    ];
    let named = |max_chars: usize| {
        let out = run(&Summary::default(), &events, max_chars);
        assert!(out.summary.text.chars().count() <= max_chars);
        (1..=60)
            .filter(|i| {
                let line = format!("src/unified.c:{i}:12: error: no member named 'field{i}'");
                states_error(&out.summary.text, &line)
            })
            .count()
    };
    // The line that says what failed and three more; then one more each 800 characters.
    assert_eq!(named(2_000), 4);
    assert_eq!(named(12_800), 17);
    assert_eq!(named(32_000), 41);
}

/// A build piped through `head` reads as succeeded (its exit status is the pipe's): it names as
/// many of its error lines as a failed run would.
#[test]
fn a_build_that_lost_its_exit_status_names_as_many_errors_as_a_failed_one() {
    let output: String = (1..=40)
        .map(|i| format!("src/unified.c:{i}:12: error: no member named 'field{i}'\n"))
        .collect();
    let named = |failed: bool| {
        let events = [
            user(1, "fix the build"),
            call(2, "c1", "bash", json!({"command": "make 2>&1 | head -80"})),
            result(3, "c1", &output, failed),
        ];
        let out = run(&Summary::default(), &events, 12_800);
        (1..=40)
            .filter(|i| {
                let line = format!("src/unified.c:{i}:12: error: no member named 'field{i}'");
                states_error(&out.summary.text, &line)
            })
            .count()
    };
    assert_eq!(named(true), 17);
    // The line that says what failed is not set apart: one fewer.
    assert_eq!(named(false), 16);
}

/// A test run `n` times that fails the same way each time, from seq `from`, with a distinct
/// build error before it.
fn repeated_failures(from: i64, n: i64) -> Vec<Event> {
    let mut events = Vec::new();
    for i in 0..n {
        let seq = from + 2 * i;
        let id = format!("t{seq}");
        events.push(call(seq, &id, "run_tests", json!({})));
        events.push(result(
            seq + 1,
            &id,
            "test invoice::rounds_half_even ... FAILED\nthread 'invoice::rounds_half_even' panicked at src/invoice.rs:88:5:",
            false,
        ));
    }
    events
}

#[test]
fn an_error_seen_run_after_run_is_listed_once_with_how_often() {
    let mut events = vec![user(1, "make the rounding test pass")];
    events.extend(repeated_failures(2, 3));
    let out = run(&Summary::default(), &events, 4_000);
    let text = &out.summary.text;
    assert_eq!(
        text.matches("test invoice::rounds_half_even ... FAILED")
            .count(),
        1,
        "{text}"
    );
    assert!(
        text.contains("test invoice::rounds_half_even ... FAILED (seen 3 times)"),
        "{text}"
    );
    assert!(
        text.contains("panicked at src/invoice.rs:88:5: (seen 3 times)"),
        "{text}"
    );

    // A later summary reads the count back and adds to it.
    let later = run(&out.summary, &repeated_failures(8, 2), 4_000);
    let text = &later.summary.text;
    assert_eq!(
        text.matches("test invoice::rounds_half_even ... FAILED")
            .count(),
        1,
        "{text}"
    );
    assert!(text.contains("FAILED (seen 5 times)"), "{text}");
}

#[test]
fn an_error_printed_with_other_numbers_or_colours_is_listed_once_as_the_newest() {
    let mut events = vec![user(1, "run the e2e suite")];
    for (i, pid) in [2174, 8425, 47944].into_iter().enumerate() {
        let seq = 2 + 2 * i as i64;
        let id = format!("e{seq}");
        events.push(call(seq, &id, "bash", json!({"command": "pnpm test:e2e"})));
        events.push(result(
            seq + 1,
            &id,
            &format!(
                "[Worker {i}] API ERROR: (node:{pid}) Warning: The 'NO_COLOR' env is ignored\n\
                 \x1b[2K[Worker {i}] API ERROR: (node:{pid}) Warning: The 'NO_COLOR' env is ignored\n\
                 Error: \x1b[2mexpect(\x1b[22m\x1b[31mreceived\x1b[39m).toBe(expected)"
            ),
            false,
        ));
    }
    let out = run(&Summary::default(), &events, 4_000);
    let text = &out.summary.text;
    assert!(
        text.contains("- [Worker 2] API ERROR: (node:47944) Warning: The 'NO_COLOR' env is ignored (seen 6 times)"),
        "{text}"
    );
    assert_eq!(text.matches("API ERROR").count(), 1, "{text}");
    assert!(!text.contains('\u{1b}'), "{text}");
    assert!(
        text.contains("- Error: expect(received).toBe(expected) (seen 3 times)"),
        "{text}"
    );
}

/// A failed run's headline is not listed again as one of its other error lines, however often
/// the run printed it; and two failed runs at two places of a file are two errors.
#[test]
fn a_failed_runs_headline_is_listed_once_and_its_place_kept() {
    let events = vec![
        user(1, "fix the build"),
        call(2, "m1", "bash", json!({"command": "make"})),
        result(3, "m1", "error: x\nerror: x\nerror: y", true),
        call(4, "m2", "bash", json!({"command": "make"})),
        result(5, "m2", "src/a.c:12:5: error: expected ';'", true),
        call(6, "m3", "bash", json!({"command": "make"})),
        result(7, "m3", "src/a.c:40:1: error: expected ';'", true),
    ];
    let out = run(&Summary::default(), &events, 4_000);
    let text = &out.summary.text;
    assert!(text.contains("bash(command=make) → error: x\n"), "{text}");
    assert!(!text.contains("- error: x"), "{text}");
    assert!(text.contains("- error: y"), "{text}");
    assert!(
        text.contains("→ src/a.c:12:5: error: expected ';'"),
        "{text}"
    );
    assert!(
        text.contains("→ src/a.c:40:1: error: expected ';'"),
        "{text}"
    );
}

#[test]
fn a_repeated_failure_leaves_room_for_distinct_errors_in_a_tight_summary() {
    let mut events = vec![
        user(1, "fix the build"),
        call(2, "c1", "bash", json!({"command": "cargo build"})),
        result(
            3,
            "c1",
            "error[E0308]: mismatched types in src/billing/ledger.rs:41",
            true,
        ),
    ];
    events.extend(repeated_failures(4, 12));
    let out = run(&Summary::default(), &events, 1_200);
    let text = &out.summary.text;
    assert!(text.chars().count() <= 1_200);
    assert!(
        text.contains("error[E0308]: mismatched types in src/billing/ledger.rs:41"),
        "{text}"
    );
    assert!(text.contains("FAILED (seen 12 times)"), "{text}");
}

#[test]
fn a_build_with_one_message_at_many_places_names_every_place_in_one_entry() {
    let mut build: Vec<String> = (80..100)
        .map(|line| {
            format!("src/tensor.c:{line}:11: error: invalid use of incomplete typedef ‘tensor_t’")
        })
        .collect();
    build.push("src/kron.c:437:46: error: ‘tensor_t’ has no member named ‘data’".into());
    build.push("collect2: error: ld returned 1 exit status".into());
    let events = [
        user(1, "fix the build"),
        call(2, "c1", "bash", json!({"command": "make"})),
        result(3, "c1", &build.join("\n"), true),
    ];
    // A 16K window's summary: eight error lines for a failed run besides its first.
    let out = run(&Summary::default(), &events, 8_000);
    let text = &out.summary.text;
    let places: Vec<String> = (80..100).map(|line| format!("{line}:11")).collect();
    let entry = format!(
        "src/tensor.c: error: invalid use of incomplete typedef ‘tensor_t’ (at {})",
        places.join(", ")
    );
    assert!(text.contains(&entry), "{text}");
    // The other messages keep their lines.
    assert!(
        text.contains("src/kron.c:437:46: error: ‘tensor_t’ has no member named ‘data’"),
        "{text}"
    );
    assert!(
        text.contains("collect2: error: ld returned 1 exit status"),
        "{text}"
    );

    // The next build's places of the same message join the entry.
    let next = [
        call(4, "c2", "bash", json!({"command": "make"})),
        result(5, "c2", "src/tensor.c:120:3: error: invalid use of incomplete typedef ‘tensor_t’\nsrc/tensor.c:121:3: error: invalid use of incomplete typedef ‘tensor_t’", true),
    ];
    let later = run(&out.summary, &next, 8_000);
    let text = &later.summary.text;
    assert_eq!(
        text.matches("- src/tensor.c: error: invalid use").count(),
        1,
        "{text}"
    );
    assert!(text.contains("99:11, 120:3, 121:3)"), "{text}");
}

#[test]
fn a_tight_summary_drops_old_touched_files_before_a_builds_errors() {
    let mut events = vec![user(1, "port the tensor code")];
    for n in 0..80 {
        let id = format!("r{n}");
        // A directory each: no line lists two of them.
        let path = format!("src/backends/cpu_{n}/module_{n}.c");
        events.push(call(2 + 2 * n, &id, "read_file", json!({ "path": path })));
        events.push(result(3 + 2 * n, &id, "int x;", false));
    }
    let build: Vec<String> = (0..4)
        .map(|n| format!("src/t.c:{}:5: error: unknown type name ‘type_{n}’", 10 + n))
        .collect();
    events.push(call(170, "m", "bash", json!({"command": "make"})));
    events.push(result(171, "m", &build.join("\n"), true));
    // Three error lines of a failed run besides its first, in a summary of 3,000 characters.
    let out = run(&Summary::default(), &events, 3_000);
    let text = &out.summary.text;
    assert!(text.chars().count() <= 3_000, "{text}");
    for n in 0..4 {
        assert!(
            text.contains(&format!("unknown type name ‘type_{n}’")),
            "{text}"
        );
    }
    assert!(!text.contains("module_0.c"), "{text}");
}

/// The errors seen in one file share a line, each with its place (a message seen at many
/// places once, with them all); a message that itself holds the line's separator keeps a line
/// of its own, as does the line that says what a run failed with. A later summary reads the
/// line back as the same errors: a new one of the file joins it, and nothing is listed twice.
#[test]
fn a_files_errors_share_a_line_that_a_later_summary_reads_back() {
    let output = "src/t.c:10:5: error: unknown type name ‘vec_t’\n\
                  src/t.c:20:1: error: expected ‘;’ before ‘}’ token\n\
                  src/t.c:31:9: error: ‘x’ undeclared\n\
                  src/t.c:32:9: error: ‘x’ undeclared\n\
                  src/t.c:40:2: error: conflicting types for ‘f’; have ‘int(void)’\n\
                  src/u.c:3:1: error: stray ‘@’ in program";
    let events = [
        user(1, "fix the build"),
        call(2, "m", "bash", json!({"command": "make"})),
        result(3, "m", output, true),
    ];
    let first = run(&Summary::default(), &events, 8_000).summary;
    let text = &first.text;
    assert!(
        text.contains(
            "- in src/t.c: 20:1: error: expected ‘;’ before ‘}’ token; \
             error: ‘x’ undeclared (at 31:9, 32:9)\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("- src/t.c:40:2: error: conflicting types for ‘f’; have ‘int(void)’\n"),
        "{text}"
    );
    assert!(
        text.contains("- src/u.c:3:1: error: stray ‘@’ in program\n"),
        "{text}"
    );

    let again = [
        call(4, "m2", "bash", json!({"command": "make"})),
        result(
            5,
            "m2",
            "src/t.c:50:3: error: too few arguments to ‘g’\n\
             src/t.c:51:1: error: ‘h’ undeclared",
            true,
        ),
    ];
    let text = run(&first, &again, 8_000).summary.text;
    let line = text
        .lines()
        .find(|l| l.starts_with("- in src/t.c: "))
        .unwrap_or_default();
    for item in [
        "20:1: error: expected ‘;’ before ‘}’ token",
        "error: ‘x’ undeclared (at 31:9, 32:9)",
        "51:1: error: ‘h’ undeclared",
    ] {
        assert!(line.contains(item), "{item}: {text}");
    }
    assert_eq!(text.matches("‘x’ undeclared").count(), 1, "{text}");
    // A call's first error names the call, so it keeps a line of its own.
    assert!(
        text.contains("- bash(command=make) → src/t.c:50:3: error: too few arguments to ‘g’\n"),
        "{text}"
    );
    let same = Summary {
        text: text.clone(),
        ..Summary::default()
    };
    assert_eq!(run(&same, &[], 8_000).summary.text, text);
}

/// Error lines keep at most half of a tight summary while touched files would go for them:
/// past it their oldest go first, so the files the agent worked on since stay named.
#[test]
fn errors_past_half_a_tight_summary_give_way_to_touched_files() {
    let mut events = vec![user(1, "port the tensor code")];
    for n in 0..30 {
        let id = format!("m{n}");
        let command = format!("make unit_{n}");
        let error = format!("src/unit_{n}.c:{n}:5: error: unknown type name ‘kind_{n}’");
        events.push(call(2 + 2 * n, &id, "bash", json!({ "command": command })));
        events.push(result(3 + 2 * n, &id, &error, true));
    }
    for n in 0..30 {
        let id = format!("r{n}");
        let path = format!("src/backends/cpu/module_{n}.c");
        events.push(call(62 + 2 * n, &id, "read_file", json!({ "path": path })));
        events.push(result(63 + 2 * n, &id, "int x;", false));
    }
    let text = run(&Summary::default(), &events, 3_000).summary.text;
    let errors = text
        .split_once("## Errors seen\n")
        .and_then(|(_, rest)| rest.split("\n## ").next())
        .unwrap_or_default();
    assert!(errors.chars().count() <= 1_500, "{text}");
    assert!(!text.contains("‘kind_0’"), "{text}");
    assert!(text.contains("‘kind_29’"), "{text}");
    for n in 15..30 {
        let path = format!("src/backends/cpu/module_{n}.c");
        assert!(lists_file(&text, &path, "read_file"), "{path}: {text}");
    }
}

#[test]
fn a_documents_lines_about_errors_are_no_errors_seen() {
    let shell = |seq: i64, command: &str| {
        call(
            seq,
            &format!("c{seq}"),
            "shell",
            json!({ "command": ["bash", "-lc", command] }),
        )
    };
    let docs = "# Architecture\n- Error format: `{ error: { code, message } }`\n- Error: Clay Red `#B34A3C`\n";
    let log = "vite v5\nError: Failed to resolve import \"./timeline\" from \"tests/t.test.tsx\"\n";
    let events = [
        user(1, "Add tags."),
        shell(2, "cat docs/architecture.md"),
        result(3, "c2", docs, false),
        shell(4, "cat build.log"),
        result(5, "c4", log, false),
    ];
    let out = run(&Summary::default(), &events, 8_000);
    let text = &out.summary.text;
    assert!(text.contains("Failed to resolve import"), "{text}");
    assert!(!text.contains("Error format"), "{text}");
    assert!(!text.contains("Clay Red"), "{text}");
}
