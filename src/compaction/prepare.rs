//! Summaries prepared before a compaction needs them, so that an agent never waits on a model.
//!
//! When a session's view reaches the warn tier, the compaction that saw it queues a job: the
//! summary of what the next soft compaction would fold (`engine::next_fold`), on top of the
//! summary so far. Any replica's worker claims it (under a lease: a replica that dies mid-job
//! loses it to another when the lease runs out; two never run it at once) and stores what the
//! model wrote. The compaction that folds takes the prepared summary when it covers the start
//! of what it folds, extending it deterministically over the events since. While the job is
//! still running, a soft fold is left for a later call; a fold that cannot wait (the full or
//! emergency tier, or a view that does not fit) takes the deterministic summary. Only a forced
//! compaction asks the model itself, within its deadline.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

use super::summary;
use crate::domain::compaction::{SummarizerInfo, SummarizerOutcome, Summary};
use crate::domain::event::{Event, EventBody, Role};
use crate::domain::state::{JobStatus, PreparedSummary, SummaryJob};
use crate::store::Store;
use crate::summarize::{deterministic, Summarizer, SummaryOutcome, SummaryOutput, SummaryRequest};

/// Tries of one job before it is left as failed.
const MAX_ATTEMPTS: i64 = 3;
/// How long an idle worker waits before looking for jobs queued by other replicas.
const IDLE_POLL: Duration = Duration::from_secs(1);

/// Wakes this process's worker when a compaction queues a job.
static QUEUED: Notify = Notify::const_new();

/// Tells the workers a job was queued (every worker waiting now, or the next to wait).
pub fn queued() {
    crate::metrics::METRICS.job("queued");
    QUEUED.notify_waiters();
    QUEUED.notify_one();
}

/// Runs this replica's worker: claims jobs and prepares their summaries, for as long as the
/// runtime lives.
pub fn spawn_worker(store: Arc<dyn Store>, summarizer: Arc<dyn Summarizer>) {
    tokio::spawn(async move {
        let lease = summarizer.timeout() * 2 + Duration::from_secs(5);
        loop {
            let now_ms = chrono::Utc::now().timestamp_millis();
            let lease_ms = i64::try_from(lease.as_millis()).unwrap_or(i64::MAX);
            match store
                .claim_summary_job(now_ms, lease_ms, MAX_ATTEMPTS)
                .await
            {
                Ok(Some(job)) => {
                    let metrics = &crate::metrics::METRICS;
                    metrics.job_running(1);
                    let prepared = run(&*store, &*summarizer, &job).await;
                    metrics.job_running(-1);
                    metrics.job(if prepared { "prepared" } else { "failed" });
                }
                Ok(None) => {
                    let _ = tokio::time::timeout(IDLE_POLL, QUEUED.notified()).await;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "claiming a summary job failed");
                    tokio::time::sleep(IDLE_POLL).await;
                }
            }
        }
    });
}

/// What a fold leaves out of the summary: system prompts and pinned events stay in the view.
fn folded(event: &Event) -> bool {
    !(event.pinned || matches!(&event.body, EventBody::Message(m) if m.role == Role::System))
}

/// Prepares `job`'s summary with the model and stores it (or that the model failed); whether
/// a summary was prepared.
async fn run(store: &dyn Store, summarizer: &dyn Summarizer, job: &SummaryJob) -> bool {
    let mut events = Vec::new();
    let mut after = job.checkpoint_seq;
    while after < job.to_seq {
        match store.list_events(job.session_id, after, 1_000).await {
            Ok(page) if !page.is_empty() => {
                after = page.last().map_or(job.to_seq, |e| e.seq);
                events.extend(page.into_iter().filter(|e| e.seq <= job.to_seq));
            }
            Ok(_) => break,
            Err(e) => {
                tracing::warn!(session_id = %job.session_id, error = %e, "reading a job's events failed");
                return false;
            }
        }
    }
    let events: Vec<&Event> = events.iter().filter(|e| folded(e)).collect();
    let request = SummaryRequest {
        previous: &job.previous,
        events: &events,
        max_chars: job.max_chars,
    };
    let outcome = summary::summarize(Some(summarizer), request, summarizer.timeout()).await;
    crate::metrics::METRICS.summarizer(&outcome.output.info);
    let used = outcome.output.info.outcome == SummarizerOutcome::Used;
    let prepared = used.then_some(PreparedSummary {
        summary: outcome.output.summary,
        info: outcome.output.info,
    });
    if let Err(e) = store.finish_summary_job(job, prepared.as_ref()).await {
        tracing::warn!(session_id = %job.session_id, error = %e, "storing a prepared summary failed");
        return false;
    }
    prepared.is_some()
}

/// What a compaction that folds can do about its summary.
pub enum Readiness {
    /// A prepared summary covers the start of the fold: here is the whole fold's summary.
    Ready(Box<SummaryOutcome>),
    /// A job for it is queued or running.
    Preparing,
    /// No job at this checkpoint yet.
    Absent,
    /// The job at this checkpoint failed, or prepared another span.
    Unusable,
}

/// Whether `job` (as `status` says) prepared the start of `request`'s fold; if so, the fold's
/// summary: the prepared one, extended deterministically over the events after its span.
pub fn readiness(job: Option<(SummaryJob, JobStatus)>, request: SummaryRequest<'_>) -> Readiness {
    let Some((job, status)) = job else {
        return Readiness::Absent;
    };
    let covers = job.previous == *request.previous
        && job.max_chars == request.max_chars
        && request.events.last().is_some_and(|e| e.seq >= job.to_seq);
    match status {
        JobStatus::Done(prepared) if covers => {
            Readiness::Ready(Box::new(extend(*prepared, request, job.to_seq)))
        }
        JobStatus::InFlight if covers => Readiness::Preparing,
        _ => Readiness::Unusable,
    }
}

/// The prepared summary, then the deterministic summary of the events after `to_seq` on top.
fn extend(prepared: PreparedSummary, request: SummaryRequest<'_>, to_seq: i64) -> SummaryOutcome {
    let after: Vec<&Event> = request
        .events
        .iter()
        .copied()
        .filter(|e| e.seq > to_seq)
        .collect();
    let info = SummarizerInfo {
        outcome: SummarizerOutcome::Prepared,
        // The agent did not wait for the model.
        latency_ms: 0.0,
        ..prepared.info
    };
    let summary: Summary = if after.is_empty() {
        prepared.summary
    } else {
        deterministic::summarize(SummaryRequest {
            previous: &prepared.summary,
            events: &after,
            max_chars: request.max_chars,
        })
        .summary
    };
    SummaryOutcome {
        output: SummaryOutput { summary, info },
        error: None,
    }
}

/// The job that prepares a fold of `request`'s span on `session_id`.
pub fn job_for(
    session_id: uuid::Uuid,
    checkpoint_seq: i64,
    to_seq: i64,
    previous: &Summary,
    max_chars: usize,
) -> SummaryJob {
    SummaryJob {
        session_id,
        checkpoint_seq,
        to_seq,
        previous: previous.clone(),
        max_chars,
    }
}
