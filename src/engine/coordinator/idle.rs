//! Closing the data paths of idle slots, and waking their partitions when records arrive.
//!
//! A slot's data path holds a source consumer and a transactional producer, and the client
//! library keeps state for every partition of every topic each of them knows, assigned or not:
//! an idle mirror of 10,000 partitions on one instance with 16 slots held ~80 KiB per partition
//! and woke ~32 clients' threads to walk them. What a partition with nothing to copy needs is
//! far less: a look at its source's end, which the lag refresh takes anyway.
//!
//! So when every MIRRORING partition of a slot's data path has been caught up, with nothing
//! committed, for `engine.close_idle_data_paths_after_ms`, the data path is closed (its open
//! transaction, if any, aborted: the committed positions are the resume points, as after any
//! restart). Its partitions stay MIRRORING and are shown as `idle`. When a lag refresh finds an
//! idle partition behind its source, the partition is handed to its slot's data path again (a
//! new one if the slot has none), from its committed position and with the destination's end
//! checked, exactly as after a producer failure. Only the partitions that have records are
//! woken, so the new data path's clients know only the topics with work.
//!
//! A slot rarely goes wholly quiet when some of a mirror's topics are busy: each topic's partitions
//! are spread over all the slots. So a data path is rebuilt when that lets go of enough: at least
//! [`REBUILD_AT_QUIET`] partitions, and more than it keeps active, counted as its quiet partitions
//! or as all the partitions of its quiet topics (those with no active partition here), whichever is
//! more, since its clients keep state for every partition of a topic they know. It commits and
//! releases everything it holds (the final positions applied, as a source change does), closes, and
//! a new data path takes the active partitions from those positions. The quiet ones are idle from
//! then on, and its clients forget their topics. The busy partitions pause for the restart (a
//! commit, a new producer): at most once per quiet spell (`after`). Only a data path with a
//! partition that copied something lately is rebuilt: when its active partitions are winding down
//! too, it closes soon anyway. Counting topics matters for many small topics, and for the
//! partitions that were still catching up when the first rebuild came: a handful per slot of each
//! of their topics, which a count of partitions alone would leave in the data path for as long as
//! the busy ones run.
//!
//! The cost: an idle partition's first new records wait for the next lag refresh (1 s, or
//! partitions × 1 ms for larger mirrors) and the new data path's start (~0.1-0.3 s).

use super::*;

/// Whether `rt`, a MIRRORING partition held by a data path, has had nothing to copy for
/// `after` at `now`.
fn quiet(rt: &PartRt, now: tokio::time::Instant, after: Duration) -> bool {
    rt.record.position.is_some()
        && rt.offsets.source_lso.is_some()
        && projection::lag_records(rt) == 0
        && now.saturating_duration_since(rt.active_at) >= after
}

/// A data path is rebuilt with only its active partitions when that lets go of at least this
/// many partitions (and more than it keeps): less is not worth the busy partitions' pause (a
/// commit, a new producer and its start).
const REBUILD_AT_QUIET: usize = 100;

/// An active partition had something to copy within this part of `after`: the data path is busy
/// and will stay open. When none has, its active partitions are winding down (the last of a
/// catch-up, or a load that stopped) and the whole data path closes within `after` anyway: a
/// rebuild then would only restart their clocks (a reassigned partition counts as active from
/// its assignment) and close it a full `after` later.
const BUSY_WITHIN_PARTS_OF_AFTER: u32 = 4;

/// How the partitions of one slot stand, for closing or rebuilding its data path.
#[derive(Default)]
struct SlotLook {
    /// A partition PREPARING, PAUSING, STOPPING or FAILED: something is under way, leave it.
    transient: bool,
    /// A PAUSED, STOPPED or UNKNOWN partition that moved less than `after` ago (a pause is
    /// often followed by a resume, which would need the data path again).
    moved: bool,
    /// MIRRORING partitions the data path holds, [`quiet`] or not.
    quiet: Vec<(String, i32)>,
    active: Vec<(String, i32)>,
    /// The partition count of each topic with a quiet partition here.
    quiet_topics: BTreeMap<String, usize>,
    /// An active partition had something to copy lately (see [`BUSY_WITHIN_PARTS_OF_AFTER`]).
    busy: bool,
}

/// What to do with a slot's data path.
enum Verdict {
    Leave,
    /// Every partition is at rest: close it.
    Close,
    /// Many partitions are quiet: start over with the active ones only (`held`: all the data
    /// path holds).
    Rebuild {
        active: Vec<(String, i32)>,
        held: Vec<(String, i32)>,
    },
}

impl SlotLook {
    /// Takes in `topic`'s `partition` (`topic_partitions`: how many the topic has).
    fn see(
        &mut self,
        (topic, partition, topic_partitions): (&str, i32, usize),
        rt: &PartRt,
        now: tokio::time::Instant,
        after: Duration,
    ) {
        match rt.record.state {
            PartitionState::Mirroring if rt.idle => {}
            PartitionState::Mirroring if quiet(rt, now, after) => {
                if !self.quiet_topics.contains_key(topic) {
                    self.quiet_topics.insert(topic.to_string(), topic_partitions);
                }
                self.quiet.push((topic.to_string(), partition));
            }
            PartitionState::Mirroring => {
                self.busy |= now.saturating_duration_since(rt.active_at) < after / BUSY_WITHIN_PARTS_OF_AFTER;
                self.active.push((topic.to_string(), partition));
            }
            PartitionState::Paused | PartitionState::Stopped | PartitionState::Unknown => {
                self.moved |= now.saturating_duration_since(rt.active_at) < after;
            }
            _ => self.transient = true,
        }
    }

    fn verdict(self) -> Verdict {
        if self.transient {
            Verdict::Leave
        } else if self.active.is_empty() {
            if self.moved { Verdict::Leave } else { Verdict::Close }
        } else if self.busy && self.released() >= REBUILD_AT_QUIET.max(self.active.len() + 1) {
            let held = self.quiet.iter().chain(&self.active).cloned().collect();
            Verdict::Rebuild { active: self.active, held }
        } else {
            Verdict::Leave
        }
    }

    /// What a rebuild lets go of, in partitions: the quiet ones the data path stops fetching, or
    /// all the partitions of the topics its clients forget (the quiet topics with no active
    /// partition here), whichever is more.
    fn released(&self) -> usize {
        let active: HashSet<&str> = self.active.iter().map(|(t, _)| t.as_str()).collect();
        let forgotten: usize =
            self.quiet_topics.iter().filter(|(t, _)| !active.contains(t.as_str())).map(|(_, n)| n).sum();
        forgotten.max(self.quiet.len())
    }
}

impl Coordinator {
    /// After a lag refresh of `mirror`: wakes its idle partitions that have records to copy,
    /// and closes the data paths whose partitions have all been idle for long enough.
    pub(super) async fn idle_step(&mut self, mirror: &str) {
        let Some(after) = self.config.close_idle_data_paths_after else { return };
        self.wake_idle(mirror).await;
        self.close_idle(mirror, after).await;
    }

    /// Hands `mirror`'s idle partitions that are behind their source back to a data path.
    async fn wake_idle(&mut self, mirror: &str) {
        let owned = self.owned.clone();
        let Some(m) = self.mirrors.get_mut(mirror) else { return };
        // A halted mirror (fenced, or its source now another cluster) copies nothing, and one
        // whose clients cannot be made waits for them (`retry_source_client` restarts it).
        if m.halted() || m.source_client_error.is_some() {
            return;
        }
        let now = tokio::time::Instant::now();
        let mut woken = Vec::new();
        for (t, topic) in &mut m.topics {
            for (p, rt) in &mut topic.partitions {
                if rt.idle && rt.record.state != PartitionState::Mirroring {
                    rt.idle = false; // a lifecycle call moved it on: its own actions decide
                    continue;
                }
                if rt.idle && owned.contains(&rt.slot) && projection::lag_records(rt) > 0 {
                    rt.active_at = now;
                    woken.push((t.clone(), *p));
                }
            }
        }
        if woken.is_empty() {
            return;
        }
        tracing::info!(%mirror, partitions = woken.len(), "idle partitions have new records: handing them to data paths");
        // `assign` clears their `idle` mark once a data path holds them; a partition whose
        // destination end cannot be read goes FAILED and is retried like any other.
        self.reassign_mirroring(mirror, &woken).await;
    }

    /// Closes `mirror`'s data paths (of slots owned here) whose MIRRORING partitions have all
    /// had nothing to copy for `after`, with no partition of the slot in a transition; rebuilds
    /// those holding many such partitions with their active ones only.
    async fn close_idle(&mut self, mirror: &str, after: Duration) {
        let Some(m) = self.mirrors.get(mirror) else { return };
        if m.fenced || m.pipes.is_empty() {
            return;
        }
        let now = tokio::time::Instant::now();
        let mut looks: BTreeMap<i32, SlotLook> = BTreeMap::new();
        for (t, topic) in &m.topics {
            for (p, rt) in &topic.partitions {
                if m.pipes.contains_key(&rt.slot) {
                    looks.entry(rt.slot).or_default().see((t, *p, topic.partitions.len()), rt, now, after);
                }
            }
        }
        let mut closing = BTreeSet::new();
        let mut reassign = Vec::new();
        let mut release = Vec::new();
        for (slot, look) in looks {
            if !self.owns(slot) || m.restart_pipe_at.contains_key(&slot) {
                continue;
            }
            match look.verdict() {
                Verdict::Leave => {}
                Verdict::Close => {
                    closing.insert(slot);
                }
                Verdict::Rebuild { active, held } => {
                    closing.insert(slot);
                    reassign.extend(active);
                    release.extend(held);
                }
            }
        }
        if closing.is_empty() {
            return;
        }
        // A rebuilt slot's data path commits what it holds and says where each partition stands
        // before it goes, as a source change does: its last commits' events could otherwise
        // still be queued behind this step, and the new data path would start from older
        // positions. A slot whose release fails keeps its data path.
        if !release.is_empty() {
            for released in self.unassign_many(mirror, release, Finish::Commit, false).await {
                match released.outcome {
                    Ok(finals) => {
                        for f in &finals {
                            self.apply_final(mirror, &f.topic, f);
                        }
                    }
                    Err(e) => {
                        // As for a pause the data path did not confirm: the partitions go FAILED
                        // (retryable) and their retry hands them to a data path again.
                        tracing::warn!(%mirror, "an idle data path was not rebuilt: its release failed ({e})");
                        if let Some(slot) = released.partitions.first().and_then(|(t, p)| self.slot_of(mirror, t, *p)) {
                            closing.remove(&slot);
                        }
                        let gone: HashSet<&(String, i32)> = released.partitions.iter().collect();
                        reassign.retain(|k| !gone.contains(k));
                        self.release_unconfirmed(mirror, &released.partitions, &e);
                        let _ = self.flush().await;
                    }
                }
            }
            if closing.is_empty() {
                return;
            }
        }
        let Some(m) = self.mirrors.get_mut(mirror) else { return };
        let keep: HashSet<(&str, i32)> = reassign.iter().map(|(t, p)| (t.as_str(), *p)).collect();
        let mut partitions = 0usize;
        for (t, topic) in &mut m.topics {
            for (p, rt) in &mut topic.partitions {
                if closing.contains(&rt.slot)
                    && rt.record.state == PartitionState::Mirroring
                    && !keep.contains(&(t.as_str(), *p))
                {
                    rt.idle = true;
                    partitions += 1;
                }
            }
        }
        tracing::info!(
            %mirror,
            slots = ?closing,
            idle = partitions,
            active = reassign.len(),
            "closing data paths of idle partitions: nothing to copy for {after:?}"
        );
        let pipes: Vec<PipeRt> = closing.iter().filter_map(|s| m.pipes.remove(s)).collect();
        let (pipes, threads): (Vec<PipeRt>, Vec<_>) = pipes
            .into_iter()
            .map(|mut p| {
                let thread = p.join.take();
                (p, thread)
            })
            .unzip();
        futures_util::future::join_all(pipes.into_iter().map(|p| p.shut_down(false))).await;
        // The clients end on their threads after the reply; what they held goes back to the
        // system only once they are gone (see `kafka::release_freed_memory`).
        tokio::task::spawn_blocking(move || {
            for t in threads.into_iter().flatten() {
                let _ = t.join();
            }
            crate::kafka::release_freed_memory();
        });
        // The active partitions of a rebuilt slot go on in a new data path, from their committed
        // positions (its producer's start fences the closed one's, should it linger).
        self.reassign_mirroring(mirror, &reassign).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(topics: &[(&str, i32)]) -> Vec<(String, i32)> {
        topics.iter().flat_map(|(t, n)| (0..*n).map(move |p| (t.to_string(), p))).collect()
    }

    fn look(quiet: &[(&str, i32)], active: &[(&str, i32)], topic_partitions: usize) -> SlotLook {
        let quiet = parts(quiet);
        let quiet_topics = quiet.iter().map(|(t, _)| (t.clone(), topic_partitions)).collect();
        SlotLook { quiet, active: parts(active), quiet_topics, busy: true, ..SlotLook::default() }
    }

    fn rebuilds(l: SlotLook) -> bool {
        matches!(l.verdict(), Verdict::Rebuild { .. })
    }

    #[test]
    fn a_data_path_is_rebuilt_for_many_quiet_partitions_or_quiet_topics_of_many_partitions() {
        // 100 quiet partitions of one topic beside 4 busy ones: their fetch state goes.
        assert!(rebuilds(look(&[("quiet", 100)], &[("busy", 4)], 800)));
        // 60 quiet partitions of 30 topics of 100 partitions each (stragglers of a large start,
        // or many small topics): the clients forget 3,000 partitions' state.
        let quiet: Vec<(String, i32)> = (0..30).map(|i| (format!("t{i}"), 2)).collect();
        let quiet: Vec<(&str, i32)> = quiet.iter().map(|(t, n)| (t.as_str(), *n)).collect();
        assert!(rebuilds(look(&quiet, &[("busy", 4)], 100)));
        // The same partitions of topics that also have busy partitions here: nothing forgotten,
        // and too few quiet partitions for the pause.
        let l = SlotLook {
            quiet: parts(&[("t0", 60)]),
            active: parts(&[("t0", 4)]).into_iter().map(|(t, p)| (t, p + 60)).collect(),
            quiet_topics: [("t0".to_string(), 100)].into(),
            busy: true,
            ..SlotLook::default()
        };
        assert!(!rebuilds(l));
        // A few quiet partitions of one small topic: not worth the pause.
        assert!(!rebuilds(look(&[("small", 10)], &[("busy", 4)], 10)));
        // Stragglers: 6 quiet partitions of a 100-partition topic beside 31 busy ones, the rest
        // of that topic idle already: the clients forget all 100.
        assert!(rebuilds(look(&[("late", 6)], &[("busy", 31)], 100)));
        // Not while the active partitions are winding down (none copied anything lately): the
        // data path closes once they are quiet too.
        assert!(!rebuilds(SlotLook { busy: false, ..look(&[("quiet", 400)], &[("busy", 4)], 400) }));
        // Never for less than the data path keeps active.
        assert!(!rebuilds(look(&[("quiet", 150)], &[("busy", 200)], 150)));
        // Everything at rest: closed, not rebuilt.
        assert!(matches!(look(&[("quiet", 5)], &[], 5).verdict(), Verdict::Close));
    }
}
