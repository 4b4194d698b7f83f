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

use crate::domain::PartitionState;
use crate::kafka::pipe::Finish;

use super::Coordinator;
use crate::engine::snapshot::DataPathStatus;

impl Coordinator {
    /// Replaces `mirror`'s data path with one built from its current settings (see the module's
    /// documentation), resuming every MIRRORING partition from its committed position.
    pub(super) async fn restart_data_path(&mut self, mirror: &str) {
        if self.fenced.is_some() {
            return;
        }
        let Some(m) = self.mirrors.get(mirror) else { return };
        if m.fenced {
            return;
        }
        let mirroring = m.partitions_in(PartitionState::Mirroring);
        if m.pipe.is_some() {
            // 1. Commit what is open and learn where each partition stands.
            match self.unassign_many(mirror, mirroring.clone(), Finish::Commit, false).await {
                Ok(finals) => {
                    for f in &finals {
                        self.apply_final(mirror, &f.topic, f);
                    }
                }
                Err(e) => {
                    let why = format!(
                        "the new source settings are stored but the data path could not hand over ({e}); they apply when it next restarts"
                    );
                    tracing::error!(%mirror, "{why}");
                    if let Some(m) = self.mirrors.get_mut(mirror) {
                        m.data_path = DataPathStatus::Failed { message: why };
                    }
                    return;
                }
            }
            // 2. Shut the old data path down (nothing is open any more).
            let m = self.mirrors.get_mut(mirror).expect("known");
            if let Some(p) = m.pipe.take() {
                p.shut_down(true).await;
            }
        }
        // 3. A new data path with the new settings, from the committed positions.
        {
            let m = self.mirrors.get_mut(mirror).expect("known");
            m.restart_pipe_at = None;
            m.pipe_restarts = 0;
            m.data_path = DataPathStatus::Restarting { reason: "the source connection changed".into() };
        }
        tracing::info!(%mirror, partitions = mirroring.len(), "source connection changed: data path restarted");
        let _ready = self.spawn_pipe_for(mirror);
        if mirroring.is_empty() {
            return;
        }
        self.reassign_mirroring(mirror, &mirroring).await;
    }
}
