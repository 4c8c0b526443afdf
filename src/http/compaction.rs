//! `/sessions/{id}/compact`, `/condense`, `/compactions` and `/usage`: the view to send, the
//! agent's own condensation, the records that explain them, and the provider's real counts that
//! calibrate them.

use axum::extract::{Path, Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};
use uuid::Uuid;

use super::error::{ApiError, Problem};
use super::extract;
use super::AppState;
use crate::compaction::{self, CompactError, CompactRequest, Presented};
use crate::domain::compaction::{unrecorded_estimate, CompactionRecord, Mode, Tier, Trigger};
use crate::domain::condensation::Condensation;
use crate::domain::episodes::Episodes;
use crate::domain::state::{calibration_sample, MAX_CALIBRATION_SAMPLE, MIN_CALIBRATION_SAMPLE};
use crate::domain::FieldError;
use crate::engine::render::{Format, ReusingView};
use crate::tokens::Tokenizer;

const DEFAULT_PAGE: u32 = 20;
const MAX_PAGE: u32 = 200;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(compact))
        .routes(routes!(get_view))
        .routes(routes!(condense))
        .routes(routes!(list_compactions))
        .routes(routes!(list_compaction_outlines))
        .routes(routes!(get_compaction))
        .routes(routes!(record_usage))
}

/// The body of a compact call; every field is optional.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CompactBody {
    /// How to render the view (default `openai`).
    #[serde(default)]
    pub format: Format,
    /// The tool schemas the agent sends with the request: they count against the window.
    #[serde(default)]
    #[schema(value_type = Vec<Object>)]
    pub tools: Vec<Value>,
    #[serde(default)]
    pub mode: Mode,
    /// 1 or 2 after the provider rejected the previous view for its length: 1 shows every
    /// answered tool result by reference with a safety margin; 2 keeps only system, pinned
    /// items, the summary and the last user turn.
    #[serde(default)]
    #[schema(minimum = 0, maximum = 2)]
    pub overflow_retry: u8,
}

// The answer is this, serialised in one pass: the view's parts rendered on earlier calls are
// copied from this replica's memory (see `ReusingView`).
/// The view to send and the record that explains it.
#[derive(Serialize, ToSchema)]
pub struct CompactResponse<'a> {
    /// The request body to send, in the asked format: `{messages}` for OpenAI, `{input}` for
    /// OpenAI Responses, `{system, messages}` for Anthropic, `{items}` for raw.
    #[schema(value_type = Object)]
    pub view: ReusingView<'a, 'a>,
    #[schema(value_type = CompactionRecord)]
    pub record: &'a CompactionRecord,
    /// Whether this compaction was stored (false for dry runs and for calls that changed
    /// nothing: the record then describes the view but is not listed; its id still works with
    /// `POST /sessions/{id}/usage`).
    pub persisted: bool,
}

/// Compute the view to send to the model.
///
/// Before every model turn. The tier is chosen from the view's utilization; the view's middle
/// changes only when a compaction frees a worthwhile amount, so provider prompt caches keep
/// hitting. The view never exceeds the window and is always a valid request.
#[utoipa::path(post, path = "/sessions/{id}/compact", tag = "compaction",
    params(("id" = Uuid, Path, description = "The session id")),
    request_body(content = CompactBody, example = json!({"format": "openai", "mode": "auto",
        "tools": [{"type": "function", "function": {"name": "shell", "parameters": {"type": "object"}}}]})),
    responses(
        (status = 200, description = "The view and its record", body = CompactResponse),
        (status = 400, description = "Malformed JSON", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such session", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Not JSON", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "An invalid field, or tool schemas and reserved output that leave no room",
            body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Concurrent compactions kept conflicting; retry", body = Problem,
            content_type = "application/problem+json")
    ))]
async fn compact(
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
    extract::Json(body): extract::Json<CompactBody>,
) -> Result<Response, ApiError> {
    if body.overflow_retry > 2 {
        return Err(ApiError::validation(vec![FieldError::new(
            "overflow_retry",
            "must be 0, 1 or 2",
        )]));
    }
    validate_tools(&body.tools)?;
    let tokenizer = state
        .tokenizer_of(id)
        .await?
        .ok_or_else(|| ApiError::session_not_found(id))?;
    let request = CompactRequest {
        format: body.format,
        mode: body.mode,
        overflow_retry: body.overflow_retry,
        tools_tokens: tools_tokens(tokenizer, &body.tools).await?,
        // A summary must come back well before the request times out.
        summary_deadline: state.limits.request_timeout * 2 / 3,
        condensation: None,
    };
    compact_answer(&state, state.summarizer.clone(), id, request).await
}

/// Runs a compaction of session `id` and answers its view and record, serialised in one pass.
async fn compact_answer(
    state: &AppState,
    summarizer: Option<std::sync::Arc<dyn crate::summarize::Summarizer>>,
    id: Uuid,
    request: CompactRequest,
) -> Result<Response, ApiError> {
    let format = request.format;
    let answer = compaction::compact_session(
        state.store.clone(),
        summarizer,
        &state.view_cache,
        id,
        request,
        move |presented| answer(format, presented),
    )
    .await
    .map_err(|e| compact_error(e, id))?
    .map_err(|e| ApiError::Internal(format!("writing the answer: {e}")))?;
    Ok(([(header::CONTENT_TYPE, "application/json")], answer).into_response())
}

/// `GET /sessions/{id}/view` parameters.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
struct ViewParams {
    /// How to render the view (default `openai`).
    format: Option<Format>,
}

/// Read the view the next compact call would answer.
///
/// A dry run that changes nothing (for an operator key, which may not compact): the view the
/// model would receive now, without tool schemas, and the record that explains it. Where the
/// next compact call would fold the oldest items with the operator's LLM summariser, the
/// deterministic summary stands in: reading never calls a model.
#[utoipa::path(get, path = "/sessions/{id}/view", tag = "compaction",
    params(("id" = Uuid, Path, description = "The session id"), ViewParams),
    responses(
        (status = 200, description = "The view and its record (`persisted` is false)", body = CompactResponse,
            example = json!({"view": {"messages": [{"role": "user", "content": "Fix the failing test."}]},
                "record": {"id": "01936f50-1c2d-7e3f-8a9b-0c1d2e3f4a5b", "tier": "none", "acted": false},
                "persisted": false})),
        (status = 400, description = "An unknown parameter or format", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such session", body = Problem, content_type = "application/problem+json")
    ))]
async fn get_view(
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
    Query(params): Query<ViewParams>,
) -> Result<Response, ApiError> {
    let format = params.format.unwrap_or_default();
    let request = CompactRequest {
        format,
        mode: Mode::DryRun,
        overflow_retry: 0,
        tools_tokens: 0,
        summary_deadline: state.limits.request_timeout * 2 / 3,
        condensation: None,
    };
    // Reading never calls a model.
    compact_answer(&state, None, id, request).await
}

/// Take the agent's own condensation at a milestone.
///
/// No model is asked. The condensation becomes the session's one memory item, shown right after
/// the summary in every view (a later one replaces it), and the completed tool exchanges it
/// covers are archived: every answered result but those of the newest four exchanges and of
/// an active episode, each left as one line with its `observation://` reference. User messages
/// and pinned items stay. Refused while an episode is active: condense at its end.
#[utoipa::path(post, path = "/sessions/{id}/condense", tag = "compaction",
    operation_id = "record_condensation",
    params(("id" = Uuid, Path, description = "The session id")),
    request_body(content = Condensation, example = json!({"milestone": "the parser handles the new grammar",
        "completed_work": ["ported src/parse.rs to the new grammar"],
        "strategies": [{"approach": "a hand-written lexer", "outcome": "too slow; replaced by logos"}],
        "constraints": ["never change the public API"], "references": ["observation://42", "src/parse.rs"]})),
    responses(
        (status = 200, description = "The record of the condensation", body = CompactionRecord),
        (status = 400, description = "Malformed JSON", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such session", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "An episode is active", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Not JSON", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "An invalid field: at most 20 entries a list, 1,000 characters an entry, \
            2,000 tokens in all; references are observation URIs or workspace-relative paths",
            body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Concurrent compactions kept conflicting; retry", body = Problem,
            content_type = "application/problem+json")
    ))]
async fn condense(
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
    extract::Json(body): extract::Json<Condensation>,
) -> Result<Response, ApiError> {
    let tokenizer = state
        .tokenizer_of(id)
        .await?
        .ok_or_else(|| ApiError::session_not_found(id))?;
    let errors = body.validate(tokenizer);
    if !errors.is_empty() {
        return Err(ApiError::validation(errors));
    }
    let episodes = Episodes::from_events(&state.store.episode_events(id).await?);
    if let Some(active) = episodes.active() {
        return Err(ApiError::Conflict {
            detail: format!(
                "episode `{}` (started at seq {}) is active: condense once it has ended",
                active.name, active.start_seq
            ),
            head_seq: None,
            seq: Some(active.start_seq),
        });
    }
    let request = CompactRequest {
        format: Format::Raw,
        mode: Mode::Auto,
        overflow_retry: 0,
        tools_tokens: 0,
        summary_deadline: state.limits.request_timeout * 2 / 3,
        condensation: Some(std::sync::Arc::new(body)),
    };
    let answer = compaction::compact_session(
        state.store.clone(),
        state.summarizer.clone(),
        &state.view_cache,
        id,
        request,
        |presented| serde_json::to_vec(presented.record),
    )
    .await
    .map_err(|e| compact_error(e, id))?
    .map_err(|e| ApiError::Internal(format!("writing the answer: {e}")))?;
    Ok(([(header::CONTENT_TYPE, "application/json")], answer).into_response())
}

/// Tool schemas must be JSON objects.
pub(super) fn validate_tools(tools: &[Value]) -> Result<(), ApiError> {
    match tools.iter().position(|tool| !tool.is_object()) {
        Some(i) => Err(ApiError::validation(vec![FieldError::new(
            format!("tools[{i}]"),
            "a tool schema must be a JSON object",
        )])),
        None => Ok(()),
    }
}

/// The tokens the tool schemas cost, counted on the blocking pool.
pub(super) async fn tools_tokens(tokenizer: Tokenizer, tools: &[Value]) -> Result<i64, ApiError> {
    if tools.is_empty() {
        return Ok(0);
    }
    let text = serde_json::to_string(tools).unwrap_or_default();
    tokio::task::spawn_blocking(move || tokenizer.count(&text))
        .await
        .map_err(|e| ApiError::Internal(e.to_string()))
}

/// The answer's JSON: a [`CompactResponse`] with the view in `format`, serialised in one pass
/// into a buffer sized for the view (most of it) from the start.
pub(super) fn answer(format: Format, presented: Presented<'_, '_>) -> serde_json::Result<Vec<u8>> {
    let messages = presented.messages;
    let size: usize = messages.iter().map(|m| m.content.len() + 256).sum();
    let mut out = Vec::with_capacity(size + 16 * 1024);
    let response = CompactResponse {
        view: ReusingView::new(format, messages, presented.fragments),
        record: presented.record,
        persisted: presented.persisted,
    };
    serde_json::to_writer(&mut out, &response)?;
    Ok(out)
}

pub(super) fn compact_error(error: CompactError, id: Uuid) -> ApiError {
    match error {
        CompactError::NotFound => ApiError::session_not_found(id),
        CompactError::Engine(e) => {
            let (needed, ceiling) = e.need_and_ceiling();
            let error = FieldError::new("tools", e.to_string());
            ApiError::NoRoom {
                detail: error.to_string(),
                errors: vec![error],
                needed,
                ceiling,
            }
        }
        CompactError::Contended | CompactError::Busy => ApiError::Unavailable(error.to_string()),
        CompactError::Store(e) => e.into(),
        CompactError::Worker(e) => ApiError::Internal(e),
    }
}

/// A page of compaction records, newest first.
#[derive(Serialize, ToSchema)]
pub struct CompactionPage {
    pub compactions: Vec<CompactionRecord>,
    /// Pass as `cursor` for the next page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<Uuid>,
}

#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
struct CompactionListParams {
    /// Records per page, 1 to 200 (default 20).
    #[param(minimum = 1, maximum = 200)]
    limit: Option<u32>,
    /// The `next_cursor` of the previous page.
    cursor: Option<Uuid>,
}

/// List a session's compaction records, newest first.
#[utoipa::path(get, path = "/sessions/{id}/compactions", tag = "compaction",
    params(("id" = Uuid, Path, description = "The session id"), CompactionListParams),
    responses(
        (status = 200, description = "A page of records", body = CompactionPage),
        (status = 400, description = "A bad parameter", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such session", body = Problem, content_type = "application/problem+json",
            example = json!({"type": "urn:ctxd:problem:not-found", "title": "Not found",
                "status": 404, "detail": "session 01936f4e-8a7b-7c3d-9e2f-4a5b6c7d8e9f does not exist", "instance": "/sessions/01936f4e-8a7b-7c3d-9e2f-4a5b6c7d8e9f/compactions",
                "request_id": "3f0c2a9e-5b1d-4c8e-9f7a-2d6b8e4c1a07"}))
    ))]
async fn list_compactions(
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
    Query(params): Query<CompactionListParams>,
) -> Result<Json<CompactionPage>, ApiError> {
    let limit = extract::page_limit(params.limit, DEFAULT_PAGE, MAX_PAGE)?;
    state
        .store
        .get_session(id)
        .await?
        .ok_or_else(|| ApiError::session_not_found(id))?;
    let mut compactions = state
        .store
        .list_compactions(id, params.cursor, limit + 1)
        .await?;
    let next_cursor = if compactions.len() > limit as usize {
        compactions.truncate(limit as usize);
        compactions.last().map(|r| r.id)
    } else {
        None
    };
    Ok(Json(CompactionPage {
        compactions,
        next_cursor,
    }))
}

/// A compaction record's outline: when it ran, at which tier, and how many tokens and items it
/// left; what the chart of a session draws, without the record's membership and summary.
#[derive(Debug, Serialize, ToSchema)]
pub struct CompactionOutline {
    pub id: Uuid,
    pub created_at: chrono::DateTime<chrono::Utc>,
    pub head_seq: i64,
    pub trigger: Trigger,
    pub tier: Tier,
    pub acted: bool,
    pub tokens_before: i64,
    pub tokens_after: i64,
    pub budget: i64,
    /// How many items it offloaded, summarised and evicted.
    pub offloaded: usize,
    pub summarized: usize,
    pub evicted: usize,
}

impl From<&CompactionRecord> for CompactionOutline {
    fn from(r: &CompactionRecord) -> Self {
        Self {
            id: r.id,
            created_at: r.created_at,
            head_seq: r.head_seq,
            trigger: r.trigger,
            tier: r.tier,
            acted: r.acted,
            tokens_before: r.tokens_before,
            tokens_after: r.tokens_after,
            budget: r.budget,
            offloaded: r.offloaded.len(),
            summarized: r.summarized_seqs.len(),
            evicted: r.evicted_seqs.len(),
        }
    }
}

/// A page of compaction outlines.
#[derive(Serialize, ToSchema)]
pub struct CompactionOutlinePage {
    pub compactions: Vec<CompactionOutline>,
    /// Pass as `cursor` for the next page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<Uuid>,
}

/// List outlines of a session's compaction records, newest first: the same pages as the
/// record list, a few dozen bytes a record instead of its membership and summary (what a
/// chart of the session needs).
#[utoipa::path(get, path = "/sessions/{id}/compactions/outline", tag = "compaction",
    params(("id" = Uuid, Path, description = "The session id"), CompactionListParams),
    responses(
        (status = 200, description = "A page of outlines", body = CompactionOutlinePage),
        (status = 400, description = "A bad parameter", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such session", body = Problem, content_type = "application/problem+json",
            example = json!({"type": "urn:ctxd:problem:not-found", "title": "Not found",
                "status": 404, "detail": "session 01936f4e-8a7b-7c3d-9e2f-4a5b6c7d8e9f does not exist", "instance": "/sessions/01936f4e-8a7b-7c3d-9e2f-4a5b6c7d8e9f/compactions/outline",
                "request_id": "3f0c2a9e-5b1d-4c8e-9f7a-2d6b8e4c1a07"}))
    ))]
async fn list_compaction_outlines(
    state: State<AppState>,
    id: Path<Uuid>,
    params: Query<CompactionListParams>,
) -> Result<Json<CompactionOutlinePage>, ApiError> {
    let Json(page) = list_compactions(state, id, params).await?;
    Ok(Json(CompactionOutlinePage {
        compactions: page
            .compactions
            .iter()
            .map(CompactionOutline::from)
            .collect(),
        next_cursor: page.next_cursor,
    }))
}

/// Get one compaction record.
#[utoipa::path(get, path = "/sessions/{id}/compactions/{cid}", tag = "compaction",
    params(("id" = Uuid, Path, description = "The session id"),
        ("cid" = Uuid, Path, description = "The compaction id")),
    responses(
        (status = 200, description = "The record", body = CompactionRecord),
        (status = 400, description = "An id is not a UUID", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such session or compaction", body = Problem,
            content_type = "application/problem+json",
            example = json!({"type": "urn:ctxd:problem:not-found", "title": "Not found",
                "status": 404, "detail": "session 01936f4e-8a7b-7c3d-9e2f-4a5b6c7d8e9f has no compaction 01936f50-1c2d-7e3f-8a9b-0c1d2e3f4a5b", "instance": "/sessions/01936f4e-8a7b-7c3d-9e2f-4a5b6c7d8e9f/compactions/01936f50-1c2d-7e3f-8a9b-0c1d2e3f4a5b",
                "request_id": "3f0c2a9e-5b1d-4c8e-9f7a-2d6b8e4c1a07"}))
    ))]
async fn get_compaction(
    State(state): State<AppState>,
    Path((id, cid)): Path<(Uuid, Uuid)>,
) -> Result<Json<CompactionRecord>, ApiError> {
    state
        .store
        .get_compaction(id, cid)
        .await?
        .map(Json)
        .ok_or_else(|| ApiError::NotFound(format!("session {id} has no compaction {cid}")))
}

/// The provider's real input-token count for a view.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UsageBody {
    /// The provider's `input_tokens` (`prompt_tokens`) for the request built from the view:
    /// between 0.25 and 4 times ctxd's count of it.
    #[schema(minimum = 1)]
    pub input_tokens: i64,
    /// The `record.id` of the compact answer whose view was sent (its `input_tokens_estimate`
    /// is compared); any answer's id works, stored or not. Give this or `view_tokens`, not
    /// both.
    pub compaction_id: Option<Uuid>,
    /// Or: ctxd's own count of the request that was sent.
    #[schema(minimum = 1)]
    pub view_tokens: Option<i64>,
}

#[derive(Serialize, ToSchema)]
pub struct UsageResponse {
    /// The factor now applied to this session's message token counts: the average of the
    /// provider's tokens per ctxd token, between 1 and 4 (an average below 1 is applied as 1,
    /// so the budget stays conservative).
    #[schema(minimum = 1.0, maximum = 4.0)]
    pub calibration: f64,
}

/// Report the provider's real token count for a view.
///
/// ctxd keeps a per-session calibration ratio (an exponential average of provider count over
/// its own) and applies it to utilization, between 1 and 4, so a tokenizer that undercounts a
/// model does not push the view over the real window. A sample whose ratio (`input_tokens` over
/// ctxd's count) is below 0.25 or above 4 is refused with a 422 and changes nothing.
#[utoipa::path(post, path = "/sessions/{id}/usage", tag = "compaction",
    params(("id" = Uuid, Path, description = "The session id")),
    request_body(content = UsageBody, examples(
        ("compaction" = (summary = "The count for a compaction's view",
            value = json!({"input_tokens": 51234,
                "compaction_id": "01936f4e-8a7b-7c3d-9e2f-4a5b6c7d8e9f"}))),
        ("view_tokens" = (summary = "The count for a view, with ctxd's own count of it",
            value = json!({"input_tokens": 51234, "view_tokens": 48100})))
    )),
    responses(
        (status = 200, description = "The calibration now applied", body = UsageResponse,
            example = json!({"calibration": 1.065})),
        (status = 400, description = "Malformed JSON", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such session or compaction", body = Problem,
            content_type = "application/problem+json"),
        (status = 415, description = "Not JSON", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Counts that are not positive, a ratio of input_tokens to ctxd's count outside 0.25 to 4, or neither or both of compaction_id and view_tokens",
            body = Problem, content_type = "application/problem+json")
    ))]
async fn record_usage(
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
    extract::Json(body): extract::Json<UsageBody>,
) -> Result<Json<UsageResponse>, ApiError> {
    if body.input_tokens <= 0 {
        return Err(ApiError::validation(vec![FieldError::new(
            "input_tokens",
            "must be a positive count",
        )]));
    }
    state
        .store
        .get_session(id)
        .await?
        .ok_or_else(|| ApiError::session_not_found(id))?;
    let ours = match (body.compaction_id, body.view_tokens) {
        (Some(cid), None) => match state.store.get_compaction(id, cid).await? {
            Some(record) => record.input_tokens_estimate,
            // A compact answer that was not stored carries its count in its id.
            None => unrecorded_estimate(cid).ok_or_else(|| {
                ApiError::NotFound(format!("session {id} has no compaction {cid}"))
            })?,
        },
        (None, Some(tokens)) if tokens > 0 => tokens,
        (None, Some(_)) => {
            return Err(ApiError::validation(vec![FieldError::new(
                "view_tokens",
                "must be a positive count",
            )]))
        }
        _ => {
            return Err(ApiError::validation(vec![FieldError::new(
                "compaction_id",
                "give exactly one of compaction_id and view_tokens",
            )]))
        }
    };
    if calibration_sample(body.input_tokens, ours).is_none() {
        return Err(ApiError::validation(vec![FieldError::new(
            "input_tokens",
            format!(
                "{} is {:.3} times ctxd's count of {ours} tokens: the ratio must be between \
                 {MIN_CALIBRATION_SAMPLE} and {MAX_CALIBRATION_SAMPLE}",
                body.input_tokens,
                body.input_tokens as f64 / ours as f64
            ),
        )]));
    }
    let calibration = compaction::record_usage(state.store.as_ref(), id, body.input_tokens, ours)
        .await
        .map_err(|e| compact_error(e, id))?;
    Ok(Json(UsageResponse { calibration }))
}
