//! Random views that keep the engine's contract: every one renders as a valid request of
//! each provider (call ids reused once answered, as clients do, still sent once a request),
//! loses no content, and writes the same with reused parts.

use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::domain::event::CallKind;
use crate::engine::validate::{validate_anthropic, validate_openai, validate_responses};

/// One step of a random session, as the engine could hand it over.
#[derive(Debug, Clone)]
enum Step {
    User,
    Note,
    AssistantText,
    Calls {
        count: usize,
        with_text: bool,
        arguments: u8,
    },
    Result {
        pick: prop::sample::Index,
        is_error: bool,
    },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        2 => Just(Step::User),
        1 => Just(Step::Note),
        1 => Just(Step::AssistantText),
        2 => (1..=3usize, any::<bool>(), 0..8u8).prop_map(|(count, with_text, arguments)| {
            Step::Calls { count, with_text, arguments }
        }),
        4 => (any::<prop::sample::Index>(), any::<bool>())
            .prop_map(|(pick, is_error)| Step::Result { pick, is_error }),
    ]
}

/// Few ids, so that ids are often reused once answered.
const CALL_IDS: [&str; 4] = ["call_a", "call_b", "call_c", "call_d"];

/// A view that keeps the engine's contract: system prompts, maybe a summary, then the steps,
/// each result after its call, and every call answered by the end.
fn view_of(systems: usize, with_summary: bool, steps: &[Step]) -> Vec<ViewMessage<'static>> {
    let mut view: Vec<ViewMessage<'static>> = (0..systems)
        .map(|n| system(&format!("system prompt {n}")))
        .collect();
    if with_summary {
        view.push(summary("summary of earlier work"));
    }
    let mut unanswered: Vec<&str> = Vec::new();
    for (n, step) in steps.iter().enumerate() {
        match step {
            Step::User => view.push(user(&format!("user message {n}"))),
            Step::Note => view.push(user(&format!("[note] decision {n}"))),
            Step::AssistantText => view.push(assistant(&format!("assistant reply {n}"))),
            Step::Calls {
                count,
                with_text,
                arguments,
            } => {
                let free = CALL_IDS.iter().filter(|id| !unanswered.contains(id));
                let ids: Vec<&str> = free.take(*count).copied().collect();
                if ids.is_empty() {
                    continue;
                }
                unanswered.extend(&ids);
                let kind = *arguments;
                let arguments = |id: &str| match kind {
                    0 => json!({"step": n, "id": id}),
                    1 => json!(format!("{{\"step\": {n}}}")),
                    2 => json!(format!("not json {n}")),
                    _ => json!(""),
                };
                let content = if *with_text {
                    format!("assistant calls {n}")
                } else {
                    String::new()
                };
                view.push(ViewMessage {
                    tool_calls: ids
                        .iter()
                        .map(|id| match kind {
                            // A freeform tool's call: its input is text.
                            4 => ToolCall::custom(
                                (*id).to_owned(),
                                "apply_patch".into(),
                                &format!("*** patch {n}"),
                            ),
                            // OpenAI's built-in tools: a shell action, a file operation, and a
                            // shell call whose arguments a view archived.
                            5..=7 => ToolCall {
                                kind: if kind == 6 { CallKind::ApplyPatch } else { CallKind::Shell },
                                ..call(id, match kind {
                                    5 => json!({"commands": [format!("ls {n}")]}).to_string().into(),
                                    6 => json!({"type": "update_file", "path": format!("src/{n}.rs"), "diff": "@@\n-a\n+b\n"}).to_string().into(),
                                    _ => json!({"archived_arguments": format!("{n} characters archived")}).to_string().into(),
                                })
                            },
                            _ => call(id, arguments(id)),
                        })
                        .collect::<Vec<_>>()
                        .into(),
                    ..assistant(&content)
                });
            }
            Step::Result { pick, is_error } => {
                if unanswered.is_empty() {
                    continue;
                }
                let id = unanswered.remove(pick.index(unanswered.len()));
                let content = format!("result {n} of {id}");
                view.push(ViewMessage {
                    is_error: *is_error,
                    ..result(id, &content)
                });
            }
        }
    }
    // The engine inserts placeholder results for calls still open at the end of the view.
    while let Some(id) = unanswered.pop() {
        view.push(result(id, &format!("placeholder for {id}")));
    }
    view
}

fn strings_in<'a>(value: &'a Value, found: &mut Vec<&'a str>) {
    match value {
        Value::String(s) => found.push(s),
        Value::Array(items) => items.iter().for_each(|v| strings_in(v, found)),
        Value::Object(fields) => fields.values().for_each(|v| strings_in(v, found)),
        _ => {}
    }
}

fn assert_no_content_lost(view: &[ViewMessage], request: &Value) {
    let mut found = Vec::new();
    strings_in(request, &mut found);
    for message in view {
        assert!(
            found.iter().any(|s| s.contains(&*message.content)),
            "{:?} is missing from {request:#}",
            message.content
        );
    }
}

/// How many blocks or messages of `request` have `field` equal to `value`, at any depth.
fn count(request: &Value, field: &str, value: &str) -> usize {
    let here = usize::from(request.get(field).and_then(Value::as_str) == Some(value));
    let below: usize = match request {
        Value::Array(items) => items.iter().map(|v| count(v, field, value)).sum(),
        Value::Object(fields) => fields.values().map(|v| count(v, field, value)).sum(),
        _ => 0,
    };
    here + below
}

proptest! {
    #[test]
    fn every_view_renders_as_a_valid_request_that_loses_no_content(
        systems in 0..3usize,
        with_summary in any::<bool>(),
        steps in prop::collection::vec(step(), 0..40),
    ) {
        let view = view_of(systems, with_summary, &steps);
        // Every result stays a result: none shown as text, no placeholder added.
        let results = view.iter().filter(|m| m.role == Role::Tool).count();

        let openai = render_openai(&view);
        prop_assert_eq!(validate_openai(&openai), Ok(()), "{:#}", openai);
        assert_no_content_lost(&view, &openai);
        prop_assert_eq!(count(&openai, "role", "tool"), results);

        let anthropic = render_anthropic(&view);
        prop_assert_eq!(validate_anthropic(&anthropic), Ok(()), "{:#}", anthropic);
        assert_no_content_lost(&view, &anthropic);
        prop_assert_eq!(count(&anthropic, "type", "tool_result"), results);

        let responses = render_responses(&view);
        prop_assert_eq!(validate_responses(&responses), Ok(()), "{:#}", responses);
        assert_no_content_lost(&view, &responses);
        let outputs: usize = ["function_call", "custom_tool_call", "shell_call", "apply_patch_call"]
            .iter()
            .map(|call| count(&responses, "type", &format!("{call}_output")))
            .sum();
        prop_assert_eq!(outputs, results);
    }

    /// A view written after an earlier one (a prefix of it, as between compactions that do
    /// not act), some of its messages since reduced, is exactly the view rendered afresh.
    #[test]
    fn views_written_with_reused_parts_are_the_views_rendered(
        systems in 0..3usize,
        with_summary in any::<bool>(),
        steps in prop::collection::vec(step(), 0..40),
        earlier in any::<prop::sample::Index>(),
        reduced in prop::collection::vec(any::<bool>(), 0..50),
    ) {
        let mut view = view_of(systems, with_summary, &steps);
        for (i, m) in view.iter_mut().enumerate() {
            m.seq = m.seq.map(|_| i as i64 + 1);
        }
        let earlier = view[..earlier.index(view.len() + 1)].to_vec();
        for (i, m) in view.iter_mut().enumerate() {
            if m.seq.is_some() && reduced.get(i).copied().unwrap_or(false) {
                m.content = format!("[preview {i}]").into();
                m.projection = Projection::Preview;
            }
        }
        for format in [Format::Openai, Format::OpenaiResponses, Format::Anthropic, Format::Raw] {
            let mut fragments = Fragments::default();
            for v in [&earlier, &view] {
                let mut written = Vec::new();
                write_view(format, v, &mut fragments, &mut written).unwrap();
                let fresh = serde_json::to_vec(&rendered(format, &as_sent(format, v))).unwrap();
                prop_assert_eq!(
                    String::from_utf8(written).unwrap(),
                    String::from_utf8(fresh).unwrap(),
                    "{:?}", format
                );
            }
        }
    }
}
