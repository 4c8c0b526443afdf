//! Reading parts in each provider's spelling into ctxd's form, with an inline image's size read
//! from its header.

use base64::Engine as _;
use serde_json::Value;

use super::{Image, Part, IMAGE_MEDIA_TYPES};
use crate::domain::{has_nul, NUL_MESSAGE};

/// Reads one part in any provider's spelling (see the module docs). `at` names it in errors.
pub fn read_part(value: &Value, at: &str) -> Result<Part, String> {
    let Value::Object(map) = value else {
        return Err(format!("{at}: a part must be an object with a `type`"));
    };
    let kind = map.get("type").and_then(Value::as_str).unwrap_or_default();
    let string = |key: &str| -> Result<String, String> {
        match map.get(key) {
            Some(Value::String(s)) if has_nul(s) => Err(format!("{at}.{key}: {}", NUL_MESSAGE)),
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
                return Err(format!("{at}.summary[{k}]: {}", NUL_MESSAGE));
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
