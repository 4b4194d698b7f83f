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

/// Where one topic config stands between the source topic and its mirror topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigStatus {
    /// Copied, and the destination has the value the sync wants.
    InSync,
    /// Copied, and the destination differs: the next topic-config sync sets it (or removes the
    /// destination's override). Changed on the destination since kmirror set it, or changed at
    /// the source since the last sync.
    Differs,
    /// Not copied (placement, durability or not on the allow list): each cluster keeps its own.
    NotCopied,
}

impl ConfigStatus {
    /// The stable name used by the API.
    #[must_use]
    pub const fn slug(self) -> &'static str {
        match self {
            ConfigStatus::InSync => "in_sync",
            ConfigStatus::Differs => "differs",
            ConfigStatus::NotCopied => "not_copied",
        }
    }
}

/// One config of a mirror topic, source beside destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigRow {
    pub name: String,
    /// The source topic's override; `None`: the source cluster's default.
    pub source: Option<String>,
    /// The mirror topic's override; `None`: the destination cluster's default.
    pub destination: Option<String>,
    /// What the sync makes the destination's override (`None`: no override); only for copied
    /// configs.
    pub wanted: Option<String>,
    pub status: ConfigStatus,
}

/// Every config either topic overrides (plus `compression.type`, which kmirror sets), sorted by
/// name: the same decision the topic-config sync makes, shown instead of applied.
#[must_use]
pub fn compare(
    source: &std::collections::BTreeMap<String, String>,
    destination: &std::collections::BTreeMap<String, String>,
) -> Vec<ConfigRow> {
    let mut names: std::collections::BTreeSet<&str> =
        source.keys().chain(destination.keys()).map(String::as_str).collect();
    names.insert("compression.type");
    names
        .into_iter()
        .map(|name| {
            let (src, dst) = (source.get(name).cloned(), destination.get(name).cloned());
            if !is_copied(name) {
                return ConfigRow {
                    name: name.to_string(),
                    source: src,
                    destination: dst,
                    wanted: None,
                    status: ConfigStatus::NotCopied,
                };
            }
            let wanted = match (&src, name) {
                (Some(v), _) => Some(v.clone()),
                // Mirror topics keep the batches as the source compressed them.
                (None, "compression.type") => Some("producer".to_string()),
                (None, _) => None,
            };
            let status = if wanted == dst { ConfigStatus::InSync } else { ConfigStatus::Differs };
            ConfigRow { name: name.to_string(), source: src, destination: dst, wanted, status }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_comparison_makes_the_syncs_decision_visible() {
        let m = |pairs: &[(&str, &str)]| -> std::collections::BTreeMap<String, String> {
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
        };
        let src = m(&[("retention.ms", "1000"), ("min.insync.replicas", "2"), ("segment.ms", "60000")]);
        let dst = m(&[
            ("retention.ms", "5000"),
            ("segment.ms", "60000"),
            ("compression.type", "producer"),
            ("cleanup.policy", "compact"),
        ]);
        let rows = compare(&src, &dst);
        let view: Vec<_> = rows
            .iter()
            .map(|r| {
                (r.name.as_str(), r.source.as_deref(), r.destination.as_deref(), r.wanted.as_deref(), r.status.slug())
            })
            .collect();
        assert_eq!(
            view,
            [
                // Set only on the destination, copied: the sync removes it.
                ("cleanup.policy", None, Some("compact"), None, "differs"),
                ("compression.type", None, Some("producer"), Some("producer"), "in_sync"),
                // Each cluster's own.
                ("min.insync.replicas", Some("2"), None, None, "not_copied"),
                ("retention.ms", Some("1000"), Some("5000"), Some("1000"), "differs"),
                ("segment.ms", Some("60000"), Some("60000"), Some("60000"), "in_sync"),
            ]
        );
        // A source compression wins over kmirror's default.
        let rows = compare(&m(&[("compression.type", "zstd")]), &m(&[("compression.type", "producer")]));
        assert_eq!((rows[0].wanted.as_deref(), rows[0].status), (Some("zstd"), ConfigStatus::Differs));
    }

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
