//! What a replay reports: per session and in total, as a table, JSON or a chart.

use std::collections::BTreeMap;

use serde::Serialize;

use super::baselines::Baseline;
use super::chart;
use super::facts::{Kept, Missed};

impl Report {
    /// The chart of the totals: ctxd's policy, then each baseline.
    pub fn chart(&self, title: &str) -> String {
        let mut series = vec![(self.policy.clone(), self.total.series.clone())];
        series.extend(
            self.baselines
                .iter()
                .map(|(name, r)| (name.clone(), r.series.clone())),
        );
        chart::svg(title, &series)
    }
}

/// What one session's replay (or all of them, added up) showed.
#[derive(Debug, Default, Clone, Serialize)]
pub struct SessionReport {
    pub session: String,
    pub messages: usize,
    pub turns: usize,
    /// Must be 0: views over their budget.
    pub over_budget: usize,
    /// Must be 0: views that are not a valid request, counted in each provider format a
    /// check refused them in (ctxd's validators, and the providers' SDKs when they ran).
    pub invalid_views: usize,
    /// The same by format.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub invalid_by_format: BTreeMap<String, usize>,
    /// Must be 0, summed over the turns: items neither shown in full, nor referenced, nor in
    /// a compaction record's membership.
    pub unexplained_items: usize,
    /// Must be 0: requests ctxd refused or failed.
    pub errors: Vec<String>,
    /// What the invalid views and unexplained items were (the first few).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
    /// Input tokens of every view sent (messages and tools), as ctxd counts them.
    pub tokens_sent: i64,
    /// The same with the prefix each view repeats from the previous priced at the cache price.
    pub effective_input_cost: f64,
    /// Measured in the `anthropic` format: `effective_input_cost` as Anthropic prices its
    /// explicit cache, which a request reads and writes only at the blocks it marks (reads at
    /// the cache price, writes at 1.25, the rest in full).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub anthropic_cache_cost: Option<f64>,
    /// The share of turns after the first whose view extends the previous one unchanged.
    pub prefix_stability: f64,
    /// The share of the tokens sent that repeat the previous view's prefix.
    pub prefix_reused: f64,
    /// Turns whose view hid a word of an earlier tool result that the recorded agent used next
    /// (an identifier, a number, a particular name): an agent given that view would have
    /// fetched it again first (a recall with ctxd; running the tool again after truncation).
    pub hidden_uses: usize,
    /// The tool results those turns would have fetched again.
    pub recalls: usize,
    /// What fetching them again costs, in effective input tokens: for each such turn one more
    /// request, the same view with its prefix cached, and each result's slice (up to a recall's
    /// 4,000 characters). Not part of `effective_input_cost`.
    pub recall_cost: f64,
    /// Facts held by the last view, by kind (kept, of).
    pub facts_end: Kept,
    /// The facts the last view does not hold, by kind: what to read when `facts_kept_end` is low.
    pub facts_missed_end: Missed,
    /// The share of facts held at the end, and on average over the turns.
    pub facts_kept_end: f64,
    pub facts_kept_mean: f64,
    /// Compactions that acted, by tier.
    pub compactions: BTreeMap<String, usize>,
    pub summarizer_calls: i64,
    pub peak_utilization: f64,
    pub mean_utilization: f64,
    pub compaction_ms_p50: f64,
    pub compaction_ms_p99: f64,
    /// Turn by turn, for the chart (sessions one after another in a total).
    #[serde(skip)]
    pub series: Vec<chart::Point>,
    /// Turn by turn, in a session's report: tokens, utilization, cost so far, the tier of a
    /// compaction that acted, and the facts the view held.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub per_turn: Vec<chart::Point>,
}

impl SessionReport {
    /// The figures that must be 0.
    pub fn failures(&self) -> usize {
        self.over_budget + self.invalid_views + self.unexplained_items + self.errors.len()
    }
}

/// Every session's report and their total.
#[derive(Debug, Default, Clone, Serialize)]
pub struct Report {
    /// The ctxd policy replayed.
    pub policy: String,
    /// The format of the views measured.
    pub format: String,
    /// Whether the views were checked against the providers' SDKs, and which.
    pub provider_check: String,
    pub sessions: Vec<SessionReport>,
    pub total: SessionReport,
    /// With `compare`: each baseline's total over the same sessions.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub baselines: BTreeMap<String, SessionReport>,
    /// With `compare`: each baseline's report of each session, in the order of `sessions`.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub baseline_sessions: BTreeMap<String, Vec<SessionReport>>,
    /// With `compare`: the figures pooled over the sessions that outgrow the window, against
    /// the baselines; absent when none does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outgrowing: Option<Outgrowing>,
}

/// The sessions whose whole history outgrows the window (without compaction a view goes over
/// the budget), pooled: the only ones on which a policy can differ from sending everything, so
/// the ones its cost, prefix stability and facts kept are judged on.
#[derive(Debug, Default, Clone, Serialize)]
pub struct Outgrowing {
    /// How many of the sessions replayed outgrow the window, and their names.
    pub sessions: usize,
    pub names: Vec<String>,
    /// Their effective input cost (prompt caching priced) over chunked truncation's.
    pub cost_vs_chunked: f64,
    /// Their prefix stability, turn-weighted, and chunked truncation's.
    pub prefix_stability: f64,
    pub chunked_prefix_stability: f64,
    /// The share of their facts the last views hold, pooled (kept facts over all facts).
    pub facts_kept_end: f64,
    /// The same for the truncation baseline that keeps the most (sliding or chunked), its
    /// name, and how far ahead the policy is.
    pub best_truncation: String,
    pub best_truncation_facts: f64,
    pub facts_margin: f64,
    /// Compactions that acted, and how many of them were emergencies.
    pub compactions: usize,
    pub emergencies: usize,
    /// Must be 0: views over budget, invalid views, unexplained items and failed requests.
    pub failures: usize,
}

impl Outgrowing {
    /// Pools `sessions` (ctxd's reports) that outgrow the window, judged by the no-compaction
    /// baseline among `baselines` (each baseline's reports in the same order); `None` without
    /// the baselines or when no session outgrows the window.
    pub fn pool(
        sessions: &[SessionReport],
        baselines: &BTreeMap<String, Vec<SessionReport>>,
    ) -> Option<Self> {
        let whole = baselines.get(Baseline::NoCompaction.name())?;
        let chunked = baselines.get(Baseline::Chunked.name())?;
        let outgrow: Vec<usize> = (0..sessions.len())
            .filter(|&i| whole.get(i).is_some_and(|b| b.over_budget > 0))
            .collect();
        if outgrow.is_empty() {
            return None;
        }
        let pick = |reports: &[SessionReport]| -> Vec<SessionReport> {
            outgrow
                .iter()
                .filter_map(|&i| reports.get(i).cloned())
                .collect()
        };
        let ours = total(&pick(sessions));
        let chunked = total(&pick(chunked));
        let (best_truncation, best) = [Baseline::Sliding, Baseline::Chunked]
            .into_iter()
            .filter_map(|b| baselines.get(b.name()).map(|r| (b.name(), total(&pick(r)))))
            .max_by(|a, b| a.1.facts_kept_end.total_cmp(&b.1.facts_kept_end))?;
        let compactions = ours
            .compactions
            .iter()
            .filter(|(tier, _)| tier.as_str() != "none")
            .map(|(_, n)| n)
            .sum();
        Some(Outgrowing {
            sessions: outgrow.len(),
            names: outgrow
                .iter()
                .map(|&i| sessions[i].session.clone())
                .collect(),
            cost_vs_chunked: ours.effective_input_cost / chunked.effective_input_cost.max(1.0),
            prefix_stability: ours.prefix_stability,
            chunked_prefix_stability: chunked.prefix_stability,
            facts_kept_end: ours.facts_kept_end,
            best_truncation: best_truncation.to_owned(),
            best_truncation_facts: best.facts_kept_end,
            facts_margin: ours.facts_kept_end - best.facts_kept_end,
            compactions,
            emergencies: ours.compactions.get("emergency").copied().unwrap_or(0),
            failures: ours.failures(),
        })
    }

    /// One paragraph for the table.
    fn describe(&self, of: usize) -> String {
        format!(
            "{} of {of} sessions outgrow the window; over them: cost {:.3}x chunked truncation's, \
             prefix stability {:.3} (chunked {:.3}), facts kept at the end {:.3} \
             ({} {:.3}, {:+.3}), emergencies {} of {} compactions, failures {}\n",
            self.sessions,
            self.cost_vs_chunked,
            self.prefix_stability,
            self.chunked_prefix_stability,
            self.facts_kept_end,
            self.best_truncation,
            self.best_truncation_facts,
            self.facts_margin,
            self.emergencies,
            self.compactions,
            self.failures,
        )
    }
}

impl Report {
    /// What must be 0: ctxd's views over budget, any invalid view, any unexplained item, any
    /// failed request (a baseline without compaction is over budget by design).
    pub fn failures(&self) -> usize {
        self.total.failures()
            + self
                .baselines
                .values()
                .map(|b| b.invalid_views)
                .sum::<usize>()
    }

    /// The report as a text table, a session a row and the total last.
    pub fn table(&self) -> String {
        let mut out = format!(
            "{:<48} {:>6} {:>11} {:>11} {:>7} {:>7} {:>6} {:>6} {:>6} {:>6} {:>5}\n",
            "session",
            "turns",
            "tokens",
            "effective",
            "prefix",
            "facts",
            "hidden",
            "acted",
            "peak",
            "p99ms",
            "fail"
        );
        let baselines = self
            .baselines
            .iter()
            .map(|(name, r)| (format!("  {name}"), r));
        let rows = self
            .sessions
            .iter()
            .chain([&self.total])
            .map(|r| (r.session.clone(), r))
            .chain(baselines);
        for (name, r) in rows {
            let name: String = name.chars().take(48).collect();
            out.push_str(&format!(
                "{:<48} {:>6} {:>11} {:>11.0} {:>7.2} {:>7.2} {:>6} {:>6} {:>6.2} {:>6.1} {:>5}\n",
                name,
                r.turns,
                r.tokens_sent,
                r.effective_input_cost,
                r.prefix_stability,
                r.facts_kept_end,
                r.hidden_uses,
                r.compactions.values().sum::<usize>(),
                r.peak_utilization,
                r.compaction_ms_p99,
                r.failures()
            ));
        }
        match &self.outgrowing {
            Some(outgrowing) => out.push_str(&outgrowing.describe(self.sessions.len())),
            None if !self.baselines.is_empty() => {
                out.push_str("no session outgrows the window: every policy sends it all\n")
            }
            None => {}
        }
        out.push_str(&format!(
            "policy {}, views measured as {}; provider check: {}\n",
            self.policy, self.format, self.provider_check
        ));
        out
    }
}

/// The sessions added up: sums, the worst peaks, turn-weighted shares.
pub(super) fn total(sessions: &[SessionReport]) -> SessionReport {
    let mut t = SessionReport {
        session: "TOTAL".into(),
        ..SessionReport::default()
    };
    let turns: usize = sessions.iter().map(|s| s.turns).sum();
    let weight = |f: fn(&SessionReport) -> f64| {
        if turns == 0 {
            0.0
        } else {
            sessions.iter().map(|s| f(s) * s.turns as f64).sum::<f64>() / turns as f64
        }
    };
    for s in sessions {
        t.messages += s.messages;
        t.turns += s.turns;
        t.over_budget += s.over_budget;
        t.invalid_views += s.invalid_views;
        t.unexplained_items += s.unexplained_items;
        for (format, n) in &s.invalid_by_format {
            *t.invalid_by_format.entry(format.clone()).or_default() += n;
        }
        t.problems
            .extend(s.problems.iter().map(|p| format!("{}: {p}", s.session)));
        t.errors
            .extend(s.errors.iter().map(|e| format!("{}: {e}", s.session)));
        t.tokens_sent += s.tokens_sent;
        t.effective_input_cost += s.effective_input_cost;
        if let Some(cost) = s.anthropic_cache_cost {
            *t.anthropic_cache_cost.get_or_insert(0.0) += cost;
        }
        t.summarizer_calls += s.summarizer_calls;
        t.hidden_uses += s.hidden_uses;
        t.recalls += s.recalls;
        t.recall_cost += s.recall_cost;
        for (tier, n) in &s.compactions {
            *t.compactions.entry(tier.clone()).or_default() += n;
        }
        let before = t.series.last().map_or(0.0, |p| p.cumulative_cost);
        t.series.extend(s.series.iter().map(|p| chart::Point {
            cumulative_cost: before + p.cumulative_cost,
            ..p.clone()
        }));
        t.peak_utilization = t.peak_utilization.max(s.peak_utilization);
        t.compaction_ms_p99 = t.compaction_ms_p99.max(s.compaction_ms_p99);
        t.facts_end.add(&s.facts_end);
    }
    t.prefix_stability = weight(|s| s.prefix_stability);
    t.prefix_reused = if t.tokens_sent > 0 {
        sessions
            .iter()
            .map(|s| s.prefix_reused * s.tokens_sent as f64)
            .sum::<f64>()
            / t.tokens_sent as f64
    } else {
        0.0
    };
    t.facts_kept_end = t.facts_end.share();
    t.facts_kept_mean = weight(|s| s.facts_kept_mean);
    t.mean_utilization = weight(|s| s.mean_utilization);
    t.compaction_ms_p50 = weight(|s| s.compaction_ms_p50);
    t
}
