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
pub use crate::presentation::dto;
pub mod metrics;
pub mod pagination;
pub mod problem;

pub mod approvals;
mod discovery;
pub mod drills;
mod history;
mod instances;
mod lifecycle;
mod mirrors;
mod operations;
pub mod report;
mod system;
mod topics;

use std::sync::OnceLock;

use axum::Router;
use axum::extract::rejection::{PathRejection, QueryRejection};
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

use crate::app_state::AppState;

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
        (name = "cluster", description = "The destination cluster and the kmirror instances sharing the work"),
        (name = "mirrors", description = "Mirror definitions and health"),
        (name = "topics", description = "Mirrored topics, their lifecycle and partitions"),
        (name = "operations", description = "Operations and the audit log"),
        (name = "approvals", description = "Two-person approval: requests for calls a mirror's policy puts behind a second person"),
        (name = "drills", description = "Disaster-recovery drills on a canary topic, and their signed reports"),
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
        scheme.description = Some(
            "A token configured with `[[auth.tokens]]`, `--token-file name:role:/path`, KMIRROR_<ROLE>_TOKEN (viewer, \
             operator, admin) or `--token name:role:token`."
                .into(),
        );
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
        .routes(routes!(instances::instances_get))
        .routes(routes!(mirrors::mirror_list, mirrors::mirror_create))
        .routes(routes!(mirrors::mirror_get, mirrors::mirror_update, mirrors::mirror_delete))
        .routes(routes!(mirrors::mirror_health))
        .routes(routes!(mirrors::mirror_refresh))
        .routes(routes!(discovery::mirror_discovery))
        .routes(routes!(report::mirror_report))
        .routes(routes!(history::mirror_history))
        .routes(routes!(topics::topic_list))
        .routes(routes!(topics::topic_get))
        .routes(routes!(history::topic_history))
        .routes(routes!(topics::topic_lineage))
        .routes(routes!(topics::topic_configs))
        .routes(routes!(topics::topics_start))
        .routes(routes!(topics::topics_pause))
        .routes(routes!(topics::topics_resume))
        .routes(routes!(topics::topics_stop))
        .routes(routes!(topics::topics_recover))
        .routes(routes!(topics::partition_list))
        .routes(routes!(operations::operation_get))
        .routes(routes!(operations::audit_list))
        .routes(routes!(approvals::approval_list))
        .routes(routes!(approvals::approval_get))
        .routes(routes!(approvals::approval_approve))
        .routes(routes!(approvals::approval_reject))
        .routes(routes!(drills::drill_list, drills::drill_start))
        .routes(routes!(drills::drill_get))
        .routes(routes!(drills::drill_report_json))
        .routes(routes!(drills::drill_report_markdown))
}

/// The OpenAPI document.
pub fn openapi() -> utoipa::openapi::OpenApi {
    let mut doc = routes().into_openapi();
    document_throttling(&mut doc);
    doc
}

/// Every secured operation may answer 429 `too-many-requests` to an invalid token (failed
/// authentications throttled per client address and for everyone, [`crate::auth`]; a valid token
/// never gets it): documented once here rather than in every handler's annotations.
fn document_throttling(doc: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::schema::{ObjectBuilder, Ref, Type};
    use utoipa::openapi::{ContentBuilder, HeaderBuilder, ResponseBuilder};
    let response = ResponseBuilder::new()
        .description(
            "The bearer token is not valid, and too many authentications failed from this client address (or from all \
             clients); a valid token is never refused this way",
        )
        .content(
            problem::PROBLEM_JSON,
            ContentBuilder::new().schema(Some(Ref::from_schema_name("ProblemDetails"))).build(),
        )
        .header(
            "Retry-After",
            HeaderBuilder::new()
                .schema(ObjectBuilder::new().schema_type(Type::Integer).minimum(Some(1)))
                .description(Some("Seconds until failed authentication attempts are allowed again"))
                .build(),
        )
        .build();
    for item in doc.paths.paths.values_mut() {
        let ops = [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
            &mut item.options,
            &mut item.head,
            &mut item.patch,
            &mut item.trace,
        ];
        for op in ops.into_iter().flatten() {
            if op.security.is_some() {
                op.responses.responses.insert("429".to_string(), response.clone().into());
            }
        }
    }
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

/// The wall clock (the domain gets time as a parameter).
pub(crate) use crate::clock::now;

pub(crate) use crate::presentation::dto::age_ms;

/// A JSON object body whose rejections are problems (`invalid-body`, `unsupported-media-type`,
/// `payload-too-large`). Only objects are accepted: serde would otherwise also read a struct
/// from an array of its fields in order. An object that repeats a key (at any depth) is refused
/// too: serde_json would silently keep the last value, so what a client meant and what kmirror
/// did could differ.
#[derive(Debug)]
pub struct ApiJson<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        if !is_json_content_type(req.headers()) {
            return Err(ApiError::new(
                ProblemType::UnsupportedMediaType,
                "the request body must be JSON with `Content-Type: application/json`",
            ));
        }
        let bytes = axum::body::Bytes::from_request(req, state).await.map_err(|e| {
            if e.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::new(ProblemType::PayloadTooLarge, "the request body is larger than 1 MiB")
            } else {
                ApiError::new(ProblemType::InvalidBody, e.body_text())
            }
        })?;
        let value = strict_json::parse(&bytes).map_err(|e| ApiError::new(ProblemType::InvalidBody, e))?;
        if !value.is_object() {
            return Err(ApiError::new(ProblemType::InvalidBody, "the request body must be a JSON object"));
        }
        serde_json::from_value(value).map(ApiJson).map_err(|e| ApiError::new(ProblemType::InvalidBody, e.to_string()))
    }
}

/// `application/json` or `application/<anything>+json` (what axum's `Json` accepts).
fn is_json_content_type(headers: &axum::http::HeaderMap) -> bool {
    let Some(value) = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let essence = value.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    essence.split_once('/').is_some_and(|(ty, sub)| ty == "application" && (sub == "json" || sub.ends_with("+json")))
}

/// JSON parsing that refuses duplicate object keys, naming the key and where it is.
pub mod strict_json {
    use std::fmt;

    use serde::de::{self, DeserializeSeed, Error as _, MapAccess, SeqAccess, Visitor};
    use serde_json::{Map, Value};

    /// Where a value is in the document, rendered only for an error: `$`, `$.source.properties`,
    /// `$.topics[2]`.
    #[derive(Clone, Copy)]
    enum Loc<'a> {
        Root,
        Key(&'a Loc<'a>, &'a str),
        Index(&'a Loc<'a>, usize),
    }

    impl fmt::Display for Loc<'_> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            match self {
                Loc::Root => f.write_str("$"),
                Loc::Key(parent, key) => {
                    let plain = !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                    if plain { write!(f, "{parent}.{key}") } else { write!(f, "{parent}[{key:?}]") }
                }
                Loc::Index(parent, i) => write!(f, "{parent}[{i}]"),
            }
        }
    }

    struct Strict<'a>(Loc<'a>);

    impl<'de> DeserializeSeed<'de> for Strict<'_> {
        type Value = Value;
        fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
            d.deserialize_any(self)
        }
    }

    impl<'de> Visitor<'de> for Strict<'_> {
        type Value = Value;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("any JSON value")
        }
        fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
            Ok(Value::Bool(v))
        }
        fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
            Ok(Value::from(v))
        }
        fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
            Ok(Value::from(v))
        }
        fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
            Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
        }
        fn visit_str<E>(self, v: &str) -> Result<Value, E> {
            Ok(Value::String(v.to_string()))
        }
        fn visit_string<E>(self, v: String) -> Result<Value, E> {
            Ok(Value::String(v))
        }
        fn visit_unit<E>(self) -> Result<Value, E> {
            Ok(Value::Null)
        }
        fn visit_none<E>(self) -> Result<Value, E> {
            Ok(Value::Null)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
            let mut items = Vec::new();
            while let Some(v) = seq.next_element_seed(Strict(Loc::Index(&self.0, items.len())))? {
                items.push(v);
            }
            Ok(Value::Array(items))
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
            let mut out = Map::new();
            while let Some(key) = map.next_key::<String>()? {
                if out.contains_key(&key) {
                    return Err(A::Error::custom(format!("the key {key:?} appears twice in the object {}", self.0)));
                }
                let v = map.next_value_seed(Strict(Loc::Key(&self.0, &key)))?;
                out.insert(key, v);
            }
            Ok(Value::Object(out))
        }
    }

    /// Parses `bytes` as one JSON document; an error says what is wrong (and where).
    pub fn parse(bytes: &[u8]) -> Result<Value, String> {
        let mut d = serde_json::Deserializer::from_slice(bytes);
        let v = Strict(Loc::Root).deserialize(&mut d).and_then(|v| d.end().map(|()| v));
        v.map_err(|e| {
            if e.is_data() {
                // Only the duplicate-key check raises a data error while building a Value.
                e.to_string()
            } else {
                format!("the request body is not valid JSON: {e}")
            }
        })
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn values_parse_like_serde_json() {
            let text = r#"{"a": [1, -2, 3.5, true, null, "x", {"b": {}}], "c": {"d": "e"}, "": 0}"#;
            assert_eq!(parse(text.as_bytes()).unwrap(), serde_json::from_str::<Value>(text).unwrap());
        }

        #[test]
        fn duplicate_keys_are_refused_at_any_depth() {
            let e = parse(br#"{"name": "a", "name": "b"}"#).unwrap_err();
            assert!(e.contains(r#"the key "name" appears twice in the object $ at line 1"#), "{e}");
            let e = parse(br#"{"source": {"properties": {"x.y": "1", "x.y": "2"}}}"#).unwrap_err();
            assert!(e.contains(r#"the key "x.y" appears twice in the object $.source.properties"#), "{e}");
            let e = parse(br#"{"topics": [{}, {"a": 1, "b": 2, "a": 3}]}"#).unwrap_err();
            assert!(e.contains(r#"the key "a" appears twice in the object $.topics[1]"#), "{e}");
            // The same key in different objects is fine.
            assert!(parse(br#"{"a": {"a": 1}, "b": [{"a": 1}, {"a": 2}]}"#).is_ok());
        }

        #[test]
        fn syntax_errors_and_trailing_text() {
            assert!(parse(b"{\"name\": ").unwrap_err().contains("not valid JSON"));
            assert!(parse(b"{} x").unwrap_err().contains("not valid JSON"));
            assert!(parse(b"").unwrap_err().contains("not valid JSON"));
        }
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
                    for status in ["401", "403", "429"] {
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
