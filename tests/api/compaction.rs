//! Compaction over HTTP: views, records, context inspection, observations and calibration.

use std::sync::Arc;
use std::time::Duration;

use ctxd::engine::validate::{validate_anthropic, validate_openai};
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::on_both_backends;
use crate::support::{Backend, TestApp};

/// A session with a small window so that a few events cross the tiers.
async fn small_session(app: &TestApp) -> String {
    app.create_session(json!({"config": {
        "context_window": 8000, "max_output_tokens": 500, "tokenizer": "chars4",
        "min_tail_messages": 4, "offload_threshold_chars": 400
    }}))
    .await
}

fn user(text: &str) -> Value {
    json!({"type": "message", "role": "user", "content": text})
}

fn exchange(id: &str, chars: usize) -> Vec<Value> {
    vec![
        json!({"type": "message", "role": "assistant",
            "tool_calls": [{"id": id, "name": "shell", "arguments": {"cmd": format!("cat {id}.log")}}]}),
        json!({"type": "message", "role": "tool", "tool_call_id": id, "name": "shell",
            "content": "log line\n".repeat(chars / 9 + 1)}),
    ]
}

async fn compact(app: &TestApp, id: &str, body: Value) -> Value {
    let reply = app.post(&format!("/sessions/{id}/compact"), &body).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    reply.body
}

/// Runs `turns` agent turns, compacting (auto) before every model call as an agent would.
/// Each turn: a request, a tool exchange with a large result, and the assistant's analysis.
async fn grow(app: &TestApp, id: &str, turns: usize, tag: &str) -> Vec<Value> {
    let mut records = Vec::new();
    for turn in 0..turns {
        let mut batch = vec![user(&format!(
            "{tag} request {turn}: please check the logs"
        ))];
        // A result under the per-item cap (5 % of the room: 375 tokens here).
        batch.extend(exchange(&format!("{tag}{turn}"), 1_400));
        batch.push(json!({"type": "message", "role": "assistant",
            "content": format!("analysis {turn}: {}", "the logs show a retry storm. ".repeat(25))}));
        assert_eq!(
            app.append(id, Value::Array(batch)).await.status,
            StatusCode::CREATED
        );
        let out = compact(app, id, json!({})).await;
        assert!(
            validate_openai(&out["view"]).is_ok(),
            "{:?}",
            validate_openai(&out["view"])
        );
        assert!(out["record"]["tokens_after"].as_i64().unwrap() <= 8000);
        records.push(out["record"].clone());
    }
    records
}

on_both_backends! {
    async fn a_long_session_crosses_warn_then_full_twice_incrementally(app) {
        // Soft sits just below full so that the session goes warn → full → full.
        let id = app.create_session(json!({"config": {
            "context_window": 8000, "max_output_tokens": 500, "tokenizer": "chars4",
            "min_tail_messages": 4, "offload_threshold_chars": 400,
            "thresholds": {"warn": 0.6, "soft": 0.799, "full": 0.8, "emergency": 0.95}
        }})).await;
        app.append(&id, json!([{"type": "message", "role": "system", "content": "You are a log analyst."}])).await;
        let records = grow(&app, &id, 60, "first").await;
        let acted: Vec<&Value> = records.iter().filter(|r| r["acted"] == true).collect();
        let tiers: Vec<&str> = acted.iter().map(|r| r["tier"].as_str().unwrap()).collect();
        assert!(tiers.contains(&"warn"), "{tiers:?}");
        assert_eq!(tiers[0], "warn", "{tiers:?}");
        let fulls: Vec<&&Value> = acted.iter().filter(|r| r["tier"] == "full").collect();
        assert!(fulls.len() >= 2, "two full compactions: {tiers:?}");
        assert!(!tiers.contains(&"emergency"), "graceful compaction, not emergency: {tiers:?}");

        // The second summary is built on the first: it still knows the first request, and it
        // covers only events after what the first one covered.
        let (first, second) = (fulls[0], fulls[1]);
        let first_seqs: Vec<i64> = first["summarized_seqs"].as_array().unwrap().iter().map(|s| s.as_i64().unwrap()).collect();
        let second_seqs: Vec<i64> = second["summarized_seqs"].as_array().unwrap().iter().map(|s| s.as_i64().unwrap()).collect();
        assert!(!first_seqs.is_empty() && !second_seqs.is_empty());
        assert!(second_seqs[0] > *first_seqs.last().unwrap(), "incremental: {first_seqs:?} then {second_seqs:?}");
        let text = second["summary_text"].as_str().unwrap();
        assert!(text.contains("first request 0"), "the first request survives: {text}");
        assert_ne!(second["anchors"]["user_intent"], "N/A");

        // The view's summary message names an anchor only where it adds to the summary: no
        // "N/A" line, no request or plan the summary above already quotes, no calls it lists
        // as folded. Here it says them all, so no anchor is shown; the record keeps them.
        let view = compact(&app, &id, json!({"format": "raw", "mode": "dry_run"})).await;
        let summary = view["view"]["items"][1]["content"].as_str().unwrap();
        assert!(summary.starts_with("[ctxd: summary"), "{summary}");
        assert!(summary.contains("- observation://2 first request 0") || summary.contains("> observation://2 first request 0"), "{summary}");
        assert!(!summary.contains("N/A") && !summary.contains("Anchors:"), "{summary}");
        let record = &view["record"]["anchors"];
        assert!(record["user_intent"].as_str().unwrap().contains("first request 0"), "{record}");
        assert!(record["execution_progress"].as_str().unwrap().starts_with("recent tool calls: shell"), "{record}");
        assert!(record["next_step"].as_str().unwrap().starts_with("analysis"), "{record}");

        // Every acting compaction is listed, newest first, and each can be fetched.
        let listed = app.get(&format!("/sessions/{id}/compactions?limit=200")).await.body;
        let ids: Vec<&str> = listed["compactions"].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap()).collect();
        assert_eq!(ids.len(), acted.len());
        assert_eq!(ids[0], acted.last().unwrap()["id"].as_str().unwrap());
        let one = app.get(&format!("/sessions/{id}/compactions/{}", ids[1])).await;
        assert_eq!(one.status, StatusCode::OK);
        assert_eq!(one.body["id"], ids[1]);
    }
}

on_both_backends! {
    async fn views_render_for_each_provider(app) {
        let id = small_session(&app).await;
        let mut batch = vec![json!({"type": "message", "role": "system", "content": "sys"}), user("go")];
        batch.extend(exchange("a", 100));
        batch.push(json!({"type": "message", "role": "assistant", "tool_calls": [
            {"id": "p1", "name": "read", "arguments": "{\"path\":\"a\"}"},
            {"id": "p2", "name": "read", "arguments": "{\"path\":\"b\"}"}]}));
        batch.push(user("while you read: hurry"));
        batch.push(json!({"type": "message", "role": "tool", "tool_call_id": "p2", "content": "b"}));
        batch.push(json!({"type": "message", "role": "tool", "tool_call_id": "p1", "content": "a"}));
        app.append(&id, Value::Array(batch)).await;
        let openai = compact(&app, &id, json!({"format": "openai"})).await;
        validate_openai(&openai["view"]).unwrap();
        let anthropic = compact(&app, &id, json!({"format": "anthropic"})).await;
        validate_anthropic(&anthropic["view"]).unwrap();
        assert_eq!(anthropic["view"]["system"][0]["text"], "sys");
        let raw = compact(&app, &id, json!({"format": "raw"})).await;
        let items = raw["view"]["items"].as_array().unwrap();
        assert_eq!(items.len(), 8);
        assert!(items.iter().all(|i| i["projection"] == "full"));
        assert_eq!(raw["persisted"], false, "nothing changed, nothing stored");
    }
}

on_both_backends! {
    async fn dry_runs_persist_nothing_and_force_persists(app) {
        let id = small_session(&app).await;
        // Results under the per-item cap, so the view is past the soft tier after the caps.
        let mut batch = vec![user("start")];
        for i in 0..18 { batch.extend(exchange(&format!("c{i}"), 1_400)); }
        batch.push(user("continue"));
        app.append(&id, Value::Array(batch)).await;
        let dry = compact(&app, &id, json!({"mode": "dry_run"})).await;
        assert_eq!(dry["persisted"], false);
        assert!(matches!(dry["record"]["tier"].as_str(), Some("soft" | "full")), "{}", dry["record"]);
        assert!(!dry["record"]["offloaded"].as_array().unwrap().is_empty());
        let listed = app.get(&format!("/sessions/{id}/compactions")).await.body;
        assert_eq!(listed["compactions"], json!([]));
        let context = app.get(&format!("/sessions/{id}/context")).await.body;
        assert_eq!(context["checkpoint_seq"], 0, "a dry run changes no state");

        // The compaction the dry run showed is the one that then happens.
        let auto = compact(&app, &id, json!({})).await;
        assert_eq!(auto["persisted"], true);
        assert_eq!(auto["view"], dry["view"]);
        assert_eq!(auto["record"]["offloaded"], dry["record"]["offloaded"]);
        assert_eq!(auto["record"]["summarized_seqs"], dry["record"]["summarized_seqs"]);
        // Forced, it folds everything older than the tail.
        let forced = compact(&app, &id, json!({"mode": "force"})).await;
        assert_eq!(forced["persisted"], true);
        assert_eq!(forced["record"]["trigger"], "manual");
        assert!(!forced["record"]["summarized_seqs"].as_array().unwrap().is_empty());
        let listed = app.get(&format!("/sessions/{id}/compactions")).await.body;
        assert_eq!(listed["compactions"][0]["id"], forced["record"]["id"]);
        // A retry with no new events changes nothing.
        let again = compact(&app, &id, json!({})).await;
        assert_eq!(again["persisted"], false);
        assert_eq!(again["view"], forced["view"]);
    }
}

on_both_backends! {
    async fn context_explains_every_item(app) {
        let id = small_session(&app).await;
        let mut batch = vec![
            json!({"type": "message", "role": "system", "content": "sys"}),
            json!({"type": "message", "role": "user", "content": "never forget: use tabs", "pinned": true}),
        ];
        for i in 0..6 { batch.push(user(&format!("step {i}"))); batch.extend(exchange(&format!("c{i}"), 300)); }
        app.append(&id, Value::Array(batch)).await;
        let forced = compact(&app, &id, json!({"mode": "force"})).await;
        let cid = forced["record"]["id"].as_str().unwrap().to_owned();
        let context = app.get(&format!("/sessions/{id}/context")).await.body;
        let items = context["items"].as_array().unwrap();
        assert_eq!(items.len() as i64, context["head_seq"].as_i64().unwrap());
        let item = |seq: i64| items.iter().find(|i| i["seq"] == seq).unwrap();
        assert_eq!((item(1)["state"].as_str(), item(1)["reason"].as_str()), (Some("pinned"), Some("system_prompt")));
        assert_eq!(item(2)["reason"], "pinned_user_message");
        assert_eq!(item(2)["projection"], "full");
        let checkpoint = context["checkpoint_seq"].as_i64().unwrap();
        assert!(checkpoint > 2);
        for i in items {
            let seq = i["seq"].as_i64().unwrap();
            if seq > 2 && seq <= checkpoint {
                assert_eq!(i["state"], "archived", "{i}");
                assert_eq!(i["projection"], "summary");
                assert_eq!(i["reason"], "summarized");
                assert_eq!(i["compaction_id"], cid.as_str());
                assert_eq!(i["tokens_in_view"], 0);
            }
            if seq > checkpoint {
                assert_eq!(i["projection"], "full");
                assert_eq!(i["reason"], "recent_tail");
            }
        }
        assert!(context["summary"].as_str().unwrap().contains("step 0"));
        assert_eq!(context["tier"], "none");
        let totals = &context["totals"]["by_state"];
        assert_eq!(totals["archived"]["items"].as_i64().unwrap(), checkpoint - 2);
        assert_eq!(totals["pinned"]["items"], 2);

        // Filters and pages.
        let archived = app.get(&format!("/sessions/{id}/context?state=archived&limit=3")).await.body;
        assert_eq!(archived["items"].as_array().unwrap().len(), 3);
        assert!(archived["items"].as_array().unwrap().iter().all(|i| i["state"] == "archived"));
        let next = archived["next_after_seq"].as_i64().unwrap();
        let rest = app.get(&format!("/sessions/{id}/context?state=archived&after_seq={next}&limit=1000")).await.body;
        assert_eq!(rest["items"].as_array().unwrap().len() as i64, checkpoint - 2 - 3);
        let range = app.get(&format!("/sessions/{id}/context?from_seq=3&to_seq=4")).await.body;
        let seqs: Vec<i64> = range["items"].as_array().unwrap().iter().map(|i| i["seq"].as_i64().unwrap()).collect();
        assert_eq!(seqs, [3, 4]);
        assert_eq!(app.get(&format!("/sessions/{id}/context?state=gone")).await.status, StatusCode::BAD_REQUEST);
    }
}

on_both_backends! {
    async fn observations_recall_exact_slices(app) {
        let id = small_session(&app).await;
        let content = "héllo wörld 🚀 ".repeat(50);
        app.append(&id, json!([
            {"type": "message", "role": "assistant", "tool_calls": [{"id": "c", "name": "read"}]},
            {"type": "message", "role": "tool", "tool_call_id": "c", "content": content}
        ])).await;
        let chars: Vec<char> = content.chars().collect();
        let slice = app.get(&format!("/sessions/{id}/observations/2?offset=5&limit=10")).await.body;
        assert_eq!(slice["content"], chars[5..15].iter().collect::<String>());
        assert_eq!(slice["total_chars"], chars.len());
        assert_eq!(slice["next_offset"], 15);
        assert_eq!(slice["uri"], "observation://2");
        let mut recalled = String::new();
        let mut offset = 0;
        loop {
            let s = app.get(&format!("/sessions/{id}/observations/2?offset={offset}&limit=97")).await.body;
            recalled.push_str(s["content"].as_str().unwrap());
            match s["next_offset"].as_u64() { Some(n) => offset = n, None => break }
        }
        assert_eq!(recalled, content, "paging reassembles the exact content");
        let past = app.get(&format!("/sessions/{id}/observations/2?offset=100000")).await.body;
        assert_eq!(past["content"], "");
        assert_eq!(app.get(&format!("/sessions/{id}/observations/99")).await.status, StatusCode::NOT_FOUND);
        assert_eq!(app.get(&format!("/sessions/{id}/observations/2?limit=0")).await.status, StatusCode::BAD_REQUEST);
    }
}

on_both_backends! {
    async fn calibration_raises_utilization(app) {
        let id = small_session(&app).await;
        app.append(&id, json!([user(&"word ".repeat(400))])).await;
        let out = compact(&app, &id, json!({"mode": "force"})).await;
        let before = app.get(&format!("/sessions/{id}/context")).await.body;
        let estimate = out["record"]["input_tokens_estimate"].as_i64().unwrap();
        let reply = app.post(&format!("/sessions/{id}/usage"),
            &json!({"input_tokens": estimate * 2, "view_tokens": estimate})).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
        assert_eq!(reply.body["calibration"], 2.0);
        let after = app.get(&format!("/sessions/{id}/context")).await.body;
        assert!(after["utilization"].as_f64().unwrap() > before["utilization"].as_f64().unwrap());
        assert_eq!(after["calibration"], 2.0);
        for body in [json!({"input_tokens": 0, "view_tokens": 5}), json!({"input_tokens": 5}),
                     json!({"input_tokens": 5, "view_tokens": 5, "compaction_id": out["record"]["id"]})] {
            let bad = app.post(&format!("/sessions/{id}/usage"), &body).await;
            assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
        }
    }
}

on_both_backends! {
    async fn bad_compact_requests_are_named(app) {
        let id = small_session(&app).await;
        for (body, field) in [
            (json!({"overflow_retry": 3}), "overflow_retry"),
            (json!({"format": "xml"}), "format"),
            (json!({"mode": "maybe"}), "mode"),
            (json!({"tools": [{"description": "x".repeat(40_000)}]}), "tools"),
        ] {
            let reply = app.post(&format!("/sessions/{id}/compact"), &body).await;
            assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
            assert_eq!(reply.body["errors"][0]["field"], field, "{}", reply.body);
        }
        // Tool schemas that leave no room: the answer says what they need and the ceiling, and
        // schemas smaller by the difference fit.
        let tools = |chars: usize| json!({"tools": [{"name": "t", "description": "x".repeat(chars)}]});
        let reply = app.post(&format!("/sessions/{id}/compact"), &tools(30_000)).await;
        assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", reply.body);
        let (needed, ceiling) = (reply.body["needed_tokens"].as_i64().unwrap(),
                                 reply.body["ceiling_tokens"].as_i64().unwrap());
        assert_eq!(ceiling, 8_000);
        assert!(needed >= 7_500 + 500 + 512, "{}", reply.body);
        assert!(reply.body["detail"].as_str().unwrap().contains(&format!("need {needed} tokens")), "{}", reply.body);
        let fits = tools(30_000 - 4 * (needed - ceiling) as usize);
        let reply = app.post(&format!("/sessions/{id}/compact"), &fits).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
        assert!(reply.body["record"]["tokens_after"].as_i64().unwrap() <= 8_000);
        let ghost = "01936f4e-8a7b-7c3d-9e2f-4a5b6c7d8e9f";
        assert_eq!(app.post(&format!("/sessions/{ghost}/compact"), &json!({})).await.status, StatusCode::NOT_FOUND);
        let tool = app.get("/tools/recall_observation?format=anthropic").await.body;
        assert_eq!(tool["name"], "recall_observation");
        assert!(tool["input_schema"]["properties"]["uri"].is_object());
        let tool = app.get("/tools/recall_observation").await.body;
        assert_eq!(tool["function"]["name"], "recall_observation");
        assert_eq!(app.get("/tools/recall_observation?format=xml").await.status, StatusCode::BAD_REQUEST);
    }
}

on_both_backends! {
    async fn concurrent_compactions_never_lose_state(app) {
        let id = small_session(&app).await;
        let mut batch = vec![user("start")];
        for i in 0..10 { batch.extend(exchange(&format!("c{i}"), 300)); batch.push(user(&format!("next {i}"))); }
        app.append(&id, Value::Array(batch)).await;
        let app = Arc::new(app);
        let calls: Vec<_> = (0..8).map(|_| {
            let (app, id) = (app.clone(), id.clone());
            tokio::spawn(async move { compact(&app, &id, json!({"mode": "force"})).await })
        }).collect();
        let mut persisted = 0;
        for call in calls {
            let out = call.await.unwrap();
            validate_openai(&out["view"]).unwrap();
            if out["persisted"] == true { persisted += 1; }
        }
        assert!(persisted >= 1);
        let listed = app.get(&format!("/sessions/{id}/compactions?limit=200")).await.body;
        let records = listed["compactions"].as_array().unwrap();
        assert_eq!(records.len(), persisted, "every persisted compaction has its record");
        // Each seq was summarised by exactly one compaction.
        let mut seen = std::collections::HashSet::new();
        for r in records {
            for s in r["summarized_seqs"].as_array().unwrap() {
                assert!(seen.insert(s.as_i64().unwrap()), "seq {s} summarised twice");
            }
        }
        let context = app.get(&format!("/sessions/{id}/context")).await.body;
        assert_eq!(seen.len() as i64, context["totals"]["by_state"]["archived"]["items"].as_i64().unwrap());
    }
}

/// A loopback server that answers every request with `status` and `body` after `delay`.
async fn fake_provider(status: u16, body: Value, delay: Duration) -> String {
    let app = axum::Router::new().fallback(move || {
        let body = body.clone();
        async move {
            tokio::time::sleep(delay).await;
            (
                axum::http::StatusCode::from_u16(status).unwrap(),
                axum::Json(body),
            )
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

/// A service whose summariser is an OpenAI-compatible provider at `base_url`.
async fn with_provider(backend: Backend, base_url: String, timeout: Duration) -> TestApp {
    TestApp::spawn_with_openai_model(backend, base_url, Some("sk-test"), timeout).await
}

/// A small session with six tool exchanges between two user requests: forcing a compaction
/// folds them into a summary.
async fn session_to_summarise(app: &TestApp) -> String {
    let id = small_session(app).await;
    let mut batch = vec![user("investigate the outage")];
    for i in 0..6 {
        batch.extend(exchange(&format!("c{i}"), 300));
    }
    batch.push(user("go on"));
    app.append(&id, Value::Array(batch)).await;
    id
}

async fn summarise_with(backend: Backend, status: u16, answer: Value, delay: Duration) -> Value {
    let base_url = fake_provider(status, answer, delay).await;
    let app = with_provider(backend, base_url, Duration::from_millis(500)).await;
    let id = session_to_summarise(&app).await;
    let out = compact(&app, &id, json!({"mode": "force"})).await;
    out["record"].clone()
}

fn good_answer() -> Value {
    let content = json!({"summary": "The user is investigating an outage; six logs were read.",
        "anchors": {"user_intent": "investigate the outage", "execution_progress": "read six logs",
            "key_decision": "N/A", "tried_solution": "N/A", "next_step": "N/A"}})
    .to_string();
    json!({"choices": [{"message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": 900, "completion_tokens": 60}})
}

async fn summariser_outcomes(backend: Backend) {
    let good = summarise_with(backend, 200, good_answer(), Duration::ZERO).await;
    assert_eq!(good["summarizer"]["kind"], "openai");
    assert_eq!(good["summarizer"]["model"], "fake-model");
    assert!(good["summary_text"]
        .as_str()
        .unwrap()
        .contains("investigating an outage"));
    assert!(good.get("error").is_none());

    let cases = [
        (
            200,
            json!({"choices": [{"message": {"content": "no json here"}}]}),
            Duration::ZERO,
            "refused",
        ),
        (500, json!({"error": "boom"}), Duration::ZERO, "HTTP 500"),
        (200, good_answer(), Duration::from_secs(5), "did not answer"),
    ];
    for (status, answer, delay, needle) in cases {
        let record = summarise_with(backend, status, answer, delay).await;
        assert_eq!(record["summarizer"]["kind"], "deterministic", "{record}");
        let error = record["error"].as_str().unwrap_or_default();
        assert!(error.contains(needle), "{needle}: {error}");
        assert!(record["summary_text"]
            .as_str()
            .unwrap()
            .contains("investigate the outage"));
    }
}

#[tokio::test]
async fn summariser_failures_fall_back_and_say_why_sqlite() {
    summariser_outcomes(Backend::Sqlite).await;
}

#[tokio::test]
async fn summariser_failures_fall_back_and_say_why_postgres() {
    summariser_outcomes(Backend::Postgres).await;
}

on_both_backends! {
    async fn a_replica_serves_what_another_replica_compacted(app) {
        // A replica remembers the state it last read or wrote; once another replica changed it,
        // the next call must serve the new state's view, not the remembered one.
        let id = small_session(&app).await;
        let other = app.replica().await;
        let mut batch = vec![json!({"type": "message", "role": "system", "content": "sys"}), user("first request")];
        batch.extend(exchange("a", 300));
        batch.push(user("second request"));
        batch.extend(exchange("b", 300));
        batch.push(user("third request"));
        batch.extend(exchange("c", 300));
        app.append(&id, Value::Array(batch)).await;
        let here = compact(&app, &id, json!({})).await;
        assert_eq!(here["record"]["acted"], false, "{}", here["record"]);
        // Another replica folds the head (a manual compaction), then the agent goes on.
        let forced = app.send(app.client.post(format!("{other}/sessions/{id}/compact")).json(&json!({"mode": "force"}))).await;
        assert_eq!(forced.status, StatusCode::OK);
        assert_eq!(forced.body["record"]["acted"], true, "{}", forced.body["record"]);
        app.append(&id, json!([user("fourth request")])).await;
        let next = compact(&app, &id, json!({})).await;
        let messages = next["view"]["messages"].as_array().unwrap();
        let forced_messages = forced.body["view"]["messages"].as_array().unwrap();
        assert_eq!(&messages[..forced_messages.len()], &forced_messages[..], "the forced compaction's view, then the new event");
        assert_eq!(messages.len(), forced_messages.len() + 1);
        assert_eq!(messages.last().unwrap()["content"], "fourth request");
    }
}

on_both_backends! {
    async fn replicas_continue_each_others_compactions(app) {
        // Each replica remembers the events of the views it served, and the JSON their
        // messages rendered to in each format; a replica whose memory is behind another's
        // compaction must still serve exactly the stored state's view, in every format.
        let id = small_session(&app).await;
        let other = app.replica().await;
        let bases = [app.base.clone(), other];
        app.append(&id, json!([{"type": "message", "role": "system", "content": "sys"}])).await;
        let mut acted = 0;
        for turn in 0..30 {
            let mut batch = vec![user(&format!("request {turn}"))];
            batch.extend(exchange(&format!("r{turn}"), 1_500));
            assert_eq!(app.append(&id, Value::Array(batch)).await.status, StatusCode::CREATED);
            let (here, there) = (&bases[turn % 2], &bases[(turn + 1) % 2]);
            let format = ["openai", "anthropic", "raw"][turn % 3];
            let served = app.send(app.client.post(format!("{here}/sessions/{id}/compact")).json(&json!({"format": format}))).await;
            assert_eq!(served.status, StatusCode::OK);
            acted += usize::from(served.body["record"]["acted"] == true);
            let replayed = app.send(app.client.post(format!("{there}/sessions/{id}/compact")).json(&json!({"mode": "dry_run", "format": format}))).await;
            assert_eq!(replayed.body["view"], served.body["view"], "turn {turn}: the other replica serves the same view");
            // And both serve what a replica with nothing in memory reads from the database.
            let fresh = app.replica().await;
            let truth = app.send(app.client.post(format!("{fresh}/sessions/{id}/compact")).json(&json!({"mode": "dry_run", "format": format}))).await;
            assert_eq!(truth.body["view"], served.body["view"], "turn {turn}: as read from the database");
        }
        assert!(acted >= 2, "the session compacted along the way");
    }
}

/// A loopback provider that, while it is answering its first summary request, reports usage
/// for the session to ctxd: that write moves the compaction state's version under the running
/// compaction, which then loses the race and starts again over the same events.
async fn racing_provider(
    ctxd: Arc<std::sync::Mutex<Option<String>>>,
) -> (
    String,
    Arc<std::sync::atomic::AtomicUsize>,
    Arc<std::sync::Mutex<Vec<u16>>>,
) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let calls = Arc::new(AtomicUsize::new(0));
    let usage_statuses = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (counter, statuses) = (calls.clone(), usage_statuses.clone());
    let app = axum::Router::new().fallback(move || {
        let (counter, statuses, ctxd) = (counter.clone(), statuses.clone(), ctxd.clone());
        async move {
            if counter.fetch_add(1, Ordering::SeqCst) == 0 {
                let url = ctxd.lock().unwrap().clone().expect("the session is known");
                let reply = reqwest::Client::new()
                    .post(url)
                    .json(&json!({"input_tokens": 1000, "view_tokens": 1000}))
                    .send()
                    .await
                    .unwrap();
                statuses.lock().unwrap().push(reply.status().as_u16());
            }
            axum::Json(good_answer())
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), calls, usage_statuses)
}

async fn a_lost_race_reuses_the_summary(backend: Backend) {
    let ctxd = Arc::new(std::sync::Mutex::new(None));
    let (base_url, calls, usage_statuses) = racing_provider(ctxd.clone()).await;
    let app = with_provider(backend, base_url, Duration::from_secs(10)).await;
    let id = session_to_summarise(&app).await;
    *ctxd.lock().unwrap() = Some(format!("{}/sessions/{id}/usage", app.base));

    let out = compact(&app, &id, json!({"mode": "force"})).await;
    // The usage report did move the state under the compaction...
    assert_eq!(*usage_statuses.lock().unwrap(), [200]);
    // ...which started again from the new state and reused the model's summary: one call.
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 1);
    let record = &out["record"];
    assert_eq!(record["summarizer"]["kind"], "openai", "{record}");
    assert!(record.get("error").is_none(), "{record}");
    assert_eq!(out["persisted"], true);
    let stored = app
        .get(&format!(
            "/sessions/{id}/compactions/{}",
            record["id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(stored.status, StatusCode::OK);
    assert!(stored.body["summary_text"]
        .as_str()
        .unwrap()
        .contains("investigating an outage"));
}

#[tokio::test]
async fn a_compaction_that_lost_the_race_asks_the_model_once_sqlite() {
    a_lost_race_reuses_the_summary(Backend::Sqlite).await;
}

#[tokio::test]
async fn a_compaction_that_lost_the_race_asks_the_model_once_postgres() {
    a_lost_race_reuses_the_summary(Backend::Postgres).await;
}

/// Every item of a session as the context report must show it, and the totals, counted from
/// every stored row (what the report once did on every call).
async fn recount(app: &TestApp, id: &str) -> (Vec<Value>, Value) {
    use ctxd::engine::inspect::standing;
    use ctxd::engine::report::ContextItem;

    let uuid = id.parse().unwrap();
    let (_, stored) = app.store.load_session_state(uuid).await.unwrap().unwrap();
    let rows = app
        .store
        .item_rows(uuid, 0, i64::MAX, u32::MAX)
        .await
        .unwrap();
    let ranges = app.store.folded_ranges(uuid, 0, i64::MAX).await.unwrap();
    let mut totals = json!({"by_state": {}, "by_projection": {}});
    let mut items = Vec::new();
    for row in rows {
        let s = standing(
            row.seq,
            row.role,
            row.pinned,
            row.tokens,
            &stored.state,
            &ranges,
        );
        let item = serde_json::to_value(ContextItem {
            seq: row.seq,
            id: row.id,
            event_type: row.event_type,
            role: row.role,
            tokens: row.tokens,
            standing: s,
        })
        .unwrap();
        for (map, key) in [("by_state", "state"), ("by_projection", "projection")] {
            let tally = totals[map]
                .as_object_mut()
                .unwrap()
                .entry(item[key].as_str().unwrap())
                .or_insert(json!({"items": 0, "tokens": 0, "tokens_in_view": 0}));
            for (field, add) in [
                ("items", 1),
                ("tokens", item["tokens"].as_i64().unwrap()),
                ("tokens_in_view", item["tokens_in_view"].as_i64().unwrap()),
            ] {
                tally[field] = json!(tally[field].as_i64().unwrap() + add);
            }
        }
        items.push(item);
    }
    (items, totals)
}

/// Checks every page of every filter of the session's context report against [`recount`];
/// `present` are the states some item must be in, so that their filters are exercised.
async fn agrees_with_a_recount(app: &TestApp, id: &str, present: &[&str]) {
    let (all, totals) = recount(app, id).await;
    let head = all.len() as i64;
    for state in present {
        assert!(
            all.iter().any(|i| i["state"] == *state),
            "some item is {state}"
        );
    }
    let whole = app
        .get(&format!("/sessions/{id}/context?limit=2000"))
        .await
        .body;
    assert_eq!(whole["totals"], totals);
    assert_eq!(whole["head_seq"], head);
    assert_eq!(whole["items"].as_array().unwrap(), &all);
    assert!(whole.get("next_after_seq").is_none());

    let ranges = [
        (None, None),
        (Some(5), Some(head - 3)),
        (Some(head - 2), None),
        (None, Some(0)),
    ];
    for state in [
        None,
        Some("pinned"),
        Some("active"),
        Some("retained"),
        Some("archived"),
    ] {
        for limit in [1, 4, 2000] {
            for (from, to) in ranges {
                let expected: Vec<&Value> = all
                    .iter()
                    .filter(|i| state.is_none_or(|s| i["state"] == s))
                    .filter(|i| from.is_none_or(|f| i["seq"].as_i64().unwrap() >= f))
                    .filter(|i| to.is_none_or(|t| i["seq"].as_i64().unwrap() <= t))
                    .collect();
                let mut filters = format!("limit={limit}");
                for (name, value) in [
                    ("state", state.map(str::to_owned)),
                    ("from_seq", from.map(|f| f.to_string())),
                    ("to_seq", to.map(|t| t.to_string())),
                ] {
                    if let Some(value) = value {
                        filters.push_str(&format!("&{name}={value}"));
                    }
                }
                let mut seen: Vec<Value> = Vec::new();
                let mut after = String::new();
                loop {
                    let page = app
                        .get(&format!("/sessions/{id}/context?{filters}{after}"))
                        .await
                        .body;
                    assert_eq!(page["totals"], totals, "{filters}{after}");
                    let items = page["items"].as_array().unwrap();
                    assert!(items.len() <= limit, "{filters}{after}");
                    seen.extend(items.iter().cloned());
                    match page["next_after_seq"].as_i64() {
                        Some(next) => {
                            assert_eq!(
                                items.len(),
                                limit,
                                "only a full page has a next one: {filters}{after}"
                            );
                            after = format!("&after_seq={next}");
                        }
                        None => break,
                    }
                }
                assert_eq!(seen.iter().collect::<Vec<_>>(), expected, "{filters}");
            }
        }
    }
}

on_both_backends! {
    async fn the_context_report_agrees_with_a_full_recount(app) {
        let id = app.create_session(json!({"config": {
            "context_window": 8000, "max_output_tokens": 500, "tokenizer": "chars4",
            "min_tail_messages": 4, "offload_threshold_chars": 400,
            "thresholds": {"warn": 0.6, "soft": 0.799, "full": 0.8, "emergency": 0.95}
        }})).await;
        app.append(&id, json!([
            {"type": "message", "role": "system", "content": "You are a log analyst."},
            {"type": "message", "role": "user", "content": "never forget: use tabs", "pinned": true}
        ])).await;
        let records = grow(&app, &id, 25, "a").await;
        agrees_with_a_recount(&app, &id, &["pinned", "active", "retained", "archived"]).await;
        let mut tiers: Vec<Value> = records.iter().filter(|r| r["acted"] == true).map(|r| r["tier"].clone()).collect();
        // A burst the view cannot hold: a pinned paste larger than the window, which no
        // gentler step reduces (a tool result or a request that large, not pinned, would be
        // shown as its head and tail).
        let burst = vec![json!({"type": "note", "content": "keep", "pinned": true}),
            json!({"type": "message", "role": "user", "pinned": true,
                   "content": "pasted log line\n".repeat(2_500)})];
        app.append(&id, Value::Array(burst)).await;
        tiers.push(compact(&app, &id, json!({})).await["record"]["tier"].clone());
        for tier in ["warn", "full", "emergency"] {
            assert!(tiers.contains(&json!(tier)), "the session went through {tier}: {tiers:?}");
        }
        agrees_with_a_recount(&app, &id, &["pinned", "archived"]).await;
        grow(&app, &id, 3, "b").await;
        compact(&app, &id, json!({"overflow_retry": 1})).await;
        // And events appended since the last view.
        app.append(&id, json!([user("one more"), {"type": "note", "content": "later", "pinned": true}])).await;

        agrees_with_a_recount(&app, &id, &["pinned", "active", "retained", "archived"]).await;
    }
}

on_both_backends! {
    async fn tool_results_with_no_output_are_taken_and_rendered_for_every_provider(app) {
        let id = small_session(&app).await;
        let batch = json!([
            user("create the build directory and run the silent tests"),
            {"type": "message", "role": "assistant",
                "tool_calls": [{"id": "t1", "name": "shell", "arguments": {"cmd": "mkdir -p build"}},
                               {"id": "t2", "name": "shell", "arguments": {"cmd": "make -s test"}}]},
            {"type": "message", "role": "tool", "tool_call_id": "t1", "name": "shell", "content": ""},
            {"type": "message", "role": "tool", "tool_call_id": "t2", "name": "shell"},
            {"type": "message", "role": "assistant", "content": "Both commands succeeded silently."}
        ]);
        let appended = app.append(&id, batch).await;
        assert_eq!(appended.status, StatusCode::CREATED, "{}", appended.body);

        let openai = compact(&app, &id, json!({"format": "openai"})).await;
        assert_eq!(validate_openai(&openai["view"]), Ok(()));
        let results: Vec<&Value> = openai["view"]["messages"].as_array().unwrap().iter()
            .filter(|m| m["role"] == "tool").collect();
        assert_eq!(results.len(), 2);
        assert!(results.iter().all(|m| m["content"] == ""), "{results:?}");

        let anthropic = compact(&app, &id, json!({"format": "anthropic"})).await;
        assert_eq!(validate_anthropic(&anthropic["view"]), Ok(()));
        let blocks: Vec<&Value> = anthropic["view"]["messages"].as_array().unwrap().iter()
            .flat_map(|m| m["content"].as_array().unwrap())
            .filter(|b| b["type"] == "tool_result").collect();
        assert_eq!(blocks.len(), 2);
        // An empty result is a tool_result with no content, which Anthropic accepts; an
        // empty text block, which it refuses, is never sent.
        assert!(blocks.iter().all(|b| b.get("content").is_none()), "{blocks:?}");

        // Recall says the same: nothing to recall.
        let seq = appended.body["events"][2]["seq"].as_i64().unwrap();
        let recalled = app.get(&format!("/sessions/{id}/observations/{seq}")).await;
        assert_eq!(recalled.status, StatusCode::OK);
        assert_eq!(recalled.body["total_chars"], 0);
        assert_eq!(recalled.body["content"], "");
    }
}

on_both_backends! {
    async fn outlines_page_like_the_records_they_outline(app) {
        let id = small_session(&app).await;
        for turn in 0..6 {
            let mut batch = vec![user(&format!("turn {turn}"))];
            for i in 0..6 { batch.extend(exchange(&format!("t{turn}c{i}"), 1_600)); }
            app.append(&id, Value::Array(batch)).await;
            compact(&app, &id, json!({"mode": "force"})).await;
        }
        let records = app.get(&format!("/sessions/{id}/compactions?limit=4")).await;
        let outlines = app.get(&format!("/sessions/{id}/compactions/outline?limit=4")).await;
        assert_eq!(outlines.status, StatusCode::OK, "{}", outlines.body);
        assert_eq!(outlines.body["next_cursor"], records.body["next_cursor"]);
        let records = records.body["compactions"].as_array().unwrap().clone();
        let listed = outlines.body["compactions"].as_array().unwrap();
        assert_eq!(listed.len(), records.len());
        for (outline, record) in listed.iter().zip(&records) {
            for field in ["id", "created_at", "head_seq", "trigger", "tier", "acted", "tokens_before", "tokens_after", "budget"] {
                assert_eq!(outline[field], record[field], "{field}");
            }
            assert_eq!(outline["summarized"], record["summarized_seqs"].as_array().unwrap().len());
            assert_eq!(outline["offloaded"], record["offloaded"].as_array().unwrap().len());
            assert_eq!(outline["evicted"], record["evicted_seqs"].as_array().unwrap().len());
            assert!(outline.to_string().len() * 4 < record.to_string().len(), "an outline is small");
        }
        // The next page follows the cursor, as the records' does.
        let cursor = outlines.body["next_cursor"].as_str().unwrap();
        let next = app.get(&format!("/sessions/{id}/compactions/outline?limit=4&cursor={cursor}")).await;
        assert_eq!(next.body["compactions"].as_array().unwrap().len(), 2);
        // Bad input is named; a missing session is one.
        let bad = app.get(&format!("/sessions/{id}/compactions/outline?limit=0")).await;
        assert_eq!(bad.status, StatusCode::BAD_REQUEST, "{}", bad.body);
        let missing = app.get(&format!("/sessions/{}/compactions/outline", uuid::Uuid::now_v7())).await;
        assert_eq!(missing.status, StatusCode::NOT_FOUND);
    }
}
