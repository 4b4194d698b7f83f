//! Records written for two-person approval and drills (`engine::approvals`, `engine::drills`):
//! audit entries with their approval records, drill records, what a drill needs of its mirror,
//! and removing a drill's canary from its mirror.

use super::*;
use crate::engine::drills::{DrillTarget, INTERRUPTED, MAX_DRILLS_PER_MIRROR, RUNNING};
use crate::engine::{ApprovalRecord, ApprovalStatus};
use crate::store::DrillValue;

/// How long an own write is laid over the state topic's views at most (it is read back within
/// milliseconds; this bounds the case where another instance rewrote the same record at once).
const OWN_WRITE_WINDOW: Duration = Duration::from_secs(30);

/// Audit entries (with their approval records) this instance wrote, until the state topic's
/// tail has read them back. Rebuilding the views from the state topic when another record
/// arrives would otherwise drop them for a moment: a request answered with 202 and then read at
/// once would be "not found".
#[derive(Debug, Default)]
pub(super) struct OwnWrites(Vec<(OperationView, Option<ApprovalRecord>, Instant)>);

impl OwnWrites {
    pub(super) fn push(&mut self, op: OperationView, approval: Option<ApprovalRecord>) {
        self.0.retain(|(o, _, _)| o.id != op.id);
        self.0.push((op, approval, Instant::now()));
    }

    /// Lays the writes not yet read back over views rebuilt from the state topic, and forgets
    /// those it has read back (its version equals the write) or that are too old.
    pub(super) fn overlay(
        &mut self,
        ops: &mut std::collections::VecDeque<OperationView>,
        approvals: &mut HashMap<String, ApprovalRecord>,
    ) {
        self.0.retain(|(op, approval, at)| {
            let read_back = ops.iter().any(|o| o.id == op.id && o.finished_at == op.finished_at)
                && approval.as_ref().is_none_or(|a| approvals.get(&op.id) == Some(a));
            !read_back && at.elapsed() < OWN_WRITE_WINDOW
        });
        for (op, approval, _) in &self.0 {
            if let Some(a) = approval {
                approvals.insert(op.id.clone(), a.clone());
            }
            match ops.iter_mut().find(|o| o.id == op.id) {
                Some(stored) => *stored = op.clone(),
                None => ops.push_back(op.clone()),
            }
        }
        while ops.len() > persist::MAX_OPERATIONS {
            ops.pop_front();
        }
    }
}

impl Coordinator {
    /// Installs the approval records and drills a load found.
    pub(super) fn install_audit(&mut self, loaded: &mut persist::Loaded) {
        *self.approvals.write().unwrap_or_else(|e| e.into_inner()) = std::mem::take(&mut loaded.approvals);
        self.drills =
            std::mem::take(&mut loaded.drills).into_iter().map(|d| ((d.mirror.clone(), d.id.clone()), d)).collect();
    }

    /// Writes an audit entry and the approval record it carries, and keeps both for the views.
    pub(super) async fn record_entry(
        &mut self,
        op: OperationView,
        approval: Option<ApprovalRecord>,
    ) -> Result<(), EngineError> {
        self.check_writable()?;
        self.writes.push(persist::operation_with(&op, approval.as_ref(), self.state_partitions));
        self.flush().await?;
        if self.group.is_some() {
            self.own_writes.push(op.clone(), approval.clone());
        }
        if let Some(a) = approval {
            let mut approvals = self.approvals.write().unwrap_or_else(|e| e.into_inner());
            let first = approvals.insert(op.id.clone(), a.clone()).is_none();
            if first && a.status == ApprovalStatus::BreakGlass {
                *self.break_glass.entry((a.mirror.clone(), a.action.as_str().to_string())).or_default() += 1;
            }
        }
        let mut ops = self.operations.write().unwrap_or_else(|e| e.into_inner());
        match ops.iter_mut().find(|o| o.id == op.id) {
            Some(stored) => *stored = op,
            None => {
                ops.push_back(op);
                while ops.len() > persist::MAX_OPERATIONS {
                    ops.pop_front();
                }
            }
        }
        Ok(())
    }

    /// Writes a drill's record; a mirror keeps its newest [`MAX_DRILLS_PER_MIRROR`] drills (the
    /// records of older ones are deleted).
    pub(super) async fn record_drill(&mut self, value: DrillValue) -> Result<(), EngineError> {
        self.check_writable()?;
        self.writes.push(persist::drill(&value, self.state_partitions));
        let key = (value.mirror.clone(), value.id.clone());
        let is_new = !self.drills.contains_key(&key);
        let mut dropped = Vec::new();
        if is_new {
            let mut of_mirror: Vec<(i64, String)> = self
                .drills
                .values()
                .filter(|d| d.mirror == value.mirror)
                .map(|d| (d.requested_at, d.id.clone()))
                .collect();
            if of_mirror.len() >= MAX_DRILLS_PER_MIRROR {
                of_mirror.sort();
                for (_, id) in of_mirror.iter().take(of_mirror.len() + 1 - MAX_DRILLS_PER_MIRROR) {
                    self.writes.push(persist::drill_tombstone(&value.mirror, id, self.state_partitions));
                    dropped.push((value.mirror.clone(), id.clone()));
                }
            }
        }
        self.flush().await?;
        for k in dropped {
            self.drills.remove(&k);
        }
        self.drills.insert(key, value);
        self.publish();
        Ok(())
    }

    /// Drills this instance ran that were still running when it stopped: they never finish, and
    /// say so. Their canary is left behind, as the record's steps tell.
    pub(super) async fn mark_interrupted_drills(&mut self) {
        let now = now().as_millis();
        let mine: Vec<DrillValue> = self
            .drills
            .values()
            .filter(|d| d.status == RUNNING && d.instance == self.config.instance_id)
            .cloned()
            .collect();
        for mut d in mine {
            d.status = INTERRUPTED.into();
            d.finished_at = Some(now);
            for s in d.steps.iter_mut().filter(|s| s.status == "running" || s.status == "pending") {
                s.status = "skipped".into();
            }
            tracing::warn!(mirror = %d.mirror, drill = %d.id, canary = %d.canary_topic, "a drill was interrupted by a restart: its canary topic may be left behind");
            if let Err(e) = self.record_drill(d).await {
                tracing::warn!("cannot record an interrupted drill: {e}");
            }
        }
    }

    /// What a drill of `mirror` needs: its source connection with secrets opened, and the
    /// clusters.
    pub(super) fn drill_target(&self, mirror: &str) -> Result<DrillTarget, EngineError> {
        let m = self.mirrors.get(mirror).ok_or_else(|| EngineError::mirror_not_found(mirror))?;
        if let Some(e) = &m.secret_error {
            return Err(EngineError::rejected(ProblemKind::InvalidProperty, e.clone()));
        }
        Ok(DrillTarget {
            source: m.stored.spec.source.clone(),
            source_cluster_id: m
                .observed_cluster_id
                .clone()
                .or_else(|| m.stored.spec.expected_source_cluster_id.clone()),
            destination_bootstrap: self.config.destination_bootstrap.clone(),
            destination_properties: self.config.destination_properties.clone(),
            destination_cluster_id: self.destination_cluster_id.clone(),
            instance_id: self.config.instance_id.clone(),
            cluster_name: self.config.cluster_name.clone(),
            state_topic: self.config.state_topic.clone(),
            request_timeout: self.config.request_timeout,
            signing_key: self.config.drill_signing_key.clone(),
            sync: m.stored.spec.sync.clone(),
            topics: m.topics.keys().cloned().collect(),
        })
    }

    /// Removes a topic whose partitions are all STOPPED from a mirror: its MirrorTopic,
    /// partition and offset-map records are deleted and its LastMirrorEpochs entry dropped. The
    /// topic itself stays on both clusters.
    pub(super) async fn forget_topic(&mut self, mirror: &str, topic: &str) -> Result<(), EngineError> {
        self.check_writable()?;
        let m = self.mirrors.mirror(mirror)?;
        let t = m.topics.get(topic).ok_or_else(|| table::Missing::topic(mirror, topic))?;
        if let Some((p, rt)) = t.partitions.iter().find(|(_, rt)| rt.record.state != PartitionState::Stopped) {
            return Err(EngineError::rejected(
                ProblemKind::IllegalTransition,
                format!("partition {p} of {topic:?} is {}, not STOPPED", rt.record.state.as_str()),
            ));
        }
        let n = self.state_partitions;
        let mut writes = vec![persist::topic_tombstone(mirror, topic, n)];
        {
            let maps = self.offset_maps.read().unwrap_or_else(|e| e.into_inner());
            for p in t.partitions.keys() {
                writes.push(persist::partition_tombstone(mirror, &t.source_topic_id, *p, n));
                if let Some(map) = maps.get(&(mirror.to_string(), topic.to_string(), *p)) {
                    for first in map.stretch_starts() {
                        writes.push(persist::offset_runs_tombstone(mirror, &t.source_topic_id, *p, first, n));
                    }
                }
            }
        }
        let mut lme = m.last_mirror_epochs.clone();
        let lme_changed = lme.remove_topic(topic);
        if lme_changed {
            writes.push(persist::last_mirror_epochs(mirror, &lme, n));
        }
        let partitions: Vec<i32> = t.partitions.keys().copied().collect();
        self.writes.extend(writes);
        self.flush().await?;
        if let Some(m) = self.mirrors.get_mut(mirror) {
            m.topics.remove(topic);
            m.topic_ids.write().unwrap_or_else(|e| e.into_inner()).remove(topic);
            if lme_changed {
                m.last_mirror_epochs = lme;
            }
            m.failbacks.remove(topic);
        }
        {
            let mut maps = self.offset_maps.write().unwrap_or_else(|e| e.into_inner());
            for p in partitions {
                maps.remove(&(mirror.to_string(), topic.to_string(), p));
            }
        }
        self.lineage_reads.forget(mirror);
        self.config_reads.forget(mirror);
        self.publish();
        tracing::info!(%mirror, %topic, "topic removed from the mirror");
        Ok(())
    }
}

#[cfg(test)]
mod own_write_tests {
    use super::*;

    fn op(id: &str, finished: Option<i64>) -> OperationView {
        OperationView {
            id: id.into(),
            mirror: "m".into(),
            kind: OperationKind::Stop,
            topics: vec!["t".into()],
            requested_by: "alice".into(),
            client_address: None,
            requested_at: 1,
            finished_at: finished,
            results: Vec::new(),
            results_omitted: Default::default(),
            accepted_by: None,
        }
    }

    /// A write the tail has not read back survives a rebuild from the state topic; once read
    /// back (the same version) it is forgotten, so a later version from elsewhere wins.
    #[test]
    fn an_own_write_stays_visible_until_read_back() {
        let mut own = OwnWrites::default();
        own.push(op("op-2", None), None);
        let mut ops: std::collections::VecDeque<OperationView> = [op("op-1", Some(1))].into();
        let mut approvals = HashMap::new();
        own.overlay(&mut ops, &mut approvals);
        assert_eq!(ops.iter().map(|o| o.id.as_str()).collect::<Vec<_>>(), ["op-1", "op-2"], "not read back yet");
        // Read back: the rebuilt view has it; the overlay forgets it.
        let mut ops: std::collections::VecDeque<OperationView> = [op("op-1", Some(1)), op("op-2", None)].into();
        own.overlay(&mut ops, &mut approvals);
        assert!(own.0.is_empty());
        // A later version written elsewhere is not overwritten by the old own write.
        let mut ops: std::collections::VecDeque<OperationView> = [op("op-2", Some(9))].into();
        own.overlay(&mut ops, &mut approvals);
        assert_eq!(ops[0].finished_at, Some(9));
    }
}
