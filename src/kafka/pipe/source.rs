//! The data path's source reader over librdkafka: a `read_committed` consumer with manual
//! (incremental) assignment of the slot's partitions, either the data path's own or its queue
//! on the consumer the mirror's data paths share (`shared`), and the source's log bounds when a
//! position may have fallen out of the log.

use rdkafka::Offset;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{BorrowedMessage, Headers, Message};

use super::shared::{SharedConsumer, SlotView};
use super::*;
use crate::data_path::{ClientError, FetchError, Key, SourceFetcher, SourceRecord};
use crate::kafka::client::create;
use crate::kafka::consumer::{fetched_end, message_codec, message_leader_epoch, position_list, unassign_partitions};
use crate::kafka::types::{IsolationLevel, OffsetSpec, PartitionPosition};

/// The source reader of a slot's data path.
pub(super) struct Source {
    mirror: String,
    reader: Reader,
    admin: KafkaAdmin,
    runtime: tokio::runtime::Handle,
}

/// Whose consumer a data path reads with (`engine.source_consumers`).
enum Reader {
    /// Its own.
    Own(BaseConsumer),
    /// Its queue on the consumer its mirror's data paths share in this process.
    Shared(SlotView),
}

impl Source {
    pub(super) fn new(
        config: &PipeConfig,
        admin: KafkaAdmin,
        runtime: tokio::runtime::Handle,
    ) -> Result<Source, StartError> {
        let reader = if config.shared_source_consumer.is_some() {
            SharedConsumer::get(config).and_then(|shared| shared.view()).map(Reader::Shared)
        } else {
            consumer_config(config).and_then(|cfg| create(&cfg, "source consumer")).map(Reader::Own)
        }
        .map_err(StartError::SourceConsumer)?;
        Ok(Source { mirror: config.mirror.clone(), reader, admin, runtime })
    }

    fn consumer(&self) -> &BaseConsumer {
        match &self.reader {
            Reader::Own(consumer) => consumer,
            Reader::Shared(view) => view.consumer(),
        }
    }
}

impl SourceRecord for BorrowedMessage<'_> {
    fn topic(&self) -> &str {
        Message::topic(self)
    }
    fn partition(&self) -> i32 {
        Message::partition(self)
    }
    fn offset(&self) -> i64 {
        Message::offset(self)
    }
    fn key(&self) -> Option<&[u8]> {
        Message::key(self)
    }
    fn value(&self) -> Option<&[u8]> {
        Message::payload(self)
    }
    fn timestamp(&self) -> Option<i64> {
        Message::timestamp(self).to_millis()
    }
    fn leader_epoch(&self) -> Option<i32> {
        message_leader_epoch(self)
    }
    fn codec(&self) -> Option<i32> {
        message_codec(self)
    }
    fn headers(&self, each: &mut dyn FnMut(&str, Option<&[u8]>)) {
        if let Some(headers) = Message::headers(self) {
            for h in headers.iter() {
                each(h.key, h.value);
            }
        }
    }
}

impl SourceFetcher for Source {
    type Record<'a> = BorrowedMessage<'a>;

    fn poll(&self, wait: Duration) -> Option<Result<BorrowedMessage<'_>, FetchError>> {
        match &self.reader {
            Reader::Own(consumer) => consumer.poll(wait).map(|r| r.map_err(|e| fetch_error(&e))),
            Reader::Shared(view) => view.poll(wait),
        }
    }

    fn assign(&self, positions: &[PartitionPosition]) -> Result<(), ClientError> {
        let mut tpl = position_list(positions).map_err(|e| ClientError(AssignError::Positions(e).to_string()))?;
        // `-2` (log start) is expressed with Offset::Beginning.
        for p in positions.iter().filter(|p| p.offset < 0) {
            tpl.set_partition_offset(&p.topic, p.partition, Offset::Beginning)
                .map_err(|e| ClientError(AssignError::Consumer(e).to_string()))?;
        }
        match &self.reader {
            Reader::Own(consumer) => {
                consumer.incremental_assign(&tpl).map_err(|e| ClientError(AssignError::Consumer(e).to_string()))
            }
            Reader::Shared(view) => {
                let keys: Vec<Key> = positions.iter().map(|p| (p.topic.clone(), p.partition)).collect();
                view.assign(&tpl, &keys)
            }
        }
    }

    fn unassign(&self, partitions: &[Key]) {
        let consumer = match &self.reader {
            Reader::Own(consumer) => consumer,
            Reader::Shared(view) => return view.unassign(partitions),
        };
        unassign_partitions(consumer, partitions, &self.mirror);
    }

    fn unassign_all(&self) {
        match &self.reader {
            Reader::Own(consumer) => {
                let _ = consumer.unassign();
            }
            Reader::Shared(view) => view.unassign_all(),
        }
    }

    fn positions(&self) -> Vec<(Key, i64)> {
        let consumer = match &self.reader {
            Reader::Own(consumer) => consumer,
            Reader::Shared(view) => return view.positions(),
        };
        let Ok(positions) = consumer.position() else { return Vec::new() };
        positions
            .elements()
            .iter()
            .filter_map(|el| match el.offset() {
                Offset::Offset(offset) => Some(((el.topic().to_string(), el.partition()), offset)),
                _ => None,
            })
            .collect()
    }

    fn fetched_end(&self, topic: &str, partition: i32) -> Option<i64> {
        fetched_end(self.consumer(), topic, partition)
    }

    /// One request: rdkafka asks for one topic or for all, and a takeover or a coalesced start
    /// spans many topics (one request per topic took ~0.1-0.2 s each on a loaded box: seconds
    /// for a slot of 100 topics).
    fn refresh_metadata(&self, topics: &[&str]) {
        let which = if topics.len() == 1 { topics.first().copied() } else { None };
        if let Err(e) = self.consumer().fetch_metadata(which, Duration::from_secs(10)) {
            tracing::debug!(mirror = %self.mirror, topic = ?which, error = %e, "source metadata refresh");
        }
    }

    fn log_bounds(&self, partitions: &[Key]) -> Result<Vec<(i64, i64)>, ClientError> {
        let mut requests: Vec<(String, i32, OffsetSpec)> =
            partitions.iter().map(|(t, p)| (t.clone(), *p, OffsetSpec::Earliest)).collect();
        let earliest = self.runtime.block_on(self.admin.list_offsets(&requests, IsolationLevel::ReadCommitted));
        for r in requests.iter_mut() {
            r.2 = OffsetSpec::Latest;
        }
        let latest = self.runtime.block_on(self.admin.list_offsets(&requests, IsolationLevel::ReadUncommitted));
        match (earliest, latest) {
            (Ok(e), Ok(l)) => Ok(e.iter().zip(&l).map(|(e, l)| (e.offset, l.offset)).collect()),
            (Err(e), _) | (_, Err(e)) => Err(ClientError(e.to_string())),
        }
    }
}
