//! Command line and environment: every setting is a flag with a `CTXD_*` variable.

use std::net::SocketAddr;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::http::Limits;
use crate::store::StoreOptions;

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
    Serve(ServeArgs),
    /// Apply database migrations and exit.
    Migrate(DatabaseArgs),
    /// Print the OpenAPI document.
    Openapi,
    /// Exit 0 when the service at --listen answers /healthz (for container health checks).
    Healthcheck {
        #[arg(long, env = "CTXD_LISTEN", default_value = "127.0.0.1:8080")]
        listen: SocketAddr,
    },
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
    #[command(flatten)]
    pub database: DatabaseArgs,
    /// Most events one append may carry.
    #[arg(long, env = "CTXD_MAX_BATCH_EVENTS", default_value_t = 1_000)]
    pub max_batch_events: usize,
    /// Largest request body, in bytes.
    #[arg(long, env = "CTXD_MAX_BODY_BYTES", default_value_t = 32 * 1024 * 1024)]
    pub max_body_bytes: usize,
    /// Longest a request may take, in seconds, before it is answered 503.
    #[arg(long, env = "CTXD_REQUEST_TIMEOUT_SECS", default_value_t = 30)]
    pub request_timeout_secs: u64,
    /// Log lines as text or JSON. Levels come from RUST_LOG (default info).
    #[arg(long, env = "CTXD_LOG_FORMAT", value_enum, default_value = "text")]
    pub log_format: LogFormat,
}

impl ServeArgs {
    pub fn limits(&self) -> Limits {
        Limits {
            max_batch_events: self.max_batch_events,
            max_body_bytes: self.max_body_bytes,
            request_timeout: Duration::from_secs(self.request_timeout_secs),
        }
    }
}
