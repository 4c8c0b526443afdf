//! Real answers match the committed OpenAPI document: a session is driven through every
//! operation over HTTP, and each JSON body is validated (JSON Schema 2020-12, `$ref`s resolved
//! against the document's components) against the schema documented for its operation, status
//! and content type. An operation that answers JSON and is never checked fails the test too.

use std::collections::BTreeSet;

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::on_both_backends;
use crate::support::{Reply, TestApp};

const DOCUMENT: &str = include_str!("../../openapi/openapi.json");

/// The committed document, and which (method, path, status) answers were checked against it.
struct Spec {
    doc: Value,
    checked: BTreeSet<(String, String, u16)>,
}

impl Spec {
    fn load() -> Self {
        Self {
            doc: serde_json::from_str(DOCUMENT).expect("openapi/openapi.json is JSON"),
            checked: BTreeSet::new(),
        }
    }

    /// Checks `reply` against what the document says `method path` answers with its status.
    fn check(&mut self, method: &str, path: &str, reply: &Reply) {
        let status = reply.status.as_u16();
        let what = format!("{} {path} {status}", method.to_uppercase());
        let documented = &self.doc["paths"][path][method]["responses"][status.to_string()];
        assert!(
            documented.is_object(),
            "{what} is not documented; the answer was {}",
            reply.body
        );
        let content_type = reply
            .headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        let media = content_type.split(';').next().unwrap_or_default().trim();
        match documented.get("content") {
            None => assert!(
                reply.body.is_null(),
                "{what} documents no body but one came: {}",
                reply.body
            ),
            Some(content) => {
                let schema = &content[media]["schema"];
                assert!(
                    schema.is_object(),
                    "{what} answered {media}, which is not documented (documented: {:?})",
                    content.as_object().map(|c| c.keys().collect::<Vec<_>>())
                );
                self.validate(&what, schema, &reply.body);
            }
        }
        self.checked
            .insert((method.to_owned(), path.to_owned(), status));
    }

    fn validate(&self, what: &str, schema: &Value, body: &Value) {
        // The operation's schema as the root of a document that also holds the components,
        // so that `#/components/schemas/...` resolves.
        let mut root = schema.clone();
        root["components"] = self.doc["components"].clone();
        let validator = jsonschema::draft202012::options()
            .should_validate_formats(true)
            .build(&root)
            .unwrap_or_else(|e| panic!("{what}: the documented schema does not compile: {e}"));
        let errors: Vec<String> = validator
            .iter_errors(body)
            .map(|e| format!("  at `{}`: {e}", e.instance_path()))
            .collect();
        assert!(
            errors.is_empty(),
            "{what}: the answer does not match the documented schema:\n{}\nanswer: {body}",
            errors.join("\n")
        );
    }

    /// Every operation documented to answer JSON with a success status was checked with one.
    fn assert_every_operation_checked(&self) {
        let mut missing = Vec::new();
        for (path, operations) in self.doc["paths"].as_object().expect("paths") {
            for (method, operation) in operations.as_object().expect("operations") {
                let answers_json = operation["responses"]
                    .as_object()
                    .expect("responses")
                    .iter()
                    .any(|(status, r)| status.starts_with('2') && r["content"].is_object());
                let checked = self
                    .checked
                    .iter()
                    .any(|(m, p, s)| m == method && p == path && (200..300).contains(s));
                if answers_json && !checked {
                    missing.push(format!("{} {path}", method.to_uppercase()));
                }
            }
        }
        assert!(
            missing.is_empty(),
            "operations whose answers were never checked: {missing:?}"
        );
    }
}

/// Sends `method path` (a concrete path for the template `template`) and checks the answer.
async fn call(
    app: &TestApp,
    spec: &mut Spec,
    method: &str,
    template: &str,
    path: &str,
    body: Option<Value>,
) -> Reply {
    let url = app.url(path);
    let request = match method {
        "get" => app.client.get(url),
        "post" => app.client.post(url),
        "delete" => app.client.delete(url),
        other => panic!("no such method {other}"),
    };
    let request = match body {
        Some(body) => request.json(&body),
        None => request,
    };
    let reply = app.send(request).await;
    spec.check(method, template, &reply);
    reply
}

fn exchange(id: &str, chars: usize) -> Vec<Value> {
    vec![
        json!({"id": format!("{id}-call"), "type": "message", "role": "assistant", "content": "",
            "tool_calls": [{"id": id, "name": "shell", "arguments": {"cmd": format!("cat {id}.log")}}]}),
        json!({"id": format!("{id}-result"), "type": "message", "role": "tool", "tool_call_id": id,
            "name": "shell", "content": "log line\n".repeat(chars / 9 + 1)}),
    ]
}

on_both_backends! {
    async fn every_answer_matches_the_openapi_document(app) {
        let spec = &mut Spec::load();
        let ghost = "01936f4e-8a7b-7c3d-9e2f-4a5b6c7d8e9f";

        let r = call(&app, spec, "get", "/healthz", "/healthz", None).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        let r = call(&app, spec, "get", "/readyz", "/readyz", None).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        let r = call(&app, spec, "get", "/metrics", "/metrics", None).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);

        // Sessions.
        let session = json!({"metadata": {"team": "search"}, "config": {
            "context_window": 8000, "max_output_tokens": 500, "tokenizer": "chars4",
            "min_tail_messages": 4, "offload_threshold_chars": 400}});
        let r = call(&app, spec, "post", "/sessions", "/sessions", Some(session)).await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
        let id = r.body["id"].as_str().expect("id").to_owned();
        let s = format!("/sessions/{id}");
        for (body, status) in [
            (json!({"config": {"context_window": 10}}), StatusCode::UNPROCESSABLE_ENTITY),
            (json!({"nonsense": true}), StatusCode::UNPROCESSABLE_ENTITY),
        ] {
            let r = call(&app, spec, "post", "/sessions", "/sessions", Some(body)).await;
            assert_eq!(r.status, status);
        }
        let r = app.send(app.client.post(app.url("/sessions")).header("content-type", "text/plain").body("{}")).await;
        assert_eq!(r.status, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{}", r.body);
        spec.check("post", "/sessions", &r);
        let r = app.send(app.client.post(app.url("/sessions")).header("content-type", "application/json").body("{")).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
        spec.check("post", "/sessions", &r);
        let r = call(&app, spec, "get", "/sessions", "/sessions?limit=1", None).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        let r = call(&app, spec, "get", "/sessions", "/sessions?limit=0", None).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
        let r = call(&app, spec, "get", "/sessions/{id}", &s, None).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        let r = call(&app, spec, "get", "/sessions/{id}", &format!("/sessions/{ghost}"), None).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
        let r = call(&app, spec, "get", "/sessions/{id}", "/sessions/not-a-uuid", None).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);

        // Events: every type, a retry, and the refusals.
        let mut first = vec![
            json!({"id": "sys", "type": "message", "role": "system", "content": "You are terse."}),
            json!({"id": "u1", "type": "message", "role": "user", "content": "Find the bug",
                "pinned": true, "metadata": {"source": "cli", "tags": ["a", 1, null]}}),
            json!({"id": "ep", "type": "episode_start", "name": "explore", "kind": "exploration",
                "dependencies": []}),
            json!({"id": "n1", "type": "note", "content": "Never touch the migrations."}),
        ];
        first.extend(exchange("c1", 1_500));
        first.push(json!({"id": "epx", "type": "episode_end", "name": "explore",
            "conclusion": "the bug is in the parser"}));
        let events = format!("{s}/events");
        let batch = json!({"events": first, "expected_seq": 0});
        let r = call(&app, spec, "post", "/sessions/{id}/events", &events, Some(batch.clone())).await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
        let r = call(&app, spec, "post", "/sessions/{id}/events", &events,
            Some(json!({"events": batch["events"]}))).await;
        assert_eq!(r.status, StatusCode::OK, "a retry: {}", r.body);
        for (body, status) in [
            (json!({"events": [{"type": "note", "content": "x"}], "expected_seq": 1}),
                StatusCode::CONFLICT),
            (json!({"events": [{"id": "u1", "type": "message", "role": "user", "content": "other"}]}),
                StatusCode::CONFLICT),
            (json!({"events": [{"type": "message", "role": "tool", "tool_call_id": "nope", "content": "x"}]}),
                StatusCode::UNPROCESSABLE_ENTITY),
            (json!({"events": (0..1001).map(|_| json!({"type": "note", "content": "x"})).collect::<Vec<_>>()}),
                StatusCode::PAYLOAD_TOO_LARGE),
        ] {
            let r = call(&app, spec, "post", "/sessions/{id}/events", &events, Some(body)).await;
            assert_eq!(r.status, status, "{}", r.body);
        }
        let r = call(&app, spec, "post", "/sessions/{id}/events",
            &format!("/sessions/{ghost}/events"),
            Some(json!({"events": [{"type": "note", "content": "x"}]}))).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
        let r = call(&app, spec, "get", "/sessions/{id}/events", &format!("{events}?limit=3"), None).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        assert!(r.body["next_after_seq"].is_i64());
        let r = call(&app, spec, "get", "/sessions/{id}/events", &format!("{events}?after_seq=-1"), None).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);

        // Compactions in every format and mode, across the tiers.
        let compact = format!("{s}/compact");
        let tools = json!([{"type": "function", "function": {"name": "shell",
            "parameters": {"type": "object"}}}]);
        for turn in 0..6 {
            let mut batch = vec![json!({"type": "message", "role": "user",
                "content": format!("request {turn}: check the logs")})];
            batch.extend(exchange(&format!("t{turn}"), 1_500));
            batch.push(json!({"type": "message", "role": "assistant",
                "content": "the logs show a retry storm. ".repeat(20)}));
            let r = call(&app, spec, "post", "/sessions/{id}/events", &events,
                Some(json!({"events": batch}))).await;
            assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
            for format in ["openai", "anthropic", "raw"] {
                for mode in ["auto", "dry_run"] {
                    let r = call(&app, spec, "post", "/sessions/{id}/compact", &compact,
                        Some(json!({"format": format, "mode": mode, "tools": tools}))).await;
                    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
                }
            }
        }
        for body in [json!({}), json!({"mode": "force", "format": "anthropic"}),
                     json!({"overflow_retry": 1}), json!({"overflow_retry": 2, "format": "raw"})] {
            let r = call(&app, spec, "post", "/sessions/{id}/compact", &compact, Some(body)).await;
            assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        }
        let r = call(&app, spec, "post", "/sessions/{id}/compact", &compact,
            Some(json!({"overflow_retry": 3}))).await;
        assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", r.body);
        let r = call(&app, spec, "post", "/sessions/{id}/compact",
            &format!("/sessions/{ghost}/compact"), Some(json!({}))).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);

        // Turns in each provider's shapes, with parts, reasoning and an image.
        let turn = format!("{s}/turn");
        let png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
        let turns = [
            json!({"format": "openai", "tools": tools, "messages": [
                {"role": "user", "content": [{"type": "text", "text": "what is on screen?"},
                    {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{png}")}}]}]}),
            json!({"format": "anthropic", "system": "You are terse.", "messages": [
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "Look first.", "signature": "c2ln"},
                    {"type": "tool_use", "id": "tu1", "name": "shell", "input": {"cmd": "ls"}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu1"}]}]}),
            json!({"format": "openai_responses", "messages": [
                {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA"},
                {"type": "function_call", "call_id": "fc1", "name": "shell", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "fc1", "output": "ok"}],
                "usage": {"input_tokens": 1_000}}),
        ];
        for body in turns {
            let r = call(&app, spec, "post", "/sessions/{id}/turn", &turn, Some(body)).await;
            assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        }
        let r = call(&app, spec, "post", "/sessions/{id}/turn", &turn,
            Some(json!({"messages": [{"role": "robot"}]}))).await;
        assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", r.body);
        let r = call(&app, spec, "post", "/sessions/{id}/turn", &turn,
            Some(json!({"messages": [{"role": "system", "content": "You are terse."},
                {"role": "user", "content": "a history this session never had"}]}))).await;
        assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
        let r = call(&app, spec, "post", "/sessions/{id}/turn",
            &format!("/sessions/{ghost}/turn"), Some(json!({"messages": []}))).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);

        // Records.
        let r = call(&app, spec, "get", "/sessions/{id}/compactions",
            &format!("{s}/compactions?limit=2"), None).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        let records = r.body["compactions"].as_array().expect("records").clone();
        assert!(!records.is_empty());
        for record in &records {
            let cid = record["id"].as_str().expect("id");
            let r = call(&app, spec, "get", "/sessions/{id}/compactions/{cid}",
                &format!("{s}/compactions/{cid}"), None).await;
            assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        }
        let r = call(&app, spec, "get", "/sessions/{id}/compactions/{cid}",
            &format!("{s}/compactions/{ghost}"), None).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
        let r = call(&app, spec, "get", "/sessions/{id}/compactions",
            &format!("/sessions/{ghost}/compactions"), None).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
        let r = call(&app, spec, "get", "/sessions/{id}/compactions/outline",
            &format!("{s}/compactions/outline?limit=2"), None).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        assert_eq!(r.body["compactions"].as_array().expect("outlines").len(), records.len());
        let r = call(&app, spec, "get", "/sessions/{id}/compactions/outline",
            &format!("/sessions/{ghost}/compactions/outline"), None).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);

        // Context, observations and the recall tool.
        for query in ["", "?limit=5", "?state=archived", "?from_seq=2&to_seq=9"] {
            let r = call(&app, spec, "get", "/sessions/{id}/context",
                &format!("{s}/context{query}"), None).await;
            assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        }
        let r = call(&app, spec, "get", "/sessions/{id}/context", &format!("{s}/context?state=gone"), None).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
        let r = call(&app, spec, "get", "/sessions/{id}/context",
            &format!("/sessions/{ghost}/context"), None).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
        let observation = "/sessions/{id}/observations/{seq_or_event_id}";
        for query in ["/6", "/6?offset=5&limit=10", "/6?offset=100000"] {
            let r = call(&app, spec, "get", observation, &format!("{s}/observations{query}"), None).await;
            assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        }
        let r = call(&app, spec, "get", observation, &format!("{s}/observations/999"), None).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
        let r = call(&app, spec, "get", observation, &format!("{s}/observations/6?limit=0"), None).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
        let recall = format!("{s}/recall");
        for (body, status) in [
            (json!({"uri": "observation://6?offset=5&limit=10"}), StatusCode::OK),
            (json!({"uri": "observation://6", "offset": 100000}), StatusCode::OK),
            (json!({"uri": "observation://999"}), StatusCode::NOT_FOUND),
            (json!({"uri": "6"}), StatusCode::UNPROCESSABLE_ENTITY),
        ] {
            let r = call(&app, spec, "post", "/sessions/{id}/recall", &recall, Some(body)).await;
            assert_eq!(r.status, status, "{}", r.body);
        }
        for query in ["", "?format=openai", "?format=anthropic"] {
            let r = call(&app, spec, "get", "/tools/recall_observation",
                &format!("/tools/recall_observation{query}"), None).await;
            assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        }
        let r = call(&app, spec, "get", "/tools/recall_observation",
            "/tools/recall_observation?format=xml", None).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);

        // The agent's condensation.
        let condense = format!("{s}/condense");
        for (body, status) in [
            (json!({"milestone": "the bug is found", "completed_work": ["read the parser"],
                "strategies": [{"approach": "bisect", "outcome": "found it"}],
                "references": ["observation://6", "src/parse.rs"]}), StatusCode::OK),
            (json!({"milestone": "m", "references": ["/etc/passwd"]}), StatusCode::UNPROCESSABLE_ENTITY),
        ] {
            let r = call(&app, spec, "post", "/sessions/{id}/condense", &condense, Some(body)).await;
            assert_eq!(r.status, status, "{}", r.body);
        }
        let r = call(&app, spec, "post", "/sessions/{id}/condense",
            &format!("/sessions/{ghost}/condense"), Some(json!({"milestone": "m"}))).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);

        // Calibration.
        let usage = format!("{s}/usage");
        let cid = records[0]["id"].clone();
        for (body, status) in [
            (json!({"input_tokens": 900, "compaction_id": cid}), StatusCode::OK),
            (json!({"input_tokens": 900, "view_tokens": 800}), StatusCode::OK),
            (json!({"input_tokens": 0, "view_tokens": 800}), StatusCode::UNPROCESSABLE_ENTITY),
            (json!({"input_tokens": 900, "compaction_id": ghost}), StatusCode::NOT_FOUND),
        ] {
            let r = call(&app, spec, "post", "/sessions/{id}/usage", &usage, Some(body)).await;
            assert_eq!(r.status, status, "{}", r.body);
        }

        // Bodies that are not JSON, or not JSON at all, on every operation that takes one.
        for (template, path) in [
            ("/sessions", "/sessions".to_owned()),
            ("/sessions/{id}/events", events.clone()),
            ("/sessions/{id}/compact", compact.clone()),
            ("/sessions/{id}/usage", usage.clone()),
            ("/sessions/{id}/turn", turn.clone()),
            ("/sessions/{id}/recall", recall.clone()),
            ("/sessions/{id}/condense", condense.clone()),
        ] {
            for (content_type, body, status) in [
                ("application/json", "{", StatusCode::BAD_REQUEST),
                ("text/plain", "{}", StatusCode::UNSUPPORTED_MEDIA_TYPE),
            ] {
                let request = app.client.post(app.url(&path)).header("content-type", content_type);
                let r = app.send(request.body(body)).await;
                assert_eq!(r.status, status, "{path}: {}", r.body);
                spec.check("post", template, &r);
            }
        }

        // The view an operator reads, in two formats.
        for format in ["openai", "anthropic"] {
            let path = format!("{s}/view?format={format}");
            let r = call(&app, spec, "get", "/sessions/{id}/view", &path, None).await;
            assert_eq!(r.status, StatusCode::OK, "{}", r.body);
            assert_eq!(r.body["persisted"], false);
        }
        let r = call(&app, spec, "get", "/sessions/{id}/view", &format!("{s}/view?format=xml"), None).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);

        // The event stream: its first event, as text.
        let mut stream = app.client.get(app.url(&format!("{s}/events/stream?after=0"))).send().await.unwrap();
        let (status, headers) = (stream.status(), stream.headers().clone());
        let mut text = String::new();
        while !text.contains("\n\n") {
            let chunk = tokio::time::timeout(std::time::Duration::from_secs(10), stream.chunk())
                .await.expect("the stream sends its first event").unwrap().unwrap();
            text.push_str(&String::from_utf8_lossy(&chunk));
        }
        assert!(text.starts_with("event: append"), "{text}");
        spec.check("get", "/sessions/{id}/events/stream", &Reply { status, headers, body: Value::String(text) });
        let r = call(&app, spec, "get", "/sessions/{id}/events/stream", &format!("/sessions/{ghost}/events/stream"), None).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);

        // The end of a session.
        let r = call(&app, spec, "delete", "/sessions/{id}", &s, None).await;
        assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
        let r = call(&app, spec, "delete", "/sessions/{id}", &s, None).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);

        // Tenants and keys: the first key is made in open mode, the rest with it.
        for (body, status) in [
            (json!({"id": "acme"}), StatusCode::CREATED),
            (json!({"id": "acme"}), StatusCode::CONFLICT),
            (json!({"id": "Acme!"}), StatusCode::UNPROCESSABLE_ENTITY),
        ] {
            let r = call(&app, spec, "post", "/admin/tenants", "/admin/tenants", Some(body)).await;
            assert_eq!(r.status, status, "{}", r.body);
        }
        let r = call(&app, spec, "get", "/admin/tenants", "/admin/tenants", None).await;
        assert_eq!(r.body["tenants"].as_array().unwrap().len(), 2, "{}", r.body);
        let r = call(&app, spec, "post", "/admin/keys", "/admin/keys",
            Some(json!({"tenant": "initech", "role": "agent"}))).await;
        assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", r.body);
        let r = call(&app, spec, "post", "/admin/keys", "/admin/keys",
            Some(json!({"tenant": "acme", "role": "admin", "name": "ops"}))).await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
        let admin = r.body["key_secret"].as_str().unwrap().to_owned();
        let key_id = r.body["id"].as_str().unwrap().to_owned();
        let with_key = |request: reqwest::RequestBuilder| request.bearer_auth(&admin);
        let r = app.send(with_key(app.client.get(app.url("/admin/keys")))).await;
        spec.check("get", "/admin/keys", &r);
        assert_eq!(r.body["keys"][0]["id"], key_id.as_str(), "{}", r.body);
        let r = app.send(app.client.get(app.url("/sessions"))).await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{}", r.body);
        spec.check("get", "/sessions", &r);
        let r = app.send(with_key(app.client.get(app.url("/sessions")))).await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.body);
        spec.check("get", "/sessions", &r);
        let r = app.send(with_key(app.client.post(app.url("/admin/keys")))
            .json(&json!({"tenant": "acme", "role": "agent"}))).await;
        spec.check("post", "/admin/keys", &r);
        let agent = r.body["id"].as_str().unwrap().to_owned();
        for (id, status) in [
            (agent.as_str(), StatusCode::NO_CONTENT),
            (agent.as_str(), StatusCode::NO_CONTENT),
            ("0123456789abcdef", StatusCode::NOT_FOUND),
        ] {
            let url = app.url(&format!("/admin/keys/{id}"));
            let r = app.send(with_key(app.client.delete(url))).await;
            assert_eq!(r.status, status, "{}", r.body);
            spec.check("delete", "/admin/keys/{key_id}", &r);
        }

        spec.assert_every_operation_checked();
    }
}
