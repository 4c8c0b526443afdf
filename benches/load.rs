//! A bounded load as agents send it, against the real binary on each backend: many sessions,
//! each agent looping over a turn (append its new messages, compact for the view), with reads
//! of the context and of the records among them. The number of agents is ramped until p99
//! passes 50 ms; the figures are requests per second at the last step under it. With
//! `CTXD_LOAD_SOAK_SECS` set, one step runs that long instead and the server's resident memory
//! is sampled every 10 s.
//!
//!   CTXD_PG_DURABLE=1 scripts/with-postgres cargo bench --bench load
//!
//! CTXD_BENCH_BACKENDS (sqlite,postgres), CTXD_LOAD_STEP_SECS (15), CTXD_LOAD_SESSIONS (50),
//! CTXD_LOAD_AGENTS (4,8,12,16,24,32,48,64), CTXD_LOAD_SOAK_SECS, CTXD_LOAD_SOAK_AGENTS (8).
//! With CTXD_LOAD_DASHBOARD_EVENTS=N it instead builds one session of N events and times each
//! read the dashboard's pages make on it (after CTXD_LOAD_DASHBOARD_PAUSE_SECS, default 0).

use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

mod common;
use common::Gen;

const GOAL_P99_MS: f64 = 50.0;

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The server under load: the release binary, a process of its own.
struct Server {
    child: tokio::process::Child,
    base: String,
    _dir: tempfile::TempDir,
}

impl Server {
    async fn start(database: Option<String>) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let database = database
            .unwrap_or_else(|| format!("sqlite://{}", dir.path().join("ctxd.db").display()));
        let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_ctxd"))
            .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
            .args(["--database-url", &database])
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("start ctxd");
        let base = format!("http://127.0.0.1:{port}");
        for _ in 0..600 {
            if reqwest::get(format!("{base}/readyz"))
                .await
                .is_ok_and(|r| r.status().is_success())
            {
                return Server {
                    child,
                    base,
                    _dir: dir,
                };
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("ctxd did not start on {database}");
    }

    /// The server's resident memory, in MiB.
    fn rss_mib(&self) -> f64 {
        let pid = self.child.id().expect("running");
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .map_or(0.0, |kb| kb / 1024.0)
    }
}

/// A fresh PostgreSQL schema's URL on the suite's server.
async fn postgres_schema() -> Option<String> {
    use sqlx::Connection;
    let url = std::env::var("CTXD_TEST_DATABASE_URL").ok()?;
    let schema = format!("load_{}", uuid::Uuid::now_v7().simple());
    let mut admin = sqlx::PgConnection::connect(&url).await.ok()?;
    sqlx::query(&format!("CREATE SCHEMA {schema}"))
        .execute(&mut admin)
        .await
        .ok()?;
    let separator = if url.contains('?') { '&' } else { '?' };
    Some(format!(
        "{url}{separator}options=-c%20search_path%3D{schema}"
    ))
}

/// Latencies by kind of request, and failures.
#[derive(Default)]
struct Tally {
    latencies: Vec<f64>,
    by_kind: std::collections::BTreeMap<&'static str, Vec<f64>>,
    failures: usize,
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

/// One agent: turns of a session, as an agent loop sends them.
async fn agent(
    client: reqwest::Client,
    base: String,
    sessions: Arc<Vec<String>>,
    seed: u64,
    stop: Arc<AtomicBool>,
    tally: Arc<Mutex<Tally>>,
) {
    let mut gen = Gen::new(seed);
    let mut turn = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let session = &sessions[gen.below(sessions.len())];
        turn += 1;
        let call = format!("s{seed}t{turn}");
        // What happened since the last turn: a tool exchange, then the user's next message.
        let result = "fn main() { println!(\"hello\"); }\n".repeat(gen.between(2, 60));
        let events = json!({"events": [
            {"id": format!("{call}-a"), "type": "message", "role": "assistant", "content": "",
             "tool_calls": [{"id": call, "name": "read", "arguments": {"path": "src/main.rs"}}]},
            {"id": format!("{call}-r"), "type": "message", "role": "tool", "tool_call_id": call,
             "name": "read", "content": result},
            {"id": format!("{call}-u"), "type": "message", "role": "user",
             "content": format!("Now change step {turn}.")}
        ]});
        let mut requests: Vec<(&'static str, reqwest::RequestBuilder)> = vec![
            (
                "append",
                client
                    .post(format!("{base}/sessions/{session}/events"))
                    .json(&events),
            ),
            (
                "compact",
                client
                    .post(format!("{base}/sessions/{session}/compact"))
                    .json(&json!({"format": "openai"})),
            ),
        ];
        // Now and then an operator's read.
        match gen.below(10) {
            0 => requests.push((
                "context",
                client.get(format!("{base}/sessions/{session}/context?limit=50")),
            )),
            1 => requests.push((
                "records",
                client.get(format!("{base}/sessions/{session}/compactions?limit=10")),
            )),
            _ => {}
        }
        for (kind, request) in requests {
            let started = Instant::now();
            let ok = match request.send().await {
                Ok(reply) => {
                    let ok = reply.status().is_success();
                    let _ = reply.bytes().await;
                    ok
                }
                Err(_) => false,
            };
            let ms = started.elapsed().as_secs_f64() * 1000.0;
            let mut tally = tally.lock().unwrap();
            if ok {
                tally.latencies.push(ms);
                tally.by_kind.entry(kind).or_default().push(ms);
            } else {
                tally.failures += 1;
            }
        }
    }
}

struct Step {
    agents: usize,
    rps: f64,
    p50: f64,
    p99: f64,
    failures: usize,
    by_kind: Vec<(&'static str, f64, f64)>,
}

async fn run_step(
    server: &Server,
    sessions: &Arc<Vec<String>>,
    agents: usize,
    secs: u64,
    mut sample: impl FnMut(f64),
) -> Step {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(256)
        .build()
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let tally = Arc::new(Mutex::new(Tally::default()));
    let mut handles = Vec::new();
    for a in 0..agents {
        handles.push(tokio::spawn(agent(
            client.clone(),
            server.base.clone(),
            sessions.clone(),
            (agents * 1000 + a) as u64,
            stop.clone(),
            tally.clone(),
        )));
    }
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(secs) {
        tokio::time::sleep(Duration::from_secs(1).min(Duration::from_secs(secs))).await;
        sample(started.elapsed().as_secs_f64());
    }
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.await.unwrap();
    }
    let elapsed = started.elapsed().as_secs_f64();
    let mut tally = Arc::try_unwrap(tally).ok().unwrap().into_inner().unwrap();
    tally.latencies.sort_by(f64::total_cmp);
    let by_kind = tally
        .by_kind
        .iter_mut()
        .map(|(kind, v)| {
            v.sort_by(f64::total_cmp);
            (*kind, percentile(v, 50.0), percentile(v, 99.0))
        })
        .collect();
    Step {
        agents,
        rps: tally.latencies.len() as f64 / elapsed,
        p50: percentile(&tally.latencies, 50.0),
        p99: percentile(&tally.latencies, 99.0),
        failures: tally.failures,
        by_kind,
    }
}

/// The dashboard's reads on one long session: a session of `events` events (compacted as it
/// grew), then each request the session page and the session list make, timed.
async fn dashboard_reads(server: &Server, events: usize) {
    let client = reqwest::Client::new();
    let base = &server.base;
    let id = create_session(
        &client,
        base,
        json!({"config": {"context_window": 128000}, "metadata": {"team": "load"}}),
    )
    .await;
    let mut gen = Gen::new(7);
    let started = Instant::now();
    for batch in 0..events / 100 {
        let mut list = Vec::new();
        for turn in 0..25 {
            let call = format!("b{batch}t{turn}");
            let result = "let x = compute(y);\n".repeat(gen.between(1, 20));
            list.extend([
                json!({"type": "message", "role": "user", "content": format!("Step {call}.")}),
                json!({"type": "message", "role": "assistant", "content": "",
                    "tool_calls": [{"id": call, "name": "read", "arguments": {"path": "a.rs"}}]}),
                json!({"type": "message", "role": "tool", "tool_call_id": call, "content": result}),
                json!({"type": "message", "role": "assistant", "content": "Done."}),
            ]);
        }
        let reply = client
            .post(format!("{base}/sessions/{id}/events"))
            .json(&json!({"events": list}))
            .send()
            .await
            .unwrap();
        assert!(reply.status().is_success());
        if batch % 10 == 9 {
            let _ = client
                .post(format!("{base}/sessions/{id}/compact"))
                .json(&json!({}))
                .send()
                .await
                .unwrap()
                .bytes()
                .await;
        }
    }
    println!(
        "\ndashboard reads on a session of {events} events (built in {:.0} s)",
        started.elapsed().as_secs_f64()
    );
    // CTXD_LOAD_DASHBOARD_PAUSE_SECS: time for the database to take in the new rows (PostgreSQL's
    // autovacuum analyses a freshly loaded table within a minute) before the reads are timed.
    let pause: u64 = env_or("CTXD_LOAD_DASHBOARD_PAUSE_SECS", 0);
    tokio::time::sleep(Duration::from_secs(pause)).await;
    println!("| request | median ms | max ms | bytes |\n|---|---:|---:|---:|");
    let reads = [
        "/sessions?limit=50&sort=activity".to_owned(),
        format!("/sessions/{id}"),
        format!("/sessions/{id}/context?limit=1"),
        format!("/sessions/{id}/compactions?limit=1"),
        format!("/sessions/{id}/context?limit=100"),
        format!("/sessions/{id}/context?limit=100&state=archived"),
        format!("/sessions/{id}/context?limit=100&reason=recent_tail"),
        format!("/sessions/{id}/compactions?limit=200"),
        format!("/sessions/{id}/view?format=openai"),
        format!("/sessions/{id}/view?format=anthropic"),
        format!("/sessions/{id}/observations/3?limit=20000"),
    ];
    for path in reads {
        let mut times = Vec::new();
        let mut bytes = 0;
        for _ in 0..11 {
            let t = Instant::now();
            let reply = client.get(format!("{base}{path}")).send().await.unwrap();
            assert!(reply.status().is_success(), "{path}: {}", reply.status());
            bytes = reply.bytes().await.unwrap().len();
            times.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        times.sort_by(f64::total_cmp);
        println!(
            "| `GET {}` | {:.1} | {:.1} | {bytes} |",
            path.replace(&id, "{id}"),
            times[5],
            times[10]
        );
    }
}

/// Creates a session with `body`; its id.
async fn create_session(client: &reqwest::Client, base: &str, body: Value) -> String {
    let created: Value = client
        .post(format!("{base}/sessions"))
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    created["id"].as_str().unwrap().to_owned()
}

async fn sessions_on(server: &Server, count: usize) -> Arc<Vec<String>> {
    let client = reqwest::Client::new();
    let mut sessions = Vec::new();
    for _ in 0..count {
        let body = json!({"config": {"context_window": 32000}});
        sessions.push(create_session(&client, &server.base, body).await);
    }
    Arc::new(sessions)
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let backends =
        std::env::var("CTXD_BENCH_BACKENDS").unwrap_or_else(|_| "sqlite,postgres".into());
    let step_secs: u64 = env_or("CTXD_LOAD_STEP_SECS", 15);
    let session_count: usize = env_or("CTXD_LOAD_SESSIONS", 50);
    let ramp: Vec<usize> = std::env::var("CTXD_LOAD_AGENTS")
        .unwrap_or_else(|_| "4,8,12,16,24,32,48,64".into())
        .split(',')
        .filter_map(|n| n.trim().parse().ok())
        .collect();
    let soak_secs: u64 = env_or("CTXD_LOAD_SOAK_SECS", 0);
    for backend in backends.split(',') {
        let database = match backend {
            "sqlite" => None,
            "postgres" => match postgres_schema().await {
                Some(url) => Some(url),
                None => {
                    println!("postgres: skipped (CTXD_TEST_DATABASE_URL unset or unreachable)");
                    continue;
                }
            },
            other => panic!("unknown backend {other}"),
        };
        let server = Server::start(database).await;
        let dashboard: usize = env_or("CTXD_LOAD_DASHBOARD_EVENTS", 0);
        if dashboard > 0 {
            println!("\n{backend}:");
            dashboard_reads(&server, dashboard).await;
            continue;
        }
        let sessions = sessions_on(&server, session_count).await;
        if soak_secs > 0 {
            let agents: usize = env_or("CTXD_LOAD_SOAK_AGENTS", 8);
            println!("\n{backend}: soak, {agents} agents over {session_count} sessions for {soak_secs} s");
            println!("| elapsed s | RSS MiB |\n|---|---|");
            let start_rss = server.rss_mib();
            println!("| 0 | {start_rss:.1} |");
            let mut next = 10.0;
            let step = run_step(&server, &sessions, agents, soak_secs, |t| {
                if t >= next {
                    println!("| {t:.0} | {:.1} |", server.rss_mib());
                    next += 10.0;
                }
            })
            .await;
            println!(
                "soak: {:.0} req/s, p50 {:.1} ms, p99 {:.1} ms, {} failures",
                step.rps, step.p50, step.p99, step.failures
            );
            continue;
        }
        println!("\n{backend}: {session_count} sessions, {step_secs} s per step");
        println!("| agents | req/s | p50 ms | p99 ms | failures | p99 by kind (ms) | RSS MiB |");
        println!("|---|---|---|---|---|---|---|");
        let mut best: Option<Step> = None;
        for agents in &ramp {
            let step = run_step(&server, &sessions, *agents, step_secs, |_| {}).await;
            let kinds: Vec<String> = step
                .by_kind
                .iter()
                .map(|(k, _, p99)| format!("{k} {p99:.1}"))
                .collect();
            println!(
                "| {} | {:.0} | {:.1} | {:.1} | {} | {} | {:.0} |",
                step.agents,
                step.rps,
                step.p50,
                step.p99,
                step.failures,
                kinds.join(", "),
                server.rss_mib()
            );
            let over = step.p99 > GOAL_P99_MS;
            if !over && best.as_ref().is_none_or(|b| step.rps > b.rps) {
                best = Some(step);
            }
            if over {
                break;
            }
        }
        match best {
            Some(b) => println!(
                "{backend}: sustained {:.0} req/s at p99 {:.1} ms < {GOAL_P99_MS} ms ({} agents)",
                b.rps, b.p99, b.agents
            ),
            None => println!("{backend}: p99 was over {GOAL_P99_MS} ms at the first step"),
        }
    }
}
