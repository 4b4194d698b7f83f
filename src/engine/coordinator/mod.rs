//! The coordinator task: owns every mirror's in-memory state, applies state-machine transitions,
//! persists them, and drives each mirror's data path.
//!
//! Everything that changes state runs here, one message at a time. Slow Kafka reads that only
//! feed the snapshot (lag, source metadata) run in spawned tasks and come back as messages, so a
//! slow or unreachable source never stalls commands for other mirrors.
//!
//! Persistence rule (DESIGN.md section 3): a transition is written to `__mirror_state` before its
//! side effects run. Positions are the exception by design: the data path writes them in the same
//! transaction as the records they cover (see `persist::progress_encoder`), so the partition-state
//! record carries the position as of the last lifecycle transition and the position records carry
//! the latest one; loading takes whichever is further.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch};

use crate::data_path::{
    self as pipe, AssignSpec, Finish, PartitionFault, PipeCommand, PipeConfig, PipeError, PipeEvent,
};
use crate::domain::{
    ErrorCode, Event, EventKind, Jitter, MirrorPosition, PartitionRecord, PartitionState, StopPoint, Timestamp,
    TransitionError, Truncation, roll_up, transition, transition_with,
};
use crate::kafka::state_log;
use crate::kafka::{IsolationLevel, KafkaError, OffsetSpec};

use self::actions::{Planned, assign_spec};
use self::projection::{lag_records, next_to_mirror, source_writes_after_stop};
use super::metadata;
use super::persist::{self, Loaded, StoredMirror};
use super::ports::{Admin, ClusterAdmin, Ports, StateStore, UnusableAdmin, WriterRole};
use super::snapshot::*;
use super::*;

// Keeping the coordinator free for stops and pauses: slow source calls off the task, the
// priority lane (see the module's documentation).
mod off_loop;
// Replacing a mirror's data path when its source connection changes.
mod source_change;
// Carrying out the actions transitions return, batched.
mod actions;
// The lifecycle calls an operator makes.
mod lifecycle;
// Starting partitions: a topic's start and PREPARING → MIRRORING.
mod starting;
// Startup restore, data-path events and retries.
mod recovery;
// FAILED partitions of a cluster that answers again are retried at once.
mod cluster_watch;
// Periodic refreshes feeding the snapshot and the metadata sync.
mod refresh;
// Slots: ownership and one data path per slot.
mod slots;
pub use slots::slot_transactional_id;
// Idle slots' data paths closed, their partitions woken when records arrive.
mod idle;
// Several instances: membership, the state tail, commands and takeovers.
mod group;
// Failback: adopting the old source's topic from the lineage in the source's state.
mod failback;
// Start planning off the loop: failback plans, divergence checks, quarantine copies.
mod planning;
// Reads pages ask of Kafka (lineage, topic configs): shared, cached, bounded.
mod reads;
// The topic policy carried out: discovery of source topics, exclusions stopped.
mod discovery;
// A planned switch-over: stop once every partition caught up, the wait off the loop.
mod promote;
// Approval and drill records; a drill's canary leaving its mirror.
mod audit;
// The state write queue and its flush.
mod writes;
// Mirror create / update / delete.
mod mirrors;
// The snapshot, projected from the coordinator's state.
mod projection;
// The mirrors by name, with lookups that return what is missing instead of panicking.
mod table;
// The runtime view of mirrors, topics, partitions and data paths; the loop's own messages.
mod runtime;
use self::runtime::*;

use crate::clock::now;

impl Request {
    fn name(&self) -> &'static str {
        match self {
            Request::CreateMirror { .. } => "create mirror",
            Request::UpdateMirror { .. } => "update mirror",
            Request::DeleteMirror { .. } => "delete mirror",
            Request::Lifecycle(_) => "lifecycle call",
            Request::RefreshNow { .. } => "refresh now",
            Request::Lineage { .. } => "lineage",
            Request::TopicConfigs { .. } => "topic configs",
            Request::PreviewPolicy { .. } => "topic policy preview",
            Request::Shutdown { .. } => "shutdown",
            Request::RecordOperation { .. } => "record operation",
            Request::RecordDrill { .. } => "record drill",
            Request::DrillTarget { .. } => "drill target",
            Request::ForgetTopic { .. } => "forget topic",
        }
    }
}

/// Logs a step of the coordinator's loop that held it for at least `pipe::SLOW_TO_LOG`: a
/// lifecycle call that queued behind it (even a stop, which goes first only between steps) waited
/// that long, and this says for what.
fn log_slow_step(step: &str, began: Instant) {
    let took = began.elapsed();
    if took >= pipe::SLOW_TO_LOG {
        tracing::info!(ms = took.as_millis() as u64, "slow coordinator step: {step}");
    }
}

pub(super) struct Coordinator {
    config: EngineConfig,
    destination_admin: Admin,
    destination_cluster_id: String,
    destination_brokers: Vec<BrokerSnapshot>,
    writer: Arc<dyn StateStore>,
    /// The periodic heartbeat's own writer, off the loop (`group::Heartbeat`).
    heartbeat: group::Heartbeat,
    /// The clusters, the state topic and the data paths (`engine::ports`).
    ports: Arc<dyn Ports>,
    state_partitions: i32,
    /// The slots this process owns (`slots`): every one, standalone.
    owned: BTreeSet<i32>,
    /// Membership and the state tail, when slots are shared with other instances (`group`).
    group: Option<group::Group>,
    /// When this instance started (the instances view).
    started_at: Timestamp,
    mirrors: table::MirrorTable,
    snapshot_tx: watch::Sender<Arc<Snapshot>>,
    internal_tx: mpsc::UnboundedSender<Internal>,
    /// The records to write before their actions run, and those a failed write did not store.
    writes: writes::WriteQueue,
    /// The clusters FAILED partitions wait on (`cluster_watch`).
    cluster_watch: BTreeMap<cluster_watch::ClusterKey, cluster_watch::Watch>,
    op_seq: u64,
    rng: u64,
    /// The engine-level writer was fenced by another instance: read-only from now on.
    fenced: Option<String>,
    offset_maps: persist::OffsetMaps,
    /// Topic lineage reads asked by pages and the API (bounded: `reads`).
    lineage_reads: reads::SharedReads<Result<Option<crate::engine::TopicLineage>, EngineError>>,
    /// Topic config reads (source beside destination) asked by pages and the API.
    config_reads: reads::SharedReads<Result<Vec<crate::engine::ConfigRow>, EngineError>>,
    operations: persist::Operations,
    runtime: tokio::runtime::Handle,
    /// Stops and pauses ([`EngineHandle::lifecycle`] sends them here): served first.
    priority_rx: mpsc::Receiver<Request>,
    /// Slot changes from the group membership (group ownership): served before every loop step
    /// and between two topics of a long call, like the priority lane (`serve_urgent`).
    membership_rx: Option<mpsc::UnboundedReceiver<crate::kafka::membership::MembershipEvent>>,
    /// What the state tail read (group ownership): applied as a loop step of its own, and
    /// between two topics of a long call (`serve_between_topics`).
    tail_rx: Option<mpsc::UnboundedReceiver<state_log::TailBatch>>,
    /// When a long call last published the snapshot between two of its topics.
    published_between: Option<Instant>,
    /// Commands waiting for slow source calls, and the priority lane's bookkeeping.
    off_loop: off_loop::OffLoop,
    /// Approval records by the ID of the operation that carries them, shared with the handle.
    approvals: super::approvals::Approvals,
    /// Every drill kept, by (mirror, ID).
    drills: BTreeMap<(String, String), crate::store::DrillValue>,
    /// Break-glass calls recorded by this instance since it started, by (mirror, action).
    break_glass: BTreeMap<(String, String), u64>,
    /// Audit entries this instance wrote that the state topic's tail may not have read back yet
    /// (`audit::OwnWrites`): laid over the views rebuilt from the state topic, so a request is
    /// readable the moment its call answers.
    own_writes: audit::OwnWrites,
}

/// The cluster a failed Kafka call went to. A lifecycle call's Kafka failure becomes a problem
/// and a partition error by this alone ([`kafka_problem`], [`Cluster::error_code`]), so every
/// call site reports the same failure the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Cluster {
    Source,
    Destination,
}

impl Cluster {
    /// The problem kind of a failed call to this cluster.
    pub(super) fn problem_kind(self) -> ProblemKind {
        match self {
            Cluster::Source => ProblemKind::SourceUnreachable,
            Cluster::Destination => ProblemKind::DestinationUnavailable,
        }
    }

    /// The partition error of a partition failed because this cluster did not answer.
    pub(super) fn error_code(self) -> ErrorCode {
        match self {
            Cluster::Source => ErrorCode::SourceUnreachable,
            Cluster::Destination => ErrorCode::DestinationUnavailable,
        }
    }
}

/// The one conversion of a Kafka error of a lifecycle call into its problem.
fn kafka_problem(cluster: Cluster, e: &KafkaError) -> Problem {
    Problem { kind: cluster.problem_kind(), detail: e.to_string() }
}

pub(super) async fn start(config: EngineConfig) -> Result<(EngineHandle, tokio::task::JoinHandle<()>), EngineError> {
    let ports = super::ports::KafkaPorts::connect(&config).map_err(|e| EngineError::Destination(e.to_string()))?;
    start_with_ports(config, Arc::new(ports)).await
}

/// [`start`] on the given clusters (the unit tests give it a fake: `engine::fake`).
pub(super) async fn start_with_ports(
    config: EngineConfig,
    ports: Arc<dyn Ports>,
) -> Result<(EngineHandle, tokio::task::JoinHandle<()>), EngineError> {
    let dest_err = |e: KafkaError| EngineError::Destination(e.to_string());
    let destination_admin = ports.destination();
    let cluster = destination_admin.describe_cluster().await.map_err(dest_err)?;
    let state_partitions =
        ports.ensure_state_topic(&config.state_topic, config.state_partitions).await.map_err(dest_err)?;

    // First read: which mirrors exist.
    let records = read_state(&config, &*ports, None).await?;
    let in_group = matches!(config.ownership, Ownership::Group { .. });
    let (mut loaded, warnings) = persist::load(&records, &config.sealer);
    for w in &warnings {
        tracing::warn!(target: "kmirror::state", "{w}");
    }

    // The engine-level writer: creating it fences any earlier instance's writer.
    let writer = ports.open_state_writer(&config, WriterRole::Engine).await.map_err(dest_err)?;

    let (snapshot_tx, snapshot_rx) = watch::channel(Arc::new(Snapshot::default()));
    let (internal_tx, internal_rx) = mpsc::unbounded_channel();
    let read_permits = Arc::new(tokio::sync::Semaphore::new(reads::READS_AT_ONCE));
    let (priority_tx, priority_rx) = mpsc::channel(64);
    let mut coord = Coordinator {
        config: config.clone(),
        destination_admin,
        destination_cluster_id: cluster.cluster_id,
        destination_brokers: cluster
            .nodes
            .iter()
            .map(|n| BrokerSnapshot { id: n.id, host: n.host.clone(), port: n.port, rack: n.rack.clone() })
            .collect(),
        writer,
        heartbeat: group::Heartbeat::default(),
        ports: Arc::clone(&ports),
        state_partitions,
        owned: if in_group { BTreeSet::new() } else { (0..state_partitions).collect() },
        group: None,
        started_at: now(),
        mirrors: table::MirrorTable::default(),
        snapshot_tx,
        internal_tx,
        writes: writes::WriteQueue::new(tokio::time::Instant::now()),
        cluster_watch: BTreeMap::new(),
        op_seq: 0,
        rng: (now().as_millis() as u64) | 1,
        fenced: None,
        offset_maps: Arc::new(RwLock::new(HashMap::new())),
        lineage_reads: reads::SharedReads::new(Arc::clone(&read_permits)),
        config_reads: reads::SharedReads::new(read_permits),
        operations: Arc::new(RwLock::new(std::collections::VecDeque::new())),
        runtime: tokio::runtime::Handle::current(),
        priority_rx,
        membership_rx: None,
        tail_rx: None,
        published_between: None,
        off_loop: off_loop::OffLoop::default(),
        approvals: Arc::new(RwLock::new(HashMap::new())),
        drills: BTreeMap::new(),
        break_glass: BTreeMap::new(),
        own_writes: audit::OwnWrites::default(),
    };

    if in_group {
        // Nothing is owned before the group says so: install the view, follow the state topic
        // from where this read ended, and join (`group`).
        coord.install(&loaded);
        *coord.offset_maps.write().unwrap_or_else(|e| e.into_inner()) = std::mem::take(&mut loaded.offset_maps);
        *coord.operations.write().unwrap_or_else(|e| e.into_inner()) = std::mem::take(&mut loaded.operations).into();
        coord.install_audit(&mut loaded);
        coord.fence_legacy(loaded.mirrors.iter().map(|m| m.stored.spec.name.as_str())).await;
        let start = group::tail_start(&records, state_partitions);
        let (state, _) =
            crate::store::MaterializedState::rebuild(records.iter().map(|r| (r.key.as_deref(), r.value.as_deref())));
        group::check_compatible(&config, state_partitions, &state, now()).map_err(EngineError::Incompatible)?;
        // Announce this instance (no slots yet) before joining: by the time it owns slots its
        // heartbeat is in the state topic, so an incompatible instance started after that sees
        // it live and refuses. Without this the first heartbeat came with the first takeover,
        // and a second deployment started in that moment (CI did) ran on the same state topic.
        coord.writes.push(coord.heartbeat_record());
        if let Err(e) = coord.flush().await {
            tracing::warn!("cannot announce this instance before joining: {e}");
        }
        let mut g = group::Group::new(state, &start);
        let (tail_tx, tail_rx) = mpsc::unbounded_channel();
        g.tail = Some(ports.tail_state(&config, &start, tail_tx).map_err(dest_err)?);
        let (member_tx, member_rx) = mpsc::unbounded_channel();
        g.member = Some(ports.join_group(&config, member_tx.clone()).map_err(dest_err)?);
        g.member_tx = Some(member_tx);
        coord.group = Some(g);
        coord.membership_rx = Some(member_rx);
        coord.tail_rx = Some(tail_rx);
        match ports.open_state_writer(&config, WriterRole::Heartbeat).await {
            Ok(w) => coord.heartbeat.writer = Some(w),
            // Heartbeats then go through the engine's writer, on the loop (as before).
            Err(e) => tracing::warn!("cannot open the heartbeat writer: {e}; heartbeats use the state writer"),
        }
        coord.mark_interrupted_drills().await;
        return Ok(coord.launch(priority_tx, snapshot_rx, internal_rx));
    }

    // Start every mirror's data paths first: each one fences its slot's previous writer (and
    // aborts its open transaction), so the second read below sees final positions.
    let mut ready = Vec::new();
    coord.fence_legacy(loaded.mirrors.iter().map(|m| m.stored.spec.name.as_str())).await;
    for m in &loaded.mirrors {
        let name = m.stored.spec.name.clone();
        coord.add_mirror(m.stored.clone());
        let slots: BTreeSet<i32> = m
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(|(p, _)| slots::slot_of_partition(&name, &t.source_topic_id, *p, state_partitions))
            })
            .filter(|s| coord.owns(*s))
            .collect();
        for slot in slots {
            if let Some(rx) = coord.spawn_pipe(&name, slot) {
                ready.push(rx);
            }
        }
    }
    coord.wait_ready(ready).await;
    let records = read_state(&config, &*ports, None).await?;
    let (mut loaded, _) = persist::load(&records, &config.sealer);
    *coord.offset_maps.write().unwrap_or_else(|e| e.into_inner()) = std::mem::take(&mut loaded.offset_maps);
    *coord.operations.write().unwrap_or_else(|e| e.into_inner()) = std::mem::take(&mut loaded.operations).into();
    coord.install_audit(&mut loaded);
    coord.restore(loaded).await;
    coord.mark_interrupted_drills().await;
    Ok(coord.launch(priority_tx, snapshot_rx, internal_rx))
}

impl Coordinator {
    /// Publishes the first snapshot and runs the coordinator task; returns its handle.
    fn launch(
        self,
        priority_tx: mpsc::Sender<Request>,
        snapshot: watch::Receiver<Arc<Snapshot>>,
        internal_rx: mpsc::UnboundedReceiver<Internal>,
    ) -> (EngineHandle, tokio::task::JoinHandle<()>) {
        self.publish();
        let (tx, rx) = mpsc::channel(64);
        let handle = EngineHandle {
            tx,
            priority_tx,
            snapshot,
            offset_maps: Arc::clone(&self.offset_maps),
            operations: Arc::clone(&self.operations),
            approvals: Arc::clone(&self.approvals),
            deciding: Arc::new(tokio::sync::Mutex::new(())),
        };
        (handle, tokio::spawn(self.run(rx, internal_rx)))
    }
}

/// The next message of a group-ownership channel (never, for an instance outside a group).
async fn next_of<T>(rx: &mut Option<mpsc::UnboundedReceiver<T>>) -> Option<T> {
    match rx {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// The state topic's committed records: all of them, or those of the partitions in `only`.
async fn read_state(
    config: &EngineConfig,
    ports: &dyn Ports,
    only: Option<&[i32]>,
) -> Result<Vec<state_log::LogRecord>, EngineError> {
    ports.read_state(config, only).await.map_err(|e| state_read_error(&config.state_topic, &e))
}

/// Why the state topic could not be read. A state topic that is gone (deleted between its
/// creation check and the read, e.g. by an operator cleaning up during start-up) is not an
/// unavailable destination: the cluster answered, and retrying does not bring the state back.
fn state_read_error(state_topic: &str, e: &KafkaError) -> EngineError {
    if e.kind().is_some_and(crate::kafka::KafkaErrorKind::is_topic_gone) {
        return EngineError::rejected(
            ProblemKind::DestinationUnavailable,
            format!(
                "the state topic {state_topic} disappeared from the destination while kmirror read it \
                 (deleted during start-up?). It holds every mirror's state: start kmirror again to \
                 create an empty one (the mirrors recorded in the deleted topic are gone) ({e})"
            ),
        );
    }
    EngineError::Destination(format!("cannot read {state_topic}: {e}"))
}

/// What woke the coordinator's loop (see `Coordinator::run`).
enum Wake {
    Priority(Request),
    Request(Request),
    Internal(Internal),
    LagTick,
    MetadataTick,
    RetryTick,
    HeartbeatTick,
    PublishTick,
}

/// The most often background events republish the snapshot: see [`publish_every`].
const PUBLISH_EVERY: Duration = Duration::from_millis(100);

/// The least time between two publishes for background events.
const PUBLISH_EVERY_MIN: Duration = Duration::from_millis(10);

/// How long background events wait for their publish, given what the last publish took: 20 times
/// that, between [`PUBLISH_EVERY_MIN`] and [`PUBLISH_EVERY`]. Publishing is then at most about
/// 5 % of a core whatever the deployment's size: a few partitions show a commit within ~10 ms
/// (the API and the pages see a partition catch up that much sooner; a fixed 100 ms added up
/// to 100 ms to every progress a caller polls for), and thousands of partitions, whose snapshot
/// takes milliseconds to build, keep the 100 ms.
fn publish_every(last_publish_took: Duration) -> Duration {
    (last_publish_took * 20).clamp(PUBLISH_EVERY_MIN, PUBLISH_EVERY)
}

/// How long a periodic tick's own work (retries due, the heartbeat, spawning refreshes) waits
/// for its publish. Those ticks come every 500 ms whether or not anything changed, and an idle
/// instance of 10,000 partitions then rebuilt its snapshot twice a second for nothing; what they
/// change shows within a second, and what the refreshes they spawn bring back (lag, metadata)
/// publishes as any background event does.
const PUBLISH_AFTER_TICK: Duration = Duration::from_secs(1);

/// How many earlier-layout fences a start-up runs at once (`Coordinator::fence_legacy`): enough
/// for 16 mirrors in one round trip, few enough producers (each with its own threads) for a
/// deployment of a thousand mirrors.
const LEGACY_FENCES_AT_ONCE: usize = 32;

/// See [`lag_refresh_every`].
const LAG_REFRESH_PER_PARTITION: Duration = Duration::from_millis(1);

/// Offset-map batches deleted per mirror per prune round (one tombstone each, ~150 bytes).
const PRUNE_BATCHES_PER_ROUND: usize = 20_000;

impl Coordinator {
    async fn run(mut self, mut rx: mpsc::Receiver<Request>, mut internal_rx: mpsc::UnboundedReceiver<Internal>) {
        let mut lag_tick = tokio::time::interval(self.config.lag_refresh_interval);
        lag_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut meta_tick = tokio::time::interval(self.config.metadata_refresh_interval);
        meta_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut retry_tick = tokio::time::interval(Duration::from_millis(500));
        retry_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut heartbeat_tick = tokio::time::interval(group::HEARTBEAT_EVERY);
        heartbeat_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // Background events (a commit every few milliseconds under load) publish at most every
        // `publish_every`: rebuilding the snapshot of thousands of partitions per commit cost more
        // CPU than the data path. Requests publish at once (in `handle`).
        let mut dirty = false;
        // Only a periodic tick ran since the last publish (see `PUBLISH_AFTER_TICK`).
        let mut ticked = false;
        let mut last_publish = tokio::time::Instant::now();
        let mut every = PUBLISH_EVERY;
        loop {
            // Slot changes, then stops and pauses that queued while the last step ran, go before
            // anything else.
            self.serve_urgent().await;
            // The select only says what woke the loop; the step runs below, timed once: a step
            // that held the loop for long is logged, since a stop waits for the step in progress
            // (the priority lane is served between steps).
            let wake = tokio::select! {
                Some(req) = self.priority_rx.recv() => Wake::Priority(req),
                Some(ev) = next_of(&mut self.membership_rx) => Wake::Internal(Internal::Membership(ev)),
                Some(b) = next_of(&mut self.tail_rx) => Wake::Internal(Internal::Tail(b)),
                req = rx.recv() => match req {
                    Some(req) => Wake::Request(req),
                    None => break,
                },
                Some(msg) = internal_rx.recv() => Wake::Internal(msg),
                _ = lag_tick.tick() => Wake::LagTick,
                _ = meta_tick.tick() => Wake::MetadataTick,
                _ = retry_tick.tick() => Wake::RetryTick,
                _ = heartbeat_tick.tick(), if self.group.is_some() => Wake::HeartbeatTick,
                _ = tokio::time::sleep_until(last_publish + if dirty { every } else { PUBLISH_AFTER_TICK }),
                    if dirty || ticked => Wake::PublishTick,
            };
            let began = Instant::now();
            let step = match wake {
                Wake::Priority(req) => {
                    self.handle_priority(req).await;
                    "priority request"
                }
                Wake::Request(Request::Shutdown { reply }) => {
                    self.shutdown().await;
                    let _ = reply.send(());
                    return;
                }
                Wake::Request(req) => {
                    let name = req.name();
                    self.handle(req).await;
                    name
                }
                Wake::Internal(msg) => {
                    let name = msg.name();
                    self.internal(msg).await;
                    dirty = true;
                    name
                }
                Wake::LagTick => {
                    self.spawn_lag_refresh();
                    ticked = true;
                    "lag refresh"
                }
                Wake::MetadataTick => {
                    self.retry_source_client(None).await;
                    self.spawn_metadata_refresh(None);
                    self.spawn_failback_watch(None);
                    self.spawn_offset_map_prune(None);
                    ticked = true;
                    "metadata refresh"
                }
                Wake::RetryTick => {
                    self.retry_due().await;
                    ticked = true;
                    "retries"
                }
                Wake::HeartbeatTick => {
                    self.periodic_heartbeat().await;
                    ticked = true;
                    "heartbeat"
                }
                Wake::PublishTick => "publish tick",
            };
            log_slow_step(step, began);
            let since = last_publish.elapsed();
            if (dirty && since >= every) || (ticked && since >= PUBLISH_AFTER_TICK) {
                let began = Instant::now();
                self.publish();
                dirty = false;
                ticked = false;
                every = publish_every(began.elapsed());
                last_publish = tokio::time::Instant::now();
                log_slow_step("publish", began);
            }
        }
        self.shutdown().await;
    }

    async fn shutdown(&mut self) {
        if let Some(g) = self.group.as_mut() {
            // Stop reading first; the membership closes last (a static member does not leave:
            // its slots wait for it for a session timeout, so a restart moves nothing).
            if let Some(t) = g.tail.take() {
                let _ = tokio::task::spawn_blocking(move || t.close()).await;
            }
        }
        for name in self.mirrors.names() {
            if self.mirrors.get(&name).is_none_or(|m| m.pipes.is_empty()) {
                continue;
            }
            self.shut_down_pipes(&name, None, true).await;
            tracing::info!(mirror = %name, "data paths stopped");
        }
        if let Some(m) = self.group.as_mut().and_then(|g| g.member.take()) {
            // Not awaited: closing revokes every slot once more and waits for an answer this
            // loop, ending, no longer gives. The data paths are down already, and a static member
            // does not leave the group anyway (its slots wait a session timeout for it).
            let _ = std::thread::Builder::new().name("membership-close".into()).spawn(move || m.close());
        }
    }

    async fn handle(&mut self, req: Request) {
        match req {
            // Checked here, then the source is asked off the loop; `off_loop_done` finishes it.
            Request::CreateMirror { spec, actor, reply } => self.begin_create(spec, actor, reply).await,
            Request::UpdateMirror { name, update, actor, reply } => {
                let r = self.update_mirror(&name, update, &actor).await;
                self.record_mirror_change(&name, OperationKind::UpdateMirror, &actor, &r).await;
                // Readers see the outcome as soon as the caller does.
                self.publish();
                let _ = reply.send(r);
            }
            Request::DeleteMirror { name, actor, reply } => {
                let r = self.delete_mirror(&name, &actor).await;
                self.record_mirror_change(&name, OperationKind::DeleteMirror, &actor, &r).await;
                // Readers see the outcome as soon as the caller does.
                self.publish();
                let _ = reply.send(r);
            }
            // Checked here, then the source is read off the loop; `off_loop_done` applies it.
            Request::Lifecycle(call) if matches!(call.op, LifecycleOp::Start { .. }) => self.begin_start(call),
            // Checked here; the wait for catch-up runs off the loop (`promote`).
            Request::Lifecycle(call) if call.promote.is_some() => self.begin_promote(call).await,
            Request::Lifecycle(LifecycleCall { mirror, selector, op, validate_only, actor, reply, origin, .. }) => {
                let r = self.lifecycle(&mirror, selector, op, validate_only, &actor, origin).await;
                // Readers see the outcome as soon as the caller does.
                self.publish();
                let _ = reply.send(r);
            }
            Request::RefreshNow { mirror, reply } => {
                self.retry_source_client(Some(&mirror)).await;
                let r = if let Some(m) = self.mirrors.get_mut(&mirror) {
                    // Topics discovery refused are tried again by an explicit refresh.
                    m.discovery.retry_refused();
                    self.spawn_metadata_refresh(Some(&mirror));
                    self.spawn_offset_map_prune(Some(&mirror));
                    self.spawn_failback_watch(Some(&mirror));
                    Ok(())
                } else {
                    Err(EngineError::mirror_not_found(&mirror))
                };
                // Readers see the outcome as soon as the caller does.
                self.publish();
                let _ = reply.send(r);
            }
            Request::Lineage { mirror, topic, reply } => self.spawn_lineage(mirror, topic, reply),
            Request::TopicConfigs { mirror, topic, reply } => self.spawn_topic_configs(mirror, topic, reply),
            Request::PreviewPolicy { mirror, policy, reply } => self.preview_policy(mirror, policy, reply),
            Request::Shutdown { .. } => unreachable!("handled in run"),
            Request::RecordOperation { op, approval, reply } => {
                let r = self.record_entry(op, approval).await;
                self.publish();
                let _ = reply.send(r);
            }
            Request::RecordDrill { value, reply } => {
                let r = self.record_drill(value).await;
                let _ = reply.send(r);
            }
            Request::DrillTarget { mirror, reply } => {
                let _ = reply.send(self.drill_target(&mirror));
            }
            Request::ForgetTopic { mirror, topic, reply } => {
                let r = self.forget_topic(&mirror, &topic).await;
                let _ = reply.send(r);
            }
        }
    }

    fn jitter(&mut self) -> Jitter {
        // xorshift64*: jitter only needs to differ between partitions and retries.
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        Jitter::new((self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64)
    }

    fn check_writable(&self) -> Result<(), EngineError> {
        match &self.fenced {
            Some(why) => Err(EngineError::rejected(ProblemKind::Fenced, why.clone())),
            None => Ok(()),
        }
    }

    // ----- transitions -------------------------------------------------------------------

    /// Applies `event` to a partition in memory and queues the new record. Returns the actions.
    fn apply(
        &mut self,
        mirror: &str,
        topic: &str,
        partition: i32,
        event: Event,
    ) -> Result<Vec<crate::domain::Action>, table::ApplyError> {
        let t = now();
        let p = self.mirrors.partition_mut(mirror, topic, partition)?;
        let kind = event.kind();
        let step = transition_with(&p.record, event, t, &self.config.retry_policy)?;
        p.record = step.next;
        // A slot whose partitions just moved keeps its data path (`idle`): a pause is often
        // followed by a resume.
        p.active_at = tokio::time::Instant::now();
        if kind != EventKind::Progress {
            // Progress is persisted by the data path itself, in the transaction it describes.
            // A command for a partition another instance owns says so: its owner runs it even
            // when this instance's view was behind (`PartitionStateValue::command`).
            let for_owner =
                persist::COMMANDS.contains(&kind) && self.in_group() && !self.owns_partition(mirror, topic, partition);
            self.queue_partition(mirror, topic, partition, for_owner.then_some(kind));
        }
        Ok(step.actions)
    }

    /// Applies `Event::Error` and returns its actions. Most callers drop them because the data
    /// path already let the partition go (it reported the fault, or was halted first); a caller
    /// that must release it runs them (see `actions::run_actions`).
    fn fail(
        &mut self,
        mirror: &str,
        topic: &str,
        partition: i32,
        code: ErrorCode,
        message: String,
    ) -> Vec<crate::domain::Action> {
        let jitter = self.jitter();
        match self.apply(mirror, topic, partition, Event::error(code, message.clone(), jitter)) {
            Ok(actions) => {
                tracing::warn!(%mirror, %topic, partition, ?code, "partition failed: {message}");
                actions
            }
            Err(e) if e.is_harmless() => Vec::new(),
            Err(e) => {
                tracing::warn!(%mirror, %topic, partition, "cannot record failure: {e}");
                Vec::new()
            }
        }
    }
}

impl Coordinator {
    /// Reads a mirror topic's configs on both clusters off the loop and answers with the
    /// comparison (`config_sync::compare`).
    fn spawn_topic_configs(
        &mut self,
        mirror: String,
        topic: String,
        reply: tokio::sync::oneshot::Sender<Result<Vec<crate::engine::ConfigRow>, EngineError>>,
    ) {
        let Some(m) = self.mirrors.get(&mirror) else {
            let _ = reply.send(Err(EngineError::mirror_not_found(&mirror)));
            return;
        };
        if !m.topics.contains_key(&topic) {
            let _ = reply.send(Err(table::Missing::topic(&mirror, &topic).into()));
            return;
        }
        let (source, destination) = (Arc::clone(&m.source_admin), Arc::clone(&self.destination_admin));
        let now = std::time::Instant::now();
        self.config_reads.answer(&mirror, &topic.clone(), now, reply, move || {
            Box::pin(async move {
                let (src, dst) = futures_util::future::join(
                    source.describe_topic_configs(&topic),
                    destination.describe_topic_configs(&topic),
                )
                .await;
                match (src, dst) {
                    (Err(e), _) => Err(EngineError::rejected(
                        Cluster::Source.problem_kind(),
                        format!("cannot read the configs of {topic:?} on the source: {e}"),
                    )),
                    (_, Err(e)) => Err(EngineError::rejected(
                        Cluster::Destination.problem_kind(),
                        format!("cannot read the configs of {topic:?} on the destination: {e}"),
                    )),
                    (Ok(s), Ok(d)) => {
                        Ok(crate::domain::config_sync::compare(&metadata::overrides(s), &metadata::overrides(d)))
                    }
                }
            })
        });
    }
}

// Every edge the coordinator drives, against the fake clusters of `engine::fake`.
#[cfg(test)]
mod tests;

/// How long `store_again` waits for the destination to answer before it writes.
const STORE_AGAIN_PROBE: Duration = Duration::from_secs(2);
