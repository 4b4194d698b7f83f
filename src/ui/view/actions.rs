//! The lifecycle actions the dashboard offers, and the per-row buttons that open their
//! confirmation (mirror, topic and partitions pages).

use crate::domain::{PartitionState, StateCounts};
use crate::ui::format::{encode_component, url};

/// A lifecycle action the UI offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UiOp {
    Pause,
    Resume,
    Failover,
    /// Start a STOPPED topic again (same direction).
    Restart,
    /// Start new topics.
    Start,
    /// Retry FAILED partitions now.
    Recover,
}

impl UiOp {
    pub fn parse(s: &str) -> Option<UiOp> {
        Some(match s {
            "pause" => UiOp::Pause,
            "resume" => UiOp::Resume,
            "failover" | "stop" => UiOp::Failover,
            "restart" => UiOp::Restart,
            "start" => UiOp::Start,
            "recover" => UiOp::Recover,
            _ => return None,
        })
    }

    pub fn value(self) -> &'static str {
        match self {
            UiOp::Pause => "pause",
            UiOp::Resume => "resume",
            UiOp::Failover => "failover",
            UiOp::Restart => "restart",
            UiOp::Start => "start",
            UiOp::Recover => "recover",
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            UiOp::Pause => "Pause",
            UiOp::Resume => "Resume",
            UiOp::Failover => "Fail over",
            UiOp::Restart => "Restart",
            UiOp::Start => "Start",
            UiOp::Recover => "Recover",
        }
    }

    /// The state its partitions should reach (a recovered partition mostly mirrors again; one
    /// that failed in a pause or a stop finishes that instead).
    pub fn target(self) -> PartitionState {
        match self {
            UiOp::Pause => PartitionState::Paused,
            UiOp::Failover => PartitionState::Stopped,
            UiOp::Resume | UiOp::Restart | UiOp::Start | UiOp::Recover => PartitionState::Mirroring,
        }
    }

    /// Whether it applies to a topic whose partitions are counted in `c`.
    fn offered(self, c: &StateCounts) -> bool {
        let any = |states: &[PartitionState]| states.iter().any(|s| c.count(*s) > 0);
        use PartitionState::*;
        match self {
            UiOp::Pause => any(&[Mirroring, Preparing]),
            UiOp::Resume => any(&[Paused, Pausing]),
            UiOp::Failover => any(&[Unknown, Preparing, Mirroring, Pausing, Paused, Failed]),
            UiOp::Restart => any(&[Stopped]),
            UiOp::Recover => any(&[Failed]),
            UiOp::Start => false,
        }
    }
}

/// A per-row action button (a link to the confirmation, which htmx opens as a dialog).
#[derive(Debug, Clone)]
pub struct ActionLink {
    pub op: &'static str,
    pub label: &'static str,
    pub href: String,
    pub danger: bool,
}

fn confirm_href(mirror: &str, op: UiOp, topics: &[&str]) -> String {
    let mut pairs = vec![("op", op.value().to_string())];
    pairs.extend(topics.iter().map(|t| ("topic", t.to_string())));
    url(&format!("/mirrors/{}/confirm", encode_component(mirror)), &pairs)
}

pub(super) fn actions_for(mirror: &str, topic: &str, c: &StateCounts) -> Vec<ActionLink> {
    [UiOp::Pause, UiOp::Resume, UiOp::Restart, UiOp::Recover, UiOp::Failover]
        .into_iter()
        .filter(|op| op.offered(c))
        .map(|op| ActionLink {
            op: op.value(),
            label: op.label(),
            href: confirm_href(mirror, op, &[topic]),
            danger: op == UiOp::Failover,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offered_actions_follow_states() {
        let c: StateCounts = [PartitionState::Mirroring, PartitionState::Paused].into_iter().collect();
        let ops: Vec<&str> = actions_for("m", "t", &c).iter().map(|a| a.op).collect();
        assert_eq!(ops, ["pause", "resume", "failover"]);
        let c: StateCounts = [PartitionState::Stopped].into_iter().collect();
        let ops: Vec<&str> = actions_for("m", "t", &c).iter().map(|a| a.op).collect();
        assert_eq!(ops, ["restart"]);
        let c: StateCounts = [PartitionState::Mirroring, PartitionState::Failed].into_iter().collect();
        let ops: Vec<&str> = actions_for("m", "t", &c).iter().map(|a| a.op).collect();
        assert_eq!(ops, ["pause", "recover", "failover"]);
    }
}
