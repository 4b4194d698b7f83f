//! DR drills through the API against the rig: a drill on a mirror under load passes, measures
//! its figures, cleans up the canary on both clusters and leaves the production topic's content
//! and states alone; its report's digest verifies (with the standard tools too); a source that
//! refuses to create the canary fails the drill at once, with nothing left behind.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};

use kmirror::domain::drill::DrillReport;
use kmirror::engine::DrillSigningKey;

use crate::api::{ADMIN, OPERATOR, TestServer, VIEWER, tokens};
use crate::engine::{TestEngine, Traffic, assert_same_content, keyed};
use crate::support::*;

/// The signing key of the drill tests (at least 32 bytes).
const SIGNING_KEY: &str = "drill-test-signing-key-0123456789abcdef0123456789";

async fn topic_exists(cluster: Cluster, topic: &str) -> bool {
    match cluster.admin().describe_topic(topic).await {
        Ok(_) => true,
        Err(e) if e.is(kmirror::kafka::KafkaErrorKind::UnknownTopicOrPartition) => false,
        Err(e) => panic!("describe {topic} on the {}: {e}", cluster.name()),
    }
}

async fn group_exists(cluster: Cluster, group: &str) -> bool {
    let groups = cluster.admin().list_consumer_groups().await.expect("list groups");
    groups.iter().any(|g| g.group_id == group)
}

/// Polls the drill's operation until it is finished; returns the last answer. Checks on the way
/// that its progress is served (steps) while it runs.
async fn wait_drill(srv: &TestServer, id: &str) -> Value {
    let saw_running = std::sync::atomic::AtomicBool::new(false);
    let op = eventually("the drill to finish", Duration::from_secs(300), || async {
        let op = srv.get(&format!("/api/v1/operations/{id}"), Some(VIEWER)).await.ok(200).clone();
        assert_eq!(op["kind"], "drill", "{op}");
        assert!(op["drill"]["steps"].as_array().is_some_and(|s| s.len() == 7), "{op}");
        if op["outcome"] == "pending" {
            saw_running.store(true, std::sync::atomic::Ordering::Relaxed);
            None
        } else {
            Some(op)
        }
    })
    .await;
    assert!(saw_running.into_inner(), "the drill's progress was never seen while it ran");
    op
}

/// `jq -cjS 'del(.digest)' | openssl dgst -sha256 -hmac <key>`: the digest as an auditor checks it.
fn digest_by_tools(report: &[u8], key: Option<&str>) -> String {
    use std::io::Write;
    let mut jq = std::process::Command::new("jq")
        .args(["-cjS", "del(.digest)"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("jq");
    jq.stdin.take().unwrap().write_all(report).unwrap();
    let canonical = jq.wait_with_output().unwrap().stdout;
    let mut args = vec!["dgst".to_string(), "-sha256".to_string()];
    if let Some(k) = key {
        args.extend(["-hmac".to_string(), k.to_string()]);
    }
    let mut openssl = std::process::Command::new("openssl")
        .args(&args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("openssl");
    openssl.stdin.take().unwrap().write_all(&canonical).unwrap();
    let out = String::from_utf8(openssl.wait_with_output().unwrap().stdout).unwrap();
    out.trim().rsplit(' ').next().unwrap().to_string()
}

/// Each partition's state and since when it is in it: a transition in between changes the time.
fn partition_states(topic: &Value) -> BTreeMap<i64, (String, String)> {
    topic["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let state = p["state"].as_str().unwrap().to_string();
            (p["partition"].as_i64().unwrap(), (state, p["state_since"].as_str().unwrap().to_string()))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_drill_under_load_passes_cleans_up_and_leaves_production_alone() {
    let _rig = shared().await;
    let production = TestTopic::create(Cluster::Source, "drill-prod", 3, &[]).await;
    let name = production.name.clone();
    tokio::task::spawn_blocking(move || produce(Cluster::Source, &name, &keyed(600, 3, "before"))).await.unwrap();

    let mut config = TestEngine::config();
    config.drill_signing_key = Some(DrillSigningKey::from_file_contents(SIGNING_KEY.as_bytes()).unwrap());
    let eng = TestEngine::with_config(config).await;
    let srv = TestServer::start(eng.handle.clone(), tokens()).await;
    let mirror = unique("drill");
    let mp = format!("/api/v1/mirrors/{mirror}");
    let body = json!({"name": mirror, "source": {"bootstrap_servers": Cluster::Source.bootstrap()}});
    srv.post("/api/v1/mirrors", ADMIN, body).await.ok(201);
    let r = srv.post(&format!("{mp}/topics:start"), OPERATOR, json!({"topics": [production.name]})).await;
    assert!(r.ok(200)["results"][0]["ok"] == true, "{}", r.text);
    eng.wait_caught_up(&mirror, &production.name, 3).await;
    let topic_url = format!("{mp}/topics/{}", production.name);
    let before = partition_states(srv.get(&topic_url, Some(VIEWER)).await.ok(200));
    assert!(before.values().all(|(s, _)| s == "MIRRORING"), "{before:?}");

    // Load on the production topic for the whole drill.
    let traffic = Traffic::start(&production.name, 3);
    let started = srv.post(&format!("{mp}/drills"), OPERATOR, json!({})).await;
    let started = started.ok(202).clone();
    assert_eq!(started["status"], "running", "{started}");
    let id = started["operation_id"].as_str().unwrap().to_string();
    // One drill at a time.
    srv.post(&format!("{mp}/drills"), OPERATOR, json!({})).await.problem(409, "drill-running");

    let op = wait_drill(&srv, &id).await;
    let produced_live = traffic.finish();
    assert!(produced_live > 0);
    assert_eq!(op["outcome"], "succeeded", "{op}");
    let drill = srv.get(&format!("{mp}/drills/{id}"), Some(VIEWER)).await.ok(200).clone();
    assert_eq!((drill["status"].as_str(), drill["result"].as_str()), (Some("passed"), Some("pass")), "{drill:#}");
    let report = &drill["report"];
    let f = &report["figures"];
    assert!(f["rto_ms"].as_i64().is_some_and(|ms| ms > 0), "{f}");
    assert_eq!(f["records_produced"], 300, "{f}");
    assert_eq!(f["records_aborted"], 30, "{f}");
    assert_eq!((f["records_lost"].as_i64(), f["records_expected_lost"].as_i64()), (Some(0), Some(0)), "{f}");
    assert_eq!(f["records_duplicated"], 0, "{f}");
    assert_eq!(f["aborted_records_visible"], 0, "{f}");
    assert_eq!(f["group_resumed_exactly"], true, "{report:#}");
    assert!(f["mirror_lag_records"].is_i64() && f["mirror_lag_ms"].is_i64(), "{f}");
    assert_eq!(report["requested_by"], "ci-operator");
    assert_eq!(report["instance"], eng.config.instance_id.as_str());
    assert_eq!(report["result"], "pass");
    for c in report["checks"].as_array().unwrap() {
        assert_eq!(c["passed"], true, "{c}");
    }
    let checks: Vec<&str> = report["checks"].as_array().unwrap().iter().filter_map(|c| c["name"].as_str()).collect();
    for needed in
        ["canary_created", "no_loss", "no_duplicates", "aborted_invisible", "group_resumed_exactly", "cleanup"]
    {
        assert!(checks.contains(&needed), "{needed} missing: {checks:?}");
    }
    assert!(report["cleanup"].as_array().unwrap().iter().all(|c| c["ok"] == true), "{report:#}");

    // Nothing left: the canary is gone from both clusters and from the mirror, its group too.
    let canary = format!("kmirror-drill.{mirror}");
    assert_eq!(report["canary_topic"], canary.as_str());
    assert!(!topic_exists(Cluster::Source, &canary).await, "the canary is left on the source");
    assert!(!topic_exists(Cluster::Destination, &canary).await, "the canary is left on the destination");
    assert!(!group_exists(Cluster::Source, &canary).await, "the drill's group is left on the source");
    assert!(!group_exists(Cluster::Destination, &canary).await, "the drill's group is left on the destination");
    let topics = srv.get(&format!("{mp}/topics"), Some(VIEWER)).await.ok(200).clone();
    let names: Vec<&str> = topics["topics"].as_array().unwrap().iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(names, [production.name.as_str()]);

    // The production topic: the same partitions in the same states since the same time (no
    // transition happened),
    // and, once caught up, exactly the source's records.
    let after = partition_states(srv.get(&topic_url, Some(VIEWER)).await.ok(200));
    assert_eq!(before, after, "the production topic's states changed");
    eng.wait_caught_up(&mirror, &production.name, 3).await;
    let total = assert_same_content(&production.name, 3).await;
    assert_eq!(total, 600 + produced_live);

    // The report as signed: the stored bytes verify, in Rust and with jq + openssl.
    let url = drill["report_json_url"].as_str().unwrap().to_string();
    let raw = srv.get(&url, Some(VIEWER)).await;
    assert_eq!(raw.status, 200);
    let parsed: DrillReport = serde_json::from_str(&raw.text).unwrap();
    assert_eq!(parsed.digest.as_ref().unwrap().algorithm, "hmac-sha-256");
    assert!(parsed.verifies(Some(SIGNING_KEY.as_bytes())), "the report does not verify");
    assert!(!parsed.verifies(Some(b"another key that did not sign this report")));
    assert_eq!(digest_by_tools(raw.text.as_bytes(), Some(SIGNING_KEY)), parsed.digest.as_ref().unwrap().value);
    assert!(!raw.text.contains(SIGNING_KEY));
    let tampered = raw.text.replacen("\"records_lost\":0", "\"records_lost\":1", 1);
    assert_ne!(tampered, raw.text);
    assert!(!serde_json::from_str::<DrillReport>(&tampered).unwrap().verifies(Some(SIGNING_KEY.as_bytes())));
    let md = srv.get(drill["report_markdown_url"].as_str().unwrap(), Some(VIEWER)).await;
    assert_eq!(md.status, 200);
    assert!(md.text.starts_with(&format!("# DR drill {id}: PASS")), "{}", md.text);
    assert!(md.text.contains("hmac-sha-256"), "{}", md.text);

    // Listed, in the audit trail, and in the metrics.
    let list = srv.get(&format!("{mp}/drills"), Some(VIEWER)).await.ok(200).clone();
    assert_eq!(list["items"][0]["id"], id.as_str());
    let audit = srv.get(&format!("/api/v1/audit?mirror={mirror}"), Some(VIEWER)).await.ok(200).clone();
    assert!(
        audit["items"].as_array().unwrap().iter().any(|o| o["id"] == id.as_str() && o["kind"] == "drill"),
        "{audit}"
    );
    let metrics = srv.get("/metrics", Some(VIEWER)).await;
    let line = format!("kmirror_last_drill_timestamp_seconds{{mirror=\"{mirror}\",result=\"pass\"}} ");
    assert!(metrics.text.contains(&line), "{line} missing");

    srv.post(&format!("{mp}/topics:stop"), OPERATOR, json!({"topics": [production.name]})).await.ok(200);
    eng.stop().await;
    let _ = Cluster::Destination.admin().delete_topic(&production.name).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drill_the_source_refuses_fails_clearly_and_leaves_nothing_behind() {
    let _rig = shared().await;
    let env = |k: &str| std::env::var(k).unwrap_or_default();
    let eng = TestEngine::start().await;
    let srv = TestServer::start(eng.handle.clone(), tokens()).await;
    let mirror = unique("drill-refused");
    let mp = format!("/api/v1/mirrors/{mirror}");
    // The rig's `kmirror-limited` user may connect but has no ACL: CreateTopics is refused.
    let user = std::env::var("KMIRROR_TEST_SASL_LIMITED_USERNAME").unwrap_or_else(|_| "kmirror-limited".into());
    let password = std::env::var("KMIRROR_TEST_SASL_LIMITED_PASSWORD")
        .unwrap_or_else(|_| "kmirror-rig-limited-secret-93ad".into());
    let body = json!({"name": mirror, "source": {
        "bootstrap_servers": env("KMIRROR_TEST_SOURCE_SASL_BOOTSTRAP"),
        "properties": {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
                       "sasl.username": user, "sasl.password": password}}});
    let created = srv.post("/api/v1/mirrors", ADMIN, body).await;
    assert_eq!(
        created.status, 201,
        "{} (a rig started before the kmirror-limited user existed needs `scripts/kafka-rig stop` and `start`)",
        created.text
    );
    let r = srv.post(&format!("{mp}/drills"), OPERATOR, json!({})).await;
    r.problem(422, "drill-canary-refused");
    let detail = r.json["detail"].as_str().unwrap();
    assert!(detail.contains("refused to create the canary topic") && detail.contains("CREATE"), "{detail}");
    assert!(!r.text.contains(&password));

    let canary = format!("kmirror-drill.{mirror}");
    assert!(!topic_exists(Cluster::Source, &canary).await);
    assert!(!topic_exists(Cluster::Destination, &canary).await);
    let topics = srv.get(&format!("{mp}/topics"), Some(VIEWER)).await.ok(200).clone();
    assert_eq!(topics["topics"], json!([]));
    // The failed drill is evidence too.
    let list = srv.get(&format!("{mp}/drills"), Some(VIEWER)).await.ok(200).clone();
    let d = &list["items"][0];
    assert_eq!((d["status"].as_str(), d["result"].as_str()), (Some("failed"), Some("fail")), "{d:#}");
    assert_eq!(d["report"]["checks"][0]["name"], "canary_created");
    assert_eq!(d["report"]["checks"][0]["passed"], false);
    assert_eq!(d["report"]["cleanup"], json!([]), "nothing was created, so nothing is removed");
    assert!(DrillReport::verifies(&serde_json::from_value(d["report"].clone()).unwrap(), None));
    let metrics = srv.get("/metrics", Some(VIEWER)).await;
    assert!(
        metrics.text.contains(&format!("kmirror_last_drill_timestamp_seconds{{mirror=\"{mirror}\",result=\"fail\"}} "))
    );

    // A bad canary name is refused before anything happens.
    let long = "x".repeat(250);
    srv.post(&format!("{mp}/drills"), OPERATOR, json!({"canary_topic": long})).await.problem(400, "invalid-name");
    srv.post(&format!("{mp}/drills"), VIEWER, json!({})).await.problem(403, "forbidden");
    srv.post(&format!("{mp}/drills"), OPERATOR, json!({"rto_objective_seconds": 0}))
        .await
        .problem(400, "invalid-setting");
    srv.post("/api/v1/mirrors/no-such-mirror/drills", OPERATOR, json!({})).await.problem(404, "mirror-not-found");
    srv.get(&format!("{mp}/drills/op-none"), Some(VIEWER)).await.problem(404, "drill-not-found");
    eng.stop().await;
}
