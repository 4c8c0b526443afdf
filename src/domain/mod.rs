//! The product's vocabulary: sessions, events and the rules an append must obey.
//! Pure data and logic: no HTTP, no SQL.

pub mod append;
pub mod compaction;
pub mod condensation;
pub mod content;
pub mod diagnostic;
pub mod episodes;
pub mod event;
pub mod observation;
pub mod pairing;
pub mod session;
pub mod state;
pub mod text;

use serde::Serialize;
use utoipa::ToSchema;

/// One thing wrong with a request, named precisely enough for a client to fix it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct FieldError {
    /// Index of the event in the batch, when the error concerns one event.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index: Option<usize>,
    /// The offending field, as a dotted path (`tool_calls[0].id`, `config.context_window`).
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            index: None,
            field: field.into(),
            message: message.into(),
        }
    }

    pub fn at(index: usize, field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            index: Some(index),
            field: field.into(),
            message: message.into(),
        }
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.index {
            Some(i) => write!(f, "events[{i}].{}: {}", self.field, self.message),
            None => write!(f, "{}: {}", self.field, self.message),
        }
    }
}

/// Why text with a NUL character is refused: PostgreSQL's `text` and `jsonb` cannot hold one
/// (and compaction copies events' text into `jsonb` documents), so every text of an event and
/// every label refuses it, on every backend alike.
pub const NUL_MESSAGE: &str = "must not contain the NUL character (U+0000)";

/// Whether `text` contains a NUL character.
pub fn has_nul(text: &str) -> bool {
    text.contains('\0')
}

/// The path (below `field`) of the first key or string in `value` that contains a NUL
/// character: `metadata.a[2].b`.
pub fn nul_in_json(field: &str, value: &serde_json::Value) -> Option<String> {
    use serde_json::Value;
    match value {
        Value::String(s) if has_nul(s) => Some(field.to_owned()),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(i, item)| nul_in_json(&format!("{field}[{i}]"), item)),
        Value::Object(map) => nul_in_object(field, map),
        _ => None,
    }
}

/// [`nul_in_json`] of a JSON object.
pub fn nul_in_object(
    field: &str,
    map: &serde_json::Map<String, serde_json::Value>,
) -> Option<String> {
    map.iter().find_map(|(key, item)| {
        let path = format!("{field}.{key}");
        if has_nul(key) {
            Some(path)
        } else {
            nul_in_json(&path, item)
        }
    })
}
