//! The `__mirror_state` record format: versioned, canonical-JSON keys and values.
//!
//! # Canonical form
//!
//! Every key and value is one JSON object, written by [`serde_json`] without whitespace, whose
//! first two members are `"type"` (the [`RecordKind`] name) and `"version"`, followed by the
//! fields of the matching struct **in declaration order**. Maps are `BTreeMap`s, so their
//! members are sorted; absent optional fields are written as `null`, never left out; numbers are
//! integers. So the same record always encodes to the same bytes, which makes keys usable for
//! compaction and values comparable byte for byte. Decoding accepts any member order and ignores
//! members it does not know.
//!
//! # Versions
//!
//! The structs here are the persisted format, kept apart from the domain types on purpose: a
//! domain refactor cannot change what is on disk without a visible edit to this module. Within a
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

use std::fmt;
use std::num::NonZeroU32;

use serde::Serialize;

use super::partitioning::{mirror_partition, state_partition};

mod decoding;
mod drill;
mod instance;
mod keys;
mod mirror;
mod offsets;
mod operation;
mod partition;
#[cfg(test)]
mod tests;

pub use decoding::*;
pub use drill::*;
pub use instance::*;
pub use keys::*;
pub use mirror::*;
pub use offsets::*;
pub use operation::*;
pub use partition::*;

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
