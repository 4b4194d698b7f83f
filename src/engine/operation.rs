//! What a recorded operation did: one enum for the engine, the audit trail, the API and the
//! dashboard (which used to match on strings and suffixes such as `"_mirror"`).

use serde::{Deserialize, Serialize};

use crate::domain::PartitionState;

/// The kind of a recorded operation. Stored as its slug; a slug this version does not know (a
/// record written by a newer kmirror) loads as [`OperationKind::Unknown`] rather than being
/// dropped from the audit trail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum OperationKind {
    Start,
    Pause,
    Resume,
    /// Failover.
    Stop,
    /// FAILED partitions retried by an operator.
    Recover,
    CreateMirror,
    UpdateMirror,
    DeleteMirror,
    /// A call that waits for a second person's approval (the request).
    ApprovalRequest,
    /// A second person approved a request (it then runs as its own operation).
    Approve,
    /// A second person rejected a request: nothing ran.
    Reject,
    /// An admin ran a call at once, without a second person, giving a break-glass reason.
    BreakGlass,
    /// A disaster-recovery drill on a canary topic.
    Drill,
    Unknown,
}

impl OperationKind {
    pub const ALL: [OperationKind; 13] = [
        OperationKind::Start,
        OperationKind::Pause,
        OperationKind::Resume,
        OperationKind::Stop,
        OperationKind::Recover,
        OperationKind::CreateMirror,
        OperationKind::UpdateMirror,
        OperationKind::DeleteMirror,
        OperationKind::ApprovalRequest,
        OperationKind::Approve,
        OperationKind::Reject,
        OperationKind::BreakGlass,
        OperationKind::Drill,
    ];

    /// The stable slug stored in `__mirror_state` and shown by the API.
    pub const fn as_str(self) -> &'static str {
        match self {
            OperationKind::Start => "start",
            OperationKind::Pause => "pause",
            OperationKind::Resume => "resume",
            OperationKind::Stop => "stop",
            OperationKind::Recover => "recover",
            OperationKind::CreateMirror => "create_mirror",
            OperationKind::UpdateMirror => "update_mirror",
            OperationKind::DeleteMirror => "delete_mirror",
            OperationKind::ApprovalRequest => "approval_request",
            OperationKind::Approve => "approve",
            OperationKind::Reject => "reject",
            OperationKind::BreakGlass => "break_glass",
            OperationKind::Drill => "drill",
            OperationKind::Unknown => "unknown",
        }
    }

    /// The slug's kind, if this version knows it.
    pub fn parse(slug: &str) -> Option<OperationKind> {
        OperationKind::ALL.into_iter().find(|k| k.as_str() == slug)
    }

    /// What an operator calls it.
    pub const fn label(self) -> &'static str {
        match self {
            OperationKind::Start => "Start",
            OperationKind::Pause => "Pause",
            OperationKind::Resume => "Resume",
            OperationKind::Stop => "Fail over",
            OperationKind::Recover => "Recover",
            OperationKind::CreateMirror => "Create mirror",
            OperationKind::UpdateMirror => "Update mirror",
            OperationKind::DeleteMirror => "Delete mirror",
            OperationKind::ApprovalRequest => "Approval requested",
            OperationKind::Approve => "Approved",
            OperationKind::Reject => "Rejected",
            OperationKind::BreakGlass => "Break-glass",
            OperationKind::Drill => "DR drill",
            OperationKind::Unknown => "Other",
        }
    }

    /// The state a lifecycle operation drives its partitions to; `None` for mirror changes and
    /// for a recover, whose partitions go back to what each was doing (mirroring, a pause or a
    /// stop).
    pub const fn target_state(self) -> Option<PartitionState> {
        match self {
            OperationKind::Start | OperationKind::Resume => Some(PartitionState::Mirroring),
            OperationKind::Pause => Some(PartitionState::Paused),
            OperationKind::Stop => Some(PartitionState::Stopped),
            OperationKind::Recover
            | OperationKind::CreateMirror
            | OperationKind::UpdateMirror
            | OperationKind::DeleteMirror
            | OperationKind::ApprovalRequest
            | OperationKind::Approve
            | OperationKind::Reject
            | OperationKind::BreakGlass
            | OperationKind::Drill
            | OperationKind::Unknown => None,
        }
    }

    /// Whether a partition in `state` is where this lifecycle operation takes it: its target state,
    /// or for a recover any state a partition settles in (MIRRORING, PAUSED, STOPPED: what it
    /// went back to finishing). Never for mirror changes.
    pub fn reached(self, state: PartitionState) -> bool {
        match self.target_state() {
            Some(target) => state == target,
            None => {
                self == OperationKind::Recover
                    && matches!(state, PartitionState::Mirroring | PartitionState::Paused | PartitionState::Stopped)
            }
        }
    }

    /// A call on a mirror's topics (start, pause, resume, stop, recover), whose partitions have
    /// progress to follow.
    pub const fn is_lifecycle(self) -> bool {
        matches!(
            self,
            OperationKind::Start
                | OperationKind::Pause
                | OperationKind::Resume
                | OperationKind::Stop
                | OperationKind::Recover
        )
    }

    /// A change of a mirror's definition (not of its topics).
    pub const fn is_mirror_change(self) -> bool {
        matches!(self, OperationKind::CreateMirror | OperationKind::UpdateMirror | OperationKind::DeleteMirror)
    }
}

impl From<String> for OperationKind {
    fn from(slug: String) -> Self {
        OperationKind::parse(&slug).unwrap_or(OperationKind::Unknown)
    }
}

impl From<OperationKind> for String {
    fn from(k: OperationKind) -> Self {
        k.as_str().to_string()
    }
}

impl std::fmt::Display for OperationKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_round_trip_and_unknown_ones_are_kept_as_unknown() {
        for k in OperationKind::ALL {
            assert_eq!(OperationKind::parse(k.as_str()), Some(k));
            let json = serde_json::to_string(&k).unwrap();
            assert_eq!(serde_json::from_str::<OperationKind>(&json).unwrap(), k);
        }
        assert_eq!(serde_json::from_str::<OperationKind>("\"rebalance\"").unwrap(), OperationKind::Unknown);
        assert_eq!(OperationKind::Stop.label(), "Fail over");
        assert_eq!(OperationKind::Pause.target_state(), Some(PartitionState::Paused));
        assert!(OperationKind::DeleteMirror.is_mirror_change() && !OperationKind::Start.is_mirror_change());
    }

    #[test]
    fn a_recover_is_done_where_each_partition_settles() {
        use PartitionState as S;
        let k = OperationKind::Recover;
        assert!(k.is_lifecycle() && k.target_state().is_none());
        let reached: Vec<S> = S::ALL.into_iter().filter(|s| k.reached(*s)).collect();
        assert_eq!(reached, [S::Mirroring, S::Paused, S::Stopped]);
        assert!(OperationKind::Pause.reached(S::Paused) && !OperationKind::Pause.reached(S::Mirroring));
        assert!(!OperationKind::UpdateMirror.is_lifecycle() && !OperationKind::UpdateMirror.reached(S::Mirroring));
    }
}
