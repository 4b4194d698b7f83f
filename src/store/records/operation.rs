//! The value of an Operation record: an audited call, with its per-topic results and the
//! two-person approval it is part of.

use serde::{Deserialize, Serialize};

use super::keys::OperationKey;
use super::mirror::TruncationValue;

/// The value of an Operation record: an audited lifecycle call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperationValue {
    /// The operation ID (as in the key).
    pub id: String,
    /// The mirror name (as in the key).
    pub mirror: String,
    /// What was asked (`create`, `start`, `pause`, `resume`, `stop`, `remove`, …).
    pub kind: String,
    /// The topics named (after pattern expansion).
    pub topics: Vec<String>,
    /// A dry run.
    pub validate_only: bool,
    /// The authenticated identity.
    pub requested_by: String,
    /// The client's address, when known.
    pub client_address: Option<String>,
    /// When it was asked (ms since the Unix epoch).
    pub requested_at: i64,
    /// When it finished; `None` while it runs.
    pub finished_at: Option<i64>,
    /// The outcome per topic. A call about thousands of topics keeps what fits the state
    /// topic's message size, failures first (`results_omitted` counts the rest).
    pub results: Vec<TopicResultValue>,
    /// The instance that accepted the call (the owners of its partitions carry it out); absent
    /// from records written before instances shared a cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted_by: Option<String>,
    /// Per-topic results left out of `results` (absent when none were).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub results_omitted: Option<OmittedResultsValue>,
    /// A call behind two-person approval: the request (its own record, rewritten as it is decided
    /// and run), or, on the entries of its decision and execution, a copy naming the request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<ApprovalValue>,
}

/// How many per-topic results an Operation record left out, by outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct OmittedResultsValue {
    /// Topics that succeeded.
    pub ok: u64,
    /// Topics that failed.
    pub failed: u64,
}

/// A call that needed a second person, as stored with its operation records.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalValue {
    /// The request's operation ID.
    pub request_id: String,
    /// The call (`stop`, `delete`, `resync`, `failback`, `drill`).
    pub action: String,
    /// `pending`, `approved`, `executed`, `failed`, `rejected`, `break_glass` (expiry is not
    /// written: a pending request past `expires_at` is expired).
    pub status: String,
    /// Why the requester (or a break-glass admin) asked.
    pub reason: String,
    /// The identity that asked.
    pub requested_by: String,
    /// The requester's client address.
    pub client_address: Option<String>,
    /// When it was asked (ms since the Unix epoch).
    pub requested_at: i64,
    /// When the request expires (ms since the Unix epoch).
    pub expires_at: i64,
    /// The identity that approved or rejected it.
    pub decided_by: Option<String>,
    /// When (ms since the Unix epoch).
    pub decided_at: Option<i64>,
    /// The decider's note (a rejection's reason).
    pub decision_reason: Option<String>,
    /// The operation the call ran as, once run.
    pub executed_operation_id: Option<String>,
    /// What to run.
    pub call: ApprovalCallValue,
}

/// The call a request runs once approved: what the requester sent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalCallValue {
    /// Topic names (a lifecycle call).
    pub topics: Vec<String>,
    /// A topic pattern instead of names.
    pub pattern: Option<String>,
    /// Every topic of the mirror instead of names.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub all: bool,
    /// A start's truncation mode.
    pub truncation: TruncationValue,
    /// A stop that also adds its topics to the mirror's `topic_exclude`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub exclude: bool,
    /// A stop that is a promote: its wait for catch-up, in ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promote_timeout_ms: Option<u64>,
    /// A drill's canary topic, when not the default.
    pub canary_topic: Option<String>,
    /// A drill's recovery time objective, in ms.
    pub rto_objective_ms: Option<i64>,
    /// A drill's recovery point objective, in ms.
    pub rpo_objective_ms: Option<i64>,
}

impl OperationValue {
    /// The record key.
    #[must_use]
    pub fn key(&self) -> OperationKey {
        OperationKey { mirror: self.mirror.clone(), id: self.id.clone() }
    }
}

/// The outcome of an operation for one topic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicResultValue {
    /// The topic name.
    pub topic: String,
    /// `ok`, `error`, `skipped`, …
    pub outcome: String,
    /// The error code, if it failed.
    pub error_code: Option<String>,
    /// Details.
    pub message: Option<String>,
}
