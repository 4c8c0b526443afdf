//! The committed OpenAPI document is the one the code generates.

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
