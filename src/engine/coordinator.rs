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
use std::time::Duration;

use tokio::sync::{mpsc, watch};

use crate::domain::{
    ErrorCode, Event, Jitter, MirrorPosition, PartitionRecord, PartitionState, StopPoint, Timestamp, TransitionError,
    Truncation, roll_up, transition,
};
use crate::kafka::pipe::{self, AssignSpec, Finish, PartitionFault, PipeCommand, PipeConfig, PipeEvent};
use crate::kafka::state_log::{self, StateWriter};
use crate::kafka::{IsolationLevel, KafkaAdmin, KafkaError, OffsetSpec};

use super::metadata;
use super::persist::{self, Loaded, StoredMirror};
use super::snapshot::*;
use super::*;

// Keeping the coordinator free for stops and pauses: slow source calls off the task, the
// priority lane (see the module's documentation).
mod off_loop;
// Replacing a mirror's data path when its source connection changes.
mod source_change;

use crate::clock::now;

/// Latest offsets of a partition, refreshed for the snapshot.
#[derive(Debug, Clone, Copy, Default)]
struct Offsets {
    source_start: Option<i64>,
    source_lso: Option<i64>,
    source_hwm: Option<i64>,
    destination_hwm: Option<i64>,
}

#[derive(Debug, Clone)]
struct PartRt {
    record: PartitionRecord,
    offsets: Offsets,
    records_mirrored: u64,
    bytes_mirrored: u64,
    /// When the partition was last seen with no lag (for lag in seconds).
    caught_up_at: Option<Timestamp>,
    /// The source consumer's position when it moved past the committed position over records
    /// with nothing to mirror (transaction markers at the log end).
    fetch_position: Option<i64>,
}

impl PartRt {
    fn new(record: PartitionRecord) -> PartRt {
        PartRt {
            record,
            offsets: Offsets::default(),
            records_mirrored: 0,
            bytes_mirrored: 0,
            caught_up_at: None,
            fetch_position: None,
        }
    }
}

#[derive(Debug, Clone)]
struct TopicRt {
    source_topic_id: String,
    destination_topic_id: String,
    created_at: Timestamp,
    /// Consecutive metadata refreshes that did not find the source topic.
    missing_refreshes: u32,
    partitions: BTreeMap<i32, PartRt>,
}

struct PipeRt {
    tx: std::sync::mpsc::Sender<PipeCommand>,
    join: Option<std::thread::JoinHandle<()>>,
}

impl PipeRt {
    /// Asks the data path to end (its open transaction is aborted; committed state is final) and
    /// waits up to 30 s for it, then for its thread when `join` is set.
    async fn shut_down(self, join: bool) {
        let (reply, rx) = tokio::sync::oneshot::channel();
        if self.tx.send(PipeCommand::Shutdown { reply }).is_ok() {
            let _ = tokio::time::timeout(Duration::from_secs(30), rx).await;
        }
        if join && let Some(j) = self.join {
            let _ = tokio::task::spawn_blocking(move || j.join()).await;
        }
    }
}

struct MirrorRt {
    stored: StoredMirror,
    source_admin: KafkaAdmin,
    pipe: Option<PipeRt>,
    data_path: String,
    fenced: bool,
    observed_cluster_id: Option<String>,
    cluster_id_status: ClusterIdStatus,
    cluster_id_checked_at: Option<Timestamp>,
    cluster_id_error: Option<String>,
    topics: BTreeMap<String, TopicRt>,
    /// Topic name -> source topic ID, shared with the data path's position encoder.
    topic_ids: Arc<RwLock<HashMap<String, String>>>,
    /// Partitions whose next committed batch starts a new lineage (resync).
    new_lineage: Arc<RwLock<HashSet<(String, i32)>>>,
    /// Metadata sync health per kind.
    sync: Vec<SyncStatus>,
    /// Config values the topic-config sync applied, per (topic, config): tells drift from change.
    applied_configs: HashMap<(String, String), String>,
    /// Per-group offset sync outcome.
    group_views: Vec<metadata::GroupSyncView>,
    /// The mirror's LastMirrorEpochs record (all topics), rewritten whole on every stop.
    last_mirror_epochs: crate::store::LastMirrorEpochsValue,
    metadata_in_flight: bool,
    /// A refresh was asked for while one was running: run another when it ends, so the caller
    /// sees a refresh that started after its request.
    metadata_again: bool,
    lag_in_flight: bool,
    /// The next lag refresh is due then (see [`lag_refresh_every`]).
    lag_due: tokio::time::Instant,
    /// An offset-map prune (destination log starts) is being read.
    prune_in_flight: bool,
    /// A data path that died while the destination was unavailable restarts at this time.
    restart_pipe_at: Option<(tokio::time::Instant, String)>,
    /// Consecutive data-path restarts that found the destination unavailable.
    pipe_restarts: u32,
}

/// Messages from spawned helpers back to the coordinator.
enum Internal {
    Pipe(String, PipeEvent),
    Lag {
        mirror: String,
        offsets: Vec<((String, i32), Offsets)>,
        error: Option<String>,
    },
    Metadata {
        mirror: String,
        report: Box<metadata::RefreshReport>,
    },
    LogStarts {
        mirror: String,
        starts: Vec<((String, i32), i64)>,
    },
    /// A create's source check or a start's source reads, done off the coordinator task.
    OffLoop(Box<off_loop::Done>),
}

pub(super) struct Coordinator {
    config: EngineConfig,
    destination_admin: KafkaAdmin,
    destination_cluster_id: String,
    destination_brokers: Vec<BrokerSnapshot>,
    writer: Arc<StateWriter>,
    state_partitions: i32,
    mirrors: BTreeMap<String, MirrorRt>,
    snapshot_tx: watch::Sender<Arc<Snapshot>>,
    internal_tx: mpsc::UnboundedSender<Internal>,
    pending_writes: Vec<pipe::StateWrite>,
    op_seq: u64,
    rng: u64,
    /// The engine-level writer was fenced by another instance: read-only from now on.
    fenced: Option<String>,
    offset_maps: persist::OffsetMaps,
    operations: persist::Operations,
    runtime: tokio::runtime::Handle,
    /// Stops and pauses ([`EngineHandle::lifecycle`] sends them here): served first.
    priority_rx: mpsc::Receiver<Request>,
    /// Commands waiting for slow source calls, and the priority lane's bookkeeping.
    off_loop: off_loop::OffLoop,
}

fn kafka_problem(kind: ProblemKind, e: &KafkaError) -> Problem {
    Problem { kind, detail: e.to_string() }
}

pub(super) async fn start(config: EngineConfig) -> Result<(EngineHandle, tokio::task::JoinHandle<()>), EngineError> {
    let dest_err = |e: KafkaError| EngineError::Destination(e.to_string());
    let destination_admin =
        KafkaAdmin::connect(&config.destination_bootstrap, &config.destination_properties, config.request_timeout)
            .map_err(dest_err)?;
    let cluster = destination_admin.describe_cluster().await.map_err(dest_err)?;
    let state_partitions =
        state_log::ensure_state_topic(&destination_admin, &config.state_topic, config.state_partitions)
            .await
            .map_err(dest_err)?;

    // First read: which mirrors exist.
    let records = read_state(&config, &destination_admin).await?;
    let (loaded, warnings) = persist::load(&records);
    for w in &warnings {
        tracing::warn!(target: "kmirror::state", "{w}");
    }

    // The engine-level writer: creating it fences any earlier instance's writer.
    let writer = {
        let c = config.clone();
        tokio::task::spawn_blocking(move || {
            StateWriter::new(
                &c.destination_bootstrap,
                &c.destination_properties,
                &format!("{}.state", c.instance_id),
                &c.state_topic,
                c.request_timeout,
            )
        })
        .await
        .map_err(|e| EngineError::Destination(e.to_string()))?
        .map_err(dest_err)?
    };

    let (snapshot_tx, snapshot_rx) = watch::channel(Arc::new(Snapshot::default()));
    let (internal_tx, internal_rx) = mpsc::unbounded_channel();
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
        writer: Arc::new(writer),
        state_partitions,
        mirrors: BTreeMap::new(),
        snapshot_tx,
        internal_tx,
        pending_writes: Vec::new(),
        op_seq: 0,
        rng: (now().as_millis() as u64) | 1,
        fenced: None,
        offset_maps: Arc::new(RwLock::new(HashMap::new())),
        operations: Arc::new(RwLock::new(std::collections::VecDeque::new())),
        runtime: tokio::runtime::Handle::current(),
        priority_rx,
        off_loop: off_loop::OffLoop::default(),
    };

    // Start every mirror's data path first: each one fences its predecessor's producer (and
    // aborts its open transaction), so the second read below sees final positions.
    let mut ready = Vec::new();
    for m in &loaded.mirrors {
        if let Some(rx) = coord.add_mirror(m.stored.clone()) {
            ready.push(rx);
        }
    }
    coord.wait_ready(ready).await;
    let records = read_state(&config, &coord.destination_admin).await?;
    let (mut loaded, _) = persist::load(&records);
    *coord.offset_maps.write().unwrap_or_else(|e| e.into_inner()) = std::mem::take(&mut loaded.offset_maps);
    *coord.operations.write().unwrap_or_else(|e| e.into_inner()) = std::mem::take(&mut loaded.operations).into();
    coord.restore(loaded).await;
    coord.publish();

    let (tx, rx) = mpsc::channel(64);
    let handle = EngineHandle {
        tx,
        priority_tx,
        snapshot: snapshot_rx,
        offset_maps: Arc::clone(&coord.offset_maps),
        operations: Arc::clone(&coord.operations),
    };
    let join = tokio::spawn(coord.run(rx, internal_rx));
    Ok((handle, join))
}

async fn read_state(config: &EngineConfig, admin: &KafkaAdmin) -> Result<Vec<state_log::LogRecord>, EngineError> {
    state_log::read_to_end(
        admin,
        &config.destination_bootstrap,
        &config.destination_properties,
        &config.state_topic,
        config.request_timeout * 4,
    )
    .await
    .map_err(|e| EngineError::Destination(format!("cannot read {}: {e}", config.state_topic)))
}

/// The most often background events republish the snapshot.
const PUBLISH_EVERY: Duration = Duration::from_millis(100);

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
        // Background events (a commit every few milliseconds under load) publish at most every
        // PUBLISH_EVERY: rebuilding the snapshot of thousands of partitions per commit cost more
        // CPU than the data path. Requests publish at once (in `handle`).
        let mut publish_tick = tokio::time::interval(PUBLISH_EVERY);
        publish_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut dirty = false;
        let mut last_publish = std::time::Instant::now();
        loop {
            // Stops and pauses that queued while the last step ran go before anything else.
            self.serve_priority().await;
            tokio::select! {
                Some(req) = self.priority_rx.recv() => self.handle_priority(req).await,
                req = rx.recv() => {
                    let Some(req) = req else { break };
                    if let Request::Shutdown { reply } = req {
                        self.shutdown().await;
                        let _ = reply.send(());
                        return;
                    }
                    self.handle(req).await;
                }
                Some(msg) = internal_rx.recv() => {
                    self.internal(msg).await;
                    dirty = true;
                }
                _ = lag_tick.tick() => {
                    self.spawn_lag_refresh();
                    dirty = true;
                }
                _ = meta_tick.tick() => {
                    self.spawn_metadata_refresh(None);
                    self.spawn_offset_map_prune(None);
                    dirty = true;
                }
                _ = retry_tick.tick() => {
                    self.retry_due().await;
                    dirty = true;
                }
                _ = publish_tick.tick() => {}
            }
            if dirty && last_publish.elapsed() >= PUBLISH_EVERY {
                self.publish();
                dirty = false;
                last_publish = std::time::Instant::now();
            }
        }
        self.shutdown().await;
    }

    async fn shutdown(&mut self) {
        for (name, m) in self.mirrors.iter_mut() {
            if let Some(p) = m.pipe.take() {
                p.shut_down(true).await;
                tracing::info!(mirror = %name, "data path stopped");
            }
        }
    }

    async fn handle(&mut self, req: Request) {
        match req {
            // Checked here, then the source is asked off the loop; `off_loop_done` finishes it.
            Request::CreateMirror { spec, actor, reply } => self.begin_create(spec, actor, reply).await,
            Request::UpdateMirror { name, update, actor, reply } => {
                let r = self.update_mirror(&name, update, &actor).await;
                self.record_mirror_change(&name, "update_mirror", &actor, &r).await;
                // Readers see the outcome as soon as the caller does.
                self.publish();
                let _ = reply.send(r);
            }
            Request::DeleteMirror { name, actor, reply } => {
                let r = self.delete_mirror(&name, &actor).await;
                self.record_mirror_change(&name, "delete_mirror", &actor, &r).await;
                // Readers see the outcome as soon as the caller does.
                self.publish();
                let _ = reply.send(r);
            }
            // Checked here, then the source is read off the loop; `off_loop_done` applies it.
            Request::Lifecycle {
                mirror,
                selector,
                op: op @ LifecycleOp::Start { .. },
                validate_only,
                actor,
                reply,
            } => {
                self.begin_start(mirror, selector, op, validate_only, actor, reply);
            }
            Request::Lifecycle { mirror, selector, op, validate_only, actor, reply } => {
                let r = self.lifecycle(&mirror, selector, op, validate_only, &actor).await;
                // Readers see the outcome as soon as the caller does.
                self.publish();
                let _ = reply.send(r);
            }
            Request::RefreshNow { mirror, reply } => {
                let r = if self.mirrors.contains_key(&mirror) {
                    self.spawn_metadata_refresh(Some(&mirror));
                    self.spawn_offset_map_prune(Some(&mirror));
                    Ok(())
                } else {
                    Err(not_found(&mirror))
                };
                // Readers see the outcome as soon as the caller does.
                self.publish();
                let _ = reply.send(r);
            }
            Request::Shutdown { .. } => unreachable!("handled in run"),
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

    // ----- persistence -------------------------------------------------------------------

    fn queue_partition(&mut self, mirror: &str, topic: &str, partition: i32) {
        let Some(m) = self.mirrors.get(mirror) else { return };
        let Some(t) = m.topics.get(topic) else { return };
        let Some(p) = t.partitions.get(&partition) else { return };
        let w =
            persist::partition_state(mirror, topic, &t.source_topic_id, partition, &p.record, self.state_partitions);
        self.pending_writes.push(w);
    }

    fn queue_topic(&mut self, mirror: &str, topic: &str) {
        let Some(m) = self.mirrors.get(mirror) else { return };
        let Some(t) = m.topics.get(topic) else { return };
        let w = persist::topic(
            mirror,
            topic,
            &t.source_topic_id,
            &t.destination_topic_id,
            t.partitions.len(),
            t.created_at,
            self.state_partitions,
        );
        self.pending_writes.push(w);
    }

    /// Writes everything queued in one transaction.
    async fn flush(&mut self) -> Result<(), EngineError> {
        if self.pending_writes.is_empty() {
            return Ok(());
        }
        self.check_writable()?;
        let writes = std::mem::take(&mut self.pending_writes);
        let writer = Arc::clone(&self.writer);
        let r = tokio::task::spawn_blocking(move || writer.write(&writes))
            .await
            .map_err(|e| EngineError::Destination(e.to_string()))?;
        if let Err(e) = r {
            if let state_log::StateWriteError::Fenced(e) = e {
                let why = format!("another kmirror instance took over this destination: {e}");
                tracing::error!("{why}");
                self.fenced = Some(why.clone());
                for m in self.mirrors.values_mut() {
                    m.data_path = why.clone();
                }
                return Err(EngineError::rejected(ProblemKind::Fenced, why));
            }
            return Err(EngineError::Destination(format!("cannot write {}: {e}", self.config.state_topic)));
        }
        Ok(())
    }

    // ----- transitions -------------------------------------------------------------------

    /// Applies `event` to a partition in memory and queues the new record. Returns the actions.
    fn apply(
        &mut self,
        mirror: &str,
        topic: &str,
        partition: i32,
        event: Event,
    ) -> Result<Vec<crate::domain::Action>, TransitionError> {
        let t = now();
        let p = self
            .mirrors
            .get_mut(mirror)
            .and_then(|m| m.topics.get_mut(topic))
            .and_then(|t| t.partitions.get_mut(&partition))
            .expect("apply on a known partition");
        let is_progress = matches!(event, Event::Progress { .. });
        let step = transition(&p.record, event, t)?;
        p.record = step.next;
        if !is_progress {
            // Progress is persisted by the data path itself, in the transaction it describes.
            self.queue_partition(mirror, topic, partition);
        }
        Ok(step.actions)
    }

    fn fail(&mut self, mirror: &str, topic: &str, partition: i32, code: ErrorCode, message: String) {
        let jitter = self.jitter();
        match self.apply(mirror, topic, partition, Event::error(code, message.clone(), jitter)) {
            Ok(_) => tracing::warn!(%mirror, %topic, partition, ?code, "partition failed: {message}"),
            Err(e) if e.is_harmless() => {}
            Err(e) => tracing::warn!(%mirror, %topic, partition, "cannot record failure: {e}"),
        }
    }

    // ----- mirrors -----------------------------------------------------------------------

    /// Builds a mirror's runtime and starts its data path. Returns a receiver that resolves when
    /// the data path's producer is initialised (and any predecessor fenced).
    fn add_mirror(&mut self, stored: StoredMirror) -> Option<tokio::sync::oneshot::Receiver<()>> {
        let name = stored.spec.name.clone();
        let source_admin = match KafkaAdmin::connect(
            &stored.spec.source.bootstrap_servers,
            &stored.spec.source.properties,
            self.config.request_timeout.min(Duration::from_secs(10)),
        ) {
            Ok(a) => a,
            Err(e) => {
                tracing::error!(mirror = %name, "cannot create source client: {e}");
                // A broken client config: keep the mirror visible with the reason.
                KafkaAdmin::connect(&stored.spec.source.bootstrap_servers, &BTreeMap::new(), Duration::from_secs(5))
                    .ok()?
            }
        };
        let topic_ids = Arc::new(RwLock::new(HashMap::new()));
        let new_lineage = Arc::new(RwLock::new(HashSet::new()));
        let mut m = MirrorRt {
            stored,
            source_admin,
            pipe: None,
            data_path: "starting".into(),
            fenced: false,
            observed_cluster_id: None,
            cluster_id_status: ClusterIdStatus::Unknown,
            cluster_id_checked_at: None,
            cluster_id_error: None,
            topics: BTreeMap::new(),
            topic_ids,
            new_lineage,
            last_mirror_epochs: crate::store::LastMirrorEpochsValue { topics: Vec::new() },
            sync: SyncKind::ALL.iter().map(|k| SyncStatus::new(*k)).collect(),
            applied_configs: HashMap::new(),
            group_views: Vec::new(),
            metadata_in_flight: false,
            metadata_again: false,
            lag_in_flight: false,
            lag_due: tokio::time::Instant::now(),
            prune_in_flight: false,
            restart_pipe_at: None,
            pipe_restarts: 0,
        };
        let ready = self.spawn_pipe(&mut m);
        self.mirrors.insert(name, m);
        ready
    }

    fn spawn_pipe(&self, m: &mut MirrorRt) -> Option<tokio::sync::oneshot::Receiver<()>> {
        let name = m.stored.spec.name.clone();
        let config = PipeConfig {
            mirror: name.clone(),
            source_bootstrap: m.stored.spec.source.bootstrap_servers.clone(),
            source_properties: m.stored.spec.source.properties.clone(),
            destination_bootstrap: self.config.destination_bootstrap.clone(),
            destination_properties: self.config.destination_properties.clone(),
            transactional_id: format!("{}.mirror.{}", self.config.instance_id, name),
            commit_interval: self.config.commit_interval,
            commit_max_bytes: self.config.commit_max_bytes,
            state_topic: self.config.state_topic.clone(),
            transaction_timeout: self.config.request_timeout,
        };
        let encode = persist::progress_encoder(
            name.clone(),
            Arc::clone(&m.topic_ids),
            Arc::clone(&m.new_lineage),
            self.state_partitions,
        );
        let (ev_tx, mut ev_rx) = mpsc::unbounded_channel();
        let internal = self.internal_tx.clone();
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let mirror = name.clone();
        // Forward the pipe's events, tagged with the mirror, and signal readiness once.
        tokio::spawn(async move {
            let mut ready_tx = Some(ready_tx);
            while let Some(ev) = ev_rx.recv().await {
                if matches!(ev, PipeEvent::Ready | PipeEvent::Failed { .. })
                    && let Some(tx) = ready_tx.take()
                {
                    let _ = tx.send(());
                }
                if internal.send(Internal::Pipe(mirror.clone(), ev)).is_err() {
                    break;
                }
            }
        });
        match pipe::spawn(config, encode, ev_tx, self.runtime.clone()) {
            Ok((tx, join)) => {
                m.pipe = Some(PipeRt { tx, join: Some(join) });
                Some(ready_rx)
            }
            Err(e) => {
                m.data_path = format!("cannot start data path thread: {e}");
                None
            }
        }
    }

    async fn wait_ready(&self, ready: Vec<tokio::sync::oneshot::Receiver<()>>) {
        for rx in ready {
            let _ = tokio::time::timeout(self.config.request_timeout * 2, rx).await;
        }
    }

    /// The checks of a create that need no Kafka: run before the source is asked, and again when
    /// its answer is in (another create may have taken the name meanwhile).
    fn check_create(&self, spec: &MirrorSpec) -> Result<(), EngineError> {
        self.check_writable()?;
        validate_mirror_name(&spec.name)?;
        if spec.source.bootstrap_servers.trim().is_empty() {
            return Err(EngineError::rejected(ProblemKind::InvalidName, "source.bootstrap_servers must not be empty"));
        }
        if self.mirrors.contains_key(&spec.name) || self.off_loop.is_creating(&spec.name) {
            return Err(EngineError::rejected(
                ProblemKind::MirrorExists,
                format!("mirror {:?} already exists", spec.name),
            ));
        }
        check_group_patterns(&spec.sync)
    }

    /// Creates a mirror whose source answered with `cluster` (asked off the loop: see
    /// `off_loop::create_probe`). Returns a receiver that resolves when its data path is ready.
    async fn create_mirror(
        &mut self,
        mut spec: MirrorSpec,
        cluster: crate::kafka::ClusterDescription,
        actor: &Actor,
    ) -> Result<Option<tokio::sync::oneshot::Receiver<()>>, EngineError> {
        self.check_create(&spec)?;
        match &spec.expected_source_cluster_id {
            Some(expected) if *expected != cluster.cluster_id => {
                return Err(EngineError::rejected(
                    ProblemKind::SourceClusterIdMismatch,
                    format!("the source cluster ID is {} but {expected} was expected", cluster.cluster_id),
                ));
            }
            Some(_) => {}
            None => spec.expected_source_cluster_id = Some(cluster.cluster_id.clone()),
        }
        if cluster.cluster_id == self.destination_cluster_id {
            return Err(EngineError::rejected(
                ProblemKind::InvalidName,
                "the source is the destination cluster itself (a mirror loop)",
            ));
        }
        let stored = StoredMirror { spec, created_at: now(), updated_at: now(), created_acls: Vec::new() };
        self.pending_writes.push(persist::mirror(&stored, self.state_partitions));
        self.flush().await?;
        let name = stored.spec.name.clone();
        let ready = self.add_mirror(stored);
        if let Some(m) = self.mirrors.get_mut(&name) {
            m.observed_cluster_id = Some(cluster.cluster_id);
            m.cluster_id_status = ClusterIdStatus::Ok;
            m.cluster_id_checked_at = Some(now());
        }
        tracing::info!(mirror = %name, actor = %actor.identity, "mirror created");
        Ok(ready)
    }

    async fn update_mirror(&mut self, name: &str, update: MirrorUpdate, actor: &Actor) -> Result<(), EngineError> {
        self.check_writable()?;
        let m = self.mirrors.get(name).ok_or_else(|| not_found(name))?;
        let mut stored = m.stored.clone();
        if let Some(mut source) = update.source {
            // Secrets are write-only: a redacted value sent back means "keep the stored one".
            for (k, v) in source.properties.iter_mut() {
                if v == crate::domain::secrets::REDACTED
                    && let Some(old) = stored.spec.source.properties.get(k)
                {
                    *v = old.clone();
                }
            }
            stored.spec.source = source;
        }
        if let Some(id) = update.expected_source_cluster_id {
            stored.spec.expected_source_cluster_id = Some(id);
        }
        if let Some(sync) = update.sync {
            check_group_patterns(&sync)?;
            stored.spec.sync = sync;
        }
        // Only a real change restarts anything (a PUT that sends the same source, or `[redacted]`
        // for an unchanged secret, does not).
        let source_changed = stored.spec.source != m.stored.spec.source;
        stored.updated_at = now();
        self.pending_writes.push(persist::mirror(&stored, self.state_partitions));
        self.flush().await?;
        let m = self.mirrors.get_mut(name).expect("checked above");
        m.stored = stored;
        if source_changed {
            match KafkaAdmin::connect(
                &m.stored.spec.source.bootstrap_servers,
                &m.stored.spec.source.properties,
                self.config.request_timeout.min(Duration::from_secs(10)),
            ) {
                Ok(a) => m.source_admin = a,
                Err(e) => m.cluster_id_error = Some(e.to_string()),
            }
            // The data path's source consumer still runs with the old settings (a rotated
            // password would never reach it): replace it, resuming from committed positions.
            self.restart_data_path(name).await;
        }
        tracing::info!(mirror = %name, actor = %actor.identity, "mirror updated");
        self.spawn_metadata_refresh(Some(name));
        Ok(())
    }

    async fn delete_mirror(&mut self, name: &str, actor: &Actor) -> Result<(), EngineError> {
        self.check_writable()?;
        let m = self.mirrors.get(name).ok_or_else(|| not_found(name))?;
        let active: Vec<String> = m
            .topics
            .iter()
            .filter(|(_, t)| t.partitions.values().any(|p| p.record.state != PartitionState::Stopped))
            .map(|(n, _)| n.clone())
            .collect();
        if !active.is_empty() {
            return Err(EngineError::rejected(
                ProblemKind::MirrorHasActiveTopics,
                format!(
                    "mirror {name:?} still has topics that are not STOPPED: {}; stop them first",
                    active.join(", ")
                ),
            ));
        }
        // Tombstones for the mirror, its topics and partitions (positions are kept: they are the
        // lineage a later failback reads).
        self.pending_writes.push(persist::mirror_tombstone(name, self.state_partitions));
        for (tname, t) in &m.topics {
            self.pending_writes.push(persist::topic_tombstone(name, tname, self.state_partitions));
            for p in t.partitions.keys() {
                self.pending_writes.push(persist::partition_tombstone(
                    name,
                    &t.source_topic_id,
                    *p,
                    self.state_partitions,
                ));
            }
        }
        self.flush().await?;
        if let Some(mut m) = self.mirrors.remove(name)
            && let Some(p) = m.pipe.take()
        {
            p.shut_down(false).await;
        }
        tracing::info!(mirror = %name, actor = %actor.identity, "mirror deleted");
        Ok(())
    }

    fn next_operation_id(&mut self) -> String {
        self.op_seq += 1;
        format!("op-{}-{}", now().as_millis(), self.op_seq)
    }

    /// Writes the audit record of an operation and keeps it for the audit views.
    async fn record_operation(
        &mut self,
        id: &str,
        mirror: &str,
        kind: &str,
        actor: &Actor,
        requested_at: Timestamp,
        results: Vec<TopicOutcome>,
    ) {
        let op = OperationView {
            id: id.to_string(),
            mirror: mirror.to_string(),
            kind: kind.to_string(),
            topics: results.iter().map(|r| r.topic.clone()).collect(),
            requested_by: actor.identity.clone(),
            client_address: actor.address.clone(),
            requested_at: requested_at.as_millis(),
            finished_at: Some(now().as_millis()),
            results,
        };
        self.pending_writes.push(persist::operation(&op, self.state_partitions));
        if let Err(e) = self.flush().await {
            tracing::warn!(%mirror, "cannot record operation {id}: {e}");
        }
        let mut ops = self.operations.write().unwrap_or_else(|e| e.into_inner());
        ops.push_back(op);
        while ops.len() > persist::MAX_OPERATIONS {
            ops.pop_front();
        }
    }

    /// Records a mirror-level change (create, update, delete) in the audit trail.
    async fn record_mirror_change(
        &mut self,
        mirror: &str,
        kind: &str,
        actor: &Actor,
        result: &Result<(), EngineError>,
    ) {
        if matches!(result, Err(EngineError::Rejected { kind: ProblemKind::Fenced, .. })) {
            return; // a fenced instance must not write
        }
        let id = self.next_operation_id();
        let outcome = TopicOutcome {
            topic: String::new(),
            ok: result.is_ok(),
            error: result.as_ref().err().map(|e| Problem { kind: e.kind(), detail: e.to_string() }),
        };
        self.record_operation(&id, mirror, kind, actor, now(), vec![outcome]).await;
    }

    // ----- lifecycle ---------------------------------------------------------------------

    async fn lifecycle(
        &mut self,
        mirror: &str,
        selector: TopicSelector,
        op: LifecycleOp,
        validate_only: bool,
        actor: &Actor,
    ) -> Result<OpResult, EngineError> {
        if !validate_only {
            self.check_writable()?;
        }
        if !self.mirrors.contains_key(mirror) {
            return Err(not_found(mirror));
        }
        let topics = self.resolve(mirror, &selector, op).await?;
        let operation_id = self.next_operation_id();
        let requested_at = now();
        let mut results = Vec::with_capacity(topics.len());
        // A failover of many topics is one stop: one abort and one fence of the data path, not
        // one per topic (1,000 partitions in 10 topics took 8 s the other way).
        let mut stops = if matches!(op, LifecycleOp::Stop) && !validate_only {
            Some(self.stop_topics(mirror, &topics).await.into_iter())
        } else {
            None
        };
        for topic in topics {
            // A stop or pause that arrived meanwhile goes first. Between two topics none is
            // half-done, so it sees consistent state (as if it had come before the next topic).
            self.serve_priority().await;
            let outcome = if let Some(stop) = stops.as_mut().and_then(Iterator::next) {
                stop
            } else {
                // Internal topics are never started, whether named or matched by a pattern.
                let checked = validate_topic_name(&topic).and_then(|()| match op {
                    LifecycleOp::Start { .. } => check_not_internal(&topic, &self.config.state_topic),
                    _ => Ok(()),
                });
                match checked {
                    Err(e) => Err(Problem { kind: ProblemKind::InvalidName, detail: e.to_string() }),
                    Ok(()) if validate_only => self.validate(mirror, &topic, op).await,
                    Ok(()) => match op {
                        LifecycleOp::Start { truncation } => self.start_topic(mirror, &topic, truncation).await,
                        LifecycleOp::Pause => self.pause_topic(mirror, &topic).await,
                        LifecycleOp::Resume => self.resume_topic(mirror, &topic).await,
                        // Stops ran as one batch above; this arm is never taken.
                        LifecycleOp::Stop => {
                            Err(Problem { kind: ProblemKind::Internal, detail: "stop outcome missing".into() })
                        }
                    },
                }
            };
            // Whatever happened, persist what changed before answering.
            if let Err(e) = self.flush().await {
                results.push(TopicOutcome {
                    topic,
                    ok: false,
                    error: Some(Problem { kind: e.kind(), detail: e.to_string() }),
                });
                continue;
            }
            results.push(match outcome {
                Ok(()) => TopicOutcome { topic, ok: true, error: None },
                Err(p) => TopicOutcome { topic, ok: false, error: Some(p) },
            });
        }
        if !validate_only {
            self.record_operation(&operation_id, mirror, op.name(), actor, requested_at, results.clone()).await;
        }
        Ok(OpResult { operation_id, results })
    }

    async fn resolve(
        &self,
        mirror: &str,
        selector: &TopicSelector,
        op: LifecycleOp,
    ) -> Result<Vec<String>, EngineError> {
        let m = &self.mirrors[mirror];
        match selector {
            TopicSelector::Names(names) => {
                if names.is_empty() {
                    return Err(EngineError::rejected(ProblemKind::InvalidName, "no topics given"));
                }
                check_topic_count(names.len())?;
                let mut seen = BTreeSet::new();
                Ok(names.iter().filter(|n| seen.insert(n.as_str())).cloned().collect())
            }
            TopicSelector::Pattern(p) => {
                let re = regex::Regex::new(&format!("^(?:{p})$")).map_err(|e| {
                    EngineError::rejected(ProblemKind::InvalidPattern, format!("invalid pattern {p:?}: {e}"))
                })?;
                let mut names: BTreeSet<String> = m.topics.keys().filter(|t| re.is_match(t)).cloned().collect();
                if matches!(op, LifecycleOp::Start { .. }) {
                    let listed = self.source_listing(&m.source_admin).await.map_err(|e| {
                        EngineError::rejected(ProblemKind::SourceUnreachable, format!("cannot list source topics: {e}"))
                    })?;
                    let state_topic = &self.config.state_topic;
                    names.extend(listed.into_iter().filter(|t| re.is_match(t) && !is_internal_topic(t, state_topic)));
                }
                check_topic_count(names.len())?;
                Ok(names.into_iter().collect())
            }
        }
    }

    /// `validate_only`: would the operation be accepted for this topic?
    async fn validate(&self, mirror: &str, topic: &str, op: LifecycleOp) -> Result<(), Problem> {
        let m = &self.mirrors[mirror];
        let kind = match op {
            LifecycleOp::Start { .. } => crate::domain::EventKind::Start,
            LifecycleOp::Pause => crate::domain::EventKind::Pause,
            LifecycleOp::Resume => crate::domain::EventKind::Resume,
            LifecycleOp::Stop => crate::domain::EventKind::Stop,
        };
        match m.topics.get(topic) {
            None if matches!(op, LifecycleOp::Start { .. }) => match self.source_topic(&m.source_admin, topic).await {
                Ok(_) => Ok(()),
                Err(e) if e.is("UNKNOWN_TOPIC_OR_PART") => Err(Problem {
                    kind: ProblemKind::TopicNotFound,
                    detail: format!("topic {topic:?} does not exist on the source cluster"),
                }),
                Err(e) => Err(kafka_problem(ProblemKind::SourceUnreachable, &e)),
            },
            None => Err(not_in_mirror(mirror, topic)),
            Some(t) => {
                for p in t.partitions.values() {
                    if let crate::domain::Rule::Rejected = crate::domain::rule(p.record.state, kind) {
                        return Err(Problem {
                            kind: ProblemKind::IllegalTransition,
                            detail: format!(
                                "cannot {} topic {topic:?}: partition {} is {}",
                                op.name(),
                                0.max(*t.partitions.keys().next().unwrap_or(&0)),
                                p.record.state
                            ),
                        });
                    }
                }
                Ok(())
            }
        }
    }

    async fn start_topic(&mut self, mirror: &str, topic: &str, truncation: Truncation) -> Result<(), Problem> {
        let now_ts = now();
        if let Truncation::Resync { quarantine: true } = truncation {
            // Refused rather than silently deleting records the caller asked to keep.
            return Err(Problem {
                kind: ProblemKind::IllegalTransition,
                detail: format!(
                    "resync with quarantine (copying the divergent records of {topic:?} to {topic}.kmirror-diverged first) is not available yet; copy them yourself, then restart with plain resync"
                ),
            });
        }
        let m = &self.mirrors[mirror];
        if m.fenced {
            return Err(Problem { kind: ProblemKind::Fenced, detail: m.data_path.clone() });
        }
        if m.cluster_id_status == ClusterIdStatus::Mismatch {
            return Err(Problem {
                kind: ProblemKind::SourceClusterIdMismatch,
                detail: m.cluster_id_error.clone().unwrap_or_else(|| "source cluster ID mismatch".into()),
            });
        }
        // Already (being) mirrored: harmless repeat.
        if let Some(t) = m.topics.get(topic) {
            let states: BTreeSet<PartitionState> = t.partitions.values().map(|p| p.record.state).collect();
            if states.iter().all(|s| matches!(s, PartitionState::Mirroring | PartitionState::Preparing)) {
                return Ok(());
            }
            if let Some(bad) = states.iter().find(|s| {
                !matches!(
                    s,
                    PartitionState::Stopped
                        | PartitionState::Unknown
                        | PartitionState::Mirroring
                        | PartitionState::Preparing
                )
            }) {
                let hint = match bad {
                    PartitionState::Paused | PartitionState::Pausing => "resume it instead",
                    PartitionState::Failed => "stop it first, then start it again",
                    _ => "wait for the current operation to finish",
                };
                return Err(Problem {
                    kind: ProblemKind::IllegalTransition,
                    detail: format!("cannot start topic {topic:?}: a partition is {bad}; {hint}"),
                });
            }
        }
        // One destination topic has one mirror: a resync would delete another mirror's records, a
        // plain start would interleave two mirrors' records.
        if let Some((other, t)) = self
            .mirrors
            .iter()
            .filter(|(name, _)| name.as_str() != mirror)
            .find_map(|(name, o)| Some((name, o.topics.get(topic)?)))
        {
            let state = roll_up(t.partitions.values().map(|p| p.record.state));
            return Err(Problem {
                kind: ProblemKind::DestinationTopicConflict,
                detail: format!(
                    "destination topic {topic:?} belongs to mirror {other:?} (its partitions are {state}); a destination topic belongs to one mirror only: delete mirror {other:?} to release it"
                ),
            });
        }
        // PREPARING checks (DESIGN.md section 3): source cluster ID, topic IDs, destination topic.
        let source = m.source_admin.clone();
        // Both read by the start's survey, off the loop, when there is one.
        let cluster =
            self.source_cluster(&source).await.map_err(|e| kafka_problem(ProblemKind::SourceUnreachable, &e))?;
        if let Some(expected) = &m.stored.spec.expected_source_cluster_id
            && *expected != cluster.cluster_id
        {
            let detail = format!("the source cluster ID is {} but {expected} was expected", cluster.cluster_id);
            self.cluster_id_mismatch(mirror, &cluster.cluster_id, &detail);
            return Err(Problem { kind: ProblemKind::SourceClusterIdMismatch, detail });
        }
        let src = self.source_topic(&source, topic).await.map_err(|e| {
            if e.is("UNKNOWN_TOPIC_OR_PART") {
                Problem {
                    kind: ProblemKind::TopicNotFound,
                    detail: format!("topic {topic:?} does not exist on the source cluster"),
                }
            } else {
                kafka_problem(ProblemKind::SourceUnreachable, &e)
            }
        })?;
        let source_topic_id = src.topic_id.to_string();
        let partitions = src.partitions.len() as i32;
        if partitions > crate::store::MAX_PARTITION_COUNT {
            // Loading skips a topic record above the cap (a hostile count must not drive memory).
            return Err(Problem {
                kind: ProblemKind::IllegalTransition,
                detail: format!(
                    "cannot start topic {topic:?}: it has {partitions} partitions, more than kmirror mirrors per topic ({})",
                    crate::store::MAX_PARTITION_COUNT
                ),
            });
        }
        let existing = m.topics.get(topic).cloned();
        if let Some(t) = &existing
            && t.source_topic_id != source_topic_id
        {
            return Err(Problem {
                kind: ProblemKind::IllegalTransition,
                detail: format!(
                    "source topic {topic:?} was recreated (ID {} is now {source_topic_id}); remove it from the mirror and add it again",
                    t.source_topic_id
                ),
            });
        }
        let dest = &self.destination_admin;
        let dest_topic = match dest.describe_topic(topic).await {
            Ok(d) => {
                if d.partitions.len() as i32 != partitions {
                    return Err(Problem {
                        kind: ProblemKind::DestinationTopicConflict,
                        detail: format!(
                            "destination topic {topic:?} has {} partitions, the source has {partitions}",
                            d.partitions.len()
                        ),
                    });
                }
                if existing.is_none() && truncation == Truncation::None {
                    // Adopt only an empty topic: anything in it would be mistaken for mirrored data.
                    // With `resync` (failback onto the old primary) its records are deleted first.
                    let req: Vec<_> = (0..partitions).map(|p| (topic.to_string(), p, OffsetSpec::Latest)).collect();
                    let ends = dest
                        .list_offsets(&req, IsolationLevel::ReadUncommitted)
                        .await
                        .map_err(|e| kafka_problem(ProblemKind::DestinationUnavailable, &e))?;
                    if let Some(o) = ends.iter().find(|o| o.offset > 0) {
                        return Err(Problem {
                            kind: ProblemKind::DestinationTopicConflict,
                            detail: format!(
                                "destination topic {topic:?} already holds records (partition {} ends at offset {}); only an empty topic can become a mirror (start with truncation \"resync\" to delete them and mirror the source)",
                                o.partition, o.offset
                            ),
                        });
                    }
                }
                d
            }
            Err(e) if e.is("UNKNOWN_TOPIC_OR_PART") => {
                let overrides: Vec<(String, String)> = match source.describe_topic_configs(topic).await {
                    Ok(entries) => entries
                        .into_iter()
                        .filter(|e| e.source == crate::kafka::ConfigSource::DynamicTopic)
                        .filter_map(|e| e.value.map(|v| (e.name, v)))
                        .collect(),
                    Err(e) => {
                        tracing::warn!(%mirror, %topic, "cannot read source topic configs ({e}); creating with defaults");
                        Vec::new()
                    }
                };
                let configs = crate::domain::config_sync::creation_configs(&overrides);
                match dest.create_topic(topic, partitions, -1, &configs).await {
                    Ok(()) => {}
                    Err(e) if e.is("TOPIC_ALREADY_EXISTS") => {}
                    Err(e) => return Err(kafka_problem(ProblemKind::DestinationUnavailable, &e)),
                }
                let mut found = None;
                for _ in 0..100 {
                    if let Ok(d) = dest.describe_topic(topic).await
                        && d.partitions.len() as i32 == partitions
                        && d.partitions.iter().all(|p| p.leader.is_some())
                    {
                        found = Some(d);
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                found.ok_or_else(|| Problem {
                    kind: ProblemKind::DestinationUnavailable,
                    detail: format!("destination topic {topic:?} was created but did not become available"),
                })?
            }
            Err(e) => return Err(kafka_problem(ProblemKind::DestinationUnavailable, &e)),
        };
        let dest_req: Vec<_> = (0..partitions).map(|p| (topic.to_string(), p, OffsetSpec::Latest)).collect();
        let dest_ends: BTreeMap<i32, i64> = dest
            .list_offsets(&dest_req, IsolationLevel::ReadUncommitted)
            .await
            .map_err(|e| kafka_problem(ProblemKind::DestinationUnavailable, &e))?
            .into_iter()
            .map(|o| (o.partition, o.offset))
            .collect();

        // A restart must not silently mirror over local writes (DESIGN.md section 5).
        if let Some(t) = &existing
            && truncation == Truncation::None
        {
            let mut diverged = Vec::new();
            for (p, rt) in &t.partitions {
                if rt.record.state != PartitionState::Stopped {
                    continue;
                }
                if let Some(stop) = rt.record.stop_point {
                    let hwm = dest_ends.get(p).copied().unwrap_or(0);
                    if hwm > stop.destination_stop_offset {
                        diverged.push(format!(
                            "partition {p}: {} local record offset(s) in [{}, {hwm})",
                            hwm - stop.destination_stop_offset,
                            stop.destination_stop_offset
                        ));
                    }
                }
            }
            if !diverged.is_empty() {
                return Err(Problem {
                    kind: ProblemKind::DestinationDiverged,
                    detail: format!(
                        "DESTINATION_DIVERGED: topic {topic:?} was written to after it stopped ({}); restart with truncation \"resync\" to delete them and mirror the source again",
                        diverged.join("; ")
                    ),
                });
            }
        }

        // Transition every partition to PREPARING and persist before acting.
        {
            let m = self.mirrors.get_mut(mirror).expect("known");
            let t = m.topics.entry(topic.to_string()).or_insert_with(|| TopicRt {
                source_topic_id: source_topic_id.clone(),
                destination_topic_id: dest_topic.topic_id.to_string(),
                created_at: now_ts,
                missing_refreshes: 0,
                partitions: BTreeMap::new(),
            });
            t.destination_topic_id = dest_topic.topic_id.to_string();
            for p in 0..partitions {
                t.partitions.entry(p).or_insert_with(|| PartRt::new(PartitionRecord::new(now_ts)));
            }
            m.topic_ids.write().unwrap_or_else(|e| e.into_inner()).insert(topic.to_string(), source_topic_id.clone());
        }
        self.queue_topic(mirror, topic);
        let mut preparing = Vec::new();
        for p in 0..partitions {
            match self.apply(mirror, topic, p, Event::Start { truncation }) {
                Ok(_) => preparing.push(p),
                Err(e) if e.is_harmless() => {}
                Err(e) => return Err(Problem { kind: ProblemKind::IllegalTransition, detail: e.to_string() }),
            }
        }
        self.flush().await.map_err(|e| Problem { kind: e.kind(), detail: e.to_string() })?;
        self.prepare(mirror, topic, &preparing, Some(&dest_ends)).await
    }

    /// Finishes PREPARING for `partitions`: decides start positions, moves them to MIRRORING and
    /// hands them to the data path.
    ///
    /// Each partition's persisted truncation mode decides, on every call (a start, a retry after
    /// FAILED, a PREPARING partition restored after a restart): with `resync` its destination
    /// records are deleted first, again, until the resync completes (entering MIRRORING clears
    /// the mode); a failed deletion leaves it FAILED with nothing written. Without it, the checks
    /// of a start hold here too: a partition never mirrored must find its destination partition
    /// empty, and one restarted from a stop point must find no local writes past it; otherwise it
    /// goes FAILED with `DESTINATION_DIVERGED` instead of mirroring over those records.
    async fn prepare(
        &mut self,
        mirror: &str,
        topic: &str,
        partitions: &[i32],
        dest_ends: Option<&BTreeMap<i32, i64>>,
    ) -> Result<(), Problem> {
        if partitions.is_empty() {
            return Ok(());
        }
        let source = self.mirrors[mirror].source_admin.clone();
        let dest = self.destination_admin.clone();
        let mut ends = match dest_ends {
            Some(e) => e.clone(),
            None => {
                let req: Vec<_> = partitions.iter().map(|p| (topic.to_string(), *p, OffsetSpec::Latest)).collect();
                match dest.list_offsets(&req, IsolationLevel::ReadUncommitted).await {
                    Ok(v) => v.into_iter().map(|o| (o.partition, o.offset)).collect(),
                    Err(e) => {
                        for p in partitions {
                            self.fail(mirror, topic, *p, ErrorCode::DestinationUnavailable, e.to_string());
                        }
                        return Err(kafka_problem(ProblemKind::DestinationUnavailable, &e));
                    }
                }
            }
        };
        let mut problem = None;
        let (resync, plain): (Vec<i32>, Vec<i32>) = partitions
            .iter()
            .partition(|p| self.mirrors[mirror].topics[topic].partitions[*p].record.truncation.is_resync());
        let mut go = Vec::with_capacity(partitions.len());
        let mut diverged = Vec::new();
        for p in plain {
            let record = &self.mirrors[mirror].topics[topic].partitions[&p].record;
            let hwm = ends.get(&p).copied().unwrap_or(0);
            match (record.position, record.stop_point) {
                (_, Some(stop)) if hwm > stop.destination_stop_offset => diverged.push((
                    p,
                    format!(
                        "partition {p}: {} local record offset(s) in [{}, {hwm}) after the stop point",
                        hwm - stop.destination_stop_offset,
                        stop.destination_stop_offset
                    ),
                )),
                (None, None) if hwm > 0 => diverged.push((
                    p,
                    format!("partition {p}: the destination already holds records (it ends at offset {hwm})"),
                )),
                _ => go.push(p),
            }
        }
        if !diverged.is_empty() {
            let hint = "stop the topic, then start it with truncation \"resync\" to delete them and mirror the source";
            for (p, why) in &diverged {
                self.fail(mirror, topic, *p, ErrorCode::DestinationDiverged, format!("{why}; {hint}"));
            }
            let list: Vec<&str> = diverged.iter().map(|(_, why)| why.as_str()).collect();
            problem = Some(Problem {
                kind: ProblemKind::DestinationDiverged,
                detail: format!("DESTINATION_DIVERGED: topic {topic:?}: {}; {hint}", list.join("; ")),
            });
        }
        if !resync.is_empty() {
            let dels: Vec<(i32, i64)> = resync.iter().map(|p| (*p, -1)).collect();
            if let Err(e) = dest.delete_records(topic, &dels).await {
                let detail = format!(
                    "resync of {topic:?}: cannot delete the destination's records ({e}); nothing was mirrored, and the retry deletes them again first"
                );
                for p in &resync {
                    self.fail(mirror, topic, *p, ErrorCode::DestinationUnavailable, detail.clone());
                }
                problem = Some(Problem { kind: ProblemKind::DestinationUnavailable, detail });
            } else {
                // DeleteRecords keeps the high watermark; the end offsets above stay valid. The old
                // runs point at deleted records: the next batch starts a new lineage. Their state
                // records go too, or a restart before that batch commits would load the old lineage
                // and reject the new one (it starts over at the source's log start).
                let m = &self.mirrors[mirror];
                let topic_id = m.topic_ids.read().unwrap_or_else(|e| e.into_inner()).get(topic).cloned();
                let mut lineage = m.new_lineage.write().unwrap_or_else(|e| e.into_inner());
                let mut maps = self.offset_maps.write().unwrap_or_else(|e| e.into_inner());
                for p in &resync {
                    lineage.insert((topic.to_string(), *p));
                    let old = maps.remove(&(mirror.to_string(), topic.to_string(), *p));
                    if let (Some(old), Some(topic_id)) = (old, &topic_id) {
                        self.pending_writes.extend(old.stretch_starts().map(|first| {
                            persist::offset_runs_tombstone(mirror, topic_id, *p, first, self.state_partitions)
                        }));
                    }
                }
                go.extend(&resync);
            }
        }
        if go.is_empty() {
            return Err(
                problem.unwrap_or_else(|| Problem { kind: ProblemKind::Internal, detail: "nothing to prepare".into() })
            );
        }
        let req: Vec<_> = go.iter().map(|p| (topic.to_string(), *p, OffsetSpec::Earliest)).collect();
        let starts: BTreeMap<i32, i64> = match source.list_offsets(&req, IsolationLevel::ReadCommitted).await {
            Ok(v) => v.into_iter().map(|o| (o.partition, o.offset)).collect(),
            Err(e) => {
                for p in &go {
                    self.fail(mirror, topic, *p, ErrorCode::SourceUnreachable, e.to_string());
                }
                return Err(kafka_problem(ProblemKind::SourceUnreachable, &e));
            }
        };
        let mut specs = Vec::new();
        for &p in &go {
            let rt = &self.mirrors[mirror].topics[topic].partitions[&p];
            let hwm = ends.remove(&p).unwrap_or(0);
            let start = match rt.record.position {
                Some(pos) if !rt.record.truncation.is_resync() => MirrorPosition {
                    next_source_offset: pos.next_source_offset,
                    source_leader_epoch: pos.source_leader_epoch,
                    destination_end_offset: pos.destination_end_offset.max(hwm),
                },
                _ => MirrorPosition {
                    next_source_offset: starts.get(&p).copied().unwrap_or(0),
                    source_leader_epoch: -1,
                    destination_end_offset: hwm,
                },
            };
            match self.apply(mirror, topic, p, Event::Prepared { start }) {
                Ok(actions) => {
                    if actions.iter().any(|a| matches!(a, crate::domain::Action::Assign { .. })) {
                        specs.push(AssignSpec {
                            topic: topic.to_string(),
                            partition: p,
                            next_source_offset: Some(start.next_source_offset),
                            source_leader_epoch: (start.source_leader_epoch >= 0).then_some(start.source_leader_epoch),
                            destination_next_offset: hwm,
                            destination_end_offset: start.destination_end_offset,
                        });
                    }
                }
                Err(e) if e.is_harmless() => {}
                Err(e) => {
                    tracing::warn!(%mirror, %topic, partition = p, "prepare rejected: {e}");
                    self.fail(mirror, topic, p, ErrorCode::Internal, e.to_string());
                }
            }
        }
        self.flush().await.map_err(|e| Problem { kind: e.kind(), detail: e.to_string() })?;
        self.assign(mirror, specs);
        problem.map_or(Ok(()), Err)
    }

    fn assign(&mut self, mirror: &str, specs: Vec<AssignSpec>) {
        if specs.is_empty() {
            return;
        }
        let m = self.mirrors.get_mut(mirror).expect("known");
        if m.pipe.is_none() {
            let _ = self.spawn_pipe_for(mirror);
        }
        let m = self.mirrors.get_mut(mirror).expect("known");
        if let Some(p) = &m.pipe
            && p.tx.send(PipeCommand::Assign(specs)).is_err()
        {
            m.data_path = "the data path thread has stopped".into();
        }
    }

    fn spawn_pipe_for(&mut self, mirror: &str) -> Option<tokio::sync::oneshot::Receiver<()>> {
        let mut m = self.mirrors.remove(mirror)?;
        let r = self.spawn_pipe(&mut m);
        self.mirrors.insert(mirror.to_string(), m);
        r
    }

    /// Sends `Unassign` to the pipe and waits for the final positions.
    async fn unassign(
        &mut self,
        mirror: &str,
        topic: &str,
        partitions: &[i32],
        finish: Finish,
    ) -> Result<Vec<pipe::FinalPosition>, String> {
        let parts = partitions.iter().map(|p| (topic.to_string(), *p)).collect();
        self.unassign_many(mirror, parts, finish, false).await
    }

    /// Removes partitions of any topics from the data path in one step (one abort, one fence).
    async fn unassign_many(
        &mut self,
        mirror: &str,
        parts: Vec<(String, i32)>,
        finish: Finish,
        fence: bool,
    ) -> Result<Vec<pipe::FinalPosition>, String> {
        let m = &self.mirrors[mirror];
        let Some(p) = &m.pipe else { return Ok(Vec::new()) };
        let (reply, rx) = tokio::sync::oneshot::channel();
        p.tx.send(PipeCommand::Unassign { partitions: parts, finish, fence, reply })
            .map_err(|_| "data path stopped".to_string())?;
        match tokio::time::timeout(self.config.request_timeout * 2, rx).await {
            Ok(Ok(r)) => r,
            Ok(Err(_)) => Err("data path stopped".into()),
            Err(_) => Err("data path did not answer in time".into()),
        }
    }

    /// Applies a final position reported by the pipe, when it is ahead of the record's.
    fn apply_final(&mut self, mirror: &str, topic: &str, f: &pipe::FinalPosition) {
        let Some(next) = f.next_source_offset else { return };
        let rt = &self.mirrors[mirror].topics[topic].partitions[&f.partition];
        let epoch = f.source_leader_epoch.unwrap_or(-1).max(rt.record.position.map_or(-1, |p| p.source_leader_epoch));
        let pos = MirrorPosition {
            next_source_offset: next,
            source_leader_epoch: epoch,
            destination_end_offset: f.destination_end_offset,
        };
        if rt.record.position.is_none_or(|cur| cur != pos && !pos.is_behind(&cur)) {
            let _ = self.apply(mirror, topic, f.partition, Event::Progress { position: pos });
        }
    }

    /// The destination's end offsets (high watermarks) of `parts` of `topic`.
    async fn destination_ends(&self, topic: &str, parts: &[i32]) -> Result<BTreeMap<i32, i64>, KafkaError> {
        let keys: Vec<(String, i32)> = parts.iter().map(|p| (topic.to_string(), *p)).collect();
        Ok(self.destination_ends_of(&keys).await?.into_iter().map(|((_, p), end)| (p, end)).collect())
    }

    /// The destination's end offsets of partitions of any topics, in one request.
    async fn destination_ends_of(&self, keys: &[(String, i32)]) -> Result<HashMap<(String, i32), i64>, KafkaError> {
        let req: Vec<_> = keys.iter().map(|(t, p)| (t.clone(), *p, OffsetSpec::Latest)).collect();
        let ends = self.destination_admin.list_offsets(&req, IsolationLevel::ReadUncommitted).await?;
        Ok(ends.into_iter().map(|o| ((o.topic, o.partition), o.offset)).collect())
    }

    fn topic_partitions_in(&self, mirror: &str, topic: &str, states: &[PartitionState]) -> Result<Vec<i32>, Problem> {
        let t = self.mirrors[mirror].topics.get(topic).ok_or_else(|| not_in_mirror(mirror, topic))?;
        Ok(t.partitions.iter().filter(|(_, p)| states.contains(&p.record.state)).map(|(i, _)| *i).collect())
    }

    fn first_rejection(
        &self,
        mirror: &str,
        topic: &str,
        kind: crate::domain::EventKind,
        verb: &str,
    ) -> Result<(), Problem> {
        let t = self.mirrors[mirror].topics.get(topic).ok_or_else(|| not_in_mirror(mirror, topic))?;
        for (i, p) in &t.partitions {
            if let crate::domain::Rule::Rejected = crate::domain::rule(p.record.state, kind) {
                let valid: Vec<String> = crate::domain::valid_from(kind).iter().map(|s| s.to_string()).collect();
                return Err(Problem {
                    kind: ProblemKind::IllegalTransition,
                    detail: format!(
                        "cannot {verb} topic {topic:?}: partition {i} is {} ({verb} is valid from {})",
                        p.record.state,
                        valid.join(", ")
                    ),
                });
            }
        }
        Ok(())
    }

    async fn pause_topic(&mut self, mirror: &str, topic: &str) -> Result<(), Problem> {
        self.first_rejection(mirror, topic, crate::domain::EventKind::Pause, "pause")?;
        let parts = self.topic_partitions_in(mirror, topic, &[PartitionState::Mirroring])?;
        if parts.is_empty() {
            return Ok(());
        }
        for &p in &parts {
            let _ = self.apply(mirror, topic, p, Event::Pause);
        }
        if let Err(e) = self.flush().await {
            // PAUSING could not be recorded (the destination does not answer) and the data path
            // still mirrors them: FAILED and retried like an unconfirmed pause, never left
            // PAUSING in memory with nothing to move it on.
            for &p in &parts {
                self.fail(mirror, topic, p, ErrorCode::StateStoreUnavailable, format!("pause not recorded: {e}"));
            }
            let _ = self.flush().await;
            return Err(Problem {
                kind: e.kind(),
                detail: format!("{e}; the partitions are FAILED and the pause is retried"),
            });
        }
        self.finish_pause(mirror, topic, &parts).await.map_err(|e| Problem {
            kind: ProblemKind::Internal,
            detail: format!("pause: {e}; the partitions are FAILED and the pause is retried"),
        })
    }

    /// PAUSING → PAUSED: removes the partitions from the fetcher and commits the open
    /// transaction, then records PAUSED. If the data path does not confirm (it stopped, or did
    /// not answer in time), the partitions may still be fetched: they go FAILED with a retryable
    /// error (failed in PAUSING), and the retry comes back here, so a partition is never left
    /// PAUSING for ever and never recorded PAUSED while the data path may still hold it.
    async fn finish_pause(&mut self, mirror: &str, topic: &str, parts: &[i32]) -> Result<(), String> {
        match self.unassign(mirror, topic, parts, Finish::Commit).await {
            Ok(finals) => {
                for f in &finals {
                    self.apply_final(mirror, topic, f);
                }
                for &p in parts {
                    let _ = self.apply(mirror, topic, p, Event::Paused);
                }
                Ok(())
            }
            Err(e) => {
                for &p in parts {
                    self.fail(
                        mirror,
                        topic,
                        p,
                        ErrorCode::Timeout,
                        format!("pause not confirmed by the data path: {e}"),
                    );
                }
                let _ = self.flush().await;
                Err(e)
            }
        }
    }

    async fn resume_topic(&mut self, mirror: &str, topic: &str) -> Result<(), Problem> {
        self.first_rejection(mirror, topic, crate::domain::EventKind::Resume, "resume")?;
        let parts = self.topic_partitions_in(mirror, topic, &[PartitionState::Paused, PartitionState::Pausing])?;
        if parts.is_empty() {
            return Ok(());
        }
        let ends = self
            .destination_ends(topic, &parts)
            .await
            .map_err(|e| kafka_problem(ProblemKind::DestinationUnavailable, &e))?;
        let mut specs = Vec::new();
        let mut reprepare = Vec::new();
        for &p in &parts {
            match self.apply(mirror, topic, p, Event::Resume) {
                Ok(actions) => {
                    if let Some(from) = actions.iter().find_map(|a| match a {
                        crate::domain::Action::Assign { from } => Some(*from),
                        _ => None,
                    }) {
                        specs.push(AssignSpec {
                            topic: topic.to_string(),
                            partition: p,
                            next_source_offset: Some(from.next_source_offset),
                            source_leader_epoch: (from.source_leader_epoch >= 0).then_some(from.source_leader_epoch),
                            destination_next_offset: ends.get(&p).copied().unwrap_or(0),
                            destination_end_offset: from.destination_end_offset,
                        });
                    } else {
                        reprepare.push(p);
                    }
                }
                Err(e) if e.is_harmless() => {}
                Err(e) => return Err(Problem { kind: ProblemKind::IllegalTransition, detail: e.to_string() }),
            }
        }
        self.flush().await.map_err(|e| Problem { kind: e.kind(), detail: e.to_string() })?;
        self.assign(mirror, specs);
        if !reprepare.is_empty() {
            self.prepare(mirror, topic, &reprepare, None).await?;
        }
        Ok(())
    }

    /// The first half of a stop: every partition of the topic that can stop goes STOPPING (not yet
    /// persisted). Returns the partitions to run the STOPPING sequence on.
    fn begin_stop(&mut self, mirror: &str, topic: &str) -> Result<Vec<i32>, Problem> {
        if !self.mirrors[mirror].topics.contains_key(topic) {
            return Err(not_in_mirror(mirror, topic));
        }
        let all: Vec<i32> = self.mirrors[mirror].topics[topic].partitions.keys().copied().collect();
        let mut stopping = Vec::new();
        for &p in &all {
            let state = self.mirrors[mirror].topics[topic].partitions[&p].record.state;
            if state == PartitionState::Stopping {
                stopping.push(p); // an earlier stop did not finish: run the sequence again
                continue;
            }
            match self.apply(mirror, topic, p, Event::Stop) {
                Ok(_) => stopping.push(p),
                Err(e) if e.is_harmless() => {}
                Err(e) => return Err(Problem { kind: ProblemKind::IllegalTransition, detail: e.to_string() }),
            }
        }
        Ok(stopping)
    }

    /// Stops several topics of a mirror as one failover: every partition goes STOPPING (persisted
    /// once), then one STOPPING sequence for all of them. Per-topic outcomes, in `topics` order.
    async fn stop_topics(&mut self, mirror: &str, topics: &[String]) -> Vec<Result<(), Problem>> {
        let mut outcomes: Vec<Result<Vec<i32>, Problem>> = topics
            .iter()
            .map(|t| {
                validate_topic_name(t)
                    .map_err(|e| Problem { kind: ProblemKind::InvalidName, detail: e.to_string() })
                    .and_then(|()| self.begin_stop(mirror, t))
            })
            .collect();
        let batch: Vec<(String, Vec<i32>)> = topics
            .iter()
            .zip(&outcomes)
            .filter_map(|(t, o)| o.as_ref().ok().filter(|p| !p.is_empty()).map(|p| (t.clone(), p.clone())))
            .collect();
        if !batch.is_empty() {
            let result = match self.flush().await {
                Ok(()) => self.finish_stop_many(mirror, &batch).await,
                Err(e) => Err(Problem { kind: e.kind(), detail: e.to_string() }),
            };
            if let Err(p) = result {
                for (t, o) in topics.iter().zip(outcomes.iter_mut()) {
                    if batch.iter().any(|(b, _)| b == t) {
                        *o = Err(p.clone());
                    }
                }
            }
        }
        outcomes.into_iter().map(|o| o.map(|_| ())).collect()
    }

    /// The STOPPING sequence for one topic's partitions.
    async fn finish_stop(&mut self, mirror: &str, topic: &str, parts: &[i32]) -> Result<(), Problem> {
        self.finish_stop_many(mirror, &[(topic.to_string(), parts.to_vec())]).await
    }

    /// The STOPPING sequence: unassign, abort the open transaction (truncate to the LSO) and fence
    /// in one data-path step, persist the LME and stop point, then STOPPED. Needs only the
    /// destination. One abort and one fence however many topics stop together.
    async fn finish_stop_many(&mut self, mirror: &str, batch: &[(String, Vec<i32>)]) -> Result<(), Problem> {
        let all: Vec<(String, i32)> =
            batch.iter().flat_map(|(t, ps)| ps.iter().map(move |p| (t.clone(), *p))).collect();
        // Fence: no earlier incarnation of this mirror's writer may append after STOPPED.
        let finals = self.unassign_many(mirror, all.clone(), Finish::Abort, true).await.map_err(|e| Problem {
            kind: if e.starts_with("fence:") { ProblemKind::DestinationUnavailable } else { ProblemKind::Internal },
            detail: format!("stop: {e}"),
        })?;
        for f in &finals {
            self.apply_final(mirror, &f.topic, f);
        }
        let ends =
            self.destination_ends_of(&all).await.map_err(|e| kafka_problem(ProblemKind::DestinationUnavailable, &e))?;
        for (topic, parts) in batch {
            self.stopped(mirror, topic, parts, &ends);
        }
        Ok(())
    }

    /// STOPPING → STOPPED for a topic's partitions, with their stop points and LME record.
    fn stopped(&mut self, mirror: &str, topic: &str, parts: &[i32], ends: &HashMap<(String, i32), i64>) {
        let mut lmes = Vec::new();
        for &p in parts {
            let rec = &self.mirrors[mirror].topics[topic].partitions[&p].record;
            let pos = rec.position;
            let stop = StopPoint {
                last_mirror_epoch: pos.map_or(-1, |p| p.source_leader_epoch),
                last_mirrored_source_offset: pos
                    .and_then(|p| (p.next_source_offset > 0).then_some(p.next_source_offset - 1)),
                destination_stop_offset: ends
                    .get(&(topic.to_string(), p))
                    .copied()
                    .unwrap_or(0)
                    .max(pos.map_or(0, |p| p.destination_end_offset)),
            };
            lmes.push((p, stop.last_mirror_epoch));
            if let Err(e) = self.apply(mirror, topic, p, Event::Stopped { stop })
                && !e.is_harmless()
            {
                tracing::warn!(%mirror, %topic, partition = p, "stop rejected: {e}");
            }
        }
        let m = self.mirrors.get_mut(mirror).expect("known");
        m.last_mirror_epochs.set_epochs(topic, lmes);
        let w = persist::last_mirror_epochs(mirror, &m.last_mirror_epochs, self.state_partitions);
        self.pending_writes.push(w);
    }

    // ----- restore -----------------------------------------------------------------------

    async fn restore(&mut self, loaded: Loaded) {
        for lm in loaded.mirrors {
            let name = lm.stored.spec.name.clone();
            let Some(m) = self.mirrors.get_mut(&name) else { continue };
            m.last_mirror_epochs = lm.last_mirror_epochs;
            for lt in lm.topics {
                m.topic_ids
                    .write()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(lt.name.clone(), lt.source_topic_id.clone());
                let mut t = TopicRt {
                    source_topic_id: lt.source_topic_id,
                    destination_topic_id: lt.destination_topic_id,
                    created_at: lt.created_at,
                    missing_refreshes: 0,
                    partitions: BTreeMap::new(),
                };
                for (p, rec) in lt.partitions {
                    t.partitions.insert(p, PartRt::new(rec));
                }
                m.topics.insert(lt.name, t);
            }
        }
        // Take every partition over (`Loaded`): in-progress states re-run their actions.
        let mirrors: Vec<String> = self.mirrors.keys().cloned().collect();
        for mirror in mirrors {
            let topics: Vec<String> = self.mirrors[&mirror].topics.keys().cloned().collect();
            for topic in topics {
                let parts: Vec<i32> = self.mirrors[&mirror].topics[&topic].partitions.keys().copied().collect();
                let mut prepare = Vec::new();
                let mut stopping = Vec::new();
                let mut pausing = Vec::new();
                for p in parts {
                    match self.apply(&mirror, &topic, p, Event::Loaded) {
                        Ok(_) | Err(_) => {}
                    }
                    match self.mirrors[&mirror].topics[&topic].partitions[&p].record.state {
                        PartitionState::Preparing => prepare.push(p),
                        PartitionState::Stopping => stopping.push(p),
                        PartitionState::Pausing => pausing.push(p),
                        _ => {}
                    }
                }
                if let Err(e) = self.flush().await {
                    tracing::error!(%mirror, "cannot persist restored state: {e}");
                    return;
                }
                if !prepare.is_empty()
                    && let Err(p) = self.prepare(&mirror, &topic, &prepare, None).await
                {
                    tracing::warn!(%mirror, %topic, "restore: prepare failed: {}", p.detail);
                }
                if !stopping.is_empty()
                    && let Err(p) = self.finish_stop(&mirror, &topic, &stopping).await
                {
                    tracing::warn!(%mirror, %topic, "restore: stop failed: {}", p.detail);
                }
                for p in pausing {
                    let _ = self.apply(&mirror, &topic, p, Event::Paused);
                }
                let _ = self.flush().await;
            }
        }
    }

    // ----- pipe events, retries, refreshes ---------------------------------------------

    async fn internal(&mut self, msg: Internal) {
        match msg {
            Internal::Pipe(mirror, ev) => self.pipe_event(&mirror, ev).await,
            Internal::Lag { mirror, offsets, error } => {
                let t = now();
                let Some(m) = self.mirrors.get_mut(&mirror) else { return };
                m.lag_in_flight = false;
                if let Some(e) = error {
                    tracing::debug!(%mirror, "lag refresh: {e}");
                }
                for ((topic, p), o) in offsets {
                    if let Some(rt) = m.topics.get_mut(&topic).and_then(|t| t.partitions.get_mut(&p)) {
                        if o.source_start.is_some() {
                            rt.offsets.source_start = o.source_start;
                            rt.offsets.source_lso = o.source_lso;
                            rt.offsets.source_hwm = o.source_hwm;
                        }
                        if o.destination_hwm.is_some() {
                            rt.offsets.destination_hwm = o.destination_hwm;
                        }
                        if lag_records(rt) == 0 {
                            rt.caught_up_at = Some(t);
                        }
                    }
                }
            }
            Internal::LogStarts { mirror, starts } => self.prune_offset_maps(&mirror, &starts).await,
            Internal::OffLoop(done) => self.off_loop_done(*done).await,
            Internal::Metadata { mirror, report } => {
                self.metadata_result(&mirror, *report).await;
                // A refresh asked for while this one ran: start it now that this one's results
                // (created ACLs, applied configs) are in place, so it builds on them.
                if let Some(m) = self.mirrors.get_mut(&mirror)
                    && std::mem::take(&mut m.metadata_again)
                {
                    self.spawn_metadata_refresh(Some(&mirror));
                }
            }
        }
    }

    async fn pipe_event(&mut self, mirror: &str, ev: PipeEvent) {
        let Some(m) = self.mirrors.get_mut(mirror) else { return };
        match ev {
            PipeEvent::Ready => m.data_path = "running".into(),
            PipeEvent::FetchPositions(positions) => {
                for f in positions {
                    if let Some(rt) = m.topics.get_mut(&f.topic).and_then(|t| t.partitions.get_mut(&f.partition)) {
                        rt.fetch_position = Some(f.offset);
                    }
                }
            }
            PipeEvent::Committed(progress) => {
                m.data_path = "running".into();
                {
                    let mut maps = self.offset_maps.write().unwrap_or_else(|e| e.into_inner());
                    let mut lineage = m.new_lineage.write().unwrap_or_else(|e| e.into_inner());
                    for p in &progress {
                        lineage.remove(&(p.topic.clone(), p.partition));
                        let map = maps.entry((mirror.to_string(), p.topic.clone(), p.partition)).or_default();
                        if let Err(e) = map.extend(p.runs.iter().copied()) {
                            tracing::error!(%mirror, topic = %p.topic, partition = p.partition, "offset map: {e}");
                        }
                    }
                }
                for p in progress {
                    let Some(rt) = m.topics.get_mut(&p.topic).and_then(|t| t.partitions.get_mut(&p.partition)) else {
                        continue;
                    };
                    rt.records_mirrored += p.records;
                    rt.bytes_mirrored += p.bytes;
                    let epoch = p
                        .source_leader_epoch
                        .unwrap_or(-1)
                        .max(rt.record.position.map_or(-1, |x| x.source_leader_epoch));
                    let pos = MirrorPosition {
                        next_source_offset: p.next_source_offset,
                        source_leader_epoch: epoch,
                        destination_end_offset: p.destination_end_offset,
                    };
                    if let Ok(step) = transition(&rt.record, Event::Progress { position: pos }, now()) {
                        rt.record = step.next;
                    }
                }
            }
            PipeEvent::PartitionFailed { topic, partition, fault } => {
                let (code, message) = match fault {
                    PartitionFault::SourceTruncated { message } => (ErrorCode::SourceTruncated, message),
                    PartitionFault::ForeignWrite { expected_offset, found_offset } => (
                        ErrorCode::ForeignWrite,
                        format!(
                            "a record kmirror did not write is in the destination partition: expected to append at offset {expected_offset}, appended at {found_offset}"
                        ),
                    ),
                    PartitionFault::SourceMissing { message } => (ErrorCode::SourceTopicDeleted, message),
                    PartitionFault::DestinationRejected { message } => (ErrorCode::Internal, message),
                };
                if m.topics.get(&topic).is_some_and(|t| t.partitions.contains_key(&partition)) {
                    self.fail(mirror, &topic, partition, code, message);
                    let _ = self.flush().await;
                }
            }
            PipeEvent::Retrying { .. } if m.fenced => {}
            PipeEvent::Retrying { attempt, message } => {
                m.data_path = format!("retrying (attempt {attempt}): {message}");
            }
            PipeEvent::Fenced { message } => {
                m.pipe = None;
                self.after_pipe_fatal(mirror, message).await;
            }
            PipeEvent::Failed { message } => {
                // The data path could not start (destination unreachable, bad client settings):
                // try again with backoff; the message stays visible meanwhile.
                tracing::error!(%mirror, "data path failed: {message}");
                m.pipe = None;
                m.pipe_restarts += 1;
                let delay = Duration::from_millis((500u64 << m.pipe_restarts.min(6)).min(30_000));
                m.data_path = format!(
                    "retrying (attempt {}): the data path could not start ({message}); next try in {:.1} s",
                    m.pipe_restarts,
                    delay.as_secs_f64()
                );
                m.restart_pipe_at = Some((tokio::time::Instant::now() + delay, message));
            }
        }
    }

    /// The data path hit a fatal producer error. If another instance took over, our own state
    /// writer is fenced too: then this instance stops mirroring and says why. Otherwise it was a
    /// genuine producer failure: start a new data path and resume every mirroring partition from
    /// its committed position (the new producer's init aborts anything left open), so nothing is
    /// lost or duplicated.
    async fn after_pipe_fatal(&mut self, mirror: &str, message: String) {
        let probe = {
            let m = &self.mirrors[mirror];
            persist::mirror(&m.stored, self.state_partitions)
        };
        self.pending_writes.push(probe);
        let probed = self.flush().await;
        if self.fenced.is_some() {
            let why = format!("fenced: another kmirror instance now mirrors this destination ({message})");
            tracing::error!(%mirror, "{why}");
            let m = self.mirrors.get_mut(mirror).expect("known");
            m.fenced = true;
            m.data_path = why;
            return;
        }
        if let Err(e) = probed {
            // The destination itself is unavailable: try again later (with backoff).
            let m = self.mirrors.get_mut(mirror).expect("known");
            m.pipe_restarts += 1;
            let delay = Duration::from_millis((500u64 << m.pipe_restarts.min(6)).min(30_000));
            m.restart_pipe_at = Some((tokio::time::Instant::now() + delay, message.clone()));
            m.data_path = format!(
                "retrying (attempt {}): the destination is unavailable ({e}); data path restarts in {:.1} s",
                m.pipe_restarts,
                delay.as_secs_f64()
            );
            return;
        }
        self.mirrors.get_mut(mirror).expect("known").pipe_restarts = 0;
        tracing::warn!(%mirror, "data path producer failed ({message}); restarting it from the committed state");
        self.mirrors.get_mut(mirror).expect("known").data_path = format!("restarting after: {message}");
        if let Some(rx) = self.spawn_pipe_for(mirror) {
            self.wait_ready(vec![rx]).await;
        }
        let topics: Vec<String> = self.mirrors[mirror].topics.keys().cloned().collect();
        for topic in topics {
            let parts = self.topic_partitions_in(mirror, &topic, &[PartitionState::Mirroring]).unwrap_or_default();
            if parts.is_empty() {
                continue;
            }
            let req: Vec<_> = parts.iter().map(|p| (topic.clone(), *p, OffsetSpec::Latest)).collect();
            let ends: BTreeMap<i32, i64> =
                match self.destination_admin.list_offsets(&req, IsolationLevel::ReadUncommitted).await {
                    Ok(v) => v.into_iter().map(|o| (o.partition, o.offset)).collect(),
                    Err(e) => {
                        for p in parts {
                            self.fail(mirror, &topic, p, ErrorCode::DestinationUnavailable, e.to_string());
                        }
                        continue;
                    }
                };
            let specs: Vec<AssignSpec> = parts
                .iter()
                .filter_map(|p| {
                    let pos = self.mirrors[mirror].topics[&topic].partitions[p].record.position?;
                    Some(AssignSpec {
                        topic: topic.clone(),
                        partition: *p,
                        next_source_offset: Some(pos.next_source_offset),
                        source_leader_epoch: (pos.source_leader_epoch >= 0).then_some(pos.source_leader_epoch),
                        destination_next_offset: ends.get(p).copied().unwrap_or(0),
                        destination_end_offset: pos.destination_end_offset,
                    })
                })
                .collect();
            self.assign(mirror, specs);
        }
        let _ = self.flush().await;
    }

    /// Retries FAILED partitions whose backoff is over, and re-runs unfinished stops.
    async fn retry_due(&mut self) {
        if self.fenced.is_some() {
            return;
        }
        let due: Vec<(String, String)> = self
            .mirrors
            .iter_mut()
            .filter_map(|(n, m)| match &m.restart_pipe_at {
                Some((at, _)) if *at <= tokio::time::Instant::now() => {
                    m.restart_pipe_at.take().map(|(_, msg)| (n.clone(), msg))
                }
                _ => None,
            })
            .collect();
        for (mirror, message) in due {
            self.after_pipe_fatal(&mirror, message).await;
        }
        let t = now();
        let mut due: Vec<(String, String, i32)> = Vec::new();
        for (mn, m) in &self.mirrors {
            if m.fenced || m.cluster_id_status == ClusterIdStatus::Mismatch {
                continue;
            }
            for (tn, topic) in &m.topics {
                for (p, rt) in &topic.partitions {
                    if rt.record.is_retry_due(t) {
                        due.push((mn.clone(), tn.clone(), *p));
                    }
                }
            }
        }
        let mut by_topic: BTreeMap<(String, String), Vec<i32>> = BTreeMap::new();
        for (m, tn, p) in due {
            if self.apply(&m, &tn, p, Event::Retry).is_ok() {
                by_topic.entry((m, tn)).or_default().push(p);
            }
        }
        if by_topic.is_empty() {
            return;
        }
        if self.flush().await.is_err() {
            return;
        }
        for ((m, tn), parts) in by_topic {
            let mut prepare = Vec::new();
            let mut stopping = Vec::new();
            let mut pausing = Vec::new();
            for p in parts {
                match self.mirrors[&m].topics[&tn].partitions[&p].record.state {
                    PartitionState::Preparing => prepare.push(p),
                    PartitionState::Stopping => stopping.push(p),
                    PartitionState::Pausing => pausing.push(p),
                    _ => {}
                }
            }
            if !prepare.is_empty() {
                let _ = self.prepare(&m, &tn, &prepare, None).await;
            }
            if !pausing.is_empty() {
                // Unassign again: the data path may still hold them (that is why it failed).
                let _ = self.finish_pause(&m, &tn, &pausing).await;
            }
            if !stopping.is_empty() {
                let _ = self.finish_stop(&m, &tn, &stopping).await;
            }
            let _ = self.flush().await;
        }
    }

    fn spawn_lag_refresh(&mut self) {
        let dest = self.destination_admin.clone();
        let now = tokio::time::Instant::now();
        for (name, m) in self.mirrors.iter_mut() {
            if m.lag_in_flight || m.topics.is_empty() || now < m.lag_due {
                continue;
            }
            let keys: Vec<(String, i32)> =
                m.topics.iter().flat_map(|(t, rt)| rt.partitions.keys().map(move |p| (t.clone(), *p))).collect();
            m.lag_in_flight = true;
            m.lag_due = now + lag_refresh_every(self.config.lag_refresh_interval, keys.len());
            let source = m.source_admin.clone();
            let dest = dest.clone();
            let internal = self.internal_tx.clone();
            let mirror = name.clone();
            tokio::spawn(async move {
                let (offsets, error) = read_offsets(&source, &dest, &keys).await;
                let _ = internal.send(Internal::Lag { mirror, offsets, error });
            });
        }
    }

    fn spawn_metadata_refresh(&mut self, only: Option<&str>) {
        let t = now();
        for (name, m) in self.mirrors.iter_mut() {
            if only.is_some_and(|o| o != name) || m.fenced {
                continue;
            }
            if m.metadata_in_flight {
                m.metadata_again |= only.is_some();
                continue;
            }
            m.metadata_in_flight = true;
            let input = metadata::RefreshInput {
                mirror: name.clone(),
                sync: m.stored.spec.sync.clone(),
                expected_cluster_id: m.stored.spec.expected_source_cluster_id.clone(),
                source: m.source_admin.clone(),
                destination: self.destination_admin.clone(),
                topics: m
                    .topics
                    .iter()
                    .map(|(tn, t)| metadata::TopicInput {
                        name: tn.clone(),
                        partitions: t
                            .partitions
                            .iter()
                            .map(|(p, rt)| (*p, rt.record.state, rt.record.position))
                            .collect(),
                    })
                    .collect(),
                offset_maps: Arc::clone(&self.offset_maps),
                created_acls: m.stored.created_acls.clone(),
                applied_configs: m.applied_configs.clone(),
                now: t,
            };
            let internal = self.internal_tx.clone();
            let mirror = name.clone();
            tokio::spawn(async move {
                let report = metadata::refresh(input).await;
                let _ = internal.send(Internal::Metadata { mirror, report: Box::new(report) });
            });
        }
    }

    /// Offset maps grow by a run per partition per transaction (the commit marker splits them), in
    /// memory and as OffsetRuns records in the state topic. Reads the destination log start of
    /// every partition that has a map, so [`Coordinator::prune_offset_maps`] can drop the batches
    /// retention (or DeleteRecords) removed: a map then spans the destination's retention. Runs
    /// with the metadata refresh; needs only the destination, so it goes on with the source down.
    fn spawn_offset_map_prune(&mut self, only: Option<&str>) {
        if self.fenced.is_some() {
            return;
        }
        let keys_of: HashMap<String, Vec<(String, i32)>> = {
            let maps = self.offset_maps.read().unwrap_or_else(|e| e.into_inner());
            let mut by_mirror: HashMap<String, Vec<(String, i32)>> = HashMap::new();
            for (mirror, topic, partition) in maps.keys() {
                by_mirror.entry(mirror.clone()).or_default().push((topic.clone(), *partition));
            }
            by_mirror
        };
        for (name, m) in self.mirrors.iter_mut() {
            if only.is_some_and(|o| o != name) || m.fenced || m.prune_in_flight {
                continue;
            }
            let Some(keys) = keys_of.get(name) else { continue };
            m.prune_in_flight = true;
            let q: Vec<_> = keys.iter().map(|(t, p)| (t.clone(), *p, OffsetSpec::Earliest)).collect();
            let dest = self.destination_admin.clone();
            let internal = self.internal_tx.clone();
            let mirror = name.clone();
            tokio::spawn(async move {
                let starts = match dest.list_offsets(&q, IsolationLevel::ReadUncommitted).await {
                    Ok(v) => v.into_iter().map(|o| ((o.topic, o.partition), o.offset)).collect(),
                    Err(e) => {
                        // One topic the destination no longer has (a stopped topic its users
                        // deleted; its map stays for offset translation) fails the whole answer.
                        // Topic by topic, the others are still pruned; a failed read prunes
                        // nothing of its topic this round, and the next refresh tries again.
                        tracing::debug!(%mirror, "offset-map prune: destination log starts: {e}; asking per topic");
                        let mut by_topic: BTreeMap<&str, Vec<(String, i32, OffsetSpec)>> = BTreeMap::new();
                        for r in &q {
                            by_topic.entry(r.0.as_str()).or_default().push(r.clone());
                        }
                        let mut starts = Vec::new();
                        for (topic, requests) in by_topic {
                            match dest.list_offsets(&requests, IsolationLevel::ReadUncommitted).await {
                                Ok(v) => starts.extend(v.into_iter().map(|o| ((o.topic, o.partition), o.offset))),
                                Err(e) => {
                                    tracing::debug!(%mirror, topic, "offset-map prune: destination log starts: {e}")
                                }
                            }
                        }
                        starts
                    }
                };
                let _ = internal.send(Internal::LogStarts { mirror, starts });
            });
        }
    }

    /// Drops the offset-map batches below each partition's destination log start, in memory, and
    /// deletes their OffsetRuns records (tombstones) so a restart does not load them again. At most
    /// [`PRUNE_BATCHES_PER_ROUND`] per mirror per round: a first prune after a long time must not
    /// hold the coordinator (or the state topic) for long.
    async fn prune_offset_maps(&mut self, mirror: &str, starts: &[((String, i32), i64)]) {
        let Some(m) = self.mirrors.get_mut(mirror) else { return };
        m.prune_in_flight = false;
        if self.fenced.is_some() || m.fenced || starts.is_empty() {
            return;
        }
        let mut budget = PRUNE_BATCHES_PER_ROUND;
        let mut writes = Vec::new();
        {
            let topic_ids = m.topic_ids.read().unwrap_or_else(|e| e.into_inner());
            let mut maps = self.offset_maps.write().unwrap_or_else(|e| e.into_inner());
            for ((topic, partition), log_start) in starts {
                if budget == 0 {
                    break;
                }
                let (Some(topic_id), Some(map)) =
                    (topic_ids.get(topic), maps.get_mut(&(mirror.to_string(), topic.clone(), *partition)))
                else {
                    continue;
                };
                let dropped = map.prune_stretches_below(*log_start, budget);
                budget -= dropped.len();
                writes.extend(dropped.into_iter().map(|first_destination_offset| {
                    persist::offset_runs_tombstone(
                        mirror,
                        topic_id,
                        *partition,
                        first_destination_offset,
                        self.state_partitions,
                    )
                }));
            }
        }
        if writes.is_empty() {
            return;
        }
        tracing::debug!(%mirror, batches = writes.len(), "offset maps pruned below the destination log start");
        self.pending_writes.extend(writes);
        if let Err(e) = self.flush().await {
            // The records stay; the next start loads them and the next prune deletes them again.
            tracing::warn!(%mirror, "offset-map prune: state write failed: {e}");
        }
    }

    fn cluster_id_mismatch(&mut self, mirror: &str, observed: &str, detail: &str) {
        let Some(m) = self.mirrors.get_mut(mirror) else { return };
        let first = m.cluster_id_status != ClusterIdStatus::Mismatch;
        m.observed_cluster_id = Some(observed.to_string());
        m.cluster_id_status = ClusterIdStatus::Mismatch;
        m.cluster_id_checked_at = Some(now());
        m.cluster_id_error = Some(detail.to_string());
        if first {
            // Logged once per state change, not on every refresh.
            tracing::error!(%mirror, "source cluster ID mismatch, mirror halted: {detail}");
        }
        let targets: Vec<(String, i32)> = m
            .topics
            .iter()
            .flat_map(|(t, rt)| {
                rt.partitions
                    .iter()
                    .filter(|(_, p)| !matches!(p.record.state, PartitionState::Stopped | PartitionState::Failed))
                    .map(move |(p, _)| (t.clone(), *p))
            })
            .collect();
        if let Some(p) = &m.pipe {
            // Halt: abort whatever is open and drop every partition from the data path.
            let (reply, _rx) = tokio::sync::oneshot::channel();
            let _ = p.tx.send(PipeCommand::Unassign {
                partitions: targets.clone(),
                finish: Finish::Abort,
                fence: false,
                reply,
            });
        }
        for (t, p) in targets {
            self.fail(mirror, &t, p, ErrorCode::SourceClusterIdMismatch, detail.to_string());
        }
    }

    async fn metadata_result(&mut self, mirror: &str, report: metadata::RefreshReport) {
        let t = now();
        let Some(m) = self.mirrors.get_mut(mirror) else { return };
        m.metadata_in_flight = false;
        let enabled = m.stored.spec.sync.clone();
        let observed = match &report.cluster_id {
            Ok(id) => id.clone(),
            Err(e) => {
                if m.cluster_id_status != ClusterIdStatus::Mismatch {
                    if m.cluster_id_status != ClusterIdStatus::Unreachable {
                        tracing::warn!(%mirror, "source cluster unreachable: {e}");
                    }
                    m.cluster_id_status = ClusterIdStatus::Unreachable;
                    m.cluster_id_error = Some(e.clone());
                    m.cluster_id_checked_at = Some(t);
                }
                // The syncs did not run either: say so per kind, so a sync that cannot reach
                // its source is never shown as healthy.
                metadata::mark_not_run(&mut m.sync, &enabled, &format!("source cluster unreachable: {e}"), t);
                return;
            }
        };
        if let Some(exp) = m.stored.spec.expected_source_cluster_id.clone()
            && exp != observed
        {
            let detail = format!("the source cluster ID is {observed} but {exp} was expected");
            metadata::mark_not_run(&mut m.sync, &enabled, &format!("halted: {detail}"), t);
            self.cluster_id_mismatch(mirror, &observed, &detail);
            let _ = self.flush().await;
            return;
        }
        if m.cluster_id_status == ClusterIdStatus::Mismatch {
            tracing::info!(%mirror, "source cluster ID matches again");
        }
        m.observed_cluster_id = Some(observed);
        m.cluster_id_status = ClusterIdStatus::Ok;
        m.cluster_id_error = None;
        m.cluster_id_checked_at = Some(t);
        for (kind, outcome) in [
            (SyncKind::TopicConfigs, &report.configs),
            (SyncKind::GroupOffsets, &report.groups),
            (SyncKind::Acls, &report.acls),
        ] {
            if let Some(status) = metadata::status_mut(&mut m.sync, kind) {
                let before = status.last_error.clone();
                metadata::update_status(status, outcome, t);
                if status.last_error.is_some() && status.last_error != before {
                    tracing::warn!(%mirror, kind = kind.as_str(), "metadata sync failed: {}", status.last_error.as_deref().unwrap_or(""));
                }
                for w in &outcome.warnings {
                    tracing::warn!(%mirror, "config drift: {w}");
                }
            }
        }
        m.applied_configs = report.applied_configs;
        if report.groups.ran {
            m.group_views = report.group_views;
        }
        if let Some(created) = report.created_acls {
            m.stored.created_acls = created;
            let w = persist::mirror(&m.stored, self.state_partitions);
            self.pending_writes.push(w);
        }
        // Source topic deleted (two refreshes in a row), recreated (new topic ID), or resized.
        let m = self.mirrors.get_mut(mirror).expect("known");
        let mut failures = Vec::new();
        let mut grown = Vec::new();
        for (tn, seen) in report.topics {
            let Some(topic) = m.topics.get_mut(&tn) else { continue };
            match seen {
                None => {
                    topic.missing_refreshes += 1;
                    if topic.missing_refreshes >= 2 {
                        failures.push((tn, ErrorCode::SourceTopicDeleted, "the source topic was deleted".to_string()));
                    }
                }
                Some((id, _)) if id != topic.source_topic_id => {
                    failures.push((
                        tn,
                        ErrorCode::SourceTopicRecreated,
                        format!("the source topic was recreated: its ID was {} and is now {id}", topic.source_topic_id),
                    ));
                }
                Some((_, n)) => {
                    topic.missing_refreshes = 0;
                    let have = topic.partitions.len();
                    if n < have {
                        failures.push((
                            tn,
                            ErrorCode::PartitionCountDecreased,
                            format!("the source topic now has {n} partitions, the mirror has {have}"),
                        ));
                    } else if n > have && topic.partitions.values().any(|p| p.record.state == PartitionState::Mirroring)
                    {
                        grown.push((tn, n));
                    }
                }
            }
        }
        for (tn, code, message) in failures {
            let parts: Vec<i32> = self.mirrors[mirror].topics[&tn]
                .partitions
                .iter()
                .filter(|(_, p)| !matches!(p.record.state, PartitionState::Stopped | PartitionState::Failed))
                .map(|(p, _)| *p)
                .collect();
            if parts.is_empty() {
                continue;
            }
            let _ = self.unassign(mirror, &tn, &parts, Finish::Abort).await;
            for p in parts {
                self.fail(mirror, &tn, p, code, message.clone());
            }
        }
        let _ = self.flush().await;
        for (tn, n) in grown {
            if let Err(p) = self.grow_topic(mirror, &tn, n).await {
                tracing::warn!(%mirror, topic = %tn, "cannot mirror new partitions: {}", p.detail);
            }
        }
    }

    /// The source topic gained partitions: create them on the destination and start them
    /// (UNKNOWN → PREPARING → MIRRORING).
    async fn grow_topic(&mut self, mirror: &str, topic: &str, partitions: usize) -> Result<(), Problem> {
        let dest = self.destination_admin.clone();
        let d = dest.describe_topic(topic).await.map_err(|e| kafka_problem(ProblemKind::DestinationUnavailable, &e))?;
        if d.partitions.len() < partitions {
            match dest.create_partitions(topic, partitions).await {
                Ok(()) => {}
                Err(e) if e.is("INVALID_PARTITIONS") => {}
                Err(e) => return Err(kafka_problem(ProblemKind::DestinationUnavailable, &e)),
            }
            let mut visible = false;
            for _ in 0..100 {
                if let Ok(d) = dest.describe_topic(topic).await
                    && d.partitions.len() >= partitions
                    && d.partitions.iter().all(|p| p.leader.is_some())
                {
                    visible = true;
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            if !visible {
                return Err(Problem {
                    kind: ProblemKind::DestinationUnavailable,
                    detail: format!("new partitions of {topic:?} did not become available"),
                });
            }
        }
        let t = now();
        let new: Vec<i32> = {
            let rt = self.mirrors.get_mut(mirror).expect("known").topics.get_mut(topic).expect("known");
            let first = rt.partitions.len() as i32;
            let new: Vec<i32> = (first..partitions as i32).collect();
            for p in &new {
                rt.partitions.insert(*p, PartRt::new(PartitionRecord::new(t)));
            }
            new
        };
        tracing::info!(%mirror, %topic, "source partitions increased to {partitions}: mirroring the new ones");
        self.queue_topic(mirror, topic);
        for &p in &new {
            let _ = self.apply(mirror, topic, p, Event::Start { truncation: Truncation::None });
        }
        self.flush().await.map_err(|e| Problem { kind: e.kind(), detail: e.to_string() })?;
        self.prepare(mirror, topic, &new, None).await
    }

    // ----- snapshot ----------------------------------------------------------------------

    fn publish(&self) {
        let taken_at = now();
        let mirrors = self
            .mirrors
            .values()
            .map(|m| {
                let topics = m
                    .topics
                    .iter()
                    .map(|(tn, t)| {
                        let partitions: Vec<PartitionSnapshot> =
                            t.partitions.iter().map(|(p, rt)| partition_snapshot(tn, *p, rt, taken_at)).collect();
                        TopicSnapshot {
                            name: tn.clone(),
                            state: roll_up(partitions.iter().map(|p| p.state)),
                            source_topic_id: t.source_topic_id.clone(),
                            destination_topic_id: t.destination_topic_id.clone(),
                            lag_records: partitions.iter().map(|p| p.lag_records).sum(),
                            lag_seconds: partitions.iter().map(|p| p.lag_seconds).fold(0.0, f64::max),
                            partitions,
                        }
                    })
                    .collect();
                MirrorSnapshot {
                    name: m.stored.spec.name.clone(),
                    source_bootstrap_servers: m.stored.spec.source.bootstrap_servers.clone(),
                    source_properties: crate::domain::secrets::redact(&m.stored.spec.source.properties),
                    expected_source_cluster_id: m.stored.spec.expected_source_cluster_id.clone(),
                    sync_spec: m.stored.spec.sync.clone(),
                    observed_source_cluster_id: m.observed_cluster_id.clone(),
                    cluster_id_status: m.cluster_id_status,
                    cluster_id_checked_at: m.cluster_id_checked_at,
                    cluster_id_error: m.cluster_id_error.clone(),
                    data_path: m.data_path.clone(),
                    created_at: m.stored.created_at,
                    sync: m.sync.clone(),
                    groups: m.group_views.clone(),
                    topics,
                }
            })
            .collect();
        let snap = Snapshot {
            taken_at,
            destination_cluster_id: self.destination_cluster_id.clone(),
            destination_brokers: self.destination_brokers.clone(),
            mirrors,
        };
        self.snapshot_tx.send_replace(Arc::new(snap));
    }
}

/// The next source offset there is something to mirror from: the committed position, or the
/// fetch position when the consumer moved past trailing control records.
/// How often a mirror's lag is refreshed: the configured interval, stretched for large mirrors.
/// Each refresh lists four offsets of every partition (source log start, LSO and high watermark,
/// destination end); at 10,000 partitions doing that every second kept a third of a core busy in
/// librdkafka with the mirror idle. One millisecond per partition (10 s at 10,000) keeps the cost
/// flat per partition while small mirrors stay at the configured interval.
fn lag_refresh_every(configured: Duration, partitions: usize) -> Duration {
    configured.max(LAG_REFRESH_PER_PARTITION * u32::try_from(partitions).unwrap_or(u32::MAX))
}

fn next_to_mirror(rt: &PartRt) -> Option<i64> {
    let committed = rt.record.position.map(|p| p.next_source_offset);
    let fetched = rt.fetch_position.filter(|_| rt.record.state == PartitionState::Mirroring);
    match (committed, fetched) {
        (Some(c), Some(f)) => Some(c.max(f)),
        (c, f) => c.or(f),
    }
}

fn lag_records(rt: &PartRt) -> i64 {
    match (rt.offsets.source_lso, next_to_mirror(rt)) {
        (Some(lso), Some(next)) => (lso - next).max(0),
        (Some(lso), None) => (lso - rt.offsets.source_start.unwrap_or(0)).max(0),
        _ => 0,
    }
}

fn partition_snapshot(topic: &str, partition: i32, rt: &PartRt, t: Timestamp) -> PartitionSnapshot {
    let rec = &rt.record;
    let lag = if rec.state == PartitionState::Stopped { 0 } else { lag_records(rt) };
    let lag_seconds = if lag > 0 {
        rt.caught_up_at.map_or(0.0, |c| (t.as_millis() - c.as_millis()).max(0) as f64 / 1000.0)
    } else {
        0.0
    };
    PartitionSnapshot {
        topic: topic.to_string(),
        partition,
        state: rec.state,
        state_since: rec.state_since,
        state_epoch: rec.state_epoch,
        source_log_start_offset: rt.offsets.source_start,
        source_last_stable_offset: rt.offsets.source_lso,
        source_high_watermark: rt.offsets.source_hwm,
        mirrored_source_offset: next_to_mirror(rt),
        destination_high_watermark: rt.offsets.destination_hwm,
        lag_records: lag,
        lag_seconds,
        last_mirrored_epoch: rec.position.map(|p| p.source_leader_epoch).filter(|e| *e >= 0),
        error: rec.error.as_ref().map(|e| PartitionErrorView {
            code: e.code.as_str().to_string(),
            message: e.message.clone(),
            retryable: e.code.is_retryable(),
        }),
        retry_count: rec.retry_count,
        records_mirrored: rt.records_mirrored,
        bytes_mirrored: rt.bytes_mirrored,
        destination_stop_offset: rec.stop_point.map(|s| s.destination_stop_offset),
    }
}

async fn read_offsets(
    source: &KafkaAdmin,
    dest: &KafkaAdmin,
    keys: &[(String, i32)],
) -> (Vec<((String, i32), Offsets)>, Option<String>) {
    let mut out: HashMap<(String, i32), Offsets> = keys.iter().map(|k| (k.clone(), Offsets::default())).collect();
    let mut error = None;
    let q = |spec| keys.iter().map(|(t, p)| (t.clone(), *p, spec)).collect::<Vec<_>>();
    let timeout = Duration::from_secs(5);
    let src = async {
        let start = source.list_offsets(&q(OffsetSpec::Earliest), IsolationLevel::ReadCommitted).await?;
        let lso = source.list_offsets(&q(OffsetSpec::Latest), IsolationLevel::ReadCommitted).await?;
        let hwm = source.list_offsets(&q(OffsetSpec::Latest), IsolationLevel::ReadUncommitted).await?;
        Ok::<_, KafkaError>((start, lso, hwm))
    };
    match tokio::time::timeout(timeout, src).await {
        Ok(Ok((start, lso, hwm))) => {
            for o in start {
                if let Some(x) = out.get_mut(&(o.topic.clone(), o.partition)) {
                    x.source_start = Some(o.offset);
                }
            }
            for o in lso {
                if let Some(x) = out.get_mut(&(o.topic.clone(), o.partition)) {
                    x.source_lso = Some(o.offset);
                }
            }
            for o in hwm {
                if let Some(x) = out.get_mut(&(o.topic.clone(), o.partition)) {
                    x.source_hwm = Some(o.offset);
                }
            }
        }
        Ok(Err(e)) => error = Some(format!("source: {e}")),
        Err(_) => error = Some("source: timed out".into()),
    }
    match tokio::time::timeout(timeout, dest.list_offsets(&q(OffsetSpec::Latest), IsolationLevel::ReadUncommitted))
        .await
    {
        Ok(Ok(v)) => {
            for o in v {
                if let Some(x) = out.get_mut(&(o.topic.clone(), o.partition)) {
                    x.destination_hwm = Some(o.offset);
                }
            }
        }
        Ok(Err(e)) => error = Some(format!("destination: {e}")),
        Err(_) => error = Some("destination: timed out".into()),
    }
    (out.into_iter().collect(), error)
}

fn not_found(mirror: &str) -> EngineError {
    EngineError::rejected(ProblemKind::MirrorNotFound, format!("mirror {mirror:?} does not exist"))
}

fn not_in_mirror(mirror: &str, topic: &str) -> Problem {
    Problem { kind: ProblemKind::TopicNotInMirror, detail: format!("topic {topic:?} is not part of mirror {mirror:?}") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lag_refresh_stretches_with_the_partition_count_only_for_large_mirrors() {
        let second = Duration::from_secs(1);
        assert_eq!(lag_refresh_every(second, 8), second);
        assert_eq!(lag_refresh_every(second, 1_000), second);
        assert_eq!(lag_refresh_every(second, 10_000), Duration::from_secs(10));
        assert_eq!(lag_refresh_every(Duration::from_secs(30), 10_000), Duration::from_secs(30));
        assert_eq!(lag_refresh_every(second, usize::MAX), LAG_REFRESH_PER_PARTITION * u32::MAX);
    }
}
