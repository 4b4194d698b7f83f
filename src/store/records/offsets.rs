//! The value of an OffsetRuns record: one data transaction's offset-map runs and the new
//! committed position of a partition.

use serde::{Deserialize, Serialize};

use super::keys::OffsetRunsKey;
use super::partition::PositionValue;

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
