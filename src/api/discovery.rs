//! `/api/v1/mirrors/{mirror}/discovery`: a mirror's topic policy and what discovery found and did.

use std::collections::BTreeSet;

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;

use crate::app_state::AppState;
use crate::engine::{DiscoverySnapshot, MirrorSnapshot};

use super::auth::ViewerAuth;
use super::dto::{MirrorPath, TopicOfMirror, ts};
use super::mirrors::find_mirror;
use super::problem::{ApiError, ProblemDetails};
use super::{ApiPath, age_ms, now};

/// A mirror's topic policy and discovery.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct DiscoveryResponse {
    pub mirror: String,
    /// Source topics discovery mirrors (whole-name regexes).
    pub topic_include: Vec<String>,
    /// Exclusions (win over `topic_include`): never started; a mirrored topic that comes to match
    /// is stopped.
    pub topic_exclude: Vec<String>,
    /// Whether discovery starts anything: some include pattern. Without one, only topics someone
    /// starts are mirrored (exclusions still stop mirrored topics that match them).
    pub active: bool,
    /// The kmirror instance that runs discovery for this mirror (the owner of its slot).
    pub runs_on: Option<String>,
    /// Whether that is the instance that answered (refusals are known there).
    pub runs_here: bool,
    /// The last run: when the source's topics were listed, how long it took, how many there were.
    pub last_run: Option<DiscoveryRun>,
    /// Why the last run could not list or start topics, if it could not.
    pub last_error: Option<String>,
    /// Source topics `topic_include` matches (exclusions aside), as of the last run.
    pub matched: Vec<String>,
    /// Matched topics the mirror has (in any state: a failed-over topic stays the mirror's and
    /// is never started again).
    pub mirrored: Vec<String>,
    /// Matched topics the last run found to start.
    pub to_start: Vec<String>,
    /// Topics the run in progress still has to start.
    pub starting: Option<usize>,
    /// Matched topics a start refused, with why. Tried again after a policy change, on
    /// `POST .../refresh`, or ten minutes later; not at every run.
    pub refused: Vec<RefusedTopic>,
    /// Matched topics left out by `topic_exclude` or as internal topics.
    pub excluded: Vec<ExcludedTopic>,
    /// Matched topics another mirror of this destination holds.
    pub taken: Vec<TopicOfMirror>,
    /// Discovery runs on this instance since it started.
    pub runs_total: u64,
    /// Topics discovery started on this instance since it started.
    pub topics_started_total: u64,
    /// Topics discovery stopped (exclusions) on this instance since it started.
    pub topics_stopped_total: u64,
    pub taken_at: String,
    pub snapshot_age_ms: u64,
}

/// One listing of the source's topics.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct DiscoveryRun {
    pub at: String,
    /// How long listing the source's topics took.
    pub listing_ms: Option<u64>,
    /// Topics the source had.
    pub topics_seen: Option<usize>,
}

/// A topic a discovery start refused.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct RefusedTopic {
    pub topic: String,
    /// The problem slug (e.g. `destination-topic-conflict`).
    #[serde(rename = "type")]
    pub kind: String,
    pub detail: String,
    /// First refused for this reason.
    pub since: String,
    /// Last tried.
    pub tried_at: String,
}

/// A matched topic discovery leaves out.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ExcludedTopic {
    pub topic: String,
    pub reason: String,
}

impl DiscoveryResponse {
    pub fn new(m: &MirrorSnapshot, taken_at: crate::domain::Timestamp, age: u64) -> DiscoveryResponse {
        let d: &DiscoverySnapshot = &m.discovery;
        let plan = d.plan.as_deref().cloned().unwrap_or_default();
        let ours: BTreeSet<&str> = m.topics.iter().map(|t| t.name.as_str()).collect();
        DiscoveryResponse {
            mirror: m.name.clone(),
            topic_include: m.topic_include.clone(),
            topic_exclude: m.topic_exclude.clone(),
            active: !m.topic_include.is_empty(),
            runs_on: d.runs_on.clone(),
            runs_here: d.runs_here,
            last_run: d.last_run_at.map(|at| DiscoveryRun {
                at: ts(at),
                listing_ms: d.last_run_ms,
                topics_seen: d.topics_seen,
            }),
            last_error: d.last_error.clone(),
            mirrored: plan.matched.iter().filter(|t| ours.contains(t.as_str())).cloned().collect(),
            matched: plan.matched,
            to_start: plan.start,
            starting: d.starting,
            refused: d
                .refused
                .iter()
                .map(|(topic, r)| RefusedTopic {
                    topic: topic.clone(),
                    kind: r.kind.slug().to_string(),
                    detail: r.detail.clone(),
                    since: ts(r.since),
                    tried_at: ts(r.tried_at),
                })
                .collect(),
            excluded: plan.excluded.into_iter().map(|(topic, reason)| ExcludedTopic { topic, reason }).collect(),
            taken: plan.taken.into_iter().map(|(topic, mirror)| TopicOfMirror { topic, mirror }).collect(),
            runs_total: d.runs_total,
            topics_started_total: d.topics_started_total,
            topics_stopped_total: d.topics_stopped_total,
            taken_at: ts(taken_at),
            snapshot_age_ms: age,
        }
    }
}

/// A mirror's topic policy and discovery: what the last run matched, started, refused and
/// excluded.
#[utoipa::path(
    get,
    path = "/api/v1/mirrors/{mirror}/discovery",
    tag = "mirrors",
    operation_id = "mirror_discovery",
    security(("bearer" = [])),
    params(MirrorPath),
    responses(
        (status = 200, description = "The topic policy and discovery", body = DiscoveryResponse),
        (status = 400, description = "Invalid mirror name", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 401, description = "No or invalid token", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 403, description = "Role too low", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 404, description = "No such mirror", body = ProblemDetails, content_type = "application/problem+json"),
    )
)]
pub async fn mirror_discovery(
    _auth: ViewerAuth,
    State(state): State<AppState>,
    ApiPath(MirrorPath { mirror }): ApiPath<MirrorPath>,
) -> Result<Json<DiscoveryResponse>, ApiError> {
    let snap = state.engine.snapshot();
    let m = find_mirror(&snap, &mirror)?;
    Ok(Json(DiscoveryResponse::new(m, snap.taken_at, age_ms(snap.taken_at, now()))))
}
