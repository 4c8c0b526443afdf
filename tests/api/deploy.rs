//! The container files: there is no container engine here, so check what can be checked.

use serde_yaml::Value;

#[test]
fn compose_runs_ctxd_on_a_healthy_postgres() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/compose.yaml"))
        .expect("compose.yaml");
    let compose: Value = serde_yaml::from_str(&text).expect("compose.yaml is valid YAML");
    let services = &compose["services"];
    let postgres = &services["postgres"];
    assert!(postgres["image"].as_str().unwrap().starts_with("postgres"));
    assert!(
        postgres["healthcheck"]["test"].is_sequence(),
        "postgres has a healthcheck"
    );

    let ctxd = &services["ctxd"];
    assert_eq!(
        ctxd["depends_on"]["postgres"]["condition"].as_str(),
        Some("service_healthy"),
        "ctxd waits for a healthy postgres"
    );
    let url = ctxd["environment"]["CTXD_DATABASE_URL"]
        .as_str()
        .expect("CTXD_DATABASE_URL");
    assert!(
        url.starts_with("postgres://") && url.contains("@postgres:"),
        "{url}"
    );
    let listen = ctxd["environment"]["CTXD_LISTEN"]
        .as_str()
        .expect("CTXD_LISTEN");
    assert!(
        listen.starts_with("0.0.0.0:"),
        "reachable from outside the container: {listen}"
    );
    // Open mode beyond loopback is the container's only: the host publishes it on loopback.
    if ctxd["environment"]["CTXD_INSECURE_OPEN"].as_str() == Some("true") {
        for port in ctxd["ports"].as_sequence().expect("ports") {
            let port = port.as_str().expect("a port mapping");
            assert!(
                port.starts_with("127.0.0.1:"),
                "published beyond loopback: {port}"
            );
        }
    }
}

#[test]
fn dockerfile_builds_in_stages_and_runs_unprivileged() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Dockerfile"))
        .expect("Dockerfile");
    let stages = text.lines().filter(|l| l.starts_with("FROM ")).count();
    assert!(stages >= 2, "multi-stage");
    let user = text
        .lines()
        .rev()
        .find(|l| l.starts_with("USER "))
        .expect("a USER line");
    assert!(
        !user.contains("root") && !user.ends_with(" 0"),
        "runs as non-root: {user}"
    );
    assert!(
        text.contains("HEALTHCHECK") && text.contains("ctxd\", \"healthcheck"),
        "healthcheck"
    );
    assert!(
        text.contains("COPY migrations"),
        "the build sees the migrations it embeds"
    );
}
