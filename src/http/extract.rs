//! Request extractors whose rejections are problem documents that name the offending field.

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::{header, HeaderMap, StatusCode};
use serde::de::DeserializeOwned;

use super::error::ApiError;
use super::AppState;
use crate::domain::FieldError;

/// A JSON body. Malformed JSON is a 400; JSON of the wrong shape is a 422 naming the field
/// (`events[3].role`); a body over the limit is a 413; another content type is a 415.
pub struct Json<T>(pub T);

impl<T: DeserializeOwned> FromRequest<AppState> for Json<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        if !is_json(request.headers()) {
            return Err(ApiError::UnsupportedMediaType(
                "expected a body with content type application/json".into(),
            ));
        }
        let bytes = Bytes::from_request(request, state)
            .await
            .map_err(|rejection| {
                if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                    ApiError::PayloadTooLarge(format!(
                        "the request body exceeds the limit of {} bytes",
                        state.limits.max_body_bytes
                    ))
                } else {
                    ApiError::BadRequest(rejection.body_text())
                }
            })?;
        parse(&bytes).map(Json)
    }
}

fn is_json(headers: &HeaderMap) -> bool {
    let Some(value) = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let essence = value.split(';').next().unwrap_or("").trim();
    essence.eq_ignore_ascii_case("application/json")
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

/// A `limit` query parameter: `default` when absent, else it must be 1 to `max`.
pub fn page_limit<T>(given: Option<T>, default: T, max: T) -> Result<T, ApiError>
where
    T: Copy + PartialOrd + From<u8> + std::fmt::Display,
{
    let limit = given.unwrap_or(default);
    if limit < T::from(1) || limit > max {
        return Err(ApiError::BadRequest(format!(
            "limit must be between 1 and {max}"
        )));
    }
    Ok(limit)
}

/// Parses a JSON body, turning serde's errors into problems that name the field.
pub fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut deserializer).map_err(|error| {
        let path = error.path().clone();
        let inner = error.into_inner();
        if inner.is_data() {
            ApiError::validation(vec![field_error(&path, &inner)])
        } else {
            ApiError::BadRequest(format!("the body is not valid JSON: {inner}"))
        }
    })?;
    deserializer
        .end()
        .map_err(|e| ApiError::BadRequest(format!("the body is not valid JSON: {e}")))?;
    Ok(value)
}

/// Names the field a serde error is about: an event's index and its field when the error is
/// inside the `events` array, else the dotted path.
fn field_error(path: &serde_path_to_error::Path, error: &serde_json::Error) -> FieldError {
    use serde_path_to_error::Segment;
    let mut message = error.to_string();
    if let Some(at) = message.find(" at line ") {
        message.truncate(at);
    }
    let segments: Vec<&Segment> = path.iter().collect();
    let (index, rest) = match segments.as_slice() {
        [Segment::Map { key }, Segment::Seq { index }, rest @ ..] if key == "events" => {
            (Some(*index), rest)
        }
        all => (None, all),
    };
    let mut field = String::new();
    for segment in rest {
        match segment {
            Segment::Seq { index } => field.push_str(&format!("[{index}]")),
            Segment::Map { key } => {
                if !field.is_empty() {
                    field.push('.');
                }
                field.push_str(key);
            }
            Segment::Enum { .. } | Segment::Unknown => {}
        }
    }
    // serde reports a missing field at the struct that lacks it: name the field itself.
    if let Some(missing) = message
        .strip_prefix("missing field `")
        .and_then(|m| m.strip_suffix('`'))
    {
        if !field.is_empty() {
            field.push('.');
        }
        field.push_str(missing);
    }
    if field.is_empty() {
        field.push_str("(body)");
    }
    FieldError {
        index,
        field,
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::event::EventInput;

    #[derive(serde::Deserialize, Debug)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Batch {
        events: Vec<EventInput>,
    }

    fn errors(body: &str) -> Vec<FieldError> {
        match parse::<Batch>(body.as_bytes()) {
            Err(ApiError::Validation { errors, .. }) => errors,
            other => panic!("expected a validation error, got {other:?}"),
        }
    }

    #[test]
    fn errors_inside_the_batch_name_the_event_and_field() {
        let e =
            errors(r#"{"events":[{"type":"note","content":"x"},{"type":"message","role":"bot"}]}"#);
        assert_eq!(e[0].index, Some(1));
        assert_eq!(e[0].field, "role");
        assert!(
            e[0].message.contains("unknown variant `bot`"),
            "{}",
            e[0].message
        );

        let e = errors(r#"{"events":[{"type":"mesage","role":"user"}]}"#);
        assert_eq!((e[0].index, e[0].field.as_str()), (Some(0), "type"));

        let e = errors(r#"{"events":[{"role":"user"}]}"#);
        assert_eq!((e[0].index, e[0].field.as_str()), (Some(0), "type"));

        let e = errors(r#"{"events":[{"type":"message","tool_calls":[{"id":1}]}]}"#);
        assert_eq!(
            (e[0].index, e[0].field.as_str()),
            (Some(0), "tool_calls[0].id")
        );
    }

    #[test]
    fn malformed_json_is_a_bad_request() {
        assert!(matches!(
            parse::<Batch>(b"{\"events\": ["),
            Err(ApiError::BadRequest(_))
        ));
        assert!(matches!(
            parse::<Batch>(b"{\"events\": []} x"),
            Err(ApiError::BadRequest(_))
        ));
    }
}
