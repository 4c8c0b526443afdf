//! Summarisers: turn the items a compaction covers into the running summary and its anchors.
//!
//! Summaries are incremental: a summariser gets the previous summary and anchors plus the newly
//! covered events, never an earlier view's text. LLM summarisers are configured by the operator
//! only; whenever none is configured or one fails, the deterministic summariser is used and the
//! error is reported so that the compaction record can say why.

pub mod deterministic;
pub mod llm;

use std::time::Duration;

use async_trait::async_trait;

use crate::domain::compaction::{SummarizerInfo, Summary};
use crate::domain::event::Event;

/// What a summariser is asked to do.
#[derive(Debug, Clone, Copy)]
pub struct SummaryRequest<'a> {
    /// The summary so far (empty text and "N/A" anchors at first).
    pub previous: &'a Summary,
    /// The events newly covered, in seq order.
    pub events: &'a [Event],
    /// The largest summary text to produce, in characters.
    pub max_chars: usize,
}

/// A summary and who made it. The anchors are already merged with the previous ones.
#[derive(Debug, Clone)]
pub struct SummaryOutput {
    pub summary: Summary,
    pub info: SummarizerInfo,
}

#[derive(Debug, thiserror::Error)]
pub enum SummarizeError {
    #[error("the summariser did not answer within {0:?}")]
    Timeout(Duration),
    #[error("the summariser answered HTTP {status}: {body}")]
    Status { status: u16, body: String },
    #[error("the summariser's answer could not be used: {0}")]
    Unparsable(String),
    #[error("the summariser could not be reached: {0}")]
    Transport(String),
}

#[async_trait]
pub trait Summarizer: Send + Sync + 'static {
    /// `openai`, `anthropic` or `deterministic`.
    fn kind(&self) -> &'static str;
    async fn summarize(&self, request: SummaryRequest<'_>)
        -> Result<SummaryOutput, SummarizeError>;
}

/// Summarises with `summarizer` when there is one, falling back to the deterministic summariser
/// when there is none or it fails. The error, if any, says why the fallback was used.
pub async fn summarize_or_fall_back(
    summarizer: Option<&dyn Summarizer>,
    request: SummaryRequest<'_>,
) -> (SummaryOutput, Option<String>) {
    if let Some(s) = summarizer {
        match s.summarize(request).await {
            Ok(output) => return (output, None),
            Err(e) => {
                tracing::warn!(summarizer = s.kind(), error = %e, "summariser failed; falling back to the deterministic summary");
                let fallback = deterministic::summarize(request);
                return (
                    fallback,
                    Some(format!(
                        "{} summariser failed, deterministic summary used: {e}",
                        s.kind()
                    )),
                );
            }
        }
    }
    (deterministic::summarize(request), None)
}
