//! The engine handle's drill calls: list the drills, start one (checks, the Drill record, the
//! run spawned).

use std::collections::BTreeSet;
use std::time::Instant;

use crate::domain::drill::{DrillCheck, DrillFigures};
use crate::store::{DrillStepValue, DrillValue};

use crate::engine::approvals::new_operation_id;
use crate::engine::{Actor, EngineError, EngineHandle, ProblemKind, Request};

use super::{
    CANARY_PARTITIONS, DrillOptions, DrillRun, DrillTarget, DrillView, RUNNING, STARTING, STEPS, default_canary,
    orphaned, rejected,
};

impl EngineHandle {
    /// Every drill still kept, newest first.
    #[must_use]
    pub fn drills(&self) -> Vec<DrillView> {
        self.snapshot().drills.clone()
    }

    /// One drill.
    #[must_use]
    pub fn drill(&self, id: &str) -> Option<DrillView> {
        self.snapshot().drills.iter().find(|d| d.id == id).cloned()
    }

    pub(crate) async fn record_drill(&self, value: DrillValue) -> Result<(), EngineError> {
        self.call(|reply| Request::RecordDrill { value, reply }).await
    }

    async fn drill_target(&self, mirror: &str) -> Result<DrillTarget, EngineError> {
        let mirror = mirror.to_string();
        self.call(|reply| Request::DrillTarget { mirror, reply }).await
    }

    /// Removes a STOPPED topic from a mirror: its records in the state topic are deleted, the
    /// topic itself is left alone on both clusters.
    pub(crate) async fn forget_topic(&self, mirror: &str, topic: &str) -> Result<(), EngineError> {
        let (mirror, topic) = (mirror.to_string(), topic.to_string());
        self.call(|reply| Request::ForgetTopic { mirror, topic, reply }).await
    }

    /// Starts a drill of `mirror`: checks it may run, creates the canary on the source (a refusal
    /// is answered here, with nothing left behind), then runs the rest in the background.
    /// Returns the drill's ID (its operation's).
    pub async fn start_drill(
        &self,
        mirror: &str,
        options: DrillOptions,
        actor: &Actor,
        approved_by: Option<String>,
    ) -> Result<String, EngineError> {
        let snap = self.snapshot();
        let m = snap.mirror(mirror).ok_or_else(|| crate::engine::EngineError::mirror_not_found(mirror))?;
        let canary = options.canary_topic.clone().unwrap_or_else(|| default_canary(mirror));
        crate::engine::validate_topic_name(&canary).map_err(|e| {
            rejected(
                ProblemKind::InvalidName,
                format!("{e}; give the drill a shorter canary topic name (`canary_topic`)"),
            )
        })?;
        if let Some(d) = snap.drills.iter().find(|d| d.mirror == mirror && d.is_running() && !orphaned(d, &snap)) {
            return Err(rejected(
                ProblemKind::DrillRunning,
                format!("drill {} of mirror {mirror:?} is still running (on instance {})", d.id, d.instance),
            ));
        }
        for (name, value) in
            [("rto_objective_ms", options.rto_objective_ms), ("rpo_objective_ms", options.rpo_objective_ms)]
        {
            if value.is_some_and(|v| v <= 0) {
                return Err(rejected(
                    ProblemKind::InvalidSetting,
                    format!("{name} must be a positive number of milliseconds"),
                ));
            }
        }
        let target = self.drill_target(mirror).await?;
        crate::engine::check_not_internal(&canary, &target.state_topic)?;
        let guard_key = format!("{}/{mirror}", target.state_topic);
        if !STARTING.lock().unwrap_or_else(|e| e.into_inner()).insert(guard_key.clone()) {
            return Err(rejected(ProblemKind::DrillRunning, format!("a drill of mirror {mirror:?} is starting")));
        }
        let _ = m;
        let topics = target.topics.clone();
        let started = self.begin_drill(mirror, topics, canary, options, actor, approved_by, target).await;
        STARTING.lock().unwrap_or_else(|e| e.into_inner()).remove(&guard_key);
        started
    }

    #[allow(clippy::too_many_arguments)]
    async fn begin_drill(
        &self,
        mirror: &str,
        topics: BTreeSet<String>,
        canary: String,
        options: DrillOptions,
        actor: &Actor,
        approved_by: Option<String>,
        target: DrillTarget,
    ) -> Result<String, EngineError> {
        let now = crate::clock::now();
        let id = new_operation_id(now);
        let mut run = DrillRun {
            handle: self.clone(),
            value: DrillValue {
                id: id.clone(),
                mirror: mirror.to_string(),
                status: RUNNING.into(),
                requested_by: actor.identity.clone(),
                client_address: actor.address.clone(),
                instance: target.instance_id.clone(),
                requested_at: now.as_millis(),
                finished_at: None,
                canary_topic: canary.clone(),
                steps: STEPS
                    .iter()
                    .map(|s| DrillStepValue {
                        name: (*s).into(),
                        status: "pending".into(),
                        started_at: None,
                        finished_at: None,
                        detail: None,
                    })
                    .collect(),
                report: None,
            },
            actor: actor.clone(),
            approved_by,
            options,
            target,
            figures: DrillFigures::default(),
            checks: Vec::new(),
            cleanup: Vec::new(),
            error: None,
            created_source: false,
            in_mirror: false,
            group_committed: false,
            started: Instant::now(),
        };
        let op = run.operation(None);
        self.record(op, None).await?;
        run.save().await;
        // Checked and created before answering: a refusal is the caller's answer, and leaves
        // nothing behind.
        let leftover = topics.contains(&canary);
        let created = if leftover {
            Err(rejected(
                ProblemKind::DrillCanaryExists,
                format!(
                    "{canary:?} is a topic of mirror {mirror:?} already; kmirror only ever deletes canary topics it \
                     created: give the drill another canary topic (`canary_topic`)"
                ),
            ))
        } else {
            run.step("create_canary", "running", None).await;
            run.create_canary().await
        };
        if let Err(e) = created {
            run.step("create_canary", "failed", Some(e.to_string())).await;
            run.error = Some(e.to_string());
            run.checks.push(DrillCheck { name: "canary_created".into(), passed: false, detail: e.to_string() });
            run.finish().await;
            return Err(e);
        }
        run.step("create_canary", "done", Some(format!("{canary} with {CANARY_PARTITIONS} partitions on the source")))
            .await;
        run.checks.push(DrillCheck {
            name: "canary_created".into(),
            passed: true,
            detail: format!("{canary} created on the source with {CANARY_PARTITIONS} partitions"),
        });
        tracing::info!(%mirror, drill = %id, identity = %actor.identity, canary = %canary, "drill started");
        tokio::spawn(async move { run.run().await });
        Ok(id)
    }
}
