//! A planned switch-over (`kmirror topics stop --promote`), what a stop would leave unmirrored
//! (`--validate-only`) and every topic at once (`--all`), end to end: the `kmirror` client
//! against a real `kmirror serve` on the rig.

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use rdkafka::Message;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::producer::{BaseRecord, Producer};
use serde_json::{Value, json};

use kmirror::kafka::{IsolationLevel, OffsetSpec};

use crate::client::{ADMIN, DestinationTopics, Serve, mirror_file, temp_file, wait_state};
use crate::engine::keyed;
use crate::support::*;

/// A record as both sides must hold it: key, value, headers, timestamp.
type Body = (Option<Vec<u8>>, Option<Vec<u8>>, Vec<(String, Vec<u8>)>, Option<i64>);

/// Every committed record of `topic`, per partition in offset order, read to the end of each
/// partition (`read_committed`; nothing writes to it any more).
fn read_all(cluster: Cluster, topic: &str, partitions: i32) -> BTreeMap<i32, Vec<Body>> {
    let c: BaseConsumer = consumer(cluster, &[("enable.partition.eof", "true")]);
    let mut tpl = rdkafka::TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition_offset(topic, p, rdkafka::Offset::Beginning).unwrap();
    }
    c.assign(&tpl).unwrap();
    let mut out: BTreeMap<i32, Vec<Body>> = (0..partitions).map(|p| (p, Vec::new())).collect();
    let mut at_end = std::collections::BTreeSet::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while at_end.len() < partitions as usize {
        assert!(std::time::Instant::now() < deadline, "read {topic} to its end on the {}", cluster.name());
        match c.poll(Duration::from_millis(100)) {
            None => {}
            Some(Err(rdkafka::error::KafkaError::PartitionEOF(p))) => {
                at_end.insert(p);
            }
            Some(Err(e)) => panic!("consume error: {e}"),
            Some(Ok(m)) => {
                use rdkafka::message::Headers;
                let headers = m
                    .headers()
                    .map(|h| h.iter().map(|h| (h.key.to_string(), h.value.unwrap_or_default().to_vec())).collect())
                    .unwrap_or_default();
                at_end.remove(&m.partition());
                out.entry(m.partition()).or_default().push((
                    m.key().map(<[u8]>::to_vec),
                    m.payload().map(<[u8]>::to_vec),
                    headers,
                    m.timestamp().to_millis(),
                ));
            }
        }
    }
    out
}

/// A partition's records as a count and an ordered hash.
fn digest(records: &[Body]) -> (usize, u64) {
    let mut h = std::hash::DefaultHasher::new();
    records.hash(&mut h);
    (records.len(), h.finish())
}

/// Writes small keyed records to every partition of `topic` until `stop` is set; counts them.
fn keep_producing(topic: String, partitions: i32, stop: Arc<AtomicBool>, written: Arc<AtomicU64>) {
    let p = producer(Cluster::Source, &[("enable.idempotence", "true")]);
    let mut i: u64 = 0;
    while !stop.load(Ordering::SeqCst) {
        for _ in 0..10 {
            let (key, value) = (format!("live-k{}", i % 31), format!("live-{i}"));
            let mut r: BaseRecord<'_, String, String> =
                BaseRecord::to(&topic).partition((i % partitions as u64) as i32).key(&key).payload(&value);
            loop {
                match p.send(r) {
                    Ok(()) => break,
                    Err((_, back)) => {
                        std::thread::sleep(Duration::from_millis(5));
                        r = back;
                    }
                }
            }
            i += 1;
        }
        // About 2,000 records a second: always something the mirror has not committed yet.
        std::thread::sleep(Duration::from_millis(5));
    }
    p.flush(Duration::from_secs(60)).expect("flush");
    written.store(i, Ordering::SeqCst);
}

/// The source's end offsets of `topic` (a plain producer: one offset per record).
async fn source_ends(topic: &str, partitions: i32) -> Vec<i64> {
    let req: Vec<_> = (0..partitions).map(|p| (topic.to_string(), p, OffsetSpec::Latest)).collect();
    let mut ends = Cluster::Source.admin().list_offsets(&req, IsolationLevel::ReadCommitted).await.unwrap();
    ends.sort_by_key(|o| o.partition);
    ends.into_iter().map(|o| o.offset).collect()
}

/// POSTs `body` to `path` of the server with the admin token: status and JSON.
async fn post(s: &Serve, path: &str, body: Value) -> (u16, Value) {
    let r = s.http().post(format!("{}{path}", s.url)).bearer_auth(ADMIN).json(&body).send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// PATCHes `body` onto mirror `mirror` with the admin token: status and JSON.
async fn patch(s: &Serve, mirror: &str, body: Value) -> (u16, Value) {
    let url = format!("{}/api/v1/mirrors/{mirror}", s.url);
    let r = s.http().patch(url).bearer_auth(ADMIN).json(&body).send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

async fn get(s: &Serve, path: &str) -> (u16, Value) {
    let r = s.http().get(format!("{}{path}", s.url)).bearer_auth(ADMIN).send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// The runbook: while a producer still writes, a promote times out, lists the partitions behind
/// and stops nothing; once the producer stopped, it stops the topic with the destination equal to
/// the source record for record, and the consumer group resumes there at exactly the next
/// record. Before that, `--validate-only` says what a stop would leave unmirrored per partition,
/// and a paused partition with records the mirror lacks keeps a promote from stopping anything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn promote_stops_only_once_caught_up_and_loses_nothing() {
    let _rig = shared().await;
    let s = Serve::start(false).await;
    const PARTITIONS: i32 = 3;
    let topic = TestTopic::create(Cluster::Source, "promote", PARTITIONS, &[]).await;
    let _copy = DestinationTopics(vec![topic.name.clone()]);
    let t = topic.name.clone();
    let name = t.clone();
    tokio::task::spawn_blocking(move || produce(Cluster::Source, &name, &keyed(300, PARTITIONS, "p"))).await.unwrap();
    // A consumer group of the source has read 60 records of each partition.
    let group = unique("promote-group");
    let (name, g) = (t.clone(), group.clone());
    tokio::task::spawn_blocking(move || {
        let c = consumer(Cluster::Source, &[("group.id", &g)]);
        let mut tpl = rdkafka::TopicPartitionList::new();
        for p in 0..PARTITIONS {
            tpl.add_partition_offset(&name, p, rdkafka::Offset::Offset(60)).unwrap();
        }
        c.commit(&tpl, CommitMode::Sync).unwrap();
    })
    .await
    .unwrap();

    let mirror = unique("m-promote");
    let file = temp_file("promote.toml", &mirror_file(&mirror, "", &[]));
    s.cli(&["mirrors", "create", "-f", file.to_str().unwrap()]).await.ok();
    s.cli(&["topics", "start", "--mirror", &mirror, "--topics", &t, "--wait", "--timeout", "120s"]).await.ok();
    // The group's offsets are translated to the destination: a failover resumes it exactly.
    eventually("the group is ready for a failover", Duration::from_secs(120), || async {
        s.refresh(&mirror).await;
        let (_, h) = get(&s, &format!("/api/v1/mirrors/{mirror}/health")).await;
        let g = h["groups"].as_array()?.iter().find(|x| x["group"] == group.as_str())?.clone();
        (g["failover_readiness"] == "ready").then_some(())
    })
    .await;

    // What a stop would leave unmirrored: a paused topic with 7 records its partition 0 lacks.
    s.cli(&["topics", "pause", "--mirror", &mirror, "--topics", &t, "--wait", "--timeout", "60s"]).await.ok();
    let name = t.clone();
    let extra: Vec<Rec> = keyed(7, 1, "paused");
    tokio::task::spawn_blocking(move || produce(Cluster::Source, &name, &extra)).await.unwrap();
    let v = eventually("the lag of the 7 records is seen", Duration::from_secs(60), || async {
        let out = s
            .cli(&["topics", "stop", "--mirror", &mirror, "--topics", &t, "--validate-only", "--output", "json"])
            .await;
        let v = out.json();
        (v["results"][0]["unmirrored"]["records"] == 7).then_some(v)
    })
    .await;
    assert_eq!(v["validate_only"], true, "{v}");
    let u = &v["results"][0]["unmirrored"];
    let parts = u["partitions"].as_array().unwrap();
    assert_eq!(parts.len(), PARTITIONS as usize, "{v}");
    assert_eq!((parts[0]["partition"].clone(), parts[0]["records"].clone()), (json!(0), json!(7)), "{v}");
    assert_eq!(parts[0]["state"], "PAUSED");
    assert!(parts[0]["seconds"].as_f64().unwrap() >= 0.0, "{v}");
    assert_eq!((parts[1]["records"].clone(), parts[2]["records"].clone()), (json!(0), json!(0)), "{v}");
    assert_eq!(parts[0]["source_last_stable_offset"], 107, "{v}");
    assert_eq!(parts[0]["mirrored_source_offset"], 100, "{v}");
    let out = s.cli(&["topics", "stop", "--mirror", &mirror, "--topics", &t, "--validate-only"]).await;
    assert!(out.ok().stdout.contains("A stop now would leave 7 record(s) unmirrored"), "{out:#?}");
    assert_eq!(
        out.row("TOPIC"),
        ["TOPIC", "PARTITION", "STATE", "UNMIRRORED-RECORDS", "UNMIRRORED-SECONDS"],
        "{out:#?}"
    );
    assert_eq!(out.row(&format!("{t}  0 "))[..4], [t.as_str(), "0", "PAUSED", "7"], "{out:#?}");
    wait_state(&s, &mirror, &t, PARTITIONS as usize, "PAUSED").await;
    // A partition that cannot catch up (paused) keeps a promote from stopping anything.
    let out =
        s.cli(&["topics", "stop", "--mirror", &mirror, "--topics", &t, "--promote", "--promote-timeout", "1s"]).await;
    out.code(1);
    assert!(
        out.stderr.contains(&format!("topic {t}: not-caught-up: not stopped: partition 0 is 7 records behind")),
        "{out:#?}"
    );
    assert!(out.stdout.contains("Not promoted: nothing was stopped"), "{out:#?}");
    assert_eq!(out.row(&format!("{t}  0 ")), [t.as_str(), "0", "PAUSED", "7", "107", "100"], "{out:#?}");
    wait_state(&s, &mirror, &t, PARTITIONS as usize, "PAUSED").await;
    s.cli(&["topics", "resume", "--mirror", &mirror, "--topics", &t, "--wait", "--timeout", "60s"]).await.ok();

    // A producer still writes: the promote waits, times out, lists the partitions behind and
    // stops nothing. The mirror is throttled far below the producer's rate, so it cannot catch
    // up even for a moment (on a loaded machine the producer alone may pause long enough).
    let (status, body) = patch(&s, &mirror, json!({ "replication_throttle_bytes_per_sec": 1024 })).await;
    assert_eq!(status, 200, "{body}");
    let stop = Arc::new(AtomicBool::new(false));
    let written = Arc::new(AtomicU64::new(0));
    let writer = {
        let (name, stop, written) = (t.clone(), Arc::clone(&stop), Arc::clone(&written));
        std::thread::spawn(move || keep_producing(name, PARTITIONS, stop, written))
    };
    eventually("the producer writes", Duration::from_secs(60), || async {
        (source_ends(&t, PARTITIONS).await.iter().sum::<i64>() > 307 + 200).then_some(())
    })
    .await;
    let out = s
        .cli(&[
            "topics",
            "stop",
            "--mirror",
            &mirror,
            "--topics",
            &t,
            "--promote",
            "--promote-timeout",
            "3s",
            "--output",
            "json",
        ])
        .await;
    let refused = out.code(1).json();
    assert_eq!(refused["results"][0]["ok"], false, "{refused}");
    assert_eq!(refused["results"][0]["error"]["type"], "not-caught-up", "{refused}");
    let behind = refused["results"][0]["behind"].as_array().expect("the partitions behind").clone();
    assert!(!behind.is_empty(), "{refused}");
    for b in &behind {
        assert!(b["lag_records"].as_i64().unwrap() > 0, "{refused}");
        assert!(b["source_last_stable_offset"].as_i64().unwrap() > b["mirrored_source_offset"].as_i64().unwrap());
    }
    assert!(out.stderr.contains("not-caught-up"), "{out:#?}");
    let v = s.cli(&["describe", "--mirror", &mirror, "--topic", &t, "--output", "json"]).await.json();
    assert!(v["items"].as_array().unwrap().iter().all(|p| p["state"] == "MIRRORING"), "nothing stopped: {v}");
    let op = refused["operation_id"].as_str().unwrap().to_string();
    let v = s.cli(&["operations", "show", &op, "--output", "json"]).await.json();
    assert_eq!((v["kind"].as_str(), v["outcome"].as_str()), (Some("stop"), Some("failed")), "{v}");

    // The runbook: stop the producers, promote, move them (the throttle lifted again).
    stop.store(true, Ordering::SeqCst);
    tokio::task::spawn_blocking(move || writer.join().unwrap()).await.unwrap();
    assert!(written.load(Ordering::SeqCst) > 0);
    let (status, body) = patch(&s, &mirror, json!({ "replication_throttle_bytes_per_sec": 0 })).await;
    assert_eq!(status, 200, "{body}");
    let out = s.cli(&["topics", "stop", "--mirror", &mirror, "--topics", &t, "--promote"]).await;
    assert!(out.ok().stdout.contains(&format!("Stopped 1 topic(s) in mirror {mirror}: [{t}]")), "{out:#?}");
    assert!(!out.stdout.contains("after the promote's final check"), "nothing arrived after the check: {out:#?}");
    wait_state(&s, &mirror, &t, PARTITIONS as usize, "STOPPED").await;

    // The destination equals the source, record for record.
    let ends = source_ends(&t, PARTITIONS).await;
    let total: i64 = ends.iter().sum();
    assert_eq!(total, 307 + written.load(Ordering::SeqCst) as i64);
    let name = t.clone();
    let (source, destination) = tokio::task::spawn_blocking(move || {
        (read_all(Cluster::Source, &name, PARTITIONS), read_all(Cluster::Destination, &name, PARTITIONS))
    })
    .await
    .unwrap();
    for p in 0..PARTITIONS {
        assert_eq!(source[&p].len() as i64, ends[p as usize], "partition {p} read whole");
        assert_eq!(digest(&destination[&p]), digest(&source[&p]), "partition {p}: same records in the same order");
    }

    // The group resumes on the destination at exactly the next record of each partition.
    for p in 0..PARTITIONS {
        let (name, g) = (t.clone(), group.clone());
        let first = tokio::task::spawn_blocking(move || {
            let c = consumer(Cluster::Destination, &[("group.id", &g), ("auto.offset.reset", "error")]);
            let mut tpl = rdkafka::TopicPartitionList::new();
            tpl.add_partition_offset(&name, p, rdkafka::Offset::Stored).unwrap();
            c.assign(&tpl).unwrap();
            read_n(&c, 1, Duration::from_secs(60)).remove(0)
        })
        .await
        .unwrap();
        let expected = &source[&p][60];
        assert_eq!((&first.key, &first.value), (&expected.0, &expected.1), "partition {p}: the record after 60");
    }

    // Bad input is refused with a clear problem, before anything changes.
    let out = s.cli(&["topics", "stop", "--mirror", &mirror, "--all", "--promote", "--promote-timeout", "11m"]).await;
    assert!(out.code(2).stderr.contains("longer than a promote may wait"), "{out:#?}");
    let base = format!("/api/v1/mirrors/{mirror}");
    for (path, body, says) in [
        ("topics:stop", json!({ "all": true, "topics": [t] }), "without `topics` and `pattern`"),
        ("topics:pause", json!({ "topics": [t], "require_caught_up": true }), "unknown field `require_caught_up`"),
        (
            "topics:stop",
            json!({ "topics": [t], "require_caught_up": true, "timeout_ms": 600_001 }),
            "between 0 and 600000",
        ),
        ("topics:stop", json!({ "topics": [t], "timeout_ms": 5000 }), "only applies with `require_caught_up: true`"),
        ("topics:start", json!({ "all": true }), "unknown field `all`"),
    ] {
        let (status, problem) = post(&s, &format!("{base}/{path}"), body.clone()).await;
        assert_eq!((status, problem["type"].as_str()), (400, Some("invalid-body")), "{body}: {problem}");
        assert!(problem["detail"].as_str().unwrap().contains(says), "{body}: {problem}");
    }

    s.cli(&["mirrors", "delete", &mirror]).await.ok();
    let _ = std::fs::remove_file(file);
}

/// Creates `names` as one-partition topics on `cluster`, 200 per request.
async fn create_topics(cluster: Cluster, names: &[String]) {
    let admin: AdminClient<DefaultClientContext> =
        rdkafka::ClientConfig::new().set("bootstrap.servers", cluster.bootstrap()).create().unwrap();
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(60)));
    for chunk in names.chunks(200) {
        let topics: Vec<NewTopic<'_>> = chunk.iter().map(|n| NewTopic::new(n, 1, TopicReplication::Fixed(1))).collect();
        for r in admin.create_topics(&topics, &opts).await.unwrap() {
            match r {
                Ok(_) | Err((_, rdkafka::types::RDKafkaErrorCode::TopicAlreadyExists)) => {}
                Err((t, e)) => panic!("create {t}: {e}"),
            }
        }
    }
    // Created is not yet listed: the broker's metadata follows the controller a moment later,
    // and a pattern is matched against the listing.
    let want: std::collections::HashSet<String> = names.iter().cloned().collect();
    eventually("the new topics listed", Duration::from_secs(60), || {
        let (admin, want) = (&admin, &want);
        async move {
            let md = admin.inner().fetch_metadata(None, Duration::from_secs(10)).ok()?;
            let listed = md.topics().iter().filter(|t| want.contains(t.name())).count();
            (listed == want.len()).then_some(())
        }
    })
    .await;
}

/// Deletes `names` on both clusters, 200 per request, when the test ends (also when it fails).
struct ManyTopics(Vec<String>);

impl Drop for ManyTopics {
    fn drop(&mut self) {
        let names = std::mem::take(&mut self.0);
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
            rt.block_on(async {
                for cluster in [Cluster::Source, Cluster::Destination] {
                    let admin: AdminClient<DefaultClientContext> =
                        rdkafka::ClientConfig::new().set("bootstrap.servers", cluster.bootstrap()).create().unwrap();
                    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(60)));
                    for chunk in names.chunks(200) {
                        let refs: Vec<&str> = chunk.iter().map(String::as_str).collect();
                        let _ = admin.delete_topics(&refs, &opts).await;
                    }
                }
            })
        })
        .join();
    }
}

/// `--all` stops every topic of a mirror in one call, past the 1,000 a named list may hold:
/// 1,001 one-partition topics, started with a pattern (not capped either). The operation keeps
/// every result and pages them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_stops_more_than_a_thousand_topics_in_one_call() {
    let _rig = shared().await;
    const N: usize = 1_001;
    let prefix = unique("all");
    let names: Vec<String> = (0..N).map(|i| format!("{prefix}-{i:04}")).collect();
    let _cleanup = ManyTopics(names.clone());
    // Empty topics on both sides: the start adopts the empty destination topics (batched here,
    // so the test does not wait for a thousand one-by-one creations).
    create_topics(Cluster::Source, &names).await;
    create_topics(Cluster::Destination, &names).await;
    let s = Serve::start(false).await;
    let mirror = unique("m-all");
    let file = temp_file("all.toml", &mirror_file(&mirror, "", &[]));
    s.cli(&["mirrors", "create", "-f", file.to_str().unwrap()]).await.ok();
    let pattern = format!("{prefix}-.*");
    let out = s.cli(&["topics", "start", "--mirror", &mirror, "--topics", &pattern]).await;
    assert!(out.ok().stdout.contains(&format!("Started {N} topic(s)")), "{}", &out.stdout[..out.stdout.len().min(300)]);
    eventually("every topic MIRRORING", Duration::from_secs(600), || async {
        let (_, m) = get(&s, &format!("/api/v1/mirrors/{mirror}")).await;
        (m["state_counts"]["MIRRORING"] == N).then_some(())
    })
    .await;

    // The named list stays capped; `--all` is not.
    let (status, problem) =
        post(&s, &format!("/api/v1/mirrors/{mirror}/topics:stop"), json!({ "topics": names, "validate_only": true }))
            .await;
    assert_eq!((status, problem["type"].as_str()), (400, Some("too-many-topics")), "{problem}");
    let out = s.cli(&["topics", "stop", "--mirror", &mirror, "--all", "--output", "json"]).await;
    let v = out.ok().json();
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), N);
    assert!(results.iter().all(|r| r["ok"] == true), "{}", &out.stdout[..out.stdout.len().min(500)]);
    eventually("every topic STOPPED", Duration::from_secs(300), || async {
        let (_, m) = get(&s, &format!("/api/v1/mirrors/{mirror}")).await;
        (m["state_counts"]["STOPPED"] == N).then_some(())
    })
    .await;

    // The operation keeps every result and pages them; the client reads every page.
    let op = v["operation_id"].as_str().unwrap();
    let (_, first) = get(&s, &format!("/api/v1/operations/{op}?page_size=1000")).await;
    assert_eq!(first["results"].as_array().unwrap().len(), 1000);
    assert_eq!(first["result_counts"], json!({ "total": N, "ok": N, "failed": 0, "omitted": 0 }));
    assert_eq!(
        (first["progress"]["partitions_total"].clone(), first["progress"]["done"].clone()),
        (json!(N), json!(true))
    );
    let token = first["next_page_token"].as_str().expect("a second page").to_string();
    let (_, second) = get(&s, &format!("/api/v1/operations/{op}?page_size=1000&page_token={token}")).await;
    assert_eq!(second["results"].as_array().unwrap().len(), 1);
    assert!(second.get("next_page_token").is_none(), "{second}");
    let (status, problem) = get(&s, &format!("/api/v1/operations/{op}?page_size=1000&page_token=00")).await;
    assert_eq!((status, problem["type"].as_str()), (400, Some("invalid-page-token")));
    let out = s.cli(&["operations", "show", op, "--output", "json"]).await;
    assert_eq!(out.ok().json()["results"].as_array().unwrap().len(), N);
    let out = s.cli(&["operations", "show", op]).await;
    assert!(out.ok().stdout.contains(&format!("Progress: {N}/{N} partition(s) in STOPPED")), "{}", out.stdout.len());

    s.cli(&["mirrors", "delete", &mirror]).await.ok();
    let _ = std::fs::remove_file(file);
}

/// While a promote waits for a partition that cannot catch up (paused, with records it lacks),
/// the engine serves everything else: stops and pauses of other topics are each answered within
/// a second, the same bound as behind a slow start; then the promote answers `not-caught-up` and
/// nothing of its topic stopped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stops_and_pauses_are_served_while_a_promote_waits() {
    use kmirror::domain::PartitionState;
    use kmirror::engine::{Actor, LifecycleOp, ProblemKind, TopicSelector, Truncation};
    let _rig = shared().await;
    let eng = crate::engine::TestEngine::start().await;
    let mirror = unique("m-promote-wait");
    eng.create_mirror(&mirror).await;
    let mut topics = Vec::new();
    for i in 0..3 {
        topics.push(TestTopic::create(Cluster::Source, &format!("promote-wait-{i}"), 1, &[]).await);
    }
    let names: Vec<String> = topics.iter().map(|t| t.name.clone()).collect();
    let _copies = DestinationTopics(names.clone());
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    eng.op_ok(&mirror, &refs, LifecycleOp::Start { truncation: Truncation::None }).await;
    for t in &refs {
        eng.wait_state(&mirror, t, PartitionState::Mirroring).await;
    }
    eng.op_ok(&mirror, &refs[..1], LifecycleOp::Pause).await;
    eng.wait_state(&mirror, refs[0], PartitionState::Paused).await;
    let name = names[0].clone();
    tokio::task::spawn_blocking(move || produce(Cluster::Source, &name, &keyed(5, 1, "behind"))).await.unwrap();

    let actor = || Actor { identity: "test".into(), address: None };
    let (h, m, behind) = (eng.handle.clone(), mirror.clone(), names[0].clone());
    let began = std::time::Instant::now();
    let promote = tokio::spawn(async move {
        h.promote(&m, TopicSelector::Names(vec![behind]), Duration::from_secs(6), actor()).await
    });
    let call = |topic: String, op: LifecycleOp| {
        let (h, m) = (eng.handle.clone(), mirror.clone());
        async move {
            let t0 = std::time::Instant::now();
            let r = h.lifecycle(&m, TopicSelector::Names(vec![topic.clone()]), op, false, actor()).await;
            let r = r.unwrap_or_else(|e| panic!("{op:?} of {topic}: {e}"));
            assert!(r.results[0].ok, "{op:?} of {topic}: {r:?}");
            t0.elapsed()
        }
    };
    let mut latencies = vec![call(names[1].clone(), LifecycleOp::Pause).await];
    latencies.push(call(names[2].clone(), LifecycleOp::Stop).await);
    while !promote.is_finished() {
        latencies.push(call(names[1].clone(), LifecycleOp::Pause).await);
        latencies.push(call(names[2].clone(), LifecycleOp::Stop).await);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let r = promote.await.expect("no panic").expect("answered");
    assert!(began.elapsed() >= Duration::from_secs(6), "the promote waited its timeout");
    assert_eq!(r.results[0].error.as_ref().map(|p| p.kind), Some(ProblemKind::NotCaughtUp), "{r:?}");
    assert_eq!(r.behind[&names[0]][0].lag_records, Some(5), "{r:?}");
    let slowest = latencies.iter().max().copied().unwrap_or_default();
    assert!(latencies.len() >= 5, "calls made while the promote waited: {latencies:?}");
    assert!(slowest <= Duration::from_secs(1), "a stop or pause waited {slowest:?} behind the promote: {latencies:?}");
    eng.wait_state(&mirror, refs[0], PartitionState::Paused).await;
    eng.wait_state(&mirror, refs[1], PartitionState::Paused).await;
    eng.wait_state(&mirror, refs[2], PartitionState::Stopped).await;
    eng.op_ok(&mirror, &refs, LifecycleOp::Stop).await;
    eng.stop().await;
}
