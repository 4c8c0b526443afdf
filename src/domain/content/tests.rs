use base64::Engine as _;

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
