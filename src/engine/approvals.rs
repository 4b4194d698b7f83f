//! Two-person approval of destructive calls (the rules are `domain::approval`).
//!
//! # How a request lives
//!
//! A call that the mirror's policy puts behind a second person is not run. It is recorded as an
//! operation of kind `approval_request` whose record carries the call and its reason
//! ([`ApprovalRecord`], persisted in the Operation record: `store::ApprovalValue`), so it
//! survives a restart and every instance sees it through the state topic. Its ID is the
//! request's ID everywhere (API, dashboard, CLI).
//!
//! - **Approve** (another identity, operator role): the request's record becomes `approved`, an
//!   `approve` entry is recorded, then the call runs *as the requester asked it* (their identity
//!   in its operation), and the request's record becomes `executed` with the ID of the operation
//!   the call ran as (or `failed` when the engine refused the call as a whole).
//! - **Reject**: the request becomes `rejected`, a `reject` entry with the reason is recorded;
//!   nothing runs.
//! - **Expiry**: nothing is written; a pending request past its deadline shows as expired and is
//!   refused if someone tries to decide it.
//! - **Break-glass** (admin): a `break_glass` entry with the reason is recorded, the call runs at
//!   once, and the entry names the operation it ran as.
//!
//! Persist before acting: every decision is written before the call runs. Decisions on one
//! instance are serialised; two instances approving the same request in the same second could
//! both run it, which for every guarded call is harmless (a stop or a resync of a topic already
//! stopped or resynced succeeds without doing anything again, a mirror deleted twice is not found
//! the second time), except a drill, which would run twice.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use serde::Serialize;

use crate::domain::Timestamp;
use crate::domain::approval::{ApprovalAction, ApprovalStatus, Decision, DecisionRefused, check_decision, status_at};
use crate::store::{ApprovalCallValue, ApprovalValue, TruncationValue};

use super::drills::DrillOptions;
use super::{
    Actor, ApprovalPolicy, EngineError, EngineHandle, LifecycleOp, OpResult, OperationKind, OperationView, ProblemKind,
    Request, TopicSelector, Truncation,
};

/// Approval records by the ID of the operation record that carries them.
pub(crate) type Approvals = Arc<RwLock<HashMap<String, ApprovalRecord>>>;

/// The call a request runs once approved: what the requester sent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PendingCall {
    /// Topic names of a lifecycle call (empty with a pattern, a delete or a drill).
    pub topics: Vec<String>,
    /// A pattern instead of names.
    pub pattern: Option<String>,
    /// Every topic of the mirror (`all: true`).
    pub all: bool,
    /// A start's truncation mode.
    pub truncation: Truncation,
    /// A stop that also adds the names or the pattern to the mirror's `topic_exclude`.
    pub exclude: bool,
    /// A stop that is a promote: once every partition caught up, waiting at most this long (ms).
    pub promote_timeout_ms: Option<u64>,
    /// A drill's options.
    pub drill: DrillOptions,
}

impl PendingCall {
    /// The topics named, or the pattern, for a summary.
    #[must_use]
    pub fn summary(&self) -> String {
        let what = match &self.pattern {
            Some(p) => format!("topics matching {p:?}"),
            None if self.all => "every topic".to_string(),
            None if self.topics.is_empty() => String::new(),
            None => self.topics.join(", "),
        };
        match (self.promote_timeout_ms, self.exclude) {
            (Some(ms), _) => format!("{what} (promote: once caught up, waiting up to {} s)", ms.div_ceil(1000)),
            (None, true) => format!("{what} (and excluded from the topic policy)"),
            (None, false) => what,
        }
    }

    fn selector(&self) -> TopicSelector {
        match &self.pattern {
            Some(p) => TopicSelector::Pattern(p.clone()),
            None if self.all => TopicSelector::All,
            None => TopicSelector::Names(self.topics.clone()),
        }
    }

    /// A promote's wait, when the stop is one.
    fn promote(&self) -> Option<std::time::Duration> {
        self.promote_timeout_ms.map(std::time::Duration::from_millis)
    }
}

/// A call behind two-person approval, as one of its operation records carries it: the request
/// itself (whose operation ID is `request_id`), or a copy on its decision and break-glass entries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ApprovalRecord {
    /// The request's operation ID.
    pub request_id: String,
    pub mirror: String,
    pub action: ApprovalAction,
    /// As stored: a pending request past `expires_at` is expired ([`Self::status_at`]).
    pub status: ApprovalStatus,
    /// Why the requester (or a break-glass admin) asked.
    pub reason: String,
    pub requested_by: String,
    pub client_address: Option<String>,
    pub requested_at: Timestamp,
    pub expires_at: Timestamp,
    /// Who approved or rejected it, when, and their note.
    pub decided_by: Option<String>,
    pub decided_at: Option<Timestamp>,
    pub decision_reason: Option<String>,
    /// The operation the call ran as.
    pub executed_operation_id: Option<String>,
    pub call: PendingCall,
}

impl ApprovalRecord {
    /// Where the request stands at `now`.
    #[must_use]
    pub fn status_at(&self, now: Timestamp) -> ApprovalStatus {
        status_at(self.status, self.expires_at, now)
    }

    /// The stored form.
    pub(crate) fn to_value(&self) -> ApprovalValue {
        ApprovalValue {
            request_id: self.request_id.clone(),
            action: self.action.as_str().to_string(),
            status: self.status.as_str().to_string(),
            reason: self.reason.clone(),
            requested_by: self.requested_by.clone(),
            client_address: self.client_address.clone(),
            requested_at: self.requested_at.as_millis(),
            expires_at: self.expires_at.as_millis(),
            decided_by: self.decided_by.clone(),
            decided_at: self.decided_at.map(Timestamp::as_millis),
            decision_reason: self.decision_reason.clone(),
            executed_operation_id: self.executed_operation_id.clone(),
            call: ApprovalCallValue {
                topics: self.call.topics.clone(),
                pattern: self.call.pattern.clone(),
                all: self.call.all,
                exclude: self.call.exclude,
                promote_timeout_ms: self.call.promote_timeout_ms,
                truncation: match self.call.truncation {
                    Truncation::None => TruncationValue::None,
                    Truncation::Resync { quarantine } => TruncationValue::Resync { quarantine },
                },
                canary_topic: self.call.drill.canary_topic.clone(),
                rto_objective_ms: self.call.drill.rto_objective_ms,
                rpo_objective_ms: self.call.drill.rpo_objective_ms,
            },
        }
    }

    /// The record a stored value describes; `None` for an action or status this version does not
    /// know (written by a newer kmirror: shown in the audit trail, never run).
    pub(crate) fn from_value(mirror: &str, v: &ApprovalValue) -> Option<ApprovalRecord> {
        Some(ApprovalRecord {
            request_id: v.request_id.clone(),
            mirror: mirror.to_string(),
            action: ApprovalAction::parse(&v.action)?,
            status: ApprovalStatus::parse(&v.status)?,
            reason: v.reason.clone(),
            requested_by: v.requested_by.clone(),
            client_address: v.client_address.clone(),
            requested_at: Timestamp::from_millis(v.requested_at),
            expires_at: Timestamp::from_millis(v.expires_at),
            decided_by: v.decided_by.clone(),
            decided_at: v.decided_at.map(Timestamp::from_millis),
            decision_reason: v.decision_reason.clone(),
            executed_operation_id: v.executed_operation_id.clone(),
            call: PendingCall {
                topics: v.call.topics.clone(),
                pattern: v.call.pattern.clone(),
                all: v.call.all,
                exclude: v.call.exclude,
                promote_timeout_ms: v.call.promote_timeout_ms,
                truncation: match v.call.truncation {
                    TruncationValue::None => Truncation::None,
                    TruncationValue::Resync { quarantine } => Truncation::Resync { quarantine },
                },
                drill: DrillOptions {
                    canary_topic: v.call.canary_topic.clone(),
                    rto_objective_ms: v.call.rto_objective_ms,
                    rpo_objective_ms: v.call.rpo_objective_ms,
                },
            },
        })
    }
}

/// Where a guarded call goes ([`EngineHandle::gate`]).
#[derive(Debug, Clone)]
pub enum Gate {
    /// Run it now; with the break-glass entry to complete once it ran ([`EngineHandle::approval_ran`]).
    Run(Option<ApprovalRecord>),
    /// It waits for a second person.
    Pending(ApprovalRecord),
}

/// What an approved (or break-glass) call did.
#[derive(Debug, Clone)]
pub enum Executed {
    /// A lifecycle call ran, with its per-topic outcomes.
    Lifecycle(OpResult),
    /// The mirror was deleted.
    Deleted,
    /// A drill started, as this operation.
    Drill(String),
    /// The engine refused the call as a whole.
    Refused(EngineError),
}

impl Executed {
    /// The operation the call ran as, when one was recorded.
    #[must_use]
    pub fn operation_id(&self) -> Option<&str> {
        match self {
            Executed::Lifecycle(r) => Some(&r.operation_id),
            Executed::Drill(id) => Some(id),
            Executed::Deleted | Executed::Refused(_) => None,
        }
    }
}

/// A fresh operation ID: unique across instances (a random part, not a per-process counter).
pub(crate) fn new_operation_id(now: Timestamp) -> String {
    format!("op-{}-{:08x}", now.as_millis(), rand::random::<u32>())
}

fn refused(e: DecisionRefused) -> EngineError {
    let kind = match &e {
        DecisionRefused::SameIdentity { .. } => ProblemKind::ApprovalSameIdentity,
        DecisionRefused::NotPending { .. } => ProblemKind::ApprovalNotPending,
        DecisionRefused::Expired { .. } => ProblemKind::ApprovalExpired,
    };
    EngineError::rejected(kind, e.to_string())
}

impl EngineHandle {
    /// The mirror's approval policy, from the latest snapshot (`None`: no such mirror).
    #[must_use]
    pub fn approval_policy(&self, mirror: &str) -> Option<ApprovalPolicy> {
        self.snapshot().mirror(mirror).map(|m| m.approval.clone())
    }

    /// The approval record an operation carries (a request, or a decision or break-glass entry).
    #[must_use]
    pub fn approval(&self, operation_id: &str) -> Option<ApprovalRecord> {
        self.approvals.read().unwrap_or_else(|e| e.into_inner()).get(operation_id).cloned()
    }

    /// Every request and break-glass entry still kept (not the decisions' copies).
    #[must_use]
    pub fn approvals_listed(&self) -> Vec<ApprovalRecord> {
        let approvals = self.approvals.read().unwrap_or_else(|e| e.into_inner());
        approvals.iter().filter(|(id, a)| a.request_id == **id).map(|(_, a)| a.clone()).collect()
    }

    /// Every approval request still kept (with its operation), newest first.
    #[must_use]
    pub fn approval_requests(&self) -> Vec<(OperationView, ApprovalRecord)> {
        let approvals = self.approvals.read().unwrap_or_else(|e| e.into_inner());
        self.operations()
            .into_iter()
            .filter(|o| o.kind == OperationKind::ApprovalRequest)
            .filter_map(|o| approvals.get(&o.id).cloned().map(|a| (o, a)))
            .collect()
    }

    /// The request whose decision or execution an operation is, if any: the request itself, or
    /// the request that ran as it.
    #[must_use]
    pub fn approval_of(&self, operation_id: &str) -> Option<ApprovalRecord> {
        let approvals = self.approvals.read().unwrap_or_else(|e| e.into_inner());
        if let Some(a) = approvals.get(operation_id) {
            return Some(a.clone());
        }
        approvals.values().find(|a| a.executed_operation_id.as_deref() == Some(operation_id)).cloned()
    }

    /// Records `op` (and its approval record) in the audit trail.
    pub(crate) async fn record(&self, op: OperationView, approval: Option<ApprovalRecord>) -> Result<(), EngineError> {
        self.call(|reply| Request::RecordOperation { op, approval, reply }).await
    }

    fn entry(
        &self,
        id: String,
        kind: OperationKind,
        record: &ApprovalRecord,
        by: &Actor,
        at: Timestamp,
        finished: bool,
    ) -> OperationView {
        OperationView {
            id,
            mirror: record.mirror.clone(),
            kind,
            topics: record.call.topics.clone(),
            requested_by: by.identity.clone(),
            client_address: by.address.clone(),
            requested_at: at.as_millis(),
            finished_at: finished.then_some(at.as_millis()),
            results: Vec::new(),
            results_omitted: Default::default(),
            accepted_by: Some(self.snapshot().cluster.this_instance.clone()).filter(|i| !i.is_empty()),
        }
    }

    /// Whether `action` on `mirror` needs a second person (the mirror's policy).
    #[must_use]
    pub fn needs_approval(&self, mirror: &str, action: Option<ApprovalAction>) -> bool {
        action.is_some_and(|a| self.approval_policy(mirror).is_some_and(|p| p.requires(a)))
    }

    /// The gate of a guarded call, for the API and the dashboard alike: run it now (no approval
    /// needed, or an admin's break-glass call with a reason), or record it as a request waiting
    /// for a second person (with the caller's reason). `is_admin`: the caller's role allows
    /// break-glass.
    #[allow(clippy::too_many_arguments)]
    pub async fn gate(
        &self,
        mirror: &str,
        action: Option<ApprovalAction>,
        call: PendingCall,
        actor: &Actor,
        is_admin: bool,
        reason: Option<&str>,
        break_glass: bool,
    ) -> Result<Gate, EngineError> {
        use crate::domain::approval::check_reason;
        if break_glass && !is_admin {
            return Err(EngineError::rejected(
                ProblemKind::BreakGlassNotAllowed,
                format!(
                    "{:?} is not an admin; only an admin may run a call without a second person's approval",
                    actor.identity
                ),
            ));
        }
        let Some(action) = action.filter(|_| self.needs_approval(mirror, action)) else {
            return Ok(Gate::Run(None));
        };
        let reason_error = |e: String| EngineError::rejected(ProblemKind::ReasonRequired, e);
        if break_glass {
            let reason = check_reason(reason, "A break-glass call").map_err(reason_error)?;
            return Ok(Gate::Run(Some(self.break_glass(mirror, action, call, actor, reason).await?)));
        }
        let what =
            format!("This call needs a second person's approval under mirror {mirror:?}'s policy ({action}); it");
        let reason = check_reason(reason, &what).map_err(reason_error)?;
        Ok(Gate::Pending(self.request_approval(mirror, action, call, actor, reason).await?))
    }

    /// Records a call the mirror's policy puts behind a second person, as a pending request,
    /// and returns it. `reason` was checked by the caller (`domain::approval::check_reason`).
    pub async fn request_approval(
        &self,
        mirror: &str,
        action: ApprovalAction,
        call: PendingCall,
        actor: &Actor,
        reason: String,
    ) -> Result<ApprovalRecord, EngineError> {
        let policy = self.approval_policy(mirror).ok_or_else(|| EngineError::mirror_not_found(mirror))?;
        let now = crate::clock::now();
        let id = new_operation_id(now);
        let record = ApprovalRecord {
            request_id: id.clone(),
            mirror: mirror.to_string(),
            action,
            status: ApprovalStatus::Pending,
            reason,
            requested_by: actor.identity.clone(),
            client_address: actor.address.clone(),
            requested_at: now,
            expires_at: policy.expires_at(now),
            decided_by: None,
            decided_at: None,
            decision_reason: None,
            executed_operation_id: None,
            call,
        };
        let op = self.entry(id, OperationKind::ApprovalRequest, &record, actor, now, false);
        self.record(op, Some(record.clone())).await?;
        tracing::info!(%mirror, action = %action, identity = %actor.identity, request = %record.request_id, "call waits for a second person's approval");
        Ok(record)
    }

    /// Records a break-glass call (an admin runs it at once, without a second person) before it
    /// runs; the caller runs it and then calls [`Self::approval_ran`] with what it did.
    pub async fn break_glass(
        &self,
        mirror: &str,
        action: ApprovalAction,
        call: PendingCall,
        actor: &Actor,
        reason: String,
    ) -> Result<ApprovalRecord, EngineError> {
        if self.approval_policy(mirror).is_none() {
            return Err(EngineError::mirror_not_found(mirror));
        }
        let now = crate::clock::now();
        let id = new_operation_id(now);
        let record = ApprovalRecord {
            request_id: id.clone(),
            mirror: mirror.to_string(),
            action,
            status: ApprovalStatus::BreakGlass,
            reason,
            requested_by: actor.identity.clone(),
            client_address: actor.address.clone(),
            requested_at: now,
            expires_at: now,
            decided_by: None,
            decided_at: None,
            decision_reason: None,
            executed_operation_id: None,
            call,
        };
        let op = self.entry(id, OperationKind::BreakGlass, &record, actor, now, false);
        self.record(op, Some(record.clone())).await?;
        tracing::warn!(%mirror, action = %action, identity = %actor.identity, entry = %record.request_id, "break-glass: the call runs without a second person");
        Ok(record)
    }

    /// Records what an approved or break-glass call did: the operation it ran as (`None` for a
    /// delete, which records its own), or that the engine refused it.
    pub async fn approval_ran(
        &self,
        record: &ApprovalRecord,
        executed: &Executed,
    ) -> Result<ApprovalRecord, EngineError> {
        let mut done = record.clone();
        done.executed_operation_id = executed.operation_id().map(str::to_string);
        if done.status != ApprovalStatus::BreakGlass {
            done.status = match executed {
                Executed::Refused(_) => ApprovalStatus::Failed,
                _ => ApprovalStatus::Executed,
            };
        }
        let kind = if done.status == ApprovalStatus::BreakGlass {
            OperationKind::BreakGlass
        } else {
            OperationKind::ApprovalRequest
        };
        let requester = Actor { identity: done.requested_by.clone(), address: done.client_address.clone() };
        let mut op = self.entry(done.request_id.clone(), kind, &done, &requester, done.requested_at, false);
        op.finished_at = Some(crate::clock::now().as_millis());
        if let Executed::Refused(e) = executed {
            op.results = vec![super::TopicOutcome {
                topic: String::new(),
                ok: false,
                error: Some(super::Problem { kind: e.kind(), detail: e.to_string() }),
            }];
        }
        self.record(op, Some(done.clone())).await?;
        Ok(done)
    }

    /// Runs a guarded call as `actor` (the requester, once approved; the admin, for a
    /// break-glass call).
    pub async fn run_guarded(&self, record: &ApprovalRecord, actor: &Actor) -> Executed {
        let mirror = record.mirror.as_str();
        let result = match record.action {
            ApprovalAction::Stop => self
                .stop_as_asked(
                    mirror,
                    record.call.selector(),
                    record.call.exclude,
                    record.call.promote(),
                    actor.clone(),
                )
                .await
                .map(Executed::Lifecycle),
            ApprovalAction::Resync | ApprovalAction::Failback => {
                let op = LifecycleOp::Start { truncation: record.call.truncation };
                self.lifecycle(mirror, record.call.selector(), op, false, actor.clone()).await.map(Executed::Lifecycle)
            }
            ApprovalAction::Delete => self.delete_mirror(mirror, actor.clone()).await.map(|()| Executed::Deleted),
            ApprovalAction::Drill => {
                let approved_by = record.decided_by.clone();
                self.start_drill(mirror, record.call.drill.clone(), actor, approved_by).await.map(Executed::Drill)
            }
        };
        result.unwrap_or_else(Executed::Refused)
    }

    /// A second person's decision on a request: approved, it runs at once (as the requester
    /// asked it); rejected, nothing runs. Refused for the requester themselves, for a request that
    /// is not pending, and for one that expired.
    pub async fn decide(
        &self,
        request_id: &str,
        decision: Decision,
        decider: &Actor,
        note: Option<String>,
    ) -> Result<(ApprovalRecord, Option<Executed>), EngineError> {
        let _one_at_a_time = self.deciding.lock().await;
        let not_found = || {
            EngineError::rejected(
                ProblemKind::ApprovalNotFound,
                format!("no approval request {request_id:?} (the last 1,000 operations are kept)"),
            )
        };
        let record = self.approval(request_id).filter(|a| a.request_id == request_id).ok_or_else(not_found)?;
        let now = crate::clock::now();
        check_decision(&record.requested_by, record.status, record.expires_at, &decider.identity, now)
            .map_err(refused)?;
        let mut decided = record.clone();
        decided.status = decision.status();
        decided.decided_by = Some(decider.identity.clone());
        decided.decided_at = Some(now);
        decided.decision_reason = note;
        // The request's own record first (persist before acting), then the decision's entry.
        let requester = Actor { identity: record.requested_by.clone(), address: record.client_address.clone() };
        let mut request_op = self.entry(
            record.request_id.clone(),
            OperationKind::ApprovalRequest,
            &decided,
            &requester,
            record.requested_at,
            false,
        );
        if decision == Decision::Reject {
            request_op.finished_at = Some(now.as_millis());
        }
        self.record(request_op, Some(decided.clone())).await?;
        let kind = match decision {
            Decision::Approve => OperationKind::Approve,
            Decision::Reject => OperationKind::Reject,
        };
        let entry = self.entry(new_operation_id(now), kind, &decided, decider, now, true);
        self.record(entry, Some(decided.clone())).await?;
        tracing::info!(mirror = %record.mirror, request = %request_id, decider = %decider.identity, decision = decision.as_str(), "approval request decided");
        if decision == Decision::Reject {
            return Ok((decided, None));
        }
        let executed = self.run_guarded(&decided, &requester).await;
        let done = self.approval_ran(&decided, &executed).await?;
        Ok((done, Some(executed)))
    }
}
