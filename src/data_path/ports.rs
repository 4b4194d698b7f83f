//! The two clients a slot's data path drives, as the loop sees them: a source fetcher and a
//! transactional destination writer (in the manner of Kafka's `AbstractFetcherThread` with its
//! `LeaderEndPoint`, and of rskafka's partition clients). `crate::kafka::pipe` implements them
//! over librdkafka; `super::fake` over an in-memory pair of clusters, so every transaction edge
//! of the loop runs in a unit test.
//!
//! The errors are classified once, by the implementation: the loop decides on kinds, never on
//! an error's text.

use std::collections::HashMap;
use std::time::Duration;

use super::protocol::{PartitionPosition, StateWrite};

/// A source partition: (topic, partition).
pub type Key = (String, i32);

/// A record read from the source, borrowed from the fetcher until the next poll.
pub trait SourceRecord {
    fn topic(&self) -> &str;
    fn partition(&self) -> i32;
    fn offset(&self) -> i64;
    fn key(&self) -> Option<&[u8]>;
    fn value(&self) -> Option<&[u8]>;
    /// Milliseconds since the epoch, when the record has a timestamp.
    fn timestamp(&self) -> Option<i64>;
    /// The leader epoch of the batch it came in (KIP-320), when known.
    fn leader_epoch(&self) -> Option<i32>;
    /// The codec of the batch it came in (Kafka's numbers: 0 none, 1 gzip, 2 snappy, 3 lz4,
    /// 4 zstd), when known.
    fn codec(&self) -> Option<i32>;
    /// Calls `each` with every header, in order.
    fn headers(&self, each: &mut dyn FnMut(&str, Option<&[u8]>));

    /// Key and value bytes: what a transaction counts as sent and as reported, so the two counts
    /// are always of the same thing.
    fn bytes(&self) -> usize {
        self.key().map_or(0, <[u8]>::len) + self.value().map_or(0, <[u8]>::len)
    }
}

/// Why a poll gave no record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FetchError {
    /// The source refused the connection (`what`: the credentials, the TLS handshake); the client
    /// keeps reconnecting. The message holds no secret.
    #[error("the source refused the connection: {what} ({message})")]
    Refused { what: String, message: String },
    /// A position may be outside the source log (offset out of range, partition unknown): the
    /// loop checks every partition's position against the log's bounds.
    #[error("{0}")]
    OutOfLog(String),
    /// Anything else: the client retries on its own.
    #[error("{0}")]
    Transient(String),
}

/// A client call the loop only reports (an assignment, an offset look-up, the outcome reader).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ClientError(pub String);

/// The source side of a data path: one `read_committed` reader of the slot's partitions.
pub trait SourceFetcher {
    type Record<'a>: SourceRecord
    where
        Self: 'a;

    /// The next record of an assigned partition, waiting up to `wait`; `None` when none came.
    fn poll(&self, wait: Duration) -> Option<Result<Self::Record<'_>, FetchError>>;
    /// Starts reading these partitions from these positions (offset < 0: the log start; the
    /// leader epoch, when given, is validated by the client).
    fn assign(&self, positions: &[PartitionPosition]) -> Result<(), ClientError>;
    /// Stops reading these partitions (what was fetched ahead of them is dropped).
    fn unassign(&self, partitions: &[Key]);
    fn unassign_all(&self);
    /// Where the reader is for each assigned partition with a known position.
    fn positions(&self) -> Vec<(Key, i64)>;
    /// Where the partition ended at its last fetch response (the high watermark it reported).
    fn fetched_end(&self, topic: &str, partition: i32) -> Option<i64>;
    /// Refreshes the client's metadata of these topics (partitions added since it last looked).
    fn refresh_metadata(&self, topics: &[&str]);
    /// The log's bounds now per partition, in order: (start for a `read_committed` reader, end).
    fn log_bounds(&self, partitions: &[Key]) -> Result<Vec<(i64, i64)>, ClientError>;
}

/// What kind of failure a transactional call met: all the loop needs to decide (see
/// `policy::txn_error_action`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnErrorKind {
    /// Another writer with the same transactional id took over, or the client failed for good.
    Fenced,
    /// The request timed out: it may still reach the broker.
    TimedOut,
    /// The coordinator refused the call in the transaction's state (an abort racing the first
    /// AddPartitionsToTxn, librdkafka#4849).
    InvalidState,
    /// Anything else: abortable.
    Other,
}

/// A failed transactional call (begin, flush, commit, abort, init).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct TxnError {
    pub kind: TxnErrorKind,
    pub message: String,
}

impl TxnError {
    pub fn new(kind: TxnErrorKind, message: impl Into<String>) -> TxnError {
        TxnError { kind, message: message.into() }
    }
}

/// Why the writer did not take a record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    /// The open transaction took an abortable error (a record of it was refused) and takes no
    /// more records: not this record's fault.
    #[error("the transaction takes no more records")]
    TransactionRefuses,
    /// This record cannot be written (too large, ...): the partition cannot progress.
    #[error("{0}")]
    Rejected(String),
}

/// A record's delivery: its destination offset, or why it failed; `None` until reported.
pub type Delivered = Option<Result<i64, String>>;

/// The destination side of a data path: one transactional producer (its transactional id is the
/// slot's) and what the loop reads of the destination besides.
pub trait TransactionalWriter {
    fn begin(&mut self) -> Result<(), TxnError>;
    /// Gives `topic` the codec of the source's batches before its first record, when kmirror
    /// chooses the codec (see `crate::kafka::pipe`).
    fn settle_codec(&mut self, topic: &str, source_codec: Option<i32>);
    /// Sends a data record of the open transaction to the same partition; its delivery is
    /// reported at `slot` (see [`TransactionalWriter::deliveries`]).
    fn send<R: SourceRecord>(&mut self, record: &R, slot: usize) -> Result<(), SendError>;
    /// Sends a state record of the open transaction (not counted in the deliveries).
    fn send_state(&mut self, topic: &str, record: &StateWrite) -> Result<(), SendError>;
    /// Forgets the deliveries of the previous transaction (at the start of a new one).
    fn reset_deliveries(&mut self);
    /// Key and value bytes of the open transaction's data records reported so far.
    fn reported_bytes(&self) -> usize;
    /// Waits until `target` bytes have been reported or `max` has passed; `false` at once when
    /// they already have.
    fn wait_reported(&self, target: usize, max: Duration) -> bool;
    /// The deliveries reported so far, by slot.
    fn deliveries(&self) -> Vec<Delivered>;
    /// Takes them (after the flush before a commit).
    fn take_deliveries(&mut self) -> Vec<Delivered>;
    /// A data record of the open transaction failed because its request timed out.
    fn delivery_timed_out(&self) -> bool;
    /// Waits until every record sent has its delivery reported (`sent_bytes` of data records).
    fn flush(&self, sent_bytes: usize, timeout: Duration) -> Result<(), TxnError>;
    fn commit(&mut self, timeout: Duration) -> Result<(), TxnError>;
    /// Drops what is still queued, then aborts the open transaction.
    fn abort(&mut self, timeout: Duration) -> Result<(), TxnError>;
    /// Forgets everything the producer still holds, in flight too (it is about to be replaced).
    fn purge(&mut self);
    /// Why the producer failed for good, if it did (fenced by another writer).
    fn fatal_error(&self) -> Option<String>;
    /// A new producer with the same transactional id: its init bumps the producer epoch (fencing
    /// every earlier incarnation and anything still on its way) and aborts what was left open.
    fn replace(&mut self) -> Result<(), TxnError>;
    /// Refreshes the metadata of these topics the producer already writes.
    fn refresh_metadata(&self, topics: &[&str]);
    /// The destination partitions' end offsets (`read_uncommitted`: markers and open records too).
    fn end_offsets(&self, partitions: &[Key]) -> Result<HashMap<Key, i64>, ClientError>;
    /// Whether the record at `offset` is visible to a `read_committed` reader (its transaction
    /// committed), once the transaction is complete; waits up to `timeout`.
    fn committed_at(&self, topic: &str, partition: i32, offset: i64, timeout: Duration) -> Result<bool, ClientError>;
    /// For each partition, the offset of the first record at or after the given offset that a
    /// `read_committed` reader sees (markers and aborted records are skipped); partitions with
    /// none are absent. Waits up to `timeout` for the partitions of each topic.
    fn first_committed_from(&self, from: &[(Key, i64)], timeout: Duration) -> Result<HashMap<Key, i64>, ClientError>;
}
