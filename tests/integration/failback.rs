//! Failback without a full copy (issue 18) on the rig's two clusters: A (the rig's source) was
//! mirrored into B (the rig's destination) by `m1`, run by an engine attached to B, and failed
//! over; producers then wrote to B. A second engine attached to A starts `m2` from B into A: it
//! finds `m1`'s lineage in B's `__mirror_state` and copies only what B received since the
//! failover; records written to A after the last mirrored one make it refuse, with their count.

use std::time::Duration;

use kmirror::domain::PartitionState;
use kmirror::engine::{
    self, Actor, EngineConfig, EngineHandle, LifecycleOp, MirrorSpec, ProblemKind, SourceSpec, TopicSelector,
    Truncation,
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
async fn engine_on_a(state_topic: &str) -> (EngineHandle, tokio::task::JoinHandle<()>) {
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

/// The same call with `validate_only`.
async fn preview(h: &EngineHandle, mirror: &str, topic: &str, op: LifecycleOp) -> engine::OpResult {
    h.lifecycle(mirror, TopicSelector::Names(vec![topic.to_string()]), op, true, actor()).await.expect("call")
}

/// Waits until `mirror` on `h` has mirrored `topic` up to B's last stable offset.
async fn caught_up_from_b(h: &EngineHandle, mirror: &str, topic: &str, partitions: i32) {
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
    let m2 = unique("m2");
    a.create_mirror(
        MirrorSpec {
            name: m2.clone(),
            source: SourceSpec { bootstrap_servers: Cluster::Destination.bootstrap(), properties: Default::default() },
            expected_source_cluster_id: None,
            sync: Default::default(),
        },
        actor(),
    )
    .await
    .expect("create m2");
    let p = preview(&a, &m2, &topic.name, START).await;
    assert!(p.results[0].ok, "the preview accepts the failback: {p:?}");
    let r = lifecycle(&a, &m2, &topic.name, START).await;
    assert!(r.results[0].ok, "the failback start is accepted: {r:?}");
    caught_up_from_b(&a, &m2, &topic.name, 2).await;
    // Incremental: only B's 300 new records crossed, not the topic's 1,100.
    assert_eq!(copied(&a, &m2, &topic.name), 300, "records copied by the failback");
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
