//! Bearer-token authentication and role checks for the REST API.
//!
//! Handlers take one of [`ViewerAuth`], [`OperatorAuth`] or [`AdminAuth`] as their FIRST
//! argument: extractors run in argument order, so an unauthenticated or under-privileged caller
//! is refused (401 / 403) before the path or body is even looked at. The token itself never
//! leaves this module: only the identity's name and role travel on. A valid token is always
//! accepted; unknown ones are throttled per client address and for everyone (429 with
//! `Retry-After`, see [`crate::auth`]) and logged with the address and path, never the token.

use std::net::SocketAddr;

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::header;
use axum::http::request::Parts;

use crate::app_state::AppState;
use crate::auth::{AuthFailure, Identity, Role};
use crate::engine::Actor;

use super::problem::{ApiError, ProblemType};

/// An authenticated caller and where the request came from.
#[derive(Debug, Clone)]
pub struct Caller {
    pub identity: Identity,
    /// The peer address of the TCP connection (not a forwarded header: those are spoofable).
    pub address: Option<SocketAddr>,
}

impl Caller {
    /// Who asked, for the engine's audit trail.
    pub fn actor(&self) -> Actor {
        Actor { identity: self.identity.name.clone(), address: self.address.map(|a| a.ip().to_string()) }
    }
}

/// The bearer token of a request, if it has a well-formed `Authorization: Bearer` header.
fn bearer_token(parts: &Parts) -> Result<Option<&str>, ApiError> {
    let Some(value) = parts.headers.get(header::AUTHORIZATION) else {
        return Ok(None);
    };
    let value =
        value.to_str().map_err(|_| ApiError::unauthorized("the Authorization header is not valid text", true))?;
    let (scheme, token) = value.trim().split_once(' ').unwrap_or((value, ""));
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(ApiError::unauthorized("use `Authorization: Bearer <token>`", true));
    }
    Ok(Some(token.trim()))
}

/// Authenticates the request and checks that its identity has at least `needed`.
pub fn authorize(parts: &Parts, state: &AppState, needed: Role) -> Result<Caller, ApiError> {
    let address = parts.extensions.get::<ConnectInfo<SocketAddr>>().map(|c| c.0);
    let identity = if state.auth.is_disabled() {
        state.auth.authenticate("")
    } else {
        let Some(token) = bearer_token(parts)? else {
            return Err(ApiError::unauthorized("this endpoint needs `Authorization: Bearer <token>`", false));
        };
        match state.auth.authenticate_from(token, address.map(|a| a.ip()), parts.uri.path()) {
            Ok(identity) => Some(identity),
            Err(AuthFailure::Invalid) => None,
            Err(AuthFailure::Throttled { retry_after, scope }) => {
                return Err(ApiError::too_many_failures(retry_after, scope));
            }
        }
    };
    let Some(identity) = identity else {
        return Err(ApiError::unauthorized("the bearer token is not valid", true));
    };
    if !identity.role.allows(needed) {
        return Err(ApiError::new(
            ProblemType::Forbidden,
            format!(
                "{:?} has role {}; this operation needs role {} or higher",
                identity.name,
                identity.role.as_str(),
                needed.as_str()
            ),
        ));
    }
    Ok(Caller { identity, address })
}

macro_rules! role_extractor {
    ($(#[$doc:meta])* $name:ident => $role:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone)]
        pub struct $name(pub Caller);

        impl FromRequestParts<AppState> for $name {
            type Rejection = ApiError;

            async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
                authorize(parts, state, $role).map($name)
            }
        }
    };
}

role_extractor!(
    /// Any authenticated identity (viewer, operator or admin): reads.
    ViewerAuth => Role::Viewer
);
role_extractor!(
    /// Operator or admin: lifecycle actions and refreshes.
    OperatorAuth => Role::Operator
);
role_extractor!(
    /// Admin only: creating, changing and deleting mirrors.
    AdminAuth => Role::Admin
);
