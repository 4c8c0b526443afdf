//! The HTTP API: one module per resource, each a router of its handlers. Handlers parse, call
//! the domain and the store, and serialise; no policy lives here.

mod admin;
pub mod auth;
mod compaction;
mod context;
pub mod error;
mod event_schema;
mod events;
mod extract;
mod health;
mod observations;
mod sessions;
pub mod stream;
mod turn;
mod ui;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderName, Request, StatusCode};
use axum::Router;
use tower::ServiceBuilder;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::TraceLayer;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_swagger_ui::SwaggerUi;

use uuid::Uuid;

use crate::compaction::cache::ViewCache;
use crate::config::Limits;
use crate::store::{Store, StoreError};
use crate::summarize::Summarizer;
use crate::tokens::Tokenizer;

/// What every handler can reach.
#[derive(Clone)]
pub struct AppState {
    pub store: Arc<dyn Store>,
    pub limits: Limits,
    /// The operator's LLM summariser; without one, summaries are deterministic.
    pub summarizer: Option<Arc<dyn Summarizer>>,
    /// Each session's tokenizer and tenant, which never change: an append need not read the
    /// session first. (A deleted session is still refused by the append's own transaction.)
    sessions: Arc<Mutex<HashMap<Uuid, SessionFacts>>>,
    /// What this replica knows of the API keys.
    pub keys: Arc<auth::Keys>,
    /// Each key's request rate on this replica.
    rates: Arc<auth::RateLimits>,
    /// The events of recent views, so a compaction reads only what was appended since.
    pub view_cache: Arc<ViewCache>,
    /// What this replica remembers of recent conversations, so a turn reads only what was
    /// appended since.
    pub ledgers: Arc<crate::turn::Ledgers>,
}

/// What never changes of a session.
#[derive(Clone)]
struct SessionFacts {
    tokenizer: Tokenizer,
    tenant: Arc<str>,
}

/// Sessions whose tokenizer a replica remembers before it starts over.
const REMEMBERED_SESSIONS: usize = 100_000;

impl AppState {
    pub fn new(store: Arc<dyn Store>, limits: Limits) -> Self {
        Self {
            store,
            limits,
            summarizer: None,
            sessions: Arc::default(),
            keys: Arc::default(),
            rates: Arc::default(),
            view_cache: Arc::new(ViewCache::new(ViewCache::DEFAULT_BYTES)),
            ledgers: Arc::default(),
        }
    }

    /// The session's tokenizer, or None when the session does not exist.
    async fn tokenizer_of(&self, session_id: Uuid) -> Result<Option<Tokenizer>, StoreError> {
        Ok(self.session_of(session_id).await?.map(|s| s.tokenizer))
    }

    /// What never changes of a session, or None when it does not exist.
    async fn session_of(&self, session_id: Uuid) -> Result<Option<SessionFacts>, StoreError> {
        let known = self
            .sessions
            .lock()
            .ok()
            .and_then(|m| m.get(&session_id).cloned());
        if known.is_some() {
            return Ok(known);
        }
        let Some(session) = self.store.get_session(session_id).await? else {
            return Ok(None);
        };
        let facts = SessionFacts {
            tokenizer: session.config.tokenizer,
            tenant: session.tenant.into(),
        };
        if let Ok(mut map) = self.sessions.lock() {
            if map.len() >= REMEMBERED_SESSIONS {
                map.clear();
            }
            map.insert(session_id, facts.clone());
        }
        Ok(Some(facts))
    }
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "ctxd",
        description = "A context-management sidecar for LLM agents. Agents append what happened \
            in a session and ctxd keeps the whole history, decides what the model sees, and \
            explains every decision. Every error is an RFC 9457 `application/problem+json` \
            document carrying the request id.",
        license(name = "Apache-2.0", identifier = "Apache-2.0")
    ),
    tags(
        (name = "sessions", description = "Agent conversations and their configuration"),
        (name = "events", description = "The append-only event log of a session"),
        (name = "compaction", description = "The view to send, the records that explain it, calibration"),
        (name = "context", description = "Item-by-item inspection and exact recall of observations"),
        (name = "health", description = "Liveness and readiness"),
        (name = "admin", description = "Tenants and API keys (an admin key)")
    ),
    components(schemas(error::Problem))
)]
struct ApiDoc;

fn api_router() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .merge(sessions::router())
        .merge(events::router())
        .merge(compaction::router())
        .merge(turn::router())
        .merge(context::router())
        .merge(observations::router())
        .merge(health::router())
        .merge(admin::router())
        .merge(stream::router())
}

/// The OpenAPI document, generated from the handlers.
pub fn openapi() -> utoipa::openapi::OpenApi {
    document(api_router().into_openapi())
}

/// The handlers' annotations completed with what they cannot say themselves.
fn document(api: utoipa::openapi::OpenApi) -> utoipa::openapi::OpenApi {
    let mut api = with_middleware_answers(api);
    sessions::document_label_filter(&mut api);
    with_security(&mut api);
    api
}

/// A documented problem answer.
fn problem(description: &str) -> utoipa::openapi::RefOr<utoipa::openapi::Response> {
    use utoipa::openapi::{ContentBuilder, Ref, RefOr, ResponseBuilder};
    RefOr::T(
        ResponseBuilder::new()
            .description(description)
            .content(
                "application/problem+json",
                ContentBuilder::new()
                    .schema(Some(Ref::from_schema_name("Problem")))
                    .build(),
            )
            .build(),
    )
}

/// Declares the bearer keys: every operation but health, metrics and the document itself takes
/// one once any key exists, and may answer 401, 403 and 429.
fn with_security(api: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::security::{
        HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme,
    };
    let scheme = SecurityScheme::Http(
        HttpBuilder::new()
            .scheme(HttpAuthScheme::Bearer)
            .description(Some(
                "An API key, `ctxd_<id>_<secret>`. Required once any key exists (`ctxd keys \
                 create`, `POST /admin/keys`); until then ctxd serves loopback in open mode. \
                 agent keys use their tenant's sessions, operator keys read them, admin keys \
                 manage keys and tenants.",
            ))
            .build(),
    );
    api.components
        .get_or_insert_with(Default::default)
        .add_security_scheme("bearer", scheme);
    for (path, item) in api.paths.paths.iter_mut() {
        let public = !(path.starts_with("/sessions") || path.starts_with("/admin"));
        for operation in operations_of(item) {
            if public {
                operation.security = Some(Vec::new());
                continue;
            }
            operation.security = Some(vec![SecurityRequirement::new(
                "bearer",
                Vec::<String>::new(),
            )]);
            let responses = &mut operation.responses.responses;
            responses.entry("401".into()).or_insert_with(|| {
                problem("No API key, or one that is not valid (`WWW-Authenticate: Bearer`)")
            });
            responses.entry("403".into()).or_insert_with(|| {
                problem("The key's role may not do this (an operator key writing, an agent key managing keys)")
            });
            responses.entry("429".into()).or_insert_with(|| {
                problem("The key's request rate is spent; `Retry-After` says when to retry")
            });
        }
    }
}

/// The operations of a documented path, whatever their method.
fn operations_of(
    item: &mut utoipa::openapi::PathItem,
) -> impl Iterator<Item = &mut utoipa::openapi::path::Operation> {
    [
        &mut item.get,
        &mut item.put,
        &mut item.post,
        &mut item.delete,
        &mut item.patch,
    ]
    .into_iter()
    .flatten()
}

/// Documents what the middleware answers for any operation, where a handler's own annotation
/// does not: 503 when a request outlives the server's timeout, and 413 when a body is larger
/// than the limit.
fn with_middleware_answers(mut api: utoipa::openapi::OpenApi) -> utoipa::openapi::OpenApi {
    for item in api.paths.paths.values_mut() {
        for operation in operations_of(item) {
            let responses = &mut operation.responses.responses;
            if operation.request_body.is_some() {
                responses
                    .entry("413".into())
                    .or_insert_with(|| problem("The body is larger than the server's limit"));
            }
            responses.entry("503".into()).or_insert_with(|| {
                problem("The request took longer than the server's timeout; retry")
            });
        }
    }
    api
}

/// Counts each request by its route template and status, with its latency, as answered.
async fn count_request(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let started = std::time::Instant::now();
    let method = request.method().clone();
    let route = request
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |p| p.as_str().to_owned());
    let response = next.run(request).await;
    crate::metrics::METRICS.request(
        method.as_str(),
        &route,
        response.status().as_u16(),
        started.elapsed(),
    );
    response
}

/// The whole service: API routes, docs UI, and the middleware every request passes through.
pub fn app(state: AppState) -> Router {
    // With a model, summaries are prepared in the background (see `compaction::prepare`).
    if let Some(summarizer) = &state.summarizer {
        crate::compaction::prepare::spawn_worker(state.store.clone(), summarizer.clone());
    }
    let (router, api) = api_router().split_for_parts();
    let api = document(api);
    let request_id = HeaderName::from_static("x-request-id");
    let limits = state.limits.clone();
    router
        .merge(SwaggerUi::new("/docs").url("/openapi.json", api))
        .merge(ui::router())
        .fallback(|| async { error::ApiError::NotFound("no such route".into()) })
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::authorize,
        ))
        .with_state(state)
        .layer(
            ServiceBuilder::new()
                .layer(axum::middleware::from_fn(count_request))
                .layer(SetRequestIdLayer::new(request_id.clone(), MakeRequestUuid))
                .layer(
                    TraceLayer::new_for_http()
                        // One line per request at info, in the request's span (its id).
                        .on_response(
                            tower_http::trace::DefaultOnResponse::new()
                                .level(tracing::Level::INFO)
                                .latency_unit(tower_http::LatencyUnit::Micros),
                        )
                        .make_span_with(|request: &Request<_>| {
                        let route = request
                            .extensions()
                            .get::<axum::extract::MatchedPath>()
                            .map(|p| p.as_str().to_owned())
                            .unwrap_or_else(|| request.uri().path().to_owned());
                        let id = request
                            .headers()
                            .get("x-request-id")
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or_default();
                        tracing::info_span!("request", method = %request.method(), %route, request_id = %id)
                    }),
                )
                .layer(PropagateRequestIdLayer::new(request_id))
                .layer(axum::middleware::from_fn(error::problem_responses))
                .layer(CatchPanicLayer::custom(error::panic_response))
                .layer(TimeoutLayer::with_status_code(
                    StatusCode::SERVICE_UNAVAILABLE,
                    limits.request_timeout,
                ))
                .layer(DefaultBodyLimit::max(limits.max_body_bytes)),
        )
}
