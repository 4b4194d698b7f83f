//! Starting partitions: a topic's start (checks, the destination topic, a failback's or a
//! restart's plan, quarantine), then PREPARING → MIRRORING: the offsets every start decision
//! reads, the decision itself (`domain::lineage::decide_start`), and the hand-over to the data
//! path.

use crate::domain::lineage::{LogBounds, StartDecision, StartInput, decide_start};
use crate::domain::quarantine::QuarantinedPartition;
use crate::domain::topic_call::TopicCall;

use super::failback::Copies;
use super::*;

impl Coordinator {
    /// Starts (or restarts) `topic`; with `resync` + `quarantine`, what the quarantine copied
    /// per partition.
    pub(super) async fn start_topic(
        &mut self,
        mirror: &str,
        topic: &str,
        truncation: Truncation,
    ) -> Result<Vec<QuarantinedPartition>, Problem> {
        let now_ts = now();
        self.check_not_halted(mirror)?;
        let m = self.mirrors.mirror(mirror)?;
        // Already (being) mirrored: harmless repeat; a topic in a state a start does not apply
        // to is refused with what to do instead (`domain::topic_call`, as the dashboard offers).
        if m.topics.contains_key(topic) {
            let plan = self.plan_call(mirror, topic, TopicCall::Start)?;
            if !plan.changes_anything() {
                return Ok(Vec::new());
            }
        }
        let m = self.mirrors.mirror(mirror)?;
        // One destination topic has one mirror: a resync would delete another mirror's records, a
        // plain start would interleave two mirrors' records.
        if let Some((other, t)) = self
            .mirrors
            .iter()
            .filter(|(name, _)| name.as_str() != mirror)
            .find_map(|(name, o)| Some((name, o.topics.get(topic)?)))
        {
            let state = roll_up(t.partitions.values().map(|p| p.record.state));
            return Err(Problem {
                kind: ProblemKind::DestinationTopicConflict,
                detail: format!(
                    "destination topic {topic:?} belongs to mirror {other:?} (its partitions are {state}); a destination topic belongs to one mirror only: delete mirror {other:?} to release it"
                ),
            });
        }
        // PREPARING checks (DESIGN.md section 3): source cluster ID, topic IDs, destination topic.
        let source = m.source_admin.clone();
        // Both read by the start's survey, off the loop, when there is one.
        let cluster = self.source_cluster(&*source).await.map_err(|e| kafka_problem(Cluster::Source, &e))?;
        if let Some(expected) = &m.stored.spec.expected_source_cluster_id
            && *expected != cluster.cluster_id
        {
            let detail = format!("the source cluster ID is {} but {expected} was expected", cluster.cluster_id);
            self.cluster_id_mismatch(mirror, &cluster.cluster_id, &detail);
            return Err(Problem { kind: ProblemKind::SourceClusterIdMismatch, detail });
        }
        let src = self.source_topic(&*source, topic).await.map_err(|e| {
            if e.is(crate::kafka::KafkaErrorKind::UnknownTopicOrPartition) {
                Problem {
                    kind: ProblemKind::TopicNotFound,
                    detail: format!("topic {topic:?} does not exist on the source cluster"),
                }
            } else {
                kafka_problem(Cluster::Source, &e)
            }
        })?;
        let source_topic_id = src.topic_id.to_string();
        let partitions = src.partitions.len() as i32;
        if partitions > crate::store::MAX_PARTITION_COUNT {
            // Loading skips a topic record above the cap (a hostile count must not drive memory).
            return Err(Problem {
                kind: ProblemKind::IllegalTransition,
                detail: format!(
                    "cannot start topic {topic:?}: it has {partitions} partitions, more than kmirror mirrors per topic ({})",
                    crate::store::MAX_PARTITION_COUNT
                ),
            });
        }
        let existing = m.topics.get(topic).cloned();
        if let Some(t) = &existing
            && t.source_topic_id != source_topic_id
        {
            return Err(Problem {
                kind: ProblemKind::IllegalTransition,
                detail: format!(
                    "source topic {topic:?} was recreated (ID {} is now {source_topic_id}); remove it from the mirror and add it again",
                    t.source_topic_id
                ),
            });
        }
        let dest = Arc::clone(&self.destination_admin);
        let mut failback = None;
        // The destination's ends, when the adoption check below read them already: one
        // ListOffsets less per topic (a start of 100 topics makes these calls one topic at a time).
        let mut ends_read = None;
        let dest_topic = match dest.describe_topic(topic).await {
            Ok(d) => {
                same_partition_count(topic, &d, partitions)?;
                if existing.is_none() && truncation == Truncation::None {
                    // Adopt only an empty topic: anything in it would be mistaken for mirrored data.
                    // With `resync` (failback onto the old primary) its records are deleted first.
                    let req: Vec<_> = (0..partitions).map(|p| (topic.to_string(), p, OffsetSpec::Latest)).collect();
                    let ends = dest
                        .list_offsets(&req, IsolationLevel::ReadUncommitted)
                        .await
                        .map_err(|e| kafka_problem(Cluster::Destination, &e))?;
                    // ...unless its records came from this mirror's source in the first place: a
                    // failback (the source's state has the lineage).
                    if ends.iter().any(|o| o.offset > 0) {
                        let by_partition: BTreeMap<i32, i64> = ends.iter().map(|o| (o.partition, o.offset)).collect();
                        let id = d.topic_id.to_string();
                        failback = self
                            .off_loop_plan(mirror, topic, move |p| async move {
                                p.failback_plan(&id, partitions, &by_partition, None, Copies::Skip).await
                            })
                            .await?;
                    }
                    if failback.is_none()
                        && let Some(o) = ends.iter().find(|o| o.offset > 0)
                    {
                        return Err(Problem {
                            kind: ProblemKind::DestinationTopicConflict,
                            detail: format!(
                                "destination topic {topic:?} already holds records (partition {} ends at offset {}); only an empty topic can become a mirror (start with truncation \"resync\" to delete them and mirror the source)",
                                o.partition, o.offset
                            ),
                        });
                    }
                    ends_read = Some(ends.iter().map(|o| (o.partition, o.offset)).collect::<BTreeMap<i32, i64>>());
                }
                d
            }
            Err(e) if e.is(crate::kafka::KafkaErrorKind::UnknownTopicOrPartition) => {
                let overrides: Vec<(String, String)> = match source.describe_topic_configs(topic).await {
                    Ok(entries) => entries
                        .into_iter()
                        .filter(|e| e.source == crate::kafka::ConfigSource::DynamicTopic)
                        .filter_map(|e| e.value.map(|v| (e.name, v)))
                        .collect(),
                    Err(e) => {
                        tracing::warn!(%mirror, %topic, "cannot read source topic configs ({e}); creating with defaults");
                        Vec::new()
                    }
                };
                let configs = crate::domain::config_sync::creation_configs(&overrides);
                match dest.create_topic(topic, partitions, -1, &configs).await {
                    Ok(()) => {}
                    Err(e) if e.is(crate::kafka::KafkaErrorKind::TopicAlreadyExists) => {}
                    Err(e) => return Err(kafka_problem(Cluster::Destination, &e)),
                }
                let d =
                    until_available(&*dest, topic, partitions, self.config.request_timeout).await.ok_or_else(|| {
                        Problem {
                            kind: ProblemKind::DestinationUnavailable,
                            detail: format!("destination topic {topic:?} was created but did not become available"),
                        }
                    })?;
                // Created meanwhile by someone else with another count (our create found it).
                same_partition_count(topic, &d, partitions)?;
                d
            }
            Err(e) => return Err(kafka_problem(Cluster::Destination, &e)),
        };
        let dest_ends = match ends_read {
            Some(ends) => ends,
            None => offsets_of(&*dest, topic, 0..partitions, OffsetSpec::Latest, IsolationLevel::ReadUncommitted)
                .await
                .map_err(|e| kafka_problem(Cluster::Destination, &e))?,
        };

        // A restart must not silently mirror over local writes (DESIGN.md section 5): refused
        // before anything changes, with the lineage's own count and range (the same words as
        // the refusal `prepare` gives a retry).
        if existing.is_some() && truncation == Truncation::None {
            let (id, ends) = (dest_topic.topic_id.to_string(), dest_ends.clone());
            failback = self
                .off_loop_plan(mirror, topic, move |p| async move {
                    p.restart_plan(&id, partitions, &ends, Copies::Skip).await
                })
                .await?;
        }

        // Resync with quarantine: the records the resync will delete that never reached the other
        // side are copied first. A copy that fails returns here: nothing changed (the topic is
        // still STOPPED, nothing deleted), and a retry copies only what is not there yet. Local
        // producers must be stopped: a record written after this copy and before the deletion
        // would be deleted without a copy (the README's failback runbook says so).
        let quarantined = if truncation == (Truncation::Resync { quarantine: true }) {
            self.off_loop_plan(mirror, topic, |p| async move { p.quarantine_divergent(false).await }).await?
        } else {
            Vec::new()
        };

        // Transition every partition to PREPARING and persist before acting.
        let n = self.state_partitions;
        {
            let m = self.mirrors.mirror_mut(mirror)?;
            let t = m.topics.entry(topic.to_string()).or_insert_with(|| TopicRt {
                source_topic_id: source_topic_id.clone(),
                destination_topic_id: dest_topic.topic_id.to_string(),
                created_at: now_ts,
                missing_refreshes: 0,
                partitions: BTreeMap::new(),
            });
            t.destination_topic_id = dest_topic.topic_id.to_string();
            for p in 0..partitions {
                let slot = slots::slot_of_partition(mirror, &t.source_topic_id, p, n);
                t.partitions.entry(p).or_insert_with(|| PartRt::new(PartitionRecord::new(now_ts), slot));
            }
            m.topic_ids.write().unwrap_or_else(|e| e.into_inner()).insert(topic.to_string(), source_topic_id.clone());
        }
        if let Some(plan) = failback {
            self.adopt_failback(mirror, topic, plan);
        }
        self.queue_topic(mirror, topic);
        let mut planned = Planned::default();
        for p in 0..partitions {
            match self.apply(mirror, topic, p, Event::Start { truncation }) {
                Ok(actions) => planned.push(topic, p, actions),
                Err(e) if e.is_harmless() => {}
                Err(e) => return Err(e.into()),
            }
        }
        planned.with_destination_ends(topic, dest_ends);
        match self.run_actions(mirror, planned).await.remove(topic) {
            Some(problem) => Err(problem),
            None => Ok(quarantined),
        }
    }

    /// Finishes PREPARING for `partitions`: decides start positions, moves them to MIRRORING and
    /// hands them to the data path.
    ///
    /// Each partition's persisted truncation mode decides, on every call (a start, a retry after
    /// FAILED, a PREPARING partition restored after a restart): with `resync` its destination
    /// records are deleted first, again, until the resync completes (entering MIRRORING clears
    /// the mode); a failed deletion leaves it FAILED with nothing written. Without it, the checks
    /// of a start hold here too: a partition never mirrored must find its destination partition
    /// empty, and one restarted from a stop point must find no local writes past it; otherwise it
    /// goes FAILED with `DESTINATION_DIVERGED` instead of mirroring over those records.
    pub(super) async fn prepare(
        &mut self,
        mirror: &str,
        topic: &str,
        partitions: &[i32],
        dest_ends: Option<&BTreeMap<i32, i64>>,
    ) -> Result<(), Problem> {
        // A partition another instance owns is prepared there: it runs the PREPARING record this
        // call wrote (`group`), so the start position is decided once, by the one writer.
        let owned: Vec<i32> = partitions.iter().copied().filter(|p| self.owns_partition(mirror, topic, *p)).collect();
        let partitions = &owned[..];
        if partitions.is_empty() {
            return Ok(());
        }
        let source = self.mirrors.mirror(mirror)?.source_admin.clone();
        let reads = match self.start_reads(source, topic, partitions, dest_ends).await {
            Ok(reads) => reads,
            Err((cluster, e)) => return Err(self.fail_all(mirror, topic, partitions, cluster, &e)),
        };
        let (specs, problem) = self.decide_starts(mirror, topic, partitions, reads).await;
        if specs.is_empty() {
            return Err(problem.unwrap_or_else(nothing_to_prepare));
        }
        if let Err(e) = self.flush().await {
            let parts: Vec<(String, i32)> = specs.iter().map(|s| (s.topic.clone(), s.partition)).collect();
            return Err(self.unrecorded(mirror, &parts, &e).await);
        }
        self.assign(mirror, specs);
        problem.map_or(Ok(()), Err)
    }

    /// [`Self::prepare`] for the PREPARING partitions of many topics at once (a takeover or a
    /// restart restoring a large start, retries): the offsets every decision needs are read in
    /// one request per kind instead of three per topic, the records go in one state transaction
    /// and the data path gets one `Assign`. On a busy destination each of those per topic took
    /// 1–3 s, so a takeover in the middle of a 100-topic start spent a minute here. A read that
    /// fails (one topic deleted or unavailable fails a whole ListOffsets) falls back to one
    /// topic at a time, so only that topic's partitions go FAILED. Returns the problem per topic.
    pub(super) async fn prepare_topics(
        &mut self,
        mirror: &str,
        topics: BTreeMap<String, Vec<i32>>,
    ) -> BTreeMap<String, Problem> {
        let mut failed = BTreeMap::new();
        let topics: BTreeMap<String, Vec<i32>> = topics
            .into_iter()
            .map(|(t, ps)| {
                let owned = ps.into_iter().filter(|p| self.owns_partition(mirror, &t, *p)).collect::<Vec<_>>();
                (t, owned)
            })
            .filter(|(_, ps)| !ps.is_empty())
            .collect();
        let source = match self.mirrors.mirror(mirror) {
            Ok(m) => m.source_admin.clone(),
            Err(missing) => return topics.into_keys().map(|t| (t, Problem::from(missing.clone()))).collect(),
        };
        let joint = if topics.len() > 1 { self.start_reads_of(mirror, source, &topics).await } else { Err(None) };
        let mut reads = match joint {
            Ok(reads) => reads,
            // A cluster that did not answer at all would not answer for each topic either: one
            // wait, not one per topic (a takeover while the source is down held the engine for
            // a request timeout per topic).
            Err(Some((cluster, e))) => {
                for (topic, parts) in &topics {
                    failed.insert(topic.clone(), self.fail_all(mirror, topic, parts, cluster, &e));
                }
                return failed;
            }
            Err(None) => {
                for (topic, parts) in topics {
                    if let Err(p) = self.prepare(mirror, &topic, &parts, None).await {
                        failed.insert(topic, p);
                    }
                }
                return failed;
            }
        };
        let mut all_specs = Vec::new();
        for (topic, parts) in &topics {
            let of_topic = reads.remove(topic).unwrap_or_default();
            let (specs, problem) = self.decide_starts(mirror, topic, parts, of_topic).await;
            if specs.is_empty() {
                failed.insert(topic.clone(), problem.unwrap_or_else(nothing_to_prepare));
                continue;
            }
            if let Some(p) = problem {
                failed.insert(topic.clone(), p);
            }
            all_specs.extend(specs);
        }
        if all_specs.is_empty() {
            return failed;
        }
        if let Err(e) = self.flush().await {
            let parts: Vec<(String, i32)> = all_specs.iter().map(|s| (s.topic.clone(), s.partition)).collect();
            let problem = self.unrecorded(mirror, &parts, &e).await;
            for topic in topics.keys() {
                failed.entry(topic.clone()).or_insert_with(|| problem.clone());
            }
            return failed;
        }
        self.assign(mirror, all_specs);
        failed
    }

    /// The inputs of one topic's start decisions: the destination's end and log start (records
    /// below it are in nobody's way) and the source's log start (where a first start or a resync
    /// begins). Which cluster did not answer, if one did not.
    pub(super) async fn start_reads(
        &self,
        source: Admin,
        topic: &str,
        partitions: &[i32],
        dest_ends: Option<&BTreeMap<i32, i64>>,
    ) -> Result<StartReads, (Cluster, KafkaError)> {
        let dest = self.destination_admin.clone();
        let parts = partitions.iter().copied();
        let uncommitted = IsolationLevel::ReadUncommitted;
        let unavailable = |e| (Cluster::Destination, e);
        let dest_ends = match dest_ends {
            Some(e) => e.clone(),
            None => {
                offsets_of(&*dest, topic, parts.clone(), OffsetSpec::Latest, uncommitted).await.map_err(unavailable)?
            }
        };
        let dest_starts =
            offsets_of(&*dest, topic, parts.clone(), OffsetSpec::Earliest, uncommitted).await.map_err(unavailable)?;
        let source_starts = offsets_of(&*source, topic, parts, OffsetSpec::Earliest, IsolationLevel::ReadCommitted)
            .await
            .map_err(|e| (Cluster::Source, e))?;
        Ok(StartReads { dest_ends, dest_starts, source_starts })
    }

    /// [`Self::start_reads`] for many topics, one request per kind. On failure: the cluster that
    /// did not answer within the request timeout, if one did not; otherwise `None` (a partition
    /// error of some topic: the caller reads topic by topic, so it is pinned on its topic).
    pub(super) async fn start_reads_of(
        &self,
        mirror: &str,
        source: Admin,
        topics: &BTreeMap<String, Vec<i32>>,
    ) -> Result<BTreeMap<String, StartReads>, Option<(Cluster, KafkaError)>> {
        let dest = Arc::clone(&self.destination_admin);
        let request = |spec: OffsetSpec| -> Vec<(String, i32, OffsetSpec)> {
            topics.iter().flat_map(|(t, ps)| ps.iter().map(move |p| (t.clone(), *p, spec))).collect()
        };
        let uncommitted = IsolationLevel::ReadUncommitted;
        let (latest, earliest) = (request(OffsetSpec::Latest), request(OffsetSpec::Earliest));
        let (ends, dest_starts, source_starts) = tokio::join!(
            dest.list_offsets(&latest, uncommitted),
            dest.list_offsets(&earliest, uncommitted),
            source.list_offsets(&earliest, IsolationLevel::ReadCommitted),
        );
        let (ends, dest_starts, source_starts) = match (ends, dest_starts, source_starts) {
            (Ok(a), Ok(b), Ok(c)) => (a, b, c),
            (a, b, c) => {
                let dest = [a.err(), b.err()].into_iter().flatten().next();
                let source = c.err();
                if let Some(e) = dest.as_ref().filter(|e| e.is_no_answer()) {
                    return Err(Some((Cluster::Destination, e.clone())));
                }
                if let Some(e) = source.as_ref().filter(|e| e.is_no_answer()) {
                    return Err(Some((Cluster::Source, e.clone())));
                }
                let e = dest.or(source);
                tracing::info!(%mirror, topics = topics.len(), "start offsets in one request: {}; reading them topic by topic", e.map(|e| e.to_string()).unwrap_or_default());
                return Err(None);
            }
        };
        let mut out: BTreeMap<String, StartReads> = BTreeMap::new();
        for o in ends {
            out.entry(o.topic).or_default().dest_ends.insert(o.partition, o.offset);
        }
        for o in dest_starts {
            out.entry(o.topic).or_default().dest_starts.insert(o.partition, o.offset);
        }
        for o in source_starts {
            out.entry(o.topic).or_default().source_starts.insert(o.partition, o.offset);
        }
        Ok(out)
    }

    /// ComputeStartPosition for `partitions` of `topic` from `reads`: the lineage decides
    /// (domain::lineage::decide_start), here and in the dashboard's preview alike. A partition
    /// that may start is moved to MIRRORING (queued, not yet persisted) and its spec returned;
    /// the others go FAILED, and the problem says why.
    pub(super) async fn decide_starts(
        &mut self,
        mirror: &str,
        topic: &str,
        partitions: &[i32],
        reads: StartReads,
    ) -> (Vec<AssignSpec>, Option<Problem>) {
        let StartReads { dest_ends: mut ends, dest_starts, source_starts } = reads;
        let mut problem = None;
        let mut go: Vec<(i32, MirrorPosition)> = Vec::with_capacity(partitions.len());
        let mut resync: Vec<(i32, MirrorPosition)> = Vec::new();
        let mut diverged = Vec::new();
        for &p in partitions {
            let record = match self.mirrors.partition(mirror, topic, p) {
                Ok(rt) => &rt.record,
                Err(missing) => {
                    problem = Some(Problem::from(missing));
                    continue;
                }
            };
            let hwm = ends.remove(&p).unwrap_or(0);
            let input = StartInput {
                position: record.position,
                stop: record.stop_point,
                truncation: record.truncation,
                destination: LogBounds::observed(dest_starts.get(&p).copied(), hwm),
                source_log_start_offset: source_starts.get(&p).copied().unwrap_or(0),
            };
            match decide_start(&input) {
                Ok(d @ StartDecision::Incremental { .. }) => go.extend(d.start_position().map(|s| (p, s))),
                Ok(d @ StartDecision::Resync { .. }) => resync.extend(d.start_position().map(|s| (p, s))),
                Ok(StartDecision::Refuse(why)) => diverged.push((p, format!("partition {p}: {why}"))),
                Err(e) => {
                    tracing::warn!(%mirror, %topic, partition = p, "inconsistent lineage: {e}");
                    self.fail(mirror, topic, p, ErrorCode::Internal, format!("inconsistent lineage: {e}"));
                    problem = Some(Problem { kind: ProblemKind::Internal, detail: format!("partition {p}: {e}") });
                }
            }
        }
        if !diverged.is_empty() {
            for (p, why) in &diverged {
                self.fail(mirror, topic, *p, ErrorCode::DestinationDiverged, why.clone());
            }
            let list: Vec<&str> = diverged.iter().map(|(_, why)| why.as_str()).collect();
            problem = Some(Problem {
                kind: ProblemKind::DestinationDiverged,
                detail: format!("DESTINATION_DIVERGED: topic {topic:?}: {}", list.join("; ")),
            });
        }
        if !resync.is_empty() {
            let dels: Vec<(i32, i64)> = resync.iter().map(|(p, _)| (*p, -1)).collect();
            if let Err(e) = self.destination_admin.delete_records(topic, &dels).await {
                let detail = format!(
                    "resync of {topic:?}: cannot delete the destination's records ({e}); nothing was mirrored, and the retry deletes them again first"
                );
                for (p, _) in &resync {
                    self.fail(mirror, topic, *p, ErrorCode::DestinationUnavailable, detail.clone());
                }
                problem = Some(Problem { kind: ProblemKind::DestinationUnavailable, detail });
            } else if let Ok(m) = self.mirrors.mirror(mirror) {
                // DeleteRecords keeps the high watermark; the end offsets above stay valid. The old
                // runs point at deleted records: the next batch starts a new lineage. Their state
                // records go too, or a restart before that batch commits would load the old lineage
                // and reject the new one (it starts over at the source's log start).
                let topic_id = m.topic_ids.read().unwrap_or_else(|e| e.into_inner()).get(topic).cloned();
                let mut lineage = m.new_lineage.write().unwrap_or_else(|e| e.into_inner());
                let mut maps = self.offset_maps.write().unwrap_or_else(|e| e.into_inner());
                for (p, _) in &resync {
                    lineage.insert((topic.to_string(), *p));
                    let old = maps.remove(&(mirror.to_string(), topic.to_string(), *p));
                    if let (Some(old), Some(topic_id)) = (old, &topic_id) {
                        self.writes.extend(old.stretch_starts().map(|first| {
                            persist::offset_runs_tombstone(mirror, topic_id, *p, first, self.state_partitions)
                        }));
                    }
                }
                go.extend(resync);
            }
        }
        let mut specs = Vec::new();
        for (p, start) in go {
            match self.apply(mirror, topic, p, Event::Prepared { start }) {
                Ok(actions) => {
                    if let Some(from) = actions.iter().find_map(|a| match a {
                        crate::domain::Action::Assign { from } => Some(*from),
                        _ => None,
                    }) {
                        // The decision's destination end is the high watermark read above.
                        specs.push(assign_spec(topic, p, from, start.destination_end_offset));
                    }
                }
                Err(e) if e.is_harmless() => {}
                Err(e) => {
                    tracing::warn!(%mirror, %topic, partition = p, "prepare rejected: {e}");
                    self.fail(mirror, topic, p, ErrorCode::Internal, e.to_string());
                }
            }
        }
        (specs, problem)
    }

    /// Transitions of `parts` that could not be recorded (the state topic did not take them):
    /// the partitions go FAILED, retried with backoff like any failed action, instead of staying
    /// in what was applied in memory only, a state nothing moves them out of (MIRRORING with no
    /// data path holding them, PREPARING with nobody to prepare them; a second start finds them
    /// PREPARING already and does nothing). The FAILED records are written if the state topic
    /// takes them; the retry records its transitions anew either way. A partition another
    /// instance owns is not this instance's to fail or retry (its retries run on the owner, who
    /// never heard of the command): it shows the record the state topic holds again, as if the
    /// command had not been sent (the call's error says it was not).
    pub(super) async fn unrecorded(&mut self, mirror: &str, parts: &[(String, i32)], e: &EngineError) -> Problem {
        let message = format!("the transition could not be recorded: {e}");
        for (topic, p) in parts {
            if self.owns_partition(mirror, topic, *p) {
                self.fail(mirror, topic, *p, ErrorCode::StateStoreUnavailable, message.clone());
            } else {
                // UNKNOWN if the state topic has nothing of it (a new partition of this start).
                self.show_stored(mirror, topic, *p);
            }
        }
        let _ = self.flush().await;
        Problem { kind: e.kind(), detail: e.to_string() }
    }

    /// Fails `partitions` of `topic` because a cluster did not answer (retryable) and says so.
    pub(super) fn fail_all(
        &mut self,
        mirror: &str,
        topic: &str,
        partitions: &[i32],
        cluster: Cluster,
        e: &KafkaError,
    ) -> Problem {
        for p in partitions {
            self.fail(mirror, topic, *p, cluster.error_code(), e.to_string());
        }
        kafka_problem(cluster, e)
    }
}

/// A destination topic to mirror into has the source's `partitions`, or the start is refused.
fn same_partition_count(topic: &str, d: &crate::kafka::TopicDescription, partitions: i32) -> Result<(), Problem> {
    if d.partitions.len() as i32 == partitions {
        return Ok(());
    }
    Err(Problem {
        kind: ProblemKind::DestinationTopicConflict,
        detail: format!(
            "destination topic {topic:?} has {} partitions, the source has {partitions}",
            d.partitions.len()
        ),
    })
}

/// `topic` once it has at least `partitions` partitions, each with a leader: asked every 100 ms
/// until `wait` has passed (`None` then). A destination busy creating many partitions at once
/// (10,000 new ones on one broker) takes well over 10 s to give them all leaders, so the wait is
/// the request timeout, as for any other call to the cluster.
pub(super) async fn until_available(
    admin: &dyn ClusterAdmin,
    topic: &str,
    partitions: i32,
    wait: Duration,
) -> Option<crate::kafka::TopicDescription> {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        if let Ok(d) = admin.describe_topic(topic).await
            && d.partitions.len() as i32 >= partitions
            && d.partitions.iter().all(|p| p.leader.is_some())
        {
            return Some(d);
        }
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// One offset per partition of `topic` (`spec` for each), in one request.
pub(super) async fn offsets_of(
    admin: &dyn ClusterAdmin,
    topic: &str,
    partitions: impl Iterator<Item = i32>,
    spec: OffsetSpec,
    isolation: IsolationLevel,
) -> Result<BTreeMap<i32, i64>, KafkaError> {
    let req: Vec<_> = partitions.map(|p| (topic.to_string(), p, spec)).collect();
    Ok(admin.list_offsets(&req, isolation).await?.into_iter().map(|o| (o.partition, o.offset)).collect())
}

/// The offsets one topic's start decisions read ([`Coordinator::start_reads`]), by partition.
#[derive(Debug, Default)]
pub(super) struct StartReads {
    dest_ends: BTreeMap<i32, i64>,
    dest_starts: BTreeMap<i32, i64>,
    source_starts: BTreeMap<i32, i64>,
}

pub(super) fn nothing_to_prepare() -> Problem {
    Problem { kind: ProblemKind::Internal, detail: "nothing to prepare".into() }
}
