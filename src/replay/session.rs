//! One recorded session replayed: a ctxd session created for it, a turn before every assistant
//! message, and each turn's views checked and measured beside each baseline's.

use serde_json::{json, Value};

use super::baselines::{message_tokens, Baseline, Bounder};
use super::facts::Facts;
use super::hidden::Observed;
use super::membership::{Inspector, Membership};
use super::meter::{Known, Meter};
use super::providers::ProviderCheck;
use super::{post, Options, SessionReport};
use crate::engine::render::Format;
use crate::engine::validate::{validate_anthropic, validate_openai, validate_responses};

/// The formats every view is checked in.
const PROVIDER_FORMATS: [Format; 3] = [Format::Openai, Format::OpenaiResponses, Format::Anthropic];

/// What a replay shares across its sessions.
pub(super) struct Context<'r> {
    pub(super) client: &'r reqwest::Client,
    pub(super) base: &'r str,
    pub(super) inspector: &'r Inspector,
    pub(super) check: Option<&'r mut ProviderCheck>,
    pub(super) options: &'r Options,
}

/// A session's replay as it goes: ctxd's views, and each baseline's from the same history.
struct Replay<'r> {
    context: Context<'r>,
    session: String,
    facts: Facts,
    observed: Observed,
    history: Vec<Value>,
    /// The tokens of each message of the history, as ctxd counts a chat message: counted
    /// once, when the message is replayed, for every baseline and every turn.
    costs: Vec<i64>,
    /// The tokens the tool schemas cost.
    tools: i64,
    membership: Membership,
    ctxd: Meter,
    baselines: Vec<(Bounder, Meter)>,
}

/// What replaying one session showed: ctxd's figures, and each baseline's.
pub(super) struct Replayed {
    pub(super) ctxd: SessionReport,
    pub(super) baselines: Vec<(Baseline, SessionReport)>,
}

pub(super) async fn replay(
    context: Context<'_>,
    name: &str,
    messages: &[Value],
    planted: Vec<String>,
) -> Replayed {
    let options = context.options;
    let baselines = if options.compare {
        Baseline::ALL.to_vec()
    } else {
        Vec::new()
    };
    let mut settings = json!({"context_window": options.window,
        "max_output_tokens": options.reserved_output, "tokenizer": options.tokenizer,
        "policy": options.policy});
    if let Value::Object(map) = &mut settings {
        map.extend(options.config.clone());
    }
    let created = post(
        context.client,
        &format!("{}/sessions", context.base),
        &json!({ "config": settings }),
    )
    .await;
    let mut run = Replay {
        context,
        session: String::new(),
        facts: Facts::planted(planted),
        observed: Observed::default(),
        history: Vec::with_capacity(messages.len()),
        costs: Vec::with_capacity(messages.len()),
        tools: tools_tokens(options),
        membership: Membership::default(),
        ctxd: Meter::new(name, messages.len()),
        baselines: baselines
            .into_iter()
            .map(|b| (Bounder::new(b), Meter::new(name, messages.len())))
            .collect(),
    };
    match created {
        Ok(body) => run.session = body["id"].as_str().unwrap_or_default().to_owned(),
        Err(e) => {
            let error = format!("creating the session: {e}");
            run.ctxd.report.errors.push(error);
            return run.finish();
        }
    }
    // Before every assistant message, the messages since the last turn; then what is left.
    let mut pending = 0;
    for (index, message) in messages.iter().enumerate() {
        // An episode's start or end: the turn so far first, then the event, as an agent
        // appends it between model turns.
        if message.get("type").is_some() {
            if pending > 0 {
                let next = messages[index..].iter().find(|m| m["role"] == "assistant");
                if let Err(e) = run.turn(pending, next).await {
                    let error = format!("the turn before item {index}: {e}");
                    run.ctxd.report.errors.push(error);
                    break;
                }
                pending = 0;
            }
            if let Err(e) = run.event(message).await {
                run.ctxd.report.errors.push(format!("item {index}: {e}"));
                break;
            }
            continue;
        }
        if message["role"] == "assistant" && pending > 0 {
            if let Err(e) = run.turn(pending, Some(message)).await {
                let error = format!("the turn before message {index}: {e}");
                run.ctxd.report.errors.push(error);
                break;
            }
            pending = 0;
        }
        run.facts.learn(message);
        let tokens = message_tokens(message, options.tokenizer);
        run.observed.learn(message, tokens);
        run.costs.push(tokens);
        run.history.push(message.clone());
        pending += 1;
    }
    if pending > 0 && run.ctxd.report.errors.is_empty() {
        if let Err(e) = run.turn(pending, None).await {
            run.ctxd.report.errors.push(format!("the last turn: {e}"));
        }
    }
    if !options.keep_sessions {
        let url = format!("{}/sessions/{}", run.context.base, run.session);
        let _ = run.context.client.delete(url).send().await;
    }
    run.finish()
}

impl Replay<'_> {
    /// Appends a ctxd event (an episode's start or end) to the session.
    async fn event(&mut self, event: &Value) -> Result<(), String> {
        let url = format!("{}/sessions/{}/events", self.context.base, self.session);
        post(self.context.client, &url, &json!({"events": [event]}))
            .await
            .map(|_| ())
    }

    /// Sends the last `new` messages of the history as a turn, checks and measures the views
    /// that come back, and measures each baseline's view of the same history; `next` is the
    /// assistant message the recorded agent wrote after them.
    async fn turn(&mut self, new: usize, next: Option<&Value>) -> Result<(), String> {
        let Context {
            client,
            base,
            options,
            ..
        } = self.context;
        let new = &self.history[self.history.len() - new..];
        let session = format!("{base}/sessions/{}", self.session);
        let body = json!({"format": "openai", "messages": new, "tools": options.tools});
        let answer = post(client, &format!("{session}/turn"), &body).await?;
        let appended: Vec<i64> = answer["appended"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_i64)
            .collect();
        self.membership.appended(&appended, new)?;
        let record = &answer["record"];
        let acted =
            (record["acted"] == true).then(|| record["tier"].as_str().unwrap_or("?").to_owned());
        if let Some(tier) = &acted {
            self.membership.record(record);
            *self
                .ctxd
                .report
                .compactions
                .entry(tier.clone())
                .or_default() += 1;
            let ms = record["duration_ms"].as_f64().unwrap_or_default();
            self.ctxd.latencies.push(ms);
        }
        self.ctxd.report.summarizer_calls += record["summarizer"]["attempts"].as_i64().unwrap_or(0);

        // The same view in every other format: a dry run changes nothing.
        let mut views = vec![(Format::Openai, answer["view"].clone())];
        for format in PROVIDER_FORMATS.into_iter().chain([options.format]) {
            if views.iter().any(|(f, _)| *f == format) {
                continue;
            }
            let body = json!({"format": format, "tools": options.tools, "mode": "dry_run"});
            let other = post(client, &format!("{session}/compact"), &body).await?;
            views.push((format, other["view"].clone()));
        }
        self.check(&views).await?;

        let projections = self.context.inspector.projections(&self.session).await?;
        for (seq, why) in self.membership.unexplained(&projections, &views[0].1) {
            self.ctxd.unexplained(seq, why);
        }

        let sent = record["input_tokens_estimate"].as_i64().unwrap_or(0);
        let used = record["tokens_after"].as_f64().unwrap_or(0.0);
        let budget = record["budget"].as_f64().unwrap_or(1.0);
        let measured = views.iter().position(|(f, _)| *f == options.format);
        let view = measured.map_or(Value::Null, |i| views.swap_remove(i).1);
        let known = Known {
            facts: &self.facts,
            observed: &self.observed,
            next,
        };
        self.ctxd.view(
            &view,
            options.format,
            None,
            sent,
            used,
            budget,
            acted,
            &known,
            options,
        );

        let tools = self.tools;
        let room = i64::from(options.window) - i64::from(options.reserved_output) - tools;
        for (bounder, meter) in &mut self.baselines {
            let view = bounder.view(&self.history, &self.costs, room, options.tokenizer);
            let (view, costs): (Vec<Value>, Vec<i64>) = view.into_iter().unzip();
            let sent: i64 = costs.iter().sum::<i64>() + tools;
            let used = (sent + i64::from(options.reserved_output)) as f64;
            let window = f64::from(options.window);
            let view = json!({ "messages": view });
            if let Err(e) = validate_openai(&view) {
                meter.invalid(Format::Openai, &e);
            }
            meter.view(
                &view,
                Format::Openai,
                Some(costs),
                sent,
                used,
                window,
                None,
                &known,
                options,
            );
        }
        Ok(())
    }

    /// Checks ctxd's views with its own validators and, when there is one, the providers'
    /// SDKs; a view refused by either counts once, in its format.
    async fn check(&mut self, views: &[(Format, Value)]) -> Result<(), String> {
        let mut refused: Vec<(Format, String)> = Vec::new();
        for &(format, ref view) in views {
            let valid = match format {
                Format::Openai => validate_openai(view),
                Format::OpenaiResponses => validate_responses(view),
                Format::Anthropic => validate_anthropic(view),
                Format::Raw => Ok(()),
            };
            if let Err(e) = valid {
                refused.push((format, format!("ctxd's validator: {e}")));
            }
        }
        if let Some(check) = self.context.check.as_deref_mut() {
            let provider: Vec<(Format, &Value)> = views
                .iter()
                .filter(|(f, _)| PROVIDER_FORMATS.contains(f))
                .map(|(f, v)| (*f, v))
                .collect();
            let answers = check.check(&provider).await?;
            for ((format, _), answer) in provider.iter().zip(answers) {
                let sdk = match format {
                    Format::Anthropic => "anthropic",
                    _ => "openai",
                };
                let known = refused.iter().any(|(f, _)| f == format);
                if let (Some(why), false) = (answer, known) {
                    refused.push((*format, format!("the {sdk} SDK: {why}")));
                }
            }
        }
        for (format, why) in refused {
            self.ctxd.invalid(format, &why);
        }
        Ok(())
    }

    fn finish(self) -> Replayed {
        Replayed {
            ctxd: self.ctxd.finish(),
            baselines: self
                .baselines
                .into_iter()
                .map(|(bounder, meter)| (bounder.baseline, meter.finish()))
                .collect(),
        }
    }
}

/// The tokens the tool schemas cost, as ctxd counts them.
fn tools_tokens(options: &Options) -> i64 {
    if options.tools.is_empty() {
        return 0;
    }
    let text = serde_json::to_string(&options.tools).unwrap_or_default();
    options.tokenizer.count(&text)
}
