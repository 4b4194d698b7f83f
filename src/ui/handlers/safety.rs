//! Dashboard handlers of two-person approval and DR drills: the mirror page's live section,
//! approving and rejecting a request, running a drill, and downloading a drill's report.

use super::*;
use crate::domain::approval::ApprovalAction;
use crate::engine::{ApprovalRecord, Decision, DrillOptions, Executed, Gate, PendingCall};

/// A request that now waits for a second person, as the results box shows it.
pub(super) fn pending_results(a: &ApprovalRecord) -> view::ResultsView {
    view::ResultsView {
        title: format!(
            "{}: waiting for a second person's approval (request {}, expires in {})",
            a.action.label(),
            a.request_id,
            super::super::format::duration_ms(now().millis_until(a.expires_at).max(0))
        ),
        operation_href: view::operation_href(&a.request_id),
        ok: 0,
        failed: 0,
        items: Vec::new(),
        css: "warn",
    }
}

/// The results box for `r`: inline (htmx) or after a redirect back to `back`.
pub(super) fn show(headers: &HeaderMap, r: view::ResultsView, back: String, id: &str) -> Page {
    if is_htmx(headers) {
        let mut resp = html(pages::results(r)?);
        resp.headers_mut().insert("HX-Trigger", HeaderValue::from_static("kmirror:refresh"));
        return Ok(resp);
    }
    let sep = if back.contains('?') { '&' } else { '?' };
    Ok(Redirect::to(&format!("{back}{sep}done={}#results", super::super::format::encode_component(id))).into_response())
}

/// Runs the gate of a guarded call from a form (`reason`, `break_glass`).
pub(super) async fn gate(
    ui: &UiState,
    viewer: &Viewer,
    addr: &ClientAddr,
    mirror: &str,
    action: Option<ApprovalAction>,
    call: PendingCall,
    f: &Params,
) -> Result<Gate, UiError> {
    let reason = Some(f.get("reason")).filter(|r| !r.trim().is_empty());
    let break_glass = f.get("break_glass") == "1" || f.get("break_glass") == "on";
    ui.app
        .engine
        .gate(mirror, action, call, &actor(viewer, addr), viewer.role.allows(Role::Admin), reason, break_glass)
        .await
        .map_err(|e| UiError::engine(&e))
}

pub async fn safety_live(
    State(ui): State<UiState>,
    Extension(viewer): Extension<Viewer>,
    Path(m): Path<String>,
) -> Page {
    Ok(html(pages::mirror_safety(&ui.app.engine.snapshot(), &m, &viewer, now())?))
}

async fn decide(
    ui: UiState,
    viewer: Viewer,
    addr: ClientAddr,
    headers: HeaderMap,
    id: String,
    f: Params,
    d: Decision,
) -> Page {
    check_csrf(&viewer, &f, &headers)?;
    require(&viewer, Role::Operator, "deciding on an approval request")?;
    let reason = Some(f.get("reason").trim().to_string()).filter(|r| !r.is_empty());
    if d == Decision::Reject && reason.is_none() {
        return Err(UiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "A reason is required",
            "Say why the request is rejected: it goes to the audit trail. Nothing was changed.",
        ));
    }
    let (record, executed) =
        ui.app.engine.decide(&id, d, &actor(&viewer, &addr), reason).await.map_err(|e| UiError::engine(&e))?;
    tracing::info!(request = %id, identity = %viewer.name, decision = d.as_str(), "Dashboard decision.");
    let back = local_path(f.get("back")).map(strip_done).unwrap_or_else(|| view::mirror_href(&record.mirror));
    let r = match &executed {
        Some(Executed::Lifecycle(op)) => {
            let mut r = view::results(&record.mirror, record.action.label(), &op.operation_id, &op.results);
            r.title = format!("Approved — {}", r.title);
            r
        }
        Some(Executed::Refused(e)) => {
            let u = UiError::engine(e);
            view::ResultsView {
                title: format!("Approved, but the call was refused: {}: {}", u.title, u.detail),
                operation_href: view::operation_href(&record.request_id),
                ok: 0,
                failed: 1,
                items: Vec::new(),
                css: "bad",
            }
        }
        Some(Executed::Drill(drill)) => view::ResultsView {
            title: format!("Approved — the drill runs ({drill})"),
            operation_href: view::operation_href(drill),
            ok: 1,
            failed: 0,
            items: Vec::new(),
            css: "ok",
        },
        Some(Executed::Deleted) => return Ok(Redirect::to("/").into_response()),
        None => view::ResultsView {
            title: format!("Rejected: {} asked by {} will not run", record.action.label(), record.requested_by),
            operation_href: view::operation_href(&record.request_id),
            ok: 0,
            failed: 0,
            items: Vec::new(),
            css: "warn",
        },
    };
    show(&headers, r, back, executed.as_ref().and_then(Executed::operation_id).unwrap_or(&record.request_id))
}

pub async fn approve_post(
    State(ui): State<UiState>,
    Extension(viewer): Extension<Viewer>,
    Extension(addr): Extension<ClientAddr>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Form(form): Form<Pairs>,
) -> Page {
    decide(ui, viewer, addr, headers, id, Params(form), Decision::Approve).await
}

pub async fn reject_post(
    State(ui): State<UiState>,
    Extension(viewer): Extension<Viewer>,
    Extension(addr): Extension<ClientAddr>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Form(form): Form<Pairs>,
) -> Page {
    decide(ui, viewer, addr, headers, id, Params(form), Decision::Reject).await
}

pub async fn drill_post(
    State(ui): State<UiState>,
    Extension(viewer): Extension<Viewer>,
    Extension(addr): Extension<ClientAddr>,
    headers: HeaderMap,
    Path(m): Path<String>,
    Form(form): Form<Pairs>,
) -> Page {
    let f = Params(form);
    check_csrf(&viewer, &f, &headers)?;
    require(&viewer, Role::Operator, "running a drill")?;
    let canary = f.get("canary_topic").trim().to_string();
    let options = DrillOptions { canary_topic: (!canary.is_empty()).then_some(canary), ..Default::default() };
    let back = view::mirror_href(&m);
    let call = PendingCall { drill: options.clone(), ..Default::default() };
    let entry = match gate(&ui, &viewer, &addr, &m, Some(ApprovalAction::Drill), call, &f).await? {
        Gate::Pending(a) => return show(&headers, pending_results(&a), back, &a.request_id),
        Gate::Run(entry) => entry,
    };
    let started = ui.app.engine.start_drill(&m, options, &actor(&viewer, &addr), None).await;
    if let Some(entry) = &entry {
        let executed = match &started {
            Ok(id) => Executed::Drill(id.clone()),
            Err(e) => Executed::Refused(e.clone()),
        };
        if let Err(e) = ui.app.engine.approval_ran(entry, &executed).await {
            tracing::warn!(entry = %entry.request_id, "cannot record what the break-glass drill did: {e}");
        }
    }
    let id = started.map_err(|e| UiError::engine(&e))?;
    tracing::info!(mirror = %m, drill = %id, identity = %viewer.name, "Dashboard drill.");
    let r = view::ResultsView {
        title: format!("DR drill {id} started: its progress is in the DR drills section"),
        operation_href: view::operation_href(&id),
        ok: 1,
        failed: 0,
        items: Vec::new(),
        css: "ok",
    };
    show(&headers, r, back, &id)
}

/// A drill's report as a file (the API's report, for a signed-in viewer).
pub async fn drill_report_get(State(ui): State<UiState>, Path((m, id, file)): Path<(String, String, String)>) -> Page {
    let d = ui.app.engine.drill(&id).filter(|d| d.mirror == m).ok_or_else(|| {
        UiError::new(StatusCode::NOT_FOUND, "Drill not found", format!("Mirror {m:?} has no drill {id:?}."))
    })?;
    let not_yet = || UiError::new(StatusCode::NOT_FOUND, "No report yet", "The drill is still running.".to_string());
    let (body, content_type, ext) = match file.as_str() {
        "report.json" => (d.report_json.clone().ok_or_else(not_yet)?, "application/json", "json"),
        "report.md" => (
            crate::domain::drill::markdown(d.report.as_ref().ok_or_else(not_yet)?),
            "text/markdown; charset=utf-8",
            "md",
        ),
        _ => return Err(UiError::new(StatusCode::NOT_FOUND, "Not found", "Use report.json or report.md.".to_string())),
    };
    let mut res = ([(header::CONTENT_TYPE, HeaderValue::from_static(content_type))], body).into_response();
    if let Ok(v) = HeaderValue::from_str(&format!("attachment; filename=\"kmirror-drill-{id}.{ext}\"")) {
        res.headers_mut().insert(header::CONTENT_DISPOSITION, v);
    }
    Ok(res)
}
