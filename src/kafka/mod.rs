//! The only part of kmirror that talks to Kafka: it owns every rdkafka import. Above this module,
//! Kafka results are plain owned Rust types (`types`) and errors are `KafkaError` values.
//!
//! `unsafe` is allowed in `ffi`, `admin` and `consumer` only, where librdkafka functions that
//! rdkafka 0.39 does not wrap are called; every unsafe block there carries a SAFETY comment.

pub mod admin;
pub mod client;
pub mod consumer;
pub mod drill;
pub mod error;
mod ffi;
pub mod membership;
pub mod mock;
pub mod pipe;
mod produce;
pub mod quarantine;
pub mod scan;
mod scrub;
pub mod state_log;
pub mod types;

pub use admin::KafkaAdmin;
pub use error::{KafkaCode, KafkaError, KafkaErrorKind, KafkaResult};
pub use ffi::{limit_malloc_arenas, release_freed_memory};
pub use types::*;

/// `transaction.timeout.ms` of kmirror's transactional producers (data paths, quarantine
/// copies): a transaction open longer is aborted by the broker. `config::MAX_COMMIT_INTERVAL`
/// is derived from it, so no configured transaction can come near it.
pub const TRANSACTION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);
