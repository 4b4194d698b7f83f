//! The operations list and the audit trail (`templates/pages/operations.html`), and the
//! operation rows the overview and the operation page show too.

use crate::domain::{PartitionState, StateCounts, Timestamp};
use crate::engine::{OperationKind, OperationView, Snapshot};
use crate::format::{self, NONE, url};

use super::common::{
    Freshness, Opt, Pager, Params, StateView, When, mirror_href, mixed_text, operation_href, parse_page, state_view,
    topic_href,
};
use super::results::{OutcomeView, outcome_view};

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
    /// The instance that accepted the call.
    pub accepted_by: Option<String>,
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

pub(super) fn operation_row(o: &OperationView, snap: &Snapshot, now: Timestamp) -> OperationRow {
    let ok = o.results.iter().filter(|r| r.ok).count();
    let failed = o.results.len() - ok;
    let m = snap.mirror(&o.mirror);
    // A recover has no one target: each partition goes back to what it was doing.
    let target = match o.kind.target_state() {
        Some(state) => state_view(state),
        None => StateView { label: "settled", css: "st-mirroring", transient: false },
    };
    let progress: Vec<Progress> = match o.kind.is_lifecycle() {
        false => Vec::new(),
        true => o
            .results
            .iter()
            .filter(|r| r.ok)
            .map(|r| {
                let t = m.and_then(|m| m.topic(&r.topic));
                let c: StateCounts = t.map(|t| t.partitions.iter().map(|p| p.state).collect()).unwrap_or_default();
                let total = c.total();
                let done: usize =
                    PartitionState::ALL.into_iter().filter(|s| o.kind.reached(*s)).map(|s| c.count(s)).sum();
                Progress {
                    topic: r.topic.clone(),
                    href: topic_href(&o.mirror, &r.topic),
                    target,
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
        if o.kind.is_mirror_change() { ("done".to_string(), "ok") } else { ("no topics".to_string(), "muted") }
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
        accepted_by: o.accepted_by.clone(),
        mirror_href: mirror_href(&o.mirror),
        mirror: o.mirror.clone(),
        kind: o.kind.label(),
        kind_raw: o.kind.to_string(),
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
        .filter(|o| audit || o.kind.is_lifecycle())
        .filter(|o| mirror.is_empty() || o.mirror == mirror)
        .filter(|o| who.is_empty() || o.requested_by.to_lowercase().contains(&who_l))
        .filter(|o| kind.is_empty() || o.kind.as_str() == kind)
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
    let kinds: Vec<OperationKind> = OperationKind::ALL.into_iter().filter(|k| audit || k.is_lifecycle()).collect();
    let mut kind_options = vec![Opt { value: String::new(), label: "any kind".into(), selected: kind.is_empty() }];
    kind_options.extend(kinds.iter().map(|k| Opt {
        value: k.as_str().to_string(),
        label: k.label().to_string(),
        selected: kind == k.as_str(),
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
