//! The REST API's wire types: request bodies (strict: unknown fields are refused) and response
//! bodies mapped from the engine's snapshot. Engine types never reach the wire directly, so the
//! engine can change its model without changing the contract, and no `MirrorSpec` (which holds
//! secrets) is ever serialised back.
//!
//! Timestamps are RFC 3339 strings in UTC (`2026-05-01T12:00:00.000Z`). Every read carries the
//! age of the snapshot it was served from (`taken_at`, `snapshot_age_ms`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::domain::{PartitionState, Timestamp};
use crate::engine::{
    ClusterIdStatus, ClusterSnapshot, GroupReadiness, GroupSyncView, InstanceSnapshot, MirrorSnapshot, OperationView,
    PartitionSnapshot, Problem, SyncKind, SyncSpec, SyncStatus, TopicOutcome, TopicSnapshot,
};

/// An RFC 3339 rendering of a timestamp.
pub fn ts(t: Timestamp) -> String {
    t.to_string()
}

fn ts_millis(ms: i64) -> String {
    Timestamp::from_millis(ms).to_string()
}

/// JSON has no NaN or infinity; a lag that is not a finite number is shown as 0.
fn finite(x: f64) -> f64 {
    if x.is_finite() { x } else { 0.0 }
}

// ----- shared -------------------------------------------------------------------------------

/// A partition's lifecycle state (KIP-1279 seed states).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[schema(as = PartitionState)]
pub enum PartitionStateDto {
    Unknown,
    Preparing,
    Mirroring,
    Pausing,
    Paused,
    Stopping,
    Stopped,
    Failed,
}

impl From<PartitionState> for PartitionStateDto {
    fn from(s: PartitionState) -> Self {
        match s {
            PartitionState::Unknown => Self::Unknown,
            PartitionState::Preparing => Self::Preparing,
            PartitionState::Mirroring => Self::Mirroring,
            PartitionState::Pausing => Self::Pausing,
            PartitionState::Paused => Self::Paused,
            PartitionState::Stopping => Self::Stopping,
            PartitionState::Stopped => Self::Stopped,
            PartitionState::Failed => Self::Failed,
        }
    }
}

impl From<PartitionStateDto> for PartitionState {
    fn from(s: PartitionStateDto) -> Self {
        match s {
            PartitionStateDto::Unknown => Self::Unknown,
            PartitionStateDto::Preparing => Self::Preparing,
            PartitionStateDto::Mirroring => Self::Mirroring,
            PartitionStateDto::Pausing => Self::Pausing,
            PartitionStateDto::Paused => Self::Paused,
            PartitionStateDto::Stopping => Self::Stopping,
            PartitionStateDto::Stopped => Self::Stopped,
            PartitionStateDto::Failed => Self::Failed,
        }
    }
}

/// Partition counts by state (only states with at least one partition appear).
fn state_counts<'a>(partitions: impl Iterator<Item = &'a PartitionSnapshot>) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for p in partitions {
        *m.entry(p.state.as_str().to_string()).or_default() += 1;
    }
    m
}

/// A problem reported for one topic of a lifecycle call or operation.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TopicProblem {
    /// The stable problem type slug (same table as the problem+json `type`).
    #[serde(rename = "type")]
    pub problem_type: String,
    pub detail: String,
}

impl From<&Problem> for TopicProblem {
    fn from(p: &Problem) -> Self {
        TopicProblem { problem_type: p.kind.slug().to_string(), detail: p.detail.clone() }
    }
}

/// One topic's outcome.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TopicResult {
    pub topic: String,
    pub ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<TopicProblem>,
    /// `truncation: resync` with `quarantine: true`: per partition with divergent records, those copied
    /// to `<topic>.kmirror-diverged` before the resync deleted them (with `validate_only`: the
    /// records it would copy). Absent for other calls.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quarantined: Option<Vec<QuarantineResult>>,
    /// `validate_only` of a start that is an incremental failback (the destination topic holds
    /// what the source's stopped mirror copied from here): the lineage adopted and what each
    /// partition will copy. Absent for other calls; a failback with divergent records answers
    /// `DESTINATION_DIVERGED` instead, with their count and range per partition.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failback: Option<FailbackResult>,
    /// What to know beyond `ok`: e.g. a pause of a topic with FAILED partitions pauses the others
    /// now, and the FAILED ones stay FAILED and pause when they are retried.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// `validate_only` of `topics:stop`: what a stop now would leave unmirrored, per partition
    /// (the numbers the dashboard's failover dialog shows). Absent for other calls.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unmirrored: Option<UnmirroredResult>,
    /// `topics:stop` with `require_caught_up`: the partitions whose source holds records the
    /// destination does not have. With `ok: false` (`not-caught-up`), those still behind when the
    /// timeout passed (nothing was stopped); with `ok: true`, records the source received after
    /// the promote's final check (none when the producers were stopped first). Absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub behind: Option<Vec<PartitionBehindResult>>,
}

/// What a stop of one topic now would leave unmirrored: source records committed on the source
/// and not on the destination yet (its lag).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct UnmirroredResult {
    /// Over all partitions.
    pub records: i64,
    /// The largest of the partitions' `seconds`.
    pub seconds: f64,
    pub partitions: Vec<UnmirroredPartition>,
}

/// What a stop now would leave unmirrored of one partition.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct UnmirroredPartition {
    pub partition: i32,
    pub state: PartitionStateDto,
    /// Source records (offsets) not mirrored yet; 0 for a STOPPED partition.
    pub records: i64,
    /// How long ago the partition last had no lag (about the age of the oldest of those
    /// records); 0 without lag.
    pub seconds: f64,
    /// The source's last stable offset at the last lag refresh.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_last_stable_offset: Option<i64>,
    /// The next source offset to mirror: everything before it is on the destination.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mirrored_source_offset: Option<i64>,
}

impl From<&crate::engine::StopImpact> for UnmirroredResult {
    fn from(i: &crate::engine::StopImpact) -> Self {
        UnmirroredResult {
            records: i.records,
            seconds: i.seconds,
            partitions: i
                .partitions
                .iter()
                .map(|p| UnmirroredPartition {
                    partition: p.partition,
                    state: p.state.into(),
                    records: p.records,
                    seconds: p.seconds,
                    source_last_stable_offset: p.source_last_stable_offset,
                    mirrored_source_offset: p.mirrored_source_offset,
                })
                .collect(),
        }
    }
}

/// A partition whose source holds records the destination does not have (a promote).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct PartitionBehindResult {
    pub partition: i32,
    pub state: PartitionStateDto,
    /// Source records (offsets) not on the destination; absent when the source did not answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lag_records: Option<i64>,
    /// The source's last stable offset, read for the check; absent when the source did not answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_last_stable_offset: Option<i64>,
    /// The next source offset the destination is missing; absent when nothing was mirrored.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mirrored_source_offset: Option<i64>,
}

impl From<&crate::engine::PartitionBehind> for PartitionBehindResult {
    fn from(b: &crate::engine::PartitionBehind) -> Self {
        PartitionBehindResult {
            partition: b.partition,
            state: b.state.into(),
            lag_records: b.lag_records,
            source_last_stable_offset: b.source_last_stable_offset,
            mirrored_source_offset: b.mirrored_source_offset,
        }
    }
}

/// The preview of an incremental failback of one topic.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct FailbackResult {
    /// The mirror on the source cluster that copied this topic from here and was failed over;
    /// its stop points and offset maps are adopted (nothing here is deleted).
    pub from_mirror: String,
    /// Records the failback copies over all partitions.
    pub records_to_copy: i64,
    pub partitions: Vec<FailbackPartitionResult>,
}

/// What an incremental failback copies from one partition of the source.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct FailbackPartitionResult {
    pub partition: i32,
    /// First source offset copied (the other side's stop offset: everything before it is here).
    pub from_offset: i64,
    /// The source's last stable offset now (exclusive).
    pub to_offset: i64,
    /// Records in that range (`read_committed`: transaction markers and aborted records are not
    /// copied).
    pub records: i64,
}

impl From<&crate::domain::lineage::FailbackPreview> for FailbackResult {
    fn from(f: &crate::domain::lineage::FailbackPreview) -> Self {
        FailbackResult {
            from_mirror: f.from_mirror.clone(),
            records_to_copy: f.records(),
            partitions: f
                .partitions
                .iter()
                .map(|p| FailbackPartitionResult {
                    partition: p.partition,
                    from_offset: p.from_offset,
                    to_offset: p.to_offset,
                    records: p.records,
                })
                .collect(),
        }
    }
}

impl From<&TopicOutcome> for TopicResult {
    fn from(o: &TopicOutcome) -> Self {
        TopicResult {
            topic: o.topic.clone(),
            ok: o.ok,
            error: o.error.as_ref().map(TopicProblem::from),
            quarantined: None,
            failback: None,
            note: None,
            unmirrored: None,
            behind: None,
        }
    }
}

/// What a quarantine copied (or would copy) from one partition of the destination topic.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct QuarantineResult {
    pub partition: i32,
    /// Divergent records copied by this call (`validate_only`: that it would copy).
    pub records: i64,
    /// Divergent records already in the quarantine topic (copied by an earlier, interrupted
    /// attempt; never copied twice).
    pub already_quarantined: i64,
    /// First and last divergent offset (inclusive); absent when nothing diverged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_offset: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_offset: Option<i64>,
}

impl From<&crate::domain::quarantine::QuarantinedPartition> for QuarantineResult {
    fn from(q: &crate::domain::quarantine::QuarantinedPartition) -> Self {
        QuarantineResult {
            partition: q.partition,
            records: q.records,
            already_quarantined: q.already_quarantined,
            first_offset: q.offsets.map(|(a, _)| a),
            last_offset: q.offsets.map(|(_, b)| b),
        }
    }
}

// ----- path parameters ----------------------------------------------------------------------

/// `{mirror}` in a path.
#[derive(Debug, Clone, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct MirrorPath {
    /// Mirror name (`[a-zA-Z0-9._-]{1,249}`, not `.` or `..`).
    #[param(pattern = r"^[a-zA-Z0-9._-]{1,249}$", example = "eu-to-us")]
    pub mirror: String,
}

/// `{mirror}` and `{topic}` in a path.
#[derive(Debug, Clone, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct TopicPath {
    /// Mirror name (`[a-zA-Z0-9._-]{1,249}`, not `.` or `..`).
    #[param(pattern = r"^[a-zA-Z0-9._-]{1,249}$", example = "eu-to-us")]
    pub mirror: String,
    /// Topic name (Kafka's rules: `[a-zA-Z0-9._-]{1,249}`, not `.` or `..`).
    #[param(pattern = r"^[a-zA-Z0-9._-]{1,249}$", example = "orders")]
    pub topic: String,
}

// ----- cluster ------------------------------------------------------------------------------

/// A broker of the destination cluster.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Broker {
    pub id: i32,
    pub host: String,
    pub port: i32,
}

/// The destination cluster kmirror is attached to.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ClusterResponse {
    /// The destination cluster's ID (empty until known).
    pub cluster_id: String,
    /// The destination cluster's brokers (empty until the engine reports them).
    pub brokers: Vec<Broker>,
    /// The kmirror version serving this request.
    pub kmirror_version: String,
    pub mirror_count: usize,
    pub uptime_seconds: u64,
    pub taken_at: String,
    pub snapshot_age_ms: u64,
}

// ----- instances ----------------------------------------------------------------------------

/// How the slots (partitions of the state topic) are owned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ClusterMode {
    /// Shared by every instance with the same cluster name through a consumer group.
    Group,
    /// This instance owns every slot.
    Standalone,
}

impl ClusterMode {
    fn of(mode: &str) -> Self {
        if mode == "group" { Self::Group } else { Self::Standalone }
    }
}

/// One kmirror instance of the deployment.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Instance {
    /// Its `--instance-id`.
    #[schema(example = "kmirror-0")]
    pub id: String,
    /// Where its API and dashboard are reachable (`--advertised-url`), when it said.
    #[schema(example = "http://kmirror-0.kmirror:8080")]
    pub advertised_url: Option<String>,
    /// The kmirror version it runs.
    pub version: String,
    /// The slots it owns, ascending (another instance's as of its last heartbeat).
    pub slots: Vec<i32>,
    /// Mirrored partitions in those slots.
    pub partitions: u64,
    /// When it last wrote its heartbeat to the state topic (for the answering instance: when
    /// the snapshot was taken).
    pub last_heartbeat: String,
    /// Milliseconds from its last heartbeat until this answer.
    pub heartbeat_age_ms: u64,
    /// When it started.
    pub started_at: String,
    /// Whether this is the instance answering the request.
    pub this: bool,
}

impl Instance {
    pub fn new(i: &InstanceSnapshot, now: Timestamp) -> Self {
        Instance {
            id: i.id.clone(),
            advertised_url: i.advertised_url.clone(),
            version: i.version.clone(),
            slots: i.slots.clone(),
            partitions: i.partitions,
            last_heartbeat: ts(i.last_heartbeat),
            heartbeat_age_ms: u64::try_from(i.last_heartbeat.millis_until(now)).unwrap_or(0),
            started_at: ts(i.started_at),
            this: i.this,
        }
    }
}

/// The deployment as the answering instance sees it: every instance with the same cluster name
/// (itself, and the others by their heartbeats in the state topic) and the slots each owns.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct InstancesResponse {
    /// The deployment's `--cluster-name`.
    pub cluster_name: String,
    pub mode: ClusterMode,
    /// The answering instance's id.
    pub this_instance: String,
    /// How many slots (state-topic partitions) there are.
    pub slots: i32,
    /// Slots no known instance owns (during a rebalance, or while an owner's heartbeat is late).
    pub unowned_slots: Vec<i32>,
    /// Rebalances of the slot group the answering instance saw since it started.
    pub rebalances: u64,
    /// Every instance known, by id.
    pub instances: Vec<Instance>,
    pub taken_at: String,
    pub snapshot_age_ms: u64,
}

impl InstancesResponse {
    pub fn new(c: &ClusterSnapshot, now: Timestamp, taken_at: String, snapshot_age_ms: u64) -> Self {
        let mut instances: Vec<Instance> = c.instances.iter().map(|i| Instance::new(i, now)).collect();
        instances.sort_by(|a, b| a.id.cmp(&b.id));
        InstancesResponse {
            cluster_name: c.cluster_name.clone(),
            mode: ClusterMode::of(&c.mode),
            this_instance: c.this_instance.clone(),
            slots: c.slots,
            unowned_slots: (0..c.slots).filter(|s| c.owner_of(*s).is_none()).collect(),
            rebalances: c.rebalances,
            instances,
            taken_at,
            snapshot_age_ms,
        }
    }
}

// ----- mirrors ------------------------------------------------------------------------------

/// Where a mirror reads from. In responses, secret properties (`*password*`, `*secret*`,
/// `sasl.jaas.config`, `ssl.key*`) show as `[redacted]`; sending `[redacted]` back in an update
/// keeps the stored value.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SourceBody {
    #[schema(example = "source-kafka-1:9092,source-kafka-2:9092")]
    pub bootstrap_servers: String,
    /// librdkafka client properties (security.protocol, sasl.*, ssl.*). Secrets are write-only.
    #[serde(default)]
    pub properties: BTreeMap<String, String>,
}

/// What metadata a mirror syncs besides records (all kinds and all groups by default).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(default, deny_unknown_fields)]
pub struct SyncSettings {
    /// Copy allowed topic configs from source to mirror topics.
    pub topic_configs: bool,
    /// Translate and copy committed consumer-group offsets.
    pub group_offsets: bool,
    /// Copy ACLs of mirrored topics and synced groups.
    pub acls: bool,
    /// Groups to sync: regexes matched against whole group names.
    pub group_include: Vec<String>,
    /// Groups never synced (wins over `group_include`).
    pub group_exclude: Vec<String>,
}

impl Default for SyncSettings {
    fn default() -> Self {
        SyncSpec::default().into()
    }
}

impl From<SyncSpec> for SyncSettings {
    fn from(s: SyncSpec) -> Self {
        SyncSettings {
            topic_configs: s.topic_configs,
            group_offsets: s.group_offsets,
            acls: s.acls,
            group_include: s.group_include,
            group_exclude: s.group_exclude,
        }
    }
}

impl From<SyncSettings> for SyncSpec {
    fn from(s: SyncSettings) -> Self {
        SyncSpec {
            topic_configs: s.topic_configs,
            group_offsets: s.group_offsets,
            acls: s.acls,
            group_include: s.group_include,
            group_exclude: s.group_exclude,
        }
    }
}

/// A new mirror.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MirrorCreateRequest {
    /// `[a-zA-Z0-9._-]{1,249}`, not `.` or `..`.
    #[schema(example = "eu-to-us", pattern = r"^[a-zA-Z0-9._-]{1,249}$")]
    pub name: String,
    pub source: SourceBody,
    /// The source cluster ID the mirror must see; recorded from the source on creation if absent.
    #[serde(default)]
    pub expected_source_cluster_id: Option<String>,
    #[serde(default)]
    pub sync: Option<SyncSettings>,
    /// Caps the record bytes each kmirror instance copies for this mirror per second (KIP-1279's
    /// `mirror.replication.throttled.rate`, applied per instance as the KIP applies it per
    /// broker). Absent or 0: no throttle; otherwise at least 1024.
    #[serde(default)]
    #[schema(example = 52_428_800)]
    pub replication_throttle_bytes_per_sec: Option<u64>,
    /// Topic policy (KIP-1279's `topics.include`): source topics whose whole name matches one of
    /// these regexes are mirrored, also those created later (discovery, at every metadata
    /// refresh). Absent or empty: only topics someone starts.
    #[serde(default)]
    #[schema(example = json!([r"orders\..*"]))]
    pub topic_include: Option<Vec<String>>,
    /// Exclusions (`topics.exclude`, win over `topic_include`): never started, and a mirrored
    /// topic that comes to match is stopped. Absent: `["__.*", ".*\\.kmirror-diverged"]`.
    #[serde(default)]
    pub topic_exclude: Option<Vec<String>>,
    /// Which calls need a second person's approval (none by default).
    #[serde(default)]
    pub approval: Option<super::approvals::ApprovalPolicyDto>,
}

/// A change to a mirror; absent fields are left alone. `source` replaces the whole source
/// (properties included; `[redacted]` values keep the stored secret).
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MirrorUpdateRequest {
    #[serde(default)]
    pub source: Option<SourceBody>,
    #[serde(default)]
    pub expected_source_cluster_id: Option<String>,
    #[serde(default)]
    pub sync: Option<SyncSettings>,
    /// A new replication throttle in bytes per second per instance (at least 1024), effective at
    /// once without restarting anything; 0 removes the throttle.
    #[serde(default)]
    pub replication_throttle_bytes_per_sec: Option<u64>,
    /// A new approval policy, replacing the whole policy (`{"required_for": []}` needs approval
    /// for nothing).
    #[serde(default)]
    pub approval: Option<super::approvals::ApprovalPolicyDto>,
    /// A new include list (replaces the whole list). Topics it matches are started at the
    /// mirror's next discovery run, which the change triggers at once.
    #[serde(default)]
    pub topic_include: Option<Vec<String>>,
    /// A new exclude list (replaces the whole list). Mirrored topics it matches are stopped
    /// (failed over) at the next discovery run.
    #[serde(default)]
    pub topic_exclude: Option<Vec<String>>,
    /// Check the change and answer what it would do (`policy_preview`: the topics the new
    /// policy would start and stop now), without changing anything.
    #[serde(default)]
    pub validate_only: bool,
}

/// What a topic policy would do now (a mirror change with `validate_only`).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct PolicyPreview {
    /// The include list as it would be.
    pub topic_include: Vec<String>,
    /// The exclude list as it would be.
    pub topic_exclude: Vec<String>,
    /// Source topics discovery would start.
    pub would_start: Vec<String>,
    /// Mirrored topics discovery would stop (fail over), with the exclusion each matches.
    pub would_stop: Vec<PolicyStop>,
    /// Source topics the include list matches (exclusions aside).
    pub matched: usize,
    /// Matched source topics another mirror of this destination holds.
    pub taken: Vec<TopicOfMirror>,
}

/// A topic a policy stops, and why.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct PolicyStop {
    pub topic: String,
    /// The `topic_exclude` pattern it matches.
    pub pattern: String,
}

/// A topic and the mirror that holds it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TopicOfMirror {
    pub topic: String,
    pub mirror: String,
}

impl PolicyPreview {
    pub fn new(include: Vec<String>, exclude: Vec<String>, plan: &crate::domain::topic_policy::Plan) -> Self {
        PolicyPreview {
            topic_include: include,
            topic_exclude: exclude,
            would_start: plan.start.clone(),
            would_stop: plan
                .stop
                .iter()
                .map(|(topic, pattern)| PolicyStop { topic: topic.clone(), pattern: pattern.clone() })
                .collect(),
            matched: plan.matched.len(),
            taken: plan
                .taken
                .iter()
                .map(|(topic, mirror)| TopicOfMirror { topic: topic.clone(), mirror: mirror.clone() })
                .collect(),
        }
    }
}

/// Result of the source cluster-ID check.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ClusterIdCheck {
    /// Not checked yet.
    Unknown,
    /// The source answered with the expected ID.
    Ok,
    /// The source answered with another ID: the mirror is halted.
    Mismatch,
    /// The source did not answer (retryable; not a mismatch).
    Unreachable,
    /// The source refused the mirror's credentials (authentication failed); retried.
    AuthenticationFailed,
    /// The TLS handshake with the source failed; retried.
    TlsFailed,
}

impl From<ClusterIdStatus> for ClusterIdCheck {
    fn from(s: ClusterIdStatus) -> Self {
        match s {
            ClusterIdStatus::Unknown => Self::Unknown,
            ClusterIdStatus::Ok => Self::Ok,
            ClusterIdStatus::Mismatch => Self::Mismatch,
            ClusterIdStatus::Unreachable => Self::Unreachable,
            ClusterIdStatus::AuthenticationFailed => Self::AuthenticationFailed,
            ClusterIdStatus::TlsFailed => Self::TlsFailed,
        }
    }
}

/// A mirror as listed.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Mirror {
    pub name: String,
    /// The source connection; secret properties are redacted.
    pub source: SourceBody,
    pub expected_source_cluster_id: Option<String>,
    pub observed_source_cluster_id: Option<String>,
    pub source_cluster_id_status: ClusterIdCheck,
    /// The data path's state in words ("running", "fenced: ...", "retrying: ...").
    pub data_path: String,
    pub created_at: String,
    pub topic_count: usize,
    pub partition_count: usize,
    /// Partition counts by state.
    pub state_counts: BTreeMap<String, usize>,
    /// Total lag of every partition, in records.
    pub lag_records: i64,
    /// The largest lag of any partition, in seconds.
    pub lag_seconds: f64,
    /// The replication throttle, in record bytes per second per instance; absent: none.
    pub replication_throttle_bytes_per_sec: Option<u64>,
    /// Seconds this instance's data paths of the mirror waited for the throttle since it started
    /// (summed over the data paths).
    pub throttled_seconds: f64,
    /// What the mirror syncs besides records (as given on create or the last update).
    pub sync: SyncSettings,
    /// Topic policy: source topics discovery mirrors (whole-name regexes; empty: only topics
    /// someone starts).
    pub topic_include: Vec<String>,
    /// Topic policy: exclusions (win over `topic_include`).
    pub topic_exclude: Vec<String>,
    /// Which calls need a second person's approval: such a call is answered with 202 and waits
    /// for another identity with the operator role (`/api/v1/approvals`).
    pub approval: super::approvals::ApprovalPolicyDto,
}

impl From<&MirrorSnapshot> for Mirror {
    fn from(m: &MirrorSnapshot) -> Self {
        let partitions = || m.topics.iter().flat_map(|t| &t.partitions);
        Mirror {
            name: m.name.clone(),
            // The snapshot's properties are already redacted; redact again so this mapping stays
            // safe whatever the engine does.
            source: SourceBody {
                bootstrap_servers: m.source_bootstrap_servers.clone(),
                properties: crate::domain::secrets::redact(&m.source_properties),
            },
            expected_source_cluster_id: m.expected_source_cluster_id.clone(),
            observed_source_cluster_id: m.observed_source_cluster_id.clone(),
            source_cluster_id_status: m.cluster_id_status.into(),
            data_path: m.data_path.to_string(),
            created_at: ts(m.created_at),
            topic_count: m.topics.len(),
            partition_count: partitions().count(),
            state_counts: state_counts(partitions()),
            lag_records: m.topics.iter().map(|t| t.lag_records).sum(),
            lag_seconds: finite(m.topics.iter().map(|t| t.lag_seconds).fold(0.0, f64::max)),
            replication_throttle_bytes_per_sec: m.replication_throttle_bytes_per_sec,
            throttled_seconds: finite(m.throttled_seconds),
            sync: m.sync_spec.clone().into(),
            topic_include: m.topic_include.clone(),
            topic_exclude: m.topic_exclude.clone(),
            approval: m.approval.clone().into(),
        }
    }
}

/// One mirror.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct MirrorResponse {
    #[serde(flatten)]
    pub mirror: Mirror,
    pub taken_at: String,
    pub snapshot_age_ms: u64,
    /// A change with `validate_only`: nothing was changed (the mirror above is as it is), and
    /// this is what the topic policy as changed would start and stop now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy_preview: Option<PolicyPreview>,
}

/// Every mirror.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct MirrorsResponse {
    pub mirrors: Vec<Mirror>,
    pub taken_at: String,
    pub snapshot_age_ms: u64,
}

// ----- health -------------------------------------------------------------------------------

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

// ----- topics and partitions ----------------------------------------------------------------

/// A mirrored topic, rolled up from its partitions.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Topic {
    pub name: String,
    /// Rolled-up state: any FAILED → FAILED, else the least advanced partition state.
    pub state: PartitionStateDto,
    pub partition_count: usize,
    /// Total lag, in records.
    pub lag_records: i64,
    /// The largest partition lag, in seconds.
    pub lag_seconds: f64,
    pub source_topic_id: String,
    pub destination_topic_id: String,
    /// Partition counts by state.
    pub state_counts: BTreeMap<String, usize>,
}

impl From<&TopicSnapshot> for Topic {
    fn from(t: &TopicSnapshot) -> Self {
        Topic {
            name: t.name.clone(),
            state: t.state.into(),
            partition_count: t.partitions.len(),
            lag_records: t.lag_records,
            lag_seconds: finite(t.lag_seconds),
            source_topic_id: t.source_topic_id.clone(),
            destination_topic_id: t.destination_topic_id.clone(),
            state_counts: state_counts(t.partitions.iter()),
        }
    }
}

/// A mirror's topics.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TopicsResponse {
    pub mirror: String,
    pub topics: Vec<Topic>,
    pub taken_at: String,
    pub snapshot_age_ms: u64,
}

/// A partition's error as shown to operators.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct PartitionError {
    pub code: String,
    pub message: String,
    pub retryable: bool,
}

/// One mirrored partition.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Partition {
    pub topic: String,
    pub partition: i32,
    pub state: PartitionStateDto,
    pub state_since: String,
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
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<PartitionError>,
    pub retry_count: u32,
    /// A FAILED partition's next automatic retry; absent when there is none (not FAILED, a
    /// non-retryable error, or the automatic retries are used up: `topics:recover` retries it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_retry_at: Option<String>,
    /// Records mirrored by this process (resets on restart).
    pub records_mirrored: u64,
    /// Bytes mirrored by this process (resets on restart).
    pub bytes_mirrored: u64,
    /// Where mirroring stopped (after a failover).
    pub destination_stop_offset: Option<i64>,
    /// STOPPED only: source offsets the old source received after the failover, by record time
    /// and past what was mirrored (transaction markers included). Above 0 something still writes
    /// to the old source (split brain): those records are on no copy, and a failback refuses them
    /// as divergent. Absent until the source has been read since the stop (or when it is down).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_writes_after_stop: Option<i64>,
    /// The slot (state-topic partition) the partition belongs to: whichever instance owns the
    /// slot mirrors it.
    pub slot: i32,
    /// The instance that owns the slot (`GET /api/v1/instances`); absent while no instance is
    /// known to own it.
    pub owner: Option<String>,
}

impl From<&PartitionSnapshot> for Partition {
    fn from(p: &PartitionSnapshot) -> Self {
        Partition {
            topic: p.topic.clone(),
            partition: p.partition,
            state: p.state.into(),
            state_since: ts(p.state_since),
            state_epoch: p.state_epoch,
            source_log_start_offset: p.source_log_start_offset,
            source_last_stable_offset: p.source_last_stable_offset,
            source_high_watermark: p.source_high_watermark,
            mirrored_source_offset: p.mirrored_source_offset,
            destination_high_watermark: p.destination_high_watermark,
            lag_records: p.lag_records,
            lag_seconds: finite(p.lag_seconds),
            last_mirrored_epoch: p.last_mirrored_epoch,
            error: p.error.as_ref().map(|e| PartitionError {
                code: e.code.clone(),
                message: e.message.clone(),
                retryable: e.retryable,
            }),
            retry_count: p.retry_count,
            next_retry_at: p.next_retry_at.map(ts),
            records_mirrored: p.records_mirrored,
            bytes_mirrored: p.bytes_mirrored,
            destination_stop_offset: p.destination_stop_offset,
            source_writes_after_stop: p.source_writes_after_stop,
            slot: p.slot,
            owner: p.owner.clone(),
        }
    }
}

/// A topic with its partitions.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TopicResponse {
    pub mirror: String,
    #[serde(flatten)]
    pub topic: Topic,
    pub partitions: Vec<Partition>,
    pub taken_at: String,
    pub snapshot_age_ms: u64,
}

/// One page of a mirror's partitions.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct PartitionsPage {
    pub mirror: String,
    pub items: Vec<Partition>,
    /// How many partitions match the filters (all pages).
    pub total: usize,
    /// Pass as `page_token` (with the same filters and sort) for the next page; absent on the
    /// last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_page_token: Option<String>,
    pub taken_at: String,
    pub snapshot_age_ms: u64,
}

// ----- lifecycle ----------------------------------------------------------------------------

/// How a start treats destination records past the last stop point.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum TruncationMode {
    /// Refuse (the partition fails with DESTINATION_DIVERGED) when the destination has local writes.
    #[default]
    None,
    /// Delete the destination partition's records and mirror the source again from its log start.
    Resync,
}

/// `topics:start`: exactly one of `topics` and `pattern`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StartRequest {
    /// Source topic names: each once, at most 1,000 (`too-many-topics` otherwise).
    #[serde(default)]
    #[schema(max_items = 1000)]
    pub topics: Option<Vec<String>>,
    /// A regex matched against whole topic names (source topics and the mirror's topics), matching
    /// any number of topics.
    #[serde(default)]
    pub pattern: Option<String>,
    /// Only check whether the call would be accepted; change nothing.
    #[serde(default)]
    pub validate_only: bool,
    #[serde(default)]
    pub truncation: TruncationMode,
    /// With `truncation: resync`, first copy the divergent records (those after the last
    /// mirrored offset; every record when the topic has no lineage) to `<topic>.kmirror-diverged`
    /// with headers `kmirror.diverged.topic`, `.topic-id`, `.partition` and `.offset`. A copy that
    /// fails deletes nothing; a quarantine topic with foreign records is refused
    /// (`quarantine-conflict`).
    #[serde(default)]
    pub quarantine: bool,
    /// Why: required when the mirror's approval policy covers this call (a resync, a failback),
    /// which then waits for a second person (HTTP 202); kept in the audit trail.
    #[serde(default)]
    pub reason: Option<String>,
    /// Admin only: run a call the approval policy covers at once, without a second person
    /// (with a `reason`); the audit trail marks it.
    #[serde(default)]
    pub break_glass: bool,
}

/// `topics:pause`, `topics:resume`, `topics:recover`: exactly one of `topics`, `pattern` and
/// `all: true`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LifecycleRequest {
    /// Topic names of the mirror: each once, at most 1,000 (`too-many-topics` otherwise).
    #[serde(default)]
    #[schema(max_items = 1000)]
    pub topics: Option<Vec<String>>,
    /// A regex matched against whole topic names of the mirror, matching any number of topics.
    #[serde(default)]
    pub pattern: Option<String>,
    /// Every topic of the mirror, however many.
    #[serde(default)]
    pub all: bool,
    /// Only check whether the call would be accepted; change nothing.
    #[serde(default)]
    pub validate_only: bool,
    /// Why: required when the mirror's approval policy covers this call (`topics:stop`), which
    /// then waits for a second person (HTTP 202); kept in the audit trail.
    #[serde(default)]
    pub reason: Option<String>,
    /// Admin only: run a call the approval policy covers at once, without a second person
    /// (with a `reason`); the audit trail marks it.
    #[serde(default)]
    pub break_glass: bool,
}

/// `topics:stop`: exactly one of `topics`, `pattern` and `all: true`; with `require_caught_up`, a
/// promote (a planned switch-over that loses nothing).
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StopRequest {
    /// Topic names of the mirror: each once, at most 1,000 (`too-many-topics` otherwise).
    #[serde(default)]
    #[schema(max_items = 1000)]
    pub topics: Option<Vec<String>>,
    /// A regex matched against whole topic names of the mirror, matching any number of topics.
    #[serde(default)]
    pub pattern: Option<String>,
    /// Every topic of the mirror, however many.
    #[serde(default)]
    pub all: bool,
    /// Only check whether the call would be accepted; change nothing. Each topic's result then
    /// says what a stop now would leave unmirrored (`unmirrored`).
    #[serde(default)]
    pub validate_only: bool,
    /// Promote: stop only once every selected partition has caught up with its source (lag 0
    /// against the source's last stable offset, read fresh), waiting up to `timeout_ms`. If the
    /// timeout passes first, nothing is stopped: every topic answers `not-caught-up` and `behind`
    /// lists each partition still behind with its lag. Stop the producers on the source first.
    #[serde(default)]
    pub require_caught_up: bool,
    /// With `require_caught_up`: how long to wait for the partitions to catch up, 0 to 600,000
    /// (default 60,000; 0 checks once). The call answers when they caught up and stopped, or when
    /// the timeout passes.
    #[serde(default)]
    #[schema(minimum = 0, maximum = 600000)]
    pub timeout_ms: Option<u64>,
    /// Also add the topics to the mirror's `topic_exclude` (the pattern, or each name as a literal
    /// pattern), so discovery never starts them again. Not with `require_caught_up`.
    #[serde(default)]
    pub exclude: bool,
    /// Why: required when the mirror's approval policy covers `stop`, which then waits for a
    /// second person (HTTP 202) and runs as asked (a promote too) once approved; kept in the
    /// audit trail.
    #[serde(default)]
    pub reason: Option<String>,
    /// Admin only: run a stop the approval policy covers at once, without a second person (with
    /// a `reason`); the audit trail marks it.
    #[serde(default)]
    pub break_glass: bool,
}

/// Per-topic outcomes of a lifecycle call. Partial success is explicit: HTTP 200 with `ok:
/// false` and an `error` for the topics that failed. Repeating a call is harmless.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct LifecycleResponse {
    /// Poll `/api/v1/operations/{operation_id}` for per-partition progress (not recorded for
    /// `validate_only` calls).
    pub operation_id: String,
    pub validate_only: bool,
    pub results: Vec<TopicResult>,
    /// Whether the mirror's approval policy covers this call: sent without `validate_only` (and
    /// without `break_glass`), it waits for a second person's approval (HTTP 202).
    pub approval_required: bool,
    /// The break-glass entry, when an admin ran the call without a second person.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval: Option<super::approvals::Approval>,
    /// The pattern the call added to the mirror's topic policy: a start with a `pattern` adds it
    /// to `topic_include` (topics created later that match it are mirrored too), a stop with
    /// `exclude` to `topic_exclude`. Absent when nothing was added.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub saved_pattern: Option<SavedPatternBody>,
}

/// A pattern saved in a mirror's topic policy.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SavedPatternBody {
    /// `topic_include` or `topic_exclude`.
    pub list: String,
    pub pattern: String,
}

// ----- operations and audit -----------------------------------------------------------------

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
        Operation::page(o, 0, super::pagination::DEFAULT_PAGE_SIZE)
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

// ----- probes -------------------------------------------------------------------------------

/// `/healthz`: the process is up.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Liveness {
    /// Always `ok`.
    pub status: String,
    pub uptime_seconds: u64,
}

/// `/readyz`: the engine publishes fresh snapshots.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Readiness {
    pub ready: bool,
    pub snapshot_age_ms: u64,
    pub detail: String,
}

// ----- lineage ----------------------------------------------------------------------------------

/// `GET /api/v1/mirrors/{mirror}/topics/{topic}/lineage`: what the mirror's source cluster says
/// about the topic's way back.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct LineageResponse {
    pub mirror: String,
    pub topic: String,
    /// Absent when no mirror on the source cluster has the topic (a start is an ordinary one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lineage: Option<Lineage>,
}

/// The mirror on the source cluster that copied the topic from this cluster, per partition.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Lineage {
    /// The mirror's name in the source cluster's state.
    pub source_mirror: String,
    /// True when a start of the topic here would adopt it (an incremental failback).
    pub usable: bool,
    /// Why it would not: the refusal a start would answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
    pub partitions: Vec<LineagePartitionDto>,
}

/// One partition of a lineage.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct LineagePartitionDto {
    pub partition: i32,
    /// Its state in the source cluster's mirror (STOPPED once failed over).
    pub state: PartitionStateDto,
    /// The offset here of the last record that mirror copied.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_mirrored_offset: Option<i64>,
    /// The offset on the source cluster where that mirror's writes end (its destination stop
    /// offset): a failback copies from there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_stop_offset: Option<i64>,
    /// The last mirrored leader epoch (LME) recorded at the stop.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_mirror_epoch: Option<i32>,
    /// Runs of that mirror's offset map (about one per transaction).
    pub offset_map_runs: usize,
}

impl From<&crate::engine::TopicLineage> for Lineage {
    fn from(l: &crate::engine::TopicLineage) -> Self {
        Lineage {
            source_mirror: l.source_mirror.clone(),
            usable: l.problem.is_none(),
            problem: l.problem.clone(),
            partitions: l
                .partitions
                .iter()
                .map(|p| LineagePartitionDto {
                    partition: p.partition,
                    state: p.state.into(),
                    last_mirrored_offset: p.last_mirrored_offset,
                    source_stop_offset: p.source_stop_offset,
                    last_mirror_epoch: p.last_mirror_epoch,
                    offset_map_runs: p.offset_map_runs,
                })
                .collect(),
        }
    }
}
