//! I/O for the `__mirror_state` topic: create it, read it to its end, append records.
//!
//! The record format lives in `crate::store`; this module only moves bytes. Reads use
//! `read_committed`, so records of an aborted or still-open transaction (a data-path transaction
//! that crashed mid-way) are never seen.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::message::Message;
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::{Offset, TopicPartitionList};

use super::client::{ClientKind, client_config, create};
use super::ffi::kind_of;
use super::produce::{SERVE_STEP, send_with_backpressure, wait_delivered};
use super::types::StateWrite;
use super::types::{IsolationLevel, OffsetSpec};
use super::{KafkaAdmin, KafkaError, KafkaErrorKind, KafkaResult};

/// One record read from the state topic.
#[derive(Debug, Clone)]
pub struct LogRecord {
    pub partition: i32,
    pub offset: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
}

/// Creates the compacted state topic if it does not exist; returns its partition count.
pub async fn ensure_state_topic(admin: &KafkaAdmin, topic: &str, partitions: i32) -> KafkaResult<i32> {
    match admin.describe_topic(topic).await {
        Ok(d) => return Ok(d.partitions.len() as i32),
        Err(e) if e.is(crate::kafka::KafkaErrorKind::UnknownTopicOrPartition) => {}
        Err(e) => return Err(e),
    }
    let configs = vec![
        ("cleanup.policy".to_string(), "compact".to_string()),
        // Tombstones must survive long enough for every reader to see a deletion.
        ("delete.retention.ms".to_string(), "86400000".to_string()),
    ];
    match admin.create_topic(topic, partitions, -1, &configs).await {
        Ok(()) => {}
        Err(e) if e.is(crate::kafka::KafkaErrorKind::TopicAlreadyExists) => {}
        Err(e) => return Err(e),
    }
    // Wait until the new topic is visible with leaders, so the first read does not race it.
    let start = Instant::now();
    loop {
        if let Ok(d) = admin.describe_topic(topic).await
            && d.partitions.len() as i32 == partitions
            && d.partitions.iter().all(|p| p.leader.is_some())
        {
            return Ok(partitions);
        }
        if start.elapsed() > admin.timeout() {
            return Err(KafkaError::Timeout {
                operation: "CreateTopics",
                resource: topic.to_string(),
                after: admin.timeout(),
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Reads every committed record of `topic` (of its partitions in `only`, when given) from the
/// beginning up to its last stable offset. A partition in `only` that the topic does not have is
/// left out.
pub async fn read_to_end(
    admin: &KafkaAdmin,
    bootstrap: &str,
    properties: &BTreeMap<String, String>,
    topic: &str,
    only: Option<&[i32]>,
    timeout: Duration,
) -> KafkaResult<Vec<LogRecord>> {
    let d = admin.describe_topic(topic).await?;
    let requests: Vec<(String, i32, OffsetSpec)> = d
        .partitions
        .iter()
        .filter(|p| only.is_none_or(|only| only.contains(&p.partition)))
        .map(|p| (topic.to_string(), p.partition, OffsetSpec::Latest))
        .collect();
    if requests.is_empty() {
        return Ok(Vec::new());
    }
    let ends = admin.list_offsets(&requests, IsolationLevel::ReadCommitted).await?;
    let starts: Vec<(String, i32, OffsetSpec)> =
        requests.iter().map(|(t, p, _)| (t.clone(), *p, OffsetSpec::Earliest)).collect();
    let starts = admin.list_offsets(&starts, IsolationLevel::ReadCommitted).await?;
    // Each partition is read from the log start just listed, not from `Offset::Beginning`: a
    // logical offset makes the consumer look it up first, and its first records came 500 ms
    // later than from an offset given (measured on the rig, librdkafka 2.x).
    let mut from = Vec::new();
    let mut remaining: HashMap<i32, i64> = HashMap::new();
    let log_starts: HashMap<i32, i64> = starts.iter().map(|s| (s.partition, s.offset)).collect();
    for e in &ends {
        let start = log_starts.get(&e.partition).copied().unwrap_or(0);
        if e.offset > start {
            remaining.insert(e.partition, e.offset);
            from.push((e.partition, Offset::Offset(start)));
        }
    }
    if remaining.is_empty() {
        return Ok(Vec::new());
    }
    let bootstrap = bootstrap.to_string();
    let properties = properties.clone();
    let topic = topic.to_string();
    tokio::task::spawn_blocking(move || read_blocking(&bootstrap, &properties, &topic, &from, remaining, timeout))
        .await
        .map_err(|e| KafkaError::Task { operation: "read state", message: e.to_string() })?
}

fn read_blocking(
    bootstrap: &str,
    properties: &BTreeMap<String, String>,
    topic: &str,
    from: &[(i32, Offset)],
    remaining: HashMap<i32, i64>,
    timeout: Duration,
) -> KafkaResult<Vec<LogRecord>> {
    let mut out = Vec::new();
    super::scan::read_committed_range(bootstrap, properties, topic, from, remaining, timeout, "read state", |m| {
        out.push(LogRecord {
            partition: m.partition(),
            offset: m.offset(),
            key: m.key().map(<[u8]>::to_vec),
            value: m.payload().map(<[u8]>::to_vec),
        })
    })?;
    Ok(out)
}

/// What the tail read since its last batch, and where it stands.
#[derive(Debug, Default)]
pub struct TailBatch {
    /// Committed records, in log order per partition.
    pub records: Vec<LogRecord>,
    /// Per state partition, the next offset the tail will read (past trailing transaction
    /// markers and aborted records too): a takeover waits until it reaches the last stable offset.
    pub positions: Vec<(i32, i64)>,
}

impl TailBatch {
    /// Adds `later`, read after this batch: its records after these, its positions last (a
    /// partition's latest position is its last entry).
    pub fn append(&mut self, later: TailBatch) {
        self.records.extend(later.records);
        self.positions.extend(later.positions);
    }
}

/// Follows every partition of the state topic (`read_committed`, outside any group) and hands
/// what it reads to `batches`: how every instance sees what the others write (DESIGN.md
/// section 10). A thread of its own; ends when [`StateTail::stop`] is called or the receiver is
/// dropped.
#[derive(Debug)]
pub struct StateTail {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    join: Option<std::thread::JoinHandle<()>>,
}

/// How long the tail gathers records before handing a batch over.
const TAIL_BATCH_WINDOW: Duration = Duration::from_millis(50);

impl StateTail {
    /// Starts the tail at `start` (partition, next offset; `None` = its beginning).
    pub fn spawn(
        bootstrap: &str,
        properties: &BTreeMap<String, String>,
        topic: &str,
        start: &[(i32, Option<i64>)],
        batches: tokio::sync::mpsc::UnboundedSender<TailBatch>,
    ) -> KafkaResult<StateTail> {
        const OP: &str = "tail state";
        let mut cfg = client_config(Some(ClientKind::Consumer), bootstrap, properties, &[])?;
        cfg.set("group.id", "kmirror-state-tail")
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("isolation.level", "read_committed")
            .set("auto.offset.reset", "earliest")
            .set("fetch.wait.max.ms", "100")
            .set("fetch.queue.backoff.ms", "10");
        let consumer: BaseConsumer = create(&cfg, "state tail")?;
        let mut tpl = TopicPartitionList::new();
        for (p, offset) in start {
            // A partition to read from its beginning starts at offset 0, not `Offset::Beginning`:
            // a logical offset is looked up before the first fetch, and the first records came
            // about 500 ms later (a takeover waits for the tail to reach the end of its slot, so
            // that was 500 ms on a fresh instance's first start). A log that no longer starts at
            // 0 answers out of range, and `auto.offset.reset` moves the tail to its start.
            let o = Offset::Offset(offset.unwrap_or(0));
            tpl.add_partition_offset(topic, *p, o)
                .map_err(|e| KafkaError::InvalidArgument { operation: OP, message: e.to_string() })?;
        }
        consumer.assign(&tpl).map_err(|e| KafkaError::InvalidArgument { operation: OP, message: e.to_string() })?;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = std::sync::Arc::clone(&stop);
        let topic = topic.to_string();
        let join = std::thread::Builder::new()
            .name("state-tail".into())
            .spawn(move || tail_loop(&consumer, &topic, &flag, &batches))
            .map_err(|e| KafkaError::Task { operation: OP, message: e.to_string() })?;
        Ok(StateTail { stop, join: Some(join) })
    }

    /// Stops the tail and waits for its thread. Blocking.
    pub fn stop(mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(j) = self.join.take() {
            let _ = j.join();
        }
    }
}

impl Drop for StateTail {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

fn tail_loop(
    consumer: &BaseConsumer,
    topic: &str,
    stop: &std::sync::atomic::AtomicBool,
    batches: &tokio::sync::mpsc::UnboundedSender<TailBatch>,
) {
    let mut last_positions: HashMap<i32, i64> = HashMap::new();
    while !stop.load(std::sync::atomic::Ordering::SeqCst) {
        let mut batch = TailBatch::default();
        let window = Instant::now() + TAIL_BATCH_WINDOW;
        while Instant::now() < window && batch.records.len() < 10_000 {
            match consumer.poll(Duration::from_millis(20)) {
                None => {
                    if batch.records.is_empty() {
                        break;
                    }
                }
                Some(Ok(m)) => batch.records.push(LogRecord {
                    partition: m.partition(),
                    offset: m.offset(),
                    key: m.key().map(<[u8]>::to_vec),
                    value: m.payload().map(<[u8]>::to_vec),
                }),
                Some(Err(e)) => tracing::debug!(error = %e, "state tail: transient consumer error"),
            }
        }
        if let Ok(pos) = consumer.position() {
            for el in pos.elements_for_topic(topic) {
                if let Offset::Offset(o) = el.offset()
                    && last_positions.insert(el.partition(), o) != Some(o)
                {
                    batch.positions.push((el.partition(), o));
                }
            }
        }
        if (!batch.records.is_empty() || !batch.positions.is_empty()) && batches.send(batch).is_err() {
            return;
        }
    }
}

/// Appends state records in transactions of its own (lifecycle transitions, mirror definitions,
/// operations). A second kmirror instance with the same transactional id fences this writer.
pub struct StateWriter {
    // Threaded: its own thread serves delivery reports, which transactional calls (abort in
    // particular) wait for.
    producer: ThreadedProducer<DefaultProducerContext>,
    topic: String,
    timeout: Duration,
}

impl std::fmt::Debug for StateWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateWriter").field("topic", &self.topic).finish_non_exhaustive()
    }
}

impl StateWriter {
    /// Creates the writer and fences any earlier one with the same transactional id. Blocking.
    pub fn new(
        bootstrap: &str,
        properties: &BTreeMap<String, String>,
        transactional_id: &str,
        topic: &str,
        timeout: Duration,
    ) -> KafkaResult<StateWriter> {
        let mut cfg = client_config(Some(ClientKind::Producer), bootstrap, properties, &[])?;
        // Its transactions are single writes; a short timeout bounds how long one left open by a
        // crashed instance holds back the last stable offset other instances read up to (a
        // takeover waits for that).
        cfg.set("transactional.id", transactional_id)
            .set("enable.idempotence", "true")
            .set("linger.ms", "0")
            .set("transaction.timeout.ms", "15000");
        let producer: ThreadedProducer<DefaultProducerContext> = create(&cfg, "state writer")?;
        super::client::connect_before_transactions(producer.client(), topic, timeout);
        producer.init_transactions(timeout).map_err(|e| KafkaError::Client(format!("init transactions: {e}")))?;
        Ok(StateWriter { producer, topic: topic.to_string(), timeout })
    }

    /// Writes `records` atomically. Blocking: call from a blocking context.
    ///
    /// A failure that is not fatal (a timeout while the destination comes back, a coordinator
    /// that moved) is tried once more after the failed transaction is aborted: state records are
    /// keyed latest-value records, so writing one twice is harmless, and the callers are the
    /// lifecycle calls an operator is waiting for (a failover in particular).
    pub fn write(&self, records: &[StateWrite]) -> Result<(), StateWriteError> {
        match self.write_once(records) {
            Err(StateWriteError::Unavailable(first)) => {
                tracing::warn!(topic = %self.topic, error = %first, "state write failed; trying once more");
                self.write_once(records)
            }
            r => r,
        }
    }

    /// [`classify`] with this writer's fatal error, if it has one.
    fn classify(&self, what: &str, e: &rdkafka::error::KafkaError) -> StateWriteError {
        classify(what, e, self.producer.client().fatal_error().map(|(code, _)| code))
    }

    // rdkafka's `send` hands a refused record back by value (a large `Err`).
    #[allow(clippy::result_large_err)]
    fn write_once(&self, records: &[StateWrite]) -> Result<(), StateWriteError> {
        use StateWriteError::Unavailable;
        if records.is_empty() {
            return Ok(());
        }
        if let Err(e) = self.producer.begin_transaction() {
            // A transaction that failed earlier (destination outage) must be aborted before the
            // next one can begin; a fatal error (fenced by a newer instance) ends this writer.
            // An abort that timed out earlier is still in progress: calling abort again resumes
            // it (librdkafka's rule for timed-out transactional calls).
            if is_fatal(&e) {
                return Err(self.classify("begin transaction", &e));
            }
            self.producer.abort_transaction(self.timeout).map_err(|e| self.classify("abort failed transaction", &e))?;
            self.producer.begin_transaction().map_err(|e| self.classify("begin transaction", &e))?;
        }
        for w in records {
            let mut rec: BaseRecord<'_, [u8], [u8]> =
                BaseRecord::to(&self.topic).partition(w.partition).key(&w.key[..]);
            if let Some(v) = &w.value {
                rec = rec.payload(&v[..]);
            }
            // The producer's own thread serves delivery reports: waiting is enough.
            let producer = &self.producer;
            if let Err(e) = send_with_backpressure(|r| producer.send(r), || std::thread::sleep(SERVE_STEP), rec) {
                let _ = self.producer.abort_transaction(self.timeout);
                return Err(self.classify("cannot write state record", &e));
            }
        }
        // Waited for here, so the flush inside rdkafka's commit_transaction (100 ms polling
        // steps) finds nothing to wait for.
        let producer = &self.producer;
        if let Err(e) = wait_delivered(|| producer.in_flight_count(), || std::thread::sleep(SERVE_STEP), self.timeout) {
            let _ = self.producer.abort_transaction(self.timeout);
            return Err(Unavailable(format!("flush state records: {e}")));
        }
        if let Err(e) = self.producer.commit_transaction(self.timeout) {
            let _ = self.producer.abort_transaction(self.timeout);
            return Err(self.classify("commit state records", &e));
        }
        Ok(())
    }
}

/// Why a state write failed, as the engine must react to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateWriteError {
    /// Another instance with the same transactional id took over: this writer is done for good.
    Fenced(String),
    /// The producer hit another fatal error: this writer cannot write again.
    Fatal(String),
    /// The destination did not take the records (outage, timeout): a later write may succeed.
    Unavailable(String),
}

impl std::fmt::Display for StateWriteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StateWriteError::Fenced(e) | StateWriteError::Fatal(e) | StateWriteError::Unavailable(e) => f.write_str(e),
        }
    }
}

fn is_fatal(e: &rdkafka::error::KafkaError) -> bool {
    match e {
        rdkafka::error::KafkaError::Transaction(te) => te.is_fatal(),
        other => {
            other.rdkafka_error_code().is_some_and(|c| kind_of(c) == KafkaErrorKind::Fenced)
                || other.rdkafka_error_code() == Some(RDKafkaErrorCode::Fatal)
        }
    }
}

/// Whether `e` means a newer writer with the same transactional id took over. `fatal_cause` is
/// the code of the producer's fatal error, if it has one: after a fence, librdkafka refuses
/// every further call with a bare `_FATAL` and keeps the fence's own code there.
fn is_fence(e: &rdkafka::error::KafkaError, fatal_cause: Option<RDKafkaErrorCode>) -> bool {
    let fence = |c: Option<RDKafkaErrorCode>| c.is_some_and(|c| kind_of(c) == KafkaErrorKind::Fenced);
    fence(e.rdkafka_error_code()) || (is_fatal(e) && fence(fatal_cause))
}

/// What a failed write means to the engine, from the rdkafka error and the producer's fatal
/// error code (see [`is_fence`]); classified by codes only, never by the error's text.
fn classify(what: &str, e: &rdkafka::error::KafkaError, fatal_cause: Option<RDKafkaErrorCode>) -> StateWriteError {
    let text = format!("{what}: {e}");
    if is_fence(e, fatal_cause) {
        StateWriteError::Fenced(text)
    } else if is_fatal(e) {
        StateWriteError::Fatal(text)
    } else {
        StateWriteError::Unavailable(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rdkafka::error::KafkaError as Rd;

    #[test]
    fn a_fence_ends_the_writer_and_a_timeout_is_retried() {
        let fenced = classify("commit", &Rd::MessageProduction(RDKafkaErrorCode::ProducerFenced), None);
        assert!(matches!(fenced, StateWriteError::Fenced(_)), "{fenced:?}");
        let epoch = classify("send", &Rd::MessageProduction(RDKafkaErrorCode::InvalidProducerEpoch), None);
        assert!(matches!(epoch, StateWriteError::Fenced(_)), "{epoch:?}");
        let timeout = classify("flush", &Rd::Flush(RDKafkaErrorCode::OperationTimedOut), None);
        assert!(matches!(timeout, StateWriteError::Unavailable(_)), "{timeout:?}");
        assert!(timeout.to_string().starts_with("flush: "), "{timeout}");
        let down = classify("send", &Rd::MessageProduction(RDKafkaErrorCode::AllBrokersDown), None);
        assert!(matches!(down, StateWriteError::Unavailable(_)), "{down:?}");
    }

    /// librdkafka's own fence code (what a fatal transactional error carries once the broker
    /// said PRODUCER_FENCED or INVALID_PRODUCER_EPOCH), and a bare `_FATAL` whose producer was
    /// fenced, end the writer as fenced; another fatal error leaves it to be replaced.
    #[test]
    fn a_fence_is_told_by_its_code_not_its_text() {
        let local = classify("send", &Rd::MessageProduction(RDKafkaErrorCode::Fenced), None);
        assert!(matches!(local, StateWriteError::Fenced(_)), "{local:?}");
        let after_fence = Rd::MessageProduction(RDKafkaErrorCode::Fatal);
        let r = classify("send", &after_fence, Some(RDKafkaErrorCode::Fenced));
        assert!(matches!(r, StateWriteError::Fenced(_)), "{r:?}");
        let r = classify("send", &after_fence, Some(RDKafkaErrorCode::ProducerFenced));
        assert!(matches!(r, StateWriteError::Fenced(_)), "{r:?}");
        let r = classify("send", &after_fence, Some(RDKafkaErrorCode::TransactionalIdAuthorizationFailed));
        assert!(matches!(r, StateWriteError::Fatal(_)), "{r:?}");
        let r = classify("send", &after_fence, None);
        assert!(matches!(r, StateWriteError::Fatal(_)), "{r:?}");
        // A fatal cause alone does not make a retryable error a fence.
        let r = classify("flush", &Rd::Flush(RDKafkaErrorCode::OperationTimedOut), Some(RDKafkaErrorCode::Fenced));
        assert!(matches!(r, StateWriteError::Unavailable(_)), "{r:?}");
    }
}
