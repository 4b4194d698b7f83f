//! The quarantine copy (issue 18, DESIGN.md section 5): before a resync deletes a destination
//! partition's divergent records, they are copied to `<topic>.kmirror-diverged` on the same
//! cluster with their key, value, headers and timestamp, plus headers naming where they came
//! from (`domain::quarantine`).
//!
//! - Read `read_committed`: aborted records and transaction markers are not records.
//! - Idempotent: a retry after a crash or a failed attempt must not copy a record twice. The
//!   copy is transactional under one transactional id per quarantine topic (initialising it
//!   aborts what a crashed attempt left open) and committed in chunks; what committed chunks
//!   already copied is found by the origin headers and skipped.
//! - The quarantine topic's records are read first: one kmirror did not put there (no origin
//!   headers, or copied from another topic) refuses the copy before anything is written.
//!
//! The caller deletes the divergent records only after this returned `Ok`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use rdkafka::Offset;
use rdkafka::message::{BorrowedMessage, Header, Headers, Message, OwnedHeaders};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};

use super::admin::rdkafka_error;
use super::client::{ClientKind, client_config, create};
use super::produce::{SERVE_STEP, send_with_backpressure, wait_delivered};
use super::scan::read_committed_range;
use super::{KafkaError, KafkaResult};
use crate::domain::quarantine::{Existing, Origin, QuarantinedPartition, classify, origin_headers, target_partition};

/// A transaction is committed after this many copied records or bytes, whichever comes first:
/// a large divergent tail must not outlive the transaction timeout, and a retry after a failure
/// resumes after the last committed chunk.
const CHUNK_RECORDS: usize = 10_000;
const CHUNK_BYTES: usize = 16 << 20;

/// What to copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuarantineJob {
    /// The destination topic whose records diverged, and its topic ID.
    pub topic: String,
    pub topic_id: String,
    /// Per partition, the divergent offsets `[from, end)` (end: the last stable offset).
    pub ranges: Vec<(i32, i64, i64)>,
    /// The quarantine topic, its partition count (0: it does not exist; only a dry run may ask
    /// then) and the end offset (high watermark) of each of its partitions.
    pub target: String,
    pub target_partitions: i32,
    pub target_ends: Vec<(i32, i64)>,
}

/// Why a quarantine copy did not happen.
#[derive(Debug, Clone, thiserror::Error)]
pub enum QuarantineError {
    #[error(transparent)]
    Kafka(#[from] KafkaError),
    /// The quarantine topic holds a record kmirror did not copy there from this topic.
    #[error(
        "{target} holds a record kmirror did not quarantine from {topic:?} (its partition {partition}, offset {offset}): {why}"
    )]
    Foreign { target: String, topic: String, partition: i32, offset: i64, why: String },
}

/// Copies `job`'s divergent records to its quarantine topic (with `dry_run`: only counts what
/// it would copy, after the same foreign-data check). Per partition of `job.ranges`: records
/// copied (or to copy), records an earlier attempt already copied, and their offsets. Blocking.
pub fn copy(
    bootstrap: &str,
    properties: &BTreeMap<String, String>,
    job: &QuarantineJob,
    dry_run: bool,
    timeout: Duration,
) -> Result<BTreeMap<i32, QuarantinedPartition>, QuarantineError> {
    let producer = if dry_run { None } else { Some(Copier::new(bootstrap, properties, job, timeout)?) };
    let done = already_copied(bootstrap, properties, job, timeout)?;
    let mut out: BTreeMap<i32, QuarantinedPartition> = job
        .ranges
        .iter()
        .map(|(p, _, _)| {
            (*p, QuarantinedPartition { partition: *p, records: 0, already_quarantined: 0, offsets: None })
        })
        .collect();
    let ends: HashMap<i32, i64> =
        job.ranges.iter().filter(|(_, from, end)| from < end).map(|(p, _, end)| (*p, *end)).collect();
    let starts: Vec<(i32, Offset)> = job.ranges.iter().map(|(p, from, _)| (*p, Offset::Offset(*from))).collect();
    let mut copier = producer;
    let mut failed: Option<KafkaError> = None;
    read_committed_range(bootstrap, properties, &job.topic, &starts, ends.clone(), timeout, "quarantine read", |m| {
        let (p, offset) = (m.partition(), m.offset());
        // A partition already read to its end may still hand over prefetched records.
        if ends.get(&p).is_none_or(|end| offset >= *end) || failed.is_some() {
            return;
        }
        let Some(q) = out.get_mut(&p) else { return };
        q.offsets = Some(q.offsets.map_or((offset, offset), |(a, b)| (a.min(offset), b.max(offset))));
        if done.contains(&(p, offset)) {
            q.already_quarantined += 1;
            return;
        }
        if let Some(c) = copier.as_mut()
            && let Err(e) = c.send(job, m)
        {
            failed = Some(e);
            return;
        }
        q.records += 1;
    })?;
    if let Some(mut c) = copier {
        if let Some(e) = failed {
            c.abort();
            return Err(e.into());
        }
        c.commit()?;
    }
    Ok(out)
}

/// The `(partition, offset)` of `job.topic`'s records already in the quarantine topic (same
/// topic ID: a recreated topic's offsets start over); an error when it holds foreign data.
fn already_copied(
    bootstrap: &str,
    properties: &BTreeMap<String, String>,
    job: &QuarantineJob,
    timeout: Duration,
) -> Result<HashSet<(i32, i64)>, QuarantineError> {
    let mut done = HashSet::new();
    if job.target_partitions <= 0 {
        return Ok(done);
    }
    let remaining: HashMap<i32, i64> = job.target_ends.iter().filter(|(_, end)| *end > 0).copied().collect();
    let starts: Vec<(i32, Offset)> = remaining.keys().map(|p| (*p, Offset::Beginning)).collect();
    let mut foreign = None;
    read_committed_range(bootstrap, properties, &job.target, &starts, remaining, timeout, "quarantine check", |m| {
        match classify(&job.topic, headers_of(m)) {
            Existing::Ours(Origin { topic_id, partition, offset, .. }) => {
                if topic_id == job.topic_id {
                    done.insert((partition, offset));
                }
            }
            Existing::Foreign(why) => {
                foreign.get_or_insert(QuarantineError::Foreign {
                    target: job.target.clone(),
                    topic: job.topic.clone(),
                    partition: m.partition(),
                    offset: m.offset(),
                    why,
                });
            }
        }
    })?;
    match foreign {
        Some(e) => Err(e),
        None => Ok(done),
    }
}

fn headers_of<'a>(m: &'a BorrowedMessage<'_>) -> Vec<(&'a str, Option<&'a [u8]>)> {
    m.headers().map(|h| h.iter().map(|h| (h.key, h.value)).collect()).unwrap_or_default()
}

/// The transactional producer of one quarantine copy.
struct Copier {
    producer: ThreadedProducer<DefaultProducerContext>,
    target: String,
    target_partitions: i32,
    timeout: Duration,
    in_chunk: (usize, usize),
}

impl Copier {
    fn new(
        bootstrap: &str,
        properties: &BTreeMap<String, String>,
        job: &QuarantineJob,
        timeout: Duration,
    ) -> KafkaResult<Copier> {
        let mut cfg = client_config(Some(ClientKind::Producer), bootstrap, properties, &[])?;
        // One id per quarantine topic: initialising it fences and aborts a crashed attempt's
        // open transaction, so the check that follows sees only committed copies.
        cfg.set("transactional.id", format!("kmirror-quarantine-{}", job.target))
            .set("enable.idempotence", "true")
            .set("transaction.timeout.ms", super::TRANSACTION_TIMEOUT.as_millis().to_string());
        let producer: ThreadedProducer<DefaultProducerContext> = create(&cfg, "quarantine producer")?;
        let rd = |op, e| rdkafka_error(op, &job.target, e);
        producer.init_transactions(timeout).map_err(|e| rd("init quarantine transactions", e))?;
        producer.begin_transaction().map_err(|e| rd("begin quarantine transaction", e))?;
        Ok(Copier {
            producer,
            target: job.target.clone(),
            target_partitions: job.target_partitions,
            timeout,
            in_chunk: (0, 0),
        })
    }

    // rdkafka's `send` hands a refused record back by value (a large `Err`).
    #[allow(clippy::result_large_err)]
    fn send(&mut self, job: &QuarantineJob, m: &BorrowedMessage<'_>) -> KafkaResult<()> {
        let origin = Origin {
            topic: job.topic.clone(),
            topic_id: job.topic_id.clone(),
            partition: m.partition(),
            offset: m.offset(),
        };
        let mut headers = OwnedHeaders::new();
        if let Some(hs) = m.headers() {
            for h in hs.iter() {
                headers = headers.insert(h);
            }
        }
        let ours = origin_headers(&origin);
        for (key, value) in &ours {
            headers = headers.insert(Header { key, value: Some(value.as_bytes()) });
        }
        let mut rec: BaseRecord<'_, [u8], [u8]> = BaseRecord::to(&job.target)
            .partition(target_partition(m.partition(), self.target_partitions))
            .headers(headers);
        if let Some(k) = m.key() {
            rec = rec.key(k);
        }
        if let Some(v) = m.payload() {
            rec = rec.payload(v);
        }
        if let Some(ts) = m.timestamp().to_millis() {
            rec = rec.timestamp(ts);
        }
        let producer = &self.producer;
        send_with_backpressure(|r| producer.send(r), || std::thread::sleep(SERVE_STEP), rec)
            .map_err(|e| rdkafka_error("quarantine send", &job.target, e))?;
        self.in_chunk.0 += 1;
        self.in_chunk.1 += m.key().map_or(0, <[u8]>::len) + m.payload().map_or(0, <[u8]>::len);
        if self.in_chunk.0 >= CHUNK_RECORDS || self.in_chunk.1 >= CHUNK_BYTES {
            self.commit_chunk()?;
            self.producer
                .begin_transaction()
                .map_err(|e| rdkafka_error("begin quarantine transaction", &job.target, e))?;
        }
        Ok(())
    }

    fn commit_chunk(&mut self) -> KafkaResult<()> {
        let (producer, target) = (&self.producer, &self.target);
        wait_delivered(|| producer.in_flight_count(), || std::thread::sleep(SERVE_STEP), self.timeout)
            .map_err(|e| rdkafka_error("quarantine flush", target, e))?;
        self.producer.commit_transaction(self.timeout).map_err(|e| rdkafka_error("quarantine commit", target, e))?;
        self.in_chunk = (0, 0);
        Ok(())
    }

    fn commit(mut self) -> KafkaResult<()> {
        let r = self.commit_chunk();
        if r.is_err() {
            self.abort();
        }
        r
    }

    fn abort(&mut self) {
        let _ = self.producer.abort_transaction(self.timeout);
    }
}
