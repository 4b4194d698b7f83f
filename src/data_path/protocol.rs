//! The protocol between the engine and a slot's data path: its settings, the commands it takes,
//! the events it reports, and the errors of both.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use crate::domain::offset_map::Run;

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
    /// Read through the source consumer the mirror's data paths share in this engine, named by
    /// this (the engine's cluster and instance names), instead of a consumer of this data
    /// path's own (`None`; `engine.source_consumers`).
    pub shared_source_consumer: Option<String>,
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

/// A position in a partition: the next offset to read and, when known, the leader epoch of the
/// record before it (KIP-320: the consumer validates it against the leader's epoch history).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionPosition {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub leader_epoch: Option<i32>,
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
