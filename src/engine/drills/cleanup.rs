//! Step 7 and the end of a drill: what it created removed, the report written.

use std::time::Instant;

use crate::domain::Timestamp;
use crate::domain::drill::{self, CleanupStep, DrillCheck, DrillReport, DrillResult};
use crate::kafka::KafkaAdmin;

use crate::engine::{LifecycleOp, TopicSelector};

use super::{CANARY_PARTITIONS, DrillRun, DrillSigningKey, FAILED, PASSED};

impl DrillRun {
    /// Step 7: removes what the drill created, reporting every failure.
    pub(super) async fn clean_up(&mut self) {
        self.step("cleanup", "running", None).await;
        let mirror = self.mirror().to_string();
        let canary = self.canary().to_string();
        if self.in_mirror {
            // A drill stopped early may have left the canary mirroring: stop it first.
            let stopped = self
                .handle
                .lifecycle(
                    &mirror,
                    TopicSelector::Names(vec![canary.clone()]),
                    LifecycleOp::Stop,
                    false,
                    self.actor.clone(),
                )
                .await;
            let mut r = stopped.map(|_| ()).map_err(|e| e.to_string());
            if r.is_ok() {
                r = self.all_stopped(Instant::now()).await.map(|_| ());
            }
            if r.is_ok() {
                r = self.handle.forget_topic(&mirror, &canary).await.map_err(|e| e.to_string());
            }
            self.cleanup.push(CleanupStep {
                what: format!("canary topic {canary} in mirror {mirror}"),
                ok: r.is_ok(),
                error: r.err(),
            });
            // The destination topic exists once the mirror created it.
            let r = match self.destination_admin() {
                Ok(d) => delete_topic(&d, &canary).await,
                Err(e) => Err(e),
            };
            self.cleanup.push(CleanupStep {
                what: format!("canary topic {canary} on the destination"),
                ok: r.is_ok(),
                error: r.err(),
            });
        }
        if self.created_source {
            let r = match self.source_admin() {
                Ok(s) => delete_topic(&s, &canary).await,
                Err(e) => Err(e.to_string()),
            };
            self.cleanup.push(CleanupStep {
                what: format!("canary topic {canary} on the source"),
                ok: r.is_ok(),
                error: r.err(),
            });
        }
        if self.group_committed {
            let group = self.group();
            let r = match self.source_admin() {
                Ok(s) => s.delete_group(&group).await.map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            self.cleanup.push(CleanupStep {
                what: format!("consumer group {group} on the source"),
                ok: r.is_ok(),
                error: r.err(),
            });
            if self.in_mirror {
                let r = match self.destination_admin() {
                    Ok(d) => d.delete_group(&group).await.map_err(|e| e.to_string()),
                    Err(e) => Err(e),
                };
                self.cleanup.push(CleanupStep {
                    what: format!("consumer group {group} on the destination"),
                    ok: r.is_ok(),
                    error: r.err(),
                });
            }
        }
        let failed: Vec<&CleanupStep> = self.cleanup.iter().filter(|c| !c.ok).collect();
        let detail = if failed.is_empty() {
            format!("removed: {}", self.cleanup.iter().map(|c| c.what.as_str()).collect::<Vec<_>>().join("; "))
        } else {
            format!(
                "left behind (remove by hand): {}",
                failed
                    .iter()
                    .map(|c| format!("{} ({})", c.what, c.error.as_deref().unwrap_or("")))
                    .collect::<Vec<_>>()
                    .join("; ")
            )
        };
        self.checks.push(DrillCheck { name: "cleanup".into(), passed: failed.is_empty(), detail: detail.clone() });
        self.step("cleanup", if failed.is_empty() { "done" } else { "failed" }, Some(detail)).await;
    }

    /// Builds, signs and stores the report; the drill's operation is finished.
    pub(super) async fn finish(&mut self) {
        for s in self.value.steps.iter_mut().filter(|s| s.status == "pending") {
            s.status = "skipped".into();
        }
        let now = crate::clock::now();
        let result = if self.error.is_some() { DrillResult::Fail } else { DrillReport::verdict(&self.checks) };
        let report = DrillReport {
            format: drill::REPORT_FORMAT.into(),
            drill_id: self.value.id.clone(),
            mirror: self.value.mirror.clone(),
            requested_by: self.actor.identity.clone(),
            client_address: self.actor.address.clone(),
            approved_by: self.approved_by.clone(),
            instance: self.target.instance_id.clone(),
            kmirror_version: env!("CARGO_PKG_VERSION").into(),
            source_cluster_id: self.target.source_cluster_id.clone(),
            destination_cluster_id: self.target.destination_cluster_id.clone(),
            started_at: Timestamp::from_millis(self.value.requested_at).to_string(),
            finished_at: now.to_string(),
            canary_topic: self.value.canary_topic.clone(),
            canary_partitions: CANARY_PARTITIONS,
            consumer_group: self.group(),
            result,
            error: self.error.clone(),
            figures: self.figures.clone(),
            checks: self.checks.clone(),
            cleanup: self.cleanup.clone(),
            digest: None,
        }
        .sealed(self.target.signing_key.as_ref().map(DrillSigningKey::bytes));
        self.value.status = if result == DrillResult::Pass { PASSED } else { FAILED }.into();
        self.value.finished_at = Some(now.as_millis());
        self.value.report = Some(report.to_canonical_json());
        self.save().await;
        if let Err(e) = self.handle.record(self.operation(Some(&report)), None).await {
            tracing::warn!(mirror = %self.value.mirror, drill = %self.value.id, "cannot record the drill's operation: {e}");
        }
        tracing::info!(
            mirror = %self.value.mirror,
            drill = %self.value.id,
            result = result.as_str(),
            rto_ms = ?self.figures.rto_ms,
            seconds = self.started.elapsed().as_secs(),
            "drill finished"
        );
    }
}

async fn delete_topic(admin: &KafkaAdmin, topic: &str) -> Result<(), String> {
    match admin.delete_topic(topic).await {
        Ok(()) => Ok(()),
        Err(e) if e.is(crate::kafka::KafkaErrorKind::UnknownTopicOrPartition) => Ok(()),
        Err(e) => Err(e.to_string()),
    }
}
