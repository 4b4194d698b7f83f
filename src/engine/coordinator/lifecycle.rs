//! Lifecycle calls: start (with its prepare), pause, resume and stop, each checked against the
//! state machine, persisted, then carried out on the data path.

use crate::domain::lineage::{FailbackPreview, LogBounds, StartDecision, StartInput, decide_start};
use crate::domain::quarantine::QuarantinedPartition;
use crate::domain::topic_call::{self, PartitionFacts, TopicCall, TopicPlan};

use super::*;

/// A start with `resync` + `quarantine`.
const QUARANTINE: LifecycleOp = LifecycleOp::Start { truncation: Truncation::Resync { quarantine: true } };

impl Coordinator {
    // ----- lifecycle ---------------------------------------------------------------------

    pub(super) async fn lifecycle(
        &mut self,
        mirror: &str,
        selector: TopicSelector,
        op: LifecycleOp,
        validate_only: bool,
        actor: &Actor,
        origin: CallOrigin,
    ) -> Result<OpResult, EngineError> {
        if !validate_only {
            self.check_writable()?;
        }
        if !self.mirrors.contains_key(mirror) {
            return Err(not_found(mirror));
        }
        let topics = self.resolve(mirror, &selector, op).await?;
        let policy = {
            let spec = &self.mirrors[mirror].stored.spec;
            crate::domain::topic_policy::TopicPolicy::lenient(&spec.topic_include, &spec.topic_exclude)
        };
        let operation_id = self.next_operation_id();
        let requested_at = now();
        let mut results = Vec::with_capacity(topics.len());
        let mut quarantined = BTreeMap::new();
        let mut failback = BTreeMap::new();
        let mut notes = BTreeMap::new();
        // Pause, resume and stop run as one batch: one commit (pause), one abort and one fence
        // (stop), one assign (resume) for the data path, not one per topic (a failover of 1,000
        // partitions in 10 topics took 8 s the other way).
        let mut batched = match op {
            _ if validate_only => None,
            LifecycleOp::Stop => Some(self.stop_topics(mirror, &topics).await.into_iter()),
            LifecycleOp::Pause => Some(self.pause_topics(mirror, &topics).await.into_iter()),
            LifecycleOp::Resume => Some(self.resume_topics(mirror, &topics).await.into_iter()),
            LifecycleOp::Recover => Some(self.recover_topics(mirror, &topics).await.into_iter()),
            LifecycleOp::Start { .. } => None,
        };
        for topic in topics {
            // A slot change, stop or pause that arrived meanwhile goes first. Between two topics
            // none is half-done, so it sees consistent state (as if it had come before the next
            // topic).
            self.serve_between_topics().await;
            if !self.mirrors.contains_key(mirror) {
                // Deleted by another instance meanwhile (read by the state tail).
                let e = not_found(mirror);
                results.push(TopicOutcome {
                    topic,
                    ok: false,
                    error: Some(Problem { kind: e.kind(), detail: e.to_string() }),
                });
                continue;
            }
            let outcome = if let Some(done) = batched.as_mut().and_then(Iterator::next) {
                done.map(|note| {
                    if let Some(note) = note {
                        notes.insert(topic.clone(), note);
                    }
                    Vec::new()
                })
            } else {
                // Internal topics are never started, whether named or matched by a pattern.
                let checked = validate_topic_name(&topic).and_then(|()| match op {
                    LifecycleOp::Start { .. } => check_not_internal(&topic, &self.config.state_topic)
                        .and_then(|()| check_not_excluded(&topic, &policy)),
                    _ => Ok(()),
                });
                match checked {
                    Err(e) => Err(Problem { kind: e.kind(), detail: e.to_string() }),
                    Ok(()) if validate_only => match self.validate(mirror, &topic, op).await {
                        // The preview of a quarantine is the copy's own count, without copying.
                        Ok(_) if op == QUARANTINE => {
                            self.off_loop_plan(mirror, &topic, |p| async move { p.quarantine_divergent(true).await })
                                .await
                        }
                        Ok(preview) => {
                            if let Some(preview) = preview {
                                failback.insert(topic.clone(), preview);
                            }
                            Ok(Vec::new())
                        }
                        Err(e) => Err(e),
                    },
                    Ok(()) => match op {
                        LifecycleOp::Start { truncation } => self.start_topic(mirror, &topic, truncation).await,
                        // These ran as one batch above; this arm is never taken.
                        LifecycleOp::Pause | LifecycleOp::Resume | LifecycleOp::Stop | LifecycleOp::Recover => {
                            Err(Problem { kind: ProblemKind::Internal, detail: "batch outcome missing".into() })
                        }
                    },
                }
            };
            // Whatever happened, persist what changed before answering.
            if let Err(e) = self.flush().await {
                results.push(TopicOutcome {
                    topic,
                    ok: false,
                    error: Some(Problem { kind: e.kind(), detail: e.to_string() }),
                });
                continue;
            }
            results.push(match outcome {
                Ok(q) => {
                    if op == QUARANTINE {
                        quarantined.insert(topic.clone(), q);
                    }
                    TopicOutcome { topic, ok: true, error: None }
                }
                Err(p) => TopicOutcome { topic, ok: false, error: Some(p) },
            });
        }
        // The topic policy keeps what the call asked for: a start's pattern is followed from now
        // on (discovery starts the topics created later that match it), a stop with `exclude`
        // is never started again.
        let saved_pattern = match (origin, op, &selector) {
            _ if validate_only => None,
            (CallOrigin::Single { .. }, LifecycleOp::Start { .. }, TopicSelector::Pattern(p)) => {
                self.save_pattern(mirror, "topic_include", vec![p.clone()]).await
            }
            (CallOrigin::Single { exclude: true }, LifecycleOp::Stop, TopicSelector::Pattern(p)) => {
                self.save_pattern(mirror, "topic_exclude", vec![p.clone()]).await
            }
            (CallOrigin::Single { exclude: true }, LifecycleOp::Stop, TopicSelector::Names(names)) => {
                let literal = names.iter().map(|n| regex::escape(n)).collect();
                self.save_pattern(mirror, "topic_exclude", literal).await
            }
            _ => None,
        };
        if !validate_only && origin != CallOrigin::DiscoveryBatch {
            self.record_operation(&operation_id, mirror, op.kind(), actor, requested_at, results.clone()).await;
        }
        Ok(OpResult { operation_id, results, quarantined, failback, saved_pattern, notes, behind: BTreeMap::new() })
    }

    /// Adds `patterns` to the mirror's `list` (`topic_include` or `topic_exclude`) and stores
    /// the definition; what was added (the patterns joined by `|` when several), `None` when all
    /// were there already or the write failed (logged: the call itself was carried out).
    async fn save_pattern(&mut self, mirror: &str, list: &str, patterns: Vec<String>) -> Option<SavedPattern> {
        let m = self.mirrors.get(mirror)?;
        let mut stored = m.stored.clone();
        let target =
            if list == "topic_include" { &mut stored.spec.topic_include } else { &mut stored.spec.topic_exclude };
        let added: Vec<String> =
            patterns.into_iter().filter(|p| crate::domain::topic_policy::append(target, p)).collect();
        if added.is_empty() {
            return None;
        }
        if let Err(e) = check_topic_policy(&stored.spec.topic_include, &stored.spec.topic_exclude) {
            tracing::warn!(%mirror, "cannot save the call's pattern in {list}: {e}");
            return None;
        }
        stored.updated_at = now();
        self.pending_writes.push(persist::mirror(&stored, self.state_partitions, &self.config.sealer));
        if let Err(e) = self.flush().await {
            tracing::warn!(%mirror, "cannot save the call's pattern in {list}: {e}");
            return None;
        }
        if let Some(m) = self.mirrors.get_mut(mirror) {
            m.stored = stored;
        }
        tracing::info!(%mirror, "saved {} in {list}", added.join(", "));
        Some(SavedPattern { list: list.to_string(), pattern: added.join("|") })
    }

    pub(super) async fn resolve(
        &self,
        mirror: &str,
        selector: &TopicSelector,
        op: LifecycleOp,
    ) -> Result<Vec<String>, EngineError> {
        let m = &self.mirrors[mirror];
        match selector {
            TopicSelector::Names(names) => {
                if names.is_empty() {
                    return Err(EngineError::rejected(ProblemKind::InvalidName, "no topics given"));
                }
                check_topic_count(names.len())?;
                let mut seen = BTreeSet::new();
                Ok(names.iter().filter(|n| seen.insert(n.as_str())).cloned().collect())
            }
            TopicSelector::Pattern(p) => {
                let re = crate::domain::name_pattern::NamePattern::new(p)
                    .map_err(|e| EngineError::rejected(ProblemKind::InvalidPattern, e.to_string()))?;
                let mut names: BTreeSet<String> = m.topics.keys().filter(|t| re.is_match(t)).cloned().collect();
                if matches!(op, LifecycleOp::Start { .. }) {
                    let listed = self.source_listing(&*m.source_admin).await.map_err(|e| {
                        EngineError::rejected(Cluster::Source.problem_kind(), format!("cannot list source topics: {e}"))
                    })?;
                    let state_topic = &self.config.state_topic;
                    // A pattern never selects what the mirror's topic policy excludes (a name
                    // given on its own is refused with the reason instead).
                    let policy = crate::domain::topic_policy::TopicPolicy::lenient(
                        &m.stored.spec.topic_include,
                        &m.stored.spec.topic_exclude,
                    );
                    names.extend(listed.into_iter().filter(|t| {
                        re.is_match(t) && !is_internal_topic(t, state_topic) && policy.excluded_by(t).is_none()
                    }));
                }
                // Not capped: a pattern selects what it matches (`MAX_TOPICS_PER_CALL`).
                Ok(names.into_iter().collect())
            }
            TopicSelector::All if matches!(op, LifecycleOp::Start { .. }) => Err(EngineError::rejected(
                ProblemKind::InvalidName,
                "a start names its topics or gives a pattern (every topic of the source: \".*\")",
            )),
            // Every topic of the mirror, however many.
            TopicSelector::All => Ok(m.topics.keys().cloned().collect()),
        }
    }

    /// `validate_only`: would the operation be accepted for this topic?
    /// A failback start also answers what it will copy.
    pub(super) async fn validate(
        &mut self,
        mirror: &str,
        topic: &str,
        op: LifecycleOp,
    ) -> Result<Option<FailbackPreview>, Problem> {
        let m = &self.mirrors[mirror];
        match m.topics.get(topic) {
            None if matches!(op, LifecycleOp::Start { .. }) => {
                match self.source_topic(&*m.source_admin.clone(), topic).await {
                    // A destination topic with records: adopted only by a failback (its preview is
                    // the same decision the start makes, DESTINATION_DIVERGED with the counts).
                    Ok(src) if op == LifecycleOp::Start { truncation: Truncation::None } => {
                        let n = src.partitions.len() as i32;
                        self.off_loop_plan(mirror, topic, move |p| async move { p.validate_adoption(n).await }).await
                    }
                    Ok(_) => Ok(None),
                    Err(e) if e.is(crate::kafka::KafkaErrorKind::UnknownTopicOrPartition) => Err(Problem {
                        kind: ProblemKind::TopicNotFound,
                        detail: format!("topic {topic:?} does not exist on the source cluster"),
                    }),
                    Err(e) => Err(kafka_problem(Cluster::Source, &e)),
                }
            }
            None => Err(not_in_mirror(mirror, topic)),
            Some(_) => {
                if op == LifecycleOp::Recover {
                    self.check_not_halted(mirror)?;
                }
                self.plan_call(mirror, topic, op.call())?;
                if op == (LifecycleOp::Start { truncation: Truncation::None }) {
                    // The restart's own check: refused over records that never crossed, or the
                    // failback plan of a round trip (what it will copy).
                    return self.off_loop_plan(mirror, topic, |p| async move { p.validate_restart().await }).await;
                }
                Ok(None)
            }
        }
    }

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
        let m = &self.mirrors[mirror];
        // Already (being) mirrored: harmless repeat; a topic in a state a start does not apply
        // to is refused with what to do instead (`domain::topic_call`, as the dashboard offers).
        if m.topics.contains_key(topic) {
            let plan = self.plan_call(mirror, topic, TopicCall::Start)?;
            if !plan.changes_anything() {
                return Ok(Vec::new());
            }
        }
        let m = &self.mirrors[mirror];
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
                if d.partitions.len() as i32 != partitions {
                    return Err(Problem {
                        kind: ProblemKind::DestinationTopicConflict,
                        detail: format!(
                            "destination topic {topic:?} has {} partitions, the source has {partitions}",
                            d.partitions.len()
                        ),
                    });
                }
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
                                p.failback_plan(&id, partitions, &by_partition, None).await
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
                let mut found = None;
                for _ in 0..100 {
                    if let Ok(d) = dest.describe_topic(topic).await
                        && d.partitions.len() as i32 == partitions
                        && d.partitions.iter().all(|p| p.leader.is_some())
                    {
                        found = Some(d);
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                found.ok_or_else(|| Problem {
                    kind: ProblemKind::DestinationUnavailable,
                    detail: format!("destination topic {topic:?} was created but did not become available"),
                })?
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
                .off_loop_plan(mirror, topic, move |p| async move { p.restart_plan(&id, partitions, &ends).await })
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
            let m = self.mirrors.get_mut(mirror).expect("known");
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
        let mut preparing = Vec::new();
        for p in 0..partitions {
            match self.apply(mirror, topic, p, Event::Start { truncation }) {
                Ok(_) => preparing.push(p),
                Err(e) if e.is_harmless() => {}
                Err(e) => return Err(Problem { kind: ProblemKind::IllegalTransition, detail: e.to_string() }),
            }
        }
        if let Err(e) = self.flush().await {
            let parts: Vec<(String, i32)> = preparing.iter().map(|p| (topic.to_string(), *p)).collect();
            return Err(self.unrecorded(mirror, &parts, &e).await);
        }
        self.prepare(mirror, topic, &preparing, Some(&dest_ends)).await.map(|()| quarantined)
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
        let reads = match self.start_reads(mirror, topic, partitions, dest_ends).await {
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
        let joint = if topics.len() > 1 { self.start_reads_of(mirror, &topics).await } else { Err(None) };
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
    async fn start_reads(
        &self,
        mirror: &str,
        topic: &str,
        partitions: &[i32],
        dest_ends: Option<&BTreeMap<i32, i64>>,
    ) -> Result<StartReads, (Cluster, KafkaError)> {
        let source = self.mirrors[mirror].source_admin.clone();
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
    async fn start_reads_of(
        &self,
        mirror: &str,
        topics: &BTreeMap<String, Vec<i32>>,
    ) -> Result<BTreeMap<String, StartReads>, Option<(Cluster, KafkaError)>> {
        let source = self.mirrors[mirror].source_admin.clone();
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
    async fn decide_starts(
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
            let record = &self.mirrors[mirror].topics[topic].partitions[&p].record;
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
            } else {
                // DeleteRecords keeps the high watermark; the end offsets above stay valid. The old
                // runs point at deleted records: the next batch starts a new lineage. Their state
                // records go too, or a restart before that batch commits would load the old lineage
                // and reject the new one (it starts over at the source's log start).
                let m = &self.mirrors[mirror];
                let topic_id = m.topic_ids.read().unwrap_or_else(|e| e.into_inner()).get(topic).cloned();
                let mut lineage = m.new_lineage.write().unwrap_or_else(|e| e.into_inner());
                let mut maps = self.offset_maps.write().unwrap_or_else(|e| e.into_inner());
                for (p, _) in &resync {
                    lineage.insert((topic.to_string(), *p));
                    let old = maps.remove(&(mirror.to_string(), topic.to_string(), *p));
                    if let (Some(old), Some(topic_id)) = (old, &topic_id) {
                        self.pending_writes.extend(old.stretch_starts().map(|first| {
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
    fn fail_all(&mut self, mirror: &str, topic: &str, partitions: &[i32], cluster: Cluster, e: &KafkaError) -> Problem {
        for p in partitions {
            self.fail(mirror, topic, *p, cluster.error_code(), e.to_string());
        }
        kafka_problem(cluster, e)
    }

    /// Applies a final position reported by the pipe, when it is ahead of the record's.
    pub(super) fn apply_final(&mut self, mirror: &str, topic: &str, f: &pipe::FinalPosition) {
        let Some(next) = f.next_source_offset else { return };
        let rt = &self.mirrors[mirror].topics[topic].partitions[&f.partition];
        let epoch = f.source_leader_epoch.unwrap_or(-1).max(rt.record.position.map_or(-1, |p| p.source_leader_epoch));
        let pos = MirrorPosition {
            next_source_offset: next,
            source_leader_epoch: epoch,
            destination_end_offset: f.destination_end_offset,
        };
        if rt.record.position.is_none_or(|cur| cur != pos && !pos.is_behind(&cur)) {
            let _ = self.apply(mirror, topic, f.partition, Event::Progress { position: pos });
        }
    }

    /// The destination's end offsets of partitions of any topics, in one request.
    pub(super) async fn destination_ends_of(
        &self,
        keys: &[(String, i32)],
    ) -> Result<HashMap<(String, i32), i64>, KafkaError> {
        let req: Vec<_> = keys.iter().map(|(t, p)| (t.clone(), *p, OffsetSpec::Latest)).collect();
        let ends = self.destination_admin.list_offsets(&req, IsolationLevel::ReadUncommitted).await?;
        Ok(ends.into_iter().map(|o| ((o.topic, o.partition), o.offset)).collect())
    }

    /// What lifecycle calls need to know of `topic`'s partitions (`domain::topic_call`).
    fn topic_facts(&self, mirror: &str, topic: &str) -> Result<Vec<PartitionFacts>, Problem> {
        let t = self.mirrors[mirror].topics.get(topic).ok_or_else(|| not_in_mirror(mirror, topic))?;
        Ok(t.partitions
            .iter()
            .map(|(p, rt)| PartitionFacts {
                partition: *p,
                state: rt.record.state,
                failed_in: rt.record.failed_in(),
                resync: rt.record.truncation.is_resync(),
                foreign_write: crate::domain::recover_refusal(&rt.record).is_some(),
            })
            .collect())
    }

    /// What `call` does to `topic` (`domain::topic_call`, the one rule the dashboard's buttons
    /// follow too), or why the topic is refused.
    pub(super) fn plan_call(&self, mirror: &str, topic: &str, call: TopicCall) -> Result<TopicPlan, Problem> {
        let facts = self.topic_facts(mirror, topic)?;
        topic_call::plan(call, &facts)
            .map_err(|r| Problem { kind: ProblemKind::IllegalTransition, detail: r.message(call, topic) })
    }

    /// Checks a batch call's topics ([`Self::plan_call`]) and applies `event` to the partitions
    /// each plan moves or redirects. Returns the per-topic outcome so far (with the plan's note)
    /// and the planned actions.
    fn plan_batch(
        &mut self,
        mirror: &str,
        topics: &[String],
        call: TopicCall,
        event: impl Fn() -> Event,
    ) -> (Vec<Result<Option<String>, Problem>>, Planned) {
        let mut planned = Planned::default();
        let outcomes = topics
            .iter()
            .map(|t| {
                validate_topic_name(t)
                    .map_err(|e| Problem { kind: ProblemKind::InvalidName, detail: e.to_string() })?;
                let plan = self.plan_call(mirror, t, call)?;
                for &p in plan.moves.iter().chain(&plan.redirects) {
                    match self.apply(mirror, t, p, event()) {
                        Ok(actions) => planned.push(t, p, actions),
                        // A stop that did not finish left the partition STOPPING: run its
                        // sequence again (a stop is always worth finishing).
                        Err(TransitionError::AlreadyInState { state: PartitionState::Stopping, .. })
                            if call == TopicCall::Stop =>
                        {
                            planned.push(t, p, crate::domain::stopping_actions())
                        }
                        Err(e) if e.is_harmless() => {}
                        Err(e) => return Err(Problem { kind: ProblemKind::IllegalTransition, detail: e.to_string() }),
                    }
                }
                Ok(plan.note(call))
            })
            .collect();
        (outcomes, planned)
    }

    /// Runs a batch's planned actions and folds their failures into the per-topic outcomes.
    async fn finish_batch(
        &mut self,
        mirror: &str,
        topics: &[String],
        mut outcomes: Vec<Result<Option<String>, Problem>>,
        planned: Planned,
        verb: &str,
    ) -> Vec<Result<Option<String>, Problem>> {
        if planned.is_empty() {
            return outcomes;
        }
        let failed = self.run_actions(mirror, planned).await;
        for (t, o) in topics.iter().zip(outcomes.iter_mut()) {
            if o.is_ok()
                && let Some(p) = failed.get(t)
            {
                *o = Err(Problem {
                    kind: p.kind,
                    detail: format!(
                        "{verb}: {}; the partitions are FAILED (a retryable failure is retried automatically while retries are left; topics:recover retries at once)",
                        p.detail
                    ),
                });
            }
        }
        outcomes
    }

    /// Pauses several topics of a mirror in one step: every MIRRORING partition goes PAUSING
    /// (persisted once), the data path commits once and lets them go, then PAUSED. A FAILED
    /// partition stays FAILED and pauses when it is retried (`domain::topic_call`).
    pub(super) async fn pause_topics(
        &mut self,
        mirror: &str,
        topics: &[String],
    ) -> Vec<Result<Option<String>, Problem>> {
        let (outcomes, planned) = self.plan_batch(mirror, topics, TopicCall::Pause, || Event::Pause);
        self.finish_batch(mirror, topics, outcomes, planned, "pause").await
    }

    /// Resumes several topics of a mirror in one step: PAUSED partitions go back to MIRRORING
    /// from their committed positions (one `Assign`); a partition still PAUSING prepares again;
    /// a FAILED one that failed while pausing mirrors when it is retried.
    pub(super) async fn resume_topics(
        &mut self,
        mirror: &str,
        topics: &[String],
    ) -> Vec<Result<Option<String>, Problem>> {
        let (outcomes, planned) = self.plan_batch(mirror, topics, TopicCall::Resume, || Event::Resume);
        self.finish_batch(mirror, topics, outcomes, planned, "resume").await
    }

    /// Recovers several topics of a mirror in one step (KIP-1279's `RecoverMirrorTopics`): their
    /// FAILED partitions go back to what each was doing (PREPARING, PAUSING or STOPPING) with the
    /// retry count reset, whatever their error and retries, and run it at once, together (one
    /// prepare for all of them, as a takeover's). Partitions in other states are left alone; a
    /// topic with a FOREIGN_WRITE partition is refused whole (`domain::topic_call`).
    pub(super) async fn recover_topics(
        &mut self,
        mirror: &str,
        topics: &[String],
    ) -> Vec<Result<Option<String>, Problem>> {
        if let Err(p) = self.check_not_halted(mirror) {
            return topics.iter().map(|_| Err(p.clone())).collect();
        }
        let (outcomes, planned) = self.plan_batch(mirror, topics, TopicCall::Recover, || Event::Recover);
        self.finish_batch(mirror, topics, outcomes, planned, "recover").await
    }

    /// Refuses a start or a recover on a halted `mirror`: its source has another cluster ID (its
    /// partitions would only fail again, until the source or the mirror's expected ID is fixed)
    /// or its data paths are fenced by another instance.
    fn check_not_halted(&self, mirror: &str) -> Result<(), Problem> {
        let m = &self.mirrors[mirror];
        if m.fenced {
            return Err(Problem { kind: ProblemKind::Fenced, detail: m.data_path.to_string() });
        }
        if m.cluster_id_status == ClusterIdStatus::Mismatch {
            return Err(Problem {
                kind: ProblemKind::SourceClusterIdMismatch,
                detail: m.cluster_id_error.clone().unwrap_or_else(|| "source cluster ID mismatch".into()),
            });
        }
        Ok(())
    }

    /// Stops several topics of a mirror as one failover: every partition goes STOPPING (persisted
    /// once), then one STOPPING sequence for all of them (one abort, one fence, one read of the
    /// stop points). A partition left STOPPING by an earlier stop runs the sequence again.
    pub(super) async fn stop_topics(
        &mut self,
        mirror: &str,
        topics: &[String],
    ) -> Vec<Result<Option<String>, Problem>> {
        self.stop_topics_with(mirror, topics, false).await
    }

    /// [`Self::stop_topics`]; with `commit` (a promote), the data path commits what it read
    /// instead of aborting it ([`Planned::commit_instead_of_abort`]).
    pub(super) async fn stop_topics_with(
        &mut self,
        mirror: &str,
        topics: &[String],
        commit: bool,
    ) -> Vec<Result<Option<String>, Problem>> {
        let (outcomes, mut planned) = self.plan_batch(mirror, topics, TopicCall::Stop, || Event::Stop);
        if commit {
            planned.commit_instead_of_abort();
        }
        self.finish_batch(mirror, topics, outcomes, planned, "stop").await
    }

    /// STOPPING → STOPPED for a topic's partitions, with their stop points; their LMEs go into
    /// the mirror's LastMirrorEpochs, which the caller writes once for all the topics it stopped
    /// ([`Self::queue_last_mirror_epochs`]: a failover of 1,000 topics wrote it 1,000 times, each
    /// copy larger than the last).
    pub(super) fn stopped(&mut self, mirror: &str, topic: &str, parts: &[i32], ends: &HashMap<(String, i32), i64>) {
        let mut lmes = Vec::new();
        for &p in parts {
            let rec = &self.mirrors[mirror].topics[topic].partitions[&p].record;
            let pos = rec.position;
            let stop = StopPoint {
                last_mirror_epoch: pos.map_or(-1, |p| p.source_leader_epoch),
                last_mirrored_source_offset: pos
                    .and_then(|p| (p.next_source_offset > 0).then_some(p.next_source_offset - 1)),
                destination_stop_offset: ends
                    .get(&(topic.to_string(), p))
                    .copied()
                    .unwrap_or(0)
                    .max(pos.map_or(0, |p| p.destination_end_offset)),
            };
            lmes.push((p, stop.last_mirror_epoch));
            if let Err(e) = self.apply(mirror, topic, p, Event::Stopped { stop })
                && !e.is_harmless()
            {
                tracing::warn!(%mirror, %topic, partition = p, "stop rejected: {e}");
            }
        }
        let m = self.mirrors.get_mut(mirror).expect("known");
        m.last_mirror_epochs.set_epochs(topic, lmes);
    }

    /// Queues the mirror's LastMirrorEpochs record as it is now (written whole).
    pub(super) fn queue_last_mirror_epochs(&mut self, mirror: &str) {
        let Some(m) = self.mirrors.get(mirror) else { return };
        let w = persist::last_mirror_epochs(mirror, &m.last_mirror_epochs, self.state_partitions);
        self.pending_writes.push(w);
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
struct StartReads {
    dest_ends: BTreeMap<i32, i64>,
    dest_starts: BTreeMap<i32, i64>,
    source_starts: BTreeMap<i32, i64>,
}

fn nothing_to_prepare() -> Problem {
    Problem { kind: ProblemKind::Internal, detail: "nothing to prepare".into() }
}
