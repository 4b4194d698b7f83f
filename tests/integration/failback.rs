//! Failback without a full copy (issue 18) on the rig's two clusters: A (the rig's source) was
//! mirrored into B (the rig's destination) by `m1`, run by an engine attached to B, and failed
//! over; producers then wrote to B. A second engine attached to A starts `m2` from B into A: it
//! finds `m1`'s lineage in B's `__mirror_state` and copies only what B received since the
//! failover; records written to A after the last mirrored one make it refuse, with their count.

use std::collections::BTreeMap;
use std::time::Duration;

use kmirror::domain::PartitionState;
use kmirror::engine::{
    self, Actor, EngineConfig, EngineHandle, LifecycleOp, MirrorSpec, MirrorUpdate, ProblemKind, SourceSpec,
    TopicSelector, Truncation,
};
use kmirror::kafka::{IsolationLevel, OffsetSpec};

use crate::engine::{TestEngine, assert_same_content, keyed, produce_aborted, read_all};
use crate::support::*;

const START: LifecycleOp = LifecycleOp::Start { truncation: Truncation::None };

fn actor() -> Actor {
    Actor { identity: "test".into(), address: None }
}

/// An engine attached to A (the rig's source cluster), keeping its state in a topic of the given
/// name there; the same name as the engine on B uses, so it finds B's state under it.
pub(crate) async fn engine_on_a(state_topic: &str) -> (EngineHandle, tokio::task::JoinHandle<()>) {
    let id = unique("eng-a");
    let mut config = EngineConfig::new(Cluster::Source.bootstrap());
    config.state_topic = state_topic.to_string();
    config.state_partitions = 4;
    config.instance_id = format!("kmirror-{id}");
    config.cluster_name = format!("kmirror-{id}");
    config.metadata_refresh_interval = Duration::from_secs(3600);
    engine::start(config).await.expect("engine on A starts")
}

async fn lifecycle(h: &EngineHandle, mirror: &str, topic: &str, op: LifecycleOp) -> engine::OpResult {
    h.lifecycle(mirror, TopicSelector::Names(vec![topic.to_string()]), op, false, actor()).await.expect("call")
}

/// Creates on `h` (attached to A) a mirror whose source is B: the failback direction.
pub(crate) async fn create_failback_mirror(h: &EngineHandle) -> String {
    let m2 = unique("m2");
    h.create_mirror(
        MirrorSpec {
            topic_include: Vec::new(),
            topic_exclude: kmirror::domain::topic_policy::default_exclude(),
            name: m2.clone(),
            source: SourceSpec { bootstrap_servers: Cluster::Destination.bootstrap(), properties: Default::default() },
            expected_source_cluster_id: None,
            sync: Default::default(),
            replication_throttle_bytes_per_sec: None,
            approval: Default::default(),
        },
        actor(),
    )
    .await
    .expect("create m2");
    m2
}

/// A new topic on A (`prefix`, `partitions`) holding `records` records (tag `tag`), mirrored into
/// B by a mirror `m1` on a new engine attached to B, caught up and failed over: the starting point
/// of a failback. Returns the topic, the engine on B and the mirror's name.
pub(crate) async fn failed_over_from_a(
    prefix: &str,
    partitions: i32,
    records: usize,
    tag: &str,
) -> (TestTopic, TestEngine, String) {
    let topic = TestTopic::create(Cluster::Source, prefix, partitions, &[]).await;
    let (t, recs) = (topic.name.clone(), keyed(records, partitions, tag));
    tokio::task::spawn_blocking(move || produce(Cluster::Source, &t, &recs)).await.unwrap();
    let b = TestEngine::start().await;
    let m1 = unique("m1");
    b.create_mirror(&m1).await;
    b.op_ok(&m1, &[&topic.name], START).await;
    b.wait_caught_up(&m1, &topic.name, partitions).await;
    b.op_ok(&m1, &[&topic.name], LifecycleOp::Stop).await;
    (topic, b, m1)
}

/// The same call with `validate_only`.
pub(crate) async fn preview(h: &EngineHandle, mirror: &str, topic: &str, op: LifecycleOp) -> engine::OpResult {
    h.lifecycle(mirror, TopicSelector::Names(vec![topic.to_string()]), op, true, actor()).await.expect("call")
}

/// Waits until `mirror` on `h` has mirrored `topic` up to B's last stable offset.
pub(crate) async fn caught_up_from_b(h: &EngineHandle, mirror: &str, topic: &str, partitions: i32) {
    let q: Vec<_> = (0..partitions).map(|p| (topic.to_string(), p, OffsetSpec::Latest)).collect();
    eventually(&format!("{mirror} caught up with B's {topic}"), Duration::from_secs(90), || async {
        let lso = Cluster::Destination.admin().list_offsets(&q, IsolationLevel::ReadCommitted).await.ok()?;
        let snap = h.snapshot();
        let t = snap.mirror(mirror)?.topic(topic)?;
        let failed = t.partitions.iter().find(|p| p.state == PartitionState::Failed);
        assert!(failed.is_none(), "{topic} cannot catch up: {failed:?}");
        lso.iter()
            .all(|o| {
                t.partitions.iter().any(|p| {
                    p.partition == o.partition
                        && p.state == PartitionState::Mirroring
                        && p.mirrored_source_offset.is_some_and(|m| m >= o.offset)
                })
            })
            .then_some(())
    })
    .await
}

/// Records `mirror` has copied of `topic`, as `h` counts them.
fn copied(h: &EngineHandle, mirror: &str, topic: &str) -> u64 {
    let snap = h.snapshot();
    snap.mirror(mirror)
        .and_then(|m| m.topic(topic))
        .map_or(0, |t| t.partitions.iter().map(|p| p.records_mirrored).sum())
}

/// Asserts that A and B hold the same records and that `mirror`'s offset map, reading `from`,
/// translates each record's offset there to the same record's offset on the other cluster.
async fn assert_translates(h: &EngineHandle, mirror: &str, topic: &str, from: Cluster) {
    let t = topic.to_string();
    let (on_a, on_b) =
        tokio::task::spawn_blocking(move || (read_all(Cluster::Source, &t, 2), read_all(Cluster::Destination, &t, 2)))
            .await
            .unwrap();
    let (src, dst) = if from == Cluster::Source { (&on_a, &on_b) } else { (&on_b, &on_a) };
    for p in 0..2 {
        assert_eq!(src[&p].len(), dst[&p].len(), "{topic}-{p}");
        for (r, there) in src[&p].iter().zip(&dst[&p]) {
            assert_eq!(h.translate_offset(mirror, topic, p, r.offset), Some(there.offset), "{topic}-{p}@{}", r.offset);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failback_copies_only_what_the_other_side_received_since_the_failover() {
    let _rig = shared().await;
    let topic = TestTopic::create(Cluster::Source, "failback", 2, &[]).await;
    let diverged = TestTopic::create(Cluster::Source, "failback-div", 2, &[]).await;
    let (t, d) = (topic.name.clone(), diverged.name.clone());
    tokio::task::spawn_blocking(move || {
        produce(Cluster::Source, &t, &keyed(600, 2, "a-before"));
        produce_aborted(&t, 2, 50);
        produce(Cluster::Source, &t, &keyed(200, 2, "a-after-abort"));
        produce(Cluster::Source, &d, &keyed(100, 2, "a-div"));
    })
    .await
    .unwrap();

    // m1: A -> B, then failover.
    let b = TestEngine::start().await;
    let m1 = unique("m1");
    b.create_mirror(&m1).await;
    b.op_ok(&m1, &[&topic.name, &diverged.name], START).await;
    b.wait_caught_up(&m1, &topic.name, 2).await;
    b.wait_caught_up(&m1, &diverged.name, 2).await;
    b.op_ok(&m1, &[&topic.name, &diverged.name], LifecycleOp::Stop).await;
    let state_topic = b.config.state_topic.clone();
    let b_config = b.config.clone();
    b.stop().await;

    // Producers move to B; on A, three records are written to the second topic after the failover.
    let (t, d) = (topic.name.clone(), diverged.name.clone());
    tokio::task::spawn_blocking(move || {
        produce(Cluster::Destination, &t, &keyed(300, 2, "b-new"));
        produce(Cluster::Destination, &d, &keyed(10, 2, "b-new"));
        produce(Cluster::Source, &d, &keyed(3, 1, "a-late"));
    })
    .await
    .unwrap();

    // m2: B -> A, from an engine attached to A.
    let (a, a_join) = engine_on_a(&state_topic).await;
    let m2 = create_failback_mirror(&a).await;
    // A lineage is read only for a topic of the mirror (it reads the source's whole state topic).
    let e = a.lineage(&m2, &topic.name).await.expect_err("not a topic of m2 yet");
    assert_eq!(e.kind(), ProblemKind::TopicNotInMirror, "{e}");
    let p = preview(&a, &m2, &topic.name, START).await;
    assert!(p.results[0].ok, "the preview accepts the failback: {p:?}");
    let fb = p.failback.get(&topic.name).unwrap_or_else(|| panic!("the preview names the failback: {p:?}"));
    assert_eq!(fb.from_mirror, m1, "the lineage adopted");
    assert_eq!(fb.partitions.len(), 2, "{fb:?}");
    let r = lifecycle(&a, &m2, &topic.name, START).await;
    assert!(r.results[0].ok, "the failback start is accepted: {r:?}");
    caught_up_from_b(&a, &m2, &topic.name, 2).await;
    // The topic's lineage as the topic page shows it: m1 on B copied it from A and was failed over.
    let l = a.lineage(&m2, &topic.name).await.expect("lineage").expect("B's state has the topic");
    assert_eq!(l.source_mirror, m1);
    assert_eq!(l.problem, None, "its lineage applies here: {l:?}");
    assert_eq!(l.partitions.len(), 2);
    for p in &l.partitions {
        assert_eq!(p.state, PartitionState::Stopped, "{l:?}");
        assert!(p.source_stop_offset.is_some() && p.last_mirror_epoch.is_some(), "{l:?}");
        assert!(p.last_mirrored_offset.is_some_and(|o| o > 0) && p.offset_map_runs > 0, "{l:?}");
    }
    // Incremental: only B's 300 new records crossed, not the topic's 1,100; the preview said so.
    assert_eq!(copied(&a, &m2, &topic.name), 300, "records copied by the failback");
    assert_eq!(fb.records(), 300, "the preview's records to copy: {fb:?}");
    // A equals B record for record, and every offset of B translates to the same record on A
    // (the history through m1's inverted map, the new records through m2's own runs).
    assert_eq!(assert_same_content(&topic.name, 2).await, 1_100);
    assert_translates(&a, &m2, &topic.name, Cluster::Destination).await;

    // The second topic: the three records written on A after the failover never reached B. The
    // preview says exactly what the start then does.
    let p = preview(&a, &m2, &diverged.name, START).await;
    let r = lifecycle(&a, &m2, &diverged.name, START).await;
    assert_eq!(p.results[0].error, r.results[0].error, "the preview is the start's answer");
    let refusal = r.results[0].error.as_ref().expect("refused");
    assert_eq!(refusal.kind, ProblemKind::DestinationDiverged, "{refusal:?}");
    assert!(refusal.detail.contains("partition 0: 3 local records at offsets"), "{}", refusal.detail);
    assert!(
        refusal.detail.contains("partition 1: no") || !refusal.detail.contains("partition 1:"),
        "{}",
        refusal.detail
    );
    assert!(refusal.detail.contains("written between"), "{}", refusal.detail);

    // Round trip: m2 is failed over (A is the primary again), A receives 50 records, and m1
    // restarts from B's side: again incremental (m2's lineage in A's state), again identical.
    let r = lifecycle(&a, &m2, &topic.name, LifecycleOp::Stop).await;
    assert!(r.results[0].ok, "{r:?}");
    let t = topic.name.clone();
    tokio::task::spawn_blocking(move || produce(Cluster::Source, &t, &keyed(50, 2, "a-again"))).await.unwrap();
    let b = TestEngine::with_config(b_config).await;
    let before = copied(&b.handle, &m1, &topic.name);
    let p = b.op(&m1, &[&topic.name], START).await;
    assert!(p.results[0].ok, "the restart of m1 is accepted: {p:?}");
    b.wait_caught_up(&m1, &topic.name, 2).await;
    assert_eq!(copied(&b.handle, &m1, &topic.name) - before, 50, "records copied by the second failback");
    assert_eq!(assert_same_content(&topic.name, 2).await, 1_150);
    assert_translates(&b.handle, &m1, &topic.name, Cluster::Source).await;
    b.op_ok(&m1, &[&topic.name], LifecycleOp::Stop).await;
    b.stop().await;

    // A topic with no lineage (created on B, never mirrored) is a normal start.
    let fresh = TestTopic::create(Cluster::Destination, "failback-fresh", 1, &[]).await;
    let f = fresh.name.clone();
    tokio::task::spawn_blocking(move || produce(Cluster::Destination, &f, &keyed(20, 1, "fresh"))).await.unwrap();
    let r = lifecycle(&a, &m2, &fresh.name, START).await;
    assert!(r.results[0].ok, "{r:?}");
    assert_eq!(a.lineage(&m2, &fresh.name).await.expect("lineage"), None, "no mirror on B has it");
    caught_up_from_b(&a, &m2, &fresh.name, 1).await;
    assert_eq!(assert_same_content(&fresh.name, 1).await, 20);

    let _ = lifecycle(&a, &m2, &fresh.name, LifecycleOp::Stop).await;
    a.shutdown().await;
    let _ = a_join.await;
    for t in [&topic.name, &diverged.name] {
        let _ = Cluster::Destination.admin().delete_topic(t).await;
    }
    let _ = Cluster::Source.admin().delete_topic(&fresh.name).await;
}

/// Produces `records` in one transaction on `cluster`, committed or aborted.
pub(crate) fn produce_txn(cluster: Cluster, topic: &str, records: &[Rec], commit: bool) {
    use rdkafka::producer::Producer;
    let p = producer(cluster, &[("transactional.id", &unique("fb-tx"))]);
    p.init_transactions(Duration::from_secs(30)).unwrap();
    p.begin_transaction().unwrap();
    for r in records {
        let mut headers = rdkafka::message::OwnedHeaders::new();
        for (k, v) in &r.headers {
            headers = headers.insert(rdkafka::message::Header { key: k, value: Some(v) });
        }
        let mut br =
            rdkafka::producer::BaseRecord::<Vec<u8>, Vec<u8>>::to(topic).partition(r.partition).headers(headers);
        if let Some(ts) = r.timestamp {
            br = br.timestamp(ts);
        }
        if let Some(k) = &r.key {
            br = br.key(k);
        }
        if let Some(v) = &r.value {
            br = br.payload(v);
        }
        p.send(br).map_err(|(e, _)| e).unwrap();
    }
    p.flush(Duration::from_secs(30)).unwrap();
    if commit {
        p.commit_transaction(Duration::from_secs(30)).unwrap();
    } else {
        p.abort_transaction(Duration::from_secs(30)).unwrap();
    }
}

/// One round of writes: plain records (every tenth a tombstone), an aborted transaction and a
/// committed one; the number of committed records.
fn write_round(cluster: Cluster, topic: &str, plain: usize, aborted: usize, committed: usize, tag: &str) -> usize {
    let mut recs = keyed(plain, 2, tag);
    for r in recs.iter_mut().step_by(10) {
        r.value = None;
    }
    produce(cluster, topic, &recs);
    produce_txn(cluster, topic, &keyed(aborted, 2, &format!("{tag}-aborted")), false);
    produce_txn(cluster, topic, &keyed(committed, 2, &format!("{tag}-txn")), true);
    plain + committed
}

/// A consumer of `group` on `cluster` reads `n` records of each partition of `topic` from the
/// group's committed position (`reset` when it has none), commits after the `n`th, and returns
/// the record it would read next per partition.
fn consume_part(cluster: Cluster, topic: &str, group: &str, n: usize, reset: &str) -> BTreeMap<i32, Consumed> {
    use rdkafka::consumer::{CommitMode, Consumer};
    let mut next = BTreeMap::new();
    for p in 0..2 {
        let c = consumer(cluster, &[("group.id", group), ("auto.offset.reset", reset)]);
        let mut tpl = rdkafka::TopicPartitionList::new();
        tpl.add_partition_offset(topic, p, rdkafka::Offset::Stored).unwrap();
        c.assign(&tpl).unwrap();
        let mut got = read_n(&c, n + 1, Duration::from_secs(60));
        let mut commit = rdkafka::TopicPartitionList::new();
        commit.add_partition_offset(topic, p, rdkafka::Offset::Offset(got[n - 1].offset + 1)).unwrap();
        c.commit(&commit, CommitMode::Sync).unwrap();
        next.insert(p, got.remove(n));
    }
    next
}

/// The group's first record per partition of `topic` on `cluster`, from its committed offsets
/// only (no reset policy: a missing or out-of-range offset fails); commits nothing.
fn resume(cluster: Cluster, topic: &str, group: &str) -> BTreeMap<i32, Consumed> {
    use rdkafka::consumer::Consumer;
    (0..2)
        .map(|p| {
            let c = consumer(cluster, &[("group.id", group), ("auto.offset.reset", "error")]);
            let mut tpl = rdkafka::TopicPartitionList::new();
            tpl.add_partition_offset(topic, p, rdkafka::Offset::Stored).unwrap();
            c.assign(&tpl).unwrap();
            (p, read_n(&c, 1, Duration::from_secs(60)).remove(0))
        })
        .collect()
}

/// The same record (key, value, headers, timestamp), wherever it is.
fn same(a: &Consumed, b: &Consumed) -> bool {
    (&a.key, &a.value, &a.headers, a.timestamp) == (&b.key, &b.value, &b.headers, b.timestamp)
}

/// Waits until `group`'s committed offsets on `cluster` for `topic` are `expected`, asking
/// `mirror` on `h` for a metadata refresh (the group-offset sync) every few seconds meanwhile.
async fn wait_group_at(
    h: &EngineHandle,
    mirror: &str,
    cluster: Cluster,
    group: &str,
    topic: &str,
    expected: &BTreeMap<i32, i64>,
) {
    let admin = cluster.admin();
    let parts: Vec<(String, i32)> = expected.keys().map(|p| (topic.to_string(), *p)).collect();
    let mut polls = 0u32;
    eventually(&format!("{group} synced to {expected:?} on {}", cluster.name()), Duration::from_secs(120), || {
        let ask = polls.is_multiple_of(30);
        polls += 1;
        let (admin, parts) = (&admin, &parts);
        async move {
            if ask {
                let _ = h.refresh_now(mirror).await;
            }
            let got = admin.list_consumer_group_offsets(group, Some(parts), false).await.ok()?;
            let got: BTreeMap<i32, i64> = got.into_iter().map(|o| (o.partition, o.offset)).collect();
            (got == *expected).then_some(())
        }
    })
    .await
}

/// Where `next` (a record read on `from`) is on `to`, per partition, by its position among the
/// committed records (the clusters hold the same records in the same order).
async fn offsets_there(topic: &str, next: &BTreeMap<i32, Consumed>, from: Cluster, to: Cluster) -> BTreeMap<i32, i64> {
    let t = topic.to_string();
    let (here, there) =
        tokio::task::spawn_blocking(move || (read_all(from, &t, 2), read_all(to, &t, 2))).await.unwrap();
    next.iter()
        .map(|(p, r)| {
            let i = here[p].iter().position(|x| x.offset == r.offset).expect("the record is there");
            assert!(same(&here[p][i], &there[p][i]), "{topic}-{p}: the clusters differ at record {i}");
            (*p, there[p][i].offset)
        })
        .collect()
}

/// Committed records of `topic` on `cluster`.
async fn count(cluster: Cluster, topic: &str, partitions: i32) -> usize {
    let t = topic.to_string();
    tokio::task::spawn_blocking(move || read_all(cluster, &t, partitions).values().map(Vec::len).sum()).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failback_round_trip_with_transactions_compaction_and_a_consumer_group() {
    let _rig = shared().await;
    let txn = TestTopic::create(Cluster::Source, "fb-txn", 2, &[]).await;
    // Compaction is unlikely to run in the test's time (the active segment is never cleaned):
    // what matters is that the topic's config and its transaction markers do not get in the way.
    let compacted = TestTopic::create(Cluster::Source, "fb-compact", 2, &[("cleanup.policy", "compact")]).await;
    let topics = [txn.name.clone(), compacted.name.clone()];
    let names: Vec<&str> = topics.iter().map(String::as_str).collect();
    let group = unique("fb-group");
    let (ts, g) = (topics.clone(), group.clone());
    // On A: 700 committed records in each topic (aborted transactions between them); the group
    // reads 150 of each partition and commits.
    let consumed_on_a = tokio::task::spawn_blocking(move || {
        ts.iter()
            .map(|t| {
                let n = write_round(Cluster::Source, t, 500, 40, 200, "a");
                assert_eq!(n, 700);
                (t.clone(), consume_part(Cluster::Source, t, &g, 150, "earliest"))
            })
            .collect::<BTreeMap<_, _>>()
    })
    .await
    .unwrap();

    // m1: A -> B with the group-offset sync; the group is translated onto B; failover.
    let b = TestEngine::start().await;
    let m1 = unique("m1");
    b.create_mirror(&m1).await;
    b.op_ok(&m1, &names, START).await;
    for t in &topics {
        b.wait_caught_up(&m1, t, 2).await;
        assert_eq!(assert_same_content(t, 2).await, 700);
        let expected = offsets_there(t, &consumed_on_a[t], Cluster::Source, Cluster::Destination).await;
        wait_group_at(&b.handle, &m1, Cluster::Destination, &group, t, &expected).await;
    }
    b.op_ok(&m1, &names, LifecycleOp::Stop).await;
    let b_config = b.config.clone();
    b.stop().await;
    let configs = Cluster::Destination.admin().describe_topic_configs(&compacted.name).await.unwrap();
    assert!(
        configs.iter().any(|e| e.name == "cleanup.policy" && e.value.as_deref() == Some("compact")),
        "B's copy is compacted too"
    );

    // Producers and the group move to B: 360 new committed records per topic (and an aborted
    // transaction); the group resumes exactly where it stopped on A and reads 250 more per
    // partition, past the failover point.
    let (ts, g) = (topics.clone(), group.clone());
    let consumed_on_b = tokio::task::spawn_blocking(move || {
        ts.iter()
            .map(|t| {
                assert_eq!(write_round(Cluster::Destination, t, 300, 30, 60, "b"), 360);
                (
                    t.clone(),
                    (resume(Cluster::Destination, t, &g), consume_part(Cluster::Destination, t, &g, 250, "error")),
                )
            })
            .collect::<BTreeMap<_, _>>()
    })
    .await
    .unwrap();
    for t in &topics {
        let (first_on_b, _) = &consumed_on_b[t];
        for (p, next) in &consumed_on_a[t] {
            assert!(same(next, &first_on_b[p]), "{t}-{p}: the group resumed on B at the next record");
        }
        assert_eq!(count(Cluster::Destination, t, 2).await, 1_060);
    }

    // m2: B -> A, from an engine attached to A. The preview accepts; the start copies only the
    // 360 records per topic B received since the failover.
    let (a, a_join) = engine_on_a(&b_config.state_topic).await;
    let m2 = create_failback_mirror(&a).await;
    for t in &topics {
        let p = preview(&a, &m2, t, START).await;
        assert!(p.results[0].ok, "the preview accepts the failback of {t}: {p:?}");
        // Transactional data with aborted transactions: the preview counts records, not offsets.
        let to_copy = p.failback.get(t).map(|f| f.records());
        assert_eq!(to_copy, Some(360), "the preview's records to copy for {t}: {p:?}");
        let r = lifecycle(&a, &m2, t, START).await;
        assert_eq!(p.results[0].error, r.results[0].error, "the preview is the start's answer");
        assert!(r.results[0].ok, "the failback of {t} is accepted: {r:?}");
    }
    for t in &topics {
        caught_up_from_b(&a, &m2, t, 2).await;
        assert_eq!(copied(&a, &m2, t), 360, "records copied by the failback of {t}");
        assert_eq!(assert_same_content(t, 2).await, 1_060);
        assert_translates(&a, &m2, t, Cluster::Destination).await;
        // The group is translated onto A: at the A offset of the record after the last it read on B.
        let next_on_b = &consumed_on_b[t].1;
        let expected = offsets_there(t, next_on_b, Cluster::Destination, Cluster::Source).await;
        wait_group_at(&a, &m2, Cluster::Source, &group, t, &expected).await;
    }

    // Failover of m2: A is the primary again; the group resumes there at exactly the next record.
    for t in &topics {
        let r = lifecycle(&a, &m2, t, LifecycleOp::Stop).await;
        assert!(r.results[0].ok, "{r:?}");
        let (tn, g) = (t.clone(), group.clone());
        let first_on_a = tokio::task::spawn_blocking(move || resume(Cluster::Source, &tn, &g)).await.unwrap();
        for (p, next) in &consumed_on_b[t].1 {
            assert!(same(next, &first_on_a[p]), "{t}-{p}: the group resumed on A at {:?}, not {next:?}", first_on_a[p]);
        }
    }

    // Round trip: A receives 50 more committed records per topic (and an aborted transaction),
    // and m1 restarts from B's side: again incremental, again identical.
    let ts = topics.clone();
    tokio::task::spawn_blocking(move || {
        for t in &ts {
            assert_eq!(write_round(Cluster::Source, t, 30, 10, 20, "a-again"), 50);
        }
    })
    .await
    .unwrap();
    let b = TestEngine::with_config(b_config).await;
    for t in &topics {
        let before = copied(&b.handle, &m1, t);
        let p = b.handle.lifecycle(&m1, TopicSelector::Names(vec![t.clone()]), START, true, actor()).await.unwrap();
        assert!(p.results[0].ok, "the preview of m1's restart accepts: {p:?}");
        let r = b.op(&m1, &[t], START).await;
        assert!(r.results[0].ok, "the restart of m1 is accepted: {r:?}");
        b.wait_caught_up(&m1, t, 2).await;
        assert_eq!(copied(&b.handle, &m1, t) - before, 50, "records copied by the second failback of {t}");
        assert_eq!(assert_same_content(t, 2).await, 1_110);
        assert_translates(&b.handle, &m1, t, Cluster::Source).await;
    }
    b.op_ok(&m1, &names, LifecycleOp::Stop).await;
    b.stop().await;
    a.shutdown().await;
    let _ = a_join.await;
    for t in &topics {
        let _ = Cluster::Destination.admin().delete_topic(t).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failback_refuses_a_lineage_that_names_another_cluster() {
    let _rig = shared().await;
    // m1 copies the topic A -> B and is failed over; then B's state says it mirrored from another
    // cluster (its expected source cluster ID changed: a mirror re-pointed, or a lineage that is
    // not A's).
    let (topic, b, m1) = failed_over_from_a("fb-foreign", 1, 40, "a").await;
    b.handle
        .update_mirror(
            &m1,
            MirrorUpdate { expected_source_cluster_id: Some("AnotherClusterIdxxxxxx".into()), ..Default::default() },
            actor(),
        )
        .await
        .expect("update m1");
    let state_topic = b.config.state_topic.clone();
    b.stop().await;
    let t = topic.name.clone();
    tokio::task::spawn_blocking(move || produce(Cluster::Destination, &t, &keyed(5, 1, "b"))).await.unwrap();

    let (a, a_join) = engine_on_a(&state_topic).await;
    let m2 = create_failback_mirror(&a).await;
    let p = preview(&a, &m2, &topic.name, START).await;
    let r = lifecycle(&a, &m2, &topic.name, START).await;
    assert_eq!(p.results[0].error, r.results[0].error, "the preview is the start's answer");
    let refusal = r.results[0].error.as_ref().expect("refused");
    assert_eq!(refusal.kind, ProblemKind::SourceClusterIdMismatch, "{refusal:?}");
    assert!(refusal.detail.contains("AnotherClusterIdxxxxxx"), "{}", refusal.detail);
    assert!(refusal.detail.contains(&Cluster::Source.expected_cluster_id()), "{}", refusal.detail);
    // Nothing happened to A's topic.
    assert!(a.snapshot().mirror(&m2).and_then(|m| m.topic(&topic.name)).is_none());
    assert_eq!(count(Cluster::Source, &topic.name, 1).await, 40);

    a.shutdown().await;
    let _ = a_join.await;
    let _ = Cluster::Destination.admin().delete_topic(&topic.name).await;
}

/// The split-brain watch across a failback: after `m1`'s failover (A -> B), records written to A
/// are reported as writes to the old source; once a failback mirror on A copies the topic back
/// from B, the engine on B finds it in A's state and no longer reports them as split brain.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_to_the_old_source_are_split_brain_until_a_failback_explains_them() {
    let _rig = shared().await;
    let (topic, b, m1) = failed_over_from_a("fb-watch", 2, 40, "a").await;

    // A producer left on A writes 6 records (record time now) after the failover.
    let t = topic.name.clone();
    tokio::task::spawn_blocking(move || {
        let now: Vec<Rec> = keyed(6, 2, "late").into_iter().map(|r| Rec { timestamp: None, ..r }).collect();
        produce(Cluster::Source, &t, &now);
    })
    .await
    .unwrap();
    let watch = |b: &TestEngine| {
        let snap = b.handle.snapshot();
        let t = snap.mirror(&m1).and_then(|m| m.topic(&topic.name)).cloned().expect("topic");
        (t.source_writes_after_stop().records, t.split_brain().records, t.failback_mirror)
    };
    let seen = eventually("the writes after the failover", Duration::from_secs(60), || async {
        let w = watch(&b);
        (w.0 == 6).then_some(w)
    })
    .await;
    assert_eq!(seen, (6, 6, None), "split brain: no failback on A");
    let metric = |b: &TestEngine| {
        let text = kmirror::api::metrics::render(
            &b.handle.snapshot(),
            kmirror::clock::now(),
            &kmirror::api::HttpMetrics::default(),
            "t",
        );
        let series = format!("kmirror_source_writes_after_failover{{mirror=\"{m1}\",topic=\"{}\"}} ", topic.name);
        text.lines().find_map(|l| l.strip_prefix(&series).map(str::to_string))
    };
    assert_eq!(metric(&b).as_deref(), Some("6"), "the alert's metric");

    // The failback: m2 on A copies the topic back from B (a resync: A's 6 records are divergent).
    let (a, a_join) = engine_on_a(&b.config.state_topic).await;
    let m2 = create_failback_mirror(&a).await;
    let resync = LifecycleOp::Start { truncation: Truncation::Resync { quarantine: false } };
    let r = lifecycle(&a, &m2, &topic.name, resync).await;
    assert!(r.results[0].ok, "{r:?}");
    caught_up_from_b(&a, &m2, &topic.name, 2).await;
    let explained = eventually("the failback found in A's state", Duration::from_secs(60), || async {
        b.handle.refresh_now(&m1).await.expect("refresh");
        let w = watch(&b);
        (w.2.is_some()).then_some(w)
    })
    .await;
    assert_eq!(explained.2.as_deref(), Some(m2.as_str()), "{explained:?}");
    assert!(explained.0 > 0, "A still has records written after m1's failover (m2's copies): {explained:?}");
    assert_eq!(explained.1, 0, "not split brain while a failback copies back: {explained:?}");
    assert_eq!(metric(&b).as_deref(), Some("0"), "the alert's metric");

    let _ = lifecycle(&a, &m2, &topic.name, LifecycleOp::Stop).await;
    a.shutdown().await;
    let _ = a_join.await;
    b.stop().await;
    let _ = Cluster::Destination.admin().delete_topic(&topic.name).await;
}
