//! Every statement the PostgreSQL store runs is scoped to one session, or is one of the
//! cross-session statements docs/scaling.md lists: what running ctxd on a PostgreSQL
//! distributed by `session_id` (Citus) relies on. The statements are captured as the driver
//! logs them while a real service on a real server goes through every kind of request.
//!
//! A test binary of its own: it installs the process's tracing subscriber.

use std::str::FromStr;
use std::sync::{Arc, Mutex};

use ctxd::store::{PostgresStore, Store};
use ctxd::{app, AppState, Limits};
use serde_json::{json, Value};
use sqlx::postgres::PgConnectOptions;
use sqlx::{Connection, PgConnection};
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::Layer;

/// The statements the driver logged.
#[derive(Clone, Default)]
struct Statements(Arc<Mutex<Vec<String>>>);

struct StatementField(Option<String>);

impl Visit for StatementField {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "db.statement" {
            self.0 = Some(value.to_owned());
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "db.statement" && self.0.is_none() {
            self.0 = Some(format!("{value:?}"));
        }
    }
}

impl<S: tracing::Subscriber> Layer<S> for Statements {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        if event.metadata().target() != "sqlx::query" {
            return;
        }
        let mut field = StatementField(None);
        event.record(&mut field);
        if let Some(statement) = field.0 {
            let statement = statement.split_whitespace().collect::<Vec<_>>().join(" ");
            self.0.lock().unwrap().push(statement);
        }
    }
}

/// The statements that read or write across sessions, each named by what sets it apart, as
/// docs/scaling.md lists them.
const CROSS_SESSION: [(&str, &str); 4] = [
    ("the session list", "ORDER BY session_id DESC"),
    ("the session list by activity", "ORDER BY updated_at DESC"),
    ("retention", "WHERE updated_at < $1"),
    (
        "the summary jobs a replica claims",
        "FOR UPDATE SKIP LOCKED",
    ),
];

/// Whether `statement` reads or writes only the small tables every session shares (tenants and
/// API keys: reference tables on a distributed database).
fn on_reference_tables(statement: &str) -> bool {
    let shared = ["api_keys", "tenants"];
    let session_tables = [
        "sessions",
        "events",
        "compaction",
        "tool_calls",
        "summary_jobs",
    ];
    shared.iter().any(|t| statement.contains(t))
        && !session_tables.iter().any(|t| statement.contains(t))
}

/// Whether `statement` touches one session: it names `session_id` as an equality with a
/// parameter (SELECT, UPDATE, DELETE) or as a column it inserts.
fn scoped_to_one_session(statement: &str) -> bool {
    let upper = statement.to_uppercase();
    if upper.starts_with("INSERT") {
        let columns = statement.split(')').next().unwrap_or_default();
        return columns.contains("session_id");
    }
    statement.contains("session_id = $")
}

/// The migrations' and the driver's own statements, not the store's.
fn bookkeeping(statement: &str) -> bool {
    let upper = statement.to_uppercase();
    // A migration script starts with its comment; the driver logs some statements blank.
    statement.is_empty()
        || statement.starts_with("--")
        || statement.contains("_sqlx_migrations")
        || upper.starts_with("CREATE ")
        || upper.starts_with("ALTER ")
        || upper.starts_with("DROP ")
        || upper.starts_with("COMMENT ")
        || upper.starts_with("SET ")
        || upper.starts_with("SELECT PG_ADVISORY")
        || upper.starts_with("SELECT CURRENT_DATABASE")
        || upper.starts_with("BEGIN")
        || upper.starts_with("COMMIT")
        || upper.starts_with("ROLLBACK")
        || upper.starts_with("SAVEPOINT")
        || upper.starts_with("RELEASE")
        || upper.starts_with("DO ")
}

#[tokio::test]
async fn every_statement_is_scoped_to_one_session_or_documented() {
    let captured = Statements::default();
    let subscriber = tracing_subscriber::registry().with(captured.clone());
    tracing::subscriber::set_global_default(subscriber).expect("the only subscriber");

    let url = std::env::var("CTXD_TEST_DATABASE_URL").expect(
        "CTXD_TEST_DATABASE_URL is not set: run the suite with scripts/test, which starts a \
         throwaway PostgreSQL",
    );
    let schema = format!("s_{}", uuid::Uuid::now_v7().simple());
    let mut admin = PgConnection::connect(&url).await.unwrap();
    sqlx::query(&format!("CREATE SCHEMA {schema}"))
        .execute(&mut admin)
        .await
        .unwrap();
    let options = PgConnectOptions::from_str(&url)
        .unwrap()
        .options([("search_path", schema.as_str())]);
    let pool = PostgresStore::pool_options(4)
        .connect_with(options)
        .await
        .unwrap();
    let store: Arc<dyn Store> = Arc::new(PostgresStore::from_pool(pool));
    store.migrate().await.unwrap();

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let state = AppState::new(store.clone(), Limits::default());
    tokio::spawn(async move { axum::serve(listener, app(state)).await });
    // Requests carry an agent key, so key lookups are among the statements.
    let key = ctxd::auth::issue("default", ctxd::auth::KeyRole::Agent, "statements").unwrap();
    store.create_key(&key.stored).await.unwrap();
    let token = key.token.clone();
    let client = reqwest::Client::new();
    let call = |method: &'static str, path: String, body: Option<Value>| {
        let client = client.clone();
        let url = format!("{base}{path}");
        let token = token.clone();
        async move {
            let request = match method {
                "get" => client.get(url),
                "post" => client.post(url),
                _ => client.delete(url),
            };
            let request = match body {
                Some(body) => request.json(&body),
                None => request,
            }
            .bearer_auth(token);
            let response = request.send().await.unwrap();
            let status = response.status();
            let body: Value = response.json().await.unwrap_or(Value::Null);
            assert!(status.is_success(), "{method} {path}: {status} {body}");
            body
        }
    };

    // Every kind of request an agent and an operator make.
    let created = call(
        "post",
        "/sessions".into(),
        Some(
            json!({"metadata": {"team": "search"}, "config": {"context_window": 4000,
            "max_output_tokens": 400, "tokenizer": "chars4", "policy": "episodic"}}),
        ),
    )
    .await;
    let id = created["id"].as_str().unwrap().to_owned();
    let mut events = vec![json!({"type": "message", "role": "user", "content": "Read the logs."})];
    for i in 0..8 {
        events.push(json!({"type": "episode_start", "name": format!("look{i}"),
            "kind": "exploration"}));
        events.push(json!({"type": "message", "role": "assistant",
            "tool_calls": [{"id": format!("c{i}"), "name": "read", "arguments": {"path": "a"}}]}));
        events.push(
            json!({"id": format!("r{i}"), "type": "message", "role": "tool",
            "tool_call_id": format!("c{i}"), "content": "log line\n".repeat(200)}),
        );
        events.push(json!({"type": "episode_end", "name": format!("look{i}"),
            "conclusion": "nothing there"}));
    }
    call(
        "post",
        format!("/sessions/{id}/events"),
        Some(json!({"events": events})),
    )
    .await;
    call("get", format!("/sessions/{id}/events?limit=5"), None).await;
    call(
        "post",
        format!("/sessions/{id}/compact"),
        Some(json!({"format": "openai"})),
    )
    .await;
    let forced = call(
        "post",
        format!("/sessions/{id}/compact"),
        Some(json!({"mode": "force"})),
    )
    .await;
    call(
        "post",
        format!("/sessions/{id}/turn"),
        Some(json!({"format": "openai", "messages": [
            {"role": "user", "content": "Read the logs."}]})),
    )
    .await;
    call(
        "post",
        format!("/sessions/{id}/condense"),
        Some(json!({"milestone": "looked everywhere", "completed_work": ["read the logs"]})),
    )
    .await;
    call(
        "post",
        format!("/sessions/{id}/usage"),
        Some(json!({"compaction_id": forced["record"]["id"], "input_tokens": 900})),
    )
    .await;
    call("get", format!("/sessions/{id}/context?limit=10"), None).await;
    call("get", format!("/sessions/{id}/compactions"), None).await;
    call("get", format!("/sessions/{id}/observations/r1"), None).await;
    call(
        "post",
        format!("/sessions/{id}/recall"),
        Some(json!({"uri": "observation://3"})),
    )
    .await;
    call("get", format!("/sessions/{id}"), None).await;
    call("get", "/sessions?label=team=search".into(), None).await;
    call("get", "/sessions?sort=activity".into(), None).await;
    call("get", format!("/sessions/{id}/view?format=anthropic"), None).await;
    call("get", "/readyz".into(), None).await;
    ctxd::retention::sweep(store.as_ref(), std::time::Duration::from_secs(3600), 10)
        .await
        .unwrap();
    call("delete", format!("/sessions/{id}"), None).await;

    let statements = captured.0.lock().unwrap().clone();
    assert!(
        statements.len() > 20,
        "the driver's statements were captured: {statements:?}"
    );
    let mut seen_cross = Vec::new();
    let mut seen_reference = false;
    let mut stray = Vec::new();
    for statement in &statements {
        if bookkeeping(statement) {
            continue;
        }
        if on_reference_tables(statement) {
            seen_reference = true;
            continue;
        }
        if let Some((name, _)) = CROSS_SESSION
            .iter()
            .find(|(_, mark)| statement.contains(mark))
        {
            seen_cross.push(*name);
            continue;
        }
        if !scoped_to_one_session(statement) {
            stray.push(statement.clone());
        }
    }
    assert!(
        stray.is_empty(),
        "statements neither scoped to one session nor documented as cross-session:\n{}",
        stray.join("\n")
    );
    // What the workload ran: the session list and retention (no summariser here, so no job
    // was claimed), and the store's statements of every kind.
    assert!(seen_reference, "no key was looked up");
    for name in [
        "the session list",
        "the session list by activity",
        "retention",
    ] {
        assert!(seen_cross.contains(&name), "{name} did not run");
    }
    for table in [
        "INSERT INTO events",
        "FROM compaction_states",
        "INSERT INTO compactions",
    ] {
        assert!(
            statements.iter().any(|s| s.contains(table)),
            "no statement with `{table}` was captured"
        );
    }
    sqlx::query(&format!("DROP SCHEMA {schema} CASCADE"))
        .execute(&mut admin)
        .await
        .unwrap();
}
