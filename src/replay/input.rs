//! Recorded sessions read as OpenAI chat messages, whatever shape they were recorded in: the
//! development corpus's chat log (one `{role, content, tool_calls: [{id, name, arguments}],
//! tool_call_id}` a line), OpenAI chat message lists, Anthropic message lists (content blocks,
//! tool_use and tool_result), Claude Code session logs and print mode's `stream-json` output
//! (one row a line, a message's streamed rows merged, a sub-agent's rows left out of its
//! parent's log and a sub-agent's own log read whole), Gemini `Content` lists (as Gemini CLI
//! records a chat), OpenAI Responses items (an `input` list, or a Codex CLI rollout), SWE-agent
//! `.traj` files (their `history`), or ctxd's own event objects (their messages). A file is a JSON array or object, or one JSON object a line.

use serde_json::{json, Map, Value};

mod responses;

use responses::{Responses, Row};

/// A chat tool call's name and its arguments as ctxd holds them: a function call's JSON text,
/// a freeform (custom) call's input as `{"input": text}`.
pub fn chat_call(call: &Value) -> (&str, String) {
    match call.get("custom") {
        Some(custom) => (
            custom["name"].as_str().unwrap_or_default(),
            json!({"input": custom["input"].as_str().unwrap_or_default()}).to_string(),
        ),
        None => (
            call["function"]["name"].as_str().unwrap_or_default(),
            call["function"]["arguments"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        ),
    }
}

/// The messages of the session in `text`; `name` names the file in errors.
pub fn read(name: &str, text: &str) -> Result<Vec<Value>, String> {
    let trimmed = text.trim_start();
    let whole: Option<Value> = if trimmed.starts_with('[') || trimmed.starts_with('{') {
        serde_json::from_str(text).ok()
    } else {
        None
    };
    let items: Vec<Value> = if let Some(Value::Array(items)) = whole {
        items
    } else if let Some(Value::Object(mut object)) = whole {
        // A SWE-agent trajectory (its model-facing `history`), or a request body (`messages`,
        // with Anthropic's `system` apart).
        let system = object.remove("system").filter(|s| s.is_string());
        match object
            .remove("history")
            .or_else(|| object.remove("messages"))
        {
            Some(Value::Array(mut items)) => {
                if let Some(system) = system {
                    items.insert(0, json!({"role": "system", "content": system}));
                }
                items
            }
            _ => {
                return Err(format!(
                    "{name}: a JSON object without a `history` or `messages` list"
                ))
            }
        }
    } else {
        text.lines()
            .enumerate()
            .filter(|(_, line)| !line.trim().is_empty())
            .map(|(i, line)| {
                serde_json::from_str(line).map_err(|e| format!("{name}:{}: {e}", i + 1))
            })
            .collect::<Result<_, _>>()?
    };
    // A sub-agent's rows are left out of its parent's log; a sub-agent's own log (every row
    // a sub-agent's) is read as the session it is.
    let parent = items
        .iter()
        .any(|item| claude_code_row(item) && !sub_agent_row(item));
    let mut messages = Vec::with_capacity(items.len());
    let mut claude_code: Option<(String, Value)> = None;
    let mut gemini = Gemini::default();
    let mut responses = Responses::default();
    for (i, item) in items.into_iter().enumerate() {
        let sub_agents = parent && claude_code_row(&item) && sub_agent_row(&item);
        if sub_agents || compact_summary_row(&item) {
            continue;
        }
        let Value::Object(mut object) = item else {
            return Err(format!("{name}: item {i} is not an object"));
        };
        // A Claude Code row: its message, streamed over several rows with the same id.
        if let (Some("user" | "assistant"), Some(Value::Object(_))) = (
            object.get("type").and_then(Value::as_str),
            object.get("message"),
        ) {
            let message = object.remove("message").unwrap_or_default();
            let id = message["id"].as_str().unwrap_or_default().to_owned();
            match &mut claude_code {
                Some((last, merged)) if !id.is_empty() && *last == id => {
                    let more = blocks(&message["content"]);
                    if let Some(Value::Array(content)) = merged.get_mut("content") {
                        content.extend(more);
                    }
                }
                _ => {
                    if let Some((_, done)) = claude_code.take() {
                        messages.extend(anthropic(done));
                    }
                    let mut message = message;
                    message["content"] = Value::Array(blocks(&message["content"]));
                    claude_code = Some((id, message));
                }
            }
            continue;
        }
        // A Responses item (an `input` list, a Codex rollout): calls gather into their turn.
        let object = match Row::of(object) {
            Row::Skip => continue,
            Row::Item(item) => {
                if let Some((_, done)) = claude_code.take() {
                    messages.extend(anthropic(done));
                }
                messages.extend(responses.read(&item));
                continue;
            }
            Row::Instructions(text) => {
                messages.extend(responses.finish());
                messages.push(json!({"role": "system", "content": text}));
                continue;
            }
            Row::Other(object) => object,
        };
        // A row that carries no message (Claude Code's progress, queue and snapshot rows, a
        // ctxd note) neither ends a message streamed around it nor adds one.
        let kind = object.get("type").and_then(Value::as_str);
        let gemini_content =
            object.get("parts").is_some_and(Value::is_array) && object.get("content").is_none();
        if !gemini_content
            && !matches!(
                kind,
                None | Some("message" | "episode_start" | "episode_end")
            )
        {
            continue;
        }
        if let Some((_, done)) = claude_code.take() {
            messages.extend(anthropic(done));
        }
        messages.extend(responses.finish());
        // A Gemini `Content` (`role` user or model, `parts`), as Gemini CLI records a chat.
        if gemini_content {
            messages.extend(gemini.read(&object));
            continue;
        }
        match kind {
            // ctxd's events: only messages go to the model.
            Some("message") | None if object.get("content").is_some_and(Value::is_array) => {
                messages.extend(anthropic(Value::Object(object)));
            }
            // Episodes are appended as events between turns (see `session`).
            Some("episode_start" | "episode_end") => messages.push(Value::Object(object)),
            _ => messages.push(chat(object)),
        }
    }
    if let Some((_, done)) = claude_code.take() {
        messages.extend(anthropic(done));
    }
    messages.extend(responses.finish());
    if messages.is_empty() {
        return Err(format!("{name}: no messages"));
    }
    Ok(messages)
}

/// Gemini `Content` objects as chat messages: a model turn's text (its thoughts left out) and
/// `functionCall` parts as tool calls; a user turn's `functionResponse` parts as tool results,
/// then its text. A call without an id gets one, and a response without one answers the oldest
/// open call of its name; one that answers no call is shown as user text.
#[derive(Default)]
struct Gemini {
    /// Calls not answered yet: (name, id).
    open: Vec<(String, String)>,
    issued: usize,
}

impl Gemini {
    fn read(&mut self, content: &Map<String, Value>) -> Vec<Value> {
        let parts = content["parts"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default();
        let text: Vec<&str> = parts
            .iter()
            .filter(|p| p["thought"] != Value::Bool(true))
            .filter_map(|p| p["text"].as_str())
            .collect();
        let text = text.join("\n");
        if content.get("role").and_then(Value::as_str) == Some("model") {
            let calls: Vec<Value> = parts
                .iter()
                .filter_map(|p| p.get("functionCall"))
                .map(|call| {
                    let name = call["name"].as_str().unwrap_or("tool").to_owned();
                    self.issued += 1;
                    let id = call["id"]
                        .as_str()
                        .map_or_else(|| format!("gemini_call_{}", self.issued), str::to_owned);
                    self.open.push((name.clone(), id.clone()));
                    json!({"id": id, "type": "function",
                        "function": {"name": name, "arguments": call["args"].to_string()}})
                })
                .collect();
            if text.is_empty() && calls.is_empty() {
                return Vec::new();
            }
            let mut message = json!({"role": "assistant", "content": text});
            if !calls.is_empty() {
                message["tool_calls"] = Value::Array(calls);
            }
            return vec![message];
        }
        let mut messages = Vec::new();
        for response in parts.iter().filter_map(|p| p.get("functionResponse")) {
            let name = response["name"].as_str().unwrap_or("tool");
            let output = match &response["response"] {
                Value::Object(fields) if fields.len() == 1 && fields.contains_key("output") => {
                    fields["output"]
                        .as_str()
                        .map_or_else(|| fields["output"].to_string(), str::to_owned)
                }
                other => other.to_string(),
            };
            let answered = match response["id"].as_str() {
                Some(id) => self.open.iter().position(|(_, open)| open == id),
                None => self.open.iter().position(|(open, _)| open == name),
            };
            match answered.map(|at| self.open.remove(at)) {
                Some((name, id)) => messages.push(json!({"role": "tool", "tool_call_id": id,
                    "name": name, "content": output})),
                None => messages.push(json!({"role": "user",
                    "content": format!("Result of {name}:\n{output}")})),
            }
        }
        if !text.is_empty() {
            messages.push(json!({"role": "user", "content": text}));
        }
        messages
    }
}

/// A Claude Code row: a user's or assistant's message (session logs and print mode's stream).
fn claude_code_row(item: &Value) -> bool {
    matches!(item["type"].as_str(), Some("user" | "assistant")) && item["message"].is_object()
}

/// The summary Claude Code wrote when it compacted its own context ("This session is being
/// continued from a previous conversation…"), sent as a user message. In a replay ctxd manages
/// the context, and the history that summary stands for is in the log before it: replayed, it
/// would be a second summary of the same turns, read as the user's words.
fn compact_summary_row(item: &Value) -> bool {
    claude_code_row(item) && item["isCompactSummary"] == Value::Bool(true)
}

/// A sub-agent's row: a sidechain of a session log, or in print mode's stream
/// (`claude -p --output-format stream-json`) one of the task call it answers.
fn sub_agent_row(item: &Value) -> bool {
    item["isSidechain"] == Value::Bool(true) || item["parent_tool_use_id"].is_string()
}

/// Content as a list of blocks: a string becomes one text block.
fn blocks(content: &Value) -> Vec<Value> {
    match content {
        Value::Array(blocks) => blocks.clone(),
        Value::String(text) => vec![json!({"type": "text", "text": text})],
        _ => Vec::new(),
    }
}

/// The text of content blocks (or of a string), joined.
fn text_of(content: &Value) -> String {
    blocks(content)
        .iter()
        .filter_map(|b| match b["type"].as_str() {
            Some("text") => b["text"].as_str().map(str::to_owned),
            Some("image") => Some("[image]".to_owned()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// An Anthropic message (content blocks) as chat messages: an assistant's tool_use blocks as
/// tool calls; a user's tool_result blocks as tool messages first, then its text.
fn anthropic(message: Value) -> Vec<Value> {
    let role = message["role"].as_str().unwrap_or("user");
    let content = blocks(&message["content"]);
    if role == "assistant" {
        let calls: Vec<Value> = content
            .iter()
            .filter(|b| b["type"] == "tool_use")
            .map(|b| {
                json!({"id": b["id"], "type": "function", "function": {"name": b["name"],
                "arguments": b["input"].to_string()}})
            })
            .collect();
        let text = text_of(&message["content"]);
        // Only thinking (a turn cut off before it said or called anything): nothing the model
        // would be sent.
        if text.is_empty() && calls.is_empty() {
            return Vec::new();
        }
        let mut chat = json!({"role": "assistant", "content": text});
        if !calls.is_empty() {
            chat["tool_calls"] = Value::Array(calls);
        }
        return vec![chat];
    }
    let mut out: Vec<Value> = content
        .iter()
        .filter(|b| b["type"] == "tool_result")
        .map(|b| {
            json!({"role": "tool", "tool_call_id": b["tool_use_id"],
            "content": text_of(&b["content"])})
        })
        .collect();
    let text = text_of(&Value::Array(
        content
            .into_iter()
            .filter(|b| b["type"] != "tool_result")
            .collect(),
    ));
    if !text.is_empty() {
        out.push(json!({"role": role, "content": text}));
    }
    out
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
            if call.get("function").is_some() || call.get("custom").is_some() {
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

    /// Each message's role, in order.
    fn roles(read: &[Value]) -> Vec<&str> {
        read.iter().map(|m| m["role"].as_str().unwrap()).collect()
    }

    /// Each message's role and text, in order.
    fn said(read: &[Value]) -> Vec<(&str, &str)> {
        read.iter()
            .map(|m| (m["role"].as_str().unwrap(), m["content"].as_str().unwrap()))
            .collect()
    }

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
        let anthropic = r#"[{"role": "user", "content": "go"},
            {"role": "assistant", "content": [{"type": "thinking", "thinking": "t", "signature": "s"},
                {"type": "tool_use", "id": "t1", "name": "bash", "input": {"cmd": "ls"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a.rs"},
                {"type": "text", "text": "and?"}]}]"#;
        let read = super::read("anthropic.json", anthropic).unwrap();
        assert_eq!(roles(&read), ["user", "assistant", "tool", "user"]);
        assert_eq!(
            read[1]["tool_calls"][0]["function"]["arguments"],
            "{\"cmd\":\"ls\"}"
        );
        // Claude Code rows: one message streamed over two rows, a sidechain row left out.
        let rows = r#"{"type": "user", "message": {"role": "user", "content": "fix it"}}
{"type": "assistant", "message": {"id": "m1", "role": "assistant", "content": [{"type": "text", "text": "Looking."}]}}
{"type": "assistant", "message": {"id": "m1", "role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Read", "input": {}}]}}
{"type": "user", "isSidechain": true, "message": {"role": "user", "content": "aside"}}
{"type": "user", "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}}"#;
        let read = super::read("claude.jsonl", rows).unwrap();
        assert_eq!(roles(&read), ["user", "assistant", "tool"]);
        assert_eq!(read[1]["content"], "Looking.");
        // A message's thinking and text streamed with a progress row between them are one
        // message; a turn with only thinking (cut off) says nothing and is left out.
        let rows = r#"{"type": "user", "message": {"role": "user", "content": "review it"}}
{"type": "assistant", "message": {"id": "m1", "role": "assistant", "content": [{"type": "thinking", "thinking": "Read it first.", "signature": "s"}]}}
{"type": "queue-operation", "operation": "enqueue"}
{"type": "progress", "data": {}}
{"type": "assistant", "message": {"id": "m1", "role": "assistant", "content": [{"type": "text", "text": "It is fine."}]}}
{"type": "user", "message": {"role": "user", "content": "and now?"}}
{"type": "assistant", "message": {"id": "m2", "role": "assistant", "content": [{"type": "thinking", "thinking": "Hm.", "signature": "s"}]}}
{"type": "system", "subtype": "turn_duration"}
{"type": "user", "message": {"role": "user", "content": "hello?"}}"#;
        let read = super::read("claude.jsonl", rows).unwrap();
        assert_eq!(
            said(&read),
            [
                ("user", "review it"),
                ("assistant", "It is fine."),
                ("user", "and now?"),
                ("user", "hello?")
            ]
        );
        // The summary Claude Code wrote when it compacted its own context is left out (the
        // turns it stands for are in the log); what the harness adds for the model (a caveat,
        // a skill's text: `isMeta`) is sent to the model, and kept.
        let rows = r#"{"type": "user", "message": {"role": "user", "content": "fix it"}}
{"type": "assistant", "message": {"id": "m1", "role": "assistant", "content": [{"type": "text", "text": "Fixed src/a.rs."}]}}
{"type": "system", "subtype": "compact_boundary"}
{"type": "user", "isCompactSummary": true, "isVisibleInTranscriptOnly": true, "message": {"role": "user", "content": "This session is being continued from a previous conversation that ran out of context. You must never touch src/b.rs."}}
{"type": "user", "isMeta": true, "message": {"role": "user", "content": "Caveat: the messages below were generated by the user while running local commands."}}
{"type": "user", "message": {"role": "user", "content": "thanks"}}"#;
        let read = super::read("claude.jsonl", rows).unwrap();
        let texts: Vec<&str> = read
            .iter()
            .map(|m| m["content"].as_str().unwrap())
            .collect();
        assert_eq!(
            texts,
            [
                "fix it",
                "Fixed src/a.rs.",
                "Caveat: the messages below were generated by the user while running local commands.",
                "thanks"
            ]
        );
        // A sub-agent's own log (every row a sidechain) is the session it is.
        let sub_agent = r#"{"type": "user", "isSidechain": true, "agentId": "a1", "message": {"role": "user", "content": "explore"}}
{"type": "assistant", "isSidechain": true, "agentId": "a1", "message": {"id": "m1", "role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Grep", "input": {"pattern": "x"}}]}}
{"type": "user", "isSidechain": true, "agentId": "a1", "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a.ex:3"}]}}"#;
        let read = super::read("agent-a1.jsonl", sub_agent).unwrap();
        assert_eq!(roles(&read), ["user", "assistant", "tool"]);
        assert_eq!(read[2]["content"], "a.ex:3");
        // Print mode's stream: its init and result rows, and a sub-agent's rows, left out.
        let stream = r#"{"type": "system", "subtype": "init", "session_id": "s", "tools": ["Task"]}
{"type": "assistant", "message": {"id": "m1", "role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Task", "input": {"prompt": "find it"}}]}, "parent_tool_use_id": null}
{"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": "find it"}]}, "parent_tool_use_id": "t1"}
{"type": "assistant", "message": {"id": "m2", "role": "assistant", "content": [{"type": "tool_use", "id": "t2", "name": "Bash", "input": {"command": "ls"}}]}, "parent_tool_use_id": "t1"}
{"type": "user", "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t2", "content": "a.rs"}]}, "parent_tool_use_id": "t1"}
{"type": "user", "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "in a.rs"}]}, "parent_tool_use_id": null}
{"type": "assistant", "message": {"id": "m3", "role": "assistant", "content": [{"type": "text", "text": "Found."}]}, "parent_tool_use_id": null}
{"type": "result", "subtype": "success", "result": "Found.", "session_id": "s"}"#;
        let read = super::read("stream.jsonl", stream).unwrap();
        assert_eq!(roles(&read), ["assistant", "tool", "assistant"]);
        assert_eq!(read[1]["tool_call_id"], "t1");
        assert_eq!(read[1]["content"], "in a.rs");
        // Gemini contents: thoughts left out, calls paired with responses by id or by name.
        let gemini = r#"[{"role": "user", "parts": [{"text": "fix it"}]},
            {"role": "model", "parts": [{"text": "Planning.", "thought": true}]},
            {"role": "model", "parts": [{"text": "Reading.", "thought": true},
                {"functionCall": {"id": "g1", "name": "read_file", "args": {"path": "a.ts"}}},
                {"functionCall": {"name": "grep", "args": {"pattern": "x"}}}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "grep", "response": {"output": "a.ts:3"}}},
                {"functionResponse": {"id": "g1", "name": "read_file", "response": {"output": "let x"}}},
                {"functionResponse": {"name": "shell", "response": {"output": "ran by the user"}}}]}]"#;
        let read = super::read("trajectory.json", gemini).unwrap();
        assert_eq!(roles(&read), ["user", "assistant", "tool", "tool", "user"]);
        assert_eq!(read[1]["content"], "");
        assert_eq!(
            read[1]["tool_calls"][0]["function"]["arguments"],
            "{\"path\":\"a.ts\"}"
        );
        let grep = read[1]["tool_calls"][1]["id"].clone();
        assert_eq!(
            (&read[2]["tool_call_id"], &read[2]["content"]),
            (&grep, &json!("a.ts:3"))
        );
        assert_eq!(read[3]["tool_call_id"], "g1");
        assert_eq!(read[4]["content"], "Result of shell:\nran by the user");
        // A Codex CLI rollout: its metadata, settings, UI events and own compaction left out;
        // a turn's text, reasoning and calls (a function, a freeform `apply_patch`, a local
        // shell) one assistant message, each output a tool message, a developer message the
        // system's.
        let rollout = r#"{"type": "session_meta", "payload": {"id": "s", "instructions": "be brief"}}
{"type": "response_item", "payload": {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "sandboxed"}]}}
{"type": "response_item", "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix a.rs"}, {"type": "input_image", "image_url": "data:"}]}}
{"type": "event_msg", "payload": {"type": "user_message", "message": "fix a.rs"}}
{"type": "turn_context", "payload": {"cwd": "/w"}}
{"type": "response_item", "payload": {"type": "reasoning", "summary": [], "encrypted_content": "x"}}
{"type": "response_item", "payload": {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Reading."}]}}
{"type": "response_item", "payload": {"type": "function_call", "name": "shell", "arguments": "{\"command\":[\"cat\",\"a.rs\"]}", "call_id": "c1"}}
{"type": "response_item", "payload": {"type": "custom_tool_call", "name": "apply_patch", "input": "*** Begin Patch", "call_id": "c2"}}
{"type": "response_item", "payload": {"type": "function_call_output", "call_id": "c1", "output": "fn a() {}"}}
{"type": "response_item", "payload": {"type": "custom_tool_call_output", "call_id": "c2", "output": "Done!"}}
{"type": "response_item", "payload": {"type": "local_shell_call", "call_id": "c3", "status": "completed", "action": {"type": "exec", "command": ["ls"]}}}
{"type": "response_item", "payload": {"type": "local_shell_call_output", "call_id": "c3", "output": "a.rs"}}
{"type": "response_item", "payload": {"type": "shell_call", "call_id": "c4", "action": {"commands": ["cargo test"]}}}
{"type": "response_item", "payload": {"type": "apply_patch_call", "call_id": "c5", "status": "completed", "operation": {"type": "delete_file", "path": "b.rs"}}}
{"type": "response_item", "payload": {"type": "shell_call_output", "call_id": "c4", "output": [{"stdout": "running 2 tests\n", "stderr": "error: 1 failed\n", "outcome": {"type": "exit", "exit_code": 101}}]}}
{"type": "response_item", "payload": {"type": "apply_patch_call_output", "call_id": "c5", "status": "completed", "output": "Deleted b.rs"}}
{"type": "compacted", "payload": {"message": "a summary of the above"}}
{"type": "response_item", "payload": {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Fixed."}]}}"#;
        let read = super::read("rollout.jsonl", rollout).unwrap();
        assert_eq!(
            said(&read),
            [
                ("system", "sandboxed"),
                ("user", "fix a.rs\n[image]"),
                ("assistant", "Reading."),
                ("tool", "fn a() {}"),
                ("tool", "Done!"),
                ("assistant", ""),
                ("tool", "a.rs"),
                ("assistant", ""),
                ("tool", "running 2 tests\nerror: 1 failed\n[exit code 101]"),
                ("tool", "Deleted b.rs"),
                ("assistant", "Fixed.")
            ]
        );
        let calls = &read[2]["tool_calls"];
        assert_eq!(
            calls[0]["function"]["arguments"],
            "{\"command\":[\"cat\",\"a.rs\"]}"
        );
        // A freeform call stays one: ctxd takes it as a custom call.
        assert_eq!(
            calls[1],
            json!({"id": "c2", "type": "custom", "custom": {"name": "apply_patch", "input": "*** Begin Patch"}})
        );
        assert_eq!(
            super::chat_call(&calls[1]),
            ("apply_patch", "{\"input\":\"*** Begin Patch\"}".to_owned())
        );
        assert_eq!(read[5]["tool_calls"][0]["function"]["name"], "local_shell");
        assert_eq!(read[6]["tool_call_id"], "c3");
        // OpenAI's built-in shell and apply_patch calls: function calls taking their action or
        // operation.
        let built_in = &read[7]["tool_calls"];
        assert_eq!(built_in[0]["function"]["name"], "shell");
        assert_eq!(
            built_in[1]["function"]["arguments"],
            "{\"path\":\"b.rs\",\"type\":\"delete_file\"}"
        );
        // An older rollout: a header with the instructions, state rows, bare items; the same
        // items as an agent's `input` list read alike.
        let older = r#"{"id": "s", "timestamp": "2025-06-01", "instructions": "You are Codex."}
{"record_type": "state"}
{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]}
{"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c1"}
{"type": "function_call_output", "call_id": "c1", "output": "ok"}"#;
        let read = super::read("old.jsonl", older).unwrap();
        assert_eq!(roles(&read), ["system", "user", "assistant", "tool"]);
        assert_eq!(read[0]["content"], "You are Codex.");
        let input: Vec<&str> = older.lines().skip(2).collect();
        let list = format!("[{}]", input.join(","));
        assert_eq!(super::read("input.json", &list).unwrap(), read[1..]);
        // A SWE-agent trajectory's history.
        let traj = r#"{"trajectory": [], "history": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]}"#;
        assert_eq!(super::read("t.traj", traj).unwrap().len(), 2);
        assert!(super::read("x", "{oops").unwrap_err().contains("x:1"));
    }
}
