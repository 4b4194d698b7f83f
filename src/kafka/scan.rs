//! Counting the committed records of partitions from an offset to their last stable offset: what
//! a failback needs to know about the old source (records there after the mirrored end never
//! reached the other side; transaction markers and aborted records are not records).

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{BorrowedMessage, Message};
use rdkafka::{Offset, TopicPartitionList};

use super::client::{ClientKind, EofReaderContext, client_config, create_with_context};
use super::{KafkaError, KafkaResult};

/// The committed records of one partition at or after the scan's start offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Scanned {
    pub records: i64,
    /// First and last offset (inclusive).
    pub offsets: Option<(i64, i64)>,
    /// Earliest and latest timestamp (ms).
    pub timestamps: Option<(i64, i64)>,
}

impl Scanned {
    fn add(&mut self, offset: i64, timestamp: Option<i64>) {
        self.records += 1;
        self.offsets = Some(self.offsets.map_or((offset, offset), |(a, b)| (a.min(offset), b.max(offset))));
        if let Some(t) = timestamp {
            self.timestamps = Some(self.timestamps.map_or((t, t), |(a, b)| (a.min(t), b.max(t))));
        }
    }
}

/// Reads `topic`'s partitions with `read_committed` from their `starts` until each has been read
/// up to its `ends` offset (a last stable offset read before), handing every message to `f`. The
/// end may lie past trailing transaction markers, which no message shows: a partition is done
/// when its position reaches the end. Blocking.
#[allow(clippy::too_many_arguments)] // each one is a different, necessary fact of the read
pub(super) fn read_committed_range(
    bootstrap: &str,
    properties: &BTreeMap<String, String>,
    topic: &str,
    starts: &[(i32, Offset)],
    mut remaining: HashMap<i32, i64>,
    timeout: Duration,
    op: &'static str,
    mut f: impl FnMut(&BorrowedMessage<'_>),
) -> KafkaResult<()> {
    if remaining.is_empty() {
        return Ok(());
    }
    let mut cfg = client_config(Some(ClientKind::Consumer), bootstrap, properties, &[])?;
    cfg.set("group.id", format!("kmirror-{}", op.replace(' ', "-")))
        .set("enable.auto.commit", "false")
        .set("isolation.level", "read_committed")
        .set("enable.partition.eof", "true")
        .set("auto.offset.reset", "earliest")
        .set("fetch.queue.backoff.ms", "10")
        // A read to a known end, not a tail: the fetch that finds a partition at its end (the
        // only one that reports the end when the last offsets are transaction markers) should
        // come back at once, not after librdkafka's 500 ms long-poll. A failback start reads the
        // source's state topic and counts the records it will copy this way, while the operator
        // waits for the answer.
        .set("fetch.wait.max.ms", "10");
    let consumer: BaseConsumer<EofReaderContext> = create_with_context(&cfg, EofReaderContext, op)?;
    let mut tpl = TopicPartitionList::new();
    for (p, offset) in starts.iter().filter(|(p, _)| remaining.contains_key(p)) {
        tpl.add_partition_offset(topic, *p, *offset)
            .map_err(|e| KafkaError::InvalidArgument { operation: op, message: e.to_string() })?;
    }
    consumer.assign(&tpl).map_err(|e| KafkaError::InvalidArgument { operation: op, message: e.to_string() })?;
    let deadline = Instant::now() + timeout;
    while !remaining.is_empty() {
        if Instant::now() > deadline {
            return Err(KafkaError::Timeout { operation: op, resource: topic.to_string(), after: timeout });
        }
        match consumer.poll(Duration::from_millis(100)) {
            None => {}
            Some(Err(rdkafka::error::KafkaError::PartitionEOF(p))) => {
                if let Ok(pos) = consumer.position()
                    && let Some(el) = pos.find_partition(topic, p)
                    && let Offset::Offset(o) = el.offset()
                    && remaining.get(&p).is_some_and(|end| o >= *end)
                {
                    remaining.remove(&p);
                }
            }
            Some(Err(e)) => tracing::debug!(error = %e, "{op}: transient consumer error"),
            Some(Ok(m)) => {
                let p = m.partition();
                f(&m);
                if remaining.get(&p).is_some_and(|end| m.offset() + 1 >= *end) {
                    remaining.remove(&p);
                }
            }
        }
    }
    // Closing a consumer waits for its threads to end (~100 ms on the rig): the caller has what
    // it asked for, and a failback start reads twice this way while the operator waits.
    let _ = std::thread::Builder::new().name("kmirror-reader-close".into()).spawn(move || drop(consumer));
    Ok(())
}

/// Reads `topic`'s partitions with `read_committed` from each `from` offset up to `end` (their
/// last stable offsets, read by the caller) and counts what is there. Blocking.
pub fn scan_committed(
    bootstrap: &str,
    properties: &BTreeMap<String, String>,
    topic: &str,
    ranges: &[(i32, i64, i64)],
    timeout: Duration,
) -> KafkaResult<BTreeMap<i32, Scanned>> {
    let mut out: BTreeMap<i32, Scanned> = ranges.iter().map(|(p, _, _)| (*p, Scanned::default())).collect();
    let ends: HashMap<i32, i64> =
        ranges.iter().filter(|(_, from, end)| from < end).map(|(p, _, end)| (*p, *end)).collect();
    let starts: Vec<(i32, Offset)> = ranges.iter().map(|(p, from, _)| (*p, Offset::Offset(*from))).collect();
    read_committed_range(bootstrap, properties, topic, &starts, ends.clone(), timeout, "record scan", |m| {
        if ends.get(&m.partition()).is_some_and(|end| m.offset() < *end) {
            out.entry(m.partition()).or_default().add(m.offset(), m.timestamp().to_millis());
        }
    })?;
    Ok(out)
}
