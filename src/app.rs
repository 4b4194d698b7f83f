//! Composition root: configuration → engine → HTTP router. `run` serves until `shutdown`
//! resolves, then stops accepting requests, lets in-flight ones finish and shuts the engine down.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::extract::Request;
use axum::http::{HeaderValue, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use tokio::net::TcpListener;

use crate::api::{ApiError, ProblemType};
use crate::auth::TokenStore;
use crate::engine::EngineHandle;

pub use crate::app_state::AppState;

/// The whole HTTP surface: REST API, dashboard, static files.
pub fn router(state: AppState) -> Router {
    // One HTTP-metrics registry per router: `/metrics` reports what the layers record.
    let http_metrics = crate::api::HttpMetrics::default();
    let tls = state.tls;
    let no_auth = state.auth.is_disabled();
    let app =
        Router::new().merge(crate::api::router(state.clone(), http_metrics.clone())).merge(crate::ui::router(state));
    // Body limit (1 MiB), tracing, HTTP metrics and problem+json for framework errors.
    let mut app = crate::api::layers(app, http_metrics);
    if no_auth {
        app = app.layer(middleware::from_fn(loopback_only));
    }
    // Outermost, so every answer has them: pages, API, static files, 404s and refusals.
    app.layer(middleware::map_response(move |res: Response| security_headers(res, tls)))
}

/// The dashboard's Content-Security-Policy (also sent with every other response, where it does
/// no harm): scripts and styles from `/static` only, no framing.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' \
                                           data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; \
                                           base-uri 'none'";

/// `Strict-Transport-Security`, sent only by a TLS listener.
pub const HSTS: &str = "max-age=31536000";

/// Security headers on every response. `Referrer-Policy: same-origin` (not `no-referrer`): the
/// dashboard returns to the page an action was posted from via its own `Referer`.
async fn security_headers(mut res: Response, tls: bool) -> Response {
    let h = res.headers_mut();
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    if tls {
        h.insert(header::STRICT_TRANSPORT_SECURITY, HeaderValue::from_static(HSTS));
    }
    res
}

/// Whether `host` (a `Host` value or an origin's host, with or without port) names this machine:
/// `localhost`, an address in 127.0.0.0/8 or `[::1]`.
pub fn is_loopback_host(host: &str) -> bool {
    let host = host.trim();
    // `[v6]` or `[v6]:port`
    if let Some(rest) = host.strip_prefix('[') {
        let Some((addr, after)) = rest.split_once(']') else {
            return false;
        };
        let port_ok = after.is_empty() || after.strip_prefix(':').is_some_and(|p| p.parse::<u16>().is_ok());
        return port_ok && addr.parse::<std::net::Ipv6Addr>().is_ok_and(|a| a.is_loopback());
    }
    let name = match host.rsplit_once(':') {
        Some((name, port)) if port.parse::<u16>().is_ok() => name,
        Some(_) => return false,
        None => host,
    };
    let name = name.strip_suffix('.').unwrap_or(name);
    name.eq_ignore_ascii_case("localhost") || name.parse::<std::net::Ipv4Addr>().is_ok_and(|a| a.is_loopback())
}

/// Whether an `Origin` header value is a loopback origin (`http(s)://<loopback host>[:port]`).
/// `null` (sandboxed frames, files) is not.
fn is_loopback_origin(origin: &str) -> bool {
    let Some((scheme, host)) = origin.trim().split_once("://") else {
        return false;
    };
    matches!(scheme.to_ascii_lowercase().as_str(), "http" | "https") && !host.contains('/') && is_loopback_host(host)
}

/// With `--no-auth` every caller is an admin, so only this machine may call: a web page that
/// re-resolves its own name to 127.0.0.1 (DNS rebinding) sends its own name as `Host`, and a
/// cross-site request sends its page's `Origin`. Both are refused with a problem.
async fn loopback_only(req: Request, next: Next) -> Response {
    let headers = req.headers();
    let host = req
        .uri()
        .authority()
        .map(|a| a.as_str().to_string())
        .or_else(|| headers.get(header::HOST).and_then(|v| v.to_str().ok()).map(str::to_string));
    if !host.as_deref().is_some_and(is_loopback_host) {
        return ApiError::new(
            ProblemType::MisdirectedRequest,
            "authentication is off (--no-auth), so only requests addressed to localhost, 127.0.0.1 or [::1] are \
             served",
        )
        .into_response();
    }
    for origin in headers.get_all(header::ORIGIN) {
        if !origin.to_str().is_ok_and(is_loopback_origin) {
            return ApiError::new(
                ProblemType::CrossOrigin,
                "authentication is off (--no-auth), so requests from web pages of other origins are refused",
            )
            .into_response();
        }
    }
    next.run(req).await
}

/// Runs once the engine is up, before the listener serves (`kmirror demo` creates its mirror
/// here). An error ends [`run`] after the engine is shut down.
pub type OnStarted = Box<
    dyn FnOnce(EngineHandle) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), String>> + Send>> + Send,
>;

/// What [`run`] serves besides its listener: the engine, who may call, and how.
pub struct RunConfig {
    pub engine: crate::engine::EngineConfig,
    pub auth: TokenStore,
    /// Serve over TLS (HTTP/2 and HTTP/1.1) with this configuration; plain HTTP when `None`.
    pub tls: Option<rustls::ServerConfig>,
    /// Which secret references (`${env:..}`, `${file:..}`) client properties may use; in force
    /// before any Kafka client is built.
    pub secret_references: crate::domain::secrets::ReferencePolicy,
    pub on_started: Option<OnStarted>,
}

impl std::fmt::Debug for RunConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunConfig")
            .field("engine", &self.engine)
            .field("auth", &self.auth)
            .field("tls", &self.tls.is_some())
            .field("secret_references", &self.secret_references)
            .field("on_started", &self.on_started.is_some())
            .finish()
    }
}

impl RunConfig {
    /// `kmirror serve`'s configuration: tokens (or no authentication), the TLS certificate and
    /// key (an unreadable or invalid one is an error), the engine and the secret references.
    pub fn from_serve(config: &crate::config::ServeConfig) -> std::io::Result<Self> {
        let auth = if config.no_auth {
            tracing::warn!("AUTHENTICATION IS OFF (--no-auth): every caller on this machine is an admin");
            TokenStore::disabled()
        } else {
            let store = TokenStore::new(config.tokens.clone());
            if store.is_empty() {
                tracing::warn!(
                    "no tokens configured: every API call will be refused (add --token-file, KMIRROR_<ROLE>_TOKEN or \
                     [[auth.tokens]])"
                );
            }
            store
        };
        let tls = config.tls.as_ref().map(|(cert, key)| tls_config(cert, key)).transpose()?;
        Ok(Self {
            engine: config.engine.clone(),
            auth,
            tls,
            secret_references: config.secret_references.clone(),
            on_started: None,
        })
    }
}

/// Why [`run`] ended with an error.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The engine did not start (nothing was served).
    #[error("cannot start: {0}")]
    Engine(#[from] crate::engine::EngineError),
    /// [`RunConfig::on_started`] failed (nothing was served; the engine was shut down).
    #[error("{0}")]
    Started(String),
    /// The HTTP server failed (the engine was shut down).
    #[error("HTTP server failed: {0}")]
    Http(std::io::Error),
}

/// The whole program, as `kmirror serve` and `kmirror demo` run it: starts the engine, runs
/// `on_started`, serves the API and dashboard on `listener` (TLS when configured) until
/// `shutdown` resolves, then lets in-flight requests finish and shuts the engine down (open
/// transactions are aborted; committed state is final).
///
/// Install the signal handlers behind `shutdown` before calling: a signal during a slow engine
/// start is then kept, and ends the server as soon as it runs.
pub async fn run(
    listener: TcpListener,
    config: RunConfig,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), RunError> {
    // Before any Kafka client is built: which `${env:..}` / `${file:..}` references resolve.
    crate::kafka::client::set_reference_policy(config.secret_references);
    tracing::info!(engine = ?config.engine, "starting the mirror engine");
    let (handle, join) = crate::engine::start(config.engine).await?;
    if let Some(on_started) = config.on_started
        && let Err(e) = on_started(handle.clone()).await
    {
        handle.shutdown().await;
        let _ = join.await;
        return Err(RunError::Started(e));
    }
    let tls = config.tls.is_some();
    // Lag history: a task of its own that only reads snapshots; a restart starts a new history.
    let history = crate::history::History::new(crate::history::HistoryConfig::default(), crate::clock::now());
    let sampler = crate::history::spawn(handle.clone(), history.clone());
    let state =
        AppState { engine: handle.clone(), auth: Arc::new(config.auth), tls, started_at: Instant::now(), history };
    let listen = listener.local_addr().map(|a| a.to_string()).unwrap_or_default();
    tracing::info!(%listen, tls, "serving the API and dashboard");
    let served = match config.tls {
        Some(tls) => serve_tls(listener, state, tls, shutdown).await,
        None => serve(listener, state, shutdown).await,
    };
    tracing::info!("shutting down: aborting open transactions; committed state is final");
    sampler.stop().await;
    handle.shutdown().await;
    let _ = join.await;
    served.map_err(RunError::Http)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{EngineError, ProblemKind};
    use crate::ui::error::{UiError, render};

    #[test]
    fn loopback_hosts() {
        for ok in [
            "localhost",
            "LOCALHOST:8080",
            "localhost.",
            "127.0.0.1",
            "127.0.0.1:8080",
            "127.1.2.3:1",
            "[::1]",
            "[::1]:8080",
        ] {
            assert!(is_loopback_host(ok), "{ok}");
        }
        for bad in [
            "",
            "evil.example",
            "evil.example:8080",
            "localhost.evil.example",
            "127.0.0.1.evil.example",
            "10.0.0.1:8080",
            "0.0.0.0:8080",
            "[::2]:80",
            "[::1]x",
            "::1",
            "localhost:http",
            "localhost:8080:1",
        ] {
            assert!(!is_loopback_host(bad), "{bad}");
        }
    }

    #[test]
    fn loopback_origins() {
        for ok in ["http://localhost:8080", "http://127.0.0.1", "https://[::1]:8443"] {
            assert!(is_loopback_origin(ok), "{ok}");
        }
        for bad in ["null", "http://evil.example", "http://localhost.evil.example", "file://", "ftp://localhost"] {
            assert!(!is_loopback_origin(bad), "{bad}");
        }
    }

    // Here rather than in `ui` or `api`: the one module that sees both layers checks they agree.
    #[test]
    fn pages_and_the_api_answer_every_engine_problem_alike() {
        for kind in ProblemKind::ALL {
            let e = EngineError::rejected(*kind, "detail");
            let page = UiError::engine(&e);
            let api = ApiError::from(e).into_response();
            assert_eq!(page.status, api.status(), "{}", kind.slug());
            assert!(page.status.is_client_error() || page.status.is_server_error(), "{}", kind.slug());
            assert_eq!(page.title, kind.title());
            let rendered = render(page.into_response(), false, None);
            assert_eq!(rendered.status(), api.status(), "{}", kind.slug());
        }
    }
}
