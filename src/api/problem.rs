//! Every error the REST API returns: RFC 9457 `application/problem+json` bodies whose `type` is a
//! stable slug. Engine problems ([`ProblemKind`]) take slug, status and title from the engine's
//! problem table (`engine/problem.rs`), which the dashboard reads too; problems only the API has
//! (authentication, malformed requests) are the rows of [`ProblemType`] below. A client branches
//! on `type` alone, whatever layer refused its request.
//!
//! `detail` is always safe to show a client: 5xx problems never carry internal text beyond what
//! the engine already words for operators, and nothing here ever includes a token.

use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use crate::engine::{EngineError, ProblemKind};

/// The media type of every error body.
pub const PROBLEM_JSON: &str = "application/problem+json";

macro_rules! problem_table {
    ($( $(#[$doc:meta])* $variant:ident => ($slug:literal, $status:ident, $title:literal), )+) => {
        /// The stable problem types: an engine problem kind (its row is in the engine's table) or
        /// one of the API's own rows (slug, HTTP status and title). The OpenAPI description of
        /// [`ProblemDetails`] lists the slugs of both.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum ProblemType {
            /// A problem the engine reports; slug, status and title come from [`ProblemKind`].
            Engine(ProblemKind),
            $( $(#[$doc])* $variant, )+
        }

        impl ProblemType {
            /// The API's own problem types, in table order.
            const API: &'static [ProblemType] = &[$(ProblemType::$variant,)+];

            /// The stable `type` slug.
            pub fn slug(self) -> &'static str {
                match self {
                    ProblemType::Engine(kind) => kind.slug(),
                    $(ProblemType::$variant => $slug,)+
                }
            }

            /// The HTTP status answered with this problem.
            pub fn status(self) -> StatusCode {
                match self {
                    ProblemType::Engine(kind) => {
                        StatusCode::from_u16(kind.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
                    }
                    $(ProblemType::$variant => StatusCode::$status,)+
                }
            }

            /// A short, human-readable summary that never changes between occurrences.
            pub fn title(self) -> &'static str {
                match self {
                    ProblemType::Engine(kind) => kind.title(),
                    $(ProblemType::$variant => $title,)+
                }
            }
        }
    };
}

problem_table! {
    /// No credentials, or credentials that match no identity.
    Unauthorized => ("unauthorized", UNAUTHORIZED, "Authentication required"),
    /// The identity's role does not allow the operation.
    Forbidden => ("forbidden", FORBIDDEN, "Forbidden"),
    /// No such resource or route.
    NotFound => ("not-found", NOT_FOUND, "Not found"),
    OperationNotFound => ("operation-not-found", NOT_FOUND, "Operation not found"),
    MethodNotAllowed => ("method-not-allowed", METHOD_NOT_ALLOWED, "Method not allowed"),
    /// The request body is larger than 1 MiB.
    PayloadTooLarge => ("payload-too-large", PAYLOAD_TOO_LARGE, "Payload too large"),
    /// The body is not valid JSON, has unknown fields, misses required ones or breaks a rule
    /// between fields.
    InvalidBody => ("invalid-body", BAD_REQUEST, "Invalid request body"),
    /// A query parameter is malformed.
    InvalidQuery => ("invalid-query", BAD_REQUEST, "Invalid query parameter"),
    /// The `page_token` was not issued for this listing (or was altered).
    InvalidPageToken => ("invalid-page-token", BAD_REQUEST, "Invalid page token"),
    /// `If-Match` names another version of the resource than the current one: it changed since
    /// the client read it (nothing was written).
    PreconditionFailed => ("precondition-failed", PRECONDITION_FAILED, "Precondition failed"),
    /// The body is not `application/json`.
    UnsupportedMediaType => ("unsupported-media-type", UNSUPPORTED_MEDIA_TYPE, "Unsupported media type"),
    /// Too many failed authentications from this client address; `Retry-After` says when to
    /// try again.
    TooManyRequests => ("too-many-requests", TOO_MANY_REQUESTS, "Too many failed authentications"),
    /// With `--no-auth`, a request whose `Host` is not a loopback name or address (DNS
    /// rebinding).
    MisdirectedRequest => ("misdirected-request", MISDIRECTED_REQUEST, "Host not served"),
    /// With `--no-auth`, a request from a page whose `Origin` is not a loopback one.
    CrossOrigin => ("cross-origin", FORBIDDEN, "Cross-origin request refused"),
}

impl ProblemType {
    /// Every problem type: the engine's kinds, then the API's own.
    pub fn all() -> impl Iterator<Item = ProblemType> {
        ProblemKind::ALL.iter().copied().map(ProblemType::Engine).chain(ProblemType::API.iter().copied())
    }
}

impl From<ProblemKind> for ProblemType {
    fn from(kind: ProblemKind) -> ProblemType {
        ProblemType::Engine(kind)
    }
}

/// An RFC 9457 problem (`application/problem+json`).
///
/// `type` is a stable slug; clients branch on it. Slugs and statuses: invalid-name 400,
/// invalid-pattern 400, invalid-setting 400, invalid-property 422, mirror-not-found 404, mirror-exists 409, topic-not-found 404,
/// topic-not-in-mirror 404, illegal-transition 409, destination-diverged 409,
/// destination-topic-conflict 409, topic-excluded 409, quarantine-conflict 409, source-cluster-id-mismatch 409, source-unreachable 422,
/// source-authentication-failed 422, source-tls-failed 422,
/// destination-unavailable 503, mirror-has-active-topics 409, reason-required 422,
/// approval-not-found 404, approval-same-identity 403, approval-not-pending 409, approval-expired 409,
/// break-glass-not-allowed 403, drill-running 409, drill-canary-refused 422, drill-canary-exists 409,
/// drill-not-found 404, drill-failed 422, fenced 409, shutting-down 503,
/// internal 500, too-many-topics 400, not-caught-up 409, unauthorized 401, forbidden 403, not-found 404, operation-not-found 404,
/// method-not-allowed 405, payload-too-large 413, invalid-body 400, invalid-query 400,
/// invalid-page-token 400, precondition-failed 412, unsupported-media-type 415, too-many-requests 429,
/// misdirected-request 421, cross-origin 403.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(example = json!({
    "type": "mirror-not-found",
    "title": "Mirror not found",
    "status": 404,
    "detail": "mirror \"eu\" does not exist"
}))]
pub struct ProblemDetails {
    /// The stable problem type slug.
    #[serde(rename = "type")]
    pub problem_type: String,
    /// A short summary of the problem type.
    pub title: String,
    /// The HTTP status code.
    pub status: u16,
    /// What went wrong this time, for humans.
    pub detail: String,
}

/// An error response of the REST API. Build it from a [`ProblemType`] and a detail; engine
/// errors convert with `?`.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub problem: ProblemType,
    pub detail: String,
    /// For 401: the `WWW-Authenticate` challenge's `error` parameter (RFC 6750).
    bearer_error: Option<&'static str>,
    /// For 429: the `Retry-After` header, in seconds.
    retry_after_secs: Option<u64>,
}

impl ApiError {
    pub fn new(problem: impl Into<ProblemType>, detail: impl Into<String>) -> ApiError {
        ApiError { problem: problem.into(), detail: detail.into(), bearer_error: None, retry_after_secs: None }
    }

    pub fn unauthorized(detail: impl Into<String>, invalid_token: bool) -> ApiError {
        ApiError {
            problem: ProblemType::Unauthorized,
            detail: detail.into(),
            bearer_error: invalid_token.then_some("invalid_token"),
            retry_after_secs: None,
        }
    }

    /// `too-many-requests` with a `Retry-After` of `retry_after` (whole seconds, at least 1).
    /// 429 for a credential that failed while `scope` had used up its failed attempts.
    pub fn too_many_failures(retry_after: std::time::Duration, scope: crate::auth::ThrottleScope) -> ApiError {
        let secs = retry_after.as_secs().max(1);
        let from = match scope {
            crate::auth::ThrottleScope::Address => "from this address",
            crate::auth::ThrottleScope::Everyone => "from all clients",
        };
        ApiError {
            retry_after_secs: Some(secs),
            ..ApiError::new(
                ProblemType::TooManyRequests,
                format!(
                    "the bearer token is not valid, and there were too many failed authentications {from}; try again in \
                     {secs} s (a valid token is accepted at any time)"
                ),
            )
        }
    }

    pub fn body(&self) -> ProblemDetails {
        ProblemDetails {
            problem_type: self.problem.slug().to_string(),
            title: self.problem.title().to_string(),
            status: self.problem.status().as_u16(),
            detail: self.detail.clone(),
        }
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.problem.slug(), self.detail)
    }
}

impl From<EngineError> for ApiError {
    fn from(e: EngineError) -> ApiError {
        ApiError::new(e.kind(), e.to_string())
    }
}

impl From<JsonRejection> for ApiError {
    fn from(r: JsonRejection) -> ApiError {
        match r {
            JsonRejection::MissingJsonContentType(_) => ApiError::new(
                ProblemType::UnsupportedMediaType,
                "the request body must be JSON with `Content-Type: application/json`",
            ),
            JsonRejection::BytesRejection(b) if b.status() == StatusCode::PAYLOAD_TOO_LARGE => {
                ApiError::new(ProblemType::PayloadTooLarge, "the request body is larger than 1 MiB")
            }
            other => ApiError::new(ProblemType::InvalidBody, other.body_text()),
        }
    }
}

impl From<QueryRejection> for ApiError {
    fn from(r: QueryRejection) -> ApiError {
        ApiError::new(ProblemType::InvalidQuery, r.body_text())
    }
}

impl From<PathRejection> for ApiError {
    fn from(r: PathRejection) -> ApiError {
        ApiError::new(ProblemKind::InvalidName, r.body_text())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.problem.status();
        if status.is_server_error() {
            tracing::warn!(problem = self.problem.slug(), detail = %self.detail, "API request failed.");
        }
        let body = serde_json::to_vec(&self.body()).unwrap_or_default();
        let mut res = (status, body).into_response();
        res.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
        if self.problem == ProblemType::Unauthorized {
            let challenge = match self.bearer_error {
                Some(e) => format!("Bearer realm=\"kmirror\", error=\"{e}\""),
                None => "Bearer realm=\"kmirror\"".to_string(),
            };
            if let Ok(v) = HeaderValue::from_str(&challenge) {
                res.headers_mut().insert(header::WWW_AUTHENTICATE, v);
            }
        }
        if let Some(secs) = self.retry_after_secs {
            res.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        res
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_are_unique_and_kebab_case() {
        let mut seen = std::collections::HashSet::new();
        for p in ProblemType::all() {
            assert!(seen.insert(p.slug()), "duplicate slug {}", p.slug());
            assert!(p.slug().bytes().all(|b| b.is_ascii_lowercase() || b == b'-'), "{}", p.slug());
            assert!(p.status().is_client_error() || p.status().is_server_error(), "{}", p.slug());
        }
    }

    #[test]
    fn engine_kinds_answer_from_the_engine_table() {
        for kind in ProblemKind::ALL {
            let body = ApiError::from(EngineError::rejected(*kind, "x")).body();
            assert_eq!(
                (body.problem_type.as_str(), body.status, body.title.as_str()),
                (kind.slug(), kind.status(), kind.title())
            );
        }
    }

    #[test]
    fn the_schema_description_lists_every_slug_with_its_status() {
        let schema = serde_json::to_string(&<ProblemDetails as utoipa::PartialSchema>::schema()).unwrap();
        for p in ProblemType::all() {
            let entry = format!("{} {}", p.slug(), p.status().as_u16());
            assert!(schema.contains(&entry), "ProblemDetails' doc must list `{entry}`");
        }
    }

    #[test]
    fn unauthorized_carries_a_bearer_challenge() {
        let res = ApiError::unauthorized("no token", false).into_response();
        assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(res.headers()[header::WWW_AUTHENTICATE], "Bearer realm=\"kmirror\"");
        assert_eq!(res.headers()[header::CONTENT_TYPE], PROBLEM_JSON);
    }

    #[test]
    fn throttling_says_when_to_retry() {
        let res = ApiError::too_many_failures(std::time::Duration::from_secs(3), crate::auth::ThrottleScope::Address)
            .into_response();
        assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(res.headers()[header::RETRY_AFTER], "3");
        assert_eq!(res.headers()[header::CONTENT_TYPE], PROBLEM_JSON);
    }
}
