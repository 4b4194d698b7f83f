//! Lineage decisions for restart, failover and failback (DESIGN.md §5), as pure functions.
//!
//! The lineage of a mirror partition is what kmirror knows it wrote to the destination: the
//! committed [`MirrorPosition`] and, after a failover, the [`StopPoint`]. Compared with the
//! destination log as it is now ([`LogBounds`]), it tells
//!
//! - whether records were written locally after the stop point ([`divergence`]),
//! - where a start in the same direction resumes, or why it must not ([`decide_start`]),
//! - what a failover would leave behind on the source ([`failover_impact`]) and what a failback
//!   would find on the old source that never reached the other side ([`failback_divergence`]).
//!
//! # Where kmirror's writes end
//!
//! Counting local writes needs the exact offset where kmirror's own writes end, and kmirror's
//! writes include transaction markers: a commit marker follows the last mirrored record of every
//! transaction, and STOPPING may abort an open transaction (aborted records plus an abort marker).
//! So the committed position's `destination_end_offset` (the offset after the last mirrored
//! record, known inside the transaction) is *not* where kmirror's writes end. The end is taken
//! from the [`StopPoint`]: `destination_stop_offset` is the partition's log end offset read at
//! STOPPED, after the abort and the fence, so every kmirror marker is below it and every offset
//! at or after it is a local write. The engine must record it that way.
//!
//! A partition that was never stopped (no stop point: a retry, or a takeover after a crash) is a
//! read-only mirror, so the offsets between its committed end and the high watermark are kmirror's
//! own markers and aborted batches; they are not divergence. (A foreign write there is the
//! fetcher's `FOREIGN_WRITE` check, not a lineage question.)
//!
//! Counts are offsets: a local transactional writer's markers count as records too, so a count is
//! exact for plain producers and an upper bound otherwise. Records the destination already deleted
//! (below its log start offset) are not counted: they can no longer be in anyone's way.

use std::fmt;

use super::error_code::ErrorCode;
use super::record::{MirrorPosition, StopPoint, Truncation};

/// The offsets of a partition's log as observed now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LogBounds {
    /// The first offset still in the log.
    pub log_start_offset: i64,
    /// The high watermark (the offset after the last replicated record).
    pub high_watermark: i64,
}

impl LogBounds {
    /// Log bounds.
    #[must_use]
    pub const fn new(log_start_offset: i64, high_watermark: i64) -> Self {
        Self { log_start_offset, high_watermark }
    }

    /// Bounds as two ListOffsets reads give them: a log start that was not read (or is out of
    /// range) is clamped into `[0, high_watermark]`, a negative high watermark taken as 0.
    #[must_use]
    pub fn observed(log_start_offset: Option<i64>, high_watermark: i64) -> Self {
        let high_watermark = high_watermark.max(0);
        Self { log_start_offset: log_start_offset.unwrap_or(0).clamp(0, high_watermark), high_watermark }
    }

    const fn validate(self) -> Result<(), LineageError> {
        if self.log_start_offset < 0 || self.high_watermark < self.log_start_offset {
            return Err(LineageError::InvalidLogBounds {
                log_start_offset: self.log_start_offset,
                high_watermark: self.high_watermark,
            });
        }
        Ok(())
    }
}

/// Records present in a log after the offset where the lineage says the mirrored data ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Divergence {
    /// How many (offsets; see the module docs).
    pub local_records: i64,
    /// Their offsets, half-open `[start, end)`; `None` when there are none.
    pub range: Option<(i64, i64)>,
}

impl Divergence {
    /// No divergent records.
    pub const NONE: Self = Self { local_records: 0, range: None };

    /// The records of `log` at or after `end_of_lineage` that are still in the log.
    #[must_use]
    pub fn after(end_of_lineage: i64, log: LogBounds) -> Self {
        let start = end_of_lineage.max(log.log_start_offset);
        if start >= log.high_watermark {
            return Self::NONE;
        }
        Self { local_records: log.high_watermark - start, range: Some((start, log.high_watermark)) }
    }

    /// Whether there is any divergent record.
    #[must_use]
    pub const fn is_diverged(&self) -> bool {
        self.local_records > 0
    }
}

impl fmt::Display for Divergence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.range {
            None => f.write_str("no local records"),
            Some((start, end)) => {
                let plural = if self.local_records == 1 { "" } else { "s" };
                write!(f, "{} local record{plural} at offsets {start}..{end}", self.local_records)
            }
        }
    }
}

/// The records on the destination after kmirror's last write (see the module docs for where that
/// is): local writes since the failover, which a restart in the same direction must not mirror
/// over.
///
/// # Errors
///
/// [`LineageError::InvalidLogBounds`] for impossible log bounds.
pub fn divergence(stop: &StopPoint, destination: LogBounds) -> Result<Divergence, LineageError> {
    destination.validate()?;
    Ok(Divergence::after(stop.destination_stop_offset, destination))
}

/// What kmirror knows when it decides where a start (first start, restart after a failover,
/// retry, takeover) resumes: the input of the `ComputeStartPosition` action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StartInput {
    /// The committed position, if mirroring ever started.
    pub position: Option<MirrorPosition>,
    /// The stop point in force, if the partition was stopped (failed over) since it last mirrored.
    pub stop: Option<StopPoint>,
    /// The truncation mode the start asked for.
    pub truncation: Truncation,
    /// The destination partition now (after any open kmirror transaction was resolved).
    pub destination: LogBounds,
    /// The source partition's log start offset now (where a first start or a resync begins).
    pub source_log_start_offset: i64,
}

/// Where a start resumes, or why it must not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartDecision {
    /// Mirror from here: nothing on the destination is in the way.
    Incremental {
        /// The next source offset to fetch.
        from_source_offset: i64,
        /// The leader epoch of the last mirrored record (the LME), for KIP-320 validation of the
        /// seek; -1 when nothing was mirrored.
        leader_epoch: i32,
        /// The destination offset the next mirrored record will follow (the high watermark).
        destination_end_offset: i64,
    },
    /// Do not start: the partition fails with the refusal's code and message.
    Refuse(Refusal),
    /// Truncation mode `resync`: delete the destination partition's records (DeleteRecords up to
    /// `delete_up_to`), then mirror the source again from `from_source_offset`. Applied whenever it
    /// is chosen, divergent or not.
    Resync {
        /// The DeleteRecords offset: the destination high watermark.
        delete_up_to: i64,
        /// Copy the records to `<topic>.kmirror-diverged` first.
        quarantine: bool,
        /// The source log start offset.
        from_source_offset: i64,
        /// How many records (offsets) the deletion removes; 0 when it already ran.
        records_deleted: i64,
        /// The local writes among them (what a refusal would have reported).
        divergence: Divergence,
    },
}

impl StartDecision {
    /// The position mirroring starts at (for [`Event::Prepared`](super::Event::Prepared)), once
    /// a resync's deletion has run; `None` for a refusal.
    #[must_use]
    pub const fn start_position(&self) -> Option<MirrorPosition> {
        match *self {
            Self::Incremental { from_source_offset, leader_epoch, destination_end_offset } => Some(MirrorPosition {
                next_source_offset: from_source_offset,
                source_leader_epoch: leader_epoch,
                destination_end_offset,
            }),
            Self::Resync { delete_up_to, from_source_offset, .. } => Some(MirrorPosition {
                next_source_offset: from_source_offset,
                source_leader_epoch: -1,
                destination_end_offset: delete_up_to,
            }),
            Self::Refuse(_) => None,
        }
    }
}

/// Why a start is refused; always [`ErrorCode::DestinationDiverged`], which a start with
/// truncation mode `resync` overcomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Records were written on the destination after kmirror's last write.
    LocalWrites {
        /// Where kmirror's writes end.
        lineage_end: i64,
        /// The records after it.
        divergence: Divergence,
    },
    /// The destination no longer has records kmirror wrote (its high watermark is below the end of
    /// the lineage: an unclean leader election on the destination, or records deleted past it), so
    /// an incremental start would leave a hole in the mirrored data.
    DestinationBehind {
        /// Where kmirror's writes end.
        lineage_end: i64,
        /// The destination high watermark now.
        high_watermark: i64,
    },
}

impl Refusal {
    /// The error code the partition fails with.
    #[must_use]
    pub const fn code(&self) -> ErrorCode {
        ErrorCode::DestinationDiverged
    }

    /// The local writes, if that is the reason.
    #[must_use]
    pub const fn divergence(&self) -> Option<Divergence> {
        match *self {
            Self::LocalWrites { divergence, .. } => Some(divergence),
            Self::DestinationBehind { .. } => None,
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::LocalWrites { lineage_end, divergence } => write!(
                f,
                "the destination has {divergence} written after the stop point (offset {lineage_end}); restart \
                 with truncation mode `resync` to delete them and mirror the source again"
            ),
            Self::DestinationBehind { lineage_end, high_watermark } => write!(
                f,
                "the destination ends at offset {high_watermark} but kmirror's mirrored data ends at offset \
                 {lineage_end}: records are missing; restart with truncation mode `resync` to mirror the source \
                 again"
            ),
        }
    }
}

/// Inputs that cannot describe a real partition (a bug in the caller or a corrupt record).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LineageError {
    /// A log whose start is negative or after its high watermark.
    #[error("invalid log bounds: log start offset {log_start_offset}, high watermark {high_watermark}")]
    InvalidLogBounds {
        /// The log start offset.
        log_start_offset: i64,
        /// The high watermark.
        high_watermark: i64,
    },
    /// The stop offset is below the committed destination end: the stop point was not read after
    /// the last commit.
    #[error("the destination stop offset {stop_offset} is below the committed destination end offset {committed_end}")]
    StopBeforeCommittedEnd {
        /// The stop point's destination stop offset.
        stop_offset: i64,
        /// The committed position's destination end offset.
        committed_end: i64,
    },
    /// The committed next source offset is not after the last mirrored source offset.
    #[error("the next source offset {next_source_offset} is not after the last mirrored source offset {last_mirrored}")]
    PositionBeforeStop {
        /// The committed position's next source offset.
        next_source_offset: i64,
        /// The stop point's last mirrored source offset.
        last_mirrored: i64,
    },
}

/// Decides where a start resumes (DESIGN.md §5).
///
/// - Truncation mode `resync`: always [`StartDecision::Resync`] (whatever the lineage says).
/// - Stopped partition: local writes after the stop offset → [`Refusal::LocalWrites`]; otherwise
///   incremental from the committed position (or the record after the last mirrored one).
/// - Never stopped: incremental from the committed position; kmirror's own tail is not divergence
///   (module docs).
/// - Nothing mirrored yet (first start): any record in the destination partition is in the way
///   (the topic existed with data); otherwise incremental from the source log start.
/// - A destination high watermark below the end of the lineage → [`Refusal::DestinationBehind`].
///
/// # Errors
///
/// [`LineageError`] when the inputs are inconsistent.
pub fn decide_start(input: &StartInput) -> Result<StartDecision, LineageError> {
    let destination = input.destination;
    destination.validate()?;
    if let (Some(stop), Some(position)) = (input.stop, input.position) {
        if stop.destination_stop_offset < position.destination_end_offset {
            return Err(LineageError::StopBeforeCommittedEnd {
                stop_offset: stop.destination_stop_offset,
                committed_end: position.destination_end_offset,
            });
        }
        if let Some(last) = stop.last_mirrored_source_offset
            && position.next_source_offset <= last
        {
            return Err(LineageError::PositionBeforeStop {
                next_source_offset: position.next_source_offset,
                last_mirrored: last,
            });
        }
    }

    // Where kmirror's writes end, and whether anything after it counts as local writes.
    let (lineage_end, check_local_writes) = match (input.stop, input.position) {
        (Some(stop), _) => (stop.destination_stop_offset, true),
        (None, Some(position)) => (position.destination_end_offset, false),
        (None, None) => (0, true),
    };
    let divergence = if check_local_writes { Divergence::after(lineage_end, destination) } else { Divergence::NONE };

    if let Truncation::Resync { quarantine } = input.truncation {
        return Ok(StartDecision::Resync {
            delete_up_to: destination.high_watermark,
            quarantine,
            from_source_offset: input.source_log_start_offset,
            records_deleted: destination.high_watermark - destination.log_start_offset,
            divergence,
        });
    }
    if destination.high_watermark < lineage_end {
        return Ok(StartDecision::Refuse(Refusal::DestinationBehind {
            lineage_end,
            high_watermark: destination.high_watermark,
        }));
    }
    if divergence.is_diverged() {
        return Ok(StartDecision::Refuse(Refusal::LocalWrites { lineage_end, divergence }));
    }

    let from_source_offset = match (input.position, input.stop) {
        (Some(position), _) => position.next_source_offset,
        (None, Some(StopPoint { last_mirrored_source_offset: Some(last), .. })) => last + 1,
        (None, _) => input.source_log_start_offset,
    };
    let leader_epoch = match (input.position, input.stop) {
        (Some(position), Some(stop)) => position.source_leader_epoch.max(stop.last_mirror_epoch),
        (Some(position), None) => position.source_leader_epoch,
        (None, Some(stop)) => stop.last_mirror_epoch,
        (None, None) => -1,
    };
    Ok(StartDecision::Incremental {
        from_source_offset,
        leader_epoch,
        destination_end_offset: destination.high_watermark,
    })
}

/// What a failover (stop) would leave unmirrored on the source, for the impact preview.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FailoverImpact {
    /// Source offsets committed on the source but not mirrored yet (the lag): they will not be on
    /// the destination after the failover. Offsets, so an upper bound of records when the source
    /// topic is transactional or compacted.
    pub unmirrored_records: i64,
    /// Their source offsets, half-open `[start, end)`; `None` when there are none.
    pub range: Option<(i64, i64)>,
}

/// The failover impact of one partition: source records from `next_source_offset` (the committed
/// position's, or the source log start when nothing was mirrored) up to the source's last stable
/// offset, the records a read-committed mirror would copy next.
#[must_use]
pub fn failover_impact(next_source_offset: i64, source_last_stable_offset: i64) -> FailoverImpact {
    if source_last_stable_offset <= next_source_offset {
        return FailoverImpact { unmirrored_records: 0, range: None };
    }
    FailoverImpact {
        unmirrored_records: source_last_stable_offset - next_source_offset,
        range: Some((next_source_offset, source_last_stable_offset)),
    }
}

/// Source offsets a STOPPED partition's old source received after the failover: from the first
/// offset known to be written after it (`first_after_stop`: the first record whose time is at or
/// after the failover, or the source's end when kmirror first read it after the failover,
/// whichever is lower; `None` when neither is known) up to its last stable offset, leaving out
/// what was mirrored before the stop. Non-zero means something still writes to the old source (a
/// producer that was not moved, split brain): those records are on neither side's copy, and a
/// failback refuses them as divergent (`failback_divergence`). Offsets, so an upper bound of
/// records when the source topic is transactional.
#[must_use]
pub fn source_writes_after_stop(
    stop: &StopPoint,
    first_after_stop: Option<i64>,
    source_last_stable_offset: i64,
) -> i64 {
    let Some(first) = first_after_stop else { return 0 };
    let mirrored_end = stop.last_mirrored_source_offset.map_or(0, |o| o + 1);
    (source_last_stable_offset - first.max(mirrored_end)).max(0)
}

/// For a failback (the old source becomes a mirror of the old destination): the records on the
/// old source after the last mirrored one, which never reached the other side. An empty result
/// means an incremental failback is possible.
///
/// The mirrored data on the old source ends at the committed position's next source offset, or
/// just after the stop point's last mirrored source offset; with neither, nothing was mirrored and
/// every record of the old source is divergent.
///
/// # Errors
///
/// [`LineageError::InvalidLogBounds`] for impossible log bounds.
pub fn failback_divergence(
    stop: &StopPoint,
    position: Option<&MirrorPosition>,
    old_source: LogBounds,
) -> Result<Divergence, LineageError> {
    old_source.validate()?;
    let mirrored_end = match (position, stop.last_mirrored_source_offset) {
        (Some(position), _) => position.next_source_offset,
        (None, Some(last)) => last + 1,
        (None, None) => 0,
    };
    Ok(Divergence::after(mirrored_end, old_source))
}

/// The other direction's lineage a failback starts from (issue 18): what the mirror that copied
/// this destination (the old source) into this mirror's source (the old destination) recorded when
/// it was failed over, read from that cluster's `__mirror_state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReverseLineage {
    /// On this mirror's destination (the old source): the offset after the last record the other
    /// mirror copied (its committed next source offset, or its last mirrored offset + 1).
    pub mirrored_end: i64,
    /// On this mirror's source (the old destination): where the other mirror's writes end, its
    /// destination stop offset. Everything below it came from this destination; everything from
    /// it on was written there after the failover, and is what a failback copies.
    pub source_stop_offset: i64,
}

impl ReverseLineage {
    /// The reverse lineage of a forward partition that was failed over: `None` when it was never
    /// stopped (no stop point: a failback needs the failover's record of where both sides end).
    #[must_use]
    pub fn of(stop: Option<&StopPoint>, position: Option<&MirrorPosition>) -> Option<Self> {
        let stop = stop?;
        let mirrored_end = match (position, stop.last_mirrored_source_offset) {
            (Some(p), _) => p.next_source_offset,
            (None, Some(last)) => last + 1,
            (None, None) => 0,
        };
        Some(Self { mirrored_end, source_stop_offset: stop.destination_stop_offset })
    }
}

/// The committed records of a partition at or after an offset, as a `read_committed` scan finds
/// them: transaction markers and aborted records are not records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RecordScan {
    /// How many.
    pub records: i64,
    /// The first and last of their offsets (inclusive); `None` when there are none.
    pub offsets: Option<(i64, i64)>,
    /// The earliest and latest of their timestamps (ms); `None` when there are none.
    pub timestamps: Option<(i64, i64)>,
}

/// Decides where a failback starts (DESIGN.md section 5, issue 18): the old source, now this
/// mirror's destination, is adopted as it is when it holds no committed record after the
/// mirrored end (`after`, a scan from [`ReverseLineage::mirrored_end`]); the mirror then starts at
/// the other side's stop offset and copies only what was written there since the failover.
///
/// - Truncation mode `resync`: [`StartDecision::Resync`], as for any start.
/// - The destination ends before the mirrored end (records the other side has are gone here):
///   [`Refusal::DestinationBehind`].
/// - Committed records after the mirrored end (they never reached the other side):
///   [`Refusal::LocalWrites`] with their exact count and offset range.
/// - Otherwise incremental from [`ReverseLineage::source_stop_offset`].
///
/// # Errors
///
/// [`LineageError::InvalidLogBounds`] for impossible log bounds.
pub fn decide_failback(
    lineage: &ReverseLineage,
    destination: LogBounds,
    after: &RecordScan,
    truncation: Truncation,
    source_log_start_offset: i64,
) -> Result<StartDecision, LineageError> {
    destination.validate()?;
    let divergence = match after.offsets {
        Some((first, last)) if after.records > 0 => {
            Divergence { local_records: after.records, range: Some((first, last + 1)) }
        }
        _ => Divergence::NONE,
    };
    if let Truncation::Resync { quarantine } = truncation {
        return Ok(StartDecision::Resync {
            delete_up_to: destination.high_watermark,
            quarantine,
            from_source_offset: source_log_start_offset,
            records_deleted: destination.high_watermark - destination.log_start_offset,
            divergence,
        });
    }
    if destination.high_watermark < lineage.mirrored_end {
        return Ok(StartDecision::Refuse(Refusal::DestinationBehind {
            lineage_end: lineage.mirrored_end,
            high_watermark: destination.high_watermark,
        }));
    }
    if divergence.is_diverged() {
        return Ok(StartDecision::Refuse(Refusal::LocalWrites { lineage_end: lineage.mirrored_end, divergence }));
    }
    Ok(StartDecision::Incremental {
        from_source_offset: lineage.source_stop_offset,
        leader_epoch: -1,
        destination_end_offset: destination.high_watermark,
    })
}

/// What a failback start copies for one partition (issue 18's preview): the source offsets from
/// the other side's stop point to its last stable offset now, and how many records
/// (`read_committed`: transaction markers and aborted records are not records) that range holds.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FailbackCopy {
    pub partition: i32,
    pub from_offset: i64,
    pub to_offset: i64,
    pub records: i64,
}

/// The preview of a failback start of one topic: the mirror on the source whose stopped lineage
/// is adopted, and what each partition copies (everything older is already here).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FailbackPreview {
    pub from_mirror: String,
    pub partitions: Vec<FailbackCopy>,
}

impl FailbackPreview {
    /// Records the failback copies over all partitions.
    pub fn records(&self) -> i64 {
        self.partitions.iter().map(|p| p.records).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_to_the_old_source_count_from_the_failover_or_after_what_was_mirrored() {
        let stop =
            StopPoint { last_mirror_epoch: 3, last_mirrored_source_offset: Some(99), destination_stop_offset: 80 };
        // Nothing written at or after the failover's time.
        assert_eq!(source_writes_after_stop(&stop, None, 120), 0);
        // Records 100..110 were not mirrored but written before the failover (the lag it left
        // behind, not split brain); 110..125 came after it.
        assert_eq!(source_writes_after_stop(&stop, Some(110), 125), 15);
        // A record mirrored before the stop with a timestamp after it (a producer's clock ahead)
        // does not count: it is on the destination.
        assert_eq!(source_writes_after_stop(&stop, Some(95), 104), 4);
        // The source lost records (truncated below the first lookup): never negative.
        assert_eq!(source_writes_after_stop(&stop, Some(110), 90), 0);
        // Nothing was ever mirrored: everything from the failover's time on counts.
        let empty = StopPoint { last_mirror_epoch: -1, last_mirrored_source_offset: None, destination_stop_offset: 0 };
        assert_eq!(source_writes_after_stop(&empty, Some(7), 9), 2);
    }

    fn position(next: i64, epoch: i32, end: i64) -> MirrorPosition {
        MirrorPosition { next_source_offset: next, source_leader_epoch: epoch, destination_end_offset: end }
    }

    fn stop(lme: i32, last: Option<i64>, stop_offset: i64) -> StopPoint {
        StopPoint { last_mirror_epoch: lme, last_mirrored_source_offset: last, destination_stop_offset: stop_offset }
    }

    fn input(position: Option<MirrorPosition>, stop: Option<StopPoint>, log: (i64, i64)) -> StartInput {
        StartInput {
            position,
            stop,
            truncation: Truncation::None,
            destination: LogBounds::new(log.0, log.1),
            source_log_start_offset: 7,
        }
    }

    #[test]
    fn divergence_counts_records_after_the_stop_offset() {
        // The last mirrored record is at 39, its commit marker at 40: stop offset 41.
        let s = stop(3, Some(99), 41);
        assert_eq!(divergence(&s, LogBounds::new(0, 41)), Ok(Divergence::NONE));
        let d = divergence(&s, LogBounds::new(0, 44)).unwrap();
        assert_eq!(d, Divergence { local_records: 3, range: Some((41, 44)) });
        assert_eq!(d.to_string(), "3 local records at offsets 41..44");
        // Local records the destination already deleted are not counted.
        assert_eq!(
            divergence(&s, LogBounds::new(43, 44)).unwrap(),
            Divergence { local_records: 1, range: Some((43, 44)) }
        );
        assert_eq!(divergence(&s, LogBounds::new(44, 44)), Ok(Divergence::NONE));
        assert_eq!(Divergence::NONE.to_string(), "no local records");
        assert!(divergence(&s, LogBounds::new(5, 4)).is_err());
    }

    #[test]
    fn restart_without_local_writes_is_incremental_from_the_committed_position() {
        let i = input(Some(position(100, 4, 39)), Some(stop(4, Some(99), 41)), (0, 41));
        let decision = decide_start(&i).unwrap();
        assert_eq!(
            decision,
            StartDecision::Incremental { from_source_offset: 100, leader_epoch: 4, destination_end_offset: 41 }
        );
        assert_eq!(decision.start_position(), Some(position(100, 4, 41)));
    }

    #[test]
    fn restart_with_local_writes_is_refused_with_the_exact_range() {
        let i = input(Some(position(100, 4, 39)), Some(stop(4, Some(99), 41)), (0, 44));
        let StartDecision::Refuse(refusal) = decide_start(&i).unwrap() else { panic!("expected a refusal") };
        assert_eq!(refusal.code(), ErrorCode::DestinationDiverged);
        assert_eq!(refusal.divergence(), Some(Divergence { local_records: 3, range: Some((41, 44)) }));
        assert_eq!(
            refusal.to_string(),
            "the destination has 3 local records at offsets 41..44 written after the stop point (offset 41); \
             restart with truncation mode `resync` to delete them and mirror the source again"
        );
    }

    #[test]
    fn resync_is_applied_whenever_chosen() {
        let mut i = input(Some(position(100, 4, 39)), Some(stop(4, Some(99), 41)), (10, 44));
        i.truncation = Truncation::Resync { quarantine: true };
        let decision = decide_start(&i).unwrap();
        assert_eq!(
            decision,
            StartDecision::Resync {
                delete_up_to: 44,
                quarantine: true,
                from_source_offset: 7,
                records_deleted: 34,
                divergence: Divergence { local_records: 3, range: Some((41, 44)) },
            }
        );
        assert_eq!(decision.start_position(), Some(position(7, -1, 44)));

        // Not divergent: still a resync; after the deletion ran, it deletes nothing more.
        i.destination = LogBounds::new(44, 44);
        let StartDecision::Resync { records_deleted, divergence, .. } = decide_start(&i).unwrap() else {
            panic!("expected a resync")
        };
        assert_eq!((records_deleted, divergence), (0, Divergence::NONE));
    }

    #[test]
    fn a_partition_never_stopped_resumes_over_its_own_tail() {
        // Committed end 39; the commit marker and an aborted batch of 5 records + marker follow.
        let i = input(Some(position(100, 4, 39)), None, (0, 46));
        assert_eq!(
            decide_start(&i).unwrap(),
            StartDecision::Incremental { from_source_offset: 100, leader_epoch: 4, destination_end_offset: 46 }
        );
    }

    #[test]
    fn a_first_start_needs_an_empty_destination() {
        let i = input(None, None, (0, 0));
        assert_eq!(
            decide_start(&i).unwrap(),
            StartDecision::Incremental { from_source_offset: 7, leader_epoch: -1, destination_end_offset: 0 }
        );
        // The topic existed with records: they are in the way.
        let i = input(None, None, (5, 12));
        let StartDecision::Refuse(refusal) = decide_start(&i).unwrap() else { panic!("expected a refusal") };
        assert_eq!(refusal.divergence(), Some(Divergence { local_records: 7, range: Some((5, 12)) }));
        // The topic existed but its records are all deleted: nothing is in the way.
        let i = input(None, None, (12, 12));
        assert!(matches!(decide_start(&i).unwrap(), StartDecision::Incremental { destination_end_offset: 12, .. }));
    }

    #[test]
    fn a_stop_without_a_position_resumes_after_the_last_mirrored_record() {
        let i = input(None, Some(stop(2, Some(50), 10)), (0, 10));
        assert_eq!(
            decide_start(&i).unwrap(),
            StartDecision::Incremental { from_source_offset: 51, leader_epoch: 2, destination_end_offset: 10 }
        );
        let i = input(None, Some(stop(-1, None, 0)), (0, 0));
        assert!(matches!(decide_start(&i).unwrap(), StartDecision::Incremental { from_source_offset: 7, .. }));
    }

    #[test]
    fn a_destination_that_lost_mirrored_records_is_refused() {
        let i = input(Some(position(100, 4, 39)), Some(stop(4, Some(99), 41)), (0, 30));
        let StartDecision::Refuse(refusal) = decide_start(&i).unwrap() else { panic!("expected a refusal") };
        assert_eq!(refusal, Refusal::DestinationBehind { lineage_end: 41, high_watermark: 30 });
        assert_eq!(refusal.divergence(), None);
        assert!(refusal.to_string().contains("records are missing"));
        // Never stopped, same check against the committed end.
        let i = input(Some(position(100, 4, 39)), None, (0, 30));
        assert!(matches!(decide_start(&i).unwrap(), StartDecision::Refuse(Refusal::DestinationBehind { .. })));
    }

    #[test]
    fn inconsistent_inputs_are_errors() {
        let i = input(Some(position(100, 4, 39)), Some(stop(4, Some(99), 38)), (0, 41));
        assert_eq!(decide_start(&i), Err(LineageError::StopBeforeCommittedEnd { stop_offset: 38, committed_end: 39 }));
        let i = input(Some(position(99, 4, 39)), Some(stop(4, Some(99), 41)), (0, 41));
        assert_eq!(
            decide_start(&i),
            Err(LineageError::PositionBeforeStop { next_source_offset: 99, last_mirrored: 99 })
        );
        let i = input(None, None, (3, 2));
        assert!(matches!(decide_start(&i), Err(LineageError::InvalidLogBounds { .. })));
    }

    #[test]
    fn failover_impact_is_the_lag_to_the_last_stable_offset() {
        assert_eq!(failover_impact(100, 130), FailoverImpact { unmirrored_records: 30, range: Some((100, 130)) });
        assert_eq!(failover_impact(100, 100), FailoverImpact { unmirrored_records: 0, range: None });
        assert_eq!(failover_impact(100, 90), FailoverImpact { unmirrored_records: 0, range: None });
    }

    #[test]
    fn failback_divergence_is_what_the_old_source_has_after_the_mirrored_data() {
        let s = stop(4, Some(99), 41);
        assert_eq!(
            failback_divergence(&s, Some(&position(100, 4, 39)), LogBounds::new(0, 120)),
            Ok(Divergence { local_records: 20, range: Some((100, 120)) })
        );
        // Without a position, the record after the last mirrored one.
        assert_eq!(failback_divergence(&s, None, LogBounds::new(0, 100)), Ok(Divergence::NONE));
        // Nothing mirrored: the whole old source.
        assert_eq!(
            failback_divergence(&stop(-1, None, 0), None, LogBounds::new(5, 8)),
            Ok(Divergence { local_records: 3, range: Some((5, 8)) })
        );
    }

    #[test]
    fn a_failback_is_incremental_when_nothing_was_written_after_the_mirrored_end() {
        // The forward mirror copied A[0..100) into B[0..120) (markers) and stopped at B 120.
        let stop = stop(3, Some(99), 120);
        let lineage = ReverseLineage::of(Some(&stop), Some(&position(100, 3, 118))).unwrap();
        assert_eq!(lineage, ReverseLineage { mirrored_end: 100, source_stop_offset: 120 });
        assert_eq!(ReverseLineage::of(Some(&stop), None).unwrap().mirrored_end, 100);
        assert_eq!(ReverseLineage::of(None, Some(&position(100, 3, 118))), None, "never failed over");
        // A ends at 104 with only transaction markers after 100: no record there.
        let d = decide_failback(&lineage, LogBounds::new(0, 104), &RecordScan::default(), Truncation::None, 0);
        assert_eq!(
            d,
            Ok(StartDecision::Incremental { from_source_offset: 120, leader_epoch: -1, destination_end_offset: 104 })
        );
    }

    #[test]
    fn a_failback_over_records_that_never_crossed_is_refused_with_their_exact_count() {
        let lineage = ReverseLineage { mirrored_end: 100, source_stop_offset: 120 };
        let after = RecordScan { records: 3, offsets: Some((100, 104)), timestamps: Some((5, 9)) };
        let d = decide_failback(&lineage, LogBounds::new(0, 106), &after, Truncation::None, 0).unwrap();
        let StartDecision::Refuse(refusal) = d else { panic!("{d:?}") };
        assert_eq!(refusal.divergence(), Some(Divergence { local_records: 3, range: Some((100, 105)) }));
        assert_eq!(refusal.code(), ErrorCode::DestinationDiverged);
        // Resync deletes and mirrors the other side from its log start.
        let d = decide_failback(&lineage, LogBounds::new(0, 106), &after, Truncation::Resync { quarantine: true }, 7);
        assert!(
            matches!(
                d,
                Ok(StartDecision::Resync {
                    delete_up_to: 106,
                    quarantine: true,
                    from_source_offset: 7,
                    records_deleted: 106,
                    ..
                })
            ),
            "{d:?}"
        );
        // The old source lost records the other side has: behind.
        let d = decide_failback(&lineage, LogBounds::new(0, 90), &RecordScan::default(), Truncation::None, 0);
        assert!(matches!(
            d,
            Ok(StartDecision::Refuse(Refusal::DestinationBehind { lineage_end: 100, high_watermark: 90 }))
        ));
        assert!(decide_failback(&lineage, LogBounds::new(5, 2), &RecordScan::default(), Truncation::None, 0).is_err());
    }
}
