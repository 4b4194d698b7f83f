//! The catch-up estimate: how long until a mirror (or topic) has no lag, from the lag now and
//! the rates of the last few minutes. Pure.

use serde::Serialize;

use super::series::{Sample, known};

/// Below this lag (seconds behind) a mirror counts as caught up: a transaction and a lag refresh
/// take about that long even when nothing is queued.
pub const CAUGHT_UP_SECONDS: f64 = 5.0;

/// Rate samples needed before an estimate is given.
pub const MIN_SAMPLES: usize = 3;

/// When a mirror or topic will have caught up. Never a negative or infinite number.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Eta {
    /// No lag (or caught up less than [`CAUGHT_UP_SECONDS`] ago: a transaction in flight).
    CaughtUp,
    /// Every partition that is not failed over is PAUSED (or pausing): nothing catches up.
    Paused,
    /// About this many seconds at the recent rates.
    Eta { seconds: u64 },
    /// The mirror is not catching up: the source grows faster than it is mirrored (by this many
    /// records per second; 0 when neither moves, e.g. a stalled data path).
    FallingBehind { records_per_sec: f64 },
    /// Not enough samples yet (the history is new or was restarted).
    Unknown,
}

impl Eta {
    /// The estimate from the current lag, whether it is paused, and the recent samples (oldest
    /// first): lag / (mirror rate - source rate), the rates being the means of the samples' known
    /// mirrored records/s and source produce rates.
    pub fn estimate(lag_records: i64, lag_seconds: f64, paused: bool, recent: &[Sample]) -> Eta {
        if paused {
            return Eta::Paused;
        }
        // A lag of 0 s with records behind means "not caught up once yet" (the engine measures
        // the time since the partition was last caught up), not "caught up".
        if lag_records <= 0 || (lag_seconds > 0.0 && lag_seconds < CAUGHT_UP_SECONDS) {
            return Eta::CaughtUp;
        }
        let mean = |f: fn(&Sample) -> f32| -> Option<f64> {
            let v: Vec<f64> = recent.iter().filter_map(|s| known(f(s))).collect();
            (v.len() >= MIN_SAMPLES).then(|| v.iter().sum::<f64>() / v.len() as f64)
        };
        let (Some(mirror), Some(source)) = (mean(|s| s.mirrored_records_per_sec), mean(|s| s.source_records_per_sec))
        else {
            return Eta::Unknown;
        };
        let net = mirror - source;
        // Less than one record a minute of progress is not progress.
        if !net.is_finite() || net <= 1.0 / 60.0 {
            let behind = if net.is_finite() { (-net).max(0.0) } else { 0.0 };
            return Eta::FallingBehind { records_per_sec: (behind * 10.0).round() / 10.0 };
        }
        let seconds = (lag_records as f64 / net).ceil();
        // Finite by construction (net > 0); capped so it always fits.
        Eta::Eta { seconds: if seconds >= u64::MAX as f64 { u64::MAX } else { seconds.max(1.0) as u64 } }
    }

    /// `caught_up`, `paused`, `eta`, `falling_behind`, `unknown`.
    pub fn slug(&self) -> &'static str {
        match self {
            Eta::CaughtUp => "caught_up",
            Eta::Paused => "paused",
            Eta::Eta { .. } => "eta",
            Eta::FallingBehind { .. } => "falling_behind",
            Eta::Unknown => "unknown",
        }
    }

    /// For people: `caught up`, `about 4 min`, `not catching up (falling behind by 120 records/s)`.
    pub fn text(&self) -> String {
        match self {
            Eta::CaughtUp => "caught up".into(),
            Eta::Paused => "paused".into(),
            Eta::Eta { seconds } => format!("about {}", about(*seconds)),
            Eta::FallingBehind { records_per_sec } if *records_per_sec <= 0.0 => "not catching up (no progress)".into(),
            Eta::FallingBehind { records_per_sec } => {
                format!("not catching up (falling behind by {} records/s)", rate_text(*records_per_sec))
            }
            Eta::Unknown => "not known yet".into(),
        }
    }
}

/// A rounded duration: `30 s`, `4 min`, `2 h 10 min`, `3 d`.
pub fn about(seconds: u64) -> String {
    match seconds {
        0..60 => format!("{} s", seconds.div_ceil(10).max(1) * 10),
        60..3_600 => format!("{} min", seconds.div_ceil(60)),
        3_600..86_400 => {
            let m = seconds.div_ceil(600) * 10;
            let (h, m) = (m / 60, m % 60);
            if m == 0 { format!("{h} h") } else { format!("{h} h {m} min") }
        }
        _ => format!("{} d", seconds.div_ceil(86_400)),
    }
}

/// `1,234` or `0.5`.
pub fn rate_text(x: f64) -> String {
    if x >= 10.0 { crate::format::int(x.round() as i64) } else { format!("{:.1}", x) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Timestamp;

    /// `n` samples 10 s apart ending with a lag of `lag_now`, mirrored at `mirror` records/s
    /// while the source adds `source`.
    fn samples(n: usize, mirror: f32, source: f32) -> Vec<Sample> {
        let lag_now = 1_000_000_000f64;
        (0..n)
            .map(|i| Sample {
                at: Timestamp::from_millis(i as i64 * 10_000),
                lag_records: (lag_now + (n - 1 - i) as f64 * 10.0 * f64::from(mirror - source)) as i64,
                lag_seconds: 0.0,
                mirrored_records_per_sec: mirror,
                mirrored_bytes_per_sec: mirror * 100.0,
                source_records_per_sec: source,
            })
            .collect()
    }

    #[test]
    fn catching_up_gives_a_finite_estimate() {
        // 18,000 records behind, mirroring 200/s while the source adds 100/s: 180 s.
        let e = Eta::estimate(18_000, 60.0, false, &samples(30, 200.0, 100.0));
        assert_eq!(e, Eta::Eta { seconds: 180 });
        assert_eq!(e.text(), "about 3 min");
        // Less lag, same rates: shorter.
        let Eta::Eta { seconds } = Eta::estimate(9_000, 60.0, false, &samples(30, 200.0, 100.0)) else { panic!() };
        assert!(seconds < 180);
    }

    #[test]
    fn falling_behind_says_by_how_much() {
        let e = Eta::estimate(18_000, 60.0, false, &samples(30, 100.0, 220.0));
        assert_eq!(e, Eta::FallingBehind { records_per_sec: 120.0 });
        assert_eq!(e.text(), "not catching up (falling behind by 120 records/s)");
        // Nothing moves at all: not catching up, never an infinite ETA.
        let e = Eta::estimate(18_000, 60.0, false, &samples(30, 0.0, 0.0));
        assert_eq!(e, Eta::FallingBehind { records_per_sec: 0.0 });
        assert_eq!(e.text(), "not catching up (no progress)");
        // Equal rates: not catching up either.
        assert!(matches!(Eta::estimate(100, 60.0, false, &samples(30, 50.0, 50.0)), Eta::FallingBehind { .. }));
    }

    #[test]
    fn paused_caught_up_and_unknown() {
        assert_eq!(Eta::estimate(18_000, 60.0, true, &samples(30, 200.0, 100.0)), Eta::Paused);
        assert_eq!(Eta::estimate(0, 0.0, false, &[]), Eta::CaughtUp);
        assert_eq!(Eta::estimate(40, 0.5, false, &[]), Eta::CaughtUp, "a few records in flight");
        assert_eq!(Eta::estimate(40, 0.0, false, &[]), Eta::Unknown, "never caught up yet: not caught up");
        assert_eq!(Eta::estimate(18_000, 60.0, false, &samples(2, 200.0, 100.0)), Eta::Unknown);
        let mut unknown = samples(30, 200.0, 100.0);
        unknown.iter_mut().for_each(|s| s.source_records_per_sec = f32::NAN);
        assert_eq!(Eta::estimate(18_000, 60.0, false, &unknown), Eta::Unknown);
    }

    #[test]
    fn never_negative_or_infinite() {
        for (lag, m, s) in [(i64::MAX, 0.02, 0.0), (1, 1e30, 0.0), (i64::MAX, f32::MAX, 0.0), (5, 1.0, 2.0)] {
            match Eta::estimate(lag, 1e9, false, &samples(5, m, s)) {
                Eta::Eta { seconds } => assert!(seconds >= 1, "{lag} {m} {s}"),
                Eta::FallingBehind { records_per_sec } => {
                    assert!(records_per_sec.is_finite() && records_per_sec >= 0.0)
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn durations_read_rounded() {
        assert_eq!(about(1), "10 s");
        assert_eq!(about(59), "60 s");
        assert_eq!(about(61), "2 min");
        assert_eq!(about(3_600), "1 h");
        assert_eq!(about(3_601), "1 h 10 min");
        assert_eq!(about(90_000), "2 d");
        assert_eq!(rate_text(0.46), "0.5");
        assert_eq!(rate_text(1234.4), "1,234");
    }
}
