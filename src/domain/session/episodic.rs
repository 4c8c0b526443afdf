//! The episodic policy's settings.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// How eager a tool's completed exchanges are to leave the view under the episodic policy:
/// `0` first (writes and edits: their outcome is in the files), `1` next (reads), `2` last
/// (shell output and errors, which the agent reasons from).
pub const MAX_TOOL_PRIORITY: u8 = 2;

/// The episodic policy's settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EpisodicConfig {
    /// Utilization at which eviction starts.
    #[serde(default = "EpisodicConfig::default_trigger")]
    #[schema(default = 0.8, exclusive_minimum = 0, maximum = 1)]
    pub trigger: f64,
    /// Utilization eviction brings the view down to. Each eviction rewrites the view's middle,
    /// which a provider's prompt cache then misses; a lower target frees more at once, so
    /// evictions come less often.
    #[serde(default = "EpisodicConfig::default_target")]
    #[schema(default = 0.4, exclusive_minimum = 0, maximum = 1)]
    pub target: f64,
    /// Tool names to their eviction priority (0, 1 or 2, evicted in that order), over the
    /// defaults by name: writes and edits 0, reads and searches 1, shells and commands 2 (and
    /// any failed result 2).
    #[serde(default)]
    pub tool_priorities: BTreeMap<String, u8>,
    /// The longest tool result shown in full, in characters, even while active: a longer one
    /// is shown as its head and tail with its reference. Half the room bounds it too.
    #[serde(default = "EpisodicConfig::default_observation_max_chars")]
    #[schema(default = 16000, minimum = 1200, maximum = 1000000)]
    pub observation_max_chars: u32,
}

impl EpisodicConfig {
    /// Utilization from which the fold an eviction would make is named, so that a summariser
    /// model can prepare its summary before the eviction needs it: a quarter of the way back
    /// from the trigger to the target (0.7 by default, the progressive policy's warn tier).
    pub fn prepare_from(&self) -> f64 {
        self.trigger - (self.trigger - self.target) / 4.0
    }

    fn default_observation_max_chars() -> u32 {
        16_000
    }
    fn default_trigger() -> f64 {
        0.80
    }
    fn default_target() -> f64 {
        0.40
    }

    /// The eviction priority of a completed exchange with tool `name`.
    pub fn priority(&self, name: &str, is_error: bool) -> u8 {
        if let Some(&p) = self.tool_priorities.get(name) {
            return p;
        }
        if is_error {
            return MAX_TOOL_PRIORITY;
        }
        let lower = name.to_ascii_lowercase();
        let has = |words: &[&str]| words.iter().any(|w| lower.contains(w));
        if has(&[
            "write", "edit", "patch", "replace", "create", "insert", "delete", "move",
        ]) {
            0
        } else if has(&[
            "bash", "shell", "exec", "run", "command", "terminal", "test", "build",
        ]) {
            MAX_TOOL_PRIORITY
        } else {
            1
        }
    }
}

impl Default for EpisodicConfig {
    fn default() -> Self {
        Self {
            trigger: Self::default_trigger(),
            target: Self::default_target(),
            tool_priorities: BTreeMap::new(),
            observation_max_chars: Self::default_observation_max_chars(),
        }
    }
}
