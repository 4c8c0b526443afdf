//! Getting a compaction its summary: the operator's summariser within a deadline, and the
//! deterministic summary when there is none, it fails or it is late. The engine never waits on
//! a model itself; this is the one place that does.

use std::time::{Duration, Instant};

use crate::domain::compaction::{FallbackReason, Summary};
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
/// otherwise with the deterministic summariser, saying why. Never fails and never waits past
/// `deadline`.
pub async fn summarize(
    summarizer: Option<&dyn Summarizer>,
    request: SummaryRequest<'_>,
    deadline: Duration,
) -> SummaryOutcome {
    let Some(s) = summarizer else {
        return SummaryOutcome::deterministic(request, FallbackReason::NoneConfigured, None);
    };
    let started = Instant::now();
    let answer = match tokio::time::timeout(deadline, s.summarize(request)).await {
        Ok(answer) => answer,
        Err(_) => Err(SummarizeError::Timeout(deadline)),
    };
    match answer {
        Ok(output) => SummaryOutcome {
            output,
            error: None,
        },
        Err(e) => {
            tracing::warn!(summarizer = s.kind(), error = %e, "summariser failed; falling back to the deterministic summary");
            let mut outcome = SummaryOutcome::deterministic(
                request,
                e.reason(),
                Some(format!(
                    "{} summariser failed, deterministic summary used: {e}",
                    s.kind()
                )),
            );
            let info = &mut outcome.output.info;
            // The agent waited for the model before the fallback: the record says how long.
            info.latency_ms = started.elapsed().as_secs_f64() * 1e3;
            info.attempts = match e {
                SummarizeError::CircuitOpen => 0,
                _ => 1,
            };
            if let SummarizeError::Refused { spent, .. } = e {
                info.input_tokens = spent.input_tokens;
                info.output_tokens = spent.output_tokens;
                info.output_truncated = spent.output_truncated;
            }
            outcome
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use chrono::DateTime;

    use super::*;
    use crate::domain::compaction::Anchors;
    use crate::domain::event::{Event, EventBody, Message, Role};
    use crate::summarize::guard::CallLimits;
    use crate::summarize::llm::{self, LlmConfig, LlmKind};

    /// A provider on a loopback port that answers `status` and `body` after `delay`.
    async fn provider(status: u16, body: &'static str, delay: Duration) -> Arc<dyn Summarizer> {
        let app = axum::Router::new().fallback(move || async move {
            tokio::time::sleep(delay).await;
            (axum::http::StatusCode::from_u16(status).unwrap(), body)
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base_url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        llm::build(LlmConfig {
            kind: LlmKind::OpenAi,
            base_url,
            model: "m".into(),
            api_key: None,
            // The operator's bound is generous: the deadline below is what must hold.
            timeout: Duration::from_secs(30),
            max_output_tokens: 100,
            context_tokens: 128_000,
            limits: CallLimits::default(),
        })
    }

    fn user(seq: i64, content: &str) -> Event {
        Event {
            seq,
            id: None,
            body: EventBody::Message(Message {
                role: Role::User,
                content: content.into(),
                tool_calls: Vec::new(),
                tool_call_id: None,
                name: None,
                is_error: None,
            }),
            pinned: false,
            metadata: None,
            tokens: 10,
            created_at: DateTime::UNIX_EPOCH,
            derived: Default::default(),
        }
    }

    async fn outcome(summarizer: &dyn Summarizer, deadline: Duration) -> SummaryOutcome {
        let previous = Summary {
            text: "Earlier: the agent read src/auth.rs.".into(),
            anchors: Anchors::default(),
        };
        let events = [user(7, "Please fix the login bug.")];
        let events: Vec<&Event> = events.iter().collect();
        let request = SummaryRequest {
            previous: &previous,
            events: &events,
            max_chars: 2_000,
        };
        summarize(Some(summarizer), request, deadline).await
    }

    #[tokio::test]
    async fn a_failing_summariser_falls_back_to_the_deterministic_summary() {
        let summarizer = provider(500, "boom", Duration::ZERO).await;
        let outcome = outcome(&*summarizer, Duration::from_secs(10)).await;
        assert_eq!(outcome.output.info.kind, "deterministic");
        assert!(outcome
            .output
            .summary
            .text
            .contains("Please fix the login bug."));
        assert_eq!(
            outcome.output.info.fallback_reason,
            Some(FallbackReason::HttpStatus)
        );
        assert_eq!(outcome.output.info.attempts, 1);
        let reason = outcome.error.expect("the failure is reported");
        assert!(reason.contains("openai"), "{reason}");
        assert!(reason.contains("HTTP 500"), "{reason}");
        assert!(reason.contains("boom"), "{reason}");
    }

    #[tokio::test]
    async fn the_deadline_is_kept_whatever_the_summariser_allows_itself() {
        let summarizer = provider(200, "{}", Duration::from_secs(20)).await;
        let started = Instant::now();
        let outcome = outcome(&*summarizer, Duration::from_millis(200)).await;
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(outcome.output.info.kind, "deterministic");
        assert_eq!(
            outcome.output.info.fallback_reason,
            Some(FallbackReason::Timeout)
        );
        let reason = outcome.error.expect("the timeout is reported");
        assert!(reason.contains("did not answer within 200ms"), "{reason}");
    }

    #[test]
    fn summaries_of_the_same_events_over_the_same_summary_share_a_key() {
        let previous = Summary::default();
        let (a, b) = (user(1, "a"), user(2, "b"));
        let key = |events: &[&Event], max_chars| {
            SummaryKey::of(&SummaryRequest {
                previous: &previous,
                events,
                max_chars,
            })
        };
        assert_eq!(key(&[&a, &b], 100), key(&[&a, &b], 100));
        assert_ne!(key(&[&a, &b], 100), key(&[&a], 100));
        assert_ne!(key(&[&a, &b], 100), key(&[&a, &b], 200));
    }
}
