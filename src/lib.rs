//! ctxd: a context-management sidecar for LLM agents.
//!
//! Agents append what happened in a session; ctxd keeps the whole history and decides what the
//! model sees. `app` builds the HTTP service so that tests drive it exactly as `ctxd serve` does.

pub mod auth;
pub mod compaction;
pub mod config;
pub mod domain;
pub mod engine;
pub mod http;
pub mod metrics;
pub mod replay;
pub mod retention;
pub mod store;
pub mod summarize;
pub mod telemetry;
pub mod tokens;
pub mod turn;

pub use config::Limits;
pub use http::{app, openapi, AppState};
