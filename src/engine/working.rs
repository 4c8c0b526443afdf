//! The view under construction: the items a compaction looks at, how each is shown and what
//! it costs, and the moves every tier is made of (offload, mask, fold).

use std::collections::HashSet;

use uuid::Uuid;

use super::render::Format;
use super::repair::{self, Pairing};
use super::view;
use crate::domain::compaction::{OffloadedItem, Projection, Reason, Repairs, Summary, ViewMessage};
use crate::domain::condensation::Memory;
use crate::domain::content::Part;
use crate::domain::event::{Event, EventBody, Role};
use crate::domain::pairing::OpenCalls;
use crate::domain::session::SessionConfig;
use crate::domain::state::{CompactionState, FoldedRange};
use crate::domain::{observation, text};
use crate::tokens::{Tokenizer, MESSAGE_OVERHEAD};

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
    pub(super) fn message(&self) -> ViewMessage<'a> {
        let mut message = match self.projection {
            Projection::Preview if self.excerpt > 0 => {
                view::excerpt_message(self.event, self.excerpt as usize, self.chars())
            }
            Projection::Preview => {
                view::preview_message(self.event, view::PREVIEW_CHARS, self.chars())
            }
            Projection::Reference if self.reason.archives() => {
                view::archived_message(self.event, self.chars())
            }
            Projection::Reference => view::reference_message(self.event, self.chars()),
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
    pub(super) checkpoint: i64,
    /// At or before the checkpoint: system prompts and pinned events, in full unless an
    /// emergency found no other way to fit the window.
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
        let loop_from = events
            .iter()
            .rposition(|e| e.body.role() == Some(Role::User))
            .map_or(0, |i| i + 1);
        for (i, event) in events.iter().enumerate() {
            let item = match state.reduced.get(&event.seq) {
                Some(r) => Live {
                    event,
                    projection: r.projection,
                    tokens: r.tokens_in_view,
                    reason: r.reason,
                    by: Some(r.compaction_id),
                    chars: (r.chars > 0).then_some(r.chars),
                    reasoning: false,
                    excerpt: r.excerpt_chars,
                },
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
        // The stored cost spares recounting the summary on calls that change nothing.
        working.summary_message = working
            .build_summary_message(false)
            .and_then(|m| cut_summary(m, state.summary_cap));
        if let Some(m) = working.summary_message.as_mut() {
            m.tokens = state.summary_tokens;
        }
        working
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
        let mut messages = Vec::with_capacity(self.kept.len() + self.live.len() + 1);
        messages.extend(self.in_order().map(Live::message));
        // The summary and the memory go right after the leading system prompts.
        let at = messages
            .iter()
            .take_while(|m| m.role == Role::System)
            .count();
        let heads = [&self.summary_message, &self.memory_message];
        for (i, message) in heads.into_iter().flatten().enumerate() {
            messages.insert(at + i, message.clone());
        }
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

    /// Where the live items may be cut so that no tool call is separated from its results:
    /// `valid[c]` is true when no result at or after `c` answers a call before `c`.
    pub(super) fn valid_cuts(&self) -> Vec<bool> {
        let n = self.live.len();
        let mut open = OpenCalls::with_capacity(n / 2);
        // For each result, the index of the call it answers.
        let mut answers: Vec<Option<usize>> = vec![None; n];
        for (i, item) in self.live.iter().enumerate() {
            let (role, answered, calls) = item.pairing();
            if let (Role::Tool, Some(id)) = (role, answered) {
                answers[i] = open.answer(id);
            }
            for call in calls {
                open.issue(call.id.as_str(), i);
            }
        }
        let mut valid = vec![true; n + 1];
        let mut earliest_call = usize::MAX;
        for c in (0..n).rev() {
            if let Some(call) = answers[c] {
                earliest_call = earliest_call.min(call);
            }
            valid[c] = earliest_call >= c;
        }
        valid
    }

    /// The index where the tail starts: the last `min_tail` messages, moved earlier so that no
    /// tool call is separated from its results.
    pub(super) fn tail_start(&self, min_tail: usize, valid: &[bool]) -> usize {
        let mut seen = 0;
        let mut start = self.live.len();
        while start > 0 && seen < min_tail {
            start -= 1;
            if matches!(self.live[start].event.body, EventBody::Message(_)) {
                seen += 1;
            }
        }
        while !valid[start] {
            start -= 1;
        }
        start
    }

    /// The indices of the items before `end`, shown in full, that offloading would show as
    /// previews: every message with images (the first thing to go when room is needed), and
    /// tool results longer than `threshold_chars`.
    pub(super) fn offload_candidates(&mut self, end: usize, threshold_chars: i64) -> Vec<usize> {
        let mut candidates = Vec::new();
        for (i, item) in self.live[..end].iter_mut().enumerate() {
            if item.projection == Projection::Full
                && !always_kept(item.event)
                && view::has_images(item.event)
            {
                candidates.push(i);
                continue;
            }
            if item.projection != Projection::Full
                || !is_tool_result(item.event)
                || always_kept(item.event)
                // A text of at most `threshold_chars` bytes has at most as many characters.
                || view::text_of(item.event).len() as i64 <= threshold_chars
            {
                continue;
            }
            let chars = item.chars();
            item.chars = Some(chars);
            if chars > threshold_chars {
                candidates.push(i);
            }
        }
        candidates
    }

    /// The most offloading `candidates` can free: a preview costs at least a message's overhead.
    pub(super) fn offload_ceiling(&self, candidates: &[usize]) -> i64 {
        candidates
            .iter()
            .map(|&i| (self.live[i].tokens - MESSAGE_OVERHEAD).max(0))
            .sum()
    }

    /// Shows `candidates` as previews where that is smaller. Returns what was offloaded and the
    /// tokens that freed.
    pub(super) fn offload(&mut self, candidates: &[usize], id: Uuid) -> (Vec<OffloadedItem>, i64) {
        let mut offloaded = Vec::new();
        let mut freed = 0;
        for &i in candidates {
            let item = &self.live[i];
            let mut preview = view::preview_message(item.event, view::PREVIEW_CHARS, item.chars());
            preview.tokens = preview.cost(self.tokenizer);
            if preview.tokens >= item.tokens {
                continue;
            }
            freed += item.tokens - preview.tokens;
            let reason = if view::has_images(item.event) {
                Reason::OffloadedImage
            } else {
                Reason::OffloadedLargeToolResult
            };
            let reduced = item.reduced(Projection::Preview, preview.tokens, reason, id);
            offloaded.push(offloaded_item(&reduced));
            self.live[i] = reduced;
        }
        (offloaded, freed)
    }

    /// Shows every answered tool result in `..end` by reference only (an overflow retry).
    pub(super) fn mask_tool_results(&mut self, end: usize, id: Uuid) -> Vec<OffloadedItem> {
        self.mask_until(end, 0, i64::MIN, id).0
    }

    /// The ids of the view's `recall_observation` calls: their results are what the model
    /// asked to see again, so they stay in full while recent.
    pub(super) fn recall_calls(&self) -> HashSet<&'a str> {
        self.live
            .iter()
            .flat_map(|l| l.pairing().2)
            .filter(|call| call.name == observation::RECALL_TOOL)
            .map(|call| call.id.as_str())
            .collect()
    }

    /// Whether item `i` is a tool result shown in full that compaction may reduce.
    pub(super) fn reducible_result(&self, i: usize) -> bool {
        let item = &self.live[i];
        item.projection == Projection::Full
            && is_tool_result(item.event)
            && !always_kept(item.event)
    }

    /// Shows item `i` as its head and tail in about `max_chars` characters, when that is
    /// smaller. Returns what it offloaded and the tokens that freed.
    pub(super) fn excerpt(
        &mut self,
        i: usize,
        max_chars: usize,
        id: Uuid,
    ) -> Option<(OffloadedItem, i64)> {
        let item = &self.live[i];
        // Only a long text is cut: an image the result carries stays while it is recent.
        if item.chars() <= max_chars as i64 {
            return None;
        }
        let mut message = view::excerpt_message(item.event, max_chars, item.chars());
        message.tokens = message.cost(self.tokenizer);
        if message.tokens >= item.tokens {
            return None;
        }
        let freed = item.tokens - message.tokens;
        let reason = Reason::OffloadedLargeToolResult;
        let mut reduced = item.reduced(Projection::Preview, message.tokens, reason, id);
        reduced.excerpt = max_chars as i64;
        let offloaded = offloaded_item(&reduced);
        self.live[i] = reduced;
        Some((offloaded, freed))
    }

    /// Shows tool results before `end` by reference, oldest first, until the view costs at
    /// most `target` (`total` is what it costs now). Returns what it masked and the new cost.
    pub(super) fn mask_until(
        &mut self,
        end: usize,
        mut total: i64,
        target: i64,
        id: Uuid,
    ) -> (Vec<OffloadedItem>, i64) {
        let mut masked = Vec::new();
        for item in &mut self.live[..end] {
            if total <= target {
                break;
            }
            if !is_tool_result(item.event)
                || always_kept(item.event)
                || item.projection == Projection::Reference
            {
                continue;
            }
            let mut reference = view::reference_message(item.event, item.chars());
            reference.tokens = reference.cost(self.tokenizer);
            if reference.tokens >= item.tokens {
                continue;
            }
            total -= item.tokens - reference.tokens;
            let reason = Reason::MaskedCompletedToolExchange;
            *item = item.reduced(Projection::Reference, reference.tokens, reason, id);
            masked.push(offloaded_item(item));
        }
        (masked, total)
    }

    /// The tokens the summary grows by when `folded` tokens are folded into it: a quarter of
    /// them, within its bound.
    pub(super) fn summary_growth(&self, folded: i64) -> i64 {
        let now = self.summary_message.as_ref().map_or(0, |m| m.tokens);
        (folded / 4).min((self.summary_max_chars as i64 / 3 - now).max(0))
    }

    /// The first cut at which folding the items before it brings the view (costing `total`)
    /// to `target`, counting a summary that grows by a quarter of what it folds; `end` when
    /// none before it does. Never separates a tool call from its results.
    pub(super) fn fold_cut(&self, end: usize, valid: &[bool], total: i64, target: i64) -> usize {
        let mut folded = 0;
        let mut cut = 0;
        while cut < end && total - folded + self.summary_growth(folded) > target {
            if !self.stays(self.live[cut].event) {
                folded += self.live[cut].tokens;
            }
            cut += 1;
        }
        while cut < end && !valid[cut] {
            cut += 1;
        }
        cut
    }

    /// Tokens the items before `cut` cost in the view, except those that would stay.
    pub(super) fn foldable_tokens(&self, cut: usize) -> i64 {
        self.kept
            .iter()
            .chain(&self.live[..cut])
            .filter(|l| !self.stays(l.event))
            .map(|l| l.tokens)
            .sum()
    }

    /// Whether a fold keeps `event` in full.
    fn stays(&self, event: &Event) -> bool {
        (always_kept(event) && !self.collapsing.contains(&event.seq))
            || self.keep_in_fold.contains(&event.seq)
    }

    /// Whether folding at `cut` would summarise anything: not when only pinned items and
    /// system prompts come before it, and no kept item collapses.
    pub(super) fn folds_anything(&self, cut: usize) -> bool {
        self.kept.iter().any(|l| !self.stays(l.event))
            || self.live[..cut].iter().any(|l| !self.stays(l.event))
    }

    /// The events that folding at `cut` would summarise, borrowed from the log, in seq order:
    /// the kept items that collapse, then the live ones before `cut`.
    pub(super) fn foldable_events(&self, cut: usize) -> Vec<&'a Event> {
        self.kept
            .iter()
            .chain(&self.live[..cut])
            .filter(|l| !self.stays(l.event))
            .map(|l| l.event)
            .collect()
    }

    /// Keeps the first user request and the two most recent in full through any fold (the
    /// episodic policy's promise).
    pub(super) fn keep_first_and_recent_requests(&mut self) {
        let users: Vec<i64> = self
            .kept
            .iter()
            .chain(&self.live)
            .filter(|l| l.event.body.role() == Some(Role::User))
            .map(|l| l.event.seq)
            .collect();
        self.keep_in_fold = users
            .iter()
            .take(1)
            .chain(users.iter().rev().take(2))
            .copied()
            .collect();
    }

    /// Marks pinned user messages and notes to collapse at the next fold, oldest first (the
    /// kept ones, then those before `cut`), until folding at `cut` brings the view (costing
    /// `total`) to `target`. Those the fold keeps anyway (`keep_in_fold`) stay. Returns whether
    /// any was marked.
    pub(super) fn collapse_pinned(&mut self, cut: usize, total: i64, target: i64) -> bool {
        let mut folded = self.foldable_tokens(cut);
        let mut marked = Vec::new();
        for item in self.kept.iter().chain(&self.live[..cut]) {
            if total - folded + self.summary_growth(folded) <= target {
                break;
            }
            if collapsible(item.event) && !self.keep_in_fold.contains(&item.event.seq) {
                folded += item.tokens;
                marked.push(item.event.seq);
            }
        }
        self.collapsing.extend(&marked);
        !marked.is_empty()
    }

    /// Folds the items before `cut` into `summary`: system and pinned ones stay in full.
    pub(super) fn fold(
        &mut self,
        cut: usize,
        summary: Summary,
        id: Uuid,
        reason: Reason,
    ) -> Option<FoldedRange> {
        // Kept items that no longer stay (collapsed pins, a user request no longer among the
        // most recent) leave too; the folded range of this fold does not cover them.
        let kept = std::mem::take(&mut self.kept);
        let (kept, left): (Vec<_>, Vec<_>) = kept.into_iter().partition(|l| self.stays(l.event));
        self.kept = kept;
        let collapse = |item: &Live<'a>| {
            let reason = if collapsible(item.event) {
                Reason::PinnedCollapsed
            } else {
                Reason::Summarized
            };
            item.reduced(Projection::Summary, 0, reason, id)
        };
        self.collapsed.extend(left.iter().map(collapse));
        if cut == 0 {
            self.collapsing.clear();
            if !left.is_empty() {
                self.summary = summary;
                self.refresh_summary_message();
            }
            return None;
        }
        let from_seq = self.live[0].event.seq;
        let to_seq = self.live[cut - 1].event.seq;
        let live: Vec<_> = self.live.drain(..cut).collect();
        for item in live {
            if self.collapsing.contains(&item.event.seq) {
                self.collapsed.push(collapse(&item));
            } else if self.stays(item.event) {
                self.kept.push(item);
            }
        }
        self.collapsing.clear();
        self.checkpoint = to_seq;
        self.summary = summary;
        self.refresh_summary_message();
        Some(FoldedRange {
            from_seq,
            to_seq,
            compaction_id: id,
            reason,
        })
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
