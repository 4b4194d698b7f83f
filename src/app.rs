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

/// Loads a PEM certificate chain and private key into a TLS server configuration (HTTP/2 and
/// HTTP/1.1 over ALPN).
pub fn tls_config(cert: &std::path::Path, key: &std::path::Path) -> std::io::Result<rustls::ServerConfig> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let bad = |what: &str, e: &dyn std::fmt::Display| {
        std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{what}: {e}"))
    };
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| bad(&format!("tls.cert {}", cert.display()), &e))?
        .collect::<Result<_, _>>()
        .map_err(|e| bad(&format!("tls.cert {}", cert.display()), &e))?;
    if certs.is_empty() {
        return Err(bad(&format!("tls.cert {}", cert.display()), &"no certificate found"));
    }
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| bad(&format!("tls.key {}", key.display()), &e))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| bad("tls", &e))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| bad("tls", &e))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// Serves `router(state)` over TLS until `shutdown` resolves; then stops accepting, lets
/// in-flight requests finish (graceful shutdown of every connection) and returns.
pub async fn serve_tls(
    listener: TcpListener,
    state: AppState,
    tls: rustls::ServerConfig,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    use hyper_util::rt::{TokioExecutor, TokioIo};
    use hyper_util::server::conn::auto::Builder;
    use hyper_util::service::TowerToHyperService;
    use tower::ServiceExt;

    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
    let app = router(state);
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut connections = tokio::task::JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(x) => x,
                Err(e) => {
                    tracing::warn!("accept failed: {e}");
                    continue;
                }
            },
        };
        let acceptor = acceptor.clone();
        let app = app.clone();
        let mut stop = stop_rx.clone();
        connections.spawn(async move {
            let tls = match tokio::time::timeout(std::time::Duration::from_secs(10), acceptor.accept(stream)).await {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => {
                    tracing::debug!(%peer, "TLS handshake failed: {e}");
                    return;
                }
                Err(_) => return,
            };
            // Handlers read the client address like with the plain listener.
            let svc = app.map_request(move |mut req: axum::http::Request<hyper::body::Incoming>| {
                req.extensions_mut().insert(axum::extract::ConnectInfo(peer));
                req
            });
            let builder = Builder::new(TokioExecutor::new());
            let conn = builder.serve_connection_with_upgrades(TokioIo::new(tls), TowerToHyperService::new(svc));
            tokio::pin!(conn);
            tokio::select! {
                r = conn.as_mut() => {
                    if let Err(e) = r {
                        tracing::debug!(%peer, "connection ended: {e}");
                    }
                }
                _ = stop.changed() => {
                    conn.as_mut().graceful_shutdown();
                    let _ = conn.await;
                }
            }
        });
    }
    let _ = stop_tx.send(true);
    while connections.join_next().await.is_some() {}
    Ok(())
}
