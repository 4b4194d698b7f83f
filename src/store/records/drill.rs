//! The value of a Drill record: a DR drill, its steps and its report.

use serde::{Deserialize, Serialize};

use super::keys::DrillKey;

/// One step of a drill, as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrillStepValue {
    /// The step (`create_canary`, `produce`, `commit_group`, `mirror`, `failover`, `verify`,
    /// `cleanup`).
    pub name: String,
    /// `pending`, `running`, `done`, `failed`, `skipped`.
    pub status: String,
    /// When it started and finished (ms since the Unix epoch).
    pub started_at: Option<i64>,
    pub finished_at: Option<i64>,
    /// What it did, or why it failed.
    pub detail: Option<String>,
}

/// The value of a Drill record: one disaster-recovery drill, rewritten as it progresses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrillValue {
    /// The drill's ID (as in the key).
    pub id: String,
    /// The mirror (as in the key).
    pub mirror: String,
    /// `running`, `passed`, `failed`, `interrupted` (its instance stopped while it ran).
    pub status: String,
    /// The identity that asked for it.
    pub requested_by: String,
    pub client_address: Option<String>,
    /// The instance that runs it.
    pub instance: String,
    /// When it was asked and when it finished (ms since the Unix epoch).
    pub requested_at: i64,
    pub finished_at: Option<i64>,
    /// The canary topic.
    pub canary_topic: String,
    /// Its steps, in order.
    pub steps: Vec<DrillStepValue>,
    /// Once finished: the report, as its canonical JSON (digest included), exactly as downloaded.
    pub report: Option<String>,
}

impl DrillValue {
    /// The record key.
    #[must_use]
    pub fn key(&self) -> DrillKey {
        DrillKey { mirror: self.mirror.clone(), id: self.id.clone() }
    }
}
