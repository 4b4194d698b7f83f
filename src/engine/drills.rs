//! Disaster-recovery drills: a rehearsal of the real failover path on a canary topic, never
//! touching the mirror's own topics (the verdict and the report are `domain::drill`).
//!
//! # What a drill does
//!
//! 1. **create_canary**: creates the canary topic on the source (default
//!    `kmirror-drill.<mirror>`; refused, with the reason, when the source does not let the
//!    mirror's principal create topics). Nothing else happens if this fails.
//! 2. **produce**: a known sequence on the canary, transactionally: per partition a committed
//!    transaction, an aborted one, and another committed one (`kafka::drill`).
//! 3. **commit_group**: the drill's consumer group (named like the canary) commits the middle of
//!    each partition on the source, as a consumer that stopped there would have.
//! 4. **mirror**: the canary joins the mirror (`topics:start`) and is copied through the mirror's
//!    own data paths and slots; the drill waits until it is caught up and the group's offsets are
//!    synced to the destination (when the mirror syncs that group).
//! 5. **failover**: the mirror's live RPO is read (its lag, production topics only), then the
//!    canary is stopped (`topics:stop`), and the RTO is the time from the stop call until every
//!    canary partition is STOPPED and accepts writes on the destination.
//! 6. **verify**: the destination's copy is read back: records lost (against what the stop
//!    reported as not mirrored), duplicated, aborted ones visible, and whether the group resumes
//!    at exactly the next record.
//! 7. **cleanup**: the canary leaves the mirror and is deleted on both clusters, the group on
//!    both; every failure is in the report (a drill with a failed cleanup fails).
//!
//! The drill is an operation (`drill`) and a Drill record in `__mirror_state`, rewritten at every
//! step, so every instance shows its progress and, at the end, its report: canonical JSON with a
//! SHA-256 digest, or an HMAC-SHA-256 with `[drills] signing_key_file`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::domain::drill::{
    self, CleanupStep, DrillCheck, DrillFigures, DrillReport, DrillResult, Objectives, Produced, Seen,
};
use crate::domain::{PartitionState, Timestamp};
use crate::kafka::KafkaAdmin;
use crate::kafka::drill::Sequence;
use crate::store::{DrillStepValue, DrillValue};

use super::approvals::new_operation_id;
use super::{
    Actor, EngineError, EngineHandle, LifecycleOp, OperationKind, OperationView, Problem, ProblemKind, Request,
    Snapshot, SourceSpec, SyncSpec, TopicOutcome, TopicSelector, Truncation,
};

/// What a drill may be asked for.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DrillOptions {
    /// The canary topic; default `kmirror-drill.<mirror>`.
    pub canary_topic: Option<String>,
    /// Recovery time objective: the drill fails when the failover takes longer.
    pub rto_objective_ms: Option<i64>,
    /// Recovery point objective: the drill fails when the mirror lags more at the failover.
    pub rpo_objective_ms: Option<i64>,
}

/// The key reports are signed with (`[drills] signing_key_file`). Never shown: `Debug` names
/// its ID only.
#[derive(Clone)]
pub struct DrillSigningKey(Arc<Vec<u8>>);

impl DrillSigningKey {
    /// The shortest key accepted, in bytes.
    pub const MIN_LEN: usize = 32;

    /// A key from a file's contents (a trailing line break is not part of it).
    ///
    /// # Errors
    ///
    /// A key shorter than [`Self::MIN_LEN`] bytes.
    pub fn from_file_contents(bytes: &[u8]) -> Result<DrillSigningKey, String> {
        let trimmed = bytes.strip_suffix(b"\n").map(|b| b.strip_suffix(b"\r").unwrap_or(b)).unwrap_or(bytes);
        if trimmed.len() < Self::MIN_LEN {
            return Err(format!(
                "the signing key is {} bytes; use at least {} (e.g. `openssl rand -hex 32`)",
                trimmed.len(),
                Self::MIN_LEN
            ));
        }
        Ok(DrillSigningKey(Arc::new(trimmed.to_vec())))
    }

    /// The key's ID (not the key): the first 16 hex digits of its SHA-256.
    #[must_use]
    pub fn id(&self) -> String {
        drill::key_id(&self.0)
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        &self.0
    }
}

impl std::fmt::Debug for DrillSigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DrillSigningKey({})", self.id())
    }
}

/// One step of a drill.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DrillStep {
    pub name: String,
    /// `pending`, `running`, `done`, `failed`, `skipped`.
    pub status: String,
    pub started_at: Option<Timestamp>,
    pub finished_at: Option<Timestamp>,
    pub detail: Option<String>,
}

/// A drill as every instance shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DrillView {
    pub id: String,
    pub mirror: String,
    /// `running`, `passed`, `failed`, `interrupted`.
    pub status: String,
    pub requested_by: String,
    pub client_address: Option<String>,
    pub instance: String,
    pub requested_at: Timestamp,
    pub finished_at: Option<Timestamp>,
    pub canary_topic: String,
    pub steps: Vec<DrillStep>,
    /// The report, once finished.
    pub report: Option<DrillReport>,
    /// The report exactly as stored (canonical JSON): what the digest covers and what is
    /// downloaded.
    pub report_json: Option<String>,
}

impl DrillView {
    /// The view of a stored drill.
    #[must_use]
    pub fn of(v: &DrillValue) -> DrillView {
        DrillView {
            id: v.id.clone(),
            mirror: v.mirror.clone(),
            status: v.status.clone(),
            requested_by: v.requested_by.clone(),
            client_address: v.client_address.clone(),
            instance: v.instance.clone(),
            requested_at: Timestamp::from_millis(v.requested_at),
            finished_at: v.finished_at.map(Timestamp::from_millis),
            canary_topic: v.canary_topic.clone(),
            steps: v
                .steps
                .iter()
                .map(|s| DrillStep {
                    name: s.name.clone(),
                    status: s.status.clone(),
                    started_at: s.started_at.map(Timestamp::from_millis),
                    finished_at: s.finished_at.map(Timestamp::from_millis),
                    detail: s.detail.clone(),
                })
                .collect(),
            report: v.report.as_deref().and_then(|r| serde_json::from_str(r).ok()),
            report_json: v.report.clone(),
        }
    }

    /// Whether it is still running.
    #[must_use]
    pub fn is_running(&self) -> bool {
        self.status == RUNNING
    }

    /// The verdict, once finished.
    #[must_use]
    pub fn result(&self) -> Option<DrillResult> {
        match self.status.as_str() {
            PASSED => Some(DrillResult::Pass),
            FAILED | INTERRUPTED => Some(DrillResult::Fail),
            _ => None,
        }
    }
}

pub(crate) const RUNNING: &str = "running";
pub(crate) const PASSED: &str = "passed";
pub(crate) const FAILED: &str = "failed";
pub(crate) const INTERRUPTED: &str = "interrupted";

/// The steps, in order.
pub(crate) const STEPS: [&str; 7] =
    ["create_canary", "produce", "commit_group", "mirror", "failover", "verify", "cleanup"];

/// What a drill needs of its mirror and the engine (answered by the coordinator).
#[derive(Clone)]
pub(crate) struct DrillTarget {
    pub source: SourceSpec,
    pub source_cluster_id: Option<String>,
    pub destination_bootstrap: String,
    pub destination_properties: BTreeMap<String, String>,
    pub destination_cluster_id: String,
    pub instance_id: String,
    pub cluster_name: String,
    pub state_topic: String,
    pub request_timeout: Duration,
    pub signing_key: Option<DrillSigningKey>,
    pub sync: SyncSpec,
    /// The mirror's topics.
    pub topics: BTreeSet<String>,
}

/// Partitions of the canary.
const CANARY_PARTITIONS: i32 = 3;
/// Committed records per canary partition (the aborted transaction holds another 10).
const COMMITTED_PER_PARTITION: u64 = 100;
const ABORTED_PER_PARTITION: u64 = 10;
/// How long the mirror may take to copy the canary.
const CATCH_UP_DEADLINE: Duration = Duration::from_secs(180);
/// How long the group's offsets may take to reach the destination.
const GROUP_SYNC_DEADLINE: Duration = Duration::from_secs(90);
/// How long the failover may take (STOPPED and writable).
const FAILOVER_DEADLINE: Duration = Duration::from_secs(120);
/// The most drills kept per mirror; older ones are deleted from the state topic.
pub(crate) const MAX_DRILLS_PER_MIRROR: usize = 100;

/// Drills starting on this process, by state topic and mirror: a second one is refused before
/// the first one's record is even published.
static STARTING: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

/// The default canary of a mirror.
#[must_use]
pub fn default_canary(mirror: &str) -> String {
    format!("kmirror-drill.{mirror}")
}

fn rejected(kind: ProblemKind, detail: impl Into<String>) -> EngineError {
    EngineError::rejected(kind, detail)
}

/// Whether a running drill's instance is gone (its record will never finish).
fn orphaned(d: &DrillView, snap: &Snapshot) -> bool {
    d.is_running() && !snap.cluster.instances.iter().any(|i| i.id == d.instance)
}

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
        let m = snap.mirror(mirror).ok_or_else(|| super::coordinator::not_found(mirror))?;
        let canary = options.canary_topic.clone().unwrap_or_else(|| default_canary(mirror));
        super::validate_topic_name(&canary).map_err(|e| {
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
        super::check_not_internal(&canary, &target.state_topic)?;
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

/// One drill while it runs.
struct DrillRun {
    handle: EngineHandle,
    value: DrillValue,
    actor: Actor,
    approved_by: Option<String>,
    options: DrillOptions,
    target: DrillTarget,
    figures: DrillFigures,
    checks: Vec<DrillCheck>,
    cleanup: Vec<CleanupStep>,
    /// Why the drill stopped before the end.
    error: Option<String>,
    /// What the drill created, for the cleanup.
    created_source: bool,
    in_mirror: bool,
    group_committed: bool,
    started: Instant,
}

/// Runs a blocking Kafka call on the blocking pool.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, crate::kafka::KafkaError> + Send + 'static,
) -> Result<T, String> {
    match tokio::task::spawn_blocking(f).await {
        Ok(r) => r.map_err(|e| e.to_string()),
        Err(e) => Err(format!("the task failed: {e}")),
    }
}

impl DrillRun {
    fn mirror(&self) -> &str {
        &self.value.mirror
    }

    fn canary(&self) -> &str {
        &self.value.canary_topic
    }

    fn group(&self) -> String {
        self.value.canary_topic.clone()
    }

    fn timeout(&self) -> Duration {
        self.target.request_timeout
    }

    fn source_admin(&self) -> Result<KafkaAdmin, EngineError> {
        KafkaAdmin::connect(&self.target.source.bootstrap_servers, &self.target.source.properties, self.timeout())
            .map_err(|e| rejected(ProblemKind::SourceUnreachable, e.to_string()))
    }

    fn destination_admin(&self) -> Result<KafkaAdmin, String> {
        KafkaAdmin::connect(&self.target.destination_bootstrap, &self.target.destination_properties, self.timeout())
            .map_err(|e| e.to_string())
    }

    /// The drill's operation record: running (`result: None`) or finished.
    fn operation(&self, result: Option<&DrillReport>) -> OperationView {
        OperationView {
            id: self.value.id.clone(),
            mirror: self.value.mirror.clone(),
            kind: OperationKind::Drill,
            topics: vec![self.value.canary_topic.clone()],
            requested_by: self.actor.identity.clone(),
            client_address: self.actor.address.clone(),
            requested_at: self.value.requested_at,
            finished_at: result.map(|_| crate::clock::now().as_millis()),
            results_omitted: Default::default(),
            results: result
                .map(|r| {
                    let failed: Vec<&str> = r.checks.iter().filter(|c| !c.passed).map(|c| c.name.as_str()).collect();
                    vec![TopicOutcome {
                        topic: self.value.canary_topic.clone(),
                        ok: r.result == DrillResult::Pass,
                        error: (r.result == DrillResult::Fail).then(|| Problem {
                            kind: ProblemKind::DrillFailed,
                            detail: match &r.error {
                                Some(e) => format!("the drill failed: {e}"),
                                None => format!("the drill failed: {}", failed.join(", ")),
                            },
                        }),
                    }]
                })
                .unwrap_or_default(),
            accepted_by: Some(self.target.instance_id.clone()),
        }
    }

    /// Writes the drill's record (progress is best effort: a failed write is logged).
    async fn save(&self) {
        if let Err(e) = self.handle.record_drill(self.value.clone()).await {
            tracing::warn!(mirror = %self.value.mirror, drill = %self.value.id, "cannot record the drill's progress: {e}");
        }
    }

    async fn step(&mut self, name: &str, status: &str, detail: Option<String>) {
        let now = crate::clock::now().as_millis();
        if let Some(s) = self.value.steps.iter_mut().find(|s| s.name == name) {
            if status == "running" {
                s.started_at = Some(now);
            } else {
                s.started_at.get_or_insert(now);
                s.finished_at = Some(now);
            }
            s.status = status.into();
            s.detail = detail;
        }
        self.save().await;
    }

    async fn create_canary(&mut self) -> Result<(), EngineError> {
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

    async fn run(mut self) {
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

    fn group_is_synced(&self) -> bool {
        let s = &self.target.sync;
        s.group_offsets
            && crate::domain::name_pattern::NameFilter::lenient(&s.group_include, &s.group_exclude)
                .matches(&self.group())
    }

    async fn produce(&self) -> Result<Vec<Produced>, String> {
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
    async fn caught_up(&self, ends: &BTreeMap<i32, i64>) -> Result<(), String> {
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
    async fn wait_group_synced(&self, commit: &[(i32, i64)]) -> Result<(), String> {
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
    async fn all_stopped(&self, t0: Instant) -> Result<BTreeMap<i32, (Option<i64>, i64)>, String> {
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

    async fn verify(
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

    /// Step 7: removes what the drill created, reporting every failure.
    async fn clean_up(&mut self) {
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
    async fn finish(&mut self) {
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
