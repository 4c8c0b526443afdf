//! Measuring one way of bounding a session, turn by turn: budget and validity, cost with
//! caching, prefix stability, facts kept, utilization.

use serde_json::Value;

use super::chart;
use super::facts::{view_text, Facts};
use super::hidden::Observed;
use super::{name, Options, SessionReport};
use crate::engine::render::Format;

/// Problems described in a session's report, at most: the counts go on.
const PROBLEMS: usize = 20;

/// What the replay knows of a session when a view is measured: its facts, its tool results so
/// far, and the assistant message the recorded agent wrote next (none after the last turn).
pub(super) struct Known<'a> {
    pub(super) facts: &'a Facts,
    pub(super) observed: &'a Observed,
    pub(super) next: Option<&'a Value>,
}

/// The measures of one way of bounding a session (ctxd's policy or a baseline), turn by turn.
pub(super) struct Meter {
    pub(super) report: SessionReport,
    /// The previous view's messages (or items), and the tokens of each.
    previous: Option<Vec<Value>>,
    counts: Vec<i64>,
    extends: usize,
    reused: f64,
    kept_sum: f64,
    utilization: Vec<f64>,
    pub(super) latencies: Vec<f64>,
}

impl Meter {
    pub(super) fn new(session: &str, messages: usize) -> Self {
        Self {
            report: SessionReport {
                session: session.to_owned(),
                messages,
                ..SessionReport::default()
            },
            previous: None,
            counts: Vec::new(),
            extends: 0,
            reused: 0.0,
            kept_sum: 0.0,
            utilization: Vec::new(),
            latencies: Vec::new(),
        }
    }

    /// Counts a view of the coming turn that a check refused in `format`.
    pub(super) fn invalid(&mut self, format: Format, why: &str) {
        let report = &mut self.report;
        report.invalid_views += 1;
        *report.invalid_by_format.entry(name(&format)).or_default() += 1;
        let turn = report.turns + 1;
        self.problem(format!(
            "an invalid {} view at turn {turn}: {why}",
            name(&format)
        ));
    }

    /// Counts an item of the coming turn's session that nothing explains.
    pub(super) fn unexplained(&mut self, seq: i64, why: &str) {
        self.report.unexplained_items += 1;
        let turn = self.report.turns + 1;
        self.problem(format!("item {seq} at turn {turn}: {why}"));
    }

    fn problem(&mut self, text: String) {
        if self.report.problems.len() < PROBLEMS {
            self.report.problems.push(text);
        }
    }

    /// Measures a `view` in `format` that sends `sent` tokens, `used` of the `budget`, made
    /// by a compaction at `tier` when one acted. `costs` are the tokens of each of its
    /// messages when the caller knows them; otherwise those the view does not share with the
    /// previous one are counted here.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn view(
        &mut self,
        view: &Value,
        format: Format,
        costs: Option<Vec<i64>>,
        sent: i64,
        used: f64,
        budget: f64,
        tier: Option<String>,
        known: &Known,
        options: &Options,
    ) {
        let report = &mut self.report;
        report.turns += 1;
        report.tokens_sent += sent;
        if used > budget {
            report.over_budget += 1;
        }
        let messages = units(view, format);
        self.utilization.push(used / budget.max(1.0));
        // The prefix this view repeats from the previous one, priced as cached.
        let common = self.previous.as_ref().map_or(0, |before| {
            before
                .iter()
                .zip(&messages)
                .take_while(|(a, b)| a == b)
                .count()
        });
        let counts = costs.unwrap_or_else(|| {
            let mut counts = self.counts[..common].to_vec();
            let new = messages[common..].iter();
            counts.extend(new.map(|m| options.tokenizer.count(&m.to_string())));
            counts
        });
        let extends = self
            .previous
            .as_ref()
            .is_some_and(|before| common == before.len());
        match &self.previous {
            Some(_) => {
                if extends {
                    self.extends += 1;
                }
                let cached = share(&counts, common) * sent as f64;
                self.reused += cached;
                report.effective_input_cost +=
                    cached * options.cache_price + (sent as f64 - cached);
            }
            None => report.effective_input_cost += sent as f64,
        }
        let text = view_text(view);
        let missed = known.facts.missed_in(&text);
        let kept = known.facts.kept(&missed);
        self.kept_sum += kept.share();
        if let Some(next) = known.next {
            let recalls = known.observed.recalls(next, &text);
            if !recalls.is_empty() {
                // One more request: this view again, cached, and what the recalls bring back.
                report.hidden_uses += 1;
                report.recalls += recalls.len();
                report.recall_cost +=
                    sent as f64 * options.cache_price + recalls.iter().sum::<i64>() as f64;
            }
        }
        report.facts_end = kept;
        report.facts_missed_end = missed;
        report.series.push(chart::Point {
            turn: report.turns,
            tokens_sent: sent,
            utilization: used / budget.max(1.0),
            cumulative_cost: report.effective_input_cost,
            tier,
            extends,
            facts_kept: kept.share(),
            facts: kept,
        });
        self.previous = Some(messages);
        self.counts = counts;
    }

    pub(super) fn finish(mut self) -> SessionReport {
        let r = &mut self.report;
        if r.turns > 1 {
            r.prefix_stability = self.extends as f64 / (r.turns - 1) as f64;
        }
        if r.tokens_sent > 0 {
            r.prefix_reused = self.reused / r.tokens_sent as f64;
        }
        if r.turns > 0 {
            r.facts_kept_mean = self.kept_sum / r.turns as f64;
            r.mean_utilization = self.utilization.iter().sum::<f64>() / r.turns as f64;
        }
        r.facts_kept_end = r.facts_end.share();
        r.peak_utilization = self.utilization.iter().copied().fold(0.0, f64::max);
        r.per_turn = r.series.clone();
        (r.compaction_ms_p50, r.compaction_ms_p99) = percentiles(&mut self.latencies);
        self.report
    }
}

/// What a view in `format` is a sequence of, for comparing it with the previous one: its
/// messages (Anthropic's `system` first), Responses input items, or raw items.
fn units(view: &Value, format: Format) -> Vec<Value> {
    let list = |key: &str| view[key].as_array().cloned().unwrap_or_default();
    match format {
        Format::Openai => list("messages"),
        Format::OpenaiResponses => list("input"),
        Format::Raw => list("items"),
        // A cache breakpoint marks where the cache is written; the prompt is the same with
        // it or without it (a block marked in one view and not in the next is the same).
        Format::Anthropic => {
            let system = view.get("system").cloned().into_iter();
            let mut units: Vec<Value> = system.chain(list("messages")).collect();
            units
                .iter_mut()
                .for_each(crate::engine::render::without_cache_control);
            units
        }
    }
}

/// The share of the tokens `counts` add up to in their first `common`.
fn share(counts: &[i64], common: usize) -> f64 {
    let all: i64 = counts.iter().sum();
    if all == 0 {
        return 0.0;
    }
    counts[..common.min(counts.len())].iter().sum::<i64>() as f64 / all as f64
}

fn percentiles(samples: &mut [f64]) -> (f64, f64) {
    if samples.is_empty() {
        return (0.0, 0.0);
    }
    samples.sort_by(f64::total_cmp);
    let at =
        |q: f64| samples[((samples.len() as f64 * q).ceil() as usize).clamp(1, samples.len()) - 1];
    (at(0.5), at(0.99))
}
