//! `/api/v1/cluster` and `/api/v1/mirrors/...`: mirror definitions, health and refresh.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::app::AppState;
use crate::domain::secrets::{REDACTED, is_secret_property};
use crate::engine::{
    MirrorSnapshot, MirrorSpec, MirrorUpdate, ProblemKind, Snapshot, SourceSpec, SyncSpec, validate_mirror_name,
};

use super::auth::{AdminAuth, OperatorAuth, ViewerAuth};
use super::dto::{
    ClusterResponse, HealthResponse, Mirror, MirrorCreateRequest, MirrorPath, MirrorResponse, MirrorUpdateRequest,
    MirrorsResponse, RefreshResponse, ts,
};
use super::problem::{ApiError, ProblemDetails};
use super::{ApiJson, ApiPath, age_ms, now};

/// Validates a new mirror's name: the engine's rules, and not `.` or `..` (a path segment
/// that clients and proxies collapse, so such a mirror could never be addressed).
fn check_new_mirror_name(name: &str) -> Result<(), ApiError> {
    validate_mirror_name(name)?;
    if name == "." || name == ".." {
        return Err(ApiError::new(
            ProblemKind::InvalidName,
            format!("invalid mirror name {name:?}: '.' and '..' are not allowed"),
        ));
    }
    Ok(())
}

/// Secrets are write-only, also in error messages: any secret property value of the request that
/// a (librdkafka) error quotes back is replaced by `[redacted]`.
fn scrub_secrets(e: ApiError, properties: &BTreeMap<String, String>) -> ApiError {
    let mut detail = e.detail.clone();
    for (k, v) in properties {
        if is_secret_property(k) && v.len() >= 4 && v != REDACTED {
            detail = detail.replace(v.as_str(), REDACTED);
        }
    }
    if detail == e.detail { e } else { ApiError::new(e.problem, detail) }
}

/// Finds a mirror in the snapshot: `invalid-name` for a malformed name, `mirror-not-found` for
/// an unknown one.
pub(super) fn find_mirror<'a>(snap: &'a Snapshot, name: &str) -> Result<&'a MirrorSnapshot, ApiError> {
    validate_mirror_name(name)?;
    snap.mirror(name)
        .ok_or_else(|| ApiError::new(ProblemKind::MirrorNotFound, format!("mirror {name:?} does not exist")))
}

fn mirror_response(snap: &Snapshot, m: &MirrorSnapshot) -> MirrorResponse {
    MirrorResponse {
        mirror: Mirror::from(m),
        taken_at: ts(snap.taken_at),
        snapshot_age_ms: age_ms(snap.taken_at, now()),
    }
}

/// The destination cluster.
#[utoipa::path(
    get,
    path = "/api/v1/cluster",
    tag = "cluster",
    operation_id = "cluster_get",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The destination cluster", body = ClusterResponse),
        (status = 401, description = "No or invalid token", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 403, description = "Role too low", body = ProblemDetails, content_type = "application/problem+json"),
    )
)]
pub async fn cluster_get(_auth: ViewerAuth, State(state): State<AppState>) -> Json<ClusterResponse> {
    let snap = state.engine.snapshot();
    Json(ClusterResponse {
        cluster_id: snap.destination_cluster_id.clone(),
        brokers: snap
            .destination_brokers
            .iter()
            .map(|b| super::dto::Broker { id: b.id, host: b.host.clone(), port: i32::from(b.port) })
            .collect(),
        kmirror_version: env!("CARGO_PKG_VERSION").to_string(),
        mirror_count: snap.mirrors.len(),
        uptime_seconds: state.started_at.elapsed().as_secs(),
        taken_at: ts(snap.taken_at),
        snapshot_age_ms: age_ms(snap.taken_at, now()),
    })
}

/// List mirrors.
#[utoipa::path(
    get,
    path = "/api/v1/mirrors",
    tag = "mirrors",
    operation_id = "mirror_list",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "Every mirror", body = MirrorsResponse),
        (status = 401, description = "No or invalid token", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 403, description = "Role too low", body = ProblemDetails, content_type = "application/problem+json"),
    )
)]
pub async fn mirror_list(_auth: ViewerAuth, State(state): State<AppState>) -> Json<MirrorsResponse> {
    let snap = state.engine.snapshot();
    Json(MirrorsResponse {
        mirrors: snap.mirrors.iter().map(Mirror::from).collect(),
        taken_at: ts(snap.taken_at),
        snapshot_age_ms: age_ms(snap.taken_at, now()),
    })
}

/// Create a mirror (admin).
///
/// Checks that the source answers and records its cluster ID when none is given. Secret source
/// properties are write-only.
#[utoipa::path(
    post,
    path = "/api/v1/mirrors",
    tag = "mirrors",
    operation_id = "mirror_create",
    security(("bearer" = [])),
    extensions(("x-required-role" = json!("admin"))),
    request_body = MirrorCreateRequest,
    responses(
        (status = 201, description = "Created", body = MirrorResponse,
            headers(("Location" = String, description = "The new mirror's URL"))),
        (status = 400, description = "Invalid body or name", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 401, description = "No or invalid token", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 403, description = "Role too low", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 409, description = "The mirror exists, the source cluster ID differs, or this instance is fenced",
            body = ProblemDetails, content_type = "application/problem+json"),
        (status = 413, description = "Body over 1 MiB", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 415, description = "Body is not JSON", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 422, description = "The source does not answer, or a client property is refused (invalid-property)",
            body = ProblemDetails, content_type = "application/problem+json"),
        (status = 503, description = "Destination unavailable or shutting down", body = ProblemDetails,
            content_type = "application/problem+json"),
    )
)]
pub async fn mirror_create(
    AdminAuth(caller): AdminAuth,
    State(state): State<AppState>,
    ApiJson(body): ApiJson<MirrorCreateRequest>,
) -> Result<Response, ApiError> {
    check_new_mirror_name(&body.name)?;
    let properties = body.source.properties.clone();
    let spec = MirrorSpec {
        name: body.name.clone(),
        source: SourceSpec { bootstrap_servers: body.source.bootstrap_servers, properties: body.source.properties },
        expected_source_cluster_id: body.expected_source_cluster_id,
        sync: body.sync.map(SyncSpec::from).unwrap_or_default(),
        replication_throttle_bytes_per_sec: body.replication_throttle_bytes_per_sec.filter(|r| *r > 0),
    };
    state.engine.create_mirror(spec, caller.actor()).await.map_err(|e| scrub_secrets(e.into(), &properties))?;
    let snap = state.engine.snapshot();
    let m = find_mirror(&snap, &body.name)
        .map_err(|_| ApiError::new(ProblemKind::Internal, "the new mirror is missing from the snapshot"))?;
    let mut res = (StatusCode::CREATED, Json(mirror_response(&snap, m))).into_response();
    if let Ok(v) = HeaderValue::from_str(&format!("/api/v1/mirrors/{}", body.name)) {
        res.headers_mut().insert(header::LOCATION, v);
    }
    Ok(res)
}

/// One mirror.
#[utoipa::path(
    get,
    path = "/api/v1/mirrors/{mirror}",
    tag = "mirrors",
    operation_id = "mirror_get",
    security(("bearer" = [])),
    params(MirrorPath),
    responses(
        (status = 200, description = "The mirror", body = MirrorResponse),
        (status = 400, description = "Invalid mirror name", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 401, description = "No or invalid token", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 403, description = "Role too low", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 404, description = "No such mirror", body = ProblemDetails, content_type = "application/problem+json"),
    )
)]
pub async fn mirror_get(
    _auth: ViewerAuth,
    State(state): State<AppState>,
    ApiPath(MirrorPath { mirror }): ApiPath<MirrorPath>,
) -> Result<Json<MirrorResponse>, ApiError> {
    let snap = state.engine.snapshot();
    let m = find_mirror(&snap, &mirror)?;
    Ok(Json(mirror_response(&snap, m)))
}

/// Change a mirror (admin).
///
/// Absent fields are left alone. `source` replaces the whole source connection; sending a
/// `[redacted]` property value keeps the stored secret.
#[utoipa::path(
    patch,
    path = "/api/v1/mirrors/{mirror}",
    tag = "mirrors",
    operation_id = "mirror_update",
    security(("bearer" = [])),
    extensions(("x-required-role" = json!("admin"))),
    params(MirrorPath),
    request_body = MirrorUpdateRequest,
    responses(
        (status = 200, description = "The changed mirror", body = MirrorResponse),
        (status = 400, description = "Invalid body or name", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 401, description = "No or invalid token", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 403, description = "Role too low", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 404, description = "No such mirror", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 409, description = "This instance is fenced", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 413, description = "Body over 1 MiB", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 415, description = "Body is not JSON", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 422, description = "A client property is refused (invalid-property): not on the allow list, loads code, \
            is set by kmirror, or a reference the policy does not allow", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 503, description = "Destination unavailable or shutting down", body = ProblemDetails,
            content_type = "application/problem+json"),
    )
)]
pub async fn mirror_update(
    AdminAuth(caller): AdminAuth,
    State(state): State<AppState>,
    ApiPath(MirrorPath { mirror }): ApiPath<MirrorPath>,
    ApiJson(body): ApiJson<MirrorUpdateRequest>,
) -> Result<Json<MirrorResponse>, ApiError> {
    find_mirror(&state.engine.snapshot(), &mirror)?;
    let properties = body.source.as_ref().map(|s| s.properties.clone()).unwrap_or_default();
    let update = MirrorUpdate {
        source: body.source.map(|s| SourceSpec { bootstrap_servers: s.bootstrap_servers, properties: s.properties }),
        expected_source_cluster_id: body.expected_source_cluster_id,
        sync: body.sync.map(SyncSpec::from),
        replication_throttle_bytes_per_sec: body.replication_throttle_bytes_per_sec,
    };
    state
        .engine
        .update_mirror(&mirror, update, caller.actor())
        .await
        .map_err(|e| scrub_secrets(e.into(), &properties))?;
    let snap = state.engine.snapshot();
    let m = find_mirror(&snap, &mirror)?;
    Ok(Json(mirror_response(&snap, m)))
}

/// Delete a mirror (admin).
///
/// Refused with `mirror-has-active-topics` (409) while any of its topics is not STOPPED.
#[utoipa::path(
    delete,
    path = "/api/v1/mirrors/{mirror}",
    tag = "mirrors",
    operation_id = "mirror_delete",
    security(("bearer" = [])),
    extensions(("x-required-role" = json!("admin"))),
    params(MirrorPath),
    responses(
        (status = 204, description = "Deleted"),
        (status = 400, description = "Invalid mirror name", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 401, description = "No or invalid token", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 403, description = "Role too low", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 404, description = "No such mirror", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 409, description = "A topic is not STOPPED, or this instance is fenced", body = ProblemDetails,
            content_type = "application/problem+json"),
        (status = 503, description = "Destination unavailable or shutting down", body = ProblemDetails,
            content_type = "application/problem+json"),
    )
)]
pub async fn mirror_delete(
    AdminAuth(caller): AdminAuth,
    State(state): State<AppState>,
    ApiPath(MirrorPath { mirror }): ApiPath<MirrorPath>,
) -> Result<StatusCode, ApiError> {
    validate_mirror_name(&mirror)?;
    state.engine.delete_mirror(&mirror, caller.actor()).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// A mirror's health: source cluster-ID check, data path and metadata sync per kind.
#[utoipa::path(
    get,
    path = "/api/v1/mirrors/{mirror}/health",
    tag = "mirrors",
    operation_id = "mirror_health",
    security(("bearer" = [])),
    params(MirrorPath),
    responses(
        (status = 200, description = "The mirror's health", body = HealthResponse),
        (status = 400, description = "Invalid mirror name", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 401, description = "No or invalid token", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 403, description = "Role too low", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 404, description = "No such mirror", body = ProblemDetails, content_type = "application/problem+json"),
    )
)]
pub async fn mirror_health(
    _auth: ViewerAuth,
    State(state): State<AppState>,
    ApiPath(MirrorPath { mirror }): ApiPath<MirrorPath>,
) -> Result<Json<HealthResponse>, ApiError> {
    let snap = state.engine.snapshot();
    let m = find_mirror(&snap, &mirror)?;
    let now = now();
    Ok(Json(HealthResponse::new(m, now, ts(snap.taken_at), age_ms(snap.taken_at, now))))
}

/// Re-check a mirror's source metadata now (operator).
///
/// Schedules the refresh and returns at once; results appear in `/health` and the snapshot.
#[utoipa::path(
    post,
    path = "/api/v1/mirrors/{mirror}/refresh",
    tag = "mirrors",
    operation_id = "mirror_refresh",
    security(("bearer" = [])),
    extensions(("x-required-role" = json!("operator"))),
    params(MirrorPath),
    responses(
        (status = 202, description = "Refresh scheduled", body = RefreshResponse),
        (status = 400, description = "Invalid mirror name", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 401, description = "No or invalid token", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 403, description = "Role too low", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 404, description = "No such mirror", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 503, description = "Shutting down", body = ProblemDetails, content_type = "application/problem+json"),
    )
)]
pub async fn mirror_refresh(
    _auth: OperatorAuth,
    State(state): State<AppState>,
    ApiPath(MirrorPath { mirror }): ApiPath<MirrorPath>,
) -> Result<(StatusCode, Json<RefreshResponse>), ApiError> {
    validate_mirror_name(&mirror)?;
    state.engine.refresh_now(&mirror).await?;
    Ok((StatusCode::ACCEPTED, Json(RefreshResponse { mirror, accepted: true })))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::problem::ProblemType;

    #[test]
    fn secrets_quoted_by_errors_are_redacted() {
        let props: BTreeMap<String, String> = [("sasl.password", "hunter2-secret"), ("client.id", "visible-id")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let e = ApiError::new(ProblemKind::InvalidName, "bad value \"hunter2-secret\" next to \"visible-id\"");
        let e = scrub_secrets(e, &props);
        assert_eq!(e.detail, "bad value \"[redacted]\" next to \"visible-id\"");
        assert_eq!(e.problem, ProblemType::Engine(ProblemKind::InvalidName));
    }
}
