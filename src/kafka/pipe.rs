//! The data path of one mirror (DESIGN section 4): one `read_committed` source consumer with
//! manual assignment and one transactional destination producer, driven by a dedicated thread.
//!
//! Every transaction carries a batch of mirrored records for any number of partitions plus, for
//! each partition it touched, one state record (built by the engine's `encode` callback) holding
//! the new position and the exact offset-map runs of that batch. Data and positions therefore
//! become visible atomically: after a crash, the last committed state record says exactly where to
//! resume, with no loss and no duplicate.
//!
//! The thread is the only writer of its mirror's partitions. It is driven by [`PipeCommand`]s and
//! reports through [`PipeEvent`]s; it never decides a partition's state (that is the engine's
//! coordinator) but reports what it saw: commits, per-partition failures, fencing.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::thread::Thread;
use std::time::{Duration, Instant};

use rdkafka::client::ClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError as RdError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, PurgeConfig, ThreadedProducer};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use tokio::sync::{mpsc, oneshot};

use super::KafkaAdmin;
use super::client::{ClientKind, EofReaderContext, client_config, create, create_with_context, sets_property};
use super::consumer::{fetched_end, message_codec, message_leader_epoch, position_list};
use super::error::{KafkaError, KafkaErrorKind, KafkaResult};
use super::ffi::ProducerTopic;
use super::produce::{SERVE_STEP, send_with_backpressure, wait_delivered};
use super::types::{IsolationLevel, OffsetSpec, PartitionPosition};
use crate::domain::offset_map::{Run, RunBuilder};

/// Settings of one mirror's data path.
#[derive(Clone)]
pub struct PipeConfig {
    pub mirror: String,
    /// The slot (state-topic partition) whose partitions this data path mirrors: every state
    /// record it writes goes to that partition, and its transactional id is the slot's.
    pub slot: i32,
    pub source_bootstrap: String,
    pub source_properties: BTreeMap<String, String>,
    pub destination_bootstrap: String,
    pub destination_properties: BTreeMap<String, String>,
    /// The transactional id; a second writer with the same id fences this one.
    pub transactional_id: String,
    /// Under a backlog, a transaction ends when it is this old...
    pub commit_interval: Duration,
    /// ...while one that keeps up with the source ends early, at most once per this.
    pub early_commit_interval: Duration,
    /// ...or as soon as a transaction holds this many payload bytes.
    pub commit_max_bytes: usize,
    /// Internal topic the `encode` callback's state records go to.
    pub state_topic: String,
    /// Timeout for transactional calls (init, commit, abort, flush).
    pub transaction_timeout: Duration,
    /// How much the source consumer may fetch ahead, in KiB (`queued.max.messages.kbytes`): a
    /// share of the mirror's budget, see [`prefetch_kbytes`].
    pub prefetch_kbytes: usize,
    /// The mirror's replication throttle on this instance, shared by its slot data paths.
    pub throttle: std::sync::Arc<crate::domain::throttle::Throttle>,
}

impl std::fmt::Debug for PipeConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Client properties may hold secrets.
        f.debug_struct("PipeConfig")
            .field("mirror", &self.mirror)
            .field("slot", &self.slot)
            .field("source_bootstrap", &self.source_bootstrap)
            .field("destination_bootstrap", &self.destination_bootstrap)
            .field("transactional_id", &self.transactional_id)
            .finish_non_exhaustive()
    }
}

/// Where a partition starts (or resumes) mirroring.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssignSpec {
    pub topic: String,
    pub partition: i32,
    /// Next source offset to mirror; `None` = the source's log start.
    pub next_source_offset: Option<i64>,
    /// Leader epoch of the last mirrored record, so the client validates the position (KIP-320).
    pub source_leader_epoch: Option<i32>,
    /// The destination's end offset now: the first record kmirror writes must land exactly here,
    /// otherwise somebody else wrote to the partition.
    pub destination_next_offset: i64,
    /// The destination end offset of the last committed mirrored record (carried into progress).
    pub destination_end_offset: i64,
}

/// A partition's committed position after a transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionProgress {
    pub topic: String,
    pub partition: i32,
    /// Next source offset to mirror.
    pub next_source_offset: i64,
    /// Source leader epoch of the last mirrored record (the LME candidate).
    pub source_leader_epoch: Option<i32>,
    /// Destination offset after the last mirrored record.
    pub destination_end_offset: i64,
    /// Timestamp of the last mirrored record.
    pub last_record_timestamp: Option<i64>,
    /// Records and payload bytes (key + value) in this transaction.
    pub records: u64,
    pub bytes: u64,
    /// The offset-map runs of this transaction.
    pub runs: Vec<Run>,
}

/// Where the source consumer is for a partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchPosition {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
}

/// A record for the state topic, produced in the same transaction as the data.
#[derive(Debug, Clone)]
pub struct StateWrite {
    pub partition: i32,
    pub key: Vec<u8>,
    pub value: Option<Vec<u8>>,
}

/// Builds the state records that commit a partition's progress.
pub type EncodeProgress = Box<dyn Fn(&PartitionProgress) -> Vec<StateWrite> + Send>;

/// Why the pipe gave up on a partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PartitionFault {
    /// The source log no longer holds our position: truncated below it (unclean election), or
    /// deleted by retention before it was mirrored.
    SourceTruncated { message: String },
    /// A record in the destination partition that kmirror did not write.
    ForeignWrite { expected_offset: i64, found_offset: i64 },
    /// The source topic or partition is gone.
    SourceMissing { message: String },
    /// The destination refused our records for a non-retryable reason.
    DestinationRejected { message: String },
}

/// What the pipe reports to the engine.
#[derive(Debug)]
pub enum PipeEvent {
    /// The producer is initialised: any earlier writer with the same transactional id is fenced
    /// and its open transaction aborted.
    Ready,
    /// A transaction committed: new positions per touched partition.
    Committed(Vec<PartitionProgress>),
    /// Fetch positions that moved past the committed position over records there was nothing to
    /// mirror from (control records, aborted data). Informational: resuming from the committed
    /// position skips them again.
    FetchPositions(Vec<FetchPosition>),
    /// The partition was removed from the pipe because of `fault`; its position is the last
    /// committed one (nothing of the failed transaction is visible).
    PartitionFailed { topic: String, partition: i32, fault: PartitionFault },
    /// A transient failure: the open transaction was aborted and the partitions rewound to their
    /// committed positions; the pipe retries after a backoff.
    Retrying { attempt: u32, message: String },
    /// The producer hit a fatal error, usually because another writer with the same
    /// transactional id took over. The pipe stopped for good; nothing uncommitted is visible.
    Fenced { message: String },
    /// The pipe could not start or hit a fatal error and stopped.
    Failed { message: String },
}

/// How to end the open transaction when partitions leave the pipe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finish {
    /// Commit what has been consumed so far (pause).
    Commit,
    /// Abort it: the uncommitted tail is discarded, as the seed's truncation to the LSO (stop).
    Abort,
}

/// The final committed position of a partition leaving the pipe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FinalPosition {
    pub topic: String,
    pub partition: i32,
    pub next_source_offset: Option<i64>,
    pub source_leader_epoch: Option<i32>,
    pub destination_end_offset: i64,
}

pub type Reply<T> = oneshot::Sender<Result<T, PipeError>>;

/// Why the data path could not carry out a command.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PipeError {
    /// The data path's thread is gone (it could not start, or it ended).
    #[error("the data path stopped: {0}")]
    Stopped(String),
    /// The data path did not answer within the engine's deadline.
    #[error("the data path did not answer in time")]
    NoAnswer,
    /// Another kmirror instance took this writer over; this data path is done for good.
    #[error("fenced by another kmirror instance: {0}")]
    Fenced(String),
    /// Re-initialising the transactional producer (the fence of a stop) failed: the destination
    /// did not answer.
    #[error("fence: {0}")]
    Fence(String),
    /// A commit whose outcome is unknown could not be resolved yet (the destination does not
    /// answer), so final positions cannot be given.
    #[error("commit in doubt: {0}")]
    InDoubt(String),
}

/// Why a data path could not start (reported as [`PipeEvent::Failed`]).
#[derive(Debug, Clone, thiserror::Error)]
enum StartError {
    #[error("cannot create source consumer: {0}")]
    SourceConsumer(KafkaError),
    #[error("cannot create destination producer: {0}")]
    Producer(KafkaError),
    #[error("cannot initialise transactions on the destination: {0}")]
    InitTransactions(RdError),
    /// The admin client of one of the clusters (shared with the mirror's other data paths).
    #[error("{0}")]
    Admin(KafkaError),
}

/// Why a new transactional producer could not replace the current one (a stop's fence, or
/// the recovery after a timed-out transactional request).
#[derive(Debug, Clone, thiserror::Error)]
enum ReplaceError {
    #[error("cannot re-create producer: {0}")]
    Create(KafkaError),
    #[error("re-init transactions: {0}")]
    Init(RdError),
}

/// Why the source consumer did not take partitions.
#[derive(Debug, Clone, thiserror::Error)]
enum AssignError {
    /// The positions do not make a partition list (a topic name with a NUL byte).
    #[error("{0}")]
    Positions(KafkaError),
    #[error("{0}")]
    Consumer(RdError),
}

/// Why the outcome of a commit in doubt could not be learned (yet).
#[derive(Debug, Clone, thiserror::Error)]
enum OutcomeError {
    #[error("cannot create the outcome reader: {0}")]
    Reader(KafkaError),
    #[error("{0}")]
    Position(RdError),
    #[error("cannot read the destination: {0}")]
    Assign(RdError),
    #[error("cannot learn the outcome of the commit in doubt (reading {topic}-{partition} at {offset})")]
    NoAnswer { topic: String, partition: i32, offset: i64 },
}

/// Commands the engine sends to a pipe.
#[derive(Debug)]
pub enum PipeCommand {
    /// Start mirroring these partitions from the given positions.
    Assign(Vec<AssignSpec>),
    /// End the open transaction as `finish` says, then stop mirroring these partitions and return
    /// their final committed positions. With `fence`, the producer is also re-initialised (as
    /// [`PipeCommand::Fence`]) before the reply, in the same step: a stop needs both, and doing
    /// them apart lets a new transaction start (and be aborted again) in between.
    Unassign {
        partitions: Vec<(String, i32)>,
        finish: Finish,
        fence: bool,
        /// When the command was sent: a release that waited long for the thread is logged with
        /// what the thread did meanwhile.
        sent: Instant,
        reply: Reply<Vec<FinalPosition>>,
    },
    /// Re-initialise the transactional producer: bumps the producer epoch so no earlier
    /// incarnation of this writer can append anything (the seed's PID reset barrier).
    Fence { reply: Reply<()> },
    /// Abort the open transaction and stop the thread.
    Shutdown { reply: Reply<()> },
}

/// Per-partition bookkeeping inside the pipe.
#[derive(Debug, Clone)]
struct Part {
    /// Last committed position.
    committed_next_source: Option<i64>,
    committed_epoch: Option<i32>,
    committed_destination_end: i64,
    /// Where the next record we write must land (None = unknown, re-read from the broker).
    expected_next_destination: Option<i64>,
    /// `expected_next_destination` assumes a commit marker after our last batch (true after our
    /// own commit; false when it was read from the broker).
    after_commit: bool,
    /// `expected_next_destination` was read right after an abort. The coordinator writes the
    /// abort marker after EndTxn has returned, so the read may have come before the marker:
    /// the next record then lands one offset later. Both are ours; anything else is foreign.
    after_abort: bool,
    /// Records of the open transaction: (source offset, leader epoch, timestamp, bytes, slot).
    pending: Vec<Pending>,
    /// The current producer's codec for this partition's topic is settled (see
    /// [`Destination::settle_codec`]): checked once per partition and producer, not per record.
    codec_settled: bool,
}

#[derive(Debug, Clone, Copy)]
struct Pending {
    source_offset: i64,
    epoch: Option<i32>,
    timestamp: Option<i64>,
    bytes: u64,
    slot: usize,
}

/// A record's delivery: its destination offset, or why it failed.
type Delivered = Option<Result<i64, RdError>>;

/// Delivery results by slot, filled by the producer's delivery callback.
#[derive(Default)]
struct DeliveryLog {
    results: Mutex<Vec<Delivered>>,
    /// Key and value bytes of the open transaction's data records whose report has arrived
    /// (acknowledged or failed): with the bytes sent, what is still on its way.
    reported_bytes: AtomicUsize,
    /// A record of the open transaction failed because a request timed out (see
    /// [`needs_new_producer`]): the producer is replaced before the next transaction.
    timed_out: AtomicBool,
    /// `reported_bytes` at which the delivery callback unparks `waiter`; 0 = nobody waits.
    wake_at: AtomicUsize,
    /// The thread parked in [`DeliveryLog::wait_reported`] (set by every wait, so the wake-up
    /// never goes to a thread that waited before: locked once per wait and per wake-up, never
    /// per record).
    waiter: Mutex<Option<Thread>>,
}

impl DeliveryLog {
    /// Called by the delivery callback after a data record's report: wakes the data path when
    /// the bytes it waits for have been reported.
    fn reported(&self, bytes: usize) {
        // SeqCst here and in `wait_reported`: either this sees the waiter's `wake_at` or the
        // waiter sees these bytes (no lost wake-up between its check and its park).
        let reported = self.reported_bytes.fetch_add(bytes, Ordering::SeqCst) + bytes;
        let at = self.wake_at.load(Ordering::SeqCst);
        if at != 0
            && reported >= at
            && self.wake_at.compare_exchange(at, 0, Ordering::SeqCst, Ordering::Relaxed).is_ok()
            && let Some(waiter) = &*self.waiter.lock().unwrap_or_else(|p| p.into_inner())
        {
            waiter.unpark();
        }
    }

    /// Parks the calling thread (the data path's) until `target` bytes of the open
    /// transaction have been reported or `max` has passed; returns at once, with `false`, if
    /// they already have. A spurious early return is harmless: every caller re-checks what it
    /// waits for.
    ///
    /// The data path used to poll in 1 ms sleeps while the destination acknowledged its records:
    /// sixteen slot data paths switched out 36,000-92,000 times per GiB drained (none-64), where
    /// the benchmark's plain consumer and producer switch ~11,000 times together and an
    /// acknowledgement arrives once per produce request (up to 1 MB of records). Parked: ~4,500.
    fn wait_reported(&self, target: usize, max: Duration) -> bool {
        if self.reported_bytes.load(Ordering::SeqCst) >= target {
            return false;
        }
        *self.waiter.lock().unwrap_or_else(|p| p.into_inner()) = Some(std::thread::current());
        self.wake_at.store(target, Ordering::SeqCst);
        if self.reported_bytes.load(Ordering::SeqCst) < target {
            std::thread::park_timeout(max);
        }
        self.wake_at.store(0, Ordering::SeqCst);
        true
    }
}

/// Key and value bytes of a record: what a transaction counts as sent when the pipe hands a
/// record to the producer and as reported when its delivery report arrives, so the two counts
/// (see `Pipe::unacked_bytes`) are always of the same thing.
fn record_bytes(message: &impl Message) -> usize {
    message.key().map_or(0, <[u8]>::len) + message.payload().map_or(0, <[u8]>::len)
}

struct PipeProducerContext {
    log: DeliveryLog,
}

impl ClientContext for PipeProducerContext {}

impl ProducerContext for PipeProducerContext {
    type DeliveryOpaque = usize;

    fn delivery(&self, result: &DeliveryResult<'_>, slot: usize) {
        // State records carry usize::MAX and are not logged. The log grows here, so the send
        // path takes no lock per record.
        if slot == usize::MAX {
            return;
        }
        let (value, message) = match result {
            Ok(m) => (Ok(m.offset()), m),
            Err((e, m)) => {
                if needs_new_producer(e.rdkafka_error_code()) {
                    self.log.timed_out.store(true, Ordering::Relaxed);
                }
                (Err(e.clone()), m)
            }
        };
        self.log.reported(record_bytes(message));
        let mut results = self.log.results.lock().unwrap_or_else(|p| p.into_inner());
        if results.len() <= slot {
            results.resize(slot + 1, None);
        }
        results[slot] = Some(value);
    }
}

type Key = (String, i32);

/// Starts the pipe thread. Returns the command sender; events arrive on `events`.
pub fn spawn(
    config: PipeConfig,
    encode: EncodeProgress,
    events: mpsc::UnboundedSender<PipeEvent>,
    runtime: tokio::runtime::Handle,
) -> std::io::Result<(std::sync::mpsc::Sender<PipeCommand>, std::thread::JoinHandle<()>)> {
    let (tx, rx) = std::sync::mpsc::channel();
    let name = format!("pipe-{}-{}", config.mirror, config.slot);
    let handle = std::thread::Builder::new().name(name).spawn(move || {
        let events2 = events.clone();
        match Pipe::new(config, encode, events, runtime) {
            Ok(mut pipe) => {
                pipe.emit(PipeEvent::Ready);
                pipe.run(rx)
            }
            Err(e) => {
                let _ = events2.send(PipeEvent::Failed { message: e.to_string() });
                // Answer pending commands so no caller waits forever.
                for cmd in rx.iter() {
                    reject(cmd, "the mirror's data path could not start");
                }
            }
        }
    })?;
    Ok((tx, handle))
}

fn reject(cmd: PipeCommand, why: &str) {
    match cmd {
        PipeCommand::Assign(_) => {}
        PipeCommand::Unassign { reply, .. } => drop(reply.send(Err(PipeError::Stopped(why.to_string())))),
        PipeCommand::Fence { reply } | PipeCommand::Shutdown { reply } => {
            drop(reply.send(Err(PipeError::Stopped(why.to_string()))))
        }
    }
}

/// The data path's transactional producer, with the topic handles it created to give each
/// topic the codec of the source's batches. The handles are declared before the producer so
/// they are dropped before the client they belong to (Rust drops fields in declaration order).
struct Destination {
    /// Give each topic the codec of the source's batches: the user's destination properties
    /// choose no codec (then `compression.type` applies to every topic).
    follow_source: bool,
    /// Per destination topic: the handle created with its codec, or `None` when the producer's
    /// default applies (the user chose a codec, or the source's was unknown).
    topics: HashMap<String, Option<ProducerTopic>>,
    producer: ThreadedProducer<PipeProducerContext>,
}

impl std::ops::Deref for Destination {
    type Target = ThreadedProducer<PipeProducerContext>;
    fn deref(&self) -> &Self::Target {
        &self.producer
    }
}

impl Destination {
    fn new(producer: ThreadedProducer<PipeProducerContext>, config: &PipeConfig) -> Destination {
        let follow_source = !sets_property(&config.destination_properties, "compression.type");
        Destination { follow_source, topics: HashMap::new(), producer }
    }

    /// Settles `topic`'s codec before this producer sends its first record of it: the codec of
    /// the source batch `source_codec` came from, when kmirror chooses (`follow_source`). A
    /// Kafka mirror keeps the source's batches as they are (KIP-1279's fetcher appends them,
    /// Cluster Linking copies them); librdkafka hands kmirror records, not batches, so the
    /// nearest it can do is compress like the source did. One fixed codec cost either way: lz4
    /// for every topic spent ~30 % of kmirror's CPU recompressing sources that were not
    /// compressed (none-64 bench, perf), and writing uncompressed doubled what the destination
    /// stored and handled for compressed sources (lz4-64: destination CPU per GiB 2.3x B's).
    /// The codec seen first stays for the producer's life (librdkafka fixes a topic's
    /// configuration when the client creates it); a new producer looks again.
    fn settle_codec(&mut self, topic: &str, source_codec: Option<i32>, mirror: &str, slot: i32) {
        if self.topics.contains_key(topic) {
            return;
        }
        let handle = match source_codec.and_then(codec_name).filter(|_| self.follow_source) {
            None => None,
            Some(codec) => match ProducerTopic::with_codec(self.producer.client(), topic, codec) {
                Ok(handle) => {
                    tracing::debug!(mirror, slot, topic, codec, "destination batches compressed like the source's");
                    Some(handle)
                }
                Err(e) => {
                    // The producer's default codec then applies: the copy stays correct.
                    tracing::warn!(mirror, slot, topic, codec, "cannot set the topic's codec: {e}");
                    None
                }
            },
        };
        self.topics.insert(topic.to_string(), handle);
    }
}

/// librdkafka's `compression.codec` name for a batch codec number (`message_codec`).
fn codec_name(codec: i32) -> Option<&'static str> {
    match codec {
        0 => Some("none"),
        1 => Some("gzip"),
        2 => Some("snappy"),
        3 => Some("lz4"),
        4 => Some("zstd"),
        _ => None,
    }
}

struct Pipe {
    config: PipeConfig,
    consumer: BaseConsumer,
    /// Threaded: its own thread serves delivery reports as they arrive. Serving them from this
    /// thread would mean `BaseProducer::poll`, which busy-waited through the last millisecond of
    /// every timeout (rdkafka 0.39 rounded the remaining time down to 0 ms; the vendored rdkafka
    /// rounds up since): 37% of kmirror's CPU under load, measured with perf.
    producer: Destination,
    destination_admin: KafkaAdmin,
    source_admin: KafkaAdmin,
    runtime: tokio::runtime::Handle,
    encode: EncodeProgress,
    events: mpsc::UnboundedSender<PipeEvent>,
    parts: HashMap<Key, Part>,
    in_txn: bool,
    txn_bytes: usize,
    txn_started: Instant,
    next_slot: usize,
    retry_attempt: u32,
    fenced: bool,
    last_position_report: Instant,
    /// When the open transaction last compared read positions with fetched ends.
    last_end_check: Instant,
    /// When the previous transaction stopped taking records (its flush and commit began).
    /// Early ends are spaced from this, not from the open transaction's start (see `may_end_early`).
    last_fill_end: Instant,
    /// Whether the destination writes transaction markers (learned; real Kafka always does).
    markers: Option<bool>,
    /// The fetch position last reported per partition.
    reported_positions: HashMap<Key, i64>,
    /// Set when a transactional request of the producer timed out: the producer is replaced
    /// (and the transaction's outcome learned) before anything else is mirrored.
    broken: Option<Broken>,
    /// The thread's recent long steps, to explain a command that waited (see `log_wait`).
    steps: std::collections::VecDeque<Step>,
    /// When `fill` last looked for a command, and the command it found (handled next, before
    /// anything else).
    last_command_check: Instant,
    held: Option<PipeCommand>,
}

/// One step of the data path's thread that held commands up (see `Pipe::note_step`).
struct Step {
    name: &'static str,
    ended: Instant,
    took: Duration,
}

/// A producer that must be replaced before the next transaction (see [`needs_new_producer`]).
struct Broken {
    /// What timed out, for the log and the `Retrying` events.
    why: String,
    /// The progress of a transaction whose commit was sent but not confirmed: it may have
    /// committed. Empty when the transaction cannot have committed (a produce or an abort timed
    /// out, or the commit was never sent).
    in_doubt: Vec<PartitionProgress>,
    /// The replacement producer is initialised (only the outcome check is left).
    replaced: bool,
}

enum TxnOutcome {
    Committed,
    /// Aborted and rewound after learning something about the destination; retry at once.
    Again,
    /// Aborted and rewound (transient); retry later.
    Retry(String),
    Fenced(String),
}

/// Where the records of a transaction landed on the destination, against the prediction.
enum Landing {
    AsPredicted,
    /// One offset earlier everywhere, right after our own commit: no commit markers.
    NoMarkers,
    /// (partition, expected offset, found offset) of each partition somebody else wrote to.
    Foreign(Vec<(Key, i64, i64)>),
    /// A partition's next destination offset is unknown (its first delivery failed).
    Unknown,
}

impl Pipe {
    fn new(
        config: PipeConfig,
        encode: EncodeProgress,
        events: mpsc::UnboundedSender<PipeEvent>,
        runtime: tokio::runtime::Handle,
    ) -> Result<Pipe, StartError> {
        let consumer: BaseConsumer = consumer_config(&config)
            .and_then(|cfg| create(&cfg, "source consumer"))
            .map_err(StartError::SourceConsumer)?;

        let producer: ThreadedProducer<PipeProducerContext> = producer_config(&config)
            .and_then(|cfg| create_with_context(&cfg, PipeProducerContext { log: DeliveryLog::default() }, "producer"))
            .map_err(StartError::Producer)?;
        // Fences any earlier writer with the same transactional id (and aborts its open
        // transaction) before this one writes anything.
        producer.init_transactions(config.transaction_timeout).map_err(StartError::InitTransactions)?;
        // Shared with the mirror's other slot data paths (and other mirrors on the same clusters):
        // they are used for a few offset look-ups, not worth a client per data path.
        let destination_admin =
            KafkaAdmin::shared(&config.destination_bootstrap, &config.destination_properties, Duration::from_secs(15))
                .map_err(StartError::Admin)?;
        let source_admin =
            KafkaAdmin::shared(&config.source_bootstrap, &config.source_properties, Duration::from_secs(15))
                .map_err(StartError::Admin)?;
        Ok(Pipe {
            producer: Destination::new(producer, &config),
            config,
            consumer,
            destination_admin,
            source_admin,
            runtime,
            encode,
            events,
            parts: HashMap::new(),
            in_txn: false,
            txn_bytes: 0,
            txn_started: Instant::now(),
            next_slot: 0,
            retry_attempt: 0,
            fenced: false,
            last_position_report: Instant::now(),
            last_end_check: Instant::now(),
            last_fill_end: Instant::now(),
            markers: None,
            reported_positions: HashMap::new(),
            broken: None,
            steps: std::collections::VecDeque::new(),
            last_command_check: Instant::now(),
            held: None,
        })
    }

    fn emit(&self, e: PipeEvent) {
        let _ = self.events.send(e);
    }

    fn run(&mut self, rx: Receiver<PipeCommand>) {
        let mut retry_at: Option<Instant> = None;
        loop {
            // Commands first: they may change what is assigned.
            let wait = if self.parts.is_empty() { Duration::from_millis(200) } else { Duration::ZERO };
            let next = match self.held.take() {
                Some(cmd) => Ok(cmd),
                None => rx.recv_timeout(wait),
            };
            match next {
                Ok(cmd) => {
                    // Everything already queued is handled together (see `coalesce`): a start of
                    // many topics queues one assignment per topic, and a stop sent right after
                    // it must not wait for each of them in turn.
                    let mut queued = vec![cmd];
                    queued.extend(rx.try_iter());
                    for cmd in coalesce(queued) {
                        if self.handle(cmd) {
                            return;
                        }
                    }
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => {
                    self.abort_quietly();
                    return;
                }
                Err(RecvTimeoutError::Timeout) => {}
            }
            if self.fenced {
                // Stay alive only to answer commands with a clear refusal.
                continue;
            }
            if self.parts.is_empty() && self.broken.is_none() {
                // Idle after a failed transaction whose partitions were then released (one
                // failed by a foreign write, a pause): nothing retries any more, so the mirror's
                // data-path status must not keep saying "retrying".
                if self.retry_attempt > 0 {
                    self.retry_attempt = 0;
                    retry_at = None;
                    self.emit(PipeEvent::Ready);
                }
                continue;
            }
            if let Some(at) = retry_at {
                if Instant::now() < at {
                    std::thread::sleep(Duration::from_millis(20).min(at - Instant::now()));
                    continue;
                }
                retry_at = None;
            }
            if self.broken.is_some() {
                // The destination may still be unreachable: try again after a backoff, answering
                // commands in between.
                if let Err(e) = self.recover() {
                    let PipeError::InDoubt(message) = e else {
                        continue; // fenced: reported as Fenced
                    };
                    self.retry_attempt += 1;
                    self.emit(PipeEvent::Retrying { attempt: self.retry_attempt, message });
                    retry_at = Some(Instant::now() + backoff(self.retry_attempt));
                    continue;
                }
                if self.parts.is_empty() {
                    continue;
                }
            }
            let step = Instant::now();
            let end_now = self.fill(&rx);
            self.note_step("fill", step);
            if self.in_txn && (end_now || self.should_commit()) {
                let step = Instant::now();
                let outcome = self.commit();
                self.note_step("commit", step);
                match outcome {
                    TxnOutcome::Committed => self.retry_attempt = 0,
                    TxnOutcome::Again => {}
                    TxnOutcome::Retry(_) if self.fenced => {} // already reported as fatal
                    TxnOutcome::Retry(message) => {
                        self.retry_attempt += 1;
                        let backoff = backoff(self.retry_attempt);
                        self.emit(PipeEvent::Retrying { attempt: self.retry_attempt, message });
                        retry_at = Some(Instant::now() + backoff);
                    }
                    TxnOutcome::Fenced(message) => self.on_fenced(message),
                }
            }
            if !self.in_txn && self.last_position_report.elapsed() >= Duration::from_millis(500) {
                let step = Instant::now();
                self.report_positions();
                self.note_step("position report", step);
            }
        }
    }

    /// Commands wait while the thread fills, commits or handles earlier commands: steps that
    /// held them up are kept for a while, so a command that waited long (a slow failover) is
    /// logged with what the thread was doing meanwhile (`log_wait`).
    fn note_step(&mut self, name: &'static str, started: Instant) {
        let took = started.elapsed();
        if took < NOTE_STEP {
            return;
        }
        if self.steps.len() == STEPS_KEPT {
            self.steps.pop_front();
        }
        self.steps.push_back(Step { name, ended: Instant::now(), took });
    }

    /// Logs at info a command that waited at least `SLOW_TO_LOG` for the thread, with the steps
    /// that ended meanwhile (per kind: how many, how long in all).
    fn log_wait(&self, command: &str, sent: Instant, started: Instant) {
        let waited = started.saturating_duration_since(sent);
        if waited < SLOW_TO_LOG {
            return;
        }
        let mut kinds: BTreeMap<&str, (u32, Duration)> = BTreeMap::new();
        for s in self.steps.iter().filter(|s| s.ended >= sent) {
            let k = kinds.entry(s.name).or_default();
            k.0 += 1;
            k.1 += s.took;
        }
        let meanwhile: Vec<String> =
            kinds.iter().map(|(name, (n, took))| format!("{name} x{n} {} ms", took.as_millis())).collect();
        tracing::info!(
            mirror = %self.config.mirror,
            slot = self.config.slot,
            waited_ms = waited.as_millis() as u64,
            "{command} waited for the data path's thread; meanwhile: {}",
            if meanwhile.is_empty() { "no step over 20 ms".to_string() } else { meanwhile.join(", ") }
        );
    }

    /// Reports fetch positions that moved past the committed position without records to mirror
    /// (transaction markers, aborted or compacted-away records at the end of the log), so lag
    /// reaches zero on transactional sources. Only between transactions, when nothing is pending.
    fn report_positions(&mut self) {
        self.last_position_report = Instant::now();
        let Ok(positions) = self.consumer.position() else { return };
        let mut moved = Vec::new();
        for el in positions.elements() {
            let Offset::Offset(offset) = el.offset() else { continue };
            let key = (el.topic().to_string(), el.partition());
            let Some(part) = self.parts.get(&key) else { continue };
            if !part.pending.is_empty() || part.committed_next_source.is_some_and(|c| offset <= c) {
                continue;
            }
            if self.reported_positions.get(&key) != Some(&offset) {
                self.reported_positions.insert(key.clone(), offset);
                moved.push(FetchPosition { topic: key.0, partition: key.1, offset });
            }
        }
        if !moved.is_empty() {
            self.emit(PipeEvent::FetchPositions(moved));
        }
    }

    fn on_fenced(&mut self, message: String) {
        if self.fenced {
            return;
        }
        self.fenced = true;
        self.parts.clear();
        let _ = self.consumer.unassign();
        self.emit(PipeEvent::Fenced { message });
    }

    /// Returns true when the thread must exit.
    fn handle(&mut self, cmd: PipeCommand) -> bool {
        match cmd {
            PipeCommand::Assign(specs) => {
                if self.fenced {
                    return false;
                }
                let step = Instant::now();
                self.assign(specs);
                self.note_step("assign", step);
                false
            }
            PipeCommand::Unassign { partitions, finish, fence, sent, reply } => {
                let started = Instant::now();
                self.log_wait("release", sent, started);
                // Final positions must not predate a commit whose outcome is still unknown.
                if let Err(e) = self.recover() {
                    let _ = reply.send(Err(e));
                    return false;
                }
                let mut r = self.unassign(&partitions, finish);
                let unassigned = started.elapsed();
                if fence && r.is_ok() {
                    r = self.fence_checked().and(r);
                }
                // Slow releases (a failover of many partitions) are logged with their two parts;
                // the coordinator logs the same release as it saw it (`unassign_many`), so the
                // difference is the time the command waited for this thread.
                let total = started.elapsed();
                if total >= SLOW_TO_LOG {
                    tracing::info!(
                        mirror = %self.config.mirror,
                        slot = self.config.slot,
                        partitions = partitions.len(),
                        unassign_ms = unassigned.as_millis() as u64,
                        fence_ms = (total - unassigned).as_millis() as u64,
                        "partitions unassigned (slow)"
                    );
                } else {
                    tracing::debug!(
                        mirror = %self.config.mirror,
                        partitions = partitions.len(),
                        unassign_ms = unassigned.as_secs_f64() * 1e3,
                        fence_ms = (total - unassigned).as_secs_f64() * 1e3,
                        "partitions unassigned"
                    );
                }
                let _ = reply.send(r);
                false
            }
            PipeCommand::Fence { reply } => {
                let r = self.recover().and_then(|()| self.fence_checked());
                let _ = reply.send(r);
                false
            }
            PipeCommand::Shutdown { reply } => {
                self.abort_quietly();
                let _ = self.consumer.unassign();
                let _ = reply.send(Ok(()));
                true
            }
        }
    }

    fn assign(&mut self, specs: Vec<AssignSpec>) {
        let mut positions = Vec::with_capacity(specs.len());
        for s in specs {
            let key = (s.topic.clone(), s.partition);
            if self.parts.contains_key(&key) {
                continue; // already mirroring: assigning twice is harmless
            }
            positions.push(PartitionPosition {
                topic: s.topic.clone(),
                partition: s.partition,
                offset: s.next_source_offset.unwrap_or(-2),
                leader_epoch: s.source_leader_epoch,
            });
            self.parts.insert(
                key,
                Part {
                    committed_next_source: s.next_source_offset,
                    committed_epoch: s.source_leader_epoch,
                    committed_destination_end: s.destination_end_offset,
                    expected_next_destination: Some(s.destination_next_offset),
                    after_commit: false,
                    after_abort: false,
                    pending: Vec::new(),
                    codec_settled: false,
                },
            );
        }
        tracing::debug!(
            mirror = %self.config.mirror,
            slot = self.config.slot,
            new = positions.len(),
            topic = positions.first().map(|p| p.topic.as_str()),
            "assign"
        );
        if positions.is_empty() {
            return;
        }
        // Refresh both clients' metadata for these topics first: partitions added since the
        // clients last looked would otherwise stay unknown until the periodic refresh (minutes),
        // and producing to them would fail. One request per client: rdkafka asks for one topic or
        // for all, and a takeover or a coalesced start spans many topics (one request per topic
        // took ~0.1-0.2 s each on a loaded box: seconds for a slot of 100 topics).
        let topics: std::collections::BTreeSet<&str> = positions.iter().map(|p| p.topic.as_str()).collect();
        let which = if topics.len() == 1 { topics.first().copied() } else { None };
        let timeout = Duration::from_secs(10);
        if let Err(e) = self.consumer.fetch_metadata(which, timeout) {
            tracing::debug!(mirror = %self.config.mirror, topic = ?which, error = %e, "source metadata refresh");
        }
        // The producer only for topics it already writes: asking for one topic by name creates
        // the client's handle on it with the default configuration, and a topic's codec must be
        // settled before that (`Destination::settle_codec`). A topic the producer has not written
        // yet needs no refresh: its first record creates the handle and fetches its metadata.
        let known: Vec<&str> = topics.iter().copied().filter(|t| self.producer.topics.contains_key(*t)).collect();
        if !known.is_empty() {
            let which = if known.len() == 1 { known.first().copied() } else { None };
            if let Err(e) = self.producer.client().fetch_metadata(which, timeout) {
                tracing::debug!(mirror = %self.config.mirror, topic = ?which, error = %e, "destination metadata refresh");
            }
        }
        if let Err(e) = self.incremental_assign(&positions) {
            for p in positions {
                self.parts.remove(&(p.topic.clone(), p.partition));
                self.emit(PipeEvent::PartitionFailed {
                    topic: p.topic,
                    partition: p.partition,
                    fault: PartitionFault::SourceMissing { message: format!("cannot assign: {e}") },
                });
            }
        }
    }

    fn incremental_assign(&self, positions: &[PartitionPosition]) -> Result<(), AssignError> {
        let mut tpl = position_list(positions).map_err(AssignError::Positions)?;
        // `-2` (log start) is expressed with Offset::Beginning by position_list.
        for p in positions.iter().filter(|p| p.offset < 0) {
            tpl.set_partition_offset(&p.topic, p.partition, Offset::Beginning).map_err(AssignError::Consumer)?;
        }
        self.consumer.incremental_assign(&tpl).map_err(AssignError::Consumer)
    }

    fn incremental_unassign(&self, keys: &[Key]) {
        let mut tpl = TopicPartitionList::with_capacity(keys.len());
        for (t, p) in keys {
            tpl.add_partition(t, *p);
        }
        if let Err(e) = self.consumer.incremental_unassign(&tpl) {
            tracing::warn!(mirror = %self.config.mirror, error = %e, "incremental unassign failed");
        }
    }

    /// Bytes of the open transaction's data records sent but not yet reported delivered.
    fn unacked_bytes(&self) -> usize {
        self.txn_bytes.saturating_sub(self.producer.context().log.reported_bytes.load(Ordering::Relaxed))
    }

    fn unacked_limit(&self) -> usize {
        unacked_limit(self.parts.len(), self.config.commit_max_bytes)
    }

    fn should_commit(&self) -> bool {
        self.txn_started.elapsed() >= self.config.commit_interval || self.txn_bytes >= self.config.commit_max_bytes
    }

    /// Whether the open transaction may end before the commit interval because the mirror keeps
    /// up: once the previous transaction stopped taking records at least `early_commit_interval` ago.
    /// Spacing the ends (not the transactions' ages) keeps the bound of at most one transaction
    /// per `early_commit_interval` (and so the offset map's growth), while the time the previous
    /// transaction spent flushing and committing counts towards it: with the age rule every
    /// record also waited out the previous flush and commit on top of a full 50 ms (none-8:
    /// transactions ~50 ms filling + ~11 ms flushing + ~2 ms committing; none-64: + ~18 ms).
    ///
    /// The open transaction is at least half that old, though: when flushes slow down (a busy
    /// destination) transactions must not shrink to one per flush, which would only add
    /// per-transaction work (a produce request per partition, AddPartitionsToTxn, EndTxn and
    /// markers) where there is least room for it.
    fn may_end_early(&self, now: Instant) -> bool {
        early_end_allowed(
            now.saturating_duration_since(self.last_fill_end),
            now.saturating_duration_since(self.txn_started),
            self.config.early_commit_interval,
        )
    }

    /// Whether every partition with records in the open transaction is within one transaction's
    /// worth of the end its last fetch reported (see `near_fetched_end`).
    fn near_fetched_ends(&self) -> bool {
        self.parts.iter().all(|((topic, partition), part)| match part.pending.last() {
            None => true,
            Some(last) => {
                near_fetched_end(last.source_offset, part.pending.len(), fetched_end(&self.consumer, topic, *partition))
            }
        })
    }

    /// Consumes and forwards records until it is time to commit. True when it stopped because
    /// the consumer had nothing more for a moment (caught up), because the transaction refuses
    /// more records, or because a command waits (`held`): either way, end the transaction now.
    // rdkafka's `send` hands a refused record back by value (a large `Err`).
    #[allow(clippy::result_large_err)]
    fn fill(&mut self, commands: &Receiver<PipeCommand>) -> bool {
        let deadline = if self.in_txn {
            self.txn_started + self.config.commit_interval
        } else {
            Instant::now() + self.config.commit_interval
        };
        loop {
            let now = Instant::now();
            if now >= deadline || (self.in_txn && self.txn_bytes >= self.config.commit_max_bytes) {
                return false;
            }
            // A command does not wait for the transaction to fill up (a second under a backlog):
            // the transaction commits now and the command runs next, just as it did after a
            // full transaction. Committing (not handing the open transaction to the command,
            // which for a stop or a takeover would abort it) keeps what was read: a failover
            // loses no more than before, only sooner.
            if now.saturating_duration_since(self.last_command_check) >= COMMAND_CHECK_EVERY {
                self.last_command_check = now;
                match commands.try_recv() {
                    Ok(cmd) => {
                        self.held = Some(cmd);
                        return true;
                    }
                    Err(std::sync::mpsc::TryRecvError::Disconnected) => return false,
                    Err(std::sync::mpsc::TryRecvError::Empty) => {}
                }
            }
            // Under a backlog the consumer hands over records far faster than the destination
            // acknowledges them. Without a bound a transaction took everything it could get (up
            // to `commit_max_bytes`) and then waited for all of it, and every record in it
            // became visible only at the end of that wait: a 64 MiB transaction flushed at
            // 100 MiB/s (2 cores under load) kept its first records invisible for ~1 s. Past
            // `MAX_UNACKED_BYTES` the backlog waits in the consumer instead, the transaction
            // still ends on time, and its flush is short. The producer keeps its in-flight
            // window full either way, so throughput does not change.
            if self.in_txn && self.unacked_bytes() > self.unacked_limit() {
                let enough = self.txn_bytes - self.unacked_limit();
                self.producer.context().log.wait_reported(enough, (deadline - now).min(MAX_PARK));
                continue;
            }
            // The mirror's replication throttle is in debt: end the open transaction (a throttled
            // mirror holds no transaction open while it waits, so the wait never approaches the
            // transaction timeout and what was copied becomes visible), then wait in short steps
            // that keep answering commands. The consumer's prefetch fills up meanwhile and its
            // fetches stop, so the source's traffic follows the same rate.
            let pause = self.config.throttle.delay(now);
            if !pause.is_zero() {
                if self.in_txn {
                    return true;
                }
                let step = pause.min(MAX_PARK).min(deadline - now);
                std::thread::sleep(step);
                self.config.throttle.waited_for(step);
                continue;
            }
            // A transaction that may end early (see `may_end_early`) ends once every partition it
            // holds records of is within one transaction's worth of where the broker's last fetch
            // response said it ended: the mirror keeps up with the source. Under a steady load the
            // consumer is never empty for long (so the idle test below never fires), and a
            // transaction that waited for the interval kept its first records invisible for all
            // of it (none-8 at 64k records/s: p50 192 ms with the 250 ms interval, 98-115 ms
            // with 100 ms). Under a backlog the fetched end is far ahead and transactions still
            // grow to the interval, so throughput keeps its large transactions.
            // Cheapest test first, all against the loop's `now`: this runs once per record.
            if self.in_txn
                && now.saturating_duration_since(self.last_end_check) >= END_CHECK_EVERY
                && self.may_end_early(now)
            {
                self.last_end_check = now;
                if self.near_fetched_ends() {
                    return true;
                }
            }
            // Inside a transaction, a consumer with nothing more to give for a moment means the
            // mirror has caught up: commit now instead of waiting out the interval, so a lightly
            // loaded mirror shows records within milliseconds. Under a backlog the consumer's
            // prefetch queue is never empty and transactions grow to the interval or byte cap.
            let idle = if self.in_txn { CAUGHT_UP_WAIT } else { Duration::from_millis(50) };
            let wait = (deadline - now).min(idle);
            match self.consumer.poll(wait) {
                // Caught up, but the previous transaction ended too recently: keep this one open a
                // little longer. Every transaction adds one offset-map run per partition it touched
                // (the commit marker takes an offset), in memory and in the state topic, so the
                // rate of transactions is bounded (at most 1 / `early_commit_interval`).
                None if self.in_txn && !self.may_end_early(Instant::now()) => {}
                None => {
                    return true; // caught up (commit what is open) or idle (back to the commands)
                }
                Some(Ok(msg)) => {
                    let key = (msg.topic().to_string(), msg.partition());
                    let Some(part) = self.parts.get_mut(&key) else {
                        continue; // a prefetched record of a partition that just left
                    };
                    if !part.codec_settled {
                        part.codec_settled = true;
                        self.producer.settle_codec(
                            msg.topic(),
                            message_codec(&msg),
                            &self.config.mirror,
                            self.config.slot,
                        );
                    }
                    if !self.in_txn {
                        if let Err(e) = self.producer.begin_transaction() {
                            // The record just polled must not be skipped: rewind to committed.
                            if matches!(&e, RdError::Transaction(te) if te.is_fatal()) {
                                self.on_fenced(format!("begin transaction: {e}"));
                                return false;
                            }
                            self.emit(PipeEvent::Retrying { attempt: 0, message: format!("begin transaction: {e}") });
                            self.rewind_all();
                            return false;
                        }
                        self.in_txn = true;
                        self.txn_started = Instant::now();
                        self.txn_bytes = 0;
                        self.next_slot = 0;
                        self.producer.context().log.results.lock().unwrap_or_else(|p| p.into_inner()).clear();
                        self.producer.context().log.reported_bytes.store(0, Ordering::Relaxed);
                        self.producer.context().log.timed_out.store(false, Ordering::Relaxed);
                    }
                    let slot = self.next_slot;
                    self.next_slot += 1;
                    let bytes = record_bytes(&msg) as u64;
                    let timestamp = msg.timestamp().to_millis();
                    let epoch = message_leader_epoch(&msg);
                    let source_offset = msg.offset();
                    let mut send_error = None;
                    let mut txn_refuses = false;
                    let mut record: BaseRecord<'_, [u8], [u8], usize> =
                        BaseRecord::with_opaque_to(msg.topic(), slot).partition(msg.partition());
                    if let Some(k) = msg.key() {
                        record = record.key(k);
                    }
                    if let Some(v) = msg.payload() {
                        record = record.payload(v);
                    }
                    if let Some(ts) = timestamp {
                        record = record.timestamp(ts);
                    }
                    if let Some(h) = msg.headers() {
                        record = record.headers(h.detach());
                    }
                    let producer = &self.producer;
                    match send_with_backpressure(|r| producer.send(r), || std::thread::sleep(SERVE_STEP), record) {
                        Ok(()) => {}
                        // The transaction took an abortable error (a record of it was refused)
                        // and takes no more records: not this record's fault.
                        Err(e) if e.rdkafka_error_code() == Some(RDKafkaErrorCode::State) => txn_refuses = true,
                        Err(e) => {
                            send_error = Some(format!("cannot send record at source offset {source_offset}: {e}"))
                        }
                    }
                    drop(msg);
                    if txn_refuses {
                        // End the transaction now: the commit finds the refused record's failed
                        // delivery, aborts and rewinds every partition, so this record is
                        // consumed again.
                        self.next_slot -= 1;
                        return true;
                    }
                    if let Some(message) = send_error {
                        // Unsendable record (too large for the producer, etc.): the partition
                        // cannot progress without an operator. Its slot was never sent: free it,
                        // so the commit does not wait for a report that cannot come.
                        self.next_slot -= 1;
                        let (topic, partition) = key;
                        self.fail_partition(&topic, partition, PartitionFault::DestinationRejected { message });
                        continue;
                    }
                    if let Some(part) = self.parts.get_mut(&key) {
                        part.pending.push(Pending { source_offset, epoch, timestamp, bytes, slot });
                    }
                    self.txn_bytes += bytes as usize;
                    // The loop's `now` (read before the poll) is fine for the bucket: an earlier
                    // instant only refills less. Without a rate this is one atomic load.
                    self.config.throttle.take(bytes, now);
                }
                Some(Err(e)) => self.on_consumer_error(e),
            }
        }
    }

    fn on_consumer_error(&mut self, e: RdError) {
        // rdkafka 0.39 drops the partition of a consumer error, so a truncation-class error is
        // attributed by comparing every committed position with the source log's bounds.
        let code = e.rdkafka_error_code();
        let text = e.to_string();
        let truncation = matches!(
            code,
            Some(RDKafkaErrorCode::OffsetOutOfRange)
                | Some(RDKafkaErrorCode::AutoOffsetReset)
                | Some(RDKafkaErrorCode::UnknownTopicOrPartition)
                | Some(RDKafkaErrorCode::UnknownTopic)
        );
        if let Some(what) = super::admin::refusal_kind(code, &text) {
            // The source refused the credentials or the TLS handshake: librdkafka keeps
            // reconnecting, and the data path says why it is not mirroring rather than
            // looking idle (or unreachable).
            let message = format!(
                "the source refused the connection: {what} ({}); retrying",
                super::client::scrub_secrets(&text)
            );
            tracing::warn!(mirror = %self.config.mirror, "{message}");
            self.emit(PipeEvent::Retrying { attempt: 0, message });
            return;
        }
        if !truncation {
            tracing::debug!(mirror = %self.config.mirror, error = %text, "transient source consumer error");
            return;
        }
        let keys: Vec<Key> = self.parts.keys().cloned().collect();
        let mut requests = Vec::with_capacity(keys.len() * 2);
        for (t, p) in &keys {
            requests.push((t.clone(), *p, OffsetSpec::Earliest));
        }
        let earliest = self.runtime.block_on(self.source_admin.list_offsets(&requests, IsolationLevel::ReadCommitted));
        for r in requests.iter_mut() {
            r.2 = OffsetSpec::Latest;
        }
        let latest = self.runtime.block_on(self.source_admin.list_offsets(&requests, IsolationLevel::ReadUncommitted));
        let (earliest, latest) = match (earliest, latest) {
            (Ok(e), Ok(l)) => (e, l),
            (Err(e), _) | (_, Err(e)) => {
                tracing::warn!(mirror = %self.config.mirror, error = %text, check = %e, "source consumer error; cannot check positions");
                return;
            }
        };
        for (i, key) in keys.iter().enumerate() {
            let Some(part) = self.parts.get(key) else { continue };
            let Some(next) = part.committed_next_source else { continue };
            let (start, end) = (earliest[i].offset, latest[i].offset);
            if next < start || next > end {
                let message = format!(
                    "source partition {}-{} now holds offsets [{start}, {end}) but the next offset to mirror is {next} ({text})",
                    key.0, key.1
                );
                self.fail_partition(&key.0, key.1, PartitionFault::SourceTruncated { message });
            }
        }
    }

    /// Drops a partition from the pipe after a fault. Its uncommitted records stay in the open
    /// transaction only if it is committed; to keep "nothing of a failed partition is visible
    /// past its committed position" we abort and rewind everyone.
    fn fail_partition(&mut self, topic: &str, partition: i32, fault: PartitionFault) {
        let key = (topic.to_string(), partition);
        if self.in_txn && self.parts.get(&key).is_some_and(|p| !p.pending.is_empty()) {
            self.abort_and_rewind();
        }
        if self.parts.remove(&key).is_some() {
            self.incremental_unassign(std::slice::from_ref(&key));
            self.emit(PipeEvent::PartitionFailed { topic: topic.to_string(), partition, fault });
        }
    }

    /// Writes positions, checks and commits the open transaction.
    ///
    /// The state records go out right behind the data, before the data's delivery reports are
    /// in: kmirror is the only writer of its destination partitions, so where each record lands
    /// is known in advance (the next offset after our last batch and its commit marker). One
    /// flush then waits for data and state together, and the delivery reports check the
    /// prediction record by record before anything commits. A record that landed anywhere else
    /// means somebody else wrote to the partition: the transaction is aborted, the partition
    /// fails with a foreign write, and the state records of the aborted transaction are never
    /// read. Waiting for the data first and writing the state after cost one more round trip per
    /// transaction: on 2 loaded cores the step after the data's flush went from ~29 to ~8 ms of
    /// a ~180 ms cycle (end-to-end latency did not move beyond the run-to-run noise, though).
    // rdkafka's `send` hands a refused record back by value (a large `Err`).
    #[allow(clippy::result_large_err)]
    fn commit(&mut self) -> TxnOutcome {
        let started = Instant::now();
        self.last_fill_end = started;
        // A partition whose next destination offset is unknown (the broker did not answer after
        // an abort), or was read right after an abort, learns it from its first delivery before
        // anything is predicted.
        if self
            .parts
            .values()
            .any(|p| !p.pending.is_empty() && (p.expected_next_destination.is_none() || p.after_abort))
        {
            if let Err(e) = self.flush_sent() {
                return self.after_txn_error("flush", e, Vec::new());
            }
            let results = self.producer.context().log.results.lock().unwrap_or_else(|p| p.into_inner());
            for (key, part) in self.parts.iter_mut().filter(|(_, p)| !p.pending.is_empty()) {
                let Some(Some(Ok(first))) = part.pending.first().and_then(|p| results.get(p.slot)) else { continue };
                match (part.expected_next_destination, part.after_abort) {
                    (None, _) => part.expected_next_destination = Some(*first),
                    (Some(read), true) => {
                        if *first == read + 1 {
                            tracing::debug!(
                                mirror = %self.config.mirror, topic = %key.0, partition = key.1, read,
                                "the abort marker landed after the destination end was read"
                            );
                        }
                        // Otherwise the prediction stays and the landing check reports a foreign write.
                        if landed_after_abort(read, *first) {
                            part.expected_next_destination = Some(*first);
                        }
                    }
                    (Some(_), false) => continue,
                }
                part.after_commit = false;
                part.after_abort = false;
            }
        }
        let progress = match self.predicted_progress() {
            Ok(p) => p,
            Err(e) => {
                self.abort_and_rewind();
                return TxnOutcome::Retry(format!("offset map run rejected: {e}"));
            }
        };
        // A state record the producer refuses (the transaction took an abortable error: one of
        // its data records was refused) ends the sending, not the checks: where the data landed
        // is still judged below, then the transaction aborts.
        let mut state_refused = None;
        'state: for p in &progress {
            for w in (self.encode)(p) {
                let mut rec: BaseRecord<'_, [u8], [u8], usize> =
                    BaseRecord::with_opaque_to(&self.config.state_topic, usize::MAX)
                        .partition(w.partition)
                        .key(&w.key[..]);
                if let Some(v) = &w.value {
                    rec = rec.payload(&v[..]);
                }
                let producer = &self.producer;
                if let Err(e) = send_with_backpressure(|r| producer.send(r), || std::thread::sleep(SERVE_STEP), rec) {
                    state_refused = Some(format!("cannot write state record: {e}"));
                    break 'state;
                }
            }
        }
        // Data and state records together; the flush inside rdkafka's commit_transaction then
        // finds nothing to wait for.
        if let Err(e) = self.flush_sent() {
            return self.after_txn_error("flush", e, Vec::new());
        }
        let flushed = started.elapsed();
        let results: Vec<Delivered> =
            std::mem::take(&mut *self.producer.context().log.results.lock().unwrap_or_else(|p| p.into_inner()));
        // Where the records landed first: a partition whose records all landed somewhere else
        // than predicted has a foreign writer, whatever else went wrong in this transaction.
        let landing = self.check_landing(&results);
        if let Landing::Foreign(foreign) = &landing {
            // Never commit records next to somebody else's: abort, then fail those partitions.
            self.abort_and_rewind();
            for ((topic, partition), expected, found) in foreign {
                self.fail_partition(
                    topic,
                    *partition,
                    PartitionFault::ForeignWrite { expected_offset: *expected, found_offset: *found },
                );
            }
            return TxnOutcome::Retry("foreign write detected; transaction aborted".into());
        }
        // Delivery failures: the transaction cannot commit.
        if let Some(Some(Err(message))) = results.iter().find(|r| matches!(r, Some(Err(_)))) {
            let message = format!("delivery failed: {message}");
            if self.producer.context().log.timed_out.load(Ordering::Relaxed) {
                // A produce request timed out: it may still reach the broker (see
                // `needs_new_producer`). Nothing was committed, so nothing is in doubt.
                self.break_producer(message.clone(), Vec::new());
            } else {
                self.abort_and_rewind();
            }
            return TxnOutcome::Retry(message);
        }
        // After a successful flush every record has its report; one missing would leave a hole
        // in the offset map, so never commit then.
        if results.len() < self.next_slot || results[..self.next_slot].iter().any(Option::is_none) {
            self.abort_and_rewind();
            return TxnOutcome::Retry("a delivery report is missing after flush".into());
        }
        if let Some(message) = state_refused {
            self.abort_and_rewind();
            return TxnOutcome::Retry(message);
        }
        match landing {
            Landing::AsPredicted | Landing::Foreign(_) => {} // foreign: handled above
            Landing::NoMarkers => {
                // librdkafka's mock cluster writes no commit markers: learned once, then
                // predicted without them. The transaction's state records assumed a marker, so
                // it is aborted and its records mirrored again.
                self.markers = Some(false);
                self.abort_and_rewind();
                return TxnOutcome::Again;
            }
            Landing::Unknown => {
                self.abort_and_rewind();
                return TxnOutcome::Retry("the destination offset of a partition is unknown".into());
            }
        }
        // `scripts/chaos` freezes the destination broker on this line, to time out a commit
        // that the broker may still carry out (a commit in doubt, see `recover`).
        tracing::trace!(mirror = %self.config.mirror, records = self.next_slot, "sending EndTxn (commit)");
        match self.producer.commit_transaction(self.config.transaction_timeout) {
            Ok(()) => {}
            // The commit was sent: if it timed out, it may still have committed.
            Err(e) => return self.after_txn_error("commit", e, progress),
        }
        self.in_txn = false;
        // Where a transaction's time goes: filling (consume + send), flushing data and state, and
        // committing. `RUST_LOG=kmirror::kafka::pipe=trace` when tuning.
        tracing::trace!(
            mirror = %self.config.mirror,
            records = self.next_slot,
            bytes = self.txn_bytes,
            fill_ms = (started - self.txn_started).as_secs_f64() * 1e3,
            flush_ms = flushed.as_secs_f64() * 1e3,
            commit_ms = (started.elapsed() - flushed).as_secs_f64() * 1e3,
            "transaction committed"
        );
        // Our commit marker takes the offset right after our last record (none on a cluster
        // that writes no markers).
        let marker = i64::from(self.markers != Some(false));
        for p in &progress {
            if let Some(part) = self.parts.get_mut(&(p.topic.clone(), p.partition)) {
                part.committed_next_source = Some(p.next_source_offset);
                part.committed_epoch = p.source_leader_epoch;
                part.committed_destination_end = p.destination_end_offset;
                part.expected_next_destination = Some(p.destination_end_offset + marker);
                part.after_commit = true;
            }
        }
        for part in self.parts.values_mut() {
            part.pending.clear();
        }
        if !progress.is_empty() {
            self.emit(PipeEvent::Committed(progress));
        }
        TxnOutcome::Committed
    }

    /// The progress of every partition with records in the open transaction, with destination
    /// offsets as predicted: consecutive from the partition's expected next offset.
    fn predicted_progress(&self) -> Result<Vec<PartitionProgress>, crate::domain::offset_map::OffsetMapError> {
        let mut progress = Vec::new();
        for (key, part) in &self.parts {
            let Some(last) = part.pending.last() else { continue };
            // Unknown only when the partition's first delivery failed: that aborts the
            // transaction before anything commits (see `check_landing`).
            let Some(start) = part.expected_next_destination else { continue };
            let mut builder = RunBuilder::new();
            for (i, p) in part.pending.iter().enumerate() {
                // Source offsets out of order would be a consumer bug; never commit a wrong map.
                builder.push(p.source_offset, start + i as i64)?;
            }
            progress.push(PartitionProgress {
                topic: key.0.clone(),
                partition: key.1,
                next_source_offset: last.source_offset + 1,
                source_leader_epoch: last.epoch.or(part.committed_epoch),
                destination_end_offset: start + part.pending.len() as i64,
                last_record_timestamp: last.timestamp,
                records: part.pending.len() as u64,
                bytes: part.pending.iter().map(|p| p.bytes).sum(),
                runs: builder.finish(),
            });
        }
        Ok(progress)
    }

    /// Compares where every record of the open transaction landed with where it was predicted
    /// to land. Learns whether the destination writes commit markers (real Kafka always does).
    fn check_landing(&mut self, results: &[Delivered]) -> Landing {
        let mut foreign = Vec::new();
        let mut no_markers = false;
        let mut unknown = false;
        for (key, part) in &self.parts {
            if part.pending.is_empty() {
                continue;
            }
            let landed = |i: usize| match results.get(part.pending[i].slot) {
                Some(Some(Ok(d))) => Some(*d),
                _ => None,
            };
            // Judge the records that landed, up to the first one refused or unreported (the
            // transaction then aborts anyway, and librdkafka fails the rest of it): a
            // foreign writer shows there as well, and the partition fails at once.
            let landed_count = (0..part.pending.len()).take_while(|&i| landed(i).is_some()).count();
            if landed_count == 0 {
                continue;
            }
            let Some(expected) = part.expected_next_destination else {
                unknown = true;
                continue;
            };
            let mismatch = (0..landed_count).find(|&i| landed(i) != Some(expected + i as i64));
            let Some(i) = mismatch else {
                if part.after_commit && self.markers.is_none() {
                    self.markers = Some(true);
                }
                continue;
            };
            // Right after our own commit, a cluster that writes no markers (librdkafka's mock)
            // lands everything one earlier than predicted.
            if part.after_commit
                && self.markers.is_none()
                && landed_count == part.pending.len()
                && (0..part.pending.len()).all(|i| landed(i) == Some(expected - 1 + i as i64))
            {
                no_markers = true;
                continue;
            }
            foreign.push((key.clone(), expected + i as i64, landed(i).unwrap_or(-1)));
        }
        if !foreign.is_empty() {
            Landing::Foreign(foreign)
        } else if unknown {
            Landing::Unknown
        } else if no_markers {
            Landing::NoMarkers
        } else {
            Landing::AsPredicted
        }
    }

    /// Handles a failed flush, commit or other transactional call. `in_doubt` is the progress of a
    /// transaction whose commit was sent (empty otherwise).
    fn after_txn_error(&mut self, what: &str, e: RdError, in_doubt: Vec<PartitionProgress>) -> TxnOutcome {
        let message = format!("{what}: {e}");
        let fatal = matches!(&e, RdError::Transaction(te) if te.is_fatal());
        match txn_error_action(fatal, e.rdkafka_error_code()) {
            // A fatal producer error ends this pipe. It usually means another writer with the
            // same transactional id took over; re-initialising here would fence that writer back
            // and the two would take turns duplicating data. The engine decides: it restarts the
            // pipe only when its own state writer proves it is still the owner.
            TxnErrorAction::Fenced => TxnOutcome::Fenced(message),
            TxnErrorAction::NewProducer => {
                self.break_producer(message.clone(), in_doubt);
                TxnOutcome::Retry(message)
            }
            TxnErrorAction::AbortAndRetry => {
                self.abort_and_rewind();
                TxnOutcome::Retry(message)
            }
        }
    }

    /// Gives up on the producer after a transactional request of it timed out (see
    /// [`needs_new_producer`]): no abort, no further transaction on it. `recover` replaces it
    /// before anything else is mirrored; until then the consumer stays where it is (the rewind
    /// needs the destination ends after the old transaction is resolved).
    fn break_producer(&mut self, why: String, in_doubt: Vec<PartitionProgress>) {
        tracing::warn!(
            mirror = %self.config.mirror,
            error = %why,
            commit_in_doubt = !in_doubt.is_empty(),
            "transactional request timed out: the producer is re-created (epoch bump) before the next transaction"
        );
        // Forget locally what the old producer still holds; its requests already on their way
        // are fenced by the replacement's init.
        self.producer.purge(PurgeConfig::default().queue().inflight());
        self.in_txn = false;
        match &mut self.broken {
            // A second timeout while recovering: a doubt, if any, stays.
            Some(b) => {
                b.why = why;
                b.replaced = false;
                if b.in_doubt.is_empty() {
                    b.in_doubt = in_doubt;
                }
            }
            None => self.broken = Some(Broken { why, in_doubt, replaced: false }),
        }
    }

    /// Replaces a broken producer (see `break_producer`): a new producer with the same
    /// transactional id, whose init bumps the epoch (every request of the old one still on its
    /// way is refused from then on) and completes the old transaction. Then learns whether a
    /// commit in doubt happened, reports it if so, and rewinds every partition to its committed
    /// position. An error leaves the pipe broken, to be retried ([`PipeError::InDoubt`]), unless
    /// the old producer was fenced meanwhile ([`PipeError::Fenced`]: the pipe is done).
    fn recover(&mut self) -> Result<(), PipeError> {
        let Some(broken) = &self.broken else { return Ok(()) };
        if self.fenced {
            // Another writer took over: re-initialising would fence it back.
            self.broken = None;
            return Ok(());
        }
        let why = broken.why.clone();
        if !broken.replaced
            && let Some((_, fatal)) = self.producer.client().fatal_error()
        {
            // The old producer learned that another writer with the same transactional id took
            // over (fenced): a new init would fence that writer back. The engine decides, as for
            // any fatal error (see `after_txn_error`).
            self.broken = None;
            let message = format!("after a timeout ({why}): {fatal}");
            self.on_fenced(message.clone());
            return Err(PipeError::Fenced(message));
        }
        if !broken.replaced {
            self.recreate_producer().map_err(|e| PipeError::InDoubt(format!("after a timeout ({why}): {e}")))?;
            if let Some(b) = &mut self.broken {
                b.replaced = true;
            }
        }
        let in_doubt = self.broken.as_ref().map(|b| b.in_doubt.clone()).unwrap_or_default();
        let committed = if in_doubt.is_empty() {
            false
        } else {
            self.txn_committed(&in_doubt).map_err(|e| PipeError::InDoubt(format!("after a timeout ({why}): {e}")))?
        };
        tracing::warn!(
            mirror = %self.config.mirror,
            after = %why,
            outcome = if in_doubt.is_empty() {
                "aborted"
            } else if committed {
                "committed (commit in doubt)"
            } else {
                "aborted (commit in doubt)"
            },
            "producer re-created after a timed-out transactional request; resuming from the committed positions"
        );
        self.broken = None;
        if committed {
            let mut progress = Vec::with_capacity(in_doubt.len());
            for p in in_doubt {
                // Partitions leave the pipe only after `handle` recovered, so all are still here.
                let Some(part) = self.parts.get_mut(&(p.topic.clone(), p.partition)) else { continue };
                part.committed_next_source = Some(p.next_source_offset);
                part.committed_epoch = p.source_leader_epoch;
                part.committed_destination_end = p.destination_end_offset;
                progress.push(p);
            }
            if !progress.is_empty() {
                self.emit(PipeEvent::Committed(progress));
            }
        }
        self.rewind_all();
        Ok(())
    }

    /// Whether the transaction of `in_doubt` committed, once the replacement producer's init has
    /// completed it: the first record it wrote to one of its partitions is visible to a
    /// `read_committed` reader, or skipped (aborted). A transaction is atomic, so one partition
    /// tells.
    fn txn_committed(&self, in_doubt: &[PartitionProgress]) -> Result<bool, OutcomeError> {
        let Some(p) = in_doubt.iter().find(|p| p.records > 0) else { return Ok(false) };
        let first = p.destination_end_offset - p.records as i64;
        let consumer: BaseConsumer<EofReaderContext> = outcome_consumer_config(&self.config)
            .and_then(|cfg| create_with_context(&cfg, EofReaderContext, "destination outcome reader"))
            .map_err(OutcomeError::Reader)?;
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(&p.topic, p.partition, Offset::Offset(first)).map_err(OutcomeError::Position)?;
        consumer.assign(&tpl).map_err(OutcomeError::Assign)?;
        let deadline = Instant::now() + self.config.transaction_timeout;
        while Instant::now() < deadline {
            match consumer.poll(Duration::from_millis(200)) {
                // Committed: the record is visible where it landed. Aborted: skipped, and the
                // next visible record (if any) is a later one.
                Some(Ok(m)) if m.topic() == p.topic && m.partition() == p.partition => {
                    return Ok(m.offset() == first);
                }
                Some(Ok(_)) | None => {}
                Some(Err(RdError::PartitionEOF(_))) => return Ok(false),
                Some(Err(e)) => tracing::debug!(mirror = %self.config.mirror, error = %e, "outcome reader"),
            }
        }
        Err(OutcomeError::NoAnswer { topic: p.topic.clone(), partition: p.partition, offset: first })
    }

    /// A new producer with the same transactional id; its init bumps the producer epoch and aborts
    /// whatever the old one left open. Used for the deliberate fence of a stop and to replace a
    /// producer whose transactional request timed out (`recover`).
    fn recreate_producer(&mut self) -> Result<(), ReplaceError> {
        let started = Instant::now();
        let producer: ThreadedProducer<PipeProducerContext> = producer_config(&self.config)
            .and_then(|cfg| create_with_context(&cfg, PipeProducerContext { log: DeliveryLog::default() }, "producer"))
            .map_err(ReplaceError::Create)?;
        producer.init_transactions(self.config.transaction_timeout).map_err(ReplaceError::Init)?;
        let initialised = Instant::now();
        // Dropping the old producer purges it, waits up to 500 ms for its delivery reports and
        // joins its threads (rdkafka's Drop).
        self.producer = Destination::new(producer, &self.config);
        self.in_txn = false;
        // The new client creates its topics afresh: settle their codecs again.
        for part in self.parts.values_mut() {
            part.codec_settled = false;
        }
        // Part of a stop's fence (one per slot data path, in parallel) and of a recovery: say
        // which part took the time when it is slow.
        let init = initialised - started;
        let closed = initialised.elapsed();
        if init + closed >= SLOW_TO_LOG {
            tracing::info!(
                mirror = %self.config.mirror,
                slot = self.config.slot,
                "new producer: created and init_transactions in {} ms, old producer closed in {} ms",
                init.as_millis(),
                closed.as_millis()
            );
        }
        Ok(())
    }

    /// Waits until every record sent has its delivery report served (see `super::produce`).
    fn flush_sent(&self) -> Result<(), RdError> {
        let producer = &self.producer;
        let log = &producer.context().log;
        wait_delivered(
            || producer.in_flight_count(),
            // Parked until the last data record's report; then the state records (a few, sent
            // last) and the reports being served are waited for in short sleeps.
            || {
                if !log.wait_reported(self.txn_bytes, MAX_PARK) {
                    std::thread::sleep(SERVE_STEP);
                }
            },
            self.config.transaction_timeout,
        )
    }

    /// Drops the records still queued in the producer and serves the delivery reports of those
    /// in flight, so the abort that follows does not wait (up to its timeout) on reports that
    /// nobody polls. Under load the queue can hold thousands of records.
    fn drain_before_abort(&mut self) {
        self.producer.purge(PurgeConfig::default().queue());
        let deadline = Instant::now() + self.config.transaction_timeout;
        while self.producer.in_flight_count() > 0 && Instant::now() < deadline {
            std::thread::sleep(SERVE_STEP);
        }
    }

    /// Aborts the open transaction and rewinds every partition to its committed position.
    fn abort_and_rewind(&mut self) {
        if self.in_txn {
            self.drain_before_abort();
            if let Err(e) = self.producer.abort_transaction(self.config.transaction_timeout) {
                if abort_failure_needs_new_producer(e.rdkafka_error_code()) {
                    // The abort may still be on its way: a new producer completes it (nothing of
                    // this transaction was committed) and rewinds when it is in place.
                    self.break_producer(format!("abort: {e}"), Vec::new());
                    return;
                }
                // The transaction's outcome is now unknown to this producer: stop and let the
                // engine restart the data path from the committed state.
                self.on_fenced(format!("abort failed: {e}"));
                return;
            }
            self.in_txn = false;
        }
        self.rewind_all();
    }

    fn rewind_all(&mut self) {
        let keys: Vec<Key> = self.parts.keys().cloned().collect();
        if keys.is_empty() {
            return;
        }
        // The aborted records (and the abort marker) took destination offsets: learn the new end.
        let requests: Vec<(String, i32, OffsetSpec)> =
            keys.iter().map(|(t, p)| (t.clone(), *p, OffsetSpec::Latest)).collect();
        let ends =
            self.runtime.block_on(self.destination_admin.list_offsets(&requests, IsolationLevel::ReadUncommitted));
        let ends: HashMap<Key, i64> = match ends {
            Ok(v) => v.into_iter().map(|o| ((o.topic, o.partition), o.offset)).collect(),
            Err(e) => {
                tracing::warn!(mirror = %self.config.mirror, error = %e, "cannot read destination ends after abort");
                HashMap::new()
            }
        };
        self.incremental_unassign(&keys);
        let mut positions = Vec::with_capacity(keys.len());
        for key in &keys {
            let part = self.parts.get_mut(key).expect("key from parts");
            part.pending.clear();
            part.expected_next_destination = ends.get(key).copied();
            part.after_commit = false;
            part.after_abort = true;
            positions.push(PartitionPosition {
                topic: key.0.clone(),
                partition: key.1,
                offset: part.committed_next_source.unwrap_or(-2),
                leader_epoch: part.committed_epoch,
            });
        }
        if let Err(e) = self.incremental_assign(&positions) {
            tracing::warn!(mirror = %self.config.mirror, error = %e, "re-assign after abort failed");
        }
    }

    /// Aborts the open transaction without rewinding; a failed abort is only logged (the caller
    /// is about to shut down or to re-initialise the producer, which aborts it anyway).
    fn abort_quietly(&mut self) {
        if self.in_txn {
            self.drain_before_abort();
            if let Err(e) = self.producer.abort_transaction(self.config.transaction_timeout) {
                tracing::debug!(mirror = %self.config.mirror, error = %e, "abort");
            }
            self.in_txn = false;
        }
    }

    fn unassign(&mut self, partitions: &[Key], finish: Finish) -> Result<Vec<FinalPosition>, PipeError> {
        if self.in_txn {
            match finish {
                Finish::Commit => match self.commit() {
                    TxnOutcome::Committed => {}
                    TxnOutcome::Again => {
                        tracing::info!(mirror = %self.config.mirror, "commit before unassign aborted; the records are mirrored again")
                    }
                    TxnOutcome::Retry(m) => {
                        tracing::info!(mirror = %self.config.mirror, "commit before unassign failed, aborted: {m}")
                    }
                    TxnOutcome::Fenced(m) => {
                        self.on_fenced(m.clone());
                        return Err(PipeError::Fenced(m));
                    }
                },
                Finish::Abort => self.abort_and_rewind(),
            }
        }
        // A commit (or abort) that just timed out left the producer broken: a commit in doubt may
        // have committed, so the final positions wait for its outcome (see `recover`).
        self.recover()?;
        let mut out = Vec::new();
        let mut removed = Vec::new();
        for key in partitions {
            if let Some(part) = self.parts.remove(key) {
                out.push(FinalPosition {
                    topic: key.0.clone(),
                    partition: key.1,
                    next_source_offset: part.committed_next_source,
                    source_leader_epoch: part.committed_epoch,
                    destination_end_offset: part.committed_destination_end,
                });
                removed.push(key.clone());
            }
        }
        if !removed.is_empty() {
            self.incremental_unassign(&removed);
        }
        Ok(out)
    }

    /// Fences, unless another instance already fenced this writer (then says so).
    fn fence_checked(&mut self) -> Result<(), PipeError> {
        if self.fenced {
            return Err(PipeError::Fenced("this writer was fenced by another kmirror instance".to_string()));
        }
        self.fence().map_err(|e| PipeError::Fence(e.to_string()))
    }

    fn fence(&mut self) -> Result<(), ReplaceError> {
        // Abort first (without rewinding yet): the rewind reads destination ends, which must
        // include the abort markers.
        let aborted = self.in_txn;
        self.abort_quietly();
        // A new init_transactions on the same id bumps the producer epoch: every earlier
        // incarnation (a zombie kmirror, an in-flight request) is fenced from now on. With no
        // transaction open nothing was consumed past the committed positions, so no rewind.
        self.recreate_producer()?;
        if aborted {
            self.rewind_all();
        }
        Ok(())
    }
}

/// Orders commands that queued up while the thread was busy: consecutive assignments become one
/// (one metadata refresh and one incremental assign instead of one per topic), and a partition
/// that a later release in the same batch removes is not assigned at all: it would be released
/// again at once, and its final position is the one the engine assigned it from, which the engine
/// already holds. Otherwise the order is kept, so an assignment after a release (a stop, then a
/// restart) still happens. Without this a stop right after a start of 100 topics waited for
/// ~40 queued assignments per data path (10-13 s for 10,000 partitions).
fn coalesce(queued: Vec<PipeCommand>) -> Vec<PipeCommand> {
    let mut out: Vec<PipeCommand> = Vec::with_capacity(queued.len());
    // Walk backwards, so each assignment knows which partitions later releases remove.
    let mut released_later: std::collections::HashSet<Key> = std::collections::HashSet::new();
    for cmd in queued.into_iter().rev() {
        match cmd {
            PipeCommand::Assign(mut specs) => {
                specs.retain(|s| !released_later.contains(&(s.topic.clone(), s.partition)));
                if specs.is_empty() {
                    continue;
                }
                // `out` is reversed: its last element is the command right after this one.
                if let Some(PipeCommand::Assign(next)) = out.last_mut() {
                    // Earlier specs first: the first assignment of a partition is the one kept.
                    specs.append(next);
                    *next = specs;
                } else {
                    out.push(PipeCommand::Assign(specs));
                }
            }
            PipeCommand::Unassign { ref partitions, .. } => {
                released_later.extend(partitions.iter().cloned());
                out.push(cmd);
            }
            other => out.push(other),
        }
    }
    out.reverse();
    out
}

/// The destination producer's settings: one place for the first producer and every re-created
/// one (a fence), so they can never drift apart.
///
/// Tuning defaults come first so a user's destination property overrides them (e.g.
/// `compression.type=lz4`, a longer `linger.ms`); what exactly-once needs comes last and cannot be
/// overridden. The user's properties are applied from their own map (`client::client_config`):
/// rdkafka's `config_map()` masks secrets, and a copy made through it authenticated with the mask.
fn producer_config(config: &PipeConfig) -> KafkaResult<ClientConfig> {
    let client_id = format!("kmirror-{}-{}-destination", config.mirror, config.slot);
    let transaction_timeout_ms = super::TRANSACTION_TIMEOUT.as_millis().to_string();
    let mut pcfg = client_config(
        Some(ClientKind::Producer),
        &config.destination_bootstrap,
        &config.destination_properties,
        &[
            ("linger.ms", "5"),
            // Only for topics whose source codec is unknown (message format v1 or older): every
            // other topic gets the codec of its source batches (`Destination::settle_codec`).
            // librdkafka hands over records, not the source's batches, so without a codec what the
            // source's producers compressed reaches the destination uncompressed: twice the bytes
            // stored, sent and handled by the destination for compressible data (lz4-64 bench:
            // destination CPU per GiB 2.3x B's; `bench/results/*-s14-destlz4*.md`). lz4 because
            // it compresses fastest of Kafka's codecs. `compression.type` in the destination
            // properties replaces it and applies to every topic.
            ("compression.type", "lz4"),
            ("message.max.bytes", "16777216"),
            ("transaction.timeout.ms", &transaction_timeout_ms),
            // Transactional requests retried after CONCURRENT_TRANSACTIONS and the like: the
            // default 100 ms shows up directly in end-to-end latency.
            ("retry.backoff.ms", "10"),
            ("retry.backoff.max.ms", "500"),
            ("client.id", &client_id),
        ],
    )?;
    pcfg.set("transactional.id", &config.transactional_id).set("enable.idempotence", "true");
    Ok(pcfg)
}

/// The source consumer's settings, built like the producer's: tuning defaults first, the user's
/// `[source.properties]` over them, then what the data path's correctness depends on.
fn consumer_config(config: &PipeConfig) -> KafkaResult<ClientConfig> {
    let fetch_max_bytes = FETCH_MAX_BYTES.to_string();
    let fetch_wait_max_ms = FETCH_WAIT_MAX_MS.to_string();
    let partition_fetch_max_bytes = PARTITION_FETCH_MAX_BYTES.to_string();
    let mut ccfg = client_config(
        Some(ClientKind::Consumer),
        &config.source_bootstrap,
        &config.source_properties,
        &[
            // librdkafka receives a fetch response into one buffer of its size. At the 50 MiB
            // default (reached from 50 partitions on, at 1 MiB each) glibc serves every such
            // buffer with a fresh mmap, and the process spent ~10 % of its CPU faulting in and
            // zeroing those pages. Responses of at most 16 MiB stay in malloc's heap once glibc
            // has raised its mmap threshold.
            ("fetch.max.bytes", &fetch_max_bytes),
            // librdkafka has no incremental fetch sessions (KIP-227): every fetch lists every
            // assigned partition, so at 10,000 idle partitions each one costs both sides real
            // CPU. The broker answers as soon as any partition has data (fetch.min.bytes 1), so
            // a longer wait costs no latency; it only spaces out the fetches of an idle mirror.
            ("fetch.wait.max.ms", &fetch_wait_max_ms),
            // A slot's data path fetches only that slot's partitions, usually one or two of a
            // topic, and at librdkafka's 1 MiB per partition each fetch then carried ~1 MiB where
            // one consumer of every partition got up to `fetch.max.bytes`: 947 fetch requests per
            // GiB against 140 for the benchmark's plain consumer (request log, none-8, session
            // 14), and the source broker's CPU per GiB under kmirror 1.1-1.3x its CPU under the
            // baseline. At 8 MiB: 0.6-1.0x, for ~90-290 MiB more peak RSS while draining a
            // backlog (`bench/results/*-s14-pfetch8m.md` against `*-s14-pfetch1m.md`). The source
            // cluster is usually production: its load is the operator's first worry.
            ("max.partition.fetch.bytes", &partition_fetch_max_bytes),
        ],
    )?;
    ccfg.set("group.id", format!("kmirror-{}", config.mirror))
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("isolation.level", "read_committed")
        // A position the source no longer has is an error, never a silent jump.
        .set("auto.offset.reset", "error")
        // Fetching a topic must never create it on the source (a mistyped or deleted name).
        .set("allow.auto.create.topics", "false")
        .set("enable.partition.eof", "false")
        .set("fetch.queue.backoff.ms", "10")
        .set("queued.max.messages.kbytes", config.prefetch_kbytes.to_string())
        .set("client.id", format!("kmirror-{}-{}-source", config.mirror, config.slot));
    Ok(ccfg)
}

/// What a mirror's data paths together may fetch ahead of their producers, in KiB: what the one
/// data path of a mirror had before slots. Each slot's data path gets an equal share, at least
/// [`PREFETCH_MIN_KB`]: sixteen data paths with 64 MiB each peaked at 920 MiB RSS on the
/// 64-partition bench, against 293 MiB for one.
const PREFETCH_BUDGET_KB: usize = 64 << 10;

/// The least one data path may fetch ahead: a few full fetch responses of its partitions.
const PREFETCH_MIN_KB: usize = 8 << 10;

/// `queued.max.messages.kbytes` of one of a mirror's `slots` data paths.
pub fn prefetch_kbytes(slots: usize) -> usize {
    (PREFETCH_BUDGET_KB / slots.max(1)).max(PREFETCH_MIN_KB)
}

/// The consumer's `fetch.max.bytes` default (librdkafka's is 50 MiB): see `consumer_config`.
const FETCH_MAX_BYTES: usize = 16 << 20;

/// The consumer's `max.partition.fetch.bytes` default (librdkafka's is 1 MiB): see `consumer_config`.
const PARTITION_FETCH_MAX_BYTES: usize = 8 << 20;

/// The consumer's `fetch.wait.max.ms` default: see `consumer_config`.
const FETCH_WAIT_MAX_MS: u32 = 500;

/// A release, fence or lifecycle step that takes at least this long is logged at info with
/// where its time went (the engine's `run_actions` and `unassign_many` use it too): enough to
/// explain a slow failover without a debug log.
pub const SLOW_TO_LOG: Duration = Duration::from_secs(1);

/// Steps of the data path's thread at least this long are kept to explain a command's wait.
const NOTE_STEP: Duration = Duration::from_millis(20);

/// The longest the data path parks waiting for delivery reports before it looks again (a
/// safety net: a report's callback unparks it, see `DeliveryLog::wait_reported`).
const MAX_PARK: Duration = Duration::from_millis(20);

/// How many such steps are kept.
const STEPS_KEPT: usize = 256;

/// How long the consumer may have nothing to give before an open transaction is committed early.
const CAUGHT_UP_WAIT: Duration = Duration::from_millis(5);

/// At most this many bytes of a transaction's records may be on their way to the destination
/// (queued in the producer or unacknowledged) while the pipe takes more from the consumer (see
/// `Pipe::fill`): enough to keep the producer's five requests in flight to every broker full
/// (librdkafka sends one partition's batch of up to 1 MB per request), small enough to flush in
/// ~100 ms on a loaded 2-core machine. Per slot data path, not split over a mirror's slots like
/// the prefetch: a 4 MiB floor at 16 slots cut the 64-partition bench's peak RSS from 781 to 513
/// MiB but its throughput by 8–12 % in every scenario (`bench/results/*-s11-1inst-unackedsplit.md`
/// against `*-s11-1inst.md`, minutes apart).
const MAX_UNACKED_BYTES: usize = 16 << 20;

/// librdkafka's default `batch.size`: the most one produce request carries for one partition.
const PRODUCER_BATCH_BYTES: usize = 1_000_000;

/// How many bytes of a transaction may be on their way while the pipe takes more (see
/// `MAX_UNACKED_BYTES`): at least a full batch per assigned partition, or the per-partition
/// batches shrink and the producer's requests (one partition each) queue up behind each other
/// at the broker (a flat 16 MiB at 64 partitions made the latency run's p99 worse, 2.0 s →
/// 2.8–11 s); never more than a whole transaction.
fn unacked_limit(assigned_partitions: usize, commit_max_bytes: usize) -> usize {
    MAX_UNACKED_BYTES.max(assigned_partitions.saturating_mul(PRODUCER_BATCH_BYTES)).min(commit_max_bytes)
}

/// Whether a partition whose last record read is at `last_read`, with `in_txn` records in the
/// open transaction, is near `fetched_end` (where its last fetch response said it ends; unknown
/// counts as near): no more is fetched and unread than the transaction already holds (at least
/// one: a source transaction's commit marker ends a log and is never handed over). librdkafka
/// fetches ahead, so under a steady load the end is always a fetch response or so beyond the
/// last record read; under a backlog it is far beyond, by much more than a transaction.
fn near_fetched_end(last_read: i64, in_txn: usize, fetched_end: Option<i64>) -> bool {
    let in_txn = i64::try_from(in_txn.max(1)).unwrap_or(i64::MAX);
    fetched_end.is_none_or(|end| end - (last_read + 1) <= in_txn)
}

/// Whether a partition's first record after an abort landed where ours can: at the end read
/// after the abort, or one later when the abort marker was written after that read.
fn landed_after_abort(read_end: i64, landed: i64) -> bool {
    landed == read_end || landed == read_end + 1
}

/// Whether a transaction may end early (see `Pipe::may_end_early`): the previous one stopped
/// taking records at least `spacing` ago, and this one is at least half of `spacing` old.
fn early_end_allowed(since_previous_fill_end: Duration, txn_age: Duration, spacing: Duration) -> bool {
    since_previous_fill_end >= spacing && txn_age >= spacing / 2
}

/// How often a transaction that may end early (`Pipe::may_end_early`) compares its partitions'
/// read positions with their fetched ends (one cached lookup per partition with records in it).
const END_CHECK_EVERY: Duration = Duration::from_millis(5);

/// How often `fill` looks for a queued command (one `try_recv`): what a pause, stop or fence
/// waits at most before the open transaction commits for it.
const COMMAND_CHECK_EVERY: Duration = Duration::from_millis(5);

/// Whether an error of a transactional request (a produce, EndTxn, the flush before a commit)
/// means the producer must be replaced before the next transaction: the request timed out, so
/// it may still be on its way to the broker. librdkafka lacks Kafka's transactions v2 (KIP-890,
/// librdkafka issue #5423): a produce of an aborted transaction arriving late would join the
/// next transaction of the same producer epoch, and a late EndTxn could end the wrong one. A new
/// producer with the same transactional id bumps the epoch in its init, and the broker then
/// refuses every request of the old epoch.
fn needs_new_producer(code: Option<RDKafkaErrorCode>) -> bool {
    matches!(
        code,
        Some(
            RDKafkaErrorCode::OperationTimedOut
                | RDKafkaErrorCode::MessageTimedOut
                | RDKafkaErrorCode::RequestTimedOut
                | RDKafkaErrorCode::TimedOutQueue
        )
    )
}

/// Whether a failed abort is settled by a new producer (whose `init_transactions` aborts
/// whatever the coordinator holds; nothing of an aborted transaction was committed) rather than
/// by stopping the data path. Besides the timeouts of [`needs_new_producer`], INVALID_TXN_STATE:
/// librdkafka sends the abort's EndTxn once the first AddPartitionsToTxn is *sent*, not
/// answered, so the coordinator can still see an empty transaction and refuse the abort
/// (librdkafka#4849) — a race, not a fence.
fn abort_failure_needs_new_producer(code: Option<RDKafkaErrorCode>) -> bool {
    needs_new_producer(code) || code == Some(RDKafkaErrorCode::InvalidTransactionalState)
}

/// What the pipe does after a transactional call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TxnErrorAction {
    /// Stop: another writer with the same transactional id probably took over.
    Fenced,
    /// Replace the producer (epoch bump), learn the transaction's outcome, rewind, go on.
    NewProducer,
    /// Abort the transaction, rewind, retry after a backoff.
    AbortAndRetry,
}

/// Decides [`TxnErrorAction`] from whether librdkafka called the error fatal and its code.
fn txn_error_action(fatal: bool, code: Option<RDKafkaErrorCode>) -> TxnErrorAction {
    let fenced = code.is_some_and(|c| super::ffi::kind_of(c) == KafkaErrorKind::Fenced);
    if fatal || fenced {
        TxnErrorAction::Fenced
    } else if needs_new_producer(code) {
        TxnErrorAction::NewProducer
    } else {
        TxnErrorAction::AbortAndRetry
    }
}

/// The settings of the short-lived destination reader that learns a commit's outcome after a
/// timeout (`Pipe::txn_committed`): the destination's connection settings, `read_committed`,
/// and an end-of-partition event (aborted records are skipped up to the end).
fn outcome_consumer_config(config: &PipeConfig) -> KafkaResult<ClientConfig> {
    let mut cfg =
        client_config(Some(ClientKind::Consumer), &config.destination_bootstrap, &config.destination_properties, &[])?;
    cfg.set("group.id", format!("kmirror-{}-outcome", config.mirror))
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("isolation.level", "read_committed")
        .set("auto.offset.reset", "error")
        .set("allow.auto.create.topics", "false")
        .set("enable.partition.eof", "true")
        .set("client.id", format!("kmirror-{}-outcome", config.mirror));
    Ok(cfg)
}

/// Exponential backoff with jitter for transient data-path failures: 200 ms doubling to 30 s.
fn backoff(attempt: u32) -> Duration {
    use crate::domain::backoff::{Backoff, Jitter};
    Backoff::DATA_PATH.delay(attempt, Jitter::from_random_u32(rand::random()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The typed errors of the data path read as the words operators saw before they were
    /// typed: the data-path status and the partition errors show them.
    #[test]
    fn typed_pipe_errors_keep_their_words() {
        let client = || KafkaError::Client("bad property".into());
        let rd = || RdError::ClientCreation("no brokers".into());
        let texts = [
            (StartError::SourceConsumer(client()).to_string(), "cannot create source consumer: "),
            (StartError::Producer(client()).to_string(), "cannot create destination producer: "),
            (StartError::InitTransactions(rd()).to_string(), "cannot initialise transactions on the destination: "),
            (ReplaceError::Create(client()).to_string(), "cannot re-create producer: "),
            (ReplaceError::Init(rd()).to_string(), "re-init transactions: "),
            (OutcomeError::Reader(client()).to_string(), "cannot create the outcome reader: "),
            (OutcomeError::Assign(rd()).to_string(), "cannot read the destination: "),
            (AssignError::Consumer(rd()).to_string(), ""),
        ];
        for (text, prefix) in texts {
            let inner = if text.contains("Kafka client") { client().to_string() } else { rd().to_string() };
            assert_eq!(text, format!("{prefix}{inner}"));
        }
        let none = OutcomeError::NoAnswer { topic: "t".into(), partition: 3, offset: 42 };
        assert_eq!(none.to_string(), "cannot learn the outcome of the commit in doubt (reading t-3 at 42)");
    }

    fn spec(topic: &str, partition: i32, from: i64) -> AssignSpec {
        AssignSpec {
            topic: topic.into(),
            partition,
            next_source_offset: Some(from),
            source_leader_epoch: None,
            destination_next_offset: 0,
            destination_end_offset: 0,
        }
    }

    fn unassign(partitions: &[(&str, i32)]) -> PipeCommand {
        let (reply, _) = oneshot::channel();
        PipeCommand::Unassign {
            partitions: partitions.iter().map(|(t, p)| (t.to_string(), *p)).collect(),
            finish: Finish::Abort,
            fence: true,
            sent: Instant::now(),
            reply,
        }
    }

    /// A command as its kind and (topic, partition, from offset or -1) list.
    type Shape = (&'static str, Vec<(String, i32, i64)>);

    /// The commands as shapes, in order.
    fn shape(cmds: &[PipeCommand]) -> Vec<Shape> {
        cmds.iter()
            .map(|c| match c {
                PipeCommand::Assign(specs) => (
                    "assign",
                    specs.iter().map(|s| (s.topic.clone(), s.partition, s.next_source_offset.unwrap_or(-1))).collect(),
                ),
                PipeCommand::Unassign { partitions, .. } => {
                    ("unassign", partitions.iter().map(|(t, p)| (t.clone(), *p, -1)).collect())
                }
                PipeCommand::Fence { .. } => ("fence", Vec::new()),
                PipeCommand::Shutdown { .. } => ("shutdown", Vec::new()),
            })
            .collect()
    }

    #[test]
    fn queued_assignments_become_one_in_their_order() {
        let cmds = coalesce(vec![
            PipeCommand::Assign(vec![spec("a", 0, 5), spec("a", 1, 6)]),
            PipeCommand::Assign(vec![spec("b", 0, 7)]),
            PipeCommand::Assign(vec![spec("a", 0, 9)]),
        ]);
        // One assignment; a partition assigned twice keeps its first position first (the data
        // path keeps the first and ignores the repeat, as it did command by command).
        let expected =
            vec![("assign", vec![("a".into(), 0, 5), ("a".into(), 1, 6), ("b".into(), 0, 7), ("a".into(), 0, 9)])];
        assert_eq!(shape(&cmds), expected);
    }

    #[test]
    fn a_queued_release_drops_the_assignments_it_would_undo_and_keeps_later_ones() {
        let (fence, _) = oneshot::channel();
        let cmds = coalesce(vec![
            PipeCommand::Assign(vec![spec("a", 0, 1), spec("b", 0, 2)]),
            PipeCommand::Assign(vec![spec("a", 1, 3)]),
            PipeCommand::Fence { reply: fence },
            unassign(&[("a", 0), ("a", 1)]),
            // A restart after the stop: assigned again.
            PipeCommand::Assign(vec![spec("a", 0, 4)]),
        ]);
        let expected = vec![
            ("assign", vec![("b".into(), 0, 2)]),
            ("fence", vec![]),
            ("unassign", vec![("a".into(), 0, -1), ("a".into(), 1, -1)]),
            ("assign", vec![("a".into(), 0, 4)]),
        ];
        assert_eq!(shape(&cmds), expected);
    }

    #[test]
    fn a_stop_after_a_start_storm_is_handled_without_any_assignment() {
        let mut queued: Vec<PipeCommand> =
            (0..100).map(|t| PipeCommand::Assign(vec![spec(&format!("t{t}"), 0, 0)])).collect();
        let all: Vec<(String, i32)> = (0..100).map(|t| (format!("t{t}"), 0)).collect();
        let refs: Vec<(&str, i32)> = all.iter().map(|(t, p)| (t.as_str(), *p)).collect();
        queued.push(unassign(&refs));
        let cmds = coalesce(queued);
        assert_eq!(cmds.len(), 1);
        assert_eq!(shape(&cmds)[0].0, "unassign");
    }

    #[test]
    fn a_timed_out_transactional_request_replaces_the_producer() {
        use RDKafkaErrorCode as C;
        // Timeouts: the request may still reach the broker, so only an epoch bump makes it harmless.
        for code in [C::OperationTimedOut, C::MessageTimedOut, C::RequestTimedOut, C::TimedOutQueue] {
            assert!(needs_new_producer(Some(code)), "{code:?}");
            assert_eq!(txn_error_action(false, Some(code)), TxnErrorAction::NewProducer, "{code:?}");
        }
        // Fencing wins, timed out or not: re-initialising would fence the new owner back.
        assert_eq!(txn_error_action(true, Some(C::OperationTimedOut)), TxnErrorAction::Fenced);
        for code in [C::ProducerFenced, C::InvalidProducerEpoch, C::Fenced] {
            assert!(!needs_new_producer(Some(code)), "{code:?}");
            assert_eq!(txn_error_action(false, Some(code)), TxnErrorAction::Fenced, "{code:?}");
        }
        // Anything else (an abortable error, a refused record, a lost connection): abort and retry.
        for code in [Some(C::State), Some(C::NotEnoughReplicas), Some(C::BrokerTransportFailure), None] {
            assert!(!needs_new_producer(code), "{code:?}");
            assert_eq!(txn_error_action(false, code), TxnErrorAction::AbortAndRetry, "{code:?}");
        }
    }

    #[test]
    fn an_abort_refused_as_invalid_state_replaces_the_producer_but_a_fenced_one_stops() {
        use RDKafkaErrorCode as C;
        // librdkafka#4849: the abort raced the first AddPartitionsToTxn; a new producer ends it.
        assert!(abort_failure_needs_new_producer(Some(C::InvalidTransactionalState)));
        assert!(abort_failure_needs_new_producer(Some(C::RequestTimedOut)));
        // A fence must stop the data path: a new producer would fence the slot's new owner.
        for code in [Some(C::ProducerFenced), Some(C::InvalidProducerEpoch), Some(C::Fenced), None] {
            assert!(!abort_failure_needs_new_producer(code), "{code:?}");
        }
    }

    #[test]
    fn slot_data_paths_share_the_mirror_prefetch_budget() {
        // One data path keeps what a mirror's single data path had.
        assert_eq!(prefetch_kbytes(1), 64 << 10);
        assert_eq!(prefetch_kbytes(4), 16 << 10);
        // Sixteen slots: 8 MiB each (the floor), 128 MiB for the mirror instead of 1 GiB.
        assert_eq!(prefetch_kbytes(16), 8 << 10);
        assert_eq!(prefetch_kbytes(64), 8 << 10);
        assert_eq!(prefetch_kbytes(0), 64 << 10);
    }

    #[test]
    fn the_outcome_reader_sees_only_committed_records_and_the_end() {
        let config = PipeConfig {
            mirror: "m".into(),
            slot: 0,
            source_bootstrap: "src:9092".into(),
            source_properties: BTreeMap::new(),
            destination_bootstrap: "dst:9092".into(),
            destination_properties: BTreeMap::from([("security.protocol".to_string(), "SASL_SSL".to_string())]),
            transactional_id: "t".into(),
            commit_interval: Duration::from_millis(1000),
            early_commit_interval: Duration::from_millis(50),
            commit_max_bytes: 1 << 20,
            state_topic: "__mirror_state".into(),
            transaction_timeout: Duration::from_secs(10),
            prefetch_kbytes: prefetch_kbytes(1),
            throttle: Default::default(),
        };
        let cfg = outcome_consumer_config(&config).unwrap();
        assert_eq!(cfg.get("bootstrap.servers"), Some("dst:9092"));
        assert_eq!(cfg.get("security.protocol"), Some("SASL_SSL"));
        assert_eq!(cfg.get("isolation.level"), Some("read_committed"));
        assert_eq!(cfg.get("enable.partition.eof"), Some("true"));
        assert_eq!(cfg.get("enable.auto.commit"), Some("false"));
    }

    #[test]
    fn consumer_tuning_defaults_yield_to_the_user_but_correctness_settings_do_not() {
        let config = |props: &[(&str, &str)]| PipeConfig {
            mirror: "m".into(),
            slot: 0,
            source_bootstrap: "src:9092".into(),
            source_properties: props.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            destination_bootstrap: "dst:9092".into(),
            destination_properties: BTreeMap::new(),
            transactional_id: "t".into(),
            commit_interval: Duration::from_millis(1000),
            early_commit_interval: Duration::from_millis(50),
            commit_max_bytes: 1 << 20,
            state_topic: "__mirror_state".into(),
            transaction_timeout: Duration::from_secs(10),
            prefetch_kbytes: prefetch_kbytes(1),
            throttle: Default::default(),
        };
        let defaults = consumer_config(&config(&[])).unwrap();
        assert_eq!(defaults.get("fetch.max.bytes"), Some("16777216"));
        assert_eq!(defaults.get("fetch.wait.max.ms"), Some("500"));
        assert_eq!(defaults.get("max.partition.fetch.bytes"), Some("8388608"));
        assert_eq!(defaults.get("socket.nagle.disable"), Some("true"));
        assert_eq!(defaults.get("bootstrap.servers"), Some("src:9092"));
        assert_eq!(defaults.get("isolation.level"), Some("read_committed"));
        assert_eq!(defaults.get("allow.auto.create.topics"), Some("false"));
        let user = consumer_config(&config(&[
            ("fetch.max.bytes", "1048576"),
            ("fetch.wait.max.ms", "50"),
            ("sasl.password", "hunter2-consumer"),
        ]))
        .unwrap();
        assert_eq!(user.get("fetch.max.bytes"), Some("1048576"));
        assert_eq!(user.get("fetch.wait.max.ms"), Some("50"));
        let alias = consumer_config(&config(&[("fetch.message.max.bytes", "1048576")])).unwrap();
        assert_eq!(alias.get("fetch.message.max.bytes"), Some("1048576"));
        assert_eq!(alias.get("max.partition.fetch.bytes"), None, "the user's alias wins, alone");
        // The secret itself, not rdkafka's config_map() placeholder.
        assert_eq!(user.get("sasl.password"), Some("hunter2-consumer"));
        // What correctness depends on cannot be set by the user at all.
        for fixed in ["isolation.level", "enable.auto.commit", "plugin.library.paths"] {
            let e = consumer_config(&config(&[(fixed, "x")])).unwrap_err().to_string();
            assert!(e.contains(fixed), "{e}");
        }
        let mut pc = config(&[]);
        pc.destination_properties = BTreeMap::from([("ssl.key.password".to_string(), "hunter2-producer".to_string())]);
        let producer = producer_config(&pc).unwrap();
        assert_eq!(producer.get("ssl.key.password"), Some("hunter2-producer"));
        assert_eq!(producer.get("transactional.id"), Some("t"));
        assert_eq!(producer.get("compression.type"), Some("lz4"));
        // The broker aborts a transaction open longer than this.
        assert_eq!(producer.get("transaction.timeout.ms"), Some("60000"));
        pc.destination_properties = BTreeMap::from([("compression.codec".to_string(), "none".to_string())]);
        let producer = producer_config(&pc).unwrap();
        assert_eq!(producer.get("compression.codec"), Some("none"));
        assert_eq!(producer.get("compression.type"), None, "the user's alias wins, alone");
    }

    #[test]
    fn early_ends_are_spaced_from_the_previous_fill_end_and_never_younger_than_half_the_spacing() {
        let ms = Duration::from_millis;
        // The previous transaction's flush and commit (here 20 ms) count towards the 50 ms.
        assert!(early_end_allowed(ms(50), ms(30), ms(50)));
        assert!(!early_end_allowed(ms(49), ms(30), ms(50)));
        // After a slow flush (80 ms) the open transaction still fills for 25 ms.
        assert!(!early_end_allowed(ms(90), ms(10), ms(50)));
        assert!(early_end_allowed(ms(105), ms(25), ms(50)));
    }

    #[test]
    fn a_transaction_ends_early_within_its_own_size_of_the_fetched_end() {
        assert!(near_fetched_end(99, 1, Some(100))); // read to the end
        assert!(near_fetched_end(99, 1, Some(101))); // one short: a commit marker at 100
        assert!(!near_fetched_end(99, 1, Some(102))); // more fetched and unread than the transaction holds
        assert!(near_fetched_end(99, 400, Some(500))); // steady load: one fetch ahead, 400 in the transaction
        assert!(!near_fetched_end(99, 400, Some(1_000_000))); // backlog: keep filling
        assert!(near_fetched_end(99, 0, None)); // no fetch answered yet: nothing known to wait for
    }

    #[test]
    fn after_an_abort_the_first_landing_may_follow_the_abort_marker_and_nothing_else() {
        assert!(landed_after_abort(100, 100)); // the marker was already there when read
        assert!(landed_after_abort(100, 101)); // the marker came after the read
        assert!(!landed_after_abort(100, 102)); // somebody else's record in between
        assert!(!landed_after_abort(100, 99)); // below the end: never ours
    }

    #[test]
    fn unacked_limit_keeps_a_batch_per_partition_in_flight_within_a_transaction() {
        let mib = 1 << 20;
        // Few partitions: the flat limit, so a backlog's flush stays short.
        assert_eq!(unacked_limit(1, 64 * mib), 16 * mib);
        assert_eq!(unacked_limit(8, 64 * mib), 16 * mib);
        // Many partitions: a full batch each, so the produce requests stay full.
        assert_eq!(unacked_limit(64, 64 * mib), 64 * PRODUCER_BATCH_BYTES);
        assert_eq!(unacked_limit(10_000, 64 * mib), 64 * mib);
        // Never more than a transaction may hold.
        assert_eq!(unacked_limit(8, mib), mib);
    }

    #[test]
    fn batch_codecs_map_to_librdkafka_names_and_unknown_ones_to_none() {
        let names: Vec<_> = (-1..=5).map(codec_name).collect();
        assert_eq!(names, [None, Some("none"), Some("gzip"), Some("snappy"), Some("lz4"), Some("zstd"), None]);
    }

    #[test]
    fn a_codec_in_the_destination_properties_under_either_name_stops_following_the_source() {
        let props = |k: &str| BTreeMap::from([(k.to_string(), "zstd".to_string())]);
        assert!(sets_property(&props("compression.type"), "compression.type"));
        assert!(sets_property(&props("compression.codec"), "compression.type"));
        assert!(!sets_property(&props("compression.level"), "compression.type"));
        assert!(!sets_property(&BTreeMap::new(), "compression.type"));
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        // Between half and all of 200 ms doubling per attempt, at most 30 s.
        assert!(backoff(0) <= Duration::from_millis(200));
        assert!(backoff(3) >= Duration::from_millis(800));
        assert!(backoff(30) <= Duration::from_millis(30_000));
    }

    #[test]
    fn a_waiting_data_path_is_woken_by_the_report_that_reaches_its_target() {
        let log = std::sync::Arc::new(DeliveryLog::default());
        // Reached already: no wait.
        log.reported(10);
        assert!(!log.wait_reported(10, Duration::from_secs(600)));
        assert_eq!(log.wake_at.load(Ordering::SeqCst), 0);
        // Not reached: the report of another thread that reaches the target wakes it.
        let (parked_tx, parked_rx) = std::sync::mpsc::channel();
        let waiter = {
            let log = log.clone();
            std::thread::spawn(move || {
                parked_tx.send(()).unwrap();
                let started = Instant::now();
                // As the data path does: a spurious return only means looking again.
                while log.reported_bytes.load(Ordering::SeqCst) < 100 {
                    log.wait_reported(100, Duration::from_secs(600));
                }
                (started.elapsed(), log.reported_bytes.load(Ordering::SeqCst))
            })
        };
        parked_rx.recv().unwrap();
        log.reported(40);
        log.reported(50);
        let (waited, reported) = waiter.join().unwrap();
        assert_eq!(reported, 100);
        // A lost wake-up would park for the full 600 s.
        assert!(waited < Duration::from_secs(300), "woken by the timeout, not by the report: {waited:?}");
        assert_eq!(log.wake_at.load(Ordering::SeqCst), 0, "nobody waits any more");
    }
}
