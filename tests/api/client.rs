//! A client generated from the committed OpenAPI document works: openapi-python-client generates
//! it without a single warning, and the generated code drives a real session and reads its log
//! back as typed events.
//!
//! `scripts/test` installs openapi-python-client beside the providers' SDKs and sets
//! `CTXD_PROVIDER_PYTHON` to that environment's interpreter.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::on_both_backends;

const DOCUMENT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/openapi/openapi.json");
const PACKAGE: &str = "ctxd_client";

fn python() -> PathBuf {
    PathBuf::from(std::env::var("CTXD_PROVIDER_PYTHON").unwrap_or_else(|_| {
        panic!(
            "CTXD_PROVIDER_PYTHON is not set: run the suite with scripts/test, which installs \
             openapi-python-client in a virtual environment and sets it"
        )
    }))
}

/// Runs the environment's interpreter with its own tools (ruff, which the generator runs on its
/// output) first on the PATH.
fn run_python(args: &[&str], dir: &Path) -> Output {
    let python = python();
    let bin = python
        .parent()
        .expect("the interpreter is in a bin directory");
    let path = std::env::join_paths(std::iter::once(bin.to_path_buf()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .expect("PATH");
    Command::new(&python)
        .args(args)
        .current_dir(dir)
        .env("PATH", path)
        .output()
        .expect("the interpreter runs")
}

fn report(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Generates the client into `dir/ctxd_client`; fails naming every warning or error printed.
fn generate(dir: &Path) {
    let target = dir.join(PACKAGE);
    let target = target.to_str().expect("a UTF-8 path");
    let out = run_python(
        &[
            "-m",
            "openapi_python_client",
            "generate",
            "--path",
            DOCUMENT,
            "--output-path",
            target,
            "--meta",
            "none",
            "--fail-on-warning",
        ],
        dir,
    );
    let printed = report(&out);
    let complaints: Vec<&str> = printed
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("Generating "))
        .collect();
    assert!(
        out.status.success() && complaints.is_empty(),
        "openapi-python-client does not take openapi/openapi.json cleanly:\n{printed}"
    );
}

#[test]
fn the_generator_takes_the_document_without_a_warning() {
    let dir = tempfile::tempdir().expect("temporary directory");
    generate(dir.path());
}

/// Drives a session with the generated client; prints what it read back.
const SCRIPT: &str = r#"
import sys
from ctxd_client import Client
from ctxd_client.api.sessions import create_session, list_sessions
from ctxd_client.api.events import append_events, list_events
from ctxd_client.models import (
    AppendRequest, EventPage, MessageEvent, MessageInput, NewSession, NoteEvent, NoteInput,
    Session,
)

client = Client(base_url=sys.argv[1], raise_on_unexpected_status=True)
session = create_session.sync(client=client, body=NewSession())
assert isinstance(session, Session), session
events = [
    {"id": "u1", "type": "message", "role": "user", "content": "List src/"},
    {"id": "a1", "type": "message", "role": "assistant", "content": "",
     "tool_calls": [{"id": "c1", "name": "shell", "arguments": {"cmd": "ls src"}},
                    {"id": "c2", "name": "shell", "arguments": "{\"cmd\":\"pwd\"}"}]},
    {"id": "t1", "type": "message", "role": "tool", "tool_call_id": "c1", "name": "shell",
     "content": "main.rs"},
    {"type": "message", "role": "tool", "tool_call_id": "c2", "content": "/work"},
    {"type": "note", "content": "Only src/ matters", "pinned": True},
]
typed = {"message": MessageInput, "note": NoteInput}
body = AppendRequest(events=[typed[e["type"]].from_dict(e) for e in events])
appended = append_events.sync(client=client, id=session.id, body=body)
assert appended.head_seq == 5, appended
page = list_events.sync(client=client, id=session.id)
assert isinstance(page, EventPage), page
kinds = [type(e).__name__ for e in page.events]
assert kinds == ["MessageEvent"] * 4 + ["NoteEvent"], kinds
calls = [(c.id, c.arguments) for c in page.events[1].tool_calls]
assert calls == [("c1", '{"cmd":"ls src"}'), ("c2", '{"cmd":"pwd"}')], calls
assert page.events[4].pinned is True
labelled = create_session.sync(client=client, body=NewSession.from_dict({"metadata": {"agent": "coder"}}))
found = list_sessions.sync(client=client, label=["agent=coder"])
assert [s.id for s in found.sessions] == [labelled.id], found
print("read back", kinds)
"#;

on_both_backends! {
    async fn a_generated_client_reads_the_log_as_typed_events(app) {
        let dir = tempfile::tempdir().expect("temporary directory");
        generate(dir.path());
        let base = app.url("");
        let out = tokio::task::spawn_blocking({
            let dir = dir.path().to_path_buf();
            move || run_python(&["-c", SCRIPT, &base], &dir)
        })
        .await
        .expect("the client runs");
        assert!(out.status.success(), "the generated client failed:\n{}", report(&out));
    }
}
