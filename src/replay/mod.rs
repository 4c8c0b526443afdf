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
pub mod synth;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use serde::Serialize;
use serde_json::{json, Value};

use crate::config::Limits;
use crate::engine::validate::validate_openai;
use crate::store::{self, StoreOptions};
use crate::tokens::Tokenizer;
use crate::{app, AppState};
use baselines::{message_tokens, Baseline, Bounder};
use facts::{view_text, Facts, Kept};

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
    /// Facts planted in the sessions (`ctxd synth --facts`), looked for in every view.
    pub planted: Vec<String>,
}

impl Report {
    /// The chart of the totals: ctxd's policy, then each baseline.
    pub fn chart(&self, title: &str) -> String {
        let mut series = vec![("progressive".to_owned(), self.total.series.clone())];
        series.extend(
            self.baselines
                .iter()
                .map(|(name, r)| (name.clone(), r.series.clone())),
        );
        chart::svg(title, &series)
    }
}

/// What one session's replay (or all of them, added up) showed.
#[derive(Debug, Default, Clone, Serialize)]
pub struct SessionReport {
    pub session: String,
    pub messages: usize,
    pub turns: usize,
    /// Must be 0: views over their budget.
    pub over_budget: usize,
    /// Must be 0: views that are not a valid request.
    pub invalid_views: usize,
    /// Must be 0: requests ctxd refused or failed.
    pub errors: Vec<String>,
    /// Input tokens of every view sent (messages and tools), as ctxd counts them.
    pub tokens_sent: i64,
    /// The same with the prefix each view repeats from the previous priced at the cache price.
    pub effective_input_cost: f64,
    /// The share of turns after the first whose view extends the previous one unchanged.
    pub prefix_stability: f64,
    /// The share of the tokens sent that repeat the previous view's prefix.
    pub prefix_reused: f64,
    /// Facts held by the last view, by kind (kept, of).
    pub facts_end: Kept,
    /// The share of facts held at the end, and on average over the turns.
    pub facts_kept_end: f64,
    pub facts_kept_mean: f64,
    /// Compactions that acted, by tier.
    pub compactions: BTreeMap<String, usize>,
    pub summarizer_calls: i64,
    pub peak_utilization: f64,
    pub mean_utilization: f64,
    pub compaction_ms_p50: f64,
    pub compaction_ms_p99: f64,
    /// Turn by turn, for the chart (sessions one after another in a total).
    #[serde(skip)]
    pub series: Vec<chart::Point>,
}

impl SessionReport {
    /// The figures that must be 0.
    pub fn failures(&self) -> usize {
        self.over_budget + self.invalid_views + self.errors.len()
    }
}

/// Every session's report and their total.
#[derive(Debug, Default, Clone, Serialize)]
pub struct Report {
    pub sessions: Vec<SessionReport>,
    pub total: SessionReport,
    /// With `compare`: each baseline's total over the same sessions.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub baselines: BTreeMap<String, SessionReport>,
}

impl Report {
    /// What must be 0: ctxd's views over budget, any invalid view, any failed request (a
    /// baseline without compaction is over budget by design).
    pub fn failures(&self) -> usize {
        self.total.failures()
            + self
                .baselines
                .values()
                .map(|b| b.invalid_views)
                .sum::<usize>()
    }

    /// The report as a text table, a session a row and the total last.
    pub fn table(&self) -> String {
        let mut out = format!(
            "{:<48} {:>6} {:>11} {:>11} {:>7} {:>7} {:>6} {:>6} {:>6} {:>5}\n",
            "session",
            "turns",
            "tokens",
            "effective",
            "prefix",
            "facts",
            "acted",
            "peak",
            "p99ms",
            "fail"
        );
        let baselines = self
            .baselines
            .iter()
            .map(|(name, r)| (format!("  {name}"), r));
        let rows = self
            .sessions
            .iter()
            .chain([&self.total])
            .map(|r| (r.session.clone(), r))
            .chain(baselines);
        for (name, r) in rows {
            let name: String = name.chars().take(48).collect();
            out.push_str(&format!(
                "{:<48} {:>6} {:>11} {:>11.0} {:>7.2} {:>7.2} {:>6} {:>6.2} {:>6.1} {:>5}\n",
                name,
                r.turns,
                r.tokens_sent,
                r.effective_input_cost,
                r.prefix_stability,
                r.facts_kept_end,
                r.compactions.values().sum::<usize>(),
                r.peak_utilization,
                r.compaction_ms_p99,
                r.failures()
            ));
        }
        out
    }
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

/// The measures of one way of bounding a session (ctxd's policy or a baseline), turn by turn.
struct Meter {
    report: SessionReport,
    /// The previous view's messages.
    previous: Option<Vec<Value>>,
    extends: usize,
    reused: f64,
    kept_sum: f64,
    utilization: Vec<f64>,
    latencies: Vec<f64>,
}

impl Meter {
    fn new(session: &str, messages: usize) -> Self {
        Self {
            report: SessionReport {
                session: session.to_owned(),
                messages,
                ..SessionReport::default()
            },
            previous: None,
            extends: 0,
            reused: 0.0,
            kept_sum: 0.0,
            utilization: Vec::new(),
            latencies: Vec::new(),
        }
    }

    /// Measures a view of `messages` that sends `sent` tokens, `used` of the `budget`, made
    /// by a compaction at `tier` when one acted.
    #[allow(clippy::too_many_arguments)]
    fn view(
        &mut self,
        messages: Vec<Value>,
        sent: i64,
        used: f64,
        budget: f64,
        tier: Option<String>,
        facts: &Facts,
        options: &Options,
    ) {
        let report = &mut self.report;
        report.turns += 1;
        report.tokens_sent += sent;
        if used > budget {
            report.over_budget += 1;
        }
        let view = json!({ "messages": messages });
        if let Err(e) = validate_openai(&view) {
            report.invalid_views += 1;
            report
                .errors
                .push(format!("an invalid view at turn {}: {e}", report.turns));
        }
        self.utilization.push(used / budget.max(1.0));
        // The prefix this view repeats from the previous one, priced as cached.
        match &self.previous {
            Some(before) => {
                let common = before
                    .iter()
                    .zip(&messages)
                    .take_while(|(a, b)| a == b)
                    .count();
                if common == before.len() {
                    self.extends += 1;
                }
                let cached = token_share(options.tokenizer, &messages, common) * sent as f64;
                self.reused += cached;
                report.effective_input_cost +=
                    cached * options.cache_price + (sent as f64 - cached);
            }
            None => report.effective_input_cost += sent as f64,
        }
        let kept = facts.kept_in(&view_text(&view));
        self.kept_sum += kept.share();
        report.facts_end = kept;
        report.series.push(chart::Point {
            utilization: used / budget.max(1.0),
            cumulative_cost: report.effective_input_cost,
            tier,
        });
        self.previous = Some(messages);
    }

    fn finish(mut self) -> SessionReport {
        let r = &mut self.report;
        if r.turns > 1 {
            r.prefix_stability = self.extends as f64 / (r.turns - 1) as f64;
        }
        if r.tokens_sent > 0 {
            r.prefix_reused = self.reused / r.tokens_sent as f64;
        }
        if r.turns > 0 {
            r.facts_kept_mean = self.kept_sum / r.turns as f64;
            r.mean_utilization = self.utilization.iter().sum::<f64>() / r.turns as f64;
        }
        r.facts_kept_end = r.facts_end.share();
        r.peak_utilization = self.utilization.iter().copied().fold(0.0, f64::max);
        (r.compaction_ms_p50, r.compaction_ms_p99) = percentiles(&mut self.latencies);
        self.report
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
    let config = json!({"config": {"context_window": options.window,
        "max_output_tokens": options.reserved_output, "tokenizer": options.tokenizer}});
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

/// The share of `messages`' tokens in their first `common`.
fn token_share(tokenizer: Tokenizer, messages: &[Value], common: usize) -> f64 {
    let counts: Vec<i64> = messages
        .iter()
        .map(|m| tokenizer.count(&m.to_string()))
        .collect();
    let all: i64 = counts.iter().sum();
    if all == 0 {
        return 0.0;
    }
    counts[..common.min(counts.len())].iter().sum::<i64>() as f64 / all as f64
}

fn percentiles(samples: &mut [f64]) -> (f64, f64) {
    if samples.is_empty() {
        return (0.0, 0.0);
    }
    samples.sort_by(f64::total_cmp);
    let at =
        |q: f64| samples[((samples.len() as f64 * q).ceil() as usize).clamp(1, samples.len()) - 1];
    (at(0.5), at(0.99))
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

/// The sessions added up: sums, the worst peaks, turn-weighted shares.
fn total(sessions: &[SessionReport]) -> SessionReport {
    let mut t = SessionReport {
        session: "TOTAL".into(),
        ..SessionReport::default()
    };
    let turns: usize = sessions.iter().map(|s| s.turns).sum();
    let weight = |f: fn(&SessionReport) -> f64| {
        if turns == 0 {
            0.0
        } else {
            sessions.iter().map(|s| f(s) * s.turns as f64).sum::<f64>() / turns as f64
        }
    };
    for s in sessions {
        t.messages += s.messages;
        t.turns += s.turns;
        t.over_budget += s.over_budget;
        t.invalid_views += s.invalid_views;
        t.errors
            .extend(s.errors.iter().map(|e| format!("{}: {e}", s.session)));
        t.tokens_sent += s.tokens_sent;
        t.effective_input_cost += s.effective_input_cost;
        t.summarizer_calls += s.summarizer_calls;
        for (tier, n) in &s.compactions {
            *t.compactions.entry(tier.clone()).or_default() += n;
        }
        let before = t.series.last().map_or(0.0, |p| p.cumulative_cost);
        t.series.extend(s.series.iter().map(|p| chart::Point {
            cumulative_cost: before + p.cumulative_cost,
            ..p.clone()
        }));
        t.peak_utilization = t.peak_utilization.max(s.peak_utilization);
        t.compaction_ms_p99 = t.compaction_ms_p99.max(s.compaction_ms_p99);
        let k = &mut t.facts_end;
        k.paths = (
            k.paths.0 + s.facts_end.paths.0,
            k.paths.1 + s.facts_end.paths.1,
        );
        k.errors = (
            k.errors.0 + s.facts_end.errors.0,
            k.errors.1 + s.facts_end.errors.1,
        );
        k.requests = (
            k.requests.0 + s.facts_end.requests.0,
            k.requests.1 + s.facts_end.requests.1,
        );
        k.constraints = (
            k.constraints.0 + s.facts_end.constraints.0,
            k.constraints.1 + s.facts_end.constraints.1,
        );
        k.planted = (
            k.planted.0 + s.facts_end.planted.0,
            k.planted.1 + s.facts_end.planted.1,
        );
    }
    t.prefix_stability = weight(|s| s.prefix_stability);
    t.prefix_reused = if t.tokens_sent > 0 {
        sessions
            .iter()
            .map(|s| s.prefix_reused * s.tokens_sent as f64)
            .sum::<f64>()
            / t.tokens_sent as f64
    } else {
        0.0
    };
    t.facts_kept_end = t.facts_end.share();
    t.facts_kept_mean = weight(|s| s.facts_kept_mean);
    t.mean_utilization = weight(|s| s.mean_utilization);
    t.compaction_ms_p50 = weight(|s| s.compaction_ms_p50);
    t
}
