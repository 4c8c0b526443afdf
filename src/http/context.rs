//! `/sessions/{id}/context`: what the model sees of each item and why.

use axum::extract::{Path, Query, State};
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};
use uuid::Uuid;

use super::error::{ApiError, Problem};
use super::extract;
use super::AppState;
use crate::domain::compaction::{Anchors, ItemState, Reason, Tier};
use crate::domain::condensation::Condensation;
use crate::domain::episodes::{Episode, Episodes};
use crate::engine::report::{self, ContextItem, ContextTotals, PageQuery};

const DEFAULT_ITEMS: u32 = 200;
const MAX_ITEMS: u32 = 2_000;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(context))
}

/// A session's context, item by item.
#[derive(Serialize, ToSchema)]
pub struct ContextResponse {
    pub session_id: Uuid,
    pub head_seq: i64,
    /// The context window.
    pub budget: i64,
    pub reserved_output_tokens: i64,
    /// Tool schema tokens of the last compact call.
    pub tools_tokens: i64,
    /// Message tokens of the view as it stands (the last view plus events appended since),
    /// calibrated.
    pub tokens_in_view: i64,
    /// (tokens_in_view + tools_tokens + reserved_output_tokens) / budget.
    pub utilization: f64,
    /// The tier that utilization calls for.
    pub tier: Tier,
    /// The provider-count calibration applied to token counts.
    pub calibration: f64,
    /// Events at or before this seq are folded into the summary (except pinned ones).
    pub checkpoint_seq: i64,
    pub summary: String,
    pub anchors: Anchors,
    /// The agent's last condensation (`POST /sessions/{id}/condense`), shown after the summary.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<Condensation>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_compaction_id: Option<Uuid>,
    /// Over every item, whatever the filters.
    pub totals: ContextTotals,
    /// The session's episodes in the order they started, with their seqs and conclusions
    /// (the episodic policy evicts by them).
    pub episodes: Vec<Episode>,
    /// The items matching the filters, in seq order.
    pub items: Vec<ContextItem>,
    /// Pass as `after_seq` for the next page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_after_seq: Option<i64>,
}

#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
struct ContextParams {
    /// Only items in this state: pinned, active, retained or archived.
    state: Option<ItemState>,
    /// Only items with this reason (`summarized`, `offloaded_large_tool_result`, …).
    reason: Option<Reason>,
    /// Only items with seq ≥ this.
    from_seq: Option<i64>,
    /// Only items with seq ≤ this.
    to_seq: Option<i64>,
    /// Paging: only items after this seq.
    after_seq: Option<i64>,
    /// Items per page, 1 to 2000 (default 200).
    #[param(minimum = 1, maximum = 2000)]
    limit: Option<u32>,
}

/// Inspect a session's context: every item's state, projection, cost and reason.
///
/// Answers from the stored compaction state, without recomputing the view.
#[utoipa::path(get, path = "/sessions/{id}/context", tag = "context",
    operation_id = "get_context",
    params(("id" = Uuid, Path, description = "The session id"), ContextParams),
    responses(
        (status = 200, description = "The context", body = ContextResponse, example = json!({
            "session_id": "01936f4e-8a7b-7c3d-9e2f-4a5b6c7d8e9f", "head_seq": 3, "budget": 200000,
            "reserved_output_tokens": 8192, "tools_tokens": 310, "tokens_in_view": 1204,
            "utilization": 0.0485, "tier": "none", "calibration": 1.0, "checkpoint_seq": 1,
            "summary": "## First user request\n> List the files in src/", "anchors": {
                "user_intent": "List the files in src/", "execution_progress": "N/A",
                "key_decision": "N/A", "tried_solution": "N/A", "next_step": "N/A"},
            "last_compaction_id": "01936f50-1c2d-7e3f-8a9b-0c1d2e3f4a5b",
            "totals": {"by_state": {"archived": {"items": 1, "tokens": 12, "tokens_in_view": 0},
                    "retained": {"items": 1, "tokens": 5210, "tokens_in_view": 320},
                    "active": {"items": 1, "tokens": 19, "tokens_in_view": 19}},
                "by_projection": {"summary": {"items": 1, "tokens": 12, "tokens_in_view": 0},
                    "preview": {"items": 1, "tokens": 5210, "tokens_in_view": 320},
                    "full": {"items": 1, "tokens": 19, "tokens_in_view": 19}}},
            "episodes": [],
            "items": [
                {"seq": 1, "type": "message", "role": "user", "tokens": 12, "state": "archived",
                    "projection": "summary", "tokens_in_view": 0, "reason": "summarized",
                    "compaction_id": "01936f50-1c2d-7e3f-8a9b-0c1d2e3f4a5b"},
                {"seq": 2, "type": "message", "role": "tool", "tokens": 5210, "state": "retained",
                    "projection": "preview", "tokens_in_view": 320,
                    "reason": "offloaded_large_tool_result",
                    "compaction_id": "01936f50-1c2d-7e3f-8a9b-0c1d2e3f4a5b"},
                {"seq": 3, "type": "message", "role": "assistant", "tokens": 19, "state": "active",
                    "projection": "full", "tokens_in_view": 19, "reason": "recent_tail"}]})),
        (status = 400, description = "A bad parameter", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such session", body = Problem, content_type = "application/problem+json")
    ))]
async fn context(
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
    Query(params): Query<ContextParams>,
) -> Result<Json<ContextResponse>, ApiError> {
    let limit = extract::page_limit(params.limit, DEFAULT_ITEMS, MAX_ITEMS)?;
    let (session, stored) = state
        .store
        .load_session_state(id)
        .await?
        .ok_or_else(|| ApiError::session_not_found(id))?;
    let stored = stored.state;
    let read = report::view_read(&session, &stored);
    let view = state
        .store
        .view_item_rows(id, read.after_seq, read.to_seq, &read.also)
        .await?;
    let query = PageQuery {
        state: params.state,
        reason: params.reason,
        from_seq: params.from_seq,
        to_seq: params.to_seq,
        after_seq: params.after_seq,
        limit,
    };
    let mut page = report::Page::new(query, &session, &stored, &view);
    while let Some(read) = page.next_read() {
        let rows = state
            .store
            .item_rows(id, read.after_seq, read.to_seq, read.limit)
            .await?;
        page.add_read(read, rows);
    }
    let ranges = match page.span() {
        Some((from, to)) => state.store.folded_ranges(id, from, to).await?,
        None => Vec::new(),
    };
    let totals = report::totals(&session, &stored, &view);
    let usage = report::usage(&session, &stored, &view);
    let (items, next_after_seq) = page.finish(&ranges);
    let episodes = Episodes::from_events(&state.store.episode_events(id).await?)
        .list()
        .to_vec();
    Ok(Json(ContextResponse {
        session_id: id,
        head_seq: session.head_seq,
        budget: usage.budget,
        reserved_output_tokens: usage.reserved_output_tokens,
        tools_tokens: usage.tools_tokens,
        tokens_in_view: usage.tokens_in_view,
        utilization: usage.utilization,
        tier: usage.tier,
        calibration: usage.calibration,
        checkpoint_seq: stored.checkpoint_seq,
        summary: stored.summary.text,
        anchors: stored.summary.anchors,
        memory: stored.memory.map(|m| m.condensation),
        last_compaction_id: stored.last_compaction_id,
        totals,
        episodes,
        items,
        next_after_seq,
    }))
}
