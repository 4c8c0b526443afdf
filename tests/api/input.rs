//! Bad input gets the same answer on both backends: a 422 naming the field, and nothing written.

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::on_both_backends;
use crate::support::{Reply, TestApp};

fn user(text: &str) -> Value {
    json!({"type": "message", "role": "user", "content": text})
}

async fn head_seq(app: &TestApp, id: &str) -> i64 {
    app.get(&format!("/sessions/{id}")).await.body["head_seq"]
        .as_i64()
        .expect("head_seq")
}

async fn session_count(app: &TestApp) -> usize {
    let page = app.get("/sessions").await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    page.body["sessions"].as_array().expect("sessions").len()
}

async fn compaction_count(app: &TestApp, id: &str) -> usize {
    let page = app.get(&format!("/sessions/{id}/compactions")).await;
    page.body["compactions"]
        .as_array()
        .expect("compactions")
        .len()
}

/// Asserts a 422 whose first error names `field` (and the event's `index`, if any).
fn assert_names(reply: &Reply, index: Option<usize>, field: &str, what: &str) {
    assert_eq!(
        reply.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{what}: {}",
        reply.body
    );
    let error = &reply.body["errors"][0];
    assert_eq!(error["field"], field, "{what}: {}", reply.body);
    match index {
        Some(i) => assert_eq!(error["index"], i, "{what}: {}", reply.body),
        None => assert!(error.get("index").is_none(), "{what}: {}", reply.body),
    }
}

on_both_backends! {
    async fn an_array_where_an_object_is_required_is_refused(app) {
        let reply = app.post("/sessions", &json!([])).await;
        assert_names(&reply, None, "(body)", "[] as a session");
        let reply = app.post("/sessions", &json!({"config": [200000]})).await;
        assert_names(&reply, None, "config", "an array as the config");
        assert_eq!(session_count(&app).await, 0, "no session was created");

        let id = app.create_session(json!({})).await;
        app.append(&id, json!([user(&"word ".repeat(50))])).await;
        let reply = app.post(&format!("/sessions/{id}/compact"), &json!([])).await;
        assert_names(&reply, None, "(body)", "[] as a compact body");
        let reply = app.post(&format!("/sessions/{id}/compact"),
            &json!({"mode": "force", "tools": [{"type": "function"}, [null]]})).await;
        assert_names(&reply, None, "tools[1]", "an array as a tool schema");
        let reply = app.post(&format!("/sessions/{id}/compact"),
            &json!({"mode": "force", "tools": ["shell"]})).await;
        assert_names(&reply, None, "tools[0]", "a string as a tool schema");
        assert_eq!(compaction_count(&app, &id).await, 0, "no compaction was recorded");

        let reply = app.post(&format!("/sessions/{id}/usage"), &json!([5, null, 2])).await;
        assert_names(&reply, None, "(body)", "an array as a usage body");
        let context = app.get(&format!("/sessions/{id}/context")).await.body;
        assert_eq!(context["calibration"], 1.0);

        let reply = app.append(&id, json!([["x", "note"]])).await;
        assert_names(&reply, Some(0), "(event)", "an array as an event");
        let reply = app.append(&id, json!([{"type": "message", "role": "assistant",
            "tool_calls": [["c1", "ls"]]}])).await;
        assert_names(&reply, Some(0), "tool_calls[0]", "an array as a tool call");
        assert_eq!(head_seq(&app, &id).await, 1);
    }
}
