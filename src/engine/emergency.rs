//! The emergency tier: no model, no waiting. Keeps system prompts, pinned items, the summary
//! and as much of the newest tail as fits; reduces, then shortens, whatever must be to fit.

use uuid::Uuid;

use super::view;
use super::working::{always_kept, cut_summary, offloaded_item, Live, Working};
use crate::domain::compaction::{
    FallbackReason, OffloadedItem, Projection, Reason, SummarizerInfo,
};
use crate::domain::state::FoldedRange;
use crate::summarize::{deterministic, SummaryRequest};
use crate::tokens::Tokenizer;

/// Keeps system, pinned items, the summary and as much of the newest tail as fits in `room`;
/// folds the rest into the summary deterministically (no LLM). If even the newest message does
/// not fit whole, shows it as a preview, then as a reference. Returns the evicted seqs.
pub(super) fn emergency(
    work: &mut Working<'_>,
    room: i64,
    id: Uuid,
    folded: &mut Vec<FoldedRange>,
    offloaded: &mut Vec<OffloadedItem>,
) -> (Vec<i64>, SummarizerInfo) {
    let mut evicted = Vec::new();
    let mut info = SummarizerInfo::deterministic(FallbackReason::NoneConfigured);
    let valid = work.valid_cuts();
    // Cheapest first: the fewest items folded that make the rest fit (linear in the view).
    let fixed: i64 = work.tokens() - work.live.iter().map(|l| l.tokens).sum::<i64>();
    let summary_reserve = (work.summary_max_chars as i64 / 3).min(room / 4);
    let mut suffix = work.live.iter().map(|l| l.tokens).sum::<i64>();
    let mut cut = 0;
    while cut < work.live.len() && (fixed + summary_reserve + suffix > room || !valid[cut]) {
        if !always_kept(work.live[cut].event) {
            suffix -= work.live[cut].tokens;
        }
        cut += 1;
    }
    // Keep at least the newest unit, reduced if it must be.
    if cut == work.live.len() && cut > 0 {
        cut -= 1;
        while cut > 0 && !valid[cut] {
            cut -= 1;
        }
    }
    if work.folds_anything(cut) {
        let events = work.foldable_events(cut);
        let output = deterministic::summarize(SummaryRequest {
            previous: &work.summary,
            events: &events,
            max_chars: work.summary_max_chars,
        });
        info = output.info;
        evicted.extend(events.iter().map(|e| e.seq));
        folded.extend(work.fold(cut, output.summary, id, Reason::EmergencyTruncation));
    }
    // Still too large: reduce what is left, oldest first, then shorten the summary. The total
    // is kept up to date item by item, so this stays linear in the view.
    let (tokenizer, errors) = (work.tokenizer, work.error_lines);
    for projection in [Projection::Preview, Projection::Reference] {
        let mut total = work.tokens();
        for item in work.live.iter_mut() {
            if total <= room {
                break;
            }
            if item.projection == Projection::Reference || always_kept(item.event) {
                continue;
            }
            total -= reduce_for_emergency(item, projection, (tokenizer, errors), id, offloaded);
        }
        // Reduced items are listed in the summary message: count it again.
        work.refresh_summary_message();
        if work.tokens() <= room {
            return (evicted, info);
        }
    }
    shrink_summary(work, room);
    // The agent's condensation goes before anything pinned is reduced: the window cannot hold
    // it with what the user pinned.
    if work.tokens() > room && work.memory.is_some() {
        work.memory = None;
        work.memory_message = None;
    }
    // Last resort: even the pinned items and system prompts (and whatever else a fold kept,
    // such as the episodic policy's first user request) do not fit in full.
    for projection in [Projection::Preview, Projection::Reference] {
        let live = work.live.iter_mut().filter(|l| always_kept(l.event));
        for item in work.kept.iter_mut().chain(live) {
            reduce_for_emergency(item, projection, (tokenizer, errors), id, offloaded);
        }
        work.refresh_summary_message();
        shrink_summary(work, room);
        if work.tokens() <= room {
            break;
        }
    }
    (evicted, info)
}

/// Shows `item` as `projection` when that is smaller, and lists it as offloaded by compaction
/// `id` the first time `id` reduces it. Returns the tokens saved.
fn reduce_for_emergency(
    item: &mut Live<'_>,
    projection: Projection,
    (tokenizer, errors): (Tokenizer, usize),
    id: Uuid,
    offloaded: &mut Vec<OffloadedItem>,
) -> i64 {
    // The same preview as `Live::message` shows, so that its cost is the one counted.
    let mut message = match projection {
        Projection::Preview => {
            view::preview_message(item.event, view::PREVIEW_CHARS, item.chars(), errors)
        }
        _ => view::reference_message(item.event, item.chars(), errors),
    };
    message.tokens = message.cost(tokenizer);
    if message.tokens >= item.tokens {
        return 0;
    }
    if item.by != Some(id) {
        offloaded.push(offloaded_item(item));
    }
    let saved = item.tokens - message.tokens;
    *item = item.reduced(projection, message.tokens, Reason::EmergencyTruncation, id);
    saved
}

/// Shortens the summary message until the view fits, as a last resort: each time to the first
/// half of what it showed, remembered as a character cap so that the state reproduces it.
fn shrink_summary(work: &mut Working<'_>, room: i64) {
    while work.tokens() > room {
        let Some(message) = work.summary_message.take() else {
            return;
        };
        let cap = message.content.chars().count() / 2;
        work.summary_cap = Some(cap);
        work.summary_message = cut_summary(message, Some(cap)).map(|mut m| {
            m.tokens = m.cost(work.tokenizer);
            m
        });
    }
}
