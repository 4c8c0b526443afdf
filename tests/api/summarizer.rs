//! The summariser never stands in the agent's way: a slow, down, failing or unhelpful model
//! makes a compaction fall back to the deterministic summary, never fail; the record says what
//! happened; the API key never leaves; and nothing the user said is lost.

use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::support::{Backend, TestApp};

const KEY: &str = "sk-leak-check-5f0c2a9e71";

/// A loopback OpenAI-compatible provider: `answer(n)` gives the status and body of the n-th
/// request, after `delay`. Returns its base URL and the count of requests it received.
async fn provider(
    delay: Duration,
    answer: impl Fn(usize) -> (u16, String) + Clone + Send + Sync + 'static,
) -> (String, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = calls.clone();
    let app = axum::Router::new().fallback(move || {
        let (answer, seen) = (answer.clone(), seen.clone());
        async move {
            let n = seen.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(delay).await;
            let (status, body) = answer(n);
            (axum::http::StatusCode::from_u16(status).unwrap(), body)
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, calls)
}

/// A chat completion whose content is `content`.
fn completion(content: &str) -> String {
    json!({"choices": [{"message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 900, "completion_tokens": 60}})
    .to_string()
}

async fn with_model(backend: Backend, base_url: String, timeout: Duration) -> TestApp {
    TestApp::spawn_with_openai_model(backend, base_url, Some(KEY), timeout).await
}

async fn session(app: &TestApp) -> String {
    app.create_session(json!({"config": {
        "context_window": 8000, "max_output_tokens": 500, "tokenizer": "chars4",
        "min_tail_messages": 4, "offload_threshold_chars": 400
    }}))
    .await
}

fn user(text: &str) -> Value {
    json!({"type": "message", "role": "user", "content": text})
}

/// Events a forced compaction folds: tool exchanges after a request.
fn work(tag: &str) -> Value {
    let mut batch = vec![user(&format!("{tag}: look at the logs"))];
    for i in 0..4 {
        let id = format!("{tag}{i}");
        batch.push(json!({"type": "message", "role": "assistant",
            "tool_calls": [{"id": id, "name": "shell", "arguments": {"cmd": format!("cat {id}.log")}}]}));
        batch.push(
            json!({"type": "message", "role": "tool", "tool_call_id": id, "name": "shell",
            "content": "log line\n".repeat(40)}),
        );
    }
    batch.push(user(&format!("{tag}: go on")));
    Value::Array(batch)
}

/// Forces a compaction; it must answer 200 whatever the model does.
async fn force(app: &TestApp, id: &str) -> Value {
    let reply = app
        .post(
            &format!("/sessions/{id}/compact"),
            &json!({"mode": "force"}),
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    reply.body
}

async fn summarise_once(app: &TestApp) -> Value {
    let id = session(app).await;
    app.append(&id, work("first")).await;
    force(app, &id).await["record"].clone()
}

async fn slow_and_down_models(backend: Backend) {
    let (slow, _) = provider(Duration::from_secs(10), |_| (200, completion("{}"))).await;
    let app = with_model(backend, slow, Duration::from_millis(500)).await;
    // The answer comes back without the model's: it timed out (it answers after 10 s).
    let record = summarise_once(&app).await;
    let info = &record["summarizer"];
    assert_eq!(info["kind"], "deterministic", "{record}");
    assert_eq!(info["outcome"], "fallback");
    assert_eq!(info["fallback_reason"], "timeout");
    assert_eq!(info["attempts"], 1);

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let down = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let app = with_model(backend, down, Duration::from_secs(5)).await;
    let record = summarise_once(&app).await;
    assert_eq!(record["summarizer"]["outcome"], "fallback", "{record}");
    assert_eq!(record["summarizer"]["fallback_reason"], "unreachable");
    assert!(record["summary_text"]
        .as_str()
        .unwrap()
        .contains("first: look at the logs"));
}

#[tokio::test]
async fn a_slow_or_down_model_never_fails_a_compaction_sqlite() {
    slow_and_down_models(Backend::Sqlite).await;
}

#[tokio::test]
async fn a_slow_or_down_model_never_fails_a_compaction_postgres() {
    slow_and_down_models(Backend::Postgres).await;
}

async fn circuit(backend: Backend) {
    let (url, calls) = provider(Duration::ZERO, |_| (503, "overloaded".into())).await;
    let app = with_model(backend, url, Duration::from_secs(5)).await;
    let id = session(&app).await;
    let mut reasons = Vec::new();
    for round in 0..4 {
        app.append(&id, work(&format!("round{round}"))).await;
        let record = force(&app, &id).await["record"].clone();
        reasons.push((
            record["summarizer"]["fallback_reason"].clone(),
            record["summarizer"]["attempts"].clone(),
        ));
    }
    assert_eq!(
        reasons,
        [
            (json!("http_status"), json!(1)),
            (json!("http_status"), json!(1)),
            (json!("http_status"), json!(1)),
            (json!("circuit_open"), json!(0)),
        ]
    );
    assert_eq!(
        calls.load(Ordering::SeqCst),
        3,
        "an open circuit calls no model"
    );
}

/// A model that answers 200 KB, then one that answers 429 with a long Retry-After.
async fn huge_and_throttled(backend: Backend) {
    let anchors = json!({"user_intent": "look at the logs", "execution_progress": "read logs",
        "key_decision": "N/A", "tried_solution": "N/A", "next_step": "go on"});
    let huge =
        json!({"summary": "the logs say retry. ".repeat(10_000), "anchors": anchors}).to_string();
    assert!(huge.len() > 200_000);
    let (url, _) = provider(Duration::ZERO, move |_| (200, completion(&huge))).await;
    let app = with_model(backend, url, Duration::from_secs(5)).await;
    let record = summarise_once(&app).await;
    let info = &record["summarizer"];
    assert_eq!(info["fallback_reason"], "refused_narrative", "{info}");
    assert_eq!(
        info["output_tokens"], 60,
        "the tokens spent are kept: {info}"
    );
    let summary = record["summary_text"].as_str().unwrap();
    assert!(
        summary.chars().count() <= 8_000,
        "{} characters",
        summary.chars().count()
    );
    assert!(summary.contains("first: look at the logs"));

    let throttled = |_| {
        let body = json!({"error": {"message": "rate limited"}}).to_string();
        (429, body)
    };
    let (url, calls) = provider(Duration::ZERO, throttled).await;
    let app = with_model(backend, url, Duration::from_secs(5)).await;
    let id = session(&app).await;
    let mut reasons = Vec::new();
    for round in 0..4 {
        app.append(&id, work(&format!("round{round}"))).await;
        let record = force(&app, &id).await["record"].clone();
        reasons.push(record["summarizer"]["fallback_reason"].clone());
    }
    assert_eq!(
        reasons,
        ["http_status", "http_status", "http_status", "circuit_open"]
    );
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn a_huge_or_throttled_answer_is_refused_and_bounded_sqlite() {
    huge_and_throttled(Backend::Sqlite).await;
}

#[tokio::test]
async fn a_huge_or_throttled_answer_is_refused_and_bounded_postgres() {
    huge_and_throttled(Backend::Postgres).await;
}

#[tokio::test]
async fn after_repeated_failures_the_model_is_left_alone_sqlite() {
    circuit(Backend::Sqlite).await;
}

#[tokio::test]
async fn after_repeated_failures_the_model_is_left_alone_postgres() {
    circuit(Backend::Postgres).await;
}

async fn dry_run(backend: Backend) {
    let (url, calls) = provider(Duration::ZERO, |_| (500, "boom".into())).await;
    let app = with_model(backend, url, Duration::from_secs(5)).await;
    let id = session(&app).await;
    let mut batch = Vec::new();
    for i in 0..22 {
        batch.push(user(&format!(
            "request {i}: {}",
            "please keep going. ".repeat(60)
        )));
    }
    app.append(&id, Value::Array(batch)).await;
    let reply = app
        .post(
            &format!("/sessions/{id}/compact"),
            &json!({"mode": "dry_run"}),
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let info = &reply.body["record"]["summarizer"];
    assert_eq!(
        info["fallback_reason"], "dry_run",
        "{}",
        reply.body["record"]
    );
    assert_eq!(calls.load(Ordering::SeqCst), 0, "a dry run calls no model");
}

#[tokio::test]
async fn a_dry_run_never_calls_the_model_sqlite() {
    dry_run(Backend::Sqlite).await;
}

#[tokio::test]
async fn a_dry_run_never_calls_the_model_postgres() {
    dry_run(Backend::Postgres).await;
}

async fn anchorless_narrative(backend: Backend) {
    let (url, _) = provider(Duration::ZERO, |_| {
        (
            200,
            completion(r#"{"summary":"The agent is working through compile errors."}"#),
        )
    })
    .await;
    let app = with_model(backend, url, Duration::from_secs(5)).await;
    let id = session(&app).await;
    let first = "Fix the rounding of invoice totals in billing/src/lib.rs";
    let mut batch = vec![
        user(first),
        json!({"type": "note", "content": "Constraint: never touch tests/", "pinned": true}),
        user("and never touch tests/ either"),
    ];
    batch.extend(work("build").as_array().unwrap().iter().cloned());
    app.append(&id, Value::Array(batch)).await;
    let out = force(&app, &id).await;
    let info = &out["record"]["summarizer"];
    assert_eq!(info["outcome"], "fallback", "{}", out["record"]);
    assert_eq!(info["fallback_reason"], "refused_narrative");
    // What the refused answer cost is still reported.
    assert_eq!(info["input_tokens"], 900);
    assert_eq!(info["output_tokens"], 60);
    let intent = out["record"]["anchors"]["user_intent"].as_str().unwrap();
    assert!(intent.contains("rounding"), "{intent}");

    let messages = out["view"]["messages"].as_array().unwrap();
    let summary = messages
        .iter()
        .filter_map(|m| m["content"].as_str())
        .find(|c| c.contains("## First user request"))
        .unwrap_or_else(|| panic!("no summary message in {messages:?}"));
    assert!(summary.contains(first), "{summary}");
    assert!(summary.contains("never touch tests/"), "{summary}");
    assert!(!summary.contains("compile errors"), "{summary}");
    // The pinned constraint itself stays in the view, whole.
    assert!(messages.iter().any(|m| m["content"].as_str()
        == Some("Constraint: never touch tests/")
        || m["content"]
            .to_string()
            .contains("Constraint: never touch tests/")));
}

#[tokio::test]
async fn a_narrative_without_anchors_loses_nothing_the_user_said_sqlite() {
    anchorless_narrative(Backend::Sqlite).await;
}

#[tokio::test]
async fn a_narrative_without_anchors_loses_nothing_the_user_said_postgres() {
    anchorless_narrative(Backend::Postgres).await;
}

async fn used_narrative(backend: Backend) {
    let answer = json!({"summary": "The agent read four logs looking for the outage.",
        "anchors": {"user_intent": "find the outage", "execution_progress": "read four logs",
            "key_decision": "N/A", "tried_solution": "N/A", "next_step": "N/A"}})
    .to_string();
    let (url, _) = provider(Duration::ZERO, move |_| (200, completion(&answer))).await;
    let app = with_model(backend, url, Duration::from_secs(5)).await;
    let record = summarise_once(&app).await;
    let info = &record["summarizer"];
    assert_eq!(info["kind"], "openai", "{record}");
    assert_eq!(info["outcome"], "used");
    assert_eq!(info["fallback_reason"], Value::Null);
    assert_eq!(info["attempts"], 1);
    assert_eq!(info["output_truncated"], false);
    let text = record["summary_text"].as_str().unwrap();
    assert!(text.contains("The agent read four logs"), "{text}");
    // The facts stand beside the narrative.
    assert!(text.contains("first: look at the logs"), "{text}");
    assert!(text.contains("$ cat first0.log"), "{text}");
}

#[tokio::test]
async fn a_good_narrative_is_used_beside_the_facts_sqlite() {
    used_narrative(Backend::Sqlite).await;
}

#[tokio::test]
async fn a_good_narrative_is_used_beside_the_facts_postgres() {
    used_narrative(Backend::Postgres).await;
}

/// Everything the process logs from the first call on, at debug level and above.
fn captured_logs() -> &'static Mutex<Vec<u8>> {
    static LOGS: OnceLock<Mutex<Vec<u8>>> = OnceLock::new();
    static INSTALLED: OnceLock<()> = OnceLock::new();
    let logs = LOGS.get_or_init(|| Mutex::new(Vec::new()));
    INSTALLED.get_or_init(|| {
        struct Capture;
        impl Write for Capture {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                captured_logs().lock().unwrap().extend_from_slice(buf);
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let _ = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::DEBUG)
            .with_writer(|| Capture)
            .try_init();
    });
    logs
}

async fn key_never_leaves(backend: Backend) {
    captured_logs();
    let quoted = format!("the key {KEY} was rejected");
    let (url, calls) = provider(Duration::ZERO, move |n| match n % 3 {
        0 => (401, json!({"error": {"message": quoted}}).to_string()),
        1 => (200, format!("<html>{quoted}</html>")),
        _ => (
            200,
            completion(&format!("{{\"summary\": \"{quoted}\", \"anchors\": [")),
        ),
    })
    .await;
    let app = with_model(backend, url, Duration::from_secs(5)).await;
    let id = session(&app).await;
    let mut answers = Vec::new();
    for round in 0..3 {
        app.append(&id, work(&format!("round{round}"))).await;
        answers.push(force(&app, &id).await);
    }
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    let reasons: Vec<Value> = answers
        .iter()
        .map(|a| a["record"]["summarizer"]["fallback_reason"].clone())
        .collect();
    assert_eq!(
        reasons,
        [
            json!("http_status"),
            json!("malformed"),
            json!("refused_narrative")
        ]
    );
    for answer in &answers {
        let error = answer["record"]["error"].as_str().unwrap();
        assert!(error.contains("[redacted]"), "{error}");
    }
    for path in [
        format!("/sessions/{id}/compactions?limit=50"),
        format!("/sessions/{id}"),
        format!("/sessions/{id}/context"),
    ] {
        answers.push(app.get(&path).await.body);
    }
    for answer in &answers {
        assert!(!answer.to_string().contains(KEY), "{answer}");
    }
    let logs = String::from_utf8_lossy(&captured_logs().lock().unwrap()).into_owned();
    assert!(
        logs.contains("summariser failed"),
        "the failures were logged"
    );
    assert!(!logs.contains(KEY), "{logs}");
}

#[tokio::test]
async fn the_api_key_never_leaves_sqlite() {
    key_never_leaves(Backend::Sqlite).await;
}

#[tokio::test]
async fn the_api_key_never_leaves_postgres() {
    key_never_leaves(Backend::Postgres).await;
}
