//! Lag history and the catch-up estimate.

use serde::Serialize;
use utoipa::ToSchema;

use crate::history::{Eta, Sample, known};

use super::ts;

/// When a mirror or topic will have caught up, at the rates of the last 5 minutes.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct EtaDto {
    /// `caught_up` (no lag, or only the few seconds a transaction takes), `paused` (every partition
    /// that is not failed over is PAUSED), `eta` (`seconds` from now), `falling_behind` (the source
    /// grows faster than it is mirrored, by `records_per_sec`; 0 when nothing moves) or `unknown`
    /// (not enough samples yet).
    pub status: String,
    /// With `eta`: about how many seconds until caught up (never negative).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seconds: Option<u64>,
    /// With `falling_behind`: how many records per second the lag grows by (0 or more).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub records_per_sec: Option<f64>,
    /// For people: `caught up`, `about 4 min`, `not catching up (falling behind by 120 records/s)`.
    pub text: String,
}

impl From<Eta> for EtaDto {
    fn from(e: Eta) -> Self {
        let (seconds, records_per_sec) = match e {
            Eta::Eta { seconds } => (Some(seconds), None),
            Eta::FallingBehind { records_per_sec } => (None, Some(records_per_sec)),
            _ => (None, None),
        };
        EtaDto { status: e.slug().to_string(), seconds, records_per_sec, text: e.text() }
    }
}

/// One sample. Rates are `null` when unknown (the first sample of a series, or a counter that went
/// backwards: the counting instance restarted or a slot moved).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct HistorySample {
    /// When the engine snapshot it comes from was taken (RFC 3339).
    pub at: String,
    /// Lag in records (sum over partitions; with 1 min samples, the largest in the minute).
    pub lag_records: i64,
    /// Lag in seconds (the largest partition's).
    pub lag_seconds: f64,
    /// Records mirrored per second.
    pub mirrored_records_per_sec: Option<f64>,
    /// Payload bytes mirrored per second, by this instance only (see `notes`).
    pub mirrored_bytes_per_sec: Option<f64>,
    /// The source's produce rate: records per second added to the source partitions' high
    /// watermarks.
    pub source_records_per_sec: Option<f64>,
}

impl From<&Sample> for HistorySample {
    fn from(s: &Sample) -> Self {
        HistorySample {
            at: ts(s.at),
            lag_records: s.lag_records,
            lag_seconds: f64::from(s.lag_seconds),
            mirrored_records_per_sec: known(s.mirrored_records_per_sec),
            mirrored_bytes_per_sec: known(s.mirrored_bytes_per_sec),
            source_records_per_sec: known(s.source_records_per_sec),
        }
    }
}
