//! A tool call an assistant message issues, and how its arguments read.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

/// A tool call issued by an assistant message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolCall {
    /// The provider's call id; the tool result answers it with `tool_call_id`.
    #[schema(min_length = 1, max_length = 256)]
    pub id: String,
    /// The tool's name.
    #[schema(min_length = 1, max_length = 256)]
    pub name: String,
    /// The arguments, as the provider gave them: a JSON string (OpenAI) or an object (Anthropic).
    /// Stored and returned as the JSON string either way.
    #[serde(default = "empty_arguments")]
    #[schema(value_type = ToolArguments)]
    pub arguments: Value,
    /// `custom` for a call of a freeform tool (OpenAI's custom tools, such as Codex's
    /// `apply_patch`), whose input is text: its arguments are then `{"input": text}`. `shell`
    /// and `apply_patch` for a call of OpenAI's built-in shell and apply_patch tools
    /// (`shell_call`, `apply_patch_call` items): the arguments are the call's `action`
    /// (`{"commands": [...]}`) or `operation` (`{"type": "update_file", "path", "diff"}`).
    /// Omitted for a function call.
    #[serde(default, skip_serializing_if = "CallKind::is_function")]
    pub kind: CallKind,
}

/// The key of an archived call's arguments (in a view) that names their size and where to
/// recall them, in place of the long arguments it leaves out.
pub const ARCHIVED_ARGUMENTS_KEY: &str = "archived_arguments";

/// What kind of tool a call calls.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum CallKind {
    /// A function tool: the arguments are a JSON object.
    #[default]
    Function,
    /// A freeform tool: the input is text, held as the arguments' `input`.
    Custom,
    /// OpenAI's shell tool: the arguments are the `action`, `{"commands": [...],
    /// "timeout_ms"?, "max_output_length"?}`.
    Shell,
    /// OpenAI's apply_patch tool: the arguments are the `operation`, `{"type": "create_file" |
    /// "update_file" | "delete_file", "path", "diff"}` (no diff to delete).
    ApplyPatch,
}

impl CallKind {
    pub fn is_function(&self) -> bool {
        *self == Self::Function
    }
}

/// Tool-call arguments as a client may send them (documentation only: the field is a `Value`).
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
#[allow(dead_code)]
enum ToolArguments {
    /// The JSON text, as OpenAI gives it.
    Text(String),
    /// The object, as Anthropic gives it.
    Object(Map<String, Value>),
}

fn empty_arguments() -> Value {
    Value::Object(Map::new())
}

impl ToolCall {
    /// The arguments as the text a provider sees.
    pub fn arguments_text(&self) -> Cow<'_, str> {
        match &self.arguments {
            Value::String(s) => s.as_str().into(),
            other => other.to_string().into(),
        }
    }

    /// A call of `name` to a freeform tool with `input`.
    pub fn custom(id: String, name: String, input: &str) -> Self {
        ToolCall {
            id,
            name,
            arguments: Value::String(serde_json::json!({ "input": input }).to_string()),
            kind: CallKind::Custom,
        }
    }

    /// A freeform tool's input text: the arguments' `input`, or the arguments' text when they
    /// have none (a view that shows the call's input archived names it there).
    pub fn custom_input(&self) -> Cow<'_, str> {
        match self.arguments_value() {
            Cow::Owned(Value::Object(mut map)) => match map.remove("input") {
                Some(Value::String(text)) => text.into(),
                _ => self.arguments_text(),
            },
            Cow::Borrowed(Value::Object(map)) => match map.get("input") {
                Some(Value::String(text)) => text.as_str().into(),
                _ => self.arguments_text(),
            },
            _ => self.arguments_text(),
        }
    }

    /// Whether the call only reads or searches documents (see [`super::reads_documents_only`]).
    pub fn reads_documents_only(&self) -> bool {
        super::reads_documents_only(&self.name, &self.arguments_value())
    }

    /// The arguments as a value: the JSON text a provider sent parsed, an object as it is; a
    /// text that is not JSON (a freeform tool's input) as that string.
    pub fn arguments_value(&self) -> Cow<'_, Value> {
        match &self.arguments {
            Value::String(s) => {
                serde_json::from_str(s).map_or(Cow::Borrowed(&self.arguments), Cow::Owned)
            }
            other => Cow::Borrowed(other),
        }
    }
}

/// How a command of a shell call ended. A failed command's output text ends with its line
/// (`[exit code 2]`, `[timed out]`), which a view shows as the text and gives back to OpenAI's
/// Responses API as the output's `outcome`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShellOutcome {
    Exit(i64),
    Timeout,
}

impl ShellOutcome {
    /// The line a failed command's output ends with; none for exit code 0.
    pub fn line(self) -> Option<String> {
        match self {
            Self::Exit(0) => None,
            Self::Exit(code) => Some(format!("[exit code {code}]")),
            Self::Timeout => Some("[timed out]".into()),
        }
    }

    /// A `shell_call_output`'s chunks (`{stdout, stderr, outcome}`) as one text, each command's
    /// stdout, its stderr and, when it failed, its [`line`](Self::line); and whether one
    /// failed. A chunk that is not of that shape is named (`output[1].outcome`).
    pub fn output_text(chunks: &[Value]) -> Result<(String, bool), (String, &'static str)> {
        let mut lines = Vec::new();
        let mut failed = false;
        for (k, chunk) in chunks.iter().enumerate() {
            let text = |key| chunk.get(key).and_then(Value::as_str);
            let (Some(stdout), Some(stderr)) = (text("stdout"), text("stderr")) else {
                return Err((format!("output[{k}]"), "must have stdout and stderr text"));
            };
            let outcome = chunk.get("outcome");
            let outcome = match outcome.and_then(|o| o.get("type")).and_then(Value::as_str) {
                Some("exit") => outcome
                    .and_then(|o| o.get("exit_code"))
                    .and_then(Value::as_i64)
                    .map(Self::Exit),
                Some("timeout") => Some(Self::Timeout),
                _ => None,
            };
            let Some(outcome) = outcome else {
                return Err((
                    format!("output[{k}].outcome"),
                    "must be {\"type\": \"exit\", \"exit_code\": n} or {\"type\": \"timeout\"}",
                ));
            };
            failed |= outcome != Self::Exit(0);
            let said = [stdout, stderr].map(|t| t.trim_end_matches('\n'));
            lines.extend(
                said.into_iter()
                    .filter(|t| !t.is_empty())
                    .map(str::to_owned),
            );
            lines.extend(outcome.line());
        }
        Ok((lines.join("\n"), failed))
    }

    /// The output text without its last line when that line names how the command ended, and
    /// the outcome: that line's, or exit code 1 for a result marked failed, 0 otherwise.
    pub fn split(text: &str, is_error: bool) -> (&str, Self) {
        let (head, last) = text.rsplit_once('\n').unwrap_or(("", text));
        let named = match last {
            "[timed out]" => Some(Self::Timeout),
            _ => last
                .strip_prefix("[exit code ")
                .and_then(|rest| rest.strip_suffix(']'))
                .and_then(|code| code.parse().ok())
                .map(Self::Exit),
        };
        match named {
            Some(outcome) => (head, outcome),
            None => (text, Self::Exit(i64::from(is_error))),
        }
    }
}
