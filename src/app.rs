//! Composition root: configuration → engine → HTTP router. `run` serves until `shutdown`
//! resolves, then stops accepting requests, lets in-flight ones finish and shuts the engine down.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use tokio::net::TcpListener;

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
}

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState").field("auth", &self.auth).field("tls", &self.tls).finish_non_exhaustive()
    }
}

/// The whole HTTP surface: REST API, dashboard, static files.
pub fn router(state: AppState) -> Router {
    // One HTTP-metrics registry per router: `/metrics` reports what the layers record.
    let http_metrics = crate::api::HttpMetrics::default();
    let app =
        Router::new().merge(crate::api::router(state.clone(), http_metrics.clone())).merge(crate::ui::router(state));
    // Body limit (1 MiB), tracing, HTTP metrics and problem+json for framework errors.
    crate::api::layers(app, http_metrics)
}

/// Serves `router(state)` on `listener` until `shutdown` resolves.
pub async fn serve(
    listener: TcpListener,
    state: AppState,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let app = router(state).into_make_service_with_connect_info::<SocketAddr>();
    axum::serve(listener, app).with_graceful_shutdown(shutdown).await
}
