//! `POST /sessions/{id}/turn`: committed real-shaped sessions (tests/fixtures/turns: a Claude
//! Code session with thinking blocks and empty results, an Agents-SDK-like Responses session
//! with reasoning items, a computer-use session with screenshots, a Codex-like session with
//! freeform `apply_patch` calls) replayed turn by turn as an
//! agent would send them — its full history, the last view plus the new messages, or only the
//! new messages — with every view checked against the providers' own SDK types.

use ctxd::engine::validate::validate_anthropic;
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::on_both_backends;
use crate::providers::check_with_the_sdks;
use crate::support::TestApp as App;

fn fixture(name: &str) -> Value {
    let path = format!(
        "{}/tests/fixtures/turns/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_slice(&std::fs::read(&path).expect("fixture")).expect("fixture JSON")
}

/// How an agent sends its conversation.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Mode {
    FullHistory,
    LastViewPlusNew,
    OnlyNew,
}

/// Where the model's output starts: each place the agent calls ctxd for the next view.
fn boundaries(format: &str, messages: &[Value]) -> Vec<usize> {
    let assistant_side = |m: &Value| match format {
        "openai_responses" => {
            matches!(
                m["type"].as_str(),
                Some("reasoning" | "function_call" | "custom_tool_call")
            ) || m["role"] == "assistant"
        }
        _ => m["role"] == "assistant",
    };
    let mut cuts: Vec<usize> = (1..messages.len())
        .filter(|&i| assistant_side(&messages[i]) && !assistant_side(&messages[i - 1]))
        .collect();
    cuts.push(messages.len());
    cuts
}

/// The list of the view an answer carries (`messages`, or Responses' `input`).
fn view_list(format: &str, view: &Value) -> Vec<Value> {
    let key = if format == "openai_responses" {
        "input"
    } else {
        "messages"
    };
    view[key].as_array().cloned().unwrap_or_default()
}

struct Replay {
    session: String,
    /// Every view answered, as {format, view}.
    views: Vec<Value>,
    answers: Vec<Value>,
}

/// Replays `fixture` through /turn as an agent in `mode` would, with a window small enough that
/// the session is compacted on the way; each call after the first reports the provider's
/// usage for the previous view (a tenth over ctxd's count).
async fn replay(app: &App, fixture: &Value, mode: Mode, window: u32) -> Replay {
    let format = fixture["format"].as_str().expect("format");
    let messages = fixture["messages"].as_array().expect("messages");
    let session = app
        .create_session(
            json!({"config": {"context_window": window, "max_output_tokens": 1000,
            "tokenizer": "chars4", "min_tail_messages": 6}}),
        )
        .await;
    let mut replay = Replay {
        session: session.clone(),
        views: Vec::new(),
        answers: Vec::new(),
    };
    let mut previous = 0;
    let mut last: Option<Value> = None;
    for cut in boundaries(format, messages) {
        let new = &messages[previous..cut];
        let sent: Vec<Value> = match (mode, &last) {
            (Mode::FullHistory, _) => messages[..cut].to_vec(),
            (Mode::LastViewPlusNew, Some(answer)) => {
                let mut list = view_list(format, &answer["view"]);
                list.extend_from_slice(new);
                list
            }
            (Mode::OnlyNew | Mode::LastViewPlusNew, _) => new.to_vec(),
        };
        let mut body = json!({"format": format, "messages": sent, "tools": fixture["tools"]});
        if let Some(system) = fixture.get("system") {
            body["system"] = system.clone();
        }
        if let Some(answer) = &last {
            let ours = answer["record"]["input_tokens_estimate"]
                .as_i64()
                .expect("estimate");
            let key = if format == "openai" {
                "prompt_tokens"
            } else {
                "input_tokens"
            };
            body["usage"] = json!({ key: ours + ours / 10, "output_tokens": 50 });
        }
        let reply = app.post(&format!("/sessions/{session}/turn"), &body).await;
        assert_eq!(
            reply.status,
            StatusCode::OK,
            "{mode:?} at {cut}: {}",
            reply.body
        );
        replay
            .views
            .push(json!({"format": format, "view": reply.body["view"]}));
        replay.answers.push(reply.body.clone());
        last = Some(reply.body);
        previous = cut;
    }
    replay
}

/// What an event says, without where or when it was stored.
fn said(events: &[Value]) -> Vec<Value> {
    events
        .iter()
        .map(|e| {
            let mut e = e.clone();
            let object = e.as_object_mut().expect("event");
            for key in ["seq", "id", "created_at", "tokens"] {
                object.remove(key);
            }
            e
        })
        .collect()
}

async fn replay_in_every_mode(app: &App, name: &str, window: u32) -> Vec<Replay> {
    let fixture = fixture(name);
    let mut replays = Vec::new();
    for mode in [Mode::FullHistory, Mode::LastViewPlusNew, Mode::OnlyNew] {
        replays.push(replay(app, &fixture, mode, window).await);
    }
    // Whichever way the agent sends its conversation, the session holds it exactly once.
    let logs = [
        said(&app.all_events(&replays[0].session).await),
        said(&app.all_events(&replays[1].session).await),
        said(&app.all_events(&replays[2].session).await),
    ];
    assert!(!logs[0].is_empty());
    assert_eq!(logs[0], logs[1], "{name}: last view plus new");
    assert_eq!(logs[0], logs[2], "{name}: only new");
    let mut views: Vec<Value> = replays.iter().flat_map(|r| r.views.clone()).collect();
    // The same sessions rendered in every other format: what one provider sent, another takes.
    for replay in &replays {
        for format in ["openai", "openai_responses", "anthropic"] {
            let path = format!("/sessions/{}/compact", replay.session);
            let reply = app
                .post(&path, &json!({"format": format, "mode": "dry_run"}))
                .await;
            assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
            views.push(json!({"format": format, "view": reply.body["view"]}));
        }
    }
    let report = check_with_the_sdks(&views).unwrap_or_else(|report| panic!("{name}: {report}"));
    assert!(
        report.contains(&format!("{} views checked, 0 failed", views.len())),
        "{report}"
    );
    let acted = replays[0]
        .answers
        .iter()
        .filter(|a| a["record"]["acted"] == true)
        .count();
    assert!(acted > 0, "{name}: the window is small enough to compact");
    replays
}

/// Thinking blocks (Anthropic) or reasoning items (Responses) in a view: (before, after) the
/// last message the user wrote.
fn reasoning_around_last_user_turn(format: &str, view: &Value) -> (usize, usize) {
    let list = view_list(format, view);
    let user_wrote = |m: &Value| {
        m["role"] == "user"
            && match &m["content"] {
                Value::String(_) => true,
                Value::Array(blocks) => blocks.iter().any(|b| b["type"] != "tool_result"),
                _ => false,
            }
    };
    let last_user = list.iter().rposition(user_wrote).unwrap_or(0);
    let reasoning = |m: &Value| -> usize {
        if format == "openai_responses" {
            usize::from(m["type"] == "reasoning")
        } else {
            m["content"].as_array().map_or(0, |blocks| {
                blocks
                    .iter()
                    .filter(|b| {
                        matches!(b["type"].as_str(), Some("thinking" | "redacted_thinking"))
                    })
                    .count()
            })
        }
    };
    let before = list[..last_user].iter().map(reasoning).sum();
    let after = list[last_user..].iter().map(reasoning).sum();
    (before, after)
}

on_both_backends! {
    async fn a_claude_code_session_with_thinking_replays_through_turn(app) {
        let replays = replay_in_every_mode(&app, "claude_code_thinking", 16_000).await;
        // Thinking goes back only for the current tool loop, and goes back there.
        let mut sent = 0;
        for answer in &replays[0].answers {
            let (before, after) = reasoning_around_last_user_turn("anthropic", &answer["view"]);
            assert_eq!(before, 0, "no thinking before the last user turn");
            sent += after;
            // One cache breakpoint in the messages: the last message's last block, never a
            // thinking block.
            let messages = answer["view"]["messages"].as_array().unwrap();
            let marked: Vec<(usize, &Value)> = messages
                .iter()
                .enumerate()
                .flat_map(|(i, m)| m["content"].as_array().unwrap().iter().map(move |b| (i, b)))
                .filter(|(_, b)| b.get("cache_control").is_some())
                .collect();
            let last = messages.len() - 1;
            assert_eq!(marked.len(), 1, "{marked:?}");
            assert_eq!(marked.last().unwrap().0, last);
            assert_eq!(Some(marked.last().unwrap().1), messages[last]["content"].as_array().unwrap().last());
            for (_, block) in &marked {
                assert_eq!(block["cache_control"], json!({"type": "ephemeral"}));
                assert!(!block["type"].as_str().unwrap().contains("thinking"), "{block}");
            }
        }
        assert!(sent > 0, "thinking blocks of the current loop are sent back");
        // The last call again appends nothing: it is recognised as a retry.
        let fixture = fixture("claude_code_thinking");
        let messages = fixture["messages"].as_array().unwrap();
        let path = format!("/sessions/{}/turn", replays[0].session);
        let again = app.post(&path, &json!({"format": "anthropic", "messages": messages})).await;
        assert_eq!(again.status, StatusCode::OK, "{}", again.body);
        assert_eq!(again.body["replayed"], true);
        assert_eq!(again.body["appended"], replays[0].answers.last().unwrap()["appended"]);
        // An older history holds nothing new.
        let older = json!({"format": "anthropic", "messages": messages[..50]});
        let reply = app.post(&path, &older).await;
        assert_eq!(reply.body["appended"], json!([]), "{}", reply.body);
        assert_eq!(reply.body["replayed"], false);
        let events = app.all_events(&replays[0].session).await.len();
        assert_eq!(events, app.all_events(&replays[2].session).await.len());
    }
}

on_both_backends! {
    async fn an_agents_sdk_responses_session_replays_through_turn(app) {
        let replays = replay_in_every_mode(&app, "agents_sdk_responses", 6_000).await;
        let mut sent = 0;
        for answer in &replays[0].answers {
            let (before, after) = reasoning_around_last_user_turn("openai_responses", &answer["view"]);
            assert_eq!(before, 0, "no reasoning item before the last user turn");
            sent += after;
        }
        assert!(sent > 0, "reasoning items of the current loop are sent back");
        // The calibration follows the usage reported (a tenth over ctxd's count).
        let calibrated = replays[0].answers.last().unwrap()["calibration"].as_f64().unwrap();
        assert!((calibrated - 1.1).abs() < 0.02, "calibration {calibrated}");
    }
}

on_both_backends! {
    async fn a_codex_session_with_freeform_tool_calls_replays_through_turn(app) {
        let replays = replay_in_every_mode(&app, "codex_custom_tools", 4_000).await;
        // A freeform call comes back as the custom tool call it was, answered by a custom tool
        // call output: its input the patch text as sent or, once archived, a note naming the
        // file it patches and the reference to recall it by.
        let fixture = fixture("codex_custom_tools");
        let sent: Vec<&Value> = fixture["messages"].as_array().unwrap().iter().collect();
        let patch_of = |id: &Value| {
            sent.iter()
                .find(|m| m["type"] == "custom_tool_call" && m["call_id"] == *id)
                .map(|m| m["input"].as_str().unwrap())
                .expect("a patch of the session")
        };
        let (mut whole, mut archived) = (0, 0);
        for answer in &replays[0].answers {
            let items = view_list("openai_responses", &answer["view"]);
            for call in items.iter().filter(|i| i["type"] == "custom_tool_call") {
                assert_eq!(call["name"], "apply_patch");
                let patch = patch_of(&call["call_id"]);
                let input = call["input"].as_str().unwrap();
                if input == patch {
                    whole += 1;
                } else {
                    let file = patch.lines().nth(1).unwrap().trim_start_matches("*** Update File: ");
                    assert!(input.contains("archived") && input.contains(file), "{input}");
                    assert!(input.contains("observation://"), "{input}");
                    archived += 1;
                }
                let answered = items.iter().find(|i| {
                    i["call_id"] == call["call_id"] && i["type"] != "custom_tool_call"
                });
                assert_eq!(answered.unwrap()["type"], "custom_tool_call_output");
            }
        }
        assert!(whole > 0 && archived > 0, "{whole} whole, {archived} archived");
        // The log holds each as a custom call, the patch text as its arguments' input.
        let events = app.all_events(&replays[0].session).await;
        let stored: Vec<Value> = events
            .iter()
            .flat_map(|e| e["tool_calls"].as_array().cloned().unwrap_or_default())
            .filter(|c| c["kind"] == "custom")
            .collect();
        assert_eq!(stored.len(), sent.iter().filter(|m| m["type"] == "custom_tool_call").count());
        for call in &stored {
            let arguments: Value = serde_json::from_str(call["arguments"].as_str().unwrap()).unwrap();
            assert_eq!(arguments["input"], patch_of(&call["id"]));
        }
    }
}

on_both_backends! {
    async fn openai_shell_and_apply_patch_calls_replay_through_turn(app) {
        let replays = replay_in_every_mode(&app, "shell_and_apply_patch", 4_000).await;
        let fixture = fixture("shell_and_apply_patch");
        let sent: Vec<&Value> = fixture["messages"].as_array().unwrap().iter().collect();
        let sent_item = |kind: &str, id: &Value| {
            sent.iter()
                .find(|m| m["type"] == kind && m["call_id"] == *id)
                .copied()
                .unwrap_or_else(|| panic!("a {kind} {id} of the session"))
        };
        // Each call comes back as the built-in tool's own item, answered by its own output: a
        // shell call with its commands, a failed run's outcome as the exit code it had.
        let (mut shell, mut patches, mut failed) = (0, 0, 0);
        for answer in &replays[0].answers {
            let items = view_list("openai_responses", &answer["view"]);
            for call in items.iter().filter(|i| i["type"] == "shell_call" || i["type"] == "apply_patch_call") {
                let kind = call["type"].as_str().unwrap();
                let sent_call = sent_item(kind, &call["call_id"]);
                let output = items
                    .iter()
                    .find(|i| i["call_id"] == call["call_id"] && i["type"] != call["type"])
                    .expect("an answered call");
                assert_eq!(output["type"], format!("{kind}_output"));
                if kind == "shell_call" {
                    shell += 1;
                    assert_eq!(call["action"]["commands"], sent_call["action"]["commands"]);
                    let sent_output = sent_item("shell_call_output", &call["call_id"]);
                    let outcome = &output["output"][0]["outcome"];
                    assert_eq!(*outcome, sent_output["output"][0]["outcome"], "{output}");
                    failed += usize::from(outcome["exit_code"] != 0);
                } else {
                    patches += 1;
                    assert_eq!(call["operation"]["path"], sent_call["operation"]["path"]);
                    assert_eq!(output["status"], "completed");
                }
            }
        }
        assert!(shell > 0 && patches > 0 && failed > 0, "{shell} shell, {patches} patches, {failed} failed");
        // The log holds them as calls of their kind, the action or operation as arguments, and
        // a failed run's result marked failed, naming its exit code.
        let events = app.all_events(&replays[0].session).await;
        let calls: Vec<Value> = events
            .iter()
            .flat_map(|e| e["tool_calls"].as_array().cloned().unwrap_or_default())
            .collect();
        for call in &calls {
            let kind = call["kind"].as_str().expect("a call of a built-in tool");
            let item = sent_item(&format!("{kind}_call"), &call["id"]);
            let arguments: Value = serde_json::from_str(call["arguments"].as_str().unwrap()).unwrap();
            let key = if kind == "shell" { "action" } else { "operation" };
            assert_eq!(arguments, item[key]);
        }
        let failures: Vec<&Value> = events.iter().filter(|e| e["is_error"] == true).collect();
        assert_eq!(failures.len(), 2, "one failing test run a task");
        for failure in failures {
            let text = failure["content"].as_str().unwrap();
            assert!(text.contains("TypeError: listEmployees") && text.ends_with("[exit code 1]"), "{text}");
        }
    }
}

on_both_backends! {
    async fn a_computer_use_session_offloads_old_screenshots_first(app) {
        let replays = replay_in_every_mode(&app, "computer_use_screenshots", 12_000).await;
        let last = &replays[0].answers.last().unwrap()["view"];
        let text = last.to_string();
        let images = text.matches("\"type\":\"image\"").count();
        assert!(images > 0, "the newest screenshots are sent");
        assert!(images < 15, "old screenshots are offloaded: {images} images");
        assert!(text.contains("image image/png 1280x800 offloaded"), "{text:.2000}");
        // Chat completions take images only from the user: a result's screenshot follows it.
        let path = format!("/sessions/{}/compact", replays[0].session);
        let chat = app.post(&path, &json!({"format": "openai", "mode": "dry_run"})).await.body;
        let chat = chat["view"].to_string();
        assert!(chat.contains("Images returned by tool call") && chat.contains("image_url"), "{chat:.2000}");
        let context = app.get(&format!("/sessions/{}/context?limit=200", replays[0].session)).await;
        let reasons = context.body.to_string();
        assert!(reasons.contains("offloaded_image"), "the context says why");
    }
}

on_both_backends! {
    async fn a_turn_is_appended_once_and_a_diverging_history_is_refused(app) {
        let session = app.create_session(json!({})).await;
        let path = format!("/sessions/{session}/turn");
        let first = json!({"format": "openai", "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Make the build pass."}]});
        let reply = app.post(&path, &first).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
        assert_eq!(reply.body["appended"], json!([1, 2]));
        assert_eq!(reply.body["replayed"], false);
        assert_eq!(reply.body["view"]["messages"].as_array().unwrap().len(), 2);

        // Only new messages, sent twice: appended once.
        let new = json!({"format": "openai", "messages": [
            {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
                "function": {"name": "shell", "arguments": "{\"cmd\":\"make\"}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": ""}]});
        let once = app.post(&path, &new).await;
        assert_eq!(once.body["appended"], json!([3, 4]), "{}", once.body);
        let again = app.post(&path, &new).await;
        assert_eq!(again.status, StatusCode::OK, "{}", again.body);
        assert_eq!(again.body["appended"], json!([3, 4]));
        assert_eq!(again.body["replayed"], true);
        assert_eq!(app.all_events(&session).await.len(), 4);

        // The full history with an earlier message changed: 409 naming it, nothing appended.
        let mut history = first["messages"].as_array().unwrap().clone();
        history.extend(new["messages"].as_array().unwrap().clone());
        history[1]["content"] = json!("Make the tests pass.");
        history.push(json!({"role": "user", "content": "thanks"}));
        let diverged = app.post(&path, &json!({"format": "openai", "messages": history})).await;
        assert_eq!(diverged.status, StatusCode::CONFLICT, "{}", diverged.body);
        assert!(diverged.body["detail"].as_str().unwrap().contains("messages[1]"), "{}", diverged.body);
        assert_eq!(app.all_events(&session).await.len(), 4);

        // A message ctxd cannot read is named, and nothing is appended.
        let unreadable = json!({"format": "openai", "messages": [
            {"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}]});
        let refused = app.post(&path, &unreadable).await;
        assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(refused.body["errors"][0]["field"], "messages[0].content[0].type");
        // So is a built-in tool's call or output that does not hold what the tool takes.
        let shell = json!({"format": "openai_responses", "messages": [
            {"type": "shell_call", "call_id": "s1", "action": {"commands": []}},
            {"type": "shell_call_output", "call_id": "s1",
             "output": [{"stdout": "", "stderr": "", "outcome": {"type": "crash"}}]}]});
        let refused = app.post(&path, &shell).await;
        assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY);
        let fields: Vec<&str> = refused.body["errors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["field"].as_str().unwrap())
            .collect();
        assert_eq!(
            fields,
            ["messages[1].output[0].outcome", "messages[0].tool_calls[0].arguments"],
            "{}",
            refused.body
        );
        // So is a message that breaks a rule of the log: a result that answers no call.
        let orphan = json!({"format": "openai", "messages": [{"role": "user", "content": "ok"},
            {"role": "tool", "tool_call_id": "nope", "content": "x"}]});
        let refused = app.post(&path, &orphan).await;
        assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", refused.body);
        assert_eq!(refused.body["errors"][0]["field"], "messages[1].tool_call_id", "{}", refused.body);
        // So is a usage that cannot be this view's.
        let absurd = json!({"format": "openai", "messages": [{"role": "user", "content": "go"}],
            "usage": {"prompt_tokens": 1_000_000}});
        let refused = app.post(&path, &absurd).await;
        assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", refused.body);
        assert_eq!(refused.body["errors"][0]["field"], "usage.input_tokens");
        assert_eq!(app.all_events(&session).await.len(), 4);
        let missing = app.post("/sessions/01936f4e-8a7b-7c3d-9e2f-4a5b6c7d8e9f/turn", &first).await;
        assert_eq!(missing.status, StatusCode::NOT_FOUND);
    }
}

on_both_backends! {
    /// Claude Code sends its system prompt as text blocks, the last marked for the cache. The
    /// view gives it back as one text block marked for the prompt cache (a compaction rewrites
    /// the messages after it, never it), and that view's `system` sent back on the next turn is
    /// the session's system prompt, not a new one.
    async fn an_anthropic_system_prompt_comes_back_as_one_block_marked_for_the_cache(app) {
        let session = app.create_session(json!({})).await;
        let path = format!("/sessions/{session}/turn");
        let system = json!([
            {"type": "text", "text": "You are Claude Code."},
            {"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}]);
        let user = json!({"role": "user", "content": "Fix the build."});
        let first = json!({"format": "anthropic", "system": system, "messages": [user]});
        let reply = app.post(&path, &first).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
        assert_eq!(reply.body["appended"], json!([1, 2]));
        let view = &reply.body["view"];
        assert_eq!(
            view["system"],
            json!([{"type": "text", "text": "You are Claude Code.\n\nBe brief.",
                    "cache_control": {"type": "ephemeral"}}]),
            "{view}"
        );
        validate_anthropic(view).unwrap();

        let answer = json!({"role": "assistant", "content": [{"type": "text", "text": "On it."}]});
        let mut messages = view["messages"].as_array().unwrap().clone();
        messages.push(answer);
        let next = json!({"format": "anthropic", "system": view["system"], "messages": messages});
        let reply = app.post(&path, &next).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
        assert_eq!(reply.body["appended"], json!([3]), "{}", reply.body);
        assert_eq!(reply.body["view"]["system"], view["system"]);
        assert_eq!(app.all_events(&session).await.len(), 3);
    }
}

on_both_backends! {
    async fn a_system_prompt_of_most_of_a_small_window_comes_back_as_head_and_tail(app) {
        let session = app.create_session(json!({"config": {"context_window": 8000,
            "max_output_tokens": 1000, "tokenizer": "chars4"}})).await;
        let path = format!("/sessions/{session}/turn");
        let mut prompt: String = (0..40)
            .map(|i| format!("Rule {i}: never write outside the workspace.\n"))
            .collect();
        prompt.extend((0..400).map(|i| format!("- skill-{i}: drafts notes (file: skills/{i}/SKILL.md)\n")));
        prompt.push_str("Closing rule: answer in English.");
        let user = json!({"role": "user", "content": "Fix the build."});
        let first = json!({"format": "anthropic", "system": prompt, "messages": [user]});
        let reply = app.post(&path, &first).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
        let view = &reply.body["view"];
        let shown = view["system"][0]["text"].as_str().unwrap();
        assert!(shown.starts_with("Rule 0: never write") && shown.ends_with("answer in English."),
                "{shown}");
        assert!(shown.contains("observation://1?offset="), "{shown}");
        // At most `system_max_share` (a quarter) of the 7,000 tokens of room, at 4 characters
        // a token.
        assert!(shown.len() <= 7_000 / 4 * 4, "{} of {}", shown.len(), prompt.len());
        assert_eq!(reply.body["record"]["offloaded"][0]["seq"], 1, "{}", reply.body["record"]);
        validate_anthropic(view).unwrap();
        let items = app.get(&format!("/sessions/{session}/context")).await.body;
        let item = &items["items"][0];
        assert_eq!((item["reason"].as_str(), item["projection"].as_str()),
                   (Some("offloaded_large_system_prompt"), Some("preview")), "{item}");

        // The view sent back as it came, the system prompt cut, is the session's.
        let mut messages = view["messages"].as_array().unwrap().clone();
        messages.push(json!({"role": "assistant", "content": "On it."}));
        let next = json!({"format": "anthropic", "system": view["system"], "messages": messages});
        let reply = app.post(&path, &next).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
        assert_eq!(reply.body["appended"], json!([3]), "{}", reply.body);
        assert_eq!(reply.body["view"]["system"], view["system"]);
        // And so is the whole prompt the agent holds.
        let mut messages = vec![user, json!({"role": "assistant", "content": "On it."})];
        messages.push(json!({"role": "user", "content": "Now the docs."}));
        let full = json!({"format": "anthropic", "system": prompt, "messages": messages});
        let reply = app.post(&path, &full).await;
        assert_eq!(reply.body["appended"], json!([4]), "{}", reply.body);
    }
}

on_both_backends! {
    /// A user who pastes a document larger than the room: the view shows the request as its
    /// head and tail with its reference (no emergency), and the next turn is accepted both as
    /// the view showed it and as the agent holds it whole.
    async fn a_request_larger_than_the_room_comes_back_as_head_and_tail(app) {
        let session = app.create_session(json!({"config": {"context_window": 8000,
            "max_output_tokens": 1000, "tokenizer": "chars4"}})).await;
        let path = format!("/sessions/{session}/turn");
        let mut paste = String::from("Review this log:\n");
        paste.extend((0..700).map(|i| format!("line {i}: the service answered in budget\n")));
        paste.push_str("Which lines are slow?");
        let system = json!({"role": "system", "content": "Be brief."});
        let user = json!({"role": "user", "content": paste});
        let reply = app.post(&path, &json!({"messages": [system, user]})).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
        let record = &reply.body["record"];
        assert_ne!(record["tier"], "emergency", "{record}");
        assert_eq!(record["offloaded"][0]["seq"], 2, "{record}");
        let view = &reply.body["view"];
        let shown = view["messages"][1]["content"].as_str().unwrap();
        assert!(shown.starts_with("Review this log:\nline 0:") && shown.ends_with("slow?"),
                "{shown}");
        assert!(shown.contains("observation://2?offset="), "{shown}");
        assert!(shown.len() < paste.len() / 2, "{} of {}", shown.len(), paste.len());
        ctxd::engine::validate::validate_openai(view).unwrap();
        let items = app.get(&format!("/sessions/{session}/context")).await.body;
        let item = &items["items"][1];
        assert_eq!((item["reason"].as_str(), item["projection"].as_str()),
                   (Some("offloaded_large_request"), Some("preview")), "{item}");

        // The view sent back as it came, the request cut, is the session's conversation.
        let answer = json!({"role": "assistant", "content": "Line 3."});
        let mut messages = view["messages"].as_array().unwrap().clone();
        messages.push(answer.clone());
        let reply = app.post(&path, &json!({"messages": messages})).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
        assert_eq!(reply.body["appended"], json!([3]), "{}", reply.body);
        // And so is the whole history the agent holds.
        let full = json!({"messages": [system, user, answer,
            {"role": "user", "content": "Thanks."}]});
        let reply = app.post(&path, &full).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
        assert_eq!(reply.body["appended"], json!([4]), "{}", reply.body);
    }
}

on_both_backends! {
    async fn turns_see_what_other_replicas_and_paths_appended(app) {
        let session = app.create_session(json!({})).await;
        let path = format!("/sessions/{session}/turn");
        let other = app.replica().await;
        let system = json!({"role": "system", "content": "Be brief."});
        let user = json!({"role": "user", "content": "Fix the build."});
        let reply = app.post(&path, &json!({"messages": [system, user]})).await;
        assert_eq!(reply.body["appended"], json!([1, 2]), "{}", reply.body);

        // Another replica appends through the log directly.
        let elsewhere = json!({"type": "message", "role": "user", "content": "Also the docs."});
        let appended = app.client.post(format!("{other}/sessions/{session}/events"))
            .json(&json!({"events": [{"type": "note", "content": "Keep it small."}, elsewhere]}))
            .send().await.unwrap();
        assert_eq!(appended.status(), StatusCode::CREATED);

        // This replica's history without that message diverges from the stored conversation.
        let answer = json!({"role": "assistant", "content": "On it."});
        let stale = app.post(&path, &json!({"messages": [system, user, answer]})).await;
        assert_eq!(stale.status, StatusCode::CONFLICT, "{}", stale.body);
        assert!(stale.body["detail"].as_str().unwrap().contains("messages[2]"), "{}", stale.body);
        let full = json!({"messages": [system, user,
            {"role": "user", "content": "Also the docs."}, answer]});
        let reply = app.post(&path, &full).await;
        assert_eq!(reply.body["appended"], json!([5]), "{}", reply.body);

        // The other replica recognises the same call as a retry.
        let retried = app.client.post(format!("{other}/sessions/{session}/turn"))
            .json(&full).send().await.unwrap();
        assert_eq!(retried.status(), StatusCode::OK);
        let retried: Value = retried.json().await.unwrap();
        assert_eq!(retried["appended"], json!([5]));
        assert_eq!(retried["replayed"], true);
    }
}
