//! In-memory clusters, state topic and data paths behind the coordinator's ports
//! (`engine::ports`), so each edge the coordinator drives gets a unit test that runs in
//! milliseconds without Kafka.
//!
//! - [`FakeCluster`]: topics with partitions (log start, end offset, leader epoch), topic IDs, a
//!   cluster ID; can be made unreachable. Serves as the destination and as each source.
//! - [`FakeState`]: the state topic. Writers are fenced per transactional id the way Kafka does
//!   it: opening a writer with the same id (a second instance, a restarted data path) fences the
//!   earlier one. A test can also make writes fail or fence the current writers.
//! - [`FakePipes`]: data paths as threads answering `PipeCommand`s. An assigned partition is
//!   mirrored at once up to the source's end (records appended to the destination partition,
//!   progress written to the state store through the mirror's encoder, then `Committed`), and
//!   again whenever the source grows. A test can fail a partition, report a retry, fence a data
//!   path, make the next start or the next unassigns fail, and read what was assigned.
//!
//! [`FakeWorld`] bundles them and implements `Ports`.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures_util::future::BoxFuture;
use tokio::sync::mpsc;

use crate::data_path::{
    AssignSpec, EncodeProgress, FinalPosition, PartitionFault, PartitionProgress, PipeCommand, PipeConfig, PipeError,
    PipeEvent, StateWrite,
};
use crate::domain::offset_map::Run;
use crate::kafka::membership::MembershipEvent;
use crate::kafka::state_log::{LogRecord, StateWriteError};
use crate::kafka::{
    AclBinding, AclFilter, ClusterDescription, ConfigEntry, ConfigOp, ConfigSource, GroupDescription, GroupListing,
    GroupOffset, IsolationLevel, KafkaCode, KafkaError, KafkaResult, KafkaUuid, ListedOffset, Node, OffsetSpec,
    PartitionInfo, TopicDescription,
};

use super::EngineConfig;
use super::ports::{Admin, ClusterAdmin, Ports, SpawnedDataPath, StateStore, WriterRole};
use crate::domain::quarantine::QuarantinedPartition;
use crate::kafka::quarantine::QuarantineError;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn kafka_error(operation: &'static str, resource: &str, name: &str, code: i32) -> KafkaError {
    KafkaError::Kafka {
        operation,
        resource: resource.to_string(),
        code: KafkaCode { code, name: name.to_string() },
        message: format!("fake: {name}"),
    }
}

fn unknown_topic(operation: &'static str, topic: &str) -> KafkaError {
    kafka_error(operation, &format!("topic {topic}"), "UNKNOWN_TOPIC_OR_PART", 3)
}

/// Topic IDs unique across every fake cluster of the process.
static NEXT_TOPIC_ID: AtomicI64 = AtomicI64::new(1);

fn new_topic_id() -> KafkaUuid {
    KafkaUuid {
        most_significant_bits: 0x6b6d_6972,
        least_significant_bits: NEXT_TOPIC_ID.fetch_add(1, Ordering::Relaxed),
    }
}

// ----- clusters ------------------------------------------------------------------------------

/// One partition of a fake topic: offsets `[log_start, end)` hold records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FakePartition {
    pub log_start: i64,
    pub end: i64,
    pub leader_epoch: i32,
}

#[derive(Debug, Clone)]
struct FakeTopic {
    id: KafkaUuid,
    partitions: Vec<FakePartition>,
    /// Dynamic topic configs.
    configs: BTreeMap<String, String>,
}

#[derive(Debug)]
struct ClusterInner {
    cluster_id: String,
    unreachable: bool,
    /// How long each admin call takes (zero: answered at once), like a busy cluster.
    delay: Duration,
    fail_delete_records: bool,
    /// DeleteRecords requests so far (answered or failed).
    delete_records_calls: usize,
    /// Metadata requests for the whole topic list so far.
    list_topics_calls: usize,
    topics: BTreeMap<String, FakeTopic>,
    /// Every ListOffsets request so far, as asked.
    list_offsets: Vec<ListOffsetsCall>,
    /// When records were appended by `produce`, per partition: (first offset, wall-clock ms), in
    /// order. Records without an entry (a topic's initial ones) are older than any.
    stamps: HashMap<(String, i32), Vec<(i64, i64)>>,
}

/// One ListOffsets request a [`FakeCluster`] answered (or failed).
pub(crate) type ListOffsetsCall = (IsolationLevel, Vec<(String, i32, OffsetSpec)>);

/// An in-memory Kafka cluster, as the admin calls see it.
#[derive(Debug)]
pub(crate) struct FakeCluster {
    inner: Mutex<ClusterInner>,
}

impl FakeCluster {
    pub(crate) fn new(cluster_id: &str) -> Arc<FakeCluster> {
        Arc::new(FakeCluster {
            inner: Mutex::new(ClusterInner {
                cluster_id: cluster_id.to_string(),
                unreachable: false,
                delay: Duration::ZERO,
                fail_delete_records: false,
                delete_records_calls: 0,
                list_topics_calls: 0,
                topics: BTreeMap::new(),
                list_offsets: Vec::new(),
                stamps: HashMap::new(),
            }),
        })
    }

    /// A topic with `partitions` partitions holding `records` records each (leader epoch 0).
    pub(crate) fn add_topic(&self, name: &str, partitions: i32, records: i64) {
        let parts = (0..partitions).map(|_| FakePartition { log_start: 0, end: records, leader_epoch: 0 }).collect();
        lock(&self.inner)
            .topics
            .insert(name.to_string(), FakeTopic { id: new_topic_id(), partitions: parts, configs: BTreeMap::new() });
    }

    /// Deletes a topic (a later `add_topic` of the name gets a new topic ID).
    pub(crate) fn delete_topic(&self, name: &str) {
        lock(&self.inner).topics.remove(name);
    }

    /// Appends `n` records to a partition, stamped now.
    pub(crate) fn produce(&self, topic: &str, partition: i32, n: i64) {
        self.produce_at(topic, partition, n, crate::clock::now().as_millis());
    }

    /// Appends `n` records to a partition with record time `at` (ms since the epoch).
    pub(crate) fn produce_at(&self, topic: &str, partition: i32, n: i64, at: i64) {
        let mut c = lock(&self.inner);
        let p = &mut c.topics.get_mut(topic).expect("fake topic").partitions[partition as usize];
        let first = p.end;
        p.end += n;
        c.stamps.entry((topic.to_string(), partition)).or_default().push((first, at));
    }

    /// Adds partitions to a topic (empty ones).
    pub(crate) fn grow(&self, topic: &str, total: i32) {
        let mut c = lock(&self.inner);
        let t = c.topics.get_mut(topic).expect("fake topic");
        while (t.partitions.len() as i32) < total {
            t.partitions.push(FakePartition { log_start: 0, end: 0, leader_epoch: 0 });
        }
    }

    /// A new leader for a partition: its epoch goes up by one.
    pub(crate) fn bump_epoch(&self, topic: &str, partition: i32) {
        let mut c = lock(&self.inner);
        c.topics.get_mut(topic).expect("fake topic").partitions[partition as usize].leader_epoch += 1;
    }

    pub(crate) fn partition(&self, topic: &str, partition: i32) -> Option<FakePartition> {
        lock(&self.inner).topics.get(topic)?.partitions.get(partition as usize).copied()
    }

    /// Every partition of a topic (empty when there is no such topic).
    pub(crate) fn partitions(&self, topic: &str) -> Vec<FakePartition> {
        lock(&self.inner).topics.get(topic).map(|t| t.partitions.clone()).unwrap_or_default()
    }

    pub(crate) fn topic_id(&self, topic: &str) -> Option<String> {
        Some(lock(&self.inner).topics.get(topic)?.id.to_string())
    }

    pub(crate) fn set_unreachable(&self, unreachable: bool) {
        lock(&self.inner).unreachable = unreachable;
    }

    /// Every admin call from now on takes `delay` to answer.
    pub(crate) fn set_delay(&self, delay: Duration) {
        lock(&self.inner).delay = delay;
    }

    pub(crate) fn set_cluster_id(&self, id: &str) {
        lock(&self.inner).cluster_id = id.to_string();
    }

    /// Every ListOffsets request so far (answered or not).
    pub(crate) fn list_offsets_calls(&self) -> Vec<ListOffsetsCall> {
        lock(&self.inner).list_offsets.clone()
    }

    pub(crate) fn set_fail_delete_records(&self, fail: bool) {
        lock(&self.inner).fail_delete_records = fail;
    }

    pub(crate) fn list_topics_calls(&self) -> usize {
        lock(&self.inner).list_topics_calls
    }

    pub(crate) fn delete_records_calls(&self) -> usize {
        lock(&self.inner).delete_records_calls
    }

    /// Runs `f` on the cluster, or fails the way an unreachable cluster does.
    fn call<T: Send + 'static>(
        &self,
        operation: &'static str,
        f: impl FnOnce(&mut ClusterInner) -> KafkaResult<T>,
    ) -> BoxFuture<'static, KafkaResult<T>> {
        let mut c = lock(&self.inner);
        let r = if c.unreachable {
            Err(KafkaError::Timeout { operation, resource: "fake cluster".into(), after: Duration::ZERO })
        } else {
            f(&mut c)
        };
        let delay = c.delay;
        if delay.is_zero() {
            return Box::pin(std::future::ready(r));
        }
        Box::pin(async move {
            tokio::time::sleep(delay).await;
            r
        })
    }
}

fn describe(name: &str, t: &FakeTopic) -> TopicDescription {
    TopicDescription {
        name: name.to_string(),
        topic_id: t.id,
        is_internal: false,
        partitions: (0..t.partitions.len() as i32)
            .map(|p| PartitionInfo { partition: p, leader: Some(1), replicas: vec![1], isr: vec![1] })
            .collect(),
    }
}

impl ClusterAdmin for FakeCluster {
    fn is_limited(&self) -> bool {
        false
    }

    fn describe_cluster(&self) -> BoxFuture<'_, KafkaResult<ClusterDescription>> {
        self.call("DescribeCluster", |c| {
            let node = Node { id: 1, host: "fake".into(), port: 9092, rack: None };
            Ok(ClusterDescription {
                cluster_id: c.cluster_id.clone(),
                controller: Some(node.clone()),
                nodes: vec![node],
            })
        })
    }

    fn describe_topics<'a>(
        &'a self,
        names: &'a [String],
    ) -> BoxFuture<'a, KafkaResult<Vec<KafkaResult<TopicDescription>>>> {
        self.call("DescribeTopics", |c| {
            Ok(names
                .iter()
                .map(|n| c.topics.get(n).map(|t| describe(n, t)).ok_or_else(|| unknown_topic("DescribeTopics", n)))
                .collect())
        })
    }

    fn describe_topic<'a>(&'a self, name: &'a str) -> BoxFuture<'a, KafkaResult<TopicDescription>> {
        self.call("DescribeTopics", |c| {
            c.topics.get(name).map(|t| describe(name, t)).ok_or_else(|| unknown_topic("DescribeTopics", name))
        })
    }

    fn list_topics(&self) -> BoxFuture<'_, KafkaResult<Vec<String>>> {
        lock(&self.inner).list_topics_calls += 1;
        self.call("Metadata", |c| Ok(c.topics.keys().filter(|n| !n.starts_with("__")).cloned().collect()))
    }

    fn list_offsets<'a>(
        &'a self,
        requests: &'a [(String, i32, OffsetSpec)],
        isolation: IsolationLevel,
    ) -> BoxFuture<'a, KafkaResult<Vec<ListedOffset>>> {
        // Asked, whether or not the cluster answers.
        lock(&self.inner).list_offsets.push((isolation, requests.to_vec()));
        self.call("ListOffsets", |c| {
            requests
                .iter()
                .map(|(topic, partition, spec)| {
                    let p = c
                        .topics
                        .get(topic)
                        .and_then(|t| t.partitions.get(*partition as usize))
                        .ok_or_else(|| unknown_topic("ListOffsets", topic))?;
                    let offset = match spec {
                        OffsetSpec::Earliest => p.log_start,
                        // The first record appended at or after `ts`; -1 (Kafka's answer) when
                        // none is that recent.
                        OffsetSpec::Timestamp(ts) => c
                            .stamps
                            .get(&(topic.clone(), *partition))
                            .and_then(|s| s.iter().find(|(_, at)| at >= ts))
                            .map_or(-1, |(first, _)| (*first).max(p.log_start)),
                        _ => p.end,
                    };
                    Ok(ListedOffset {
                        topic: topic.clone(),
                        partition: *partition,
                        offset,
                        timestamp: -1,
                        leader_epoch: Some(p.leader_epoch),
                    })
                })
                .collect()
        })
    }

    fn describe_topic_configs<'a>(&'a self, topic: &'a str) -> BoxFuture<'a, KafkaResult<Vec<ConfigEntry>>> {
        self.call("DescribeConfigs", |c| {
            let t = c.topics.get(topic).ok_or_else(|| unknown_topic("DescribeConfigs", topic))?;
            Ok(t.configs
                .iter()
                .map(|(k, v)| ConfigEntry {
                    name: k.clone(),
                    value: Some(v.clone()),
                    source: ConfigSource::DynamicTopic,
                    is_default: false,
                    is_read_only: false,
                    is_sensitive: false,
                })
                .collect())
        })
    }

    fn alter_topic_configs<'a>(
        &'a self,
        topic: &'a str,
        ops: &'a [(String, ConfigOp)],
    ) -> BoxFuture<'a, KafkaResult<()>> {
        self.call("IncrementalAlterConfigs", |c| {
            let t = c.topics.get_mut(topic).ok_or_else(|| unknown_topic("IncrementalAlterConfigs", topic))?;
            for (k, op) in ops {
                match op {
                    ConfigOp::Set(v) => drop(t.configs.insert(k.clone(), v.clone())),
                    ConfigOp::Delete => drop(t.configs.remove(k)),
                    ConfigOp::Append(_) | ConfigOp::Subtract(_) => {}
                }
            }
            Ok(())
        })
    }

    fn create_topic<'a>(
        &'a self,
        name: &'a str,
        partitions: i32,
        _replication: i32,
        configs: &'a [(String, String)],
    ) -> BoxFuture<'a, KafkaResult<()>> {
        self.call("CreateTopics", |c| {
            if c.topics.contains_key(name) {
                return Err(kafka_error("CreateTopics", &format!("topic {name}"), "TOPIC_ALREADY_EXISTS", 36));
            }
            let parts = (0..partitions).map(|_| FakePartition { log_start: 0, end: 0, leader_epoch: 0 }).collect();
            let configs = configs.iter().cloned().collect();
            c.topics.insert(name.to_string(), FakeTopic { id: new_topic_id(), partitions: parts, configs });
            Ok(())
        })
    }

    fn create_partitions<'a>(&'a self, topic: &'a str, total: usize) -> BoxFuture<'a, KafkaResult<()>> {
        self.call("CreatePartitions", |c| {
            let t = c.topics.get_mut(topic).ok_or_else(|| unknown_topic("CreatePartitions", topic))?;
            if total <= t.partitions.len() {
                return Err(kafka_error("CreatePartitions", topic, "INVALID_PARTITIONS", 37));
            }
            t.partitions.resize(total, FakePartition { log_start: 0, end: 0, leader_epoch: 0 });
            Ok(())
        })
    }

    fn delete_records<'a>(&'a self, topic: &'a str, partitions: &'a [(i32, i64)]) -> BoxFuture<'a, KafkaResult<()>> {
        self.call("DeleteRecords", |c| {
            c.delete_records_calls += 1;
            if c.fail_delete_records {
                return Err(KafkaError::Timeout {
                    operation: "DeleteRecords",
                    resource: topic.to_string(),
                    after: Duration::ZERO,
                });
            }
            let t = c.topics.get_mut(topic).ok_or_else(|| unknown_topic("DeleteRecords", topic))?;
            for &(p, before) in partitions {
                let part = t.partitions.get_mut(p as usize).ok_or_else(|| unknown_topic("DeleteRecords", topic))?;
                part.log_start = if before < 0 { part.end } else { before.clamp(part.log_start, part.end) };
            }
            Ok(())
        })
    }

    fn list_consumer_groups(&self) -> BoxFuture<'_, KafkaResult<Vec<GroupListing>>> {
        self.call("ListConsumerGroups", |_| Ok(Vec::new()))
    }

    fn describe_consumer_groups<'a>(
        &'a self,
        groups: &'a [String],
    ) -> BoxFuture<'a, KafkaResult<Vec<KafkaResult<GroupDescription>>>> {
        self.call("DescribeConsumerGroups", |_| {
            Ok(groups.iter().map(|g| Err(kafka_error("DescribeConsumerGroups", g, "GROUP_ID_NOT_FOUND", 69))).collect())
        })
    }

    fn list_consumer_group_offsets<'a>(
        &'a self,
        _group: &'a str,
        _partitions: Option<&'a [(String, i32)]>,
        _require_stable: bool,
    ) -> BoxFuture<'a, KafkaResult<Vec<GroupOffset>>> {
        self.call("ListConsumerGroupOffsets", |_| Ok(Vec::new()))
    }

    fn alter_consumer_group_offsets<'a>(
        &'a self,
        _group: &'a str,
        _offsets: &'a [GroupOffset],
    ) -> BoxFuture<'a, KafkaResult<()>> {
        self.call("AlterConsumerGroupOffsets", |_| Ok(()))
    }

    fn describe_acls<'a>(&'a self, _filter: &'a AclFilter) -> BoxFuture<'a, KafkaResult<Vec<AclBinding>>> {
        self.call("DescribeAcls", |_| Ok(Vec::new()))
    }

    fn create_acls<'a>(&'a self, _bindings: &'a [AclBinding]) -> BoxFuture<'a, KafkaResult<()>> {
        self.call("CreateAcls", |_| Ok(()))
    }

    fn delete_acls<'a>(&'a self, _filters: &'a [AclFilter]) -> BoxFuture<'a, KafkaResult<Vec<AclBinding>>> {
        self.call("DeleteAcls", |_| Ok(Vec::new()))
    }
}

// ----- the state topic -----------------------------------------------------------------------

/// What the state topic does with the next writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WriteMode {
    Accept,
    /// The destination does not take them (`StateWriteError::Unavailable`).
    Unavailable,
    /// The next `n` writes are taken, then none (as `Unavailable`).
    AcceptThenUnavailable(u32),
}

#[derive(Debug)]
struct StateInner {
    partitions: Option<i32>,
    records: Vec<LogRecord>,
    next_offset: HashMap<i32, i64>,
    mode: WriteMode,
    /// Per transactional id, the generation of its newest writer: older ones are fenced.
    generations: HashMap<String, u64>,
    /// Transactions committed (engine writer and data paths).
    transactions: u64,
    /// Per read of the state topic, the partitions it asked for (`None`: all of them).
    reads: Vec<Option<Vec<i32>>>,
}

/// The state topic on the destination, with Kafka's transactional-id fencing.
#[derive(Debug)]
pub(crate) struct FakeState {
    inner: Mutex<StateInner>,
}

impl FakeState {
    fn new() -> Arc<FakeState> {
        Arc::new(FakeState {
            inner: Mutex::new(StateInner {
                partitions: None,
                records: Vec::new(),
                next_offset: HashMap::new(),
                mode: WriteMode::Accept,
                generations: HashMap::new(),
                reads: Vec::new(),
                transactions: 0,
            }),
        })
    }

    /// A new writer for `transactional_id`: every earlier one of that id is fenced.
    fn open(&self, transactional_id: &str) -> u64 {
        let mut s = lock(&self.inner);
        let g = s.generations.entry(transactional_id.to_string()).or_insert(0);
        *g += 1;
        *g
    }

    /// Fences every current writer (as if another instance had opened them all).
    pub(crate) fn fence_all(&self) {
        for g in lock(&self.inner).generations.values_mut() {
            *g += 1;
        }
    }

    pub(crate) fn set_mode(&self, mode: WriteMode) {
        lock(&self.inner).mode = mode;
    }

    /// Appends `records` as one committed transaction of a writer the engine does not know (a
    /// data path left behind by an earlier incarnation).
    pub(crate) fn append_foreign(&self, records: &[StateWrite]) {
        let id = "fake: a writer left behind";
        let generation = self.open(id);
        self.append(id, generation, records).expect("the fake state topic takes the records");
    }

    /// Every record written so far.
    pub(crate) fn records(&self) -> Vec<LogRecord> {
        lock(&self.inner).records.clone()
    }

    /// A read of the state topic: the records of the partitions in `only` (all when `None`).
    fn read(&self, only: Option<&[i32]>) -> Vec<LogRecord> {
        let mut s = lock(&self.inner);
        s.reads.push(only.map(<[i32]>::to_vec));
        s.records.iter().filter(|r| only.is_none_or(|only| only.contains(&r.partition))).cloned().collect()
    }

    /// The partitions each read of the state topic asked for, in order (`None`: all of them).
    pub(crate) fn reads(&self) -> Vec<Option<Vec<i32>>> {
        lock(&self.inner).reads.clone()
    }

    fn append(&self, transactional_id: &str, generation: u64, records: &[StateWrite]) -> Result<(), StateWriteError> {
        let mut s = lock(&self.inner);
        if s.generations.get(transactional_id).copied() != Some(generation) {
            return Err(StateWriteError::Fenced(format!(
                "fake: producer {transactional_id} was fenced by a newer instance"
            )));
        }
        match s.mode {
            WriteMode::Accept => {}
            WriteMode::AcceptThenUnavailable(n) if n > 0 => s.mode = WriteMode::AcceptThenUnavailable(n - 1),
            WriteMode::Unavailable | WriteMode::AcceptThenUnavailable(_) => {
                return Err(StateWriteError::Unavailable("fake: the state topic does not answer".into()));
            }
        }
        for w in records {
            let next = s.next_offset.entry(w.partition).or_insert(0);
            let offset = *next;
            *next += 1;
            s.records.push(LogRecord {
                partition: w.partition,
                offset,
                key: Some(w.key.clone()),
                value: w.value.clone(),
            });
        }
        s.transactions += 1;
        Ok(())
    }
}

/// One writer of the state topic (the engine's or a data path's).
#[derive(Debug)]
struct FakeWriter {
    state: Arc<FakeState>,
    transactional_id: String,
    generation: u64,
}

impl StateStore for FakeWriter {
    fn write(&self, records: &[StateWrite]) -> Result<(), StateWriteError> {
        if records.is_empty() {
            return Ok(());
        }
        self.state.append(&self.transactional_id, self.generation, records)
    }
}

// ----- data paths ----------------------------------------------------------------------------

/// What a test asks of the next commands of a data path.
#[derive(Debug, Default)]
struct PipeScript {
    /// The next unassigns fail (the data path does not confirm).
    fail_unassigns: u32,
}

#[derive(Debug, Clone, Copy)]
struct Held {
    next_source: i64,
    epoch: Option<i32>,
    /// Where the next mirrored record must land on the destination.
    destination_next: i64,
    destination_end: i64,
}

/// A running fake data path, shared between its thread and the test.
struct FakePipe {
    config: PipeConfig,
    events: mpsc::UnboundedSender<PipeEvent>,
    source: Arc<FakeCluster>,
    destination: Arc<FakeCluster>,
    writer: FakeWriter,
    encode: Mutex<EncodeProgress>,
    held: Mutex<BTreeMap<(String, i32), Held>>,
    script: Mutex<PipeScript>,
    /// Ended (shut down, fenced): the thread leaves.
    ended: std::sync::atomic::AtomicBool,
    /// `Committed` events held back (`FakePipes::delay_commit_events`), with when they were made.
    late: Mutex<Vec<(std::time::Instant, PipeEvent)>>,
}

impl std::fmt::Debug for FakePipe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakePipe").field("mirror", &self.config.mirror).finish_non_exhaustive()
    }
}

/// One command a data path received, for tests to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Received {
    Assign(Vec<AssignSpec>),
    Unassign { partitions: Vec<(String, i32)>, fence: bool, ok: bool },
    Fence,
    Shutdown,
}

#[derive(Debug, Default)]
struct PipesInner {
    /// The newest data path of each mirror's slot.
    running: HashMap<(String, i32), Arc<FakePipe>>,
    /// Every command each mirror's data paths received, in order.
    received: HashMap<String, Vec<Received>>,
    /// Data paths started per mirror.
    started: HashMap<String, u32>,
    /// The next data paths to start fail with this message (message, how many).
    fail_next_start: Option<(String, u32)>,
    /// How each unassign of each mirror's data paths ended the open transaction, in order.
    finishes: HashMap<String, Vec<(crate::data_path::Finish, bool)>>,
    /// Mirrors whose data paths hold their `Committed` events back this long (see
    /// `FakePipes::delay_commit_events`).
    commit_event_delay: HashMap<String, Duration>,
}

/// The data paths of every mirror.
#[derive(Debug, Default)]
pub(crate) struct FakePipes {
    inner: Mutex<PipesInner>,
}

impl FakePipes {
    /// The running data paths of `mirror` (one per slot holding its partitions).
    fn pipes_of(&self, mirror: &str) -> Vec<Arc<FakePipe>> {
        let pipes: Vec<Arc<FakePipe>> =
            lock(&self.inner).running.iter().filter(|((m, _), _)| m == mirror).map(|(_, p)| Arc::clone(p)).collect();
        assert!(!pipes.is_empty(), "the mirror has a fake data path");
        pipes
    }

    /// The running data path of `mirror` that holds `topic`/`partition`.
    fn pipe_holding(&self, mirror: &str, topic: &str, partition: i32) -> Arc<FakePipe> {
        self.pipes_of(mirror)
            .into_iter()
            .find(|p| lock(&p.held).contains_key(&(topic.to_string(), partition)))
            .expect("a data path holds the partition")
    }

    /// Slots of `mirror` with a running data path.
    pub(crate) fn slots(&self, mirror: &str) -> Vec<i32> {
        let mut slots: Vec<i32> =
            lock(&self.inner).running.keys().filter(|(m, _)| m == mirror).map(|(_, s)| *s).collect();
        slots.sort_unstable();
        slots
    }

    /// Commands `mirror`'s data paths received so far.
    pub(crate) fn received(&self, mirror: &str) -> Vec<Received> {
        lock(&self.inner).received.get(mirror).cloned().unwrap_or_default()
    }

    /// Every partition spec `mirror`'s data paths were assigned, in order.
    pub(crate) fn assigned(&self, mirror: &str) -> Vec<AssignSpec> {
        self.received(mirror)
            .into_iter()
            .flat_map(|r| match r {
                Received::Assign(specs) => specs,
                _ => Vec::new(),
            })
            .collect()
    }

    /// How each unassign of `mirror`'s data paths ended the open transaction, and whether it
    /// fenced, in order.
    pub(crate) fn finishes(&self, mirror: &str) -> Vec<(crate::data_path::Finish, bool)> {
        lock(&self.inner).finishes.get(mirror).cloned().unwrap_or_default()
    }

    /// Data paths started for `mirror` so far.
    pub(crate) fn started(&self, mirror: &str) -> u32 {
        lock(&self.inner).started.get(mirror).copied().unwrap_or(0)
    }

    /// Partitions the running data paths of `mirror` hold.
    pub(crate) fn held(&self, mirror: &str) -> Vec<(String, i32)> {
        let mut held: Vec<(String, i32)> =
            self.pipes_of(mirror).iter().flat_map(|p| lock(&p.held).keys().cloned().collect::<Vec<_>>()).collect();
        held.sort();
        held
    }

    /// `mirror`'s data paths, running and future, send each `Committed` event only once it is
    /// `delay` old, or right after they answer a command: the coordinator then hears of commits
    /// after later replies, as with a real data path whose events still queue behind the
    /// coordinator's current step (a reply comes on its own channel).
    pub(crate) fn delay_commit_events(&self, mirror: &str, delay: Duration) {
        lock(&self.inner).commit_event_delay.insert(mirror.to_string(), delay);
    }

    fn commit_event_delay(&self, mirror: &str) -> Option<Duration> {
        lock(&self.inner).commit_event_delay.get(mirror).copied()
    }

    /// The next `n` data paths started fail (`PipeEvent::Failed`).
    pub(crate) fn fail_next_starts(&self, message: &str, n: u32) {
        lock(&self.inner).fail_next_start = (n > 0).then(|| (message.to_string(), n));
    }

    /// The next `n` unassigns of each of `mirror`'s data paths are not confirmed.
    pub(crate) fn fail_unassigns(&self, mirror: &str, n: u32) {
        for p in self.pipes_of(mirror) {
            lock(&p.script).fail_unassigns = n;
        }
    }

    /// The data path gives up on a partition (`PipeEvent::PartitionFailed`).
    pub(crate) fn fail_partition(&self, mirror: &str, topic: &str, partition: i32, fault: PartitionFault) {
        let pipe = self.pipe_holding(mirror, topic, partition);
        lock(&pipe.held).remove(&(topic.to_string(), partition));
        let _ = pipe.events.send(PipeEvent::PartitionFailed { topic: topic.to_string(), partition, fault });
    }

    /// A transient failure the data path retries by itself (`PipeEvent::Retrying`).
    pub(crate) fn retrying(&self, mirror: &str, attempt: u32, message: &str) {
        for p in self.pipes_of(mirror) {
            let _ = p.events.send(PipeEvent::Retrying { attempt, message: message.to_string() });
        }
    }

    /// Every data path's producer of `mirror` is fenced (`PipeEvent::Fenced`): they end.
    pub(crate) fn fence(&self, mirror: &str) {
        for pipe in self.pipes_of(mirror) {
            // Under the partitions' lock: no transaction of this data path commits after it.
            let _held = lock(&pipe.held);
            pipe.ended.store(true, Ordering::SeqCst);
            let _ = pipe.events.send(PipeEvent::Fenced { message: "fake: producer fenced".into() });
        }
    }

    fn record(&self, mirror: &str, r: Received) {
        lock(&self.inner).received.entry(mirror.to_string()).or_default().push(r);
    }
}

impl FakePipe {
    /// Mirrors every held partition up to its source end, in one transaction.
    fn mirror(&self, pipes: &FakePipes) {
        let mut held = lock(&self.held);
        if self.ended.load(Ordering::SeqCst) {
            return;
        }
        let mut progress = Vec::new();
        let mut failed = Vec::new();
        for ((topic, partition), h) in held.iter_mut() {
            let Some(src) = self.source.partition(topic, *partition) else { continue };
            if lock(&self.source.inner).unreachable {
                continue;
            }
            if h.next_source < src.log_start {
                failed.push((
                    (topic.clone(), *partition),
                    PartitionFault::SourceTruncated {
                        message: format!("fake: position {} is below the log start {}", h.next_source, src.log_start),
                    },
                ));
                continue;
            }
            let n = src.end - h.next_source;
            if n <= 0 {
                continue;
            }
            let Some(dst) = self.destination.partition(topic, *partition) else { continue };
            if dst.end != h.destination_next {
                failed.push((
                    (topic.clone(), *partition),
                    PartitionFault::ForeignWrite { expected_offset: h.destination_next, found_offset: dst.end },
                ));
                continue;
            }
            progress.push(PartitionProgress {
                topic: topic.clone(),
                partition: *partition,
                next_source_offset: src.end,
                source_leader_epoch: Some(src.leader_epoch),
                destination_end_offset: dst.end + n,
                last_record_timestamp: None,
                records: n as u64,
                bytes: n as u64 * 10,
                runs: vec![Run::new(h.next_source, dst.end, n)],
            });
        }
        for (key, fault) in failed {
            held.remove(&key);
            let _ = self.events.send(PipeEvent::PartitionFailed { topic: key.0, partition: key.1, fault });
        }
        if progress.is_empty() {
            return;
        }
        let writes: Vec<StateWrite> = {
            let encode = lock(&self.encode);
            progress.iter().flat_map(&**encode).collect()
        };
        match self.writer.write(&writes) {
            Ok(()) => {}
            Err(StateWriteError::Fenced(message) | StateWriteError::Fatal(message)) => {
                self.ended.store(true, Ordering::SeqCst);
                let _ = self.events.send(PipeEvent::Fenced { message });
                return;
            }
            Err(StateWriteError::Unavailable(message)) => {
                let _ = self.events.send(PipeEvent::Retrying { attempt: 1, message });
                return;
            }
        }
        for p in &progress {
            self.destination.produce(&p.topic, p.partition, p.records as i64);
            let h = held.get_mut(&(p.topic.clone(), p.partition)).expect("held");
            h.next_source = p.next_source_offset;
            h.epoch = p.source_leader_epoch;
            h.destination_next = p.destination_end_offset;
            h.destination_end = p.destination_end_offset;
        }
        if pipes.commit_event_delay(&self.config.mirror).is_some() {
            lock(&self.late).push((std::time::Instant::now(), PipeEvent::Committed(progress)));
        } else {
            let _ = self.events.send(PipeEvent::Committed(progress));
        }
    }

    /// Sends the held-back `Committed` events at least `older_than` old (all of them with `None`),
    /// in the order they were made.
    fn send_late(&self, older_than: Option<Duration>) {
        let mut late = lock(&self.late);
        let due = late.iter().take_while(|(at, _)| older_than.is_none_or(|d| at.elapsed() >= d)).count();
        for (_, ev) in late.drain(..due) {
            let _ = self.events.send(ev);
        }
    }

    /// Carries out one command; true when the data path ends.
    fn command(&self, pipes: &FakePipes, cmd: PipeCommand) -> bool {
        let mirror = &self.config.mirror;
        match cmd {
            PipeCommand::Assign(specs) => {
                pipes.record(mirror, Received::Assign(specs.clone()));
                let mut held = lock(&self.held);
                for s in specs {
                    let start = self.source.partition(&s.topic, s.partition).map_or(0, |p| p.log_start);
                    held.entry((s.topic.clone(), s.partition)).or_insert(Held {
                        next_source: s.next_source_offset.unwrap_or(start),
                        epoch: s.source_leader_epoch,
                        destination_next: s.destination_next_offset,
                        destination_end: s.destination_end_offset,
                    });
                }
                false
            }
            PipeCommand::Unassign { partitions, finish, fence, reply, .. } => {
                lock(&pipes.inner).finishes.entry(mirror.clone()).or_default().push((finish, fence));
                let fail = {
                    let mut script = lock(&self.script);
                    let fail = script.fail_unassigns > 0;
                    script.fail_unassigns = script.fail_unassigns.saturating_sub(1);
                    fail
                };
                pipes.record(mirror, Received::Unassign { partitions: partitions.clone(), fence, ok: !fail });
                if fail {
                    let _ = reply.send(Err(PipeError::NoAnswer));
                    return false;
                }
                let mut held = lock(&self.held);
                let finals = partitions
                    .iter()
                    .filter_map(|key| {
                        let h = held.remove(key)?;
                        Some(FinalPosition {
                            topic: key.0.clone(),
                            partition: key.1,
                            next_source_offset: Some(h.next_source),
                            source_leader_epoch: h.epoch,
                            destination_end_offset: h.destination_end,
                        })
                    })
                    .collect();
                let _ = reply.send(Ok(finals));
                false
            }
            PipeCommand::Fence { reply } => {
                pipes.record(mirror, Received::Fence);
                let _ = reply.send(Ok(()));
                false
            }
            PipeCommand::Shutdown { reply } => {
                pipes.record(mirror, Received::Shutdown);
                // No longer running (unless a newer data path of the slot already replaced it).
                let mut inner = lock(&pipes.inner);
                let key = (self.config.mirror.clone(), self.config.slot);
                if inner.running.get(&key).is_some_and(|p| std::ptr::eq(Arc::as_ptr(p), self)) {
                    inner.running.remove(&key);
                }
                drop(inner);
                let _ = reply.send(Ok(()));
                true
            }
        }
    }
}

/// Answers a command of a data path that could not start or has ended.
fn refuse(cmd: PipeCommand, why: &str) {
    match cmd {
        PipeCommand::Assign(_) => {}
        PipeCommand::Unassign { reply, .. } => drop(reply.send(Err(PipeError::Stopped(why.to_string())))),
        PipeCommand::Fence { reply } | PipeCommand::Shutdown { reply } => {
            drop(reply.send(Err(PipeError::Stopped(why.to_string()))))
        }
    }
}

// ----- the world -----------------------------------------------------------------------------

/// The destination, the sources by bootstrap address, the state topic and the data paths.
#[derive(Debug)]
pub(crate) struct FakeWorld {
    pub destination: Arc<FakeCluster>,
    sources: Mutex<HashMap<String, Arc<FakeCluster>>>,
    pub state: Arc<FakeState>,
    pub pipes: Arc<FakePipes>,
    pub quarantine: FakeQuarantine,
    pub fences: FakeFences,
    /// Where the slot group's events go once the engine joined it (`Ports::join_group`): a
    /// test plays the group coordinator by sending assignments and revokes.
    group: Mutex<Option<mpsc::UnboundedSender<MembershipEvent>>>,
    /// The state records written when the engine joined the slot group (what any instance that
    /// saw this one own slots can have read).
    written_at_join: Mutex<Option<Vec<LogRecord>>>,
    /// Where the state tail's batches go once the engine follows it (`Ports::tail_state`): a
    /// test plays what the tail reads.
    tail: Mutex<Option<mpsc::UnboundedSender<crate::kafka::state_log::TailBatch>>>,
    /// How many times the engine asked the slot group to rebalance (`GroupMember::nudge`).
    nudges: Arc<std::sync::atomic::AtomicUsize>,
    /// Source addresses whose clients cannot be created, with the client library's reason.
    broken_source_clients: Mutex<HashMap<String, String>>,
}

/// `Ports::fence_writer` calls: how long each takes, and how many were in flight at once.
#[derive(Debug, Default)]
pub(crate) struct FakeFences {
    /// How long each fence takes (zero: it is done at once).
    pub delay: Mutex<Duration>,
    in_flight: std::sync::atomic::AtomicUsize,
    max_in_flight: std::sync::atomic::AtomicUsize,
    calls: std::sync::atomic::AtomicUsize,
}

impl FakeFences {
    /// The most fences that were in flight at the same time, and how many there were.
    pub(crate) fn max_in_flight_and_calls(&self) -> (usize, usize) {
        use std::sync::atomic::Ordering::SeqCst;
        (self.max_in_flight.load(SeqCst), self.calls.load(SeqCst))
    }
}

/// The quarantine copies (`Ports::quarantine`): what was copied where, and faults to inject.
#[derive(Debug, Default)]
pub(crate) struct FakeQuarantine {
    inner: Mutex<QuarantineInner>,
}

#[derive(Debug, Default)]
struct QuarantineInner {
    /// Per quarantine topic: the origins (topic ID, partition, offset) of its records.
    copied: BTreeMap<String, std::collections::BTreeSet<(String, i32, i64)>>,
    /// Quarantine topics holding records kmirror did not copy there.
    foreign: std::collections::BTreeSet<String>,
    /// The next copies that fail (after copying nothing).
    fail_next: u32,
}

impl FakeQuarantine {
    /// The origins `(topic ID, partition, offset)` of the records in quarantine topic `target`.
    pub(crate) fn copied(&self, target: &str) -> Vec<(String, i32, i64)> {
        lock(&self.inner).copied.get(target).map(|s| s.iter().cloned().collect()).unwrap_or_default()
    }
    /// Makes quarantine topic `target` hold foreign data.
    pub(crate) fn add_foreign(&self, target: &str) {
        lock(&self.inner).foreign.insert(target.to_string());
    }
    /// Makes the next `n` copies fail.
    pub(crate) fn fail_next(&self, n: u32) {
        lock(&self.inner).fail_next = n;
    }
}

impl FakeWorld {
    /// A world with a reachable destination (cluster ID `destination-cluster`) and no sources.
    pub(crate) fn new() -> Arc<FakeWorld> {
        Arc::new(FakeWorld {
            destination: FakeCluster::new("destination-cluster"),
            sources: Mutex::new(HashMap::new()),
            state: FakeState::new(),
            pipes: Arc::new(FakePipes::default()),
            quarantine: FakeQuarantine::default(),
            fences: FakeFences::default(),
            group: Mutex::new(None),
            written_at_join: Mutex::new(None),
            tail: Mutex::new(None),
            nudges: Arc::default(),
            broken_source_clients: Mutex::new(HashMap::new()),
        })
    }

    /// From now on a source client for `bootstrap` cannot be created, for `why` (a client
    /// property the library refuses, a certificate file that is gone).
    pub(crate) fn break_source_client(&self, bootstrap: &str, why: &str) {
        lock(&self.broken_source_clients).insert(bootstrap.to_string(), why.to_string());
    }

    /// A source client for `bootstrap` can be created again (the file was put back).
    pub(crate) fn mend_source_client(&self, bootstrap: &str) {
        lock(&self.broken_source_clients).remove(bootstrap);
    }

    /// How many times the engine asked the slot group to rebalance.
    pub(crate) fn nudges(&self) -> usize {
        self.nudges.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The state tail's batch sender, once the engine follows the state topic.
    pub(crate) fn tail_batches(&self) -> Option<mpsc::UnboundedSender<crate::kafka::state_log::TailBatch>> {
        lock(&self.tail).clone()
    }

    /// The slot group's event sender, once the engine joined (group ownership).
    pub(crate) fn group_events(&self) -> Option<mpsc::UnboundedSender<MembershipEvent>> {
        lock(&self.group).clone()
    }

    /// The state records written before the engine joined the slot group.
    pub(crate) fn written_at_join(&self) -> Option<Vec<LogRecord>> {
        lock(&self.written_at_join).clone()
    }

    /// Adds a source cluster reachable at `bootstrap`.
    pub(crate) fn add_source(&self, bootstrap: &str, cluster_id: &str) -> Arc<FakeCluster> {
        let c = FakeCluster::new(cluster_id);
        lock(&self.sources).insert(bootstrap.to_string(), Arc::clone(&c));
        c
    }

    /// Makes `cluster` answer at `bootstrap` too (another listener of the same cluster).
    pub(crate) fn alias(&self, bootstrap: &str, cluster: &Arc<FakeCluster>) {
        lock(&self.sources).insert(bootstrap.to_string(), Arc::clone(cluster));
    }

    /// The cluster at `bootstrap`; an address nobody answers at gets an unreachable one.
    fn source(&self, bootstrap: &str) -> Arc<FakeCluster> {
        let mut sources = lock(&self.sources);
        Arc::clone(sources.entry(bootstrap.to_string()).or_insert_with(|| {
            let c = FakeCluster::new("nobody");
            c.set_unreachable(true);
            c
        }))
    }

    fn destination_check(&self, operation: &'static str) -> KafkaResult<()> {
        if lock(&self.destination.inner).unreachable {
            return Err(KafkaError::Timeout { operation, resource: "fake destination".into(), after: Duration::ZERO });
        }
        Ok(())
    }
}

impl Ports for FakeWorld {
    fn destination(&self) -> Admin {
        Arc::clone(&self.destination) as Admin
    }

    fn connect_source(
        &self,
        bootstrap: &str,
        _properties: &BTreeMap<String, String>,
        _timeout: Duration,
    ) -> KafkaResult<Admin> {
        if let Some(why) = lock(&self.broken_source_clients).get(bootstrap) {
            return Err(KafkaError::Client(why.clone()));
        }
        Ok(self.source(bootstrap) as Admin)
    }

    fn ensure_state_topic<'a>(&'a self, _topic: &'a str, partitions: i32) -> BoxFuture<'a, KafkaResult<i32>> {
        let r = self
            .destination_check("CreateTopics")
            .map(|()| *lock(&self.state.inner).partitions.get_or_insert(partitions));
        Box::pin(std::future::ready(r))
    }

    fn read_state<'a>(
        &'a self,
        _config: &'a EngineConfig,
        only: Option<&'a [i32]>,
    ) -> BoxFuture<'a, KafkaResult<Vec<LogRecord>>> {
        let r = self.destination_check("read state").map(|()| self.state.read(only));
        Box::pin(std::future::ready(r))
    }

    fn open_state_writer<'a>(
        &'a self,
        config: &'a EngineConfig,
        role: WriterRole,
    ) -> BoxFuture<'a, KafkaResult<Arc<dyn StateStore>>> {
        let transactional_id = role.transactional_id(&config.instance_id);
        let r = self.destination_check("InitProducerId").map(|()| {
            let generation = self.state.open(&transactional_id);
            Arc::new(FakeWriter { state: Arc::clone(&self.state), transactional_id, generation }) as Arc<dyn StateStore>
        });
        Box::pin(std::future::ready(r))
    }

    fn read_remote_state<'a>(
        &'a self,
        _bootstrap: &'a str,
        _properties: &'a BTreeMap<String, String>,
        _topic: &'a str,
        _timeout: Duration,
    ) -> BoxFuture<'a, KafkaResult<Vec<LogRecord>>> {
        // The fake sources keep no state topic: no lineage (a failback runs on the rig).
        Box::pin(std::future::ready(Ok(Vec::new())))
    }

    fn scan_cluster<'a>(
        &'a self,
        _bootstrap: &'a str,
        _properties: &'a BTreeMap<String, String>,
        topic: &'a str,
        ranges: Vec<(i32, i64, i64)>,
        _timeout: Duration,
    ) -> BoxFuture<'a, KafkaResult<BTreeMap<i32, crate::kafka::scan::Scanned>>> {
        let _ = topic;
        // The fake counts the same way on every cluster.
        Box::pin(std::future::ready(Ok(every_offset_a_record(ranges))))
    }

    fn scan_destination<'a>(
        &'a self,
        _config: &'a EngineConfig,
        _topic: &'a str,
        ranges: Vec<(i32, i64, i64)>,
    ) -> BoxFuture<'a, KafkaResult<BTreeMap<i32, crate::kafka::scan::Scanned>>> {
        Box::pin(std::future::ready(Ok(every_offset_a_record(ranges))))
    }

    fn quarantine<'a>(
        &'a self,
        _config: &'a EngineConfig,
        job: crate::kafka::quarantine::QuarantineJob,
        dry_run: bool,
    ) -> BoxFuture<'a, Result<BTreeMap<i32, QuarantinedPartition>, QuarantineError>> {
        use crate::kafka::quarantine::QuarantineError as E;
        let r = (|| {
            self.destination_check("quarantine")?;
            let mut q = lock(&self.quarantine.inner);
            if q.foreign.contains(&job.target) {
                return Err(E::Foreign {
                    target: job.target.clone(),
                    topic: job.topic.clone(),
                    partition: 0,
                    offset: 0,
                    why: "it lacks the kmirror.diverged.* headers".into(),
                });
            }
            if !dry_run && q.fail_next > 0 {
                q.fail_next -= 1;
                return Err(E::Kafka(KafkaError::Timeout {
                    operation: "quarantine commit",
                    resource: job.target.clone(),
                    after: Duration::ZERO,
                }));
            }
            let mut out = BTreeMap::new();
            // Every fake offset is a record.
            for &(p, from, end) in &job.ranges {
                let mut done = QuarantinedPartition { partition: p, records: 0, already_quarantined: 0, offsets: None };
                if from < end {
                    done.offsets = Some((from, end - 1));
                }
                for offset in from..end {
                    let key = (job.topic_id.clone(), p, offset);
                    let copied = q.copied.entry(job.target.clone()).or_default();
                    if copied.contains(&key) {
                        done.already_quarantined += 1;
                        continue;
                    }
                    if !dry_run {
                        copied.insert(key);
                        let tp = crate::domain::quarantine::target_partition(p, job.target_partitions);
                        self.destination.produce(&job.target, tp, 1);
                    }
                    done.records += 1;
                }
                out.insert(p, done);
            }
            Ok(out)
        })();
        Box::pin(std::future::ready(r))
    }

    fn tail_state(
        &self,
        _config: &EngineConfig,
        _start: &[(i32, Option<i64>)],
        batches: mpsc::UnboundedSender<crate::kafka::state_log::TailBatch>,
    ) -> KafkaResult<Box<dyn super::ports::Background>> {
        // Reads nothing by itself: a test sends what it should have read (the real tail is
        // covered against Kafka by the integration tests).
        *lock(&self.tail) = Some(batches);
        Ok(Box::new(FakeTail))
    }

    fn join_group(
        &self,
        _config: &EngineConfig,
        events: mpsc::UnboundedSender<MembershipEvent>,
    ) -> KafkaResult<Box<dyn super::ports::GroupMember>> {
        *lock(&self.written_at_join) = Some(self.state.records());
        *lock(&self.group) = Some(events);
        Ok(Box::new(FakeMember { nudges: Arc::clone(&self.nudges) }))
    }

    fn fence_writer<'a>(
        &'a self,
        _config: &'a EngineConfig,
        transactional_id: &'a str,
    ) -> BoxFuture<'a, KafkaResult<()>> {
        use std::sync::atomic::Ordering::SeqCst;
        let r = self.destination_check("InitProducerId").map(|()| {
            self.state.open(transactional_id);
        });
        let delay = *lock(&self.fences.delay);
        let f = &self.fences;
        Box::pin(async move {
            f.calls.fetch_add(1, SeqCst);
            let now = f.in_flight.fetch_add(1, SeqCst) + 1;
            f.max_in_flight.fetch_max(now, SeqCst);
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            f.in_flight.fetch_sub(1, SeqCst);
            r
        })
    }

    fn spawn_data_path(
        &self,
        config: PipeConfig,
        encode: EncodeProgress,
        events: mpsc::UnboundedSender<PipeEvent>,
        _runtime: tokio::runtime::Handle,
    ) -> std::io::Result<SpawnedDataPath> {
        let (tx, rx) = std::sync::mpsc::channel::<PipeCommand>();
        let mirror = config.mirror.clone();
        let slot = config.slot;
        let fail = {
            let mut p = lock(&self.pipes.inner);
            *p.started.entry(mirror.clone()).or_default() += 1;
            match p.fail_next_start.take() {
                Some((message, n)) => {
                    if n > 1 {
                        p.fail_next_start = Some((message.clone(), n - 1));
                    }
                    Some(message)
                }
                None => None,
            }
        };
        if let Some(message) = fail {
            let join = std::thread::Builder::new().name(format!("fake-pipe-{mirror}")).spawn(move || {
                let _ = events.send(PipeEvent::Failed { message });
                for cmd in rx.iter() {
                    refuse(cmd, "the mirror's data path could not start");
                }
            })?;
            return Ok((tx, join));
        }
        let generation = self.state.open(&config.transactional_id);
        let pipe = Arc::new(FakePipe {
            writer: FakeWriter {
                state: Arc::clone(&self.state),
                transactional_id: config.transactional_id.clone(),
                generation,
            },
            source: self.source(&config.source_bootstrap),
            destination: Arc::clone(&self.destination),
            config,
            events,
            encode: Mutex::new(encode),
            held: Mutex::new(BTreeMap::new()),
            script: Mutex::new(PipeScript::default()),
            ended: std::sync::atomic::AtomicBool::new(false),
            late: Mutex::new(Vec::new()),
        });
        lock(&self.pipes.inner).running.insert((mirror.clone(), slot), Arc::clone(&pipe));
        let pipes = Arc::clone(&self.pipes);
        let join = std::thread::Builder::new().name(format!("fake-pipe-{mirror}")).spawn(move || {
            let _ = pipe.events.send(PipeEvent::Ready);
            loop {
                if pipe.ended.load(Ordering::SeqCst) {
                    // Like a fenced pipe: the thread ends and every later command goes unanswered
                    // (what it committed before is still reported).
                    pipe.send_late(None);
                    return;
                }
                match rx.recv_timeout(Duration::from_millis(2)) {
                    Ok(cmd) => {
                        let ended = pipe.command(&pipes, cmd);
                        // Held-back commit events go out behind the command's reply.
                        pipe.send_late(None);
                        if ended {
                            return;
                        }
                    }
                    Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                    Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return,
                }
                pipe.mirror(&pipes);
                // Looked up only with events held back: the delay's map is shared by every data path.
                if !lock(&pipe.late).is_empty() {
                    pipe.send_late(pipes.commit_event_delay(&pipe.config.mirror));
                }
            }
        })?;
        Ok((tx, join))
    }
}

/// The fake state tail: the test sends its batches (`FakeWorld::tail_batches`).
struct FakeTail;

impl super::ports::Background for FakeTail {
    fn close(self: Box<Self>) {}
}

/// The fake slot-group membership: the test sends its events (`FakeWorld::group_events`).
struct FakeMember {
    nudges: Arc<std::sync::atomic::AtomicUsize>,
}

impl super::ports::GroupMember for FakeMember {
    fn rebalances(&self) -> u64 {
        0
    }
    fn failure(&self) -> Option<String> {
        None
    }
    fn nudge(&self) -> bool {
        self.nudges.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        true
    }
    fn close(self: Box<Self>) {}
}

/// A fake scan: every offset of a range is a record (the fake writes no transaction markers).
fn every_offset_a_record(ranges: Vec<(i32, i64, i64)>) -> BTreeMap<i32, crate::kafka::scan::Scanned> {
    ranges
        .into_iter()
        .map(|(p, from, end)| {
            let n = (end - from).max(0);
            let s = crate::kafka::scan::Scanned {
                records: n,
                offsets: (n > 0).then_some((from, end - 1)),
                timestamps: None,
            };
            (p, s)
        })
        .collect()
}
