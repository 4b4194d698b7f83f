//! The overview page (`templates/pages/overview.html`): one card per mirror.

use crate::domain::{PartitionState, StateCounts, Timestamp};
use crate::engine::{MirrorSnapshot, OperationView, Snapshot};
use crate::format::{self, url};
use crate::history::History;

use super::chart::{EtaView, Trends, eta_of, trends};
use super::common::{Freshness, StateCountView, Viewer, lag_css, mirror_href, partitions_href, state_counts};
use super::health::{ClusterIdView, SyncView, cluster_id_view, data_path_css, sync_view, worst_css};
use super::operations::{OperationRow, operation_row};

#[derive(Debug, Clone)]
pub struct MirrorCard {
    pub name: String,
    pub href: String,
    pub source: String,
    pub cluster: ClusterIdView,
    pub counts: Vec<StateCountView>,
    pub topics: String,
    pub partitions: String,
    pub lag_records: String,
    pub max_lag: String,
    pub lag_css: &'static str,
    pub failed: usize,
    pub failed_text: String,
    pub failed_href: String,
    pub worst_href: String,
    pub sync: Vec<SyncView>,
    pub sync_css: &'static str,
    pub data_path: String,
    pub data_path_css: &'static str,
    /// `ok`, `warn` or `bad`: the card's edge colour.
    pub health: &'static str,
    /// Lag and throughput over the last hour.
    pub trends: Trends,
    pub eta: EtaView,
}

fn mirror_card(
    m: &MirrorSnapshot,
    history: Option<&History>,
    index: usize,
    (taken_at, now): (Timestamp, Timestamp),
) -> MirrorCard {
    let counts: StateCounts = m.topics.iter().flat_map(|t| &t.partitions).map(|p| p.state).collect();
    let lag: i64 = m.topics.iter().map(|t| t.lag_records).sum();
    let max_lag = m.topics.iter().map(|t| t.lag_seconds).fold(0.0, f64::max);
    let failed = counts.count(PartitionState::Failed);
    let sync: Vec<SyncView> = m.sync.iter().map(|s| sync_view(s, now)).collect();
    let sync_css = worst_css(sync.iter().map(|s| s.css));
    let cluster = cluster_id_view(m, now);
    let dp_css = data_path_css(&m.data_path);
    let health = worst_css([
        if failed > 0 { "bad" } else { "ok" },
        cluster.css,
        sync_css,
        dp_css,
        match lag_css(lag, max_lag) {
            "lag-bad" => "bad",
            "lag-warn" => "warn",
            _ => "ok",
        },
    ]);
    let name = m.name.clone();
    let base = partitions_href(&name);
    MirrorCard {
        href: mirror_href(&name),
        source: m.source_bootstrap_servers.clone(),
        counts: state_counts(&counts, &|s| url(&base, &[("state", s.as_str().into())])),
        topics: format::count(m.topics.len()),
        partitions: format::count(counts.total()),
        lag_records: format::int(lag),
        max_lag: format::secs(max_lag),
        lag_css: lag_css(lag, max_lag),
        failed,
        failed_text: format::count(failed),
        failed_href: url(&base, &[("state", "FAILED".into())]),
        worst_href: url(&base, &[("sort", "lag".into()), ("dir", "desc".into())]),
        sync,
        sync_css,
        data_path: m.data_path.to_string(),
        data_path_css: dp_css,
        health: if health == "muted" { "ok" } else { health },
        trends: trends(history, (&m.name, None), (taken_at, lag), &format!("mc-{index}"), now),
        eta: eta_of(history, m, None),
        cluster,
        name,
    }
}

#[derive(Debug, Clone)]
pub struct OverviewView {
    pub destination: String,
    pub mirrors: Vec<MirrorCard>,
    pub mirror_count: String,
    pub topics: String,
    pub partitions: String,
    pub failed: usize,
    pub failed_text: String,
    pub lag_records: String,
    pub max_lag: String,
    pub lag_css: &'static str,
    pub counts: Vec<StateCountView>,
    pub recent: Vec<OperationRow>,
    pub fresh: Freshness,
    pub can_admin: bool,
}

pub fn overview(
    snap: &Snapshot,
    history: Option<&History>,
    ops: &[OperationView],
    now: Timestamp,
    viewer: &Viewer,
) -> OverviewView {
    let all: StateCounts =
        snap.mirrors.iter().flat_map(|m| &m.topics).flat_map(|t| &t.partitions).map(|p| p.state).collect();
    let lag: i64 = snap.mirrors.iter().flat_map(|m| &m.topics).map(|t| t.lag_records).sum();
    let max_lag = snap.mirrors.iter().flat_map(|m| &m.topics).map(|t| t.lag_seconds).fold(0.0, f64::max);
    let mut sorted: Vec<&MirrorSnapshot> = snap.mirrors.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    let mirrors: Vec<MirrorCard> =
        sorted.into_iter().enumerate().map(|(i, m)| mirror_card(m, history, i + 1, (snap.taken_at, now))).collect();
    OverviewView {
        destination: if snap.destination_cluster_id.is_empty() {
            "unknown yet".into()
        } else {
            snap.destination_cluster_id.clone()
        },
        mirror_count: format::count(mirrors.len()),
        mirrors,
        topics: format::count(snap.mirrors.iter().map(|m| m.topics.len()).sum()),
        partitions: format::count(all.total()),
        failed: all.count(PartitionState::Failed),
        failed_text: format::count(all.count(PartitionState::Failed)),
        lag_records: format::int(lag),
        max_lag: format::secs(max_lag),
        lag_css: lag_css(lag, max_lag),
        counts: state_counts(&all, &|_| String::new()),
        recent: ops.iter().take(5).map(|o| operation_row(o, snap, now)).collect(),
        fresh: Freshness::new(snap.taken_at, now),
        can_admin: viewer.can_admin(),
    }
}
