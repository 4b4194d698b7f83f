//! Disaster-recovery drills: a drill with its steps and report.

use serde::Serialize;
use utoipa::ToSchema;

use crate::engine::DrillView;

use super::ts;

/// One step of a drill.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct DrillStepDto {
    /// `create_canary`, `produce`, `commit_group`, `mirror`, `failover`, `verify`, `cleanup`.
    pub name: String,
    /// `pending`, `running`, `done`, `failed` or `skipped`.
    pub status: String,
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
    /// What it did, or why it failed.
    pub detail: Option<String>,
}

/// A drill: its progress and, once finished, its report.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Drill {
    pub id: String,
    pub mirror: String,
    /// `running`, `passed`, `failed` or `interrupted` (its instance stopped while it ran).
    pub status: String,
    /// `pass` or `fail`, once finished.
    pub result: Option<String>,
    /// The identity that asked (never a token).
    pub requested_by: String,
    /// The instance that ran it.
    pub instance: String,
    pub requested_at: String,
    pub finished_at: Option<String>,
    pub canary_topic: String,
    pub steps: Vec<DrillStepDto>,
    /// The report (`kmirror-drill-report/1`): who, when, which instance, every figure, a
    /// pass/fail per check, the cleanup, and its digest. Absent while running.
    #[schema(value_type = Option<Object>)]
    pub report: Option<serde_json::Value>,
    /// Where to download the report as signed (JSON) and as Markdown.
    pub report_json_url: Option<String>,
    pub report_markdown_url: Option<String>,
}

impl Drill {
    pub fn of(d: &DrillView) -> Drill {
        let finished = d.report_json.is_some();
        let base = format!("/api/v1/mirrors/{}/drills/{}", d.mirror, d.id);
        Drill {
            id: d.id.clone(),
            mirror: d.mirror.clone(),
            status: d.status.clone(),
            result: d.result().map(|r| r.as_str().to_string()),
            requested_by: d.requested_by.clone(),
            instance: d.instance.clone(),
            requested_at: ts(d.requested_at),
            finished_at: d.finished_at.map(ts),
            canary_topic: d.canary_topic.clone(),
            steps: d
                .steps
                .iter()
                .map(|s| DrillStepDto {
                    name: s.name.clone(),
                    status: s.status.clone(),
                    started_at: s.started_at.map(ts),
                    finished_at: s.finished_at.map(ts),
                    detail: s.detail.clone(),
                })
                .collect(),
            report: d.report_json.as_deref().and_then(|r| serde_json::from_str(r).ok()),
            report_json_url: finished.then(|| format!("{base}/report.json")),
            report_markdown_url: finished.then(|| format!("{base}/report.md")),
        }
    }
}
