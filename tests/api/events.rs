//! Appending to and reading the event log.

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::on_both_backends;
use crate::support::TestApp;

fn user(content: &str) -> Value {
    json!({"type": "message", "role": "user", "content": content})
}

fn call(id: &str) -> Value {
    json!({"type": "message", "role": "assistant", "content": "",
        "tool_calls": [{"id": id, "name": "shell", "arguments": "{\"cmd\":\"ls\"}"}]})
}

fn result(id: &str) -> Value {
    json!({"type": "message", "role": "tool", "tool_call_id": id, "content": "ok"})
}

async fn head_seq(app: &TestApp, id: &str) -> i64 {
    app.get(&format!("/sessions/{id}")).await.body["head_seq"]
        .as_i64()
        .unwrap()
}

/// The (index, field) pairs a 422 names.
fn named_fields(body: &Value) -> Vec<(i64, String)> {
    body["errors"]
        .as_array()
        .unwrap_or_else(|| panic!("no errors in {body}"))
        .iter()
        .map(|e| {
            (
                e["index"].as_i64().unwrap_or(-1),
                e["field"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

on_both_backends! {
    async fn every_field_round_trips_in_order(app) {
        let id = app.create_session(json!({})).await;
        let events = json!([
            {"id": "s", "type": "message", "role": "system", "content": "You are a coding agent."},
            {"id": "u", "type": "message", "role": "user", "content": "Fix the failing test", "name": "ana",
                "metadata": {"source": "cli", "n": 1}},
            {"type": "episode_start", "name": "explore", "kind": "exploration", "dependencies": []},
            {"type": "message", "role": "assistant", "content": "Looking.",
                "tool_calls": [{"id": "c1", "name": "read", "arguments": {"path": "src/lib.rs"}},
                               {"id": "c2", "name": "grep", "arguments": "{\"q\":\"fn\"}"}]},
            {"type": "message", "role": "tool", "tool_call_id": "c2", "name": "grep", "content": "3 matches",
                "is_error": true},
            {"type": "message", "role": "tool", "tool_call_id": "c1", "name": "read", "content": "ünïcødé ✓ 🚀"},
            {"type": "episode_end", "name": "explore", "conclusion": "the bug is in lib.rs"},
            {"type": "note", "content": "Never touch the public API", "pinned": true}
        ]);
        let reply = app.append(&id, events.clone()).await;
        assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
        assert_eq!(reply.body["head_seq"], 8);
        let acks = reply.body["events"].as_array().unwrap();
        let seqs: Vec<i64> = acks.iter().map(|a| a["seq"].as_i64().unwrap()).collect();
        assert_eq!(seqs, (1..=8).collect::<Vec<_>>());
        assert!(acks.iter().all(|a| a["tokens"].as_i64().unwrap() > 0 && a["replayed"] == false));
        assert_eq!(acks[0]["id"], "s");

        let stored = app.all_events(&id).await;
        assert_eq!(stored.len(), 8);
        for (i, (sent, got)) in events.as_array().unwrap().iter().zip(&stored).enumerate() {
            assert_eq!(got["seq"], i as i64 + 1);
            assert_eq!(got["tokens"], acks[i]["tokens"], "the stored cost is the acknowledged one");
            for (field, value) in sent.as_object().unwrap() {
                if field != "tool_calls" {
                    assert_eq!(&got[field], value, "event {i} field {field}");
                }
            }
        }
        // Tool-call arguments come back as the JSON text, whichever form they were sent in.
        assert_eq!(stored[3]["tool_calls"], json!([
            {"id": "c1", "name": "read", "arguments": "{\"path\":\"src/lib.rs\"}"},
            {"id": "c2", "name": "grep", "arguments": "{\"q\":\"fn\"}"}]));
        // Canonical defaults are filled in.
        assert_eq!(stored[0]["pinned"], false);
        assert_eq!(stored[5]["is_error"], false);
        assert_eq!(stored[7]["pinned"], true);
        let session = app.get(&format!("/sessions/{id}")).await.body;
        let total: i64 = acks.iter().map(|a| a["tokens"].as_i64().unwrap()).sum();
        assert_eq!(session["total_tokens"], total);
    }
}

on_both_backends! {
    async fn tool_call_arguments_are_held_as_the_text_a_provider_sees(app) {
        let id = app.create_session(json!({})).await;
        let as_object = json!([{"id": "a", "type": "message", "role": "assistant", "content": "",
            "tool_calls": [{"id": "c1", "name": "shell", "arguments": {"cmd": "ls", "all": true}},
                           {"id": "c2", "name": "clock"}]}]);
        let first = app.append(&id, as_object.clone()).await;
        assert_eq!(first.status, StatusCode::CREATED, "{}", first.body);
        // A retry in the same form is still recognised as the same event.
        let retry = app.append(&id, as_object).await;
        assert_eq!(retry.status, StatusCode::OK, "{}", retry.body);
        assert_eq!(retry.body["events"][0]["replayed"], true);
        let stored = app.all_events(&id).await;
        let calls = stored[0]["tool_calls"].as_array().unwrap();
        let text = calls[0]["arguments"].as_str().expect("the arguments are a string");
        assert_eq!(serde_json::from_str::<serde_json::Value>(text).unwrap(), json!({"cmd": "ls", "all": true}));
        assert_eq!(calls[1]["arguments"], "{}", "absent arguments are an empty object's text");
        assert_eq!(first.body["events"][0]["tokens"], retry.body["events"][0]["tokens"]);
    }
}

on_both_backends! {
    async fn token_costs_follow_the_session_tokenizer(app) {
        let chars = app.create_session(json!({"config": {"tokenizer": "chars4"}})).await;
        let o200k = app.create_session(json!({"config": {"tokenizer": "o200k_base"}})).await;
        let batch = json!([
            {"type": "message", "role": "user", "content": "Hello, world!"},
            {"type": "message", "role": "assistant",
                "tool_calls": [{"id": "c", "name": "read", "arguments": "{\"path\":\"a\"}"}]}
        ]);
        let costs = |reply: crate::support::Reply| -> Vec<i64> {
            assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
            reply.body["events"].as_array().unwrap().iter().map(|a| a["tokens"].as_i64().unwrap()).collect()
        };
        // chars4: ceil(13/4)=4 + 4 framing; call: 4 framing + ceil(4/4) + ceil(12/4) + 4 framing.
        assert_eq!(costs(app.append(&chars, batch.clone()).await), [8, 12]);
        // o200k_base: "Hello, world!" is 4 tokens.
        assert_eq!(costs(app.append(&o200k, batch).await)[0], 8);
    }
}

on_both_backends! {
    async fn invalid_batches_name_the_event_and_field_and_write_nothing(app) {
        let id = app.create_session(json!({})).await;
        let first = app.append(&id, json!([user("hi"), call("open"), call("done"), result("done")])).await;
        assert_eq!(first.status, StatusCode::CREATED, "{}", first.body);

        type Case = (&'static str, Value, Vec<(i64, &'static str)>);
        let cases: Vec<Case> = vec![
            ("unknown type", json!([user("a"), {"type": "thought", "content": "x"}]), vec![(1, "type")]),
            ("unknown role", json!([{"type": "message", "role": "bot", "content": "x"}]), vec![(0, "role")]),
            ("unknown field", json!([{"type": "note", "content": "x", "colour": 1}]), vec![(0, "colour")]),
            ("missing content", json!([user("a"), user("b"), {"type": "message", "role": "user"}]),
                vec![(2, "content")]),
            ("empty user content", json!([user("")]), vec![(0, "content")]),
            ("result for no call", json!([user("a"), result("ghost")]), vec![(1, "tool_call_id")]),
            ("second result", json!([result("done")]), vec![(0, "tool_call_id")]),
            ("second result in batch", json!([result("open"), result("open")]), vec![(1, "tool_call_id")]),
            ("id reissued while open", json!([call("open")]), vec![(0, "tool_calls[0].id")]),
            ("result before its call", json!([result("later"), call("later")]), vec![(0, "tool_call_id")]),
            ("tool result without call id", json!([{"type": "message", "role": "tool", "content": "x"}]),
                vec![(0, "tool_call_id")]),
            ("several fields", json!([user(""), {"type": "note", "content": ""}]),
                vec![(0, "content"), (1, "content")]),
            ("several pairings", json!([result("ghost"), user("x"), call("open")]),
                vec![(0, "tool_call_id"), (2, "tool_calls[0].id")]),
        ];
        for (name, batch, expected) in cases {
            let reply = app.append(&id, batch).await;
            assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY, "{name}: {}", reply.body);
            let mut got = named_fields(&reply.body);
            let mut want: Vec<(i64, String)> = expected.iter().map(|(i, f)| (*i, f.to_string())).collect();
            got.sort();
            want.sort();
            assert_eq!(got, want, "{name}: {}", reply.body);
            assert!(reply.body["detail"].as_str().unwrap().starts_with("events["), "{name}");
            assert_eq!(head_seq(&app, &id).await, 4, "{name}: nothing of the batch is written");
        }
        // The open call can still be answered, and its id reused once answered.
        let ok = app.append(&id, json!([result("open"), call("open"), result("open")])).await;
        assert_eq!(ok.status, StatusCode::CREATED, "{}", ok.body);
        assert_eq!(app.all_events(&id).await.len(), 7);
    }
}

on_both_backends! {
    async fn retried_batches_create_no_duplicates(app) {
        let id = app.create_session(json!({})).await;
        let batch = json!([
            {"id": "e1", "type": "message", "role": "user", "content": "hi"},
            {"id": "e2", "type": "message", "role": "assistant", "tool_calls": [{"id": "c", "name": "ls"}]},
            {"id": "e3", "type": "message", "role": "tool", "tool_call_id": "c", "content": "a b"}
        ]);
        let first = app.append(&id, batch.clone()).await;
        assert_eq!(first.status, StatusCode::CREATED);
        let retry = app.append(&id, batch.clone()).await;
        assert_eq!(retry.status, StatusCode::OK, "{}", retry.body);
        for (a, b) in first.body["events"].as_array().unwrap().iter().zip(retry.body["events"].as_array().unwrap()) {
            assert_eq!(a["seq"], b["seq"]);
            assert_eq!(a["tokens"], b["tokens"]);
            assert_eq!(b["replayed"], true);
        }
        assert_eq!(app.all_events(&id).await.len(), 3);

        // A retry that goes on with new events appends only the new ones.
        let mut longer = batch.as_array().unwrap().clone();
        longer.push(json!({"id": "e4", "type": "message", "role": "user", "content": "thanks"}));
        let reply = app.append(&id, Value::Array(longer)).await;
        assert_eq!(reply.status, StatusCode::CREATED);
        let replayed: Vec<bool> = reply.body["events"].as_array().unwrap().iter()
            .map(|a| a["replayed"].as_bool().unwrap()).collect();
        assert_eq!(replayed, [true, true, true, false]);
        assert_eq!(reply.body["events"][3]["seq"], 4);

        // The same id with other content is a conflict naming the stored seq.
        let changed = app.append(&id, json!([{"id": "e1", "type": "message", "role": "user", "content": "bye"}])).await;
        assert_eq!(changed.status, StatusCode::CONFLICT);
        assert_eq!(changed.body["seq"], 1);
        assert!(changed.body["detail"].as_str().unwrap().contains("e1"));
        assert_eq!(head_seq(&app, &id).await, 4);
    }
}

on_both_backends! {
    async fn expected_seq_guards_against_concurrent_writers(app) {
        let id = app.create_session(json!({})).await;
        let path = format!("/sessions/{id}/events");
        let ok = app.post(&path, &json!({"expected_seq": 0, "events": [user("a"), user("b")]})).await;
        assert_eq!(ok.status, StatusCode::CREATED);
        let stale = app.post(&path, &json!({"expected_seq": 1, "events": [user("c")]})).await;
        assert_eq!(stale.status, StatusCode::CONFLICT);
        assert_eq!(stale.body["head_seq"], 2);
        let fresh = app.post(&path, &json!({"expected_seq": 2, "events": [user("c")]})).await;
        assert_eq!(fresh.status, StatusCode::CREATED);
        assert_eq!(fresh.body["head_seq"], 3);
    }
}

on_both_backends! {
    async fn the_log_reads_in_pages(app) {
        let id = app.create_session(json!({})).await;
        let batch: Vec<Value> = (0..25).map(|i| user(&format!("message {i}"))).collect();
        assert_eq!(app.append(&id, Value::Array(batch)).await.status, StatusCode::CREATED);
        let page = app.get(&format!("/sessions/{id}/events?after_seq=10&limit=10")).await;
        let seqs: Vec<i64> = page.body["events"].as_array().unwrap().iter()
            .map(|e| e["seq"].as_i64().unwrap()).collect();
        assert_eq!(seqs, (11..=20).collect::<Vec<_>>());
        assert_eq!(page.body["next_after_seq"], 20);
        assert_eq!(page.body["head_seq"], 25);
        let last = app.get(&format!("/sessions/{id}/events?after_seq=20&limit=10")).await;
        assert_eq!(last.body["events"].as_array().unwrap().len(), 5);
        assert!(last.body.get("next_after_seq").is_none());
        assert_eq!(app.all_events(&id).await.len(), 25);
        for query in ["limit=0", "limit=5000", "after_seq=-1", "offset=3"] {
            let bad = app.get(&format!("/sessions/{id}/events?{query}")).await;
            assert_eq!(bad.status, StatusCode::BAD_REQUEST, "{query}");
        }
    }
}

on_both_backends! {
    async fn unknown_sessions_are_not_found(app) {
        let ghost = "01936f4e-8a7b-7c3d-9e2f-4a5b6c7d8e9f";
        let reply = app.append(ghost, json!([user("hi")])).await;
        assert_eq!(reply.status, StatusCode::NOT_FOUND);
        assert!(reply.body["detail"].as_str().unwrap().contains(ghost));
        assert_eq!(app.get(&format!("/sessions/{ghost}/events")).await.status, StatusCode::NOT_FOUND);
    }
}
