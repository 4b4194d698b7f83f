//! The persisted per-partition record (the value of a `MirrorPartitionState` record in
//! `__mirror_state`) and the positions it carries.
//!
//! # Invariants
//!
//! [`PartitionRecord::validate`] checks them; every record produced by
//! [`transition`](super::transition()) from a valid record satisfies them.
//!
//! - **error-iff-failed**: `error` is set exactly when the state is FAILED.
//! - **retry-only-when-retryable**: `next_retry_at` is set only in FAILED with a retryable code.
//! - **position-while-mirrored**: MIRRORING, PAUSING and PAUSED always have a committed position.
//! - **stop-point-when-stopped**: STOPPED always has a stop point.
//! - **truncation-only-while-starting**: a truncation mode other than `none` is kept only in
//!   PREPARING, or in FAILED when the failure happened in PREPARING (so the retry repeats it).

use std::fmt;

use serde::{Deserialize, Serialize};

use super::error_code::ErrorCode;
use super::state::PartitionState;
use super::time::Timestamp;

/// The committed mirrored position of one partition: what the last committed destination
/// transaction covered.
///
/// It moves forward only ([`MirrorPosition::is_behind`]); the single exception is the start
/// of a resync, which mirrors the source again from its log start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MirrorPosition {
    /// The next source offset to fetch.
    pub next_source_offset: i64,
    /// The greatest source leader epoch mirrored so far (the LME); -1 before the first record.
    pub source_leader_epoch: i32,
    /// The destination log end offset after the last committed mirrored batch.
    pub destination_end_offset: i64,
}

impl MirrorPosition {
    /// Whether any component of `self` is smaller than in `other`, i.e. moving from `other` to
    /// `self` would go backwards.
    #[must_use]
    pub const fn is_behind(&self, other: &Self) -> bool {
        self.next_source_offset < other.next_source_offset
            || self.source_leader_epoch < other.source_leader_epoch
            || self.destination_end_offset < other.destination_end_offset
    }
}

impl fmt::Display for MirrorPosition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "source offset {} (leader epoch {}), destination end offset {}",
            self.next_source_offset, self.source_leader_epoch, self.destination_end_offset
        )
    }
}

/// Where mirroring ended at STOPPED: the failover point that a restart and a failback start from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct StopPoint {
    /// The last mirrored source leader epoch (LME), as persisted in `LastMirrorEpochs`; -1 when
    /// nothing was mirrored.
    pub last_mirror_epoch: i32,
    /// The source offset of the last mirrored record; `None` when nothing was mirrored. Records
    /// after it on the source never reached the destination (what failback needs).
    pub last_mirrored_source_offset: Option<i64>,
    /// The destination log end offset at STOPPED; every record at or after it is a local write.
    pub destination_stop_offset: i64,
}

impl fmt::Display for StopPoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LME {}, last mirrored source offset ", self.last_mirror_epoch)?;
        match self.last_mirrored_source_offset {
            Some(offset) => write!(f, "{offset}")?,
            None => f.write_str("none")?,
        }
        write!(f, ", destination stop offset {}", self.destination_stop_offset)
    }
}

/// How a start treats records on the destination that would be in the way (DESIGN.md §5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum Truncation {
    /// Refuse: if the destination has local writes past the stop point, PREPARING fails with
    /// `DESTINATION_DIVERGED` and reports them.
    #[default]
    None,
    /// Delete the partition's records (`DeleteRecords` up to the high watermark) and mirror the
    /// source again from its log start. Always applied when chosen, divergent or not, so the
    /// outcome does not depend on a race with local writers.
    Resync {
        /// Copy the records to `<topic>.kmirror-diverged` before deleting them.
        quarantine: bool,
    },
}

impl Truncation {
    /// Whether this is [`Truncation::Resync`].
    #[must_use]
    pub const fn is_resync(self) -> bool {
        matches!(self, Self::Resync { .. })
    }
}

/// The failure recorded with a FAILED partition.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PartitionError {
    /// The classified cause.
    pub code: ErrorCode,
    /// Details for operators (cluster IDs seen, offsets, the client error text).
    pub message: String,
    /// When this error was recorded.
    pub since: Timestamp,
}

/// The persisted state of one mirror partition.
///
/// The store key (mirror name, topic ID, partition) is not part of the value. Change a record
/// only through [`transition`](super::transition()): every accepted event yields a successor with
/// `state_epoch + 1`, and the store rejects a write whose expected epoch is stale, which fences
/// a deposed writer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionRecord {
    /// The current state.
    pub state: PartitionState,
    /// Incremented by exactly one on every accepted event.
    pub state_epoch: u64,
    /// When the partition entered `state` (self-transitions keep it).
    pub state_since: Timestamp,
    /// When the record last changed.
    pub updated_at: Timestamp,
    /// The state before the last change of state; in FAILED, the state that failed.
    pub previous_state: Option<PartitionState>,
    /// The committed mirrored position; `None` until the first preparation completes.
    pub position: Option<MirrorPosition>,
    /// The stop point in force: set at STOPPED and kept until mirroring resumes (entering
    /// MIRRORING clears it), so a stop that follows an unfinished restart keeps the original
    /// failover point instead of counting local writes as mirrored data.
    pub stop_point: Option<StopPoint>,
    /// The truncation mode of the start in progress.
    #[serde(default)]
    pub truncation: Truncation,
    /// The failure, in FAILED only.
    pub error: Option<PartitionError>,
    /// Automatic retries since the partition last made progress (reset by progress, PAUSED,
    /// STOPPED, start and remove).
    pub retry_count: u32,
    /// When the next automatic retry is due; `None` when none is scheduled (non-retryable error,
    /// retries exhausted, or not FAILED).
    pub next_retry_at: Option<Timestamp>,
}

impl PartitionRecord {
    /// A partition with no state yet: UNKNOWN at state epoch 0.
    #[must_use]
    pub const fn new(now: Timestamp) -> Self {
        Self {
            state: PartitionState::Unknown,
            state_epoch: 0,
            state_since: now,
            updated_at: now,
            previous_state: None,
            position: None,
            stop_point: None,
            truncation: Truncation::None,
            error: None,
            retry_count: 0,
            next_retry_at: None,
        }
    }

    /// In FAILED, the state that failed.
    #[must_use]
    pub fn failed_in(&self) -> Option<PartitionState> {
        (self.state == PartitionState::Failed).then_some(self.previous_state).flatten()
    }

    /// Whether an automatic retry is scheduled and due at `now`.
    #[must_use]
    pub fn is_retry_due(&self, now: Timestamp) -> bool {
        self.next_retry_at.is_some_and(|at| at <= now)
    }

    /// Checks the module-level invariants, e.g. after decoding a record from the store.
    ///
    /// # Errors
    ///
    /// The first [`InvalidRecord`] found.
    pub fn validate(&self) -> Result<(), InvalidRecord> {
        use PartitionState as S;
        let failed = self.state == S::Failed;
        if failed != self.error.is_some() {
            return Err(InvalidRecord::ErrorMismatch { state: self.state });
        }
        if self.next_retry_at.is_some() && !self.error.as_ref().is_some_and(|e| e.code.is_retryable()) {
            return Err(InvalidRecord::RetryWithoutRetryableError { state: self.state });
        }
        if matches!(self.state, S::Mirroring | S::Pausing | S::Paused) && self.position.is_none() {
            return Err(InvalidRecord::MissingPosition { state: self.state });
        }
        if self.state == S::Stopped && self.stop_point.is_none() {
            return Err(InvalidRecord::MissingStopPoint);
        }
        let starting = self.state == S::Preparing || self.failed_in() == Some(S::Preparing);
        if self.truncation.is_resync() && !starting {
            return Err(InvalidRecord::StrayTruncation { state: self.state });
        }
        Ok(())
    }
}

/// A partition record that breaks an invariant (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidRecord {
    /// An error without FAILED, or FAILED without an error.
    #[error("a partition in state {state} must {} an error", if *.state == PartitionState::Failed { "have" } else { "not have" })]
    ErrorMismatch {
        /// The record's state.
        state: PartitionState,
    },
    /// A retry scheduled without a retryable error.
    #[error("a partition in state {state} has a retry scheduled without a retryable error")]
    RetryWithoutRetryableError {
        /// The record's state.
        state: PartitionState,
    },
    /// MIRRORING, PAUSING or PAUSED without a committed position.
    #[error("a partition in state {state} must have a committed position")]
    MissingPosition {
        /// The record's state.
        state: PartitionState,
    },
    /// STOPPED without a stop point.
    #[error("a STOPPED partition must have a stop point")]
    MissingStopPoint,
    /// A truncation mode kept outside a start.
    #[error("a partition in state {state} keeps a truncation mode outside a start")]
    StrayTruncation {
        /// The record's state.
        state: PartitionState,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn position(next: i64, epoch: i32, end: i64) -> MirrorPosition {
        MirrorPosition { next_source_offset: next, source_leader_epoch: epoch, destination_end_offset: end }
    }

    #[test]
    fn is_behind_compares_every_component() {
        let p = position(10, 2, 20);
        assert!(!p.is_behind(&p));
        assert!(position(9, 2, 20).is_behind(&p));
        assert!(position(10, 1, 20).is_behind(&p));
        assert!(position(10, 2, 19).is_behind(&p));
        assert!(!position(11, 3, 21).is_behind(&p));
    }

    #[test]
    fn a_new_record_is_unknown_at_epoch_zero_and_valid() {
        let record = PartitionRecord::new(Timestamp::from_millis(5));
        assert_eq!(record.state, PartitionState::Unknown);
        assert_eq!(record.state_epoch, 0);
        assert_eq!(record.validate(), Ok(()));
    }

    #[test]
    fn validate_reports_broken_invariants() {
        let mut record = PartitionRecord::new(Timestamp::EPOCH);
        record.state = PartitionState::Failed;
        assert_eq!(record.validate(), Err(InvalidRecord::ErrorMismatch { state: PartitionState::Failed }));
        assert_eq!(record.validate().unwrap_err().to_string(), "a partition in state FAILED must have an error");

        let mut record = PartitionRecord::new(Timestamp::EPOCH);
        record.state = PartitionState::Mirroring;
        assert_eq!(record.validate(), Err(InvalidRecord::MissingPosition { state: PartitionState::Mirroring }));

        let mut record = PartitionRecord::new(Timestamp::EPOCH);
        record.state = PartitionState::Stopped;
        assert_eq!(record.validate(), Err(InvalidRecord::MissingStopPoint));

        let mut record = PartitionRecord::new(Timestamp::EPOCH);
        record.truncation = Truncation::Resync { quarantine: false };
        assert_eq!(record.validate(), Err(InvalidRecord::StrayTruncation { state: PartitionState::Unknown }));

        let mut record = PartitionRecord::new(Timestamp::EPOCH);
        record.next_retry_at = Some(Timestamp::EPOCH);
        assert_eq!(
            record.validate(),
            Err(InvalidRecord::RetryWithoutRetryableError { state: PartitionState::Unknown })
        );
    }

    #[test]
    fn record_json_uses_stable_names() {
        let mut record = PartitionRecord::new(Timestamp::from_millis(7));
        record.state = PartitionState::Failed;
        record.previous_state = Some(PartitionState::Preparing);
        record.truncation = Truncation::Resync { quarantine: true };
        record.error = Some(PartitionError {
            code: ErrorCode::DestinationDiverged,
            message: "3 local records at offsets 40..43".to_owned(),
            since: Timestamp::from_millis(7),
        });
        let json = serde_json::to_value(&record).unwrap();
        assert_eq!(json["state"], "FAILED");
        assert_eq!(json["previous_state"], "PREPARING");
        assert_eq!(json["truncation"], serde_json::json!({ "mode": "resync", "quarantine": true }));
        assert_eq!(json["error"]["code"], "DESTINATION_DIVERGED");
        assert_eq!(json["state_since"], 7);
        let back: PartitionRecord = serde_json::from_value(json).unwrap();
        assert_eq!(back, record);
    }

    #[test]
    fn missing_truncation_defaults_to_none() {
        let mut json = serde_json::to_value(PartitionRecord::new(Timestamp::EPOCH)).unwrap();
        json.as_object_mut().unwrap().remove("truncation");
        let record: PartitionRecord = serde_json::from_value(json).unwrap();
        assert_eq!(record.truncation, Truncation::None);
    }

    #[test]
    fn displays_read_naturally() {
        assert_eq!(position(42, 3, 40).to_string(), "source offset 42 (leader epoch 3), destination end offset 40");
        let stop = StopPoint { last_mirror_epoch: 3, last_mirrored_source_offset: None, destination_stop_offset: 9 };
        assert_eq!(stop.to_string(), "LME 3, last mirrored source offset none, destination stop offset 9");
    }
}
