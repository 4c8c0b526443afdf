//! What `ctxd replay` checks and lets one choose: the committed replay set through every ctxd
//! policy and every baseline with every must-be-0 figure at 0; the providers' SDKs asked about
//! every view in every format (and a refusal counted); the policy, view format and tool
//! schemas as options; facts turn by turn.

use std::process::{Command, Output};

use serde_json::Value;

use crate::providers::provider_python;
use crate::replay::fixtures;

fn ctxd_replay(args: &[&str], files: &[String]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ctxd"))
        .arg("replay")
        .args(args)
        .args(files)
        .output()
        .expect("ctxd replay runs")
}

fn report(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not a JSON report ({e}): {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// The policies the API offers, as the committed OpenAPI document lists them.
fn policies() -> Vec<String> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/openapi/openapi.json");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let policies = doc["components"]["schemas"]["Policy"]["enum"]
        .as_array()
        .expect("the Policy schema lists the policies");
    policies
        .iter()
        .map(|p| p.as_str().unwrap().to_owned())
        .collect()
}

/// Every figure that must be 0 is 0 in `r` (a session's or a total's report).
fn assert_clean(what: &str, r: &Value) {
    for figure in ["over_budget", "invalid_views", "unexplained_items"] {
        assert_eq!(r[figure], 0, "{what}: {figure}: {r}");
    }
    assert_eq!(r["errors"], serde_json::json!([]), "{what}: {r}");
}

/// The committed set (recorded and synthetic sessions), through each ctxd policy and every
/// baseline, in a window they all compact in, every view checked against the providers' SDKs.
#[test]
fn the_committed_set_passes_every_policy_and_baseline() {
    let python = provider_python();
    let files = fixtures();
    assert!(
        files.iter().any(|f| f.contains("synth_")),
        "synthetic sessions are in the set: {files:?}"
    );
    for policy in policies() {
        let out = ctxd_replay(
            &[
                "--json",
                "--compare",
                "--policy",
                &policy,
                "--window",
                "8000",
                "--reserved-output",
                "1000",
                "--provider-python",
                &python,
            ],
            &files,
        );
        let report = report(&out);
        assert!(out.status.success(), "{policy}: {report}");
        assert_eq!(report["policy"], policy.as_str());
        let check = report["provider_check"].as_str().unwrap();
        assert!(check.starts_with("every view"), "{check}");
        let sessions = report["sessions"].as_array().unwrap();
        assert_eq!(sessions.len(), files.len());
        for session in sessions {
            assert_clean(&format!("{policy}, {}", session["session"]), session);
        }
        let total = &report["total"];
        assert_clean(&policy, total);
        assert!(
            total["compactions"].as_object().unwrap().len() > 1,
            "more than one tier acted: {total}"
        );
        // The synthetic sessions' planted facts were looked for, from their facts files.
        let planted = total["facts_end"]["planted"][1].as_u64().unwrap();
        assert_eq!(planted, 8, "four facts in each of two synthetic sessions");
        let baselines = report["baselines"].as_object().unwrap();
        assert_eq!(baselines.len(), 4);
        for (name, b) in baselines {
            assert_eq!(b["invalid_views"], 0, "{name}: {b}");
            assert_eq!(b["errors"], serde_json::json!([]), "{name}: {b}");
            if name != "no_compaction" {
                assert_eq!(b["over_budget"], 0, "{name}: {b}");
            }
        }
    }
}

/// Facts per turn: every session's report, ctxd's and each baseline's, has one point a turn,
/// the last holding what the session's end figure holds.
#[test]
fn facts_are_reported_turn_by_turn() {
    let files = fixtures();
    let out = ctxd_replay(
        &[
            "--json",
            "--compare",
            "--window",
            "8000",
            "--reserved-output",
            "1000",
        ],
        &files[..2],
    );
    let report = report(&out);
    assert!(out.status.success(), "{report}");
    let mut reports: Vec<&Value> = report["sessions"].as_array().unwrap().iter().collect();
    for sessions in report["baseline_sessions"].as_object().unwrap().values() {
        reports.extend(sessions.as_array().unwrap());
    }
    assert_eq!(reports.len(), 2 * 5);
    let mut named_missed = 0;
    for r in reports {
        let turns = r["per_turn"].as_array().unwrap();
        assert_eq!(turns.len() as u64, r["turns"].as_u64().unwrap());
        assert!(turns.len() > 3);
        for (i, t) in turns.iter().enumerate() {
            assert_eq!(t["turn"], i + 1);
            let share = t["facts_kept"].as_f64().unwrap();
            assert!((0.0..=1.0).contains(&share), "{t}");
        }
        let last = turns.last().unwrap();
        assert_eq!(last["facts"], r["facts_end"], "{}", r["session"]);
        // The facts the last view misses are named, as many of each kind as it does not hold.
        for (kind, pair) in r["facts_end"].as_object().unwrap() {
            let missed = r["facts_missed_end"][kind].as_array().unwrap();
            let (kept, of) = (pair[0].as_u64().unwrap(), pair[1].as_u64().unwrap());
            assert_eq!(missed.len() as u64, of - kept, "{kind} of {}", r["session"]);
            named_missed += missed.len();
        }
    }
    // Sliding truncation drops the first request of these sessions at least.
    assert!(named_missed > 0);
    // The total is a sum, not a series.
    assert!(report["total"].get("per_turn").is_none());
}

/// A view the providers' SDKs refuse counts as invalid, in its format, and fails the replay:
/// here a stand-in for the SDK check that refuses everything.
#[test]
fn a_view_the_providers_refuse_fails_the_replay() {
    let dir = tempfile::tempdir().unwrap();
    let refuser = dir.path().join("refuse-everything");
    std::fs::write(
        &refuser,
        "#!/bin/sh\necho 'ready refusing 0'\nwhile read -r line; do echo 'refused not today'; done\n",
    )
    .unwrap();
    let executable = std::os::unix::fs::PermissionsExt::from_mode(0o755);
    std::fs::set_permissions(&refuser, executable).unwrap();
    let files = fixtures();
    let refuser = refuser.to_str().unwrap();
    let out = ctxd_replay(&["--json", "--provider-python", refuser], &files[..1]);
    assert!(!out.status.success());
    let report = report(&out);
    let total = &report["total"];
    let turns = total["turns"].as_u64().unwrap();
    assert_eq!(
        total["invalid_views"].as_u64().unwrap(),
        3 * turns,
        "{total}"
    );
    for format in ["openai", "openai_responses", "anthropic"] {
        assert_eq!(total["invalid_by_format"][format].as_u64(), Some(turns));
    }
    let problems = total["problems"].as_array().unwrap();
    assert!(
        problems[0].as_str().unwrap().contains("SDK: not today"),
        "{problems:?}"
    );

    // An interpreter without the SDKs is an error that says so, before anything is replayed.
    let out = ctxd_replay(&["--provider-python", "/bin/false"], &files[..1]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("cannot check views"), "{stderr}");
}

/// Without a Python the SDK check is skipped, and the report says so.
#[test]
fn a_replay_without_python_says_the_provider_check_was_skipped() {
    let out = Command::new(env!("CARGO_BIN_EXE_ctxd"))
        .args(["replay", "--window", "8000", "--reserved-output", "1000"])
        .args(&fixtures()[..1])
        .env_remove("CTXD_PROVIDER_PYTHON")
        .output()
        .unwrap();
    assert!(out.status.success());
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("provider check: skipped"),
        "the table says the check was skipped: {table}"
    );
}

/// `--policy`, `--format` and `--tokenizer` take only what the API offers, and say what that is.
#[test]
fn unknown_choices_are_refused_with_the_choices() {
    let files = fixtures();
    for (option, listed) in [
        ("--policy", "progressive"),
        ("--format", "openai, openai_responses, anthropic, raw"),
        ("--tokenizer", "o200k_base"),
    ] {
        let out = ctxd_replay(&[option, "magic"], &files[..1]);
        assert!(!out.status.success());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("`magic`") && stderr.contains(listed),
            "{option}: {stderr}"
        );
    }
}

/// Tool schemas are sent with every turn and count in the budget; the view measured may be
/// in any format.
#[test]
fn tools_count_in_the_budget_and_any_format_is_measured() {
    let files = fixtures();
    let dir = tempfile::tempdir().unwrap();
    let tools = dir.path().join("tools.json");
    let schema = serde_json::json!({"type": "function", "function": {"name": "run_shell",
        "description": "Runs a shell command. ".repeat(100),
        "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}}});
    std::fs::write(&tools, serde_json::json!({ "tools": [schema] }).to_string()).unwrap();
    let run = |extra: &[&str]| {
        let mut args = vec!["--json", "--window", "8000", "--reserved-output", "1000"];
        args.extend(extra);
        let out = ctxd_replay(&args, &files[..1]);
        let report = report(&out);
        assert!(out.status.success(), "{extra:?}: {report}");
        report
    };
    let plain = run(&["--compare"]);
    let with_tools = run(&["--compare", "--tools", tools.to_str().unwrap()]);
    let (a, b) = (&plain["total"], &with_tools["total"]);
    // The first view, before any compaction, sends the schemas on top of the same messages;
    // so do the baselines'.
    let first = |report: &Value, baseline: Option<&str>| {
        let session = match baseline {
            Some(name) => &report["baseline_sessions"][name][0],
            None => &report["sessions"][0],
        };
        session["per_turn"][0]["tokens_sent"].as_i64().unwrap()
    };
    for baseline in [None, Some("chunked_truncation"), Some("no_compaction")] {
        let extra = first(&with_tools, baseline) - first(&plain, baseline);
        assert!(
            (450..700).contains(&extra),
            "{baseline:?}: the schemas cost {extra}"
        );
    }
    assert!(b["mean_utilization"].as_f64() > a["mean_utilization"].as_f64());
    assert_clean("with tools", b);

    for format in ["anthropic", "openai_responses", "raw"] {
        let report = run(&["--format", format]);
        assert_eq!(report["format"], format);
        let total = &report["total"];
        assert_clean(format, total);
        // The same compactions, whatever the format measured.
        assert_eq!(total["compactions"], a["compactions"], "{format}");
        assert!(
            total["prefix_stability"].as_f64().unwrap() > 0.5,
            "{format}"
        );
    }

    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "[1, 2]").unwrap();
    let out = ctxd_replay(&["--tools", bad.to_str().unwrap()], &files[..1]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("tool schemas"));
}
