//! Summaries prepared in the background: the job table on both backends (one job per
//! checkpoint, claims that never collide, a lease that outlives a dead replica), and over HTTP
//! a model that does not answer never holds up a compaction, whose fold then takes the summary
//! the model prepared.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ctxd::domain::compaction::{SummarizerInfo, SummarizerOutcome, Summary};
use ctxd::domain::session::NewSession;
use ctxd::domain::state::{JobStatus, PreparedSummary, SummaryJob};
use ctxd::store::Store;
use serde_json::{json, Value};
use tokio::sync::Semaphore;

use crate::store_on_both_backends;
use crate::support::{Backend, TestApp};

fn job(session_id: uuid::Uuid, checkpoint_seq: i64) -> SummaryJob {
    SummaryJob {
        session_id,
        checkpoint_seq,
        to_seq: checkpoint_seq + 10,
        previous: Summary::default(),
        max_chars: 8_000,
    }
}

fn prepared(text: &str) -> PreparedSummary {
    PreparedSummary {
        summary: Summary {
            text: text.into(),
            ..Summary::default()
        },
        info: SummarizerInfo {
            kind: "openai".into(),
            model: Some("m".into()),
            outcome: SummarizerOutcome::Used,
            fallback_reason: None,
            attempts: 1,
            latency_ms: 2_000.0,
            input_tokens: Some(900),
            output_tokens: Some(60),
            output_truncated: false,
        },
    }
}

store_on_both_backends! {
    async fn summary_jobs_are_claimed_once_and_outlive_a_dead_replica(store) {
        let session = store.create_session(&NewSession::default(), "default").await.unwrap().id;
        assert!(store.enqueue_summary_job(&job(session, 0)).await.unwrap());
        assert!(!store.enqueue_summary_job(&job(session, 0)).await.unwrap(), "one job per checkpoint");
        for checkpoint in 1..8 {
            assert!(store.enqueue_summary_job(&job(session, checkpoint * 100)).await.unwrap());
        }
        // Sixteen workers race for eight jobs: each is claimed exactly once.
        let now = 1_000_000;
        let claims: Vec<_> = (0..16).map(|_| {
            let store = store.clone();
            tokio::spawn(async move { store.claim_summary_job(now, 60_000, 3).await.unwrap() })
        }).collect();
        let mut claimed = HashSet::new();
        for claim in claims {
            if let Some(job) = claim.await.unwrap() {
                assert!(claimed.insert(job.checkpoint_seq), "job {} claimed twice", job.checkpoint_seq);
            }
        }
        assert_eq!(claimed.len(), 8);
        assert!(store.claim_summary_job(now + 1, 60_000, 3).await.unwrap().is_none(), "all are held");

        // A replica that dies holding a job loses it when its lease runs out.
        let again = store.claim_summary_job(now + 60_001, 60_000, 3).await.unwrap().expect("re-claimed");
        let held = again.clone();
        assert!(claimed.contains(&again.checkpoint_seq));
        store.finish_summary_job(&held, Some(&prepared("the model's summary"))).await.unwrap();
        match store.summary_job(session, held.checkpoint_seq).await.unwrap() {
            Some((stored, JobStatus::Done(p))) => {
                assert_eq!(stored, held);
                assert_eq!(*p, prepared("the model's summary"));
            }
            other => panic!("{other:?}"),
        }
        // A job is tried at most three times.
        let fresh = store.create_session(&NewSession::default(), "default").await.unwrap().id;
        assert!(store.enqueue_summary_job(&job(fresh, 0)).await.unwrap());
        let mut tries = 0;
        let mut at = now + 10 * 60_001;
        while let Some(claimed) = store.claim_summary_job(at, 60_000, 3).await.unwrap() {
            if claimed.session_id == fresh {
                tries += 1;
            }
            at += 60_001;
        }
        assert_eq!(tries, 3);
        // Deleting the session removes its jobs.
        store.delete_session(session).await.unwrap();
        assert!(store.summary_job(session, 0).await.unwrap().is_none());
    }
}

/// An OpenAI-compatible model that answers only once `gate` lets it, counting its calls.
async fn gated_model(gate: Arc<Semaphore>, calls: Arc<AtomicUsize>) -> String {
    let app = axum::Router::new().fallback(move || {
        let (gate, calls) = (gate.clone(), calls.clone());
        async move {
            calls.fetch_add(1, Ordering::SeqCst);
            let _permit = gate.acquire().await;
            let content =
                json!({"summary": "PREPARED: the user is chasing an outage through the logs.",
                "anchors": {"user_intent": "find the outage", "execution_progress": "reading logs",
                    "key_decision": "N/A", "tried_solution": "N/A", "next_step": "read more logs"}})
                .to_string();
            axum::Json(
                json!({"choices": [{"message": {"role": "assistant", "content": content}}],
                "usage": {"prompt_tokens": 900, "completion_tokens": 60}}),
            )
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

/// ctxd with the OpenAI-compatible model at `base_url` as its summariser.
async fn app_with_model(backend: Backend, base_url: String) -> TestApp {
    TestApp::spawn_with_openai_model(backend, base_url, None, Duration::from_secs(20)).await
}

async fn turn(app: &TestApp, id: &str, n: usize) -> Value {
    let events = json!([
        {"type": "message", "role": "user", "content": format!("turn {n}: check log {n}")},
        {"type": "message", "role": "assistant", "tool_calls": [{"id": format!("c{n}"), "name": "shell",
            "arguments": {"cmd": format!("cat log{n}")}}]},
        {"type": "message", "role": "tool", "tool_call_id": format!("c{n}"),
            "content": format!("log {n}: ").repeat(60)},
        {"type": "message", "role": "assistant", "content": format!("Log {n} shows retries. ").repeat(8)},
    ]);
    assert!(app.append(id, events).await.status.is_success());
    let reply = app
        .post(&format!("/sessions/{id}/compact"), &json!({}))
        .await;
    assert_eq!(reply.status, reqwest::StatusCode::OK, "{}", reply.body);
    reply.body
}

/// A model that answers nothing holds up no compaction (a fold waits for its summary); once it
/// answers, the fold takes the summary it prepared.
async fn a_model_that_does_not_answer_holds_up_no_compaction(backend: Backend) {
    let (gate, calls) = (Arc::new(Semaphore::new(0)), Arc::new(AtomicUsize::new(0)));
    let app = app_with_model(backend, gated_model(gate.clone(), calls.clone()).await).await;
    let id = app
        .create_session(
            json!({"config": {"context_window": 8000, "max_output_tokens": 500,
        "tokenizer": "chars4", "min_tail_messages": 4, "offload_threshold_chars": 100_000}}),
        )
        .await;

    let scraped = crate::metrics::scrape(&app).await;
    // The view grows past the warn and soft tiers while the model answers nothing: every
    // compaction answers, none folds (a fold waits for the prepared summary), none fell back.
    let mut tiers = HashSet::new();
    let mut n = 0;
    loop {
        n += 1;
        let out = turn(&app, &id, n).await;
        let record = &out["record"];
        tiers.insert(record["tier"].as_str().unwrap().to_owned());
        assert!(
            record["summarized_seqs"].as_array().unwrap().is_empty(),
            "folded while preparing: {record}"
        );
        assert!(record.get("error").is_none(), "{record}");
        if record["tier"] == "soft" || record["tier"] == "full" {
            break;
        }
        assert!(n < 40, "the session never reached the soft tier: {tiers:?}");
    }
    assert!(tiers.contains("warn"), "{tiers:?}");
    // The worker takes the job when it is woken or next looks (within a second).
    for _ in 0..200 {
        if calls.load(Ordering::SeqCst) > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "one job, one call, queued at the warn tier"
    );

    // The model answers; once the job has stored its summary, the next compaction folds with it.
    gate.add_permits(100);
    let store: Arc<dyn Store> = app.store.clone();
    let session = uuid::Uuid::parse_str(&id).unwrap();
    for _ in 0..200 {
        if let Some((_, JobStatus::Done(_))) = store.summary_job(session, 0).await.unwrap() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let out = turn(&app, &id, n + 1).await;
    let record = &out["record"];
    assert!(
        !record["summarized_seqs"].as_array().unwrap().is_empty(),
        "{record}"
    );
    // Operators see the job queued and prepared, and the model's outcome.
    let now = crate::metrics::scrape(&app).await;
    let added = |series: &str| {
        crate::metrics::value(&now, series) - crate::metrics::value(&scraped, series)
    };
    assert!(added(r#"ctxd_summary_jobs_total{event="queued"}"#) >= 1.0);
    assert!(added(r#"ctxd_summary_jobs_total{event="prepared"}"#) >= 1.0);
    let used = r#"ctxd_summarizer_outcomes_total{fallback_reason="",kind="openai",outcome="used"}"#;
    assert!(added(used) >= 1.0, "{used}");
    assert_eq!(record["summarizer"]["kind"], "openai", "{record}");
    assert_eq!(
        record["summarizer"]["latency_ms"], 0.0,
        "the agent did not wait for it"
    );
    assert!(
        record["summary_text"]
            .as_str()
            .unwrap()
            .contains("PREPARED"),
        "{record}"
    );
    // The fold asked the model nothing itself; the next fold's summary is being prepared.
    let checkpoint = record["summarized_seqs"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_i64)
        .max()
        .unwrap();
    assert!(
        store
            .summary_job(session, checkpoint)
            .await
            .unwrap()
            .is_some()
            || calls.load(Ordering::SeqCst) == 1,
        "{record}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fold_takes_the_summary_prepared_for_it_sqlite() {
    a_model_that_does_not_answer_holds_up_no_compaction(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fold_takes_the_summary_prepared_for_it_postgres() {
    a_model_that_does_not_answer_holds_up_no_compaction(Backend::Postgres).await;
}

/// The record of a compaction of session `id`, which answers 200.
async fn compact_record(app: &TestApp, id: &str) -> Value {
    let reply = app
        .post(&format!("/sessions/{id}/compact"), &json!({}))
        .await;
    assert_eq!(reply.status, reqwest::StatusCode::OK, "{}", reply.body);
    reply.body["record"].clone()
}

/// Whether the summary job at the session's start is done within ten seconds.
async fn prepared_at_start(store: &dyn Store, session: uuid::Uuid) -> bool {
    for _ in 0..200 {
        if let Some((_, JobStatus::Done(_))) = store.summary_job(session, 0).await.unwrap() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// Appends `events(n)`, `events(n + 1)`, … and compacts after each until a compaction folds:
/// its record.
async fn append_until_folded(
    app: &TestApp,
    id: &str,
    mut n: usize,
    events: impl Fn(usize) -> Value,
) -> Value {
    loop {
        assert!(app.append(id, events(n)).await.status.is_success());
        n += 1;
        let record = compact_record(app, id).await;
        if !record["summarized_seqs"].as_array().unwrap().is_empty() {
            return record;
        }
        assert!(n < 40, "never folded: {record}");
    }
}

/// A fold took the model's summary prepared ahead of it, without waiting for the model.
fn assert_takes_the_prepared_summary(record: &Value) {
    assert_eq!(record["summarizer"]["kind"], "openai", "{record}");
    assert_eq!(record["summarizer"]["latency_ms"], 0.0, "{record}");
    let text = record["summary_text"].as_str().unwrap();
    assert!(text.contains("PREPARED"), "{record}");
}

/// ctxd with a model that answers at once, and an episodic session of an 8,000-token window.
async fn small_episodic_session(backend: Backend) -> (TestApp, String) {
    let (gate, calls) = (Arc::new(Semaphore::new(100)), Arc::new(AtomicUsize::new(0)));
    let app = app_with_model(backend, gated_model(gate, calls).await).await;
    let id = app
        .create_session(
            json!({"config": {"policy": "episodic", "context_window": 8000,
            "max_output_tokens": 500, "tokenizer": "chars4"}}),
        )
        .await;
    (app, id)
}

/// An episodic session whose requests (one pinned by the client) keep the view over its
/// target: an eviction at the trigger waits until the view no longer fits, and the summary of
/// the fold it declined is prepared meanwhile, so the fold that comes takes the model's summary
/// without waiting for it.
async fn a_declined_episodic_fold_is_prepared_for(backend: Backend) {
    let (app, id) = small_episodic_session(backend).await;
    let exchange = |n: usize| {
        json!([
            {"type": "message", "role": "assistant", "tool_calls": [{"id": format!("c{n}"),
                "name": "read_file", "arguments": {"path": format!("src/m{n}.rs")}}]},
            {"type": "message", "role": "tool", "tool_call_id": format!("c{n}"),
                "content": format!("line {n}\n").repeat(150)},
        ])
    };
    let mut events = vec![json!({"type": "message", "role": "user", "content": "Start."})];
    for n in 0..3 {
        events.extend(exchange(n).as_array().unwrap().iter().cloned());
    }
    // About 4,000 tokens that stay verbatim (pinned: not even as head and tail), over the
    // 2,700 the target allows.
    events.push(json!({"type": "message", "role": "user", "pinned": true,
        "content": "The spec, pasted in full. ".repeat(615)}));
    events.push(json!({"type": "message", "role": "user", "content": "Go on."}));
    assert!(app.append(&id, json!(events)).await.status.is_success());

    let session = uuid::Uuid::parse_str(&id).unwrap();
    let store: Arc<dyn Store> = app.store.clone();
    let mut n = 3;
    // Past the trigger, short of the room: the eviction waits, and its fold is queued.
    loop {
        assert!(app.append(&id, exchange(n)).await.status.is_success());
        n += 1;
        let record = compact_record(&app, &id).await;
        assert!(
            record["summarized_seqs"].as_array().unwrap().is_empty(),
            "{record}"
        );
        if record["tier"] == "soft" {
            break;
        }
        assert!(n < 20, "never reached the trigger: {record}");
    }
    assert!(
        prepared_at_start(&*store, session).await,
        "the declined fold's summary was prepared"
    );

    // Once the view no longer fits, the fold takes the prepared summary.
    let record = append_until_folded(&app, &id, n, exchange).await;
    assert_takes_the_prepared_summary(&record);
}

/// An episodic session of conversation (nothing for passes 1 and 2 to archive): near the
/// trigger its compactions are at the warn tier and the summary of the fold the eviction will
/// make is prepared then, so the eviction at the trigger folds with the model's summary at once.
async fn an_episodic_fold_is_prepared_from_the_warn_tier_for(backend: Backend) {
    let (app, id) = small_episodic_session(backend).await;
    let session = uuid::Uuid::parse_str(&id).unwrap();
    let store: Arc<dyn Store> = app.store.clone();
    let say = |n: usize| {
        json!([
            {"type": "message", "role": "user", "content": format!("Question {n}?")},
            {"type": "message", "role": "assistant",
                "content": format!("Answer {n}, at length. ").repeat(40)},
        ])
    };
    let mut n = 0;
    // Up to the warn tier: nothing is evicted, and the fold to come is queued.
    loop {
        assert!(app.append(&id, say(n)).await.status.is_success());
        n += 1;
        let record = compact_record(&app, &id).await;
        assert_eq!(
            record["tier"].as_str().map(|t| t != "soft"),
            Some(true),
            "{record}"
        );
        if record["tier"] == "warn" {
            assert!(
                record["summarized_seqs"].as_array().unwrap().is_empty(),
                "{record}"
            );
            break;
        }
        assert!(n < 30, "never reached the warn tier: {record}");
    }
    assert!(
        prepared_at_start(&*store, session).await,
        "the fold's summary was prepared at the warn tier"
    );

    // The first eviction that folds takes it, at the trigger.
    let record = append_until_folded(&app, &id, n, say).await;
    assert_eq!(record["tier"], "soft", "{record}");
    assert_takes_the_prepared_summary(&record);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_episodic_fold_is_prepared_from_the_warn_tier_for_sqlite() {
    an_episodic_fold_is_prepared_from_the_warn_tier_for(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_episodic_fold_is_prepared_from_the_warn_tier_for_postgres() {
    an_episodic_fold_is_prepared_from_the_warn_tier_for(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declined_episodic_fold_is_prepared_for_sqlite() {
    a_declined_episodic_fold_is_prepared_for(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declined_episodic_fold_is_prepared_for_postgres() {
    a_declined_episodic_fold_is_prepared_for(Backend::Postgres).await;
}
