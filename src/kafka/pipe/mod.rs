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

mod fill;
mod policy;
mod protocol;
#[cfg(test)]
mod tests;
mod txn;

use self::policy::*;
pub use self::policy::{SLOW_TO_LOG, prefetch_kbytes};
pub use self::protocol::*;

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
}
