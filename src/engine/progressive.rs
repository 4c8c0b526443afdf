//! The progressive steps of the warn, soft and full tiers: offload large tool results in the
//! head, then fold the oldest half of the head (soft) or all of it (full) into the summary, but
//! only when that frees a worthwhile share of the window.

use super::run::{Pending, Run};
use super::working::{always_kept, Working};
use crate::domain::compaction::{Mode, Tier};

impl<'a> Run<'a> {
    /// Plans the tier's step: the run goes on, or waits for a summary when it folds.
    pub(super) fn progressive(mut self) -> Step<'a> {
        let config = self.input.config;
        let id = self.input.compaction_id;
        let must = self.input.mode == Mode::Force || self.before_tokens > self.room;
        if self.settled || !matches!(self.tier, Tier::Warn | Tier::Soft | Tier::Full) {
            return Step::Go(self);
        }
        let mut candidate = self.work.clone();
        let valid = candidate.valid_cuts();
        let tail = candidate.tail_start(config.min_tail_messages as usize, &valid);
        let threshold = i64::from(config.offload_threshold_chars);
        let offloadable = candidate.offload_candidates(tail, threshold);
        // In the warn tier (nothing folded), most calls free too little to act: tell that from
        // the candidates' costs before cutting and counting any preview.
        let hopeless = self.tier == Tier::Warn
            && !must
            && candidate.offload_ceiling(&offloadable) < config.min_gain_tokens();
        let (offloaded, offload_gain) = if hopeless {
            (Vec::new(), 0)
        } else {
            candidate.offload(&offloadable, id)
        };
        let cut = match self.tier {
            Tier::Soft => half_cut(&candidate, tail, &valid),
            Tier::Full => tail,
            _ => 0,
        };
        // Decide before asking for any summary whether the gain is worth it: folding frees the
        // folded tokens, less what the summary may grow by. A summary is far smaller than what
        // it covers; assume a quarter at worst, within the summary's bound.
        let summary_now = candidate.summary_message.as_ref().map_or(0, |m| m.tokens);
        let summary_room = (self.work.summary_max_chars as i64 / 3 - summary_now).max(0);
        let folding = candidate.foldable_tokens(cut);
        let fold_gain = folding - (folding / 4).min(summary_room);
        let worthwhile = must || offload_gain + fold_gain.max(0) >= config.min_gain_tokens();
        if !worthwhile || (cut == 0 && offloaded.is_empty()) {
            return Step::Go(self);
        }
        if cut > 0 {
            let events = candidate.foldable_events(cut);
            return Step::Wait(Pending {
                run: self,
                candidate,
                cut,
                offloaded,
                events,
            });
        }
        candidate.refresh_summary_message();
        self.accept(candidate, offloaded);
        Step::Go(self)
    }
}

/// What comes after a progressive step.
// Made and taken apart once per compaction: boxing the larger variant would only add an
// allocation.
#[allow(clippy::large_enum_variant)]
pub(super) enum Step<'a> {
    Go(Run<'a>),
    Wait(Pending<'a>),
}

/// The cut that folds the oldest half of the head (by tokens), moved later so that no tool call
/// is separated from its results, and never into the tail.
pub(super) fn half_cut(work: &Working<'_>, tail: usize, valid: &[bool]) -> usize {
    let head_tokens: i64 = work.foldable_tokens(tail);
    let mut acc = 0;
    let mut cut = 0;
    while cut < tail && acc * 2 < head_tokens {
        if !always_kept(work.live[cut].event) {
            acc += work.live[cut].tokens;
        }
        cut += 1;
    }
    while cut < tail && !valid[cut] {
        cut += 1;
    }
    cut
}
