//! The store contract, on both backends, below the HTTP layer.

use ctxd::domain::append::{AppendRejection, CountedEvent};
use ctxd::domain::event::EventInput;
use ctxd::domain::session::NewSession;
use ctxd::store::{AppendError, SessionFilter};
use serde_json::{json, Value};

use crate::store_on_both_backends;
use crate::support::{Backend, TestStore};

fn batch(events: Value) -> Vec<CountedEvent> {
    let inputs: Vec<EventInput> = serde_json::from_value(events).unwrap();
    inputs
        .into_iter()
        .enumerate()
        .map(|(i, e)| CountedEvent {
            event: e.validate(i).unwrap(),
            tokens: 3,
        })
        .collect()
}

fn labelled(pairs: &[(&str, &str)]) -> NewSession {
    NewSession {
        metadata: pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..NewSession::default()
    }
}

store_on_both_backends! {
    async fn sessions_round_trip(store) {
        let created = store.create_session(&labelled(&[("team", "x")]), "default").await.unwrap();
        let fetched = store.get_session(created.id).await.unwrap().unwrap();
        assert_eq!(fetched.id, created.id);
        assert_eq!(fetched.config, created.config);
        assert_eq!(fetched.metadata, created.metadata);
        assert_eq!(fetched.head_seq, 0);
        let second = store.create_session(&labelled(&[("team", "y")]), "default").await.unwrap();

        let all = store.list_sessions(&SessionFilter { limit: 10, ..Default::default() }).await.unwrap();
        assert_eq!(all.iter().map(|s| s.id).collect::<Vec<_>>(), [second.id, created.id]);
        let older = store
            .list_sessions(&SessionFilter { limit: 10, before: Some(second.id), ..Default::default() })
            .await
            .unwrap();
        assert_eq!(older.iter().map(|s| s.id).collect::<Vec<_>>(), [created.id]);
        let team_y = store
            .list_sessions(&SessionFilter { limit: 10, labels: labelled(&[("team", "y")]).metadata, ..Default::default() })
            .await
            .unwrap();
        assert_eq!(team_y.iter().map(|s| s.id).collect::<Vec<_>>(), [second.id]);

        assert!(store.delete_session(created.id).await.unwrap());
        assert!(!store.delete_session(created.id).await.unwrap());
        assert!(store.get_session(created.id).await.unwrap().is_none());
    }
}

store_on_both_backends! {
    async fn appends_are_all_or_nothing(store) {
        let s = store.create_session(&NewSession::default(), "default").await.unwrap();
        let call = json!({"type": "message", "role": "assistant", "tool_calls": [{"id": "x", "name": "ls"}]});
        let ghost = json!({"type": "message", "role": "tool", "tool_call_id": "ghost", "content": "?"});
        let refused = store.append_events(s.id, &batch(json!([call, ghost])), None).await;
        assert!(matches!(refused, Err(AppendError::Rejected(AppendRejection::Invalid(_)))));
        assert_eq!(store.get_session(s.id).await.unwrap().unwrap().head_seq, 0);
        assert!(store.list_events(s.id, 0, 10).await.unwrap().is_empty());
        // The refused batch's call was not recorded either: its result has nothing to answer.
        let answer = json!({"type": "message", "role": "tool", "tool_call_id": "x", "content": "a"});
        assert!(store.append_events(s.id, &batch(json!([answer.clone()])), None).await.is_err());

        let outcome = store.append_events(s.id, &batch(json!([call, answer])), Some(0)).await.unwrap();
        assert_eq!(outcome.head_seq, 2);
        assert_eq!(outcome.acks.iter().map(|a| a.seq).collect::<Vec<_>>(), [1, 2]);
        let session = store.get_session(s.id).await.unwrap().unwrap();
        assert_eq!((session.head_seq, session.total_tokens), (2, 6));
        assert!(session.updated_at >= session.created_at);
        let events = store.list_events(s.id, 0, 10).await.unwrap();
        assert_eq!(events.iter().map(|e| e.seq).collect::<Vec<_>>(), [1, 2]);
        assert_eq!(events[1].body.tool_call_id(), Some("x"));
        assert_eq!(store.list_events(s.id, 1, 10).await.unwrap().len(), 1);
        assert_eq!(store.list_events(s.id, 0, 1).await.unwrap().len(), 1);
    }
}

store_on_both_backends! {
    async fn events_are_found_by_their_client_id_within_their_session(store) {
        let s = store.create_session(&NewSession::default(), "default").await.unwrap();
        let t = store.create_session(&NewSession::default(), "default").await.unwrap();
        let notes = json!([{"id": "a", "type": "note", "content": "one"},
                           {"type": "note", "content": "two"},
                           {"id": "é?%", "type": "note", "content": "three"}]);
        store.append_events(s.id, &batch(notes), None).await.unwrap();
        store.append_events(t.id, &batch(json!([{"id": "b", "type": "note", "content": "x"}])), None)
            .await.unwrap();
        let found = store.get_event_by_client_id(s.id, "a").await.unwrap().unwrap();
        assert_eq!((found.seq, found.id.as_deref()), (1, Some("a")));
        assert_eq!(store.get_event_by_client_id(s.id, "é?%").await.unwrap().unwrap().seq, 3);
        for (session, id) in [(s.id, "b"), (t.id, "a"), (s.id, "A"), (s.id, ""), (uuid::Uuid::now_v7(), "a")] {
            assert!(store.get_event_by_client_id(session, id).await.unwrap().is_none(), "{id}");
        }
    }
}

store_on_both_backends! {
    async fn a_missing_session_takes_no_events(store) {
        let ghost = uuid::Uuid::now_v7();
        let r = store.append_events(ghost, &batch(json!([{"type": "note", "content": "x"}])), None).await;
        assert!(matches!(r, Err(AppendError::SessionNotFound)));
    }
}

store_on_both_backends! {
    async fn deleting_a_session_deletes_its_events_and_calls(store) {
        let s = store.create_session(&NewSession::default(), "default").await.unwrap();
        let call = json!({"type": "message", "role": "assistant", "tool_calls": [{"id": "x", "name": "ls"}]});
        store.append_events(s.id, &batch(json!([call])), None).await.unwrap();
        assert!(store.delete_session(s.id).await.unwrap());
        assert!(store.list_events(s.id, 0, 10).await.unwrap().is_empty());
        // Other sessions are untouched and independent: the same call id is open only where issued.
        let t = store.create_session(&NewSession::default(), "default").await.unwrap();
        let answer = json!({"type": "message", "role": "tool", "tool_call_id": "x", "content": "a"});
        assert!(store.append_events(t.id, &batch(json!([answer])), None).await.is_err());
    }
}

async fn history_cannot_be_rewritten(backend: Backend) {
    let db = TestStore::new(backend).await;
    let s = db
        .store
        .create_session(&NewSession::default(), "default")
        .await
        .unwrap();
    let note = json!([{"type": "note", "content": "keep me"}]);
    db.store
        .append_events(s.id, &batch(note), None)
        .await
        .unwrap();
    let refused = db.raw.execute("UPDATE events SET tokens = 0").await;
    let message = refused
        .expect_err("an UPDATE of events must fail")
        .to_string();
    assert!(message.contains("append-only"), "{message}");
    assert_eq!(
        db.store.list_events(s.id, 0, 10).await.unwrap()[0].tokens,
        3
    );
}

#[tokio::test]
async fn history_cannot_be_rewritten_sqlite() {
    history_cannot_be_rewritten(Backend::Sqlite).await;
}

#[tokio::test]
async fn history_cannot_be_rewritten_postgres() {
    history_cannot_be_rewritten(Backend::Postgres).await;
}

store_on_both_backends! {
    async fn a_replica_reads_what_is_new_since_its_view(store) {
        use ctxd::domain::state::CompactionState;

        assert!(store.session_since(uuid::Uuid::now_v7(), 0).await.unwrap().is_none());
        let s = store.create_session(&labelled(&[("team", "x")]), "default").await.unwrap();
        let since = store.session_since(s.id, 0).await.unwrap().unwrap();
        assert_eq!((since.session.id, since.version, since.events.len(), since.complete), (s.id, 0, 0, true));
        assert_eq!(since.session.metadata, s.metadata);

        let notes: Vec<Value> = (0..1_005)
            .map(|i| json!({"type": "note", "content": format!("note {i}"), "metadata": {"i": i}}))
            .collect();
        store.append_events(s.id, &batch(Value::Array(notes)), None).await.unwrap();
        let all = store.list_events(s.id, 0, 2_000).await.unwrap();
        // The events' own metadata and times, not the session's, whatever the backend reads at once.
        let since = store.session_since(s.id, 3).await.unwrap().unwrap();
        assert_eq!(since.session.head_seq, 1_005);
        assert_eq!(since.session.metadata, s.metadata);
        let n = since.events.len();
        assert_eq!(since.events[..], all[3..3 + n]);
        if since.complete {
            assert_eq!(n, 1_002);
        } else {
            let rest = store.view_events(s.id, 3 + n as i64, &[]).await.unwrap();
            assert_eq!(since.events.iter().chain(&rest).cloned().collect::<Vec<_>>(), all[3..]);
        }
        let tail = store.session_since(s.id, 1_004).await.unwrap().unwrap();
        assert_eq!((tail.events.len(), tail.complete), (1, true));
        assert!(store.session_since(s.id, 1_005).await.unwrap().unwrap().events.is_empty());

        // The state's version follows each write.
        assert!(store.save_compaction(s.id, 0, &CompactionState::default(), None, &[]).await.unwrap());
        assert_eq!(store.session_since(s.id, 1_005).await.unwrap().unwrap().version, 1);
        assert!(store.save_compaction(s.id, 1, &CompactionState::default(), None, &[]).await.unwrap());
        assert_eq!(store.session_since(s.id, 1_005).await.unwrap().unwrap().version, 2);
    }
}

store_on_both_backends! {
    async fn item_rows_read_one_bounded_page(store) {
        use ctxd::domain::state::{CompactionState, FoldedRange};
        use ctxd::domain::compaction::Reason;

        let s = store.create_session(&NewSession::default(), "default").await.unwrap();
        let notes: Vec<Value> = (0..50).map(|i| json!({"type": "note", "content": format!("n{i}"), "pinned": i % 10 == 0})).collect();
        store.append_events(s.id, &batch(Value::Array(notes)), None).await.unwrap();
        let seqs = |rows: &[ctxd::store::ItemRow]| rows.iter().map(|r| r.seq).collect::<Vec<_>>();

        // A page is `after < seq ≤ to`, in seq order, never more than asked for.
        let page = store.item_rows(s.id, 10, 40, 6).await.unwrap();
        assert_eq!(seqs(&page), [11, 12, 13, 14, 15, 16]);
        assert_eq!(seqs(&store.item_rows(s.id, 37, 40, 6).await.unwrap()), [38, 39, 40]);
        assert!(store.item_rows(s.id, 50, i64::MAX, 6).await.unwrap().is_empty());
        let all = store.item_rows(s.id, 0, i64::MAX, 1_000).await.unwrap();
        assert_eq!(all.len(), 50);
        assert_eq!((all[0].pinned, all[1].pinned, all[0].tokens), (true, false, 3));
        assert_eq!(all[0].event_type, ctxd::domain::event::EventType::Note);

        // The view's rows: a seq range and the listed seqs before it, nothing else.
        let view = store.view_item_rows(s.id, 45, 48, &[1, 11, 21, 46]).await.unwrap();
        assert_eq!(seqs(&view), [1, 11, 21, 46, 47, 48]);
        assert_eq!(seqs(&store.view_item_rows(s.id, 48, 50, &[]).await.unwrap()), [49, 50]);

        // Folded ranges: only those that hold a seq of the span asked for.
        let id = uuid::Uuid::now_v7();
        let range = |from_seq, to_seq| FoldedRange { from_seq, to_seq, compaction_id: id, reason: Reason::Summarized };
        let ranges = [range(1, 5), range(6, 9), range(10, 20), range(21, 30)];
        assert!(store.save_compaction(s.id, 0, &CompactionState::default(), None, &ranges).await.unwrap());
        let span = |from, to| {
            let store = store.clone();
            async move {
                store.folded_ranges(s.id, from, to).await.unwrap().iter().map(|r| r.from_seq).collect::<Vec<_>>()
            }
        };
        assert_eq!(span(7, 12).await, [6, 10]);
        assert_eq!(span(10, 10).await, [10]);
        assert_eq!(span(31, 40).await, Vec::<i64>::new());
        assert_eq!(span(0, 100).await, [1, 6, 10, 21]);
        assert_eq!(store.folded_ranges(s.id, 2, 2).await.unwrap(), [range(1, 5)]);
    }
}
