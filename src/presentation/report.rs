//! A mirror's incident report, everything an operator pastes into a ticket in one document —
//! health, the partitions that need attention with their errors, the largest lags, the catch-up
//! estimate and the last hour of lag, recent operations (who did what) and the instances — as
//! JSON or Markdown, from one snapshot so the parts agree. Served by the API
//! (`GET /api/v1/mirrors/{mirror}/report`) and downloaded from the dashboard.
//!
//! Built from the same snapshot, history and operation log as the other reads (no Kafka calls),
//! and through the same DTOs, so a secret redacted there is redacted here; the Markdown is
//! rendered from the JSON form, never from the engine's types.

use std::fmt::Write as _;

use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Json, Response};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::domain::{PartitionState, Timestamp};
use crate::engine::{MirrorSnapshot, OperationView, PartitionSnapshot, Snapshot};
use crate::format;
use crate::history::History;

use super::dto::{
    EtaDto, FailoverReadiness, HealthResponse, HistorySample, InstancesResponse, Mirror, Operation, Partition, Topic,
    age_ms, state_rank, ts,
};

/// Topics listed (FAILED first, then by lag); `topics_total` counts all.
pub const MAX_TOPICS: usize = 100;
/// Partitions needing attention listed; `attention_total` counts all.
pub const MAX_ATTENTION: usize = 100;
/// Largest-lag partitions listed.
pub const MAX_TOP_LAG: usize = 10;
/// Recent operations listed (newest first).
pub const MAX_OPERATIONS: usize = 20;
/// The lag history window.
const HISTORY_WINDOW: std::time::Duration = std::time::Duration::from_secs(3600);

/// The report's format.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ReportFormat {
    /// `application/json` (the [`MirrorReport`] schema).
    #[default]
    Json,
    /// `text/markdown`, for a ticket or a chat; the same content.
    Markdown,
}

/// Who wrote the report.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ReportSource {
    /// The answering instance's `--instance-id`.
    pub instance: String,
    /// Its `--cluster-name`.
    pub cluster_name: String,
    pub kmirror_version: String,
}

/// A partition that needs an operator's eyes: FAILED, between states (UNKNOWN, PREPARING,
/// PAUSING, STOPPING), carrying an error, or failed over with records written to its old source
/// since (split brain).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ReportPartitions {
    /// How many partitions qualify (all of them, not only those listed).
    pub total: usize,
    /// FAILED first, then by state, topic and partition; at most 100.
    pub items: Vec<Partition>,
}

/// A mirror's lag over the last hour, in this instance's memory.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ReportHistory {
    /// When this instance began recording (a restart starts a new history).
    pub history_since: String,
    /// Oldest first, every 10 s.
    pub samples: Vec<HistorySample>,
}

/// Everything about one mirror an incident needs, from one snapshot.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct MirrorReport {
    pub generated_at: String,
    pub generated_by: ReportSource,
    /// The mirror (source connection with secrets redacted, state counts, total lag).
    pub mirror: Mirror,
    /// As `GET .../health`: source cluster ID, data path, metadata sync, groups, writes to the
    /// old source after a failover.
    pub health: HealthResponse,
    /// When the mirror will have caught up, at the recent rates.
    pub eta: EtaDto,
    /// How many topics the mirror has.
    pub topics_total: usize,
    /// FAILED topics first, then by lag; at most 100.
    pub topics: Vec<Topic>,
    pub attention: ReportPartitions,
    /// The partitions with the largest lag (lag above 0), at most 10.
    pub largest_lag: Vec<Partition>,
    pub lag_history: ReportHistory,
    /// The mirror's last 20 operations, newest first (the audit trail).
    pub recent_operations: Vec<Operation>,
    /// The deployment: instances, slots, who owns what.
    pub instances: InstancesResponse,
    pub taken_at: String,
    pub snapshot_age_ms: u64,
}

/// Whether a partition belongs in the report's attention list.
fn needs_attention(p: &PartitionSnapshot) -> bool {
    !matches!(p.state, PartitionState::Mirroring | PartitionState::Paused | PartitionState::Stopped)
        || p.error.is_some()
        || p.source_writes_after_stop.is_some_and(|n| n > 0)
}

/// Builds the report of `m` (a mirror of `snap`). `operations` is the operation log, newest first.
#[must_use]
pub fn build(
    snap: &Snapshot,
    m: &MirrorSnapshot,
    history: &History,
    operations: &[OperationView],
    now: Timestamp,
) -> MirrorReport {
    let taken_at = ts(snap.taken_at);
    let snapshot_age_ms = age_ms(snap.taken_at, now);
    let partitions = || m.topics.iter().flat_map(|t| &t.partitions);

    let mut topics: Vec<&crate::engine::TopicSnapshot> = m.topics.iter().collect();
    topics.sort_by(|a, b| {
        let failed = |t: &crate::engine::TopicSnapshot| t.state != PartitionState::Failed;
        failed(a).cmp(&failed(b)).then(b.lag_records.cmp(&a.lag_records)).then_with(|| a.name.cmp(&b.name))
    });

    let mut attention: Vec<&PartitionSnapshot> = partitions().filter(|p| needs_attention(p)).collect();
    attention.sort_by(|a, b| {
        state_rank(a.state)
            .cmp(&state_rank(b.state))
            .then_with(|| a.topic.cmp(&b.topic))
            .then(a.partition.cmp(&b.partition))
    });
    let attention_total = attention.len();

    let mut lagging: Vec<&PartitionSnapshot> = partitions().filter(|p| p.lag_records > 0).collect();
    lagging.sort_by(|a, b| {
        b.lag_records.cmp(&a.lag_records).then_with(|| a.topic.cmp(&b.topic)).then(a.partition.cmp(&b.partition))
    });

    let window = history.window(&m.name, None, HISTORY_WINDOW, now);
    MirrorReport {
        generated_at: ts(now),
        generated_by: ReportSource {
            instance: snap.cluster.this_instance.clone(),
            cluster_name: snap.cluster.cluster_name.clone(),
            kmirror_version: env!("CARGO_PKG_VERSION").to_string(),
        },
        mirror: Mirror::from(m),
        health: HealthResponse::new(m, now, taken_at.clone(), snapshot_age_ms),
        eta: history.eta(m, None).into(),
        topics_total: m.topics.len(),
        topics: topics.into_iter().take(MAX_TOPICS).map(Topic::from).collect(),
        attention: ReportPartitions {
            total: attention_total,
            items: attention.into_iter().take(MAX_ATTENTION).map(Partition::from).collect(),
        },
        largest_lag: lagging.into_iter().take(MAX_TOP_LAG).map(Partition::from).collect(),
        lag_history: ReportHistory {
            history_since: ts(history.since()),
            samples: window.samples.iter().map(HistorySample::from).collect(),
        },
        recent_operations: operations
            .iter()
            .filter(|o| o.mirror == m.name)
            .take(MAX_OPERATIONS)
            .map(Operation::from)
            .collect(),
        instances: InstancesResponse::new(&snap.cluster, now, taken_at.clone(), snapshot_age_ms),
        taken_at,
        snapshot_age_ms,
    }
}

/// Text for a Markdown table cell or line: nothing in it can end the cell, start markup or
/// inject HTML (error messages and bootstrap lists come from outside).
fn md(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\r' | '\n' | '\t' => out.push(' '),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '\\' | '|' | '`' | '*' | '_' | '[' | ']' | '#' | '~' => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// A name as inline code. Mirror, topic, group and instance names cannot hold a backtick or a
/// line break (they are validated), but the cell must not break if one ever did.
fn code(s: &str) -> String {
    format!("`{}`", s.replace(['`', '\n', '\r'], "").replace('|', "\\|"))
}

fn opt(s: Option<&str>) -> String {
    s.map_or_else(|| format::NONE.to_string(), md)
}

fn state(s: super::dto::PartitionStateDto) -> &'static str {
    PartitionState::from(s).as_str()
}

fn counts(c: &std::collections::BTreeMap<String, usize>) -> String {
    c.iter().map(|(s, n)| format!("{s} {}", format::count(*n))).collect::<Vec<_>>().join(", ")
}

/// The report as Markdown (GitHub-flavoured tables), the same content as the JSON.
#[must_use]
pub fn markdown(r: &MirrorReport) -> String {
    let mut o = String::new();
    let m = &r.mirror;
    let h = &r.health;
    // `write!` to a String cannot fail.
    let _ = writeln!(o, "# kmirror incident report: mirror {}\n", code(&m.name));
    let _ = writeln!(
        o,
        "Generated {} by instance {} of {} (kmirror {}), from a snapshot taken {} ({} old).\n",
        r.generated_at,
        code(&r.generated_by.instance),
        code(&r.generated_by.cluster_name),
        md(&r.generated_by.kmirror_version),
        r.taken_at,
        format::duration_ms(i64::try_from(r.snapshot_age_ms).unwrap_or(i64::MAX)),
    );

    o.push_str("## Summary\n\n| | |\n|---|---|\n");
    let cluster_id = format!(
        "expected {}, observed {}: {}",
        h.source_cluster_id.expected.as_deref().map_or_else(|| format::NONE.to_string(), code),
        h.source_cluster_id.observed.as_deref().map_or_else(|| format::NONE.to_string(), code),
        serde_json::to_value(h.source_cluster_id.status)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default(),
    );
    let _ = writeln!(o, "| Source | {} |", md(&m.source.bootstrap_servers));
    let _ = writeln!(o, "| Source cluster ID | {cluster_id} |");
    if let Some(e) = &h.source_cluster_id.error {
        let _ = writeln!(o, "| Cluster ID check error | {} |", md(e));
    }
    let _ = writeln!(o, "| Data path | {} |", md(&m.data_path));
    let _ = writeln!(
        o,
        "| Partitions | {} in {} topics: {} |",
        format::count(m.partition_count),
        format::count(m.topic_count),
        counts(&m.state_counts)
    );
    let _ = writeln!(
        o,
        "| Lag | {} records, at most {} |",
        format::int(m.lag_records),
        format::duration_ms((m.lag_seconds * 1000.0) as i64)
    );
    let _ = writeln!(o, "| Catch-up | {} |", md(&r.eta.text));
    if let Some(rate) = m.replication_throttle_bytes_per_sec {
        let _ = writeln!(
            o,
            "| Replication throttle | {}/s per instance; data paths waited {} for it |",
            format::bytes(rate),
            format::duration_ms((m.throttled_seconds * 1000.0) as i64)
        );
    }
    let _ = writeln!(o);

    if !h.source_writes_after_failover.is_empty() {
        o.push_str("## Writes to the old source after a failover\n\n| Topic | Records | Partitions | Explained by failback |\n|---|---:|---:|---|\n");
        for w in &h.source_writes_after_failover {
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} |",
                code(&w.topic),
                format::int(w.records),
                format::count(w.partitions),
                w.failback_mirror.as_deref().map_or_else(|| "no: split brain".to_string(), code)
            );
        }
        o.push('\n');
    }

    let _ = writeln!(o, "## Partitions needing attention ({})\n", format::count(r.attention.total));
    if r.attention.items.is_empty() {
        o.push_str("None: every partition is MIRRORING, PAUSED or STOPPED without an error.\n\n");
    } else {
        o.push_str(
            "| Partition | State | Since | Error | Retries | Next retry | Owner |\n|---|---|---|---|---:|---|---|\n",
        );
        for p in &r.attention.items {
            let error = p.error.as_ref().map_or_else(
                || match p.source_writes_after_stop {
                    Some(n) if n > 0 => {
                        format!("{} records written to the old source since the failover", format::int(n))
                    }
                    _ => format::NONE.to_string(),
                },
                |e| format!("{}: {}", code(&e.code), md(&e.message)),
            );
            let _ = writeln!(
                o,
                "| {}/{} | {} | {} | {} | {} | {} | {} |",
                code(&p.topic),
                p.partition,
                state(p.state),
                p.state_since,
                error,
                p.retry_count,
                opt(p.next_retry_at.as_deref()),
                p.owner.as_deref().map_or_else(|| format::NONE.to_string(), code)
            );
        }
        if r.attention.total > r.attention.items.len() {
            let _ = writeln!(o, "\n{} more not listed.", format::count(r.attention.total - r.attention.items.len()));
        }
        o.push('\n');
    }

    o.push_str("## Metadata sync\n\n| Kind | Last success | Failures in a row | Last error | Warnings |\n|---|---|---:|---|---|\n");
    for (name, k) in
        [("topic configs", &h.sync.topic_configs), ("group offsets", &h.sync.group_offsets), ("ACLs", &h.sync.acls)]
    {
        let _ = writeln!(
            o,
            "| {name}{} | {} | {} | {} | {} |",
            if k.supported { "" } else { " (not supported)" },
            opt(k.last_success_at.as_deref()),
            k.consecutive_failures,
            opt(k.last_error.as_deref()),
            md(&k.warnings.join("; "))
        );
    }
    o.push('\n');
    let not_ready: Vec<_> = h.groups.iter().filter(|g| g.failover_readiness == FailoverReadiness::NotReady).collect();
    let ready = h.groups.iter().filter(|g| g.failover_readiness == FailoverReadiness::Ready).count();
    let _ = writeln!(
        o,
        "Consumer groups (failover readiness): {} ready, {} not ready, {} with nothing committed on the mirrored \
         partitions.\n",
        format::count(ready),
        format::count(not_ready.len()),
        format::count(h.groups.len() - ready - not_ready.len())
    );
    if !not_ready.is_empty() {
        o.push_str("| Group | Topics | In sync | Last success | Why not ready |\n|---|---|---:|---|---|\n");
        for g in not_ready {
            let _ = writeln!(
                o,
                "| {} | {} | {} / {} | {} | {} |",
                code(&g.group),
                g.topics.iter().map(|t| code(t)).collect::<Vec<_>>().join(", "),
                g.partitions_in_sync,
                g.partitions_committed,
                opt(g.last_success_at.as_deref()),
                opt(g.not_ready_reason.as_deref())
            );
        }
        o.push('\n');
    }

    let _ = writeln!(o, "## Topics ({})\n", format::count(r.topics_total));
    o.push_str("| Topic | State | Partitions | Lag (records) | Lag (time) |\n|---|---|---|---:|---:|\n");
    for t in &r.topics {
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} |",
            code(&t.name),
            state(t.state),
            counts(&t.state_counts),
            format::int(t.lag_records),
            format::duration_ms((t.lag_seconds * 1000.0) as i64)
        );
    }
    if r.topics_total > r.topics.len() {
        let _ = writeln!(o, "\n{} more not listed.", format::count(r.topics_total - r.topics.len()));
    }
    o.push('\n');

    if !r.largest_lag.is_empty() {
        o.push_str("## Largest lag\n\n| Partition | State | Lag (records) | Lag (time) | Source LSO | Mirrored to | LME |\n|---|---|---:|---:|---:|---:|---:|\n");
        for p in &r.largest_lag {
            let _ = writeln!(
                o,
                "| {}/{} | {} | {} | {} | {} | {} | {} |",
                code(&p.topic),
                p.partition,
                state(p.state),
                format::int(p.lag_records),
                format::duration_ms((p.lag_seconds * 1000.0) as i64),
                format::opt_int(p.source_last_stable_offset),
                format::opt_int(p.mirrored_source_offset),
                format::opt_int(p.last_mirrored_epoch.map(i64::from))
            );
        }
        o.push('\n');
    }

    o.push_str("## Lag over the last hour\n\n");
    let s = &r.lag_history.samples;
    match (s.first(), s.last(), s.iter().max_by_key(|x| x.lag_records)) {
        (Some(first), Some(last), Some(peak)) => {
            let rate = |x: Option<f64>| x.map_or_else(|| format::NONE.to_string(), |v| format!("{v:.0} records/s"));
            let _ = writeln!(
                o,
                "{} samples from {} to {} (history since {}): lag {} records at the start, {} at the peak ({}), \
                 {} now; mirrored {}, source produce rate {} at the last sample.\n",
                format::count(s.len()),
                first.at,
                last.at,
                r.lag_history.history_since,
                format::int(first.lag_records),
                format::int(peak.lag_records),
                peak.at,
                format::int(last.lag_records),
                rate(last.mirrored_records_per_sec),
                rate(last.source_records_per_sec)
            );
        }
        _ => {
            let _ = writeln!(o, "No samples yet (history since {}).\n", r.lag_history.history_since);
        }
    }

    let _ = writeln!(o, "## Recent operations ({})\n", format::count(r.recent_operations.len()));
    if r.recent_operations.is_empty() {
        o.push_str("None recorded.\n\n");
    } else {
        o.push_str("| Requested | Kind | Topics | By | From | Accepted by | Outcome | Errors |\n|---|---|---|---|---|---|---|---|\n");
        for op in &r.recent_operations {
            let errors: Vec<String> = op
                .results
                .iter()
                .filter_map(|t| t.error.as_ref().map(|e| format!("{}: {}", code(&t.topic), md(&e.detail))))
                .chain(op.error.iter().map(|e| md(&e.detail)))
                .collect();
            let topics = if op.topics.len() > 5 {
                format!(
                    "{} and {} more",
                    op.topics[..5].iter().map(|t| code(t)).collect::<Vec<_>>().join(", "),
                    op.topics.len() - 5
                )
            } else {
                op.topics.iter().map(|t| code(t)).collect::<Vec<_>>().join(", ")
            };
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} | {} | {} | {} | {} |",
                op.requested_at,
                code(&op.kind),
                topics,
                md(&op.requested_by),
                opt(op.client_address.as_deref()),
                op.accepted_by.as_deref().map_or_else(|| format::NONE.to_string(), code),
                serde_json::to_value(op.outcome).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default(),
                if errors.is_empty() { format::NONE.to_string() } else { errors.join("; ") }
            );
        }
        o.push('\n');
    }

    let i = &r.instances;
    let _ = writeln!(
        o,
        "## Instances ({}, {} slots, {} unowned, {} rebalances seen)\n",
        format::count(i.instances.len()),
        i.slots,
        format::count(i.unowned_slots.len()),
        i.rebalances
    );
    o.push_str("| Instance | Version | Slots | Partitions | Last heartbeat |\n|---|---|---:|---:|---|\n");
    for x in &i.instances {
        let _ = writeln!(
            o,
            "| {}{} | {} | {} | {} | {} ({} ago) |",
            code(&x.id),
            if x.this { " (this one)" } else { "" },
            md(&x.version),
            format::count(x.slots.len()),
            format::int(i64::try_from(x.partitions).unwrap_or(i64::MAX)),
            x.last_heartbeat,
            format::duration_ms(i64::try_from(x.heartbeat_age_ms).unwrap_or(i64::MAX))
        );
    }
    o
}

/// The file name a download gets: `kmirror-<mirror>-<yyyymmddThhmmssZ>.<ext>`.
#[must_use]
pub fn file_name(mirror: &str, generated_at: Timestamp, format: ReportFormat) -> String {
    let stamp: String = generated_at.to_string().chars().filter(|c| c.is_ascii_alphanumeric()).take(15).collect();
    let ext = match format {
        ReportFormat::Json => "json",
        ReportFormat::Markdown => "md",
    };
    // Mirror names are [a-zA-Z0-9._-]: safe in a quoted file name.
    format!("kmirror-{mirror}-{stamp}Z.{ext}")
}

/// The report as an HTTP response in `format`, as a file when `download`.
pub fn respond(r: &MirrorReport, generated_at: Timestamp, format: ReportFormat, download: bool) -> Response {
    let mut res = match format {
        ReportFormat::Json => Json(r).into_response(),
        ReportFormat::Markdown => {
            ([(header::CONTENT_TYPE, HeaderValue::from_static("text/markdown; charset=utf-8"))], markdown(r))
                .into_response()
        }
    };
    if download
        && let Ok(v) = HeaderValue::from_str(&format!(
            "attachment; filename=\"{}\"",
            file_name(&r.mirror.name, generated_at, format)
        ))
    {
        res.headers_mut().insert(header::CONTENT_DISPOSITION, v);
    }
    res
}
