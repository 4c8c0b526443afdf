//! Overflow retries: the provider refused the last view for its length, so ctxd's count fell
//! short of the provider's. Retry 1 shows every answered tool result by reference with a safety
//! margin; retry 2 does the same and keeps only system prompts, pinned items, the summary and
//! the last user turn. Both first cap every tool result as an ordinary compaction would.

use super::run::Run;
use super::view;
use super::working::{always_kept, offloaded_item};
use crate::domain::compaction::{Projection, Reason};
use crate::domain::event::Role;
use crate::summarize::{deterministic, SummaryRequest};

impl Run<'_> {
    /// Retry 1: every answered tool result by reference, and a safety margin.
    pub(super) fn mask_completed_exchanges(&mut self) {
        self.bounds.room = self.bounds.room * 9 / 10;
        let work = &mut self.work;
        let valid = work.valid_cuts();
        let tail = work.tail_start(1, &valid);
        let masked = work.mask_tool_results(tail, self.input.compaction_id);
        self.offloaded.extend(masked);
        work.refresh_summary_message();
        self.acted = true;
    }

    /// Retry 2: system prompts, pinned items, the summary and the last user turn only; the rest
    /// is folded deterministically (no model: the provider is already waiting).
    pub(super) fn keep_last_user_turn(&mut self) {
        let work = &mut self.work;
        let last_user = work
            .live
            .iter()
            .rposition(|l| l.event.body.role() == Some(Role::User))
            .unwrap_or(work.live.len());
        let valid = work.valid_cuts();
        let mut cut = last_user;
        while !valid[cut] {
            cut -= 1;
        }
        if !work.folds_anything(cut) {
            return;
        }
        let events = work.foldable_events(cut);
        let output = deterministic::summarize(SummaryRequest {
            previous: &work.summary,
            events: &events,
            max_chars: work.summary_max_chars,
        });
        self.summarizer = Some(output.info);
        self.evicted_seqs.extend(events.iter().map(|e| e.seq));
        let id = self.input.compaction_id;
        self.folded
            .extend(work.fold(cut, output.summary, id, Reason::EmergencyTruncation));
        self.acted = true;
    }

    /// The episodic policy's overflow retries: the current user turn (the last user message)
    /// as a bounded preview with its reference on retry 1, as its reference alone on retry 2,
    /// when that is smaller. It stays recallable whole.
    pub(super) fn reduce_user_turn(&mut self, retry: u8) {
        let id = self.input.compaction_id;
        let work = &mut self.work;
        let Some(i) = work
            .live
            .iter()
            .rposition(|l| l.event.body.role() == Some(Role::User))
        else {
            return;
        };
        let item = &work.live[i];
        if always_kept(item.event) || item.projection == Projection::Reference {
            return;
        }
        let (projection, mut message) = if retry > 1 {
            let message = view::reference_message(item.event, item.chars(), work.error_lines);
            (Projection::Reference, message)
        } else {
            let message = view::preview_message(
                item.event,
                view::PREVIEW_CHARS,
                item.chars(),
                work.error_lines,
            );
            (Projection::Preview, message)
        };
        message.tokens = message.cost(work.tokenizer);
        if message.tokens >= item.tokens {
            return;
        }
        let reduced = item.reduced(projection, message.tokens, Reason::OverflowRetry, id);
        self.offloaded.push(offloaded_item(&reduced));
        work.live[i] = reduced;
        work.refresh_summary_message();
        self.acted = true;
    }
}
