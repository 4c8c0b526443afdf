//! Summarisers: turn the items a compaction covers into the running summary and its anchors.
//!
//! Summaries are incremental: a summariser gets the previous summary and anchors plus the newly
//! covered events, never an earlier view's text. LLM summarisers are configured by the operator
//! only; whenever none is configured or one fails, the deterministic summariser is used and the
//! error is reported so that the compaction record can say why.

pub mod deterministic;
pub mod guard;
pub mod llm;

use std::time::Duration;

use async_trait::async_trait;

use crate::domain::compaction::{FallbackReason, SummarizerInfo, Summary};
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

/// Tokens a model's answer cost, and whether it stopped at its output limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Spent {
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
    pub output_truncated: bool,
}

/// Why a model's summary is not used. Every text in it is free of the API key.
#[derive(Debug, thiserror::Error)]
pub enum SummarizeError {
    #[error("the summariser did not answer within {0:?}")]
    Timeout(Duration),
    #[error("the summariser answered HTTP {status}: {body}")]
    Status {
        status: u16,
        body: String,
        /// What a 429 or 503 answer's `Retry-After` asked for.
        retry_after: Option<Duration>,
    },
    #[error("the summariser's answer is not its API's JSON: {0}")]
    Malformed(String),
    #[error("the summariser's narrative was refused: {why}")]
    Refused { why: String, spent: Spent },
    #[error("the summariser could not be reached: {0}")]
    Transport(String),
    #[error("the summariser failed repeatedly and is not called for a while")]
    CircuitOpen,
    #[error(
        "the summariser's input needs {needed} tokens with its answer and a reserve of \
         {reserve}, more than its {context}-token window"
    )]
    InputTooLarge {
        needed: i64,
        reserve: i64,
        context: i64,
    },
}

impl SummarizeError {
    pub fn reason(&self) -> FallbackReason {
        match self {
            Self::Timeout(_) => FallbackReason::Timeout,
            Self::Status { .. } => FallbackReason::HttpStatus,
            Self::Malformed(_) => FallbackReason::Malformed,
            Self::Refused { .. } => FallbackReason::RefusedNarrative,
            Self::Transport(_) => FallbackReason::Unreachable,
            Self::CircuitOpen => FallbackReason::CircuitOpen,
            Self::InputTooLarge { .. } => FallbackReason::InputTooLarge,
        }
    }
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

/// A summary to fold in, and what failed when the deterministic one stands in for a model's.
#[derive(Debug, Clone)]
pub struct SummaryOutcome {
    pub output: SummaryOutput,
    /// The record's `error`.
    pub error: Option<String>,
}

impl SummaryOutcome {
    /// The deterministic summary of `request`, standing in for a model's for `reason`.
    pub fn deterministic(
        request: SummaryRequest<'_>,
        reason: FallbackReason,
        error: Option<String>,
    ) -> Self {
        let mut output = deterministic::summarize(request);
        output.info.fallback_reason = Some(reason);
        Self { output, error }
    }
}
