//! Charts of the lag history (`crate::history`): lag and throughput over the last hour as inline
//! SVG polylines, drawn on the server (no chart library, readable without JavaScript, refreshed
//! with the page's live fragment). One polyline per unbroken run of a series; at most
//! [`MAX_POINTS`] points per series, so a chart costs the same whatever the history holds.
//!
//! Also the catch-up estimate as the pages show it.

use std::time::Duration;

use crate::domain::Timestamp;
use crate::engine::MirrorSnapshot;
use crate::format;
use crate::history::{Eta, History, Sample, known};

/// The chart's drawing box (the SVG stretches it to its container; strokes do not scale).
pub const WIDTH: f64 = 600.0;
pub const HEIGHT: f64 = 100.0;
/// Points per series at most: the samples of a time slot are merged (largest value).
pub const MAX_POINTS: usize = 180;
/// The window the pages chart.
pub const WINDOW: Duration = Duration::from_secs(3_600);

/// One series of a chart.
#[derive(Debug, Clone)]
pub struct ChartLine {
    /// `lag`, `mirrored` or `source`: the colour (CSS variables, light and dark).
    pub css: &'static str,
    pub name: &'static str,
    /// `points` attributes, one per unbroken run.
    pub runs: Vec<String>,
    /// The latest value, formatted.
    pub latest: String,
}

/// One chart: an SVG with its lines and an accessible text summary.
#[derive(Debug, Clone)]
pub struct Chart {
    /// Unique within the page (ids of `<title>`).
    pub id: String,
    pub title: &'static str,
    pub lines: Vec<ChartLine>,
    /// The top of the y axis, formatted.
    pub y_max: String,
    /// The text summary (`<title>` and `aria-label`).
    pub summary: String,
    /// No sample at all yet.
    pub empty: bool,
}

/// The lag and throughput charts of one mirror or topic, and since when the history runs.
#[derive(Debug, Clone)]
pub struct Trends {
    pub lag: Chart,
    pub throughput: Chart,
    /// `since 2026-05-01 12:00:03 UTC`: a restart starts a new history.
    pub since: String,
    pub since_title: String,
    /// False for a topic beyond the tracked-topic cap.
    pub tracked: bool,
}

/// The catch-up estimate as shown.
#[derive(Debug, Clone)]
pub struct EtaView {
    pub text: String,
    /// `ok` (caught up), `warn` (catching up, unknown), `bad` (falling behind), `muted` (paused).
    pub css: &'static str,
    pub slug: &'static str,
    /// With an estimate: `about 3 min`; otherwise empty.
    pub wait: String,
}

pub fn eta_view(e: Eta) -> EtaView {
    let css = match e {
        Eta::CaughtUp => "ok",
        Eta::Paused => "muted",
        Eta::Eta { .. } | Eta::Unknown => "warn",
        Eta::FallingBehind { .. } => "bad",
    };
    let wait = match e {
        Eta::Eta { seconds } => format!("about {}", crate::history::eta::about(seconds)),
        _ => String::new(),
    };
    EtaView { text: e.text(), css, slug: e.slug(), wait }
}

/// The estimate of a mirror (`topic == None`) or topic. Without a history only what the
/// snapshot alone tells: caught up, paused, or not known.
///
/// "Caught up" or "paused" never stands next to a lag: the estimate counts only the partitions
/// that mirror, so when the lag shown includes paused partitions it says `paused, N behind`, and
/// when it is only what failed-over partitions left unmirrored, `failed over, N not mirrored`.
pub fn eta_of(history: Option<&History>, m: &MirrorSnapshot, topic: Option<&str>) -> EtaView {
    let e = match history {
        Some(h) => h.eta(m, topic),
        None => History::new(crate::history::HistoryConfig::default(), Timestamp::EPOCH).eta(m, topic),
    };
    let mut view = eta_view(e);
    if matches!(e, Eta::CaughtUp | Eta::Paused) {
        let (paused, stopped) = idle_lag(m, topic);
        if paused > 0 {
            view = EtaView {
                text: format!("paused, {} behind", format::int(paused)),
                css: "muted",
                slug: "paused",
                wait: String::new(),
            };
        } else if stopped > 0 && e == Eta::CaughtUp {
            view = EtaView {
                text: format!("failed over, {} not mirrored", format::int(stopped)),
                css: "muted",
                slug: "stopped",
                wait: String::new(),
            };
        }
    }
    view
}

/// The lag of the mirror's (or topic's) paused or pausing partitions, and of its STOPPED ones:
/// what the catch-up estimate leaves out.
fn idle_lag(m: &MirrorSnapshot, topic: Option<&str>) -> (i64, i64) {
    use crate::domain::PartitionState;
    let mut paused = 0;
    let mut stopped = 0;
    for p in m.topics.iter().filter(|t| topic.is_none_or(|n| t.name == n)).flat_map(|t| &t.partitions) {
        match p.state {
            PartitionState::Paused | PartitionState::Pausing => paused += p.lag_records.max(0),
            PartitionState::Stopped => stopped += p.lag_records.max(0),
            _ => {}
        }
    }
    (paused, stopped)
}

/// Merges samples into at most `max` slots of equal time (largest value per slot) and returns
/// (x, value) runs, broken where a value is unknown or samples are missing.
fn runs(
    samples: &[Sample],
    from: i64,
    to: i64,
    gap_ms: i64,
    value: impl Fn(&Sample) -> Option<f64>,
) -> Vec<Vec<(f64, f64)>> {
    let span = (to - from).max(1) as f64;
    let slot_ms = (span / MAX_POINTS as f64).max(1.0);
    let mut out: Vec<Vec<(f64, f64)>> = Vec::new();
    let mut cur: Vec<(f64, f64)> = Vec::new();
    let mut last: Option<(i64, i64)> = None; // (slot, at)
    for s in samples {
        let at = s.at.as_millis();
        if at < from {
            continue;
        }
        let Some(v) = value(s) else {
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            last = None;
            continue;
        };
        let slot = ((at - from) as f64 / slot_ms) as i64;
        let x = (at - from) as f64 / span * WIDTH;
        match last {
            Some((ls, _)) if ls == slot => {
                if let Some(p) = cur.last_mut() {
                    p.0 = x;
                    p.1 = p.1.max(v);
                }
            }
            Some((_, lat)) if at - lat > gap_ms => {
                out.push(std::mem::take(&mut cur));
                cur.push((x, v));
            }
            _ => cur.push((x, v)),
        }
        last = Some((slot, at));
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// A round top for the y axis: 1, 2 or 5 times a power of ten, at least `max`.
fn nice_max(max: f64) -> f64 {
    if !max.is_finite() || max <= 0.0 {
        return 1.0;
    }
    let p = 10f64.powf(max.log10().floor());
    [1.0, 2.0, 5.0, 10.0].into_iter().map(|m| m * p).find(|v| *v >= max).unwrap_or(10.0 * p)
}

fn points(run: &[(f64, f64)], top: f64) -> String {
    let mut s = String::with_capacity(run.len() * 12);
    for (i, (x, v)) in run.iter().enumerate() {
        if i > 0 {
            s.push(' ');
        }
        let y = HEIGHT - (v / top).clamp(0.0, 1.0) * (HEIGHT - 2.0) - 1.0;
        s.push_str(&format!("{x:.1},{y:.1}"));
    }
    // A single point draws nothing as a polyline: make it a short flat stroke.
    if run.len() == 1 {
        let (x, v) = run[0];
        let y = HEIGHT - (v / top).clamp(0.0, 1.0) * (HEIGHT - 2.0) - 1.0;
        s.push_str(&format!(" {:.1},{y:.1}", (x + 2.0).min(WIDTH)));
    }
    s
}

type Pick = fn(&Sample) -> Option<f64>;

#[allow(clippy::too_many_arguments)]
fn chart(
    id: String,
    title: &'static str,
    unit: &'static str,
    samples: &[Sample],
    (from, to, gap_ms): (i64, i64, i64),
    series: &[(&'static str, &'static str, Pick)],
    fmt: fn(f64) -> String,
) -> Chart {
    let mut max = 0f64;
    let mut all_runs = Vec::new();
    for (_, _, pick) in series {
        let r = runs(samples, from, to, gap_ms, pick);
        max = r.iter().flatten().map(|p| p.1).fold(max, f64::max);
        all_runs.push(r);
    }
    let top = nice_max(max);
    let mut parts = Vec::new();
    let lines: Vec<ChartLine> = series
        .iter()
        .zip(all_runs)
        .map(|((css, name, pick), r)| {
            let latest = samples.iter().rev().find_map(pick);
            let peak = r.iter().flatten().map(|p| p.1).fold(f64::NAN, f64::max);
            parts.push(match latest {
                Some(l) => {
                    format!("{name} now {} {unit}, peak {} {unit}", fmt(l), fmt(if peak.is_nan() { l } else { peak }))
                }
                None => format!("{name} not known yet"),
            });
            ChartLine {
                css,
                name,
                runs: r.iter().map(|run| points(run, top)).collect(),
                latest: latest.map_or_else(|| format::NONE.to_string(), |l| format!("{} {unit}", fmt(l))),
            }
        })
        .collect();
    let empty = samples.is_empty();
    let summary = if empty {
        format!("{title} over the last hour: no samples yet")
    } else {
        format!("{title} over the last hour ({} samples): {}", samples.len(), parts.join("; "))
    };
    Chart { id, title, lines, y_max: format!("{} {unit}", fmt(top)), summary, empty }
}

fn records(x: f64) -> String {
    format::int(x.round() as i64)
}

fn per_sec(x: f64) -> String {
    crate::history::eta::rate_text(x)
}

/// The charts of a mirror (`topic == None`) or topic over the last hour before `now`. `current`
/// is the lag in the snapshot the page shows (and when it was taken): drawn as the lag line's
/// last point when it is newer than the last sample, so the line is as live as the page.
pub fn trends(
    history: Option<&History>,
    (mirror, topic): (&str, Option<&str>),
    current: (Timestamp, i64),
    id: &str,
    now: Timestamp,
) -> Trends {
    let (window, since) = match history {
        Some(h) => {
            let mut w = h.window(mirror, topic, WINDOW, now);
            let (at, lag) = current;
            if w.tracked && w.samples.last().is_some_and(|s| s.at < at) {
                w.samples.push(Sample {
                    at,
                    lag_records: lag,
                    lag_seconds: 0.0,
                    mirrored_records_per_sec: f32::NAN,
                    mirrored_bytes_per_sec: f32::NAN,
                    source_records_per_sec: f32::NAN,
                });
            }
            (w, h.since())
        }
        None => {
            (crate::history::Window { samples: Vec::new(), resolution: Duration::from_secs(10), tracked: false }, now)
        }
    };
    let to = now.as_millis();
    let from = to - WINDOW.as_millis() as i64;
    // Missing more than three samples in a row breaks the line.
    let gap = (window.resolution.as_millis() as i64).max(1) * 3;
    let lag: [(&'static str, &'static str, Pick); 1] = [("lag", "lag", |s| Some(s.lag_records as f64))];
    let thru: [(&'static str, &'static str, Pick); 2] = [
        ("mirrored", "mirrored", |s| known(s.mirrored_records_per_sec)),
        ("source", "source produce rate", |s| known(s.source_records_per_sec)),
    ];
    Trends {
        lag: chart(format!("{id}-lag"), "Lag", "records", &window.samples, (from, to, gap), &lag, records),
        throughput: chart(
            format!("{id}-thru"),
            "Throughput",
            "records/s",
            &window.samples,
            (from, to, gap),
            &thru,
            per_sec,
        ),
        since: if history.is_some() {
            format!("since {}", format::datetime(since))
        } else {
            "nowhere (no history)".into()
        },
        since_title: "History is kept in this instance's memory: a restart starts a new one.".into(),
        tracked: history.is_none() || window.tracked || topic.is_none(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(at: i64, lag: i64, rate: f32) -> Sample {
        Sample {
            at: Timestamp::from_millis(at),
            lag_records: lag,
            lag_seconds: 0.0,
            mirrored_records_per_sec: rate,
            mirrored_bytes_per_sec: rate,
            source_records_per_sec: rate,
        }
    }

    #[test]
    fn runs_are_bounded_and_break_at_gaps_and_unknowns() {
        // 720 samples 5 s apart over an hour: at most MAX_POINTS points.
        let samples: Vec<Sample> = (0..720).map(|i| s(i * 5_000, i, 1.0)).collect();
        let r = runs(&samples, 0, 3_600_000, 30_000, |s| Some(s.lag_records as f64));
        assert_eq!(r.len(), 1);
        assert!(r[0].len() <= MAX_POINTS, "{}", r[0].len());
        // Largest value per slot.
        assert_eq!(r[0].last().unwrap().1, 719.0);
        // A gap of a minute and an unknown value each break the line.
        let samples =
            vec![s(0, 1, 1.0), s(10_000, 1, 1.0), s(70_000, 1, f32::NAN), s(80_000, 1, 1.0), s(90_000, 1, 1.0)];
        let r = runs(&samples, 0, 3_600_000, 30_000, |s| known(s.mirrored_records_per_sec));
        assert_eq!(r.len(), 2);
    }

    #[test]
    fn charts_scale_to_a_round_top_and_summarise() {
        assert_eq!(nice_max(0.0), 1.0);
        assert_eq!(nice_max(7.0), 10.0);
        assert_eq!(nice_max(1_234.0), 2_000.0);
        let samples: Vec<Sample> = (0..10).map(|i| s(3_000_000 + i * 10_000, 100 * i, 5.0)).collect();
        let c = chart(
            "x".into(),
            "Lag",
            "records",
            &samples,
            (0, 3_600_000, 30_000),
            &[("lag", "lag", |s| Some(s.lag_records as f64))],
            records,
        );
        assert_eq!(c.y_max, "1,000 records");
        assert_eq!(c.summary, "Lag over the last hour (10 samples): lag now 900 records, peak 900 records");
        assert!(c.lines[0].runs[0].split(' ').all(|p| p.split(',').count() == 2));
        let empty = chart("y".into(), "Lag", "records", &[], (0, 1, 1), &[("lag", "lag", |_| None)], records);
        assert!(empty.empty && empty.summary.ends_with("no samples yet"));
    }
}
