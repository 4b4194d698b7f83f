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

use crate::domain::lineage::FailbackPreview;
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

/// Whether a failback plan counts the records it will copy. Only the preview (`validate_only`)
/// answers with them; a start does not wait for the count (it reads every record to copy once
/// more, 30-50 ms for 10 MiB, a tenth of an incremental failback).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Copies {
    Count,
    Skip,
}

impl Coordinator {
    /// Answers [`crate::engine::EngineHandle::lineage`] from a task of its own: reading the
    /// source's state topic may take seconds (or time out with the source down), and the loop
    /// must not wait for a page view.
    pub(super) fn spawn_lineage(
        &mut self,
        mirror: String,
        topic: String,
        reply: tokio::sync::oneshot::Sender<Result<Option<crate::engine::TopicLineage>, EngineError>>,
    ) {
        let Some(m) = self.mirrors.get(&mirror) else {
            let _ = reply.send(Err(EngineError::mirror_not_found(&mirror)));
            return;
        };
        if !m.topics.contains_key(&topic) {
            let _ = reply.send(Err(table::Missing::topic(&mirror, &topic).into()));
            return;
        }
        let source = m.stored.spec.source.clone();
        let ports = Arc::clone(&self.ports);
        let dest = Arc::clone(&self.destination_admin);
        let (state_topic, timeout) = (self.config.state_topic.clone(), self.config.request_timeout);
        let here = self.destination_cluster_id.clone();
        let now = std::time::Instant::now();
        self.lineage_reads.answer(&mirror, &topic.clone(), now, reply, move || {
            Box::pin(async move {
                let why = format!("for the lineage of {topic:?}");
                let remote = read_source_state(&*ports, &source, &state_topic, timeout, &why, "")
                    .await
                    .map_err(|p| EngineError::rejected(p.kind, p.detail))?;
                let id_here = match dest.describe_topic(&topic).await {
                    Ok(d) => Some(d.topic_id.to_string()),
                    Err(_) => None,
                };
                Ok(crate::engine::failback::describe(&remote, &topic, &here, id_here.as_deref()))
            })
        });
    }

    /// Takes a failback plan over for `topic`'s partitions (created, not yet started): their
    /// start positions and their inherited offset maps, in memory and in the state topic.
    pub(super) fn adopt_failback(&mut self, mirror: &str, topic: &str, plan: FailbackPlan) {
        let n = self.state_partitions;
        let Ok(t) = self.mirrors.topic_mut(mirror, topic) else { return };
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
            self.writes.extend(persist::offset_map_batches(mirror, &topic_id, p, &new, n));
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
pub(super) async fn read_source_state(
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
