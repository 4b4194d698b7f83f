//! View models: display-ready data built from the engine [`Snapshot`] and the operations log.
//!
//! Pure: no I/O, no clock (`now` is an argument), no axum. Templates only print these fields,
//! so every number, duration and URL is formatted here, once, and tested without a browser.
//! Filtering, sorting and paging happen here too, on the snapshot in memory: a page of 100 rows
//! out of 10,000 partitions costs one pass and one sort of references.

use std::cmp::Ordering;

use crate::auth::{Identity, Role};
use crate::domain::{PartitionState, StateCounts, Timestamp};
use crate::engine::{
    ClusterIdStatus, GroupSyncView, MirrorSnapshot, OperationView, PartitionSnapshot, Snapshot, SyncKind,
    SyncStatus, TopicOutcome, TopicSnapshot,
};

use super::format::{self, NONE, encode_component, url};

/// A snapshot older than this is shown as stale.
pub const STALE_AFTER_MS: i64 = 5_000;
/// Rows per page unless the visitor asks otherwise.
pub const DEFAULT_PER_PAGE: usize = 100;
const PER_PAGE_CHOICES: [usize; 4] = [25, 100, 500, 1000];
/// Partitions listed per topic in a confirmation dialog (worst lag first); the rest are summed.
const IMPACT_ROWS: usize = 50;

// ----- who is looking -------------------------------------------------------------------------

/// The signed-in visitor as the templates need it.
#[derive(Debug, Clone)]
pub struct Viewer {
    pub name: String,
    pub role: Role,
    /// The session's CSRF token, embedded in every form.
    pub csrf: String,
    /// Authentication is off (`--no-auth`): shown as a warning banner.
    pub anonymous: bool,
}

impl Viewer {
    pub fn new(identity: &Identity, csrf: impl Into<String>, anonymous: bool) -> Viewer {
        Viewer { name: identity.name.clone(), role: identity.role, csrf: csrf.into(), anonymous }
    }

    pub fn can_operate(&self) -> bool {
        self.role.allows(Role::Operator)
    }

    pub fn can_admin(&self) -> bool {
        self.role.allows(Role::Admin)
    }

    pub fn role_label(&self) -> &'static str {
        self.role.as_str()
    }
}

// ----- request parameters ---------------------------------------------------------------------

/// Decoded query-string or form pairs, in order, keys repeatable (`topic=a&topic=b`).
#[derive(Debug, Clone, Default)]
pub struct Params(pub Vec<(String, String)>);

impl Params {
    /// The first value of `key`, trimmed; empty when absent.
    pub fn get(&self, key: &str) -> &str {
        self.0.iter().find(|(k, _)| k == key).map_or("", |(_, v)| v.trim())
    }

    /// Every non-empty value of `key`, in order, without duplicates.
    pub fn all(&self, key: &str) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for (k, v) in &self.0 {
            let v = v.trim();
            if k == key && !v.is_empty() && !out.iter().any(|o| o == v) {
                out.push(v.to_string());
            }
        }
        out
    }
}

// ----- small shared pieces --------------------------------------------------------------------

/// A state as a coloured badge. The same eight classes are used on every page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateView {
    pub label: &'static str,
    pub css: &'static str,
    /// PREPARING, PAUSING, STOPPING: drawn with a pulsing dot.
    pub transient: bool,
}

pub fn state_view(s: PartitionState) -> StateView {
    let css = match s {
        PartitionState::Unknown => "st-unknown",
        PartitionState::Preparing => "st-preparing",
        PartitionState::Mirroring => "st-mirroring",
        PartitionState::Pausing => "st-pausing",
        PartitionState::Paused => "st-paused",
        PartitionState::Stopping => "st-stopping",
        PartitionState::Stopped => "st-stopped",
        PartitionState::Failed => "st-failed",
    };
    StateView { label: s.as_str(), css, transient: s.is_transient() }
}

/// What a state means, for tooltips and the legend.
pub fn state_help(s: PartitionState) -> &'static str {
    match s {
        PartitionState::Unknown => "No state recorded yet, or the state store is still loading.",
        PartitionState::Preparing => "Checking identities and the destination topic, computing the start position.",
        PartitionState::Mirroring => "Records flow from the source in transactions.",
        PartitionState::Pausing => "Finishing the open transaction before pausing.",
        PartitionState::Paused => "Not fetching; the topic stays a read-only mirror.",
        PartitionState::Stopping => "Failing over: aborting the open transaction and recording the stop point.",
        PartitionState::Stopped => "Failed over: an ordinary writable topic on the destination.",
        PartitionState::Failed => "Stopped by an error; see the partition's error and retry count.",
    }
}

/// Severity for sorting "state" ascending: problems first, healthy last.
fn severity(s: PartitionState) -> u8 {
    match s {
        PartitionState::Failed => 0,
        PartitionState::Unknown => 1,
        PartitionState::Stopping => 2,
        PartitionState::Pausing => 3,
        PartitionState::Preparing => 4,
        PartitionState::Paused => 5,
        PartitionState::Stopped => 6,
        PartitionState::Mirroring => 7,
    }
}

/// "updated N s ago", stale-coloured when old. The page's script keeps ticking it from
/// `taken_at_ms`/`server_now_ms`, so it also turns stale when polling stops answering.
#[derive(Debug, Clone)]
pub struct Freshness {
    pub taken_at_ms: i64,
    pub server_now_ms: i64,
    pub text: String,
    pub title: String,
    pub stale: bool,
    pub stale_after_ms: i64,
}

impl Freshness {
    pub fn new(taken_at: Timestamp, now: Timestamp) -> Freshness {
        let never = taken_at.as_millis() <= 0;
        let age = taken_at.millis_until(now);
        Freshness {
            taken_at_ms: taken_at.as_millis(),
            server_now_ms: now.as_millis(),
            text: if never { "no data yet".into() } else { format!("updated {}", format::ago(now, taken_at)) },
            title: if never {
                "The engine has not published a snapshot yet.".into()
            } else {
                format!("Engine snapshot taken {}", format::datetime(taken_at))
            },
            stale: never || age > STALE_AFTER_MS,
            stale_after_ms: STALE_AFTER_MS,
        }
    }
}

/// A relative time with its absolute form for the tooltip.
#[derive(Debug, Clone)]
pub struct When {
    pub text: String,
    pub title: String,
}

impl When {
    fn new(now: Timestamp, t: Option<Timestamp>) -> When {
        match t {
            Some(t) if t.as_millis() > 0 => When { text: format::ago(now, t), title: format::datetime(t) },
            _ => When { text: "never".into(), title: String::new() },
        }
    }
}

/// A count of partitions in one state, for the stacked bar and the legend chips.
#[derive(Debug, Clone)]
pub struct StateCountView {
    pub state: StateView,
    pub help: &'static str,
    pub count: String,
    /// Offset and width in the stacked bar, percent with two decimals (`12.50`).
    pub x: String,
    pub pct: String,
    /// Where the chip links to (the partitions in that state).
    pub href: String,
}

fn state_counts(counts: &StateCounts, href: &dyn Fn(PartitionState) -> String) -> Vec<StateCountView> {
    let total = counts.total().max(1) as f64;
    let mut x = 0.0;
    PartitionState::ALL
        .into_iter()
        .filter(|s| counts.count(*s) > 0)
        .map(|s| {
            let w = counts.count(s) as f64 * 100.0 / total;
            let v = StateCountView {
                state: state_view(s),
                help: state_help(s),
                count: format::count(counts.count(s)),
                x: format!("{x:.2}"),
                pct: format!("{w:.2}"),
                href: href(s),
            };
            x += w;
            v
        })
        .collect()
}

/// "9 MIRRORING · 3 PAUSED" when a topic's partitions disagree, empty otherwise.
fn mixed_text(counts: &StateCounts) -> String {
    if !counts.is_mixed() {
        return String::new();
    }
    PartitionState::ALL
        .into_iter()
        .filter(|s| counts.count(*s) > 0)
        .map(|s| format!("{} {}", counts.count(s), s.as_str()))
        .collect::<Vec<_>>()
        .join(" · ")
}

/// Lag colour: none, some, a lot (by seconds behind).
fn lag_css(records: i64, seconds: f64) -> &'static str {
    if records <= 0 {
        "lag-zero"
    } else if seconds >= 300.0 {
        "lag-bad"
    } else if seconds >= 30.0 {
        "lag-warn"
    } else {
        "lag-some"
    }
}

pub fn mirror_href(m: &str) -> String {
    format!("/mirrors/{}", encode_component(m))
}

pub fn topic_href(m: &str, t: &str) -> String {
    format!("/mirrors/{}/topics/{}", encode_component(m), encode_component(t))
}

pub fn partitions_href(m: &str) -> String {
    format!("/mirrors/{}/partitions", encode_component(m))
}

fn operation_href(id: &str) -> String {
    format!("/operations/{}", encode_component(id))
}

/// A select option.
#[derive(Debug, Clone)]
pub struct Opt {
    pub value: String,
    pub label: String,
    pub selected: bool,
}

fn state_options(selected: Option<PartitionState>) -> Vec<Opt> {
    let mut v = vec![Opt { value: String::new(), label: "any state".into(), selected: selected.is_none() }];
    v.extend(PartitionState::ALL.into_iter().map(|s| Opt {
        value: s.as_str().into(),
        label: s.as_str().into(),
        selected: selected == Some(s),
    }));
    v
}

fn per_page_options(per: usize) -> Vec<Opt> {
    PER_PAGE_CHOICES
        .into_iter()
        .map(|n| Opt { value: n.to_string(), label: format!("{n} per page"), selected: n == per })
        .collect()
}

/// A sortable column header.
#[derive(Debug, Clone)]
pub struct SortLink {
    pub label: &'static str,
    pub href: String,
    /// `ascending`, `descending` or `none` (for `aria-sort`).
    pub aria: &'static str,
    pub arrow: &'static str,
    /// `num` for right-aligned numbers; `opt` for columns dropped on narrow screens.
    pub css: &'static str,
}

/// Page navigation.
#[derive(Debug, Clone)]
pub struct Pager {
    pub page: usize,
    pub pages: usize,
    pub total: String,
    pub total_n: usize,
    /// "101–200 of 10,000".
    pub range: String,
    pub first: Option<String>,
    pub prev: Option<String>,
    pub next: Option<String>,
    pub last: Option<String>,
}

impl Pager {
    fn new(total: usize, page: usize, per: usize, href: &dyn Fn(usize) -> String) -> (Pager, std::ops::Range<usize>) {
        let pages = total.div_ceil(per).max(1);
        let page = page.clamp(1, pages);
        let start = (page - 1) * per;
        let end = (start + per).min(total);
        let range = if total == 0 {
            "none".into()
        } else {
            format!("{}–{} of {}", format::count(start + 1), format::count(end), format::count(total))
        };
        let pager = Pager {
            page,
            pages,
            total: format::count(total),
            total_n: total,
            range,
            first: (page > 2).then(|| href(1)),
            prev: (page > 1).then(|| href(page - 1)),
            next: (page < pages).then(|| href(page + 1)),
            last: (page + 1 < pages).then(|| href(pages)),
        };
        (pager, start..end)
    }
}

/// Sort direction from `dir=asc|desc`.
fn parse_desc(p: &Params, default_desc: bool) -> bool {
    match p.get("dir") {
        "asc" => false,
        "desc" => true,
        _ => default_desc,
    }
}

fn parse_page(p: &Params) -> usize {
    p.get("page").parse::<usize>().unwrap_or(1).max(1)
}

fn parse_per(p: &Params) -> usize {
    p.get("per").parse::<usize>().ok().filter(|n| PER_PAGE_CHOICES.contains(n)).unwrap_or(DEFAULT_PER_PAGE)
}

fn parse_state(p: &Params) -> Option<PartitionState> {
    p.get("state").parse().ok()
}

// ----- cluster ID and sync health -------------------------------------------------------------

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

fn cluster_id_view(m: &MirrorSnapshot, now: Timestamp) -> ClusterIdView {
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

fn sync_view(s: &SyncStatus, now: Timestamp) -> SyncView {
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
fn worst_css<'a>(it: impl IntoIterator<Item = &'a str>) -> &'static str {
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

fn data_path_css(s: &str) -> &'static str {
    if s.starts_with("running") {
        "ok"
    } else if s.starts_with("fenced") || s.starts_with("failed") || s.starts_with("halted") {
        "bad"
    } else if s.is_empty() || s.starts_with("idle") || s.starts_with("stopped") {
        "muted"
    } else {
        "warn"
    }
}

// ----- overview -------------------------------------------------------------------------------

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
}

fn mirror_card(m: &MirrorSnapshot, now: Timestamp) -> MirrorCard {
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
        data_path: if m.data_path.is_empty() { NONE.into() } else { m.data_path.clone() },
        data_path_css: dp_css,
        health: if health == "muted" { "ok" } else { health },
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

pub fn overview(snap: &Snapshot, ops: &[OperationView], now: Timestamp, viewer: &Viewer) -> OverviewView {
    let all: StateCounts =
        snap.mirrors.iter().flat_map(|m| &m.topics).flat_map(|t| &t.partitions).map(|p| p.state).collect();
    let lag: i64 = snap.mirrors.iter().flat_map(|m| &m.topics).map(|t| t.lag_records).sum();
    let max_lag = snap.mirrors.iter().flat_map(|m| &m.topics).map(|t| t.lag_seconds).fold(0.0, f64::max);
    let mut mirrors: Vec<MirrorCard> = snap.mirrors.iter().map(|m| mirror_card(m, now)).collect();
    mirrors.sort_by(|a, b| a.name.cmp(&b.name));
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

// ----- mirror page ----------------------------------------------------------------------------

/// A lifecycle action the UI offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UiOp {
    Pause,
    Resume,
    Failover,
    /// Start a STOPPED topic again (same direction).
    Restart,
    /// Start new topics.
    Start,
}

impl UiOp {
    pub fn parse(s: &str) -> Option<UiOp> {
        Some(match s {
            "pause" => UiOp::Pause,
            "resume" => UiOp::Resume,
            "failover" | "stop" => UiOp::Failover,
            "restart" => UiOp::Restart,
            "start" => UiOp::Start,
            _ => return None,
        })
    }

    pub fn value(self) -> &'static str {
        match self {
            UiOp::Pause => "pause",
            UiOp::Resume => "resume",
            UiOp::Failover => "failover",
            UiOp::Restart => "restart",
            UiOp::Start => "start",
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            UiOp::Pause => "Pause",
            UiOp::Resume => "Resume",
            UiOp::Failover => "Fail over",
            UiOp::Restart => "Restart",
            UiOp::Start => "Start",
        }
    }

    /// The state its partitions should reach.
    pub fn target(self) -> PartitionState {
        match self {
            UiOp::Pause => PartitionState::Paused,
            UiOp::Failover => PartitionState::Stopped,
            UiOp::Resume | UiOp::Restart | UiOp::Start => PartitionState::Mirroring,
        }
    }

    /// Whether it applies to a topic whose partitions are counted in `c`.
    fn offered(self, c: &StateCounts) -> bool {
        let any = |states: &[PartitionState]| states.iter().any(|s| c.count(*s) > 0);
        use PartitionState::*;
        match self {
            UiOp::Pause => any(&[Mirroring, Preparing]),
            UiOp::Resume => any(&[Paused, Pausing]),
            UiOp::Failover => any(&[Unknown, Preparing, Mirroring, Pausing, Paused, Failed]),
            UiOp::Restart => any(&[Stopped]),
            UiOp::Start => false,
        }
    }
}

/// A per-row action button (a link to the confirmation, which htmx opens as a dialog).
#[derive(Debug, Clone)]
pub struct ActionLink {
    pub op: &'static str,
    pub label: &'static str,
    pub href: String,
    pub danger: bool,
}

fn confirm_href(mirror: &str, op: UiOp, topics: &[&str]) -> String {
    let mut pairs = vec![("op", op.value().to_string())];
    pairs.extend(topics.iter().map(|t| ("topic", t.to_string())));
    url(&format!("/mirrors/{}/confirm", encode_component(mirror)), &pairs)
}

fn actions_for(mirror: &str, topic: &str, c: &StateCounts) -> Vec<ActionLink> {
    [UiOp::Pause, UiOp::Resume, UiOp::Restart, UiOp::Failover]
        .into_iter()
        .filter(|op| op.offered(c))
        .map(|op| ActionLink {
            op: op.value(),
            label: op.label(),
            href: confirm_href(mirror, op, &[topic]),
            danger: op == UiOp::Failover,
        })
        .collect()
}

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
    pub synced: String,
}

/// Groups listed on the mirror page (problems first); the rest are counted.
const GROUP_ROWS: usize = 50;

fn group_views(groups: &[GroupSyncView], now: Timestamp) -> (Vec<GroupView>, usize) {
    let mut refs: Vec<&GroupSyncView> = groups.iter().collect();
    refs.sort_by(|a, b| b.last_error.is_some().cmp(&a.last_error.is_some()).then_with(|| a.group.cmp(&b.group)));
    let more = refs.len().saturating_sub(GROUP_ROWS);
    let rows = refs
        .into_iter()
        .take(GROUP_ROWS)
        .map(|g| {
            let (css, status) = match (&g.last_error, g.last_success_at) {
                (Some(_), _) => ("bad", "failing"),
                (None, Some(_)) => ("ok", "in sync"),
                (None, None) => ("muted", "not synced yet"),
            };
            GroupView {
                group: g.group.clone(),
                css,
                status,
                last_success: When::new(now, g.last_success_at),
                last_attempt: When::new(now, Some(g.last_attempt_at)),
                last_error: g.last_error.clone(),
                synced: format::int(i64::try_from(g.partitions_synced).unwrap_or(i64::MAX)),
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

pub fn mirror(m: &MirrorSnapshot, p: &Params, now: Timestamp, taken_at: Timestamp, viewer: &Viewer) -> MirrorView {
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
        properties,
        cluster: cluster_id_view(m, now),
        data_path: if m.data_path.is_empty() { NONE.into() } else { m.data_path.clone() },
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
        list: topic_list(m, p, &href),
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

fn topic_list(m: &MirrorSnapshot, p: &Params, href: &str) -> TopicList {
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
            let active = key == sort;
            // Clicking the active column flips it; a new column starts in its natural direction.
            let next_desc = if active { !desc } else { matches!(key, "lag" | "lag_s" | "partitions") };
            SortLink {
                label,
                href: url(href, &query(key, if next_desc { "desc" } else { "asc" }, 1)),
                aria: if !active {
                    "none"
                } else if desc {
                    "descending"
                } else {
                    "ascending"
                },
                arrow: if !active {
                    ""
                } else if desc {
                    "↓"
                } else {
                    "↑"
                },
                css,
            }
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
                failed: c.count(PartitionState::Failed),
                error: first_error,
                actions: actions_for(&m.name, &t.name, c),
                select_id: format!("sel-{}", t.name),
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

// ----- partitions -----------------------------------------------------------------------------

#[derive(Debug, Clone)]
pub struct ErrorView {
    pub code: String,
    pub message: String,
    pub retryable: bool,
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
}

fn partition_row(mirror: &str, p: &PartitionSnapshot, now: Timestamp) -> PartitionRow {
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
        error: p.error.as_ref().map(|e| ErrorView {
            code: e.code.clone(),
            message: e.message.clone(),
            retryable: e.retryable,
        }),
        retries: if p.retry_count == 0 { String::new() } else { format!("retry {}", p.retry_count) },
        retry_count: p.retry_count,
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
        _ => "partition",
    }
}

/// The partitions of a mirror (all topics, filterable by topic prefix) or of one topic.
pub fn partitions(
    m: &MirrorSnapshot,
    topic: Option<&TopicSnapshot>,
    p: &Params,
    now: Timestamp,
    taken_at: Timestamp,
    viewer: &Viewer,
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
    let column_defs: [(&'static str, &'static str, &'static str); 6] = [
        ("Partition", "partition", ""),
        ("State", "state", ""),
        ("In state", "since", "num"),
        ("Lag (records)", "lag", "num"),
        ("Lag (time)", "lag_s", "num"),
        ("Retries", "retries", "num"),
    ];
    let columns = column_defs
        .into_iter()
        .map(|(label, key, css)| {
            let active = key == sort;
            let next_desc = if active { !desc } else { matches!(key, "lag" | "lag_s" | "since" | "retries") };
            SortLink {
                label,
                href: url(&base_href, &query(key, if next_desc { "desc" } else { "asc" }, state, 1)),
                aria: if !active {
                    "none"
                } else if desc {
                    "descending"
                } else {
                    "ascending"
                },
                arrow: if !active {
                    ""
                } else if desc {
                    "↓"
                } else {
                    "↑"
                },
                css,
            }
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
            actions: actions_for(&m.name, &t.name, &c),
        }
    });
    let live_base = format!("/ui{base_href}");
    let page_rows: Vec<PartitionRow> = rows[range].iter().map(|x| partition_row(&m.name, x, now)).collect();
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

// ----- confirmation ---------------------------------------------------------------------------

#[derive(Debug, Clone)]
pub struct ImpactRow {
    pub partition: i32,
    pub state: StateView,
    pub hwm: String,
    pub lso: String,
    pub mirrored: String,
    pub lag_records: String,
    pub lag_seconds: String,
    pub dest_hwm: String,
    pub stop_offset: String,
    pub local_writes: String,
    /// Something is lost or refused for this partition.
    pub warn: bool,
}

#[derive(Debug, Clone)]
pub struct ConfirmTopic {
    pub name: String,
    pub href: String,
    pub state: StateView,
    pub mixed: String,
    pub partitions: String,
    pub rows: Vec<ImpactRow>,
    pub more: usize,
    pub more_text: String,
    pub lag_records: String,
    pub lag_seconds: String,
    pub local_writes: String,
    pub local_writes_n: i64,
}

#[derive(Debug, Clone)]
pub struct ConfirmView {
    pub mirror: String,
    pub mirror_href: String,
    pub op: &'static str,
    pub title: String,
    pub button: String,
    pub danger: bool,
    pub explanation: &'static str,
    pub topics: Vec<ConfirmTopic>,
    /// Names that are not topics of this mirror (shown, not submitted).
    pub missing: Vec<String>,
    /// What the operator must type (failover).
    pub confirm_word: Option<String>,
    pub confirm_pattern: String,
    pub total_lag: String,
    pub total_lag_n: i64,
    pub total_lag_seconds: String,
    pub diverged: usize,
    pub show_truncation: bool,
    pub show_impact: bool,
    pub csrf: String,
    pub actions_url: String,
    pub error: Option<String>,
}

fn impact_row(p: &PartitionSnapshot, op: UiOp) -> ImpactRow {
    let local = match (p.destination_high_watermark, p.destination_stop_offset) {
        (Some(h), Some(s)) if p.state == PartitionState::Stopped => (h - s).max(0),
        _ => 0,
    };
    ImpactRow {
        partition: p.partition,
        state: state_view(p.state),
        hwm: format::opt_int(p.source_high_watermark),
        lso: format::opt_int(p.source_last_stable_offset),
        mirrored: format::opt_int(p.mirrored_source_offset),
        lag_records: format::int(p.lag_records),
        lag_seconds: format::secs(p.lag_seconds),
        dest_hwm: format::opt_int(p.destination_high_watermark),
        stop_offset: format::opt_int(p.destination_stop_offset),
        local_writes: format::int(local),
        warn: match op {
            UiOp::Failover => p.lag_records > 0 && p.state != PartitionState::Stopped,
            UiOp::Restart => local > 0,
            _ => false,
        },
    }
}

/// The confirmation for `op` on `topics` of mirror `m`, with the impact per partition.
pub fn confirm(m: &MirrorSnapshot, op: UiOp, topics: &[String], viewer: &Viewer) -> ConfirmView {
    let mut found = Vec::new();
    let mut missing = Vec::new();
    for name in topics {
        match m.topic(name) {
            Some(t) => found.push(t),
            None => missing.push(name.clone()),
        }
    }
    let mut total_lag = 0i64;
    let mut total_secs = 0f64;
    let mut diverged = 0usize;
    let confirm_topics: Vec<ConfirmTopic> = found
        .iter()
        .map(|t| {
            let c: StateCounts = t.partitions.iter().map(|p| p.state).collect();
            let mut parts: Vec<&PartitionSnapshot> = t.partitions.iter().collect();
            // Worst first: what the operator most needs to see is at the top.
            parts.sort_by(|a, b| b.lag_records.cmp(&a.lag_records).then(a.partition.cmp(&b.partition)));
            let rows: Vec<ImpactRow> = parts.iter().map(|p| impact_row(p, op)).collect();
            let lag: i64 =
                t.partitions.iter().filter(|p| p.state != PartitionState::Stopped).map(|p| p.lag_records).sum();
            let secs = t.partitions.iter().map(|p| p.lag_seconds).fold(0.0, f64::max);
            let local: i64 = t
                .partitions
                .iter()
                .filter(|p| p.state == PartitionState::Stopped)
                .filter_map(|p| Some((p.destination_high_watermark? - p.destination_stop_offset?).max(0)))
                .sum();
            diverged += rows.iter().filter(|r| r.warn && op == UiOp::Restart).count();
            total_lag += lag;
            total_secs = total_secs.max(secs);
            let more = rows.len().saturating_sub(IMPACT_ROWS);
            ConfirmTopic {
                name: t.name.clone(),
                href: topic_href(&m.name, &t.name),
                state: state_view(t.state),
                mixed: mixed_text(&c),
                partitions: format::count(t.partitions.len()),
                rows: rows.into_iter().take(IMPACT_ROWS).collect(),
                more,
                more_text: if more == 0 {
                    String::new()
                } else {
                    format!("{} more partitions with less lag are not listed; the totals include them.", more)
                },
                lag_records: format::int(lag),
                lag_seconds: format::secs(secs),
                local_writes: format::int(local),
                local_writes_n: local,
            }
        })
        .collect();
    let (title, button, explanation) = match op {
        UiOp::Pause => (
            "Pause mirroring",
            "Pause",
            "Fetching stops after the open transaction commits. The topics stay read-only mirrors and \
             metadata sync continues. Resume continues exactly where mirroring paused.",
        ),
        UiOp::Resume => (
            "Resume mirroring",
            "Resume",
            "Mirroring continues from the last committed position; nothing is skipped or copied twice.",
        ),
        UiOp::Failover => (
            "Fail over",
            "Fail over",
            "The topics stop mirroring and become ordinary writable topics on the destination. \
             Records the source has that are not mirrored yet (the lag below) will not be copied. \
             The open transaction is aborted and the stop point is recorded, so the topics can be \
             restarted later.",
        ),
        UiOp::Restart => (
            "Restart mirroring",
            "Restart",
            "Mirroring starts again in the same direction. Without truncation, a partition whose \
             destination has local writes after the failover is refused (DESTINATION_DIVERGED). \
             Resync deletes the destination records and copies the source again from its log start.",
        ),
        UiOp::Start => ("Start mirroring", "Start", "Start mirroring these source topics."),
    };
    let count = confirm_topics.len();
    let title =
        if count == 1 { format!("{title}: {}", confirm_topics[0].name) } else { format!("{title}: {count} topics") };
    let button = if count == 1 { button.to_string() } else { format!("{button} {count} topics") };
    let confirm_word = (op == UiOp::Failover && count > 0)
        .then(|| if count == 1 { confirm_topics[0].name.clone() } else { m.name.clone() });
    ConfirmView {
        mirror: m.name.clone(),
        mirror_href: mirror_href(&m.name),
        op: op.value(),
        title,
        button,
        danger: op == UiOp::Failover,
        explanation,
        confirm_pattern: confirm_word.as_deref().map(format::exact_pattern).unwrap_or_default(),
        confirm_word,
        topics: confirm_topics,
        missing,
        total_lag: format::int(total_lag),
        total_lag_n: total_lag,
        total_lag_seconds: format::secs(total_secs),
        diverged,
        show_truncation: op == UiOp::Restart,
        show_impact: matches!(op, UiOp::Failover | UiOp::Restart),
        csrf: viewer.csrf.clone(),
        actions_url: format!("{}/actions", mirror_href(&m.name)),
        error: None,
    }
}

// ----- results and operations -----------------------------------------------------------------

#[derive(Debug, Clone)]
pub struct OutcomeView {
    pub topic: String,
    pub href: String,
    pub ok: bool,
    pub title: String,
    pub detail: String,
}

fn outcome_view(mirror: &str, o: &TopicOutcome) -> OutcomeView {
    OutcomeView {
        topic: o.topic.clone(),
        href: topic_href(mirror, &o.topic),
        ok: o.ok,
        title: o.error.as_ref().map_or_else(|| "accepted".to_string(), |e| e.kind.title().to_string()),
        detail: o.error.as_ref().map(|e| e.detail.clone()).unwrap_or_default(),
    }
}

fn kind_label(kind: &str) -> &'static str {
    match kind {
        "start" => "Start",
        "pause" => "Pause",
        "resume" => "Resume",
        "stop" => "Fail over",
        "create_mirror" => "Create mirror",
        "update_mirror" => "Update mirror",
        "delete_mirror" => "Delete mirror",
        _ => "Other",
    }
}

fn kind_target(kind: &str) -> Option<PartitionState> {
    match kind {
        "start" | "resume" => Some(PartitionState::Mirroring),
        "pause" => Some(PartitionState::Paused),
        "stop" => Some(PartitionState::Stopped),
        _ => None,
    }
}

/// How far one topic of an operation has come, from the current snapshot.
#[derive(Debug, Clone)]
pub struct Progress {
    pub topic: String,
    pub href: String,
    pub target: StateView,
    pub done: String,
    pub total: String,
    pub pct: String,
    pub complete: bool,
    /// The topic is no longer in the snapshot (mirror deleted, ...).
    pub gone: bool,
    pub states: String,
}

#[derive(Debug, Clone)]
pub struct OperationRow {
    pub id: String,
    pub href: String,
    pub when: When,
    pub who: String,
    pub address: String,
    pub mirror: String,
    pub mirror_href: String,
    pub kind: &'static str,
    pub kind_raw: String,
    pub topics: String,
    pub topic_count: usize,
    pub ok: usize,
    pub failed: usize,
    pub status: String,
    pub status_css: &'static str,
    pub progress: Vec<Progress>,
    pub outcomes: Vec<OutcomeView>,
    pub finished: When,
}

fn operation_row(o: &OperationView, snap: &Snapshot, now: Timestamp) -> OperationRow {
    let ok = o.results.iter().filter(|r| r.ok).count();
    let failed = o.results.len() - ok;
    let target = kind_target(&o.kind);
    let m = snap.mirror(&o.mirror);
    let progress: Vec<Progress> = match target {
        None => Vec::new(),
        Some(target) => o
            .results
            .iter()
            .filter(|r| r.ok)
            .map(|r| {
                let t = m.and_then(|m| m.topic(&r.topic));
                let c: StateCounts = t.map(|t| t.partitions.iter().map(|p| p.state).collect()).unwrap_or_default();
                let total = c.total();
                let done = c.count(target);
                Progress {
                    topic: r.topic.clone(),
                    href: topic_href(&o.mirror, &r.topic),
                    target: state_view(target),
                    done: format::count(done),
                    total: format::count(total),
                    pct: format!("{:.1}", if total == 0 { 0.0 } else { done as f64 * 100.0 / total as f64 }),
                    complete: total > 0 && done == total,
                    gone: t.is_none(),
                    states: {
                        let s = mixed_text(&c);
                        if s.is_empty() && total > 0 { format!("{total} {}", c.roll_up()) } else { s }
                    },
                }
            })
            .collect(),
    };
    let (status, status_css) = if o.finished_at.is_none() {
        ("running".to_string(), "warn")
    } else if o.results.is_empty() {
        if o.kind.ends_with("_mirror") { ("done".to_string(), "ok") } else { ("no topics".to_string(), "muted") }
    } else if failed == 0 {
        ("accepted".to_string(), "ok")
    } else if ok == 0 {
        ("refused".to_string(), "bad")
    } else {
        (format!("{ok} accepted, {failed} refused"), "warn")
    };
    let topics = match o.topics.len() {
        0 => NONE.to_string(),
        1..=3 => o.topics.join(", "),
        n => format!("{}, … ({} topics)", o.topics[..2].join(", "), n),
    };
    OperationRow {
        id: o.id.clone(),
        href: operation_href(&o.id),
        when: When::new(now, Some(Timestamp::from_millis(o.requested_at))),
        who: o.requested_by.clone(),
        address: o.client_address.clone().unwrap_or_else(|| NONE.into()),
        mirror_href: mirror_href(&o.mirror),
        mirror: o.mirror.clone(),
        kind: kind_label(&o.kind),
        kind_raw: o.kind.clone(),
        topics,
        topic_count: o.topics.len(),
        ok,
        failed,
        status,
        status_css,
        progress,
        outcomes: o.results.iter().map(|r| outcome_view(&o.mirror, r)).collect(),
        finished: When::new(now, o.finished_at.map(Timestamp::from_millis)),
    }
}

/// The outcome of an action just taken, shown inline above the table.
#[derive(Debug, Clone)]
pub struct ResultsView {
    pub title: String,
    pub operation_href: String,
    pub ok: usize,
    pub failed: usize,
    pub items: Vec<OutcomeView>,
    pub css: &'static str,
}

pub fn results(mirror: &str, op_label: &str, operation_id: &str, outcomes: &[TopicOutcome]) -> ResultsView {
    let items: Vec<OutcomeView> = outcomes.iter().map(|o| outcome_view(mirror, o)).collect();
    let ok = items.iter().filter(|i| i.ok).count();
    let failed = items.len() - ok;
    ResultsView {
        title: match (ok, failed) {
            (0, 0) => format!("{op_label}: no topics matched"),
            (_, 0) => format!("{op_label}: accepted for {ok} topic{}", if ok == 1 { "" } else { "s" }),
            (0, _) => format!("{op_label}: refused for {failed} topic{}", if failed == 1 { "" } else { "s" }),
            _ => format!("{op_label}: {ok} accepted, {failed} refused"),
        },
        operation_href: operation_href(operation_id),
        css: if failed == 0 && ok > 0 {
            "ok"
        } else if ok == 0 {
            "bad"
        } else {
            "warn"
        },
        ok,
        failed,
        items,
    }
}

/// Results rebuilt from a recorded operation (after a redirect, without JavaScript).
pub fn results_of(o: &OperationView) -> ResultsView {
    results(&o.mirror, kind_label(&o.kind), &o.id, &o.results)
}

#[derive(Debug, Clone)]
pub struct OperationsView {
    pub rows: Vec<OperationRow>,
    pub pager: Pager,
    pub mirror: String,
    pub who: String,
    pub kind: String,
    pub kind_options: Vec<Opt>,
    pub live_url: String,
    pub fresh: Freshness,
    pub audit: bool,
    pub total_recorded: String,
}

/// The operations list (`audit == false`: lifecycle operations with progress) or the audit
/// trail (every recorded call). Filters: `mirror`, `who` (substring), `kind`.
pub fn operations(snap: &Snapshot, ops: &[OperationView], p: &Params, now: Timestamp, audit: bool) -> OperationsView {
    let mirror = p.get("mirror").to_string();
    let who = p.get("who").to_string();
    let kind = p.get("kind").to_string();
    let who_l = who.to_lowercase();
    let filtered: Vec<&OperationView> = ops
        .iter()
        .filter(|o| audit || kind_target(&o.kind).is_some())
        .filter(|o| mirror.is_empty() || o.mirror == mirror)
        .filter(|o| who.is_empty() || o.requested_by.to_lowercase().contains(&who_l))
        .filter(|o| kind.is_empty() || o.kind == kind)
        .collect();
    let base = if audit { "/audit" } else { "/operations" };
    let query = |page: usize| -> Vec<(&'static str, String)> {
        vec![
            ("mirror", mirror.clone()),
            ("who", who.clone()),
            ("kind", kind.clone()),
            ("page", if page <= 1 { String::new() } else { page.to_string() }),
        ]
    };
    let per = if audit { 100 } else { 25 };
    let (pager, range) = Pager::new(filtered.len(), parse_page(p), per, &|pg| url(base, &query(pg)));
    let kinds: &[&str] = if audit {
        &["start", "pause", "resume", "stop", "create_mirror", "update_mirror", "delete_mirror"]
    } else {
        &["start", "pause", "resume", "stop"]
    };
    let mut kind_options = vec![Opt { value: String::new(), label: "any kind".into(), selected: kind.is_empty() }];
    kind_options.extend(kinds.iter().map(|k| Opt {
        value: (*k).to_string(),
        label: kind_label(k).to_string(),
        selected: kind == *k,
    }));
    OperationsView {
        rows: filtered[range].iter().map(|o| operation_row(o, snap, now)).collect(),
        live_url: url(&format!("/ui{base}"), &query(pager.page)),
        pager,
        mirror,
        who,
        kind,
        kind_options,
        fresh: Freshness::new(snap.taken_at, now),
        audit,
        total_recorded: format::count(ops.len()),
    }
}

#[derive(Debug, Clone)]
pub struct OperationDetailView {
    pub op: OperationRow,
    pub fresh: Freshness,
    pub live_url: String,
}

pub fn operation_detail(snap: &Snapshot, o: &OperationView, now: Timestamp) -> OperationDetailView {
    OperationDetailView {
        op: operation_row(o, snap, now),
        fresh: Freshness::new(snap.taken_at, now),
        live_url: format!("/ui{}", operation_href(&o.id)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_keep_repeated_keys() {
        let p =
            Params(vec![("topic".into(), "a".into()), ("topic".into(), " b ".into()), ("topic".into(), "a".into())]);
        assert_eq!(p.all("topic"), vec!["a", "b"]);
        assert_eq!(p.get("missing"), "");
    }

    #[test]
    fn every_state_has_its_own_colour() {
        let mut css: Vec<&str> = PartitionState::ALL.iter().map(|s| state_view(*s).css).collect();
        css.sort();
        css.dedup();
        assert_eq!(css.len(), 8);
    }

    #[test]
    fn pager_clamps_pages() {
        let (p, r) = Pager::new(250, 9, 100, &|n| format!("/x?page={n}"));
        assert_eq!((p.page, p.pages, r), (3, 3, 200..250));
        assert_eq!(p.range, "201–250 of 250");
        assert!(p.next.is_none() && p.prev.is_some());
        let (p, r) = Pager::new(0, 1, 100, &|n| format!("/x?page={n}"));
        assert_eq!((p.page, p.pages, r), (1, 1, 0..0));
    }

    #[test]
    fn freshness_turns_stale() {
        let now = Timestamp::from_millis(100_000);
        assert!(!Freshness::new(Timestamp::from_millis(99_000), now).stale);
        assert!(Freshness::new(Timestamp::from_millis(90_000), now).stale);
        assert!(Freshness::new(Timestamp::EPOCH, now).stale);
    }

    #[test]
    fn offered_actions_follow_states() {
        let c: StateCounts = [PartitionState::Mirroring, PartitionState::Paused].into_iter().collect();
        let ops: Vec<&str> = actions_for("m", "t", &c).iter().map(|a| a.op).collect();
        assert_eq!(ops, ["pause", "resume", "failover"]);
        let c: StateCounts = [PartitionState::Stopped].into_iter().collect();
        let ops: Vec<&str> = actions_for("m", "t", &c).iter().map(|a| a.op).collect();
        assert_eq!(ops, ["restart"]);
    }
}
