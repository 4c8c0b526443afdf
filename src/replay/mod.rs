//! `ctxd replay`: recorded sessions replayed turn by turn through ctxd, as an agent would send
//! them, with what each policy costs and keeps.
//!
//! Before every assistant message the messages since the last turn go to `POST /turn` (OpenAI
//! chat, only the new messages) and the view that comes back is checked and measured: whether it
//! fits its budget and is a valid request; what it costs, and what it costs with prompt caching
//! (the part that repeats the previous view's prefix priced at `cache_price`); whether it extends
//! the previous view; which of the session's facts it still holds. Replays run against a ctxd
//! started in this process on a temporary SQLite file, or against a running one (`server`), as
//! a real client of the public API either way.

pub mod baselines;
pub mod chart;
pub mod facts;
pub mod input;
mod meter;
mod report;
pub mod synth;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{json, Value};

use crate::config::Limits;
use crate::store::{self, StoreOptions};
use crate::tokens::Tokenizer;
use crate::{app, AppState};
use baselines::{message_tokens, Baseline, Bounder};
use facts::Facts;
use meter::Meter;
use report::total;
pub use report::{Report, SessionReport};

/// What to replay, and how.
#[derive(Debug, Clone)]
pub struct Options {
    pub files: Vec<PathBuf>,
    /// A running ctxd; None starts one in this process on a temporary SQLite file.
    pub server: Option<String>,
    pub window: u32,
    pub reserved_output: u32,
    pub tokenizer: Tokenizer,
    /// The price of a cached input token, as a share of an uncached one.
    pub cache_price: f64,
    /// Also measure the baselines (see [`baselines`]) on the same history.
    pub compare: bool,
    /// Session settings merged over the window, reserved output and tokenizer.
    pub config: serde_json::Map<String, Value>,
    /// Facts planted in the sessions (`ctxd synth --facts`), looked for in every view.
    pub planted: Vec<String>,
}

/// Replays every file of `options`.
pub async fn run(options: &Options) -> Result<Report, String> {
    let (base, _server) = match &options.server {
        Some(url) => (url.trim_end_matches('/').to_owned(), None),
        None => {
            let server = InProcess::start().await?;
            (server.base.clone(), Some(server))
        }
    };
    let client = reqwest::Client::new();
    let mut report = Report::default();
    let mut baselines: BTreeMap<&str, Vec<SessionReport>> = BTreeMap::new();
    for file in &options.files {
        let name = file.display().to_string();
        let text = std::fs::read_to_string(file).map_err(|e| format!("{name}: {e}"))?;
        let messages = input::read(&name, &text)?;
        let short = file
            .file_name()
            .map_or(name.clone(), |n| n.to_string_lossy().into_owned());
        let replayed = replay(&client, &base, options, &short, &messages).await;
        report.sessions.push(replayed.ctxd);
        for (baseline, session) in replayed.baselines {
            baselines.entry(baseline.name()).or_default().push(session);
        }
    }
    report.total = total(&report.sessions);
    report.baselines = baselines
        .into_iter()
        .map(|(name, sessions)| (name.to_owned(), total(&sessions)))
        .collect();
    Ok(report)
}

/// A ctxd serving on a loopback port over a temporary SQLite file, removed when dropped.
struct InProcess {
    base: String,
    dir: PathBuf,
}

impl InProcess {
    async fn start() -> Result<Self, String> {
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
            dir,
        })
    }
}

impl Drop for InProcess {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A session's replay as it goes: ctxd's views, and each baseline's from the same history.
struct Replay<'o> {
    options: &'o Options,
    facts: Facts,
    history: Vec<Value>,
    ctxd: Meter,
    baselines: Vec<(Bounder, Meter)>,
}

/// What replaying one session showed: ctxd's figures, and each baseline's.
struct Replayed {
    ctxd: SessionReport,
    baselines: Vec<(Baseline, SessionReport)>,
}

async fn replay(
    client: &reqwest::Client,
    base: &str,
    options: &Options,
    name: &str,
    messages: &[Value],
) -> Replayed {
    let baselines = if options.compare {
        Baseline::ALL.to_vec()
    } else {
        Vec::new()
    };
    let mut run = Replay {
        options,
        facts: Facts {
            planted: options.planted.iter().cloned().collect(),
            ..Facts::default()
        },
        history: Vec::with_capacity(messages.len()),
        ctxd: Meter::new(name, messages.len()),
        baselines: baselines
            .into_iter()
            .map(|b| (Bounder::new(b), Meter::new(name, messages.len())))
            .collect(),
    };
    let mut settings = json!({"context_window": options.window,
        "max_output_tokens": options.reserved_output, "tokenizer": options.tokenizer});
    if let Value::Object(map) = &mut settings {
        map.extend(options.config.clone());
    }
    let config = json!({ "config": settings });
    let session = match post(client, &format!("{base}/sessions"), &config).await {
        Ok(body) => body["id"].as_str().unwrap_or_default().to_owned(),
        Err(e) => {
            run.ctxd
                .report
                .errors
                .push(format!("creating the session: {e}"));
            return run.finish();
        }
    };
    let url = format!("{base}/sessions/{session}/turn");
    // Before every assistant message, the messages since the last turn; then what is left.
    let mut pending = 0;
    for (index, message) in messages.iter().enumerate() {
        if message["role"] == "assistant" && pending > 0 {
            if let Err(e) = run.turn(client, &url, pending).await {
                run.ctxd
                    .report
                    .errors
                    .push(format!("the turn before message {index}: {e}"));
                break;
            }
            pending = 0;
        }
        run.facts.learn(message);
        run.history.push(message.clone());
        pending += 1;
    }
    if pending > 0 && run.ctxd.report.errors.is_empty() {
        if let Err(e) = run.turn(client, &url, pending).await {
            run.ctxd.report.errors.push(format!("the last turn: {e}"));
        }
    }
    let _ = client
        .delete(format!("{base}/sessions/{session}"))
        .send()
        .await;
    run.finish()
}

impl Replay<'_> {
    /// Sends the last `new` messages of the history as a turn and measures the view that comes
    /// back, and each baseline's view of the same history.
    async fn turn(
        &mut self,
        client: &reqwest::Client,
        url: &str,
        new: usize,
    ) -> Result<(), String> {
        let new = &self.history[self.history.len() - new..];
        let answer = post(client, url, &json!({"format": "openai", "messages": new})).await?;
        let (record, view) = (&answer["record"], &answer["view"]);
        let sent = record["input_tokens_estimate"].as_i64().unwrap_or(0);
        let used = record["tokens_after"].as_f64().unwrap_or(0.0);
        let budget = record["budget"].as_f64().unwrap_or(1.0);
        let acted =
            (record["acted"] == true).then(|| record["tier"].as_str().unwrap_or("?").to_owned());
        if let Some(tier) = &acted {
            *self
                .ctxd
                .report
                .compactions
                .entry(tier.clone())
                .or_default() += 1;
            self.ctxd
                .latencies
                .push(record["duration_ms"].as_f64().unwrap_or_default());
        }
        self.ctxd.report.summarizer_calls += record["summarizer"]["attempts"].as_i64().unwrap_or(0);
        let messages: Vec<Value> = view["messages"].as_array().cloned().unwrap_or_default();
        self.ctxd.view(
            messages,
            sent,
            used,
            budget,
            acted,
            &self.facts,
            self.options,
        );

        let options = self.options;
        let room = i64::from(options.window) - i64::from(options.reserved_output);
        for (bounder, meter) in &mut self.baselines {
            let view = bounder.view(&self.history, room, options.tokenizer);
            let sent: i64 = view
                .iter()
                .map(|m| message_tokens(m, options.tokenizer))
                .sum();
            let used = (sent + i64::from(options.reserved_output)) as f64;
            let window = f64::from(options.window);
            meter.view(view, sent, used, window, None, &self.facts, options);
        }
        Ok(())
    }

    fn finish(self) -> Replayed {
        Replayed {
            ctxd: self.ctxd.finish(),
            baselines: self
                .baselines
                .into_iter()
                .map(|(bounder, meter)| (bounder.baseline, meter.finish()))
                .collect(),
        }
    }
}

async fn post(client: &reqwest::Client, url: &str, body: &Value) -> Result<Value, String> {
    let reply = client
        .post(url)
        .json(body)
        .send()
        .await
        .map_err(|e| e.to_string())?;
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
