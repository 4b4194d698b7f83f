//! The lifecycle actions the dashboard offers, and the per-row buttons that open their
//! confirmation (mirror, topic and partitions pages).

use crate::domain::PartitionState;
use crate::domain::topic_call::{PartitionFacts, TopicCall};
use crate::engine::PartitionSnapshot;
use crate::format::{encode_component, url};

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

    /// The lifecycle call it makes on a topic of the mirror (`None`: new topics, not a row).
    pub fn call(self) -> Option<TopicCall> {
        match self {
            UiOp::Pause => Some(TopicCall::Pause),
            UiOp::Resume => Some(TopicCall::Resume),
            UiOp::Failover => Some(TopicCall::Stop),
            UiOp::Restart => Some(TopicCall::Start),
            UiOp::Recover => Some(TopicCall::Recover),
            UiOp::Start => None,
        }
    }

    /// Whether it applies to a topic with these partitions: what the engine accepts and that
    /// changes something (`domain::topic_call`, the engine's own rule).
    fn offered(self, partitions: &[PartitionFacts]) -> bool {
        self.call().is_some_and(|c| crate::domain::topic_call::offered(c, partitions))
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

pub(super) fn actions_for(mirror: &str, topic: &str, partitions: &[PartitionSnapshot]) -> Vec<ActionLink> {
    let facts = crate::engine::call_facts(partitions);
    [UiOp::Pause, UiOp::Resume, UiOp::Restart, UiOp::Recover, UiOp::Failover]
        .into_iter()
        .filter(|op| op.offered(&facts))
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
    fn offered_actions_are_what_the_engine_accepts() {
        let part =
            |p: i32, state: PartitionState| PartitionSnapshot { partition: p, state, ..PartitionSnapshot::default() };
        let ops =
            |parts: &[PartitionSnapshot]| -> Vec<&str> { actions_for("m", "t", parts).iter().map(|a| a.op).collect() };
        assert_eq!(
            ops(&[part(0, PartitionState::Mirroring), part(1, PartitionState::Paused)]),
            ["pause", "resume", "failover"]
        );
        assert_eq!(ops(&[part(0, PartitionState::Stopped)]), ["restart"]);
        // A FAILED partition that failed while mirroring: the others pause, it pauses when retried.
        let failed =
            PartitionSnapshot { failed_in: Some(PartitionState::Mirroring), ..part(1, PartitionState::Failed) };
        assert_eq!(ops(&[part(0, PartitionState::Mirroring), failed.clone()]), ["pause", "recover", "failover"]);
        // One that failed while starting cannot be paused for: no Pause (the engine refuses it).
        let starting = PartitionSnapshot { failed_in: Some(PartitionState::Preparing), ..failed };
        assert_eq!(ops(&[part(0, PartitionState::Mirroring), starting]), ["recover", "failover"]);
        // PREPARING cannot pause yet.
        assert_eq!(ops(&[part(0, PartitionState::Mirroring), part(1, PartitionState::Preparing)]), ["failover"]);
    }
}
