//! Bad input gets the same answer on both backends: a 422 naming the field, and nothing written.

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::on_both_backends;
use crate::support::{Reply, TestApp};

const NUL: &str = "a\u{0}b";

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

async fn usage(app: &TestApp, id: &str, input_tokens: i64, view_tokens: i64) -> Reply {
    let body = json!({"input_tokens": input_tokens, "view_tokens": view_tokens});
    app.post(&format!("/sessions/{id}/usage"), &body).await
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
    async fn nul_in_ids_names_and_metadata_is_refused(app) {
        let id = app.create_session(json!({})).await;
        let first = app.append(&id, json!([user("hello")])).await;
        assert_eq!(first.status, StatusCode::CREATED, "{}", first.body);
        let call = |call_id: &str, name: &str| json!({"type": "message", "role": "assistant",
            "tool_calls": [{"id": call_id, "name": name, "arguments": "{}"}]});
        let cases = [
            (json!([user("x"), {"type": "note", "content": "x", "id": NUL}]), 1, "id".to_owned()),
            (json!([call(NUL, "ls")]), 0, "tool_calls[0].id".to_owned()),
            (json!([call("c1", NUL)]), 0, "tool_calls[0].name".to_owned()),
            (json!([call("c1", "ls"), {"type": "message", "role": "tool", "tool_call_id": NUL,
                "content": "ok"}]), 1, "tool_call_id".to_owned()),
            (json!([{"type": "message", "role": "user", "content": "x", "name": NUL}]), 0,
                "name".to_owned()),
            (json!([{"type": "episode_start", "name": NUL, "kind": "action"}]), 0, "name".to_owned()),
            (json!([{"type": "note", "content": "x", "metadata": {"a": {"b": [1, NUL]}}}]), 0,
                "metadata.a.b[1]".to_owned()),
            (json!([{"type": "note", "content": "x", "metadata": {"a": {NUL: 1}}}]), 0,
                format!("metadata.a.{NUL}")),
        ];
        for (events, index, field) in cases {
            let reply = app.append(&id, events.clone()).await;
            assert_names(&reply, Some(index), &field, &events.to_string());
            assert_eq!(
                reply.body["detail"].as_str().unwrap(),
                format!("events[{index}].{field}: must not contain the NUL character (U+0000)"),
            );
            assert_eq!(head_seq(&app, &id).await, 1, "nothing of {events} was written");
        }
    }
}

on_both_backends! {
    async fn nul_in_labels_and_the_label_filter_is_refused(app) {
        for (metadata, field) in [
            (json!({"team": NUL}), "metadata.team".to_owned()),
            (json!({NUL: "x"}), format!("metadata.{NUL}")),
        ] {
            let reply = app.post("/sessions", &json!({"metadata": metadata})).await;
            assert_names(&reply, None, &field, &metadata.to_string());
        }
        assert_eq!(session_count(&app).await, 0, "no session was created");

        app.create_session(json!({"metadata": {"team": "search"}})).await;
        for (query, field) in [
            ("metadata.team=a%00b", "metadata.team"),
            ("metadata.te%00am=x", "metadata.te\u{0}am"),
        ] {
            let reply = app.get(&format!("/sessions?{query}")).await;
            assert_names(&reply, None, field, query);
        }
        let found = app.get("/sessions?metadata.team=search").await;
        assert_eq!(found.body["sessions"].as_array().unwrap().len(), 1);
    }
}

on_both_backends! {
    // Compaction copies text of the events (summaries, anchors, records) into documents that
    // PostgreSQL keeps as `jsonb`, which cannot hold a NUL: text is refused at append too.
    async fn nul_in_text_is_refused(app) {
        let id = app.create_session(json!({})).await;
        app.append(&id, json!([user("hello")])).await;
        let cases = [
            (json!([user(NUL)]), 0, "content"),
            (json!([user("x"), {"type": "note", "content": NUL}]), 1, "content"),
            (json!([{"type": "episode_end", "name": "e", "conclusion": NUL}]), 0, "conclusion"),
            (json!([{"type": "message", "role": "assistant",
                "tool_calls": [{"id": "c1", "name": "shell", "arguments": {"cmd": [NUL]}}]}]),
                0, "tool_calls[0].arguments.cmd[0]"),
            (json!([{"type": "message", "role": "assistant",
                "tool_calls": [{"id": "c1", "name": "shell", "arguments": NUL}]}]),
                0, "tool_calls[0].arguments"),
        ];
        for (events, index, field) in cases {
            let reply = app.append(&id, events.clone()).await;
            assert_names(&reply, Some(index), field, &events.to_string());
            assert_eq!(head_seq(&app, &id).await, 1, "nothing of {events} was written");
        }
        // Tool schemas are counted, never stored: they may hold any character.
        let tools = json!([{"type": "function", "function": {"name": "shell", "description": NUL}}]);
        let out = app.post(&format!("/sessions/{id}/compact"),
            &json!({"mode": "force", "tools": tools})).await;
        assert_eq!(out.status, StatusCode::OK, "{}", out.body);
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

on_both_backends! {
    async fn the_reserved_output_defaults_to_what_fits(app) {
        let reply = app.post("/sessions", &json!({"config": {"context_window": 16000}})).await;
        assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
        assert_eq!(reply.body["config"]["max_output_tokens"], 4000);
        let reply = app.post("/sessions", &json!({"config": {"context_window": 1024}})).await;
        assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
        assert_eq!(reply.body["config"]["max_output_tokens"], 256);
        let reply = app.post("/sessions", &json!({})).await;
        assert_eq!(reply.body["config"]["max_output_tokens"], 8192);

        // An explicit value is still checked against the window.
        let reply = app.post("/sessions",
            &json!({"config": {"context_window": 16000, "max_output_tokens": 8192}})).await;
        assert_names(&reply, None, "config.max_output_tokens", "8192 of 16000");
        assert_eq!(session_count(&app).await, 3);
    }
}

on_both_backends! {
    async fn usage_answers_the_applied_calibration_and_refuses_outliers(app) {
        let id = app.create_session(json!({})).await;
        app.append(&id, json!([user(&"word ".repeat(50))])).await;
        for (input, ours) in [(i64::MAX, 1), (401, 100), (24, 100), (1, 1000)] {
            let reply = usage(&app, &id, input, ours).await;
            assert_names(&reply, None, "input_tokens", &format!("{input} of {ours}"));
            let detail = reply.body["detail"].as_str().unwrap();
            assert!(detail.contains("between 0.25 and 4"), "{detail}");
        }
        let context = app.get(&format!("/sessions/{id}/context")).await.body;
        assert_eq!(context["calibration"], 1.0, "a refused sample changes nothing");

        // A provider that counts fewer tokens is averaged in, but the factor applied stays 1.
        let reply = usage(&app, &id, 50, 100).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
        assert_eq!(reply.body["calibration"], 1.0);
        // The bounds are inclusive: 0.7 × 0.5 + 0.3 × 4 = 1.55.
        let reply = usage(&app, &id, 400, 100).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
        let applied = reply.body["calibration"].as_f64().unwrap();
        assert!((applied - 1.55).abs() < 1e-9, "{applied}");
        let context = app.get(&format!("/sessions/{id}/context")).await.body;
        assert_eq!(context["calibration"], reply.body["calibration"], "the answer is what is applied");
    }
}

on_both_backends! {
    async fn usage_takes_the_id_of_every_compact_answer_stored_or_not(app) {
        let id = app.create_session(json!({"config": {"context_window": 4000,
            "max_output_tokens": 500, "tokenizer": "chars4"}})).await;
        let path = format!("/sessions/{id}/usage");
        let mut unstored = 0;
        for turn in 0..20 {
            app.append(&id, json!([user(&format!("turn {turn}: {}", "word ".repeat(60)))])).await;
            let mode = if turn % 5 == 4 { "dry_run" } else { "auto" };
            let answer = app.post(&format!("/sessions/{id}/compact"), &json!({"mode": mode})).await.body;
            let record = &answer["record"];
            unstored += usize::from(answer["persisted"] == false);
            let estimate = record["input_tokens_estimate"].as_i64().unwrap();
            let reply = app.post(&path, &json!({"input_tokens": estimate,
                "compaction_id": record["id"]})).await;
            assert_eq!(reply.status, StatusCode::OK, "turn {turn}: {}", reply.body);
            // The count the id carries is the answer's own: four times it is still taken, more is not.
            let reply = app.post(&path, &json!({"input_tokens": estimate * 4 + 4,
                "compaction_id": record["id"]})).await;
            assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY, "turn {turn}: {}", reply.body);
        }
        assert!(unstored >= 10, "most calls change nothing and are not stored: {unstored}");
        let ghost = "01936f4e-8a7b-7c3d-9e2f-4a5b6c7d8e9f";
        let reply = app.post(&path, &json!({"input_tokens": 100, "compaction_id": ghost})).await;
        assert_eq!(reply.status, StatusCode::NOT_FOUND, "{}", reply.body);
    }
}
