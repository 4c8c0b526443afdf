//! Anthropic Messages `system` and `messages`: system prompts joined, user and assistant turns
//! strictly alternating from the user, tool results as `tool_result` blocks leading the next
//! user turn.

use std::borrow::Cow;

use serde::Serialize;
use serde_json::Value;

use super::{
    orphan_result_text, pair_tool_results, tool_calls_of, Keyed, PartKey, Placed,
    CONVERSATION_CONTINUES, EMPTY_ERROR_RESULT, MISSING_RESULT,
};
use crate::domain::compaction::ViewMessage;
use crate::domain::content::{Image, Part};
use crate::domain::event::{Role, ToolCall};

/// `{"system": [...], "messages": [...]}` for Anthropic Messages.
#[derive(Serialize)]
pub struct AnthropicRequest<'a> {
    /// The system prompts as one text block, marked for the prompt cache.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) system: Option<[Keyed<Block<'a>>; 1]>,
    pub(super) messages: Vec<AnthropicMessage<'a>>,
}

#[derive(Serialize)]
pub(super) struct AnthropicMessage<'a> {
    pub(super) role: &'static str,
    pub(super) content: Vec<Keyed<Block<'a>>>,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(super) enum Block<'a> {
    Text {
        text: Cow<'a, str>,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        /// The arguments as the object Anthropic takes, made when serialised.
        input: ToolInput<'a>,
    },
    ToolResult {
        tool_use_id: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        content: Option<ResultContent<'a>>,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
    },
    Image {
        source: ImageSource<'a>,
    },
    Thinking {
        thinking: &'a str,
        signature: &'a str,
    },
    RedactedThinking {
        data: &'a str,
    },
}

/// A `tool_result`'s content: its text, or text and image blocks.
#[derive(Serialize)]
#[serde(untagged)]
pub(super) enum ResultContent<'a> {
    Text(Cow<'a, str>),
    Blocks(Vec<Block<'a>>),
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(super) enum ImageSource<'a> {
    Base64 { media_type: &'a str, data: &'a str },
    Url { url: &'a str },
}

/// The blocks of a message with parts: text and images, and its thinking when it is sent.
/// Anthropic takes images only from the user, and thinking only in assistant turns.
fn part_blocks<'a>(message: &'a ViewMessage<'a>) -> Vec<Block<'a>> {
    let assistant = message.role == Role::Assistant;
    let mut blocks = Vec::with_capacity(message.parts.len());
    for part in message.parts.iter() {
        match part {
            Part::Text { text } => blocks.extend(text_blocks(Cow::Borrowed(text.as_str()))),
            Part::Image(image) if !assistant => blocks.extend(image_block(image)),
            Part::Thinking {
                thinking,
                signature,
            } if assistant && message.reasoning => blocks.push(Block::Thinking {
                thinking,
                signature,
            }),
            Part::RedactedThinking { data } if assistant && message.reasoning => {
                blocks.push(Block::RedactedThinking { data })
            }
            _ => {}
        }
    }
    blocks
}

fn image_block(image: &Image) -> Option<Block<'_>> {
    let source = match (&image.url, &image.media_type, &image.data) {
        (Some(url), _, _) => ImageSource::Url { url },
        (None, Some(media_type), Some(data)) => ImageSource::Base64 { media_type, data },
        _ => return None,
    };
    Some(Block::Image { source })
}

/// A message's own blocks: its parts, or its text.
fn own_blocks<'a>(message: &'a ViewMessage<'a>) -> Vec<Block<'a>> {
    if message.parts.is_empty() {
        text_blocks(Cow::Borrowed(&message.content))
    } else {
        part_blocks(message)
    }
}

/// `{"system": [...], "messages": [...]}` in Anthropic Messages form (`system` only when there
/// is one): system prompts joined by blank lines into one text block, marked for the prompt
/// cache (see [`mark_breakpoints`]); user and assistant strictly alternating,
/// starting with the user; all results of an assistant turn as `tool_result` blocks leading the
/// next user message.
pub(super) fn anthropic<'a>(messages: &'a [ViewMessage<'a>]) -> AnthropicRequest<'a> {
    let mut system: Vec<&str> = Vec::new();
    let mut turns = AnthropicTurns::default();
    for placed in pair_tool_results(messages) {
        match placed {
            Placed::OrphanResult(result) => {
                let text = text_blocks(orphan_result_text(result).into());
                turns.push(Role::User, text.into_iter().map(Keyed::fresh).collect());
            }
            Placed::Message { message, results } => match message.role {
                Role::System => {
                    if !message.content.trim().is_empty() {
                        system.push(&message.content);
                    }
                }
                Role::User | Role::Tool => {
                    turns.push(Role::User, keyed_blocks(message, own_blocks(message)));
                }
                Role::Assistant => {
                    let calls = tool_calls_of(message);
                    let mut blocks = own_blocks(message);
                    blocks.extend(calls.iter().map(tool_use_block));
                    turns.push(Role::Assistant, keyed_blocks(message, blocks));
                    let results = calls.iter().zip(results).map(|(call, result)| {
                        let key = result.and_then(|r| PartKey::of(r, 0));
                        Keyed::by(key, tool_result_block(call, result))
                    });
                    turns.push(Role::User, results.collect());
                }
            },
        }
    }
    // `system` is optional; an empty one is left out rather than sent blank.
    let system = match system.as_slice() {
        [] => None,
        [one] => Some(Cow::Borrowed(*one)),
        many => Some(Cow::Owned(many.join("\n\n"))),
    };
    let system = system.map(|text| [Keyed::marked(Block::Text { text })]);
    let mut messages = turns.into_messages();
    mark_breakpoints(&mut messages);
    AnthropicRequest { system, messages }
}

/// Anthropic's `cache_control`: the prefix up to the block it marks is written to the prompt
/// cache, and read from it by a later request that repeats the prefix.
#[derive(Serialize)]
pub(super) struct CacheControl {
    #[serde(rename = "type")]
    kind: &'static str,
}

impl CacheControl {
    pub(super) const EPHEMERAL: CacheControl = CacheControl { kind: "ephemeral" };
}

/// `value` without Anthropic's `cache_control` marks, at any depth: the prompt a model reads,
/// which a later view repeats whatever it marks.
pub fn without_cache_control(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.remove("cache_control");
            map.values_mut().for_each(without_cache_control);
        }
        Value::Array(items) => items.iter_mut().for_each(without_cache_control),
        _ => {}
    }
}

/// Marks a cache breakpoint, Anthropic's prompt caching being explicit: the last block of the
/// last message. The next view repeats this one and grows at its end, and Anthropic looks for
/// a prefix written earlier up to 20 blocks before a mark, so each request reads the whole of
/// the previous one from the cache as long as a turn adds fewer blocks than that. The system
/// prompt carries the other mark: a compaction rewrites the messages from the summary on, and
/// the tools and system prompt before them are still read from the cache. Anthropic takes four
/// marks; the other two are the client's. A thinking block takes no mark: the block before it
/// does.
pub(super) fn mark_breakpoints(messages: &mut [AnthropicMessage<'_>]) {
    let Some(last) = messages.last_mut() else {
        return;
    };
    let markable = last.content.iter_mut().rev().find(|block| {
        !matches!(
            block.part,
            Block::Thinking { .. } | Block::RedactedThinking { .. }
        )
    });
    if let Some(block) = markable {
        block.breakpoint = true;
    }
}

/// The blocks a message renders to, each keyed by the message and its place among them.
pub(super) fn keyed_blocks<'a>(
    message: &ViewMessage<'_>,
    blocks: Vec<Block<'a>>,
) -> Vec<Keyed<Block<'a>>> {
    let keyed = blocks.into_iter().enumerate();
    keyed
        .map(|(i, block)| Keyed::by(PartKey::of(message, i), block))
        .collect()
}

/// Anthropic messages under construction: consecutive blocks of one role share a message.
#[derive(Default)]
pub(super) struct AnthropicTurns<'a>(Vec<(Role, Vec<Keyed<Block<'a>>>)>);

impl<'a> AnthropicTurns<'a> {
    /// Appends `blocks` to the last message when it has the same role, else starts a message.
    /// No blocks, no message: Anthropic rejects empty content.
    fn push(&mut self, role: Role, blocks: Vec<Keyed<Block<'a>>>) {
        if blocks.is_empty() {
            return;
        }
        match self.0.last_mut() {
            Some((last, content)) if *last == role => content.extend(blocks),
            _ => self.0.push((role, blocks)),
        }
    }

    fn into_messages(mut self) -> Vec<AnthropicMessage<'a>> {
        if self.0.first().is_none_or(|(role, _)| *role != Role::User) {
            let opening = text_blocks(CONVERSATION_CONTINUES.into());
            let opening = opening.into_iter().map(Keyed::fresh).collect();
            self.0.insert(0, (Role::User, opening));
        }
        self.0
            .into_iter()
            .map(|(role, content)| AnthropicMessage {
                role: role.as_str(),
                content,
            })
            .collect()
    }
}

/// A text block, or none for blank text (Anthropic rejects whitespace-only text blocks).
pub(super) fn text_blocks(text: Cow<'_, str>) -> Vec<Block<'_>> {
    if text.trim().is_empty() {
        Vec::new()
    } else {
        vec![Block::Text { text }]
    }
}

pub(super) fn tool_use_block(call: &ToolCall) -> Block<'_> {
    Block::ToolUse {
        id: &call.id,
        name: &call.name,
        input: ToolInput(&call.arguments),
    }
}

/// Tool-call arguments as Anthropic takes them (see [`tool_input`]), converted only when
/// serialised.
pub(super) struct ToolInput<'a>(&'a Value);

impl Serialize for ToolInput<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        tool_input(self.0).serialize(serializer)
    }
}

/// The arguments as the JSON object Anthropic requires: the object itself, a string parsed as
/// one, or — so that nothing the model wrote is lost — `{"arguments": <what it was>}`.
pub(super) fn tool_input(arguments: &Value) -> Cow<'_, Value> {
    let wrapped = |value: Value| Cow::Owned(serde_json::json!({ "arguments": value }));
    match arguments {
        Value::Object(_) => Cow::Borrowed(arguments),
        Value::Null => Cow::Owned(serde_json::json!({})),
        Value::String(text) if text.trim().is_empty() => Cow::Owned(serde_json::json!({})),
        Value::String(text) => match serde_json::from_str(text) {
            Ok(object @ Value::Object(_)) => Cow::Owned(object),
            _ => wrapped(Value::String(text.clone())),
        },
        other => wrapped(other.clone()),
    }
}

pub(super) fn tool_result_block<'a>(
    call: &'a ToolCall,
    result: Option<&'a ViewMessage<'a>>,
) -> Block<'a> {
    let (content, is_error) = match result {
        Some(result) => (&*result.content, result.is_error),
        None => (MISSING_RESULT, true),
    };
    let with_parts = result.filter(|r| !r.parts.is_empty()).map(part_blocks);
    let content = if let Some(blocks) = with_parts.filter(|b| !b.is_empty()) {
        Some(ResultContent::Blocks(blocks))
    } else if !content.trim().is_empty() {
        Some(ResultContent::Text(Cow::Borrowed(content)))
    } else if is_error {
        Some(ResultContent::Text(Cow::Borrowed(EMPTY_ERROR_RESULT)))
    } else {
        None
    };
    Block::ToolResult {
        tool_use_id: &call.id,
        content,
        is_error,
    }
}
