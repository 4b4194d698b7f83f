//! The data path's transactional writer over librdkafka: one transactional producer per slot
//! (its transactional id is the slot's), its delivery reports, and the destination reads the
//! loop needs besides (end offsets after an abort, the outcome of a commit in doubt).

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::Thread;
use std::time::{Duration, Instant};

use rdkafka::client::ClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Header, Message, OwnedHeaders};
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, PurgeConfig, ThreadedProducer};
use rdkafka::{Offset, TopicPartitionList};

use super::*;
use crate::data_path::{ClientError, Delivered, Key, SendError, SourceRecord, StateWrite, TransactionalWriter};
use crate::kafka::client::{EofReaderContext, create_with_context};
use crate::kafka::ffi::ProducerTopic;
use crate::kafka::produce::{SERVE_STEP, send_with_backpressure, wait_delivered};
use crate::kafka::types::{IsolationLevel, OffsetSpec};

/// The longest a wait for delivery reports parks before it looks again (a safety net: a
/// report's callback unparks it, see `DeliveryLog::wait_reported`).
const MAX_PARK: Duration = Duration::from_millis(20);

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
            Ok(m) => (Ok(Message::offset(m)), m),
            Err((e, m)) => {
                if needs_new_producer(e.rdkafka_error_code()) {
                    self.log.timed_out.store(true, Ordering::Relaxed);
                }
                (Err(e.to_string()), m)
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

/// The data path's transactional producer, with the topic handles it created to give each
/// topic the codec of the source's batches. The handles are declared before the producer so
/// they are dropped before the client they belong to (Rust drops fields in declaration order).
struct Client {
    /// Give each topic the codec of the source's batches: the user's destination properties
    /// choose no codec (then `compression.type` applies to every topic).
    follow_source: bool,
    /// Per destination topic: the handle created with its codec, or `None` when the producer's
    /// default applies (the user chose a codec, or the source's was unknown).
    topics: HashMap<String, Option<ProducerTopic>>,
    producer: ThreadedProducer<PipeProducerContext>,
}

impl std::ops::Deref for Client {
    type Target = ThreadedProducer<PipeProducerContext>;
    fn deref(&self) -> &Self::Target {
        &self.producer
    }
}

impl Client {
    /// A new transactional producer, initialised: its init bumps the producer epoch, fencing any
    /// earlier writer with the same transactional id, and aborts what that one left open.
    fn new(config: &PipeConfig) -> Result<Client, StartError> {
        let producer: ThreadedProducer<PipeProducerContext> = producer_config(config)
            .and_then(|cfg| create_with_context(&cfg, PipeProducerContext { log: DeliveryLog::default() }, "producer"))
            .map_err(StartError::Producer)?;
        crate::kafka::client::connect_before_transactions(
            producer.client(),
            &config.state_topic,
            config.transaction_timeout,
        );
        producer.init_transactions(config.transaction_timeout).map_err(StartError::InitTransactions)?;
        let follow_source = !sets_property(&config.destination_properties, "compression.type");
        Ok(Client { follow_source, topics: HashMap::new(), producer })
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
pub(super) fn codec_name(codec: i32) -> Option<&'static str> {
    match codec {
        0 => Some("none"),
        1 => Some("gzip"),
        2 => Some("snappy"),
        3 => Some("lz4"),
        4 => Some("zstd"),
        _ => None,
    }
}

/// The transactional writer of a slot's data path.
pub(super) struct Destination {
    config: PipeConfig,
    /// Threaded: its own thread serves delivery reports as they arrive. Serving them from the
    /// data path's thread would mean `BaseProducer::poll`, which busy-waited through the last
    /// millisecond of every timeout (rdkafka 0.39 rounded the remaining time down to 0 ms; the
    /// vendored rdkafka rounds up since): 37% of kmirror's CPU under load, measured with perf.
    client: Client,
    admin: KafkaAdmin,
    runtime: tokio::runtime::Handle,
}

impl Destination {
    pub(super) fn new(
        config: &PipeConfig,
        admin: KafkaAdmin,
        runtime: tokio::runtime::Handle,
    ) -> Result<Destination, StartError> {
        Ok(Destination { client: Client::new(config)?, config: config.clone(), admin, runtime })
    }

    fn log(&self) -> &DeliveryLog {
        &self.client.context().log
    }

    /// Drops the records still queued in the producer and serves the delivery reports of those
    /// in flight, so the abort that follows does not wait (up to its timeout) on reports that
    /// nobody polls. Under load the queue can hold thousands of records.
    fn drain_before_abort(&self) {
        self.client.purge(PurgeConfig::default().queue());
        let deadline = Instant::now() + self.config.transaction_timeout;
        while self.client.in_flight_count() > 0 && Instant::now() < deadline {
            std::thread::sleep(SERVE_STEP);
        }
    }
}

impl TransactionalWriter for Destination {
    fn begin(&mut self) -> Result<(), TxnError> {
        self.client.begin_transaction().map_err(|e| txn_error(&e))
    }

    fn settle_codec(&mut self, topic: &str, source_codec: Option<i32>) {
        self.client.settle_codec(topic, source_codec, &self.config.mirror, self.config.slot);
    }

    // rdkafka's `send` hands a refused record back by value (a large `Err`).
    #[allow(clippy::result_large_err)]
    fn send<R: SourceRecord>(&mut self, msg: &R, slot: usize) -> Result<(), SendError> {
        let mut record: BaseRecord<'_, [u8], [u8], usize> =
            BaseRecord::with_opaque_to(msg.topic(), slot).partition(msg.partition());
        if let Some(k) = msg.key() {
            record = record.key(k);
        }
        if let Some(v) = msg.value() {
            record = record.payload(v);
        }
        if let Some(ts) = msg.timestamp() {
            record = record.timestamp(ts);
        }
        let mut headers: Option<OwnedHeaders> = None;
        msg.headers(&mut |key, value| {
            let h = headers.take().unwrap_or_default();
            headers = Some(h.insert(Header { key, value }));
        });
        if let Some(h) = headers {
            record = record.headers(h);
        }
        let producer = &self.client;
        send_with_backpressure(|r| producer.send(r), || std::thread::sleep(SERVE_STEP), record).map_err(|e| {
            if e.rdkafka_error_code() == Some(RDKafkaErrorCode::State) {
                SendError::TransactionRefuses
            } else {
                SendError::Rejected(e.to_string())
            }
        })
    }

    // As `send`.
    #[allow(clippy::result_large_err)]
    fn send_state(&mut self, topic: &str, w: &StateWrite) -> Result<(), SendError> {
        // State records carry usize::MAX: their deliveries are not logged.
        let mut rec: BaseRecord<'_, [u8], [u8], usize> =
            BaseRecord::with_opaque_to(topic, usize::MAX).partition(w.partition).key(&w.key[..]);
        if let Some(v) = &w.value {
            rec = rec.payload(&v[..]);
        }
        let producer = &self.client;
        send_with_backpressure(|r| producer.send(r), || std::thread::sleep(SERVE_STEP), rec)
            .map_err(|e| SendError::Rejected(e.to_string()))
    }

    fn reset_deliveries(&mut self) {
        let log = self.log();
        log.results.lock().unwrap_or_else(|p| p.into_inner()).clear();
        log.reported_bytes.store(0, Ordering::Relaxed);
        log.timed_out.store(false, Ordering::Relaxed);
    }

    fn reported_bytes(&self) -> usize {
        self.log().reported_bytes.load(Ordering::Relaxed)
    }

    fn wait_reported(&self, target: usize, max: Duration) -> bool {
        self.log().wait_reported(target, max)
    }

    fn deliveries(&self) -> Vec<Delivered> {
        self.log().results.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn take_deliveries(&mut self) -> Vec<Delivered> {
        std::mem::take(&mut *self.log().results.lock().unwrap_or_else(|p| p.into_inner()))
    }

    fn delivery_timed_out(&self) -> bool {
        self.log().timed_out.load(Ordering::Relaxed)
    }

    /// Waits until every record sent has its delivery report served (see `crate::kafka::produce`).
    fn flush(&self, sent_bytes: usize, timeout: Duration) -> Result<(), TxnError> {
        let log = self.log();
        wait_delivered(
            || self.client.in_flight_count(),
            // Parked until the last data record's report; then the state records (a few, sent
            // last) and the reports being served are waited for in short sleeps.
            || {
                if !log.wait_reported(sent_bytes, MAX_PARK) {
                    std::thread::sleep(SERVE_STEP);
                }
            },
            timeout,
        )
        .map_err(|e| txn_error(&e))
    }

    fn commit(&mut self, timeout: Duration) -> Result<(), TxnError> {
        self.client.commit_transaction(timeout).map_err(|e| txn_error(&e))
    }

    fn abort(&mut self, timeout: Duration) -> Result<(), TxnError> {
        self.drain_before_abort();
        self.client.abort_transaction(timeout).map_err(|e| txn_error(&e))
    }

    fn purge(&mut self) {
        self.client.purge(PurgeConfig::default().queue().inflight());
    }

    fn fatal_error(&self) -> Option<String> {
        self.client.client().fatal_error().map(|(_, why)| why)
    }

    fn replace(&mut self) -> Result<(), TxnError> {
        let started = Instant::now();
        let client = Client::new(&self.config).map_err(|e| match e {
            StartError::InitTransactions(e) => {
                let e = txn_error(&e);
                TxnError::new(e.kind, format!("re-init transactions: {}", e.message))
            }
            other => TxnError::new(TxnErrorKind::Other, format!("cannot re-create producer: {other}")),
        })?;
        let initialised = Instant::now();
        // Dropping the old producer purges it, waits up to 500 ms for its delivery reports and
        // joins its threads (rdkafka's Drop).
        self.client = client;
        // Part of a stop's fence (one per slot data path, in parallel) and of a recovery: say
        // which part took the time when it is slow.
        let init = initialised - started;
        let closed = initialised.elapsed();
        if init + closed >= data_path::SLOW_TO_LOG {
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

    /// Only topics the producer already writes: asking for one topic by name creates the
    /// client's handle on it with the default configuration, and a topic's codec must be settled
    /// before that (`Client::settle_codec`). A topic the producer has not written yet needs no
    /// refresh: its first record creates the handle and fetches its metadata.
    fn refresh_metadata(&self, topics: &[&str]) {
        let known: Vec<&str> = topics.iter().copied().filter(|t| self.client.topics.contains_key(*t)).collect();
        if known.is_empty() {
            return;
        }
        // One request: rdkafka asks for one topic or for all, and a takeover or a coalesced start
        // spans many topics (one request per topic took ~0.1-0.2 s each on a loaded box).
        let which = if known.len() == 1 { known.first().copied() } else { None };
        if let Err(e) = self.client.client().fetch_metadata(which, Duration::from_secs(10)) {
            tracing::debug!(mirror = %self.config.mirror, topic = ?which, error = %e, "destination metadata refresh");
        }
    }

    fn end_offsets(&self, partitions: &[Key]) -> Result<HashMap<Key, i64>, ClientError> {
        let requests: Vec<(String, i32, OffsetSpec)> =
            partitions.iter().map(|(t, p)| (t.clone(), *p, OffsetSpec::Latest)).collect();
        let ends = self.runtime.block_on(self.admin.list_offsets(&requests, IsolationLevel::ReadUncommitted));
        match ends {
            Ok(v) => Ok(v.into_iter().map(|o| ((o.topic, o.partition), o.offset)).collect()),
            Err(e) => Err(ClientError(e.to_string())),
        }
    }

    /// Reads the record at `offset` with a short-lived `read_committed` reader: committed, it is
    /// visible where it landed; aborted, it is skipped, and the next visible record (if any) is a
    /// later one, or the partition's end comes first.
    fn committed_at(&self, topic: &str, partition: i32, offset: i64, timeout: Duration) -> Result<bool, ClientError> {
        let consumer: BaseConsumer<EofReaderContext> = outcome_consumer_config(&self.config)
            .and_then(|cfg| create_with_context(&cfg, EofReaderContext, "destination outcome reader"))
            .map_err(|e| ClientError(OutcomeError::Reader(e).to_string()))?;
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(topic, partition, Offset::Offset(offset))
            .map_err(|e| ClientError(OutcomeError::Position(e).to_string()))?;
        consumer.assign(&tpl).map_err(|e| ClientError(OutcomeError::Assign(e).to_string()))?;
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            match consumer.poll(Duration::from_millis(200)) {
                Some(Ok(m)) if Message::topic(&m) == topic && Message::partition(&m) == partition => {
                    return Ok(Message::offset(&m) == offset);
                }
                Some(Ok(_)) | None => {}
                Some(Err(RdError::PartitionEOF(_))) => return Ok(false),
                Some(Err(e)) => tracing::debug!(mirror = %self.config.mirror, error = %e, "outcome reader"),
            }
        }
        Err(ClientError(OutcomeError::NoAnswer { topic: topic.to_string(), partition, offset }.to_string()))
    }

    fn first_committed_from(&self, from: &[(Key, i64)], timeout: Duration) -> Result<HashMap<Key, i64>, ClientError> {
        first_committed_from(&self.config, from, timeout)
    }
}

/// For each destination partition, the offset of the first record at or after the given offset
/// that a `read_committed` reader sees (markers and aborted records skipped); partitions with none
/// are absent. Waits up to `timeout` for the partitions of each topic. Read with the data path's
/// destination settings (`config`).
pub fn first_committed_from(
    config: &PipeConfig,
    from: &[(Key, i64)],
    timeout: Duration,
) -> Result<HashMap<Key, i64>, ClientError> {
    let mut found = HashMap::new();
    let mut by_topic: std::collections::BTreeMap<&str, Vec<(i32, i64)>> = std::collections::BTreeMap::new();
    for ((topic, partition), offset) in from {
        by_topic.entry(topic.as_str()).or_default().push((*partition, *offset));
    }
    // One reader per topic: an end-of-partition event names the partition but not its topic,
    // and a fresh reader cannot hand over an event of an earlier topic's assignment. Each
    // topic has `timeout`: a slot holding partitions of many topics still gets through.
    for (topic, parts) in by_topic {
        let deadline = Instant::now() + timeout;
        let consumer: BaseConsumer<EofReaderContext> = outcome_consumer_config(config)
            .and_then(|cfg| create_with_context(&cfg, EofReaderContext, "destination outcome reader"))
            .map_err(|e| ClientError(OutcomeError::Reader(e).to_string()))?;
        let mut tpl = TopicPartitionList::new();
        for (partition, offset) in &parts {
            tpl.add_partition_offset(topic, *partition, Offset::Offset(*offset))
                .map_err(|e| ClientError(OutcomeError::Position(e).to_string()))?;
        }
        consumer.assign(&tpl).map_err(|e| ClientError(OutcomeError::Assign(e).to_string()))?;
        let mut open: std::collections::BTreeMap<i32, i64> = parts.iter().copied().collect();
        while let Some((&partition, &offset)) = open.iter().next() {
            if Instant::now() >= deadline {
                return Err(ClientError(
                    OutcomeError::NoAnswer { topic: topic.to_string(), partition, offset }.to_string(),
                ));
            }
            match consumer.poll(Duration::from_millis(200)) {
                Some(Ok(m)) if Message::topic(&m) == topic => {
                    if open.remove(&Message::partition(&m)).is_some() {
                        found.insert((topic.to_string(), Message::partition(&m)), Message::offset(&m));
                    }
                }
                Some(Err(RdError::PartitionEOF(p))) => {
                    open.remove(&p);
                }
                Some(Ok(_)) | None => {}
                Some(Err(e)) => {
                    tracing::debug!(mirror = %config.mirror, error = %e, "committed-records reader")
                }
            }
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

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
