//! What the agent used that its view hid, and what getting it back would cost.
//!
//! A recorded agent saw every tool result in full. When its next message uses a particular
//! word (an identifier, a number, a name with a digit, an underscore or an inner capital) that
//! a tool result showed first (before the user or the agent wrote it), and the view sent before
//! that message does not hold it anywhere, an agent given that view would have had to fetch it
//! again: with ctxd, a recall of the result by its `observation://` reference; after plain
//! truncation, the same tool run again. Either is one more model request (the same view, its
//! prefix cached) with the slice it brings back. The replay counts those turns and prices them,
//! the same way for every policy, so that a policy that hides more cannot look cheaper for it.
//! It counts fewer than an agent would fetch: a name the view still holds somewhere (in a
//! summary, say) counts as held, whatever is gone around it.

use std::collections::{BTreeSet, HashMap, HashSet};

use serde_json::Value;

use super::facts::argument_strings;
use crate::domain::observation::DEFAULT_LIMIT;

/// The shortest word counted: shorter ones are too often the model's own.
const WORD_CHARS: usize = 6;

/// Characters a token holds, about, for pricing a recalled slice.
const CHARS_PER_TOKEN: i64 = 4;

/// The tool results of a session so far, by the particular words they showed.
#[derive(Debug, Default)]
pub struct Observed {
    /// Each word, with the first tool result that showed it (its index among the results)
    /// and the tokens a recall of it brings back.
    words: HashMap<String, (usize, i64)>,
    /// Words the user, the system prompt or the agent wrote before any tool result showed them:
    /// the agent's own (a name it chose, an exception it wrote into its code).
    own: HashSet<String>,
    results: usize,
}

impl Observed {
    /// Takes in one chat message of `tokens`: the words a tool result showed first.
    pub fn learn(&mut self, message: &Value, tokens: i64) {
        if message["role"] != "tool" {
            let text = message_text(message);
            let new = particular_words(&text).filter(|w| !self.words.contains_key(*w));
            let new: Vec<String> = new.map(str::to_owned).collect();
            self.own.extend(new);
            return;
        }
        let slice = tokens.min(DEFAULT_LIMIT as i64 / CHARS_PER_TOKEN);
        let source = self.results;
        self.results += 1;
        for word in particular_words(&content_text(message)) {
            if !self.own.contains(word) {
                self.words.entry(word.to_owned()).or_insert((source, slice));
            }
        }
    }

    /// The recalls an agent shown `view_text` would need before writing `next` (an assistant
    /// message): the tokens each brings back, one per tool result holding a word `next` uses
    /// that the view does not.
    pub fn recalls(&self, next: &Value, view_text: &str) -> Vec<i64> {
        let text = message_text(next);
        // One recall for each tool result holding a word the view lacks.
        let mut needed = BTreeSet::new();
        for word in particular_words(&text).collect::<BTreeSet<_>>() {
            if let Some(&source) = self.words.get(word) {
                if !needed.contains(&source) && !view_text.contains(word) {
                    needed.insert(source);
                }
            }
        }
        needed.into_iter().map(|(_, tokens)| tokens).collect()
    }
}

/// Words that name something particular: at least six letters, digits and underscores, with a
/// digit or an underscore, or in mixed case with a capital after the first letter
/// (`vsla_tensor_t`, `cpu_data`, `7ffd3a`, `parseConfig`). Plain words and shouted ones are
/// the model's own.
fn particular_words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| w.len() >= WORD_CHARS)
        .filter(|w| {
            w.bytes().any(|b| b.is_ascii_digit() || b == b'_')
                || (w.bytes().any(|b| b.is_ascii_lowercase())
                    && w.bytes().skip(1).any(|b| b.is_ascii_uppercase()))
        })
}

/// A message's text and its tool calls' arguments, as they read.
fn message_text(message: &Value) -> String {
    let mut text = content_text(message);
    for s in argument_strings(message) {
        text.push_str(&s);
        text.push('\n');
    }
    text
}

/// A message's text: its content, a string or parts' text.
fn content_text(message: &Value) -> String {
    let mut text = String::new();
    match &message["content"] {
        Value::String(s) => text.push_str(s),
        Value::Array(parts) => {
            for part in parts {
                if let Some(t) = part["text"].as_str() {
                    text.push_str(t);
                    text.push('\n');
                }
            }
        }
        _ => {}
    }
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn tool(text: &str) -> Value {
        json!({"role": "tool", "tool_call_id": "c1", "content": text})
    }

    fn said(text: &str) -> Value {
        json!({"role": "assistant", "content": text})
    }

    #[test]
    fn a_word_of_a_result_the_view_hides_is_one_recall_of_that_result() {
        let mut observed = Observed::default();
        observed.learn(&tool("fn parse_header() {}\nfn emit_footer() {}"), 12);
        let next = said("parse_header and emit_footer both need the new flag.");
        assert_eq!(
            observed.recalls(&next, "[ctxd: observation://3 read]"),
            [12]
        );
        // Shown, the words need nothing; one shown and one not, the result is still recalled.
        assert!(observed
            .recalls(&next, "parse_header emit_footer")
            .is_empty());
        assert_eq!(observed.recalls(&next, "emit_footer"), [12]);
    }

    #[test]
    fn each_result_holding_a_hidden_word_is_recalled_once_with_at_most_a_slice() {
        let mut observed = Observed::default();
        observed.learn(&tool("alpha_one alpha_two"), 5);
        observed.learn(&tool("beta_three"), 50_000);
        let next = said("alpha_one, alpha_two and beta_three");
        let slice = DEFAULT_LIMIT as i64 / CHARS_PER_TOKEN;
        assert_eq!(observed.recalls(&next, ""), [5, slice]);
    }

    #[test]
    fn plain_shouted_and_short_words_are_the_models_own() {
        let mut observed = Observed::default();
        observed.learn(&tool("Compiling release PRIVATE x_1 Error"), 9);
        let next = said("Compiling release PRIVATE x_1 Error");
        assert!(observed.recalls(&next, "").is_empty());
        // A name in mixed case, a number, an identifier are particular.
        observed.learn(&tool("parseConfig 7340032 cpu_data"), 9);
        for word in ["parseConfig", "7340032", "cpu_data"] {
            assert_eq!(observed.recalls(&said(word), ""), [9], "{word}");
        }
    }

    #[test]
    fn words_in_tool_call_arguments_count_as_they_read_not_as_json() {
        let mut observed = Observed::default();
        observed.learn(&tool("struct vsla_tensor {}"), 4);
        // `\nvsla_tensor` in the JSON text reads as a line break and the word.
        let arguments = json!({"old_string": "x\nvsla_tensor"}).to_string();
        let next = json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "c2", "type": "function",
             "function": {"name": "edit", "arguments": arguments}}]});
        assert_eq!(observed.recalls(&next, ""), [4]);
    }

    #[test]
    fn only_words_a_tool_result_showed_first_are_observed() {
        let mut observed = Observed::default();
        observed.learn(&json!({"role": "user", "content": "fix parse_header"}), 4);
        observed.learn(&said("parse_header is wrong"), 4);
        assert!(observed.recalls(&said("parse_header"), "").is_empty());
        // An exception the agent wrote into its code before a run printed it is its own; a name
        // a run showed first stays the run's when the agent repeats it.
        let write = json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "write",
             "arguments": json!({"content": "except JSONDecodeError:"}).to_string()}}]});
        observed.learn(&write, 4);
        observed.learn(&tool("JSONDecodeError at load_config_v2"), 4);
        observed.learn(&said("load_config_v2 fails"), 4);
        let next = said("JSONDecodeError in load_config_v2 again");
        assert_eq!(observed.recalls(&next, ""), [4]);
        assert_eq!(observed.recalls(&next, "load_config_v2"), Vec::<i64>::new());
    }
}
