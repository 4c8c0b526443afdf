//! A compaction in progress: what it looks at, what it has decided so far, and the state and
//! record it ends with.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::emergency::emergency;
use super::progressive::Bounds;
use super::render::Format;
use super::working::Working;
use crate::domain::compaction::{
    CompactionRecord, Mode, OffloadedItem, Projection, Reason, Repairs, SummarizerInfo, Tier,
    Trigger, ViewMessage,
};
use crate::domain::condensation::Condensation;
use crate::domain::event::Event;
use crate::domain::session::SessionConfig;
use crate::domain::state::{CompactionState, FoldedRange, LastView, Reduced};
use crate::summarize::{SummaryOutcome, SummaryRequest};

/// Everything a compaction looks at.
#[derive(Debug)]
pub struct EngineInput<'a> {
    pub session_id: Uuid,
    /// The id the compaction's record gets (UUIDv7, so that records sort by time).
    pub compaction_id: Uuid,
    pub config: &'a SessionConfig,
    pub state: &'a CompactionState,
    /// The events the current view is made of, in seq order: those in `state.kept` and every
    /// event after `state.checkpoint_seq`.
    pub events: &'a [Event],
    pub head_seq: i64,
    /// Tokens of the tool schemas sent with the request.
    pub tools_tokens: i64,
    /// The format the view is rendered in: the reasoning it sends back in the current tool
    /// loop is counted.
    pub format: Format,
    pub mode: Mode,
    /// 0, or 1 / 2 after a provider rejected the previous view for its length.
    pub overflow_retry: u8,
    /// The agent's condensation to take instead of compacting by the policy.
    pub condensation: Option<&'a Condensation>,
    pub now: DateTime<Utc>,
}

/// What a compaction decided.
#[derive(Debug)]
pub struct EngineOutput<'a> {
    /// The view, valid for every provider (tool pairs repaired), borrowing from the events.
    pub messages: Vec<ViewMessage<'a>>,
    pub state: CompactionState,
    /// Its `duration_ms` is left at 0 for the caller, who knows how long it took.
    pub record: CompactionRecord,
    /// Runs of seqs newly folded into the summary.
    pub folded: Vec<FoldedRange>,
    /// Whether anything must be persisted (the view's middle changed, or something failed).
    pub changed: bool,
    /// The last seq of a fold the policy wanted but waited on (it would not have brought the
    /// view down to its target): the next fold covers at least as much, so its summary can be
    /// prepared now.
    pub declined_fold: Option<i64>,
}

/// Tokens a view always keeps free beyond the tool schemas and the reserved output: under it,
/// the smallest view (a system prompt and the newest message, however reduced) would not fit.
pub const NO_ROOM_MARGIN: i64 = 512;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum EngineError {
    #[error(
        "the tool schemas ({tools_tokens} tokens), the reserved output ({reserved} tokens) and \
         a safety margin of {NO_ROOM_MARGIN} tokens need {needed} tokens, more than the \
         {window}-token window: send fewer or shorter tool schemas, or lower max_output_tokens",
        needed = tools_tokens + reserved + NO_ROOM_MARGIN
    )]
    NoRoom {
        tools_tokens: i64,
        reserved: i64,
        window: i64,
    },
}

impl EngineError {
    /// What the request needs and the most it may take, in tokens.
    pub fn need_and_ceiling(&self) -> (i64, i64) {
        match self {
            Self::NoRoom {
                tools_tokens,
                reserved,
                window,
            } => (tools_tokens + reserved + NO_ROOM_MARGIN, *window),
        }
    }
}

/// A compaction in progress: the view as it was, what is decided so far, and what the record
/// will say.
#[derive(Debug)]
pub(super) struct Run<'a> {
    pub(super) input: EngineInput<'a>,
    /// The most message tokens (as we count them) that fit the window, and the other bounds.
    pub(super) bounds: Bounds,
    /// The view as it was, with the repairs it needed, and its tokens.
    pub(super) before: (Vec<ViewMessage<'a>>, Repairs),
    pub(super) before_tokens: i64,
    pub(super) tier: Tier,
    pub(super) trigger: Trigger,
    /// A retried compaction with no new events changes nothing while the view fits.
    pub(super) settled: bool,
    pub(super) work: Working<'a>,
    pub(super) acted: bool,
    pub(super) offloaded: Vec<OffloadedItem>,
    pub(super) folded: Vec<FoldedRange>,
    pub(super) summarized_seqs: Vec<i64>,
    pub(super) evicted_seqs: Vec<i64>,
    pub(super) preserved_tail: Vec<i64>,
    pub(super) summarizer: Option<SummarizerInfo>,
    pub(super) error: Option<String>,
    /// See [`EngineOutput::declined_fold`].
    pub(super) declined_fold: Option<i64>,
}

/// A compaction waiting for the summary of the events it folds.
#[derive(Debug)]
pub struct Pending<'a> {
    pub(super) run: Run<'a>,
    /// The view with the fold applied but for the summary.
    pub(super) candidate: Working<'a>,
    pub(super) cut: usize,
    pub(super) offloaded: Vec<OffloadedItem>,
    pub(super) events: Vec<&'a Event>,
}

impl<'a> Pending<'a> {
    /// `run` waiting for the summary of what `candidate` folds at `cut`.
    pub(super) fn new(
        run: Run<'a>,
        candidate: Working<'a>,
        cut: usize,
        offloaded: Vec<OffloadedItem>,
    ) -> Self {
        let events = candidate.foldable_events(cut);
        Self {
            run,
            candidate,
            cut,
            offloaded,
            events,
        }
    }

    /// What to summarise: the summary so far and the events newly folded into it.
    pub fn request(&self) -> SummaryRequest<'_> {
        SummaryRequest {
            previous: &self.candidate.summary,
            events: &self.events,
            max_chars: self.candidate.summary_max_chars,
        }
    }

    /// The tier the compaction works at.
    pub fn tier(&self) -> Tier {
        self.run.tier
    }

    /// Whether the fold cannot wait: the view does not fit or is at the emergency tier, or the
    /// caller forced it.
    pub fn must_fold(&self) -> bool {
        self.run.input.mode == Mode::Force
            || self.run.tier == Tier::Emergency
            || self.run.before_tokens > self.run.bounds.room
    }

    /// Finishes the compaction without the fold (nor what came with it), when a summary is not
    /// ready and the fold can wait: the view is the one there was, which fits.
    pub fn without_fold(self) -> EngineOutput<'a> {
        self.run.finish()
    }

    /// Finishes the compaction with `outcome`, the summary of [`Pending::request`].
    pub fn resume(self, outcome: SummaryOutcome) -> EngineOutput<'a> {
        let Pending {
            mut run,
            mut candidate,
            cut,
            offloaded,
            events,
        } = self;
        let id = run.input.compaction_id;
        run.error = outcome.error;
        run.summarizer = Some(outcome.output.info);
        run.summarized_seqs.extend(events.iter().map(|e| e.seq));
        let reason = Reason::Summarized;
        run.folded
            .extend(candidate.fold(cut, outcome.output.summary, id, reason));
        run.accept(candidate, offloaded);
        run.finish()
    }
}

impl<'a> Run<'a> {
    pub(super) fn start(input: EngineInput<'a>) -> Result<Self, EngineError> {
        let config = input.config;
        let window = i64::from(config.context_window);
        let reserved = i64::from(config.max_output_tokens);
        if input.tools_tokens + reserved + NO_ROOM_MARGIN > window {
            return Err(EngineError::NoRoom {
                tools_tokens: input.tools_tokens,
                reserved,
                window,
            });
        }
        let calibration = input.state.calibration_factor();
        let mut work = Working::from_state(config, input.state, input.events, input.format);
        let room = Bounds::messages_at(config, input.tools_tokens, calibration, 1.0);
        if config.policy == crate::domain::session::Policy::Episodic {
            work.keep_first_and_recent_requests();
        }
        let (messages, repairs, before_tokens) = work.render();
        let utilization = config.utilization(before_tokens, calibration, input.tools_tokens);
        let mut tier = Tier::for_utilization(utilization, &config.thresholds);
        let trigger = match (input.overflow_retry, input.mode) {
            _ if input.condensation.is_some() => Trigger::Condense,
            (1.., _) => Trigger::OverflowRetry,
            (_, Mode::Force) => Trigger::Manual,
            _ => Trigger::Auto,
        };
        if input.mode == Mode::Force {
            tier = tier.max(Tier::Full);
        }
        let settled = input.mode == Mode::Auto
            && input.overflow_retry == 0
            && input.condensation.is_none()
            && input.state.last_compaction_id.is_some()
            && input.head_seq == input.state.last_view.head_seq
            && before_tokens <= room;
        // System prompts over their share leave the conversation too little room: a compaction
        // that acts shows the longest as head and tail first, so the steps below (and the
        // caps, shares of the room the system prompts leave) work on the view it leaves.
        let mut offloaded = Vec::new();
        if !settled && (tier > Tier::None || trigger != Trigger::Auto) {
            let cap = (config.system_max_share * room as f64).floor() as i64;
            offloaded = work.excerpt_system_prompts(cap, input.compaction_id);
        }
        let bounds = Bounds::new(
            config,
            input.tools_tokens,
            calibration,
            work.pinned_tokens(),
        );
        Ok(Self {
            input,
            bounds,
            before: (messages, repairs),
            before_tokens,
            tier,
            trigger,
            settled,
            work,
            acted: !offloaded.is_empty(),
            offloaded,
            folded: Vec::new(),
            summarized_seqs: Vec::new(),
            evicted_seqs: Vec::new(),
            preserved_tail: Vec::new(),
            summarizer: None,
            error: None,
            declined_fold: None,
        })
    }

    /// Takes `candidate` as the view, with `offloaded` what it offloaded besides what this run
    /// offloaded before.
    pub(super) fn accept(&mut self, candidate: Working<'a>, offloaded: Vec<OffloadedItem>) {
        self.preserved_tail = candidate.full_seqs();
        self.offloaded.extend(offloaded);
        // Items folded after being offloaded are summarised; a kept one stays reduced.
        self.offloaded.retain(|o| {
            o.seq > candidate.checkpoint || candidate.kept.iter().any(|l| l.event.seq == o.seq)
        });
        self.work = candidate;
        self.acted = true;
    }

    /// Takes what a step before truncation showed reduced; returns what the view costs after it.
    fn took(&mut self, (shown, after): (Vec<OffloadedItem>, i64)) -> i64 {
        self.acted |= !shown.is_empty();
        self.offloaded.extend(shown);
        after
    }

    /// Falls back to emergency truncation when the view still does not fit, then writes the
    /// state and the record. A view at the emergency tier that the gentler steps brought within
    /// the room is recorded at the full tier: it was not truncated.
    pub(super) fn finish(mut self) -> EngineOutput<'a> {
        let id = self.input.compaction_id;
        // Until something acts, the view is the one rendered at the start.
        let mut current_tokens = if self.acted {
            self.work.tokens()
        } else {
            self.before_tokens
        };
        // The last step before truncation: the long arguments of answered turns (files
        // written, patches), the newest too, by reference.
        let Bounds {
            room,
            low_water,
            tail_cap,
            ..
        } = self.bounds;
        if current_tokens > room {
            let every = 0..self.work.live.len();
            let step = self
                .work
                .offload_arguments_until(every, current_tokens, room, id);
            current_tokens = self.took(step);
        }
        // Then a request longer than the tail's cap (a pasted document), the current one too,
        // as its head and tail: the rest of the view stays as the steps above left it.
        if current_tokens > room {
            let bounds = (room, low_water, tail_cap);
            let step = self.work.excerpt_requests_until(current_tokens, bounds, id);
            current_tokens = self.took(step);
        }
        if self.tier == Tier::Emergency && current_tokens <= room {
            self.tier = Tier::Full;
        }
        if current_tokens > room {
            self.tier = Tier::Emergency;
            let (evicted, info) = emergency(
                &mut self.work,
                room,
                id,
                &mut self.folded,
                &mut self.offloaded,
            );
            if !evicted.is_empty() {
                self.summarizer = Some(info);
            }
            self.evicted_seqs.extend(evicted);
            self.preserved_tail = self.work.full_seqs();
            self.acted = true;
        }
        let Run {
            input,
            before: (before_messages, before_repairs),
            before_tokens,
            tier,
            trigger,
            work,
            acted,
            mut offloaded,
            folded,
            summarized_seqs,
            evicted_seqs,
            preserved_tail,
            summarizer,
            error,
            declined_fold,
            ..
        } = self;

        // Items folded after being offloaded are summarised, not offloaded; an item reduced
        // twice is listed once, as it ends up.
        offloaded
            .retain(|o| o.seq > work.checkpoint || work.kept.iter().any(|l| l.event.seq == o.seq));
        let mut seen = std::collections::HashSet::new();
        offloaded.reverse();
        offloaded.retain(|o| seen.insert(o.seq));
        offloaded.reverse();
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
            state.memory = work.memory.clone();
            state.checkpoint_seq = work.checkpoint;
            state.summary = work.summary.clone();
            let summary = work.summary_message.as_ref();
            state.summary_tokens = summary.map_or(0, |m| m.tokens);
            state.summary_bytes = summary.map_or(0, ViewMessage::shown_bytes);
            state.summary_cap = work.summary_cap;
            state.kept = work.kept.iter().map(|l| l.event.seq).collect();
            // Items at or before the checkpoint that left the view apart from a folded range
            // (see `Working::fold`) keep saying why, until a later fold covers them.
            let earlier =
                input.state.reduced.iter().filter(|(&seq, r)| {
                    r.projection == Projection::Summary && seq <= work.checkpoint
                });
            state.reduced = earlier.map(|(&seq, r)| (seq, *r)).collect();
            state.reduced.extend(
                work.kept
                    .iter()
                    .chain(&work.live)
                    .chain(&work.collapsed)
                    .filter_map(|l| {
                        let by = l.by?;
                        matches!(
                            l.projection,
                            Projection::Preview | Projection::Reference | Projection::Summary
                        )
                        .then_some((
                            l.event.seq,
                            Reduced {
                                projection: l.projection,
                                reason: l.reason,
                                compaction_id: by,
                                tokens_in_view: l.tokens,
                                bytes_in_view: match l.projection {
                                    Projection::Summary => 0,
                                    _ => l.message(work.error_lines).shown_bytes(),
                                },
                                chars: l.chars(),
                                excerpt_chars: l.excerpt,
                            },
                        ))
                    }),
            );
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

        let config = input.config;
        let calibration = input.state.calibration_factor();
        let used = |tokens| config.tokens_used(tokens, calibration, input.tools_tokens);
        let tokens_before = used(before_tokens);
        let tokens_after = used(after_tokens);
        let record = CompactionRecord {
            id,
            session_id: input.session_id,
            created_at: input.now,
            head_seq: input.head_seq,
            policy: config.policy,
            trigger,
            tier,
            acted,
            tokens_before,
            tokens_after,
            items_before,
            items_after: messages.len() as i64,
            budget: i64::from(config.context_window),
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
            summarizer,
            repairs,
            prefix_kept: prefix_kept as i64,
            duration_ms: 0.0,
            error: error.clone(),
        };
        EngineOutput {
            messages,
            state,
            record,
            folded,
            changed: acted || error.is_some(),
            declined_fold,
        }
    }
}

/// How many leading messages two views share.
fn common_prefix(a: &[ViewMessage], b: &[ViewMessage]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}
