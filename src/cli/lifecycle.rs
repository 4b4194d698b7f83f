//! `topics start|stop|pause|resume|recover --mirror M --topics LIST-OR-REGEX [--exclude REGEX]
//! [--validate-only] [--wait [--timeout D]]`.
//!
//! How the selection reaches the API (`topics` names or one `pattern`, see `StartRequest` and
//! `LifecycleRequest`):
//! - only names, no `--exclude`: `{"topics": [...]}` (a name the server does not know fails
//!   alone, with its slug);
//! - one regex, no names, no `--exclude`: `{"pattern": "..."}`;
//! - otherwise (several regexes, names and regexes, or `--exclude`, which the API does not
//!   have): first a `validate_only` call with the regexes as one pattern, whose per-topic results
//!   name every topic they match (for `start`, source topics too); then the real call with those
//!   names plus the names given, minus every topic an `--exclude` regex matches.

use serde_json::{Value, json};

use super::commands::{print_operation, wait_for};
use super::http::{Failure, Server, check_name, parse, problem_status, report_item};
use super::output::{self, Format};
use super::types::{BehindView, LifecycleResponse, TopicResultView};
use super::{LifecycleArgs, TopicsArgs, TopicsCommand, Truncation};

/// The five lifecycle operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Start,
    Stop,
    Pause,
    Resume,
    Recover,
}

impl Op {
    fn path(self) -> &'static str {
        match self {
            Op::Start => "start",
            Op::Stop => "stop",
            Op::Pause => "pause",
            Op::Resume => "resume",
            Op::Recover => "recover",
        }
    }

    fn done(self) -> &'static str {
        match self {
            Op::Start => "Started",
            Op::Stop => "Stopped",
            Op::Pause => "Paused",
            Op::Resume => "Resumed",
            Op::Recover => "Recovered",
        }
    }

    fn would(self) -> &'static str {
        match self {
            Op::Start => "would start",
            Op::Stop => "would stop",
            Op::Pause => "would pause",
            Op::Resume => "would resume",
            Op::Recover => "would recover",
        }
    }
}

/// A topic item of `--topics`: a literal name (Kafka's name characters only) or a regex.
fn is_literal(item: &str) -> bool {
    item.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// Splits a comma-separated list, dropping empty items.
fn items(list: &str) -> Vec<String> {
    list.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_string).collect()
}

/// A whole-name regex, as the server compiles it.
fn whole(pattern: &str) -> Result<regex::Regex, Failure> {
    regex::Regex::new(&format!("^(?:{pattern})$"))
        .map_err(|e| Failure::Usage(format!("invalid regex {pattern:?}: {e}")))
}

/// What `--topics` / `--exclude` / `--all` select.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selection {
    All,
    Names(Vec<String>),
    Pattern(String),
    /// Resolved by this client: `names` given literally, `patterns` asked of the server, minus
    /// `exclude`.
    Resolve {
        names: Vec<String>,
        patterns: Vec<String>,
        exclude: Vec<String>,
    },
}

pub fn selection(args: &LifecycleArgs) -> Result<Selection, Failure> {
    let exclude = args.exclude.as_deref().map(items).unwrap_or_default();
    for e in &exclude {
        whole(e)?;
    }
    if args.all {
        if !exclude.is_empty() {
            return Err(Failure::Usage("--exclude does not apply to --all (select with --topics '.*' instead)".into()));
        }
        return Ok(Selection::All);
    }
    let list = items(args.topics.as_deref().unwrap_or(""));
    if list.is_empty() {
        return Err(Failure::Usage("--topics names no topic".into()));
    }
    let (names, patterns): (Vec<String>, Vec<String>) = list.into_iter().partition(|i| is_literal(i));
    for n in &names {
        check_name("topic", n)?;
    }
    for p in &patterns {
        whole(p)?;
    }
    let mut unique = std::collections::BTreeSet::new();
    let names: Vec<String> = names.into_iter().filter(|n| unique.insert(n.clone())).collect();
    Ok(match (names.len(), patterns.len(), exclude.is_empty()) {
        (_, 0, true) => Selection::Names(names),
        (0, 1, true) => Selection::Pattern(patterns.into_iter().next().unwrap_or_default()),
        _ => Selection::Resolve { names, patterns, exclude },
    })
}

/// The regexes as one pattern.
fn joined(patterns: &[String]) -> String {
    patterns.iter().map(|p| format!("(?:{p})")).collect::<Vec<_>>().join("|")
}

/// `names` + what `patterns` match on the server, minus `exclude`.
async fn resolve(
    server: &Server,
    path: &str,
    names: &[String],
    patterns: &[String],
    exclude: &[String],
) -> Result<Vec<String>, Failure> {
    let mut topics: std::collections::BTreeSet<String> = names.iter().cloned().collect();
    if !patterns.is_empty() {
        let r: LifecycleResponse =
            server.post(path, &json!({ "pattern": joined(patterns), "validate_only": true })).await?;
        topics.extend(r.results.into_iter().map(|r| r.topic));
    }
    let excluded: Vec<regex::Regex> = exclude.iter().map(|e| whole(e)).collect::<Result<_, _>>()?;
    Ok(topics.into_iter().filter(|t| !excluded.iter().any(|re| re.is_match(t))).collect())
}

/// The fields of the request beside the selection.
struct Extra {
    fields: serde_json::Map<String, Value>,
    /// Flags that need fields the server may not have yet (`--promote`, `--all`).
    newer: Vec<&'static str>,
    /// How long the server may wait before it answers (a promote's timeout).
    waits: std::time::Duration,
}

/// A promote's timeout when none is given (the server's default).
const PROMOTE_DEFAULT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);
/// The longest a promote may wait (the server refuses more).
const PROMOTE_MAX_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);

/// Impact rows listed in full up to this many; beyond, only partitions with something unmirrored.
const IMPACT_ROWS: usize = 50;

pub async fn run(a: TopicsArgs) -> Result<(), Failure> {
    let server = Server::new(&a.conn)?;
    let format = a.conn.output;
    let (op, common, mut extra) = match a.command {
        TopicsCommand::Start(s) => {
            if s.common.all {
                return Err(Failure::Usage(
                    "--all selects the topics of the mirror, which a start adds to: name the source topics or give a regex (every source topic: --topics '.*')".into(),
                ));
            }
            if s.quarantine && s.truncation != Truncation::Resync {
                return Err(Failure::Usage("--quarantine only applies to --truncation resync".into()));
            }
            let mut fields = serde_json::Map::new();
            if s.truncation == Truncation::Resync {
                fields.insert("truncation".into(), json!("resync"));
                fields.insert("quarantine".into(), json!(s.quarantine));
            }
            (Op::Start, s.common, Extra { fields, newer: Vec::new(), waits: Default::default() })
        }
        TopicsCommand::Stop(s) => {
            let mut fields = serde_json::Map::new();
            let mut newer = Vec::new();
            let mut waits = std::time::Duration::ZERO;
            if s.promote {
                fields.insert("require_caught_up".into(), json!(true));
                if let Some(t) = s.promote_timeout.filter(|t| *t > PROMOTE_MAX_TIMEOUT) {
                    return Err(Failure::Usage(format!(
                        "--promote-timeout {}s is longer than a promote may wait (at most 600s)",
                        t.as_secs()
                    )));
                }
                if let Some(t) = s.promote_timeout {
                    fields.insert("timeout_ms".into(), json!(u64::try_from(t.as_millis()).unwrap_or(u64::MAX)));
                }
                newer.push("--promote");
                waits = s.promote_timeout.unwrap_or(PROMOTE_DEFAULT_TIMEOUT);
            }
            if s.save_exclusion {
                fields.insert("exclude".into(), json!(true));
                newer.push("--save-exclusion");
            }
            (Op::Stop, s.common, Extra { fields, newer, waits })
        }
        TopicsCommand::Pause(c) => {
            (Op::Pause, c, Extra { fields: Default::default(), newer: Vec::new(), waits: Default::default() })
        }
        TopicsCommand::Resume(c) => {
            (Op::Resume, c, Extra { fields: Default::default(), newer: Vec::new(), waits: Default::default() })
        }
        TopicsCommand::Recover(c) => {
            (Op::Recover, c, Extra { fields: Default::default(), newer: Vec::new(), waits: Default::default() })
        }
    };
    check_name("mirror", &common.mirror)?;
    let path = format!("/api/v1/mirrors/{}/topics:{}", common.mirror, op.path());
    let mut body = serde_json::Map::new();
    match selection(&common)? {
        Selection::All => {
            body.insert("all".into(), json!(true));
            extra.newer.push("--all");
        }
        Selection::Names(n) => {
            body.insert("topics".into(), json!(n));
        }
        Selection::Pattern(p) => {
            body.insert("pattern".into(), json!(p));
        }
        Selection::Resolve { names, patterns, exclude } => {
            let topics = resolve(&server, &path, &names, &patterns, &exclude).await?;
            if topics.is_empty() {
                eprintln!(
                    "kmirror: no topic matched --topics{}",
                    if exclude.is_empty() { "" } else { " after --exclude" }
                );
                if format == Format::Json {
                    output::print_json(
                        &json!({ "operation_id": null, "validate_only": common.validate_only, "results": [] }),
                    );
                }
                return Ok(());
            }
            body.insert("topics".into(), json!(topics));
        }
    }
    body.extend(extra.fields);
    body.insert("validate_only".into(), json!(common.validate_only));
    // Said before the call is sent: the mirror's approval policy may put it behind a second person.
    let action = match op {
        Op::Stop => Some("stop"),
        Op::Start if body.get("truncation") == Some(&json!("resync")) => Some("resync"),
        _ => None,
    };
    if let Some(action) = action.filter(|_| !common.validate_only) {
        super::safety::announce(&server, &common.mirror, action, common.reason.as_deref(), common.break_glass).await?;
    }
    if let Some(r) = &common.reason {
        body.insert("reason".into(), json!(r));
    }
    if common.break_glass {
        body.insert("break_glass".into(), json!(true));
    }
    let v: Value = match server.post_waiting(&path, &Value::Object(body), extra.waits).await {
        Ok(v) => v,
        Err(f) => return Err(unsupported(f, &extra.newer)),
    };
    if v["status"] == "pending_approval" {
        if common.wait {
            eprintln!("kmirror: the call waits for a second person's approval: nothing to wait for yet");
        }
        return super::safety::print_pending(&v, format);
    }
    let r: LifecycleResponse = parse(&v, "lifecycle answer")?;
    let ok: Vec<&str> = r.results.iter().filter(|t| t.ok).map(|t| t.topic.as_str()).collect();
    let failed: Vec<&str> = r.results.iter().filter(|t| !t.ok).map(|t| t.topic.as_str()).collect();
    let waited = if common.wait && !r.validate_only && !ok.is_empty() {
        if format == Format::Table {
            print_summary(op, &common.mirror, &r, &ok, &failed);
        }
        Some(wait_for(&server, &r.operation_id, common.timeout).await)
    } else {
        if common.wait && r.validate_only {
            eprintln!("kmirror: --validate-only changes nothing: nothing to wait for");
        }
        None
    };
    for t in r.results.iter().filter(|t| !t.ok) {
        match &t.error {
            Some(e) => report_item(&format!("topic {}", t.topic), &e.problem_type, &e.detail),
            None => report_item(&format!("topic {}", t.topic), "unknown", "failed without a problem"),
        }
    }
    match format {
        Format::Json => {
            let mut out = v.clone();
            if let Some(Ok((op_json, _))) = &waited {
                out["operation"] = op_json.clone();
            }
            output::print_json(&out);
        }
        Format::Table => {
            if waited.is_none() {
                print_summary(op, &common.mirror, &r, &ok, &failed);
            }
            print_unmirrored(&r);
            print_behind(&r);
        }
    }
    // A promote that stopped its topics while the source still received records: those are not
    // on the destination.
    let late: Vec<String> = r
        .results
        .iter()
        .filter(|t| t.ok)
        .flat_map(|t| t.behind.iter().flatten().map(move |b| (t, b)))
        .map(|(t, b)| format!("{}-{} ({} records)", t.topic, b.partition, b.lag_records.unwrap_or(0)))
        .collect();
    if !late.is_empty() {
        return Err(Failure::Failed(format!(
            "the topics stopped, but the source received records after the final check that are not on the destination (were the producers stopped?): {}",
            late.join(", ")
        )));
    }
    let wait_result = match waited {
        None => Ok(()),
        Some(Err(f)) => Err(f),
        Some(Ok((_, op_state))) => {
            let behind: Vec<String> = op_state
                .progress
                .iter()
                .flat_map(|p| &p.partitions)
                .filter(|p| !p.done)
                .map(|p| {
                    let why = p.error.as_ref().map(|e| format!(" ({}: {})", e.code, e.message)).unwrap_or_default();
                    format!("{}-{} {}{why}", p.topic, p.partition, p.state)
                })
                .collect();
            if format == Format::Table {
                print_operation(&op_state);
            }
            if behind.is_empty() {
                Ok(())
            } else {
                Err(Failure::Failed(format!("{} partition(s) cannot get there: {}", behind.len(), behind.join(", "))))
            }
        }
    };
    if !failed.is_empty() {
        return Err(Failure::Failed(format!("{} of {} topic(s) failed", failed.len(), r.results.len())));
    }
    wait_result
}

fn print_summary(op: Op, mirror: &str, r: &LifecycleResponse, ok: &[&str], failed: &[&str]) {
    if r.validate_only {
        println!(
            "Validated (nothing changed): {} {} topic(s) in mirror {mirror}: [{}]",
            op.would(),
            ok.len(),
            ok.join(", ")
        );
        if !failed.is_empty() {
            println!("Would fail: {} topic(s): [{}]", failed.len(), failed.join(", "));
        }
    } else {
        println!("{} {} topic(s) in mirror {mirror}: [{}]", op.done(), ok.len(), ok.join(", "));
        if !failed.is_empty() {
            println!("Failed: {} topic(s): [{}]", failed.len(), failed.join(", "));
        }
        println!("Operation {} (kmirror operations show {} --wait)", r.operation_id, r.operation_id);
    }
    match &r.saved_pattern {
        Some(p) if p.list == "topic_include" => println!(
            "Saved in the mirror's topic_include: {} (topics created on the source later that match it are mirrored too)",
            p.pattern
        ),
        Some(p) => println!(
            "Saved in the mirror's {}: {} (the topic policy never starts these topics again)",
            p.list, p.pattern
        ),
        None => {}
    }
}

/// `topics stop --validate-only`: what a stop now would leave unmirrored, per partition (the
/// numbers the dashboard's failover dialog shows).
fn print_unmirrored(r: &LifecycleResponse) {
    let with: Vec<&TopicResultView> = r.results.iter().filter(|t| t.unmirrored.is_some()).collect();
    if with.is_empty() {
        return;
    }
    let rows: usize = with.iter().filter_map(|t| t.unmirrored.as_ref()).map(|u| u.partitions.len()).sum();
    let all = rows <= IMPACT_ROWS;
    let mut t = output::table(&["TOPIC", "PARTITION", "STATE", "UNMIRRORED-RECORDS", "UNMIRRORED-SECONDS"]);
    let (mut records, mut seconds, mut quiet) = (0i64, 0f64, 0usize);
    for topic in &with {
        let Some(u) = &topic.unmirrored else { continue };
        records += u.records;
        seconds = seconds.max(u.seconds);
        for p in &u.partitions {
            if !all && p.records == 0 {
                quiet += 1;
                continue;
            }
            t.add_row(vec![
                topic.topic.clone(),
                p.partition.to_string(),
                p.state.clone(),
                p.records.to_string(),
                format!("{:.1}", p.seconds),
            ]);
        }
    }
    println!();
    if records == 0 {
        println!("A stop now would leave nothing unmirrored.");
    } else {
        println!(
            "A stop now would leave {records} record(s) unmirrored on the source (the oldest about {seconds:.1} s old):"
        );
    }
    if rows > quiet {
        println!("{}", output::render(&t));
    }
    if quiet > 0 {
        println!("({quiet} partition(s) with nothing unmirrored are not listed.)");
    }
}

/// A promote: the partitions whose source holds records the destination does not have.
fn print_behind(r: &LifecycleResponse) {
    let rows: Vec<(&TopicResultView, &BehindView)> =
        r.results.iter().flat_map(|t| t.behind.iter().flatten().map(move |b| (t, b))).collect();
    if rows.is_empty() {
        return;
    }
    let dash = |v: Option<i64>| v.map_or_else(|| "-".to_string(), |v| v.to_string());
    let mut t = output::table(&["TOPIC", "PARTITION", "STATE", "LAG", "SOURCE-OFFSET", "MIRRORED-OFFSET"]);
    for (topic, b) in &rows {
        t.add_row(vec![
            topic.topic.clone(),
            b.partition.to_string(),
            b.state.clone(),
            dash(b.lag_records),
            dash(b.source_last_stable_offset),
            dash(b.mirrored_source_offset),
        ]);
    }
    println!();
    if rows.iter().any(|(topic, _)| topic.ok) {
        println!("Records the source received after the promote's final check (not on the destination):");
    } else {
        println!("Not promoted: nothing was stopped. Partitions still behind their source:");
    }
    println!("{}", output::render(&t));
}

/// A 400/422 refusing a field a flag needs: this server does not have the feature yet.
fn unsupported(f: Failure, newer: &[&'static str]) -> Failure {
    let refused_field = match &f {
        Failure::Problem(p) => {
            matches!(problem_status(&f).map(|s| s.as_u16()), Some(400 | 422))
                && p.problem_type == "invalid-body"
                && p.detail.contains("unknown field")
        }
        _ => false,
    };
    if refused_field && !newer.is_empty() {
        let detail = if let Failure::Problem(p) = &f { p.detail.clone() } else { String::new() };
        return Failure::Usage(format!(
            "this kmirror server does not support {} yet (it refused the request: {detail})",
            newer.join(" and ")
        ));
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(topics: Option<&str>, exclude: Option<&str>, all: bool) -> LifecycleArgs {
        LifecycleArgs {
            mirror: "m".into(),
            topics: topics.map(str::to_string),
            exclude: exclude.map(str::to_string),
            all,
            validate_only: false,
            wait: false,
            timeout: std::time::Duration::from_secs(1),
            reason: None,
            break_glass: false,
        }
    }

    #[test]
    fn selections_map_to_names_a_pattern_or_a_resolution() {
        let s = |t, e, all| selection(&args(t, e, all));
        assert_eq!(
            s(Some("a, b,a,,orders.eu"), None, false).unwrap(),
            Selection::Names(vec!["a".into(), "b".into(), "orders.eu".into()])
        );
        assert_eq!(s(Some("orders-.*"), None, false).unwrap(), Selection::Pattern("orders-.*".into()));
        assert_eq!(
            s(Some("a,orders-.*"), None, false).unwrap(),
            Selection::Resolve { names: vec!["a".into()], patterns: vec!["orders-.*".into()], exclude: vec![] }
        );
        assert_eq!(
            s(Some("a"), Some("x.*"), false).unwrap(),
            Selection::Resolve { names: vec!["a".into()], patterns: vec![], exclude: vec!["x.*".into()] }
        );
        assert_eq!(s(None, None, true).unwrap(), Selection::All);
        for (t, e) in [(Some("(unclosed"), None), (Some("a"), Some("[")), (Some(" , "), None)] {
            assert!(matches!(s(t, e, false), Err(Failure::Usage(_))), "{t:?} {e:?}");
        }
        assert!(matches!(s(None, Some("x"), true), Err(Failure::Usage(_))));
        assert_eq!(joined(&["a.*".into(), "b|c".into()]), "(?:a.*)|(?:b|c)");
    }

    #[test]
    fn unknown_fields_mean_an_older_server() {
        let p = |status, slug: &str, detail: &str| {
            Failure::Problem(super::super::http::Problem {
                problem_type: slug.into(),
                title: String::new(),
                status,
                detail: detail.into(),
            })
        };
        let f = unsupported(p(400, "invalid-body", "unknown field `all`, expected one of ..."), &["--all"]);
        assert!(matches!(&f, Failure::Usage(m) if m.contains("does not support --all")), "{f:?}");
        assert_eq!(f.exit_code(), 2);
        let f = unsupported(p(400, "invalid-body", "unknown field `all`"), &[]);
        assert_eq!(f.exit_code(), 1);
        let f = unsupported(p(404, "mirror-not-found", "no"), &["--all"]);
        assert_eq!(f.exit_code(), 1);
    }
}
