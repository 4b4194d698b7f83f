//! What the engine must do after a transition.
//!
//! The engine persists [`Step::next`](super::Step) to `__mirror_state` (compare-and-set on the
//! state epoch) **before** it runs the step's actions, in order. Every action is idempotent: after
//! a crash the engine reloads the record and applies [`Event::Loaded`](super::Event::Loaded),
//! which issues the current state's actions again, so an action may run more than once. An action that fails is reported as
//! [`Event::Error`](super::Event::Error) for the partition; the remaining actions of the step
//! are skipped.

use serde::{Deserialize, Serialize};

use super::error_code::ErrorCode;
use super::record::MirrorPosition;
use super::time::Timestamp;

/// One effect for the engine to carry out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Action {
    // --- PREPARING (DESIGN.md §3, §5); the engine reports `Prepared` after the last one.
    /// Verify that the source cluster ID is still the one the mirror was created with
    /// (`SOURCE_CLUSTER_ID_MISMATCH` otherwise).
    CheckSourceClusterId,
    /// Verify the recorded source and destination topic IDs (`SOURCE_TOPIC_DELETED`,
    /// `SOURCE_TOPIC_RECREATED` otherwise).
    CheckTopicIds,
    /// Create the destination topic with the source's partition count and synced configs, or
    /// verify an existing one (`PARTITION_COUNT_DECREASED` otherwise).
    EnsureDestinationTopic,
    /// Resync: delete the partition's records (`DeleteRecords` up to the high watermark),
    /// copying them to `<topic>.kmirror-diverged` first when `quarantine` is set.
    DeleteDestinationRecords {
        /// Copy the records before deleting them.
        quarantine: bool,
    },
    /// Decide the start position from the lineage and offset map (DESIGN.md §5) and report it
    /// with `Prepared`. First resolve any open transaction holding this partition's records, so
    /// the position read is final. With `resync`, start at the source log start. Without it,
    /// refuse with `DESTINATION_DIVERGED` (with the exact count and offset range) when the
    /// destination holds local writes past the stop point.
    ComputeStartPosition {
        /// The start follows a resync deletion.
        resync: bool,
    },

    // --- Data path (DESIGN.md §4).
    /// Add the partition to the mirror fetcher, seeking the source to `from` (offset and leader
    /// epoch, so KIP-320 validation detects source truncation). Emitted exactly when the
    /// partition enters MIRRORING.
    Assign {
        /// Where fetching starts.
        from: MirrorPosition,
    },
    /// Remove the partition from the mirror fetcher and drop its buffered records.
    Unassign,
    /// Commit the open destination transaction (it carries this partition's last records and
    /// position); report the new position with `Progress`.
    CommitOpenTransaction,
    /// Abort the open destination transaction if it holds this partition's records (the seed's
    /// truncate-to-LSO); partitions sharing it rewind to their committed positions.
    AbortOpenTransaction,

    // --- STOPPING (the failover sequence); the engine reports `Stopped` after the last one.
    /// Persist the LME, the last mirrored source offset and the destination stop offset
    /// (`LastMirrorEpochs` record plus the partition's stop point).
    PersistLastMirrorEpochs,
    /// Re-initialise the transactional id so that no stale kmirror writer can append to the
    /// partition any more (the seed's `MIRROR_PID_RESET` barrier).
    FenceProducer,

    // --- FAILED.
    /// Deliver [`Event::Retry`](super::Event::Retry) at `at`.
    ScheduleRetry {
        /// When the retry is due.
        at: Timestamp,
        /// Which automatic retry this will be (1-based).
        attempt: u32,
    },
    /// Drop the pending retry timer, if any.
    CancelRetry,
    /// Raise (or replace) the partition's alert.
    Alert(Alert),
    /// Clear the partition's alert.
    ClearAlert,

    // --- Remove.
    /// The topic left the mirror: drop the partition's in-memory engine state (timers, buffers,
    /// offset-map cache) and stop syncing its metadata.
    ForgetPartition,
}

/// An operator-facing alarm about one partition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Alert {
    /// How urgent it is.
    pub severity: Severity,
    /// The cause.
    pub code: ErrorCode,
    /// What happened and what to do.
    pub message: String,
}

/// Alert urgency.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Severity {
    /// kmirror is retrying on its own.
    Warning,
    /// An operator must act.
    Critical,
}
