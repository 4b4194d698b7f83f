//! The kmirror instances sharing the work (`GET /api/v1/instances`).

use serde::Serialize;
use utoipa::ToSchema;

use crate::domain::Timestamp;
use crate::engine::{ClusterSnapshot, InstanceSnapshot};

use super::ts;

/// How the slots (partitions of the state topic) are owned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ClusterMode {
    /// Shared by every instance with the same cluster name through a consumer group.
    Group,
    /// This instance owns every slot.
    Standalone,
}

impl ClusterMode {
    fn of(mode: &str) -> Self {
        if mode == "group" { Self::Group } else { Self::Standalone }
    }
}

/// One kmirror instance of the deployment.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Instance {
    /// Its `--instance-id`.
    #[schema(example = "kmirror-0")]
    pub id: String,
    /// Where its API and dashboard are reachable (`--advertised-url`), when it said.
    #[schema(example = "http://kmirror-0.kmirror:8080")]
    pub advertised_url: Option<String>,
    /// The kmirror version it runs.
    pub version: String,
    /// The slots it owns, ascending (another instance's as of its last heartbeat).
    pub slots: Vec<i32>,
    /// Mirrored partitions in those slots.
    pub partitions: u64,
    /// When it last wrote its heartbeat to the state topic (for the answering instance: when
    /// the snapshot was taken).
    pub last_heartbeat: String,
    /// Milliseconds from its last heartbeat until this answer.
    pub heartbeat_age_ms: u64,
    /// When it started.
    pub started_at: String,
    /// Whether this is the instance answering the request.
    pub this: bool,
}

impl Instance {
    pub fn new(i: &InstanceSnapshot, now: Timestamp) -> Self {
        Instance {
            id: i.id.clone(),
            advertised_url: i.advertised_url.clone(),
            version: i.version.clone(),
            slots: i.slots.clone(),
            partitions: i.partitions,
            last_heartbeat: ts(i.last_heartbeat),
            heartbeat_age_ms: u64::try_from(i.last_heartbeat.millis_until(now)).unwrap_or(0),
            started_at: ts(i.started_at),
            this: i.this,
        }
    }
}

/// The deployment as the answering instance sees it: every instance with the same cluster name
/// (itself, and the others by their heartbeats in the state topic) and the slots each owns.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct InstancesResponse {
    /// The deployment's `--cluster-name`.
    pub cluster_name: String,
    pub mode: ClusterMode,
    /// The answering instance's id.
    pub this_instance: String,
    /// How many slots (state-topic partitions) there are.
    pub slots: i32,
    /// Slots no known instance owns (during a rebalance, or while an owner's heartbeat is late).
    pub unowned_slots: Vec<i32>,
    /// Rebalances of the slot group the answering instance saw since it started.
    pub rebalances: u64,
    /// Every instance known, by id.
    pub instances: Vec<Instance>,
    pub taken_at: String,
    pub snapshot_age_ms: u64,
}

impl InstancesResponse {
    pub fn new(c: &ClusterSnapshot, now: Timestamp, taken_at: String, snapshot_age_ms: u64) -> Self {
        let mut instances: Vec<Instance> = c.instances.iter().map(|i| Instance::new(i, now)).collect();
        instances.sort_by(|a, b| a.id.cmp(&b.id));
        InstancesResponse {
            cluster_name: c.cluster_name.clone(),
            mode: ClusterMode::of(&c.mode),
            this_instance: c.this_instance.clone(),
            slots: c.slots,
            unowned_slots: (0..c.slots).filter(|s| c.owner_of(*s).is_none()).collect(),
            rebalances: c.rebalances,
            instances,
            taken_at,
            snapshot_age_ms,
        }
    }
}
