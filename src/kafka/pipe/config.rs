//! The data path's client settings (one place for the first client and every re-created one,
//! so they never drift apart) and what librdkafka's error codes mean to its loop.

use super::*;
use crate::data_path::FetchError;

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

/// The consumer's `fetch.wait.max.ms` default: see `consumer_config`. 2000, not 500: librdkafka
/// keeps state for every partition of every topic a consumer knows (assigned or not), so each of
/// the 16 slot consumers of an idle 10,000-partition mirror holds all 10,000 partitions, and its
/// broker thread walks all of them (`rd_kafka_toppar_fetch_decide`) on every wake-up, which an
/// idle long-poll fetch returning causes. Idle 10,000 partitions, 1 instance, 16 slots: the
/// consumers' broker threads 6.9 -> 2.8 % of a core (5000: 2.0 %), perf and /proc per thread,
/// same process and session. Data that arrives is still answered at once (`fetch.min.bytes` 1);
/// what waits up to this long is a partition assigned, or rewound, while an idle fetch is out.
pub(super) const FETCH_WAIT_MAX_MS: u32 = 2000;

/// Whether an error of a transactional request (a produce, EndTxn, the flush before a commit)
/// means the request timed out, so it may still be on its way to the broker: the producer must
/// be replaced before the next transaction (see `data_path::policy::txn_error_action`).
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

/// The kind of a transactional call's failure, from whether librdkafka called it fatal and its
/// code (what the loop decides on, see `data_path::policy`).
pub(super) fn txn_error_kind(fatal: bool, code: Option<RDKafkaErrorCode>) -> TxnErrorKind {
    if fatal || code.is_some_and(|c| crate::kafka::ffi::kind_of(c) == KafkaErrorKind::Fenced) {
        TxnErrorKind::Fenced
    } else if needs_new_producer(code) {
        TxnErrorKind::TimedOut
    } else if code == Some(RDKafkaErrorCode::InvalidTransactionalState) {
        TxnErrorKind::InvalidState
    } else {
        TxnErrorKind::Other
    }
}

/// A failed transactional call of the producer, classified.
pub(super) fn txn_error(e: &RdError) -> TxnError {
    let fatal = matches!(e, RdError::Transaction(te) if te.is_fatal());
    TxnError::new(txn_error_kind(fatal, e.rdkafka_error_code()), e.to_string())
}

/// What a consumer error means to the loop. rdkafka 0.39 drops the partition of a consumer
/// error, so an error that may mean a position outside the log makes the loop check them all.
pub(super) fn fetch_error(e: &RdError) -> FetchError {
    let code = e.rdkafka_error_code();
    let text = e.to_string();
    if let Some(what) = crate::kafka::admin::refusal_kind(code, &text) {
        return FetchError::Refused { what: what.to_string(), message: crate::kafka::client::scrub_secrets(&text) };
    }
    match code {
        Some(
            RDKafkaErrorCode::OffsetOutOfRange
            | RDKafkaErrorCode::AutoOffsetReset
            | RDKafkaErrorCode::UnknownTopicOrPartition
            | RDKafkaErrorCode::UnknownTopic,
        ) => FetchError::OutOfLog(text),
        _ => FetchError::Transient(text),
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
