//! `/api/v1/operations/{id}` and `/api/v1/audit`: the engine's recorded operations (its durable
//! audit trail), with per-partition progress from the current snapshot.

use axum::Json;
use axum::extract::State;
use serde::Deserialize;
use utoipa::IntoParams;

use crate::app::AppState;
use crate::engine::{OperationView, Snapshot, validate_mirror_name};

use super::auth::ViewerAuth;
use super::dto::{
    AuditPage, Operation, OperationProgress, OperationResponse, PartitionError, PartitionProgress, TopicResult, ts,
};
use super::pagination;
use super::problem::{ApiError, ProblemDetails, ProblemType};
use super::{ApiPath, ApiQuery, age_ms, now};

/// Where a lifecycle operation's partitions are now, relative to its target state (for a
/// recover: whether each settled again): counted over every successful topic, listed for the
/// topics of `page` (the page's results).
fn progress(snap: &Snapshot, op: &OperationView, page: &[TopicResult]) -> Option<OperationProgress> {
    if !op.kind.is_lifecycle() {
        return None;
    }
    let m = snap.mirror(&op.mirror)?;
    let (mut total, mut done) = (0u64, 0u64);
    for r in op.results.iter().filter(|r| r.ok) {
        let Some(t) = m.topic(&r.topic) else { continue };
        total += t.partitions.len() as u64;
        done += t.partitions.iter().filter(|p| op.kind.reached(p.state)).count() as u64;
    }
    let mut partitions = Vec::new();
    for r in page.iter().filter(|r| r.ok) {
        let Some(t) = m.topic(&r.topic) else { continue };
        partitions.extend(t.partitions.iter().map(|p| PartitionProgress {
            topic: p.topic.clone(),
            partition: p.partition,
            state: p.state.into(),
            done: op.kind.reached(p.state),
            error: p.error.as_ref().map(|e| PartitionError {
                code: e.code.clone(),
                message: e.message.clone(),
                retryable: e.retryable,
            }),
        }));
    }
    Some(OperationProgress {
        target_state: op.kind.target_state().map(Into::into),
        done: done == total,
        partitions_total: total,
        partitions_done: done,
        partitions,
    })
}

/// The two-person approval an operation is part of (the request, its decision, a break-glass
/// call, or the call an approval ran).
pub(super) fn with_approval(state: &AppState, mut op: Operation) -> Operation {
    op.approval = state.engine.approval_of(&op.id).map(|a| super::approvals::Approval::of(&a, now()));
    op
}

/// The page of an operation's per-topic results.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct OperationQuery {
    /// Per-topic results per page, 1 to 1000 (default 100).
    #[param(minimum = 1, maximum = 1000)]
    page_size: Option<u32>,
    /// The `next_page_token` of the previous page.
    page_token: Option<String>,
}

/// An operation: who asked, the per-topic results, and per-partition progress toward its target.
///
/// The per-topic results come in pages (`page_size`, `page_token`; `result_counts` counts all of
/// them), with the progress of the page's topics; `progress.done` and its counts cover every
/// page. An operation about thousands of topics keeps the results that fit its record (about
/// 8,000), failures first; `result_counts.omitted` counts the rest.
#[utoipa::path(
    get,
    path = "/api/v1/operations/{id}",
    tag = "operations",
    operation_id = "operation_get",
    security(("bearer" = [])),
    params(("id" = String, Path, description = "Operation ID (from a lifecycle call's `operation_id`)"), OperationQuery),
    responses(
        (status = 200, description = "The operation", body = OperationResponse),
        (status = 400, description = "Invalid query or page token", body = ProblemDetails,
            content_type = "application/problem+json"),
        (status = 401, description = "No or invalid token", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 403, description = "Role too low", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 404, description = "No such operation (or no longer kept: the last 1,000 are)", body = ProblemDetails,
            content_type = "application/problem+json"),
    )
)]
pub async fn operation_get(
    _auth: ViewerAuth,
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
    ApiQuery(q): ApiQuery<OperationQuery>,
) -> Result<Json<OperationResponse>, ApiError> {
    let size = pagination::page_size(q.page_size)?;
    let op = state
        .engine
        .operation(&id)
        .ok_or_else(|| ApiError::new(ProblemType::OperationNotFound, format!("operation {id:?} is not known")))?;
    let start = match &q.page_token {
        Some(t) => pagination::decode_offset(t, "operation", &op.id)?,
        None => 0,
    };
    let snap = state.engine.snapshot();
    let operation = Operation::page(&op, start, size);
    let topic_results = op.results.iter().filter(|r| !r.topic.is_empty()).count();
    let end = start.saturating_add(size);
    let next_page_token = (end < topic_results).then(|| pagination::encode("operation", &op.id, &end.to_string()));
    Ok(Json(OperationResponse {
        progress: progress(&snap, &op, &operation.results),
        operation: with_approval(&state, operation),
        next_page_token,
        taken_at: ts(snap.taken_at),
        snapshot_age_ms: age_ms(snap.taken_at, now()),
        drill: snap.drills.iter().find(|d| d.id == op.id).map(super::drills::Drill::of),
    }))
}

/// Filters and page of the audit log.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct AuditQuery {
    /// Only operations on this mirror.
    mirror: Option<String>,
    /// Items per page, 1 to 1000 (default 100).
    #[param(minimum = 1, maximum = 1000)]
    page_size: Option<u32>,
    /// The `next_page_token` of the previous page (same filters).
    page_token: Option<String>,
}

/// The audit log, newest first: who did what, when, from where, with what result.
///
/// Every mutating call (lifecycle, mirror create/update/delete) is recorded durably on the
/// destination cluster; the last 1,000 are served here. Pages follow a cursor, so entries
/// recorded while paging do not shift later pages.
#[utoipa::path(
    get,
    path = "/api/v1/audit",
    tag = "operations",
    operation_id = "audit_list",
    security(("bearer" = [])),
    params(AuditQuery),
    responses(
        (status = 200, description = "One page of audit entries", body = AuditPage),
        (status = 400, description = "Invalid query or page token", body = ProblemDetails,
            content_type = "application/problem+json"),
        (status = 401, description = "No or invalid token", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 403, description = "Role too low", body = ProblemDetails, content_type = "application/problem+json"),
    )
)]
pub async fn audit_list(
    _auth: ViewerAuth,
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<AuditQuery>,
) -> Result<Json<AuditPage>, ApiError> {
    if let Some(m) = &q.mirror {
        validate_mirror_name(m)?;
    }
    let size = pagination::page_size(q.page_size)?;
    let query = q.mirror.clone().unwrap_or_default();
    let ops: Vec<OperationView> =
        state.engine.operations().into_iter().filter(|o| q.mirror.as_ref().is_none_or(|m| *m == o.mirror)).collect();
    // Cursor: `<requested_at ms>:<id>` of the last entry served. Entries are newest first.
    let start = match &q.page_token {
        None => 0,
        Some(t) => {
            let cursor = pagination::decode(t, "audit", &query)?;
            let (at, id) = cursor
                .split_once(':')
                .and_then(|(at, id)| Some((at.parse::<i64>().ok()?, id)))
                .ok_or_else(|| ApiError::new(ProblemType::InvalidPageToken, "invalid page_token: malformed"))?;
            match ops.iter().position(|o| o.id == id) {
                Some(i) => i + 1,
                // The entry aged out: continue with the ones recorded before it.
                None => ops.iter().position(|o| o.requested_at < at).unwrap_or(ops.len()),
            }
        }
    };
    let end = start.saturating_add(size).min(ops.len());
    let page = ops.get(start..end).unwrap_or_default();
    let next_page_token = match page.last() {
        Some(last) if end < ops.len() => {
            Some(pagination::encode("audit", &query, &format!("{}:{}", last.requested_at, last.id)))
        }
        _ => None,
    };
    Ok(Json(AuditPage {
        items: page.iter().map(|o| with_approval(&state, Operation::from(o))).collect(),
        next_page_token,
    }))
}
