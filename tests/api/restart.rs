//! PostgreSQL restarted under load: agents appending and compacting through ctxd see 503s with
//! `Retry-After` while the server is down, never a 500, and ctxd recovers by itself. Afterwards
//! every acknowledged event is stored exactly once at the seq it was acknowledged with, seqs
//! are consecutive, and every acknowledged compaction has its record.
//!
//! The test runs a PostgreSQL server of its own (initdb in a temporary directory), since it
//! restarts it: the suite's shared server keeps serving the other tests.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ctxd::store::{PostgresStore, Store};
use ctxd::{app, AppState, Limits};
use reqwest::StatusCode;
use serde_json::{json, Value};

/// A PostgreSQL server of the test's own, stopped when dropped.
struct OwnPostgres {
    dir: tempfile::TempDir,
    bin: PathBuf,
    port: u16,
    as_nobody: bool,
}

/// The PostgreSQL server binaries: on the PATH, or Debian's versioned directories.
fn postgres_bin() -> PathBuf {
    if let Ok(found) = Command::new("sh")
        .args(["-c", "command -v pg_ctl"])
        .output()
    {
        let path = String::from_utf8_lossy(&found.stdout).trim().to_owned();
        if found.status.success() && !path.is_empty() {
            let real = std::fs::canonicalize(&path).unwrap_or_else(|_| PathBuf::from(&path));
            return real.parent().unwrap().to_path_buf();
        }
    }
    let mut dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|entries| entries.flatten().map(|e| e.path().join("bin")).collect())
        .unwrap_or_default();
    dirs.sort();
    dirs.into_iter()
        .rev()
        .find(|d| d.join("pg_ctl").exists() && d.join("initdb").exists())
        .expect(
            "restarting PostgreSQL needs its server binaries (initdb, pg_ctl): \
             apt-get install postgresql",
        )
}

impl OwnPostgres {
    fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let as_nobody = Command::new("id")
            .arg("-u")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
            .unwrap_or(false);
        if as_nobody {
            // initdb refuses root: the server runs as `nobody`, which must own its directory.
            assert!(Command::new("chown")
                .args(["nobody", dir.path().to_str().unwrap()])
                .status()
                .unwrap()
                .success());
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let server = Self {
            dir,
            bin: postgres_bin(),
            port,
            as_nobody,
        };
        let data = server.data();
        let out = server.run(
            "initdb",
            &[
                "-D",
                &data,
                "-U",
                "postgres",
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C",
            ],
        );
        assert!(
            out.status.success(),
            "initdb: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let out = server.pg_ctl(&["start"]);
        assert!(
            out.status.success(),
            "pg_ctl start: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        server
    }

    fn data(&self) -> String {
        self.dir.path().join("data").display().to_string()
    }

    fn run(&self, program: &str, args: &[&str]) -> Output {
        let program = self.bin.join(program).display().to_string();
        let mut command = if self.as_nobody {
            let mut c = Command::new("runuser");
            c.args(["-u", "nobody", "--", &program]);
            c
        } else {
            Command::new(&program)
        };
        command.args(args).output().unwrap()
    }

    /// `pg_ctl ACTION`, waiting for it; the server keeps its settings across restarts. Durable
    /// settings (fsync on): a restart must lose nothing that was committed.
    fn pg_ctl(&self, action: &[&str]) -> Output {
        let data = self.data();
        let log = self.dir.path().join("server.log").display().to_string();
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1",
            self.port,
            self.dir.path().display()
        );
        let mut args = vec!["-D", &data, "-l", &log, "-w", "-t", "60", "-o", &options];
        args.extend_from_slice(action);
        self.run("pg_ctl", &args)
    }

    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }
}

impl Drop for OwnPostgres {
    fn drop(&mut self) {
        let _ = self.pg_ctl(&["stop", "-m", "immediate"]);
    }
}

/// The JSON answer to a request that must be answered.
async fn answer(request: reqwest::RequestBuilder) -> Value {
    request.send().await.unwrap().json().await.unwrap()
}

/// What the agents saw.
#[derive(Default)]
struct Seen {
    /// Each acknowledged event's client id and seq, by session.
    acked: Mutex<HashMap<String, BTreeMap<String, i64>>>,
    /// The ids of the compaction records answered as persisted, by session.
    records: Mutex<HashMap<String, Vec<String>>>,
    statuses: Mutex<BTreeMap<u16, usize>>,
    appends: AtomicUsize,
}

/// Sends until the answer is not a 503 (waiting as `Retry-After` says), for at most a minute.
async fn send_retrying(
    seen: &Seen,
    request: impl Fn() -> reqwest::RequestBuilder,
) -> (StatusCode, Value) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (status, retry_after, body) = match request().send().await {
            Ok(reply) => {
                let status = reply.status();
                let retry_after = reply
                    .headers()
                    .get("retry-after")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.parse::<u64>().ok());
                let body: Value = reply.json().await.unwrap_or(Value::Null);
                (status, retry_after, body)
            }
            Err(e) => panic!("ctxd itself stopped answering: {e}"),
        };
        *seen
            .statuses
            .lock()
            .unwrap()
            .entry(status.as_u16())
            .or_default() += 1;
        if status != StatusCode::SERVICE_UNAVAILABLE || Instant::now() > deadline {
            return (status, body);
        }
        assert!(retry_after.is_some(), "a 503 without Retry-After: {body}");
        // An agent waits as asked; a tenth of it keeps the test short.
        tokio::time::sleep(Duration::from_millis(100 * retry_after.unwrap())).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_restart_under_load_loses_nothing_acknowledged() {
    let postgres = OwnPostgres::start();
    let pool = PostgresStore::pool_options(8)
        .connect(&postgres.url())
        .await
        .expect("connect to the test's own PostgreSQL");
    let store: Arc<dyn Store> = Arc::new(PostgresStore::from_pool(pool));
    store.migrate().await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let state = AppState::new(store, Limits::default());
    tokio::spawn(async move { axum::serve(listener, app(state)).await });
    let client = reqwest::Client::new();

    let mut sessions = Vec::new();
    for _ in 0..3 {
        let created: Value = answer(client.post(format!("{base}/sessions")).json(
            &json!({"config": {"context_window": 3000, "max_output_tokens": 300,
                "tokenizer": "chars4"}}),
        ))
        .await;
        sessions.push(created["id"].as_str().unwrap().to_owned());
    }

    // Six agents, two per session: a tool exchange per turn, then a compaction.
    let seen = Arc::new(Seen::default());
    const TURNS: usize = 40;
    let mut agents = Vec::new();
    for agent in 0..6 {
        let (client, base, seen) = (client.clone(), base.clone(), seen.clone());
        let session = sessions[agent % 3].clone();
        agents.push(tokio::spawn(async move {
            for turn in 0..TURNS {
                let call = format!("a{agent}t{turn}");
                let batch = json!({"events": [
                    {"id": format!("{call}-call"), "type": "message", "role": "assistant",
                     "tool_calls": [{"id": call, "name": "read", "arguments": {}}]},
                    {"id": format!("{call}-result"), "type": "message", "role": "tool",
                     "tool_call_id": call, "content": format!("{call}\n").repeat(40)}
                ]});
                let url = format!("{base}/sessions/{session}/events");
                let (status, body) = send_retrying(&seen, || client.post(&url).json(&batch)).await;
                // A batch whose commit outlived its connection was answered 503 and is replayed
                // by its retry: 200, each event `replayed`, at the seqs it was stored with.
                assert!(
                    status == StatusCode::CREATED
                        || (status == StatusCode::OK
                            && body["events"]
                                .as_array()
                                .unwrap()
                                .iter()
                                .all(|e| e["replayed"] == true)),
                    "{status} {body}"
                );
                {
                    let mut acked = seen.acked.lock().unwrap();
                    let acked = acked.entry(session.clone()).or_default();
                    for event in body["events"].as_array().unwrap() {
                        let id = event["id"].as_str().unwrap().to_owned();
                        let seq = event["seq"].as_i64().unwrap();
                        // A retried batch is acknowledged again with the same seqs.
                        let earlier = acked.insert(id.clone(), seq);
                        assert!(
                            earlier.is_none_or(|s| s == seq),
                            "{id} moved from {earlier:?} to {seq}"
                        );
                    }
                }
                seen.appends.fetch_add(1, Ordering::Relaxed);

                let url = format!("{base}/sessions/{session}/compact");
                let (status, body) = send_retrying(&seen, || {
                    client.post(&url).json(&json!({"format": "openai"}))
                })
                .await;
                assert_eq!(status, StatusCode::OK, "{body}");
                if body["persisted"] == true {
                    let id = body["record"]["id"].as_str().unwrap().to_owned();
                    seen.records
                        .lock()
                        .unwrap()
                        .entry(session.clone())
                        .or_default()
                        .push(id);
                }
            }
        }));
    }

    // Two restarts while the load goes on: a fast one (an operator's restart: sessions are
    // ended, transactions in flight rolled back), then an immediate one (a crash: recovery
    // from the log).
    let mut postgres = postgres;
    let mut windows = Vec::new();
    for (after, mode) in [(30, "fast"), (140, "immediate")] {
        while seen.appends.load(Ordering::Relaxed) < after {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let before = seen.appends.load(Ordering::Relaxed);
        postgres = tokio::task::spawn_blocking(move || {
            let out = postgres.pg_ctl(&["restart", "-m", mode]);
            assert!(
                out.status.success(),
                "pg_ctl restart: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            postgres
        })
        .await
        .unwrap();
        windows.push((mode, before, seen.appends.load(Ordering::Relaxed)));
    }
    for agent in agents {
        agent.await.unwrap();
    }
    for (mode, before, after) in &windows {
        assert!(
            *before < 6 * TURNS && *after < 6 * TURNS,
            "the {mode} restart came while the agents were appending"
        );
    }

    // Only successes and retryable 503s were answered.
    let statuses = seen.statuses.lock().unwrap().clone();
    eprintln!(
        "answers by status: {statuses:?}; restarts (mode, appends before, after): {windows:?}"
    );
    assert!(
        statuses.keys().all(|s| [200, 201, 503].contains(s)),
        "answers by status: {statuses:?}"
    );

    let acked = seen.acked.lock().unwrap().clone();
    let records = seen.records.lock().unwrap().clone();
    for session in &sessions {
        let events: Value =
            answer(client.get(format!("{base}/sessions/{session}/events?limit=1000"))).await;
        let events = events["events"].as_array().unwrap();
        let seqs: Vec<i64> = events.iter().map(|e| e["seq"].as_i64().unwrap()).collect();
        assert_eq!(
            seqs,
            (1..=seqs.len() as i64).collect::<Vec<_>>(),
            "consecutive seqs"
        );
        let stored: BTreeMap<String, i64> = events
            .iter()
            .map(|e| {
                (
                    e["id"].as_str().unwrap().to_owned(),
                    e["seq"].as_i64().unwrap(),
                )
            })
            .collect();
        assert_eq!(stored.len(), events.len(), "a client id stored twice");
        // Every acknowledged event, at its seq; every batch retried to success, so exactly the
        // acknowledged events are stored.
        assert_eq!(&stored, &acked[session], "{session}");
        assert_eq!(stored.len(), 2 * 2 * TURNS);

        // Every acknowledged compaction has its record, once; the state answers a compaction
        // within the window.
        let mut listed = Vec::new();
        let mut cursor = String::new();
        loop {
            let page: Value = answer(client.get(format!(
                "{base}/sessions/{session}/compactions?limit=200{cursor}"
            )))
            .await;
            for record in page["compactions"].as_array().unwrap() {
                listed.push(record["id"].as_str().unwrap().to_owned());
            }
            match page["next_cursor"].as_str() {
                Some(next) => cursor = format!("&cursor={next}"),
                None => break,
            }
        }
        let mut unique = listed.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), listed.len(), "a record listed twice");
        for id in records.get(session).into_iter().flatten() {
            assert!(
                listed.contains(id),
                "acknowledged compaction {id} has no record"
            );
        }
        let reply: Value = answer(
            client
                .post(format!("{base}/sessions/{session}/compact"))
                .json(&json!({"format": "openai"})),
        )
        .await;
        assert!(
            reply["record"]["tokens_after"].as_i64().unwrap() <= 3000,
            "{reply}"
        );
        let context = client
            .get(format!("{base}/sessions/{session}/context?limit=5"))
            .send()
            .await
            .unwrap();
        assert_eq!(context.status(), StatusCode::OK);
    }
    drop(postgres);
}
