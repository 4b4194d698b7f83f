//! The snapshot: what the coordinator's runtime state looks like to the API, the dashboard and
//! the metrics, projected from the mirror table, the instances view, drills and approvals. Pure
//! functions of that state (no I/O, no clock but the `taken_at` it is given), published on a
//! watch channel after every message the loop handles.

use super::*;

impl Coordinator {
    // ----- snapshot ----------------------------------------------------------------------

    pub(super) fn publish(&self) {
        let taken_at = now();
        let cluster = self.cluster_snapshot(taken_at);
        let owners: HashMap<i32, &str> =
            cluster.instances.iter().flat_map(|i| i.slots.iter().map(move |s| (*s, i.id.as_str()))).collect();
        let mirrors = self
            .mirrors
            .values()
            .map(|m| {
                let topics = m
                    .topics
                    .iter()
                    .map(|(tn, t)| {
                        let partitions: Vec<PartitionSnapshot> = t
                            .partitions
                            .iter()
                            .map(|(p, rt)| {
                                let slot = rt.slot;
                                let mut snap = partition_snapshot(tn, *p, rt, taken_at);
                                snap.slot = slot;
                                snap.owner = owners.get(&slot).map(|o| o.to_string());
                                snap
                            })
                            .collect();
                        TopicSnapshot {
                            name: tn.clone(),
                            state: roll_up(partitions.iter().map(|p| p.state)),
                            source_topic_id: t.source_topic_id.clone(),
                            destination_topic_id: t.destination_topic_id.clone(),
                            lag_records: partitions.iter().map(|p| p.lag_records).sum(),
                            lag_seconds: partitions.iter().map(|p| p.lag_seconds).fold(0.0, f64::max),
                            partitions,
                            failback_mirror: m.failbacks.get(tn).cloned(),
                        }
                    })
                    .collect();
                MirrorSnapshot {
                    name: m.stored.spec.name.clone(),
                    source_bootstrap_servers: m.stored.spec.source.bootstrap_servers.clone(),
                    source_properties: crate::domain::secrets::redact(&m.stored.spec.source.properties),
                    expected_source_cluster_id: m.stored.spec.expected_source_cluster_id.clone(),
                    sync_spec: m.stored.spec.sync.clone(),
                    observed_source_cluster_id: m.observed_cluster_id.clone(),
                    cluster_id_status: m.cluster_id_status,
                    cluster_id_checked_at: m.cluster_id_checked_at,
                    cluster_id_error: m.cluster_id_error.clone(),
                    data_path: shown_data_path(m, &self.config.instance_id, &owners),
                    // The live throttle (what the data paths here apply), not only the stored definition.
                    replication_throttle_bytes_per_sec: m.throttle.rate(),
                    throttled_seconds: m.throttle.waited().as_secs_f64(),
                    created_at: m.stored.created_at,
                    sync: m.sync.clone(),
                    groups: m.group_views.clone(),
                    topics,
                    topic_include: m.stored.spec.topic_include.clone(),
                    topic_exclude: m.stored.spec.topic_exclude.clone(),
                    discovery: {
                        let slot = slots::mirror_slot(&m.stored.spec.name, self.state_partitions);
                        let runs_on = owners.get(&slot).map(|o| o.to_string());
                        m.discovery.snapshot(runs_on, self.owned.contains(&slot))
                    },
                    approval: m.stored.spec.approval.clone(),
                }
            })
            .collect();
        let mut drills: Vec<crate::engine::DrillView> =
            self.drills.values().map(crate::engine::DrillView::of).collect();
        drills.sort_by(|a, b| b.requested_at.cmp(&a.requested_at).then_with(|| b.id.cmp(&a.id)));
        let snap = Snapshot {
            taken_at,
            destination_cluster_id: self.destination_cluster_id.clone(),
            destination_brokers: self.destination_brokers.clone(),
            mirrors,
            cluster,
            drills,
            break_glass: self.break_glass.iter().map(|((m, a), n)| (m.clone(), a.clone(), *n)).collect(),
            approvals: {
                let approvals = self.approvals.read().unwrap_or_else(|e| e.into_inner());
                let mut requests: Vec<crate::engine::ApprovalRecord> =
                    approvals.iter().filter(|(id, a)| a.request_id == **id).map(|(_, a)| a.clone()).collect();
                requests
                    .sort_by(|a, b| b.requested_at.cmp(&a.requested_at).then_with(|| b.request_id.cmp(&a.request_id)));
                requests
            },
        };
        self.snapshot_tx.send_replace(Arc::new(snap));
    }
}

/// What a mirror's data path is doing, as the snapshot shows it: a mirror with no data path here
/// (nothing started, or every partition in another instance's slots) says so instead of the
/// status its last data path here left.
pub(super) fn shown_data_path(m: &MirrorRt, this: &str, owners: &HashMap<i32, &str>) -> DataPathStatus {
    if !m.pipes.is_empty()
        || !m.restart_pipe_at.is_empty()
        || matches!(m.data_path, DataPathStatus::Fenced { .. } | DataPathStatus::Failed { .. })
    {
        return m.data_path.clone();
    }
    let instances: BTreeSet<&str> = m
        .topics
        .values()
        .flat_map(|t| t.partitions.values())
        .filter_map(|rt| owners.get(&rt.slot).copied())
        .filter(|o| *o != this)
        .collect();
    if instances.is_empty() {
        DataPathStatus::Idle
    } else {
        DataPathStatus::Elsewhere { instances: instances.into_iter().map(str::to_string).collect() }
    }
}

/// The next source offset there is something to mirror from: the committed position, or the
/// fetch position when the consumer moved past trailing control records.
pub(super) fn next_to_mirror(rt: &PartRt) -> Option<i64> {
    let committed = rt.record.position.map(|p| p.next_source_offset);
    let fetched = rt.fetch_position.filter(|_| rt.record.state == PartitionState::Mirroring);
    match (committed, fetched) {
        (Some(c), Some(f)) => Some(c.max(f)),
        (c, f) => c.or(f),
    }
}

/// The lag, which is also what a failover now would leave unmirrored: one definition
/// (`lineage::failover_impact`) for the engine, the API and the failover dialog.
pub(super) fn lag_records(rt: &PartRt) -> i64 {
    let Some(lso) = rt.offsets.source_lso else { return 0 };
    let next = next_to_mirror(rt).unwrap_or_else(|| rt.offsets.source_start.unwrap_or(0));
    crate::domain::lineage::failover_impact(next, lso).unmirrored_records
}

/// Records written on the destination after a STOPPED partition's stop point, as the lineage
/// counts them (the start decision refuses exactly these).
pub(super) fn local_writes(rt: &PartRt) -> i64 {
    use crate::domain::lineage::{LogBounds, divergence};
    let (Some(stop), Some(hwm)) = (rt.record.stop_point, rt.offsets.destination_hwm) else { return 0 };
    if rt.record.state != PartitionState::Stopped {
        return 0;
    }
    divergence(&stop, LogBounds::observed(rt.offsets.destination_start, hwm)).map_or(0, |d| d.local_records)
}

/// Source offsets a STOPPED partition's old source received after the failover
/// (`lineage::source_writes_after_stop`); `None` when not STOPPED or not read since it stopped.
pub(super) fn source_writes_after_stop(rt: &PartRt) -> Option<i64> {
    let rec = &rt.record;
    let (Some(stop), Some(lso), Some(seen)) = (rec.stop_point, rt.offsets.source_lso, rt.offsets.source_after_stop)
    else {
        return None;
    };
    // A reading for an earlier stop says nothing about this one.
    (rec.state == PartitionState::Stopped && seen.since == rec.state_since).then(|| {
        let first = match seen.first_by_time {
            Some(f) => f.min(seen.end_first_seen),
            None => seen.end_first_seen,
        };
        crate::domain::lineage::source_writes_after_stop(&stop, Some(first), lso)
    })
}

pub(super) fn partition_snapshot(topic: &str, partition: i32, rt: &PartRt, t: Timestamp) -> PartitionSnapshot {
    let rec = &rt.record;
    let lag = if rec.state == PartitionState::Stopped { 0 } else { lag_records(rt) };
    let lag_seconds = if lag > 0 {
        rt.caught_up_at.map_or(0.0, |c| (t.as_millis() - c.as_millis()).max(0) as f64 / 1000.0)
    } else {
        0.0
    };
    PartitionSnapshot {
        topic: topic.to_string(),
        partition,
        state: rec.state,
        state_since: rec.state_since,
        state_epoch: rec.state_epoch,
        source_log_start_offset: rt.offsets.source_start,
        source_last_stable_offset: rt.offsets.source_lso,
        source_high_watermark: rt.offsets.source_hwm,
        mirrored_source_offset: next_to_mirror(rt),
        destination_high_watermark: rt.offsets.destination_hwm,
        lag_records: lag,
        lag_seconds,
        last_mirrored_epoch: rec.position.map(|p| p.source_leader_epoch).filter(|e| *e >= 0),
        error: rec.error.as_ref().map(|e| PartitionErrorView {
            code: e.code.as_str().to_string(),
            message: e.message.clone(),
            retryable: e.code.is_retryable(),
            recoverable: crate::domain::recover_refusal(rec).is_none(),
        }),
        retry_count: rec.retry_count,
        next_retry_at: rec.next_retry_at,
        records_mirrored: rt.records_mirrored,
        bytes_mirrored: rt.bytes_mirrored,
        destination_stop_offset: rec.stop_point.map(|s| s.destination_stop_offset),
        local_writes: local_writes(rt),
        source_writes_after_stop: source_writes_after_stop(rt),
        slot: 0,
        owner: None,
        failed_in: rec.failed_in(),
        resync_pending: rec.truncation.is_resync(),
        idle: rt.idle && rec.state == PartitionState::Mirroring,
    }
}
