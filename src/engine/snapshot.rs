//! The engine's read model: an immutable picture of every mirror, topic and partition that pages
//! and API reads render from without touching Kafka. Secrets are already redacted here.

use std::collections::BTreeMap;

use std::sync::Arc;

use serde::Serialize;

use crate::domain::{PartitionState, Timestamp};

/// Everything the API and the dashboard show.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Snapshot {
    /// When this snapshot was built (milliseconds since the epoch).
    pub taken_at: Timestamp,
    /// The destination cluster's ID (empty until known).
    pub destination_cluster_id: String,
    /// The destination cluster's brokers, as seen at startup.
    pub destination_brokers: Vec<BrokerSnapshot>,
    pub mirrors: Vec<MirrorSnapshot>,
    /// The kmirror instances sharing the work, as this one sees them (DESIGN.md section 10).
    pub cluster: ClusterSnapshot,
    /// Disaster-recovery drills of every mirror, newest first (`engine::drills`).
    pub drills: Vec<super::DrillView>,
    /// Break-glass calls this instance ran since it started: (mirror, action, count).
    pub break_glass: Vec<(String, String, u64)>,
    /// Approval requests and break-glass entries still kept, newest first (`engine::approvals`).
    pub approvals: Vec<super::ApprovalRecord>,
}

/// The deployment (every instance with the same cluster name) as this instance sees it.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ClusterSnapshot {
    /// `--cluster-name`.
    pub cluster_name: String,
    /// `group` (slots shared through a consumer group) or `standalone` (this instance owns all).
    pub mode: String,
    /// This instance's id.
    pub this_instance: String,
    /// Slots: partitions of the state topic.
    pub slots: i32,
    /// Every instance known: this one, and the others by their heartbeats in the state topic.
    pub instances: Vec<InstanceSnapshot>,
    /// Rebalances of the slot group this instance saw.
    pub rebalances: u64,
}

impl ClusterSnapshot {
    /// The instance that owns `slot`, by the latest heartbeats (this instance's own slots are
    /// exact; another's are as of its last heartbeat).
    pub fn owner_of(&self, slot: i32) -> Option<&InstanceSnapshot> {
        self.instances.iter().find(|i| i.slots.contains(&slot))
    }
}

/// One kmirror instance of the deployment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InstanceSnapshot {
    /// `--instance-id`.
    pub id: String,
    /// Where its API and dashboard are reachable (`--advertised-url`), when it said.
    pub advertised_url: Option<String>,
    /// Its kmirror version.
    pub version: String,
    /// The slots it owns.
    pub slots: Vec<i32>,
    /// Mirrored partitions in those slots.
    pub partitions: u64,
    /// When it last wrote its heartbeat (this instance: now).
    pub last_heartbeat: Timestamp,
    /// Since when it runs.
    pub started_at: Timestamp,
    /// Whether this is the instance answering.
    pub this: bool,
}

impl Snapshot {
    pub fn mirror(&self, name: &str) -> Option<&MirrorSnapshot> {
        self.mirrors.iter().find(|m| m.name == name)
    }
}

/// A broker of the destination cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BrokerSnapshot {
    pub id: i32,
    pub host: String,
    pub port: u16,
    pub rack: Option<String>,
}

/// Health of the source cluster-ID check.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ClusterIdStatus {
    /// Not checked yet.
    #[default]
    Unknown,
    /// The source answered with the expected ID.
    Ok,
    /// The source answered with another ID: the mirror is halted.
    Mismatch,
    /// The source did not answer (retryable; not a mismatch).
    Unreachable,
    /// The source refused the mirror's credentials (SASL authentication failed).
    AuthenticationFailed,
    /// The TLS handshake with the source failed.
    TlsFailed,
}

/// What a mirror's data path is doing. The dashboard colours it by [`DataPathStatus::health`]
/// and the API reports its words (`Display`); the snapshot's JSON tags it with its `status` slug.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum DataPathStatus {
    /// The data path is being created (its producer fences any predecessor).
    #[default]
    Starting,
    /// Mirroring normally.
    Running,
    /// A transient failure: the open transaction was aborted and the data path, or the attempt
    /// to create it, is retried after a backoff.
    Retrying { attempt: u32, message: String },
    /// Being replaced: the source connection changed, or after a producer failure.
    Restarting { reason: String },
    /// Another kmirror instance took this destination over: this instance is read-only.
    Fenced { message: String },
    /// It stopped or could not be created, and nothing retries it by itself.
    Failed { message: String },
    /// No data path here: the mirror has no partition in this instance's slots, and none
    /// anywhere else either (no topic started yet).
    Idle,
    /// No data path here: other instances mirror the partitions (their slots).
    Elsewhere { instances: Vec<String> },
}

/// How an operator should read a status (the dashboard's colour).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Health {
    Ok,
    Warning,
    Critical,
}

impl DataPathStatus {
    pub fn health(&self) -> Health {
        match self {
            DataPathStatus::Running | DataPathStatus::Idle | DataPathStatus::Elsewhere { .. } => Health::Ok,
            DataPathStatus::Starting | DataPathStatus::Retrying { .. } | DataPathStatus::Restarting { .. } => {
                Health::Warning
            }
            DataPathStatus::Fenced { .. } | DataPathStatus::Failed { .. } => Health::Critical,
        }
    }

    /// The stable slug (`running`, `retrying`, ...).
    pub fn slug(&self) -> &'static str {
        match self {
            DataPathStatus::Starting => "starting",
            DataPathStatus::Running => "running",
            DataPathStatus::Retrying { .. } => "retrying",
            DataPathStatus::Restarting { .. } => "restarting",
            DataPathStatus::Fenced { .. } => "fenced",
            DataPathStatus::Failed { .. } => "failed",
            DataPathStatus::Idle => "idle",
            DataPathStatus::Elsewhere { .. } => "elsewhere",
        }
    }
}

impl std::fmt::Display for DataPathStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DataPathStatus::Starting | DataPathStatus::Running | DataPathStatus::Idle => f.write_str(self.slug()),
            DataPathStatus::Elsewhere { instances } => write!(f, "mirrored by {}", instances.join(", ")),
            DataPathStatus::Retrying { attempt, message } => write!(f, "retrying (attempt {attempt}): {message}"),
            DataPathStatus::Restarting { reason } => write!(f, "restarting: {reason}"),
            DataPathStatus::Fenced { message } => write!(f, "fenced: {message}"),
            DataPathStatus::Failed { message } => write!(f, "failed: {message}"),
        }
    }
}

/// One mirror. `Default` is for tests that build a snapshot: set what the test is about.
#[derive(Debug, Clone, Default, Serialize)]
pub struct MirrorSnapshot {
    pub name: String,
    pub source_bootstrap_servers: String,
    /// Source client properties with secrets redacted.
    pub source_properties: BTreeMap<String, String>,
    pub expected_source_cluster_id: Option<String>,
    /// What the metadata manager syncs for this mirror.
    pub sync_spec: super::SyncSpec,
    pub observed_source_cluster_id: Option<String>,
    pub cluster_id_status: ClusterIdStatus,
    pub cluster_id_checked_at: Option<Timestamp>,
    pub cluster_id_error: Option<String>,
    /// What the data path is doing.
    pub data_path: DataPathStatus,
    /// The replication throttle, record bytes per second per instance (`None`: none).
    pub replication_throttle_bytes_per_sec: Option<u64>,
    /// Seconds this instance's data paths of the mirror waited for the throttle (summed).
    pub throttled_seconds: f64,
    pub created_at: Timestamp,
    /// Metadata sync health, one entry per kind (topic configs, group offsets, ACLs).
    pub sync: Vec<SyncStatus>,
    /// Per consumer group: last offset sync time and last error.
    pub groups: Vec<GroupSyncView>,
    pub topics: Vec<TopicSnapshot>,
    /// Which calls need a second person's approval.
    pub approval: super::ApprovalPolicy,
    /// The topic policy: source topics discovery starts (whole-name patterns).
    pub topic_include: Vec<String>,
    /// The topic policy's exclusions (win over `topic_include`).
    pub topic_exclude: Vec<String>,
    /// What discovery found and did.
    pub discovery: DiscoverySnapshot,
}

/// A topic a discovery start refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Refusal {
    pub kind: super::ProblemKind,
    pub detail: String,
    /// When it was first refused for this reason.
    pub since: Timestamp,
    /// When it was last tried.
    pub tried_at: Timestamp,
}

/// A mirror's discovery as this instance sees it.
#[derive(Debug, Clone, Default, Serialize)]
pub struct DiscoverySnapshot {
    /// The instance that runs discovery for the mirror (the owner of its slot), when known.
    pub runs_on: Option<String>,
    /// Whether that is this instance (refusals are known only there).
    pub runs_here: bool,
    /// The last listing of the source's topics.
    pub last_run_at: Option<Timestamp>,
    /// How long that listing took.
    pub last_run_ms: Option<u64>,
    /// Topics the source had then.
    pub topics_seen: Option<usize>,
    /// Why the last run could not list or start, if it could not.
    pub last_error: Option<String>,
    /// The last run's plan (matched, excluded, taken by another mirror, to start), while the
    /// mirror has an include pattern.
    #[serde(skip)]
    pub plan: Option<Arc<crate::domain::topic_policy::Plan>>,
    /// Topics the run in progress still has to start.
    pub starting: Option<usize>,
    /// Topics a start refused lately, with why (tried again on a refresh, a policy change or
    /// after a while).
    pub refused: Vec<(String, Refusal)>,
    pub runs_total: u64,
    pub topics_started_total: u64,
    pub topics_stopped_total: u64,
}

/// The kinds of metadata the MirrorMetadataManager syncs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SyncKind {
    TopicConfigs,
    GroupOffsets,
    Acls,
}

impl SyncKind {
    pub const ALL: [SyncKind; 3] = [SyncKind::TopicConfigs, SyncKind::GroupOffsets, SyncKind::Acls];

    pub fn as_str(self) -> &'static str {
        match self {
            SyncKind::TopicConfigs => "topic_configs",
            SyncKind::GroupOffsets => "group_offsets",
            SyncKind::Acls => "acls",
        }
    }
}

/// Health of one metadata sync kind of a mirror. A sync that keeps failing shows here (and in
/// the API and dashboard) with its last error and how many times in a row it failed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SyncStatus {
    pub kind: SyncKind,
    /// False when the cluster cannot serve this kind (e.g. the embedded demo cluster).
    pub supported: bool,
    pub last_attempt_at: Option<Timestamp>,
    pub last_success_at: Option<Timestamp>,
    pub last_error: Option<String>,
    pub consecutive_failures: u32,
    /// Items applied on the last successful run (configs changed, groups synced, ACLs changed).
    pub last_applied: u64,
    /// Findings that need an operator (e.g. config drift on the destination).
    pub warnings: Vec<String>,
}

impl SyncStatus {
    pub fn new(kind: SyncKind) -> SyncStatus {
        SyncStatus {
            kind,
            supported: true,
            last_attempt_at: None,
            last_success_at: None,
            last_error: None,
            consecutive_failures: 0,
            last_applied: 0,
            warnings: Vec::new(),
        }
    }
}

impl MirrorSnapshot {
    pub fn topic(&self, name: &str) -> Option<&TopicSnapshot> {
        self.topics.iter().find(|t| t.name == name)
    }

    /// Partition counts by state.
    pub fn state_counts(&self) -> BTreeMap<PartitionState, usize> {
        let mut m = BTreeMap::new();
        for p in self.topics.iter().flat_map(|t| &t.partitions) {
            *m.entry(p.state).or_default() += 1;
        }
        m
    }
}

/// One mirrored topic.
#[derive(Debug, Clone, Serialize)]
pub struct TopicSnapshot {
    pub name: String,
    /// The topic's rolled-up state (any FAILED → FAILED, else the least advanced).
    pub state: PartitionState,
    pub source_topic_id: String,
    pub destination_topic_id: String,
    pub lag_records: i64,
    pub lag_seconds: f64,
    pub partitions: Vec<PartitionSnapshot>,
    /// A failed-over topic that a mirror on its old source copies back (a failback was started
    /// there): that mirror. Records written to the old source after the failover are then its
    /// copies or its producers', not split brain.
    pub failback_mirror: Option<String>,
}

/// What a stop (failover) of a topic now would leave unmirrored: the one computation behind the
/// failover dialog, `validate_only` of `topics:stop` and the CLI's `topics stop --validate-only`
/// ([`TopicSnapshot::stop_impact`]).
#[derive(Debug, Clone, PartialEq)]
pub struct StopImpact {
    /// Source records not on the destination, over every partition.
    pub records: i64,
    /// The largest of the partitions' `seconds`.
    pub seconds: f64,
    /// Every partition of the topic, by partition number.
    pub partitions: Vec<PartitionStopImpact>,
}

/// What a stop now would leave unmirrored of one partition.
#[derive(Debug, Clone, PartialEq)]
pub struct PartitionStopImpact {
    pub partition: i32,
    pub state: PartitionState,
    /// Source records (offsets) committed on the source and not mirrored yet: the lag,
    /// `lineage::failover_impact` of the partition's position and the source's last stable
    /// offset. 0 for a STOPPED partition (a stop changes nothing there).
    pub records: i64,
    /// How long ago the partition last had no lag: about the age of the oldest of those
    /// records; 0 without lag.
    pub seconds: f64,
    pub source_last_stable_offset: Option<i64>,
    pub mirrored_source_offset: Option<i64>,
}

impl PartitionSnapshot {
    /// What a stop of this partition now would leave unmirrored.
    pub fn stop_impact(&self) -> PartitionStopImpact {
        let records = if self.state == PartitionState::Stopped { 0 } else { self.lag_records.max(0) };
        PartitionStopImpact {
            partition: self.partition,
            state: self.state,
            records,
            seconds: if records > 0 { self.lag_seconds.max(0.0) } else { 0.0 },
            source_last_stable_offset: self.source_last_stable_offset,
            mirrored_source_offset: self.mirrored_source_offset,
        }
    }
}

impl TopicSnapshot {
    /// What a stop of this topic now would leave unmirrored, per partition and in total, from
    /// the snapshot's lag (refreshed about once a second).
    pub fn stop_impact(&self) -> StopImpact {
        let mut partitions: Vec<PartitionStopImpact> =
            self.partitions.iter().map(PartitionSnapshot::stop_impact).collect();
        partitions.sort_by_key(|p| p.partition);
        StopImpact {
            records: partitions.iter().map(|p| p.records).sum(),
            seconds: partitions.iter().map(|p| p.seconds).fold(0.0, f64::max),
            partitions,
        }
    }

    /// What the split-brain watch reports: the topic's writes to its old source after the
    /// failover ([`Self::source_writes_after_stop`]) unless a failback explains them.
    pub fn split_brain(&self) -> SourceWrites {
        if self.failback_mirror.is_some() { SourceWrites::default() } else { self.source_writes_after_stop() }
    }

    /// The split-brain watch of a failed-over topic: source offsets its old source received after
    /// the failover, summed over its STOPPED partitions, and how many partitions received any.
    pub fn source_writes_after_stop(&self) -> SourceWrites {
        self.partitions.iter().filter_map(|p| p.source_writes_after_stop).filter(|n| *n > 0).fold(
            SourceWrites::default(),
            |acc, n| SourceWrites { records: acc.records + n, partitions: acc.partitions + 1 },
        )
    }
}

/// What an old source received after a failover ([`TopicSnapshot::source_writes_after_stop`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SourceWrites {
    /// Source offsets (an upper bound of records when the topic is transactional).
    pub records: i64,
    /// Partitions with any.
    pub partitions: usize,
}

/// A partition's error as shown to operators.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PartitionErrorView {
    pub code: String,
    pub message: String,
    pub retryable: bool,
    /// An operator's recover may move the partition (`domain::recover_refusal`: not after a
    /// FOREIGN_WRITE).
    pub recoverable: bool,
}

/// One mirrored partition. `Default` is for tests that build a snapshot.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PartitionSnapshot {
    pub topic: String,
    pub partition: i32,
    pub state: PartitionState,
    pub state_since: Timestamp,
    pub state_epoch: u64,
    pub source_log_start_offset: Option<i64>,
    pub source_last_stable_offset: Option<i64>,
    pub source_high_watermark: Option<i64>,
    /// The next source offset to mirror.
    pub mirrored_source_offset: Option<i64>,
    pub destination_high_watermark: Option<i64>,
    pub lag_records: i64,
    pub lag_seconds: f64,
    pub last_mirrored_epoch: Option<i32>,
    pub error: Option<PartitionErrorView>,
    pub retry_count: u32,
    /// A FAILED partition's next automatic retry; `None` when there is none (not FAILED, not
    /// retryable, or its automatic retries are used up: an operator recovers it).
    pub next_retry_at: Option<Timestamp>,
    pub records_mirrored: u64,
    pub bytes_mirrored: u64,
    /// Where mirroring stopped (after a failover).
    pub destination_stop_offset: Option<i64>,
    /// Records written on the destination after the stop point that are still in its log (what
    /// a restart without resync would refuse), from `domain::lineage::divergence`; 0 unless
    /// STOPPED with a known destination log.
    pub local_writes: i64,
    /// Source offsets the old source of a STOPPED partition received after the failover (by
    /// record time, past what was mirrored): non-zero means something still writes there (split
    /// brain); a failback refuses those records as divergent. `None` unless STOPPED and read
    /// since (`domain::lineage::source_writes_after_stop`).
    pub source_writes_after_stop: Option<i64>,
    /// The slot (state-topic partition) the partition belongs to.
    pub slot: i32,
    /// The instance that owns the slot, when known.
    pub owner: Option<String>,
    /// A FAILED partition's state when it failed (what its retry goes back to).
    pub failed_in: Option<PartitionState>,
    /// A start with truncation `resync` has not completed.
    pub resync_pending: bool,
    /// A MIRRORING partition whose slot's data path this instance closed because it had nothing
    /// to copy: the lag refresh hands it to a data path again when its source has new records.
    #[serde(default)]
    pub idle: bool,
}

impl PartitionSnapshot {
    /// What a lifecycle call needs to know of the partition (`domain::topic_call`).
    #[must_use]
    pub fn call_facts(&self) -> crate::domain::topic_call::PartitionFacts {
        crate::domain::topic_call::PartitionFacts {
            partition: self.partition,
            state: self.state,
            failed_in: self.failed_in,
            resync: self.resync_pending,
            foreign_write: self.error.as_ref().is_some_and(|e| !e.recoverable),
        }
    }
}

/// What lifecycle calls need to know of `partitions`.
#[must_use]
pub fn call_facts(partitions: &[PartitionSnapshot]) -> Vec<crate::domain::topic_call::PartitionFacts> {
    partitions.iter().map(PartitionSnapshot::call_facts).collect()
}

/// Per-group outcome of the offset sync.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct GroupSyncView {
    pub group: String,
    pub last_attempt_at: Timestamp,
    pub last_success_at: Option<Timestamp>,
    pub last_error: Option<String>,
    /// Partitions whose destination offset was changed on the last successful sync.
    pub partitions_synced: u64,
    /// The mirror's topics the group has committed offsets on at the source (sorted).
    pub topics: Vec<String>,
    /// Partitions of those topics with a committed source offset that the sync covers (the
    /// partition is mirroring, pausing or paused).
    pub partitions_committed: u64,
    /// Of those, partitions whose destination offset is the translation of the source's commit
    /// after the last sync: where the group resumes after a failover.
    pub partitions_in_sync: u64,
    /// Of those, partitions that could not be translated (nothing mirrored there yet): after a
    /// failover the group starts there by its `auto.offset.reset`.
    pub partitions_not_translated: u64,
}

/// Whether a group can move to the destination now (a failover) and resume exactly where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupReadiness {
    /// Every committed partition's offset is on the destination, translated, as of the last sync.
    Ready,
    /// It has no committed offset on the mirror's synced partitions: nothing to move.
    NothingCommitted,
    /// Why not (the last sync failed, a partition is not translated, never synced).
    NotReady(String),
}

impl GroupSyncView {
    /// Failover readiness, from the last sync.
    #[must_use]
    pub fn readiness(&self) -> GroupReadiness {
        if let Some(e) = &self.last_error {
            return GroupReadiness::NotReady(e.clone());
        }
        if self.last_success_at.is_none() {
            return GroupReadiness::NotReady("not synced yet".into());
        }
        if self.partitions_committed == 0 {
            return GroupReadiness::NothingCommitted;
        }
        if self.partitions_not_translated > 0 {
            return GroupReadiness::NotReady(format!(
                "{} of {} committed partitions have nothing mirrored yet to translate to (the group starts there by its \
                 auto.offset.reset)",
                self.partitions_not_translated, self.partitions_committed
            ));
        }
        if self.partitions_in_sync < self.partitions_committed {
            return GroupReadiness::NotReady(format!(
                "{} of {} committed partitions are in sync",
                self.partitions_in_sync, self.partitions_committed
            ));
        }
        GroupReadiness::Ready
    }
}
