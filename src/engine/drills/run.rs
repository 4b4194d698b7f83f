//! Steps 1 to 6 of a drill in order: the canary created, produced to, mirrored, failed over and
//! verified.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::domain::drill;

use crate::engine::{EngineError, LifecycleOp, ProblemKind, TopicSelector, Truncation};

use super::{CANARY_PARTITIONS, DrillRun, FAILOVER_DEADLINE, blocking, rejected};

impl DrillRun {
    pub(super) async fn create_canary(&mut self) -> Result<(), EngineError> {
        let canary = self.canary().to_string();
        // The destination must not have it either: the mirror would refuse to adopt it, and the
        // cleanup would delete a topic kmirror did not create.
        let dest = self.destination_admin().map_err(|e| rejected(ProblemKind::DestinationUnavailable, e))?;
        match dest.describe_topic(&canary).await {
            Ok(_) => {
                return Err(rejected(
                    ProblemKind::DrillCanaryExists,
                    format!(
                        "topic {canary:?} already exists on the destination; kmirror only ever deletes canary topics \
                         it created: delete it, or give the drill another canary topic (`canary_topic`)"
                    ),
                ));
            }
            Err(e) if e.is(crate::kafka::KafkaErrorKind::UnknownTopicOrPartition) => {}
            Err(e) => {
                return Err(rejected(
                    ProblemKind::DestinationUnavailable,
                    format!("cannot check the destination: {e}"),
                ));
            }
        }
        let source = self.source_admin()?;
        match source.create_topic(&canary, CANARY_PARTITIONS, -1, &[]).await {
            Ok(()) => {
                self.created_source = true;
                Ok(())
            }
            Err(e) if e.is(crate::kafka::KafkaErrorKind::TopicAlreadyExists) => Err(rejected(
                ProblemKind::DrillCanaryExists,
                format!(
                    "topic {canary:?} already exists on the source; kmirror only ever deletes canary topics it \
                     created: delete it, or give the drill another canary topic (`canary_topic`)"
                ),
            )),
            Err(e)
                if e.kind().is_some_and(|k| {
                    matches!(
                        k,
                        crate::kafka::KafkaErrorKind::AuthorizationFailed
                            | crate::kafka::KafkaErrorKind::PolicyViolation
                    )
                }) =>
            {
                Err(rejected(
                    ProblemKind::DrillCanaryRefused,
                    format!(
                        "the source refused to create the canary topic {canary:?} ({e}): grant the mirror's principal \
                         CREATE (and DELETE, WRITE, READ) on that topic, or on the cluster, on the source; nothing was \
                         created"
                    ),
                ))
            }
            Err(e) => {
                Err(rejected(ProblemKind::SourceUnreachable, format!("cannot create the canary topic {canary:?}: {e}")))
            }
        }
    }

    pub(super) async fn run(mut self) {
        if let Err(e) = self.rehearse().await {
            tracing::warn!(mirror = %self.mirror(), drill = %self.value.id, "drill stopped: {e}");
            self.error = Some(e);
        }
        self.clean_up().await;
        self.finish().await;
    }

    /// Steps 2 to 6; an error stops the drill (the cleanup still runs).
    async fn rehearse(&mut self) -> Result<(), String> {
        // 2. produce
        self.step("produce", "running", None).await;
        let produced = match self.produce().await {
            Ok(p) => p,
            Err(e) => {
                self.step("produce", "failed", Some(e.clone())).await;
                return Err(format!("producing the canary's records failed: {e}"));
            }
        };
        self.figures.records_produced = produced.iter().filter(|p| p.committed).count() as i64;
        self.figures.records_aborted = produced.iter().filter(|p| !p.committed).count() as i64;
        let detail = format!(
            "{} committed records and {} in an aborted transaction",
            self.figures.records_produced, self.figures.records_aborted
        );
        self.step("produce", "done", Some(detail)).await;

        // 3. commit_group: the middle of each partition.
        self.step("commit_group", "running", None).await;
        let mut commit = Vec::new();
        let mut expected_next: BTreeMap<i32, u64> = BTreeMap::new();
        for (p, records) in drill::committed_by_partition(&produced) {
            if let Some((offset, seq)) = records.get(records.len() / 2) {
                commit.push((p, *offset));
                expected_next.insert(p, *seq);
            }
        }
        let (bootstrap, props, group, canary, timeout) = (
            self.target.source.bootstrap_servers.clone(),
            self.target.source.properties.clone(),
            self.group(),
            self.canary().to_string(),
            self.timeout(),
        );
        let offsets = commit.clone();
        if let Err(e) =
            blocking(move || crate::kafka::drill::commit_group(&bootstrap, &props, &group, &canary, &offsets, timeout))
                .await
        {
            self.step("commit_group", "failed", Some(e.clone())).await;
            return Err(format!("committing the drill's consumer group on the source failed: {e}"));
        }
        self.group_committed = true;
        let synced = self.group_is_synced();
        let detail = format!(
            "group {} committed the middle of each partition{}",
            self.group(),
            if synced { "" } else { "; the mirror does not sync this group's offsets" }
        );
        self.step("commit_group", "done", Some(detail)).await;

        // 4. mirror
        self.step("mirror", "running", None).await;
        let began = Instant::now();
        let started = self
            .handle
            .lifecycle(
                self.mirror(),
                TopicSelector::Names(vec![self.canary().to_string()]),
                LifecycleOp::Start { truncation: Truncation::None },
                false,
                self.actor.clone(),
            )
            .await;
        self.in_mirror = true;
        let refusal = match &started {
            Err(e) => Some(e.to_string()),
            Ok(r) => r
                .results
                .iter()
                .find(|o| !o.ok)
                .map(|o| o.error.as_ref().map_or("refused".into(), |p| p.detail.clone())),
        };
        if let Some(why) = refusal {
            self.step("mirror", "failed", Some(why.clone())).await;
            return Err(format!("the mirror did not start the canary: {why}"));
        }
        let ends: BTreeMap<i32, i64> = {
            let mut ends = BTreeMap::new();
            for p in &produced {
                let e = ends.entry(p.partition).or_insert(0);
                *e = (*e).max(p.offset + 1);
            }
            ends
        };
        if let Err(e) = self.caught_up(&ends).await {
            self.step("mirror", "failed", Some(e.clone())).await;
            return Err(e);
        }
        self.figures.catch_up_ms = Some(began.elapsed().as_millis() as i64);
        let group_synced = if synced { self.wait_group_synced(&commit).await } else { Err("not synced".into()) };
        let detail = format!(
            "{} copied through the mirror's data path in {} ms; {}",
            self.canary(),
            self.figures.catch_up_ms.unwrap_or(0),
            match &group_synced {
                Ok(()) => "the group's offsets reached the destination".to_string(),
                Err(e) => format!("the group's offsets did not reach the destination: {e}"),
            }
        );
        self.step("mirror", "done", Some(detail)).await;

        // 5. failover
        self.step("failover", "running", None).await;
        let snap = self.handle.snapshot();
        if let Some(m) = snap.mirror(self.mirror()) {
            let production = m.topics.iter().filter(|t| t.name != self.canary());
            let (mut records, mut seconds) = (0i64, 0f64);
            for t in production {
                records += t.lag_records;
                seconds = seconds.max(t.lag_seconds);
            }
            self.figures.mirror_lag_records = Some(records);
            self.figures.mirror_lag_ms = Some((seconds * 1000.0).round() as i64);
        }
        let t0 = Instant::now();
        let stopped = self
            .handle
            .lifecycle(
                self.mirror(),
                TopicSelector::Names(vec![self.canary().to_string()]),
                LifecycleOp::Stop,
                false,
                self.actor.clone(),
            )
            .await;
        self.figures.stop_call_ms = Some(t0.elapsed().as_millis() as i64);
        let refusal = match &stopped {
            Err(e) => Some(e.to_string()),
            Ok(r) => r
                .results
                .iter()
                .find(|o| !o.ok)
                .map(|o| o.error.as_ref().map_or("refused".into(), |p| p.detail.clone())),
        };
        if let Some(why) = refusal {
            self.step("failover", "failed", Some(why.clone())).await;
            return Err(format!("the stop of the canary failed: {why}"));
        }
        let stop_points = match self.all_stopped(t0).await {
            Ok(s) => s,
            Err(e) => {
                self.step("failover", "failed", Some(e.clone())).await;
                return Err(e);
            }
        };
        let (bootstrap, props, canary, timeout) = (
            self.target.destination_bootstrap.clone(),
            self.target.destination_properties.clone(),
            self.canary().to_string(),
            FAILOVER_DEADLINE.saturating_sub(t0.elapsed()).max(Duration::from_secs(5)),
        );
        if let Err(e) =
            blocking(move || crate::kafka::drill::probe_writes(&bootstrap, &props, &canary, CANARY_PARTITIONS, timeout))
                .await
        {
            self.step("failover", "failed", Some(format!("the canary does not accept writes on the destination: {e}")))
                .await;
            return Err(format!("the canary does not accept writes on the destination after the stop: {e}"));
        }
        let rto = t0.elapsed().as_millis() as i64;
        self.figures.rto_ms = Some(rto);
        self.step(
            "failover",
            "done",
            Some(format!("every partition STOPPED and writable {rto} ms after the stop call")),
        )
        .await;

        // 6. verify
        self.step("verify", "running", None).await;
        match self.verify(&produced, &stop_points, &expected_next, group_synced).await {
            Ok(detail) => self.step("verify", "done", Some(detail)).await,
            Err(e) => {
                self.step("verify", "failed", Some(e.clone())).await;
                return Err(format!("reading the destination back failed: {e}"));
            }
        }
        Ok(())
    }
}
