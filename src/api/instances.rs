//! `GET /api/v1/instances`: the kmirror instances sharing the work and the slots each owns.

use axum::Json;
use axum::extract::State;

use crate::app_state::AppState;

use super::auth::ViewerAuth;
use super::dto::{InstancesResponse, ts};
use super::problem::ProblemDetails;
use super::{age_ms, now};

/// The instances of this deployment.
///
/// Every instance with the same cluster name as the answering one: itself, and the others by the
/// heartbeats they write to the state topic every few seconds (an instance silent for longer
/// than 30 s is left out). Each owns some slots (partitions of the state topic) and mirrors the
/// partitions in them; `GET .../partitions` names each partition's slot and owner.
#[utoipa::path(
    get,
    path = "/api/v1/instances",
    tag = "cluster",
    operation_id = "instances_get",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The instances and their slots", body = InstancesResponse),
        (status = 401, description = "No or invalid token", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 403, description = "Role too low", body = ProblemDetails, content_type = "application/problem+json"),
    )
)]
pub async fn instances_get(_auth: ViewerAuth, State(state): State<AppState>) -> Json<InstancesResponse> {
    let snap = state.engine.snapshot();
    let now = now();
    Json(InstancesResponse::new(&snap.cluster, now, ts(snap.taken_at), age_ms(snap.taken_at, now)))
}
