//! `GET /api/v1/mirrors/{mirror}/report`: one mirror's incident report (built and rendered in
//! [`crate::presentation::report`], which the dashboard's download uses too).

use axum::extract::State;
use axum::response::Response;
use serde::Deserialize;
use utoipa::IntoParams;

use crate::app_state::AppState;

pub use crate::presentation::report::*;

use super::auth::ViewerAuth;
use super::dto::MirrorPath;
use super::mirrors::find_mirror;
use super::problem::{ApiError, ProblemDetails};
use super::{ApiPath, ApiQuery, now};

/// The report's query.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ReportQuery {
    /// `json` (default) or `markdown`.
    format: Option<ReportFormat>,
    /// Ask for a file: `Content-Disposition: attachment` with a name made of the mirror and the
    /// time (`kmirror-<mirror>-<yyyymmddThhmmssZ>.md|json`).
    download: Option<bool>,
}

/// A mirror's incident report: health, the partitions that need attention with their errors, the
/// largest lags, the catch-up estimate and the last hour of lag, the last 20 operations and the
/// instances, from one snapshot.
///
/// `format=markdown` renders the same content as Markdown tables for a ticket or a chat;
/// `download=true` asks for a file. Secrets are redacted as in every other answer.
#[utoipa::path(
    get,
    path = "/api/v1/mirrors/{mirror}/report",
    tag = "mirrors",
    operation_id = "mirror_report",
    security(("bearer" = [])),
    params(MirrorPath, ReportQuery),
    responses(
        (status = 200, description = "The report", content(
            (MirrorReport = "application/json"),
            (String = "text/markdown"),
        )),
        (status = 400, description = "Invalid mirror name or query", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 401, description = "No or invalid token", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 403, description = "Role too low", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 404, description = "No such mirror", body = ProblemDetails, content_type = "application/problem+json"),
    )
)]
pub async fn mirror_report(
    _auth: ViewerAuth,
    State(state): State<AppState>,
    ApiPath(MirrorPath { mirror }): ApiPath<MirrorPath>,
    ApiQuery(q): ApiQuery<ReportQuery>,
) -> Result<Response, ApiError> {
    let snap = state.engine.snapshot();
    let m = find_mirror(&snap, &mirror)?;
    let now = now();
    let report = build(&snap, m, &state.history, &state.engine.operations(), now);
    Ok(respond(&report, now, q.format.unwrap_or_default(), q.download.unwrap_or(false)))
}
