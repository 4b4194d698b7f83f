//! Lifecycle calls: start, pause, resume, recover and stop, each checked against the state
//! machine (`domain::topic_call`), persisted, then carried out on the data path. A start's own
//! steps are in `starting`.

use crate::domain::lineage::FailbackPreview;
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
        self.mirrors.mirror(mirror)?;
        let topics = self.resolve(mirror, &selector, op).await?;
        let policy = {
            let spec = &self.mirrors.mirror(mirror)?.stored.spec;
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
                let e = EngineError::mirror_not_found(mirror);
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
        self.writes.push(persist::mirror(&stored, self.state_partitions, &self.config.sealer));
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
        let m = self.mirrors.mirror(mirror)?;
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
        let m = self.mirrors.mirror(mirror)?;
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
            None => Err(table::Missing::topic(mirror, topic).into()),
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

    /// Applies a final position reported by the pipe, when it is ahead of the record's.
    pub(super) fn apply_final(&mut self, mirror: &str, topic: &str, f: &pipe::FinalPosition) {
        let Some(next) = f.next_source_offset else { return };
        let Ok(rt) = self.mirrors.partition(mirror, topic, f.partition) else {
            // Removed while its data path ended (a delete or a refresh): nothing to record.
            return;
        };
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
        let t = self.mirrors.topic(mirror, topic)?;
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
                        Err(table::ApplyError::Transition(TransitionError::AlreadyInState {
                            state: PartitionState::Stopping,
                            ..
                        })) if call == TopicCall::Stop => planned.push(t, p, crate::domain::stopping_actions()),
                        Err(e) if e.is_harmless() => {}
                        Err(e) => return Err(e.into()),
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
    pub(super) fn check_not_halted(&self, mirror: &str) -> Result<(), Problem> {
        let m = self.mirrors.mirror(mirror)?;
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
            let Ok(rt) = self.mirrors.partition(mirror, topic, p) else { continue };
            let pos = rt.record.position;
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
        if let Some(m) = self.mirrors.get_mut(mirror) {
            m.last_mirror_epochs.set_epochs(topic, lmes);
        }
    }

    /// Queues the mirror's LastMirrorEpochs record as it is now (written whole).
    pub(super) fn queue_last_mirror_epochs(&mut self, mirror: &str) {
        let Some(m) = self.mirrors.get(mirror) else { return };
        let w = persist::last_mirror_epochs(mirror, &m.last_mirror_epochs, self.state_partitions);
        self.writes.push(w);
    }
}
