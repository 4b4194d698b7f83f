//! Lifecycle calls (start, pause, resume, stop, recover) and their answers.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::shared::TopicResult;

/// How a start treats destination records past the last stop point.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum TruncationMode {
    /// Refuse (the partition fails with DESTINATION_DIVERGED) when the destination has local writes.
    #[default]
    None,
    /// Delete the destination partition's records and mirror the source again from its log start.
    Resync,
}

/// `topics:start`: exactly one of `topics` and `pattern`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StartRequest {
    /// Source topic names: each once, at most 1,000 (`too-many-topics` otherwise).
    #[serde(default)]
    #[schema(max_items = 1000)]
    pub topics: Option<Vec<String>>,
    /// A regex matched against whole topic names (source topics and the mirror's topics), matching
    /// any number of topics.
    #[serde(default)]
    pub pattern: Option<String>,
    /// Only check whether the call would be accepted; change nothing.
    #[serde(default)]
    pub validate_only: bool,
    #[serde(default)]
    pub truncation: TruncationMode,
    /// With `truncation: resync`, first copy the divergent records (those after the last
    /// mirrored offset; every record when the topic has no lineage) to `<topic>.kmirror-diverged`
    /// with headers `kmirror.diverged.topic`, `.topic-id`, `.partition` and `.offset`. A copy that
    /// fails deletes nothing; a quarantine topic with foreign records is refused
    /// (`quarantine-conflict`).
    #[serde(default)]
    pub quarantine: bool,
    /// Why: required when the mirror's approval policy covers this call (a resync, a failback),
    /// which then waits for a second person (HTTP 202); kept in the audit trail.
    #[serde(default)]
    pub reason: Option<String>,
    /// Admin only: run a call the approval policy covers at once, without a second person
    /// (with a `reason`); the audit trail marks it.
    #[serde(default)]
    pub break_glass: bool,
}

/// `topics:pause`, `topics:resume`, `topics:recover`: exactly one of `topics`, `pattern` and
/// `all: true`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LifecycleRequest {
    /// Topic names of the mirror: each once, at most 1,000 (`too-many-topics` otherwise).
    #[serde(default)]
    #[schema(max_items = 1000)]
    pub topics: Option<Vec<String>>,
    /// A regex matched against whole topic names of the mirror, matching any number of topics.
    #[serde(default)]
    pub pattern: Option<String>,
    /// Every topic of the mirror, however many.
    #[serde(default)]
    pub all: bool,
    /// Only check whether the call would be accepted; change nothing.
    #[serde(default)]
    pub validate_only: bool,
    /// Why: required when the mirror's approval policy covers this call (`topics:stop`), which
    /// then waits for a second person (HTTP 202); kept in the audit trail.
    #[serde(default)]
    pub reason: Option<String>,
    /// Admin only: run a call the approval policy covers at once, without a second person
    /// (with a `reason`); the audit trail marks it.
    #[serde(default)]
    pub break_glass: bool,
}

/// `topics:stop`: exactly one of `topics`, `pattern` and `all: true`; with `require_caught_up`, a
/// promote (a planned switch-over that loses nothing).
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StopRequest {
    /// Topic names of the mirror: each once, at most 1,000 (`too-many-topics` otherwise).
    #[serde(default)]
    #[schema(max_items = 1000)]
    pub topics: Option<Vec<String>>,
    /// A regex matched against whole topic names of the mirror, matching any number of topics.
    #[serde(default)]
    pub pattern: Option<String>,
    /// Every topic of the mirror, however many.
    #[serde(default)]
    pub all: bool,
    /// Only check whether the call would be accepted; change nothing. Each topic's result then
    /// says what a stop now would leave unmirrored (`unmirrored`).
    #[serde(default)]
    pub validate_only: bool,
    /// Promote: stop only once every selected partition has caught up with its source (lag 0
    /// against the source's last stable offset, read fresh), waiting up to `timeout_ms`. If the
    /// timeout passes first, nothing is stopped: every topic answers `not-caught-up` and `behind`
    /// lists each partition still behind with its lag. Stop the producers on the source first.
    #[serde(default)]
    pub require_caught_up: bool,
    /// With `require_caught_up`: how long to wait for the partitions to catch up, 0 to 600,000
    /// (default 60,000; 0 checks once). The call answers when they caught up and stopped, or when
    /// the timeout passes.
    #[serde(default)]
    #[schema(minimum = 0, maximum = 600000)]
    pub timeout_ms: Option<u64>,
    /// Also add the topics to the mirror's `topic_exclude` (the pattern, or each name as a literal
    /// pattern), so discovery never starts them again. Not with `require_caught_up`.
    #[serde(default)]
    pub exclude: bool,
    /// Why: required when the mirror's approval policy covers `stop`, which then waits for a
    /// second person (HTTP 202) and runs as asked (a promote too) once approved; kept in the
    /// audit trail.
    #[serde(default)]
    pub reason: Option<String>,
    /// Admin only: run a stop the approval policy covers at once, without a second person (with
    /// a `reason`); the audit trail marks it.
    #[serde(default)]
    pub break_glass: bool,
}

/// Per-topic outcomes of a lifecycle call. Partial success is explicit: HTTP 200 with `ok:
/// false` and an `error` for the topics that failed. Repeating a call is harmless.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct LifecycleResponse {
    /// Poll `/api/v1/operations/{operation_id}` for per-partition progress (not recorded for
    /// `validate_only` calls).
    pub operation_id: String,
    pub validate_only: bool,
    pub results: Vec<TopicResult>,
    /// Whether the mirror's approval policy covers this call: sent without `validate_only` (and
    /// without `break_glass`), it waits for a second person's approval (HTTP 202).
    pub approval_required: bool,
    /// The break-glass entry, when an admin ran the call without a second person.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval: Option<super::approvals::Approval>,
    /// The pattern the call added to the mirror's topic policy: a start with a `pattern` adds it
    /// to `topic_include` (topics created later that match it are mirrored too), a stop with
    /// `exclude` to `topic_exclude`. Absent when nothing was added.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub saved_pattern: Option<SavedPatternBody>,
}

/// A pattern saved in a mirror's topic policy.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SavedPatternBody {
    /// `topic_include` or `topic_exclude`.
    pub list: String,
    pub pattern: String,
}
