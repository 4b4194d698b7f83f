//! Which source topic configs a mirror topic copies (DESIGN.md section 7).
//!
//! Copied: settings that define what the data *is* and how long it lives, so consumers see the
//! same log semantics after a failover — cleanup policy, retention, segment sizing, compaction
//! lags, message size and timestamp rules, compression. Never copied: placement and durability
//! settings that belong to the destination cluster's own operators (replication, min ISR,
//! leader-election and throttling settings, remote storage, follower fetch), and anything not on
//! the allow list, so a config added by a future Kafka version is never copied by surprise.

/// Exact config names copied from the source topic.
pub const COPIED_EXACT: &[&str] = &[
    "cleanup.policy",
    "compression.type",
    "compression.gzip.level",
    "compression.lz4.level",
    "compression.zstd.level",
    "delete.retention.ms",
    "file.delete.delay.ms",
    "max.compaction.lag.ms",
    "max.message.bytes",
    "message.downconversion.enable",
    "min.cleanable.dirty.ratio",
    "min.compaction.lag.ms",
    "retention.bytes",
    "retention.ms",
    "local.retention.bytes",
    "local.retention.ms",
];

/// Config name prefixes copied from the source topic.
pub const COPIED_PREFIXES: &[&str] = &["segment.", "message.timestamp.", "index.interval.", "flush."];

/// Configs never copied, even if a prefix above would match (documented for operators).
pub const NEVER_COPIED: &[&str] = &[
    "min.insync.replicas",
    "unclean.leader.election.enable",
    "leader.replication.throttled.replicas",
    "follower.replication.throttled.replicas",
    "remote.storage.enable",
    "preallocate",
    "confluent.placement.constraints",
];

/// Whether a source topic config is copied to the mirror topic.
#[must_use]
pub fn is_copied(name: &str) -> bool {
    if NEVER_COPIED.contains(&name) {
        return false;
    }
    COPIED_EXACT.contains(&name) || COPIED_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// The configs to create a mirror topic with, from the source topic's explicitly set configs
/// (`(name, value)` pairs of per-topic overrides). The destination keeps the producer's
/// compression (`compression.type=producer`) unless the source sets one, so the broker does not
/// recompress every mirrored batch.
#[must_use]
pub fn creation_configs(source_overrides: &[(String, String)]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> =
        source_overrides.iter().filter(|(k, _)| is_copied(k)).map(|(k, v)| (k.clone(), v.clone())).collect();
    if !out.iter().any(|(k, _)| k == "compression.type") {
        out.push(("compression.type".to_string(), "producer".to_string()));
    }
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_data_semantics_and_never_placement() {
        for name in ["cleanup.policy", "retention.ms", "segment.bytes", "message.timestamp.type", "max.message.bytes"] {
            assert!(is_copied(name), "{name}");
        }
        for name in
            ["min.insync.replicas", "unclean.leader.election.enable", "replication.factor", "some.future.config"]
        {
            assert!(!is_copied(name), "{name}");
        }
    }

    #[test]
    fn creation_defaults_to_producer_compression_unless_the_source_sets_one() {
        let src = vec![
            ("retention.ms".to_string(), "1000".to_string()),
            ("min.insync.replicas".to_string(), "2".to_string()),
        ];
        assert_eq!(
            creation_configs(&src),
            vec![
                ("compression.type".to_string(), "producer".to_string()),
                ("retention.ms".to_string(), "1000".to_string())
            ]
        );
        let src = vec![("compression.type".to_string(), "zstd".to_string())];
        assert_eq!(creation_configs(&src), vec![("compression.type".to_string(), "zstd".to_string())]);
    }
}
