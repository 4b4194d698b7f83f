//! The alerting files users plug in: `deploy/prometheus/alerts.yml` loads in Prometheus
//! (`promtool check rules`, and its unit tests `alerts.test.yml` fire every rule, when promtool is
//! installed: scripts/test installs it) and, always,
//! has the expected structure and names only metrics a real standalone engine exports; the Grafana
//! dashboard `deploy/grafana/kmirror.json` is JSON over exported metrics too.

use std::collections::BTreeSet;

use kmirror::api::HttpMetrics;

use crate::engine::TestEngine;
use crate::support::*;

const RULES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/prometheus/alerts.yml");
const RULE_TESTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/prometheus/alerts.test.yml");
const DRILL_RULE_TESTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/prometheus/alerts.drills.test.yml");
const DASHBOARD: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/grafana/kmirror.json");

/// Every metric name a real engine's `/metrics` declares (`# TYPE`), histograms with their series
/// suffixes; and the whole text, for label values.
async fn exported() -> (BTreeSet<String>, String) {
    let eng = TestEngine::start().await;
    let mirror = unique("alerts");
    eng.create_mirror(&mirror).await;
    let text =
        kmirror::api::metrics::render(&eng.handle.snapshot(), kmirror::clock::now(), &HttpMetrics::default(), "t");
    eng.stop().await;
    let mut names = BTreeSet::new();
    for line in text.lines() {
        let mut words = line.strip_prefix("# TYPE ").unwrap_or("").split_whitespace();
        if let (Some(name), Some(kind)) = (words.next(), words.next()) {
            names.insert(name.to_string());
            if kind == "histogram" {
                for suffix in ["_bucket", "_sum", "_count"] {
                    names.insert(format!("{name}{suffix}"));
                }
            }
        }
    }
    (names, text)
}

fn metric_names(expr: &str) -> Vec<String> {
    let re = regex::Regex::new(r"\bkmirror_[a-z_]+\b").unwrap();
    re.find_iter(expr).map(|m| m.as_str().to_string()).collect()
}

/// The rules as (alert, expr, for, severity, has summary, has description), read line by line
/// (the file keeps every field on one line).
fn rules(text: &str) -> Vec<(String, String, String, String, bool, bool)> {
    let mut out: Vec<(String, String, String, String, bool, bool)> = Vec::new();
    for line in text.lines() {
        let t = line.trim();
        if let Some(name) = t.strip_prefix("- alert: ") {
            out.push((name.trim().to_string(), String::new(), String::new(), String::new(), false, false));
            continue;
        }
        let Some(r) = out.last_mut() else { continue };
        if let Some(v) = t.strip_prefix("expr: ") {
            r.1 = v.to_string();
        } else if let Some(v) = t.strip_prefix("for: ") {
            r.2 = v.to_string();
        } else if let Some(v) = t.strip_prefix("severity: ") {
            r.3 = v.to_string();
        } else if t.starts_with("summary: ") {
            r.4 = true;
        } else if t.starts_with("description: ") {
            r.5 = true;
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alert_rules_load_and_name_only_exported_metrics() {
    let _rig = shared().await;
    let text = std::fs::read_to_string(RULES).expect("deploy/prometheus/alerts.yml");
    // Structure: one group, every rule complete.
    assert!(text.lines().any(|l| l.trim_end() == "groups:"), "a top-level groups list");
    assert!(text.contains("  - name: kmirror\n    rules:\n"), "the kmirror group");
    let rules = rules(&text);
    let names: Vec<&str> = rules.iter().map(|r| r.0.as_str()).collect();
    assert_eq!(
        names,
        [
            "KmirrorPartitionFailed",
            "KmirrorLagHigh",
            "KmirrorSourceClusterIdMismatch",
            "KmirrorSyncFailing",
            "KmirrorSnapshotStale",
            "KmirrorSlotWithoutOwner",
            "KmirrorOldSourceWrittenAfterFailover",
            "KmirrorNoPassingDrill"
        ]
    );
    let duration = regex::Regex::new(r"^[0-9]+[smh]$").unwrap();
    for (name, expr, for_, severity, summary, description) in &rules {
        assert!(!expr.is_empty() && !metric_names(expr).is_empty(), "{name}: an expr over kmirror metrics");
        assert!(duration.is_match(for_), "{name}: for: {for_:?}");
        assert!(["warning", "critical"].contains(&severity.as_str()), "{name}: severity {severity:?}");
        assert!(*summary && *description, "{name}: summary and description");
        let open = expr.matches('(').count();
        assert_eq!(open, expr.matches(')').count(), "{name}: balanced parentheses");
    }

    // Prometheus itself loads them, when promtool is there (scripts/test installs it).
    match std::process::Command::new("promtool").args(["check", "rules", RULES]).output() {
        Ok(out) => {
            let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
            assert!(out.status.success() && said.contains("SUCCESS: 8 rules found"), "promtool check rules:\n{said}");
        }
        Err(e) => eprintln!("promtool not found ({e}): checked the structure and the metric names only"),
    }
    // ...and each rule fires when it should, on series shaped like kmirror's (alerts.test.yml).
    if let Ok(out) =
        std::process::Command::new("promtool").args(["test", "rules", RULE_TESTS, DRILL_RULE_TESTS]).output()
    {
        let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success() && said.contains("SUCCESS"), "promtool test rules:\n{said}");
    }

    // Every metric a rule or a dashboard panel names is one kmirror exports.
    let (exported, text) = exported().await;
    for (name, expr, ..) in &rules {
        for metric in metric_names(expr) {
            assert!(exported.contains(&metric), "{name} uses {metric}, which kmirror does not export");
        }
    }
    assert!(text.contains(r#"state="FAILED"}"#), "the FAILED state label the rule selects");
    let dashboard: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(DASHBOARD).expect("deploy/grafana/kmirror.json")).unwrap();
    assert_eq!(dashboard["uid"], "kmirror");
    let mut exprs = Vec::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        assert!(panel["title"].is_string() && panel["gridPos"].is_object(), "{panel}");
        for target in panel["targets"].as_array().unwrap() {
            exprs.push(target["expr"].as_str().unwrap().to_string());
        }
    }
    for var in dashboard["templating"]["list"].as_array().unwrap() {
        if let Some(q) = var["query"]["query"].as_str() {
            exprs.push(q.to_string());
        }
    }
    assert!(exprs.len() >= 15, "{exprs:?}");
    for expr in &exprs {
        let names = metric_names(expr);
        assert!(!names.is_empty(), "{expr}");
        for metric in names {
            assert!(exported.contains(&metric), "the dashboard uses {metric}, which kmirror does not export");
        }
    }
}
