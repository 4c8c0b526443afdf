//! The committed OpenAPI document is the one the code generates, and the bounds it documents
//! are the ones the server holds.

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::on_both_backends;

const COMMITTED: &str = include_str!("../../openapi/openapi.json");

#[test]
fn committed_openapi_matches_the_code() {
    let generated = ctxd::openapi().to_pretty_json().expect("serialise");
    assert!(
        generated.trim_end() == COMMITTED.trim_end(),
        "openapi/openapi.json is out of date. Regenerate it with:\n\n    \
         cargo run --quiet -- openapi > openapi/openapi.json\n"
    );
}

#[test]
fn every_operation_documents_its_errors() {
    let doc: serde_json::Value = serde_json::from_str(&ctxd::openapi().to_json().unwrap()).unwrap();
    let paths = doc["paths"].as_object().unwrap();
    for required in [
        "/sessions",
        "/sessions/{id}",
        "/sessions/{id}/events",
        "/healthz",
        "/readyz",
    ] {
        assert!(paths.contains_key(required), "{required} is documented");
    }
    for (path, operations) in paths {
        for (method, operation) in operations.as_object().unwrap() {
            if path == "/healthz" {
                continue;
            }
            let responses = operation["responses"].as_object().unwrap();
            let has_example = operation["requestBody"].to_string().contains("\"example\"")
                || responses
                    .values()
                    .any(|r| r.to_string().contains("\"example\""));
            assert!(has_example, "{method} {path} has no example");
            let errors: Vec<_> = responses
                .keys()
                .filter(|s| s.starts_with('4') || s.starts_with('5'))
                .collect();
            assert!(
                !errors.is_empty(),
                "{method} {path} documents no error response"
            );
            for status in errors {
                assert!(
                    responses[status]["content"]["application/problem+json"].is_object(),
                    "{method} {path} {status} is not documented as problem+json"
                );
            }
        }
    }
}

#[test]
fn operation_ids_read_as_what_they_do_and_no_rust_type_is_named() {
    let doc: Value = serde_json::from_str(&ctxd::openapi().to_json().unwrap()).unwrap();
    let mut ids = std::collections::BTreeSet::new();
    for (path, operations) in doc["paths"].as_object().unwrap() {
        for (method, operation) in operations.as_object().unwrap() {
            let id = operation["operationId"].as_str().unwrap_or_default();
            let verb = id.split('_').next().unwrap_or_default();
            assert!(
                [
                    "get", "list", "create", "delete", "append", "compact", "record", "recall",
                    "revoke"
                ]
                .contains(&verb)
                    && id.chars().all(|c| c.is_ascii_lowercase() || c == '_'),
                "{method} {path}: operation id `{id}` does not say what it does"
            );
            assert!(
                ids.insert(id.to_owned()),
                "operation id `{id}` is used twice"
            );
        }
    }
    let text = doc.to_string();
    for rust in ["BTreeMap", "HashMap", "IndexMap", "Vec<", "Option<", "::"] {
        assert!(
            !text.contains(rust),
            "the document names the Rust type `{rust}`"
        );
    }
}

on_both_backends! {
    async fn documented_bounds_are_the_ones_the_server_holds(app) {
        let doc: Value = serde_json::from_str(&ctxd::openapi().to_json().unwrap()).unwrap();
        let id = app.create_session(json!({})).await;
        let appended = app.append(&id, json!([{"type": "message", "role": "user", "content": "hi"}])).await;
        assert_eq!(appended.status, StatusCode::CREATED, "{}", appended.body);

        // Every `limit`: its documented minimum and maximum pass, one past either is a 400.
        let mut checked = 0;
        for (path, operations) in doc["paths"].as_object().unwrap() {
            let Some(parameters) = operations["get"]["parameters"].as_array() else { continue };
            let Some(limit) = parameters.iter().find(|p| p["name"] == "limit") else { continue };
            let (min, max) = (&limit["schema"]["minimum"], &limit["schema"]["maximum"]);
            let (min, max) = (min.as_i64().unwrap_or_else(|| panic!("{path}: limit has no minimum")),
                max.as_i64().unwrap_or_else(|| panic!("{path}: limit has no maximum")));
            let url = path.replace("{id}", &id).replace("{seq_or_event_id}", "1");
            for (value, ok) in [(min, true), (max, true), (min - 1, false), (max + 1, false)] {
                let reply = app.get(&format!("{url}?limit={value}")).await;
                let expected = if ok { StatusCode::OK } else { StatusCode::BAD_REQUEST };
                assert_eq!(reply.status, expected, "{path}?limit={value}: {}", reply.body);
            }
            checked += 1;
        }
        assert_eq!(checked, 6, "every paged operation documents its limit");

        // overflow_retry's documented range.
        let schema = &doc["components"]["schemas"]["CompactBody"]["properties"]["overflow_retry"];
        assert_eq!((schema["minimum"].as_i64(), schema["maximum"].as_i64()), (Some(0), Some(2)));
        for (retry, expected) in [(2, StatusCode::OK), (3, StatusCode::UNPROCESSABLE_ENTITY)] {
            let reply = app.post(&format!("/sessions/{id}/compact"), &json!({"overflow_retry": retry})).await;
            assert_eq!(reply.status, expected, "overflow_retry {retry}: {}", reply.body);
        }

        // The recall tool's formats are exactly the documented enum.
        let parameters = &doc["paths"]["/tools/recall_observation"]["get"]["parameters"];
        let formats = parameters[0]["schema"]["enum"].as_array().expect("format is an enum");
        for format in formats {
            let reply = app.get(&format!("/tools/recall_observation?format={}", format.as_str().unwrap())).await;
            assert_eq!(reply.status, StatusCode::OK, "{format}: {}", reply.body);
        }
        let reply = app.get("/tools/recall_observation?format=gemini").await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST);

        // Id, name and label lengths: the documented maximum passes, one more is refused.
        let event_id = &doc["components"]["schemas"]["NoteInput"]["properties"]["id"]["maxLength"];
        let n = event_id.as_u64().expect("the event id has a maxLength") as usize;
        for (len, expected) in [(n, StatusCode::CREATED), (n + 1, StatusCode::UNPROCESSABLE_ENTITY)] {
            let reply = app.append(&id, json!([{"id": "i".repeat(len), "type": "note", "content": "x"}])).await;
            assert_eq!(reply.status, expected, "an id of {len} characters: {}", reply.body);
        }
        let labels = &doc["components"]["schemas"]["NewSession"]["properties"]["metadata"];
        let key = labels["propertyNames"]["maxLength"].as_u64().expect("label keys have a maxLength") as usize;
        for (len, expected) in [(key, StatusCode::CREATED), (key + 1, StatusCode::UNPROCESSABLE_ENTITY)] {
            let reply = app.post("/sessions", &json!({"metadata": {"k".repeat(len): "v"}})).await;
            assert_eq!(reply.status, expected, "a label key of {len} characters: {}", reply.body);
        }
    }
}
