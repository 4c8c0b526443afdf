//! `/sessions/{id}/events/stream`: what happens to a session as it happens, as server-sent
//! events: `append` for each event appended, `compaction` for each compaction stored. Each
//! carries an `id` cursor (`<seq>/<compaction id>`): reconnecting with it as `Last-Event-ID`
//! (or `after`) resumes exactly after it. A stream ends after five minutes, or when the
//! session is deleted; clients reconnect with their cursor.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};
use uuid::Uuid;

use super::compaction::CompactionOutline;
use super::error::{ApiError, Problem};
use super::AppState;
use crate::domain::event::{EventType, Role};

/// Set when the process stops: open streams end at their next poll, so that they do not hold
/// the graceful shutdown (which waits for every response to finish) for minutes.
static CLOSING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Ends every open stream of this process (at shutdown).
pub fn close_all() {
    CLOSING.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// How often a stream looks for news.
const POLL: Duration = Duration::from_millis(500);
/// How long one stream lasts before the client reconnects.
const LIFETIME: Duration = Duration::from_secs(300);
/// Events one poll sends at most (the next poll sends the rest).
const BATCH: u32 = 500;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_event_stream))
}

/// An `append` event's data: the event, without its content.
#[derive(Serialize, ToSchema)]
pub struct Appended {
    pub seq: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(rename = "type")]
    pub event_type: EventType,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<Role>,
    pub pinned: bool,
    pub tokens: i64,
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
struct StreamParams {
    /// Resume after this cursor (an event's `id`, or a seq alone); `Last-Event-ID` does the
    /// same and wins. Without either, the stream starts at the session's head.
    after: Option<String>,
}

/// Where a stream stands: the last event seq sent and the newest compaction sent.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Cursor {
    seq: i64,
    compaction: Option<Uuid>,
}

impl Cursor {
    fn parse(text: &str) -> Option<Self> {
        let (seq, compaction) = match text.split_once('/') {
            Some((seq, "-")) => (seq, None),
            Some((seq, id)) => (seq, Some(Uuid::parse_str(id).ok()?)),
            None => (text, None),
        };
        let seq: i64 = seq.trim().parse().ok().filter(|s| *s >= 0)?;
        Some(Self { seq, compaction })
    }

    fn id(&self) -> String {
        match self.compaction {
            Some(c) => format!("{}/{c}", self.seq),
            None => format!("{}/-", self.seq),
        }
    }
}

/// Follow a session: its appends and compactions as server-sent events.
///
/// `text/event-stream`: `event: append` (data: the event's seq, id, type, role, pinned and
/// tokens, no content) and `event: compaction` (data: the record's id, tier, trigger, tokens
/// before and after), each with an `id` to resume from (`Last-Event-ID` or `after`). New
/// events are sent within half a second; the stream ends after five minutes or when the
/// session is deleted.
#[utoipa::path(get, path = "/sessions/{id}/events/stream", tag = "events",
    params(("id" = Uuid, Path, description = "The session id"), StreamParams,
        ("Last-Event-ID" = Option<String>, Header, description = "The `id` of the last event received")),
    responses(
        (status = 200, description = "The stream", content_type = "text/event-stream", body = String,
            example = json!("event: append\nid: 43/-\ndata: {\"seq\":43,\"type\":\"message\",\"role\":\"user\",\"pinned\":false,\"tokens\":12}\n\n")),
        (status = 400, description = "A cursor that is not one this stream sent", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such session", body = Problem, content_type = "application/problem+json")
    ))]
async fn get_event_stream(
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
    Query(params): Query<StreamParams>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let given = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .or(params.after);
    let (session, stored) = state
        .store
        .load_session_state(id)
        .await?
        .ok_or_else(|| ApiError::session_not_found(id))?;
    let cursor = match given.filter(|g| !g.trim().is_empty()) {
        Some(text) => Cursor::parse(&text).ok_or_else(|| {
            ApiError::BadRequest(format!(
                "`{text}` is not a stream cursor: use an event's id (`<seq>/<compaction id>`) or a seq"
            ))
        })?,
        None => Cursor {
            seq: session.head_seq,
            compaction: stored.state.last_compaction_id,
        },
    };
    let started = tokio::time::Instant::now();
    let follow = Follow {
        state,
        session: id,
        cursor,
        pending: std::collections::VecDeque::new(),
        started,
        done: false,
    };
    let events = futures_util::stream::unfold(follow, |mut follow| async move {
        follow
            .next()
            .await
            .map(|event| (Ok::<_, Infallible>(event), follow))
    });
    Ok(Sse::new(events)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response())
}

/// A stream in progress.
struct Follow {
    state: AppState,
    session: Uuid,
    cursor: Cursor,
    pending: std::collections::VecDeque<SseEvent>,
    started: tokio::time::Instant,
    done: bool,
}

impl Follow {
    /// The next event to send; None when the stream ends.
    async fn next(&mut self) -> Option<SseEvent> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Some(event);
            }
            let closing = CLOSING.load(std::sync::atomic::Ordering::Relaxed);
            if self.done || closing || self.started.elapsed() >= LIFETIME {
                return None;
            }
            match self.poll().await {
                Ok(true) => {}
                Ok(false) => tokio::time::sleep(POLL).await,
                Err(e) => {
                    tracing::warn!(session = %self.session, error = %e, "event stream poll failed");
                    tokio::time::sleep(POLL * 4).await;
                }
            }
        }
    }

    /// Queues what happened since the cursor; whether anything did.
    async fn poll(&mut self) -> Result<bool, crate::store::StoreError> {
        let store = self.state.store.clone();
        let Some(session) = store.get_session(self.session).await? else {
            self.done = true;
            return Ok(false);
        };
        let items = if session.head_seq > self.cursor.seq {
            store
                .item_rows(self.session, self.cursor.seq, session.head_seq, BATCH)
                .await?
        } else {
            Vec::new()
        };
        let records = store
            .compactions_after(self.session, self.cursor.compaction, BATCH)
            .await?;
        let news = !items.is_empty() || !records.is_empty();
        for item in items {
            self.cursor.seq = item.seq;
            let data = Appended {
                seq: item.seq,
                id: item.id,
                event_type: item.event_type,
                role: item.role,
                pinned: item.pinned,
                tokens: item.tokens,
            };
            self.queue("append", &data);
        }
        for record in &records {
            self.cursor.compaction = Some(record.id);
            self.queue("compaction", &CompactionOutline::from(record));
        }
        Ok(news)
    }

    fn queue<T: Serialize>(&mut self, kind: &str, data: &T) {
        let event = SseEvent::default()
            .event(kind)
            .id(self.cursor.id())
            .json_data(data);
        match event {
            Ok(event) => self.pending.push_back(event),
            Err(e) => tracing::warn!(error = %e, "an event could not be encoded"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_read_back_what_they_wrote() {
        let c = Cursor {
            seq: 42,
            compaction: Some(Uuid::now_v7()),
        };
        assert_eq!(Cursor::parse(&c.id()), Some(c));
        let bare = Cursor {
            seq: 7,
            compaction: None,
        };
        assert_eq!(Cursor::parse(&bare.id()), Some(bare));
        assert_eq!(
            Cursor::parse("12"),
            Some(Cursor {
                seq: 12,
                compaction: None
            })
        );
        for bad in ["", "x", "-1", "3/zz", "3/"] {
            assert_eq!(Cursor::parse(bad), None, "{bad}");
        }
    }
}
