//! The plain alternatives a policy must beat, computed in the same replay from the same
//! history: no compaction, sliding truncation (every turn, the newest messages that fit),
//! chunked truncation (when over, drop the oldest down to half the window) and observation
//! masking (tool outputs older than the newest few replaced by a one-line placeholder, then
//! sliding truncation if still over). System messages always stay; a cut never leaves a tool
//! result without its call, so every baseline view is a valid request too.

use serde_json::Value;

use crate::tokens::{Tokenizer, MESSAGE_OVERHEAD, TOOL_CALL_OVERHEAD};

/// Tool outputs observation masking keeps in full.
pub const MASKING_KEEPS: usize = 10;

/// What stands in for a masked tool output.
const MASKED: &str = "[earlier tool output omitted]";

/// A plain way to bound a conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Baseline {
    NoCompaction,
    Sliding,
    Chunked,
    Masking,
}

impl Baseline {
    pub const ALL: [Baseline; 4] = [
        Baseline::NoCompaction,
        Baseline::Sliding,
        Baseline::Chunked,
        Baseline::Masking,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::NoCompaction => "no_compaction",
            Self::Sliding => "sliding_truncation",
            Self::Chunked => "chunked_truncation",
            Self::Masking => "observation_masking",
        }
    }
}

/// A baseline as a replay goes: chunked truncation remembers where its window starts.
#[derive(Debug, Clone)]
pub struct Bounder {
    pub baseline: Baseline,
    start: usize,
}

impl Bounder {
    pub fn new(baseline: Baseline) -> Self {
        Self { baseline, start: 0 }
    }

    /// The view of `history` this baseline sends with `budget` tokens for messages, its tool
    /// pairs repaired.
    pub fn view(&mut self, history: &[Value], budget: i64, tokenizer: Tokenizer) -> Vec<Value> {
        repaired(self.bounded(history, budget, tokenizer))
    }

    fn bounded(&mut self, history: &[Value], budget: i64, tokenizer: Tokenizer) -> Vec<Value> {
        let costs: Vec<i64> = history
            .iter()
            .map(|m| message_tokens(m, tokenizer))
            .collect();
        match self.baseline {
            Baseline::NoCompaction => history.to_vec(),
            Baseline::Sliding => {
                let start = newest_that_fit(history, &costs, budget, 0);
                assemble(history, start)
            }
            Baseline::Chunked => {
                if total(history, &costs, self.start) > budget {
                    self.start = newest_that_fit(history, &costs, budget / 2, self.start);
                }
                assemble(history, self.start)
            }
            Baseline::Masking => {
                let masked = mask(history);
                let costs: Vec<i64> = masked
                    .iter()
                    .map(|m| message_tokens(m, tokenizer))
                    .collect();
                let start = newest_that_fit(&masked, &costs, budget, 0);
                assemble(&masked, start)
            }
        }
    }
}

/// The tokens a chat message costs as ctxd counts one.
pub fn message_tokens(message: &Value, tokenizer: Tokenizer) -> i64 {
    let text = match &message["content"] {
        Value::String(s) => tokenizer.count(s),
        Value::Null => 0,
        other => tokenizer.count(&other.to_string()),
    };
    let calls: i64 = message["tool_calls"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            let f = &c["function"];
            TOOL_CALL_OVERHEAD
                + tokenizer.count(f["name"].as_str().unwrap_or_default())
                + tokenizer.count(f["arguments"].as_str().unwrap_or_default())
        })
        .sum();
    MESSAGE_OVERHEAD + text + calls
}

fn is_system(message: &Value) -> bool {
    message["role"] == "system"
}

/// Tokens of the view that starts at `start` (system messages before it included).
fn total(history: &[Value], costs: &[i64], start: usize) -> i64 {
    history
        .iter()
        .zip(costs)
        .enumerate()
        .filter(|(i, (m, _))| *i >= start || is_system(m))
        .map(|(_, (_, c))| c)
        .sum()
}

/// The earliest start at or after `from` whose view fits `budget` and begins with no tool
/// result (whose call would be cut).
fn newest_that_fit(history: &[Value], costs: &[i64], budget: i64, from: usize) -> usize {
    let mut start = from;
    let mut tokens = total(history, costs, start);
    while start < history.len() && (tokens > budget || history[start]["role"] == "tool") {
        if !is_system(&history[start]) {
            tokens -= costs[start];
        }
        start += 1;
    }
    start
}

/// System messages, then everything from `start`.
fn assemble(history: &[Value], start: usize) -> Vec<Value> {
    history
        .iter()
        .enumerate()
        .filter(|(i, m)| *i >= start || is_system(m))
        .map(|(_, m)| m.clone())
        .collect()
}

/// The view with a placeholder result for every call left unanswered (right after the
/// results its message got) and without results whose call is not in it.
fn repaired(view: Vec<Value>) -> Vec<Value> {
    let mut out = Vec::with_capacity(view.len());
    let mut open: Vec<String> = Vec::new();
    let close = |open: &mut Vec<String>, out: &mut Vec<Value>| {
        for id in open.drain(..) {
            out.push(serde_json::json!({"role": "tool", "tool_call_id": id,
                "content": "[no result was recorded for this call]"}));
        }
    };
    for message in view {
        if message["role"] == "tool" {
            let id = message["tool_call_id"].as_str().unwrap_or_default();
            if let Some(k) = open.iter().position(|c| c == id) {
                open.remove(k);
                out.push(message);
            }
            continue;
        }
        close(&mut open, &mut out);
        open.extend(
            message["tool_calls"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|c| c["id"].as_str().map(str::to_owned)),
        );
        out.push(message);
    }
    close(&mut open, &mut out);
    out
}

/// Tool outputs older than the newest [`MASKING_KEEPS`] replaced by a placeholder.
fn mask(history: &[Value]) -> Vec<Value> {
    let tools = history.iter().filter(|m| m["role"] == "tool").count();
    let mut seen = 0;
    history
        .iter()
        .map(|m| {
            if m["role"] != "tool" {
                return m.clone();
            }
            seen += 1;
            if tools - seen < MASKING_KEEPS {
                m.clone()
            } else {
                let mut masked = m.clone();
                masked["content"] = Value::String(MASKED.into());
                masked
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::engine::validate::validate_openai;

    fn history() -> Vec<Value> {
        let mut h = vec![json!({"role": "system", "content": "Be brief."})];
        for i in 0..30 {
            h.push(json!({"role": "user", "content": format!("request {i}")}));
            h.push(
                json!({"role": "assistant", "content": null, "tool_calls": [{"id": format!("c{i}"),
                "type": "function", "function": {"name": "read", "arguments": "{}"}}]}),
            );
            h.push(json!({"role": "tool", "tool_call_id": format!("c{i}"), "content": "x".repeat(400)}));
        }
        h
    }

    #[test]
    fn a_call_left_unanswered_gets_a_placeholder_and_an_orphan_result_goes() {
        let view = vec![
            json!({"role": "tool", "tool_call_id": "gone", "content": "x"}),
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}),
            json!({"role": "user", "content": "next"}),
        ];
        let fixed = repaired(view);
        assert_eq!(fixed.len(), 3);
        assert_eq!(fixed[1]["tool_call_id"], "a");
        assert!(validate_openai(&json!({"messages": fixed})).is_ok());
    }

    #[test]
    fn every_baseline_fits_keeps_the_system_prompt_and_stays_valid() {
        let t = Tokenizer::Chars4;
        let h = history();
        for baseline in Baseline::ALL {
            let mut bounder = Bounder::new(baseline);
            // At every turn: before each assistant message.
            for end in (2..h.len()).filter(|&e| h[e]["role"] == "assistant") {
                let view = bounder.view(&h[..end], 1_000, t);
                assert_eq!(view[0]["role"], "system", "{baseline:?}");
                assert!(
                    validate_openai(&json!({"messages": view})).is_ok(),
                    "{baseline:?} at {end}"
                );
                let tokens: i64 = view.iter().map(|m| message_tokens(m, t)).sum();
                if baseline != Baseline::NoCompaction {
                    assert!(tokens <= 1_000, "{baseline:?} at {end}: {tokens}");
                }
            }
        }
        // Chunked truncation drops to half the window, then grows: its prefix is stable.
        let mut chunked = Bounder::new(Baseline::Chunked);
        let a = chunked.view(&h[..59], 1_000, t);
        let b = chunked.view(&h[..62], 1_000, t);
        assert_eq!(a[..], b[..a.len()]);
    }
}
