//! The coordinator's mirrors by name, and lookups that say what is missing.
//!
//! A call can find its mirror, topic or partition gone: a delete, a refresh that removed a topic
//! or a lifecycle step that ended a partition ran while the call waited its turn on the loop, or
//! a data path reports on a partition that was just unassigned. Every lookup returns a
//! [`Missing`] that names what is gone (an API caller gets it as a 404 problem), never an index
//! that panics the coordinator, which would stop mirroring for every mirror of the instance.

use std::collections::BTreeMap;
use std::collections::btree_map;

use super::{MirrorRt, PartRt, Problem, ProblemKind, TopicRt};

/// What a lookup did not find.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Missing {
    Mirror(String),
    Topic { mirror: String, topic: String },
    Partition { mirror: String, topic: String, partition: i32 },
}

impl Missing {
    pub(super) fn topic(mirror: &str, topic: &str) -> Missing {
        Missing::Topic { mirror: mirror.to_string(), topic: topic.to_string() }
    }
}

impl std::fmt::Display for Missing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Missing::Mirror(m) => write!(f, "mirror {m:?} does not exist"),
            Missing::Topic { mirror, topic } => write!(f, "topic {topic:?} is not part of mirror {mirror:?}"),
            Missing::Partition { mirror, topic, partition } => {
                write!(f, "partition {partition} of topic {topic:?} is not part of mirror {mirror:?}")
            }
        }
    }
}

impl From<Missing> for Problem {
    fn from(m: Missing) -> Problem {
        let kind = match m {
            Missing::Mirror(_) => ProblemKind::MirrorNotFound,
            Missing::Topic { .. } | Missing::Partition { .. } => ProblemKind::TopicNotInMirror,
        };
        Problem { kind, detail: m.to_string() }
    }
}

/// Why an event could not be applied to a partition: the transition table refused it, or the
/// partition is gone.
#[derive(Debug)]
pub(super) enum ApplyError {
    Transition(crate::domain::TransitionError),
    Missing(Missing),
}

impl ApplyError {
    /// A repeat of what is already so: nothing to report.
    pub(super) fn is_harmless(&self) -> bool {
        matches!(self, ApplyError::Transition(e) if e.is_harmless())
    }
}

impl std::fmt::Display for ApplyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ApplyError::Transition(e) => e.fmt(f),
            ApplyError::Missing(m) => m.fmt(f),
        }
    }
}

impl From<crate::domain::TransitionError> for ApplyError {
    fn from(e: crate::domain::TransitionError) -> ApplyError {
        ApplyError::Transition(e)
    }
}

impl From<Missing> for ApplyError {
    fn from(m: Missing) -> ApplyError {
        ApplyError::Missing(m)
    }
}

impl From<ApplyError> for Problem {
    fn from(e: ApplyError) -> Problem {
        match e {
            ApplyError::Transition(e) => Problem { kind: ProblemKind::IllegalTransition, detail: e.to_string() },
            ApplyError::Missing(m) => m.into(),
        }
    }
}

/// The mirrors this coordinator runs, by name.
#[derive(Default)]
pub(super) struct MirrorTable(BTreeMap<String, MirrorRt>);

impl MirrorTable {
    pub(super) fn mirror(&self, name: &str) -> Result<&MirrorRt, Missing> {
        self.0.get(name).ok_or_else(|| Missing::Mirror(name.to_string()))
    }

    pub(super) fn mirror_mut(&mut self, name: &str) -> Result<&mut MirrorRt, Missing> {
        self.0.get_mut(name).ok_or_else(|| Missing::Mirror(name.to_string()))
    }

    pub(super) fn topic(&self, mirror: &str, topic: &str) -> Result<&TopicRt, Missing> {
        self.mirror(mirror)?.topics.get(topic).ok_or_else(|| Missing::topic(mirror, topic))
    }

    pub(super) fn topic_mut(&mut self, mirror: &str, topic: &str) -> Result<&mut TopicRt, Missing> {
        self.mirror_mut(mirror)?.topics.get_mut(topic).ok_or_else(|| Missing::topic(mirror, topic))
    }

    pub(super) fn partition(&self, mirror: &str, topic: &str, partition: i32) -> Result<&PartRt, Missing> {
        self.topic(mirror, topic)?.partitions.get(&partition).ok_or_else(|| Missing::Partition {
            mirror: mirror.to_string(),
            topic: topic.to_string(),
            partition,
        })
    }

    pub(super) fn partition_mut(&mut self, mirror: &str, topic: &str, partition: i32) -> Result<&mut PartRt, Missing> {
        let missing = || Missing::Partition { mirror: mirror.to_string(), topic: topic.to_string(), partition };
        self.topic_mut(mirror, topic)?.partitions.get_mut(&partition).ok_or_else(missing)
    }

    /// The mirrors' names, for a walk that needs `&mut self` for each.
    pub(super) fn names(&self) -> Vec<String> {
        self.0.keys().cloned().collect()
    }

    pub(super) fn get(&self, name: &str) -> Option<&MirrorRt> {
        self.0.get(name)
    }

    pub(super) fn get_mut(&mut self, name: &str) -> Option<&mut MirrorRt> {
        self.0.get_mut(name)
    }

    pub(super) fn contains_key(&self, name: &str) -> bool {
        self.0.contains_key(name)
    }

    pub(super) fn insert(&mut self, name: String, m: MirrorRt) -> Option<MirrorRt> {
        self.0.insert(name, m)
    }

    pub(super) fn remove(&mut self, name: &str) -> Option<MirrorRt> {
        self.0.remove(name)
    }

    pub(super) fn keys(&self) -> btree_map::Keys<'_, String, MirrorRt> {
        self.0.keys()
    }

    pub(super) fn values(&self) -> btree_map::Values<'_, String, MirrorRt> {
        self.0.values()
    }

    pub(super) fn values_mut(&mut self) -> btree_map::ValuesMut<'_, String, MirrorRt> {
        self.0.values_mut()
    }

    pub(super) fn iter(&self) -> btree_map::Iter<'_, String, MirrorRt> {
        self.0.iter()
    }

    pub(super) fn iter_mut(&mut self) -> btree_map::IterMut<'_, String, MirrorRt> {
        self.0.iter_mut()
    }
}

impl<'a> IntoIterator for &'a MirrorTable {
    type Item = (&'a String, &'a MirrorRt);
    type IntoIter = btree_map::Iter<'a, String, MirrorRt>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl From<Missing> for super::EngineError {
    fn from(m: Missing) -> super::EngineError {
        let p = Problem::from(m);
        super::EngineError::Rejected { kind: p.kind, detail: p.detail }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{EventKind, PartitionState, TransitionError};

    #[test]
    fn what_is_missing_becomes_a_not_found_problem() {
        let p = Problem::from(Missing::Mirror("m".into()));
        assert_eq!((p.kind, p.detail.as_str()), (ProblemKind::MirrorNotFound, "mirror \"m\" does not exist"));
        let p = Problem::from(Missing::Topic { mirror: "m".into(), topic: "t".into() });
        assert_eq!(p.kind, ProblemKind::TopicNotInMirror);
        let p =
            Problem::from(ApplyError::from(Missing::Partition { mirror: "m".into(), topic: "t".into(), partition: 7 }));
        assert_eq!(
            (p.kind, p.detail.as_str()),
            (ProblemKind::TopicNotInMirror, "partition 7 of topic \"t\" is not part of mirror \"m\"")
        );
        let e = super::super::EngineError::from(Missing::Mirror("m".into()));
        assert_eq!(e.kind(), ProblemKind::MirrorNotFound);
    }

    #[test]
    fn only_a_repeat_is_harmless() {
        let repeat = TransitionError::AlreadyInState { state: PartitionState::Paused, event: EventKind::Pause };
        assert!(ApplyError::from(repeat).is_harmless());
        let refused = TransitionError::InvalidTransition { state: PartitionState::Stopped, event: EventKind::Pause };
        let e = ApplyError::from(refused);
        assert!(!e.is_harmless());
        assert_eq!(Problem::from(e).kind, ProblemKind::IllegalTransition);
        assert!(!ApplyError::from(Missing::Mirror("m".into())).is_harmless(), "a missing partition is said");
    }
}
