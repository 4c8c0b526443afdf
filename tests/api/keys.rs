//! API keys and tenants: once a key exists every request needs one; a key's role decides what
//! it may call and its tenant which sessions it sees; another tenant's session answers exactly
//! as a missing one, on every operation the API document lists.

use std::process::Stdio;
use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::on_both_backends;
use crate::support::{Reply, TestApp};

/// The secret of a `ctxd_<id>_<secret>` key: everything after the id, as the secret (URL-safe
/// base64) may itself hold a `_`.
fn secret_of(token: &str) -> &str {
    token
        .splitn(3, '_')
        .nth(2)
        .expect("a key has an id and a secret")
}

/// Sends `method path` with `key` (and an empty JSON object as the body of a write).
async fn call(app: &TestApp, key: Option<&str>, method: &Method, path: &str) -> Reply {
    let mut request = app.client.request(method.clone(), app.url(path));
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    if method != Method::GET && method != Method::DELETE {
        request = request.json(&json!({}));
    }
    app.send(request).await
}

async fn post(app: &TestApp, key: &str, path: &str, body: Value) -> Reply {
    app.send(app.client.post(app.url(path)).bearer_auth(key).json(&body))
        .await
}

async fn get(app: &TestApp, key: &str, path: &str) -> Reply {
    app.send(app.client.get(app.url(path)).bearer_auth(key))
        .await
}

/// Makes a key with the admin endpoint; its bearer token.
async fn key(app: &TestApp, admin: Option<&str>, tenant: &str, role: &str) -> String {
    let mut request = app.client.post(app.url("/admin/keys"));
    if let Some(admin) = admin {
        request = request.bearer_auth(admin);
    }
    let reply = app
        .send(request.json(&json!({"tenant": tenant, "role": role, "name": "test"})))
        .await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
    reply.body["key_secret"].as_str().unwrap().to_owned()
}

/// A problem with what names one request taken out: the same answer for two sessions.
fn shape(problem: &Value, id: &str) -> Value {
    let mut problem = problem.clone();
    let object = problem.as_object_mut().unwrap();
    object.remove("request_id");
    for field in ["detail", "instance"] {
        if let Some(Value::String(text)) = object.get_mut(field) {
            *text = text.replace(id, "<id>");
        }
    }
    problem
}

/// Every operation of the document on one session, as (method, path template).
async fn session_operations(app: &TestApp) -> Vec<(Method, String)> {
    let document = app.get("/openapi.json").await.body;
    let mut operations = Vec::new();
    for (path, item) in document["paths"].as_object().unwrap() {
        if !path.starts_with("/sessions/{id}") {
            continue;
        }
        for method in item.as_object().unwrap().keys() {
            let method = Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
            operations.push((method, path.clone()));
        }
    }
    operations
}

/// A template's path for `session`, its other parameters filled with what exists there.
fn fill(template: &str, session: &str, compaction: &str) -> String {
    template
        .replace("{id}", session)
        .replace("{cid}", compaction)
        .replace("{seq_or_event_id}", "1")
}

on_both_backends! {
    async fn keys_scope_every_operation_to_a_tenant_and_a_role(app) {
        // Open mode makes the first key; from then on every request needs one.
        let admin = key(&app, None, "default", "admin").await;
        let refused = app.post("/sessions", &json!({})).await;
        assert_eq!(refused.status, StatusCode::UNAUTHORIZED, "{}", refused.body);
        assert_eq!(refused.headers["www-authenticate"], "Bearer realm=\"ctxd\"");
        assert_eq!(app.get("/healthz").await.status, StatusCode::OK);

        for tenant in ["acme", "globex"] {
            let created = post(&app, &admin, "/admin/tenants", json!({"id": tenant})).await;
            assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
        }
        let again = post(&app, &admin, "/admin/tenants", json!({"id": "acme"})).await;
        assert_eq!(again.status, StatusCode::CONFLICT);
        let unknown = post(&app, &admin, "/admin/keys", json!({"tenant": "initech", "role": "agent"})).await;
        assert_eq!(unknown.status, StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(unknown.body["errors"][0]["field"], "tenant");

        let agent_a = key(&app, Some(&admin), "acme", "agent").await;
        let operator_a = key(&app, Some(&admin), "acme", "operator").await;
        let agent_b = key(&app, Some(&admin), "globex", "agent").await;

        // Acme's session: events, a tool exchange, a compaction.
        let created = post(&app, &agent_a, "/sessions", json!({"metadata": {"team": "x"}})).await;
        assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
        assert_eq!(created.body["tenant"], "acme");
        let session = created.body["id"].as_str().unwrap().to_owned();
        let appended = post(&app, &agent_a, &format!("/sessions/{session}/events"), json!({"events": [
            {"type": "message", "role": "user", "content": "Read the config."},
            {"type": "message", "role": "assistant", "content": "",
                "tool_calls": [{"id": "c1", "name": "read", "arguments": {"path": "a"}}]},
            {"type": "message", "role": "tool", "tool_call_id": "c1", "content": "port = 8080"},
            {"type": "message", "role": "assistant", "content": "It listens on 8080."},
            {"type": "message", "role": "user", "content": "And the log level?"},
            {"type": "message", "role": "assistant", "content": "Info, by default."},
            {"type": "message", "role": "user", "content": "Thanks."},
            {"type": "message", "role": "assistant", "content": "You are welcome."},
            {"type": "message", "role": "user", "content": "One more thing."}
        ]})).await;
        assert_eq!(appended.status, StatusCode::CREATED, "{}", appended.body);
        let compacted = post(&app, &agent_a, &format!("/sessions/{session}/compact"), json!({"mode": "force"})).await;
        assert_eq!(compacted.status, StatusCode::OK, "{}", compacted.body);
        assert_eq!(compacted.body["persisted"], true, "{}", compacted.body);
        let compaction = compacted.body["record"]["id"].as_str().unwrap().to_owned();
        let events_before = get(&app, &agent_a, &format!("/sessions/{session}/events")).await.body;

        // Globex's agent: every operation on acme's session answers as on a missing session.
        let missing = uuid::Uuid::now_v7().to_string();
        let operations = session_operations(&app).await;
        assert!(operations.len() >= 15, "{operations:?}");
        for (method, template) in &operations {
            let theirs = call(&app, Some(&agent_b), method, &fill(template, &session, &compaction)).await;
            let absent = call(&app, Some(&agent_b), method, &fill(template, &missing, &compaction)).await;
            assert_eq!(theirs.status, StatusCode::NOT_FOUND, "{method} {template}: {}", theirs.body);
            assert_eq!(
                shape(&theirs.body, &session),
                shape(&absent.body, &missing),
                "{method} {template}"
            );
        }
        // ...and changed nothing of it.
        let events_after = get(&app, &agent_a, &format!("/sessions/{session}/events")).await.body;
        assert_eq!(events_before, events_after);
        let listed = get(&app, &agent_b, "/sessions").await;
        assert_eq!(listed.body["sessions"], json!([]), "{}", listed.body);
        let listed = get(&app, &agent_b, "/sessions?label=team=x").await;
        assert_eq!(listed.body["sessions"], json!([]), "{}", listed.body);

        // Acme's operator reads every part of the session and writes nothing.
        let listed = get(&app, &operator_a, "/sessions").await;
        assert_eq!(listed.body["sessions"][0]["id"], session.as_str());
        for (method, template) in &operations {
            let path = fill(template, &session, &compaction);
            if template.ends_with("/stream") {
                // The stream answers, then follows the session: its status is enough.
                let stream = app.client.get(app.url(&path)).bearer_auth(&operator_a).send().await.unwrap();
                assert_eq!(stream.status(), StatusCode::OK, "{template}");
                continue;
            }
            let reply = call(&app, Some(&operator_a), method, &path).await;
            if method == Method::GET {
                assert_eq!(reply.status, StatusCode::OK, "{method} {template}: {}", reply.body);
            } else {
                assert_eq!(reply.status, StatusCode::FORBIDDEN, "{method} {template}: {}", reply.body);
            }
        }
        let refused = call(&app, Some(&operator_a), &Method::POST, "/sessions").await;
        assert_eq!(refused.status, StatusCode::FORBIDDEN);
        assert_eq!(get(&app, &agent_a, &format!("/sessions/{session}/events")).await.body, events_before);

        // An admin key manages keys and reads no session; the others manage no key.
        assert_eq!(get(&app, &admin, "/sessions").await.status, StatusCode::FORBIDDEN);
        assert_eq!(get(&app, &admin, &format!("/sessions/{session}")).await.status, StatusCode::FORBIDDEN);
        for other in [&agent_a, &operator_a] {
            assert_eq!(get(&app, other, "/admin/keys").await.status, StatusCode::FORBIDDEN);
            let minted = post(&app, other, "/admin/keys", json!({"tenant": "acme", "role": "admin"})).await;
            assert_eq!(minted.status, StatusCode::FORBIDDEN);
        }

        // The key list shows ids, tenants and roles, never a secret.
        let keys = get(&app, &admin, "/admin/keys?tenant=acme").await.body;
        assert_eq!(keys["keys"].as_array().unwrap().len(), 2, "{keys}");
        let listing = keys.to_string();
        for secret in [&admin, &agent_a, &operator_a, &agent_b] {
            assert!(!listing.contains(secret_of(secret)), "{listing}");
        }

        // A revoked key is refused at once; an unknown or malformed one the same way, and no
        // answer repeats what was sent.
        let id = agent_b.split('_').nth(1).unwrap();
        let revoked = app.send(app.client.delete(app.url(&format!("/admin/keys/{id}"))).bearer_auth(&admin)).await;
        assert_eq!(revoked.status, StatusCode::NO_CONTENT);
        let forged = format!("{}x", &agent_a);
        for token in [agent_b.as_str(), forged.as_str(), "not-a-key", "ctxd_0123456789abcdef_guess"] {
            let reply = get(&app, token, "/sessions").await;
            assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "{token}");
            assert!(!reply.body.to_string().contains(token), "{}", reply.body);
        }
        let no_scheme = app.send(app.client.get(app.url("/sessions")).header("authorization", agent_a.as_str())).await;
        assert_eq!(no_scheme.status, StatusCode::UNAUTHORIZED);
        assert!(!no_scheme.body.to_string().contains(&agent_a));
    }
}

on_both_backends! {
    async fn keys_are_stored_as_digests_only(app) {
        let token = key(&app, None, "default", "agent").await;
        let secret = secret_of(&token);
        let stored = app.raw().count("SELECT count(*) FROM api_keys").await;
        assert_eq!(stored, 1);
        // No column of the key's row holds the key or its secret.
        let plain = app
            .raw()
            .count(&format!(
                "SELECT count(*) FROM api_keys WHERE key_id LIKE '%{secret}%' \
                 OR tenant LIKE '%{secret}%' OR name LIKE '%{secret}%'"
            ))
            .await;
        assert_eq!(plain, 0);
        let session = post(&app, &token, "/sessions", json!({})).await;
        assert_eq!(session.status, StatusCode::CREATED);
        assert_eq!(session.body["tenant"], "default");
    }
}

/// Past its rate a key is answered 429 with Retry-After; another key is not held back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_past_its_rate_is_told_when_to_retry() {
    let limits = ctxd::Limits {
        rate_per_key: 0.2,
        rate_burst: 3,
        ..ctxd::Limits::default()
    };
    let app = TestApp::spawn_with(crate::support::Backend::Sqlite, limits).await;
    let admin = key(&app, None, "default", "admin").await;
    let one = key(&app, Some(&admin), "default", "agent").await;
    let two = key(&app, Some(&admin), "default", "agent").await;
    let mut answers = Vec::new();
    for _ in 0..4 {
        answers.push(get(&app, &one, "/sessions").await);
    }
    let statuses: Vec<StatusCode> = answers.iter().map(|r| r.status).collect();
    assert_eq!(
        statuses,
        [
            StatusCode::OK,
            StatusCode::OK,
            StatusCode::OK,
            StatusCode::TOO_MANY_REQUESTS
        ]
    );
    let limited = &answers[3];
    let wait: u64 = limited.headers["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=5).contains(&wait), "{wait}");
    assert_eq!(limited.body["type"], "urn:ctxd:problem:rate-limited");
    assert_eq!(get(&app, &two, "/sessions").await.status, StatusCode::OK);
    // Health is never limited.
    assert_eq!(app.get("/healthz").await.status, StatusCode::OK);
}

/// Without keys ctxd serves only loopback unless told it may; with a key it serves anywhere.
#[tokio::test]
async fn open_mode_is_for_loopback_only() {
    let dir = tempfile::tempdir().unwrap();
    let database = format!("sqlite://{}", dir.path().join("ctxd.db").display());
    let run = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_ctxd"))
            .args(args)
            .args(["--database-url", &database])
            .env_remove("CTXD_INSECURE_OPEN")
            .stdin(Stdio::null())
            .output()
            .expect("run ctxd")
    };
    let refused = run(&["serve", "--listen", "0.0.0.0:0"]);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("without API keys"), "{stderr}");
    assert!(stderr.contains("ctxd keys create"), "{stderr}");

    // A key made from the shell: printed once, on stdout alone.
    let missing = run(&["keys", "create", "--role", "admin", "--tenant", "acme"]);
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("ctxd tenants create acme"));
    assert!(run(&["tenants", "create", "acme"]).status.success());
    let created = run(&[
        "keys", "create", "--role", "agent", "--tenant", "acme", "--name", "ci",
    ]);
    assert!(
        created.status.success(),
        "{}",
        String::from_utf8_lossy(&created.stderr)
    );
    let token = String::from_utf8(created.stdout).unwrap().trim().to_owned();
    assert!(token.starts_with("ctxd_"), "{token}");
    let listed = run(&["keys", "list"]);
    let listing = String::from_utf8_lossy(&listed.stdout);
    let id = token.split('_').nth(1).unwrap();
    assert!(
        listing.contains(id) && listing.contains("acme\tagent"),
        "{listing}"
    );
    assert!(!listing.contains(secret_of(&token)), "{listing}");

    // With a key, it serves beyond loopback, and the key works.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_ctxd"))
        .args([
            "serve",
            "--listen",
            &format!("0.0.0.0:{port}"),
            "--database-url",
            &database,
        ])
        .env_remove("CTXD_INSECURE_OPEN")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start ctxd");
    let client = reqwest::Client::new();
    let url = format!("http://127.0.0.1:{port}/sessions");
    let mut status = None;
    for _ in 0..200 {
        if let Ok(reply) = client.get(&url).bearer_auth(&token).send().await {
            status = Some(reply.status());
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(status, Some(StatusCode::OK));
    let anonymous = client.get(&url).send().await.unwrap();
    assert_eq!(anonymous.status(), StatusCode::UNAUTHORIZED);
    // Revoked from the shell: the server refuses it within its key memory.
    assert!(run(&["keys", "revoke", id]).status.success());
    let mut refused = false;
    for _ in 0..100 {
        let reply = client.get(&url).bearer_auth(&token).send().await.unwrap();
        if reply.status() == StatusCode::UNAUTHORIZED {
            refused = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(refused, "a revoked key was still admitted after 10 s");
    child.kill().await.unwrap();
}
