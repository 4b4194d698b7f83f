//! `/healthz` and `/readyz`.

use serde::Serialize;
use utoipa::ToSchema;

/// `/healthz`: the process is up.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Liveness {
    /// Always `ok`.
    pub status: String,
    pub uptime_seconds: u64,
}

/// `/readyz`: the engine publishes fresh snapshots.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Readiness {
    pub ready: bool,
    pub snapshot_age_ms: u64,
    pub detail: String,
}
