//! What a replica remembers of each session's conversation, so that a turn is matched without
//! reading the whole log: a fingerprint of every stored message, in order, and the newest
//! events a turn appended. Events never change, so what is remembered is never wrong, only
//! behind: a turn reads what was appended since (by any replica, by any path) before it matches.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::Mutex;

use uuid::Uuid;

use crate::domain::event::{Event, EventBody, NewEvent, Role};

/// Sessions a replica remembers before it starts over.
const REMEMBERED_SESSIONS: usize = 10_000;

/// A fingerprint of what an event says: equal bodies (tool-call arguments held as text) have
/// equal fingerprints.
pub fn fingerprint(body: &EventBody) -> u64 {
    // Both sides are canonical (arguments held as text), so their JSON is the same.
    let json = serde_json::to_vec(body).unwrap_or_default();
    foldhash::fast::FixedState::with_seed(0x6374_7864).hash_one(json)
}

/// A stored message.
#[derive(Debug, Clone, Copy)]
pub struct Entry {
    pub fingerprint: u64,
    pub system: bool,
}

/// One session's conversation as a replica remembers it.
#[derive(Debug, Clone, Default)]
pub struct Ledger {
    /// The newest seq taken into account.
    pub head_seq: i64,
    /// Every stored message, in seq order.
    pub messages: Vec<Entry>,
    /// The trailing run of events appended by one turn (their ids share its prefix), as
    /// (seq, id): a retry of that turn is recognised by it.
    pub last_turn: Vec<(i64, String)>,
}

impl Ledger {
    /// Takes stored `events` (newer than `head_seq`, in seq order) into account.
    pub fn extend(&mut self, events: &[Event]) {
        for event in events {
            if event.seq > self.head_seq {
                self.push(event.seq, event.id.as_deref(), &event.body);
            }
        }
    }

    /// Takes `events`, just appended at `seqs`, into account.
    pub fn extend_appended(&mut self, events: &[NewEvent], seqs: &[i64]) {
        for (event, &seq) in events.iter().zip(seqs) {
            if seq > self.head_seq {
                self.push(seq, event.id.as_deref(), &event.body);
            }
        }
    }

    fn push(&mut self, seq: i64, id: Option<&str>, body: &EventBody) {
        self.head_seq = seq;
        if matches!(body, EventBody::Message(_)) {
            self.messages.push(Entry {
                fingerprint: fingerprint(body),
                system: body.role() == Some(Role::System),
            });
        }
        match id.and_then(turn_prefix) {
            Some(prefix) => {
                let same_turn = self
                    .last_turn
                    .last()
                    .is_some_and(|(_, last)| turn_prefix(last) == Some(prefix));
                if !same_turn {
                    self.last_turn.clear();
                }
                self.last_turn
                    .push((seq, id.unwrap_or_default().to_owned()));
            }
            None => self.last_turn.clear(),
        }
    }

    /// The seqs the turn whose ids start with `prefix` appended, when its events are the
    /// newest of the log.
    pub fn earlier_try(&self, prefix: &str) -> Option<Vec<i64>> {
        let (last_seq, last_id) = self.last_turn.last()?;
        (*last_seq == self.head_seq && last_id.starts_with(prefix))
            .then(|| self.last_turn.iter().map(|(seq, _)| *seq).collect())
    }
}

/// `turn:<digest>:` of an id a turn gave.
fn turn_prefix(id: &str) -> Option<&str> {
    let rest = id.strip_prefix("turn:")?;
    let digest = rest.split(':').next()?;
    Some(&id[..5 + digest.len() + 1])
}

/// Each session's ledger, bounded.
#[derive(Debug, Default)]
pub struct Ledgers {
    sessions: Mutex<HashMap<Uuid, Ledger>>,
}

impl Ledgers {
    /// Takes a session's ledger out (a concurrent turn of the same session starts from the log).
    pub fn take(&self, session_id: Uuid) -> Ledger {
        self.sessions
            .lock()
            .ok()
            .and_then(|mut map| map.remove(&session_id))
            .unwrap_or_default()
    }

    pub fn put(&self, session_id: Uuid, ledger: Ledger) {
        if let Ok(mut map) = self.sessions.lock() {
            if map.len() >= REMEMBERED_SESSIONS {
                map.clear();
            }
            map.insert(session_id, ledger);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turn_prefix_is_its_digest() {
        assert_eq!(turn_prefix("turn:abc:3"), Some("turn:abc:"));
        assert_eq!(turn_prefix("m1"), None);
    }
}
