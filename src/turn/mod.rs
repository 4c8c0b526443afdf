//! One call per model turn: the agent sends its provider-native conversation, ctxd appends
//! exactly what is new and answers the view to send.
//!
//! What is new is decided by reading the submitted messages as events (`native`) and matching
//! them against what the session holds:
//! - the agent's full history: the stored conversation is a prefix of it;
//! - the last view ctxd answered plus new messages (an agent that adopts the view as its
//!   history): that view is a prefix of it;
//! - only the new messages: they match neither from the start.
//!
//! A list that starts like the stored conversation or the last view but then departs from it
//! is refused, naming the first message that diverges. Each appended event gets an id made of
//! the request's digest and its place, so retrying the same call appends nothing twice. The
//! append is kept even when the compaction that follows fails (fail open).

mod ledger;
pub mod native;

use std::sync::Arc;

use serde_json::Value;
use uuid::Uuid;

use crate::compaction::{self, cache::ViewCache, CompactError, CompactRequest, Presented};
use crate::domain::append::{self, AppendRejection, CountedEvent};
use crate::domain::event::NewEvent;
use crate::domain::state::{calibration_sample, MAX_CALIBRATION_SAMPLE, MIN_CALIBRATION_SAMPLE};
use crate::domain::FieldError;
use crate::engine::render::{self, Format};
use crate::store::{AppendError, Store};
use crate::summarize::Summarizer;
use crate::tokens::Tokenizer;
pub use ledger::Ledgers;
use ledger::{fingerprint, Ledger};
use native::{Native, Read};

/// The origin of Anthropic's `system`, which is not one of `messages`.
const SYSTEM: usize = usize::MAX;

/// How many times a turn reads and matches again when another writer appended in between.
const ATTEMPTS: usize = 3;

/// What an agent sends for one turn.
pub struct Turn {
    pub format: Format,
    /// Anthropic's `system`.
    pub system: Option<Value>,
    pub messages: Vec<Value>,
    /// The compaction to run once the new messages are appended (in this turn's format).
    pub compact: CompactRequest,
    /// The provider's input-token count for the previous view this session answered.
    pub usage_input_tokens: Option<i64>,
}

/// What a turn did before its compaction.
#[derive(Debug, Clone, Default)]
pub struct Appended {
    /// The seqs of the events this turn appended (or appended on an earlier try of the same call).
    pub seqs: Vec<i64>,
    /// True when an earlier try of this same call had appended them.
    pub replayed: bool,
    /// The calibration applied after this turn's usage, when it gave one.
    pub calibration: Option<f64>,
}

#[derive(Debug, thiserror::Error)]
pub enum TurnError {
    #[error("invalid messages")]
    Invalid(Vec<FieldError>),
    #[error("{message}")]
    Diverges { field: String, message: String },
    #[error("the session's log moved on while this turn was appended; retry")]
    Contended,
    #[error(transparent)]
    Append(#[from] AppendError),
    /// The compaction failed after the new messages were appended (they are kept).
    #[error("compaction failed after appending seqs {appended:?}: {error}")]
    Compact {
        appended: Vec<i64>,
        error: CompactError,
    },
    #[error(transparent)]
    Before(CompactError),
}

/// Everything a turn works with.
pub struct Deps<'a> {
    pub store: Arc<dyn Store>,
    pub summarizer: Option<Arc<dyn Summarizer>>,
    pub cache: &'a ViewCache,
    pub ledgers: &'a Ledgers,
}

/// Appends what is new in `turn` and compacts, answering as `present` makes the view.
pub async fn take_turn<V, P>(
    deps: Deps<'_>,
    session_id: Uuid,
    turn: Turn,
    present: P,
) -> Result<(Appended, V), TurnError>
where
    V: Send + 'static,
    P: Fn(Presented<'_, '_>) -> V + Send + Sync + 'static,
{
    let read = native::read(turn.format, turn.system.as_ref(), &turn.messages)
        .map_err(TurnError::Invalid)?;
    let digest = digest(turn.format, turn.system.as_ref(), &turn.messages);
    // The previous view is the state's view over the log as it stands before this append.
    let usage = match turn.usage_input_tokens {
        Some(provider) => previous_view_tokens(&deps, session_id, &turn)
            .await?
            .map(|ours| (provider, ours)),
        None => None,
    };
    let mut appended = append_new(&deps, session_id, &turn, read, &digest).await?;
    if let (Some((provider, ours)), false) = (usage, appended.replayed) {
        let calibration = compaction::record_usage(&*deps.store, session_id, provider, ours)
            .await
            .map_err(|error| TurnError::Compact {
                appended: appended.seqs.clone(),
                error,
            })?;
        appended.calibration = Some(calibration);
    }
    let view = compaction::compact_session(
        Arc::clone(&deps.store),
        deps.summarizer.clone(),
        deps.cache,
        session_id,
        turn.compact,
        present,
    )
    .await
    .map_err(|error| TurnError::Compact {
        appended: appended.seqs.clone(),
        error,
    })?;
    Ok((appended, view))
}

/// Appends the events of `read` that are new, or finds those an earlier try of the same call
/// appended.
async fn append_new(
    deps: &Deps<'_>,
    session_id: Uuid,
    turn: &Turn,
    read: Read,
    digest: &str,
) -> Result<Appended, TurnError> {
    let store = &*deps.store;
    let prefix = format!("turn:{digest}:");
    let mut ledger = deps.ledgers.take(session_id);
    for _ in 0..ATTEMPTS {
        let tokenizer = catch_up(store, session_id, &mut ledger).await?;
        if let Some(seqs) = ledger.earlier_try(&prefix) {
            deps.ledgers.put(session_id, ledger);
            return Ok(Appended {
                seqs,
                replayed: true,
                calibration: None,
            });
        }
        let new = what_is_new(deps, session_id, turn, &read, &ledger).await?;
        if new.is_empty() {
            deps.ledgers.put(session_id, ledger);
            return Ok(Appended::default());
        }
        let origins: Vec<usize> = new.iter().map(|n| n.origin).collect();
        let events: Vec<NewEvent> = new
            .into_iter()
            .enumerate()
            .map(|(k, native)| NewEvent {
                id: Some(format!("{prefix}{k}")),
                ..native.event
            })
            .collect();
        let batch: Vec<CountedEvent> = append::count(tokenizer, events)
            .await
            .map_err(|e| TurnError::Before(CompactError::Worker(e.to_string())))?;
        match store
            .append_events(session_id, &batch, Some(ledger.head_seq))
            .await
        {
            Ok(outcome) => {
                crate::metrics::METRICS.append(outcome.acks.iter().filter(|a| !a.replayed).count());
                let seqs: Vec<i64> = outcome.acks.iter().map(|a| a.seq).collect();
                let events: Vec<NewEvent> = batch.into_iter().map(|c| c.event).collect();
                ledger.extend_appended(&events, &seqs);
                deps.ledgers.put(session_id, ledger);
                return Ok(Appended {
                    seqs,
                    replayed: false,
                    calibration: None,
                });
            }
            Err(AppendError::Rejected(AppendRejection::SeqMismatch { .. })) => continue,
            // A rule of the log (a result that answers no call): named by the message.
            Err(AppendError::Rejected(AppendRejection::Invalid(errors))) => {
                return Err(TurnError::Invalid(
                    errors
                        .into_iter()
                        .map(|e| {
                            let at = match e.index.and_then(|k| origins.get(k)) {
                                Some(&SYSTEM) | None => "system".to_owned(),
                                Some(origin) => format!("messages[{origin}]"),
                            };
                            FieldError::new(format!("{at}.{}", e.field), e.message)
                        })
                        .collect(),
                ))
            }
            Err(e) => return Err(e.into()),
        }
    }
    Err(TurnError::Contended)
}

/// Brings `ledger` up to the session's head, reading only what was appended since; returns the
/// session's tokenizer.
async fn catch_up(
    store: &dyn Store,
    session_id: Uuid,
    ledger: &mut Ledger,
) -> Result<Tokenizer, TurnError> {
    let session = store
        .get_session(session_id)
        .await
        .map_err(|e| TurnError::Before(e.into()))?
        .ok_or(TurnError::Before(CompactError::NotFound))?;
    if ledger.head_seq > session.head_seq {
        *ledger = Ledger::default();
    }
    while ledger.head_seq < session.head_seq {
        let page = store
            .list_events(session_id, ledger.head_seq, 1_000)
            .await
            .map_err(|e| TurnError::Before(e.into()))?;
        if page.is_empty() {
            break;
        }
        ledger.extend(&page);
    }
    Ok(session.config.tokenizer)
}

/// The events of `read` that the session does not hold yet (see the module docs).
async fn what_is_new(
    deps: &Deps<'_>,
    session_id: Uuid,
    turn: &Turn,
    read: &Read,
    ledger: &Ledger,
) -> Result<Vec<Native>, TurnError> {
    let anthropic = turn.format == Format::Anthropic;
    // Anthropic's system prompt is given apart on every call: it is new only the first time.
    let stored_system = ledger.messages.iter().find(|m| m.system);
    let mut new = Vec::new();
    // The last view, once read back, for the messages below too.
    let mut last = None;
    if let Some(system) = &read.system {
        let print = fingerprint(&system.body);
        match stored_system {
            None => new.push(Native {
                origin: SYSTEM,
                event: system.clone(),
            }),
            Some(stored) if stored.fingerprint == print => {}
            // The system prompt as the last view showed it (head and tail, when it was
            // longer than its share of a small window) is the session's too.
            Some(_) => {
                let view = last_view(deps, session_id, turn.format).await?;
                if view
                    .system
                    .as_ref()
                    .is_none_or(|s| fingerprint(&s.body) != print)
                {
                    return Err(TurnError::Diverges {
                        field: "system".into(),
                        message: "`system` differs from the session's system prompt".into(),
                    });
                }
                last = Some(view);
            }
        }
    }
    let stored: Vec<u64> = ledger
        .messages
        .iter()
        .filter(|m| !(anthropic && m.system))
        .map(|m| m.fingerprint)
        .collect();
    let submitted = &read.events;
    let prints: Vec<u64> = submitted
        .iter()
        .map(|n| fingerprint(&n.event.body))
        .collect();
    let history = common_prefix(&prints, &stored);
    if history == stored.len() || history == submitted.len() {
        new.extend_from_slice(&submitted[history..]);
        return Ok(new);
    }
    let last = match last {
        Some(view) => view,
        None => last_view(deps, session_id, turn.format).await?,
    };
    let last_view: Vec<u64> = last
        .events
        .iter()
        .map(|n| fingerprint(&n.event.body))
        .collect();
    let view = common_prefix(&prints, &last_view);
    if !last_view.is_empty() && (view == last_view.len() || view == submitted.len()) {
        new.extend_from_slice(&submitted[view..]);
        return Ok(new);
    }
    if history == 0 && view == 0 {
        // Only the new messages.
        new.extend_from_slice(submitted);
        return Ok(new);
    }
    let at = history.max(view);
    let origin = submitted.get(at).map_or(turn.messages.len(), |n| n.origin);
    let (against, matched) = if history >= view {
        ("the session's stored conversation", history)
    } else {
        ("the last view ctxd answered", view)
    };
    Err(TurnError::Diverges {
        field: format!("messages[{origin}]"),
        message: format!(
            "messages[{origin}] diverges from {against}: the first {matched} events read from \
             `messages` match it, the next does not. Send the full history, the last view plus \
             new messages, or only the new messages"
        ),
    })
}

/// How many leading fingerprints two lists share.
fn common_prefix(a: &[u64], b: &[u64]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// The last view this session answered, rendered in `format` and read back as a request is
/// (an Anthropic view's system prompt apart).
async fn last_view(deps: &Deps<'_>, session_id: Uuid, format: Format) -> Result<Read, TurnError> {
    let rendered = compaction::last_view(
        Arc::clone(&deps.store),
        deps.cache,
        session_id,
        format,
        move |messages, _| render::render(format, messages),
    )
    .await
    .map_err(TurnError::Before)?;
    let list = match format {
        Format::OpenaiResponses => &rendered["input"],
        _ => &rendered["messages"],
    };
    let messages = list.as_array().map_or(&[][..], Vec::as_slice);
    // A view ctxd rendered reads back; should it not, no history matches it.
    Ok(native::read(format, rendered.get("system"), messages).unwrap_or_default())
}

/// ctxd's count of the previous view's request (its messages before calibration, and this
/// turn's tool schemas), checked against the provider's count; None when nothing was answered
/// yet.
async fn previous_view_tokens(
    deps: &Deps<'_>,
    session_id: Uuid,
    turn: &Turn,
) -> Result<Option<i64>, TurnError> {
    let provider = turn.usage_input_tokens.unwrap_or_default();
    let tokens = compaction::last_view(
        Arc::clone(&deps.store),
        deps.cache,
        session_id,
        turn.format,
        |messages, tokens| (!messages.is_empty()).then_some(tokens),
    )
    .await
    .map_err(TurnError::Before)?;
    let Some(messages) = tokens else {
        return Ok(None);
    };
    let ours = messages + turn.compact.tools_tokens;
    if provider <= 0 || calibration_sample(provider, ours).is_none() {
        return Err(TurnError::Invalid(vec![FieldError::new(
            "usage.input_tokens",
            format!(
                "{provider} is {:.3} times ctxd's count of {ours} tokens for the previous view: \
                 the ratio must be between {MIN_CALIBRATION_SAMPLE} and {MAX_CALIBRATION_SAMPLE}",
                provider as f64 / ours as f64
            ),
        )]));
    }
    Ok(Some(ours))
}

/// A stable digest of what a turn says (the same call retried has the same one).
fn digest(format: Format, system: Option<&Value>, messages: &[Value]) -> String {
    // serde_json's maps are ordered by key, so the same content has the same bytes.
    let body = serde_json::json!({"format": format, "system": system, "messages": messages});
    let bytes = serde_json::to_vec(&body).unwrap_or_default();
    // FNV-1a, 128 bits: stable across builds and machines.
    let mut hash: u128 = 0x6c62272e07bb014262b821756295c58d;
    for byte in bytes {
        hash ^= u128::from(byte);
        hash = hash.wrapping_mul(0x0000000001000000000000000000013b);
    }
    format!("{hash:032x}")
}
