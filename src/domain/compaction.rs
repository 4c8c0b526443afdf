//! The vocabulary of compaction: tiers, item states and projections, anchors, summaries, the
//! messages of a view, and the record that explains one compaction.

use std::borrow::Cow;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::content::{parts_tokens, Part};
use super::event::{Event, EventBody, Role, ToolCall};
use super::session::Thresholds;
use crate::tokens::Tokenizer;

/// How hard a compaction works, chosen from the view's utilization of the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Tier {
    /// Below `warn`: the view is the previous view plus the new events.
    None,
    /// Offload large tool results in the head.
    Warn,
    /// Offload, then summarise the oldest half of the head.
    Soft,
    /// Offload, then summarise the whole head.
    Full,
    /// No LLM: keep system, pinned items, the summary and as much of the tail as fits.
    Emergency,
}

impl Tier {
    /// The tier a utilization calls for; boundaries are inclusive.
    pub fn for_utilization(utilization: f64, t: &Thresholds) -> Tier {
        if utilization >= t.emergency {
            Tier::Emergency
        } else if utilization >= t.full {
            Tier::Full
        } else if utilization >= t.soft {
            Tier::Soft
        } else if utilization >= t.warn {
            Tier::Warn
        } else {
            Tier::None
        }
    }
}

/// An item's lifecycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ItemState {
    /// Always shown in full (system prompts and pinned events).
    Pinned,
    /// Shown in full.
    Active,
    /// Shown reduced: a preview or a reference to its observation.
    Retained,
    /// Not shown; covered by the summary and recallable by seq.
    Archived,
}

/// How an item appears in the current view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Projection {
    Full,
    /// The first lines, bounded, with the observation reference.
    Preview,
    /// Only the observation reference.
    Reference,
    /// Covered by the summary message.
    Summary,
    /// Not in the view at all.
    Omitted,
}

/// Why an item has its projection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// A system prompt: always kept.
    SystemPrompt,
    /// A pinned event: always kept.
    Pinned,
    /// A pinned user message: always kept.
    PinnedUserMessage,
    /// Among the newest messages, kept verbatim.
    RecentTail,
    /// Not yet touched by any compaction.
    WithinBudget,
    /// A large tool result in the head, shown as a preview with its observation reference.
    OffloadedLargeToolResult,
    /// A message with images in the head: each image shown as a one-line reference, its text
    /// as a preview.
    OffloadedImage,
    /// A completed tool exchange shown by reference (overflow retry).
    MaskedCompletedToolExchange,
    /// An answered assistant turn in the tail over its cap: its text kept, each long tool-call
    /// argument (a file written, a patch) shown as an object naming its size and observation
    /// reference.
    OffloadedLongArguments,
    /// Folded into the summary.
    Summarized,
    /// Dropped to fit the window in an emergency; folded into the summary deterministically.
    EmergencyTruncation,
    /// A tool result whose call is not in the view: dropped so the request stays valid.
    OrphanToolResult,
    /// A completed tool exchange outside any active episode, archived by the episodic policy
    /// in the order of its tool's priority: its result shown as one line naming the tool and
    /// its observation reference.
    ArchivedToolExchange,
    /// The current user turn shown as a bounded preview (first overflow retry) or as its
    /// reference (second) after the provider refused the view for its length (episodic).
    OverflowRetry,
    /// Part of a completed episode the episodic policy archived (actions before the
    /// explorations they depend on); the episode's conclusion stays in the view.
    EpisodeArchived,
    /// A pinned user message or note collapsed into the summary by the episodic policy's last
    /// pass, oldest first, when nothing else brought the view to its target; the summary names
    /// its observation reference.
    PinnedCollapsed,
    /// A user request larger than the tail's cap (a pasted log or document, a harness's
    /// summary of an earlier conversation) shown as its head and tail with its observation
    /// reference: under either policy, the current one too, when the view would not fit
    /// otherwise; under the episodic policy also one it keeps verbatim (the first, or one of
    /// the two most recent) when passes 1 and 2 left the view over its target.
    OffloadedLargeRequest,
    /// A system prompt shown as its head and tail with its observation reference because the
    /// system prompts took more than `system_max_share` of the room for messages (a harness's
    /// long instructions in a small window): the conversation keeps room beside them.
    OffloadedLargeSystemPrompt,
}

impl Reason {
    /// Whether the item left the view's full content for good under the episodic policy: its
    /// lifecycle state is `archived` though its reference is still shown.
    pub fn archives(self) -> bool {
        matches!(
            self,
            Self::ArchivedToolExchange | Self::EpisodeArchived | Self::PinnedCollapsed
        )
    }
}

/// A value of an anchor that says nothing.
pub const NOT_AVAILABLE: &str = "N/A";
/// Joins the intent anchor's first request to the latest: `Fix the bug (latest request: Ship it.)`.
pub const LATEST_REQUEST: &str = " (latest request: ";
/// What the progress anchor's lists open with: `episodes done: a; b. recent tool calls: c; d`.
pub const EPISODES_DONE: &str = "episodes done: ";
pub const RECENT_TOOL_CALLS: &str = "recent tool calls: ";

/// The five structured anchors a summary keeps, merged incrementally.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Anchors {
    pub user_intent: String,
    pub execution_progress: String,
    pub key_decision: String,
    pub tried_solution: String,
    pub next_step: String,
}

impl Default for Anchors {
    fn default() -> Self {
        Self {
            user_intent: NOT_AVAILABLE.into(),
            execution_progress: NOT_AVAILABLE.into(),
            key_decision: NOT_AVAILABLE.into(),
            tried_solution: NOT_AVAILABLE.into(),
            next_step: NOT_AVAILABLE.into(),
        }
    }
}

/// Whether an anchor value says nothing: any spelling of "none" ("N/A", "- N/A", "n/a",
/// "None", "null", empty).
pub fn is_unknown(value: &str) -> bool {
    let v = value
        .trim()
        .trim_start_matches(['-', '*', '•'])
        .trim()
        .trim_end_matches('.')
        .to_ascii_lowercase();
    matches!(
        v.as_str(),
        "" | "n/a" | "na" | "none" | "null" | "nil" | "unknown" | "not available" | "-"
    )
}

impl Anchors {
    fn fields_mut(&mut self) -> [&mut String; 5] {
        [
            &mut self.user_intent,
            &mut self.execution_progress,
            &mut self.key_decision,
            &mut self.tried_solution,
            &mut self.next_step,
        ]
    }

    /// Takes every known value of `newer`; a value that says nothing never overwrites a known
    /// one. Unknown values are normalised to "N/A".
    pub fn merge(&mut self, newer: &Anchors) {
        let mut newer = newer.clone();
        for (mine, theirs) in self.fields_mut().into_iter().zip(newer.fields_mut()) {
            if !is_unknown(theirs) {
                *mine = theirs.trim().to_owned();
            } else if is_unknown(mine) {
                *mine = NOT_AVAILABLE.into();
            }
        }
    }
}

/// The running summary of everything before the checkpoint.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Summary {
    /// Prose, for the model.
    pub text: String,
    pub anchors: Anchors,
}

/// What a compaction was asked to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema, Default)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Compact when the tier calls for it and the gain is worthwhile.
    #[default]
    Auto,
    /// Compact at least at the full tier, whatever the utilization.
    Force,
    /// Plan as `auto` would, persist nothing.
    DryRun,
}

/// What started a compaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Trigger {
    Auto,
    Manual,
    OverflowRetry,
    /// The agent's own condensation (`POST /sessions/{id}/condense`).
    Condense,
}

/// One message of a view, before it is rendered for a provider. It borrows what it shows from
/// the events it is made of, so that building a view copies no content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ViewMessage<'a> {
    /// The event shown; absent for the summary message and placeholder results.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seq: Option<i64>,
    pub role: Role,
    /// The text (for a message with parts, its text parts joined).
    pub content: Cow<'a, str>,
    /// The parts of a message shown in full that came as parts; renderers write these
    /// instead of `content`.
    #[serde(default, skip_serializing_if = "no_parts")]
    pub parts: Cow<'a, [Part]>,
    /// Whether the message's reasoning parts are sent (an assistant turn of the current tool
    /// loop, in a format that takes them back); they are left out otherwise.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reasoning: bool,
    #[serde(default, skip_serializing_if = "no_calls")]
    pub tool_calls: Cow<'a, [ToolCall]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<Cow<'a, str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<Cow<'a, str>>,
    #[serde(default)]
    pub is_error: bool,
    pub projection: Projection,
    /// Tokens this message costs in the view.
    pub tokens: i64,
}

// serde's `skip_serializing_if` passes the field itself.
#[allow(clippy::ptr_arg)]
fn no_calls(calls: &Cow<'_, [ToolCall]>) -> bool {
    calls.is_empty()
}

#[allow(clippy::ptr_arg)]
fn no_parts(parts: &Cow<'_, [Part]>) -> bool {
    parts.is_empty()
}

impl<'a> ViewMessage<'a> {
    /// An event shown in full, borrowing what it shows; it costs the event's stored tokens.
    pub fn full(event: &'a Event) -> Self {
        let (tool_call_id, is_error) = match &event.body {
            EventBody::Message(m) => (m.tool_call_id.as_deref(), m.is_error.unwrap_or(false)),
            _ => (None, false),
        };
        ViewMessage {
            seq: Some(event.seq),
            role: event.body.shown_role(),
            content: event.body.shown_text(),
            parts: Cow::Borrowed(event.body.parts()),
            reasoning: false,
            tool_calls: Cow::Borrowed(event.body.tool_calls()),
            tool_call_id: tool_call_id.map(Cow::Borrowed),
            name: event.body.name().map(Cow::Borrowed),
            is_error,
            projection: Projection::Full,
            tokens: event.tokens,
        }
    }

    /// The bytes of what the message shows in text: its content and its calls' arguments. A
    /// count kept with it stands while the message is shown at this length.
    pub fn shown_bytes(&self) -> i64 {
        let calls: usize = self
            .tool_calls
            .iter()
            .map(|c| c.arguments_text().len())
            .sum();
        (self.content.len() + calls) as i64
    }

    /// What this message costs as sent (see [`Tokenizer::count_message`]): for an event shown
    /// in full, the same as its stored tokens when they were counted with `tokenizer`.
    pub fn cost(&self, tokenizer: Tokenizer) -> i64 {
        let calls = self
            .tool_calls
            .iter()
            .map(|c| (c.name.as_str(), c.arguments_text()));
        // A tool result's name is not sent (see `EventBody::sent_name`).
        let name = self.name.as_deref().filter(|_| self.role != Role::Tool);
        tokenizer.count_message(&self.content, calls, name)
            + parts_tokens(&self.parts, tokenizer, self.reasoning)
    }
}

impl ViewMessage<'_> {
    /// The message with everything it borrows copied.
    pub fn into_owned(self) -> ViewMessage<'static> {
        ViewMessage {
            seq: self.seq,
            role: self.role,
            content: Cow::Owned(self.content.into_owned()),
            parts: Cow::Owned(self.parts.into_owned()),
            reasoning: self.reasoning,
            tool_calls: Cow::Owned(self.tool_calls.into_owned()),
            tool_call_id: self.tool_call_id.map(|id| Cow::Owned(id.into_owned())),
            name: self.name.map(|name| Cow::Owned(name.into_owned())),
            is_error: self.is_error,
            projection: self.projection,
            tokens: self.tokens,
        }
    }
}

/// An item shown by reference to its observation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct OffloadedItem {
    pub seq: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// Characters of the full content.
    pub chars: i64,
    /// Tokens of the full content.
    pub tokens: i64,
    /// `observation://<event-id>` to recall it by.
    pub uri: String,
}

/// Whether a model's summary was used.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SummarizerOutcome {
    /// The model answered within the deadline and its narrative was accepted.
    Used,
    /// The deterministic summary stands in; `fallback_reason` says why.
    #[default]
    Fallback,
    /// A model's summary prepared ahead of the compaction was used.
    Prepared,
}

/// Why the deterministic summary stands in for a model's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum FallbackReason {
    /// The model did not answer within the deadline, or no call slot freed up in time.
    Timeout,
    /// The model answered an HTTP error.
    HttpStatus,
    /// The model could not be reached.
    Unreachable,
    /// The provider's answer is not its API's JSON.
    Malformed,
    /// The model's narrative was empty, too long, not the JSON asked for, or without anchors.
    RefusedNarrative,
    /// Recent calls failed: the model is left alone for a while.
    CircuitOpen,
    /// A concurrent compaction changed what this one folds after the model was asked once.
    AlreadyAsked,
    /// The compaction is a dry run, which never calls a model.
    DryRun,
    /// The model's summary of the fold was still being prepared, and the fold could not wait.
    NotPrepared,
    /// No model is configured, or the tier never asks one (emergency).
    NoneConfigured,
    /// The model's window cannot hold the instructions and the earlier summary with its answer
    /// and a reserve of 4,096 tokens: it is not asked.
    InputTooLarge,
}

/// Which summariser made a summary, what happened and what it cost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SummarizerInfo {
    /// `openai`, `anthropic` or `deterministic`.
    pub kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    // Absent from records written before it existed; always in answers.
    #[serde(default)]
    #[schema(required = true)]
    pub outcome: SummarizerOutcome,
    /// Null when the model's summary was used.
    #[serde(default)]
    #[schema(required = true)]
    pub fallback_reason: Option<FallbackReason>,
    /// Calls made to the model for this summary.
    #[serde(default)]
    #[schema(required = true)]
    pub attempts: i64,
    pub latency_ms: f64,
    /// Tokens spent, also when the answer was refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<i64>,
    /// The model stopped at its output-token limit.
    #[serde(default)]
    #[schema(required = true)]
    pub output_truncated: bool,
}

impl SummarizerInfo {
    /// The deterministic summariser's, standing in for `reason`.
    pub fn deterministic(reason: FallbackReason) -> Self {
        Self {
            kind: "deterministic".into(),
            model: None,
            outcome: SummarizerOutcome::Fallback,
            fallback_reason: Some(reason),
            attempts: 0,
            latency_ms: 0.0,
            input_tokens: None,
            output_tokens: None,
            output_truncated: false,
        }
    }
}

/// What tool-pair repair changed so that the view is a valid provider request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Repairs {
    pub orphan_results_dropped: i64,
    pub placeholder_results_inserted: i64,
}

/// What one compaction did, exactly.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct CompactionRecord {
    pub id: Uuid,
    pub session_id: Uuid,
    pub created_at: DateTime<Utc>,
    /// The newest event the view covers.
    pub head_seq: i64,
    pub policy: super::session::Policy,
    pub trigger: Trigger,
    pub tier: Tier,
    /// Whether the view's middle changed (false: the view is the previous view plus new events).
    pub acted: bool,
    /// Tokens of the view (messages, tool schemas and reserved output) before and after.
    pub tokens_before: i64,
    pub tokens_after: i64,
    pub items_before: i64,
    pub items_after: i64,
    /// The context window.
    pub budget: i64,
    /// ctxd's own count of the request's input after compaction (messages and tool schemas),
    /// before calibration: what `POST /sessions/{id}/usage` compares the provider's count with.
    pub input_tokens_estimate: i64,
    /// tokens_after / tokens_before.
    pub compression_ratio: f64,
    pub anchors: Anchors,
    pub offloaded: Vec<OffloadedItem>,
    pub summarized_seqs: Vec<i64>,
    pub evicted_seqs: Vec<i64>,
    /// Seqs of the tail kept verbatim.
    pub preserved_tail: Vec<i64>,
    pub summary_text: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summarizer: Option<SummarizerInfo>,
    pub repairs: Repairs,
    /// How many leading messages of the previous view are unchanged.
    pub prefix_kept: i64,
    pub duration_ms: f64,
    /// What failed, when something did (the view is still valid: the fallback was used).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Marks the id of a compaction that was not stored (see [`unrecorded_id`]): 22 bits of a
/// UUIDv7's random part.
const UNRECORDED_TAG: u32 = 0x3C7D0;

/// The id a compaction that was not stored (a dry run, or a call that changed nothing) answers
/// with: `id` (a UUIDv7, so still ordered by time) with its random part carrying a tag and
/// `estimate`, ctxd's count of the view's request. `POST /usage` reads the count back from the
/// id, so the id of every compact answer calibrates, stored or not, with no write per call.
pub fn unrecorded_id(id: Uuid, estimate: i64) -> Uuid {
    let mut bytes = *id.as_bytes();
    let estimate = estimate.clamp(0, (1 << 40) - 1) as u64;
    // Byte 8 keeps the variant (0b10) in its top bits; the tag takes its other 6 bits and the
    // next two bytes; the count the last five.
    bytes[8] = 0b1000_0000 | ((UNRECORDED_TAG >> 16) as u8 & 0b0011_1111);
    bytes[9] = (UNRECORDED_TAG >> 8) as u8;
    bytes[10] = UNRECORDED_TAG as u8;
    bytes[11..16].copy_from_slice(&estimate.to_be_bytes()[3..8]);
    Uuid::from_bytes(bytes)
}

/// The count an [`unrecorded_id`] carries; None for any other id.
pub fn unrecorded_estimate(id: Uuid) -> Option<i64> {
    let bytes = id.as_bytes();
    let tag = (u32::from(bytes[8] & 0b0011_1111) << 16)
        | (u32::from(bytes[9]) << 8)
        | u32::from(bytes[10]);
    if id.get_version_num() != 7 || tag != UNRECORDED_TAG {
        return None;
    }
    let mut estimate = [0u8; 8];
    estimate[3..8].copy_from_slice(&bytes[11..16]);
    Some(i64::from_be_bytes(estimate))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unrecorded_id_carries_its_count_and_stays_a_uuidv7() {
        let id = Uuid::now_v7();
        let marked = unrecorded_id(id, 51_234);
        assert_eq!(marked.get_version_num(), 7);
        assert_eq!(marked.get_variant(), uuid::Variant::RFC4122);
        assert_eq!(
            marked.as_bytes()[..8],
            id.as_bytes()[..8],
            "same time, same order"
        );
        assert_eq!(unrecorded_estimate(marked), Some(51_234));
        assert_eq!(unrecorded_estimate(id), None);
        assert_eq!(unrecorded_estimate(Uuid::nil()), None);
    }

    #[test]
    fn every_spelling_of_none_is_unknown() {
        for v in [
            "N/A", "- N/A", "n/a", "None", "none.", "", "  ", "null", "* n/a",
        ] {
            assert!(is_unknown(v), "{v:?}");
        }
        for v in ["Fix the login bug", "No tests yet", "nothing failed so far"] {
            assert!(!is_unknown(v), "{v:?}");
        }
    }

    #[test]
    fn merging_never_regresses_a_known_anchor() {
        let mut anchors = Anchors {
            user_intent: "Fix the login bug".into(),
            ..Anchors::default()
        };
        anchors.merge(&Anchors {
            user_intent: "- N/A".into(),
            next_step: "Run the tests".into(),
            execution_progress: "None".into(),
            ..Anchors::default()
        });
        assert_eq!(anchors.user_intent, "Fix the login bug");
        assert_eq!(anchors.next_step, "Run the tests");
        assert_eq!(anchors.execution_progress, NOT_AVAILABLE);
        anchors.merge(&Anchors {
            user_intent: "Also fix signup".into(),
            ..Anchors::default()
        });
        assert_eq!(anchors.user_intent, "Also fix signup");
    }
}
