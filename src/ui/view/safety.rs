//! The mirror page's approval and drill section (`templates/fragments/mirror_safety.html`):
//! the mirror's approval policy, the requests waiting for a second person (approve or reject
//! them here), and the DR drills with their progress and reports.

use crate::domain::Timestamp;
use crate::domain::approval::{ApprovalAction, ApprovalStatus};
use crate::engine::{ApprovalPolicy, ApprovalRecord, DrillView, Snapshot, Truncation, default_canary};
use crate::format;

use super::common::{Viewer, When, mirror_href, operation_href};

/// A request waiting for a second person.
#[derive(Debug, Clone)]
pub struct PendingView {
    pub id: String,
    pub action: &'static str,
    /// What the call names (topics, pattern), or empty.
    pub what: String,
    pub requested_by: String,
    pub reason: String,
    pub requested: When,
    /// e.g. `in 14 min`.
    pub expires: String,
    /// The viewer asked for it (and so may not decide).
    pub mine: bool,
    /// The viewer may approve or reject it.
    pub can_decide: bool,
    pub approve_url: String,
    pub reject_url: String,
    pub href: String,
}

/// A decided request, a break-glass call or an expired request, for the recent list.
#[derive(Debug, Clone)]
pub struct DecidedView {
    pub id: String,
    pub action: &'static str,
    pub what: String,
    pub requested_by: String,
    pub status: &'static str,
    pub css: &'static str,
    pub decided_by: String,
    pub reason: String,
    pub when: When,
    pub href: String,
}

/// One step of a drill.
#[derive(Debug, Clone)]
pub struct DrillStepView {
    pub name: &'static str,
    pub status: String,
    pub css: &'static str,
    pub detail: String,
}

/// A drill in the list.
#[derive(Debug, Clone)]
pub struct DrillRowView {
    pub id: String,
    pub started: When,
    pub requested_by: String,
    /// `running`, `passed`, `failed`, `interrupted`.
    pub status: String,
    pub css: &'static str,
    pub running: bool,
    /// The step in progress, while running.
    pub current: String,
    pub steps: Vec<DrillStepView>,
    pub rto: String,
    pub lost: String,
    pub duplicated: String,
    pub group: String,
    pub lag: String,
    /// The failed checks, or why it stopped.
    pub problem: String,
    pub json_href: String,
    pub md_href: String,
    pub has_report: bool,
    pub digest: String,
    pub href: String,
}

/// The whole section.
#[derive(Debug, Clone)]
pub struct SafetyView {
    pub mirror: String,
    pub live_url: String,
    /// The policy in words.
    pub policy: String,
    pub policy_active: bool,
    pub pending: Vec<PendingView>,
    pub recent: Vec<DecidedView>,
    pub drills: Vec<DrillRowView>,
    pub drill_running: bool,
    pub can_operate: bool,
    pub can_admin: bool,
    pub csrf: String,
    pub drill_url: String,
    pub drill_needs_approval: bool,
    pub canary: String,
}

/// Drills listed on the mirror page.
const DRILLS_SHOWN: usize = 10;
/// Decided requests listed.
const DECIDED_SHOWN: usize = 5;

/// What a policy asks for, in words.
pub fn policy_text(p: &ApprovalPolicy) -> String {
    if !p.is_active() {
        return "No call needs a second person's approval.".to_string();
    }
    let calls: Vec<&str> = p.required_for.iter().map(|a| a.label()).collect();
    format!(
        "Needs a second person's approval: {}. A request waits {} for a decision.",
        calls.join(", "),
        format::duration_ms(p.expires_after_seconds as i64 * 1000)
    )
}

fn what(a: &ApprovalRecord) -> String {
    let mut out = a.call.summary();
    if a.action == ApprovalAction::Resync || matches!(a.call.truncation, Truncation::Resync { .. }) {
        out = format!("{out} (resync)");
    }
    if a.action == ApprovalAction::Drill {
        out = a.call.drill.canary_topic.clone().unwrap_or_default();
    }
    out.trim().to_string()
}

fn status_css(s: ApprovalStatus) -> &'static str {
    match s {
        ApprovalStatus::Executed | ApprovalStatus::Approved => "ok",
        ApprovalStatus::Pending => "warn",
        ApprovalStatus::BreakGlass | ApprovalStatus::Failed => "bad",
        ApprovalStatus::Rejected | ApprovalStatus::Expired => "muted",
    }
}

fn step_css(status: &str) -> &'static str {
    match status {
        "done" => "ok",
        "failed" => "bad",
        "running" => "warn",
        _ => "muted",
    }
}

fn step_name(name: &str) -> &'static str {
    match name {
        "create_canary" => "Create the canary",
        "produce" => "Produce a known sequence",
        "commit_group" => "Commit a consumer group",
        "mirror" => "Mirror the canary",
        "failover" => "Fail it over",
        "verify" => "Verify the destination",
        "cleanup" => "Clean up",
        _ => "Step",
    }
}

/// A drill's row.
pub fn drill_row(d: &DrillView, now: Timestamp) -> DrillRowView {
    let base = format!("{}/drills/{}", mirror_href(&d.mirror), format::encode_component(&d.id));
    let f = d.report.as_ref().map(|r| &r.figures);
    let opt = |v: Option<i64>| v.map_or_else(|| "–".to_string(), format::int);
    let problem = match &d.report {
        Some(r) => match &r.error {
            Some(e) => e.clone(),
            None => r
                .checks
                .iter()
                .filter(|c| !c.passed)
                .map(|c| format!("{}: {}", c.name, c.detail))
                .collect::<Vec<_>>()
                .join("; "),
        },
        None if d.status == "interrupted" => {
            "interrupted: its kmirror instance stopped while it ran; its canary topic may be left behind".to_string()
        }
        None => String::new(),
    };
    DrillRowView {
        id: d.id.clone(),
        started: When::new(now, Some(d.requested_at)),
        requested_by: d.requested_by.clone(),
        status: d.status.clone(),
        css: match d.status.as_str() {
            "passed" => "ok",
            "running" => "warn",
            _ => "bad",
        },
        running: d.is_running(),
        current: d
            .steps
            .iter()
            .find(|s| s.status == "running")
            .map(|s| step_name(&s.name).to_string())
            .unwrap_or_default(),
        steps: d
            .steps
            .iter()
            .map(|s| DrillStepView {
                name: step_name(&s.name),
                status: s.status.clone(),
                css: step_css(&s.status),
                detail: s.detail.clone().unwrap_or_default(),
            })
            .collect(),
        rto: f.and_then(|f| f.rto_ms).map_or_else(|| "–".to_string(), format::duration_ms),
        lost: opt(f.and_then(|f| f.records_lost)),
        duplicated: opt(f.and_then(|f| f.records_duplicated)),
        group: match f.and_then(|f| f.group_resumed_exactly) {
            Some(true) => "exactly".into(),
            Some(false) => "no".into(),
            None => "–".into(),
        },
        lag: match (f.and_then(|f| f.mirror_lag_records), f.and_then(|f| f.mirror_lag_ms)) {
            (Some(r), Some(ms)) => format!("{} records, {}", format::int(r), format::duration_ms(ms)),
            _ => "–".into(),
        },
        problem,
        has_report: d.report.is_some(),
        digest: d
            .report
            .as_ref()
            .and_then(|r| r.digest.as_ref())
            .map(|g| format!("{} {}…", g.algorithm, &g.value[..g.value.len().min(16)]))
            .unwrap_or_default(),
        json_href: format!("{base}/report.json"),
        md_href: format!("{base}/report.md"),
        href: operation_href(&d.id),
    }
}

/// The section for mirror `name`, as `viewer` sees it at `now`.
pub fn safety(snap: &Snapshot, name: &str, viewer: &Viewer, now: Timestamp) -> SafetyView {
    use crate::auth::Role;
    let policy = snap.mirror(name).map(|m| m.approval.clone()).unwrap_or_default();
    let can_operate = viewer.role.allows(Role::Operator);
    let mut pending = Vec::new();
    let mut recent = Vec::new();
    for a in snap.approvals.iter().filter(|a| a.mirror == name) {
        let status = a.status_at(now);
        let href = operation_href(&a.request_id);
        if status == ApprovalStatus::Pending {
            let mine = a.requested_by == viewer.name;
            pending.push(PendingView {
                id: a.request_id.clone(),
                action: a.action.label(),
                what: what(a),
                requested_by: a.requested_by.clone(),
                reason: a.reason.clone(),
                requested: When::new(now, Some(a.requested_at)),
                expires: format!("in {}", format::duration_ms(now.millis_until(a.expires_at).max(0))),
                mine,
                can_decide: can_operate && !mine,
                approve_url: format!("/approvals/{}/approve", format::encode_component(&a.request_id)),
                reject_url: format!("/approvals/{}/reject", format::encode_component(&a.request_id)),
                href,
            });
        } else if recent.len() < DECIDED_SHOWN {
            recent.push(DecidedView {
                id: a.request_id.clone(),
                action: a.action.label(),
                what: what(a),
                requested_by: a.requested_by.clone(),
                status: status.label(),
                css: status_css(status),
                decided_by: a.decided_by.clone().unwrap_or_default(),
                reason: a
                    .decision_reason
                    .clone()
                    .filter(|_| status == ApprovalStatus::Rejected)
                    .unwrap_or_else(|| a.reason.clone()),
                when: When::new(now, Some(a.decided_at.unwrap_or(a.requested_at))),
                href,
            });
        }
    }
    let drills: Vec<DrillRowView> =
        snap.drills.iter().filter(|d| d.mirror == name).take(DRILLS_SHOWN).map(|d| drill_row(d, now)).collect();
    SafetyView {
        mirror: name.to_string(),
        live_url: format!("/ui{}/safety", mirror_href(name)),
        policy: policy_text(&policy),
        policy_active: policy.is_active(),
        drill_running: drills.iter().any(|d| d.running),
        pending,
        recent,
        drills,
        can_operate,
        can_admin: viewer.role.allows(Role::Admin),
        csrf: viewer.csrf.clone(),
        drill_url: format!("{}/drills", mirror_href(name)),
        drill_needs_approval: policy.requires(ApprovalAction::Drill),
        canary: default_canary(name),
    }
}
