//! The agent's own condensation at a milestone (`POST /sessions/{id}/condense`): what it has
//! done, tried and learned, in its own words, kept in the view as the session's one memory item
//! while the old exchanges it covers are archived. No model is asked.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::{has_nul, observation, FieldError, NUL_MESSAGE};
use crate::tokens::Tokenizer;

/// The most entries a list field holds.
pub const MAX_ENTRIES: usize = 20;
/// The most characters one entry (or the milestone) holds.
pub const MAX_ENTRY_CHARS: usize = 1_000;
/// The most tokens the whole condensation may cost in the view.
pub const MAX_TOKENS: i64 = 2_000;

/// An approach the agent tried and how it turned out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Strategy {
    #[schema(max_length = 1000)]
    pub approach: String,
    #[schema(max_length = 1000)]
    pub outcome: String,
}

/// The body of `POST /sessions/{id}/condense`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Condensation {
    /// The milestone reached.
    #[schema(min_length = 1, max_length = 1000)]
    pub milestone: String,
    #[serde(default)]
    #[schema(max_items = 20)]
    pub completed_work: Vec<String>,
    #[serde(default)]
    #[schema(max_items = 20)]
    pub strategies: Vec<Strategy>,
    #[serde(default)]
    #[schema(max_items = 20)]
    pub environment_changes: Vec<String>,
    #[serde(default)]
    #[schema(max_items = 20)]
    pub constraints: Vec<String>,
    #[serde(default)]
    #[schema(max_items = 20)]
    pub open_questions: Vec<String>,
    /// `observation://` URIs or workspace-relative paths only.
    #[serde(default)]
    #[schema(max_items = 20)]
    pub references: Vec<String>,
}

/// The heading of the memory message in a view.
pub const MEMORY_HEADER: &str = "[ctxd: the agent's condensation at a milestone]";

impl Condensation {
    /// Every rule broken, each naming its field (`completed_work[3]`).
    pub fn validate(&self, tokenizer: Tokenizer) -> Vec<FieldError> {
        let mut errors = Vec::new();
        let text = |field: String, value: &str, errors: &mut Vec<FieldError>| {
            if value.chars().count() > MAX_ENTRY_CHARS {
                errors.push(FieldError::new(
                    field.clone(),
                    format!("must have at most {MAX_ENTRY_CHARS} characters"),
                ));
            }
            if has_nul(value) {
                errors.push(FieldError::new(field, NUL_MESSAGE));
            }
        };
        if self.milestone.trim().is_empty() {
            errors.push(FieldError::new("milestone", "must not be empty"));
        }
        text("milestone".into(), &self.milestone, &mut errors);
        for (name, list) in self.lists() {
            if list.len() > MAX_ENTRIES {
                errors.push(FieldError::new(
                    name,
                    format!("must have at most {MAX_ENTRIES} entries"),
                ));
            }
            for (i, entry) in list.iter().enumerate() {
                text(format!("{name}[{i}]"), entry, &mut errors);
            }
        }
        if self.strategies.len() > MAX_ENTRIES {
            errors.push(FieldError::new(
                "strategies",
                format!("must have at most {MAX_ENTRIES} entries"),
            ));
        }
        for (i, s) in self.strategies.iter().enumerate() {
            text(
                format!("strategies[{i}].approach"),
                &s.approach,
                &mut errors,
            );
            text(format!("strategies[{i}].outcome"), &s.outcome, &mut errors);
        }
        for (i, reference) in self.references.iter().enumerate() {
            if !is_reference(reference) {
                errors.push(FieldError::new(
                    format!("references[{i}]"),
                    "must be an observation:// URI or a workspace-relative path (no leading `/` \
                     or `~`, no `..`, no other scheme)",
                ));
            }
        }
        if errors.is_empty() {
            let tokens = tokenizer.count(&self.render());
            if tokens > MAX_TOKENS {
                errors.push(FieldError::new(
                    "condensation",
                    format!("costs {tokens} tokens as shown; at most {MAX_TOKENS}"),
                ));
            }
        }
        errors
    }

    fn lists(&self) -> [(&'static str, &[String]); 5] {
        [
            ("completed_work", &self.completed_work),
            ("environment_changes", &self.environment_changes),
            ("constraints", &self.constraints),
            ("open_questions", &self.open_questions),
            ("references", &self.references),
        ]
    }

    /// The memory message's text.
    pub fn render(&self) -> String {
        let mut out = format!("{MEMORY_HEADER}\n\nMilestone: {}", self.milestone.trim());
        let mut section = |title: &str, entries: Vec<String>| {
            if !entries.is_empty() {
                out.push_str(&format!("\n\n## {title}"));
                for entry in entries {
                    out.push_str("\n- ");
                    out.push_str(entry.trim());
                }
            }
        };
        section("Completed work", self.completed_work.clone());
        section(
            "Strategies",
            self.strategies
                .iter()
                .map(|s| format!("{} → {}", s.approach.trim(), s.outcome.trim()))
                .collect(),
        );
        section("Environment changes", self.environment_changes.clone());
        section("Constraints", self.constraints.clone());
        section("Open questions", self.open_questions.clone());
        section("References", self.references.clone());
        out
    }
}

/// Whether `reference` is an observation URI or a workspace-relative path.
fn is_reference(reference: &str) -> bool {
    if observation::parse_reference(reference).is_ok() {
        return true;
    }
    !reference.is_empty()
        && !reference.starts_with('/')
        && !reference.starts_with('~')
        && !reference.starts_with('\\')
        && !reference.contains("://")
        && !reference.contains(':')
        && !reference.split(['/', '\\']).any(|part| part == "..")
        && !has_nul(reference)
}

/// The session's one memory item: the last condensation, and the compaction that took it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Memory {
    pub condensation: Condensation,
    pub compaction_id: Uuid,
    /// The log's head when it was taken.
    pub head_seq: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> Condensation {
        Condensation {
            milestone: "the parser handles the new grammar".into(),
            completed_work: vec!["ported src/parse.rs".into()],
            strategies: vec![Strategy {
                approach: "a hand-written lexer".into(),
                outcome: "too slow; replaced by logos".into(),
            }],
            environment_changes: vec![],
            constraints: vec!["never change the public API".into()],
            open_questions: vec![],
            references: vec!["observation://12".into(), "src/parse.rs".into()],
        }
    }

    #[test]
    fn a_condensation_renders_its_sections() {
        let c = base();
        assert!(c.validate(Tokenizer::Chars4).is_empty());
        let text = c.render();
        assert!(text.starts_with(MEMORY_HEADER));
        assert!(
            text.contains("## Strategies\n- a hand-written lexer → too slow; replaced by logos")
        );
        assert!(
            !text.contains("## Open questions"),
            "empty sections are left out"
        );
    }

    #[test]
    fn every_broken_rule_is_named() {
        let mut c = base();
        c.completed_work = vec!["x".into(); 21];
        c.constraints = vec!["y".repeat(1_001)];
        c.references = vec![
            "/etc/passwd".into(),
            "../up.rs".into(),
            "https://x.io/a".into(),
        ];
        let fields: Vec<String> = c
            .validate(Tokenizer::Chars4)
            .into_iter()
            .map(|e| e.field)
            .collect();
        assert_eq!(
            fields,
            [
                "completed_work",
                "constraints[0]",
                "references[0]",
                "references[1]",
                "references[2]"
            ]
        );
        let mut big = base();
        big.completed_work = vec!["z ".repeat(450); 20];
        let errors = big.validate(Tokenizer::Chars4);
        assert_eq!(errors.len(), 1);
        assert!(errors[0].message.contains("at most 2000"), "{errors:?}");
    }
}
