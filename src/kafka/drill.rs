//! The Kafka side of a disaster-recovery drill (`engine::drills` runs it): producing the canary's
//! known sequence on the source (committed transactions around an aborted one), committing the
//! drill's consumer group there, reading the canary back on the destination, and checking that
//! the destination accepts writes after the failover.
//!
//! Every function here blocks (librdkafka's own waits); the engine calls them on the blocking
//! pool. Clients are built from the same property maps as every other client
//! (`client::client_config`), so a secured source works the same way.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::message::{DeliveryResult, Message};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer, ProducerContext};
use rdkafka::{ClientContext, Offset, TopicPartitionList};

use super::client::{ClientKind, client_config, create, create_with_context};
use super::error::{KafkaError, KafkaResult};
use crate::domain::drill::{Produced, record_value};

/// Delivery reports of the drill's producer: (partition, offset, seq, committed) or an error.
#[derive(Default)]
struct Collect {
    delivered: Mutex<Vec<Produced>>,
    errors: Mutex<Vec<String>>,
}

impl ClientContext for Collect {}

impl ProducerContext for Collect {
    type DeliveryOpaque = Box<(u64, bool)>;

    fn delivery(&self, result: &DeliveryResult<'_>, opaque: Self::DeliveryOpaque) {
        let (seq, committed) = *opaque;
        match result {
            Ok(m) => self.delivered.lock().unwrap_or_else(|e| e.into_inner()).push(Produced {
                partition: m.partition(),
                offset: m.offset(),
                seq,
                committed,
            }),
            Err((e, _)) => self.errors.lock().unwrap_or_else(|e| e.into_inner()).push(e.to_string()),
        }
    }
}

fn rd(operation: &'static str, resource: &str, e: rdkafka::error::KafkaError) -> KafkaError {
    KafkaError::Kafka {
        operation,
        resource: resource.to_string(),
        code: e.rdkafka_error_code().map_or_else(
            || super::KafkaCode { code: -1, name: "UNKNOWN".into() },
            |c| super::KafkaCode { code: c as i32, name: format!("{c:?}") },
        ),
        message: super::client::scrub_secrets(&e.to_string()),
    }
}

/// The sequence a drill produces: per partition, `committed` records in two committed
/// transactions with `aborted` records in an aborted transaction between them.
#[derive(Debug, Clone, Copy)]
pub struct Sequence {
    pub partitions: i32,
    pub committed_per_partition: u64,
    pub aborted_per_partition: u64,
}

/// Produces the drill's [`Sequence`] to `topic` on the cluster at `bootstrap`, transactionally
/// with `transactional_id`, and returns every record with its offset and whether its transaction
/// committed. Record values are `{"drill":<drill_id>,"seq":<n>}` (`domain::drill::record_value`).
pub fn produce_sequence(
    bootstrap: &str,
    properties: &BTreeMap<String, String>,
    transactional_id: &str,
    topic: &str,
    drill_id: &str,
    seq: Sequence,
    timeout: Duration,
) -> KafkaResult<Vec<Produced>> {
    const OP: &str = "Produce";
    let mut cfg = client_config(Some(ClientKind::Producer), bootstrap, properties, &[("linger.ms", "5")])?;
    cfg.set("transactional.id", transactional_id)
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("message.timeout.ms", timeout.as_millis().to_string());
    let producer: BaseProducer<Collect> = create_with_context(&cfg, Collect::default(), "drill producer")?;
    producer.init_transactions(timeout).map_err(|e| rd(OP, transactional_id, e))?;
    let half = seq.committed_per_partition / 2;
    let mut next_seq = 0u64;
    // (records per partition, committed): first half, the aborted ones, the second half.
    let batches = [(half, true), (seq.aborted_per_partition, false), (seq.committed_per_partition - half, true)];
    for (count, commit) in batches {
        if count == 0 {
            continue;
        }
        producer.begin_transaction().map_err(|e| rd(OP, topic, e))?;
        for p in 0..seq.partitions {
            for _ in 0..count {
                let value = record_value(drill_id, next_seq);
                let key = format!("{p}-{next_seq}");
                let mut record: BaseRecord<'_, str, [u8], Box<(u64, bool)>> =
                    BaseRecord::with_opaque_to(topic, Box::new((next_seq, commit)))
                        .partition(p)
                        .key(key.as_str())
                        .payload(value.as_slice());
                loop {
                    match producer.send(record) {
                        Ok(()) => break,
                        Err((e, back))
                            if e.rdkafka_error_code() == Some(rdkafka::types::RDKafkaErrorCode::QueueFull) =>
                        {
                            producer.poll(Duration::from_millis(5));
                            record = back;
                        }
                        Err((e, _)) => return Err(rd(OP, topic, e)),
                    }
                }
                next_seq += 1;
            }
        }
        // Every record acknowledged (with its offset) before the transaction ends.
        producer.flush(timeout).map_err(|e| rd(OP, topic, e))?;
        if commit {
            producer.commit_transaction(timeout).map_err(|e| rd("EndTxn", transactional_id, e))?;
        } else {
            producer.abort_transaction(timeout).map_err(|e| rd("EndTxn", transactional_id, e))?;
        }
    }
    let errors = std::mem::take(&mut *producer.context().errors.lock().unwrap_or_else(|e| e.into_inner()));
    if let Some(e) = errors.first() {
        return Err(KafkaError::Kafka {
            operation: OP,
            resource: topic.to_string(),
            code: super::KafkaCode { code: -1, name: "DELIVERY_FAILED".into() },
            message: super::client::scrub_secrets(e),
        });
    }
    let mut out = std::mem::take(&mut *producer.context().delivered.lock().unwrap_or_else(|e| e.into_inner()));
    out.sort_by_key(|p| (p.partition, p.offset));
    Ok(out)
}

/// Commits `offsets` (partition, next offset to consume) of `topic` for consumer group `group`
/// on the cluster at `bootstrap`, as a consumer that stopped there would have.
pub fn commit_group(
    bootstrap: &str,
    properties: &BTreeMap<String, String>,
    group: &str,
    topic: &str,
    offsets: &[(i32, i64)],
    timeout: Duration,
) -> KafkaResult<()> {
    const OP: &str = "OffsetCommit";
    let mut cfg = client_config(Some(ClientKind::Consumer), bootstrap, properties, &[])?;
    cfg.set("group.id", group).set("enable.auto.commit", "false");
    let consumer: BaseConsumer = create(&cfg, "drill group committer")?;
    let mut tpl = TopicPartitionList::new();
    for (p, o) in offsets {
        tpl.add_partition_offset(topic, *p, Offset::Offset(*o)).map_err(|e| rd(OP, topic, e))?;
    }
    let deadline = Instant::now() + timeout;
    loop {
        match consumer.commit(&tpl, CommitMode::Sync) {
            Ok(()) => return Ok(()),
            // The group coordinator may not be known yet right after the client starts.
            Err(e) if Instant::now() < deadline && is_transient(&e) => std::thread::sleep(Duration::from_millis(200)),
            Err(e) => return Err(rd(OP, group, e)),
        }
    }
}

fn is_transient(e: &rdkafka::error::KafkaError) -> bool {
    use rdkafka::types::RDKafkaErrorCode as C;
    matches!(
        e.rdkafka_error_code(),
        Some(
            C::CoordinatorNotAvailable
                | C::NotCoordinator
                | C::CoordinatorLoadInProgress
                | C::WaitingForCoordinator
                | C::BrokerTransportFailure
                | C::AllBrokersDown
                | C::OperationTimedOut
                | C::RequestTimedOut
                | C::NotLeaderForPartition
                | C::UnknownTopicOrPartition
                | C::LeaderNotAvailable
        )
    )
}

/// One record read back: partition, offset, value.
pub type ReadRecord = (i32, i64, Option<Vec<u8>>);

/// Reads `topic` on the cluster at `bootstrap` with `read_committed`: for each `(partition, from,
/// end)`, the records with offsets in `[from, end)` (a partition whose range is empty is not
/// read). With `first_only`, only the first record at or after `from` of each partition.
pub fn read_records(
    bootstrap: &str,
    properties: &BTreeMap<String, String>,
    topic: &str,
    ranges: &[(i32, i64, i64)],
    first_only: bool,
    timeout: Duration,
) -> KafkaResult<Vec<ReadRecord>> {
    const OP: &str = "Fetch";
    let ranges: Vec<(i32, i64, i64)> = ranges.iter().copied().filter(|(_, from, end)| from < end).collect();
    if ranges.is_empty() {
        return Ok(Vec::new());
    }
    let mut cfg =
        client_config(Some(ClientKind::Consumer), bootstrap, properties, &[("fetch.queue.backoff.ms", "10")])?;
    cfg.set("group.id", "kmirror-drill-reader")
        .set("enable.auto.commit", "false")
        .set("isolation.level", "read_committed")
        .set("enable.partition.eof", "true")
        .set("auto.offset.reset", "error");
    let consumer: BaseConsumer<super::client::EofReaderContext> =
        create_with_context(&cfg, super::client::EofReaderContext, "drill reader")?;
    let mut tpl = TopicPartitionList::new();
    for (p, from, _) in &ranges {
        tpl.add_partition_offset(topic, *p, Offset::Offset(*from)).map_err(|e| rd(OP, topic, e))?;
    }
    consumer.assign(&tpl).map_err(|e| rd(OP, topic, e))?;
    let ends: BTreeMap<i32, i64> = ranges.iter().map(|(p, _, end)| (*p, *end)).collect();
    let mut open: BTreeMap<i32, i64> = ends.clone();
    let mut out = Vec::new();
    let deadline = Instant::now() + timeout;
    while !open.is_empty() {
        if Instant::now() >= deadline {
            return Err(KafkaError::Timeout { operation: OP, resource: format!("topic {topic}"), after: timeout });
        }
        match consumer.poll(Duration::from_millis(100)) {
            None => {}
            Some(Ok(m)) => {
                let p = m.partition();
                let Some(end) = open.get(&p).copied() else { continue };
                if m.offset() < end {
                    out.push((p, m.offset(), m.payload().map(<[u8]>::to_vec)));
                }
                if first_only || m.offset() + 1 >= end {
                    open.remove(&p);
                }
            }
            Some(Err(rdkafka::error::KafkaError::PartitionEOF(p))) => {
                // The end of what is there: markers and aborted records past the last record
                // are never returned, so the range ends here.
                open.remove(&p);
            }
            Some(Err(e)) if is_transient(&e) => {}
            Some(Err(e)) => return Err(rd(OP, topic, e)),
        }
    }
    Ok(out)
}

/// Writes one record to each partition of `topic` on the cluster at `bootstrap` (not
/// transactionally, `acks=all`) and waits until every one is acknowledged: the topic accepts
/// writes. Retries until `timeout`.
pub fn probe_writes(
    bootstrap: &str,
    properties: &BTreeMap<String, String>,
    topic: &str,
    partitions: i32,
    timeout: Duration,
) -> KafkaResult<()> {
    const OP: &str = "Produce";
    let mut cfg = client_config(Some(ClientKind::Producer), bootstrap, properties, &[("linger.ms", "0")])?;
    cfg.set("acks", "all").set("enable.idempotence", "true").set("message.timeout.ms", timeout.as_millis().to_string());
    let producer: BaseProducer<Collect> = create_with_context(&cfg, Collect::default(), "drill probe")?;
    for p in 0..partitions {
        let record: BaseRecord<'_, str, [u8], Box<(u64, bool)>> =
            BaseRecord::with_opaque_to(topic, Box::new((u64::MAX, true))).partition(p).payload(b"kmirror-drill-probe");
        producer.send(record).map_err(|(e, _)| rd(OP, topic, e))?;
    }
    producer.flush(timeout).map_err(|e| rd(OP, topic, e))?;
    let errors = std::mem::take(&mut *producer.context().errors.lock().unwrap_or_else(|e| e.into_inner()));
    match errors.first() {
        None => Ok(()),
        Some(e) => Err(KafkaError::Kafka {
            operation: OP,
            resource: topic.to_string(),
            code: super::KafkaCode { code: -1, name: "DELIVERY_FAILED".into() },
            message: super::client::scrub_secrets(e),
        }),
    }
}
