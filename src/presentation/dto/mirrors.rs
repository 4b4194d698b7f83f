//! Mirrors: create and update bodies, a mirror as listed, the topic policy preview.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::engine::{ClusterIdStatus, MirrorSnapshot, SyncSpec};

use super::{finite, state_counts, ts};

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
