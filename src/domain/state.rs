//! A session's compaction state: what the current view is made of. A persisted document, written
//! by the engine after every compaction that acts and stored as it is, so that any replica
//! continues incrementally.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::compaction::{Projection, Reason, Summary, Tier};

/// How an item after the checkpoint is shown when not in full.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reduced {
    /// `preview` or `reference`; `summary` for an item at or before the checkpoint that left
    /// the view after the fold that passed it (a pin collapsed, a request no longer recent).
    pub projection: Projection,
    pub reason: Reason,
    pub compaction_id: Uuid,
    /// Tokens of the reduced message.
    pub tokens_in_view: i64,
    /// The length of the message counted ([`ViewMessage::shown_bytes`]): one shown at another
    /// length (by another version of ctxd, or a state written before it was kept, 0) is
    /// counted again.
    ///
    /// [`ViewMessage::shown_bytes`]: crate::domain::compaction::ViewMessage::shown_bytes
    #[serde(default)]
    pub bytes_in_view: i64,
    /// Characters of the event's full content (0 in states written before it was kept).
    #[serde(default)]
    pub chars: i64,
    /// For a preview shown as head and tail (an item over the per-item or tail cap), the
    /// characters it shows; 0 for a plain preview.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub excerpt_chars: i64,
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

/// A run of seqs folded into the summary by one compaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FoldedRange {
    pub from_seq: i64,
    pub to_seq: i64,
    pub compaction_id: Uuid,
    /// `summarized` or `emergency_truncation`.
    pub reason: Reason,
}

/// What the last compaction saw, for inspection without recomputing the view.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct LastView {
    pub head_seq: i64,
    pub tier: Option<Tier>,
    /// Tokens of the view's messages, uncalibrated.
    pub message_tokens: i64,
    pub tools_tokens: i64,
    /// The first seq of the tail the last acting compaction kept verbatim.
    #[serde(default)]
    pub tail_from_seq: Option<i64>,
}

/// The persisted compaction state of one session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompactionState {
    /// Events at or before this seq are folded into the summary, except those in `kept`.
    pub checkpoint_seq: i64,
    pub summary: Summary,
    /// Tokens of the summary message as shown (summary, anchors and observation references).
    pub summary_tokens: i64,
    /// The length in bytes of the summary message `summary_tokens` counts: one shown otherwise
    /// (by another version of ctxd, or a state written before this was kept) is counted again.
    #[serde(default)]
    pub summary_bytes: i64,
    /// When an emergency had to shorten the summary message: how many of its characters are
    /// shown (0: none of it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary_cap: Option<usize>,
    /// Seqs at or before the checkpoint still shown in full: system prompts and pinned events.
    pub kept: Vec<i64>,
    /// Items after the checkpoint shown reduced, by seq.
    pub reduced: BTreeMap<i64, Reduced>,
    /// The provider's real token count over ours (≥ 1 is applied; see `calibration_factor`).
    pub calibration: f64,
    /// How many provider counts the calibration has seen.
    #[serde(default)]
    pub calibration_samples: u32,
    pub last_compaction_id: Option<Uuid>,
    #[serde(default)]
    pub last_view: LastView,
    /// The agent's last condensation, shown after the summary (`POST /sessions/{id}/condense`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<crate::domain::condensation::Memory>,
}

impl Default for CompactionState {
    fn default() -> Self {
        Self {
            checkpoint_seq: 0,
            summary: Summary::default(),
            summary_tokens: 0,
            summary_bytes: 0,
            summary_cap: None,
            kept: Vec::new(),
            reduced: BTreeMap::new(),
            calibration: 1.0,
            calibration_samples: 0,
            last_compaction_id: None,
            last_view: LastView::default(),
            memory: None,
        }
    }
}

/// The lowest and highest ratio of a provider's count to ctxd's that a usage sample may have:
/// outside them, the sample is about another request (or a broken count) and is refused.
pub const MIN_CALIBRATION_SAMPLE: f64 = 0.25;
pub const MAX_CALIBRATION_SAMPLE: f64 = 4.0;

/// The ratio of a provider's count to ctxd's, when it is within the accepted bounds.
pub fn calibration_sample(provider_tokens: i64, our_tokens: i64) -> Option<f64> {
    if provider_tokens <= 0 || our_tokens <= 0 {
        return None;
    }
    let sample = provider_tokens as f64 / our_tokens as f64;
    (MIN_CALIBRATION_SAMPLE..=MAX_CALIBRATION_SAMPLE)
        .contains(&sample)
        .then_some(sample)
}

impl CompactionState {
    /// The factor applied to our message token counts. A provider that counts more tokens than
    /// our tokenizer raises it; one that counts fewer never lowers it below 1, so the budget
    /// stays conservative.
    pub fn calibration_factor(&self) -> f64 {
        if self.calibration.is_finite() {
            self.calibration.clamp(1.0, MAX_CALIBRATION_SAMPLE)
        } else {
            1.0
        }
    }

    /// Folds a provider's real count for a view into the calibration (an exponential average,
    /// so one odd sample does not swing it). A sample outside the accepted bounds is ignored.
    pub fn calibrate(&mut self, provider_tokens: i64, our_tokens: i64) {
        let Some(sample) = calibration_sample(provider_tokens, our_tokens) else {
            return;
        };
        self.calibration = if self.calibration_samples == 0 {
            sample
        } else {
            0.7 * self.calibration + 0.3 * sample
        };
        self.calibration_samples += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_outside_the_bounds_change_nothing() {
        let mut state = CompactionState::default();
        state.calibrate(i64::MAX, 1);
        state.calibrate(1, 1_000);
        assert_eq!((state.calibration, state.calibration_samples), (1.0, 0));
        state.calibrate(50, 100);
        assert_eq!(state.calibration, 0.5);
        assert_eq!(state.calibration_factor(), 1.0, "below 1 is applied as 1");
        state.calibrate(400, 100);
        assert!((state.calibration_factor() - 1.55).abs() < 1e-9);
        assert_eq!(calibration_sample(401, 100), None);
        assert_eq!(calibration_sample(25, 100), Some(0.25));
    }
}

/// A summary to prepare in the background: of the events after `checkpoint_seq` up to
/// `to_seq` (system prompts and pinned events aside, as a fold leaves them), on top of
/// `previous`, the summary as of the checkpoint. One per session and checkpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SummaryJob {
    pub session_id: Uuid,
    pub checkpoint_seq: i64,
    pub to_seq: i64,
    pub previous: Summary,
    pub max_chars: usize,
}

/// Where a [`SummaryJob`] stands.
#[derive(Debug, Clone, PartialEq)]
pub enum JobStatus {
    /// Waiting for a replica, or being run by one.
    InFlight,
    /// Prepared: the summary and who made it.
    Done(Box<PreparedSummary>),
    /// The model failed it (it is not tried again at this checkpoint).
    Failed,
}

/// A summary a job prepared.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PreparedSummary {
    pub summary: Summary,
    pub info: super::compaction::SummarizerInfo,
}
