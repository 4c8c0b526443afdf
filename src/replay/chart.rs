//! The replay's chart, as an SVG file: per turn (the sessions one after another), each
//! policy's utilization of the window (top) and cumulative effective input cost (bottom), with
//! the turns where ctxd's compaction acted marked by tier.

use std::fmt::Write;

/// One turn of one policy.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Point {
    /// 1, 2, 3… within the session.
    pub turn: usize,
    /// Input tokens of the view (messages and tools), as ctxd counts them.
    pub tokens_sent: i64,
    pub utilization: f64,
    /// The effective input cost of every turn so far, in tokens.
    pub cumulative_cost: f64,
    /// The tier of a compaction that acted at this turn.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tier: Option<String>,
    /// Whether the view repeats the previous one unchanged before what it adds (what prompt
    /// caching reuses); false for the first view.
    pub extends: bool,
    /// The share of the facts known so far that the view holds, and by kind (kept, of).
    pub facts_kept: f64,
    pub facts: super::facts::Kept,
}

const WIDTH: f64 = 960.0;
const PANEL: f64 = 250.0;
const LEFT: f64 = 90.0;
const RIGHT: f64 = 190.0;
const TOP: f64 = 50.0;
const GAP: f64 = 70.0;

fn colour(policy: &str) -> &'static str {
    match policy {
        "chunked_truncation" => "#1f77b4",
        "sliding_truncation" => "#2ca02c",
        "observation_masking" => "#9467bd",
        "no_compaction" => "#7f7f7f",
        _ => "#d62728",
    }
}

fn tier_colour(tier: &str) -> &'static str {
    match tier {
        "warn" => "#e6b800",
        "soft" => "#ff7f0e",
        "full" => "#d62728",
        "emergency" => "#000000",
        _ => "#888888",
    }
}

/// The SVG of `series`: (policy name, its points), ctxd's first.
pub fn svg(title: &str, series: &[(String, Vec<Point>)]) -> String {
    let turns = series
        .iter()
        .map(|(_, p)| p.len())
        .max()
        .unwrap_or(0)
        .max(2);
    let peak = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|p| p.utilization))
        .fold(1.0_f64, f64::max)
        .min(6.0);
    let cost = series
        .iter()
        .flat_map(|(_, p)| p.last().map(|p| p.cumulative_cost))
        .fold(1.0_f64, f64::max);
    let plot = WIDTH - LEFT - RIGHT;
    let height = TOP + 2.0 * PANEL + GAP + 60.0;
    let x = |i: usize| LEFT + plot * i as f64 / (turns - 1) as f64;
    let top_y = |u: f64| TOP + PANEL * (1.0 - u.min(peak) / peak);
    let bottom = TOP + PANEL + GAP;
    let cost_y = |c: f64| bottom + PANEL * (1.0 - c / cost);

    let mut out = String::with_capacity(64 * 1024);
    let _ = write!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="12">
<rect width="100%" height="100%" fill="white"/>
<text x="{}" y="24" font-size="16" text-anchor="middle">{}</text>
"#,
        WIDTH / 2.0,
        escape(title)
    );
    // Axes, ticks and labels of both panels.
    for (panel_top, label, max, unit) in [
        (TOP, "utilization of the window", peak, ""),
        (
            bottom,
            "cumulative effective input cost (tokens)",
            cost,
            "k",
        ),
    ] {
        let _ = write!(
            out,
            r##"<line x1="{LEFT}" y1="{panel_top}" x2="{LEFT}" y2="{b}" stroke="#333"/>
<line x1="{LEFT}" y1="{b}" x2="{r}" y2="{b}" stroke="#333"/>
<text x="20" y="{m}" transform="rotate(-90 20 {m})" text-anchor="middle">{label}</text>
"##,
            b = panel_top + PANEL,
            r = LEFT + plot,
            m = panel_top + PANEL / 2.0,
        );
        for k in 0..=4 {
            let value = max * f64::from(k) / 4.0;
            let y = panel_top + PANEL * (1.0 - f64::from(k) / 4.0);
            let text = if unit == "k" {
                format!("{:.0}k", value / 1000.0)
            } else {
                format!("{value:.2}")
            };
            let _ = writeln!(
                out,
                r##"<line x1="{}" y1="{y}" x2="{LEFT}" y2="{y}" stroke="#333"/><text x="{}" y="{}" text-anchor="end">{text}</text>"##,
                LEFT - 5.0,
                LEFT - 8.0,
                y + 4.0
            );
        }
        for k in 0..=5 {
            let turn = (turns - 1) * k / 5;
            let _ = writeln!(
                out,
                r##"<line x1="{xx}" y1="{b}" x2="{xx}" y2="{}" stroke="#333"/><text x="{xx}" y="{}" text-anchor="middle">{turn}</text>"##,
                panel_top + PANEL + 5.0,
                panel_top + PANEL + 18.0,
                xx = x(turn),
                b = panel_top + PANEL,
            );
        }
        let _ = writeln!(
            out,
            r#"<text x="{}" y="{}" text-anchor="middle">turn</text>"#,
            LEFT + plot / 2.0,
            panel_top + PANEL + 34.0
        );
    }
    // The window itself.
    let _ = writeln!(
        out,
        r##"<line x1="{LEFT}" y1="{y}" x2="{}" y2="{y}" stroke="#999" stroke-dasharray="4 4"/>"##,
        LEFT + plot,
        y = top_y(1.0)
    );
    for (name, points) in series {
        let line = |f: &dyn Fn(&Point) -> f64| -> String {
            points
                .iter()
                .enumerate()
                .map(|(i, p)| format!("{:.1},{:.1}", x(i), f(p)))
                .collect::<Vec<_>>()
                .join(" ")
        };
        for coords in [
            line(&|p: &Point| top_y(p.utilization)),
            line(&|p: &Point| cost_y(p.cumulative_cost)),
        ] {
            let _ = writeln!(
                out,
                r#"<polyline fill="none" stroke="{}" stroke-width="1.5" points="{coords}"/>"#,
                colour(name)
            );
        }
        for (i, p) in points.iter().enumerate() {
            if let Some(tier) = &p.tier {
                let _ = writeln!(
                    out,
                    r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{}"><title>{} compaction at turn {i}</title></circle>"#,
                    x(i),
                    top_y(p.utilization),
                    tier_colour(tier),
                    escape(tier)
                );
            }
        }
    }
    // The legend: policies, then tiers.
    let legend_x = LEFT + plot + 20.0;
    let mut y = TOP + 10.0;
    for (name, _) in series {
        let _ = writeln!(
            out,
            r#"<line x1="{legend_x}" y1="{y}" x2="{}" y2="{y}" stroke="{}" stroke-width="3"/><text x="{}" y="{}">{}</text>"#,
            legend_x + 20.0,
            colour(name),
            legend_x + 26.0,
            y + 4.0,
            escape(name)
        );
        y += 20.0;
    }
    y += 10.0;
    for tier in ["warn", "soft", "full", "emergency"] {
        let _ = writeln!(
            out,
            r#"<circle cx="{}" cy="{y}" r="4" fill="{}"/><text x="{}" y="{}">{tier} compaction</text>"#,
            legend_x + 10.0,
            tier_colour(tier),
            legend_x + 26.0,
            y + 4.0
        );
        y += 18.0;
    }
    out.push_str("</svg>\n");
    out
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chart_has_a_line_per_policy_and_panel_and_marks_compactions() {
        let points = |n: usize, tier_at: usize| -> Vec<Point> {
            (0..n)
                .map(|i| Point {
                    turn: i + 1,
                    tokens_sent: 1000,
                    facts_kept: 1.0,
                    facts: Default::default(),
                    utilization: i as f64 / n as f64,
                    cumulative_cost: (i * 1000) as f64,
                    tier: (i == tier_at).then(|| "soft".to_owned()),
                    extends: i > 0 && i != tier_at,
                })
                .collect()
        };
        let svg = svg(
            "a <title>",
            &[
                ("progressive".into(), points(30, 20)),
                ("chunked_truncation".into(), points(30, 99)),
            ],
        );
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        assert_eq!(svg.matches("<polyline").count(), 4);
        assert_eq!(
            svg.matches("<title>soft compaction at turn 20</title>")
                .count(),
            1
        );
        assert!(svg.contains("a &lt;title&gt;"));
        assert!(svg.contains(">chunked_truncation</text>"));
    }
}
