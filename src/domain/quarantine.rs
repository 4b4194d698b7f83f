//! Quarantine (issue 18, DESIGN.md section 5): before a resync deletes a destination partition's
//! divergent records, `resync` with `quarantine: true` copies them to `<topic>.kmirror-diverged`
//! on the same cluster. This module holds the pure parts: which offsets are divergent, how a
//! quarantined record names where it came from (its headers), and how a record already in the
//! quarantine topic is judged (ours, from an earlier attempt, or foreign data).
//!
//! The copy itself is `kafka::quarantine`; the engine reads the offsets and decides with these.

use serde::{Deserialize, Serialize};

#[cfg(doc)]
use super::lineage::PartitionLineage;

/// Header naming the topic a quarantined record was copied from (UTF-8).
pub const HEADER_TOPIC: &str = "kmirror.diverged.topic";
/// Header with that topic's ID (UTF-8): a topic deleted and recreated reuses offsets, so the
/// offset alone would not tell an earlier attempt's copy from a new record.
pub const HEADER_TOPIC_ID: &str = "kmirror.diverged.topic-id";
/// Header with the original partition (decimal, UTF-8).
pub const HEADER_PARTITION: &str = "kmirror.diverged.partition";
/// Header with the original offset (decimal, UTF-8).
pub const HEADER_OFFSET: &str = "kmirror.diverged.offset";

/// Suffix of the quarantine topic's name.
pub const SUFFIX: &str = ".kmirror-diverged";

/// The quarantine topic of `topic`.
#[must_use]
pub fn quarantine_topic(topic: &str) -> String {
    format!("{topic}{SUFFIX}")
}

/// The range a quarantine copies from one partition, half-open `[from, end)`: from its divergence
/// point ([`PartitionLineage::divergence_point`], where the records that never reached the other
/// side begin: exactly the start of the range a `DESTINATION_DIVERGED` refusal reports, so what is
/// kept is what the refusal said would be lost), not below the log start (deleted records are
/// gone), to the last stable offset (records of a transaction still open are not committed
/// records yet). Empty when `from >= end`.
#[must_use]
pub fn range(divergent_from: i64, log_start: i64, last_stable: i64) -> (i64, i64) {
    let from = divergent_from.max(log_start);
    (from, last_stable.max(from))
}

/// Where a quarantined record came from, as its headers say.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Origin {
    pub topic: String,
    pub topic_id: String,
    pub partition: i32,
    pub offset: i64,
}

/// A record found in the quarantine topic of `topic`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Existing {
    /// Copied by kmirror from `topic` (an earlier quarantine, maybe an interrupted one).
    Ours(Origin),
    /// Not kmirror's copy of `topic`: the quarantine topic is someone else's, and kmirror will
    /// not mix its records in.
    Foreign(String),
}

/// Judges a record of the quarantine topic of `topic` by its headers (`(name, value)`, in order;
/// the last of a repeated name counts).
#[must_use]
pub fn classify<'a>(topic: &str, headers: impl IntoIterator<Item = (&'a str, Option<&'a [u8]>)>) -> Existing {
    let (mut t, mut id, mut p, mut o) = (None, None, None, None);
    for (name, value) in headers {
        let text = value.and_then(|v| std::str::from_utf8(v).ok());
        match name {
            HEADER_TOPIC => t = text,
            HEADER_TOPIC_ID => id = text,
            HEADER_PARTITION => p = text,
            HEADER_OFFSET => o = text,
            _ => {}
        }
    }
    let (Some(t), Some(id), Some(p), Some(o)) = (t, id, p, o) else {
        return Existing::Foreign(format!(
            "it lacks the {HEADER_TOPIC}, {HEADER_PARTITION} and {HEADER_OFFSET} headers"
        ));
    };
    if t != topic {
        return Existing::Foreign(format!("it was copied from topic {t:?}, not {topic:?}"));
    }
    match (p.parse(), o.parse()) {
        (Ok(partition), Ok(offset)) => {
            Existing::Ours(Origin { topic: t.to_string(), topic_id: id.to_string(), partition, offset })
        }
        _ => Existing::Foreign(format!("its {HEADER_PARTITION} or {HEADER_OFFSET} header is not a number")),
    }
}

/// The headers a quarantined copy carries on top of the record's own.
#[must_use]
pub fn origin_headers(origin: &Origin) -> [(&'static str, String); 4] {
    [
        (HEADER_TOPIC, origin.topic.clone()),
        (HEADER_TOPIC_ID, origin.topic_id.clone()),
        (HEADER_PARTITION, origin.partition.to_string()),
        (HEADER_OFFSET, origin.offset.to_string()),
    ]
}

/// The quarantine topic's partition for a record of `partition`: the same number when the
/// quarantine topic has it (it is created with the topic's partition count), otherwise folded
/// (a quarantine topic someone created smaller; the offset header still says where it came from).
#[must_use]
pub fn target_partition(partition: i32, target_partitions: i32) -> i32 {
    if partition < target_partitions || target_partitions <= 0 { partition } else { partition % target_partitions }
}

/// What a quarantine did (or, for `validate_only`, would do) for one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuarantinedPartition {
    pub partition: i32,
    /// Divergent records copied by this call (by the preview: that it would copy).
    pub records: i64,
    /// Divergent records already in the quarantine topic (an earlier, interrupted attempt).
    pub already_quarantined: i64,
    /// First and last offset (inclusive) of the divergent records; `None` when there are none.
    pub offsets: Option<(i64, i64)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_range_starts_at_the_divergence_point_within_the_log() {
        assert_eq!(range(25, 0, 31), (25, 31));
        assert_eq!(range(25, 28, 31), (28, 31), "deleted records are gone");
        assert_eq!(range(25, 0, 20), (25, 25), "nothing divergent: empty");
    }

    #[test]
    fn our_headers_round_trip_and_anything_else_is_foreign() {
        let o = Origin { topic: "orders".into(), topic_id: "T1".into(), partition: 3, offset: 17 };
        let hs = origin_headers(&o);
        let mut all: Vec<(&str, Option<&[u8]>)> = vec![("app", Some(b"x"))];
        all.extend(hs.iter().map(|(k, v)| (*k, Some(v.as_bytes()))));
        assert_eq!(classify("orders", all.clone()), Existing::Ours(o));
        assert!(
            matches!(classify("payments", all), Existing::Foreign(w) if w.contains("\"orders\", not \"payments\""))
        );
        assert!(matches!(classify("orders", [("app", Some(&b"x"[..]))]), Existing::Foreign(w) if w.contains("lacks")));
        let bad = [
            (HEADER_TOPIC, Some(&b"orders"[..])),
            (HEADER_TOPIC_ID, Some(&b"T1"[..])),
            (HEADER_PARTITION, Some(&b"x"[..])),
            (HEADER_OFFSET, Some(&b"1"[..])),
        ];
        assert!(matches!(classify("orders", bad), Existing::Foreign(_)));
    }

    #[test]
    fn same_partition_when_there_is_one() {
        assert_eq!(target_partition(2, 3), 2);
        assert_eq!(target_partition(5, 3), 2);
        assert_eq!(quarantine_topic("orders"), "orders.kmirror-diverged");
    }
}
