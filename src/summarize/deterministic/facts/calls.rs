//! A tool call's facts: its entry, the files and command it touched, the files its other
//! arguments name.

use std::collections::HashSet;

use serde_json::Value;

use super::super::*;
pub(in crate::summarize::deterministic) use crate::domain::event::file_paths;
use crate::domain::event::{walk_strings, ToolCall, WRITTEN_TEXT_KEYS};

impl Digest {
    /// Lists the call and what it touched.
    pub(super) fn add_tool_call(&mut self, call: &ToolCall) -> CallFacts {
        let mut paths = Vec::new();
        let mut command = None;
        let parsed;
        let arguments = match &call.arguments {
            Value::String(text) => {
                parsed = serde_json::from_str::<Value>(text).ok();
                parsed.as_ref()
            }
            other => Some(other),
        };
        let mut named = Vec::new();
        if let Some(Value::Object(map)) = arguments {
            for key in PATH_KEYS.iter().chain(&COMMAND_KEYS).chain(&OTHER_KEYS) {
                let Some(value) = map.get(*key).and_then(argument_text) else {
                    continue;
                };
                if PATH_KEYS.contains(key) {
                    let path = one_line(&value, TOUCHED_CHARS);
                    self.push(
                        Section::Touched,
                        format!(
                            "{path}{LAST_ACTION}{})",
                            one_line(&call.name, ARGUMENT_CHARS)
                        ),
                    );
                    paths.push(path);
                } else if COMMAND_KEYS.contains(key) {
                    let shown = one_line(&format!("$ {value}"), TOUCHED_CHARS);
                    // A long command (a build line, a `git add` of many files) names files
                    // past what its entry shows: each is listed as touched by the call.
                    for path in unshown_paths(&value, &shown) {
                        let action = one_line(&call.name, ARGUMENT_CHARS);
                        self.push(Section::Touched, format!("{path}{LAST_ACTION}{action})"));
                        paths.push(path);
                    }
                    self.push(Section::Touched, shown);
                    command = Some(self.get(Section::Touched).len() - 1);
                }
                named.push(format!("{key}={}", one_line(&value, ARGUMENT_CHARS)));
            }
        } else if arguments.is_none() {
            // Arguments that are not JSON at all: show their start, it is all there is.
            named.push(one_line(&call.arguments_text(), ARGUMENT_CHARS));
        }
        let described = if named.is_empty() {
            one_line(&call.name, TOOL_CALL_CHARS)
        } else {
            one_line(
                &format!("{}({})", call.name, named.join(", ")),
                TOOL_CALL_CHARS,
            )
        };
        // Files its other arguments name (a sub-agent's prompt, a to-do item, a `path` inside a
        // list of files: only the top level's path and command keys were read above) are
        // listed as named by the call, but not those of the text it writes into a file. Named
        // is not changed: they are not among the files a later success counts as its fix.
        if let Some(Value::Object(map)) = arguments {
            let mut strings = Vec::new();
            for (key, value) in map {
                let key = key.as_str();
                let read_above = PATH_KEYS.contains(&key) || COMMAND_KEYS.contains(&key);
                if !read_above && !WRITTEN_TEXT_KEYS.contains(&key) {
                    walk_strings(value, &WRITTEN_TEXT_KEYS, &mut strings);
                }
            }
            let mut listed: HashSet<String> = paths.iter().cloned().collect();
            let action = one_line(&call.name, ARGUMENT_CHARS);
            for path in strings.iter().flat_map(|s| unshown_paths(s, &described)) {
                if listed.insert(path.clone()) {
                    self.push(
                        Section::Touched,
                        format!("{path}{LAST_ACTION}named by {action})"),
                    );
                }
            }
        }
        self.push(Section::ToolCalls, described.clone());
        CallFacts {
            described,
            command,
            paths,
        }
    }
}

/// What a tool call was: its description, its command's entry in the touched list, the files
/// it named.
pub(super) struct CallFacts {
    pub(super) described: String,
    pub(super) command: Option<usize>,
    pub(super) paths: Vec<String>,
}

/// The file paths `text` names that its summary entry `shown` does not, once each, in order.
pub(super) fn unshown_paths(text: &str, shown: &str) -> Vec<String> {
    let mut seen = HashSet::new();
    file_paths(text)
        .filter(|p| !shown.contains(p) && seen.insert(*p))
        .map(|p| one_line(p, TOUCHED_CHARS))
        .collect()
}

/// The text an argument value shows: strings as they are, lists of scalars joined by spaces.
fn argument_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) if !s.trim().is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Array(items) => {
            let parts: Vec<String> = items
                .iter()
                .filter_map(|v| match v {
                    Value::String(s) => Some(s.clone()),
                    Value::Number(n) => Some(n.to_string()),
                    _ => None,
                })
                .collect();
            (!parts.is_empty()).then(|| parts.join(" "))
        }
        _ => None,
    }
}
