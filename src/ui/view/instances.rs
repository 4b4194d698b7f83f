//! The instances page (`templates/pages/instances.html`): the kmirror instances sharing the
//! work, the slots (partitions of the state topic) each owns and how recently each was heard
//! from.

use crate::domain::Timestamp;
use crate::engine::{ClusterSnapshot, InstanceSnapshot, Snapshot};
use crate::format::{self, NONE};

use super::common::{Freshness, When};

/// Another instance's heartbeat older than this is shown as late (instances write one every
/// 3 s; the engine forgets an instance silent for 30 s).
pub const HEARTBEAT_LATE_MS: i64 = 10_000;

#[derive(Debug, Clone)]
pub struct InstanceRow {
    pub id: String,
    /// The advertised URL as a link target: only an `http(s)://` URL is linked (the value comes
    /// from the state topic, so a `javascript:` URL must never become a link).
    pub href: Option<String>,
    /// The advertised URL as shown ([`NONE`] when the instance did not say).
    pub url: String,
    pub version: String,
    /// Runs another version than the instance answering (a rolling upgrade in progress).
    pub version_differs: bool,
    /// How many slots it owns.
    pub slot_count: String,
    /// Its slots as ranges: `0–3, 7, 9–10`.
    pub slots: String,
    pub partitions: String,
    pub heartbeat: When,
    /// `ok`, or `warn` when the heartbeat is late.
    pub heartbeat_css: &'static str,
    pub started: When,
    /// The instance answering this request.
    pub this: bool,
}

#[derive(Debug, Clone)]
pub struct InstancesView {
    pub cluster_name: String,
    /// `group` or `standalone`.
    pub mode: String,
    pub mode_help: &'static str,
    pub this_instance: String,
    pub slots: String,
    pub instance_count: String,
    pub rebalances: String,
    /// Slots no known instance owns, as ranges (empty when every slot has an owner).
    pub unowned: String,
    pub unowned_count: usize,
    pub rows: Vec<InstanceRow>,
    pub live_url: &'static str,
    pub fresh: Freshness,
}

/// `[0, 1, 2, 3, 7, 9, 10]` → `0–3, 7, 9–10` (sorted, each slot once; [`NONE`] for none).
pub fn slot_ranges(slots: &[i32]) -> String {
    let mut sorted = slots.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let start = sorted[i];
        let mut end = start;
        while i + 1 < sorted.len() && sorted[i + 1] == end + 1 {
            i += 1;
            end = sorted[i];
        }
        parts.push(if start == end { start.to_string() } else { format!("{start}–{end}") });
        i += 1;
    }
    if parts.is_empty() { NONE.to_string() } else { parts.join(", ") }
}

/// Only absolute `http://` and `https://` URLs without spaces or control characters are links.
fn link_target(url: &str) -> Option<String> {
    let lower = url.to_ascii_lowercase();
    let web = lower.starts_with("http://") || lower.starts_with("https://");
    let clean = !url.chars().any(|c| c.is_whitespace() || c.is_control());
    (web && clean && url.len() > "https://".len()).then(|| url.to_string())
}

fn instance_row(i: &InstanceSnapshot, this_version: &str, now: Timestamp) -> InstanceRow {
    let late = !i.this && i.last_heartbeat.millis_until(now) > HEARTBEAT_LATE_MS;
    InstanceRow {
        id: i.id.clone(),
        href: i.advertised_url.as_deref().and_then(link_target),
        url: i.advertised_url.clone().filter(|u| !u.is_empty()).unwrap_or_else(|| NONE.to_string()),
        version: i.version.clone(),
        version_differs: !this_version.is_empty() && i.version != this_version,
        slot_count: format::count(i.slots.len()),
        slots: slot_ranges(&i.slots),
        partitions: format::int(i64::try_from(i.partitions).unwrap_or(i64::MAX)),
        heartbeat: When::new(now, Some(i.last_heartbeat)),
        heartbeat_css: if late { "warn" } else { "ok" },
        started: When::new(now, Some(i.started_at)),
        this: i.this,
    }
}

/// The instances view of `snap.cluster`, instances by id.
pub fn instances(snap: &Snapshot, now: Timestamp) -> InstancesView {
    let c: &ClusterSnapshot = &snap.cluster;
    let this_version = c.instances.iter().find(|i| i.this).map_or("", |i| i.version.as_str());
    let mut known: Vec<&InstanceSnapshot> = c.instances.iter().collect();
    known.sort_by(|a, b| a.id.cmp(&b.id));
    let unowned: Vec<i32> = (0..c.slots).filter(|s| c.owner_of(*s).is_none()).collect();
    let (mode, mode_help) = match c.mode.as_str() {
        "group" => ("group", "Slots are shared by every instance with this cluster name through a consumer group."),
        "standalone" => ("standalone", "This instance owns every slot."),
        _ => ("unknown", "The engine has not said yet."),
    };
    InstancesView {
        cluster_name: if c.cluster_name.is_empty() { NONE.to_string() } else { c.cluster_name.clone() },
        mode: mode.to_string(),
        mode_help,
        this_instance: c.this_instance.clone(),
        slots: format::count(usize::try_from(c.slots).unwrap_or(0)),
        instance_count: format::count(c.instances.len()),
        rebalances: format::int(i64::try_from(c.rebalances).unwrap_or(i64::MAX)),
        unowned: if unowned.is_empty() { String::new() } else { slot_ranges(&unowned) },
        unowned_count: unowned.len(),
        rows: known.into_iter().map(|i| instance_row(i, this_version, now)).collect(),
        live_url: "/ui/instances",
        fresh: Freshness::new(snap.taken_at, now),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_read_as_ranges() {
        assert_eq!(slot_ranges(&[]), NONE);
        assert_eq!(slot_ranges(&[4]), "4");
        assert_eq!(slot_ranges(&[10, 0, 1, 2, 3, 7, 9]), "0–3, 7, 9–10");
        assert_eq!(slot_ranges(&[1, 1, 2]), "1–2");
    }

    #[test]
    fn only_web_urls_become_links() {
        assert_eq!(link_target("http://kmirror-0:8080"), Some("http://kmirror-0:8080".to_string()));
        assert_eq!(link_target("HTTPS://k.example/"), Some("HTTPS://k.example/".to_string()));
        for bad in
            ["javascript:alert(1)", "data:text/html,x", "//evil.example", "http://a b", "https://", "kmirror-0:8080"]
        {
            assert_eq!(link_target(bad), None, "{bad}");
        }
    }
}
