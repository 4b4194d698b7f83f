//! Lag over time, in the process: every 10 s a background task (`history`, started by
//! [`crate::app::run`]) reads the engine's latest snapshot and appends one sample per mirror and
//! per topic: lag in records (sum) and seconds (max), mirrored records/s and bytes/s, and the
//! source's produce rate. The last hour is kept at
//! 10 s, the last 24 h at 1 min, in fixed-capacity rings ([`series`]); the catch-up estimate
//! ([`eta`]) reads the last 5 minutes.
//!
//! Memory is bounded: [`SAMPLE_BYTES`] (32) x (360 + 1,440) samples = 57.6 KB per series, one
//! series per mirror and per tracked topic; at most [`HistoryConfig::max_topics`] (1,000) topics
//! are tracked (beyond that, a topic with more lag takes the place of the tracked one with the
//! least), so about 58 MB at most, plus the mirrors'.
//!
//! Nothing is persisted: a restart starts a new history, and [`History::since`] says when.
//! The engine is not touched: the task only reads snapshots.
//!
//! Counting with several instances: `records_mirrored` is known on every instance for every
//! partition (each reads the owners' commits), but `bytes_mirrored` only on the instance that
//! owns a partition's slot, so bytes/s is this instance's share.

pub mod eta;
pub mod series;

use std::sync::{Arc, RwLock};
use std::time::Duration;

use tracing::Instrument;

use crate::domain::{PartitionState, Timestamp};
use crate::engine::{EngineHandle, MirrorSnapshot, Snapshot};

pub use eta::Eta;
pub use series::{Key, Recorder, Resolution, SAMPLE_BYTES, Sample, all_paused, known};

/// How the history samples and what it keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistoryConfig {
    /// How often the snapshot is sampled (10 s).
    pub sample_interval: Duration,
    /// Ring sizes and the coarse interval.
    pub resolution: Resolution,
    /// Topics tracked at most (mirrors are always tracked).
    pub max_topics: usize,
    /// The samples the catch-up estimate reads (the last 5 min).
    pub eta_window: Duration,
}

impl Default for HistoryConfig {
    fn default() -> Self {
        HistoryConfig {
            sample_interval: Duration::from_secs(10),
            resolution: Resolution::default(),
            max_topics: 1_000,
            eta_window: Duration::from_secs(300),
        }
    }
}

impl HistoryConfig {
    /// How far back the fine (10 s) samples reach: an hour by default.
    pub fn fine_span(&self) -> Duration {
        self.sample_interval * u32::try_from(self.resolution.fine_capacity).unwrap_or(u32::MAX)
    }

    /// The most memory the rings can take: bytes per sample x samples per series x series
    /// (`mirrors` plus the topic cap).
    pub fn memory_bound_bytes(&self, mirrors: usize) -> usize {
        SAMPLE_BYTES * (self.resolution.fine_capacity + self.resolution.coarse_capacity) * (self.max_topics + mirrors)
    }
}

/// Samples of one series over a window.
#[derive(Debug, Clone)]
pub struct Window {
    /// Oldest first.
    pub samples: Vec<Sample>,
    /// The spacing of the samples: the sample interval, or the coarse interval for windows
    /// longer than the fine samples reach.
    pub resolution: Duration,
    /// Whether this series is tracked (topics beyond the cap are not).
    pub tracked: bool,
}

/// The shared history: written by the task, read by the API and the dashboard. Cheap to clone.
#[derive(Clone)]
pub struct History {
    inner: Arc<Inner>,
}

struct Inner {
    since: Timestamp,
    config: HistoryConfig,
    // std RwLock on purpose: held only to append or copy out a bounded number of samples.
    recorder: RwLock<Recorder>,
}

impl std::fmt::Debug for History {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("History").field("since", &self.inner.since).field("config", &self.inner.config).finish()
    }
}

impl History {
    /// An empty history that starts at `since`.
    pub fn new(config: HistoryConfig, since: Timestamp) -> History {
        let recorder = Recorder::new(config.resolution, config.max_topics);
        History { inner: Arc::new(Inner { since, config, recorder: RwLock::new(recorder) }) }
    }

    /// When this history started (the process start: a restart starts a new history).
    pub fn since(&self) -> Timestamp {
        self.inner.since
    }

    pub fn config(&self) -> HistoryConfig {
        self.inner.config
    }

    /// Topics tracked now.
    pub fn topics_tracked(&self) -> usize {
        self.read().topics_tracked()
    }

    /// Samples held over every series (x [`SAMPLE_BYTES`] is the memory in use).
    pub fn samples_held(&self) -> usize {
        self.read().samples_held()
    }

    /// Appends the samples of `snap` (nothing when it is not newer than the last one).
    pub fn record(&self, snap: &Snapshot) {
        self.inner.recorder.write().unwrap_or_else(|e| e.into_inner()).record(snap);
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Recorder> {
        self.inner.recorder.read().unwrap_or_else(|e| e.into_inner())
    }

    /// The samples of a mirror (`topic == None`) or topic over the `window` before `now`: fine
    /// samples when the window is within the fine span (an hour), else minutes.
    pub fn window(&self, mirror: &str, topic: Option<&str>, window: Duration, now: Timestamp) -> Window {
        let config = self.inner.config;
        let from = Timestamp::from_millis(
            now.as_millis().saturating_sub(i64::try_from(window.as_millis()).unwrap_or(i64::MAX)),
        );
        let key: Key = (mirror.to_string(), topic.map(str::to_string));
        let rec = self.read();
        let fine = window <= config.fine_span();
        let resolution = if fine {
            config.sample_interval
        } else {
            Duration::from_millis(u64::try_from(config.resolution.coarse_interval_ms).unwrap_or(60_000))
        };
        let Some(series) = rec.series(&key) else {
            return Window { samples: Vec::new(), resolution, tracked: false };
        };
        let samples = if fine { series.fine_since(from).copied().collect() } else { series.coarse_since(from) };
        Window { samples, resolution, tracked: true }
    }

    /// The catch-up estimate of a mirror (`topic == None`) or one of its topics, from the
    /// snapshot's lag and the last [`HistoryConfig::eta_window`] of samples. A mirror's counts the
    /// lag of its partitions that are not paused or failed over.
    pub fn eta(&self, m: &MirrorSnapshot, topic: Option<&str>) -> Eta {
        let (lag, lag_s, paused) = match topic {
            // A mirror: the lag of the partitions that are mirroring (a paused topic never catches
            // up by waiting; its own row says paused).
            None => {
                let active = || {
                    m.topics.iter().flat_map(|t| &t.partitions).filter(|p| {
                        !matches!(p.state, PartitionState::Paused | PartitionState::Pausing | PartitionState::Stopped)
                    })
                };
                (
                    active().map(|p| p.lag_records).sum::<i64>(),
                    active().map(|p| p.lag_seconds).fold(0.0, f64::max),
                    all_paused(m.topics.iter().flat_map(|t| &t.partitions)),
                )
            }
            Some(name) => match m.topic(name) {
                Some(t) => (t.lag_records, t.lag_seconds, all_paused(t.partitions.iter())),
                None => return Eta::Unknown,
            },
        };
        let key: Key = (m.name.clone(), topic.map(str::to_string));
        let rec = self.read();
        let recent: Vec<Sample> = match rec.series(&key) {
            Some(s) => {
                let newest = s.last().map_or(Timestamp::EPOCH, |x| x.at);
                let span = i64::try_from(self.inner.config.eta_window.as_millis()).unwrap_or(i64::MAX);
                s.fine_since(Timestamp::from_millis(newest.as_millis().saturating_sub(span))).copied().collect()
            }
            None => Vec::new(),
        };
        Eta::estimate(lag, lag_s, paused, &recent)
    }
}

/// The running sampler; [`HistoryTask::stop`] ends it.
#[derive(Debug)]
pub struct HistoryTask {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    join: tokio::task::JoinHandle<()>,
}

impl HistoryTask {
    /// Stops the task and waits for it.
    pub async fn stop(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        let _ = (&mut self.join).await;
    }
}

impl Drop for HistoryTask {
    /// A task handle dropped without [`HistoryTask::stop`] still ends the task.
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
    }
}

/// Starts the `history` task: samples `engine`'s snapshot into `history` every
/// [`HistoryConfig::sample_interval`] until stopped (or the engine is gone).
pub fn spawn(engine: EngineHandle, history: History) -> HistoryTask {
    let (tx, mut rx) = tokio::sync::oneshot::channel::<()>();
    let every = history.config().sample_interval.max(Duration::from_millis(10));
    let task = async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        tracing::debug!(every = ?every, "sampling lag history");
        loop {
            tokio::select! {
                _ = &mut rx => break,
                _ = tick.tick() => history.record(&engine.snapshot()),
            }
        }
        tracing::debug!("lag history stopped");
    };
    let join = tokio::spawn(task.instrument(tracing::info_span!("history")));
    HistoryTask { stop: Some(tx), join }
}

/// Parses a window: `15m`, `1h`, `24h`, `90s` (1 min to 24 h).
pub fn parse_window(s: &str) -> Result<Duration, String> {
    let bad = || format!("invalid window {s:?}: give a duration from 1m to 24h, like 15m, 1h or 24h");
    let s = s.trim();
    let (n, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?);
    let n: u64 = n.parse().map_err(|_| bad())?;
    let secs = match unit {
        "s" => n,
        "m" => n.checked_mul(60).ok_or_else(bad)?,
        "h" => n.checked_mul(3_600).ok_or_else(bad)?,
        _ => return Err(bad()),
    };
    if !(60..=86_400).contains(&secs) {
        return Err(bad());
    }
    Ok(Duration::from_secs(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_parse_within_a_day() {
        assert_eq!(parse_window("1h"), Ok(Duration::from_secs(3_600)));
        assert_eq!(parse_window("15m"), Ok(Duration::from_secs(900)));
        assert_eq!(parse_window("24h"), Ok(Duration::from_secs(86_400)));
        assert_eq!(parse_window("90s"), Ok(Duration::from_secs(90)));
        for bad in ["", "h", "1", "1d", "0m", "25h", "59s", "-1h", "1.5h", "99999999999999999999h", "1hh"] {
            let e = parse_window(bad).unwrap_err();
            assert!(e.contains("from 1m to 24h"), "{bad}: {e}");
        }
    }

    #[test]
    fn the_memory_bound_is_stated() {
        let c = HistoryConfig::default();
        assert_eq!(c.fine_span(), Duration::from_secs(3_600));
        // 32 B x 1,800 samples x 1,000 topics (+ mirrors).
        assert_eq!(c.memory_bound_bytes(0), 57_600_000);
    }
}
