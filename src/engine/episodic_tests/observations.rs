//! The observation cap: a large result is its head and tail, even while current or active.

use super::*;

/// A result larger than the observation cap is its head and tail even while current.
#[tokio::test]
async fn an_observation_over_the_cap_is_an_excerpt_while_current() {
    let cfg = config(20_000);
    let mut log = Log::default();
    log.user("Read the big one.");
    let big = exchange(&mut log, "b", "read", 20_000);
    let out = run(&cfg, &CompactionState::default(), &log, 0, Mode::Force, 0)
        .await
        .unwrap();
    assert_eq!(projection(&out, big), Some(Projection::Preview));
    assert_ne!(
        out.state.reduced.get(&big).map(|r| r.reason),
        Some(Reason::ArchivedToolExchange)
    );
}

/// A result larger than the observation cap is its head and tail even while active.
#[tokio::test]
async fn a_large_observation_is_capped_while_active() {
    let cfg = config(100_000);
    let mut log = Log::default();
    log.user("Read the log.");
    let seq = exchange(&mut log, "big", "read", 40_000);
    let out = run(&cfg, &CompactionState::default(), &log, 0, Mode::Auto, 0)
        .await
        .unwrap();
    let (p, content) = shown(&out, seq).unwrap();
    assert_eq!(p, Projection::Preview);
    assert!(content.len() < 17_000, "{}", content.len());
    assert!(content.contains(&format!("observation://{seq}?offset=")));
}

/// The observation cap is the smaller of `observation_max_chars` and `item_max_share` of the
/// room: a small window caps a mid-sized read that a large one shows whole, and the setting
/// moves the cap.
#[tokio::test]
async fn the_observation_cap_scales_with_the_window() {
    let mut log = Log::default();
    log.user("Read the file.");
    let seq = exchange(&mut log, "f", "read", 6_000);
    let shown_as = |window: u32, max_chars: u32| {
        let mut cfg = config(window);
        cfg.item_max_share = SessionConfig::default().item_max_share;
        cfg.episodic.observation_max_chars = max_chars;
        let log = &log;
        async move {
            let out = run(&cfg, &CompactionState::default(), log, 0, Mode::Auto, 0)
                .await
                .unwrap();
            let (p, content) = shown(&out, seq).unwrap();
            (p, content.chars().count())
        }
    };
    // 16K: 6 % of the room is about 900 tokens, some 2,700 characters.
    let (p, chars) = shown_as(16_000, 16_000).await;
    assert_eq!(p, Projection::Preview);
    assert!((2_000..3_500).contains(&chars), "{chars}");
    assert_eq!(shown_as(200_000, 16_000).await, (Projection::Full, 6_000));
    let (p, chars) = shown_as(200_000, 4_000).await;
    assert_eq!(p, Projection::Preview);
    assert!(chars < 4_500, "{chars}");
}
