//! `/sessions/{id}/context`, `/observations` and the recall tool: what the model sees of each
//! item and why, and the exact content behind every reference.

use axum::extract::{Path, Query, State};
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};
use uuid::Uuid;

use super::error::{ApiError, Problem};
use super::extract;
use super::AppState;
use crate::domain::compaction::{Anchors, ItemState, Tier};
use crate::engine::report::{self, ContextItem, ContextTotals, PageQuery};
use crate::engine::view;

const DEFAULT_ITEMS: u32 = 200;
const MAX_ITEMS: u32 = 2_000;
const DEFAULT_SLICE: usize = 4_000;
const MAX_SLICE: usize = 200_000;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(context))
        .routes(routes!(observation))
        .routes(routes!(recall_tool))
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
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_compaction_id: Option<Uuid>,
    /// Over every item, whatever the filters.
    pub totals: ContextTotals,
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
        last_compaction_id: stored.last_compaction_id,
        totals,
        items,
        next_after_seq,
    }))
}

/// An exact slice of an item's content.
#[derive(Serialize, ToSchema)]
pub struct Observation {
    pub seq: i64,
    /// `observation://<seq>`
    pub uri: String,
    /// Character offset of `content`.
    pub offset: usize,
    /// Characters in `content`.
    pub length: usize,
    /// Characters in the whole item.
    pub total_chars: usize,
    pub content: String,
    /// The offset of the next slice; absent when this slice reaches the end.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_offset: Option<usize>,
}

#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
struct SliceParams {
    /// First character (default 0).
    #[param(minimum = 0)]
    offset: Option<i64>,
    /// Most characters to return, 1 to 200000 (default 4000).
    #[param(minimum = 1, maximum = 200000)]
    limit: Option<usize>,
}

/// Recall an observation exactly.
///
/// Offsets and lengths count characters, never splitting one.
#[utoipa::path(get, path = "/sessions/{id}/observations/{event_id}", tag = "context",
    operation_id = "get_observation",
    params(("id" = Uuid, Path, description = "The session id"),
        ("event_id" = i64, Path, description = "The event's seq, as in `observation://<seq>`"),
        SliceParams),
    responses(
        (status = 200, description = "The slice", body = Observation, example = json!({
            "seq": 42, "uri": "observation://42", "offset": 0, "length": 11, "total_chars": 11,
            "content": "main.rs\nlib"})),
        (status = 400, description = "A bad parameter", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such session or event", body = Problem,
            content_type = "application/problem+json")
    ))]
async fn observation(
    State(state): State<AppState>,
    Path((id, seq)): Path<(Uuid, i64)>,
    Query(params): Query<SliceParams>,
) -> Result<Json<Observation>, ApiError> {
    // An i64, like every other count in the API, so that the document's bounds (int64, at
    // least 0) are the ones the server holds.
    let offset = params.offset.unwrap_or(0);
    if offset < 0 {
        return Err(ApiError::BadRequest("offset must be at least 0".into()));
    }
    let offset = usize::try_from(offset).unwrap_or(usize::MAX);
    let limit = extract::page_limit(params.limit, DEFAULT_SLICE, MAX_SLICE)?;
    let event = state
        .store
        .get_event(id, seq)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("session {id} has no event {seq}")))?;
    let text = view::text_of(&event);
    let total_chars = text.chars().count();
    let mut chars = text.char_indices().map(|(i, _)| i).chain([text.len()]);
    let start = chars.nth(offset.min(total_chars)).unwrap_or(text.len());
    let taken = limit.min(total_chars.saturating_sub(offset));
    let end = text[start..]
        .char_indices()
        .nth(taken)
        .map_or(text.len(), |(i, _)| start + i);
    let next = offset + taken;
    Ok(Json(Observation {
        seq,
        uri: view::observation_uri(seq),
        offset,
        length: taken,
        total_chars,
        content: text[start..end].to_owned(),
        next_offset: (next < total_chars).then_some(next),
    }))
}

#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
struct ToolParams {
    /// `openai` (default) or `anthropic`.
    #[param(value_type = Option<ToolFormat>, inline)]
    format: Option<String>,
}

/// The provider whose tool-definition shape the recall tool comes in.
#[derive(ToSchema)]
#[allow(dead_code)]
enum ToolFormat {
    #[schema(rename = "openai")]
    Openai,
    #[schema(rename = "anthropic")]
    Anthropic,
}

/// A ready tool schema agents add so their model can recall offloaded content.
///
/// When the model calls it, the agent answers with
/// `GET /sessions/{id}/observations/{seq}?offset=&limit=`.
#[utoipa::path(get, path = "/tools/recall_observation", tag = "context",
    operation_id = "get_recall_tool",
    params(ToolParams),
    responses(
        (status = 200, description = "The tool schema", body = Object, example = json!({
            "type": "function", "function": {"name": "recall_observation",
                "description": "Recall the exact content of an item that was offloaded…",
                "parameters": {"type": "object", "properties": {
                    "uri": {"type": "string"}, "offset": {"type": "integer"},
                    "limit": {"type": "integer"}}, "required": ["uri"]}}})),
        (status = 400, description = "An unknown format", body = Problem, content_type = "application/problem+json")
    ))]
async fn recall_tool(Query(params): Query<ToolParams>) -> Result<Json<Value>, ApiError> {
    let description = "Recall the exact content of an item that was offloaded from the \
        conversation, given its observation://<id> reference. Returns up to `limit` characters \
        starting at `offset`; ask again with the returned next_offset for more.";
    let parameters = json!({
        "type": "object",
        "properties": {
            "uri": {"type": "string", "description": "The reference, e.g. observation://42"},
            "offset": {"type": "integer", "minimum": 0, "description": "First character (default 0)"},
            "limit": {"type": "integer", "minimum": 1, "maximum": MAX_SLICE,
                "description": "Most characters to return (default 4000)"}
        },
        "required": ["uri"]
    });
    match params.format.as_deref().unwrap_or("openai") {
        "openai" => Ok(Json(json!({
            "type": "function",
            "function": {"name": "recall_observation", "description": description, "parameters": parameters}
        }))),
        "anthropic" => Ok(Json(json!({
            "name": "recall_observation", "description": description, "input_schema": parameters
        }))),
        other => Err(ApiError::BadRequest(format!(
            "unknown format `{other}`: use openai or anthropic"
        ))),
    }
}
