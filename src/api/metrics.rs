//! `GET /metrics` in the Prometheus text exposition format (version 0.0.4), rendered from the
//! engine's snapshot plus the HTTP request histogram this module records.
//!
//! Label values come from untrusted places (topic names on the source cluster), so every value
//! is escaped as the format requires. HTTP series have labels from fixed sets only, so no client
//! (authenticated or not) can add series: the method is one of the standard ones or `other`
//! ([`method_label`]), the route is the matched route template (`/api/v1/mirrors/{mirror}`) or
//! `unmatched`, never the raw path, and the status is the one kmirror answered. [`MAX_HTTP_SERIES`]
//! caps the table all the same.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::Response;

use crate::domain::{PartitionState, Timestamp};
use crate::engine::{Snapshot, SyncKind};

/// Upper bounds of the request-latency histogram buckets, in seconds.
const BUCKETS: [f64; 12] = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

#[derive(Debug, Clone, Default)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

impl Histogram {
    fn observe(&mut self, seconds: f64) {
        for (i, le) in BUCKETS.iter().enumerate() {
            if seconds <= *le {
                self.counts[i] += 1;
            }
        }
        self.count += 1;
        self.sum += seconds;
    }
}

/// (method label, route template, status).
type SeriesKey = (&'static str, String, u16);

/// At most this many HTTP series (far more than methods × routes × statuses kmirror answers);
/// beyond it, new combinations are counted under method and route `other`.
pub const MAX_HTTP_SERIES: usize = 1_000;

/// The methods that get their own label value (RFC 9110's, and PATCH); any other is `other`.
const METHODS: [&str; 9] = ["GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"];

/// The `method` label of a request method: itself if standard (methods are case-sensitive), else
/// `other`. A client can send any token as a method (hyper accepts thousands of characters).
pub fn method_label(method: &str) -> &'static str {
    METHODS.iter().find(|m| **m == method).copied().unwrap_or("other")
}

/// The `route` label of a request: its matched route template (from kmirror's own routes, so a
/// fixed set), or `unmatched`.
pub fn route_label(matched: Option<&MatchedPath>) -> &str {
    matched.map_or("unmatched", MatchedPath::as_str)
}

/// HTTP request latencies by (method, route, status). Cheap to clone; one per router.
#[derive(Debug, Clone, Default)]
pub struct HttpMetrics {
    // std Mutex on purpose: held only for a map update, never across an await.
    inner: Arc<Mutex<BTreeMap<SeriesKey, Histogram>>>,
}

impl HttpMetrics {
    /// Records one request. `method` is reduced to [`method_label`]; `route` must be a route
    /// template or `unmatched` ([`route_label`]), never a raw path.
    pub fn observe(&self, method: &str, route: &str, status: u16, elapsed: Duration) {
        let mut key = (method_label(method), route.to_string(), status);
        let mut m = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if !m.contains_key(&key) && m.len() >= MAX_HTTP_SERIES {
            key = ("other", "other".to_string(), status);
        }
        m.entry(key).or_default().observe(elapsed.as_secs_f64());
    }

    /// How many HTTP series there are.
    pub fn series(&self) -> usize {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    fn render(&self, out: &mut String) {
        let m = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        header(
            out,
            "kmirror_http_request_duration_seconds",
            "histogram",
            "HTTP request latency by method, route template and status.",
        );
        for ((method, route, status), h) in m.iter() {
            let labels =
                format!("method=\"{}\",route=\"{}\",status=\"{status}\"", escape_label(method), escape_label(route));
            for (i, le) in BUCKETS.iter().enumerate() {
                let _ = writeln!(
                    out,
                    "kmirror_http_request_duration_seconds_bucket{{{labels},le=\"{le}\"}} {}",
                    h.counts[i]
                );
            }
            let _ = writeln!(out, "kmirror_http_request_duration_seconds_bucket{{{labels},le=\"+Inf\"}} {}", h.count);
            let _ = writeln!(out, "kmirror_http_request_duration_seconds_sum{{{labels}}} {}", h.sum);
            let _ = writeln!(out, "kmirror_http_request_duration_seconds_count{{{labels}}} {}", h.count);
        }
    }
}

/// Middleware (added with `Router::layer`, so the matched route is known) that records every
/// request's latency.
pub async fn track(State(metrics): State<HttpMetrics>, req: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = method_label(req.method().as_str());
    let route = route_label(req.extensions().get::<MatchedPath>()).to_string();
    let res = next.run(req).await;
    metrics.observe(method, &route, res.status().as_u16(), started.elapsed());
    res
}

/// Escapes a label value: backslash, double quote and line feed (the exposition format's rules).
pub fn escape_label(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

fn number(x: f64) -> String {
    if x.is_finite() { x.to_string() } else { "0".to_string() }
}

/// Renders every series: engine state from `snap` (at wall-clock `now`) and HTTP latencies.
pub fn render(snap: &Snapshot, now: Timestamp, http: &HttpMetrics, version: &str) -> String {
    let mut out = String::with_capacity(4096 + 400 * snap.mirrors.iter().map(|m| m.topics.len()).sum::<usize>());

    header(&mut out, "kmirror_build_info", "gauge", "Always 1; the version is a label.");
    let _ = writeln!(out, "kmirror_build_info{{version=\"{}\"}} 1", escape_label(version));

    header(&mut out, "kmirror_snapshot_age_seconds", "gauge", "Age of the engine snapshot these series come from.");
    let _ = writeln!(out, "kmirror_snapshot_age_seconds {}", snap.taken_at.millis_until(now).max(0) as f64 / 1000.0);

    header(&mut out, "kmirror_mirrors", "gauge", "Number of mirrors.");
    let _ = writeln!(out, "kmirror_mirrors {}", snap.mirrors.len());

    let cluster = &snap.cluster;
    header(
        &mut out,
        "kmirror_instances",
        "gauge",
        "kmirror instances of this deployment this instance knows, itself included (others by recent heartbeats).",
    );
    let _ = writeln!(out, "kmirror_instances {}", cluster.instances.len());
    header(&mut out, "kmirror_slots", "gauge", "Slots (partitions of the state topic) of the deployment.");
    let _ = writeln!(out, "kmirror_slots {}", cluster.slots.max(0));
    header(&mut out, "kmirror_slots_owned", "gauge", "Slots this instance owns (it mirrors the partitions in them).");
    let owned = cluster.instances.iter().find(|i| i.this).map_or(0, |i| i.slots.len());
    let _ = writeln!(out, "kmirror_slots_owned {owned}");
    header(
        &mut out,
        "kmirror_slots_unowned",
        "gauge",
        "Slots no known instance owns, by the latest heartbeats (0 while no instance is known): their partitions are \
         not mirrored until one takes them over.",
    );
    let unowned = if cluster.instances.is_empty() {
        0
    } else {
        (0..cluster.slots.max(0)).filter(|s| cluster.owner_of(*s).is_none()).count()
    };
    let _ = writeln!(out, "kmirror_slots_unowned {unowned}");
    header(
        &mut out,
        "kmirror_rebalances_total",
        "counter",
        "Rebalances of the slot group this instance saw since it started.",
    );
    let _ = writeln!(out, "kmirror_rebalances_total {}", cluster.rebalances);

    type Series<'a> = (&'a str, &'a str, &'a str);
    let per_partition: [Series<'_>; 4] = [
        ("kmirror_partition_lag_records", "gauge", "Records the source has that the destination does not yet."),
        ("kmirror_partition_lag_seconds", "gauge", "How long the partition has been behind the source, in seconds."),
        ("kmirror_partition_records_mirrored_total", "counter", "Records mirrored by this process."),
        ("kmirror_partition_bytes_mirrored_total", "counter", "Payload bytes mirrored by this process."),
    ];
    for (i, (name, kind, help)) in per_partition.iter().enumerate() {
        header(&mut out, name, kind, help);
        for m in &snap.mirrors {
            let mirror = escape_label(&m.name);
            for t in &m.topics {
                let topic = escape_label(&t.name);
                for p in &t.partitions {
                    let value = match i {
                        0 => p.lag_records.to_string(),
                        1 => number(p.lag_seconds),
                        2 => p.records_mirrored.to_string(),
                        _ => p.bytes_mirrored.to_string(),
                    };
                    let _ = writeln!(
                        out,
                        "{name}{{mirror=\"{mirror}\",topic=\"{topic}\",partition=\"{}\"}} {value}",
                        p.partition
                    );
                }
            }
        }
    }

    header(&mut out, "kmirror_records_mirrored_total", "counter", "Records mirrored by this process, per mirror.");
    for m in &snap.mirrors {
        let n: u64 = m.topics.iter().flat_map(|t| &t.partitions).map(|p| p.records_mirrored).sum();
        let _ = writeln!(out, "kmirror_records_mirrored_total{{mirror=\"{}\"}} {n}", escape_label(&m.name));
    }
    header(&mut out, "kmirror_bytes_mirrored_total", "counter", "Payload bytes mirrored by this process, per mirror.");
    for m in &snap.mirrors {
        let n: u64 = m.topics.iter().flat_map(|t| &t.partitions).map(|p| p.bytes_mirrored).sum();
        let _ = writeln!(out, "kmirror_bytes_mirrored_total{{mirror=\"{}\"}} {n}", escape_label(&m.name));
    }

    header(&mut out, "kmirror_partitions", "gauge", "Partitions per mirror and state.");
    for m in &snap.mirrors {
        let counts = m.state_counts();
        for state in PartitionState::ALL {
            let _ = writeln!(
                out,
                "kmirror_partitions{{mirror=\"{}\",state=\"{state}\"}} {}",
                escape_label(&m.name),
                counts.get(&state).copied().unwrap_or(0)
            );
        }
    }

    header(
        &mut out,
        "kmirror_source_writes_after_failover",
        "gauge",
        "Per failed-over topic: source offsets its old source received after the failover, over its STOPPED partitions \
         (past what was mirrored), unless a failback on that cluster copies the topic back (then 0). Above 0 something \
         still writes to the old source: those records are on no copy, and a failback refuses them as divergent.",
    );
    for m in &snap.mirrors {
        for t in &m.topics {
            // Only topics with a STOPPED partition whose old source was read since its failover.
            if t.partitions.iter().any(|p| p.source_writes_after_stop.is_some()) {
                let _ = writeln!(
                    out,
                    "kmirror_source_writes_after_failover{{mirror=\"{}\",topic=\"{}\"}} {}",
                    escape_label(&m.name),
                    escape_label(&t.name),
                    t.split_brain().records
                );
            }
        }
    }

    header(
        &mut out,
        "kmirror_sync_seconds_since_success",
        "gauge",
        "Seconds since the last successful metadata sync, per mirror and kind (absent before the first success).",
    );
    for m in &snap.mirrors {
        for kind in SyncKind::ALL {
            if let Some(at) = m.sync.iter().find(|s| s.kind == kind).and_then(|s| s.last_success_at) {
                let _ = writeln!(
                    out,
                    "kmirror_sync_seconds_since_success{{mirror=\"{}\",kind=\"{}\"}} {}",
                    escape_label(&m.name),
                    kind.as_str(),
                    at.millis_until(now).max(0) as f64 / 1000.0
                );
            }
        }
    }
    header(
        &mut out,
        "kmirror_sync_consecutive_failures",
        "gauge",
        "Consecutive failed metadata sync runs, per mirror and kind.",
    );
    for m in &snap.mirrors {
        for kind in SyncKind::ALL {
            let n = m.sync.iter().find(|s| s.kind == kind).map_or(0, |s| s.consecutive_failures);
            let _ = writeln!(
                out,
                "kmirror_sync_consecutive_failures{{mirror=\"{}\",kind=\"{}\"}} {n}",
                escape_label(&m.name),
                kind.as_str()
            );
        }
    }

    header(
        &mut out,
        "kmirror_source_cluster_id_ok",
        "gauge",
        "1 when the source answered with the expected cluster ID, else 0.",
    );
    for m in &snap.mirrors {
        let ok = u8::from(m.cluster_id_status == crate::engine::ClusterIdStatus::Ok);
        let _ = writeln!(out, "kmirror_source_cluster_id_ok{{mirror=\"{}\"}} {ok}", escape_label(&m.name));
    }

    header(
        &mut out,
        "kmirror_consumer_groups_not_ready",
        "gauge",
        "Consumer groups with commits on the mirror's synced partitions that a failover now would not resume exactly \
         (last offset sync failed, e.g. active on the destination, or a partition not translated).",
    );
    for m in &snap.mirrors {
        let n = m.groups.iter().filter(|g| matches!(g.readiness(), crate::engine::GroupReadiness::NotReady(_))).count();
        let _ = writeln!(out, "kmirror_consumer_groups_not_ready{{mirror=\"{}\"}} {n}", escape_label(&m.name));
    }

    header(
        &mut out,
        "kmirror_replication_throttle_bytes_per_second",
        "gauge",
        "The mirror's replication throttle: record bytes each instance copies per second at most (only mirrors with \
         one).",
    );
    for m in &snap.mirrors {
        if let Some(rate) = m.replication_throttle_bytes_per_sec {
            let _ = writeln!(
                out,
                "kmirror_replication_throttle_bytes_per_second{{mirror=\"{}\"}} {rate}",
                escape_label(&m.name)
            );
        }
    }
    header(
        &mut out,
        "kmirror_replication_throttled_seconds_total",
        "counter",
        "Seconds this instance's data paths of the mirror waited for its replication throttle (summed over them).",
    );
    for m in &snap.mirrors {
        let _ = writeln!(
            out,
            "kmirror_replication_throttled_seconds_total{{mirror=\"{}\"}} {}",
            escape_label(&m.name),
            number(m.throttled_seconds)
        );
    }

    header(
        &mut out,
        "kmirror_discovery_runs_total",
        "counter",
        "Discovery runs of the mirror's topic policy on this instance (listings of the source's topics by the instance \
         that runs discovery for the mirror).",
    );
    for m in &snap.mirrors {
        let _ = writeln!(
            out,
            "kmirror_discovery_runs_total{{mirror=\"{}\"}} {}",
            escape_label(&m.name),
            m.discovery.runs_total
        );
    }
    header(
        &mut out,
        "kmirror_discovery_topics_started_total",
        "counter",
        "Source topics discovery started on this instance because they match the mirror's topic_include.",
    );
    for m in &snap.mirrors {
        let _ = writeln!(
            out,
            "kmirror_discovery_topics_started_total{{mirror=\"{}\"}} {}",
            escape_label(&m.name),
            m.discovery.topics_started_total
        );
    }
    header(
        &mut out,
        "kmirror_discovery_refused_topics",
        "gauge",
        "Source topics that match the mirror's topic_include but that a start refused (see GET .../discovery for why).",
    );
    for m in &snap.mirrors {
        let _ = writeln!(
            out,
            "kmirror_discovery_refused_topics{{mirror=\"{}\"}} {}",
            escape_label(&m.name),
            m.discovery.refused.len()
        );
    }

    header(
        &mut out,
        "kmirror_source_cluster_id_mismatch",
        "gauge",
        "1 when the source answered with another cluster ID than expected (mirroring is halted), else 0 (also while \
         unchecked or unreachable).",
    );
    for m in &snap.mirrors {
        let bad = u8::from(m.cluster_id_status == crate::engine::ClusterIdStatus::Mismatch);
        let _ = writeln!(out, "kmirror_source_cluster_id_mismatch{{mirror=\"{}\"}} {bad}", escape_label(&m.name));
    }

    header(
        &mut out,
        "kmirror_mirror_created_timestamp_seconds",
        "gauge",
        "When the mirror was created (Unix time), for alerts on mirrors that never passed a drill.",
    );
    for m in &snap.mirrors {
        let _ = writeln!(
            out,
            "kmirror_mirror_created_timestamp_seconds{{mirror=\"{}\"}} {}",
            escape_label(&m.name),
            m.created_at.as_millis() / 1000
        );
    }
    header(
        &mut out,
        "kmirror_last_drill_timestamp_seconds",
        "gauge",
        "When the mirror's last DR drill with this result (pass, fail) finished (Unix time); read from the state topic, \
         the same on every instance.",
    );
    let mut last: std::collections::BTreeMap<(&str, &str), i64> = std::collections::BTreeMap::new();
    for d in &snap.drills {
        if let (Some(result), Some(at)) = (d.result(), d.finished_at) {
            let e = last.entry((d.mirror.as_str(), result.as_str())).or_insert(0);
            *e = (*e).max(at.as_millis() / 1000);
        }
    }
    for ((mirror, result), at) in last {
        let _ = writeln!(
            out,
            "kmirror_last_drill_timestamp_seconds{{mirror=\"{}\",result=\"{result}\"}} {at}",
            escape_label(mirror)
        );
    }
    header(
        &mut out,
        "kmirror_break_glass_total",
        "counter",
        "Calls an admin ran on this instance without a second person's approval (break-glass), by mirror and action.",
    );
    for (mirror, action, n) in &snap.break_glass {
        let _ = writeln!(
            out,
            "kmirror_break_glass_total{{mirror=\"{}\",action=\"{}\"}} {n}",
            escape_label(mirror),
            escape_label(action)
        );
    }

    http.render(&mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape_label(r#"a"b\c"#), r#"a\"b\\c"#);
        assert_eq!(escape_label("x\ny"), "x\\ny");
        assert_eq!(escape_label("orders.v1"), "orders.v1");
    }

    #[test]
    fn histogram_buckets_are_cumulative() {
        let m = HttpMetrics::default();
        m.observe("GET", "/x", 200, Duration::from_millis(3));
        m.observe("GET", "/x", 200, Duration::from_secs(20));
        let mut out = String::new();
        m.render(&mut out);
        assert!(
            out.contains(
                r#"kmirror_http_request_duration_seconds_bucket{method="GET",route="/x",status="200",le="0.005"} 1"#
            ),
            "{out}"
        );
        assert!(out.contains(r#"le="10"} 1"#), "{out}");
        assert!(out.contains(r#"le="+Inf"} 2"#), "{out}");
        assert!(out.contains(r#"kmirror_http_request_duration_seconds_count{method="GET",route="/x",status="200"} 2"#));
    }

    #[test]
    fn methods_come_from_a_fixed_set_and_the_table_is_capped() {
        assert_eq!(method_label("GET"), "GET");
        assert_eq!(method_label("PATCH"), "PATCH");
        assert_eq!(method_label("get"), "other", "methods are case-sensitive");
        assert_eq!(method_label(&"X".repeat(6_000)), "other");
        assert_eq!(route_label(None), "unmatched");
        let m = HttpMetrics::default();
        for i in 0..300 {
            m.observe(&format!("INVENTED{i}"), "unmatched", 404, Duration::from_millis(1));
        }
        assert_eq!(m.series(), 1);
        let mut out = String::new();
        m.render(&mut out);
        assert!(out.contains(
            r#"kmirror_http_request_duration_seconds_count{method="other",route="unmatched",status="404"} 300"#
        ));
        // Even a caller that passes raw paths cannot grow the table past the cap.
        for i in 0..2 * MAX_HTTP_SERIES {
            m.observe("GET", &format!("/raw/{i}"), 200, Duration::from_millis(1));
        }
        assert_eq!(m.series(), MAX_HTTP_SERIES + 1, "the cap plus the overflow series");
    }

    #[test]
    fn an_empty_snapshot_renders() {
        let out = render(&Snapshot::default(), Timestamp::from_millis(5_000), &HttpMetrics::default(), "0.1.0");
        assert!(out.contains("kmirror_build_info{version=\"0.1.0\"} 1"));
        assert!(out.contains("kmirror_snapshot_age_seconds 5"));
        for zero in [
            "kmirror_instances 0",
            "kmirror_slots 0",
            "kmirror_slots_owned 0",
            "kmirror_slots_unowned 0",
            "kmirror_rebalances_total 0",
        ] {
            assert!(out.contains(&format!("\n{zero}\n")), "{zero}: {out}");
        }
    }

    #[test]
    fn instance_series_come_from_the_cluster_snapshot() {
        use crate::engine::{ClusterSnapshot, InstanceSnapshot};
        let instance = |id: &str, slots: Vec<i32>, this: bool| InstanceSnapshot {
            id: id.to_string(),
            advertised_url: None,
            version: "0.1.0".to_string(),
            slots,
            partitions: 0,
            last_heartbeat: Timestamp::from_millis(1),
            started_at: Timestamp::from_millis(1),
            this,
        };
        let snap = Snapshot {
            cluster: ClusterSnapshot {
                cluster_name: "c".to_string(),
                mode: "group".to_string(),
                this_instance: "b".to_string(),
                slots: 16,
                instances: vec![instance("a", (0..10).collect(), false), instance("b", vec![10, 11, 12], true)],
                rebalances: 7,
            },
            ..Snapshot::default()
        };
        let out = render(&snap, Timestamp::from_millis(5_000), &HttpMetrics::default(), "0.1.0");
        for (name, kind, value) in [
            ("kmirror_instances", "gauge", "2"),
            ("kmirror_slots", "gauge", "16"),
            ("kmirror_slots_owned", "gauge", "3"),
            // Slots 13 to 15: no instance's heartbeat names them.
            ("kmirror_slots_unowned", "gauge", "3"),
            ("kmirror_rebalances_total", "counter", "7"),
        ] {
            assert!(out.contains(&format!("# HELP {name} ")), "{name} HELP");
            assert!(out.contains(&format!("# TYPE {name} {kind}\n{name} {value}\n")), "{name}: {out}");
        }
    }
}
