//! Exact source → destination offset translation for one mirrored partition (DESIGN.md §4).
//!
//! kmirror cannot give mirrored records the source's offsets: a client producer appends where the
//! destination log ends. So each partition keeps an [`OffsetMap`]: [`Run`]s
//! `(source_start, destination_start, len)`, each meaning "source offsets `[s, s + len)` landed at
//! destination offsets `[d, d + len)`, one to one". Runs split at
//!
//! - **source gaps**: offsets the read-committed consumer never returns (compacted records, aborted
//!   transactional data, control records);
//! - **destination gaps**: offsets kmirror's own transaction markers take (one commit marker per
//!   partition per transaction), so a partition gets at least one run per transaction that touched
//!   it.
//!
//! Translation is exact, never "approximately earlier" as in MirrorMaker 2: [`OffsetMap::translate`]
//! returns the destination offset of the first mirrored record whose source offset is at or after
//! the one asked, and says which case applied ([`Translation`]). [`OffsetMap::reverse`] does the same
//! from destination to source (failback, impact previews).
//!
//! # Memory
//!
//! A map is one `Vec<Run>` (24 bytes a run), sorted and searched with binary search; nothing else
//! is allocated per run. Because every transaction ends with a marker, the run count grows with the
//! number of transactions that touched the partition, not with the record count (and never more
//! than one run per record). With the default engine settings a partition draining a backlog gains
//! about one run a second (transactions of `engine.commit_interval_ms`, 1,000: 86,400 runs, ≈ 2 MB,
//! a day); one whose mirror keeps up with a steady flow gains up to twenty a second (a transaction
//! ends early once caught up, at most every `engine.early_commit_interval_ms`, 50: up to 1,728,000
//! runs, ≈ 41 MB, a day). The engine keeps this bounded by dropping the batches the destination no
//! longer has ([`OffsetMap::prune_stretches_below`] with the partition's log start offset, which
//! also names the state records to delete), so a map holds the history of the destination's
//! retention, and by choosing the commit intervals with this cost in mind.

use std::fmt;

/// Source offsets `[source_start, source_start + len)` landed at destination offsets
/// `[destination_start, destination_start + len)`, one to one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Run {
    /// The source offset of the first record of the run.
    pub source_start: i64,
    /// The destination offset the first record landed at.
    pub destination_start: i64,
    /// The number of records (at least 1).
    pub len: i64,
}

impl Run {
    /// A run; checked by [`Run::validate`] when it enters an [`OffsetMap`].
    #[must_use]
    pub const fn new(source_start: i64, destination_start: i64, len: i64) -> Self {
        Self { source_start, destination_start, len }
    }

    /// The source offset just after the run (exclusive end).
    #[must_use]
    pub const fn source_end(&self) -> i64 {
        self.source_start + self.len
    }

    /// The destination offset just after the run (exclusive end).
    #[must_use]
    pub const fn destination_end(&self) -> i64 {
        self.destination_start + self.len
    }

    /// Checks that the run is non-empty, has non-negative offsets and that neither end overflows.
    ///
    /// # Errors
    ///
    /// [`OffsetMapError::InvalidRun`] with the reason.
    pub const fn validate(&self) -> Result<(), OffsetMapError> {
        let reason = if self.len <= 0 {
            "its length is not positive"
        } else if self.source_start < 0 || self.destination_start < 0 {
            "it has a negative offset"
        } else if self.source_start.checked_add(self.len).is_none()
            || self.destination_start.checked_add(self.len).is_none()
        {
            "its end overflows"
        } else {
            return Ok(());
        };
        Err(OffsetMapError::InvalidRun { run: *self, reason })
    }

    /// Whether `next` continues this run on both sides (and so merges into it).
    const fn is_continued_by(&self, next: &Self) -> bool {
        next.source_start == self.source_end() && next.destination_start == self.destination_end()
    }
}

impl fmt::Display for Run {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "source {}..{} -> destination {}..{}",
            self.source_start,
            self.source_end(),
            self.destination_start,
            self.destination_end()
        )
    }
}

/// The answer of [`OffsetMap::translate`] (source → destination) and [`OffsetMap::reverse`]
/// (destination → source). The carried offset is on the other side of the map.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Translation {
    /// The offset asked was mirrored; this is where that very record is on the other side.
    Exact(i64),
    /// The offset asked falls in a gap between mirrored records (a source gap such as a compacted
    /// or aborted record or a control record; or a destination gap such as a transaction marker);
    /// this is the other-side offset of the next mirrored record.
    NextMirrored(i64),
    /// Nothing at or after the offset asked has been mirrored yet; this is the mirrored end: the
    /// other-side offset just after the last mirrored record.
    End(i64),
    /// The offset asked is before the first run the map knows (history before the mirror started,
    /// dropped with [`OffsetMap::retain_from_destination`], or replaced by a resync); this is the
    /// other-side offset of the first run. The caller decides whether that is acceptable (group
    /// offset sync clamps to it; an impact preview says the history is unknown).
    BeforeFirst(i64),
}

impl Translation {
    /// The translated offset, whichever the case.
    #[must_use]
    pub const fn offset(self) -> i64 {
        match self {
            Self::Exact(offset) | Self::NextMirrored(offset) | Self::End(offset) | Self::BeforeFirst(offset) => offset,
        }
    }

    /// Whether the offset asked was itself mirrored.
    #[must_use]
    pub const fn is_exact(self) -> bool {
        matches!(self, Self::Exact(_))
    }
}

/// Why a run cannot enter an [`OffsetMap`] or a [`RunBuilder`]. The map is unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OffsetMapError {
    /// The run itself is malformed.
    #[error("invalid offset run ({run}): {reason}")]
    InvalidRun {
        /// The run.
        run: Run,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The run starts before the end of the previous one on the source side.
    #[error("offset run starts at source offset {start}, before the mapped source end {previous_end}")]
    SourceNotAfter {
        /// The exclusive source end of the map (or of the builder's last record).
        previous_end: i64,
        /// The rejected source start.
        start: i64,
    },
    /// The run starts before the end of the previous one on the destination side.
    #[error("offset run starts at destination offset {start}, before the mapped destination end {previous_end}")]
    DestinationNotAfter {
        /// The exclusive destination end of the map (or of the builder's last record).
        previous_end: i64,
        /// The rejected destination start.
        start: i64,
    },
}

/// Checks that `next` may follow `previous` (if any): valid, and at or after it on both sides.
const fn check_follows(previous: Option<&Run>, next: &Run) -> Result<(), OffsetMapError> {
    if let Err(error) = next.validate() {
        return Err(error);
    }
    if let Some(previous) = previous {
        if next.source_start < previous.source_end() {
            return Err(OffsetMapError::SourceNotAfter {
                previous_end: previous.source_end(),
                start: next.source_start,
            });
        }
        if next.destination_start < previous.destination_end() {
            return Err(OffsetMapError::DestinationNotAfter {
                previous_end: previous.destination_end(),
                start: next.destination_start,
            });
        }
    }
    Ok(())
}

/// The offset map of one partition: sorted, non-overlapping, maximally merged runs, increasing in
/// both source and destination offsets.
///
/// Invariants (kept by every method): each run is valid ([`Run::validate`]); run `i + 1` starts at
/// or after the end of run `i` on both sides, and not exactly at the end on both sides (such runs
/// are merged), so the representation of a mapping is unique and minimal.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OffsetMap {
    runs: Vec<Run>,
}

impl OffsetMap {
    /// An empty map.
    #[must_use]
    pub const fn new() -> Self {
        Self { runs: Vec::new() }
    }

    /// A map of `runs` (in order).
    ///
    /// # Errors
    ///
    /// The first run that breaks the ordering or is invalid.
    pub fn from_runs(runs: impl IntoIterator<Item = Run>) -> Result<Self, OffsetMapError> {
        let mut map = Self::new();
        map.extend(runs)?;
        Ok(map)
    }

    /// Appends a run after every run of the map, merging it into the last run when it continues
    /// it on both sides.
    ///
    /// # Errors
    ///
    /// The run is invalid or starts before the map's end on either side; the map is unchanged.
    pub fn push(&mut self, run: Run) -> Result<(), OffsetMapError> {
        check_follows(self.runs.last(), &run)?;
        match self.runs.last_mut() {
            Some(last) if last.is_continued_by(&run) => last.len += run.len,
            _ => self.runs.push(run),
        }
        Ok(())
    }

    /// Appends `runs` in order, all or nothing.
    ///
    /// # Errors
    ///
    /// The first run that [`OffsetMap::push`] rejects; the map is then unchanged.
    pub fn extend(&mut self, runs: impl IntoIterator<Item = Run>) -> Result<(), OffsetMapError> {
        let saved_len = self.runs.len();
        let saved_last = self.runs.last().copied();
        for run in runs {
            if let Err(error) = self.push(run) {
                self.runs.truncate(saved_len);
                if let (Some(last), Some(saved)) = (self.runs.last_mut(), saved_last) {
                    *last = saved;
                }
                return Err(error);
            }
        }
        Ok(())
    }

    /// The runs, in order.
    #[must_use]
    pub fn runs(&self) -> &[Run] {
        &self.runs
    }

    /// The same mapping seen from the other side: every run's source and destination swapped.
    /// A failback mirror (the old destination back into the old source) starts with the inverse
    /// of the forward mirror's map, so offsets of records that crossed before the failover
    /// translate back exactly (issue 18, DESIGN.md section 5).
    #[must_use]
    pub fn inverse(&self) -> Self {
        // Runs are ordered and non-overlapping on both sides, so swapping keeps both orders;
        // merging is symmetric, so the result is minimal too.
        Self { runs: self.runs.iter().map(|r| Run::new(r.destination_start, r.source_start, r.len)).collect() }
    }

    /// The number of runs (not records).
    #[must_use]
    pub const fn len(&self) -> usize {
        self.runs.len()
    }

    /// Whether nothing is mapped.
    #[must_use]
    pub const fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// The number of mirrored records the map covers (a walk over the runs).
    #[must_use]
    pub fn mirrored_records(&self) -> i64 {
        self.runs.iter().map(|run| run.len).sum()
    }

    /// The first run, if any.
    #[must_use]
    pub fn first(&self) -> Option<&Run> {
        self.runs.first()
    }

    /// The last run, if any.
    #[must_use]
    pub fn last(&self) -> Option<&Run> {
        self.runs.last()
    }

    /// The source offset just after the last mirrored record.
    #[must_use]
    pub fn source_end(&self) -> Option<i64> {
        self.runs.last().map(Run::source_end)
    }

    /// The destination offset just after the last mirrored record (the mirrored end).
    #[must_use]
    pub fn destination_end(&self) -> Option<i64> {
        self.runs.last().map(Run::destination_end)
    }

    /// The destination offset of the first mirrored record with source offset `>= source_offset`;
    /// see [`Translation`] for the cases. `None` when the map is empty (nothing mirrored, so
    /// there is nothing to translate against).
    #[must_use]
    pub fn translate(&self, source_offset: i64) -> Option<Translation> {
        let first = self.runs.first()?;
        // Runs whose source start is <= the offset: the candidate is the last of them.
        let index = self.runs.partition_point(|run| run.source_start <= source_offset);
        let Some(index) = index.checked_sub(1) else {
            return Some(Translation::BeforeFirst(first.destination_start));
        };
        let run = &self.runs[index];
        Some(if source_offset < run.source_end() {
            Translation::Exact(run.destination_start + (source_offset - run.source_start))
        } else if let Some(next) = self.runs.get(index + 1) {
            Translation::NextMirrored(next.destination_start)
        } else {
            Translation::End(run.destination_end())
        })
    }

    /// The source offset of the first mirrored record with destination offset
    /// `>= destination_offset`: [`OffsetMap::translate`] the other way round, with the same cases
    /// ([`Translation::End`] carries the source offset just after the last mirrored record; the
    /// committed position's next source offset may be further on when the source ends with a gap).
    #[must_use]
    pub fn reverse(&self, destination_offset: i64) -> Option<Translation> {
        let first = self.runs.first()?;
        let index = self.runs.partition_point(|run| run.destination_start <= destination_offset);
        let Some(index) = index.checked_sub(1) else {
            return Some(Translation::BeforeFirst(first.source_start));
        };
        let run = &self.runs[index];
        Some(if destination_offset < run.destination_end() {
            Translation::Exact(run.source_start + (destination_offset - run.destination_start))
        } else if let Some(next) = self.runs.get(index + 1) {
            Translation::NextMirrored(next.source_start)
        } else {
            Translation::End(run.source_end())
        })
    }

    /// Whether every record of `run` is mapped, and mapped exactly as `run` says (used to
    /// recognise a replayed batch).
    #[must_use]
    pub fn contains_run(&self, run: &Run) -> bool {
        if run.validate().is_err() {
            return false;
        }
        let index = self.runs.partition_point(|r| r.source_start <= run.source_start);
        let Some(index) = index.checked_sub(1) else {
            return false;
        };
        let covering = &self.runs[index];
        run.source_end() <= covering.source_end()
            && run.destination_start - run.source_start == covering.destination_start - covering.source_start
    }

    /// Removes the mapping of every destination offset in `[start, end)`, splitting runs at the
    /// bounds. Returns the number of mirrored records removed.
    pub fn remove_destination_range(&mut self, start: i64, end: i64) -> i64 {
        if start >= end {
            return 0;
        }
        // The runs that overlap [start, end): from the first that ends after `start` to the last
        // that starts before `end`.
        let from = self.runs.partition_point(|run| run.destination_end() <= start);
        let to = self.runs.partition_point(|run| run.destination_start < end);
        if from >= to {
            return 0;
        }
        let head = self.runs[from];
        let tail = self.runs[to - 1];
        let removed: i64 = self.runs[from..to]
            .iter()
            .map(|run| run.destination_end().min(end) - run.destination_start.max(start))
            .sum();
        // What survives of the first and last overlapping runs.
        let mut kept = Vec::with_capacity(2);
        if head.destination_start < start {
            kept.push(Run { len: start - head.destination_start, ..head });
        }
        if tail.destination_end() > end {
            let cut = end - tail.destination_start;
            kept.push(Run { source_start: tail.source_start + cut, destination_start: end, len: tail.len - cut });
        }
        self.runs.splice(from..to, kept);
        removed
    }

    /// Removes the mapping of every destination offset `>= destination_offset` (the destination
    /// was cut back there: resync, or a tail that must be discarded). Returns the number of
    /// mirrored records removed.
    pub fn truncate_after_destination(&mut self, destination_offset: i64) -> i64 {
        self.remove_destination_range(destination_offset, i64::MAX)
    }

    /// Removes the mapping of every destination offset `< destination_offset` (records the
    /// destination no longer has: pass its log start offset). Returns the number of mirrored
    /// records removed.
    pub fn retain_from_destination(&mut self, destination_offset: i64) -> i64 {
        self.remove_destination_range(i64::MIN, destination_offset)
    }

    /// The exclusive end of the stretch of consecutive destination offsets that contains
    /// `destination_offset` (runs touching end to start on the destination side), or `None` when
    /// the offset is not mapped. A transaction's records for one partition are such a stretch,
    /// ended by the transaction's marker, so this finds the end of the batch that starts at a
    /// given offset.
    #[must_use]
    pub fn destination_stretch_end(&self, destination_offset: i64) -> Option<i64> {
        let index = self.runs.partition_point(|run| run.destination_start <= destination_offset).checked_sub(1)?;
        let mut end = self.runs[index].destination_end();
        if destination_offset >= end {
            return None;
        }
        for run in &self.runs[index + 1..] {
            if run.destination_start != end {
                break;
            }
            end = run.destination_end();
        }
        Some(end)
    }

    /// The runs of each stretch (a transaction's batch each: see
    /// [`OffsetMap::destination_stretch_end`]), as index ranges into the runs, in order.
    fn stretches(&self) -> impl Iterator<Item = std::ops::Range<usize>> + '_ {
        let mut start = 0;
        std::iter::from_fn(move || {
            if start >= self.runs.len() {
                return None;
            }
            let mut end = start + 1;
            while end < self.runs.len() && self.runs[end].destination_start == self.runs[end - 1].destination_end() {
                end += 1;
            }
            Some(std::mem::replace(&mut start, end)..end)
        })
    }

    /// The destination start offset of every stretch, in order.
    pub fn stretch_starts(&self) -> impl Iterator<Item = i64> + '_ {
        self.stretches().map(|stretch| self.runs[stretch.start].destination_start)
    }

    /// Drops the oldest whole stretches that end at or before `log_start`, the destination
    /// partition's log start offset: the records they map are gone, so nothing can be translated
    /// to them any more. At most `limit` stretches go per call, and never the last stretch: it
    /// carries the partition's committed position in the state topic, and a map must keep saying
    /// where the mirrored end is even when retention has deleted every record. Returns the
    /// destination start offset of each stretch dropped, oldest first (the keys of the state
    /// records to delete).
    pub fn prune_stretches_below(&mut self, log_start: i64, limit: usize) -> Vec<i64> {
        let mut dropped = Vec::new();
        let mut cut = 0;
        for stretch in self.stretches() {
            let last = stretch.end == self.runs.len();
            if dropped.len() >= limit || last || self.runs[stretch.end - 1].destination_end() > log_start {
                break;
            }
            dropped.push(self.runs[stretch.start].destination_start);
            cut = stretch.end;
        }
        if cut > 0 {
            self.runs.drain(..cut);
            if self.runs.capacity() > 2 * self.runs.len() + 16 {
                self.runs.shrink_to_fit();
            }
        }
        dropped
    }

    /// Removes every run.
    pub fn clear(&mut self) {
        self.runs.clear();
    }

    /// Releases spare capacity (after a large removal).
    pub fn shrink_to_fit(&mut self) {
        self.runs.shrink_to_fit();
    }

    /// The heap memory held by the map, in bytes.
    #[must_use]
    pub const fn heap_bytes(&self) -> usize {
        self.runs.capacity() * size_of::<Run>()
    }
}

/// Builds the minimal runs of one partition's batch from `(source_offset, destination_offset)`
/// pairs fed in order, e.g. from the delivery reports of one destination transaction.
///
/// Pushing a pair only extends the current run or starts a new one, so the hot path allocates
/// nothing beyond the growth of one small `Vec`; [`RunBuilder::take`] hands the runs over and keeps
/// the allocation for the next transaction.
#[derive(Debug, Clone, Default)]
pub struct RunBuilder {
    runs: Vec<Run>,
    current: Option<Run>,
}

impl RunBuilder {
    /// An empty builder.
    #[must_use]
    pub const fn new() -> Self {
        Self { runs: Vec::new(), current: None }
    }

    /// Records that the record at `source_offset` landed at `destination_offset`.
    ///
    /// # Errors
    ///
    /// A negative offset, or an offset not after the previous pair's on either side; the builder
    /// is unchanged.
    pub fn push(&mut self, source_offset: i64, destination_offset: i64) -> Result<(), OffsetMapError> {
        let next = Run::new(source_offset, destination_offset, 1);
        match &mut self.current {
            Some(current) if current.is_continued_by(&next) => {
                check_follows(None, &next)?;
                current.len += 1;
            }
            Some(current) => {
                check_follows(Some(current), &next)?;
                self.runs.push(*current);
                *current = next;
            }
            None => {
                check_follows(None, &next)?;
                self.current = Some(next);
            }
        }
        Ok(())
    }

    /// Whether no pair has been pushed since the last [`RunBuilder::take`].
    #[must_use]
    pub const fn is_empty(&self) -> bool {
        self.current.is_none()
    }

    /// The number of records pushed since the last [`RunBuilder::take`].
    #[must_use]
    pub fn records(&self) -> i64 {
        self.runs.iter().chain(&self.current).map(|run| run.len).sum()
    }

    /// The runs built so far, leaving the builder empty (and its allocation in place).
    pub fn take(&mut self) -> Vec<Run> {
        let mut runs = Vec::with_capacity(self.runs.len() + 1);
        runs.append(&mut self.runs);
        runs.extend(self.current.take());
        runs
    }

    /// The runs built, consuming the builder.
    #[must_use]
    pub fn finish(mut self) -> Vec<Run> {
        self.runs.extend(self.current.take());
        self.runs
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_inverse_maps_back_and_is_its_own_inverse() {
        let map = OffsetMap::from_runs([Run::new(0, 10, 5), Run::new(7, 16, 3), Run::new(20, 30, 1)]).unwrap();
        let inv = map.inverse();
        assert_eq!(inv.runs(), &[Run::new(10, 0, 5), Run::new(16, 7, 3), Run::new(30, 20, 1)]);
        assert_eq!(inv.inverse(), map);
        for run in map.runs() {
            for o in run.source_start..run.source_end() {
                let there = map.translate(o).unwrap();
                assert_eq!(inv.translate(there.offset()).map(|t| t.offset()), Some(o), "offset {o}");
            }
        }
        // A valid map: extending it after its end still works.
        let mut inv = inv;
        inv.push(Run::new(31, 40, 2)).unwrap();
        assert_eq!(OffsetMap::new().inverse(), OffsetMap::new());
    }

    use proptest::prelude::*;

    use super::*;

    fn map(runs: &[(i64, i64, i64)]) -> OffsetMap {
        OffsetMap::from_runs(runs.iter().map(|&(s, d, len)| Run::new(s, d, len))).unwrap()
    }

    fn triples(map: &OffsetMap) -> Vec<(i64, i64, i64)> {
        map.runs().iter().map(|run| (run.source_start, run.destination_start, run.len)).collect()
    }

    #[test]
    fn push_merges_runs_contiguous_on_both_sides_only() {
        let mut m = OffsetMap::new();
        m.push(Run::new(0, 0, 5)).unwrap();
        m.push(Run::new(5, 5, 3)).unwrap(); // contiguous on both sides: merged
        m.push(Run::new(8, 9, 2)).unwrap(); // destination gap (marker): new run
        m.push(Run::new(12, 11, 1)).unwrap(); // source gap (compaction): new run
        assert_eq!(triples(&m), vec![(0, 0, 8), (8, 9, 2), (12, 11, 1)]);
        assert_eq!(m.len(), 3);
        assert_eq!(m.mirrored_records(), 11);
        assert_eq!(m.source_end(), Some(13));
        assert_eq!(m.destination_end(), Some(12));
    }

    #[test]
    fn push_rejects_overlaps_and_invalid_runs_without_changing_the_map() {
        let mut m = map(&[(10, 100, 5)]);
        let before = m.clone();
        assert_eq!(m.push(Run::new(14, 200, 1)), Err(OffsetMapError::SourceNotAfter { previous_end: 15, start: 14 }));
        assert_eq!(
            m.push(Run::new(20, 104, 1)),
            Err(OffsetMapError::DestinationNotAfter { previous_end: 105, start: 104 })
        );
        assert!(matches!(m.push(Run::new(20, 200, 0)), Err(OffsetMapError::InvalidRun { .. })));
        assert!(matches!(m.push(Run::new(-1, 200, 1)), Err(OffsetMapError::InvalidRun { .. })));
        assert!(matches!(m.push(Run::new(i64::MAX - 1, 200, 5)), Err(OffsetMapError::InvalidRun { .. })));
        assert_eq!(m, before);
        assert_eq!(
            m.push(Run::new(14, 200, 1)).unwrap_err().to_string(),
            "offset run starts at source offset 14, before the mapped source end 15"
        );
    }

    #[test]
    fn extend_is_all_or_nothing_even_after_a_merge() {
        let mut m = map(&[(0, 0, 5)]);
        let before = m.clone();
        // The first run merges into the last one, the second is out of order.
        let result = m.extend([Run::new(5, 5, 5), Run::new(3, 20, 1)]);
        assert!(result.is_err());
        assert_eq!(m, before);
        m.extend([Run::new(5, 5, 5), Run::new(12, 11, 1)]).unwrap();
        assert_eq!(triples(&m), vec![(0, 0, 10), (12, 11, 1)]);
    }

    #[test]
    fn translate_covers_every_case() {
        // Source 10..15 -> 100..105; source gap 15..17; 17..20 -> 106..109 (marker at 105).
        let m = map(&[(10, 100, 5), (17, 106, 3)]);
        assert_eq!(m.translate(9), Some(Translation::BeforeFirst(100)));
        assert_eq!(m.translate(10), Some(Translation::Exact(100)));
        assert_eq!(m.translate(14), Some(Translation::Exact(104)));
        assert_eq!(m.translate(15), Some(Translation::NextMirrored(106)));
        assert_eq!(m.translate(16), Some(Translation::NextMirrored(106)));
        assert_eq!(m.translate(17), Some(Translation::Exact(106)));
        assert_eq!(m.translate(19), Some(Translation::Exact(108)));
        assert_eq!(m.translate(20), Some(Translation::End(109)));
        assert_eq!(m.translate(i64::MAX), Some(Translation::End(109)));
        assert_eq!(OffsetMap::new().translate(0), None);
        assert_eq!(Translation::NextMirrored(7).offset(), 7);
        assert!(!Translation::End(7).is_exact());
    }

    #[test]
    fn reverse_is_symmetric() {
        let m = map(&[(10, 100, 5), (17, 106, 3)]);
        assert_eq!(m.reverse(99), Some(Translation::BeforeFirst(10)));
        assert_eq!(m.reverse(100), Some(Translation::Exact(10)));
        assert_eq!(m.reverse(104), Some(Translation::Exact(14)));
        assert_eq!(m.reverse(105), Some(Translation::NextMirrored(17))); // the commit marker
        assert_eq!(m.reverse(106), Some(Translation::Exact(17)));
        assert_eq!(m.reverse(109), Some(Translation::End(20)));
        assert_eq!(OffsetMap::new().reverse(0), None);
    }

    #[test]
    fn remove_destination_range_splits_runs() {
        let mut m = map(&[(0, 0, 10), (20, 11, 5)]);
        // Inside one run: it splits in two.
        assert_eq!(m.remove_destination_range(3, 5), 2);
        assert_eq!(triples(&m), vec![(0, 0, 3), (5, 5, 5), (20, 11, 5)]);
        // Across runs and gaps.
        assert_eq!(m.remove_destination_range(8, 13), 4);
        assert_eq!(triples(&m), vec![(0, 0, 3), (5, 5, 3), (22, 13, 3)]);
        // Empty and disjoint ranges remove nothing.
        assert_eq!(m.remove_destination_range(9, 9), 0);
        assert_eq!(m.remove_destination_range(8, 13), 0);
        assert_eq!(m.remove_destination_range(100, 200), 0);
    }

    #[test]
    fn truncate_and_retain_cut_at_destination_offsets() {
        let mut m = map(&[(0, 0, 10), (20, 11, 5)]);
        assert_eq!(m.truncate_after_destination(13), 3);
        assert_eq!(triples(&m), vec![(0, 0, 10), (20, 11, 2)]);
        assert_eq!(m.translate(25), Some(Translation::End(13)));
        assert_eq!(m.retain_from_destination(4), 4);
        assert_eq!(triples(&m), vec![(4, 4, 6), (20, 11, 2)]);
        assert_eq!(m.translate(0), Some(Translation::BeforeFirst(4)));
        assert_eq!(m.truncate_after_destination(0), 8);
        assert!(m.is_empty());
        m.shrink_to_fit();
        assert_eq!(m.heap_bytes(), 0);
    }

    #[test]
    fn destination_stretch_end_finds_the_end_of_a_batch() {
        // One batch with a source gap (two runs, dense destination), a marker, another batch.
        let m = map(&[(0, 0, 3), (5, 3, 2), (7, 6, 4)]);
        assert_eq!(m.stretch_starts().collect::<Vec<_>>(), vec![0, 6]);
        assert_eq!(OffsetMap::new().stretch_starts().count(), 0);
        assert_eq!(m.destination_stretch_end(0), Some(5));
        assert_eq!(m.destination_stretch_end(4), Some(5));
        assert_eq!(m.destination_stretch_end(5), None); // the marker
        assert_eq!(m.destination_stretch_end(6), Some(10));
        assert_eq!(m.destination_stretch_end(10), None);
    }

    #[test]
    fn prune_drops_whole_old_batches_but_never_the_last() {
        // Three batches (stretches): [0, 5) with a source gap inside, [6, 10), [11, 14).
        let mut m = map(&[(0, 0, 3), (5, 3, 2), (7, 6, 4), (11, 11, 3)]);
        // Log start inside the second batch: only the first one is entirely gone.
        assert_eq!(m.prune_stretches_below(8, usize::MAX), vec![0]);
        assert_eq!(triples(&m), vec![(7, 6, 4), (11, 11, 3)]);
        assert_eq!(m.translate(0), Some(Translation::BeforeFirst(6)));
        // A log start exactly at a batch end drops that batch.
        assert_eq!(m.prune_stretches_below(10, usize::MAX), vec![6]);
        // Retention deleted everything: the last batch stays (committed position, mirrored end).
        assert_eq!(m.prune_stretches_below(100, usize::MAX), Vec::<i64>::new());
        assert_eq!(triples(&m), vec![(11, 11, 3)]);
        assert_eq!(m.translate(20), Some(Translation::End(14)));
    }

    #[test]
    fn prune_honours_its_limit_and_releases_memory() {
        // 1,000 one-record transactions: run i at source i, destination 2i (marker after each).
        let mut m = OffsetMap::from_runs((0..1000).map(|i| Run::new(i, 2 * i, 1))).unwrap();
        let before = m.heap_bytes();
        let first = m.prune_stretches_below(2000, 600);
        assert_eq!(first.len(), 600);
        assert_eq!(first[..3], [0, 2, 4]);
        let rest = m.prune_stretches_below(2000, 600);
        assert_eq!(rest.len(), 399);
        assert_eq!(rest[0], 1200);
        assert_eq!(m.len(), 1);
        assert!(m.heap_bytes() < before / 10, "{} of {before} bytes still held", m.heap_bytes());
        // Nothing below the log start: nothing to do.
        assert!(m.prune_stretches_below(0, 10).is_empty());
        assert!(OffsetMap::new().prune_stretches_below(10, 10).is_empty());
    }

    #[test]
    fn contains_run_recognises_exact_sub_mappings_only() {
        let m = map(&[(0, 0, 10), (20, 11, 5)]);
        assert!(m.contains_run(&Run::new(2, 2, 3)));
        assert!(m.contains_run(&Run::new(20, 11, 5)));
        assert!(!m.contains_run(&Run::new(2, 3, 3))); // shifted
        assert!(!m.contains_run(&Run::new(8, 8, 3))); // runs past the covering run
        assert!(!m.contains_run(&Run::new(30, 30, 1)));
        assert!(!m.contains_run(&Run::new(0, 0, 0)));
    }

    #[test]
    fn run_builder_produces_minimal_runs() {
        let mut b = RunBuilder::new();
        for (s, d) in [(0, 50), (1, 51), (2, 52), (5, 53), (6, 54), (7, 56)] {
            b.push(s, d).unwrap();
        }
        assert_eq!(b.records(), 6);
        assert_eq!(b.push(7, 57), Err(OffsetMapError::SourceNotAfter { previous_end: 8, start: 7 }));
        assert_eq!(b.push(8, 56), Err(OffsetMapError::DestinationNotAfter { previous_end: 57, start: 56 }));
        assert!(matches!(b.push(-1, 0), Err(OffsetMapError::InvalidRun { .. })));
        let runs = b.take();
        assert_eq!(runs, vec![Run::new(0, 50, 3), Run::new(5, 53, 2), Run::new(7, 56, 1)]);
        assert!(b.is_empty());
        b.push(100, 100).unwrap();
        assert_eq!(b.finish(), vec![Run::new(100, 100, 1)]);
    }

    #[test]
    fn displays_read_naturally() {
        assert_eq!(Run::new(10, 100, 5).to_string(), "source 10..15 -> destination 100..105");
    }

    /// One "transaction": for each record, the source gap before it; the destination is dense
    /// within the transaction and the commit marker takes one destination offset after it.
    fn transactions() -> impl Strategy<Value = Vec<Vec<i64>>> {
        let gap = prop_oneof![6 => Just(0_i64), 3 => 1_i64..3, 1 => 3_i64..50];
        proptest::collection::vec(proptest::collection::vec(gap, 1..30), 1..12)
    }

    /// The (source, destination) pairs of the generated transactions, fed through a
    /// [`RunBuilder`] per transaction into a map.
    fn mirror(start_source: i64, start_destination: i64, txns: &[Vec<i64>]) -> (Vec<(i64, i64)>, OffsetMap) {
        let mut pairs = Vec::new();
        let mut map = OffsetMap::new();
        let mut builder = RunBuilder::new();
        let (mut source, mut destination) = (start_source, start_destination);
        for txn in txns {
            for gap in txn {
                source += gap;
                builder.push(source, destination).unwrap();
                pairs.push((source, destination));
                source += 1;
                destination += 1;
            }
            map.extend(builder.take()).unwrap();
            destination += 1; // the commit marker
        }
        (pairs, map)
    }

    /// What translate() must answer, by a linear scan over the mirrored pairs.
    fn expected(
        pairs: &[(i64, i64)],
        offset: i64,
        key: fn(&(i64, i64)) -> i64,
        value: fn(&(i64, i64)) -> i64,
    ) -> Translation {
        let last = pairs.last().unwrap();
        if offset < key(&pairs[0]) {
            return Translation::BeforeFirst(value(&pairs[0]));
        }
        match pairs.iter().find(|pair| key(pair) >= offset) {
            Some(pair) if key(pair) == offset => Translation::Exact(value(pair)),
            Some(pair) => Translation::NextMirrored(value(pair)),
            None => Translation::End(value(last) + 1),
        }
    }

    proptest! {
        #[test]
        fn translation_is_exact_for_every_offset(
            start_source in 0_i64..1_000,
            start_destination in 0_i64..1_000,
            txns in transactions(),
        ) {
            let (pairs, map) = mirror(start_source, start_destination, &txns);
            let source_end = pairs.last().unwrap().0 + 1;
            let destination_end = pairs.last().unwrap().1 + 1;

            for offset in (start_source - 2).max(0)..source_end + 3 {
                let want = expected(&pairs, offset, |p| p.0, |p| p.1);
                prop_assert_eq!(map.translate(offset), Some(want), "translate({})", offset);
                if let Translation::Exact(destination) = want {
                    prop_assert_eq!(map.reverse(destination), Some(Translation::Exact(offset)));
                }
            }
            for offset in (start_destination - 2).max(0)..destination_end + 3 {
                let want = expected(&pairs, offset, |p| p.1, |p| p.0);
                prop_assert_eq!(map.reverse(offset), Some(want), "reverse({})", offset);
            }

            // Minimal: no two neighbouring runs could have been merged, and nothing is lost.
            for pair in map.runs().windows(2) {
                prop_assert!(!pair[0].is_continued_by(&pair[1]));
            }
            prop_assert_eq!(map.mirrored_records(), i64::try_from(pairs.len()).unwrap());
            prop_assert!(map.len() >= txns.len());
        }

        #[test]
        fn removing_a_destination_range_matches_filtering_the_pairs(
            txns in transactions(),
            cut_start in 0_i64..400,
            cut_len in 0_i64..200,
        ) {
            let (pairs, mut map) = mirror(0, 0, &txns);
            let cut_end = cut_start + cut_len;
            let removed = map.remove_destination_range(cut_start, cut_end);
            let kept: Vec<(i64, i64)> =
                pairs.iter().copied().filter(|&(_, d)| d < cut_start || d >= cut_end).collect();
            prop_assert_eq!(removed, i64::try_from(pairs.len() - kept.len()).unwrap());
            // Rebuilding from the kept pairs gives the same (minimal) map.
            let mut builder = RunBuilder::new();
            for &(s, d) in &kept {
                builder.push(s, d).unwrap();
            }
            let rebuilt = OffsetMap::from_runs(builder.finish()).unwrap();
            prop_assert_eq!(map, rebuilt);
        }
    }
}
