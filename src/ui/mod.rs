//! Server-rendered dashboard (issue: Dashboard).

use axum::Router;

use crate::app::AppState;

/// The dashboard routes.
pub fn router(_state: AppState) -> Router {
    Router::new()
}
