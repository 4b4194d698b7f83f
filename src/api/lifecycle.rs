//! The answer of a lifecycle call, shared by the topics' calls and an approved request that runs
//! one.

use crate::app_state::AppState;
use crate::engine::LifecycleOp;

use super::dto::{
    FailbackResult, LifecycleResponse, PartitionBehindResult, QuarantineResult, TopicResult, UnmirroredResult,
};

/// The answer of a lifecycle call. `validate_only` of a stop adds what it would leave
/// unmirrored per topic, from the snapshot: the failover dialog's computation
/// (`TopicSnapshot::stop_impact`).
pub(super) fn lifecycle_response(
    state: &AppState,
    mirror: &str,
    r: crate::engine::OpResult,
    op: LifecycleOp,
    validate_only: bool,
) -> LifecycleResponse {
    let snap = (validate_only && op == LifecycleOp::Stop).then(|| state.engine.snapshot());
    let topics = snap.as_ref().and_then(|s| s.mirror(mirror));
    LifecycleResponse {
        operation_id: r.operation_id,
        validate_only,
        saved_pattern: r.saved_pattern.map(|p| super::dto::SavedPatternBody { list: p.list, pattern: p.pattern }),
        results: r
            .results
            .iter()
            .map(|o| TopicResult {
                quarantined: r.quarantined.get(&o.topic).map(|q| q.iter().map(QuarantineResult::from).collect()),
                failback: r.failback.get(&o.topic).map(FailbackResult::from),
                note: r.notes.get(&o.topic).cloned(),
                unmirrored: topics
                    .filter(|_| o.ok)
                    .and_then(|m| m.topic(&o.topic))
                    .map(|t| UnmirroredResult::from(&t.stop_impact())),
                behind: r.behind.get(&o.topic).map(|b| b.iter().map(PartitionBehindResult::from).collect()),
                ..TopicResult::from(o)
            })
            .collect(),
        approval_required: false,
        approval: None,
    }
}
