//! The view under construction: the items a compaction looks at, how each is shown and what
//! it costs. The moves every tier is made of live beside it: `reduce` (offload, excerpt, mask)
//! and `fold` (where to cut, and folding into the summary).

mod fold;
pub(super) use fold::is_user_request;
mod reduce;

use std::collections::HashSet;

use uuid::Uuid;

use super::render::Format;
use super::repair::{self, Pairing};
use super::view;
use crate::domain::compaction::{OffloadedItem, Projection, Reason, Repairs, Summary, ViewMessage};
use crate::domain::condensation::Memory;
use crate::domain::content::Part;
use crate::domain::event::{Event, EventBody, Role};
use crate::domain::session::SessionConfig;
use crate::domain::state::CompactionState;
use crate::domain::text;
use crate::tokens::Tokenizer;

/// An item of the view and how it is shown.
#[derive(Debug, Clone)]
pub(super) struct Live<'a> {
    pub(super) event: &'a Event,
    pub(super) projection: Projection,
    /// Tokens in the view.
    pub(super) tokens: i64,
    pub(super) reason: Reason,
    pub(super) by: Option<Uuid>,
    /// The event's content characters, when known without counting them.
    pub(super) chars: Option<i64>,
    /// Whether its reasoning is sent (and counted in `tokens`): see [`ViewMessage::reasoning`].
    pub(super) reasoning: bool,
    /// For a preview shown as head and tail, the characters it shows (0: a plain preview).
    pub(super) excerpt: i64,
}

impl<'a> Live<'a> {
    /// The item as the view shows it, naming at most `errors` error lines when reduced.
    pub(super) fn message(&self, errors: usize) -> ViewMessage<'a> {
        let mut message = match self.projection {
            Projection::Preview if self.excerpt > 0 => {
                view::excerpt_message(self.event, self.excerpt as usize, self.chars(), errors)
            }
            Projection::Preview => {
                view::preview_message(self.event, view::PREVIEW_CHARS, self.chars(), errors)
            }
            Projection::Reference
                if self.reason.archives() || self.reason == Reason::OffloadedLongArguments =>
            {
                view::archived_message(self.event, self.chars(), errors)
            }
            Projection::Reference => view::reference_message(self.event, self.chars(), errors),
            _ => ViewMessage {
                reasoning: self.reasoning,
                ..ViewMessage::full(self.event)
            },
        };
        message.tokens = self.tokens;
        message
    }

    pub(super) fn chars(&self) -> i64 {
        self.chars
            .unwrap_or_else(|| view::content_chars(self.event))
    }

    /// The item shown as `projection` with `tokens`, reduced by compaction `by`.
    pub(super) fn reduced(
        &self,
        projection: Projection,
        tokens: i64,
        reason: Reason,
        by: Uuid,
    ) -> Self {
        Live {
            event: self.event,
            projection,
            tokens,
            reason,
            by: Some(by),
            chars: Some(self.chars()),
            reasoning: false,
            excerpt: 0,
        }
    }

    /// What tool-pair repair looks at: the message's role, the call it answers and the calls it
    /// issues (the same whatever the projection).
    pub(super) fn pairing(&self) -> Pairing<'a> {
        match &self.event.body {
            EventBody::Message(m) => (m.role, m.tool_call_id.as_deref(), &m.tool_calls),
            _ => (Role::User, None, &[]),
        }
    }
}

/// The view under construction.
#[derive(Debug, Clone)]
pub(super) struct Working<'a> {
    pub(super) tokenizer: Tokenizer,
    pub(super) summary_max_chars: usize,
    /// The most error lines an item shown reduced names: see [`SessionConfig::error_lines`].
    pub(super) error_lines: usize,
    pub(super) checkpoint: i64,
    /// At or before the checkpoint: system prompts and pinned events, in full unless an
    /// emergency found no other way to fit the window, and the episodic policy's first and
    /// most recent requests (a long one perhaps as its head and tail).
    pub(super) kept: Vec<Live<'a>>,
    pub(super) live: Vec<Live<'a>>,
    pub(super) summary: Summary,
    pub(super) summary_message: Option<ViewMessage<'static>>,
    /// How many characters of the summary message an emergency left (see `shrink_summary`).
    pub(super) summary_cap: Option<usize>,
    /// The agent's last condensation and its message, shown right after the summary.
    pub(super) memory: Option<Memory>,
    pub(super) memory_message: Option<ViewMessage<'static>>,
    /// Events a fold keeps in full besides the always kept ones (the episodic policy's first
    /// and most recent user requests).
    pub(super) keep_in_fold: Vec<i64>,
    /// Pinned user messages and notes the next fold collapses into the summary all the same
    /// (the episodic policy's last pass), oldest first, whether kept or live.
    pub(super) collapsing: Vec<i64>,
    /// The items a fold collapsed so, shown by the summary (`Projection::Summary`): the state
    /// remembers why each left the view.
    pub(super) collapsed: Vec<Live<'a>>,
}

/// System prompts and pinned events are never folded or reduced.
pub(super) fn always_kept(event: &Event) -> bool {
    event.pinned || matches!(&event.body, EventBody::Message(m) if m.role == Role::System)
}

/// What the episodic policy's last pass may collapse into the summary: pinned user messages
/// and notes (never system prompts, nor pinned assistant turns or tool results).
pub(super) fn collapsible(event: &Event) -> bool {
    event.pinned
        && match &event.body {
            EventBody::Message(m) => m.role == Role::User,
            EventBody::Note(_) => true,
            _ => false,
        }
}

/// How far before a tool result its call is looked for: a turn's calls and the results of
/// those before it. A result whose call is further is taken as any other.
const CALL_LOOKBACK: usize = 64;

/// Notes on tool result `events[i]` the call it answers, once (see
/// [`Derived::answers_call`](crate::domain::event::Derived::answers_call)): its error lines
/// are left out where the view shows it reduced when that call only read documents. The
/// result's first compaction looks back a few events; the next ones do nothing.
fn note_the_call_answered(events: &[Event], i: usize) {
    let result = &events[i];
    let Some(id) = result.body.tool_call_id() else {
        return;
    };
    if result.derived.knows_its_call() {
        return;
    }
    let before = events[i.saturating_sub(CALL_LOOKBACK)..i].iter().rev();
    let call = before
        .flat_map(|e| e.body.tool_calls())
        .find(|call| call.id == id);
    result.derived.answers_call(call);
}

pub(super) fn is_tool_result(event: &Event) -> bool {
    event.body.tool_call_id().is_some()
}

impl<'a> Working<'a> {
    /// The view `state` describes, over `events`: the kept ones and every one after the
    /// checkpoint, in seq order.
    /// Reasoning is sent (and counted) for the assistant turns of the current tool loop, those
    /// after the last user message, when `format` takes it back.
    pub(super) fn from_state(
        config: &SessionConfig,
        state: &CompactionState,
        events: &'a [Event],
        format: Format,
    ) -> Self {
        let mut kept = Vec::new();
        let mut live = Vec::new();
        debug_assert!(
            events.windows(2).all(|w| w[0].seq < w[1].seq),
            "in seq order"
        );
        // At or before the checkpoint only what the state keeps is shown, whatever `events`
        // holds: the events of the view before a fold (which the next fold is planned over)
        // hold some the fold left out. Counting them spares the check when there are none.
        let at_or_before = events.partition_point(|e| e.seq <= state.checkpoint_seq);
        let kept_only: Option<HashSet<i64>> =
            (at_or_before != state.kept.len()).then(|| state.kept.iter().copied().collect());
        let shown = |event: &Event| {
            event.seq > state.checkpoint_seq
                || kept_only.as_ref().is_none_or(|k| k.contains(&event.seq))
        };
        let loop_from = events
            .iter()
            .rposition(|e| shown(e) && e.body.role() == Some(Role::User))
            .map_or(0, |i| i + 1);
        // The reduced items are in seq order too: one walk beside the events finds each.
        let mut reduced = state.reduced.iter().peekable();
        for (i, event) in events.iter().enumerate() {
            if !shown(event) {
                continue;
            }
            note_the_call_answered(events, i);
            while reduced.next_if(|(&seq, _)| seq < event.seq).is_some() {}
            let item = match reduced
                .next_if(|(&seq, _)| seq == event.seq)
                .map(|(_, r)| r)
            {
                Some(r) => {
                    let mut item = Live {
                        event,
                        projection: r.projection,
                        tokens: r.tokens_in_view,
                        reason: r.reason,
                        by: Some(r.compaction_id),
                        chars: (r.chars > 0).then_some(r.chars),
                        reasoning: false,
                        excerpt: r.excerpt_chars,
                    };
                    // The stored cost stands while the message is shown at the length it was
                    // counted at (its text is kept with the event, so this check is cheap);
                    // shown otherwise, as another version of ctxd shows it, it is counted
                    // again. An item of the summary shows nothing.
                    if r.projection != Projection::Summary {
                        let message = item.message(config.error_lines());
                        if message.shown_bytes() != r.bytes_in_view {
                            item.tokens = message.cost(config.tokenizer);
                        }
                    }
                    item
                }
                None => {
                    let sent = |p: &Part| format.sends_reasoning(p);
                    let reasoning = i >= loop_from && event.body.parts().iter().any(sent);
                    let extra = if reasoning {
                        event.body.reasoning_tokens(config.tokenizer)
                    } else {
                        0
                    };
                    Live {
                        event,
                        projection: Projection::Full,
                        tokens: event.tokens + extra,
                        reason: Reason::WithinBudget,
                        by: None,
                        chars: None,
                        reasoning,
                        excerpt: 0,
                    }
                }
            };
            if event.seq <= state.checkpoint_seq {
                kept.push(item);
            } else {
                live.push(item);
            }
        }
        let mut working = Self {
            tokenizer: config.tokenizer,
            summary_max_chars: config.summary_max_chars(),
            error_lines: config.error_lines(),
            checkpoint: state.checkpoint_seq,
            kept,
            live,
            summary: state.summary.clone(),
            summary_message: None,
            summary_cap: state.summary_cap,
            keep_in_fold: Vec::new(),
            collapsing: Vec::new(),
            collapsed: Vec::new(),
            memory: None,
            memory_message: None,
        };
        if let Some(memory) = &state.memory {
            working.set_memory(memory.clone());
        }
        // The stored cost spares recounting the summary on calls that change nothing, when it
        // counts the message as this version shows it.
        working.summary_message = working
            .build_summary_message(false)
            .and_then(|m| cut_summary(m, state.summary_cap));
        if let Some(m) = working.summary_message.as_mut() {
            m.tokens = if m.shown_bytes() == state.summary_bytes {
                state.summary_tokens
            } else {
                m.cost(config.tokenizer)
            };
        }
        working
    }

    /// What the system prompts and pinned items cost as they are shown: the part of the room
    /// no fold frees.
    pub(super) fn pinned_tokens(&self) -> i64 {
        let kept = self.kept.iter().chain(&self.live);
        kept.filter(|l| always_kept(l.event))
            .map(|l| l.tokens)
            .sum()
    }

    pub(super) fn build_summary_message(&self, count: bool) -> Option<ViewMessage<'static>> {
        let tokenizer = if count {
            self.tokenizer
        } else {
            Tokenizer::Chars4
        };
        view::summary_message(&self.summary, self.summary_max_chars, tokenizer)
    }

    /// Shows `memory` after the summary, in place of any earlier one.
    pub(super) fn set_memory(&mut self, memory: Memory) {
        self.memory_message = Some(view::memory_message(&memory, self.tokenizer));
        self.memory = Some(memory);
    }

    pub(super) fn refresh_summary_message(&mut self) {
        self.summary_message = self.build_summary_message(true);
        self.summary_cap = None;
    }

    /// The seqs of the items after the checkpoint shown in full: the tail a compaction kept.
    pub(super) fn full_seqs(&self) -> Vec<i64> {
        self.live
            .iter()
            .filter(|l| l.projection == Projection::Full)
            .map(|l| l.event.seq)
            .collect()
    }

    /// The view's items in the order they are shown (the summary message aside): kept system
    /// prompts, the other kept items, then the items after the checkpoint.
    pub(super) fn in_order(&self) -> impl Iterator<Item = &Live<'a>> {
        let is_system = |l: &&Live| l.event.body.role() == Some(Role::System);
        let system = self.kept.iter().filter(is_system);
        let other = self.kept.iter().filter(move |l| !is_system(l));
        system.chain(other).chain(&self.live)
    }

    /// The view's messages with tool pairs repaired, and their total tokens.
    pub(super) fn render(&self) -> (Vec<ViewMessage<'a>>, Repairs, i64) {
        let mut messages = Vec::with_capacity(self.kept.len() + self.live.len() + 2);
        let mut items = self
            .in_order()
            .map(|l| l.message(self.error_lines))
            .peekable();
        // The summary and the memory go right after the leading system prompts (written in
        // place: inserted, they would move every message after them).
        while let Some(system) = items.next_if(|m| m.role == Role::System) {
            messages.push(system);
        }
        let heads = [&self.summary_message, &self.memory_message];
        messages.extend(heads.into_iter().flatten().cloned());
        messages.extend(items);
        let (messages, repairs) = repair::repair(messages, self.tokenizer);
        let tokens = messages.iter().map(|m| m.tokens).sum();
        debug_assert_eq!(tokens, self.tokens(), "the view costs what `tokens` counts");
        (messages, repairs, tokens)
    }

    /// The tokens of the view [`Working::render`] would build, without building it: the items'
    /// costs, the summary's, less the results repair drops, plus the placeholders it adds.
    pub(super) fn tokens(&self) -> i64 {
        let items: Vec<&Live> = self.in_order().collect();
        let plan = repair::plan_repair(items.iter().map(|l| l.pairing()));
        let shown: i64 = items
            .iter()
            .zip(&plan.keep)
            .filter(|(_, keep)| **keep)
            .map(|(l, _)| l.tokens)
            .sum();
        let placeholders: i64 = plan
            .unanswered
            .iter()
            .flat_map(|(at, calls)| calls.iter().map(|k| &items[*at].pairing().2[*k]))
            .map(|call| view::placeholder_result(call, None, self.tokenizer).tokens)
            .sum();
        let summary = self.summary_message.as_ref().map_or(0, |m| m.tokens);
        let memory = self.memory_message.as_ref().map_or(0, |m| m.tokens);
        shown + placeholders + summary + memory
    }
}

pub(super) fn offloaded_item(item: &Live<'_>) -> OffloadedItem {
    let event = item.event;
    OffloadedItem {
        seq: event.seq,
        tool_call_id: event.body.tool_call_id().map(str::to_owned),
        chars: item.chars(),
        tokens: event.tokens,
        uri: view::observation_uri(event.seq),
    }
}

/// The summary message cut to its first `cap` characters (none left under 8), marked as cut.
/// Its tokens are left for the caller.
pub(super) fn cut_summary(
    mut message: ViewMessage<'static>,
    cap: Option<usize>,
) -> Option<ViewMessage<'static>> {
    let Some(cap) = cap else {
        return Some(message);
    };
    if cap < 8 {
        return None;
    }
    if text::prefix_chars(&message.content, cap).len() < message.content.len() {
        text::cut_marked(message.content.to_mut(), cap, "…");
    }
    Some(message)
}
