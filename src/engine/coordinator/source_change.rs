//! A mirror's source connection changed: replace its data path.
//!
//! The data path (`crate::kafka::pipe`) builds its source consumer once, when it starts. A new
//! bootstrap list or a rotated credential (`PATCH` of the mirror's `source`) would otherwise reach
//! only the admin client, while the consumer went on with the old settings (and, once the old
//! password is revoked, stopped mirroring for good). So an update that changes `source` replaces
//! the data path, without losing or duplicating a record:
//!
//! 1. the running data path ends its open transaction with a commit and reports, per partition,
//!    the position that transaction left (its committed truth, which may be ahead of the positions
//!    the coordinator has seen so far);
//! 2. it is shut down;
//! 3. a new one starts with the mirror's new settings and resumes every MIRRORING partition from
//!    exactly those positions, expecting its first record at the destination's end offset.
//!
//! If step 1 fails the old data path is left running and the new settings apply at its next
//! restart: resuming from positions that might be behind what it committed would write records
//! twice.

use crate::data_path::Finish;
use crate::domain::PartitionState;

use std::collections::BTreeSet;

use super::Coordinator;
use crate::engine::snapshot::DataPathStatus;

impl Coordinator {
    /// `mirror`'s stored source connection changed (here or, with several instances, on another
    /// one): a new admin client, and new data paths (see the module's documentation).
    pub(super) async fn source_changed(&mut self, mirror: &str) {
        // A start in progress (its source changed by another instance, read between two of its
        // topics) asks the new source for its remaining topics instead of using the old one's
        // facts.
        self.off_loop.drop_survey();
        let Some(m) = self.mirrors.get(mirror) else { return };
        let connected = self.connect_mirror_source(&m.stored.spec.source);
        let Some(m) = self.mirrors.get_mut(mirror) else { return };
        match connected {
            Ok(a) => {
                m.source_admin = a;
                m.source_client_error = None;
            }
            Err(e) => m.cluster_id_error = Some(e.to_string()),
        }
        // The data path's source consumer still runs with the old settings (a rotated password
        // would never reach it): replace it, resuming from committed positions.
        self.restart_data_path(mirror).await;
    }

    /// Tries again to create the source client of mirrors whose client could not be created
    /// (`MirrorRt::source_client_error`; all mirrors, or only `only`): the file or setting at
    /// fault may have been fixed in place. Once it can be created, the mirror gets it and new
    /// data paths, as after a changed source connection.
    pub(super) async fn retry_source_client(&mut self, only: Option<&str>) {
        let broken: Vec<String> = self
            .mirrors
            .iter()
            .filter(|(n, m)| m.source_client_error.is_some() && only.is_none_or(|o| o == n.as_str()))
            .map(|(n, _)| n.clone())
            .collect();
        for mirror in broken {
            let Some(m) = self.mirrors.get(&mirror) else { continue };
            let connected = self.connect_mirror_source(&m.stored.spec.source);
            let Some(m) = self.mirrors.get_mut(&mirror) else { continue };
            match connected {
                Ok(a) => {
                    tracing::info!(%mirror, "the source client can be created again");
                    m.source_admin = a;
                    m.source_client_error = None;
                    m.cluster_id_error = None;
                    self.restart_data_path(&mirror).await;
                }
                Err(e) => m.source_client_error = Some(e.to_string()),
            }
        }
    }

    /// Replaces `mirror`'s data paths with ones built from its current settings (see the module's
    /// documentation), slot by slot, resuming every MIRRORING partition from its committed
    /// position.
    pub(super) async fn restart_data_path(&mut self, mirror: &str) {
        if self.fenced.is_some() {
            return;
        }
        let Some(m) = self.mirrors.get(mirror) else { return };
        if m.fenced {
            return;
        }
        let mirroring = m.partitions_in(PartitionState::Mirroring);
        let running: BTreeSet<i32> = m.pipes.keys().copied().collect();
        let mut by_slot = self.by_slot(mirror, mirroring);
        for slot in &running {
            by_slot.entry(*slot).or_default();
        }
        let mut restarted = 0;
        for (slot, parts) in by_slot {
            if !self.owns(slot) {
                continue;
            }
            if running.contains(&slot) {
                // 1. Commit what is open and learn where each partition stands.
                for released in self.unassign_many(mirror, parts.clone(), Finish::Commit, false).await {
                    match released.outcome {
                        Ok(finals) => {
                            for f in &finals {
                                self.apply_final(mirror, &f.topic, f);
                            }
                        }
                        Err(e) => {
                            let why = format!(
                                "the new source settings are stored but the data path of slot {slot} could not hand over ({e}); they apply when it next restarts"
                            );
                            tracing::error!(%mirror, "{why}");
                            if let Some(m) = self.mirrors.get_mut(mirror) {
                                m.data_path = DataPathStatus::Failed { message: why };
                            }
                            continue;
                        }
                    }
                }
                // 2. Shut the old data path down (nothing is open any more).
                self.shut_down_pipes(mirror, Some(&BTreeSet::from([slot])), true).await;
            }
            // 3. A new data path with the new settings, from the committed positions.
            let _ready = self.spawn_pipe(mirror, slot);
            self.reassign_mirroring(mirror, &parts).await;
            restarted += 1;
        }
        if let Some(m) = self.mirrors.get_mut(mirror) {
            m.pipe_restarts = 0;
            if !matches!(m.data_path, DataPathStatus::Failed { .. }) {
                m.data_path = DataPathStatus::Restarting { reason: "the source connection changed".into() };
            }
        }
        tracing::info!(%mirror, slots = restarted, "source connection changed: data paths restarted");
    }
}
