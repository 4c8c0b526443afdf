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
    /// The prompt cache Anthropic keeps for this session's requests.
    anthropic: AnthropicCache,
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
            anthropic: AnthropicCache::default(),
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
        if format == Format::Anthropic {
            let cost = self.anthropic.cost(view, sent, options.cache_price);
            *report.anthropic_cache_cost.get_or_insert(0.0) += cost;
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

/// Anthropic's prompt cache, which a request reads and writes only at the blocks it marks
/// (`cache_control`): each request writes the prefixes up to its marks, and reads the longest
/// prefix an earlier request wrote that ends at one of its own marks or up to 19 blocks before
/// it (Anthropic's look-back). A prefix is the prompt's blocks in order (the system prompt,
/// then each message's blocks with its role), the marks aside.
#[derive(Debug, Default)]
struct AnthropicCache {
    written: std::collections::HashSet<u64>,
}

/// How far before a mark Anthropic looks for a prefix written earlier, in blocks.
const LOOK_BACK: usize = 20;
/// What writing a token to the cache costs, as a share of an uncached one (five minutes' cache).
const CACHE_WRITE_PRICE: f64 = 1.25;

impl AnthropicCache {
    /// What `view`, sending `sent` input tokens, costs in input tokens: the prefix read at
    /// `cache_price`, the rest up to its last mark written at [`CACHE_WRITE_PRICE`], the rest
    /// at full price. A block's tokens are its share of the view's characters.
    fn cost(&mut self, view: &Value, sent: i64, cache_price: f64) -> f64 {
        use std::hash::{DefaultHasher, Hash, Hasher};
        let mut blocks: Vec<(u64, usize, bool)> = Vec::new();
        let mut prefix = 0u64;
        let mut push = |blocks: &mut Vec<(u64, usize, bool)>, role: &str, block: &Value| {
            let mut block = block.clone();
            let marked = block.get("cache_control").is_some();
            crate::engine::render::without_cache_control(&mut block);
            let text = block.to_string();
            let mut hasher = DefaultHasher::new();
            (prefix, role, &text).hash(&mut hasher);
            prefix = hasher.finish();
            blocks.push((prefix, text.len(), marked));
        };
        match view.get("system") {
            Some(Value::Array(system)) => {
                system.iter().for_each(|b| push(&mut blocks, "system", b))
            }
            Some(system) => push(&mut blocks, "system", system),
            None => {}
        }
        for message in view["messages"].as_array().into_iter().flatten() {
            let role = message["role"].as_str().unwrap_or_default();
            for block in message["content"].as_array().into_iter().flatten() {
                push(&mut blocks, role, block);
            }
        }
        let chars: usize = blocks.iter().map(|b| b.1).sum();
        let marks: Vec<usize> = (0..blocks.len()).filter(|&i| blocks[i].2).collect();
        let mut read = 0;
        for &mark in &marks {
            let from = mark.saturating_sub(LOOK_BACK - 1);
            if let Some(at) = (from..=mark)
                .rev()
                .find(|&at| self.written.contains(&blocks[at].0))
            {
                read = read.max(at + 1);
            }
        }
        let marked = marks.last().map_or(0, |&last| last + 1);
        self.written.extend(marks.iter().map(|&at| blocks[at].0));
        let tokens = |blocks: &[(u64, usize, bool)]| {
            let part: usize = blocks.iter().map(|b| b.1).sum();
            sent as f64 * part as f64 / chars.max(1) as f64
        };
        let read_tokens = tokens(&blocks[..read]);
        let written_tokens = tokens(&blocks[read..marked.max(read)]);
        read_tokens * cache_price
            + written_tokens * CACHE_WRITE_PRICE
            + (sent as f64 - read_tokens - written_tokens)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn text(text: &str, marked: bool) -> Value {
        match marked {
            true => json!({"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}),
            false => json!({"type": "text", "text": text}),
        }
    }

    /// A request reads what an earlier one wrote at its marks, up to one of its own marks;
    /// unmarked, a request reads and writes nothing; a prefix that changed is read no more.
    #[test]
    fn anthropic_reads_the_prefix_an_earlier_request_marked_and_writes_its_own() {
        let (a, b, c) = ("aaaa", "bbbb", "cccc");
        let first = json!({"system": "ssss", "messages": [
            {"role": "user", "content": [text(a, true)]}]});
        let second = json!({"system": "ssss", "messages": [
            {"role": "user", "content": [text(a, true)]},
            {"role": "assistant", "content": [text(b, false)]},
            {"role": "user", "content": [text(c, true)]}]});
        let mut cache = AnthropicCache::default();
        // Nothing to read: the whole prompt up to its mark is written.
        assert_eq!(cache.cost(&first, 100, 0.1), 125.0);
        // The system prompt and `a` are read; `b` and `c` are written. Each block's share
        // of the characters: the system prompt and each text alike.
        let blocks = [
            &second["system"],
            &text(a, false),
            &text(b, false),
            &text(c, false),
        ];
        let chars: Vec<f64> = blocks.iter().map(|b| b.to_string().len() as f64).collect();
        let all: f64 = chars.iter().sum();
        let read = 400.0 * (chars[0] + chars[1]) / all;
        let expected = read * 0.1 + (400.0 - read) * 1.25;
        assert!((cache.cost(&second, 400, 0.1) - expected).abs() < 1e-9);
        // Unmarked, nothing is read or written.
        let mut unmarked = second.clone();
        crate::engine::render::without_cache_control(&mut unmarked);
        assert_eq!(AnthropicCache::default().cost(&unmarked, 400, 0.1), 400.0);
        // Another system prompt: no prefix matches.
        let mut changed = second.clone();
        changed["system"] = json!("tttt");
        assert_eq!(cache.cost(&changed, 400, 0.1), 500.0);
    }

    /// After a compaction the messages differ from the first block on: only a mark on the
    /// system prompt, which a compaction keeps, lets its tokens be read from the cache.
    #[test]
    fn anthropic_reads_a_marked_system_prompt_after_the_messages_changed() {
        let system = |marked| json!([text("ssssssss", marked)]);
        let view = |marked, said: &str| {
            json!({"system": system(marked), "messages": [
                {"role": "user", "content": [text(said, true)]}]})
        };
        let mut cache = AnthropicCache::default();
        assert_eq!(cache.cost(&view(true, "aaaa"), 100, 0.1), 125.0);
        let compacted = view(true, "bbbb");
        let chars = |v: &Value| v.to_string().len() as f64;
        let system_share = 100.0 * chars(&text("ssssssss", false))
            / (chars(&text("ssssssss", false)) + chars(&text("bbbb", false)));
        let expected = system_share * 0.1 + (100.0 - system_share) * 1.25;
        assert!((cache.cost(&compacted, 100, 0.1) - expected).abs() < 1e-9);
        // Not marked, the system prompt is written again with the new messages.
        let mut unmarked = AnthropicCache::default();
        assert_eq!(unmarked.cost(&view(false, "aaaa"), 100, 0.1), 125.0);
        assert_eq!(unmarked.cost(&view(false, "bbbb"), 100, 0.1), 125.0);
    }
}
