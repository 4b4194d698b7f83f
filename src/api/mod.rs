//! REST API under `/api/v1` (issue: REST API with OpenAPI spec, auth, audit and metrics).

use axum::Router;

use crate::app::AppState;

/// The API routes.
pub fn router(_state: AppState) -> Router {
    Router::new()
}
