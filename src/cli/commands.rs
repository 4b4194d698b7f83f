//! `mirrors list|describe|create|delete`, `describe`, `operations show`, `report`, `instances`.

use std::time::{Duration, Instant};

use serde_json::Value;

use super::http::{Failure, Server, check_name, parse, report_item};
use super::output::{self, Format, or_dash, truncate};
use super::types::{InstancesResponse, MirrorView, MirrorsResponse, OperationResponse, PartitionView, PartitionsPage};
use super::{DescribeArgs, InstancesArgs, MirrorsArgs, MirrorsCommand, OperationsArgs, OperationsCommand, ReportArgs};

pub async fn mirrors(a: MirrorsArgs) -> Result<(), Failure> {
    let server = Server::new(&a.conn)?;
    let format = a.conn.output;
    match a.command {
        MirrorsCommand::List => {
            let v: Value = server.get("/api/v1/mirrors", &[]).await?;
            if format == Format::Json {
                output::print_json(&v);
                return Ok(());
            }
            let list: MirrorsResponse = parse(&v, "mirror list")?;
            let mut t = output::table(&[
                "MIRROR",
                "TOPICS",
                "PARTITIONS",
                "LAG",
                "SOURCE-CLUSTER-ID",
                "SOURCE-BOOTSTRAP-SERVER",
            ]);
            for m in &list.mirrors {
                t.add_row(vec![
                    m.name.clone(),
                    m.topic_count.to_string(),
                    m.partition_count.to_string(),
                    m.lag_records.to_string(),
                    or_dash(m.observed_source_cluster_id.as_ref().or(m.expected_source_cluster_id.as_ref())),
                    m.source.bootstrap_servers.clone(),
                ]);
            }
            output::print_table(&t, "No mirrors found");
            Ok(())
        }
        MirrorsCommand::Describe { mirror } => {
            check_name("mirror", &mirror)?;
            let (v, _): (Value, _) = server.get_tagged(&format!("/api/v1/mirrors/{mirror}")).await?;
            if format == Format::Json {
                output::print_json(&v);
                return Ok(());
            }
            let m: MirrorView = parse(&v, "mirror")?;
            println!("{}", describe_mirror(&m));
            Ok(())
        }
        MirrorsCommand::Create { file } => super::apply::create(&server, format, &file).await,
        MirrorsCommand::Delete { mirror, reason, break_glass } => {
            check_name("mirror", &mirror)?;
            super::safety::announce(&server, &mirror, "delete", reason.as_deref(), break_glass).await?;
            let mut query = Vec::new();
            if let Some(r) = reason {
                query.push(("reason", r));
            }
            if break_glass {
                query.push(("break_glass", "true".to_string()));
            }
            if let Some(v) = server.delete_with(&format!("/api/v1/mirrors/{mirror}"), &query).await? {
                return super::safety::print_pending(&v, format);
            }
            if format == Format::Json {
                output::print_json(&serde_json::json!({ "mirror": mirror, "deleted": true }));
            } else {
                println!("Deleted mirror {mirror}");
            }
            Ok(())
        }
    }
}

/// `mirrors describe` as name/value lines. Secret properties show as the server shows them
/// (`[redacted]`, or the reference naming where the secret is).
fn describe_mirror(m: &MirrorView) -> String {
    let mut rows: Vec<(&str, String)> = vec![
        ("Mirror", m.name.clone()),
        ("Source bootstrap", m.source.bootstrap_servers.clone()),
        (
            "Source cluster ID",
            format!(
                "{} (expected {}, {})",
                or_dash(m.observed_source_cluster_id.as_ref()),
                or_dash(m.expected_source_cluster_id.as_ref()),
                m.source_cluster_id_status
            ),
        ),
        ("Data path", m.data_path.clone()),
        ("Created", m.created_at.clone()),
        ("Topics", m.topic_count.to_string()),
        ("Partitions", m.partition_count.to_string()),
        (
            "States",
            if m.state_counts.is_empty() {
                "-".into()
            } else {
                m.state_counts.iter().map(|(s, n)| format!("{s} {n}")).collect::<Vec<_>>().join(", ")
            },
        ),
        ("Lag", format!("{} records, {:.1} s", m.lag_records, m.lag_seconds)),
        ("Throttle", m.replication_throttle_bytes_per_sec.map_or_else(|| "none".into(), |r| format!("{r} B/s"))),
    ];
    if let Some(s) = &m.sync {
        rows.push((
            "Sync",
            format!(
                "topic configs {}, group offsets {}, ACLs {}; groups {:?} except {:?}",
                on_off(s.topic_configs),
                on_off(s.group_offsets),
                on_off(s.acls),
                s.group_include,
                s.group_exclude
            ),
        ));
    }
    let mut text = output::pairs(&rows);
    if !m.source.properties.is_empty() {
        text.push_str("\nSource properties:");
        for (k, v) in &m.source.properties {
            text.push_str(&format!("\n  {k} = {v}"));
        }
    }
    text
}

fn on_off(b: bool) -> &'static str {
    if b { "on" } else { "off" }
}

/// Every page of a mirror's partitions (sorted by topic and partition).
async fn all_partitions(
    server: &Server,
    mirror: &str,
    topic: Option<&str>,
    failed: bool,
) -> Result<(Vec<Value>, Vec<PartitionView>), Failure> {
    let mut raw = Vec::new();
    let mut parsed = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let mut q: Vec<(&str, String)> = vec![("sort", "topic".into()), ("page_size", "1000".into())];
        if let Some(t) = topic {
            q.push(("topic", t.to_string()));
        }
        if failed {
            q.push(("state", "FAILED".into()));
        }
        if let Some(t) = &token {
            q.push(("page_token", t.clone()));
        }
        let v: Value = server.get(&format!("/api/v1/mirrors/{mirror}/partitions"), &q).await?;
        let page: PartitionsPage = parse(&v, "partition page")?;
        if let Some(items) = v["items"].as_array() {
            raw.extend(items.iter().cloned());
        }
        parsed.extend(page.items);
        match page.next_page_token {
            Some(t) if !t.is_empty() => token = Some(t),
            _ => break,
        }
    }
    Ok((raw, parsed))
}

/// RETRY as the KIP shows it: `n/max`, or `NonRetryable`. When the server does not say its
/// maximum, a partition whose automatic retries are used up (retryable, no next retry) shows
/// `n/n`, and one still retrying `n/?`.
pub fn retry_column(p: &PartitionView) -> String {
    match &p.error {
        Some(e) if !e.retryable => "NonRetryable".into(),
        _ => match p.retry_max_attempts {
            Some(max) => format!("{}/{max}", p.retry_count),
            None if p.next_retry_at.is_none() => format!("{0}/{0}", p.retry_count),
            None => format!("{}/?", p.retry_count),
        },
    }
}

pub async fn describe(a: DescribeArgs) -> Result<(), Failure> {
    check_name("mirror", &a.mirror)?;
    if let Some(t) = &a.topic {
        check_name("topic", t)?;
    }
    let server = Server::new(&a.conn)?;
    let (raw, partitions) = all_partitions(&server, &a.mirror, a.topic.as_deref(), a.failed).await?;
    if a.conn.output == Format::Json {
        output::print_json(&serde_json::json!({ "mirror": a.mirror, "items": raw, "total": raw.len() }));
        return Ok(());
    }
    // SOURCE-OFFSET: the source's last stable offset (what mirroring copies up to);
    // DESTINATION-OFFSET: how far the destination has copied, in source offsets (the next source
    // offset to mirror), so LAG = SOURCE-OFFSET - DESTINATION-OFFSET as in the KIP. The
    // destination's own high watermark (one higher per transaction marker) is in --output json.
    let t = if a.failed {
        let mut t = output::table(&["MIRROR", "TOPIC", "PARTITION", "RETRY", "ERROR"]);
        for p in &partitions {
            let error = p.error.as_ref().map_or_else(|| "-".into(), |e| format!("{}: {}", e.code, e.message));
            t.add_row(vec![
                a.mirror.clone(),
                p.topic.clone(),
                p.partition.to_string(),
                retry_column(p),
                truncate(&error, 80),
            ]);
        }
        t
    } else {
        let mut t =
            output::table(&["MIRROR", "TOPIC", "PARTITION", "SOURCE-OFFSET", "DESTINATION-OFFSET", "LAG", "STATE"]);
        for p in &partitions {
            t.add_row(vec![
                a.mirror.clone(),
                p.topic.clone(),
                p.partition.to_string(),
                or_dash(p.source_last_stable_offset.filter(|o| *o >= 0)),
                or_dash(p.mirrored_source_offset.filter(|o| *o >= 0)),
                p.lag_records.to_string(),
                p.state.clone(),
            ]);
        }
        t
    };
    output::print_table(&t, if a.failed { "No failed partitions found" } else { "No mirror partitions found" });
    Ok(())
}

pub async fn operations(a: OperationsArgs) -> Result<(), Failure> {
    let server = Server::new(&a.conn)?;
    match a.command {
        OperationsCommand::Show { id, wait, timeout } => {
            if id.is_empty() || !id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
                return Err(Failure::Usage(format!("{id:?} is not an operation ID")));
            }
            let (v, op) =
                if wait { wait_for(&server, &id, timeout).await? } else { fetch_operation(&server, &id).await? };
            if a.conn.output == Format::Json {
                output::print_json(&v);
            } else {
                print_operation(&op);
            }
            operation_verdict(&op, wait)
        }
    }
}

/// Exit code of `operations show`: 1 when topics failed or (with --wait) partitions did not all
/// arrive.
fn operation_verdict(op: &OperationResponse, waited: bool) -> Result<(), Failure> {
    // Also the failures the operation's record counts but does not hold (it keeps failures first).
    let listed = op.results.iter().filter(|r| !r.ok).count() as u64;
    let failed = op.result_counts.map_or(listed, |c| c.failed.max(listed));
    for r in op.results.iter().filter(|r| !r.ok) {
        if let Some(e) = &r.error {
            report_item(&format!("topic {}", r.topic), &e.problem_type, &e.detail);
        }
    }
    if let Some(e) = &op.error {
        report_item(&format!("mirror {}", op.mirror), &e.problem_type, &e.detail);
        return Err(Failure::Failed(format!("operation {} failed", op.id)));
    }
    if failed > 0 {
        return Err(Failure::Failed(format!("{failed} topic(s) of operation {} failed", op.id)));
    }
    if waited && let Some(p) = &op.progress {
        let (total, done) = partition_counts(p);
        if done < total {
            return Err(Failure::Failed(format!(
                "{} of {total} partition(s) did not reach {}",
                total - done,
                p.target_state.as_deref().unwrap_or("their state")
            )));
        }
    }
    Ok(())
}

/// An operation's partitions and those done, over every page (from the page's own list when
/// the server does not count them).
fn partition_counts(p: &super::types::OperationProgress) -> (u64, u64) {
    let listed = (p.partitions.len() as u64, p.partitions.iter().filter(|p| p.done).count() as u64);
    match (p.partitions_total, p.partitions_done) {
        (Some(total), Some(done)) => (total.max(listed.0), done.max(listed.1)),
        _ => listed,
    }
}

/// An operation with every page of its per-topic results (and their partitions' progress)
/// merged into one answer, as a server that does not page would send it.
pub async fn fetch_operation(server: &Server, id: &str) -> Result<(Value, OperationResponse), Failure> {
    let path = format!("/api/v1/operations/{id}");
    let page_size = ("page_size", "1000".to_string());
    let mut v: Value = server.get(&path, std::slice::from_ref(&page_size)).await?;
    let mut token = v["next_page_token"].as_str().map(str::to_string);
    while let Some(t) = token.take() {
        let next: Value = server.get(&path, &[page_size.clone(), ("page_token", t)]).await?;
        for field in ["results", "topics"] {
            if let (Some(all), Some(more)) = (v[field].as_array_mut(), next[field].as_array()) {
                all.extend(more.iter().cloned());
            }
        }
        if let (Some(all), Some(more)) =
            (v["progress"]["partitions"].as_array_mut(), next["progress"]["partitions"].as_array())
        {
            all.extend(more.iter().cloned());
        }
        token = next["next_page_token"].as_str().map(str::to_string);
    }
    if let Some(o) = v.as_object_mut() {
        o.remove("next_page_token");
    }
    let op: OperationResponse = parse(&v, "operation")?;
    Ok((v, op))
}

/// Whether waiting can end: every partition done (and every topic that succeeded has
/// partitions in the snapshot already), or nothing left can get there by itself (each
/// partition not done is FAILED with an error that is not retried).
pub fn settled(op: &OperationResponse) -> bool {
    let Some(progress) = &op.progress else { return true };
    let all_present =
        op.results.iter().filter(|r| r.ok).all(|r| progress.partitions.iter().any(|p| p.topic == r.topic));
    if progress.done && all_present {
        return true;
    }
    let stuck =
        |p: &&super::types::PartitionProgress| p.state == "FAILED" && p.error.as_ref().is_some_and(|e| !e.retryable);
    let waiting: Vec<_> = progress.partitions.iter().filter(|p| !p.done).collect();
    all_present && !waiting.is_empty() && waiting.iter().all(stuck)
}

/// Polls an operation until it settles or `timeout` passes, with a progress bar on a terminal.
pub async fn wait_for(server: &Server, id: &str, timeout: Duration) -> Result<(Value, OperationResponse), Failure> {
    let bar = indicatif::ProgressBar::with_draw_target(Some(0), indicatif::ProgressDrawTarget::stderr());
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} [{bar:30}] {pos}/{len} partitions {msg} ({elapsed})")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    let started = Instant::now();
    loop {
        let (v, op) = fetch_operation(server, id).await?;
        if let Some(p) = &op.progress {
            let (total, done) = partition_counts(p);
            bar.set_length(total);
            bar.set_position(done);
            bar.set_message(format!("-> {}", p.target_state.as_deref().unwrap_or("settled")));
        }
        if settled(&op) {
            bar.finish_and_clear();
            return Ok((v, op));
        }
        if started.elapsed() >= timeout {
            bar.finish_and_clear();
            print_operation(&op);
            let behind: Vec<String> = op
                .progress
                .iter()
                .flat_map(|p| &p.partitions)
                .filter(|p| !p.done)
                .map(|p| format!("{}-{} {}", p.topic, p.partition, p.state))
                .collect();
            return Err(Failure::Failed(format!(
                "timed out after {}: {} partition(s) not there yet: {}",
                humanize(timeout),
                behind.len(),
                truncate(&behind.join(", "), 400)
            )));
        }
        bar.tick();
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn humanize(d: Duration) -> String {
    let ms = d.as_millis();
    if !ms.is_multiple_of(1000) { format!("{ms}ms") } else { format!("{}s", ms / 1000) }
}

/// An operation as text: who asked what, per-topic results, per-partition progress.
pub fn print_operation(op: &OperationResponse) {
    let mut rows = vec![
        ("Operation", op.id.clone()),
        ("Kind", op.kind.clone()),
        ("Mirror", op.mirror.clone()),
        (
            "Requested",
            format!(
                "{} by {}{}",
                op.requested_at,
                op.requested_by,
                op.client_address.as_ref().map(|a| format!(" from {a}")).unwrap_or_default()
            ),
        ),
        ("Finished", or_dash(op.finished_at.as_ref())),
        ("Outcome", op.outcome.clone()),
    ];
    if let Some(e) = &op.error {
        rows.push(("Error", format!("{}: {}", e.problem_type, e.detail)));
    }
    println!("{}", output::pairs(&rows));
    if let Some(c) = op.result_counts.filter(|c| c.omitted > 0) {
        println!(
            "Results: {} topic(s), {} ok, {} failed; {} result(s) not kept (the operation's record keeps failures first)",
            c.total, c.ok, c.failed, c.omitted
        );
    }
    if !op.results.is_empty() {
        let mut t = output::table(&["TOPIC", "RESULT", "ERROR"]);
        for r in &op.results {
            t.add_row(vec![
                r.topic.clone(),
                if r.ok { "ok".into() } else { "failed".into() },
                r.error
                    .as_ref()
                    .map_or_else(|| "-".into(), |e| truncate(&format!("{}: {}", e.problem_type, e.detail), 100)),
            ]);
        }
        println!();
        println!("{}", output::render(&t));
    }
    if let Some(p) = &op.progress {
        let (total, done) = partition_counts(p);
        println!();
        println!(
            "Progress: {done}/{total} partition(s) {}",
            p.target_state.as_deref().map_or_else(|| "settled".to_string(), |s| format!("in {s}"))
        );
        let mut t = output::table(&["TOPIC", "PARTITION", "STATE", "DONE", "ERROR"]);
        for q in &p.partitions {
            t.add_row(vec![
                q.topic.clone(),
                q.partition.to_string(),
                q.state.clone(),
                if q.done { "yes".into() } else { "no".into() },
                q.error.as_ref().map_or_else(|| "-".into(), |e| truncate(&format!("{}: {}", e.code, e.message), 80)),
            ]);
        }
        if !p.partitions.is_empty() {
            println!("{}", output::render(&t));
        }
    }
}

pub async fn report(a: ReportArgs) -> Result<(), Failure> {
    check_name("mirror", &a.mirror)?;
    let server = Server::new(&a.conn)?;
    let path = format!("/api/v1/mirrors/{}/report", a.mirror);
    match a.conn.output {
        Format::Json => {
            let v: Value = server.get(&path, &[("format", "json".into())]).await?;
            output::print_json(&v);
        }
        Format::Table => {
            let text = server.get_text(&path, &[("format", "markdown".into())]).await?;
            print!("{text}");
            if !text.ends_with('\n') {
                println!();
            }
        }
    }
    Ok(())
}

pub async fn instances(a: InstancesArgs) -> Result<(), Failure> {
    let server = Server::new(&a.conn)?;
    let v: Value = server.get("/api/v1/instances", &[]).await?;
    if a.conn.output == Format::Json {
        output::print_json(&v);
        return Ok(());
    }
    let r: InstancesResponse = parse(&v, "instance list")?;
    println!(
        "Cluster {} ({}), {} slot(s), unowned: {}",
        r.cluster_name,
        r.mode,
        r.slots,
        if r.unowned_slots.is_empty() { "none".to_string() } else { slot_list(&r.unowned_slots) }
    );
    let mut t = output::table(&["INSTANCE", "THIS", "VERSION", "SLOTS", "PARTITIONS", "HEARTBEAT-AGE", "URL"]);
    for i in &r.instances {
        t.add_row(vec![
            i.id.clone(),
            if i.this { "*".into() } else { String::new() },
            i.version.clone(),
            slot_list(&i.slots),
            i.partitions.to_string(),
            format!("{:.1}s", i.heartbeat_age_ms as f64 / 1000.0),
            or_dash(i.advertised_url.as_ref()),
        ]);
    }
    output::print_table(&t, "No instances found");
    Ok(())
}

/// `0-3,7,9-10`.
fn slot_list(slots: &[i32]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < slots.len() {
        let start = slots[i];
        let mut end = start;
        while i + 1 < slots.len() && slots[i + 1] == end + 1 {
            i += 1;
            end = slots[i];
        }
        out.push(if start == end { start.to_string() } else { format!("{start}-{end}") });
        i += 1;
    }
    if out.is_empty() { "-".into() } else { out.join(",") }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::types::{PartitionErrorView, PartitionProgress, TopicResultView};

    fn partition(retry_count: u32, retryable: Option<bool>, next: bool, max: Option<u32>) -> PartitionView {
        PartitionView {
            topic: "t".into(),
            partition: 0,
            state: "FAILED".into(),
            source_last_stable_offset: None,
            mirrored_source_offset: None,
            lag_records: 0,
            error: retryable.map(|r| PartitionErrorView { code: "X".into(), message: "m".into(), retryable: r }),
            retry_count,
            next_retry_at: next.then(|| "2026-01-01T00:00:00.000Z".into()),
            retry_max_attempts: max,
        }
    }

    #[test]
    fn retry_column_like_the_kip() {
        assert_eq!(retry_column(&partition(0, Some(false), false, None)), "NonRetryable");
        assert_eq!(retry_column(&partition(3, Some(true), true, Some(20))), "3/20");
        assert_eq!(retry_column(&partition(3, Some(true), true, None)), "3/?");
        assert_eq!(retry_column(&partition(20, Some(true), false, None)), "20/20");
    }

    #[test]
    fn slot_lists() {
        assert_eq!(slot_list(&[]), "-");
        assert_eq!(slot_list(&[0, 1, 2, 3, 7, 9, 10]), "0-3,7,9-10");
        assert_eq!(slot_list(&[5]), "5");
    }

    fn op(results: &[(&str, bool)], partitions: &[(&str, &str, bool, Option<bool>)], done: bool) -> OperationResponse {
        OperationResponse {
            id: "op".into(),
            mirror: "m".into(),
            kind: "start".into(),
            requested_by: "me".into(),
            client_address: None,
            requested_at: String::new(),
            finished_at: None,
            outcome: "succeeded".into(),
            results: results
                .iter()
                .map(|(t, ok)| TopicResultView {
                    topic: t.to_string(),
                    ok: *ok,
                    error: None,
                    unmirrored: None,
                    behind: None,
                })
                .collect(),
            result_counts: None,
            error: None,
            progress: Some(crate::cli::types::OperationProgress {
                target_state: Some("MIRRORING".into()),
                done,
                partitions_total: None,
                partitions_done: None,
                partitions: partitions
                    .iter()
                    .map(|(t, s, d, retryable)| PartitionProgress {
                        topic: t.to_string(),
                        partition: 0,
                        state: s.to_string(),
                        done: *d,
                        error: retryable.map(|r| PartitionErrorView {
                            code: "X".into(),
                            message: "m".into(),
                            retryable: r,
                        }),
                    })
                    .collect(),
            }),
        }
    }

    #[test]
    fn waiting_ends_when_everything_arrived_or_nothing_can() {
        // A started topic not in the snapshot yet: not done, although the (empty) progress says so.
        assert!(!settled(&op(&[("a", true)], &[], true)));
        assert!(settled(&op(&[("a", true)], &[("a", "MIRRORING", true, None)], true)));
        // A failed topic has no partitions to wait for.
        assert!(settled(&op(&[("a", true), ("b", false)], &[("a", "MIRRORING", true, None)], true)));
        assert!(!settled(&op(&[("a", true)], &[("a", "PREPARING", false, None)], false)));
        // FAILED and retried by itself: keep waiting; not retryable: stop.
        assert!(!settled(&op(&[("a", true)], &[("a", "FAILED", false, Some(true))], false)));
        assert!(settled(&op(&[("a", true)], &[("a", "FAILED", false, Some(false))], false)));
    }
}
