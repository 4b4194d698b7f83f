//! Two-person approval: a mirror's approval policy and a request as shown.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::domain::Timestamp;
use crate::domain::approval::{ApprovalAction, ApprovalPolicy};
use crate::engine::{ApprovalRecord, Truncation};

use super::ts;

/// A mirror's approval policy: which calls need a second person's approval, and how long a
/// request waits for one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(default, deny_unknown_fields)]
pub struct ApprovalPolicyDto {
    /// The calls that need approval: `stop` (failover), `delete` (the mirror), `resync` (a start
    /// with `truncation: resync`), `failback` (a start that fails a topic back onto this
    /// cluster), `drill` (a DR drill). Empty: none.
    #[schema(value_type = Vec<String>, example = json!(["stop", "delete", "resync", "failback"]))]
    pub required_for: Vec<ApprovalAction>,
    /// How long a request waits for a decision before it expires (and never runs), in seconds:
    /// 5 to 604800 (7 days); default 900 (15 minutes).
    #[schema(minimum = 5, maximum = 604_800, example = 900)]
    pub expires_after_seconds: u64,
}

impl Default for ApprovalPolicyDto {
    fn default() -> Self {
        ApprovalPolicy::default().into()
    }
}

impl From<ApprovalPolicy> for ApprovalPolicyDto {
    fn from(p: ApprovalPolicy) -> Self {
        ApprovalPolicyDto {
            required_for: p.required_for.into_iter().collect(),
            expires_after_seconds: p.expires_after_seconds,
        }
    }
}

impl From<ApprovalPolicyDto> for ApprovalPolicy {
    fn from(p: ApprovalPolicyDto) -> Self {
        ApprovalPolicy {
            required_for: p.required_for.into_iter().collect(),
            expires_after_seconds: p.expires_after_seconds,
        }
    }
}

/// A call behind two-person approval: the request (pending until a second person decides), or a
/// break-glass call an admin ran at once.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Approval {
    /// The request's ID (also its operation's: `/api/v1/operations/{id}`).
    pub id: String,
    pub mirror: String,
    /// `stop`, `delete`, `resync`, `failback` or `drill`.
    pub action: String,
    /// `pending` (awaiting a second person), `approved` (running), `executed`, `failed` (the
    /// engine refused the call), `rejected`, `expired` (nobody decided in time: nothing ran) or
    /// `break_glass` (an admin ran it at once).
    pub status: String,
    /// Why it was asked (or broken glass for).
    pub reason: String,
    /// The identity that asked (never a token).
    pub requested_by: String,
    pub client_address: Option<String>,
    pub requested_at: String,
    /// When a pending request expires.
    pub expires_at: String,
    /// Who approved or rejected it, when, and their note.
    pub decided_by: Option<String>,
    pub decided_at: Option<String>,
    pub decision_reason: Option<String>,
    /// The operation the call ran as, once run (a delete records its own `delete_mirror`).
    pub executed_operation_id: Option<String>,
    /// The topics the call names (a lifecycle call).
    pub topics: Vec<String>,
    /// The pattern it names instead.
    pub pattern: Option<String>,
    /// A start's truncation mode (`none`, `resync`).
    pub truncation: Option<String>,
    /// A drill's canary topic, when not the default.
    pub canary_topic: Option<String>,
}

impl Approval {
    /// The DTO of `a` as it stands at `now`.
    pub fn of(a: &ApprovalRecord, now: Timestamp) -> Approval {
        let started = matches!(a.action, ApprovalAction::Resync | ApprovalAction::Failback);
        Approval {
            id: a.request_id.clone(),
            mirror: a.mirror.clone(),
            action: a.action.as_str().to_string(),
            status: a.status_at(now).as_str().to_string(),
            reason: a.reason.clone(),
            requested_by: a.requested_by.clone(),
            client_address: a.client_address.clone(),
            requested_at: ts(a.requested_at),
            expires_at: ts(a.expires_at),
            decided_by: a.decided_by.clone(),
            decided_at: a.decided_at.map(ts),
            decision_reason: a.decision_reason.clone(),
            executed_operation_id: a.executed_operation_id.clone(),
            topics: a.call.topics.clone(),
            pattern: a.call.pattern.clone(),
            truncation: started.then(|| match a.call.truncation {
                Truncation::None => "none".to_string(),
                Truncation::Resync { .. } => "resync".to_string(),
            }),
            canary_topic: a.call.drill.canary_topic.clone(),
        }
    }
}
