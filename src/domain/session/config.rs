//! A session's configuration: the window, the tiers and the caps, and its wire form.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{EpisodicConfig, MAX_TOOL_PRIORITY};
use crate::domain::{has_nul, FieldError};
use crate::tokens::Tokenizer;

/// The smallest and largest context windows ctxd accepts.
const MIN_CONTEXT_WINDOW: u32 = 1_024;
const MAX_CONTEXT_WINDOW: u32 = 100_000_000;
/// The fewest and most error lines an item shown reduced names ([`SessionConfig::error_lines`]).
const MIN_ERROR_LINES: usize = 4;
const MAX_ERROR_LINES: usize = 48;

/// How a session's context is compacted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema, Default)]
#[serde(rename_all = "snake_case")]
pub enum Policy {
    /// Tiered compaction at the warn / soft / full / emergency thresholds.
    #[default]
    Progressive,
    /// Structured eviction: completed tool exchanges by tool priority, then completed episodes
    /// (actions before the explorations they depend on), then the oldest conversation into the
    /// summary; from the `episodic` trigger down to its target.
    Episodic,
}

/// Fractions of the context window at which each compaction tier starts (inclusive).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Thresholds {
    /// Where a compaction that acts brings the view down to, so that the next one is many
    /// turns away.
    #[serde(default = "Thresholds::default_low_water")]
    #[schema(default = 0.4, exclusive_minimum = 0, maximum = 1)]
    pub low_water: f64,
    #[serde(default = "Thresholds::default_warn")]
    #[schema(default = 0.7, exclusive_minimum = 0, maximum = 1)]
    pub warn: f64,
    #[serde(default = "Thresholds::default_soft")]
    #[schema(default = 0.8, exclusive_minimum = 0, maximum = 1)]
    pub soft: f64,
    #[serde(default = "Thresholds::default_full")]
    #[schema(default = 0.9, exclusive_minimum = 0, maximum = 1)]
    pub full: f64,
    #[serde(default = "Thresholds::default_emergency")]
    #[schema(default = 0.95, exclusive_minimum = 0, maximum = 1)]
    pub emergency: f64,
}

impl Thresholds {
    fn default_low_water() -> f64 {
        0.40
    }
    fn default_warn() -> f64 {
        0.70
    }
    fn default_soft() -> f64 {
        0.80
    }
    fn default_full() -> f64 {
        0.90
    }
    fn default_emergency() -> f64 {
        0.95
    }
}

impl Default for Thresholds {
    fn default() -> Self {
        Self {
            low_water: Self::default_low_water(),
            warn: Self::default_warn(),
            soft: Self::default_soft(),
            full: Self::default_full(),
            emergency: Self::default_emergency(),
        }
    }
}

/// A session's configuration, fixed at creation. Every field has a default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(from = "ConfigFields", deny_unknown_fields)]
pub struct SessionConfig {
    /// The model's context window in tokens.
    #[serde(default = "SessionConfig::default_context_window")]
    #[schema(default = 200000, minimum = 1024, maximum = 100000000)]
    pub context_window: u32,
    /// Tokens reserved for the model's reply; a view leaves them free. At least 1 and less
    /// than half the context window; when omitted, 8192 or a quarter of the context window,
    /// whichever is smaller.
    #[schema(required = false, minimum = 1)]
    pub max_output_tokens: u32,
    /// How token costs are counted.
    #[serde(default)]
    pub tokenizer: Tokenizer,
    /// How the context is compacted.
    #[serde(default)]
    pub policy: Policy,
    /// Utilization at which each tier starts.
    #[serde(default)]
    pub thresholds: Thresholds,
    /// The newest messages that are always kept verbatim.
    #[serde(default = "SessionConfig::default_min_tail_messages")]
    #[schema(default = 6, maximum = 10000)]
    pub min_tail_messages: u32,
    /// Tool results longer than this (in characters) are offloaded to observations when compacting.
    #[serde(default = "SessionConfig::default_offload_threshold_chars")]
    #[schema(default = 4000, minimum = 100, maximum = 100000000)]
    pub offload_threshold_chars: u32,
    /// A compaction rewrites the view's middle only when it frees at least this fraction of the
    /// window, so that the provider's prompt cache keeps hitting between compactions.
    #[serde(default = "SessionConfig::default_min_compaction_gain")]
    #[schema(default = 0.05, minimum = 0, maximum = 0.5)]
    pub min_compaction_gain: f64,
    /// The most tokens the verbatim tail may take, as a share of the room for messages (the
    /// window less the reserved output, the tool schemas, the system prompts and pinned items;
    /// at least a quarter of the window less the first two): older tool results of the tail
    /// beyond it are shown as excerpts. `min_tail_messages` stays a floor on the count.
    #[serde(default = "SessionConfig::default_tail_max_share")]
    #[schema(default = 0.10, exclusive_minimum = 0, maximum = 1)]
    pub tail_max_share: f64,
    /// The most tokens one tool result may take in full, as a share of the room for messages
    /// (as for `tail_max_share`): a larger one is shown as its head and tail with its `observation://` reference, even
    /// while recent.
    #[serde(default = "SessionConfig::default_item_max_share")]
    #[schema(default = 0.05, exclusive_minimum = 0, maximum = 1)]
    pub item_max_share: f64,
    /// The most tokens the system prompts may take in full, as a share of the room for messages
    /// (the window less the reserved output and the tool schemas). When they take more, a
    /// compaction that acts shows the longest as its head and tail with its `observation://`
    /// reference, so that the conversation keeps room beside them.
    #[serde(default = "SessionConfig::default_system_max_share")]
    #[schema(default = 0.25, exclusive_minimum = 0, maximum = 1)]
    pub system_max_share: f64,
    /// The longest summary, in characters (default: an eighth of the window in tokens, at four
    /// characters a token: at least 2000 and at most 32000, never more than the window).
    /// Answers show the size in use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 200, maximum = 100000000)]
    pub summary_max_chars: Option<u32>,
    /// The episodic policy's trigger, target and tool priorities.
    #[serde(default)]
    pub episodic: EpisodicConfig,
}

impl SessionConfig {
    fn default_context_window() -> u32 {
        200_000
    }
    /// The reserved output when none is given: 8192, or a quarter of the window if smaller,
    /// so that any valid window alone is a valid configuration.
    pub fn default_max_output_tokens(context_window: u32) -> u32 {
        8_192.min(context_window / 4)
    }
    fn default_min_tail_messages() -> u32 {
        6
    }
    fn default_offload_threshold_chars() -> u32 {
        4_000
    }
    fn default_min_compaction_gain() -> f64 {
        0.05
    }
    fn default_tail_max_share() -> f64 {
        0.10
    }
    fn default_item_max_share() -> f64 {
        0.05
    }
    /// A quarter of the room: what is left holds the summary, the tail and the turns until
    /// the next compaction (measured in docs/benchmarks.md, "System prompts over their share").
    fn default_system_max_share() -> f64 {
        0.25
    }

    /// The bound on the summary's length in characters.
    pub fn summary_max_chars(&self) -> usize {
        self.summary_max_chars
            .unwrap_or_else(|| Self::default_summary_max_chars(self.context_window))
            as usize
    }

    /// An eighth of the window in tokens, at four characters a token (8,000 characters at
    /// 16K), under either policy; at least 2,000 and at most 32,000 characters, never more
    /// than the window (measured in docs/benchmarks.md, "The summary at an eighth of the
    /// window", and for the episodic policy "The episodic summary at an eighth too").
    fn default_summary_max_chars(context_window: u32) -> u32 {
        (context_window / 8 * 4)
            .clamp(2_000, 32_000)
            .min(context_window)
    }

    /// The most error lines an item shown reduced names (a preview, an excerpt's middle, a
    /// reference): about a hundredth of the room for messages at 40 tokens a line, so 4 in a
    /// 16K window and 31 in a 128K one, at most [`MAX_ERROR_LINES`]. A compiler run may print
    /// dozens of distinct diagnostics, and a large window can afford to keep them.
    pub fn error_lines(&self) -> usize {
        let room = self.context_window.saturating_sub(self.max_output_tokens);
        (room as usize / 4_000).clamp(MIN_ERROR_LINES, MAX_ERROR_LINES)
    }

    /// The fewest tokens a compaction must free to rewrite the view's middle.
    pub fn min_gain_tokens(&self) -> i64 {
        (self.min_compaction_gain * f64::from(self.context_window)).ceil() as i64
    }

    /// The window's tokens a request uses: its messages as ctxd counts them, scaled by the
    /// calibration factor, plus the tool schemas sent with it and the reserved output.
    pub fn tokens_used(&self, message_tokens: i64, calibration: f64, tools_tokens: i64) -> i64 {
        (message_tokens as f64 * calibration).ceil() as i64
            + tools_tokens
            + i64::from(self.max_output_tokens)
    }

    /// The share of the window a request uses (see [`SessionConfig::tokens_used`]): what
    /// tiers are decided on, and what the context report shows.
    pub fn utilization(&self, message_tokens: i64, calibration: f64, tools_tokens: i64) -> f64 {
        self.tokens_used(message_tokens, calibration, tools_tokens) as f64
            / f64::from(self.context_window)
    }

    /// Every rule a configuration must satisfy, reported together.
    pub fn validate(&self) -> Vec<FieldError> {
        let mut errors = Vec::new();
        let mut fail = |field: &str, message: String| {
            errors.push(FieldError::new(format!("config.{field}"), message))
        };
        if !(MIN_CONTEXT_WINDOW..=MAX_CONTEXT_WINDOW).contains(&self.context_window) {
            fail(
                "context_window",
                format!("must be between {MIN_CONTEXT_WINDOW} and {MAX_CONTEXT_WINDOW} tokens"),
            );
        }
        if self.max_output_tokens == 0 || self.max_output_tokens >= self.context_window / 2 {
            fail(
                "max_output_tokens",
                format!(
                    "must be at least 1 and less than half the context window ({})",
                    self.context_window / 2
                ),
            );
        }
        let t = &self.thresholds;
        for (name, value) in [
            ("low_water", t.low_water),
            ("warn", t.warn),
            ("soft", t.soft),
            ("full", t.full),
            ("emergency", t.emergency),
        ] {
            if !(value > 0.0 && value <= 1.0) {
                fail(
                    &format!("thresholds.{name}"),
                    "must be a fraction of the window in (0, 1]".into(),
                );
            }
        }
        if !(t.low_water < t.warn && t.warn < t.soft && t.soft < t.full && t.full < t.emergency) {
            fail(
                "thresholds",
                "must increase strictly: low_water < warn < soft < full < emergency".into(),
            );
        }
        if self.min_tail_messages > 10_000 {
            fail("min_tail_messages", "must be at most 10000".into());
        }
        if !(100..=100_000_000).contains(&self.offload_threshold_chars) {
            fail(
                "offload_threshold_chars",
                "must be at least 100 and at most 100000000".into(),
            );
        }
        if !(0.0..=0.5).contains(&self.min_compaction_gain) {
            fail(
                "min_compaction_gain",
                "must be a fraction of the window between 0 and 0.5".into(),
            );
        }
        for (name, value) in [
            ("tail_max_share", self.tail_max_share),
            ("item_max_share", self.item_max_share),
            ("system_max_share", self.system_max_share),
        ] {
            if !(value > 0.0 && value <= 1.0) {
                fail(
                    name,
                    "must be a share of the room for messages in (0, 1]".into(),
                );
            }
        }
        let e = &self.episodic;
        for (name, value) in [("trigger", e.trigger), ("target", e.target)] {
            if !(value > 0.0 && value <= 1.0) {
                fail(
                    &format!("episodic.{name}"),
                    "must be a fraction of the window in (0, 1]".into(),
                );
            }
        }
        if e.target >= e.trigger {
            fail(
                "episodic.target",
                "must be below the trigger: eviction brings the view down to it".into(),
            );
        }
        for (name, priority) in &e.tool_priorities {
            if *priority > MAX_TOOL_PRIORITY {
                fail(
                    &format!("episodic.tool_priorities.{name}"),
                    format!("must be 0, 1 or {MAX_TOOL_PRIORITY}"),
                );
            }
            if name.is_empty() || name.chars().count() > 256 || has_nul(name) {
                fail(
                    "episodic.tool_priorities",
                    "tool names have 1 to 256 characters, without NUL".into(),
                );
            }
        }
        if !(1_200..=1_000_000).contains(&e.observation_max_chars) {
            fail(
                "episodic.observation_max_chars",
                "must be 1200 to 1000000 characters (a preview's size and more)".into(),
            );
        }
        if e.tool_priorities.len() > 1_000 {
            fail("episodic.tool_priorities", "at most 1000 tools".into());
        }
        // A window out of range is named above; the summary's size is then not judged by it.
        let window_ok = (MIN_CONTEXT_WINDOW..=MAX_CONTEXT_WINDOW).contains(&self.context_window);
        if let Some(max) = self.summary_max_chars.filter(|_| window_ok) {
            if !(200..=self.context_window).contains(&max) {
                fail(
                    "summary_max_chars",
                    "must be at least 200 and at most the context window (in characters)".into(),
                );
            }
        }
        errors
    }
}

impl Default for SessionConfig {
    fn default() -> Self {
        Self {
            context_window: Self::default_context_window(),
            max_output_tokens: Self::default_max_output_tokens(Self::default_context_window()),
            tokenizer: Tokenizer::default(),
            policy: Policy::default(),
            thresholds: Thresholds::default(),
            min_tail_messages: Self::default_min_tail_messages(),
            offload_threshold_chars: Self::default_offload_threshold_chars(),
            min_compaction_gain: Self::default_min_compaction_gain(),
            tail_max_share: Self::default_tail_max_share(),
            item_max_share: Self::default_item_max_share(),
            system_max_share: Self::default_system_max_share(),
            summary_max_chars: None,
            episodic: EpisodicConfig::default(),
        }
    }
}

/// The wire form of a [`SessionConfig`]: the reserved output's default depends on the window.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFields {
    #[serde(default = "SessionConfig::default_context_window")]
    context_window: u32,
    // Omitted takes the default; an explicit null is refused, as the document says.
    #[serde(default, deserialize_with = "present")]
    max_output_tokens: Option<u32>,
    #[serde(default)]
    tokenizer: Tokenizer,
    #[serde(default)]
    policy: Policy,
    #[serde(default)]
    thresholds: Thresholds,
    #[serde(default = "SessionConfig::default_min_tail_messages")]
    min_tail_messages: u32,
    #[serde(default = "SessionConfig::default_offload_threshold_chars")]
    offload_threshold_chars: u32,
    #[serde(default = "SessionConfig::default_min_compaction_gain")]
    min_compaction_gain: f64,
    #[serde(default = "SessionConfig::default_tail_max_share")]
    tail_max_share: f64,
    #[serde(default = "SessionConfig::default_item_max_share")]
    item_max_share: f64,
    #[serde(default = "SessionConfig::default_system_max_share")]
    system_max_share: f64,
    #[serde(default)]
    summary_max_chars: Option<u32>,
    #[serde(default)]
    episodic: EpisodicConfig,
}

/// A field that, when given, must hold a value (not null).
fn present<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(deserializer).map(Some)
}

impl From<ConfigFields> for SessionConfig {
    fn from(f: ConfigFields) -> Self {
        Self {
            context_window: f.context_window,
            max_output_tokens: f
                .max_output_tokens
                .unwrap_or_else(|| Self::default_max_output_tokens(f.context_window)),
            tokenizer: f.tokenizer,
            policy: f.policy,
            thresholds: f.thresholds,
            min_tail_messages: f.min_tail_messages,
            offload_threshold_chars: f.offload_threshold_chars,
            min_compaction_gain: f.min_compaction_gain,
            tail_max_share: f.tail_max_share,
            item_max_share: f.item_max_share,
            system_max_share: f.system_max_share,
            summary_max_chars: f.summary_max_chars,
            episodic: f.episodic,
        }
    }
}
