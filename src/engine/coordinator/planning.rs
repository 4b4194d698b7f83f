//! Start planning off the coordinator's loop: the reads and copies a start of one topic may
//! need before anything changes — the failback plan (the source's whole state topic, scans of the
//! destination and of the source), a restart's divergence check, the quarantine copy and its
//! dry-run count. Each can take many seconds (up to four request timeouts each with a source that
//! answers slowly), and the coordinator is the one writer: while it waits, no stop or pause could
//! be served. So a [`Planner`] holds everything such a step reads, owned (clients, the source's
//! settings, the topic's partition records as they were), and runs in a task of its own while
//! the coordinator keeps serving the priority lane ([`Coordinator::off_loop_plan`]). When it is
//! done the coordinator checks that the topic's records are still the ones the plan started from
//! (a stop served meanwhile may have changed them) and only then applies anything.

use std::future::Future;

use super::failback::{Copies, FailbackPlan, read_source_state};
use super::starting::{offsets_of, until_available};
use super::*;
use crate::domain::lineage::{
    FailbackCopy, FailbackPreview, LogBounds, PartitionLineage, RecordScan, Refusal, StartDecision, decide_failback,
};
use crate::domain::quarantine::{self, QuarantinedPartition};
use crate::engine::ports::Admin;
use crate::kafka::quarantine::{QuarantineError, QuarantineJob};

/// What a start's planning of one topic reads, owned, so it can run off the loop.
pub(super) struct Planner {
    mirror: String,
    topic: String,
    ports: Arc<dyn Ports>,
    config: EngineConfig,
    destination: Admin,
    source: Admin,
    source_spec: SourceSpec,
    destination_cluster_id: String,
    /// The topic's partition records in this mirror when the plan began; `None` when the topic
    /// is new to the mirror.
    own: Option<BTreeMap<i32, PartitionRecord>>,
}

impl Coordinator {
    /// A planner for `topic` of `mirror`, from the coordinator's state now.
    fn planner(&self, mirror: &str, topic: &str) -> Result<Planner, Problem> {
        let m = self.mirrors.get(mirror).ok_or_else(|| {
            let e = EngineError::mirror_not_found(mirror);
            Problem { kind: e.kind(), detail: e.to_string() }
        })?;
        Ok(Planner {
            mirror: mirror.to_string(),
            topic: topic.to_string(),
            ports: Arc::clone(&self.ports),
            config: self.config.clone(),
            destination: Arc::clone(&self.destination_admin),
            source: Arc::clone(&m.source_admin),
            source_spec: m.stored.spec.source.clone(),
            destination_cluster_id: self.destination_cluster_id.clone(),
            own: own_records(m, topic),
        })
    }

    /// Runs a planning step for `topic` of `mirror` (`plan`, given the planner) in a task of its
    /// own, serving the priority lane meanwhile, then checks that the topic's records did not
    /// change while it ran: a plan made from records that are no longer the topic's is refused
    /// (the caller applies nothing), and the operator starts again.
    pub(super) async fn off_loop_plan<T, F, Fut>(&mut self, mirror: &str, topic: &str, plan: F) -> Result<T, Problem>
    where
        T: Send + 'static,
        F: FnOnce(Arc<Planner>) -> Fut,
        Fut: Future<Output = Result<T, Problem>> + Send + 'static,
    {
        let planner = Arc::new(self.planner(mirror, topic)?);
        let work = plan(Arc::clone(&planner));
        let r = self.while_serving_priority(work).await.map_err(|e| Problem {
            kind: ProblemKind::Internal,
            detail: format!("the start of {topic:?} could not be prepared ({e})"),
        })?;
        let now = self.mirrors.get(mirror).and_then(|m| own_records(m, topic));
        if now.as_ref().map(lineage_of) != planner.own.as_ref().map(lineage_of) {
            return Err(Problem {
                kind: ProblemKind::IllegalTransition,
                detail: format!(
                    "topic {topic:?} changed while its start was being prepared (a stop, pause or another instance \
                     changed its partitions): nothing was done; start it again"
                ),
            });
        }
        r
    }

    /// Awaits `work` in a task of its own while serving stops and pauses as they arrive: a
    /// failover never waits for it.
    pub(super) async fn while_serving_priority<T: Send + 'static>(
        &mut self,
        work: impl Future<Output = T> + Send + 'static,
    ) -> Result<T, tokio::task::JoinError> {
        let mut task = tokio::spawn(work);
        loop {
            tokio::select! {
                biased;
                done = &mut task => return done,
                Some(req) = self.priority_rx.recv(), if !self.off_loop.serving_priority() => {
                    self.handle_priority(req).await;
                }
            }
        }
    }
}

/// The records of `topic`'s partitions in mirror `m`, if it has the topic.
fn own_records(m: &MirrorRt, topic: &str) -> Option<BTreeMap<i32, PartitionRecord>> {
    m.topics.get(topic).map(|t| t.partitions.iter().map(|(p, rt)| (*p, rt.record.clone())).collect())
}

/// What a plan depends on in a topic's records: each partition's state and lineage.
fn lineage_of(
    records: &BTreeMap<i32, PartitionRecord>,
) -> Vec<(i32, PartitionState, Option<StopPoint>, Option<MirrorPosition>)> {
    records.iter().map(|(p, r)| (*p, r.state, r.stop_point, r.position)).collect()
}

impl Planner {
    /// The failback plan for `topic` of `mirror`, whose destination topic (`dest_topic_id`)
    /// holds records: `None` when the source's state has no lineage for it (then it is not a
    /// failback, and the caller refuses to adopt a topic with records), an error when the
    /// lineage exists but cannot be used, or when records here never reached the other side
    /// (`DESTINATION_DIVERGED`, with their count, offsets and time range per partition).
    /// `source_starts`: the source's log starts, when this mirror has its own lineage of the
    /// topic (a restart; a first start has none). With [`Copies::Skip`] the preview's partitions
    /// stay empty.
    pub(super) async fn failback_plan(
        &self,
        dest_topic_id: &str,
        partitions: i32,
        dest_ends: &BTreeMap<i32, i64>,
        source_starts: Option<&BTreeMap<i32, i64>>,
        copies: Copies,
    ) -> Result<Option<FailbackPlan>, Problem> {
        let topic = self.topic.as_str();
        let began = std::time::Instant::now();
        let remote = self.source_state(&format!("to look for a failback lineage of {topic:?}"), "").await?;
        let read_state = began.elapsed();
        let found =
            match crate::engine::failback::find(&remote, topic, &self.destination_cluster_id, Some(dest_topic_id)) {
                Ok(Some(found)) => found,
                Ok(None) => return Ok(None),
                Err(p) => return Err(Problem { kind: p.kind, detail: p.detail }),
            };
        let dest = &*self.destination;
        let parts = 0..partitions;
        let unavailable = |e: KafkaError| kafka_problem(Cluster::Destination, &e);
        let stable = offsets_of(dest, topic, parts.clone(), OffsetSpec::Latest, IsolationLevel::ReadCommitted)
            .await
            .map_err(unavailable)?;
        let starts = offsets_of(dest, topic, parts.clone(), OffsetSpec::Earliest, IsolationLevel::ReadUncommitted)
            .await
            .map_err(unavailable)?;
        let here = self.lineage_here(partitions, Some(&found), source_starts);
        let mut ranges = Vec::new();
        for p in parts.clone() {
            if !found.partitions.contains_key(&p) {
                return Err(Problem {
                    kind: ProblemKind::DestinationDiverged,
                    detail: format!(
                        "DESTINATION_DIVERGED: failback of {topic:?}: the source's mirror {:?} has no stop point for \
                         partition {p} (it was not failed over): start with truncation mode `resync`",
                        found.mirror
                    ),
                });
            }
            let from = here[&p].divergence_point().max(starts.get(&p).copied().unwrap_or(0));
            ranges.push((p, from, stable.get(&p).copied().unwrap_or(0)));
        }
        let scanned_from = std::time::Instant::now();
        let scans = self.ports.scan_destination(&self.config, topic, ranges).await.map_err(unavailable)?;
        let scan_here = scanned_from.elapsed();
        let mut plan = FailbackPlan {
            from_mirror: found.mirror.clone(),
            positions: BTreeMap::new(),
            maps: BTreeMap::new(),
            preview: FailbackPreview { from_mirror: found.mirror.clone(), partitions: Vec::new() },
        };
        let mut diverged = Vec::new();
        for p in parts {
            let (here, copied) = (here[&p], found.partitions[&p].mirrored_end);
            let scan = scans.get(&p).copied().unwrap_or_default();
            let after = RecordScan { records: scan.records, offsets: scan.offsets, timestamps: scan.timestamps };
            let bounds = LogBounds::observed(starts.get(&p).copied(), dest_ends.get(&p).copied().unwrap_or(0));
            match decide_failback(&here, bounds, &after, Truncation::None, 0) {
                Ok(StartDecision::Refuse(why)) => {
                    let when = match scan.timestamps {
                        Some((a, b)) => {
                            format!(", written between {} and {}", Timestamp::from_millis(a), Timestamp::from_millis(b))
                        }
                        None => String::new(),
                    };
                    let point = here.divergence_point();
                    let ours = if point > copied {
                        format!(", and this mirror's own writes end at offset {point}")
                    } else {
                        String::new()
                    };
                    let what = match why.divergence() {
                        Some(d) => format!(
                            "{d}{when} never reached the other side (the mirror {:?} copied up to offset {copied}{ours})",
                            found.mirror
                        ),
                        None => why.to_string(),
                    };
                    diverged.push(format!("partition {p}: {what}"));
                }
                Ok(decision) => {
                    if let Some(pos) = decision.start_position() {
                        plan.positions.insert(p, pos);
                    }
                    if let Some(map) = found.offset_maps.get(&p) {
                        plan.maps.insert(p, map.clone());
                    }
                }
                Err(e) => diverged.push(format!("partition {p}: {e}")),
            }
        }
        if !diverged.is_empty() {
            return Err(Problem {
                kind: ProblemKind::DestinationDiverged,
                detail: format!(
                    "DESTINATION_DIVERGED: failback of {topic:?}: {}; start with truncation mode `resync` to delete \
                     them and copy the topic again",
                    diverged.join("; ")
                ),
            });
        }
        let counted_from = std::time::Instant::now();
        if copies == Copies::Count {
            plan.preview.partitions = self.failback_copies(&plan.positions).await?;
        }
        tracing::debug!(
            %topic,
            total_ms = began.elapsed().as_millis(),
            source_state_ms = read_state.as_millis(),
            destination_scan_ms = scan_here.as_millis(),
            count_copies_ms = counted_from.elapsed().as_millis(),
            "failback plan"
        );
        Ok(Some(plan))
    }

    /// What this cluster knows of the two-way history of each partition of `topic` (its
    /// [`PartitionLineage`]): this mirror's own stop point and committed position, what the
    /// other direction's mirror (`found`, from the source's state) copied from here, and the
    /// source's log starts (`source_starts`, whether it still holds what this mirror copied from
    /// it; see [`Self::source_starts`]). The one input
    /// of every "which records here never reached the other side" question: the refusal, its
    /// preview, the quarantine copy and the quarantine's preview.
    pub(super) fn lineage_here(
        &self,
        partitions: i32,
        found: Option<&crate::engine::failback::FoundLineage>,
        source_starts: Option<&BTreeMap<i32, i64>>,
    ) -> BTreeMap<i32, PartitionLineage> {
        let own = self.own.as_ref();
        (0..partitions)
            .map(|p| {
                let record = own.and_then(|t| t.get(&p));
                let lineage = PartitionLineage {
                    stop: record.and_then(|r| r.stop_point),
                    position: record.and_then(|r| r.position),
                    copied_out: found.and_then(|f| f.partitions.get(&p).copied()),
                    source_log_start: source_starts.and_then(|s| s.get(&p).copied()),
                };
                (p, lineage)
            })
            .collect()
    }

    /// The source's log start offsets of `topic`'s partitions, for [`Self::lineage_here`].
    pub(super) async fn source_starts(&self, partitions: i32) -> Result<BTreeMap<i32, i64>, Problem> {
        let topic = self.topic.as_str();
        let source = &*self.source;
        offsets_of(source, topic, 0..partitions, OffsetSpec::Earliest, IsolationLevel::ReadUncommitted)
            .await
            .map_err(|e| kafka_problem(Cluster::Source, &e))
    }

    /// What a failback of `topic` copies from the source per partition: from each start
    /// position to the source's last stable offset now, counted `read_committed` (the same
    /// records the data path will copy, as long as nothing more is written meanwhile).
    async fn failback_copies(&self, positions: &BTreeMap<i32, MirrorPosition>) -> Result<Vec<FailbackCopy>, Problem> {
        let topic = self.topic.as_str();
        let unreachable = |e: KafkaError| kafka_problem(Cluster::Source, &e);
        let stable = offsets_of(
            &*self.source,
            topic,
            positions.keys().copied(),
            OffsetSpec::Latest,
            IsolationLevel::ReadCommitted,
        )
        .await
        .map_err(unreachable)?;
        let ranges: Vec<(i32, i64, i64)> = positions
            .iter()
            .map(|(p, pos)| (*p, pos.next_source_offset, stable.get(p).copied().unwrap_or(pos.next_source_offset)))
            .collect();
        let spec = &self.source_spec;
        let scans = self
            .ports
            .scan_cluster(
                &spec.bootstrap_servers,
                &spec.properties,
                topic,
                ranges.clone(),
                self.config.request_timeout * 4,
            )
            .await
            .map_err(unreachable)?;
        Ok(ranges
            .into_iter()
            .map(|(p, from, to)| FailbackCopy {
                partition: p,
                from_offset: from,
                to_offset: to.max(from),
                records: scans.get(&p).map_or(0, |s| s.records),
            })
            .collect())
    }

    /// The source cluster's `__mirror_state` as it stands, read with this mirror's source
    /// settings (see [`read_source_state`]).
    pub(super) async fn source_state(&self, why: &str, then: &str) -> Result<persist::Loaded, Problem> {
        let source = &self.source_spec;
        let (state_topic, timeout) = (&self.config.state_topic, self.config.request_timeout);
        read_source_state(&*self.ports, source, state_topic, timeout, why, then).await
    }

    /// `validate_only` of a start of a topic new to `mirror`: a destination topic that already
    /// holds records is accepted only when a failback would adopt it. A failback answers what it
    /// will copy.
    pub(super) async fn validate_adoption(&self, partitions: i32) -> Result<Option<FailbackPreview>, Problem> {
        let topic = self.topic.as_str();
        let dest = &*self.destination;
        let d = match dest.describe_topic(topic).await {
            Ok(d) => d,
            Err(e) if e.is(crate::kafka::KafkaErrorKind::UnknownTopicOrPartition) => return Ok(None),
            Err(e) => return Err(kafka_problem(Cluster::Destination, &e)),
        };
        let ends = offsets_of(dest, topic, 0..partitions, OffsetSpec::Latest, IsolationLevel::ReadUncommitted)
            .await
            .map_err(|e| kafka_problem(Cluster::Destination, &e))?;
        let Some((p, end)) = ends.iter().find(|(_, end)| **end > 0) else { return Ok(None) };
        match self.failback_plan(&d.topic_id.to_string(), partitions, &ends, None, Copies::Count).await? {
            Some(plan) => Ok(Some(plan.preview)),
            None => Err(Problem {
                kind: ProblemKind::DestinationTopicConflict,
                detail: format!(
                    "destination topic {topic:?} already holds records (partition {p} ends at offset {end}); only an empty topic can become a mirror (start with truncation \"resync\" to delete them and mirror the source)"
                ),
            }),
        }
    }

    /// `validate_only` of a restart of `topic` (in `mirror`, stopped): the start's own check
    /// (`restart_plan`), on the destination topic as it is now.
    pub(super) async fn validate_restart(&self) -> Result<Option<FailbackPreview>, Problem> {
        let topic = self.topic.as_str();
        if self.own.is_none() {
            return Ok(None);
        }
        let dest = &*self.destination;
        let d = match dest.describe_topic(topic).await {
            Ok(d) => d,
            // Deleted since the failover: the start recreates it, nothing is in the way.
            Err(e) if e.is(crate::kafka::KafkaErrorKind::UnknownTopicOrPartition) => return Ok(None),
            Err(e) => return Err(kafka_problem(Cluster::Destination, &e)),
        };
        let partitions = d.partitions.len() as i32;
        let ends = offsets_of(dest, topic, 0..partitions, OffsetSpec::Latest, IsolationLevel::ReadUncommitted)
            .await
            .map_err(|e| kafka_problem(Cluster::Destination, &e))?;
        let plan = self.restart_plan(&d.topic_id.to_string(), partitions, &ends, Copies::Count).await?;
        Ok(plan.map(|p| p.preview))
    }

    /// The check of a restart (`truncation` none) of `topic`, already in `mirror` as `t`, whose
    /// destination topic (`dest_topic_id`, ends `dest_ends`) may hold records written after a
    /// failover: refused with `DESTINATION_DIVERGED` and the exact count and range of the records
    /// that never reached the other side, or the failback plan of a round trip (A -> B failed
    /// over, B -> A failed back and over again, now A -> B again: the writes here after the stop
    /// point are the other direction's copies, and the restart resumes from where that mirror
    /// stopped). `None`: nothing in the way, an ordinary restart. The start and its preview both
    /// ask this, so they cannot disagree.
    pub(super) async fn restart_plan(
        &self,
        dest_topic_id: &str,
        partitions: i32,
        dest_ends: &BTreeMap<i32, i64>,
        copies: Copies,
    ) -> Result<Option<FailbackPlan>, Problem> {
        let topic = self.topic.as_str();
        let Some(own) = &self.own else { return Ok(None) };
        if !own.values().any(|r| r.stop_point.is_some()) {
            return Ok(None);
        }
        let dest = &*self.destination;
        let dest_starts = offsets_of(dest, topic, 0..partitions, OffsetSpec::Earliest, IsolationLevel::ReadUncommitted)
            .await
            .map_err(|e| kafka_problem(Cluster::Destination, &e))?;
        // First this mirror's own lineage (cheap: ListOffsets); only when something here is not
        // on the source by it is the source's state read, to see whether it crossed over.
        let source_starts = self.source_starts(partitions).await?;
        let mut diverged = Vec::new();
        for (p, lineage) in self.lineage_here(partitions, None, Some(&source_starts)) {
            let stopped = own.get(&p).is_some_and(|r| r.state == PartitionState::Stopped);
            let Some(stop) = lineage.stop.filter(|_| stopped) else { continue };
            let hwm = dest_ends.get(&p).copied().unwrap_or(0);
            let divergence = lineage.divergence(LogBounds::observed(dest_starts.get(&p).copied(), hwm));
            if divergence.is_diverged() {
                let why = if lineage.divergence_point() < stop.destination_stop_offset {
                    format!(
                        "{divergence} are not on the source: it no longer holds the records this mirror copied from \
                         it (log start {}), so restart with truncation mode `resync`",
                        source_starts.get(&p).copied().unwrap_or(0)
                    )
                } else {
                    Refusal::LocalWrites { lineage_end: stop.destination_stop_offset, divergence }.to_string()
                };
                diverged.push(format!("partition {p}: {why}"));
            }
        }
        if diverged.is_empty() {
            return Ok(None);
        }
        match self.failback_plan(dest_topic_id, partitions, dest_ends, Some(&source_starts), copies).await? {
            Some(plan) => Ok(Some(plan)),
            None => Err(Problem {
                kind: ProblemKind::DestinationDiverged,
                detail: format!("DESTINATION_DIVERGED: topic {topic:?}: {}", diverged.join("; ")),
            }),
        }
    }

    /// Copies the divergent records of the destination's `topic` to `<topic>.kmirror-diverged`
    /// before a resync deletes them (with `dry_run`, the preview: counts what it would copy, after
    /// the same checks); answers for each partition that has divergent records. Per partition the
    /// divergent range is the one a `DESTINATION_DIVERGED` refusal reports (from the divergence
    /// point of `divergent_starts`), up to the last stable offset. A destination topic that does
    /// not exist has nothing to keep.
    pub(super) async fn quarantine_divergent(&self, dry_run: bool) -> Result<Vec<QuarantinedPartition>, Problem> {
        let (mirror, topic) = (self.mirror.as_str(), self.topic.as_str());
        let target = quarantine::quarantine_topic(topic);
        let unavailable = |e: KafkaError| Problem {
            kind: ProblemKind::DestinationUnavailable,
            detail: format!(
                "cannot quarantine the divergent records of {topic:?} to {target:?} ({e}); nothing was deleted, and a retry copies only what is not there yet"
            ),
        };
        let dest = &*self.destination;
        let d = match dest.describe_topic(topic).await {
            Ok(d) => d,
            Err(e) if e.is(crate::kafka::KafkaErrorKind::UnknownTopicOrPartition) => return Ok(Vec::new()),
            Err(e) => return Err(unavailable(e)),
        };
        let topic_id = d.topic_id.to_string();
        let n = d.partitions.len() as i32;
        let froms = self.divergent_starts(&topic_id, n).await?;
        let starts = offsets_of(dest, topic, 0..n, OffsetSpec::Earliest, IsolationLevel::ReadUncommitted)
            .await
            .map_err(unavailable)?;
        let stable = offsets_of(dest, topic, 0..n, OffsetSpec::Latest, IsolationLevel::ReadCommitted)
            .await
            .map_err(unavailable)?;
        let ranges: Vec<(i32, i64, i64)> = (0..n)
            .map(|p| {
                let at = |m: &BTreeMap<i32, i64>| m.get(&p).copied().unwrap_or(0);
                let (from, end) = quarantine::range(at(&froms), at(&starts), at(&stable));
                (p, from, end)
            })
            .collect();
        if ranges.iter().all(|(_, from, end)| from >= end) {
            // Nothing diverged: nothing to copy, and no quarantine topic to create or check.
            return Ok(Vec::new());
        }
        let mut existing = match dest.describe_topic(&target).await {
            Ok(t) => Some(t),
            Err(e) if e.is(crate::kafka::KafkaErrorKind::UnknownTopicOrPartition) => None,
            Err(e) => return Err(unavailable(e)),
        };
        if existing.is_none() && !dry_run {
            // Same partition count: each record keeps its partition number.
            match dest.create_topic(&target, n, -1, &[]).await {
                Ok(()) => {}
                Err(e) if e.is(crate::kafka::KafkaErrorKind::TopicAlreadyExists) => {}
                Err(e) => return Err(unavailable(e)),
            }
            let wait = self.config.request_timeout;
            let Some(t) = until_available(dest, &target, n, wait).await else {
                return Err(Problem {
                    kind: ProblemKind::DestinationUnavailable,
                    detail: format!(
                        "quarantine topic {target:?} was created but did not become available; nothing was deleted"
                    ),
                });
            };
            existing = Some(t);
        }
        let target_partitions = existing.as_ref().map_or(0, |t| t.partitions.len() as i32);
        let target_ends = if target_partitions > 0 {
            offsets_of(dest, &target, 0..target_partitions, OffsetSpec::Latest, IsolationLevel::ReadUncommitted)
                .await
                .map_err(unavailable)?
                .into_iter()
                .collect()
        } else {
            Vec::new()
        };
        let job = QuarantineJob {
            topic: topic.to_string(),
            topic_id,
            ranges,
            target: target.clone(),
            target_partitions,
            target_ends,
        };
        match self.ports.quarantine(&self.config, job, dry_run).await {
            Ok(done) => {
                if !dry_run {
                    let copied: i64 = done.values().map(|q| q.records).sum();
                    tracing::info!(%mirror, %topic, %target, records = copied, "quarantine: divergent records copied before the resync");
                }
                // Only partitions with divergent records: the same answer whether the
                // destination topic exists yet or not (a start creates it empty first).
                Ok(done.into_values().filter(|q| q.offsets.is_some()).collect())
            }
            Err(e @ QuarantineError::Foreign { .. }) => Err(Problem {
                kind: ProblemKind::QuarantineConflict,
                detail: format!(
                    "{e}; nothing was copied or deleted: move those records elsewhere and delete {target:?} (or its records), then start again"
                ),
            }),
            Err(QuarantineError::Kafka(e)) => Err(unavailable(e)),
        }
    }

    /// Where the records of each partition of `topic` that never reached the other side start
    /// (`PartitionLineage::divergence_point`): after the furthest of this mirror's own writes and
    /// the other direction's copy from here, as the source's state records it; at 0 with no
    /// lineage at all. The same computation as the refusal's (`failback_plan`), so a quarantine
    /// keeps exactly what the refusal said would be lost.
    async fn divergent_starts(&self, topic_id: &str, partitions: i32) -> Result<BTreeMap<i32, i64>, Problem> {
        let (mirror, topic) = (self.mirror.as_str(), self.topic.as_str());
        let remote = self
            .source_state(
                &format!("to find which records of {topic:?} reached it and need no quarantine"),
                "; nothing was copied or deleted",
            )
            .await?;
        // A lineage that does not apply here (another cluster's, a recreated topic, a mirror
        // there still copying from here) explains nothing: only this mirror's own lineage counts,
        // and every record after it is kept, the safe side.
        let found = match crate::engine::failback::find(&remote, topic, &self.destination_cluster_id, Some(topic_id)) {
            Ok(found) => found,
            Err(p) => {
                tracing::info!(%mirror, %topic, "quarantine: the source's lineage does not apply ({}); only this mirror's own lineage counts", p.detail);
                None
            }
        };
        let source_starts = match self.source_starts(partitions).await {
            Ok(starts) => starts,
            Err(p) => {
                return Err(Problem {
                    kind: p.kind,
                    detail: format!(
                        "{}: cannot tell which records of {topic:?} the source still holds; nothing was copied or deleted",
                        p.detail
                    ),
                });
            }
        };
        Ok(self
            .lineage_here(partitions, found.as_ref(), Some(&source_starts))
            .into_iter()
            .map(|(p, lineage)| (p, lineage.divergence_point()))
            .collect())
    }
}
