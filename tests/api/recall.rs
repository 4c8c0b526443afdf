//! The recall round trip: the references a view shows are passed, verbatim, to
//! `POST /sessions/{id}/recall`, whose answers are tool results that end with the reference
//! for the rest; observations are found by seq or by client event id.

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::on_both_backends;
use crate::support::TestApp;

const GHOST: &str = "01936f4e-8a7b-7c3d-9e2f-4a5b6c7d8e9f";

/// A tool output of `lines` lines in several scripts, some characters outside the BMP.
fn tool_output(lines: usize) -> String {
    (0..lines)
        .map(|i| format!("{i:04} naïve café → 東京 🚀 ok\n"))
        .collect()
}

/// The first `observation://…` reference in `text`, as written (up to a space, `]` or the end of
/// the line).
fn reference_in(text: &str) -> Option<&str> {
    references_in(text).next()
}

/// Every `observation://…` reference in `text`, as written.
fn references_in(text: &str) -> impl Iterator<Item = &str> {
    text.match_indices("observation://").map(|(start, _)| {
        let rest = &text[start..];
        let end = rest.find([']', ' ', '\n']).unwrap_or(rest.len());
        &rest[..end]
    })
}

async fn recall(app: &TestApp, session: &str, body: Value) -> Value {
    let reply = app
        .post(&format!("/sessions/{session}/recall"), &body)
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{body}: {}", reply.body);
    reply.body
}

/// Recalls from `uri` to the end, passing each answer's own closing reference back verbatim;
/// the slices, in order.
async fn recall_to_the_end(app: &TestApp, session: &str, uri: &str) -> String {
    let mut recalled = String::new();
    let mut uri = uri.to_owned();
    for _ in 0..100 {
        let answer = recall(app, session, json!({"uri": uri})).await;
        let content = answer["content"].as_str().unwrap();
        let length = answer["length"].as_u64().unwrap() as usize;
        let slice: String = content.chars().take(length).collect();
        recalled.push_str(&slice);
        let Some(next) = answer["next_offset"].as_u64() else {
            assert_eq!(content, slice, "the last slice is the text alone");
            return recalled;
        };
        let line = &content[slice.len()..];
        let seq = answer["seq"].as_i64().unwrap();
        assert_eq!(
            line,
            format!(
                "\n[characters {}–{next} of {}; recall observation://{seq}?offset={next} for the rest]",
                answer["offset"], answer["total_chars"]
            )
        );
        uri = reference_in(line)
            .expect("the closing line names the rest")
            .to_owned();
    }
    panic!("recall did not reach the end in 100 calls");
}

/// The view's messages that refer to event `seq`, each with the reference as written there.
fn referring_messages(view: &Value, seq: i64) -> Vec<(String, String)> {
    let prefix = format!("observation://{seq}");
    view["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["content"].as_str())
        .filter_map(|c| {
            references_in(c)
                .find(|r| r.split('?').next() == Some(prefix.as_str()))
                .map(|r| (c.to_owned(), r.to_owned()))
        })
        .collect()
}

on_both_backends! {
    async fn a_reference_from_a_view_recalls_the_exact_content(app) {
        // A window the tool output fills past the warn tier, which offloads it to a preview.
        let session = app.create_session(json!({"config": {
            "context_window": 5000, "max_output_tokens": 500, "tokenizer": "chars4",
            "min_tail_messages": 2, "offload_threshold_chars": 400
        }})).await;
        let output = tool_output(400);
        assert!(output.chars().count() > 10_000);
        let appended = app.append(&session, json!([
            {"type": "message", "role": "user", "content": "Read the build log."},
            {"type": "message", "role": "assistant",
                "tool_calls": [{"id": "call_1", "name": "shell", "arguments": {"cmd": "cat build.log"}}]},
            {"id": "log", "type": "message", "role": "tool", "tool_call_id": "call_1", "name": "shell",
                "content": output},
            {"type": "message", "role": "assistant", "content": "The build passed."},
            {"type": "message", "role": "user", "content": "Good; now the tests."}
        ])).await;
        assert_eq!(appended.status, StatusCode::CREATED, "{}", appended.body);
        let compact = |mode: &'static str| {
            let app = &app;
            let session = session.clone();
            async move {
                let reply = app.post(&format!("/sessions/{session}/compact"),
                    &json!({"format": "openai", "mode": mode})).await;
                assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
                reply.body
            }
        };

        // A preview shows the output's head; its reference recalls from where the head stops.
        let view = compact("auto").await["view"].clone();
        let (shown, reference) = referring_messages(&view, 3).into_iter()
            .find(|(_, r)| r.contains("?offset="))
            .unwrap_or_else(|| panic!("no preview of event 3 in {view}"));
        let head = &shown[..shown.rfind("\n[").expect("the preview's closing line")];
        assert!(!head.is_empty() && output.starts_with(head), "the preview is the output's head");
        let rest = recall_to_the_end(&app, &session, &reference).await;
        assert_eq!(format!("{head}{rest}"), output, "the preview and recall give back the exact output");

        // Folded into the summary, the output is listed by a reference that recalls it whole.
        let view = compact("force").await["view"].clone();
        let (_, reference) = referring_messages(&view, 3).into_iter().next()
            .unwrap_or_else(|| panic!("no reference to event 3 in {view}"));
        assert_eq!(reference, "observation://3");
        assert_eq!(recall_to_the_end(&app, &session, &reference).await, output);

        // And by client event id.
        assert_eq!(recall_to_the_end(&app, &session, "observation://log").await, output);
    }
}

on_both_backends! {
    async fn observations_are_found_by_seq_or_client_event_id(app) {
        let session = app.create_session(json!({})).await;
        let odd = "log-é?%/#1";
        let appended = app.append(&session, json!([
            {"id": "m1", "type": "note", "content": "first"},
            {"id": "1", "type": "note", "content": "the client id 1, at seq 2"},
            {"id": odd, "type": "note", "content": "an id with reserved characters"},
            {"type": "note", "content": "no client id"}
        ])).await;
        assert_eq!(appended.status, StatusCode::CREATED, "{}", appended.body);

        // The path: digits are a seq, anything else a client event id (percent-encoded).
        for (path, seq) in [("1", 1), ("m1", 1), ("2", 2), ("0004", 4),
                            ("log-%C3%A9%3F%25%2F%231", 3)] {
            let reply = app.get(&format!("/sessions/{session}/observations/{path}?limit=3")).await;
            assert_eq!(reply.status, StatusCode::OK, "{path}: {}", reply.body);
            assert_eq!(reply.body["seq"], seq, "{path}");
            assert_eq!(reply.body["uri"], format!("observation://{seq}"), "the uri is canonical");
        }
        assert_eq!(app.get(&format!("/sessions/{session}/observations/m1?offset=2&limit=2"))
            .await.body["content"], "rs");

        // The uri: the same rule, with `%XX` escapes decoded and other characters as they are.
        for (uri, seq) in [("observation://m1", 1), ("observation://1", 1), ("observation://2", 2),
                           ("observation://log-é%3F%25/#1", 3),
                           ("observation://log-%C3%A9%3F%25%2F%231?offset=0", 3)] {
            let answer = recall(&app, &session, json!({"uri": uri})).await;
            assert_eq!(answer["seq"], seq, "{uri}");
            assert_eq!(answer["uri"], format!("observation://{seq}"));
        }

        for path in ["m2", "99", "99999999999999999999999", "%E2%80%8B"] {
            let reply = app.get(&format!("/sessions/{session}/observations/{path}")).await;
            assert_eq!(reply.status, StatusCode::NOT_FOUND, "{path}: {}", reply.body);
            assert!(reply.body["detail"].as_str().unwrap().contains("has no event"), "{}", reply.body);
        }
        let reply = app.get(&format!("/sessions/{GHOST}/observations/m1")).await;
        assert_eq!(reply.status, StatusCode::NOT_FOUND);
        assert!(reply.body["detail"].as_str().unwrap().contains("does not exist"), "{}", reply.body);
    }
}

on_both_backends! {
    async fn recall_answers_ready_tool_results(app) {
        let session = app.create_session(json!({})).await;
        let text: String = "0123456789".repeat(1_200);
        app.append(&session, json!([{"id": "big", "type": "note", "content": text},
                                    {"id": "empty", "type": "episode_start", "name": "look",
                                     "kind": "exploration"}])).await;

        let first = recall(&app, &session, json!({"uri": "observation://1"})).await;
        assert_eq!((first["offset"].as_u64(), first["length"].as_u64(), first["total_chars"].as_u64(),
                    first["next_offset"].as_u64()), (Some(0), Some(4_000), Some(12_000), Some(4_000)));
        assert_eq!(first["content"], format!("{}\n[characters 0–4000 of 12000; recall \
            observation://1?offset=4000 for the rest]", &text[..4_000]));

        // The body's offset and limit win over the uri's; a chosen limit is kept for the rest.
        let answer = recall(&app, &session, json!({"uri": "observation://1?offset=10&limit=5",
            "offset": 20})).await;
        assert_eq!((answer["offset"].as_u64(), answer["length"].as_u64()), (Some(20), Some(5)));
        assert_eq!(answer["content"], "01234\n[characters 20–25 of 12000; recall \
            observation://1?offset=25&limit=5 for the rest]");
        let answer = recall(&app, &session, json!({"uri": "observation://big?offset=11990",
            "limit": 100, "offset": null})).await;
        assert_eq!(answer["content"], "0123456789", "the end is the text alone");
        assert!(answer.get("next_offset").is_none());

        // Nothing at the offset says so.
        let past = recall(&app, &session, json!({"uri": "observation://1?offset=12000"})).await;
        assert_eq!(past["length"], 0);
        assert_eq!(past["content"], "[nothing to recall at offset 12000: observation://1 has 12000 \
            characters, so offsets run from 0 to 11999]");
        let empty = recall(&app, &session, json!({"uri": "observation://empty"})).await;
        assert_eq!(empty["content"], "[observation://2 holds no text to recall]");

        // A model's call, passed on unchanged, with the arguments the tool declares.
        let tool = app.get("/tools/recall_observation").await.body;
        let mut declared: Vec<&String> = tool["function"]["parameters"]["properties"].as_object().unwrap()
            .keys().collect();
        declared.sort();
        assert_eq!(declared, ["limit", "offset", "uri"]);
        let arguments = json!({"uri": "observation://1", "offset": 4_000, "limit": 4_000});
        assert_eq!(recall(&app, &session, arguments).await["next_offset"], 8_000);
    }
}

on_both_backends! {
    async fn bad_recalls_are_named(app) {
        let session = app.create_session(json!({})).await;
        app.append(&session, json!([{"type": "note", "content": "x"}])).await;
        let url = format!("/sessions/{session}/recall");
        let huge = format!("observation://{}", "9".repeat(5_000));
        for (body, field, says) in [
            (json!({"uri": "42"}), "uri", "observation reference"),
            (json!({"uri": "https://example.com/1"}), "uri", "observation reference"),
            (json!({"uri": "observation://"}), "uri", "names no event"),
            (json!({"uri": "observation://1?offset=-4"}), "uri", "offset"),
            (json!({"uri": "observation://1?limit=0"}), "uri", "limit"),
            (json!({"uri": "observation://1?page=2"}), "uri", "`page`"),
            (json!({"uri": "observation://1?offset=1&offset=2"}), "uri", "more than once"),
            (json!({"uri": "observation://%zz"}), "uri", "%25"),
            (json!({"uri": huge}), "uri", "4096"),
            (json!({"uri": "observation://1", "offset": -1}), "offset", "at least 0"),
            (json!({"uri": "observation://1", "limit": 0}), "limit", "200000"),
            (json!({"uri": "observation://1", "limit": 200_001}), "limit", "200000"),
            (json!({"uri": "observation://1", "offset": "4000"}), "offset", ""),
            (json!({"uri": "observation://1", "format": "openai"}), "format", ""),
            (json!({"offset": 1}), "uri", ""),
        ] {
            let reply = app.post(&url, &body).await;
            assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY, "{body}: {}", reply.body);
            let error = &reply.body["errors"][0];
            assert_eq!(error["field"], field, "{}", reply.body);
            assert!(error["message"].as_str().unwrap().contains(says), "{says}: {}", reply.body);
            assert!(reply.body.to_string().len() < 1_000, "the input is not echoed: {}", reply.body);
        }
        for uri in ["observation://2", "observation://m1", "observation://99999999999999999999"] {
            let reply = app.post(&url, &json!({"uri": uri})).await;
            assert_eq!(reply.status, StatusCode::NOT_FOUND, "{uri}: {}", reply.body);
        }
        let reply = app.post(&format!("/sessions/{GHOST}/recall"), &json!({"uri": "observation://1"})).await;
        assert_eq!(reply.status, StatusCode::NOT_FOUND);
        assert!(reply.body["detail"].as_str().unwrap().contains("does not exist"), "{}", reply.body);
        let malformed = app.client.post(app.url(&url)).header("content-type", "application/json");
        assert_eq!(app.send(malformed.body("{\"uri\":")).await.status, StatusCode::BAD_REQUEST);
    }
}

/// The events the README's walkthrough appends.
fn walkthrough_events() -> Value {
    json!([
        {"id": "m1", "type": "message", "role": "user", "content": "List the files in src/"},
        {"id": "m2", "type": "message", "role": "assistant", "content": "",
         "tool_calls": [{"id": "call_1", "name": "shell", "arguments": "{\"cmd\":\"ls src\"}"}]},
        {"id": "m3", "type": "message", "role": "tool", "tool_call_id": "call_1", "name": "shell",
         "content": "main.rs\nlib.rs"}
    ])
}

on_both_backends! {
    async fn the_readme_recall_example_answers_as_shown(app) {
        let session = app.create_session(json!({})).await;
        app.append(&session, walkthrough_events()).await;
        let answer = recall(&app, &session, json!({"uri": "observation://m3", "limit": 7})).await;
        let readme = include_str!("../../README.md");
        let documented = readme.split("observation://m3\", \"limit\": 7}'\n").nth(1)
            .and_then(|rest| rest.split("\n```").next())
            .expect("the README's recall example");
        let documented: String = documented.lines().map(|l| l.trim_start_matches("# ").trim_start()).collect();
        let documented: Value = serde_json::from_str(&documented).expect("the README shows JSON");
        assert_eq!(answer, documented);
    }
}

on_both_backends! {
    async fn an_archived_call_recalls_its_arguments(app) {
        // Past the trigger, the episodic policy archives a write's exchange whole: its long
        // arguments leave the view with its result, and the reference the call shows recalls
        // them exactly.
        let session = app.create_session(json!({"config": {
            "context_window": 8000, "max_output_tokens": 1000, "tokenizer": "chars4",
            "policy": "episodic", "item_max_share": 0.5
        }})).await;
        let content = "fn rule() {}\n".repeat(400);
        let arguments = json!({"path": "src/parse.rs", "content": content}).to_string();
        let appended = app.append(&session, json!([
            {"type": "message", "role": "user", "content": "Write the parser."},
            {"id": "write", "type": "message", "role": "assistant", "content": "Writing it.",
                "tool_calls": [{"id": "w1", "name": "write", "arguments": arguments}]},
            {"type": "message", "role": "tool", "tool_call_id": "w1", "name": "write",
                "content": "wrote src/parse.rs"},
            {"type": "message", "role": "assistant",
                "tool_calls": [{"id": "r1", "name": "read", "arguments": {"path": "a.rs"}}]},
            {"type": "message", "role": "tool", "tool_call_id": "r1", "name": "read",
                "content": "let a = 1;\n".repeat(900)},
            {"type": "message", "role": "assistant",
                "tool_calls": [{"id": "r2", "name": "read", "arguments": {"path": "b.rs"}}]},
            {"type": "message", "role": "tool", "tool_call_id": "r2", "name": "read",
                "content": "let b = 2;\n".repeat(900)},
            {"type": "message", "role": "user", "content": "Now test it."},
            {"type": "message", "role": "assistant",
                "tool_calls": [{"id": "t1", "name": "bash", "arguments": {"cmd": "cargo test"}}]},
            {"type": "message", "role": "tool", "tool_call_id": "t1", "name": "bash",
                "content": "test result: ok"}
        ])).await;
        assert_eq!(appended.status, StatusCode::CREATED, "{}", appended.body);
        let reply = app.post(&format!("/sessions/{session}/compact"), &json!({"format": "openai"})).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
        let view = &reply.body["view"]["messages"];
        let call = view.as_array().unwrap().iter()
            .find(|m| m["content"] == "Writing it.")
            .unwrap_or_else(|| panic!("the write's text stays: {view}"));
        let shown = call["tool_calls"][0]["function"]["arguments"].as_str().unwrap();
        assert!(shown.len() < 200, "{shown}");
        let shown: Value = serde_json::from_str(shown).unwrap();
        let note = shown["archived_arguments"].as_str().unwrap_or_else(|| panic!("{shown}"));
        let reference = reference_in(note).expect("a reference");
        assert!(reference.starts_with("observation://2?offset="), "{reference}");
        assert_eq!(recall_to_the_end(&app, &session, reference).await, arguments);
        // The whole event reads as its text, then its call and arguments.
        let whole = recall_to_the_end(&app, &session, "observation://write").await;
        assert_eq!(whole, format!("Writing it.\n[tool call write w1] {arguments}"));
    }
}

on_both_backends! {
    async fn the_readme_walkthrough_compact_answers_as_shown(app) {
        let session = app.create_session(json!({"config": {"context_window": 128000}})).await;
        app.append(&session, walkthrough_events()).await;
        let reply = app.post(&format!("/sessions/{session}/compact"),
            &json!({"format": "openai", "tools": []})).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
        let record = &reply.body["record"];
        let readme = include_str!("../../README.md");
        let shown = readme.lines().find(|l| l.starts_with("# {\"view\":{\"messages\":[…]},\"record\":"))
            .expect("the README's compact answer");
        let number = |field: &str| -> i64 {
            let at = shown.find(&format!("\"{field}\":")).unwrap_or_else(|| panic!("{field} in {shown}"));
            shown[at + field.len() + 3..].split([',', '}']).next().unwrap().parse().unwrap()
        };
        for field in ["tokens_after", "input_tokens_estimate"] {
            assert_eq!(record[field].as_i64(), Some(number(field)), "{field}: {record}");
        }
        assert!(shown.contains(&format!("\"tier\":{}", record["tier"])), "{record}");
        assert!(shown.contains(&format!("\"acted\":{}", record["acted"])), "{record}");
        assert_eq!(reply.body["persisted"], false);
        // And the explanation below it.
        let reserved = reply.body["record"]["tokens_after"].as_i64().unwrap()
            - record["input_tokens_estimate"].as_i64().unwrap();
        assert_eq!(reserved, 8192);
        assert!(readme.contains("the 8,192 tokens reserved for\nthe model's answer"));
    }
}
