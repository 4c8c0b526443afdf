//! The eviction's passes: completed tool exchanges by priority (pass 1), completed episodes
//! (pass 2), the current turn's older exchanges when the view still does not fit, and where pass
//! 3 may fold up to.

use std::collections::{HashMap, HashSet};

use super::super::working::{always_kept, is_tool_result, Working};
use super::spans::Span;
use crate::domain::compaction::{OffloadedItem, Projection, Reason};
use crate::domain::episodes::{Episode, Episodes};
use crate::domain::event::{EpisodeKind, Event, EventBody, Role};
use crate::domain::pairing::OpenCalls;
use crate::domain::session::SessionConfig;
use crate::engine::view;

/// Whether live item `i` can be archived: not active, not kept, and shown fuller than a
/// reference.
pub(super) fn archivable(work: &Working<'_>, active: &[bool], i: usize) -> bool {
    let item = &work.live[i];
    !active[i]
        && !always_kept(item.event)
        && matches!(item.projection, Projection::Full | Projection::Preview)
}

/// What an eviction would do: the view after passes 1 and 2 (and pass 3's collapse of pinned
/// items), what they archived, and the fold pass 3 would make (its cut and the view's tokens
/// after it), if any.
pub(super) struct EvictionPlan<'a> {
    pub(super) candidate: Working<'a>,
    pub(super) offloaded: Vec<OffloadedItem>,
    pub(super) cut: Option<usize>,
    pub(super) after_fold: i64,
}

impl EvictionPlan<'_> {
    /// The last seq the fold would take in.
    pub(super) fn fold_seq(&self) -> Option<i64> {
        let last = self.cut?.checked_sub(1)?;
        Some(self.candidate.live[last].event.seq)
    }
}

/// What the passes of one compaction share: the view they archive in, how far it is from the
/// target, and what they have archived.
pub(super) struct Eviction<'w, 'a> {
    pub(super) work: &'w mut Working<'a>,
    pub(super) active: &'w [bool],
    pub(super) tokens: i64,
    pub(super) target: i64,
    pub(super) id: uuid::Uuid,
    pub(super) offloaded: Vec<OffloadedItem>,
    /// The live item of the call each result answers (the assistant turn), and the result
    /// of each call by (its turn, its place there): paired by position, as a client may
    /// reuse a call id once answered.
    pub(super) call_of: HashMap<usize, usize>,
    pub(super) results: HashMap<(usize, usize), usize>,
}

impl<'w, 'a> Eviction<'w, 'a> {
    pub(super) fn new(
        work: &'w mut Working<'a>,
        active: &'w [bool],
        tokens: i64,
        target: i64,
        id: uuid::Uuid,
    ) -> Self {
        let mut call_of = HashMap::new();
        let mut results = HashMap::new();
        let mut open = OpenCalls::default();
        for (i, item) in work.live.iter().enumerate() {
            let event: &'a Event = item.event;
            if let Some(id) = event.body.tool_call_id() {
                if let Some((call, k)) = open.answer(id) {
                    call_of.insert(i, call);
                    results.insert((call, k), i);
                }
                continue;
            }
            for (k, call) in event.body.tool_calls().iter().enumerate() {
                open.issue(call.id.as_str(), (i, k));
            }
        }
        Self {
            work,
            active,
            tokens,
            target,
            id,
            offloaded: Vec::new(),
            call_of,
            results,
        }
    }

    pub(super) fn reached(&self) -> bool {
        self.tokens <= self.target
    }

    /// Archives live item `i` for `reason` when that is smaller; for a tool result, the whole
    /// exchange: the call's long arguments go too once every result of its turn is archived.
    pub(super) fn archive(&mut self, i: usize, reason: Reason) {
        self.tokens -= archive(self.work, i, reason, self.id, &mut self.offloaded);
        if let Some(&call) = self.call_of.get(&i) {
            if self.calls_done(call, false) {
                self.tokens -= archive(self.work, call, reason, self.id, &mut self.offloaded);
            }
        }
    }

    /// Whether the assistant turn at `i` may show its long arguments by reference: it is not
    /// active (unless `current`: the current turn's, when the view does not fit), is shown in
    /// full without reasoning, and each of its results is archived or too short for archiving
    /// to save anything.
    pub(super) fn calls_done(&self, i: usize, current: bool) -> bool {
        let live = &self.work.live;
        let item = &live[i];
        let calls = item.event.body.tool_calls();
        let settled = |k: usize| {
            self.results.get(&(i, k)).is_some_and(|&r| {
                let result = &live[r];
                match result.projection {
                    Projection::Reference => result.reason.archives(),
                    Projection::Full if current || !self.active[r] => {
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
            && (current || !self.active[i])
            && item.projection == Projection::Full
            && !item.reasoning
            && !always_kept(item.event)
            && view::has_long_arguments(item.event)
            && (0..calls.len()).all(settled)
    }

    /// The calls of exchanges archived earlier (by an earlier compaction, or a condensation)
    /// whose arguments are still shown in full.
    pub(super) fn archive_calls(&mut self) {
        let done: Vec<(usize, Reason)> = (0..self.work.live.len())
            .filter(|&i| self.calls_done(i, false))
            .map(|i| {
                let reason = self
                    .results
                    .get(&(i, 0))
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
pub(super) fn archive(
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
pub(super) fn archive_exchanges(
    e: &mut Eviction,
    config: &SessionConfig,
    spans: &[Span],
    active: &[bool],
) {
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

/// The current turn's answered exchanges but the newest, oldest first, to the target: when
/// the view is still over the room after passes 1 and 2. Results go by reference, and so do
/// their calls' long arguments (a file written is often the largest part of a turn) once
/// every result of the call's turn is settled, those of results an earlier pass archived
/// (past the tail's cap) too; the newest call stays whole.
pub(super) fn archive_current(e: &mut Eviction, active: &[bool]) {
    let live = &e.work.live;
    let newest = live.iter().rposition(|l| is_tool_result(l.event));
    let newest_call = live
        .iter()
        .rposition(|l| !l.event.body.tool_calls().is_empty());
    for (i, &current) in active.iter().enumerate() {
        if e.reached() {
            return;
        }
        let item = &e.work.live[i];
        if !current || Some(i) == newest || always_kept(item.event) {
            continue;
        }
        let call = if is_tool_result(item.event) {
            if item.projection != Projection::Reference {
                e.archive(i, Reason::ArchivedToolExchange);
            }
            e.call_of.get(&i).copied()
        } else {
            Some(i)
        };
        if let Some(call) = call.filter(|&c| Some(c) != newest_call && e.calls_done(c, true)) {
            let reason = Reason::ArchivedToolExchange;
            e.tokens -= archive(e.work, call, reason, e.id, &mut e.offloaded);
        }
    }
}

/// Pass 2: completed episodes, actions first, then explorations once nothing unarchived
/// depends on them (those nothing depends on first).
pub(super) fn archive_episodes(e: &mut Eviction, episodes: &Episodes, active: &[bool]) {
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
pub(super) fn fold_end(work: &Working<'_>, active: &[bool], valid: &[bool]) -> usize {
    let mut end = active.iter().position(|&a| a).unwrap_or(work.live.len());
    while end > 0 && !valid[end] {
        end -= 1;
    }
    end
}
