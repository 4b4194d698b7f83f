//! Lag over time and the catch-up estimate of a mirror or topic (`crate::history`).

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::app_state::AppState;
use crate::engine::{ProblemKind, validate_topic_name};
use crate::history::parse_window;

use super::auth::ViewerAuth;
use super::dto::{MirrorPath, TopicPath, ts};
use super::mirrors::find_mirror;
use super::problem::{ApiError, ProblemDetails, ProblemType};
use super::{ApiPath, ApiQuery, age_ms, now};
pub use crate::presentation::dto::{EtaDto, HistorySample};

/// The window of a history read.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct HistoryQuery {
    /// How far back: a number and a unit (`s`, `m`, `h`) from 1m to 24h, e.g. `15m`, `1h`
    /// (default), `24h`. Windows up to 1h come at the sample interval (10 s), longer ones at 1 min.
    #[param(pattern = r"^[0-9]{1,6}[smh]$", example = "1h")]
    window: Option<String>,
}

/// Lag and throughput of a mirror or topic over a window, and its catch-up estimate.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct HistoryResponse {
    pub mirror: String,
    /// The topic, for a topic's history.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topic: Option<String>,
    /// The window as asked (`1h` by default).
    pub window: String,
    pub window_seconds: u64,
    /// Spacing of the samples, in seconds (10 up to 1h, 60 beyond).
    pub resolution_seconds: f64,
    /// When this instance started recording (RFC 3339): history lives in memory, so a restart
    /// starts a new one and nothing older exists.
    pub history_since: String,
    /// False for a topic beyond the tracked-topic cap (1,000 topics, those with most lag): its
    /// `samples` are empty.
    pub tracked: bool,
    pub eta: EtaDto,
    /// Oldest first.
    pub samples: Vec<HistorySample>,
    /// How to read the figures.
    pub notes: Vec<String>,
    pub taken_at: String,
    pub snapshot_age_ms: u64,
}

const NOTES: [&str; 2] = [
    "mirrored_records_per_sec counts every partition on every instance; mirrored_bytes_per_sec counts only the \
     partitions whose slot this instance owns",
    "a restart of this instance starts a new history (history_since)",
];

fn answer(
    state: &AppState,
    mirror: &str,
    topic: Option<&str>,
    window: Option<String>,
) -> Result<Json<HistoryResponse>, ApiError> {
    let window_text = window.unwrap_or_else(|| "1h".to_string());
    let span = parse_window(&window_text).map_err(|e| ApiError::new(ProblemType::InvalidQuery, e))?;
    let snap = state.engine.snapshot();
    let m = find_mirror(&snap, mirror)?;
    if let Some(t) = topic {
        validate_topic_name(t)?;
        m.topic(t).ok_or_else(|| {
            ApiError::new(ProblemKind::TopicNotInMirror, format!("topic {t:?} is not part of mirror {mirror:?}"))
        })?;
    }
    let now = now();
    let w = state.history.window(&m.name, topic, span, now);
    Ok(Json(HistoryResponse {
        mirror: m.name.clone(),
        topic: topic.map(str::to_string),
        window: window_text,
        window_seconds: span.as_secs(),
        resolution_seconds: w.resolution.as_secs_f64(),
        history_since: ts(state.history.since()),
        tracked: w.tracked,
        eta: state.history.eta(m, topic).into(),
        samples: w.samples.iter().map(HistorySample::from).collect(),
        notes: NOTES.iter().map(|s| s.to_string()).collect(),
        taken_at: ts(snap.taken_at),
        snapshot_age_ms: age_ms(snap.taken_at, now),
    }))
}

/// A mirror's lag and throughput over time, and when it will have caught up.
///
/// Sampled in this instance's memory every 10 s (the last hour) and summed up per minute (the
/// last 24 h). A restart starts a new history: `history_since` says when this one began.
#[utoipa::path(
    get,
    path = "/api/v1/mirrors/{mirror}/history",
    tag = "mirrors",
    operation_id = "mirror_history",
    security(("bearer" = [])),
    params(MirrorPath, HistoryQuery),
    responses(
        (status = 200, description = "The mirror's samples over the window and its catch-up estimate", body = HistoryResponse),
        (status = 400, description = "Invalid mirror name or window", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 401, description = "No or invalid token", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 403, description = "Role too low", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 404, description = "No such mirror", body = ProblemDetails, content_type = "application/problem+json"),
    )
)]
pub async fn mirror_history(
    _auth: ViewerAuth,
    State(state): State<AppState>,
    ApiPath(MirrorPath { mirror }): ApiPath<MirrorPath>,
    ApiQuery(q): ApiQuery<HistoryQuery>,
) -> Result<Json<HistoryResponse>, ApiError> {
    answer(&state, &mirror, None, q.window)
}

/// A topic's lag and throughput over time, and when it will have caught up.
///
/// Like the mirror's history, for one topic. At most 1,000 topics are tracked (those with most
/// lag); another topic answers with `tracked: false` and no samples.
#[utoipa::path(
    get,
    path = "/api/v1/mirrors/{mirror}/topics/{topic}/history",
    tag = "topics",
    operation_id = "topic_history",
    security(("bearer" = [])),
    params(TopicPath, HistoryQuery),
    responses(
        (status = 200, description = "The topic's samples over the window and its catch-up estimate", body = HistoryResponse),
        (status = 400, description = "Invalid mirror or topic name, or window", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 401, description = "No or invalid token", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 403, description = "Role too low", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 404, description = "No such mirror, or the topic is not in it", body = ProblemDetails,
            content_type = "application/problem+json"),
    )
)]
pub async fn topic_history(
    _auth: ViewerAuth,
    State(state): State<AppState>,
    ApiPath(TopicPath { mirror, topic }): ApiPath<TopicPath>,
    ApiQuery(q): ApiQuery<HistoryQuery>,
) -> Result<Json<HistoryResponse>, ApiError> {
    answer(&state, &mirror, Some(&topic), q.window)
}
