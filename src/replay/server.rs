//! The ctxd a replay talks to when none is given, and the HTTP calls it makes.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;

use crate::config::Limits;
use crate::store::{self, Store, StoreOptions};
use crate::{app, AppState};

/// A ctxd serving on a loopback port over a temporary SQLite file, removed when dropped.
pub(super) struct InProcess {
    pub(super) base: String,
    pub(super) store: Arc<dyn Store>,
    dir: PathBuf,
}

impl InProcess {
    pub(super) async fn start() -> Result<Self, String> {
        let dir = std::env::temp_dir().join(format!("ctxd-replay-{}", uuid::Uuid::now_v7()));
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let url = format!("sqlite://{}", dir.join("replay.db").display());
        let store = store::connect(&StoreOptions {
            url,
            max_connections: 4,
        })
        .await
        .map_err(|e| e.to_string())?;
        store.migrate().await.map_err(|e| e.to_string())?;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| e.to_string())?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        let state = AppState::new(Arc::clone(&store), Limits::default());
        tokio::spawn(async move { axum::serve(listener, app(state)).await });
        Ok(Self {
            base: format!("http://{addr}"),
            store,
            dir,
        })
    }
}

impl Drop for InProcess {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub(crate) async fn post(
    client: &reqwest::Client,
    url: &str,
    body: &Value,
) -> Result<Value, String> {
    answer(client.post(url).json(body).send().await).await
}

pub(crate) async fn get(client: &reqwest::Client, url: &str) -> Result<Value, String> {
    answer(client.get(url).send().await).await
}

async fn answer(reply: reqwest::Result<reqwest::Response>) -> Result<Value, String> {
    let reply = reply.map_err(|e| e.to_string())?;
    let status = reply.status();
    let body: Value = reply.json().await.map_err(|e| e.to_string())?;
    if status.is_success() {
        Ok(body)
    } else {
        Err(format!(
            "HTTP {status}: {}",
            body["detail"].as_str().unwrap_or_default()
        ))
    }
}
