//! Tool-pair repair: a view's messages made a valid provider request, whatever was cut. A
//! result without its call is dropped; a call without its result gets a placeholder.

use foldhash::HashMap;

use super::view;
use crate::domain::compaction::{Repairs, ViewMessage};
use crate::domain::event::{Role, ToolCall};
use crate::domain::pairing::OpenCalls;
use crate::tokens::Tokenizer;

/// A message's role, the call it answers and the calls it issues.
pub(super) type Pairing<'m> = (Role, Option<&'m str>, &'m [ToolCall]);

/// What repairing a sequence of messages changes.
pub(super) struct RepairPlan {
    /// Whether each message stays (results that answer no earlier call do not).
    pub(super) keep: Vec<bool>,
    /// By message index, the positions of its calls left without a result, in call order.
    pub(super) unanswered: Vec<(usize, Vec<usize>)>,
}

impl RepairPlan {
    pub(super) fn repairs(&self) -> Repairs {
        Repairs {
            orphan_results_dropped: self.keep.iter().filter(|k| !**k).count() as i64,
            placeholder_results_inserted: self.unanswered.iter().map(|(_, c)| c.len() as i64).sum(),
        }
    }
}

/// Finds the results without a call before them and the calls without a result after them.
pub(super) fn plan_repair<'m>(messages: impl Iterator<Item = Pairing<'m>>) -> RepairPlan {
    let mut open = OpenCalls::default();
    let mut keep = Vec::new();
    for (i, (role, answers, calls)) in messages.enumerate() {
        keep.push(match answers {
            Some(id) if role == Role::Tool => open.answer(id).is_some(),
            _ => true,
        });
        for (k, call) in calls.iter().enumerate() {
            open.issue(call.id.as_str(), (i, k));
        }
    }
    // By message, the positions of its unanswered calls, in call order.
    let mut unanswered: Vec<(usize, usize)> = open.into_unanswered().collect();
    unanswered.sort_unstable();
    let mut grouped: Vec<(usize, Vec<usize>)> = Vec::new();
    for (i, k) in unanswered {
        match grouped.last_mut() {
            Some((at, calls)) if *at == i => calls.push(k),
            _ => grouped.push((i, vec![k])),
        }
    }
    RepairPlan {
        keep,
        unanswered: grouped,
    }
}

/// Makes the messages a valid provider request: a result without a call before it is dropped,
/// a call without a result gets a placeholder right after its message.
pub fn repair<'a>(
    messages: Vec<ViewMessage<'a>>,
    tokenizer: Tokenizer,
) -> (Vec<ViewMessage<'a>>, Repairs) {
    let plan = plan_repair(
        messages
            .iter()
            .map(|m| (m.role, m.tool_call_id.as_deref(), &*m.tool_calls)),
    );
    let repairs = plan.repairs();
    if repairs == Repairs::default() {
        return (messages, repairs);
    }
    // Placeholders go right after the calling message, in call order.
    let mut unanswered: HashMap<usize, Vec<usize>> = plan.unanswered.into_iter().collect();
    let mut out = Vec::with_capacity(messages.len() + unanswered.len());
    for (i, (m, keep)) in messages.into_iter().zip(plan.keep).enumerate() {
        if !keep {
            continue;
        }
        let placeholders: Vec<ViewMessage<'static>> = unanswered
            .remove(&i)
            .unwrap_or_default()
            .into_iter()
            .map(|k| view::placeholder_result(&m.tool_calls[k], None, tokenizer).into_owned())
            .collect();
        out.push(m);
        out.extend(placeholders);
    }
    (out, repairs)
}
