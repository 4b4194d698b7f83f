//! One operation's page (`templates/pages/operation.html`).

use crate::domain::Timestamp;
use crate::engine::{OperationView, Snapshot};

use super::common::{Freshness, operation_href};
use super::operations::{OperationRow, operation_row};

#[derive(Debug, Clone)]
pub struct OperationDetailView {
    pub op: OperationRow,
    pub fresh: Freshness,
    pub live_url: String,
    /// The two-person approval this operation is (the request, a break-glass call) or ran as.
    pub approval: Option<ApprovalDetail>,
    /// A drill's progress and figures.
    pub drill: Option<super::safety::DrillRowView>,
}

/// A request, a break-glass call, or the approval an operation ran after.
#[derive(Debug, Clone)]
pub struct ApprovalDetail {
    pub request_href: String,
    pub action: &'static str,
    pub status: &'static str,
    pub css: &'static str,
    pub requested_by: String,
    pub reason: String,
    pub decided_by: String,
    pub decision_reason: String,
    /// e.g. `in 12 min`, while pending.
    pub expires: String,
    pub executed_href: String,
}

pub fn operation_detail(snap: &Snapshot, o: &OperationView, now: Timestamp) -> OperationDetailView {
    use crate::domain::approval::ApprovalStatus;
    let approval = snap
        .approvals
        .iter()
        .find(|a| a.request_id == o.id || a.executed_operation_id.as_deref() == Some(o.id.as_str()))
        .map(|a| {
            let status = a.status_at(now);
            ApprovalDetail {
                request_href: operation_href(&a.request_id),
                action: a.action.label(),
                status: status.label(),
                css: match status {
                    ApprovalStatus::Executed | ApprovalStatus::Approved => "ok",
                    ApprovalStatus::Pending => "warn",
                    ApprovalStatus::Rejected | ApprovalStatus::Expired => "muted",
                    ApprovalStatus::Failed | ApprovalStatus::BreakGlass => "bad",
                },
                requested_by: a.requested_by.clone(),
                reason: a.reason.clone(),
                decided_by: a.decided_by.clone().unwrap_or_default(),
                decision_reason: a.decision_reason.clone().unwrap_or_default(),
                expires: if status == ApprovalStatus::Pending {
                    format!("in {}", crate::format::duration_ms(now.millis_until(a.expires_at).max(0)))
                } else {
                    String::new()
                },
                executed_href: a.executed_operation_id.as_deref().map(operation_href).unwrap_or_default(),
            }
        });
    OperationDetailView {
        op: operation_row(o, snap, now),
        fresh: Freshness::new(snap.taken_at, now),
        live_url: format!("/ui{}", operation_href(&o.id)),
        approval,
        drill: snap.drills.iter().find(|d| d.id == o.id).map(|d| super::safety::drill_row(d, now)),
    }
}
