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
