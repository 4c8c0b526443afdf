//! Liveness and readiness probes, and the metrics operators scrape.

use axum::extract::State;
use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::error::{ApiError, Problem};
use super::AppState;

#[derive(Serialize, ToSchema)]
pub struct Health {
    /// `ok` when the process serves requests, `ready` when its database answers too.
    #[schema(example = "ready")]
    pub status: &'static str,
    /// `postgres` or `sqlite` (readiness only).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(example = "postgres")]
    pub database: Option<&'static str>,
}

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(healthz))
        .routes(routes!(readyz))
        .routes(routes!(metrics))
}

/// Liveness: the process is up.
#[utoipa::path(get, path = "/healthz", tag = "health", operation_id = "get_health",
    responses((status = 200, description = "The process serves requests", body = Health,
        example = json!({"status": "ok"}))))]
async fn healthz() -> Json<Health> {
    Json(Health {
        status: "ok",
        database: None,
    })
}

/// How long readiness waits for the database.
const READY_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(1_500);

/// Readiness: the database answers.
#[utoipa::path(get, path = "/readyz", tag = "health", operation_id = "get_readiness",
    responses(
        (status = 200, description = "Ready to serve", body = Health,
            example = json!({"status": "ready", "database": "postgres"})),
        (status = 503, description = "The database does not answer", body = Problem,
            content_type = "application/problem+json")
    ))]
async fn readyz(State(state): State<AppState>) -> Result<Json<Health>, ApiError> {
    // Fails fast: an orchestrator's probe must not wait for the pool's timeout.
    let ping = tokio::time::timeout(READY_TIMEOUT, state.store.ping()).await;
    match ping {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "readiness check failed");
            return Err(ApiError::Unavailable("the database does not answer".into()));
        }
        Err(_) => {
            tracing::warn!("readiness check timed out");
            return Err(ApiError::Unavailable(format!(
                "the database did not answer within {} ms",
                READY_TIMEOUT.as_millis()
            )));
        }
    }
    Ok(Json(Health {
        status: "ready",
        database: Some(state.store.backend()),
    }))
}

/// Metrics in the Prometheus text format.
///
/// Requests by route and status with latency histograms, appends and events, compactions by
/// policy, tier and trigger, summariser outcomes and latency, background summary jobs, view
/// cache lookups and bytes, and the database pool's connections: this replica's, since it started.
#[utoipa::path(get, path = "/metrics", tag = "health", operation_id = "get_metrics",
    responses((status = 200, description = "The metrics",
        content_type = "text/plain", body = String,
        example = "ctxd_compactions_total{acted=\"true\",policy=\"progressive\",tier=\"soft\",trigger=\"auto\"} 3")))]
async fn metrics(State(state): State<AppState>) -> impl axum::response::IntoResponse {
    let metrics = &crate::metrics::METRICS;
    let (open, idle) = state.store.pool_status();
    metrics.pool(open, idle);
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        metrics.render(),
    )
}
