//! The episodes' rules at append: each broken rule is a 422 naming the event, the field and the
//! rule, against the episodes stored earlier as well as those of the same batch; nothing of a
//! refused batch is written.

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::on_both_backends;
use crate::support::TestApp;

fn start(name: &str, kind: &str, dependencies: &[&str]) -> Value {
    json!({"type": "episode_start", "name": name, "kind": kind, "dependencies": dependencies})
}

fn end(name: &str, conclusion: &str) -> Value {
    json!({"type": "episode_end", "name": name, "conclusion": conclusion})
}

fn say(text: &str) -> Value {
    json!({"type": "message", "role": "user", "content": text})
}

/// Appends `batch` and expects a 422 for the event at `index` and `field`, its message naming
/// `words`; the log's head must not move.
async fn refused(app: &TestApp, id: &str, batch: Value, index: usize, field: &str, words: &str) {
    let head = app.get(&format!("/sessions/{id}")).await.body["head_seq"].clone();
    let reply = app.append(id, batch.clone()).await;
    assert_eq!(
        reply.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{batch}: {}",
        reply.body
    );
    let error = &reply.body["errors"][0];
    assert_eq!(
        (error["index"].as_u64(), error["field"].as_str()),
        (Some(index as u64), Some(field)),
        "{}",
        reply.body
    );
    assert!(
        error["message"].as_str().unwrap().contains(words),
        "{}",
        reply.body
    );
    assert!(reply.body["detail"].as_str().is_some(), "{}", reply.body);
    let after = app.get(&format!("/sessions/{id}")).await.body["head_seq"].clone();
    assert_eq!(after, head, "a refused batch writes nothing");
}

on_both_backends! {
    async fn episode_rules_are_checked_at_append(app) {
        let id = app.create_session(json!({})).await;
        let ok = |reply: crate::support::Reply| assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
        ok(app.append(&id, json!([say("Fix the parser."), start("survey", "exploration", &[])])).await);

        // One active episode at a time, whether the other was stored earlier or not.
        refused(&app, &id, json!([say("and"), start("other", "exploration", &[])]), 1, "type",
            "`survey` (started at seq 2) is still active").await;
        // An end names the active episode.
        refused(&app, &id, json!([end("other", "x")]), 0, "name", "the active episode is `survey`").await;
        // An exploration ends with its conclusion.
        refused(&app, &id, json!([end("survey", "")]), 0, "conclusion", "ends with its conclusion").await;
        ok(app.append(&id, json!([end("survey", "the parser is in src/parse.rs")])).await);
        refused(&app, &id, json!([end("survey", "again")]), 0, "name", "already ended at seq 3").await;

        // Names are unique in the session; an exploration depends on nothing.
        refused(&app, &id, json!([start("survey", "exploration", &[])]), 0, "name", "unique").await;
        refused(&app, &id, json!([start("look", "exploration", &["survey"])]), 0, "dependencies",
            "an exploration depends on nothing").await;
        // Dependencies name earlier episodes; an action depends on a completed exploration.
        refused(&app, &id, json!([start("fix", "action", &["survey", "later"])]), 0, "dependencies[1]",
            "`later` names no earlier episode").await;
        refused(&app, &id, json!([start("fix", "action", &[])]), 0, "dependencies",
            "at least one completed exploration").await;
        // Within one batch: the exploration still active is not yet completed.
        refused(&app, &id, json!([start("look", "exploration", &[]), start("fix", "action", &["look"])]),
            1, "type", "`look`").await;
        refused(&app, &id, json!([start("look", "exploration", &[]), end("look", "ok"),
            start("fix", "action", &["look"]), end("fix", "done")]), 3, "conclusion",
            "an action ends without a conclusion").await;

        // The same batch, rightly ended, is taken whole; then an action on the first exploration.
        ok(app.append(&id, json!([start("look", "exploration", &[]), end("look", "ok")])).await);
        ok(app.append(&id, json!([start("fix", "action", &["survey"]), say("go"), end("fix", "")])).await);
        refused(&app, &id, json!([start("again", "action", &["fix"])]), 0, "dependencies",
            "completed exploration").await;
        assert_eq!(app.get(&format!("/sessions/{id}")).await.body["head_seq"], 8);
    }
}

on_both_backends! {
    async fn concurrent_starts_leave_one_episode_active(app) {
        let id = app.create_session(json!({})).await;
        let app = std::sync::Arc::new(app);
        let tasks: Vec<_> = (0..6)
            .map(|i| {
                let (app, id) = (app.clone(), id.clone());
                tokio::spawn(async move {
                    app.append(&id, json!([start(&format!("e{i}"), "exploration", &[])])).await.status
                })
            })
            .collect();
        let mut created = 0;
        for task in tasks {
            match task.await.unwrap() {
                StatusCode::CREATED => created += 1,
                status => assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY),
            }
        }
        assert_eq!(created, 1, "exactly one start wins");
    }
}

fn exchange(id: &str, tool: &str, chars: usize) -> [Value; 2] {
    [
        json!({"type": "message", "role": "assistant",
            "tool_calls": [{"id": id, "name": tool, "arguments": {"path": format!("src/{id}.rs")}}]}),
        json!({"type": "message", "role": "tool", "tool_call_id": id, "name": tool,
            "content": "line of output\n".repeat(chars / 15)}),
    ]
}

on_both_backends! {
    async fn an_episodic_session_archives_by_structure_and_shows_its_episodes(app) {
        let id = app.create_session(json!({"config": {
            "context_window": 8000, "max_output_tokens": 1000, "tokenizer": "chars4",
            "policy": "episodic", "episodic": {"trigger": 0.8, "target": 0.7},
            // Results of 8,000 characters shown whole in this small window.
            "item_max_share": 0.5
        }})).await;
        let mut events = vec![json!({"type": "message", "role": "system", "content": "You are a coding agent."}),
            say("Fix the parser and update the docs."), start("parser", "exploration", &[])];
        events.extend(exchange("p1", "read", 8_000));
        events.extend([end("parser", "the bug is in src/parse.rs line 40"), start("docs", "exploration", &[])]);
        events.extend(exchange("d1", "read", 8_000));
        events.extend([end("docs", "the docs come from doc comments"), start("fix", "action", &["parser"])]);
        events.extend(exchange("f1", "edit", 8_000));
        events.extend([end("fix", ""), say("Now check it.")]);
        let reply = app.append(&id, Value::Array(events)).await;
        assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
        let fix_result = 13;

        let out = app.post(&format!("/sessions/{id}/compact"), &json!({"format": "anthropic"})).await;
        assert_eq!(out.status, StatusCode::OK, "{}", out.body);
        let record = &out.body["record"];
        assert_eq!(record["policy"], "episodic");
        assert!(record["tokens_after"].as_i64().unwrap() <= (0.7 * 8000.0) as i64, "{record}");
        let offloaded: Vec<i64> = record["offloaded"].as_array().unwrap().iter()
            .map(|o| o["seq"].as_i64().unwrap()).collect();
        assert_eq!(offloaded, vec![fix_result], "the action alone: {record}");
        let text = out.body["view"].to_string();
        assert!(text.contains("[edit result archived, "), "{text}");
        assert!(text.contains("the bug is in src/parse.rs line 40"), "the conclusion stays");

        let context = app.get(&format!("/sessions/{id}/context?state=archived")).await;
        assert_eq!(context.status, StatusCode::OK, "{}", context.body);
        let items = context.body["items"].as_array().unwrap();
        assert_eq!(items.len(), 1, "{}", context.body);
        assert_eq!((items[0]["seq"].as_i64(), items[0]["reason"].as_str(), items[0]["projection"].as_str()),
                   (Some(fix_result), Some("episode_archived"), Some("reference")));
        let episodes = context.body["episodes"].as_array().unwrap();
        let names: Vec<&str> = episodes.iter().map(|e| e["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["parser", "docs", "fix"]);
        assert_eq!(episodes[0]["conclusion"], "the bug is in src/parse.rs line 40");
        assert_eq!(episodes[2]["dependencies"], json!(["parser"]));
        assert_eq!(episodes[2]["kind"], "action");
        assert!(episodes.iter().all(|e| e["end_seq"].is_i64()));

        // Its configuration is checked like any other.
        let bad = app.post("/sessions", &json!({"config": {"policy": "episodic",
            "episodic": {"trigger": 0.6, "target": 0.7, "tool_priorities": {"bash": 3}}}})).await;
        assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY);
        let fields: Vec<&str> = bad.body["errors"].as_array().unwrap().iter()
            .map(|e| e["field"].as_str().unwrap()).collect();
        assert_eq!(fields, ["config.episodic.target", "config.episodic.tool_priorities.bash"], "{}", bad.body);
    }
}

on_both_backends! {
    async fn a_long_earlier_request_is_shown_as_head_and_tail_and_recalled_whole(app) {
        let id = app.create_session(json!({"config": {
            "context_window": 8000, "max_output_tokens": 1000, "tokenizer": "chars4",
            "policy": "episodic"
        }})).await;
        // 3,000 tokens, more than the target (0.4 of the room) alone: folding cannot make room.
        let pasted = format!("Here is the log of the last run:\n{}What failed?",
            "a line of the build log\n".repeat(500));
        let mut events = vec![say("Port the parser to the new grammar."), say(&pasted)];
        for i in 0..8 {
            events.push(json!({"type": "message", "role": "assistant", "content": format!("Step {i}.")}));
            events.extend(exchange(&format!("c{i}"), "read", 1_600));
        }
        events.push(say("Now fix it."));
        let reply = app.append(&id, Value::Array(events)).await;
        assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
        let long = reply.body["events"][1]["seq"].as_i64().unwrap();

        let out = app.post(&format!("/sessions/{id}/compact"), &json!({"format": "openai"})).await;
        assert_eq!(out.status, StatusCode::OK, "{}", out.body);
        let record = &out.body["record"];
        assert!(record["offloaded"].as_array().unwrap().iter().any(|o| o["seq"] == long), "{record}");
        let messages = out.body["view"]["messages"].as_array().unwrap();
        let shown = messages.iter().filter_map(|m| m["content"].as_str())
            .find(|c| c.starts_with("Here is the log")).expect("the request stays in the view");
        assert!(shown.ends_with("What failed?") && shown.len() < pasted.len() / 3, "{shown}");
        let at = shown.find(&format!("recall observation://{long}?offset=")).expect("its reference")
            + "recall ".len();
        let uri: String = shown[at..].chars().take_while(|c| !matches!(c, ']' | ' ' | '\n')).collect();
        assert!(messages.iter().any(|m| m["content"] == "Now fix it."), "the current request whole");

        let context = app.get(&format!("/sessions/{id}/context?from_seq={long}&to_seq={long}")).await;
        assert_eq!(context.status, StatusCode::OK, "{}", context.body);
        let item = &context.body["items"][0];
        assert_eq!((item["reason"].as_str(), item["projection"].as_str(), item["state"].as_str()),
                   (Some("offloaded_large_request"), Some("preview"), Some("retained")), "{item}");

        // The reference brings back what the view left out, from where it left off.
        let offset: usize = uri.rsplit('=').next().unwrap().parse().unwrap();
        let recalled = app.post(&format!("/sessions/{id}/recall"),
            &json!({"uri": uri, "limit": 100_000})).await;
        assert_eq!(recalled.status, StatusCode::OK, "{}", recalled.body);
        let content = recalled.body["content"].as_str().unwrap();
        assert!(content.starts_with(&pasted[offset..offset + 200]), "{content}");
    }
}
