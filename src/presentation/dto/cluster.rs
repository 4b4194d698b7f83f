//! The destination cluster (`GET /api/v1/cluster`).

use serde::Serialize;
use utoipa::ToSchema;

/// A broker of the destination cluster.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Broker {
    pub id: i32,
    pub host: String,
    pub port: i32,
}

/// The destination cluster kmirror is attached to.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ClusterResponse {
    /// The destination cluster's ID (empty until known).
    pub cluster_id: String,
    /// The destination cluster's brokers (empty until the engine reports them).
    pub brokers: Vec<Broker>,
    /// The kmirror version serving this request.
    pub kmirror_version: String,
    pub mirror_count: usize,
    pub uptime_seconds: u64,
    pub taken_at: String,
    pub snapshot_age_ms: u64,
}
