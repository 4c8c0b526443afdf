//! Writing a rendered view with the JSON of its unchanged parts reused.
//!
//! Between compactions a view only grows at its end, and a part of a request that is made from
//! one view message alone (a message, a tool result, an Anthropic block) renders to the same
//! JSON on every call: the event it shows never changes, nor does how a projection shows it. A
//! replica keeps that JSON with the session's cached events, so a compact call serialises only
//! the messages that are new since the last call (and the summary), then copies the rest.

use std::io::Write;

use foldhash::HashMap;
use serde::Serialize;
use serde_json::value::RawValue;

use super::{rendered, AnthropicRequest, Format, Keyed, OpenaiRequest, PartKey, Rendered};
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

    /// Writes `part`: its JSON from an earlier call when it has a key, else serialised now.
    fn write<T: Serialize>(
        &mut self,
        format: Format,
        part: &Keyed<T>,
        out: &mut Vec<u8>,
    ) -> serde_json::Result<()> {
        let Some(key) = part.key else {
            return serde_json::to_writer(&mut *out, &part.part);
        };
        if let Some(json) = self.parts.get(&(format, key)) {
            out.extend_from_slice(json.get().as_bytes());
            return Ok(());
        }
        let json = serde_json::value::to_raw_value(&part.part)?;
        out.extend_from_slice(json.get().as_bytes());
        self.bytes += json.get().len();
        self.parts.insert((format, key), json);
        Ok(())
    }
}

/// Appends `messages` rendered in `format` to `out`: the same JSON as serialising
/// [`rendered`]`(format, messages)`, with the parts `fragments` holds copied rather than
/// serialised again, and the new ones added to it.
pub fn write_view(
    format: Format,
    messages: &[ViewMessage<'_>],
    fragments: &mut Fragments,
    out: &mut Vec<u8>,
) -> serde_json::Result<()> {
    match rendered(format, messages) {
        Rendered::Openai(request) => write_openai(&request, fragments, out),
        Rendered::Anthropic(request) => write_anthropic(&request, fragments, out),
        raw @ Rendered::Raw(_) => serde_json::to_writer(out, &raw),
    }
}

fn write_openai(
    request: &OpenaiRequest<'_>,
    fragments: &mut Fragments,
    out: &mut Vec<u8>,
) -> serde_json::Result<()> {
    out.extend_from_slice(br#"{"messages":["#);
    for (i, message) in request.messages.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        fragments.write(Format::Openai, message, out)?;
    }
    out.extend_from_slice(b"]}");
    Ok(())
}

fn write_anthropic(
    request: &AnthropicRequest<'_>,
    fragments: &mut Fragments,
    out: &mut Vec<u8>,
) -> serde_json::Result<()> {
    out.push(b'{');
    if let Some(system) = &request.system {
        out.extend_from_slice(br#""system":"#);
        serde_json::to_writer(&mut *out, system)?;
        out.push(b',');
    }
    out.extend_from_slice(br#""messages":["#);
    for (i, message) in request.messages.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write!(out, r#"{{"role":"{}","content":["#, message.role).map_err(serde_json::Error::io)?;
        for (k, block) in message.content.iter().enumerate() {
            if k > 0 {
                out.push(b',');
            }
            fragments.write(Format::Anthropic, block, out)?;
        }
        out.extend_from_slice(b"]}");
    }
    out.extend_from_slice(b"]}");
    Ok(())
}
