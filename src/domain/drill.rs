//! Disaster-recovery drills, the pure part: what a drill measured, which checks pass, the report
//! an auditor keeps, and its digest.
//!
//! A drill rehearses the real failover path on a canary topic (the engine runs it,
//! `engine::drills`). This module turns what it saw into a verdict:
//!
//! - [`analyse`] compares the records produced on the source (committed and aborted, with their
//!   source offsets) with what the destination holds after the failover: records lost (against
//!   what the stop itself left unmirrored), duplicated, and records of the aborted transaction
//!   that became visible.
//! - [`DrillReport`] is the evidence: who ran it, when, from which instance, every figure and a
//!   pass/fail per check.
//! - [`canonical_json`] writes a JSON value with every object's members sorted by name and no
//!   whitespace, exactly as `jq -cjS` prints it, and [`digest`] is the SHA-256 of the report's
//!   canonical JSON without its `digest` member (an HMAC-SHA-256 with the deployment's signing
//!   key when one is configured). So anyone can check a report with standard tools:
//!   `jq -cjS 'del(.digest)' report.json | sha256sum`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

/// The report format's name and version, the report's first member.
pub const REPORT_FORMAT: &str = "kmirror-drill-report/1";

/// The drill's overall verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DrillResult {
    /// Every check passed.
    Pass,
    /// A check failed (or the drill could not finish).
    Fail,
}

impl DrillResult {
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            DrillResult::Pass => "pass",
            DrillResult::Fail => "fail",
        }
    }
}

/// One check of a drill.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrillCheck {
    /// Stable name (`no_loss`, `group_resumed_exactly`, ...).
    pub name: String,
    pub passed: bool,
    /// What was seen, in words.
    pub detail: String,
}

/// One cleanup step: something the drill created, removed again (or not).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CleanupStep {
    /// What was removed (`canary topic on the source`, ...).
    pub what: String,
    pub ok: bool,
    /// Why it failed: left behind, to be removed by hand.
    pub error: Option<String>,
}

/// What a drill measured. Durations are whole milliseconds; absent: not measured (the drill
/// stopped before).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrillFigures {
    /// Recovery time: from the stop call to every canary partition STOPPED and accepting writes.
    pub rto_ms: Option<i64>,
    /// How long the stop call itself took to answer.
    pub stop_call_ms: Option<i64>,
    /// How long the mirror took to copy the canary's records once started.
    pub catch_up_ms: Option<i64>,
    /// Committed records produced to the canary on the source.
    pub records_produced: i64,
    /// Records produced in the aborted transaction (must never reach the destination).
    pub records_aborted: i64,
    /// Records the stop itself reported as not mirrored (after the stop point).
    pub records_expected_lost: Option<i64>,
    /// Committed records missing on the destination.
    pub records_lost: Option<i64>,
    /// Records on the destination more than once.
    pub records_duplicated: Option<i64>,
    /// Records of the aborted transaction visible on the destination.
    pub aborted_records_visible: Option<i64>,
    /// The consumer group resumed on the destination at exactly the next record.
    pub group_resumed_exactly: Option<bool>,
    /// The mirror's live RPO when the canary failed over: its lag in records over every
    /// production topic...
    pub mirror_lag_records: Option<i64>,
    /// ...and in milliseconds (the largest partition lag).
    pub mirror_lag_ms: Option<i64>,
}

/// The digest of a report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportDigest {
    /// `sha-256`, or `hmac-sha-256` with the deployment's signing key.
    pub algorithm: String,
    /// Which signing key (the first 16 hex digits of the SHA-256 of the key), for an HMAC.
    pub key_id: Option<String>,
    /// Lowercase hex.
    pub value: String,
}

/// A drill's report: the evidence an auditor keeps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrillReport {
    /// [`REPORT_FORMAT`].
    pub format: String,
    pub drill_id: String,
    pub mirror: String,
    /// The identity that asked for the drill (never a token).
    pub requested_by: String,
    pub client_address: Option<String>,
    /// The identity that approved it, when the mirror's policy needed a second person.
    pub approved_by: Option<String>,
    /// The kmirror instance that ran it.
    pub instance: String,
    pub kmirror_version: String,
    pub source_cluster_id: Option<String>,
    pub destination_cluster_id: String,
    /// RFC 3339.
    pub started_at: String,
    pub finished_at: String,
    pub canary_topic: String,
    pub canary_partitions: i32,
    pub consumer_group: String,
    pub result: DrillResult,
    /// Why the drill stopped before its end, if it did.
    pub error: Option<String>,
    pub figures: DrillFigures,
    pub checks: Vec<DrillCheck>,
    pub cleanup: Vec<CleanupStep>,
    /// Over the canonical JSON of every other member.
    pub digest: Option<ReportDigest>,
}

impl DrillReport {
    /// The verdict of `checks`: pass when there is at least one and every one passed.
    #[must_use]
    pub fn verdict(checks: &[DrillCheck]) -> DrillResult {
        if !checks.is_empty() && checks.iter().all(|c| c.passed) { DrillResult::Pass } else { DrillResult::Fail }
    }

    /// The report's canonical JSON without its digest: what the digest is computed over.
    #[must_use]
    pub fn signed_text(&self) -> String {
        let mut value = serde_json::to_value(self).unwrap_or(serde_json::Value::Null);
        if let Some(o) = value.as_object_mut() {
            o.remove("digest");
        }
        canonical_json(&value)
    }

    /// The report with its digest set: HMAC-SHA-256 with `key` when given, else SHA-256.
    #[must_use]
    pub fn sealed(mut self, key: Option<&[u8]>) -> DrillReport {
        self.digest = None;
        self.digest = Some(digest(self.signed_text().as_bytes(), key));
        self
    }

    /// Whether the report's digest matches its content (with `key` for an HMAC).
    #[must_use]
    pub fn verifies(&self, key: Option<&[u8]>) -> bool {
        let Some(d) = &self.digest else { return false };
        let expected = digest(self.signed_text().as_bytes(), if d.algorithm == HMAC { key } else { None });
        expected.algorithm == d.algorithm && constant_time_eq(expected.value.as_bytes(), d.value.as_bytes())
    }

    /// The whole report as canonical JSON (what is stored and downloaded).
    #[must_use]
    pub fn to_canonical_json(&self) -> String {
        canonical_json(&serde_json::to_value(self).unwrap_or(serde_json::Value::Null))
    }
}

const SHA: &str = "sha-256";
const HMAC: &str = "hmac-sha-256";

/// The digest of `text`: HMAC-SHA-256 with `key`, else SHA-256.
#[must_use]
pub fn digest(text: &[u8], key: Option<&[u8]>) -> ReportDigest {
    match key {
        Some(key) => {
            ReportDigest { algorithm: HMAC.into(), key_id: Some(key_id(key)), value: hex(&hmac_sha256(key, text)) }
        }
        None => ReportDigest { algorithm: SHA.into(), key_id: None, value: hex(&Sha256::digest(text)) },
    }
}

/// Names a signing key without revealing it: the first 16 hex digits of its SHA-256.
#[must_use]
pub fn key_id(key: &[u8]) -> String {
    hex(&Sha256::digest(key))[..16].to_string()
}

/// HMAC-SHA-256 (RFC 2104).
#[must_use]
pub fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    const BLOCK: usize = 64;
    let mut k = [0u8; BLOCK];
    if key.len() > BLOCK {
        k[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let mut inner = Sha256::new();
    inner.update(k.map(|b| b ^ 0x36));
    inner.update(message);
    let mut outer = Sha256::new();
    outer.update(k.map(|b| b ^ 0x5c));
    outer.update(inner.finalize());
    outer.finalize().into()
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// `value` as canonical JSON: objects' members sorted by name (byte order), no whitespace,
/// strings escaped as `jq` escapes them (`"`, `\`, `\b\f\n\r\t`, other control characters and
/// DEL as `\u00XX`; everything else as UTF-8). Numbers as serde_json writes them (a report holds
/// integers only).
#[must_use]
pub fn canonical_json(value: &serde_json::Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &serde_json::Value, out: &mut String) {
    use serde_json::Value;
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::String(s) => write_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(v, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(k, out);
                out.push(':');
                write_canonical(&map[k], out);
            }
            out.push('}');
        }
    }
}

fn write_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// One record the drill produced on the source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Produced {
    pub partition: i32,
    /// Its source offset.
    pub offset: i64,
    /// Its sequence number (unique within the drill).
    pub seq: u64,
    /// In a committed transaction (else in the aborted one).
    pub committed: bool,
}

/// One drill record found on the destination after the failover.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seen {
    pub partition: i32,
    pub offset: i64,
    pub seq: u64,
}

/// What the destination holds against what was produced.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Analysis {
    /// Committed records after the stop point of their partition: what the stop left unmirrored.
    pub expected_lost: i64,
    /// Committed records not on the destination.
    pub lost: i64,
    /// Extra copies of records on the destination.
    pub duplicated: i64,
    /// Records of the aborted transaction on the destination.
    pub aborted_visible: i64,
    /// Records on the destination in another order than on the source, per partition.
    pub out_of_order: i64,
}

/// Compares `produced` with `seen`. `stop_points` holds, per partition, the last source offset
/// the stop recorded as mirrored (`None`: nothing mirrored); a partition missing from it is
/// counted as entirely unmirrored.
#[must_use]
pub fn analyse(produced: &[Produced], seen: &[Seen], stop_points: &BTreeMap<i32, Option<i64>>) -> Analysis {
    let mut a = Analysis::default();
    let mut count: BTreeMap<u64, i64> = BTreeMap::new();
    for s in seen {
        *count.entry(s.seq).or_default() += 1;
    }
    let by_seq: BTreeMap<u64, &Produced> = produced.iter().map(|p| (p.seq, p)).collect();
    for p in produced {
        let n = count.get(&p.seq).copied().unwrap_or(0);
        if p.committed {
            let mirrored = stop_points.get(&p.partition).copied().flatten().is_some_and(|last| p.offset <= last);
            if !mirrored {
                a.expected_lost += 1;
            }
            if n == 0 {
                a.lost += 1;
            }
        } else if n > 0 {
            a.aborted_visible += n;
        }
        if n > 1 {
            a.duplicated += n - 1;
        }
    }
    // Order: per partition, the source offsets of the records seen must increase.
    let mut last: BTreeMap<i32, i64> = BTreeMap::new();
    let mut seen_sorted: Vec<&Seen> = seen.iter().collect();
    seen_sorted.sort_by_key(|s| (s.partition, s.offset));
    for s in seen_sorted {
        let Some(p) = by_seq.get(&s.seq) else { continue };
        if let Some(prev) = last.insert(s.partition, p.offset)
            && p.offset <= prev
        {
            a.out_of_order += 1;
        }
    }
    a
}

/// Whether a consumer group resumes exactly: for each partition, the sequence number of the
/// record the group's committed source offset points at (the next one to consume) against the
/// one found at the group's committed offset on the destination after the failover. Returns the
/// partitions that do not match, with what was expected and found (`None`: nothing there).
#[must_use]
pub fn resume_mismatches(
    expected_next: &BTreeMap<i32, u64>,
    found_next: &BTreeMap<i32, Option<u64>>,
) -> Vec<(i32, u64, Option<u64>)> {
    expected_next
        .iter()
        .filter_map(|(p, want)| {
            let got = found_next.get(p).copied().flatten();
            (got != Some(*want)).then_some((*p, *want, got))
        })
        .collect()
}

/// The sequence number a drill record's value carries: `{"drill":"<id>","seq":<n>}`; `None` for
/// anything else (another drill's record, a probe).
#[must_use]
pub fn record_seq(drill_id: &str, value: &[u8]) -> Option<u64> {
    #[derive(Deserialize)]
    struct V<'a> {
        drill: &'a str,
        seq: u64,
    }
    let v: V<'_> = serde_json::from_slice(value).ok()?;
    (v.drill == drill_id).then_some(v.seq)
}

/// A drill record's value.
#[must_use]
pub fn record_value(drill_id: &str, seq: u64) -> Vec<u8> {
    serde_json::json!({"drill": drill_id, "seq": seq}).to_string().into_bytes()
}

/// The checks of a drill that reached the verification, from its figures.
#[must_use]
pub fn checks_of(f: &DrillFigures, objectives: &Objectives) -> Vec<DrillCheck> {
    let mut out = Vec::new();
    let check = |name: &str, passed: bool, detail: String| DrillCheck { name: name.into(), passed, detail };
    if let (Some(lost), Some(expected)) = (f.records_lost, f.records_expected_lost) {
        out.push(check(
            "no_loss",
            lost == expected,
            format!("{lost} of {} committed records missing on the destination; the stop reported {expected} as not mirrored", f.records_produced),
        ));
    }
    if let Some(d) = f.records_duplicated {
        out.push(check("no_duplicates", d == 0, format!("{d} records on the destination more than once")));
    }
    if let Some(v) = f.aborted_records_visible {
        out.push(check(
            "aborted_invisible",
            v == 0,
            format!("{v} of {} records of the aborted transaction visible on the destination", f.records_aborted),
        ));
    }
    if let Some(rto) = f.rto_ms {
        match objectives.rto_ms {
            Some(objective) => out.push(check(
                "rto_objective",
                rto <= objective,
                format!("recovery took {rto} ms; the objective is {objective} ms"),
            )),
            None => out.push(check(
                "failover_completed",
                true,
                format!("every partition STOPPED and writable after {rto} ms"),
            )),
        }
    }
    if let (Some(objective), Some(lag_ms)) = (objectives.rpo_ms, f.mirror_lag_ms) {
        out.push(check(
            "rpo_objective",
            lag_ms <= objective,
            format!("the mirror was {lag_ms} ms behind its source at the failover; the objective is {objective} ms"),
        ));
    }
    out
}

/// Targets a drill may be asked to meet.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Objectives {
    /// Recovery time objective: the failover must complete within it.
    pub rto_ms: Option<i64>,
    /// Recovery point objective: the mirror's lag when the canary failed over must be within it.
    pub rpo_ms: Option<i64>,
}

/// The report as Markdown, for a ticket or an audit folder. The digest is over the JSON report,
/// which the Markdown names.
#[must_use]
pub fn markdown(r: &DrillReport) -> String {
    let mut s = String::new();
    let verdict = match r.result {
        DrillResult::Pass => "PASS",
        DrillResult::Fail => "FAIL",
    };
    let _ = writeln!(s, "# DR drill {}: {verdict}\n", md(&r.drill_id));
    let _ = writeln!(s, "| | |\n|---|---|");
    let row = |s: &mut String, k: &str, v: &str| {
        let _ = writeln!(s, "| {k} | {} |", md(v));
    };
    row(&mut s, "Mirror", &r.mirror);
    row(&mut s, "Requested by", &r.requested_by);
    if let Some(a) = &r.approved_by {
        row(&mut s, "Approved by", a);
    }
    if let Some(a) = &r.client_address {
        row(&mut s, "From address", a);
    }
    row(&mut s, "Run by instance", &r.instance);
    row(&mut s, "kmirror version", &r.kmirror_version);
    row(&mut s, "Started", &r.started_at);
    row(&mut s, "Finished", &r.finished_at);
    row(&mut s, "Source cluster", r.source_cluster_id.as_deref().unwrap_or("unknown"));
    row(&mut s, "Destination cluster", &r.destination_cluster_id);
    row(&mut s, "Canary topic", &format!("{} ({} partitions)", r.canary_topic, r.canary_partitions));
    row(&mut s, "Consumer group", &r.consumer_group);
    if let Some(e) = &r.error {
        let _ = writeln!(s, "\n**The drill stopped early:** {}", md(e));
    }
    let f = &r.figures;
    let opt = |v: Option<i64>| v.map_or_else(|| "not measured".to_string(), |v| v.to_string());
    let ms = |v: Option<i64>| v.map_or_else(|| "not measured".to_string(), |v| format!("{v} ms"));
    let _ = writeln!(s, "\n## Figures\n\n| Figure | Value |\n|---|---|");
    row(&mut s, "Recovery time (stop call to every partition STOPPED and writable)", &ms(f.rto_ms));
    row(&mut s, "Stop call answered after", &ms(f.stop_call_ms));
    row(&mut s, "Canary mirrored after", &ms(f.catch_up_ms));
    row(&mut s, "Committed records produced", &f.records_produced.to_string());
    row(&mut s, "Records in the aborted transaction", &f.records_aborted.to_string());
    row(&mut s, "Records the stop reported as not mirrored", &opt(f.records_expected_lost));
    row(&mut s, "Records lost", &opt(f.records_lost));
    row(&mut s, "Records duplicated", &opt(f.records_duplicated));
    row(&mut s, "Aborted records visible", &opt(f.aborted_records_visible));
    row(
        &mut s,
        "Group resumed at exactly the next record",
        &f.group_resumed_exactly
            .map_or_else(|| "not measured".to_string(), |b| if b { "yes" } else { "no" }.to_string()),
    );
    row(&mut s, "Mirror lag at the failover (records)", &opt(f.mirror_lag_records));
    row(&mut s, "Mirror lag at the failover (time)", &ms(f.mirror_lag_ms));
    let _ = writeln!(s, "\n## Checks\n\n| Check | Result | Detail |\n|---|---|---|");
    for c in &r.checks {
        let _ = writeln!(s, "| {} | {} | {} |", md(&c.name), if c.passed { "pass" } else { "**fail**" }, md(&c.detail));
    }
    let _ = writeln!(s, "\n## Cleanup\n\n| What | Result |\n|---|---|");
    for c in &r.cleanup {
        let result = match &c.error {
            None => "removed".to_string(),
            Some(e) => format!("**left behind**: {e}"),
        };
        let _ = writeln!(s, "| {} | {} |", md(&c.what), md(&result));
    }
    let _ = writeln!(s, "\n## Digest\n");
    match &r.digest {
        Some(d) => {
            let _ = writeln!(
                s,
                "`{}`{}: `{}`\n\nOver the JSON report's canonical form without its `digest` member. Check it with\n`jq -cjS 'del(.digest)' report.json | {}`.",
                d.algorithm,
                d.key_id.as_deref().map(|k| format!(" (key {k})")).unwrap_or_default(),
                d.value,
                if d.algorithm == HMAC { "openssl dgst -sha256 -hmac \"$(cat signing.key)\"" } else { "sha256sum" }
            );
        }
        None => s.push_str("none\n"),
    }
    s
}

/// Text safe in a Markdown table cell.
fn md(text: &str) -> String {
    text.replace('\\', "\\\\").replace('|', "\\|").replace(['\n', '\r'], " ")
}

/// The partitions of `produced` and, per partition, the committed sequence numbers in source
/// offset order.
#[must_use]
pub fn committed_by_partition(produced: &[Produced]) -> BTreeMap<i32, Vec<(i64, u64)>> {
    let mut out: BTreeMap<i32, Vec<(i64, u64)>> = BTreeMap::new();
    for p in produced.iter().filter(|p| p.committed) {
        out.entry(p.partition).or_default().push((p.offset, p.seq));
    }
    for v in out.values_mut() {
        v.sort_unstable();
    }
    out
}

/// Distinct partitions of `produced`.
#[must_use]
pub fn partitions(produced: &[Produced]) -> BTreeSet<i32> {
    produced.iter().map(|p| p.partition).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report() -> DrillReport {
        DrillReport {
            format: REPORT_FORMAT.into(),
            drill_id: "drill-1".into(),
            mirror: "eu-to-dr".into(),
            requested_by: "alice".into(),
            client_address: Some("10.0.0.1".into()),
            approved_by: None,
            instance: "kmirror-0".into(),
            kmirror_version: "0.1.0".into(),
            source_cluster_id: Some("EEB8".into()),
            destination_cluster_id: "rurT".into(),
            started_at: "2026-01-01T00:00:00.000Z".into(),
            finished_at: "2026-01-01T00:00:10.000Z".into(),
            canary_topic: "kmirror-drill.eu-to-dr".into(),
            canary_partitions: 3,
            consumer_group: "kmirror-drill.eu-to-dr".into(),
            result: DrillResult::Pass,
            error: None,
            figures: DrillFigures { rto_ms: Some(812), records_produced: 300, ..Default::default() },
            checks: vec![DrillCheck {
                name: "no_loss".into(),
                passed: true,
                detail: "0 | \"quoted\"\nnew\u{7f}".into(),
            }],
            cleanup: vec![CleanupStep { what: "canary".into(), ok: true, error: None }],
            digest: None,
        }
    }

    #[test]
    fn canonical_json_sorts_members_and_escapes_like_jq() {
        let v = serde_json::json!({"b": [1, {"z": null, "a": true}], "a": "x\"\\\n\u{1}\u{7f}é/"});
        assert_eq!(canonical_json(&v), r#"{"a":"x\"\\\n\u0001\u007fé/","b":[1,{"a":true,"z":null}]}"#);
    }

    #[test]
    fn the_digest_covers_every_member_but_itself_and_an_hmac_needs_its_key() {
        let r = report().sealed(None);
        let d = r.digest.clone().unwrap();
        assert_eq!(d.algorithm, "sha-256");
        assert_eq!(d.value.len(), 64);
        assert!(r.verifies(None));
        // What a verifier computes by hand: the canonical text without the digest member.
        assert!(!r.signed_text().contains("digest"));
        assert_eq!(hex(&Sha256::digest(r.signed_text().as_bytes())), d.value);
        let mut tampered = r.clone();
        tampered.figures.rto_ms = Some(811);
        assert!(!tampered.verifies(None));
        // Round trip through the stored canonical JSON keeps it verifiable.
        let back: DrillReport = serde_json::from_str(&r.to_canonical_json()).unwrap();
        assert_eq!(back, r);
        assert!(back.verifies(None));

        let key = b"0123456789abcdef0123456789abcdef";
        let signed = report().sealed(Some(key));
        let d = signed.digest.clone().unwrap();
        assert_eq!(d.algorithm, "hmac-sha-256");
        assert_eq!(d.key_id.as_deref(), Some(key_id(key).as_str()));
        assert!(signed.verifies(Some(key)));
        assert!(!signed.verifies(Some(b"another key, not the one that signed")));
        assert!(!signed.verifies(None));
    }

    #[test]
    fn hmac_matches_rfc_4231() {
        // Test case 2 of RFC 4231.
        let mac = hmac_sha256(b"Jefe", b"what do ya want for nothing?");
        assert_eq!(hex(&mac), "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
        // Test case 6: a key longer than the block.
        let mac = hmac_sha256(&[0xaa; 131], b"Test Using Larger Than Block-Size Key - Hash Key First");
        assert_eq!(hex(&mac), "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
    }

    fn produced(partition: i32, from_offset: i64, seqs: std::ops::Range<u64>, committed: bool) -> Vec<Produced> {
        seqs.enumerate()
            .map(|(i, seq)| Produced { partition, offset: from_offset + i as i64, seq, committed })
            .collect()
    }

    #[test]
    fn analysis_counts_loss_against_the_stop_point_duplicates_and_aborted_records() {
        let mut p = produced(0, 0, 0..10, true);
        p.extend(produced(0, 10, 10..15, false)); // aborted (offsets 10..15, marker at 15)
        p.extend(produced(0, 16, 15..20, true));
        let stop = BTreeMap::from([(0, Some(20))]);
        let all: Vec<Seen> = p
            .iter()
            .filter(|x| x.committed)
            .enumerate()
            .map(|(i, x)| Seen { partition: 0, offset: i as i64, seq: x.seq })
            .collect();
        assert_eq!(analyse(&p, &all, &stop), Analysis::default());

        // The stop point before the last record: one expected loss, and that one is missing.
        let stop_early = BTreeMap::from([(0, Some(19))]);
        let a = analyse(&p, &all[..all.len() - 1], &stop_early);
        assert_eq!((a.expected_lost, a.lost), (1, 1));

        let mut dup = all.clone();
        dup.push(Seen { partition: 0, offset: 99, seq: 3 });
        dup.push(Seen { partition: 0, offset: 100, seq: 12 }); // an aborted one
        let a = analyse(&p, &dup, &stop);
        assert_eq!((a.duplicated, a.aborted_visible, a.lost), (1, 1, 0));
        assert!(a.out_of_order >= 1);
        // Nothing mirrored at all (no stop point): everything is expected lost.
        let a = analyse(&p, &[], &BTreeMap::new());
        assert_eq!((a.expected_lost, a.lost), (15, 15));
    }

    #[test]
    fn resume_is_exact_only_at_the_next_record() {
        let want = BTreeMap::from([(0, 5), (1, 40)]);
        assert!(resume_mismatches(&want, &BTreeMap::from([(0, Some(5)), (1, Some(40))])).is_empty());
        assert_eq!(
            resume_mismatches(&want, &BTreeMap::from([(0, Some(4)), (1, None)])),
            [(0, 5, Some(4)), (1, 40, None)]
        );
    }

    #[test]
    fn records_carry_their_drill_and_sequence() {
        let v = record_value("d1", 42);
        assert_eq!(record_seq("d1", &v), Some(42));
        assert_eq!(record_seq("d2", &v), None);
        assert_eq!(record_seq("d1", b"probe"), None);
    }

    #[test]
    fn checks_and_the_verdict() {
        let f = DrillFigures {
            rto_ms: Some(900),
            records_produced: 300,
            records_aborted: 30,
            records_expected_lost: Some(0),
            records_lost: Some(0),
            records_duplicated: Some(0),
            aborted_records_visible: Some(0),
            mirror_lag_ms: Some(2_000),
            ..Default::default()
        };
        let c = checks_of(&f, &Objectives::default());
        assert_eq!(
            c.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
            ["no_loss", "no_duplicates", "aborted_invisible", "failover_completed"]
        );
        assert_eq!(DrillReport::verdict(&c), DrillResult::Pass);
        let c = checks_of(&f, &Objectives { rto_ms: Some(500), rpo_ms: Some(1_000) });
        assert!(c.iter().any(|c| c.name == "rto_objective" && !c.passed));
        assert!(c.iter().any(|c| c.name == "rpo_objective" && !c.passed));
        assert_eq!(DrillReport::verdict(&c), DrillResult::Fail);
        assert_eq!(DrillReport::verdict(&[]), DrillResult::Fail);
        let lossy = DrillFigures { records_lost: Some(2), records_expected_lost: Some(0), ..f };
        assert!(checks_of(&lossy, &Objectives::default()).iter().any(|c| c.name == "no_loss" && !c.passed));
    }

    #[test]
    fn markdown_names_everything_and_escapes_cells() {
        let r = report().sealed(None);
        let m = markdown(&r);
        for needle in [
            "# DR drill drill-1: PASS",
            "| Requested by | alice |",
            "| Run by instance | kmirror-0 |",
            "812 ms",
            "`sha-256`",
            "sha256sum",
            "0 \\| \"quoted\" new",
        ] {
            assert!(m.contains(needle), "{needle:?} in\n{m}");
        }
    }
}
