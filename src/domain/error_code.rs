//! Why a partition is FAILED, and whether kmirror may retry it on its own.
//!
//! The codes are stable identifiers: they are persisted in `__mirror_state`, returned by the API
//! and shown on the dashboard, so a code is never renamed or reused.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The cause recorded with a FAILED partition.
///
/// [`ErrorCode::is_retryable`] is the one classification: retryable codes are retried with
/// backoff (up to [`RetryPolicy::max_attempts`](super::RetryPolicy)); the others wait for an
/// operator, because retrying cannot change the outcome and could copy wrong data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[non_exhaustive]
pub enum ErrorCode {
    /// The source cluster now reports a different cluster ID than the mirror was created with.
    SourceClusterIdMismatch,
    /// The source topic no longer exists.
    SourceTopicDeleted,
    /// The source topic was deleted and created again (its topic ID changed).
    SourceTopicRecreated,
    /// A record that kmirror did not write appeared in a mirror partition.
    ForeignWrite,
    /// The source log was truncated below the mirrored position (unclean leader election on the
    /// source, detected through KIP-320 offset validation).
    SourceTruncated,
    /// The destination holds records past the last stop point (local writes) and the start did
    /// not choose a truncation mode.
    DestinationDiverged,
    /// The source topic has fewer partitions than the mirror (only possible after recreation).
    PartitionCountDecreased,
    /// A mirror loop: the source mirrors this topic from this cluster.
    MirrorLoop,
    /// The source cluster cannot be reached.
    SourceUnreachable,
    /// The destination cluster (or the partition's leader) is unavailable.
    DestinationUnavailable,
    /// A request to either cluster timed out.
    Timeout,
    /// The destination transactional producer was fenced by a newer instance or epoch.
    ProducerFenced,
    /// An ACL denies an operation kmirror needs (fixed by an operator, picked up on retry).
    AuthorizationFailed,
    /// `__mirror_state` could not be read or written.
    StateStoreUnavailable,
    /// An unexpected internal error.
    Internal,
}

impl ErrorCode {
    /// Every code, in declaration order.
    pub const ALL: [Self; 15] = [
        Self::SourceClusterIdMismatch,
        Self::SourceTopicDeleted,
        Self::SourceTopicRecreated,
        Self::ForeignWrite,
        Self::SourceTruncated,
        Self::DestinationDiverged,
        Self::PartitionCountDecreased,
        Self::MirrorLoop,
        Self::SourceUnreachable,
        Self::DestinationUnavailable,
        Self::Timeout,
        Self::ProducerFenced,
        Self::AuthorizationFailed,
        Self::StateStoreUnavailable,
        Self::Internal,
    ];

    /// Whether kmirror retries this failure by itself (with backoff).
    ///
    /// Not retryable: a changed source identity (cluster ID, topic ID, deletion, fewer
    /// partitions), data that kmirror did not write or can no longer line up (foreign write,
    /// source truncation, destination divergence) and mirror loops. Everything transient
    /// (connectivity, timeouts, fencing, permissions, the state store, internal errors) is
    /// retryable.
    #[must_use]
    pub const fn is_retryable(self) -> bool {
        match self {
            Self::SourceClusterIdMismatch
            | Self::SourceTopicDeleted
            | Self::SourceTopicRecreated
            | Self::ForeignWrite
            | Self::SourceTruncated
            | Self::DestinationDiverged
            | Self::PartitionCountDecreased
            | Self::MirrorLoop => false,
            Self::SourceUnreachable
            | Self::DestinationUnavailable
            | Self::Timeout
            | Self::ProducerFenced
            | Self::AuthorizationFailed
            | Self::StateStoreUnavailable
            | Self::Internal => true,
        }
    }

    /// The stable `SCREAMING_SNAKE_CASE` name (also the serde and `Display` form).
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::SourceClusterIdMismatch => "SOURCE_CLUSTER_ID_MISMATCH",
            Self::SourceTopicDeleted => "SOURCE_TOPIC_DELETED",
            Self::SourceTopicRecreated => "SOURCE_TOPIC_RECREATED",
            Self::ForeignWrite => "FOREIGN_WRITE",
            Self::SourceTruncated => "SOURCE_TRUNCATED",
            Self::DestinationDiverged => "DESTINATION_DIVERGED",
            Self::PartitionCountDecreased => "PARTITION_COUNT_DECREASED",
            Self::MirrorLoop => "MIRROR_LOOP",
            Self::SourceUnreachable => "SOURCE_UNREACHABLE",
            Self::DestinationUnavailable => "DESTINATION_UNAVAILABLE",
            Self::Timeout => "TIMEOUT",
            Self::ProducerFenced => "PRODUCER_FENCED",
            Self::AuthorizationFailed => "AUTHORIZATION_FAILED",
            Self::StateStoreUnavailable => "STATE_STORE_UNAVAILABLE",
            Self::Internal => "INTERNAL",
        }
    }

    /// What an operator can do about it, as one lower-case clause for messages and the UI.
    #[must_use]
    pub const fn remedy(self) -> &'static str {
        match self {
            Self::SourceClusterIdMismatch => {
                "check the mirror's bootstrap servers; if the new cluster is intended, stop or remove the topic and start it again"
            }
            Self::SourceTopicDeleted | Self::SourceTopicRecreated | Self::PartitionCountDecreased => {
                "stop the topic to keep the destination copy, or remove it and add it back with truncation mode resync"
            }
            Self::ForeignWrite => {
                "find the writer and revoke its WRITE permission; then stop the topic, or remove it and add it back with truncation mode resync"
            }
            Self::SourceTruncated => "stop the topic, or remove it and add it back with truncation mode resync",
            Self::DestinationDiverged => {
                "review the impact preview, then stop the topic and start it again with truncation mode resync"
            }
            Self::MirrorLoop => "stop the mirror on the source cluster that reads from this one",
            Self::SourceUnreachable | Self::DestinationUnavailable | Self::Timeout | Self::StateStoreUnavailable => {
                "kmirror retries automatically; check cluster health (recover the topic to retry at once)"
            }
            Self::ProducerFenced => {
                "kmirror retries automatically; check for another kmirror instance owning this mirror"
            }
            Self::AuthorizationFailed => {
                "grant the missing permission; kmirror retries automatically (recover the topic to retry at once)"
            }
            Self::Internal => "kmirror retries automatically; report the error if it persists",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serde_and_display_use_the_same_screaming_snake_case_name() {
        for code in ErrorCode::ALL {
            let json = serde_json::to_string(&code).unwrap();
            assert_eq!(json, format!("\"{code}\""));
            assert_eq!(serde_json::from_str::<ErrorCode>(&json).unwrap(), code);
        }
    }

    #[test]
    fn classification_matches_the_design() {
        let non_retryable: Vec<ErrorCode> = ErrorCode::ALL.into_iter().filter(|c| !c.is_retryable()).collect();
        assert_eq!(
            non_retryable,
            [
                ErrorCode::SourceClusterIdMismatch,
                ErrorCode::SourceTopicDeleted,
                ErrorCode::SourceTopicRecreated,
                ErrorCode::ForeignWrite,
                ErrorCode::SourceTruncated,
                ErrorCode::DestinationDiverged,
                ErrorCode::PartitionCountDecreased,
                ErrorCode::MirrorLoop,
            ]
        );
    }

    #[test]
    fn every_code_has_a_remedy() {
        for code in ErrorCode::ALL {
            assert!(!code.remedy().is_empty(), "{code}");
        }
    }
}
