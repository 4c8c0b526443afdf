//! `/sessions/{id}/events`: the append-only log, appended in batches and read in pages.

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};
use uuid::Uuid;

use super::error::{ApiError, Problem};
use super::extract;
use super::AppState;
use crate::domain::append;
use crate::domain::event::{Event, EventInput};

const DEFAULT_PAGE: u32 = 100;
const MAX_PAGE: u32 = 1_000;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(append_events, list_events))
}

/// The body of an append.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AppendRequest {
    /// The events to append, in order: at least one, and at most the server's batch limit
    /// (1000 by default; a larger batch is a 413).
    #[schema(min_items = 1, value_type = Vec<super::event_schema::EventInputSchema>)]
    pub events: Vec<EventInput>,
    /// Optimistic concurrency: the head seq the client believes the session has. A mismatch is a
    /// 409 carrying the current `head_seq`.
    pub expected_seq: Option<i64>,
}

/// What happened to one event of the batch.
#[derive(Serialize, ToSchema)]
pub struct AppendedEvent {
    pub seq: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Token cost with the session's tokenizer.
    pub tokens: i64,
    /// True when this event was already stored under its `id` (a retry): nothing was written.
    pub replayed: bool,
}

/// The answer to an append.
#[derive(Serialize, ToSchema)]
pub struct AppendResponse {
    pub session_id: Uuid,
    /// The session's head seq after the append.
    pub head_seq: i64,
    /// One entry per event of the batch, in batch order.
    pub events: Vec<AppendedEvent>,
}

/// A page of the log.
#[derive(Serialize, ToSchema)]
pub struct EventPage {
    #[schema(value_type = Vec<super::event_schema::StoredEvent>)]
    pub events: Vec<Event>,
    /// Pass as `after_seq` for the next page; absent when this page reaches the head.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_after_seq: Option<i64>,
    /// The session's head seq when the page was read.
    pub head_seq: i64,
}

#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
struct EventListParams {
    /// Only events with a greater seq (default 0: from the start).
    #[param(minimum = 0)]
    after_seq: Option<i64>,
    /// Events per page, 1 to 1000 (default 100).
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<u32>,
}

/// Append a batch of events.
///
/// The batch is validated as a whole and written in one transaction, or not at all. Events with
/// a client `id` already stored are acknowledged with their stored seq (idempotent retries);
/// the same `id` with different content is a 409. Tool results must answer an unanswered call
/// issued earlier in the session or batch.
#[utoipa::path(post, path = "/sessions/{id}/events", tag = "events",
    params(("id" = Uuid, Path, description = "The session id")),
    request_body(content = AppendRequest, example = json!({
        "expected_seq": 0,
        "events": [
            {"id": "m1", "type": "message", "role": "user", "content": "List the files in src/"},
            {"id": "m2", "type": "message", "role": "assistant", "content": "",
                "tool_calls": [{"id": "call_1", "name": "shell", "arguments": "{\"cmd\":\"ls src\"}"}]},
            {"id": "m3", "type": "message", "role": "tool", "tool_call_id": "call_1",
                "name": "shell", "content": "main.rs\nlib.rs"}
        ]})),
    responses(
        (status = 201, description = "Appended", body = AppendResponse, example = json!({
            "session_id": "01936f4e-8a7b-7c3d-9e2f-4a5b6c7d8e9f", "head_seq": 3,
            "events": [
                {"seq": 1, "id": "m1", "tokens": 12, "replayed": false},
                {"seq": 2, "id": "m2", "tokens": 19, "replayed": false},
                {"seq": 3, "id": "m3", "tokens": 10, "replayed": false}]})),
        (status = 200, description = "Every event was already stored (a retry); nothing was written",
            body = AppendResponse),
        (status = 400, description = "Malformed JSON", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such session", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`expected_seq` is not the head (the problem carries `head_seq`), \
            or an `id` is stored with other content (the problem carries its `seq`)",
            body = Problem, content_type = "application/problem+json",
            example = json!({"type": "urn:ctxd:problem:conflict", "title": "Conflict", "status": 409,
                "detail": "expected_seq is 3 but the session's head is at seq 5",
                "instance": "/sessions/01936f4e-8a7b-7c3d-9e2f-4a5b6c7d8e9f/events",
                "request_id": "3f0c…", "head_seq": 5})),
        (status = 413, description = "Too many events or too many bytes", body = Problem,
            content_type = "application/problem+json"),
        (status = 415, description = "Not JSON", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "An invalid event; `errors` names each event's index and field",
            body = Problem, content_type = "application/problem+json",
            example = json!({"type": "urn:ctxd:problem:validation-failed", "title": "Validation failed",
                "status": 422,
                "detail": "events[2].tool_call_id: `call_9` matches no call issued earlier in this session or batch",
                "instance": "/sessions/01936f4e-8a7b-7c3d-9e2f-4a5b6c7d8e9f/events",
                "request_id": "3f0c…",
                "errors": [{"index": 2, "field": "tool_call_id",
                    "message": "`call_9` matches no call issued earlier in this session or batch"}]}))
    ))]
async fn append_events(
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
    extract::Json(request): extract::Json<AppendRequest>,
) -> Result<(StatusCode, Json<AppendResponse>), ApiError> {
    let max = state.limits.max_batch_events;
    if request.events.len() > max {
        return Err(ApiError::PayloadTooLarge(format!(
            "the batch has {} events; the limit is {max} per request",
            request.events.len()
        )));
    }
    let mut events = Vec::with_capacity(request.events.len());
    let mut errors = Vec::new();
    for (index, input) in request.events.into_iter().enumerate() {
        match input.validate(index) {
            Ok(event) => events.push(event),
            Err(e) => errors.extend(e),
        }
    }
    if !errors.is_empty() {
        return Err(ApiError::validation(errors));
    }
    for (index, event) in events.iter().enumerate() {
        extract::event_within(
            &format!("events[{index}]"),
            &event.body,
            state.limits.max_event_bytes,
        )?;
    }
    let tokenizer = state
        .tokenizer_of(id)
        .await?
        .ok_or_else(|| ApiError::session_not_found(id))?;

    let batch = append::count(tokenizer, events)
        .await
        .map_err(|e| ApiError::Internal(format!("token counting failed: {e}")))?;
    let outcome = state
        .store
        .append_events(id, &batch, request.expected_seq)
        .await
        .map_err(|e| match e {
            crate::store::AppendError::SessionNotFound => ApiError::session_not_found(id),
            other => other.into(),
        })?;
    crate::metrics::METRICS.append(outcome.acks.iter().filter(|a| !a.replayed).count());
    let status = if outcome.acks.iter().all(|a| a.replayed) {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    Ok((
        status,
        Json(AppendResponse {
            session_id: id,
            head_seq: outcome.head_seq,
            events: outcome
                .acks
                .into_iter()
                .map(|a| AppendedEvent {
                    seq: a.seq,
                    id: a.id,
                    tokens: a.tokens,
                    replayed: a.replayed,
                })
                .collect(),
        }),
    ))
}

/// Read the log, oldest first, in pages.
#[utoipa::path(get, path = "/sessions/{id}/events", tag = "events",
    params(("id" = Uuid, Path, description = "The session id"), EventListParams),
    responses(
        (status = 200, description = "A page of events", body = EventPage, example = json!({
            "events": [{"seq": 1, "id": "m1", "type": "message", "role": "user",
                "content": "List the files in src/", "pinned": false, "tokens": 12,
                "created_at": "2026-11-30T12:00:00Z"}],
            "next_after_seq": 1, "head_seq": 3})),
        (status = 400, description = "A bad parameter", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such session", body = Problem, content_type = "application/problem+json")
    ))]
async fn list_events(
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
    Query(params): Query<EventListParams>,
) -> Result<Json<EventPage>, ApiError> {
    let after_seq = params.after_seq.unwrap_or(0);
    if after_seq < 0 {
        return Err(ApiError::BadRequest("after_seq must be 0 or more".into()));
    }
    let limit = extract::page_limit(params.limit, DEFAULT_PAGE, MAX_PAGE)?;
    // Events first, then the head: the head is then never behind the page.
    let events = state.store.list_events(id, after_seq, limit).await?;
    let session = state
        .store
        .get_session(id)
        .await?
        .ok_or_else(|| ApiError::session_not_found(id))?;
    let next_after_seq = events
        .last()
        .map(|e| e.seq)
        .filter(|&last| last < session.head_seq);
    Ok(Json(EventPage {
        events,
        next_after_seq,
        head_seq: session.head_seq,
    }))
}
