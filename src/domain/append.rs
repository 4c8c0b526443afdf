//! The rules of an append against what the log already holds: idempotent retries, optimistic
//! concurrency, tool-call pairing and the episodes' rules. A store gathers the facts inside its transaction; this
//! module decides, so both backends apply exactly the same rules.

use std::collections::{HashMap, HashSet};

use super::episodes::Episodes;
use super::event::{Event, EventBody, NewEvent};
use super::pairing::OpenCalls;
use super::FieldError;
use crate::tokens::{self, Tokenizer};

/// What the log holds that matters to one batch.
#[derive(Debug, Default)]
pub struct LogFacts {
    pub head_seq: i64,
    /// Stored events whose client id appears in the batch, by id.
    pub existing: HashMap<String, Event>,
    /// For each call id the batch issues or answers: what the log already says of it.
    pub calls: HashMap<String, CallFacts>,
    /// The session's episodes so far; loaded only for a batch with episode events.
    pub episodes: Episodes,
}

/// The stored state of one tool-call id.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CallFacts {
    /// The seq of the call with this id that is still unanswered, if any.
    pub open_call_seq: Option<i64>,
    /// Whether some earlier call with this id has been answered.
    pub answered: bool,
}

/// A validated event with its token cost.
#[derive(Debug, Clone)]
pub struct CountedEvent {
    pub event: NewEvent,
    pub tokens: i64,
}

/// Counts every event's tokens with the session's tokenizer, on the blocking pool (see
/// [`tokens::count_all`]). Fails only if a counting task panicked.
pub async fn count(
    tokenizer: Tokenizer,
    events: Vec<NewEvent>,
) -> Result<Vec<CountedEvent>, tokio::task::JoinError> {
    let counted = tokens::count_all(tokenizer, events, text_bytes, |event, tokenizer| {
        event.body.tokens(tokenizer)
    })
    .await?;
    Ok(counted
        .into_iter()
        .map(|(event, tokens)| CountedEvent { event, tokens })
        .collect())
}

/// About how many bytes of text counting `event` reads: shares a large batch between the cores.
fn text_bytes(event: &NewEvent) -> usize {
    match &event.body {
        EventBody::Message(m) => {
            m.content.text().len()
                + m.name.as_ref().map_or(0, String::len)
                + m.tool_calls
                    .iter()
                    .map(|c| c.name.len() + c.arguments_text().len())
                    .sum::<usize>()
        }
        EventBody::Note(n) => n.content.len(),
        EventBody::EpisodeStart(e) => {
            e.name.len() + e.dependencies.iter().map(String::len).sum::<usize>()
        }
        EventBody::EpisodeEnd(e) => e.name.len() + e.conclusion.len(),
    }
}

/// The outcome for one event of the batch, in batch order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ack {
    pub seq: i64,
    pub id: Option<String>,
    pub tokens: i64,
    /// True when the event was already stored (an idempotent retry) and nothing was written.
    pub replayed: bool,
}

/// What the store must write.
#[derive(Debug, Default)]
pub struct AppendPlan {
    /// Indexes into the batch of the events to insert, with their new seqs, in seq order.
    pub inserts: Vec<(usize, i64)>,
    pub acks: Vec<Ack>,
    /// Calls the batch issues, with their result when the batch also answers them.
    pub new_calls: Vec<NewCall>,
    /// Calls stored before this batch that it answers: (call id, call seq, result seq).
    pub answered_calls: Vec<(String, i64, i64)>,
    pub new_head_seq: i64,
    pub added_tokens: i64,
}

/// A tool call issued by the batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewCall {
    pub call_id: String,
    pub call_seq: i64,
    pub result_seq: Option<i64>,
}

/// Why an append was refused. Nothing of the batch is written.
#[derive(Debug, Clone, PartialEq)]
pub enum AppendRejection {
    Invalid(Vec<FieldError>),
    /// A client id is already stored with different content.
    IdConflict {
        index: usize,
        id: String,
        seq: i64,
    },
    /// `expected_seq` is not the log's head.
    SeqMismatch {
        expected: i64,
        head_seq: i64,
    },
}

/// Every call id a batch issues or answers: the ids whose [`CallFacts`] the store must load.
pub fn referenced_call_ids(batch: &[CountedEvent]) -> Vec<String> {
    let mut ids: Vec<String> = batch
        .iter()
        .flat_map(|c| {
            let body = &c.event.body;
            body.tool_calls()
                .iter()
                .map(|call| call.id.clone())
                .chain(body.tool_call_id().map(str::to_owned))
        })
        .collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// Whether a batch starts or ends an episode: the store must then load the session's episodes.
pub fn has_episode_events(batch: &[CountedEvent]) -> bool {
    batch.iter().any(|c| {
        matches!(
            c.event.body,
            EventBody::EpisodeStart(_) | EventBody::EpisodeEnd(_)
        )
    })
}

/// Every client id in a batch: the ids whose stored events the store must load.
pub fn client_ids(batch: &[CountedEvent]) -> Vec<String> {
    batch.iter().filter_map(|c| c.event.id.clone()).collect()
}

/// Decides what an append writes, or why it is refused.
pub fn plan_append(
    batch: &[CountedEvent],
    expected_seq: Option<i64>,
    facts: &LogFacts,
) -> Result<AppendPlan, AppendRejection> {
    if batch.is_empty() {
        return Err(AppendRejection::Invalid(vec![FieldError::new(
            "events",
            "must contain at least one event",
        )]));
    }

    // Client ids: duplicates within the batch, then retries of stored events.
    let mut errors = Vec::new();
    let mut seen: HashMap<&str, usize> = HashMap::new();
    let mut replayed: Vec<Option<&Event>> = vec![None; batch.len()];
    for (index, counted) in batch.iter().enumerate() {
        let Some(id) = counted.event.id.as_deref() else {
            continue;
        };
        if let Some(first) = seen.insert(id, index) {
            errors.push(FieldError::at(
                index,
                "id",
                format!("id `{id}` appears twice in this batch (first at index {first})"),
            ));
        } else if let Some(stored) = facts.existing.get(id) {
            if !stored.same_as(&counted.event) {
                return Err(AppendRejection::IdConflict {
                    index,
                    id: id.to_owned(),
                    seq: stored.seq,
                });
            }
            replayed[index] = Some(stored);
        }
    }
    if !errors.is_empty() {
        return Err(AppendRejection::Invalid(errors));
    }

    // A batch that is wholly a retry succeeds whatever the head is now: the client's first
    // attempt was acknowledged, it just never heard.
    let all_replayed = replayed.iter().all(Option::is_some);
    if let Some(expected) = expected_seq {
        if !all_replayed && expected != facts.head_seq {
            return Err(AppendRejection::SeqMismatch {
                expected,
                head_seq: facts.head_seq,
            });
        }
    }

    let mut plan = AppendPlan {
        new_head_seq: facts.head_seq,
        ..AppendPlan::default()
    };
    let mut pairing = Pairing::new(facts);
    let mut episodes = facts.episodes.clone();
    for (index, counted) in batch.iter().enumerate() {
        if let Some(stored) = replayed[index] {
            plan.acks.push(Ack {
                seq: stored.seq,
                id: stored.id.clone(),
                tokens: stored.tokens,
                replayed: true,
            });
            continue;
        }
        plan.new_head_seq += 1;
        let seq = plan.new_head_seq;
        pairing.apply(index, seq, counted, &mut plan, &mut errors);
        if let Err(error) = episodes.apply(index, seq, &counted.event.body) {
            errors.push(error);
        }
        plan.inserts.push((index, seq));
        plan.added_tokens += counted.tokens;
        plan.acks.push(Ack {
            seq,
            id: counted.event.id.clone(),
            tokens: counted.tokens,
            replayed: false,
        });
    }
    if errors.is_empty() {
        Ok(plan)
    } else {
        Err(AppendRejection::Invalid(errors))
    }
}

/// A call the batch issued and has not answered yet.
#[derive(Debug, Clone, Copy)]
struct IssuedHere {
    seq: i64,
    /// Its index in `AppendPlan::new_calls`.
    index: usize,
}

/// The open and answered call ids as the batch unfolds over the stored facts, paired by the one
/// rule of [`OpenCalls`].
struct Pairing<'a> {
    facts: &'a HashMap<String, CallFacts>,
    /// Calls issued by this batch and still open.
    issued: OpenCalls<'a, IssuedHere>,
    /// Ids whose calls the batch answered: their stored open call, if any, is no longer open.
    answered: HashSet<&'a str>,
}

impl<'a> Pairing<'a> {
    fn new(facts: &'a LogFacts) -> Self {
        Self {
            facts: &facts.calls,
            issued: OpenCalls::default(),
            answered: HashSet::new(),
        }
    }

    /// The seq of the open call of `id`: one issued in this batch, else a stored one that the
    /// batch has not answered.
    fn open_call(&self, id: &str) -> Option<i64> {
        if let Some(call) = self.issued.get(id) {
            return Some(call.seq);
        }
        if self.answered.contains(id) {
            return None;
        }
        self.facts.get(id).and_then(|f| f.open_call_seq)
    }

    fn was_answered(&self, id: &str) -> bool {
        self.answered.contains(id) || self.facts.get(id).is_some_and(|f| f.answered)
    }

    fn apply(
        &mut self,
        index: usize,
        seq: i64,
        counted: &'a CountedEvent,
        plan: &mut AppendPlan,
        errors: &mut Vec<FieldError>,
    ) {
        let body = &counted.event.body;
        for (i, call) in body.tool_calls().iter().enumerate() {
            if let Some(earlier) = self.open_call(&call.id) {
                errors.push(FieldError::at(
                    index,
                    format!("tool_calls[{i}].id"),
                    format!(
                        "call id `{}` is issued again while its call at seq {earlier} is still unanswered",
                        call.id
                    ),
                ));
                continue;
            }
            let issued = IssuedHere {
                seq,
                index: plan.new_calls.len(),
            };
            self.issued.issue(&call.id, issued);
            plan.new_calls.push(NewCall {
                call_id: call.id.clone(),
                call_seq: seq,
                result_seq: None,
            });
        }
        if let Some(id) = body.tool_call_id() {
            if let Some(call) = self.issued.answer(id) {
                plan.new_calls[call.index].result_seq = Some(seq);
                self.answered.insert(id);
            } else if let Some(call_seq) = self.open_call(id) {
                plan.answered_calls.push((id.to_owned(), call_seq, seq));
                self.answered.insert(id);
            } else if self.was_answered(id) {
                errors.push(FieldError::at(
                    index,
                    "tool_call_id",
                    format!("call `{id}` has already been answered; a call takes one result"),
                ));
            } else {
                errors.push(FieldError::at(
                    index,
                    "tool_call_id",
                    format!("`{id}` matches no call issued earlier in this session or batch"),
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::event::EventInput;
    use serde_json::json;

    fn batch(events: serde_json::Value) -> Vec<CountedEvent> {
        let inputs: Vec<EventInput> = serde_json::from_value(events).unwrap();
        inputs
            .into_iter()
            .enumerate()
            .map(|(i, e)| CountedEvent {
                event: e.validate(i).unwrap(),
                tokens: 10,
            })
            .collect()
    }

    fn call(id: &str) -> serde_json::Value {
        json!({"type":"message","role":"assistant","tool_calls":[{"id":id,"name":"ls"}]})
    }

    fn result(id: &str) -> serde_json::Value {
        json!({"type":"message","role":"tool","tool_call_id":id,"content":"ok"})
    }

    fn invalid(r: Result<AppendPlan, AppendRejection>) -> Vec<(usize, String)> {
        match r {
            Err(AppendRejection::Invalid(errors)) => errors
                .into_iter()
                .map(|e| (e.index.unwrap(), e.field))
                .collect(),
            other => panic!("expected Invalid, got {other:?}"),
        }
    }

    #[test]
    fn seqs_follow_the_head_and_calls_pair_up() {
        let facts = LogFacts {
            head_seq: 7,
            ..LogFacts::default()
        };
        let plan = plan_append(&batch(json!([call("a"), result("a")])), Some(7), &facts).unwrap();
        assert_eq!(plan.inserts, vec![(0, 8), (1, 9)]);
        assert_eq!(
            plan.new_calls,
            vec![NewCall {
                call_id: "a".into(),
                call_seq: 8,
                result_seq: Some(9)
            }]
        );
        assert!(plan.answered_calls.is_empty());
        assert_eq!(plan.new_head_seq, 9);
        assert_eq!(plan.added_tokens, 20);
    }

    #[test]
    fn results_must_answer_an_open_call() {
        let mut facts = LogFacts::default();
        assert_eq!(
            invalid(plan_append(&batch(json!([result("x")])), None, &facts)),
            [(0, "tool_call_id".to_string())]
        );
        // Answered earlier in the session: a second result is refused.
        facts.calls.insert(
            "x".into(),
            CallFacts {
                open_call_seq: None,
                answered: true,
            },
        );
        assert_eq!(
            invalid(plan_append(&batch(json!([result("x")])), None, &facts)),
            [(0, "tool_call_id".to_string())]
        );
        // Answered earlier in the same batch.
        assert_eq!(
            invalid(plan_append(
                &batch(json!([call("y"), result("y"), result("y")])),
                None,
                &facts
            )),
            [(2, "tool_call_id".to_string())]
        );
    }

    #[test]
    fn a_call_id_may_be_reused_once_answered_but_not_while_open() {
        let facts = LogFacts {
            head_seq: 2,
            calls: [(
                "c".to_string(),
                CallFacts {
                    open_call_seq: Some(2),
                    answered: true,
                },
            )]
            .into(),
            ..LogFacts::default()
        };
        assert_eq!(
            invalid(plan_append(&batch(json!([call("c")])), None, &facts)),
            [(0, "tool_calls[0].id".to_string())]
        );
        // Answer the open one, then issue and answer the id again: each result pairs with the
        // most recent unanswered call.
        let plan = plan_append(
            &batch(json!([result("c"), call("c"), result("c")])),
            None,
            &facts,
        )
        .unwrap();
        assert_eq!(plan.answered_calls, vec![("c".into(), 2, 3)]);
        assert_eq!(
            plan.new_calls,
            vec![NewCall {
                call_id: "c".into(),
                call_seq: 4,
                result_seq: Some(5)
            }]
        );
    }

    #[test]
    fn every_error_of_the_batch_is_reported() {
        let errors = invalid(plan_append(
            &batch(json!([result("a"), call("b"), call("b"), result("z")])),
            None,
            &LogFacts::default(),
        ));
        assert_eq!(
            errors,
            [
                (0, "tool_call_id".to_string()),
                (2, "tool_calls[0].id".to_string()),
                (3, "tool_call_id".to_string())
            ]
        );
    }

    #[test]
    fn retries_are_acknowledged_with_the_stored_seq() {
        let first = batch(json!([{"id":"u1","type":"message","role":"user","content":"hi"}]));
        let stored = Event {
            seq: 4,
            id: Some("u1".into()),
            body: first[0].event.body.clone(),
            pinned: false,
            metadata: None,
            tokens: 10,
            created_at: chrono::Utc::now(),
            derived: Default::default(),
        };
        let facts = LogFacts {
            head_seq: 9,
            existing: [("u1".to_string(), stored)].into(),
            ..LogFacts::default()
        };
        // A stale expected_seq does not fail a pure retry.
        let plan = plan_append(&first, Some(3), &facts).unwrap();
        assert!(plan.inserts.is_empty());
        assert_eq!(plan.acks[0].seq, 4);
        assert!(plan.acks[0].replayed);

        let changed = batch(json!([{"id":"u1","type":"message","role":"user","content":"bye"}]));
        assert_eq!(
            plan_append(&changed, None, &facts).unwrap_err(),
            AppendRejection::IdConflict {
                index: 0,
                id: "u1".into(),
                seq: 4
            }
        );

        let twice = batch(json!([
            {"id":"n","type":"note","content":"a"},
            {"id":"n","type":"note","content":"a"}
        ]));
        assert_eq!(
            invalid(plan_append(&twice, None, &facts)),
            [(1, "id".to_string())]
        );
    }

    #[test]
    fn expected_seq_must_match_the_head() {
        let facts = LogFacts {
            head_seq: 5,
            ..LogFacts::default()
        };
        let b = batch(json!([{"type":"note","content":"x"}]));
        assert_eq!(
            plan_append(&b, Some(4), &facts).unwrap_err(),
            AppendRejection::SeqMismatch {
                expected: 4,
                head_seq: 5
            }
        );
        assert!(plan_append(&b, Some(5), &facts).is_ok());
        assert!(plan_append(&b, None, &facts).is_ok());
    }
}

#[cfg(test)]
mod properties {
    //! The planner against a reference model that replays the whole log from the start.

    use std::collections::{HashMap, HashSet};

    use proptest::prelude::*;

    use super::*;
    use crate::domain::event::{EventBody, Message, Role, ToolCall};

    #[derive(Debug, Clone)]
    enum Op {
        Say,
        Call(Vec<u8>),
        Answer(u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            Just(Op::Say),
            proptest::collection::vec(0u8..4, 1..3).prop_map(Op::Call),
            (0u8..4).prop_map(Op::Answer),
        ]
    }

    fn event(op: &Op) -> CountedEvent {
        let message = |role, content: &str, tool_calls, tool_call_id| Message {
            role,
            content: content.into(),
            tool_calls,
            tool_call_id,
            name: None,
            is_error: (role == Role::Tool).then_some(false),
        };
        let body = match op {
            Op::Say => message(Role::User, "hi", vec![], None),
            Op::Call(ids) => {
                let mut calls: Vec<ToolCall> = Vec::new();
                for id in ids {
                    let id = format!("c{id}");
                    if !calls.iter().any(|c| c.id == id) {
                        calls.push(ToolCall {
                            id,
                            name: "t".into(),
                            arguments: serde_json::json!({}),
                            kind: Default::default(),
                        });
                    }
                }
                message(Role::Assistant, "", calls, None)
            }
            Op::Answer(id) => message(Role::Tool, "ok", vec![], Some(format!("c{id}"))),
        };
        CountedEvent {
            event: NewEvent {
                id: None,
                body: EventBody::Message(body),
                pinned: false,
                metadata: None,
            },
            tokens: 1,
        }
    }

    /// Whether a whole log pairs up: each result answers the most recent open call of its id,
    /// and no id is issued while open.
    fn log_is_valid(log: &[CountedEvent]) -> bool {
        let mut open = HashSet::new();
        for e in log {
            for call in e.event.body.tool_calls() {
                if !open.insert(call.id.clone()) {
                    return false;
                }
            }
            if let Some(id) = e.event.body.tool_call_id() {
                if !open.remove(id) {
                    return false;
                }
            }
        }
        true
    }

    /// The store's part: the facts of the referenced call ids, from the calls table.
    fn facts(
        head_seq: i64,
        calls: &[(String, i64, Option<i64>)],
        batch: &[CountedEvent],
    ) -> LogFacts {
        let referenced: HashSet<String> = referenced_call_ids(batch).into_iter().collect();
        let mut map: HashMap<String, CallFacts> = HashMap::new();
        for (id, call_seq, result) in calls.iter().filter(|c| referenced.contains(&c.0)) {
            let f = map.entry(id.clone()).or_default();
            match result {
                None => f.open_call_seq = Some(*call_seq),
                Some(_) => f.answered = true,
            }
        }
        LogFacts {
            head_seq,
            existing: HashMap::new(),
            calls: map,
            episodes: Default::default(),
        }
    }

    proptest! {
        #[test]
        fn the_planner_accepts_exactly_the_batches_that_keep_the_log_valid(
            batches in proptest::collection::vec(proptest::collection::vec(op(), 1..6), 1..12)
        ) {
            let mut log: Vec<CountedEvent> = Vec::new();
            let mut calls: Vec<(String, i64, Option<i64>)> = Vec::new();
            for ops in batches {
                let batch: Vec<CountedEvent> = ops.iter().map(event).collect();
                let head = log.len() as i64;
                let mut candidate = log.clone();
                candidate.extend(batch.iter().cloned());
                let expected_valid = log_is_valid(&candidate);
                match plan_append(&batch, Some(head), &facts(head, &calls, &batch)) {
                    Ok(plan) => {
                        prop_assert!(expected_valid, "accepted a batch that breaks pairing: {ops:?}");
                        let seqs: Vec<i64> = plan.inserts.iter().map(|(_, s)| *s).collect();
                        prop_assert_eq!(seqs, (head + 1..=head + batch.len() as i64).collect::<Vec<_>>());
                        // Apply the plan as a store does.
                        for (id, call_seq, result_seq) in &plan.answered_calls {
                            let row = calls.iter_mut().find(|c| &c.0 == id && c.1 == *call_seq && c.2.is_none());
                            prop_assert!(row.is_some(), "answers a call that is not open");
                            row.unwrap().2 = Some(*result_seq);
                        }
                        for c in &plan.new_calls {
                            calls.push((c.call_id.clone(), c.call_seq, c.result_seq));
                        }
                        let open: Vec<_> = calls.iter().filter(|c| c.2.is_none()).map(|c| &c.0).collect();
                        let unique: HashSet<_> = open.iter().collect();
                        prop_assert_eq!(open.len(), unique.len(), "one open call per id");
                        log = candidate;
                    }
                    Err(AppendRejection::Invalid(errors)) => {
                        prop_assert!(!expected_valid, "refused a valid batch: {ops:?}: {errors:?}");
                        prop_assert!(!errors.is_empty());
                    }
                    Err(other) => prop_assert!(false, "unexpected rejection {other:?}"),
                }
            }
        }
    }
}
