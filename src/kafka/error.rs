//! Typed errors of the Kafka layer. They carry the Kafka error code (as a number and as the
//! librdkafka name, e.g. `TOPIC_AUTHORIZATION_FAILED`), the resource the call was about and the
//! broker's message, so callers above this module never need an rdkafka type to classify them.

use std::time::Duration;

/// The Kafka error codes kmirror decides on, mapped once from librdkafka's names
/// ([`KafkaErrorKind::of`]); callers match on these, never on a name or a message text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KafkaErrorKind {
    /// `UNKNOWN_TOPIC_OR_PART`: the topic (or partition) does not exist.
    UnknownTopicOrPartition,
    /// `UNKNOWN_TOPIC_ID`: no topic with that ID.
    UnknownTopicId,
    /// `_UNKNOWN_TOPIC`, `_UNKNOWN_PARTITION`: librdkafka's own "not in the metadata".
    UnknownTopicLocal,
    /// `TOPIC_AUTHORIZATION_FAILED`, `CLUSTER_AUTHORIZATION_FAILED`: an ACL denies the call.
    AuthorizationFailed,
    /// `POLICY_VIOLATION`: a broker-side policy refused the request.
    PolicyViolation,
    /// `TOPIC_ALREADY_EXISTS`.
    TopicAlreadyExists,
    /// `INVALID_PARTITIONS`: e.g. the topic already has at least that many partitions.
    InvalidPartitions,
    /// `INVALID_REQUEST`: the broker does not take the request in this form.
    InvalidRequest,
    /// `SECURITY_DISABLED`: no authorizer (ACL calls are not served).
    SecurityDisabled,
    /// `UNSUPPORTED_VERSION`: the broker does not serve this API version.
    UnsupportedVersion,
    /// `_UNSUPPORTED_FEATURE`: librdkafka knows the broker lacks the API.
    UnsupportedFeature,
    /// `_AUTHENTICATION`: SASL authentication failed.
    Authentication,
    /// `_SSL`: the TLS handshake failed.
    Ssl,
    /// `_TIMED_OUT`, `_TIMED_OUT_QUEUE`, `REQUEST_TIMED_OUT`: no answer in time.
    TimedOut,
    /// `_FENCED`, `PRODUCER_FENCED`, `INVALID_PRODUCER_EPOCH`: a newer producer with the same
    /// transactional id took over (librdkafka reports the broker's two codes as its own
    /// `_FENCED` once it has made them fatal).
    Fenced,
    /// Any other code.
    Other,
}

impl KafkaErrorKind {
    /// The kind of a librdkafka error name.
    #[must_use]
    pub fn of(name: &str) -> Self {
        match name {
            "UNKNOWN_TOPIC_OR_PART" => Self::UnknownTopicOrPartition,
            "UNKNOWN_TOPIC_ID" => Self::UnknownTopicId,
            "_UNKNOWN_TOPIC" | "_UNKNOWN_PARTITION" => Self::UnknownTopicLocal,
            "TOPIC_AUTHORIZATION_FAILED" | "CLUSTER_AUTHORIZATION_FAILED" => Self::AuthorizationFailed,
            "POLICY_VIOLATION" => Self::PolicyViolation,
            "TOPIC_ALREADY_EXISTS" => Self::TopicAlreadyExists,
            "INVALID_PARTITIONS" => Self::InvalidPartitions,
            "INVALID_REQUEST" => Self::InvalidRequest,
            "SECURITY_DISABLED" => Self::SecurityDisabled,
            "UNSUPPORTED_VERSION" => Self::UnsupportedVersion,
            "_UNSUPPORTED_FEATURE" => Self::UnsupportedFeature,
            "_AUTHENTICATION" => Self::Authentication,
            "_SSL" => Self::Ssl,
            "_TIMED_OUT" | "_TIMED_OUT_QUEUE" | "REQUEST_TIMED_OUT" => Self::TimedOut,
            "_FENCED" | "PRODUCER_FENCED" | "INVALID_PRODUCER_EPOCH" => Self::Fenced,
            _ => Self::Other,
        }
    }

    /// The topic does not exist, however the cluster or librdkafka said so.
    #[must_use]
    pub fn is_topic_gone(self) -> bool {
        matches!(self, Self::UnknownTopicOrPartition | Self::UnknownTopicId | Self::UnknownTopicLocal)
    }

    /// The broker does not offer the call at all (an old or limited cluster).
    #[must_use]
    pub fn is_unsupported(self) -> bool {
        matches!(self, Self::UnsupportedFeature | Self::UnsupportedVersion)
    }
}

/// A Kafka error code: the numeric value librdkafka reports (negative values are librdkafka's own
/// local errors such as `_TIMED_OUT`) and its symbolic name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KafkaCode {
    pub code: i32,
    pub name: String,
}

impl std::fmt::Display for KafkaCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.name, self.code)
    }
}

impl KafkaCode {
    /// What kmirror makes of this code.
    #[must_use]
    pub fn kind(&self) -> KafkaErrorKind {
        KafkaErrorKind::of(&self.name)
    }

    /// Errors a caller may retry as they are: the cluster or a broker was briefly unreachable,
    /// a leader moved, or a request timed out. Everything else needs a change before a retry helps.
    pub fn is_retryable(&self) -> bool {
        self.is_no_answer()
            || matches!(
                self.name.as_str(),
                "_WAIT_COORD"
                    | "_DESTROY"
                    | "NOT_LEADER_OR_FOLLOWER"
                    | "NOT_LEADER_FOR_PARTITION"
                    | "LEADER_NOT_AVAILABLE"
                    | "NOT_CONTROLLER"
                    | "COORDINATOR_NOT_AVAILABLE"
                    | "NOT_COORDINATOR"
                    | "COORDINATOR_LOAD_IN_PROGRESS"
                    | "NOT_ENOUGH_REPLICAS"
                    | "NOT_ENOUGH_REPLICAS_AFTER_APPEND"
                    | "KAFKA_STORAGE_ERROR"
                    | "FENCED_LEADER_EPOCH"
                    | "UNKNOWN_LEADER_EPOCH"
                    | "OFFSET_NOT_AVAILABLE"
                    | "REBALANCE_IN_PROGRESS"
                    | "THROTTLING_QUOTA_EXCEEDED"
            )
    }

    /// The cluster did not answer at all (no connection, no reply in time), as opposed to an
    /// answer about the request.
    pub fn is_no_answer(&self) -> bool {
        matches!(
            self.name.as_str(),
            "_TRANSPORT"
                | "_ALL_BROKERS_DOWN"
                | "_TIMED_OUT"
                | "_TIMED_OUT_QUEUE"
                | "_RESOLVE"
                | "REQUEST_TIMED_OUT"
                | "NETWORK_EXCEPTION"
        )
    }
}

/// What went wrong in a call to a Kafka cluster.
///
/// Displayed with every secret value this process gave a client scrubbed out
/// (`scrub::scrub_secrets`): a broker's or librdkafka's message may quote a property value, and
/// this text goes to API answers, the audit trail, the state topic and the log.
#[derive(Debug, Clone)]
pub enum KafkaError {
    /// The broker (or librdkafka) answered with an error code.
    Kafka { operation: &'static str, resource: String, code: KafkaCode, message: String },
    /// No answer within the deadline. The request may or may not have been applied.
    Timeout { operation: &'static str, resource: String, after: Duration },
    /// The request could not be built: a name with a NUL byte, an empty list, a bad config.
    InvalidArgument { operation: &'static str, message: String },
    /// The client could not be created (bad client properties, for example).
    Client(String),
    /// A blocking admin task was cancelled or panicked (the runtime is shutting down).
    Task { operation: &'static str, message: String },
}

impl std::fmt::Display for KafkaError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let text = match self {
            KafkaError::Kafka { operation, resource, code, message } => {
                format!("{operation} failed for {resource}: {code}: {message}")
            }
            KafkaError::Timeout { operation, resource, after } => {
                format!("{operation} timed out after {} (resource {resource})", humane(*after))
            }
            KafkaError::InvalidArgument { operation, message } => format!("{operation}: invalid argument: {message}"),
            KafkaError::Client(message) => format!("cannot create Kafka client: {message}"),
            KafkaError::Task { operation, message } => format!("{operation}: background task failed: {message}"),
        };
        f.write_str(&super::scrub::scrub_secrets(&text))
    }
}

impl std::error::Error for KafkaError {}

/// A duration as people write it (`10s`, `1.5s`, `250ms`), not as `Debug` does.
fn humane(d: Duration) -> String {
    if d.subsec_millis() == 0 && d.as_secs() > 0 {
        format!("{}s", d.as_secs())
    } else if d.as_secs() == 0 {
        format!("{}ms", d.as_millis())
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

impl KafkaError {
    /// The Kafka error code, when the failure came from Kafka.
    pub fn code(&self) -> Option<&KafkaCode> {
        match self {
            KafkaError::Kafka { code, .. } => Some(code),
            _ => None,
        }
    }

    /// True when retrying the same call later may succeed (see [`KafkaCode::is_retryable`]).
    pub fn is_retryable(&self) -> bool {
        match self {
            KafkaError::Kafka { code, .. } => code.is_retryable(),
            KafkaError::Timeout { .. } | KafkaError::Task { .. } => true,
            KafkaError::InvalidArgument { .. } | KafkaError::Client(_) => false,
        }
    }

    /// True when the cluster did not answer at all (no connection, no reply in time), as opposed
    /// to answering with an error about the request: the same request for another topic would
    /// not be answered either.
    pub fn is_no_answer(&self) -> bool {
        match self {
            KafkaError::Timeout { .. } => true,
            KafkaError::Kafka { code, .. } => code.is_no_answer(),
            _ => false,
        }
    }

    /// What kmirror makes of the Kafka error code, when the failure came from Kafka.
    #[must_use]
    pub fn kind(&self) -> Option<KafkaErrorKind> {
        match self {
            // librdkafka fails a request over a connection whose TLS handshake failed with `_SSL`,
            // or with `_TRANSPORT` and the broker's failure text when the request meets the
            // torn-down connection first ("...certificate verify failed (after 17ms in state
            // SSL_HANDSHAKE)"): the same cause either way.
            KafkaError::Kafka { code, message, .. }
                if code.name == "_TRANSPORT" && message.contains("in state SSL_HANDSHAKE") =>
            {
                Some(KafkaErrorKind::Ssl)
            }
            _ => self.code().map(KafkaCode::kind),
        }
    }

    /// True when Kafka answered with an error of this kind.
    #[must_use]
    pub fn is(&self, kind: KafkaErrorKind) -> bool {
        self.kind() == Some(kind)
    }
}

pub type KafkaResult<T> = Result<T, KafkaError>;

#[cfg(test)]
mod tests {
    use super::*;

    /// Every code kmirror decides on maps to its kind, and nothing else does: a caller that
    /// matched on a name before matches on the kind now.
    #[test]
    fn codes_map_once_to_kinds() {
        use KafkaErrorKind as K;
        let table = [
            ("UNKNOWN_TOPIC_OR_PART", K::UnknownTopicOrPartition),
            ("UNKNOWN_TOPIC_ID", K::UnknownTopicId),
            ("_UNKNOWN_TOPIC", K::UnknownTopicLocal),
            ("_UNKNOWN_PARTITION", K::UnknownTopicLocal),
            ("TOPIC_AUTHORIZATION_FAILED", K::AuthorizationFailed),
            ("CLUSTER_AUTHORIZATION_FAILED", K::AuthorizationFailed),
            ("POLICY_VIOLATION", K::PolicyViolation),
            ("TOPIC_ALREADY_EXISTS", K::TopicAlreadyExists),
            ("INVALID_PARTITIONS", K::InvalidPartitions),
            ("INVALID_REQUEST", K::InvalidRequest),
            ("SECURITY_DISABLED", K::SecurityDisabled),
            ("UNSUPPORTED_VERSION", K::UnsupportedVersion),
            ("_UNSUPPORTED_FEATURE", K::UnsupportedFeature),
            ("_AUTHENTICATION", K::Authentication),
            ("_SSL", K::Ssl),
            ("_TIMED_OUT", K::TimedOut),
            ("REQUEST_TIMED_OUT", K::TimedOut),
            ("_FENCED", K::Fenced),
            ("PRODUCER_FENCED", K::Fenced),
            ("INVALID_PRODUCER_EPOCH", K::Fenced),
            ("FENCED_LEADER_EPOCH", K::Other),
            ("FENCED_INSTANCE_ID", K::Other),
            ("GROUP_AUTHORIZATION_FAILED", K::Other),
            ("NOT_LEADER_OR_FOLLOWER", K::Other),
        ];
        for (name, kind) in table {
            assert_eq!(KafkaErrorKind::of(name), kind, "{name}");
            assert!(kafka(name).is(kind), "{name}");
        }
        let gone: Vec<&str> = table.iter().filter(|(_, k)| k.is_topic_gone()).map(|(n, _)| *n).collect();
        assert_eq!(gone, ["UNKNOWN_TOPIC_OR_PART", "UNKNOWN_TOPIC_ID", "_UNKNOWN_TOPIC", "_UNKNOWN_PARTITION"]);
        let timeout = KafkaError::Timeout { operation: "x", resource: "y".into(), after: Duration::from_secs(1) };
        assert_eq!(timeout.kind(), None, "not an answer from Kafka");
    }

    /// A failed TLS handshake is a TLS failure whether librdkafka fails the request with `_SSL`
    /// or with `_TRANSPORT` and the handshake's text; another transport failure is not.
    #[test]
    fn a_transport_error_in_the_tls_handshake_is_a_tls_failure() {
        let transport = |message: &str| KafkaError::Kafka {
            operation: "DescribeCluster",
            resource: "cluster".into(),
            code: KafkaCode { code: -195, name: "_TRANSPORT".into() },
            message: message.into(),
        };
        let handshake = transport(
            "ssl://127.0.0.1:19095/bootstrap: error:0A000086:SSL routines::certificate verify failed \
             (after 17ms in state SSL_HANDSHAKE)",
        );
        assert!(handshake.is(KafkaErrorKind::Ssl), "{handshake}");
        let refused =
            transport("127.0.0.1:19095/bootstrap: Connect to ipv4#127.0.0.1:19095 failed: Connection refused");
        assert_eq!(refused.kind(), Some(KafkaErrorKind::Other), "{refused}");
        assert!(refused.is_no_answer() && handshake.is_no_answer(), "the code still says no answer");
    }

    fn kafka(name: &str) -> KafkaError {
        KafkaError::Kafka {
            operation: "ListOffsets",
            resource: "t-0".into(),
            code: KafkaCode { code: -1, name: name.into() },
            message: String::new(),
        }
    }

    #[test]
    fn no_answer_is_told_from_an_answer_about_the_request() {
        let timeout = KafkaError::Timeout { operation: "ListOffsets", resource: "t-0".into(), after: Duration::ZERO };
        assert!(timeout.is_no_answer());
        for name in ["_TRANSPORT", "_ALL_BROKERS_DOWN", "_TIMED_OUT", "REQUEST_TIMED_OUT"] {
            assert!(kafka(name).is_no_answer(), "{name}");
        }
        // Answers about one topic or partition: another topic's request may well succeed.
        for name in ["UNKNOWN_TOPIC_OR_PART", "NOT_LEADER_OR_FOLLOWER", "TOPIC_AUTHORIZATION_FAILED"] {
            assert!(!kafka(name).is_no_answer(), "{name}");
        }
        assert!(!KafkaError::Client("bad config".into()).is_no_answer());
    }
}
