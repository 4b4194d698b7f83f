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
    /// A failback decision without the other direction's lineage (`copied_out`).
    #[error("no lineage of the other direction to fail back from")]
    NoReverseLineage,
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

/// What a promote's stop left on the source only: records committed there after its final check
/// that the stop did not mirror. The mirror's copy ends at the further of the last stable offset
/// the check found it caught up with (`checked_lso`; a position past trailing transaction markers
/// may be above the committed one) and the final committed position (`final_next`: the stop's
/// release commits what the data path read after the check); what the source holds beyond it by
/// its last stable offset read after the stop (`lso_after_stop`) was written too late.
#[must_use]
pub fn written_after_check(checked_lso: i64, final_next: i64, lso_after_stop: i64) -> i64 {
    (lso_after_stop - checked_lso.max(final_next)).max(0)
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

/// Everything one cluster knows about the two-way history of one partition of a topic: its own
/// mirror's lineage (the mirror that copies the topic *into* this cluster, from the other one)
/// and, from the other cluster's state, the other direction's (the mirror that copies it *out of*
/// this cluster).
///
/// A record in this cluster's partition is on the other cluster in one of two ways: this side's
/// mirror wrote it here as a copy of the other side's record, or the other direction's mirror
/// copied it from here. Each copy is contiguous and starts where the previous direction ended (a
/// failback adopts the other side's stop point; a resync deletes everything before its new
/// start), so what is on both sides is a prefix of the log, and its end is
/// [`Self::divergence_point`]. Every record at or after it was written here and is not on the
/// other side: exactly what a `DESTINATION_DIVERGED` refusal counts, what a quarantine keeps, and
/// what its preview reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PartitionLineage {
    /// This side's mirror: its stop point, when the partition was failed over since it last
    /// mirrored (everything below it was written by kmirror).
    pub stop: Option<StopPoint>,
    /// This side's mirror: its committed position, when it ever mirrored (everything below its
    /// destination end offset is mirrored data).
    pub position: Option<MirrorPosition>,
    /// The other direction's mirror, when the other cluster's state has one that copied this
    /// topic from here and its lineage applies (`engine::failback::find`): everything below its
    /// mirrored end was copied there.
    pub copied_out: Option<ReverseLineage>,
    /// The other cluster's log start offset for this partition now (`None`: not read). At or past
    /// the end of what this side's mirror copied from there, the other cluster no longer holds the
    /// originals of this side's copies (it was resynced from here since, or retention removed
    /// them all), so those copies are not on the other side any more.
    pub source_log_start: Option<i64>,
}

impl PartitionLineage {
    /// Where the data this side's mirror copied in ends here, if it ever copied or was stopped:
    /// the stop point's offset (after kmirror's own markers) or the committed end.
    fn copied_in_end(&self) -> Option<i64> {
        let ends = [self.stop.map(|s| s.destination_stop_offset), self.position.map(|p| p.destination_end_offset)];
        ends.into_iter().flatten().max()
    }

    /// The end, on the other cluster, of what this side's mirror copied from it: the committed
    /// next source offset, or the record after the last mirrored one.
    fn copied_in_source_end(&self) -> i64 {
        match (self.position, self.stop.and_then(|s| s.last_mirrored_source_offset)) {
            (Some(p), _) => p.next_source_offset,
            (None, Some(last)) => last + 1,
            (None, None) => 0,
        }
    }

    /// Whether this side's copies still have their originals on the other cluster (see
    /// [`Self::source_log_start`]).
    fn copies_in_hold(&self) -> bool {
        // Nothing known to be copied (no position, no last mirrored offset): no claim to void.
        let end = self.copied_in_source_end();
        end == 0 || self.source_log_start.is_none_or(|start| start < end)
    }

    /// The offset here where the records that are not on the other side begin: the end of the
    /// furthest copy in either direction that still holds, 0 with none (every record is local).
    ///
    /// The greatest of the ends, not the first one known: after a round trip (A -> B failed
    /// over, B -> A failed back and over again) this side's stop point is older than what the
    /// other direction copied from here since, and after a second round trip the other
    /// direction's copy is older than this side's new stop point. This side's own copies count
    /// only while the other cluster still holds their originals: after the other side was
    /// resynced from here and failed over before it caught up, only what it copied since is
    /// there.
    #[must_use]
    pub fn divergence_point(&self) -> i64 {
        let own = self.copied_in_end().filter(|_| self.copies_in_hold());
        let out = self.copied_out.map(|c| c.mirrored_end);
        own.into_iter().chain(out).max().unwrap_or(0).max(0)
    }

    /// The offsets of `log` from the divergence point on (an upper bound of the divergent records
    /// when local writers were transactional: markers are offsets too; a `read_committed` scan
    /// from [`Self::divergence_point`] counts the records themselves).
    #[must_use]
    pub fn divergence(&self, log: LogBounds) -> Divergence {
        Divergence::after(self.divergence_point(), log)
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

/// Decides where a failback starts (DESIGN.md section 5): the old source, now this mirror's
/// destination, is adopted as it is when it holds no committed record from its divergence point
/// on (`after`, a scan from [`PartitionLineage::divergence_point`] of `here`, whose `copied_out`
/// is the other direction's lineage); the mirror then starts at the other side's stop offset and
/// copies only what was written there since the failover. The same decision serves a restart
/// after a round trip, where `here` also holds this side's own stop point.
///
/// - Truncation mode `resync`: [`StartDecision::Resync`], as for any start.
/// - The destination ends before the divergence point (records that crossed are gone here):
///   [`Refusal::DestinationBehind`].
/// - Committed records from the divergence point on (they never reached the other side):
///   [`Refusal::LocalWrites`] with their exact count and offset range.
/// - Otherwise incremental from [`ReverseLineage::source_stop_offset`].
///
/// # Errors
///
/// [`LineageError::InvalidLogBounds`] for impossible log bounds,
/// [`LineageError::NoReverseLineage`] when `here` has no other direction to fail back from.
pub fn decide_failback(
    here: &PartitionLineage,
    destination: LogBounds,
    after: &RecordScan,
    truncation: Truncation,
    source_log_start_offset: i64,
) -> Result<StartDecision, LineageError> {
    destination.validate()?;
    let lineage = here.copied_out.ok_or(LineageError::NoReverseLineage)?;
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
    let lineage_end = here.divergence_point();
    if destination.high_watermark < lineage_end {
        return Ok(StartDecision::Refuse(Refusal::DestinationBehind {
            lineage_end,
            high_watermark: destination.high_watermark,
        }));
    }
    if divergence.is_diverged() {
        return Ok(StartDecision::Refuse(Refusal::LocalWrites { lineage_end, divergence }));
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
mod history_tests;

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
    fn records_written_after_a_promotes_check_are_what_its_stop_did_not_copy() {
        // Nothing arrived after the check.
        assert_eq!(written_after_check(100, 100, 100), 0);
        // 5 arrived; the release committed 3 of them: 2 are on the source only.
        assert_eq!(written_after_check(100, 103, 105), 2);
        // A position past a trailing transaction marker: the marker is not a record left behind.
        assert_eq!(written_after_check(101, 100, 101), 0);
        assert_eq!(written_after_check(100, 100, 90), 0, "never negative");
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
        let here = PartitionLineage { copied_out: Some(lineage), ..PartitionLineage::default() };
        assert_eq!(here.divergence_point(), 100);
        let d = decide_failback(&here, LogBounds::new(0, 104), &RecordScan::default(), Truncation::None, 0);
        assert_eq!(
            d,
            Ok(StartDecision::Incremental { from_source_offset: 120, leader_epoch: -1, destination_end_offset: 104 })
        );
    }

    #[test]
    fn a_failback_over_records_that_never_crossed_is_refused_with_their_exact_count() {
        let lineage = ReverseLineage { mirrored_end: 100, source_stop_offset: 120 };
        let here = PartitionLineage { copied_out: Some(lineage), ..PartitionLineage::default() };
        let after = RecordScan { records: 3, offsets: Some((100, 104)), timestamps: Some((5, 9)) };
        let d = decide_failback(&here, LogBounds::new(0, 106), &after, Truncation::None, 0).unwrap();
        let StartDecision::Refuse(refusal) = d else { panic!("{d:?}") };
        assert_eq!(refusal.divergence(), Some(Divergence { local_records: 3, range: Some((100, 105)) }));
        assert_eq!(refusal.code(), ErrorCode::DestinationDiverged);
        // Resync deletes and mirrors the other side from its log start.
        let d = decide_failback(&here, LogBounds::new(0, 106), &after, Truncation::Resync { quarantine: true }, 7);
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
        let d = decide_failback(&here, LogBounds::new(0, 90), &RecordScan::default(), Truncation::None, 0);
        assert!(matches!(
            d,
            Ok(StartDecision::Refuse(Refusal::DestinationBehind { lineage_end: 100, high_watermark: 90 }))
        ));
        assert!(decide_failback(&here, LogBounds::new(5, 2), &RecordScan::default(), Truncation::None, 0).is_err());
        let none = PartitionLineage::default();
        assert_eq!(
            decide_failback(&none, LogBounds::new(0, 9), &RecordScan::default(), Truncation::None, 0),
            Err(LineageError::NoReverseLineage)
        );
    }

    #[test]
    fn what_never_crossed_starts_after_the_furthest_copy_in_either_direction() {
        // No lineage: every record is local.
        assert_eq!(PartitionLineage::default().divergence_point(), 0);
        assert_eq!(
            PartitionLineage::default().divergence(LogBounds::new(3, 9)),
            Divergence { local_records: 6, range: Some((3, 9)) }
        );
        // A restart over local writes, nothing copied out: this side's stop point.
        let own = PartitionLineage {
            stop: Some(stop(4, Some(99), 41)),
            position: Some(position(100, 4, 39)),
            ..PartitionLineage::default()
        };
        assert_eq!(own.divergence_point(), 41);
        // A never stopped partition: its committed end (what follows is kmirror's markers or a
        // foreign write, never mirrored data).
        let running = PartitionLineage { position: Some(position(100, 4, 39)), ..PartitionLineage::default() };
        assert_eq!(running.divergence_point(), 39);
        // After a round trip: the other direction copied this side's local writes 41..2141 out,
        // and only what came after that never crossed. Taking the stop point alone would keep
        // 2,000 records the other side has.
        let round_trip = PartitionLineage {
            copied_out: Some(ReverseLineage { mirrored_end: 2_141, source_stop_offset: 900 }),
            ..own
        };
        assert_eq!(round_trip.divergence_point(), 2_141);
        assert_eq!(
            round_trip.divergence(LogBounds::new(0, 2_144)),
            Divergence { local_records: 3, range: Some((2_141, 2_144)) }
        );
        // After a second round trip this side mirrored more since the other direction's copy:
        // its new stop point is the furthest.
        let second = PartitionLineage {
            stop: Some(stop(5, Some(150), 3_000)),
            position: Some(position(151, 5, 2_998)),
            copied_out: Some(ReverseLineage { mirrored_end: 2_141, source_stop_offset: 900 }),
            source_log_start: Some(0),
        };
        assert_eq!(second.divergence_point(), 3_000);
        // The other side was resynced from here since and failed over after copying up to
        // 2,141: the originals of this side's copies are gone there, and 2,141.. is not there.
        let resynced = PartitionLineage { source_log_start: Some(151), ..second };
        assert_eq!(resynced.divergence_point(), 2_141);
        // Without a copy out, nothing here is on the other side any more.
        assert_eq!(PartitionLineage { copied_out: None, ..resynced }.divergence_point(), 0);
        // Retention removed only some of the originals: the copies count (they reached it).
        assert_eq!(PartitionLineage { source_log_start: Some(150), ..second }.divergence_point(), 3_000);
    }

    #[test]
    fn a_failback_after_a_round_trip_counts_from_the_divergence_point_not_the_old_stop() {
        // This side's stop point at 41, the other direction copied up to 2,141 from here.
        let here = PartitionLineage {
            stop: Some(stop(4, Some(99), 41)),
            position: Some(position(100, 4, 39)),
            copied_out: Some(ReverseLineage { mirrored_end: 2_141, source_stop_offset: 900 }),
            source_log_start: Some(0),
        };
        // Three strays after the copy.
        let after = RecordScan { records: 3, offsets: Some((2_141, 2_143)), timestamps: None };
        let d = decide_failback(&here, LogBounds::new(0, 2_144), &after, Truncation::None, 0).unwrap();
        assert_eq!(
            d,
            StartDecision::Refuse(Refusal::LocalWrites {
                lineage_end: 2_141,
                divergence: Divergence { local_records: 3, range: Some((2_141, 2_144)) },
            })
        );
        // None: the round trip resumes from the other side's stop offset.
        let d = decide_failback(&here, LogBounds::new(0, 2_141), &RecordScan::default(), Truncation::None, 0);
        assert_eq!(
            d,
            Ok(StartDecision::Incremental { from_source_offset: 900, leader_epoch: -1, destination_end_offset: 2_141 })
        );
    }

    #[test]
    fn what_a_failover_leaves_behind_is_what_the_failback_will_find_diverged() {
        // The failover dialog's failback note counts the lag; the other side's failback counts
        // from the divergence point its lineage gives. They are the same number.
        for (next, lso) in [(100, 130), (100, 100), (0, 7)] {
            let p = position(next, 3, 80);
            let s = stop(3, (next > 0).then_some(next - 1), 82);
            let other_side =
                PartitionLineage { copied_out: ReverseLineage::of(Some(&s), Some(&p)), ..PartitionLineage::default() };
            assert_eq!(
                other_side.divergence(LogBounds::new(0, lso)).local_records,
                failover_impact(next, lso).unmirrored_records,
                "next {next}, lso {lso}"
            );
        }
    }
}
