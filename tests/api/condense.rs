//! `POST /sessions/{id}/condense`: the agent's own condensation becomes the session's one
//! memory item and archives the old exchanges it covers, with no model call.

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::on_both_backends;

fn exchange(id: &str, chars: usize) -> [Value; 2] {
    [
        json!({"type": "message", "role": "assistant",
            "tool_calls": [{"id": id, "name": "read", "arguments": {"path": format!("src/{id}.rs")}}]}),
        json!({"type": "message", "role": "tool", "tool_call_id": id, "name": "read",
            "content": "x".repeat(chars)}),
    ]
}

fn condensation(milestone: &str) -> Value {
    json!({"milestone": milestone,
        "completed_work": ["ported src/parse.rs"],
        "strategies": [{"approach": "a hand-written lexer", "outcome": "too slow; replaced by logos"}],
        "constraints": ["never change the public API"],
        "references": ["observation://3", "src/parse.rs"]})
}

on_both_backends! {
    async fn a_condensation_replaces_the_memory_and_archives_old_exchanges(app) {
        let id = app.create_session(json!({"config": {"policy": "episodic", "tokenizer": "chars4"}})).await;
        let mut events = vec![json!({"type": "message", "role": "user", "content": "Port the parser."})];
        for i in 0..6 {
            events.extend(exchange(&format!("c{i}"), 2_000));
        }
        assert_eq!(app.append(&id, Value::Array(events)).await.status, StatusCode::CREATED);
        // Results are at seqs 3, 5, …, 13: the newest four exchanges' (7 to 13) stay.
        let reply = app.post(&format!("/sessions/{id}/condense"), &condensation("the lexer is ported")).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
        assert_eq!(reply.body["trigger"], "condense");
        let archived: Vec<i64> = reply.body["offloaded"].as_array().unwrap().iter()
            .map(|o| o["seq"].as_i64().unwrap()).collect();
        assert_eq!(archived, [3, 5]);
        assert!(reply.body["summarizer"].is_null(), "no model is asked");

        let view = app.post(&format!("/sessions/{id}/compact"), &json!({"format": "openai"})).await.body;
        let messages = view["view"]["messages"].as_array().unwrap();
        let memory = messages.iter().position(|m| m["content"].as_str()
            .is_some_and(|c| c.contains("Milestone: the lexer is ported"))).expect("the memory is shown");
        assert_eq!(memory, 0, "first, before the conversation");
        let text = view["view"].to_string();
        assert!(text.contains("a hand-written lexer → too slow; replaced by logos"));
        assert!(text.contains("[read result archived, 2000 characters; recall observation://3]"), "{text}");

        let context = app.get(&format!("/sessions/{id}/context")).await.body;
        assert_eq!(context["memory"]["milestone"], "the lexer is ported", "{context}");

        // A second condensation replaces the first.
        let reply = app.post(&format!("/sessions/{id}/condense"), &condensation("the parser is ported")).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
        let view = app.post(&format!("/sessions/{id}/compact"), &json!({"format": "anthropic"})).await.body;
        let text = view["view"].to_string();
        assert!(text.contains("Milestone: the parser is ported"));
        assert!(!text.contains("Milestone: the lexer is ported"), "one memory item");
        // The record of each is listed with the others.
        let records = app.get(&format!("/sessions/{id}/compactions")).await.body;
        let condensed = records["compactions"].as_array().unwrap().iter()
            .filter(|r| r["trigger"] == "condense").count();
        assert_eq!(condensed, 2);
    }
}

on_both_backends! {
    async fn bad_condensations_are_named_and_refused_during_an_episode(app) {
        let id = app.create_session(json!({})).await;
        let url = format!("/sessions/{id}/condense");
        let mut too_many = condensation("m");
        too_many["open_questions"] = json!(vec!["why?"; 21]);
        let mut too_long = condensation("m");
        too_long["constraints"] = json!(["c".repeat(1_001)]);
        let mut absolute = condensation("m");
        absolute["references"] = json!(["/etc/passwd"]);
        let mut huge = condensation("m");
        huge["completed_work"] = json!(vec!["w ".repeat(490); 20]);
        for (body, field) in [
            (too_many, "open_questions"),
            (too_long, "constraints[0]"),
            (absolute, "references[0]"),
            (huge, "condensation"),
            (json!({"milestone": ""}), "milestone"),
        ] {
            let reply = app.post(&url, &body).await;
            assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY, "{field}: {}", reply.body);
            assert_eq!(reply.body["errors"][0]["field"], field, "{}", reply.body);
        }
        assert_eq!(app.post(&url, &json!({"milestone": "m", "extra": 1})).await.status,
            StatusCode::UNPROCESSABLE_ENTITY);
        let ghost = "01936f4e-8a7b-7c3d-9e2f-4a5b6c7d8e9f";
        assert_eq!(app.post(&format!("/sessions/{ghost}/condense"), &condensation("m")).await.status,
            StatusCode::NOT_FOUND);

        app.append(&id, json!([{"type": "episode_start", "name": "look", "kind": "exploration"}])).await;
        let reply = app.post(&url, &condensation("m")).await;
        assert_eq!(reply.status, StatusCode::CONFLICT, "{}", reply.body);
        assert!(reply.body["detail"].as_str().unwrap().contains("`look`"), "{}", reply.body);
        app.append(&id, json!([{"type": "episode_end", "name": "look", "conclusion": "seen"}])).await;
        assert_eq!(app.post(&url, &condensation("m")).await.status, StatusCode::OK);
    }
}
