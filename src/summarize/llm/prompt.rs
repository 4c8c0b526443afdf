//! The prompt both LLM summarisers send, and the reading of the JSON answer they ask for.

use serde_json::{Map, Value};

use super::super::SummaryRequest;
use crate::domain::compaction::{Anchors, NOT_AVAILABLE};
use crate::domain::event::{EpisodeKind, Event, EventBody, Role};
use crate::domain::text::bounded;

/// Characters of one message's text shown to the summariser.
const MESSAGE_CHARS: usize = 2_000;
/// Tool outputs are the bulk of a session and the least worth reading in full.
const TOOL_RESULT_CHARS: usize = 1_000;
const ARGUMENTS_CHARS: usize = 500;
/// Characters of all rendered events together at most, whatever the summariser's window.
pub(super) const EVENTS_CHARS: usize = 120_000;
/// Characters of an anchor value kept from an answer.
const ANCHOR_CHARS: usize = 1_000;
/// Characters of an answer quoted in an error.
const ANSWER_EXCERPT_CHARS: usize = 200;

/// What is sent: instructions and the material to summarise.
#[derive(Debug)]
pub(super) struct Prompt {
    pub system: String,
    pub user: String,
}

/// Builds the prompt: the previous summary and anchors, then the new events, each bounded and
/// all of them within `events_chars`.
pub(super) fn prompt(request: &SummaryRequest<'_>, events_chars: usize) -> Prompt {
    let system = format!(
        "You maintain the running summary of an AI agent's working session. Older parts of the \
         conversation are being removed from the agent's context and your summary replaces them, \
         so the agent must be able to carry on from the summary alone.\n\n\
         Update the previous summary with the new events. Keep everything from the previous \
         summary that still matters, and add what the new events establish: the user's requests \
         (keep the first one verbatim), decisions and constraints, files and commands touched, \
         what was tried and what failed, and what the agent was about to do next. Be factual and \
         concise; invent nothing. The facts (requests, notes, files, commands, errors) are also \
         kept verbatim beside your summary, so spend your words on what they do not say: why, \
         what was learned and where the work stands.\n\n\
         Answer with one JSON object and nothing else:\n\
         {{\"summary\": \"<the updated narrative, at most {max_chars} characters>\", \"anchors\": \
         {{\"user_intent\": \"...\", \"execution_progress\": \"...\", \"key_decision\": \"...\", \
         \"tried_solution\": \"...\", \"next_step\": \"...\"}}}}\n\
         Use \"N/A\" for an anchor that nothing says anything about.",
        max_chars = super::super::deterministic::narrative_chars(request.max_chars),
    );

    let previous = request.previous;
    let previous_text = if previous.text.trim().is_empty() {
        "(none yet)"
    } else {
        previous.text.as_str()
    };
    let a = &previous.anchors;
    let user = format!(
        "<previous_summary>\n{previous_text}\n</previous_summary>\n\n\
         <previous_anchors>\nuser_intent: {}\nexecution_progress: {}\nkey_decision: {}\n\
         tried_solution: {}\nnext_step: {}\n</previous_anchors>\n\n\
         <new_events>\n{}\n</new_events>",
        a.user_intent,
        a.execution_progress,
        a.key_decision,
        a.tried_solution,
        a.next_step,
        render_events(request.events, events_chars),
    );
    Prompt { system, user }
}

/// A generous estimate of the tokens `text` takes for any model: three ASCII characters a
/// token, one for any other character.
pub(super) fn estimated_tokens(text: &str) -> i64 {
    let other = text.chars().filter(|c| !c.is_ascii()).count();
    let ascii = text.len()
        - text
            .chars()
            .filter(|c| !c.is_ascii())
            .map(char::len_utf8)
            .sum::<usize>();
    (ascii / 3 + other) as i64
}

/// One line (or block) per event, within `max_chars` overall: when the events do not fit, the
/// oldest quarter and the newest rest are kept and the middle is marked as omitted.
fn render_events(events: &[&Event], max_chars: usize) -> String {
    let rendered: Vec<String> = events.iter().map(|e| render_event(e)).collect();
    let sizes: Vec<usize> = rendered.iter().map(|r| r.chars().count() + 1).collect();
    if sizes.iter().sum::<usize>() <= max_chars {
        return rendered.join("\n");
    }
    let mut head = 0;
    let mut used = 0;
    while head < sizes.len() && used + sizes[head] <= max_chars / 4 {
        used += sizes[head];
        head += 1;
    }
    let mut tail = sizes.len();
    while tail > head && used + sizes[tail - 1] <= max_chars {
        used += sizes[tail - 1];
        tail -= 1;
    }
    let mut out = rendered[..head].join("\n");
    out.push_str(&format!("\n[… {} events omitted here …]\n", tail - head));
    out.push_str(&rendered[tail..].join("\n"));
    out
}

fn render_event(event: &Event) -> String {
    let pinned = if event.pinned { " (pinned)" } else { "" };
    let seq = event.seq;
    match &event.body {
        EventBody::Message(m) => {
            let mut out = match m.role {
                Role::Tool => {
                    let name = m.name.as_deref().unwrap_or("tool");
                    let call = m.tool_call_id.as_deref().unwrap_or("?");
                    let error = if m.is_error == Some(true) {
                        " (error)"
                    } else {
                        ""
                    };
                    format!(
                        "#{seq}{pinned} {name} result for call {call}{error}: {}",
                        excerpt(m.content.text(), TOOL_RESULT_CHARS)
                    )
                }
                role => format!(
                    "#{seq}{pinned} {}: {}",
                    role.as_str(),
                    excerpt(m.content.text(), MESSAGE_CHARS)
                ),
            };
            for call in &m.tool_calls {
                out.push_str(&format!(
                    "\n#{seq} assistant calls {} {} (call {})",
                    call.name,
                    excerpt(&call.arguments_text(), ARGUMENTS_CHARS),
                    call.id
                ));
            }
            out
        }
        EventBody::EpisodeStart(e) => {
            let kind = match e.kind {
                EpisodeKind::Exploration => "exploration",
                EpisodeKind::Action => "action",
            };
            let mut out = format!("#{seq}{pinned} {kind} episode `{}` starts", e.name);
            if !e.dependencies.is_empty() {
                out.push_str(&format!(", depending on {}", e.dependencies.join(", ")));
            }
            out
        }
        EventBody::EpisodeEnd(e) => format!(
            "#{seq}{pinned} episode `{}` ends: {}",
            e.name,
            excerpt(&e.conclusion, MESSAGE_CHARS)
        ),
        EventBody::Note(n) => format!(
            "#{seq}{pinned} note: {}",
            excerpt(&n.content, MESSAGE_CHARS)
        ),
    }
}

/// `text` bounded to `max_chars`, saying how much was left out.
fn excerpt(text: &str, max_chars: usize) -> String {
    let text = text.trim();
    let shown = crate::domain::text::prefix_chars(text, max_chars);
    if shown.len() == text.len() {
        return text.to_owned();
    }
    let left_out = text[shown.len()..].chars().count();
    format!("{shown}… [{left_out} more characters]")
}

/// Reads the narrative and anchors from a model's answer: the outermost JSON object in it, so
/// that a ```json fence or a sentence around the object does no harm. The anchors are None
/// when the answer has none; an error says why the answer is not the JSON asked for.
pub(super) fn parse_answer(answer: &str) -> Result<(String, Option<Anchors>), String> {
    let unparsable = |why: &str| {
        format!(
            "{why} in the answer {:?}",
            bounded(answer.trim(), ANSWER_EXCERPT_CHARS)
        )
    };
    let object = outermost_object(answer).ok_or_else(|| unparsable("no JSON object"))?;
    let summary = match object.get("summary") {
        Some(Value::String(s)) if !s.trim().is_empty() => s.trim().to_owned(),
        Some(Value::String(_)) => return Err(unparsable("an empty `summary`")),
        Some(_) => return Err(unparsable("a `summary` that is not a string")),
        None => return Err(unparsable("no `summary`")),
    };
    let anchors = match object.get("anchors") {
        None | Some(Value::Null) => None,
        Some(Value::Object(map)) => {
            let anchor = |name: &str| match map.get(name) {
                None | Some(Value::Null) => Ok(NOT_AVAILABLE.to_owned()),
                Some(Value::String(s)) => Ok(bounded(s.trim(), ANCHOR_CHARS)),
                Some(_) => Err(unparsable(&format!(
                    "an anchor `{name}` that is not a string"
                ))),
            };
            Some(Anchors {
                user_intent: anchor("user_intent")?,
                execution_progress: anchor("execution_progress")?,
                key_decision: anchor("key_decision")?,
                tried_solution: anchor("tried_solution")?,
                next_step: anchor("next_step")?,
            })
        }
        Some(_) => return Err(unparsable("`anchors` that is not an object")),
    };
    Ok((summary, anchors))
}

fn outermost_object(text: &str) -> Option<Map<String, Value>> {
    let start = text.find('{')?;
    // The first complete value from the first brace, whatever follows it…
    let mut values = serde_json::Deserializer::from_str(&text[start..]).into_iter::<Value>();
    if let Some(Ok(Value::Object(map))) = values.next() {
        return Some(map);
    }
    // …or, when that fails, everything from the first brace to the last.
    let end = text.rfind('}').filter(|&end| end > start)?;
    match serde_json::from_str(&text[start..=end]) {
        Ok(Value::Object(map)) => Some(map),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_object_is_found_in_fences_and_prose() {
        for answer in [
            r#"{"summary": "S", "anchors": {"next_step": "go"}}"#,
            "```json\n{\"summary\": \"S\", \"anchors\": {\"next_step\": \"go\"}}\n```",
            "Here it is:\n{\"summary\": \"S\", \"anchors\": {\"next_step\": \"go\"}}\nHope {this} helps.",
        ] {
            let (summary, anchors) = parse_answer(answer).expect(answer);
            assert_eq!(summary, "S");
            let anchors = anchors.expect("the anchors are read");
            assert_eq!(anchors.next_step, "go");
            assert_eq!(anchors.user_intent, NOT_AVAILABLE);
        }
    }

    #[test]
    fn anything_else_is_unparsable() {
        for answer in [
            "",
            "I cannot summarise this.",
            "{not json}",
            r#"{"anchors": {}}"#,
            r#"{"summary": "  "}"#,
            r#"{"summary": 42}"#,
            r#"{"summary": "S", "anchors": ["a"]}"#,
            r#"{"summary": "S", "anchors": {"user_intent": 3}}"#,
            "} {",
        ] {
            assert!(parse_answer(answer).is_err(), "{answer:?}");
        }
    }

    #[test]
    fn too_many_events_keep_the_oldest_and_the_newest() {
        let events: Vec<Event> = (1..=1_000)
            .map(|seq| Event {
                seq,
                id: None,
                body: EventBody::Note(crate::domain::event::Note {
                    content: "x".repeat(500),
                }),
                pinned: false,
                metadata: None,
                tokens: 0,
                created_at: chrono::DateTime::UNIX_EPOCH,
                derived: Default::default(),
            })
            .collect();
        let events: Vec<&Event> = events.iter().collect();
        let text = render_events(&events, 20_000);
        assert!(text.chars().count() <= 20_000 + 40, "{}", text.len());
        assert!(text.starts_with("#1 note: xxx"));
        assert!(text.contains("\n#9 note: "));
        assert!(text.contains("events omitted here"));
        assert!(text.contains("\n#1000 note: "));
        assert!(!text.contains("\n#500 note: "));
    }

    #[test]
    fn long_tool_outputs_are_cut_with_a_marker() {
        assert_eq!(excerpt("héllo world", 5), "héllo… [6 more characters]");
        assert_eq!(excerpt(" short ", 5), "short");
    }
}
