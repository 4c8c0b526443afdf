//! What no pass of an eviction touches: the current turn, the episodes' spans, and the
//! requests a fold keeps verbatim that may be shown as their head and tail.

use super::super::working::{is_tool_result, is_user_request, Working};
use crate::domain::event::{EventBody, Role};
use crate::engine::view;

/// The newest tool exchanges an autonomous loop's current turn holds: a long loop after one
/// user message is not all current.
pub(super) const CURRENT_EXCHANGES: usize = 4;

/// `active[i]`: live item `i` is active (in the current turn, or inside the active episode),
/// and no pass touches it. The current turn starts at the last user message, or at the fourth
/// newest tool call when that is later. Active results older than the newest count only as far
/// as they fit `cap` tokens together (newest first), so that a turn or a long episode of large
/// results does not keep the view at the trigger.
pub(super) fn active_items(work: &Working<'_>, spans: &[Span], cap: i64) -> Vec<bool> {
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
pub(super) fn newest_exchanges(work: &Working<'_>) -> usize {
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
pub(super) enum Span {
    Outside,
    /// Inside an episode that has ended.
    Completed,
    Active,
}

/// For each live item, whether it is inside an episode (between its start and its end) and
/// whether that episode is still active.
pub(super) fn episode_spans(work: &Working<'_>) -> Vec<Span> {
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
/// `cap` tokens, the longest first: not the current one (the last request), nor one
/// `active` (inside the active episode), nor one with images.
pub(super) fn long_requests(work: &Working<'_>, active: &[bool], cap: i64) -> Vec<i64> {
    let live = work.live.iter().zip(active).filter(|(_, &a)| !a);
    let requests = || {
        work.kept
            .iter()
            .chain(work.live.iter())
            .filter(|l| is_user_request(l.event))
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
