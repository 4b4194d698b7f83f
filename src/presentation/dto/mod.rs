//! The REST API's wire types: request bodies (strict: unknown fields are refused) and response
//! bodies mapped from the engine's snapshot. Engine types never reach the wire directly, so the
//! engine can change its model without changing the contract, and no `MirrorSpec` (which holds
//! secrets) is ever serialised back.
//!
//! Timestamps are RFC 3339 strings in UTC (`2026-05-01T12:00:00.000Z`). Every read carries the
//! age of the snapshot it was served from (`taken_at`, `snapshot_age_ms`).
//!
//! One file per resource. The API serves them (`crate::api::dto` is this module) and the
//! incident report, which the dashboard downloads too, is made of them; hence they live below
//! both `api` and `ui`.

use std::collections::BTreeMap;

use crate::domain::Timestamp;
use crate::engine::PartitionSnapshot;

mod approvals;
mod cluster;
mod drills;
mod health;
mod history;
mod instances;
mod lifecycle;
mod lineage;
mod mirrors;
mod operations;
mod paths;
mod probes;
mod shared;
mod topics;

pub use approvals::*;
pub use cluster::*;
pub use drills::*;
pub use health::*;
pub use history::*;
pub use instances::*;
pub use lifecycle::*;
pub use lineage::*;
pub use mirrors::*;
pub use operations::*;
pub use paths::*;
pub use probes::*;
pub use shared::*;
pub use topics::*;

/// Page size of a listing when none is asked for; also how many per-topic results an operation
/// shows in the audit listing.
pub const DEFAULT_PAGE_SIZE: usize = 100;

/// An RFC 3339 rendering of a timestamp.
pub fn ts(t: Timestamp) -> String {
    t.to_string()
}

/// Milliseconds from `taken_at` until now (0 if the clock went backwards).
pub fn age_ms(taken_at: Timestamp, now: Timestamp) -> u64 {
    u64::try_from(taken_at.millis_until(now)).unwrap_or(0)
}

fn ts_millis(ms: i64) -> String {
    Timestamp::from_millis(ms).to_string()
}

/// JSON has no NaN or infinity; a lag that is not a finite number is shown as 0.
fn finite(x: f64) -> f64 {
    if x.is_finite() { x } else { 0.0 }
}

/// Partition counts by state (only states with at least one partition appear).
fn state_counts<'a>(partitions: impl Iterator<Item = &'a PartitionSnapshot>) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for p in partitions {
        *m.entry(p.state.as_str().to_string()).or_default() += 1;
    }
    m
}
