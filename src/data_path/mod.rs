//! The data path of one slot (DESIGN section 4): one `read_committed` source reader of the slot's
//! partitions and one transactional destination writer, driven by a dedicated thread.
//!
//! Every transaction carries a batch of mirrored records for any number of partitions plus, for
//! each partition it touched, one state record (built by the engine's `encode` callback) holding
//! the new position and the exact offset-map runs of that batch. Data and positions therefore
//! become visible atomically: after a crash, the last committed state record says exactly where to
//! resume, with no loss and no duplicate.
//!
//! The thread is the only writer of its slot's partitions. It is driven by [`PipeCommand`]s and
//! reports through [`PipeEvent`]s; it never decides a partition's state (that is the engine's
//! coordinator) but reports what it saw: commits, per-partition failures, fencing.
//!
//! The loop is written against two ports ([`SourceFetcher`], [`TransactionalWriter`]):
//! `crate::kafka::pipe` implements them over librdkafka and starts the thread; the unit tests
//! run the same loop over an in-memory pair of clusters (`fake`).
//!
//! - `protocol`: the commands, events, settings and errors between the engine and a data path;
//! - `ports`: the two clients;
//! - `fill`: reading the source into the open transaction;
//! - `txn`: commit, where the records landed, abort and rewind, recovery, release, fence;
//! - `policy`: the pure rules (sizes, waits, when a transaction may end, what an error means).

use std::collections::{BTreeMap, HashMap};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use crate::domain::offset_map::RunBuilder;

#[cfg(test)]
mod edges;
#[cfg(test)]
mod fake;
mod fill;
mod policy;
mod ports;
mod protocol;
#[cfg(test)]
mod tests;
mod txn;

pub use self::policy::SLOW_TO_LOG;
use self::policy::*;
pub use self::ports::*;
pub use self::protocol::*;

/// Per-partition bookkeeping inside the data path.
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
    /// `expected_next_destination` was read from the broker when a marker of this slot's writer
    /// may still have been on its way: right after an abort, or by the engine for a partition
    /// assigned here (a slot's previous data path, or this one before a pause, may have just
    /// committed or aborted on it). The transaction coordinator writes the markers after EndTxn
    /// has returned, so the read may have come before the marker, and the next record then lands
    /// one offset later. Both are ours; anything else is foreign.
    marker_may_follow: bool,
    /// Records of the open transaction: (source offset, leader epoch, timestamp, bytes, slot).
    pending: Vec<Pending>,
    /// The current producer's codec for this partition's topic is settled (see
    /// [`TransactionalWriter::settle_codec`]): checked once per partition and producer, not per
    /// record.
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

/// Runs a data path until it is shut down or its command sender is dropped: reports
/// [`PipeEvent::Ready`] first (the writer is initialised: any earlier writer with the same
/// transactional id is fenced and its open transaction aborted).
pub fn run<S: SourceFetcher, W: TransactionalWriter>(mut pipe: Pipe<S, W>, commands: Receiver<PipeCommand>) {
    pipe.emit(PipeEvent::Ready);
    pipe.run(commands);
}

/// Answers a command the data path cannot carry out (it could not start), so no caller waits
/// forever.
pub fn reject(cmd: PipeCommand, why: &str) {
    match cmd {
        PipeCommand::Assign(_) => {}
        PipeCommand::Unassign { reply, .. } => drop(reply.send(Err(PipeError::Stopped(why.to_string())))),
        PipeCommand::Fence { reply } | PipeCommand::Shutdown { reply } => {
            drop(reply.send(Err(PipeError::Stopped(why.to_string()))))
        }
    }
}

/// One slot's data path: the loop's state between steps.
pub struct Pipe<S, W> {
    config: PipeConfig,
    source: S,
    writer: W,
    encode: EncodeProgress,
    events: mpsc::UnboundedSender<PipeEvent>,
    parts: HashMap<Key, Part>,
    in_txn: bool,
    /// The open transaction refused a record (`SendError::TransactionRefuses`): it must abort.
    refused: bool,
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
    /// After a re-created producer: per partition, the destination offset from which a record
    /// committed by another writer would show. Checked before anything is copied again
    /// (`verify_no_other_writer`).
    unverified: HashMap<Key, i64>,
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

impl<S, W> std::fmt::Debug for Pipe<S, W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipe")
            .field("config", &self.config)
            .field("partitions", &self.parts.len())
            .field("in_txn", &self.in_txn)
            .field("fenced", &self.fenced)
            .finish_non_exhaustive()
    }
}

impl<S: SourceFetcher, W: TransactionalWriter> Pipe<S, W> {
    /// A data path over a source reader and an initialised transactional writer.
    pub fn new(
        config: PipeConfig,
        encode: EncodeProgress,
        events: mpsc::UnboundedSender<PipeEvent>,
        source: S,
        writer: W,
    ) -> Pipe<S, W> {
        Pipe {
            config,
            source,
            writer,
            encode,
            events,
            parts: HashMap::new(),
            in_txn: false,
            refused: false,
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
            unverified: HashMap::new(),
            steps: std::collections::VecDeque::new(),
            last_command_check: Instant::now(),
            held: None,
        }
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
                    retry_at = Some(self.retry_later(message));
                    continue;
                }
                if self.parts.is_empty() {
                    continue;
                }
            }
            if !self.unverified.is_empty()
                && let Err(e) = self.verify_no_other_writer()
            {
                let PipeError::InDoubt(message) = e else {
                    continue; // another writer's commits found: reported as Fenced
                };
                retry_at = Some(self.retry_later(message));
                continue;
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
                    TxnOutcome::Retry(message) => retry_at = Some(self.retry_later(message)),
                    TxnOutcome::Fenced(message) => self.on_fenced(message),
                }
            }
            if !self.in_txn && self.last_position_report.elapsed() >= position_report_every(self.parts.len()) {
                let step = Instant::now();
                self.report_positions();
                self.note_step("position report", step);
            }
        }
    }

    /// Counts a failed attempt, reports it, and returns when the next one is due (`backoff`).
    fn retry_later(&mut self, message: String) -> Instant {
        self.retry_attempt += 1;
        self.emit(PipeEvent::Retrying { attempt: self.retry_attempt, message });
        Instant::now() + backoff(self.retry_attempt)
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
        let mut moved = Vec::new();
        for (key, offset) in self.source.positions() {
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
        self.unverified.clear();
        self.source.unassign_all();
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
                self.source.unassign_all();
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
                    // The end was read by the engine, maybe before the marker of the transaction
                    // that last wrote here (the bench's rebuild of an idle slot's data path failed
                    // 24 busy partitions as foreign writes when that marker came 2 s late).
                    marker_may_follow: true,
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
        // and producing to them would fail.
        let topics: std::collections::BTreeSet<&str> = positions.iter().map(|p| p.topic.as_str()).collect();
        let topics: Vec<&str> = topics.into_iter().collect();
        self.source.refresh_metadata(&topics);
        // The writer only for topics it already writes: a topic's codec is settled before its
        // first record (`TransactionalWriter::settle_codec`), which also fetches its metadata.
        self.writer.refresh_metadata(&topics);
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

    fn incremental_assign(&self, positions: &[PartitionPosition]) -> Result<(), ClientError> {
        self.source.assign(positions)
    }

    fn incremental_unassign(&self, keys: &[Key]) {
        self.source.unassign(keys);
    }
}
