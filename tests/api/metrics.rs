//! `GET /metrics`: what operators scrape, in the Prometheus text format.

use std::collections::HashMap;

use reqwest::StatusCode;
use serde_json::json;

use crate::on_both_backends;
use crate::support::TestApp;

/// Every sample of a scrape, by its series (name and labels as written).
pub async fn scrape(app: &TestApp) -> HashMap<String, f64> {
    let response = app.client.get(app.url("/metrics")).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let kind = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(kind.starts_with("text/plain; version=0.0.4"), "{kind}");
    let text = response.text().await.unwrap();
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (series, value) = l.rsplit_once(' ').unwrap_or_else(|| panic!("{l}"));
            (
                series.to_owned(),
                value.parse().unwrap_or_else(|_| panic!("{l}")),
            )
        })
        .collect()
}

pub fn value(samples: &HashMap<String, f64>, series: &str) -> f64 {
    samples.get(series).copied().unwrap_or(0.0)
}

on_both_backends! {
    async fn metrics_count_requests_appends_and_compactions(app) {
        // The registry is the process's: the tests measure what their own calls add.
        let before = scrape(&app).await;
        let session = app.create_session(json!({})).await;
        let appended = app.post(&format!("/sessions/{session}/events"), &json!({"events": [
            {"type": "message", "role": "user", "content": "Hello"},
            {"type": "message", "role": "assistant", "content": "Hi."}
        ]})).await;
        assert_eq!(appended.status, StatusCode::CREATED);
        for _ in 0..2 {
            let reply = app.post(&format!("/sessions/{session}/compact"), &json!({})).await;
            assert_eq!(reply.status, StatusCode::OK);
        }
        let missing = app.get(&format!("/sessions/{session}/compactions/nothing")).await;
        assert!(missing.status.is_client_error());
        let after = scrape(&app).await;
        let added = |series: &str| value(&after, series) - value(&before, series);

        let appends = r#"ctxd_http_requests_total{method="POST",route="/sessions/{id}/events",status="201"}"#;
        assert!(added(appends) >= 1.0, "{appends}");
        assert!(added("ctxd_events_appended_total") >= 2.0);
        assert!(added("ctxd_appends_total") >= 1.0);
        let compactions = r#"ctxd_compactions_total{acted="false",policy="progressive",tier="none",trigger="auto"}"#;
        assert!(added(compactions) >= 2.0, "{compactions}");
        let latency = r#"ctxd_http_request_duration_seconds_count{method="POST",route="/sessions/{id}/compact"}"#;
        assert!(added(latency) >= 2.0, "{latency}");
        // The second compaction of an unchanged session found the view in the cache.
        assert!(added(r#"ctxd_view_cache_lookups_total{result="hit"}"#) >= 1.0);
        assert!(value(&after, r#"ctxd_db_pool_connections{state="open"}"#) >= 1.0);
        // Routes are templates: no session id makes a series of its own.
        assert!(after.keys().all(|series| !series.contains(&session)), "a series per session");
    }
}
