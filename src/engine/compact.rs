//! The progressive policy: a tier decided on the view that would be sent, then the least
//! rewriting that brings the view back within bounds.

use std::time::Instant;

use chrono::{DateTime, Utc};
use foldhash::{HashMap, HashMapExt};
use uuid::Uuid;

use super::view::{self, ReducedRef};
use crate::domain::compaction::{
    CompactionRecord, Mode, OffloadedItem, Projection, Reason, Repairs, SummarizerInfo, Summary,
    Tier, Trigger, ViewMessage,
};
use crate::domain::event::ToolCall;
use crate::domain::event::{Event, EventBody, Role};
use crate::domain::session::{Policy, SessionConfig, Thresholds};
use crate::domain::state::{CompactionState, FoldedRange, LastView, Reduced};
use crate::summarize::{self, Summarizer, SummaryRequest};
use crate::tokens::{Tokenizer, MESSAGE_OVERHEAD};

/// Everything a compaction looks at.
pub struct EngineInput<'a> {
    pub session_id: Uuid,
    pub config: &'a SessionConfig,
    pub state: &'a CompactionState,
    /// The events the current view is made of, in seq order: those in `state.kept` and every
    /// event after `state.checkpoint_seq`.
    pub events: &'a [Event],
    pub head_seq: i64,
    /// Tokens of the tool schemas sent with the request.
    pub tools_tokens: i64,
    pub mode: Mode,
    /// 0, or 1 / 2 after a provider rejected the previous view for its length.
    pub overflow_retry: u8,
    pub now: DateTime<Utc>,
}

/// What a compaction decided.
#[derive(Debug)]
pub struct EngineOutput<'a> {
    /// The view, valid for every provider (tool pairs repaired), borrowing from the events.
    pub messages: Vec<ViewMessage<'a>>,
    pub state: CompactionState,
    pub record: CompactionRecord,
    /// Runs of seqs newly folded into the summary.
    pub folded: Vec<FoldedRange>,
    /// Whether anything must be persisted (the view's middle changed, or something failed).
    pub changed: bool,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum EngineError {
    #[error(
        "the tool schemas ({tools_tokens} tokens) and the reserved output ({reserved} tokens) \
         leave no room for messages in a {window}-token window"
    )]
    NoRoom {
        tools_tokens: i64,
        reserved: i64,
        window: i64,
    },
}

/// The tier a utilization calls for; boundaries are inclusive.
pub fn tier_for(utilization: f64, t: &Thresholds) -> Tier {
    if utilization >= t.emergency {
        Tier::Emergency
    } else if utilization >= t.full {
        Tier::Full
    } else if utilization >= t.soft {
        Tier::Soft
    } else if utilization >= t.warn {
        Tier::Warn
    } else {
        Tier::None
    }
}

/// An item of the view and how it is shown.
#[derive(Debug, Clone)]
struct Live<'a> {
    event: &'a Event,
    projection: Projection,
    /// Tokens in the view.
    tokens: i64,
    reason: Reason,
    by: Option<Uuid>,
    /// The event's content characters, when known without counting them.
    chars: Option<i64>,
}

impl<'a> Live<'a> {
    fn message(&self) -> ViewMessage<'a> {
        let mut message = match self.projection {
            Projection::Preview => {
                view::preview_message(self.event, view::PREVIEW_CHARS, self.chars())
            }
            Projection::Reference => view::reference_message(self.event, self.chars()),
            _ => view::full_message(self.event),
        };
        message.tokens = self.tokens;
        message
    }

    fn chars(&self) -> i64 {
        self.chars
            .unwrap_or_else(|| view::content_chars(self.event))
    }

    /// The item shown as `projection` with `tokens`, reduced by compaction `by`.
    fn reduced(&self, projection: Projection, tokens: i64, reason: Reason, by: Uuid) -> Self {
        Live {
            event: self.event,
            projection,
            tokens,
            reason,
            by: Some(by),
            chars: Some(self.chars()),
        }
    }

    /// What tool-pair repair looks at: the message's role, the call it answers and the calls it
    /// issues (the same whatever the projection).
    fn pairing(&self) -> Pairing<'a> {
        match &self.event.body {
            EventBody::Message(m) => (m.role, m.tool_call_id.as_deref(), &m.tool_calls),
            _ => (Role::User, None, &[]),
        }
    }
}

/// The view under construction.
#[derive(Debug, Clone)]
struct Working<'a> {
    tokenizer: Tokenizer,
    summary_max_chars: usize,
    checkpoint: i64,
    /// At or before the checkpoint: system prompts and pinned events, in full unless an
    /// emergency found no other way to fit the window.
    kept: Vec<Live<'a>>,
    live: Vec<Live<'a>>,
    summary: Summary,
    summary_message: Option<ViewMessage<'static>>,
    /// How many characters of the summary message an emergency left (see `shrink_summary`).
    summary_cap: Option<usize>,
}

/// System prompts and pinned events are never folded or reduced.
fn always_kept(event: &Event) -> bool {
    event.pinned || matches!(&event.body, EventBody::Message(m) if m.role == Role::System)
}

fn is_tool_result(event: &Event) -> bool {
    event.body.tool_call_id().is_some()
}

impl<'a> Working<'a> {
    fn from_state(input: &EngineInput<'a>) -> Self {
        let state = input.state;
        let mut kept = Vec::new();
        let mut live = Vec::new();
        for event in input.events {
            let item = match state.reduced.get(&event.seq) {
                Some(r) => Live {
                    event,
                    projection: r.projection,
                    tokens: r.tokens_in_view,
                    reason: r.reason,
                    by: Some(r.compaction_id),
                    chars: (r.chars > 0).then_some(r.chars),
                },
                None => Live {
                    event,
                    projection: Projection::Full,
                    tokens: event.tokens,
                    reason: Reason::WithinBudget,
                    by: None,
                    chars: None,
                },
            };
            if event.seq <= state.checkpoint_seq {
                kept.push(item);
            } else {
                live.push(item);
            }
        }
        let mut working = Self {
            tokenizer: input.config.tokenizer,
            summary_max_chars: input.config.summary_max_chars(),
            checkpoint: state.checkpoint_seq,
            kept,
            live,
            summary: state.summary.clone(),
            summary_message: None,
            summary_cap: state.summary_cap,
        };
        // The stored cost spares recounting the summary on calls that change nothing.
        working.summary_message = working
            .build_summary_message(false)
            .and_then(|m| cut_summary(m, state.summary_cap));
        if let Some(m) = working.summary_message.as_mut() {
            m.tokens = state.summary_tokens;
        }
        working
    }

    fn build_summary_message(&self, count: bool) -> Option<ViewMessage<'static>> {
        let refs: Vec<ReducedRef> = self
            .kept
            .iter()
            .chain(&self.live)
            .filter(|l| matches!(l.projection, Projection::Preview | Projection::Reference))
            .map(|l| ReducedRef {
                seq: l.event.seq,
                chars: l.chars(),
                tool_call_id: l.event.body.tool_call_id(),
                tool_name: match &l.event.body {
                    EventBody::Message(m) => m.name.as_deref(),
                    _ => None,
                },
            })
            .collect();
        let tokenizer = if count {
            self.tokenizer
        } else {
            Tokenizer::Chars4
        };
        view::summary_message(&self.summary, &refs, self.summary_max_chars, tokenizer)
    }

    fn refresh_summary_message(&mut self) {
        self.summary_message = self.build_summary_message(true);
        self.summary_cap = None;
    }

    /// The view's items in the order they are shown (the summary message aside): kept system
    /// prompts, the other kept items, then the items after the checkpoint.
    fn in_order(&self) -> impl Iterator<Item = &Live<'a>> {
        let is_system = |l: &&Live| l.event.body.role() == Some(Role::System);
        let system = self.kept.iter().filter(is_system);
        let other = self.kept.iter().filter(move |l| !is_system(l));
        system.chain(other).chain(&self.live)
    }

    /// The view's messages with tool pairs repaired, and their total tokens.
    fn render(&self) -> (Vec<ViewMessage<'a>>, Repairs, i64) {
        let mut messages = Vec::with_capacity(self.kept.len() + self.live.len() + 1);
        messages.extend(self.in_order().map(Live::message));
        // The summary goes right after the leading system prompts.
        if let Some(summary) = &self.summary_message {
            let at = messages
                .iter()
                .take_while(|m| m.role == Role::System)
                .count();
            messages.insert(at, summary.clone());
        }
        let (messages, repairs) = repair(messages, self.tokenizer);
        let tokens = messages.iter().map(|m| m.tokens).sum();
        debug_assert_eq!(tokens, self.tokens(), "the view costs what `tokens` counts");
        (messages, repairs, tokens)
    }

    /// The tokens of the view [`Working::render`] would build, without building it: the items'
    /// costs, the summary's, less the results repair drops, plus the placeholders it adds.
    fn tokens(&self) -> i64 {
        let items: Vec<&Live> = self.in_order().collect();
        let plan = plan_repair(items.iter().map(|l| l.pairing()));
        let shown: i64 = items
            .iter()
            .zip(&plan.keep)
            .filter(|(_, keep)| **keep)
            .map(|(l, _)| l.tokens)
            .sum();
        let placeholders: i64 = plan
            .unanswered
            .iter()
            .flat_map(|(at, calls)| calls.iter().map(|k| &items[*at].pairing().2[*k]))
            .map(|call| view::placeholder_result(call, None, self.tokenizer).tokens)
            .sum();
        let summary = self.summary_message.as_ref().map_or(0, |m| m.tokens);
        shown + placeholders + summary
    }

    /// Where the live items may be cut so that no tool call is separated from its results:
    /// `valid[c]` is true when no result at or after `c` answers a call before `c`.
    fn valid_cuts(&self) -> Vec<bool> {
        let n = self.live.len();
        let mut call_index: HashMap<&str, usize> = HashMap::with_capacity(n / 2);
        // For each result, the index of the call it answers (the latest earlier call of its id).
        let mut answers: Vec<Option<usize>> = vec![None; n];
        for (i, item) in self.live.iter().enumerate() {
            if let Some(id) = item.event.body.tool_call_id() {
                answers[i] = call_index.remove(id);
            }
            for call in item.event.body.tool_calls() {
                call_index.insert(call.id.as_str(), i);
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
    fn tail_start(&self, min_tail: usize, valid: &[bool]) -> usize {
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

    /// The indices of the tool results before `end`, shown in full, longer than
    /// `threshold_chars`: what offloading would show as previews.
    fn offload_candidates(&mut self, end: usize, threshold_chars: i64) -> Vec<usize> {
        let mut candidates = Vec::new();
        for (i, item) in self.live[..end].iter_mut().enumerate() {
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
    fn offload_ceiling(&self, candidates: &[usize]) -> i64 {
        candidates
            .iter()
            .map(|&i| (self.live[i].tokens - MESSAGE_OVERHEAD).max(0))
            .sum()
    }

    /// Shows `candidates` as previews where that is smaller. Returns what was offloaded and the
    /// tokens that freed.
    fn offload(&mut self, candidates: &[usize], id: Uuid) -> (Vec<OffloadedItem>, i64) {
        let mut offloaded = Vec::new();
        let mut freed = 0;
        for &i in candidates {
            let item = &self.live[i];
            let mut preview = view::preview_message(item.event, view::PREVIEW_CHARS, item.chars());
            preview.tokens = view::cost(&preview, self.tokenizer);
            if preview.tokens >= item.tokens {
                continue;
            }
            freed += item.tokens - preview.tokens;
            let reason = Reason::OffloadedLargeToolResult;
            let reduced = item.reduced(Projection::Preview, preview.tokens, reason, id);
            offloaded.push(offloaded_item(&reduced));
            self.live[i] = reduced;
        }
        (offloaded, freed)
    }

    /// Shows every answered tool result in `..end` by reference only (an overflow retry).
    fn mask_tool_results(&mut self, end: usize, id: Uuid) -> Vec<OffloadedItem> {
        let mut masked = Vec::new();
        for item in &mut self.live[..end] {
            if !is_tool_result(item.event)
                || always_kept(item.event)
                || item.projection == Projection::Reference
            {
                continue;
            }
            let mut reference = view::reference_message(item.event, item.chars());
            reference.tokens = view::cost(&reference, self.tokenizer);
            let reason = Reason::MaskedCompletedToolExchange;
            *item = item.reduced(Projection::Reference, reference.tokens, reason, id);
            masked.push(offloaded_item(item));
        }
        masked
    }

    /// Tokens the items before `cut` cost in the view, except those that would stay.
    fn foldable_tokens(&self, cut: usize) -> i64 {
        self.live[..cut]
            .iter()
            .filter(|l| !always_kept(l.event))
            .map(|l| l.tokens)
            .sum()
    }

    /// The events that folding at `cut` would summarise.
    fn foldable_events(&self, cut: usize) -> Vec<Event> {
        self.live[..cut]
            .iter()
            .filter(|l| !always_kept(l.event))
            .map(|l| l.event.clone())
            .collect()
    }

    /// Folds the items before `cut` into `summary`: system and pinned ones stay in full.
    fn fold(
        &mut self,
        cut: usize,
        summary: Summary,
        id: Uuid,
        reason: Reason,
    ) -> Option<FoldedRange> {
        if cut == 0 {
            return None;
        }
        let from_seq = self.live[0].event.seq;
        let to_seq = self.live[cut - 1].event.seq;
        for item in self.live.drain(..cut) {
            if always_kept(item.event) {
                self.kept.push(item);
            }
        }
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

fn offloaded_item(item: &Live<'_>) -> OffloadedItem {
    let event = item.event;
    OffloadedItem {
        seq: event.seq,
        tool_call_id: event.body.tool_call_id().map(str::to_owned),
        chars: item.chars(),
        tokens: event.tokens,
        uri: view::observation_uri(event.seq),
    }
}

/// A message's role, the call it answers and the calls it issues.
type Pairing<'m> = (Role, Option<&'m str>, &'m [ToolCall]);

/// What repairing a sequence of messages changes.
struct RepairPlan {
    /// Whether each message stays (results that answer no earlier call do not).
    keep: Vec<bool>,
    /// By message index, the positions of its calls left without a result, in call order.
    unanswered: Vec<(usize, Vec<usize>)>,
}

impl RepairPlan {
    fn repairs(&self) -> Repairs {
        Repairs {
            orphan_results_dropped: self.keep.iter().filter(|k| !**k).count() as i64,
            placeholder_results_inserted: self.unanswered.iter().map(|(_, c)| c.len() as i64).sum(),
        }
    }
}

/// Finds the results without a call before them and the calls without a result after them.
fn plan_repair<'m>(messages: impl Iterator<Item = Pairing<'m>>) -> RepairPlan {
    let mut open: HashMap<&str, usize> = HashMap::new();
    let mut keep = Vec::new();
    let mut calls_of = Vec::new();
    for (i, (role, answers, calls)) in messages.enumerate() {
        keep.push(match answers {
            Some(id) if role == Role::Tool => open.remove(id).is_some(),
            _ => true,
        });
        for call in calls {
            open.insert(call.id.as_str(), i);
        }
        calls_of.push(calls);
    }
    let mut unanswered: Vec<(usize, Vec<usize>)> = Vec::new();
    if !open.is_empty() {
        let mut at: Vec<usize> = open.values().copied().collect();
        at.sort_unstable();
        at.dedup();
        for i in at {
            let positions = calls_of[i]
                .iter()
                .enumerate()
                .filter(|(_, c)| open.get(c.id.as_str()) == Some(&i))
                .map(|(k, _)| k)
                .collect();
            unanswered.push((i, positions));
        }
    }
    RepairPlan { keep, unanswered }
}

/// Makes the messages a valid provider request: a result without a call before it is dropped,
/// a call without a result gets a placeholder right after its message.
pub fn repair<'a>(
    messages: Vec<ViewMessage<'a>>,
    tokenizer: Tokenizer,
) -> (Vec<ViewMessage<'a>>, Repairs) {
    let plan = plan_repair(
        messages
            .iter()
            .map(|m| (m.role, m.tool_call_id.as_deref(), &*m.tool_calls)),
    );
    let repairs = plan.repairs();
    if repairs == Repairs::default() {
        return (messages, repairs);
    }
    // Placeholders go right after the calling message, in call order.
    let mut unanswered: HashMap<usize, Vec<usize>> = plan.unanswered.into_iter().collect();
    let mut out = Vec::with_capacity(messages.len() + unanswered.len());
    for (i, (m, keep)) in messages.into_iter().zip(plan.keep).enumerate() {
        if !keep {
            continue;
        }
        let placeholders: Vec<ViewMessage<'static>> = unanswered
            .remove(&i)
            .unwrap_or_default()
            .into_iter()
            .map(|k| view::placeholder_result(&m.tool_calls[k], None, tokenizer).into_owned())
            .collect();
        out.push(m);
        out.extend(placeholders);
    }
    (out, repairs)
}

/// How many leading messages two views share.
fn common_prefix(a: &[ViewMessage], b: &[ViewMessage]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// Runs one compaction.
pub async fn compact<'a>(
    input: EngineInput<'a>,
    summarizer: Option<&dyn Summarizer>,
) -> Result<EngineOutput<'a>, EngineError> {
    let started = Instant::now();
    let config = input.config;
    let window = i64::from(config.context_window);
    let reserved = i64::from(config.max_output_tokens);
    let fixed = input.tools_tokens + reserved;
    if fixed >= window {
        return Err(EngineError::NoRoom {
            tools_tokens: input.tools_tokens,
            reserved,
            window,
        });
    }
    let calibration = input.state.calibration_factor();
    let used =
        |message_tokens: i64| config.tokens_used(message_tokens, calibration, input.tools_tokens);
    // The most message tokens (as we count them) that fit the window.
    let mut room = ((window - fixed) as f64 / calibration).floor() as i64;

    let before = Working::from_state(&input);
    let (before_messages, before_repairs, before_tokens) = before.render();
    let utilization = config.utilization(before_tokens, calibration, input.tools_tokens);
    let mut tier = tier_for(utilization, &config.thresholds);
    let trigger = match (input.overflow_retry, input.mode) {
        (1.., _) => Trigger::OverflowRetry,
        (_, Mode::Force) => Trigger::Manual,
        _ => Trigger::Auto,
    };
    if input.mode == Mode::Force {
        tier = tier.max(Tier::Full);
    }
    // A retried compaction with no new events changes nothing while the view fits.
    let settled = input.mode == Mode::Auto
        && input.overflow_retry == 0
        && input.state.last_compaction_id.is_some()
        && input.head_seq == input.state.last_view.head_seq
        && before_tokens <= room;

    let id = Uuid::now_v7();
    let mut work = before;
    let mut acted = false;
    let mut offloaded = Vec::new();
    let mut folded = Vec::new();
    let mut summarized_seqs = Vec::new();
    let mut evicted_seqs = Vec::new();
    let mut preserved_tail = Vec::new();
    let mut summarizer_info: Option<SummarizerInfo> = None;
    let mut error = None;
    let min_tail = config.min_tail_messages as usize;

    match input.overflow_retry {
        0 => {
            let must = input.mode == Mode::Force || before_tokens > room;
            if !settled && matches!(tier, Tier::Warn | Tier::Soft | Tier::Full) {
                let mut candidate = work.clone();
                let valid = candidate.valid_cuts();
                let tail = candidate.tail_start(min_tail, &valid);
                let threshold = i64::from(config.offload_threshold_chars);
                let offloadable = candidate.offload_candidates(tail, threshold);
                // In the warn tier (nothing folded), most calls free too little to act: tell
                // that from the candidates' costs before cutting and counting any preview.
                let hopeless = tier == Tier::Warn
                    && !must
                    && candidate.offload_ceiling(&offloadable) < config.min_gain_tokens();
                let (cand_offloaded, offload_gain) = if hopeless {
                    (Vec::new(), 0)
                } else {
                    candidate.offload(&offloadable, id)
                };
                let cut = match tier {
                    Tier::Soft => half_cut(&candidate, tail, &valid),
                    Tier::Full => tail,
                    _ => 0,
                };
                // Decide before calling any summariser whether the gain is worth it: folding
                // frees the folded tokens, less what the summary may grow by.
                // A summary is far smaller than what it covers; assume a quarter at worst,
                // within the summary's bound.
                let summary_now = candidate.summary_message.as_ref().map_or(0, |m| m.tokens);
                let summary_room = (work.summary_max_chars as i64 / 3 - summary_now).max(0);
                let folding = candidate.foldable_tokens(cut);
                let fold_gain = folding - (folding / 4).min(summary_room);
                let worthwhile =
                    must || offload_gain + fold_gain.max(0) >= config.min_gain_tokens();
                if worthwhile && (cut > 0 || !cand_offloaded.is_empty()) {
                    if cut > 0 {
                        let events = candidate.foldable_events(cut);
                        let request = SummaryRequest {
                            previous: &candidate.summary,
                            events: &events,
                            max_chars: candidate.summary_max_chars,
                        };
                        let (output, failure) =
                            summarize::summarize_or_fall_back(summarizer, request).await;
                        error = failure;
                        summarizer_info = Some(output.info);
                        summarized_seqs.extend(events.iter().map(|e| e.seq));
                        folded.extend(candidate.fold(cut, output.summary, id, Reason::Summarized));
                    } else {
                        candidate.refresh_summary_message();
                    }
                    preserved_tail = candidate
                        .live
                        .iter()
                        .filter(|l| l.projection == Projection::Full)
                        .map(|l| l.event.seq)
                        .collect();
                    offloaded = cand_offloaded
                        .into_iter()
                        .filter(|o| o.seq > candidate.checkpoint)
                        .collect();
                    work = candidate;
                    acted = true;
                }
            }
        }
        1 => {
            // Every answered tool result by reference, and a safety margin.
            room = room * 9 / 10;
            let valid = work.valid_cuts();
            let tail = work.tail_start(1, &valid);
            offloaded = work.mask_tool_results(tail, id);
            work.refresh_summary_message();
            acted = true;
        }
        _ => {
            // System, pinned items, the summary and the last user turn only.
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
            let events = work.foldable_events(cut);
            let output = summarize::deterministic::summarize(SummaryRequest {
                previous: &work.summary,
                events: &events,
                max_chars: work.summary_max_chars,
            });
            summarizer_info = Some(output.info);
            evicted_seqs.extend(events.iter().map(|e| e.seq));
            folded.extend(work.fold(cut, output.summary, id, Reason::EmergencyTruncation));
            acted = true;
        }
    }

    // Until something acts, the view is the one rendered above: no need to render it again.
    let current_tokens = if acted { work.tokens() } else { before_tokens };
    if (tier == Tier::Emergency && !settled) || current_tokens > room {
        tier = Tier::Emergency;
        let (evicted, info) = emergency(&mut work, room, id, &mut folded, &mut offloaded);
        if !evicted.is_empty() {
            summarizer_info = Some(info);
        }
        evicted_seqs.extend(evicted);
        preserved_tail = work
            .live
            .iter()
            .filter(|l| l.projection == Projection::Full)
            .map(|l| l.event.seq)
            .collect();
        acted = true;
    }

    // Items folded after being offloaded are summarised, not offloaded.
    offloaded.retain(|o| o.seq > work.checkpoint || work.kept.iter().any(|l| l.event.seq == o.seq));
    let items_before = before_messages.len() as i64;
    let (messages, repairs, after_tokens, prefix_kept) = if acted {
        let (messages, repairs, tokens) = work.render();
        let prefix = common_prefix(&before_messages, &messages);
        (messages, repairs, tokens, prefix)
    } else {
        let prefix = before_messages.len();
        (before_messages, before_repairs, before_tokens, prefix)
    };
    let mut state = input.state.clone();
    if acted {
        state.checkpoint_seq = work.checkpoint;
        state.summary = work.summary.clone();
        state.summary_tokens = work.summary_message.as_ref().map_or(0, |m| m.tokens);
        state.summary_cap = work.summary_cap;
        state.kept = work.kept.iter().map(|l| l.event.seq).collect();
        state.reduced = work
            .kept
            .iter()
            .chain(&work.live)
            .filter_map(|l| {
                let by = l.by?;
                matches!(l.projection, Projection::Preview | Projection::Reference).then_some((
                    l.event.seq,
                    Reduced {
                        projection: l.projection,
                        reason: l.reason,
                        compaction_id: by,
                        tokens_in_view: l.tokens,
                        chars: l.chars(),
                    },
                ))
            })
            .collect();
        state.last_compaction_id = Some(id);
    }
    state.last_view = LastView {
        head_seq: input.head_seq,
        tier: Some(tier),
        message_tokens: after_tokens,
        tools_tokens: input.tools_tokens,
        tail_from_seq: if acted {
            preserved_tail.first().copied()
        } else {
            input.state.last_view.tail_from_seq
        },
    };

    let tokens_before = used(before_tokens);
    let tokens_after = used(after_tokens);
    let record = CompactionRecord {
        id,
        session_id: input.session_id,
        created_at: input.now,
        head_seq: input.head_seq,
        policy: Policy::Progressive,
        trigger,
        tier,
        acted,
        tokens_before,
        tokens_after,
        items_before,
        items_after: messages.len() as i64,
        budget: window,
        input_tokens_estimate: after_tokens + input.tools_tokens,
        compression_ratio: if tokens_before > 0 {
            tokens_after as f64 / tokens_before as f64
        } else {
            1.0
        },
        anchors: work.summary.anchors.clone(),
        offloaded,
        summarized_seqs,
        evicted_seqs,
        preserved_tail,
        summary_text: work.summary.text.clone(),
        summarizer: summarizer_info,
        repairs,
        prefix_kept: prefix_kept as i64,
        duration_ms: started.elapsed().as_secs_f64() * 1e3,
        error: error.clone(),
    };
    Ok(EngineOutput {
        messages,
        state,
        record,
        folded,
        changed: acted || error.is_some(),
    })
}

/// The cut that folds the oldest half of the head (by tokens), moved later so that no tool call
/// is separated from its results, and never into the tail.
fn half_cut(work: &Working<'_>, tail: usize, valid: &[bool]) -> usize {
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

/// Keeps system, pinned items, the summary and as much of the newest tail as fits in `room`;
/// folds the rest into the summary deterministically (no LLM). If even the newest message does
/// not fit whole, shows it as a preview, then as a reference. Returns the evicted seqs.
fn emergency(
    work: &mut Working<'_>,
    room: i64,
    id: Uuid,
    folded: &mut Vec<FoldedRange>,
    offloaded: &mut Vec<OffloadedItem>,
) -> (Vec<i64>, SummarizerInfo) {
    let mut evicted = Vec::new();
    let mut info = SummarizerInfo {
        kind: "deterministic".into(),
        model: None,
        latency_ms: 0.0,
        input_tokens: None,
        output_tokens: None,
    };
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
    if cut > 0 {
        let events = work.foldable_events(cut);
        let output = summarize::deterministic::summarize(SummaryRequest {
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
    let tokenizer = work.tokenizer;
    for projection in [Projection::Preview, Projection::Reference] {
        let mut total = work.tokens();
        for item in work.live.iter_mut() {
            if total <= room {
                break;
            }
            if item.projection == Projection::Reference || always_kept(item.event) {
                continue;
            }
            total -= reduce_for_emergency(item, projection, tokenizer, id, offloaded);
        }
        // Reduced items are listed in the summary message: count it again.
        work.refresh_summary_message();
        if work.tokens() <= room {
            return (evicted, info);
        }
    }
    shrink_summary(work, room);
    // Last resort: even the pinned items and system prompts do not fit in full.
    for projection in [Projection::Preview, Projection::Reference] {
        let items = work.kept.iter_mut().chain(work.live.iter_mut());
        for item in items.filter(|l| always_kept(l.event)) {
            reduce_for_emergency(item, projection, tokenizer, id, offloaded);
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
    tokenizer: Tokenizer,
    id: Uuid,
    offloaded: &mut Vec<OffloadedItem>,
) -> i64 {
    // The same preview as `Live::message` shows, so that its cost is the one counted.
    let mut message = match projection {
        Projection::Preview => view::preview_message(item.event, view::PREVIEW_CHARS, item.chars()),
        _ => view::reference_message(item.event, item.chars()),
    };
    message.tokens = view::cost(&message, tokenizer);
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
            m.tokens = view::cost(&m, work.tokenizer);
            m
        });
    }
}

/// The summary message cut to its first `cap` characters (none left under 8), marked as cut.
/// Its tokens are left for the caller.
fn cut_summary(
    mut message: ViewMessage<'static>,
    cap: Option<usize>,
) -> Option<ViewMessage<'static>> {
    let Some(cap) = cap else {
        return Some(message);
    };
    if cap < 8 {
        return None;
    }
    if let Some((cut, _)) = message.content.char_indices().nth(cap) {
        let content = message.content.to_mut();
        content.truncate(cut);
        content.push('…');
    }
    Some(message)
}
