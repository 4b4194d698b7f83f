//! Mirrors as code: `apply -f mirrors.toml` makes the server's mirrors what the file says,
//! `export` writes today's mirrors in that format, `mirrors create -f` creates the file's
//! mirrors.
//!
//! The file (TOML):
//!
//! ```toml
//! [[mirror]]
//! name = "eu-to-us"
//! expected_source_cluster_id = "EEB8QEn5XPmjX3cKvknOpQ"   # optional
//! replication_throttle_bytes_per_sec = 52428800          # optional; 0: none
//! # topic_include = ["orders-.*"]  topic_exclude = [...]  # when the server has a topic policy
//!
//! [mirror.source]
//! bootstrap_servers = "eu-kafka-1:9092"
//!
//! [mirror.source.properties]
//! "security.protocol" = "SASL_SSL"
//! "sasl.username" = "mirror"
//! "sasl.password" = "${env:EU_MIRROR_PASSWORD}"   # resolved by the kmirror server
//!
//! [mirror.sync]                                   # optional; each key optional
//! topic_configs = true
//! group_offsets = true
//! acls = true
//! group_include = [".*"]
//! group_exclude = []
//! ```
//!
//! A key left out is left as it is on the server (except `source`, which is the whole source
//! connection: a property missing from the file is removed). Secret properties (every name not
//! on kmirror's public list, `domain::secrets`) are never printed: the diff says only whether
//! they change. Their values should be references (`${env:NAME}`, `${file:/path}`), which the
//! server stores and shows as they are, so they compare exactly; `"[redacted]"` means "keep the
//! stored secret". A plaintext secret cannot be compared (the server never shows a stored
//! secret): it is reported as not compared and sent only with a source change or with
//! `--update-secrets`.
//!
//! Changes are PATCHes with `If-Match` (the `ETag` read with the diff): a mirror changed by
//! someone else between the read and the write is refused (412 `precondition-failed`) instead of
//! overwritten.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};

use clap::Args;
use kmirror::domain::secrets::{REDACTED, Reference, is_secret_property};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::Conn;
use super::http::{Failure, Server, check_name, parse, report_item};
use super::output::{self, Format};
use super::types::{MirrorView, MirrorsResponse, SyncView};

#[derive(Debug, Args)]
pub struct ApplyArgs {
    /// The mirrors file (TOML).
    #[arg(short = 'f', long = "file", value_name = "FILE")]
    pub file: PathBuf,
    /// Only print the diff; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Also delete the mirrors the file does not define (asks first, unless --yes).
    #[arg(long)]
    pub prune: bool,
    /// Ask before changing anything.
    #[arg(long)]
    pub confirm: bool,
    /// Do not ask (for --prune and --confirm).
    #[arg(long)]
    pub yes: bool,
    /// Also send plaintext secret values, which cannot be compared with the stored ones.
    #[arg(long)]
    pub update_secrets: bool,
    #[command(flatten)]
    pub conn: Conn,
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Only this mirror (repeatable); every mirror by default.
    #[arg(long)]
    pub mirror: Vec<String>,
    #[command(flatten)]
    pub conn: Conn,
}

// ----- the file -----------------------------------------------------------------------------

/// A mirrors file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MirrorsFile {
    #[serde(default, rename = "mirror")]
    pub mirrors: Vec<MirrorDef>,
}

/// One desired mirror.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MirrorDef {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_source_cluster_id: Option<String>,
    /// 0: no throttle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replication_throttle_bytes_per_sec: Option<u64>,
    /// Topic policy (sent only to a server whose API has it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic_include: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic_exclude: Option<Vec<String>>,
    pub source: SourceDef,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync: Option<SyncDef>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceDef {
    pub bootstrap_servers: String,
    #[serde(default)]
    pub properties: BTreeMap<String, String>,
}

/// Sync settings; a key left out is left as it is (on create: the server's default).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SyncDef {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic_configs: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_offsets: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acls: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_include: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_exclude: Option<Vec<String>>,
}

/// Reads and checks a mirrors file (exit 2 when it cannot be used).
pub fn load(path: &Path) -> Result<MirrorsFile, Failure> {
    let text =
        std::fs::read_to_string(path).map_err(|e| Failure::Usage(format!("cannot read {}: {e}", path.display())))?;
    let file: MirrorsFile =
        toml::from_str(&text).map_err(|e| Failure::Usage(format!("{} is not a mirrors file: {e}", path.display())))?;
    let mut seen = BTreeSet::new();
    for m in &file.mirrors {
        check_name("mirror", &m.name).map_err(|e| match e {
            Failure::Usage(u) => Failure::Usage(format!("{}: {u}", path.display())),
            other => other,
        })?;
        if !seen.insert(m.name.as_str()) {
            return Err(Failure::Usage(format!("{}: mirror {:?} is defined twice", path.display(), m.name)));
        }
        if m.source.bootstrap_servers.trim().is_empty() {
            return Err(Failure::Usage(format!(
                "{}: mirror {:?}: source.bootstrap_servers is empty",
                path.display(),
                m.name
            )));
        }
    }
    Ok(file)
}

/// Whether the server's API has the topic policy (`topic_include` / `topic_exclude` on a
/// mirror), from its public OpenAPI document.
async fn has_topic_policy(server: &Server) -> Result<bool, Failure> {
    let spec: Value = server.get("/api/v1/openapi.json", &[]).await?;
    Ok(spec["components"]["schemas"]["Mirror"]["properties"]["topic_include"].is_object())
}

fn uses_topic_policy(file: &MirrorsFile) -> bool {
    file.mirrors.iter().any(|m| m.topic_include.is_some() || m.topic_exclude.is_some())
}

// ----- the diff -----------------------------------------------------------------------------

/// One field's change. Secret values are never part of it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    pub field: String,
    #[serde(flatten)]
    pub kind: ChangeKind,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "change", rename_all = "snake_case")]
pub enum ChangeKind {
    /// A shown value changes.
    Set {
        from: Value,
        to: Value,
    },
    Added {
        value: Value,
    },
    Removed {
        was: Value,
    },
    /// Secrets: whether, never what.
    SecretChanged,
    SecretAdded,
    SecretRemoved,
    /// A plaintext secret the server shows only as `[redacted]`; `sent`: it goes with this apply.
    SecretNotCompared {
        sent: bool,
    },
    /// The file sets it; this server does not have it (yet).
    Ignored {
        reason: String,
    },
}

impl ChangeKind {
    /// Whether it makes the mirror differ (notes do not).
    fn is_change(&self) -> bool {
        !matches!(self, ChangeKind::SecretNotCompared { .. } | ChangeKind::Ignored { .. })
    }
}

fn show(v: &Value) -> String {
    match v {
        Value::Null => "none".into(),
        other => other.to_string(),
    }
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let field = &self.field;
        match &self.kind {
            ChangeKind::Set { from, to } => write!(f, "~ {field}: {} -> {}", show(from), show(to)),
            ChangeKind::Added { value } => write!(f, "+ {field} = {}", show(value)),
            ChangeKind::Removed { was } => write!(f, "- {field} (was {})", show(was)),
            ChangeKind::SecretChanged => write!(f, "~ {field}: changed (secret)"),
            ChangeKind::SecretAdded => write!(f, "+ {field}: set (secret)"),
            ChangeKind::SecretRemoved => write!(f, "- {field} (secret)"),
            ChangeKind::SecretNotCompared { sent: true } => {
                write!(f, "? {field}: not compared (a stored secret is never shown); sent with the source")
            }
            ChangeKind::SecretNotCompared { sent: false } => {
                write!(f, "? {field}: not compared (a stored secret is never shown); kept (--update-secrets sends it)")
            }
            ChangeKind::Ignored { reason } => write!(f, "! {field}: ignored: {reason}"),
        }
    }
}

/// What apply does with one mirror.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Action {
    Create {
        #[serde(skip)]
        body: Value,
        changes: Vec<Change>,
    },
    Change {
        #[serde(skip)]
        etag: Option<String>,
        #[serde(skip)]
        body: Value,
        changes: Vec<Change>,
    },
    Unchanged {
        notes: Vec<Change>,
    },
    /// `--prune`: not in the file.
    Delete,
    /// Not in the file, kept (no `--prune`).
    Keep,
    /// The file's definition cannot be applied (e.g. `[redacted]` for a secret the server does
    /// not have).
    Invalid {
        error: String,
    },
}

#[derive(Debug, Clone, Serialize)]
pub struct Planned {
    pub name: String,
    #[serde(flatten)]
    pub action: Action,
    /// After the write: `created`, `changed`, `deleted`, `failed` (with `error`), `skipped`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<super::http::Problem>,
}

fn is_reference(v: &str) -> bool {
    Reference::parse(v).is_some()
}

/// A property is treated as secret when kmirror's rule says so or the server redacts it.
fn secret(name: &str, shown: Option<&str>) -> bool {
    is_secret_property(name) || shown == Some(REDACTED)
}

/// The properties' changes and whether the source must be sent.
fn property_changes(
    desired: &BTreeMap<String, String>,
    current: &BTreeMap<String, String>,
    changes: &mut Vec<Change>,
) -> Result<(), String> {
    let keys: BTreeSet<&String> = desired.keys().chain(current.keys()).collect();
    for k in keys {
        let field = format!("source.properties.{k}");
        let (d, c) = (desired.get(k), current.get(k));
        let is_secret = secret(k, c.map(String::as_str));
        let kind = match (d, c) {
            (Some(d), None) if d == REDACTED => {
                return Err(format!(
                    "{field} is \"{REDACTED}\" but the server stores no value to keep: give the value or a reference"
                ));
            }
            (Some(d), None) => {
                if is_secret {
                    ChangeKind::SecretAdded
                } else {
                    ChangeKind::Added { value: json!(d) }
                }
            }
            (None, Some(c)) => {
                if is_secret {
                    ChangeKind::SecretRemoved
                } else {
                    ChangeKind::Removed { was: json!(c) }
                }
            }
            (Some(d), Some(c)) if is_secret => {
                if d == REDACTED || d == c {
                    continue;
                } else if c == REDACTED && !is_reference(d) {
                    ChangeKind::SecretNotCompared { sent: false }
                } else {
                    ChangeKind::SecretChanged
                }
            }
            (Some(d), Some(c)) => {
                if d == c {
                    continue;
                }
                ChangeKind::Set { from: json!(c), to: json!(d) }
            }
            (None, None) => continue,
        };
        changes.push(Change { field, kind });
    }
    Ok(())
}

/// The throttle as the server models it (`None`: no throttle).
fn throttle(rate: Option<u64>) -> Option<u64> {
    rate.filter(|r| *r > 0)
}

/// The server's sync settings with the file's keys over them.
fn merged_sync(current: &SyncView, d: &SyncDef) -> SyncView {
    SyncView {
        topic_configs: d.topic_configs.unwrap_or(current.topic_configs),
        group_offsets: d.group_offsets.unwrap_or(current.group_offsets),
        acls: d.acls.unwrap_or(current.acls),
        group_include: d.group_include.clone().unwrap_or_else(|| current.group_include.clone()),
        group_exclude: d.group_exclude.clone().unwrap_or_else(|| current.group_exclude.clone()),
    }
}

const NO_TOPIC_POLICY: &str = "this server's API has no topic policy yet";

/// The change of one existing mirror.
pub fn diff(
    d: &MirrorDef,
    c: &MirrorView,
    etag: Option<String>,
    topic_policy: bool,
    update_secrets: bool,
) -> Result<Action, String> {
    let mut changes = Vec::new();
    let mut body = serde_json::Map::new();
    // Source.
    if d.source.bootstrap_servers != c.source.bootstrap_servers {
        changes.push(Change {
            field: "source.bootstrap_servers".into(),
            kind: ChangeKind::Set { from: json!(c.source.bootstrap_servers), to: json!(d.source.bootstrap_servers) },
        });
    }
    property_changes(&d.source.properties, &c.source.properties, &mut changes)?;
    let source_changed = changes.iter().any(|ch| ch.kind.is_change());
    let not_compared = changes.iter().any(|ch| matches!(ch.kind, ChangeKind::SecretNotCompared { .. }));
    if source_changed || (update_secrets && not_compared) {
        for ch in &mut changes {
            if let ChangeKind::SecretNotCompared { sent } = &mut ch.kind {
                *sent = true;
            }
        }
        body.insert(
            "source".into(),
            json!({ "bootstrap_servers": d.source.bootstrap_servers, "properties": d.source.properties }),
        );
    }
    // Expected source cluster ID (left alone when the file does not say).
    if let Some(id) = &d.expected_source_cluster_id
        && c.expected_source_cluster_id.as_ref() != Some(id)
    {
        changes.push(Change {
            field: "expected_source_cluster_id".into(),
            kind: ChangeKind::Set { from: json!(c.expected_source_cluster_id), to: json!(id) },
        });
        body.insert("expected_source_cluster_id".into(), json!(id));
    }
    // Throttle.
    if let Some(rate) = d.replication_throttle_bytes_per_sec
        && throttle(Some(rate)) != c.replication_throttle_bytes_per_sec
    {
        changes.push(Change {
            field: "replication_throttle_bytes_per_sec".into(),
            kind: ChangeKind::Set {
                from: json!(c.replication_throttle_bytes_per_sec),
                to: json!(throttle(Some(rate))),
            },
        });
        body.insert("replication_throttle_bytes_per_sec".into(), json!(rate));
    }
    // Sync.
    if let Some(s) = &d.sync {
        match &c.sync {
            None => changes.push(Change {
                field: "sync".into(),
                kind: ChangeKind::Ignored { reason: "this server does not report its sync settings".into() },
            }),
            Some(current) => {
                let want = merged_sync(current, s);
                let before = serde_json::to_value(current).unwrap_or_default();
                let after = serde_json::to_value(&want).unwrap_or_default();
                let mut any = false;
                for key in ["topic_configs", "group_offsets", "acls", "group_include", "group_exclude"] {
                    if before[key] != after[key] {
                        any = true;
                        changes.push(Change {
                            field: format!("sync.{key}"),
                            kind: ChangeKind::Set { from: before[key].clone(), to: after[key].clone() },
                        });
                    }
                }
                if any {
                    body.insert("sync".into(), after);
                }
            }
        }
    }
    // Topic policy.
    for (key, want, have) in
        [("topic_include", &d.topic_include, &c.topic_include), ("topic_exclude", &d.topic_exclude, &c.topic_exclude)]
    {
        let Some(want) = want else { continue };
        if !topic_policy {
            changes.push(Change { field: key.into(), kind: ChangeKind::Ignored { reason: NO_TOPIC_POLICY.into() } });
        } else if have.as_ref() != Some(want) {
            changes.push(Change { field: key.into(), kind: ChangeKind::Set { from: json!(have), to: json!(want) } });
            body.insert(key.into(), json!(want));
        }
    }
    Ok(if body.is_empty() {
        Action::Unchanged { notes: changes }
    } else {
        Action::Change { etag, body: Value::Object(body), changes }
    })
}

/// The create of a mirror the server does not have: its body and its fields as additions.
pub fn creation(d: &MirrorDef, topic_policy: bool) -> Result<Action, String> {
    let mut changes = vec![Change {
        field: "source.bootstrap_servers".into(),
        kind: ChangeKind::Added { value: json!(d.source.bootstrap_servers) },
    }];
    property_changes(&d.source.properties, &BTreeMap::new(), &mut changes)?;
    let mut body = json!({
        "name": d.name,
        "source": { "bootstrap_servers": d.source.bootstrap_servers, "properties": d.source.properties },
    });
    if let Some(id) = &d.expected_source_cluster_id {
        changes
            .push(Change { field: "expected_source_cluster_id".into(), kind: ChangeKind::Added { value: json!(id) } });
        body["expected_source_cluster_id"] = json!(id);
    }
    if let Some(rate) = d.replication_throttle_bytes_per_sec {
        if rate > 0 {
            changes.push(Change {
                field: "replication_throttle_bytes_per_sec".into(),
                kind: ChangeKind::Added { value: json!(rate) },
            });
        }
        body["replication_throttle_bytes_per_sec"] = json!(rate);
    }
    if let Some(s) = &d.sync {
        let v = serde_json::to_value(s).unwrap_or_default();
        if let Some(o) = v.as_object() {
            for (k, val) in o {
                changes.push(Change { field: format!("sync.{k}"), kind: ChangeKind::Added { value: val.clone() } });
            }
        }
        body["sync"] = v;
    }
    for (key, want) in [("topic_include", &d.topic_include), ("topic_exclude", &d.topic_exclude)] {
        let Some(want) = want else { continue };
        if topic_policy {
            changes.push(Change { field: key.into(), kind: ChangeKind::Added { value: json!(want) } });
            body[key] = json!(want);
        } else {
            changes.push(Change { field: key.into(), kind: ChangeKind::Ignored { reason: NO_TOPIC_POLICY.into() } });
        }
    }
    Ok(Action::Create { body, changes })
}

/// Reads every mirror with its version.
async fn current_mirrors(server: &Server) -> Result<Vec<(MirrorView, Option<String>)>, Failure> {
    let list: MirrorsResponse = server.get("/api/v1/mirrors", &[]).await?;
    let mut out = Vec::new();
    for m in list.mirrors {
        match server.get_tagged::<Value>(&format!("/api/v1/mirrors/{}", m.name)).await {
            Ok((v, etag)) => out.push((parse(&v, "mirror")?, etag)),
            // Deleted since the listing: it is simply not there.
            Err(Failure::Problem(p)) if p.problem_type == "mirror-not-found" => {}
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

/// The whole plan, in file order, then the server's other mirrors by name.
async fn plan(server: &Server, file: &MirrorsFile, prune: bool, update_secrets: bool) -> Result<Vec<Planned>, Failure> {
    let topic_policy = uses_topic_policy(file) && has_topic_policy(server).await?;
    let mut current: BTreeMap<String, (MirrorView, Option<String>)> =
        current_mirrors(server).await?.into_iter().map(|(m, e)| (m.name.clone(), (m, e))).collect();
    let mut out = Vec::new();
    for d in &file.mirrors {
        let action = match current.remove(&d.name) {
            None => creation(d, topic_policy),
            Some((c, etag)) => diff(d, &c, etag, topic_policy, update_secrets),
        };
        let action = action.unwrap_or_else(|error| Action::Invalid { error });
        out.push(Planned { name: d.name.clone(), action, result: None, problem: None });
    }
    for name in current.into_keys() {
        out.push(Planned {
            name,
            action: if prune { Action::Delete } else { Action::Keep },
            result: None,
            problem: None,
        });
    }
    Ok(out)
}

/// The diff as text.
fn print_plan(plan: &[Planned]) {
    for p in plan {
        match &p.action {
            Action::Create { changes, .. } => {
                println!("mirror {}: create", p.name);
                for c in changes {
                    println!("  {c}");
                }
            }
            Action::Change { changes, .. } => {
                println!("mirror {}: change", p.name);
                for c in changes {
                    println!("  {c}");
                }
            }
            Action::Unchanged { notes } => {
                println!("mirror {}: unchanged", p.name);
                for c in notes {
                    println!("  {c}");
                }
            }
            Action::Delete => println!("mirror {}: delete (not in the file; --prune)", p.name),
            Action::Keep => println!("mirror {}: not in the file (kept; --prune deletes it)", p.name),
            Action::Invalid { error } => println!("mirror {}: cannot apply: {error}", p.name),
        }
    }
}

fn count(plan: &[Planned], f: impl Fn(&Action) -> bool) -> usize {
    plan.iter().filter(|p| f(&p.action)).count()
}

/// Asks on the terminal (or reads the answer from standard input); end of input is a no.
fn ask(question: &str) -> bool {
    eprint!("{question} [y/N] ");
    let _ = std::io::stderr().flush();
    let mut line = String::new();
    match std::io::stdin().lock().read_line(&mut line) {
        Ok(0) | Err(_) => {
            eprintln!();
            false
        }
        Ok(_) => matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes"),
    }
}

pub async fn apply(a: ApplyArgs) -> Result<(), Failure> {
    let file = load(&a.file)?;
    let server = Server::new(&a.conn)?;
    let format = a.conn.output;
    let mut plan = plan(&server, &file, a.prune, a.update_secrets).await?;
    let creates = count(&plan, |a| matches!(a, Action::Create { .. }));
    let changes = count(&plan, |a| matches!(a, Action::Change { .. }));
    let deletes = count(&plan, |a| matches!(a, Action::Delete));
    let unchanged = count(&plan, |a| matches!(a, Action::Unchanged { .. }));
    let invalid = count(&plan, |a| matches!(a, Action::Invalid { .. }));
    if format == Format::Table {
        print_plan(&plan);
    }
    let summary = format!(
        "{creates} to create, {changes} to change, {deletes} to delete, {unchanged} unchanged{}",
        if invalid > 0 { format!(", {invalid} invalid") } else { String::new() }
    );
    let finish = |plan: &[Planned], applied: bool| {
        if format == Format::Json {
            output::print_json(&json!({ "dry_run": a.dry_run, "applied": applied, "mirrors": plan }));
        }
    };
    if invalid > 0 {
        finish(&plan, false);
        for p in &plan {
            if let Action::Invalid { error } = &p.action {
                eprintln!("kmirror: mirror {}: {error}", p.name);
            }
        }
        return Err(Failure::Failed(format!(
            "nothing changed: the file has {invalid} mirror(s) that cannot be applied"
        )));
    }
    if creates + changes + deletes == 0 {
        if format == Format::Table {
            println!("No changes: {unchanged} mirror(s) unchanged.");
        }
        finish(&plan, false);
        return Ok(());
    }
    if a.dry_run {
        if format == Format::Table {
            println!("Plan: {summary} (dry run: nothing changed).");
        }
        finish(&plan, false);
        return Ok(());
    }
    if !a.yes && (a.confirm || deletes > 0) {
        let question = if deletes > 0 {
            let names: Vec<&str> =
                plan.iter().filter(|p| matches!(p.action, Action::Delete)).map(|p| p.name.as_str()).collect();
            format!("Apply {summary}, deleting {}?", names.join(", "))
        } else {
            format!("Apply {summary}?")
        };
        if !std::io::stdin().is_terminal() {
            eprintln!("kmirror: reading the answer from standard input (--yes does not ask)");
        }
        if !ask(&question) {
            finish(&plan, false);
            return Err(Failure::Failed("not confirmed: nothing changed".into()));
        }
    }
    let mut failed = 0;
    for p in &mut plan {
        let path = format!("/api/v1/mirrors/{}", p.name);
        let outcome = match &p.action {
            Action::Create { body, .. } => server.post::<Value>("/api/v1/mirrors", body).await.map(|_| "created"),
            Action::Change { etag, body, .. } => {
                if etag.is_none() {
                    eprintln!(
                        "kmirror: mirror {}: the server sent no ETag, so a change made since the read cannot be detected",
                        p.name
                    );
                }
                server.patch::<Value>(&path, body, etag.as_deref()).await.map(|_| "changed")
            }
            Action::Delete => server.delete(&path).await.map(|()| "deleted"),
            _ => continue,
        };
        match outcome {
            Ok(done) => {
                if format == Format::Table {
                    println!("{} mirror {}", capitalised(done), p.name);
                }
                p.result = Some(done.into());
            }
            Err(Failure::Problem(problem)) => {
                failed += 1;
                if problem.problem_type == "precondition-failed" {
                    report_item(
                        &format!("mirror {}", p.name),
                        &problem.problem_type,
                        &format!(
                            "it was changed on the server after this apply read it; nothing was overwritten: run apply again to see the new diff ({})",
                            problem.detail
                        ),
                    );
                } else {
                    report_item(&format!("mirror {}", p.name), &problem.problem_type, &problem.detail);
                }
                p.result = Some("failed".into());
                p.problem = Some(problem);
            }
            Err(other) => {
                // Authentication or connection: the rest would fail the same way.
                finish(&plan, true);
                return Err(other);
            }
        }
    }
    finish(&plan, true);
    if failed > 0 {
        return Err(Failure::Failed(format!("{failed} mirror(s) could not be applied")));
    }
    if format == Format::Table {
        println!("Applied: {creates} created, {changes} changed, {deletes} deleted, {unchanged} unchanged.");
    }
    Ok(())
}

fn capitalised(s: &str) -> String {
    let mut c = s.chars();
    c.next().map(|f| f.to_uppercase().chain(c).collect()).unwrap_or_default()
}

/// `mirrors create -f FILE`: creates every mirror of the file.
pub async fn create(server: &Server, format: Format, path: &Path) -> Result<(), Failure> {
    let file = load(path)?;
    if file.mirrors.is_empty() {
        return Err(Failure::Usage(format!("{} defines no mirror", path.display())));
    }
    let topic_policy = uses_topic_policy(&file) && has_topic_policy(server).await?;
    let mut failed = 0;
    let mut results = Vec::new();
    for d in &file.mirrors {
        let body = match creation(d, topic_policy) {
            Ok(Action::Create { body, changes }) => {
                for c in changes.iter().filter(|c| matches!(c.kind, ChangeKind::Ignored { .. })) {
                    eprintln!("kmirror: mirror {}: {c}", d.name);
                }
                body
            }
            Ok(_) => continue,
            Err(e) => {
                failed += 1;
                eprintln!("kmirror: mirror {}: {e}", d.name);
                results.push(json!({ "name": d.name, "created": false, "error": e }));
                continue;
            }
        };
        match server.post::<Value>("/api/v1/mirrors", &body).await {
            Ok(v) => {
                if format == Format::Table {
                    println!("Created mirror {}", d.name);
                }
                results.push(json!({ "name": d.name, "created": true, "mirror": v }));
            }
            Err(Failure::Problem(p)) => {
                failed += 1;
                report_item(&format!("mirror {}", d.name), &p.problem_type, &p.detail);
                results.push(json!({ "name": d.name, "created": false, "problem": p }));
            }
            Err(other) => return Err(other),
        }
    }
    if format == Format::Json {
        output::print_json(&json!({ "mirrors": results }));
    }
    if failed > 0 {
        return Err(Failure::Failed(format!("{failed} of {} mirror(s) not created", file.mirrors.len())));
    }
    Ok(())
}

// ----- export -------------------------------------------------------------------------------

/// A mirror as the file writes it: everything it manages stated, secrets as the server shows
/// them (a reference, or `[redacted]`: keep the stored value).
pub fn definition(m: &MirrorView) -> MirrorDef {
    MirrorDef {
        name: m.name.clone(),
        expected_source_cluster_id: m.expected_source_cluster_id.clone(),
        replication_throttle_bytes_per_sec: Some(m.replication_throttle_bytes_per_sec.unwrap_or(0)),
        topic_include: m.topic_include.clone(),
        topic_exclude: m.topic_exclude.clone(),
        source: SourceDef {
            bootstrap_servers: m.source.bootstrap_servers.clone(),
            properties: m
                .source
                .properties
                .iter()
                .map(|(k, v)| {
                    // The server already redacts; never write a secret that is not a reference.
                    let shown =
                        if is_secret_property(k) && !is_reference(v) { REDACTED.to_string() } else { v.clone() };
                    (k.clone(), shown)
                })
                .collect(),
        },
        sync: m.sync.as_ref().map(|s| SyncDef {
            topic_configs: Some(s.topic_configs),
            group_offsets: Some(s.group_offsets),
            acls: Some(s.acls),
            group_include: Some(s.group_include.clone()),
            group_exclude: Some(s.group_exclude.clone()),
        }),
    }
}

pub fn to_toml(file: &MirrorsFile, url: &str) -> Result<String, Failure> {
    let body = toml::to_string(file).map_err(|e| Failure::Failed(format!("cannot write TOML: {e}")))?;
    Ok(format!(
        "# kmirror mirrors exported from {url}. Apply with `kmirror apply -f FILE`.\n\
         # Secret properties show as references (${{env:NAME}}, ${{file:/path}}) or \"{REDACTED}\", which apply\n\
         # reads as \"keep the stored value\".\n\n{body}"
    ))
}

pub async fn export(a: ExportArgs) -> Result<(), Failure> {
    for m in &a.mirror {
        check_name("mirror", m)?;
    }
    let server = Server::new(&a.conn)?;
    let list: MirrorsResponse = server.get("/api/v1/mirrors", &[]).await?;
    let wanted: BTreeSet<&str> = a.mirror.iter().map(String::as_str).collect();
    let missing: Vec<&&str> = wanted.iter().filter(|w| !list.mirrors.iter().any(|m| m.name.as_str() == **w)).collect();
    if let Some(m) = missing.first() {
        return Err(Failure::Problem(super::http::Problem {
            problem_type: "mirror-not-found".into(),
            title: "Mirror not found".into(),
            status: 404,
            detail: format!("mirror {m:?} does not exist"),
        }));
    }
    let file = MirrorsFile {
        mirrors: list
            .mirrors
            .iter()
            .filter(|m| wanted.is_empty() || wanted.contains(m.name.as_str()))
            .map(definition)
            .collect(),
    };
    for m in &list.mirrors {
        if m.sync.is_none() {
            eprintln!("kmirror: mirror {}: the server does not report its sync settings; not exported", m.name);
        }
    }
    print!("{}", to_toml(&file, server.url())?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(props: &[(&str, &str)]) -> MirrorView {
        MirrorView {
            name: "m".into(),
            source: super::super::types::SourceView {
                bootstrap_servers: "src:9092".into(),
                properties: props.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            },
            expected_source_cluster_id: Some("id-1".into()),
            observed_source_cluster_id: Some("id-1".into()),
            source_cluster_id_status: "ok".into(),
            data_path: "running".into(),
            created_at: String::new(),
            topic_count: 0,
            partition_count: 0,
            state_counts: BTreeMap::new(),
            lag_records: 0,
            lag_seconds: 0.0,
            replication_throttle_bytes_per_sec: None,
            sync: Some(SyncView {
                topic_configs: true,
                group_offsets: true,
                acls: true,
                group_include: vec![".*".into()],
                group_exclude: vec![],
            }),
            topic_include: None,
            topic_exclude: None,
            approval: None,
        }
    }

    fn changes(a: &Action) -> Vec<String> {
        match a {
            Action::Create { changes, .. } | Action::Change { changes, .. } | Action::Unchanged { notes: changes } => {
                changes.iter().map(|c| c.to_string()).collect()
            }
            _ => vec![],
        }
    }

    #[test]
    fn an_export_applies_as_unchanged() {
        let v = view(&[("client.id", "x"), ("sasl.password", "[redacted]"), ("ssl.key.password", "${env:KEY_PW}")]);
        let d = definition(&v);
        assert_eq!(d.source.properties["sasl.password"], REDACTED);
        let a = diff(&d, &v, Some("\"e\"".into()), false, false).unwrap();
        assert!(matches!(&a, Action::Unchanged { notes } if notes.is_empty()), "{a:?}");
        // And through TOML.
        let text = to_toml(&MirrorsFile { mirrors: vec![d.clone()] }, "http://x").unwrap();
        let back: MirrorsFile = toml::from_str(&text).unwrap();
        assert_eq!(back.mirrors, vec![d]);
    }

    #[test]
    fn field_changes_are_shown_and_secret_values_never() {
        let v = view(&[("client.id", "x"), ("sasl.password", "${env:OLD_PW}"), ("sasl.username", "u")]);
        let mut d = definition(&v);
        d.source.bootstrap_servers = "other:9092".into();
        d.source.properties.insert("client.id".into(), "y".into());
        d.source.properties.insert("sasl.password".into(), "${env:NEW_PW}".into());
        d.source.properties.remove("sasl.username");
        d.source.properties.insert("ssl.key.password".into(), "hunter2-value".into());
        d.replication_throttle_bytes_per_sec = Some(4096);
        d.sync = Some(SyncDef { acls: Some(false), ..Default::default() });
        let a = diff(&d, &v, Some("\"e\"".into()), false, false).unwrap();
        let lines = changes(&a);
        assert_eq!(
            lines,
            vec![
                "~ source.bootstrap_servers: \"src:9092\" -> \"other:9092\"",
                "~ source.properties.client.id: \"x\" -> \"y\"",
                "~ source.properties.sasl.password: changed (secret)",
                "- source.properties.sasl.username (was \"u\")",
                "+ source.properties.ssl.key.password: set (secret)",
                "~ replication_throttle_bytes_per_sec: none -> 4096",
                "~ sync.acls: true -> false",
            ]
        );
        let text = lines.join("\n") + &serde_json::to_string(&a).unwrap();
        for secret in ["OLD_PW", "NEW_PW", "hunter2"] {
            assert!(!text.contains(secret), "{secret} shown: {text}");
        }
        let Action::Change { body, etag, .. } = a else { panic!() };
        assert_eq!(etag.as_deref(), Some("\"e\""));
        assert_eq!(body["source"]["bootstrap_servers"], "other:9092");
        assert_eq!(body["sync"]["acls"], false);
        assert_eq!(body["sync"]["group_include"], json!([".*"]));
        assert_eq!(body["replication_throttle_bytes_per_sec"], 4096);
        assert!(body.get("expected_source_cluster_id").is_none());
    }

    #[test]
    fn plaintext_secrets_cannot_be_compared() {
        let v = view(&[("sasl.password", "[redacted]")]);
        let mut d = definition(&v);
        d.source.properties.insert("sasl.password".into(), "plain-value".into());
        let a = diff(&d, &v, None, false, false).unwrap();
        assert!(matches!(&a, Action::Unchanged { .. }), "{a:?}");
        assert!(changes(&a)[0].contains("not compared") && changes(&a)[0].contains("kept"));
        let a = diff(&d, &v, None, false, true).unwrap();
        let Action::Change { body, .. } = &a else { panic!("{a:?}") };
        assert_eq!(body["source"]["properties"]["sasl.password"], "plain-value");
        assert!(changes(&a)[0].contains("sent with the source"));
        // A reference instead of a stored plaintext secret is a change.
        d.source.properties.insert("sasl.password".into(), "${env:PW}".into());
        assert_eq!(
            changes(&diff(&d, &v, None, false, false).unwrap()),
            vec!["~ source.properties.sasl.password: changed (secret)"]
        );
    }

    #[test]
    fn redacted_without_a_stored_value_is_refused() {
        let v = view(&[]);
        let mut d = definition(&v);
        d.source.properties.insert("sasl.password".into(), REDACTED.into());
        assert!(diff(&d, &v, None, false, false).unwrap_err().contains("stores no value"));
        assert!(creation(&d, false).is_err());
    }

    #[test]
    fn absent_keys_are_left_alone_and_the_topic_policy_waits_for_the_server() {
        let mut v = view(&[]);
        v.replication_throttle_bytes_per_sec = Some(2048);
        let d = MirrorDef {
            name: "m".into(),
            expected_source_cluster_id: None,
            replication_throttle_bytes_per_sec: None,
            topic_include: Some(vec!["orders-.*".into()]),
            topic_exclude: None,
            source: SourceDef { bootstrap_servers: "src:9092".into(), properties: BTreeMap::new() },
            sync: None,
        };
        let a = diff(&d, &v, None, false, false).unwrap();
        assert!(matches!(a, Action::Unchanged { .. }));
        assert_eq!(changes(&a), vec![format!("! topic_include: ignored: {NO_TOPIC_POLICY}")]);
        // A server that has it: compared and sent.
        let a = diff(&d, &v, None, true, false).unwrap();
        let Action::Change { body, .. } = a else { panic!() };
        assert_eq!(body["topic_include"], json!(["orders-.*"]));
        // Throttle 0 is "none".
        let d0 = MirrorDef { replication_throttle_bytes_per_sec: Some(0), topic_include: None, ..d };
        let Action::Change { body, changes, .. } = diff(&d0, &v, None, false, false).unwrap() else { panic!() };
        assert_eq!(body["replication_throttle_bytes_per_sec"], 0);
        assert_eq!(changes[0].to_string(), "~ replication_throttle_bytes_per_sec: 2048 -> none");
    }

    #[test]
    fn creations_list_every_field_without_secret_values() {
        let mut d = definition(&view(&[("client.id", "x")]));
        d.source.properties.insert("sasl.password".into(), "${env:PW}".into());
        let Action::Create { body, changes } = creation(&d, false).unwrap() else { panic!() };
        let lines: Vec<String> = changes.iter().map(|c| c.to_string()).collect();
        assert!(lines.contains(&"+ source.properties.sasl.password: set (secret)".to_string()), "{lines:?}");
        assert!(lines.contains(&"+ source.properties.client.id = \"x\"".to_string()), "{lines:?}");
        assert!(!lines.join("\n").contains("env:PW"));
        assert_eq!(body["source"]["properties"]["sasl.password"], "${env:PW}");
        assert_eq!(body["name"], "m");
    }

    #[test]
    fn files_are_checked() {
        let dir = std::env::temp_dir();
        let write = |name: &str, text: &str| {
            let p = dir.join(format!("kmirror-apply-test-{}-{name}", std::process::id()));
            std::fs::write(&p, text).unwrap();
            p
        };
        let ok = write("ok.toml", "[[mirror]]\nname = \"a\"\n[mirror.source]\nbootstrap_servers = \"x:1\"\n");
        assert_eq!(load(&ok).unwrap().mirrors.len(), 1);
        for (name, text, says) in [
            (
                "typo.toml",
                "[[mirror]]\nname = \"a\"\nthrotle = 1\n[mirror.source]\nbootstrap_servers = \"x:1\"\n",
                "throtle",
            ),
            (
                "twice.toml",
                "[[mirror]]\nname = \"a\"\n[mirror.source]\nbootstrap_servers = \"x:1\"\n[[mirror]]\nname = \"a\"\n[mirror.source]\nbootstrap_servers = \"x:1\"\n",
                "twice",
            ),
            ("name.toml", "[[mirror]]\nname = \"a/b\"\n[mirror.source]\nbootstrap_servers = \"x:1\"\n", "valid name"),
            ("empty.toml", "[[mirror]]\nname = \"a\"\n[mirror.source]\nbootstrap_servers = \" \"\n", "empty"),
        ] {
            let p = write(name, text);
            match load(&p) {
                Err(Failure::Usage(m)) => assert!(m.contains(says), "{name}: {m}"),
                other => panic!("{name}: {other:?}"),
            }
            let _ = std::fs::remove_file(p);
        }
        let _ = std::fs::remove_file(ok);
    }
}
