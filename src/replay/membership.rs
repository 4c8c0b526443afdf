//! The membership check: after every turn, each item of the session must be explained by the
//! view or by a compaction record. An item ctxd says it shows in full must be in the view; one
//! it shows as a preview or a reference must have its `observation://<seq>` in the view; one
//! it summarised, offloaded or dropped must be in the membership (offloaded, summarised or
//! evicted seqs) of a compaction record the session answered. Anything else was lost.
//!
//! How each item stands is read from the engine's inspection of the stored state when ctxd
//! runs in this process, and from `GET /sessions/{id}/context`, page by page, otherwise.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde_json::Value;
use uuid::Uuid;

use crate::domain::compaction::Projection;
use crate::engine::inspect::standing;
use crate::store::Store;

/// Items per page of `GET /context`: its largest.
const PAGE: u32 = 2_000;

/// Where items' standings are read.
#[derive(Clone)]
pub(super) enum Inspector {
    /// The store of a ctxd running in this process, through the engine's inspection.
    Store(Arc<dyn Store>),
    /// A running ctxd's `GET /sessions/{id}/context`.
    Http {
        client: reqwest::Client,
        base: String,
    },
}

impl Inspector {
    /// Every item of the session, with its projection, in seq order.
    pub(super) async fn projections(
        &self,
        session: &str,
    ) -> Result<Vec<(i64, Projection)>, String> {
        match self {
            Self::Store(store) => {
                let id: Uuid = session
                    .parse()
                    .map_err(|_| format!("session id `{session}`"))?;
                let (session, stored) = store
                    .load_session_state(id)
                    .await
                    .map_err(|e| e.to_string())?
                    .ok_or_else(|| format!("session {id} is gone"))?;
                let mut out = Vec::with_capacity(session.head_seq.max(0) as usize);
                let mut after = 0;
                while after < session.head_seq {
                    let rows = store
                        .item_rows(id, after, session.head_seq, PAGE)
                        .await
                        .map_err(|e| e.to_string())?;
                    let Some(last) = rows.last() else { break };
                    after = last.seq;
                    out.extend(rows.iter().map(|i| {
                        let s = standing(i.seq, i.role, i.pinned, i.tokens, &stored.state, &[]);
                        (i.seq, s.projection)
                    }));
                }
                Ok(out)
            }
            Self::Http { client, base } => {
                let mut out = Vec::new();
                let mut after = 0;
                loop {
                    let url =
                        format!("{base}/sessions/{session}/context?after_seq={after}&limit={PAGE}");
                    let page = super::get(client, &url).await?;
                    for item in page["items"].as_array().into_iter().flatten() {
                        let seq = item["seq"].as_i64().ok_or("an item without a seq")?;
                        let projection = serde_json::from_value(item["projection"].clone())
                            .map_err(|e| format!("item {seq}'s projection: {e}"))?;
                        out.push((seq, projection));
                    }
                    match page["next_after_seq"].as_i64() {
                        Some(next) => after = next,
                        None => return Ok(out),
                    }
                }
            }
        }
    }
}

/// A session's items as the replay knows them, and the membership of its compactions.
#[derive(Debug, Default)]
pub(super) struct Membership {
    /// Seqs a compaction record offloaded, summarised or evicted.
    recorded: HashSet<i64>,
    /// The strings by which an item shown in full is recognised in a view: its text, or the
    /// id of its first tool call or of the call it answers.
    marks: HashMap<i64, String>,
}

impl Membership {
    /// Takes in the membership of a compaction record.
    pub(super) fn record(&mut self, record: &Value) {
        let seqs = |key: &str| {
            record[key]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_i64)
                .collect::<Vec<_>>()
        };
        self.recorded.extend(seqs("summarized_seqs"));
        self.recorded.extend(seqs("evicted_seqs"));
        let offloaded = record["offloaded"].as_array().into_iter().flatten();
        self.recorded
            .extend(offloaded.filter_map(|o| o["seq"].as_i64()));
    }

    /// Takes in the seqs a turn appended for its chat messages, one event each.
    pub(super) fn appended(&mut self, seqs: &[i64], messages: &[Value]) -> Result<(), String> {
        if seqs.len() != messages.len() {
            return Err(format!(
                "{} messages were appended as {} events",
                messages.len(),
                seqs.len()
            ));
        }
        for (&seq, message) in seqs.iter().zip(messages) {
            if let Some(mark) = mark(message) {
                self.marks.insert(seq, mark);
            }
        }
        Ok(())
    }

    /// The items `projections` says are shown in full, referenced or folded that `view` (a
    /// rendered view, any format) and the records do not bear out, with why.
    pub(super) fn unexplained(
        &self,
        projections: &[(i64, Projection)],
        view: &Value,
    ) -> Vec<(i64, &'static str)> {
        let mut strings = HashSet::new();
        collect_strings(view, &mut strings);
        let referenced: HashSet<i64> = strings.iter().flat_map(|s| observations(s)).collect();
        projections
            .iter()
            .filter_map(|&(seq, projection)| {
                let missing = match projection {
                    Projection::Full => match self.marks.get(&seq) {
                        Some(mark) if !strings.contains(mark.as_str()) => {
                            "said to be shown in full, but not in the view"
                        }
                        _ => return None,
                    },
                    Projection::Preview | Projection::Reference => {
                        if referenced.contains(&seq) {
                            return None;
                        }
                        "said to be referenced, but its observation is not in the view"
                    }
                    Projection::Summary | Projection::Omitted => {
                        if self.recorded.contains(&seq) {
                            return None;
                        }
                        "left out of the view, but in no compaction record's membership"
                    }
                };
                Some((seq, missing))
            })
            .collect()
    }
}

/// How a chat message shown in full is recognised in a rendered view: its text when it has
/// some, else the id of its first tool call, else the id of the call it answers.
fn mark(message: &Value) -> Option<String> {
    let text = match &message["content"] {
        Value::String(s) => Some(s.as_str()),
        Value::Array(parts) => parts.iter().find_map(|p| p["text"].as_str()),
        _ => None,
    };
    let first_call = message["tool_calls"][0]["id"].as_str();
    text.filter(|t| !t.trim().is_empty())
        .or(first_call)
        .or(message["tool_call_id"].as_str())
        .map(str::to_owned)
}

fn collect_strings<'v>(value: &'v Value, out: &mut HashSet<&'v str>) {
    match value {
        Value::String(s) => {
            out.insert(s);
        }
        Value::Array(items) => items.iter().for_each(|v| collect_strings(v, out)),
        Value::Object(map) => map.values().for_each(|v| collect_strings(v, out)),
        _ => {}
    }
}

/// The seqs of the `observation://<seq>` URIs in `text`.
fn observations(text: &str) -> impl Iterator<Item = i64> + '_ {
    text.split("observation://").skip(1).filter_map(|rest| {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        rest[..digits].parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn every_item_is_shown_referenced_or_recorded() {
        let mut membership = Membership::default();
        let messages = [
            json!({"role": "user", "content": "Fix the parser"}),
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": "c1",
                "type": "function", "function": {"name": "read", "arguments": "{}"}}]}),
            json!({"role": "tool", "tool_call_id": "c1", "content": "x".repeat(500)}),
            json!({"role": "assistant", "content": "Done."}),
        ];
        membership.appended(&[1, 2, 3, 4], &messages).unwrap();
        membership.record(&json!({"summarized_seqs": [1], "evicted_seqs": [],
            "offloaded": [{"seq": 3}]}));
        let view = json!({"messages": [
            {"role": "user", "content": "Summary of earlier turns"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "c1",
                "type": "function", "function": {"name": "read", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "xxx… [observation://3?offset=0]"},
            {"role": "assistant", "content": "Done."}]});
        let standing = [
            (1, Projection::Summary),
            (2, Projection::Full),
            (3, Projection::Preview),
            (4, Projection::Full),
        ];
        assert!(membership.unexplained(&standing, &view).is_empty());
        // A claim the view or the records do not bear out is reported, item by item.
        let wrong = [
            (1, Projection::Full),
            (2, Projection::Reference),
            (4, Projection::Omitted),
        ];
        let seqs: Vec<i64> = membership
            .unexplained(&wrong, &view)
            .iter()
            .map(|u| u.0)
            .collect();
        assert_eq!(seqs, [1, 2, 4]);
        assert!(membership.appended(&[5], &messages[..2]).is_err());
    }

    #[test]
    fn observation_uris_are_read_with_their_seq() {
        let seqs: Vec<i64> =
            observations("see observation://12?offset=0 and observation://7, observation://x")
                .collect();
        assert_eq!(seqs, [12, 7]);
    }
}
