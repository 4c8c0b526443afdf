//! `/sessions`: create, list, inspect and delete agent conversations.

use axum::extract::{Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::{Extension, Json};
use serde::Serialize;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};
use uuid::Uuid;

use super::auth::Caller;
use super::error::{ApiError, Problem};
use super::extract;
use super::AppState;
use crate::domain::session::{
    validate_labels, NewSession, Session, MAX_LABELS, MAX_LABEL_KEY_CHARS, MAX_LABEL_VALUE_CHARS,
};
use crate::domain::FieldError;
use crate::store::SessionFilter;

const DEFAULT_PAGE: u32 = 50;
const MAX_PAGE: u32 = 1_000;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_session, list_sessions))
        .routes(routes!(get_session, delete_session))
}

/// A page of sessions, newest first.
#[derive(Serialize, ToSchema)]
pub struct SessionPage {
    pub sessions: Vec<Session>,
    /// Pass as `cursor` to get the next page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// Gives the `label` filter of `GET /sessions` the bounds of the labels it matches, which the
/// list holds (a filter out of them is a 422): each `key=value` with a key of 1 to 128
/// characters and a value of at most 1,024, no NUL, at most 64 labels.
pub(super) fn document_label_filter(api: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, Schema, Type};
    use utoipa::openapi::RefOr;
    let parameters = api
        .paths
        .paths
        .get_mut("/sessions")
        .and_then(|item| item.get.as_mut())
        .and_then(|operation| operation.parameters.as_mut());
    for parameter in parameters.into_iter().flatten() {
        if parameter.name == "label" {
            let label = ObjectBuilder::new()
                .schema_type(Type::String)
                .pattern(Some(format!(
                "^[^=\\u0000]{{1,{MAX_LABEL_KEY_CHARS}}}=[^\\u0000]{{0,{MAX_LABEL_VALUE_CHARS}}}$"
            )));
            let labels = ArrayBuilder::new().items(label).max_items(Some(MAX_LABELS));
            parameter.schema = Some(RefOr::T(Schema::Array(labels.build())));
        }
    }
}

/// Query parameters of `GET /sessions`. Labels filter as `label=<key>=<value>` (repeated for
/// several), or `metadata[<key>]=<value>`, or `metadata.<key>=<value>`; several labels must all
/// match. Only the first form is in the document: it is the one every generated client sends
/// as written (a deepObject parameter is sent as plain keys by some generators).
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
struct SessionListParams {
    /// Sessions per page, 1 to 1000 (default 50).
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<u32>,
    /// The `next_cursor` of the previous page (with the same `sort`).
    #[param(
        pattern = "^(-?[0-9]{1,16}\\.)?[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
    )]
    cursor: Option<String>,
    /// `created` (the newest session first, the default) or `activity` (the most recently
    /// appended to first).
    #[param(pattern = "^(created|activity)$")]
    sort: Option<String>,
    /// Labels the sessions must all carry, each as `key=value` (split at the first `=`):
    /// `label=team=search&label=agent=coder`. `metadata[team]=search` and
    /// `metadata.team=search` are accepted too.
    #[param(style = Form, explode, value_type = Option<Vec<String>>, pattern = "^[^=]+=")]
    label: Option<Vec<String>>,
}

/// Create a session.
///
/// Every configuration field is optional and takes its default; the configuration is validated
/// as a whole and fixed for the session's life.
#[utoipa::path(post, path = "/sessions", tag = "sessions",
    request_body(content = NewSession, example = json!({
        "config": {"context_window": 128000, "max_output_tokens": 4096, "tokenizer": "o200k_base"},
        "metadata": {"agent": "coder", "team": "search"}
    })),
    responses(
        (status = 201, description = "Created; `Location` names the session", body = Session,
            example = json!({
                "id": "01936f4e-8a7b-7c3d-9e2f-4a5b6c7d8e9f",
                "created_at": "2026-11-30T12:00:00Z", "updated_at": "2026-11-30T12:00:00Z",
                "config": {"context_window": 128000, "max_output_tokens": 4096,
                    "tokenizer": "o200k_base", "policy": "progressive",
                    "thresholds": {"warn": 0.6, "soft": 0.7, "full": 0.8, "emergency": 0.95},
                    "min_tail_messages": 6, "offload_threshold_chars": 4000,
                    "min_compaction_gain": 0.05},
                "metadata": {"agent": "coder", "team": "search"},
                "head_seq": 0, "total_tokens": 0})),
        (status = 400, description = "Malformed JSON", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Not JSON", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "An invalid configuration; `errors` names each field", body = Problem,
            content_type = "application/problem+json",
            example = json!({"type": "urn:ctxd:problem:validation-failed", "title": "Validation failed",
                "status": 422, "detail": "config.context_window: must be between 1024 and 100000000 tokens",
                "instance": "/sessions", "request_id": "3f0c…",
                "errors": [{"field": "config.context_window",
                    "message": "must be between 1024 and 100000000 tokens"}]}))
    ))]
async fn create_session(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    extract::Json(new): extract::Json<NewSession>,
) -> Result<impl IntoResponse, ApiError> {
    let errors = new.validate();
    if !errors.is_empty() {
        return Err(ApiError::validation(errors));
    }
    let session = state.store.create_session(&new, &caller.tenant).await?;
    let location = format!("/sessions/{}", session.id);
    Ok((
        StatusCode::CREATED,
        [(header::LOCATION, location)],
        Json(session.shown()),
    ))
}

/// List sessions, newest first, filtered by labels.
#[utoipa::path(get, path = "/sessions", tag = "sessions",
    params(SessionListParams),
    responses(
        (status = 200, description = "A page of sessions", body = SessionPage, example = json!({
            "sessions": [{"id": "01936f4e-8a7b-7c3d-9e2f-4a5b6c7d8e9f",
                "created_at": "2026-11-30T12:00:00Z", "updated_at": "2026-11-30T12:05:00Z",
                "config": {"context_window": 200000, "max_output_tokens": 8192,
                    "tokenizer": "o200k_base", "policy": "progressive",
                    "thresholds": {"warn": 0.6, "soft": 0.7, "full": 0.8, "emergency": 0.95},
                    "min_tail_messages": 6, "offload_threshold_chars": 4000,
                    "min_compaction_gain": 0.05},
                "metadata": {"team": "search"}, "head_seq": 42, "total_tokens": 18234}],
            "next_cursor": "01936f4e-8a7b-7c3d-9e2f-4a5b6c7d8e9f"})),
        (status = 400, description = "An unknown parameter, a bad limit or cursor", body = Problem,
            content_type = "application/problem+json"),
        (status = 422, description = "A label filter out of the labels' bounds (an empty or too long \
            key, a too long value, the NUL character, too many labels); `errors` names it",
            body = Problem, content_type = "application/problem+json")
    ))]
async fn list_sessions(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Query(params): Query<Vec<(String, String)>>,
) -> Result<Json<SessionPage>, ApiError> {
    let mut filter = SessionFilter {
        tenant: caller.tenant,
        limit: DEFAULT_PAGE,
        ..SessionFilter::default()
    };
    let mut cursor = None;
    let mut by_activity = false;
    for (name, value) in params {
        match name.as_str() {
            "sort" => {
                by_activity = match value.as_str() {
                    "created" => false,
                    "activity" => true,
                    other => {
                        return Err(ApiError::BadRequest(format!(
                            "sort `{other}` is not `created` or `activity`"
                        )))
                    }
                }
            }
            "limit" => {
                filter.limit =
                    extract::page_limit(Some(value.parse().unwrap_or(0)), DEFAULT_PAGE, MAX_PAGE)?;
            }
            "cursor" => cursor = Some(value),
            "label" => match value.split_once('=') {
                Some((key, label)) if !key.is_empty() => {
                    filter.labels.insert(key.to_owned(), label.to_owned());
                }
                _ => {
                    return Err(ApiError::BadRequest(format!(
                        "label `{value}` is not `key=value`"
                    )))
                }
            },
            _ => match label_key(&name) {
                Some(key) => {
                    filter.labels.insert(key.to_owned(), value);
                }
                None => {
                    return Err(ApiError::BadRequest(format!(
                        "unknown query parameter `{name}`: use limit, cursor, sort or label=<key>=<value>"
                    )))
                }
            },
        }
    }
    // A cursor is the previous page's last id, after its last activity's microseconds when
    // sorted by activity (`<micros>.<id>`).
    let bad_cursor =
        || ApiError::BadRequest("cursor is not a next_cursor this API returned".into());
    let mut after_activity = None;
    if let Some(cursor) = cursor {
        let (micros, id) = match cursor.split_once('.') {
            Some((micros, id)) => (Some(micros), id),
            None => (None, cursor.as_str()),
        };
        filter.before = Some(Uuid::parse_str(id).map_err(|_| bad_cursor())?);
        if let Some(micros) = micros {
            let micros: i64 = micros.parse().map_err(|_| bad_cursor())?;
            after_activity =
                Some(chrono::DateTime::from_timestamp_micros(micros).ok_or_else(bad_cursor)?);
        }
    }
    if by_activity {
        // Without a time, from later than any session's last activity.
        filter.by_activity =
            Some(after_activity.unwrap_or_else(|| chrono::Utc::now() + chrono::Days::new(36_500)));
    }
    let errors: Vec<FieldError> = validate_labels(&filter.labels);
    if !errors.is_empty() {
        return Err(ApiError::validation(errors));
    }
    let page = filter.limit as usize;
    filter.limit += 1; // one more tells whether another page follows
    let mut sessions = state.store.list_sessions(&filter).await?;
    let next_cursor = if sessions.len() > page {
        sessions.truncate(page);
        sessions.last().map(|s| match by_activity {
            true => format!("{}.{}", s.updated_at.timestamp_micros(), s.id),
            false => s.id.to_string(),
        })
    } else {
        None
    };
    Ok(Json(SessionPage {
        sessions: sessions.into_iter().map(Session::shown).collect(),
        next_cursor,
    }))
}

/// The label a filter parameter names: `metadata[key]` (what generated clients send for a
/// deepObject parameter) or `metadata.key`.
fn label_key(name: &str) -> Option<&str> {
    if let Some(key) = name
        .strip_prefix("metadata[")
        .and_then(|rest| rest.strip_suffix(']'))
    {
        return Some(key);
    }
    name.strip_prefix("metadata.")
}

/// Get a session with its configuration and log head.
#[utoipa::path(get, path = "/sessions/{id}", tag = "sessions",
    params(("id" = Uuid, Path, description = "The session id")),
    responses(
        (status = 200, description = "The session", body = Session),
        (status = 400, description = "The id is not a UUID", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such session", body = Problem, content_type = "application/problem+json",
            example = json!({"type": "urn:ctxd:problem:not-found", "title": "Not found",
                "status": 404, "detail": "session 01936f4e-8a7b-7c3d-9e2f-4a5b6c7d8e9f does not exist", "instance": "/sessions/01936f4e-8a7b-7c3d-9e2f-4a5b6c7d8e9f",
                "request_id": "3f0c2a9e-5b1d-4c8e-9f7a-2d6b8e4c1a07"}))
    ))]
async fn get_session(
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
) -> Result<Json<Session>, ApiError> {
    state
        .store
        .get_session(id)
        .await?
        .map(|s| Json(s.shown()))
        .ok_or_else(|| ApiError::session_not_found(id))
}

/// Delete a session and everything of it: events, tool-call pairing, and (later) its
/// compaction state and records.
#[utoipa::path(delete, path = "/sessions/{id}", tag = "sessions",
    params(("id" = Uuid, Path, description = "The session id")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 400, description = "The id is not a UUID", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such session", body = Problem, content_type = "application/problem+json",
            example = json!({"type": "urn:ctxd:problem:not-found", "title": "Not found",
                "status": 404, "detail": "session 01936f4e-8a7b-7c3d-9e2f-4a5b6c7d8e9f does not exist", "instance": "/sessions/01936f4e-8a7b-7c3d-9e2f-4a5b6c7d8e9f",
                "request_id": "3f0c2a9e-5b1d-4c8e-9f7a-2d6b8e4c1a07"}))
    ))]
async fn delete_session(
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
) -> Result<StatusCode, ApiError> {
    if state.store.delete_session(id).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::session_not_found(id))
    }
}
