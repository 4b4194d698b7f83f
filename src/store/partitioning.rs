//! Which `__mirror_state` partition a record goes to.
//!
//! As in KIP-1279, partition-level records are distributed by
//! `hash(mirror name, topic ID, partition) % N`, and mirror-level records (Mirror, MirrorTopic,
//! LastMirrorEpochs, Operation) by `hash(mirror name) % N`.
//!
//! # The function (never change it)
//!
//! Every record of a partition must land in the partition that held its earlier records, across
//! kmirror versions and instances, or a reader would see them out of order. So the function is
//! fixed forever:
//!
//! - **Input bytes**: the compact JSON array of the identifying fields, as [`serde_json`] writes
//!   it: `["<mirror>","<topic id>",<partition>]` for partition-level records, `["<mirror>"]` for
//!   mirror-level ones. JSON string escaping makes the encoding unambiguous (no separator can
//!   occur inside a field) and any language can reproduce it.
//! - **Hash**: Kafka's murmur2 (`org.apache.kafka.common.utils.Utils.murmur2`, seed `0x9747b28c`),
//!   made positive with `& 0x7fffffff` (Kafka's `toPositive`), modulo N. It is the hash of Kafka's
//!   own default partitioner, so any Kafka tool can compute where a record lives, and it is pinned
//!   by Kafka's published test vectors as well as by our own.
//!
//! librdkafka's default partitioner (`consistent_random`, CRC32) is a different function: the
//! producer must set the partition explicitly ([`super::EncodedRecord::partition`]).

use std::num::NonZeroU32;

/// Kafka's murmur2 hash (the Java client's `Utils.murmur2`), as an unsigned 32-bit value.
#[must_use]
pub fn murmur2(data: &[u8]) -> u32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;

    // Java's `length` is an int; state keys are far shorter than 2^32 bytes, and a longer input
    // only changes which wrapping value the seed is mixed with, never memory safety.
    #[allow(clippy::cast_possible_truncation)]
    let mut h = SEED ^ (data.len() as u32);
    let mut chunks = data.chunks_exact(4);
    for chunk in &mut chunks {
        let mut k = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        for (i, byte) in tail.iter().enumerate().rev() {
            h ^= u32::from(*byte) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h
}

/// `toPositive(murmur2(bytes)) % num_partitions`, as Kafka's default partitioner computes it.
fn partition_of(bytes: &[u8], num_partitions: NonZeroU32) -> i32 {
    let positive = murmur2(bytes) & 0x7fff_ffff;
    // Below 2^31 (masked), so the remainder is too and fits an i32.
    i32::try_from(positive % num_partitions.get()).unwrap_or(0)
}

/// The state partition of a partition-level record (MirrorPartitionState, OffsetRuns) among
/// `num_partitions`; see the module docs for the exact function.
#[must_use]
pub fn state_partition(mirror: &str, topic_id: &str, partition: i32, num_partitions: NonZeroU32) -> i32 {
    let bytes = serde_json::to_vec(&(mirror, topic_id, partition)).unwrap_or_default();
    partition_of(&bytes, num_partitions)
}

/// The state partition of a mirror-level record (Mirror, MirrorTopic, LastMirrorEpochs,
/// Operation) among `num_partitions`; see the module docs for the exact function.
#[must_use]
pub fn mirror_partition(mirror: &str, num_partitions: NonZeroU32) -> i32 {
    let bytes = serde_json::to_vec(&(mirror,)).unwrap_or_default();
    partition_of(&bytes, num_partitions)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(value: u32) -> NonZeroU32 {
        NonZeroU32::new(value).unwrap()
    }

    #[test]
    fn murmur2_matches_kafkas_published_vectors() {
        // org.apache.kafka.common.utils.UtilsTest#testMurmur2, plus the empty input.
        let cases: [(&[u8], i32); 7] = [
            (b"21", -973_932_308),
            (b"foobar", -790_332_482),
            (b"a-little-bit-long-string", -985_981_536),
            (b"a-little-bit-longer-string", -1_486_304_829),
            (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58_897_971),
            (b"abc", 479_470_107),
            (b"", 275_646_681),
        ];
        for (input, expected) in cases {
            assert_eq!(murmur2(input).cast_signed(), expected, "murmur2({:?})", String::from_utf8_lossy(input));
        }
    }

    #[test]
    fn hash_inputs_are_the_documented_json_arrays() {
        assert_eq!(serde_json::to_vec(&("m", "id\"x", 3)).unwrap(), br#"["m","id\"x",3]"#);
        assert_eq!(serde_json::to_vec(&("m",)).unwrap(), br#"["m"]"#);
    }

    /// Cross-checked with an independent implementation (Python, `json.dumps(..., separators=(",", ":"),
    /// ensure_ascii=False)` and Kafka's murmur2). These values are persisted placement: if this test fails, the change breaks every existing
    /// `__mirror_state` topic. Do not update the expected values; restore the function.
    #[test]
    fn placement_is_pinned() {
        let sixteen = n(16);
        assert_eq!(state_partition("prod-mirror", "Xm1nYd4ZQ8KxT0aGkDzb2A", 0, sixteen), 8);
        assert_eq!(state_partition("prod-mirror", "Xm1nYd4ZQ8KxT0aGkDzb2A", 1, sixteen), 13);
        assert_eq!(state_partition("prod-mirror", "Xm1nYd4ZQ8KxT0aGkDzb2A", 7, sixteen), 12);
        assert_eq!(state_partition("eu→us", "AAAAAAAAAAAAAAAAAAAAAA", 42, sixteen), 3);
        assert_eq!(state_partition("prod-mirror", "Xm1nYd4ZQ8KxT0aGkDzb2A", 0, n(50)), 0);
        assert_eq!(mirror_partition("prod-mirror", sixteen), 8);
        assert_eq!(mirror_partition("eu→us", sixteen), 9);
        assert_eq!(mirror_partition("prod-mirror", n(1)), 0);
    }

    #[test]
    fn placement_stays_in_range() {
        for partitions in [1, 2, 3, 16, 50, 1000] {
            for p in 0..100 {
                let placed = state_partition("m", "t", p, n(partitions));
                assert!((0..i32::try_from(partitions).unwrap()).contains(&placed));
            }
        }
    }
}
