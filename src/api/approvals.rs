//! Two-person approval over the API: the gate every guarded call passes (`topics:stop`, a
//! start with resync or that fails back, a mirror delete, a drill), and `/api/v1/approvals`
//! where a second person approves or rejects a request.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::app_state::AppState;
use crate::auth::Role;
use crate::domain::approval::{ApprovalAction, ApprovalStatus, check_reason};
pub(super) use crate::engine::Gate;
use crate::engine::{ApprovalRecord, Decision, Executed, PendingCall, ProblemKind, validate_mirror_name};

use super::auth::{Caller, OperatorAuth, ViewerAuth};
use super::dto::LifecycleResponse;
use super::problem::{ApiError, ProblemDetails, ProblemType};
use super::{ApiJson, ApiPath, ApiQuery, now};
pub use crate::presentation::dto::{Approval, ApprovalPolicyDto};

/// A call that now waits for a second person (HTTP 202): nothing ran yet.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ApprovalPending {
    /// The request's ID: poll `/api/v1/operations/{operation_id}` or `/api/v1/approvals/{id}`.
    pub operation_id: String,
    /// Always `pending_approval`.
    pub status: String,
    pub approval: Approval,
}

/// Whether `action` on `mirror` needs a second person (the mirror's policy).
pub(super) fn needs_approval(state: &AppState, mirror: &str, action: Option<ApprovalAction>) -> bool {
    state.engine.needs_approval(mirror, action)
}

/// The gate of a guarded call ([`crate::engine::EngineHandle::gate`]).
pub(super) async fn gate(
    state: &AppState,
    caller: &Caller,
    mirror: &str,
    action: Option<ApprovalAction>,
    call: PendingCall,
    reason: Option<String>,
    break_glass: bool,
) -> Result<Gate, ApiError> {
    let is_admin = caller.identity.role == Role::Admin;
    Ok(state.engine.gate(mirror, action, call, &caller.actor(), is_admin, reason.as_deref(), break_glass).await?)
}

/// The 202 answer of a call that waits for a second person.
pub(super) fn pending_response(a: &ApprovalRecord) -> Response {
    let body = ApprovalPending {
        operation_id: a.request_id.clone(),
        status: "pending_approval".into(),
        approval: Approval::of(a, now()),
    };
    (StatusCode::ACCEPTED, Json(body)).into_response()
}

/// Completes a break-glass entry with what its call did (logged when it cannot be written: the
/// call itself ran).
pub(super) async fn complete(
    state: &AppState,
    entry: Option<&ApprovalRecord>,
    executed: &Executed,
) -> Option<Approval> {
    let entry = entry?;
    match state.engine.approval_ran(entry, executed).await {
        Ok(done) => Some(Approval::of(&done, now())),
        Err(e) => {
            tracing::warn!(entry = %entry.request_id, "cannot record what the break-glass call did: {e}");
            Some(Approval::of(entry, now()))
        }
    }
}

/// `approvals:approve` / `approvals:reject` body.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DecisionRequest {
    /// A note for the audit trail; required to reject.
    #[serde(default)]
    pub reason: Option<String>,
}

/// A decision and, for an approval, what the call did.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct DecisionResponse {
    pub approval: Approval,
    /// The approved call's result, when it was a lifecycle call (per-topic outcomes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<LifecycleResponse>,
    /// Why the approved call could not run at all (the engine refused it as a whole).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<super::dto::TopicProblem>,
}

/// Filters of the approvals list.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ApprovalsQuery {
    /// Only requests on this mirror.
    mirror: Option<String>,
    /// Only requests with this status (`pending`, `executed`, `rejected`, `expired`, ...).
    status: Option<String>,
}

/// Every request still kept, newest first.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ApprovalsResponse {
    pub items: Vec<Approval>,
}

/// Requests for calls that need a second person's approval, newest first.
///
/// A call a mirror's approval policy covers (`approval.required_for`) does not run when sent: it
/// becomes a request, answered with HTTP 202, that another identity with the operator role
/// approves or rejects here. Break-glass calls (an admin ran one at once) are listed too.
#[utoipa::path(
    get,
    path = "/api/v1/approvals",
    tag = "approvals",
    operation_id = "approval_list",
    security(("bearer" = [])),
    params(ApprovalsQuery),
    responses(
        (status = 200, description = "The requests", body = ApprovalsResponse),
        (status = 400, description = "Invalid query", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 401, description = "No or invalid token", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 403, description = "Role too low", body = ProblemDetails, content_type = "application/problem+json"),
    )
)]
pub async fn approval_list(
    _auth: ViewerAuth,
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<ApprovalsQuery>,
) -> Result<Json<ApprovalsResponse>, ApiError> {
    if let Some(m) = &q.mirror {
        validate_mirror_name(m)?;
    }
    if let Some(s) = &q.status
        && ApprovalStatus::parse(s).is_none()
    {
        return Err(ApiError::new(
            ProblemType::InvalidQuery,
            format!("unknown status {s:?}; use one of: {}", ApprovalStatus::ALL.map(ApprovalStatus::as_str).join(", ")),
        ));
    }
    let now = now();
    let mut items: Vec<Approval> = state
        .engine
        .approvals_listed()
        .iter()
        .filter(|a| q.mirror.as_ref().is_none_or(|m| *m == a.mirror))
        .map(|a| Approval::of(a, now))
        .filter(|a| q.status.as_ref().is_none_or(|s| *s == a.status))
        .collect();
    items.sort_by(|a, b| b.requested_at.cmp(&a.requested_at).then_with(|| b.id.cmp(&a.id)));
    Ok(Json(ApprovalsResponse { items }))
}

fn find(state: &AppState, id: &str) -> Result<ApprovalRecord, ApiError> {
    state.engine.approval(id).filter(|a| a.request_id == id).ok_or_else(|| {
        ApiError::new(
            ProblemKind::ApprovalNotFound,
            format!("no approval request {id:?} (the last 1,000 operations are kept)"),
        )
    })
}

/// One request: the call, who asked and why, and where it stands.
#[utoipa::path(
    get,
    path = "/api/v1/approvals/{id}",
    tag = "approvals",
    operation_id = "approval_get",
    security(("bearer" = [])),
    params(("id" = String, Path, description = "The request's ID (the `operation_id` of the 202 answer)")),
    responses(
        (status = 200, description = "The request", body = Approval),
        (status = 401, description = "No or invalid token", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 403, description = "Role too low", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 404, description = "No such request (approval-not-found)", body = ProblemDetails,
            content_type = "application/problem+json"),
    )
)]
pub async fn approval_get(
    _auth: ViewerAuth,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<Approval>, ApiError> {
    Ok(Json(Approval::of(&find(&state, &id)?, now())))
}

/// Runs a decision and answers with what it did.
pub(super) async fn decide(
    state: &AppState,
    caller: &Caller,
    id: &str,
    decision: Decision,
    reason: Option<String>,
) -> Result<DecisionResponse, ApiError> {
    let note = match decision {
        Decision::Reject => Some(
            check_reason(reason.as_deref(), "A rejection")
                .map_err(|e| ApiError::new(ProblemKind::ReasonRequired, e))?,
        ),
        Decision::Approve => match reason.as_deref().map(str::trim).filter(|r| !r.is_empty()) {
            None => None,
            Some(r) => {
                Some(check_reason(Some(r), "An approval").map_err(|e| ApiError::new(ProblemKind::ReasonRequired, e))?)
            }
        },
    };
    let (record, executed) = state.engine.decide(id, decision, &caller.actor(), note).await?;
    let mut response = DecisionResponse { approval: Approval::of(&record, now()), result: None, error: None };
    match executed {
        Some(Executed::Lifecycle(r)) => {
            // As the call itself answers it (its notes, a promote's partitions behind, a saved
            // exclusion).
            let answer =
                super::lifecycle::lifecycle_response(state, &record.mirror, r, crate::engine::LifecycleOp::Stop, false);
            response.result = Some(LifecycleResponse { approval_required: true, ..answer });
        }
        Some(Executed::Refused(e)) => {
            response.error =
                Some(super::dto::TopicProblem { problem_type: e.kind().slug().to_string(), detail: e.to_string() });
        }
        Some(Executed::Deleted | Executed::Drill(_)) | None => {}
    }
    Ok(response)
}

/// Approve a request (operator; never the identity that asked): the call runs at once, as the
/// requester asked it.
///
/// Refused for the requester themselves (`approval-same-identity`, 403), for a request already
/// decided (`approval-not-pending`, 409) and for one that expired (`approval-expired`, 409).
/// The answer holds the request (`executed`, or `failed` when the engine refused the call as a
/// whole) and the call's per-topic outcomes. The audit trail records the approval and the call.
#[utoipa::path(
    post,
    path = "/api/v1/approvals/{id}/approve",
    tag = "approvals",
    operation_id = "approval_approve",
    security(("bearer" = [])),
    extensions(("x-required-role" = json!("operator"))),
    params(("id" = String, Path, description = "The request's ID")),
    request_body = DecisionRequest,
    responses(
        (status = 200, description = "Approved, and what the call did", body = DecisionResponse),
        (status = 400, description = "Invalid body", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 401, description = "No or invalid token", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 403, description = "Role too low, or the requester's own request (approval-same-identity)", body = ProblemDetails,
            content_type = "application/problem+json"),
        (status = 404, description = "No such request (approval-not-found)", body = ProblemDetails,
            content_type = "application/problem+json"),
        (status = 409, description = "Already decided (approval-not-pending) or expired (approval-expired)", body = ProblemDetails,
            content_type = "application/problem+json"),
        (status = 413, description = "Body over 1 MiB", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 415, description = "Body is not JSON", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 422, description = "The note is not plain text or too long (reason-required)", body = ProblemDetails,
            content_type = "application/problem+json"),
        (status = 503, description = "Destination unavailable or shutting down", body = ProblemDetails,
            content_type = "application/problem+json"),
    )
)]
pub async fn approval_approve(
    OperatorAuth(caller): OperatorAuth,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<DecisionRequest>,
) -> Result<Json<DecisionResponse>, ApiError> {
    Ok(Json(decide(&state, &caller, &id, Decision::Approve, body.reason).await?))
}

/// Reject a request (operator; never the identity that asked): nothing runs. A reason is
/// required.
#[utoipa::path(
    post,
    path = "/api/v1/approvals/{id}/reject",
    tag = "approvals",
    operation_id = "approval_reject",
    security(("bearer" = [])),
    extensions(("x-required-role" = json!("operator"))),
    params(("id" = String, Path, description = "The request's ID")),
    request_body = DecisionRequest,
    responses(
        (status = 200, description = "Rejected", body = DecisionResponse),
        (status = 400, description = "Invalid body", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 401, description = "No or invalid token", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 403, description = "Role too low, or the requester's own request (approval-same-identity)", body = ProblemDetails,
            content_type = "application/problem+json"),
        (status = 404, description = "No such request (approval-not-found)", body = ProblemDetails,
            content_type = "application/problem+json"),
        (status = 409, description = "Already decided (approval-not-pending) or expired (approval-expired)", body = ProblemDetails,
            content_type = "application/problem+json"),
        (status = 413, description = "Body over 1 MiB", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 415, description = "Body is not JSON", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 422, description = "No reason given (reason-required)", body = ProblemDetails,
            content_type = "application/problem+json"),
        (status = 503, description = "Destination unavailable or shutting down", body = ProblemDetails,
            content_type = "application/problem+json"),
    )
)]
pub async fn approval_reject(
    OperatorAuth(caller): OperatorAuth,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<DecisionRequest>,
) -> Result<Json<DecisionResponse>, ApiError> {
    Ok(Json(decide(&state, &caller, &id, Decision::Reject, body.reason).await?))
}
