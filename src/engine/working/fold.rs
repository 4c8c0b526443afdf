//! Where a view may be cut, and folding what comes before a cut into the summary: what stays
//! in full (system prompts, pins, the requests a policy keeps), what collapses, and what the
//! summary's growth costs.

use uuid::Uuid;

use super::{always_kept, collapsible, Live, Working};
use crate::domain::compaction::{Projection, Reason, Summary};
use crate::domain::event::{is_request, Event, EventBody, Role};
use crate::domain::pairing::OpenCalls;
use crate::domain::state::FoldedRange;

impl<'a> Working<'a> {
    /// Where the live items may be cut so that no tool call is separated from its results:
    /// `valid[c]` is true when no result at or after `c` answers a call before `c`.
    pub(in crate::engine) fn valid_cuts(&self) -> Vec<bool> {
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
    pub(in crate::engine) fn tail_start(&self, min_tail: usize, valid: &[bool]) -> usize {
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

    /// The tokens the summary grows by when `folded` tokens are folded into it: a quarter of
    /// them, within its bound.
    pub(in crate::engine) fn summary_growth(&self, folded: i64) -> i64 {
        let now = self.summary_message.as_ref().map_or(0, |m| m.tokens);
        (folded / 4).min((self.summary_max_chars as i64 / 3 - now).max(0))
    }

    /// The first cut at which folding the items before it brings the view (costing `total`)
    /// to `target`, counting a summary that grows by a quarter of what it folds; `end` when
    /// none before it does. Never separates a tool call from its results.
    pub(in crate::engine) fn fold_cut(
        &self,
        end: usize,
        valid: &[bool],
        total: i64,
        target: i64,
    ) -> usize {
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
    pub(in crate::engine) fn foldable_tokens(&self, cut: usize) -> i64 {
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
    pub(in crate::engine) fn folds_anything(&self, cut: usize) -> bool {
        self.kept.iter().any(|l| !self.stays(l.event))
            || self.live[..cut].iter().any(|l| !self.stays(l.event))
    }

    /// The events that folding at `cut` would summarise, borrowed from the log, in seq order:
    /// the kept items that collapse, then the live ones before `cut`.
    pub(in crate::engine) fn foldable_events(&self, cut: usize) -> Vec<&'a Event> {
        self.kept
            .iter()
            .chain(&self.live[..cut])
            .filter(|l| !self.stays(l.event))
            .map(|l| l.event)
            .collect()
    }

    /// Keeps the first user request and the two most recent in full through any fold (the
    /// episodic policy's promise). Requests, not what a harness sent as the user (a project's
    /// instructions, the environment's context): those fold with the rest.
    pub(in crate::engine) fn keep_first_and_recent_requests(&mut self) {
        let users: Vec<i64> = self
            .kept
            .iter()
            .chain(&self.live)
            .filter(|l| is_user_request(l.event))
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
    /// `total`) to `target`. Those the fold keeps anyway (`keep_in_fold`) stay.
    pub(in crate::engine) fn collapse_pinned(&mut self, cut: usize, total: i64, target: i64) {
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
    }

    /// Folds the items before `cut` into `summary`: system and pinned ones stay in full.
    pub(in crate::engine) fn fold(
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

/// Whether `event` is a request of the user's: a user message that is neither a project's
/// instructions nor markup a harness sent in the user's name (see [`is_request`]).
pub(in crate::engine) fn is_user_request(event: &Event) -> bool {
    match &event.body {
        EventBody::Message(m) => m.role == Role::User && is_request(m.content.text()),
        _ => false,
    }
}
