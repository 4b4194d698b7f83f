//! The values of MirrorPartitionState and LastMirrorEpochs records: a partition's state and the
//! leader epochs it was last mirrored at.

use serde::{Deserialize, Serialize};

use super::keys::PartitionKey;
use super::mirror::TruncationValue;

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
