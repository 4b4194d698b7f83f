//! REST API under `/api/v1`, plus `/metrics`, `/healthz` and `/readyz`.
//!
//! - Handlers talk to the engine only through [`EngineHandle`](crate::engine::EngineHandle):
//!   reads serve its latest snapshot (never waiting on Kafka; every read says how old the
//!   snapshot is), commands go through its methods with the caller as the audit [`Actor`].
//! - Every handler is registered with utoipa-axum's `routes!`, so route and OpenAPI entry come
//!   from the same place; [`openapi_json`] is the spec, committed at `openapi/openapi.json`
//!   (`kmirror openapi > openapi/openapi.json`), and a test fails when that file is stale.
//! - Errors are RFC 9457 problems from the one table in [`problem`].
//! - Auth ([`auth`]): `Authorization: Bearer <token>`; viewer reads, operator runs lifecycle
//!   actions and refreshes, admin creates, changes and deletes mirrors. `/healthz`, `/readyz`
//!   and the spec are public.
//!
//! [`Actor`]: crate::engine::Actor

pub mod auth;
pub mod dto;
pub mod metrics;
pub mod pagination;
pub mod problem;

mod mirrors;
mod operations;
mod system;
mod topics;

use std::sync::OnceLock;

use axum::Router;
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{DefaultBodyLimit, FromRequest, FromRequestParts, Path, Query, Request};
use axum::http::header;
use axum::http::request::Parts;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::trace::TraceLayer;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::{Modify, OpenApi};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::app::AppState;
use crate::domain::Timestamp;

pub use metrics::HttpMetrics;
pub use problem::{ApiError, ProblemDetails, ProblemType};

/// Request bodies larger than this are refused with `payload-too-large`.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// The security scheme name used in the spec.
pub const BEARER: &str = "bearer";

#[derive(OpenApi)]
#[openapi(
    info(
        title = "kmirror",
        description = "Kafka cluster mirroring (KIP-1279 design): mirrors, topic lifecycle, partitions, \
                       operations and audit. Errors are RFC 9457 `application/problem+json` documents whose \
                       `type` is a stable slug (see the ProblemDetails schema). Reads serve the engine's \
                       latest snapshot and never wait on Kafka; `taken_at` and `snapshot_age_ms` say how old \
                       it is. Roles: viewer (every GET), operator (+ lifecycle and refresh), admin (+ mirror \
                       create, update, delete)."
    ),
    modifiers(&SecurityAddon),
    tags(
        (name = "cluster", description = "The destination cluster"),
        (name = "mirrors", description = "Mirror definitions and health"),
        (name = "topics", description = "Mirrored topics, their lifecycle and partitions"),
        (name = "operations", description = "Operations and the audit log"),
        (name = "system", description = "Probes, metrics and this spec"),
    ),
    components(schemas(ProblemDetails))
)]
struct ApiDoc;

struct SecurityAddon;

impl Modify for SecurityAddon {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        let mut scheme = Http::new(HttpAuthScheme::Bearer);
        scheme.description = Some("A token configured with `--token name:role:token` or KMIRROR_ADMIN_TOKEN.".into());
        components.add_security_scheme(BEARER, SecurityScheme::Http(scheme));
    }
}

/// Every documented route.
fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(system::healthz))
        .routes(routes!(system::readyz))
        .routes(routes!(system::metrics))
        .routes(routes!(system::openapi_spec))
        .routes(routes!(mirrors::cluster_get))
        .routes(routes!(mirrors::mirror_list, mirrors::mirror_create))
        .routes(routes!(mirrors::mirror_get, mirrors::mirror_update, mirrors::mirror_delete))
        .routes(routes!(mirrors::mirror_health))
        .routes(routes!(mirrors::mirror_refresh))
        .routes(routes!(topics::topic_list))
        .routes(routes!(topics::topic_get))
        .routes(routes!(topics::topics_start))
        .routes(routes!(topics::topics_pause))
        .routes(routes!(topics::topics_resume))
        .routes(routes!(topics::topics_stop))
        .routes(routes!(topics::partition_list))
        .routes(routes!(operations::operation_get))
        .routes(routes!(operations::audit_list))
}

/// The OpenAPI document.
pub fn openapi() -> utoipa::openapi::OpenApi {
    routes().into_openapi()
}

/// The OpenAPI document as the pretty-printed JSON committed at `openapi/openapi.json`.
pub fn openapi_json() -> &'static str {
    static SPEC: OnceLock<String> = OnceLock::new();
    SPEC.get_or_init(|| {
        let mut s = serde_json::to_string_pretty(&openapi()).expect("the spec serialises");
        s.push('\n');
        s
    })
}

/// The API routes, with `state`. `http_metrics` is what `/metrics` reports; the same value must
/// be given to [`layers`].
pub fn router(state: AppState, http_metrics: HttpMetrics) -> Router {
    let (router, _spec) = routes().split_for_parts();
    router.layer(axum::Extension(http_metrics)).with_state(state)
}

/// Wraps the whole HTTP surface (API and dashboard): request tracing (method and URI only:
/// headers, and so tokens, are never logged), the 1 MiB body limit, HTTP latency metrics,
/// problem+json for the framework's own 404/405/413/415 answers under `/api/`, and percent-encoded
/// colons in `/api/` paths (`topics%3Astart`) routed like literal ones.
pub fn layers(app: Router, http_metrics: HttpMetrics) -> Router {
    let app = app
        .layer(middleware::from_fn_with_state(http_metrics, metrics::track))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(RequestBodyLimitLayer::new(MAX_BODY_BYTES))
        .layer(middleware::from_fn(framework_problems))
        .layer(TraceLayer::new_for_http());
    // Routing happens inside `app`; rewriting the URI must happen before, so it wraps `app`.
    Router::new().fallback_service(app).layer(middleware::map_request(decode_colons))
}

/// `/api/v1/mirrors/m/topics%3Astart` → `/api/v1/mirrors/m/topics:start`. Mirror and topic
/// names cannot contain a colon, so this never changes which resource a path names.
async fn decode_colons(mut req: Request) -> Request {
    let path = req.uri().path();
    if path.starts_with("/api/") && (path.contains("%3A") || path.contains("%3a")) {
        let fixed = path.replace("%3A", ":").replace("%3a", ":");
        let pq = match req.uri().query() {
            Some(q) => format!("{fixed}?{q}"),
            None => fixed,
        };
        let mut parts = req.uri().clone().into_parts();
        if let Ok(pq) = pq.parse() {
            parts.path_and_query = Some(pq);
            if let Ok(uri) = axum::http::Uri::from_parts(parts) {
                *req.uri_mut() = uri;
            }
        }
    }
    req
}

/// Turns the bare 404/405/413/415 responses axum and tower-http produce under `/api/` (and on
/// `/metrics`, `/healthz`, `/readyz`) into problems, keeping their headers (`Allow` on 405).
async fn framework_problems(req: Request, next: Next) -> Response {
    let path = req.uri().path();
    let is_api = path.starts_with("/api/") || matches!(path, "/metrics" | "/healthz" | "/readyz");
    let res = next.run(req).await;
    if !is_api {
        return res;
    }
    let has_json =
        res.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|v| v.contains("json"));
    if has_json {
        return res;
    }
    let problem = match res.status().as_u16() {
        404 => ApiError::new(ProblemType::NotFound, "no such resource"),
        405 => ApiError::new(ProblemType::MethodNotAllowed, "this resource does not support the method"),
        413 => ApiError::new(ProblemType::PayloadTooLarge, "the request body is larger than 1 MiB"),
        415 => ApiError::new(ProblemType::UnsupportedMediaType, "the request body must be application/json"),
        _ => return res,
    };
    let (mut parts, _) = res.into_parts();
    let new = problem.into_response();
    parts.headers.remove(header::CONTENT_LENGTH);
    for (k, v) in new.headers() {
        parts.headers.insert(k, v.clone());
    }
    let (_, body) = new.into_parts();
    Response::from_parts(parts, body)
}

/// The wall clock (the API's only clock read; the domain gets time as a parameter).
pub(crate) fn now() -> Timestamp {
    let ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis());
    Timestamp::from_millis(i64::try_from(ms).unwrap_or(i64::MAX))
}

/// Milliseconds from `taken_at` until now (0 if the clock went backwards).
pub(crate) fn age_ms(taken_at: Timestamp, now: Timestamp) -> u64 {
    u64::try_from(taken_at.millis_until(now)).unwrap_or(0)
}

/// A JSON object body whose rejections are problems (`invalid-body`, `unsupported-media-type`,
/// `payload-too-large`). Only objects are accepted: serde would otherwise also read a struct
/// from an array of its fields in order.
#[derive(Debug)]
pub struct ApiJson<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let r: Result<axum::Json<serde_json::Value>, JsonRejection> = axum::Json::from_request(req, state).await;
        let axum::Json(value) = r.map_err(ApiError::from)?;
        if !value.is_object() {
            return Err(ApiError::new(ProblemType::InvalidBody, "the request body must be a JSON object"));
        }
        serde_json::from_value(value).map(ApiJson).map_err(|e| ApiError::new(ProblemType::InvalidBody, e.to_string()))
    }
}

/// `Query<T>` whose rejections are `invalid-query` problems.
#[derive(Debug)]
pub struct ApiQuery<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let r: Result<Query<T>, QueryRejection> = Query::from_request_parts(parts, state).await;
        r.map(|Query(v)| ApiQuery(v)).map_err(ApiError::from)
    }
}

/// `Path<T>` whose rejections are problems.
#[derive(Debug)]
pub struct ApiPath<T>(pub T);

impl<T: DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for ApiPath<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let r: Result<Path<T>, PathRejection> = Path::from_request_parts(parts, state).await;
        r.map(|Path(v)| ApiPath(v)).map_err(ApiError::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The committed spec is what the code generates. Regenerate with
    /// `cargo run -- openapi > openapi/openapi.json`.
    #[test]
    fn committed_openapi_spec_is_up_to_date() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/openapi/openapi.json");
        let committed = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            committed == openapi_json(),
            "openapi/openapi.json is stale: regenerate it with `cargo run -- openapi > openapi/openapi.json` \
             (or `kmirror openapi > openapi/openapi.json`) and commit the result"
        );
    }

    #[test]
    fn every_operation_documents_its_problems() {
        let spec: serde_json::Value = serde_json::from_str(openapi_json()).unwrap();
        for (path, item) in spec["paths"].as_object().unwrap() {
            for (method, op) in item.as_object().unwrap() {
                assert!(op["summary"].is_string(), "{method} {path} has no summary");
                assert!(op["operationId"].is_string(), "{method} {path} has no operationId");
                let secured = op.get("security").is_some();
                let public = ["/healthz", "/readyz", "/api/v1/openapi.json"].contains(&path.as_str());
                assert_eq!(secured, !public, "{method} {path}: security");
                if secured {
                    for status in ["401", "403"] {
                        let r = &op["responses"][status];
                        assert!(
                            r["content"]["application/problem+json"].is_object(),
                            "{method} {path} must document {status} as a problem"
                        );
                    }
                }
                if op.get("requestBody").is_some() {
                    for status in ["400", "413", "415"] {
                        assert!(op["responses"][status].is_object(), "{method} {path} must document {status}");
                    }
                }
            }
        }
    }
}
