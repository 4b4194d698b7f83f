//! Failback at the start of a topic (issue 18, DESIGN.md section 5): a mirror whose destination
//! topic already holds records may adopt it when those records came from the mirror's source in
//! the first place (the old source failing back from the old destination). The source's
//! `__mirror_state` says so (`engine::failback::find`); the records here after the data that
//! crossed are counted (`read_committed`: markers and aborted records are not records), and
//! `domain::lineage::decide_failback` decides per partition.
//!
//! Adopting means: each partition starts with the committed position the lineage gives (the
//! source's stop offset; the destination's end), so the ordinary start path resumes from it, and
//! with the inverse of the other mirror's offset map as its own history, so consumer groups that
//! moved to the other side translate back exactly.

use super::lifecycle::offsets_of;
use crate::domain::lineage::{
    FailbackCopy, FailbackPreview, LogBounds, PartitionLineage, RecordScan, StartDecision, decide_failback,
};
use crate::domain::offset_map::{OffsetMap, Run};

use super::*;

/// What a failback start adopts, per partition.
pub(super) struct FailbackPlan {
    /// The mirror on the source that copied the topic from this cluster.
    pub(super) from_mirror: String,
    /// Where each partition starts (its committed position from now on).
    pub(super) positions: BTreeMap<i32, MirrorPosition>,
    /// The inherited history of each partition.
    pub(super) maps: BTreeMap<i32, OffsetMap>,
    /// What the start will copy per partition (the answer of `validate_only`).
    pub(super) preview: FailbackPreview,
}

impl Coordinator {
    /// The failback plan for `topic` of `mirror`, whose destination topic (`dest_topic_id`)
    /// holds records: `None` when the source's state has no lineage for it (then it is not a
    /// failback, and the caller refuses to adopt a topic with records), an error when the
    /// lineage exists but cannot be used, or when records here never reached the other side
    /// (`DESTINATION_DIVERGED`, with their count, offsets and time range per partition).
    /// `source_starts`: the source's log starts, when this mirror has its own lineage of the
    /// topic (a restart; a first start has none).
    pub(super) async fn failback_plan(
        &self,
        mirror: &str,
        topic: &str,
        dest_topic_id: &str,
        partitions: i32,
        dest_ends: &BTreeMap<i32, i64>,
        source_starts: Option<&BTreeMap<i32, i64>>,
    ) -> Result<Option<FailbackPlan>, Problem> {
        let remote = self.source_state(mirror, &format!("to look for a failback lineage of {topic:?}"), "").await?;
        let found =
            match crate::engine::failback::find(&remote, topic, &self.destination_cluster_id, Some(dest_topic_id)) {
                Ok(Some(found)) => found,
                Ok(None) => return Ok(None),
                Err(p) => return Err(Problem { kind: p.kind, detail: p.detail }),
            };
        let dest = &*self.destination_admin;
        let parts = 0..partitions;
        let unavailable = |e: KafkaError| kafka_problem(ProblemKind::DestinationUnavailable, &e);
        let stable = offsets_of(dest, topic, parts.clone(), OffsetSpec::Latest, IsolationLevel::ReadCommitted)
            .await
            .map_err(unavailable)?;
        let starts = offsets_of(dest, topic, parts.clone(), OffsetSpec::Earliest, IsolationLevel::ReadUncommitted)
            .await
            .map_err(unavailable)?;
        let here = self.lineage_here(mirror, topic, partitions, Some(&found), source_starts);
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
        let scans = self.ports.scan_destination(&self.config, topic, ranges).await.map_err(unavailable)?;
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
        plan.preview.partitions = self.failback_copies(mirror, topic, &plan.positions).await?;
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
        mirror: &str,
        topic: &str,
        partitions: i32,
        found: Option<&crate::engine::failback::FoundLineage>,
        source_starts: Option<&BTreeMap<i32, i64>>,
    ) -> BTreeMap<i32, PartitionLineage> {
        let own = self.mirrors.get(mirror).and_then(|m| m.topics.get(topic));
        (0..partitions)
            .map(|p| {
                let record = own.and_then(|t| t.partitions.get(&p)).map(|rt| &rt.record);
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
    pub(super) async fn source_starts(
        &self,
        mirror: &str,
        topic: &str,
        partitions: i32,
    ) -> Result<BTreeMap<i32, i64>, Problem> {
        let source = &*self.mirrors[mirror].source_admin;
        offsets_of(source, topic, 0..partitions, OffsetSpec::Earliest, IsolationLevel::ReadUncommitted)
            .await
            .map_err(|e| kafka_problem(ProblemKind::SourceUnreachable, &e))
    }

    /// What a failback of `topic` copies from the source per partition: from each start
    /// position to the source's last stable offset now, counted `read_committed` (the same
    /// records the data path will copy, as long as nothing more is written meanwhile).
    async fn failback_copies(
        &self,
        mirror: &str,
        topic: &str,
        positions: &BTreeMap<i32, MirrorPosition>,
    ) -> Result<Vec<FailbackCopy>, Problem> {
        let m = &self.mirrors[mirror];
        let unreachable = |e: KafkaError| kafka_problem(ProblemKind::SourceUnreachable, &e);
        let stable = offsets_of(
            &*m.source_admin,
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
        let spec = &m.stored.spec.source;
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
    pub(super) async fn source_state(&self, mirror: &str, why: &str, then: &str) -> Result<persist::Loaded, Problem> {
        let source = &self.mirrors[mirror].stored.spec.source;
        let (state_topic, timeout) = (&self.config.state_topic, self.config.request_timeout);
        read_source_state(&*self.ports, source, state_topic, timeout, why, then).await
    }

    /// `validate_only` of a start of a topic new to `mirror`: a destination topic that already
    /// holds records is accepted only when a failback would adopt it. A failback answers what it
    /// will copy.
    pub(super) async fn validate_adoption(
        &self,
        mirror: &str,
        topic: &str,
        partitions: i32,
    ) -> Result<Option<FailbackPreview>, Problem> {
        let dest = &*self.destination_admin;
        let d = match dest.describe_topic(topic).await {
            Ok(d) => d,
            Err(e) if e.is("UNKNOWN_TOPIC_OR_PART") => return Ok(None),
            Err(e) => return Err(kafka_problem(ProblemKind::DestinationUnavailable, &e)),
        };
        let ends = offsets_of(dest, topic, 0..partitions, OffsetSpec::Latest, IsolationLevel::ReadUncommitted)
            .await
            .map_err(|e| kafka_problem(ProblemKind::DestinationUnavailable, &e))?;
        let Some((p, end)) = ends.iter().find(|(_, end)| **end > 0) else { return Ok(None) };
        match self.failback_plan(mirror, topic, &d.topic_id.to_string(), partitions, &ends, None).await? {
            Some(plan) => Ok(Some(plan.preview)),
            None => Err(Problem {
                kind: ProblemKind::DestinationTopicConflict,
                detail: format!(
                    "destination topic {topic:?} already holds records (partition {p} ends at offset {end}); only an empty topic can become a mirror (start with truncation \"resync\" to delete them and mirror the source)"
                ),
            }),
        }
    }

    /// Answers [`crate::engine::EngineHandle::lineage`] from a task of its own: reading the
    /// source's state topic may take seconds (or time out with the source down), and the loop
    /// must not wait for a page view.
    pub(super) fn spawn_lineage(
        &self,
        mirror: String,
        topic: String,
        reply: tokio::sync::oneshot::Sender<Result<Option<crate::engine::TopicLineage>, EngineError>>,
    ) {
        let Some(m) = self.mirrors.get(&mirror) else {
            let _ = reply.send(Err(not_found(&mirror)));
            return;
        };
        let source = m.stored.spec.source.clone();
        let ports = Arc::clone(&self.ports);
        let dest = Arc::clone(&self.destination_admin);
        let (state_topic, timeout) = (self.config.state_topic.clone(), self.config.request_timeout);
        let here = self.destination_cluster_id.clone();
        tokio::spawn(async move {
            let r = async {
                let why = format!("for the lineage of {topic:?}");
                let remote = read_source_state(&*ports, &source, &state_topic, timeout, &why, "")
                    .await
                    .map_err(|p| EngineError::rejected(p.kind, p.detail))?;
                let id_here = match dest.describe_topic(&topic).await {
                    Ok(d) => Some(d.topic_id.to_string()),
                    Err(_) => None,
                };
                Ok(crate::engine::failback::describe(&remote, &topic, &here, id_here.as_deref()))
            }
            .await;
            let _ = reply.send(r);
        });
    }

    /// Takes a failback plan over for `topic`'s partitions (created, not yet started): their
    /// start positions and their inherited offset maps, in memory and in the state topic.
    pub(super) fn adopt_failback(&mut self, mirror: &str, topic: &str, plan: FailbackPlan) {
        let n = self.state_partitions;
        let Some(t) = self.mirrors.get_mut(mirror).and_then(|m| m.topics.get_mut(topic)) else { return };
        let topic_id = t.source_topic_id.clone();
        for (p, pos) in &plan.positions {
            if let Some(rt) = t.partitions.get_mut(p) {
                rt.record.position = Some(*pos);
                // A restart (round trip): the old stop point is history now; the lineage
                // continues through the other direction's mirror.
                rt.record.stop_point = None;
            }
        }
        let mut maps = self.offset_maps.write().unwrap_or_else(|e| e.into_inner());
        for (p, map) in plan.maps {
            let key = (mirror.to_string(), topic.to_string(), p);
            // A round trip: this mirror's own history is already there; only what crossed back
            // and forth since is new (the inverse map holds this mirror's own runs too).
            let new: Vec<Run> = match maps.get(&key) {
                Some(own) => {
                    let (src_end, dst_end) = (own.source_end().unwrap_or(0), own.destination_end().unwrap_or(0));
                    map.runs()
                        .iter()
                        .copied()
                        .filter(|r| r.source_start >= src_end && r.destination_start >= dst_end)
                        .collect()
                }
                None => map.runs().to_vec(),
            };
            let Ok(new) = OffsetMap::from_runs(new) else { continue };
            self.pending_writes.extend(persist::offset_map_batches(mirror, &topic_id, p, &new, n));
            let entry = maps.entry(key).or_default();
            if let Err(e) = entry.extend(new.runs().iter().copied()) {
                tracing::warn!(%mirror, %topic, partition = p, "failback: inherited offset map not appended: {e}");
            }
        }
        tracing::info!(
            %mirror, %topic, from = %plan.from_mirror, partitions = plan.positions.len(),
            "failback: the destination topic is adopted as it is; only what the source received since the failover is copied"
        );
    }
}

/// The source cluster's `__mirror_state` as it stands (its mirrors, records and offset maps), read
/// to look for lineages, on or off the coordinator's loop; `why` and `then` complete the error
/// when it cannot be read.
async fn read_source_state(
    ports: &dyn Ports,
    source: &SourceSpec,
    state_topic: &str,
    timeout: Duration,
    why: &str,
    then: &str,
) -> Result<persist::Loaded, Problem> {
    let records = ports
        .read_remote_state(&source.bootstrap_servers, &source.properties, state_topic, timeout)
        .await
        .map_err(|e| Problem {
            kind: ProblemKind::SourceUnreachable,
            detail: format!("cannot read the source's {state_topic} {why}: {e}{then}"),
        })?;
    // The other cluster's secrets are not this instance's to open.
    Ok(persist::load(&records, &Default::default()).0)
}
