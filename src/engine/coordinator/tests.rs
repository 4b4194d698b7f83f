//! The coordinator's edges, driven through its public handle against the in-memory clusters of
//! `engine::fake`: each lifecycle transition it carries out, each refusal, each failure it reacts
//! to, and the restore at startup. No Kafka, no fixed waits: every wait is on the next snapshot,
//! with a deadline.

use std::sync::Arc;
use std::time::Duration;

use super::refresh::lag_refresh_every;
use super::*;
use crate::data_path::{PartitionFault, PartitionProgress};
use crate::domain::PartitionState as S;
use crate::domain::offset_map::Run;
use crate::engine::fake::{FakeCluster, FakeWorld, Received, WriteMode};

#[test]
fn lag_refresh_stretches_with_the_partition_count_only_for_large_mirrors() {
    let second = Duration::from_secs(1);
    assert_eq!(lag_refresh_every(second, 8), second);
    assert_eq!(lag_refresh_every(second, 1_000), second);
    assert_eq!(lag_refresh_every(second, 10_000), Duration::from_secs(10));
    assert_eq!(lag_refresh_every(Duration::from_secs(30), 10_000), Duration::from_secs(30));
    assert_eq!(lag_refresh_every(second, usize::MAX), LAG_REFRESH_PER_PARTITION * u32::MAX);
}

#[test]
fn a_state_topic_deleted_during_start_up_is_not_called_an_unavailable_destination() {
    let err = |name: &str| KafkaError::Kafka {
        operation: "describe topic",
        resource: "__mirror_state".into(),
        code: crate::kafka::KafkaCode { code: 3, name: name.into() },
        message: "This server does not host this topic-partition.".into(),
    };
    for code in ["UNKNOWN_TOPIC_OR_PART", "UNKNOWN_TOPIC_ID", "_UNKNOWN_TOPIC", "_UNKNOWN_PARTITION"] {
        let e = state_read_error("__mirror_state", &err(code));
        let text = e.to_string();
        assert!(!text.contains("unavailable"), "{code}: {text}");
        assert!(text.contains("the state topic __mirror_state disappeared"), "{code}: {text}");
        assert!(text.contains("start kmirror again"), "{code}: {text}");
        assert!(text.contains(code), "the cause stays visible: {text}");
        assert_eq!(e.kind(), ProblemKind::DestinationUnavailable);
    }
    // A destination that does not answer still says so.
    let timeout =
        KafkaError::Timeout { operation: "describe topic", resource: "__mirror_state".into(), after: Duration::ZERO };
    let text = state_read_error("__mirror_state", &timeout).to_string();
    assert!(text.starts_with("the destination cluster is unavailable: cannot read __mirror_state"), "{text}");
    let other = state_read_error("__mirror_state", &err("TOPIC_AUTHORIZATION_FAILED")).to_string();
    assert!(other.contains("cannot read __mirror_state") && other.contains("TOPIC_AUTHORIZATION_FAILED"), "{other}");
}

const SOURCE: &str = "source:9092";
const SOURCE_ID: &str = "source-cluster";
/// How long a condition may take before the test fails (a retry after backoff takes about 1 s).
const DEADLINE: Duration = Duration::from_secs(10);

fn actor() -> Actor {
    Actor { identity: "test".into(), address: None }
}

fn config() -> EngineConfig {
    let mut c = EngineConfig::new("destination:9092");
    c.state_partitions = 4;
    c.instance_id = "kmirror-test".into();
    c.request_timeout = Duration::from_secs(5);
    c.metadata_refresh_interval = Duration::from_secs(3600);
    c
}

fn spec(name: &str, bootstrap: &str) -> MirrorSpec {
    MirrorSpec {
        topic_include: Vec::new(),
        topic_exclude: crate::domain::topic_policy::default_exclude(),
        name: name.to_string(),
        source: SourceSpec { bootstrap_servers: bootstrap.to_string(), properties: BTreeMap::new() },
        expected_source_cluster_id: None,
        sync: SyncSpec { topic_configs: false, group_offsets: false, acls: false, ..SyncSpec::default() },
        replication_throttle_bytes_per_sec: None,
        approval: Default::default(),
    }
}

const START: LifecycleOp = LifecycleOp::Start { truncation: Truncation::None };
const RESYNC: LifecycleOp = LifecycleOp::Start { truncation: Truncation::Resync { quarantine: false } };

/// The problem kind of a lifecycle call about one topic, whether the whole call or the topic
/// was refused; `None` when it succeeded.
fn refusal(r: &Result<OpResult, EngineError>) -> Option<ProblemKind> {
    match r {
        Err(e) => Some(e.kind()),
        Ok(r) => r.results.iter().find(|t| !t.ok).map(|t| t.error.as_ref().map_or(ProblemKind::Internal, |p| p.kind)),
    }
}

/// An engine on fake clusters: one source at [`SOURCE`].
struct Rig {
    world: Arc<FakeWorld>,
    source: Arc<FakeCluster>,
    engine: EngineHandle,
    join: Option<tokio::task::JoinHandle<()>>,
}

async fn start_on(world: &Arc<FakeWorld>) -> (EngineHandle, tokio::task::JoinHandle<()>) {
    start_with(world, config()).await
}

async fn start_with(world: &Arc<FakeWorld>, config: EngineConfig) -> (EngineHandle, tokio::task::JoinHandle<()>) {
    let ports: Arc<dyn Ports> = Arc::clone(world) as Arc<dyn Ports>;
    start_with_ports(config, ports).await.expect("the engine starts on the fake clusters")
}

impl Rig {
    async fn new() -> Rig {
        Rig::with_config(config()).await
    }

    async fn with_config(config: EngineConfig) -> Rig {
        let world = FakeWorld::new();
        let source = world.add_source(SOURCE, SOURCE_ID);
        let (engine, join) = start_with(&world, config).await;
        Rig { world, source, engine, join: Some(join) }
    }

    /// Shuts the engine down and starts a new one on the same clusters and state topic.
    async fn restart(self) -> Rig {
        self.restart_with(config()).await
    }

    async fn restart_with(mut self, config: EngineConfig) -> Rig {
        self.engine.shutdown().await;
        if let Some(j) = self.join.take() {
            j.await.expect("the coordinator ends cleanly");
        }
        let (engine, join) = start_with(&self.world, config).await;
        Rig { world: Arc::clone(&self.world), source: Arc::clone(&self.source), engine, join: Some(join) }
    }

    async fn create(&self, name: &str) {
        self.engine.create_mirror(spec(name, SOURCE), actor()).await.expect("create mirror");
    }

    async fn op(&self, mirror: &str, topics: &[&str], op: LifecycleOp) -> Result<OpResult, EngineError> {
        let names = topics.iter().map(|t| t.to_string()).collect();
        self.engine.lifecycle(mirror, TopicSelector::Names(names), op, false, actor()).await
    }

    async fn op_ok(&self, mirror: &str, topics: &[&str], op: LifecycleOp) {
        let r = self.op(mirror, topics, op).await;
        assert_eq!(refusal(&r), None, "{op:?} of {topics:?} failed: {r:?}");
    }

    /// Waits until `f` finds what it looks for in a snapshot.
    async fn until<T>(&self, what: &str, f: impl Fn(&Snapshot) -> Option<T>) -> T {
        until(&self.engine, what, f).await
    }

    /// Waits until every partition of `topic` is in `state`.
    async fn all_in(&self, mirror: &str, topic: &str, state: PartitionState) {
        self.until(&format!("{topic} all {state}"), |s| {
            let t = s.mirror(mirror)?.topic(topic)?;
            (!t.partitions.is_empty() && t.partitions.iter().all(|p| p.state == state)).then_some(())
        })
        .await;
    }

    /// Waits until every partition of `topic` is MIRRORING and has mirrored the source's end.
    async fn caught_up(&self, mirror: &str, topic: &str) {
        let ends: Vec<i64> = self.source.partitions(topic).iter().map(|p| p.end).collect();
        self.until(&format!("{topic} caught up to {ends:?}"), |s| {
            let t = s.mirror(mirror)?.topic(topic)?;
            (t.partitions.len() == ends.len()
                && t.partitions
                    .iter()
                    .all(|p| p.state == S::Mirroring && p.mirrored_source_offset == Some(ends[p.partition as usize])))
            .then_some(())
        })
        .await;
    }

    /// A mirror `mirror` (created if needed) mirroring a new source topic, caught up.
    async fn mirroring(&self, mirror: &str, topic: &str, partitions: i32, records: i64) {
        self.source.add_topic(topic, partitions, records);
        if self.engine.snapshot().mirror(mirror).is_none() {
            self.create(mirror).await;
        }
        self.op_ok(mirror, &[topic], START).await;
        self.caught_up(mirror, topic).await;
    }

    fn partition(&self, mirror: &str, topic: &str, partition: i32) -> PartitionSnapshot {
        let snap = self.engine.snapshot();
        let t = snap.mirror(mirror).and_then(|m| m.topic(topic)).expect("topic in snapshot");
        t.partitions.iter().find(|p| p.partition == partition).expect("partition").clone()
    }

    fn destination_end(&self, topic: &str, partition: i32) -> i64 {
        self.world.destination.partition(topic, partition).expect("destination partition").end
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        if let Some(j) = self.join.take() {
            j.abort();
        }
    }
}

async fn until<T>(engine: &EngineHandle, what: &str, f: impl Fn(&Snapshot) -> Option<T>) -> T {
    let mut rx = engine.subscribe();
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let snap = rx.borrow_and_update().clone();
        if let Some(t) = f(&snap) {
            return t;
        }
        match tokio::time::timeout_at(deadline, rx.changed()).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => panic!("the engine ended while waiting for {what}"),
            Err(_) => panic!("timed out waiting for {what}; last snapshot: {:#?}", snap.mirrors),
        }
    }
}

/// Polls `done` every 5 ms for up to [`DEADLINE`]; whether it came to hold. For what the fakes
/// record (assigns, calls, stored records), which the engine's snapshot, and so [`until`], does
/// not show. Callers assert on the result, or on the exact figure after it.
async fn polled(mut done: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while !done() {
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    true
}

/// The data path's state as shown to operators, as text.
fn data_path(snap: &Snapshot, mirror: &str) -> String {
    serde_json::to_string(&snap.mirror(mirror).expect("mirror").data_path).expect("serialisable")
}

// ----- start, pause, resume, stop ------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_creates_the_mirror_topic_and_mirrors_to_the_source_end() {
    let rig = Rig::new().await;
    rig.source.add_topic("orders", 3, 5);
    rig.create("m").await;
    // The source's cluster ID is recorded as the expected one.
    assert_eq!(rig.engine.snapshot().mirror("m").unwrap().expected_source_cluster_id.as_deref(), Some(SOURCE_ID));

    rig.op_ok("m", &["orders"], START).await;
    rig.caught_up("m", "orders").await;

    let snap = rig.engine.snapshot();
    let t = snap.mirror("m").unwrap().topic("orders").unwrap();
    assert_eq!(t.source_topic_id, rig.source.topic_id("orders").unwrap());
    assert_eq!(t.destination_topic_id, rig.world.destination.topic_id("orders").unwrap());
    for p in 0..3 {
        assert_eq!(rig.destination_end("orders", p), 5, "partition {p} copied once");
    }
    // A new topic starts at the source's log start, on an empty destination partition.
    let specs = rig.world.pipes.assigned("m");
    assert_eq!(specs.len(), 3, "{specs:?}");
    assert!(specs.iter().all(|s| s.next_source_offset == Some(0) && s.destination_next_offset == 0), "{specs:?}");

    // New source records keep flowing.
    rig.source.produce("orders", 1, 7);
    rig.caught_up("m", "orders").await;
    assert_eq!(rig.destination_end("orders", 1), 12);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_releases_the_partitions_and_resume_continues_from_the_pause_point() {
    let rig = Rig::new().await;
    rig.mirroring("m", "orders", 2, 5).await;

    rig.op_ok("m", &["orders"], LifecycleOp::Pause).await;
    rig.all_in("m", "orders", S::Paused).await;
    assert!(rig.world.pipes.held("m").is_empty(), "a paused partition is not fetched");
    let unassign = rig.world.pipes.received("m").into_iter().find(|r| matches!(r, Received::Unassign { .. }));
    assert!(matches!(unassign, Some(Received::Unassign { fence: false, ok: true, .. })), "{unassign:?}");

    rig.source.produce("orders", 0, 3);
    let assigned_before = rig.world.pipes.assigned("m").len();
    rig.op_ok("m", &["orders"], LifecycleOp::Resume).await;
    rig.caught_up("m", "orders").await;
    // Partition 1 has nothing new: it is caught up as soon as the resume's MIRRORING is
    // published, which can be before its slot's data path has taken the assign.
    polled(|| rig.world.pipes.assigned("m").len() >= assigned_before + 2).await;
    let resumed = &rig.world.pipes.assigned("m")[assigned_before..];
    assert_eq!(resumed.len(), 2, "{resumed:?}");
    assert!(resumed.iter().all(|s| s.next_source_offset == Some(5) && s.destination_next_offset == 5), "{resumed:?}");
    assert_eq!(rig.destination_end("orders", 0), 8, "nothing copied twice");
}

/// Pause and resume of many topics are one step each for each slot's data path (issues 16, 17):
/// one unassign (one commit) per slot for the pause, one assign per slot for the resume, whatever
/// the topic count.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_and_resume_of_several_topics_are_one_data_path_step_each() {
    let rig = Rig::new().await;
    let topics = ["a", "b", "c"];
    for t in topics {
        rig.mirroring("m", t, 2, 3).await;
    }
    let before = rig.world.pipes.received("m").len();
    rig.op_ok("m", &topics, LifecycleOp::Pause).await;
    for t in topics {
        rig.all_in("m", t, S::Paused).await;
    }
    let slots = rig.world.pipes.slots("m");
    assert!(slots.len() > 1, "six partitions spread over the four slots: {slots:?}");
    let paused: Vec<Received> = rig.world.pipes.received("m")[before..].to_vec();
    assert_eq!(paused.len(), slots.len(), "one unassign per slot for three topics: {paused:?}");
    let released: usize = paused
        .iter()
        .map(|r| match r {
            Received::Unassign { partitions, fence: false, ok: true } => partitions.len(),
            other => panic!("not a pause's release: {other:?}"),
        })
        .sum();
    assert_eq!(released, 6, "{paused:?}");

    // New records while paused: a partition that mirrored them after the resume has had its
    // assign. Without them "caught up" held as soon as the resume's MIRRORING was applied, which
    // is before its assigns reach the data paths (a CI run read one assign of three).
    for t in topics {
        for p in 0..2 {
            rig.source.produce(t, p, 1);
        }
    }
    let before = rig.world.pipes.received("m").len();
    rig.op_ok("m", &topics, LifecycleOp::Resume).await;
    for t in topics {
        rig.caught_up("m", t).await;
    }
    let resumed: Vec<Received> = rig.world.pipes.received("m")[before..].to_vec();
    assert_eq!(resumed.len(), slots.len(), "one assign per slot for three topics: {resumed:?}");
    let assigned: usize = resumed
        .iter()
        .map(|r| match r {
            Received::Assign(specs) => specs.len(),
            other => panic!("not a resume's assign: {other:?}"),
        })
        .sum();
    assert_eq!(assigned, 6, "{resumed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_records_the_stop_point_and_fences_the_data_path() {
    let rig = Rig::new().await;
    rig.mirroring("m", "orders", 2, 5).await;
    rig.source.bump_epoch("orders", 0);
    rig.source.produce("orders", 0, 2);
    rig.caught_up("m", "orders").await;

    rig.op_ok("m", &["orders"], LifecycleOp::Stop).await;
    rig.all_in("m", "orders", S::Stopped).await;
    let (p0, p1) = (rig.partition("m", "orders", 0), rig.partition("m", "orders", 1));
    assert_eq!((p0.destination_stop_offset, p0.last_mirrored_epoch), (Some(7), Some(1)), "{p0:?}");
    assert_eq!((p1.destination_stop_offset, p1.last_mirrored_epoch), (Some(5), Some(0)), "{p1:?}");
    assert_eq!(p0.lag_records, 0);
    // One unassign with the fence per slot, for both partitions.
    let stops: Vec<Received> = rig
        .world
        .pipes
        .received("m")
        .into_iter()
        .filter(|r| matches!(r, Received::Unassign { fence: true, .. }))
        .collect();
    assert_eq!(stops.len(), rig.world.pipes.slots("m").len(), "{stops:?}");
    let fenced: usize = stops
        .iter()
        .map(|r| match r {
            Received::Unassign { partitions, ok: true, .. } => partitions.len(),
            other => panic!("{other:?}"),
        })
        .sum();
    assert_eq!(fenced, 2, "{stops:?}");
    assert!(rig.world.pipes.held("m").is_empty());

    // A stopped topic restarts where it stopped (nothing was written locally meanwhile).
    rig.source.produce("orders", 1, 1);
    let assigned_before = rig.world.pipes.assigned("m").len();
    rig.op_ok("m", &["orders"], START).await;
    rig.caught_up("m", "orders").await;
    let restarted = &rig.world.pipes.assigned("m")[assigned_before..];
    let p1 = restarted.iter().find(|s| s.partition == 1).expect("partition 1 assigned");
    assert_eq!((p1.next_source_offset, p1.destination_next_offset), (Some(5), 5));
    assert_eq!(rig.destination_end("orders", 1), 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_old_source_of_a_failed_over_topic_is_watched_for_new_writes() {
    let rig = Rig::new().await;
    rig.mirroring("m", "orders", 2, 5).await;
    // Records the failover leaves behind (written before it, never mirrored) are its lag, not
    // writes after it.
    rig.op_ok("m", &["orders"], LifecycleOp::Pause).await;
    rig.all_in("m", "orders", S::Paused).await;
    rig.source.produce_at("orders", 0, 3, now().as_millis() - 60_000);
    rig.op_ok("m", &["orders"], LifecycleOp::Stop).await;
    rig.all_in("m", "orders", S::Stopped).await;
    let writes = |s: &Snapshot| -> Option<Vec<Option<i64>>> {
        let t = s.mirror("m")?.topic("orders")?;
        Some(t.partitions.iter().map(|p| p.source_writes_after_stop).collect())
    };
    rig.until("the old source read after the stop", |s| (writes(s)? == [Some(0), Some(0)]).then_some(())).await;

    // A producer that was not moved keeps writing to the old source; one that sets old record
    // times (a replay) counts too: its records came after the first read after the failover.
    rig.source.produce("orders", 0, 4);
    rig.source.produce_at("orders", 1, 2, now().as_millis() - 3_600_000);
    rig.until("the writes after the failover", |s| (writes(s)? == [Some(4), Some(2)]).then_some(())).await;
    let snap = rig.engine.snapshot();
    let topic = snap.mirror("m").and_then(|m| m.topic("orders")).expect("topic");
    assert_eq!(topic.source_writes_after_stop(), crate::engine::SourceWrites { records: 6, partitions: 2 });
    assert_eq!(topic.partitions[0].lag_records, 0, "a STOPPED partition has no lag");

    // Restarted, the partitions mirror again and the watch ends.
    rig.op_ok("m", &["orders"], START).await;
    rig.caught_up("m", "orders").await;
    assert_eq!(writes(&rig.engine.snapshot()), Some(vec![None, None]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn illegal_transitions_are_refused_and_change_nothing() {
    let rig = Rig::new().await;
    rig.mirroring("m", "orders", 1, 2).await;
    rig.op_ok("m", &["orders"], LifecycleOp::Pause).await;
    rig.all_in("m", "orders", S::Paused).await;
    assert_eq!(refusal(&rig.op("m", &["orders"], START).await), Some(ProblemKind::IllegalTransition));

    rig.op_ok("m", &["orders"], LifecycleOp::Stop).await;
    rig.all_in("m", "orders", S::Stopped).await;
    for op in [LifecycleOp::Pause, LifecycleOp::Resume] {
        let r = rig.op("m", &["orders"], op).await;
        assert_eq!(refusal(&r), Some(ProblemKind::IllegalTransition), "{op:?}: {r:?}");
        // validate_only gives the same answer.
        let names = TopicSelector::Names(vec!["orders".into()]);
        let checked = rig.engine.lifecycle("m", names, op, true, actor()).await;
        assert_eq!(refusal(&checked), Some(ProblemKind::IllegalTransition), "{op:?} validate_only: {checked:?}");
    }
    assert_eq!(rig.partition("m", "orders", 0).state, S::Stopped);
    // Repeats are harmless.
    rig.op_ok("m", &["orders"], LifecycleOp::Stop).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_mirrors_and_topics_are_named() {
    let rig = Rig::new().await;
    for op in [START, LifecycleOp::Pause, LifecycleOp::Resume, LifecycleOp::Stop] {
        assert_eq!(refusal(&rig.op("nope", &["orders"], op).await), Some(ProblemKind::MirrorNotFound), "{op:?}");
    }
    assert_eq!(rig.engine.delete_mirror("nope", actor()).await.unwrap_err().kind(), ProblemKind::MirrorNotFound);
    assert_eq!(rig.engine.refresh_now("nope").await.unwrap_err().kind(), ProblemKind::MirrorNotFound);

    rig.create("m").await;
    let again = rig.engine.create_mirror(spec("m", SOURCE), actor()).await;
    assert_eq!(again.unwrap_err().kind(), ProblemKind::MirrorExists);
    for op in [LifecycleOp::Pause, LifecycleOp::Resume, LifecycleOp::Stop] {
        assert_eq!(refusal(&rig.op("m", &["ghost"], op).await), Some(ProblemKind::TopicNotInMirror), "{op:?}");
    }
    assert_eq!(refusal(&rig.op("m", &["ghost"], START).await), Some(ProblemKind::TopicNotFound));
    assert!(rig.engine.snapshot().mirror("m").unwrap().topics.is_empty());

    // A mirror with active topics cannot be deleted; once they are stopped it can.
    rig.mirroring("m", "orders", 1, 1).await;
    let busy = rig.engine.delete_mirror("m", actor()).await;
    assert_eq!(busy.unwrap_err().kind(), ProblemKind::MirrorHasActiveTopics);
    rig.op_ok("m", &["orders"], LifecycleOp::Stop).await;
    rig.engine.delete_mirror("m", actor()).await.expect("delete a mirror whose topics are stopped");
    assert!(rig.engine.snapshot().mirror("m").is_none());
}

// ----- the source: unreachable, another cluster ----------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_source_refuses_creates_and_starts_but_does_not_fail_mirroring_partitions() {
    let rig = Rig::new().await;
    let nowhere = rig.engine.create_mirror(spec("lost", "nowhere:9092"), actor()).await;
    assert_eq!(nowhere.unwrap_err().kind(), ProblemKind::SourceUnreachable);
    assert!(rig.engine.snapshot().mirror("lost").is_none());

    rig.mirroring("m", "orders", 1, 3).await;
    rig.source.add_topic("later", 1, 1);
    rig.source.set_unreachable(true);
    assert_eq!(refusal(&rig.op("m", &["later"], START).await), Some(ProblemKind::SourceUnreachable));
    rig.engine.refresh_now("m").await.unwrap();
    rig.until("source unreachable", |s| {
        (s.mirror("m")?.cluster_id_status == ClusterIdStatus::Unreachable).then_some(())
    })
    .await;
    assert_eq!(rig.partition("m", "orders", 0).state, S::Mirroring, "unreachable is not a failure");

    rig.source.set_unreachable(false);
    rig.engine.refresh_now("m").await.unwrap();
    rig.until("source back", |s| (s.mirror("m")?.cluster_id_status == ClusterIdStatus::Ok).then_some(())).await;
    rig.op_ok("m", &["later"], START).await;
    rig.caught_up("m", "later").await;
}

/// A stored mirror whose source client can no longer be created (a certificate file gone after
/// a redeploy) stays listed, and what it shows and refuses names that reason at once, not the
/// timeout of some other client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mirror_whose_source_client_cannot_be_created_names_the_reason() {
    let rig = Rig::new().await;
    rig.mirroring("m", "orders", 1, 3).await;
    rig.source.add_topic("later", 1, 1);
    let why = "ssl.ca.location failed: /etc/kmirror/source-ca.pem: No such file or directory";
    rig.world.break_source_client(SOURCE, why);
    let rig = rig.restart().await;
    let seen = rig.until("the source check's error", |s| s.mirror("m")?.cluster_id_error.clone()).await;
    assert!(seen.contains(why) && seen.contains("cannot create Kafka client"), "{seen}");
    let refused = rig.op("m", &["later"], START).await;
    assert_eq!(refusal(&refused), Some(ProblemKind::SourceUnreachable), "{refused:?}");
    let message = format!("{refused:?}");
    assert!(message.contains(why) && !message.contains("timed out"), "{message}");
    assert!(rig.engine.snapshot().mirror("m").is_some(), "the mirror stays listed");
    // Fixed in place: an explicit refresh creates the client, and the mirror carries on.
    rig.world.mend_source_client(SOURCE);
    rig.engine.refresh_now("m").await.unwrap();
    rig.until("the source check passes", |s| {
        (s.mirror("m")?.cluster_id_status == ClusterIdStatus::Ok && s.mirror("m")?.cluster_id_error.is_none())
            .then_some(())
    })
    .await;
    rig.op_ok("m", &["later"], START).await;
    rig.caught_up("m", "later").await;
    rig.source.produce("orders", 0, 2);
    rig.caught_up("m", "orders").await;
    rig.engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_with_another_cluster_id_is_refused_and_halts_the_mirror() {
    let rig = Rig::new().await;
    let mut wrong = spec("w", SOURCE);
    wrong.expected_source_cluster_id = Some("another-cluster".into());
    let r = rig.engine.create_mirror(wrong, actor()).await;
    assert_eq!(r.unwrap_err().kind(), ProblemKind::SourceClusterIdMismatch);

    rig.mirroring("m", "orders", 2, 3).await;
    rig.source.add_topic("later", 1, 1);
    rig.source.set_cluster_id("impostor");
    rig.engine.refresh_now("m").await.unwrap();
    rig.all_in("m", "orders", S::Failed).await;
    let snap = rig.engine.snapshot();
    let m = snap.mirror("m").unwrap();
    assert_eq!(m.cluster_id_status, ClusterIdStatus::Mismatch);
    assert_eq!(m.observed_source_cluster_id.as_deref(), Some("impostor"));
    for p in &m.topic("orders").unwrap().partitions {
        let e = p.error.as_ref().expect("an error");
        assert_eq!((e.code.as_str(), e.retryable), ("SOURCE_CLUSTER_ID_MISMATCH", false), "{p:?}");
    }
    assert_eq!(refusal(&rig.op("m", &["later"], START).await), Some(ProblemKind::SourceClusterIdMismatch));
}

// ----- the destination: conflicts, divergence ------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_destination_topic_that_is_not_free_is_refused() {
    let rig = Rig::new().await;
    rig.create("m").await;
    // Another partition count.
    rig.source.add_topic("wide", 3, 1);
    rig.world.destination.add_topic("wide", 2, 0);
    assert_eq!(refusal(&rig.op("m", &["wide"], START).await), Some(ProblemKind::DestinationTopicConflict));
    // Records already there: not adopted...
    rig.source.add_topic("full", 1, 3);
    rig.world.destination.add_topic("full", 1, 2);
    assert_eq!(refusal(&rig.op("m", &["full"], START).await), Some(ProblemKind::DestinationTopicConflict));
    assert!(rig.engine.snapshot().mirror("m").unwrap().topics.is_empty(), "nothing was added");
    // ...unless a resync deletes them first.
    rig.op_ok("m", &["full"], RESYNC).await;
    rig.caught_up("m", "full").await;
    let d = rig.world.destination.partition("full", 0).unwrap();
    assert_eq!((d.log_start, d.end), (2, 5), "the two local records deleted, three mirrored after them");

    // A destination topic belongs to one mirror.
    rig.create("m2").await;
    assert_eq!(refusal(&rig.op("m2", &["full"], START).await), Some(ProblemKind::DestinationTopicConflict));
    assert_eq!(refusal(&rig.op("m2", &["full"], RESYNC).await), Some(ProblemKind::DestinationTopicConflict));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_after_local_writes_is_refused_as_diverged_until_a_resync() {
    let rig = Rig::new().await;
    rig.mirroring("m", "orders", 1, 4).await;
    rig.op_ok("m", &["orders"], LifecycleOp::Stop).await;
    rig.all_in("m", "orders", S::Stopped).await;
    // After the failover, applications write to the destination topic.
    rig.world.destination.produce("orders", 0, 2);

    assert_eq!(refusal(&rig.op("m", &["orders"], START).await), Some(ProblemKind::DestinationDiverged));
    assert_eq!(rig.partition("m", "orders", 0).state, S::Stopped, "a refused start changes nothing");

    rig.op_ok("m", &["orders"], RESYNC).await;
    rig.caught_up("m", "orders").await;
    let d = rig.world.destination.partition("orders", 0).unwrap();
    assert_eq!((d.log_start, d.end), (6, 10), "everything deleted, then the source mirrored again");
}

/// One lineage (issue 16): the snapshot's local-write count, the restart refusal and the start
/// decision agree, and records the destination already deleted (below its log start) count for
/// none of them: once every local write is deleted, the restart is incremental again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_writes_below_the_log_start_count_nowhere() {
    use crate::engine::ports::ClusterAdmin;
    let rig = Rig::new().await;
    rig.mirroring("m", "orders", 1, 4).await;
    rig.op_ok("m", &["orders"], LifecycleOp::Stop).await;
    rig.all_in("m", "orders", S::Stopped).await;
    let stop = rig.partition("m", "orders", 0).destination_stop_offset.expect("stop offset");
    rig.world.destination.produce("orders", 0, 3);
    rig.until("3 local writes in the snapshot", |s| {
        (s.mirror("m")?.topic("orders")?.partitions[0].local_writes == 3).then_some(())
    })
    .await;

    // Two of them deleted: one left, still refused.
    rig.world.destination.delete_records("orders", &[(0, stop + 2)]).await.expect("delete");
    rig.until("1 local write left", |s| {
        (s.mirror("m")?.topic("orders")?.partitions[0].local_writes == 1).then_some(())
    })
    .await;
    let r = rig.op("m", &["orders"], START).await;
    assert_eq!(refusal(&r), Some(ProblemKind::DestinationDiverged), "{r:?}");
    let detail = format!("{r:?}");
    assert!(detail.contains("1 local record at offsets"), "{detail}");

    // All deleted: nothing is in the way, the restart continues where the mirror stopped.
    rig.world.destination.delete_records("orders", &[(0, -1)]).await.expect("delete");
    rig.until("no local writes", |s| (s.mirror("m")?.topic("orders")?.partitions[0].local_writes == 0).then_some(()))
        .await;
    rig.source.produce("orders", 0, 2);
    rig.op_ok("m", &["orders"], START).await;
    rig.caught_up("m", "orders").await;
    let last = rig.world.pipes.assigned("m").last().cloned().expect("assigned");
    assert_eq!(last.next_source_offset, Some(4), "incremental: {last:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resync_whose_deletion_fails_writes_nothing_and_the_retry_deletes_again() {
    let rig = Rig::new().await;
    rig.create("m").await;
    rig.source.add_topic("orders", 1, 3);
    rig.world.destination.add_topic("orders", 1, 2);
    rig.world.destination.set_fail_delete_records(true);
    assert_eq!(refusal(&rig.op("m", &["orders"], RESYNC).await), Some(ProblemKind::DestinationUnavailable));
    rig.all_in("m", "orders", S::Failed).await;
    assert!(rig.partition("m", "orders", 0).error.is_some_and(|e| e.retryable));
    assert!(rig.world.pipes.assigned("m").is_empty(), "nothing mirrored over the records");
    assert_eq!(rig.destination_end("orders", 0), 2);

    rig.world.destination.set_fail_delete_records(false);
    rig.caught_up("m", "orders").await;
    let d = rig.world.destination.partition("orders", 0).unwrap();
    assert_eq!((d.log_start, d.end), (2, 5), "the retry deleted them first");
}

// ----- failures and retries ------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_partition_is_retried_with_backoff_back_to_mirroring() {
    let rig = Rig::new().await;
    rig.mirroring("m", "orders", 2, 3).await;
    let fault = PartitionFault::DestinationRejected { message: "fake: record too large".into() };
    rig.world.pipes.fail_partition("m", "orders", 1, fault);
    let failed = rig
        .until("partition 1 FAILED", |s| {
            let p = s.mirror("m")?.topic("orders")?.partitions.get(1)?.clone();
            (p.state == S::Failed).then_some(p)
        })
        .await;
    let e = failed.error.expect("an error");
    assert_eq!((e.code.as_str(), e.retryable), ("INTERNAL", true));
    assert!(e.message.contains("record too large"), "{e:?}");
    assert_eq!(rig.partition("m", "orders", 0).state, S::Mirroring, "the other partition goes on");

    // After the backoff the partition is prepared again, from its committed position.
    rig.source.produce("orders", 1, 2);
    let assigned_before = rig.world.pipes.assigned("m").len();
    rig.caught_up("m", "orders").await;
    let retried = &rig.world.pipes.assigned("m")[assigned_before..];
    assert_eq!(retried.len(), 1, "{retried:?}");
    assert_eq!((retried[0].partition, retried[0].next_source_offset), (1, Some(3)));
    assert_eq!(rig.destination_end("orders", 1), 5);
}

/// `topics:recover` with automatic retries turned off (`max_attempts` 0, so only an operator
/// moves a FAILED partition): a recover while the cause is still there fails the partitions
/// again (the checks ran again) and says so; once it is fixed, a recover completes the resync
/// the failure interrupted. A recover of a topic without FAILED partitions changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recover_retries_failed_partitions_that_wait_for_an_operator() {
    let mut c = config();
    c.retry_policy = crate::domain::RetryPolicy { max_attempts: 0, ..crate::domain::RetryPolicy::DEFAULT };
    let rig = Rig::with_config(c).await;
    rig.mirroring("m", "steady", 1, 1).await;
    rig.source.add_topic("orders", 2, 3);
    rig.world.destination.add_topic("orders", 2, 2);
    rig.world.destination.set_fail_delete_records(true);
    assert_eq!(refusal(&rig.op("m", &["orders"], RESYNC).await), Some(ProblemKind::DestinationUnavailable));
    rig.all_in("m", "orders", S::Failed).await;
    let stored = latest_record(&rig.world, |r| match r {
        crate::store::StateRecord::PartitionState(e) if e.key.partition == 0 => e.value.filter(|v| v.topic == "orders"),
        _ => None,
    })
    .expect("the partition's record");
    assert_eq!((stored.state.as_str(), stored.next_retry_at), ("FAILED", None), "no automatic retry: {stored:?}");
    let e = rig.partition("m", "orders", 0).error.expect("an error");
    assert!(e.retryable && e.message.contains("cannot delete"), "{e:?}");

    // Still failing: the recover runs the deletion again and fails again, saying so.
    let deletes = rig.world.destination.delete_records_calls();
    let r = rig.op("m", &["orders"], LifecycleOp::Recover).await.expect("the call is answered");
    let p = r.results[0].error.as_ref().expect("the recover failed again");
    assert!(p.detail.starts_with("recover: ") && p.detail.contains("cannot delete"), "{p:?}");
    assert!(rig.world.destination.delete_records_calls() > deletes, "the recover deleted again");
    rig.all_in("m", "orders", S::Failed).await;
    assert!(rig.world.pipes.assigned("m").iter().all(|a| a.topic != "orders"), "nothing mirrored over the records");

    // Nothing to recover: no partition's record is written (the call itself is audited).
    let partition_writes = || {
        rig.world
            .state
            .records()
            .iter()
            .filter(|r| {
                matches!(
                    crate::store::decode(r.key.as_deref(), r.value.as_deref()),
                    Ok(crate::store::StateRecord::PartitionState(_))
                )
            })
            .count()
    };
    let writes = partition_writes();
    rig.op_ok("m", &["steady"], LifecycleOp::Recover).await;
    assert_eq!(partition_writes(), writes, "a recover without FAILED partitions wrote a partition's state");

    rig.world.destination.set_fail_delete_records(false);
    rig.op_ok("m", &["orders"], LifecycleOp::Recover).await;
    rig.caught_up("m", "orders").await;
    let d = rig.world.destination.partition("orders", 0).unwrap();
    assert_eq!((d.log_start, d.end), (2, 5), "the recover deleted them first");
    assert_eq!(rig.partition("m", "orders", 0).retry_count, 0, "the count starts again");
}

/// Partitions that failed because the source did not answer, with their next retry a minute
/// away, are retried as soon as the source answers again (`cluster_watch`), not a minute later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitions_failed_by_a_silent_source_are_retried_once_it_answers() {
    let mut c = config();
    c.retry_policy =
        crate::domain::RetryPolicy { backoff: crate::domain::Backoff::new(60_000, 300_000), max_attempts: 20 };
    let rig = Rig::with_config(c.clone()).await;
    rig.mirroring("m", "orders", 2, 3).await;
    // A restart re-checks the source of every MIRRORING partition; it does not answer.
    rig.source.set_unreachable(true);
    let rig = rig.restart_with(c).await;
    rig.all_in("m", "orders", S::Failed).await;
    let e = rig.partition("m", "orders", 0).error.expect("an error");
    assert_eq!(e.code, "SOURCE_UNREACHABLE", "{e:?}");
    rig.source.produce("orders", 0, 2);
    rig.source.set_unreachable(false);
    // Within the test's deadline (10 s), far before the retry at 30-60 s.
    rig.caught_up("m", "orders").await;
    let stored = latest_record(&rig.world, |r| match r {
        crate::store::StateRecord::PartitionState(e) if e.key.partition == 0 => e.value.filter(|v| v.topic == "orders"),
        _ => None,
    })
    .expect("the partition's record");
    assert_eq!((stored.state.as_str(), stored.retry_count), ("MIRRORING", 1), "an attempt like any other");
}

/// A recover leaves a FOREIGN_WRITE partition FAILED (it would mirror on top of the foreign
/// record) and refuses its topic, before changing anything; the other topics of the call recover.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recover_refuses_a_topic_with_a_foreign_write() {
    let rig = Rig::new().await;
    rig.mirroring("m", "orders", 2, 3).await;
    rig.mirroring("m", "refunds", 1, 3).await;
    let foreign = PartitionFault::ForeignWrite { expected_offset: 3, found_offset: 4 };
    rig.world.pipes.fail_partition("m", "orders", 1, foreign);
    let fault = PartitionFault::DestinationRejected { message: "fake: record too large".into() };
    rig.world.pipes.fail_partition("m", "refunds", 0, fault);
    rig.until("both FAILED", |s| {
        let m = s.mirror("m")?;
        let failed =
            |t: &str, p: usize| m.topic(t).and_then(|t| t.partitions.get(p)).is_some_and(|p| p.state == S::Failed);
        (failed("orders", 1) && failed("refunds", 0)).then_some(())
    })
    .await;
    let epoch = rig.partition("m", "orders", 1).state_epoch;
    let r = rig.op("m", &["orders", "refunds"], LifecycleOp::Recover).await.expect("answered");
    let orders = r.results.iter().find(|t| t.topic == "orders").expect("orders");
    let e = orders.error.as_ref().expect("orders refused");
    assert_eq!(e.kind, ProblemKind::IllegalTransition);
    assert!(e.detail.contains("partition 1") && e.detail.contains("FOREIGN_WRITE"), "{e:?}");
    assert!(r.results.iter().any(|t| t.topic == "refunds" && t.ok), "{r:?}");
    let p = rig.partition("m", "orders", 1);
    assert_eq!((p.state, p.state_epoch), (S::Failed, epoch), "untouched");
    assert_eq!(rig.partition("m", "orders", 0).state, S::Mirroring);
    rig.caught_up("m", "refunds").await;
}

/// A pause of a topic with a FAILED partition (failed while mirroring) pauses the others and says
/// so; the FAILED one stays FAILED, and its recover pauses it instead of mirroring again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_of_a_topic_with_a_failed_partition_pauses_the_others_and_redirects_its_retry() {
    let rig = Rig::new().await;
    rig.mirroring("m", "orders", 2, 3).await;
    let fault = PartitionFault::DestinationRejected { message: "fake: record too large".into() };
    rig.world.pipes.fail_partition("m", "orders", 1, fault);
    rig.until("partition 1 FAILED", |s| {
        let t = s.mirror("m")?.topic("orders")?;
        (t.partitions.get(1)?.state == S::Failed).then_some(())
    })
    .await;
    let r = rig.op("m", &["orders"], LifecycleOp::Pause).await.expect("answered");
    assert!(r.results.iter().all(|t| t.ok), "the topic is paused, not refused: {r:?}");
    let note = r.notes.get("orders").expect("the answer says what happened to the FAILED partition");
    assert!(note.contains("partition 1"), "{note}");
    rig.until("partition 0 PAUSED", |s| {
        (s.mirror("m")?.topic("orders")?.partitions.first()?.state == S::Paused).then_some(())
    })
    .await;
    assert_eq!(rig.partition("m", "orders", 1).state, S::Failed, "a pause does not hide a failure");
    // Its retry goes where the pause led: PAUSED, not MIRRORING.
    rig.op_ok("m", &["orders"], LifecycleOp::Recover).await;
    rig.all_in("m", "orders", S::Paused).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_failing_for_good_is_not_retried() {
    let rig = Rig::new().await;
    rig.mirroring("m", "orders", 1, 3).await;
    let fault = PartitionFault::SourceTruncated { message: "fake: unclean election".into() };
    rig.world.pipes.fail_partition("m", "orders", 0, fault);
    rig.all_in("m", "orders", S::Failed).await;
    let e = rig.partition("m", "orders", 0).error.expect("an error");
    assert_eq!((e.code.as_str(), e.retryable), ("SOURCE_TRUNCATED", false));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_the_data_path_does_not_confirm_fails_then_is_retried_to_paused() {
    let rig = Rig::new().await;
    rig.mirroring("m", "orders", 2, 3).await;
    rig.world.pipes.fail_unassigns("m", 1);
    let r = rig.op("m", &["orders"], LifecycleOp::Pause).await;
    assert!(refusal(&r).is_some(), "an unconfirmed pause is not reported as done: {r:?}");
    rig.all_in("m", "orders", S::Failed).await;
    assert!(rig.partition("m", "orders", 0).error.is_some_and(|e| e.retryable));

    // The retry unassigns again (confirmed this time) before recording PAUSED.
    rig.all_in("m", "orders", S::Paused).await;
    assert!(rig.world.pipes.held("m").is_empty(), "the data path no longer holds them");
    let unassigns: Vec<bool> = rig
        .world
        .pipes
        .received("m")
        .into_iter()
        .filter_map(|r| match r {
            Received::Unassign { ok, .. } => Some(ok),
            _ => None,
        })
        .collect();
    assert_eq!(unassigns.first(), Some(&false));
    assert_eq!(unassigns.last(), Some(&true));

    rig.source.produce("orders", 0, 1);
    rig.op_ok("m", &["orders"], LifecycleOp::Resume).await;
    rig.caught_up("m", "orders").await;
    assert_eq!(rig.destination_end("orders", 0), 4, "resumed from the committed position, nothing twice");
}

/// Lag read every 50 ms and data paths closed after 300 ms with nothing to copy.
fn idle_config() -> EngineConfig {
    let mut c = config();
    c.lag_refresh_interval = Duration::from_millis(50);
    c.close_idle_data_paths_after = Some(Duration::from_millis(300));
    c
}

/// Every partition of `topic` is MIRRORING with its data path closed as idle.
async fn all_idle(rig: &Rig, mirror: &str, topic: &str) {
    rig.until(&format!("{topic} all idle"), |s| {
        let t = s.mirror(mirror)?.topic(topic)?;
        t.partitions.iter().all(|p| p.state == S::Mirroring && p.idle).then_some(())
    })
    .await;
}

/// A data path whose partitions have had nothing to copy is closed. Records arriving later wake
/// only their partitions, which copy them once; pause, resume and failover work on idle ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_data_paths_close_and_new_records_wake_only_their_partitions() {
    let rig = Rig::with_config(idle_config()).await;
    rig.mirroring("m", "orders", 4, 3).await;
    all_idle(&rig, "m", "orders").await;
    assert_eq!(rig.world.pipes.slots("m"), Vec::<i32>::new(), "no data path is left open");

    let handed_before = rig.world.pipes.assigned("m").len();
    rig.source.produce("orders", 2, 4);
    rig.caught_up("m", "orders").await;
    let handed: Vec<i32> = rig.world.pipes.assigned("m")[handed_before..].iter().map(|a| a.partition).collect();
    assert_eq!(handed, vec![2], "only the partition with records is woken");
    let ends: Vec<i64> = (0..4).map(|p| rig.destination_end("orders", p)).collect();
    assert_eq!(ends, vec![3, 3, 7, 3], "the new records copied once, from the committed position");

    // Idle again; a pause, records while paused and a resume copy each record once.
    all_idle(&rig, "m", "orders").await;
    rig.op_ok("m", &["orders"], LifecycleOp::Pause).await;
    rig.all_in("m", "orders", S::Paused).await;
    rig.source.produce("orders", 0, 2);
    rig.op_ok("m", &["orders"], LifecycleOp::Resume).await;
    rig.caught_up("m", "orders").await;
    assert_eq!(rig.destination_end("orders", 0), 5);

    // A failover of idle partitions stops each at its destination end.
    all_idle(&rig, "m", "orders").await;
    rig.op_ok("m", &["orders"], LifecycleOp::Stop).await;
    rig.all_in("m", "orders", S::Stopped).await;
    for p in 0..4 {
        let stop = rig.partition("m", "orders", p).destination_stop_offset;
        assert_eq!(stop, Some(rig.destination_end("orders", p)), "partition {p}");
    }
}

/// Records into the 4-partition topic "busy" of mirror "m", one every 10 ms, round the
/// partitions, so its slots' data paths never go wholly quiet.
struct BusyLoad {
    stop: Arc<std::sync::atomic::AtomicBool>,
    producing: tokio::task::JoinHandle<()>,
}

impl BusyLoad {
    fn start(rig: &Rig) -> Self {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let producing = {
            let (source, stop) = (Arc::clone(&rig.source), Arc::clone(&stop));
            tokio::spawn(async move {
                let mut i = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    source.produce("busy", i % 4, 1);
                    i += 1;
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            })
        };
        BusyLoad { stop, producing }
    }

    /// Once the quiet partitions are idle: the busy ones are not, the data paths hold only them,
    /// and after the load stops every busy record was copied once across the rebuilds.
    async fn finish_kept_apart(self, rig: &Rig) {
        let busy = rig.engine.snapshot().mirror("m").unwrap().topic("busy").unwrap().partitions.iter().any(|p| p.idle);
        assert!(!busy, "busy partitions are never idle");
        let held = rig.world.pipes.held("m");
        assert!(held.iter().all(|(t, _)| t == "busy"), "the data paths hold the busy partitions only: {held:?}");
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.producing.await.unwrap();
        rig.caught_up("m", "busy").await;
        for p in 0..4 {
            let end = rig.source.partitions("busy")[p as usize].end;
            assert_eq!(rig.destination_end("busy", p), end, "busy-{p}: every record once across the rebuild");
        }
    }
}

/// A data path holding many quiet partitions beside busy ones is rebuilt with the busy ones only:
/// the quiet ones show idle, the busy ones copy every record once across the rebuild, and a quiet
/// one with records later is woken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_path_with_many_quiet_partitions_is_rebuilt_with_its_busy_ones() {
    let rig = Rig::with_config(idle_config()).await;
    rig.mirroring("m", "quiet", 800, 1).await;
    rig.mirroring("m", "busy", 4, 1).await;
    // The data paths' commit events reach the coordinator up to 40 ms late, after the replies
    // to later commands: a rebuild that closed a data path and restarted its busy partitions
    // from the positions it had heard of (without first releasing them and applying the final
    // positions) copied their last records a second time.
    rig.world.pipes.delay_commit_events("m", Duration::from_millis(40));
    let load = BusyLoad::start(&rig);
    all_idle(&rig, "m", "quiet").await;
    load.finish_kept_apart(&rig).await;
    rig.source.produce("quiet", 7, 2);
    rig.caught_up("m", "quiet").await;
    assert_eq!(rig.destination_end("quiet", 7), 3);
    assert_eq!(rig.destination_end("quiet", 8), 1);
}

/// Many small quiet topics beside a busy one: fewer quiet partitions per data path than a
/// rebuild needs by count (about 50 of 4 slots), but their topics are what the data paths'
/// clients keep state for, so the data paths are rebuilt with the busy partitions only and the
/// quiet ones show idle while records keep flowing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_small_quiet_topics_beside_a_busy_one_go_idle() {
    let rig = Rig::with_config(idle_config()).await;
    rig.mirroring("m", "busy", 4, 1).await;
    let load = BusyLoad::start(&rig);
    let small: Vec<String> = (0..20).map(|i| format!("small-{i:02}")).collect();
    for t in &small {
        rig.source.add_topic(t, 10, 1);
    }
    let names: Vec<&str> = small.iter().map(String::as_str).collect();
    rig.op_ok("m", &names, START).await;
    for t in &small {
        all_idle(&rig, "m", t).await;
    }
    load.finish_kept_apart(&rig).await;
    for t in &small {
        for p in 0..10 {
            assert_eq!(rig.destination_end(t, p), 1, "{t}-{p}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_that_cannot_be_recorded_fails_then_is_retried_to_paused() {
    let rig = Rig::new().await;
    rig.mirroring("m", "orders", 1, 3).await;
    rig.world.state.set_mode(WriteMode::Unavailable);
    let r = rig.op("m", &["orders"], LifecycleOp::Pause).await;
    assert!(refusal(&r).is_some(), "{r:?}");
    rig.all_in("m", "orders", S::Failed).await;
    let e = rig.partition("m", "orders", 0).error.expect("an error");
    assert_eq!((e.code.as_str(), e.retryable), ("STATE_STORE_UNAVAILABLE", true));

    rig.world.state.set_mode(WriteMode::Accept);
    rig.all_in("m", "orders", S::Paused).await;
    assert!(rig.world.pipes.held("m").is_empty());
}

/// A writer left behind (a data path of an earlier incarnation whose producer was re-created
/// after a timeout) commits records and their position after this engine last heard of them;
/// then this engine's data path is fenced. The engine restarts it from the committed state it
/// reads back, not from the older position it held: nothing is copied twice. It reads back only
/// the slot's state partition and the mirror's, not the whole state topic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_path_restarted_after_a_fence_resumes_from_positions_another_writer_committed() {
    let rig = Rig::new().await;
    rig.create("m").await;
    rig.source.add_topic("orders", 1, 5);
    rig.op_ok("m", &["orders"], START).await;
    rig.caught_up("m", "orders").await;
    assert_eq!(rig.destination_end("orders", 0), 5);
    // The source stops answering this engine's data path; meanwhile the writer left behind
    // copies three new records and commits them with their position.
    rig.source.set_unreachable(true);
    rig.source.produce("orders", 0, 3);
    rig.world.destination.produce("orders", 0, 3);
    let topic_ids = Arc::new(RwLock::new(HashMap::from([(
        "orders".to_string(),
        rig.source.topic_id("orders").expect("the topic's id"),
    )])));
    let encode = crate::engine::persist::progress_encoder("m".into(), topic_ids, Arc::default(), 4);
    let progress = PartitionProgress {
        topic: "orders".into(),
        partition: 0,
        next_source_offset: 8,
        source_leader_epoch: Some(0),
        destination_end_offset: 8,
        last_record_timestamp: None,
        records: 3,
        bytes: 30,
        runs: vec![Run::new(5, 5, 3)],
    };
    rig.world.state.append_foreign(&encode(&progress));
    let assigns = rig.world.pipes.assigned("m").len();
    rig.world.pipes.fence("m");
    rig.until("the partition handed to a new data path", |_| {
        (rig.world.pipes.assigned("m").len() > assigns).then_some(())
    })
    .await;
    let spec = rig.world.pipes.assigned("m").last().cloned().expect("an assign");
    assert_eq!((spec.next_source_offset, spec.destination_end_offset), (Some(8), 8), "{spec:?}");
    let topic_id = rig.source.topic_id("orders").expect("the topic's id");
    let wanted = BTreeSet::from([slots::slot_of_partition("m", &topic_id, 0, 4), slots::mirror_slot("m", 4)]);
    let reads = rig.world.state.reads();
    assert_eq!(reads.last(), Some(&Some(wanted.into_iter().collect())), "{reads:?}");
    rig.source.set_unreachable(false);
    rig.caught_up("m", "orders").await;
    assert_eq!(rig.destination_end("orders", 0), 8, "copied once");
}

/// A start's data paths start before its state write and preparation, not after them: their
/// clients' start-up (a consumer, a transactional producer, `init_transactions`: 100-300 ms on
/// Kafka) overlaps the preparation's source reads, so a first start (a failback in particular)
/// copies that much sooner. Here every source call takes 300 ms: the start still has its
/// preparation's reads ahead of it when its data paths run (started after the preparation, they
/// would run just before the start ends).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_s_data_paths_start_before_its_preparation() {
    let rig = Rig::new().await;
    rig.create("m").await;
    rig.source.add_topic("orders", 2, 3);
    let delay = Duration::from_millis(300);
    rig.source.set_delay(delay);
    let start = {
        let engine = rig.engine.clone();
        let names = vec!["orders".to_string()];
        tokio::spawn(async move { engine.lifecycle("m", TopicSelector::Names(names), START, false, actor()).await })
    };
    assert!(polled(|| rig.world.pipes.started("m") > 0).await, "no data path started");
    let spawned = tokio::time::Instant::now();
    let r = start.await.expect("the start's task");
    assert_eq!(refusal(&r), None, "{r:?}");
    let ahead = spawned.elapsed();
    assert!(ahead >= delay * 8 / 10, "the data paths started {ahead:?} before the start ended: after its preparation");
    rig.source.set_delay(Duration::ZERO);
    rig.caught_up("m", "orders").await;
}

/// A start whose partitions were recorded PREPARING but whose MIRRORING record the state topic
/// did not take (it stopped answering while the start positions were read): the partitions go
/// FAILED and are retried to MIRRORING once it answers, instead of showing MIRRORING with no data
/// path holding them (the stored record still PREPARING, nothing to move them on).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_whose_last_step_cannot_be_recorded_fails_then_is_retried_to_mirroring() {
    let rig = Rig::new().await;
    rig.create("m").await;
    rig.source.add_topic("orders", 2, 3);
    // The source answers slowly: the start is still reading its log starts (the last read before
    // the MIRRORING record) when the state topic stops taking writes.
    rig.source.set_delay(Duration::from_millis(500));
    let start = {
        let engine = rig.engine.clone();
        let names = vec!["orders".to_string()];
        tokio::spawn(async move { engine.lifecycle("m", TopicSelector::Names(names), START, false, actor()).await })
    };
    let preparing = |r: crate::store::StateRecord| match r {
        crate::store::StateRecord::PartitionState(e) => {
            e.value.filter(|v| v.topic == "orders" && v.state == "PREPARING")
        }
        _ => None,
    };
    assert!(polled(|| latest_record(&rig.world, preparing).is_some()).await, "the start recorded nothing PREPARING");
    rig.world.state.set_mode(WriteMode::Unavailable);
    let r = start.await.expect("the start's task");
    assert!(refusal(&r).is_some(), "{r:?}");
    rig.all_in("m", "orders", S::Failed).await;
    let e = rig.partition("m", "orders", 0).error.expect("an error");
    assert_eq!((e.code.as_str(), e.retryable), ("STATE_STORE_UNAVAILABLE", true));

    rig.world.state.set_mode(WriteMode::Accept);
    rig.caught_up("m", "orders").await;
}

/// A pause whose last record (PAUSED) the state topic did not take: the partition is paused, and
/// the stored record, PAUSING until then, catches up once the state topic takes writes again,
/// with no further call (other instances and a restart read the stored one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_the_state_topic_did_not_take_is_stored_once_it_does() {
    let rig = Rig::new().await;
    rig.mirroring("m", "orders", 1, 3).await;
    // The PAUSING record is taken, the PAUSED one after the release is not.
    rig.world.state.set_mode(WriteMode::AcceptThenUnavailable(1));
    let _ = rig.op("m", &["orders"], LifecycleOp::Pause).await;
    rig.all_in("m", "orders", S::Paused).await;
    let stored = || {
        latest_record(&rig.world, |r| match r {
            crate::store::StateRecord::PartitionState(e) => e.value.filter(|v| v.topic == "orders"),
            _ => None,
        })
        .map(|v| v.state)
    };
    assert_eq!(stored().as_deref(), Some("PAUSING"), "the PAUSED record was not taken");
    rig.world.state.set_mode(WriteMode::Accept);
    polled(|| stored().as_deref() == Some("PAUSED")).await;
    assert_eq!(stored().as_deref(), Some("PAUSED"), "the stored record did not become PAUSED");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_path_reporting_retries_shows_it() {
    let rig = Rig::new().await;
    rig.mirroring("m", "orders", 1, 1).await;
    rig.world.pipes.retrying("m", 2, "fake: the destination is busy");
    rig.until("retrying shown", |s| data_path(s, "m").contains("the destination is busy").then_some(())).await;
    // The next commit shows it running again.
    rig.source.produce("orders", 0, 1);
    rig.caught_up("m", "orders").await;
    rig.until("running again", |s| (!data_path(s, "m").contains("busy")).then_some(())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_path_whose_producer_fails_is_restarted_from_committed_positions() {
    let rig = Rig::new().await;
    rig.mirroring("m", "orders", 2, 3).await;
    let slots = rig.world.pipes.slots("m").len() as u32;
    assert_eq!(rig.world.pipes.started("m"), slots, "one data path per slot");
    let assigned_before = rig.world.pipes.assigned("m").len();
    rig.world.pipes.fence("m");
    rig.source.produce("orders", 0, 2);
    rig.caught_up("m", "orders").await;
    assert_eq!(rig.world.pipes.started("m"), 2 * slots, "a new data path per slot");
    // Only partition 0 has new records: partition 1's new data path may not have taken its
    // assign yet when partition 0 is caught up.
    polled(|| rig.world.pipes.assigned("m").len() >= assigned_before + 2).await;
    let resumed = &rig.world.pipes.assigned("m")[assigned_before..];
    assert_eq!(resumed.len(), 2, "{resumed:?}");
    assert!(resumed.iter().all(|s| s.next_source_offset == Some(3)), "{resumed:?}");
    assert_eq!(rig.destination_end("orders", 0), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_path_that_cannot_start_is_started_again() {
    let rig = Rig::new().await;
    rig.source.add_topic("orders", 1, 2);
    rig.create("m").await;
    // A slot's data path starts with the first partition assigned to it.
    assert_eq!(rig.world.pipes.started("m"), 0, "a mirror without partitions has no data path");
    rig.until("shown idle", |s| data_path(s, "m").contains("\"idle\"").then_some(())).await;
    // Three failed starts in a row (0.5 + 1 + 2 s of backoff): long enough for a loaded machine
    // to see the failure in a snapshot.
    rig.world.pipes.fail_next_starts("fake: destination refused the producer", 3);
    rig.op_ok("m", &["orders"], START).await;
    rig.until("the failure shown", |s| data_path(s, "m").contains("refused the producer").then_some(())).await;
    // The retry (after its backoff) starts a data path that works, and the partition mirrors.
    rig.caught_up("m", "orders").await;
    rig.until("restarted", |s| (!data_path(s, "m").contains("refused the producer")).then_some(())).await;
    assert_eq!(rig.world.pipes.started("m"), 4);
}

// ----- fencing and restore -------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_state_writer_makes_the_instance_read_only() {
    let rig = Rig::new().await;
    rig.mirroring("m", "orders", 1, 2).await;
    rig.world.state.fence_all();
    let written = rig.world.state.records().len();

    assert_eq!(refusal(&rig.op("m", &["orders"], LifecycleOp::Pause).await), Some(ProblemKind::Fenced));
    rig.until("fenced shown", |s| data_path(s, "m").contains("another kmirror instance").then_some(())).await;
    // From now on every change is refused without trying.
    assert_eq!(refusal(&rig.op("m", &["orders"], LifecycleOp::Stop).await), Some(ProblemKind::Fenced));
    assert_eq!(rig.engine.create_mirror(spec("n", SOURCE), actor()).await.unwrap_err().kind(), ProblemKind::Fenced);
    assert_eq!(rig.engine.delete_mirror("m", actor()).await.unwrap_err().kind(), ProblemKind::Fenced);
    assert_eq!(rig.world.state.records().len(), written, "nothing written after the fence");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_instance_takes_over_and_fences_the_first() {
    let first = Rig::new().await;
    first.mirroring("m", "orders", 1, 2).await;
    let (second, _join) = start_on(&first.world).await;
    until(&second, "the second instance mirrors", |s| {
        let p = s.mirror("m")?.topic("orders")?.partitions.first()?.clone();
        (p.state == S::Mirroring && p.mirrored_source_offset == Some(2)).then_some(())
    })
    .await;

    // Only the second instance's data path writes from now on.
    first.source.produce("orders", 0, 3);
    until(&second, "the second instance caught up", |s| {
        let p = s.mirror("m")?.topic("orders")?.partitions.first()?.clone();
        (p.mirrored_source_offset == Some(5)).then_some(())
    })
    .await;
    assert_eq!(first.destination_end("orders", 0), 5, "written once");
    assert_eq!(refusal(&first.op("m", &["orders"], LifecycleOp::Pause).await), Some(ProblemKind::Fenced));
    second.shutdown().await;
}

/// A start-up fences the earlier layout's transactional ids of every mirror together, not one
/// after another (in group mode it happens before the instance joins the slot group, and a
/// restart that took longer than the session timeout would move the instance's slots), but no
/// more than `LEGACY_FENCES_AT_ONCE` at a time.
#[tokio::test]
async fn a_start_up_fences_every_mirrors_earlier_layout_together_within_a_bound() {
    let rig = Rig::new().await;
    for i in 0..20 {
        rig.create(&format!("m{i}")).await;
    }
    *lock_delay(&rig.world) = Duration::from_millis(200);
    let (_, before) = rig.world.fences.max_in_flight_and_calls();
    let rig = rig.restart().await;
    let (max, after) = rig.world.fences.max_in_flight_and_calls();
    // Two ids per mirror (by instance id and by cluster name).
    assert_eq!(after - before, 40, "every earlier-layout id of the twenty mirrors is fenced");
    assert_eq!(max, LEGACY_FENCES_AT_ONCE, "as many fences in flight together as allowed, no more");
    rig.engine.shutdown().await;
}

fn lock_delay(world: &FakeWorld) -> std::sync::MutexGuard<'_, Duration> {
    world.fences.delay.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_restores_every_state_and_resumes_from_committed_positions() {
    let rig = Rig::new().await;
    rig.mirroring("m", "live", 2, 4).await;
    rig.mirroring("m", "held", 1, 3).await;
    rig.mirroring("m", "done", 1, 2).await;
    rig.op_ok("m", &["held"], LifecycleOp::Pause).await;
    rig.op_ok("m", &["done"], LifecycleOp::Stop).await;
    rig.all_in("m", "held", S::Paused).await;
    rig.all_in("m", "done", S::Stopped).await;
    let stop_offset = rig.partition("m", "done", 0).destination_stop_offset;

    let assigned_before = rig.world.pipes.assigned("m").len();
    let rig = rig.restart().await;
    rig.caught_up("m", "live").await;
    rig.all_in("m", "held", S::Paused).await;
    rig.all_in("m", "done", S::Stopped).await;
    assert_eq!(rig.partition("m", "done", 0).destination_stop_offset, stop_offset);
    assert_eq!(rig.partition("m", "held", 0).mirrored_source_offset, Some(3));

    // Only the MIRRORING partitions are handed to the new data path, from where they were. (The
    // snapshot can show them caught up before the assign: their positions are loaded.)
    polled(|| rig.world.pipes.assigned("m").len() >= assigned_before + 2).await;
    let resumed = &rig.world.pipes.assigned("m")[assigned_before..];
    assert_eq!(resumed.len(), 2, "{resumed:?}");
    assert!(
        resumed.iter().all(|s| s.topic == "live" && s.next_source_offset == Some(4) && s.destination_next_offset == 4),
        "{resumed:?}"
    );
    rig.source.produce("live", 1, 1);
    rig.caught_up("m", "live").await;
    assert_eq!((rig.destination_end("live", 0), rig.destination_end("live", 1)), (4, 5), "nothing copied twice");
    rig.op_ok("m", &["held"], LifecycleOp::Resume).await;
    rig.caught_up("m", "held").await;
}

// ----- source changes ------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_source_connection_replaces_the_data_path_without_loss_or_duplicates() {
    let rig = Rig::new().await;
    rig.mirroring("m", "orders", 1, 3).await;
    rig.world.alias("source-b:9092", &rig.source);
    let update = MirrorUpdate {
        source: Some(SourceSpec { bootstrap_servers: "source-b:9092".into(), properties: BTreeMap::new() }),
        ..MirrorUpdate::default()
    };
    let assigned_before = rig.world.pipes.assigned("m").len();
    rig.engine.update_mirror("m", update, actor()).await.expect("update");
    assert_eq!(rig.world.pipes.started("m"), 2);
    rig.source.produce("orders", 0, 2);
    rig.caught_up("m", "orders").await;
    let resumed = &rig.world.pipes.assigned("m")[assigned_before..];
    assert_eq!(resumed.iter().map(|s| s.next_source_offset).collect::<Vec<_>>(), vec![Some(3)]);
    assert_eq!(rig.destination_end("orders", 0), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn source_topic_changes_found_by_a_refresh() {
    let rig = Rig::new().await;
    rig.mirroring("m", "grows", 1, 2).await;
    rig.mirroring("m", "reborn", 1, 2).await;
    // New partitions are created on the destination and mirrored.
    rig.source.grow("grows", 3);
    rig.source.produce("grows", 2, 4);
    // A topic deleted and created again is another topic: its partitions fail for good.
    rig.source.delete_topic("reborn");
    rig.source.add_topic("reborn", 1, 1);
    rig.engine.refresh_now("m").await.unwrap();
    rig.caught_up("m", "grows").await;
    assert_eq!(rig.world.destination.partitions("grows").len(), 3);
    assert_eq!(rig.destination_end("grows", 2), 4);
    rig.all_in("m", "reborn", S::Failed).await;
    let e = rig.partition("m", "reborn", 0).error.expect("an error");
    assert_eq!((e.code.as_str(), e.retryable), ("SOURCE_TOPIC_RECREATED", false));
}

/// New source partitions found while the state topic takes no writes: they go FAILED and are
/// retried to MIRRORING once it does. (Left PREPARING in memory only, nothing prepared them: the
/// next refresh finds no new partitions.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_partitions_found_while_the_state_topic_is_unavailable_are_retried() {
    let rig = Rig::new().await;
    rig.mirroring("m", "grows", 1, 2).await;
    rig.source.grow("grows", 2);
    rig.source.produce("grows", 1, 3);
    rig.world.state.set_mode(WriteMode::Unavailable);
    let _ = rig.engine.refresh_now("m").await;
    let failed = rig
        .until("the new partition FAILED", |s| {
            let p = s.mirror("m")?.topic("grows")?.partitions.iter().find(|p| p.partition == 1)?.clone();
            (p.state == S::Failed).then_some(p)
        })
        .await;
    let e = failed.error.expect("an error");
    assert_eq!((e.code.as_str(), e.retryable), ("STATE_STORE_UNAVAILABLE", true));
    rig.world.state.set_mode(WriteMode::Accept);
    rig.caught_up("m", "grows").await;
    assert_eq!(rig.destination_end("grows", 1), 3);
}

// ----- resync with quarantine (issue 18 item 3) ----------------------------------------------

const QUARANTINE: LifecycleOp = LifecycleOp::Start { truncation: Truncation::Resync { quarantine: true } };

impl Rig {
    async fn preview(&self, mirror: &str, topics: &[&str], op: LifecycleOp) -> Result<OpResult, EngineError> {
        let names = topics.iter().map(|t| t.to_string()).collect();
        self.engine.lifecycle(mirror, TopicSelector::Names(names), op, true, actor()).await
    }

    /// A mirror whose one-partition topic `orders` mirrored 4 records, was failed over, and got
    /// 2 local writes on the destination (offsets 4 and 5).
    async fn diverged_after_failover(&self) {
        self.mirroring("m", "orders", 1, 4).await;
        self.op_ok("m", &["orders"], LifecycleOp::Stop).await;
        self.all_in("m", "orders", S::Stopped).await;
        self.world.destination.produce("orders", 0, 2);
    }
}

fn quarantined(r: &Result<OpResult, EngineError>, topic: &str) -> Vec<crate::domain::quarantine::QuarantinedPartition> {
    r.as_ref().expect("accepted").quarantined.get(topic).cloned().unwrap_or_else(|| panic!("no quarantine: {r:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_with_quarantine_copies_the_local_writes_first_and_the_preview_says_so() {
    use crate::domain::quarantine::QuarantinedPartition;
    let rig = Rig::new().await;
    rig.diverged_after_failover().await;
    let id = rig.world.destination.topic_id("orders").expect("topic id");

    let preview = rig.preview("m", &["orders"], QUARANTINE).await;
    assert_eq!(refusal(&preview), None, "{preview:?}");
    let expected =
        vec![QuarantinedPartition { partition: 0, records: 2, already_quarantined: 0, offsets: Some((4, 5)) }];
    assert_eq!(quarantined(&preview, "orders"), expected);
    assert!(rig.world.quarantine.copied("orders.kmirror-diverged").is_empty(), "a preview copies nothing");
    assert_eq!(rig.partition("m", "orders", 0).state, S::Stopped, "a preview changes nothing");

    let run = rig.op("m", &["orders"], QUARANTINE).await;
    assert_eq!(refusal(&run), None, "{run:?}");
    assert_eq!(quarantined(&run, "orders"), expected, "the run did what the preview said");
    assert_eq!(rig.world.quarantine.copied("orders.kmirror-diverged"), vec![(id.clone(), 0, 4), (id, 0, 5)]);
    assert_eq!(rig.world.destination.partitions("orders.kmirror-diverged").len(), 1, "same partition count");
    rig.caught_up("m", "orders").await;
    let d = rig.world.destination.partition("orders", 0).unwrap();
    assert_eq!((d.log_start, d.end), (6, 10), "then the resync ran as without quarantine");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quarantine_that_fails_or_finds_foreign_records_leaves_the_topic_untouched() {
    let rig = Rig::new().await;
    rig.diverged_after_failover().await;
    let untouched = |rig: &Rig| {
        let d = rig.world.destination.partition("orders", 0).unwrap();
        assert_eq!((d.log_start, d.end), (0, 6), "nothing deleted");
        assert_eq!(rig.partition("m", "orders", 0).state, S::Stopped, "still STOPPED");
        assert!(rig.world.pipes.assigned("m").len() == 1, "nothing assigned since the first start");
    };

    rig.world.quarantine.fail_next(1);
    let r = rig.op("m", &["orders"], QUARANTINE).await;
    assert_eq!(refusal(&r), Some(ProblemKind::DestinationUnavailable), "{r:?}");
    assert!(format!("{r:?}").contains("nothing was deleted"), "{r:?}");
    untouched(&rig);

    rig.world.quarantine.add_foreign("orders.kmirror-diverged");
    assert_eq!(refusal(&rig.preview("m", &["orders"], QUARANTINE).await), Some(ProblemKind::QuarantineConflict));
    let r = rig.op("m", &["orders"], QUARANTINE).await;
    assert_eq!(refusal(&r), Some(ProblemKind::QuarantineConflict), "{r:?}");
    untouched(&rig);
    // A plain resync is still the operator's choice.
    rig.op_ok("m", &["orders"], RESYNC).await;
    rig.caught_up("m", "orders").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resync_with_quarantine_of_a_topic_without_lineage_keeps_every_record_it_deletes() {
    let rig = Rig::new().await;
    rig.create("m").await;
    rig.source.add_topic("full", 2, 3);
    rig.world.destination.add_topic("full", 2, 2);
    rig.world.destination.produce("full", 1, 1);
    let preview = rig.preview("m", &["full"], QUARANTINE).await;
    let q = quarantined(&preview, "full");
    assert_eq!(
        q.iter().map(|p| (p.partition, p.records, p.offsets)).collect::<Vec<_>>(),
        [(0, 2, Some((0, 1))), (1, 3, Some((0, 2)))]
    );
    let run = rig.op("m", &["full"], QUARANTINE).await;
    assert_eq!(quarantined(&run, "full"), q);
    let copied = rig.world.quarantine.copied("full.kmirror-diverged");
    assert_eq!(copied.iter().map(|(_, p, o)| (*p, *o)).collect::<Vec<_>>(), [(0, 0), (0, 1), (1, 0), (1, 1), (1, 2)]);
    assert_eq!(rig.world.destination.partition("full.kmirror-diverged", 1).unwrap().end, 3, "same partition");
    rig.caught_up("m", "full").await;

    // A topic the destination does not have yet: nothing to keep, a normal first start.
    rig.source.add_topic("fresh", 1, 2);
    let run = rig.op("m", &["fresh"], QUARANTINE).await;
    assert_eq!(quarantined(&run, "fresh"), vec![]);
    assert!(rig.world.destination.partitions("fresh.kmirror-diverged").is_empty(), "no quarantine topic");
    rig.caught_up("m", "fresh").await;
}

/// An engine in a slot group on fake clusters: the test plays the group coordinator (`group`)
/// and the state tail (`tail`), with a mirror "m" on [`SOURCE`].
struct GroupRig {
    rig: Rig,
    group: mpsc::UnboundedSender<crate::kafka::membership::MembershipEvent>,
    tail: mpsc::UnboundedSender<crate::kafka::state_log::TailBatch>,
    /// How many of the engine's own state writes the tail has brought back so far.
    echoed: std::sync::atomic::AtomicUsize,
}

/// The latest record written to the fake state topic that `f` picks.
fn latest_record<T>(world: &FakeWorld, f: impl Fn(crate::store::StateRecord) -> Option<T>) -> Option<T> {
    world
        .state
        .records()
        .iter()
        .rev()
        .find_map(|r| crate::store::decode(r.key.as_deref(), r.value.as_deref()).ok().and_then(&f))
}

/// Safety at start: an instance's heartbeat is in the state topic before it joins the slot group,
/// so an incompatible instance started after it owns slots sees it live and refuses (CI once
/// started one in the moment between the join and the first heartbeat, and it ran).
#[tokio::test]
async fn an_instance_announces_itself_before_it_joins_the_slot_group() {
    let world = FakeWorld::new();
    let mut c = config();
    c.ownership = Ownership::Group { session_timeout: Duration::from_secs(10), advertised_url: None };
    world.destination.add_topic(&c.state_topic, c.state_partitions, 0);
    let ports: Arc<dyn Ports> = Arc::clone(&world) as Arc<dyn Ports>;
    let (engine, join) = start_with_ports(c.clone(), ports).await.expect("the engine starts in a slot group");
    let before_join = world.written_at_join().expect("the engine joined the slot group");
    let announced = before_join.iter().find_map(|r| match crate::store::decode(r.key.as_deref(), r.value.as_deref()) {
        Ok(crate::store::StateRecord::Instance(e)) => e.value.filter(|v| v.instance == c.instance_id),
        _ => None,
    });
    let announced = announced.expect("its heartbeat was written before it joined");
    assert!(announced.slots.is_empty() && announced.cluster_name == c.cluster_name, "{announced:?}");
    engine.shutdown().await;
    let _ = join.await;
}

/// Another instance of the [`GroupRig`]'s cluster.
const OTHER_INSTANCE: &str = "kmirror-other";

impl GroupRig {
    /// `owned`: the slots (of 4) assigned at once; `slot0_records`: records the previous owner of
    /// slot 0 committed to its state partition (a takeover of slot 0 waits for the tail to read
    /// them).
    async fn new(owned: &[i32], slot0_records: i64) -> GroupRig {
        GroupRig::with_session(owned, slot0_records, Duration::from_secs(10)).await
    }

    /// [`GroupRig::new`] with the slot group's session timeout `session`.
    async fn with_session(owned: &[i32], slot0_records: i64, session: Duration) -> GroupRig {
        use crate::kafka::membership::MembershipEvent;
        let world = FakeWorld::new();
        let source = world.add_source(SOURCE, SOURCE_ID);
        let mut c = config();
        c.ownership = Ownership::Group { session_timeout: session, advertised_url: None };
        world.destination.add_topic(&c.state_topic, c.state_partitions, 0);
        world.destination.produce(&c.state_topic, 0, slot0_records);
        let ports: Arc<dyn Ports> = Arc::clone(&world) as Arc<dyn Ports>;
        let (engine, join) = start_with_ports(c, ports).await.expect("the engine starts in a slot group");
        let group = world.group_events().expect("the engine joined the slot group");
        let tail = world.tail_batches().expect("the engine follows the state topic");
        let rig = Rig { world, source, engine, join: Some(join) };
        group.send(MembershipEvent::Assigned(owned.to_vec())).unwrap();
        rig.until("the first slots owned", |s| {
            s.cluster.instances.iter().any(|i| i.this && i.slots == owned).then_some(())
        })
        .await;
        rig.create("m").await;
        GroupRig { rig, group, tail, echoed: std::sync::atomic::AtomicUsize::new(0) }
    }

    /// The tail brings back what the engine wrote since the last call (the real one reads every
    /// instance's writes, its own included), after `first` (other instances' records).
    fn echo_own_writes_after(&self, first: Vec<crate::kafka::state_log::LogRecord>) {
        use crate::kafka::state_log::TailBatch;
        let records = self.rig.world.state.records();
        let from = self.echoed.swap(records.len(), std::sync::atomic::Ordering::SeqCst);
        let records = first.into_iter().chain(records.into_iter().skip(from)).collect();
        self.tail.send(TailBatch { records, positions: Vec::new() }).unwrap();
    }

    fn echo_own_writes(&self) {
        self.echo_own_writes_after(Vec::new());
    }

    /// The latest state record this engine wrote for `topic`'s `partition`.
    fn own_record(&self, topic: &str, partition: i32) -> crate::store::PartitionStateValue {
        latest_record(&self.rig.world, |r| match r {
            crate::store::StateRecord::PartitionState(e) if e.key.partition == partition => {
                e.value.filter(|v| v.topic == topic)
            }
            _ => None,
        })
        .expect("the partition's record")
    }

    /// A record another instance wrote for `v`'s partition: `v` with `epoch`, written by
    /// [`OTHER_INSTANCE`].
    fn other_record(&self, mut v: crate::store::PartitionStateValue, epoch: u64) -> crate::kafka::state_log::LogRecord {
        use crate::kafka::state_log::LogRecord;
        v.state_epoch = epoch;
        v.updated_at += 1;
        v.written_by = Some(OTHER_INSTANCE.into());
        v.command = None;
        let record = crate::store::StateRecord::PartitionState(crate::store::Entry::put(v.key(), v));
        let e = record.encode(std::num::NonZeroU32::new(4).unwrap());
        LogRecord { partition: e.partition, offset: 1_000_000, key: Some(e.key), value: e.value }
    }

    /// The tail brings another instance's heartbeat, written now, owning `slots`.
    fn heartbeat_of(&self, instance: &str, slots: &[i32]) {
        use crate::kafka::state_log::{LogRecord, TailBatch};
        let t = crate::clock::now();
        let other = crate::engine::InstanceSnapshot {
            id: instance.into(),
            advertised_url: None,
            version: env!("CARGO_PKG_VERSION").into(),
            slots: slots.to_vec(),
            partitions: 0,
            last_heartbeat: t,
            started_at: t,
            this: false,
        };
        let w = crate::engine::persist::instance(&config().cluster_name, &other, 4);
        let record = LogRecord { partition: w.partition, offset: 1_000_000, key: Some(w.key), value: w.value };
        self.tail.send(TailBatch { records: vec![record], positions: Vec::new() }).unwrap();
    }

    /// Revokes `slot`, as a rebalance moving it to another instance does.
    async fn revoke(&self, slot: i32) {
        use crate::kafka::membership::MembershipEvent;
        let (done, answered) = tokio::sync::oneshot::channel();
        self.group.send(MembershipEvent::Revoked { slots: vec![slot], done }).unwrap();
        tokio::time::timeout(DEADLINE, answered).await.expect("the revoke is answered").unwrap();
    }

    /// Topic "orders" (4 partitions) mirroring, then the slot of its partition 0 revoked (moved
    /// to another instance); returns that slot.
    async fn partition_0_elsewhere() -> (GroupRig, i32) {
        let g = GroupRig::new(&[0, 1, 2, 3], 0).await;
        g.rig.source.add_topic("orders", 4, 3);
        g.rig.op_ok("m", &["orders"], START).await;
        g.rig.caught_up("m", "orders").await;
        let slot = g.slot_of("orders", 0);
        g.revoke(slot).await;
        (g, slot)
    }

    /// [`GroupRig::partition_0_elsewhere`], its records read back, then a pause of "orders" sent
    /// here, computed from this instance's view: returns the rig, partition 0's record the pause
    /// was computed from, and the pause's record.
    async fn pause_sent_from_a_view() -> (GroupRig, crate::store::PartitionStateValue, crate::store::PartitionStateValue)
    {
        let (g, _) = GroupRig::partition_0_elsewhere().await;
        g.echo_own_writes();
        let before = g.own_record("orders", 0);
        g.rig.op_ok("m", &["orders"], LifecycleOp::Pause).await;
        let pause = g.own_record("orders", 0);
        assert_eq!((pause.state.as_str(), pause.command.as_deref()), ("PAUSING", Some("pause")));
        (g, before, pause)
    }

    /// Waits until a takeover asked the destination for the state topic's end (the read a
    /// takeover makes before it restores its slots).
    async fn state_end_read(&self) {
        let state_topic = config().state_topic;
        let read = || {
            let calls = self.rig.world.destination.list_offsets_calls();
            calls.iter().any(|(_, req)| req.iter().any(|(t, ..)| *t == state_topic))
        };
        assert!(polled(read).await, "the takeover never read the state topic's end");
    }

    fn slot_of(&self, topic: &str, partition: i32) -> i32 {
        self.rig.partition("m", topic, partition).slot
    }

    /// The slots of every heartbeat written so far, in order.
    fn heartbeats(&self) -> Vec<Vec<i32>> {
        self.rig
            .world
            .state
            .records()
            .iter()
            .filter_map(|r| match crate::store::decode(r.key.as_deref(), r.value.as_deref()) {
                Ok(crate::store::StateRecord::Instance(e)) => e.value.map(|v| v.slots),
                _ => None,
            })
            .collect()
    }

    async fn shutdown(mut self) {
        self.rig.engine.shutdown().await;
        if let Some(j) = self.rig.join.take() {
            j.await.expect("the coordinator ends cleanly");
        }
    }
}

/// Partition 0 of "m"'s "orders" shown in `state` at `epoch` (for [`Rig::until`]).
fn orders_0_shown(state: PartitionState, epoch: u64) -> impl Fn(&Snapshot) -> Option<()> {
    move |s: &Snapshot| {
        let p = s.mirror("m")?.topic("orders")?.partitions.iter().find(|p| p.partition == 0)?;
        (p.state == state && p.state_epoch == epoch).then_some(())
    }
}

/// Group ownership: a pause sent to this instance for a partition another one owns, computed
/// from a view one record behind (the new owner's takeover record had not reached this
/// instance's tail): its record loses to the stored epoch, and this instance records the pause
/// again on top of the record that won, for the owner to run. Without that, the pause was lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_that_lost_to_a_newer_record_is_recorded_again() {
    // The pause is recorded with the next epoch after this instance's view...
    let (g, before, pause) = GroupRig::pause_sent_from_a_view().await;
    // ...which the new owner's takeover record took first in the log.
    g.echo_own_writes_after(vec![g.other_record(before.clone(), pause.state_epoch)]);
    let epoch = pause.state_epoch + 1;
    g.rig.until("the pause recorded again", orders_0_shown(S::Pausing, epoch)).await;
    let again = g.own_record("orders", 0);
    assert_eq!((again.state.as_str(), again.state_epoch, again.command.as_deref()), ("PAUSING", epoch, Some("pause")));
    assert_eq!(again.previous_state.as_deref(), Some("MIRRORING"), "on top of the record that won");
    g.shutdown().await;
}

/// Group ownership: a pause that lost to the new owner's takeover record (PREPARING, where a
/// pause is refused) is not dropped: once the owner's record says MIRRORING, this instance
/// records the pause again, for the owner to run. Dropping it lost a pause accepted right after a
/// rebalance (seen in the three-instance test).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_that_lost_to_a_takeover_is_recorded_again_once_the_partition_mirrors() {
    let (g, before, pause) = GroupRig::pause_sent_from_a_view().await;
    // The new owner's takeover record (PREPARING) took the pause's epoch first.
    let mut preparing = before.clone();
    preparing.previous_state = Some(before.state.clone());
    preparing.state = "PREPARING".into();
    g.echo_own_writes_after(vec![g.other_record(preparing, pause.state_epoch)]);
    g.rig.until("the owner's PREPARING shown", orders_0_shown(S::Preparing, pause.state_epoch)).await;
    // The owner's restore ends.
    let mut mirroring = before.clone();
    mirroring.previous_state = Some("PREPARING".into());
    g.echo_own_writes_after(vec![g.other_record(mirroring, pause.state_epoch + 1)]);
    let epoch = pause.state_epoch + 2;
    g.rig.until("the pause recorded again", orders_0_shown(S::Pausing, epoch)).await;
    let again = g.own_record("orders", 0);
    assert_eq!((again.state.as_str(), again.state_epoch, again.command.as_deref()), ("PAUSING", epoch, Some("pause")));
    assert_eq!(again.previous_state.as_deref(), Some("MIRRORING"), "on top of the owner's MIRRORING");
    g.shutdown().await;
}

/// Group ownership: a lost command that no longer applies to the record that won (the owner
/// failed the partition over meanwhile) is dropped, not forced through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_command_that_no_longer_applies_is_dropped() {
    let (g, mut before, pause) = GroupRig::pause_sent_from_a_view().await;
    let writes = g.rig.world.state.records().len();
    // The owner had stopped the partition.
    before.previous_state = Some(before.state.clone());
    before.state = "STOPPED".into();
    before.stop =
        Some(crate::store::StopValue { last_mirrored_source_offset: Some(2), lme: 0, destination_stop_offset: 3 });
    g.echo_own_writes_after(vec![g.other_record(before.clone(), pause.state_epoch)]);
    g.rig
        .until("the owner's STOPPED shown", |s| {
            let t = s.mirror("m")?.topic("orders")?;
            t.partitions.iter().any(|x| x.partition == 0 && x.state == S::Stopped).then_some(())
        })
        .await;
    // The snapshot is published after the whole tail batch, the lost command's handling included.
    let again: Vec<_> = g.rig.world.state.records().into_iter().skip(writes).collect();
    assert!(again.is_empty(), "nothing recorded again: {again:?}");
    g.shutdown().await;
}

/// Group ownership: what another instance copied of a partition this one does not own is
/// counted from that instance's transactions (offset runs with a position). An offset map written
/// whole, without one (what a failback inherits from the other direction's mirror), is history:
/// counted, it added the other direction's whole copy to the partition's records mirrored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_copied_elsewhere_count_transactions_not_an_inherited_offset_map() {
    use crate::kafka::state_log::{LogRecord, TailBatch};
    use crate::store::{Entry, OffsetRunsValue, PositionValue, RunValue, StateRecord};
    let (g, _) = GroupRig::partition_0_elsewhere().await;
    let before = g.rig.partition("m", "orders", 0).records_mirrored;
    let topic_id = g.own_record("orders", 0).topic_id;
    let runs = |run: RunValue, position: Option<PositionValue>| {
        let value = OffsetRunsValue {
            mirror: "m".into(),
            topic_id: topic_id.clone(),
            partition: 0,
            new_lineage: false,
            runs: vec![run],
            position,
        };
        let e = StateRecord::OffsetRuns(Entry::put(value.key().expect("a key"), value))
            .encode(std::num::NonZeroU32::new(4).unwrap());
        LogRecord { partition: e.partition, offset: 1_000_000, key: Some(e.key), value: e.value }
    };
    let inherited = runs(RunValue(0, 0, 1_000), None);
    let position = PositionValue { next_source_offset: 1_005, source_leader_epoch: 0, destination_end_offset: 1_006 };
    let transaction = runs(RunValue(1_000, 1_000, 5), Some(position));
    g.tail.send(TailBatch { records: vec![inherited, transaction], positions: Vec::new() }).unwrap();
    // One snapshot is published after the whole batch: the first change is its whole effect.
    let after = g
        .rig
        .until("the other instance's transaction counted", |s| {
            let t = s.mirror("m")?.topic("orders")?;
            let p = t.partitions.iter().find(|x| x.partition == 0)?;
            (p.records_mirrored != before).then_some(p.records_mirrored)
        })
        .await;
    assert_eq!(after, before + 5, "the transaction's 5 records, not the inherited map's 1,000");
    g.shutdown().await;
}

/// Group ownership: a lifecycle call records a partition this instance does not own as a command
/// for its owner; the partitions it owns it carries out itself, as plain transitions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transition_of_a_partition_owned_elsewhere_is_recorded_as_a_command() {
    let (g, slot) = GroupRig::partition_0_elsewhere().await;
    g.rig.op_ok("m", &["orders"], LifecycleOp::Pause).await;
    let v = g.own_record("orders", 0);
    assert_eq!((v.state.as_str(), v.command.as_deref()), ("PAUSING", Some("pause")), "{v:?}");
    for p in (1..4).filter(|p| g.slot_of("orders", *p) != slot) {
        let v = g.own_record("orders", p);
        assert_eq!((v.state.as_str(), v.command.as_deref()), ("PAUSED", None), "partition {p}: {v:?}");
    }
    g.shutdown().await;
}

/// Group ownership: a recover of a FAILED partition another instance owns is recorded as a
/// `recover` command for its owner (which runs it as it runs any command it reads: `Loaded`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recover_of_a_partition_owned_elsewhere_is_recorded_as_a_command() {
    let (g, _) = GroupRig::partition_0_elsewhere().await;
    g.echo_own_writes();
    // The owner failed partition 0 for good.
    let mut failed = g.own_record("orders", 0);
    failed.previous_state = Some(failed.state.clone());
    failed.state = "FAILED".into();
    failed.error = Some(crate::store::ErrorValue {
        code: "SOURCE_TRUNCATED".into(),
        message: "the source log starts past the position".into(),
        retryable: false,
        since: failed.updated_at,
    });
    let epoch = failed.state_epoch + 1;
    g.echo_own_writes_after(vec![g.other_record(failed, epoch)]);
    g.rig
        .until("the owner's FAILED shown", |s| {
            let t = s.mirror("m")?.topic("orders")?;
            t.partitions.iter().any(|x| x.partition == 0 && x.state == S::Failed).then_some(())
        })
        .await;
    g.rig.op_ok("m", &["orders"], LifecycleOp::Recover).await;
    let v = g.own_record("orders", 0);
    assert_eq!((v.state.as_str(), v.command.as_deref()), ("PREPARING", Some("recover")), "{v:?}");
    assert_eq!((v.state_epoch, v.retry_count, v.error.is_none()), (epoch + 1, 0, true), "{v:?}");
    assert_eq!(persist::command_event(&v), Some(Event::Recover), "the owner reads it as a recover");
    g.shutdown().await;
}

/// Group ownership: `topics` (4 partitions of 1 record each) started while slot 0 is another
/// instance's, so their slot-0 partitions wait PREPARING for the owner; returns those partitions.
async fn started_without_slot_0(topics: &[&str]) -> (GroupRig, BTreeSet<(String, i32)>) {
    let g = GroupRig::new(&[1, 2, 3], 0).await;
    for t in topics {
        g.rig.source.add_topic(t, 4, 1);
    }
    g.rig.op_ok("m", topics, START).await;
    let snap = g.rig.engine.snapshot();
    let mut slot0 = BTreeSet::new();
    for t in &snap.mirror("m").expect("mirror").topics {
        for p in t.partitions.iter().filter(|p| p.slot == 0) {
            assert_eq!(p.state, S::Preparing, "{}/{} waits for slot 0's owner", t.name, p.partition);
            slot0.insert((t.name.clone(), p.partition));
        }
    }
    let topics_in_slot0: BTreeSet<&String> = slot0.iter().map(|(t, _)| t).collect();
    assert!(topics_in_slot0.len() >= 3, "the test needs slot-0 partitions in several topics: {slot0:?}");
    (g, slot0)
}

/// Group ownership: a takeover restores the PREPARING partitions of many topics (a start the
/// previous owner had not finished) with the offsets of all of them read together: one source
/// request for their log starts, not one per topic. A takeover in the middle of a 100-topic
/// start spent most of its time in per-topic requests on a busy destination.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_takeover_prepares_the_partitions_of_many_topics_together() {
    use crate::kafka::membership::MembershipEvent;
    let topics = ["a", "b", "c", "d", "e", "f", "g", "h"];
    let (g, slot0) = started_without_slot_0(&topics).await;
    let before = g.rig.source.list_offsets_calls().len();
    g.group.send(MembershipEvent::Assigned(vec![0])).unwrap();
    for t in topics {
        g.rig.caught_up("m", t).await;
    }
    // The requests that read slot 0's partitions and nothing else (the lag refresh reads every
    // partition this instance owns): one, for all of them.
    let reads: Vec<BTreeSet<(String, i32)>> = g.rig.source.list_offsets_calls()[before..]
        .iter()
        .map(|(_, req)| req.iter().map(|(t, p, _)| (t.clone(), *p)).collect::<BTreeSet<_>>())
        .filter(|keys| keys.iter().all(|k| slot0.contains(k)))
        .collect();
    assert_eq!(reads, vec![slot0], "one source request for every topic's slot-0 partitions");
    g.shutdown().await;
}

/// Group ownership: when the offsets of a takeover's topics cannot be read together (one source
/// topic deleted fails the whole request), they are read topic by topic: only that topic's
/// partitions fail, the others mirror.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_takeover_whose_joint_read_fails_prepares_topic_by_topic() {
    use crate::kafka::membership::MembershipEvent;
    let topics = ["a", "b", "c", "d", "e", "f", "g", "h"];
    let (g, slot0) = started_without_slot_0(&topics).await;
    let gone = slot0.iter().next().expect("a slot-0 partition").0.clone();
    g.rig.source.delete_topic(&gone);
    g.group.send(MembershipEvent::Assigned(vec![0])).unwrap();
    for t in topics.iter().filter(|t| **t != gone) {
        g.rig.caught_up("m", t).await;
    }
    let failed: Vec<i32> = g
        .rig
        .until("the deleted topic's slot-0 partitions FAILED", |s| {
            let t = s.mirror("m")?.topic(&gone)?;
            let slot0_parts: Vec<_> = t.partitions.iter().filter(|p| p.slot == 0).collect();
            slot0_parts.iter().all(|p| p.state == S::Failed).then(|| slot0_parts.iter().map(|p| p.partition).collect())
        })
        .await;
    assert!(!failed.is_empty());
    g.shutdown().await;
}

/// Group ownership: a takeover while the source does not answer at all fails the PREPARING
/// partitions of all its topics after one joint read (SOURCE_UNREACHABLE, retried), instead of
/// falling back to one read per topic, each waiting for its own timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_takeover_while_the_source_does_not_answer_fails_its_topics_after_one_read() {
    use crate::kafka::membership::MembershipEvent;
    let topics = ["a", "b", "c", "d", "e", "f", "g", "h"];
    let (g, slot0) = started_without_slot_0(&topics).await;
    let topics_in_slot0 = slot0.iter().map(|(t, _)| t).collect::<BTreeSet<_>>().len();
    g.rig.source.set_unreachable(true);
    let before = g.rig.source.list_offsets_calls().len();
    g.group.send(MembershipEvent::Assigned(vec![0])).unwrap();
    let codes: Vec<String> = g
        .rig
        .until("slot 0's partitions FAILED", |s| {
            let m = s.mirror("m")?;
            let parts: Vec<_> = m.topics.iter().flat_map(|t| t.partitions.iter().filter(|p| p.slot == 0)).collect();
            parts
                .iter()
                .all(|p| p.state == S::Failed)
                .then(|| parts.iter().filter_map(|p| p.error.as_ref().map(|e| e.code.clone())).collect())
        })
        .await;
    assert!(codes.iter().all(|c| c == "SOURCE_UNREACHABLE"), "{codes:?}");
    // The reads of slot 0's partitions only (the lag refresh reads every owned partition): the
    // joint one (and at most a retry that came since), not one per topic.
    let reads = g.rig.source.list_offsets_calls()[before..]
        .iter()
        .filter(|(_, req)| req.iter().all(|(t, p, _)| slot0.contains(&(t.clone(), *p))))
        .count();
    assert!(reads < topics_in_slot0, "{reads} source reads for slot 0's partitions of {topics_in_slot0} topics");
    g.rig.source.set_unreachable(false);
    for t in topics {
        g.rig.caught_up("m", t).await;
    }
    g.shutdown().await;
}

/// Group ownership: state-tail batches that queued up while the engine was busy are applied
/// together, so the slots they complete are taken over (and restored, which asks Kafka) in one
/// step, not one step per batch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tail_batches_that_queued_up_complete_their_takeovers_together() {
    use crate::kafka::membership::MembershipEvent;
    use crate::kafka::state_log::TailBatch;
    // Slots 0 and 1: their previous owners committed three state records each.
    let g = GroupRig::new(&[2, 3], 3).await;
    let state_topic = config().state_topic;
    g.rig.world.destination.produce(&state_topic, 1, 3);
    // The takeover's read of the state topic's end takes a while: the engine is busy in it when
    // the tail's batches arrive.
    g.rig.world.destination.set_delay(Duration::from_millis(300));
    g.group.send(MembershipEvent::Assigned(vec![0, 1])).unwrap();
    g.state_end_read().await;
    g.tail.send(TailBatch { records: Vec::new(), positions: vec![(0, 3)] }).unwrap();
    g.tail.send(TailBatch { records: Vec::new(), positions: vec![(1, 3)] }).unwrap();
    g.rig
        .until("slots 0 and 1 taken over", |s| {
            s.cluster.instances.iter().any(|i| i.this && i.slots == [0, 1, 2, 3]).then_some(())
        })
        .await;
    let heartbeats = g.heartbeats();
    assert!(
        !heartbeats.iter().any(|slots| slots == &[0, 2, 3] || slots == &[1, 2, 3]),
        "one slot was taken over before the other: {heartbeats:?}"
    );
    g.shutdown().await;
}

/// Group ownership: a takeover waits briefly for the state tail to reach every assigned slot's
/// end, so slots the tail reads a fetch apart are restored in one step (after `kill -9` each
/// extra step cost a state write, offset reads and a heartbeat); a slot the tail does not reach
/// within the wait does not hold back the others, and is taken over once the tail reaches it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_takeover_waits_briefly_for_the_tail_to_reach_all_its_slots() {
    use crate::kafka::membership::MembershipEvent;
    use crate::kafka::state_log::TailBatch;
    // Slots 0 and 1: their previous owners committed three state records each.
    let g = GroupRig::new(&[2, 3], 3).await;
    let state_topic = config().state_topic;
    g.rig.world.destination.produce(&state_topic, 1, 3);
    let owned = |slots: &'static [i32]| {
        move |s: &Snapshot| s.cluster.instances.iter().any(|i| i.this && i.slots == slots).then_some(())
    };
    g.group.send(MembershipEvent::Assigned(vec![0, 1])).unwrap();
    g.state_end_read().await;
    // The tail reads slot 0's end, and slot 1's a fetch later (the pause stands for that fetch;
    // nothing is synchronised by it).
    g.tail.send(TailBatch { records: Vec::new(), positions: vec![(0, 3)] }).unwrap();
    tokio::time::sleep(Duration::from_millis(150)).await;
    g.tail.send(TailBatch { records: Vec::new(), positions: vec![(1, 3)] }).unwrap();
    g.rig.until("slots 0 and 1 taken over", owned(&[0, 1, 2, 3])).await;
    let heartbeats = g.heartbeats();
    assert!(
        !heartbeats.iter().any(|slots| slots == &[0, 2, 3] || slots == &[1, 2, 3]),
        "one slot was taken over before the other: {heartbeats:?}"
    );
    // Slot 1 again, with a tail that does not reach its end: slot 0 is not held back for it.
    g.revoke(0).await;
    g.revoke(1).await;
    g.rig.world.destination.produce(&state_topic, 0, 2);
    g.rig.world.destination.produce(&state_topic, 1, 2);
    g.group.send(MembershipEvent::Assigned(vec![0, 1])).unwrap();
    g.tail.send(TailBatch { records: Vec::new(), positions: vec![(0, 5)] }).unwrap();
    g.rig.until("slot 0 taken over without slot 1", owned(&[0, 2, 3])).await;
    g.tail.send(TailBatch { records: Vec::new(), positions: vec![(1, 5)] }).unwrap();
    g.rig.until("slot 1 taken over once the tail reached it", owned(&[0, 1, 2, 3])).await;
    g.shutdown().await;
}

/// Group ownership: a pause the state topic did not take fails the partitions this instance owns
/// (retried here); one another instance owns shows its stored record again, not a FAILED that
/// nobody records or retries (its retries run on its owner, who never heard of the pause).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_that_cannot_be_recorded_leaves_partitions_owned_elsewhere_as_stored() {
    let (g, slot) = GroupRig::partition_0_elsewhere().await;
    // The state tail has read the slot's records, the new owner's record included (an epoch
    // this instance never wrote, so the snapshot tells when it was read).
    let taken = g.own_record("orders", 0);
    let epoch = taken.state_epoch + 10;
    g.echo_own_writes_after(vec![g.other_record(taken, epoch)]);
    g.rig
        .until("the new owner's record read", |s| {
            let p = s.mirror("m")?.topic("orders")?.partitions.iter().find(|p| p.partition == 0)?.state_epoch;
            (p == epoch).then_some(())
        })
        .await;
    g.rig.world.state.set_mode(WriteMode::Unavailable);
    let r = g.rig.op("m", &["orders"], LifecycleOp::Pause).await;
    assert!(refusal(&r).is_some(), "{r:?}");
    let states = |s: &Snapshot| -> Option<Vec<(i32, PartitionState)>> {
        Some(s.mirror("m")?.topic("orders")?.partitions.iter().map(|p| (p.partition, p.state)).collect())
    };
    let shown = states(&g.rig.engine.snapshot()).expect("orders");
    for (p, state) in &shown {
        let expected = if g.slot_of("orders", *p) == slot { S::Mirroring } else { S::Failed };
        assert_eq!(*state, expected, "partition {p}: {shown:?}");
    }
    let written = g.rig.world.state.records().len();
    g.rig.world.state.set_mode(WriteMode::Accept);
    let owned_paused = |s: &Snapshot| {
        let all = states(s)?;
        all.iter()
            .all(|(p, state)| *state == if g.slot_of("orders", *p) == slot { S::Mirroring } else { S::Paused })
            .then_some(())
    };
    g.rig.until("this instance's partitions PAUSED by the retry", owned_paused).await;
    // Nothing of the partitions owned elsewhere is written later (the pause was answered with an
    // error).
    let sent_later: Vec<_> = g.rig.world.state.records()[written..]
        .iter()
        .filter_map(|r| match crate::store::decode(r.key.as_deref(), r.value.as_deref()) {
            Ok(crate::store::StateRecord::PartitionState(e)) => {
                e.value.filter(|v| g.slot_of(&v.topic, v.partition) == slot)
            }
            _ => None,
        })
        .collect();
    assert!(sent_later.is_empty(), "{sent_later:?}");
    g.shutdown().await;
}

/// An engine in a slot group on fake clusters for long starts (the test plays the group coordinator and the state
/// tail), with a mirror "m" and source topics t00, t01, ... to start.
struct StartRig {
    g: GroupRig,
    topics: Vec<String>,
}

/// Topics of a [`StartRig`] start: enough that it outlasts what a test does meanwhile.
const LONG_START_TOPICS: usize = 40;

impl StartRig {
    /// `owned`: the slots (of 4) assigned at once; `slot0_records`: records the previous owner of
    /// slot 0 committed to its state partition; `partitions`: per topic.
    async fn new(owned: &[i32], slot0_records: i64, partitions: i32) -> StartRig {
        let g = GroupRig::new(owned, slot0_records).await;
        let topics: Vec<String> = (0..LONG_START_TOPICS).map(|i| format!("t{i:02}")).collect();
        for t in &topics {
            g.rig.source.add_topic(t, partitions, 1);
        }
        StartRig { g, topics }
    }

    /// Starts every topic on a busy destination (each admin call takes `delay`); returns once
    /// the start is under way (its first topic reached a data path).
    async fn long_start(&self, delay: Duration) -> tokio::task::JoinHandle<Result<OpResult, EngineError>> {
        self.g.rig.world.destination.set_delay(delay);
        let start = {
            let engine = self.g.rig.engine.clone();
            let names = self.topics.clone();
            tokio::spawn(async move { engine.lifecycle("m", TopicSelector::Names(names), START, false, actor()).await })
        };
        assert!(polled(|| !self.g.rig.world.pipes.assigned("m").is_empty()).await, "the start assigned nothing");
        start
    }

    /// Assigns slot 0, whose state partition holds records the tail (played by the test) never
    /// reaches: its takeover waits for the tail from then on, and the tail is applied between
    /// two topics only while a takeover waits. Sent before a start, it is served before the
    /// start's topics are: they come after the start's source survey, off the loop.
    fn assign_slot0_for_good(&self) {
        use crate::kafka::membership::MembershipEvent;
        self.g.group.send(MembershipEvent::Assigned(vec![0])).unwrap();
    }

    /// Topics the data paths were assigned partitions of so far.
    fn assigned_topics(&self) -> usize {
        self.g.rig.world.pipes.assigned("m").into_iter().map(|a| a.topic).collect::<BTreeSet<_>>().len()
    }

    fn heartbeats(&self) -> Vec<Vec<i32>> {
        self.g.heartbeats()
    }

    async fn shutdown(self) {
        self.g.shutdown().await;
    }
}

/// Group ownership: a revoke that arrives while a start works through many topics is answered
/// between two of them, not when the start ends. The membership's rebalance callback waits for
/// that answer, and so does every instance's next assignment: a start of 100 topics of 100
/// partitions held the loop for 93 s on a busy destination.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoke_during_a_long_start_is_served_between_two_topics() {
    use crate::kafka::membership::MembershipEvent;
    let rig = StartRig::new(&[0, 1, 2, 3], 0, 2).await;
    let start = rig.long_start(Duration::from_millis(30)).await;
    let (done, answered) = tokio::sync::oneshot::channel();
    rig.g.group.send(MembershipEvent::Revoked { slots: vec![0, 1], done }).unwrap();
    let answer = tokio::time::timeout(DEADLINE, answered).await.expect("the revoke is answered");
    assert!(answer.is_ok(), "answered, not dropped");
    let assigned = rig.assigned_topics();
    assert!(
        !start.is_finished() && assigned < LONG_START_TOPICS,
        "the revoke waited for the start: {assigned} of {LONG_START_TOPICS} topics were assigned when it was answered"
    );
    assert!(rig.g.rig.world.pipes.slots("m").iter().all(|s| *s >= 2), "the revoked slots' data paths ended");
    let r = start.await.expect("the start's task");
    assert_eq!(refusal(&r), None, "{r:?}");
    // The topics started after the revoke have no data paths of slots 0 and 1 again.
    let slots = rig.g.rig.world.pipes.slots("m");
    assert!(slots.iter().all(|s| *s >= 2), "no data path of a revoked slot: {slots:?}");
    rig.shutdown().await;
}

/// Group ownership: a long start holds the loop and its heartbeat tick; the heartbeat is written
/// between two topics instead, so the other instances do not take this one for gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeats_go_on_during_a_long_start() {
    let rig = StartRig::new(&[0, 1, 2, 3], 0, 1).await;
    // Each topic's destination calls on the loop take 2 x 60 ms: the start holds the loop for
    // about 5 s, longer than the heartbeat interval (3 s).
    let start = rig.long_start(Duration::from_millis(60)).await;
    let before = rig.heartbeats().len();
    let mut during = before;
    while !start.is_finished() {
        during = during.max(rig.heartbeats().len());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let r = start.await.expect("the start's task");
    assert_eq!(refusal(&r), None, "{r:?}");
    assert!(during > before, "no heartbeat was written while the start held the loop");
    rig.shutdown().await;
}

/// Group ownership: a slot assigned while a start works through many topics is taken over
/// between two of them, once the state tail has read the slot's records (sent here), not when
/// the start ends; the heartbeat that completes the takeover names the new slot, and the
/// snapshot shows it while the start goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_takeover_during_a_long_start_completes_between_two_topics() {
    use crate::kafka::membership::MembershipEvent;
    use crate::kafka::state_log::TailBatch;
    // Slot 0's state partition holds three records its previous owner committed.
    let rig = StartRig::new(&[1, 2, 3], 3, 2).await;
    let start = rig.long_start(Duration::from_millis(30)).await;
    rig.g.group.send(MembershipEvent::Assigned(vec![0])).unwrap();
    // The tail reads slot 0's partition to its end.
    rig.g.tail.send(TailBatch { records: Vec::new(), positions: vec![(0, 3)] }).unwrap();
    let owns_all = || rig.heartbeats().iter().any(|slots| slots == &[0, 1, 2, 3]);
    while !owns_all() && !start.is_finished() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let assigned = rig.assigned_topics();
    assert!(
        owns_all() && !start.is_finished(),
        "the takeover waited for the start: {assigned} of {LONG_START_TOPICS} topics were assigned when slot 0 was taken over"
    );
    // Readers see it then too: the snapshot is published between two topics.
    let shown_topics = until(&rig.g.rig.engine, "slot 0 shown as this instance's", |s| {
        let taken = s.cluster.instances.iter().any(|i| i.this && i.slots == [0, 1, 2, 3]);
        taken.then(|| s.mirror("m").map_or(0, |m| m.topics.len()))
    })
    .await;
    assert!(shown_topics < LONG_START_TOPICS, "the snapshot showed the takeover only after the start");
    let r = start.await.expect("the start's task");
    assert_eq!(refusal(&r), None, "{r:?}");
    // Every partition of the start runs on this instance, slot 0's included. The data paths take
    // the last assigns from their queues on their own threads, after the start has answered.
    let held = || rig.g.rig.world.pipes.held("m").len();
    polled(|| held() >= 2 * LONG_START_TOPICS).await;
    assert_eq!(held(), 2 * LONG_START_TOPICS, "every partition, slot 0's included");
    rig.shutdown().await;
}

/// Group ownership: a mirror another instance deleted (read by the state tail between two
/// topics of a start, while a takeover waits for the tail) ends the start's remaining topics
/// with "not found", not a panic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mirror_deleted_elsewhere_during_a_long_start_ends_its_remaining_topics() {
    use crate::kafka::state_log::{LogRecord, TailBatch};
    let rig = StartRig::new(&[1, 2, 3], 3, 1).await;
    rig.assign_slot0_for_good();
    let start = rig.long_start(Duration::from_millis(30)).await;
    let w = persist::mirror_tombstone("m", 4);
    let tombstone = LogRecord { partition: w.partition, offset: 1_000, key: Some(w.key), value: None };
    rig.g.tail.send(TailBatch { records: vec![tombstone], positions: Vec::new() }).unwrap();
    let r = tokio::time::timeout(DEADLINE, start).await.expect("the start ends").expect("no panic").expect("answered");
    let ok = r.results.iter().filter(|t| t.ok).count();
    let gone =
        r.results.iter().filter(|t| t.error.as_ref().is_some_and(|e| e.kind == ProblemKind::MirrorNotFound)).count();
    assert!(ok >= 1 && gone >= 1 && ok + gone == LONG_START_TOPICS, "{r:?}");
    until(&rig.g.rig.engine, "the mirror gone", |s| s.mirror("m").is_none().then_some(())).await;
    rig.shutdown().await;
}

/// Group ownership: another instance re-points the mirror to another source while a start works
/// through its topics (the tail brings the new definition between two of them): the remaining
/// topics are checked against the new source, not the facts the start read from the old one, so
/// a source whose cluster ID is not the expected one is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_changed_elsewhere_during_a_long_start_is_asked_for_the_remaining_topics() {
    use crate::kafka::state_log::{LogRecord, TailBatch};
    let rig = StartRig::new(&[1, 2, 3], 3, 1).await;
    let other = rig.g.rig.world.add_source("other:9092", "another-cluster");
    for t in &rig.topics {
        other.add_topic(t, 1, 1);
    }
    rig.assign_slot0_for_good();
    let start = rig.long_start(Duration::from_millis(30)).await;
    // The mirror's definition as another instance would write it after a PATCH of its source.
    let stored = latest_record(&rig.g.rig.world, |r| match r {
        crate::store::StateRecord::Mirror(e) if e.key.mirror == "m" => {
            e.value.map(|v| persist::stored_mirror(&v, &Default::default()))
        }
        _ => None,
    })
    .expect("the mirror's record");
    let mut changed = stored.clone();
    changed.spec.source.bootstrap_servers = "other:9092".into();
    changed.updated_at = Timestamp::from_millis(stored.updated_at.as_millis() + 1_000);
    let w = persist::mirror(&changed, 4, &Default::default());
    let record = LogRecord { partition: w.partition, offset: 1_000, key: Some(w.key), value: w.value };
    rig.g.tail.send(TailBatch { records: vec![record], positions: Vec::new() }).unwrap();
    let r = tokio::time::timeout(DEADLINE, start).await.expect("the start ends").expect("no panic").expect("answered");
    let ok = r.results.iter().filter(|t| t.ok).count();
    let refused = r
        .results
        .iter()
        .filter(|t| t.error.as_ref().is_some_and(|e| e.kind == ProblemKind::SourceClusterIdMismatch))
        .count();
    assert!(ok >= 1 && refused >= 1 && ok + refused == LONG_START_TOPICS, "{r:?}");
    rig.shutdown().await;
}

fn sealed_config(key: Option<u8>, previous: Option<u8>, allow_plaintext: bool) -> EngineConfig {
    use crate::store::seal::{Sealer, SecretKey};
    let mut c = config();
    let k = |b: u8| SecretKey::from_bytes(&[b; 32]);
    c.sealer = Sealer::new(key.map(k), previous.map(k), allow_plaintext);
    c
}

fn with_password(name: &str, password: &str) -> MirrorSpec {
    let mut s = spec(name, SOURCE);
    s.source.properties.insert("sasl.username".into(), "alice".into());
    s.source.properties.insert("sasl.password".into(), password.into());
    s
}

/// The stored `sasl.password` of mirror `name`, as the state topic holds it now.
fn stored_password(world: &FakeWorld, name: &str) -> String {
    latest_record(world, |r| match r {
        crate::store::StateRecord::Mirror(e) if e.key.mirror == name => {
            e.value.and_then(|v| v.source.properties.get("sasl.password").cloned())
        }
        _ => None,
    })
    .expect("the mirror's record")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plaintext_secret_is_refused_without_a_key_and_stored_encrypted_with_one() {
    // No key: refused with how to fix it; nothing stored.
    let rig = Rig::with_config(sealed_config(None, None, false)).await;
    let e = rig.engine.create_mirror(with_password("m", "hunter2-secret"), actor()).await.unwrap_err();
    assert_eq!(e.kind(), ProblemKind::InvalidProperty, "{e}");
    let text = e.to_string();
    assert!(text.contains("key_file") && text.contains("generate-key") && text.contains("${file:"), "{text}");
    assert!(!text.contains("hunter2"), "{text}");
    assert!(rig.engine.snapshot().mirror("m").is_none());
    // A reference needs no key (it names no secret).
    let mut by_ref = with_password("r", "${file:/run/secrets/pw}").source.properties;
    by_ref.remove("sasl.username");
    assert_eq!(crate::domain::secrets::first_plaintext_secret(&by_ref), None);
    // The deployment may allow plaintext at rest: stored as given.
    let rig = rig.restart_with(sealed_config(None, None, true)).await;
    rig.engine.create_mirror(with_password("p", "hunter2-plain"), actor()).await.expect("allowed");
    assert_eq!(stored_password(&rig.world, "p"), "hunter2-plain");
    // With a key: accepted, sealed in the state topic, never in plaintext.
    let rig = rig.restart_with(sealed_config(Some(1), None, false)).await;
    rig.engine.create_mirror(with_password("m", "hunter2-secret"), actor()).await.expect("create");
    let stored = stored_password(&rig.world, "m");
    assert!(crate::store::seal::is_sealed(&stored) && !stored.contains("hunter2"), "{stored}");
    // PATCH checks the same way: without a key a new plaintext secret is refused, `[redacted]`
    // keeps the stored one, and an empty bootstrap is refused as on create.
    let rig = rig.restart_with(sealed_config(None, None, false)).await;
    let update = MirrorUpdate { source: Some(with_password("p", "new-plain").source), ..Default::default() };
    let e = rig.engine.update_mirror("p", update, actor()).await.unwrap_err();
    assert_eq!(e.kind(), ProblemKind::InvalidProperty, "{e}");
    let source = SourceSpec { bootstrap_servers: " ".into(), properties: BTreeMap::new() };
    let empty = MirrorUpdate { source: Some(source), ..Default::default() };
    let e = rig.engine.update_mirror("p", empty, actor()).await.unwrap_err();
    assert!(e.to_string().contains("bootstrap_servers must not be empty"), "{e}");
    rig.engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_key_fails_only_that_mirrors_data_path_and_a_rotation_re_encrypts_on_the_next_write() {
    let rig = Rig::with_config(sealed_config(Some(1), None, false)).await;
    rig.source.add_topic("orders", 1, 5);
    rig.engine.create_mirror(with_password("secret", "hunter2-secret"), actor()).await.expect("create");
    rig.mirroring("plain", "orders", 1, 5).await;
    let under_1 = stored_password(&rig.world, "secret");
    // Another key, and no previous key: the secret does not open. That mirror's data path is
    // failed with the reason; the other mirror keeps mirroring.
    let rig = rig.restart_with(sealed_config(Some(2), None, false)).await;
    let why = rig
        .until("the secret mirror's data path failed", |s| match &s.mirror("secret")?.data_path {
            DataPathStatus::Failed { message } => Some(message.clone()),
            _ => None,
        })
        .await;
    assert!(why.contains("does not have") && why.contains("previous_key_file"), "{why}");
    rig.source.produce("orders", 0, 3);
    rig.caught_up("plain", "orders").await;
    assert_eq!(stored_password(&rig.world, "secret"), under_1, "left as it was");
    // Rotation: the new key with the old one as previous opens it; the next write seals it
    // under the new key.
    let rig = rig.restart_with(sealed_config(Some(2), Some(1), false)).await;
    rig.until("the secret mirror's data path is not failed", |s| {
        (!matches!(s.mirror("secret")?.data_path, DataPathStatus::Failed { .. })).then_some(())
    })
    .await;
    let update = MirrorUpdate { replication_throttle_bytes_per_sec: Some(1 << 20), ..Default::default() };
    rig.engine.update_mirror("secret", update, actor()).await.expect("update");
    let after = stored_password(&rig.world, "secret");
    let new_id = crate::store::seal::SecretKey::from_bytes(&[2; 32]).id().to_string();
    assert!(after.contains(&new_id) && after != under_1, "re-encrypted under the new key: {after}");
    // The new key alone opens it now.
    let rig = rig.restart_with(sealed_config(Some(2), None, false)).await;
    let snap = rig.engine.snapshot();
    assert!(!matches!(snap.mirror("secret").unwrap().data_path, DataPathStatus::Failed { .. }));
    rig.engine.shutdown().await;
}

// ----- topic policy and discovery ------------------------------------------------------------

/// A mirror with a topic policy on the fake source.
fn policy_spec(name: &str, include: &[&str], exclude: &[&str]) -> MirrorSpec {
    MirrorSpec {
        topic_include: include.iter().map(|s| s.to_string()).collect(),
        topic_exclude: exclude.iter().map(|s| s.to_string()).collect(),
        ..spec(name, SOURCE)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_starts_thousands_of_matching_topics_in_batches_while_a_stop_goes_first() {
    let rig = Rig::new().await;
    const N: usize = 2_000;
    for i in 0..N {
        rig.source.add_topic(&format!("t{i:04}"), 1, 2);
    }
    rig.source.add_topic("other", 1, 3);
    rig.mirroring("m2", "other", 1, 3).await;
    let calls_before = rig.source.list_topics_calls();
    rig.engine.create_mirror(policy_spec("m", &["t.*"], &["__.*"]), actor()).await.unwrap();
    rig.engine.refresh_now("m").await.unwrap();
    // The run is under way: some batches started, many topics still to start.
    rig.until("a discovery run under way", |s| {
        let d = &s.mirror("m")?.discovery;
        d.starting.filter(|n| *n > 0 && *n < N).map(|_| ())
    })
    .await;
    // A failover sent now is carried out between two topics of the run, not after it.
    let r =
        rig.engine.lifecycle("m2", TopicSelector::Names(vec!["other".into()]), LifecycleOp::Stop, false, actor()).await;
    assert_eq!(refusal(&r), None, "{r:?}");
    let still = rig.engine.snapshot().mirror("m").unwrap().discovery.starting;
    assert!(still.is_some_and(|n| n > 0), "the stop waited for the whole run: {still:?}");
    rig.all_in("m2", "other", S::Stopped).await;

    // Every topic is started, once, by one operation for the whole run.
    rig.until("every matching topic mirroring", |s| {
        let m = s.mirror("m")?;
        (m.topics.len() == N && m.topics.iter().all(|t| t.state == S::Mirroring) && m.discovery.starting.is_none())
            .then_some(())
    })
    .await;
    let ops: Vec<OperationView> =
        rig.engine.operations().into_iter().filter(|o| o.mirror == "m" && o.requested_by == DISCOVERY_ACTOR).collect();
    assert_eq!(ops.len(), 1, "one operation per run");
    assert_eq!(ops[0].kind, OperationKind::Start);
    assert_eq!(ops[0].results.len(), N);
    assert!(ops[0].results.iter().all(|r| r.ok));
    let d = rig.engine.snapshot().mirror("m").unwrap().discovery.clone();
    assert_eq!(d.topics_started_total, N as u64);
    assert!(d.refused.is_empty());
    // One listing of the source per run, whatever the number of topics.
    let runs = d.runs_total as usize;
    assert!(runs >= 1);
    assert_eq!(rig.source.list_topics_calls() - calls_before, runs, "one metadata request per run");

    // An idle run writes nothing.
    let before = rig.engine.operations().len();
    rig.engine.refresh_now("m").await.unwrap();
    rig.until("another run", |s| (s.mirror("m")?.discovery.runs_total as usize > runs).then_some(())).await;
    assert_eq!(rig.engine.operations().len(), before, "an idle run records no operation");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mirrored_topic_that_comes_to_match_an_exclusion_is_stopped_and_never_restarted() {
    let rig = Rig::new().await;
    rig.source.add_topic("orders.eu", 2, 4);
    rig.source.add_topic("orders.test", 1, 4);
    rig.engine.create_mirror(policy_spec("m", &["orders\\..*"], &["__.*"]), actor()).await.unwrap();
    rig.engine.refresh_now("m").await.unwrap();
    rig.caught_up("m", "orders.eu").await;
    rig.caught_up("m", "orders.test").await;
    // The exclusion is added: the topic is failed over by discovery, in its own operation.
    let update = MirrorUpdate { topic_exclude: Some(vec!["__.*".into(), ".*\\.test".into()]), ..Default::default() };
    rig.engine.update_mirror("m", update, actor()).await.unwrap();
    rig.all_in("m", "orders.test", S::Stopped).await;
    // STOPPED can be published (between topics) before discovery records its operation; the
    // count is published after it.
    rig.until("the stop counted", |s| (s.mirror("m")?.discovery.topics_stopped_total >= 1).then_some(())).await;
    let stops: Vec<OperationView> = rig
        .engine
        .operations()
        .into_iter()
        .filter(|o| o.requested_by == DISCOVERY_ACTOR && o.kind == OperationKind::Stop)
        .collect();
    assert_eq!(stops.len(), 1);
    assert_eq!(stops[0].topics, vec!["orders.test".to_string()]);
    assert_eq!(rig.engine.snapshot().mirror("m").unwrap().discovery.topics_stopped_total, 1);
    // Lifting the exclusion does not restart it: a failed-over topic stays the mirror's, stopped.
    let update = MirrorUpdate { topic_exclude: Some(vec!["__.*".into()]), ..Default::default() };
    rig.engine.update_mirror("m", update, actor()).await.unwrap();
    let runs = rig.engine.snapshot().mirror("m").unwrap().discovery.runs_total;
    rig.engine.refresh_now("m").await.unwrap();
    rig.until("another run", |s| (s.mirror("m")?.discovery.runs_total > runs).then_some(())).await;
    assert!(rig.partition("m", "orders.test", 0).state == S::Stopped);
    assert!(rig.engine.snapshot().mirror("m").unwrap().topic("orders.eu").unwrap().state == S::Mirroring);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_topic_is_held_back_until_a_refresh_or_a_policy_change() {
    // Routine discovery runs every 200 ms.
    let mut c = config();
    c.metadata_refresh_interval = Duration::from_millis(200);
    let rig = Rig::with_config(c).await;
    // A topic another mirror holds, and one this mirror may start.
    rig.mirroring("other", "shared.t", 1, 2).await;
    rig.source.add_topic("mine.t", 1, 2);
    rig.engine.create_mirror(policy_spec("m", &["shared\\..*", "mine\\..*"], &[]), actor()).await.unwrap();
    rig.caught_up("m", "mine.t").await;
    let plan = rig
        .until("a plan with nothing to start", |s| s.mirror("m")?.discovery.plan.clone().filter(|p| p.start.is_empty()))
        .await;
    assert_eq!(plan.taken, vec![("shared.t".to_string(), "other".to_string())], "{plan:?}");
    // A start the destination refuses: a topic of that name with another partition count.
    rig.source.add_topic("mine.u", 2, 1);
    rig.world.destination.add_topic("mine.u", 1, 0);
    let first = rig
        .until("refused", |s| {
            s.mirror("m")?.discovery.refused.iter().find(|(t, _)| t == "mine.u").map(|(_, r)| r.clone())
        })
        .await;
    assert_eq!(first.kind, ProblemKind::DestinationTopicConflict, "{first:?}");
    // Routine runs hold it back: no second try, no second operation.
    let ops = rig.engine.operations().len();
    let runs = rig.engine.snapshot().mirror("m").unwrap().discovery.runs_total;
    rig.until("three more routine runs", |s| (s.mirror("m")?.discovery.runs_total >= runs + 3).then_some(())).await;
    let snap = rig.engine.snapshot();
    let d = &snap.mirror("m").unwrap().discovery;
    assert_eq!(d.refused[0].1.tried_at, first.tried_at, "tried again at a routine run");
    assert_eq!(d.plan.as_ref().unwrap().held_back, vec!["mine.u".to_string()]);
    assert_eq!(rig.engine.operations().len(), ops);
    // An explicit refresh tries it again: refused again, for the same reason since the same time.
    rig.engine.refresh_now("m").await.unwrap();
    let again = rig
        .until("tried again", |s| {
            let r = s.mirror("m")?.discovery.refused.iter().find(|(t, _)| t == "mine.u")?.1.clone();
            (r.tried_at > first.tried_at).then_some(r)
        })
        .await;
    assert_eq!(again.since, first.since);
    // The conflict goes, and a policy change starts it at once.
    rig.world.destination.delete_topic("mine.u");
    let update = MirrorUpdate { topic_include: Some(vec!["mine\\..*".into()]), ..Default::default() };
    rig.engine.update_mirror("m", update, actor()).await.unwrap();
    rig.caught_up("m", "mine.u").await;
    rig.until("no refusal left", |s| s.mirror("m")?.discovery.refused.is_empty().then_some(())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_discovered_topic_deleted_at_the_source_keeps_its_mirror_topic_and_is_not_recreated() {
    let rig = Rig::new().await;
    rig.source.add_topic("orders.eu", 2, 4);
    rig.engine.create_mirror(policy_spec("m", &["orders\\..*"], &[]), actor()).await.unwrap();
    rig.engine.refresh_now("m").await.unwrap();
    rig.caught_up("m", "orders.eu").await;
    let id = rig.engine.snapshot().mirror("m").unwrap().topic("orders.eu").unwrap().source_topic_id.clone();
    rig.source.delete_topic("orders.eu");
    // Two refreshes without the topic: its partitions say why; the destination keeps the copy.
    for _ in 0..3 {
        let runs = rig.engine.snapshot().mirror("m").unwrap().discovery.runs_total;
        rig.engine.refresh_now("m").await.unwrap();
        rig.until("a run", |s| (s.mirror("m")?.discovery.runs_total > runs).then_some(())).await;
    }
    rig.all_in("m", "orders.eu", S::Failed).await;
    let p = rig.partition("m", "orders.eu", 0);
    assert_eq!(p.error.as_ref().map(|e| e.code.as_str()), Some("SOURCE_TOPIC_DELETED"), "{p:?}");
    assert_eq!(rig.destination_end("orders.eu", 0), 4, "the mirror topic is kept");
    // Created again at the source (a new topic ID): discovery does not start it over the old copy.
    rig.source.add_topic("orders.eu", 2, 1);
    let runs = rig.engine.snapshot().mirror("m").unwrap().discovery.runs_total;
    rig.engine.refresh_now("m").await.unwrap();
    rig.until("a run", |s| (s.mirror("m")?.discovery.runs_total > runs).then_some(())).await;
    let snap = rig.engine.snapshot();
    let m = snap.mirror("m").unwrap();
    assert_eq!(m.topic("orders.eu").unwrap().source_topic_id, id, "still the mirror of the deleted topic");
    assert_eq!(m.discovery.topics_started_total, 1);
    assert!(m.discovery.plan.as_ref().unwrap().start.is_empty());
}
// ----- promote (a planned switch-over) and all topics ------------------------------------------

fn names(topics: &[&str]) -> TopicSelector {
    TopicSelector::Names(topics.iter().map(|t| t.to_string()).collect())
}

/// The kind of every topic's problem, by topic.
fn kinds(r: &OpResult) -> BTreeMap<String, Option<ProblemKind>> {
    r.results.iter().map(|t| (t.topic.clone(), t.error.as_ref().map(|p| p.kind))).collect()
}

/// A promote with a partition that cannot catch up (paused with records it does not have) stops
/// nothing: every topic answers not-caught-up, the partition behind is listed with its lag, and
/// the refusal is in the audit trail. Once the partition catches up, the promote stops every
/// topic, and its release commits the open transaction instead of aborting it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_promote_stops_nothing_while_a_partition_is_behind_and_everything_once_caught_up() {
    let rig = Rig::new().await;
    rig.mirroring("m", "orders", 2, 5).await;
    rig.mirroring("m", "audit", 1, 5).await;
    rig.op_ok("m", &["orders"], LifecycleOp::Pause).await;
    rig.all_in("m", "orders", S::Paused).await;
    rig.source.produce("orders", 1, 4);

    let r = rig.engine.promote("m", names(&["orders", "audit"]), Duration::from_millis(300), actor()).await.unwrap();
    let expect: BTreeMap<String, Option<ProblemKind>> =
        [("audit", Some(ProblemKind::NotCaughtUp)), ("orders", Some(ProblemKind::NotCaughtUp))]
            .into_iter()
            .map(|(t, k)| (t.to_string(), k))
            .collect();
    assert_eq!(kinds(&r), expect, "{r:?}");
    let behind = PartitionBehind {
        partition: 1,
        state: S::Paused,
        source_last_stable_offset: Some(9),
        mirrored_source_offset: Some(5),
        lag_records: Some(4),
    };
    assert_eq!(r.behind.get("orders"), Some(&vec![behind]), "{r:?}");
    assert!(!r.behind.contains_key("audit"), "{r:?}");
    let detail = |t: &str| r.results.iter().find(|o| o.topic == t).and_then(|o| o.error.clone()).unwrap().detail;
    assert!(detail("orders").contains("partition 1 is 4 records behind"), "{}", detail("orders"));
    assert!(detail("orders").contains("nothing was stopped"), "{}", detail("orders"));
    assert!(detail("audit").contains("caught up, but not stopped"), "{}", detail("audit"));
    rig.all_in("m", "orders", S::Paused).await;
    rig.all_in("m", "audit", S::Mirroring).await;
    let op = rig.engine.operation(&r.operation_id).expect("the refused promote is recorded");
    assert_eq!(op.kind, OperationKind::Stop);
    assert!(op.results.iter().all(|o| !o.ok), "{op:?}");

    // The partition catches up (the promote waits for it): everything stops, nothing is behind.
    rig.op_ok("m", &["orders"], LifecycleOp::Resume).await;
    let releases_before = rig.world.pipes.finishes("m").len();
    let r = rig.engine.promote("m", names(&["orders", "audit"]), Duration::from_secs(10), actor()).await.unwrap();
    assert_eq!(refusal(&Ok(r.clone())), None, "{r:?}");
    assert!(r.behind.is_empty(), "{r:?}");
    rig.all_in("m", "orders", S::Stopped).await;
    rig.all_in("m", "audit", S::Stopped).await;
    assert_eq!(rig.destination_end("orders", 1), 9, "every source record is on the destination");
    assert_eq!(rig.destination_end("orders", 0), 5);
    let releases = &rig.world.pipes.finishes("m")[releases_before..];
    assert!(!releases.is_empty(), "the stop released the partitions");
    assert!(
        releases.iter().all(|(finish, fence)| *finish == crate::data_path::Finish::Commit && *fence),
        "a promote's stop commits and fences: {releases:?}"
    );
    // A promote of stopped topics is harmless (nothing left to wait for).
    let again = rig.engine.promote("m", names(&["orders"]), Duration::ZERO, actor()).await.unwrap();
    assert_eq!(refusal(&Ok(again)), None);
}

/// While a promote waits, the coordinator serves everything else: a stop and a pause of other
/// topics are answered (within the usual deadline, while the promote would wait a minute) before
/// the promote is; the promote then completes once its partition catches up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_promote_holds_no_other_stop_or_pause() {
    let rig = Rig::new().await;
    for t in ["a", "b", "c"] {
        rig.mirroring("m", t, 1, 3).await;
    }
    rig.op_ok("m", &["a"], LifecycleOp::Pause).await;
    rig.all_in("m", "a", S::Paused).await;
    rig.source.produce("a", 0, 2);
    let engine = rig.engine.clone();
    let promote =
        tokio::spawn(async move { engine.promote("m", names(&["a"]), Duration::from_secs(60), actor()).await });
    // The promote is waiting: it has read the source's last stable offsets of its partition.
    let promote_read = vec![("a".to_string(), 0, OffsetSpec::Latest)];
    let read_source = || {
        let calls = rig.source.list_offsets_calls();
        calls.iter().any(|(i, req)| *i == IsolationLevel::ReadCommitted && *req == promote_read)
    };
    assert!(polled(read_source).await, "the promote never read the source");
    for (topic, op) in [("b", LifecycleOp::Stop), ("c", LifecycleOp::Pause)] {
        let r = tokio::time::timeout(DEADLINE, rig.op("m", &[topic], op)).await;
        let r = r.unwrap_or_else(|_| panic!("{op:?} of {topic} waited for the promote"));
        assert_eq!(refusal(&r), None, "{r:?}");
    }
    assert!(!promote.is_finished(), "the promote still waits for its partition");
    rig.all_in("m", "b", S::Stopped).await;
    rig.all_in("m", "c", S::Paused).await;
    rig.all_in("m", "a", S::Paused).await;

    rig.op_ok("m", &["a"], LifecycleOp::Resume).await;
    let r = promote.await.expect("the promote's task").expect("answered");
    assert_eq!(refusal(&Ok(r)), None);
    rig.all_in("m", "a", S::Stopped).await;
    assert_eq!(rig.destination_end("a", 0), 5);
}

/// A source that does not answer cannot confirm that anything caught up: nothing is stopped, and
/// each partition is listed with an unknown lag.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_promote_against_a_source_that_does_not_answer_stops_nothing() {
    let rig = Rig::new().await;
    rig.mirroring("m", "orders", 2, 5).await;
    rig.source.set_unreachable(true);
    let r = rig.engine.promote("m", names(&["orders"]), Duration::from_millis(200), actor()).await.unwrap();
    rig.source.set_unreachable(false);
    assert_eq!(refusal(&Ok(r.clone())), Some(ProblemKind::NotCaughtUp));
    let behind = &r.behind["orders"];
    assert_eq!(behind.len(), 2, "{behind:?}");
    assert!(behind.iter().all(|b| b.lag_records.is_none() && b.source_last_stable_offset.is_none()), "{behind:?}");
    let detail = &r.results[0].error.as_ref().unwrap().detail;
    assert!(detail.contains("the source cluster did not answer"), "{detail}");
    assert!(
        rig.engine
            .snapshot()
            .mirror("m")
            .unwrap()
            .topic("orders")
            .unwrap()
            .partitions
            .iter()
            .all(|p| p.state != S::Stopped)
    );
}

/// `all` selects every topic of the mirror (not capped); a start cannot select "all"; a named
/// list over the cap is still refused; a promote's refusals of single topics do not stop it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_selects_every_topic_of_the_mirror() {
    let rig = Rig::new().await;
    for t in ["a", "b", "c"] {
        rig.mirroring("m", t, 1, 2).await;
    }
    let r = rig.engine.lifecycle("m", TopicSelector::All, LifecycleOp::Pause, false, actor()).await.unwrap();
    let paused: Vec<&str> = r.results.iter().filter(|o| o.ok).map(|o| o.topic.as_str()).collect();
    assert_eq!(paused, ["a", "b", "c"]);
    for t in ["a", "b", "c"] {
        rig.all_in("m", t, S::Paused).await;
    }
    let r = rig.engine.lifecycle("m", TopicSelector::All, LifecycleOp::Resume, true, actor()).await.unwrap();
    assert_eq!(r.results.len(), 3, "validate_only too");
    let refused = rig.engine.lifecycle("m", TopicSelector::All, START, false, actor()).await;
    assert_eq!(refusal(&refused), Some(ProblemKind::InvalidName), "{refused:?}");
    let many: Vec<String> = (0..=MAX_TOPICS_PER_CALL).map(|i| format!("t{i}")).collect();
    let refused = rig.engine.lifecycle("m", TopicSelector::Names(many), LifecycleOp::Stop, false, actor()).await;
    assert_eq!(refusal(&refused), Some(ProblemKind::TooManyTopics));

    rig.op_ok("m", &["a", "b", "c"], LifecycleOp::Resume).await;
    let r = rig.engine.promote("m", names(&["a", "nope"]), Duration::from_secs(10), actor()).await.unwrap();
    assert_eq!(kinds(&r)["nope"], Some(ProblemKind::TopicNotInMirror));
    assert_eq!(kinds(&r)["a"], None, "{r:?}");
    rig.all_in("m", "a", S::Stopped).await;
    let r = rig.engine.promote("m", TopicSelector::All, Duration::from_secs(10), actor()).await.unwrap();
    assert_eq!(r.results.len(), 3);
    assert_eq!(refusal(&Ok(r)), None);
    for t in ["a", "b", "c"] {
        rig.all_in("m", t, S::Stopped).await;
    }
}

// ----- two-person approval and drill records ---------------------------------------------------

/// A request is recorded (survives a restart), the requester cannot decide it, a second identity
/// approves it and it runs as the requester asked; a rejection and an expiry run nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_request_survives_a_restart_and_runs_once_approved_by_someone_else() {
    use crate::domain::approval::{ApprovalAction, ApprovalStatus, Decision};
    let rig = Rig::new().await;
    rig.create("m").await;
    rig.mirroring("m", "orders", 2, 5).await;
    let policy = ApprovalPolicy { required_for: [ApprovalAction::Stop].into(), expires_after_seconds: 900 };
    let update = MirrorUpdate { approval: Some(policy.clone()), ..Default::default() };
    rig.engine.update_mirror("m", update, actor()).await.unwrap();
    let alice = Actor { identity: "alice".into(), address: Some("10.0.0.1".into()) };
    let bob = Actor { identity: "bob".into(), address: None };
    let call = PendingCall { topics: vec!["orders".into()], ..Default::default() };
    let gate = rig.engine.gate("m", Some(ApprovalAction::Stop), call.clone(), &alice, false, None, false).await;
    assert_eq!(gate.unwrap_err().kind(), ProblemKind::ReasonRequired);
    let gate =
        rig.engine.gate("m", Some(ApprovalAction::Stop), call.clone(), &alice, false, Some("planned"), true).await;
    assert_eq!(gate.unwrap_err().kind(), ProblemKind::BreakGlassNotAllowed);
    let Gate::Pending(request) = rig
        .engine
        .gate("m", Some(ApprovalAction::Stop), call.clone(), &alice, false, Some(" planned "), false)
        .await
        .unwrap()
    else {
        panic!("the stop must wait for a second person")
    };
    assert_eq!((request.status, request.reason.as_str()), (ApprovalStatus::Pending, "planned"));
    // Not covered by the policy: runs at once.
    assert!(matches!(
        rig.engine.gate("m", Some(ApprovalAction::Delete), PendingCall::default(), &alice, false, None, false).await,
        Ok(Gate::Run(None))
    ));

    let rig = rig.restart().await;
    let kept = rig.engine.approval(&request.request_id).expect("the request survives a restart");
    assert_eq!(kept.status, ApprovalStatus::Pending);
    assert_eq!(rig.engine.approval_policy("m"), Some(policy));
    rig.all_in("m", "orders", S::Mirroring).await;
    let e = rig.engine.decide(&request.request_id, Decision::Approve, &alice, None).await.unwrap_err();
    assert_eq!(e.kind(), ProblemKind::ApprovalSameIdentity);
    let (done, executed) = rig.engine.decide(&request.request_id, Decision::Approve, &bob, None).await.unwrap();
    assert_eq!((done.status, done.decided_by.as_deref()), (ApprovalStatus::Executed, Some("bob")));
    let Some(Executed::Lifecycle(r)) = executed else { panic!("the stop ran") };
    rig.all_in("m", "orders", S::Stopped).await;
    let ran = rig.engine.operation(&r.operation_id).expect("the stop is recorded");
    assert_eq!((ran.kind, ran.requested_by.as_str()), (OperationKind::Stop, "alice"));
    assert_eq!(rig.engine.approval_of(&r.operation_id).map(|a| a.request_id), Some(request.request_id.clone()));
    let kinds: Vec<OperationKind> = rig.engine.operations().iter().map(|o| o.kind).collect();
    assert!(kinds.contains(&OperationKind::Approve) && kinds.contains(&OperationKind::ApprovalRequest));
    let e = rig.engine.decide(&request.request_id, Decision::Approve, &bob, None).await.unwrap_err();
    assert_eq!(e.kind(), ProblemKind::ApprovalNotPending);

    // A rejected request never runs.
    rig.op_ok("m", &["orders"], START).await;
    rig.all_in("m", "orders", S::Mirroring).await;
    let Gate::Pending(second) =
        rig.engine.gate("m", Some(ApprovalAction::Stop), call, &alice, false, Some("again"), false).await.unwrap()
    else {
        panic!("waits")
    };
    let (rejected, executed) =
        rig.engine.decide(&second.request_id, Decision::Reject, &bob, Some("not now".into())).await.unwrap();
    assert!(executed.is_none());
    assert_eq!(rejected.status, ApprovalStatus::Rejected);
    assert_eq!(rig.partition("m", "orders", 0).state, S::Mirroring);
}

/// A drill's records: the newest 100 per mirror are kept, and a drill this instance was running
/// when it stopped shows as interrupted after the restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drill_records_are_bounded_per_mirror_and_interrupted_ones_say_so() {
    use crate::engine::drills::{MAX_DRILLS_PER_MIRROR, RUNNING};
    use crate::store::DrillValue;
    let rig = Rig::new().await;
    rig.create("m").await;
    let drill = |id: u64, status: &str| DrillValue {
        id: format!("op-{id:05}"),
        mirror: "m".into(),
        status: status.into(),
        requested_by: "alice".into(),
        client_address: None,
        instance: "kmirror-test".into(),
        requested_at: id as i64,
        finished_at: None,
        canary_topic: "kmirror-drill.m".into(),
        steps: Vec::new(),
        report: None,
    };
    for id in 0..(MAX_DRILLS_PER_MIRROR as u64 + 5) {
        rig.engine.record_drill(drill(id, "passed")).await.unwrap();
    }
    rig.engine.record_drill(drill(900, RUNNING)).await.unwrap();
    let kept = rig.engine.drills();
    assert_eq!(kept.len(), MAX_DRILLS_PER_MIRROR);
    assert_eq!(kept[0].id, "op-00900", "newest first");
    assert!(kept.iter().all(|d| d.id.as_str() > "op-00005"), "the oldest went");
    let rig = rig.restart().await;
    let d = rig.engine.drill("op-00900").expect("kept across the restart");
    assert_eq!(d.status, "interrupted");
    assert!(d.finished_at.is_some());
    assert_eq!(rig.engine.drills().len(), MAX_DRILLS_PER_MIRROR);
}

/// A drill's canary leaves its mirror once STOPPED, and not before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_topic_can_be_removed_from_its_mirror_and_a_mirroring_one_cannot() {
    let rig = Rig::new().await;
    rig.create("m").await;
    rig.mirroring("m", "canary", 2, 5).await;
    rig.mirroring("m", "orders", 1, 5).await;
    let e = rig.engine.forget_topic("m", "canary").await.unwrap_err();
    assert_eq!(e.kind(), ProblemKind::IllegalTransition);
    rig.op_ok("m", &["canary"], LifecycleOp::Stop).await;
    rig.all_in("m", "canary", S::Stopped).await;
    rig.engine.forget_topic("m", "canary").await.unwrap();
    let topics = |snap: &Snapshot| -> Vec<String> {
        snap.mirror("m").map(|m| m.topics.iter().map(|t| t.name.clone()).collect()).unwrap_or_default()
    };
    assert_eq!(topics(&rig.engine.snapshot()), ["orders"]);
    assert!(rig.engine.translate_offset("m", "canary", 0, 0).is_none(), "its offset map is gone");
    assert_eq!(rig.engine.forget_topic("m", "canary").await.unwrap_err().kind(), ProblemKind::TopicNotInMirror);
    let rig = rig.restart().await;
    rig.all_in("m", "orders", S::Mirroring).await;
    assert_eq!(topics(&rig.engine.snapshot()), ["orders"], "nothing of it is left in the state topic");
}

/// Group ownership: a slot no live instance holds for longer than a handover takes (a member
/// restarted between the two rounds of a cooperative rebalance leaves slots so, and nothing in
/// the group protocol assigns them again) makes the instance with the smallest id ask the group
/// to rebalance, not before the grace period; once every slot has an owner it stops asking.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slots_nobody_owns_make_the_group_rebalance() {
    use crate::kafka::membership::MembershipEvent;
    // A 1 ms session timeout: the grace period is about one heartbeat interval (3 s).
    let began = tokio::time::Instant::now();
    let g = GroupRig::with_session(&[0, 1], 0, Duration::from_millis(1)).await;
    // Another live instance, with a larger id, owns slot 2; slot 3 has no owner.
    g.heartbeat_of("kmirror-zz", &[2]);
    g.rig
        .until("the other instance in the view", |s| {
            s.cluster.instances.iter().any(|i| i.id == "kmirror-zz").then_some(())
        })
        .await;
    assert!(polled(|| g.rig.world.nudges() > 0).await, "no rebalance was asked for slot 3");
    assert!(began.elapsed() >= group::HEARTBEAT_EVERY, "asked before the grace period: {:?}", began.elapsed());
    assert_eq!(g.rig.world.nudges(), 1, "asked once per grace period");

    // The rebalance assigns slot 3 here: nothing is asked any more, for longer than a grace period.
    g.group.send(MembershipEvent::Assigned(vec![3])).unwrap();
    g.rig
        .until("slot 3 owned", |s| s.cluster.instances.iter().any(|i| i.this && i.slots == [0, 1, 3]).then_some(()))
        .await;
    g.heartbeat_of("kmirror-zz", &[2]);
    let quiet_until = tokio::time::Instant::now() + group::HEARTBEAT_EVERY + Duration::from_secs(1);
    while tokio::time::Instant::now() < quiet_until {
        assert_eq!(g.rig.world.nudges(), 1, "asked again although every slot has an owner");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    g.shutdown().await;
}

/// A lifecycle call's Kafka failure becomes the problem and the partition error of the cluster
/// it went to, with the Kafka error's words.
#[test]
fn a_kafka_failure_is_the_problem_of_its_cluster() {
    let e = KafkaError::Timeout { operation: "ListOffsets", resource: "t-0".into(), after: Duration::from_secs(1) };
    let source = kafka_problem(Cluster::Source, &e);
    assert_eq!((source.kind, source.detail.as_str()), (ProblemKind::SourceUnreachable, e.to_string().as_str()));
    assert_eq!(kafka_problem(Cluster::Destination, &e).kind, ProblemKind::DestinationUnavailable);
    assert_eq!(Cluster::Source.error_code(), ErrorCode::SourceUnreachable);
    assert_eq!(Cluster::Destination.error_code(), ErrorCode::DestinationUnavailable);
}

#[test]
fn background_publishes_follow_what_a_publish_costs() {
    // A small deployment shows a commit within ~10 ms; a large one keeps publishing at most
    // every 100 ms, about 5 % of a core whatever a publish takes.
    assert_eq!(publish_every(Duration::from_micros(50)), PUBLISH_EVERY_MIN);
    assert_eq!(publish_every(Duration::from_millis(2)), Duration::from_millis(40));
    assert_eq!(publish_every(Duration::from_millis(30)), PUBLISH_EVERY);
}
