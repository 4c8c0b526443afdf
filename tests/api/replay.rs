//! `ctxd replay` over committed recorded sessions (tests/fixtures/replay): the binary replays
//! them turn by turn against a ctxd it starts itself and against a running one, in a window
//! small enough that they compact; no view may be over budget or invalid, and the figures it
//! reports must be consistent.

use std::process::Command;

use serde_json::Value;

use crate::on_both_backends;

/// The committed replay set: recorded and synthetic sessions.
pub fn fixtures() -> Vec<String> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/replay");
    let mut files: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .map(|p| p.display().to_string())
        .collect();
    files.sort();
    files
}

fn replay(window: &str, extra: &[&str]) -> (bool, Value) {
    let out = Command::new(env!("CARGO_BIN_EXE_ctxd"))
        .args([
            "replay",
            "--json",
            "--window",
            window,
            "--reserved-output",
            "1000",
        ])
        .args(extra)
        .args(fixtures())
        .output()
        .expect("ctxd replay runs");
    let report = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not a JSON report ({e}): {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.success(), report)
}

/// `ctxd replay --json` of one `file` with `args`, which must succeed: its report.
fn replay_file(args: &[&str], file: &std::path::Path) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_ctxd"))
        .args(["replay", "--json"])
        .args(args)
        .arg(file)
        .output()
        .expect("ctxd replay runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("a JSON report")
}

/// Compactions that acted, over every tier.
fn acted(total: &Value) -> u64 {
    let tiers = total["compactions"]
        .as_object()
        .expect("compactions by tier");
    tiers.values().filter_map(Value::as_u64).sum()
}

fn check(report: &Value) {
    let total = &report["total"];
    assert_eq!(
        report["sessions"].as_array().unwrap().len(),
        fixtures().len()
    );
    assert_eq!(total["over_budget"], 0, "{total}");
    assert_eq!(total["invalid_views"], 0, "{total}");
    assert_eq!(total["unexplained_items"], 0, "{total}");
    assert_eq!(total["errors"], serde_json::json!([]), "{total}");
    let sent = total["tokens_sent"].as_f64().unwrap();
    let effective = total["effective_input_cost"].as_f64().unwrap();
    assert!(
        effective > 0.0 && effective < sent,
        "caching pays: {effective} of {sent}"
    );
    let stability = total["prefix_stability"].as_f64().unwrap();
    assert!(stability > 0.5 && stability <= 1.0, "{stability}");
    let facts = total["facts_kept_end"].as_f64().unwrap();
    assert!(facts > 0.0 && facts <= 1.0, "{facts}");
    let acted = acted(total);
    assert!(acted > 0, "the window is small enough to compact: {total}");
    assert!(total["peak_utilization"].as_f64().unwrap() <= 1.0);
    // Each session's prefix stability is the share of its turns whose view extends the last.
    for session in report["sessions"].as_array().unwrap() {
        let turns = session["per_turn"].as_array().unwrap();
        let extends = turns.iter().filter(|t| t["extends"] == true).count();
        assert_eq!(turns[0]["extends"], false, "the first view extends nothing");
        let stability = session["prefix_stability"].as_f64().unwrap();
        let share = extends as f64 / (turns.len().max(2) - 1) as f64;
        assert!((share - stability).abs() < 1e-9, "{share} vs {stability}");
    }
}

#[test]
fn replay_reports_what_the_views_cost_and_keep() {
    let (ok, report) = replay("6000", &[]);
    assert!(ok, "{report}");
    check(&report);
    assert!(report.get("baselines").is_none());
}

/// With --compare, the baselines are measured on the same history, beside ctxd's figures: every
/// view valid, the truncations within the window, no compaction over it.
#[test]
fn replay_compares_the_plain_baselines() {
    let dir = tempfile::tempdir().unwrap();
    let chart = dir.path().join("replay.svg");
    let (ok, report) = replay("6000", &["--compare", "--chart", chart.to_str().unwrap()]);
    assert!(ok, "{report}");
    check(&report);
    let baselines = report["baselines"].as_object().expect("baselines");
    let names: Vec<&str> = baselines.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "chunked_truncation",
            "no_compaction",
            "observation_masking",
            "sliding_truncation"
        ]
    );
    for (name, b) in baselines {
        assert_eq!(b["invalid_views"], 0, "{name}: {b}");
        assert_eq!(b["turns"], report["total"]["turns"], "{name}");
        let over = b["over_budget"].as_u64().unwrap();
        if name == "no_compaction" {
            assert!(over > 0, "the sessions outgrow the window");
            // A view of the whole history hides nothing the agent uses next.
            assert_eq!(b["hidden_uses"], 0, "{b}");
            assert_eq!(b["recall_cost"], 0.0, "{b}");
        } else {
            assert_eq!(over, 0, "{name}");
        }
    }
    // The chart: both panels' line for ctxd's policy and each baseline, compactions marked.
    let svg = std::fs::read_to_string(&chart).expect("the chart is written");
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    assert_eq!(svg.matches("<polyline").count(), 2 * 5);
    let acted = acted(&report["total"]);
    assert_eq!(svg.matches("compaction at turn").count() as u64, acted);
    // Chunked truncation keeps its prefix longest; sliding truncation re-sends the most.
    let stability = |n: &str| baselines[n]["prefix_stability"].as_f64().unwrap();
    assert!(stability("chunked_truncation") > stability("sliding_truncation"));
}

/// With --compare, the figures a policy is judged on are pooled over the sessions that outgrow
/// the window (those the no-compaction baseline sends over budget) and set against the
/// baselines over the same sessions; a session that fits is left out of them.
#[test]
fn replay_pools_the_sessions_that_outgrow_the_window() {
    let (ok, report) = replay("6000", &["--compare"]);
    assert!(ok, "{report}");
    let of = |baseline: &str| {
        report["baseline_sessions"][baseline]
            .as_array()
            .unwrap()
            .clone()
    };
    let sessions = report["sessions"].as_array().unwrap();
    let outgrow: Vec<usize> = (0..sessions.len())
        .filter(|&i| of("no_compaction")[i]["over_budget"].as_u64().unwrap() > 0)
        .collect();
    assert!(
        !outgrow.is_empty() && outgrow.len() < sessions.len(),
        "the set mixes sessions that fit the window and sessions that do not"
    );
    let pooled = &report["outgrowing"];
    assert_eq!(pooled["sessions"], outgrow.len(), "{pooled}");
    let names: Vec<&Value> = outgrow.iter().map(|&i| &sessions[i]["session"]).collect();
    assert_eq!(
        pooled["names"]
            .as_array()
            .unwrap()
            .iter()
            .collect::<Vec<_>>(),
        names
    );
    let sum = |reports: &[Value], field: &str| -> f64 {
        outgrow
            .iter()
            .map(|&i| reports[i][field].as_f64().unwrap())
            .sum()
    };
    let cost = sum(sessions, "effective_input_cost")
        / sum(&of("chunked_truncation"), "effective_input_cost");
    let close = |a: &Value, b: f64| (a.as_f64().unwrap() - b).abs() < 1e-9;
    assert!(
        close(&pooled["cost_vs_chunked"], cost),
        "{pooled} vs {cost}"
    );
    // Facts pooled as kept over all, by kind, over the same sessions.
    let facts = |reports: &[Value]| -> f64 {
        let (mut kept, mut all) = (0, 0);
        for &i in &outgrow {
            for pair in reports[i]["facts_end"].as_object().unwrap().values() {
                kept += pair[0].as_u64().unwrap();
                all += pair[1].as_u64().unwrap();
            }
        }
        kept as f64 / all as f64
    };
    let ours = facts(sessions);
    let best = facts(&of("sliding_truncation")).max(facts(&of("chunked_truncation")));
    assert!(close(&pooled["facts_kept_end"], ours), "{pooled} vs {ours}");
    assert!(
        close(&pooled["best_truncation_facts"], best),
        "{pooled} vs {best}"
    );
    assert!(close(&pooled["facts_margin"], ours - best), "{pooled}");
    assert_eq!(pooled["failures"], 0, "{pooled}");
    assert!(pooled["compactions"].as_u64().unwrap() > 0, "{pooled}");

    // In a window every session fits, none outgrows it and there is nothing to pool.
    let (ok, report) = replay("1000000", &["--compare"]);
    assert!(ok, "{report}");
    assert!(
        report.get("outgrowing").is_none(),
        "{}",
        report["outgrowing"]
    );
}

/// How many sessions `app` holds.
async fn sessions(app: &crate::support::TestApp) -> usize {
    app.get("/sessions").await.body["sessions"]
        .as_array()
        .unwrap()
        .len()
}

on_both_backends! {
    async fn replay_is_a_client_of_any_running_ctxd(app) {
        let base = app.url("");
        let server = base.clone();
        let (ok, report) = tokio::task::spawn_blocking(move || replay("6000", &["--server", &server])).await.unwrap();
        assert!(ok, "{report}");
        check(&report);
        assert_eq!(sessions(&app).await, 0, "a replay deletes what it replayed");
        let (ok, report) = tokio::task::spawn_blocking(move || replay("6000", &["--server", &base, "--keep-sessions"])).await.unwrap();
        assert!(ok, "{report}");
        assert_eq!(sessions(&app).await, fixtures().len(), "--keep-sessions leaves them to inspect");
    }
}

/// A view the checks refuse makes the exit status 1: here, a window no view can fit.
#[test]
fn a_failure_is_the_exit_status() {
    let (ok, report) = replay("1500", &[]);
    assert!(!ok);
    assert!(
        !report["total"]["errors"].as_array().unwrap().is_empty(),
        "{report}"
    );
}

/// Anthropic message lists (here the Claude-Code-like session of the turn tests) replay too.
#[test]
fn anthropic_sessions_replay_too() {
    let file = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/turns/claude_code_thinking.json"
    );
    let report = replay_file(&["--compare", "--window", "16000"], file.as_ref());
    let total = &report["total"];
    assert!(total["turns"].as_u64().unwrap() > 40, "{total}");
    assert_eq!(total["over_budget"], 0);
    let acted = acted(total);
    assert!(acted > 0);
}

/// `ctxd synth` writes the same session for the same seed, and `replay --facts` looks for the
/// facts it planted in every view.
#[test]
fn synthetic_sessions_replay_with_their_planted_facts() {
    let dir = tempfile::tempdir().unwrap();
    let (session, facts) = (dir.path().join("s.jsonl"), dir.path().join("s.facts"));
    let synth = |out: &std::path::Path| {
        let status = Command::new(env!("CARGO_BIN_EXE_ctxd"))
            .args([
                "synth", "--kind", "coding", "--turns", "60", "--seed", "11", "--out",
            ])
            .arg(out)
            .arg("--facts")
            .arg(&facts)
            .status()
            .unwrap();
        assert!(status.success());
    };
    synth(&session);
    let again = dir.path().join("again.jsonl");
    synth(&again);
    assert_eq!(
        std::fs::read(&session).unwrap(),
        std::fs::read(&again).unwrap()
    );
    let facts = facts.to_str().unwrap();
    let report = replay_file(&["--window", "16000", "--facts", facts], &session);
    let planted = &report["total"]["facts_end"]["planted"];
    assert_eq!(planted[1], 4, "four facts planted: {planted}");
    assert!(planted[0].as_u64().unwrap() >= 1, "{planted}");
    assert_eq!(report["total"]["over_budget"], 0);
}

/// `ctxd synth --episodes` writes a coding session annotated with episodes, which replay
/// appends as events between turns: ctxd takes every one (a broken one fails the replay), and
/// the episodic policy replays it with every must-be-0 figure at 0.
#[test]
fn annotated_sessions_replay_with_their_episodes() {
    let dir = tempfile::tempdir().unwrap();
    let session = dir.path().join("e.jsonl");
    let status = Command::new(env!("CARGO_BIN_EXE_ctxd"))
        .args([
            "synth",
            "--kind",
            "coding",
            "--turns",
            "60",
            "--seed",
            "5",
            "--episodes",
            "--out",
        ])
        .arg(&session)
        .status()
        .unwrap();
    assert!(status.success());
    let text = std::fs::read_to_string(&session).unwrap();
    assert!(text.contains(r#""type":"episode_start""#) && text.contains(r#""kind":"action""#));
    let replay = |file: &std::path::Path| {
        Command::new(env!("CARGO_BIN_EXE_ctxd"))
            .args([
                "replay", "--json", "--window", "16000", "--policy", "episodic",
            ])
            .arg(file)
            .output()
            .unwrap()
    };
    let out = replay(&session);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    for figure in ["over_budget", "invalid_views", "unexplained_items"] {
        assert_eq!(report["total"][figure], 0, "{figure}");
    }
    assert!(report["total"]["errors"].as_array().unwrap().is_empty());

    // An exploration that names a dependency breaks a rule: the append is refused, and the
    // replay says so.
    let broken = dir.path().join("broken.jsonl");
    let bad = text.replacen(r#""dependencies":[]"#, r#""dependencies":["nothing"]"#, 1);
    std::fs::write(&broken, bad).unwrap();
    let out = replay(&broken);
    assert!(!out.status.success());
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let errors = report["total"]["errors"].to_string();
    assert!(
        errors.contains("`nothing` names no earlier episode"),
        "{errors}"
    );
}

/// A turn whose view hid what the agent used next is counted and priced: a file read too
/// large for the window reaches the model as its head and tail, and the agent's next message
/// names a function from its middle, which it could only have had by recalling the read.
/// Without compaction the whole read is shown and nothing is hidden.
#[test]
fn replay_counts_a_view_that_hid_what_the_agent_used_next() {
    use serde_json::json;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("session.jsonl");
    let listing: String = (0..400)
        .map(|i| format!("fn handler_{i:04}(request: &Request) -> Response {{ route({i}) }}\n"))
        .collect();
    let call = json!({"id": "c1", "type": "function",
        "function": {"name": "read_file", "arguments": "{\"path\": \"src/routes.rs\"}"}});
    let messages = [
        json!({"role": "system", "content": "You are a coding agent."}),
        json!({"role": "user", "content": "Which handler routes 250?"}),
        json!({"role": "assistant", "content": null, "tool_calls": [call]}),
        json!({"role": "tool", "tool_call_id": "c1", "content": listing}),
        json!({"role": "assistant", "content": "handler_0250 routes it; handler_0000 is first."}),
    ];
    let lines: Vec<String> = messages.iter().map(Value::to_string).collect();
    std::fs::write(&file, lines.join("\n")).unwrap();
    let report = replay_file(&["--compare", "--window", "16000"], &file);
    let session = &report["sessions"][0];
    assert_eq!(session["hidden_uses"], 1, "{session}");
    assert_eq!(session["recalls"], 1, "{session}");
    // One more request: at least the view again at the cache price, and the read's slice.
    let last = session["per_turn"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    let sent = last["tokens_sent"].as_f64().unwrap();
    let cost = session["recall_cost"].as_f64().unwrap();
    assert!(cost > sent * 0.1, "{cost} vs a view of {sent}");
    let whole = &report["baseline_sessions"]["no_compaction"][0];
    assert_eq!(whole["hidden_uses"], 0, "{whole}");
    assert_eq!(whole["recall_cost"], 0.0, "{whole}");
}
