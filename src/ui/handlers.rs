//! HTTP handlers: thin adapters from requests to the pure render functions and engine calls.
//! Naming follows kanidm: `<thing>_get` renders a page, `<thing>_live` a polled fragment,
//! `<thing>_post` changes something.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Instant;

use axum::Extension;
use axum::Form;
use axum::extract::{ConnectInfo, Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Redirect, Response};

use crate::auth::{AuthFailure, Role, ThrottleScope};
use crate::engine::{Actor, LifecycleOp, MirrorSpec, SourceSpec, SyncSpec, TopicSelector, Truncation};

use super::error::UiError;
use super::pages::{self, Chrome, NewMirrorPage, Part, SigninPage};
use super::session::{self, same_token};
use super::view::{self, Params, UiOp, Viewer};
use super::{ClientAddr, UiState, cookie, is_htmx, local_path, now, set_cookie};

type Pairs = Vec<(String, String)>;
type Page = Result<Response, UiError>;

fn html(body: String) -> Response {
    Html(body).into_response()
}

/// The CSRF token of a POST: the `_csrf` form field or the `X-CSRF-Token` header (htmx).
fn check_csrf(viewer: &Viewer, form: &Params, headers: &HeaderMap) -> Result<(), UiError> {
    let field = form.get("_csrf");
    let header = headers.get("x-csrf-token").and_then(|v| v.to_str().ok()).unwrap_or("");
    if same_token(field, &viewer.csrf) || same_token(header, &viewer.csrf) { Ok(()) } else { Err(UiError::csrf()) }
}

fn require(viewer: &Viewer, role: Role, what: &str) -> Result<(), UiError> {
    if viewer.role.allows(role) {
        Ok(())
    } else {
        Err(UiError::forbidden(format!(
            "Signed in as {} with the {} role: {what} needs the {} role.",
            viewer.name,
            viewer.role.as_str(),
            role.as_str()
        )))
    }
}

fn actor(viewer: &Viewer, addr: &ClientAddr) -> Actor {
    Actor { identity: viewer.name.clone(), address: addr.0.clone() }
}

/// Results of an earlier action named by `?done=<operation id>` (the no-JavaScript flow).
fn done_results(ui: &UiState, p: &Params) -> Option<view::ResultsView> {
    let id = p.get("done");
    if id.is_empty() {
        return None;
    }
    let o = ui.app.engine.operation(id)?;
    if o.kind == crate::engine::OperationKind::ApprovalRequest
        && let Some(a) =
            ui.app.engine.approval(id).filter(|a| a.status_at(now()) == crate::engine::ApprovalStatus::Pending)
    {
        return Some(safety::pending_results(&a));
    }
    Some(view::results_of(&o))
}

// ----- overview ---------------------------------------------------------------------------------

pub async fn overview_get(State(ui): State<UiState>, Extension(viewer): Extension<Viewer>) -> Page {
    let ops = ui.app.engine.operations();
    Ok(html(pages::overview_with(&ui.app.engine.snapshot(), Some(&ui.app.history), &ops, &viewer, now(), Part::Page)?))
}

pub async fn overview_live(State(ui): State<UiState>, Extension(viewer): Extension<Viewer>) -> Page {
    let ops = ui.app.engine.operations();
    Ok(html(pages::overview_with(&ui.app.engine.snapshot(), Some(&ui.app.history), &ops, &viewer, now(), Part::Live)?))
}

// ----- instances --------------------------------------------------------------------------------

pub async fn api_docs_get(Extension(viewer): Extension<Viewer>) -> Page {
    Ok(html(pages::api_docs(&viewer)?))
}

pub async fn instances_get(State(ui): State<UiState>, Extension(viewer): Extension<Viewer>) -> Page {
    Ok(html(pages::instances(&ui.app.engine.snapshot(), &viewer, now(), Part::Page)?))
}

pub async fn instances_live(State(ui): State<UiState>, Extension(viewer): Extension<Viewer>) -> Page {
    Ok(html(pages::instances(&ui.app.engine.snapshot(), &viewer, now(), Part::Live)?))
}

// ----- mirror -----------------------------------------------------------------------------------

async fn mirror_part(ui: UiState, viewer: Viewer, m: String, q: Pairs, part: Part) -> Page {
    let p = Params(q);
    let results = if part == Part::Page { done_results(&ui, &p) } else { None };
    Ok(html(pages::mirror_with(
        &ui.app.engine.snapshot(),
        Some(&ui.app.history),
        &m,
        &p,
        &viewer,
        now(),
        part,
        results,
    )?))
}

pub async fn mirror_get(
    State(ui): State<UiState>,
    Extension(viewer): Extension<Viewer>,
    Path(m): Path<String>,
    Query(q): Query<Pairs>,
) -> Page {
    mirror_part(ui, viewer, m, q, Part::Page).await
}

pub async fn mirror_topics_live(
    State(ui): State<UiState>,
    Extension(viewer): Extension<Viewer>,
    Path(m): Path<String>,
    Query(q): Query<Pairs>,
) -> Page {
    mirror_part(ui, viewer, m, q, Part::Live).await
}

/// The new-mirror form's throttle in MiB per second: empty or 0 is none.
fn parse_mib_per_sec(text: &str) -> Result<Option<u64>, String> {
    if text.is_empty() {
        return Ok(None);
    }
    match text.parse::<f64>() {
        Ok(v) if v.is_finite() && (0.0..=1e9).contains(&v) => {
            Ok(Some((v * 1_048_576.0).round() as u64).filter(|b| *b > 0))
        }
        _ => Err(format!("The replication throttle is a number of MiB per second (e.g. 50 or 0.5), not {text:?}.")),
    }
}

/// The mirror's incident report as a file: the API's `GET /api/v1/mirrors/{m}/report`, for a
/// signed-in viewer.
fn mirror_report(ui: &UiState, m: &str, format: crate::presentation::report::ReportFormat) -> Page {
    use crate::presentation::report;
    let snap = ui.app.engine.snapshot();
    let mirror = snap.mirror(m).ok_or_else(|| pages::no_mirror(m))?;
    let now = now();
    let r = report::build(&snap, mirror, &ui.app.history, &ui.app.engine.operations(), now);
    Ok(report::respond(&r, now, format, true))
}

pub async fn mirror_report_md(State(ui): State<UiState>, Path(m): Path<String>) -> Page {
    mirror_report(&ui, &m, crate::presentation::report::ReportFormat::Markdown)
}

pub async fn mirror_report_json(State(ui): State<UiState>, Path(m): Path<String>) -> Page {
    mirror_report(&ui, &m, crate::presentation::report::ReportFormat::Json)
}

// ----- partitions -------------------------------------------------------------------------------

async fn partitions_part(ui: UiState, viewer: Viewer, m: String, t: Option<String>, q: Pairs, part: Part) -> Page {
    let p = Params(q);
    let results = if part == Part::Page { done_results(&ui, &p) } else { None };
    let snap = ui.app.engine.snapshot();
    Ok(html(pages::partitions_with(&snap, Some(&ui.app.history), &m, t.as_deref(), &p, &viewer, now(), part, results)?))
}

pub async fn partitions_get(
    State(ui): State<UiState>,
    Extension(viewer): Extension<Viewer>,
    Path(m): Path<String>,
    Query(q): Query<Pairs>,
) -> Page {
    partitions_part(ui, viewer, m, None, q, Part::Page).await
}

pub async fn partitions_live(
    State(ui): State<UiState>,
    Extension(viewer): Extension<Viewer>,
    Path(m): Path<String>,
    Query(q): Query<Pairs>,
) -> Page {
    partitions_part(ui, viewer, m, None, q, Part::Live).await
}

pub async fn topic_get(
    State(ui): State<UiState>,
    Extension(viewer): Extension<Viewer>,
    Path((m, t)): Path<(String, String)>,
    Query(q): Query<Pairs>,
) -> Page {
    partitions_part(ui, viewer, m, Some(t), q, Part::Page).await
}

/// The topic's lineage on the source cluster: read from the source's state topic on request
/// (a link on the topic page, loaded in place with htmx), never on the live refresh.
pub async fn topic_lineage_get(
    State(ui): State<UiState>,
    Extension(viewer): Extension<Viewer>,
    headers: HeaderMap,
    Path((m, t)): Path<(String, String)>,
) -> Page {
    crate::engine::validate_topic_name(&t).map_err(|e| UiError::bad_request("Invalid topic name", e.to_string()))?;
    let found = ui.app.engine.lineage(&m, &t).await.map_err(|e| UiError::engine(&e))?;
    let l = view::lineage(&m, &t, found.as_ref());
    Ok(html(pages::lineage(l, &viewer, is_htmx(&headers))?))
}

pub async fn topic_configs_get(
    State(ui): State<UiState>,
    Extension(viewer): Extension<Viewer>,
    headers: HeaderMap,
    Path((m, t)): Path<(String, String)>,
) -> Page {
    crate::engine::validate_topic_name(&t).map_err(|e| UiError::bad_request("Invalid topic name", e.to_string()))?;
    let rows = ui.app.engine.topic_configs(&m, &t).await.map_err(|e| UiError::engine(&e))?;
    Ok(html(pages::configs(view::configs(&m, &t, &rows), &viewer, is_htmx(&headers))?))
}

pub async fn topic_partitions_live(
    State(ui): State<UiState>,
    Extension(viewer): Extension<Viewer>,
    Path((m, t)): Path<(String, String)>,
    Query(q): Query<Pairs>,
) -> Page {
    partitions_part(ui, viewer, m, Some(t), q, Part::Live).await
}

// ----- actions ----------------------------------------------------------------------------------

pub async fn confirm_get(
    State(ui): State<UiState>,
    Extension(viewer): Extension<Viewer>,
    headers: HeaderMap,
    Path(m): Path<String>,
    Query(q): Query<Pairs>,
) -> Page {
    require(&viewer, Role::Operator, "changing a mirror's topics")?;
    let p = Params(q);
    let op = UiOp::parse(p.get("op"))
        .filter(|op| *op != UiOp::Start)
        .ok_or_else(|| UiError::bad_request("Unknown action", "Choose pause, resume, failover or restart."))?;
    let topics = p.all("topic");
    let htmx = is_htmx(&headers);
    // Where to go afterwards: the page the action was started from, else the mirror.
    let back = headers
        .get("hx-current-url")
        .and_then(|v| v.to_str().ok())
        .and_then(|u| u.find("://").map(|i| &u[i + 3..]))
        .and_then(|rest| rest.find('/').map(|i| &rest[i..]))
        .or_else(|| headers.get(header::REFERER).and_then(|v| v.to_str().ok()).and_then(referer_path))
        .and_then(local_path)
        .map(strip_done)
        .unwrap_or_else(|| view::mirror_href(&m));
    let body =
        pages::confirm_with(&ui.app.engine.snapshot(), Some(&ui.app.history), &m, op, &topics, &viewer, htmx, &back)?;
    Ok(html(body))
}

fn referer_path(r: &str) -> Option<&str> {
    let rest = &r[r.find("://")? + 3..];
    Some(&rest[rest.find('/')?..])
}

/// Drops an earlier `done=` from a return path, so results do not pile up.
fn strip_done(p: &str) -> String {
    match p.split_once('?') {
        None => p.to_string(),
        Some((path, q)) => {
            let kept: Vec<&str> = q.split('&').filter(|kv| !kv.starts_with("done=") && !kv.is_empty()).collect();
            if kept.is_empty() { path.to_string() } else { format!("{path}?{}", kept.join("&")) }
        }
    }
}

fn parse_truncation(s: &str) -> Result<Truncation, UiError> {
    match s {
        "" | "none" => Ok(Truncation::None),
        "resync" => Ok(Truncation::Resync { quarantine: false }),
        "resync_quarantine" => Ok(Truncation::Resync { quarantine: true }),
        other => Err(UiError::bad_request("Unknown truncation mode", format!("{other:?} is not none or resync."))),
    }
}

pub async fn actions_post(
    State(ui): State<UiState>,
    Extension(viewer): Extension<Viewer>,
    Extension(addr): Extension<ClientAddr>,
    headers: HeaderMap,
    Path(m): Path<String>,
    Form(form): Form<Pairs>,
) -> Page {
    let f = Params(form);
    check_csrf(&viewer, &f, &headers)?;
    require(&viewer, Role::Operator, "changing a mirror's topics")?;
    let op = UiOp::parse(f.get("op"))
        .ok_or_else(|| UiError::bad_request("Unknown action", "Choose pause, resume, failover, restart or start."))?;
    let mut topics = f.all("topic");
    let (selector, engine_op) = match op {
        UiOp::Start => {
            for n in f.get("names").split(|c: char| c.is_whitespace() || c == ',') {
                if !n.is_empty() && !topics.iter().any(|t| t == n) {
                    topics.push(n.to_string());
                }
            }
            let pattern = f.get("pattern");
            let selector = match (topics.is_empty(), pattern.is_empty()) {
                (false, true) => TopicSelector::Names(topics.clone()),
                (true, false) => TopicSelector::Pattern(pattern.to_string()),
                (false, false) => {
                    return Err(UiError::bad_request(
                        "Names or a pattern, not both",
                        "Give either topic names or a regular expression.",
                    ));
                }
                (true, true) => {
                    return Err(UiError::bad_request("Nothing to start", "Give topic names or a regular expression."));
                }
            };
            (selector, LifecycleOp::Start { truncation: parse_truncation(f.get("truncation"))? })
        }
        _ if topics.is_empty() => {
            return Err(UiError::bad_request("No topic selected", "Tick at least one topic, then choose the action."));
        }
        UiOp::Pause => (TopicSelector::Names(topics.clone()), LifecycleOp::Pause),
        UiOp::Resume => (TopicSelector::Names(topics.clone()), LifecycleOp::Resume),
        UiOp::Recover => (TopicSelector::Names(topics.clone()), LifecycleOp::Recover),
        UiOp::Restart => (
            TopicSelector::Names(topics.clone()),
            LifecycleOp::Start { truncation: parse_truncation(f.get("truncation"))? },
        ),
        UiOp::Failover => {
            let expected = if topics.len() == 1 { topics[0].as_str() } else { m.as_str() };
            if f.get("confirm") != expected {
                // Page-only: the API has no typed confirmation, so no problem kind applies; 422
                // says the form was read but its confirmation does not match.
                return Err(UiError::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "Failover not confirmed",
                    format!("Type {expected:?} exactly to confirm the failover. Nothing was changed."),
                ));
            }
            (TopicSelector::Names(topics.clone()), LifecycleOp::Stop)
        }
    };
    if op == UiOp::Start {
        if f.get("failback_confirmed") == "1" {
            // The typed confirmation of a failback preview (below): the call's one topic, or the
            // mirror's name for several, as for a failover.
            let named = match &selector {
                TopicSelector::Names(n) if n.len() == 1 => n[0].as_str(),
                _ => m.as_str(),
            };
            if f.get("confirm") != named {
                return Err(UiError::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "Failback not confirmed",
                    format!("Type {named:?} exactly to confirm the failback. Nothing was changed."),
                ));
            }
        } else {
            // A start that fails back onto this cluster adopts the destination topic and copies
            // only what the source received since its failover: show that first (issue 18),
            // confirmed with the topic's name. Any other start runs at once.
            let preview = ui
                .app
                .engine
                .lifecycle(&m, selector.clone(), engine_op, true, actor(&viewer, &addr))
                .await
                .map_err(|e| UiError::engine(&e))?;
            let back = local_path(f.get("back")).map(strip_done).unwrap_or_else(|| view::mirror_href(&m));
            let truncation = match f.get("truncation") {
                "" => "none",
                t => t,
            };
            if let Some(p) = view::failback_preview(&m, &preview, truncation, &back, &viewer) {
                return Ok(html(pages::failback_preview(p, &viewer, is_htmx(&headers))?));
            }
        }
    }
    // The mirror's approval policy: a failover, a resync or a confirmed failback may wait for a
    // second person.
    let approval_action = match engine_op {
        LifecycleOp::Stop => Some(crate::domain::approval::ApprovalAction::Stop),
        LifecycleOp::Start { truncation: Truncation::Resync { .. } } => {
            Some(crate::domain::approval::ApprovalAction::Resync)
        }
        LifecycleOp::Start { truncation: Truncation::None } if f.get("failback_confirmed") == "1" => {
            Some(crate::domain::approval::ApprovalAction::Failback)
        }
        _ => None,
    };
    let (names, pattern) = match &selector {
        TopicSelector::Names(n) => (n.clone(), None),
        TopicSelector::Pattern(p) => (Vec::new(), Some(p.clone())),
        TopicSelector::All => (Vec::new(), None),
    };
    let all = selector == TopicSelector::All;
    let truncation = match engine_op {
        LifecycleOp::Start { truncation } => truncation,
        _ => Truncation::None,
    };
    let call = crate::engine::PendingCall { topics: names, pattern, all, truncation, ..Default::default() };
    let entry = match safety::gate(&ui, &viewer, &addr, &m, approval_action, call, &f).await? {
        crate::engine::Gate::Pending(a) => {
            tracing::info!(mirror = %m, op = op.value(), identity = %viewer.name, request = %a.request_id, "Dashboard action waits for approval.");
            let back = local_path(f.get("back")).map(strip_done).unwrap_or_else(|| view::mirror_href(&m));
            return safety::show(&headers, safety::pending_results(&a), back, &a.request_id);
        }
        crate::engine::Gate::Run(entry) => entry,
    };
    let result = ui.app.engine.lifecycle(&m, selector, engine_op, false, actor(&viewer, &addr)).await;
    if let Some(entry) = &entry {
        let executed = match &result {
            Ok(r) => crate::engine::Executed::Lifecycle(r.clone()),
            Err(e) => crate::engine::Executed::Refused(e.clone()),
        };
        if let Err(e) = ui.app.engine.approval_ran(entry, &executed).await {
            tracing::warn!(entry = %entry.request_id, "cannot record what the break-glass call did: {e}");
        }
    }
    let result = result.map_err(|e| UiError::engine(&e))?;
    tracing::info!(mirror = %m, op = op.value(), identity = %viewer.name, operation = %result.operation_id, "Dashboard action.");
    if is_htmx(&headers) {
        let r = view::results(&m, op.label(), &result.operation_id, &result.results).with_notes(&result.notes);
        let mut resp = html(pages::results(r)?);
        // Refresh the live regions now instead of at the next tick.
        resp.headers_mut().insert("HX-Trigger", HeaderValue::from_static("kmirror:refresh"));
        return Ok(resp);
    }
    let back = local_path(f.get("back")).map(strip_done).unwrap_or_else(|| view::mirror_href(&m));
    let sep = if back.contains('?') { '&' } else { '?' };
    let to = format!("{back}{sep}done={}#results", super::format::encode_component(&result.operation_id));
    Ok(Redirect::to(&to).into_response())
}

// ----- mirrors (admin) --------------------------------------------------------------------------

pub async fn new_mirror_get(Extension(viewer): Extension<Viewer>) -> Page {
    require(&viewer, Role::Admin, "creating a mirror")?;
    let page = NewMirrorPage {
        chrome: Chrome::new("New mirror", "overview", Some(viewer.clone())),
        error: None,
        csrf: viewer.csrf.clone(),
        name: String::new(),
        bootstrap: String::new(),
        cluster_id: String::new(),
        properties: String::new(),
        throttle: String::new(),
        topic_include: String::new(),
        topic_exclude: crate::domain::topic_policy::default_exclude().join("\n"),
    };
    Ok(html(askama::Template::render(&page)?))
}

/// A topic policy list typed one pattern per line (blank lines ignored).
pub(super) fn pattern_lines(text: &str) -> Vec<String> {
    text.lines().map(str::trim).filter(|l| !l.is_empty()).map(str::to_string).collect()
}

fn parse_properties(text: &str) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((k, v)) = line.split_once('=') else {
            return Err(format!("Line {} is not key=value.", i + 1));
        };
        out.insert(k.trim().to_string(), v.trim().to_string());
    }
    Ok(out)
}

pub async fn mirror_create_post(
    State(ui): State<UiState>,
    Extension(viewer): Extension<Viewer>,
    Extension(addr): Extension<ClientAddr>,
    headers: HeaderMap,
    Form(form): Form<Pairs>,
) -> Page {
    let f = Params(form);
    check_csrf(&viewer, &f, &headers)?;
    require(&viewer, Role::Admin, "creating a mirror")?;
    let name = f.get("name").to_string();
    let bootstrap = f.get("bootstrap").to_string();
    let cluster_id = f.get("cluster_id").to_string();
    let properties_text = f.0.iter().find(|(k, _)| k == "properties").map(|(_, v)| v.clone()).unwrap_or_default();
    let throttle_text = f.get("throttle_mib").trim().to_string();
    let include_text = f.0.iter().find(|(k, _)| k == "topic_include").map(|(_, v)| v.clone()).unwrap_or_default();
    let exclude_text = f.0.iter().find(|(k, _)| k == "topic_exclude").map(|(_, v)| v.clone()).unwrap_or_default();
    // The form comes back with the error and the status the API would answer for the same
    // request: the problem table's for an engine refusal, 400 (the API's invalid-body) for a
    // form that cannot be read.
    let again = |status: StatusCode, error: String| -> Page {
        let page = NewMirrorPage {
            chrome: Chrome::new("New mirror", "overview", Some(viewer.clone())),
            error: Some(error),
            csrf: viewer.csrf.clone(),
            name: name.clone(),
            bootstrap: bootstrap.clone(),
            cluster_id: cluster_id.clone(),
            properties: properties_text.clone(),
            throttle: throttle_text.clone(),
            topic_include: include_text.clone(),
            topic_exclude: exclude_text.clone(),
        };
        Ok((status, html(askama::Template::render(&page)?)).into_response())
    };
    if bootstrap.is_empty() {
        return again(StatusCode::BAD_REQUEST, "Give the source cluster's bootstrap servers.".into());
    }
    let properties = match parse_properties(&properties_text) {
        Ok(p) => p,
        Err(e) => return again(StatusCode::BAD_REQUEST, e),
    };
    let throttle = match parse_mib_per_sec(&throttle_text) {
        Ok(t) => t,
        Err(e) => return again(StatusCode::BAD_REQUEST, e),
    };
    let spec = MirrorSpec {
        name: name.clone(),
        source: SourceSpec { bootstrap_servers: bootstrap.clone(), properties },
        expected_source_cluster_id: (!cluster_id.is_empty()).then(|| cluster_id.clone()),
        replication_throttle_bytes_per_sec: throttle,
        sync: SyncSpec {
            topic_configs: f.get("sync_topic_configs") == "on",
            group_offsets: f.get("sync_group_offsets") == "on",
            acls: f.get("sync_acls") == "on",
            ..SyncSpec::default()
        },
        topic_include: pattern_lines(&include_text),
        topic_exclude: pattern_lines(&exclude_text),
        approval: match approval_from_form(&f) {
            Ok(a) => a,
            Err(e) => return again(StatusCode::BAD_REQUEST, e),
        },
    };
    match ui.app.engine.create_mirror(spec, actor(&viewer, &addr)).await {
        Ok(()) => Ok(Redirect::to(&view::mirror_href(&name)).into_response()),
        Err(e) => {
            let u = UiError::engine(&e);
            again(u.status, format!("{}: {}", u.title, u.detail))
        }
    }
}

/// The approval policy the New mirror form asks for: a checkbox per call, and the wait in
/// minutes (empty: the default 15).
fn approval_from_form(f: &Params) -> Result<crate::engine::ApprovalPolicy, String> {
    use crate::domain::approval::ApprovalAction;
    let mut policy = crate::engine::ApprovalPolicy::default();
    for a in ApprovalAction::ALL {
        if f.get(&format!("approval_{}", a.as_str())) == "on" {
            policy.required_for.insert(a);
        }
    }
    let minutes = f.get("approval_minutes").trim();
    if !minutes.is_empty() {
        let m: u64 =
            minutes.parse().ok().filter(|m| (1..=10_080).contains(m)).ok_or_else(|| {
                format!("Approval wait: give whole minutes from 1 to 10080 (7 days), not {minutes:?}.")
            })?;
        policy.expires_after_seconds = m * 60;
    }
    Ok(policy)
}

pub async fn mirror_delete_post(
    State(ui): State<UiState>,
    Extension(viewer): Extension<Viewer>,
    Extension(addr): Extension<ClientAddr>,
    headers: HeaderMap,
    Path(m): Path<String>,
    Form(form): Form<Pairs>,
) -> Page {
    let f = Params(form);
    check_csrf(&viewer, &f, &headers)?;
    require(&viewer, Role::Admin, "deleting a mirror")?;
    if f.get("confirm") != m {
        // Page-only, like the failover confirmation: the API has no typed confirmation.
        return Err(UiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "Deletion not confirmed",
            format!("Type {m:?} exactly to delete the mirror. Nothing was changed."),
        ));
    }
    let action = Some(crate::domain::approval::ApprovalAction::Delete);
    let entry = match safety::gate(&ui, &viewer, &addr, &m, action, crate::engine::PendingCall::default(), &f).await? {
        crate::engine::Gate::Pending(a) => {
            return safety::show(&headers, safety::pending_results(&a), view::mirror_href(&m), &a.request_id);
        }
        crate::engine::Gate::Run(entry) => entry,
    };
    let r = ui.app.engine.delete_mirror(&m, actor(&viewer, &addr)).await;
    if let Some(entry) = &entry {
        let executed = match &r {
            Ok(()) => crate::engine::Executed::Deleted,
            Err(e) => crate::engine::Executed::Refused(e.clone()),
        };
        if let Err(e) = ui.app.engine.approval_ran(entry, &executed).await {
            tracing::warn!(entry = %entry.request_id, "cannot record what the break-glass delete did: {e}");
        }
    }
    r.map_err(|e| UiError::engine(&e))?;
    Ok(Redirect::to("/").into_response())
}

/// The mirror page's topic policy form: `intent=preview` answers what the policy would start
/// and stop now (a fragment for htmx, a page otherwise), `intent=save` stores it (discovery then
/// runs at once) and goes back to the mirror page.
pub async fn mirror_policy_post(
    State(ui): State<UiState>,
    Extension(viewer): Extension<Viewer>,
    Extension(addr): Extension<ClientAddr>,
    headers: HeaderMap,
    Path(m): Path<String>,
    Form(form): Form<Pairs>,
) -> Page {
    let f = Params(form);
    check_csrf(&viewer, &f, &headers)?;
    require(&viewer, Role::Admin, "changing a mirror's topic policy")?;
    let include = pattern_lines(f.get("topic_include"));
    let exclude = pattern_lines(f.get("topic_exclude"));
    // htmx sends the Preview button's request; without JavaScript the button's own value says.
    let preview = f.get("intent") == "preview" || (is_htmx(&headers) && f.get("intent") != "save");
    if preview {
        let plan = ui
            .app
            .engine
            .preview_policy(&m, include.clone(), exclude.clone())
            .await
            .map_err(|e| UiError::engine(&e))?;
        let p = view::policy_preview(&m, &view::mirror_href(&m), &include, &exclude, &plan, &viewer.csrf);
        if is_htmx(&headers) {
            return Ok(html(askama::Template::render(&pages::PolicyPreviewFragment { p })?));
        }
        let page =
            pages::PolicyPreviewPage { chrome: Chrome::new("Topic policy", "overview", Some(viewer.clone())), p };
        return Ok(html(askama::Template::render(&page)?));
    }
    let update = crate::engine::MirrorUpdate {
        topic_include: Some(include),
        topic_exclude: Some(exclude),
        ..Default::default()
    };
    ui.app.engine.update_mirror(&m, update, actor(&viewer, &addr)).await.map_err(|e| UiError::engine(&e))?;
    tracing::info!(mirror = %m, identity = %viewer.name, "Dashboard: topic policy saved.");
    let to = format!("{}#topic-policy", view::mirror_href(&m));
    if is_htmx(&headers) {
        let mut resp = StatusCode::NO_CONTENT.into_response();
        if let Ok(v) = HeaderValue::from_str(&to) {
            resp.headers_mut().insert("HX-Redirect", v);
        }
        return Ok(resp);
    }
    Ok(Redirect::to(&to).into_response())
}

// ----- operations -------------------------------------------------------------------------------

async fn operations_part(ui: UiState, viewer: Viewer, q: Pairs, audit: bool, part: Part) -> Page {
    let ops = ui.app.engine.operations();
    let body = pages::operations(&ui.app.engine.snapshot(), &ops, &Params(q), &viewer, now(), audit, part)?;
    Ok(html(body))
}

pub async fn operations_get(
    State(ui): State<UiState>,
    Extension(viewer): Extension<Viewer>,
    Query(q): Query<Pairs>,
) -> Page {
    operations_part(ui, viewer, q, false, Part::Page).await
}

pub async fn operations_live(
    State(ui): State<UiState>,
    Extension(viewer): Extension<Viewer>,
    Query(q): Query<Pairs>,
) -> Page {
    operations_part(ui, viewer, q, false, Part::Live).await
}

pub async fn audit_get(
    State(ui): State<UiState>,
    Extension(viewer): Extension<Viewer>,
    Query(q): Query<Pairs>,
) -> Page {
    operations_part(ui, viewer, q, true, Part::Page).await
}

pub async fn audit_live(
    State(ui): State<UiState>,
    Extension(viewer): Extension<Viewer>,
    Query(q): Query<Pairs>,
) -> Page {
    operations_part(ui, viewer, q, true, Part::Live).await
}

async fn operation_part(ui: UiState, viewer: Viewer, id: String, part: Part) -> Page {
    let op =
        ui.app.engine.operation(&id).ok_or_else(|| {
            UiError::not_found("No such operation", "Only the last 1,000 operations are kept in memory.")
        })?;
    Ok(html(pages::operation(&ui.app.engine.snapshot(), &op, &viewer, now(), part)?))
}

pub async fn operation_get(
    State(ui): State<UiState>,
    Extension(viewer): Extension<Viewer>,
    Path(id): Path<String>,
) -> Page {
    operation_part(ui, viewer, id, Part::Page).await
}

pub async fn operation_live(
    State(ui): State<UiState>,
    Extension(viewer): Extension<Viewer>,
    Path(id): Path<String>,
) -> Page {
    operation_part(ui, viewer, id, Part::Live).await
}

// ----- sign in / out ----------------------------------------------------------------------------

fn signin_page(ui: &UiState, csrf: &str, next: &str, error: Option<String>) -> Result<String, UiError> {
    let page = SigninPage {
        chrome: Chrome::new("Sign in", "", None),
        error,
        next: next.to_string(),
        csrf: csrf.to_string(),
        no_tokens: ui.app.auth.is_empty() && !ui.app.auth.is_disabled(),
    };
    Ok(askama::Template::render(&page)?)
}

pub async fn signin_get(State(ui): State<UiState>, Query(q): Query<Pairs>, headers: HeaderMap) -> Page {
    let p = Params(q);
    let next = local_path(p.get("next")).unwrap_or("/").to_string();
    let tls = ui.app.tls;
    let signed_in = cookie(&headers, session::cookie_name(tls)).and_then(|id| ui.sessions.get(id, Instant::now()));
    if signed_in.is_some() || ui.app.auth.is_disabled() {
        return Ok(Redirect::to(&next).into_response());
    }
    // Double-submit token for the sign-in form (there is no session to bind it to yet).
    let csrf = session::random_token();
    let mut resp = html(signin_page(&ui, &csrf, &next, None)?);
    resp.headers_mut().append(header::SET_COOKIE, set_cookie(session::signin_cookie_name(tls), &csrf, 3600, tls));
    Ok(resp)
}

pub async fn signin_post(
    State(ui): State<UiState>,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    headers: HeaderMap,
    Form(form): Form<Pairs>,
) -> Page {
    let f = Params(form);
    let tls = ui.app.tls;
    let next = local_path(f.get("next")).unwrap_or("/").to_string();
    let expected = cookie(&headers, session::signin_cookie_name(tls)).unwrap_or("");
    if !same_token(f.get("_csrf"), expected) {
        // A stale or forged form: show a fresh one rather than an error page.
        let csrf = session::random_token();
        let body = signin_page(&ui, &csrf, &next, Some("The sign-in form expired. Please try again.".into()))?;
        let mut resp = (StatusCode::FORBIDDEN, html(body)).into_response();
        resp.headers_mut().append(header::SET_COOKIE, set_cookie(session::signin_cookie_name(tls), &csrf, 3600, tls));
        return Ok(resp);
    }
    let token = f.0.iter().find(|(k, _)| k == "token").map(|(_, v)| v.trim().to_string()).unwrap_or_default();
    // The same rule as bearer tokens: a valid token always signs in; failures are throttled per
    // client address and for everyone (and logged there).
    let client = peer.map(|Extension(ConnectInfo(a))| a.ip());
    let identity = match ui.app.auth.authenticate_from(&token, client, "/signin") {
        Ok(identity) => identity,
        Err(AuthFailure::Invalid) => {
            let body = signin_page(&ui, expected, &next, Some("That token is not valid.".into()))?;
            return Ok((StatusCode::UNAUTHORIZED, html(body)).into_response());
        }
        Err(AuthFailure::Throttled { retry_after, scope }) => {
            let secs = retry_after.as_secs().max(1);
            let from = match scope {
                ThrottleScope::Address => "from your address",
                ThrottleScope::Everyone => "from all clients",
            };
            let message = format!(
                "Too many failed sign-ins {from}, and that token is not valid either. Try again in {secs} seconds (a \
                 valid token signs in at any time)."
            );
            let body = signin_page(&ui, expected, &next, Some(message))?;
            let mut resp = (StatusCode::TOO_MANY_REQUESTS, html(body)).into_response();
            resp.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(secs));
            return Ok(resp);
        }
    };
    tracing::info!(identity = %identity.name, role = identity.role.as_str(), "Dashboard sign-in.");
    let (id, _) = ui.sessions.create(identity, Instant::now());
    let mut resp = Redirect::to(&next).into_response();
    let h = resp.headers_mut();
    h.append(header::SET_COOKIE, set_cookie(session::cookie_name(tls), &id, session::ABSOLUTE_TIMEOUT.as_secs(), tls));
    h.append(header::SET_COOKIE, set_cookie(session::signin_cookie_name(tls), "", 0, tls));
    Ok(resp)
}

pub async fn signout_post(
    State(ui): State<UiState>,
    Extension(viewer): Extension<Viewer>,
    headers: HeaderMap,
    Form(form): Form<Pairs>,
) -> Page {
    check_csrf(&viewer, &Params(form), &headers)?;
    let tls = ui.app.tls;
    if let Some(id) = cookie(&headers, session::cookie_name(tls)) {
        ui.sessions.remove(id);
    }
    let mut resp = Redirect::to("/signin").into_response();
    resp.headers_mut().append(header::SET_COOKIE, set_cookie(session::cookie_name(tls), "", 0, tls));
    Ok(resp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn done_markers_are_dropped_from_return_paths() {
        assert_eq!(strip_done("/mirrors/m?done=op-1"), "/mirrors/m");
        assert_eq!(strip_done("/mirrors/m?q=a&done=op-1&page=2"), "/mirrors/m?q=a&page=2");
        assert_eq!(strip_done("/mirrors/m"), "/mirrors/m");
    }

    #[test]
    fn referers_become_paths() {
        assert_eq!(referer_path("http://127.0.0.1:8080/mirrors/m?x=1"), Some("/mirrors/m?x=1"));
        assert_eq!(referer_path("nonsense"), None);
    }

    #[test]
    fn properties_are_key_value_lines() {
        let p = parse_properties("security.protocol = SASL_SSL\n\n# note\nsasl.password=a=b\n").unwrap();
        assert_eq!(p.get("security.protocol").map(String::as_str), Some("SASL_SSL"));
        assert_eq!(p.get("sasl.password").map(String::as_str), Some("a=b"));
        assert!(parse_properties("oops").unwrap_err().contains("Line 1"));
    }

    #[test]
    fn truncation_modes() {
        assert_eq!(parse_truncation("").unwrap(), Truncation::None);
        assert_eq!(parse_truncation("resync_quarantine").unwrap(), Truncation::Resync { quarantine: true });
        assert!(parse_truncation("everything").is_err());
    }
}

// Two-person approval and DR drills.
mod safety;
pub use safety::{approve_post, drill_post, drill_report_get, reject_post, safety_live};
