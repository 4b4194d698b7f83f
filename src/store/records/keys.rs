//! Record keys: a record's type, key version and identifying fields.

use serde::{Deserialize, Serialize};

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
