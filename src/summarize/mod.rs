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
    /// The events newly covered, in seq order, borrowed from the log.
    pub events: &'a [&'a Event],
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
    /// The longest the operator lets a summary take.
    fn timeout(&self) -> Duration;
    async fn summarize(&self, request: SummaryRequest<'_>)
        -> Result<SummaryOutput, SummarizeError>;
}

/// A summary to fold in, and why the deterministic one stands in for a model's, if it does.
#[derive(Debug, Clone)]
pub struct SummaryOutcome {
    pub output: SummaryOutput,
    pub fallback_reason: Option<String>,
}

impl SummaryOutcome {
    /// The deterministic summary of `request`; `reason` says why no model wrote it (none when
    /// no model is configured).
    pub fn deterministic(request: SummaryRequest<'_>, reason: Option<String>) -> Self {
        Self {
            output: deterministic::summarize(request),
            fallback_reason: reason,
        }
    }
}
