//! Token accounting: how much of a context window an event costs.
//!
//! Costs are computed once, at append, with the session's tokenizer and stored with the event.
//! The BPE encodings come from `bpe-openai`, chosen by measurement over `tiktoken-rs`
//! (docs/benchmarks.md); both give identical counts. [`count_all`] counts a batch on the
//! blocking pool.

mod batch;

pub use batch::{count_all, PARALLEL_COUNT_BYTES};

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Framing a provider adds around every message (role, separators).
pub const MESSAGE_OVERHEAD: i64 = 4;
/// Framing around every tool call (id, type, structure).
pub const TOOL_CALL_OVERHEAD: i64 = 4;

/// How text is turned into a token count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema, Default)]
#[serde(rename_all = "snake_case")]
pub enum Tokenizer {
    /// OpenAI's encoding for GPT-4o and later.
    #[default]
    O200kBase,
    /// OpenAI's encoding for GPT-4 and GPT-3.5.
    Cl100kBase,
    /// ceil(characters / 4): a fast estimate for models without a public tokenizer.
    Chars4,
}

impl Tokenizer {
    /// Tokens in `text`.
    pub fn count(self, text: &str) -> i64 {
        if text.is_empty() {
            return 0;
        }
        let n = match self {
            Self::O200kBase => bpe_openai::o200k_base().count(text),
            Self::Cl100kBase => bpe_openai::cl100k_base().count(text),
            Self::Chars4 => text.chars().count().div_ceil(4),
        };
        n as i64
    }

    /// The token cost of a message as a provider is sent it: the per-message framing, its text,
    /// its tool calls (framing, name, arguments) and its participant name.
    pub fn count_message<N: AsRef<str>, A: AsRef<str>>(
        self,
        content: &str,
        calls: impl IntoIterator<Item = (N, A)>,
        name: Option<&str>,
    ) -> i64 {
        let calls: i64 = calls
            .into_iter()
            .map(|(name, arguments)| {
                TOOL_CALL_OVERHEAD + self.count(name.as_ref()) + self.count(arguments.as_ref())
            })
            .sum();
        MESSAGE_OVERHEAD + self.count(content) + calls + name.map_or(0, |n| 1 + self.count(n))
    }

    /// Warms the encoding's tables so the first request does not pay for loading them.
    pub fn preload(self) {
        self.count("warm up");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodings_count_known_strings() {
        assert_eq!(Tokenizer::O200kBase.count("Hello, world!"), 4);
        assert_eq!(Tokenizer::Cl100kBase.count("Hello, world!"), 4);
        assert_eq!(Tokenizer::Chars4.count("Hello, world!"), 4); // 13 chars
        assert_eq!(Tokenizer::Chars4.count("héllo"), 2); // characters, not bytes
        assert_eq!(Tokenizer::O200kBase.count(""), 0);
    }

    #[test]
    fn a_message_costs_its_text_calls_name_and_framing() {
        let t = Tokenizer::Chars4;
        let calls = [("read", "{\"path\":\"a\"}")]; // 1 + 12 chars: 3
        assert_eq!(
            t.count_message("abcdefgh", calls, Some("bob")), // 2, name 1 + 1
            MESSAGE_OVERHEAD + 2 + TOOL_CALL_OVERHEAD + 1 + 3 + 2
        );
        assert_eq!(t.count_message("", [("", ""); 0], None), MESSAGE_OVERHEAD);
    }
}
