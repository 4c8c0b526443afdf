//! Checking an event as a client sends it against every rule of its type, into its canonical
//! form.

use serde_json::Value;

use super::{
    CallKind, ContentInput, EpisodeEnd, EpisodeStart, EventBody, EventInput, EventType, Message,
    NewEvent, Note, Role, ToolCall, MAX_ID_CHARS, MAX_NAME_CHARS,
};
use crate::domain::content::{read_parts, Content, Part};
use crate::domain::{has_nul, nul_in_json, nul_in_object, FieldError, NUL_MESSAGE};

impl EventInput {
    /// Checks every rule for this event's type and returns the event in its canonical form.
    /// `index` is the event's place in its batch, for the error messages.
    pub fn validate(mut self, index: usize) -> Result<NewEvent, Vec<FieldError>> {
        let id = self.id.take();
        let pinned = self.pinned.unwrap_or(false);
        let metadata = self.metadata.take();
        let mut errors = Vec::new();
        let mut fail = |field: &str, message: String| {
            errors.push(FieldError::at(index, field, message));
        };
        let type_name = self.kind.as_str();
        let forbid = |present: bool, field: &str, fail: &mut dyn FnMut(&str, String)| {
            if present {
                fail(field, format!("not allowed on a {type_name} event"));
            }
        };

        if let Some(id) = &id {
            if id.is_empty() || id.chars().count() > MAX_ID_CHARS {
                fail("id", format!("must have 1 to {MAX_ID_CHARS} characters"));
            } else if has_nul(id) {
                fail("id", NUL_MESSAGE.into());
            }
        }
        if let Some(metadata) = &metadata {
            if let Some(path) = nul_in_object("metadata", metadata) {
                fail(&path, NUL_MESSAGE.into());
            }
        }
        let text_content = match &self.content {
            Some(ContentInput::Text(text)) => Some(text.as_str()),
            _ => None,
        };
        for (field, text) in [
            ("name", self.name.as_deref()),
            ("content", text_content),
            ("conclusion", self.conclusion.as_deref()),
        ] {
            if text.is_some_and(has_nul) {
                fail(field, NUL_MESSAGE.into());
            }
        }

        let body = match self.kind {
            EventType::Message => {
                forbid(self.episode_kind.is_some(), "kind", &mut fail);
                forbid(self.dependencies.is_some(), "dependencies", &mut fail);
                forbid(self.conclusion.is_some(), "conclusion", &mut fail);
                validate_message(self, &mut fail).map(EventBody::Message)
            }
            EventType::EpisodeStart | EventType::EpisodeEnd => {
                forbid(self.role.is_some(), "role", &mut fail);
                forbid(self.content.is_some(), "content", &mut fail);
                forbid(self.tool_calls.is_some(), "tool_calls", &mut fail);
                forbid(self.tool_call_id.is_some(), "tool_call_id", &mut fail);
                forbid(self.is_error.is_some(), "is_error", &mut fail);
                let name = required_name(self.name, "name", &mut fail);
                if self.kind == EventType::EpisodeStart {
                    forbid(self.conclusion.is_some(), "conclusion", &mut fail);
                    let dependencies = self.dependencies.unwrap_or_default();
                    if dependencies.iter().any(|d| d.is_empty()) {
                        fail("dependencies", "episode names must not be empty".into());
                    }
                    if let Some(i) = dependencies.iter().position(|d| has_nul(d)) {
                        fail(&format!("dependencies[{i}]"), NUL_MESSAGE.into());
                    }
                    match (name, self.episode_kind) {
                        (Some(name), Some(kind)) => Some(EventBody::EpisodeStart(EpisodeStart {
                            name,
                            kind,
                            dependencies,
                        })),
                        (_, None) => {
                            fail("kind", "required: exploration or action".into());
                            None
                        }
                        _ => None,
                    }
                } else {
                    forbid(self.episode_kind.is_some(), "kind", &mut fail);
                    forbid(self.dependencies.is_some(), "dependencies", &mut fail);
                    name.map(|name| {
                        EventBody::EpisodeEnd(EpisodeEnd {
                            name,
                            conclusion: self.conclusion.unwrap_or_default(),
                        })
                    })
                }
            }
            EventType::Note => {
                forbid(self.role.is_some(), "role", &mut fail);
                forbid(self.tool_calls.is_some(), "tool_calls", &mut fail);
                forbid(self.tool_call_id.is_some(), "tool_call_id", &mut fail);
                forbid(self.name.is_some(), "name", &mut fail);
                forbid(self.is_error.is_some(), "is_error", &mut fail);
                forbid(self.episode_kind.is_some(), "kind", &mut fail);
                forbid(self.dependencies.is_some(), "dependencies", &mut fail);
                forbid(self.conclusion.is_some(), "conclusion", &mut fail);
                match self.content {
                    Some(ContentInput::Text(content)) if !content.is_empty() => {
                        Some(EventBody::Note(Note { content }))
                    }
                    _ => {
                        fail("content", "required: a non-empty string".into());
                        None
                    }
                }
            }
        };

        match body {
            Some(mut body) if errors.is_empty() => {
                body.hold_arguments_as_text();
                Ok(NewEvent {
                    id,
                    body,
                    pinned,
                    metadata,
                })
            }
            _ => Err(errors),
        }
    }
}

fn required_name(
    name: Option<String>,
    field: &str,
    fail: &mut dyn FnMut(&str, String),
) -> Option<String> {
    match name {
        Some(n) if !n.is_empty() && n.chars().count() <= MAX_NAME_CHARS => Some(n),
        _ => {
            fail(
                field,
                format!("required, with 1 to {MAX_NAME_CHARS} characters"),
            );
            None
        }
    }
}

fn validate_message(input: EventInput, fail: &mut dyn FnMut(&str, String)) -> Option<Message> {
    let Some(role) = input.role else {
        fail(
            "role",
            "required on a message: system, user, assistant or tool".into(),
        );
        return None;
    };
    let tool_calls = input.tool_calls.unwrap_or_default();
    if role != Role::Assistant && !tool_calls.is_empty() {
        fail(
            "tool_calls",
            format!(
                "only assistant messages issue tool calls, not {}",
                role.as_str()
            ),
        );
    }
    for (i, call) in tool_calls.iter().enumerate() {
        if call.id.is_empty() || call.id.chars().count() > MAX_ID_CHARS {
            fail(
                &format!("tool_calls[{i}].id"),
                format!("must have 1 to {MAX_ID_CHARS} characters"),
            );
        } else if has_nul(&call.id) {
            fail(&format!("tool_calls[{i}].id"), NUL_MESSAGE.into());
        } else if tool_calls[..i].iter().any(|c| c.id == call.id) {
            fail(
                &format!("tool_calls[{i}].id"),
                format!("call id `{}` appears twice in this message", call.id),
            );
        }
        if call.name.is_empty() || call.name.chars().count() > MAX_NAME_CHARS {
            fail(
                &format!("tool_calls[{i}].name"),
                format!("must have 1 to {MAX_NAME_CHARS} characters"),
            );
        } else if has_nul(&call.name) {
            fail(&format!("tool_calls[{i}].name"), NUL_MESSAGE.into());
        }
        let arguments = format!("tool_calls[{i}].arguments");
        if !matches!(call.arguments, Value::String(_) | Value::Object(_)) {
            fail(&arguments, "must be a JSON string or object".into());
        } else if let Some(path) = nul_in_json(&arguments, &call.arguments) {
            fail(&path, NUL_MESSAGE.into());
        } else if let Some(message) = kind_mismatch(call) {
            fail(&arguments, message.into());
        }
    }
    let mut unreadable = false;
    let content = match input.content {
        Some(ContentInput::Parts(items)) => match read_parts(&items, "content") {
            Ok(parts) => Content::parts(parts),
            Err(errors) => {
                for (path, message) in errors {
                    fail(&path, message);
                }
                unreadable = true;
                Content::default()
            }
        },
        Some(ContentInput::Text(text)) => Content::Text(text),
        None => Content::default(),
    };
    let parts = content.part_list();
    if role != Role::Assistant && parts.iter().any(Part::is_reasoning) {
        fail(
            "content",
            "only assistant messages carry thinking or reasoning".into(),
        );
    }
    // A command that prints nothing has a result with no output; an assistant message may carry
    // only tool calls or only reasoning.
    let may_be_empty = role == Role::Tool
        || (role == Role::Assistant
            && (!tool_calls.is_empty() || parts.iter().any(Part::is_reasoning)));
    let says_nothing =
        content.text().is_empty() && !parts.iter().any(|p| matches!(p, Part::Image(_)));
    if says_nothing && !may_be_empty && !unreadable {
        fail(
            "content",
            "required and must not be empty (only a tool result, or an assistant message with \
             tool calls or reasoning, may be empty)"
                .into(),
        );
    }
    let (tool_call_id, is_error) = if role == Role::Tool {
        let id = match input.tool_call_id {
            Some(id) if has_nul(&id) => {
                fail("tool_call_id", NUL_MESSAGE.into());
                None
            }
            Some(id) if !id.is_empty() => Some(id),
            _ => {
                fail(
                    "tool_call_id",
                    "required on a tool result: the id of the call it answers".into(),
                );
                None
            }
        };
        (id, Some(input.is_error.unwrap_or(false)))
    } else {
        if input.tool_call_id.is_some() {
            fail("tool_call_id", "only tool messages answer a call".into());
        }
        if input.is_error.is_some() {
            fail("is_error", "only tool messages carry is_error".into());
        }
        (None, None)
    };
    if let Some(name) = &input.name {
        if name.is_empty() || name.chars().count() > MAX_NAME_CHARS {
            fail(
                "name",
                format!("must have 1 to {MAX_NAME_CHARS} characters"),
            );
        }
    }
    Some(Message {
        role,
        content,
        tool_calls,
        tool_call_id,
        name: input.name,
        is_error,
    })
}

/// What is wrong with a call's arguments for its kind: a custom call's must be
/// `{"input": text}`, a shell call's its action and an apply_patch call's its operation.
fn kind_mismatch(call: &ToolCall) -> Option<&'static str> {
    let arguments = call.arguments_value();
    let field = |key| match &*arguments {
        Value::Object(map) => map.get(key),
        _ => None,
    };
    let text = |key| field(key).is_some_and(Value::is_string);
    match call.kind {
        CallKind::Function => None,
        CallKind::Custom if !text("input") => {
            Some("a custom call's arguments must be {\"input\": text}, its freeform input")
        }
        CallKind::Shell => {
            let commands = field("commands").and_then(Value::as_array);
            (!commands.is_some_and(|c| !c.is_empty() && c.iter().all(Value::is_string))).then_some(
                "a shell call's arguments must be its action, {\"commands\": [text, ...]}, with at least one command",
            )
        }
        CallKind::ApplyPatch => match field("type").and_then(Value::as_str) {
            Some("create_file" | "update_file") if text("path") && text("diff") => None,
            Some("delete_file") if text("path") => None,
            _ => Some(
                "an apply_patch call's arguments must be its operation: {\"type\": \"create_file\" or \"update_file\", \"path\", \"diff\"} or {\"type\": \"delete_file\", \"path\"}",
            ),
        },
        CallKind::Custom => None,
    }
}
