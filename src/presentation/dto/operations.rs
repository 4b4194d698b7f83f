//! Operations, their progress and the audit log.

use serde::Serialize;
use utoipa::ToSchema;

use crate::engine::{OperationView, TopicOutcome};

use super::shared::{PartitionStateDto, TopicProblem, TopicResult};
use super::topics::PartitionError;
use super::ts_millis;

/// The overall outcome of an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Succeeded,
    PartiallyFailed,
    Failed,
    /// Not finished: a request waiting for a second person, a drill running.
    Pending,
}

/// A recorded operation (an audit entry): who did what, when, from where, with what result.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Operation {
    pub id: String,
    pub mirror: String,
    /// `start`, `pause`, `resume`, `stop`, `recover`, `create_mirror`, `update_mirror`,
    /// `delete_mirror`.
    pub kind: String,
    pub topics: Vec<String>,
    /// The identity's name (never its token).
    pub requested_by: String,
    /// The client's IP address.
    pub client_address: Option<String>,
    /// The kmirror instance that accepted the call; the owners of the partitions' slots carry
    /// it out (absent on operations recorded before instances shared a cluster).
    pub accepted_by: Option<String>,
    pub requested_at: String,
    pub finished_at: Option<String>,
    pub outcome: Outcome,
    /// Per-topic outcomes (lifecycle operations), one page of them: `GET
    /// /api/v1/operations/{id}` pages through them (`page_size`, `page_token`), the audit listing
    /// shows the first 100. `topics` names the same topics.
    pub results: Vec<TopicResult>,
    /// How many per-topic outcomes the operation has, over every page.
    pub result_counts: ResultCounts,
    /// Why a mirror-level operation (create, update, delete) failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<TopicProblem>,
    /// The two-person approval this operation is part of: the request itself, its approval or
    /// rejection, a break-glass call, or the call an approval ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval: Option<super::approvals::Approval>,
}

/// Counts of an operation's per-topic outcomes.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub struct ResultCounts {
    /// Topics the call was about.
    pub total: u64,
    pub ok: u64,
    pub failed: u64,
    /// Outcomes counted but not kept: an operation's record keeps what fits the state topic's
    /// message size (about 8,000 results), failures first.
    pub omitted: u64,
}

impl Operation {
    /// `o` with `len` of its per-topic results from `start` (mirror-level changes: their one
    /// outcome is `error`).
    pub fn page(o: &OperationView, start: usize, len: usize) -> Operation {
        // Mirror-level changes carry one outcome with an empty topic.
        let (topic_results, mirror_results): (Vec<&TopicOutcome>, Vec<&TopicOutcome>) =
            o.results.iter().partition(|r| !r.topic.is_empty());
        let kept_failed = o.results.iter().filter(|r| !r.ok).count() as u64;
        let omitted = o.results_omitted;
        let total = o.results.len() as u64 + omitted.ok + omitted.failed;
        let failed = kept_failed + omitted.failed;
        let outcome = if o.finished_at.is_none() {
            Outcome::Pending
        } else if failed == 0 {
            Outcome::Succeeded
        } else if failed == total {
            Outcome::Failed
        } else {
            Outcome::PartiallyFailed
        };
        let page: Vec<&TopicOutcome> = topic_results.into_iter().skip(start).take(len).collect();
        Operation {
            id: o.id.clone(),
            mirror: o.mirror.clone(),
            kind: o.kind.to_string(),
            topics: page.iter().map(|r| r.topic.clone()).collect(),
            requested_by: o.requested_by.clone(),
            client_address: o.client_address.clone(),
            accepted_by: o.accepted_by.clone(),
            requested_at: ts_millis(o.requested_at),
            finished_at: o.finished_at.map(ts_millis),
            outcome,
            results: page.into_iter().map(TopicResult::from).collect(),
            result_counts: ResultCounts { total, ok: total - failed, failed, omitted: omitted.ok + omitted.failed },
            error: mirror_results.iter().find_map(|r| r.error.as_ref()).map(TopicProblem::from),
            approval: None,
        }
    }
}

impl From<&OperationView> for Operation {
    /// The operation with its first 100 per-topic results (the audit listing).
    fn from(o: &OperationView) -> Self {
        Operation::page(o, 0, super::DEFAULT_PAGE_SIZE)
    }
}

/// Where one partition of an operation's topics is now.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct PartitionProgress {
    pub topic: String,
    pub partition: i32,
    pub state: PartitionStateDto,
    /// The partition is in the operation's target state.
    pub done: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<PartitionError>,
}

/// Per-partition progress of a lifecycle operation toward its target state, from the current
/// snapshot (topics whose call failed are left out).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct OperationProgress {
    /// Absent for `recover`, whose partitions each go back to what they were doing: a partition
    /// is done once MIRRORING, PAUSED or STOPPED again.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_state: Option<PartitionStateDto>,
    /// Every partition, over every page, reached the target state.
    pub done: bool,
    /// Partitions of the operation's successful topics, over every page.
    pub partitions_total: u64,
    /// Of those, the ones in the target state.
    pub partitions_done: u64,
    /// The partitions of this page's topics.
    pub partitions: Vec<PartitionProgress>,
}

/// An operation with its current progress: one page of its per-topic results.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct OperationResponse {
    #[serde(flatten)]
    pub operation: Operation,
    /// Only for lifecycle operations (`start`, `pause`, `resume`, `stop`, `recover`) whose mirror
    /// still exists.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub progress: Option<OperationProgress>,
    /// The next page of per-topic results (`page_token`); absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_page_token: Option<String>,
    pub taken_at: String,
    pub snapshot_age_ms: u64,
    /// A drill's steps and, once finished, its verdict (`drill` operations).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drill: Option<super::drills::Drill>,
}

/// One page of the audit log, newest first.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct AuditPage {
    pub items: Vec<Operation>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_page_token: Option<String>,
}
