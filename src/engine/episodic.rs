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
//! results but the newest are archived too before anything is folded or truncated.
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

use std::collections::{HashMap, HashSet};

use super::progressive::{Bounds, Step};
use super::run::{Pending, Run};
use super::view;
use super::working::{always_kept, is_tool_result, Working};
use crate::domain::compaction::{Mode, OffloadedItem, Projection, Reason, Tier};
use crate::domain::condensation::{Condensation, Memory};
use crate::domain::episodes::{Episode, Episodes};
use crate::domain::event::{EpisodeKind, Event, EventBody, Role};
use crate::domain::session::SessionConfig;

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
        // Still over the room: rather than truncate, the current turn's answered results
        // but the newest are archived too, oldest first.
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

/// The newest tool exchanges an autonomous loop's current turn holds: a long loop after one
/// user message is not all current.
const CURRENT_EXCHANGES: usize = 4;

/// `active[i]`: live item `i` is active (in the current turn, or inside the active episode),
/// and no pass touches it. The current turn starts at the last user message, or at the fourth
/// newest tool call when that is later. Active results older than the newest count only as far
/// as they fit `cap` tokens together (newest first), so that a turn or a long episode of large
/// results does not keep the view at the trigger.
fn active_items(work: &Working<'_>, spans: &[Span], cap: i64) -> Vec<bool> {
    let live = &work.live;
    let user = live
        .iter()
        .rposition(|l| l.event.body.role() == Some(Role::User))
        .unwrap_or(0);
    let turn = user.max(newest_exchanges(work));
    let mut active: Vec<bool> = (0..live.len())
        .map(|i| i >= turn || spans[i] == Span::Active)
        .collect();
    let results: Vec<usize> = (0..live.len())
        .rev()
        .filter(|&i| active[i] && is_tool_result(live[i].event))
        .collect();
    let mut held = results.first().map_or(0, |&i| live[i].tokens);
    for &i in results.iter().skip(1) {
        held += live[i].tokens;
        if held > cap {
            active[i] = false;
        }
    }
    active
}

/// Where the newest four tool exchanges start among the live items (0 when there are fewer).
fn newest_exchanges(work: &Working<'_>) -> usize {
    work.live
        .iter()
        .enumerate()
        .rev()
        .filter(|(_, l)| !l.event.body.tool_calls().is_empty())
        .nth(CURRENT_EXCHANGES - 1)
        .map_or(0, |(i, _)| i)
}

/// Where an item stands with respect to the episodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Span {
    Outside,
    /// Inside an episode that has ended.
    Completed,
    Active,
}

/// For each live item, whether it is inside an episode (between its start and its end) and
/// whether that episode is still active.
fn episode_spans(work: &Working<'_>) -> Vec<Span> {
    let live = &work.live;
    let mut spans = vec![Span::Outside; live.len()];
    let mut opened: Option<usize> = None;
    for (i, item) in live.iter().enumerate() {
        match &item.event.body {
            EventBody::EpisodeStart(_) => opened = Some(i),
            EventBody::EpisodeEnd(_) => {
                if let Some(from) = opened.take() {
                    spans[from + 1..i].fill(Span::Completed);
                }
            }
            _ => {}
        }
    }
    if let Some(from) = opened {
        spans[from + 1..].fill(Span::Active);
    }
    spans
}

/// The requests a fold keeps verbatim (the first and the two most recent) that cost more than
/// `cap` tokens, the longest first: not the current one (the last user message), nor one
/// `active` (inside the active episode), nor one with images.
fn long_requests(work: &Working<'_>, active: &[bool], cap: i64) -> Vec<i64> {
    let live = work.live.iter().zip(active).filter(|(_, &a)| !a);
    let requests = || {
        work.kept
            .iter()
            .chain(work.live.iter())
            .filter(|l| l.event.body.role() == Some(Role::User))
    };
    let current = requests().next_back().map(|l| l.event.seq);
    let mut long: Vec<(i64, i64)> = work
        .kept
        .iter()
        .chain(live.map(|(l, _)| l))
        .filter(|l| l.event.body.role() == Some(Role::User) && Some(l.event.seq) != current)
        .filter(|l| l.tokens > cap && work.keep_in_fold.contains(&l.event.seq))
        .filter(|l| !view::has_images(l.event))
        .map(|l| (l.tokens, l.event.seq))
        .collect();
    long.sort_unstable_by(|a, b| b.cmp(a));
    long.into_iter().map(|(_, seq)| seq).collect()
}

/// Whether live item `i` can be archived: not active, not kept, and shown fuller than a
/// reference.
fn archivable(work: &Working<'_>, active: &[bool], i: usize) -> bool {
    let item = &work.live[i];
    !active[i]
        && !always_kept(item.event)
        && matches!(item.projection, Projection::Full | Projection::Preview)
}

/// What an eviction would do: the view after passes 1 and 2 (and pass 3's collapse of pinned
/// items), what they archived, and the fold pass 3 would make (its cut and the view's tokens
/// after it), if any.
struct EvictionPlan<'a> {
    candidate: Working<'a>,
    offloaded: Vec<OffloadedItem>,
    cut: Option<usize>,
    after_fold: i64,
}

impl EvictionPlan<'_> {
    /// The last seq the fold would take in.
    fn fold_seq(&self) -> Option<i64> {
        let last = self.cut?.checked_sub(1)?;
        Some(self.candidate.live[last].event.seq)
    }
}

/// What the passes of one compaction share: the view they archive in, how far it is from the
/// target, and what they have archived.
struct Eviction<'w, 'a> {
    work: &'w mut Working<'a>,
    active: &'w [bool],
    tokens: i64,
    target: i64,
    id: uuid::Uuid,
    offloaded: Vec<OffloadedItem>,
    /// Where each call is made (the assistant turn) and answered, by call id.
    calls: HashMap<&'a str, usize>,
    results: HashMap<&'a str, usize>,
}

impl<'w, 'a> Eviction<'w, 'a> {
    fn new(
        work: &'w mut Working<'a>,
        active: &'w [bool],
        tokens: i64,
        target: i64,
        id: uuid::Uuid,
    ) -> Self {
        let mut calls = HashMap::new();
        let mut results = HashMap::new();
        for (i, item) in work.live.iter().enumerate() {
            let event: &'a Event = item.event;
            for call in event.body.tool_calls() {
                calls.insert(call.id.as_str(), i);
            }
            if let Some(id) = event.body.tool_call_id() {
                results.insert(id, i);
            }
        }
        Self {
            work,
            active,
            tokens,
            target,
            id,
            offloaded: Vec::new(),
            calls,
            results,
        }
    }

    fn reached(&self) -> bool {
        self.tokens <= self.target
    }

    /// Archives live item `i` for `reason` when that is smaller; for a tool result, the whole
    /// exchange: the call's long arguments go too once every result of its turn is archived.
    fn archive(&mut self, i: usize, reason: Reason) {
        self.tokens -= archive(self.work, i, reason, self.id, &mut self.offloaded);
        let answered = self.work.live[i].event.body.tool_call_id();
        if let Some(&call) = answered.and_then(|id| self.calls.get(id)) {
            if self.calls_done(call) {
                self.tokens -= archive(self.work, call, reason, self.id, &mut self.offloaded);
            }
        }
    }

    /// Whether the assistant turn at `i` may show its long arguments by reference: it is not
    /// active, is shown in full without reasoning, and each of its results is archived or
    /// too short for archiving to save anything.
    fn calls_done(&self, i: usize) -> bool {
        let live = &self.work.live;
        let item = &live[i];
        let calls = item.event.body.tool_calls();
        let settled = |id: &str| {
            self.results.get(id).is_some_and(|&r| {
                let result = &live[r];
                match result.projection {
                    Projection::Reference => result.reason.archives(),
                    Projection::Full if !self.active[r] => {
                        let archived = view::archived_message(
                            result.event,
                            result.chars(),
                            self.work.error_lines,
                        );
                        archived.cost(self.work.tokenizer) >= result.tokens
                    }
                    _ => false,
                }
            })
        };
        // Cheapest first: most calls have short arguments, which ends the check before any
        // result's archived form is built.
        !calls.is_empty()
            && !self.active[i]
            && item.projection == Projection::Full
            && !item.reasoning
            && !always_kept(item.event)
            && view::has_long_arguments(item.event)
            && calls.iter().all(|c| settled(c.id.as_str()))
    }

    /// The calls of exchanges archived earlier (by an earlier compaction, or a condensation)
    /// whose arguments are still shown in full.
    fn archive_calls(&mut self) {
        let done: Vec<(usize, Reason)> = (0..self.work.live.len())
            .filter(|&i| self.calls_done(i))
            .map(|i| {
                let first = self.work.live[i].event.body.tool_calls()[0].id.as_str();
                let reason = self
                    .results
                    .get(first)
                    .map(|&r| self.work.live[r].reason)
                    .filter(|r| r.archives())
                    .unwrap_or(Reason::ArchivedToolExchange);
                (i, reason)
            })
            .collect();
        for (i, reason) in done {
            self.tokens -= archive(self.work, i, reason, self.id, &mut self.offloaded);
        }
    }
}

/// Shows live item `i` by reference for `reason` when that is smaller; the tokens freed.
fn archive(
    work: &mut Working<'_>,
    i: usize,
    reason: Reason,
    id: uuid::Uuid,
    offloaded: &mut Vec<OffloadedItem>,
) -> i64 {
    let item = &work.live[i];
    let message = view::archived_message(item.event, item.chars(), work.error_lines);
    let Some((item, freed)) = work.show_as(i, message, reason, id) else {
        return 0;
    };
    offloaded.push(item);
    freed
}

/// Pass 1: completed tool exchanges outside the active items, by tool priority then age.
fn archive_exchanges(e: &mut Eviction, config: &SessionConfig, spans: &[Span], active: &[bool]) {
    let work = &*e.work;
    // The active episode's results beyond the active ones go by priority too: its completed
    // exchanges are not waited for until it ends.
    let mut order: Vec<(u8, usize)> = (0..work.live.len())
        .filter(|&i| spans[i] != Span::Completed)
        .filter(|&i| is_tool_result(work.live[i].event) && archivable(work, active, i))
        .map(|i| {
            let EventBody::Message(m) = &work.live[i].event.body else {
                unreachable!("a tool result is a message")
            };
            let name = m.name.as_deref().unwrap_or_default();
            (config.episodic.priority(name, m.is_error == Some(true)), i)
        })
        .collect();
    order.sort_unstable();
    for (_, i) in order {
        if e.reached() {
            return;
        }
        e.archive(i, Reason::ArchivedToolExchange);
    }
}

/// The current turn's answered results but the newest, oldest first, to the target: when the
/// view is still over the room after passes 1 and 2.
fn archive_current(e: &mut Eviction, active: &[bool]) {
    let newest = e.work.live.iter().rposition(|l| is_tool_result(l.event));
    for (i, &current) in active.iter().enumerate() {
        if e.reached() {
            return;
        }
        let item = &e.work.live[i];
        if current
            && Some(i) != newest
            && is_tool_result(item.event)
            && !always_kept(item.event)
            && item.projection != Projection::Reference
        {
            e.archive(i, Reason::ArchivedToolExchange);
        }
    }
}

/// Pass 2: completed episodes, actions first, then explorations once nothing unarchived
/// depends on them (those nothing depends on first).
fn archive_episodes(e: &mut Eviction, episodes: &Episodes, active: &[bool]) {
    let completed: Vec<&Episode> = episodes.list().iter().filter(|e| !e.is_active()).collect();
    let depended: HashSet<&str> = episodes
        .list()
        .iter()
        .flat_map(|e| e.dependencies.iter().map(String::as_str))
        .collect();
    let mut order: Vec<&Episode> = completed
        .iter()
        .filter(|e| e.kind == EpisodeKind::Action)
        .copied()
        .collect();
    let mut explorations: Vec<&Episode> = completed
        .iter()
        .filter(|e| e.kind == EpisodeKind::Exploration)
        .copied()
        .collect();
    explorations.sort_by_key(|e| (depended.contains(e.name.as_str()), e.start_seq));
    order.extend(explorations);
    let mut archived: HashSet<&str> = HashSet::new();
    for episode in order {
        if e.reached() {
            return;
        }
        if episode.kind == EpisodeKind::Exploration {
            let waiting = episodes.list().iter().any(|a| {
                a.dependencies.iter().any(|d| d == &episode.name)
                    && !archived.contains(a.name.as_str())
            });
            if waiting {
                continue;
            }
        }
        let end = episode.end_seq.unwrap_or(i64::MAX);
        let live = &e.work.live;
        let items: Vec<usize> = (0..live.len())
            .filter(|&i| (episode.start_seq + 1..end).contains(&live[i].event.seq))
            .collect();
        // An episode in the current turn stays whole, and is not archived.
        if items.iter().any(|&i| active[i]) {
            continue;
        }
        for i in items {
            if archivable(e.work, active, i) && e.work.live[i].event.body.role() != Some(Role::User)
            {
                e.archive(i, Reason::EpisodeArchived);
            }
        }
        archived.insert(episode.name.as_str());
    }
}

/// Where pass 3 may fold up to: before the first active item, at a cut that keeps tool calls
/// with their results.
fn fold_end(work: &Working<'_>, active: &[bool], valid: &[bool]) -> usize {
    let mut end = active.iter().position(|&a| a).unwrap_or(work.live.len());
    while end > 0 && !valid[end] {
        end -= 1;
    }
    end
}
