//! The moves that reduce items in place: offloading to previews, showing a head and tail,
//! masking results to their references.

use std::collections::HashSet;
use std::ops::Range;

use uuid::Uuid;

use super::{always_kept, is_tool_result, offloaded_item, Live, Working};
use crate::domain::compaction::{OffloadedItem, Projection, Reason, ViewMessage};
use crate::domain::event::Role;
use crate::domain::observation;
use crate::engine::view;
use crate::tokens::{Tokenizer, MESSAGE_OVERHEAD};

/// About what the line naming an excerpt's middle and its reference takes.
const REFERENCE_CHARS: usize = 120;

impl<'a> Working<'a> {
    /// The indices of the items before `end`, shown in full, that offloading would show as
    /// previews: every message with images (the first thing to go when room is needed), and
    /// tool results longer than `threshold_chars`.
    pub(in crate::engine) fn offload_candidates(
        &mut self,
        end: usize,
        threshold_chars: i64,
    ) -> Vec<usize> {
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
    pub(in crate::engine) fn offload_ceiling(&self, candidates: &[usize]) -> i64 {
        candidates
            .iter()
            .map(|&i| (self.live[i].tokens - MESSAGE_OVERHEAD).max(0))
            .sum()
    }

    /// Shows `candidates` as previews where that is smaller. Returns what was offloaded and the
    /// tokens that freed.
    pub(in crate::engine) fn offload(
        &mut self,
        candidates: &[usize],
        id: Uuid,
    ) -> (Vec<OffloadedItem>, i64) {
        let mut offloaded = Vec::new();
        let mut freed = 0;
        for &i in candidates {
            let item = &self.live[i];
            let preview = view::preview_message(
                item.event,
                view::PREVIEW_CHARS,
                item.chars(),
                self.error_lines,
            );
            let reason = if view::has_images(item.event) {
                Reason::OffloadedImage
            } else {
                Reason::OffloadedLargeToolResult
            };
            if let Some((item, saved)) = self.show_as(i, preview, reason, id) {
                offloaded.push(item);
                freed += saved;
            }
        }
        (offloaded, freed)
    }

    /// Shows every answered tool result in `..end` by reference only (an overflow retry).
    pub(in crate::engine) fn mask_tool_results(
        &mut self,
        end: usize,
        id: Uuid,
    ) -> Vec<OffloadedItem> {
        self.mask_until(end, 0, i64::MIN, id).0
    }

    /// The ids of the view's `recall_observation` calls: their results are what the model
    /// asked to see again, so they stay in full while recent.
    pub(in crate::engine) fn recall_calls(&self) -> HashSet<&'a str> {
        self.live
            .iter()
            .flat_map(|l| l.pairing().2)
            .filter(|call| call.name == observation::RECALL_TOOL)
            .map(|call| call.id.as_str())
            .collect()
    }

    /// Whether item `i` is a tool result shown in full that compaction may reduce.
    pub(in crate::engine) fn reducible_result(&self, i: usize) -> bool {
        let item = &self.live[i];
        item.projection == Projection::Full
            && is_tool_result(item.event)
            && !always_kept(item.event)
    }

    /// Shows item `i` as its head and tail in about `max_chars` characters, when that is
    /// smaller. Returns what it offloaded and the tokens that freed.
    pub(in crate::engine) fn excerpt(
        &mut self,
        i: usize,
        max_chars: usize,
        id: Uuid,
    ) -> Option<(OffloadedItem, i64)> {
        let (tokenizer, errors) = (self.tokenizer, self.error_lines);
        let reason = Reason::OffloadedLargeToolResult;
        excerpt(&mut self.live[i], max_chars, reason, id, tokenizer, errors)
    }

    /// Shows the user request at `seq`, kept or live, as its head and tail in about
    /// `max_chars` characters when it is shown in full, longer, and that is smaller.
    pub(in crate::engine) fn excerpt_request(
        &mut self,
        seq: i64,
        max_chars: usize,
        id: Uuid,
    ) -> Option<(OffloadedItem, i64)> {
        let (tokenizer, errors) = (self.tokenizer, self.error_lines);
        let item = self
            .kept
            .iter_mut()
            .chain(self.live.iter_mut())
            .find(|l| l.event.seq == seq)
            .filter(|l| l.projection == Projection::Full && !always_kept(l.event))?;
        let reason = Reason::OffloadedLargeRequest;
        excerpt(item, max_chars, reason, id, tokenizer, errors)
    }

    /// Shows the system prompts shown in full, the longest first, as their head and tail until
    /// the system prompts cost at most `cap` tokens (each keeps at least
    /// [`view::PREVIEW_CHARS`] characters). Returns what it offloaded.
    pub(in crate::engine) fn excerpt_system_prompts(
        &mut self,
        cap: i64,
        id: Uuid,
    ) -> Vec<OffloadedItem> {
        let (tokenizer, errors) = (self.tokenizer, self.error_lines);
        let is_system = |l: &Live| l.event.body.role() == Some(Role::System);
        let mut total: i64 = self
            .in_order()
            .filter(|l| is_system(l))
            .map(|l| l.tokens)
            .sum();
        let mut offloaded = Vec::new();
        while total > cap {
            let longest = self
                .kept
                .iter_mut()
                .chain(self.live.iter_mut())
                .filter(|l| is_system(l) && l.projection == Projection::Full)
                .max_by_key(|l| (l.tokens, -l.event.seq));
            let Some(item) = longest else { break };
            let keep = item.tokens - (total - cap);
            let max_chars = excerpt_chars(item.chars(), item.tokens, keep);
            let reason = Reason::OffloadedLargeSystemPrompt;
            let Some((shown, saved)) = excerpt(item, max_chars, reason, id, tokenizer, errors)
            else {
                break;
            };
            offloaded.push(shown);
            total -= saved;
        }
        offloaded
    }

    /// Shows the user requests longer than `cap` tokens (a pasted document, a long brief),
    /// shown in full and not pinned, as their head and tail, the longest first, while `total`
    /// (what the view costs now) is over `room`. Each keeps what brings the view to `mark`, or
    /// `cap`'s worth where the room allows that, and at least [`view::PREVIEW_CHARS`]
    /// characters. Returns what it offloaded and the new total.
    pub(in crate::engine) fn excerpt_requests_until(
        &mut self,
        mut total: i64,
        (room, mark, cap): (i64, i64, i64),
        id: Uuid,
    ) -> (Vec<OffloadedItem>, i64) {
        let mut long: Vec<(i64, i64, i64)> = self
            .in_order()
            .filter(|l| {
                l.event.body.role() == Some(Role::User)
                    && l.projection == Projection::Full
                    && !always_kept(l.event)
                    && l.tokens > cap
            })
            .map(|l| (l.tokens, l.chars(), l.event.seq))
            .collect();
        long.sort_by_key(|&(tokens, _, seq)| (std::cmp::Reverse(tokens), seq));
        let mut offloaded = Vec::new();
        for (tokens, chars, seq) in long {
            if total <= room {
                break;
            }
            let to_mark = tokens - (total - mark);
            let to_fit = tokens - (total - room);
            let max_chars = excerpt_chars(chars, tokens, to_mark.max(to_fit.min(cap)));
            if let Some((shown, saved)) = self.excerpt_request(seq, max_chars, id) {
                offloaded.push(shown);
                total -= saved;
            }
        }
        (offloaded, total)
    }

    /// The ids of the calls whose results are in the view.
    fn answered_calls(&self) -> HashSet<&'a str> {
        self.live.iter().filter_map(|l| l.pairing().1).collect()
    }

    /// Shows the long arguments of assistant turn `i` by reference (its text kept) when every
    /// call it made is `answered` in the view and that is smaller. A turn that sends its
    /// reasoning is left whole: providers check it against its calls. Returns what it
    /// offloaded and the tokens that freed.
    fn offload_arguments(
        &mut self,
        i: usize,
        answered: &HashSet<&str>,
        id: Uuid,
    ) -> Option<(OffloadedItem, i64)> {
        let item = &self.live[i];
        let calls = item.event.body.tool_calls();
        if item.projection != Projection::Full
            || item.reasoning
            || always_kept(item.event)
            || calls.is_empty()
            || !calls.iter().all(|c| answered.contains(c.id.as_str()))
            || !view::has_long_arguments(item.event)
        {
            return None;
        }
        let message = view::archived_calls_message(item.event, item.chars(), self.error_lines);
        self.show_as(i, message, Reason::OffloadedLongArguments, id)
    }

    /// Shows the long arguments of the answered turns in `range` by reference, oldest first,
    /// until `total` (what they cost now, or the view) is at most `target`. Returns what it
    /// offloaded and the new total.
    pub(in crate::engine) fn offload_arguments_until(
        &mut self,
        range: Range<usize>,
        mut total: i64,
        target: i64,
        id: Uuid,
    ) -> (Vec<OffloadedItem>, i64) {
        let answered = self.answered_calls();
        let mut offloaded = Vec::new();
        for i in range {
            if total <= target {
                break;
            }
            if let Some((item, freed)) = self.offload_arguments(i, &answered, id) {
                offloaded.push(item);
                total -= freed;
            }
        }
        (offloaded, total)
    }

    /// Shows live item `i` as `message` (in its projection) for `reason` by compaction `id`,
    /// when that costs fewer tokens than the item does now. Returns what it offloaded and the
    /// tokens that freed.
    pub(in crate::engine) fn show_as(
        &mut self,
        i: usize,
        message: ViewMessage<'_>,
        reason: Reason,
        id: Uuid,
    ) -> Option<(OffloadedItem, i64)> {
        let tokenizer = self.tokenizer;
        show_as(&mut self.live[i], message, reason, id, tokenizer)
    }

    /// Shows tool results before `end` by reference, oldest first, until the view costs at
    /// most `target` (`total` is what it costs now). Returns what it masked and the new cost.
    pub(in crate::engine) fn mask_until(
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
            let mut reference = view::reference_message(item.event, item.chars(), self.error_lines);
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
}

/// The characters an excerpt of an item of `chars` characters and `tokens` tokens may show to
/// keep about `keep` tokens: at its own ratio of characters to tokens, less the line that
/// names the middle's reference, and at least [`view::PREVIEW_CHARS`].
fn excerpt_chars(chars: i64, tokens: i64, keep: i64) -> usize {
    let share = keep.max(0) as f64 / tokens.max(1) as f64;
    ((chars as f64 * share) as usize)
        .saturating_sub(REFERENCE_CHARS)
        .max(view::PREVIEW_CHARS)
}

/// Shows `item` as `message` (in its projection) for `reason` by compaction `id`, when that
/// costs fewer tokens than the item does now: what it offloaded and the tokens that freed.
fn show_as(
    item: &mut Live<'_>,
    message: ViewMessage<'_>,
    reason: Reason,
    id: Uuid,
    tokenizer: Tokenizer,
) -> Option<(OffloadedItem, i64)> {
    let tokens = message.cost(tokenizer);
    if tokens >= item.tokens {
        return None;
    }
    let freed = item.tokens - tokens;
    *item = item.reduced(message.projection, tokens, reason, id);
    Some((offloaded_item(item), freed))
}

/// Shows `item` as its head and tail in about `max_chars` characters, naming at most `errors`
/// error lines of what it leaves out, when it is longer and that is smaller.
fn excerpt(
    item: &mut Live<'_>,
    max_chars: usize,
    reason: Reason,
    id: Uuid,
    tokenizer: Tokenizer,
    errors: usize,
) -> Option<(OffloadedItem, i64)> {
    // Only a long text is cut: an image the item carries stays while it is recent.
    if item.chars() <= max_chars as i64 {
        return None;
    }
    let message = view::excerpt_message(item.event, max_chars, item.chars(), errors);
    let shown = show_as(item, message, reason, id, tokenizer)?;
    item.excerpt = max_chars as i64;
    Some(shown)
}
