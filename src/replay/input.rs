//! Recorded sessions read as OpenAI chat messages, whatever shape they were recorded in: the
//! development corpus's chat log (one `{role, content, tool_calls: [{id, name, arguments}],
//! tool_call_id}` a line), OpenAI chat message lists, or ctxd's own event objects (their
//! messages). A file is a JSON array or one JSON object a line.

use serde_json::{json, Map, Value};

/// The messages of the session in `text`; `name` names the file in errors.
pub fn read(name: &str, text: &str) -> Result<Vec<Value>, String> {
    let items: Vec<Value> = if text.trim_start().starts_with('[') {
        serde_json::from_str(text).map_err(|e| format!("{name}: not a JSON array: {e}"))?
    } else {
        text.lines()
            .enumerate()
            .filter(|(_, line)| !line.trim().is_empty())
            .map(|(i, line)| {
                serde_json::from_str(line).map_err(|e| format!("{name}:{}: {e}", i + 1))
            })
            .collect::<Result<_, _>>()?
    };
    let mut messages = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        let Value::Object(object) = item else {
            return Err(format!("{name}: item {i} is not an object"));
        };
        match object.get("type").and_then(Value::as_str) {
            // ctxd's events: only messages go to the model.
            Some("message") | None => messages.push(chat(object)),
            Some(_) => {}
        }
    }
    if messages.is_empty() {
        return Err(format!("{name}: no messages"));
    }
    Ok(messages)
}

/// One message in OpenAI chat shape: tool calls as `{id, type, function: {name, arguments}}`.
fn chat(mut object: Map<String, Value>) -> Value {
    object.remove("type");
    for key in ["id", "pinned", "metadata", "is_error"] {
        object.remove(key);
    }
    if object.get("content").is_none_or(Value::is_null) && object.get("tool_calls").is_none() {
        object.insert("content".into(), Value::String(String::new()));
    }
    if let Some(Value::Array(calls)) = object.get_mut("tool_calls") {
        for call in calls.iter_mut() {
            if call.get("function").is_some() {
                continue;
            }
            let arguments = match call.get("arguments") {
                Some(Value::String(text)) => text.clone(),
                Some(other) => other.to_string(),
                None => "{}".into(),
            };
            *call = json!({"id": call["id"], "type": "function",
                "function": {"name": call["name"], "arguments": arguments}});
        }
    }
    if object
        .get("tool_calls")
        .is_some_and(|c| c.as_array().is_some_and(Vec::is_empty))
    {
        object.remove("tool_calls");
    }
    Value::Object(object)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shape_reads_as_chat_messages() {
        let corpus = r#"{"role": "user", "content": "hi"}
{"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "ls", "arguments": "{}"}]}
{"role": "tool", "tool_call_id": "c1", "content": "a.rs"}"#;
        let read = read("corpus.jsonl", corpus).unwrap();
        assert_eq!(read[1]["tool_calls"][0]["function"]["name"], "ls");
        let events = r#"[{"type": "note", "content": "x"},
            {"type": "message", "id": "m1", "role": "user", "content": "hi"}]"#;
        let read = super::read("events.json", events).unwrap();
        assert_eq!(read, [json!({"role": "user", "content": "hi"})]);
        assert!(super::read("x", "[]").is_err());
        assert!(super::read("x", "{oops").unwrap_err().contains("x:1"));
    }
}
