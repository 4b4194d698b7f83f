//! The `__mirror_state` record codec and the state materialised from it (DESIGN.md §6).
//!
//! Pure: no Kafka client here. `crate::kafka::state_log` moves the bytes; this module says what
//! they mean.
//!
//! - [`records`]: the versioned canonical-JSON keys and values, [`decode`], and
//!   [`StateRecord::encode`]. The structs there are the persisted format, separate from the
//!   domain types.
//! - [`partitioning`]: which state partition a record goes to (a fixed, pinned hash).
//! - [`state`]: [`MaterializedState`], the whole state rebuilt by applying records in log order.

pub mod partitioning;
pub mod records;
pub mod seal;
pub mod state;

pub use partitioning::{mirror_partition, murmur2, state_partition};
pub use records::{
    AclBindingValue, AclOperationValue, AclPatternTypeValue, AclPermissionValue, AclResourceTypeValue,
    ApprovalCallValue, ApprovalPolicyValue, ApprovalValue, DecodeError, DesiredStateValue, DrillKey, DrillStepValue,
    DrillValue, EncodedRecord, Entry, ErrorValue, InstanceKey, InstanceValue, LastMirrorEpochsValue, LmePartitionValue,
    LmeTopicValue, MAX_PARTITION_COUNT, MAX_RECORD_LIST_LEN, MirrorKey, MirrorTopicKey, MirrorTopicValue, MirrorValue,
    OffsetRunsKey, OffsetRunsValue, OmittedResultsValue, OperationKey, OperationValue, Part, PartitionKey,
    PartitionStateValue, PositionValue, RecordKind, RunValue, SourceClusterValue, StateRecord, StopValue,
    SyncSettingsValue, TopicResultValue, TruncationValue, decode,
};
pub use state::{ApplyError, LoadError, MAX_OPERATIONS, MaterializedState, SkippedRecord};
