//! Topics of a mirror: listing, one topic, the lifecycle calls (`topics:start|pause|resume|stop|recover`)
//! and the paginated partition listing.

use std::cmp::Ordering;
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};

use crate::app_state::AppState;
use crate::domain::approval::ApprovalAction;
use crate::domain::{PartitionState, Truncation};
use crate::engine::{
    Executed, LifecycleOp, MirrorSnapshot, OpResult, PartitionSnapshot, PendingCall, ProblemKind, TopicSelector,
    check_topic_count, validate_mirror_name, validate_topic_name,
};

use super::approvals::{Approval, ApprovalPending, Gate, complete, gate, needs_approval, pending_response};
use axum::response::{IntoResponse, Response};

use super::auth::{Caller, OperatorAuth, ViewerAuth};
use super::dto::{
    LifecycleRequest, LifecycleResponse, Lineage, LineageResponse, MirrorPath, Partition, PartitionStateDto,
    PartitionsPage, StartRequest, StopRequest, Topic, TopicPath, TopicResponse, TopicsResponse, TruncationMode,
    state_rank, ts,
};
use super::lifecycle::lifecycle_response;
use super::mirrors::find_mirror;
use super::pagination;
use super::problem::{ApiError, ProblemDetails, ProblemType};
use super::{ApiJson, ApiPath, ApiQuery, age_ms, now};

/// List a mirror's topics (rolled-up state, partition count, total lag).
#[utoipa::path(
    get,
    path = "/api/v1/mirrors/{mirror}/topics",
    tag = "topics",
    operation_id = "topic_list",
    security(("bearer" = [])),
    params(MirrorPath),
    responses(
        (status = 200, description = "The mirror's topics", body = TopicsResponse),
        (status = 400, description = "Invalid mirror name", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 401, description = "No or invalid token", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 403, description = "Role too low", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 404, description = "No such mirror", body = ProblemDetails, content_type = "application/problem+json"),
    )
)]
pub async fn topic_list(
    _auth: ViewerAuth,
    State(state): State<AppState>,
    ApiPath(MirrorPath { mirror }): ApiPath<MirrorPath>,
) -> Result<Json<TopicsResponse>, ApiError> {
    let snap = state.engine.snapshot();
    let m = find_mirror(&snap, &mirror)?;
    Ok(Json(TopicsResponse {
        mirror: m.name.clone(),
        topics: m.topics.iter().map(Topic::from).collect(),
        taken_at: ts(snap.taken_at),
        snapshot_age_ms: age_ms(snap.taken_at, now()),
    }))
}

/// One topic with its partitions.
#[utoipa::path(
    get,
    path = "/api/v1/mirrors/{mirror}/topics/{topic}",
    tag = "topics",
    operation_id = "topic_get",
    security(("bearer" = [])),
    params(TopicPath),
    responses(
        (status = 200, description = "The topic and its partitions", body = TopicResponse),
        (status = 400, description = "Invalid mirror or topic name", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 401, description = "No or invalid token", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 403, description = "Role too low", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 404, description = "No such mirror, or the topic is not in it", body = ProblemDetails,
            content_type = "application/problem+json"),
    )
)]
pub async fn topic_get(
    _auth: ViewerAuth,
    State(state): State<AppState>,
    ApiPath(TopicPath { mirror, topic }): ApiPath<TopicPath>,
) -> Result<Json<TopicResponse>, ApiError> {
    let snap = state.engine.snapshot();
    let m = find_mirror(&snap, &mirror)?;
    validate_topic_name(&topic)?;
    let t = m.topic(&topic).ok_or_else(|| {
        ApiError::new(ProblemKind::TopicNotInMirror, format!("topic {topic:?} is not part of mirror {mirror:?}"))
    })?;
    Ok(Json(TopicResponse {
        mirror: m.name.clone(),
        topic: Topic::from(t),
        partitions: t.partitions.iter().map(Partition::from).collect(),
        taken_at: ts(snap.taken_at),
        snapshot_age_ms: age_ms(snap.taken_at, now()),
    }))
}

/// The topic's lineage on the source cluster: the mirror there that copied it from
/// this cluster and, per partition, where that copy ended on both sides, its LME and offset map.
///
/// This is what a start of the topic would adopt as an incremental failback, or why it could not
/// (`usable: false` with the refusal). Read from the source cluster's state topic on every call
/// (not from the snapshot): seconds on a large state topic, an error when the source is down. The
/// topic need not be part of the mirror yet.
#[utoipa::path(
    get,
    path = "/api/v1/mirrors/{mirror}/topics/{topic}/lineage",
    tag = "topics",
    operation_id = "topic_lineage",
    security(("bearer" = [])),
    params(TopicPath),
    responses(
        (status = 200, description = "The lineage, absent when no mirror on the source has the topic", body = LineageResponse),
        (status = 400, description = "Invalid mirror or topic name", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 401, description = "No or invalid token", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 403, description = "Role too low", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 404, description = "No such mirror", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 422, description = "The source cluster's state cannot be read (source-unreachable)", body = ProblemDetails,
            content_type = "application/problem+json"),
    )
)]
pub async fn topic_lineage(
    _auth: ViewerAuth,
    State(state): State<AppState>,
    ApiPath(TopicPath { mirror, topic }): ApiPath<TopicPath>,
) -> Result<Json<LineageResponse>, ApiError> {
    validate_mirror_name(&mirror)?;
    validate_topic_name(&topic)?;
    let lineage = state.engine.lineage(&mirror, &topic).await?;
    Ok(Json(LineageResponse { mirror, topic, lineage: lineage.as_ref().map(Lineage::from) }))
}

/// One config of a mirror topic, source beside destination.
#[derive(Debug, Clone, serde::Serialize, ToSchema)]
pub struct TopicConfig {
    pub name: String,
    /// The source topic's override; absent: the source cluster's default.
    pub source: Option<String>,
    /// The mirror topic's override; absent: the destination cluster's default.
    pub destination: Option<String>,
    /// Copied configs: what the topic-config sync makes the mirror topic's override (absent: no
    /// override).
    pub synced_value: Option<String>,
    /// `in_sync`, `differs` (the next sync sets `synced_value`: the source changed since the last
    /// sync, or the destination was changed directly) or `not_copied` (placement, durability or
    /// not on the allow list: each cluster keeps its own).
    pub status: String,
}

/// A mirror topic's configs beside its source topic's.
#[derive(Debug, Clone, serde::Serialize, ToSchema)]
pub struct TopicConfigsResponse {
    pub mirror: String,
    pub topic: String,
    /// When both clusters were read (RFC 3339).
    pub read_at: String,
    /// Every config either topic overrides, plus `compression.type`, by name.
    pub configs: Vec<TopicConfig>,
    /// How many configs differ now (the next sync changes them).
    pub differs: usize,
    /// The mirror's topic-config sync: last run, last success, last error, drift warnings.
    pub sync: super::dto::SyncKindHealth,
}

/// A mirror topic's configs beside its source topic's, and what the topic-config sync does with
/// each.
///
/// Read from both clusters on every call (not from the snapshot). Lists every config either topic
/// overrides (cluster defaults are left out) and `compression.type`, which mirror topics keep at
/// `producer` unless the source sets one.
#[utoipa::path(
    get,
    path = "/api/v1/mirrors/{mirror}/topics/{topic}/configs",
    tag = "topics",
    operation_id = "topic_configs",
    security(("bearer" = [])),
    params(TopicPath),
    responses(
        (status = 200, description = "The topic's configs on both clusters", body = TopicConfigsResponse),
        (status = 400, description = "Invalid mirror or topic name", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 401, description = "No or invalid token", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 403, description = "Role too low", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 404, description = "No such mirror, or the topic is not in it", body = ProblemDetails,
            content_type = "application/problem+json"),
        (status = 422, description = "The source cannot be read (source-unreachable)", body = ProblemDetails,
            content_type = "application/problem+json"),
        (status = 503, description = "The destination cannot be read", body = ProblemDetails,
            content_type = "application/problem+json"),
    )
)]
pub async fn topic_configs(
    _auth: ViewerAuth,
    State(state): State<AppState>,
    ApiPath(TopicPath { mirror, topic }): ApiPath<TopicPath>,
) -> Result<Json<TopicConfigsResponse>, ApiError> {
    validate_mirror_name(&mirror)?;
    validate_topic_name(&topic)?;
    let rows = state.engine.topic_configs(&mirror, &topic).await?;
    let snap = state.engine.snapshot();
    let m = find_mirror(&snap, &mirror)?;
    let now = now();
    Ok(Json(TopicConfigsResponse {
        differs: rows.iter().filter(|r| r.status == crate::engine::ConfigStatus::Differs).count(),
        configs: rows
            .into_iter()
            .map(|r| TopicConfig {
                status: r.status.slug().to_string(),
                name: r.name,
                source: r.source,
                destination: r.destination,
                synced_value: r.wanted,
            })
            .collect(),
        sync: super::dto::SyncKindHealth::of(m, crate::engine::SyncKind::TopicConfigs, now),
        mirror,
        topic,
        read_at: ts(now),
    }))
}

/// Checks a lifecycle body's topic selection: exactly one of `topics` (valid names, each once,
/// at most [`crate::engine::MAX_TOPICS_PER_CALL`]), `pattern` (a valid regex) and `all`. Everything
/// here needs no Kafka, so a bad call is refused before the engine makes any Kafka call.
fn selector(topics: Option<Vec<String>>, pattern: Option<String>, all: bool) -> Result<TopicSelector, ApiError> {
    match (topics, pattern) {
        (None, None) if all => Ok(TopicSelector::All),
        _ if all => Err(ApiError::new(
            ProblemType::InvalidBody,
            "`all: true` selects every topic of the mirror: give it without `topics` and `pattern`",
        )),
        (Some(topics), None) => {
            if topics.is_empty() {
                return Err(ApiError::new(ProblemType::InvalidBody, "`topics` must name at least one topic"));
            }
            check_topic_count(topics.len())?;
            let mut seen = std::collections::HashSet::with_capacity(topics.len());
            for t in &topics {
                validate_topic_name(t)?;
                if !seen.insert(t.as_str()) {
                    return Err(ApiError::new(
                        ProblemType::InvalidBody,
                        format!("`topics` names {t:?} more than once; name each topic once"),
                    ));
                }
            }
            Ok(TopicSelector::Names(topics))
        }
        (None, Some(pattern)) => {
            // The engine compiles it the same way (one builder), so both refuse the same patterns.
            crate::domain::name_pattern::NamePattern::new(&pattern)
                .map_err(|e| ApiError::new(ProblemKind::InvalidPattern, e.to_string()))?;
            Ok(TopicSelector::Pattern(pattern))
        }
        _ => Err(ApiError::new(ProblemType::InvalidBody, "give exactly one of `topics`, `pattern` and `all: true`")),
    }
}

/// The call a lifecycle request is, for the mirror's approval policy (a start that fails back is
/// found by validating it: `run_lifecycle`).
fn approval_action(op: LifecycleOp) -> Option<ApprovalAction> {
    match op {
        LifecycleOp::Stop => Some(ApprovalAction::Stop),
        LifecycleOp::Start { truncation: Truncation::Resync { .. } } => Some(ApprovalAction::Resync),
        _ => None,
    }
}

/// What a stop does besides stopping (both off for the other calls).
#[derive(Debug, Clone, Copy, Default)]
struct StopExtras {
    /// Add the names or the pattern to the mirror's `topic_exclude`.
    exclude: bool,
    /// A promote: stop once every partition caught up, waiting at most this long.
    promote: Option<Duration>,
}

/// A lifecycle call through the mirror's approval policy: checked (`validate_only`: what it would
/// do and whether it needs approval), held for a second person, or run.
#[allow(clippy::too_many_arguments)]
async fn run_lifecycle(
    state: &AppState,
    caller: &Caller,
    mirror: &str,
    selector: TopicSelector,
    op: LifecycleOp,
    validate_only: bool,
    extras: StopExtras,
    reason: Option<String>,
    break_glass: bool,
) -> Result<Response, ApiError> {
    let respond = |r: OpResult, required: bool, approval: Option<Approval>| LifecycleResponse {
        approval_required: required,
        approval,
        ..lifecycle_response(state, mirror, r, op, validate_only)
    };
    let mut action = approval_action(op);
    let mut validated = None;
    if op == (LifecycleOp::Start { truncation: Truncation::None })
        && needs_approval(state, mirror, Some(ApprovalAction::Failback))
    {
        // Whether the start fails back: the engine's own check, as validate_only answers it.
        let r = state.engine.lifecycle(mirror, selector.clone(), op, true, caller.actor()).await?;
        if !r.failback.is_empty() {
            action = Some(ApprovalAction::Failback);
        }
        validated = Some(r);
    }
    let required = needs_approval(state, mirror, action);
    if validate_only {
        // A promote's check changes nothing: it answers what a stop now would leave unmirrored.
        let r = match validated {
            Some(r) => r,
            None if extras.exclude => state.engine.stop_and_exclude(mirror, selector, true, caller.actor()).await?,
            None => state.engine.lifecycle(mirror, selector, op, true, caller.actor()).await?,
        };
        return Ok(Json(respond(r, required, None)).into_response());
    }
    let (topics, pattern, all) = match &selector {
        TopicSelector::Names(n) => (n.clone(), None, false),
        TopicSelector::Pattern(p) => (Vec::new(), Some(p.clone()), false),
        TopicSelector::All => (Vec::new(), None, true),
    };
    let truncation = match op {
        LifecycleOp::Start { truncation } => truncation,
        _ => Truncation::None,
    };
    let call = PendingCall {
        topics,
        pattern,
        all,
        truncation,
        exclude: extras.exclude,
        promote_timeout_ms: extras.promote.map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX)),
        ..Default::default()
    };
    let entry = match gate(state, caller, mirror, action, call, reason, break_glass).await? {
        Gate::Pending(a) => return Ok(pending_response(&a)),
        Gate::Run(entry) => entry,
    };
    let r = if op == LifecycleOp::Stop {
        state.engine.stop_as_asked(mirror, selector, extras.exclude, extras.promote, caller.actor()).await
    } else {
        state.engine.lifecycle(mirror, selector, op, false, caller.actor()).await
    };
    let executed = match &r {
        Ok(r) => Executed::Lifecycle(r.clone()),
        Err(e) => Executed::Refused(e.clone()),
    };
    let approval = complete(state, entry.as_ref(), &executed).await;
    Ok(Json(respond(r?, required, approval)).into_response())
}

/// Start mirroring topics (operator); also restarts STOPPED topics in the same direction.
///
/// Per-topic outcomes: HTTP 200 even when some topics fail (`ok: false` with an `error` whose
/// `type` is a problem slug, e.g. `topic-not-found`, `illegal-transition`, `topic-excluded`).
/// Repeating the call is harmless. A `pattern` is also saved in the mirror's `topic_include`
/// (`saved_pattern` in the answer): topics created on the source later that match it are
/// mirrored too, at the mirror's next metadata refresh. A pattern never selects a topic that
/// `topic_exclude` excludes; a topic named on its own that it excludes is refused. When the
/// mirror's approval policy covers the call (`resync`, or `failback` for a start that fails a
/// topic back), it needs a `reason` and waits for a second person: HTTP 202 with the request
/// (`validate_only` answers `approval_required` first).
#[utoipa::path(
    post,
    path = "/api/v1/mirrors/{mirror}/topics:start",
    tag = "topics",
    operation_id = "topics_start",
    security(("bearer" = [])),
    extensions(("x-required-role" = json!("operator"))),
    params(MirrorPath),
    request_body = StartRequest,
    responses(
        (status = 200, description = "Per-topic outcomes", body = LifecycleResponse),
        (status = 202, description = "The mirror's approval policy covers this call: it waits for a second person's approval",
            body = ApprovalPending),
        (status = 400, description = "Invalid body, name or pattern; a topic named twice; more than 1,000 topics named or matched (`too-many-topics`)", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 401, description = "No or invalid token", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 403, description = "Role too low; `break_glass` without the admin role (break-glass-not-allowed)", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 404, description = "No such mirror", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 409, description = "This instance is fenced", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 413, description = "Body over 1 MiB", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 415, description = "Body is not JSON", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 422, description = "The source does not answer (pattern listing); no `reason` for a call that needs approval             (reason-required)", body = ProblemDetails,
            content_type = "application/problem+json"),
        (status = 503, description = "Destination unavailable or shutting down", body = ProblemDetails,
            content_type = "application/problem+json"),
    )
)]
pub async fn topics_start(
    OperatorAuth(caller): OperatorAuth,
    State(state): State<AppState>,
    ApiPath(MirrorPath { mirror }): ApiPath<MirrorPath>,
    ApiJson(body): ApiJson<StartRequest>,
) -> Result<Response, ApiError> {
    validate_mirror_name(&mirror)?;
    let truncation = match body.truncation {
        TruncationMode::None if body.quarantine => {
            return Err(ApiError::new(ProblemType::InvalidBody, "`quarantine` only applies to `truncation: resync`"));
        }
        TruncationMode::None => Truncation::None,
        TruncationMode::Resync => Truncation::Resync { quarantine: body.quarantine },
    };
    let sel = selector(body.topics, body.pattern, false)?;
    let op = LifecycleOp::Start { truncation };
    let extras = StopExtras::default();
    run_lifecycle(&state, &caller, &mirror, sel, op, body.validate_only, extras, body.reason, body.break_glass).await
}

macro_rules! lifecycle_handler {
    ($name:ident, $path:literal, $op:expr, $summary:literal, $doc:literal) => {
        #[doc = $summary]
        #[doc = ""]
        #[doc = $doc]
        #[utoipa::path(
            post,
            path = $path,
            tag = "topics",
            operation_id = stringify!($name),
            security(("bearer" = [])),
            extensions(("x-required-role" = json!("operator"))),
            params(MirrorPath),
            request_body = LifecycleRequest,
            responses(
                (status = 200, description = "Per-topic outcomes", body = LifecycleResponse),
                (status = 202, description = "The mirror's approval policy covers this call: it waits for a second \
                    person's approval", body = ApprovalPending),
                (status = 400, description = "Invalid body, name or pattern; a topic named twice; more than 1,000 topics named (`too-many-topics`); `all` with `topics` or `pattern`", body = ProblemDetails, content_type = "application/problem+json"),
                (status = 401, description = "No or invalid token", body = ProblemDetails, content_type = "application/problem+json"),
                (status = 403, description = "Role too low; `break_glass` without the admin role (break-glass-not-allowed)", body = ProblemDetails, content_type = "application/problem+json"),
                (status = 404, description = "No such mirror", body = ProblemDetails, content_type = "application/problem+json"),
                (status = 409, description = "This instance is fenced", body = ProblemDetails, content_type = "application/problem+json"),
                (status = 413, description = "Body over 1 MiB", body = ProblemDetails, content_type = "application/problem+json"),
                (status = 415, description = "Body is not JSON", body = ProblemDetails, content_type = "application/problem+json"),
                (status = 422, description = "No `reason` for a call that needs approval (reason-required)", body = ProblemDetails,
                    content_type = "application/problem+json"),
                (status = 503, description = "Destination unavailable or shutting down", body = ProblemDetails,
                    content_type = "application/problem+json"),
            )
        )]
        pub async fn $name(
            OperatorAuth(caller): OperatorAuth,
            State(state): State<AppState>,
            ApiPath(MirrorPath { mirror }): ApiPath<MirrorPath>,
            ApiJson(body): ApiJson<LifecycleRequest>,
        ) -> Result<Response, ApiError> {
            validate_mirror_name(&mirror)?;
            let sel = selector(body.topics, body.pattern, body.all)?;
            let extras = StopExtras::default();
            run_lifecycle(&state, &caller, &mirror, sel, $op, body.validate_only, extras, body.reason, body.break_glass)
                .await
        }
    };
}

lifecycle_handler!(
    topics_pause,
    "/api/v1/mirrors/{mirror}/topics:pause",
    LifecycleOp::Pause,
    "Pause mirroring topics (operator).",
    "MIRRORING → PAUSED; the topics stay mirrors (read-only). Per-topic outcomes; idempotent."
);
lifecycle_handler!(
    topics_resume,
    "/api/v1/mirrors/{mirror}/topics:resume",
    LifecycleOp::Resume,
    "Resume paused topics (operator).",
    "PAUSED → MIRRORING. Per-topic outcomes; idempotent."
);
/// Stop mirroring topics: failover (operator).
///
/// The topics become ordinary writable topics on the destination; the stop point is recorded.
/// Per-topic outcomes; idempotent. With `validate_only`, each topic's result says what a stop now
/// would leave unmirrored (`unmirrored`, per partition).
///
/// With `require_caught_up: true` it is a **promote**, a planned switch-over that loses nothing:
/// kmirror stops the selected partitions only once every one of them has caught up with a
/// reachable source (lag 0 against the source's last stable offset, read fresh), waiting up to
/// `timeout_ms` (default 60 s), and the call answers then. If the timeout passes first, nothing
/// is stopped: every topic answers `not-caught-up` and `behind` lists each partition still
/// behind with its lag. Every record the source had committed at the final check is on the
/// destination; the data path commits what it read after the check instead of aborting it, and
/// any record the source received after that (a producer still writing) is listed in `behind`
/// of a topic that stopped. Stop the producers on the source first, promote, then move them.
/// Other stops and pauses are served while a promote waits.
///
/// With `exclude: true` (not with `require_caught_up`) the pattern, or each name as a literal
/// pattern, is also added to the mirror's `topic_exclude`, so discovery never starts those topics
/// again (`saved_pattern` in the answer).
///
/// When the mirror's approval policy covers `stop`, the call needs a `reason` and waits for a
/// second person: HTTP 202 with the request (`validate_only` answers `approval_required` first);
/// once approved it runs as asked (a promote or an exclusion too). An admin may run it at once
/// with `break_glass` and a reason.
#[utoipa::path(
    post,
    path = "/api/v1/mirrors/{mirror}/topics:stop",
    tag = "topics",
    operation_id = "topics_stop",
    security(("bearer" = [])),
    extensions(("x-required-role" = json!("operator"))),
    params(MirrorPath),
    request_body = StopRequest,
    responses(
        (status = 200, description = "Per-topic outcomes", body = LifecycleResponse),
        (status = 202, description = "The mirror's approval policy covers `stop`: it waits for a second person's approval",
            body = ApprovalPending),
        (status = 400, description = "Invalid body, name or pattern; a topic named twice; more than 1,000 topics named (`too-many-topics`); `all` with `topics` or `pattern`; `timeout_ms` without `require_caught_up` or above 600,000", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 401, description = "No or invalid token", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 403, description = "Role too low; `break_glass` without the admin role (break-glass-not-allowed)", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 404, description = "No such mirror", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 409, description = "This instance is fenced", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 413, description = "Body over 1 MiB", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 415, description = "Body is not JSON", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 422, description = "No `reason` for a stop that needs approval (reason-required)", body = ProblemDetails,
            content_type = "application/problem+json"),
        (status = 503, description = "Destination unavailable or shutting down", body = ProblemDetails,
            content_type = "application/problem+json"),
    )
)]
pub async fn topics_stop(
    OperatorAuth(caller): OperatorAuth,
    State(state): State<AppState>,
    ApiPath(MirrorPath { mirror }): ApiPath<MirrorPath>,
    ApiJson(body): ApiJson<StopRequest>,
) -> Result<Response, ApiError> {
    validate_mirror_name(&mirror)?;
    let timeout = promote_timeout(body.require_caught_up, body.timeout_ms)?;
    if body.exclude && timeout.is_some() {
        return Err(ApiError::new(
            ProblemType::InvalidBody,
            "`exclude` does not go with `require_caught_up`: promote first, then stop the topics again with `exclude` (a stop of a STOPPED topic only saves the exclusion)",
        ));
    }
    let sel = selector(body.topics, body.pattern, body.all)?;
    let extras = StopExtras { exclude: body.exclude, promote: timeout };
    run_lifecycle(
        &state,
        &caller,
        &mirror,
        sel,
        LifecycleOp::Stop,
        body.validate_only,
        extras,
        body.reason,
        body.break_glass,
    )
    .await
}

/// A stop's promote settings: `None` for a plain stop, else how long to wait for catch-up.
fn promote_timeout(require_caught_up: bool, timeout_ms: Option<u64>) -> Result<Option<Duration>, ApiError> {
    let max = crate::engine::PROMOTE_MAX_TIMEOUT.as_millis() as u64;
    match (require_caught_up, timeout_ms) {
        (false, None) => Ok(None),
        (false, Some(_)) => Err(ApiError::new(
            ProblemType::InvalidBody,
            "`timeout_ms` is how long a promote waits: it only applies with `require_caught_up: true`",
        )),
        (true, None) => Ok(Some(crate::engine::PROMOTE_DEFAULT_TIMEOUT)),
        (true, Some(ms)) if ms <= max => Ok(Some(Duration::from_millis(ms))),
        (true, Some(ms)) => {
            Err(ApiError::new(ProblemType::InvalidBody, format!("`timeout_ms` must be between 0 and {max} (got {ms})")))
        }
    }
}

lifecycle_handler!(
    topics_recover,
    "/api/v1/mirrors/{mirror}/topics:recover",
    LifecycleOp::Recover,
    "Retry the topics' FAILED partitions now (operator).",
    "KIP-1279's RecoverMirrorTopics: every FAILED partition of the topics goes back to what it was \
     doing (mirroring, a pause or a stop) with its retry count reset, whatever its error, also when \
     its automatic retries are used up or the next one is minutes away. Its checks run again, so a \
     cause that was not fixed fails it again. Partitions in other states are left alone. While the \
     mirror's source has another cluster ID, each topic is refused (`source-cluster-id-mismatch`). \
     Per-topic outcomes; idempotent."
);

/// How to order partitions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum PartitionSort {
    /// Largest lag (records) first.
    #[default]
    Lag,
    /// By topic, then partition.
    Topic,
    /// FAILED first, then along the lifecycle (UNKNOWN … STOPPED).
    State,
}

impl PartitionSort {
    fn as_str(self) -> &'static str {
        match self {
            PartitionSort::Lag => "lag",
            PartitionSort::Topic => "topic",
            PartitionSort::State => "state",
        }
    }
}

/// Filters, sort and page of the partition listing.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct PartitionsQuery {
    /// Only this topic.
    topic: Option<String>,
    /// Only partitions in this state.
    #[param(inline)]
    state: Option<PartitionStateDto>,
    /// Sort order (default `lag`).
    #[param(inline)]
    sort: Option<PartitionSort>,
    /// Items per page, 1 to 1000 (default 100).
    #[param(minimum = 1, maximum = 1000)]
    page_size: Option<u32>,
    /// The `next_page_token` of the previous page (same filters and sort).
    page_token: Option<String>,
}

fn compare(sort: PartitionSort, a: &PartitionSnapshot, b: &PartitionSnapshot) -> Ordering {
    let by_name = || a.topic.cmp(&b.topic).then(a.partition.cmp(&b.partition));
    match sort {
        PartitionSort::Lag => b.lag_records.cmp(&a.lag_records).then_with(by_name),
        PartitionSort::Topic => by_name(),
        PartitionSort::State => state_rank(a.state).cmp(&state_rank(b.state)).then_with(by_name),
    }
}

/// A mirror's partitions, filtered, sorted and paginated on the server.
///
/// Served from the engine's snapshot (no Kafka calls), so it stays fast for tens of thousands
/// of partitions. Pages are positions in the ordering at the time of each request; a partition
/// whose lag changes between pages can move across a page boundary.
#[utoipa::path(
    get,
    path = "/api/v1/mirrors/{mirror}/partitions",
    tag = "topics",
    operation_id = "partition_list",
    security(("bearer" = [])),
    params(MirrorPath, PartitionsQuery),
    responses(
        (status = 200, description = "One page of partitions", body = PartitionsPage),
        (status = 400, description = "Invalid name, query or page token", body = ProblemDetails,
            content_type = "application/problem+json"),
        (status = 401, description = "No or invalid token", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 403, description = "Role too low", body = ProblemDetails, content_type = "application/problem+json"),
        (status = 404, description = "No such mirror", body = ProblemDetails, content_type = "application/problem+json"),
    )
)]
pub async fn partition_list(
    _auth: ViewerAuth,
    State(state): State<AppState>,
    ApiPath(MirrorPath { mirror }): ApiPath<MirrorPath>,
    ApiQuery(q): ApiQuery<PartitionsQuery>,
) -> Result<Json<PartitionsPage>, ApiError> {
    let snap = state.engine.snapshot();
    let m = find_mirror(&snap, &mirror)?;
    let (page, total, next_page_token) = page_partitions(m, &q)?;
    Ok(Json(PartitionsPage {
        mirror: m.name.clone(),
        items: page.into_iter().map(Partition::from).collect(),
        total,
        next_page_token,
        taken_at: ts(snap.taken_at),
        snapshot_age_ms: age_ms(snap.taken_at, now()),
    }))
}

/// Filters, sorts and cuts one page of `m`'s partitions: the page, how many match, and the
/// token of the next page. Works on references; only the page is converted for the wire.
fn page_partitions<'a>(
    m: &'a MirrorSnapshot,
    q: &PartitionsQuery,
) -> Result<(Vec<&'a PartitionSnapshot>, usize, Option<String>), ApiError> {
    if let Some(t) = &q.topic {
        validate_topic_name(t)?;
    }
    let size = pagination::page_size(q.page_size)?;
    let sort = q.sort.unwrap_or_default();
    let wanted_state: Option<PartitionState> = q.state.map(Into::into);
    let query = format!(
        "{}|{}|{}|{}",
        m.name,
        sort.as_str(),
        q.topic.as_deref().unwrap_or(""),
        wanted_state.map_or("", PartitionState::as_str)
    );
    let offset = match &q.page_token {
        Some(t) => pagination::decode_offset(t, "partitions", &query)?,
        None => 0,
    };
    let mut items: Vec<&PartitionSnapshot> = m
        .topics
        .iter()
        .filter(|t| q.topic.as_ref().is_none_or(|name| *name == t.name))
        .flat_map(|t| &t.partitions)
        .filter(|p| wanted_state.is_none_or(|s| p.state == s))
        .collect();
    items.sort_unstable_by(|a, b| compare(sort, a, b));
    let total = items.len();
    let start = offset.min(total);
    let end = offset.saturating_add(size).min(total);
    let next = (end < total).then(|| pagination::encode("partitions", &query, &end.to_string()));
    items.truncate(end);
    items.drain(..start);
    Ok((items, total, next))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Timestamp;
    use crate::engine::{ClusterIdStatus, MAX_TOPICS_PER_CALL, TopicSnapshot};

    #[test]
    fn topic_lists_over_the_cap_or_with_repeats_are_refused_before_the_engine() {
        let names = |n: usize| (0..n).map(|i| format!("t{i}")).collect::<Vec<_>>();
        assert!(selector(Some(names(MAX_TOPICS_PER_CALL)), None, false).is_ok());
        let e = selector(Some(names(MAX_TOPICS_PER_CALL + 1)), None, false).unwrap_err();
        assert_eq!(e.problem, ProblemType::Engine(ProblemKind::TooManyTopics));
        assert_eq!(e.problem.status().as_u16(), 400);
        assert!(e.detail.contains("at most 1000"), "{}", e.detail);
        let e = selector(Some(vec!["a".into(), "b".into(), "a".into()]), None, false).unwrap_err();
        assert_eq!(e.problem, ProblemType::InvalidBody);
        assert!(e.detail.contains("\"a\" more than once"), "{}", e.detail);
    }

    #[test]
    fn all_goes_alone_and_a_promote_timeout_needs_a_promote_within_its_range() {
        assert_eq!(selector(None, None, true).unwrap(), TopicSelector::All);
        for (topics, pattern) in [(Some(vec!["a".to_string()]), None), (None, Some(".*".to_string()))] {
            let e = selector(topics, pattern, true).unwrap_err();
            assert_eq!(e.problem, ProblemType::InvalidBody);
            assert!(e.detail.contains("without `topics` and `pattern`"), "{}", e.detail);
        }
        let e = selector(None, None, false).unwrap_err();
        assert!(e.detail.contains("exactly one of `topics`, `pattern` and `all: true`"), "{}", e.detail);

        assert_eq!(promote_timeout(false, None).unwrap(), None);
        assert_eq!(promote_timeout(true, None).unwrap(), Some(Duration::from_secs(60)));
        assert_eq!(promote_timeout(true, Some(0)).unwrap(), Some(Duration::ZERO));
        assert_eq!(promote_timeout(true, Some(600_000)).unwrap(), Some(Duration::from_secs(600)));
        let e = promote_timeout(true, Some(600_001)).unwrap_err();
        assert_eq!((e.problem, e.problem.status().as_u16()), (ProblemType::InvalidBody, 400));
        assert!(e.detail.contains("between 0 and 600000"), "{}", e.detail);
        let e = promote_timeout(false, Some(1000)).unwrap_err();
        assert!(e.detail.contains("only applies with `require_caught_up: true`"), "{}", e.detail);
    }

    fn partition(topic: &str, partition: i32, lag: i64, state: PartitionState) -> PartitionSnapshot {
        PartitionSnapshot {
            failed_in: None,
            resync_pending: false,
            idle: false,
            topic: topic.to_string(),
            partition,
            state,
            state_since: Timestamp::EPOCH,
            state_epoch: 1,
            source_log_start_offset: Some(0),
            source_last_stable_offset: Some(lag),
            source_high_watermark: Some(lag),
            mirrored_source_offset: Some(0),
            destination_high_watermark: Some(0),
            lag_records: lag,
            lag_seconds: 0.0,
            last_mirrored_epoch: None,
            error: None,
            retry_count: 0,
            next_retry_at: None,
            records_mirrored: 0,
            bytes_mirrored: 0,
            destination_stop_offset: None,
            local_writes: 0,
            source_writes_after_stop: None,
            slot: 0,
            owner: None,
        }
    }

    /// 100 topics × 100 partitions with lags that collide a lot.
    fn big_mirror() -> MirrorSnapshot {
        let topics = (0..100)
            .map(|t| {
                let name = format!("topic-{t:03}");
                let partitions: Vec<PartitionSnapshot> = (0..100)
                    .map(|p| {
                        let state = if (t + p) % 7 == 0 { PartitionState::Paused } else { PartitionState::Mirroring };
                        partition(&name, p, i64::from((t * 31 + p * 17) % 50), state)
                    })
                    .collect();
                TopicSnapshot {
                    name,
                    state: PartitionState::Mirroring,
                    source_topic_id: String::new(),
                    destination_topic_id: String::new(),
                    lag_records: 0,
                    lag_seconds: 0.0,
                    partitions,
                    failback_mirror: None,
                }
            })
            .collect();
        MirrorSnapshot {
            name: "big".into(),
            source_bootstrap_servers: "x:1".into(),
            cluster_id_status: ClusterIdStatus::Ok,
            data_path: crate::engine::DataPathStatus::Running,
            topics,
            ..MirrorSnapshot::default()
        }
    }

    fn query(sort: PartitionSort, state: Option<PartitionStateDto>, token: Option<String>) -> PartitionsQuery {
        PartitionsQuery { topic: None, state, sort: Some(sort), page_size: Some(1000), page_token: token }
    }

    #[test]
    fn ten_thousand_partitions_page_quickly_and_completely() {
        let m = big_mirror();
        for sort in [PartitionSort::Lag, PartitionSort::Topic, PartitionSort::State] {
            let started = std::time::Instant::now();
            let mut all: Vec<&PartitionSnapshot> = Vec::new();
            let mut token = None;
            loop {
                let (page, total, next) = page_partitions(&m, &query(sort, None, token)).unwrap();
                assert_eq!(total, 10_000);
                all.extend(page);
                match next {
                    Some(t) => token = Some(t),
                    None => break,
                }
            }
            // Ten requests over 10,000 partitions, unoptimised test build, shared CI machine.
            assert!(started.elapsed() < std::time::Duration::from_secs(3), "{sort:?}: {:?}", started.elapsed());
            assert_eq!(all.len(), 10_000);
            let unique: std::collections::BTreeSet<(&str, i32)> =
                all.iter().map(|p| (p.topic.as_str(), p.partition)).collect();
            assert_eq!(unique.len(), 10_000, "{sort:?}: every partition exactly once");
            assert!(all.windows(2).all(|w| compare(sort, w[0], w[1]) != Ordering::Greater), "{sort:?} order");
        }
        // Filters.
        let (page, total, _) =
            page_partitions(&m, &query(PartitionSort::Lag, Some(PartitionStateDto::Paused), None)).unwrap();
        assert!(total > 0 && total < 10_000);
        assert!(page.iter().all(|p| p.state == PartitionState::Paused));
        let q = PartitionsQuery { topic: Some("topic-007".into()), ..query(PartitionSort::Topic, None, None) };
        let (page, total, next) = page_partitions(&m, &q).unwrap();
        assert_eq!((total, page.len(), next), (100, 100, None));
    }

    #[test]
    fn tokens_from_another_query_are_refused() {
        let m = big_mirror();
        let (_, _, next) = page_partitions(&m, &query(PartitionSort::Lag, None, None)).unwrap();
        let e = page_partitions(&m, &query(PartitionSort::Topic, None, next)).unwrap_err();
        assert_eq!(e.problem, ProblemType::InvalidPageToken);
        // A token past the end is an empty last page, not an error.
        let past = pagination::encode("partitions", "big|lag||", "20000");
        let (page, total, next) = page_partitions(&m, &query(PartitionSort::Lag, None, Some(past))).unwrap();
        assert_eq!((page.len(), total, next), (0, 10_000, None));
    }
}
