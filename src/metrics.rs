//! What operators scrape at `GET /metrics`: the process's counters and histograms in the
//! Prometheus text format. One registry per process (every replica has its own); the values a
//! scrape reads at the moment (the view cache's bytes, the database pool) are set just before
//! it is rendered.

use std::sync::LazyLock;
use std::time::Duration;

use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts,
    Registry, TextEncoder,
};

use crate::domain::compaction::{CompactionRecord, SummarizerInfo};

/// Request latency buckets, in seconds: a compact call takes milliseconds, a summary seconds.
const LATENCY_BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 15.0,
];

pub struct Metrics {
    registry: Registry,
    requests: IntCounterVec,
    request_seconds: HistogramVec,
    appends: IntCounter,
    events: IntCounter,
    compactions: IntCounterVec,
    summarizer_calls: IntCounterVec,
    summarizer_seconds: HistogramVec,
    cache_lookups: IntCounterVec,
    cache_bytes: IntGauge,
    pool: IntGaugeVec,
    jobs: IntCounterVec,
    jobs_running: IntGauge,
}

/// The process's metrics.
pub static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);

impl Metrics {
    fn new() -> Self {
        let registry = Registry::new_custom(Some("ctxd".into()), None).expect("a valid prefix");
        let requests = IntCounterVec::new(
            Opts::new(
                "http_requests_total",
                "HTTP requests answered, by route and status",
            ),
            &["method", "route", "status"],
        )
        .expect("valid metric");
        let request_seconds = HistogramVec::new(
            HistogramOpts::new("http_request_duration_seconds", "HTTP request latency")
                .buckets(LATENCY_BUCKETS.to_vec()),
            &["method", "route"],
        )
        .expect("valid metric");
        let appends = IntCounter::new("appends_total", "Append batches stored").expect("valid");
        let events = IntCounter::new("events_appended_total", "Events stored (replays aside)")
            .expect("valid metric");
        let compactions = IntCounterVec::new(
            Opts::new(
                "compactions_total",
                "Compaction calls, by policy, tier, trigger and whether they acted",
            ),
            &["policy", "tier", "trigger", "acted"],
        )
        .expect("valid metric");
        let summarizer_calls = IntCounterVec::new(
            Opts::new(
                "summarizer_outcomes_total",
                "Summaries made, by summariser kind, outcome and fallback reason",
            ),
            &["kind", "outcome", "fallback_reason"],
        )
        .expect("valid metric");
        let summarizer_seconds = HistogramVec::new(
            HistogramOpts::new("summarizer_latency_seconds", "Summariser latency")
                .buckets(LATENCY_BUCKETS.to_vec()),
            &["kind"],
        )
        .expect("valid metric");
        let cache_lookups = IntCounterVec::new(
            Opts::new("view_cache_lookups_total", "View cache lookups, by result"),
            &["result"],
        )
        .expect("valid metric");
        let cache_bytes =
            IntGauge::new("view_cache_bytes", "Bytes the view cache holds").expect("valid metric");
        let pool = IntGaugeVec::new(
            Opts::new("db_pool_connections", "Database pool connections, by state"),
            &["state"],
        )
        .expect("valid metric");
        let jobs = IntCounterVec::new(
            Opts::new(
                "summary_jobs_total",
                "Background summary jobs: queued by this replica's compactions, and those its \
                 worker finished, by result",
            ),
            &["event"],
        )
        .expect("valid metric");
        let jobs_running = IntGauge::new(
            "summary_jobs_running",
            "Background summary jobs this replica's worker is running",
        )
        .expect("valid metric");
        for collector in [
            Box::new(requests.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(request_seconds.clone()),
            Box::new(appends.clone()),
            Box::new(events.clone()),
            Box::new(compactions.clone()),
            Box::new(summarizer_calls.clone()),
            Box::new(summarizer_seconds.clone()),
            Box::new(cache_lookups.clone()),
            Box::new(cache_bytes.clone()),
            Box::new(pool.clone()),
            Box::new(jobs.clone()),
            Box::new(jobs_running.clone()),
        ] {
            registry.register(collector).expect("each metric once");
        }
        Self {
            registry,
            requests,
            request_seconds,
            appends,
            events,
            compactions,
            summarizer_calls,
            summarizer_seconds,
            cache_lookups,
            cache_bytes,
            pool,
            jobs,
            jobs_running,
        }
    }

    /// A background summary job: `queued`, or finished `prepared` or `failed`.
    pub fn job(&self, event: &str) {
        self.jobs.with_label_values(&[event]).inc();
    }

    /// A job started (+1) or ended (-1) on this replica.
    pub fn job_running(&self, delta: i64) {
        self.jobs_running.add(delta);
    }

    /// A request answered: `route` is its route template (never the raw path, whose ids would
    /// make a series per session).
    pub fn request(&self, method: &str, route: &str, status: u16, elapsed: Duration) {
        self.requests
            .with_label_values(&[method, route, &status.to_string()])
            .inc();
        self.request_seconds
            .with_label_values(&[method, route])
            .observe(elapsed.as_secs_f64());
    }

    /// An append batch stored `new` events.
    pub fn append(&self, new: usize) {
        self.appends.inc();
        self.events.inc_by(new as u64);
    }

    /// A compaction call's record, and its summariser's outcome when it asked one.
    pub fn compaction(&self, record: &CompactionRecord) {
        use erased::Named;
        let acted = if record.acted { "true" } else { "false" };
        self.compactions
            .with_label_values(&[
                record.policy.name().as_str(),
                record.tier.name().as_str(),
                record.trigger.name().as_str(),
                acted,
            ])
            .inc();
        if let Some(info) = &record.summarizer {
            self.summarizer(info);
        }
    }

    /// A summariser's outcome and latency.
    pub fn summarizer(&self, info: &SummarizerInfo) {
        let reason = info
            .fallback_reason
            .map_or_else(String::new, |r| erased::Named::name(&r));
        self.summarizer_calls
            .with_label_values(&[&info.kind, &erased::Named::name(&info.outcome), &reason])
            .inc();
        if info.kind != "deterministic" {
            self.summarizer_seconds
                .with_label_values(&[&info.kind])
                .observe(info.latency_ms / 1e3);
        }
    }

    /// A view cache lookup.
    pub fn cache_lookup(&self, hit: bool) {
        let result = if hit { "hit" } else { "miss" };
        self.cache_lookups.with_label_values(&[result]).inc();
    }

    pub fn cache_bytes(&self, bytes: usize) {
        self.cache_bytes.set(bytes as i64);
    }

    /// The database pool as it stands: connections open and idle.
    pub fn pool(&self, open: u32, idle: usize) {
        self.pool.with_label_values(&["open"]).set(i64::from(open));
        self.pool.with_label_values(&["idle"]).set(idle as i64);
    }

    /// Everything, in the Prometheus text format.
    pub fn render(&self) -> String {
        let mut out = Vec::new();
        // Encoding into memory cannot fail for these metric types.
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut out);
        String::from_utf8(out).unwrap_or_default()
    }
}

/// The snake_case name an enum serialises to, as a label value.
mod erased {
    pub trait Named {
        fn name(&self) -> String;
    }

    impl<T: serde::Serialize> Named for T {
        fn name(&self) -> String {
            match serde_json::to_value(self) {
                Ok(serde_json::Value::String(s)) => s,
                _ => String::new(),
            }
        }
    }
}
