//! Carrying out the actions a transition returns.
//!
//! DESIGN.md §3: the new record is persisted first, then its actions run; an action that fails is
//! reported back as `Event::Error` for its partition (which goes FAILED and is retried with
//! backoff) and the rest of that partition's step is skipped. The actions of many partitions run
//! together, one data-path step per kind: a pause of 50 topics is one commit, a failover one abort
//! and one fence, a resume one `Assign`.
//!
//! | Action | Carried out by |
//! |---|---|
//! | `CheckSourceClusterId`, `CheckTopicIds`, `EnsureDestinationTopic`, `DeleteDestinationRecords`, `ComputeStartPosition` | [`Coordinator::prepare_topics`], the offsets of all topics read together (or [`Coordinator::prepare`] with the destination ends a start has just read, [`Planned::with_destination_ends`]); it reports `Prepared` (whose `Assign` it runs) or `Error`. A start, a partition added by a refresh, a restore and a retry all come here |
//! | `Unassign` + `CommitOpenTransaction` | one `Unassign { finish: Commit }`; PAUSING partitions then report `Paused` |
//! | `Unassign` + `AbortOpenTransaction` (+ `FenceProducer`) | one `Unassign { finish: Abort, fence }` |
//! | `PersistLastMirrorEpochs` | destination end offsets in one request → stop points and the LME record → `Stopped` |
//! | `Assign` | one `Assign`, with the destination end offsets read in one request |
//! | `Alert`, `ClearAlert`, `ScheduleRetry`, `CancelRetry` | nothing to do: the persisted record carries them (the snapshot shows its error, [`Coordinator::retry_due`] reads `next_retry_at`) |
//! | `ForgetPartition` | the caller, which drops the partition from memory |

use crate::data_path::PipeError;
use crate::domain::{Action, MirrorPosition};

use super::*;

/// Transitions already applied (and queued for persistence) whose actions are still to run.
#[derive(Debug, Default)]
pub(super) struct Planned {
    steps: Vec<(String, i32, Vec<Action>)>,
    /// Destination end offsets the caller has just read, by topic: a start's preparation uses
    /// them instead of reading them again (on a busy destination each read took 1-3 s).
    destination_ends: BTreeMap<String, BTreeMap<i32, i64>>,
}

impl Planned {
    pub(super) fn push(&mut self, topic: &str, partition: i32, actions: Vec<Action>) {
        if !actions.is_empty() {
            self.steps.push((topic.to_string(), partition, actions));
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    /// `topic`'s destination end offsets, read by the caller just before (see `destination_ends`).
    pub(super) fn with_destination_ends(&mut self, topic: &str, ends: BTreeMap<i32, i64>) {
        self.destination_ends.insert(topic.to_string(), ends);
    }

    /// A promote's stop: the data path commits its open transaction instead of aborting it, so
    /// what it read after the promote's check is mirrored rather than discarded. (A commit that
    /// fails is aborted by the data path, and the final positions say what was committed.)
    pub(super) fn commit_instead_of_abort(&mut self) {
        for (_, _, actions) in &mut self.steps {
            for a in actions.iter_mut() {
                if *a == Action::AbortOpenTransaction {
                    *a = Action::CommitOpenTransaction;
                }
            }
        }
    }
}

/// How the data path lets go of a partition, from `Unassign` and the actions next to it:
/// `(abort, fence)`. A lone `Unassign` (a takeover of a MIRRORING partition) aborts: the committed
/// position is the resume point, so nothing uncommitted may stay.
fn release_of(actions: &[Action]) -> Option<(bool, bool)> {
    if !actions.contains(&Action::Unassign) {
        return None;
    }
    let abort = !actions.contains(&Action::CommitOpenTransaction);
    Some((abort, actions.contains(&Action::FenceProducer)))
}

/// The problem a lifecycle call reports when the data path did not carry out a release.
pub(super) fn pipe_problem(e: &PipeError) -> Problem {
    let kind = match e {
        PipeError::Fenced(_) => ProblemKind::Fenced,
        PipeError::Fence(_) | PipeError::InDoubt(_) => ProblemKind::DestinationUnavailable,
        PipeError::Stopped(_) | PipeError::NoAnswer => ProblemKind::Internal,
    };
    Problem { kind, detail: e.to_string() }
}

/// The partition error for a release that did not happen.
fn pipe_error_code(e: &PipeError) -> ErrorCode {
    match e {
        PipeError::Fenced(_) => ErrorCode::ProducerFenced,
        PipeError::Fence(_) | PipeError::InDoubt(_) => ErrorCode::DestinationUnavailable,
        PipeError::Stopped(_) | PipeError::NoAnswer => ErrorCode::Timeout,
    }
}

/// What the data path needs to start a partition at `from`, whose destination log now ends at
/// `destination_next_offset`: the one place an [`AssignSpec`] is made.
pub(super) fn assign_spec(
    topic: &str,
    partition: i32,
    from: MirrorPosition,
    destination_next_offset: i64,
) -> AssignSpec {
    AssignSpec {
        topic: topic.to_string(),
        partition,
        next_source_offset: Some(from.next_source_offset),
        source_leader_epoch: (from.source_leader_epoch >= 0).then_some(from.source_leader_epoch),
        destination_next_offset,
        destination_end_offset: from.destination_end_offset,
    }
}

/// The durations of [`Coordinator::run_actions`]'s steps.
struct StepTimes {
    partitions: usize,
    start: std::time::Instant,
    last: std::time::Instant,
    steps: Vec<(&'static str, std::time::Duration)>,
}

impl StepTimes {
    fn new(partitions: usize) -> StepTimes {
        let now = std::time::Instant::now();
        StepTimes { partitions, start: now, last: now, steps: Vec::new() }
    }

    fn step(&mut self, name: &'static str) {
        let now = std::time::Instant::now();
        self.steps.push((name, now - self.last));
        self.last = now;
    }

    fn summary(&self) -> String {
        let steps: Vec<String> = self.steps.iter().map(|(n, d)| format!("{n} {} ms", d.as_millis())).collect();
        steps.join(", ")
    }

    fn log_if_slow(&self, mirror: &str) {
        let total = self.last - self.start;
        if total >= crate::data_path::SLOW_TO_LOG {
            tracing::info!(
                %mirror,
                partitions = self.partitions,
                total_ms = total.as_millis() as u64,
                "lifecycle actions took {} ms: {}",
                total.as_millis(),
                self.summary()
            );
        } else {
            tracing::debug!(%mirror, partitions = self.partitions, "lifecycle actions: {}", self.summary());
        }
    }
}

impl Coordinator {
    /// Runs the actions of `planned` (transitions of `mirror`'s partitions, already applied and
    /// queued), batched by kind, then persists what they changed. Returns the first problem per
    /// topic; a partition whose action failed is FAILED (see the module docs).
    pub(super) async fn run_actions(&mut self, mirror: &str, planned: Planned) -> BTreeMap<String, Problem> {
        let mut failed: BTreeMap<String, Problem> = BTreeMap::new();
        // How long each step took, logged when the whole is slow: a failover of many partitions
        // is one call, and an operator (or a benchmark) needs to see where its time went.
        let mut timing = StepTimes::new(planned.steps.len());
        self.start_data_paths_for(mirror, &planned);
        // Pending writes first: the records these actions follow must be durable before any of
        // them runs (a stop's STOPPING before its abort).
        // If they cannot be recorded, nothing runs and the partitions go FAILED (retryable), so
        // none is left in a transient state with nothing to move it on; the retry runs the
        // sequence again.
        if let Err(e) = self.flush().await {
            let parts: Vec<(String, i32)> = planned.steps.iter().map(|(t, p, _)| (t.clone(), *p)).collect();
            let problem = self.unrecorded(mirror, &parts, &e).await;
            for (topic, _) in parts {
                failed.entry(topic).or_insert_with(|| problem.clone());
            }
            return failed;
        }
        // The persisted record is the command; the actions are its owner's to run (`slots`): a
        // transition of a partition another instance owns reaches that instance through the state
        // topic, and it runs them there.
        timing.step("record");
        let mut planned = planned;
        planned.steps.retain(|(t, p, _)| self.owns_partition(mirror, t, *p));
        let mut releases: BTreeMap<(bool, bool), Vec<(String, i32)>> = BTreeMap::new();
        let mut stop_points: Vec<(String, i32)> = Vec::new();
        let mut assigns: Vec<(String, i32, MirrorPosition)> = Vec::new();
        let mut prepares: BTreeMap<String, Vec<i32>> = BTreeMap::new();
        for (topic, p, actions) in planned.steps {
            if let Some(key) = release_of(&actions) {
                releases.entry(key).or_default().push((topic.clone(), p));
            }
            for a in &actions {
                match a {
                    Action::PersistLastMirrorEpochs => stop_points.push((topic.clone(), p)),
                    Action::Assign { from } => assigns.push((topic.clone(), p, *from)),
                    Action::ComputeStartPosition { .. } => prepares.entry(topic.clone()).or_default().push(p),
                    _ => {}
                }
            }
        }

        // Releases: commits (pauses) before aborts, so a pause in the same batch as a failure
        // keeps what it had consumed.
        let mut not_released: HashSet<(String, i32)> = HashSet::new();
        for ((abort, fence), parts) in releases {
            let finish = if abort { Finish::Abort } else { Finish::Commit };
            for released in self.unassign_many(mirror, parts, finish, fence).await {
                let parts = released.partitions;
                match released.outcome {
                    Ok(finals) => {
                        for f in &finals {
                            self.apply_final(mirror, &f.topic, f);
                        }
                        if !abort {
                            for (t, p) in &parts {
                                let pausing = self.mirrors.partition(mirror, t, *p).map(|rt| rt.record.state);
                                if pausing == Ok(PartitionState::Pausing) {
                                    let _ = self.apply(mirror, t, *p, Event::Paused);
                                }
                            }
                        }
                    }
                    Err(e) => {
                        tracing::warn!(%mirror, partitions = parts.len(), "the data path did not release partitions: {e}");
                        self.release_unconfirmed(mirror, &parts, &e);
                        for (t, p) in &parts {
                            failed.entry(t.clone()).or_insert_with(|| pipe_problem(&e));
                            not_released.insert((t.clone(), *p));
                        }
                    }
                }
            }
        }

        timing.step("release");
        // Stop points: read after the abort and the fence, so every kmirror marker is below them.
        stop_points.retain(|k| !not_released.contains(k));
        if !stop_points.is_empty() {
            match self.destination_ends_of(&stop_points).await {
                Ok(ends) => {
                    let mut by_topic: BTreeMap<String, Vec<i32>> = BTreeMap::new();
                    for (t, p) in stop_points {
                        by_topic.entry(t).or_default().push(p);
                    }
                    for (t, parts) in by_topic {
                        self.stopped(mirror, &t, &parts, &ends);
                    }
                    self.queue_last_mirror_epochs(mirror);
                }
                Err(e) => {
                    for (t, p) in &stop_points {
                        self.fail(mirror, t, *p, ErrorCode::DestinationUnavailable, format!("stop point: {e}"));
                        failed.entry(t.clone()).or_insert_with(|| kafka_problem(Cluster::Destination, &e));
                    }
                }
            }
        }

        timing.step("stop points");
        if !assigns.is_empty() {
            let keys: Vec<(String, i32)> = assigns.iter().map(|(t, p, _)| (t.clone(), *p)).collect();
            match self.destination_ends_of(&keys).await {
                Ok(ends) => {
                    let specs = assigns
                        .iter()
                        .map(|(t, p, from)| assign_spec(t, *p, *from, ends.get(&(t.clone(), *p)).copied().unwrap_or(0)))
                        .collect();
                    self.assign(mirror, specs);
                }
                Err(e) => {
                    for (t, p, _) in &assigns {
                        self.fail(mirror, t, *p, ErrorCode::DestinationUnavailable, e.to_string());
                        failed.entry(t.clone()).or_insert_with(|| kafka_problem(Cluster::Destination, &e));
                    }
                }
            }
        }

        // A topic whose destination ends the caller read is prepared with them; the others
        // together, their offsets read in one request per kind.
        let (known, unknown): (BTreeMap<_, _>, BTreeMap<_, _>) =
            prepares.into_iter().partition(|(t, _)| planned.destination_ends.contains_key(t));
        for (topic, parts) in known {
            let ends = planned.destination_ends.remove(&topic);
            if let Err(p) = self.prepare(mirror, &topic, &parts, ends.as_ref()).await {
                failed.entry(topic).or_insert(p);
            }
        }
        for (topic, p) in self.prepare_topics(mirror, unknown).await {
            failed.entry(topic).or_insert(p);
        }

        timing.step("assign and prepare");
        if let Err(e) = self.flush().await {
            tracing::warn!(%mirror, "cannot persist the outcome of actions: {e}");
        }
        timing.step("persist");
        timing.log_if_slow(mirror);
        failed
    }

    /// Starts the data paths that `planned`'s assigns and preparations will hand partitions to,
    /// where their slots (owned here) have none yet, without waiting for them: a data path's
    /// clients take 100-300 ms to start (a consumer, a transactional producer and its
    /// `init_transactions`), and started here that overlaps the state write and the preparation
    /// below instead of following them. A first start of a mirror, a failback in particular,
    /// copies that much sooner. A partition whose step then fails leaves an idle data path,
    /// just as a stop does; its retry uses it.
    fn start_data_paths_for(&mut self, mirror: &str, planned: &Planned) {
        let slots: BTreeSet<i32> = planned
            .steps
            .iter()
            .filter(|(_, _, actions)| {
                actions.iter().any(|a| matches!(a, Action::Assign { .. } | Action::ComputeStartPosition { .. }))
            })
            .filter_map(|(t, p, _)| self.slot_of(mirror, t, *p))
            .filter(|s| self.owns(*s))
            .collect();
        for slot in slots {
            let _ = self.ensure_pipe(mirror, slot);
        }
    }

    /// `parts` go FAILED (retryable) after a release their data path did not confirm: it may
    /// still hold them, and their retry releases (or hands them over) again.
    pub(super) fn release_unconfirmed(&mut self, mirror: &str, parts: &[(String, i32)], e: &PipeError) {
        for (t, p) in parts {
            let message = format!("the data path did not confirm the release: {e}; retried");
            self.fail(mirror, t, *p, pipe_error_code(e), message);
        }
    }

    /// Hands MIRRORING partitions to a new data path (after a producer failure or a source
    /// connection change), each from its committed position; the destination end offsets are read
    /// in one request. A partition whose ends cannot be read goes FAILED (retried).
    pub(super) async fn reassign_mirroring(&mut self, mirror: &str, keys: &[(String, i32)]) {
        if keys.is_empty() {
            return;
        }
        let ends = match self.destination_ends_of(keys).await {
            Ok(ends) => ends,
            Err(e) => {
                for (t, p) in keys {
                    self.fail(mirror, t, *p, ErrorCode::DestinationUnavailable, e.to_string());
                }
                let _ = self.flush().await;
                return;
            }
        };
        let specs = keys
            .iter()
            .filter_map(|(t, p)| {
                let from = self.mirrors.partition(mirror, t, *p).ok()?.record.position?;
                Some(assign_spec(t, *p, from, ends.get(&(t.clone(), *p)).copied().unwrap_or(0)))
            })
            .collect();
        self.assign(mirror, specs);
    }
}
