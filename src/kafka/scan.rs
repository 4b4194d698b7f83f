//! Counting the committed records of partitions from an offset to their last stable offset: what
//! a failback needs to know about the old source (records there after the mirrored end never
//! reached the other side; transaction markers and aborted records are not records).

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};

use super::client::{client_config, create};
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

/// Reads `topic`'s partitions with `read_committed` from each `from` offset up to `ends` (their
/// last stable offsets, read by the caller) and counts what is there. Blocking.
pub fn scan_committed(
    bootstrap: &str,
    properties: &BTreeMap<String, String>,
    topic: &str,
    ranges: &[(i32, i64, i64)],
    timeout: Duration,
) -> KafkaResult<BTreeMap<i32, Scanned>> {
    const OP: &str = "scan records";
    let mut out: BTreeMap<i32, Scanned> = ranges.iter().map(|(p, _, _)| (*p, Scanned::default())).collect();
    let mut remaining: HashMap<i32, i64> =
        ranges.iter().filter(|(_, from, end)| from < end).map(|(p, _, end)| (*p, *end)).collect();
    if remaining.is_empty() {
        return Ok(out);
    }
    let mut cfg = client_config(bootstrap, properties, &[])?;
    cfg.set("group.id", "kmirror-scan")
        .set("enable.auto.commit", "false")
        .set("isolation.level", "read_committed")
        .set("enable.partition.eof", "true")
        .set("auto.offset.reset", "earliest")
        .set("fetch.queue.backoff.ms", "10");
    let consumer: BaseConsumer = create(&cfg, "record scan")?;
    let mut tpl = TopicPartitionList::new();
    for (p, from, end) in ranges {
        if from < end {
            tpl.add_partition_offset(topic, *p, Offset::Offset(*from))
                .map_err(|e| KafkaError::InvalidArgument { operation: OP, message: e.to_string() })?;
        }
    }
    consumer.assign(&tpl).map_err(|e| KafkaError::InvalidArgument { operation: OP, message: e.to_string() })?;
    let deadline = Instant::now() + timeout;
    while !remaining.is_empty() {
        if Instant::now() > deadline {
            return Err(KafkaError::Timeout { operation: OP, resource: topic.to_string(), after: timeout });
        }
        match consumer.poll(Duration::from_millis(100)) {
            None => {}
            Some(Err(rdkafka::error::KafkaError::PartitionEOF(p))) => {
                // The end of what is there; the LSO may sit past trailing control records.
                if let Ok(pos) = consumer.position()
                    && let Some(el) = pos.find_partition(topic, p)
                    && let Offset::Offset(o) = el.offset()
                    && remaining.get(&p).is_some_and(|end| o >= *end)
                {
                    remaining.remove(&p);
                }
            }
            Some(Err(e)) => tracing::debug!(error = %e, "record scan: transient consumer error"),
            Some(Ok(m)) => {
                let p = m.partition();
                let Some(end) = remaining.get(&p).copied() else { continue };
                if m.offset() < end {
                    out.entry(p).or_default().add(m.offset(), m.timestamp().to_millis());
                }
                if m.offset() + 1 >= end {
                    remaining.remove(&p);
                }
            }
        }
    }
    Ok(out)
}
