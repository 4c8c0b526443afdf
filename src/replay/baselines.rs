//! The plain alternatives a policy must beat, computed in the same replay from the same
//! history: no compaction, sliding truncation (every turn, the newest messages that fit),
//! chunked truncation (when over, drop the oldest down to half the window, or as little as
//! keeps the newest message when that alone is over half) and observation
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
    /// pairs repaired, each message with its tokens. `costs` are the history's messages'
    /// tokens ([`message_tokens`]), kept by the caller as the history grows so that no
    /// message is counted twice.
    pub fn view(
        &mut self,
        history: &[Value],
        costs: &[i64],
        budget: i64,
        tokenizer: Tokenizer,
    ) -> Vec<(Value, i64)> {
        repaired(self.bounded(history, costs, budget, tokenizer), tokenizer)
    }

    fn bounded(
        &mut self,
        history: &[Value],
        costs: &[i64],
        budget: i64,
        tokenizer: Tokenizer,
    ) -> Vec<(Value, i64)> {
        match self.baseline {
            Baseline::NoCompaction => assemble(history, costs, 0, 0),
            Baseline::Sliding => {
                let start = newest_that_fit(history, costs, budget, 0);
                assemble(history, costs, start, 0)
            }
            Baseline::Chunked => {
                if total(history, costs, self.start) > budget {
                    let half = newest_that_fit(history, costs, budget / 2, self.start);
                    // A view without the newest message would not answer the agent's turn:
                    // when that message alone is over half the window, drop only what the
                    // window needs.
                    self.start = if half == history.len() {
                        newest_that_fit(history, costs, budget, self.start)
                    } else {
                        half
                    };
                }
                assemble(history, costs, self.start, 0)
            }
            Baseline::Masking => {
                let keep_from = masking_keeps_from(history);
                let masked_cost = message_tokens(&masked(&Value::Null), tokenizer);
                let costs: Vec<i64> = history
                    .iter()
                    .zip(costs)
                    .enumerate()
                    .map(|(i, (m, &c))| {
                        if i < keep_from && m["role"] == "tool" {
                            masked_cost
                        } else {
                            c
                        }
                    })
                    .collect();
                let start = newest_that_fit(history, &costs, budget, 0);
                assemble(history, &costs, start, keep_from)
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
            let (name, arguments) = super::input::chat_call(c);
            TOOL_CALL_OVERHEAD + tokenizer.count(name) + tokenizer.count(&arguments)
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

/// System messages, then everything from `start`, tool outputs before `mask_before`
/// masked; each with its tokens.
fn assemble(
    history: &[Value],
    costs: &[i64],
    start: usize,
    mask_before: usize,
) -> Vec<(Value, i64)> {
    history
        .iter()
        .zip(costs)
        .enumerate()
        .filter(|(i, (m, _))| *i >= start || is_system(m))
        .map(|(i, (m, &c))| {
            if i < mask_before && m["role"] == "tool" {
                (masked(m), c)
            } else {
                (m.clone(), c)
            }
        })
        .collect()
}

/// The view with a placeholder result for every call left unanswered (right after the
/// results its message got) and without results whose call is not in it.
fn repaired(view: Vec<(Value, i64)>, tokenizer: Tokenizer) -> Vec<(Value, i64)> {
    let mut out = Vec::with_capacity(view.len());
    let mut open: Vec<String> = Vec::new();
    let close = |open: &mut Vec<String>, out: &mut Vec<(Value, i64)>| {
        for id in open.drain(..) {
            let placeholder = serde_json::json!({"role": "tool", "tool_call_id": id,
                "content": "[no result was recorded for this call]"});
            let cost = message_tokens(&placeholder, tokenizer);
            out.push((placeholder, cost));
        }
    };
    for (message, cost) in view {
        if message["role"] == "tool" {
            let id = message["tool_call_id"].as_str().unwrap_or_default();
            if let Some(k) = open.iter().position(|c| c == id) {
                open.remove(k);
                out.push((message, cost));
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
        out.push((message, cost));
    }
    close(&mut open, &mut out);
    out
}

/// Where the newest [`MASKING_KEEPS`] tool outputs begin: older ones are masked.
fn masking_keeps_from(history: &[Value]) -> usize {
    let mut kept = 0;
    for (i, m) in history.iter().enumerate().rev() {
        if m["role"] == "tool" {
            kept += 1;
            if kept == MASKING_KEEPS {
                return i;
            }
        }
    }
    0
}

/// A tool output with its content replaced by the placeholder, without copying the content.
fn masked(message: &Value) -> Value {
    let mut out = serde_json::Map::new();
    for (key, value) in message.as_object().into_iter().flatten() {
        if key != "content" {
            out.insert(key.clone(), value.clone());
        }
    }
    out.insert("content".into(), Value::String(MASKED.into()));
    Value::Object(out)
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

    /// A newest result over half the window but within it stays, with its call: chunked
    /// truncation drops only what the window needs then, never the turn it answers.
    #[test]
    fn chunked_truncation_keeps_a_newest_result_over_half_the_window() {
        let t = Tokenizer::Chars4;
        let mut h = history();
        h.push(json!({"role": "user", "content": "read the log"}));
        h.push(
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": "log",
            "type": "function", "function": {"name": "read", "arguments": "{}"}}]}),
        );
        h.push(json!({"role": "tool", "tool_call_id": "log", "content": "y".repeat(2_400)}));
        let costs: Vec<i64> = h.iter().map(|m| message_tokens(m, t)).collect();
        let view = messages(Bounder::new(Baseline::Chunked).view(&h, &costs, 1_000, t));
        let tokens: i64 = view.iter().map(|m| message_tokens(m, t)).sum();
        assert!(tokens <= 1_000, "{tokens}");
        assert_eq!(view.last(), h.last());
        assert_eq!(view[view.len() - 2]["tool_calls"][0]["id"], "log");
    }

    #[test]
    fn a_call_left_unanswered_gets_a_placeholder_and_an_orphan_result_goes() {
        let view = vec![
            json!({"role": "tool", "tool_call_id": "gone", "content": "x"}),
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}),
            json!({"role": "user", "content": "next"}),
        ];
        let t = Tokenizer::Chars4;
        let fixed = repaired(view.into_iter().map(|m| (m, 1)).collect(), t);
        assert_eq!(fixed.len(), 3);
        assert_eq!(fixed[1].0["tool_call_id"], "a");
        assert!(fixed[1].1 > 1, "the placeholder is counted");
        assert!(validate_openai(&json!({"messages": messages(fixed)})).is_ok());
    }

    fn messages(view: Vec<(Value, i64)>) -> Vec<Value> {
        view.into_iter().map(|(m, _)| m).collect()
    }

    #[test]
    fn every_baseline_fits_keeps_the_system_prompt_and_stays_valid() {
        let t = Tokenizer::Chars4;
        let h = history();
        let costs: Vec<i64> = h.iter().map(|m| message_tokens(m, t)).collect();
        for baseline in Baseline::ALL {
            let mut bounder = Bounder::new(baseline);
            // At every turn: before each assistant message.
            for end in (2..h.len()).filter(|&e| h[e]["role"] == "assistant") {
                let view = bounder.view(&h[..end], &costs[..end], 1_000, t);
                // The tokens given with each message are what it costs.
                for (m, cost) in &view {
                    assert_eq!(*cost, message_tokens(m, t), "{baseline:?} at {end}: {m}");
                }
                let tokens: i64 = view.iter().map(|(_, c)| c).sum();
                let view = messages(view);
                assert_eq!(view[0]["role"], "system", "{baseline:?}");
                assert!(
                    validate_openai(&json!({"messages": view})).is_ok(),
                    "{baseline:?} at {end}"
                );
                if baseline != Baseline::NoCompaction {
                    assert!(tokens <= 1_000, "{baseline:?} at {end}: {tokens}");
                }
            }
        }
        // Chunked truncation drops to half the window, then grows: its prefix is stable.
        let mut chunked = Bounder::new(Baseline::Chunked);
        let a = messages(chunked.view(&h[..59], &costs[..59], 1_000, t));
        let b = messages(chunked.view(&h[..62], &costs[..62], 1_000, t));
        assert_eq!(a[..], b[..a.len()]);
    }

    #[test]
    fn masking_keeps_the_newest_tool_outputs_and_masks_the_rest() {
        let t = Tokenizer::Chars4;
        let h = history();
        let costs: Vec<i64> = h.iter().map(|m| message_tokens(m, t)).collect();
        let view = messages(Bounder::new(Baseline::Masking).view(&h, &costs, 100_000, t));
        assert_eq!(view.len(), h.len(), "nothing is dropped when it fits");
        let outputs: Vec<&Value> = view.iter().filter(|m| m["role"] == "tool").collect();
        let (old, new) = outputs.split_at(outputs.len() - MASKING_KEEPS);
        assert!(old
            .iter()
            .all(|m| m["content"] == MASKED && m["tool_call_id"].is_string()));
        assert!(new.iter().all(|m| m["content"] != MASKED));
    }
}
