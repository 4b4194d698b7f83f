//! `/api/v1/cluster` and `/api/v1/mirrors/...`: mirror definitions, health and refresh.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
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
use super::problem::{ApiError, ProblemDetails, ProblemType};
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
        policy_preview: None,
    }
}

/// The mirror's entity tag: a hash of its definition as the API shows it (source with secrets
/// redacted, expected cluster ID, sync settings, throttle) and its creation time, so any change
/// made through the API (or the dashboard) changes it, a delete and re-create too, and lag or
/// state changes do not. The same on every instance of the same version (FNV-1a, not a
/// per-process keyed hash). A change to a plaintext secret's value alone is not visible in it
/// (the snapshot holds secrets redacted); a `[redacted]` value sent back keeps the stored one, so
/// an If-Match update never overwrites such a change unless it sends that secret itself.
pub(super) fn etag(m: &MirrorSnapshot) -> String {
    let definition = serde_json::json!({
        "name": m.name,
        "bootstrap_servers": m.source_bootstrap_servers,
        "properties": crate::domain::secrets::redact(&m.source_properties),
        "expected_source_cluster_id": m.expected_source_cluster_id,
        "sync": super::dto::SyncSettings::from(m.sync_spec.clone()),
        "replication_throttle_bytes_per_sec": m.replication_throttle_bytes_per_sec,
        "approval": super::approvals::ApprovalPolicyDto::from(m.approval.clone()),
        "created_at": ts(m.created_at),
        "topic_include": m.topic_include,
        "topic_exclude": m.topic_exclude,
    });
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in definition.to_string().bytes() {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("\"{hash:016x}\"")
}

/// `If-Match` (RFC 9110 13.1.1): `*` or a list of entity tags compared strongly (a weak tag
/// never matches). `None` when the header is absent.
fn if_match_allows(headers: &HeaderMap, current: &str) -> Option<bool> {
    let mut values = headers.get_all(header::IF_MATCH).iter().peekable();
    values.peek()?;
    Some(values.any(|v| v.to_str().is_ok_and(|v| v.split(',').map(str::trim).any(|tag| tag == "*" || tag == current))))
}

/// The mirror's JSON with its `ETag` header.
fn with_etag(body: MirrorResponse, etag: &str, status: StatusCode) -> Response {
    let mut res = (status, Json(body)).into_response();
    if let Ok(v) = HeaderValue::from_str(etag) {
        res.headers_mut().insert(header::ETAG, v);
    }
    res
}

/// One `If-Match` check and the update it guards run alone on this instance, so two updates
/// that read the same version cannot both pass the check.
static UPDATE_LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

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
            headers(("Location" = String, description = "The new mirror's URL"),
                ("ETag" = String, description = "The mirror's version, for `If-Match` on PATCH"))),
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
        topic_include: body.topic_include.unwrap_or_default(),
        topic_exclude: body.topic_exclude.unwrap_or_else(crate::domain::topic_policy::default_exclude),
        approval: body.approval.map(Into::into).unwrap_or_default(),
    };
    state.engine.create_mirror(spec, caller.actor()).await.map_err(|e| scrub_secrets(e.into(), &properties))?;
    let snap = state.engine.snapshot();
    let m = find_mirror(&snap, &body.name)
        .map_err(|_| ApiError::new(ProblemKind::Internal, "the new mirror is missing from the snapshot"))?;
    let mut res = with_etag(mirror_response(&snap, m), &etag(m), StatusCode::CREATED);
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
        (status = 200, description = "The mirror", body = MirrorResponse,
            headers(("ETag" = String, description = "The mirror definition's version (changes with every change \
                to its source, expected cluster ID, sync settings or throttle): send it as `If-Match` on PATCH"))),
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
) -> Result<Response, ApiError> {
    let snap = state.engine.snapshot();
    let m = find_mirror(&snap, &mirror)?;
    Ok(with_etag(mirror_response(&snap, m), &etag(m), StatusCode::OK))
}

/// Change a mirror (admin).
///
/// Absent fields are left alone. `source` replaces the whole source connection; sending a
/// `[redacted]` property value keeps the stored secret. With `If-Match` (the `ETag` of a GET),
/// the change is made only if the mirror is still that version: otherwise nothing is written and
/// the answer is 412 `precondition-failed`, so a read-modify-write never overwrites a change made
/// in between.
#[utoipa::path(
    patch,
    path = "/api/v1/mirrors/{mirror}",
    tag = "mirrors",
    operation_id = "mirror_update",
    security(("bearer" = [])),
    extensions(("x-required-role" = json!("admin"))),
    params(MirrorPath,
        ("If-Match" = Option<String>, Header, description = "The `ETag` the change is based on (or `*`)")),
    request_body = MirrorUpdateRequest,
    responses(
        (status = 200, description = "The changed mirror", body = MirrorResponse,
            headers(("ETag" = String, description = "The changed mirror's version"))),
        (status = 400, description = "Invalid body or name", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 401, description = "No or invalid token", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 403, description = "Role too low", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 404, description = "No such mirror", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 409, description = "This instance is fenced", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 412, description = "`If-Match` names another version: the mirror changed since it was read (precondition-failed)",
            body = ProblemDetails, content_type = "application/problem+json"),
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
    headers: HeaderMap,
    ApiJson(body): ApiJson<MirrorUpdateRequest>,
) -> Result<Response, ApiError> {
    let _one_at_a_time = UPDATE_LOCK.lock().await;
    let current = etag(find_mirror(&state.engine.snapshot(), &mirror)?);
    if if_match_allows(&headers, &current) == Some(false) {
        return Err(ApiError::new(
            ProblemType::PreconditionFailed,
            format!("mirror {mirror:?} changed since it was read (it is now version {current}); read it again"),
        ));
    }
    let properties = body.source.as_ref().map(|s| s.properties.clone()).unwrap_or_default();
    let update = MirrorUpdate {
        source: body.source.map(|s| SourceSpec { bootstrap_servers: s.bootstrap_servers, properties: s.properties }),
        expected_source_cluster_id: body.expected_source_cluster_id,
        sync: body.sync.map(SyncSpec::from),
        replication_throttle_bytes_per_sec: body.replication_throttle_bytes_per_sec,
        topic_include: body.topic_include,
        topic_exclude: body.topic_exclude,
        approval: body.approval.map(Into::into),
    };
    if body.validate_only {
        return preview_update(&state, &mirror, &update, &current).await.map_err(|e| scrub_secrets(e, &properties));
    }
    state
        .engine
        .update_mirror(&mirror, update, caller.actor())
        .await
        .map_err(|e| scrub_secrets(e.into(), &properties))?;
    let snap = state.engine.snapshot();
    let m = find_mirror(&snap, &mirror)?;
    Ok(with_etag(mirror_response(&snap, m), &etag(m), StatusCode::OK))
}

/// A change with `validate_only`: the checks a change makes before anything is written, then
/// what its topic policy would start and stop now (the same plan a discovery run makes, from
/// the source's topics listed now). Nothing is changed.
async fn preview_update(
    state: &AppState,
    mirror: &str,
    update: &MirrorUpdate,
    etag_now: &str,
) -> Result<Response, ApiError> {
    if let Some(source) = &update.source {
        if source.bootstrap_servers.trim().is_empty() {
            return Err(ApiError::new(ProblemKind::InvalidName, "source.bootstrap_servers must not be empty"));
        }
        let given: BTreeMap<String, String> = source
            .properties
            .iter()
            .filter(|(_, v)| v.as_str() != REDACTED)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        crate::engine::check_client_properties(&given)?;
    }
    if let Some(sync) = &update.sync {
        crate::engine::check_group_patterns(sync)?;
    }
    if let Some(rate) = update.replication_throttle_bytes_per_sec {
        crate::engine::check_throttle(Some(rate))?;
    }
    let snap = state.engine.snapshot();
    let m = find_mirror(&snap, mirror)?;
    let include = update.topic_include.clone().unwrap_or_else(|| m.topic_include.clone());
    let exclude = update.topic_exclude.clone().unwrap_or_else(|| m.topic_exclude.clone());
    let plan = state.engine.preview_policy(mirror, include.clone(), exclude.clone()).await?;
    let mut body = mirror_response(&snap, m);
    body.policy_preview = Some(super::dto::PolicyPreview::new(include, exclude, &plan));
    Ok(with_etag(body, etag_now, StatusCode::OK))
}

/// Why a mirror is deleted, for a mirror whose approval policy covers deletes.
#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct DeleteQuery {
    /// Why: required when the mirror's approval policy covers `delete`, which then waits for a
    /// second person (HTTP 202).
    reason: Option<String>,
    /// Run the delete at once although the policy covers it (with a `reason`); the audit trail
    /// marks it.
    break_glass: Option<bool>,
}

/// Delete a mirror (admin).
///
/// Refused with `mirror-has-active-topics` (409) while any of its topics is not STOPPED. When the
/// mirror's approval policy covers `delete`, the call needs a `reason` and waits for a second
/// person: HTTP 202 with the request; `break_glass=true` with a reason deletes it at once.
#[utoipa::path(
    delete,
    path = "/api/v1/mirrors/{mirror}",
    tag = "mirrors",
    operation_id = "mirror_delete",
    security(("bearer" = [])),
    extensions(("x-required-role" = json!("admin"))),
    params(MirrorPath, DeleteQuery),
    responses(
        (status = 204, description = "Deleted"),
        (status = 202, description = "The mirror's approval policy covers deletes: the delete waits for a second person's approval",
            body = super::approvals::ApprovalPending),
        (status = 422, description = "No `reason` for a delete that needs approval (reason-required)", body = ProblemDetails,
            content_type = "application/problem+json"),
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
    super::ApiQuery(q): super::ApiQuery<DeleteQuery>,
) -> Result<Response, ApiError> {
    use super::approvals::{Gate, complete, gate, pending_response};
    validate_mirror_name(&mirror)?;
    let action = Some(crate::domain::approval::ApprovalAction::Delete);
    let call = crate::engine::PendingCall::default();
    let entry = match gate(&state, &caller, &mirror, action, call, q.reason, q.break_glass.unwrap_or(false)).await? {
        Gate::Pending(a) => return Ok(pending_response(&a)),
        Gate::Run(entry) => entry,
    };
    let r = state.engine.delete_mirror(&mirror, caller.actor()).await;
    let executed = match &r {
        Ok(()) => crate::engine::Executed::Deleted,
        Err(e) => crate::engine::Executed::Refused(e.clone()),
    };
    complete(&state, entry.as_ref(), &executed).await;
    r?;
    Ok(StatusCode::NO_CONTENT.into_response())
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

    fn mirror() -> MirrorSnapshot {
        MirrorSnapshot {
            topic_include: Vec::new(),
            topic_exclude: Vec::new(),
            discovery: Default::default(),
            name: "m".into(),
            source_bootstrap_servers: "src:9092".into(),
            source_properties: [("sasl.password".to_string(), "[redacted]".to_string())].into_iter().collect(),
            expected_source_cluster_id: Some("id".into()),
            sync_spec: Default::default(),
            observed_source_cluster_id: None,
            cluster_id_status: crate::engine::ClusterIdStatus::Ok,
            cluster_id_checked_at: None,
            cluster_id_error: None,
            data_path: crate::engine::DataPathStatus::Running,
            replication_throttle_bytes_per_sec: None,
            throttled_seconds: 0.0,
            created_at: crate::domain::Timestamp::from_millis(1_000),
            sync: Vec::new(),
            groups: Vec::new(),
            topics: Vec::new(),
            approval: Default::default(),
        }
    }

    #[test]
    fn the_etag_follows_the_definition_only() {
        let m = mirror();
        let tag = etag(&m);
        assert!(tag.starts_with('"') && tag.ends_with('"') && tag.len() == 18, "{tag}");
        assert_eq!(etag(&mirror()), tag, "deterministic");
        // Not the live data.
        let live = MirrorSnapshot { throttled_seconds: 5.0, observed_source_cluster_id: Some("x".into()), ..mirror() };
        assert_eq!(etag(&live), tag);
        // Every part of the definition.
        let changes = [
            MirrorSnapshot { source_bootstrap_servers: "other:9092".into(), ..mirror() },
            MirrorSnapshot { source_properties: Default::default(), ..mirror() },
            MirrorSnapshot { expected_source_cluster_id: None, ..mirror() },
            MirrorSnapshot { replication_throttle_bytes_per_sec: Some(4096), ..mirror() },
            MirrorSnapshot { sync_spec: crate::engine::SyncSpec { acls: false, ..Default::default() }, ..mirror() },
            MirrorSnapshot { created_at: crate::domain::Timestamp::from_millis(2_000), ..mirror() },
        ];
        for changed in changes {
            assert_ne!(etag(&changed), tag, "{changed:?}");
        }
    }

    #[test]
    fn if_match_compares_strongly() {
        let current = "\"00000000000000ab\"";
        let headers = |values: &[&str]| {
            let mut h = HeaderMap::new();
            for v in values {
                h.append(header::IF_MATCH, HeaderValue::from_str(v).unwrap());
            }
            h
        };
        assert_eq!(if_match_allows(&headers(&[]), current), None);
        assert_eq!(if_match_allows(&headers(&[current]), current), Some(true));
        assert_eq!(if_match_allows(&headers(&["*"]), current), Some(true));
        assert_eq!(if_match_allows(&headers(&["\"1\", \"00000000000000ab\""]), current), Some(true));
        assert_eq!(if_match_allows(&headers(&["\"1\"", current]), current), Some(true));
        assert_eq!(if_match_allows(&headers(&["\"1\""]), current), Some(false));
        assert_eq!(if_match_allows(&headers(&["W/\"00000000000000ab\""]), current), Some(false));
        assert_eq!(if_match_allows(&headers(&["00000000000000ab"]), current), Some(false));
    }
}
