//! The server-rendered dashboard: askama pages, htmx live fragments, guarded actions.
//!
//! # Routes
//!
//! | Path | What |
//! |---|---|
//! | `GET /` | overview: every mirror's cluster-ID health, state counts, lag, sync health |
//! | `GET /mirrors/{m}` | a mirror: topics (filter, sort, page), source, cluster ID, sync; actions |
//! | `GET /mirrors/{m}/partitions` | every partition of a mirror (topic prefix, state, sort, page) |
//! | `GET /mirrors/{m}/topics/{t}` | one topic's partitions |
//! | `GET /mirrors/{m}/topics/{t}/lineage` | the topic's lineage on the source cluster (failback) |
//! | `GET /mirrors/{m}/confirm?op=&topic=` | the confirmation (dialog for htmx, page without JS) |
//! | `POST /mirrors/{m}/actions` | pause / resume / failover / restart / start |
//! | `GET /new-mirror`, `POST /mirrors` | create a mirror (admin) |
//! | `POST /mirrors/{m}/delete` | delete a mirror (admin, typed confirmation) |
//! | `POST /mirrors/{m}/drills`, `GET /mirrors/{m}/drills/{id}/report.json|md` | run a DR drill; its report |
//! | `POST /approvals/{id}/approve|reject` | a second person's decision on a request |
//! | `GET /operations`, `/operations/{id}`, `/audit` | operations with progress; the audit trail |
//! | `GET /instances` | the kmirror instances sharing the work, their slots and heartbeats |
//! | `GET /api/docs` | the interactive API reference (vendored Swagger UI over the OpenAPI document) |
//! | `GET,POST /signin`, `POST /signout` | sessions |
//! | `GET /ui/...` | the live fragments the pages poll every 2 s |
//! | `GET /static/{file}` | embedded CSS, scripts, vendored htmx and Swagger UI |
//!
//! # Rules
//!
//! - Reads come from the engine's snapshot only (never Kafka on the request path); actions go
//!   through [`EngineHandle::lifecycle`](crate::engine::EngineHandle::lifecycle) with the
//!   signed-in identity and client address as the [`Actor`](crate::engine::Actor).
//! - Every page works without JavaScript: reading is complete, actions are plain forms with a
//!   confirmation page and redirect-after-POST. htmx adds polling and dialogs on top.
//! - Untrusted strings (topic and mirror names, error messages, source strings) are only ever
//!   printed through askama's escaping; no template uses `|safe`.
//! - Strict CSP: scripts and styles come from `/static` only; no inline script or style.

mod assets;
pub mod chrome;
pub mod error;
pub use crate::format;
mod handlers;
pub mod pages;
pub mod session;
pub mod view;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};

use crate::app_state::AppState;

pub use pages::Part;
pub use session::SessionStore;
pub use view::{Params, Viewer};

/// The dashboard's state: the app's plus the session store.
#[derive(Clone, Debug)]
pub struct UiState {
    pub app: AppState,
    pub sessions: Arc<SessionStore>,
}

/// The client's address, for the audit trail.
#[derive(Clone, Debug)]
pub struct ClientAddr(pub Option<String>);

/// Whether the request came from htmx (`HX-Request: true`).
pub fn is_htmx(headers: &HeaderMap) -> bool {
    headers.get("hx-request").is_some_and(|v| v.as_bytes() == b"true")
}

/// Wall-clock now, for "N s ago".
pub use crate::clock::now;

/// The dashboard routes.
pub fn router(state: AppState) -> Router {
    router_with_sessions(state, Arc::new(SessionStore::default()))
}

/// [`router`] with a given session store (tests use short timeouts).
pub fn router_with_sessions(state: AppState, sessions: Arc<SessionStore>) -> Router {
    let ui = UiState { app: state, sessions };
    let protected = Router::new()
        .route("/", get(handlers::overview_get))
        .route("/ui/overview", get(handlers::overview_live))
        .route("/new-mirror", get(handlers::new_mirror_get))
        .route("/mirrors", post(handlers::mirror_create_post))
        .route("/mirrors/{m}", get(handlers::mirror_get))
        .route("/ui/mirrors/{m}", get(handlers::mirror_topics_live))
        .route("/mirrors/{m}/partitions", get(handlers::partitions_get))
        .route("/mirrors/{m}/report.md", get(handlers::mirror_report_md))
        .route("/mirrors/{m}/report.json", get(handlers::mirror_report_json))
        .route("/ui/mirrors/{m}/partitions", get(handlers::partitions_live))
        .route("/mirrors/{m}/topics/{t}", get(handlers::topic_get))
        .route("/ui/mirrors/{m}/topics/{t}", get(handlers::topic_partitions_live))
        .route("/mirrors/{m}/topics/{t}/lineage", get(handlers::topic_lineage_get))
        .route("/mirrors/{m}/topics/{t}/configs", get(handlers::topic_configs_get))
        .route("/mirrors/{m}/confirm", get(handlers::confirm_get))
        .route("/mirrors/{m}/actions", post(handlers::actions_post))
        .route("/mirrors/{m}/delete", post(handlers::mirror_delete_post))
        .route("/mirrors/{m}/policy", post(handlers::mirror_policy_post))
        .route("/ui/mirrors/{m}/safety", get(handlers::safety_live))
        .route("/mirrors/{m}/drills", post(handlers::drill_post))
        .route("/mirrors/{m}/drills/{id}/{file}", get(handlers::drill_report_get))
        .route("/approvals/{id}/approve", post(handlers::approve_post))
        .route("/approvals/{id}/reject", post(handlers::reject_post))
        .route("/operations", get(handlers::operations_get))
        .route("/ui/operations", get(handlers::operations_live))
        .route("/operations/{id}", get(handlers::operation_get))
        .route("/ui/operations/{id}", get(handlers::operation_live))
        .route("/audit", get(handlers::audit_get))
        .route("/ui/audit", get(handlers::audit_live))
        .route("/instances", get(handlers::instances_get))
        .route("/ui/instances", get(handlers::instances_live))
        .route("/api/docs", get(handlers::api_docs_get))
        .route("/signout", post(handlers::signout_post))
        .route_layer(middleware::from_fn_with_state(ui.clone(), require_session));
    let public = Router::new()
        .route("/signin", get(handlers::signin_get).post(handlers::signin_post))
        .route_layer(middleware::from_fn(public_errors));
    Router::new()
        .merge(protected)
        .merge(public)
        .layer(middleware::map_response(security_headers))
        .route("/static/{file}", get(assets::serve))
        .with_state(ui)
}

/// Dashboard pages and fragments are never cached (and vary by htmx and session). The security
/// headers (CSP, framing, sniffing, referrer, HSTS) are set on every response by
/// [`crate::app::router`].
async fn security_headers(mut resp: Response) -> Response {
    let h = resp.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(header::VARY, HeaderValue::from_static("HX-Request, Cookie"));
    resp
}

/// Reads one cookie from the request headers.
pub fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.trim())
}

/// A `Set-Cookie` value for our cookies (values are hex, so no quoting is needed).
pub fn set_cookie(name: &str, value: &str, max_age_secs: u64, tls: bool) -> HeaderValue {
    let secure = if tls { "; Secure" } else { "" };
    let v = format!("{name}={value}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age_secs}{secure}");
    HeaderValue::from_str(&v).unwrap_or_else(|_| HeaderValue::from_static("invalid=; Max-Age=0"))
}

/// Only local paths are followed after sign-in or an action (no open redirects).
pub fn local_path(p: &str) -> Option<&str> {
    let ok = p.starts_with('/') && !p.starts_with("//") && !p.contains('\\') && !p.chars().any(char::is_control);
    ok.then_some(p)
}

/// Resolves the session (or the anonymous admin with `--no-auth`), sends strangers to the
/// sign-in page, and renders any [`UiError`](error::UiError) as HTML for the caller.
async fn require_session(State(ui): State<UiState>, mut req: Request, next: Next) -> Response {
    let htmx = is_htmx(req.headers());
    let now = Instant::now();
    let tls = ui.app.tls;
    let name = session::cookie_name(tls);
    let mut new_cookie = None;
    let found = cookie(req.headers(), name).and_then(|id| ui.sessions.get(id, now));
    let session = match found {
        Some(s) => s,
        None if ui.app.auth.is_disabled() => {
            // Without authentication there is still a session: it carries the CSRF token that
            // stops other web pages from posting to this (loopback) dashboard.
            let identity = ui.app.auth.authenticate("").unwrap_or(crate::auth::Identity {
                name: "anonymous (--no-auth)".into(),
                role: crate::auth::Role::Admin,
            });
            let (id, s) = ui.sessions.create(identity, now);
            new_cookie = Some(set_cookie(name, &id, session::ABSOLUTE_TIMEOUT.as_secs(), tls));
            s
        }
        None => return to_signin(&req, htmx),
    };
    let viewer = Viewer::new(&session.identity, session.csrf.clone(), ui.app.auth.is_disabled());
    let addr = req.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| c.0.ip().to_string());
    req.extensions_mut().insert(viewer.clone());
    req.extensions_mut().insert(ClientAddr(addr));
    let resp = next.run(req).await;
    let mut resp = error::render(resp, htmx, Some(&viewer));
    if let Some(c) = new_cookie {
        resp.headers_mut().append(header::SET_COOKIE, c);
    }
    resp
}

/// Error rendering for the routes that need no session.
async fn public_errors(req: Request, next: Next) -> Response {
    let htmx = is_htmx(req.headers());
    let resp = next.run(req).await;
    error::render(resp, htmx, None)
}

fn to_signin(req: &Request, htmx: bool) -> Response {
    // After sign-in, come back to the page (for htmx, the page the fragment belongs to).
    let current = if htmx {
        req.headers()
            .get("hx-current-url")
            .and_then(|v| v.to_str().ok())
            .and_then(|u| u.find("://").map(|i| &u[i + 3..]))
            .and_then(|rest| rest.find('/').map(|i| rest[i..].to_string()))
            .unwrap_or_else(|| "/".into())
    } else if req.method() == Method::GET {
        req.uri().path_and_query().map_or_else(|| "/".into(), |pq| pq.as_str().to_string())
    } else {
        "/".into()
    };
    let target = format::url("/signin", &[("next", if current == "/" { String::new() } else { current })]);
    if htmx {
        let mut r = StatusCode::UNAUTHORIZED.into_response();
        if let Ok(v) = HeaderValue::from_str(&target) {
            r.headers_mut().insert("HX-Redirect", v);
        }
        return r;
    }
    Redirect::to(&target).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_local_paths_are_followed() {
        assert_eq!(local_path("/mirrors/m?q=1"), Some("/mirrors/m?q=1"));
        for bad in ["//evil.example/", "https://evil.example/", "/\\evil", "evil", "", "/a\r\nSet-Cookie: x"] {
            assert_eq!(local_path(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn cookies_are_read_by_exact_name() {
        let mut h = HeaderMap::new();
        h.append(header::COOKIE, HeaderValue::from_static("a=1; kmirror_session=abc; kmirror_session_x=zzz"));
        h.append(header::COOKIE, HeaderValue::from_static("b=2"));
        assert_eq!(cookie(&h, "kmirror_session"), Some("abc"));
        assert_eq!(cookie(&h, "b"), Some("2"));
        assert_eq!(cookie(&h, "kmirror"), None);
    }

    #[test]
    fn cookie_flags() {
        let c = set_cookie("kmirror_session", "ab", 60, true);
        assert_eq!(c.to_str().unwrap(), "kmirror_session=ab; Path=/; HttpOnly; SameSite=Strict; Max-Age=60; Secure");
        assert!(!set_cookie("x", "y", 1, false).to_str().unwrap().contains("Secure"));
    }
}
