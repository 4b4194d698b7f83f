//! `kmirror approvals` and `kmirror drills`, and what every guarded command says before it
//! sends a call that needs a second person's approval.

use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use serde_json::{Value, json};

use super::http::{Failure, Server, check_name, parse};
use super::output::{self, Format};
use super::types::{
    ApprovalPendingView, ApprovalView, ApprovalsResponse, DecisionResponse, DrillStartedView, DrillView,
    DrillsResponse, MirrorView,
};
use super::{Conn, parse_duration};

#[derive(Debug, Args)]
pub struct ApprovalsArgs {
    #[command(flatten)]
    pub conn: Conn,
    #[command(subcommand)]
    pub command: ApprovalsCommand,
}

#[derive(Debug, Subcommand)]
pub enum ApprovalsCommand {
    /// Requests for calls that need a second person's approval, newest first.
    List {
        /// Only this mirror's.
        #[arg(long)]
        mirror: Option<String>,
        /// Only requests with this status (`pending`, `executed`, `rejected`, `expired`, ...).
        #[arg(long)]
        status: Option<String>,
    },
    /// One request: the call, who asked and why, where it stands.
    Show {
        /// The request's ID.
        id: String,
    },
    /// Approve a request (another operator than the one who asked): the call runs at once.
    Approve {
        /// The request's ID.
        id: String,
        /// A note for the audit trail.
        #[arg(long)]
        reason: Option<String>,
    },
    /// Reject a request: nothing runs.
    Reject {
        /// The request's ID.
        id: String,
        /// Why (required: it goes to the audit trail).
        #[arg(long)]
        reason: String,
    },
}

#[derive(Debug, Args)]
pub struct DrillsArgs {
    #[command(flatten)]
    pub conn: Conn,
    #[command(subcommand)]
    pub command: DrillsCommand,
}

#[derive(Debug, Subcommand)]
pub enum DrillsCommand {
    /// Run a DR drill: rehearse the failover on a canary topic and report the RTO, loss and
    /// duplicates, the group's resume point and the mirror's live RPO.
    Run {
        /// The mirror's name.
        #[arg(long)]
        mirror: String,
        /// The canary topic (default `kmirror-drill.<mirror>`).
        #[arg(long)]
        canary_topic: Option<String>,
        /// Fail the drill when the failover takes longer (e.g. `30s`).
        #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
        rto_objective: Option<Duration>,
        /// Fail the drill when the mirror lags more at the failover (e.g. `1m`).
        #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
        rpo_objective: Option<Duration>,
        /// Why (required when the mirror's approval policy covers drills).
        #[arg(long)]
        reason: Option<String>,
        /// Admin only: run it now although the policy wants a second person (with --reason).
        #[arg(long)]
        break_glass: bool,
        /// Wait until the drill finished; exit code 1 when it failed.
        #[arg(long)]
        wait: bool,
        /// With --wait: give up after this long.
        #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = parse_duration, requires = "wait")]
        timeout: Duration,
    },
    /// A mirror's drills, newest first.
    List {
        /// The mirror's name.
        #[arg(long)]
        mirror: String,
    },
    /// A finished drill's report: Markdown, or the JSON exactly as signed with `--output json`.
    Report {
        /// The mirror's name.
        #[arg(long)]
        mirror: String,
        /// The drill's ID.
        id: String,
    },
}

fn check_id(id: &str) -> Result<(), Failure> {
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
        return Err(Failure::Usage(format!("{id:?} is not a request or operation ID")));
    }
    Ok(())
}

/// Before a guarded call: whether the mirror's approval policy covers `action`. Says so on
/// standard error (the call will wait for a second person), and refuses to send it without a
/// reason. `None` from a server without approval policies.
pub async fn announce(
    server: &Server,
    mirror: &str,
    action: &str,
    reason: Option<&str>,
    break_glass: bool,
) -> Result<bool, Failure> {
    let m: MirrorView = server.get(&format!("/api/v1/mirrors/{mirror}"), &[]).await?;
    let Some(policy) = m.approval else { return Ok(false) };
    if !policy.required_for.iter().any(|a| a == action) {
        return Ok(false);
    }
    let reason_given = reason.is_some_and(|r| !r.trim().is_empty());
    if break_glass {
        eprintln!(
            "kmirror: mirror {mirror} needs a second person's approval for {action}: running it now with break-glass (admins only; recorded)"
        );
    } else {
        eprintln!(
            "kmirror: mirror {mirror} needs a second person's approval for {action}: this sends a request that another \
             operator approves (kmirror approvals approve <id>) within {} s; nothing runs until then",
            policy.expires_after_seconds
        );
    }
    if !reason_given {
        return Err(Failure::Usage(format!("mirror {mirror} needs a reason for {action}: give --reason \"...\"")));
    }
    Ok(true)
}

/// Prints a request that now waits for a second person (the 202 answer).
pub fn print_pending(v: &Value, format: Format) -> Result<(), Failure> {
    if format == Format::Json {
        output::print_json(v);
        return Ok(());
    }
    let p: ApprovalPendingView = parse(v, "pending request")?;
    println!(
        "Request {} waits for a second person's approval until {} ({} asked by {}: {})",
        p.operation_id, p.approval.expires_at, p.approval.action, p.approval.requested_by, p.approval.reason
    );
    println!("Another operator approves it with: kmirror approvals approve {}", p.operation_id);
    Ok(())
}

fn approvals_table(items: &[ApprovalView]) {
    let mut t = output::table(&["ID", "MIRROR", "ACTION", "STATUS", "ASKED BY", "REASON", "DECIDED BY", "EXPIRES"]);
    for a in items {
        t.add_row(vec![
            a.id.clone(),
            a.mirror.clone(),
            a.action.clone(),
            a.status.clone(),
            a.requested_by.clone(),
            a.reason.clone(),
            a.decided_by.clone().unwrap_or_default(),
            a.expires_at.clone(),
        ]);
    }
    output::print_table(&t, "No approval request.");
}

pub async fn approvals(a: ApprovalsArgs) -> Result<(), Failure> {
    let server = Server::new(&a.conn)?;
    let format = a.conn.output;
    match a.command {
        ApprovalsCommand::List { mirror, status } => {
            let mut query = Vec::new();
            if let Some(m) = mirror {
                check_name("mirror", &m)?;
                query.push(("mirror", m));
            }
            if let Some(s) = status {
                query.push(("status", s));
            }
            let v: Value = server.get("/api/v1/approvals", &query).await?;
            if format == Format::Json {
                output::print_json(&v);
            } else {
                approvals_table(&parse::<ApprovalsResponse>(&v, "approvals")?.items);
            }
            Ok(())
        }
        ApprovalsCommand::Show { id } => {
            check_id(&id)?;
            let v: Value = server.get(&format!("/api/v1/approvals/{id}"), &[]).await?;
            if format == Format::Json {
                output::print_json(&v);
            } else {
                approvals_table(&[parse::<ApprovalView>(&v, "approval")?]);
            }
            Ok(())
        }
        ApprovalsCommand::Approve { id, reason } => {
            check_id(&id)?;
            let v: Value =
                server.post(&format!("/api/v1/approvals/{id}/approve"), &json!({ "reason": reason })).await?;
            decided(&v, format, "Approved")
        }
        ApprovalsCommand::Reject { id, reason } => {
            check_id(&id)?;
            let v: Value = server.post(&format!("/api/v1/approvals/{id}/reject"), &json!({ "reason": reason })).await?;
            decided(&v, format, "Rejected")
        }
    }
}

fn decided(v: &Value, format: Format, verb: &str) -> Result<(), Failure> {
    let d: DecisionResponse = parse(v, "decision")?;
    if format == Format::Json {
        output::print_json(v);
    } else {
        println!(
            "{verb} request {} ({} asked by {}): {}",
            d.approval.id, d.approval.action, d.approval.requested_by, d.approval.status
        );
        if let Some(op) = &d.approval.executed_operation_id {
            println!("It ran as operation {op} (kmirror operations show {op} --wait)");
        }
    }
    if let Some(e) = &d.error {
        super::http::report_item(&format!("request {}", d.approval.id), &e.problem_type, &e.detail);
        return Err(Failure::Failed("the approved call could not run".into()));
    }
    let failed = d.result.as_ref().map_or(0, |r| r.results.iter().filter(|t| !t.ok).count());
    if failed > 0 {
        return Err(Failure::Failed(format!("{failed} topic(s) of the approved call failed")));
    }
    Ok(())
}

fn print_drill(d: &DrillView) {
    let figures = d.report.as_ref().map(|r| r["figures"].clone()).unwrap_or(Value::Null);
    let pairs = [
        ("Drill", d.id.clone()),
        ("Mirror", d.mirror.clone()),
        ("Status", d.status.clone()),
        ("Asked by", d.requested_by.clone()),
        ("Canary", d.canary_topic.clone()),
        ("RTO (ms)", figures["rto_ms"].to_string()),
        ("Lost", figures["records_lost"].to_string()),
        ("Duplicated", figures["records_duplicated"].to_string()),
        ("Group resumed exactly", figures["group_resumed_exactly"].to_string()),
        (
            "Mirror lag at failover",
            format!("{} records, {} ms", figures["mirror_lag_records"], figures["mirror_lag_ms"]),
        ),
    ];
    println!("{}", output::pairs(&pairs));
    for s in &d.steps {
        println!("  {:<14} {:<8} {}", s.name, s.status, s.detail.as_deref().unwrap_or(""));
    }
}

pub async fn drills(a: DrillsArgs) -> Result<(), Failure> {
    let server = Server::new(&a.conn)?;
    let format = a.conn.output;
    match a.command {
        DrillsCommand::Run {
            mirror,
            canary_topic,
            rto_objective,
            rpo_objective,
            reason,
            break_glass,
            wait,
            timeout,
        } => {
            check_name("mirror", &mirror)?;
            announce(&server, &mirror, "drill", reason.as_deref(), break_glass).await?;
            let body = json!({
                "canary_topic": canary_topic,
                "rto_objective_seconds": rto_objective.map(|d| d.as_secs().max(1)),
                "rpo_objective_seconds": rpo_objective.map(|d| d.as_secs().max(1)),
                "reason": reason,
                "break_glass": break_glass,
            });
            let v: Value = server.post(&format!("/api/v1/mirrors/{mirror}/drills"), &body).await?;
            let started: DrillStartedView = parse(&v, "drill answer")?;
            if started.status == "pending_approval" {
                return print_pending(&v, format);
            }
            if !wait {
                if format == Format::Json {
                    output::print_json(&v);
                } else {
                    println!(
                        "Drill {} runs on mirror {mirror} (kmirror drills list --mirror {mirror})",
                        started.operation_id
                    );
                }
                return Ok(());
            }
            let path = format!("/api/v1/mirrors/{mirror}/drills/{}", started.operation_id);
            let deadline = Instant::now() + timeout;
            let (v, d) = loop {
                let v: Value = server.get(&path, &[]).await?;
                let d: DrillView = parse(&v, "drill")?;
                if d.status != "running" {
                    break (v, d);
                }
                if Instant::now() >= deadline {
                    return Err(Failure::Failed(format!("drill {} still runs after {timeout:?}", d.id)));
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            };
            if format == Format::Json {
                output::print_json(&v);
            } else {
                print_drill(&d);
            }
            if d.result.as_deref() == Some("pass") {
                Ok(())
            } else {
                Err(Failure::Failed(format!("drill {} {}", d.id, d.status)))
            }
        }
        DrillsCommand::List { mirror } => {
            check_name("mirror", &mirror)?;
            let v: Value = server.get(&format!("/api/v1/mirrors/{mirror}/drills"), &[]).await?;
            if format == Format::Json {
                output::print_json(&v);
                return Ok(());
            }
            let list: DrillsResponse = parse(&v, "drills")?;
            let mut t = output::table(&["DRILL", "STATUS", "ASKED BY", "STARTED", "RTO (ms)", "LOST", "DUPLICATED"]);
            for d in &list.items {
                let f = d.report.as_ref().map(|r| r["figures"].clone()).unwrap_or(Value::Null);
                t.add_row(vec![
                    d.id.clone(),
                    d.status.clone(),
                    d.requested_by.clone(),
                    d.requested_at.clone(),
                    f["rto_ms"].to_string(),
                    f["records_lost"].to_string(),
                    f["records_duplicated"].to_string(),
                ]);
            }
            output::print_table(&t, "No drill has run on this mirror yet.");
            Ok(())
        }
        DrillsCommand::Report { mirror, id } => {
            check_name("mirror", &mirror)?;
            check_id(&id)?;
            let file = if format == Format::Json { "report.json" } else { "report.md" };
            let text = server.get_text(&format!("/api/v1/mirrors/{mirror}/drills/{id}/{file}"), &[]).await?;
            print!("{text}");
            if !text.ends_with('\n') {
                println!();
            }
            Ok(())
        }
    }
}
