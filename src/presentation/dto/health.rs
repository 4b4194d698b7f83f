//! A mirror's health (`GET /api/v1/mirrors/{mirror}/health`) and refresh.

use std::collections::BTreeMap;

use serde::Serialize;
use utoipa::ToSchema;

use crate::domain::Timestamp;
use crate::engine::{GroupReadiness, GroupSyncView, MirrorSnapshot, SyncKind, SyncStatus};

use super::mirrors::ClusterIdCheck;
use super::{state_counts, ts};

/// The source cluster-ID check.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SourceClusterIdHealth {
    pub expected: Option<String>,
    pub observed: Option<String>,
    pub status: ClusterIdCheck,
    pub checked_at: Option<String>,
    pub error: Option<String>,
}

/// Health of one metadata sync kind.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SyncKindHealth {
    /// False when the cluster cannot serve this kind.
    pub supported: bool,
    pub last_attempt_at: Option<String>,
    pub last_success_at: Option<String>,
    /// Seconds since the last success (absent before the first one).
    pub seconds_since_success: Option<f64>,
    pub last_error: Option<String>,
    pub consecutive_failures: u32,
    /// Items applied by the last successful run.
    pub last_applied: u64,
    /// Findings that need an operator (e.g. config drift on the destination).
    pub warnings: Vec<String>,
}

impl SyncKindHealth {
    /// `kind`'s health in `m` (never run yet when the mirror has no status for it).
    pub fn of(m: &MirrorSnapshot, kind: SyncKind, now: Timestamp) -> Self {
        let s = m.sync.iter().find(|s| s.kind == kind).cloned().unwrap_or_else(|| SyncStatus::new(kind));
        SyncKindHealth::new(&s, now)
    }

    fn new(s: &SyncStatus, now: Timestamp) -> Self {
        SyncKindHealth {
            supported: s.supported,
            last_attempt_at: s.last_attempt_at.map(ts),
            last_success_at: s.last_success_at.map(ts),
            seconds_since_success: s.last_success_at.map(|t| t.millis_until(now).max(0) as f64 / 1000.0),
            last_error: s.last_error.clone(),
            consecutive_failures: s.consecutive_failures,
            last_applied: s.last_applied,
            warnings: s.warnings.clone(),
        }
    }
}

/// Metadata sync health per kind.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SyncHealth {
    pub topic_configs: SyncKindHealth,
    pub group_offsets: SyncKindHealth,
    pub acls: SyncKindHealth,
}

/// Whether a group resumes exactly on the destination after a failover now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum FailoverReadiness {
    /// Every committed partition in sync: a failover now resumes the group exactly where its
    /// last commit before the sync was.
    Ready,
    /// See `not_ready_reason`.
    NotReady,
    /// No commit on the mirror's synced partitions.
    NothingCommitted,
}

/// The consumer-group offset sync of one group.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct GroupSync {
    pub group: String,
    pub last_attempt_at: String,
    pub last_success_at: Option<String>,
    pub last_error: Option<String>,
    /// Partitions whose destination offset changed on the last successful sync.
    pub partitions_synced: u64,
    /// The mirror's topics the group has committed offsets on at the source.
    pub topics: Vec<String>,
    /// Partitions of those topics with a committed offset that the sync covers (mirroring,
    /// pausing or paused).
    pub partitions_committed: u64,
    /// Of those, partitions whose destination offset is the exact translation of the source's
    /// commit as of the last sync: where the group resumes after a failover.
    pub partitions_in_sync: u64,
    /// Of those, partitions with nothing mirrored yet to translate to.
    pub partitions_not_translated: u64,
    pub failover_readiness: FailoverReadiness,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_ready_reason: Option<String>,
}

impl From<&GroupSyncView> for GroupSync {
    fn from(g: &GroupSyncView) -> Self {
        let (failover_readiness, not_ready_reason) = match g.readiness() {
            GroupReadiness::Ready => (FailoverReadiness::Ready, None),
            GroupReadiness::NothingCommitted => (FailoverReadiness::NothingCommitted, None),
            GroupReadiness::NotReady(why) => (FailoverReadiness::NotReady, Some(why)),
        };
        GroupSync {
            group: g.group.clone(),
            last_attempt_at: ts(g.last_attempt_at),
            last_success_at: g.last_success_at.map(ts),
            last_error: g.last_error.clone(),
            partitions_synced: g.partitions_synced,
            topics: g.topics.clone(),
            partitions_committed: g.partitions_committed,
            partitions_in_sync: g.partitions_in_sync,
            partitions_not_translated: g.partitions_not_translated,
            failover_readiness,
            not_ready_reason,
        }
    }
}

/// A mirror's health: the source cluster-ID check, the data path and metadata sync.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct HealthResponse {
    pub mirror: String,
    pub source_cluster_id: SourceClusterIdHealth,
    pub data_path: String,
    pub sync: SyncHealth,
    /// Per consumer group: the last offset sync.
    pub groups: Vec<GroupSync>,
    /// Partition counts by state.
    pub state_counts: BTreeMap<String, usize>,
    /// Failed-over topics whose old source received records after the failover; empty when none
    /// did. Without `failback_mirror` that is split brain: a producer still writes there.
    pub source_writes_after_failover: Vec<SourceWritesAfterFailover>,
    pub taken_at: String,
    pub snapshot_age_ms: u64,
}

/// A failed-over topic whose old source still receives records.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SourceWritesAfterFailover {
    pub topic: String,
    /// Source offsets written after the failover over its STOPPED partitions (an upper bound of
    /// records when the topic is transactional).
    pub records: i64,
    /// Partitions that received any.
    pub partitions: usize,
    /// The mirror on the old source that copies the topic back (a failback was started there):
    /// it explains the records, the old source is or becomes the primary again. Absent when
    /// none is known (the old source's state topic is read while such records exist).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failback_mirror: Option<String>,
}

impl HealthResponse {
    pub fn new(m: &MirrorSnapshot, now: Timestamp, taken_at: String, snapshot_age_ms: u64) -> Self {
        let kind = |k: SyncKind| SyncKindHealth::of(m, k, now);
        HealthResponse {
            mirror: m.name.clone(),
            source_cluster_id: SourceClusterIdHealth {
                expected: m.expected_source_cluster_id.clone(),
                observed: m.observed_source_cluster_id.clone(),
                status: m.cluster_id_status.into(),
                checked_at: m.cluster_id_checked_at.map(ts),
                error: m.cluster_id_error.clone(),
            },
            data_path: m.data_path.to_string(),
            sync: SyncHealth {
                topic_configs: kind(SyncKind::TopicConfigs),
                group_offsets: kind(SyncKind::GroupOffsets),
                acls: kind(SyncKind::Acls),
            },
            groups: m.groups.iter().map(GroupSync::from).collect(),
            state_counts: state_counts(m.topics.iter().flat_map(|t| &t.partitions)),
            source_writes_after_failover: m
                .topics
                .iter()
                .filter_map(|t| {
                    let w = t.source_writes_after_stop();
                    (w.records > 0).then(|| SourceWritesAfterFailover {
                        topic: t.name.clone(),
                        records: w.records,
                        partitions: w.partitions,
                        failback_mirror: t.failback_mirror.clone(),
                    })
                })
                .collect(),
            taken_at,
            snapshot_age_ms,
        }
    }
}

/// Answer of `POST .../refresh`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct RefreshResponse {
    pub mirror: String,
    /// The refresh was scheduled; its results appear in `/health` and the snapshot.
    pub accepted: bool,
}
