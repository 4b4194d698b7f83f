//! The pure rules the data path's loop follows (sizes, waits, when a transaction may end, what a
//! transactional error means); unit-tested in `tests`.

use super::*;

/// Orders commands that queued up while the thread was busy: consecutive assignments become one
/// (one metadata refresh and one incremental assign instead of one per topic), and a partition
/// that a later release in the same batch removes is not assigned at all: it would be released
/// again at once, and its final position is the one the engine assigned it from, which the engine
/// already holds. Otherwise the order is kept, so an assignment after a release (a stop, then a
/// restart) still happens. Without this a stop right after a start of 100 topics waited for
/// ~40 queued assignments per data path (10-13 s for 10,000 partitions).
pub(super) fn coalesce(queued: Vec<PipeCommand>) -> Vec<PipeCommand> {
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

/// A release, fence or lifecycle step that takes at least this long is logged at info with
/// where its time went (the engine's `run_actions` and `unassign_many` use it too): enough to
/// explain a slow failover without a debug log.
pub const SLOW_TO_LOG: Duration = Duration::from_secs(1);

/// Steps of the data path's thread at least this long are kept to explain a command's wait.
pub(super) const NOTE_STEP: Duration = Duration::from_millis(20);

/// The longest the data path parks waiting for delivery reports before it looks again (a
/// safety net: a report's callback unparks it, see `DeliveryLog::wait_reported`).
pub(super) const MAX_PARK: Duration = Duration::from_millis(20);

/// How many such steps are kept.
pub(super) const STEPS_KEPT: usize = 256;

/// How long the consumer may have nothing to give before an open transaction is committed early.
pub(super) const CAUGHT_UP_WAIT: Duration = Duration::from_millis(5);

/// At most this many bytes of a transaction's records may be on their way to the destination
/// (queued in the producer or unacknowledged) while the pipe takes more from the consumer (see
/// `Pipe::fill`): enough to keep the producer's five requests in flight to every broker full
/// (librdkafka sends one partition's batch of up to 1 MB per request), small enough to flush in
/// ~100 ms on a loaded 2-core machine. Per slot data path, not split over a mirror's slots like
/// the prefetch: a 4 MiB floor at 16 slots cut the 64-partition bench's peak RSS from 781 to 513
/// MiB but its throughput by 8–12 % in every scenario (`bench/results/*-s11-1inst-unackedsplit.md`
/// against `*-s11-1inst.md`, minutes apart).
pub(super) const MAX_UNACKED_BYTES: usize = 16 << 20;

/// librdkafka's default `batch.size`: the most one produce request carries for one partition.
pub(super) const PRODUCER_BATCH_BYTES: usize = 1_000_000;

/// How many bytes of a transaction may be on their way while the pipe takes more (see
/// `MAX_UNACKED_BYTES`): at least a full batch per assigned partition, or the per-partition
/// batches shrink and the producer's requests (one partition each) queue up behind each other
/// at the broker (a flat 16 MiB at 64 partitions made the latency run's p99 worse, 2.0 s →
/// 2.8–11 s); never more than a whole transaction.
pub(super) fn unacked_limit(assigned_partitions: usize, commit_max_bytes: usize) -> usize {
    MAX_UNACKED_BYTES.max(assigned_partitions.saturating_mul(PRODUCER_BATCH_BYTES)).min(commit_max_bytes)
}

/// Whether a partition whose last record read is at `last_read`, with `in_txn` records in the
/// open transaction, is near `fetched_end` (where its last fetch response said it ends; unknown
/// counts as near): no more is fetched and unread than the transaction already holds (at least
/// one: a source transaction's commit marker ends a log and is never handed over). librdkafka
/// fetches ahead, so under a steady load the end is always a fetch response or so beyond the
/// last record read; under a backlog it is far beyond, by much more than a transaction.
pub(super) fn near_fetched_end(last_read: i64, in_txn: usize, fetched_end: Option<i64>) -> bool {
    let in_txn = i64::try_from(in_txn.max(1)).unwrap_or(i64::MAX);
    fetched_end.is_none_or(|end| end - (last_read + 1) <= in_txn)
}

/// Whether a partition's first record after its end was read (after an abort, or by the engine
/// before assigning it) landed where ours can: at the end read, or one later when a marker of
/// ours was written after that read.
pub(super) fn landed_where_ours_can(read_end: i64, landed: i64) -> bool {
    landed == read_end || landed == read_end + 1
}

/// Whether a transaction may end early (see `Pipe::may_end_early`): the previous one stopped
/// taking records at least `spacing` ago, and this one is at least half of `spacing` old.
pub(super) fn early_end_allowed(since_previous_fill_end: Duration, txn_age: Duration, spacing: Duration) -> bool {
    since_previous_fill_end >= spacing && txn_age >= spacing / 2
}

/// How often a transaction that may end early (`Pipe::may_end_early`) compares its partitions'
/// read positions with their fetched ends (one cached lookup per partition with records in it).
pub(super) const END_CHECK_EVERY: Duration = Duration::from_millis(5);

/// How often `fill` looks for a queued command (one `try_recv`): what a pause, stop or fence
/// waits at most before the open transaction commits for it.
pub(super) const COMMAND_CHECK_EVERY: Duration = Duration::from_millis(5);

/// What the pipe does after a transactional call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TxnErrorAction {
    /// Stop: another writer with the same transactional id probably took over.
    Fenced,
    /// Replace the producer (epoch bump), learn the transaction's outcome, rewind, go on.
    NewProducer,
    /// Abort the transaction, rewind, retry after a backoff.
    AbortAndRetry,
}

/// Decides [`TxnErrorAction`] from the kind of a transactional call's failure. A request that
/// timed out may still be on its way to the broker, and librdkafka lacks Kafka's transactions v2
/// (KIP-890, librdkafka issue #5423): a produce of an aborted transaction arriving late would
/// join the next transaction of the same producer epoch, and a late EndTxn could end the wrong
/// one. A new producer with the same transactional id bumps the epoch in its init, and the
/// broker then refuses every request of the old epoch.
pub(super) fn txn_error_action(kind: TxnErrorKind) -> TxnErrorAction {
    match kind {
        TxnErrorKind::Fenced => TxnErrorAction::Fenced,
        TxnErrorKind::TimedOut => TxnErrorAction::NewProducer,
        TxnErrorKind::InvalidState | TxnErrorKind::Other => TxnErrorAction::AbortAndRetry,
    }
}

/// Whether a failed abort is settled by a new producer (whose init aborts whatever the
/// coordinator holds; nothing of an aborted transaction was committed) rather than by stopping
/// the data path: a timeout (see [`txn_error_action`]), or INVALID_TXN_STATE: librdkafka sends
/// the abort's EndTxn once the first AddPartitionsToTxn is *sent*, not answered, so the
/// coordinator can still see an empty transaction and refuse the abort (librdkafka#4849) — a
/// race, not a fence.
pub(super) fn abort_failure_needs_new_producer(kind: TxnErrorKind) -> bool {
    matches!(kind, TxnErrorKind::TimedOut | TxnErrorKind::InvalidState)
}

/// Exponential backoff with jitter for transient data-path failures: 200 ms doubling to 30 s.
pub(super) fn backoff(attempt: u32) -> Duration {
    use crate::domain::backoff::{Backoff, Jitter};
    Backoff::DATA_PATH.delay(attempt, Jitter::from_random_u32(rand::random()))
}

/// How often, at least, a data path reports fetch positions that moved past committed ones
/// (`Pipe::report_positions`); see [`position_report_every`].
pub(super) const POSITION_REPORT_EVERY: Duration = Duration::from_millis(500);

/// [`POSITION_REPORT_EVERY`], lengthened by this much per assigned partition: a report asks the
/// consumer's main thread for a copy of the whole assignment and looks every partition up by
/// topic name, every time, even when nothing moved.
pub(super) const POSITION_REPORT_PER_PARTITION: Duration = Duration::from_millis(4);

/// The interval between two position reports of a data path with `assigned` partitions: 500 ms
/// up to 125 partitions, 2.5 s for a slot's 625 of a 10,000-partition mirror on 16 slots (whose
/// lag the coordinator reads only every 10 s anyway, `lag_refresh_every`). Idle 10,000
/// partitions, 1 instance, 16 slots: with `fetch.wait.max.ms` 2000, the instance's CPU went from
/// 15.4 % to 9.7 % of a core, the data paths' own threads from 1.9 % to 0.8 %.
pub(super) fn position_report_every(assigned: usize) -> Duration {
    POSITION_REPORT_EVERY.max(POSITION_REPORT_PER_PARTITION.saturating_mul(u32::try_from(assigned).unwrap_or(u32::MAX)))
}
