//! The mirror engine: applies the per-partition state machine (`crate::domain`) to real clusters.
//!
//! # How the API and the dashboard use it
//!
//! [`start`] loads the state from `__mirror_state`, restores every mirror and returns an
//! [`EngineHandle`]. The handle is the only way in:
//!
//! - **Commands** ([`EngineHandle::create_mirror`], [`EngineHandle::lifecycle`], ...) are
//!   messages to one coordinator task, which applies them one at a time, so two operators
//!   clicking at once never interleave half-transitions. Each lifecycle call returns per-topic
//!   outcomes ([`OpResult`]): partial success is explicit, and repeating a call is harmless
//!   (a partition already in the requested state counts as success). Stops and pauses travel
//!   on a lane of their own that the coordinator serves first, also between two topics of a
//!   long call; slow source calls (a create's connection check, a start's describes) run off
//!   the coordinator task, so neither a big start nor an unreachable source holds up a failover.
//! - **Reads** ([`EngineHandle::snapshot`]) never wait on Kafka or on the coordinator: they
//!   return the latest immutable [`Snapshot`], which the coordinator republishes after every
//!   change and every lag refresh (about once a second). `Snapshot::taken_at` says how old it is.
//!
//! Inside, the coordinator owns one data-path thread per slot (`crate::data_path`), a
//! transactional state writer, and admin clients for the destination and each source.

mod coordinator;
pub use coordinator::slot_transactional_id;
// The lineage a failback starts from, found in the source's state (issue 18).
mod failback;
pub use failback::{LineagePartition, TopicLineage};
#[cfg(test)]
mod fake;
mod metadata;
mod persist;
mod ports;
mod snapshot;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot, watch};

pub use crate::domain::Truncation;
pub use crate::domain::approval::{ApprovalAction, ApprovalPolicy, ApprovalStatus, Decision};
pub use crate::domain::config_sync::{ConfigRow, ConfigStatus};
pub use snapshot::*;
pub use snapshot::{GroupReadiness, GroupSyncView};

/// Engine settings.
#[derive(Clone)]
pub struct EngineConfig {
    /// The destination cluster (the one kmirror is attached to).
    pub destination_bootstrap: String,
    /// librdkafka client properties for the destination (TLS, SASL).
    pub destination_properties: BTreeMap<String, String>,
    /// The state topic (`__mirror_state`).
    pub state_topic: String,
    /// Partitions of the state topic when kmirror creates it.
    pub state_partitions: i32,
    /// Names this kmirror deployment (every instance of it): the slot pipes' transactional ids
    /// and the membership group derive from it, so a slot has one writer whichever instance owns it.
    pub cluster_name: String,
    /// Names this process within the deployment: its state writer's transactional id and its
    /// static group membership derive from it, so a second process with the same id fences the
    /// first.
    pub instance_id: String,
    /// How slots (state-topic partitions) are owned: all by this process, or shared with the
    /// other instances of the deployment through a consumer group (DESIGN.md section 10).
    pub ownership: Ownership,
    /// Under a backlog, a transaction commits when it is this old...
    pub commit_interval: Duration,
    /// ...while a data path that keeps up with its source commits as soon as it has caught up,
    /// at most once per this.
    pub early_commit_interval: Duration,
    /// ...or holds this many payload bytes.
    pub commit_max_bytes: usize,
    /// How often lag and offsets are refreshed for the snapshot.
    pub lag_refresh_interval: Duration,
    /// A slot's data path whose partitions have all had nothing to copy for this long is closed
    /// (its clients' per-partition state freed); the lag refresh wakes its partitions when
    /// their source has records (`coordinator::idle`). `None`: never closed.
    pub close_idle_data_paths_after: Option<Duration>,
    /// Whose source consumer a mirror's slot data paths read with.
    pub source_consumers: SourceConsumers,
    /// How often each mirror's source metadata (cluster ID, topic IDs) is re-checked.
    pub metadata_refresh_interval: Duration,
    /// Timeout of a single Kafka request.
    pub request_timeout: Duration,
    /// How FAILED partitions with a retryable error are retried (KIP-1279's
    /// `mirror.failed.retry.*`); `max_attempts` 0 leaves every FAILED partition to an operator
    /// (`topics:recover`).
    pub retry_policy: crate::domain::RetryPolicy,
    /// Seals secret property values before they are written to the state topic and opens them
    /// when read (`[secrets] key_file`): without a key, plaintext secrets are refused unless the
    /// deployment allows them (`allow_plaintext`).
    pub sealer: crate::store::seal::Sealer,
    /// Signs drill reports (HMAC-SHA-256, `[drills] signing_key_file`); without it a report
    /// carries a plain SHA-256 digest.
    pub drill_signing_key: Option<drills::DrillSigningKey>,
}

impl std::fmt::Debug for EngineConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineConfig")
            .field("destination_bootstrap", &self.destination_bootstrap)
            .field("destination_properties", &crate::domain::secrets::redact(&self.destination_properties))
            .field("state_topic", &self.state_topic)
            .field("cluster_name", &self.cluster_name)
            .field("instance_id", &self.instance_id)
            .field("ownership", &self.ownership)
            .field("secrets_key", &self.sealer.key_id())
            .finish_non_exhaustive()
    }
}

impl EngineConfig {
    /// Defaults for a destination at `bootstrap`.
    pub fn new(bootstrap: impl Into<String>) -> EngineConfig {
        EngineConfig {
            destination_bootstrap: bootstrap.into(),
            destination_properties: BTreeMap::new(),
            state_topic: "__mirror_state".to_string(),
            state_partitions: 16,
            cluster_name: "kmirror".to_string(),
            instance_id: "kmirror".to_string(),
            ownership: Ownership::Standalone,
            // Measured with scripts/bench (none-8, 2 GiB): 100 ms / 8 MiB drained at 133 MiB/s,
            // 250 ms / 64 MiB at 262 MiB/s. Every data path stops reading through each flush
            // and commit, so under a backlog fewer, longer transactions drain faster: 1000 ms
            // against 250 ms, none-8, one instance, kmirror / B 1.02 against 0.82 (session 16).
            // Latency is set by the early commits of a mirror that keeps up, which stay every
            // 50 ms (at most 20 offset-map entries per partition per second).
            commit_interval: Duration::from_millis(1000),
            early_commit_interval: Duration::from_millis(50),
            commit_max_bytes: 64 * 1024 * 1024,
            lag_refresh_interval: Duration::from_secs(1),
            close_idle_data_paths_after: Some(Duration::from_secs(60)),
            source_consumers: SourceConsumers::PerSlot,
            metadata_refresh_interval: Duration::from_secs(30),
            request_timeout: Duration::from_secs(30),
            retry_policy: crate::domain::RetryPolicy::DEFAULT,
            sealer: crate::store::seal::Sealer::default(),
            drill_signing_key: None,
        }
    }
}

/// Whose source consumer a mirror's slot data paths read with (`engine.source_consumers`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceConsumers {
    /// One consumer per data path: each knows every partition of the topics it reads, so an
    /// instance's consumers hold slots x partitions between them.
    PerSlot,
    /// One consumer per mirror in each instance, shared by its slot data paths (each reads its
    /// own queue of it): the consumers hold the mirror's partitions once.
    PerMirror,
}

impl SourceConsumers {
    /// The configuration value.
    pub fn as_str(self) -> &'static str {
        match self {
            SourceConsumers::PerSlot => "per-slot",
            SourceConsumers::PerMirror => "per-mirror",
        }
    }

    pub fn parse(value: &str) -> Option<SourceConsumers> {
        [SourceConsumers::PerSlot, SourceConsumers::PerMirror].into_iter().find(|c| c.as_str() == value)
    }
}

/// Who owns the slots (partitions of the state topic) and therefore mirrors their partitions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ownership {
    /// This process owns every slot (one instance; the engine's own tests).
    Standalone,
    /// Slots are assigned by a consumer group of every instance with the same cluster name.
    Group {
        /// Without a heartbeat for this long an instance's slots move to the others.
        session_timeout: Duration,
        /// Where this instance's API is reachable, for the instances view.
        advertised_url: Option<String>,
    },
}

/// Where a mirror reads from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceSpec {
    pub bootstrap_servers: String,
    /// librdkafka client properties (security.protocol, sasl.*, ssl.*). Secrets are write-only.
    #[serde(default)]
    pub properties: BTreeMap<String, String>,
}

/// What the MirrorMetadataManager syncs for a mirror (DESIGN.md section 7).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SyncSpec {
    /// Copy allowed topic configs (see `domain::config_sync`) from source to mirror topics.
    pub topic_configs: bool,
    /// Translate and copy committed consumer-group offsets.
    pub group_offsets: bool,
    /// Copy ACLs of mirrored topics and synced groups (never ALLOW WRITE on mirror topics).
    pub acls: bool,
    /// Groups to sync: regexes matched against whole group names.
    pub group_include: Vec<String>,
    /// Groups never synced (wins over `group_include`).
    pub group_exclude: Vec<String>,
}

impl Default for SyncSpec {
    fn default() -> Self {
        SyncSpec {
            topic_configs: true,
            group_offsets: true,
            acls: true,
            group_include: vec![".*".to_string()],
            group_exclude: Vec::new(),
        }
    }
}

/// A mirror's definition as an operator gives it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MirrorSpec {
    pub name: String,
    pub source: SourceSpec,
    /// The source cluster ID the mirror must see; recorded from the source on creation if absent.
    #[serde(default)]
    pub expected_source_cluster_id: Option<String>,
    /// What metadata to sync (all kinds, all groups by default).
    #[serde(default)]
    pub sync: SyncSpec,
    /// Caps the record bytes each instance copies for this mirror per second (KIP-1279's
    /// `mirror.replication.throttled.rate`); `None` copies as fast as it can.
    #[serde(default)]
    pub replication_throttle_bytes_per_sec: Option<u64>,
    /// Source topics discovery starts (KIP-1279's `topics.include`): whole-name patterns; empty:
    /// only topics someone starts.
    #[serde(default)]
    pub topic_include: Vec<String>,
    /// Source topics never started, and mirrored topics stopped when they come to match
    /// (`topics.exclude`; wins over `topic_include`).
    #[serde(default = "crate::domain::topic_policy::default_exclude")]
    pub topic_exclude: Vec<String>,
    /// Which calls need a second person's approval (none by default).
    #[serde(default)]
    pub approval: ApprovalPolicy,
}

/// A change to a mirror's definition; `None` fields are left alone.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MirrorUpdate {
    pub source: Option<SourceSpec>,
    pub expected_source_cluster_id: Option<String>,
    pub sync: Option<SyncSpec>,
    /// A new throttle; `Some(0)` removes it.
    pub replication_throttle_bytes_per_sec: Option<u64>,
    /// A new include list (replaces the old one).
    pub topic_include: Option<Vec<String>>,
    /// A new exclude list (replaces the old one).
    pub topic_exclude: Option<Vec<String>>,
    /// A new approval policy (an empty `required_for` needs approval for nothing).
    pub approval: Option<ApprovalPolicy>,
}

/// Which topics a lifecycle call is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TopicSelector {
    /// At most [`MAX_TOPICS_PER_CALL`] names.
    Names(Vec<String>),
    /// A regex matched against whole topic names (source topics for start, mirror topics
    /// otherwise), matching any number of topics.
    Pattern(String),
    /// Every topic of the mirror, however many (not for a start).
    All,
}

/// A lifecycle operation on topics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LifecycleOp {
    /// Start (or restart a STOPPED topic in the same direction).
    Start {
        truncation: Truncation,
    },
    Pause,
    Resume,
    /// Failover: the topic becomes an ordinary writable topic on the destination.
    Stop,
    /// Retry the topic's FAILED partitions now (KIP-1279's `RecoverMirrorTopics`): whatever
    /// their error, automatic retries left or not, each goes back to what it was doing with its
    /// retry count reset; its checks run again.
    Recover,
}

impl LifecycleOp {
    /// The call it makes on each topic (`domain::topic_call`).
    pub fn call(self) -> crate::domain::topic_call::TopicCall {
        use crate::domain::topic_call::TopicCall;
        match self {
            LifecycleOp::Start { .. } => TopicCall::Start,
            LifecycleOp::Pause => TopicCall::Pause,
            LifecycleOp::Resume => TopicCall::Resume,
            LifecycleOp::Stop => TopicCall::Stop,
            LifecycleOp::Recover => TopicCall::Recover,
        }
    }

    /// The operation kind it is recorded as.
    pub fn kind(self) -> OperationKind {
        match self {
            LifecycleOp::Start { .. } => OperationKind::Start,
            LifecycleOp::Pause => OperationKind::Pause,
            LifecycleOp::Resume => OperationKind::Resume,
            LifecycleOp::Stop => OperationKind::Stop,
            LifecycleOp::Recover => OperationKind::Recover,
        }
    }

    /// The partition event it applies.
    pub fn event_kind(self) -> crate::domain::EventKind {
        use crate::domain::EventKind;
        match self {
            LifecycleOp::Start { .. } => EventKind::Start,
            LifecycleOp::Pause => EventKind::Pause,
            LifecycleOp::Resume => EventKind::Resume,
            LifecycleOp::Stop => EventKind::Stop,
            LifecycleOp::Recover => EventKind::Recover,
        }
    }

    /// Its slug (`start`, `pause`, `resume`, `stop`, `recover`).
    pub fn name(self) -> &'static str {
        self.kind().as_str()
    }
}

// The problem table (slug, HTTP status, title) lives in `problem.rs`.
mod problem;
pub use problem::ProblemKind;
// What a recorded operation did.
mod operation;
pub use operation::OperationKind;
// Two-person approval of destructive calls.
mod approvals;
pub use approvals::{ApprovalRecord, Executed, Gate, PendingCall};
// Disaster-recovery drills on a canary topic.
mod drills;
pub use drills::{DrillOptions, DrillSigningKey, DrillStep, DrillView, default_canary};

/// A per-topic failure of a lifecycle call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Problem {
    pub kind: ProblemKind,
    pub detail: String,
}

/// One topic's outcome of a lifecycle call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicOutcome {
    pub topic: String,
    pub ok: bool,
    pub error: Option<Problem>,
}

/// The result of a lifecycle call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpResult {
    pub operation_id: String,
    pub results: Vec<TopicOutcome>,
    /// A start with `resync` + `quarantine`: per topic that succeeded, what the quarantine
    /// copied per partition (`validate_only`: what it would copy).
    #[serde(default)]
    pub quarantined: BTreeMap<String, Vec<crate::domain::quarantine::QuarantinedPartition>>,
    /// `validate_only` of a start that is a failback (issue 18): per topic, the lineage adopted
    /// and what each partition will copy.
    #[serde(default)]
    pub failback: BTreeMap<String, crate::domain::lineage::FailbackPreview>,
    /// The pattern the call added to the mirror's topic policy: a start with a pattern adds it to
    /// `topic_include` (discovery then starts topics created later that match it), a stop with
    /// `exclude` to `topic_exclude`. `None` when nothing was added (no pattern, already there,
    /// `validate_only`).
    #[serde(default)]
    pub saved_pattern: Option<SavedPattern>,
    /// Per topic, what the operator should know beyond "accepted" (e.g. a pause of a topic
    /// with FAILED partitions: they stay FAILED and pause when retried).
    #[serde(default)]
    pub notes: BTreeMap<String, String>,
    /// A promote ([`EngineHandle::promote`]): per topic, its partitions whose source holds records
    /// the destination does not have. When the promote timed out (nothing was stopped), those
    /// still behind; after a promote that stopped the topics, records written to the source
    /// after its final check (none when producers were stopped first).
    #[serde(default)]
    pub behind: BTreeMap<String, Vec<PartitionBehind>>,
}

/// A pattern a lifecycle call saved in the mirror's topic policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedPattern {
    /// `topic_include` or `topic_exclude`.
    pub list: String,
    pub pattern: String,
}

/// The identity discovery acts as in the operation log and the audit trail.
pub const DISCOVERY_ACTOR: &str = "discovery";

impl Actor {
    /// Discovery: the mirror's topic policy carried out by kmirror itself.
    #[must_use]
    pub fn discovery() -> Actor {
        Actor { identity: DISCOVERY_ACTOR.to_string(), address: None }
    }
}

/// One partition whose source holds records the destination does not have (see
/// [`OpResult::behind`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionBehind {
    pub partition: i32,
    pub state: crate::domain::PartitionState,
    /// The source's last stable offset, read for the check (`None`: the source did not answer).
    pub source_last_stable_offset: Option<i64>,
    /// The next source offset the destination is missing: everything before it is mirrored
    /// (`None`: nothing mirrored yet).
    pub mirrored_source_offset: Option<i64>,
    /// Source records (offsets) not on the destination; `None` when the source did not answer.
    pub lag_records: Option<i64>,
}

/// How long a promote waits for its partitions to catch up when the caller does not say.
pub const PROMOTE_DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// The longest a promote may wait.
pub const PROMOTE_MAX_TIMEOUT: Duration = Duration::from_secs(600);

/// A recorded operation: a lifecycle call or a mirror change, with who asked and the outcome.
/// This is the audit trail; it is stored durably in `__mirror_state`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperationView {
    pub id: String,
    pub mirror: String,
    pub kind: OperationKind,
    pub topics: Vec<String>,
    pub requested_by: String,
    pub client_address: Option<String>,
    /// Milliseconds since the epoch.
    pub requested_at: i64,
    pub finished_at: Option<i64>,
    pub results: Vec<TopicOutcome>,
    /// Per-topic results left out of `results` to keep the operation's record within the state
    /// topic's message size (failures are kept first): how many succeeded and failed.
    #[serde(default)]
    pub results_omitted: OmittedResults,
    /// The instance that accepted the call (its partitions' owners carry it out).
    pub accepted_by: Option<String>,
}

/// Counts of per-topic results an operation's record does not hold (see
/// [`OperationView::results_omitted`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OmittedResults {
    pub ok: u64,
    pub failed: u64,
}

/// Who asked (for the audit trail).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Actor {
    pub identity: String,
    pub address: Option<String>,
}

/// Errors of whole engine calls (per-topic problems are in [`OpResult`]).
#[derive(Debug, Clone, thiserror::Error)]
pub enum EngineError {
    #[error("{detail}")]
    Rejected { kind: ProblemKind, detail: String },
    #[error("the destination cluster is unavailable: {0}")]
    Destination(String),
    #[error("the engine is shutting down")]
    ShuttingDown,
    /// This instance cannot join the instances already running (startup only).
    #[error("incompatible with the running instances: {0}")]
    Incompatible(String),
}

impl EngineError {
    pub fn kind(&self) -> ProblemKind {
        match self {
            EngineError::Rejected { kind, .. } => *kind,
            EngineError::Destination(_) => ProblemKind::DestinationUnavailable,
            EngineError::ShuttingDown => ProblemKind::ShuttingDown,
            EngineError::Incompatible(_) => ProblemKind::Internal,
        }
    }

    pub(crate) fn rejected(kind: ProblemKind, detail: impl Into<String>) -> EngineError {
        EngineError::Rejected { kind, detail: detail.into() }
    }

    /// A call named a mirror this deployment does not have.
    pub(crate) fn mirror_not_found(mirror: &str) -> EngineError {
        EngineError::rejected(ProblemKind::MirrorNotFound, format!("mirror {mirror:?} does not exist"))
    }
}

/// Checks client properties before they are stored: the allow list, the reference policy, and
/// librdkafka's own check of each value. The error names a property, never a value.
pub fn check_client_properties(properties: &BTreeMap<String, String>) -> Result<(), EngineError> {
    crate::kafka::client::check_properties(properties)
        .map_err(|e| EngineError::rejected(ProblemKind::InvalidProperty, e))
}

/// The most topics one lifecycle call may name. It bounds the request body and a start's list: the
/// coordinator applies one call's topics one after another (a start of 300 new topics takes
/// seconds), so an unbounded list (20,000 names ran for 17 minutes) would hold every other start,
/// create and refresh for that long; stops and pauses do not wait for it (they go first, between
/// two topics). A `pattern`, or `all` (every topic of the mirror), is not capped: an operator who
/// selects all of a mirror's 5,000 topics means all of them.
pub const MAX_TOPICS_PER_CALL: usize = 1_000;

/// The most group patterns a mirror's `sync.group_include` or `sync.group_exclude` may hold: each
/// is matched against every consumer group of the source on every metadata refresh.
pub const MAX_GROUP_PATTERNS: usize = 100;

/// Checks a named list's length against [`MAX_TOPICS_PER_CALL`].
pub fn check_topic_count(count: usize) -> Result<(), EngineError> {
    if count > MAX_TOPICS_PER_CALL {
        return Err(EngineError::rejected(
            ProblemKind::TooManyTopics,
            format!(
                "the call is about {count} topics; at most {MAX_TOPICS_PER_CALL} are allowed per call: split it into several calls"
            ),
        ));
    }
    Ok(())
}

/// Checks a mirror's group patterns before anything is stored or any Kafka call is made: each
/// list within [`MAX_GROUP_PATTERNS`], each a valid regex.
/// Checks a replication throttle (`None` or 0: none).
pub fn check_throttle(rate: Option<u64>) -> Result<(), EngineError> {
    crate::domain::throttle::check_rate(rate).map_err(|e| EngineError::rejected(ProblemKind::InvalidSetting, e))
}

pub fn check_group_patterns(sync: &SyncSpec) -> Result<(), EngineError> {
    for (field, list) in [("group_include", &sync.group_include), ("group_exclude", &sync.group_exclude)] {
        if list.len() > MAX_GROUP_PATTERNS {
            return Err(EngineError::rejected(
                ProblemKind::TooManyTopics,
                format!("sync.{field} has {} patterns; at most {MAX_GROUP_PATTERNS} are allowed", list.len()),
            ));
        }
    }
    for re in sync.group_include.iter().chain(&sync.group_exclude) {
        crate::domain::name_pattern::NamePattern::new(re).map_err(|e| {
            EngineError::rejected(ProblemKind::InvalidPattern, format!("invalid group pattern {re:?}: {}", e.reason))
        })?;
    }
    Ok(())
}

/// Checks a mirror's topic policy before anything is stored: each list within
/// [`crate::domain::topic_policy::MAX_PATTERNS`], each pattern valid.
pub fn check_topic_policy(include: &[String], exclude: &[String]) -> Result<(), EngineError> {
    crate::domain::topic_policy::TopicPolicy::new(include, exclude)
        .map(|_| ())
        .map_err(|e| EngineError::rejected(ProblemKind::InvalidPattern, e.to_string()))
}

/// Validates a mirror name: `[a-zA-Z0-9._-]{1,249}`.
pub fn validate_mirror_name(name: &str) -> Result<(), EngineError> {
    if name.is_empty()
        || name == "."
        || name == ".."
        || name.len() > 249
        || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
    {
        return Err(EngineError::rejected(
            ProblemKind::InvalidName,
            format!("invalid mirror name {name:?}: use 1 to 249 characters from [a-zA-Z0-9._-]"),
        ));
    }
    Ok(())
}

/// Validates a Kafka topic name (Kafka's own rules).
pub fn validate_topic_name(name: &str) -> Result<(), EngineError> {
    let bad =
        |why: &str| Err(EngineError::rejected(ProblemKind::InvalidName, format!("invalid topic name {name:?}: {why}")));
    if name.is_empty() {
        return bad("empty");
    }
    if name == "." || name == ".." {
        return bad("'.' and '..' are not allowed");
    }
    if name.len() > 249 {
        return bad("longer than 249 characters");
    }
    if !name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b)) {
        return bad("use only [a-zA-Z0-9._-]");
    }
    Ok(())
}

/// Whether `name` is an internal topic that no mirror may start: Kafka's and kmirror's own
/// (names starting with `__`: `__consumer_offsets`, `__transaction_state`, `__mirror_state`)
/// and the configured state topic, whatever its name.
pub fn is_internal_topic(name: &str, state_topic: &str) -> bool {
    name.starts_with("__") || name == state_topic
}

/// Refuses to start a topic the mirror's topic policy excludes, naming the pattern.
pub(crate) fn check_not_excluded(
    name: &str,
    policy: &crate::domain::topic_policy::TopicPolicy,
) -> Result<(), EngineError> {
    match policy.excluded_by(name) {
        None => Ok(()),
        Some(p) => Err(EngineError::rejected(
            ProblemKind::TopicExcluded,
            format!(
                "topic {name:?} matches the mirror's topic_exclude pattern {p:?}: remove the pattern from topic_exclude to start it"
            ),
        )),
    }
}

/// Refuses to start an internal topic ([`is_internal_topic`]), with the reason.
pub fn check_not_internal(name: &str, state_topic: &str) -> Result<(), EngineError> {
    if !is_internal_topic(name, state_topic) {
        return Ok(());
    }
    let what = if name == state_topic {
        "it is kmirror's state topic".to_string()
    } else {
        "it is an internal topic (the name starts with \"__\")".to_string()
    };
    Err(EngineError::rejected(
        ProblemKind::InvalidName,
        format!("topic {name:?} cannot be mirrored: {what}; internal topics are never mirrored"),
    ))
}

// One message per API call or timer, moved once into the coordinator's queue: a few hundred
// bytes more per message is not worth boxing every variant.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Request {
    CreateMirror {
        spec: MirrorSpec,
        actor: Actor,
        reply: oneshot::Sender<Result<(), EngineError>>,
    },
    UpdateMirror {
        name: String,
        update: MirrorUpdate,
        actor: Actor,
        reply: oneshot::Sender<Result<(), EngineError>>,
    },
    DeleteMirror {
        name: String,
        actor: Actor,
        reply: oneshot::Sender<Result<(), EngineError>>,
    },
    Lifecycle(LifecycleCall),
    RefreshNow {
        mirror: String,
        reply: oneshot::Sender<Result<(), EngineError>>,
    },
    Lineage {
        mirror: String,
        topic: String,
        reply: oneshot::Sender<Result<Option<TopicLineage>, EngineError>>,
    },
    TopicConfigs {
        mirror: String,
        topic: String,
        reply: oneshot::Sender<Result<Vec<ConfigRow>, EngineError>>,
    },
    PreviewPolicy {
        mirror: String,
        policy: crate::domain::topic_policy::TopicPolicy,
        reply: oneshot::Sender<Result<crate::domain::topic_policy::Plan, EngineError>>,
    },
    Shutdown {
        reply: oneshot::Sender<()>,
    },
    /// Writes an audit record (an approval request, decision or break-glass entry, a drill).
    RecordOperation {
        op: OperationView,
        approval: Option<ApprovalRecord>,
        reply: oneshot::Sender<Result<(), EngineError>>,
    },
    /// Writes a drill's record (its progress, then its report).
    RecordDrill {
        value: crate::store::DrillValue,
        reply: oneshot::Sender<Result<(), EngineError>>,
    },
    /// What a drill needs of a mirror: its source connection (secrets opened) and the clusters.
    DrillTarget {
        mirror: String,
        reply: oneshot::Sender<Result<drills::DrillTarget, EngineError>>,
    },
    /// Removes a STOPPED topic from a mirror (a drill's canary, once it failed over).
    ForgetTopic {
        mirror: String,
        topic: String,
        reply: oneshot::Sender<Result<(), EngineError>>,
    },
}

/// One lifecycle call as the coordinator receives it (and as a start keeps it while its source
/// survey runs off the loop).
#[derive(Debug)]
pub(crate) struct LifecycleCall {
    mirror: String,
    selector: TopicSelector,
    op: LifecycleOp,
    validate_only: bool,
    /// A promote: stop only once every partition caught up, waiting at most this long.
    promote: Option<Duration>,
    actor: Actor,
    reply: oneshot::Sender<Result<OpResult, EngineError>>,
    /// Who makes the call: an operator (recorded as its own operation; a pattern is saved in the
    /// topic policy) or discovery (its run records one operation for all its batches).
    origin: CallOrigin,
}

/// How a lifecycle call is recorded and what it does to the topic policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CallOrigin {
    /// A call of its own (the API, the dashboard, a discovery stop): recorded as its own
    /// operation; a start with a pattern saves it in `topic_include`.
    Single {
        /// A stop that also adds its topics (a pattern, or each name) to `topic_exclude`.
        exclude: bool,
    },
    /// One batch of a discovery run's starts: the run records one operation for all of them.
    DiscoveryBatch,
}

/// See [`EngineHandle::offset_map_extent`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffsetMapExtent {
    /// Runs held (about one per transaction that touched the partition).
    pub runs: usize,
    /// The destination offset of the first mapped record.
    pub first_destination_offset: i64,
    /// The destination offset just after the last mapped record.
    pub destination_end: i64,
}

/// The engine's command handle and snapshot reader. Cheap to clone.
#[derive(Clone)]
pub struct EngineHandle {
    tx: mpsc::Sender<Request>,
    /// Stops (failover) and pauses: the coordinator serves this lane first, also between two
    /// topics of a long call on the other one, so they never wait behind a slow start.
    priority_tx: mpsc::Sender<Request>,
    snapshot: watch::Receiver<Arc<Snapshot>>,
    offset_maps: persist::OffsetMaps,
    operations: persist::Operations,
    /// Approval records by the ID of the operation record that carries them.
    approvals: approvals::Approvals,
    /// One decision at a time on this instance (a request is never run twice from here).
    deciding: Arc<tokio::sync::Mutex<()>>,
}

impl std::fmt::Debug for EngineHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineHandle").finish_non_exhaustive()
    }
}

impl EngineHandle {
    async fn call<T>(
        &self,
        make: impl FnOnce(oneshot::Sender<Result<T, EngineError>>) -> Request,
    ) -> Result<T, EngineError> {
        self.call_on(&self.tx, make).await
    }

    async fn call_on<T>(
        &self,
        lane: &mpsc::Sender<Request>,
        make: impl FnOnce(oneshot::Sender<Result<T, EngineError>>) -> Request,
    ) -> Result<T, EngineError> {
        let (reply, rx) = oneshot::channel();
        lane.send(make(reply)).await.map_err(|_| EngineError::ShuttingDown)?;
        rx.await.map_err(|_| EngineError::ShuttingDown)?
    }

    /// Creates a mirror. Checks that the source answers and records its cluster ID when no
    /// expected one is given.
    pub async fn create_mirror(&self, spec: MirrorSpec, actor: Actor) -> Result<(), EngineError> {
        // Before anything is stored or any client is built: a refused property (code loading, a
        // typo, a reference the policy does not allow) must never reach librdkafka or the state.
        check_client_properties(&spec.source.properties)?;
        self.call(|reply| Request::CreateMirror { spec, actor, reply }).await
    }

    /// Changes a mirror's source connection or expected cluster ID.
    pub async fn update_mirror(&self, name: &str, update: MirrorUpdate, actor: Actor) -> Result<(), EngineError> {
        if let Some(source) = &update.source {
            // `[redacted]` keeps the stored secret (merged by the coordinator): check the rest.
            let given: BTreeMap<String, String> = source
                .properties
                .iter()
                .filter(|(_, v)| v.as_str() != crate::domain::secrets::REDACTED)
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            check_client_properties(&given)?;
        }
        let name = name.to_string();
        self.call(|reply| Request::UpdateMirror { name, update, actor, reply }).await
    }

    /// Deletes a mirror; refused while any of its topics is not STOPPED.
    pub async fn delete_mirror(&self, name: &str, actor: Actor) -> Result<(), EngineError> {
        let name = name.to_string();
        self.call(|reply| Request::DeleteMirror { name, actor, reply }).await
    }

    /// Starts, pauses, resumes or stops topics of a mirror: at most [`MAX_TOPICS_PER_CALL`] named,
    /// any number matched by a pattern or selected by [`TopicSelector::All`] (not for a start).
    /// Stops and pauses are served before other commands and between the topics of a long one.
    pub async fn lifecycle(
        &self,
        mirror: &str,
        selector: TopicSelector,
        op: LifecycleOp,
        validate_only: bool,
        actor: Actor,
    ) -> Result<OpResult, EngineError> {
        self.send_lifecycle(mirror, selector, op, validate_only, None, false, actor).await
    }

    /// Queues one operator's lifecycle call: a named list over the cap is refused before it
    /// queues anywhere (nothing here needs Kafka); stops and pauses take the priority lane.
    #[allow(clippy::too_many_arguments)]
    async fn send_lifecycle(
        &self,
        mirror: &str,
        selector: TopicSelector,
        op: LifecycleOp,
        validate_only: bool,
        promote: Option<Duration>,
        exclude: bool,
        actor: Actor,
    ) -> Result<OpResult, EngineError> {
        if let TopicSelector::Names(names) = &selector {
            check_topic_count(names.len())?;
        }
        let mirror = mirror.to_string();
        // A stop is a failover and a pause often comes just before one: neither may wait behind a
        // long start or a create whose source does not answer.
        let lane = match op {
            LifecycleOp::Stop | LifecycleOp::Pause => &self.priority_tx,
            LifecycleOp::Start { .. } | LifecycleOp::Resume | LifecycleOp::Recover => &self.tx,
        };
        self.call_on(lane, |reply| {
            Request::Lifecycle(LifecycleCall {
                mirror,
                selector,
                op,
                validate_only,
                actor,
                reply,
                promote,
                origin: CallOrigin::Single { exclude },
            })
        })
        .await
    }

    /// A planned switch-over (promote): stops the selected topics only once every one of their
    /// partitions has caught up with its source, checked against the source's last stable
    /// offsets read fresh; waits up to `timeout` ([`PROMOTE_MAX_TIMEOUT`] at most) for that. If the
    /// timeout passes first nothing is stopped, and the answer lists the partitions still behind
    /// ([`OpResult::behind`], `not-caught-up` per topic). Other commands, stops and pauses
    /// included, are served while it waits.
    ///
    /// What is guaranteed: every record the source had committed when kmirror made its final
    /// check is on the destination when the topics stop; the data path commits (instead of
    /// aborting) what it read after the check, and a record written after that is reported in
    /// the answer (`behind` of a topic that stopped). With producers stopped first (the runbook),
    /// nothing is lost.
    pub async fn promote(
        &self,
        mirror: &str,
        selector: TopicSelector,
        timeout: Duration,
        actor: Actor,
    ) -> Result<OpResult, EngineError> {
        let promote = Some(timeout.min(PROMOTE_MAX_TIMEOUT));
        self.send_lifecycle(mirror, selector, LifecycleOp::Stop, false, promote, false, actor).await
    }

    /// A stop as the caller asked it: plain, adding its topics to the topic policy's exclusions,
    /// or a promote (once every partition caught up, waiting at most `promote`). The API and an
    /// approved request run stops through here.
    pub async fn stop_as_asked(
        &self,
        mirror: &str,
        selector: TopicSelector,
        exclude: bool,
        promote: Option<Duration>,
        actor: Actor,
    ) -> Result<OpResult, EngineError> {
        match promote {
            Some(timeout) => self.promote(mirror, selector, timeout, actor).await,
            None if exclude => self.stop_and_exclude(mirror, selector, false, actor).await,
            None => self.lifecycle(mirror, selector, LifecycleOp::Stop, false, actor).await,
        }
    }

    /// A stop (failover) that also adds its topics to the mirror's `topic_exclude` (the pattern,
    /// or each name as a literal pattern), so discovery never starts them again.
    pub async fn stop_and_exclude(
        &self,
        mirror: &str,
        selector: TopicSelector,
        validate_only: bool,
        actor: Actor,
    ) -> Result<OpResult, EngineError> {
        self.send_lifecycle(mirror, selector, LifecycleOp::Stop, validate_only, None, true, actor).await
    }

    /// What `topic_include` / `topic_exclude` would do now: the source's topics are listed (off
    /// the engine's loop) and the same plan a discovery run makes is returned, without starting
    /// or stopping anything. Refused topics are not held back (a policy change retries them).
    pub async fn preview_policy(
        &self,
        mirror: &str,
        include: Vec<String>,
        exclude: Vec<String>,
    ) -> Result<crate::domain::topic_policy::Plan, EngineError> {
        let policy = crate::domain::topic_policy::TopicPolicy::new(&include, &exclude)
            .map_err(|e| EngineError::rejected(ProblemKind::InvalidPattern, e.to_string()))?;
        let mirror = mirror.to_string();
        self.call(|reply| Request::PreviewPolicy { mirror, policy, reply }).await
    }

    /// What the mirror's source cluster's state says about `topic`'s way back (issue 18): the
    /// mirror there that copied it from this cluster, per partition. Reads the source's state
    /// topic (off the engine's loop); `None` when no mirror there has the topic.
    pub async fn lineage(&self, mirror: &str, topic: &str) -> Result<Option<TopicLineage>, EngineError> {
        let (mirror, topic) = (mirror.to_string(), topic.to_string());
        self.call(|reply| Request::Lineage { mirror, topic, reply }).await
    }

    /// A mirror topic's configs beside its source topic's, read from both clusters now (off the
    /// coordinator's loop), with what the topic-config sync makes of each.
    pub async fn topic_configs(&self, mirror: &str, topic: &str) -> Result<Vec<ConfigRow>, EngineError> {
        let (mirror, topic) = (mirror.to_string(), topic.to_string());
        self.call(|reply| Request::TopicConfigs { mirror, topic, reply }).await
    }

    /// Re-checks a mirror's source metadata now instead of at the next refresh.
    pub async fn refresh_now(&self, mirror: &str) -> Result<(), EngineError> {
        let mirror = mirror.to_string();
        self.call(|reply| Request::RefreshNow { mirror, reply }).await
    }

    /// The latest snapshot. Never blocks on Kafka.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.snapshot.borrow().clone()
    }

    /// Translates a source offset of a mirrored partition to the destination offset of the first
    /// mirrored record with a source offset at or after it (exact: DESIGN.md section 4). `None`
    /// when the partition is unknown or nothing has been mirrored.
    pub fn translate_offset(&self, mirror: &str, topic: &str, partition: i32, source_offset: i64) -> Option<i64> {
        let maps = self.offset_maps.read().unwrap_or_else(|e| e.into_inner());
        maps.get(&(mirror.to_string(), topic.to_string(), partition))?.translate(source_offset).map(|t| t.offset())
    }

    /// What a partition's offset map holds: its run count and the destination offsets it spans
    /// (pruning moves the first up with the destination's log start). `None` when the partition is
    /// unknown or nothing has been mirrored.
    pub fn offset_map_extent(&self, mirror: &str, topic: &str, partition: i32) -> Option<OffsetMapExtent> {
        let maps = self.offset_maps.read().unwrap_or_else(|e| e.into_inner());
        let map = maps.get(&(mirror.to_string(), topic.to_string(), partition))?;
        Some(OffsetMapExtent {
            runs: map.len(),
            first_destination_offset: map.first()?.destination_start,
            destination_end: map.destination_end()?,
        })
    }

    /// Recorded operations, newest first (at most the last 1,000 are kept in memory).
    pub fn operations(&self) -> Vec<OperationView> {
        let ops = self.operations.read().unwrap_or_else(|e| e.into_inner());
        ops.iter().rev().cloned().collect()
    }

    /// One recorded operation.
    pub fn operation(&self, id: &str) -> Option<OperationView> {
        let ops = self.operations.read().unwrap_or_else(|e| e.into_inner());
        ops.iter().find(|o| o.id == id).cloned()
    }

    /// A receiver that is notified whenever a new snapshot is published.
    pub fn subscribe(&self) -> watch::Receiver<Arc<Snapshot>> {
        self.snapshot.clone()
    }

    /// Stops every data path (open transactions are aborted: committed state is final) and
    /// ends the engine task.
    pub async fn shutdown(&self) {
        let (reply, rx) = oneshot::channel();
        if self.tx.send(Request::Shutdown { reply }).await.is_ok() {
            let _ = rx.await;
        }
    }
}

/// Starts the engine: creates the state topic if needed, loads the state, fences any earlier
/// instance, restores every mirror and starts the coordinator task.
pub async fn start(config: EngineConfig) -> Result<(EngineHandle, tokio::task::JoinHandle<()>), EngineError> {
    coordinator::start(config).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_validated() {
        assert!(validate_mirror_name("prod-eu_1.a").is_ok());
        for bad in ["", "a b", "x/y", &"a".repeat(250), "é"] {
            assert_eq!(validate_mirror_name(bad).unwrap_err().kind(), ProblemKind::InvalidName, "{bad:?}");
        }
        assert!(validate_topic_name("orders.v1-eu_2").is_ok());
        for bad in ["", ".", "..", "a b", "<script>", &"t".repeat(250)] {
            assert!(validate_topic_name(bad).is_err(), "{bad:?}");
        }
    }
}
