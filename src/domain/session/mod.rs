//! Sessions and their context-management configuration.

mod config;
mod episodic;

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::{has_nul, FieldError, NUL_MESSAGE};
pub use config::{Policy, SessionConfig, Thresholds};
pub use episodic::{EpisodicConfig, MAX_TOOL_PRIORITY};

/// Free-form labels attached to a session; the session list filters by them.
pub type Labels = BTreeMap<String, String>;

pub const MAX_LABELS: usize = 64;
pub const MAX_LABEL_KEY_CHARS: usize = 128;
pub const MAX_LABEL_VALUE_CHARS: usize = 1024;

/// A string without the NUL character, which no label may contain.
const NO_NUL_PATTERN: &str = "^[^\\u0000]*$";

/// Labels as the OpenAPI document describes them, with the bounds [`validate_labels`] holds.
pub(crate) fn labels_schema() -> utoipa::openapi::schema::Object {
    use utoipa::openapi::schema::{ObjectBuilder, Type};
    let text = |min: Option<usize>, max: usize| {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .min_length(min)
            .max_length(Some(max))
            .pattern(Some(NO_NUL_PATTERN))
    };
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .description(Some(
            "Labels (string keys to string values); the session list filters by them.",
        ))
        .property_names(Some(text(Some(1), MAX_LABEL_KEY_CHARS)))
        .additional_properties(Some(text(None, MAX_LABEL_VALUE_CHARS)))
        .max_properties(Some(MAX_LABELS))
        .build()
}

/// The body of `POST /sessions`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewSession {
    /// Omitted fields take their defaults.
    #[serde(default)]
    pub config: SessionConfig,
    /// Labels (string to string) to filter the session list by.
    #[serde(default)]
    #[schema(schema_with = labels_schema)]
    pub metadata: Labels,
}

impl NewSession {
    pub fn validate(&self) -> Vec<FieldError> {
        let mut errors = self.config.validate();
        errors.extend(validate_labels(&self.metadata));
        errors
    }
}

/// Label rules, shared by session metadata and list filters.
pub fn validate_labels(labels: &Labels) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if labels.len() > MAX_LABELS {
        errors.push(FieldError::new(
            "metadata",
            format!("at most {MAX_LABELS} labels"),
        ));
    }
    for (key, value) in labels {
        if key.is_empty() || key.chars().count() > MAX_LABEL_KEY_CHARS {
            errors.push(FieldError::new(
                "metadata",
                format!("label keys must have 1 to {MAX_LABEL_KEY_CHARS} characters"),
            ));
        }
        if has_nul(key) || has_nul(value) {
            errors.push(FieldError::new(format!("metadata.{key}"), NUL_MESSAGE));
        }
        if value.chars().count() > MAX_LABEL_VALUE_CHARS {
            errors.push(FieldError::new(
                format!("metadata.{key}"),
                format!("label values must have at most {MAX_LABEL_VALUE_CHARS} characters"),
            ));
        }
    }
    errors
}

/// A session as stored and served.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Session {
    pub id: Uuid,
    /// The tenant that owns the session: the one of the key that created it (`default` when
    /// ctxd runs without keys).
    pub tenant: String,
    pub created_at: DateTime<Utc>,
    /// When the last event was appended (or the session created).
    pub updated_at: DateTime<Utc>,
    pub config: SessionConfig,
    #[schema(schema_with = labels_schema)]
    pub metadata: Labels,
    /// The seq of the newest event; 0 for an empty session.
    pub head_seq: i64,
    /// The sum of the token costs of all events.
    pub total_tokens: i64,
}

impl Session {
    /// The session as answers show it: its configuration's summary size is the one in use,
    /// even when it was left to its default (which follows the window).
    pub fn shown(mut self) -> Self {
        self.config.summary_max_chars = Some(self.config.summary_max_chars() as u32);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokens::Tokenizer;

    fn parse(json: &str) -> Result<NewSession, serde_json::Error> {
        serde_json::from_str(json)
    }

    #[test]
    fn empty_body_takes_every_default() {
        let s = parse("{}").unwrap();
        assert_eq!(s.config, SessionConfig::default());
        assert_eq!(s.config.context_window, 200_000);
        assert_eq!(s.config.max_output_tokens, 8_192);
        assert_eq!(s.config.tokenizer, Tokenizer::O200kBase);
        assert_eq!(s.config.thresholds.low_water, 0.40);
        assert_eq!(s.config.thresholds.warn, 0.70);
        assert_eq!(s.config.thresholds.emergency, 0.95);
        assert_eq!(s.config.tail_max_share, 0.10);
        assert_eq!(s.config.item_max_share, 0.05);
        assert_eq!(s.config.system_max_share, 0.25);
        assert_eq!(s.config.min_tail_messages, 6);
        assert_eq!(s.config.offload_threshold_chars, 4_000);
        assert!(s.validate().is_empty());
    }

    #[test]
    fn the_reserved_output_defaults_to_what_fits_the_window() {
        let s = parse(r#"{"config":{"context_window":16000}}"#).unwrap();
        assert_eq!(s.config.max_output_tokens, 4_000);
        assert!(s.validate().is_empty(), "{:?}", s.validate());
        let s = parse(r#"{"config":{"context_window":1024}}"#).unwrap();
        assert_eq!(s.config.max_output_tokens, 256);
        assert!(s.validate().is_empty());
        let s = parse(r#"{"config":{"context_window":1000000}}"#).unwrap();
        assert_eq!(s.config.max_output_tokens, 8_192);
        // An explicit value is kept, and still validated.
        let s = parse(r#"{"config":{"context_window":16000,"max_output_tokens":8000}}"#).unwrap();
        assert_eq!(s.config.max_output_tokens, 8_000);
        assert_eq!(s.validate()[0].field, "config.max_output_tokens");
    }

    #[test]
    fn the_summary_bound_defaults_to_an_eighth_of_the_window_under_either_policy() {
        for policy in ["progressive", "episodic"] {
            for (window, chars) in [(16_000, 8_000), (32_000, 16_000), (200_000, 32_000)] {
                let body =
                    format!(r#"{{"config":{{"context_window":{window},"policy":"{policy}"}}}}"#);
                let s = parse(&body).unwrap();
                assert_eq!(s.config.summary_max_chars(), chars, "{policy} at {window}");
            }
        }
        let s = parse(r#"{"config":{"context_window":4000}}"#).unwrap();
        assert_eq!(
            s.config.summary_max_chars(),
            2_000,
            "never under 2,000 characters"
        );
    }

    #[test]
    fn labels_refuse_the_nul_character() {
        for body in [
            r#"{"metadata":{"a\u0000":"x"}}"#,
            r#"{"metadata":{"a":"x\u0000"}}"#,
        ] {
            let errors = parse(body).unwrap().validate();
            assert_eq!(errors.len(), 1, "{errors:?}");
            assert!(errors[0].field.starts_with("metadata.a"), "{errors:?}");
            assert!(errors[0].message.contains("NUL"), "{errors:?}");
        }
    }

    #[test]
    fn partial_thresholds_keep_the_other_defaults() {
        let s = parse(r#"{"config":{"thresholds":{"warn":0.5}}}"#).unwrap();
        assert_eq!(s.config.thresholds.warn, 0.5);
        assert_eq!(s.config.thresholds.soft, 0.80);
        assert!(s.validate().is_empty());
    }

    #[test]
    fn unknown_fields_and_values_are_rejected() {
        assert!(parse(r#"{"config":{"contxt_window":1}}"#).is_err());
        assert!(parse(r#"{"config":{"tokenizer":"gpt2"}}"#).is_err());
        assert!(parse(r#"{"config":{"policy":"magic"}}"#).is_err());
        assert!(parse(r#"{"config":{"max_output_tokens":null}}"#).is_err());
    }

    #[test]
    fn each_broken_rule_is_named() {
        let cases = [
            (
                r#"{"config":{"context_window":100}}"#,
                "config.context_window",
            ),
            (
                r#"{"config":{"max_output_tokens":150000}}"#,
                "config.max_output_tokens",
            ),
            (
                r#"{"config":{"max_output_tokens":0}}"#,
                "config.max_output_tokens",
            ),
            (
                r#"{"config":{"thresholds":{"warn":0.9,"soft":0.8}}}"#,
                "config.thresholds",
            ),
            (
                r#"{"config":{"thresholds":{"emergency":1.5}}}"#,
                "config.thresholds.emergency",
            ),
            (
                r#"{"config":{"offload_threshold_chars":10}}"#,
                "config.offload_threshold_chars",
            ),
            (
                r#"{"config":{"offload_threshold_chars":2147483648}}"#,
                "config.offload_threshold_chars",
            ),
            (r#"{"metadata":{"":"x"}}"#, "metadata"),
        ];
        for (body, field) in cases {
            let errors = parse(body).unwrap().validate();
            assert!(
                errors.iter().any(|e| e.field == field),
                "{body}: expected an error on {field}, got {errors:?}"
            );
        }
    }
}
