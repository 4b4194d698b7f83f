//! Typed errors of the Kafka layer. They carry the Kafka error code (as a number and as the
//! librdkafka name, e.g. `TOPIC_AUTHORIZATION_FAILED`), the resource the call was about and the
//! broker's message, so callers above this module never need an rdkafka type to classify them.

use std::time::Duration;

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
#[derive(Debug, Clone, thiserror::Error)]
pub enum KafkaError {
    /// The broker (or librdkafka) answered with an error code.
    #[error("{operation} failed for {resource}: {code}: {message}")]
    Kafka { operation: &'static str, resource: String, code: KafkaCode, message: String },
    /// No answer within the deadline. The request may or may not have been applied.
    #[error("{operation} timed out after {after:?} (resource {resource})")]
    Timeout { operation: &'static str, resource: String, after: Duration },
    /// The request could not be built: a name with a NUL byte, an empty list, a bad config.
    #[error("{operation}: invalid argument: {message}")]
    InvalidArgument { operation: &'static str, message: String },
    /// The client could not be created (bad client properties, for example).
    #[error("cannot create Kafka client: {0}")]
    Client(String),
    /// A blocking admin task was cancelled or panicked (the runtime is shutting down).
    #[error("{operation}: background task failed: {message}")]
    Task { operation: &'static str, message: String },
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

    /// True for the code name given (e.g. `"TOPIC_ALREADY_EXISTS"`).
    pub fn is(&self, name: &str) -> bool {
        self.code().is_some_and(|c| c.name == name)
    }
}

pub type KafkaResult<T> = Result<T, KafkaError>;

#[cfg(test)]
mod tests {
    use super::*;

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
