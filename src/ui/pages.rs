//! Typed askama views (one struct per template) and the pure render functions the handlers and
//! the render tests share.
//!
//! A page struct holds the same `v` its live fragment holds, and the page template includes the
//! fragment template, so the first paint and every refresh come from one piece of markup.
//! Nothing here is marked `|safe`: every string is escaped by askama.

use askama::Template;

use crate::domain::Timestamp;
use crate::engine::{OperationView, Snapshot};
use crate::history::History;

use super::error::UiError;
use super::view::{
    self, ConfirmView, FailbackPreviewView, InstancesView, MirrorView, OperationDetailView, OperationsView,
    OverviewView, Params, PartitionsView, PolicyPreviewView, ResultsView, UiOp, Viewer,
};

pub use super::chrome::Chrome;

// ----- templates --------------------------------------------------------------------------------

#[derive(Debug, Template)]
#[template(path = "pages/overview.html")]
pub struct OverviewPage {
    pub chrome: Chrome,
    pub v: OverviewView,
    pub oob: bool,
}

#[derive(Debug, Template)]
#[template(path = "fragments/overview_live.html")]
pub struct OverviewFragment {
    pub v: OverviewView,
    pub oob: bool,
}

#[derive(Debug, Template)]
#[template(path = "pages/mirror.html")]
pub struct MirrorPage {
    pub chrome: Chrome,
    pub v: MirrorView,
    pub results: Option<ResultsView>,
    pub oob: bool,
    /// Approvals and drills.
    pub s: view::SafetyView,
}

/// The mirror page's approvals and drills, polled on their own.
#[derive(Debug, Template)]
#[template(path = "fragments/mirror_safety.html")]
pub struct MirrorSafetyFragment {
    pub s: view::SafetyView,
}

/// The approvals and drills section of mirror `name`.
pub fn mirror_safety(snap: &Snapshot, name: &str, viewer: &Viewer, now: Timestamp) -> Result<String, UiError> {
    snap.mirror(name).ok_or_else(|| no_mirror(name))?;
    Ok(MirrorSafetyFragment { s: view::safety(snap, name, viewer, now) }.render()?)
}

#[derive(Debug, Template)]
#[template(path = "fragments/mirror_topics.html")]
pub struct MirrorTopicsFragment {
    pub v: MirrorView,
    pub oob: bool,
}

#[derive(Debug, Template)]
#[template(path = "pages/partitions.html")]
pub struct PartitionsPage {
    pub chrome: Chrome,
    pub v: PartitionsView,
    pub results: Option<ResultsView>,
    pub oob: bool,
}

#[derive(Debug, Template)]
#[template(path = "fragments/partitions_table.html")]
pub struct PartitionsTableFragment {
    pub v: PartitionsView,
    pub oob: bool,
}

#[derive(Debug, Template)]
#[template(path = "pages/confirm.html")]
pub struct ConfirmPage {
    pub chrome: Chrome,
    pub c: ConfirmView,
    pub dialog: bool,
    pub back: String,
}

#[derive(Debug, Template)]
#[template(path = "pages/failback_preview.html")]
pub struct FailbackPreviewPage {
    pub chrome: Chrome,
    pub p: FailbackPreviewView,
}

#[derive(Debug, Template)]
#[template(path = "fragments/failback_preview.html")]
pub struct FailbackPreviewFragment {
    pub p: FailbackPreviewView,
}

/// The failback preview of a dashboard start (page, or the fragment for htmx).
pub fn failback_preview(p: FailbackPreviewView, viewer: &Viewer, fragment: bool) -> Result<String, UiError> {
    Ok(if fragment {
        FailbackPreviewFragment { p }.render()?
    } else {
        let chrome = Chrome::new(&p.title, "overview", Some(viewer.clone())).crumbs(mirror_crumbs(&p.mirror));
        FailbackPreviewPage { chrome, p }.render()?
    })
}

#[derive(Debug, Template)]
#[template(path = "pages/configs.html")]
pub struct ConfigsPage {
    pub chrome: Chrome,
    pub c: view::ConfigsView,
}

#[derive(Debug, Template)]
#[template(path = "fragments/configs.html")]
pub struct ConfigsFragment {
    pub c: view::ConfigsView,
}

/// A topic's configs on both clusters (page, or the topic page's fragment for htmx).
pub fn configs(c: view::ConfigsView, viewer: &Viewer, fragment: bool) -> Result<String, UiError> {
    Ok(if fragment {
        ConfigsFragment { c }.render()?
    } else {
        let chrome = Chrome::new(&format!("Configs of {}", c.topic), "overview", Some(viewer.clone()))
            .crumbs(mirror_crumbs(&c.mirror));
        ConfigsPage { chrome, c }.render()?
    })
}

#[derive(Debug, Template)]
#[template(path = "pages/lineage.html")]
pub struct LineagePage {
    pub chrome: Chrome,
    pub l: view::LineageView,
}

#[derive(Debug, Template)]
#[template(path = "fragments/lineage.html")]
pub struct LineageFragment {
    pub l: view::LineageView,
}

/// A topic's lineage on the source cluster (page, or the topic page's fragment for htmx).
pub fn lineage(l: view::LineageView, viewer: &Viewer, fragment: bool) -> Result<String, UiError> {
    Ok(if fragment {
        LineageFragment { l }.render()?
    } else {
        let chrome = Chrome::new(&format!("Lineage of {}", l.topic), "overview", Some(viewer.clone()))
            .crumbs(mirror_crumbs(&l.mirror));
        LineagePage { chrome, l }.render()?
    })
}

#[derive(Debug, Template)]
#[template(path = "fragments/confirm_dialog.html")]
pub struct ConfirmDialog {
    pub c: ConfirmView,
    pub dialog: bool,
    pub back: String,
}

#[derive(Debug, Template)]
#[template(path = "fragments/results.html")]
pub struct ResultsFragment {
    pub r: ResultsView,
}

#[derive(Debug, Template)]
#[template(path = "pages/operations.html")]
pub struct OperationsPage {
    pub chrome: Chrome,
    pub v: OperationsView,
    pub oob: bool,
}

#[derive(Debug, Template)]
#[template(path = "fragments/operations_live.html")]
pub struct OperationsFragment {
    pub v: OperationsView,
    pub oob: bool,
}

#[derive(Debug, Template)]
#[template(path = "pages/operation.html")]
pub struct OperationPage {
    pub chrome: Chrome,
    pub v: OperationDetailView,
    pub oob: bool,
}

#[derive(Debug, Template)]
#[template(path = "fragments/operation_live.html")]
pub struct OperationFragment {
    pub v: OperationDetailView,
    pub oob: bool,
}

/// The interactive API reference (Swagger UI over the OpenAPI document).
#[derive(Debug, Template)]
#[template(path = "pages/api_docs.html")]
pub struct ApiDocsPage {
    pub chrome: Chrome,
}

#[derive(Debug, Template)]
#[template(path = "pages/instances.html")]
pub struct InstancesPage {
    pub chrome: Chrome,
    pub v: InstancesView,
    pub oob: bool,
}

#[derive(Debug, Template)]
#[template(path = "fragments/instances_live.html")]
pub struct InstancesFragment {
    pub v: InstancesView,
    pub oob: bool,
}

#[derive(Debug, Template)]
#[template(path = "pages/signin.html")]
pub struct SigninPage {
    pub chrome: Chrome,
    pub error: Option<String>,
    pub next: String,
    pub csrf: String,
    pub no_tokens: bool,
}

#[derive(Debug, Template)]
#[template(path = "pages/new_mirror.html")]
pub struct NewMirrorPage {
    pub chrome: Chrome,
    pub error: Option<String>,
    pub csrf: String,
    pub name: String,
    pub bootstrap: String,
    pub cluster_id: String,
    pub properties: String,
    /// The replication throttle as typed, in MiB/s (empty: none).
    pub throttle: String,
    /// The topic policy as typed, one pattern per line.
    pub topic_include: String,
    pub topic_exclude: String,
}

#[derive(Debug, Template)]
#[template(path = "pages/policy_preview.html")]
pub struct PolicyPreviewPage {
    pub chrome: Chrome,
    pub p: PolicyPreviewView,
}

#[derive(Debug, Template)]
#[template(path = "fragments/policy_preview.html")]
pub struct PolicyPreviewFragment {
    pub p: PolicyPreviewView,
}

// ----- pure render functions (also used by the render tests) -----------------------------------

/// Which part of a page a request wants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The whole page.
    Page,
    /// The live fragment the page polls: its table, plus the summary above it and the
    /// freshness indicator out of band, so one request keeps the whole page consistent.
    Live,
}

fn mirror_crumbs(mirror: &str) -> Vec<(String, String)> {
    vec![("Overview".into(), "/".into()), (mirror.to_string(), view::mirror_href(mirror))]
}

pub(crate) fn no_mirror(name: &str) -> UiError {
    UiError::not_found("No such mirror", format!("There is no mirror named {name:?}. It may have been deleted."))
}

/// The overview page or its live fragment, without a lag history (charts empty).
pub fn overview(
    snap: &Snapshot,
    ops: &[OperationView],
    viewer: &Viewer,
    now: Timestamp,
    part: Part,
) -> Result<String, UiError> {
    overview_with(snap, None, ops, viewer, now, part)
}

/// The overview page or its live fragment, with charts from `history`.
pub fn overview_with(
    snap: &Snapshot,
    history: Option<&History>,
    ops: &[OperationView],
    viewer: &Viewer,
    now: Timestamp,
    part: Part,
) -> Result<String, UiError> {
    let v = view::overview(snap, history, ops, now, viewer);
    Ok(match part {
        Part::Page => OverviewPage { chrome: Chrome::new("Overview", "overview", Some(viewer.clone())), v, oob: false }
            .render()?,
        Part::Live => OverviewFragment { v, oob: true }.render()?,
    })
}

/// A mirror's page or one of its live fragments. `results` is the outcome of an action just
/// taken (shown after a redirect without JavaScript).
pub fn mirror(
    snap: &Snapshot,
    name: &str,
    params: &Params,
    viewer: &Viewer,
    now: Timestamp,
    part: Part,
    results: Option<ResultsView>,
) -> Result<String, UiError> {
    mirror_with(snap, None, name, params, viewer, now, part, results)
}

/// [`mirror`] with charts and catch-up estimates from `history`.
#[allow(clippy::too_many_arguments)] // `mirror`'s inputs plus the history
pub fn mirror_with(
    snap: &Snapshot,
    history: Option<&History>,
    name: &str,
    params: &Params,
    viewer: &Viewer,
    now: Timestamp,
    part: Part,
    results: Option<ResultsView>,
) -> Result<String, UiError> {
    let m = snap.mirror(name).ok_or_else(|| no_mirror(name))?;
    let v = view::mirror(m, history, params, now, snap.taken_at, viewer);
    Ok(match part {
        Part::Page => {
            let chrome =
                Chrome::new(name, "overview", Some(viewer.clone())).crumbs(vec![("Overview".into(), "/".into())]);
            let s = view::safety(snap, name, viewer, now);
            MirrorPage { chrome, v, results, oob: false, s }.render()?
        }
        Part::Live => MirrorTopicsFragment { v, oob: true }.render()?,
    })
}

/// The partitions of a mirror (`topic == None`, filterable by topic prefix) or of one topic.
#[allow(clippy::too_many_arguments)] // the same inputs as `mirror`, plus the optional topic
pub fn partitions(
    snap: &Snapshot,
    mirror: &str,
    topic: Option<&str>,
    params: &Params,
    viewer: &Viewer,
    now: Timestamp,
    part: Part,
    results: Option<ResultsView>,
) -> Result<String, UiError> {
    partitions_with(snap, None, mirror, topic, params, viewer, now, part, results)
}

/// [`partitions`] with a topic's charts and catch-up estimate from `history`.
#[allow(clippy::too_many_arguments)] // `partitions`' inputs plus the history
pub fn partitions_with(
    snap: &Snapshot,
    history: Option<&History>,
    mirror: &str,
    topic: Option<&str>,
    params: &Params,
    viewer: &Viewer,
    now: Timestamp,
    part: Part,
    results: Option<ResultsView>,
) -> Result<String, UiError> {
    let m = snap.mirror(mirror).ok_or_else(|| no_mirror(mirror))?;
    let t = match topic {
        Some(name) => Some(m.topic(name).ok_or_else(|| {
            UiError::not_found(
                "No such topic in this mirror",
                format!("Mirror {mirror:?} does not mirror a topic named {name:?}."),
            )
        })?),
        None => None,
    };
    let v = view::partitions(m, history, t, params, now, snap.taken_at, viewer, &snap.cluster.this_instance);
    Ok(match part {
        Part::Page => {
            let title = match topic {
                Some(t) => format!("{t} · {mirror}"),
                None => format!("Partitions · {mirror}"),
            };
            let chrome = Chrome::new(&title, "overview", Some(viewer.clone())).crumbs(mirror_crumbs(mirror));
            PartitionsPage { chrome, v, results, oob: false }.render()?
        }
        Part::Live => PartitionsTableFragment { v, oob: true }.render()?,
    })
}

/// The confirmation for an action: a dialog fragment (htmx) or a full page (no JavaScript).
pub fn confirm(
    snap: &Snapshot,
    mirror: &str,
    op: UiOp,
    topics: &[String],
    viewer: &Viewer,
    dialog: bool,
    back: &str,
) -> Result<String, UiError> {
    confirm_with(snap, None, mirror, op, topics, viewer, dialog, back)
}

/// [`confirm`] with catch-up estimates from `history` (the failover dialog says how long to
/// wait to lose nothing).
#[allow(clippy::too_many_arguments)] // `confirm`'s inputs plus the history
pub fn confirm_with(
    snap: &Snapshot,
    history: Option<&History>,
    mirror: &str,
    op: UiOp,
    topics: &[String],
    viewer: &Viewer,
    dialog: bool,
    back: &str,
) -> Result<String, UiError> {
    let m = snap.mirror(mirror).ok_or_else(|| no_mirror(mirror))?;
    let c = view::confirm(m, history, op, topics, viewer);
    let back = back.to_string();
    Ok(if dialog {
        ConfirmDialog { c, dialog, back }.render()?
    } else {
        let chrome = Chrome::new(&c.title, "overview", Some(viewer.clone())).crumbs(mirror_crumbs(mirror));
        ConfirmPage { chrome, c, dialog, back }.render()?
    })
}

/// Operations (`audit == false`) or the audit trail, page or live fragment.
pub fn operations(
    snap: &Snapshot,
    ops: &[OperationView],
    params: &Params,
    viewer: &Viewer,
    now: Timestamp,
    audit: bool,
    part: Part,
) -> Result<String, UiError> {
    let v = view::operations(snap, ops, params, now, audit);
    Ok(match part {
        Part::Page => {
            let (title, nav) = if audit { ("Audit trail", "audit") } else { ("Operations", "operations") };
            OperationsPage { chrome: Chrome::new(title, nav, Some(viewer.clone())), v, oob: false }.render()?
        }
        Part::Live => OperationsFragment { v, oob: true }.render()?,
    })
}

/// One operation with live per-partition progress.
pub fn operation(
    snap: &Snapshot,
    op: &OperationView,
    viewer: &Viewer,
    now: Timestamp,
    part: Part,
) -> Result<String, UiError> {
    let v = view::operation_detail(snap, op, now);
    Ok(match part {
        Part::Page => {
            let chrome = Chrome::new(&format!("{} · operation", v.op.kind), "operations", Some(viewer.clone()))
                .crumbs(vec![("Operations".into(), "/operations".into())]);
            OperationPage { chrome, v, oob: false }.render()?
        }
        Part::Live => OperationFragment { v, oob: true }.render()?,
    })
}

/// The instances sharing the work and their slots, page or live fragment.
pub fn instances(snap: &Snapshot, viewer: &Viewer, now: Timestamp, part: Part) -> Result<String, UiError> {
    let v = view::instances(snap, now);
    Ok(match part {
        Part::Page => {
            InstancesPage { chrome: Chrome::new("Instances", "instances", Some(viewer.clone())), v, oob: false }
                .render()?
        }
        Part::Live => InstancesFragment { v, oob: true }.render()?,
    })
}

/// The interactive API reference: the OpenAPI document rendered by the vendored Swagger UI.
pub fn api_docs(viewer: &Viewer) -> Result<String, UiError> {
    Ok(ApiDocsPage { chrome: Chrome::new("API reference", "api", Some(viewer.clone())) }.render()?)
}

/// The inline results of an action (htmx), which also closes the confirmation dialog.
pub fn results(r: ResultsView) -> Result<String, UiError> {
    Ok(ResultsFragment { r }.render()?)
}
