//! Failback lineage (issue 18, DESIGN.md section 5): finding, in the source cluster's
//! `__mirror_state`, the failed-over mirror that copied a topic from this cluster into the
//! source, and what it says per partition.
//!
//! Setting: cluster A was the source and B the destination of mirror `m1`, run by a kmirror
//! attached to B; its topics were failed over (STOPPED on B, stop points recorded). Failback is a
//! mirror `m2` from B into A, run by a kmirror attached to A. When `m2` starts a topic, it reads
//! B's state topic: the mirror there whose source is A and that has the topic gives, per
//! partition, where the data copied from A ends on A ([`ReverseLineage::mirrored_end`]) and
//! where it ends on B ([`ReverseLineage::source_stop_offset`]); its offset map, inverted, maps B's
//! offsets of those records back to A's. `domain::lineage::decide_failback` then decides per
//! partition. Pure functions over what was read: the reads are the caller's.

use std::collections::BTreeMap;

use crate::domain::PartitionState;
use crate::domain::lineage::ReverseLineage;
use crate::domain::offset_map::OffsetMap;

use super::persist::Loaded;
use super::{ProblemKind, is_internal_topic};

/// The lineage of one topic found in the source's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FoundLineage {
    /// The mirror on the source cluster that copied the topic from this cluster.
    pub mirror: String,
    /// Per partition: where the copied data ends on both sides.
    pub partitions: BTreeMap<i32, ReverseLineage>,
    /// Per partition: the inverse of that mirror's offset map (source offsets here are this
    /// mirror's source, the other cluster; destination offsets are this cluster's).
    pub offset_maps: BTreeMap<i32, OffsetMap>,
}

/// Why a lineage cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LineageProblem {
    pub kind: ProblemKind,
    pub detail: String,
}

/// Looks for the lineage of `topic` in the source cluster's state (`remote`), for a mirror whose
/// destination is the cluster `this_cluster` and where the topic's ID is `topic_id_here` (`None`
/// when the topic does not exist here yet: nothing to adopt, so no lineage matters).
///
/// - No mirror on the source has the topic: `Ok(None)`, a normal start.
/// - A mirror there copies the topic from this cluster and is not failed over (a partition not
///   STOPPED): refused, both directions at once would be a loop.
/// - The mirrors there that have the topic copy it from another cluster: refused with
///   `SOURCE_CLUSTER_ID_MISMATCH` (the lineage is not this cluster's).
/// - The topic here is not the one that was copied (another topic ID: recreated since): refused.
pub(crate) fn find(
    remote: &Loaded,
    topic: &str,
    this_cluster: &str,
    topic_id_here: Option<&str>,
) -> Result<Option<FoundLineage>, LineageProblem> {
    let Some(topic_id_here) = topic_id_here else { return Ok(None) };
    if is_internal_topic(topic, "") {
        return Ok(None);
    }
    let with_topic: Vec<_> =
        remote.mirrors.iter().filter_map(|m| m.topics.iter().find(|t| t.name == topic).map(|t| (m, t))).collect();
    if with_topic.is_empty() {
        return Ok(None);
    }
    let ours: Vec<_> = with_topic
        .iter()
        .filter(|(m, _)| m.stored.spec.expected_source_cluster_id.as_deref() == Some(this_cluster))
        .collect();
    let Some((m, t)) = ours.first() else {
        let (m, _) = with_topic[0];
        return Err(LineageProblem {
            kind: ProblemKind::SourceClusterIdMismatch,
            detail: format!(
                "the source's mirror {:?} copied {topic:?} from cluster {}, not from this cluster ({this_cluster}): \
                 its lineage does not apply here",
                m.stored.spec.name,
                m.stored.spec.expected_source_cluster_id.as_deref().unwrap_or("unknown"),
            ),
        });
    };
    let name = &m.stored.spec.name;
    if let Some((p, rec)) = t.partitions.iter().find(|(_, r)| r.state != PartitionState::Stopped) {
        return Err(LineageProblem {
            kind: ProblemKind::IllegalTransition,
            detail: format!(
                "the source's mirror {name:?} still mirrors {topic:?} from this cluster (partition {p} is {}): \
                 fail it over first, or both directions would copy each other",
                rec.state.as_str()
            ),
        });
    }
    if t.source_topic_id != topic_id_here {
        return Err(LineageProblem {
            kind: ProblemKind::DestinationDiverged,
            detail: format!(
                "{topic:?} here has topic ID {topic_id_here} but the source's mirror {name:?} copied the topic \
                 with ID {}: it was recreated since; start with truncation mode `resync`",
                t.source_topic_id
            ),
        });
    }
    let mut found = FoundLineage { mirror: name.clone(), partitions: BTreeMap::new(), offset_maps: BTreeMap::new() };
    for (p, rec) in &t.partitions {
        if let Some(l) = ReverseLineage::of(rec.stop_point.as_ref(), rec.position.as_ref()) {
            found.partitions.insert(*p, l);
        }
        if let Some(map) = remote.offset_maps.get(&(name.clone(), topic.to_string(), *p)) {
            found.offset_maps.insert(*p, map.inverse());
        }
    }
    Ok(Some(found))
}

/// The mirror in the source cluster's state (`remote`) that copies `topic` back from this
/// cluster (`this_cluster`), in whatever state: a failback was started there, so the source is (or
/// is becoming) the primary again and records written there after this side's failover are its
/// copies or its producers' (the split-brain watch does not report them). `None` when there is
/// none.
pub(crate) fn failback_of(remote: &Loaded, topic: &str, this_cluster: &str) -> Option<String> {
    remote
        .mirrors
        .iter()
        .filter(|m| m.stored.spec.expected_source_cluster_id.as_deref() == Some(this_cluster))
        .find(|m| m.topics.iter().any(|t| t.name == topic))
        .map(|m| m.stored.spec.name.clone())
}

/// What the source cluster's state says about a topic's way back (issue 18): the mirror there
/// that copied the topic from this cluster, and per partition where that copy ended on both
/// sides. Shown on the topic page and `GET .../topics/{topic}/lineage`; what a failback start
/// would adopt, or why it could not.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TopicLineage {
    /// The mirror on the source cluster that copied this topic from this cluster.
    pub source_mirror: String,
    /// Why a failback start could not adopt it (the refusal it would answer); `None` when it can.
    pub problem: Option<String>,
    pub partitions: Vec<LineagePartition>,
}

/// One partition of a [`TopicLineage`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LineagePartition {
    pub partition: i32,
    /// The partition's state in the source cluster's mirror (STOPPED once failed over).
    pub state: PartitionState,
    /// The offset here of the last record that mirror copied.
    pub last_mirrored_offset: Option<i64>,
    /// The offset on the source cluster where that mirror's writes end (its destination stop
    /// offset): a failback copies from there.
    pub source_stop_offset: Option<i64>,
    /// The last mirrored leader epoch (LME) recorded at the stop.
    pub last_mirror_epoch: Option<i32>,
    /// Runs of that mirror's offset map (about one per transaction): what translates consumer
    /// group offsets back here.
    pub offset_map_runs: usize,
}

/// The lineage of `topic` in the source cluster's state `remote`, for display: `None` when no
/// mirror there has the topic. A lineage [`find`] refuses is still described, with the refusal.
pub(crate) fn describe(
    remote: &Loaded,
    topic: &str,
    this_cluster: &str,
    topic_id_here: Option<&str>,
) -> Option<TopicLineage> {
    let with_topic: Vec<_> =
        remote.mirrors.iter().filter_map(|m| m.topics.iter().find(|t| t.name == topic).map(|t| (m, t))).collect();
    // The mirror copying from this cluster, else the first (the refusal says whose it is).
    let (m, t) = with_topic
        .iter()
        .find(|(m, _)| m.stored.spec.expected_source_cluster_id.as_deref() == Some(this_cluster))
        .or(with_topic.first())?;
    let name = m.stored.spec.name.clone();
    // Without a topic here there is nothing to adopt yet; judge it as if it were the same topic.
    let id = topic_id_here.unwrap_or(t.source_topic_id.as_str());
    let problem = match find(remote, topic, this_cluster, Some(id)) {
        Ok(_) => None,
        Err(p) => Some(p.detail),
    };
    let partitions = t
        .partitions
        .iter()
        .map(|(p, rec)| LineagePartition {
            partition: *p,
            state: rec.state,
            last_mirrored_offset: rec
                .stop_point
                .as_ref()
                .and_then(|s| s.last_mirrored_source_offset)
                .or_else(|| rec.position.as_ref().map(|pos| pos.next_source_offset - 1).filter(|o| *o >= 0)),
            source_stop_offset: rec.stop_point.as_ref().map(|s| s.destination_stop_offset),
            last_mirror_epoch: rec.stop_point.as_ref().map(|s| s.last_mirror_epoch),
            offset_map_runs: remote
                .offset_maps
                .get(&(name.clone(), topic.to_string(), *p))
                .map_or(0, |map| map.runs().len()),
        })
        .collect();
    Some(TopicLineage { source_mirror: name, problem, partitions })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::offset_map::Run;
    use crate::domain::{MirrorPosition, PartitionRecord, StopPoint, Timestamp};
    use crate::engine::persist::{LoadedMirror, LoadedTopic, StoredMirror};
    use crate::engine::{MirrorSpec, SourceSpec, SyncSpec};

    fn record(state: PartitionState, stop: Option<(i64, i64)>) -> PartitionRecord {
        let mut r = PartitionRecord::new(Timestamp::from_millis(0));
        r.state = state;
        r.position = stop.map(|(last, _)| MirrorPosition {
            next_source_offset: last + 1,
            source_leader_epoch: 2,
            destination_end_offset: 0,
        });
        r.stop_point = stop.map(|(last, at)| StopPoint {
            last_mirror_epoch: 2,
            last_mirrored_source_offset: Some(last),
            destination_stop_offset: at,
        });
        r
    }

    fn remote(source_cluster: &str, states: &[PartitionState]) -> Loaded {
        let partitions =
            states.iter().enumerate().map(|(p, s)| (p as i32, record(*s, Some((99, 120 + p as i64))))).collect();
        let spec = MirrorSpec {
            topic_include: Vec::new(),
            topic_exclude: crate::domain::topic_policy::default_exclude(),
            name: "m1".into(),
            source: SourceSpec { bootstrap_servers: "a:9092".into(), properties: Default::default() },
            expected_source_cluster_id: Some(source_cluster.into()),
            sync: SyncSpec::default(),
            replication_throttle_bytes_per_sec: None,
            approval: Default::default(),
        };
        let mut loaded = Loaded::default();
        loaded.mirrors.push(LoadedMirror {
            stored: StoredMirror {
                spec,
                created_at: Timestamp::from_millis(0),
                updated_at: Timestamp::from_millis(0),
                created_acls: Vec::new(),
            },
            topics: vec![LoadedTopic {
                name: "orders".into(),
                source_topic_id: "T-A".into(),
                destination_topic_id: "T-B".into(),
                created_at: Timestamp::from_millis(0),
                partitions,
            }],
            last_mirror_epochs: crate::store::LastMirrorEpochsValue { topics: Vec::new() },
        });
        loaded.offset_maps.insert(
            ("m1".into(), "orders".into(), 0),
            OffsetMap::from_runs([Run::new(0, 0, 50), Run::new(50, 52, 50)]).unwrap(),
        );
        loaded
    }

    #[test]
    fn the_failed_over_mirror_from_this_cluster_is_the_lineage() {
        let r = remote("A", &[PartitionState::Stopped, PartitionState::Stopped]);
        let found = find(&r, "orders", "A", Some("T-A")).unwrap().expect("a lineage");
        assert_eq!(found.mirror, "m1");
        assert_eq!(found.partitions[&0], ReverseLineage { mirrored_end: 100, source_stop_offset: 120 });
        assert_eq!(found.partitions[&1], ReverseLineage { mirrored_end: 100, source_stop_offset: 121 });
        // The inverse map: B offsets back to A's.
        assert_eq!(found.offset_maps[&0].runs(), &[Run::new(0, 0, 50), Run::new(52, 50, 50)]);
        assert!(!found.offset_maps.contains_key(&1));
    }

    #[test]
    fn a_failback_is_a_mirror_there_copying_the_topic_from_this_cluster_in_any_state() {
        for state in
            [PartitionState::Mirroring, PartitionState::Paused, PartitionState::Failed, PartitionState::Stopped]
        {
            assert_eq!(failback_of(&remote("B", &[state]), "orders", "B").as_deref(), Some("m1"), "{state}");
        }
        // A mirror there from another cluster, or of another topic, explains nothing here.
        assert_eq!(failback_of(&remote("C", &[PartitionState::Mirroring]), "orders", "B"), None);
        assert_eq!(failback_of(&remote("B", &[PartitionState::Mirroring]), "payments", "B"), None);
        assert_eq!(failback_of(&Loaded::default(), "orders", "B"), None);
    }

    #[test]
    fn no_lineage_or_an_unusable_one_is_said_plainly() {
        let r = remote("A", &[PartitionState::Stopped]);
        assert_eq!(find(&r, "payments", "A", Some("T-A")), Ok(None), "never mirrored: a normal start");
        assert_eq!(find(&r, "orders", "A", None), Ok(None), "no topic here: nothing to adopt");
        let e = find(&r, "orders", "C", Some("T-A")).unwrap_err();
        assert_eq!(e.kind, ProblemKind::SourceClusterIdMismatch, "{e:?}");
        assert!(e.detail.contains("from cluster A, not from this cluster (C)"), "{}", e.detail);
        let e = find(&r, "orders", "A", Some("T-other")).unwrap_err();
        assert!(e.detail.contains("recreated"), "{}", e.detail);
        let active = remote("A", &[PartitionState::Stopped, PartitionState::Mirroring]);
        let e = find(&active, "orders", "A", Some("T-A")).unwrap_err();
        assert_eq!(e.kind, ProblemKind::IllegalTransition);
        assert!(e.detail.contains("partition 1 is MIRRORING"), "{}", e.detail);
    }

    #[test]
    fn the_lineage_is_described_for_the_topic_page_with_or_without_a_refusal() {
        let r = remote("A", &[PartitionState::Stopped, PartitionState::Stopped]);
        assert_eq!(describe(&r, "payments", "A", Some("T-A")), None, "no mirror there has it");
        let l = describe(&r, "orders", "A", Some("T-A")).expect("described");
        assert_eq!(l.source_mirror, "m1");
        assert_eq!(l.problem, None, "a failback could adopt it");
        assert_eq!(
            l.partitions[0],
            LineagePartition {
                partition: 0,
                state: PartitionState::Stopped,
                last_mirrored_offset: Some(99),
                source_stop_offset: Some(120),
                last_mirror_epoch: Some(2),
                offset_map_runs: 2,
            }
        );
        assert_eq!(l.partitions[1].source_stop_offset, Some(121));
        assert_eq!(l.partitions[1].offset_map_runs, 0);
        // Not created here yet: judged as the same topic (nothing to adopt, nothing refused).
        assert_eq!(describe(&r, "orders", "A", None).and_then(|l| l.problem), None);
        // Refusals are described, not hidden.
        let other = describe(&r, "orders", "C", Some("T-A")).expect("described");
        assert!(other.problem.is_some_and(|p| p.contains("not from this cluster (C)")));
        let active = remote("A", &[PartitionState::Stopped, PartitionState::Mirroring]);
        let l = describe(&active, "orders", "A", Some("T-A")).expect("described");
        assert!(l.problem.is_some_and(|p| p.contains("still mirrors")));
        assert_eq!(l.partitions[1].state, PartitionState::Mirroring);
    }
}
