//! Renderer tests: every provider shape over hand-made and random views. The builders and
//! shape summaries here are shared by the files below.

mod cases;
mod properties;
mod providers;

use std::borrow::Cow;

use serde_json::{json, Value};

use super::*;
use crate::domain::compaction::Projection;

fn message(role: Role, content: &str) -> ViewMessage<'static> {
    ViewMessage {
        seq: Some(1),
        role,
        content: content.to_owned().into(),
        tool_calls: Cow::Borrowed(&[]),
        parts: Cow::Borrowed(&[]),
        reasoning: false,
        tool_call_id: None,
        name: None,
        is_error: false,
        projection: Projection::Full,
        tokens: 1,
    }
}

fn system(content: &str) -> ViewMessage<'static> {
    message(Role::System, content)
}

fn user(content: &str) -> ViewMessage<'static> {
    message(Role::User, content)
}

fn summary(content: &str) -> ViewMessage<'static> {
    ViewMessage {
        seq: None,
        projection: Projection::Summary,
        ..user(content)
    }
}

fn assistant(content: &str) -> ViewMessage<'static> {
    message(Role::Assistant, content)
}

fn call(id: &str, arguments: Value) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: "shell".into(),
        arguments,
        kind: Default::default(),
    }
}

fn calls(content: &str, ids: &[&str]) -> ViewMessage<'static> {
    ViewMessage {
        tool_calls: ids
            .iter()
            .map(|id| call(id, json!({"cmd": id})))
            .collect::<Vec<_>>()
            .into(),
        ..assistant(content)
    }
}

fn result(id: &str, content: &str) -> ViewMessage<'static> {
    ViewMessage {
        tool_call_id: Some(id.to_owned().into()),
        name: Some("shell".into()),
        ..message(Role::Tool, content)
    }
}

fn error_result(id: &str, content: &str) -> ViewMessage<'static> {
    ViewMessage {
        is_error: true,
        ..result(id, content)
    }
}

/// One line per OpenAI message: its role, with the call ids it issues or answers.
fn openai_shape(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| {
            let role = m["role"].as_str().unwrap_or("?");
            let ids: Vec<&str> = match m.get("tool_calls").and_then(Value::as_array) {
                Some(calls) => calls.iter().filter_map(|c| c["id"].as_str()).collect(),
                None => m["tool_call_id"].as_str().into_iter().collect(),
            };
            if ids.is_empty() {
                role.to_owned()
            } else {
                format!("{role}: {}", ids.join(" "))
            }
        })
        .collect()
}

/// `request` without Anthropic's cache breakpoints: what the model reads, and what a later
/// view repeats of it.
fn without_breakpoints(mut request: Value) -> Value {
    without_cache_control(&mut request);
    request
}

/// One line per Anthropic message: its role and its blocks' types (with their tool ids).
fn anthropic_shape(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| {
            let blocks: Vec<String> = m["content"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|b| {
                    let kind = b["type"].as_str().unwrap_or("?");
                    match b.get("id").or(b.get("tool_use_id")).and_then(Value::as_str) {
                        Some(id) => format!("{kind}({id})"),
                        None => kind.to_owned(),
                    }
                })
                .collect();
            format!(
                "{}: {}",
                m["role"].as_str().unwrap_or("?"),
                blocks.join(" ")
            )
        })
        .collect()
}
