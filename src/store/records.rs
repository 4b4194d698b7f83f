//! The `__mirror_state` record format: versioned, canonical-JSON keys and values.
//!
//! # Canonical form
//!
//! Every key and value is one JSON object, written by [`serde_json`] without whitespace, whose
//! first two members are `"type"` (the [`RecordKind`] name) and `"version"`, followed by the
//! fields of the matching struct below **in declaration order**. Maps are `BTreeMap`s, so their
//! members are sorted; absent optional fields are written as `null`, never left out; numbers are
//! integers. So the same record always encodes to the same bytes, which makes keys usable for
//! compaction and values comparable byte for byte. Decoding accepts any member order and ignores
//! members it does not know.
//!
//! # Versions
//!
//! The structs here are the persisted format, kept apart from the domain types on purpose: a
//! domain refactor cannot change what is on disk without a visible edit to this file. Within a
//! version, only optional fields (`#[serde(default)]`) may be added, at the end; readers ignore
//! members they do not know. Any other change is a new version, and a reader that meets a version
//! newer than it knows reports [`DecodeError::UnknownVersion`] and skips the record, never crashes.
//!
//! # Keys
//!
//! A key holds the record's type, key version and identifying fields; a value repeats the
//! identifying fields (checked against the key on decoding, [`DecodeError::KeyValueMismatch`]),
//! except LastMirrorEpochs, whose value follows the seed's schema. A null value (tombstone)
//! deletes the keyed entity.
//!
//! # Instance heartbeats
//!
//! Several kmirror instances share one destination cluster (DESIGN.md section 10). Each writes an
//! [`InstanceValue`] every few seconds, keyed by its instance ID ([`InstanceKey`]): its cluster
//! name, version, the slots (state partitions) it owns and when it last beat. Like a mirror-level
//! record, it goes to `mirror_partition(instance ID, N)` ([`StateRecord::mirror`] returns the
//! instance ID for this kind); a tombstone (an orderly shutdown) removes the instance.
//!
//! # Where positions and offset maps live
//!
//! In `__mirror_state` itself, not in a sibling topic: every data transaction writes, for each
//! partition it touched, one [`OffsetRunsValue`] with the batch's offset-map runs and the new
//! committed position. Its key carries the batch's first destination offset, so compaction keeps
//! every batch (the whole map survives compaction), and it goes to the same state partition as the
//! partition's [`PartitionStateValue`] ([`super::state_partition`]), so the two kinds are read back
//! in the order they were written. A MirrorPartitionState record is written only when the state
//! machine moves, so data progress does not rewrite it (nor race its state epoch).

use std::collections::BTreeMap;
use std::fmt;
use std::num::NonZeroU32;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::partitioning::{mirror_partition, state_partition};

/// The most partitions of one topic a record may name: a MirrorTopic record's `partition_count`,
/// and the partition index of every partition-level record and LastMirrorEpochs entry, must be
/// below it. Loading creates a partition for each of `0..partition_count`, so a hostile count
/// (2^31) would drive that loop; a record above the cap is reported and skipped. A start refuses
/// a source topic with more partitions, so kmirror never writes such a record.
pub const MAX_PARTITION_COUNT: i32 = 100_000;

/// The most elements of any one list or map in a record (offset-map runs, LastMirrorEpochs
/// topics, operation topics and results, client properties, ACLs, group patterns). Far above what
/// kmirror writes (a state record is at most the state topic's maximum message size, 1 MiB by
/// default, and an element takes at least 3 bytes of it); a record above it is reported and
/// skipped rather than kept in memory and acted on.
pub const MAX_RECORD_LIST_LEN: usize = 1_000_000;

/// The kinds of `__mirror_state` records, named in the `"type"` member of keys and values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RecordKind {
    /// A mirror: its source cluster and settings ([`MirrorValue`]).
    Mirror,
    /// A topic of a mirror and its desired state ([`MirrorTopicValue`]).
    MirrorTopic,
    /// The state-machine record of one mirror partition ([`PartitionStateValue`]).
    MirrorPartitionState,
    /// The seed's LastMirrorEpochs: the LME of every partition of a mirror
    /// ([`LastMirrorEpochsValue`]).
    LastMirrorEpochs,
    /// An audited lifecycle call ([`OperationValue`]).
    Operation,
    /// The offset-map runs and committed position of one data transaction for one partition
    /// ([`OffsetRunsValue`]).
    OffsetRuns,
    /// The heartbeat of one kmirror instance sharing the cluster ([`InstanceValue`]).
    Instance,
    /// A disaster-recovery drill of a mirror: its progress and, once finished, its report
    /// ([`DrillValue`]).
    Drill,
}

impl RecordKind {
    /// Every kind.
    pub const ALL: [Self; 8] = [
        Self::Mirror,
        Self::MirrorTopic,
        Self::MirrorPartitionState,
        Self::LastMirrorEpochs,
        Self::Operation,
        Self::OffsetRuns,
        Self::Instance,
        Self::Drill,
    ];

    /// The `"type"` name (stable; never renamed).
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Mirror => "Mirror",
            Self::MirrorTopic => "MirrorTopic",
            Self::MirrorPartitionState => "MirrorPartitionState",
            Self::LastMirrorEpochs => "LastMirrorEpochs",
            Self::Operation => "Operation",
            Self::OffsetRuns => "OffsetRuns",
            Self::Instance => "Instance",
            Self::Drill => "Drill",
        }
    }

    /// The kind named `name`.
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.as_str() == name)
    }

    /// The newest key version this build reads and the one it writes.
    #[must_use]
    pub const fn key_version(self) -> u32 {
        match self {
            Self::Instance => 1,
            _ => 0,
        }
    }

    /// The newest value version this build reads and the one it writes.
    #[must_use]
    pub const fn value_version(self) -> u32 {
        match self {
            Self::Instance => 1,
            _ => 0,
        }
    }
}

impl fmt::Display for RecordKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

// ---------------------------------------------------------------------------------------------
// Keys
// ---------------------------------------------------------------------------------------------

/// The key of a Mirror or LastMirrorEpochs record.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct MirrorKey {
    /// The mirror name.
    pub mirror: String,
}

/// The key of a MirrorTopic record.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct MirrorTopicKey {
    /// The mirror name.
    pub mirror: String,
    /// The topic name (the same on both clusters).
    pub topic: String,
}

/// The key of a MirrorPartitionState record, and the identity of a mirror partition.
///
/// `topic_id` is the **source** topic's ID in Kafka's base64 form: it is known before the
/// destination topic exists (the first state record is written before PREPARING creates it), and a
/// recreated source topic, a new lineage, gets new keys.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PartitionKey {
    /// The mirror name.
    pub mirror: String,
    /// The source topic ID.
    pub topic_id: String,
    /// The partition index.
    pub partition: i32,
}

impl PartitionKey {
    /// A partition key.
    #[must_use]
    pub fn new(mirror: impl Into<String>, topic_id: impl Into<String>, partition: i32) -> Self {
        Self { mirror: mirror.into(), topic_id: topic_id.into(), partition }
    }
}

/// The key of an Operation record.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct OperationKey {
    /// The mirror name.
    pub mirror: String,
    /// The operation ID.
    pub id: String,
}

/// The key of an OffsetRuns record: one per partition per data transaction.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct OffsetRunsKey {
    /// The mirror name.
    pub mirror: String,
    /// The source topic ID (as in [`PartitionKey`]).
    pub topic_id: String,
    /// The partition index.
    pub partition: i32,
    /// The destination offset of the batch's first record: unique per batch, so compaction keeps
    /// every batch.
    pub first_destination_offset: i64,
}

/// The key of an Instance record: one per kmirror instance.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct InstanceKey {
    /// The instance ID (unique within the cluster).
    pub instance: String,
}

/// The key of a Drill record: one per drill.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct DrillKey {
    /// The mirror name.
    pub mirror: String,
    /// The drill's ID (the ID of the operation it runs as).
    pub id: String,
}

impl OffsetRunsKey {
    /// The partition the batch belongs to.
    #[must_use]
    pub fn partition_key(&self) -> PartitionKey {
        PartitionKey::new(self.mirror.clone(), self.topic_id.clone(), self.partition)
    }
}

// ---------------------------------------------------------------------------------------------
// Values
// ---------------------------------------------------------------------------------------------

/// The value of a Mirror record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MirrorValue {
    /// The mirror name (as in the key).
    pub name: String,
    /// How to reach the source cluster.
    pub source: SourceClusterValue,
    /// The source cluster ID the mirror was created with; `None` until first seen.
    pub expected_source_cluster_id: Option<String>,
    /// Creation time (ms since the Unix epoch).
    pub created_at: i64,
    /// Last change (ms since the Unix epoch).
    pub updated_at: i64,
    /// Metadata sync settings (defaults when absent).
    #[serde(default)]
    pub sync: SyncSettingsValue,
    /// ACLs kmirror created on the destination for this mirror: only these are ever removed
    /// when they disappear at the source (ACLs kmirror did not create are never touched).
    #[serde(default)]
    pub created_acls: Vec<AclBindingValue>,
    /// The mirror's replication throttle in record bytes per second per instance; absent: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replication_throttle_bytes_per_sec: Option<u64>,
    /// Topic policy: source topics discovery starts (whole-name patterns). Absent in records
    /// written before the policy existed: empty (only topics someone starts).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub topic_include: Vec<String>,
    /// Topic policy: exclusions. Absent: the defaults (`domain::topic_policy::DEFAULT_EXCLUDE`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic_exclude: Option<Vec<String>>,
    /// Which calls need a second person's approval, and how long a request waits; absent: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<ApprovalPolicyValue>,
}

/// A mirror's approval policy as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalPolicyValue {
    /// The calls that need approval (`stop`, `delete`, `resync`, `failback`, `drill`), sorted; a
    /// name this version does not know is kept and ignored.
    pub required_for: Vec<String>,
    /// How long a request waits for a decision, in seconds.
    pub expires_after_seconds: u64,
}

/// An ACL binding as stored: its canonical record. The kinds are written as stable lowercase
/// names (`"topic"`, `"prefixed"`, `"describe_configs"`, `"allow"`).
///
/// Records written before this form held each kind as the Rust `Debug` text of the Kafka client's
/// enums (`"Topic"`, `"Prefixed"`, `"DescribeConfigs"`, `"Allow"`); they still load (aliases), and
/// are written back in the lowercase form. A name this version does not know loads as `Unknown`,
/// so one odd binding never makes the whole Mirror record unreadable; such a binding is skipped.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct AclBindingValue {
    pub resource_type: AclResourceTypeValue,
    pub name: String,
    pub pattern_type: AclPatternTypeValue,
    pub principal: String,
    pub host: String,
    pub operation: AclOperationValue,
    pub permission: AclPermissionValue,
}

/// The resource an ACL binding is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AclResourceTypeValue {
    #[serde(alias = "Topic")]
    Topic,
    #[serde(alias = "Group")]
    Group,
    #[serde(alias = "Cluster")]
    Cluster,
    #[serde(alias = "TransactionalId")]
    TransactionalId,
    /// A name this version does not know (never written).
    #[serde(other)]
    Unknown,
}

/// How an ACL binding's resource name matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AclPatternTypeValue {
    #[serde(alias = "Literal")]
    Literal,
    #[serde(alias = "Prefixed")]
    Prefixed,
    /// A name this version does not know (never written).
    #[serde(other)]
    Unknown,
}

/// The operation an ACL binding allows or denies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AclOperationValue {
    #[serde(alias = "All")]
    All,
    #[serde(alias = "Read")]
    Read,
    #[serde(alias = "Write")]
    Write,
    #[serde(alias = "Create")]
    Create,
    #[serde(alias = "Delete")]
    Delete,
    #[serde(alias = "Alter")]
    Alter,
    #[serde(alias = "Describe")]
    Describe,
    #[serde(alias = "ClusterAction")]
    ClusterAction,
    #[serde(alias = "DescribeConfigs")]
    DescribeConfigs,
    #[serde(alias = "AlterConfigs")]
    AlterConfigs,
    #[serde(alias = "IdempotentWrite")]
    IdempotentWrite,
    /// A name this version does not know (never written).
    #[serde(other)]
    Unknown,
}

/// Whether an ACL binding allows or denies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AclPermissionValue {
    #[serde(alias = "Allow")]
    Allow,
    #[serde(alias = "Deny")]
    Deny,
    /// A name this version does not know (never written).
    #[serde(other)]
    Unknown,
}

/// The source cluster connection of a mirror.
///
/// `properties` are librdkafka client properties. The state topic is readable by whoever may read
/// `__mirror_state`, so secrets belong outside it: a secret property's value should be a
/// reference (`${env:NAME}`, `${file:/path}`, resolved when a client is built). `Debug` redacts
/// secret values all the same (`crate::domain::secrets`, the program's one rule).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceClusterValue {
    /// `bootstrap.servers` of the source cluster.
    pub bootstrap_servers: String,
    /// Further client properties, sorted by name.
    pub properties: BTreeMap<String, String>,
}

impl fmt::Debug for SourceClusterValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let properties: BTreeMap<&str, &str> = self
            .properties
            .iter()
            .map(|(name, value)| {
                let secret = crate::domain::secrets::is_secret_property(name)
                    && crate::domain::secrets::Reference::parse(value).is_none();
                (name.as_str(), if secret { "<redacted>" } else { value.as_str() })
            })
            .collect();
        f.debug_struct("SourceClusterValue")
            .field("bootstrap_servers", &self.bootstrap_servers)
            .field("properties", &properties)
            .finish()
    }
}

/// Metadata sync settings of a mirror (a placeholder that will grow: fields are added as
/// optional members, so older records keep decoding).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SyncSettingsValue {
    /// Sync topic configs.
    pub topic_configs: bool,
    /// Sync consumer-group offsets.
    pub consumer_group_offsets: bool,
    /// Sync ACLs.
    pub acls: bool,
    /// The metadata refresh interval in milliseconds.
    pub refresh_interval_ms: i64,
    /// Consumer groups whose offsets are synced: regexes matched against whole group names.
    pub group_include: Vec<String>,
    /// Groups never synced (wins over `group_include`).
    pub group_exclude: Vec<String>,
}

impl Default for SyncSettingsValue {
    fn default() -> Self {
        Self {
            topic_configs: true,
            consumer_group_offsets: true,
            acls: true,
            refresh_interval_ms: 30_000,
            group_include: vec![".*".to_string()],
            group_exclude: Vec::new(),
        }
    }
}

/// What the operator wants for a mirror topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DesiredStateValue {
    /// Mirror it.
    Mirroring,
    /// Keep it a mirror but stop fetching.
    Paused,
    /// Failed over: an ordinary writable topic.
    Stopped,
}

/// A start's truncation mode, persisted (`{"mode":"none"}`, `{"mode":"resync","quarantine":true}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum TruncationValue {
    /// Refuse a start over local writes.
    #[default]
    None,
    /// Delete the destination records and mirror the source again.
    Resync {
        /// Copy the records to `<topic>.kmirror-diverged` first.
        quarantine: bool,
    },
}

/// The value of a MirrorTopic record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MirrorTopicValue {
    /// The mirror name (as in the key).
    pub mirror: String,
    /// The topic name (as in the key).
    pub topic: String,
    /// The source topic ID.
    pub source_topic_id: String,
    /// The destination topic ID; `None` until kmirror created or adopted the topic.
    pub destination_topic_id: Option<String>,
    /// What the operator wants.
    pub desired_state: DesiredStateValue,
    /// The truncation mode of the last start.
    pub truncation: TruncationValue,
    /// The partition count kmirror mirrors.
    pub partition_count: i32,
    /// When the topic joined the mirror (ms since the Unix epoch).
    pub created_at: i64,
    /// Last change (ms since the Unix epoch).
    pub updated_at: i64,
}

impl MirrorTopicValue {
    /// The record key.
    #[must_use]
    pub fn key(&self) -> MirrorTopicKey {
        MirrorTopicKey { mirror: self.mirror.clone(), topic: self.topic.clone() }
    }
}

/// A committed mirrored position.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PositionValue {
    /// The next source offset to fetch.
    pub next_source_offset: i64,
    /// The greatest source leader epoch mirrored (-1 before the first record).
    pub source_leader_epoch: i32,
    /// The destination offset after the last mirrored record.
    pub destination_end_offset: i64,
}

/// The failure of a FAILED partition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorValue {
    /// The error code (`DESTINATION_DIVERGED`, …).
    pub code: String,
    /// Details for operators.
    pub message: String,
    /// Whether kmirror retries it by itself.
    pub retryable: bool,
    /// When it was recorded (ms since the Unix epoch).
    pub since: i64,
}

/// Where mirroring ended at STOPPED.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct StopValue {
    /// The source offset of the last mirrored record; `None` when nothing was mirrored.
    pub last_mirrored_source_offset: Option<i64>,
    /// The last mirrored source leader epoch (LME); -1 when nothing was mirrored.
    pub lme: i32,
    /// The destination log end offset at STOPPED (after kmirror's markers).
    pub destination_stop_offset: i64,
}

/// The value of a MirrorPartitionState record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionStateValue {
    /// The mirror name (as in the key).
    pub mirror: String,
    /// The topic name.
    pub topic: String,
    /// The source topic ID (as in the key).
    pub topic_id: String,
    /// The partition index (as in the key).
    pub partition: i32,
    /// The state name (`MIRRORING`, …).
    pub state: String,
    /// Incremented by one on every transition; a write with a stale epoch loses.
    pub state_epoch: u64,
    /// When the partition entered `state` (ms since the Unix epoch).
    pub state_since: i64,
    /// Last change (ms since the Unix epoch).
    pub updated_at: i64,
    /// The state before the last change of state.
    pub previous_state: Option<String>,
    /// The committed position at the time of the transition (data progress in between is carried
    /// by OffsetRuns records).
    pub position: Option<PositionValue>,
    /// The failure, in FAILED only.
    pub error: Option<ErrorValue>,
    /// Automatic retries since the last progress.
    pub retry_count: u32,
    /// When the next automatic retry is due (ms since the Unix epoch).
    pub next_retry_at: Option<i64>,
    /// The stop point in force.
    pub stop: Option<StopValue>,
    /// The truncation mode of the start in progress.
    pub truncation: TruncationValue,
    /// The instance that wrote this record (several instances share a cluster, DESIGN.md
    /// section 10): the owner of the partition's slot runs the actions of a transition another
    /// instance recorded. Absent from records of a single instance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub written_by: Option<String>,
    /// The lifecycle command (`start`, `pause`, `resume`, `stop`) an instance that does not own
    /// the partition recorded for its owner to run. Such a record is computed from the writer's
    /// view, which can be behind the owner's (a takeover's `loaded` record not read yet): it then
    /// loses to the stored epoch like any stale write, and the owner runs the command against its
    /// own record instead of never hearing of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
}

impl PartitionStateValue {
    /// The record key.
    #[must_use]
    pub fn key(&self) -> PartitionKey {
        PartitionKey::new(self.mirror.clone(), self.topic_id.clone(), self.partition)
    }
}

/// The value of a LastMirrorEpochs record: the seed's `LastMirrorEpochsValue` (the mirror name is
/// the key).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct LastMirrorEpochsValue {
    /// The mirror's topics.
    pub topics: Vec<LmeTopicValue>,
}

impl LastMirrorEpochsValue {
    /// The LME recorded for one partition.
    #[must_use]
    pub fn epoch(&self, topic: &str, partition: i32) -> Option<i32> {
        let topic = self.topics.iter().find(|t| t.name == topic)?;
        topic.partitions.iter().find(|p| p.partition_index == partition).map(|p| p.last_mirrored_epoch)
    }

    /// Records the LMEs of some partitions of `topic`, keeping every other topic and partition.
    ///
    /// One record holds a whole mirror (the seed's schema, keyed by mirror name) and the last
    /// write wins, so a writer must merge into the current value (from the materialised state)
    /// and write it whole; writing one topic alone would erase the others. Topics are kept
    /// sorted by name and partitions by index, so the encoding stays canonical.
    pub fn set_epochs(&mut self, topic: &str, epochs: impl IntoIterator<Item = (i32, i32)>) {
        let index = match self.topics.binary_search_by(|t| t.name.as_str().cmp(topic)) {
            Ok(index) => index,
            Err(index) => {
                self.topics.insert(index, LmeTopicValue { name: topic.to_owned(), partitions: Vec::new() });
                index
            }
        };
        let partitions = &mut self.topics[index].partitions;
        for (partition_index, last_mirrored_epoch) in epochs {
            let entry = LmePartitionValue { partition_index, last_mirrored_epoch };
            match partitions.binary_search_by_key(&partition_index, |p| p.partition_index) {
                Ok(i) => partitions[i] = entry,
                Err(i) => partitions.insert(i, entry),
            }
        }
    }

    /// Forgets a topic (it left the mirror); returns whether it was there.
    pub fn remove_topic(&mut self, topic: &str) -> bool {
        let before = self.topics.len();
        self.topics.retain(|t| t.name != topic);
        self.topics.len() != before
    }
}

/// One topic of a LastMirrorEpochs record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LmeTopicValue {
    /// The topic name.
    pub name: String,
    /// Its partitions.
    pub partitions: Vec<LmePartitionValue>,
}

/// One partition of a LastMirrorEpochs record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LmePartitionValue {
    /// The partition index.
    pub partition_index: i32,
    /// The last mirrored source leader epoch (-1 when nothing was mirrored).
    pub last_mirrored_epoch: i32,
}

/// The value of an Operation record: an audited lifecycle call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperationValue {
    /// The operation ID (as in the key).
    pub id: String,
    /// The mirror name (as in the key).
    pub mirror: String,
    /// What was asked (`create`, `start`, `pause`, `resume`, `stop`, `remove`, …).
    pub kind: String,
    /// The topics named (after pattern expansion).
    pub topics: Vec<String>,
    /// A dry run.
    pub validate_only: bool,
    /// The authenticated identity.
    pub requested_by: String,
    /// The client's address, when known.
    pub client_address: Option<String>,
    /// When it was asked (ms since the Unix epoch).
    pub requested_at: i64,
    /// When it finished; `None` while it runs.
    pub finished_at: Option<i64>,
    /// The outcome per topic. A call about thousands of topics keeps what fits the state
    /// topic's message size, failures first (`results_omitted` counts the rest).
    pub results: Vec<TopicResultValue>,
    /// The instance that accepted the call (the owners of its partitions carry it out); absent
    /// from records written before instances shared a cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted_by: Option<String>,
    /// Per-topic results left out of `results` (absent when none were).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub results_omitted: Option<OmittedResultsValue>,
    /// A call behind two-person approval: the request (its own record, rewritten as it is decided
    /// and run), or, on the entries of its decision and execution, a copy naming the request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<ApprovalValue>,
}

/// How many per-topic results an Operation record left out, by outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct OmittedResultsValue {
    /// Topics that succeeded.
    pub ok: u64,
    /// Topics that failed.
    pub failed: u64,
}

/// A call that needed a second person, as stored with its operation records.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalValue {
    /// The request's operation ID.
    pub request_id: String,
    /// The call (`stop`, `delete`, `resync`, `failback`, `drill`).
    pub action: String,
    /// `pending`, `approved`, `executed`, `failed`, `rejected`, `break_glass` (expiry is not
    /// written: a pending request past `expires_at` is expired).
    pub status: String,
    /// Why the requester (or a break-glass admin) asked.
    pub reason: String,
    /// The identity that asked.
    pub requested_by: String,
    /// The requester's client address.
    pub client_address: Option<String>,
    /// When it was asked (ms since the Unix epoch).
    pub requested_at: i64,
    /// When the request expires (ms since the Unix epoch).
    pub expires_at: i64,
    /// The identity that approved or rejected it.
    pub decided_by: Option<String>,
    /// When (ms since the Unix epoch).
    pub decided_at: Option<i64>,
    /// The decider's note (a rejection's reason).
    pub decision_reason: Option<String>,
    /// The operation the call ran as, once run.
    pub executed_operation_id: Option<String>,
    /// What to run.
    pub call: ApprovalCallValue,
}

/// The call a request runs once approved: what the requester sent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalCallValue {
    /// Topic names (a lifecycle call).
    pub topics: Vec<String>,
    /// A topic pattern instead of names.
    pub pattern: Option<String>,
    /// Every topic of the mirror instead of names.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub all: bool,
    /// A start's truncation mode.
    pub truncation: TruncationValue,
    /// A stop that also adds its topics to the mirror's `topic_exclude`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub exclude: bool,
    /// A stop that is a promote: its wait for catch-up, in ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promote_timeout_ms: Option<u64>,
    /// A drill's canary topic, when not the default.
    pub canary_topic: Option<String>,
    /// A drill's recovery time objective, in ms.
    pub rto_objective_ms: Option<i64>,
    /// A drill's recovery point objective, in ms.
    pub rpo_objective_ms: Option<i64>,
}

impl OperationValue {
    /// The record key.
    #[must_use]
    pub fn key(&self) -> OperationKey {
        OperationKey { mirror: self.mirror.clone(), id: self.id.clone() }
    }
}

/// The outcome of an operation for one topic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicResultValue {
    /// The topic name.
    pub topic: String,
    /// `ok`, `error`, `skipped`, …
    pub outcome: String,
    /// The error code, if it failed.
    pub error_code: Option<String>,
    /// Details.
    pub message: Option<String>,
}

/// One offset-map run, written as the JSON array `[source_start, destination_start, len]` to keep
/// the per-transaction records small.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RunValue(pub i64, pub i64, pub i64);

impl RunValue {
    /// The source offset of the run's first record.
    #[must_use]
    pub const fn source_start(self) -> i64 {
        self.0
    }

    /// The destination offset of the run's first record.
    #[must_use]
    pub const fn destination_start(self) -> i64 {
        self.1
    }

    /// The number of records.
    #[must_use]
    pub const fn length(self) -> i64 {
        self.2
    }
}

/// The value of an OffsetRuns record: what one data transaction did to one partition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OffsetRunsValue {
    /// The mirror name (as in the key).
    pub mirror: String,
    /// The source topic ID (as in the key).
    pub topic_id: String,
    /// The partition index (as in the key).
    pub partition: i32,
    /// The first batch after a resync: the partition's earlier runs are obsolete.
    pub new_lineage: bool,
    /// The batch's runs, in order; the first starts at the key's destination offset.
    pub runs: Vec<RunValue>,
    /// The committed position after this batch.
    pub position: Option<PositionValue>,
}

impl OffsetRunsValue {
    /// The record key (`None` without runs, which decoding rejects).
    #[must_use]
    pub fn key(&self) -> Option<OffsetRunsKey> {
        let first = self.runs.first()?;
        Some(OffsetRunsKey {
            mirror: self.mirror.clone(),
            topic_id: self.topic_id.clone(),
            partition: self.partition,
            first_destination_offset: first.destination_start(),
        })
    }
}

/// The value of an Instance record: a heartbeat of one kmirror instance, rewritten every few
/// seconds while it runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstanceValue {
    /// The instance ID (as in the key).
    pub instance: String,
    /// The cluster name the instance runs under (`--cluster-name`).
    pub cluster_name: String,
    /// Where the instance's API and dashboard are reached (`--advertised-url`), when configured.
    pub advertised_url: Option<String>,
    /// The kmirror version the instance runs. Written as `"kmirror_version"`: `"version"` is the
    /// record header's format version.
    #[serde(rename = "kmirror_version")]
    pub version: String,
    /// The slots (state partitions) it owns, in ascending order.
    pub slots: Vec<i32>,
    /// The mirrored partitions in those slots.
    pub partitions: u64,
    /// When this heartbeat was written (ms since the Unix epoch).
    pub heartbeat_at: i64,
    /// When the instance started (ms since the Unix epoch).
    pub started_at: i64,
}

/// One step of a drill, as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrillStepValue {
    /// The step (`create_canary`, `produce`, `commit_group`, `mirror`, `failover`, `verify`,
    /// `cleanup`).
    pub name: String,
    /// `pending`, `running`, `done`, `failed`, `skipped`.
    pub status: String,
    /// When it started and finished (ms since the Unix epoch).
    pub started_at: Option<i64>,
    pub finished_at: Option<i64>,
    /// What it did, or why it failed.
    pub detail: Option<String>,
}

/// The value of a Drill record: one disaster-recovery drill, rewritten as it progresses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrillValue {
    /// The drill's ID (as in the key).
    pub id: String,
    /// The mirror (as in the key).
    pub mirror: String,
    /// `running`, `passed`, `failed`, `interrupted` (its instance stopped while it ran).
    pub status: String,
    /// The identity that asked for it.
    pub requested_by: String,
    pub client_address: Option<String>,
    /// The instance that runs it.
    pub instance: String,
    /// When it was asked and when it finished (ms since the Unix epoch).
    pub requested_at: i64,
    pub finished_at: Option<i64>,
    /// The canary topic.
    pub canary_topic: String,
    /// Its steps, in order.
    pub steps: Vec<DrillStepValue>,
    /// Once finished: the report, as its canonical JSON (digest included), exactly as downloaded.
    pub report: Option<String>,
}

impl DrillValue {
    /// The record key.
    #[must_use]
    pub fn key(&self) -> DrillKey {
        DrillKey { mirror: self.mirror.clone(), id: self.id.clone() }
    }
}

impl InstanceValue {
    /// The record key.
    #[must_use]
    pub fn key(&self) -> InstanceKey {
        InstanceKey { instance: self.instance.clone() }
    }
}

// ---------------------------------------------------------------------------------------------
// Records
// ---------------------------------------------------------------------------------------------

/// A key and its value; `value: None` is a tombstone that deletes the keyed entity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry<K, V> {
    /// The key.
    pub key: K,
    /// The value, or `None` for a tombstone.
    pub value: Option<V>,
}

impl<K, V> Entry<K, V> {
    /// A key with a value.
    pub const fn put(key: K, value: V) -> Self {
        Self { key, value: Some(value) }
    }

    /// A tombstone for `key`.
    pub const fn tombstone(key: K) -> Self {
        Self { key, value: None }
    }
}

/// One decoded `__mirror_state` record.
// Decoded one at a time and consumed at once (never stored in bulk), so the largest variant's
// size costs nothing worth a box.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateRecord {
    /// A Mirror record.
    Mirror(Entry<MirrorKey, MirrorValue>),
    /// A MirrorTopic record.
    MirrorTopic(Entry<MirrorTopicKey, MirrorTopicValue>),
    /// A MirrorPartitionState record.
    PartitionState(Entry<PartitionKey, PartitionStateValue>),
    /// A LastMirrorEpochs record.
    LastMirrorEpochs(Entry<MirrorKey, LastMirrorEpochsValue>),
    /// An Operation record.
    Operation(Entry<OperationKey, OperationValue>),
    /// An OffsetRuns record.
    OffsetRuns(Entry<OffsetRunsKey, OffsetRunsValue>),
    /// An Instance record (a heartbeat).
    Instance(Entry<InstanceKey, InstanceValue>),
    /// A Drill record.
    Drill(Entry<DrillKey, DrillValue>),
}

/// An encoded record, ready to produce to the state partition it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedRecord {
    /// The `__mirror_state` partition to produce to (set it explicitly: librdkafka's default
    /// partitioner is not the hash kmirror uses).
    pub partition: i32,
    /// The canonical key bytes.
    pub key: Vec<u8>,
    /// The canonical value bytes; `None` for a tombstone.
    pub value: Option<Vec<u8>>,
}

impl StateRecord {
    /// The record's kind.
    #[must_use]
    pub const fn kind(&self) -> RecordKind {
        match self {
            Self::Mirror(_) => RecordKind::Mirror,
            Self::MirrorTopic(_) => RecordKind::MirrorTopic,
            Self::PartitionState(_) => RecordKind::MirrorPartitionState,
            Self::LastMirrorEpochs(_) => RecordKind::LastMirrorEpochs,
            Self::Operation(_) => RecordKind::Operation,
            Self::OffsetRuns(_) => RecordKind::OffsetRuns,
            Self::Instance(_) => RecordKind::Instance,
            Self::Drill(_) => RecordKind::Drill,
        }
    }

    /// Whether this is a tombstone.
    #[must_use]
    pub const fn is_tombstone(&self) -> bool {
        match self {
            Self::Mirror(e) => e.value.is_none(),
            Self::MirrorTopic(e) => e.value.is_none(),
            Self::PartitionState(e) => e.value.is_none(),
            Self::LastMirrorEpochs(e) => e.value.is_none(),
            Self::Operation(e) => e.value.is_none(),
            Self::OffsetRuns(e) => e.value.is_none(),
            Self::Instance(e) => e.value.is_none(),
            Self::Drill(e) => e.value.is_none(),
        }
    }

    /// The mirror the record belongs to; for an Instance record, which belongs to no mirror, the
    /// instance ID (what its state partition is computed from).
    #[must_use]
    pub fn mirror(&self) -> &str {
        match self {
            Self::Mirror(e) => &e.key.mirror,
            Self::MirrorTopic(e) => &e.key.mirror,
            Self::PartitionState(e) => &e.key.mirror,
            Self::LastMirrorEpochs(e) => &e.key.mirror,
            Self::Operation(e) => &e.key.mirror,
            Self::OffsetRuns(e) => &e.key.mirror,
            Self::Instance(e) => &e.key.instance,
            Self::Drill(e) => &e.key.mirror,
        }
    }

    /// The `__mirror_state` partition of this record among `num_partitions`: partition-level
    /// records (MirrorPartitionState, OffsetRuns) by (mirror, topic ID, partition), Instance records
    /// by instance ID (`mirror_partition(instance, N)`, through [`Self::mirror`]), the others by
    /// mirror name ([`super::partitioning`]).
    #[must_use]
    pub fn state_partition(&self, num_partitions: NonZeroU32) -> i32 {
        match self {
            Self::PartitionState(e) => state_partition(&e.key.mirror, &e.key.topic_id, e.key.partition, num_partitions),
            Self::OffsetRuns(e) => state_partition(&e.key.mirror, &e.key.topic_id, e.key.partition, num_partitions),
            _ => mirror_partition(self.mirror(), num_partitions),
        }
    }

    /// The canonical key and value bytes, with the state partition among `num_partitions`.
    #[must_use]
    pub fn encode(&self, num_partitions: NonZeroU32) -> EncodedRecord {
        let (key, value) = match self {
            Self::Mirror(e) => encode_entry(RecordKind::Mirror, e),
            Self::MirrorTopic(e) => encode_entry(RecordKind::MirrorTopic, e),
            Self::PartitionState(e) => encode_entry(RecordKind::MirrorPartitionState, e),
            Self::LastMirrorEpochs(e) => encode_entry(RecordKind::LastMirrorEpochs, e),
            Self::Operation(e) => encode_entry(RecordKind::Operation, e),
            Self::OffsetRuns(e) => encode_entry(RecordKind::OffsetRuns, e),
            Self::Instance(e) => encode_entry(RecordKind::Instance, e),
            Self::Drill(e) => encode_entry(RecordKind::Drill, e),
        };
        EncodedRecord { partition: self.state_partition(num_partitions), key, value }
    }
}

/// `{"type":…,"version":…}` followed by the members of `body`.
#[derive(Serialize)]
struct Envelope<'a, T> {
    #[serde(rename = "type")]
    kind: &'static str,
    version: u32,
    #[serde(flatten)]
    body: &'a T,
}

fn to_canonical_json<T: Serialize>(kind: RecordKind, version: u32, body: &T) -> Vec<u8> {
    // The record structs hold only strings, integers, booleans, sequences and string-keyed maps,
    // which serde_json always serialises; an error here is a programming error in this file.
    serde_json::to_vec(&Envelope { kind: kind.as_str(), version, body })
        .unwrap_or_else(|error| unreachable!("state records always serialise: {error}"))
}

fn encode_entry<K: Serialize, V: Serialize>(kind: RecordKind, entry: &Entry<K, V>) -> (Vec<u8>, Option<Vec<u8>>) {
    let key = to_canonical_json(kind, kind.key_version(), &entry.key);
    let value = entry.value.as_ref().map(|value| to_canonical_json(kind, kind.value_version(), value));
    (key, value)
}

// ---------------------------------------------------------------------------------------------
// Decoding
// ---------------------------------------------------------------------------------------------

/// Which half of a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Part {
    /// The key.
    Key,
    /// The value.
    Value,
}

impl fmt::Display for Part {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Key => "key",
            Self::Value => "value",
        })
    }
}

/// Why a `__mirror_state` record cannot be decoded. The caller reports it and skips the record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The record has no key.
    #[error("state record has no key")]
    MissingKey,
    /// Not JSON, or not the JSON of the expected struct.
    #[error("malformed state record {part}{}: {message}", kind.map(|k| format!(" ({k})")).unwrap_or_default())]
    Malformed {
        /// The half that is malformed.
        part: Part,
        /// The kind, once known.
        kind: Option<RecordKind>,
        /// The parser's explanation.
        message: String,
    },
    /// A `"type"` this build does not know (written by a newer kmirror, or not a kmirror record).
    #[error("state record {part} has unknown type {type_name:?} (written by a newer kmirror?)")]
    UnknownType {
        /// The half that names it.
        part: Part,
        /// The name (shortened to 64 characters).
        type_name: String,
    },
    /// A version this build does not know.
    #[error("{kind} {part} version {version} is not supported (this kmirror reads up to version {supported}{})",
        if version > supported { "; written by a newer kmirror" } else { "" })]
    UnknownVersion {
        /// The half.
        part: Part,
        /// The record kind.
        kind: RecordKind,
        /// The version found.
        version: u32,
        /// The newest version this build reads.
        supported: u32,
    },
    /// The value does not belong to the key (another type, or other identifying fields).
    #[error("{kind} record value does not match its key: {detail}")]
    KeyValueMismatch {
        /// The key's kind.
        kind: RecordKind,
        /// What differs.
        detail: String,
    },
    /// A count or index outside the format's bounds ([`MAX_PARTITION_COUNT`],
    /// [`MAX_RECORD_LIST_LEN`]): a malformed or hostile record.
    #[error("invalid {kind} record: {field} is {value}, outside 0..={max}")]
    OutOfBounds {
        /// The kind.
        kind: RecordKind,
        /// The field (a list's name for its length).
        field: &'static str,
        /// The value found.
        value: i64,
        /// The largest value allowed.
        max: i64,
    },
    /// Well-formed JSON that breaks a rule of the format.
    #[error("invalid {kind} record: {detail}")]
    Invalid {
        /// The kind.
        kind: RecordKind,
        /// The broken rule.
        detail: String,
    },
}

/// The members every key and value starts with.
#[derive(Deserialize)]
struct Header {
    #[serde(rename = "type")]
    kind: String,
    version: u32,
}

fn malformed(part: Part, kind: Option<RecordKind>, error: &serde_json::Error) -> DecodeError {
    DecodeError::Malformed { part, kind, message: error.to_string() }
}

fn shorten(name: &str) -> String {
    name.chars().take(64).collect()
}

/// Reads the header of one half: its kind (known or not) and version.
fn read_header(bytes: &[u8], part: Part) -> Result<(Result<RecordKind, String>, u32), DecodeError> {
    let header: Header = serde_json::from_slice(bytes).map_err(|e| malformed(part, None, &e))?;
    Ok((RecordKind::from_name(&header.kind).ok_or(header.kind), header.version))
}

fn check_version(part: Part, kind: RecordKind, version: u32) -> Result<(), DecodeError> {
    let supported = match part {
        Part::Key => kind.key_version(),
        Part::Value => kind.value_version(),
    };
    if version == supported { Ok(()) } else { Err(DecodeError::UnknownVersion { part, kind, version, supported }) }
}

fn read_body<T: DeserializeOwned>(bytes: &[u8], part: Part, kind: RecordKind) -> Result<T, DecodeError> {
    serde_json::from_slice(bytes).map_err(|e| malformed(part, Some(kind), &e))
}

/// Checks that `value` is within `0..=max`.
fn bounded(kind: RecordKind, field: &'static str, value: i64, max: i64) -> Result<(), DecodeError> {
    if (0..=max).contains(&value) { Ok(()) } else { Err(DecodeError::OutOfBounds { kind, field, value, max }) }
}

/// Checks a partition index (below [`MAX_PARTITION_COUNT`]).
fn partition_index(kind: RecordKind, field: &'static str, partition: i32) -> Result<(), DecodeError> {
    bounded(kind, field, i64::from(partition), i64::from(MAX_PARTITION_COUNT) - 1)
}

/// Checks a list's length (at most [`MAX_RECORD_LIST_LEN`]).
fn list_len(kind: RecordKind, field: &'static str, len: usize) -> Result<(), DecodeError> {
    let len = i64::try_from(len).unwrap_or(i64::MAX);
    bounded(kind, field, len, MAX_RECORD_LIST_LEN as i64)
}

/// A value that knows which key it belongs to.
trait ValueOf<K>: DeserializeOwned {
    /// Checks the identifying fields against the key and the format's rules.
    fn check(&self, key: &K) -> Result<(), DecodeError>;
}

fn mismatch(kind: RecordKind, field: &str, in_key: &dyn fmt::Debug, in_value: &dyn fmt::Debug) -> DecodeError {
    DecodeError::KeyValueMismatch {
        kind,
        detail: format!("{field} is {in_key:?} in the key but {in_value:?} in the value"),
    }
}

/// Compares identifying fields, naming the first that differs.
macro_rules! same {
    ($kind:expr, $($field:literal: $key:expr => $value:expr),+ $(,)?) => {
        $(if $key != $value {
            return Err(mismatch($kind, $field, &$key, &$value));
        })+
    };
}

impl ValueOf<MirrorKey> for MirrorValue {
    fn check(&self, key: &MirrorKey) -> Result<(), DecodeError> {
        same!(RecordKind::Mirror, "mirror": key.mirror => self.name);
        let kind = RecordKind::Mirror;
        list_len(kind, "source.properties", self.source.properties.len())?;
        list_len(kind, "sync.group_include", self.sync.group_include.len())?;
        list_len(kind, "sync.group_exclude", self.sync.group_exclude.len())?;
        list_len(kind, "created_acls", self.created_acls.len())?;
        if let Some(a) = &self.approval {
            list_len(kind, "approval.required_for", a.required_for.len())?;
        }
        Ok(())
    }
}

impl ValueOf<MirrorTopicKey> for MirrorTopicValue {
    fn check(&self, key: &MirrorTopicKey) -> Result<(), DecodeError> {
        same!(RecordKind::MirrorTopic, "mirror": key.mirror => self.mirror, "topic": key.topic => self.topic);
        bounded(RecordKind::MirrorTopic, "partition_count", self.partition_count.into(), MAX_PARTITION_COUNT.into())
    }
}

impl ValueOf<PartitionKey> for PartitionStateValue {
    fn check(&self, key: &PartitionKey) -> Result<(), DecodeError> {
        same!(RecordKind::MirrorPartitionState,
            "mirror": key.mirror => self.mirror,
            "topic_id": key.topic_id => self.topic_id,
            "partition": key.partition => self.partition);
        partition_index(RecordKind::MirrorPartitionState, "partition", self.partition)
    }
}

impl ValueOf<MirrorKey> for LastMirrorEpochsValue {
    fn check(&self, _key: &MirrorKey) -> Result<(), DecodeError> {
        let kind = RecordKind::LastMirrorEpochs;
        list_len(kind, "topics", self.topics.len())?;
        for topic in &self.topics {
            bounded(
                kind,
                "partitions",
                i64::try_from(topic.partitions.len()).unwrap_or(i64::MAX),
                MAX_PARTITION_COUNT.into(),
            )?;
            for p in &topic.partitions {
                partition_index(kind, "partition_index", p.partition_index)?;
            }
        }
        Ok(())
    }
}

impl ValueOf<OperationKey> for OperationValue {
    fn check(&self, key: &OperationKey) -> Result<(), DecodeError> {
        same!(RecordKind::Operation, "mirror": key.mirror => self.mirror, "id": key.id => self.id);
        list_len(RecordKind::Operation, "topics", self.topics.len())?;
        if let Some(a) = &self.approval {
            list_len(RecordKind::Operation, "approval.call.topics", a.call.topics.len())?;
        }
        list_len(RecordKind::Operation, "results", self.results.len())
    }
}

impl ValueOf<DrillKey> for DrillValue {
    fn check(&self, key: &DrillKey) -> Result<(), DecodeError> {
        same!(RecordKind::Drill, "mirror": key.mirror => self.mirror, "id": key.id => self.id);
        list_len(RecordKind::Drill, "steps", self.steps.len())
    }
}

impl ValueOf<OffsetRunsKey> for OffsetRunsValue {
    fn check(&self, key: &OffsetRunsKey) -> Result<(), DecodeError> {
        let Some(first) = self.runs.first() else {
            return Err(DecodeError::Invalid { kind: RecordKind::OffsetRuns, detail: "no runs".to_owned() });
        };
        same!(RecordKind::OffsetRuns,
            "mirror": key.mirror => self.mirror,
            "topic_id": key.topic_id => self.topic_id,
            "partition": key.partition => self.partition,
            "first_destination_offset": key.first_destination_offset => first.destination_start());
        partition_index(RecordKind::OffsetRuns, "partition", self.partition)?;
        list_len(RecordKind::OffsetRuns, "runs", self.runs.len())
    }
}

impl ValueOf<InstanceKey> for InstanceValue {
    fn check(&self, key: &InstanceKey) -> Result<(), DecodeError> {
        same!(RecordKind::Instance, "instance": key.instance => self.instance);
        list_len(RecordKind::Instance, "slots", self.slots.len())?;
        for slot in &self.slots {
            partition_index(RecordKind::Instance, "slot", *slot)?;
        }
        Ok(())
    }
}

fn decode_entry<K: DeserializeOwned, V: ValueOf<K>>(
    kind: RecordKind,
    key: &[u8],
    value: Option<&[u8]>,
) -> Result<Entry<K, V>, DecodeError> {
    let decoded_key: K = read_body(key, Part::Key, kind)?;
    let Some(value) = value else {
        return Ok(Entry::tombstone(decoded_key));
    };
    let (value_kind, version) = read_header(value, Part::Value).map_err(|error| match error {
        DecodeError::Malformed { part, message, .. } => DecodeError::Malformed { part, kind: Some(kind), message },
        other => other,
    })?;
    if value_kind != Ok(kind) {
        let found = value_kind.map_or_else(|name| shorten(&name), |k| k.as_str().to_owned());
        return Err(DecodeError::KeyValueMismatch { kind, detail: format!("the value's type is {found:?}") });
    }
    check_version(Part::Value, kind, version)?;
    let decoded_value: V = read_body(value, Part::Value, kind)?;
    decoded_value.check(&decoded_key)?;
    Ok(Entry::put(decoded_key, decoded_value))
}

/// Decodes one `__mirror_state` record from its key and value bytes (`value: None` is a
/// tombstone). Never panics, whatever the bytes.
///
/// # Errors
///
/// [`DecodeError`]: the caller reports it and skips the record.
pub fn decode(key: Option<&[u8]>, value: Option<&[u8]>) -> Result<StateRecord, DecodeError> {
    let key = key.ok_or(DecodeError::MissingKey)?;
    let (kind, version) = read_header(key, Part::Key)?;
    let kind = kind.map_err(|name| DecodeError::UnknownType { part: Part::Key, type_name: shorten(&name) })?;
    check_version(Part::Key, kind, version)?;
    Ok(match kind {
        RecordKind::Mirror => StateRecord::Mirror(decode_entry(kind, key, value)?),
        RecordKind::MirrorTopic => StateRecord::MirrorTopic(decode_entry(kind, key, value)?),
        RecordKind::MirrorPartitionState => StateRecord::PartitionState(decode_entry(kind, key, value)?),
        RecordKind::LastMirrorEpochs => StateRecord::LastMirrorEpochs(decode_entry(kind, key, value)?),
        RecordKind::Operation => StateRecord::Operation(decode_entry(kind, key, value)?),
        RecordKind::OffsetRuns => StateRecord::OffsetRuns(decode_entry(kind, key, value)?),
        RecordKind::Instance => StateRecord::Instance(decode_entry(kind, key, value)?),
        RecordKind::Drill => StateRecord::Drill(decode_entry(kind, key, value)?),
    })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn n16() -> NonZeroU32 {
        NonZeroU32::new(16).unwrap()
    }

    fn partition_state() -> PartitionStateValue {
        PartitionStateValue {
            mirror: "m".to_owned(),
            topic: "orders".to_owned(),
            topic_id: "T1".to_owned(),
            partition: 2,
            state: "STOPPED".to_owned(),
            state_epoch: 7,
            state_since: 1_000,
            updated_at: 1_001,
            previous_state: Some("STOPPING".to_owned()),
            position: Some(PositionValue {
                next_source_offset: 100,
                source_leader_epoch: 4,
                destination_end_offset: 39,
            }),
            error: None,
            retry_count: 0,
            next_retry_at: None,
            stop: Some(StopValue { last_mirrored_source_offset: Some(99), lme: 4, destination_stop_offset: 41 }),
            truncation: TruncationValue::None,
            written_by: None,
            command: None,
        }
    }

    fn offset_runs() -> OffsetRunsValue {
        OffsetRunsValue {
            mirror: "m".to_owned(),
            topic_id: "T1".to_owned(),
            partition: 2,
            new_lineage: false,
            runs: vec![RunValue(10, 41, 3), RunValue(15, 44, 1)],
            position: Some(PositionValue {
                next_source_offset: 16,
                source_leader_epoch: 4,
                destination_end_offset: 45,
            }),
        }
    }

    fn instance() -> InstanceValue {
        InstanceValue {
            instance: "kmirror-0".to_owned(),
            cluster_name: "eu-to-us".to_owned(),
            advertised_url: Some("http://kmirror-0:8080".to_owned()),
            version: "0.9.0".to_owned(),
            slots: vec![0, 3, 7],
            partitions: 42,
            heartbeat_at: 1_700_000_005_000,
            started_at: 1_700_000_000_000,
        }
    }

    /// One record of every kind, with values and as tombstones.
    fn samples() -> Vec<StateRecord> {
        let mut properties = BTreeMap::new();
        properties.insert("security.protocol".to_owned(), "SASL_SSL".to_owned());
        properties.insert("client.id".to_owned(), "kmirror".to_owned());
        let mirror = MirrorValue {
            topic_include: Vec::new(),
            topic_exclude: None,
            name: "m".to_owned(),
            source: SourceClusterValue { bootstrap_servers: "a:9092,b:9092".to_owned(), properties },
            expected_source_cluster_id: Some("abc".to_owned()),
            created_at: 1,
            updated_at: 2,
            sync: SyncSettingsValue::default(),
            created_acls: Vec::new(),
            replication_throttle_bytes_per_sec: Some(5_242_880),
            approval: Some(ApprovalPolicyValue {
                required_for: vec!["delete".to_owned(), "stop".to_owned()],
                expires_after_seconds: 900,
            }),
        };
        let topic = MirrorTopicValue {
            mirror: "m".to_owned(),
            topic: "orders".to_owned(),
            source_topic_id: "T1".to_owned(),
            destination_topic_id: Some("D1".to_owned()),
            desired_state: DesiredStateValue::Paused,
            truncation: TruncationValue::Resync { quarantine: true },
            partition_count: 6,
            created_at: 1,
            updated_at: 3,
        };
        let lme = LastMirrorEpochsValue {
            topics: vec![LmeTopicValue {
                name: "orders".to_owned(),
                partitions: vec![LmePartitionValue { partition_index: 0, last_mirrored_epoch: 4 }],
            }],
        };
        let operation = OperationValue {
            id: "op-1".to_owned(),
            mirror: "m".to_owned(),
            kind: "stop".to_owned(),
            topics: vec!["orders".to_owned()],
            validate_only: false,
            requested_by: "alice".to_owned(),
            client_address: Some("10.0.0.1".to_owned()),
            requested_at: 5,
            finished_at: Some(6),
            results: vec![TopicResultValue {
                topic: "orders".to_owned(),
                outcome: "error".to_owned(),
                error_code: Some("DESTINATION_DIVERGED".to_owned()),
                message: Some("3 local records".to_owned()),
            }],
            accepted_by: None,
            results_omitted: Some(OmittedResultsValue { ok: 2, failed: 1 }),
            approval: Some(ApprovalValue {
                request_id: "op-1".to_owned(),
                action: "stop".to_owned(),
                status: "pending".to_owned(),
                reason: "planned DR test".to_owned(),
                requested_by: "alice".to_owned(),
                client_address: None,
                requested_at: 5,
                expires_at: 905,
                decided_by: None,
                decided_at: None,
                decision_reason: None,
                executed_operation_id: None,
                call: ApprovalCallValue { topics: vec!["orders".to_owned()], ..Default::default() },
            }),
        };
        let drill = DrillValue {
            id: "op-2".to_owned(),
            mirror: "m".to_owned(),
            status: "passed".to_owned(),
            requested_by: "alice".to_owned(),
            client_address: None,
            instance: "kmirror-0".to_owned(),
            requested_at: 7,
            finished_at: Some(9),
            canary_topic: "kmirror-drill.m".to_owned(),
            steps: vec![DrillStepValue {
                name: "produce".to_owned(),
                status: "done".to_owned(),
                started_at: Some(7),
                finished_at: Some(8),
                detail: Some("300 records".to_owned()),
            }],
            report: Some("{}".to_owned()),
        };
        let mirror_key = MirrorKey { mirror: "m".to_owned() };
        let state = partition_state();
        let runs = offset_runs();
        let instance = instance();
        vec![
            StateRecord::Mirror(Entry::put(mirror_key.clone(), mirror)),
            StateRecord::Mirror(Entry::tombstone(mirror_key.clone())),
            StateRecord::MirrorTopic(Entry::put(topic.key(), topic.clone())),
            StateRecord::MirrorTopic(Entry::tombstone(topic.key())),
            StateRecord::PartitionState(Entry::put(state.key(), state.clone())),
            StateRecord::PartitionState(Entry::tombstone(state.key())),
            StateRecord::LastMirrorEpochs(Entry::put(mirror_key.clone(), lme)),
            StateRecord::LastMirrorEpochs(Entry::tombstone(mirror_key)),
            StateRecord::Operation(Entry::put(operation.key(), operation.clone())),
            StateRecord::Operation(Entry::tombstone(operation.key())),
            StateRecord::OffsetRuns(Entry::put(runs.key().unwrap(), runs.clone())),
            StateRecord::OffsetRuns(Entry::tombstone(runs.key().unwrap())),
            StateRecord::Instance(Entry::put(instance.key(), instance.clone())),
            StateRecord::Instance(Entry::tombstone(instance.key())),
            StateRecord::Drill(Entry::put(drill.key(), drill.clone())),
            StateRecord::Drill(Entry::tombstone(drill.key())),
        ]
    }

    fn text(bytes: &[u8]) -> &str {
        std::str::from_utf8(bytes).unwrap()
    }

    #[test]
    fn the_canonical_form_is_fixed() {
        let state = partition_state();
        let e = StateRecord::PartitionState(Entry::put(state.key(), state)).encode(n16());
        assert_eq!(
            text(&e.key),
            r#"{"type":"MirrorPartitionState","version":0,"mirror":"m","topic_id":"T1","partition":2}"#
        );
        assert_eq!(
            text(e.value.as_deref().unwrap()),
            concat!(
                r#"{"type":"MirrorPartitionState","version":0,"mirror":"m","topic":"orders","topic_id":"T1","#,
                r#""partition":2,"state":"STOPPED","state_epoch":7,"state_since":1000,"updated_at":1001,"#,
                r#""previous_state":"STOPPING","position":{"next_source_offset":100,"source_leader_epoch":4,"#,
                r#""destination_end_offset":39},"error":null,"retry_count":0,"next_retry_at":null,"#,
                r#""stop":{"last_mirrored_source_offset":99,"lme":4,"destination_stop_offset":41},"#,
                r#""truncation":{"mode":"none"}}"#
            )
        );

        let runs = offset_runs();
        let e = StateRecord::OffsetRuns(Entry::put(runs.key().unwrap(), runs)).encode(n16());
        assert_eq!(
            text(&e.key),
            r#"{"type":"OffsetRuns","version":0,"mirror":"m","topic_id":"T1","partition":2,"first_destination_offset":41}"#
        );
        assert_eq!(
            text(e.value.as_deref().unwrap()),
            concat!(
                r#"{"type":"OffsetRuns","version":0,"mirror":"m","topic_id":"T1","partition":2,"new_lineage":false,"#,
                r#""runs":[[10,41,3],[15,44,1]],"position":{"next_source_offset":16,"source_leader_epoch":4,"#,
                r#""destination_end_offset":45}}"#
            )
        );

        let lme = &samples()[6];
        let e = lme.encode(n16());
        assert_eq!(text(&e.key), r#"{"type":"LastMirrorEpochs","version":0,"mirror":"m"}"#);
        assert_eq!(
            text(e.value.as_deref().unwrap()),
            r#"{"type":"LastMirrorEpochs","version":0,"topics":[{"name":"orders","partitions":[{"partition_index":0,"last_mirrored_epoch":4}]}]}"#
        );
        // Maps are sorted, so property order never changes the bytes.
        let mirror = samples()[0].encode(n16());
        let value = text(mirror.value.as_deref().unwrap());
        assert!(value.contains(r#""properties":{"client.id":"kmirror","security.protocol":"SASL_SSL"}"#), "{value}");
    }

    #[test]
    fn every_kind_round_trips_byte_for_byte() {
        for record in samples() {
            let e = record.encode(n16());
            let decoded = decode(Some(&e.key), e.value.as_deref()).unwrap();
            assert_eq!(decoded, record);
            assert_eq!(decoded.encode(n16()), e);
            assert_eq!(decoded.kind(), record.kind());
            assert_eq!(decoded.is_tombstone(), e.value.is_none());
            let owner = if record.kind() == RecordKind::Instance { "kmirror-0" } else { "m" };
            assert_eq!(decoded.mirror(), owner);
        }
        let kinds: std::collections::BTreeSet<RecordKind> = samples().iter().map(StateRecord::kind).collect();
        assert_eq!(kinds.len(), RecordKind::ALL.len(), "a sample of every kind");
    }

    #[test]
    fn instance_records_have_a_fixed_form_and_go_to_the_instances_partition() {
        let value = instance();
        let record = StateRecord::Instance(Entry::put(value.key(), value));
        let e = record.encode(n16());
        assert_eq!(text(&e.key), r#"{"type":"Instance","version":1,"instance":"kmirror-0"}"#);
        assert_eq!(
            text(e.value.as_deref().unwrap()),
            concat!(
                r#"{"type":"Instance","version":1,"instance":"kmirror-0","cluster_name":"eu-to-us","#,
                r#""advertised_url":"http://kmirror-0:8080","kmirror_version":"0.9.0","slots":[0,3,7],"partitions":42,"#,
                r#""heartbeat_at":1700000005000,"started_at":1700000000000}"#
            )
        );
        assert_eq!(e.partition, mirror_partition("kmirror-0", n16()));
        assert_eq!(record.state_partition(n16()), mirror_partition("kmirror-0", n16()));
        let tombstone = StateRecord::Instance(Entry::tombstone(InstanceKey { instance: "kmirror-0".to_owned() }));
        assert_eq!(tombstone.encode(n16()).partition, e.partition);
        assert_eq!(tombstone.encode(n16()).value, None);

        // No advertised URL is written as null, and reads back as None.
        let mut bare = instance();
        bare.advertised_url = None;
        let e = StateRecord::Instance(Entry::put(bare.key(), bare.clone())).encode(n16());
        assert!(text(e.value.as_deref().unwrap()).contains(r#""advertised_url":null"#));
        let StateRecord::Instance(entry) = decode(Some(&e.key), e.value.as_deref()).unwrap() else { panic!() };
        assert_eq!(entry.value, Some(bare));
    }

    #[test]
    fn instance_records_are_checked_against_their_key_and_version() {
        let key = br#"{"type":"Instance","version":1,"instance":"kmirror-0"}"#;
        let mut other = instance();
        other.instance = "kmirror-1".to_owned();
        let value = serde_json::to_vec(&Envelope { kind: "Instance", version: 1, body: &other }).unwrap();
        let e = decode_error(key, Some(&value));
        assert_eq!(
            e.to_string(),
            r#"Instance record value does not match its key: instance is "kmirror-0" in the key but "kmirror-1" in the value"#
        );
        let e = decode_error(key, Some(br#"{"type":"Mirror","version":0,"name":"kmirror-0"}"#));
        assert!(matches!(e, DecodeError::KeyValueMismatch { kind: RecordKind::Instance, .. }), "{e}");

        let e = decode_error(br#"{"type":"Instance","version":0,"instance":"kmirror-0"}"#, None);
        assert_eq!(
            e,
            DecodeError::UnknownVersion { part: Part::Key, kind: RecordKind::Instance, version: 0, supported: 1 }
        );
        let e = decode_error(key, Some(br#"{"type":"Instance","version":2,"instance":"kmirror-0"}"#));
        assert!(matches!(e, DecodeError::UnknownVersion { part: Part::Value, version: 2, supported: 1, .. }), "{e}");

        let mut hostile = instance();
        hostile.slots = vec![0, -1];
        let record = StateRecord::Instance(Entry::put(hostile.key(), hostile));
        assert_eq!(out_of_bounds(&record), ("slot", -1, i64::from(MAX_PARTITION_COUNT) - 1));

        // A tombstone decodes to a tombstone.
        assert_eq!(
            decode(Some(key), None),
            Ok(StateRecord::Instance(Entry::tombstone(InstanceKey { instance: "kmirror-0".to_owned() })))
        );
    }

    #[test]
    fn decoding_ignores_member_order_and_unknown_members() {
        let key =
            br#"{"partition":2,"topic_id":"T1","mirror":"m","version":0,"type":"MirrorPartitionState","extra":1}"#;
        let StateRecord::PartitionState(entry) = decode(Some(key), None).unwrap() else { panic!("wrong kind") };
        assert_eq!(entry.key, PartitionKey::new("m", "T1", 2));
        // Sync settings may gain fields; missing ones take their defaults.
        let value = br#"{"type":"Mirror","version":0,"name":"m","source":{"bootstrap_servers":"a:1","properties":{}},
            "expected_source_cluster_id":null,"created_at":1,"updated_at":1,"sync":{"acls":false}}"#;
        let StateRecord::Mirror(entry) =
            decode(Some(br#"{"type":"Mirror","version":0,"mirror":"m"}"#), Some(value)).unwrap()
        else {
            panic!("wrong kind")
        };
        let sync = entry.value.unwrap().sync;
        assert!(!sync.acls);
        assert!(sync.topic_configs);
    }

    /// ACL bindings written before the canonical form held the kinds' `Debug` text; they load,
    /// and are written back in the lowercase form. An unknown name spoils only its binding.
    #[test]
    fn old_debug_text_acl_records_load_and_are_written_canonically() {
        let old = br#"{"type":"Mirror","version":0,"name":"m","source":{"bootstrap_servers":"a:1","properties":{}},
            "expected_source_cluster_id":null,"created_at":1,"updated_at":1,"created_acls":[
            {"resource_type":"Topic","name":"orders","pattern_type":"Literal","principal":"User:alice","host":"*",
             "operation":"DescribeConfigs","permission":"Allow"},
            {"resource_type":"TransactionalId","name":"tx","pattern_type":"Prefixed","principal":"User:bob",
             "host":"10.0.0.1","operation":"IdempotentWrite","permission":"Deny"},
            {"resource_type":"DelegationToken","name":"x","pattern_type":"Match","principal":"User:c","host":"*",
             "operation":"Any","permission":"Any"}]}"#;
        let key = br#"{"type":"Mirror","version":0,"mirror":"m"}"#;
        let StateRecord::Mirror(entry) = decode(Some(key), Some(old)).unwrap() else { panic!("wrong kind") };
        let value = entry.value.clone().unwrap();
        let expected = [
            AclBindingValue {
                resource_type: AclResourceTypeValue::Topic,
                name: "orders".to_owned(),
                pattern_type: AclPatternTypeValue::Literal,
                principal: "User:alice".to_owned(),
                host: "*".to_owned(),
                operation: AclOperationValue::DescribeConfigs,
                permission: AclPermissionValue::Allow,
            },
            AclBindingValue {
                resource_type: AclResourceTypeValue::TransactionalId,
                name: "tx".to_owned(),
                pattern_type: AclPatternTypeValue::Prefixed,
                principal: "User:bob".to_owned(),
                host: "10.0.0.1".to_owned(),
                operation: AclOperationValue::IdempotentWrite,
                permission: AclPermissionValue::Deny,
            },
            AclBindingValue {
                resource_type: AclResourceTypeValue::Unknown,
                name: "x".to_owned(),
                pattern_type: AclPatternTypeValue::Unknown,
                principal: "User:c".to_owned(),
                host: "*".to_owned(),
                operation: AclOperationValue::Unknown,
                permission: AclPermissionValue::Unknown,
            },
        ];
        assert_eq!(value.created_acls, expected);
        let written = String::from_utf8(StateRecord::Mirror(entry).encode(n16()).value.unwrap()).unwrap();
        assert!(
            written.contains(
                r#"{"resource_type":"topic","name":"orders","pattern_type":"literal","principal":"User:alice","host":"*","operation":"describe_configs","permission":"allow"}"#
            ),
            "{written}"
        );
        assert!(written.contains(r#""resource_type":"transactional_id""#), "{written}");
        assert!(written.contains(r#""operation":"idempotent_write","permission":"deny""#), "{written}");
        for debug_text in ["\"Topic\"", "\"Literal\"", "\"DescribeConfigs\"", "\"Allow\""] {
            assert!(!written.contains(debug_text), "{debug_text} in {written}");
        }
    }

    #[test]
    fn partition_level_records_of_one_partition_share_a_state_partition() {
        let records = samples();
        let state = records[4].state_partition(n16());
        assert_eq!(records[10].state_partition(n16()), state);
        assert_eq!(state, state_partition("m", "T1", 2, n16()));
        for mirror_level in [&records[0], &records[2], &records[6], &records[8]] {
            assert_eq!(mirror_level.state_partition(n16()), mirror_partition("m", n16()));
        }
    }

    fn decode_error(key: &[u8], value: Option<&[u8]>) -> DecodeError {
        decode(Some(key), value).unwrap_err()
    }

    #[test]
    fn decode_errors_are_distinguished_and_readable() {
        let mirror_key: &[u8] = br#"{"type":"Mirror","version":0,"mirror":"m"}"#;
        assert_eq!(decode(None, Some(b"{}")), Err(DecodeError::MissingKey));

        let e = decode_error(b"not json", None);
        assert!(matches!(e, DecodeError::Malformed { part: Part::Key, kind: None, .. }));
        assert!(e.to_string().starts_with("malformed state record key: expected ident"), "{e}");

        let e = decode_error(br#"{"type":"Mirror","version":0}"#, None);
        assert_eq!(e.to_string(), "malformed state record key (Mirror): missing field `mirror` at line 1 column 29");

        let e = decode_error(br#"{"type":"Shadow","version":0}"#, None);
        assert_eq!(e, DecodeError::UnknownType { part: Part::Key, type_name: "Shadow".to_owned() });
        assert_eq!(e.to_string(), r#"state record key has unknown type "Shadow" (written by a newer kmirror?)"#);

        let e = decode_error(br#"{"type":"Mirror","version":2,"mirror":"m"}"#, None);
        assert_eq!(
            e,
            DecodeError::UnknownVersion { part: Part::Key, kind: RecordKind::Mirror, version: 2, supported: 0 }
        );

        let e = decode_error(mirror_key, Some(br#"{"type":"Mirror","version":1}"#));
        assert!(matches!(e, DecodeError::UnknownVersion { part: Part::Value, version: 1, .. }));

        let e = decode_error(mirror_key, Some(br#"{"type":"MirrorTopic","version":0}"#));
        assert_eq!(e.to_string(), r#"Mirror record value does not match its key: the value's type is "MirrorTopic""#);

        let e = decode_error(mirror_key, Some(br#"{"type":"Banana","version":0}"#));
        assert!(matches!(e, DecodeError::KeyValueMismatch { .. }));

        let mut other = partition_state();
        other.partition = 3;
        let value = serde_json::to_vec(&Envelope { kind: "MirrorPartitionState", version: 0, body: &other }).unwrap();
        let key = br#"{"type":"MirrorPartitionState","version":0,"mirror":"m","topic_id":"T1","partition":2}"#;
        let e = decode_error(key, Some(&value));
        assert_eq!(
            e.to_string(),
            "MirrorPartitionState record value does not match its key: partition is 2 in the key but 3 in the value"
        );

        let e = decode_error(mirror_key, Some(br#"{"type":"Mirror","version":0,"name":"m"}"#));
        assert!(matches!(e, DecodeError::Malformed { part: Part::Value, kind: Some(RecordKind::Mirror), .. }));
    }

    #[test]
    fn offset_runs_must_start_at_the_keys_offset() {
        let key = br#"{"type":"OffsetRuns","version":0,"mirror":"m","topic_id":"T1","partition":2,"first_destination_offset":40}"#;
        let mut runs = offset_runs();
        let value = serde_json::to_vec(&Envelope { kind: "OffsetRuns", version: 0, body: &runs }).unwrap();
        assert!(matches!(decode_error(key, Some(&value)), DecodeError::KeyValueMismatch { .. }));
        runs.runs.clear();
        let value = serde_json::to_vec(&Envelope { kind: "OffsetRuns", version: 0, body: &runs }).unwrap();
        assert_eq!(
            decode_error(key, Some(&value)),
            DecodeError::Invalid { kind: RecordKind::OffsetRuns, detail: "no runs".to_owned() }
        );
        assert_eq!(runs.key(), None);
    }

    #[test]
    fn last_mirror_epochs_merge_per_topic_and_stay_sorted() {
        let mut lme = LastMirrorEpochsValue::default();
        lme.set_epochs("orders", [(1, 4), (0, 3)]);
        lme.set_epochs("audit", [(0, 1)]);
        lme.set_epochs("orders", [(1, 5), (2, 2)]);
        assert_eq!(lme.epoch("orders", 0), Some(3));
        assert_eq!(lme.epoch("orders", 1), Some(5));
        assert_eq!(lme.epoch("orders", 9), None);
        assert_eq!(lme.epoch("audit", 0), Some(1));
        let names: Vec<&str> = lme.topics.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["audit", "orders"]);
        let indexes: Vec<i32> = lme.topics[1].partitions.iter().map(|p| p.partition_index).collect();
        assert_eq!(indexes, [0, 1, 2]);
        assert!(lme.remove_topic("audit"));
        assert!(!lme.remove_topic("audit"));
        assert_eq!(lme.epoch("audit", 0), None);
    }

    #[test]
    fn debug_redacts_secret_looking_properties() {
        let mut properties = BTreeMap::new();
        properties.insert("sasl.password".to_owned(), "hunter2".to_owned());
        properties.insert("ssl.key.pem".to_owned(), "-----BEGIN".to_owned());
        properties.insert("sasl.mechanism".to_owned(), "PLAIN".to_owned());
        let source = SourceClusterValue { bootstrap_servers: "a:1".to_owned(), properties };
        let debug = format!("{source:?}");
        assert!(!debug.contains("hunter2") && !debug.contains("BEGIN"), "{debug}");
        assert!(debug.contains("PLAIN"), "{debug}");
    }

    #[test]
    fn unknown_type_names_are_shortened() {
        let long = "x".repeat(1_000);
        let key = format!(r#"{{"type":"{long}","version":0}}"#);
        let DecodeError::UnknownType { type_name, .. } = decode_error(key.as_bytes(), None) else { panic!() };
        assert_eq!(type_name.len(), 64);
    }

    fn encoded_samples() -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
        samples()
            .iter()
            .map(|record| {
                let e = record.encode(n16());
                (e.key, e.value)
            })
            .collect()
    }

    /// Encodes a value as written (encoding does not check bounds) and decodes it back.
    fn reread(record: &StateRecord) -> Result<StateRecord, DecodeError> {
        let e = record.encode(n16());
        decode(Some(&e.key), e.value.as_deref())
    }

    fn out_of_bounds(record: &StateRecord) -> (&'static str, i64, i64) {
        match reread(record) {
            Err(DecodeError::OutOfBounds { field, value, max, .. }) => (field, value, max),
            other => panic!("expected OutOfBounds, got {other:?}"),
        }
    }

    fn topic_with(partition_count: i32) -> StateRecord {
        let value = MirrorTopicValue {
            mirror: "m".to_owned(),
            topic: "orders".to_owned(),
            source_topic_id: "T1".to_owned(),
            destination_topic_id: None,
            desired_state: DesiredStateValue::Mirroring,
            truncation: TruncationValue::None,
            partition_count,
            created_at: 1,
            updated_at: 1,
        };
        StateRecord::MirrorTopic(Entry::put(value.key(), value))
    }

    #[test]
    fn a_hostile_partition_count_or_index_is_reported_not_acted_on() {
        let max = i64::from(MAX_PARTITION_COUNT);
        // Loading creates a partition for each of 0..partition_count: 2^31 - 1 must never get there.
        assert_eq!(out_of_bounds(&topic_with(i32::MAX)), ("partition_count", i64::from(i32::MAX), max));
        assert_eq!(out_of_bounds(&topic_with(-1)), ("partition_count", -1, max));
        assert_eq!(
            reread(&topic_with(i32::MAX)).unwrap_err().to_string(),
            format!("invalid MirrorTopic record: partition_count is 2147483647, outside 0..={max}")
        );
        assert!(reread(&topic_with(MAX_PARTITION_COUNT)).is_ok(), "the cap itself is allowed");

        let mut state = partition_state();
        state.partition = MAX_PARTITION_COUNT;
        let record = StateRecord::PartitionState(Entry::put(state.key(), state));
        assert_eq!(out_of_bounds(&record), ("partition", max, max - 1));
        let mut runs = offset_runs();
        runs.partition = -3;
        let record = StateRecord::OffsetRuns(Entry::put(runs.key().unwrap(), runs));
        assert_eq!(out_of_bounds(&record), ("partition", -3, max - 1));

        let lme = |partition_index| {
            let value = LastMirrorEpochsValue {
                topics: vec![LmeTopicValue {
                    name: "orders".to_owned(),
                    partitions: vec![LmePartitionValue { partition_index, last_mirrored_epoch: 1 }],
                }],
            };
            StateRecord::LastMirrorEpochs(Entry::put(MirrorKey { mirror: "m".to_owned() }, value))
        };
        assert_eq!(out_of_bounds(&lme(i32::MIN)), ("partition_index", i64::from(i32::MIN), max - 1));
        assert!(reread(&lme(MAX_PARTITION_COUNT - 1)).is_ok());
    }

    #[test]
    fn lists_above_the_cap_are_reported_not_kept() {
        let max = MAX_RECORD_LIST_LEN as i64;
        let mut runs = offset_runs();
        runs.runs = (0..=MAX_RECORD_LIST_LEN as i64).map(|i| RunValue(2 * i, 41 + i, 1)).collect();
        let record = StateRecord::OffsetRuns(Entry::put(runs.key().unwrap(), runs));
        assert_eq!(out_of_bounds(&record), ("runs", max + 1, max));

        // One entry per partition: a LastMirrorEpochs topic longer than a topic can be.
        let partitions = (0..=MAX_PARTITION_COUNT)
            .map(|p| LmePartitionValue { partition_index: p.min(MAX_PARTITION_COUNT - 1), last_mirrored_epoch: 0 })
            .collect();
        let value = LastMirrorEpochsValue { topics: vec![LmeTopicValue { name: "orders".to_owned(), partitions }] };
        let record = StateRecord::LastMirrorEpochs(Entry::put(MirrorKey { mirror: "m".to_owned() }, value));
        let max_partitions = i64::from(MAX_PARTITION_COUNT);
        assert_eq!(out_of_bounds(&record), ("partitions", max_partitions + 1, max_partitions));

        let Some(StateRecord::Operation(Entry { value: Some(mut operation), .. })) =
            samples().into_iter().find(|r| matches!(r, StateRecord::Operation(Entry { value: Some(_), .. })))
        else {
            panic!("an operation sample")
        };
        operation.topics = vec![String::new(); MAX_RECORD_LIST_LEN + 1];
        let record = StateRecord::Operation(Entry::put(operation.key(), operation));
        assert_eq!(out_of_bounds(&record), ("topics", max + 1, max));
    }

    proptest! {
        #[test]
        fn decode_never_panics_on_random_bytes(
            key in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..200)),
            value in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..200)),
        ) {
            let _ = decode(key.as_deref(), value.as_deref());
        }

        #[test]
        fn decode_never_panics_on_mutated_records(
            sample in 0_usize..16,
            flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>(), any::<bool>()), 1..6),
        ) {
            let (mut key, mut value) = encoded_samples().swap_remove(sample);
            for (index, byte, in_key) in flips {
                let target = if in_key { &mut key } else { value.get_or_insert_with(Vec::new) };
                if target.is_empty() {
                    target.push(byte);
                } else {
                    let i = index.index(target.len());
                    target[i] = byte;
                }
            }
            if let Ok(record) = decode(Some(&key), value.as_deref()) {
                // Whatever still decodes re-encodes to something that decodes to the same record.
                let e = record.encode(n16());
                prop_assert_eq!(decode(Some(&e.key), e.value.as_deref()), Ok(record));
            }
        }

        #[test]
        fn partition_states_round_trip(
            mirror in ".{0,20}",
            topic_id in "[A-Za-z0-9_-]{0,22}",
            partition in 0..MAX_PARTITION_COUNT,
            state_epoch in any::<u64>(),
            next in any::<i64>(),
            message in proptest::option::of(".{0,40}"),
        ) {
            let mut value = partition_state();
            value.mirror = mirror;
            value.topic_id = topic_id;
            value.partition = partition;
            value.state_epoch = state_epoch;
            value.position = Some(PositionValue { next_source_offset: next, source_leader_epoch: -1, destination_end_offset: 0 });
            value.error = message.map(|message| ErrorValue { code: "TIMEOUT".to_owned(), message, retryable: true, since: 0 });
            let record = StateRecord::PartitionState(Entry::put(value.key(), value));
            let e = record.encode(n16());
            prop_assert_eq!(decode(Some(&e.key), e.value.as_deref()), Ok(record));
        }
    }
}
