//! The real binary: it starts on the SQLite default and finishes in-flight requests on SIGTERM.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

struct Server {
    child: Child,
    addr: String,
    _dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
    }
}

/// A port free on loopback a moment ago.
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// Creates a session on the service at `addr`; its id.
async fn create_session(addr: &str) -> String {
    let session: serde_json::Value = reqwest::Client::new()
        .post(format!("http://{addr}/sessions"))
        .json(&json!({}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    session["id"].as_str().unwrap().to_owned()
}

async fn start() -> Server {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    // No --database-url: the default SQLite file in the working directory.
    let child = Command::new(env!("CARGO_BIN_EXE_ctxd"))
        .args(["serve", "--listen", &addr])
        .current_dir(dir.path())
        .env_remove("CTXD_DATABASE_URL")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start ctxd");
    let server = Server {
        child,
        addr,
        _dir: dir,
    };
    for _ in 0..200 {
        if reqwest::get(format!("http://{}/healthz", server.addr))
            .await
            .is_ok()
        {
            return server;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("ctxd did not start");
}

#[tokio::test]
async fn serves_on_the_embedded_default_and_drains_on_sigterm() {
    let mut server = start().await;
    assert!(
        server._dir.path().join("ctxd.db").exists(),
        "ctxd.db is created in the working directory"
    );
    let id = &create_session(&server.addr).await;

    // Send the head and half the body of an append, signal, then send the rest: the request is
    // in flight when SIGTERM arrives and must still be answered.
    let body = json!({"events": [{"type": "message", "role": "user", "content": "finish me"}]})
        .to_string();
    let (first, rest) = body.split_at(body.len() / 2);
    let mut stream = TcpStream::connect(&server.addr).await.unwrap();
    stream
        .write_all(
            format!(
                "POST /sessions/{id}/events HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
                 Content-Length: {}\r\nConnection: close\r\n\r\n{first}",
                body.len()
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    // A dashboard following the session: its stream must not hold the shutdown.
    let mut follower = TcpStream::connect(&server.addr).await.unwrap();
    follower
        .write_all(
            format!("GET /sessions/{id}/events/stream HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes(),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let pid = server.child.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    tokio::time::sleep(Duration::from_millis(300)).await;
    stream.write_all(rest.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    assert!(
        response.starts_with("HTTP/1.1 201"),
        "in-flight append answered: {response}"
    );
    let mut followed = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), follower.read_to_end(&mut followed))
        .await
        .expect("the event stream ends at shutdown")
        .unwrap();
    assert!(String::from_utf8_lossy(&followed).starts_with("HTTP/1.1 200"));

    let mut status = None;
    for _ in 0..150 {
        status = server.child.try_wait().unwrap();
        if status.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let status = status.expect("ctxd exits within 15 s of SIGTERM");
    assert!(
        status.success(),
        "ctxd exits cleanly after draining: {status:?}"
    );
}

/// With PostgreSQL unreachable, `ctxd migrate` ends at once with the cause (the connection was
/// refused), not after the pool's timeout with only "pool timed out".
#[tokio::test]
async fn an_unreachable_database_is_named_with_its_cause() {
    let port = free_port();
    let url = format!("postgres://ctxd:secret-password@127.0.0.1:{port}/ctxd");
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_ctxd"))
        .args(["migrate", "--database-url", &url])
        .output()
        .await
        .expect("run ctxd migrate");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.to_lowercase().contains("refused"), "{stderr}");
    assert!(!stderr.contains("pool timed out"), "{stderr}");
    assert!(!stderr.contains("secret-password"), "{stderr}");
}

/// Logs written to a pipe or a file carry no terminal colour codes.
#[tokio::test]
async fn logs_to_a_pipe_are_plain_text() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_ctxd"))
        .args(["serve", "--listen", "127.0.0.1:0"])
        .current_dir(dir.path())
        .env_remove("CTXD_DATABASE_URL")
        .env_remove("CTXD_LOG_FORMAT")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start ctxd");
    let mut stdout = child.stdout.take().unwrap();
    let mut logged = Vec::new();
    let mut buffer = [0u8; 4096];
    while !String::from_utf8_lossy(&logged).contains("serving") {
        let n = tokio::time::timeout(Duration::from_secs(60), stdout.read(&mut buffer))
            .await
            .expect("ctxd logs that it serves")
            .unwrap();
        assert!(n > 0, "ctxd exited: {}", String::from_utf8_lossy(&logged));
        logged.extend_from_slice(&buffer[..n]);
    }
    let logged = String::from_utf8_lossy(&logged);
    assert!(!logged.contains('\u{1b}'), "{logged:?}");
    assert!(logged.contains("INFO"), "{logged}");
    child.kill().await.unwrap();
}

/// `CTXD_LOG_FORMAT=json`: one JSON line per request, with its id, route and status.
#[tokio::test]
async fn json_logs_have_a_line_per_request_with_its_id() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_ctxd"))
        .args(["serve", "--listen", &addr])
        .current_dir(dir.path())
        .env_remove("CTXD_DATABASE_URL")
        .env_remove("RUST_LOG")
        .env("CTXD_LOG_FORMAT", "json")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start ctxd");
    let client = reqwest::Client::new();
    let mut answered = false;
    for _ in 0..200 {
        let sent = client
            .get(format!("http://{addr}/readyz"))
            .header("x-request-id", "req-1234")
            .send()
            .await;
        if sent.is_ok_and(|r| r.status().is_success()) {
            answered = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(answered, "ctxd did not start");
    let mut stdout = child.stdout.take().unwrap();
    let mut logged = String::new();
    let mut buffer = [0u8; 4096];
    let line = loop {
        if let Some(line) = logged.lines().find(|l| l.contains("req-1234")) {
            break line.to_owned();
        }
        let n = tokio::time::timeout(Duration::from_secs(60), stdout.read(&mut buffer))
            .await
            .expect("a line for the request")
            .unwrap();
        assert!(n > 0, "ctxd exited: {logged}");
        logged.push_str(&String::from_utf8_lossy(&buffer[..n]));
    };
    let entry: serde_json::Value = serde_json::from_str(&line).expect("a JSON line");
    assert_eq!(entry["level"], "INFO", "{entry}");
    assert_eq!(entry["span"]["request_id"], "req-1234", "{entry}");
    assert_eq!(entry["span"]["route"], "/readyz", "{entry}");
    assert_eq!(entry["fields"]["status"], 200, "{entry}");
    child.kill().await.unwrap();
}

/// Starts `ctxd serve` on `database_url`, waiting until it answers.
async fn serve_on(database_url: &str, dir: &std::path::Path) -> (tokio::process::Child, String) {
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_ctxd"))
        .args(["serve", "--listen", &addr, "--database-url", database_url])
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start ctxd");
    for _ in 0..400 {
        if reqwest::get(format!("http://{addr}/readyz"))
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            return (child, addr);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("ctxd did not start on {database_url}");
}

/// A ctxd killed with SIGKILL in the middle of appends loses nothing it acknowledged: after a
/// restart every acknowledged event is there exactly once, seqs consecutive, and a batch in
/// flight at the kill is there whole or not at all.
async fn sigkill_loses_nothing_acknowledged(database_url: &str) {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, addr) = serve_on(database_url, dir.path()).await;
    let client = reqwest::Client::new();
    let id = create_session(&addr).await;

    // Four writers append batches of three as fast as they can; the process is killed under them.
    let acknowledged = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let mut writers = Vec::new();
    for w in 0..4 {
        let (client, addr, id, acknowledged) = (
            client.clone(),
            addr.clone(),
            id.clone(),
            acknowledged.clone(),
        );
        writers.push(tokio::spawn(async move {
            for b in 0.. {
                let ids: Vec<String> = (0..3).map(|k| format!("w{w}-b{b}-{k}")).collect();
                let events: Vec<_> = ids
                    .iter()
                    .map(|i| json!({"id": i, "type": "message", "role": "user", "content": i}))
                    .collect();
                let sent = client
                    .post(format!("http://{addr}/sessions/{id}/events"))
                    .json(&json!({"events": events}))
                    .send()
                    .await;
                match sent {
                    Ok(r) if r.status() == reqwest::StatusCode::CREATED => {
                        acknowledged.lock().unwrap().extend(ids);
                    }
                    _ => return,
                }
            }
        }));
    }
    while acknowledged.lock().unwrap().len() < 150 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    child.start_kill().expect("SIGKILL");
    child.wait().await.unwrap();
    for writer in writers {
        writer.await.unwrap();
    }
    let acknowledged = acknowledged.lock().unwrap().clone();

    let (_child, addr) = serve_on(database_url, dir.path()).await;
    let log: serde_json::Value = client
        .get(format!("http://{addr}/sessions/{id}/events?limit=1000"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let events = log["events"].as_array().unwrap();
    let seqs: Vec<i64> = events.iter().map(|e| e["seq"].as_i64().unwrap()).collect();
    assert_eq!(
        seqs,
        (1..=events.len() as i64).collect::<Vec<_>>(),
        "consecutive seqs"
    );
    let stored: Vec<&str> = events.iter().map(|e| e["id"].as_str().unwrap()).collect();
    let unique: std::collections::HashSet<&str> = stored.iter().copied().collect();
    assert_eq!(unique.len(), stored.len(), "each event once");
    for ack in &acknowledged {
        assert!(unique.contains(ack.as_str()), "acknowledged {ack} was lost");
    }
    // A batch is whole or absent.
    for event in &stored {
        let batch = event.rsplit_once('-').unwrap().0;
        let whole = (0..3).all(|k| unique.contains(format!("{batch}-{k}").as_str()));
        assert!(whole, "batch {batch} is partly stored");
    }
}

#[tokio::test]
async fn sigkill_loses_nothing_acknowledged_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("kill.db").display());
    sigkill_loses_nothing_acknowledged(&url).await;
}

/// The test PostgreSQL's URL with a fresh schema of its own as the search path, for a ctxd
/// process to migrate into.
async fn fresh_schema_url() -> String {
    use sqlx::Connection;
    let url = crate::support::postgres_url();
    let schema = format!("p_{}", uuid::Uuid::now_v7().simple());
    let mut admin = sqlx::PgConnection::connect(&url).await.unwrap();
    sqlx::query(&format!("CREATE SCHEMA {schema}"))
        .execute(&mut admin)
        .await
        .unwrap();
    let separator = if url.contains('?') { '&' } else { '?' };
    format!("{url}{separator}options=-c%20search_path%3D{schema}")
}

#[tokio::test]
async fn sigkill_loses_nothing_acknowledged_postgres() {
    let scoped = fresh_schema_url().await;
    sigkill_loses_nothing_acknowledged(&scoped).await;
}

/// Three ctxd processes on one PostgreSQL serve the same sessions at once: appends (with
/// `expected_seq` retried on conflict, as an agent loop does), compactions and turns through
/// every replica keep seqs gap-free, every compaction recorded, and each replica's view the
/// same as the others'.
#[tokio::test]
async fn three_replicas_on_one_postgres_agree() {
    let scoped = fresh_schema_url().await;
    let dir = tempfile::tempdir().unwrap();
    let mut replicas = Vec::new();
    for _ in 0..3 {
        replicas.push(serve_on(&scoped, dir.path()).await);
    }
    let addrs: Vec<String> = replicas.iter().map(|(_, a)| a.clone()).collect();
    let client = reqwest::Client::new();
    let mut sessions = Vec::new();
    for _ in 0..2 {
        let created: serde_json::Value = client
            .post(format!("http://{}/sessions", addrs[0]))
            .json(
                &json!({"config": {"context_window": 3000, "max_output_tokens": 300,
                "tokenizer": "chars4"}}),
            )
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        sessions.push(created["id"].as_str().unwrap().to_owned());
    }
    // Six agents, two per replica, each appending exchanges and compacting.
    let mut agents = Vec::new();
    for agent in 0..6 {
        let (client, addr) = (client.clone(), addrs[agent % 3].clone());
        let session = sessions[agent % 2].clone();
        agents.push(tokio::spawn(async move {
            let mut appended = 0;
            for turn in 0..15 {
                let call = format!("a{agent}t{turn}");
                let events = json!([
                    {"id": format!("{call}-call"), "type": "message", "role": "assistant",
                     "tool_calls": [{"id": call, "name": "read", "arguments": {}}]},
                    {"id": format!("{call}-result"), "type": "message", "role": "tool",
                     "tool_call_id": call, "content": "line\n".repeat(60)}
                ]);
                let reply = client
                    .post(format!("http://{addr}/sessions/{session}/events"))
                    .json(&json!({"events": events}))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(reply.status(), reqwest::StatusCode::CREATED);
                appended += 2;
                let compacted = client
                    .post(format!("http://{addr}/sessions/{session}/compact"))
                    .json(&json!({"format": "openai"}))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(compacted.status(), reqwest::StatusCode::OK);
            }
            appended
        }));
    }
    let mut appended = [0i64; 2];
    for (agent, handle) in agents.into_iter().enumerate() {
        appended[agent % 2] += handle.await.unwrap();
    }
    for (s, session) in sessions.iter().enumerate() {
        let get = |addr: &str, path: String| {
            let client = client.clone();
            let url = format!("http://{addr}/sessions/{session}{path}");
            async move {
                let reply = client.get(url).send().await.unwrap();
                assert!(reply.status().is_success());
                reply.json::<serde_json::Value>().await.unwrap()
            }
        };
        let log = get(&addrs[1], "/events?limit=1000".into()).await;
        let seqs: Vec<i64> = log["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["seq"].as_i64().unwrap())
            .collect();
        assert_eq!(seqs, (1..=appended[s]).collect::<Vec<_>>(), "gap-free seqs");
        // Compactions acted under the window and each was recorded; every replica answers the
        // same view now that nothing is appended.
        let records = get(&addrs[2], "/compactions?limit=200".into()).await;
        let acted = records["compactions"].as_array().unwrap().len();
        assert!(acted > 0, "compactions were recorded");
        let mut views = Vec::new();
        for addr in &addrs {
            let reply: serde_json::Value = client
                .post(format!("http://{addr}/sessions/{session}/compact"))
                .json(&json!({"format": "openai"}))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            assert!(reply["record"]["tokens_after"].as_i64().unwrap() <= 3000);
            views.push(reply["view"].clone());
        }
        assert!(views.windows(2).all(|w| w[0] == w[1]), "the replicas agree");
        let context = get(&addrs[0], "/context?limit=5".into()).await;
        assert!(context["totals"].is_object(), "{context}");
    }
}

/// With an OTLP endpoint configured, every request's span reaches the collector (a loopback
/// server standing in for one): OTLP/HTTP protobuf at `/v1/traces`, naming the service, the
/// route and the request id.
#[tokio::test]
async fn request_spans_are_exported_over_otlp() {
    use axum::body::Bytes;
    let received: std::sync::Arc<std::sync::Mutex<Vec<(String, Bytes)>>> = Default::default();
    let collector = {
        let received = received.clone();
        axum::Router::new().route(
            "/v1/traces",
            axum::routing::post(move |headers: axum::http::HeaderMap, body: Bytes| {
                let received = received.clone();
                async move {
                    let kind = headers
                        .get("content-type")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default()
                        .to_owned();
                    received.lock().unwrap().push((kind, body));
                    axum::http::StatusCode::OK
                }
            }),
        )
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, collector).await });

    let dir = tempfile::tempdir().unwrap();
    let addr = format!("127.0.0.1:{}", free_port());
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_ctxd"))
        .args(["serve", "--listen", &addr])
        .current_dir(dir.path())
        .env_remove("CTXD_DATABASE_URL")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)
        .env("OTEL_BSP_SCHEDULE_DELAY", "100")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start ctxd");
    let client = reqwest::Client::new();
    let mut sent = false;
    for _ in 0..200 {
        let reply = client
            .post(format!("http://{addr}/sessions"))
            .header("x-request-id", "otlp-req-7")
            .json(&json!({}))
            .send()
            .await;
        if reply.is_ok_and(|r| r.status().is_success()) {
            sent = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(sent, "ctxd did not start");
    let contains = |body: &[u8], text: &str| body.windows(text.len()).any(|w| w == text.as_bytes());
    let mut found = None;
    for _ in 0..100 {
        found = received
            .lock()
            .unwrap()
            .iter()
            .find(|(_, body)| contains(body, "otlp-req-7"))
            .cloned();
        if found.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (kind, body) = found.expect("the request's span reached the collector within 10 s");
    assert_eq!(kind, "application/x-protobuf");
    for text in ["ctxd", "service.name", "/sessions", "POST", "request"] {
        assert!(contains(&body, text), "the exported span names {text}");
    }
    child.kill().await.unwrap();
}
