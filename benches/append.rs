//! Append throughput and latency over real HTTP, on SQLite and on PostgreSQL.
//!
//! The bench serves ctxd in-process on a loopback port, as the API tests do, and appends to
//! fresh o200k_base sessions with a reqwest client, one request at a time:
//!
//! - a. mixed batches of 100 events: short messages, assistant tool calls, and tool results of
//!   1–30 KB of code and logs answering calls issued earlier. Reported as events/s and MB/s of
//!   text, next to the tokenizer's own single-thread MB/s over the same events, measured in the
//!   same run (goal: append ÷ tokenizer ≥ 0.80);
//! - b. batches of 100 short messages (< 200 bytes): events/s (goal: ≥ 20,000 on PostgreSQL);
//! - c. single-event appends: latency p50, p99 and mean (goal: p50 < 1 ms on PostgreSQL).
//!
//! Each scenario is warmed up in a session of its own first. Then, to show where the time of a
//! request goes, the handler's steps (parse and validate, count tokens with `tokens::count_all`
//! as the handler does, read the session, the append transaction) are replayed directly against
//! the store in another fresh session and timed one by one. On PostgreSQL the bench also times the server's own single-row commit, the
//! floor under any durable append.
//!
//! Every event carries a client id, as an agent that retries would send. Every append must
//! answer 201, and each session's head must end at the number of events sent.
//!
//! Run with `CTXD_PG_DURABLE=1 scripts/with-postgres cargo bench --bench append`; PostgreSQL
//! comes from `CTXD_TEST_DATABASE_URL` (a fresh schema, dropped at the end). Choose backends
//! with `CTXD_BENCH_BACKENDS=sqlite` (or `postgres`, or `sqlite,postgres`, the default).

mod common;

use common::Gen;

use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ctxd::domain::append::CountedEvent;
use ctxd::domain::event::{EventBody, EventInput, NewEvent};
use ctxd::store::{PostgresStore, SqliteStore, Store};
use ctxd::tokens::{self, Tokenizer};
use ctxd::{app, AppState, Limits};
use serde::Deserialize;
use serde_json::{json, Value};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{Connection, PgConnection};
use uuid::Uuid;

const TOKENIZER: Tokenizer = Tokenizer::O200kBase;
const BATCH_EVENTS: usize = 100;
const MIXED_BATCHES: usize = 40;
const SHORT_BATCHES: usize = 300;
const SINGLE_APPENDS: usize = 2_000;
/// Warm-up requests sent before each scenario, to a session of their own.
const MIXED_WARMUP: usize = 5;
const SHORT_WARMUP: usize = 30;
const SINGLE_WARMUP: usize = 200;
/// Passes of the tokenizer over the mixed events; the median is reported.
const TOKENIZER_PASSES: usize = 3;
const COMMIT_PROBES: usize = 1_000;
const DB_CONNECTIONS: u32 = 16;

#[tokio::main]
async fn main() {
    let backends = selected_backends();
    TOKENIZER.preload();
    let mixed = Workload(mixed_batches(MIXED_BATCHES));
    let short = Workload(short_batches(SHORT_BATCHES));
    let single = Workload(single_events(SINGLE_APPENDS));
    println!(
        "workloads: a. {} batches of {BATCH_EVENTS} events, {:.1} MB of text ({:.1} MB of JSON); \
         b. {} batches of {BATCH_EVENTS} events; c. {} single events; warm-up excluded",
        MIXED_BATCHES,
        mb(mixed.text_bytes()),
        mb(mixed.body_bytes()),
        SHORT_BATCHES,
        SINGLE_APPENDS
    );

    let mut results = Vec::new();
    let mut commit_probe = None;
    for backend in backends {
        let server = Server::start(backend).await;
        // Lightest first: the mixed scenario writes tens of MB, and the disk is still flushing
        // them for a while after, which slows every commit.
        if let Backend::Postgres = backend {
            commit_probe = Some(server.commit_probe().await);
        }
        let single = server.run(&single, SINGLE_WARMUP).await;
        let short = server.run(&short, SHORT_WARMUP).await;
        let mixed_run = server.run(&mixed, MIXED_WARMUP).await;
        let tokenizer = tokenizer_time(&mixed);
        server.stop().await;
        results.push(BackendResult {
            backend,
            mixed: mixed_run,
            tokenizer,
            short,
            single,
        });
    }
    report(&results, &mixed, commit_probe);
}

// --- The service under test -------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    fn name(self) -> &'static str {
        match self {
            Self::Sqlite => "sqlite",
            Self::Postgres => "postgres",
        }
    }
}

fn selected_backends() -> Vec<Backend> {
    let list = std::env::var("CTXD_BENCH_BACKENDS").unwrap_or_else(|_| "sqlite,postgres".into());
    list.split(',')
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .map(|name| match name {
            "sqlite" => Backend::Sqlite,
            "postgres" => Backend::Postgres,
            other => panic!("CTXD_BENCH_BACKENDS: unknown backend `{other}` (sqlite, postgres)"),
        })
        .collect()
}

fn postgres_url() -> String {
    std::env::var("CTXD_TEST_DATABASE_URL").unwrap_or_else(|_| {
        panic!(
            "CTXD_TEST_DATABASE_URL is not set. Run `CTXD_PG_DURABLE=1 scripts/with-postgres \
             cargo bench --bench append`, which starts a throwaway PostgreSQL with fsync on, or \
             set it to a scratch database, or bench SQLite alone with CTXD_BENCH_BACKENDS=sqlite"
        )
    })
}

/// ctxd on a loopback port over a fresh database, and a client for it.
struct Server {
    base: String,
    client: reqwest::Client,
    store: Arc<dyn Store>,
    /// The SQLite file's directory, or the PostgreSQL schema to drop.
    _dir: Option<tempfile::TempDir>,
    schema: Option<String>,
}

impl Server {
    async fn start(backend: Backend) -> Self {
        let (store, dir, schema): (Arc<dyn Store>, _, _) = match backend {
            Backend::Sqlite => {
                let dir = tempfile::tempdir().expect("temp dir");
                let url = format!("sqlite://{}", dir.path().join("ctxd.db").display());
                let store = SqliteStore::connect(&url, DB_CONNECTIONS)
                    .await
                    .expect("open sqlite");
                (Arc::new(store), Some(dir), None)
            }
            Backend::Postgres => {
                let url = postgres_url();
                let schema = format!("bench_{}", Uuid::now_v7().simple());
                admin_query(&format!("CREATE SCHEMA {schema}")).await;
                let options = PgConnectOptions::from_str(&url)
                    .expect("parse CTXD_TEST_DATABASE_URL")
                    .options([("search_path", schema.as_str())]);
                let pool = PgPoolOptions::new()
                    .max_connections(DB_CONNECTIONS)
                    .connect_with(options)
                    .await
                    .expect("connect to CTXD_TEST_DATABASE_URL");
                (Arc::new(PostgresStore::from_pool(pool)), None, Some(schema))
            }
        };
        store.migrate().await.expect("migrate");
        let state = AppState::new(store.clone(), Limits::default());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            axum::serve(listener, app(state)).await.expect("serve");
        });
        Self {
            base: format!("http://{addr}"),
            client: reqwest::Client::new(),
            store,
            _dir: dir,
            schema,
        }
    }

    async fn stop(self) {
        if let Some(schema) = &self.schema {
            admin_query(&format!("DROP SCHEMA {schema} CASCADE")).await;
        }
    }

    async fn create_session(&self) -> Uuid {
        let response = self
            .client
            .post(format!("{}/sessions", self.base))
            .json(&json!({"config": {"tokenizer": "o200k_base"}}))
            .send()
            .await
            .expect("create session");
        assert_eq!(response.status(), reqwest::StatusCode::CREATED);
        let body: Value = response.json().await.expect("session JSON");
        body["id"].as_str().expect("id").parse().expect("uuid")
    }

    /// Appends one request body and returns how long the round trip took.
    async fn append(&self, session: Uuid, body: &[u8]) -> Duration {
        let start = Instant::now();
        let response = self
            .client
            .post(format!("{}/sessions/{session}/events", self.base))
            .header("content-type", "application/json")
            .body(body.to_vec())
            .send()
            .await
            .expect("append");
        let status = response.status();
        let answer = response.bytes().await.expect("append answer");
        let elapsed = start.elapsed();
        assert_eq!(
            status,
            reqwest::StatusCode::CREATED,
            "{}",
            String::from_utf8_lossy(&answer)
        );
        elapsed
    }

    /// Warms up with the first `warmup` requests in a session of their own, sends every request,
    /// one after another, to a fresh session, then replays them step by step in another.
    async fn run(&self, workload: &Workload, warmup: usize) -> Run {
        let session = self.create_session().await;
        for request in &workload.0[..warmup] {
            self.append(session, &request.body).await;
        }
        let session = self.create_session().await;
        let start = Instant::now();
        let mut latencies = Vec::with_capacity(workload.0.len());
        for request in &workload.0 {
            latencies.push(self.append(session, &request.body).await);
        }
        let wall = start.elapsed();
        let head = self
            .store
            .get_session(session)
            .await
            .expect("read session")
            .expect("session")
            .head_seq;
        assert_eq!(head as usize, workload.events(), "every event was appended");
        Run {
            wall,
            latencies,
            phases: self.phases(workload).await,
        }
    }

    /// Replays the handler's steps for each request directly against the store, in a fresh
    /// session, and times each step.
    async fn phases(&self, workload: &Workload) -> Phases {
        let session = self.create_session().await;
        let mut phases = Phases::default();
        for request in &workload.0 {
            let start = Instant::now();
            let events = parse(&request.body);
            let parsed = Instant::now();
            let counted = count_like_the_handler(events).await;
            let tokens_counted = Instant::now();
            self.store
                .get_session(session)
                .await
                .expect("read session")
                .expect("session");
            let session_read = Instant::now();
            self.store
                .append_events(session, &counted, None)
                .await
                .expect("append");
            let appended = Instant::now();
            phases.parse += parsed - start;
            phases.count += tokens_counted - parsed;
            phases.session_read += session_read - tokens_counted;
            phases.append += appended - session_read;
        }
        phases.scale(workload.0.len());
        phases
    }

    /// PostgreSQL's own latency for one durable single-row INSERT and COMMIT, and for a bare
    /// `SELECT 1` round trip, on a connection of its own.
    async fn commit_probe(&self) -> CommitProbe {
        let schema = self.schema.as_deref().expect("a PostgreSQL schema");
        let mut conn = PgConnection::connect(&postgres_url())
            .await
            .expect("connect to CTXD_TEST_DATABASE_URL");
        let table = format!("{schema}.commit_probe");
        sqlx::query(&format!(
            "CREATE TABLE {table} (id BIGSERIAL PRIMARY KEY, body TEXT NOT NULL)"
        ))
        .execute(&mut conn)
        .await
        .expect("create probe table");
        let mut commits = Vec::with_capacity(COMMIT_PROBES);
        let mut selects = Vec::with_capacity(COMMIT_PROBES);
        for i in 0..COMMIT_PROBES + COMMIT_PROBES / 10 {
            let start = Instant::now();
            let mut tx = conn.begin().await.expect("begin");
            sqlx::query(&format!("INSERT INTO {table} (body) VALUES ($1)"))
                .bind("a short message of about sixty bytes, like a chat message")
                .execute(&mut *tx)
                .await
                .expect("insert");
            tx.commit().await.expect("commit");
            let committed = Instant::now();
            sqlx::query("SELECT 1")
                .execute(&mut conn)
                .await
                .expect("select 1");
            if i >= COMMIT_PROBES / 10 {
                commits.push(committed - start);
                selects.push(committed.elapsed());
            }
        }
        CommitProbe {
            commit: Percentiles::of(commits),
            select: Percentiles::of(selects),
        }
    }
}

/// Runs one statement on a connection of its own (to create or drop the bench's schema).
async fn admin_query(sql: &str) {
    let mut admin = PgConnection::connect(&postgres_url())
        .await
        .expect("connect to CTXD_TEST_DATABASE_URL");
    sqlx::query(sql).execute(&mut admin).await.expect(sql);
    admin.close().await.ok();
}

/// The events of a request body, parsed and validated as the handler does.
fn parse(body: &[u8]) -> Vec<NewEvent> {
    #[derive(Deserialize)]
    struct AppendRequest {
        events: Vec<EventInput>,
    }
    let request: AppendRequest = serde_json::from_slice(body).expect("a valid request body");
    request
        .events
        .into_iter()
        .enumerate()
        .map(|(i, input)| input.validate(i).expect("a valid event"))
        .collect()
}

/// Counts tokens with the function the handler calls: on the blocking pool, split across the
/// cores above `tokens::PARALLEL_COUNT_BYTES` of text.
async fn count_like_the_handler(events: Vec<NewEvent>) -> Vec<CountedEvent> {
    tokens::count_all(
        TOKENIZER,
        events,
        |e| text_bytes(&e.body),
        |e, tokenizer| e.body.tokens(tokenizer),
    )
    .await
    .expect("counting tokens")
    .into_iter()
    .map(|(event, tokens)| CountedEvent { event, tokens })
    .collect()
}

/// The tokenizer alone, single-threaded, over the events of `workload`: the median of a few
/// passes.
fn tokenizer_time(workload: &Workload) -> Duration {
    let events: Vec<NewEvent> = workload.0.iter().flat_map(|r| parse(&r.body)).collect();
    let mut passes: Vec<Duration> = (0..TOKENIZER_PASSES)
        .map(|_| {
            let start = Instant::now();
            for event in &events {
                std::hint::black_box(std::hint::black_box(&event.body).tokens(TOKENIZER));
            }
            start.elapsed()
        })
        .collect();
    passes.sort();
    passes[passes.len() / 2]
}

// --- Workloads --------------------------------------------------------------------------------

/// One append request: its JSON body and how much it carries.
struct Request {
    body: Vec<u8>,
    events: usize,
    /// Bytes of text the tokenizer reads: contents, names, tool names and arguments.
    text_bytes: usize,
}

impl Request {
    fn new(events: &[Value]) -> Self {
        let body = serde_json::to_vec(&json!({ "events": events })).expect("encode request");
        let text_bytes = parse(&body).iter().map(|e| text_bytes(&e.body)).sum();
        Self {
            body,
            events: events.len(),
            text_bytes,
        }
    }
}

fn text_bytes(body: &EventBody) -> usize {
    match body {
        EventBody::Message(m) => {
            m.content.text().len()
                + m.name.as_ref().map_or(0, String::len)
                + m.tool_calls
                    .iter()
                    .map(|c| c.name.len() + c.arguments_text().len())
                    .sum::<usize>()
        }
        EventBody::Note(n) => n.content.len(),
        EventBody::EpisodeStart(e) => e.name.len() + e.dependencies.join(", ").len(),
        EventBody::EpisodeEnd(e) => e.name.len() + e.conclusion.len(),
    }
}

/// The requests of one scenario, generated once and sent alike to every backend.
struct Workload(Vec<Request>);

impl Workload {
    fn events(&self) -> usize {
        self.0.iter().map(|r| r.events).sum()
    }

    fn text_bytes(&self) -> usize {
        self.0.iter().map(|r| r.text_bytes).sum()
    }

    fn body_bytes(&self) -> usize {
        self.0.iter().map(|r| r.body.len()).sum()
    }
}

const TOOLS: &[&str] = &["read_file", "shell", "grep", "list_dir", "run_tests"];

/// An agent's session cut into batches of 100: user turns, assistant tool calls with their
/// results (which may land in the next batch), and short assistant replies.
fn mixed_batches(batches: usize) -> Vec<Request> {
    let mut g = Gen::new(0xa99e_4d00);
    let mut events = Vec::new();
    let mut next_call = 0;
    events.push(g.message("user"));
    while events.len() < batches * BATCH_EVENTS {
        let calls: Vec<(String, &str)> = (0..g.between(1, 4))
            .map(|_| {
                next_call += 1;
                (format!("call_{next_call}"), g.pick(TOOLS))
            })
            .collect();
        events.push(json!({
            "type": "message",
            "role": "assistant",
            "content": if g.between(0, 2) == 0 { g.sentence() } else { String::new() },
            "tool_calls": calls.iter().map(|(id, tool)| json!({
                "id": id,
                "name": tool,
                "arguments": format!("{{\"path\":\"src/{}/{}.rs\",\"limit\":{}}}",
                    g.pick(IDENTS), g.pick(IDENTS), g.between(50, 2000)),
            })).collect::<Vec<_>>(),
        }));
        for (id, tool) in calls {
            let size = g.between(1_000, 30_000);
            let content = if g.between(0, 2) == 0 {
                g.code(size)
            } else {
                g.logs(size)
            };
            events.push(json!({
                "type": "message",
                "role": "tool",
                "tool_call_id": id,
                "name": tool,
                "content": content,
            }));
        }
        match g.between(0, 4) {
            0 => events.push(g.message("assistant")),
            1 => events.push(g.message("user")),
            _ => {}
        }
    }
    batch_up(events, batches)
}

/// Alternating user and assistant messages of under 200 bytes, in batches of 100.
fn short_batches(batches: usize) -> Vec<Request> {
    let mut g = Gen::new(0x5407_7e57);
    let events = (0..batches * BATCH_EVENTS)
        .map(|i| g.message(if i % 2 == 0 { "user" } else { "assistant" }))
        .collect();
    batch_up(events, batches)
}

/// Short messages, one per request.
fn single_events(requests: usize) -> Vec<Request> {
    let mut g = Gen::new(0x0001_e7e7);
    (0..requests)
        .map(|i| Request::new(&[g.message(if i % 2 == 0 { "user" } else { "assistant" })]))
        .collect()
}

/// Numbers the events with client ids and cuts them into `batches` requests of 100.
fn batch_up(mut events: Vec<Value>, batches: usize) -> Vec<Request> {
    events.truncate(batches * BATCH_EVENTS);
    for (i, event) in events.iter_mut().enumerate() {
        event["id"] = json!(format!("e{i}"));
    }
    events.chunks(BATCH_EVENTS).map(Request::new).collect()
}

#[rustfmt::skip]
const WORDS: &[&str] = &[
    "the", "agent", "reads", "file", "and", "then", "runs", "tests", "which", "fail", "because",
    "config", "value", "is", "missing", "from", "environment", "we", "should", "check", "whether",
    "cache", "was", "invalidated", "after", "migration", "a", "request", "returns", "error", "when",
    "session", "has", "no", "events", "to", "of", "in", "that", "this", "it", "for", "on", "with",
    "database", "connection", "pool", "timeout", "retry", "budget", "context", "window", "token",
];
#[rustfmt::skip]
const IDENTS: &[&str] = &[
    "session", "event", "batch", "store", "tokens", "head_seq", "config", "request", "response",
    "client", "pool", "row", "index", "buffer", "reader", "writer", "limit", "cursor", "payload",
];
#[rustfmt::skip]
const TYPES: &[&str] = &[
    "String", "Vec<u8>", "Option<i64>", "HashMap<String, Value>", "Result<(), Error>", "usize",
];

/// Realistic text from the shared deterministic generator.
impl Gen {
    /// A sentence of 6 to 19 words: under 200 bytes.
    fn sentence(&mut self) -> String {
        let n = self.between(6, 20);
        let mut s: String = (0..n)
            .map(|_| self.pick(WORDS))
            .collect::<Vec<_>>()
            .join(" ");
        s[..1].make_ascii_uppercase();
        s.push('.');
        s
    }

    fn message(&mut self, role: &str) -> Value {
        json!({"type": "message", "role": role, "content": self.sentence()})
    }

    /// Rust-like source of about `size` bytes.
    fn code(&mut self, size: usize) -> String {
        let mut s = String::new();
        while s.len() < size {
            let (a, b, c) = (self.pick(IDENTS), self.pick(IDENTS), self.pick(IDENTS));
            if self.between(0, 2) == 0 {
                s.push_str(&format!(
                    "/// {}\npub struct {a}_{b} {{\n    pub {a}: {},\n    pub {c}: {},\n}}\n\n",
                    self.sentence(),
                    self.pick(TYPES),
                    self.pick(TYPES),
                ));
            } else {
                s.push_str(&format!(
                    "    // {}\n    fn {a}_{b}(&self, {c}: {}) -> {} {{\n        let {a} = self.{b}.get(&{c})?;\n        if {a}.len() > {} {{\n            return Err(Error::new(format!(\"{{}} exceeds {{}}\", {a}.len(), {})));\n        }}\n        Ok({a}.iter().map(|x| x.{c} * 2).sum())\n    }}\n\n",
                    self.sentence(),
                    self.pick(TYPES),
                    self.pick(TYPES),
                    self.between(1, 10_000),
                    self.between(1, 100),
                ));
            }
        }
        s
    }

    /// Shell and service output of about `size` bytes: build, test and request log lines.
    fn logs(&mut self, size: usize) -> String {
        let mut s = String::new();
        while s.len() < size {
            let (a, b) = (self.pick(IDENTS), self.pick(IDENTS));
            let line = match self.between(0, 3) {
                0 => format!(
                    "   Compiling {a}-{b} v{}.{}.{}\n",
                    self.between(0, 3),
                    self.between(0, 40),
                    self.between(0, 20)
                ),
                1 => format!(
                    "test {a}::tests::{b}_{} ... {}\n",
                    self.pick(WORDS),
                    ["ok", "ok", "ok", "FAILED", "ignored"][self.between(0, 5)]
                ),
                _ => format!(
                    "2025-03-{:02}T{:02}:{:02}:{:02}.{:03}Z {} request{{method=POST route=/sessions/{}/events}}: {}: status={} latency_ms={}\n",
                    self.between(1, 29),
                    self.between(0, 24),
                    self.between(0, 60),
                    self.between(0, 60),
                    self.between(0, 1000),
                    ["INFO", "INFO", "WARN", "ERROR"][self.between(0, 4)],
                    self.hex(32),
                    self.sentence(),
                    [200, 201, 404, 409, 422][self.between(0, 5)],
                    self.between(0, 2000)
                ),
            };
            s.push_str(&line);
        }
        s
    }
}

// --- Results ----------------------------------------------------------------------------------

/// The requests of one scenario, sent one after another.
struct Run {
    wall: Duration,
    latencies: Vec<Duration>,
    phases: Phases,
}

impl Run {
    /// Mean wall time per request.
    fn per_request(&self) -> Duration {
        self.wall / self.latencies.len() as u32
    }
}

/// Mean time per request of each step of the handler.
#[derive(Default)]
struct Phases {
    parse: Duration,
    count: Duration,
    session_read: Duration,
    append: Duration,
}

impl Phases {
    fn scale(&mut self, requests: usize) {
        let n = requests as u32;
        self.parse /= n;
        self.count /= n;
        self.session_read /= n;
        self.append /= n;
    }

    fn total(&self) -> Duration {
        self.parse + self.count + self.session_read + self.append
    }
}

struct Percentiles {
    p50: Duration,
    p99: Duration,
    mean: Duration,
}

impl Percentiles {
    fn of(mut samples: Vec<Duration>) -> Self {
        samples.sort();
        let rank = |p: f64| samples[((p * samples.len() as f64).ceil() as usize).max(1) - 1];
        Self {
            p50: rank(0.50),
            p99: rank(0.99),
            mean: samples.iter().sum::<Duration>() / samples.len() as u32,
        }
    }
}

struct CommitProbe {
    commit: Percentiles,
    select: Percentiles,
}

struct BackendResult {
    backend: Backend,
    mixed: Run,
    /// The tokenizer alone over the mixed events, single-threaded.
    tokenizer: Duration,
    short: Run,
    single: Run,
}

fn report(results: &[BackendResult], mixed: &Workload, commit_probe: Option<CommitProbe>) {
    let text = mixed.text_bytes();
    println!("\na. mixed batches of {BATCH_EVENTS} events, tool results of 1–30 KB");
    println!(
        "{:<9} {:>9} {:>10} {:>15} {:>7}  goal ratio ≥ 0.80",
        "backend", "events/s", "text MB/s", "tokenizer MB/s", "ratio"
    );
    for r in results {
        let append = mb_per_s(text, r.mixed.wall);
        let tokenizer = mb_per_s(text, r.tokenizer);
        let ratio = append / tokenizer;
        println!(
            "{:<9} {:>9.0} {:>10.1} {:>15.1} {:>7.2}  {}",
            r.backend.name(),
            per_s(mixed.events(), r.mixed.wall),
            append,
            tokenizer,
            ratio,
            met(ratio >= 0.80)
        );
    }

    println!("\nb. batches of {BATCH_EVENTS} short messages (< 200 bytes)");
    println!(
        "{:<9} {:>9} {:>13}  goal ≥ 20,000 events/s on postgres",
        "backend", "events/s", "ms per batch"
    );
    for r in results {
        let events_per_s = per_s(SHORT_BATCHES * BATCH_EVENTS, r.short.wall);
        println!(
            "{:<9} {:>9.0} {:>13.2}  {}",
            r.backend.name(),
            events_per_s,
            ms(r.short.per_request()),
            goal(r.backend, events_per_s >= 20_000.0)
        );
    }

    println!("\nc. single-event appends, sequential");
    println!(
        "{:<9} {:>8} {:>8} {:>8}  goal p50 < 1 ms on postgres",
        "backend", "p50 ms", "p99 ms", "mean ms"
    );
    for r in results {
        let latency = Percentiles::of(r.single.latencies.clone());
        println!(
            "{:<9} {:>8.3} {:>8.3} {:>8.3}  {}",
            r.backend.name(),
            ms(latency.p50),
            ms(latency.p99),
            ms(latency.mean),
            goal(r.backend, latency.p50 < Duration::from_millis(1))
        );
    }

    println!(
        "\nwhere a request's time goes: mean ms per request; the handler's steps replayed \
         against the store (count: the handler's tokens::count_all), HTTP measured end to end above"
    );
    println!(
        "{:<9} {:<10} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}",
        "backend", "scenario", "parse", "count", "session", "append", "steps", "http", "rest"
    );
    for r in results {
        for (name, run) in [
            ("a. mixed", &r.mixed),
            ("b. short", &r.short),
            ("c. single", &r.single),
        ] {
            let (phases, http) = (&run.phases, run.per_request());
            println!(
                "{:<9} {:<10} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>8.3}",
                r.backend.name(),
                name,
                ms(phases.parse),
                ms(phases.count),
                ms(phases.session_read),
                ms(phases.append),
                ms(phases.total()),
                ms(http),
                ms(http.saturating_sub(phases.total()))
            );
        }
    }

    if let Some(probe) = commit_probe {
        println!("\npostgres's own floor, {COMMIT_PROBES} probes on one connection");
        println!(
            "{:<30} {:>8} {:>8} {:>8}",
            "", "p50 ms", "p99 ms", "mean ms"
        );
        for (name, p) in [
            ("INSERT one row + COMMIT", &probe.commit),
            ("SELECT 1", &probe.select),
        ] {
            println!(
                "{name:<30} {:>8.3} {:>8.3} {:>8.3}",
                ms(p.p50),
                ms(p.p99),
                ms(p.mean)
            );
        }
    }
}

/// A goal that applies to PostgreSQL only.
fn goal(backend: Backend, reached: bool) -> &'static str {
    match backend {
        Backend::Postgres => met(reached),
        Backend::Sqlite => "(postgres goal)",
    }
}

fn met(reached: bool) -> &'static str {
    if reached {
        "met"
    } else {
        "NOT met"
    }
}

fn mb(bytes: usize) -> f64 {
    bytes as f64 / 1e6
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn mb_per_s(bytes: usize, time: Duration) -> f64 {
    mb(bytes) / time.as_secs_f64()
}

fn per_s(count: usize, time: Duration) -> f64 {
    count as f64 / time.as_secs_f64()
}
