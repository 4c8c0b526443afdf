//! Validators: the rules a rendered view must obey for its provider to accept it, checked on the
//! JSON exactly as it would be sent. They take any JSON and never panic; an error names the
//! message (`messages[i]`) and the rule it breaks.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

/// Checks an OpenAI chat-completions request: known roles; string content (null only on an
/// assistant message with tool calls); string arguments; every tool call of an assistant message
/// answered exactly once by the tool messages right after it, and every tool message answering
/// a call of that assistant message.
pub fn validate_openai(request: &Value) -> Result<(), String> {
    let messages = request
        .get("messages")
        .and_then(Value::as_array)
        .ok_or("`messages` must be an array")?;
    let mut i = 0;
    while let Some(message) = messages.get(i) {
        i = match role_of(message, i)? {
            "system" => {
                string_content(message, i)?;
                i + 1
            }
            "user" => {
                user_content(message, i)?;
                i + 1
            }
            "assistant" => validate_openai_turn(messages, i, message)?,
            "tool" => {
                return Err(format!(
                    "messages[{i}]: a tool message must directly follow the assistant message \
                     whose tool call it answers (only that turn's other results may come between)"
                ))
            }
            other => return Err(format!("messages[{i}]: unknown role {other:?}")),
        };
    }
    Ok(())
}

/// Checks `message`, the assistant message at `i`, and the tool messages that answer it; returns
/// the index of the first message after them.
fn validate_openai_turn(messages: &[Value], i: usize, message: &Value) -> Result<usize, String> {
    let calls = match message.get("tool_calls") {
        None | Some(Value::Null) => {
            string_content(message, i)?;
            return Ok(i + 1);
        }
        Some(Value::Array(calls)) if !calls.is_empty() => calls,
        Some(_) => {
            return Err(format!(
                "messages[{i}].tool_calls must be a non-empty array when present"
            ))
        }
    };
    match message.get("content") {
        None | Some(Value::Null | Value::String(_)) => {}
        Some(_) => return Err(format!("messages[{i}].content must be a string or null")),
    }

    let mut ids = Vec::with_capacity(calls.len());
    for (k, call) in calls.iter().enumerate() {
        let at = format!("messages[{i}].tool_calls[{k}]");
        let id =
            non_empty_str(call.get("id")).ok_or(format!("{at}.id must be a non-empty string"))?;
        // A function call carries `function` {name, arguments}; a freeform tool's call carries
        // `custom` {name, input}, both strings.
        let (key, text) = match call.get("type").and_then(Value::as_str) {
            Some("function") => ("function", "arguments"),
            Some("custom") => ("custom", "input"),
            _ => return Err(format!("{at}.type must be \"function\" or \"custom\"")),
        };
        let called = call.get(key);
        if non_empty_str(called.and_then(|f| f.get("name"))).is_none() {
            return Err(format!("{at}.{key}.name must be a non-empty string"));
        }
        if !called
            .and_then(|f| f.get(text))
            .is_some_and(Value::is_string)
        {
            return Err(format!("{at}.{key}.{text} must be a string"));
        }
        if ids.contains(&id) {
            return Err(format!(
                "{at}: duplicate tool call id {id:?} in one message"
            ));
        }
        ids.push(id);
    }

    let mut answered = HashSet::new();
    let mut j = i + 1;
    while let Some(result) = messages
        .get(j)
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("tool"))
    {
        let id = result
            .get("tool_call_id")
            .and_then(Value::as_str)
            .ok_or(format!("messages[{j}].tool_call_id must be a string"))?;
        if !ids.contains(&id) {
            return Err(format!(
                "messages[{j}]: tool message answers {id:?}, which is not a tool call of \
                 the preceding assistant message messages[{i}]"
            ));
        }
        if !answered.insert(id) {
            return Err(format!(
                "messages[{j}]: tool call {id:?} of messages[{i}] is answered twice"
            ));
        }
        string_content(result, j)?;
        j += 1;
    }
    if let Some(id) = ids.iter().find(|id| !answered.contains(*id)) {
        return Err(format!(
            "messages[{i}]: tool call {id:?} has no tool message right after this assistant message"
        ));
    }
    Ok(j)
}

/// Checks an Anthropic Messages request: a `system` string or non-blank text blocks; a
/// non-empty list of messages that starts with the user and strictly alternates; non-empty
/// arrays of known content blocks with no blank text; `tool_use` ids unique in the request; every `tool_use` answered exactly once
/// by a `tool_result` in the next (user) message, every `tool_result` answering a `tool_use`
/// of the previous message, and `tool_result` blocks ahead of any other block of their message.
pub fn validate_anthropic(request: &Value) -> Result<(), String> {
    if !request.is_object() {
        return Err("the request must be a JSON object".into());
    }
    match request.get("system") {
        None | Some(Value::String(_)) => {}
        Some(Value::Array(blocks)) => {
            for (k, block) in blocks.iter().enumerate() {
                let at = format!("system[{k}]");
                if block.get("type").and_then(Value::as_str) != Some("text") {
                    return Err(format!("{at}: `system` takes only text blocks"));
                }
                non_blank_text(block, &at)?;
            }
        }
        Some(_) => return Err("`system` must be a string or text blocks".into()),
    }
    let messages = request
        .get("messages")
        .and_then(Value::as_array)
        .ok_or("`messages` must be an array")?;
    if messages.is_empty() {
        return Err("`messages` must not be empty".into());
    }

    // The tool_use ids of the previous message, which the current one must answer, and every
    // one so far with its message: Anthropic takes an id once a request.
    let mut open_uses: Vec<&str> = Vec::new();
    let mut used: HashMap<&str, usize> = HashMap::new();
    let mut previous_role = None;
    for (i, message) in messages.iter().enumerate() {
        let role = role_of(message, i)?;
        if role != "user" && role != "assistant" {
            return Err(format!(
                "messages[{i}]: role must be \"user\" or \"assistant\", not {role:?}"
            ));
        }
        if i == 0 && role != "user" {
            return Err("messages[0]: the first message must be from the user".into());
        }
        if previous_role == Some(role) {
            return Err(format!(
                "messages[{i}]: roles must alternate, but this is a second {role} message in a row"
            ));
        }
        let blocks = Blocks::of(message, i, role)?;
        for id in &blocks.uses {
            if let Some(first) = used.insert(id, i) {
                return Err(format!(
                    "messages[{i}]: tool_use ids must be unique, and {id:?} is also used in \
                     messages[{first}]"
                ));
            }
        }
        if let Some(id) = blocks.results.iter().find(|id| !open_uses.contains(id)) {
            return Err(format!(
                "messages[{i}]: tool_result {id:?} answers no tool_use of the previous message"
            ));
        }
        if let Some(id) = open_uses.iter().find(|id| !blocks.results.contains(id)) {
            return Err(format!(
                "messages[{}]: tool_use {id:?} has no tool_result in the next message \
                 messages[{i}]",
                i - 1
            ));
        }
        open_uses = blocks.uses;
        previous_role = Some(role);
    }
    if let Some(id) = open_uses.first() {
        return Err(format!(
            "messages[{}]: tool_use {id:?} has no tool_result: no user message follows",
            messages.len() - 1
        ));
    }
    Ok(())
}

/// The tool ids an Anthropic message's content blocks use and answer.
struct Blocks<'a> {
    uses: Vec<&'a str>,
    results: Vec<&'a str>,
}

impl<'a> Blocks<'a> {
    /// Checks the content blocks of message `i`, whose role is `role`.
    fn of(message: &'a Value, i: usize, role: &str) -> Result<Self, String> {
        let content = match message.get("content").and_then(Value::as_array) {
            Some(content) if !content.is_empty() => content,
            _ => {
                return Err(format!(
                    "messages[{i}].content must be a non-empty array of blocks"
                ))
            }
        };
        let mut blocks = Blocks {
            uses: Vec::new(),
            results: Vec::new(),
        };
        let mut other_block_seen = false;
        for (k, block) in content.iter().enumerate() {
            let at = format!("messages[{i}].content[{k}]");
            match block.get("type").and_then(Value::as_str) {
                Some("text") => {
                    non_blank_text(block, &at)?;
                    other_block_seen = true;
                }
                Some("image") if role == "user" => other_block_seen = true,
                Some("thinking" | "redacted_thinking") if role == "assistant" => {
                    other_block_seen = true
                }
                Some("tool_use") => {
                    if role != "assistant" {
                        return Err(format!(
                            "{at}: tool_use is allowed only in an assistant message"
                        ));
                    }
                    let id = non_empty_str(block.get("id"))
                        .ok_or(format!("{at}.id must be a non-empty string"))?;
                    if non_empty_str(block.get("name")).is_none() {
                        return Err(format!("{at}.name must be a non-empty string"));
                    }
                    if !block.get("input").is_some_and(Value::is_object) {
                        return Err(format!("{at}.input must be an object"));
                    }
                    if blocks.uses.contains(&id) {
                        return Err(format!("{at}: duplicate tool_use id {id:?} in one message"));
                    }
                    blocks.uses.push(id);
                    other_block_seen = true;
                }
                Some("tool_result") => {
                    if role != "user" {
                        return Err(format!(
                            "{at}: tool_result is allowed only in a user message"
                        ));
                    }
                    if other_block_seen {
                        return Err(format!(
                            "{at}: tool_result blocks must come before any other block of their message"
                        ));
                    }
                    let id = non_empty_str(block.get("tool_use_id"))
                        .ok_or(format!("{at}.tool_use_id must be a non-empty string"))?;
                    tool_result_content(block, &at)?;
                    if blocks.results.contains(&id) {
                        return Err(format!("{at}: tool_use {id:?} is answered twice"));
                    }
                    blocks.results.push(id);
                }
                Some(other) => return Err(format!("{at}: unknown block type {other:?}")),
                None => return Err(format!("{at}.type must be a string")),
            }
        }
        Ok(blocks)
    }
}

/// A tool_result's optional content (a string or text/image blocks) and error flag; a failed
/// result must say something.
fn tool_result_content(block: &Value, at: &str) -> Result<(), String> {
    let is_error = match block.get("is_error") {
        None => false,
        Some(Value::Bool(flag)) => *flag,
        Some(_) => return Err(format!("{at}.is_error must be a boolean")),
    };
    let says_something = match block.get("content") {
        None => false,
        Some(Value::String(text)) => !text.trim().is_empty(),
        Some(Value::Array(parts)) => {
            for (k, part) in parts.iter().enumerate() {
                match part.get("type").and_then(Value::as_str) {
                    Some("text") => non_blank_text(part, &format!("{at}.content[{k}]"))?,
                    Some("image") => {}
                    _ => {
                        return Err(format!(
                            "{at}.content[{k}]: a tool_result may hold only text and image blocks"
                        ))
                    }
                }
            }
            !parts.is_empty()
        }
        Some(_) => {
            return Err(format!(
                "{at}.content must be a string or an array of blocks"
            ))
        }
    };
    if is_error && !says_something {
        return Err(format!(
            "{at}: a tool_result with is_error must have non-empty content"
        ));
    }
    Ok(())
}

fn role_of(message: &Value, i: usize) -> Result<&str, String> {
    if !message.is_object() {
        return Err(format!("messages[{i}] must be an object"));
    }
    message
        .get("role")
        .and_then(Value::as_str)
        .ok_or(format!("messages[{i}].role must be a string"))
}

fn string_content(message: &Value, i: usize) -> Result<(), String> {
    match message.get("content") {
        Some(Value::String(_)) => Ok(()),
        _ => Err(format!(
            "messages[{i}].content must be a string (null is allowed only on an assistant \
             message with tool_calls)"
        )),
    }
}

/// A user message's content: a string, or a non-empty array of text and image_url parts.
fn user_content(message: &Value, i: usize) -> Result<(), String> {
    let Some(Value::Array(parts)) = message.get("content") else {
        return string_content(message, i);
    };
    if parts.is_empty() {
        return Err(format!("messages[{i}].content must not be an empty array"));
    }
    for (k, part) in parts.iter().enumerate() {
        let at = format!("messages[{i}].content[{k}]");
        match part.get("type").and_then(Value::as_str) {
            Some("text") if part.get("text").is_some_and(Value::is_string) => {}
            Some("image_url")
                if non_empty_str(part.get("image_url").and_then(|u| u.get("url"))).is_some() => {}
            _ => return Err(format!("{at}: must be a text or image_url part")),
        }
    }
    Ok(())
}

/// Checks an OpenAI Responses request's `input`: messages with known roles and string or
/// input_text/input_image content; `function_call` items with ids and string arguments (and
/// `custom_tool_call` items with string input, `shell_call` items with commands and
/// `apply_patch_call` items with a file operation), each answered exactly once by a later
/// output of its kind (`function_call_output`, `custom_tool_call_output`, `shell_call_output`,
/// `apply_patch_call_output`) and every output answering an earlier call of its kind;
/// `reasoning` items with an id and a summary list, each followed by an assistant item (a
/// message or a call) before the next user message.
pub fn validate_responses(request: &Value) -> Result<(), String> {
    let items = request
        .get("input")
        .and_then(Value::as_array)
        .ok_or("`input` must be an array")?;
    // The calls not answered yet, and the output type that answers each.
    let mut open: Vec<(&str, &str)> = Vec::new();
    let mut answered: HashSet<&str> = HashSet::new();
    let mut reasoning_waits: Option<usize> = None;
    for (i, item) in items.iter().enumerate() {
        let at = format!("input[{i}]");
        let kind = item
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("message");
        match kind {
            "message" => {
                let role = item.get("role").and_then(Value::as_str).unwrap_or_default();
                if !matches!(role, "user" | "assistant" | "system" | "developer") {
                    return Err(format!("{at}.role: unknown role {role:?}"));
                }
                match item.get("content") {
                    Some(Value::String(_)) => {}
                    Some(Value::Array(parts)) if !parts.is_empty() => {
                        for (k, part) in parts.iter().enumerate() {
                            let ok = match part.get("type").and_then(Value::as_str) {
                                Some("input_text" | "output_text") => {
                                    part.get("text").is_some_and(Value::is_string)
                                }
                                Some("input_image") => role == "user",
                                _ => false,
                            };
                            if !ok {
                                return Err(format!("{at}.content[{k}]: not a valid part"));
                            }
                        }
                    }
                    _ => return Err(format!("{at}.content must be a string or parts")),
                }
                if role == "assistant" {
                    reasoning_waits = None;
                } else if let Some(r) = reasoning_waits {
                    return Err(format!(
                        "input[{r}]: a reasoning item is followed by no output"
                    ));
                }
            }
            "reasoning" => {
                if non_empty_str(item.get("id")).is_none() {
                    return Err(format!("{at}.id must be a non-empty string"));
                }
                if !item.get("summary").is_some_and(Value::is_array) {
                    return Err(format!("{at}.summary must be an array"));
                }
                reasoning_waits.get_or_insert(i);
            }
            "function_call" | "custom_tool_call" | "shell_call" | "apply_patch_call" => {
                let id = non_empty_str(item.get("call_id"))
                    .ok_or(format!("{at}.call_id must be a non-empty string"))?;
                let output = match kind {
                    "function_call" | "custom_tool_call" => {
                        if non_empty_str(item.get("name")).is_none() {
                            return Err(format!("{at}.name must be a non-empty string"));
                        }
                        let (text, output) = if kind == "function_call" {
                            ("arguments", "function_call_output")
                        } else {
                            ("input", "custom_tool_call_output")
                        };
                        if !item.get(text).is_some_and(Value::is_string) {
                            return Err(format!("{at}.{text} must be a string"));
                        }
                        output
                    }
                    "shell_call" => {
                        let commands = item.pointer("/action/commands").and_then(Value::as_array);
                        if !commands
                            .is_some_and(|c| !c.is_empty() && c.iter().all(Value::is_string))
                        {
                            return Err(format!("{at}.action.commands must be a list of strings"));
                        }
                        "shell_call_output"
                    }
                    _ => {
                        let operation = item.get("operation");
                        let field =
                            |key| operation.and_then(|o| o.get(key)).and_then(Value::as_str);
                        let diff_ok =
                            field("diff").is_some() || field("type") == Some("delete_file");
                        let known = matches!(
                            field("type"),
                            Some("create_file" | "update_file" | "delete_file")
                        );
                        if !known || field("path").is_none() || !diff_ok {
                            return Err(format!("{at}.operation must be a file operation"));
                        }
                        "apply_patch_call_output"
                    }
                };
                if open.iter().any(|(c, _)| *c == id) || answered.contains(id) {
                    return Err(format!("{at}: call id {id:?} is used twice"));
                }
                open.push((id, output));
                reasoning_waits = None;
            }
            "function_call_output"
            | "custom_tool_call_output"
            | "shell_call_output"
            | "apply_patch_call_output" => {
                let id = non_empty_str(item.get("call_id"))
                    .ok_or(format!("{at}.call_id must be a non-empty string"))?;
                let Some(k) = open.iter().position(|(c, o)| *c == id && *o == kind) else {
                    return Err(format!(
                        "{at}: output {id:?} answers no earlier open call of its kind"
                    ));
                };
                open.remove(k);
                answered.insert(id);
                let shaped = match kind {
                    "shell_call_output" => item
                        .get("output")
                        .and_then(Value::as_array)
                        .is_some_and(|chunks| {
                            chunks.iter().all(|c| {
                                c.get("stdout").is_some_and(Value::is_string)
                                    && c.get("stderr").is_some_and(Value::is_string)
                                    && c.pointer("/outcome/type").is_some_and(Value::is_string)
                            })
                        }),
                    "apply_patch_call_output" => {
                        let status = item.get("status").and_then(Value::as_str);
                        matches!(status, Some("completed" | "failed"))
                    }
                    _ => matches!(item.get("output"), Some(Value::String(_) | Value::Array(_))),
                };
                if !shaped {
                    return Err(format!("{at}: not a valid {kind} (its output or status)"));
                }
            }
            other => return Err(format!("{at}: unknown item type {other:?}")),
        }
    }
    if let Some((id, _)) = open.first() {
        return Err(format!("function call {id:?} has no output"));
    }
    Ok(())
}

fn non_blank_text(block: &Value, at: &str) -> Result<(), String> {
    match block.get("text").and_then(Value::as_str) {
        Some(text) if !text.trim().is_empty() => Ok(()),
        Some(_) => Err(format!("{at}: text blocks must not be empty or blank")),
        None => Err(format!("{at}.text must be a string")),
    }
}

fn non_empty_str(value: Option<&Value>) -> Option<&str> {
    value.and_then(Value::as_str).filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    fn openai_call(id: &str) -> Value {
        json!({"id": id, "type": "function", "function": {"name": "shell", "arguments": "{}"}})
    }

    fn openai_calls(ids: &[&str]) -> Value {
        let calls: Vec<Value> = ids.iter().map(|id| openai_call(id)).collect();
        json!({"role": "assistant", "content": null, "tool_calls": calls})
    }

    fn openai_result(id: &str) -> Value {
        json!({"role": "tool", "tool_call_id": id, "content": "ok"})
    }

    fn openai(messages: Vec<Value>) -> Value {
        json!({ "messages": messages })
    }

    #[test]
    fn accepts_a_valid_openai_request() {
        let request = openai(vec![
            json!({"role": "system", "content": "Be brief."}),
            json!({"role": "user", "content": "go", "name": "ana"}),
            openai_calls(&["c1", "c2"]),
            openai_result("c2"),
            openai_result("c1"),
            json!({"role": "assistant", "content": ""}),
            openai_calls(&["c1"]),
            openai_result("c1"),
        ]);
        assert_eq!(validate_openai(&request), Ok(()));
    }

    #[test]
    fn rejects_openai_requests_that_break_a_rule() {
        let user = json!({"role": "user", "content": "go"});
        let cases = [
            (json!([]), "`messages` must be an array"),
            (
                openai(vec![json!({"role": "robot", "content": "x"})]),
                "messages[0]: unknown role",
            ),
            (
                openai(vec![json!("hello")]),
                "messages[0] must be an object",
            ),
            (
                openai(vec![json!({"role": "user", "content": null})]),
                "messages[0].content must be a string",
            ),
            (
                openai(vec![json!({"role": "assistant", "content": null})]),
                "messages[0].content must be a string",
            ),
            (
                openai(vec![
                    json!({"role": "assistant", "content": "x", "tool_calls": []}),
                ]),
                "messages[0].tool_calls must be a non-empty array",
            ),
            (
                openai(vec![user.clone(), openai_calls(&["c1"]), user.clone()]),
                "messages[1]: tool call \"c1\" has no tool message right after",
            ),
            (
                openai(vec![user.clone(), openai_calls(&["c1"])]),
                "messages[1]: tool call \"c1\" has no tool message",
            ),
            (
                openai(vec![
                    user.clone(),
                    json!({"role": "assistant", "content": "done"}),
                    openai_result("c1"),
                ]),
                "messages[2]: a tool message must directly follow",
            ),
            (
                openai(vec![user.clone(), openai_result("c1")]),
                "messages[1]: a tool message must directly follow",
            ),
            (
                openai(vec![
                    user.clone(),
                    openai_calls(&["c1"]),
                    openai_result("c9"),
                ]),
                "messages[2]: tool message answers \"c9\", which is not a tool call",
            ),
            (
                openai(vec![
                    user.clone(),
                    openai_calls(&["c1"]),
                    openai_result("c1"),
                    openai_result("c1"),
                ]),
                "messages[3]: tool call \"c1\" of messages[1] is answered twice",
            ),
            (
                openai(vec![user.clone(), openai_calls(&["c1", "c1"])]),
                "messages[1].tool_calls[1]: duplicate tool call id",
            ),
            (
                openai(vec![
                    user.clone(),
                    json!({"role": "assistant", "content": null, "tool_calls": [
                        {"id": "c1", "type": "function", "function": {"name": "shell", "arguments": {}}}
                    ]}),
                    openai_result("c1"),
                ]),
                "messages[1].tool_calls[0].function.arguments must be a string",
            ),
            (
                openai(vec![
                    user.clone(),
                    json!({"role": "assistant", "content": null, "tool_calls": [{"id": "c1"}]}),
                ]),
                "messages[1].tool_calls[0].type must be \"function\"",
            ),
            (
                openai(vec![
                    user.clone(),
                    openai_calls(&["c1"]),
                    json!({"role": "tool", "tool_call_id": "c1", "content": null}),
                ]),
                "messages[2].content must be a string",
            ),
        ];
        for (request, rule) in cases {
            match validate_openai(&request) {
                Ok(()) => panic!("accepted {request}"),
                Err(error) => assert!(error.contains(rule), "{error:?} does not say {rule:?}"),
            }
        }
    }

    fn text(text: &str) -> Value {
        json!({"type": "text", "text": text})
    }

    fn tool_use(id: &str) -> Value {
        json!({"type": "tool_use", "id": id, "name": "shell", "input": {}})
    }

    fn tool_result(id: &str) -> Value {
        json!({"type": "tool_result", "tool_use_id": id, "content": "ok"})
    }

    fn user(content: Vec<Value>) -> Value {
        json!({"role": "user", "content": content})
    }

    fn assistant(content: Vec<Value>) -> Value {
        json!({"role": "assistant", "content": content})
    }

    fn anthropic(messages: Vec<Value>) -> Value {
        json!({"system": "Be brief.", "messages": messages})
    }

    #[test]
    fn accepts_a_valid_anthropic_request() {
        let request = anthropic(vec![
            user(vec![text("go")]),
            assistant(vec![text("on it"), tool_use("c1"), tool_use("c2")]),
            user(vec![
                tool_result("c2"),
                json!({"type": "tool_result", "tool_use_id": "c1", "content": "no", "is_error": true}),
                text("hurry"),
            ]),
            assistant(vec![tool_use("c3")]),
            user(vec![json!({"type": "tool_result", "tool_use_id": "c3"})]),
        ]);
        assert_eq!(validate_anthropic(&request), Ok(()));
    }

    #[test]
    fn rejects_anthropic_requests_that_break_a_rule() {
        let go = user(vec![text("go")]);
        let cases = [
            (
                json!({"system": ["x"], "messages": [go.clone()]}),
                "system[0]: `system` takes only text blocks",
            ),
            (
                json!({"system": [text("a"), text(" ")], "messages": [go.clone()]}),
                "system[1]: text blocks must not be empty or blank",
            ),
            (
                json!({"system": 7, "messages": [go.clone()]}),
                "`system` must be a string or text blocks",
            ),
            (json!({"system": "x"}), "`messages` must be an array"),
            (anthropic(vec![]), "`messages` must not be empty"),
            (
                anthropic(vec![assistant(vec![text("hi")])]),
                "messages[0]: the first message must be from the user",
            ),
            (
                anthropic(vec![go.clone(), go.clone()]),
                "messages[1]: roles must alternate",
            ),
            (
                anthropic(vec![json!({"role": "system", "content": [text("x")]})]),
                "messages[0]: role must be \"user\" or \"assistant\"",
            ),
            (
                anthropic(vec![json!({"role": "user", "content": "go"})]),
                "messages[0].content must be a non-empty array",
            ),
            (
                anthropic(vec![user(vec![])]),
                "messages[0].content must be a non-empty array",
            ),
            (
                anthropic(vec![user(vec![text(" \n")])]),
                "messages[0].content[0]: text blocks must not be empty",
            ),
            (
                anthropic(vec![user(vec![json!({"type": "video"})])]),
                "messages[0].content[0]: unknown block type",
            ),
            (
                anthropic(vec![go.clone(), assistant(vec![tool_use("c1")])]),
                "messages[1]: tool_use \"c1\" has no tool_result: no user message follows",
            ),
            (
                anthropic(vec![
                    go.clone(),
                    assistant(vec![tool_use("c1")]),
                    go.clone(),
                ]),
                "messages[1]: tool_use \"c1\" has no tool_result in the next message",
            ),
            (
                anthropic(vec![
                    go.clone(),
                    assistant(vec![tool_use("c1")]),
                    user(vec![tool_result("c1"), tool_result("c1")]),
                ]),
                "messages[2].content[1]: tool_use \"c1\" is answered twice",
            ),
            (
                anthropic(vec![
                    go.clone(),
                    assistant(vec![tool_use("c1")]),
                    user(vec![tool_result("c1"), tool_result("c9")]),
                ]),
                "messages[2]: tool_result \"c9\" answers no tool_use of the previous message",
            ),
            (
                anthropic(vec![user(vec![tool_result("c1")])]),
                "messages[0]: tool_result \"c1\" answers no tool_use",
            ),
            (
                anthropic(vec![
                    go.clone(),
                    assistant(vec![tool_use("c1")]),
                    user(vec![text("wait"), tool_result("c1")]),
                ]),
                "messages[2].content[1]: tool_result blocks must come before any other block",
            ),
            (
                anthropic(vec![
                    go.clone(),
                    assistant(vec![tool_use("c1"), tool_use("c1")]),
                ]),
                "messages[1].content[1]: duplicate tool_use id",
            ),
            (
                anthropic(vec![
                    go.clone(),
                    assistant(vec![tool_use("c1")]),
                    user(vec![tool_result("c1")]),
                    assistant(vec![tool_use("c1")]),
                    user(vec![tool_result("c1")]),
                ]),
                "messages[3]: tool_use ids must be unique, and \"c1\" is also used in messages[1]",
            ),
            (
                anthropic(vec![user(vec![tool_use("c1")])]),
                "messages[0].content[0]: tool_use is allowed only in an assistant message",
            ),
            (
                anthropic(vec![go.clone(), assistant(vec![tool_result("c1")])]),
                "messages[1].content[0]: tool_result is allowed only in a user message",
            ),
            (
                anthropic(vec![
                    go.clone(),
                    assistant(vec![
                        json!({"type": "tool_use", "id": "c1", "name": "shell", "input": "{}"}),
                    ]),
                ]),
                "messages[1].content[0].input must be an object",
            ),
            (
                anthropic(vec![
                    go.clone(),
                    assistant(vec![tool_use("c1")]),
                    user(vec![
                        json!({"type": "tool_result", "tool_use_id": "c1", "is_error": true}),
                    ]),
                ]),
                "messages[2].content[0]: a tool_result with is_error must have non-empty content",
            ),
            (
                anthropic(vec![
                    go.clone(),
                    assistant(vec![tool_use("c1")]),
                    user(vec![
                        json!({"type": "tool_result", "tool_use_id": "c1", "is_error": "yes", "content": "x"}),
                    ]),
                ]),
                "messages[2].content[0].is_error must be a boolean",
            ),
        ];
        for (request, rule) in cases {
            match validate_anthropic(&request) {
                Ok(()) => panic!("accepted {request}"),
                Err(error) => assert!(error.contains(rule), "{error:?} does not say {rule:?}"),
            }
        }
    }

    /// JSON built from the words the validators look for, so that it gets deep into them.
    fn request_like_json() -> impl Strategy<Value = Value> {
        let word = prop::sample::select(vec![
            "messages",
            "role",
            "content",
            "user",
            "assistant",
            "tool",
            "system",
            "type",
            "text",
            "tool_use",
            "tool_result",
            "id",
            "tool_use_id",
            "tool_call_id",
            "tool_calls",
            "function",
            "name",
            "arguments",
            "input",
            "is_error",
            "c1",
            "",
        ]);
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            word.clone().prop_map(Value::from),
        ];
        leaf.prop_recursive(5, 64, 6, move |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
                prop::collection::vec((word.clone(), inner), 0..6).prop_map(|fields| {
                    Value::Object(fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
                }),
            ]
        })
    }

    proptest! {
        /// Arbitrary JSON never panics a validator, and what a validator accepts has at least
        /// the shape its provider requires.
        #[test]
        fn validators_accept_only_requests_of_their_providers_shape(request in request_like_json()) {
            let wrapped = json!({"system": "", "messages": [request.clone()]});
            for candidate in [&request, &wrapped] {
                if validate_openai(candidate).is_ok() {
                    let messages = candidate["messages"].as_array();
                    prop_assert!(messages.is_some(), "{candidate}");
                    for m in messages.into_iter().flatten() {
                        let role = m["role"].as_str().unwrap_or_default();
                        prop_assert!(["system", "user", "assistant", "tool"].contains(&role), "{candidate}");
                    }
                }
                if validate_anthropic(candidate).is_ok() {
                    let messages = candidate["messages"].as_array();
                    prop_assert!(messages.is_some_and(|m| !m.is_empty()), "{candidate}");
                    let roles: Vec<&str> = messages.into_iter().flatten()
                        .map(|m| m["role"].as_str().unwrap_or_default()).collect();
                    prop_assert_eq!(roles.first().copied(), Some("user"), "{}", candidate);
                    prop_assert!(roles.windows(2).all(|w| w[0] != w[1]), "{candidate}");
                    for m in messages.into_iter().flatten() {
                        prop_assert!(m["content"].is_string() || m["content"].as_array().is_some_and(|c| !c.is_empty()), "{candidate}");
                    }
                }
            }
        }
    }
}
