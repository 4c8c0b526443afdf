//! Retention: sessions idle longer than the configured time are deleted with everything they
//! own, in small batches, by a background task of each replica (deleting is idempotent, so
//! replicas need no coordination). Each batch is one short statement: requests are not held up.

use std::sync::Arc;
use std::time::Duration;

use chrono::{SubsecRound, Utc};

use crate::store::{Store, StoreError};

/// Sessions deleted per statement.
pub const BATCH: u32 = 100;

/// Deletes every session idle longer than `idle`, `batch` at a time; how many it deleted.
pub async fn sweep(store: &dyn Store, idle: Duration, batch: u32) -> Result<u64, StoreError> {
    let idle = chrono::Duration::from_std(idle).unwrap_or(chrono::Duration::MAX);
    let Some(since) = Utc::now().checked_sub_signed(idle) else {
        return Ok(0);
    };
    // The precision the stores keep.
    let since = since.trunc_subsecs(6);
    let mut deleted = 0;
    loop {
        let n = store.delete_idle_sessions(since, batch).await?;
        deleted += n;
        if n < u64::from(batch) {
            return Ok(deleted);
        }
        tokio::task::yield_now().await;
    }
}

/// Sweeps every `every` for as long as the process runs.
pub fn spawn(store: Arc<dyn Store>, idle: Duration) {
    // Often enough that a session outlives its retention by a small share of it.
    let every = (idle / 10).clamp(Duration::from_secs(1), Duration::from_secs(600));
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            match sweep(store.as_ref(), idle, BATCH).await {
                Ok(0) => {}
                Ok(n) => tracing::info!(deleted = n, "idle sessions deleted"),
                Err(e) => tracing::warn!(error = %e, "retention sweep failed; retried later"),
            }
        }
    });
}
