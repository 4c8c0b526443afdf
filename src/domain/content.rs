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

use base64::Engine as _;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use super::has_nul;
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

/// Reads one part in any provider's spelling (see the module docs). `at` names it in errors.
pub fn read_part(value: &Value, at: &str) -> Result<Part, String> {
    let Value::Object(map) = value else {
        return Err(format!("{at}: a part must be an object with a `type`"));
    };
    let kind = map.get("type").and_then(Value::as_str).unwrap_or_default();
    let string = |key: &str| -> Result<String, String> {
        match map.get(key) {
            Some(Value::String(s)) if has_nul(s) => {
                Err(format!("{at}.{key}: {}", super::NUL_MESSAGE))
            }
            Some(Value::String(s)) => Ok(s.clone()),
            _ => Err(format!("{at}.{key}: required, a string")),
        }
    };
    let part = match kind {
        // OpenAI chat, Anthropic, and Responses text.
        "text" | "input_text" | "output_text" => Part::Text {
            text: string("text")?,
        },
        "refusal" => Part::Text {
            text: string("refusal")?,
        },
        // OpenAI chat: {"image_url": {"url", "detail"}}; Responses: {"image_url": "...", "detail"}.
        "image_url" | "input_image" => {
            let (url, detail) = match map.get("image_url") {
                Some(Value::Object(inner)) => (inner.get("url"), inner.get("detail")),
                other => (other, map.get("detail")),
            };
            let Some(Value::String(url)) = url else {
                return Err(format!(
                    "{at}.image_url: required, the image's URL (or a data: URL); file ids are not \
                     supported"
                ));
            };
            let detail = match detail {
                None | Some(Value::Null) => None,
                Some(Value::String(d)) if matches!(d.as_str(), "low" | "high" | "auto") => {
                    Some(d.clone())
                }
                Some(_) => return Err(format!("{at}.detail: low, high or auto")),
            };
            Part::Image(image_from_url(url, detail, at)?)
        }
        // Anthropic: {"source": {"type": "base64", "media_type", "data"} | {"type": "url", "url"}}.
        "image" => match map.get("source") {
            Some(Value::Object(source)) => {
                let field = |key: &str| source.get(key).and_then(Value::as_str);
                match field("type") {
                    Some("base64") => Part::Image(inline_image(
                        field("media_type").unwrap_or_default(),
                        field("data").unwrap_or_default(),
                        None,
                        at,
                    )?),
                    Some("url") => {
                        Part::Image(image_from_url(field("url").unwrap_or_default(), None, at)?)
                    }
                    _ => {
                        return Err(format!(
                            "{at}.source.type: base64 or url (file sources are not supported)"
                        ))
                    }
                }
            }
            // ctxd's own form, as GET /events gives it back.
            _ => {
                let image: Image =
                    serde_json::from_value(value.clone()).map_err(|e| format!("{at}: {e}"))?;
                match (&image.url, &image.media_type, &image.data) {
                    (Some(url), None, None) => Part::Image(image_from_url(url, image.detail, at)?),
                    (None, Some(t), Some(d)) => Part::Image(inline_image(t, d, image.detail, at)?),
                    _ => {
                        return Err(format!(
                            "{at}: an image needs `source` (Anthropic), or `url`, or \
                             `media_type` and `data`"
                        ))
                    }
                }
            }
        },
        "thinking" => Part::Thinking {
            thinking: string("thinking")?,
            signature: string("signature")?,
        },
        "redacted_thinking" => Part::RedactedThinking {
            data: string("data")?,
        },
        "reasoning" => {
            let summary = match map.get("summary") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(items)) => items
                    .iter()
                    .enumerate()
                    .map(|(k, item)| match item {
                        Value::String(s) => Ok(s.clone()),
                        Value::Object(o) => match o.get("text") {
                            Some(Value::String(s)) => Ok(s.clone()),
                            _ => Err(format!("{at}.summary[{k}].text: required, a string")),
                        },
                        _ => Err(format!("{at}.summary[{k}]: a summary_text object")),
                    })
                    .collect::<Result<_, _>>()?,
                Some(_) => return Err(format!("{at}.summary: an array of summary_text objects")),
            };
            if let Some(k) = summary.iter().position(|s| has_nul(s)) {
                return Err(format!("{at}.summary[{k}]: {}", super::NUL_MESSAGE));
            }
            let encrypted_content = match map.get("encrypted_content") {
                None | Some(Value::Null) => None,
                Some(_) => Some(string("encrypted_content")?),
            };
            Part::Reasoning {
                id: string("id")?,
                summary,
                encrypted_content,
            }
        }
        "" => return Err(format!("{at}.type: required")),
        other => {
            return Err(format!(
                "{at}.type: `{other}` parts are not supported; send text, image, thinking, \
                 redacted_thinking or reasoning parts (OpenAI, Anthropic or Responses spelling)"
            ))
        }
    };
    Ok(part)
}

/// An image given by URL; a `data:` URL is held as the inline image it is.
fn image_from_url(url: &str, detail: Option<String>, at: &str) -> Result<Image, String> {
    if let Some(rest) = url.strip_prefix("data:") {
        let Some((media_type, data)) = rest.split_once(";base64,") else {
            return Err(format!(
                "{at}: a data: URL must be `data:<media type>;base64,<data>`"
            ));
        };
        return inline_image(media_type, data, detail, at);
    }
    if !(url.starts_with("https://") || url.starts_with("http://")) || has_nul(url) {
        return Err(format!("{at}: an image URL must be http(s) or a data: URL"));
    }
    Ok(Image {
        url: Some(url.to_owned()),
        media_type: None,
        data: None,
        detail,
        width: None,
        height: None,
    })
}

/// An inline image, with its size read from its header.
fn inline_image(
    media_type: &str,
    data: &str,
    detail: Option<String>,
    at: &str,
) -> Result<Image, String> {
    if !IMAGE_MEDIA_TYPES.contains(&media_type) {
        return Err(format!(
            "{at}: media type `{media_type}` is not one providers take: {}",
            IMAGE_MEDIA_TYPES.join(", ")
        ));
    }
    let (width, height) = image_size(data)
        .ok_or_else(|| format!("{at}: the data is not a base64-encoded {media_type} image"))?;
    Ok(Image {
        url: None,
        media_type: Some(media_type.to_owned()),
        data: Some(data.to_owned()),
        detail,
        width: Some(width),
        height: Some(height),
    })
}

/// An inline image's width and height, from the start of its base64 data.
fn image_size(data: &str) -> Option<(u32, u32)> {
    if data.is_empty() || !data.is_ascii() {
        return None;
    }
    // A header is near the start; JPEG's size marker may follow some metadata.
    let mut head = data.len().min(96 * 1024);
    head -= head % 4;
    let engine = base64::engine::general_purpose::STANDARD;
    let bytes = if head == data.len() {
        engine.decode(data).ok()?
    } else {
        engine.decode(&data[..head]).ok()?
    };
    let size = imagesize::blob_size(&bytes).ok()?;
    Some((
        u32::try_from(size.width).ok()?,
        u32::try_from(size.height).ok()?,
    ))
}

/// Reads `content` given as an array of parts. Returns the errors as (path, message).
pub fn read_parts(items: &[Value], field: &str) -> Result<Vec<Part>, Vec<(String, String)>> {
    let mut parts = Vec::with_capacity(items.len());
    let mut errors = Vec::new();
    for (k, item) in items.iter().enumerate() {
        let at = format!("{field}[{k}]");
        match read_part(item, &at) {
            Ok(part) => parts.push(part),
            Err(message) => errors.push(match message.split_once(": ") {
                Some((path, message)) => (path.to_owned(), message.to_owned()),
                None => (at, message),
            }),
        }
    }
    if errors.is_empty() {
        Ok(parts)
    } else {
        Err(errors)
    }
}

/// Parts as the OpenAPI document describes them: one named schema per type, discriminated on
/// `type`, so that a generated client gets one class per part. They only describe the wire
/// format of [`Part`] and of a message's content.
#[allow(dead_code)]
pub mod schema {
    use serde::Serialize;
    use utoipa::ToSchema;

    /// One part of a message, in ctxd's form. `type` says which fields it has.
    #[derive(Serialize, ToSchema)]
    #[serde(untagged)]
    #[schema(as = Part, discriminator(property_name = "type", mapping(
        ("text" = "#/components/schemas/TextPart"),
        ("image" = "#/components/schemas/ImagePart"),
        ("thinking" = "#/components/schemas/ThinkingPart"),
        ("redacted_thinking" = "#/components/schemas/RedactedThinkingPart"),
        ("reasoning" = "#/components/schemas/ReasoningPart")
    )))]
    pub enum PartSchema {
        Text(TextPart),
        Image(ImagePart),
        Thinking(ThinkingPart),
        RedactedThinking(RedactedThinkingPart),
        Reasoning(ReasoningPart),
    }

    /// Text.
    #[derive(Serialize, ToSchema)]
    pub struct TextPart {
        #[serde(rename = "type")]
        #[schema(inline)]
        pub kind: TextType,
        pub text: String,
    }

    /// An image: by `url`, or inline as `media_type` and base64 `data`.
    #[derive(Serialize, ToSchema)]
    pub struct ImagePart {
        #[serde(rename = "type")]
        #[schema(inline)]
        pub kind: ImageType,
        /// An http(s) URL the provider fetches.
        #[schema(required = false)]
        pub url: String,
        /// `image/png`, `image/jpeg`, `image/gif` or `image/webp`.
        #[schema(required = false)]
        pub media_type: String,
        /// The image, base64-encoded.
        #[schema(required = false)]
        pub data: String,
        /// OpenAI's `detail`: `low`, `high` or `auto`.
        #[schema(required = false)]
        pub detail: String,
        /// Pixels, read from an inline image (set by ctxd).
        #[schema(required = false)]
        pub width: u32,
        #[schema(required = false)]
        pub height: u32,
    }

    /// Anthropic extended thinking, sent back exactly (with its signature) in the current tool
    /// loop and left out before it.
    #[derive(Serialize, ToSchema)]
    pub struct ThinkingPart {
        #[serde(rename = "type")]
        #[schema(inline)]
        pub kind: ThinkingType,
        pub thinking: String,
        pub signature: String,
    }

    /// Anthropic thinking the provider redacted, sent back like thinking.
    #[derive(Serialize, ToSchema)]
    pub struct RedactedThinkingPart {
        #[serde(rename = "type")]
        #[schema(inline)]
        pub kind: RedactedThinkingType,
        /// The encrypted thinking.
        pub data: String,
    }

    /// An OpenAI Responses `reasoning` item, sent back exactly in the current tool loop.
    #[derive(Serialize, ToSchema)]
    pub struct ReasoningPart {
        #[serde(rename = "type")]
        #[schema(inline)]
        pub kind: ReasoningType,
        /// The item's id (`rs_...`).
        pub id: String,
        /// The texts of its `summary_text` entries.
        #[schema(required = false)]
        pub summary: Vec<String>,
        #[schema(required = false)]
        pub encrypted_content: String,
    }

    #[derive(Serialize, ToSchema)]
    #[serde(rename_all = "snake_case")]
    pub enum TextType {
        Text,
    }

    #[derive(Serialize, ToSchema)]
    #[serde(rename_all = "snake_case")]
    pub enum ImageType {
        Image,
    }

    #[derive(Serialize, ToSchema)]
    #[serde(rename_all = "snake_case")]
    pub enum ThinkingType {
        Thinking,
    }

    #[derive(Serialize, ToSchema)]
    #[serde(rename_all = "snake_case")]
    pub enum RedactedThinkingType {
        RedactedThinking,
    }

    #[derive(Serialize, ToSchema)]
    #[serde(rename_all = "snake_case")]
    pub enum ReasoningType {
        Reasoning,
    }

    /// A message's content: its text, or its parts.
    #[derive(Serialize, ToSchema)]
    #[serde(untagged)]
    pub enum MessageContent {
        Text(String),
        Parts(Vec<PartSchema>),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A 1280×800 PNG header (signature and IHDR), base64-encoded.
    pub(crate) fn png_1280x800() -> String {
        let mut bytes = vec![0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13];
        bytes.extend_from_slice(b"IHDR");
        bytes.extend_from_slice(&1280u32.to_be_bytes());
        bytes.extend_from_slice(&800u32.to_be_bytes());
        bytes.extend_from_slice(&[8, 6, 0, 0, 0, 0, 0, 0, 0]);
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }

    #[test]
    fn every_spelling_of_an_image_reads_as_one_part() {
        let data = png_1280x800();
        let spellings = [
            json!({"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{data}")}}),
            json!({"type": "input_image", "image_url": format!("data:image/png;base64,{data}"), "detail": "auto"}),
            json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}),
            json!({"type": "image", "media_type": "image/png", "data": data}),
        ];
        for spelling in spellings {
            let Part::Image(image) = read_part(&spelling, "content[0]").unwrap() else {
                panic!("an image");
            };
            assert_eq!((image.width, image.height), (Some(1280), Some(800)));
            assert_eq!(image.data.as_deref(), Some(data.as_str()));
            // Anthropic: 1280*800/750 = 1366, over OpenAI's 85 + 170 * 6 (1229x768: 3x2 tiles).
            assert_eq!(image.tokens(), 1366);
        }
    }

    #[test]
    fn reasoning_is_held_exactly_and_costed_only_when_sent() {
        let thinking = read_part(
            &json!({"type": "thinking", "thinking": "Let me look.", "signature": "EqQBCkYIBx=="}),
            "content[0]",
        )
        .unwrap();
        let reasoning = read_part(
            &json!({"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text",
                "text": "Plan"}], "encrypted_content": "gAAAAB"}),
            "content[1]",
        )
        .unwrap();
        let parts = vec![
            thinking.clone(),
            reasoning,
            Part::Text {
                text: "Done.".into(),
            },
        ];
        let content = Content::parts(parts.clone());
        assert_eq!(content.text(), "Done.");
        let json = serde_json::to_value(&content).unwrap();
        assert_eq!(
            json[0],
            json!({"type": "thinking", "thinking": "Let me look.", "signature": "EqQBCkYIBx=="})
        );
        assert_eq!(serde_json::from_value::<Content>(json).unwrap(), content);
        let t = Tokenizer::Chars4;
        assert_eq!(parts_tokens(&parts, t, false), 0);
        assert_eq!(parts_tokens(&parts, t, true), 3 + 1 + 2);
    }

    #[test]
    fn unsupported_or_broken_parts_are_named() {
        for (part, says) in [
            (
                json!({"type": "input_audio"}),
                "`input_audio` parts are not supported",
            ),
            (json!({"type": "text"}), "content[2].text: required"),
            (
                json!({"type": "image", "source": {"type": "base64", "media_type": "image/bmp", "data": "AA=="}}),
                "media type",
            ),
            (
                json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "bm90IGFuIGltYWdl"}}),
                "not a base64-encoded",
            ),
            (
                json!({"type": "image_url", "image_url": {"url": "ftp://x"}}),
                "http(s)",
            ),
            (json!({"type": "thinking", "thinking": "x"}), "signature"),
            (json!("text"), "an object"),
        ] {
            let error = read_part(&part, "content[2]").unwrap_err();
            assert!(error.contains(says), "{error}");
        }
    }

    #[test]
    fn image_costs_follow_the_providers_rules() {
        let image = |w, h, detail: Option<&str>| Image {
            url: None,
            media_type: Some("image/png".into()),
            data: Some(String::new()),
            detail: detail.map(str::to_owned),
            width: Some(w),
            height: Some(h),
        };
        // 512x512: OpenAI 85 + 170; Anthropic 262144 / 750 = 350.
        assert_eq!(image(512, 512, None).tokens(), 350);
        // 4000x3000: OpenAI fits 2048x1536, then 1024x768: 2x2 tiles = 765; Anthropic scales
        // to 1.15 megapixels: 1534.
        assert_eq!(image(4000, 3000, None).tokens(), 1534);
        // Low detail changes OpenAI's count only.
        assert_eq!(image(100, 100, Some("low")).tokens(), 85);
        assert_eq!(
            Image {
                width: None,
                ..image(1, 1, None)
            }
            .tokens(),
            UNKNOWN_IMAGE_TOKENS
        );
    }
}
