//! Lag history and the catch-up estimate on the rig, through the real API server (history sampled
//! every 200 ms instead of 10 s: `api::fast_history`): history fills while a mirror runs, a paused
//! mirror says paused, a mirror catching up a backlog gets a finite estimate that shrinks, and one
//! whose partition stopped progressing while the source produces says it is not catching up.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use kmirror::domain::PartitionState;
use serde_json::{Value, json};

use crate::api::{ADMIN, OPERATOR, TestServer, VIEWER, mirror_body, tokens};
use crate::engine::TestEngine;
use crate::support::*;

fn recs(n: usize, partitions: i32, value_len: usize) -> Vec<Rec> {
    (0..n)
        .map(|i| Rec {
            partition: (i % partitions as usize) as i32,
            key: Some(format!("k{i}").into_bytes()),
            value: Some(vec![b'x'; value_len]),
            headers: vec![],
            timestamp: None,
        })
        .collect()
}

/// Set on drop (also when the test fails), so a producer loop never outlives its test.
#[derive(Default)]
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

async fn history(srv: &TestServer, path: &str) -> Value {
    srv.get(path, Some(VIEWER)).await.ok(200).clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_fills_while_a_mirror_runs_and_a_paused_one_says_paused() {
    let _rig = shared().await;
    let t = TestTopic::create(Cluster::Source, "hist-fill", 2, &[]).await;
    let name = t.name.clone();
    tokio::task::spawn_blocking(move || produce(Cluster::Source, &name, &recs(200, 2, 100))).await.unwrap();
    let eng = TestEngine::start().await;
    let srv = TestServer::start(eng.handle.clone(), tokens()).await;
    let mirror = unique("hist-fill");
    let mp = format!("/api/v1/mirrors/{mirror}");
    srv.post("/api/v1/mirrors", ADMIN, mirror_body(&mirror)).await.ok(201);
    srv.post(&format!("{mp}/topics:start"), OPERATOR, json!({"topics": [t.name]})).await.ok(200);
    eng.wait_caught_up(&mirror, &t.name, 2).await;

    // Keep producing a little so the rates have something to show.
    let name = t.name.clone();
    let stop = StopOnDrop::default();
    let stop2 = stop.0.clone();
    let producer = tokio::task::spawn_blocking(move || {
        while !stop2.load(Ordering::Relaxed) {
            produce(Cluster::Source, &name, &recs(20, 2, 100));
            std::thread::sleep(Duration::from_millis(100));
        }
    });

    // The mirror's and the topic's history fill: several samples, known rates, records mirrored.
    let hp = format!("{mp}/history?window=1m");
    let tp = format!("{mp}/topics/{}/history?window=1m", t.name);
    let h = eventually("mirror history with mirrored records/s", Duration::from_secs(60), || async {
        let h = history(&srv, &hp).await;
        let samples = h["samples"].as_array()?;
        let moving = |field: &str| samples.iter().any(|s| s[field].as_f64().is_some_and(|r| r > 0.0));
        (samples.len() >= 5 && moving("mirrored_records_per_sec") && moving("source_records_per_sec")).then_some(h)
    })
    .await;
    assert_eq!(
        (h["mirror"].as_str(), h["window"].as_str(), h["window_seconds"].as_u64()),
        (Some(&*mirror), Some("1m"), Some(60))
    );
    assert_eq!(h["resolution_seconds"].as_f64(), Some(0.2));
    assert_eq!(h["tracked"], true);
    assert!(h["history_since"].as_str().is_some_and(|s| s.ends_with('Z')), "{h}");
    assert!(h["notes"].as_array().is_some_and(|n| n.iter().any(|x| x.as_str().unwrap_or("").contains("bytes"))));
    let samples = h["samples"].as_array().unwrap();
    let ats: Vec<&str> = samples.iter().map(|s| s["at"].as_str().unwrap()).collect();
    assert!(ats.windows(2).all(|w| w[0] < w[1]), "oldest first, strictly newer: {ats:?}");
    for s in samples {
        assert!(
            s["lag_records"].as_i64().is_some_and(|l| l >= 0) && s["lag_seconds"].as_f64().is_some_and(|l| l >= 0.0)
        );
    }
    let th = eventually("topic history", Duration::from_secs(30), || async {
        let h = history(&srv, &tp).await;
        (h["samples"].as_array()?.len() >= 3).then_some(h)
    })
    .await;
    assert_eq!(
        (th["topic"].as_str(), th["window"].as_str(), th["tracked"].as_bool()),
        (Some(&*t.name), Some("1m"), Some(true))
    );
    // The default window is an hour; the test history's fine samples reach back 72 s
    // (360 x 200 ms), so an hour comes in minutes.
    let hour = history(&srv, &format!("{mp}/topics/{}/history", t.name)).await;
    assert_eq!((hour["window"].as_str(), hour["resolution_seconds"].as_f64()), (Some("1h"), Some(60.0)));
    assert!(["caught_up", "eta", "falling_behind", "unknown"].contains(&th["eta"]["status"].as_str().unwrap()), "{th}");
    // 24 h: minutes (the minute in progress at least).
    let day = history(&srv, &format!("{mp}/history?window=24h")).await;
    assert_eq!(day["resolution_seconds"].as_f64(), Some(60.0));
    assert!(!day["samples"].as_array().unwrap().is_empty());

    // Problems like the other endpoints.
    for bad in ["2d", "0m", "25h", "abc", "1"] {
        srv.get(&format!("{mp}/history?window={bad}"), Some(VIEWER)).await.problem(400, "invalid-query");
    }
    srv.get(&format!("{mp}/history?since=1h"), Some(VIEWER)).await.problem(400, "invalid-query");
    srv.get("/api/v1/mirrors/no-such-mirror/history", Some(VIEWER)).await.problem(404, "mirror-not-found");
    srv.get(&format!("{mp}/topics/no-such-topic/history"), Some(VIEWER)).await.problem(404, "topic-not-in-mirror");
    srv.get("/api/v1/mirrors/a%20b/history", Some(VIEWER)).await.problem(400, "invalid-name");
    srv.get(&hp, None).await.problem(401, "unauthorized");

    // Paused: the estimate says so, for the topic and the mirror.
    srv.post(&format!("{mp}/topics:pause"), OPERATOR, json!({"topics": [t.name]})).await.ok(200);
    for path in [&tp, &hp] {
        eventually("the estimate says paused", Duration::from_secs(60), || async {
            let h = history(&srv, path).await;
            (h["eta"]["status"] == "paused" && h["eta"]["text"] == "paused").then_some(())
        })
        .await;
    }
    stop.0.store(true, Ordering::Relaxed);
    producer.await.unwrap();
    drop(srv);
    eng.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_estimate_of_a_mirror_catching_up_is_finite_and_shrinks() {
    let _rig = shared().await;
    let t = TestTopic::create(Cluster::Source, "hist-eta", 1, &[]).await;
    // A backlog of about 4 MB, mirrored under a throttle of 256 KiB/s: about 16 s to catch up
    // however fast the machine is (without the throttle a fast machine copies it before the
    // estimate has its first samples).
    let name = t.name.clone();
    tokio::task::spawn_blocking(move || produce(Cluster::Source, &name, &recs(20_000, 1, 200))).await.unwrap();

    let eng = TestEngine::start().await;
    let srv = TestServer::start(eng.handle.clone(), tokens()).await;
    let mirror = unique("hist-eta");
    let mp = format!("/api/v1/mirrors/{mirror}");
    let mut body = mirror_body(&mirror);
    body["replication_throttle_bytes_per_sec"] = json!(256 * 1024);
    srv.post("/api/v1/mirrors", ADMIN, body).await.ok(201);
    srv.post(&format!("{mp}/topics:start"), OPERATOR, json!({"topics": [t.name]})).await.ok(200);
    let tp = format!("{mp}/topics/{}/history?window=1m", t.name);

    // The last answer seen goes into the failure message: what the estimate said instead.
    let last = std::sync::Mutex::new(Value::Null);
    let first = eventually_or(
        "a finite estimate",
        Duration::from_secs(90),
        || async {
            let h = history(&srv, &tp).await;
            let partitions = eng
                .handle
                .snapshot()
                .mirror(&mirror)
                .and_then(|m| m.topic(&t.name))
                .map(|t| format!("{:?}", t.partitions));
            *last.lock().unwrap() = json!({"eta": h["eta"], "snapshot": partitions});
            h["eta"]["seconds"].as_u64().filter(|_| h["eta"]["status"] == "eta").map(|s| (s, h))
        },
        || last.lock().unwrap().to_string(),
    )
    .await;
    let (first_seconds, h) = first;
    assert!(h["eta"]["text"].as_str().is_some_and(|t| t.starts_with("about ")), "{h}");
    assert!(first_seconds >= 1, "{h}");
    // It shrinks as the backlog drains (or the mirror catches up altogether).
    eventually("a smaller estimate", Duration::from_secs(120), || async {
        let h = history(&srv, &tp).await;
        match h["eta"]["status"].as_str() {
            Some("eta") => h["eta"]["seconds"].as_u64().filter(|s| *s < first_seconds).map(|_| ()),
            Some("caught_up") => Some(()),
            _ => None,
        }
    })
    .await;
    // The mirror's own estimate is finite or caught up too, never negative or infinite.
    let m = history(&srv, &format!("{mp}/history")).await;
    assert!(["eta", "caught_up"].contains(&m["eta"]["status"].as_str().unwrap()), "{m}");
    drop(srv);
    eng.stop().await;
}

/// A mirror that cannot keep up says so: its partition stopped progressing (FAILED: the source
/// deleted the records at its position) while the source keeps producing, so the topic's estimate
/// is "not catching up", with the rate it falls behind by, never a number of minutes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_estimate_of_a_mirror_falling_behind_says_so() {
    let _rig = shared().await;
    let t = TestTopic::create(Cluster::Source, "hist-behind", 1, &[]).await;
    let eng = TestEngine::start().await;
    let srv = TestServer::start(eng.handle.clone(), tokens()).await;
    let mirror = unique("hist-behind");
    let mp = format!("/api/v1/mirrors/{mirror}");
    srv.post("/api/v1/mirrors", ADMIN, mirror_body(&mirror)).await.ok(201);
    srv.post(&format!("{mp}/topics:start"), OPERATOR, json!({"topics": [t.name]})).await.ok(200);
    let name = t.name.clone();
    tokio::task::spawn_blocking(move || produce(Cluster::Source, &name, &recs(20, 1, 100))).await.unwrap();
    eng.wait_caught_up(&mirror, &t.name, 1).await;
    // Paused, 30 more records, then everything deleted on the source: the resumed partition
    // cannot continue (SOURCE_TRUNCATED) and mirrors nothing from now on.
    srv.post(&format!("{mp}/topics:pause"), OPERATOR, json!({"topics": [t.name]})).await.ok(200);
    eng.wait_state(&mirror, &t.name, PartitionState::Paused).await;
    let name = t.name.clone();
    tokio::task::spawn_blocking(move || produce(Cluster::Source, &name, &recs(30, 1, 100))).await.unwrap();
    Cluster::Source.admin().delete_records(&t.name, &[(0, -1)]).await.unwrap();
    srv.post(&format!("{mp}/topics:resume"), OPERATOR, json!({"topics": [t.name]})).await.ok(200);
    eng.wait_state(&mirror, &t.name, PartitionState::Failed).await;

    // The source keeps producing; the mirror copies nothing.
    let name = t.name.clone();
    let stop = StopOnDrop::default();
    let stop2 = stop.0.clone();
    let producer = tokio::task::spawn_blocking(move || {
        while !stop2.load(Ordering::Relaxed) {
            produce(Cluster::Source, &name, &recs(20, 1, 100));
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    let tp = format!("{mp}/topics/{}/history?window=1m", t.name);
    let h = eventually("the estimate says falling behind", Duration::from_secs(90), || async {
        let h = history(&srv, &tp).await;
        (h["eta"]["status"] == "falling_behind").then_some(h)
    })
    .await;
    let text = h["eta"]["text"].as_str().unwrap_or_default();
    assert!(text.starts_with("not catching up"), "{h}");
    assert!(h["eta"].get("seconds").is_none_or(|s| s.is_null()), "no finite estimate: {h}");
    stop.0.store(true, Ordering::Relaxed);
    producer.await.unwrap();
    srv.post(&format!("{mp}/topics:stop"), OPERATOR, json!({"topics": [t.name]})).await.ok(200);
    drop(srv);
    eng.stop().await;
    let _ = Cluster::Destination.admin().delete_topic(&t.name).await;
}
