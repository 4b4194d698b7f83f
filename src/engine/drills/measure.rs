//! What a drill waits for and measures: the produced sequence, catch-up, the group's synced
//! offsets, the stopped partitions and the destination's copy read back.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::domain::PartitionState;
use crate::domain::drill::{self, DrillCheck, Objectives, Produced, Seen};
use crate::kafka::drill::Sequence;

use super::{
    ABORTED_PER_PARTITION, CANARY_PARTITIONS, CATCH_UP_DEADLINE, COMMITTED_PER_PARTITION, DrillRun, FAILOVER_DEADLINE,
    GROUP_SYNC_DEADLINE, blocking,
};

impl DrillRun {
    pub(super) fn group_is_synced(&self) -> bool {
        let s = &self.target.sync;
        s.group_offsets
            && crate::domain::name_pattern::NameFilter::lenient(&s.group_include, &s.group_exclude)
                .matches(&self.group())
    }

    pub(super) async fn produce(&self) -> Result<Vec<Produced>, String> {
        let (bootstrap, props, canary, id, timeout) = (
            self.target.source.bootstrap_servers.clone(),
            self.target.source.properties.clone(),
            self.canary().to_string(),
            self.value.id.clone(),
            self.timeout(),
        );
        let transactional_id = format!("{}.drill.{}", self.target.cluster_name, self.mirror());
        blocking(move || {
            crate::kafka::drill::produce_sequence(
                &bootstrap,
                &props,
                &transactional_id,
                &canary,
                &id,
                Sequence {
                    partitions: CANARY_PARTITIONS,
                    committed_per_partition: COMMITTED_PER_PARTITION,
                    aborted_per_partition: ABORTED_PER_PARTITION,
                },
                timeout,
            )
        })
        .await
    }

    /// Waits until every canary partition is MIRRORING and has copied everything up to `ends`
    /// (per partition, the offset after the last produced record).
    pub(super) async fn caught_up(&self, ends: &BTreeMap<i32, i64>) -> Result<(), String> {
        let deadline = Instant::now() + CATCH_UP_DEADLINE;
        loop {
            let snap = self.handle.snapshot();
            let t = snap.mirror(self.mirror()).and_then(|m| m.topic(self.canary()));
            let mut why = format!("{} is not part of the mirror", self.canary());
            if let Some(t) = t {
                let lagging: Vec<String> = t
                    .partitions
                    .iter()
                    .filter(|p| {
                        let end = ends.get(&p.partition).copied().unwrap_or(0);
                        !(p.state == PartitionState::Mirroring
                            && p.source_last_stable_offset.is_some_and(|lso| lso >= end)
                            && p.mirrored_source_offset.is_some_and(|m| m >= end)
                            && p.lag_records == 0)
                    })
                    .map(|p| format!("partition {} {} ({} behind)", p.partition, p.state, p.lag_records))
                    .collect();
                if lagging.is_empty() && !t.partitions.is_empty() {
                    return Ok(());
                }
                why = lagging.join(", ");
                if let Some(e) = t.partitions.iter().find_map(|p| p.error.as_ref()) {
                    why = format!("{why}; {}: {}", e.code, e.message);
                }
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "the mirror did not copy the canary within {} s: {why}",
                    CATCH_UP_DEADLINE.as_secs()
                ));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Waits until the destination holds the group's committed offsets, translated.
    pub(super) async fn wait_group_synced(&self, commit: &[(i32, i64)]) -> Result<(), String> {
        let dest = self.destination_admin()?;
        let deadline = Instant::now() + GROUP_SYNC_DEADLINE;
        let mut refreshed: Option<Instant> = None;
        let group = self.group();
        loop {
            if refreshed.is_none_or(|r| r.elapsed() >= Duration::from_secs(5)) {
                let _ = self.handle.refresh_now(self.mirror()).await;
                refreshed = Some(Instant::now());
            }
            let wanted: Option<BTreeMap<i32, i64>> = commit
                .iter()
                .map(|(p, o)| self.handle.translate_offset(self.mirror(), self.canary(), *p, *o).map(|d| (*p, d)))
                .collect();
            if let (Some(wanted), Ok(have)) = (wanted, dest.list_consumer_group_offsets(&group, None, false).await) {
                let have: BTreeMap<i32, i64> =
                    have.iter().filter(|o| o.topic == self.canary()).map(|o| (o.partition, o.offset)).collect();
                if wanted.iter().all(|(p, o)| have.get(p) == Some(o)) {
                    return Ok(());
                }
            }
            if Instant::now() >= deadline {
                return Err(format!("not synced within {} s", GROUP_SYNC_DEADLINE.as_secs()));
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }

    /// Waits until every canary partition is STOPPED; returns each one's stop point (the next
    /// source offset the stop recorded: everything before it was mirrored).
    pub(super) async fn all_stopped(&self, t0: Instant) -> Result<BTreeMap<i32, (Option<i64>, i64)>, String> {
        loop {
            let snap = self.handle.snapshot();
            if let Some(t) = snap.mirror(self.mirror()).and_then(|m| m.topic(self.canary()))
                && !t.partitions.is_empty()
                && t.partitions.iter().all(|p| p.state == PartitionState::Stopped)
            {
                return Ok(t
                    .partitions
                    .iter()
                    .map(|p| (p.partition, (p.mirrored_source_offset, p.destination_stop_offset.unwrap_or(0))))
                    .collect());
            }
            if t0.elapsed() >= FAILOVER_DEADLINE {
                return Err(format!(
                    "the canary's partitions were not all STOPPED within {} s",
                    FAILOVER_DEADLINE.as_secs()
                ));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub(super) async fn verify(
        &mut self,
        produced: &[Produced],
        stop_points: &BTreeMap<i32, (Option<i64>, i64)>,
        expected_next: &BTreeMap<i32, u64>,
        group_synced: Result<(), String>,
    ) -> Result<String, String> {
        let (bootstrap, props, canary, timeout) = (
            self.target.destination_bootstrap.clone(),
            self.target.destination_properties.clone(),
            self.canary().to_string(),
            self.timeout() * 2,
        );
        let ranges: Vec<(i32, i64, i64)> = stop_points.iter().map(|(p, (_, stop))| (*p, 0, *stop)).collect();
        let (b, pr, c) = (bootstrap.clone(), props.clone(), canary.clone());
        let read = blocking(move || crate::kafka::drill::read_records(&b, &pr, &c, &ranges, false, timeout)).await?;
        let id = self.value.id.clone();
        let seen: Vec<Seen> = read
            .iter()
            .filter_map(|(p, o, v)| {
                v.as_deref().and_then(|v| drill::record_seq(&id, v)).map(|seq| Seen { partition: *p, offset: *o, seq })
            })
            .collect();
        let last_mirrored: BTreeMap<i32, Option<i64>> =
            stop_points.iter().map(|(p, (next, _))| (*p, next.map(|n| n - 1))).collect();
        let a = drill::analyse(produced, &seen, &last_mirrored);
        self.figures.records_expected_lost = Some(a.expected_lost);
        self.figures.records_lost = Some(a.lost);
        self.figures.records_duplicated = Some(a.duplicated);
        self.figures.aborted_records_visible = Some(a.aborted_visible);

        // The group: where it would resume on the destination.
        let group_check = match group_synced {
            Err(e) => DrillCheck {
                name: "group_resumed_exactly".into(),
                passed: false,
                detail: if self.group_is_synced() {
                    format!("the group's offsets did not reach the destination before the failover: {e}")
                } else {
                    format!(
                        "the mirror does not sync group {}'s offsets (sync.group_offsets, group_include, group_exclude): \
                         consumers would not resume where they stopped",
                        self.group()
                    )
                },
            },
            Ok(()) => {
                let dest = self.destination_admin()?;
                let offsets =
                    dest.list_consumer_group_offsets(&self.group(), None, false).await.map_err(|e| e.to_string())?;
                let committed: BTreeMap<i32, i64> =
                    offsets.iter().filter(|o| o.topic == canary).map(|o| (o.partition, o.offset)).collect();
                let ranges: Vec<(i32, i64, i64)> =
                    committed.iter().filter_map(|(p, o)| stop_points.get(p).map(|(_, stop)| (*p, *o, *stop))).collect();
                let (b, pr, c) = (bootstrap, props, canary.clone());
                let first =
                    blocking(move || crate::kafka::drill::read_records(&b, &pr, &c, &ranges, true, timeout)).await?;
                let found: BTreeMap<i32, Option<u64>> =
                    first.iter().map(|(p, _, v)| (*p, v.as_deref().and_then(|v| drill::record_seq(&id, v)))).collect();
                let mismatches = drill::resume_mismatches(expected_next, &found);
                self.figures.group_resumed_exactly = Some(mismatches.is_empty());
                DrillCheck {
                    name: "group_resumed_exactly".into(),
                    passed: mismatches.is_empty(),
                    detail: if mismatches.is_empty() {
                        format!(
                            "group {} resumes on the destination at exactly the next record of every partition",
                            self.group()
                        )
                    } else {
                        mismatches
                            .iter()
                            .map(|(p, want, got)| match got {
                                Some(got) => format!("partition {p}: resumes at record {got}, expected {want}"),
                                None => format!("partition {p}: no record where the group resumes, expected {want}"),
                            })
                            .collect::<Vec<_>>()
                            .join("; ")
                    },
                }
            }
        };
        let objectives = Objectives { rto_ms: self.options.rto_objective_ms, rpo_ms: self.options.rpo_objective_ms };
        self.checks.extend(drill::checks_of(&self.figures, &objectives));
        self.checks.push(group_check);
        Ok(format!(
            "{} records read back: {} lost ({} expected by the stop), {} duplicated, {} aborted visible",
            seen.len(),
            a.lost,
            a.expected_lost,
            a.duplicated,
            a.aborted_visible
        ))
    }
}
