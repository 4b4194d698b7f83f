//! Pure domain logic: no I/O, no async runtime, no Kafka client, no clock.
//!
//! Time is always a parameter ([`Timestamp`]) and randomness arrives as a value ([`Jitter`]), so
//! every function here is deterministic and tested without fakes.
//!
//! - [`state`]: the seed's per-partition states and the topic roll-up.
//! - [`record`]: the persisted per-partition record and its positions.
//! - [`event`], [`action`]: inputs and outputs of the state machine.
//! - [`transition`](mod@transition): the state machine itself and its table.
//! - [`error_code`]: failure causes and their retry classification.
//! - [`backoff`]: retry delays.
//! - [`time`]: the timestamp type.

pub mod action;
pub mod approval;
pub mod backoff;
pub mod config_sync;
pub mod drill;
pub mod error_code;
pub mod event;
pub mod lineage;
pub mod name_pattern;
pub mod offset_map;
pub mod quarantine;
pub mod record;
pub mod secrets;
pub mod state;
pub mod throttle;
pub mod time;
pub mod topic_call;
pub mod topic_policy;
pub mod transition;

pub use action::{Action, Alert, Severity};
pub use backoff::{Backoff, Jitter, RetryPolicy};
pub use error_code::ErrorCode;
pub use event::{Event, EventKind};
pub use record::{InvalidRecord, MirrorPosition, PartitionError, PartitionRecord, StopPoint, Truncation};
pub use state::{PartitionState, StateCounts, UnknownPartitionState, roll_up};
pub use time::Timestamp;
pub use transition::{
    Rule, Step, TransitionError, recover_refusal, rule, stopping_actions, transition, transition_with, valid_from,
};
