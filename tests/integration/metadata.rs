//! The MirrorMetadataManager against the rig: topic configs, partition increases, consumer-group
//! offsets (exact, across aborted transactions) and ACLs.

use std::collections::BTreeMap;
use std::time::Duration;

use rdkafka::consumer::{CommitMode, Consumer};
use rdkafka::producer::Producer;

use kmirror::domain::PartitionState;
use kmirror::engine::{ClusterIdStatus, GroupReadiness, LifecycleOp, SyncKind, Truncation};
use kmirror::kafka::*;

use crate::engine::TestEngine;
use crate::support::*;

/// Triggers a metadata refresh and waits until every sync kind reports an attempt after it. A
/// refresh that could not reach the source (a transient timeout on a loaded 2-core machine) is
/// retried until the deadline, and the last reason is in the panic message.
async fn refresh(eng: &TestEngine, mirror: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    loop {
        let before = eng.handle.snapshot().taken_at;
        eng.handle.refresh_now(mirror).await.expect("refresh");
        eventually("metadata refresh done", Duration::from_secs(90), || async {
            let snap = eng.handle.snapshot();
            let m = snap.mirror(mirror)?;
            m.sync.iter().all(|s| s.last_attempt_at.is_some_and(|t| t > before)).then_some(())
        })
        .await;
        let snap = eng.handle.snapshot();
        let m = snap.mirror(mirror).expect("mirror");
        if m.cluster_id_status == ClusterIdStatus::Ok {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the source never answered a refresh: {:?} {:?}",
            m.cluster_id_status,
            m.cluster_id_error
        );
    }
}

async fn dest_configs(topic: &str) -> BTreeMap<String, (Option<String>, ConfigSource)> {
    Cluster::Destination
        .admin()
        .describe_topic_configs(topic)
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.name, (e.value, e.source)))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topic_configs_follow_the_source_and_denied_ones_do_not() {
    let _rig = shared().await;
    let topic = TestTopic::create(
        Cluster::Source,
        "cfg",
        2,
        &[("retention.ms", "7200000"), ("min.insync.replicas", "1"), ("segment.bytes", "10485760")],
    )
    .await;
    let eng = TestEngine::start().await;
    let mirror = unique("m-cfg");
    eng.create_mirror(&mirror).await;
    eng.op_ok(&mirror, &[&topic.name], LifecycleOp::Start { truncation: Truncation::None }).await;
    eng.wait_state(&mirror, &topic.name, PartitionState::Mirroring).await;
    let c = dest_configs(&topic.name).await;
    assert_eq!(c["retention.ms"], (Some("7200000".into()), ConfigSource::DynamicTopic), "copied at creation");
    assert_eq!(c["compression.type"].0.as_deref(), Some("producer"));
    assert_ne!(c["min.insync.replicas"].1, ConfigSource::DynamicTopic, "placement configs are never copied");
    // The comparison a topic page shows, read from both clusters.
    let compared = || async {
        let rows = eng.handle.topic_configs(&mirror, &topic.name).await.expect("configs read");
        rows.into_iter()
            .map(|r| (r.name, (r.source, r.destination, r.wanted, r.status.slug())))
            .collect::<BTreeMap<_, _>>()
    };
    let s = |v: &str| Some(v.to_string());
    let rows = compared().await;
    assert_eq!(rows["retention.ms"], (s("7200000"), s("7200000"), s("7200000"), "in_sync"), "{rows:?}");
    assert_eq!(rows["min.insync.replicas"], (s("1"), None, None, "not_copied"), "{rows:?}");
    assert_eq!(rows["compression.type"], (None, s("producer"), s("producer"), "in_sync"), "{rows:?}");
    assert_eq!(rows["segment.bytes"].3, "in_sync");

    // A change at the source reaches the destination at a following refresh (the source broker
    // may answer with the old value for a moment after the change: refreshes until it shows).
    Cluster::Source
        .admin()
        .alter_topic_configs(&topic.name, &[("retention.ms".into(), ConfigOp::Set("3600000".into()))])
        .await
        .unwrap();
    eventually("the source's change on the destination", Duration::from_secs(90), || async {
        refresh(&eng, &mirror).await;
        (dest_configs(&topic.name).await["retention.ms"].0.as_deref() == Some("3600000")).then_some(())
    })
    .await;

    // A value changed directly on the destination is drift: reported, then reset to the source's.
    Cluster::Destination
        .admin()
        .alter_topic_configs(&topic.name, &[("retention.ms".into(), ConfigOp::Set("1000".into()))])
        .await
        .unwrap();
    // Shown before the sync runs: the destination's value and what the sync will set (once the
    // destination broker answers with its new value, a moment after the change).
    let want = (s("3600000"), s("1000"), s("3600000"), "differs");
    eventually("the drift shown", Duration::from_secs(30), || async {
        (compared().await["retention.ms"] == want).then_some(())
    })
    .await;
    refresh(&eng, &mirror).await;
    let snap = eng.handle.snapshot();
    let status = snap.mirror(&mirror).unwrap().sync.iter().find(|s| s.kind == SyncKind::TopicConfigs).unwrap().clone();
    assert!(status.last_error.is_none(), "{status:?}");
    assert!(status.warnings.iter().any(|w| w.contains("retention.ms")), "drift reported: {status:?}");
    assert_eq!(dest_configs(&topic.name).await["retention.ms"].0.as_deref(), Some("3600000"));
    assert_eq!(compared().await["retention.ms"].3, "in_sync", "and in sync again");
    let e = eng.handle.topic_configs(&mirror, "not-mirrored").await.unwrap_err();
    assert_eq!(e.kind(), kmirror::engine::ProblemKind::TopicNotInMirror, "{e}");
    let e = eng.handle.topic_configs("no-such-mirror", &topic.name).await.unwrap_err();
    assert_eq!(e.kind(), kmirror::engine::ProblemKind::MirrorNotFound, "{e}");
    eng.op_ok(&mirror, &[&topic.name], LifecycleOp::Stop).await;
    eng.stop().await;
    let _ = Cluster::Destination.admin().delete_topic(&topic.name).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_source_partitions_are_created_and_mirrored() {
    let _rig = shared().await;
    let topic = TestTopic::create(Cluster::Source, "grow", 4, &[]).await;
    let eng = TestEngine::start().await;
    let mirror = unique("m-grow");
    eng.create_mirror(&mirror).await;
    eng.op_ok(&mirror, &[&topic.name], LifecycleOp::Start { truncation: Truncation::None }).await;
    eng.wait_state(&mirror, &topic.name, PartitionState::Mirroring).await;
    Cluster::Source.admin().create_partitions(&topic.name, 6).await.unwrap();
    let name = topic.name.clone();
    eventually("source has 6 partitions", Duration::from_secs(30), || async {
        (Cluster::Source.admin().describe_topic(&name).await.ok()?.partitions.len() == 6).then_some(())
    })
    .await;
    let name = topic.name.clone();
    tokio::task::spawn_blocking(move || {
        let recs: Vec<Rec> = (0..60)
            .map(|i| Rec {
                partition: i % 6,
                key: Some(vec![i as u8]),
                value: Some(vec![i as u8; 10]),
                headers: vec![],
                timestamp: None,
            })
            .collect();
        produce(Cluster::Source, &name, &recs)
    })
    .await
    .unwrap();
    refresh(&eng, &mirror).await;
    eventually("6 partitions mirroring", Duration::from_secs(60), || async {
        let s = eng.states(&mirror, &topic.name);
        (s.len() == 6 && s.iter().all(|x| *x == PartitionState::Mirroring)).then_some(())
    })
    .await;
    assert_eq!(Cluster::Destination.admin().describe_topic(&topic.name).await.unwrap().partitions.len(), 6);
    eng.wait_caught_up(&mirror, &topic.name, 6).await;
    let name = topic.name.clone();
    let got = tokio::task::spawn_blocking(move || read_topic(Cluster::Destination, &name, 6, 60)).await.unwrap();
    assert_eq!(got.iter().filter(|c| c.partition >= 4).count(), 20, "records of the new partitions mirrored");
    eng.op_ok(&mirror, &[&topic.name], LifecycleOp::Stop).await;
    eng.stop().await;
    let _ = Cluster::Destination.admin().delete_topic(&topic.name).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_offsets_translate_exactly_across_aborted_transactions() {
    let _rig = shared().await;
    let topic = TestTopic::create(Cluster::Source, "groups", 1, &[]).await;
    // Committed records interleaved with aborted transactions: source offsets have gaps, so
    // source and destination offsets differ and only an exact map gets the group right.
    let name = topic.name.clone();
    tokio::task::spawn_blocking(move || {
        let p = producer(Cluster::Source, &[("transactional.id", &unique("grp-tx"))]);
        p.init_transactions(Duration::from_secs(30)).unwrap();
        for round in 0..10 {
            for commit in [false, true] {
                p.begin_transaction().unwrap();
                for i in 0..5 {
                    let v = format!("r{round}-{}-{i}", if commit { "ok" } else { "aborted" });
                    p.send(rdkafka::producer::BaseRecord::<str, str>::to(&name).partition(0).key(&v).payload(&v))
                        .map_err(|(e, _)| e)
                        .unwrap();
                }
                p.flush(Duration::from_secs(30)).unwrap();
                if commit {
                    p.commit_transaction(Duration::from_secs(30)).unwrap();
                } else {
                    p.abort_transaction(Duration::from_secs(30)).unwrap();
                }
            }
        }
    })
    .await
    .unwrap();
    let group = unique("billing");
    // A source consumer in the group reads 17 of the 50 committed records and commits.
    let (name, g) = (topic.name.clone(), group.clone());
    let next_expected = tokio::task::spawn_blocking(move || {
        let c = consumer(Cluster::Source, &[("group.id", &g)]);
        let mut tpl = rdkafka::TopicPartitionList::new();
        tpl.add_partition_offset(&name, 0, rdkafka::Offset::Beginning).unwrap();
        c.assign(&tpl).unwrap();
        let got = read_n(&c, 18, Duration::from_secs(30));
        let mut commit = rdkafka::TopicPartitionList::new();
        commit.add_partition_offset(&name, 0, rdkafka::Offset::Offset(got[16].offset + 1)).unwrap();
        c.commit(&commit, CommitMode::Sync).unwrap();
        got[17].value.clone()
    })
    .await
    .unwrap();

    let eng = TestEngine::start().await;
    let mirror = unique("m-groups");
    eng.create_mirror(&mirror).await;
    eng.op_ok(&mirror, &[&topic.name], LifecycleOp::Start { truncation: Truncation::None }).await;
    eng.wait_caught_up(&mirror, &topic.name, 1).await;
    refresh(&eng, &mirror).await;
    let snap = eng.handle.snapshot();
    let m = snap.mirror(&mirror).unwrap();
    let view = m.groups.iter().find(|v| v.group == group).expect("group synced").clone();
    assert!(view.last_error.is_none() && view.last_success_at.is_some(), "{view:?}");
    // Failover readiness: its one committed partition is translated and in sync.
    assert_eq!(
        (view.topics.clone(), view.partitions_committed, view.partitions_in_sync, view.partitions_not_translated),
        (vec![topic.name.clone()], 1, 1, 0),
        "{view:?}"
    );
    assert_eq!(view.readiness(), GroupReadiness::Ready);

    // A consumer of the group already running on the destination: its offsets are not moved
    // under it, and the group is not ready (a failover would not resume it where the source
    // left it). Once it leaves, the next sync makes the group ready again.
    let (name, g) = (topic.name.clone(), group.clone());
    let member = tokio::task::spawn_blocking(move || {
        let c = consumer(Cluster::Destination, &[("group.id", &g), ("enable.auto.commit", "false")]);
        c.subscribe(&[&name]).unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while c.assignment().map(|a| a.count()).unwrap_or(0) == 0 {
            assert!(std::time::Instant::now() < deadline, "the destination consumer joined its group");
            let _ = c.poll(Duration::from_millis(100));
        }
        c
    })
    .await
    .unwrap();
    refresh(&eng, &mirror).await;
    let view =
        eng.handle.snapshot().mirror(&mirror).unwrap().groups.iter().find(|v| v.group == group).cloned().unwrap();
    match view.readiness() {
        GroupReadiness::NotReady(why) => assert!(why.contains("active member"), "{why}"),
        other => panic!("a group with an active member on the destination is not ready: {other:?}"),
    }
    assert_eq!(view.topics, vec![topic.name.clone()], "still says what it consumes");
    tokio::task::spawn_blocking(move || drop(member)).await.unwrap();
    eventually("the group is ready again", Duration::from_secs(90), || async {
        refresh(&eng, &mirror).await;
        let snap = eng.handle.snapshot();
        let v = snap.mirror(&mirror)?.groups.iter().find(|v| v.group == group)?.clone();
        (v.readiness() == GroupReadiness::Ready).then_some(())
    })
    .await;
    eng.op_ok(&mirror, &[&topic.name], LifecycleOp::Stop).await;

    // After failover, the same group on the destination continues at exactly the next record.
    let (name, g) = (topic.name.clone(), group.clone());
    let first = tokio::task::spawn_blocking(move || {
        let c = consumer(Cluster::Destination, &[("group.id", &g), ("auto.offset.reset", "error")]);
        c.subscribe(&[&name]).unwrap();
        read_n(&c, 1, Duration::from_secs(60)).remove(0)
    })
    .await
    .unwrap();
    assert_eq!(first.value, next_expected, "zero re-delivered, zero skipped");
    eng.stop().await;
    let _ = Cluster::Destination.admin().delete_topic(&topic.name).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_acls_are_copied_write_acls_are_not_and_removals_follow() {
    let _rig = shared().await;
    let topic = TestTopic::create(Cluster::Source, "acls", 1, &[]).await;
    let reader = format!("User:{}", unique("reader"));
    let writer = format!("User:{}", unique("writer"));
    let binding = |principal: &str, op| AclBinding {
        resource_type: ResourceType::Topic,
        name: topic.name.clone(),
        pattern_type: PatternType::Literal,
        principal: principal.to_string(),
        host: "*".into(),
        operation: op,
        permission: AclPermission::Allow,
    };
    let read = binding(&reader, AclOperation::Read);
    let write = binding(&writer, AclOperation::Write);
    Cluster::Source.admin().create_acls(&[read.clone(), write.clone()]).await.unwrap();
    let eng = TestEngine::start().await;
    let mirror = unique("m-acls");
    eng.create_mirror(&mirror).await;
    eng.op_ok(&mirror, &[&topic.name], LifecycleOp::Start { truncation: Truncation::None }).await;
    eng.wait_state(&mirror, &topic.name, PartitionState::Mirroring).await;
    refresh(&eng, &mirror).await;
    let on_dest = |p: String| async move {
        Cluster::Destination
            .admin()
            .describe_acls(&AclFilter { principal: Some(p), ..Default::default() })
            .await
            .unwrap()
    };
    // ACL changes propagate through the destination's metadata log, and a refresh under load may
    // meet a transient error: refresh again until the copy shows, then require a clean status.
    let acl_status = || {
        let snap = eng.handle.snapshot();
        snap.mirror(&mirror).and_then(|m| m.sync.iter().find(|s| s.kind == SyncKind::Acls).cloned())
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    while on_dest(reader.clone()).await != vec![read.clone()] {
        assert!(std::time::Instant::now() < deadline, "READ never copied; ACL sync status: {:?}", acl_status());
        tokio::time::sleep(Duration::from_millis(500)).await;
        refresh(&eng, &mirror).await;
    }
    assert!(acl_status().is_some_and(|s| s.last_error.is_none()), "{:?}", acl_status());
    assert!(on_dest(writer.clone()).await.is_empty(), "ALLOW WRITE is never copied to a mirror topic");

    // An ACL made on the destination by someone else is never touched.
    let local = binding(&format!("User:{}", unique("local")), AclOperation::Describe);
    Cluster::Destination.admin().create_acls(std::slice::from_ref(&local)).await.unwrap();

    Cluster::Source.admin().delete_acls(&[AclFilter::from(&read)]).await.unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    loop {
        refresh(&eng, &mirror).await;
        if on_dest(reader.clone()).await.is_empty() {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "copy never removed; ACL sync status: {:?}", acl_status());
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(on_dest(local.principal.clone()).await, vec![local.clone()]);

    eng.op_ok(&mirror, &[&topic.name], LifecycleOp::Stop).await;
    eng.stop().await;
    let _ = Cluster::Destination.admin().delete_acls(&[AclFilter::from(&local)]).await;
    let _ = Cluster::Source.admin().delete_acls(&[AclFilter::from(&write)]).await;
    let _ = Cluster::Destination.admin().delete_topic(&topic.name).await;
}
