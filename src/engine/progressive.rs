//! The progressive steps, gentlest first, each taken only when it frees a worthwhile share of
//! the window:
//!
//! - every call: a tool result over the per-item cap is shown as its head and tail with its
//!   `observation://` reference, even while recent (it is new, so the view still only grows at
//!   its end);
//! - warn tier: every large tool result beyond the tail is offloaded to a preview, all at once,
//!   when that alone brings the view down to the low-water mark;
//! - soft and full tiers, and before any emergency: the view is brought down to the low-water
//!   mark, so that the next compaction is many turns away (one that cannot reach the mark
//!   waits until the view reaches the emergency tier). Large results beyond the tail are
//!   offloaded, the others masked (one line and their error lines, oldest first, every
//!   assistant message and tool call kept), the tail held to its token cap (its older results
//!   as excerpts, then the long arguments of its older answered turns by reference), and only
//!   then is the oldest part folded into the summary, as far as the mark needs.
//!
//! The tier is read from the view after the per-item caps: a result its cap brings under the
//! thresholds changes only the view's end.
//!
//! Emergency truncation (see `emergency`) is left for what these cannot bring within the room.

use super::run::{Pending, Run};
use super::view;
use super::working::Working;
use crate::domain::compaction::{Mode, OffloadedItem, Tier};
use crate::domain::observation::DEFAULT_LIMIT;
use crate::domain::session::SessionConfig;
use std::collections::HashSet;

use uuid::Uuid;

/// The characters of a tail result shown as head and tail when the tail is over its cap.
const TAIL_EXCERPT_CHARS: usize = 1_500;
/// Characters a token holds at least in tool output, to size an excerpt to a token cap.
const CHARS_PER_TOKEN: i64 = 3;
/// The tokens a recall of the default size brings back at most: its characters and the line
/// that names the rest.
const RECALL_SLICE_TOKENS: i64 = (DEFAULT_LIMIT as i64 + 200) / CHARS_PER_TOKEN;

/// The token bounds a compaction works to, all in message tokens as ctxd counts them.
#[derive(Debug, Clone, Copy)]
pub(super) struct Bounds {
    /// The most that fits the window.
    pub(super) room: i64,
    /// Where a compaction that acts brings the view down to.
    pub(super) low_water: i64,
    /// The most one tool result may take in full.
    pub(super) item_cap: i64,
    /// The most the verbatim tail may take.
    pub(super) tail_cap: i64,
    /// The most a recalled slice may take in full: the tail's cap, and at least what a recall
    /// of the default size brings back (within a quarter of the room), so that a recall the
    /// model made is not itself cut where the tail's cap is small.
    pub(super) recall_cap: i64,
}

impl Bounds {
    /// The message tokens (as ctxd counts them) at which a request uses `share` of the window.
    pub(super) fn messages_at(
        config: &SessionConfig,
        tools_tokens: i64,
        calibration: f64,
        share: f64,
    ) -> i64 {
        let window = f64::from(config.context_window);
        let fixed = (tools_tokens + i64::from(config.max_output_tokens)) as f64;
        ((share * window - fixed) / calibration).floor() as i64
    }

    /// The bounds for a view whose system prompts and pinned items take `pinned` tokens: the
    /// tail's and an item's caps are shares of the room those leave (at least a quarter of the
    /// room), so that a long system prompt does not leave the turn's results too little.
    pub(super) fn new(
        config: &SessionConfig,
        tools_tokens: i64,
        calibration: f64,
        pinned: i64,
    ) -> Self {
        let messages = |share: f64| Self::messages_at(config, tools_tokens, calibration, share);
        let room = messages(1.0);
        let free = (room - pinned).max(room / 4);
        let share = |s: f64| (s * free as f64).floor() as i64;
        let tail_cap = share(config.tail_max_share).max(1);
        Self {
            room,
            low_water: messages(config.thresholds.low_water).max(0),
            item_cap: share(config.item_max_share).max(1),
            tail_cap,
            recall_cap: tail_cap.max(RECALL_SLICE_TOKENS.min(room / 4)),
        }
    }
}

impl<'a> Run<'a> {
    /// Plans the tier's step: the run goes on, or waits for a summary when it folds.
    pub(super) fn progressive(mut self) -> Step<'a> {
        if self.settled {
            return Step::Go(self);
        }
        self.cap_items();
        self.retier_after_caps();
        match self.tier {
            Tier::None => Step::Go(self),
            Tier::Warn => {
                self.offload_head();
                Step::Go(self)
            }
            Tier::Soft | Tier::Full | Tier::Emergency => self.bring_down(),
        }
    }

    /// The view as it stands now (with what earlier steps of this run did) and its tokens.
    pub(super) fn current_tokens(&self) -> i64 {
        if self.acted {
            self.work.tokens()
        } else {
            self.before_tokens
        }
    }

    /// Whether the compaction must act whatever it frees.
    fn must(&self) -> bool {
        self.input.mode == Mode::Force
            || self.tier == Tier::Emergency
            || self.current_tokens() > self.bounds.room
    }

    /// Shows every tool result over the per-item cap as its head and tail.
    pub(super) fn cap_items(&mut self) {
        let id = self.input.compaction_id;
        let capped = cap_items(&mut self.work, &self.bounds, id);
        if !capped.is_empty() {
            self.offloaded.extend(capped);
            self.preserved_tail = self.work.full_seqs();
            self.acted = true;
        }
    }

    /// Takes the tier from the view after the caps when they acted. A capped result is new
    /// (earlier ones were capped when they came), so the view still only grows at its end:
    /// one large result that the cap brings under the thresholds starts no compaction that
    /// would rewrite the view's middle. A forced compaction and an overflow retry keep the tier
    /// they started at.
    fn retier_after_caps(&mut self) {
        if !self.acted || self.input.mode == Mode::Force || self.input.overflow_retry > 0 {
            return;
        }
        let config = self.input.config;
        let utilization = config.utilization(
            self.current_tokens(),
            self.input.state.calibration_factor(),
            self.input.tools_tokens,
        );
        self.tier = self
            .tier
            .min(Tier::for_utilization(utilization, &config.thresholds));
    }

    /// The warn tier: every large tool result beyond the tail as a preview, at once, when that
    /// alone brings the view down to the low-water mark. An offload that frees less would
    /// rewrite the view's middle and leave it near the tier, to be rewritten again a few turns
    /// later; the soft tier brings such a view down with the gentler steps and the fold.
    fn offload_head(&mut self) {
        let config = self.input.config;
        let mut candidate = self.work.clone();
        let valid = candidate.valid_cuts();
        let tail = candidate.tail_start(config.min_tail_messages as usize, &valid);
        let threshold = i64::from(config.offload_threshold_chars);
        let offloadable = candidate.offload_candidates(tail, threshold);
        let before = self.current_tokens();
        let needed = (before - self.bounds.low_water).max(config.min_gain_tokens());
        // Most calls free too little to act: tell that from the candidates' costs before
        // cutting and counting any preview.
        if !self.must() && candidate.offload_ceiling(&offloadable) < needed {
            return;
        }
        let (offloaded, gain) = candidate.offload(&offloadable, self.input.compaction_id);
        if !offloaded.is_empty() && (self.must() || gain >= needed) {
            self.accept(candidate, offloaded);
        }
    }

    /// The soft and full tiers: the view down to the low-water mark, folding last; they act
    /// only when they reach the mark, below the emergency tier and within the room.
    fn bring_down(self) -> Step<'a> {
        let config = self.input.config;
        let before = self.current_tokens();
        // A forced compaction folds all it may, as the caller asked.
        let mut bounds = self.bounds;
        if self.input.mode == Mode::Force {
            bounds.low_water = 0;
        }
        let plan = plan(
            &self.work,
            config,
            &bounds,
            before,
            self.input.compaction_id,
        );
        let Plan {
            mut candidate,
            offloaded,
            cut,
            tokens,
        } = plan;
        let must = self.must();
        if !must && before - tokens < config.min_gain_tokens() {
            return Step::Go(self);
        }
        // Short of the low-water mark (what must stay, the summary and the tail, is over it),
        // the soft and full tiers would free a little and leave the view near the tier, to be
        // rewritten again a turn or two later: they wait until the view reaches the emergency
        // tier or no longer fits, where the gentler steps act first. The next fold's summary
        // is prepared meanwhile (from the warn tier on).
        if !must && tokens > bounds.low_water {
            return Step::Go(self);
        }
        if cut > 0 {
            return Step::Wait(Pending::new(self, candidate, cut, offloaded));
        }
        if offloaded.is_empty() {
            return Step::Go(self);
        }
        candidate.refresh_summary_message();
        let mut run = self;
        run.accept(candidate, offloaded);
        Step::Go(run)
    }
}

/// Shows every tool result of `work` over the per-item cap as its head and tail. A recalled
/// slice is what the model asked to see: it is held to the recall cap instead.
pub(super) fn cap_items(work: &mut Working<'_>, bounds: &Bounds, id: Uuid) -> Vec<OffloadedItem> {
    let mut capped = Vec::new();
    // Most calls cap nothing: the recall calls are looked up only for an item over the cap.
    let mut recalls: Option<HashSet<&str>> = None;
    let least = bounds.item_cap.min(bounds.recall_cap);
    for i in 0..work.live.len() {
        let item = &work.live[i];
        if item.tokens <= least || !work.reducible_result(i) {
            continue;
        }
        let recalls = recalls.get_or_insert_with(|| work.recall_calls());
        let recalled = item
            .event
            .body
            .tool_call_id()
            .is_some_and(|c| recalls.contains(c));
        let cap = if recalled {
            bounds.recall_cap
        } else {
            bounds.item_cap
        };
        if item.tokens <= cap {
            continue;
        }
        let chars = (cap * CHARS_PER_TOKEN).max(view::PREVIEW_CHARS as i64) as usize;
        capped.extend(work.excerpt(i, chars, id).map(|(o, _)| o));
    }
    capped
}

/// What bringing a view down to the low-water mark does: the view with everything but the
/// fold applied, what that offloaded, where to fold (0: nowhere) and the tokens after.
pub(super) struct Plan<'a> {
    pub(super) candidate: Working<'a>,
    pub(super) offloaded: Vec<OffloadedItem>,
    pub(super) cut: usize,
    pub(super) tokens: i64,
}

/// Brings `work` (costing `tokens`) down to the low-water mark: large results beyond the tail
/// offloaded, the others masked oldest first, the tail held to its cap, then the fold that the
/// rest needs. Pure, so that the summary of the next fold can be prepared ahead of it.
pub(super) fn plan<'a>(
    work: &Working<'a>,
    config: &SessionConfig,
    bounds: &Bounds,
    tokens: i64,
    id: Uuid,
) -> Plan<'a> {
    let mut candidate = work.clone();
    let valid = candidate.valid_cuts();
    let tail = candidate.tail_start(config.min_tail_messages as usize, &valid);
    let threshold = i64::from(config.offload_threshold_chars);
    let offloadable = candidate.offload_candidates(tail, threshold);
    let (mut offloaded, freed) = candidate.offload(&offloadable, id);
    let target = bounds.low_water;
    let (masked, mut tokens) = candidate.mask_until(tail, tokens - freed, target, id);
    offloaded.extend(masked);
    // The tail over its cap: its oldest results as head and tail, the newest item kept.
    let recalls = candidate.recall_calls();
    let mut tail_tokens: i64 = candidate.live[tail..].iter().map(|l| l.tokens).sum();
    let last = candidate.live.len().saturating_sub(1);
    for i in tail..last {
        if tail_tokens <= bounds.tail_cap {
            break;
        }
        let recalled = candidate.live[i]
            .event
            .body
            .tool_call_id()
            .is_some_and(|c| recalls.contains(c));
        if recalled || !candidate.reducible_result(i) {
            continue;
        }
        if let Some((item, freed)) = candidate.excerpt(i, TAIL_EXCERPT_CHARS, id) {
            offloaded.push(item);
            tail_tokens -= freed;
            tokens -= freed;
        }
    }
    // Still over: the long arguments of its answered turns (files written, patches) by
    // reference, oldest first.
    if tail_tokens > bounds.tail_cap {
        let (shown, after) =
            candidate.offload_arguments_until(tail..last, tail_tokens, bounds.tail_cap, id);
        offloaded.extend(shown);
        tokens -= tail_tokens - after;
    }
    // A cut past pinned items only would fold nothing: the summary stays as it is.
    let cut = match candidate.fold_cut(tail, &valid, tokens, target) {
        cut if tokens > target && candidate.folds_anything(cut) => cut,
        _ => 0,
    };
    let folding = candidate.foldable_tokens(cut);
    let grows = candidate.summary_growth(folding);
    Plan {
        candidate,
        offloaded,
        cut,
        tokens: tokens - folding + grows,
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
