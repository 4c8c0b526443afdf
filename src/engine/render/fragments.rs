//! Writing a rendered view with the JSON of its unchanged parts reused.
//!
//! Between compactions a view only grows at its end, and a part of a request that is made from
//! one view message alone (a message, a tool result, an Anthropic block) renders to the same
//! JSON on every call: the event it shows never changes, nor does how a projection shows it. A
//! replica keeps that JSON with the session's cached events, so a compact call serialises only
//! the messages that are new since the last call (and the summary), and copies the rest.

use std::cell::RefCell;

use foldhash::HashMap;
use serde::ser::{Error as _, SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};
use serde_json::value::RawValue;

use super::{as_sent, rendered, Format, Keyed, PartKey, Rendered};
use crate::domain::compaction::ViewMessage;

/// The JSON of the parts of one session's view, by what each is made from.
#[derive(Debug, Default)]
pub struct Fragments {
    parts: HashMap<(Format, PartKey), Box<RawValue>>,
    bytes: usize,
}

impl Fragments {
    /// The bytes of JSON held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Forgets the parts of the events for which `keep` is false.
    pub fn retain(&mut self, mut keep: impl FnMut(i64) -> bool) {
        let mut freed = 0;
        self.parts.retain(|(_, key), json| {
            let kept = keep(key.seq);
            if !kept {
                freed += json.get().len();
            }
            kept
        });
        self.bytes -= freed;
    }
}

/// A view rendered in `format`, serialised with the JSON of its unchanged parts reused: the
/// same JSON as serialising [`rendered`]`(format, `[`as_sent`]`(format, messages))`, with the
/// parts `fragments` holds copied rather than serialised again, and the new ones added to it.
/// Serialise it into an answer of its own: nothing is checked or copied twice.
pub struct ReusingView<'v, 'a> {
    format: Format,
    messages: &'v [ViewMessage<'a>],
    fragments: RefCell<&'v mut Fragments>,
}

impl<'v, 'a> ReusingView<'v, 'a> {
    pub fn new(
        format: Format,
        messages: &'v [ViewMessage<'a>],
        fragments: &'v mut Fragments,
    ) -> Self {
        Self {
            format,
            messages,
            fragments: RefCell::new(fragments),
        }
    }
}

impl Serialize for ReusingView<'_, '_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let (format, fragments) = (self.format, &self.fragments);
        let messages = as_sent(format, self.messages);
        match rendered(format, &messages) {
            Rendered::Openai(request) => {
                let mut map = serializer.serialize_map(Some(1))?;
                map.serialize_entry("messages", &Parts(format, &request.messages, fragments))?;
                map.end()
            }
            Rendered::OpenaiResponses(request) => {
                let mut map = serializer.serialize_map(Some(1))?;
                map.serialize_entry("input", &Parts(format, &request.input, fragments))?;
                map.end()
            }
            Rendered::Anthropic(request) => {
                let mut map = serializer.serialize_map(None)?;
                if let Some(system) = &request.system {
                    map.serialize_entry("system", system)?;
                }
                let messages: Vec<_> = request
                    .messages
                    .iter()
                    .map(|m| AnthropicParts {
                        role: m.role,
                        content: Parts(format, &m.content, fragments),
                    })
                    .collect();
                map.serialize_entry("messages", &messages)?;
                map.end()
            }
            raw @ Rendered::Raw(_) => raw.serialize(serializer),
        }
    }
}

/// An Anthropic message whose blocks reuse their JSON.
#[derive(Serialize)]
struct AnthropicParts<'p, 'v, T> {
    role: &'static str,
    content: Parts<'p, 'v, T>,
}

/// Parts of a request, each written from its JSON of an earlier call when it has one.
struct Parts<'p, 'v, T>(Format, &'p [Keyed<T>], &'p RefCell<&'v mut Fragments>);

impl<T: Serialize> Serialize for Parts<'_, '_, T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let Parts(format, parts, fragments) = *self;
        let mut seq = serializer.serialize_seq(Some(parts.len()))?;
        for part in parts {
            let Some(key) = part.reusable_key() else {
                seq.serialize_element(part)?;
                continue;
            };
            let mut fragments = fragments.borrow_mut();
            if let Some(json) = fragments.parts.get(&(format, key)) {
                seq.serialize_element(json)?;
                continue;
            }
            let json = serde_json::value::to_raw_value(&part.part).map_err(S::Error::custom)?;
            seq.serialize_element(&json)?;
            fragments.bytes += json.get().len();
            fragments.parts.insert((format, key), json);
        }
        seq.end()
    }
}

/// Appends `messages` rendered in `format` to `out` (see [`ReusingView`]).
pub fn write_view(
    format: Format,
    messages: &[ViewMessage<'_>],
    fragments: &mut Fragments,
    out: &mut Vec<u8>,
) -> serde_json::Result<()> {
    serde_json::to_writer(out, &ReusingView::new(format, messages, fragments))
}
