//! Token accounting: how much of a context window an event costs.
//!
//! Costs are computed once, at append, with the session's tokenizer and stored with the event.
//! The BPE encodings come from `bpe-openai`, chosen by measurement over `tiktoken-rs`
//! (docs/benchmarks.md); both give identical counts.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::domain::event::EventBody;

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

    /// The token cost of an event: its text, its tool calls' names and arguments, and the
    /// per-message framing.
    pub fn count_event(self, body: &EventBody) -> i64 {
        MESSAGE_OVERHEAD
            + match body {
                EventBody::Message(m) => {
                    let calls: i64 = m
                        .tool_calls
                        .iter()
                        .map(|c| {
                            TOOL_CALL_OVERHEAD
                                + self.count(&c.name)
                                + self.count(&c.arguments_text())
                        })
                        .sum();
                    self.count(&m.content)
                        + calls
                        + m.name.as_deref().map_or(0, |n| 1 + self.count(n))
                }
                EventBody::EpisodeStart(e) => {
                    self.count(&e.name) + 2 + self.count(&e.dependencies.join(", "))
                }
                EventBody::EpisodeEnd(e) => self.count(&e.name) + 2 + self.count(&e.conclusion),
                EventBody::Note(n) => self.count(&n.content),
            }
    }

    /// Warms the encoding's tables so the first request does not pay for loading them.
    pub fn preload(self) {
        self.count("warm up");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::event::{Message, Role, ToolCall};

    #[test]
    fn encodings_count_known_strings() {
        assert_eq!(Tokenizer::O200kBase.count("Hello, world!"), 4);
        assert_eq!(Tokenizer::Cl100kBase.count("Hello, world!"), 4);
        assert_eq!(Tokenizer::Chars4.count("Hello, world!"), 4); // 13 chars
        assert_eq!(Tokenizer::Chars4.count("héllo"), 2); // characters, not bytes
        assert_eq!(Tokenizer::O200kBase.count(""), 0);
    }

    #[test]
    fn an_event_costs_its_text_calls_and_framing() {
        let t = Tokenizer::Chars4;
        let body = EventBody::Message(Message {
            role: Role::Assistant,
            content: "abcdefgh".into(), // 2
            tool_calls: vec![ToolCall {
                id: "call_1".into(),
                name: "read".into(),                              // 1
                arguments: serde_json::json!("{\"path\":\"a\"}"), // 12 chars: 3
            }],
            tool_call_id: None,
            name: None,
            is_error: None,
        });
        assert_eq!(
            t.count_event(&body),
            MESSAGE_OVERHEAD + 2 + TOOL_CALL_OVERHEAD + 1 + 3
        );
    }
}
