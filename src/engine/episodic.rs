//! The episodic policy: eviction by structure instead of age alone. Every call, a tool result
//! larger than `observation_max_chars` (16,000 characters) or `item_max_share` of the room is
//! shown as its head and tail, even while active. When the view reaches the trigger (or the
//! caller forces it), passes run in order, each stopping as soon as the view is down to the
//! target:
//!
//! 1. completed tool exchanges outside completed episodes and the active items, by their tool's
//!    priority (writes and edits, then reads, then shell output and errors), oldest first
//!    within a priority: each result becomes one line naming the tool and its `observation://`
//!    reference. Exchanges inside a completed episode leave with their episode, in pass 2, so
//!    that an exploration an action depends on is not taken before the action;
//! 2. completed episodes, actions first, then explorations: an exploration once every action
//!    depending on it is archived, those nothing depends on first. An archived episode's items
//!    are shown by reference; its conclusion (the `episode_end`) stays in full;
//! 3. the oldest conversation is folded into the summary, never into the active items; the
//!    first user request and the two most recent stay verbatim, but when folding cannot bring
//!    the view to the target, those of them longer than the tail's cap (not the current one,
//!    one in the active episode, one the client pinned or one with images) are shown as their
//!    head and tail with their reference, longest first. When that is not
//!    enough, the pinned user messages and notes collapse into the summary too, oldest first
//!    (the first and two most recent requests aside), each named there by its `observation://`
//!    reference.
//!
//! When the view is still over the room after passes 1 and 2, the current turn's answered
//! exchanges but the newest (their results, and their calls' long arguments) are archived too
//! before anything is folded or truncated.
//!
//! The current turn is the last user message on, or the four newest tool calls when that is
//! shorter (an agent's loop after one request is not all current), its results older than the
//! newest only within the tail's cap. Like the progressive policy, a compaction rewrites the
//! view's middle only for a worthwhile gain, and only when it brings the view down to the
//! target, unless the view does not fit.
//!
//! Below the trigger, from a quarter of the way back to the target, the step reports the warn
//! tier: from there the service has the summary of the fold an eviction would make prepared
//! by the summariser model (`next_fold`), so the eviction need not wait for it.
//!
//! History without episodes is one long exploration of unknown dependencies: passes 1 and 3.
//!
//! The agent's own condensation (`POST /sessions/{id}/condense`) is taken here too, whatever
//! the policy: see `Run::condense`.

mod passes;
mod spans;

use super::progressive::{Bounds, Step};
use super::run::{Pending, Run};
use super::view;
use super::working::{always_kept, is_tool_result};
use crate::domain::compaction::{Mode, Projection, Reason, Tier};
use crate::domain::condensation::{Condensation, Memory};
use crate::domain::episodes::Episodes;
use passes::{
    archive, archive_current, archive_episodes, archive_exchanges, fold_end, Eviction, EvictionPlan,
};
use spans::{active_items, episode_spans, long_requests, newest_exchanges, Span};

/// Characters a token holds at least in tool output, to size a cap given in tokens.
const CHARS_PER_TOKEN: i64 = 3;

impl<'a> Run<'a> {
    /// Plans the episodic step: the run goes on, or waits for a summary when pass 3 folds.
    pub(super) fn episodic(mut self) -> Step<'a> {
        if self.settled {
            return Step::Go(self);
        }
        self.cap_observations();
        let config = self.input.config;
        let (trigger, prepare_from, mut target) = (
            self.share(config.episodic.trigger),
            self.share(config.episodic.prepare_from()),
            self.share(config.episodic.target),
        );
        let before = self.current_tokens();
        let forced = self.input.mode == Mode::Force;
        let must = forced || before > self.bounds.room;
        if before < trigger && !must {
            // Near the trigger: the warn tier, from which the service has the summary of the
            // next fold prepared (`next_fold`).
            self.tier = if before >= prepare_from {
                Tier::Warn
            } else {
                Tier::None
            };
            return Step::Go(self);
        }
        self.tier = if must { Tier::Full } else { Tier::Soft };
        if forced {
            target = 0;
        }
        // Rewrite the view's middle, which the provider's cache then misses, only when that
        // frees a worthwhile gain and brings the view down to the target. One that cannot
        // (what must stay, the current turn and the pinned requests, is over the target)
        // waits until the view no longer fits: evicting at the trigger would free a little,
        // and the view would be back at the trigger a few turns later.
        let min_gain = config.min_gain_tokens();
        let worthwhile = |before: i64, after: i64| before - after >= min_gain && after <= target;
        let plan = self.plan(target);
        let fold_seq = plan.fold_seq();
        let EvictionPlan {
            candidate,
            offloaded,
            cut,
            after_fold,
        } = plan;
        if let Some(cut) = cut {
            if must || worthwhile(before, after_fold) {
                return Step::Wait(Pending::new(self, candidate, cut, offloaded));
            }
            // Waiting: the fold that comes when the view no longer fits starts with this
            // one, and its summary can be prepared meanwhile.
            self.declined_fold = fold_seq;
        }
        let tokens = candidate.tokens();
        if offloaded.is_empty() || !(must || worthwhile(before, tokens)) {
            return Step::Go(self);
        }
        self.accept(candidate, offloaded);
        Step::Go(self)
    }

    /// The last seq the eviction at the trigger would fold as the view stands (see
    /// [`super::next_fold`]).
    pub(super) fn next_fold(mut self) -> Option<i64> {
        self.cap_observations();
        self.plan(self.share(self.input.config.episodic.target))
            .fold_seq()
    }

    /// The room's `share` in tokens, for the view's messages.
    fn share(&self, share: f64) -> i64 {
        let calibration = self.input.state.calibration_factor();
        Bounds::messages_at(
            self.input.config,
            self.input.tools_tokens,
            calibration,
            share,
        )
    }

    /// The eviction's passes on a copy of the view, down to `target` tokens: the copy, what it
    /// archived, and the fold pass 3 would make.
    fn plan(&self, target: i64) -> EvictionPlan<'a> {
        let config = self.input.config;
        let before = self.current_tokens();
        let id = self.input.compaction_id;
        let mut candidate = self.work.clone();
        let spans = episode_spans(&candidate);
        let active = active_items(&candidate, &spans, self.bounds.tail_cap);
        let episodes = Episodes::from_events(
            candidate
                .kept
                .iter()
                .chain(&candidate.live)
                .map(|l| l.event),
        );
        let mut eviction = Eviction::new(&mut candidate, &active, before, target, id);
        archive_exchanges(&mut eviction, config, &spans, &active);
        archive_episodes(&mut eviction, &episodes, &active);
        // Still over the room: rather than truncate, the current turn's answered exchanges
        // but the newest are archived too (results and long arguments), oldest first.
        if eviction.tokens > self.bounds.room {
            archive_current(&mut eviction, &active);
        }
        eviction.archive_calls();
        let mut offloaded = eviction.offloaded;
        candidate.refresh_summary_message();
        let mut tokens = candidate.tokens();
        let (mut cut, mut after_fold) = (None, tokens);
        if tokens > target {
            // The first user request and the two most recent stay verbatim (`keep_in_fold`,
            // set for every path of the policy by `Run::start`).
            let valid = candidate.valid_cuts();
            let end = fold_end(&candidate, &active, &valid);
            let at = candidate.fold_cut(end, &valid, tokens, target);
            // Unless folding cannot reach the target (the configured one, when forced): then
            // those longer than the tail's cap, but the current one and those of the active
            // episode, are shown as their head and tail, longest first, until it can. The fold
            // still reaches as far (a summary prepared for it stays usable).
            let goal = target.max(self.share(config.episodic.target));
            let cap = self.bounds.tail_cap;
            let max_chars = (cap * CHARS_PER_TOKEN).max(view::PREVIEW_CHARS as i64) as usize;
            for seq in long_requests(&candidate, &active, cap) {
                let folding = candidate.foldable_tokens(at);
                if tokens - folding + candidate.summary_growth(folding) <= goal {
                    break;
                }
                if let Some((item, freed)) = candidate.excerpt_request(seq, max_chars, id) {
                    offloaded.push(item);
                    tokens -= freed;
                }
            }
            // The last resort: pinned user messages and notes collapse too, oldest first.
            candidate.collapse_pinned(at, tokens, target);
            let folding = candidate.foldable_tokens(at);
            if candidate.folds_anything(at) {
                cut = Some(at);
                after_fold = tokens - folding + candidate.summary_growth(folding);
            }
        }
        EvictionPlan {
            candidate,
            offloaded,
            cut,
            after_fold,
        }
    }

    /// Takes the agent's condensation as the session's memory item, in place of any earlier
    /// one, and archives the completed tool exchanges it covers: every answered result but those
    /// of the newest four exchanges and of the active episode. User messages, pinned items and
    /// the observations themselves (recallable by reference) stay.
    pub(super) fn condense(&mut self, condensation: &Condensation) {
        let id = self.input.compaction_id;
        let work = &mut self.work;
        let spans = episode_spans(work);
        let newest = newest_exchanges(work);
        let mut offloaded = Vec::new();
        for (i, &span) in spans.iter().enumerate().take(newest) {
            let item = &work.live[i];
            if span != Span::Active
                && is_tool_result(item.event)
                && !always_kept(item.event)
                && item.projection != Projection::Reference
            {
                archive(work, i, Reason::ArchivedToolExchange, id, &mut offloaded);
            }
        }
        let active: Vec<bool> = spans.iter().map(|&s| s == Span::Active).collect();
        let mut eviction = Eviction::new(work, &active, 0, i64::MIN, id);
        eviction.offloaded = offloaded;
        eviction.archive_calls();
        let (work, offloaded) = (eviction.work, eviction.offloaded);
        work.set_memory(Memory {
            condensation: condensation.clone(),
            compaction_id: id,
            head_seq: self.input.head_seq,
        });
        self.offloaded.extend(offloaded);
        self.preserved_tail = self.work.full_seqs();
        self.acted = true;
    }

    /// Shows every tool result over the observation cap as its head and tail.
    fn cap_observations(&mut self) {
        let cap = i64::from(self.input.config.episodic.observation_max_chars)
            .min(self.bounds.item_cap * CHARS_PER_TOKEN)
            .max(view::PREVIEW_CHARS as i64);
        let id = self.input.compaction_id;
        let mut capped = Vec::new();
        for i in 0..self.work.live.len() {
            // A text of at most `cap` bytes has at most as many characters: most results are
            // told apart without counting.
            let item = &self.work.live[i];
            if view::text_of(item.event).len() as i64 <= cap || !self.work.reducible_result(i) {
                continue;
            }
            // Only a result over the cap is cut (`excerpt` counts its characters).
            capped.extend(self.work.excerpt(i, cap as usize, id).map(|(o, _)| o));
        }
        if !capped.is_empty() {
            self.offloaded.extend(capped);
            self.preserved_tail = self.work.full_seqs();
            self.acted = true;
        }
    }
}
