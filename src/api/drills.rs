//! Disaster-recovery drills over the API: start one on a mirror, follow it, and download its
//! report (JSON, exactly as signed, or Markdown).

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::app_state::AppState;
use crate::domain::approval::ApprovalAction;
use crate::engine::{DrillOptions, DrillView, Executed, PendingCall, ProblemKind, validate_mirror_name};

use super::approvals::{Approval, Gate, complete, gate};
use super::auth::{OperatorAuth, ViewerAuth};
use super::dto::MirrorPath;
use super::mirrors::find_mirror;
use super::problem::{ApiError, ProblemDetails};
use super::{ApiJson, ApiPath, now};
pub use crate::presentation::dto::{Drill, DrillStepDto};

/// `{mirror}` and `{id}` of a drill in a path.
#[derive(Debug, Clone, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct DrillPath {
    /// Mirror name.
    #[param(pattern = r"^[a-zA-Z0-9._-]{1,249}$", example = "eu-to-us")]
    pub mirror: String,
    /// The drill's ID (its operation's).
    pub id: String,
}

/// A drill to run.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DrillRequest {
    /// The canary topic to create on the source (default `kmirror-drill.<mirror>`). It must not
    /// exist on either cluster: kmirror only ever deletes canaries it created.
    #[serde(default)]
    pub canary_topic: Option<String>,
    /// Recovery time objective: the drill fails when the failover takes longer (1 to 86400).
    #[serde(default)]
    #[schema(minimum = 1, maximum = 86_400)]
    pub rto_objective_seconds: Option<u64>,
    /// Recovery point objective: the drill fails when the mirror lags more than this at the
    /// failover (1 to 86400).
    #[serde(default)]
    #[schema(minimum = 1, maximum = 86_400)]
    pub rpo_objective_seconds: Option<u64>,
    /// Why: required when the mirror's approval policy covers drills, which then wait for a
    /// second person (HTTP 202 with `status: pending_approval`).
    #[serde(default)]
    pub reason: Option<String>,
    /// Admin only: run a drill the approval policy covers at once (with a `reason`).
    #[serde(default)]
    pub break_glass: bool,
}

/// A drill that started, or a request for one that waits for a second person.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct DrillStarted {
    /// The drill's ID (`running`): follow it at `/api/v1/operations/{operation_id}`; or the
    /// request's ID (`pending_approval`).
    pub operation_id: String,
    /// `running` or `pending_approval`.
    pub status: String,
    /// The request, when the drill waits for approval; the break-glass entry when an admin ran it
    /// without one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval: Option<Approval>,
}

/// A mirror's drills, newest first.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct DrillsResponse {
    pub mirror: String,
    pub items: Vec<Drill>,
}

fn seconds_to_ms(field: &str, v: Option<u64>) -> Result<Option<i64>, ApiError> {
    match v {
        None => Ok(None),
        Some(s) if (1..=86_400).contains(&s) => Ok(Some(s as i64 * 1000)),
        Some(s) => Err(ApiError::new(ProblemKind::InvalidSetting, format!("{field} is {s}; use 1 to 86400 seconds"))),
    }
}

/// Run a DR drill on the mirror (operator): rehearse the real failover path on a canary topic.
///
/// Creates the canary topic on the source (answered at once with `drill-canary-refused`, 422,
/// when the source does not let the mirror's principal create it, and nothing is left behind),
/// produces a known transactional sequence with an aborted transaction, commits a consumer group
/// on the source, mirrors the canary through the mirror's own data path, fails it over, and
/// measures the RTO, records lost and duplicated, whether the group resumes at exactly the next
/// record, and the mirror's live RPO. Then it deletes the canary on both clusters. The
/// mirror's own topics are never touched. Answers 202 with the drill's operation ID; progress is
/// at `/api/v1/operations/{id}` and `/api/v1/mirrors/{mirror}/drills/{id}`, the report is kept in
/// the state topic.
#[utoipa::path(
    post,
    path = "/api/v1/mirrors/{mirror}/drills",
    tag = "drills",
    operation_id = "drill_start",
    security(("bearer" = [])),
    extensions(("x-required-role" = json!("operator"))),
    params(MirrorPath),
    request_body = DrillRequest,
    responses(
        (status = 202, description = "The drill runs (`running`), or waits for a second person's approval (`pending_approval`)",
            body = DrillStarted),
        (status = 400, description = "Invalid body, canary name or objective", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 401, description = "No or invalid token", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 403, description = "Role too low; break-glass without the admin role", body = ProblemDetails,
            content_type = "application/problem+json"),
        (status = 404, description = "No such mirror", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 409, description = "A drill of the mirror is running (drill-running); the canary exists (drill-canary-exists); \
            this instance is fenced", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 413, description = "Body over 1 MiB", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 415, description = "Body is not JSON", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 422, description = "The source refused the canary (drill-canary-refused) or does not answer; no reason given \
            for a call that needs approval (reason-required)", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 503, description = "Destination unavailable or shutting down", body = ProblemDetails,
            content_type = "application/problem+json"),
    )
)]
pub async fn drill_start(
    OperatorAuth(caller): OperatorAuth,
    State(state): State<AppState>,
    ApiPath(MirrorPath { mirror }): ApiPath<MirrorPath>,
    ApiJson(body): ApiJson<DrillRequest>,
) -> Result<Response, ApiError> {
    find_mirror(&state.engine.snapshot(), &mirror)?;
    let options = DrillOptions {
        canary_topic: body.canary_topic.clone(),
        rto_objective_ms: seconds_to_ms("rto_objective_seconds", body.rto_objective_seconds)?,
        rpo_objective_ms: seconds_to_ms("rpo_objective_seconds", body.rpo_objective_seconds)?,
    };
    if let Some(c) = &options.canary_topic {
        crate::engine::validate_topic_name(c)?;
    }
    let call = PendingCall { drill: options.clone(), ..Default::default() };
    let entry =
        match gate(&state, &caller, &mirror, Some(ApprovalAction::Drill), call, body.reason, body.break_glass).await? {
            Gate::Pending(a) => {
                let body = DrillStarted {
                    operation_id: a.request_id.clone(),
                    status: "pending_approval".into(),
                    approval: Some(Approval::of(&a, now())),
                };
                return Ok((StatusCode::ACCEPTED, Json(body)).into_response());
            }
            Gate::Run(entry) => entry,
        };
    let started = state.engine.start_drill(&mirror, options, &caller.actor(), None).await;
    let executed = match &started {
        Ok(id) => Executed::Drill(id.clone()),
        Err(e) => Executed::Refused(e.clone()),
    };
    let approval = complete(&state, entry.as_ref(), &executed).await;
    let id = started?;
    let body = DrillStarted { operation_id: id, status: "running".into(), approval };
    Ok((StatusCode::ACCEPTED, Json(body)).into_response())
}

/// A mirror's drills, newest first (the last 100 per mirror are kept).
#[utoipa::path(
    get,
    path = "/api/v1/mirrors/{mirror}/drills",
    tag = "drills",
    operation_id = "drill_list",
    security(("bearer" = [])),
    params(MirrorPath),
    responses(
        (status = 200, description = "The mirror's drills", body = DrillsResponse),
        (status = 400, description = "Invalid mirror name", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 401, description = "No or invalid token", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 403, description = "Role too low", body = ProblemDetails, content_type = "application/problem+json"),
    )
)]
pub async fn drill_list(
    _auth: ViewerAuth,
    State(state): State<AppState>,
    ApiPath(MirrorPath { mirror }): ApiPath<MirrorPath>,
) -> Result<Json<DrillsResponse>, ApiError> {
    validate_mirror_name(&mirror)?;
    let items = state.engine.drills().iter().filter(|d| d.mirror == mirror).map(Drill::of).collect();
    Ok(Json(DrillsResponse { mirror, items }))
}

fn find(state: &AppState, mirror: &str, id: &str) -> Result<DrillView, ApiError> {
    validate_mirror_name(mirror)?;
    state
        .engine
        .drill(id)
        .filter(|d| d.mirror == mirror)
        .ok_or_else(|| ApiError::new(ProblemKind::DrillNotFound, format!("mirror {mirror:?} has no drill {id:?}")))
}

/// One drill: its steps and, once finished, its report.
#[utoipa::path(
    get,
    path = "/api/v1/mirrors/{mirror}/drills/{id}",
    tag = "drills",
    operation_id = "drill_get",
    security(("bearer" = [])),
    params(DrillPath),
    responses(
        (status = 200, description = "The drill", body = Drill),
        (status = 400, description = "Invalid mirror name", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 401, description = "No or invalid token", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 403, description = "Role too low", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 404, description = "No such drill (drill-not-found)", body = ProblemDetails, content_type = "application/problem+json"),
    )
)]
pub async fn drill_get(
    _auth: ViewerAuth,
    State(state): State<AppState>,
    ApiPath(DrillPath { mirror, id }): ApiPath<DrillPath>,
) -> Result<Json<Drill>, ApiError> {
    Ok(Json(Drill::of(&find(&state, &mirror, &id)?)))
}

fn not_finished(id: &str) -> ApiError {
    ApiError::new(ProblemKind::DrillNotFound, format!("drill {id:?} has no report yet: it is still running"))
}

fn attachment(mut res: Response, name: &str) -> Response {
    if let Ok(v) = HeaderValue::from_str(&format!("attachment; filename=\"{name}\"")) {
        res.headers_mut().insert(header::CONTENT_DISPOSITION, v);
    }
    res
}

/// A finished drill's report as JSON, byte for byte as it was signed and stored.
///
/// Its `digest` covers the canonical JSON of every other member (members sorted by name, no
/// whitespace): `jq -cjS 'del(.digest)' report.json | sha256sum` gives it, or with a signing key
/// (`hmac-sha-256`) `... | openssl dgst -sha256 -hmac "$(cat signing.key)"`.
#[utoipa::path(
    get,
    path = "/api/v1/mirrors/{mirror}/drills/{id}/report.json",
    tag = "drills",
    operation_id = "drill_report_json",
    security(("bearer" = [])),
    params(DrillPath),
    responses(
        (status = 200, description = "The report (`kmirror-drill-report/1`)", body = Object, content_type = "application/json"),
        (status = 400, description = "Invalid mirror name", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 401, description = "No or invalid token", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 403, description = "Role too low", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 404, description = "No such drill, or it is still running (drill-not-found)", body = ProblemDetails,
            content_type = "application/problem+json"),
    )
)]
pub async fn drill_report_json(
    _auth: ViewerAuth,
    State(state): State<AppState>,
    ApiPath(DrillPath { mirror, id }): ApiPath<DrillPath>,
) -> Result<Response, ApiError> {
    let d = find(&state, &mirror, &id)?;
    let json = d.report_json.ok_or_else(|| not_finished(&id))?;
    let res = ([(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], json).into_response();
    Ok(attachment(res, &format!("kmirror-drill-{id}.json")))
}

/// A finished drill's report as Markdown (the same figures and checks; the digest is the JSON
/// report's).
#[utoipa::path(
    get,
    path = "/api/v1/mirrors/{mirror}/drills/{id}/report.md",
    tag = "drills",
    operation_id = "drill_report_markdown",
    security(("bearer" = [])),
    params(DrillPath),
    responses(
        (status = 200, description = "The report", body = String, content_type = "text/markdown"),
        (status = 400, description = "Invalid mirror name", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 401, description = "No or invalid token", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 403, description = "Role too low", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 404, description = "No such drill, or it is still running (drill-not-found)", body = ProblemDetails,
            content_type = "application/problem+json"),
    )
)]
pub async fn drill_report_markdown(
    _auth: ViewerAuth,
    State(state): State<AppState>,
    ApiPath(DrillPath { mirror, id }): ApiPath<DrillPath>,
) -> Result<Response, ApiError> {
    let d = find(&state, &mirror, &id)?;
    let report = d.report.ok_or_else(|| not_finished(&id))?;
    let res = (
        [(header::CONTENT_TYPE, HeaderValue::from_static("text/markdown; charset=utf-8"))],
        crate::domain::drill::markdown(&report),
    )
        .into_response();
    Ok(attachment(res, &format!("kmirror-drill-{id}.md")))
}
