//! Command line and environment: every setting is a flag with a `CTXD_*` variable.

use std::net::SocketAddr;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use std::sync::Arc;

use crate::compaction::cache::ViewCache;
use crate::store::StoreOptions;
use crate::summarize::guard::CallLimits;
use crate::summarize::llm::{self, LlmConfig, LlmKind};
use crate::summarize::Summarizer;

#[derive(Debug, Parser)]
#[command(
    name = "ctxd",
    version,
    about = "Context-management sidecar for LLM agents"
)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    /// `serve`'s settings, so that a bare `ctxd` serves.
    #[command(flatten)]
    pub serve: ServeArgs,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the HTTP service (the default).
    // Boxed: the settings dwarf the other commands.
    Serve(Box<ServeArgs>),
    /// Apply database migrations and exit.
    Migrate(DatabaseArgs),
    /// Print the OpenAPI document.
    Openapi,
    /// Replay recorded sessions through ctxd turn by turn and report what the views cost and
    /// keep (exit status 1 when a view is over budget or invalid, an item is unexplained, or a
    /// request fails).
    Replay(ReplayArgs),
    /// Write a long synthetic session, deterministic from a seed, with planted facts.
    Synth(SynthArgs),
    /// Manage API keys in the database directly (as an admin key does over HTTP): the way to
    /// make the first key.
    #[command(subcommand)]
    Keys(KeysCommand),
    /// Manage tenants in the database directly.
    #[command(subcommand)]
    Tenants(TenantsCommand),
    /// Exit 0 when the service at --listen answers /healthz (for container health checks).
    Healthcheck {
        #[arg(long, env = "CTXD_LISTEN", default_value = "127.0.0.1:8080")]
        listen: SocketAddr,
    },
}

/// `ctxd keys ...`
#[derive(Debug, Clone, Subcommand)]
pub enum KeysCommand {
    /// Create a key and print it (the only time it is shown). Once any key exists, every
    /// request to ctxd needs one.
    Create {
        /// agent, operator or admin.
        #[arg(long, value_enum)]
        role: crate::auth::KeyRole,
        /// The tenant the key acts for; it must exist (`ctxd tenants create`).
        #[arg(long, default_value = crate::auth::DEFAULT_TENANT)]
        tenant: String,
        /// What the key is for.
        #[arg(long, default_value = "")]
        name: String,
        #[command(flatten)]
        database: DatabaseArgs,
    },
    /// List keys (never their secrets).
    List {
        /// Only this tenant's keys.
        #[arg(long)]
        tenant: Option<String>,
        #[command(flatten)]
        database: DatabaseArgs,
    },
    /// Revoke a key by its id.
    Revoke {
        id: String,
        #[command(flatten)]
        database: DatabaseArgs,
    },
}

/// `ctxd tenants ...`
#[derive(Debug, Clone, Subcommand)]
pub enum TenantsCommand {
    /// Create a tenant.
    Create {
        id: String,
        #[command(flatten)]
        database: DatabaseArgs,
    },
    /// List the tenants.
    List {
        #[command(flatten)]
        database: DatabaseArgs,
    },
}

/// `ctxd replay`'s settings.
#[derive(Debug, Clone, Args)]
pub struct ReplayArgs {
    /// Recorded sessions: chat logs (one message a line, as in the development corpus), OpenAI
    /// chat message lists, or ctxd event lists.
    #[arg(required = true)]
    pub files: Vec<std::path::PathBuf>,
    /// A running ctxd to replay against (default: one started here on a temporary SQLite file).
    #[arg(long)]
    pub server: Option<String>,
    /// The context window of every replayed session.
    #[arg(long, default_value_t = 32_000)]
    pub window: u32,
    /// Tokens reserved for the model's output.
    #[arg(long, default_value_t = 4_000)]
    pub reserved_output: u32,
    /// o200k_base, cl100k_base or chars4.
    #[arg(long, default_value = "o200k_base")]
    pub tokenizer: String,
    /// The ctxd policy of every replayed session.
    #[arg(long, default_value = "progressive")]
    pub policy: String,
    /// The format of the view measured (tokens, prefix, facts): openai, openai_responses,
    /// anthropic or raw. Every view is checked in each provider format whatever this is.
    #[arg(long, default_value = "openai")]
    pub format: String,
    /// Tool schemas sent with every turn, counted in the budget: a JSON array of OpenAI chat
    /// tool schemas, or an object with such an array as `tools`.
    #[arg(long)]
    pub tools: Option<std::path::PathBuf>,
    /// A Python with the official openai and anthropic SDKs (`scripts/provider-sdks` prints
    /// one): every view of every turn is checked against their request types in each format.
    /// Without one that check is skipped, and the report says so.
    #[arg(long, env = "CTXD_PROVIDER_PYTHON")]
    pub provider_python: Option<std::path::PathBuf>,
    /// The price of a cached input token, as a share of an uncached one.
    #[arg(long, default_value_t = 0.1)]
    pub cache_price: f64,
    /// Print the report as JSON rather than a table.
    #[arg(long)]
    pub json: bool,
    /// Also measure plain baselines on the same history: no compaction, sliding truncation,
    /// chunked truncation and observation masking; and pool the sessions that outgrow the
    /// window against them (cost over chunked truncation's, prefix stability, facts kept).
    #[arg(long)]
    pub compare: bool,
    /// Leave the replayed sessions on the server (with `--server`) to inspect their items and
    /// compaction records; they are deleted after the replay otherwise.
    #[arg(long, requires = "server")]
    pub keep_sessions: bool,
    /// Write an SVG chart of utilization and cumulative effective cost per turn to this file.
    #[arg(long)]
    pub chart: Option<std::path::PathBuf>,
    /// A facts file of `ctxd synth` (`{"facts": [...]}`): sentences to look for in every view.
    #[arg(long)]
    pub facts: Option<std::path::PathBuf>,
    /// More session settings, as JSON or `@FILE` (`{"low_water": 0.35}`): merged over the
    /// window, reserved output and tokenizer given above.
    #[arg(long)]
    pub config: Option<String>,
}

/// `ctxd synth`'s settings.
#[derive(Debug, Clone, Args)]
pub struct SynthArgs {
    /// `coding` (reads, edits, long test logs, a 200,000-character output) or `support`.
    #[arg(long, default_value = "coding")]
    pub kind: String,
    /// Model turns.
    #[arg(long, default_value_t = 100)]
    pub turns: usize,
    /// The same seed writes the same session.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Where to write the session (one chat message a line).
    #[arg(long)]
    pub out: std::path::PathBuf,
    /// Where to write the planted facts, for `ctxd replay --facts`.
    #[arg(long)]
    pub facts: Option<std::path::PathBuf>,
    /// Annotate a coding session with exploration and action episodes (`episode_start` and
    /// `episode_end` events among the chat messages, which `ctxd replay` appends as events).
    #[arg(long)]
    pub episodes: bool,
}

#[derive(Debug, Clone, Args)]
pub struct DatabaseArgs {
    /// `sqlite:PATH` (created when missing) or `postgres://USER:PASSWORD@HOST/DB`.
    #[arg(long, env = "CTXD_DATABASE_URL", default_value = "sqlite://ctxd.db")]
    pub database_url: String,
    /// Connections in the database pool.
    #[arg(long, env = "CTXD_DATABASE_MAX_CONNECTIONS", default_value_t = 16)]
    pub database_max_connections: u32,
}

impl DatabaseArgs {
    pub fn store_options(&self) -> StoreOptions {
        StoreOptions {
            url: self.database_url.clone(),
            max_connections: self.database_max_connections,
        }
    }
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, env = "CTXD_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Serve without API keys on an address other than loopback: anyone who can reach it
    /// reads and writes every session. Without this, ctxd refuses to start there until a key
    /// exists (`ctxd keys create`).
    #[arg(long, env = "CTXD_INSECURE_OPEN", default_value_t = false)]
    pub insecure_open: bool,
    /// Requests per second each API key may make on this replica (0: no limit); past it the
    /// answer is 429 with Retry-After.
    #[arg(long, env = "CTXD_RATE_LIMIT_PER_KEY", default_value_t = 0.0)]
    pub rate_limit_per_key: f64,
    /// Requests a key may make at once above its rate (default: one second's worth, at least 1).
    #[arg(long, env = "CTXD_RATE_LIMIT_BURST", default_value_t = 0)]
    pub rate_limit_burst: u32,
    #[command(flatten)]
    pub database: DatabaseArgs,
    /// Most events one append may carry.
    #[arg(long, env = "CTXD_MAX_BATCH_EVENTS", default_value_t = 1_000)]
    pub max_batch_events: usize,
    /// Largest request body, in bytes.
    #[arg(long, env = "CTXD_MAX_BODY_BYTES", default_value_t = 32 * 1024 * 1024)]
    pub max_body_bytes: usize,
    /// Largest single event (or message of a turn), in bytes of JSON.
    #[arg(long, env = "CTXD_MAX_EVENT_BYTES", default_value_t = 8 * 1024 * 1024)]
    pub max_event_bytes: usize,
    /// Longest a request may take, in seconds, before it is answered 503.
    #[arg(long, env = "CTXD_REQUEST_TIMEOUT_SECS", default_value_t = 30)]
    pub request_timeout_secs: u64,
    /// Bytes each replica keeps of recent views (their events, the JSON they rendered to and
    /// the compaction state), so that a compaction reads only the events appended since and
    /// the state's version (0 turns the cache off).
    #[arg(long, env = "CTXD_VIEW_CACHE_BYTES", default_value_t = ViewCache::DEFAULT_BYTES)]
    pub view_cache_bytes: usize,
    /// Log lines as text or JSON. Levels come from RUST_LOG (default info).
    #[arg(long, env = "CTXD_LOG_FORMAT", value_enum, default_value = "text")]
    pub log_format: LogFormat,
    /// An OpenTelemetry collector's OTLP/HTTP endpoint (`http://collector:4318`): every
    /// request's span is exported there. Unset: no traces.
    #[arg(long, env = "OTEL_EXPORTER_OTLP_ENDPOINT")]
    pub otlp_endpoint: Option<String>,
    /// Delete sessions with no append for this many seconds, with everything they own
    /// (0: keep every session).
    #[arg(long, env = "CTXD_RETENTION_IDLE_SECS", default_value_t = 0)]
    pub retention_idle_secs: u64,
    #[command(flatten)]
    pub summarizer: SummarizerArgs,
}

/// Which LLM writes summaries. Without one, summaries are built deterministically from the
/// events; when one fails, the deterministic summary is used and the record says why.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SummarizerKind {
    None,
    Openai,
    Anthropic,
}

#[derive(Clone, Args)]
pub struct SummarizerArgs {
    /// `none` (deterministic summaries), `openai` (any OpenAI-compatible chat-completions
    /// endpoint) or `anthropic` (the Messages API).
    #[arg(long, env = "CTXD_SUMMARIZER_KIND", value_enum, default_value = "none")]
    pub summarizer_kind: SummarizerKind,
    /// The API's base URL (default: the provider's own).
    #[arg(long, env = "CTXD_SUMMARIZER_BASE_URL")]
    pub summarizer_base_url: Option<String>,
    /// The model that writes summaries.
    #[arg(long, env = "CTXD_SUMMARIZER_MODEL")]
    pub summarizer_model: Option<String>,
    /// The API key. Prefer --summarizer-api-key-file.
    #[arg(long, env = "CTXD_SUMMARIZER_API_KEY", hide_env_values = true)]
    pub summarizer_api_key: Option<String>,
    /// A file holding the API key.
    #[arg(long, env = "CTXD_SUMMARIZER_API_KEY_FILE")]
    pub summarizer_api_key_file: Option<std::path::PathBuf>,
    /// Longest a summary may take, in seconds, before the deterministic one is used. Must be
    /// shorter than --request-timeout-secs.
    #[arg(long, env = "CTXD_SUMMARIZER_TIMEOUT_SECS", default_value_t = 15)]
    pub summarizer_timeout_secs: u64,
    /// Most summariser calls in flight at once across the process; a compaction that finds
    /// none free before its deadline uses the deterministic summary.
    #[arg(
        long,
        env = "CTXD_SUMMARIZER_MAX_CONCURRENT_CALLS",
        default_value_t = 4
    )]
    pub summarizer_max_concurrent_calls: usize,
    /// Consecutive summariser failures after which it is left alone for the cooldown.
    #[arg(long, env = "CTXD_SUMMARIZER_BREAKER_FAILURES", default_value_t = 3)]
    pub summarizer_breaker_failures: u32,
    /// Seconds the summariser is left alone after repeated failures (longer when its
    /// `Retry-After` asks), before one trial call.
    #[arg(
        long,
        env = "CTXD_SUMMARIZER_BREAKER_COOLDOWN_SECS",
        default_value_t = 30
    )]
    pub summarizer_breaker_cooldown_secs: u64,
    /// Most tokens the summariser may answer with.
    #[arg(
        long,
        env = "CTXD_SUMMARIZER_MAX_OUTPUT_TOKENS",
        default_value_t = 2_048
    )]
    pub summarizer_max_output_tokens: u32,
    /// The summariser model's context window in tokens. A summary is asked for only when the
    /// prompt fits in it with the answer and a reserve of 4,096 tokens; the middle of the new
    /// events is cut from the prompt to fit (the deterministic facts still cover them all).
    #[arg(
        long,
        env = "CTXD_SUMMARIZER_CONTEXT_TOKENS",
        default_value_t = 128_000
    )]
    pub summarizer_context_tokens: u32,
}

impl std::fmt::Debug for SummarizerArgs {
    // Never print the key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SummarizerArgs")
            .field("kind", &self.summarizer_kind)
            .field("base_url", &self.summarizer_base_url)
            .field("model", &self.summarizer_model)
            .finish_non_exhaustive()
    }
}

impl SummarizerArgs {
    /// The configured summariser, or None for deterministic summaries.
    pub fn build(&self) -> Result<Option<Arc<dyn Summarizer>>, String> {
        let kind = match self.summarizer_kind {
            SummarizerKind::None => return Ok(None),
            SummarizerKind::Openai => LlmKind::OpenAi,
            SummarizerKind::Anthropic => LlmKind::Anthropic,
        };
        let model = self
            .summarizer_model
            .clone()
            .ok_or("--summarizer-model (CTXD_SUMMARIZER_MODEL) is required with a summariser")?;
        let api_key = match (&self.summarizer_api_key, &self.summarizer_api_key_file) {
            (Some(key), _) => Some(key.clone()),
            (None, Some(path)) => Some(
                std::fs::read_to_string(path)
                    .map_err(|e| {
                        format!(
                            "cannot read the summariser key file {}: {e}",
                            path.display()
                        )
                    })?
                    .trim()
                    .to_owned(),
            ),
            (None, None) => None,
        };
        Ok(Some(llm::build(LlmConfig {
            kind,
            base_url: self
                .summarizer_base_url
                .clone()
                .unwrap_or_else(|| kind.default_base_url().to_owned()),
            model,
            api_key,
            timeout: Duration::from_secs(self.summarizer_timeout_secs),
            max_output_tokens: self.summarizer_max_output_tokens,
            context_tokens: self.summarizer_context_tokens,
            limits: CallLimits {
                breaker_failures: self.summarizer_breaker_failures,
                breaker_cooldown: Duration::from_secs(self.summarizer_breaker_cooldown_secs),
                max_concurrent_calls: self.summarizer_max_concurrent_calls,
            },
        })))
    }
}

/// Request limits, all configurable.
#[derive(Debug, Clone)]
pub struct Limits {
    pub max_batch_events: usize,
    pub max_body_bytes: usize,
    /// The largest one event (or one message of a turn) may be, as JSON.
    pub max_event_bytes: usize,
    pub request_timeout: Duration,
    /// Requests a second each API key may make on a replica (0: no limit), and how many it may
    /// make at once beyond that rate.
    pub rate_per_key: f64,
    pub rate_burst: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_batch_events: 1_000,
            max_body_bytes: 32 * 1024 * 1024,
            max_event_bytes: 8 * 1024 * 1024,
            request_timeout: Duration::from_secs(30),
            rate_per_key: 0.0,
            rate_burst: 0,
        }
    }
}

impl ServeArgs {
    /// Refuses settings that contradict each other.
    pub fn validate(&self) -> Result<(), String> {
        let s = &self.summarizer;
        // A compaction must be able to fall back and answer before its request times out.
        if s.summarizer_kind != SummarizerKind::None
            && s.summarizer_timeout_secs >= self.request_timeout_secs
        {
            return Err(format!(
                "CTXD_SUMMARIZER_TIMEOUT_SECS ({}) must be shorter than \
                 CTXD_REQUEST_TIMEOUT_SECS ({}): a compaction waits for the summariser within \
                 its request",
                s.summarizer_timeout_secs, self.request_timeout_secs
            ));
        }
        if !(self.rate_limit_per_key.is_finite() && self.rate_limit_per_key >= 0.0) {
            return Err(format!(
                "CTXD_RATE_LIMIT_PER_KEY must be a number of requests per second, 0 or more \
                 (got {})",
                self.rate_limit_per_key
            ));
        }
        Ok(())
    }

    pub fn limits(&self) -> Limits {
        Limits {
            max_batch_events: self.max_batch_events,
            max_body_bytes: self.max_body_bytes,
            max_event_bytes: self.max_event_bytes,
            request_timeout: Duration::from_secs(self.request_timeout_secs),
            rate_per_key: self.rate_limit_per_key,
            rate_burst: self.rate_limit_burst,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn serve_args(args: &[&str]) -> ServeArgs {
        let mut argv = vec!["ctxd"];
        argv.extend_from_slice(args);
        Cli::try_parse_from(argv)
            .expect("the arguments parse")
            .serve
    }

    #[test]
    fn a_summariser_timeout_not_shorter_than_the_request_timeout_is_refused() {
        for timeout in ["30", "45"] {
            let args = serve_args(&[
                "--summarizer-kind=openai",
                "--summarizer-timeout-secs",
                timeout,
                "--request-timeout-secs=30",
            ]);
            let error = args.validate().unwrap_err();
            assert!(error.contains("CTXD_SUMMARIZER_TIMEOUT_SECS"), "{error}");
            assert!(error.contains("CTXD_REQUEST_TIMEOUT_SECS"), "{error}");
        }
    }

    #[test]
    fn the_defaults_and_a_shorter_summariser_timeout_are_accepted() {
        serve_args(&["--summarizer-kind=anthropic"])
            .validate()
            .unwrap();
        serve_args(&[
            "--summarizer-kind=openai",
            "--summarizer-timeout-secs=29",
            "--request-timeout-secs=30",
        ])
        .validate()
        .unwrap();
        // Without a summariser its timeout does not matter.
        serve_args(&["--summarizer-timeout-secs=90"])
            .validate()
            .unwrap();
    }
}
