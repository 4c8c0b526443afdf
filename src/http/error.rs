//! Every 4xx and 5xx answer is an RFC 9457 `application/problem+json` document carrying the
//! request id. Handlers return [`ApiError`]; [`problem_responses`] turns any other error
//! response (unknown route, 405, a rejected path, a timeout, a panic) into the same shape.

use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use crate::domain::FieldError;
use crate::store::{AppendError, StoreError};

pub const PROBLEM_JSON: &str = "application/problem+json";

tokio::task_local! {
    static REQUEST: RequestContext;
}

#[derive(Clone, Default)]
struct RequestContext {
    id: Option<String>,
    path: String,
}

/// An RFC 9457 problem document.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Problem {
    /// A URI naming the kind of problem, e.g. `urn:ctxd:problem:validation-failed`.
    #[serde(rename = "type")]
    pub kind: String,
    /// A short summary of the kind of problem.
    pub title: String,
    pub status: u16,
    /// What went wrong with this request.
    pub detail: String,
    /// The request path.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instance: Option<String>,
    /// The `x-request-id` of the request, for logs and support.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// Each invalid field (422).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<FieldError>,
    /// The session's current head seq (409 on `expected_seq`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub head_seq: Option<i64>,
    /// The seq of the stored event whose id conflicts (409 on a reused id).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seq: Option<i64>,
    /// The tokens the tool schemas, the reserved output and the safety margin need (422 when
    /// they leave no room for messages).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub needed_tokens: Option<i64>,
    /// The context window they must fit in (422 with `needed_tokens`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ceiling_tokens: Option<i64>,
}

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    BadRequest(String),
    /// No key, or one that is not valid (401, with `WWW-Authenticate`).
    #[error("{0}")]
    Unauthorized(String),
    /// A valid key whose role may not do this (403).
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    MethodNotAllowed(String),
    #[error("{detail}")]
    Conflict {
        detail: String,
        head_seq: Option<i64>,
        seq: Option<i64>,
    },
    #[error("{0}")]
    PayloadTooLarge(String),
    #[error("{0}")]
    UnsupportedMediaType(String),
    #[error("{detail}")]
    Validation {
        detail: String,
        errors: Vec<FieldError>,
    },
    /// The tool schemas and the reserved output leave no room for messages (422).
    #[error("{detail}")]
    NoRoom {
        detail: String,
        errors: Vec<FieldError>,
        needed: i64,
        ceiling: i64,
    },
    /// The key's request rate is spent (429, with `Retry-After`).
    #[error("{detail}")]
    TooManyRequests {
        detail: String,
        retry_after_secs: u64,
    },
    #[error("{0}")]
    Unavailable(String),
    /// The connection to the database failed (503). The cause is logged, never sent.
    #[error("the connection to the database failed: {0}")]
    DatabaseUnreachable(String),
    #[error("{0}")]
    Timeout(String),
    /// The cause is logged, never sent.
    #[error("internal error: {0}")]
    Internal(String),
}

impl ApiError {
    pub fn validation(errors: Vec<FieldError>) -> Self {
        let detail = match errors.as_slice() {
            [one] => one.to_string(),
            [first, rest @ ..] => format!("{first} (and {} more)", rest.len()),
            [] => "the request is invalid".to_owned(),
        };
        Self::Validation { detail, errors }
    }

    pub fn session_not_found(id: impl std::fmt::Display) -> Self {
        Self::NotFound(format!("session {id} does not exist"))
    }

    fn status(&self) -> StatusCode {
        match self {
            Self::BadRequest(_) => StatusCode::BAD_REQUEST,
            Self::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            Self::Forbidden(_) => StatusCode::FORBIDDEN,
            Self::NotFound(_) => StatusCode::NOT_FOUND,
            Self::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            Self::Conflict { .. } => StatusCode::CONFLICT,
            Self::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Self::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::Validation { .. } | Self::NoRoom { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            Self::TooManyRequests { .. } => StatusCode::TOO_MANY_REQUESTS,
            Self::Unavailable(_) | Self::DatabaseUnreachable(_) => StatusCode::SERVICE_UNAVAILABLE,
            Self::Timeout(_) => StatusCode::SERVICE_UNAVAILABLE,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn slug_and_title(&self) -> (&'static str, &'static str) {
        match self {
            Self::BadRequest(_) => ("bad-request", "Bad request"),
            Self::Unauthorized(_) => ("unauthorized", "Unauthorized"),
            Self::Forbidden(_) => ("forbidden", "Forbidden"),
            Self::NotFound(_) => ("not-found", "Not found"),
            Self::MethodNotAllowed(_) => ("method-not-allowed", "Method not allowed"),
            Self::Conflict { .. } => ("conflict", "Conflict"),
            Self::PayloadTooLarge(_) => ("payload-too-large", "Payload too large"),
            Self::UnsupportedMediaType(_) => ("unsupported-media-type", "Unsupported media type"),
            Self::Validation { .. } | Self::NoRoom { .. } => {
                ("validation-failed", "Validation failed")
            }
            Self::Unavailable(_) | Self::DatabaseUnreachable(_) => {
                ("unavailable", "Service unavailable")
            }
            Self::Timeout(_) => ("timeout", "Request timed out"),
            Self::TooManyRequests { .. } => ("rate-limited", "Too many requests"),
            Self::Internal(_) => ("internal", "Internal server error"),
        }
    }

    /// The problem document for this error in the current request.
    pub fn to_problem(&self) -> Problem {
        let (slug, title) = self.slug_and_title();
        let context = REQUEST.try_with(Clone::clone).unwrap_or_default();
        let (errors, head_seq, seq) = match self {
            Self::Validation { errors, .. } | Self::NoRoom { errors, .. } => {
                (errors.clone(), None, None)
            }
            Self::Conflict { head_seq, seq, .. } => (Vec::new(), *head_seq, *seq),
            _ => (Vec::new(), None, None),
        };
        let (needed_tokens, ceiling_tokens) = match self {
            Self::NoRoom {
                needed, ceiling, ..
            } => (Some(*needed), Some(*ceiling)),
            _ => (None, None),
        };
        let detail = match self {
            Self::Internal(cause) => {
                tracing::error!(request_id = context.id.as_deref(), %cause, "internal error");
                "the server failed to handle this request; the request id identifies it in the logs"
                    .to_owned()
            }
            Self::DatabaseUnreachable(cause) => {
                tracing::error!(request_id = context.id.as_deref(), %cause, "the connection to the database failed");
                "the connection to the database failed; retry".to_owned()
            }
            other => other.to_string(),
        };
        Problem {
            kind: format!("urn:ctxd:problem:{slug}"),
            title: title.to_owned(),
            status: self.status().as_u16(),
            detail,
            instance: (!context.path.is_empty()).then_some(context.path),
            request_id: context.id,
            errors,
            head_seq,
            seq,
            needed_tokens,
            ceiling_tokens,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = render(self.status(), &self.to_problem());
        match &self {
            Self::Unauthorized(_) => {
                response.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static("Bearer realm=\"ctxd\""),
                );
            }
            Self::TooManyRequests {
                retry_after_secs, ..
            } => {
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from(*retry_after_secs));
            }
            _ => {}
        }
        response
    }
}

fn render(status: StatusCode, problem: &Problem) -> Response {
    let body = serde_json::to_vec(problem).unwrap_or_default();
    let mut response = (
        status,
        [(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON))],
        body,
    )
        .into_response();
    // Every 503 is worth retrying: say when.
    if status == StatusCode::SERVICE_UNAVAILABLE {
        response.headers_mut().insert(
            header::RETRY_AFTER,
            HeaderValue::from_static(RETRY_AFTER_SECS),
        );
    }
    response
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Database(sqlx::Error::PoolTimedOut) => {
                Self::Unavailable("the database is overloaded; retry shortly".into())
            }
            StoreError::Database(e) if is_transient(&e) => Self::DatabaseUnreachable(e.to_string()),
            other => Self::Internal(other.to_string()),
        }
    }
}

/// Whether a database error says the connection or the server went away (a restart, a
/// terminated backend, a server not yet accepting connections, too many connections): the
/// same request succeeds once ctxd reconnects, so it is answered 503 with `Retry-After`.
fn is_transient(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::Io(_)
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed
        | sqlx::Error::Protocol(_) => true,
        sqlx::Error::Database(e) => e.code().is_some_and(|code| {
            // 08: connection exception; 57P01-57P03: admin shutdown, crash shutdown, cannot
            // connect now; 53300: too many connections.
            code.starts_with("08") || code.starts_with("57P0") || code == "53300"
        }),
        _ => false,
    }
}

/// What a 503 answer asks the client to wait, in seconds.
const RETRY_AFTER_SECS: &str = "1";

impl From<AppendError> for ApiError {
    fn from(e: AppendError) -> Self {
        use crate::domain::append::AppendRejection;
        match e {
            AppendError::SessionNotFound => Self::NotFound("session does not exist".into()),
            AppendError::Rejected(AppendRejection::Invalid(errors)) => Self::validation(errors),
            AppendError::Rejected(AppendRejection::IdConflict { index, id, seq }) => {
                Self::Conflict {
                    detail: format!(
                        "events[{index}].id: an event with id `{id}` is already stored at seq \
                         {seq} with different content"
                    ),
                    head_seq: None,
                    seq: Some(seq),
                }
            }
            AppendError::Rejected(AppendRejection::SeqMismatch { expected, head_seq }) => {
                Self::Conflict {
                    detail: format!(
                        "expected_seq is {expected} but the session's head is at seq {head_seq}"
                    ),
                    head_seq: Some(head_seq),
                    seq: None,
                }
            }
            AppendError::Store(e) => e.into(),
        }
    }
}

/// Runs each request with its id in scope and turns any error response that is not yet a
/// problem document into one.
pub async fn problem_responses(request: Request, next: Next) -> Response {
    let context = RequestContext {
        id: request
            .headers()
            .get("x-request-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
        path: request.uri().path().to_owned(),
    };
    REQUEST
        .scope(context, async move {
            let response = next.run(request).await;
            let status = response.status();
            let is_problem = response
                .headers()
                .get(header::CONTENT_TYPE)
                .is_some_and(|v| v.as_bytes().starts_with(PROBLEM_JSON.as_bytes()));
            if !(status.is_client_error() || status.is_server_error()) || is_problem {
                return response;
            }
            let (parts, body) = response.into_parts();
            let mut text = axum::body::to_bytes(body, 4096)
                .await
                .map(|b| String::from_utf8_lossy(&b).trim().to_owned())
                .unwrap_or_default();
            if let Some(allow) = parts
                .headers
                .get(header::ALLOW)
                .and_then(|v| v.to_str().ok())
            {
                if text.is_empty() {
                    text = format!("this resource allows {}", allow.replace(',', ", "));
                }
            }
            let mut problem = bare_status_error(status, text).to_problem();
            problem.status = status.as_u16();
            let mut response = render(status, &problem);
            // Keep the original headers (axum adds `allow` to a 405 further out).
            for (name, value) in parts.headers.iter() {
                if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
                    response.headers_mut().insert(name.clone(), value.clone());
                }
            }
            response
        })
        .await
}

fn bare_status_error(status: StatusCode, text: String) -> ApiError {
    let detail = |fallback: &str| {
        if text.is_empty() {
            fallback.to_owned()
        } else {
            text.clone()
        }
    };
    match status {
        StatusCode::NOT_FOUND => ApiError::NotFound(detail("no such resource")),
        StatusCode::METHOD_NOT_ALLOWED => ApiError::MethodNotAllowed(detail(
            "this method is not allowed on this resource; the `allow` header lists those that are",
        )),
        StatusCode::PAYLOAD_TOO_LARGE => ApiError::PayloadTooLarge(detail("the body is too large")),
        StatusCode::UNSUPPORTED_MEDIA_TYPE => {
            ApiError::UnsupportedMediaType(detail("unsupported content type"))
        }
        StatusCode::REQUEST_TIMEOUT | StatusCode::SERVICE_UNAVAILABLE => ApiError::Timeout(detail(
            "the request did not finish within the configured request timeout",
        )),
        StatusCode::UNPROCESSABLE_ENTITY => ApiError::Validation {
            detail: detail("the request is invalid"),
            errors: Vec::new(),
        },
        s if s.is_server_error() => ApiError::Internal(detail("unexpected failure")),
        _ => ApiError::BadRequest(detail("bad request")),
    }
}

/// The body of a response that never reaches a handler's own error path (a panic).
pub fn panic_response(_: Box<dyn std::any::Any + Send + 'static>) -> Response<Body> {
    tracing::error!("a request handler panicked");
    Response::builder()
        .status(StatusCode::INTERNAL_SERVER_ERROR)
        .body(Body::empty())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// The log lines written while `f` runs, and what `f` returned.
    fn logged<T>(f: impl FnOnce() -> T) -> (String, T) {
        #[derive(Clone, Default)]
        struct Lines(Arc<Mutex<Vec<u8>>>);
        impl std::io::Write for Lines {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                self.0.lock().expect("log buffer").extend_from_slice(buf);
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let lines = Lines::default();
        let writer = lines.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .finish();
        let out = tracing::subscriber::with_default(subscriber, f);
        let text = String::from_utf8_lossy(&lines.0.lock().expect("log buffer")).into_owned();
        (text, out)
    }

    /// The problem document `error` answers in a request with id `req-7`.
    async fn answer(error: ApiError) -> (StatusCode, Value, String) {
        let context = RequestContext {
            id: Some("req-7".into()),
            path: "/sessions".into(),
        };
        let (log, response) = REQUEST.sync_scope(context, || logged(|| error.into_response()));
        let status = response.status();
        let body = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .expect("body");
        (status, serde_json::from_slice(&body).expect("JSON"), log)
    }

    use serde_json::Value;

    #[tokio::test]
    async fn a_database_connection_failure_is_logged_not_sent() {
        let cause = std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            "connect to db-internal.example:5432 as ctxd_owner",
        );
        let error = ApiError::from(StoreError::Database(sqlx::Error::Io(cause)));
        let (status, body, log) = answer(error).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(body["type"], "urn:ctxd:problem:unavailable");
        assert_eq!(body["request_id"], "req-7");
        let sent = body.to_string();
        assert!(!sent.contains("db-internal"), "the cause leaked: {sent}");
        assert!(!sent.contains("ctxd_owner"), "the cause leaked: {sent}");
        assert_eq!(
            body["detail"],
            "the connection to the database failed; retry"
        );
        assert!(
            log.contains("db-internal.example:5432") && log.contains("req-7"),
            "the cause is logged with the request id: {log}"
        );
    }

    #[tokio::test]
    async fn an_internal_cause_is_logged_not_sent() {
        let error = ApiError::Internal("row decode failed: column secret_col".into());
        let (status, body, log) = answer(error).await;
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
        assert!(!body.to_string().contains("secret_col"), "{body}");
        assert!(log.contains("secret_col") && log.contains("req-7"), "{log}");
    }
}
