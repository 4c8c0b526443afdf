//! The context report: how each item of a session stands, totals by state and projection, one
//! page of items, and how full the view is. Pure functions over the stored session, its
//! compaction state and the item rows the caller read as this module asks, so that a report
//! reads one page and the items of the view, never the whole history.

use std::collections::BTreeMap;

use serde::Serialize;
use utoipa::ToSchema;

use super::inspect::{standing, ItemStanding};
use crate::domain::compaction::{ItemState, Projection, Reason, Tier};
use crate::domain::event::{EventType, Item, Role};
use crate::domain::session::Session;
use crate::domain::state::{CompactionState, FoldedRange};

/// How `item` stands; `ranges` only name the compaction of an archived item.
fn standing_of(item: &Item, state: &CompactionState, ranges: &[FoldedRange]) -> ItemStanding {
    standing(item.seq, item.role, item.pinned, item.tokens, state, ranges)
}

/// One item of the session's context.
#[derive(Serialize, ToSchema)]
pub struct ContextItem {
    pub seq: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(rename = "type")]
    pub event_type: EventType,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<Role>,
    /// Full token cost.
    pub tokens: i64,
    #[serde(flatten)]
    pub standing: ItemStanding,
}

/// Items and tokens of one group.
#[derive(Serialize, ToSchema, Default, Clone, Copy)]
pub struct Tally {
    pub items: i64,
    pub tokens: i64,
    pub tokens_in_view: i64,
}

impl Tally {
    fn add(&mut self, other: Tally) {
        self.items += other.items;
        self.tokens += other.tokens;
        self.tokens_in_view += other.tokens_in_view;
    }
}

#[derive(Serialize, ToSchema)]
pub struct ContextTotals {
    /// By lifecycle state: pinned, active, retained, archived.
    pub by_state: BTreeMap<String, Tally>,
    /// By projection: full, preview, reference, summary, omitted.
    pub by_projection: BTreeMap<String, Tally>,
}

/// The items a report reads besides its page: every item that is not archived (those after
/// `after_seq`, and the seqs in `also`), and every item appended since the last view.
#[derive(Debug, Clone, PartialEq)]
pub struct ViewRead {
    pub after_seq: i64,
    pub to_seq: i64,
    pub also: Vec<i64>,
}

/// The view's items to read: bounded by the view and what was appended since, not by the
/// history.
pub fn view_read(session: &Session, state: &CompactionState) -> ViewRead {
    // States written before the last view was kept may have a last view behind the checkpoint:
    // reading from there keeps every item appended since it in what is read.
    let after_seq = state.checkpoint_seq.min(state.last_view.head_seq);
    let mut also: Vec<i64> = state
        .kept
        .iter()
        .chain(state.reduced.keys())
        .copied()
        .filter(|&seq| seq <= after_seq)
        .collect();
    also.sort_unstable();
    also.dedup();
    ViewRead {
        after_seq,
        to_seq: session.head_seq,
        also,
    }
}

/// Totals by state and by projection. `view` holds the items [`view_read`] asked for; every
/// other item of the session is archived, counted from the session's totals.
pub fn totals(session: &Session, state: &CompactionState, view: &[Item]) -> ContextTotals {
    let mut totals = ContextTotals {
        by_state: BTreeMap::new(),
        by_projection: BTreeMap::new(),
    };
    let mut add = |item_state: ItemState, projection: Projection, tally: Tally| {
        totals
            .by_state
            .entry(name(&item_state))
            .or_default()
            .add(tally);
        totals
            .by_projection
            .entry(name(&projection))
            .or_default()
            .add(tally);
    };
    for item in view {
        let s = standing_of(item, state, &[]);
        add(
            s.state,
            s.projection,
            Tally {
                items: 1,
                tokens: item.tokens,
                tokens_in_view: s.tokens_in_view,
            },
        );
    }
    let unread = Tally {
        items: session.head_seq - view.len() as i64,
        tokens: session.total_tokens - view.iter().map(|i| i.tokens).sum::<i64>(),
        tokens_in_view: 0,
    };
    if unread.items > 0 {
        add(ItemState::Archived, Projection::Summary, unread);
    }
    totals
}

/// How full the view as it stands is: the last view plus the events appended since.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Usage {
    pub budget: i64,
    pub reserved_output_tokens: i64,
    pub tools_tokens: i64,
    /// Message tokens, calibrated.
    pub tokens_in_view: i64,
    pub utilization: f64,
    pub tier: Tier,
    pub calibration: f64,
}

/// The usage of the view as it stands. `view` holds the items [`view_read`] asked for.
pub fn usage(session: &Session, state: &CompactionState, view: &[Item]) -> Usage {
    let config = &session.config;
    let pending: i64 = view
        .iter()
        .filter(|i| i.seq > state.last_view.head_seq)
        .map(|i| i.tokens)
        .sum();
    let calibration = state.calibration_factor();
    let message_tokens = state.last_view.message_tokens + pending;
    let tools_tokens = state.last_view.tools_tokens;
    let utilization = config.utilization(message_tokens, calibration, tools_tokens);
    Usage {
        budget: i64::from(config.context_window),
        reserved_output_tokens: i64::from(config.max_output_tokens),
        tools_tokens,
        tokens_in_view: (message_tokens as f64 * calibration).ceil() as i64,
        utilization,
        tier: Tier::for_utilization(utilization, &config.thresholds),
        calibration,
    }
}

/// Which items a page holds: filters and paging.
#[derive(Debug, Clone, Copy, Default)]
pub struct PageQuery {
    /// Only items in this state.
    pub state: Option<ItemState>,
    /// Only items with this reason.
    pub reason: Option<Reason>,
    /// Only items with seq ≥ this.
    pub from_seq: Option<i64>,
    /// Only items with seq ≤ this.
    pub to_seq: Option<i64>,
    /// Only items after this seq.
    pub after_seq: Option<i64>,
    pub limit: u32,
}

/// A read of stored items: those with `after_seq < seq ≤ to_seq`, at most `limit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageRead {
    pub after_seq: i64,
    pub to_seq: i64,
    pub limit: u32,
}

/// A page of items under construction. Items that are not archived are all in the view's
/// items, so a page of them is taken from there; otherwise [`Page::next_read`] says what to
/// read from the store next, until the page is full or the range is exhausted.
#[derive(Debug)]
pub struct Page<'s> {
    query: PageQuery,
    state: &'s CompactionState,
    items: Vec<Item>,
    /// Whether a matching item follows the page.
    more: bool,
    next: Option<PageRead>,
}

impl<'s> Page<'s> {
    pub fn new(
        query: PageQuery,
        session: &Session,
        state: &'s CompactionState,
        view: &[Item],
    ) -> Self {
        let mut after = query
            .after_seq
            .unwrap_or(0)
            .max(query.from_seq.map_or(0, |f| f.saturating_sub(1)));
        after = after.max(0);
        let mut to = query.to_seq.unwrap_or(i64::MAX).min(session.head_seq);
        let mut page = Page {
            query,
            state,
            items: Vec::new(),
            more: false,
            next: None,
        };
        let in_view_only = match query.state {
            // Archived items are at or before the checkpoint, unless the episodic policy
            // archived some after it (shown as references): those are read from the store too.
            Some(ItemState::Archived) => {
                if !state.reduced.values().any(|r| r.reason.archives()) {
                    to = to.min(state.checkpoint_seq);
                }
                false
            }
            // Every other item is among the view's, and so is every item with a reason only
            // items in the view have.
            Some(_) => true,
            None => query.reason.is_some_and(never_archived),
        };
        if in_view_only {
            page.add(
                view.iter()
                    .filter(|i| i.seq > after && i.seq <= to)
                    .cloned(),
            );
            return page;
        }
        after = after.min(to);
        page.next = (after < to).then_some(PageRead {
            after_seq: after,
            to_seq: to,
            limit: page.wanted(),
        });
        page
    }

    /// Items to read one page: one more than the limit tells whether another page follows.
    fn wanted(&self) -> u32 {
        self.query.limit.saturating_add(1)
    }

    /// What to read from the store next; None when the page is complete.
    pub fn next_read(&self) -> Option<PageRead> {
        self.next
    }

    /// Takes the items a [`PageRead`] returned.
    pub fn add_read(&mut self, read: PageRead, rows: Vec<Item>) {
        let exhausted = rows.len() < read.limit as usize;
        let last = rows.last().map(|i| i.seq);
        self.add(rows);
        self.next = match last {
            Some(last) if !exhausted && !self.more && last < read.to_seq => Some(PageRead {
                after_seq: last,
                ..read
            }),
            _ => None,
        };
    }

    fn add(&mut self, rows: impl IntoIterator<Item = Item>) {
        for item in rows {
            if self.more {
                return;
            }
            let standing = standing_of(&item, self.state, &[]);
            let wanted = self.query.state.is_none_or(|want| want == standing.state)
                && self.query.reason.is_none_or(|want| want == standing.reason);
            if !wanted {
                continue;
            }
            if self.items.len() == self.query.limit as usize {
                self.more = true;
            } else {
                self.items.push(item);
            }
        }
    }

    /// The seqs the page's items at or before the checkpoint span: the folded ranges of
    /// those name the compaction that archived them. None when there are none.
    pub fn span(&self) -> Option<(i64, i64)> {
        let mut folded = self
            .items
            .iter()
            .map(|i| i.seq)
            .filter(|&seq| seq <= self.state.checkpoint_seq);
        let first = folded.next()?;
        Some((first, folded.next_back().unwrap_or(first)))
    }

    /// The page's items with their standing, and the `after_seq` of the next page (None on
    /// the last). `ranges` are the folded ranges of [`Page::span`], in seq order.
    pub fn finish(self, ranges: &[FoldedRange]) -> (Vec<ContextItem>, Option<i64>) {
        let next = if self.more {
            self.items.last().map(|i| i.seq)
        } else {
            None
        };
        let items = self
            .items
            .into_iter()
            .map(|item| ContextItem {
                standing: standing_of(&item, self.state, ranges),
                seq: item.seq,
                id: item.id,
                event_type: item.event_type,
                role: item.role,
                tokens: item.tokens,
            })
            .collect();
        (items, next)
    }
}

/// Whether an item with this reason is always in the view (kept or active): never archived.
fn never_archived(reason: Reason) -> bool {
    matches!(
        reason,
        Reason::SystemPrompt
            | Reason::Pinned
            | Reason::PinnedUserMessage
            | Reason::RecentTail
            | Reason::WithinBudget
    )
}

/// The serde name of a unit enum value.
fn name<T: Serialize>(value: &T) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use chrono::Utc;
    use uuid::Uuid;

    use super::*;
    use crate::domain::session::SessionConfig;
    use crate::domain::state::Reduced;

    const HEAD: i64 = 10_000;
    const CHECKPOINT: i64 = 9_990;

    /// A long history folded up to `CHECKPOINT`, with a system prompt and a pinned note kept
    /// and one reduced item after the checkpoint.
    fn history() -> (Session, CompactionState, Vec<Item>) {
        let items: Vec<Item> = (1..=HEAD)
            .map(|seq| Item {
                seq,
                id: None,
                event_type: EventType::Message,
                role: Some(if seq == 1 { Role::System } else { Role::User }),
                pinned: seq == 500,
                tokens: 10,
            })
            .collect();
        let session = Session {
            id: Uuid::now_v7(),
            tenant: crate::auth::DEFAULT_TENANT.to_owned(),
            created_at: Utc::now(),
            updated_at: Utc::now(),
            config: SessionConfig::default(),
            metadata: Default::default(),
            head_seq: HEAD,
            total_tokens: 10 * HEAD,
        };
        let mut state = CompactionState {
            checkpoint_seq: CHECKPOINT,
            kept: vec![1, 500],
            ..CompactionState::default()
        };
        state.last_view.head_seq = HEAD - 2;
        state.reduced.insert(
            9_995,
            Reduced {
                projection: Projection::Preview,
                reason: Reason::OffloadedLargeToolResult,
                compaction_id: Uuid::now_v7(),
                tokens_in_view: 4,
                bytes_in_view: 0,
                chars: 100,
                excerpt_chars: 0,
            },
        );
        (session, state, items)
    }

    /// What a store answers to a read.
    fn answer(items: &[Item], read: PageRead) -> Vec<Item> {
        items
            .iter()
            .filter(|i| i.seq > read.after_seq && i.seq <= read.to_seq)
            .take(read.limit as usize)
            .cloned()
            .collect()
    }

    fn view_of(items: &[Item], read: &ViewRead) -> Vec<Item> {
        items
            .iter()
            .filter(|i| {
                (i.seq > read.after_seq && i.seq <= read.to_seq) || read.also.contains(&i.seq)
            })
            .cloned()
            .collect()
    }

    /// Builds a page as the handler does; answers it and the number of rows read.
    fn page_of(query: PageQuery) -> (Vec<ContextItem>, Option<i64>, usize) {
        let (session, state, items) = history();
        let view = view_of(&items, &view_read(&session, &state));
        let mut page = Page::new(query, &session, &state, &view);
        let mut read_rows = 0;
        while let Some(read) = page.next_read() {
            let rows = answer(&items, read);
            assert!(rows.len() <= query.limit as usize + 1);
            read_rows += rows.len();
            page.add_read(read, rows);
        }
        let (items, next) = page.finish(&[]);
        (items, next, read_rows)
    }

    #[test]
    fn the_view_read_is_bounded_by_the_view_not_the_history() {
        let (session, state, items) = history();
        let read = view_read(&session, &state);
        assert_eq!((read.after_seq, read.to_seq), (CHECKPOINT, HEAD));
        assert_eq!(read.also, [1, 500]);
        let view = view_of(&items, &read);
        assert_eq!(view.len(), 2 + (HEAD - CHECKPOINT) as usize);

        let totals = totals(&session, &state, &view);
        let archived = &totals.by_state["archived"];
        assert_eq!(
            (archived.items, archived.tokens),
            (CHECKPOINT - 2, 10 * (CHECKPOINT - 2))
        );
        assert_eq!(archived.tokens_in_view, 0);
        assert_eq!(totals.by_state["pinned"].items, 2);
        assert_eq!(totals.by_state["retained"].tokens_in_view, 4);
        assert_eq!(totals.by_state["active"].items, HEAD - CHECKPOINT - 1);
        assert_eq!(totals.by_projection["summary"].items, CHECKPOINT - 2);

        // Two items were appended since the last view.
        let usage = usage(&session, &state, &view);
        assert_eq!(usage.tokens_in_view, 20);
    }

    #[test]
    fn a_page_reads_one_page_of_rows() {
        let query = PageQuery {
            limit: 5,
            ..PageQuery::default()
        };
        let (items, next, read) = page_of(query);
        assert_eq!(
            items.iter().map(|i| i.seq).collect::<Vec<_>>(),
            [1, 2, 3, 4, 5]
        );
        assert_eq!((next, read), (Some(5), 6));

        // Archived items skip the kept ones, reading little more than the page.
        let (items, next, read) = page_of(PageQuery {
            state: Some(ItemState::Archived),
            reason: None,
            after_seq: Some(498),
            ..query
        });
        assert_eq!(
            items.iter().map(|i| i.seq).collect::<Vec<_>>(),
            [499, 501, 502, 503, 504]
        );
        assert_eq!(next, Some(504));
        assert!(read <= 12, "{read} rows read");

        // The last archived page stops at the checkpoint.
        let (items, next, _) = page_of(PageQuery {
            state: Some(ItemState::Archived),
            reason: None,
            after_seq: Some(CHECKPOINT - 2),
            ..query
        });
        assert_eq!(
            items.iter().map(|i| i.seq).collect::<Vec<_>>(),
            [CHECKPOINT - 1, CHECKPOINT]
        );
        assert_eq!(next, None);

        // Any other state is among the view's items: nothing more is read.
        let (items, next, read) = page_of(PageQuery {
            state: Some(ItemState::Pinned),
            reason: None,
            ..query
        });
        assert_eq!(items.iter().map(|i| i.seq).collect::<Vec<_>>(), [1, 500]);
        assert_eq!((next, read), (None, 0));
        let (items, _, read) = page_of(PageQuery {
            state: Some(ItemState::Retained),
            reason: None,
            ..query
        });
        assert_eq!(items.iter().map(|i| i.seq).collect::<Vec<_>>(), [9_995]);
        assert_eq!(read, 0);
    }

    #[test]
    fn a_reason_filter_reads_the_history_only_for_reasons_archived_items_have() {
        let query = PageQuery {
            limit: 5,
            ..PageQuery::default()
        };
        // Kept and active reasons are the view's: nothing more is read.
        let (items, next, read) = page_of(PageQuery {
            reason: Some(Reason::SystemPrompt),
            ..query
        });
        assert_eq!(items.iter().map(|i| i.seq).collect::<Vec<_>>(), [1]);
        assert_eq!((next, read), (None, 0));
        let (items, _, read) = page_of(PageQuery {
            reason: Some(Reason::WithinBudget),
            ..query
        });
        assert!(items
            .iter()
            .all(|i| i.standing.reason == Reason::WithinBudget));
        assert_eq!(items.len(), 5);
        assert_eq!(read, 0);
        // Summarised items are read from the history, a page at a time.
        let (items, next, read) = page_of(PageQuery {
            reason: Some(Reason::Summarized),
            ..query
        });
        assert_eq!(
            items.iter().map(|i| i.seq).collect::<Vec<_>>(),
            [2, 3, 4, 5, 6]
        );
        assert_eq!(next, Some(6));
        assert!(read > 0);
    }
}
