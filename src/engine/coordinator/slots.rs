//! Slots: the unit of ownership and of the data path (DESIGN.md section 10).
//!
//! A slot is one partition of `__mirror_state`. Every mirrored partition belongs to the slot its
//! state records go to (`store::partitioning::state_partition`), and every mirror's metadata work
//! to the slot of its mirror-level records (`mirror_partition`). A mirror's partitions in one slot
//! are mirrored by one data path (a thread with a `read_committed` source consumer and a
//! transactional producer) whose transactional id is the slot's, derived from the cluster name:
//! whichever instance owns the slot, its writer has the same id, so taking a slot over
//! (`init_transactions`) fences the previous owner and aborts its open transaction.
//!
//! One data path per (mirror, slot), not per slot: a slot's partitions of different mirrors come
//! from different source clusters, and a consumer reads one cluster. The transactional id names
//! both, so the fencing unit is still "this slot's partitions of this mirror".
//!
//! The slot pipes of one process run in parallel, so a mirror now uses as many cores as it has
//! slots with partitions.

use super::*;
use crate::data_path::FinalPosition;

/// The transactional id of `mirror`'s data path for `slot` in the deployment `cluster`.
pub fn slot_transactional_id(cluster: &str, slot: i32, mirror: &str) -> String {
    format!("{cluster}.slot-{slot}.mirror.{mirror}")
}

/// Transactional ids the single-pipe-per-mirror layout used for `mirror` (before slots): fenced
/// once when the mirror's slots are taken over, so an open transaction a process of that layout
/// left behind is aborted instead of holding back the last stable offset until it times out.
pub(super) fn legacy_transactional_ids(config: &EngineConfig, mirror: &str) -> Vec<String> {
    let mut ids = vec![format!("{}.mirror.{mirror}", config.instance_id)];
    let by_cluster = format!("{}.mirror.{mirror}", config.cluster_name);
    if !ids.contains(&by_cluster) {
        ids.push(by_cluster);
    }
    ids
}

fn parts(n: i32) -> std::num::NonZeroU32 {
    std::num::NonZeroU32::new(n.max(1) as u32).expect("at least one partition")
}

/// The slot of a partition of a topic whose source topic ID is `topic_id`.
pub(super) fn slot_of_partition(mirror: &str, topic_id: &str, partition: i32, slots: i32) -> i32 {
    crate::store::partitioning::state_partition(mirror, topic_id, partition, parts(slots))
}

/// The slot that owns a mirror's metadata work (its mirror-level records' partition).
pub(super) fn mirror_slot(mirror: &str, slots: i32) -> i32 {
    crate::store::partitioning::mirror_partition(mirror, parts(slots))
}

/// What a release (`Unassign`) of one slot's partitions came to.
pub(super) struct Released {
    pub(super) partitions: Vec<(String, i32)>,
    pub(super) outcome: Result<Vec<FinalPosition>, PipeError>,
}

impl Coordinator {
    /// The slot of `mirror`'s partition (`None` for an unknown topic).
    pub(super) fn slot_of(&self, mirror: &str, topic: &str, partition: i32) -> Option<i32> {
        self.mirrors.partition(mirror, topic, partition).ok().map(|rt| rt.slot)
    }

    /// Whether this process owns `slot` (always, standalone).
    pub(super) fn owns(&self, slot: i32) -> bool {
        self.owned.contains(&slot)
    }

    /// Whether this process owns the slot of `mirror`'s partition.
    pub(super) fn owns_partition(&self, mirror: &str, topic: &str, partition: i32) -> bool {
        self.slot_of(mirror, topic, partition).is_some_and(|s| self.owns(s))
    }

    /// Whether this process runs `mirror`'s metadata work (its mirror slot is owned).
    pub(super) fn owns_mirror(&self, mirror: &str) -> bool {
        self.owns(mirror_slot(mirror, self.state_partitions))
    }

    /// Groups partitions of `mirror` by slot.
    pub(super) fn by_slot(&self, mirror: &str, parts: Vec<(String, i32)>) -> BTreeMap<i32, Vec<(String, i32)>> {
        let mut out: BTreeMap<i32, Vec<(String, i32)>> = BTreeMap::new();
        for (t, p) in parts {
            if let Some(s) = self.slot_of(mirror, &t, p) {
                out.entry(s).or_default().push((t, p));
            }
        }
        out
    }

    /// The slots holding partitions of `mirror`.
    pub(super) fn slots_of_mirror(&self, mirror: &str) -> BTreeSet<i32> {
        let Some(m) = self.mirrors.get(mirror) else { return BTreeSet::new() };
        m.topics.values().flat_map(|t| t.partitions.values().map(|rt| rt.slot)).collect()
    }

    /// Starts `mirror`'s data path for `slot` unless it has one (or the mirror is gone). Returns
    /// the new data path's readiness, as [`spawn_pipe`](Self::spawn_pipe) does.
    pub(super) fn ensure_pipe(&mut self, mirror: &str, slot: i32) -> Option<tokio::sync::oneshot::Receiver<()>> {
        if self.mirrors.get(mirror).is_none_or(|m| m.pipes.contains_key(&slot)) {
            return None;
        }
        self.spawn_pipe(mirror, slot)
    }

    /// Starts `mirror`'s data path for `slot`. Returns a receiver that resolves when its producer
    /// is initialised (and the slot's previous writer fenced).
    pub(super) fn spawn_pipe(&mut self, mirror: &str, slot: i32) -> Option<tokio::sync::oneshot::Receiver<()>> {
        let m = self.mirrors.get(mirror)?;
        if let Some(why) = &m.secret_error {
            // Its clients cannot authenticate: the data path stays failed with the reason.
            let message = why.clone();
            self.mirrors.get_mut(mirror)?.data_path = DataPathStatus::Failed { message };
            return None;
        }
        let config = PipeConfig {
            mirror: mirror.to_string(),
            slot,
            source_bootstrap: m.stored.spec.source.bootstrap_servers.clone(),
            source_properties: m.stored.spec.source.properties.clone(),
            destination_bootstrap: self.config.destination_bootstrap.clone(),
            destination_properties: self.config.destination_properties.clone(),
            transactional_id: slot_transactional_id(&self.config.cluster_name, slot, mirror),
            commit_interval: self.config.commit_interval,
            early_commit_interval: self.config.early_commit_interval,
            commit_max_bytes: self.config.commit_max_bytes,
            state_topic: self.config.state_topic.clone(),
            transaction_timeout: self.config.request_timeout,
            prefetch_kbytes: crate::kafka::pipe::prefetch_kbytes(usize::try_from(self.state_partitions).unwrap_or(1)),
            throttle: Arc::clone(&m.throttle),
            shared_source_consumer: (self.config.source_consumers == crate::engine::SourceConsumers::PerMirror)
                .then(|| format!("{}/{}", self.config.cluster_name, self.config.instance_id)),
        };
        let encode = persist::progress_encoder(
            mirror.to_string(),
            Arc::clone(&m.topic_ids),
            Arc::clone(&m.new_lineage),
            self.state_partitions,
        );
        let (ev_tx, mut ev_rx) = mpsc::unbounded_channel();
        let internal = self.internal_tx.clone();
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let name = mirror.to_string();
        // Forward the pipe's events, tagged with the mirror and slot, and signal readiness once.
        tokio::spawn(async move {
            let mut ready_tx = Some(ready_tx);
            while let Some(ev) = ev_rx.recv().await {
                if matches!(ev, PipeEvent::Ready | PipeEvent::Failed { .. })
                    && let Some(tx) = ready_tx.take()
                {
                    let _ = tx.send(());
                }
                if internal.send(Internal::Pipe(name.clone(), slot, ev)).is_err() {
                    break;
                }
            }
        });
        let spawned = self.ports.spawn_data_path(config, encode, ev_tx, self.runtime.clone());
        let m = self.mirrors.get_mut(mirror)?;
        match spawned {
            Ok((tx, join)) => {
                m.pipes.insert(slot, PipeRt { tx, join: Some(join) });
                Some(ready_rx)
            }
            Err(e) => {
                m.data_path = DataPathStatus::Failed { message: format!("cannot start its thread: {e}") };
                None
            }
        }
    }

    /// Hands partitions to their slots' data paths, starting a data path where its slot has none
    /// yet. Partitions of slots this process does not own are left to their owner.
    pub(super) fn assign(&mut self, mirror: &str, specs: Vec<AssignSpec>) {
        let mut by_slot: BTreeMap<i32, Vec<AssignSpec>> = BTreeMap::new();
        for s in specs {
            match self.slot_of(mirror, &s.topic, s.partition) {
                Some(slot) if self.owns(slot) => by_slot.entry(slot).or_default().push(s),
                _ => {}
            }
        }
        for (slot, specs) in by_slot {
            let _ = self.ensure_pipe(mirror, slot);
            let Some(m) = self.mirrors.get_mut(mirror) else { return };
            // Held by a data path from now on: neither idle nor idle since long ago (`idle`).
            let now = tokio::time::Instant::now();
            for s in &specs {
                if let Some(rt) = m.topics.get_mut(&s.topic).and_then(|t| t.partitions.get_mut(&s.partition)) {
                    rt.idle = false;
                    rt.active_at = now;
                }
            }
            if let Some(p) = m.pipes.get(&slot)
                && p.tx.send(PipeCommand::Assign(specs)).is_err()
            {
                m.data_path = DataPathStatus::Failed { message: "its thread has stopped".into() };
            }
        }
    }

    /// Removes partitions of any topics from their slots' data paths: one step per slot (one
    /// abort, one fence), the slots in parallel. A slot without a data path holds nothing.
    pub(super) async fn unassign_many(
        &mut self,
        mirror: &str,
        parts: Vec<(String, i32)>,
        finish: Finish,
        fence: bool,
    ) -> Vec<Released> {
        let groups = self.by_slot(mirror, parts);
        let wait = self.config.request_timeout * 2;
        let mut pending = Vec::new();
        let mut out = Vec::new();
        for (slot, partitions) in groups {
            let Some(p) = self.mirrors.get(mirror).and_then(|m| m.pipes.get(&slot)) else {
                out.push(Released { partitions, outcome: Ok(Vec::new()) });
                continue;
            };
            let (reply, rx) = tokio::sync::oneshot::channel();
            let sent = std::time::Instant::now();
            let cmd = PipeCommand::Unassign { partitions: partitions.clone(), finish, fence, sent, reply };
            if p.tx.send(cmd).is_err() {
                let e = PipeError::Stopped("its thread has ended".into());
                out.push(Released { partitions, outcome: Err(e) });
                continue;
            }
            pending.push(async move {
                let outcome = match tokio::time::timeout(wait, rx).await {
                    Ok(Ok(r)) => r,
                    Ok(Err(_)) => Err(PipeError::Stopped("its thread has ended".into())),
                    Err(_) => Err(PipeError::NoAnswer),
                };
                // With the data path's own log of the same release, this shows how long the
                // command waited for the data path's thread (the thread logs that wait too, `Pipe::log_wait`).
                let took = sent.elapsed();
                if took >= crate::data_path::SLOW_TO_LOG {
                    tracing::info!(slot, partitions = partitions.len(), ms = took.as_millis() as u64, "slow release");
                }
                Released { partitions, outcome }
            });
        }
        out.extend(futures_util::future::join_all(pending).await);
        out
    }

    /// Shuts down `mirror`'s data paths of `slots` (every slot when `None`): open transactions are
    /// aborted, committed state is final.
    pub(super) async fn shut_down_pipes(&mut self, mirror: &str, slots: Option<&BTreeSet<i32>>, join: bool) {
        let Some(m) = self.mirrors.get_mut(mirror) else { return };
        let chosen: Vec<i32> = m.pipes.keys().copied().filter(|s| slots.is_none_or(|set| set.contains(s))).collect();
        let pipes: Vec<PipeRt> = chosen.iter().filter_map(|s| m.pipes.remove(s)).collect();
        for s in &chosen {
            m.restart_pipe_at.remove(s);
        }
        futures_util::future::join_all(pipes.into_iter().map(|p| p.shut_down(join))).await;
    }
}

impl Coordinator {
    /// Whether slots are shared with other instances through the group.
    pub(super) fn in_group(&self) -> bool {
        matches!(self.config.ownership, Ownership::Group { .. })
    }

    /// Stops mirroring `slots` here: their data paths end (open transactions aborted; what is
    /// committed is final) and their partitions are from now on shown as their new owner writes
    /// them. Nothing is written: the slots may already have another owner.
    pub(super) async fn let_go(&mut self, slots: &BTreeSet<i32>) {
        for s in slots {
            self.owned.remove(s);
        }
        // Whether their partitions are idle is the new owner's to say.
        for m in self.mirrors.values_mut() {
            for rt in m.topics.values_mut().flat_map(|t| t.partitions.values_mut()) {
                if slots.contains(&rt.slot) {
                    rt.idle = false;
                }
            }
        }
        let names: Vec<String> = self.mirrors.keys().cloned().collect();
        for name in names {
            self.shut_down_pipes(&name, Some(slots), false).await;
        }
    }
}

impl Coordinator {
    /// This instance as the instances view shows it.
    pub(super) fn this_instance(&self, t: Timestamp) -> InstanceSnapshot {
        let slots: Vec<i32> = self.owned.iter().copied().collect();
        let partitions = self
            .mirrors
            .values()
            .flat_map(|m| m.topics.values().flat_map(|t| t.partitions.values()))
            .filter(|rt| self.owned.contains(&rt.slot))
            .count() as u64;
        let advertised_url = match &self.config.ownership {
            Ownership::Group { advertised_url, .. } => advertised_url.clone(),
            Ownership::Standalone => None,
        };
        InstanceSnapshot {
            id: self.config.instance_id.clone(),
            advertised_url,
            version: env!("CARGO_PKG_VERSION").to_string(),
            slots,
            partitions,
            last_heartbeat: t,
            started_at: self.started_at,
            this: true,
        }
    }

    /// The deployment as this instance sees it: itself, and the others by their heartbeats.
    pub(super) fn cluster_snapshot(&self, t: Timestamp) -> ClusterSnapshot {
        let mut instances = vec![self.this_instance(t)];
        if let Some(g) = &self.group {
            instances.extend(g.others(&self.config.instance_id, &self.owned, t));
        }
        ClusterSnapshot {
            cluster_name: self.config.cluster_name.clone(),
            mode: if self.in_group() { "group" } else { "standalone" }.to_string(),
            this_instance: self.config.instance_id.clone(),
            slots: self.state_partitions,
            instances,
            rebalances: self.group.as_ref().and_then(|g| g.member.as_ref()).map_or(0, |m| m.rebalances()),
        }
    }
}
