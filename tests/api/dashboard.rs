//! The dashboard in a real browser (headless Chromium), against a real server with real
//! sessions: what an operator sees on each page, the page following an agent live, and keys.
//! Screenshots go to target/screenshots/.

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::browser::Browser;
use crate::support::{Backend, TestApp};

/// A tool exchange whose result is `lines` lines long.
fn exchange(call: &str, lines: usize) -> Vec<Value> {
    vec![
        json!({"type": "message", "role": "user", "content": format!("Look at {call}.")}),
        json!({"type": "message", "role": "assistant", "content": "",
            "tool_calls": [{"id": call, "name": "read", "arguments": {"path": format!("src/{call}.rs")}}]}),
        json!({"type": "message", "role": "tool", "tool_call_id": call, "name": "read",
            "content": format!("fn {call}() {{ /* line */ }}\n").repeat(lines)}),
        json!({"type": "message", "role": "assistant", "content": format!("{call} reads fine.")}),
    ]
}

/// A session that compacted several times in a small window; its id.
async fn busy_session(app: &TestApp) -> String {
    let id = app
        .create_session(json!({"config": {"context_window": 4096}, "metadata": {"team": "search"}}))
        .await;
    app.append(
        &id,
        json!([{"type": "message", "role": "system", "content": "You are a coding agent."}]),
    )
    .await;
    for turn in 0..24 {
        let reply = app
            .append(
                &id,
                json!(exchange(&format!("c{turn}"), 12 + 9 * (turn % 4))),
            )
            .await;
        assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
        let compacted = app
            .post(&format!("/sessions/{id}/compact"), &json!({}))
            .await;
        assert_eq!(compacted.status, StatusCode::OK, "{}", compacted.body);
    }
    id
}

/// An episodic session with an exploration and an action.
async fn episodic_session(app: &TestApp) -> String {
    let id = app
        .create_session(json!({"config": {"policy": "episodic"}, "metadata": {"team": "infra"}}))
        .await;
    let reply = app.append(&id, json!([
        {"type": "message", "role": "user", "content": "Fix the parser."},
        {"type": "episode_start", "name": "survey", "kind": "exploration", "dependencies": []},
        {"type": "note", "content": "The parser lives in src/parse.rs."},
        {"type": "episode_end", "name": "survey", "conclusion": "the bug is in the tokenizer"},
        {"type": "episode_start", "name": "fix", "kind": "action", "dependencies": ["survey"]},
        {"type": "note", "content": "Patched the tokenizer."},
        {"type": "episode_end", "name": "fix"}
    ])).await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
    id
}

/// Opens a page and checks that nothing in it reads as a script's leftovers.
async fn open(browser: &mut Browser, url: &str) {
    browser.open(url).await;
    let text = browser
        .eval("document.querySelector('main').innerText")
        .await;
    let text = text.as_str().unwrap();
    for word in ["undefined", "NaN", "[object Object]"] {
        assert!(!text.contains(word), "{url} shows {word}: {text}");
    }
    assert!(
        !text.lines().any(|l| l.trim() == "null"),
        "{url} shows null: {text}"
    );
}

fn count(value: &Value) -> u64 {
    value
        .as_u64()
        .unwrap_or_else(|| panic!("not a count: {value}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_sees_every_page_and_follows_a_session_live() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let busy = busy_session(&app).await;
    let episodic = episodic_session(&app).await;
    let records = app
        .get(&format!("/sessions/{busy}/compactions?limit=200"))
        .await
        .body;
    let records = records["compactions"].as_array().unwrap().clone();
    assert!(records.len() >= 2, "{records:?}");
    let context = app
        .get(&format!("/sessions/{busy}/context?limit=100"))
        .await
        .body;

    let mut browser = Browser::start(1280, 900).await;

    // Sessions: both, the most recently active first, each with its tier and last compaction.
    open(&mut browser, &app.url("/ui")).await;
    browser
        .wait_for("[...document.querySelectorAll('#sessions td.tier-cell')].every(td => td.querySelector('.tier'))")
        .await;
    let ids = browser
        .eval("[...document.querySelectorAll('#sessions tbody tr')].map(tr => tr.dataset.session)")
        .await;
    assert_eq!(ids, json!([episodic, busy]), "most recently active first");
    let events = browser
        .eval(&format!(
            "document.querySelector('tr[data-session=\"{busy}\"] td.events').textContent"
        ))
        .await;
    assert_eq!(events.as_str().unwrap(), context["head_seq"].to_string());
    browser
        .wait_for(&format!(
            "document.querySelector('tr[data-session=\"{busy}\"] td.last-compaction a')"
        ))
        .await;
    browser.screenshot("sessions").await;
    // Filtered by a label.
    open(&mut browser, &app.url("/ui?label=team=infra")).await;
    let ids = browser
        .eval("[...document.querySelectorAll('#sessions tbody tr')].map(tr => tr.dataset.session)")
        .await;
    assert_eq!(ids, json!([episodic]));

    // One session: the chart with the window, the thresholds and a mark per compaction.
    open(&mut browser, &app.url(&format!("/ui/sessions/{busy}"))).await;
    let marks = browser
        .eval("document.querySelectorAll('#chart circle.compaction').length")
        .await;
    assert_eq!(count(&marks), records.len() as u64);
    let thresholds = browser
        .eval(
            "[...document.querySelectorAll('#chart line.threshold')].map(l => l.dataset.threshold)",
        )
        .await;
    for name in ["warn", "soft", "full", "emergency"] {
        assert!(
            thresholds.as_array().unwrap().contains(&json!(name)),
            "{thresholds}"
        );
    }
    let hover = browser
        .eval("document.querySelector('#chart circle.compaction title').textContent")
        .await;
    assert!(
        hover.as_str().unwrap().contains("compaction at seq"),
        "{hover}"
    );
    // The items, as the context endpoint has them.
    let rows = browser
        .eval("document.querySelectorAll('#items tbody tr').length")
        .await;
    assert_eq!(
        count(&rows),
        context["items"].as_array().unwrap().len() as u64
    );
    // The view as the model receives it.
    browser
        .wait_for("document.getElementById('view').textContent.includes('\"messages\"')")
        .await;
    let summary = browser
        .eval("document.getElementById('summary').textContent")
        .await;
    assert_eq!(summary, context["summary"]);
    browser.screenshot("session").await;

    // Filtered by state and by reason.
    open(
        &mut browser,
        &app.url(&format!("/ui/sessions/{busy}?state=archived")),
    )
    .await;
    let states = browser
        .eval("[...new Set([...document.querySelectorAll('#items tbody tr')].map(tr => tr.dataset.state))]")
        .await;
    assert_eq!(states, json!(["archived"]));
    open(
        &mut browser,
        &app.url(&format!("/ui/sessions/{busy}?reason=summarized")),
    )
    .await;
    let reasons = browser
        .eval("[...new Set([...document.querySelectorAll('#items tbody tr')].map(tr => tr.dataset.reason))]")
        .await;
    assert_eq!(reasons, json!(["summarized"]));

    // Live: an append while the page is open shows without a reload.
    open(&mut browser, &app.url(&format!("/ui/sessions/{busy}"))).await;
    browser
        .wait_for("document.getElementById('live-status').textContent === 'live'")
        .await;
    let head = context["head_seq"].as_i64().unwrap();
    let reply = app.append(&busy, json!(exchange("late", 3))).await;
    assert_eq!(reply.status, StatusCode::CREATED);
    browser
        .wait_for(&format!(
            "document.getElementById('head-seq').textContent === '{}'",
            head + 4
        ))
        .await;
    let status = browser
        .eval("document.getElementById('live-status').textContent")
        .await;
    assert!(status.as_str().unwrap().contains("4 updates"), "{status}");
    browser.screenshot("session-live").await;

    // One compaction: its record and what it changed, each item linked to its observation.
    let record = records
        .iter()
        .find(|r| !r["summarized_seqs"].as_array().unwrap().is_empty())
        .expect("a compaction that summarised");
    let cid = record["id"].as_str().unwrap();
    open(
        &mut browser,
        &app.url(&format!("/ui/sessions/{busy}/compactions/{cid}")),
    )
    .await;
    let summarized = browser
        .eval("document.querySelectorAll('#diff-summarized a').length")
        .await;
    assert_eq!(
        count(&summarized),
        record["summarized_seqs"].as_array().unwrap().len() as u64
    );
    let offloaded = browser
        .eval("document.querySelectorAll('#diff-offloaded tbody tr').length")
        .await;
    assert_eq!(
        count(&offloaded),
        record["offloaded"].as_array().unwrap().len() as u64
    );
    let tier = browser
        .eval("document.querySelector('#record .tier').textContent")
        .await;
    assert_eq!(tier, record["tier"]);
    browser.screenshot("compaction").await;
    // Following an item's link shows its observation.
    let first = record["summarized_seqs"][0].as_i64().unwrap();
    let href = browser
        .eval("document.querySelector('#diff-summarized a').getAttribute('href')")
        .await;
    assert_eq!(
        href,
        json!(format!("/ui/sessions/{busy}/observations/{first}"))
    );
    open(
        &mut browser,
        &app.url(&format!("/ui/sessions/{busy}/observations/{first}")),
    )
    .await;
    let observed = app
        .get(&format!(
            "/sessions/{busy}/observations/{first}?limit=20000"
        ))
        .await
        .body;
    let shown = browser
        .eval("document.getElementById('observation').textContent")
        .await;
    assert_eq!(shown, observed["content"]);

    // Episodes, for the session that has them.
    open(&mut browser, &app.url(&format!("/ui/sessions/{episodic}"))).await;
    let episodes = browser
        .eval("[...document.querySelectorAll('#episodes tbody tr')].map(tr => tr.cells[0].textContent)")
        .await;
    assert_eq!(episodes, json!(["survey", "fix"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_keys_the_dashboard_takes_an_operator_key_and_shows_its_tenant_only() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let ours = busy_session(&app).await;
    // Keys on: an admin makes a tenant with a session of its own, and an operator key for
    // the default tenant.
    let admin = app
        .post("/admin/keys", &json!({"role": "admin"}))
        .await
        .body["key_secret"]
        .as_str()
        .unwrap()
        .to_owned();
    let send = |body: Value, path: &str, key: &str| {
        app.send(app.client.post(app.url(path)).bearer_auth(key).json(&body))
    };
    send(json!({"id": "other"}), "/admin/tenants", &admin).await;
    let other_agent = send(
        json!({"tenant": "other", "role": "agent"}),
        "/admin/keys",
        &admin,
    )
    .await
    .body["key_secret"]
        .as_str()
        .unwrap()
        .to_owned();
    let theirs = send(json!({}), "/sessions", &other_agent).await.body["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let operator = send(json!({"role": "operator"}), "/admin/keys", &admin)
        .await
        .body["key_secret"]
        .as_str()
        .unwrap()
        .to_owned();

    let mut browser = Browser::start(1280, 800).await;
    open(&mut browser, &app.url("/ui")).await;
    browser
        .wait_for("document.getElementById('needs-key')")
        .await;
    // The operator types the key.
    browser
        .eval(&format!(
            "document.getElementById('key').value = '{operator}'; \
             document.getElementById('key-form').requestSubmit(); true"
        ))
        .await;
    browser
        .wait_for("document.querySelectorAll('#sessions tbody tr').length > 0")
        .await;
    let ids = browser
        .eval("[...document.querySelectorAll('#sessions tbody tr')].map(tr => tr.dataset.session)")
        .await;
    assert_eq!(ids, json!([ours]));
    // The key stays for the tab: another page reads with it; the other tenant's session is
    // not there.
    open(&mut browser, &app.url(&format!("/ui/sessions/{ours}"))).await;
    browser.wait_for("document.querySelector('#chart')").await;
    open(&mut browser, &app.url(&format!("/ui/sessions/{theirs}"))).await;
    let shown = browser
        .eval("document.querySelector('main').textContent")
        .await;
    assert!(
        shown.as_str().unwrap().contains("does not exist"),
        "{shown}"
    );
}

/// The event stream over plain HTTP: appends and compactions as they happen, resumable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_event_stream_sends_appends_and_compactions_and_resumes() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let id = app
        .create_session(json!({"config": {"context_window": 4096}}))
        .await;
    let mut stream = app
        .client
        .get(app.url(&format!("/sessions/{id}/events/stream")))
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), StatusCode::OK);
    assert!(stream.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    for call in ["a", "b", "c"] {
        app.append(&id, json!(exchange(call, 40))).await;
    }
    let forced = app
        .post(
            &format!("/sessions/{id}/compact"),
            &json!({"mode": "force"}),
        )
        .await;
    assert_eq!(forced.body["persisted"], true, "{}", forced.body);

    let mut text = String::new();
    let frames = loop {
        let chunk = tokio::time::timeout(std::time::Duration::from_secs(10), stream.chunk())
            .await
            .expect("the stream sends within 10 s")
            .unwrap()
            .expect("the stream stays open");
        text.push_str(&String::from_utf8_lossy(&chunk));
        let frames: Vec<&str> = text
            .split("\n\n")
            .filter(|f| f.contains("event:"))
            .collect();
        if frames.len() >= 13 {
            break frames.into_iter().map(str::to_owned).collect::<Vec<_>>();
        }
    };
    let field = |frame: &str, name: &str| {
        frame
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name}:")))
            .map(|v| v.trim().to_owned())
            .unwrap_or_default()
    };
    let kinds: Vec<String> = frames.iter().map(|f| field(f, "event")).collect();
    let mut expected = vec!["append"; 12];
    expected.push("compaction");
    assert_eq!(kinds, expected);
    let seqs: Vec<i64> = frames[..12]
        .iter()
        .map(|f| {
            serde_json::from_str::<Value>(&field(f, "data")).unwrap()["seq"]
                .as_i64()
                .unwrap()
        })
        .collect();
    assert_eq!(seqs, (1..=12).collect::<Vec<_>>());
    let compaction: Value = serde_json::from_str(&field(&frames[12], "data")).unwrap();
    assert_eq!(compaction["trigger"], "manual");
    drop(stream);

    // Resumed after the tenth append: the rest, and nothing before.
    let cursor = field(&frames[9], "id");
    let mut resumed = app
        .client
        .get(app.url(&format!("/sessions/{id}/events/stream")))
        .header("last-event-id", &cursor)
        .send()
        .await
        .unwrap();
    let mut text = String::new();
    while text.split("\n\n").filter(|f| f.contains("event:")).count() < 3 {
        let chunk = tokio::time::timeout(std::time::Duration::from_secs(10), resumed.chunk())
            .await
            .expect("the resumed stream sends within 10 s")
            .unwrap()
            .unwrap();
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    let kinds: Vec<String> = text
        .split("\n\n")
        .filter(|f| f.contains("event:"))
        .map(|f| field(f, "event"))
        .collect();
    assert_eq!(kinds, ["append", "append", "compaction"]);

    // A cursor it never sent is a 400; a missing session a 404.
    let bad = app
        .send(
            app.client
                .get(app.url(&format!("/sessions/{id}/events/stream?after=nope"))),
        )
        .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    let missing = app
        .send(
            app.client
                .get(app.url(&format!("/sessions/{}/events/stream", uuid::Uuid::now_v7()))),
        )
        .await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
}
