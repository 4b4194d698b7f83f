//! Leader-epoch and fetched-end access for consumers, which rdkafka 0.39 does not expose safely.
//!
//! kmirror tracks the source leader epoch of every mirrored record (for the Last Mirrored Epoch)
//! and re-assigns source partitions at `(offset, leader epoch)` so librdkafka validates the
//! position against the leader's epoch history (KIP-320) and detects source truncation.
#![allow(unsafe_code)]

use std::ffi::CString;

use rdkafka::bindings as rd;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::message::BorrowedMessage;
use rdkafka::{Offset, TopicPartitionList};

use super::error::{KafkaError, KafkaResult};
use super::ffi;
use super::types::PartitionPosition;

/// The leader epoch of the batch a consumed message came from; `None` when the broker did not
/// send one (message format v1 or older).
pub fn message_leader_epoch(msg: &BorrowedMessage<'_>) -> Option<i32> {
    // SAFETY: `msg.ptr()` is a live message for the borrow's lifetime; the accessor only reads it.
    let epoch = unsafe { rd::rd_kafka_message_leader_epoch(msg.ptr()) };
    (epoch >= 0).then_some(epoch)
}

// kmirror's librdkafka patch 0003 (vendor/rdkafka-sys/PATCHES.md): not in rdkafka-sys's
// generated bindings.
unsafe extern "C" {
    fn rd_kafka_message_compression(rkmessage: *const rd::rd_kafka_message_t) -> std::ffi::c_int;
}

/// The compression codec of the record batch a consumed message came from, as librdkafka
/// numbers it (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd); `None` when unknown (message format v1
/// or older).
pub fn message_codec(msg: &BorrowedMessage<'_>) -> Option<i32> {
    // SAFETY: `msg.ptr()` is a live consumed message for the borrow's lifetime; the accessor
    // (added by the vendored librdkafka's patch 0003) only reads it.
    let codec = unsafe { rd_kafka_message_compression(msg.ptr()) };
    (codec >= 0).then_some(codec)
}

/// Where the last fetch response said `topic`/`partition` ends — its last stable offset, for a
/// `read_committed` consumer (librdkafka's fetcher takes the LSO as the end then) — from
/// librdkafka's cache, without a request. `None` before the partition's first fetch.
pub fn fetched_end(consumer: &BaseConsumer, topic: &str, partition: i32) -> Option<i64> {
    let topic = CString::new(topic).ok()?;
    let (mut low, mut high) = (-1_i64, -1_i64);
    // SAFETY: the client pointer is live for the borrow of `consumer`; `topic` outlives the
    // call; librdkafka only writes the two integers.
    let err = unsafe {
        rd::rd_kafka_get_watermark_offsets(
            consumer.client().native_ptr(),
            topic.as_ptr(),
            partition,
            &raw mut low,
            &raw mut high,
        )
    };
    (err == rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR && high >= 0).then_some(high)
}

/// The consumer's current fetch positions of these partitions alone (rdkafka's `position()`
/// copies the whole assignment: a consumer shared by a mirror's data paths holds all of theirs).
/// A partition without a known position is left out.
pub fn positions_of(consumer: &BaseConsumer, partitions: &[(String, i32)]) -> Vec<((String, i32), i64)> {
    let tpl = partition_list(partitions);
    // SAFETY: the client pointer is live for the borrow of `consumer`; `tpl` is live and owned,
    // and librdkafka only writes its elements' offsets and errors.
    let err = unsafe { rd::rd_kafka_position(consumer.client().native_ptr(), tpl.ptr()) };
    if err != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
        return Vec::new();
    }
    tpl.elements()
        .iter()
        .filter_map(|el| match el.offset() {
            Offset::Offset(offset) => Some(((el.topic().to_string(), el.partition()), offset)),
            _ => None,
        })
        .collect()
}

/// An rdkafka partition list of these partitions, without offsets.
pub fn partition_list(partitions: &[(String, i32)]) -> TopicPartitionList {
    let mut tpl = TopicPartitionList::with_capacity(partitions.len());
    for (topic, partition) in partitions {
        tpl.add_partition(topic, *partition);
    }
    tpl
}

/// Stops the consumer reading these partitions (an incremental unassign). A failure is logged,
/// not returned: the callers forget the partitions either way.
pub fn unassign_partitions(consumer: &BaseConsumer, partitions: &[(String, i32)], mirror: &str) {
    if let Err(e) = consumer.incremental_unassign(&partition_list(partitions)) {
        tracing::warn!(%mirror, error = %e, "incremental unassign failed");
    }
}

/// Builds an rdkafka partition list at the given positions, with leader epochs set where known.
pub fn position_list(positions: &[PartitionPosition]) -> KafkaResult<TopicPartitionList> {
    const OP: &str = "assign";
    let mut tpl = TopicPartitionList::with_capacity(positions.len());
    for p in positions {
        let offset = if p.offset >= 0 { Offset::Offset(p.offset) } else { Offset::Beginning };
        tpl.add_partition_offset(&p.topic, p.partition, offset)
            .map_err(|e| KafkaError::InvalidArgument { operation: OP, message: e.to_string() })?;
        if let Some(epoch) = p.leader_epoch {
            let topic = ffi::cstring(OP, &p.topic)?;
            // SAFETY: `tpl` is live and owned; `find` returns an element of it (or NULL), valid
            // until the list is modified; the setter only writes that element's private epoch.
            unsafe {
                let el = rd::rd_kafka_topic_partition_list_find(tpl.ptr(), topic.as_ptr(), p.partition);
                if el.is_null() {
                    return Err(KafkaError::InvalidArgument {
                        operation: OP,
                        message: format!("{}-{} not in list", p.topic, p.partition),
                    });
                }
                rd::rd_kafka_topic_partition_set_leader_epoch(el, epoch);
            }
        }
    }
    Ok(tpl)
}

/// Replaces the consumer's assignment with `positions`. A position with a leader epoch is
/// validated by the client against the leader (KIP-320) before fetching starts.
pub fn assign_positions<C: ConsumerContext>(
    consumer: &BaseConsumer<C>,
    positions: &[PartitionPosition],
) -> KafkaResult<()> {
    let tpl = position_list(positions)?;
    consumer.assign(&tpl).map_err(|e| KafkaError::InvalidArgument { operation: "assign", message: e.to_string() })
}

/// The leader epochs currently set on the elements of a partition list (as returned by
/// `Consumer::position` or `committed`).
pub fn list_leader_epochs(tpl: &TopicPartitionList) -> Vec<PartitionPosition> {
    // SAFETY: `tpl.ptr()` is a live list for the borrow; read_tpl copies every element.
    let entries = unsafe { ffi::read_tpl(tpl.ptr()) };
    entries
        .into_iter()
        .map(|e| PartitionPosition {
            topic: e.topic,
            partition: e.partition,
            offset: e.offset,
            leader_epoch: e.leader_epoch,
        })
        .collect()
}
