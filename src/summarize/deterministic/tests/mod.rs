//! Deterministic summariser tests: the events and sessions they summarise, built here, and
//! the tests by what they check.

mod digest;
mod errors;
mod file_actions;
mod findings;
mod requests;
mod touched;

use super::*;
use crate::domain::event::{
    EpisodeEnd, EpisodeKind, EpisodeStart, Event, EventBody, Message, Note, Role, ToolCall,
};
use chrono::DateTime;
use serde_json::{json, Value};

pub(super) fn event(seq: i64, body: EventBody) -> Event {
    Event {
        seq,
        id: None,
        body,
        pinned: false,
        metadata: None,
        tokens: 0,
        created_at: DateTime::UNIX_EPOCH,
        derived: Default::default(),
    }
}

pub(super) fn message(role: Role, content: &str) -> Message {
    Message {
        role,
        content: content.into(),
        tool_calls: Vec::new(),
        tool_call_id: None,
        name: None,
        is_error: None,
    }
}

pub(super) fn user(seq: i64, content: &str) -> Event {
    event(seq, EventBody::Message(message(Role::User, content)))
}

pub(super) fn assistant(seq: i64, content: &str) -> Event {
    event(seq, EventBody::Message(message(Role::Assistant, content)))
}

pub(super) fn call(seq: i64, id: &str, name: &str, arguments: Value) -> Event {
    event(
        seq,
        EventBody::Message(Message {
            tool_calls: vec![ToolCall {
                id: id.into(),
                name: name.into(),
                arguments,
                kind: Default::default(),
            }],
            ..message(Role::Assistant, "")
        }),
    )
}

pub(super) fn result(seq: i64, id: &str, content: &str, is_error: bool) -> Event {
    event(
        seq,
        EventBody::Message(Message {
            tool_call_id: Some(id.into()),
            is_error: Some(is_error),
            ..message(Role::Tool, content)
        }),
    )
}

pub(super) fn note(seq: i64, content: &str) -> Event {
    event(
        seq,
        EventBody::Note(Note {
            content: content.into(),
        }),
    )
}

pub(super) fn episode(seq: i64, name: &str, conclusion: &str) -> [Event; 2] {
    [
        event(
            seq,
            EventBody::EpisodeStart(EpisodeStart {
                name: name.into(),
                kind: EpisodeKind::Exploration,
                dependencies: Vec::new(),
            }),
        ),
        event(
            seq + 1,
            EventBody::EpisodeEnd(EpisodeEnd {
                name: name.into(),
                conclusion: conclusion.into(),
            }),
        ),
    ]
}

pub(super) fn run(previous: &Summary, events: &[Event], max_chars: usize) -> SummaryOutput {
    let events: Vec<&Event> = events.iter().collect();
    summarize(SummaryRequest {
        previous,
        events: &events,
        max_chars,
    })
}

/// Whether `text` lists `path` as touched, last by `action`: on a line of its own
/// (`- src/a.rs (last: Edit)`) or among its directory's files (`- in src/: a.rs (Edit), …`).
pub(super) fn lists_file(text: &str, path: &str, action: &str) -> bool {
    let (directory, name) = path.split_at(path.rfind('/').map_or(0, |at| at + 1));
    let item = format!("{name} ({action})");
    text.lines().any(|line| {
        line == format!("- {path} (last: {action})")
            || line
                .strip_prefix(&format!("- in {directory}: "))
                .is_some_and(|items| items.split(", ").any(|i| i == item))
    })
}

/// Whether `text` states the diagnostic `line` (`src/a.c:12:5: error: …`): as it is or among
/// its file's (`- in src/a.c: 12:5: error: …; 14:1: error: …`).
pub(super) fn states_error(text: &str, line: &str) -> bool {
    let (path, item) = line.split_once(':').expect("a diagnostic's path");
    text.contains(line)
        || text.lines().any(|l| {
            l.strip_prefix(&format!("- in {path}: "))
                .is_some_and(|items| items.split("; ").any(|i| i == item))
        })
}

pub(super) fn session() -> Vec<Event> {
    let mut events = vec![
        event(
            1,
            EventBody::Message(message(Role::System, "You are a coding agent.")),
        ),
        user(
            2,
            "Fix the login bug in auth.rs.\nIt rejects valid passwords.",
        ),
        call(3, "c1", "read_file", json!("{\"path\": \"src/auth.rs\"}")),
        result(4, "c1", "fn login() { ... }", false),
        call(
            5,
            "c2",
            "shell",
            json!({"command": "cargo test auth", "timeout": 60}),
        ),
        result(
            6,
            "c2",
            "\nerror[E0425]: cannot find value `hash`\n  --> src/auth.rs:3",
            true,
        ),
        note(7, "Never touch the database schema."),
    ];
    events.extend(episode(
        8,
        "explore-auth",
        "The hash is compared before salting.",
    ));
    events.push(user(10, "Also keep the old API working."));
    let mut pinned = user(11, "Use bcrypt, not sha1.");
    pinned.pinned = true;
    events.push(pinned);
    events.push(assistant(
        12,
        "Plan: salt first, then compare; rerun the tests.",
    ));
    events
}
