//! Pure history logic: the fixed-capacity ring, one series (10 s samples for the last hour plus
//! 1 min samples for the last 24 h), and the [`Recorder`] that turns engine snapshots into
//! samples (rates are deltas of counters between two snapshots). No clock, no I/O.

use std::collections::HashMap;

use crate::domain::{PartitionState, Timestamp};
use crate::engine::{MirrorSnapshot, PartitionSnapshot, Snapshot};

/// A ring of at most `capacity` items: pushing into a full ring drops the oldest. Memory is
/// bounded by the capacity (the buffer grows up to it, never beyond).
#[derive(Debug, Clone)]
pub struct Ring<T> {
    buf: Vec<T>,
    /// Where the next item goes once the ring is full (the oldest item's index).
    head: usize,
    capacity: usize,
}

impl<T: Copy> Ring<T> {
    pub fn new(capacity: usize) -> Ring<T> {
        Ring { buf: Vec::new(), head: 0, capacity: capacity.max(1) }
    }

    pub fn push(&mut self, item: T) {
        if self.buf.len() < self.capacity {
            self.buf.push(item);
        } else {
            self.buf[self.head] = item;
            self.head = (self.head + 1) % self.capacity;
        }
    }

    pub fn len(&self) -> usize {
        self.buf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Oldest first.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &T> + '_ {
        let (newer, older) = self.buf.split_at(self.head);
        older.iter().chain(newer.iter())
    }

    pub fn last(&self) -> Option<&T> {
        self.iter().next_back()
    }
}

/// One point of a series: 32 bytes. Rates are `NaN` when unknown (the first sample, or a
/// counter that went backwards: a restart of the counting instance, a slot that moved).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// When the snapshot it comes from was taken.
    pub at: Timestamp,
    /// Lag in records (sum over partitions).
    pub lag_records: i64,
    /// Lag in seconds (the largest of the partitions').
    pub lag_seconds: f32,
    /// Records mirrored per second (delta of `records_mirrored`).
    pub mirrored_records_per_sec: f32,
    /// Payload bytes mirrored per second (delta of `bytes_mirrored`; counted by the owning
    /// instance only).
    pub mirrored_bytes_per_sec: f32,
    /// The source's produce rate: delta of the sum of the partitions' high watermarks.
    pub source_records_per_sec: f32,
}

/// What one sample costs in memory.
pub const SAMPLE_BYTES: usize = std::mem::size_of::<Sample>();

/// An option from a rate that may be `NaN`.
pub fn known(x: f32) -> Option<f64> {
    x.is_finite().then_some(f64::from(x))
}

/// A minute (or any coarse interval) being summed up: lags are the maxima seen in it, rates the
/// means of the known ones.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    index: i64,
    last_at: Timestamp,
    lag_records: i64,
    lag_seconds: f32,
    sums: [f64; 3],
    counts: [u32; 3],
}

impl Bucket {
    fn new(index: i64, s: &Sample) -> Bucket {
        let mut b = Bucket {
            index,
            last_at: s.at,
            lag_records: s.lag_records,
            lag_seconds: s.lag_seconds,
            sums: [0.0; 3],
            counts: [0; 3],
        };
        b.rates(s);
        b
    }

    fn rates(&mut self, s: &Sample) {
        let rates = [s.mirrored_records_per_sec, s.mirrored_bytes_per_sec, s.source_records_per_sec];
        for (i, r) in rates.into_iter().enumerate() {
            if r.is_finite() {
                self.sums[i] += f64::from(r);
                self.counts[i] += 1;
            }
        }
    }

    fn add(&mut self, s: &Sample) {
        self.last_at = s.at;
        self.lag_records = self.lag_records.max(s.lag_records);
        self.lag_seconds = self.lag_seconds.max(s.lag_seconds);
        self.rates(s);
    }

    fn sample(&self) -> Sample {
        let mean =
            |i: usize| if self.counts[i] == 0 { f32::NAN } else { (self.sums[i] / f64::from(self.counts[i])) as f32 };
        Sample {
            at: self.last_at,
            lag_records: self.lag_records,
            lag_seconds: self.lag_seconds,
            mirrored_records_per_sec: mean(0),
            mirrored_bytes_per_sec: mean(1),
            source_records_per_sec: mean(2),
        }
    }
}

/// Sizes of the rings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resolution {
    /// Fine samples kept (360: an hour at 10 s).
    pub fine_capacity: usize,
    /// The coarse interval (1 min).
    pub coarse_interval_ms: i64,
    /// Coarse samples kept (1,440: a day at 1 min).
    pub coarse_capacity: usize,
}

impl Default for Resolution {
    fn default() -> Self {
        Resolution { fine_capacity: 360, coarse_interval_ms: 60_000, coarse_capacity: 1_440 }
    }
}

/// One mirror's or topic's history.
#[derive(Debug, Clone)]
pub struct Series {
    fine: Ring<Sample>,
    coarse: Ring<Sample>,
    bucket: Option<Bucket>,
    coarse_interval_ms: i64,
    /// The first sample's time.
    pub since: Timestamp,
}

impl Series {
    pub fn new(r: Resolution, since: Timestamp) -> Series {
        Series {
            fine: Ring::new(r.fine_capacity),
            coarse: Ring::new(r.coarse_capacity),
            bucket: None,
            coarse_interval_ms: r.coarse_interval_ms.max(1),
            since,
        }
    }

    pub fn push(&mut self, s: Sample) {
        self.fine.push(s);
        let index = s.at.as_millis().div_euclid(self.coarse_interval_ms);
        match &mut self.bucket {
            Some(b) if b.index == index => b.add(&s),
            Some(b) => {
                self.coarse.push(b.sample());
                self.bucket = Some(Bucket::new(index, &s));
            }
            None => self.bucket = Some(Bucket::new(index, &s)),
        }
    }

    pub fn last(&self) -> Option<&Sample> {
        self.fine.last()
    }

    /// The fine samples taken at or after `from`, oldest first.
    pub fn fine_since(&self, from: Timestamp) -> impl Iterator<Item = &Sample> + '_ {
        self.fine.iter().filter(move |s| s.at >= from)
    }

    /// The coarse samples at or after `from`, oldest first, the minute in progress last.
    pub fn coarse_since(&self, from: Timestamp) -> Vec<Sample> {
        let mut out: Vec<Sample> = self.coarse.iter().filter(|s| s.at >= from).copied().collect();
        if let Some(b) = &self.bucket {
            out.push(b.sample());
        }
        out
    }

    /// Samples held (fine and coarse), for the memory figure.
    pub fn held(&self) -> usize {
        self.fine.len() + self.coarse.len()
    }
}

/// Counters of one mirror or topic at one snapshot, to compute rates from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    pub records_mirrored: u64,
    pub bytes_mirrored: u64,
    pub source_hwm: i64,
    /// Partitions whose high watermark is known: when it changes, the sum jumps (a partition's
    /// first reading, a new topic) and the source rate is unknown for that sample.
    pub hwm_known: u32,
    pub lag_records: i64,
}

impl Counters {
    pub fn add(&mut self, p: &PartitionSnapshot) {
        self.records_mirrored = self.records_mirrored.saturating_add(p.records_mirrored);
        self.bytes_mirrored = self.bytes_mirrored.saturating_add(p.bytes_mirrored);
        if let Some(hwm) = p.source_high_watermark {
            self.source_hwm = self.source_hwm.saturating_add(hwm);
            self.hwm_known += 1;
        }
        self.lag_records = self.lag_records.saturating_add(p.lag_records);
    }
}

/// A rate from two counter readings `dt_ms` apart: `NaN` when the counter went backwards or no
/// time passed.
pub fn rate(before: i128, after: i128, dt_ms: i64) -> f32 {
    if dt_ms <= 0 || after < before {
        return f32::NAN;
    }
    ((after - before) as f64 * 1000.0 / dt_ms as f64) as f32
}

/// The sample of `now` given the previous counters (taken at `prev_at`).
pub fn sample(now: Timestamp, c: &Counters, lag_seconds: f64, prev: Option<(Timestamp, Counters)>) -> Sample {
    let (mr, mb, sr) = match prev {
        Some((at, p)) => {
            let dt = at.millis_until(now);
            (
                rate(p.records_mirrored.into(), c.records_mirrored.into(), dt),
                rate(p.bytes_mirrored.into(), c.bytes_mirrored.into(), dt),
                if p.hwm_known == c.hwm_known { rate(p.source_hwm.into(), c.source_hwm.into(), dt) } else { f32::NAN },
            )
        }
        None => (f32::NAN, f32::NAN, f32::NAN),
    };
    Sample {
        at: now,
        lag_records: c.lag_records,
        lag_seconds: if lag_seconds.is_finite() { lag_seconds.max(0.0) as f32 } else { 0.0 },
        mirrored_records_per_sec: mr,
        mirrored_bytes_per_sec: mb,
        source_records_per_sec: sr,
    }
}

/// Which series: a mirror's (`topic == None`) or a topic's.
pub type Key = (String, Option<String>);

/// Whether every partition that is not STOPPED is PAUSED or PAUSING (and there is one).
pub fn all_paused<'a>(partitions: impl Iterator<Item = &'a PartitionSnapshot>) -> bool {
    let mut any = false;
    for p in partitions {
        match p.state {
            PartitionState::Stopped => {}
            PartitionState::Paused | PartitionState::Pausing => any = true,
            _ => return false,
        }
    }
    any
}

/// Turns snapshots into samples: keeps every series (mirrors always, topics up to a cap) and the
/// last counters of each mirror and topic.
#[derive(Debug)]
pub struct Recorder {
    resolution: Resolution,
    max_topics: usize,
    series: HashMap<Key, Series>,
    topics_tracked: usize,
    prev: HashMap<Key, (Timestamp, Counters)>,
    last_at: Option<Timestamp>,
}

impl Recorder {
    pub fn new(resolution: Resolution, max_topics: usize) -> Recorder {
        Recorder {
            resolution,
            max_topics,
            series: HashMap::new(),
            topics_tracked: 0,
            prev: HashMap::new(),
            last_at: None,
        }
    }

    pub fn series(&self, key: &Key) -> Option<&Series> {
        self.series.get(key)
    }

    pub fn topics_tracked(&self) -> usize {
        self.topics_tracked
    }

    pub fn max_topics(&self) -> usize {
        self.max_topics
    }

    /// Samples held over every series.
    pub fn samples_held(&self) -> usize {
        self.series.values().map(Series::held).sum()
    }

    /// Records one snapshot. A snapshot not newer than the last one recorded adds nothing (the
    /// engine did not publish in between: no new data, and a gap in the chart says so).
    pub fn record(&mut self, snap: &Snapshot) {
        let now = snap.taken_at;
        if now.as_millis() <= 0 || self.last_at.is_some_and(|l| now <= l) {
            return;
        }
        self.last_at = Some(now);
        let mut seen: std::collections::HashSet<Key> = std::collections::HashSet::new();
        // Topics not tracked yet, with their sample, to admit by lag below.
        let mut candidates: Vec<(Key, Sample)> = Vec::new();
        for m in &snap.mirrors {
            self.record_mirror(m, now, &mut seen, &mut candidates);
        }
        // Forget what is gone (a deleted mirror or topic).
        self.prev.retain(|k, _| seen.contains(k));
        let before = self.series.len();
        self.series.retain(|k, _| seen.contains(k));
        if self.series.len() != before {
            self.topics_tracked = self.series.keys().filter(|k| k.1.is_some()).count();
        }
        self.admit(candidates, now);
    }

    fn record_mirror(
        &mut self,
        m: &MirrorSnapshot,
        now: Timestamp,
        seen: &mut std::collections::HashSet<Key>,
        candidates: &mut Vec<(Key, Sample)>,
    ) {
        let mut total = Counters::default();
        let mut max_lag_s = 0f64;
        for t in &m.topics {
            let mut c = Counters::default();
            t.partitions.iter().for_each(|p| c.add(p));
            total.records_mirrored = total.records_mirrored.saturating_add(c.records_mirrored);
            total.bytes_mirrored = total.bytes_mirrored.saturating_add(c.bytes_mirrored);
            total.source_hwm = total.source_hwm.saturating_add(c.source_hwm);
            total.hwm_known += c.hwm_known;
            total.lag_records = total.lag_records.saturating_add(c.lag_records);
            max_lag_s = max_lag_s.max(t.lag_seconds);
            let key: Key = (m.name.clone(), Some(t.name.clone()));
            let s = sample(now, &c, t.lag_seconds, self.prev.get(&key).copied());
            self.prev.insert(key.clone(), (now, c));
            match self.series.get_mut(&key) {
                Some(series) => series.push(s),
                None => candidates.push((key.clone(), s)),
            }
            seen.insert(key);
        }
        let key: Key = (m.name.clone(), None);
        let s = sample(now, &total, max_lag_s, self.prev.get(&key).copied());
        self.prev.insert(key.clone(), (now, total));
        let r = self.resolution;
        self.series.entry(key.clone()).or_insert_with(|| Series::new(r, now)).push(s);
        seen.insert(key);
    }

    /// New topics get a series while there is room; beyond the cap a topic with more lag takes
    /// the place of the tracked topic with the least lag (sticky otherwise, so charts do not
    /// flicker between topics).
    fn admit(&mut self, mut candidates: Vec<(Key, Sample)>, now: Timestamp) {
        candidates.sort_by(|a, b| b.1.lag_records.cmp(&a.1.lag_records).then_with(|| a.0.cmp(&b.0)));
        let r = self.resolution;
        let mut evictable: Option<Vec<(i64, Key)>> = None;
        for (key, s) in candidates {
            if self.topics_tracked < self.max_topics {
                let mut series = Series::new(r, now);
                series.push(s);
                self.series.insert(key, series);
                self.topics_tracked += 1;
                continue;
            }
            // Full: the tracked topics by current lag, least first (built once per record).
            let list = evictable.get_or_insert_with(|| {
                let mut v: Vec<(i64, Key)> = self
                    .series
                    .iter()
                    .filter(|(k, _)| k.1.is_some())
                    .map(|(k, s)| (s.last().map_or(0, |x| x.lag_records), k.clone()))
                    .collect();
                v.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| b.1.cmp(&a.1)));
                v
            });
            match list.last() {
                Some((least, _)) if *least < s.lag_records => {
                    let (_, out) = list.pop().unwrap_or_default();
                    self.series.remove(&out);
                    let mut series = Series::new(r, now);
                    series.push(s);
                    self.series.insert(key, series);
                }
                // Candidates come largest lag first: none after this one gets in either.
                _ => break,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{ClusterIdStatus, DataPathStatus, TopicSnapshot};

    #[test]
    fn ring_keeps_the_newest_in_order() {
        let mut r = Ring::new(3);
        assert!(r.is_empty());
        for i in 0..7 {
            r.push(i);
        }
        assert_eq!(r.iter().copied().collect::<Vec<_>>(), vec![4, 5, 6]);
        assert_eq!((r.len(), r.capacity(), r.last()), (3, 3, Some(&6)));
    }

    #[test]
    fn a_sample_is_32_bytes() {
        assert_eq!(SAMPLE_BYTES, 32);
    }

    #[test]
    fn rates_are_deltas_and_unknown_when_a_counter_goes_back() {
        assert_eq!(rate(100, 600, 10_000), 50.0);
        assert!(rate(600, 100, 10_000).is_nan());
        assert!(rate(1, 2, 0).is_nan());
        let c0 = Counters { records_mirrored: 0, bytes_mirrored: 0, source_hwm: 1000, hwm_known: 2, lag_records: 1000 };
        let c1 =
            Counters { records_mirrored: 500, bytes_mirrored: 5_000, source_hwm: 1100, hwm_known: 2, lag_records: 600 };
        let first = sample(Timestamp::from_millis(1_000), &c0, 3.0, None);
        assert!(first.mirrored_records_per_sec.is_nan() && first.source_records_per_sec.is_nan());
        let s = sample(Timestamp::from_millis(11_000), &c1, 2.0, Some((Timestamp::from_millis(1_000), c0)));
        assert_eq!(
            (s.mirrored_records_per_sec, s.mirrored_bytes_per_sec, s.source_records_per_sec),
            (50.0, 500.0, 10.0)
        );
        assert_eq!((s.lag_records, s.lag_seconds), (600, 2.0));
        // A partition's first high watermark is no produce rate.
        let c2 = Counters { hwm_known: 3, source_hwm: 9_000, ..c1 };
        let s = sample(Timestamp::from_millis(21_000), &c2, 2.0, Some((Timestamp::from_millis(11_000), c1)));
        assert!(s.source_records_per_sec.is_nan());
    }

    fn s(at_ms: i64, lag: i64, rate: f32) -> Sample {
        Sample {
            at: Timestamp::from_millis(at_ms),
            lag_records: lag,
            lag_seconds: lag as f32 / 10.0,
            mirrored_records_per_sec: rate,
            mirrored_bytes_per_sec: rate * 10.0,
            source_records_per_sec: 1.0,
        }
    }

    #[test]
    fn a_series_downsamples_to_minutes_and_stays_bounded() {
        let r = Resolution { fine_capacity: 360, coarse_interval_ms: 60_000, coarse_capacity: 1_440 };
        let mut series = Series::new(r, Timestamp::from_millis(0));
        // 25 hours of 10 s samples.
        for i in 0..(25 * 360) {
            let rate = if i % 2 == 0 { 2.0 } else { f32::NAN };
            series.push(s(i * 10_000, i, rate));
        }
        assert_eq!(series.held(), 360 + 1_440, "both rings full, nothing more");
        let fine: Vec<&Sample> = series.fine_since(Timestamp::EPOCH).collect();
        assert_eq!(fine.len(), 360);
        assert_eq!(fine.last().unwrap().at.as_millis(), (25 * 360 - 1) * 10_000);
        let coarse = series.coarse_since(Timestamp::EPOCH);
        assert_eq!(coarse.len(), 1_441, "a day of minutes plus the minute in progress");
        // A closed minute: six samples; the largest lag, the mean of the known rates.
        let m = coarse[coarse.len() - 2];
        assert_eq!(m.lag_records % 6, 5, "the minute's last (largest) lag");
        assert_eq!(m.mirrored_records_per_sec, 2.0, "NaN rates are left out of the mean");
        assert_eq!(m.mirrored_bytes_per_sec, 20.0);
        // Windows.
        let from = Timestamp::from_millis((25 * 360 - 6) * 10_000);
        assert_eq!(series.fine_since(from).count(), 6);
    }

    fn part(topic: &str, p: i32, state: PartitionState, hwm: i64, mirrored: i64, records: u64) -> PartitionSnapshot {
        PartitionSnapshot {
            failed_in: None,
            resync_pending: false,
            idle: false,
            topic: topic.into(),
            partition: p,
            state,
            state_since: Timestamp::EPOCH,
            state_epoch: 1,
            source_log_start_offset: Some(0),
            source_last_stable_offset: Some(hwm),
            source_high_watermark: Some(hwm),
            mirrored_source_offset: Some(mirrored),
            destination_high_watermark: Some(mirrored),
            lag_records: hwm - mirrored,
            lag_seconds: if hwm > mirrored { 1.0 } else { 0.0 },
            last_mirrored_epoch: None,
            error: None,
            retry_count: 0,
            next_retry_at: None,
            records_mirrored: records,
            bytes_mirrored: records * 100,
            destination_stop_offset: None,
            local_writes: 0,
            source_writes_after_stop: None,
            slot: 0,
            owner: None,
        }
    }

    fn snap(at: i64, topics: &[(&str, i64, i64)]) -> Snapshot {
        let topics = topics
            .iter()
            .map(|(name, hwm, mirrored)| TopicSnapshot {
                name: (*name).into(),
                state: PartitionState::Mirroring,
                source_topic_id: String::new(),
                destination_topic_id: String::new(),
                lag_records: hwm - mirrored,
                lag_seconds: 1.0,
                partitions: vec![part(name, 0, PartitionState::Mirroring, *hwm, *mirrored, *mirrored as u64)],
                failback_mirror: None,
            })
            .collect();
        Snapshot {
            taken_at: Timestamp::from_millis(at),
            mirrors: vec![MirrorSnapshot {
                topic_include: Vec::new(),
                topic_exclude: Vec::new(),
                discovery: Default::default(),
                name: "m".into(),
                source_bootstrap_servers: String::new(),
                source_properties: Default::default(),
                expected_source_cluster_id: None,
                sync_spec: Default::default(),
                observed_source_cluster_id: None,
                cluster_id_status: ClusterIdStatus::Ok,
                cluster_id_checked_at: None,
                cluster_id_error: None,
                data_path: DataPathStatus::Running,
                replication_throttle_bytes_per_sec: None,
                throttled_seconds: 0.0,
                created_at: Timestamp::EPOCH,
                sync: Vec::new(),
                groups: Vec::new(),
                topics,
                approval: Default::default(),
            }],
            ..Snapshot::default()
        }
    }

    #[test]
    fn the_recorder_rates_mirrors_and_topics_and_skips_old_snapshots() {
        let mut r = Recorder::new(Resolution::default(), 10);
        r.record(&snap(10_000, &[("a", 100, 0), ("b", 50, 50)]));
        r.record(&snap(10_000, &[("a", 200, 0), ("b", 50, 50)])); // not newer: ignored
        r.record(&snap(20_000, &[("a", 200, 100), ("b", 60, 60)]));
        let m = r.series(&("m".into(), None)).unwrap();
        assert_eq!(m.fine_since(Timestamp::EPOCH).count(), 2);
        let last = m.last().unwrap();
        assert_eq!(last.lag_records, 100);
        assert_eq!(last.source_records_per_sec, 11.0);
        assert_eq!(last.mirrored_records_per_sec, 11.0);
        assert_eq!(last.mirrored_bytes_per_sec, 1100.0);
        let a = r.series(&("m".into(), Some("a".into()))).unwrap();
        assert_eq!(a.last().unwrap().mirrored_records_per_sec, 10.0);
        assert_eq!(r.topics_tracked(), 2);
        // A topic that leaves the mirror loses its series.
        r.record(&snap(30_000, &[("a", 200, 100)]));
        assert!(r.series(&("m".into(), Some("b".into()))).is_none());
        assert_eq!(r.topics_tracked(), 1);
    }

    #[test]
    fn beyond_the_cap_topics_with_more_lag_take_the_place_of_those_with_least() {
        let mut r = Recorder::new(Resolution::default(), 2);
        r.record(&snap(10_000, &[("a", 10, 0), ("b", 20, 0), ("c", 5, 0)]));
        let tracked = |r: &Recorder| {
            let mut v: Vec<&str> = ["a", "b", "c", "d"]
                .into_iter()
                .filter(|t| r.series(&("m".into(), Some((*t).into()))).is_some())
                .collect();
            v.sort();
            v
        };
        assert_eq!(tracked(&r), vec!["a", "b"], "the two with most lag");
        // c's lag grows past a's: c replaces a. d (no lag) stays out.
        r.record(&snap(20_000, &[("a", 10, 0), ("b", 20, 0), ("c", 50, 0), ("d", 0, 0)]));
        assert_eq!(tracked(&r), vec!["b", "c"]);
        assert_eq!(r.topics_tracked(), 2);
        // Mirrors are always tracked.
        assert!(r.series(&("m".into(), None)).is_some());
    }

    #[test]
    fn paused_means_every_partition_not_stopped_is_paused() {
        let p = |s| part("t", 0, s, 1, 0, 0);
        assert!(all_paused([p(PartitionState::Paused), p(PartitionState::Stopped)].iter()));
        assert!(!all_paused([p(PartitionState::Paused), p(PartitionState::Mirroring)].iter()));
        assert!(!all_paused([p(PartitionState::Stopped)].iter()));
        assert!(!all_paused(std::iter::empty()));
    }
}
