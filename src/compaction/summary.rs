//! Getting a compaction its summary: the operator's summariser within a deadline, and the
//! deterministic summary when there is none, it fails or it is late. The engine never waits on
//! a model itself; this is the one place that does.

use std::time::{Duration, Instant};

use crate::domain::compaction::Summary;
use crate::summarize::{SummarizeError, Summarizer, SummaryOutcome, SummaryRequest};

/// What a summary is of: the summary it extends, the events it covers and its bound. Two
/// requests with the same key get the same summary.
#[derive(Debug, Clone, PartialEq)]
pub struct SummaryKey {
    previous: Summary,
    seqs: Vec<i64>,
    max_chars: usize,
}

impl SummaryKey {
    pub fn of(request: &SummaryRequest<'_>) -> Self {
        Self {
            previous: request.previous.clone(),
            seqs: request.events.iter().map(|e| e.seq).collect(),
            max_chars: request.max_chars,
        }
    }
}

/// Summarises `request` with `summarizer` when there is one and it answers within `deadline`;
/// otherwise with the deterministic summariser, saying why.
pub async fn summarize(
    summarizer: Option<&dyn Summarizer>,
    request: SummaryRequest<'_>,
    deadline: Duration,
) -> SummaryOutcome {
    let Some(s) = summarizer else {
        return SummaryOutcome::deterministic(request, None);
    };
    let started = Instant::now();
    let answer = match tokio::time::timeout(deadline, s.summarize(request)).await {
        Ok(answer) => answer,
        Err(_) => Err(SummarizeError::Timeout(deadline)),
    };
    match answer {
        Ok(output) => SummaryOutcome {
            output,
            fallback_reason: None,
        },
        Err(e) => {
            tracing::warn!(summarizer = s.kind(), error = %e, "summariser failed; falling back to the deterministic summary");
            let mut outcome = SummaryOutcome::deterministic(
                request,
                Some(format!(
                    "{} summariser failed, deterministic summary used: {e}",
                    s.kind()
                )),
            );
            // The agent waited for the model before the fallback: the record says how long.
            outcome.output.info.latency_ms = started.elapsed().as_secs_f64() * 1e3;
            outcome
        }
    }
}
