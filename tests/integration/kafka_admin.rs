//! The Kafka layer against real brokers: both clusters answer, carry the rig's cluster IDs, and
//! every admin wrapper does what it says.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rdkafka::consumer::{CommitMode, Consumer};
use rdkafka::producer::Producer;

use kmirror::kafka::consumer::assign_positions;
use kmirror::kafka::*;

use crate::support::*;

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64
}

fn records(n: usize, partitions: i32, ts0: i64) -> Vec<Rec> {
    (0..n)
        .map(|i| Rec {
            partition: (i as i32) % partitions,
            key: Some(format!("key-{i}").into_bytes()),
            value: Some(format!("value-{i}").into_bytes()),
            headers: vec![("h".to_string(), vec![i as u8]), ("trace".to_string(), b"abc".to_vec())],
            timestamp: Some(ts0 + i as i64),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_consume_round_trip_on_both_clusters() {
    let _rig = shared().await;
    for cluster in [Cluster::Source, Cluster::Destination] {
        let topic = TestTopic::create(cluster, "roundtrip", 2, &[]).await;
        let sent = records(20, 2, now_ms() - 10_000);
        produce(cluster, &topic.name, &sent);
        let mut got = tokio::task::spawn_blocking({
            let name = topic.name.clone();
            move || read_topic(cluster, &name, 2, 20)
        })
        .await
        .unwrap();
        got.sort_by_key(|c| (c.partition, c.offset));
        let mut expected = sent.clone();
        expected.sort_by_key(|r| (r.partition, r.timestamp));
        assert_eq!(got.len(), 20, "{}", cluster.name());
        for (g, e) in got.iter().zip(&expected) {
            assert_eq!(
                (g.partition, &g.key, &g.value, &g.headers, g.timestamp),
                (e.partition, &e.key, &e.value, &e.headers, e.timestamp)
            );
        }
        // Offsets are dense per partition.
        for p in 0..2 {
            let offs: Vec<i64> = got.iter().filter(|c| c.partition == p).map(|c| c.offset).collect();
            assert_eq!(offs, (0..10).collect::<Vec<_>>());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clusters_have_the_rig_cluster_ids() {
    let _rig = shared().await;
    let src = Cluster::Source.admin().describe_cluster().await.expect("describe source");
    let dst = Cluster::Destination.admin().describe_cluster().await.expect("describe destination");
    assert_eq!(src.cluster_id, Cluster::Source.expected_cluster_id());
    assert_eq!(dst.cluster_id, Cluster::Destination.expected_cluster_id());
    assert_ne!(src.cluster_id, dst.cluster_id);
    for (d, port) in [(&src, 19092u16), (&dst, 29092u16)] {
        assert_eq!(d.nodes.len(), 1);
        assert_eq!(d.nodes[0].host, "127.0.0.1");
        if Cluster::Source.bootstrap().ends_with(":19092") {
            assert_eq!(d.nodes[0].port, port);
        }
        assert_eq!(d.controller.as_ref().map(|n| n.id), Some(d.nodes[0].id), "controller is the single node");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_topics_returns_ids_and_partitions() {
    let _rig = shared().await;
    let admin = Cluster::Source.admin();
    let topic = TestTopic::create(Cluster::Source, "describe", 3, &[]).await;
    let d = admin.describe_topic(&topic.name).await.expect("describe");
    assert_eq!(d.name, topic.name);
    assert_ne!(d.topic_id, KafkaUuid::ZERO);
    assert_eq!(KafkaUuid::parse(&d.topic_id.to_string()), Some(d.topic_id));
    assert!(!d.is_internal);
    assert_eq!(d.partitions.iter().map(|p| p.partition).collect::<Vec<_>>(), vec![0, 1, 2]);
    assert!(d.partitions.iter().all(|p| p.leader == Some(1) && p.replicas == vec![1] && p.isr == vec![1]));

    // A missing topic is a per-topic error with Kafka's code, next to a good answer.
    let missing = unique("missing");
    let both = admin.describe_topics(&[topic.name.clone(), missing.clone()]).await.expect("describe two");
    assert_eq!(both[0].as_ref().unwrap().topic_id, d.topic_id);
    let err = both[1].as_ref().unwrap_err();
    assert!(err.is(kmirror::kafka::KafkaErrorKind::UnknownTopicOrPartition), "{err}");
    assert!(err.to_string().contains(&missing));

    // Recreating a topic gives it a new ID: the basis of source-topic recreation detection.
    let other = TestTopic::create(Cluster::Source, "describe", 3, &[]).await;
    assert_ne!(admin.describe_topic(&other.name).await.unwrap().topic_id, d.topic_id);

    // Growing the partition count is visible.
    admin.create_partitions(&topic.name, 5).await.expect("create partitions");
    let grown = eventually("5 partitions", Duration::from_secs(20), || async {
        let d = admin.describe_topic(&topic.name).await.ok()?;
        (d.partitions.len() == 5).then_some(d)
    })
    .await;
    assert_eq!(grown.topic_id, d.topic_id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn incremental_alter_configs_changes_only_named_configs() {
    let _rig = shared().await;
    let admin = Cluster::Destination.admin();
    let topic = TestTopic::create(Cluster::Destination, "configs", 1, &[("cleanup.policy", "compact")]).await;
    let get = |entries: &[ConfigEntry], name: &str| entries.iter().find(|e| e.name == name).cloned().expect(name);

    // The controller accepts a change before the broker that answers DescribeConfigs has applied
    // it to its metadata image: read until the broker shows it (a CI run once saw the old value).
    let described = |what: &'static str, done: fn(&ConfigEntry) -> bool| {
        let (admin, name) = (admin.clone(), topic.name.clone());
        async move {
            eventually(what, Duration::from_secs(30), || async {
                let entries = admin.describe_topic_configs(&name).await.ok()?;
                entries.iter().find(|e| e.name == "retention.ms").is_some_and(done).then_some(entries)
            })
            .await
        }
    };
    admin
        .alter_topic_configs(&topic.name, &[("retention.ms".into(), ConfigOp::Set("123456".into()))])
        .await
        .expect("set retention.ms");
    let entries = described("retention.ms set", |e| e.value.as_deref() == Some("123456")).await;
    let retention = get(&entries, "retention.ms");
    assert_eq!(retention.source, ConfigSource::DynamicTopic);
    // Incremental: the override set at creation is still there (a legacy AlterConfigs would drop it).
    assert_eq!(get(&entries, "cleanup.policy").value.as_deref(), Some("compact"));

    admin.alter_topic_configs(&topic.name, &[("retention.ms".into(), ConfigOp::Delete)]).await.expect("delete");
    let entries = described("retention.ms override deleted", |e| e.source != ConfigSource::DynamicTopic).await;
    let retention = get(&entries, "retention.ms");
    assert_eq!(retention.value.as_deref(), Some("604800000"));

    // A bad value is refused with Kafka's code and the broker's message.
    let err = admin
        .alter_topic_configs(&topic.name, &[("retention.ms".into(), ConfigOp::Set("not-a-number".into()))])
        .await
        .unwrap_err();
    assert!(err.code().is_some_and(|c| c.name == "INVALID_CONFIG"), "{err}");
    assert!(!err.is_retryable());
    // A NUL byte in a name is an argument error, not a crash.
    let err = admin.alter_topic_configs("bad\0name", &[("x".into(), ConfigOp::Delete)]).await.unwrap_err();
    assert!(matches!(err, KafkaError::InvalidArgument { .. }), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acls_are_created_described_and_deleted() {
    let _rig = shared().await;
    let admin = Cluster::Source.admin();
    let topic = unique("acl-topic");
    let principal = format!("User:{}", unique("alice"));
    let read = AclBinding {
        resource_type: ResourceType::Topic,
        name: topic.clone(),
        pattern_type: PatternType::Literal,
        principal: principal.clone(),
        host: "*".into(),
        operation: AclOperation::Read,
        permission: AclPermission::Allow,
    };
    let prefixed_write = AclBinding {
        name: format!("{topic}-pfx"),
        pattern_type: PatternType::Prefixed,
        operation: AclOperation::Write,
        ..read.clone()
    };
    admin.create_acls(&[read.clone(), prefixed_write.clone()]).await.expect("create acls");

    let by_principal = AclFilter { principal: Some(principal.clone()), ..Default::default() };
    let found = eventually("both ACLs visible", Duration::from_secs(20), || async {
        let acls = admin.describe_acls(&by_principal).await.ok()?;
        (acls.len() == 2).then_some(acls)
    })
    .await;
    let mut expected = vec![read.clone(), prefixed_write.clone()];
    expected.sort();
    assert_eq!(found, expected);

    // MATCH finds the prefixed binding for a concrete topic name under the prefix.
    let matching = admin
        .describe_acls(&AclFilter {
            resource_type: Some(ResourceType::Topic),
            name: Some(format!("{topic}-pfx-orders")),
            pattern_type: Some(PatternType::Match),
            principal: Some(principal.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(matching, vec![prefixed_write.clone()]);

    let deleted = admin.delete_acls(&[AclFilter::from(&read)]).await.expect("delete");
    assert_eq!(deleted, vec![read.clone()]);
    let left = eventually("one ACL left", Duration::from_secs(20), || async {
        let acls = admin.describe_acls(&by_principal).await.ok()?;
        (acls.len() == 1).then_some(acls)
    })
    .await;
    assert_eq!(left, vec![prefixed_write.clone()]);
    assert_eq!(admin.delete_acls(std::slice::from_ref(&by_principal)).await.unwrap(), vec![prefixed_write]);

    // An invalid binding (ANY is not allowed when creating) is refused before reaching Kafka.
    let bad = AclBinding { operation: AclOperation::Any, ..read };
    let err = admin.create_acls(&[bad]).await.unwrap_err();
    assert!(matches!(err, KafkaError::InvalidArgument { .. }), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_group_offsets_are_listed_described_and_altered() {
    let _rig = shared().await;
    let admin = Cluster::Source.admin();
    let topic = TestTopic::create(Cluster::Source, "groups", 2, &[]).await;
    produce(Cluster::Source, &topic.name, &records(10, 2, now_ms() - 5_000));
    let group = unique("group");

    // A live subscribed member: the group is listed and described with its assignment.
    let name = topic.name.clone();
    let g = group.clone();
    let (tx_stop, rx_stop) = std::sync::mpsc::channel::<()>();
    let (tx_ready, rx_ready) = std::sync::mpsc::channel::<()>();
    let member = std::thread::spawn(move || {
        let c = consumer(Cluster::Source, &[("group.id", &g), ("client.id", "kmirror-test-member")]);
        c.subscribe(&[&name]).unwrap();
        let mut signalled = false;
        while rx_stop.try_recv().is_err() {
            let _ = c.poll(Duration::from_millis(100));
            if !signalled && c.assignment().map(|a| a.count() == 2).unwrap_or(false) {
                // Commit positions 3 and 2 through the group protocol.
                let mut tpl = rdkafka::TopicPartitionList::new();
                tpl.add_partition_offset(&name, 0, rdkafka::Offset::Offset(3)).unwrap();
                tpl.add_partition_offset(&name, 1, rdkafka::Offset::Offset(2)).unwrap();
                c.commit(&tpl, CommitMode::Sync).unwrap();
                tx_ready.send(()).unwrap();
                signalled = true;
            }
        }
        c.unsubscribe();
    });
    tokio::task::spawn_blocking(move || rx_ready.recv_timeout(Duration::from_secs(60)).expect("member joined"))
        .await
        .unwrap();

    let listed = admin.list_consumer_groups().await.expect("list groups");
    let mine = listed.iter().find(|l| l.group_id == group).expect("group listed");
    assert_eq!(mine.state, GroupState::Stable);
    assert!(!mine.is_simple);

    let described =
        admin.describe_consumer_groups(std::slice::from_ref(&group)).await.expect("describe").remove(0).expect("group");
    assert_eq!(described.state, GroupState::Stable);
    assert_eq!(described.members.len(), 1);
    assert_eq!(described.members[0].client_id, "kmirror-test-member");
    let mut assigned = described.members[0].assignment.clone();
    assigned.sort();
    assert_eq!(assigned, vec![(topic.name.clone(), 0), (topic.name.clone(), 1)]);
    assert!(described.coordinator.is_some());

    let offsets = admin.list_consumer_group_offsets(&group, None, true).await.expect("list offsets");
    assert_eq!(
        offsets.iter().map(|o| (o.topic.clone(), o.partition, o.offset)).collect::<Vec<_>>(),
        vec![(topic.name.clone(), 0, 3), (topic.name.clone(), 1, 2)]
    );

    // Altering offsets of a group with an active member is refused by Kafka.
    let new =
        vec![GroupOffset { topic: topic.name.clone(), partition: 0, offset: 5, leader_epoch: Some(0), metadata: None }];
    let err = admin.alter_consumer_group_offsets(&group, &new).await.unwrap_err();
    assert!(err.code().is_some_and(|c| c.name == "UNKNOWN_MEMBER_ID" || c.name == "REBALANCE_IN_PROGRESS"), "{err}");

    tx_stop.send(()).unwrap();
    tokio::task::spawn_blocking(move || member.join().unwrap()).await.unwrap();
    eventually("group empty", Duration::from_secs(30), || async {
        let d = admin.describe_consumer_groups(std::slice::from_ref(&group)).await.ok()?.remove(0).ok()?;
        (d.state == GroupState::Empty).then_some(())
    })
    .await;

    admin.alter_consumer_group_offsets(&group, &new).await.expect("alter offsets");
    let only_p0 =
        admin.list_consumer_group_offsets(&group, Some(&[(topic.name.clone(), 0)]), false).await.expect("list p0");
    assert_eq!(only_p0.len(), 1);
    assert_eq!((only_p0[0].offset, only_p0[0].leader_epoch), (5, Some(0)));

    // A negative offset is refused before it reaches Kafka.
    let bad = vec![GroupOffset { offset: -1, ..new[0].clone() }];
    assert!(matches!(admin.alter_consumer_group_offsets(&group, &bad).await, Err(KafkaError::InvalidArgument { .. })));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_offsets_earliest_latest_by_timestamp_and_isolation() {
    let _rig = shared().await;
    let admin = Cluster::Source.admin();
    let topic = TestTopic::create(Cluster::Source, "offsets", 1, &[]).await;
    let t0 = now_ms() - 60_000;
    let recs: Vec<Rec> = (0..5)
        .map(|i| Rec {
            partition: 0,
            key: None,
            value: Some(vec![i]),
            headers: vec![],
            timestamp: Some(t0 + 1000 * i as i64),
        })
        .collect();
    produce(Cluster::Source, &topic.name, &recs);

    let q = |spec| vec![(topic.name.clone(), 0, spec)];
    let one = |v: Vec<ListedOffset>| v.into_iter().next().expect("one answer");
    let earliest = one(admin.list_offsets(&q(OffsetSpec::Earliest), IsolationLevel::ReadUncommitted).await.unwrap());
    let latest = one(admin.list_offsets(&q(OffsetSpec::Latest), IsolationLevel::ReadUncommitted).await.unwrap());
    let max_ts = one(admin.list_offsets(&q(OffsetSpec::MaxTimestamp), IsolationLevel::ReadUncommitted).await.unwrap());
    let by_ts =
        one(admin.list_offsets(&q(OffsetSpec::Timestamp(t0 + 2500)), IsolationLevel::ReadUncommitted).await.unwrap());
    let exact =
        one(admin.list_offsets(&q(OffsetSpec::Timestamp(t0 + 2000)), IsolationLevel::ReadUncommitted).await.unwrap());
    let after = one(admin
        .list_offsets(&q(OffsetSpec::Timestamp(t0 + 999_999)), IsolationLevel::ReadUncommitted)
        .await
        .unwrap());
    assert_eq!(earliest.offset, 0);
    assert_eq!(latest.offset, 5);
    assert_eq!((max_ts.offset, max_ts.timestamp), (4, t0 + 4000));
    assert_eq!((by_ts.offset, by_ts.timestamp), (3, t0 + 3000));
    assert_eq!(exact.offset, 2);
    assert_eq!(after.offset, -1, "no record at or after that timestamp");
    assert!(latest.leader_epoch.is_some_and(|e| e >= 0), "ListOffsets returns the leader epoch");

    // An open transaction: the high watermark moves, the last stable offset does not.
    let name = topic.name.clone();
    let txp = tokio::task::spawn_blocking(move || {
        let p = producer(Cluster::Source, &[("transactional.id", &unique("tx"))]);
        p.init_transactions(Duration::from_secs(30)).unwrap();
        p.begin_transaction().unwrap();
        p.send(rdkafka::producer::BaseRecord::<(), [u8]>::to(&name).partition(0).payload(b"pending"))
            .map_err(|(e, _)| e)
            .unwrap();
        p.flush(Duration::from_secs(30)).unwrap();
        p
    })
    .await
    .unwrap();
    let hw = one(admin.list_offsets(&q(OffsetSpec::Latest), IsolationLevel::ReadUncommitted).await.unwrap());
    let lso = one(admin.list_offsets(&q(OffsetSpec::Latest), IsolationLevel::ReadCommitted).await.unwrap());
    assert_eq!(hw.offset, 6);
    assert_eq!(lso.offset, 5);
    tokio::task::spawn_blocking(move || txp.abort_transaction(Duration::from_secs(30)).unwrap()).await.unwrap();
    let lso = eventually("LSO past the abort marker", Duration::from_secs(20), || async {
        let o = one(admin.list_offsets(&q(OffsetSpec::Latest), IsolationLevel::ReadCommitted).await.ok()?);
        (o.offset == 7).then_some(o)
    })
    .await;
    assert_eq!(lso.offset, 7, "aborted record + abort marker");

    // Unknown partitions fail with Kafka's code naming the partition.
    let err = admin
        .list_offsets(&[(topic.name.clone(), 9, OffsetSpec::Latest)], IsolationLevel::ReadUncommitted)
        .await
        .unwrap_err();
    assert!(err.to_string().contains(&format!("{}-9", topic.name)), "{err}");
    // Negative timestamps are an argument error.
    assert!(matches!(
        admin.list_offsets(&q(OffsetSpec::Timestamp(-5)), IsolationLevel::ReadUncommitted).await,
        Err(KafkaError::InvalidArgument { .. })
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_records_moves_the_log_start() {
    let _rig = shared().await;
    let admin = Cluster::Destination.admin();
    let topic = TestTopic::create(Cluster::Destination, "delrec", 1, &[]).await;
    produce(Cluster::Destination, &topic.name, &records(6, 1, now_ms() - 1_000));
    admin.delete_records(&topic.name, &[(0, 4)]).await.expect("delete records");
    let earliest = admin
        .list_offsets(&[(topic.name.clone(), 0, OffsetSpec::Earliest)], IsolationLevel::ReadUncommitted)
        .await
        .unwrap();
    assert_eq!(earliest[0].offset, 4);
    admin.delete_records(&topic.name, &[(0, -1)]).await.expect("delete to high watermark");
    let earliest = admin
        .list_offsets(&[(topic.name.clone(), 0, OffsetSpec::Earliest)], IsolationLevel::ReadUncommitted)
        .await
        .unwrap();
    assert_eq!(earliest[0].offset, 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_cluster_is_a_retryable_timeout_not_a_hang() {
    let _rig = shared().await;
    // Nothing listens on port 1.
    let admin = KafkaAdmin::connect("127.0.0.1:1", &Default::default(), Duration::from_secs(2)).unwrap();
    let err = admin.describe_cluster().await.unwrap_err();
    assert!(err.is_retryable(), "{err}");
    // Bad client properties are a clear client error.
    let mut props = std::collections::BTreeMap::new();
    props.insert("no.such.property".to_string(), "1".to_string());
    let err = KafkaAdmin::connect("127.0.0.1:1", &props, Duration::from_secs(2)).unwrap_err();
    assert!(err.to_string().contains("no.such.property"), "{err}");
}

/// A broker restart bumps the partition leader epoch; consumed messages carry it; a position
/// assigned with an older epoch is validated (KIP-320) and consumption continues from it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn source_restart_bumps_leader_epoch_seen_on_messages() {
    let _rig = exclusive().await;
    let admin = Cluster::Source.admin();
    let topic = TestTopic::create(Cluster::Source, "epochs", 1, &[]).await;
    produce(Cluster::Source, &topic.name, &records(3, 1, now_ms() - 1_000));
    let name = topic.name.clone();
    let before = tokio::task::spawn_blocking(move || read_topic(Cluster::Source, &name, 1, 3)).await.unwrap();
    let e0 = before[0].leader_epoch.expect("epoch on consumed message");
    assert!(before.iter().all(|c| c.leader_epoch == Some(e0)));

    tokio::task::spawn_blocking(|| rig(&["restart", "source"])).await.unwrap();

    let name = topic.name.clone();
    tokio::task::spawn_blocking(move || produce(Cluster::Source, &name, &records(3, 1, now_ms()))).await.unwrap();
    let name = topic.name.clone();
    let all = tokio::task::spawn_blocking(move || read_topic(Cluster::Source, &name, 1, 6)).await.unwrap();
    let e1 = all[3].leader_epoch.expect("epoch");
    assert!(e1 > e0, "leader epoch bumped by the restart: {e0} -> {e1}");
    assert!(all[..3].iter().all(|c| c.leader_epoch == Some(e0)), "old records keep their epoch");
    assert!(all[3..].iter().all(|c| c.leader_epoch == Some(e1)));

    let latest = admin
        .list_offsets(&[(topic.name.clone(), 0, OffsetSpec::Latest)], IsolationLevel::ReadCommitted)
        .await
        .unwrap();
    assert_eq!(latest[0].leader_epoch, Some(e1));

    // Resume at offset 3 claiming epoch e0 (the epoch of the record before it): valid history.
    let name = topic.name.clone();
    let resumed = tokio::task::spawn_blocking(move || {
        let c = consumer(Cluster::Source, &[("auto.offset.reset", "error")]);
        assign_positions(
            &c,
            &[PartitionPosition { topic: name.clone(), partition: 0, offset: 3, leader_epoch: Some(e0) }],
        )
        .unwrap();
        let got = read_n(&c, 3, Duration::from_secs(30));
        let pos = kmirror::kafka::consumer::list_leader_epochs(&c.position().unwrap());
        (got, pos)
    })
    .await
    .unwrap();
    assert_eq!(resumed.0.iter().map(|c| c.offset).collect::<Vec<_>>(), vec![3, 4, 5]);
    assert_eq!(resumed.1[0].offset, 6);
}

/// Thousands of admin calls leave the malloc heap where it was: no per-call leak in the wrappers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_wrappers_do_not_leak() {
    let _rig = exclusive().await;
    let admin = Cluster::Source.admin();
    let topic = TestTopic::create(Cluster::Source, "leak", 2, &[]).await;
    produce(Cluster::Source, &topic.name, &records(4, 2, now_ms() - 1_000));
    let group = unique("leak-group");
    admin
        .alter_consumer_group_offsets(
            &group,
            &[GroupOffset { topic: topic.name.clone(), partition: 0, offset: 1, leader_epoch: None, metadata: None }],
        )
        .await
        .unwrap();
    let acl_filter = AclFilter { principal: Some("User:nobody".into()), ..Default::default() };
    let names = vec![topic.name.clone()];
    let round = || async {
        admin.describe_cluster().await.unwrap();
        admin.describe_topics(&names).await.unwrap();
        admin
            .list_offsets(
                &[(topic.name.clone(), 0, OffsetSpec::Latest), (topic.name.clone(), 1, OffsetSpec::Earliest)],
                IsolationLevel::ReadCommitted,
            )
            .await
            .unwrap();
        admin.describe_acls(&acl_filter).await.unwrap();
        admin.list_consumer_groups().await.unwrap();
        admin.describe_consumer_groups(std::slice::from_ref(&group)).await.unwrap();
        admin.list_consumer_group_offsets(&group, None, false).await.unwrap();
        admin
            .alter_topic_configs(&topic.name, &[("retention.ms".into(), ConfigOp::Set("3600000".into()))])
            .await
            .unwrap();
        admin.delete_acls(std::slice::from_ref(&acl_filter)).await.unwrap();
    };
    for _ in 0..100 {
        round().await;
    }
    let heap = || {
        // SAFETY: mallinfo2 only reads allocator statistics.
        #[allow(unsafe_code)]
        let mi = unsafe { libc::mallinfo2() };
        mi.uordblks as i64
    };
    let before = heap();
    const ROUNDS: i64 = 500;
    for _ in 0..ROUNDS {
        round().await;
    }
    let growth = heap() - before;
    // 500 rounds × 9 calls: a leak of even one small result object per call (≥ 64 bytes) would
    // show as ≥ 288 KB. Allow allocator noise below that.
    assert!(growth < 160 * 1024, "heap grew by {growth} bytes over {ROUNDS} rounds");
    eprintln!("heap growth over {ROUNDS} rounds of 9 admin calls: {growth} bytes");
}

/// The data path's check after it re-creates its producer: per partition, the first record a
/// `read_committed` reader sees at or after an offset. Committed records are found; aborted ones,
/// their markers and the commit markers are not; partitions of several topics are answered
/// together (each topic read on its own, since an end-of-partition event names no topic).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_committed_record_after_an_offset_skips_aborted_records_and_markers() {
    let _rig = shared().await;
    let a = TestTopic::create(Cluster::Destination, "first-committed-a", 2, &[]).await;
    let b = TestTopic::create(Cluster::Destination, "first-committed-b", 2, &[]).await;
    let (ta, tb) = (a.name.clone(), b.name.clone());
    tokio::task::spawn_blocking(move || {
        let p = producer(Cluster::Destination, &[("transactional.id", &unique("first-committed"))]);
        p.init_transactions(Duration::from_secs(30)).unwrap();
        let send = |topic: &str, partition: i32, n: usize| {
            for i in 0..n {
                let v = format!("r{i}");
                p.send(rdkafka::producer::BaseRecord::<(), str>::to(topic).partition(partition).payload(&v))
                    .map_err(|(e, _)| e)
                    .unwrap();
            }
        };
        // a-0: 3 committed (0-2, marker 3), 2 aborted (4-5, marker 6). a-1: 1 aborted (0, marker 1).
        // b-0: 2 committed (0-1, marker 2). b-1: nothing.
        p.begin_transaction().unwrap();
        send(&ta, 0, 3);
        send(&tb, 0, 2);
        p.commit_transaction(Duration::from_secs(30)).unwrap();
        p.begin_transaction().unwrap();
        send(&ta, 0, 2);
        send(&ta, 1, 1);
        p.flush(Duration::from_secs(30)).unwrap();
        p.abort_transaction(Duration::from_secs(30)).unwrap();
    })
    .await
    .unwrap();
    let config = kmirror::data_path::PipeConfig {
        mirror: "first-committed".into(),
        slot: 0,
        source_bootstrap: Cluster::Source.bootstrap(),
        source_properties: Default::default(),
        destination_bootstrap: Cluster::Destination.bootstrap(),
        destination_properties: Default::default(),
        transactional_id: unique("first-committed-reader"),
        commit_interval: Duration::from_secs(1),
        early_commit_interval: Duration::from_millis(50),
        commit_max_bytes: 1 << 20,
        state_topic: "__mirror_state".into(),
        transaction_timeout: Duration::from_secs(30),
        prefetch_kbytes: 1024,
        throttle: Default::default(),
        shared_source_consumer: None,
    };
    let k = |t: &str, p: i32| (t.to_string(), p);
    let from = vec![(k(&a.name, 0), 0), (k(&a.name, 1), 0), (k(&b.name, 0), 1), (k(&b.name, 1), 0)];
    let c = config.clone();
    let found = tokio::task::spawn_blocking(move || pipe::first_committed_from(&c, &from, Duration::from_secs(30)))
        .await
        .unwrap()
        .expect("answered");
    let want = std::collections::HashMap::from([(k(&a.name, 0), 0), (k(&b.name, 0), 1)]);
    assert_eq!(found, want);
    // After the last committed record of a-0 only its marker, aborted records and their marker
    // follow: nothing there. The same from the end of the log and after b-0's last record.
    let from = vec![(k(&a.name, 0), 3), (k(&a.name, 1), 2), (k(&b.name, 0), 2)];
    let c = config.clone();
    let found = tokio::task::spawn_blocking(move || pipe::first_committed_from(&c, &from, Duration::from_secs(30)))
        .await
        .unwrap()
        .expect("answered");
    assert!(found.is_empty(), "{found:?}");
    let from = vec![(k(&a.name, 0), 7)];
    let found =
        tokio::task::spawn_blocking(move || pipe::first_committed_from(&config, &from, Duration::from_secs(30)))
            .await
            .unwrap()
            .expect("answered");
    assert!(found.is_empty(), "{found:?}");
}

/// A state read can be limited to some partitions: it returns their committed records only
/// (not another partition's, not an aborted transaction's), and leaves out a partition the topic
/// does not have.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_state_read_of_some_partitions_returns_their_committed_records_only() {
    let _rig = shared().await;
    let topic = TestTopic::create(Cluster::Destination, "state-read-some", 4, &[]).await;
    let name = topic.name.clone();
    tokio::task::spawn_blocking(move || {
        let p = producer(Cluster::Destination, &[("transactional.id", &unique("state-read-some"))]);
        p.init_transactions(Duration::from_secs(30)).unwrap();
        let send = |partition: i32, n: usize, what: &str| {
            for i in 0..n {
                let v = format!("{what}-{partition}-{i}");
                p.send(rdkafka::producer::BaseRecord::<str, str>::to(&name).partition(partition).key(&v).payload(&v))
                    .map_err(|(e, _)| e)
                    .unwrap();
            }
        };
        // Committed: 3 on partition 0, 2 on 1, 1 on 2. Aborted: 1 on 1. Partition 3: nothing.
        p.begin_transaction().unwrap();
        send(0, 3, "committed");
        send(1, 2, "committed");
        send(2, 1, "committed");
        p.commit_transaction(Duration::from_secs(30)).unwrap();
        p.begin_transaction().unwrap();
        send(1, 1, "aborted");
        p.flush(Duration::from_secs(30)).unwrap();
        p.abort_transaction(Duration::from_secs(30)).unwrap();
    })
    .await
    .unwrap();
    let admin = Cluster::Destination.admin();
    let bootstrap = Cluster::Destination.bootstrap();
    let props = std::collections::BTreeMap::new();
    let read = |only: Option<&'static [i32]>| {
        let (admin, bootstrap, props, name) = (&admin, &bootstrap, &props, &topic.name);
        async move {
            let mut got: Vec<(i32, String)> =
                state_log::read_to_end(admin, bootstrap, props, name, only, Duration::from_secs(30))
                    .await
                    .expect("the state read answers")
                    .into_iter()
                    .map(|r| (r.partition, String::from_utf8(r.value.expect("a value")).expect("utf-8")))
                    .collect();
            got.sort();
            got
        }
    };
    let some = read(Some(&[1, 3, 9])).await;
    assert_eq!(some, vec![(1, "committed-1-0".to_string()), (1, "committed-1-1".to_string())]);
    assert!(read(Some(&[3])).await.is_empty());
    let all = read(None).await;
    assert_eq!(all.len(), 6, "{all:?}");
    assert!(all.iter().all(|(_, v)| v.starts_with("committed-")), "{all:?}");
}
