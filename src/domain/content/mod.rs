//! A message's content: one text, or the provider's parts (text, images, and the reasoning a
//! provider needs back).
//!
//! Parts are taken in each provider's own spelling — OpenAI chat content parts, Anthropic content
//! blocks, OpenAI Responses content and `reasoning` items — and held in one neutral form that
//! every renderer can write back in its provider's shape. What a provider must get back exactly
//! (a thinking block's text and signature, redacted thinking, a reasoning item's encrypted
//! content) is held byte for byte. The message's text (its text parts, joined) is what
//! summaries, previews and recall read; reasoning is never part of it.

use std::fmt::Write;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::tokens::Tokenizer;

/// The image media types every provider accepts.
pub const IMAGE_MEDIA_TYPES: [&str; 4] = ["image/jpeg", "image/png", "image/gif", "image/webp"];

/// What an image whose size is unknown (a URL) is costed as: the most any provider charges.
pub const UNKNOWN_IMAGE_TOKENS: i64 = 1_600;

/// A message's content.
#[derive(Debug, Clone, PartialEq)]
pub enum Content {
    /// One text (possibly empty).
    Text(String),
    /// The provider's parts, with their text parts joined (by blank lines) in `text`.
    Parts { parts: Vec<Part>, text: String },
}

impl Default for Content {
    fn default() -> Self {
        Self::Text(String::new())
    }
}

impl From<String> for Content {
    fn from(text: String) -> Self {
        Self::Text(text)
    }
}

impl From<&str> for Content {
    fn from(text: &str) -> Self {
        Self::Text(text.to_owned())
    }
}

impl Content {
    /// Content made of `parts`.
    pub fn parts(parts: Vec<Part>) -> Self {
        let text = joined_text(&parts);
        Self::Parts { parts, text }
    }

    /// The message's text: its own, or its text parts joined.
    pub fn text(&self) -> &str {
        match self {
            Self::Text(text) | Self::Parts { text, .. } => text,
        }
    }

    /// The parts, when the content came as parts.
    pub fn part_list(&self) -> &[Part] {
        match self {
            Self::Text(_) => &[],
            Self::Parts { parts, .. } => parts,
        }
    }

    /// Whether there is nothing at all: no text and no part.
    pub fn is_empty(&self) -> bool {
        match self {
            Self::Text(text) => text.is_empty(),
            Self::Parts { parts, .. } => parts.is_empty(),
        }
    }

    /// Bytes held, for memory accounting.
    pub fn bytes(&self) -> usize {
        match self {
            Self::Text(text) => text.len(),
            Self::Parts { parts, text } => {
                text.len() + parts.iter().map(Part::bytes).sum::<usize>()
            }
        }
    }
}

fn joined_text(parts: &[Part]) -> String {
    let mut text = String::new();
    for part in parts {
        if let Part::Text { text: t } = part {
            if !text.is_empty() {
                text.push_str("\n\n");
            }
            text.push_str(t);
        }
    }
    text
}

impl Serialize for Content {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Text(text) => serializer.serialize_str(text),
            Self::Parts { parts, .. } => parts.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for Content {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Stored {
            Text(String),
            Parts(Vec<Part>),
        }
        match Stored::deserialize(deserializer) {
            Ok(Stored::Text(text)) => Ok(Self::Text(text)),
            Ok(Stored::Parts(parts)) => Ok(Self::parts(parts)),
            Err(_) => Err(D::Error::custom(
                "content must be a string or an array of parts",
            )),
        }
    }
}

/// One part of a message, in ctxd's neutral form (see [`schema`] for how the OpenAPI document
/// describes it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Part {
    /// Text.
    Text { text: String },
    /// An image, by URL or inline.
    Image(Image),
    /// Anthropic extended thinking, sent back exactly (with its signature) in the current tool
    /// loop and left out before it.
    Thinking { thinking: String, signature: String },
    /// Anthropic thinking the provider redacted: its encrypted `data`, sent back like thinking.
    RedactedThinking { data: String },
    /// An OpenAI Responses `reasoning` item, sent back exactly in the current tool loop.
    Reasoning {
        /// The item's id (`rs_...`).
        id: String,
        /// The texts of its `summary_text` entries.
        #[serde(default)]
        summary: Vec<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        encrypted_content: Option<String>,
    },
}

/// An image part.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Image {
    /// `https://...` (the provider fetches it); inline images are in `data`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// `image/png`, `image/jpeg`, `image/gif` or `image/webp`, for inline images.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    /// The image, base64-encoded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<String>,
    /// OpenAI's `detail`: `low`, `high` or `auto`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// Pixels, read from an inline image's header.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub width: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub height: Option<u32>,
}

impl Image {
    /// The image as a URL: its own, or a `data:` URL of the inline image.
    pub fn as_url(&self) -> std::borrow::Cow<'_, str> {
        match (&self.url, &self.media_type, &self.data) {
            (Some(url), _, _) => url.as_str().into(),
            (None, Some(media_type), Some(data)) => {
                format!("data:{media_type};base64,{data}").into()
            }
            _ => "".into(),
        }
    }

    /// Tokens this image costs: the larger of OpenAI's rule (85 plus 170 per 512-pixel tile
    /// after scaling to fit 2048×2048 and the short side to 768; 85 at `low` detail) and
    /// Anthropic's (width × height / 750 after scaling to a long side of 1568 and 1.15
    /// megapixels), so that a view fits whichever provider it is sent to. An image whose size is
    /// unknown costs [`UNKNOWN_IMAGE_TOKENS`].
    pub fn tokens(&self) -> i64 {
        let (Some(w), Some(h)) = (self.width, self.height) else {
            return UNKNOWN_IMAGE_TOKENS;
        };
        if w == 0 || h == 0 {
            return 85;
        }
        openai_image_tokens(w, h, self.detail.as_deref()).max(anthropic_image_tokens(w, h))
    }

    /// A one-line description for a reference to the image.
    pub fn describe(&self) -> String {
        let mut text = String::from("image");
        if let Some(media_type) = &self.media_type {
            let _ = write!(text, " {media_type}");
        }
        if let (Some(w), Some(h)) = (self.width, self.height) {
            let _ = write!(text, " {w}x{h}");
        }
        if let Some(url) = &self.url {
            let _ = write!(text, " {}", crate::domain::text::prefix_chars(url, 200));
        }
        text
    }
}

fn openai_image_tokens(w: u32, h: u32, detail: Option<&str>) -> i64 {
    if detail == Some("low") {
        return 85;
    }
    let (mut w, mut h) = (f64::from(w), f64::from(h));
    let fit = (2048.0 / w.max(h)).min(1.0);
    (w, h) = (w * fit, h * fit);
    let short = (768.0 / w.min(h)).min(1.0);
    (w, h) = (w * short, h * short);
    let tiles = (w / 512.0).ceil() * (h / 512.0).ceil();
    85 + 170 * tiles as i64
}

fn anthropic_image_tokens(w: u32, h: u32) -> i64 {
    let (mut w, mut h) = (f64::from(w), f64::from(h));
    let long = (1568.0 / w.max(h)).min(1.0);
    (w, h) = (w * long, h * long);
    let pixels = (1_150_000.0 / (w * h)).min(1.0).sqrt();
    (w, h) = (w * pixels, h * pixels);
    ((w * h) / 750.0).ceil() as i64
}

impl Part {
    /// Whether this part is reasoning a provider needs back (never shown as text).
    pub fn is_reasoning(&self) -> bool {
        matches!(
            self,
            Self::Thinking { .. } | Self::RedactedThinking { .. } | Self::Reasoning { .. }
        )
    }

    /// Tokens of this part beyond the message's text: an image's cost, or reasoning's when it is
    /// sent (thinking by its text; encrypted reasoning at four characters a token). Text parts
    /// are counted with the message's text.
    pub fn extra_tokens(&self, tokenizer: Tokenizer) -> i64 {
        match self {
            Self::Text { .. } => 0,
            Self::Image(image) => image.tokens(),
            Self::Thinking { thinking, .. } => tokenizer.count(thinking),
            Self::RedactedThinking { data } => data.len().div_ceil(4) as i64,
            Self::Reasoning {
                summary,
                encrypted_content,
                ..
            } => {
                summary.iter().map(|s| tokenizer.count(s)).sum::<i64>()
                    + encrypted_content
                        .as_ref()
                        .map_or(0, |c| c.len().div_ceil(4) as i64)
            }
        }
    }

    fn bytes(&self) -> usize {
        match self {
            Self::Text { text } => text.len(),
            Self::Image(image) => {
                [&image.url, &image.data, &image.media_type, &image.detail]
                    .iter()
                    .map(|s| s.as_ref().map_or(0, String::len))
                    .sum::<usize>()
                    + 16
            }
            Self::Thinking {
                thinking,
                signature,
            } => thinking.len() + signature.len(),
            Self::RedactedThinking { data } => data.len(),
            Self::Reasoning {
                id,
                summary,
                encrypted_content,
            } => {
                id.len()
                    + summary.iter().map(String::len).sum::<usize>()
                    + encrypted_content.as_ref().map_or(0, String::len)
            }
        }
    }
}

/// The tokens of `parts` beyond their text: images always, reasoning when `with_reasoning`.
pub fn parts_tokens(parts: &[Part], tokenizer: Tokenizer, with_reasoning: bool) -> i64 {
    parts
        .iter()
        .filter(|p| with_reasoning || !p.is_reasoning())
        .map(|p| p.extra_tokens(tokenizer))
        .sum()
}

mod read;
pub mod schema;
#[cfg(test)]
mod tests;

pub use read::{read_part, read_parts};
