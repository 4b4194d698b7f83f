//! The partitions page (`templates/pages/partitions.html`): a mirror's partitions, or one
//! topic's with its header.

use std::cmp::Ordering;

use crate::domain::{PartitionState, StateCounts, Timestamp};
use crate::engine::{MirrorSnapshot, PartitionSnapshot, TopicSnapshot};
use crate::format::{self, NONE, url};
use crate::history::History;

use super::actions::{ActionLink, actions_for};
use super::chart::{EtaView, Trends, eta_of, trends};
use super::common::{
    DEFAULT_PER_PAGE, Freshness, Opt, Pager, Params, SortLink, StateCountView, StateView, Viewer, lag_css, mirror_href,
    mixed_text, parse_desc, parse_page, parse_per, parse_state, partitions_href, per_page_options, severity,
    state_counts, state_options, state_view, topic_href,
};

#[derive(Debug, Clone)]
pub struct ErrorView {
    pub code: String,
    pub message: String,
    pub retryable: bool,
    /// What happens next: `next retry in 2 min`, or what the operator must do.
    pub outlook: String,
    /// An automatic retry is coming (the outlook is informational, not a call to act).
    pub retrying: bool,
}

/// What happens next to a FAILED partition: its automatic retry, or an operator's recover.
fn outlook(recoverable: bool, retryable: bool, next_retry_at: Option<Timestamp>, now: Timestamp) -> (String, bool) {
    match (retryable, next_retry_at) {
        (true, Some(at)) => {
            let left = now.millis_until(at).max(0);
            if left < 1000 {
                ("retrying now".to_string(), true)
            } else {
                (format!("next retry in {}", format::duration_ms(left - left % 1000)), true)
            }
        }
        (true, None) => ("automatic retries used up: fix the cause, then Recover".to_string(), false),
        // A recover is refused there (a FOREIGN_WRITE).
        (false, _) if !recoverable => ("needs an operator: fail over, then restart with resync".to_string(), false),
        (false, _) => ("needs an operator: fix the cause, then Recover, or fail over".to_string(), false),
    }
}

#[derive(Debug, Clone)]
pub struct PartitionRow {
    pub topic: String,
    pub topic_href: String,
    pub partition: i32,
    pub state: StateView,
    pub since: String,
    pub since_title: String,
    pub log_start: String,
    pub lso: String,
    pub hwm: String,
    pub mirrored: String,
    pub dest_hwm: String,
    pub lag_records: String,
    pub lag_seconds: String,
    pub lag_css: &'static str,
    pub lme: String,
    pub error: Option<ErrorView>,
    pub retries: String,
    pub retry_count: u32,
    /// A STOPPED partition whose old source received records after the failover: how many.
    pub after_stop: Option<String>,
    /// MIRRORING with its data path closed while it has nothing to copy.
    pub idle: bool,
    /// The slot (state-topic partition) the partition belongs to.
    pub slot: i32,
    /// The instance owning the slot ([`NONE`] while none is known).
    pub owner: String,
    pub owner_known: bool,
    /// The owner is the instance answering this page.
    pub owner_this: bool,
}

fn partition_row(mirror: &str, p: &PartitionSnapshot, this_instance: &str, now: Timestamp) -> PartitionRow {
    PartitionRow {
        topic: p.topic.clone(),
        topic_href: topic_href(mirror, &p.topic),
        partition: p.partition,
        state: state_view(p.state),
        since: {
            let age = p.state_since.millis_until(now).max(0);
            format::duration_ms(age - age % 1000)
        },
        since_title: format!("{} since {}", p.state, format::datetime(p.state_since)),
        log_start: format::opt_int(p.source_log_start_offset),
        lso: format::opt_int(p.source_last_stable_offset),
        hwm: format::opt_int(p.source_high_watermark),
        mirrored: format::opt_int(p.mirrored_source_offset),
        dest_hwm: format::opt_int(p.destination_high_watermark),
        lag_records: format::int(p.lag_records),
        lag_seconds: format::secs(p.lag_seconds),
        lag_css: lag_css(p.lag_records, p.lag_seconds),
        lme: p.last_mirrored_epoch.map_or_else(|| NONE.into(), |e| e.to_string()),
        error: p.error.as_ref().map(|e| {
            let (outlook, retrying) = outlook(e.recoverable, e.retryable, p.next_retry_at, now);
            ErrorView { code: e.code.clone(), message: e.message.clone(), retryable: e.retryable, outlook, retrying }
        }),
        retries: if p.retry_count == 0 { String::new() } else { format!("retry {}", p.retry_count) },
        retry_count: p.retry_count,
        after_stop: p.source_writes_after_stop.filter(|n| *n > 0).map(format::int),
        idle: p.idle,
        slot: p.slot,
        owner: p.owner.clone().unwrap_or_else(|| NONE.into()),
        owner_known: p.owner.is_some(),
        owner_this: !this_instance.is_empty() && p.owner.as_deref() == Some(this_instance),
    }
}

/// One quick filter (worst lag, failed, ...).
#[derive(Debug, Clone)]
pub struct QuickLink {
    pub label: String,
    pub href: String,
    pub active: bool,
    pub css: &'static str,
}

/// The topic the partitions page is about, when it is about one.
#[derive(Debug, Clone)]
pub struct TopicHeader {
    pub name: String,
    pub state: StateView,
    pub mixed: String,
    pub source_topic_id: String,
    pub destination_topic_id: String,
    pub partitions: String,
    pub lag_records: String,
    pub max_lag: String,
    pub lag_css: &'static str,
    pub records_mirrored: String,
    pub bytes_mirrored: String,
    pub counts: Vec<StateCountView>,
    pub actions: Vec<ActionLink>,
    /// Lag and throughput over the last hour.
    pub trends: Trends,
    /// When the topic will have caught up.
    pub eta: EtaView,
}

#[derive(Debug, Clone)]
pub struct PartitionsView {
    pub mirror: String,
    pub mirror_href: String,
    pub topic: Option<TopicHeader>,
    pub rows: Vec<PartitionRow>,
    pub pager: Pager,
    pub columns: Vec<SortLink>,
    pub quick: Vec<QuickLink>,
    pub prefix: String,
    pub state: String,
    pub state_options: Vec<Opt>,
    pub per_options: Vec<Opt>,
    pub sort: String,
    pub dir: String,
    pub per: String,
    pub base_href: String,
    pub live_url: String,
    pub empty_text: String,
    pub fresh: Freshness,
    pub can_operate: bool,
    pub csrf: String,
    /// Some row on this page has an error (otherwise the column is left out).
    pub any_error: bool,
}

fn partition_sort_key(sort: &str) -> &'static str {
    match sort {
        "state" => "state",
        "lag" => "lag",
        "lag_s" => "lag_s",
        "since" => "since",
        "retries" => "retries",
        "slot" => "slot",
        _ => "partition",
    }
}

/// The partitions of a mirror (all topics, filterable by topic prefix) or of one topic.
/// `this_instance` (the snapshot's `cluster.this_instance`) marks the partitions this instance
/// owns.
#[allow(clippy::too_many_arguments)] // the page's inputs, each needed
pub fn partitions(
    m: &MirrorSnapshot,
    history: Option<&History>,
    topic: Option<&TopicSnapshot>,
    p: &Params,
    now: Timestamp,
    taken_at: Timestamp,
    viewer: &Viewer,
    this_instance: &str,
) -> PartitionsView {
    let prefix = if topic.is_some() { String::new() } else { p.get("prefix").to_string() };
    let state = parse_state(p);
    let sort = partition_sort_key(p.get("sort"));
    let desc = parse_desc(p, matches!(sort, "lag" | "lag_s" | "since" | "retries"));
    let per = parse_per(p);
    let base_href = match topic {
        Some(t) => topic_href(&m.name, &t.name),
        None => partitions_href(&m.name),
    };

    let source: Box<dyn Iterator<Item = &PartitionSnapshot>> = match topic {
        Some(t) => Box::new(t.partitions.iter()),
        None => Box::new(m.topics.iter().filter(|t| t.name.starts_with(prefix.as_str())).flat_map(|t| &t.partitions)),
    };
    let mut rows: Vec<&PartitionSnapshot> = source.filter(|x| state.is_none_or(|s| x.state == s)).collect();
    let natural =
        |a: &&PartitionSnapshot, b: &&PartitionSnapshot| a.topic.cmp(&b.topic).then(a.partition.cmp(&b.partition));
    rows.sort_by(|a, b| {
        let o = match sort {
            "state" => severity(a.state).cmp(&severity(b.state)),
            "lag" => a.lag_records.cmp(&b.lag_records),
            "lag_s" => a.lag_seconds.partial_cmp(&b.lag_seconds).unwrap_or(Ordering::Equal),
            // Longest in its state first when descending: since is an instant, so reverse it.
            "since" => b.state_since.cmp(&a.state_since),
            "retries" => a.retry_count.cmp(&b.retry_count),
            "slot" => a.slot.cmp(&b.slot),
            _ => Ordering::Equal,
        };
        let o = if desc { o.reverse() } else { o };
        o.then_with(|| natural(a, b))
    });

    let dir_s = if desc { "desc" } else { "asc" };
    let query = |sort: &str, dir: &str, state: Option<PartitionState>, page: usize| -> Vec<(&'static str, String)> {
        vec![
            ("prefix", prefix.clone()),
            ("state", state.map(|s| s.as_str().to_string()).unwrap_or_default()),
            ("sort", if sort == "partition" { String::new() } else { sort.to_string() }),
            ("dir", dir.to_string()),
            ("per", if per == DEFAULT_PER_PAGE { String::new() } else { per.to_string() }),
            ("page", if page <= 1 { String::new() } else { page.to_string() }),
        ]
    };
    let (pager, range) =
        Pager::new(rows.len(), parse_page(p), per, &|pg| url(&base_href, &query(sort, dir_s, state, pg)));
    let column_defs: [(&'static str, &'static str, &'static str); 7] = [
        ("Partition", "partition", ""),
        ("State", "state", ""),
        ("In state", "since", "num"),
        ("Lag (records)", "lag", "num"),
        ("Lag (time)", "lag_s", "num"),
        ("Retries", "retries", "num"),
        ("Slot", "slot", "num"),
    ];
    let columns = column_defs
        .into_iter()
        .map(|(label, key, css)| {
            let desc_first = matches!(key, "lag" | "lag_s" | "since" | "retries");
            SortLink::new(label, key, css, (sort, desc), desc_first, |k, d| url(&base_href, &query(k, d, state, 1)))
        })
        .collect();

    // Quick filters count over the whole scope (ignoring the current state filter).
    let scope: Vec<&PartitionSnapshot> = match topic {
        Some(t) => t.partitions.iter().collect(),
        None => m.topics.iter().filter(|t| t.name.starts_with(prefix.as_str())).flat_map(|t| &t.partitions).collect(),
    };
    let failed = scope.iter().filter(|x| x.state == PartitionState::Failed).count();
    let lagging = scope.iter().filter(|x| x.lag_records > 0).count();
    let quick = vec![
        QuickLink {
            label: format!("All {}", format::count(scope.len())),
            href: url(&base_href, &query("partition", "asc", None, 1)),
            active: state.is_none() && sort == "partition",
            css: "",
        },
        QuickLink {
            label: format!("Worst lag first ({} lagging)", format::count(lagging)),
            href: url(&base_href, &query("lag", "desc", None, 1)),
            active: state.is_none() && sort == "lag" && desc,
            css: if lagging > 0 { "warn" } else { "" },
        },
        QuickLink {
            label: format!("Failed ({})", format::count(failed)),
            href: url(&base_href, &query("partition", "asc", Some(PartitionState::Failed), 1)),
            active: state == Some(PartitionState::Failed),
            css: if failed > 0 { "bad" } else { "" },
        },
    ];

    let header = topic.map(|t| {
        let c: StateCounts = t.partitions.iter().map(|p| p.state).collect();
        let th = topic_href(&m.name, &t.name);
        TopicHeader {
            name: t.name.clone(),
            state: state_view(t.state),
            mixed: mixed_text(&c),
            source_topic_id: if t.source_topic_id.is_empty() { NONE.into() } else { t.source_topic_id.clone() },
            destination_topic_id: if t.destination_topic_id.is_empty() {
                NONE.into()
            } else {
                t.destination_topic_id.clone()
            },
            partitions: format::count(t.partitions.len()),
            lag_records: format::int(t.lag_records),
            max_lag: format::secs(t.lag_seconds),
            lag_css: lag_css(t.lag_records, t.lag_seconds),
            records_mirrored: format::int(
                i64::try_from(t.partitions.iter().map(|p| p.records_mirrored).sum::<u64>()).unwrap_or(i64::MAX),
            ),
            bytes_mirrored: format::bytes(t.partitions.iter().map(|p| p.bytes_mirrored).sum()),
            counts: state_counts(&c, &|s| url(&th, &[("state", s.as_str().into())])),
            trends: trends(history, (&m.name, Some(&t.name)), (taken_at, t.lag_records), "topic", now),
            eta: eta_of(history, m, Some(&t.name)),
            actions: actions_for(&m.name, &t.name, &t.partitions),
        }
    });
    let live_base = format!("/ui{base_href}");
    let page_rows: Vec<PartitionRow> =
        rows[range].iter().map(|x| partition_row(&m.name, x, this_instance, now)).collect();
    PartitionsView {
        mirror: m.name.clone(),
        mirror_href: mirror_href(&m.name),
        any_error: page_rows.iter().any(|r| r.error.is_some()),
        rows: page_rows,
        live_url: url(&live_base, &query(sort, dir_s, state, pager.page)),
        pager,
        columns,
        quick,
        empty_text: if scope.is_empty() {
            "No partitions here yet.".into()
        } else {
            "No partition matches these filters.".into()
        },
        state_options: state_options(state),
        per_options: per_page_options(per),
        state: state.map(|s| s.as_str().to_string()).unwrap_or_default(),
        sort: sort.to_string(),
        dir: dir_s.to_string(),
        per: per.to_string(),
        prefix,
        topic: header,
        base_href,
        fresh: Freshness::new(taken_at, now),
        can_operate: viewer.can_operate(),
        csrf: viewer.csrf.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_partition_says_what_happens_next() {
        let now = Timestamp::from_millis(1_000_000);
        let later = Timestamp::from_millis(1_000_000 + 125_400);
        assert_eq!(
            outlook(true, true, Some(later), now),
            (format!("next retry in {}", format::duration_ms(125_000)), true)
        );
        assert_eq!(outlook(true, true, Some(now), now).0, "retrying now");
        let (text, retrying) = outlook(true, true, None, now);
        assert!(!retrying && text.contains("used up") && text.contains("Recover"), "{text}");
        let (text, retrying) = outlook(true, false, None, now);
        assert!(!retrying && text.contains("Recover"), "{text}");
        let (text, _) = outlook(false, false, None, now);
        assert!(!text.contains("Recover") && text.contains("fail over"), "{text}");
    }
}
