//! Parts as the OpenAPI document describes them: one named schema per type, discriminated on
//! `type`, so that a generated client gets one class per part. They only describe the wire
//! format of [`Part`] and of a message's content.
#![allow(dead_code)]

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
