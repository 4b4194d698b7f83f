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

use crate::domain::Timestamp;
use crate::domain::drill::{self, CleanupStep, DrillCheck, DrillFigures, DrillReport, DrillResult};
use crate::kafka::KafkaAdmin;
use crate::store::DrillValue;

use super::{
    Actor, EngineError, EngineHandle, OperationKind, OperationView, Problem, ProblemKind, Snapshot, SourceSpec,
    SyncSpec, TopicOutcome,
};

mod cleanup;
mod handle;
mod measure;
mod run;

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
}
