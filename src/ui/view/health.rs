//! Cluster ID and sync health, shown on the overview's cards and on the mirror page.

use crate::domain::Timestamp;
use crate::engine::{ClusterIdStatus, DataPathStatus, Health, MirrorSnapshot, SyncKind, SyncStatus};
use crate::format::{self, NONE};

use super::common::When;

#[derive(Debug, Clone)]
pub struct ClusterIdView {
    pub label: &'static str,
    /// `ok`, `bad`, `warn` or `muted`.
    pub css: &'static str,
    pub expected: String,
    pub observed: String,
    pub checked: When,
    pub error: Option<String>,
    pub explanation: &'static str,
}

pub(super) fn cluster_id_view(m: &MirrorSnapshot, now: Timestamp) -> ClusterIdView {
    let (label, css, explanation) = match m.cluster_id_status {
        ClusterIdStatus::Ok => ("match", "ok", "The source answers with the expected cluster ID."),
        ClusterIdStatus::Mismatch => (
            "MISMATCH",
            "bad",
            "The source answers with another cluster ID: mirroring is halted and every partition is FAILED.",
        ),
        ClusterIdStatus::Unreachable => {
            ("unreachable", "warn", "The source did not answer the last check; kmirror keeps retrying.")
        }
        ClusterIdStatus::AuthenticationFailed => (
            "authentication failed",
            "bad",
            "The source refused the mirror's credentials: fix them (PATCH the mirror's source properties); kmirror keeps retrying.",
        ),
        ClusterIdStatus::TlsFailed => (
            "TLS handshake failed",
            "bad",
            "The TLS handshake with the source failed: check its CA and the client certificate; kmirror keeps retrying.",
        ),
        ClusterIdStatus::Unknown => ("not checked yet", "muted", "The first check has not finished yet."),
    };
    ClusterIdView {
        label,
        css,
        expected: m.expected_source_cluster_id.clone().unwrap_or_else(|| NONE.into()),
        observed: m.observed_source_cluster_id.clone().unwrap_or_else(|| NONE.into()),
        checked: When::new(now, m.cluster_id_checked_at),
        error: m.cluster_id_error.clone(),
        explanation,
    }
}

#[derive(Debug, Clone)]
pub struct SyncView {
    pub kind: &'static str,
    pub css: &'static str,
    pub status: String,
    pub last_success: When,
    pub last_attempt: When,
    pub last_error: Option<String>,
    pub applied: String,
    pub warnings: Vec<String>,
}

fn sync_label(k: SyncKind) -> &'static str {
    match k {
        SyncKind::TopicConfigs => "Topic configs",
        SyncKind::GroupOffsets => "Group offsets",
        SyncKind::Acls => "ACLs",
    }
}

pub(super) fn sync_view(s: &SyncStatus, now: Timestamp) -> SyncView {
    let (css, status) = if !s.supported {
        ("muted", "not supported by this cluster".to_string())
    } else if s.consecutive_failures > 0 || (s.last_error.is_some() && s.last_success_at.is_none()) {
        let n = s.consecutive_failures.max(1);
        ("bad", if n == 1 { "failing".to_string() } else { format!("failing ({n} times in a row)") })
    } else if !s.warnings.is_empty() {
        ("warn", format!("ok, {} warning{}", s.warnings.len(), if s.warnings.len() == 1 { "" } else { "s" }))
    } else if s.last_success_at.is_some() {
        ("ok", "ok".to_string())
    } else {
        ("muted", "not run yet".to_string())
    };
    SyncView {
        kind: sync_label(s.kind),
        css,
        status,
        last_success: When::new(now, s.last_success_at),
        last_attempt: When::new(now, s.last_attempt_at),
        last_error: s.last_error.clone(),
        applied: format::int(i64::try_from(s.last_applied).unwrap_or(i64::MAX)),
        warnings: s.warnings.clone(),
    }
}

/// One word for several sync kinds: the worst.
pub(super) fn worst_css<'a>(it: impl IntoIterator<Item = &'a str>) -> &'static str {
    let rank = |c: &str| match c {
        "bad" => 3,
        "warn" => 2,
        "ok" => 1,
        _ => 0,
    };
    match it.into_iter().map(rank).max().unwrap_or(0) {
        3 => "bad",
        2 => "warn",
        1 => "ok",
        _ => "muted",
    }
}

/// The colour of a data path's status: from its health, never from its words (a fenced data
/// path used to show as a warning because its text did not start with "fenced").
pub(super) fn data_path_css(s: &DataPathStatus) -> &'static str {
    match s.health() {
        Health::Ok => "ok",
        Health::Warning => "warn",
        Health::Critical => "bad",
    }
}
