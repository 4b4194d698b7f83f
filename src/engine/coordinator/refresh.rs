//! Periodic reads that feed the snapshot and the metadata sync: lag, source metadata (configs,
//! partitions, cluster ID), offset-map pruning.

use super::*;

impl Coordinator {
    pub(super) fn spawn_lag_refresh(&mut self) {
        let dest = self.destination_admin.clone();
        let now = tokio::time::Instant::now();
        for (name, m) in self.mirrors.iter_mut() {
            if m.lag_in_flight || m.topics.is_empty() || now < m.lag_due {
                continue;
            }
            let keys: Vec<(String, i32)> =
                m.topics.iter().flat_map(|(t, rt)| rt.partitions.keys().map(move |p| (t.clone(), *p))).collect();
            // The destination's log start matters only for counting a STOPPED partition's local
            // writes, and the old source's offsets after the failover only for STOPPED partitions:
            // read those for them alone, not for every partition on every refresh.
            let stopped = m.stopped_since();
            m.lag_in_flight = true;
            m.lag_due = now + lag_refresh_every(self.config.lag_refresh_interval, keys.len());
            let source = m.source_admin.clone();
            let dest = dest.clone();
            let internal = self.internal_tx.clone();
            let mirror = name.clone();
            tokio::spawn(async move {
                let (offsets, error) = read_offsets(&*source, &*dest, &keys, &stopped).await;
                let _ = internal.send(Internal::Lag { mirror, offsets, error });
            });
        }
    }

    /// The split-brain watch's second look, at the metadata refresh's pace: for a mirror whose
    /// failed-over topics' old source received records after the failover, read that cluster's
    /// state topic (same name) for a failback, a mirror there copying a topic back from this
    /// cluster. It explains those records: the old source is, or is becoming, the primary again.
    /// Nothing is read while no topic has such records.
    pub(super) fn spawn_failback_watch(&mut self, only: Option<&str>) {
        for (name, m) in self.mirrors.iter_mut() {
            if only.is_some_and(|o| o != name) || m.failback_watch_in_flight {
                continue;
            }
            let topics = m.topics_written_after_stop();
            if topics.is_empty() {
                m.failbacks.clear();
                continue;
            }
            m.failback_watch_in_flight = true;
            let ports = Arc::clone(&self.ports);
            let source = m.stored.spec.source.clone();
            let (state_topic, timeout) = (self.config.state_topic.clone(), self.config.request_timeout);
            let this_cluster = self.destination_cluster_id.clone();
            let internal = self.internal_tx.clone();
            let mirror = name.clone();
            tokio::spawn(async move {
                let read =
                    ports.read_remote_state(&source.bootstrap_servers, &source.properties, &state_topic, timeout);
                let found = match read.await {
                    Ok(records) => {
                        // The other cluster's secrets are not this instance's to open.
                        let remote = persist::load(&records, &Default::default()).0;
                        Ok(topics
                            .into_iter()
                            .filter_map(|t| {
                                super::super::failback::failback_of(&remote, &t, &this_cluster).map(|m| (t, m))
                            })
                            .collect())
                    }
                    Err(e) => Err(e),
                };
                let _ = internal.send(Internal::FailbackWatch { mirror, found });
            });
        }
    }

    pub(super) fn spawn_metadata_refresh(&mut self, only: Option<&str>) {
        let t = now();
        let slots = self.state_partitions;
        for (name, m) in self.mirrors.iter_mut() {
            if only.is_some_and(|o| o != name) || m.fenced {
                continue;
            }
            // The MirrorMetadataManager's syncs run on the owner of the mirror's slot only, so
            // exactly one instance writes a mirror's configs, offsets and ACLs; every instance
            // still checks the source (cluster ID, topics) for its own view.
            let sync = if self.owned.contains(&slots::mirror_slot(name, slots)) {
                m.stored.spec.sync.clone()
            } else {
                SyncSpec { topic_configs: false, group_offsets: false, acls: false, ..m.stored.spec.sync.clone() }
            };
            if m.metadata_in_flight {
                m.metadata_again |= only.is_some();
                continue;
            }
            m.metadata_in_flight = true;
            let input = metadata::RefreshInput {
                mirror: name.clone(),
                sync,
                expected_cluster_id: m.stored.spec.expected_source_cluster_id.clone(),
                source: m.source_admin.clone(),
                destination: self.destination_admin.clone(),
                topics: m
                    .topics
                    .iter()
                    .map(|(tn, t)| metadata::TopicInput {
                        name: tn.clone(),
                        partitions: t
                            .partitions
                            .iter()
                            .map(|(p, rt)| (*p, rt.record.state, rt.record.position))
                            .collect(),
                    })
                    .collect(),
                offset_maps: Arc::clone(&self.offset_maps),
                created_acls: m.stored.created_acls.clone(),
                applied_configs: m.applied_configs.clone(),
                now: t,
                list_topics: !m.stored.spec.topic_include.is_empty(),
            };
            let internal = self.internal_tx.clone();
            let mirror = name.clone();
            tokio::spawn(async move {
                let report = metadata::refresh(input).await;
                let _ = internal.send(Internal::Metadata { mirror, report: Box::new(report) });
            });
        }
    }

    /// Offset maps grow by a run per partition per transaction (the commit marker splits them), in
    /// memory and as OffsetRuns records in the state topic. Reads the destination log start of
    /// every partition that has a map, so [`Coordinator::prune_offset_maps`] can drop the batches
    /// retention (or DeleteRecords) removed: a map then spans the destination's retention. Runs
    /// with the metadata refresh; needs only the destination, so it goes on with the source down.
    pub(super) fn spawn_offset_map_prune(&mut self, only: Option<&str>) {
        if self.fenced.is_some() {
            return;
        }
        let keys_of: HashMap<String, Vec<(String, i32)>> = {
            let maps = self.offset_maps.read().unwrap_or_else(|e| e.into_inner());
            let mut by_mirror: HashMap<String, Vec<(String, i32)>> = HashMap::new();
            for (mirror, topic, partition) in maps.keys() {
                by_mirror.entry(mirror.clone()).or_default().push((topic.clone(), *partition));
            }
            by_mirror
        };
        for (name, m) in self.mirrors.iter_mut() {
            if only.is_some_and(|o| o != name) || m.fenced || m.prune_in_flight {
                continue;
            }
            let Some(keys) = keys_of.get(name) else { continue };
            // Another instance prunes its own partitions' maps.
            let keys: Vec<(String, i32)> = keys
                .iter()
                .filter(|(t, p)| {
                    m.topics.get(t).and_then(|rt| rt.partitions.get(p)).is_some_and(|rt| self.owned.contains(&rt.slot))
                })
                .cloned()
                .collect();
            if keys.is_empty() {
                continue;
            }
            m.prune_in_flight = true;
            let q: Vec<_> = keys.iter().map(|(t, p)| (t.clone(), *p, OffsetSpec::Earliest)).collect();
            let dest = self.destination_admin.clone();
            let internal = self.internal_tx.clone();
            let mirror = name.clone();
            tokio::spawn(async move {
                let starts = match dest.list_offsets(&q, IsolationLevel::ReadUncommitted).await {
                    Ok(v) => v.into_iter().map(|o| ((o.topic, o.partition), o.offset)).collect(),
                    Err(e) => {
                        // One topic the destination no longer has (a stopped topic its users
                        // deleted; its map stays for offset translation) fails the whole answer.
                        // Topic by topic, the others are still pruned; a failed read prunes
                        // nothing of its topic this round, and the next refresh tries again.
                        tracing::debug!(%mirror, "offset-map prune: destination log starts: {e}; asking per topic");
                        let mut by_topic: BTreeMap<&str, Vec<(String, i32, OffsetSpec)>> = BTreeMap::new();
                        for r in &q {
                            by_topic.entry(r.0.as_str()).or_default().push(r.clone());
                        }
                        let mut starts = Vec::new();
                        for (topic, requests) in by_topic {
                            match dest.list_offsets(&requests, IsolationLevel::ReadUncommitted).await {
                                Ok(v) => starts.extend(v.into_iter().map(|o| ((o.topic, o.partition), o.offset))),
                                Err(e) => {
                                    tracing::debug!(%mirror, topic, "offset-map prune: destination log starts: {e}")
                                }
                            }
                        }
                        starts
                    }
                };
                let _ = internal.send(Internal::LogStarts { mirror, starts });
            });
        }
    }

    /// Drops the offset-map batches below each partition's destination log start, in memory, and
    /// deletes their OffsetRuns records (tombstones) so a restart does not load them again. At most
    /// [`PRUNE_BATCHES_PER_ROUND`] per mirror per round: a first prune after a long time must not
    /// hold the coordinator (or the state topic) for long.
    pub(super) async fn prune_offset_maps(&mut self, mirror: &str, starts: &[((String, i32), i64)]) {
        let Some(m) = self.mirrors.get_mut(mirror) else { return };
        m.prune_in_flight = false;
        if self.fenced.is_some() || m.fenced || starts.is_empty() {
            return;
        }
        let mut budget = PRUNE_BATCHES_PER_ROUND;
        let mut writes = Vec::new();
        {
            let topic_ids = m.topic_ids.read().unwrap_or_else(|e| e.into_inner());
            let mut maps = self.offset_maps.write().unwrap_or_else(|e| e.into_inner());
            for ((topic, partition), log_start) in starts {
                if budget == 0 {
                    break;
                }
                let (Some(topic_id), Some(map)) =
                    (topic_ids.get(topic), maps.get_mut(&(mirror.to_string(), topic.clone(), *partition)))
                else {
                    continue;
                };
                let dropped = map.prune_stretches_below(*log_start, budget);
                budget -= dropped.len();
                writes.extend(dropped.into_iter().map(|first_destination_offset| {
                    persist::offset_runs_tombstone(
                        mirror,
                        topic_id,
                        *partition,
                        first_destination_offset,
                        self.state_partitions,
                    )
                }));
            }
        }
        if writes.is_empty() {
            return;
        }
        tracing::debug!(%mirror, batches = writes.len(), "offset maps pruned below the destination log start");
        self.writes.extend(writes);
        if let Err(e) = self.flush().await {
            // The records stay; the next start loads them and the next prune deletes them again.
            tracing::warn!(%mirror, "offset-map prune: state write failed: {e}");
        }
    }

    pub(super) fn cluster_id_mismatch(&mut self, mirror: &str, observed: &str, detail: &str) {
        let Some(m) = self.mirrors.get_mut(mirror) else { return };
        let first = m.cluster_id_status != ClusterIdStatus::Mismatch;
        m.observed_cluster_id = Some(observed.to_string());
        m.cluster_id_status = ClusterIdStatus::Mismatch;
        m.cluster_id_checked_at = Some(now());
        m.cluster_id_error = Some(detail.to_string());
        if first {
            // Logged once per state change, not on every refresh.
            tracing::error!(%mirror, "source cluster ID mismatch, mirror halted: {detail}");
        }
        let targets: Vec<(String, i32)> = m
            .topics
            .iter()
            .flat_map(|(t, rt)| {
                rt.partitions
                    .iter()
                    .filter(|(_, p)| !matches!(p.record.state, PartitionState::Stopped | PartitionState::Failed))
                    .map(move |(p, _)| (t.clone(), *p))
            })
            .collect();
        // Another instance's partitions are its own to fail (it checks the cluster ID too).
        let targets: Vec<(String, i32)> =
            targets.into_iter().filter(|(t, p)| self.owns_partition(mirror, t, *p)).collect();
        // Halt: abort whatever is open and drop every partition from its slot's data path.
        for (slot, partitions) in self.by_slot(mirror, targets.clone()) {
            if let Some(p) = self.mirrors.get(mirror).and_then(|m| m.pipes.get(&slot)) {
                let (reply, _rx) = tokio::sync::oneshot::channel();
                let _ = p.tx.send(PipeCommand::Unassign {
                    partitions,
                    finish: Finish::Abort,
                    fence: false,
                    sent: std::time::Instant::now(),
                    reply,
                });
            }
        }
        for (t, p) in targets {
            self.fail(mirror, &t, p, ErrorCode::SourceClusterIdMismatch, detail.to_string());
        }
    }

    pub(super) async fn metadata_result(&mut self, mirror: &str, mut report: metadata::RefreshReport) {
        let t = now();
        let listing = report.listing.take();
        // The sync may have changed the mirror's topic configs: the next read sees them.
        self.config_reads.forget(mirror);
        let Some(m) = self.mirrors.get_mut(mirror) else { return };
        m.metadata_in_flight = false;
        let enabled = m.stored.spec.sync.clone();
        let observed = match &report.cluster_id {
            Ok(id) => id.clone(),
            Err(e) => {
                let status = e.status();
                let why = match status {
                    ClusterIdStatus::AuthenticationFailed => {
                        "the source refused the credentials (authentication failed)"
                    }
                    ClusterIdStatus::TlsFailed => "the TLS handshake with the source failed",
                    _ => "source cluster unreachable",
                };
                if m.cluster_id_status != ClusterIdStatus::Mismatch {
                    if m.cluster_id_status != status {
                        tracing::warn!(%mirror, "{why}: {e}");
                    }
                    m.cluster_id_status = status;
                    m.cluster_id_error = Some(format!("{why}: {e}"));
                    m.cluster_id_checked_at = Some(t);
                }
                // The syncs did not run either: say so per kind, so a sync that cannot reach
                // its source is never shown as healthy.
                metadata::mark_not_run(&mut m.sync, &enabled, &format!("{why}: {e}"), t);
                return;
            }
        };
        if let Some(exp) = m.stored.spec.expected_source_cluster_id.clone()
            && exp != observed
        {
            let detail = format!("the source cluster ID is {observed} but {exp} was expected");
            metadata::mark_not_run(&mut m.sync, &enabled, &format!("halted: {detail}"), t);
            self.cluster_id_mismatch(mirror, &observed, &detail);
            let _ = self.flush().await;
            return;
        }
        if m.cluster_id_status == ClusterIdStatus::Mismatch {
            tracing::info!(%mirror, "source cluster ID matches again");
        }
        m.observed_cluster_id = Some(observed);
        m.cluster_id_status = ClusterIdStatus::Ok;
        m.cluster_id_error = None;
        m.cluster_id_checked_at = Some(t);
        for (kind, outcome) in [
            (SyncKind::TopicConfigs, &report.configs),
            (SyncKind::GroupOffsets, &report.groups),
            (SyncKind::Acls, &report.acls),
        ] {
            if let Some(status) = metadata::status_mut(&mut m.sync, kind) {
                let before = status.last_error.clone();
                metadata::update_status(status, outcome, t);
                if status.last_error.is_some() && status.last_error != before {
                    tracing::warn!(%mirror, kind = kind.as_str(), "metadata sync failed: {}", status.last_error.as_deref().unwrap_or(""));
                }
                for w in &outcome.warnings {
                    tracing::warn!(%mirror, "config drift: {w}");
                }
            }
        }
        m.applied_configs = report.applied_configs;
        if report.groups.ran {
            m.group_views = report.group_views;
        }
        if let Some(created) = report.created_acls {
            m.stored.created_acls = created;
            let w = persist::mirror(&m.stored, self.state_partitions, &self.config.sealer);
            self.writes.push(w);
        }
        // Source topic deleted (two refreshes in a row), recreated (new topic ID), or resized.
        let Some(m) = self.mirrors.get_mut(mirror) else { return };
        let mut failures = Vec::new();
        let mut grown = Vec::new();
        for (tn, seen) in report.topics {
            let Some(topic) = m.topics.get_mut(&tn) else { continue };
            match seen {
                None => {
                    topic.missing_refreshes += 1;
                    if topic.missing_refreshes >= 2 {
                        failures.push((tn, ErrorCode::SourceTopicDeleted, "the source topic was deleted".to_string()));
                    }
                }
                Some((id, _)) if id != topic.source_topic_id => {
                    failures.push((
                        tn,
                        ErrorCode::SourceTopicRecreated,
                        format!("the source topic was recreated: its ID was {} and is now {id}", topic.source_topic_id),
                    ));
                }
                Some((_, n)) => {
                    topic.missing_refreshes = 0;
                    let have = topic.partitions.len();
                    if n < have {
                        failures.push((
                            tn,
                            ErrorCode::PartitionCountDecreased,
                            format!("the source topic now has {n} partitions, the mirror has {have}"),
                        ));
                    } else if n > have && topic.partitions.values().any(|p| p.record.state == PartitionState::Mirroring)
                    {
                        grown.push((tn, n));
                    }
                }
            }
        }
        for (tn, code, message) in failures {
            let Ok(t) = self.mirrors.topic(mirror, &tn) else { continue };
            let parts: Vec<i32> = t
                .partitions
                .iter()
                .filter(|(_, p)| !matches!(p.record.state, PartitionState::Stopped | PartitionState::Failed))
                .map(|(p, _)| *p)
                .filter(|p| self.owns_partition(mirror, &tn, *p))
                .collect();
            if parts.is_empty() {
                continue;
            }
            // FAILED first (persisted), then the data path drops them (Unassign + abort).
            let mut planned = Planned::default();
            for p in parts {
                let actions = self.fail(mirror, &tn, p, code, message.clone());
                planned.push(&tn, p, actions);
            }
            let _ = self.run_actions(mirror, planned).await;
        }
        let _ = self.flush().await;
        // The topic policy: new source topics that match it started, excluded ones stopped
        // (on the mirror's owner; every instance keeps the plan for its view).
        let listing = listing.map(|(topics, took)| super::discovery::Listing { topics, took });
        self.discover(mirror, listing).await;
        if !self.owns_mirror(mirror) {
            return; // the mirror's owner adds new partitions
        }
        for (tn, n) in grown {
            if let Err(p) = self.grow_topic(mirror, &tn, n).await {
                tracing::warn!(%mirror, topic = %tn, "cannot mirror new partitions: {}", p.detail);
            }
        }
    }

    /// The source topic gained partitions: create them on the destination and start them
    /// (UNKNOWN → PREPARING → MIRRORING).
    pub(super) async fn grow_topic(&mut self, mirror: &str, topic: &str, partitions: usize) -> Result<(), Problem> {
        let dest = self.destination_admin.clone();
        let d = dest.describe_topic(topic).await.map_err(|e| kafka_problem(Cluster::Destination, &e))?;
        if d.partitions.len() < partitions {
            match dest.create_partitions(topic, partitions).await {
                Ok(()) => {}
                Err(e) if e.is(crate::kafka::KafkaErrorKind::InvalidPartitions) => {}
                Err(e) => return Err(kafka_problem(Cluster::Destination, &e)),
            }
            let wait = self.config.request_timeout;
            if super::starting::until_available(&*dest, topic, partitions as i32, wait).await.is_none() {
                return Err(Problem {
                    kind: ProblemKind::DestinationUnavailable,
                    detail: format!("new partitions of {topic:?} did not become available"),
                });
            }
        }
        let t = now();
        let new: Vec<i32> = {
            let n = self.state_partitions;
            let rt = self.mirrors.topic_mut(mirror, topic)?;
            let first = rt.partitions.len() as i32;
            let new: Vec<i32> = (first..partitions as i32).collect();
            for p in &new {
                let slot = slots::slot_of_partition(mirror, &rt.source_topic_id, *p, n);
                rt.partitions.insert(*p, PartRt::new(PartitionRecord::new(t), slot));
            }
            new
        };
        tracing::info!(%mirror, %topic, "source partitions increased to {partitions}: mirroring the new ones");
        self.queue_topic(mirror, topic);
        let mut planned = Planned::default();
        for &p in &new {
            if let Ok(actions) = self.apply(mirror, topic, p, Event::Start { truncation: Truncation::None }) {
                planned.push(topic, p, actions);
            }
        }
        // Known once recorded (the next refresh does not add them again); a record that cannot
        // be written leaves them FAILED and retried.
        self.run_actions(mirror, planned).await.remove(topic).map_or(Ok(()), Err)
    }
}

/// How often a mirror's lag is refreshed: the configured interval, stretched for large mirrors.
/// Each refresh lists four offsets of every partition (source log start, LSO and high watermark,
/// destination end); at 10,000 partitions doing that every second kept a third of a core busy in
/// librdkafka with the mirror idle. One millisecond per partition (10 s at 10,000) keeps the cost
/// flat per partition while small mirrors stay at the configured interval.
pub(super) fn lag_refresh_every(configured: Duration, partitions: usize) -> Duration {
    configured.max(LAG_REFRESH_PER_PARTITION * u32::try_from(partitions).unwrap_or(u32::MAX))
}

async fn read_offsets(
    source: &dyn ClusterAdmin,
    dest: &dyn ClusterAdmin,
    keys: &[(String, i32)],
    stopped: &[((String, i32), Timestamp)],
) -> (Vec<((String, i32), Offsets)>, Option<String>) {
    let mut out: HashMap<(String, i32), Offsets> = keys.iter().map(|k| (k.clone(), Offsets::default())).collect();
    let mut error = None;
    let q = |spec| keys.iter().map(|(t, p)| (t.clone(), *p, spec)).collect::<Vec<_>>();
    let timeout = Duration::from_secs(5);
    let src = async {
        let start = source.list_offsets(&q(OffsetSpec::Earliest), IsolationLevel::ReadCommitted).await?;
        let lso = source.list_offsets(&q(OffsetSpec::Latest), IsolationLevel::ReadCommitted).await?;
        let hwm = source.list_offsets(&q(OffsetSpec::Latest), IsolationLevel::ReadUncommitted).await?;
        // The old source of STOPPED partitions: what it received since the failover, by record
        // time (the split-brain watch).
        let after_stop = if stopped.is_empty() {
            Vec::new()
        } else {
            let req: Vec<_> = stopped
                .iter()
                .map(|((t, p), since)| (t.clone(), *p, OffsetSpec::Timestamp(since.as_millis())))
                .collect();
            source.list_offsets(&req, IsolationLevel::ReadCommitted).await?
        };
        Ok::<_, KafkaError>((start, lso, hwm, after_stop))
    };
    match tokio::time::timeout(timeout, src).await {
        Ok(Ok((start, lso, hwm, after_stop))) => {
            let since: HashMap<&(String, i32), Timestamp> = stopped.iter().map(|(k, t)| (k, *t)).collect();
            let lsos: HashMap<(String, i32), i64> =
                lso.iter().map(|o| ((o.topic.clone(), o.partition), o.offset)).collect();
            for o in after_stop {
                let key = (o.topic.clone(), o.partition);
                if let (Some(x), Some(t), Some(end)) = (out.get_mut(&key), since.get(&key), lsos.get(&key)) {
                    x.source_after_stop = Some(AfterStop {
                        since: *t,
                        // Kafka answers -1 when no record is that recent.
                        first_by_time: (o.offset >= 0).then_some(o.offset),
                        end_first_seen: *end,
                    });
                }
            }
            for o in start {
                if let Some(x) = out.get_mut(&(o.topic.clone(), o.partition)) {
                    x.source_start = Some(o.offset);
                }
            }
            for o in lso {
                if let Some(x) = out.get_mut(&(o.topic.clone(), o.partition)) {
                    x.source_lso = Some(o.offset);
                }
            }
            for o in hwm {
                if let Some(x) = out.get_mut(&(o.topic.clone(), o.partition)) {
                    x.source_hwm = Some(o.offset);
                }
            }
        }
        Ok(Err(e)) => error = Some(format!("source: {e}")),
        Err(_) => error = Some("source: timed out".into()),
    }
    let dst = async {
        let hwm = dest.list_offsets(&q(OffsetSpec::Latest), IsolationLevel::ReadUncommitted).await?;
        // The log start of STOPPED partitions too: local writes already deleted are in nobody's
        // way (lineage).
        let start = if stopped.is_empty() {
            Vec::new()
        } else {
            let req: Vec<_> = stopped.iter().map(|((t, p), _)| (t.clone(), *p, OffsetSpec::Earliest)).collect();
            dest.list_offsets(&req, IsolationLevel::ReadUncommitted).await?
        };
        Ok::<_, KafkaError>((hwm, start))
    };
    match tokio::time::timeout(timeout, dst).await {
        Ok(Ok((hwm, start))) => {
            for o in hwm {
                if let Some(x) = out.get_mut(&(o.topic.clone(), o.partition)) {
                    x.destination_hwm = Some(o.offset);
                }
            }
            for o in start {
                if let Some(x) = out.get_mut(&(o.topic.clone(), o.partition)) {
                    x.destination_start = Some(o.offset);
                }
            }
        }
        Ok(Err(e)) => error = Some(format!("destination: {e}")),
        Err(_) => error = Some("destination: timed out".into()),
    }
    (out.into_iter().collect(), error)
}
