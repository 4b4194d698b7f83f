//! A planned switch-over: `topics:stop` with `require_caught_up` (the CLI's `--promote`).
//!
//! The operator's runbook is: stop the producers on the source, promote, move the producers. A
//! promote stops the selected topics only once every one of their partitions has caught up, so
//! nothing the source committed is left behind; if its timeout passes first, nothing is stopped
//! and the answer lists each partition still behind with its lag.
//!
//! **Waiting never holds the coordinator.** The wait is a loop of reads of the source's last
//! stable offsets (`read_committed` ListOffsets, fresh each time, never the lag snapshot), each in
//! a task of its own that reports back with an `Internal::PromoteRead` message.
//! The coordinator compares each read with the positions it holds (the committed positions, and
//! the fetch positions past trailing transaction markers: the same `next_to_mirror` the lag is
//! made of) and either starts another read, answers "not caught up" at the deadline, or stops. In
//! between it serves everything else, so the data paths' commits that close the gap keep arriving
//! and a stop or pause of other topics is answered as usual.
//!
//! **No record is lost silently.** A position at or past a last stable offset read *before* the
//! comparison means every record the source had committed at that read is on the destination. The
//! stop follows in the same step, nothing else runs in between, and its release commits the data
//! path's open transaction instead of aborting it ([`Planned::commit_instead_of_abort`]): what the
//! data path read after the check is mirrored too. What the source receives after that (a
//! producer that was not stopped) cannot be on the destination; the last stable offsets are read
//! once more after the stop and any such record is reported in the answer (`behind` of a topic
//! that stopped) rather than lost silently. Later writes to the old source are what the
//! split-brain watch (`source_writes_after_stop`) reports.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use super::*;

/// How long a waiting promote waits between two reads of the source's last stable offsets.
const POLL_EVERY: Duration = Duration::from_millis(200);

/// How long the read after the stop may take.
const AFTER_STOP_READ: Duration = Duration::from_secs(5);

/// A read's shortest budget: a promote with a short timeout still gets one honest read.
const MIN_READ: Duration = Duration::from_millis(500);

/// Partitions listed in a topic's `not-caught-up` detail (the answer's `behind` lists all).
const LISTED_IN_DETAIL: usize = 5;

/// The source's last stable offsets of a promote's partitions, or why they could not be read.
pub(super) type StableOffsets = Result<HashMap<(String, i32), i64>, StableReadError>;

/// Why a promote could not read the source's last stable offsets.
#[derive(Debug, thiserror::Error)]
pub(super) enum StableReadError {
    #[error("the source cluster did not answer: {0}")]
    Kafka(KafkaError),
    #[error("the source cluster did not answer within {} ms", .0.as_millis())]
    Budget(Duration),
    /// Deleted (by another instance) before the read; `promote_read` answers mirror-not-found.
    #[error("the mirror was deleted")]
    MirrorDeleted,
}

/// A promote between its reads (it travels with its reads, off the loop).
pub(super) struct PromoteJob {
    call: LifecycleCall,
    /// The topics being promoted (in the mirror when the call arrived).
    topics: Vec<String>,
    /// Outcomes of the topics refused when the call arrived.
    refused: Vec<TopicOutcome>,
    timeout: Duration,
    deadline: tokio::time::Instant,
    requested_at: Timestamp,
}

/// Reads `keys`' last stable offsets from `source` within `budget`.
async fn read_stable(source: Admin, keys: Vec<(String, i32)>, budget: Duration) -> StableOffsets {
    if keys.is_empty() {
        return Ok(HashMap::new());
    }
    let req: Vec<_> = keys.iter().map(|(t, p)| (t.clone(), *p, OffsetSpec::Latest)).collect();
    match tokio::time::timeout(budget, source.list_offsets(&req, IsolationLevel::ReadCommitted)).await {
        Ok(Ok(offsets)) => Ok(offsets.into_iter().map(|o| ((o.topic, o.partition), o.offset)).collect()),
        Ok(Err(e)) => Err(StableReadError::Kafka(e)),
        Err(_) => Err(StableReadError::Budget(budget)),
    }
}

impl Coordinator {
    /// A promote arrives: the checks that need no Kafka, then the first read off the loop.
    pub(super) async fn begin_promote(&mut self, call: LifecycleCall) {
        let timeout = call.promote.unwrap_or(PROMOTE_DEFAULT_TIMEOUT).min(PROMOTE_MAX_TIMEOUT);
        let requested_at = now();
        let resolved = match self.check_writable() {
            Err(e) => Err(e),
            Ok(()) if !self.mirrors.contains_key(&call.mirror) => Err(EngineError::mirror_not_found(&call.mirror)),
            Ok(()) => self.resolve(&call.mirror, &call.selector, LifecycleOp::Stop).await,
        };
        let names = match resolved {
            Ok(names) => names,
            Err(e) => {
                let _ = call.reply.send(Err(e));
                return;
            }
        };
        let mut topics = Vec::new();
        let mut refused = Vec::new();
        for name in names {
            let checked = validate_topic_name(&name)
                .map_err(|e| Problem { kind: ProblemKind::InvalidName, detail: e.to_string() })
                .and_then(|()| {
                    self.plan_call(&call.mirror, &name, crate::domain::topic_call::TopicCall::Stop).map(|_| ())
                });
            match checked {
                Ok(()) => topics.push(name),
                Err(p) => refused.push(TopicOutcome { topic: name, ok: false, error: Some(p) }),
            }
        }
        let deadline = tokio::time::Instant::now() + timeout;
        let job = PromoteJob { call, topics, refused, timeout, deadline, requested_at };
        self.spawn_promote_read(job, Duration::ZERO);
    }

    /// The partitions of a promote's topics that are not STOPPED yet.
    fn promote_keys(&self, mirror: &str, topics: &[String]) -> Vec<(String, i32)> {
        let Some(m) = self.mirrors.get(mirror) else { return Vec::new() };
        topics
            .iter()
            .filter_map(|t| Some((t, m.topics.get(t)?)))
            .flat_map(|(t, rt)| {
                rt.partitions
                    .iter()
                    .filter(|(_, p)| p.record.state != PartitionState::Stopped)
                    .map(move |(p, _)| (t.clone(), *p))
            })
            .collect()
    }

    /// Reads the last stable offsets of `job`'s partitions after `delay`, off the loop.
    fn spawn_promote_read(&self, job: PromoteJob, delay: Duration) {
        let Some(m) = self.mirrors.get(&job.call.mirror) else {
            // Reported by `promote_read`, which finds the mirror gone.
            let read = Err(StableReadError::MirrorDeleted);
            let _ = self.internal_tx.send(Internal::PromoteRead { job: Box::new(job), read });
            return;
        };
        let source = Arc::clone(&m.source_admin);
        let keys = self.promote_keys(&job.call.mirror, &job.topics);
        let left = job.deadline.saturating_duration_since(tokio::time::Instant::now() + delay);
        let budget = left.clamp(MIN_READ, self.config.request_timeout.max(MIN_READ));
        let internal = self.internal_tx.clone();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let read = read_stable(source, keys, budget).await;
            let _ = internal.send(Internal::PromoteRead { job: Box::new(job), read });
        });
    }

    /// A read is back: stop if every partition caught up, answer at the deadline, else read again.
    pub(super) async fn promote_read(&mut self, job: PromoteJob, read: StableOffsets) {
        let mirror = job.call.mirror.clone();
        if !self.mirrors.contains_key(&mirror) {
            // Deleted by another instance meanwhile (read by the state tail).
            let _ = job.call.reply.send(Err(EngineError::mirror_not_found(&mirror)));
            return;
        }
        let behind = self.promote_behind(&mirror, &job.topics, &read);
        if behind.is_empty() {
            let checked = read.unwrap_or_default();
            self.promote_stop(job, checked).await;
        } else if tokio::time::Instant::now() >= job.deadline {
            self.promote_timed_out(job, behind, read.err()).await;
        } else {
            self.spawn_promote_read(job, POLL_EVERY);
        }
    }

    /// The partitions of `topics` not caught up with the last stable offsets `read`: lag-based
    /// whatever their state (a STOPPED partition has nothing left to stop).
    fn promote_behind(
        &self,
        mirror: &str,
        topics: &[String],
        read: &StableOffsets,
    ) -> BTreeMap<String, Vec<PartitionBehind>> {
        let mut out: BTreeMap<String, Vec<PartitionBehind>> = BTreeMap::new();
        let Ok(m) = self.mirrors.mirror(mirror) else { return out };
        for topic in topics {
            let Some(t) = m.topics.get(topic) else { continue };
            for (p, rt) in &t.partitions {
                if rt.record.state == PartitionState::Stopped {
                    continue;
                }
                let next = next_to_mirror(rt);
                let lso = read.as_ref().ok().and_then(|r| r.get(&(topic.clone(), *p)).copied());
                let lag = lso.map(|lso| {
                    let from = next.unwrap_or_else(|| rt.offsets.source_start.unwrap_or(0));
                    crate::domain::lineage::failover_impact(from, lso).unmirrored_records
                });
                if lag == Some(0) {
                    continue;
                }
                out.entry(topic.clone()).or_default().push(PartitionBehind {
                    partition: *p,
                    state: rt.record.state,
                    source_last_stable_offset: lso,
                    mirrored_source_offset: next,
                    lag_records: lag,
                });
            }
        }
        out
    }

    /// Every partition caught up with the last stable offsets `checked`: stop now, in this step,
    /// committing what the data path read since; then read the last stable offsets once more and
    /// report any record the source received after the check that is not on the destination.
    async fn promote_stop(&mut self, job: PromoteJob, checked: HashMap<(String, i32), i64>) {
        let mirror = job.call.mirror.clone();
        if let Err(e) = self.check_writable() {
            let _ = job.call.reply.send(Err(e));
            return;
        }
        let outcomes = self.stop_topics_with(&mirror, &job.topics, true).await;
        if let Err(e) = self.flush().await {
            tracing::warn!(%mirror, "cannot persist the promote's stop: {e}");
        }
        let stopped: Vec<(String, i32)> = self
            .mirrors
            .get(&mirror)
            .map(|m| {
                checked
                    .keys()
                    .filter(|(t, p)| {
                        m.topics
                            .get(t)
                            .and_then(|t| t.partitions.get(p))
                            .is_some_and(|rt| rt.record.state == PartitionState::Stopped)
                    })
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        let mut behind: BTreeMap<String, Vec<PartitionBehind>> = BTreeMap::new();
        if let Some(m) = self.mirrors.get(&mirror) {
            let source = Arc::clone(&m.source_admin);
            // Stops and pauses of other topics are served meanwhile; these topics are done.
            let after = self.while_serving_priority(read_stable(source, stopped.clone(), AFTER_STOP_READ)).await;
            match after {
                Ok(Ok(after)) => {
                    for key in &stopped {
                        let Ok(rt) = self.mirrors.partition(&mirror, &key.0, key.1) else {
                            continue;
                        };
                        let (Some(now), Some(at_check)) = (after.get(key), checked.get(key)) else { continue };
                        let final_next = rt.record.position.map_or(0, |p| p.next_source_offset);
                        let late = crate::domain::lineage::written_after_check(*at_check, final_next, *now);
                        if late > 0 {
                            behind.entry(key.0.clone()).or_default().push(PartitionBehind {
                                partition: key.1,
                                state: rt.record.state,
                                source_last_stable_offset: Some(*now),
                                mirrored_source_offset: Some(*now - late),
                                lag_records: Some(late),
                            });
                        }
                    }
                    if !behind.is_empty() {
                        let records: i64 = behind.values().flatten().filter_map(|b| b.lag_records).sum();
                        tracing::warn!(
                            %mirror,
                            records,
                            "promote: the source received records after the final check that are not on the destination (were its producers stopped?)"
                        );
                    }
                }
                Ok(Err(e)) => tracing::warn!(
                    %mirror,
                    "promote: the topics stopped, but the source's last stable offsets could not be read again to confirm that nothing arrived after the check: {e}"
                ),
                Err(e) => tracing::warn!(%mirror, "promote: the read after the stop failed: {e}"),
            }
        }
        let mut results = job.refused.clone();
        results.extend(job.topics.iter().zip(outcomes).map(|(topic, o)| match o {
            Ok(_) => TopicOutcome { topic: topic.clone(), ok: true, error: None },
            Err(p) => TopicOutcome { topic: topic.clone(), ok: false, error: Some(p) },
        }));
        self.finish_promote(job, results, behind).await;
    }

    /// The timeout passed with partitions still behind: nothing is stopped; every topic says why.
    async fn promote_timed_out(
        &mut self,
        job: PromoteJob,
        behind: BTreeMap<String, Vec<PartitionBehind>>,
        source_error: Option<StableReadError>,
    ) {
        let waited = format!("{} ms", job.timeout.as_millis());
        let lagging = behind.len();
        let mut results = job.refused.clone();
        for topic in &job.topics {
            let detail = match behind.get(topic) {
                Some(parts) => {
                    let listed: Vec<String> = parts
                        .iter()
                        .take(LISTED_IN_DETAIL)
                        .map(|b| match (b.lag_records, b.source_last_stable_offset) {
                            (Some(lag), Some(lso)) => format!(
                                "partition {} is {lag} records behind (source last stable offset {lso}, mirrored up to {})",
                                b.partition,
                                b.mirrored_source_offset.map_or_else(|| "nothing".to_string(), |o| o.to_string())
                            ),
                            _ => format!("partition {}: lag unknown", b.partition),
                        })
                        .collect();
                    let more = parts.len().saturating_sub(LISTED_IN_DETAIL);
                    let more = if more > 0 { format!(" and {more} more partitions") } else { String::new() };
                    let why = match &source_error {
                        Some(e) => format!("{e}; "),
                        None => String::new(),
                    };
                    format!(
                        "not stopped: {why}{}{more} after waiting {waited}; nothing was stopped (stop the producers on the source, then promote again)",
                        listed.join(", ")
                    )
                }
                None => format!(
                    "caught up, but not stopped: a promote stops all its topics or none, and {lagging} other topic(s) were still behind after {waited}"
                ),
            };
            results.push(TopicOutcome {
                topic: topic.clone(),
                ok: false,
                error: Some(Problem { kind: ProblemKind::NotCaughtUp, detail }),
            });
        }
        self.finish_promote(job, results, behind).await;
    }

    /// Records the promote in the audit trail and answers.
    async fn finish_promote(
        &mut self,
        job: PromoteJob,
        results: Vec<TopicOutcome>,
        behind: BTreeMap<String, Vec<PartitionBehind>>,
    ) {
        let PromoteJob { call, requested_at, .. } = job;
        let operation_id = self.next_operation_id();
        self.record_operation(
            &operation_id,
            &call.mirror,
            OperationKind::Stop,
            &call.actor,
            requested_at,
            results.clone(),
        )
        .await;
        // Readers see the outcome as soon as the caller does.
        self.publish();
        let _ = call.reply.send(Ok(OpResult {
            operation_id,
            results,
            quarantined: BTreeMap::new(),
            failback: BTreeMap::new(),
            behind,
            saved_pattern: None,
            notes: BTreeMap::new(),
        }));
    }
}
