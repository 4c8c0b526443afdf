//! Every tier and its boundaries: none, warn, soft and full, and when each acts.

use super::*;

#[tokio::test]
async fn below_warn_the_view_is_the_log() {
    let config = config(10_000);
    let mut log = Log::default();
    log.system("You are a careful agent.");
    log.user("Please read the files.");
    log.exchange("a", 100);
    let out = run(&config, &CompactionState::default(), &log, 0, Mode::Auto, 0)
        .await
        .unwrap();
    assert_eq!(out.record.tier, Tier::None);
    assert!(!out.record.acted && !out.changed);
    assert_eq!(seqs(&out), [Some(1), Some(2), Some(3), Some(4)]);
    assert_eq!(out.record.prefix_kept, 4);
}

#[tokio::test]
async fn tier_boundaries_are_inclusive() {
    let config = config(10_000);
    let mut log = Log::default();
    // Large enough that the tool schemas filling the rest leave the safety margin free.
    log.user(&"hello ".repeat(800));
    let state = CompactionState::default();
    for (utilization, tier) in [
        (0.69, Tier::None),
        (0.70, Tier::Warn),
        (0.80, Tier::Soft),
        (0.90, Tier::Full),
        // Nothing is over the window, so nothing is truncated: the gentle steps suffice.
        (0.95, Tier::Full),
    ] {
        let tools = tools_for(utilization, &config, &log);
        let out = run(&config, &state, &log, tools, Mode::Auto, 0)
            .await
            .unwrap();
        assert_eq!(out.record.tier, tier, "at {utilization}");
        assert!(out.record.tokens_after <= 10_000);
    }
}

/// A log at the warn tier whose head holds `count` results of `chars` characters, each under
/// the per-item cap (its own step is tested on its own), with the tools taking what brings the
/// request to 72 % of the window.
fn warn_log(count: usize, chars: usize) -> (SessionConfig, Log, i64) {
    let config = SessionConfig {
        item_max_share: 0.2,
        ..config(10_000)
    };
    let mut log = Log::default();
    log.system("sys");
    log.user("Investigate the crash.");
    for i in 0..count {
        log.exchange(&format!("c{i}"), chars);
    }
    log.user("Now summarise what you found.");
    log.assistant("Working on it.");
    let tools = tools_for(0.72, &config, &log);
    (config, log, tools)
}

#[tokio::test]
async fn warn_offloads_large_head_results_and_keeps_the_tail() {
    // About 1,000 tokens each, 300 as a preview: offloading the five beyond the tail brings
    // the request from 72 % of the window to the low-water mark (40 %).
    let (config, log, tools) = warn_log(6, 4_000);
    let out = run(
        &config,
        &CompactionState::default(),
        &log,
        tools,
        Mode::Auto,
        0,
    )
    .await
    .unwrap();
    assert_eq!(out.record.tier, Tier::Warn);
    assert!(out.record.acted, "{:?}", out.record);
    // Down to the low-water mark at once, so the next compaction is many turns away.
    assert!(out.record.tokens_after <= 4_000, "{:?}", out.record);
    // The head's large results are previews; the last four messages are untouched.
    let offloaded: Vec<i64> = out.record.offloaded.iter().map(|o| o.seq).collect();
    assert!(!offloaded.is_empty());
    for seq in &offloaded {
        assert_eq!(projection_of(&out, *seq), Some(Projection::Preview));
        let m = out.messages.iter().find(|m| m.seq == Some(*seq)).unwrap();
        assert!(m.content.contains(&format!("observation://{seq}")));
    }
    let tail_start = log.head() - 3;
    for seq in tail_start..=log.head() {
        assert_eq!(
            projection_of(&out, seq),
            Some(Projection::Full),
            "tail seq {seq}"
        );
        assert!(!offloaded.contains(&seq));
    }
    // Nothing was folded, so there is no summary message: each preview carries its own
    // reference where it stands.
    assert!(out
        .messages
        .iter()
        .all(|m| m.projection != Projection::Summary));
    assert!(
        out.record.summarized_seqs.is_empty(),
        "warn does not summarise"
    );
}

/// Offloading that frees a worthwhile share but leaves the view above the low-water mark
/// would rewrite the view's middle and leave it at the tier, to be rewritten again a few turns
/// later: the warn tier leaves it alone, and the soft tier brings it down when it comes.
#[tokio::test]
async fn a_warn_offload_short_of_low_water_waits_for_the_soft_tier() {
    // About 500 tokens each, 300 as a preview: offloading the eleven beyond the tail frees
    // about 2,000 tokens (more than the 5 % a compaction must free) but leaves the request at
    // about 50 % of the window, over the low-water mark (40 %).
    let (config, log, tools) = warn_log(12, 2_000);
    let state = CompactionState::default();
    let out = run(&config, &state, &log, tools, Mode::Auto, 0)
        .await
        .unwrap();
    assert_eq!(out.record.tier, Tier::Warn);
    assert!(!out.record.acted && !out.changed, "{:?}", out.record);
    assert_eq!(out.record.prefix_kept, out.messages.len() as i64);

    // The same log past the soft tier: brought down to the mark, the head folded.
    let tools = tools_for(0.81, &config, &log);
    let out = run(&config, &state, &log, tools, Mode::Auto, 0)
        .await
        .unwrap();
    assert_eq!(out.record.tier, Tier::Soft);
    assert!(out.record.acted, "{:?}", out.record);
    assert!(out.record.tokens_after <= 4_000, "{:?}", out.record);
}

/// A soft- or full-tier compaction that cannot bring the view down to the low-water mark
/// (here the tool schemas leave the mark under what the tail alone takes) would free a little
/// and leave the view near the tier, to be rewritten again the next turn: it waits until the
/// view reaches the emergency tier, where the gentler steps act and bring it within the room
/// (recorded at the full tier: nothing was truncated).
#[tokio::test]
async fn a_compaction_short_of_low_water_waits_until_the_view_nears_the_room() {
    let config = config(10_000);
    let mut log = Log::default();
    log.user("Investigate.");
    for i in 0..8 {
        log.exchange(&format!("c{i}"), 1_200);
    }
    for i in 0..4 {
        log.user(&format!("message {i}"));
    }
    let state = CompactionState::default();
    let tools = tools_for(0.81, &config, &log);
    let out = run(&config, &state, &log, tools, Mode::Auto, 0)
        .await
        .unwrap();
    assert_eq!(out.record.tier, Tier::Soft);
    assert!(!out.record.acted && !out.changed, "{:?}", out.record);
    assert_eq!(out.record.prefix_kept, out.messages.len() as i64);

    let tools = tools_for(0.91, &config, &log);
    let out = run(&config, &state, &log, tools, Mode::Auto, 0)
        .await
        .unwrap();
    assert_eq!(out.record.tier, Tier::Full);
    assert!(!out.record.acted && !out.changed, "{:?}", out.record);

    let tools = tools_for(0.96, &config, &log);
    let out = run(&config, &state, &log, tools, Mode::Auto, 0)
        .await
        .unwrap();
    assert_eq!(out.record.tier, Tier::Full);
    assert!(out.record.acted, "{:?}", out.record);
    assert!(out.record.tokens_after < out.record.tokens_before);
}

#[tokio::test]
async fn a_small_gain_leaves_the_view_alone() {
    let config = config(10_000);
    let mut log = Log::default();
    log.user("Investigate.");
    log.exchange("c0", 500); // one small offload candidate: ~100 tokens freed < 5 % of 10k
    for i in 0..4 {
        log.user(&format!("message {i}"));
    }
    let tools = tools_for(0.71, &config, &log);
    let out = run(
        &config,
        &CompactionState::default(),
        &log,
        tools,
        Mode::Auto,
        0,
    )
    .await
    .unwrap();
    assert_eq!(out.record.tier, Tier::Warn);
    assert!(!out.record.acted && !out.changed);
    assert_eq!(out.record.prefix_kept, out.messages.len() as i64);
}

#[tokio::test]
async fn soft_folds_the_oldest_of_the_head_down_to_low_water() {
    let config = config(10_000);
    let mut log = Log::default();
    log.system("sys");
    for i in 0..20 {
        log.user(&format!("request {i}: {}", "y".repeat(700)));
        log.assistant(&format!("answer {i}: {}", "z".repeat(700)));
    }
    let out = run(&config, &CompactionState::default(), &log, 0, Mode::Auto, 0)
        .await
        .unwrap();
    assert_eq!(out.record.tier, Tier::Soft);
    assert!(out.record.acted);
    let summarized = &out.record.summarized_seqs;
    // The oldest of the head (seqs 2..=37), never the tail (38..=41), as far as the low-water
    // mark (40 % of the window: 3,000 message tokens after the reserved output) needs.
    let head: Vec<i64> = (2..=37).collect();
    assert!(!summarized.is_empty());
    assert_eq!(summarized[..], head[..summarized.len()]);
    assert!(summarized.len() < head.len(), "{summarized:?}");
    assert!(
        out.record.tokens_after <= 1_000 + 3_000 + 600,
        "down to about low water: {}",
        out.record.tokens_after
    );
    for seq in summarized {
        assert_eq!(projection_of(&out, *seq), None);
    }
    for seq in (*summarized.last().unwrap() + 1)..=log.head() {
        assert_eq!(projection_of(&out, seq), Some(Projection::Full));
    }
    assert_eq!(out.state.checkpoint_seq, *summarized.last().unwrap());
    assert_eq!(out.state.kept, [1], "the system prompt stays");
    assert!(
        out.record.summary_text.contains("request 0"),
        "{}",
        out.record.summary_text
    );
}

#[tokio::test]
async fn full_summarises_the_head_without_splitting_a_tool_pair() {
    let config = config(10_000);
    let mut log = Log::default();
    log.system("sys");
    for i in 0..12 {
        log.user(&format!("step {i}: {}", "q".repeat(600)));
    }
    // The tail's last four messages start at a result whose call stands before them.
    log.assistant("calling");
    let call = log.call("last");
    log.user("interjection");
    log.user("another");
    log.result("last", 100);
    log.user("go on");
    // Past the emergency tier: the tool schemas leave the low-water mark under the tail.
    let tools = tools_for(0.96, &config, &log);
    let out = run(
        &config,
        &CompactionState::default(),
        &log,
        tools,
        Mode::Auto,
        0,
    )
    .await
    .unwrap();
    assert_eq!(out.record.tier, Tier::Full);
    assert!(out.record.acted);
    assert_eq!(
        projection_of(&out, call),
        Some(Projection::Full),
        "the call moved into the tail"
    );
    assert_eq!(out.state.checkpoint_seq, call - 1);
    assert_eq!(
        out.record.preserved_tail,
        (call..=log.head()).collect::<Vec<_>>()
    );
    assert_eq!(out.record.repairs.orphan_results_dropped, 0);
}

/// The engine shows what the state keeps, whatever events it is handed: those a fold left out
/// (the view before the compaction's fold, which the next fold is planned over) are not taken
/// for kept ones, so the view and the next fold are those of the events the state shows.
#[tokio::test]
async fn events_a_fold_left_out_are_not_taken_for_kept_ones() {
    let config = config(4_000);
    let mut log = Log::default();
    log.system("You are a careful agent.");
    log.user("Read every module.");
    let mut state = CompactionState::default();
    for i in 0..40 {
        if i % 8 == 0 {
            log.user(&format!("Now the modules of part {i}."));
        }
        log.exchange(&format!("c{i}"), 600);
        state = run(&config, &state, &log, 0, Mode::Auto, 0)
            .await
            .unwrap()
            .state;
    }
    let shown = log.view_events(&state);
    assert!(state.checkpoint_seq > 0 && shown.len() < log.events.len());
    let format = crate::engine::render::Format::Raw;
    let (view, tokens) = super::super::current_view(&config, &state, &shown, format);
    let (handed_all, all_tokens) = super::super::current_view(&config, &state, &log.events, format);
    assert_eq!(handed_all, view);
    assert_eq!(all_tokens, tokens);
    assert_eq!(
        super::super::next_fold(&config, &state, &log.events, format),
        super::super::next_fold(&config, &state, &shown, format)
    );
}
