//! Pieces several pages and fragments share: who is looking, request parameters, state badges,
//! freshness, links, paging and sorting.

use crate::auth::{Identity, Role};
use crate::domain::{PartitionState, StateCounts, Timestamp};
use crate::format::{self, encode_component};

/// A snapshot older than this is shown as stale.
pub const STALE_AFTER_MS: i64 = 5_000;
/// Rows per page unless the visitor asks otherwise.
pub const DEFAULT_PER_PAGE: usize = 100;
const PER_PAGE_CHOICES: [usize; 4] = [25, 100, 500, 1000];

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
pub(super) fn severity(s: PartitionState) -> u8 {
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
    pub(super) fn new(now: Timestamp, t: Option<Timestamp>) -> When {
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

pub(super) fn state_counts(counts: &StateCounts, href: &dyn Fn(PartitionState) -> String) -> Vec<StateCountView> {
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
pub(super) fn mixed_text(counts: &StateCounts) -> String {
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
pub(super) fn lag_css(records: i64, seconds: f64) -> &'static str {
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

pub fn operation_href(id: &str) -> String {
    format!("/operations/{}", encode_component(id))
}

/// A select option.
#[derive(Debug, Clone)]
pub struct Opt {
    pub value: String,
    pub label: String,
    pub selected: bool,
}

pub(super) fn state_options(selected: Option<PartitionState>) -> Vec<Opt> {
    let mut v = vec![Opt { value: String::new(), label: "any state".into(), selected: selected.is_none() }];
    v.extend(PartitionState::ALL.into_iter().map(|s| Opt {
        value: s.as_str().into(),
        label: s.as_str().into(),
        selected: selected == Some(s),
    }));
    v
}

pub(super) fn per_page_options(per: usize) -> Vec<Opt> {
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

impl SortLink {
    /// The header link of column `key` of a table sorted by `sort` (`desc` or not). Clicking the
    /// active column flips its direction; another column starts descending when `desc_first`
    /// says so (numbers where the worst is the largest), ascending otherwise. `href` makes the
    /// link for a column and direction.
    pub(super) fn new(
        label: &'static str,
        key: &str,
        css: &'static str,
        (sort, desc): (&str, bool),
        desc_first: bool,
        href: impl Fn(&str, &'static str) -> String,
    ) -> SortLink {
        let active = key == sort;
        let next_desc = if active { !desc } else { desc_first };
        let (aria, arrow) = match (active, desc) {
            (false, _) => ("none", ""),
            (true, true) => ("descending", "↓"),
            (true, false) => ("ascending", "↑"),
        };
        SortLink { label, href: href(key, if next_desc { "desc" } else { "asc" }), aria, arrow, css }
    }
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
    pub(super) fn new(
        total: usize,
        page: usize,
        per: usize,
        href: &dyn Fn(usize) -> String,
    ) -> (Pager, std::ops::Range<usize>) {
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
pub(super) fn parse_desc(p: &Params, default_desc: bool) -> bool {
    match p.get("dir") {
        "asc" => false,
        "desc" => true,
        _ => default_desc,
    }
}

pub(super) fn parse_page(p: &Params) -> usize {
    p.get("page").parse::<usize>().unwrap_or(1).max(1)
}

pub(super) fn parse_per(p: &Params) -> usize {
    p.get("per").parse::<usize>().ok().filter(|n| PER_PAGE_CHOICES.contains(n)).unwrap_or(DEFAULT_PER_PAGE)
}

pub(super) fn parse_state(p: &Params) -> Option<PartitionState> {
    p.get("state").parse().ok()
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
}
