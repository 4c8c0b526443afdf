//! Compaction latency with the deterministic summariser (no LLM configured), in-process and over
//! HTTP on PostgreSQL, for sessions of 1,000, 10,000 and 100,000 events (o200k_base, a
//! 200,000-token window, every other setting at its default).
//!
//! Sessions are realistic agent logs from a seeded xorshift: a system prompt, user requests,
//! assistant text, assistant tool calls (read_file, shell, grep, edit_file) and their results
//! of 200 B – 20 KB (code, build and test logs, search hits). A session is built as an agent
//! builds it: appended in batches of about 16,000 tokens (64,000 characters), each followed by a
//! compaction, so that what is measured is the steady state of a long session, not one giant
//! first compaction.
//!
//! Each measured iteration then appends one turn (1–3 events: a user request, an answer, or an
//! assistant tool call with its results) and compacts, timing only the compaction: the cost an
//! agent pays before every model turn. A compaction with no new events since the last one is
//! timed separately. The tiers the measured compactions hit, and how many acted (changed the
//! view's middle), are reported with them, since acting compactions cost more.
//!
//! 1. In-process: `ctxd::engine::compact` over the view's events held in memory (the kept
//!    events and every event after the checkpoint, as `compaction::compact_session` loads them),
//!    with the state carried from call to call as `compact_session` persists it; then,
//!    separately, the answer as the handler writes it: the view's JSON (`render::write_view`,
//!    reusing what earlier calls rendered, as a replica does) and the record's.
//! 2. Over HTTP on PostgreSQL: ctxd served in-process on 127.0.0.1:0 over a fresh schema of
//!    `CTXD_TEST_DATABASE_URL` (dropped at the end), a reqwest client calling
//!    `POST /sessions/{id}/compact` with `{}` and reading the whole response; the server's part
//!    of each call is timed by a layer around the service, and a bare loopback answer of the
//!    same size (nothing computed) shows what moving the bytes costs. Then, for more
//!    turns, the handler's steps are replayed directly against the store and timed one by one
//!    (`compaction::load` with a view cache of its own, the engine, saving, the view's JSON,
//!    the record's); what the HTTP mean has beyond their sum is the HTTP layer.
//!
//! Run with `CTXD_PG_DURABLE=1 scripts/with-postgres cargo bench --bench compact`. Choose sizes
//! with `CTXD_BENCH_SIZES=1000,10000` (default 1000,10000,100000). Without
//! `CTXD_TEST_DATABASE_URL` only the in-process part runs.

mod common;

use common::Gen as Rng;

use std::collections::BTreeMap;
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::Utc;
use ctxd::compaction::{self, cache::CachedView};
use ctxd::domain::compaction::{CompactionRecord, FallbackReason, Mode, Tier};
use ctxd::domain::event::{Event, EventBody, Message, Role, ToolCall};
use ctxd::domain::session::SessionConfig;
use ctxd::domain::state::CompactionState;
use ctxd::engine::render::{write_view, Format, Fragments};
use ctxd::engine::{self, EngineInput, EngineOutput};
use ctxd::store::{PostgresStore, Store, StoredState};
use ctxd::summarize::SummaryOutcome;
use ctxd::tokens::Tokenizer;
use ctxd::{app, AppState, Limits};
use serde_json::{json, Value};
use sqlx::postgres::PgConnectOptions;
use sqlx::{Connection, PgConnection};
use uuid::Uuid;

const DEFAULT_SIZES: [usize; 3] = [1_000, 10_000, 100_000];
const SEED: u64 = 0x5eed_c0de_cafe_f00d;
/// Setup appends batches of about this many characters (≈ 16,000 tokens, 8 % of the window),
/// each followed by a compaction.
const SETUP_BATCH_CHARS: usize = 64_000;
/// The server's limit on events per append.
const MAX_BATCH_EVENTS: usize = 1_000;
/// Turns appended and compacted before measuring, unmeasured.
const WARMUP_TURNS: usize = 10;
const MEASURED_TURNS: usize = 200;
/// Compactions with no new events, measured after the turns.
const IDLE_CALLS: usize = 50;
/// Turns whose compaction is replayed step by step against the store.
const PHASE_TURNS: usize = 50;
const DB_CONNECTIONS: u32 = 8;

#[tokio::main]
async fn main() {
    let sizes = selected_sizes();
    Tokenizer::O200kBase.preload();
    let config = SessionConfig::default();
    assert_eq!(config.context_window, 200_000);
    assert_eq!(config.tokenizer, Tokenizer::O200kBase);

    let mut in_process = Vec::new();
    for &size in &sizes {
        eprintln!("in-process: {size} events…");
        in_process.push(run_in_process(size, &config).await);
    }
    let mut http = Vec::new();
    match std::env::var("CTXD_TEST_DATABASE_URL") {
        Ok(url) => {
            let service = Service::start(&url).await;
            for &size in &sizes {
                eprintln!("http on postgres: {size} events…");
                http.push(service.run(size).await);
            }
            service.stop(&url).await;
        }
        Err(_) => eprintln!(
            "CTXD_TEST_DATABASE_URL is not set: the HTTP part is skipped (run under \
             scripts/with-postgres)"
        ),
    }
    report(&in_process, &http);
}

fn selected_sizes() -> Vec<usize> {
    match std::env::var("CTXD_BENCH_SIZES") {
        Ok(list) => list
            .split(',')
            .map(|s| {
                s.trim()
                    .replace('_', "")
                    .parse()
                    .expect("CTXD_BENCH_SIZES: a comma-separated list of event counts")
            })
            .collect(),
        Err(_) => DEFAULT_SIZES.to_vec(),
    }
}

// --- In-process --------------------------------------------------------------------------------

/// A session held in memory, its state carried as `compact_session` persists it.
struct MemorySession<'c> {
    id: Uuid,
    config: &'c SessionConfig,
    state: CompactionState,
    log: Vec<Event>,
    /// The JSON of the view's parts, as a replica's view cache keeps it.
    fragments: Fragments,
}

impl<'c> MemorySession<'c> {
    fn new(config: &'c SessionConfig) -> Self {
        Self {
            id: Uuid::now_v7(),
            config,
            state: CompactionState::default(),
            log: Vec::new(),
            fragments: Fragments::default(),
        }
    }

    fn head(&self) -> usize {
        self.log.len()
    }

    fn append(&mut self, bodies: Vec<EventBody>) {
        for body in bodies {
            let seq = self.log.len() as i64 + 1;
            self.log.push(Event {
                seq,
                id: Some(format!("e{seq}")),
                tokens: body.tokens(self.config.tokenizer),
                body,
                pinned: false,
                metadata: None,
                created_at: Utc::now(),
                derived: Default::default(),
            });
        }
    }

    /// What `Store::view_events` returns: the kept events and every event after the
    /// checkpoint, in seq order.
    fn view_events(&self) -> Vec<Event> {
        let mut kept = self.state.kept.clone();
        kept.sort_unstable();
        let checkpoint = self.state.checkpoint_seq as usize;
        kept.iter()
            .map(|&seq| &self.log[seq as usize - 1])
            .chain(&self.log[checkpoint..])
            .cloned()
            .collect()
    }

    /// Characters of text in the view's events, and in those of them shown reduced.
    fn loaded_chars(&self) -> (usize, usize) {
        let events = self.view_events();
        let all = events.iter().map(|e| text_chars(&e.body)).sum();
        let reduced = events
            .iter()
            .filter(|e| self.state.reduced.contains_key(&e.seq))
            .map(|e| text_chars(&e.body))
            .sum();
        (all, reduced)
    }

    /// One compaction as `compact_session` runs it, then the answer as the handler makes it;
    /// the engine, rendering and serialising timed apart.
    async fn compact(&mut self) -> Turn {
        let events = self.view_events();
        let state = &self.state;
        let head_seq = events
            .last()
            .map_or(state.checkpoint_seq, |e| e.seq)
            .max(state.checkpoint_seq);
        let started = Instant::now();
        let out = run_engine(EngineInput {
            session_id: self.id,
            compaction_id: Uuid::now_v7(),
            config: self.config,
            state,
            events: &events,
            head_seq,
            tools_tokens: 0,
            format: Format::Openai,
            mode: Mode::Auto,
            overflow_retry: 0,
            condensation: None,
            now: Utc::now(),
        })
        .expect("compaction");
        let engine = started.elapsed();
        let (view_json, rest_json, body) = respond(&out, &mut self.fragments);
        let turn = Turn {
            record: out.record,
            messages: out.messages.len(),
            engine,
            view_json,
            rest_json,
            body_bytes: body.len(),
        };
        if out.changed {
            self.state = out.state;
            let state = &self.state;
            let shown = |seq: i64| seq > state.checkpoint_seq || state.kept.contains(&seq);
            self.fragments.retain(shown);
        }
        // A replica keeps the events it read, with what it derived from them.
        for event in events {
            let seq = event.seq as usize;
            self.log[seq - 1].derived = event.derived;
        }
        turn
    }
}

/// One measured compaction.
struct Turn {
    record: CompactionRecord,
    messages: usize,
    engine: Duration,
    view_json: Duration,
    rest_json: Duration,
    body_bytes: usize,
}

/// The answer to a compact call as the handler writes it (OpenAI format): the view's JSON
/// (reusing what `fragments` kept of earlier calls), then the record's; each timed.
fn respond(out: &EngineOutput<'_>, fragments: &mut Fragments) -> (Duration, Duration, Vec<u8>) {
    let started = Instant::now();
    let mut body = Vec::with_capacity(512 * 1024);
    body.extend_from_slice(br#"{"view":"#);
    write_view(Format::Openai, &out.messages, fragments, &mut body).expect("view");
    let view_json = started.elapsed();
    let started = Instant::now();
    body.extend_from_slice(br#","record":"#);
    serde_json::to_writer(&mut body, &out.record).expect("record");
    body.extend_from_slice(if out.changed {
        br#","persisted":true}"#
    } else {
        br#","persisted":false}"#
    });
    (view_json, started.elapsed(), body)
}

struct InProcessResult {
    size: usize,
    end_size: usize,
    setup: Duration,
    engine: Samples,
    view_json: Samples,
    rest_json: Samples,
    idle: Samples,
    tiers: Tiers,
    view_messages: Mean,
    view_tokens: Mean,
    body_bytes: Mean,
    /// Characters of text the view's events hold, and those of them shown reduced.
    loaded_chars: Mean,
    reduced_chars: Mean,
}

async fn run_in_process(size: usize, config: &SessionConfig) -> InProcessResult {
    let started = Instant::now();
    let mut session = MemorySession::new(config);
    let mut agent = AgentLog::new(SEED);
    while session.head() < size {
        session.append(setup_batch(&mut agent, size - session.head()));
        session.compact().await;
    }
    let setup = started.elapsed();
    for _ in 0..WARMUP_TURNS {
        session.append(agent.turn());
        session.compact().await;
    }

    let mut result = InProcessResult {
        size,
        end_size: 0,
        setup,
        engine: Samples::default(),
        view_json: Samples::default(),
        rest_json: Samples::default(),
        idle: Samples::default(),
        tiers: Tiers::default(),
        view_messages: Mean::default(),
        view_tokens: Mean::default(),
        body_bytes: Mean::default(),
        loaded_chars: Mean::default(),
        reduced_chars: Mean::default(),
    };
    for _ in 0..MEASURED_TURNS {
        session.append(agent.turn());
        let (all, reduced) = session.loaded_chars();
        result.loaded_chars.add(all as f64);
        result.reduced_chars.add(reduced as f64);
        let turn = session.compact().await;
        result.engine.push(turn.engine);
        result.tiers.add(turn.record.tier, turn.record.acted);
        result.view_json.push(turn.view_json);
        result.rest_json.push(turn.rest_json);
        result.view_messages.add(turn.messages as f64);
        result.view_tokens.add(turn.record.tokens_after as f64);
        result.body_bytes.add(turn.body_bytes as f64);
    }
    for _ in 0..IDLE_CALLS {
        result.idle.push(session.compact().await.engine);
    }
    result.end_size = session.head();
    result
}

// --- Over HTTP on PostgreSQL -------------------------------------------------------------------

/// ctxd on a loopback port over a fresh PostgreSQL schema, and a client for it.
struct Service {
    base: String,
    client: reqwest::Client,
    store: Arc<dyn Store>,
    schema: String,
    /// How long the server spent on each compact request, from the request reaching the
    /// router to its answer leaving it (every middleware included).
    handled: Arc<Mutex<Samples>>,
}

struct HttpResult {
    size: usize,
    end_size: usize,
    setup: Duration,
    compact: Samples,
    /// The server's part of the measured compactions (see [`Service::handled`]).
    handled: Samples,
    /// A loopback answer of the same size with nothing to compute: what moving the bytes
    /// costs on this machine.
    bare: Samples,
    idle: Samples,
    tiers: Tiers,
    body_bytes: Mean,
    phases: Phases,
}

/// The handler's steps, replayed against the store.
#[derive(Default)]
struct Phases {
    turns: usize,
    /// The session, its compaction state and the events appended since the last call (two
    /// queries at once, as `compaction::load` runs them).
    load: Samples,
    /// Events in the view, and of them read from the store.
    view_events_count: Mean,
    view_events_read: Mean,
    engine: Samples,
    /// Only when the compaction changed something.
    save: Samples,
    view_json: Samples,
    rest_json: Samples,
}

impl Service {
    async fn start(url: &str) -> Self {
        let schema = format!("bench_{}", Uuid::now_v7().simple());
        admin_query(url, &format!("CREATE SCHEMA {schema}")).await;
        let options = PgConnectOptions::from_str(url)
            .expect("parse CTXD_TEST_DATABASE_URL")
            .options([("search_path", schema.as_str())]);
        let pool = PostgresStore::pool_options(DB_CONNECTIONS)
            .connect_with(options)
            .await
            .expect("connect to CTXD_TEST_DATABASE_URL");
        let store = PostgresStore::from_pool(pool);
        store.migrate().await.expect("migrate");
        let store: Arc<dyn Store> = Arc::new(store);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        let state = AppState::new(store.clone(), Limits::default());
        let handled = Arc::new(Mutex::new(Samples::default()));
        let timed = handled.clone();
        let service = app(state).layer(axum::middleware::from_fn(
            move |request: axum::extract::Request, next: axum::middleware::Next| {
                let timed = timed.clone();
                async move {
                    let compact = request.uri().path().ends_with("/compact");
                    let started = Instant::now();
                    let response = next.run(request).await;
                    if compact {
                        timed.lock().expect("samples").push(started.elapsed());
                    }
                    response
                }
            },
        ));
        tokio::spawn(async move { axum::serve(listener, service).await.expect("serve") });
        Self {
            base,
            client: reqwest::Client::new(),
            store,
            schema,
            handled,
        }
    }

    /// Times `calls` answers of `bytes` bytes from a bare loopback server, read by the same
    /// client as the compactions.
    async fn bare_answers(&self, bytes: usize, calls: usize) -> Samples {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}/", listener.local_addr().expect("addr"));
        let body = axum::body::Bytes::from(vec![b' '; bytes]);
        let server = axum::Router::new().route(
            "/",
            axum::routing::post(move || std::future::ready(body.clone())),
        );
        let serving = tokio::spawn(async move { axum::serve(listener, server).await });
        let mut samples = Samples::default();
        for _ in 0..calls {
            let started = Instant::now();
            let response = self
                .client
                .post(&url)
                .body("{}")
                .send()
                .await
                .expect("bare");
            response.bytes().await.expect("bare body");
            samples.push(started.elapsed());
        }
        serving.abort();
        samples
    }

    async fn stop(self, url: &str) {
        admin_query(url, &format!("DROP SCHEMA {} CASCADE", self.schema)).await;
    }

    /// Posts `body` and reads the whole answer; returns the time taken and the answer.
    async fn post(&self, path: &str, body: String) -> (Duration, Vec<u8>) {
        let started = Instant::now();
        let response = self
            .client
            .post(format!("{}{path}", self.base))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .expect("request");
        let status = response.status();
        let bytes = response.bytes().await.expect("body");
        let elapsed = started.elapsed();
        assert!(
            status.is_success(),
            "{path}: {status}: {}",
            String::from_utf8_lossy(&bytes)
        );
        (elapsed, bytes.to_vec())
    }

    async fn append(&self, session: Uuid, head: &mut usize, bodies: Vec<EventBody>) {
        let events: Vec<Value> = bodies
            .into_iter()
            .map(|body| {
                *head += 1;
                let mut event = serde_json::to_value(body).expect("event");
                event["id"] = json!(format!("e{head}"));
                event
            })
            .collect();
        let body = json!({ "events": events }).to_string();
        self.post(&format!("/sessions/{session}/events"), body)
            .await;
    }

    async fn compact(&self, session: Uuid) -> (Duration, Vec<u8>) {
        self.post(&format!("/sessions/{session}/compact"), "{}".into())
            .await
    }

    async fn run(&self, size: usize) -> HttpResult {
        let started = Instant::now();
        let (_, created) = self.post("/sessions", "{}".into()).await;
        let created: Value = serde_json::from_slice(&created).expect("session");
        let session: Uuid = created["id"].as_str().expect("id").parse().expect("uuid");
        let mut head = 0;
        let mut agent = AgentLog::new(SEED);
        while head < size {
            let limit = (size - head).min(MAX_BATCH_EVENTS);
            self.append(session, &mut head, setup_batch(&mut agent, limit))
                .await;
            self.compact(session).await;
        }
        let setup = started.elapsed();
        for _ in 0..WARMUP_TURNS {
            self.append(session, &mut head, agent.turn()).await;
            self.compact(session).await;
        }

        let mut compact = Samples::default();
        let mut tiers = Tiers::default();
        let mut body_bytes = Mean::default();
        *self.handled.lock().expect("samples") = Samples::default();
        for _ in 0..MEASURED_TURNS {
            self.append(session, &mut head, agent.turn()).await;
            let (elapsed, body) = self.compact(session).await;
            compact.push(elapsed);
            let answer: Value = serde_json::from_slice(&body).expect("compact answer");
            let record = serde_json::from_value::<CompactionRecord>(answer["record"].clone())
                .expect("record");
            tiers.add(record.tier, record.acted);
            body_bytes.add(body.len() as f64);
        }
        let handled = std::mem::take(&mut *self.handled.lock().expect("samples"));
        let bare = self
            .bare_answers(body_bytes.get() as usize, MEASURED_TURNS)
            .await;
        let mut idle = Samples::default();
        for _ in 0..IDLE_CALLS {
            idle.push(self.compact(session).await.0);
        }
        let mut phases = Phases::default();
        let mut cached = None;
        for _ in 0..PHASE_TURNS {
            self.append(session, &mut head, agent.turn()).await;
            self.replay(session, &mut cached, &mut phases).await;
        }
        HttpResult {
            size,
            end_size: head,
            setup,
            compact,
            handled,
            bare,
            idle,
            tiers,
            body_bytes,
            phases,
        }
    }

    /// One compaction as the handler and `compact_session` run it, each step timed, with a
    /// view cache of its own (as a replica keeps one).
    async fn replay(&self, session: Uuid, cached: &mut Option<CachedView>, phases: &mut Phases) {
        let store = self.store.as_ref();
        let before = cached.as_ref().map_or(0, |c| c.events().len());
        let started = Instant::now();
        let (row, stored, mut view) =
            compaction::load(store, session, cached.take().unwrap_or_default())
                .await
                .expect("session, state and view");
        phases.load.push(started.elapsed());
        phases.view_events_count.add(view.events().len() as f64);
        phases
            .view_events_read
            .add(view.events().len().saturating_sub(before) as f64);

        let state = &stored.state;

        let (events, fragments, _) = view.parts();
        let head_seq = events
            .last()
            .map_or(state.checkpoint_seq, |e| e.seq)
            .max(state.checkpoint_seq);
        let started = Instant::now();
        let out = run_engine(EngineInput {
            session_id: session,
            compaction_id: Uuid::now_v7(),
            config: &row.config,
            state,
            events,
            head_seq,
            tools_tokens: 0,
            format: Format::Openai,
            mode: Mode::Auto,
            overflow_retry: 0,
            condensation: None,
            now: Utc::now(),
        })
        .expect("compaction");
        phases.engine.push(started.elapsed());

        let mut version = stored.version;
        if out.changed {
            let started = Instant::now();
            let saved = store
                .save_compaction(
                    session,
                    stored.version,
                    &out.state,
                    Some(&out.record),
                    &out.folded,
                )
                .await
                .expect("save");
            phases.save.push(started.elapsed());
            assert!(saved, "nothing else compacts this session");
            version += 1;
        }

        let (view_json, rest_json, _) = respond(&out, fragments);
        phases.view_json.push(view_json);
        phases.rest_json.push(rest_json);
        phases.turns += 1;
        let state = if out.changed { out.state } else { stored.state };
        view.keep_state(StoredState { version, state });
        *cached = Some(view);
    }
}

/// Runs one statement on a connection of its own (to create or drop the bench's schema).
async fn admin_query(url: &str, sql: &str) {
    let mut admin = PgConnection::connect(url)
        .await
        .expect("connect to CTXD_TEST_DATABASE_URL");
    sqlx::query(sql).execute(&mut admin).await.expect(sql);
    admin.close().await.ok();
}

// --- The agent's log ---------------------------------------------------------------------------

/// Turns until about `SETUP_BATCH_CHARS` characters of text, at most `max_events` events (a
/// turn may go up to two events over when `max_events` is not a multiple of its size).
fn setup_batch(agent: &mut AgentLog, max_events: usize) -> Vec<EventBody> {
    let mut batch = Vec::new();
    let mut chars = 0;
    while chars < SETUP_BATCH_CHARS && batch.len() < max_events {
        let turn = agent.turn();
        chars += turn.iter().map(text_chars).sum::<usize>();
        batch.extend(turn);
    }
    batch
}

fn text_chars(body: &EventBody) -> usize {
    match body {
        EventBody::Message(m) => {
            m.content.text().len()
                + m.tool_calls
                    .iter()
                    .map(|c| c.arguments_text().len())
                    .sum::<usize>()
        }
        _ => 0,
    }
}

#[rustfmt::skip]
const WORDS: &[&str] = &[
    "the", "session", "store", "returns", "events", "after", "checkpoint", "compaction", "view",
    "test", "fails", "because", "tokens", "are", "counted", "twice", "when", "batch", "retries",
    "we", "should", "fix", "handler", "so", "that", "summary", "keeps", "anchors", "and", "tail",
    "config", "request", "missing", "field", "error", "path", "file", "module", "function",
];
const IDENTS: &[&str] = &[
    "session", "event", "batch", "store", "tokens", "head_seq", "config", "request", "response",
    "client", "pool", "row", "index", "buffer", "reader", "writer", "limit", "cursor", "payload",
];
const TYPES: &[&str] = &[
    "String",
    "Vec<u8>",
    "Option<i64>",
    "HashMap<String, Value>",
    "Result<(), Error>",
    "usize",
];
const FILES: &[&str] = &[
    "src/store/postgres.rs",
    "src/store/sqlite.rs",
    "src/engine/compact.rs",
    "src/engine/render.rs",
    "src/http/events.rs",
    "src/domain/append.rs",
    "src/tokens/mod.rs",
    "tests/api/compaction.rs",
];
const COMMANDS: &[&str] = &[
    "cargo test --all-targets",
    "cargo build --release",
    "cargo clippy -- -D warnings",
    "git diff --stat",
    "scripts/test",
    "ls -la src",
];

/// A deterministic coding agent's log, one turn at a time: a system prompt, then tasks of a
/// user request, 2–12 tool steps and an answer.
struct AgentLog {
    rng: Rng,
    calls: u64,
    started: bool,
    /// Tool steps left in the current task; None between tasks.
    steps_left: Option<usize>,
}

impl AgentLog {
    fn new(seed: u64) -> Self {
        Self {
            rng: Rng(seed),
            calls: 0,
            started: false,
            steps_left: None,
        }
    }

    /// The next turn: 1–3 events.
    fn turn(&mut self) -> Vec<EventBody> {
        if !self.started {
            self.started = true;
            return vec![self.system_prompt()];
        }
        match self.steps_left {
            None => {
                self.steps_left = Some(self.rng.between(2, 13));
                vec![self.user_request()]
            }
            Some(0) => {
                self.steps_left = None;
                vec![message(Role::Assistant, self.paragraph(2, 5))]
            }
            Some(n) => {
                self.steps_left = Some(n - 1);
                self.tool_step()
            }
        }
    }

    fn system_prompt(&mut self) -> EventBody {
        let mut text = String::from(
            "You are a coding agent working in a Rust repository. Use the tools to read files, \
             search, edit and run commands. Keep changes minimal and run the tests.\n\n",
        );
        for _ in 0..12 {
            text.push_str("- ");
            text.push_str(&self.sentence());
            text.push('\n');
        }
        message(Role::System, text)
    }

    fn user_request(&mut self) -> EventBody {
        let file = self.rng.pick(FILES);
        message(
            Role::User,
            format!("In {file}: {} {}", self.sentence(), self.paragraph(0, 3)),
        )
    }

    /// An assistant message issuing one or two calls, then their results.
    fn tool_step(&mut self) -> Vec<EventBody> {
        let calls = if self.rng.below(5) == 0 { 2 } else { 1 };
        let (tool_calls, results): (Vec<ToolCall>, Vec<EventBody>) =
            (0..calls).map(|_| self.tool_call()).unzip();
        let content = if self.rng.below(2) == 0 {
            self.sentence()
        } else {
            String::new()
        };
        let mut step = vec![EventBody::Message(Message {
            tool_calls,
            ..plain(Role::Assistant, content)
        })];
        step.extend(results);
        step
    }

    fn tool_call(&mut self) -> (ToolCall, EventBody) {
        self.calls += 1;
        let id = format!("call_{:06}", self.calls);
        let size = self.result_size();
        let file = self.rng.pick(FILES);
        let mut is_error = false;
        let (name, arguments, output) = match self.rng.below(100) {
            0..35 => ("read_file", json!({ "path": file }), self.code(size)),
            35..65 => {
                let command = self.rng.pick(COMMANDS);
                is_error = self.rng.below(7) == 0;
                ("shell", json!({ "cmd": command }), self.logs(size))
            }
            65..85 => {
                let pattern = self.rng.pick(IDENTS);
                let args = json!({ "pattern": pattern, "path": "src" });
                ("grep", args, self.grep_hits(size))
            }
            _ => {
                let (old, new) = (self.rng.pick(IDENTS), self.rng.pick(IDENTS));
                let args = json!({ "path": file, "old_str": old, "new_str": new });
                let out = format!("Applied 1 edit to {file}. {}", self.paragraph(1, 2));
                ("edit_file", args, out)
            }
        };
        let call = ToolCall {
            id: id.clone(),
            name: name.into(),
            arguments: Value::String(arguments.to_string()),
            kind: Default::default(),
        };
        let result = EventBody::Message(Message {
            tool_call_id: Some(id),
            name: Some(name.into()),
            is_error: Some(is_error),
            ..plain(Role::Tool, output)
        });
        (call, result)
    }

    /// 60 % under 2 KB, 30 % 2–8 KB, 10 % 8–20 KB.
    fn result_size(&mut self) -> usize {
        match self.rng.below(10) {
            0..6 => self.rng.between(200, 2_000),
            6..9 => self.rng.between(2_000, 8_000),
            _ => self.rng.between(8_000, 20_001),
        }
    }

    fn sentence(&mut self) -> String {
        let n = self.rng.between(6, 20);
        let mut s = (0..n)
            .map(|_| self.rng.pick(WORDS))
            .collect::<Vec<_>>()
            .join(" ");
        s[..1].make_ascii_uppercase();
        s.push('.');
        s
    }

    fn paragraph(&mut self, min: usize, max: usize) -> String {
        let n = self.rng.between(min, max + 1);
        (0..n)
            .map(|_| self.sentence())
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Rust-like source, cut at `size` bytes.
    fn code(&mut self, size: usize) -> String {
        let mut s = String::new();
        while s.len() < size {
            let (a, b, c) = (
                self.rng.pick(IDENTS),
                self.rng.pick(IDENTS),
                self.rng.pick(IDENTS),
            );
            let (t, u) = (self.rng.pick(TYPES), self.rng.pick(TYPES));
            let comment = self.sentence();
            let limit = self.rng.between(1, 10_000);
            s.push_str(&format!(
                "    /// {comment}\n    fn {a}_{b}(&self, {c}: {t}) -> {u} {{\n        \
                 let {a} = self.{b}.get(&{c})?;\n        if {a}.len() > {limit} {{\n            \
                 return Err(Error::new(\"{a} exceeds {limit}\"));\n        }}\n        \
                 Ok({a}.iter().map(|x| x.{c} * 2).sum())\n    }}\n\n"
            ));
        }
        s.truncate(size);
        s
    }

    /// Build, test and service log lines, cut at `size` bytes.
    fn logs(&mut self, size: usize) -> String {
        let mut s = String::new();
        while s.len() < size {
            let (a, b) = (self.rng.pick(IDENTS), self.rng.pick(IDENTS));
            let line = match self.rng.below(3) {
                0 => format!(
                    "   Compiling {a}-{b} v0.{}.{}\n",
                    self.rng.below(40),
                    self.rng.below(20)
                ),
                1 => format!(
                    "test {a}::tests::{b}_{} ... {}\n",
                    self.rng.pick(WORDS),
                    self.rng.pick(&["ok", "ok", "ok", "FAILED", "ignored"])
                ),
                _ => format!(
                    "2025-03-{:02}T{:02}:{:02}:{:02}.{:03}Z {} {a}::{b}: {} latency_ms={}\n",
                    self.rng.between(1, 29),
                    self.rng.below(24),
                    self.rng.below(60),
                    self.rng.below(60),
                    self.rng.below(1000),
                    self.rng.pick(&["INFO", "INFO", "WARN", "ERROR"]),
                    self.sentence(),
                    self.rng.below(2000)
                ),
            };
            s.push_str(&line);
        }
        s.truncate(size);
        s
    }

    /// `path:line: text` search hits, cut at `size` bytes.
    fn grep_hits(&mut self, size: usize) -> String {
        let mut s = String::new();
        while s.len() < size {
            let file = self.rng.pick(FILES);
            let line = self.rng.between(1, 900);
            let (a, b) = (self.rng.pick(IDENTS), self.rng.pick(IDENTS));
            s.push_str(&format!("{file}:{line}:        let {a} = {b}.{a}()?;\n"));
        }
        s.truncate(size);
        s
    }
}

fn plain(role: Role, content: String) -> Message {
    Message {
        role,
        content: content.into(),
        tool_calls: Vec::new(),
        tool_call_id: None,
        name: None,
        is_error: None,
    }
}

fn message(role: Role, content: String) -> EventBody {
    EventBody::Message(plain(role, content))
}

// --- Results -----------------------------------------------------------------------------------

#[derive(Default)]
struct Samples(Vec<Duration>);

impl Samples {
    fn push(&mut self, d: Duration) {
        self.0.push(d);
    }

    fn sorted_ms(&self) -> Vec<f64> {
        let mut ms: Vec<f64> = self.0.iter().map(|d| d.as_secs_f64() * 1e3).collect();
        ms.sort_by(f64::total_cmp);
        ms
    }

    /// The nearest-rank percentile, in milliseconds.
    fn percentile(&self, p: f64) -> f64 {
        let ms = self.sorted_ms();
        if ms.is_empty() {
            return f64::NAN;
        }
        let rank = ((p / 100.0) * ms.len() as f64).ceil() as usize;
        ms[rank.clamp(1, ms.len()) - 1]
    }

    fn p50(&self) -> f64 {
        self.percentile(50.0)
    }

    fn p99(&self) -> f64 {
        self.percentile(99.0)
    }

    fn mean(&self) -> f64 {
        if self.0.is_empty() {
            return f64::NAN;
        }
        self.0.iter().map(|d| d.as_secs_f64() * 1e3).sum::<f64>() / self.0.len() as f64
    }

    /// The total over `turns`, per turn: for steps that do not run on every turn.
    fn per_turn(&self, turns: usize) -> f64 {
        self.0.iter().map(|d| d.as_secs_f64() * 1e3).sum::<f64>() / turns as f64
    }
}

#[derive(Default)]
struct Mean {
    sum: f64,
    n: usize,
}

impl Mean {
    fn add(&mut self, x: f64) {
        self.sum += x;
        self.n += 1;
    }

    fn get(&self) -> f64 {
        self.sum / self.n as f64
    }
}

/// How many compactions hit each tier, and how many of them acted.
#[derive(Default)]
struct Tiers(BTreeMap<Tier, (usize, usize)>);

impl Tiers {
    fn add(&mut self, tier: Tier, acted: bool) {
        let entry = self.0.entry(tier).or_default();
        entry.0 += 1;
        entry.1 += usize::from(acted);
    }

    fn describe(&self) -> String {
        self.0
            .iter()
            .map(|(tier, (n, acted))| {
                let name = serde_json::to_value(tier).expect("tier");
                let name = name.as_str().expect("tier name");
                if *acted > 0 {
                    format!("{name} {n} ({acted} acted)")
                } else {
                    format!("{name} {n}")
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

fn report(in_process: &[InProcessResult], http: &[HttpResult]) {
    println!();
    println!(
        "Compaction latency, deterministic summariser, o200k_base, 200,000-token window; \
         {MEASURED_TURNS} turns (append 1–3 events, compact) per size, then {IDLE_CALLS} \
         compactions with no new events. Times in ms."
    );
    println!();
    println!("In-process (engine::compact over the view's events in memory):");
    println!(
        "{:>17} {:>8} | {:>7} {:>7} {:>7} | {:>7} {:>7} | {:>9} {:>10} | {:>7} {:>7} | {:>8}",
        "events",
        "setup s",
        "p50",
        "p99",
        "mean",
        "idle50",
        "idle99",
        "view→json50",
        "record→json50",
        "msgs",
        "ktokens",
        "body KB"
    );
    for r in in_process {
        println!(
            "{:>17} {:>8.1} | {:>7.3} {:>7.3} {:>7.3} | {:>7.3} {:>7.3} | {:>9.3} {:>10.3} | {:>7.0} {:>7.1} | {:>8.0}",
            format!("{}→{}", r.size, r.end_size),
            r.setup.as_secs_f64(),
            r.engine.p50(),
            r.engine.p99(),
            r.engine.mean(),
            r.idle.p50(),
            r.idle.p99(),
            r.view_json.p50(),
            r.rest_json.p50(),
            r.view_messages.get(),
            r.view_tokens.get() / 1e3,
            r.body_bytes.get() / 1e3,
        );
    }
    for r in in_process {
        println!(
            "  {:>7} events: tiers {}; the view's events hold {:.0} KB of text, {:.0} KB of it \
             in items shown reduced",
            r.size,
            r.tiers.describe(),
            r.loaded_chars.get() / 1e3,
            r.reduced_chars.get() / 1e3
        );
    }

    if !http.is_empty() {
        println!();
        println!(
            "Over HTTP on PostgreSQL (POST /sessions/{{id}}/compact with {{}}, whole answer read):"
        );
        println!(
            "{:>17} {:>8} | {:>7} {:>7} {:>7} | {:>7} {:>7} | {:>9} {:>7} | {:>8}",
            "events",
            "setup s",
            "p50",
            "p99",
            "mean",
            "idle50",
            "idle99",
            "handler50",
            "bare50",
            "body KB"
        );
        for r in http {
            println!(
                "{:>17} {:>8.1} | {:>7.3} {:>7.3} {:>7.3} | {:>7.3} {:>7.3} | {:>9.3} {:>7.3} | {:>8.0}",
                format!("{}→{}", r.size, r.end_size),
                r.setup.as_secs_f64(),
                r.compact.p50(),
                r.compact.p99(),
                r.compact.mean(),
                r.idle.p50(),
                r.idle.p99(),
                r.handled.p50(),
                r.bare.p50(),
                r.body_bytes.get() / 1e3,
            );
        }
        println!(
            "  handler50: the server's part of each call (router and middleware included); \
             bare50: a bare loopback answer of the same size, read by the same client"
        );
        for r in http {
            println!("  {:>7} events: tiers {}", r.size, r.tiers.describe());
        }
        println!();
        println!(
            "Where the time goes: the handler's steps replayed against the store, {PHASE_TURNS} \
             more turns per size (mean ms per turn; p50 in brackets):"
        );
        println!(
            "{:>9} | {:>13} {:>13} {:>13} {:>13} {:>13} | {:>7} {:>8}",
            "events", "load", "engine", "save", "view→json", "record→json", "sum", "http−sum"
        );
        for r in http {
            let p = &r.phases;
            let cell = |s: &Samples| format!("{:.3} ({:.3})", s.mean(), s.p50());
            let save = p.save.per_turn(p.turns);
            let sum =
                p.load.mean() + p.engine.mean() + save + p.view_json.mean() + p.rest_json.mean();
            println!(
                "{:>9} | {:>13} {:>13} {:>13} {:>13} {:>13} | {:>7.3} {:>8.3}",
                r.size,
                cell(&p.load),
                cell(&p.engine),
                format!("{save:.3} ({}×)", p.save.0.len()),
                cell(&p.view_json),
                cell(&p.rest_json),
                sum,
                r.compact.mean() - sum,
            );
        }
        for r in http {
            println!(
                "  {:>7} events: the view held {:.0} events; {:.1} were read per call",
                r.size,
                r.phases.view_events_count.get(),
                r.phases.view_events_read.get()
            );
        }
    }

    println!();
    println!("Goals:");
    let every = |ok: bool| if ok { "met" } else { "MISSED" };
    let worst_in_process = in_process
        .iter()
        .map(|r| r.engine.p50())
        .fold(0.0, f64::max);
    println!(
        "  in-process p50 < 0.5 ms at every size: {} (worst p50 {:.3} ms; worst p99 {:.3} ms)",
        every(worst_in_process < 0.5),
        worst_in_process,
        in_process
            .iter()
            .map(|r| r.engine.p99())
            .fold(0.0, f64::max)
    );
    if !http.is_empty() {
        let worst_http = http.iter().map(|r| r.compact.p50()).fold(0.0, f64::max);
        println!(
            "  HTTP on PostgreSQL p50 < 3 ms at every size: {} (worst p50 {:.3} ms)",
            every(worst_http < 3.0),
            worst_http
        );
    }
    let growth = |p50: &dyn Fn(usize) -> Option<f64>, what: &str| match (p50(1_000), p50(100_000)) {
        (Some(small), Some(large)) => println!(
            "  {what} growth 1,000 → 100,000 events < 1.5×: {} ({:.2}×)",
            every(large / small < 1.5),
            large / small
        ),
        _ => println!("  {what} growth 1,000 → 100,000 events: not measured (run both sizes)"),
    };
    growth(
        &|size| {
            in_process
                .iter()
                .find(|r| r.size == size)
                .map(|r| r.engine.p50())
        },
        "in-process p50",
    );
    if !http.is_empty() {
        growth(
            &|size| {
                http.iter()
                    .find(|r| r.size == size)
                    .map(|r| r.compact.p50())
            },
            "HTTP p50",
        );
    }
}

/// Runs the engine to its end as the service does, with the deterministic summary.
fn run_engine(input: EngineInput<'_>) -> Result<EngineOutput<'_>, engine::EngineError> {
    Ok(match engine::compact(input)? {
        engine::Step::Done(out) => out,
        engine::Step::Summarize(pending) => {
            let outcome = SummaryOutcome::deterministic(
                pending.request(),
                FallbackReason::NoneConfigured,
                None,
            );
            pending.resume(outcome)
        }
    })
}
