//! `ctxd replay`: recorded sessions replayed turn by turn through ctxd, as an agent would send
//! them, with what each policy costs and keeps.
//!
//! Before every assistant message the messages since the last turn go to `POST /turn` (OpenAI
//! chat, only the new messages, with the tool schemas) and the view that comes back is checked
//! and measured: whether it fits its budget; whether it is a valid request in every provider
//! format (ctxd's validators, and the providers' SDKs when a Python with them is given); whether
//! every item of the session is shown, referenced or in a compaction record; what it costs, and
//! what it costs with prompt caching (the part that repeats the previous view's prefix priced
//! at `cache_price`); whether it extends the previous view; which of the session's facts it
//! still holds. Replays run against a ctxd started in this process on a temporary SQLite file,
//! or against a running one (`server`), as a real client of the public API either way.

pub mod baselines;
pub mod chart;
pub mod facts;
mod hidden;
pub mod input;
mod membership;
mod meter;
mod providers;
mod report;
mod server;
mod session;
pub mod synth;

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::domain::session::Policy;
use crate::engine::render::Format;
use crate::tokens::Tokenizer;
use membership::Inspector;
use providers::ProviderCheck;
use report::total;
pub use report::{Report, SessionReport};
use server::InProcess;
pub(crate) use server::{get, post};

/// What to replay, and how.
#[derive(Debug, Clone)]
pub struct Options {
    pub files: Vec<PathBuf>,
    /// A running ctxd; None starts one in this process on a temporary SQLite file.
    pub server: Option<String>,
    pub window: u32,
    pub reserved_output: u32,
    pub tokenizer: Tokenizer,
    /// The ctxd policy of every replayed session.
    pub policy: Policy,
    /// The format of the view measured (cost, prefix, facts); every provider format is checked.
    pub format: Format,
    /// Tool schemas sent with every turn: they count against the window.
    pub tools: Vec<Value>,
    /// A Python with the official `openai` and `anthropic` SDKs to check every view against;
    /// None skips that check (and the report says so).
    pub provider_python: Option<PathBuf>,
    /// The price of a cached input token, as a share of an uncached one.
    pub cache_price: f64,
    /// Also measure the baselines (see [`baselines`]) on the same history.
    pub compare: bool,
    /// Leave each replayed session on the server rather than deleting it.
    pub keep_sessions: bool,
    /// Session settings merged over the window, reserved output, tokenizer and policy.
    pub config: serde_json::Map<String, Value>,
    /// Facts planted in the sessions (`ctxd synth --facts`), looked for in every view of a
    /// session that has no facts file of its own beside it (`NAME.facts.json` for `NAME.jsonl`).
    pub planted: Vec<String>,
}

/// Replays every file of `options`.
pub async fn run(options: &Options) -> Result<Report, String> {
    let client = reqwest::Client::new();
    let (base, inspector, _server) = match &options.server {
        Some(url) => {
            let base = url.trim_end_matches('/').to_owned();
            let inspector = Inspector::Http {
                client: client.clone(),
                base: base.clone(),
            };
            (base, inspector, None)
        }
        None => {
            let server = InProcess::start().await?;
            let inspector = Inspector::Store(server.store.clone());
            (server.base.clone(), inspector, Some(server))
        }
    };
    let mut check = match &options.provider_python {
        Some(python) => Some(ProviderCheck::start(python).await?),
        None => None,
    };
    let mut report = Report {
        policy: name(&options.policy),
        format: name(&options.format),
        provider_check: match &check {
            Some(check) => format!("every view in every format against {}", check.sdks),
            None => "skipped: no --provider-python (or CTXD_PROVIDER_PYTHON) with the \
                     official openai and anthropic SDKs"
                .to_owned(),
        },
        ..Report::default()
    };
    let mut baselines: BTreeMap<String, Vec<SessionReport>> = BTreeMap::new();
    for file in &options.files {
        let name = file.display().to_string();
        let text = std::fs::read_to_string(file).map_err(|e| format!("{name}: {e}"))?;
        let messages = input::read(&name, &text)?;
        let beside = file.with_extension("facts.json");
        let planted = if beside.is_file() {
            read_facts(&beside)?
        } else {
            options.planted.clone()
        };
        let short = file
            .file_name()
            .map_or(name.clone(), |n| n.to_string_lossy().into_owned());
        let context = session::Context {
            client: &client,
            base: &base,
            inspector: &inspector,
            check: check.as_mut(),
            options,
        };
        let replayed = session::replay(context, &short, &messages, planted).await;
        report.sessions.push(replayed.ctxd);
        for (baseline, session) in replayed.baselines {
            baselines
                .entry(baseline.name().to_owned())
                .or_default()
                .push(session);
        }
    }
    report.total = total(&report.sessions);
    report.baselines = baselines
        .iter()
        .map(|(name, sessions)| (name.clone(), total(sessions)))
        .collect();
    report.outgrowing = report::Outgrowing::pool(&report.sessions, &baselines);
    report.baseline_sessions = baselines;
    Ok(report)
}

/// The facts of a `ctxd synth --facts` file (`{"facts": ["..."]}`).
pub fn read_facts(path: &std::path::Path) -> Result<Vec<String>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let value: Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_value(value["facts"].clone())
        .map_err(|_| format!("{}: expected {{\"facts\": [\"...\"]}}", path.display()))
}

/// The serde name of a unit enum value.
fn name<T: Serialize>(value: &T) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// The values the API accepts for `T` (a unit enum), as its OpenAPI schema lists them.
pub fn choices<T: utoipa::PartialSchema>() -> Vec<String> {
    let schema = serde_json::to_value(T::schema()).unwrap_or_default();
    schema["enum"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect()
}

/// `text` as a value of `T` (a unit enum), or an error that names `what` and lists the
/// choices.
pub fn parse_choice<T: utoipa::PartialSchema + DeserializeOwned>(
    what: &str,
    text: &str,
) -> Result<T, String> {
    serde_json::from_value(Value::String(text.to_owned()))
        .map_err(|_| format!("unknown {what} `{text}`: {}", choices::<T>().join(", ")))
}
