//! `ctxd synth`: long synthetic sessions, deterministic from a seed, with facts planted in them
//! that `ctxd replay --facts` scores.
//!
//! A coding session reads, edits and runs things: file contents, long build and test logs
//! (failing, then passing), commands that print nothing, parallel calls, text in other scripts
//! (CJK, emoji, combining marks) and, once, an output over 200,000 characters. A support session
//! is a tool-using customer chat. Both plant the user's goal, a constraint, a decision with its
//! reason and an approach that failed, each as a sentence the replay looks for in every view.

use serde_json::{json, Value};

/// What kind of session to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Coding,
    Support,
}

/// A synthetic session: its chat messages, and the facts planted in it.
pub struct Synthetic {
    pub messages: Vec<Value>,
    pub facts: Vec<String>,
}

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

const GOAL: &str = "Goal: make invoice totals in the billing service round half-even to the cent.";
const CONSTRAINT: &str = "Constraint: never modify anything under tests/fixtures.";
const DECISION: &str =
    "Decision: use rust_decimal for money, because f64 loses cents on sums of many lines.";
const FAILED: &str =
    "Tried: rounding each line with f64::round; it failed because 0.1 + 0.2 drifts.";

const SUPPORT_GOAL: &str = "Goal: get a refund for order 48213, which arrived broken.";
const SUPPORT_CONSTRAINT: &str = "Constraint: the refund must go back to the original card.";
const SUPPORT_DECISION: &str =
    "Decision: refund rather than replace, because the model is discontinued.";
const SUPPORT_FAILED: &str = "Tried: a replacement order; it failed because stock is zero.";

/// Writes a session of `turns` model turns of `kind`, the same for the same `seed`.
pub fn synth(kind: Kind, turns: usize, seed: u64) -> Synthetic {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    match kind {
        Kind::Coding => coding(turns, &mut rng),
        Kind::Support => support(turns, &mut rng),
    }
}

/// `messages` (a coding session) annotated with episodes, as ctxd events among the chat
/// messages: reads and searches are explorations, each ending with what it read; an edit is an
/// action on the exploration before it. Episodes start and end only before an assistant
/// message, so that no call is parted from its results.
pub fn with_episodes(messages: Vec<Value>) -> Vec<Value> {
    let mut out = Vec::with_capacity(messages.len() + messages.len() / 4);
    // The episode under way: its name, whether it is an action, and what it read.
    let mut current: Option<(String, bool, Vec<String>)> = None;
    let mut explored: Option<String> = None;
    let end = |out: &mut Vec<Value>, (name, action, read): (String, bool, Vec<String>)| {
        let conclusion = if action {
            String::new()
        } else {
            format!("read {}", read.join(", "))
        };
        out.push(json!({"type": "episode_end", "name": name, "conclusion": conclusion}));
        (!action).then_some(name)
    };
    for (i, message) in messages.into_iter().enumerate() {
        let call = &message["tool_calls"][0]["function"];
        let tool = call["name"].as_str().unwrap_or_default();
        let path = serde_json::from_str::<Value>(call["arguments"].as_str().unwrap_or("{}"))
            .ok()
            .and_then(|a| a["path"].as_str().map(str::to_owned));
        let explores = matches!(tool, "read_file" | "grep");
        let acts = tool == "edit_file";
        let in_action = current.as_ref().is_some_and(|c| c.1);
        if (acts && !in_action) || (explores && in_action) {
            if let Some(done) = current.take() {
                explored = end(&mut out, done).or(explored);
            }
        }
        if current.is_none() && acts {
            if let Some(on) = &explored {
                let name = format!("edit-{i}");
                out.push(
                    json!({"type": "episode_start", "name": name, "kind": "action",
                    "dependencies": [on]}),
                );
                current = Some((name, true, Vec::new()));
            }
        } else if current.is_none() && explores {
            let name = format!("explore-{i}");
            out.push(
                json!({"type": "episode_start", "name": name, "kind": "exploration",
                "dependencies": []}),
            );
            current = Some((name, false, Vec::new()));
        }
        if let (Some((_, false, read)), Some(path)) = (&mut current, path) {
            if !read.contains(&path) && read.len() < 8 {
                read.push(path);
            }
        }
        out.push(message);
    }
    // The last episode ends after the last message: its results are all in.
    if let Some(done) = current.take() {
        let last_is_assistant = out.last().is_some_and(|m| m["role"] == "assistant");
        if last_is_assistant {
            end(&mut out, done);
        }
    }
    out
}

fn call(id: &str, name: &str, arguments: Value) -> Value {
    json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments.to_string()}})
}

fn result(id: &str, content: String) -> Value {
    json!({"role": "tool", "tool_call_id": id, "content": content})
}

fn coding(turns: usize, rng: &mut Rng) -> Synthetic {
    let mut m = vec![
        json!({"role": "system", "content": "You are a careful coding agent working in a Rust repository."}),
        json!({"role": "user", "content": format!("{GOAL}\n{CONSTRAINT}\nStart with src/billing/invoice.rs.")}),
    ];
    // The first test run from a third of the way in prints the huge log.
    let mut huge_at = Some(turns / 3);
    for t in 0..turns {
        let module = format!("src/billing/module_{}.rs", rng.below(40));
        let id = format!("call_{t}");
        match t % 9 {
            // Parallel reads, answered in reverse order.
            4 => {
                let (a, b) = (format!("{id}a"), format!("{id}b"));
                m.push(
                    json!({"role": "assistant", "content": "Reading both.", "tool_calls": [
                    call(&a, "read_file", json!({"path": module})),
                    call(&b, "grep", json!({"pattern": "round", "path": "src/"}))]}),
                );
                m.push(result(
                    &b,
                    format!("{module}:12: let total = lines.iter().sum::<f64>().round();"),
                ));
                m.push(result(&a, source(&module, 40 + rng.below(80) as usize)));
            }
            // A command that prints nothing.
            6 => {
                m.push(json!({"role": "assistant", "content": null, "tool_calls": [
                    call(&id, "shell", json!({"cmd": format!("mkdir -p target/tmp_{t}")}))]}));
                m.push(result(&id, String::new()));
            }
            // Tests: failing for the first half, then passing.
            2 | 7 => {
                m.push(json!({"role": "assistant", "content": null, "tool_calls": [
                    call(&id, "run_tests", json!({"filter": "billing"}))]}));
                let log = if huge_at.is_some_and(|at| t >= at) {
                    huge_at = None;
                    huge_log(rng)
                } else {
                    test_log(t < turns / 2, 60 + rng.below(200) as usize)
                };
                m.push(result(&id, log));
            }
            // An edit.
            3 | 8 => {
                m.push(json!({"role": "assistant", "content": format!("Editing {module}."), "tool_calls": [
                    call(&id, "edit_file", json!({"path": module, "old": "f64", "new": "Decimal"}))]}));
                m.push(result(&id, format!("Edited {module}: 3 replacements.")));
            }
            _ => {
                m.push(json!({"role": "assistant", "content": null, "tool_calls": [
                    call(&id, "read_file", json!({"path": module}))]}));
                m.push(result(&id, source(&module, 30 + rng.below(120) as usize)));
            }
        }
        if t == turns / 5 {
            m.push(json!({"role": "assistant", "content": FAILED}));
            m.push(json!({"role": "user", "content": "OK. What next?"}));
        }
        if t == turns / 4 {
            m.push(json!({"role": "assistant", "content": DECISION}));
            m.push(json!({"role": "user", "content": "Agreed, go on. 进展如何？ 👍 (café, naïve, e\u{301})"}));
        }
        if t > 0 && t % 25 == 0 {
            m.push(json!({"role": "user", "content": format!("Status check {t}: keep going, and remember the constraint.")}));
        }
    }
    m.push(
        json!({"role": "assistant", "content": "All billing tests pass; totals round half-even."}),
    );
    Synthetic {
        messages: m,
        facts: vec![
            GOAL.into(),
            CONSTRAINT.into(),
            DECISION.into(),
            FAILED.into(),
        ],
    }
}

fn source(path: &str, lines: usize) -> String {
    (0..lines)
        .map(|i| {
            format!(
                "{i:>4} | pub fn line_{i}(total: f64) -> f64 {{ total * 1.{i:02} }} // {path}\n"
            )
        })
        .collect()
}

fn test_log(failing: bool, lines: usize) -> String {
    let mut log: String = (0..lines)
        .map(|i| format!("   Compiling billing_dep_{i} v0.{i}.0\n"))
        .collect();
    if failing {
        log.push_str("test invoice::rounds_half_even ... FAILED\n");
        log.push_str(
            "thread 'invoice::rounds_half_even' panicked at src/billing/invoice.rs:88:5:\n",
        );
        log.push_str("assertion `left == right` failed: left: 10.30, right: 10.31\n");
        log.push_str("error: test failed, to rerun pass `--lib`\n");
    } else {
        log.push_str("test result: ok. 48 passed; 0 failed\n");
    }
    log
}

/// A single output over 200,000 characters: a verbose log with text in several scripts.
fn huge_log(rng: &mut Rng) -> String {
    let mut log = String::with_capacity(210_000);
    let mut i = 0;
    while log.len() < 205_000 {
        let line = match rng.below(4) {
            0 => format!(
                "DEBUG billing::ledger entry {i}: 合計 {}.{:02} 円 ✓\n",
                rng.below(9999),
                rng.below(100)
            ),
            1 => format!(
                "DEBUG billing::ledger entry {i}: total {}.{:02} EUR (naïve sum, e\u{301})\n",
                rng.below(9999),
                rng.below(100)
            ),
            2 => format!("TRACE billing::round line {i} 🧾 rounding mode HalfEven\n"),
            _ => format!("INFO  billing::invoice {i} lines summed\n"),
        };
        log.push_str(&line);
        i += 1;
    }
    log.push_str("error[E0308]: mismatched types in src/billing/ledger.rs:41\n");
    log
}

fn support(turns: usize, rng: &mut Rng) -> Synthetic {
    let mut m = vec![
        json!({"role": "system", "content": "You are a support agent for an electronics shop."}),
        json!({"role": "user", "content": format!("{SUPPORT_GOAL}\n{SUPPORT_CONSTRAINT}")}),
    ];
    for t in 0..turns {
        let id = format!("call_{t}");
        let order = 48_000 + rng.below(1_000);
        match t % 4 {
            0 => {
                m.push(json!({"role": "assistant", "content": null, "tool_calls": [
                    call(&id, "lookup_order", json!({"order_id": order}))]}));
                m.push(result(&id, json!({"order_id": order, "status": "delivered",
                    "items": (0..1 + rng.below(5)).map(|k| json!({"sku": format!("SKU-{k}"), "price": 19.99})).collect::<Vec<_>>()})
                    .to_string()));
            }
            1 => {
                m.push(json!({"role": "assistant", "content": "Let me check the policy."}));
                m.push(json!({"role": "user", "content": format!("Any news on {order}? ありがとう 🙏")}));
            }
            2 => {
                m.push(json!({"role": "assistant", "content": null, "tool_calls": [
                    call(&id, "search_policy", json!({"query": "refund damaged"}))]}));
                m.push(result(
                    &id,
                    "Refunds for damaged goods go to the original payment method within 14 days. "
                        .repeat(5 + rng.below(20) as usize),
                ));
            }
            _ => {
                m.push(json!({"role": "assistant", "content": format!("Step {t} done.")}));
                m.push(json!({"role": "user", "content": "OK."}));
            }
        }
        if t == turns / 5 {
            m.push(json!({"role": "assistant", "content": SUPPORT_FAILED}));
            m.push(json!({"role": "user", "content": "Then what?"}));
        }
        if t == turns / 4 {
            m.push(json!({"role": "assistant", "content": SUPPORT_DECISION}));
            m.push(json!({"role": "user", "content": "Fine."}));
        }
    }
    Synthetic {
        messages: m,
        facts: vec![
            SUPPORT_GOAL.into(),
            SUPPORT_CONSTRAINT.into(),
            SUPPORT_DECISION.into(),
            SUPPORT_FAILED.into(),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The annotated session keeps the episodes' rules, so that ctxd takes every event, and
    /// never parts a call from its results.
    #[test]
    fn episodes_annotate_a_coding_session_by_the_rules() {
        use crate::domain::episodes::Episodes;
        use crate::domain::event::{EventBody, EventInput};
        let plain = synth(Kind::Coding, 120, 7).messages;
        let annotated = with_episodes(plain.clone());
        let chat: Vec<&Value> = annotated
            .iter()
            .filter(|m| m.get("type").is_none())
            .collect();
        assert_eq!(chat.len(), plain.len(), "every message is kept, in order");
        let mut episodes = Episodes::default();
        let mut open_calls = 0;
        let (mut explorations, mut actions) = (0, 0);
        for (i, item) in annotated.iter().enumerate() {
            if item.get("type").is_none() {
                open_calls += item["tool_calls"].as_array().map_or(0, Vec::len);
                open_calls -= usize::from(item["role"] == "tool");
                continue;
            }
            assert_eq!(open_calls, 0, "item {i} parts a call from its result");
            let input: EventInput = serde_json::from_value(item.clone()).unwrap();
            let body = input.validate(0).unwrap().body;
            if let EventBody::EpisodeStart(start) = &body {
                match start.kind {
                    crate::domain::event::EpisodeKind::Exploration => explorations += 1,
                    crate::domain::event::EpisodeKind::Action => actions += 1,
                }
            }
            episodes
                .apply(0, i as i64 + 1, &body)
                .expect("the rules hold");
        }
        assert!(
            explorations > 5 && actions > 5,
            "{explorations} / {actions}"
        );
    }
    use crate::engine::validate::validate_openai;

    #[test]
    fn sessions_are_deterministic_valid_and_carry_their_facts() {
        for kind in [Kind::Coding, Kind::Support] {
            let a = synth(kind, 120, 7);
            let b = synth(kind, 120, 7);
            assert_eq!(
                a.messages, b.messages,
                "{kind:?}: the same seed, the same session"
            );
            assert_ne!(a.messages, synth(kind, 120, 8).messages);
            assert!(
                validate_openai(&json!({"messages": a.messages})).is_ok(),
                "{kind:?}"
            );
            let text = serde_json::to_string(&a.messages).unwrap();
            for fact in &a.facts {
                let escaped = serde_json::to_string(fact).unwrap();
                assert!(text.contains(escaped.trim_matches('"')), "{kind:?}: {fact}");
            }
        }
        let coding = synth(Kind::Coding, 120, 7);
        let longest = coding
            .messages
            .iter()
            .filter_map(|m| m["content"].as_str())
            .map(str::len)
            .max();
        assert!(longest.unwrap() > 200_000);
        assert!(coding
            .messages
            .iter()
            .any(|m| m["role"] == "tool" && m["content"] == ""));
    }
}
