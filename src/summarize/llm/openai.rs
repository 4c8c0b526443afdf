//! The OpenAI-compatible chat-completions API: `POST {base_url}/chat/completions`.

use serde::Deserialize;
use serde_json::json;

use super::{endpoint, envelope, Api, Completion, LlmConfig, Prompt};
use crate::summarize::SummarizeError;

pub(super) struct OpenAi;

#[derive(Deserialize)]
struct ChatCompletion {
    #[serde(default)]
    choices: Vec<Choice>,
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct Choice {
    message: AssistantMessage,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct AssistantMessage {
    content: Option<String>,
    refusal: Option<String>,
}

#[derive(Deserialize)]
struct Usage {
    prompt_tokens: Option<i64>,
    completion_tokens: Option<i64>,
}

impl Api for OpenAi {
    const KIND: &'static str = "openai";

    fn request(
        http: &reqwest::Client,
        config: &LlmConfig,
        prompt: &Prompt,
    ) -> Result<reqwest::RequestBuilder, SummarizeError> {
        // `max_completion_tokens` replaces `max_tokens`, which OpenAI's reasoning models reject;
        // servers that do not know it ignore it, and the text is bounded here anyway.
        let body = json!({
            "model": config.model,
            "messages": [
                {"role": "system", "content": prompt.system},
                {"role": "user", "content": prompt.user},
            ],
            "max_completion_tokens": config.max_output_tokens,
        });
        let mut request = http
            .post(endpoint(&config.base_url, "/chat/completions"))
            .json(&body);
        if let Some(key) = &config.api_key {
            request = request.bearer_auth(key);
        }
        Ok(request)
    }

    fn completion(body: &[u8]) -> Result<Completion, SummarizeError> {
        let answer: ChatCompletion = envelope(body)?;
        let choice = answer
            .choices
            .into_iter()
            .next()
            .ok_or_else(|| SummarizeError::Malformed("the answer has no choices".into()))?;
        let text = match (choice.message.content, choice.message.refusal) {
            (Some(text), _) if !text.trim().is_empty() => Ok(text),
            (_, Some(refusal)) => Err(format!("the model refused: {refusal}")),
            _ => Err("the answer has no content".into()),
        };
        Ok(Completion {
            text,
            input_tokens: answer.usage.as_ref().and_then(|u| u.prompt_tokens),
            output_tokens: answer.usage.as_ref().and_then(|u| u.completion_tokens),
            stop_reason: choice.finish_reason,
        })
    }
}
