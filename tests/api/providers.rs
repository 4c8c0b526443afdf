//! Views checked against the providers themselves: every view ctxd renders here, in each
//! provider's format and through every kind of compaction, is validated by
//! `scripts/check_views.py` against the request types of the official `openai` and `anthropic`
//! Python SDKs, so that a bug shared by the renderer and ctxd's own validator cannot pass.
//!
//! `scripts/test` installs the SDKs in a virtual environment and sets
//! `CTXD_PROVIDER_PYTHON` to its interpreter.

use std::process::Command;

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::on_both_backends;

/// The interpreter with the providers' SDKs, or a failure that says how to get one.
pub fn provider_python() -> String {
    std::env::var("CTXD_PROVIDER_PYTHON").unwrap_or_else(|_| {
        panic!(
            "CTXD_PROVIDER_PYTHON is not set: run the suite with scripts/test, which installs \
             the official openai and anthropic SDKs in a virtual environment and sets it"
        )
    })
}

/// Runs the SDK check over `views` ({format, view} objects); returns its report.
pub fn check_with_the_sdks(views: &[Value]) -> Result<String, String> {
    let dir = tempfile::tempdir().expect("temporary directory");
    let path = dir.path().join("views.json");
    std::fs::write(&path, serde_json::to_vec(views).expect("JSON")).expect("write views");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/check_views.py");
    let out = Command::new(provider_python())
        .arg(script)
        .arg(&path)
        .output()
        .expect("the provider check runs");
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if out.status.success() {
        Ok(report)
    } else {
        Err(report)
    }
}

fn message(role: &str, content: &str) -> Value {
    json!({"type": "message", "role": role, "content": content})
}

/// One agent turn with whatever real traffic has: parallel calls answered out of order, a
/// result with no output, a failure with and without text, a large result to offload, a call
/// id reused from the turn before.
fn turn(n: usize) -> Vec<Value> {
    // The build's call id is the same every turn, as some clients number calls per turn.
    let (a, b, c) = (format!("a{n}"), "build".to_owned(), format!("c{n}"));
    vec![
        json!({"type": "message", "role": "user", "name": "dev lead", "content": format!("step {n}: build and test")}),
        json!({"type": "message", "role": "assistant", "content": if n % 2 == 0 { "" } else { "Running both." },
            "tool_calls": [
                {"id": a, "name": "shell", "arguments": {"cmd": "mkdir -p build"}},
                {"id": b, "name": "shell", "arguments": "{\"cmd\": \"make test\"}"},
                {"id": c, "name": "read_file", "arguments": {"path": "src/lib.rs"}}]}),
        json!({"type": "message", "role": "tool", "tool_call_id": b, "name": "shell",
            "is_error": n % 3 == 0, "content": if n % 3 == 0 { "" } else { "error: 2 tests failed" }}),
        json!({"type": "message", "role": "tool", "tool_call_id": a, "name": "shell", "content": ""}),
        json!({"type": "message", "role": "tool", "tool_call_id": c, "name": "read_file",
            "content": "fn main() {}\n".repeat(400)}),
        json!({"type": "message", "role": "assistant", "content": format!("Analysis {n}: {}", "the build is flaky. ".repeat(30))}),
    ]
}

/// A 1×1 PNG.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

/// A turn with provider-native parts: an image from the user, thinking and reasoning before a
/// call, a screenshot as the result, a reasoning-only message.
fn parts_turn(n: usize) -> Vec<Value> {
    let id = format!("p{n}");
    vec![
        json!({"type": "message", "role": "user", "content": [
            {"type": "text", "text": format!("step {n}: what does this show?")},
            {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{PNG}"), "detail": "low"}}]}),
        json!({"type": "message", "role": "assistant", "content": [
            {"type": "thinking", "thinking": "Take a screenshot first.", "signature": "c2ln"},
            {"type": "reasoning", "id": format!("rs_{n}"), "summary": [{"type": "summary_text", "text": "screenshot"}],
                "encrypted_content": "gAAAAB"},
            {"type": "text", "text": "Looking."}],
            "tool_calls": [{"id": id, "name": "screenshot", "arguments": {}}]}),
        json!({"type": "message", "role": "tool", "tool_call_id": id, "name": "screenshot", "content": [
            {"type": "text", "text": "the screen"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}]}),
        json!({"type": "message", "role": "assistant", "content": [
            {"type": "redacted_thinking", "data": "ZW5jcnlwdGVk"}]}),
        json!({"type": "message", "role": "assistant", "content": "It shows a login page."}),
        // A file written: long arguments, shown by reference once the tail is over its cap.
        json!({"type": "message", "role": "assistant", "content": "Writing the test.",
            "tool_calls": [{"id": format!("w{n}"), "name": "write_file",
                "arguments": {"path": format!("tests/t{n}.rs"), "content": "#[test]\nfn t() {}\n".repeat(200)}}]}),
        json!({"type": "message", "role": "tool", "tool_call_id": format!("w{n}"), "name": "write_file", "content": "ok"}),
        json!({"type": "message", "role": "assistant", "content": "Written."}),
    ]
}

on_both_backends! {
    async fn every_view_passes_the_providers_own_request_types(app) {
        let id = app.create_session(json!({"config": {
            "context_window": 6000, "max_output_tokens": 500, "tokenizer": "chars4",
            "min_tail_messages": 4, "offload_threshold_chars": 400,
            // Results stay whole while new, so the view climbs through the tiers.
            "item_max_share": 0.3
        }})).await;
        let mut views = Vec::new();
        let compact = |body: Value| {
            let app = &app;
            let id = id.clone();
            async move {
                let reply = app.post(&format!("/sessions/{id}/compact"), &body).await;
                assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
                reply.body
            }
        };
        let opening = json!([
            message("system", "You are a careful coding agent."),
            {"type": "note", "content": "Never push to main.", "pinned": true},
            {"type": "episode_start", "name": "setup", "kind": "exploration"},
        ]);
        assert_eq!(app.append(&id, opening).await.status, StatusCode::CREATED);
        let mut tiers = std::collections::BTreeSet::new();
        for n in 0..12 {
            assert_eq!(app.append(&id, Value::Array(turn(n))).await.status, StatusCode::CREATED);
            let reply = app.append(&id, Value::Array(parts_turn(n))).await;
            assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
            if n == 3 {
                app.append(&id, json!([{"type": "episode_end", "name": "setup", "conclusion": "the build works"}])).await;
            }
            let bodies = [
                json!({"format": "openai"}),
                json!({"format": "anthropic", "mode": "dry_run"}),
                json!({"format": "anthropic", "overflow_retry": n % 3}),
                json!({"format": "openai", "mode": if n == 5 { "force" } else { "auto" }}),
                json!({"format": "openai_responses", "mode": "dry_run"}),
            ];
            for body in bodies {
                let format = body["format"].clone();
                let out = compact(body).await;
                tiers.insert(out["record"]["tier"].as_str().unwrap_or_default().to_owned());
                views.push(json!({"format": format, "view": out["view"]}));
            }
        }
        // A call still waiting for its result when the view is asked for.
        app.append(&id, json!([{"type": "message", "role": "assistant",
            "tool_calls": [{"id": "pending", "name": "shell", "arguments": {"cmd": "sleep 60"}}]}])).await;
        for format in ["openai", "openai_responses", "anthropic"] {
            let out = compact(json!({"format": format})).await;
            views.push(json!({"format": format, "view": out["view"]}));
        }
        assert!(tiers.len() >= 3, "the session went through several tiers: {tiers:?}");
        let archived = views.iter().filter(|v| v["view"].to_string().contains("archived_arguments")).count();
        assert!(archived > 0, "no view showed a call's arguments by reference");

        let report = check_with_the_sdks(&views).unwrap_or_else(|report| panic!("{report}"));
        assert!(report.contains(&format!("{} views checked, 0 failed", views.len())), "{report}");
    }
}

/// The check is no formality: views that break the providers' types fail it.
#[test]
fn the_sdk_check_refuses_what_the_providers_refuse() {
    let broken = [
        // A tool message that names no call.
        json!({"format": "openai", "view": {"messages": [{"role": "tool", "content": "x"}]}}),
        // Tool-call arguments as an object (OpenAI takes a JSON string).
        json!({"format": "openai", "view": {"messages": [{"role": "assistant", "content": null,
            "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": {}}}]}]}}),
        // A field Anthropic's blocks do not have.
        json!({"format": "anthropic", "view": {"messages": [{"role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "c", "is_failure": true}]}]}}),
        // A role Anthropic's messages do not have.
        json!({"format": "anthropic", "view": {"messages": [{"role": "tool", "content": "x"}]}}),
        // A key a thinking block does not have (Anthropic's message type also takes its
        // response models, which let it through: each block is checked on its own too).
        json!({"format": "anthropic", "view": {"messages": [{"role": "assistant", "content": [
            {"type": "thinking", "thinking": "x", "signature": "s", "bogus": 1}]}]}}),
        // A reasoning item without its summary list; a chat-style tool message in Responses.
        json!({"format": "openai_responses", "view": {"input": [{"type": "reasoning", "id": "rs"}]}}),
        json!({"format": "openai_responses", "view": {"input": [
            {"role": "tool", "tool_call_id": "c", "content": "x"}]}}),
        // A call id used twice in one request.
        json!({"format": "openai_responses", "view": {"input": [
            {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c", "output": "ok"},
            {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c", "output": "ok"}]}}),
        json!({"format": "anthropic", "view": {"messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "c", "name": "f", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c", "content": "ok"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "c", "name": "f", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c", "content": "ok"}]}]}}),
    ];
    for view in broken {
        let report = check_with_the_sdks(std::slice::from_ref(&view));
        assert!(report.is_err(), "accepted {view}: {report:?}");
    }
    let fine = [
        json!({"format": "anthropic", "view": {"system": "s", "messages": [
            {"role": "user", "content": [{"type": "text", "text": "hi"}]}]}}),
        json!({"format": "openai_responses", "view": {"input": [
            {"type": "reasoning", "id": "rs", "summary": [], "encrypted_content": "gAAA"},
            {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c", "output": "ok"}]}}),
    ];
    let report = check_with_the_sdks(&fine);
    assert!(report.is_ok(), "{report:?}");
}
