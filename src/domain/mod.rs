//! The product's vocabulary: sessions, events and the rules an append must obey.
//! Pure data and logic: no HTTP, no SQL.

pub mod append;
pub mod compaction;
pub mod event;
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
