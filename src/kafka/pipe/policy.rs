//! The data path's client settings and the pure rules its loop follows (sizes, waits, when a
//! transaction may end, what a transactional error means); unit-tested in `tests`.

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

/// The destination producer's settings: one place for the first producer and every re-created
/// one (a fence), so they can never drift apart.
///
/// Tuning defaults come first so a user's destination property overrides them (e.g.
/// `compression.type=lz4`, a longer `linger.ms`); what exactly-once needs comes last and cannot be
/// overridden. The user's properties are applied from their own map (`client::client_config`):
/// rdkafka's `config_map()` masks secrets, and a copy made through it authenticated with the mask.
pub(super) fn producer_config(config: &PipeConfig) -> KafkaResult<ClientConfig> {
    let client_id = format!("kmirror-{}-{}-destination", config.mirror, config.slot);
    let transaction_timeout_ms = crate::kafka::TRANSACTION_TIMEOUT.as_millis().to_string();
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
pub(super) fn consumer_config(config: &PipeConfig) -> KafkaResult<ClientConfig> {
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
pub(super) const PREFETCH_BUDGET_KB: usize = 64 << 10;

/// The least one data path may fetch ahead: a few full fetch responses of its partitions.
pub(super) const PREFETCH_MIN_KB: usize = 8 << 10;

/// `queued.max.messages.kbytes` of one of a mirror's `slots` data paths.
pub fn prefetch_kbytes(slots: usize) -> usize {
    (PREFETCH_BUDGET_KB / slots.max(1)).max(PREFETCH_MIN_KB)
}

/// The consumer's `fetch.max.bytes` default (librdkafka's is 50 MiB): see `consumer_config`.
pub(super) const FETCH_MAX_BYTES: usize = 16 << 20;

/// The consumer's `max.partition.fetch.bytes` default (librdkafka's is 1 MiB): see `consumer_config`.
pub(super) const PARTITION_FETCH_MAX_BYTES: usize = 8 << 20;

/// The consumer's `fetch.wait.max.ms` default: see `consumer_config`.
pub(super) const FETCH_WAIT_MAX_MS: u32 = 500;

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

/// Whether a partition's first record after an abort landed where ours can: at the end read
/// after the abort, or one later when the abort marker was written after that read.
pub(super) fn landed_after_abort(read_end: i64, landed: i64) -> bool {
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

/// Whether an error of a transactional request (a produce, EndTxn, the flush before a commit)
/// means the producer must be replaced before the next transaction: the request timed out, so
/// it may still be on its way to the broker. librdkafka lacks Kafka's transactions v2 (KIP-890,
/// librdkafka issue #5423): a produce of an aborted transaction arriving late would join the
/// next transaction of the same producer epoch, and a late EndTxn could end the wrong one. A new
/// producer with the same transactional id bumps the epoch in its init, and the broker then
/// refuses every request of the old epoch.
pub(super) fn needs_new_producer(code: Option<RDKafkaErrorCode>) -> bool {
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
pub(super) fn abort_failure_needs_new_producer(code: Option<RDKafkaErrorCode>) -> bool {
    needs_new_producer(code) || code == Some(RDKafkaErrorCode::InvalidTransactionalState)
}

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

/// Decides [`TxnErrorAction`] from whether librdkafka called the error fatal and its code.
pub(super) fn txn_error_action(fatal: bool, code: Option<RDKafkaErrorCode>) -> TxnErrorAction {
    let fenced = code.is_some_and(|c| crate::kafka::ffi::kind_of(c) == KafkaErrorKind::Fenced);
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
pub(super) fn outcome_consumer_config(config: &PipeConfig) -> KafkaResult<ClientConfig> {
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
pub(super) fn backoff(attempt: u32) -> Duration {
    use crate::domain::backoff::{Backoff, Jitter};
    Backoff::DATA_PATH.delay(attempt, Jitter::from_random_u32(rand::random()))
}
