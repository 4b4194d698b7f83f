//! What every HTTP handler reaches, below both the API and the dashboard (which the composition
//! root in `app` assembles into one router): handlers import this, never `app`.

use std::sync::Arc;
use std::time::Instant;

use crate::auth::TokenStore;
use crate::engine::EngineHandle;

/// What every HTTP handler (API and dashboard) can reach.
#[derive(Clone)]
pub struct AppState {
    pub engine: EngineHandle,
    pub auth: Arc<TokenStore>,
    /// Whether the listener uses TLS (session cookies are then `Secure`).
    pub tls: bool,
    pub started_at: Instant,
    /// Lag over time, sampled from the engine's snapshots (`crate::history`).
    pub history: crate::history::History,
}

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState").field("auth", &self.auth).field("tls", &self.tls).finish_non_exhaustive()
    }
}
