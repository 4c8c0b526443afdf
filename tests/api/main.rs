//! ctxd's integration tests: one binary, a module per feature. Every test runs the real service
//! on a loopback port over a real database, on SQLite and on PostgreSQL.

mod support;

mod browser;
mod client;
mod compaction;
mod concurrency;
mod condense;
mod dashboard;
mod deploy;
mod episodes;
mod errors;
mod events;
mod input;
mod keys;
mod metrics;
mod openapi;
mod prepare;
mod providers;
mod readme;
mod recall;
mod replay;
mod replay_checks;
mod restart;
mod schema;
mod sessions;
mod shutdown;
mod store;
mod summarizer;
mod turn;
