//! The per-partition state machine: [`transition`]`(record, event, now) -> Step { next, actions }`.
//!
//! Pure: no I/O, no clock (time arrives as `now`), no randomness (retry jitter arrives with
//! [`Event::Error`]). The legal moves are one table, [`rule`]; [`transition`] implements them and
//! the tests check both agree on every (state, event) pair.
//!
//! # Diagram
//!
//! ```mermaid
//! stateDiagram-v2
//!     [*] --> UNKNOWN
//!     UNKNOWN --> PREPARING: start
//!     STOPPED --> PREPARING: start (restart)
//!     PREPARING --> MIRRORING: prepared
//!     MIRRORING --> PAUSING: pause
//!     PAUSING --> PAUSED: paused
//!     PAUSED --> MIRRORING: resume
//!     PAUSING --> PREPARING: resume
//!     MIRRORING --> PREPARING: loaded
//!     UNKNOWN --> STOPPING: stop
//!     PREPARING --> STOPPING: stop
//!     MIRRORING --> STOPPING: stop
//!     PAUSING --> STOPPING: stop
//!     PAUSED --> STOPPING: stop
//!     FAILED --> STOPPING: stop
//!     STOPPING --> STOPPED: stopped
//!     UNKNOWN --> FAILED: error
//!     PREPARING --> FAILED: error
//!     MIRRORING --> FAILED: error
//!     PAUSING --> FAILED: error
//!     PAUSED --> FAILED: error
//!     STOPPING --> FAILED: error
//!     FAILED --> PREPARING: retry (failed in UNKNOWN, PREPARING or MIRRORING)
//!     FAILED --> PAUSING: retry (failed in PAUSING or PAUSED)
//!     FAILED --> STOPPING: retry (failed in STOPPING)
//!     FAILED --> PREPARING: recover (as retry)
//!     FAILED --> PAUSING: recover (as retry)
//!     FAILED --> STOPPING: recover (as retry)
//!     STOPPED --> UNKNOWN: remove
//!     FAILED --> UNKNOWN: remove
//! ```
//!
//! Self-transitions (accepted, state unchanged, epoch + 1): `progress` in MIRRORING and PAUSING;
//! `loaded` in PREPARING, PAUSING, STOPPING and FAILED; `error` in FAILED.
//!
//! # Decisions
//!
//! - **Restart is `Start`.** There is no restart event: `Start` on a STOPPED partition is the
//!   seed's STOPPED → PREPARING restart, with the same truncation choice as a first start.
//!   PREPARING then resumes incrementally from the stop point, or refuses with
//!   `DESTINATION_DIVERGED` when local writes exist and no truncation mode was chosen.
//! - **Repeated requests are [`TransitionError::AlreadyInState`]**, not an empty `Ok` step: the
//!   record, its epoch and the audit trail only move when something changes, and the API maps
//!   the error to success through [`TransitionError::is_harmless`]. Cells of the table marked
//!   [`Rule::AlreadyInState`]: start while PREPARING/MIRRORING, pause while PAUSING/PAUSED, resume
//!   while PREPARING/MIRRORING, stop while STOPPING/STOPPED, remove while UNKNOWN, loaded while
//!   UNKNOWN/PAUSED/STOPPED. In FAILED, an error identical to the recorded one, or a retryable
//!   error reported over a non-retryable one, is also `AlreadyInState`.
//! - **Stop** is accepted from every state except STOPPING and STOPPED, and always runs the whole
//!   stop sequence (every step is harmless when there is nothing to undo), so a stop after a
//!   failure or a crash leaves the same fenced, recorded stop point.
//! - **Errors in STOPPED are rejected**: the partition is an ordinary topic, mirror errors do not
//!   apply to it, and a local write there is expected, not foreign.
//! - **An error in FAILED** replaces the recorded cause, keeping `previous_state` and the retry
//!   schedule; a non-retryable cause cancels the retry and is never replaced by a retryable one.
//! - **Retry targets**: after a failure the last destination transaction may have been aborted
//!   or its outcome may be unknown, so a partition never goes straight back to fetching. Failed in
//!   UNKNOWN, PREPARING or MIRRORING → PREPARING (identities re-checked, start position recomputed
//!   from durable state); in PAUSING or PAUSED → PAUSING (the pause sequence runs again); in
//!   STOPPING → STOPPING. Retries need a retryable code, attempts left and the due time reached;
//!   an early retry ([`Event::RetryEarly`]: the cluster whose silence failed the partition
//!   answers again) needs the first two only.
//! - **Recover** (KIP-1279's `RecoverMirrorTopics`) is an operator's retry: same targets, none of
//!   the retry's conditions (any code, exhausted or not, due or not), and the retry count starts
//!   again from 0. It needs nothing else: the target's checks run again, so a cause that was not
//!   fixed fails the partition again. On any state but FAILED it is [`Rule::AlreadyInState`]
//!   (nothing to recover), so a recover of a whole topic touches only its FAILED partitions.
//! - **Resume while PAUSING → PREPARING**: the pause's commit is still in flight, so the start
//!   position is recomputed after it resolves rather than taken from the record.
//! - **Remove → UNKNOWN** keeps the committed position and stop point, so a topic removed and
//!   added back can never silently re-mirror over data it already has: going backwards needs a
//!   start with truncation mode `resync`.
//! - **Loaded** (engine startup or takeover) re-issues the actions of transient states and of
//!   FAILED (alert, retry timer); a MIRRORING partition goes through PREPARING so the source's
//!   identity is checked again after the engine was away.
//!
//! # Engine contract
//!
//! - Persist [`Step::next`] (compare-and-set on `state_epoch`) before running its actions; run
//!   them in order; report a failed action as [`Event::Error`] and skip the rest.
//! - Write the record produced by [`Event::Progress`] in the same destination transaction as the
//!   records it covers (DESIGN.md §4: data and positions become visible atomically), so the
//!   committed position in the record never lags the destination.
//!
//! # Invariants
//!
//! Checked by the property test at the bottom of this file, for random event sequences:
//! - **epoch**: every accepted event increments `state_epoch` by exactly one.
//! - **assign-iff-mirroring**: [`Action::Assign`] is emitted only by steps into MIRRORING, every
//!   step into MIRRORING emits it, and the partition is assigned exactly while MIRRORING.
//! - **monotone-position**: the committed position never moves backwards, except when a start
//!   with truncation mode `resync` completes preparation.
//! - **record invariants**: every `next` passes [`PartitionRecord::validate`] (so FAILED always
//!   has an error).

use super::action::{Action, Alert, Severity};
use super::backoff::{Jitter, RetryPolicy};
use super::error_code::ErrorCode;
use super::event::{Event, EventKind};
use super::record::{MirrorPosition, PartitionError, PartitionRecord, StopPoint, Truncation};
use super::state::PartitionState;
use super::time::Timestamp;

/// How the state machine treats an event kind in a state: one cell of the transition table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Rule {
    /// The event is handled. Guards on the record may still refuse it (a retry that is not due,
    /// a position that would go backwards, …) or find it already satisfied.
    Allowed,
    /// The request is already satisfied: [`TransitionError::AlreadyInState`], harmless.
    AlreadyInState,
    /// The event does not apply: [`TransitionError::InvalidTransition`].
    Rejected,
}

/// The transition table: how `event` is treated in `state`.
///
/// The API and UI use it to offer only the actions that apply (e.g. to enable a Pause button);
/// [`TransitionError::InvalidTransition`] quotes it.
#[must_use]
pub const fn rule(state: PartitionState, event: EventKind) -> Rule {
    use EventKind as E;
    use PartitionState as S;
    match (event, state) {
        (E::Start, S::Unknown | S::Stopped)
        | (E::Prepared, S::Preparing)
        | (E::Pause, S::Mirroring)
        | (E::Paused, S::Pausing)
        | (E::Resume, S::Pausing | S::Paused)
        // STOPPING: transactions the data path committed before it let go of the partition
        // still count; the stop point must include them.
        | (E::Progress, S::Mirroring | S::Pausing | S::Stopping)
        | (E::Stop, S::Unknown | S::Preparing | S::Mirroring | S::Pausing | S::Paused | S::Failed)
        | (E::Stopped, S::Stopping)
        | (E::Error, S::Unknown | S::Preparing | S::Mirroring | S::Pausing | S::Paused | S::Stopping | S::Failed)
        | (E::Retry | E::RetryEarly | E::Recover, S::Failed)
        // A FAILED partition stays FAILED; what its retry does changes (`redirect_failed`).
        | (E::Pause | E::Resume, S::Failed)
        | (E::Remove, S::Stopped | S::Failed)
        | (E::Loaded, S::Preparing | S::Mirroring | S::Pausing | S::Stopping | S::Failed) => Rule::Allowed,
        (E::Start, S::Preparing | S::Mirroring)
        | (E::Pause, S::Pausing | S::Paused)
        | (E::Resume, S::Preparing | S::Mirroring)
        | (E::Stop, S::Stopping | S::Stopped)
        | (E::Remove, S::Unknown)
        | (E::Loaded, S::Unknown | S::Paused | S::Stopped)
        | (
            E::Recover,
            S::Unknown | S::Preparing | S::Mirroring | S::Pausing | S::Paused | S::Stopping | S::Stopped,
        ) => Rule::AlreadyInState,
        _ => Rule::Rejected,
    }
}

/// The states in which `event` is handled ([`Rule::Allowed`]), in lifecycle order.
#[must_use]
pub fn valid_from(event: EventKind) -> Vec<PartitionState> {
    PartitionState::ALL.into_iter().filter(|&state| rule(state, event) == Rule::Allowed).collect()
}

/// "MIRRORING", "PAUSING or PAUSED", "UNKNOWN, PREPARING or FAILED".
fn valid_from_text(event: EventKind) -> String {
    let names: Vec<&str> = valid_from(event).into_iter().map(PartitionState::as_str).collect();
    match names.split_last() {
        None => "no state".to_owned(),
        Some((last, [])) => (*last).to_owned(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
    }
}

/// The outcome of an accepted event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// The successor record, to persist before running `actions`.
    pub next: PartitionRecord,
    /// What the engine must do, in order.
    pub actions: Vec<Action>,
}

/// Why an event was not accepted. The messages are shown to users as they are.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TransitionError {
    /// The event does not apply in this state ([`Rule::Rejected`]).
    #[error(
        "cannot {verb} a partition in state {state} ({event} is valid from {valid} only)",
        verb = .event.verb(),
        valid = valid_from_text(*.event)
    )]
    InvalidTransition {
        /// The partition's state.
        state: PartitionState,
        /// The refused event.
        event: EventKind,
    },
    /// The request is already satisfied; nothing changed. Harmless.
    #[error("nothing to do: the partition is already {state} ({event} was already applied)")]
    AlreadyInState {
        /// The partition's state.
        state: PartitionState,
        /// The redundant event.
        event: EventKind,
    },
    /// A retry of a failure that retrying cannot fix.
    #[error(
        "cannot retry a partition in state FAILED with {code}: the error is not retryable; {remedy}",
        remedy = .code.remedy()
    )]
    NotRetryable {
        /// The recorded cause.
        code: ErrorCode,
    },
    /// A recover of a failure it would paper over: a FOREIGN_WRITE (see [`recover_refusal`]).
    #[error(
        "cannot recover a partition FAILED with {code}: a record kmirror did not write is in the destination partition, and a recover would mirror on top of it; stop the topic (the copy stays as it is), then start it with truncation mode resync to mirror it again"
    )]
    NotRecoverable {
        /// The recorded cause.
        code: ErrorCode,
    },
    /// A pause or resume of a FAILED partition that it cannot decide for ([`redirect_failed`]).
    #[error("cannot {verb} a partition in state FAILED: {why}", verb = .event.verb())]
    FailedNotRedirected {
        /// The refused event.
        event: EventKind,
        /// Why, and what to do instead.
        why: &'static str,
    },
    /// A retry before its backoff elapsed.
    #[error("cannot retry a partition in state FAILED yet: the next retry is due at {at}")]
    RetryNotDue {
        /// When the retry is due.
        at: Timestamp,
    },
    /// A retry after the automatic attempts were used up.
    #[error(
        "cannot retry a partition in state FAILED: automatic retries are exhausted ({attempts} of {max_attempts} used); fix the cause and recover the topic, or stop or remove it"
    )]
    RetriesExhausted {
        /// Retries performed.
        attempts: u32,
        /// The policy's limit.
        max_attempts: u32,
    },
    /// The event would move the committed position backwards.
    #[error(
        "{event} in state {state} would move the committed position backwards from {current} to {proposed}; only a start with truncation mode resync may do that"
    )]
    PositionRegressed {
        /// The partition's state.
        state: PartitionState,
        /// The refused event.
        event: EventKind,
        /// The committed position.
        current: MirrorPosition,
        /// The position the event carried.
        proposed: MirrorPosition,
    },
    /// The reported stop point lies before what was already committed.
    #[error("stopped in state STOPPING reports a stop point ({stop}) behind the committed position ({position})")]
    StopPointBehindPosition {
        /// The reported stop point.
        stop: StopPoint,
        /// The committed position.
        position: MirrorPosition,
    },
}

impl TransitionError {
    /// Whether the request was already satisfied, so an API can answer it as a success.
    #[must_use]
    pub const fn is_harmless(&self) -> bool {
        matches!(self, Self::AlreadyInState { .. })
    }
}

/// Applies `event` to `record` at `now` with the default [`RetryPolicy`].
///
/// # Errors
///
/// See [`transition_with`].
pub fn transition(record: &PartitionRecord, event: Event, now: Timestamp) -> Result<Step, TransitionError> {
    transition_with(record, event, now, &RetryPolicy::DEFAULT)
}

/// Applies `event` to `record` at `now`; `policy` schedules and limits automatic retries.
///
/// # Errors
///
/// - [`TransitionError::InvalidTransition`] when [`rule`] rejects the pair.
/// - [`TransitionError::AlreadyInState`] when the request is already satisfied (harmless).
/// - [`TransitionError::PositionRegressed`] for a `Prepared` or `Progress` that would move the
///   committed position backwards (outside a resync start).
/// - [`TransitionError::StopPointBehindPosition`] for a `Stopped` behind the committed position.
/// - [`TransitionError::NotRetryable`], [`TransitionError::RetriesExhausted`] and
///   [`TransitionError::RetryNotDue`] for a `Retry` that may not run.
pub fn transition_with(
    record: &PartitionRecord,
    event: Event,
    now: Timestamp,
    policy: &RetryPolicy,
) -> Result<Step, TransitionError> {
    use PartitionState as S;
    let state = record.state;
    let kind = event.kind();
    let already = TransitionError::AlreadyInState { state, event: kind };
    match (state, event) {
        (S::Unknown | S::Stopped, Event::Start { truncation }) => Ok(start(record, truncation, now)),
        (S::Preparing | S::Mirroring, Event::Start { .. })
        | (S::Pausing | S::Paused, Event::Pause)
        | (S::Preparing | S::Mirroring, Event::Resume)
        | (S::Stopping | S::Stopped, Event::Stop)
        | (S::Unknown, Event::Remove)
        | (S::Unknown | S::Paused | S::Stopped, Event::Loaded)
        | (
            S::Unknown | S::Preparing | S::Mirroring | S::Pausing | S::Paused | S::Stopping | S::Stopped,
            Event::Recover,
        ) => Err(already),
        (S::Preparing, Event::Prepared { start }) => prepared(record, start, now),
        (S::Mirroring, Event::Pause) => Ok(Step { next: moved(record, S::Pausing, now), actions: pausing_actions() }),
        (S::Pausing, Event::Paused) => {
            let mut next = moved(record, S::Paused, now);
            next.retry_count = 0;
            Ok(Step { next, actions: Vec::new() })
        }
        (S::Paused, Event::Resume) => Ok(resume_paused(record, now)),
        (S::Pausing, Event::Resume) => {
            Ok(Step { next: moved(record, S::Preparing, now), actions: preparing_actions(Truncation::None) })
        }
        (S::Mirroring | S::Pausing | S::Stopping, Event::Progress { position }) => progress(record, position, now),
        (S::Unknown | S::Preparing | S::Mirroring | S::Pausing | S::Paused | S::Failed, Event::Stop) => {
            Ok(stop(record, now))
        }
        (S::Stopping, Event::Stopped { stop }) => stopped(record, stop, now),
        (
            S::Unknown | S::Preparing | S::Mirroring | S::Pausing | S::Paused | S::Stopping,
            Event::Error { code, message, jitter },
        ) => Ok(fail(record, code, message, jitter, now, policy)),
        (S::Failed, Event::Error { code, message, jitter }) => fail_again(record, code, message, jitter, now, policy),
        (S::Failed, Event::Retry) => retry(record, now, policy, true),
        (S::Failed, Event::RetryEarly) => retry(record, now, policy, false),
        (S::Failed, Event::Pause | Event::Resume) => redirect_failed_record(record, kind, now),
        (S::Failed, Event::Recover) => match recover_refusal(record) {
            Some(e) => Err(e),
            None => Ok(recover(record, now)),
        },
        (S::Stopped | S::Failed, Event::Remove) => Ok(remove(record, now)),
        (S::Preparing | S::Mirroring | S::Pausing | S::Stopping | S::Failed, Event::Loaded) => {
            Ok(loaded(record, now, policy))
        }
        _ => Err(TransitionError::InvalidTransition { state, event: kind }),
    }
}

/// The successor of `record` in state `to`: epoch + 1, timestamps and previous state updated,
/// failure data dropped outside FAILED. Everything else is copied for the caller to adjust.
fn moved(record: &PartitionRecord, to: PartitionState, now: Timestamp) -> PartitionRecord {
    let mut next = record.clone();
    // 2^64 transitions cannot happen; saturating keeps the arithmetic total.
    next.state_epoch = record.state_epoch.saturating_add(1);
    next.updated_at = now;
    if to != record.state {
        next.previous_state = Some(record.state);
        next.state = to;
        next.state_since = now;
    }
    if to != PartitionState::Failed {
        next.error = None;
        next.next_retry_at = None;
    }
    if !matches!(to, PartitionState::Preparing | PartitionState::Failed) {
        next.truncation = Truncation::None;
    }
    next
}

fn preparing_actions(truncation: Truncation) -> Vec<Action> {
    let mut actions = vec![Action::CheckSourceClusterId, Action::CheckTopicIds, Action::EnsureDestinationTopic];
    if let Truncation::Resync { quarantine } = truncation {
        actions.push(Action::DeleteDestinationRecords { quarantine });
    }
    actions.push(Action::ComputeStartPosition { resync: truncation.is_resync() });
    actions
}

fn pausing_actions() -> Vec<Action> {
    vec![Action::Unassign, Action::CommitOpenTransaction]
}

/// The STOPPING sequence: what a stop runs, and runs again when an earlier stop did not finish.
pub fn stopping_actions() -> Vec<Action> {
    vec![Action::Unassign, Action::AbortOpenTransaction, Action::PersistLastMirrorEpochs, Action::FenceProducer]
}

/// Clean-up when an operator takes a partition out of FAILED (stop, remove).
fn leave_failed_actions(record: &PartitionRecord) -> Vec<Action> {
    if record.state != PartitionState::Failed {
        return Vec::new();
    }
    let mut actions = Vec::new();
    if record.next_retry_at.is_some() {
        actions.push(Action::CancelRetry);
    }
    actions.push(Action::ClearAlert);
    actions
}

fn start(record: &PartitionRecord, truncation: Truncation, now: Timestamp) -> Step {
    let mut next = moved(record, PartitionState::Preparing, now);
    next.truncation = truncation;
    next.retry_count = 0;
    Step { next, actions: preparing_actions(truncation) }
}

fn prepared(record: &PartitionRecord, start: MirrorPosition, now: Timestamp) -> Result<Step, TransitionError> {
    if let Some(current) = record.position
        && !record.truncation.is_resync()
        && start.is_behind(&current)
    {
        return Err(TransitionError::PositionRegressed {
            state: record.state,
            event: EventKind::Prepared,
            current,
            proposed: start,
        });
    }
    Ok(enter_mirroring(record, start, now))
}

/// Into MIRRORING from `from`: the only way a partition gets assigned.
fn enter_mirroring(record: &PartitionRecord, from: MirrorPosition, now: Timestamp) -> Step {
    let mut next = moved(record, PartitionState::Mirroring, now);
    next.position = Some(from);
    // A new mirroring era begins: the old stop point no longer bounds the mirrored data.
    next.stop_point = None;
    Step { next, actions: vec![Action::Assign { from }] }
}

fn resume_paused(record: &PartitionRecord, now: Timestamp) -> Step {
    match record.position {
        Some(from) => enter_mirroring(record, from, now),
        // Unreachable for a valid record (PAUSED always has a position); re-derive it.
        None => {
            Step { next: moved(record, PartitionState::Preparing, now), actions: preparing_actions(Truncation::None) }
        }
    }
}

fn progress(record: &PartitionRecord, position: MirrorPosition, now: Timestamp) -> Result<Step, TransitionError> {
    if let Some(current) = record.position
        && position.is_behind(&current)
    {
        return Err(TransitionError::PositionRegressed {
            state: record.state,
            event: EventKind::Progress,
            current,
            proposed: position,
        });
    }
    let mut next = moved(record, record.state, now);
    if record.position.is_none_or(|current| position.next_source_offset > current.next_source_offset) {
        // Records flowed: the partition is healthy again, so later failures back off afresh.
        next.retry_count = 0;
    }
    next.position = Some(position);
    Ok(Step { next, actions: Vec::new() })
}

fn stop(record: &PartitionRecord, now: Timestamp) -> Step {
    let mut actions = leave_failed_actions(record);
    actions.extend(stopping_actions());
    let mut next = moved(record, PartitionState::Stopping, now);
    next.retry_count = 0;
    Step { next, actions }
}

fn stopped(record: &PartitionRecord, stop: StopPoint, now: Timestamp) -> Result<Step, TransitionError> {
    let mut next = moved(record, PartitionState::Stopped, now);
    next.retry_count = 0;
    // A stop point still in force means nothing was mirrored since it was taken (the partition
    // never reached MIRRORING again): keep it, because records after it are local writes that a
    // fresh measurement would count as mirrored data.
    if record.stop_point.is_none() {
        if let Some(position) = record.position
            && (stop.last_mirror_epoch < position.source_leader_epoch
                || stop.destination_stop_offset < position.destination_end_offset)
        {
            return Err(TransitionError::StopPointBehindPosition { stop, position });
        }
        next.stop_point = Some(stop);
    }
    Ok(Step { next, actions: Vec::new() })
}

/// What happens about retrying a failure.
#[derive(Debug, Clone, Copy)]
enum RetryPlan {
    /// Retry `attempt` (1-based) is due at `at`.
    Scheduled { at: Timestamp, attempt: u32 },
    /// Retryable, but no attempts are left.
    Exhausted,
    /// The code is not retryable.
    NotRetryable,
}

fn plan_retry(retry_count: u32, code: ErrorCode, jitter: Jitter, now: Timestamp, policy: &RetryPolicy) -> RetryPlan {
    if !code.is_retryable() {
        RetryPlan::NotRetryable
    } else if retry_count >= policy.max_attempts {
        RetryPlan::Exhausted
    } else {
        RetryPlan::Scheduled {
            at: policy.backoff.retry_at(now, retry_count, jitter),
            attempt: retry_count.saturating_add(1),
        }
    }
}

fn failure_alert(code: ErrorCode, message: &str, plan: RetryPlan, retry_count: u32, policy: &RetryPolicy) -> Alert {
    let (severity, outlook) = match plan {
        RetryPlan::Scheduled { at, attempt } => {
            (Severity::Warning, format!("automatic retry {attempt} of {} at {at}", policy.max_attempts))
        }
        RetryPlan::Exhausted => (
            Severity::Critical,
            format!(
                "automatic retries are exhausted ({retry_count} of {} used); fix the cause and recover the topic, or stop or remove it",
                policy.max_attempts
            ),
        ),
        RetryPlan::NotRetryable => (Severity::Critical, code.remedy().to_owned()),
    };
    Alert { severity, code, message: format!("{code}: {message}; {outlook}") }
}

/// Into FAILED from a non-FAILED state.
fn fail(
    record: &PartitionRecord,
    code: ErrorCode,
    message: String,
    jitter: Jitter,
    now: Timestamp,
    policy: &RetryPolicy,
) -> Step {
    let mut actions = Vec::new();
    if matches!(record.state, PartitionState::Mirroring | PartitionState::Pausing) {
        // Records of this partition in the open transaction may be wrong (a truncated source, a
        // foreign write): discard them; the committed position stays the resume point.
        actions.push(Action::Unassign);
        actions.push(Action::AbortOpenTransaction);
    }
    let plan = plan_retry(record.retry_count, code, jitter, now, policy);
    actions.push(Action::Alert(failure_alert(code, &message, plan, record.retry_count, policy)));
    let mut next = moved(record, PartitionState::Failed, now);
    next.next_retry_at = None;
    if let RetryPlan::Scheduled { at, attempt } = plan {
        next.next_retry_at = Some(at);
        actions.push(Action::ScheduleRetry { at, attempt });
    }
    next.error = Some(PartitionError { code, message, since: now });
    Step { next, actions }
}

/// Another error while FAILED: a new cause, same failure.
fn fail_again(
    record: &PartitionRecord,
    code: ErrorCode,
    message: String,
    jitter: Jitter,
    now: Timestamp,
    policy: &RetryPolicy,
) -> Result<Step, TransitionError> {
    if let Some(current) = &record.error
        && ((current.code == code && current.message == message)
            || (!current.code.is_retryable() && code.is_retryable()))
    {
        return Err(TransitionError::AlreadyInState { state: record.state, event: EventKind::Error });
    }
    let mut actions = Vec::new();
    let mut next = moved(record, PartitionState::Failed, now);
    let plan = match record.next_retry_at {
        // Keep the pending retry: a new transient cause does not push it out.
        Some(at) if code.is_retryable() => RetryPlan::Scheduled { at, attempt: record.retry_count.saturating_add(1) },
        _ => {
            let plan = plan_retry(record.retry_count, code, jitter, now, policy);
            match plan {
                RetryPlan::Scheduled { at, attempt } => {
                    next.next_retry_at = Some(at);
                    actions.push(Action::ScheduleRetry { at, attempt });
                }
                RetryPlan::Exhausted | RetryPlan::NotRetryable => {
                    if record.next_retry_at.is_some() {
                        actions.push(Action::CancelRetry);
                    }
                    next.next_retry_at = None;
                }
            }
            plan
        }
    };
    actions.insert(0, Action::Alert(failure_alert(code, &message, plan, record.retry_count, policy)));
    next.error = Some(PartitionError { code, message, since: now });
    Ok(Step { next, actions })
}

/// Where a retry of a failure in `failed_in` goes (see the module docs).
const fn retry_target(failed_in: Option<PartitionState>) -> PartitionState {
    use PartitionState as S;
    match failed_in {
        Some(S::Pausing | S::Paused) => S::Pausing,
        // STOPPED cannot fail; if a record says so, finish stopping rather than mirror again.
        Some(S::Stopping | S::Stopped) => S::Stopping,
        Some(S::Unknown | S::Preparing | S::Mirroring | S::Failed) | None => S::Preparing,
    }
}

/// A retry: `due_only` for the timer's ([`Event::Retry`]), not for [`Event::RetryEarly`].
fn retry(
    record: &PartitionRecord,
    now: Timestamp,
    policy: &RetryPolicy,
    due_only: bool,
) -> Result<Step, TransitionError> {
    let code = record.error.as_ref().map_or(ErrorCode::Internal, |error| error.code);
    if !code.is_retryable() {
        return Err(TransitionError::NotRetryable { code });
    }
    if record.retry_count >= policy.max_attempts {
        return Err(TransitionError::RetriesExhausted {
            attempts: record.retry_count,
            max_attempts: policy.max_attempts,
        });
    }
    if let Some(at) = record.next_retry_at
        && now < at
        && due_only
    {
        return Err(TransitionError::RetryNotDue { at });
    }
    Ok(leave_failed_to_retry(record, record.retry_count.saturating_add(1), now))
}

/// What a pause or resume does to a FAILED partition, decided from what it was doing when it
/// failed (`failed_in`) and whether it failed during a resync:
///
/// - `Ok(Some(state))`: it stays FAILED, and its retry (automatic or a recover) goes on as if
///   it had failed in `state`: a pause makes a partition that failed while mirroring pause
///   instead of mirroring again; a resume makes one that failed while pausing mirror again.
/// - `Ok(None)`: its retry does that already (it failed while pausing, or while mirroring).
/// - `Err(why)`: the call cannot decide for it (it failed while starting, during a resync, or
///   while being stopped); the operator recovers it or fails it over.
///
/// The one rule for both the state machine ([`transition_with`]) and the per-topic plan of a
/// call (`super::topic_call`).
pub fn redirect_failed(
    kind: EventKind,
    failed_in: Option<PartitionState>,
    resync: bool,
) -> Result<Option<PartitionState>, &'static str> {
    use PartitionState as S;
    match (kind, failed_in) {
        (_, Some(S::Stopping | S::Stopped)) => {
            Err("it failed while being failed over: stop it again to finish the failover")
        }
        (_, _) if resync => Err("it failed during a resync: recover it to finish the resync, or fail it over"),
        (EventKind::Pause, Some(S::Pausing | S::Paused)) => Ok(None),
        (EventKind::Pause, Some(S::Mirroring)) => Ok(Some(S::Pausing)),
        (EventKind::Pause, _) => {
            Err("it failed while starting: recover it (or fail it over), and pause it once it is MIRRORING")
        }
        (EventKind::Resume, Some(S::Pausing | S::Paused)) => Ok(Some(S::Mirroring)),
        (EventKind::Resume, _) => Ok(None),
        _ => Err("only a pause or a resume changes what a FAILED partition's retry does"),
    }
}

/// A pause or resume of a FAILED partition ([`redirect_failed`]): a new record that stays
/// FAILED with the new `previous_state`, so the retry goes where the operator asked.
fn redirect_failed_record(record: &PartitionRecord, kind: EventKind, now: Timestamp) -> Result<Step, TransitionError> {
    match redirect_failed(kind, record.failed_in(), record.truncation.is_resync()) {
        Ok(None) => Err(TransitionError::AlreadyInState { state: record.state, event: kind }),
        Ok(Some(target)) => {
            let mut next = record.clone();
            next.state_epoch = record.state_epoch.saturating_add(1);
            next.updated_at = now;
            next.previous_state = Some(target);
            Ok(Step { next, actions: Vec::new() })
        }
        Err(why) => Err(TransitionError::FailedNotRedirected { event: kind, why }),
    }
}

/// Why an operator's recover must not move this FAILED partition, if it must not.
///
/// Every check a recover leads to runs again (source identity, truncation, divergence of a
/// restart), so a cause that is still there fails the partition again, with one exception: a
/// `FOREIGN_WRITE`. A partition that was mirroring resumes after the destination's end as it
/// finds it (after an aborted transaction that end includes the abort's records and marker, which
/// only the data path tells apart from someone else's), so the record found there would stay in
/// the mirror for good. Such a partition is left FAILED; the way out is a stop.
#[must_use]
pub fn recover_refusal(record: &PartitionRecord) -> Option<TransitionError> {
    match record.error.as_ref().map(|e| e.code) {
        Some(code @ ErrorCode::ForeignWrite) if record.state == PartitionState::Failed => {
            Some(TransitionError::NotRecoverable { code })
        }
        _ => None,
    }
}

/// An operator's retry ([`Event::Recover`]): the retry's move without its conditions, and the
/// count starts again.
fn recover(record: &PartitionRecord, now: Timestamp) -> Step {
    let mut step = leave_failed_to_retry(record, 0, now);
    if record.next_retry_at.is_some() {
        // The automatic retry it replaces.
        step.actions.insert(0, Action::CancelRetry);
    }
    step
}

/// FAILED back to what the partition was doing ([`retry_target`]), with `retry_count`.
fn leave_failed_to_retry(record: &PartitionRecord, retry_count: u32, now: Timestamp) -> Step {
    let target = retry_target(record.previous_state);
    let mut next = moved(record, target, now);
    next.retry_count = retry_count;
    let mut actions = vec![Action::ClearAlert];
    actions.extend(match target {
        PartitionState::Pausing => pausing_actions(),
        PartitionState::Stopping => stopping_actions(),
        _ => preparing_actions(next.truncation),
    });
    Step { next, actions }
}

fn remove(record: &PartitionRecord, now: Timestamp) -> Step {
    let mut actions = leave_failed_actions(record);
    actions.push(Action::ForgetPartition);
    let mut next = moved(record, PartitionState::Unknown, now);
    next.retry_count = 0;
    Step { next, actions }
}

fn loaded(record: &PartitionRecord, now: Timestamp, policy: &RetryPolicy) -> Step {
    use PartitionState as S;
    match record.state {
        S::Mirroring => {
            let mut actions = vec![Action::Unassign];
            actions.extend(preparing_actions(Truncation::None));
            Step { next: moved(record, S::Preparing, now), actions }
        }
        S::Pausing => Step { next: moved(record, S::Pausing, now), actions: pausing_actions() },
        S::Stopping => Step { next: moved(record, S::Stopping, now), actions: stopping_actions() },
        S::Failed => {
            let mut actions = Vec::new();
            if let Some(error) = &record.error {
                let plan = match record.next_retry_at {
                    Some(at) => RetryPlan::Scheduled { at, attempt: record.retry_count.saturating_add(1) },
                    None if error.code.is_retryable() => RetryPlan::Exhausted,
                    None => RetryPlan::NotRetryable,
                };
                actions.push(Action::Alert(failure_alert(
                    error.code,
                    &error.message,
                    plan,
                    record.retry_count,
                    policy,
                )));
                if let RetryPlan::Scheduled { at, attempt } = plan {
                    actions.push(Action::ScheduleRetry { at, attempt });
                }
            }
            Step { next: moved(record, S::Failed, now), actions }
        }
        // PREPARING (and, defensively, anything else routed here) re-runs preparation.
        _ => Step { next: moved(record, S::Preparing, now), actions: preparing_actions(record.truncation) },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::backoff::Backoff;
    use PartitionState as S;
    use proptest::prelude::*;

    const T0: Timestamp = Timestamp::from_millis(1_777_000_000_000);
    /// A day after T0: every scheduled retry is due.
    const LATER: Timestamp = Timestamp::from_millis(1_777_000_000_000 + 86_400_000);
    const START: MirrorPosition = pos(100, 5, 200);
    const STOP: StopPoint =
        StopPoint { last_mirror_epoch: 5, last_mirrored_source_offset: Some(99), destination_stop_offset: 201 };

    const fn pos(next: i64, epoch: i32, end: i64) -> MirrorPosition {
        MirrorPosition { next_source_offset: next, source_leader_epoch: epoch, destination_end_offset: end }
    }

    const RESYNC: Truncation = Truncation::Resync { quarantine: false };

    /// Applies an event that must be accepted, checking the epoch rule on the way.
    fn step_at(record: &PartitionRecord, event: Event, now: Timestamp) -> Step {
        let label = format!("{} + {:?}", record.state, event);
        let step = transition(record, event, now).unwrap_or_else(|e| panic!("{label}: {e}"));
        assert_eq!(step.next.state_epoch, record.state_epoch + 1, "{label}");
        assert_eq!(step.next.validate(), Ok(()), "{label}");
        step
    }

    fn step(record: &PartitionRecord, event: Event) -> Step {
        step_at(record, event, T0)
    }

    fn next(record: &PartitionRecord, event: Event) -> PartitionRecord {
        step(record, event).next
    }

    fn start(truncation: Truncation) -> Event {
        Event::Start { truncation }
    }

    fn unknown() -> PartitionRecord {
        PartitionRecord::new(T0)
    }
    fn preparing() -> PartitionRecord {
        next(&unknown(), start(Truncation::None))
    }
    fn mirroring() -> PartitionRecord {
        next(&preparing(), Event::Prepared { start: START })
    }
    fn pausing() -> PartitionRecord {
        next(&mirroring(), Event::Pause)
    }
    fn paused() -> PartitionRecord {
        next(&pausing(), Event::Paused)
    }
    fn stopping() -> PartitionRecord {
        next(&mirroring(), Event::Stop)
    }
    fn stopped() -> PartitionRecord {
        next(&stopping(), Event::Stopped { stop: STOP })
    }
    fn failed_from(record: &PartitionRecord, code: ErrorCode) -> PartitionRecord {
        next(record, Event::error(code, "boom", Jitter::MAX))
    }
    fn failed(code: ErrorCode) -> PartitionRecord {
        failed_from(&mirroring(), code)
    }
    fn err_at(record: &PartitionRecord, event: Event, now: Timestamp) -> TransitionError {
        transition(record, event, now).expect_err("the event must be refused")
    }
    fn err(record: &PartitionRecord, event: Event) -> TransitionError {
        err_at(record, event, LATER)
    }

    fn preparing_actions_fresh() -> Vec<Action> {
        vec![
            Action::CheckSourceClusterId,
            Action::CheckTopicIds,
            Action::EnsureDestinationTopic,
            Action::ComputeStartPosition { resync: false },
        ]
    }
    fn stop_sequence() -> Vec<Action> {
        vec![Action::Unassign, Action::AbortOpenTransaction, Action::PersistLastMirrorEpochs, Action::FenceProducer]
    }

    // ----- UNKNOWN / STOPPED --start--> PREPARING

    #[test]
    fn unknown_start_to_preparing() {
        let s = step(&unknown(), start(Truncation::None));
        assert_eq!(s.next.state, S::Preparing);
        assert_eq!(s.next.previous_state, Some(S::Unknown));
        assert_eq!(s.next.state_epoch, 1);
        assert_eq!(s.next.state_since, T0);
        assert_eq!(s.actions, preparing_actions_fresh());
    }

    #[test]
    fn unknown_start_resync_to_preparing_deletes_destination_records_first() {
        let s = step(&unknown(), start(Truncation::Resync { quarantine: true }));
        assert_eq!(s.next.state, S::Preparing);
        assert_eq!(s.next.truncation, Truncation::Resync { quarantine: true });
        assert_eq!(
            s.actions[3..],
            [Action::DeleteDestinationRecords { quarantine: true }, Action::ComputeStartPosition { resync: true },]
        );
    }

    #[test]
    fn stopped_start_to_preparing_is_the_restart() {
        let stopped = stopped();
        let s = step(&stopped, start(Truncation::None));
        assert_eq!(s.next.state, S::Preparing);
        assert_eq!(s.next.previous_state, Some(S::Stopped));
        assert_eq!(s.next.stop_point, Some(STOP), "the stop point bounds the incremental resync");
        assert_eq!(s.next.position, stopped.position);
        assert_eq!(s.actions, preparing_actions_fresh());
    }

    // ----- PREPARING --prepared--> MIRRORING

    #[test]
    fn preparing_prepared_to_mirroring_assigns_from_the_start_position() {
        let s = step(&preparing(), Event::Prepared { start: START });
        assert_eq!(s.next.state, S::Mirroring);
        assert_eq!(s.next.position, Some(START));
        assert_eq!(s.actions, [Action::Assign { from: START }]);
    }

    #[test]
    fn preparing_prepared_after_restart_clears_the_stop_point() {
        let restarting = next(&stopped(), start(Truncation::None));
        let s = step(&restarting, Event::Prepared { start: pos(100, 5, 203) });
        assert_eq!(s.next.stop_point, None);
        assert_eq!(s.next.position, Some(pos(100, 5, 203)));
    }

    #[test]
    fn preparing_prepared_behind_the_committed_position_is_refused() {
        let restarting = next(&stopped(), start(Truncation::None));
        let e = err(&restarting, Event::Prepared { start: pos(0, 0, 201) });
        assert_eq!(
            e,
            TransitionError::PositionRegressed {
                state: S::Preparing,
                event: EventKind::Prepared,
                current: START,
                proposed: pos(0, 0, 201),
            }
        );
        assert!(e.to_string().contains("only a start with truncation mode resync"));
    }

    #[test]
    fn preparing_prepared_for_a_resync_may_start_over() {
        let resyncing = next(&stopped(), start(RESYNC));
        let s = step(&resyncing, Event::Prepared { start: pos(0, 0, 201) });
        assert_eq!(s.next.state, S::Mirroring);
        assert_eq!(s.next.position, Some(pos(0, 0, 201)));
        assert_eq!(s.next.truncation, Truncation::None, "the resync is consumed");
    }

    // ----- MIRRORING --progress--> MIRRORING, PAUSING --progress--> PAUSING

    #[test]
    fn mirroring_progress_advances_the_committed_position() {
        let mirroring = mirroring();
        let s = step_at(&mirroring, Event::Progress { position: pos(150, 6, 252) }, LATER);
        assert_eq!(s.next.state, S::Mirroring);
        assert_eq!(s.next.position, Some(pos(150, 6, 252)));
        assert_eq!(s.next.state_since, mirroring.state_since, "a self-transition keeps state_since");
        assert_eq!(s.next.previous_state, mirroring.previous_state);
        assert_eq!(s.next.updated_at, LATER);
        assert!(s.actions.is_empty());
    }

    #[test]
    fn mirroring_progress_backwards_is_refused() {
        for behind in [pos(99, 5, 200), pos(100, 4, 200), pos(100, 5, 199)] {
            assert!(matches!(
                err(&mirroring(), Event::Progress { position: behind }),
                TransitionError::PositionRegressed { event: EventKind::Progress, .. }
            ));
        }
    }

    #[test]
    fn mirroring_progress_resets_the_retry_count() {
        let retried = step_at(&failed(ErrorCode::Timeout), Event::Retry, LATER).next;
        let retried = next(&retried, Event::Prepared { start: START });
        assert_eq!((retried.state, retried.retry_count), (S::Mirroring, 1));
        let idle = next(&retried, Event::Progress { position: START });
        assert_eq!(idle.retry_count, 1, "no records flowed");
        let flowing = next(&idle, Event::Progress { position: pos(101, 5, 201) });
        assert_eq!(flowing.retry_count, 0);
    }

    #[test]
    fn pausing_progress_records_the_final_commit() {
        let s = step(&pausing(), Event::Progress { position: pos(120, 5, 220) });
        assert_eq!(s.next.state, S::Pausing);
        assert_eq!(s.next.position, Some(pos(120, 5, 220)));
    }

    #[test]
    fn stopping_progress_records_commits_made_before_the_data_path_let_go() {
        let s = step(&stopping(), Event::Progress { position: pos(130, 5, 230) });
        assert_eq!(s.next.state, S::Stopping, "progress never changes the state");
        assert_eq!(s.next.position, Some(pos(130, 5, 230)));
        assert!(s.actions.is_empty());
        let stop =
            StopPoint { last_mirror_epoch: 5, last_mirrored_source_offset: Some(129), destination_stop_offset: 231 };
        let stopped = next(&s.next, Event::Stopped { stop });
        assert_eq!(stopped.position, Some(pos(130, 5, 230)), "the stop keeps the latest position");
    }

    // ----- pause / resume

    #[test]
    fn mirroring_pause_to_pausing_unassigns_and_commits() {
        let s = step(&mirroring(), Event::Pause);
        assert_eq!(s.next.state, S::Pausing);
        assert_eq!(s.actions, [Action::Unassign, Action::CommitOpenTransaction]);
    }

    #[test]
    fn pausing_paused_to_paused() {
        let s = step(&pausing(), Event::Paused);
        assert_eq!(s.next.state, S::Paused);
        assert!(s.actions.is_empty());
    }

    #[test]
    fn paused_resume_to_mirroring_from_the_committed_position() {
        let paused = next(&next(&pausing(), Event::Progress { position: pos(120, 5, 220) }), Event::Paused);
        let s = step(&paused, Event::Resume);
        assert_eq!(s.next.state, S::Mirroring);
        assert_eq!(s.actions, [Action::Assign { from: pos(120, 5, 220) }]);
    }

    #[test]
    fn pausing_resume_to_preparing_recomputes_the_start_position() {
        let s = step(&pausing(), Event::Resume);
        assert_eq!(s.next.state, S::Preparing);
        assert_eq!(s.actions, preparing_actions_fresh());
    }

    // ----- stop

    #[test]
    fn unknown_stop_to_stopping() {
        let s = step(&unknown(), Event::Stop);
        assert_eq!(s.next.state, S::Stopping);
        assert_eq!(s.actions, stop_sequence());
    }

    #[test]
    fn preparing_stop_to_stopping_drops_the_truncation_mode() {
        let s = step(&next(&stopped(), start(RESYNC)), Event::Stop);
        assert_eq!(s.next.state, S::Stopping);
        assert_eq!(s.next.truncation, Truncation::None);
        assert_eq!(s.actions, stop_sequence());
    }

    #[test]
    fn mirroring_stop_to_stopping_runs_the_stop_sequence() {
        let s = step(&mirroring(), Event::Stop);
        assert_eq!(s.next.state, S::Stopping);
        assert_eq!(s.actions, stop_sequence());
    }

    #[test]
    fn pausing_stop_to_stopping() {
        let s = step(&pausing(), Event::Stop);
        assert_eq!(s.next.state, S::Stopping);
        assert_eq!(s.actions, stop_sequence());
    }

    #[test]
    fn paused_stop_to_stopping() {
        let s = step(&paused(), Event::Stop);
        assert_eq!(s.next.state, S::Stopping);
        assert_eq!(s.actions, stop_sequence());
    }

    #[test]
    fn failed_stop_to_stopping_cancels_the_retry_and_clears_the_alert() {
        let failed = failed(ErrorCode::SourceUnreachable);
        let s = step(&failed, Event::Stop);
        assert_eq!(s.next.state, S::Stopping);
        assert_eq!(s.next.error, None);
        assert_eq!(s.next.next_retry_at, None);
        let mut expected = vec![Action::CancelRetry, Action::ClearAlert];
        expected.extend(stop_sequence());
        assert_eq!(s.actions, expected);

        let s = step(&failed_from(&mirroring(), ErrorCode::ForeignWrite), Event::Stop);
        assert_eq!(s.actions[0], Action::ClearAlert, "no retry to cancel");
    }

    #[test]
    fn stopping_stopped_to_stopped_records_the_stop_point() {
        let s = step(&stopping(), Event::Stopped { stop: STOP });
        assert_eq!(s.next.state, S::Stopped);
        assert_eq!(s.next.stop_point, Some(STOP));
        assert_eq!(s.next.position, Some(START), "the committed position is kept");
        assert!(s.actions.is_empty());
    }

    #[test]
    fn stopping_stopped_behind_the_committed_position_is_refused() {
        let behind = StopPoint { destination_stop_offset: 150, ..STOP };
        assert_eq!(
            err(&stopping(), Event::Stopped { stop: behind }),
            TransitionError::StopPointBehindPosition { stop: behind, position: START }
        );
        let older_epoch = StopPoint { last_mirror_epoch: 4, ..STOP };
        assert!(matches!(
            err(&stopping(), Event::Stopped { stop: older_epoch }),
            TransitionError::StopPointBehindPosition { .. }
        ));
    }

    #[test]
    fn stopping_stopped_keeps_the_stop_point_when_nothing_was_mirrored_since() {
        // Restart, fail on local writes, stop again: the local writes must stay "local".
        let restarting = next(&stopped(), start(Truncation::None));
        let diverged = failed_from(&restarting, ErrorCode::DestinationDiverged);
        let stopping = next(&diverged, Event::Stop);
        let remeasured = StopPoint { destination_stop_offset: 260, ..STOP };
        let s = step(&stopping, Event::Stopped { stop: remeasured });
        assert_eq!(s.next.stop_point, Some(STOP));
    }

    #[test]
    fn never_started_partition_stops_with_the_reported_stop_point() {
        let stopping = next(&unknown(), Event::Stop);
        let empty = StopPoint { last_mirror_epoch: -1, last_mirrored_source_offset: None, destination_stop_offset: 0 };
        let s = step(&stopping, Event::Stopped { stop: empty });
        assert_eq!(s.next.stop_point, Some(empty));
        assert_eq!(s.next.position, None);
    }

    // ----- error

    #[test]
    fn unknown_error_to_failed() {
        let s = step(&unknown(), Event::error(ErrorCode::SourceClusterIdMismatch, "expected A, saw B", Jitter::MAX));
        assert_eq!(s.next.state, S::Failed);
        assert_eq!(s.next.failed_in(), Some(S::Unknown));
        assert_eq!(s.next.next_retry_at, None);
        let [Action::Alert(alert)] = s.actions.as_slice() else { panic!("{:?}", s.actions) };
        assert_eq!(alert.severity, Severity::Critical);
        assert_eq!(alert.code, ErrorCode::SourceClusterIdMismatch);
        assert!(alert.message.starts_with("SOURCE_CLUSTER_ID_MISMATCH: expected A, saw B; check"));
    }

    #[test]
    fn preparing_error_to_failed_keeps_the_truncation_mode_for_the_retry() {
        let resyncing = next(&unknown(), start(RESYNC));
        let s = step(&resyncing, Event::error(ErrorCode::Timeout, "list offsets", Jitter::MIN));
        assert_eq!(s.next.state, S::Failed);
        assert_eq!(s.next.truncation, RESYNC);
        assert_eq!(s.actions.last(), Some(&Action::ScheduleRetry { at: T0.saturating_add_millis(500), attempt: 1 }));
    }

    #[test]
    fn mirroring_error_to_failed_aborts_and_schedules_a_retry() {
        let s = step(&mirroring(), Event::error(ErrorCode::SourceUnreachable, "no brokers", Jitter::MAX));
        assert_eq!(s.next.state, S::Failed);
        assert_eq!(s.next.previous_state, Some(S::Mirroring));
        let at = T0.saturating_add_millis(1_000);
        assert_eq!(s.next.next_retry_at, Some(at));
        assert_eq!(
            s.next.error,
            Some(PartitionError { code: ErrorCode::SourceUnreachable, message: "no brokers".to_owned(), since: T0 })
        );
        assert_eq!(s.actions.len(), 4);
        assert_eq!(s.actions[..2], [Action::Unassign, Action::AbortOpenTransaction]);
        let Action::Alert(alert) = &s.actions[2] else { panic!("{:?}", s.actions) };
        assert_eq!(alert.severity, Severity::Warning);
        assert_eq!(
            alert.message,
            "SOURCE_UNREACHABLE: no brokers; automatic retry 1 of 20 at 2026-04-24T03:06:41.000Z"
        );
        assert_eq!(s.actions[3], Action::ScheduleRetry { at, attempt: 1 });
    }

    #[test]
    fn mirroring_non_retryable_error_to_failed_waits_for_an_operator() {
        let s = step(&mirroring(), Event::error(ErrorCode::ForeignWrite, "offset 250", Jitter::MAX));
        assert_eq!(s.next.next_retry_at, None);
        assert!(!s.actions.iter().any(|a| matches!(a, Action::ScheduleRetry { .. })));
        let Some(Action::Alert(alert)) = s.actions.last() else { panic!("{:?}", s.actions) };
        assert_eq!(alert.severity, Severity::Critical);
        assert!(alert.message.contains(ErrorCode::ForeignWrite.remedy()));
    }

    #[test]
    fn pausing_error_to_failed_aborts_the_pending_commit() {
        let s = step(&pausing(), Event::error(ErrorCode::DestinationUnavailable, "commit", Jitter::MAX));
        assert_eq!(s.next.failed_in(), Some(S::Pausing));
        assert_eq!(s.actions[..2], [Action::Unassign, Action::AbortOpenTransaction]);
    }

    #[test]
    fn paused_error_to_failed() {
        let s = step(&paused(), Event::error(ErrorCode::SourceTopicDeleted, "gone", Jitter::MAX));
        assert_eq!(s.next.failed_in(), Some(S::Paused));
        assert!(matches!(s.actions.as_slice(), [Action::Alert(_)]));
    }

    #[test]
    fn stopping_error_to_failed() {
        let s = step(&stopping(), Event::error(ErrorCode::StateStoreUnavailable, "write", Jitter::MAX));
        assert_eq!(s.next.failed_in(), Some(S::Stopping));
        assert!(matches!(s.actions.as_slice(), [Action::Alert(_), Action::ScheduleRetry { .. }]));
    }

    #[test]
    fn backoff_grows_with_each_failed_retry() {
        let first = failed(ErrorCode::Timeout);
        let retried = step_at(&first, Event::Retry, LATER).next;
        let s = step_at(&retried, Event::error(ErrorCode::Timeout, "again", Jitter::MAX), LATER);
        assert_eq!(s.next.retry_count, 1);
        assert_eq!(s.next.next_retry_at, Some(LATER.saturating_add_millis(2_000)));
    }

    // ----- FAILED --error--> FAILED

    #[test]
    fn failed_error_replaces_a_retryable_cause_and_keeps_the_schedule() {
        let failed = failed(ErrorCode::SourceUnreachable);
        let s = step_at(&failed, Event::error(ErrorCode::Timeout, "metadata", Jitter::MIN), LATER);
        assert_eq!(s.next.error.as_ref().map(|e| e.code), Some(ErrorCode::Timeout));
        assert_eq!(s.next.next_retry_at, failed.next_retry_at);
        assert_eq!(s.next.previous_state, Some(S::Mirroring));
        assert_eq!(s.next.state_since, failed.state_since);
        assert!(matches!(s.actions.as_slice(), [Action::Alert(a)] if a.severity == Severity::Warning));
    }

    #[test]
    fn failed_non_retryable_error_cancels_the_retry() {
        let failed = failed(ErrorCode::SourceUnreachable);
        let s = step(&failed, Event::error(ErrorCode::SourceClusterIdMismatch, "A != B", Jitter::MAX));
        assert_eq!(s.next.next_retry_at, None);
        assert!(matches!(
            s.actions.as_slice(),
            [Action::Alert(a), Action::CancelRetry] if a.severity == Severity::Critical
        ));
    }

    #[test]
    fn failed_error_never_downgrades_a_non_retryable_cause() {
        let failed = failed(ErrorCode::SourceTruncated);
        let e = err(&failed, Event::error(ErrorCode::Timeout, "x", Jitter::MAX));
        assert_eq!(e, TransitionError::AlreadyInState { state: S::Failed, event: EventKind::Error });
        assert!(e.is_harmless());
    }

    #[test]
    fn failed_identical_error_is_already_in_state() {
        let e = err(&failed(ErrorCode::Timeout), Event::error(ErrorCode::Timeout, "boom", Jitter::MIN));
        assert_eq!(e, TransitionError::AlreadyInState { state: S::Failed, event: EventKind::Error });
    }

    // ----- FAILED --retry--> previous state

    #[test]
    fn failed_retry_in_mirroring_to_preparing() {
        let failed = failed(ErrorCode::ProducerFenced);
        let due = failed.next_retry_at.expect("scheduled");
        let s = step_at(&failed, Event::Retry, due);
        assert_eq!(s.next.state, S::Preparing);
        assert_eq!(s.next.retry_count, 1);
        assert_eq!(s.next.error, None);
        let mut expected = vec![Action::ClearAlert];
        expected.extend(preparing_actions_fresh());
        assert_eq!(s.actions, expected);
    }

    #[test]
    fn failed_retry_before_it_is_due_is_refused() {
        let failed = failed(ErrorCode::Timeout);
        let due = failed.next_retry_at.expect("scheduled");
        let e = err_at(&failed, Event::Retry, Timestamp::from_millis(due.as_millis() - 1));
        assert_eq!(e, TransitionError::RetryNotDue { at: due });
        assert_eq!(
            e.to_string(),
            "cannot retry a partition in state FAILED yet: the next retry is due at 2026-04-24T03:06:41.000Z"
        );
    }

    #[test]
    fn failed_retry_in_preparing_repeats_the_resync() {
        let failed = failed_from(&next(&unknown(), start(Truncation::Resync { quarantine: true })), ErrorCode::Timeout);
        let s = step_at(&failed, Event::Retry, LATER);
        assert_eq!(s.next.state, S::Preparing);
        assert!(s.actions.contains(&Action::DeleteDestinationRecords { quarantine: true }));
    }

    #[test]
    fn failed_retry_in_unknown_to_preparing() {
        let failed = failed_from(&unknown(), ErrorCode::SourceUnreachable);
        assert_eq!(step_at(&failed, Event::Retry, LATER).next.state, S::Preparing);
    }

    #[test]
    fn failed_retry_in_pausing_or_paused_to_pausing() {
        for record in [pausing(), paused()] {
            let failed = failed_from(&record, ErrorCode::DestinationUnavailable);
            let s = step_at(&failed, Event::Retry, LATER);
            assert_eq!(s.next.state, S::Pausing, "failed in {}", record.state);
            assert_eq!(s.actions, [Action::ClearAlert, Action::Unassign, Action::CommitOpenTransaction]);
        }
    }

    #[test]
    fn failed_retry_in_stopping_to_stopping() {
        let failed = failed_from(&stopping(), ErrorCode::StateStoreUnavailable);
        let s = step_at(&failed, Event::Retry, LATER);
        assert_eq!(s.next.state, S::Stopping);
        let mut expected = vec![Action::ClearAlert];
        expected.extend(stop_sequence());
        assert_eq!(s.actions, expected);
    }

    #[test]
    fn failed_retry_of_a_non_retryable_error_is_refused() {
        let e = err(&failed(ErrorCode::SourceTopicRecreated), Event::Retry);
        assert_eq!(e, TransitionError::NotRetryable { code: ErrorCode::SourceTopicRecreated });
        assert!(e.to_string().starts_with(
            "cannot retry a partition in state FAILED with SOURCE_TOPIC_RECREATED: the error is not retryable; stop the topic"
        ));
    }

    #[test]
    fn retries_stop_after_max_attempts() {
        let policy = RetryPolicy { backoff: Backoff::DEFAULT, max_attempts: 2 };
        let mut now = T0;
        let mut record = mirroring();
        for _ in 0..2 {
            let event = Event::error(ErrorCode::Timeout, "t", Jitter::MAX);
            record = transition_with(&record, event, now, &policy).unwrap().next;
            now = record.next_retry_at.expect("a retry is scheduled");
            record = transition_with(&record, Event::Retry, now, &policy).unwrap().next;
        }
        assert_eq!(record.retry_count, 2);
        let event = Event::error(ErrorCode::Timeout, "t", Jitter::MAX);
        let exhausted = transition_with(&record, event, now, &policy).unwrap();
        assert_eq!(exhausted.next.next_retry_at, None);
        let [Action::Alert(alert)] = exhausted.actions.as_slice() else { panic!("{:?}", exhausted.actions) };
        assert_eq!(alert.severity, Severity::Critical);
        assert!(alert.message.ends_with(
            "automatic retries are exhausted (2 of 2 used); fix the cause and recover the topic, or stop or remove it"
        ));
        assert_eq!(
            transition_with(&exhausted.next, Event::Retry, LATER, &policy),
            Err(TransitionError::RetriesExhausted { attempts: 2, max_attempts: 2 })
        );
        // The operator's way out.
        assert_eq!(
            transition_with(&exhausted.next, Event::Stop, LATER, &policy).map(|s| s.next.state),
            Ok(S::Stopping)
        );
    }

    // ----- remove

    #[test]
    fn stopped_remove_to_unknown_keeps_the_history() {
        let s = step(&stopped(), Event::Remove);
        assert_eq!(s.next.state, S::Unknown);
        assert_eq!(s.next.previous_state, Some(S::Stopped));
        assert_eq!(s.next.position, Some(START));
        assert_eq!(s.next.stop_point, Some(STOP));
        assert_eq!(s.actions, [Action::ForgetPartition]);
    }

    #[test]
    fn failed_remove_to_unknown_cancels_the_retry() {
        let s = step(&failed(ErrorCode::Timeout), Event::Remove);
        assert_eq!(s.next.state, S::Unknown);
        assert_eq!((s.next.error.as_ref(), s.next.next_retry_at, s.next.retry_count), (None, None, 0));
        assert_eq!(s.actions, [Action::CancelRetry, Action::ClearAlert, Action::ForgetPartition]);
    }

    #[test]
    fn a_topic_added_back_cannot_go_backwards_without_a_resync() {
        let removed = next(&failed(ErrorCode::SourceTopicRecreated), Event::Remove);
        let again = next(&removed, start(Truncation::None));
        assert!(matches!(
            err(&again, Event::Prepared { start: pos(0, 0, 200) }),
            TransitionError::PositionRegressed { .. }
        ));
        let resync = next(&removed, start(RESYNC));
        assert_eq!(next(&resync, Event::Prepared { start: pos(0, 0, 200) }).state, S::Mirroring);
    }

    // ----- loaded (engine startup / takeover)

    #[test]
    fn mirroring_loaded_to_preparing_rechecks_before_fetching() {
        let s = step(&mirroring(), Event::Loaded);
        assert_eq!(s.next.state, S::Preparing);
        let mut expected = vec![Action::Unassign];
        expected.extend(preparing_actions_fresh());
        assert_eq!(s.actions, expected);
    }

    #[test]
    fn preparing_loaded_reruns_preparation() {
        let resyncing = next(&unknown(), start(RESYNC));
        let s = step(&resyncing, Event::Loaded);
        assert_eq!(s.next.state, S::Preparing);
        assert_eq!(s.next.state_since, resyncing.state_since);
        assert!(s.actions.contains(&Action::DeleteDestinationRecords { quarantine: false }));
    }

    #[test]
    fn pausing_loaded_reruns_the_pause() {
        let s = step(&pausing(), Event::Loaded);
        assert_eq!(s.next.state, S::Pausing);
        assert_eq!(s.actions, [Action::Unassign, Action::CommitOpenTransaction]);
    }

    #[test]
    fn stopping_loaded_reruns_the_stop_sequence() {
        let s = step(&stopping(), Event::Loaded);
        assert_eq!(s.next.state, S::Stopping);
        assert_eq!(s.actions, stop_sequence());
    }

    #[test]
    fn failed_loaded_raises_the_alert_and_reschedules_the_retry() {
        let failed = failed(ErrorCode::Timeout);
        let s = step(&failed, Event::Loaded);
        assert_eq!(s.next.state, S::Failed);
        assert_eq!(s.next.next_retry_at, failed.next_retry_at);
        assert!(matches!(
            s.actions.as_slice(),
            [Action::Alert(_), Action::ScheduleRetry { at, attempt: 1 }] if Some(*at) == failed.next_retry_at
        ));
        let s = step(&self::failed(ErrorCode::ForeignWrite), Event::Loaded);
        assert!(matches!(s.actions.as_slice(), [Action::Alert(a)] if a.severity == Severity::Critical));
    }

    // ----- repeated requests and messages

    #[test]
    fn repeated_requests_are_already_in_state() {
        let cases = [
            (preparing(), start(Truncation::None)),
            (mirroring(), start(Truncation::None)),
            (pausing(), Event::Pause),
            (paused(), Event::Pause),
            (mirroring(), Event::Resume),
            (preparing(), Event::Resume),
            (stopping(), Event::Stop),
            (stopped(), Event::Stop),
            (unknown(), Event::Remove),
            (paused(), Event::Loaded),
        ];
        for (record, event) in cases {
            let kind = event.kind();
            let e = err(&record, event);
            assert_eq!(e, TransitionError::AlreadyInState { state: record.state, event: kind });
            assert!(e.is_harmless());
        }
        assert_eq!(
            err(&stopped(), Event::Stop).to_string(),
            "nothing to do: the partition is already STOPPED (stop was already applied)"
        );
    }

    #[test]
    fn invalid_transition_messages_name_state_event_and_valid_states() {
        let cases = [
            (
                stopped(),
                Event::Pause,
                "cannot pause a partition in state STOPPED (pause is valid from MIRRORING or FAILED only)",
            ),
            (
                paused(),
                start(Truncation::None),
                "cannot start a partition in state PAUSED (start is valid from UNKNOWN or STOPPED only)",
            ),
            (
                stopped(),
                Event::Resume,
                "cannot resume a partition in state STOPPED (resume is valid from PAUSING, PAUSED or FAILED only)",
            ),
            (
                mirroring(),
                Event::Remove,
                "cannot remove a partition in state MIRRORING (remove is valid from STOPPED or FAILED only)",
            ),
            (
                mirroring(),
                Event::Retry,
                "cannot retry a partition in state MIRRORING (retry is valid from FAILED only)",
            ),
            (
                stopped(),
                Event::error(ErrorCode::ForeignWrite, "local write", Jitter::MAX),
                "cannot record an error for a partition in state STOPPED (error is valid from UNKNOWN, PREPARING, MIRRORING, PAUSING, PAUSED, STOPPING or FAILED only)",
            ),
        ];
        for (record, event, message) in cases {
            let e = err(&record, event);
            assert!(!e.is_harmless());
            assert_eq!(e.to_string(), message);
        }
    }

    #[test]
    fn valid_from_lists_the_allowed_states_in_lifecycle_order() {
        assert_eq!(valid_from(EventKind::Pause), [S::Mirroring, S::Failed]);
        assert_eq!(valid_from(EventKind::Resume), [S::Pausing, S::Paused, S::Failed]);
        assert_eq!(valid_from(EventKind::Remove), [S::Stopped, S::Failed]);
        assert_eq!(
            valid_from(EventKind::Stop),
            [S::Unknown, S::Preparing, S::Mirroring, S::Pausing, S::Paused, S::Failed]
        );
        assert!(!valid_from(EventKind::Error).contains(&S::Stopped));
    }

    // ----- the table, checked against `transition` for every (state, event) pair

    /// Records in every state, reached by real transitions, with the variations guards look at.
    fn fixtures() -> Vec<PartitionRecord> {
        let mut exhausted = failed(ErrorCode::Timeout);
        exhausted.retry_count = RetryPolicy::DEFAULT.max_attempts;
        exhausted.next_retry_at = None;
        vec![
            unknown(),
            next(&stopped(), Event::Remove),
            preparing(),
            next(&stopped(), start(Truncation::Resync { quarantine: true })),
            next(&pausing(), Event::Resume),
            mirroring(),
            pausing(),
            paused(),
            stopping(),
            next(&unknown(), Event::Stop),
            stopped(),
            failed(ErrorCode::SourceUnreachable),
            failed(ErrorCode::ForeignWrite),
            failed_from(&next(&unknown(), start(RESYNC)), ErrorCode::DestinationDiverged),
            failed_from(&paused(), ErrorCode::Timeout),
            failed_from(&stopping(), ErrorCode::Internal),
            exhausted,
        ]
    }

    /// Representative events of each kind (ahead of every fixture's position).
    fn samples(kind: EventKind) -> Vec<Event> {
        match kind {
            EventKind::Start => vec![start(Truncation::None), start(RESYNC)],
            EventKind::Prepared => vec![Event::Prepared { start: pos(1_000, 9, 2_000) }],
            EventKind::Pause => vec![Event::Pause],
            EventKind::Paused => vec![Event::Paused],
            EventKind::Resume => vec![Event::Resume],
            EventKind::Progress => vec![Event::Progress { position: pos(1_000, 9, 2_000) }],
            EventKind::Stop => vec![Event::Stop],
            EventKind::Stopped => vec![Event::Stopped {
                stop: StopPoint {
                    last_mirror_epoch: 9,
                    last_mirrored_source_offset: Some(999),
                    destination_stop_offset: 2_000,
                },
            }],
            EventKind::Error => vec![
                Event::error(ErrorCode::Timeout, "new", Jitter::MIN),
                Event::error(ErrorCode::SourceTopicDeleted, "gone", Jitter::MIN),
            ],
            EventKind::Retry => vec![Event::Retry],
            EventKind::RetryEarly => vec![Event::RetryEarly],
            EventKind::Recover => vec![Event::Recover],
            EventKind::Remove => vec![Event::Remove],
            EventKind::Loaded => vec![Event::Loaded],
        }
    }

    #[test]
    fn transition_agrees_with_the_table_for_every_state_and_event() {
        let fixtures = fixtures();
        for state in PartitionState::ALL {
            let records: Vec<&PartitionRecord> = fixtures.iter().filter(|r| r.state == state).collect();
            assert!(!records.is_empty(), "no fixture in {state}");
            for kind in EventKind::ALL {
                let results: Vec<_> = records
                    .iter()
                    .flat_map(|record| samples(kind).into_iter().map(move |e| (*record, e)))
                    .map(|(record, event)| (record, transition(record, event, LATER)))
                    .collect();
                let cell = rule(state, kind);
                match cell {
                    Rule::Allowed => {
                        assert!(
                            results.iter().any(|(_, r)| r.is_ok()),
                            "({state}, {kind}) is allowed by the table but never accepted"
                        );
                        for (record, result) in &results {
                            match result {
                                Ok(step) => {
                                    assert_eq!(step.next.state_epoch, record.state_epoch + 1);
                                    assert_eq!(step.next.validate(), Ok(()), "({state}, {kind})");
                                }
                                Err(e) => assert!(
                                    !matches!(e, TransitionError::InvalidTransition { .. }),
                                    "({state}, {kind}) is allowed by the table but {e}"
                                ),
                            }
                        }
                    }
                    Rule::AlreadyInState | Rule::Rejected => {
                        let expected = if cell == Rule::Rejected {
                            TransitionError::InvalidTransition { state, event: kind }
                        } else {
                            TransitionError::AlreadyInState { state, event: kind }
                        };
                        for (_, result) in results {
                            assert_eq!(result, Err(expected.clone()), "({state}, {kind})");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn table_rejects_nothing_an_operator_may_need_to_escape_failed() {
        // A non-retryable FAILED partition must always have an operator exit.
        assert_eq!(rule(S::Failed, EventKind::Stop), Rule::Allowed);
        assert_eq!(rule(S::Failed, EventKind::Remove), Rule::Allowed);
        assert_eq!(rule(S::Failed, EventKind::Recover), Rule::Allowed);
    }

    // ----- recover: an operator's retry

    #[test]
    fn recover_retries_what_an_automatic_retry_may_not() {
        // Not due yet, non-retryable, and out of attempts: a retry refuses each, recover does not.
        let not_due = failed(ErrorCode::SourceUnreachable);
        assert!(matches!(transition(&not_due, Event::Retry, T0), Err(TransitionError::RetryNotDue { .. })));
        let mut exhausted = failed(ErrorCode::Timeout);
        exhausted.retry_count = RetryPolicy::DEFAULT.max_attempts;
        exhausted.next_retry_at = None;
        let non_retryable = failed(ErrorCode::SourceTruncated);
        for record in [&not_due, &exhausted, &non_retryable] {
            let s = step_at(record, Event::Recover, T0);
            assert_eq!(s.next.state, S::Preparing, "{record:?}");
            assert_eq!(s.next.retry_count, 0, "the count starts again");
            assert_eq!(s.next.next_retry_at, None);
            assert_eq!(s.next.error, None);
            assert!(s.actions.contains(&Action::ClearAlert));
            assert!(s.actions.contains(&Action::CheckSourceClusterId), "the checks run again: {:?}", s.actions);
        }
        // The pending automatic retry is cancelled; there is none to cancel when exhausted.
        assert_eq!(step_at(&not_due, Event::Recover, T0).actions[0], Action::CancelRetry);
        assert!(!step_at(&exhausted, Event::Recover, T0).actions.contains(&Action::CancelRetry));
    }

    #[test]
    fn recover_goes_back_to_what_the_partition_was_doing() {
        let s = step(&failed_from(&paused(), ErrorCode::Timeout), Event::Recover);
        assert_eq!(s.next.state, S::Pausing);
        assert!(s.actions.ends_with(&[Action::Unassign, Action::CommitOpenTransaction]));
        let s = step(&failed_from(&stopping(), ErrorCode::Internal), Event::Recover);
        assert_eq!(s.next.state, S::Stopping);
        assert!(s.actions.ends_with(&stop_sequence()));
        // A resync keeps its truncation mode: the recovery deletes again first.
        let s = step(&failed_from(&next(&unknown(), start(RESYNC)), ErrorCode::DestinationUnavailable), Event::Recover);
        assert_eq!(s.next.state, S::Preparing);
        assert!(s.next.truncation.is_resync());
    }

    #[test]
    fn an_early_retry_needs_no_due_time_but_a_retryable_error_and_attempts_left() {
        let not_due = failed(ErrorCode::SourceUnreachable);
        let s = step_at(&not_due, Event::RetryEarly, T0);
        assert_eq!((s.next.state, s.next.retry_count), (S::Preparing, 1), "an attempt like any other");
        assert!(matches!(
            err_at(&failed(ErrorCode::ForeignWrite), Event::RetryEarly, T0),
            TransitionError::NotRetryable { .. }
        ));
        let mut exhausted = failed(ErrorCode::Timeout);
        exhausted.retry_count = RetryPolicy::DEFAULT.max_attempts;
        exhausted.next_retry_at = None;
        assert!(matches!(err_at(&exhausted, Event::RetryEarly, T0), TransitionError::RetriesExhausted { .. }));
    }

    #[test]
    fn recover_leaves_a_foreign_write_failed() {
        let foreign = failed(ErrorCode::ForeignWrite);
        let e = err(&foreign, Event::Recover);
        assert_eq!(e, TransitionError::NotRecoverable { code: ErrorCode::ForeignWrite });
        assert!(!e.is_harmless() && e.to_string().contains("stop the topic"), "{e}");
        assert_eq!(recover_refusal(&foreign), Some(e));
        assert_eq!(recover_refusal(&failed(ErrorCode::Timeout)), None);
    }

    #[test]
    fn recover_of_a_partition_that_is_not_failed_changes_nothing() {
        for record in [mirroring(), paused(), stopped(), unknown()] {
            let e = err(&record, Event::Recover);
            assert_eq!(e, TransitionError::AlreadyInState { state: record.state, event: EventKind::Recover });
            assert!(e.is_harmless());
        }
    }

    // ----- invariants over random event sequences

    #[derive(Debug, Clone, Copy)]
    struct Delta {
        source: i64,
        epoch: i32,
        destination: i64,
    }

    #[derive(Debug, Clone)]
    enum Op {
        Start { resync: bool, quarantine: bool },
        Prepared(Delta),
        Pause,
        Paused,
        Resume,
        Progress(Delta),
        Stop,
        Stopped { epoch: i32, destination: i64, nothing_mirrored: bool },
        Error { code: usize, message: u8, jitter: u32 },
        Retry,
        RetryEarly,
        Recover,
        Remove,
        Loaded,
        Wait(u64),
    }

    fn delta() -> impl Strategy<Value = Delta> {
        (-3_i64..40, -1_i32..3, -3_i64..40).prop_map(|(source, epoch, destination)| Delta {
            source,
            epoch,
            destination,
        })
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            2 => (any::<bool>(), any::<bool>())
                .prop_map(|(resync, quarantine)| Op::Start { resync, quarantine }),
            3 => delta().prop_map(Op::Prepared),
            2 => Just(Op::Pause),
            2 => Just(Op::Paused),
            2 => Just(Op::Resume),
            4 => delta().prop_map(Op::Progress),
            1 => Just(Op::Stop),
            2 => (-1_i32..3, -3_i64..40, any::<bool>()).prop_map(|(epoch, destination, nothing_mirrored)| {
                Op::Stopped { epoch, destination, nothing_mirrored }
            }),
            1 => (0..ErrorCode::ALL.len(), 0_u8..3, any::<u32>())
                .prop_map(|(code, message, jitter)| Op::Error { code, message, jitter }),
            2 => Just(Op::Retry),
            1 => Just(Op::RetryEarly),
            1 => Just(Op::Recover),
            1 => Just(Op::Remove),
            1 => Just(Op::Loaded),
            2 => (0_u64..120_000).prop_map(Op::Wait),
        ]
    }

    fn event_for(op: &Op, record: &PartitionRecord) -> Event {
        let base = record.position.unwrap_or(pos(0, -1, 0));
        let shifted = |d: Delta| MirrorPosition {
            next_source_offset: base.next_source_offset + d.source,
            source_leader_epoch: base.source_leader_epoch + d.epoch,
            destination_end_offset: base.destination_end_offset + d.destination,
        };
        match *op {
            Op::Start { resync: false, .. } => start(Truncation::None),
            Op::Start { resync: true, quarantine } => start(Truncation::Resync { quarantine }),
            Op::Prepared(d) => Event::Prepared { start: shifted(d) },
            Op::Pause => Event::Pause,
            Op::Paused => Event::Paused,
            Op::Resume => Event::Resume,
            Op::Progress(d) => Event::Progress { position: shifted(d) },
            Op::Stop => Event::Stop,
            Op::Stopped { epoch, destination, nothing_mirrored } => Event::Stopped {
                stop: StopPoint {
                    last_mirror_epoch: base.source_leader_epoch + epoch,
                    last_mirrored_source_offset: (!nothing_mirrored).then_some(base.next_source_offset - 1),
                    destination_stop_offset: base.destination_end_offset + destination,
                },
            },
            Op::Error { code, message, jitter } => {
                Event::error(ErrorCode::ALL[code], format!("cause {message}"), Jitter::from_random_u32(jitter))
            }
            Op::Retry => Event::Retry,
            Op::RetryEarly => Event::RetryEarly,
            Op::Recover => Event::Recover,
            Op::Remove => Event::Remove,
            Op::Loaded => Event::Loaded,
            Op::Wait(_) => unreachable!("waits are not events"),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        #[test]
        fn random_event_sequences_keep_the_invariants(ops in prop::collection::vec(op(), 0..80)) {
            let policy = RetryPolicy { backoff: Backoff::new(1_000, 60_000), max_attempts: 3 };
            let mut record = PartitionRecord::new(T0);
            let mut now = T0;
            let mut assigned = false;
            for op in &ops {
                now = now.saturating_add_millis(1);
                if let Op::Wait(ms) = op {
                    now = now.saturating_add_millis(*ms);
                    continue;
                }
                let event = event_for(op, &record);
                let kind = event.kind();
                match transition_with(&record, event, now, &policy) {
                    Ok(Step { next, actions }) => {
                        prop_assert_ne!(rule(record.state, kind), Rule::Rejected);
                        // epoch: exactly one per accepted event.
                        prop_assert_eq!(next.state_epoch, record.state_epoch + 1);
                        // assign-iff-mirroring.
                        for action in &actions {
                            match action {
                                Action::Assign { from } => {
                                    prop_assert_eq!(next.state, S::Mirroring);
                                    prop_assert_eq!(next.position, Some(*from));
                                    assigned = true;
                                }
                                Action::Unassign => assigned = false,
                                Action::ScheduleRetry { at, .. } => {
                                    prop_assert_eq!(next.state, S::Failed);
                                    prop_assert_eq!(next.next_retry_at, Some(*at));
                                    // A new schedule lies ahead; `loaded` re-arms the recorded one.
                                    prop_assert!(*at > now || kind == EventKind::Loaded);
                                }
                                _ => {}
                            }
                        }
                        if next.state == S::Mirroring && record.state != S::Mirroring {
                            let assigns = actions.iter().any(|a| matches!(a, Action::Assign { .. }));
                            prop_assert!(assigns, "every step into MIRRORING assigns");
                        }
                        prop_assert_eq!(assigned, next.state == S::Mirroring);
                        // monotone-position.
                        if let Some(before) = record.position {
                            let after = next.position;
                            prop_assert!(after.is_some(), "a committed position is never forgotten");
                            if after.is_some_and(|after| after.is_behind(&before)) {
                                prop_assert_eq!(kind, EventKind::Prepared);
                                prop_assert!(record.truncation.is_resync());
                            }
                        }
                        // record invariants, FAILED has an error.
                        prop_assert_eq!(next.state == S::Failed, next.error.is_some());
                        prop_assert_eq!(next.validate(), Ok(()));
                        let json = serde_json::to_string(&next).expect("serialise");
                        let back: PartitionRecord = serde_json::from_str(&json).expect("deserialise");
                        prop_assert_eq!(&back, &next);
                        record = next;
                    }
                    Err(e) => {
                        prop_assert!(!e.to_string().is_empty());
                        match e {
                            TransitionError::InvalidTransition { state, event } => {
                                prop_assert_eq!(rule(state, event), Rule::Rejected);
                            }
                            TransitionError::AlreadyInState { state, event } => {
                                prop_assert_ne!(rule(state, event), Rule::Rejected);
                            }
                            _ => prop_assert_eq!(rule(record.state, kind), Rule::Allowed),
                        }
                    }
                }
            }
        }
    }
}
