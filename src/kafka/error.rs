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
///
/// Displayed with every secret value this process gave a client scrubbed out
/// (`client::scrub_secrets`): a broker's or librdkafka's message may quote a property value, and
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
        f.write_str(&super::client::scrub_secrets(&text))
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
