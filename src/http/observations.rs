//! Observations and the recall tool: the exact content behind every reference a view shows,
//! by seq or client event id, as a slice (`GET …/observations/…`) or as the tool result a model
//! gets back (`POST …/recall`), and the tool schema agents give their model.

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
use crate::domain::event::Event;
use crate::domain::observation::{
    parse_reference, shorten, EventRef, Slice, DEFAULT_LIMIT, MAX_LIMIT, MAX_URI_CHARS, RECALL_TOOL,
};
use crate::domain::FieldError;
use crate::engine::view;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(observation))
        .routes(routes!(recall))
        .routes(routes!(recall_tool))
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
/// The content is the event's text; an assistant turn's tool calls follow it, each on a line
/// `[tool call <name> <id>] ` and then its arguments as sent (an archived call's reference
/// points there). Offsets and lengths count characters, never splitting one. The event is named by its seq
/// (all digits) or by the `id` its client gave it at append (anything else; a client id made
/// only of digits is reached by its seq).
#[utoipa::path(get, path = "/sessions/{id}/observations/{seq_or_event_id}", tag = "context",
    operation_id = "get_observation",
    params(("id" = Uuid, Path, description = "The session id"),
        ("seq_or_event_id" = String, Path,
            description = "The event's seq, as in `observation://<seq>`, or its client event id"),
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
    Path((id, seq_or_event_id)): Path<(Uuid, String)>,
    Query(params): Query<SliceParams>,
) -> Result<Json<Observation>, ApiError> {
    // An i64, like every other count in the API, so that the document's bounds (int64, at
    // least 0) are the ones the server holds.
    let offset = params.offset.unwrap_or(0);
    if offset < 0 {
        return Err(ApiError::BadRequest("offset must be at least 0".into()));
    }
    let offset = usize::try_from(offset).unwrap_or(usize::MAX);
    let limit = extract::page_limit(params.limit, DEFAULT_LIMIT, MAX_LIMIT)?;
    let event = find_event(&state, id, &seq_or_event_id).await?;
    let text = view::recall_text(&event);
    let slice = Slice::of(&text, offset, limit);
    Ok(Json(Observation {
        seq: event.seq,
        uri: view::observation_uri(event.seq),
        offset,
        length: slice.length,
        total_chars: slice.total_chars,
        content: slice.text.to_owned(),
        next_offset: slice.next_offset(),
    }))
}

/// The event `seq_or_event_id` names in a session: 404 when the session or the event does
/// not exist, saying which.
async fn find_event(state: &AppState, id: Uuid, seq_or_event_id: &str) -> Result<Event, ApiError> {
    let found = match EventRef::parse(seq_or_event_id) {
        Some(EventRef::Seq(seq)) => state.store.get_event(id, seq).await?,
        Some(EventRef::ClientId(client_id)) => {
            state.store.get_event_by_client_id(id, &client_id).await?
        }
        None => None,
    };
    if let Some(event) = found {
        return Ok(event);
    }
    if state.store.get_session(id).await?.is_none() {
        return Err(ApiError::session_not_found(id));
    }
    Err(ApiError::NotFound(format!(
        "session {id} has no event `{}` (by seq or client event id)",
        shorten(seq_or_event_id, 64)
    )))
}

/// A recall tool call's arguments, passed on unchanged.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RecallBody {
    /// The reference as the view shows it: `observation://<seq or client event id>`,
    /// optionally with `?offset=N&limit=M`. In the id, `%XX` escapes are decoded (an id with `?`
    /// or `%` in it is written `%3F`, `%25`); all digits are a seq.
    #[schema(
        max_length = 4096,
        pattern = "^observation://",
        example = "observation://42?offset=4000"
    )]
    pub uri: String,
    /// First character; when given, it wins over the uri's `offset` (default: the uri's, else 0).
    #[schema(minimum = 0)]
    pub offset: Option<i64>,
    /// Most characters to answer, 1 to 200000; when given, it wins over the uri's `limit`
    /// (default: the uri's, else 4000).
    #[schema(minimum = 1, maximum = 200000)]
    pub limit: Option<i64>,
}

/// A recall's answer: `content` is the tool result to give the model as it is.
#[derive(Serialize, ToSchema)]
pub struct Recall {
    pub seq: i64,
    /// The canonical reference, `observation://<seq>`, however the event was named.
    pub uri: String,
    /// Character offset of the slice.
    pub offset: usize,
    /// Characters in the slice: the first `length` characters of `content`.
    pub length: usize,
    /// Characters in the whole item.
    pub total_chars: usize,
    /// The offset of the next slice; absent when this slice reaches the end.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_offset: Option<usize>,
    /// The tool result: the slice, then, when more follows, a newline and one line such as
    /// `[characters 0–4000 of 12000; recall observation://42?offset=4000 for the rest]`,
    /// whose reference the tool takes as it is. Nothing at the offset (past the end, or an item
    /// with no text) is one bracketed sentence saying so.
    pub content: String,
}

/// Answer a recall tool call.
///
/// Pass the model's `recall_observation` arguments unchanged; give the model `content` as the
/// call's result. Offsets and lengths count characters. `offset` and `limit` in the body win
/// over those in the uri's query.
#[utoipa::path(post, path = "/sessions/{id}/recall", tag = "context",
    operation_id = "recall_observation",
    params(("id" = Uuid, Path, description = "The session id")),
    request_body(content = RecallBody, examples(
        ("reference" = (summary = "A reference from a preview, as the model passes it",
            value = json!({"uri": "observation://3?offset=1200"}))),
        ("fields" = (summary = "The offset and limit as fields",
            value = json!({"uri": "observation://3", "offset": 1200, "limit": 2000}))),
        ("client id" = (summary = "An event named by its client id",
            value = json!({"uri": "observation://m3"})))
    )),
    responses(
        (status = 200, description = "The tool result", body = Recall, example = json!({
            "seq": 42, "uri": "observation://42", "offset": 4000, "length": 4000,
            "total_chars": 12000, "next_offset": 8000,
            "content": "…\n[characters 4000–8000 of 12000; recall observation://42?offset=8000 for the rest]"})),
        (status = 400, description = "Malformed JSON", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such session or event", body = Problem,
            content_type = "application/problem+json"),
        (status = 415, description = "Not JSON", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "A uri that is not an observation reference, or an offset or limit out of range",
            body = Problem, content_type = "application/problem+json")
    ))]
async fn recall(
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
    extract::Json(body): extract::Json<RecallBody>,
) -> Result<Json<Recall>, ApiError> {
    let invalid =
        |field: &str, message: String| ApiError::validation(vec![FieldError::new(field, message)]);
    let reference = parse_reference(&body.uri).map_err(|e| invalid("uri", e.to_string()))?;
    let offset = match body.offset {
        Some(offset) => {
            usize::try_from(offset).map_err(|_| invalid("offset", "must be at least 0".into()))?
        }
        None => reference.offset.unwrap_or(0),
    };
    let limit = match body.limit {
        Some(limit) => usize::try_from(limit)
            .ok()
            .filter(|l| (1..=MAX_LIMIT).contains(l))
            .ok_or_else(|| invalid("limit", format!("must be from 1 to {MAX_LIMIT}")))?,
        None => reference.limit.unwrap_or(DEFAULT_LIMIT),
    };
    let event = find_event(&state, id, &reference.id).await?;
    let text = view::recall_text(&event);
    let slice = Slice::of(&text, offset, limit);
    Ok(Json(Recall {
        seq: event.seq,
        uri: view::observation_uri(event.seq),
        offset,
        length: slice.length,
        total_chars: slice.total_chars,
        next_offset: slice.next_offset(),
        content: slice.tool_result(event.seq, limit),
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
/// When the model calls it, the agent answers with `POST /sessions/{id}/recall`, passing the
/// call's arguments unchanged, and gives the model the answer's `content` as the result.
#[utoipa::path(get, path = format!("/tools/{RECALL_TOOL}"), tag = "context",
    operation_id = "get_recall_tool",
    params(ToolParams),
    responses(
        (status = 200, description = "The tool schema", body = Object, example = json!({
            "type": "function", "function": {"name": "recall_observation",
                "description": "Recall the exact text of content offloaded from this conversation…",
                "parameters": {"type": "object", "properties": {
                    "uri": {"type": "string"}, "offset": {"type": "integer"},
                    "limit": {"type": "integer"}}, "required": ["uri"]}}})),
        (status = 400, description = "An unknown format", body = Problem, content_type = "application/problem+json")
    ))]
async fn recall_tool(Query(params): Query<ToolParams>) -> Result<Json<Value>, ApiError> {
    let description = format!(
        "Recall the exact text of content offloaded from this conversation. Pass a reference \
         exactly as the conversation shows it, e.g. observation://42 or \
         observation://42?offset=4000 (an offset in the reference says where the shown part \
         ended). Returns up to {DEFAULT_LIMIT} characters (or `limit`); when more remains, the \
         result ends with a line naming the reference that recalls the rest."
    );
    let parameters = json!({
        "type": "object",
        "properties": {
            "uri": {"type": "string", "maxLength": MAX_URI_CHARS,
                "description": "The reference as shown, e.g. observation://42?offset=4000"},
            "offset": {"type": "integer", "minimum": 0,
                "description": "First character; overrides the reference's offset (default: the reference's, else 0)"},
            "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT,
                "description": format!("Most characters to return (default {DEFAULT_LIMIT})")}
        },
        "required": ["uri"]
    });
    match params.format.as_deref().unwrap_or("openai") {
        "openai" => Ok(Json(json!({
            "type": "function",
            "function": {"name": RECALL_TOOL, "description": description, "parameters": parameters}
        }))),
        "anthropic" => Ok(Json(json!({
            "name": RECALL_TOOL, "description": description, "input_schema": parameters
        }))),
        other => Err(ApiError::BadRequest(format!(
            "unknown format `{}`: use openai or anthropic",
            shorten(other, 32)
        ))),
    }
}
