//! Probes (`/healthz`, `/readyz`), `/metrics` and the OpenAPI document.

use std::time::Duration;

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::{Extension, Json};

use crate::app_state::AppState;

use super::auth::ViewerAuth;
use super::dto::{Liveness, Readiness};
use super::metrics::{self, HttpMetrics};
use super::problem::ProblemDetails;
use super::{age_ms, now, openapi_json};

/// `/readyz` fails when the engine's snapshot is older than this. The coordinator republishes
/// at least every half second; a few of its calls (creating a mirror whose source is slow,
/// stopping many topics) legitimately hold it for seconds, hence the margin.
pub const READY_MAX_SNAPSHOT_AGE: Duration = Duration::from_secs(10);

/// Liveness: the process is up.
#[utoipa::path(
    get,
    path = "/healthz",
    tag = "system",
    operation_id = "healthz",
    responses((status = 200, description = "The process is up", body = Liveness))
)]
pub async fn healthz(State(state): State<AppState>) -> Json<Liveness> {
    Json(Liveness { status: "ok".to_string(), uptime_seconds: state.started_at.elapsed().as_secs() })
}

/// Readiness: the engine publishes fresh snapshots (younger than 10 s).
#[utoipa::path(
    get,
    path = "/readyz",
    tag = "system",
    operation_id = "readyz",
    responses(
        (status = 200, description = "Ready", body = Readiness),
        (status = 503, description = "Not ready: the engine's snapshot is stale", body = Readiness),
    )
)]
pub async fn readyz(State(state): State<AppState>) -> (StatusCode, Json<Readiness>) {
    let snap = state.engine.snapshot();
    let age = age_ms(snap.taken_at, now());
    let limit = READY_MAX_SNAPSHOT_AGE.as_millis() as u64;
    if age <= limit {
        (StatusCode::OK, Json(Readiness { ready: true, snapshot_age_ms: age, detail: "ok".into() }))
    } else {
        let detail = format!("the engine's snapshot is {age} ms old (limit {limit} ms)");
        (StatusCode::SERVICE_UNAVAILABLE, Json(Readiness { ready: false, snapshot_age_ms: age, detail }))
    }
}

/// Prometheus metrics (text format 0.0.4).
///
/// Per-partition lag (records, seconds), records and bytes mirrored, partitions by state, sync
/// ages, source cluster-ID health and HTTP request latency by route and status.
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "system",
    operation_id = "metrics",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "Prometheus text exposition", body = String, content_type = "text/plain"),
        (status = 401, description = "No or invalid token", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 403, description = "Role too low", body = ProblemDetails, content_type = "application/problem+json"),
    )
)]
pub async fn metrics(
    _auth: ViewerAuth,
    State(state): State<AppState>,
    Extension(http): Extension<HttpMetrics>,
) -> impl IntoResponse {
    let body = metrics::render(&state.engine.snapshot(), now(), &http, env!("CARGO_PKG_VERSION"));
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], body)
}

/// This OpenAPI document.
#[utoipa::path(
    get,
    path = "/api/v1/openapi.json",
    tag = "system",
    operation_id = "openapi_spec",
    responses((status = 200, description = "The OpenAPI 3.1 document", body = Object))
)]
pub async fn openapi_spec() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/json")], openapi_json())
}
