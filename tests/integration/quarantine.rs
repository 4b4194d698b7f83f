//! Resync with quarantine (issue 18 item 3) on the rig's two clusters: A (the rig's source) was
//! mirrored into B by `m1` and failed over; producers wrote to B, and a few records to A after the
//! last mirrored one. The failback `m2` (B into A, an engine attached to A) refuses with their
//! count; with `resync` + `quarantine` they are first copied to `<topic>.kmirror-diverged` on A
//! with their original coordinates, then A is resynced and equals B. A quarantine topic holding
//! foreign records is refused, and the preview says what the run then does. After a round trip
//! (A -> B, B -> A, strays on B) the quarantine holds the strays and nothing the other side has.

use std::time::Duration;

use kmirror::domain::quarantine::{HEADER_OFFSET, HEADER_PARTITION, HEADER_TOPIC, HEADER_TOPIC_ID, quarantine_topic};
use kmirror::engine::{
    self, Actor, EngineConfig, EngineHandle, LifecycleOp, MirrorSpec, ProblemKind, SourceSpec, TopicSelector,
    Truncation,
};
use kmirror::kafka::quarantine::QuarantineJob;

use crate::engine::{assert_same_content, keyed, produce_aborted, read_all};
use crate::support::*;

const START: LifecycleOp = LifecycleOp::Start { truncation: Truncation::None };
const QUARANTINE: LifecycleOp = LifecycleOp::Start { truncation: Truncation::Resync { quarantine: true } };

fn actor() -> Actor {
    Actor { identity: "test".into(), address: None }
}

async fn call(h: &EngineHandle, mirror: &str, topic: &str, op: LifecycleOp, validate_only: bool) -> engine::OpResult {
    h.lifecycle(mirror, TopicSelector::Names(vec![topic.to_string()]), op, validate_only, actor()).await.expect("call")
}

fn header<'a>(r: &'a crate::support::Consumed, name: &str) -> Option<&'a str> {
    r.headers.iter().rev().find(|(k, _)| k == name).and_then(|(_, v)| std::str::from_utf8(v).ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failback_with_quarantine_keeps_the_divergent_records_then_resyncs() {
    let _rig = shared().await;
    // m1: A -> B, then failover.
    let (topic, b, _m1) = crate::failback::failed_over_from_a("quar", 2, 100, "a-before").await;
    let state_topic = b.config.state_topic.clone();
    b.stop().await;

    // Producers move to B; on A, 3 records land in partition 0 after the failover, and an
    // aborted transaction (not records: never quarantined).
    let t = topic.name.clone();
    tokio::task::spawn_blocking(move || {
        produce(Cluster::Destination, &t, &keyed(20, 2, "b-new"));
        produce(Cluster::Source, &t, &keyed(3, 1, "a-late"));
        produce_aborted(&t, 2, 4);
    })
    .await
    .unwrap();
    let t = topic.name.clone();
    let late: Vec<_> = tokio::task::spawn_blocking(move || read_all(Cluster::Source, &t, 2))
        .await
        .unwrap()
        .remove(&0)
        .unwrap()
        .into_iter()
        .filter(|r| r.headers.iter().any(|(k, v)| k == "tag" && v == b"a-late"))
        .collect();
    assert_eq!(late.len(), 3);

    // m2: B -> A, from an engine attached to A.
    let mut config = EngineConfig::new(Cluster::Source.bootstrap());
    let id = unique("eng-a");
    config.state_topic = state_topic;
    config.state_partitions = 4;
    config.instance_id = format!("kmirror-{id}");
    config.cluster_name = format!("kmirror-{id}");
    config.metadata_refresh_interval = Duration::from_secs(3600);
    let (a, a_join) = engine::start(config.clone()).await.expect("engine on A starts");
    let m2 = unique("m2");
    let source = SourceSpec { bootstrap_servers: Cluster::Destination.bootstrap(), properties: Default::default() };
    let spec = MirrorSpec {
        topic_include: Vec::new(),
        topic_exclude: kmirror::domain::topic_policy::default_exclude(),
        name: m2.clone(),
        source,
        expected_source_cluster_id: None,
        sync: Default::default(),
        replication_throttle_bytes_per_sec: None,
        approval: Default::default(),
    };
    a.create_mirror(spec, actor()).await.expect("create m2");

    // Refused with the exact count and range.
    let r = call(&a, &m2, &topic.name, START, false).await;
    let refusal = r.results[0].error.as_ref().expect("refused");
    assert_eq!(refusal.kind, ProblemKind::DestinationDiverged, "{refusal:?}");
    let range = format!("partition 0: 3 local records at offsets {}", late[0].offset);
    assert!(refusal.detail.contains(&range), "{range:?} in {}", refusal.detail);

    // An interrupted earlier attempt copied the first two (one committed chunk): the quarantine
    // topic exists with kmirror's copies in it.
    let q = quarantine_topic(&topic.name);
    Cluster::Source.admin().create_topic(&q, 2, 1, &[]).await.expect("create quarantine topic");
    let topic_id = Cluster::Source.admin().describe_topic(&topic.name).await.unwrap().topic_id.to_string();
    let job = QuarantineJob {
        topic: topic.name.clone(),
        topic_id: topic_id.clone(),
        ranges: vec![(0, late[0].offset, late[1].offset + 1)],
        target: q.clone(),
        target_partitions: 2,
        target_ends: vec![(0, 0), (1, 0)],
    };
    let partial = tokio::task::spawn_blocking(move || {
        kmirror::kafka::quarantine::copy(
            &Cluster::Source.bootstrap(),
            &Default::default(),
            &job,
            false,
            Duration::from_secs(60),
        )
    })
    .await
    .unwrap()
    .expect("partial copy");
    assert_eq!(partial[&0].records, 2);

    // The preview says what the run does: one record to copy, two already there.
    let p = call(&a, &m2, &topic.name, QUARANTINE, true).await;
    assert!(p.results[0].ok, "{p:?}");
    let preview = p.quarantined[&topic.name].clone();
    assert_eq!(preview.len(), 1, "{preview:?}");
    assert_eq!((preview[0].partition, preview[0].records, preview[0].already_quarantined), (0, 1, 2));
    assert_eq!(preview[0].offsets, Some((late[0].offset, late[2].offset)));
    let r = call(&a, &m2, &topic.name, QUARANTINE, false).await;
    assert!(r.results[0].ok, "{r:?}");
    assert_eq!(r.quarantined[&topic.name], preview, "the run did what the preview said");

    // The divergent records are in the quarantine topic once each, same partition, with their
    // key, value, headers and timestamp, and where they came from.
    let qn = q.clone();
    let kept = tokio::task::spawn_blocking(move || read_all(Cluster::Source, &qn, 2)).await.unwrap();
    assert!(kept[&1].is_empty(), "{:?}", kept[&1]);
    assert_eq!(kept[&0].len(), 3, "no duplicates: {:?}", kept[&0]);
    for (copy, orig) in kept[&0].iter().zip(&late) {
        assert_eq!((&copy.key, &copy.value, copy.timestamp), (&orig.key, &orig.value, orig.timestamp));
        assert_eq!(&copy.headers[..orig.headers.len()], &orig.headers[..], "original headers first");
        assert_eq!(header(copy, HEADER_TOPIC), Some(topic.name.as_str()));
        assert_eq!(header(copy, HEADER_TOPIC_ID), Some(topic_id.as_str()));
        assert_eq!(header(copy, HEADER_PARTITION), Some("0"));
        assert_eq!(header(copy, HEADER_OFFSET), Some(orig.offset.to_string().as_str()));
    }

    // Then the resync ran: A equals B.
    let lso_b = |t: String| async move {
        let q: Vec<_> = (0..2).map(|p| (t.clone(), p, kmirror::kafka::OffsetSpec::Latest)).collect();
        Cluster::Destination.admin().list_offsets(&q, kmirror::kafka::IsolationLevel::ReadCommitted).await.ok()
    };
    eventually("m2 caught up with B", Duration::from_secs(90), || async {
        let ends = lso_b(topic.name.clone()).await?;
        let snap = a.snapshot();
        let t = snap.mirror(&m2)?.topic(&topic.name)?;
        ends.iter()
            .all(|o| {
                t.partitions.iter().any(|p| {
                    p.partition == o.partition
                        && p.state == kmirror::domain::PartitionState::Mirroring
                        && p.mirrored_source_offset.is_some_and(|m| m >= o.offset)
                })
            })
            .then_some(())
    })
    .await;
    assert_eq!(assert_same_content(&topic.name, 2).await, 120);

    // A quarantine topic holding foreign records is refused; nothing is copied or deleted.
    let other = TestTopic::create(Cluster::Destination, "quar-other", 1, &[]).await;
    Cluster::Source.admin().create_topic(&other.name, 1, 1, &[]).await.expect("create on A");
    let other_q = quarantine_topic(&other.name);
    Cluster::Source.admin().create_topic(&other_q, 1, 1, &[]).await.expect("create foreign quarantine topic");
    let (o, oq) = (other.name.clone(), other_q.clone());
    tokio::task::spawn_blocking(move || {
        produce(Cluster::Destination, &o, &keyed(2, 1, "b"));
        produce(Cluster::Source, &o, &keyed(2, 1, "a-local"));
        produce(Cluster::Source, &oq, &keyed(1, 1, "someone-else"));
    })
    .await
    .unwrap();
    for validate_only in [true, false] {
        let r = call(&a, &m2, &other.name, QUARANTINE, validate_only).await;
        let e = r.results[0].error.as_ref().expect("refused");
        assert_eq!(e.kind, ProblemKind::QuarantineConflict, "{e:?}");
        assert!(e.detail.contains("nothing was copied or deleted"), "{}", e.detail);
    }
    let o = other.name.clone();
    let on_a = tokio::task::spawn_blocking(move || read_all(Cluster::Source, &o, 1)).await.unwrap();
    assert_eq!(on_a[&0].len(), 2, "A's records are untouched");

    let _ = call(&a, &m2, &topic.name, LifecycleOp::Stop, false).await;
    a.shutdown().await;
    let _ = a_join.await;
    for t in [&q, &other_q, &other.name] {
        let _ = Cluster::Source.admin().delete_topic(t).await;
    }
    let _ = Cluster::Destination.admin().delete_topic(&topic.name).await;
}

/// The round trip: m1 A -> B failed over, B the primary for 2,000 records, failed back by m2
/// B -> A (incremental) and failed over again, A the primary for 800 more; then 3 stray records
/// land directly on B. A restart of m1 with quarantine keeps exactly those 3: B's 2,000 records
/// as the primary are on A already (m2 copied them), and replaying the quarantine into A creates
/// no duplicate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_round_trip_the_quarantine_holds_only_what_never_crossed() {
    use crate::failback::{caught_up_from_b, create_failback_mirror, engine_on_a, preview, produce_txn};
    const P: i32 = 4;
    let _rig = shared().await;
    let topic = TestTopic::create(Cluster::Source, "quar-rt", P, &[]).await;
    let t = topic.name.clone();
    tokio::task::spawn_blocking(move || {
        produce_txn(Cluster::Source, &t, &keyed(400, P, "a-first"), true);
        produce_aborted(&t, P, 20);
    })
    .await
    .unwrap();

    // m1: A -> B, caught up, failed over; B takes 2,000 transactional records as the primary.
    let b = crate::engine::TestEngine::start().await;
    let m1 = unique("m1");
    b.create_mirror(&m1).await;
    b.op_ok(&m1, &[&topic.name], START).await;
    b.wait_caught_up(&m1, &topic.name, P).await;
    b.op_ok(&m1, &[&topic.name], LifecycleOp::Stop).await;
    let b_config = b.config.clone();
    b.stop().await;
    let t = topic.name.clone();
    tokio::task::spawn_blocking(move || produce_txn(Cluster::Destination, &t, &keyed(2_000, P, "b-primary"), true))
        .await
        .unwrap();

    // m2: B -> A, incremental (the preview says 2,000 to copy), caught up, failed over.
    let (a, a_join) = engine_on_a(&b_config.state_topic).await;
    let m2 = create_failback_mirror(&a).await;
    let p = preview(&a, &m2, &topic.name, START).await;
    assert_eq!(p.failback.get(&topic.name).map(|f| f.records()), Some(2_000), "{p:?}");
    let r = call(&a, &m2, &topic.name, START, false).await;
    assert!(r.results[0].ok, "{r:?}");
    caught_up_from_b(&a, &m2, &topic.name, P).await;
    assert_eq!(assert_same_content(&topic.name, P).await, 2_400);
    let r = call(&a, &m2, &topic.name, LifecycleOp::Stop, false).await;
    assert!(r.results[0].ok, "{r:?}");

    // A is the primary again (800 records); 3 strays are written directly to B's copy, one in
    // each of partitions 0, 1 and 2.
    let t = topic.name.clone();
    tokio::task::spawn_blocking(move || {
        produce_txn(Cluster::Source, &t, &keyed(800, P, "a-again"), true);
        produce(Cluster::Destination, &t, &keyed(3, P, "stray"));
    })
    .await
    .unwrap();
    let t = topic.name.clone();
    let strays: Vec<_> = tokio::task::spawn_blocking(move || read_all(Cluster::Destination, &t, P))
        .await
        .unwrap()
        .into_values()
        .flatten()
        .filter(|r| header(r, "tag") == Some("stray"))
        .collect();
    assert_eq!(strays.len(), 3);

    // m1's restart is refused naming exactly the strays, and its preview says the same.
    let b = crate::engine::TestEngine::with_config(b_config).await;
    let p = call(&b.handle, &m1, &topic.name, START, true).await;
    let r = call(&b.handle, &m1, &topic.name, START, false).await;
    assert_eq!(p.results[0].error, r.results[0].error, "the preview is the start's answer");
    let refusal = r.results[0].error.as_ref().expect("refused");
    assert_eq!(refusal.kind, ProblemKind::DestinationDiverged, "{refusal:?}");
    for s in &strays {
        let named = format!("partition {}: 1 local record at offsets {}..{}", s.partition, s.offset, s.offset + 1);
        assert!(refusal.detail.contains(&named), "{named:?} in {}", refusal.detail);
    }
    assert!(!refusal.detail.contains("partition 3:"), "{}", refusal.detail);
    assert!(refusal.detail.contains(&format!("the mirror {m2:?} copied up to offset")), "{}", refusal.detail);

    // With quarantine: the preview counts the 3, the run copies the 3, then the resync converges.
    let p = call(&b.handle, &m1, &topic.name, QUARANTINE, true).await;
    assert!(p.results[0].ok, "{p:?}");
    let previewed = p.quarantined[&topic.name].clone();
    assert_eq!(previewed.iter().map(|q| q.records).sum::<i64>(), 3, "{previewed:?}");
    let r = call(&b.handle, &m1, &topic.name, QUARANTINE, false).await;
    assert!(r.results[0].ok, "{r:?}");
    assert_eq!(r.quarantined[&topic.name], previewed, "the run did what the preview said");
    let q = quarantine_topic(&topic.name);
    let qn = q.clone();
    let kept: Vec<_> = tokio::task::spawn_blocking(move || read_all(Cluster::Destination, &qn, P))
        .await
        .unwrap()
        .into_values()
        .flatten()
        .collect();
    assert_eq!(kept.len(), 3, "only the strays: {kept:?}");
    for s in &strays {
        let copy = kept.iter().find(|k| k.value == s.value).unwrap_or_else(|| panic!("{s:?} kept"));
        assert_eq!((copy.partition, &copy.key, copy.timestamp), (s.partition, &s.key, s.timestamp));
        assert_eq!(header(copy, HEADER_TOPIC), Some(topic.name.as_str()));
        assert_eq!(header(copy, HEADER_PARTITION), Some(s.partition.to_string().as_str()));
        assert_eq!(header(copy, HEADER_OFFSET), Some(s.offset.to_string().as_str()));
        assert!(header(copy, HEADER_TOPIC_ID).is_some());
    }
    b.wait_caught_up(&m1, &topic.name, P).await;
    assert_eq!(assert_same_content(&topic.name, P).await, 3_200, "B equals A record for record");

    // Replaying the quarantine into A (its purpose) adds exactly the strays: none was there.
    let t = topic.name.clone();
    let replayed = tokio::task::spawn_blocking(move || {
        let on_a: std::collections::BTreeSet<Vec<u8>> =
            read_all(Cluster::Source, &t, P).into_values().flatten().filter_map(|r| r.value).collect();
        let replay: Vec<crate::support::Rec> = kept
            .iter()
            .map(|k| crate::support::Rec {
                partition: k.partition,
                key: k.key.clone(),
                value: k.value.clone(),
                headers: k.headers.clone(),
                timestamp: k.timestamp,
            })
            .collect();
        assert!(replay.iter().all(|r| !on_a.contains(r.value.as_ref().unwrap())), "a quarantined record is on A");
        produce(Cluster::Source, &t, &replay);
        read_all(Cluster::Source, &t, P).into_values().flatten().filter_map(|r| r.value).collect::<Vec<_>>()
    })
    .await
    .unwrap();
    let distinct: std::collections::BTreeSet<_> = replayed.iter().collect();
    assert_eq!((replayed.len(), distinct.len()), (3_203, 3_203), "no duplicate on A after the replay");

    b.op_ok(&m1, &[&topic.name], LifecycleOp::Stop).await;
    b.stop().await;
    a.shutdown().await;
    let _ = a_join.await;
    for t in [&topic.name, &q] {
        let _ = Cluster::Destination.admin().delete_topic(t).await;
    }
}
