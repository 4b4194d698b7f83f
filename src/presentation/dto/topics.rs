//! Topics and partitions.

use std::collections::BTreeMap;

use serde::Serialize;
use utoipa::ToSchema;

use crate::domain::PartitionState;
use crate::engine::{PartitionSnapshot, TopicSnapshot};

use super::shared::PartitionStateDto;
use super::{finite, state_counts, ts};

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
    /// MIRRORING with its data path closed because it had nothing to copy for
    /// `engine.close_idle_data_paths_after_ms`: the next lag refresh that finds new source
    /// records hands it to a data path again. Shown by the instance that owns the slot.
    pub idle: bool,
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
            idle: p.idle,
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

/// The order partitions are listed in by state (`sort=state`, the incident report): FAILED
/// first, then along the lifecycle.
pub fn state_rank(s: PartitionState) -> u8 {
    match s {
        PartitionState::Failed => 0,
        PartitionState::Unknown => 1,
        PartitionState::Preparing => 2,
        PartitionState::Mirroring => 3,
        PartitionState::Pausing => 4,
        PartitionState::Paused => 5,
        PartitionState::Stopping => 6,
        PartitionState::Stopped => 7,
    }
}
