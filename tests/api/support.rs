//! A real ctxd on a loopback port, over a real database: a fresh SQLite file or a fresh schema
//! of the PostgreSQL server named by `CTXD_TEST_DATABASE_URL` (scripts/test starts one).

use std::sync::Arc;

use ctxd::store::{PostgresStore, SqliteStore, Store};
use ctxd::{app, AppState, Limits};
use reqwest::StatusCode;
use serde_json::{json, Value};
use sqlx::postgres::PgConnectOptions;
use sqlx::{Connection, PgConnection};
use std::str::FromStr;
use tempfile::TempDir;

#[derive(Debug, Clone, Copy)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// A store on its own database; the guard keeps an SQLite file alive.
pub struct TestStore {
    pub store: Arc<dyn Store>,
    /// Direct SQL access to the same database, to check what the store must refuse.
    pub raw: RawDb,
    _dir: Option<TempDir>,
    /// PostgreSQL: the test's schema, also its connections' application name.
    pub schema: Option<String>,
}

pub enum RawDb {
    Sqlite(sqlx::SqlitePool),
    Postgres(sqlx::PgPool),
}

impl RawDb {
    pub async fn execute(&self, sql: &str) -> Result<u64, sqlx::Error> {
        Ok(match self {
            Self::Sqlite(pool) => sqlx::query(sql).execute(pool).await?.rows_affected(),
            Self::Postgres(pool) => sqlx::query(sql).execute(pool).await?.rows_affected(),
        })
    }

    /// The one integer `sql` selects.
    pub async fn count(&self, sql: &str) -> i64 {
        match self {
            Self::Sqlite(pool) => sqlx::query_scalar(sql).fetch_one(pool).await,
            Self::Postgres(pool) => sqlx::query_scalar(sql).fetch_one(pool).await,
        }
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
    }
}

pub fn postgres_url() -> String {
    std::env::var("CTXD_TEST_DATABASE_URL").unwrap_or_else(|_| {
        panic!(
            "CTXD_TEST_DATABASE_URL is not set. Run the suite with `scripts/test`, which starts a \
             throwaway PostgreSQL, or set it to a scratch database: \
             CTXD_TEST_DATABASE_URL=postgres://USER:PASSWORD@HOST:PORT/DB cargo test"
        )
    })
}

impl TestStore {
    pub async fn new(backend: Backend) -> Self {
        match backend {
            Backend::Sqlite => {
                let dir = tempfile::tempdir().expect("temp dir");
                let url = format!("sqlite://{}", dir.path().join("ctxd.db").display());
                let store = SqliteStore::connect(&url, 4).await.expect("open sqlite");
                store.migrate().await.expect("migrate sqlite");
                let raw = sqlx::SqlitePool::connect(&url).await.expect("raw sqlite");
                Self {
                    store: Arc::new(store),
                    raw: RawDb::Sqlite(raw),
                    _dir: Some(dir),
                    schema: None,
                }
            }
            Backend::Postgres => {
                let url = postgres_url();
                // Each test gets its own schema: isolated, and far cheaper than a database.
                let schema = format!("t_{}", uuid::Uuid::now_v7().simple());
                let mut admin = PgConnection::connect(&url)
                    .await
                    .expect("connect to CTXD_TEST_DATABASE_URL");
                sqlx::query(&format!("CREATE SCHEMA {schema}"))
                    .execute(&mut admin)
                    .await
                    .expect("create test schema");
                admin.close().await.ok();
                // The pool settings ctxd runs with; the schema names its connections, so that
                // a test can terminate them.
                let options = PgConnectOptions::from_str(&url)
                    .expect("parse CTXD_TEST_DATABASE_URL")
                    .options([("search_path", schema.as_str())])
                    .application_name(&schema);
                let pool = PostgresStore::pool_options(12)
                    .connect_with(options)
                    .await
                    .expect("connect test pool");
                let store = PostgresStore::from_pool(pool.clone());
                store.migrate().await.expect("migrate postgres");
                Self {
                    store: Arc::new(store),
                    raw: RawDb::Postgres(pool),
                    _dir: None,
                    schema: Some(schema),
                }
            }
        }
    }
}

/// A running service and a client for it.
pub struct TestApp {
    pub base: String,
    pub client: reqwest::Client,
    pub store: Arc<dyn Store>,
    _store: TestStore,
}

/// A response: status, headers and the JSON body (Null when empty).
pub struct Reply {
    pub status: StatusCode,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
}

impl TestApp {
    pub async fn spawn(backend: Backend) -> Self {
        Self::spawn_with(backend, Limits::default()).await
    }

    pub async fn spawn_with(backend: Backend, limits: Limits) -> Self {
        let test_store = TestStore::new(backend).await;
        let state = AppState::new(test_store.store.clone(), limits);
        Self::serve(test_store, state).await
    }

    /// A service whose summaries come from `summarizer`.
    pub async fn spawn_with_summarizer(
        backend: Backend,
        summarizer: Arc<dyn ctxd::summarize::Summarizer>,
    ) -> Self {
        let test_store = TestStore::new(backend).await;
        let mut state = AppState::new(test_store.store.clone(), Limits::default());
        state.summarizer = Some(summarizer);
        Self::serve(test_store, state).await
    }

    /// A service whose summariser is an OpenAI-compatible model at `base_url` (`fake-model`,
    /// 500 output tokens, a 128K context), called with `api_key` within `timeout`.
    pub async fn spawn_with_openai_model(
        backend: Backend,
        base_url: String,
        api_key: Option<&str>,
        timeout: std::time::Duration,
    ) -> Self {
        use ctxd::summarize::guard::CallLimits;
        use ctxd::summarize::llm::{self, LlmConfig, LlmKind};
        let summarizer = llm::build(LlmConfig {
            kind: LlmKind::OpenAi,
            base_url,
            model: "fake-model".into(),
            api_key: api_key.map(str::to_owned),
            timeout,
            max_output_tokens: 500,
            context_tokens: 128_000,
            limits: CallLimits::default(),
        });
        Self::spawn_with_summarizer(backend, summarizer).await
    }

    async fn serve(test_store: TestStore, state: AppState) -> Self {
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
            store: test_store.store.clone(),
            _store: test_store,
        }
    }

    /// Direct SQL access to the service's database.
    pub fn raw(&self) -> &RawDb {
        &self._store.raw
    }

    /// PostgreSQL: terminates every server connection of this test's pool, as a database
    /// restart or an operator's `pg_terminate_backend` would. Returns how many it ended.
    pub async fn terminate_connections(&self) -> i64 {
        let schema = self._store.schema.as_deref().expect("a PostgreSQL test");
        let mut admin = PgConnection::connect(&postgres_url())
            .await
            .expect("admin connection");
        let ended: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE application_name = $1) AS ended",
        )
        .bind(schema)
        .fetch_one(&mut admin)
        .await
        .expect("terminate the test's connections");
        admin.close().await.ok();
        ended
    }

    /// Another replica of the service over the same database (its own memory, its own port).
    pub async fn replica(&self) -> String {
        let state = AppState::new(self.store.clone(), Limits::default());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            axum::serve(listener, app(state)).await.expect("serve");
        });
        format!("http://{addr}")
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    pub async fn send(&self, request: reqwest::RequestBuilder) -> Reply {
        let response = request.send().await.expect("request");
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = response.bytes().await.expect("body");
        let text = headers
            .get("content-type")
            .is_some_and(|v| v.as_bytes().starts_with(b"text/plain"));
        let body = if bytes.is_empty() {
            Value::Null
        } else if text {
            // Plain text (the metrics) is a JSON string, as the document's schema says.
            Value::String(String::from_utf8_lossy(&bytes).into_owned())
        } else {
            serde_json::from_slice(&bytes).unwrap_or_else(|e| {
                panic!(
                    "{status}: body is not JSON ({e}): {}",
                    String::from_utf8_lossy(&bytes)
                )
            })
        };
        if status.is_client_error() || status.is_server_error() {
            assert_problem(status, &headers, &body);
        }
        Reply {
            status,
            headers,
            body,
        }
    }

    pub async fn get(&self, path: &str) -> Reply {
        self.send(self.client.get(self.url(path))).await
    }

    pub async fn post(&self, path: &str, body: &Value) -> Reply {
        self.send(self.client.post(self.url(path)).json(body)).await
    }

    pub async fn delete(&self, path: &str) -> Reply {
        self.send(self.client.delete(self.url(path))).await
    }

    /// Creates a session and returns its id.
    pub async fn create_session(&self, body: Value) -> String {
        let reply = self.post("/sessions", &body).await;
        assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
        reply.body["id"].as_str().expect("id").to_owned()
    }

    pub async fn append(&self, session: &str, events: Value) -> Reply {
        self.post(
            &format!("/sessions/{session}/events"),
            &json!({ "events": events }),
        )
        .await
    }

    /// Every event of the session, read page by page.
    pub async fn all_events(&self, session: &str) -> Vec<Value> {
        let mut events = Vec::new();
        let mut after = 0;
        loop {
            let page = self
                .get(&format!(
                    "/sessions/{session}/events?after_seq={after}&limit=1000"
                ))
                .await;
            assert_eq!(page.status, StatusCode::OK, "{}", page.body);
            events.extend(page.body["events"].as_array().expect("events").clone());
            match page.body["next_after_seq"].as_i64() {
                Some(next) => after = next,
                None => return events,
            }
        }
    }
}

/// Every error answer is a problem document with the request id.
pub fn assert_problem(status: StatusCode, headers: &reqwest::header::HeaderMap, body: &Value) {
    let content_type = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    assert_eq!(
        content_type, "application/problem+json",
        "{status} must be a problem document: {body}"
    );
    assert_eq!(body["status"], status.as_u16(), "{body}");
    for field in ["type", "title", "detail", "request_id"] {
        assert!(body[field].is_string(), "problem without {field}: {body}");
    }
    assert_eq!(
        headers.get("x-request-id").and_then(|v| v.to_str().ok()),
        body["request_id"].as_str(),
        "the problem carries the response's request id"
    );
}

/// Defines `mod $name { sqlite, postgres }`: the same test body on both backends.
#[macro_export]
macro_rules! on_both_backends {
    ($(#[$meta:meta])* async fn $name:ident($app:ident) $body:block) => {
        $(#[$meta])*
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            async fn run($app: $crate::support::TestApp) $body
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                run($crate::support::TestApp::spawn($crate::support::Backend::Sqlite).await).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                run($crate::support::TestApp::spawn($crate::support::Backend::Postgres).await).await
            }
        }
    };
}

/// Like `on_both_backends`, for tests of the store alone.
#[macro_export]
macro_rules! store_on_both_backends {
    ($(#[$meta:meta])* async fn $name:ident($store:ident) $body:block) => {
        $(#[$meta])*
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            async fn run($store: std::sync::Arc<dyn ctxd::store::Store>) $body
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                let s = $crate::support::TestStore::new($crate::support::Backend::Sqlite).await;
                run(s.store.clone()).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                let s = $crate::support::TestStore::new($crate::support::Backend::Postgres).await;
                run(s.store.clone()).await
            }
        }
    };
}
