//! Context inspection: each item's state, projection and reason, read from the persisted
//! compaction state without recomputing the view.

use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::domain::compaction::{ItemState, Projection, Reason};
use crate::domain::event::Role;
use crate::domain::state::{CompactionState, FoldedRange};

/// How one item stands in the current view.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct ItemStanding {
    pub state: ItemState,
    pub projection: Projection,
    pub tokens_in_view: i64,
    pub reason: Reason,
    /// The compaction that set this standing; absent when none has touched the item.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compaction_id: Option<Uuid>,
}

fn kept_reason(role: Option<Role>, pinned: bool) -> Reason {
    match (role, pinned) {
        (Some(Role::System), _) => Reason::SystemPrompt,
        (Some(Role::User), true) => Reason::PinnedUserMessage,
        _ => Reason::Pinned,
    }
}

/// The standing of the event at `seq`. `ranges` must be sorted by `from_seq`.
pub fn standing(
    seq: i64,
    role: Option<Role>,
    pinned: bool,
    tokens: i64,
    state: &CompactionState,
    ranges: &[FoldedRange],
) -> ItemStanding {
    let kept = |reason| ItemStanding {
        state: ItemState::Pinned,
        projection: Projection::Full,
        tokens_in_view: tokens,
        reason,
        compaction_id: None,
    };
    if let Some(r) = state.reduced.get(&seq) {
        return ItemStanding {
            state: if r.reason.archives() || r.projection == Projection::Summary {
                ItemState::Archived
            } else {
                ItemState::Retained
            },
            projection: r.projection,
            tokens_in_view: r.tokens_in_view,
            reason: r.reason,
            compaction_id: Some(r.compaction_id),
        };
    }
    if seq <= state.checkpoint_seq {
        if state.kept.contains(&seq) {
            return kept(kept_reason(role, pinned));
        }
        let range = ranges
            .partition_point(|r| r.from_seq <= seq)
            .checked_sub(1)
            .map(|i| &ranges[i])
            .filter(|r| r.to_seq >= seq);
        return ItemStanding {
            state: ItemState::Archived,
            projection: Projection::Summary,
            tokens_in_view: 0,
            reason: range.map_or(Reason::Summarized, |r| r.reason),
            compaction_id: range.map(|r| r.compaction_id),
        };
    }
    if role == Some(Role::System) || pinned {
        return kept(kept_reason(role, pinned));
    }
    let in_tail = state.last_view.tail_from_seq.is_some_and(|t| seq >= t);
    ItemStanding {
        state: ItemState::Active,
        projection: Projection::Full,
        tokens_in_view: tokens,
        reason: if in_tail {
            Reason::RecentTail
        } else {
            Reason::WithinBudget
        },
        compaction_id: None,
    }
}
