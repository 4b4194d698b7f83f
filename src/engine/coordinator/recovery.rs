//! Coming back from failures: restoring from `__mirror_state` at startup, reacting to the data
//! path's events and faults, and retrying FAILED partitions with backoff.

use super::*;

impl Coordinator {
    // ----- restore -----------------------------------------------------------------------

    pub(super) async fn restore(&mut self, loaded: Loaded) {
        for lm in loaded.mirrors {
            let name = lm.stored.spec.name.clone();
            let Some(m) = self.mirrors.get_mut(&name) else { continue };
            m.last_mirror_epochs = lm.last_mirror_epochs;
            for lt in lm.topics {
                m.topic_ids
                    .write()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(lt.name.clone(), lt.source_topic_id.clone());
                let mut t = TopicRt {
                    source_topic_id: lt.source_topic_id,
                    destination_topic_id: lt.destination_topic_id,
                    created_at: lt.created_at,
                    missing_refreshes: 0,
                    partitions: BTreeMap::new(),
                };
                for (p, rec) in lt.partitions {
                    let slot = slots::slot_of_partition(&name, &t.source_topic_id, p, self.state_partitions);
                    t.partitions.insert(p, PartRt::new(rec, slot));
                }
                m.topics.insert(lt.name, t);
            }
        }
        // Take every partition over (`Loaded`): in-progress states re-run their actions.
        for mirror in self.mirrors.names() {
            let mut planned = Planned::default();
            let parts: Vec<(String, i32)> = self
                .mirrors
                .mirror(&mirror)
                .map(|m| m.topics.iter().flat_map(|(t, rt)| rt.partitions.keys().map(|p| (t.clone(), *p))).collect())
                .unwrap_or_default();
            for (topic, p) in parts {
                // UNKNOWN, PAUSED and STOPPED have nothing to redo (AlreadyInState).
                if let Ok(actions) = self.apply(&mirror, &topic, p, Event::Loaded) {
                    planned.push(&topic, p, actions);
                }
            }
            for (topic, p) in self.run_actions(&mirror, planned).await {
                tracing::warn!(%mirror, %topic, "restore: {}", p.detail);
            }
        }
    }

    // ----- pipe events, retries, refreshes ---------------------------------------------

    pub(super) async fn internal(&mut self, msg: Internal) {
        match msg {
            Internal::Pipe(mirror, slot, ev) => self.pipe_event(&mirror, slot, ev).await,
            Internal::Lag { mirror, offsets, error } => {
                let t = now();
                let Some(m) = self.mirrors.get_mut(&mirror) else { return };
                m.lag_in_flight = false;
                if let Some(e) = error {
                    tracing::debug!(%mirror, "lag refresh: {e}");
                }
                for ((topic, p), o) in offsets {
                    if let Some(rt) = m.topics.get_mut(&topic).and_then(|t| t.partitions.get_mut(&p)) {
                        if o.source_start.is_some() {
                            rt.offsets.source_start = o.source_start;
                            rt.offsets.source_lso = o.source_lso;
                            rt.offsets.source_hwm = o.source_hwm;
                            // The end first seen after this failover stays what it was.
                            let earlier = rt
                                .offsets
                                .source_after_stop
                                .filter(|a| o.source_after_stop.is_some_and(|b| a.since == b.since));
                            rt.offsets.source_after_stop = o.source_after_stop.map(|b| AfterStop {
                                end_first_seen: earlier.map_or(b.end_first_seen, |a| a.end_first_seen),
                                ..b
                            });
                        }
                        if o.destination_hwm.is_some() {
                            rt.offsets.destination_hwm = o.destination_hwm;
                            rt.offsets.destination_start = o.destination_start;
                        }
                        if lag_records(rt) == 0 {
                            rt.caught_up_at = Some(t);
                        } else if !rt.idle {
                            rt.active_at = tokio::time::Instant::now();
                        }
                    }
                }
                self.idle_step(&mirror).await;
            }
            Internal::LogStarts { mirror, starts } => self.prune_offset_maps(&mirror, &starts).await,
            Internal::OffLoop(done) => self.off_loop_done(*done).await,
            Internal::PromoteRead { job, read } => self.promote_read(*job, read).await,
            Internal::Discovered { mirror, result } => self.discovered(&mirror, result).await,
            Internal::Tail(batch) => self.tailed(batch).await,
            Internal::Membership(ev) => self.membership(ev).await,
            Internal::HeartbeatWritten(r) => self.heartbeat_written(r),
            Internal::ClusterProbed { key, answered } => self.cluster_probed(key, answered).await,
            Internal::FailbackWatch { mirror, found } => {
                let Some(m) = self.mirrors.get_mut(&mirror) else { return };
                m.failback_watch_in_flight = false;
                match found {
                    Ok(found) => m.failbacks = found,
                    // The last answer stands: an old source that does not answer now changes
                    // nothing about a failback it showed.
                    Err(e) => tracing::debug!(%mirror, "failback watch: the old source's state was not read: {e}"),
                }
            }
            Internal::Metadata { mirror, report } => {
                self.metadata_result(&mirror, *report).await;
                // A refresh asked for while this one ran: start it now that this one's results
                // (created ACLs, applied configs) are in place, so it builds on them.
                if let Some(m) = self.mirrors.get_mut(&mirror)
                    && std::mem::take(&mut m.metadata_again)
                {
                    self.spawn_metadata_refresh(Some(&mirror));
                }
            }
        }
    }

    pub(super) async fn pipe_event(&mut self, mirror: &str, slot: i32, ev: PipeEvent) {
        let in_group = self.in_group();
        let Some(m) = self.mirrors.get_mut(mirror) else { return };
        match ev {
            PipeEvent::Ready => m.data_path = DataPathStatus::Running,
            PipeEvent::FetchPositions(positions) => {
                for f in positions {
                    if let Some(rt) = m.topics.get_mut(&f.topic).and_then(|t| t.partitions.get_mut(&f.partition)) {
                        rt.fetch_position = Some(f.offset);
                    }
                }
            }
            PipeEvent::Committed(progress) => {
                m.data_path = DataPathStatus::Running;
                {
                    let mut maps = self.offset_maps.write().unwrap_or_else(|e| e.into_inner());
                    let mut lineage = m.new_lineage.write().unwrap_or_else(|e| e.into_inner());
                    for p in &progress {
                        lineage.remove(&(p.topic.clone(), p.partition));
                        let map = maps.entry((mirror.to_string(), p.topic.clone(), p.partition)).or_default();
                        if let Err(e) = map.extend(p.runs.iter().copied()) {
                            tracing::error!(%mirror, topic = %p.topic, partition = p.partition, "offset map: {e}");
                        }
                    }
                }
                for p in progress {
                    let Some(rt) = m.topics.get_mut(&p.topic).and_then(|t| t.partitions.get_mut(&p.partition)) else {
                        continue;
                    };
                    rt.records_mirrored += p.records;
                    rt.bytes_mirrored += p.bytes;
                    rt.active_at = tokio::time::Instant::now();
                    let epoch = p
                        .source_leader_epoch
                        .unwrap_or(-1)
                        .max(rt.record.position.map_or(-1, |x| x.source_leader_epoch));
                    let pos = MirrorPosition {
                        next_source_offset: p.next_source_offset,
                        source_leader_epoch: epoch,
                        destination_end_offset: p.destination_end_offset,
                    };
                    if let Ok(step) = transition(&rt.record, Event::Progress { position: pos }, now()) {
                        rt.record = step.next;
                    }
                }
            }
            PipeEvent::PartitionFailed { topic, partition, fault } => {
                let (code, message) = match fault {
                    PartitionFault::SourceTruncated { message } => (ErrorCode::SourceTruncated, message),
                    PartitionFault::ForeignWrite { expected_offset, found_offset } => (
                        ErrorCode::ForeignWrite,
                        format!(
                            "a record kmirror did not write is in the destination partition: expected to append at offset {expected_offset}, appended at {found_offset}"
                        ),
                    ),
                    PartitionFault::SourceMissing { message } => (ErrorCode::SourceTopicDeleted, message),
                    PartitionFault::DestinationRejected { message } => (ErrorCode::Internal, message),
                };
                if m.topics.get(&topic).is_some_and(|t| t.partitions.contains_key(&partition)) {
                    self.fail(mirror, &topic, partition, code, message);
                    let _ = self.flush().await;
                }
            }
            PipeEvent::Retrying { .. } if m.fenced => {}
            PipeEvent::Retrying { attempt, message } => {
                m.data_path = DataPathStatus::Retrying { attempt, message };
            }
            PipeEvent::Fenced { message } if in_group => {
                // Another instance took the slot over (this one was paused past its session
                // timeout, or the group moved the slot before this process heard of it).
                // Restarting the data path would fence the new owner in turn: let the slot go
                // and wait for the group to say what this instance owns.
                m.pipes.remove(&slot);
                tracing::warn!(%mirror, slot, "slot fenced by another instance ({message}); letting it go");
                self.let_go(&BTreeSet::from([slot])).await;
            }
            PipeEvent::Fenced { message } => {
                m.pipes.remove(&slot);
                self.after_pipe_fatal(mirror, slot, message).await;
            }
            PipeEvent::Failed { message } => {
                // The data path could not start (destination unreachable, bad client settings):
                // try again with backoff; the message stays visible meanwhile.
                tracing::error!(%mirror, slot, "data path failed: {message}");
                m.pipes.remove(&slot);
                m.pipe_restarts += 1;
                let delay = crate::domain::backoff::Backoff::PIPE_RESTART.ceiling(m.pipe_restarts);
                m.data_path = DataPathStatus::Retrying {
                    attempt: m.pipe_restarts,
                    message: format!(
                        "the data path could not start ({message}); next try in {:.1} s",
                        delay.as_secs_f64()
                    ),
                };
                m.restart_pipe_at.insert(slot, (tokio::time::Instant::now() + delay, message));
            }
        }
    }

    /// The data path hit a fatal producer error. If another instance took over, our own state
    /// writer is fenced too: then this instance stops mirroring and says why. Otherwise it was a
    /// genuine producer failure: start a new data path and resume every mirroring partition from
    /// its committed position (the new producer's init aborts anything left open), so nothing is
    /// lost or duplicated.
    pub(super) async fn after_pipe_fatal(&mut self, mirror: &str, slot: i32, message: String) {
        if !self.owns(slot) {
            return; // the slot moved to another instance meanwhile: nothing of it is ours to restart
        }
        let Ok(m) = self.mirrors.mirror(mirror) else { return };
        let probe = persist::mirror(&m.stored, self.state_partitions, &self.config.sealer);
        self.writes.push(probe);
        let probed = self.flush().await;
        if self.fenced.is_some() {
            let why = format!("another kmirror instance now mirrors this destination ({message})");
            tracing::error!(%mirror, "fenced: {why}");
            if let Some(m) = self.mirrors.get_mut(mirror) {
                m.fenced = true;
                m.data_path = DataPathStatus::Fenced { message: why };
            }
            return;
        }
        if let Err(e) = probed {
            // The destination itself is unavailable: try again later (with backoff).
            let Some(m) = self.mirrors.get_mut(mirror) else { return };
            m.pipe_restarts += 1;
            let delay = crate::domain::backoff::Backoff::PIPE_RESTART.ceiling(m.pipe_restarts);
            m.restart_pipe_at.insert(slot, (tokio::time::Instant::now() + delay, message.clone()));
            m.data_path = DataPathStatus::Retrying {
                attempt: m.pipe_restarts,
                message: format!(
                    "the destination is unavailable ({e}); data path restarts in {:.1} s",
                    delay.as_secs_f64()
                ),
            };
            return;
        }
        tracing::warn!(%mirror, slot, "data path producer failed ({message}); restarting it from the committed state");
        let Some(m) = self.mirrors.get_mut(mirror) else { return };
        m.pipe_restarts = 0;
        m.data_path = DataPathStatus::Restarting { reason: format!("after: {message}") };
        if let Some(rx) = self.spawn_pipe(mirror, slot) {
            self.wait_ready(vec![rx]).await;
        }
        let Ok(m) = self.mirrors.mirror(mirror) else { return };
        let mirroring: Vec<(String, i32)> = m
            .partitions_in(PartitionState::Mirroring)
            .into_iter()
            .filter(|(t, p)| self.slot_of(mirror, t, *p) == Some(slot))
            .collect();
        if !self.in_group() && !self.adopt_committed_positions(mirror, slot, &mirroring).await {
            return;
        }
        self.reassign_mirroring(mirror, &mirroring).await;
        let _ = self.flush().await;
    }

    /// After a data path was replaced (its init fenced every other writer with the slot's
    /// transactional id), takes the positions the state topic holds for `parts` where they are
    /// ahead of the ones here. A writer left behind (this process's or an earlier instance's, whose
    /// producer was re-created after a timeout) may have committed records and their positions
    /// after this process last heard of them; resuming from the older positions would copy those
    /// records again, and the destination ends, read afresh, would not show it. Only two state
    /// partitions are read: the slot's, which holds the positions of `parts` (all of them in
    /// `slot`), and the mirror's, which holds the mirror and topic records they are loaded with.
    ///
    /// Standalone only: in a group a fenced slot is let go and taken over from the state tail.
    /// Returns false when the state could not be read: the partitions then go FAILED (retried;
    /// their preparation compares the destination with their positions before anything is
    /// copied).
    async fn adopt_committed_positions(&mut self, mirror: &str, slot: i32, parts: &[(String, i32)]) -> bool {
        if parts.is_empty() {
            return true;
        }
        let only: Vec<i32> =
            BTreeSet::from([slot, super::slots::mirror_slot(mirror, self.state_partitions)]).into_iter().collect();
        let records = match read_state(&self.config, &*self.ports, Some(&only)).await {
            Ok(records) => records,
            Err(e) => {
                let message = format!("the committed positions could not be read after a producer failure: {e}");
                for (t, p) in parts {
                    self.fail(mirror, t, *p, ErrorCode::StateStoreUnavailable, message.clone());
                }
                let _ = self.flush().await;
                return false;
            }
        };
        let (mut loaded, _) = persist::load(&records, &self.config.sealer);
        let Some(stored) = loaded.mirrors.iter().find(|m| m.stored.spec.name == mirror) else { return true };
        let committed: HashMap<(&str, i32), MirrorPosition> = stored
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter().filter_map(|(p, rec)| Some(((t.name.as_str(), *p), rec.position?))))
            .collect();
        let mut adopted = Vec::new();
        for (t, p) in parts {
            let (Some(&theirs), Ok(rt)) = (committed.get(&(t.as_str(), *p)), self.mirrors.partition_mut(mirror, t, *p))
            else {
                continue;
            };
            if rt.record.position.is_none_or(|mine| adopt_position(mine, theirs)) {
                tracing::warn!(
                    %mirror,
                    topic = %t,
                    partition = p,
                    mine = ?rt.record.position,
                    committed = ?theirs,
                    "another writer of this slot committed after this process: resuming from its position"
                );
                rt.record.position = Some(theirs);
                adopted.push((t.clone(), *p));
            }
        }
        if !adopted.is_empty() {
            let mut maps = self.offset_maps.write().unwrap_or_else(|e| e.into_inner());
            for (t, p) in adopted {
                let key = (mirror.to_string(), t, p);
                if let Some(map) = loaded.offset_maps.remove(&key) {
                    maps.insert(key, map);
                }
            }
        }
        true
    }

    /// Retries FAILED partitions whose backoff is over, and re-runs unfinished stops.
    pub(super) async fn retry_due(&mut self) {
        if self.fenced.is_some() {
            return;
        }
        self.rejoin_if_failed().await;
        self.repair_unowned_slots();
        self.retry_takeovers().await;
        self.store_again().await;
        self.watch_clusters();
        let now_i = tokio::time::Instant::now();
        let mut due: Vec<(String, i32, String)> = Vec::new();
        for (n, m) in self.mirrors.iter_mut() {
            let slots: Vec<i32> =
                m.restart_pipe_at.iter().filter(|(_, (at, _))| *at <= now_i).map(|(s, _)| *s).collect();
            for s in slots {
                if let Some((_, msg)) = m.restart_pipe_at.remove(&s) {
                    due.push((n.clone(), s, msg));
                }
            }
        }
        for (mirror, slot, message) in due {
            self.after_pipe_fatal(&mirror, slot, message).await;
        }
        let t = now();
        let due: Vec<(String, String, i32)> = self
            .retry_candidates()
            .filter(|(.., record)| record.is_retry_due(t))
            .map(|(m, tn, p, _)| (m.to_string(), tn.to_string(), p))
            .collect();
        self.retry_partitions(due, &Event::Retry).await;
    }

    /// The FAILED partitions this instance retries: those of its slots (another instance retries
    /// its own), in mirrors that are not halted (fenced, or a source with another cluster ID).
    pub(super) fn retry_candidates(&self) -> impl Iterator<Item = (&str, &str, i32, &PartitionRecord)> {
        self.mirrors
            .iter()
            .filter(|(_, m)| !m.fenced && m.cluster_id_status != ClusterIdStatus::Mismatch)
            .flat_map(|(mn, m)| {
                m.topics
                    .iter()
                    .flat_map(move |(tn, t)| t.partitions.iter().map(move |(p, rt)| (mn.as_str(), tn.as_str(), *p, rt)))
            })
            .filter(|(.., rt)| rt.record.state == PartitionState::Failed && self.owned.contains(&rt.slot))
            .map(|(mn, tn, p, rt)| (mn, tn, p, &rt.record))
    }

    /// Applies `event` (a retry) to `partitions` and runs what they go back to, one batch per
    /// mirror. A retry of a pause unassigns again (the data path may still hold the partitions,
    /// which is why it failed); of a stop, runs the whole STOPPING sequence again.
    pub(super) async fn retry_partitions(&mut self, partitions: Vec<(String, String, i32)>, event: &Event) {
        let mut by_mirror: BTreeMap<String, Planned> = BTreeMap::new();
        for (m, tn, p) in partitions {
            if let Ok(actions) = self.apply(&m, &tn, p, event.clone()) {
                by_mirror.entry(m).or_default().push(&tn, p, actions);
            }
        }
        for (m, planned) in by_mirror {
            for (topic, p) in self.run_actions(&m, planned).await {
                tracing::info!(mirror = %m, %topic, "{} failed: {}", event.kind().verb(), p.detail);
            }
        }
    }
}

/// Whether a committed position read back from the state topic is ahead of the one held here:
/// the destination log only grows, so a later commit ends further along it.
fn adopt_position(mine: MirrorPosition, theirs: MirrorPosition) -> bool {
    theirs.destination_end_offset > mine.destination_end_offset
}
