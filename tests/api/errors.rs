//! Every error is a problem document naming what is wrong, with the request id.

use std::time::Duration;

use ctxd::Limits;
use reqwest::StatusCode;
use serde_json::json;

use crate::on_both_backends;
use crate::support::{Backend, TestApp};

on_both_backends! {
    async fn malformed_and_mistyped_bodies(app) {
        let malformed = app
            .send(app.client.post(app.url("/sessions")).header("content-type", "application/json").body("{\"config\": "))
            .await;
        assert_eq!(malformed.status, StatusCode::BAD_REQUEST);
        assert!(malformed.body["detail"].as_str().unwrap().contains("not valid JSON"));

        let text = app.send(app.client.post(app.url("/sessions")).body("{}")).await;
        assert_eq!(text.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
        let form = app
            .send(app.client.post(app.url("/sessions")).header("content-type", "text/plain").body("{}"))
            .await;
        assert_eq!(form.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
        assert!(form.body["detail"].as_str().unwrap().contains("application/json"));
    }
}

on_both_backends! {
    async fn unknown_routes_methods_and_ids(app) {
        let missing = app.get("/nowhere").await;
        assert_eq!(missing.status, StatusCode::NOT_FOUND);
        assert_eq!(missing.body["instance"], "/nowhere");

        let wrong_method = app.send(app.client.put(app.url("/sessions"))).await;
        assert_eq!(wrong_method.status, StatusCode::METHOD_NOT_ALLOWED);
        let allow = wrong_method.headers["allow"].to_str().unwrap();
        assert!(allow.contains("GET") && allow.contains("POST"), "{allow}");
        assert!(wrong_method.body["detail"].as_str().unwrap().contains("allow"), "{}", wrong_method.body);

        let bad_id = app.get("/sessions/not-a-uuid").await;
        assert_eq!(bad_id.status, StatusCode::BAD_REQUEST);
        assert!(bad_id.body["detail"].as_str().unwrap().contains("not-a-uuid"), "{}", bad_id.body);
    }
}

on_both_backends! {
    async fn the_client_request_id_travels_through(app) {
        let reply = app
            .send(app.client.get(app.url("/sessions/01936f4e-8a7b-7c3d-9e2f-4a5b6c7d8e9f")).header("x-request-id", "trace-42"))
            .await;
        assert_eq!(reply.status, StatusCode::NOT_FOUND);
        assert_eq!(reply.headers["x-request-id"], "trace-42");
        assert_eq!(reply.body["request_id"], "trace-42");
        // Without one, the service makes one up and returns it.
        let ok = app.get("/healthz").await;
        assert!(!ok.headers["x-request-id"].to_str().unwrap().is_empty());
    }
}

async fn limited(backend: Backend) {
    let app = TestApp::spawn_with(
        backend,
        Limits {
            max_batch_events: 3,
            max_body_bytes: 2048,
            max_event_bytes: 600,
            request_timeout: Duration::from_secs(30),
            ..Limits::default()
        },
    )
    .await;
    let id = app.create_session(json!({})).await;
    let note = json!({"type": "note", "content": "x"});
    let too_many = app.append(&id, json!([note, note, note, note])).await;
    assert_eq!(too_many.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(too_many.body["detail"]
        .as_str()
        .unwrap()
        .contains("limit is 3"));

    let big = json!([{"type": "note", "content": "y".repeat(4096)}]);
    let too_big = app.append(&id, big).await;
    assert_eq!(too_big.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(
        too_big.body["detail"]
            .as_str()
            .unwrap()
            .contains("2048 bytes"),
        "{}",
        too_big.body
    );

    // One event over the per-event limit refuses its batch, naming it.
    let one_big = json!([note, {"type": "note", "content": "z".repeat(1000)}]);
    let too_big = app.append(&id, one_big).await;
    assert_eq!(too_big.status, StatusCode::PAYLOAD_TOO_LARGE);
    let detail = too_big.body["detail"].as_str().unwrap();
    assert!(
        detail.starts_with("events[1] is ") && detail.contains("limit is 600 bytes per event"),
        "{detail}"
    );
    // And a turn's message.
    let turn = app
        .post(
            &format!("/sessions/{id}/turn"),
            &json!({"format": "openai", "messages": [
                {"role": "user", "content": "w".repeat(1000)}]}),
        )
        .await;
    assert_eq!(turn.status, StatusCode::PAYLOAD_TOO_LARGE, "{}", turn.body);
    assert!(turn.body["detail"]
        .as_str()
        .unwrap()
        .starts_with("messages[0] is "));

    let session = app.get(&format!("/sessions/{id}")).await;
    assert_eq!(
        session.body["head_seq"], 0,
        "nothing of a refused batch is written"
    );
    assert_eq!(
        app.append(&id, json!([note, note, note])).await.status,
        StatusCode::CREATED
    );
}

#[tokio::test]
async fn limits_are_enforced_sqlite() {
    limited(Backend::Sqlite).await;
}

#[tokio::test]
async fn limits_are_enforced_postgres() {
    limited(Backend::Postgres).await;
}

on_both_backends! {
    async fn readiness_names_the_backend(app) {
        let ready = app.get("/readyz").await;
        assert_eq!(ready.status, StatusCode::OK);
        assert_eq!(ready.body["status"], "ready");
        assert_eq!(ready.body["database"], app.store.backend());
        assert_eq!(app.get("/healthz").await.body["status"], "ok");
        let docs = app.client.get(app.url("/docs/")).send().await.unwrap();
        assert_eq!(docs.status(), StatusCode::OK);
        assert!(docs.text().await.unwrap().contains("swagger"), "the docs UI is served from the binary");
    }
}

/// The database's connections are terminated under the service (a restart, an operator's
/// `pg_terminate_backend`): requests answer 503 with Retry-After, never 500, and the service
/// recovers by itself; nothing acknowledged is lost.
#[tokio::test]
async fn terminated_connections_answer_503_and_recover() {
    let app = TestApp::spawn(Backend::Postgres).await;
    let session = app.create_session(json!({})).await;
    let mut acknowledged = 0;
    for round in 0..3 {
        // Warm the pool so that several connections are idle in it.
        for i in 0..6 {
            let reply = app.post(&format!("/sessions/{session}/events"), &json!({"events": [
                {"type": "message", "role": "user", "content": format!("round {round} message {i}")}
            ]})).await;
            assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
            acknowledged += 1;
        }
        assert!(
            app.terminate_connections().await > 0,
            "the pool had connections"
        );
        let mut recovered = false;
        for attempt in 0..20 {
            let append = app
                .post(
                    &format!("/sessions/{session}/events"),
                    &json!({"events": [
                        {"id": format!("r{round}"), "type": "message", "role": "user",
                         "content": format!("after the restart {round}")}
                    ]}),
                )
                .await;
            let compact = app
                .post(&format!("/sessions/{session}/compact"), &json!({}))
                .await;
            for reply in [&append, &compact] {
                match reply.status {
                    StatusCode::OK | StatusCode::CREATED => {}
                    StatusCode::SERVICE_UNAVAILABLE => {
                        assert_eq!(reply.headers["retry-after"], "1", "{}", reply.body);
                        assert_eq!(reply.body["type"], "urn:ctxd:problem:unavailable");
                    }
                    other => panic!("attempt {attempt}: {other} {}", reply.body),
                }
            }
            if append.status == StatusCode::CREATED && compact.status == StatusCode::OK {
                recovered = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(recovered, "the service did not recover by itself");
        acknowledged += 1;
    }
    // Every acknowledged event is there once, with consecutive seqs (the client id made the
    // retried appends idempotent).
    let events = app
        .get(&format!("/sessions/{session}/events?limit=1000"))
        .await;
    let seqs: Vec<i64> = events.body["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_i64().unwrap())
        .collect();
    assert_eq!(seqs, (1..=acknowledged).collect::<Vec<i64>>());
}

/// With the database unreachable, readiness and requests answer 503 with Retry-After at once,
/// not after the pool's or the request's timeout (the client here gives up well before
/// either).
#[tokio::test]
async fn an_unreachable_database_is_answered_at_once() {
    use sqlx::postgres::PgConnectOptions;
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let options = PgConnectOptions::new()
        .host("127.0.0.1")
        .port(port)
        .username("ctxd");
    let pool = ctxd::store::PostgresStore::pool_options(4).connect_lazy_with(options);
    let store = std::sync::Arc::new(ctxd::store::PostgresStore::from_pool(pool));
    let state = ctxd::AppState::new(store, Limits::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, ctxd::app(state)).await });
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let ready = client
        .get(format!("{base}/readyz"))
        .send()
        .await
        .expect("readiness answers");
    assert_eq!(ready.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(ready.headers()["retry-after"], "1");
    let created = client
        .post(format!("{base}/sessions"))
        .json(&json!({}))
        .send()
        .await
        .expect("a request answers");
    assert_eq!(created.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(created.headers()["retry-after"], "1");
    let body: serde_json::Value = created.json().await.unwrap();
    assert_eq!(body["type"], "urn:ctxd:problem:unavailable", "{body}");
}
