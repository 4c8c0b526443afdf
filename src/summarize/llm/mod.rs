//! LLM summarisers: an OpenAI-compatible chat-completions client and an Anthropic Messages
//! client, configured by the operator only (never from a request).
//!
//! Both send the same prompt (see `prompt`), read the same JSON answer, merge its anchors into the
//! previous ones and bound the text. Every failure becomes a `SummarizeError`, so that the caller
//! can fall back to the deterministic summary; the whole call is bounded by the configured timeout.

mod anthropic;
mod openai;
mod prompt;

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;

use super::guard::{CallLimits, Guarded};
use super::{deterministic, Spent, SummarizeError, Summarizer, SummaryOutput, SummaryRequest};
use crate::domain::compaction::{is_unknown, Anchors, SummarizerInfo, SummarizerOutcome};
use crate::domain::text::bounded;
use prompt::Prompt;

/// The OpenAI API; any OpenAI-compatible server works with its own base URL.
pub const DEFAULT_OPENAI_BASE_URL: &str = "https://api.openai.com/v1";
/// The Anthropic API.
pub const DEFAULT_ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com";

/// Bytes of a successful answer read at most; a summary is far smaller.
const MAX_ANSWER_BYTES: usize = 4 * 1024 * 1024;
/// Bytes of an error answer read, and characters of it kept in the error.
const ERROR_BODY_BYTES: usize = 8 * 1024;
const ERROR_BODY_CHARS: usize = 500;

/// Which API a summariser speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LlmKind {
    /// `POST {base_url}/chat/completions`.
    OpenAi,
    /// `POST {base_url}/v1/messages`.
    Anthropic,
}

impl LlmKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::OpenAi => openai::OpenAi::KIND,
            Self::Anthropic => anthropic::Anthropic::KIND,
        }
    }

    /// The provider's own endpoint, for when the operator gives no base URL.
    pub fn default_base_url(self) -> &'static str {
        match self {
            Self::OpenAi => DEFAULT_OPENAI_BASE_URL,
            Self::Anthropic => DEFAULT_ANTHROPIC_BASE_URL,
        }
    }
}

/// An LLM summariser as the operator configures it.
#[derive(Clone)]
pub struct LlmConfig {
    pub kind: LlmKind,
    /// Without a trailing path: `https://api.openai.com/v1`, `https://api.anthropic.com`.
    pub base_url: String,
    pub model: String,
    /// Sent as a bearer token (OpenAI) or `x-api-key` (Anthropic); never logged.
    pub api_key: Option<String>,
    /// Bounds the whole call, from connecting to the last byte of the answer.
    pub timeout: Duration,
    pub max_output_tokens: u32,
    /// The model's context window: the prompt, the answer and a reserve of
    /// [`INPUT_RESERVE_TOKENS`] must fit in it.
    pub context_tokens: u32,
    /// The breaker and the bound on concurrent calls.
    pub limits: CallLimits,
}

impl fmt::Debug for LlmConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LlmConfig")
            .field("kind", &self.kind)
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "[redacted]"))
            .field("timeout", &self.timeout)
            .field("max_output_tokens", &self.max_output_tokens)
            .field("context_tokens", &self.context_tokens)
            .field("limits", &self.limits)
            .finish()
    }
}

/// The summariser `config` describes.
pub fn build(config: LlmConfig) -> Arc<dyn Summarizer> {
    match config.kind {
        LlmKind::OpenAi => guarded(LlmSummarizer::<openai::OpenAi>::new(config)),
        LlmKind::Anthropic => guarded(LlmSummarizer::<anthropic::Anthropic>::new(config)),
    }
}

fn guarded<A: Api>(summarizer: LlmSummarizer<A>) -> Arc<dyn Summarizer> {
    let limits = summarizer.config.limits;
    Arc::new(Guarded::new(summarizer, limits))
}

/// Whether a stop reason says the model ran out of output tokens.
fn stopped_at_limit(reason: Option<&str>) -> bool {
    matches!(reason, Some("length" | "max_tokens"))
}

impl Completion {
    fn spent(&self, max_output_tokens: u32) -> Spent {
        Spent {
            input_tokens: self.input_tokens,
            output_tokens: self.output_tokens,
            output_truncated: stopped_at_limit(self.stop_reason.as_deref())
                || self
                    .output_tokens
                    .is_some_and(|t| t > i64::from(max_output_tokens)),
        }
    }
}

/// What a provider answered, and what it cost.
struct Completion {
    /// The model's text, or why there is none (it refused, or answered nothing).
    text: Result<String, String>,
    input_tokens: Option<i64>,
    output_tokens: Option<i64>,
    /// `finish_reason` (OpenAI) or `stop_reason` (Anthropic).
    stop_reason: Option<String>,
}

/// The parts that differ between providers: the request and the envelope of the answer.
trait Api: 'static {
    const KIND: &'static str;
    fn request(
        http: &reqwest::Client,
        config: &LlmConfig,
        prompt: &Prompt,
    ) -> Result<reqwest::RequestBuilder, SummarizeError>;
    fn completion(body: &[u8]) -> Result<Completion, SummarizeError>;
}

struct LlmSummarizer<A> {
    config: LlmConfig,
    /// Building a client fails only when TLS cannot be set up; summaries then fail (and fall
    /// back) instead of the service refusing to start.
    http: Result<reqwest::Client, String>,
    api: PhantomData<fn() -> A>,
}

impl<A: Api> LlmSummarizer<A> {
    fn new(config: LlmConfig) -> Self {
        let http = reqwest::Client::builder()
            .connect_timeout(config.timeout)
            .build()
            .map_err(|e| format!("the HTTP client could not be built: {}", error_chain(&e)));
        Self {
            config,
            http,
            api: PhantomData,
        }
    }

    /// Sends the prompt and returns the successful answer's body.
    async fn call(&self, prompt: &Prompt) -> Result<Vec<u8>, SummarizeError> {
        let http = self
            .http
            .as_ref()
            .map_err(|e| SummarizeError::Transport(e.clone()))?;
        let response = A::request(http, &self.config, prompt)?
            .send()
            .await
            .map_err(|e| self.failure(e))?;
        let status = response.status();
        if !status.is_success() {
            let retry_after = matches!(status.as_u16(), 429 | 503)
                .then(|| response.headers().get(reqwest::header::RETRY_AFTER))
                .flatten()
                .and_then(|v| v.to_str().ok()?.trim().parse::<u64>().ok())
                .map(Duration::from_secs);
            let (body, _) = read_at_most(response, ERROR_BODY_BYTES)
                .await
                .map_err(|e| self.failure(e))?;
            let body = self.redact(&String::from_utf8_lossy(&body));
            return Err(SummarizeError::Status {
                status: status.as_u16(),
                body: bounded(body.trim(), ERROR_BODY_CHARS),
                retry_after,
            });
        }
        let (body, complete) = read_at_most(response, MAX_ANSWER_BYTES)
            .await
            .map_err(|e| self.failure(e))?;
        if !complete {
            return Err(SummarizeError::Malformed(format!(
                "the answer is larger than {MAX_ANSWER_BYTES} bytes"
            )));
        }
        Ok(body)
    }

    fn failure(&self, error: reqwest::Error) -> SummarizeError {
        if error.is_timeout() {
            SummarizeError::Timeout(self.config.timeout)
        } else {
            SummarizeError::Transport(error_chain(&error))
        }
    }

    /// `error` with the key taken out of every text it carries.
    fn redacted(&self, error: SummarizeError) -> SummarizeError {
        use SummarizeError::*;
        match error {
            Status {
                status,
                body,
                retry_after,
            } => Status {
                status,
                body: self.redact(&body),
                retry_after,
            },
            Malformed(why) => Malformed(self.redact(&why)),
            Refused { why, spent } => Refused {
                why: self.redact(&why),
                spent,
            },
            Transport(why) => Transport(self.redact(&why)),
            e @ (Timeout(_) | CircuitOpen | InputTooLarge { .. }) => e,
        }
    }

    /// The summary made of the model's narrative beside the deterministic facts, or why the
    /// narrative is refused.
    fn summary_of(
        &self,
        request: SummaryRequest<'_>,
        completion: &Completion,
        started: Instant,
    ) -> Result<SummaryOutput, SummarizeError> {
        let spent = completion.spent(self.config.max_output_tokens);
        let refused = |why: String| SummarizeError::Refused { why, spent };
        let text = completion
            .text
            .as_deref()
            .map_err(|why| refused(why.to_owned()))?;
        let (narrative, anchors) = prompt::parse_answer(text).map_err(refused)?;
        let cap = deterministic::narrative_chars(request.max_chars);
        let length = narrative.chars().count();
        if length > cap {
            return Err(refused(format!(
                "the narrative has {length} characters, more than the {cap} asked for"
            )));
        }
        let mut output = deterministic::summarize_with_narrative(request, &narrative);
        let Some(anchors) = anchors else {
            return Err(refused("the answer has no `anchors`".into()));
        };
        if all_unknown(&anchors) && !all_unknown(&output.summary.anchors) {
            return Err(refused(
                "the answer's anchors are all N/A where the events say more".into(),
            ));
        }
        output.summary.anchors.merge(&anchors);
        let latency_ms = started.elapsed().as_secs_f64() * 1000.0;
        output.info = SummarizerInfo {
            kind: A::KIND.into(),
            model: Some(self.config.model.clone()),
            outcome: SummarizerOutcome::Used,
            fallback_reason: None,
            attempts: 1,
            latency_ms,
            input_tokens: spent.input_tokens,
            output_tokens: spent.output_tokens,
            output_truncated: spent.output_truncated,
        };
        Ok(output)
    }

    /// Providers sometimes quote the key they were sent; it must not reach a record or a log.
    fn redact(&self, text: &str) -> String {
        match &self.config.api_key {
            Some(key) if !key.is_empty() => text.replace(key.as_str(), "[redacted]"),
            _ => text.to_owned(),
        }
    }
}

#[async_trait]
impl<A: Api> Summarizer for LlmSummarizer<A> {
    fn kind(&self) -> &'static str {
        A::KIND
    }

    fn timeout(&self) -> Duration {
        self.config.timeout
    }

    async fn summarize(
        &self,
        request: SummaryRequest<'_>,
    ) -> Result<SummaryOutput, SummarizeError> {
        let started = Instant::now();
        let prompt = self.prompt_within_window(&request)?;
        let result = async {
            let body = tokio::time::timeout(self.config.timeout, self.call(&prompt))
                .await
                .map_err(|_| SummarizeError::Timeout(self.config.timeout))??;
            let completion = A::completion(&body)?;
            tracing::debug!(
                summarizer = A::KIND,
                model = %self.config.model,
                latency_ms = started.elapsed().as_secs_f64() * 1000.0,
                input_tokens = completion.input_tokens,
                output_tokens = completion.output_tokens,
                "summary received"
            );
            self.summary_of(request, &completion, started)
        }
        .await;
        // Providers quote what they were sent, the key included: no error text may carry it.
        result.map_err(|e| self.redacted(e))
    }
}

/// Tokens of the summariser's window kept free beyond the prompt and the answer.
pub const INPUT_RESERVE_TOKENS: i64 = 4_096;
/// The fewest tokens of new events worth a call: below that the model would see too little of
/// what it summarises.
const MIN_EVENTS_TOKENS: i64 = 1_000;

impl<A: Api> LlmSummarizer<A> {
    /// The prompt, its events cut to what the model's window holds with the answer and the
    /// reserve; an error, and no call, when the instructions and the earlier summary leave too
    /// little room for them.
    fn prompt_within_window(
        &self,
        request: &SummaryRequest<'_>,
    ) -> Result<prompt::Prompt, SummarizeError> {
        let fixed = prompt::prompt(request, 0);
        let fixed_user = prompt::estimated_tokens(&fixed.user);
        let fixed_tokens = prompt::estimated_tokens(&fixed.system) + fixed_user;
        let context = i64::from(self.config.context_tokens);
        let answer = i64::from(self.config.max_output_tokens);
        let room = context - INPUT_RESERVE_TOKENS - answer - fixed_tokens;
        if room < MIN_EVENTS_TOKENS {
            return Err(SummarizeError::InputTooLarge {
                needed: fixed_tokens + MIN_EVENTS_TOKENS + answer + INPUT_RESERVE_TOKENS,
                reserve: INPUT_RESERVE_TOKENS,
                context,
            });
        }
        // Three characters a token for ASCII; text of other scripts takes more tokens a
        // character, and the events are cut shorter until they fit.
        let mut chars = usize::try_from(room.saturating_mul(3))
            .unwrap_or(usize::MAX)
            .min(prompt::EVENTS_CHARS);
        loop {
            let prompt = prompt::prompt(request, chars);
            let tokens = prompt::estimated_tokens(&prompt.user) - fixed_user;
            if tokens <= room || chars == 0 {
                return Ok(prompt);
            }
            chars = (chars as i64 * room / tokens.max(1)) as usize * 9 / 10;
        }
    }
}

fn all_unknown(a: &Anchors) -> bool {
    [
        &a.user_intent,
        &a.execution_progress,
        &a.key_decision,
        &a.tried_solution,
        &a.next_step,
    ]
    .into_iter()
    .all(|v| is_unknown(v))
}

/// Reads the body up to `limit` bytes; the flag says whether it was read whole.
async fn read_at_most(
    mut response: reqwest::Response,
    limit: usize,
) -> Result<(Vec<u8>, bool), reqwest::Error> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        let room = limit - body.len();
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            return Ok((body, false));
        }
        body.extend_from_slice(&chunk);
    }
    Ok((body, true))
}

/// The error and its causes: reqwest's own message rarely says what actually went wrong.
fn error_chain(error: &reqwest::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// Joins the operator's base URL and an endpoint path.
fn endpoint(base_url: &str, path: &str) -> String {
    format!("{}{path}", base_url.trim_end_matches('/'))
}

/// The answer as the provider's envelope gives it: a JSON body, or why it is not one.
fn envelope<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, SummarizeError> {
    serde_json::from_slice(body).map_err(|e| {
        SummarizeError::Malformed(format!(
            "({e}): {:?}",
            bounded(String::from_utf8_lossy(body).trim(), 200)
        ))
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use axum::body::Bytes;
    use axum::http::{header, HeaderMap, StatusCode, Uri};
    use axum::Router;
    use chrono::DateTime;
    use serde_json::{json, Value};

    use super::*;
    use crate::domain::compaction::{Anchors, Summary};
    use crate::domain::event::{Event, EventBody, Message, Role};

    const KEY: &str = "sk-test-0123456789";

    /// What the fake provider was sent.
    #[derive(Debug, Clone)]
    struct Received {
        path: String,
        headers: HeaderMap,
        body: Value,
    }

    struct FakeProvider {
        /// The server's root, e.g. `http://127.0.0.1:40123`.
        url: String,
        received: Arc<Mutex<Vec<Received>>>,
    }

    impl FakeProvider {
        /// A provider on a loopback port that answers every request with `status` and `body`
        /// after `delay`.
        async fn start(status: StatusCode, body: String, delay: Duration) -> Self {
            let received = Arc::new(Mutex::new(Vec::new()));
            let log = received.clone();
            let app = Router::new().fallback(move |uri: Uri, headers: HeaderMap, raw: Bytes| {
                let log = log.clone();
                let body = body.clone();
                async move {
                    log.lock().unwrap().push(Received {
                        path: uri.path().to_owned(),
                        headers,
                        body: serde_json::from_slice(&raw).unwrap_or(Value::Null),
                    });
                    tokio::time::sleep(delay).await;
                    (status, [(header::CONTENT_TYPE, "application/json")], body)
                }
            });
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let url = format!("http://{}", listener.local_addr().unwrap());
            tokio::spawn(async move { axum::serve(listener, app).await });
            Self { url, received }
        }

        async fn answering(kind: LlmKind, content: &str) -> Self {
            Self::start(StatusCode::OK, envelope_of(kind, content), Duration::ZERO).await
        }

        fn summarizer(&self, kind: LlmKind, timeout: Duration) -> Arc<dyn Summarizer> {
            self.summarizer_in(kind, timeout, 128_000)
        }

        /// A summariser whose model has a window of `context_tokens`.
        fn summarizer_in(
            &self,
            kind: LlmKind,
            timeout: Duration,
            context_tokens: u32,
        ) -> Arc<dyn Summarizer> {
            let base_url = match kind {
                LlmKind::OpenAi => format!("{}/v1/", self.url),
                LlmKind::Anthropic => self.url.clone(),
            };
            build(LlmConfig {
                kind,
                base_url,
                model: "test-model".into(),
                api_key: Some(KEY.into()),
                timeout,
                max_output_tokens: 1234,
                context_tokens,
                limits: CallLimits::default(),
            })
        }

        fn received(&self) -> Vec<Received> {
            self.received.lock().unwrap().clone()
        }
    }

    /// `content` as the provider's answer envelope carries it.
    fn envelope_of(kind: LlmKind, content: &str) -> String {
        match kind {
            LlmKind::OpenAi => json!({
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": content}}],
                "usage": {"prompt_tokens": 321, "completion_tokens": 54, "total_tokens": 375},
            }),
            LlmKind::Anthropic => json!({
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "content": [{"type": "text", "text": content}],
                "stop_reason": "end_turn",
                "usage": {"input_tokens": 321, "output_tokens": 54},
            }),
        }
        .to_string()
    }

    const GOOD_ANSWER: &str = r#"{"summary": "The user wants the login bug fixed; bcrypt was chosen.",
        "anchors": {"user_intent": "Fix the login bug", "execution_progress": "N/A",
                    "key_decision": "Use bcrypt", "tried_solution": null, "next_step": "Run the tests"}}"#;

    fn previous() -> Summary {
        Summary {
            text: "Earlier: the agent read src/auth.rs.".into(),
            anchors: Anchors {
                execution_progress: "read src/auth.rs".into(),
                tried_solution: "sha1 hashing".into(),
                ..Anchors::default()
            },
        }
    }

    fn events() -> Vec<Event> {
        let message = |seq, role, content: &str| Event {
            seq,
            id: None,
            body: EventBody::Message(Message {
                role,
                content: content.into(),
                tool_calls: Vec::new(),
                tool_call_id: None,
                name: None,
                is_error: None,
            }),
            pinned: false,
            metadata: None,
            tokens: 0,
            created_at: DateTime::UNIX_EPOCH,
            derived: Default::default(),
        };
        vec![
            message(7, Role::User, "Please fix the login bug."),
            message(8, Role::Assistant, "I will switch the hashing to bcrypt."),
        ]
    }

    async fn summarize_with(
        summarizer: &dyn Summarizer,
        previous: &Summary,
        events: &[Event],
        max_chars: usize,
    ) -> Result<SummaryOutput, SummarizeError> {
        let events: Vec<&Event> = events.iter().collect();
        summarizer
            .summarize(SummaryRequest {
                previous,
                events: &events,
                max_chars,
            })
            .await
    }

    const KINDS: [LlmKind; 2] = [LlmKind::OpenAi, LlmKind::Anthropic];
    const PATIENT: Duration = Duration::from_secs(10);

    fn assert_good_output(output: &SummaryOutput, kind: LlmKind) {
        let text = &output.summary.text;
        assert!(
            text.contains("## Narrative\n> The user wants the login bug fixed; bcrypt was chosen."),
            "{text}"
        );
        // The facts stand beside the narrative, whatever the model wrote.
        assert!(
            text.contains("- observation://7 Please fix the login bug."),
            "{text}"
        );
        assert!(
            text.contains("## Last stated plan\n> I will switch the hashing to bcrypt."),
            "{text}"
        );
        let anchors = &output.summary.anchors;
        assert_eq!(anchors.user_intent, "Fix the login bug");
        assert_eq!(anchors.key_decision, "Use bcrypt");
        assert_eq!(anchors.next_step, "Run the tests");
        // "N/A" and null in the answer do not erase what the previous summary knew.
        assert_eq!(anchors.execution_progress, "read src/auth.rs");
        assert_eq!(anchors.tried_solution, "sha1 hashing");
        assert_eq!(output.info.kind, kind.as_str());
        assert_eq!(output.info.model.as_deref(), Some("test-model"));
        assert_eq!(output.info.input_tokens, Some(321));
        assert_eq!(output.info.output_tokens, Some(54));
        assert_eq!(output.info.outcome, SummarizerOutcome::Used);
        assert_eq!(output.info.fallback_reason, None);
        assert_eq!(output.info.attempts, 1);
        assert!(!output.info.output_truncated);
        assert!(output.info.latency_ms >= 0.0);
    }

    /// The prompt fits the model's window with the answer and a 4,096-token reserve: the new
    /// events are cut to fit, and a window too small for even the earlier summary is not
    /// called at all (the deterministic summary stands in, saying why).
    #[tokio::test]
    async fn the_prompt_fits_the_models_window_with_the_reserve() {
        let fake = FakeProvider::answering(LlmKind::OpenAi, GOOD_ANSWER).await;
        let mut many = events();
        for i in 0..400 {
            let mut event = many[0].clone();
            event.seq = 100 + i;
            if let EventBody::Message(m) = &mut event.body {
                m.content = format!("step {i}: {}", "details of the step ".repeat(40)).into();
            }
            many.push(event);
        }
        // 400 events of ~800 characters: ~110,000 characters rendered, over 30,000 tokens.
        let window = 20_000;
        let summarizer = fake.summarizer_in(LlmKind::OpenAi, PATIENT, window);
        summarize_with(&*summarizer, &previous(), &many, 2000)
            .await
            .unwrap();
        let [sent] = fake.received().try_into().unwrap();
        let prompt: String = sent.body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["content"].as_str().unwrap())
            .collect();
        let tokens = prompt::estimated_tokens(&prompt);
        assert!(
            tokens + 1234 + INPUT_RESERVE_TOKENS <= i64::from(window),
            "{tokens} tokens in a {window}-token window"
        );
        assert!(
            prompt.contains("step 0:") && prompt.contains("step 399:"),
            "both ends"
        );
        assert!(!prompt.contains("step 200:"), "the middle is cut");

        // A window the instructions and the answer alone fill: no call.
        let tiny = fake.summarizer_in(LlmKind::OpenAi, PATIENT, 6_000);
        let error = summarize_with(&*tiny, &previous(), &many, 2000)
            .await
            .unwrap_err();
        assert_eq!(
            error.reason(),
            crate::summarize::FallbackReason::InputTooLarge
        );
        assert!(error.to_string().contains("6000-token window"), "{error}");
        assert_eq!(fake.received().len(), 1, "the model was not asked");
    }

    #[tokio::test]
    async fn openai_good_answer_is_used_and_the_request_is_well_formed() {
        let fake = FakeProvider::answering(LlmKind::OpenAi, GOOD_ANSWER).await;
        let summarizer = fake.summarizer(LlmKind::OpenAi, PATIENT);
        assert_eq!(summarizer.kind(), "openai");
        let output = summarize_with(&*summarizer, &previous(), &events(), 2000)
            .await
            .unwrap();
        assert_good_output(&output, LlmKind::OpenAi);

        let [sent] = fake.received().try_into().unwrap();
        assert_eq!(sent.path, "/v1/chat/completions");
        assert_eq!(
            sent.headers[header::AUTHORIZATION],
            format!("Bearer {KEY}").as_str()
        );
        assert_eq!(sent.body["model"], "test-model");
        assert_eq!(sent.body["max_completion_tokens"], 1234);
        assert_eq!(sent.body["messages"][0]["role"], "system");
        assert!(sent.body["messages"][0]["content"]
            .as_str()
            .unwrap()
            .contains("\"summary\""));
        assert_eq!(sent.body["messages"][1]["role"], "user");
        let prompt = sent.body["messages"][1]["content"].as_str().unwrap();
        assert_prompt_has_the_material(prompt);
    }

    #[tokio::test]
    async fn anthropic_good_answer_is_used_and_the_request_is_well_formed() {
        let fake = FakeProvider::answering(LlmKind::Anthropic, GOOD_ANSWER).await;
        let summarizer = fake.summarizer(LlmKind::Anthropic, PATIENT);
        assert_eq!(summarizer.kind(), "anthropic");
        let output = summarize_with(&*summarizer, &previous(), &events(), 2000)
            .await
            .unwrap();
        assert_good_output(&output, LlmKind::Anthropic);

        let [sent] = fake.received().try_into().unwrap();
        assert_eq!(sent.path, "/v1/messages");
        assert_eq!(sent.headers["x-api-key"], KEY);
        assert_eq!(sent.headers["anthropic-version"], "2023-06-01");
        assert!(!sent.headers.contains_key(header::AUTHORIZATION));
        assert_eq!(sent.body["model"], "test-model");
        assert_eq!(sent.body["max_tokens"], 1234);
        assert!(sent.body["system"]
            .as_str()
            .unwrap()
            .contains("\"anchors\""));
        assert_eq!(sent.body["messages"][0]["role"], "user");
        let prompt = sent.body["messages"][0]["content"].as_str().unwrap();
        assert_prompt_has_the_material(prompt);
    }

    fn assert_prompt_has_the_material(prompt: &str) {
        for expected in [
            "Earlier: the agent read src/auth.rs.",
            "tried_solution: sha1 hashing",
            "#7 user: Please fix the login bug.",
            "#8 assistant: I will switch the hashing to bcrypt.",
        ] {
            assert!(prompt.contains(expected), "{expected:?} not in {prompt}");
        }
    }

    #[tokio::test]
    async fn an_answer_in_a_json_fence_is_accepted() {
        for kind in KINDS {
            let fenced = format!("Here is the summary:\n```json\n{GOOD_ANSWER}\n```\n");
            let fake = FakeProvider::answering(kind, &fenced).await;
            let output = summarize_with(
                &*fake.summarizer(kind, PATIENT),
                &previous(),
                &events(),
                2000,
            )
            .await
            .unwrap();
            assert_good_output(&output, kind);
        }
    }

    async fn refusal(kind: LlmKind, content: &str, max_chars: usize) -> (String, Spent) {
        let fake = FakeProvider::answering(kind, content).await;
        let result = summarize_with(
            &*fake.summarizer(kind, PATIENT),
            &previous(),
            &events(),
            max_chars,
        )
        .await;
        match result {
            Err(SummarizeError::Refused { why, spent }) => (why, spent),
            other => panic!("{kind:?} {content:?}: {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_narrative_over_its_share_of_the_summary_is_refused() {
        for kind in KINDS {
            let answer = json!({"summary": "é".repeat(500), "anchors": {"next_step": "go"}});
            let (why, spent) = refusal(kind, &answer.to_string(), 100).await;
            assert!(why.contains("more than the 50"), "{why}");
            // What the refused answer cost is still reported.
            assert_eq!(spent.output_tokens, Some(54));
        }
    }

    #[tokio::test]
    async fn an_answer_that_is_not_the_narrative_asked_for_is_refused() {
        for kind in KINDS {
            for content in [
                "Sorry, I can't help with that.",
                r#"{"anchors": {"user_intent": "x"}}"#,
                r#"{"summary": ""}"#,
                r#"{"summary": ["not", "a", "string"]}"#,
                // Without anchors, or with none where the events say something.
                r#"{"summary": "The agent is working through compile errors."}"#,
                r#"{"summary": "S", "anchors": {"user_intent": "N/A"}}"#,
            ] {
                let (_, spent) = refusal(kind, content, 2000).await;
                assert_eq!(spent.input_tokens, Some(321), "{content}");
            }
        }
    }

    #[tokio::test]
    async fn a_body_that_is_not_the_providers_json_is_malformed() {
        for kind in KINDS {
            let fake = FakeProvider::start(StatusCode::OK, "<html>".into(), Duration::ZERO).await;
            let result = summarize_with(
                &*fake.summarizer(kind, PATIENT),
                &previous(),
                &events(),
                2000,
            )
            .await;
            assert!(
                matches!(result, Err(SummarizeError::Malformed(_))),
                "{result:?}"
            );
        }
    }

    #[tokio::test]
    async fn an_answer_cut_at_the_output_limit_is_marked_truncated() {
        for kind in KINDS {
            let mut answer: Value = serde_json::from_str(&envelope_of(kind, GOOD_ANSWER)).unwrap();
            match kind {
                LlmKind::OpenAi => answer["choices"][0]["finish_reason"] = json!("length"),
                LlmKind::Anthropic => answer["stop_reason"] = json!("max_tokens"),
            }
            let fake =
                FakeProvider::start(StatusCode::OK, answer.to_string(), Duration::ZERO).await;
            let output = summarize_with(
                &*fake.summarizer(kind, PATIENT),
                &previous(),
                &events(),
                2000,
            )
            .await
            .unwrap();
            assert!(output.info.output_truncated, "{kind:?}");
        }
    }

    #[tokio::test]
    async fn every_failure_that_quotes_the_key_is_redacted() {
        for kind in KINDS {
            let quoted = format!("your key {KEY} is wrong");
            let cases = [
                (
                    StatusCode::UNAUTHORIZED,
                    json!({"error": quoted}).to_string(),
                ),
                (StatusCode::OK, format!("<html>{quoted}</html>")),
                (
                    StatusCode::OK,
                    envelope_of(kind, &format!("{{\"summary\": \"{quoted}")),
                ),
                (
                    StatusCode::OK,
                    envelope_of(kind, &format!("{{\"summary\": \"{quoted}\"}}")),
                ),
            ];
            for (status, body) in cases {
                let fake = FakeProvider::start(status, body.clone(), Duration::ZERO).await;
                let result = summarize_with(
                    &*fake.summarizer(kind, PATIENT),
                    &previous(),
                    &events(),
                    2000,
                )
                .await;
                let shown = format!("{}", result.unwrap_err());
                assert!(!shown.contains(KEY), "{body}: {shown}");
            }
        }
    }

    #[tokio::test]
    async fn retry_after_is_read_from_429_and_503_answers() {
        let app = Router::new().fallback(|| async {
            (
                StatusCode::TOO_MANY_REQUESTS,
                [(header::RETRY_AFTER, "120")],
                "slow down",
            )
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/v1", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        let summarizer = build(LlmConfig {
            kind: LlmKind::OpenAi,
            base_url: url,
            model: "m".into(),
            api_key: None,
            timeout: PATIENT,
            max_output_tokens: 100,
            context_tokens: 128_000,
            limits: CallLimits::default(),
        });
        let result = summarize_with(&*summarizer, &previous(), &events(), 2000).await;
        let Err(SummarizeError::Status { retry_after, .. }) = result else {
            panic!("{result:?}");
        };
        assert_eq!(retry_after, Some(Duration::from_secs(120)));
    }

    #[tokio::test]
    async fn http_500_is_a_status_error_with_the_body_bounded_and_the_key_redacted() {
        for kind in KINDS {
            let body = format!(
                "{{\"error\": \"overloaded, key {KEY}\"}}{}",
                "x".repeat(10_000)
            );
            let fake =
                FakeProvider::start(StatusCode::INTERNAL_SERVER_ERROR, body, Duration::ZERO).await;
            let result = summarize_with(
                &*fake.summarizer(kind, PATIENT),
                &previous(),
                &events(),
                2000,
            )
            .await;
            let Err(SummarizeError::Status { status, body, .. }) = result else {
                panic!("{kind:?}: {result:?}");
            };
            assert_eq!(status, 500);
            assert!(
                body.starts_with("{\"error\": \"overloaded, key [redacted]\"}"),
                "{body}"
            );
            assert!(body.chars().count() <= ERROR_BODY_CHARS);
        }
    }

    #[tokio::test]
    async fn a_slow_answer_times_out() {
        for kind in KINDS {
            let fake = FakeProvider::start(
                StatusCode::OK,
                envelope_of(kind, GOOD_ANSWER),
                Duration::from_secs(30),
            )
            .await;
            let timeout = Duration::from_millis(200);
            let started = Instant::now();
            let result = summarize_with(
                &*fake.summarizer(kind, timeout),
                &previous(),
                &events(),
                2000,
            )
            .await;
            assert!(
                matches!(result, Err(SummarizeError::Timeout(t)) if t == timeout),
                "{result:?}"
            );
            // Loose: the call gave up long before the provider would have answered.
            assert!(started.elapsed() < Duration::from_secs(10));
        }
    }

    #[tokio::test]
    async fn an_unreachable_provider_is_a_transport_error() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        drop(listener);
        for kind in KINDS {
            let summarizer = build(LlmConfig {
                kind,
                base_url: url.clone(),
                model: "m".into(),
                api_key: None,
                timeout: PATIENT,
                max_output_tokens: 100,
                context_tokens: 128_000,
                limits: CallLimits::default(),
            });
            let result = summarize_with(&*summarizer, &previous(), &events(), 2000).await;
            assert!(
                matches!(result, Err(SummarizeError::Transport(_))),
                "{result:?}"
            );
        }
    }

    #[test]
    fn the_api_key_is_never_shown() {
        let config = LlmConfig {
            kind: LlmKind::Anthropic,
            base_url: LlmKind::Anthropic.default_base_url().into(),
            model: "m".into(),
            api_key: Some(KEY.into()),
            timeout: PATIENT,
            max_output_tokens: 1,
            context_tokens: 128_000,
            limits: CallLimits::default(),
        };
        let shown = format!("{config:?}");
        assert!(!shown.contains(KEY), "{shown}");
        assert!(shown.contains("[redacted]"), "{shown}");
    }
}
