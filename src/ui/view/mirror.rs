//! The mirror page (`templates/pages/mirror.html`): summary, groups and the topic list.

use std::cmp::Ordering;

use crate::domain::{PartitionState, StateCounts, Timestamp};
use crate::engine::{GroupReadiness, GroupSyncView, MirrorSnapshot, TopicSnapshot};
use crate::format::{self, url};
use crate::history::History;

use super::actions::{ActionLink, actions_for};
use super::chart::{EtaView, Trends, eta_of, trends};
use super::common::{
    DEFAULT_PER_PAGE, Freshness, Opt, Pager, Params, SortLink, StateCountView, StateView, Viewer, When, lag_css,
    mirror_href, mixed_text, parse_desc, parse_page, parse_per, parse_state, partitions_href, per_page_options,
    severity, state_counts, state_options, state_view, topic_href,
};
use super::health::{ClusterIdView, SyncView, cluster_id_view, data_path_css, sync_view};

#[derive(Debug, Clone)]
pub struct TopicRow {
    pub name: String,
    pub href: String,
    pub state: StateView,
    pub mixed: String,
    pub partitions: String,
    pub lag_records: String,
    pub lag_seconds: String,
    pub lag_css: &'static str,
    /// When the topic will have caught up.
    pub eta: EtaView,
    pub failed: usize,
    /// The first partition error, `CODE: message`.
    pub error: Option<String>,
    pub actions: Vec<ActionLink>,
    /// Checkbox id (stable across refreshes so htmx keeps the ticked state).
    pub select_id: String,
    pub selected: bool,
}

#[derive(Debug, Clone)]
pub struct TopicList {
    pub rows: Vec<TopicRow>,
    pub pager: Pager,
    pub columns: Vec<SortLink>,
    pub q: String,
    pub state: String,
    pub state_options: Vec<Opt>,
    pub per_options: Vec<Opt>,
    pub sort: String,
    pub dir: String,
    pub per: String,
    /// The live fragment's URL (same filters).
    pub live_url: String,
    pub empty_text: String,
    pub filtered: bool,
    /// Some row on this page has a problem (otherwise the column is left out).
    pub any_error: bool,
}

/// One consumer group's offset sync, for the failover-readiness table.
#[derive(Debug, Clone)]
pub struct GroupView {
    pub group: String,
    pub css: &'static str,
    pub status: &'static str,
    pub last_success: When,
    pub last_attempt: When,
    pub last_error: Option<String>,
    /// `in sync / committed` partitions.
    pub in_sync: String,
    /// The mirror's topics it consumes, shortened.
    pub topics: String,
}

/// Groups listed on the mirror page (problems first); the rest are counted.
const GROUP_ROWS: usize = 50;

fn group_views(groups: &[GroupSyncView], now: Timestamp) -> (Vec<GroupView>, usize) {
    let mut refs: Vec<&GroupSyncView> = groups.iter().collect();
    // Groups that are not ready first: they are what a failover would move wrongly.
    let rank = |g: &GroupSyncView| match g.readiness() {
        GroupReadiness::NotReady(_) => 0,
        GroupReadiness::Ready => 1,
        GroupReadiness::NothingCommitted => 2,
    };
    // Ranked once per group (a readiness may format its reason), not once per comparison.
    refs.sort_by_cached_key(|g| (rank(g), g.group.as_str()));
    let more = refs.len().saturating_sub(GROUP_ROWS);
    let rows = refs
        .into_iter()
        .take(GROUP_ROWS)
        .map(|g| {
            let (css, status, why) = match g.readiness() {
                GroupReadiness::Ready => ("ok", "ready", None),
                GroupReadiness::NothingCommitted => ("muted", "nothing committed", None),
                GroupReadiness::NotReady(why) if g.last_error.is_some() || g.last_success_at.is_none() => {
                    ("bad", "not ready", g.last_error.clone().or(Some(why)))
                }
                GroupReadiness::NotReady(why) => ("warn", "not ready", Some(why)),
            };
            let topics = if g.topics.len() > 3 {
                format!("{} and {} more", g.topics[..3].join(", "), g.topics.len() - 3)
            } else {
                g.topics.join(", ")
            };
            GroupView {
                group: g.group.clone(),
                css,
                status,
                last_success: When::new(now, g.last_success_at),
                last_attempt: When::new(now, Some(g.last_attempt_at)),
                last_error: why,
                in_sync: format!(
                    "{} / {}",
                    format::int(i64::try_from(g.partitions_in_sync).unwrap_or(i64::MAX)),
                    format::int(i64::try_from(g.partitions_committed).unwrap_or(i64::MAX))
                ),
                topics,
            }
        })
        .collect();
    (rows, more)
}

#[derive(Debug, Clone)]
pub struct MirrorView {
    pub name: String,
    pub href: String,
    pub source: String,
    /// The replication throttle, e.g. `10.0 MiB/s`, when the mirror has one.
    pub throttle: Option<String>,
    pub properties: Vec<(String, String)>,
    pub cluster: ClusterIdView,
    pub data_path: String,
    pub data_path_css: &'static str,
    pub created: When,
    pub sync: Vec<SyncView>,
    /// Consumer groups whose offsets are synced (failover readiness), problems first.
    pub groups: Vec<GroupView>,
    pub groups_more: usize,
    pub counts: Vec<StateCountView>,
    pub topics_total: String,
    pub partitions_total: String,
    pub lag_records: String,
    pub max_lag: String,
    pub lag_css: &'static str,
    pub failed: usize,
    pub failed_text: String,
    pub failed_href: String,
    pub worst_href: String,
    pub partitions_href: String,
    pub list: TopicList,
    pub fresh: Freshness,
    pub can_operate: bool,
    pub can_admin: bool,
    pub csrf: String,
    pub confirm_url: String,
    pub actions_url: String,
    pub delete_url: String,
    pub delete_pattern: String,
    /// Whether every topic is STOPPED (a mirror can only be deleted then).
    pub deletable: bool,
    /// Lag and throughput over the last hour.
    pub trends: Trends,
    /// When the mirror will have caught up.
    pub eta: EtaView,
    /// Failed-over topics whose old source still receives records (split brain), if any.
    pub old_source_writes: Option<OldSourceWrites>,
    /// The topic policy and discovery.
    pub policy: super::PolicyView,
}

/// The split-brain watch on the mirror page: failed-over topics whose old source received
/// records after the failover that no failback explains (`TopicSnapshot::split_brain`), most
/// first.
#[derive(Debug, Clone)]
pub struct OldSourceWrites {
    /// Their total, formatted.
    pub records: String,
    /// The first few topics.
    pub topics: Vec<OldSourceTopic>,
    /// Topics not listed.
    pub more: usize,
}

#[derive(Debug, Clone)]
pub struct OldSourceTopic {
    pub name: String,
    pub href: String,
    pub records: String,
    pub partitions: String,
}

/// How many topics the split-brain note names before "and N more".
const OLD_SOURCE_TOPICS_SHOWN: usize = 5;

fn old_source_writes(m: &MirrorSnapshot) -> Option<OldSourceWrites> {
    let mut topics: Vec<(&TopicSnapshot, crate::engine::SourceWrites)> =
        m.topics.iter().map(|t| (t, t.split_brain())).filter(|(_, w)| w.records > 0).collect();
    if topics.is_empty() {
        return None;
    }
    topics.sort_by(|(a, x), (b, y)| y.records.cmp(&x.records).then_with(|| a.name.cmp(&b.name)));
    let total: i64 = topics.iter().map(|(_, w)| w.records).sum();
    let more = topics.len().saturating_sub(OLD_SOURCE_TOPICS_SHOWN);
    Some(OldSourceWrites {
        records: format::int(total),
        topics: topics
            .iter()
            .take(OLD_SOURCE_TOPICS_SHOWN)
            .map(|(t, w)| OldSourceTopic {
                name: t.name.clone(),
                href: topic_href(&m.name, &t.name),
                records: format::int(w.records),
                partitions: format::count(w.partitions),
            })
            .collect(),
        more,
    })
}

/// The id of a topic's selection checkbox: `sel-` and the topic name with `_` written `__` and
/// `.` written `_d` (one-to-one, and only letters, digits, `-` and `_`). htmx finds a field it
/// keeps across refreshes (`hx-preserve`) with the CSS selector `#<id>`, and a `.` in it (a topic
/// named `orders.v2`) made that a class selector: every refresh of the topics table failed with
/// a script error and the table stopped updating.
pub(crate) fn selection_id(topic: &str) -> String {
    let mut id = String::with_capacity(topic.len() + 8);
    id.push_str("sel-");
    for c in topic.chars() {
        match c {
            '_' => id.push_str("__"),
            '.' => id.push_str("_d"),
            c if c.is_ascii_alphanumeric() || c == '-' => id.push(c),
            // Not in a Kafka topic name; kept one-to-one all the same.
            c => id.push_str(&format!("_u{:x}_", c as u32)),
        }
    }
    id
}

fn topic_sort_key(sort: &str) -> &'static str {
    match sort {
        "state" => "state",
        "lag" => "lag",
        "lag_s" => "lag_s",
        "partitions" => "partitions",
        _ => "name",
    }
}

pub fn mirror(
    m: &MirrorSnapshot,
    history: Option<&History>,
    p: &Params,
    now: Timestamp,
    taken_at: Timestamp,
    viewer: &Viewer,
) -> MirrorView {
    let counts: StateCounts = m.topics.iter().flat_map(|t| &t.partitions).map(|p| p.state).collect();
    let lag: i64 = m.topics.iter().map(|t| t.lag_records).sum();
    let max_lag = m.topics.iter().map(|t| t.lag_seconds).fold(0.0, f64::max);
    let base = partitions_href(&m.name);
    let href = mirror_href(&m.name);
    let sync: Vec<SyncView> = m.sync.iter().map(|s| sync_view(s, now)).collect();
    let mut properties: Vec<(String, String)> =
        crate::domain::secrets::redact(&m.source_properties).into_iter().collect();
    properties.sort();
    let (groups, groups_more) = group_views(&m.groups, now);
    MirrorView {
        groups,
        groups_more,
        source: m.source_bootstrap_servers.clone(),
        throttle: m.replication_throttle_bytes_per_sec.map(|r| format!("{}/s", format::bytes(r))),
        properties,
        cluster: cluster_id_view(m, now),
        data_path: m.data_path.to_string(),
        data_path_css: data_path_css(&m.data_path),
        created: When::new(now, Some(m.created_at)),
        sync,
        counts: state_counts(&counts, &|s| url(&base, &[("state", s.as_str().into())])),
        topics_total: format::count(m.topics.len()),
        partitions_total: format::count(counts.total()),
        lag_records: format::int(lag),
        max_lag: format::secs(max_lag),
        lag_css: lag_css(lag, max_lag),
        failed: counts.count(PartitionState::Failed),
        failed_text: format::count(counts.count(PartitionState::Failed)),
        failed_href: url(&base, &[("state", "FAILED".into())]),
        worst_href: url(&base, &[("sort", "lag".into()), ("dir", "desc".into())]),
        partitions_href: base.clone(),
        list: topic_list(m, history, p, &href),
        trends: trends(history, (&m.name, None), (taken_at, lag), "mirror", now),
        eta: eta_of(history, m, None),
        old_source_writes: old_source_writes(m),
        policy: super::policy(m, &href, now),
        fresh: Freshness::new(taken_at, now),
        can_operate: viewer.can_operate(),
        can_admin: viewer.can_admin(),
        csrf: viewer.csrf.clone(),
        confirm_url: format!("{href}/confirm"),
        actions_url: format!("{href}/actions"),
        delete_url: format!("{href}/delete"),
        delete_pattern: format::exact_pattern(&m.name),
        deletable: m.topics.iter().all(|t| t.state == PartitionState::Stopped),
        name: m.name.clone(),
        href,
    }
}

fn topic_list(m: &MirrorSnapshot, history: Option<&History>, p: &Params, href: &str) -> TopicList {
    let q = p.get("q").to_string();
    let state = parse_state(p);
    let sort = topic_sort_key(p.get("sort"));
    let desc = parse_desc(p, matches!(sort, "lag" | "lag_s" | "partitions"));
    let per = parse_per(p);
    let selected = p.all("topic");

    let mut rows: Vec<(&TopicSnapshot, StateCounts)> = m
        .topics
        .iter()
        .filter(|t| q.is_empty() || t.name.starts_with(q.as_str()))
        .filter(|t| state.is_none_or(|s| t.state == s))
        .map(|t| (t, t.partitions.iter().map(|p| p.state).collect()))
        .collect();
    rows.sort_by(|(a, _), (b, _)| {
        let o = match sort {
            "state" => severity(a.state).cmp(&severity(b.state)),
            "lag" => a.lag_records.cmp(&b.lag_records),
            "lag_s" => a.lag_seconds.partial_cmp(&b.lag_seconds).unwrap_or(Ordering::Equal),
            "partitions" => a.partitions.len().cmp(&b.partitions.len()),
            _ => Ordering::Equal,
        };
        let o = if desc { o.reverse() } else { o };
        o.then_with(|| a.name.cmp(&b.name))
    });

    let dir_s = if desc { "desc" } else { "asc" };
    let query = |sort: &str, dir: &str, page: usize| -> Vec<(&'static str, String)> {
        vec![
            ("q", q.clone()),
            ("state", state.map(|s| s.as_str().to_string()).unwrap_or_default()),
            ("sort", if sort == "name" { String::new() } else { sort.to_string() }),
            ("dir", dir.to_string()),
            ("per", if per == DEFAULT_PER_PAGE { String::new() } else { per.to_string() }),
            ("page", if page <= 1 { String::new() } else { page.to_string() }),
        ]
    };
    let (pager, range) = Pager::new(rows.len(), parse_page(p), per, &|pg| url(href, &query(sort, dir_s, pg)));
    let columns = [("Topic", "name", ""), ("State", "state", ""), ("Partitions", "partitions", "num opt")]
        .into_iter()
        .chain([("Lag (records)", "lag", "num"), ("Lag (time)", "lag_s", "num")])
        .map(|(label, key, css)| {
            // Lag and size columns start with the worst first.
            let desc_first = matches!(key, "lag" | "lag_s" | "partitions");
            SortLink::new(label, key, css, (sort, desc), desc_first, |k, d| url(href, &query(k, d, 1)))
        })
        .collect();
    let filtered = !q.is_empty() || state.is_some();
    let page_rows = rows[range]
        .iter()
        .map(|(t, c)| {
            let first_error = t.partitions.iter().find_map(|p| {
                p.error.as_ref().map(|e| format!("partition {}: {}: {}", p.partition, e.code, e.message))
            });
            TopicRow {
                name: t.name.clone(),
                href: topic_href(&m.name, &t.name),
                state: state_view(t.state),
                mixed: mixed_text(c),
                partitions: format::count(t.partitions.len()),
                lag_records: format::int(t.lag_records),
                lag_seconds: format::secs(t.lag_seconds),
                lag_css: lag_css(t.lag_records, t.lag_seconds),
                eta: eta_of(history, m, Some(&t.name)),
                failed: c.count(PartitionState::Failed),
                error: first_error,
                actions: actions_for(&m.name, &t.name, &t.partitions),
                select_id: selection_id(&t.name),
                selected: selected.iter().any(|s| s == &t.name),
            }
        })
        .collect();
    let page_rows: Vec<TopicRow> = page_rows;
    TopicList {
        any_error: page_rows.iter().any(|r| r.error.is_some()),
        rows: page_rows,
        columns,
        live_url: url(&format!("/ui{href}"), &query(sort, dir_s, pager.page)),
        pager,
        empty_text: if m.topics.is_empty() {
            "This mirror has no topics yet.".into()
        } else {
            "No topic matches these filters.".into()
        },
        filtered,
        state_options: state_options(state),
        per_options: per_page_options(per),
        state: state.map(|s| s.as_str().to_string()).unwrap_or_default(),
        sort: sort.to_string(),
        dir: dir_s.to_string(),
        per: per.to_string(),
        q,
    }
}

#[cfg(test)]
mod tests {
    use super::selection_id;

    #[test]
    fn selection_ids_are_css_safe_and_one_to_one() {
        let names = ["orders", "orders.v2", "orders_v2", "orders__v2", "orders_dv2", "a.b_c-d", "_d", ".", "__"];
        let ids: Vec<String> = names.iter().map(|n| selection_id(n)).collect();
        assert_eq!(ids[1], "sel-orders_dv2");
        for id in &ids {
            assert!(id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'), "{id}");
        }
        let unique: std::collections::BTreeSet<&String> = ids.iter().collect();
        assert_eq!(unique.len(), names.len(), "two topics got the same id: {ids:?}");
    }
}
