//! The episodic policy: what each pass archives, in what order, and what it never touches
//! (`passes`); what a fold keeps of the user's words (`requests`); the observation cap
//! (`observations`); when an eviction acts, and what it does when the view does not fit
//! (`limits`).

mod limits;
mod observations;
mod passes;
mod requests;

use serde_json::json;

use super::tests::{run, Log};
use crate::domain::compaction::{ItemState, Mode, Projection, Reason, Tier};
use crate::domain::session::{Policy, SessionConfig};
use crate::domain::state::CompactionState;
use crate::tokens::Tokenizer;

/// The passes' tests use results a few times the default observation cap at small windows:
/// the cap here is half the room (`the_observation_cap_scales_with_the_window` checks the
/// default).
pub(super) fn config(window: u32) -> SessionConfig {
    SessionConfig {
        context_window: window,
        max_output_tokens: 1_000,
        tokenizer: Tokenizer::Chars4,
        policy: Policy::Episodic,
        item_max_share: 0.5,
        ..SessionConfig::default()
    }
}

pub(super) fn shown(
    out: &crate::engine::EngineOutput<'_>,
    seq: i64,
) -> Option<(Projection, String)> {
    out.messages
        .iter()
        .find(|m| m.seq == Some(seq))
        .map(|m| (m.projection, m.content.to_string()))
}

pub(super) fn projection(out: &crate::engine::EngineOutput<'_>, seq: i64) -> Option<Projection> {
    shown(out, seq).map(|(p, _)| p)
}

/// A call of tool `name` and its result of `chars` characters; the result's seq.
pub(super) fn exchange(log: &mut Log, id: &str, name: &str, chars: usize) -> i64 {
    log.push(json!({"type": "message", "role": "assistant",
        "tool_calls": [{"id": id, "name": name, "arguments": {"path": format!("src/{id}.rs")}}]}));
    let content: String = (0..chars)
        .map(|i| if i % 80 == 79 { '\n' } else { 'r' })
        .collect();
    log.push(
        json!({"type": "message", "role": "tool", "tool_call_id": id, "name": name,
        "content": content}),
    )
}

pub(super) fn start(log: &mut Log, name: &str, kind: &str, dependencies: &[&str]) -> i64 {
    log.push(json!({"type": "episode_start", "name": name, "kind": kind,
        "dependencies": dependencies}))
}

pub(super) fn end(log: &mut Log, name: &str, conclusion: &str) -> i64 {
    log.push(json!({"type": "episode_end", "name": name, "conclusion": conclusion}))
}

/// Whether a summary names the event at `seq` by reference: an entry led by its
/// `observation://` URI, or its seq in the list of those to recall by URI.
pub(super) fn names(summary: &str, seq: i64) -> bool {
    summary.contains(&format!("observation://{seq} "))
        || summary.lines().any(|line| {
            line.split_once(" for seq ").is_some_and(|(lead, seqs)| {
                lead.ends_with("recall observation://<seq>")
                    && seqs.split(", ").any(|s| s == seq.to_string())
            })
        })
}
