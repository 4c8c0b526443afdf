//! `/sessions/{id}/turn`: one call per model turn, in the provider's own shapes.

use axum::extract::{Path, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};
use uuid::Uuid;

use super::compaction::{answer, compact_error, tools_tokens, validate_tools};
use super::error::{ApiError, Problem};
use super::extract;
use super::AppState;
use crate::compaction::CompactRequest;
use crate::domain::compaction::{CompactionRecord, Mode};
use crate::domain::FieldError;
use crate::engine::render::Format;
use crate::turn::{self, Appended, Deps, Turn, TurnError};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(append_turn))
}

/// The body of a turn.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TurnBody {
    /// The provider shape of `messages` and of the view answered (default `openai`).
    #[serde(default)]
    pub format: Format,
    /// The conversation in the provider's shape: OpenAI chat `messages`, Anthropic `messages`,
    /// or OpenAI Responses `input` items. The full history, the last view ctxd answered plus
    /// the new messages, or only the new messages.
    #[schema(value_type = Vec<Object>)]
    pub messages: Vec<Value>,
    /// Anthropic's `system` (a string or text blocks); the other formats carry it in `messages`.
    #[schema(value_type = Option<Object>)]
    pub system: Option<Value>,
    /// The tool schemas sent with the request: they count against the window.
    #[serde(default)]
    #[schema(value_type = Vec<Object>)]
    pub tools: Vec<Value>,
    /// The provider's `usage` for the previous view this session answered, as the provider
    /// returned it: it calibrates ctxd's token counts.
    pub usage: Option<ProviderUsage>,
    #[serde(default)]
    pub mode: Mode,
}

/// A provider's `usage` object; fields it does not name are ignored.
#[derive(Deserialize, ToSchema)]
pub struct ProviderUsage {
    /// OpenAI chat completions: the request's input tokens.
    #[schema(minimum = 1)]
    pub prompt_tokens: Option<i64>,
    /// OpenAI Responses: the input tokens; Anthropic: those not read from or written to cache.
    #[schema(minimum = 0)]
    pub input_tokens: Option<i64>,
    /// Anthropic: input tokens written to the cache.
    #[schema(minimum = 0)]
    pub cache_creation_input_tokens: Option<i64>,
    /// Anthropic: input tokens read from the cache.
    #[schema(minimum = 0)]
    pub cache_read_input_tokens: Option<i64>,
}

impl ProviderUsage {
    /// The request's whole input, however the provider splits it.
    fn input_tokens(&self) -> Option<i64> {
        let cached = self.cache_creation_input_tokens.unwrap_or(0).max(0)
            + self.cache_read_input_tokens.unwrap_or(0).max(0);
        match (self.prompt_tokens, self.input_tokens) {
            (Some(prompt), _) => Some(prompt),
            (None, Some(input)) => Some(input + cached),
            (None, None) => None,
        }
    }
}

/// The view to send, the record that explains it, and what this turn appended (the compact
/// answer and three fields).
#[derive(Serialize, ToSchema)]
#[allow(dead_code)] // The answer is written by `finish`; this describes it.
pub struct TurnResponse {
    /// The request body to send, in the asked format: `{messages}` for OpenAI, `{input}` for
    /// OpenAI Responses, `{system, messages}` for Anthropic, `{items}` for raw.
    #[schema(value_type = Object)]
    view: Value,
    record: CompactionRecord,
    /// Whether this compaction was stored (see the compact answer).
    persisted: bool,
    /// The seqs of the events this turn appended, in order (empty when nothing was new).
    appended: Vec<i64>,
    /// True when an earlier try of this same call appended them: nothing was written.
    replayed: bool,
    /// The calibration applied after this turn's `usage`, when it gave one.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1.0, maximum = 4.0)]
    calibration: Option<f64>,
}

/// Append this turn's new messages and get the view to send.
///
/// One call per model turn, in the provider's own shapes. ctxd reads `messages` as events and
/// appends exactly what is new: the list may be the agent's full history (the stored
/// conversation is a prefix of it), the last view ctxd answered plus new messages, or only the
/// new messages. A list that starts like the stored conversation or the last view but departs
/// from it is a 409 naming the first message that diverges. Retrying the same call appends
/// nothing twice. The new messages stay appended even when the compaction that follows fails.
///
/// The answer is the compact answer (`view`, `record`, `persisted`) plus the seqs appended:
/// send `view` as the request body (`client.chat.completions.create(model=..., **view)`).
#[utoipa::path(post, path = "/sessions/{id}/turn", tag = "compaction",
    params(("id" = Uuid, Path, description = "The session id")),
    request_body(content = TurnBody, example = json!({"format": "openai",
        "messages": [
            {"role": "system", "content": "You are a coding agent."},
            {"role": "user", "content": "List the files in src/"}],
        "tools": [{"type": "function", "function": {"name": "shell", "parameters": {"type": "object"}}}]})),
    responses(
        (status = 200, description = "The view, its record and the seqs appended", body = TurnResponse),
        (status = 400, description = "Malformed JSON", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such session", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`messages` diverges from the stored conversation and from the last view (the detail names the message), or another writer kept appending meanwhile",
            body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Too many messages or too many bytes", body = Problem,
            content_type = "application/problem+json"),
        (status = 415, description = "Not JSON", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "A message ctxd cannot read (named by index and field), a tool result that answers no call, a usage outside 0.25 to 4 times ctxd's count of the previous view, or tool schemas that leave no room",
            body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Concurrent compactions kept conflicting; the new messages are appended, retry", body = Problem,
            content_type = "application/problem+json")
    ))]
async fn append_turn(
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
    extract::Json(body): extract::Json<TurnBody>,
) -> Result<Response, ApiError> {
    let max = state.limits.max_batch_events;
    if body.messages.len() > max {
        return Err(ApiError::PayloadTooLarge(format!(
            "`messages` has {} entries; the limit is {max} per request",
            body.messages.len()
        )));
    }
    for (index, message) in body.messages.iter().enumerate() {
        extract::event_within(
            &format!("messages[{index}]"),
            message,
            state.limits.max_event_bytes,
        )?;
    }
    validate_tools(&body.tools)?;
    let usage_input_tokens = match &body.usage {
        None => None,
        Some(usage) => match usage.input_tokens() {
            Some(tokens) if tokens > 0 => Some(tokens),
            _ => {
                return Err(ApiError::validation(vec![FieldError::new(
                    "usage",
                    "needs a positive prompt_tokens (OpenAI chat) or input_tokens (Responses, \
                     Anthropic)",
                )]))
            }
        },
    };
    let tokenizer = state
        .tokenizer_of(id)
        .await?
        .ok_or_else(|| ApiError::session_not_found(id))?;
    let turn = Turn {
        format: body.format,
        system: body.system,
        messages: body.messages,
        compact: CompactRequest {
            format: body.format,
            mode: body.mode,
            overflow_retry: 0,
            tools_tokens: tools_tokens(tokenizer, &body.tools).await?,
            summary_deadline: state.limits.request_timeout * 2 / 3,
            condensation: None,
        },
        usage_input_tokens,
    };
    let deps = Deps {
        store: state.store.clone(),
        summarizer: state.summarizer.clone(),
        cache: &state.view_cache,
        ledgers: &state.ledgers,
    };
    let format = body.format;
    // The compact answer is written as the view is made; the turn's fields are added after.
    let (appended, answer) =
        turn::take_turn(deps, id, turn, move |presented| answer(format, presented))
            .await
            .map_err(|e| turn_error(e, id))?;
    let answer = answer.map_err(|e| ApiError::Internal(format!("writing the answer: {e}")))?;
    let out = finish(answer, &appended)
        .map_err(|e| ApiError::Internal(format!("writing the answer: {e}")))?;
    Ok(([(header::CONTENT_TYPE, "application/json")], out).into_response())
}

/// Adds the turn's own fields to the compact answer's JSON object.
fn finish(mut answer: Vec<u8>, appended: &Appended) -> serde_json::Result<Vec<u8>> {
    #[derive(Serialize)]
    struct Fields<'a> {
        appended: &'a [i64],
        replayed: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        calibration: Option<f64>,
    }
    let fields = serde_json::to_vec(&Fields {
        appended: &appended.seqs,
        replayed: appended.replayed,
        calibration: appended.calibration,
    })?;
    // `{...}` + `{"appended":...}` -> `{...,"appended":...}`
    answer.pop();
    answer.push(b',');
    answer.extend_from_slice(&fields[1..]);
    Ok(answer)
}

fn turn_error(error: TurnError, id: Uuid) -> ApiError {
    match error {
        TurnError::Invalid(errors) => ApiError::validation(errors),
        TurnError::Diverges { message, .. } => ApiError::Conflict {
            detail: message,
            head_seq: None,
            seq: None,
        },
        TurnError::Contended => ApiError::Unavailable(error.to_string()),
        TurnError::Append(e) => match ApiError::from(e) {
            ApiError::NotFound(_) => ApiError::session_not_found(id),
            other => other,
        },
        TurnError::Compact { error, .. } | TurnError::Before(error) => compact_error(error, id),
    }
}
