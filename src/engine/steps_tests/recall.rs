//! A slice the model recalled stays in full while it is recent.

use serde_json::json;

use crate::domain::compaction::{Mode, Projection};
use crate::domain::state::CompactionState;
use crate::engine::tests::{config, projection_of, run, Log};

/// A session whose model recalled the middle of an observation, and `slice` came back: the
/// log and the slice's seq.
fn recalled(slice: &str) -> (Log, i64) {
    let mut log = Log::default();
    log.system("sys");
    log.user("Look at the middle of the log.");
    log.push(json!({"type": "message", "role": "assistant",
        "tool_calls": [{"id": "r1", "name": "recall_observation",
            "arguments": {"uri": "observation://2?offset=4000"}}]}));
    let seq = log.push(
        json!({"type": "message", "role": "tool", "tool_call_id": "r1",
        "name": "recall_observation", "content": slice}),
    );
    (log, seq)
}

/// The model asked for a recalled slice: it stays in full while recent, though over the
/// per-item cap, so it is not offloaded again in the next views.
#[tokio::test]
async fn a_recalled_slice_stays_in_full_while_recent() {
    let config = config(20_000);
    // Over the per-item cap (about 1,100 tokens here), within the tail's (about 2,800).
    let slice: String = (0..400).map(|i| format!("recalled line {i}\n")).collect();
    let (mut log, recalled) = recalled(&slice);
    // The same size from another tool is capped.
    log.push(json!({"type": "message", "role": "assistant",
        "tool_calls": [{"id": "o1", "name": "read", "arguments": {"path": "a.rs"}}]}));
    let other = log.push(
        json!({"type": "message", "role": "tool", "tool_call_id": "o1",
        "name": "read", "content": slice}),
    );
    let out = run(&config, &CompactionState::default(), &log, 0, Mode::Auto, 0)
        .await
        .unwrap();
    assert_eq!(projection_of(&out, recalled), Some(Projection::Full));
    assert_eq!(projection_of(&out, other), Some(Projection::Preview));
}

/// A recall of the default size stays in full where the tail's cap is smaller than what it
/// brings back: the model asked for that slice, and cutting it would only make it ask again.
#[tokio::test]
async fn a_default_recall_stays_in_full_under_a_smaller_tail_cap() {
    // Room 9,000 tokens: the tail's cap 900, under the 1,000 or so of a default recall.
    let config = config(10_000);
    let mut slice: String = (0..250).map(|i| format!("line {i:>9}\n")).collect();
    slice.truncate(crate::domain::observation::DEFAULT_LIMIT);
    slice.push_str(
        "\n[characters 4000–8000 of 20000; recall observation://2?offset=8000 for the rest]",
    );
    let (log, recalled) = recalled(&slice);
    let out = run(&config, &CompactionState::default(), &log, 0, Mode::Auto, 0)
        .await
        .unwrap();
    assert_eq!(projection_of(&out, recalled), Some(Projection::Full));
}
