//! The value of an Instance record: an instance's heartbeat.

use serde::{Deserialize, Serialize};

use super::keys::InstanceKey;

/// The value of an Instance record: a heartbeat of one kmirror instance, rewritten every few
/// seconds while it runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstanceValue {
    /// The instance ID (as in the key).
    pub instance: String,
    /// The cluster name the instance runs under (`--cluster-name`).
    pub cluster_name: String,
    /// Where the instance's API and dashboard are reached (`--advertised-url`), when configured.
    pub advertised_url: Option<String>,
    /// The kmirror version the instance runs. Written as `"kmirror_version"`: `"version"` is the
    /// record header's format version.
    #[serde(rename = "kmirror_version")]
    pub version: String,
    /// The slots (state partitions) it owns, in ascending order.
    pub slots: Vec<i32>,
    /// The mirrored partitions in those slots.
    pub partitions: u64,
    /// When this heartbeat was written (ms since the Unix epoch).
    pub heartbeat_at: i64,
    /// When the instance started (ms since the Unix epoch).
    pub started_at: i64,
}

impl InstanceValue {
    /// The record key.
    #[must_use]
    pub fn key(&self) -> InstanceKey {
        InstanceKey { instance: self.instance.clone() }
    }
}
