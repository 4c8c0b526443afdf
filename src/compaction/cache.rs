//! A replica's memory of the events its views were made of.
//!
//! Events never change once appended, so a cached event is never stale: each compaction only
//! reads from the database the events appended since the session's last compaction on this
//! replica, instead of the whole view. The cache is an optimisation only: state lives in the
//! database, and a replica that has nothing cached (or forgot it) reads everything again.

use std::collections::HashMap;
use std::sync::Mutex;

use uuid::Uuid;

use serde_json::{Map, Value};

use crate::domain::event::{Event, EventBody};
use crate::domain::state::CompactionState;
use crate::engine::render::Fragments;
use crate::store::{Store, StoreError, StoredState};

/// The events of one session's view: those kept at or before `checkpoint`, then every event
/// after it up to the newest read, in seq order; and the compaction state last read or written
/// with it.
#[derive(Debug, Default)]
pub struct CachedView {
    checkpoint: i64,
    events: Vec<Event>,
    /// The JSON their messages rendered to (see [`Fragments`]).
    fragments: Fragments,
    /// A state as stored at its version: reused while the database holds that version.
    state: Option<StoredState>,
    /// The checkpoint this replica last queued a summary job at (one job per checkpoint).
    queued_checkpoint: Option<i64>,
}

impl CachedView {
    pub fn events(&self) -> &[Event] {
        &self.events
    }

    /// The events, and the JSON their messages rendered to.
    pub fn parts(&mut self) -> (&[Event], &mut Fragments, &mut Option<i64>) {
        (
            &self.events,
            &mut self.fragments,
            &mut self.queued_checkpoint,
        )
    }

    fn newest(&self) -> i64 {
        self.events.last().map_or(self.checkpoint, |e| e.seq)
    }

    fn bytes(&self) -> usize {
        let events: usize = self.events.iter().map(event_bytes).sum();
        let state = self.state.as_ref().map_or(0, |s| {
            let summary = &s.state.summary;
            let a = &summary.anchors;
            let anchors = a.user_intent.len()
                + a.execution_progress.len()
                + a.key_decision.len()
                + a.tried_solution.len()
                + a.next_step.len();
            512 + summary.text.len() + anchors + 8 * s.state.kept.len() + 64 * s.state.reduced.len()
        });
        events + self.fragments.bytes() + state
    }

    /// The cached state when it is the one stored at `version`; a cached state of another
    /// version is dropped.
    pub fn take_state(&mut self, version: i64) -> Option<StoredState> {
        self.state.take().filter(|s| s.version == version)
    }

    /// Keeps `state` (as stored at its version) for the next call.
    pub fn keep_state(&mut self, state: StoredState) {
        self.state = Some(state);
    }

    /// The newest seq read, when anything is cached: the events after it are all a warm view
    /// lacks, and can be read before the state is known (see [`CachedView::extend`]).
    pub fn newest_read(&self) -> Option<i64> {
        self.events.last().map(|e| e.seq)
    }

    /// Adds events read after [`CachedView::newest_read`].
    pub fn extend(&mut self, newer: Vec<Event>) {
        let newest = self.newest();
        self.events
            .extend(newer.into_iter().filter(|e| e.seq > newest));
    }

    /// Drops the events `state` no longer shows. What a view shows changes when its checkpoint
    /// moves (folding is what moves it, and what adds kept events), and when kept events leave
    /// while it stays: the episodic policy collapses an older request or a pinned message into
    /// the summary when nothing after the checkpoint can fold.
    fn keep_shown(&mut self, state: &CompactionState) {
        // The events are in seq order; those at or before the checkpoint are kept ones.
        let kept = self
            .events
            .partition_point(|e| e.seq <= state.checkpoint_seq);
        let moved = self.checkpoint != state.checkpoint_seq;
        if (moved || kept > state.kept.len()) && !self.events.is_empty() {
            let shown = |seq: i64| seq > state.checkpoint_seq || state.kept.contains(&seq);
            self.events.retain(|e| shown(e.seq));
            self.fragments.retain(shown);
        }
    }

    /// Brings the view to `state`, reading from the store only what it lacks. `current` says
    /// that the events after the newest cached one were just read (by [`CachedView::extend`]):
    /// then the store is asked only for what `state` shows that the view does not hold.
    pub async fn refresh(
        mut self,
        store: &dyn Store,
        session_id: Uuid,
        state: &CompactionState,
        current: bool,
    ) -> Result<Self, StoreError> {
        // A checkpoint never moves back; a view cached before another replica moved it keeps
        // only what the new state still shows.
        if self.checkpoint > state.checkpoint_seq {
            self = Self::default();
        }
        self.keep_shown(state);
        // The events are in seq order.
        let missing: Vec<i64> = state
            .kept
            .iter()
            .copied()
            .filter(|seq| self.events.binary_search_by_key(seq, |e| e.seq).is_err())
            .collect();
        let after = self.newest().max(state.checkpoint_seq);
        // What the state saw (up to its last view's head) must be in the view.
        let complete = current && missing.is_empty() && state.last_view.head_seq <= after;
        if !complete {
            let fresh = store.view_events(session_id, after, &missing).await?;
            self.events.extend(fresh);
            if !missing.is_empty() {
                self.events.sort_by_key(|e| e.seq);
            }
        }
        self.checkpoint = state.checkpoint_seq;
        Ok(self)
    }
}

/// Bytes an event holds besides its strings and JSON: its own size and allocation headers.
const EVENT_OVERHEAD: usize = 256;

/// The bytes an event holds: every string it owns (ids, names, content, conclusion,
/// dependencies), its tool calls' arguments and its metadata, walked node by node, and the
/// reduced texts the engine kept with it.
fn event_bytes(event: &Event) -> usize {
    let text = |s: &Option<String>| s.as_ref().map_or(0, |s| s.len());
    let body = match &event.body {
        EventBody::Message(m) => {
            let calls: usize = m
                .tool_calls
                .iter()
                .map(|c| {
                    std::mem::size_of_val(c) + c.id.len() + c.name.len() + value_bytes(&c.arguments)
                })
                .sum();
            m.content.bytes() + calls + text(&m.tool_call_id) + text(&m.name)
        }
        EventBody::EpisodeStart(e) => {
            e.name.len()
                + e.dependencies
                    .iter()
                    .map(|d| std::mem::size_of::<String>() + d.len())
                    .sum::<usize>()
        }
        EventBody::EpisodeEnd(e) => e.name.len() + e.conclusion.len(),
        EventBody::Note(n) => n.content.len(),
    };
    let derived = event.derived.bytes();
    EVENT_OVERHEAD + text(&event.id) + body + event.metadata.as_ref().map_or(0, map_bytes) + derived
}

/// The bytes a JSON value holds: a node per value, and the text of its strings and keys.
/// (Parsed JSON is at most 128 levels deep, so the walk's recursion is bounded.)
fn value_bytes(value: &Value) -> usize {
    std::mem::size_of::<Value>()
        + match value {
            Value::String(s) => s.len(),
            Value::Array(items) => items.iter().map(value_bytes).sum(),
            Value::Object(map) => map_bytes(map),
            Value::Null | Value::Bool(_) | Value::Number(_) => 0,
        }
}

fn map_bytes(map: &Map<String, Value>) -> usize {
    map.iter()
        .map(|(key, value)| std::mem::size_of::<String>() + key.len() + value_bytes(value))
        .sum()
}

/// Cached views by session, within a byte budget; the least recently used go first.
pub struct ViewCache {
    budget_bytes: usize,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    views: HashMap<Uuid, (CachedView, usize, u64)>,
    bytes: usize,
    clock: u64,
}

impl ViewCache {
    /// The default budget, in bytes.
    pub const DEFAULT_BYTES: usize = 256 * 1024 * 1024;

    /// A cache of at most `budget_bytes` of events, rendered JSON and states (0 keeps nothing).
    pub fn new(budget_bytes: usize) -> Self {
        Self {
            budget_bytes,
            inner: Mutex::default(),
        }
    }

    /// Takes the session's view out of the cache (a concurrent compaction of the same session
    /// then reads from the database, which is always correct).
    pub fn take(&self, session_id: Uuid) -> CachedView {
        let Ok(mut inner) = self.inner.lock() else {
            return CachedView::default();
        };
        let metrics = &crate::metrics::METRICS;
        match inner.views.remove(&session_id) {
            Some((view, bytes, _)) => {
                inner.bytes -= bytes;
                metrics.cache_lookup(true);
                metrics.cache_bytes(inner.bytes);
                view
            }
            None => {
                metrics.cache_lookup(false);
                CachedView::default()
            }
        }
    }

    /// Puts a view back, evicting the least recently used ones beyond the budget.
    pub fn put(&self, session_id: Uuid, view: CachedView) {
        let bytes = view.bytes();
        if bytes > self.budget_bytes {
            return;
        }
        let Ok(mut inner) = self.inner.lock() else {
            return;
        };
        inner.clock += 1;
        let clock = inner.clock;
        if let Some((_, old, _)) = inner.views.insert(session_id, (view, bytes, clock)) {
            inner.bytes -= old;
        }
        inner.bytes += bytes;
        while inner.bytes > self.budget_bytes {
            let Some(oldest) = inner
                .views
                .iter()
                .min_by_key(|(_, (_, _, used))| *used)
                .map(|(id, _)| *id)
            else {
                break;
            };
            if let Some((_, freed, _)) = inner.views.remove(&oldest) {
                inner.bytes -= freed;
            }
        }
        crate::metrics::METRICS.cache_bytes(inner.bytes);
    }
}

#[cfg(test)]
mod tests {
    use chrono::Utc;
    use serde_json::json;

    use super::*;
    use crate::domain::event::{Message, Role, ShownAs, ToolCall};

    fn event(seq: i64, content: &str, arguments: Value, metadata: Option<Value>) -> Event {
        let tool_calls = if arguments.is_null() {
            Vec::new()
        } else {
            vec![ToolCall {
                id: format!("call_{seq}"),
                name: "write_file".into(),
                arguments,
                kind: Default::default(),
            }]
        };
        Event {
            seq,
            id: Some(format!("e{seq}")),
            body: EventBody::Message(Message {
                role: Role::Assistant,
                content: content.into(),
                tool_calls,
                tool_call_id: None,
                name: None,
                is_error: None,
            }),
            pinned: false,
            metadata: metadata.and_then(|m| m.as_object().cloned()),
            tokens: 1,
            created_at: Utc::now(),
            derived: Default::default(),
        }
    }

    fn view_of(events: Vec<Event>) -> CachedView {
        CachedView {
            events,
            ..CachedView::default()
        }
    }

    const MB: usize = 1024 * 1024;

    /// A kept event that leaves the view while the checkpoint stays (the episodic policy
    /// collapsing an older request into the summary) leaves the cached view too: a replica
    /// that cached it shows what one reading the view afresh shows.
    #[test]
    fn a_kept_event_that_leaves_without_the_checkpoint_moving_leaves_the_cached_view() {
        let mut view = view_of(
            (1..=6)
                .map(|seq| event(seq, "ok", Value::Null, None))
                .collect(),
        );
        view.checkpoint = 4;
        let mut state = CompactionState {
            checkpoint_seq: 4,
            kept: vec![1, 2, 3, 4],
            ..CompactionState::default()
        };
        let seqs = |view: &CachedView| view.events.iter().map(|e| e.seq).collect::<Vec<_>>();
        view.keep_shown(&state);
        assert_eq!(seqs(&view), [1, 2, 3, 4, 5, 6]);
        state.kept = vec![3, 1];
        view.keep_shown(&state);
        assert_eq!(seqs(&view), [1, 3, 5, 6]);
        state.checkpoint_seq = 5;
        state.kept = vec![1];
        view.keep_shown(&state);
        assert_eq!(seqs(&view), [1, 6]);
    }

    /// An event whose text is two bytes and whose `what` holds `big`.
    fn heavy(what: &str, big: &str) -> Event {
        match what {
            "metadata" => event(1, "ok", Value::Null, Some(json!({ "blob": big }))),
            "metadata nested in arrays" => {
                event(1, "ok", Value::Null, Some(json!({"a": [[{ "b": big }]]})))
            }
            "arguments as an object" => event(1, "ok", json!({ "content": big }), None),
            _ => event(1, "ok", Value::String(big.into()), None),
        }
    }

    #[test]
    fn an_event_counts_its_arguments_and_metadata_not_only_its_text() {
        let big = "x".repeat(2 * MB);
        for what in [
            "metadata",
            "metadata nested in arrays",
            "arguments as an object",
            "arguments as a string",
        ] {
            let bytes = view_of(vec![heavy(what, &big)]).bytes();
            assert!(bytes > 2 * MB, "{what}: {bytes} bytes counted");
            let cache = ViewCache::new(MB);
            let session = Uuid::now_v7();
            cache.put(session, view_of(vec![event(1, "ok", Value::Null, None)]));
            assert_eq!(
                cache.take(session).events().len(),
                1,
                "a small view is kept"
            );
            cache.put(session, view_of(vec![heavy(what, &big)]));
            assert!(
                cache.take(session).events().is_empty(),
                "{what}: a view of more than the budget is refused"
            );
        }
    }

    /// The texts the engine keeps with an event (its reduced projections) count against the
    /// budget like the event's own.
    #[test]
    fn an_event_counts_the_reduced_texts_kept_with_it() {
        let shown = event(1, "ok", Value::Null, None);
        let plain = view_of(vec![shown.clone()]).bytes();
        let kept = shown
            .derived
            .shown(ShownAs::Preview, [1, 2, 3], || "x".repeat(2 * MB));
        assert_eq!(kept.len(), 2 * MB);
        let counted = view_of(vec![shown]).bytes();
        assert!(
            counted >= plain + 2 * MB,
            "{plain} -> {counted} bytes counted"
        );
    }

    #[test]
    fn heavy_views_evict_the_least_recently_used_to_keep_the_budget() {
        let cache = ViewCache::new(3 * MB);
        let (first, second) = (Uuid::now_v7(), Uuid::now_v7());
        let metadata = || Some(json!({ "trace": "m".repeat(2 * MB) }));
        cache.put(first, view_of(vec![event(1, "a", Value::Null, metadata())]));
        cache.put(
            second,
            view_of(vec![event(1, "b", Value::Null, metadata())]),
        );
        assert!(cache.take(first).events().is_empty(), "the older view went");
        assert_eq!(cache.take(second).events().len(), 1, "the newer one stays");
    }
}
