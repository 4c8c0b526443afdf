//! The Anthropic Messages API: `POST {base_url}/v1/messages`.

use reqwest::header::HeaderValue;
use serde::Deserialize;
use serde_json::json;

use super::{endpoint, envelope, Api, Completion, LlmConfig, Prompt};
use crate::summarize::SummarizeError;

const API_VERSION: &str = "2023-06-01";

pub(super) struct Anthropic;

#[derive(Deserialize)]
struct MessageAnswer {
    #[serde(default)]
    content: Vec<ContentBlock>,
    usage: Option<Usage>,
    stop_reason: Option<String>,
}

#[derive(Deserialize)]
struct ContentBlock {
    #[serde(rename = "type")]
    kind: String,
    text: Option<String>,
}

#[derive(Deserialize)]
struct Usage {
    input_tokens: Option<i64>,
    output_tokens: Option<i64>,
}

impl Api for Anthropic {
    const KIND: &'static str = "anthropic";

    fn request(
        http: &reqwest::Client,
        config: &LlmConfig,
        prompt: &Prompt,
    ) -> Result<reqwest::RequestBuilder, SummarizeError> {
        let body = json!({
            "model": config.model,
            "max_tokens": config.max_output_tokens,
            "system": prompt.system,
            "messages": [{"role": "user", "content": prompt.user}],
        });
        let mut request = http
            .post(endpoint(&config.base_url, "/v1/messages"))
            .header("anthropic-version", API_VERSION)
            .json(&body);
        if let Some(key) = &config.api_key {
            // Never echo the key, even in the error about it.
            let mut value = HeaderValue::from_str(key).map_err(|_| {
                SummarizeError::Transport("the API key is not a valid header value".into())
            })?;
            value.set_sensitive(true);
            request = request.header("x-api-key", value);
        }
        Ok(request)
    }

    fn completion(body: &[u8]) -> Result<Completion, SummarizeError> {
        let answer: MessageAnswer = envelope(body)?;
        // Thinking and tool-use blocks carry no summary; only text blocks do.
        let text: String = answer
            .content
            .iter()
            .filter(|block| block.kind == "text")
            .filter_map(|block| block.text.as_deref())
            .collect();
        let text = if text.trim().is_empty() {
            Err("the answer has no text content".into())
        } else {
            Ok(text)
        };
        Ok(Completion {
            text,
            input_tokens: answer.usage.as_ref().and_then(|u| u.input_tokens),
            output_tokens: answer.usage.as_ref().and_then(|u| u.output_tokens),
            stop_reason: answer.stop_reason,
        })
    }
}
