//! Seq allocation under concurrent appends to one session.

use std::collections::HashSet;

use reqwest::StatusCode;
use serde_json::json;

use crate::on_both_backends;

const WRITERS: usize = 8;
const EVENTS_PER_WRITER: usize = 500;

on_both_backends! {
    async fn concurrent_writers_get_gapless_unique_seqs(app) {
        let id = app.create_session(json!({"config": {"tokenizer": "chars4"}})).await;
        let app = std::sync::Arc::new(app);
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let app = app.clone();
                let id = id.clone();
                tokio::spawn(async move {
                    let mut seqs = Vec::with_capacity(EVENTS_PER_WRITER);
                    for i in 0..EVENTS_PER_WRITER {
                        // Each writer also opens and answers its own tool calls.
                        let event = if i % 2 == 0 {
                            json!({"id": format!("w{w}-{i}"), "type": "message", "role": "assistant",
                                "tool_calls": [{"id": format!("call-{w}-{i}"), "name": "ls"}]})
                        } else {
                            json!({"id": format!("w{w}-{i}"), "type": "message", "role": "tool",
                                "tool_call_id": format!("call-{w}-{}", i - 1), "content": "ok"})
                        };
                        let reply = app.append(&id, json!([event])).await;
                        assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
                        seqs.push(reply.body["events"][0]["seq"].as_i64().unwrap());
                    }
                    seqs
                })
            })
            .collect();
        let mut all = HashSet::new();
        for writer in writers {
            let seqs = writer.await.unwrap();
            assert!(seqs.windows(2).all(|w| w[0] < w[1]), "a writer's events keep its order");
            all.extend(seqs);
        }
        let total = (WRITERS * EVENTS_PER_WRITER) as i64;
        assert_eq!(all, (1..=total).collect::<HashSet<_>>(), "seqs 1..{total}, no gap, no duplicate");
        let events = app.all_events(&id).await;
        let stored: Vec<i64> = events.iter().map(|e| e["seq"].as_i64().unwrap()).collect();
        assert_eq!(stored, (1..=total).collect::<Vec<_>>());
        let session = app.get(&format!("/sessions/{id}")).await;
        assert_eq!(session.body["head_seq"], total);
    }
}
