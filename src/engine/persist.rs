//! Between the engine's in-memory model and the `__mirror_state` records (`crate::store`).
//!
//! Positions and offset-map runs are written by the data path inside its own transactions, one
//! OffsetRuns record per partition per transaction (key: mirror, source topic ID, partition, first
//! destination offset, so compaction keeps every batch). MirrorPartitionState records are written
//! by the coordinator on lifecycle transitions. Loading merges the two: the further position wins.

use crate::store::seal::Sealer;
use std::collections::{HashMap, HashSet};
use std::num::NonZeroU32;
use std::str::FromStr;
use std::sync::{Arc, RwLock};

use crate::data_path::{EncodeProgress, PartitionProgress, StateWrite};
use crate::domain::offset_map::OffsetMap;
use crate::domain::{
    ErrorCode, Event, EventKind, MirrorPosition, PartitionError, PartitionRecord, PartitionState, StopPoint, Timestamp,
    Truncation,
};
use crate::kafka::state_log::LogRecord;
use crate::store::{
    DesiredStateValue, Entry, ErrorValue, LastMirrorEpochsValue, MaterializedState, MirrorKey, MirrorTopicKey,
    MirrorTopicValue, MirrorValue, OffsetRunsKey, OffsetRunsValue, OmittedResultsValue, OperationValue, PartitionKey,
    PartitionStateValue, PositionValue, RunValue, SourceClusterValue, StateRecord, StopValue, SyncSettingsValue,
    TopicResultValue, TruncationValue,
};

use super::{MirrorSpec, OperationView, Problem, ProblemKind, SourceSpec, SyncSpec, TopicOutcome};
use crate::kafka::AclBinding;
use crate::store::AclBindingValue;

/// A mirror definition as stored.
#[derive(Debug, Clone)]
pub(crate) struct StoredMirror {
    pub spec: MirrorSpec,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// ACLs kmirror created on the destination (the only ones it ever deletes).
    pub created_acls: Vec<AclBinding>,
}

/// A binding's canonical record ([`AclBindingValue`]). `None` for a value only filters carry
/// (`Any`, `Match`: an answer from a newer broker the client could not name), which no binding
/// kmirror creates has.
fn acl_value(b: &AclBinding) -> Option<AclBindingValue> {
    use crate::kafka::{AclOperation as O, AclPermission as P, PatternType as T, ResourceType as R};
    use crate::store::{
        AclOperationValue as OV, AclPatternTypeValue as TV, AclPermissionValue as PV, AclResourceTypeValue as RV,
    };
    Some(AclBindingValue {
        resource_type: match b.resource_type {
            R::Topic => RV::Topic,
            R::Group => RV::Group,
            R::Cluster => RV::Cluster,
            R::TransactionalId => RV::TransactionalId,
            R::Any => return None,
        },
        name: b.name.clone(),
        pattern_type: match b.pattern_type {
            T::Literal => TV::Literal,
            T::Prefixed => TV::Prefixed,
            T::Any | T::Match => return None,
        },
        principal: b.principal.clone(),
        host: b.host.clone(),
        operation: match b.operation {
            O::All => OV::All,
            O::Read => OV::Read,
            O::Write => OV::Write,
            O::Create => OV::Create,
            O::Delete => OV::Delete,
            O::Alter => OV::Alter,
            O::Describe => OV::Describe,
            O::ClusterAction => OV::ClusterAction,
            O::DescribeConfigs => OV::DescribeConfigs,
            O::AlterConfigs => OV::AlterConfigs,
            O::IdempotentWrite => OV::IdempotentWrite,
            O::Any => return None,
        },
        permission: match b.permission {
            P::Allow => PV::Allow,
            P::Deny => PV::Deny,
            P::Any => return None,
        },
    })
}

/// The binding a stored record names; `None` when a kind is one this version does not know.
fn acl_from(v: &AclBindingValue) -> Option<AclBinding> {
    use crate::kafka::{AclOperation as O, AclPermission as P, PatternType as T, ResourceType as R};
    use crate::store::{
        AclOperationValue as OV, AclPatternTypeValue as TV, AclPermissionValue as PV, AclResourceTypeValue as RV,
    };
    Some(AclBinding {
        resource_type: match v.resource_type {
            RV::Topic => R::Topic,
            RV::Group => R::Group,
            RV::Cluster => R::Cluster,
            RV::TransactionalId => R::TransactionalId,
            RV::Unknown => return None,
        },
        name: v.name.clone(),
        pattern_type: match v.pattern_type {
            TV::Literal => T::Literal,
            TV::Prefixed => T::Prefixed,
            TV::Unknown => return None,
        },
        principal: v.principal.clone(),
        host: v.host.clone(),
        operation: match v.operation {
            OV::All => O::All,
            OV::Read => O::Read,
            OV::Write => O::Write,
            OV::Create => O::Create,
            OV::Delete => O::Delete,
            OV::Alter => O::Alter,
            OV::Describe => O::Describe,
            OV::ClusterAction => O::ClusterAction,
            OV::DescribeConfigs => O::DescribeConfigs,
            OV::AlterConfigs => O::AlterConfigs,
            OV::IdempotentWrite => O::IdempotentWrite,
            OV::Unknown => return None,
        },
        permission: match v.permission {
            PV::Allow => P::Allow,
            PV::Deny => P::Deny,
            PV::Unknown => return None,
        },
    })
}

/// A topic as loaded.
#[derive(Debug, Clone)]
pub(crate) struct LoadedTopic {
    pub name: String,
    pub source_topic_id: String,
    pub destination_topic_id: String,
    pub created_at: Timestamp,
    pub partitions: Vec<(i32, PartitionRecord)>,
}

#[derive(Debug, Clone)]
pub(crate) struct LoadedMirror {
    pub stored: StoredMirror,
    pub topics: Vec<LoadedTopic>,
    pub last_mirror_epochs: LastMirrorEpochsValue,
}

/// Everything loaded from `__mirror_state`.
#[derive(Debug, Default)]
pub(crate) struct Loaded {
    pub mirrors: Vec<LoadedMirror>,
    /// (mirror, topic name, partition) -> offset map.
    pub offset_maps: HashMap<(String, String, i32), OffsetMap>,
    /// Recorded operations, oldest first.
    pub operations: Vec<OperationView>,
    /// The approval records operations carry, by operation ID.
    pub approvals: HashMap<String, super::ApprovalRecord>,
    /// Every drill kept.
    pub drills: Vec<crate::store::DrillValue>,
}

fn parts(n: i32) -> NonZeroU32 {
    NonZeroU32::new(n.max(1) as u32).expect("at least one partition")
}

fn write(rec: StateRecord, n: i32) -> StateWrite {
    let e = rec.encode(parts(n));
    StateWrite { partition: e.partition, key: e.key, value: e.value }
}

fn position_value(p: &MirrorPosition) -> PositionValue {
    PositionValue {
        next_source_offset: p.next_source_offset,
        source_leader_epoch: p.source_leader_epoch,
        destination_end_offset: p.destination_end_offset,
    }
}

fn position_from(p: &PositionValue) -> MirrorPosition {
    MirrorPosition {
        next_source_offset: p.next_source_offset,
        source_leader_epoch: p.source_leader_epoch,
        destination_end_offset: p.destination_end_offset,
    }
}

fn truncation_value(t: Truncation) -> TruncationValue {
    match t {
        Truncation::None => TruncationValue::None,
        Truncation::Resync { quarantine } => TruncationValue::Resync { quarantine },
    }
}

fn truncation_from(t: TruncationValue) -> Truncation {
    match t {
        TruncationValue::None => Truncation::None,
        TruncationValue::Resync { quarantine } => Truncation::Resync { quarantine },
    }
}

/// The Mirror record of `m`, its secret values sealed by `sealer` (`store::seal`).
pub(crate) fn mirror(m: &StoredMirror, n: i32, sealer: &Sealer) -> StateWrite {
    let value = MirrorValue {
        name: m.spec.name.clone(),
        source: SourceClusterValue {
            bootstrap_servers: m.spec.source.bootstrap_servers.clone(),
            properties: sealer.seal_properties(&m.spec.name, &m.spec.source.properties),
        },
        expected_source_cluster_id: m.spec.expected_source_cluster_id.clone(),
        created_at: m.created_at.as_millis(),
        updated_at: m.updated_at.as_millis(),
        sync: SyncSettingsValue {
            topic_configs: m.spec.sync.topic_configs,
            consumer_group_offsets: m.spec.sync.group_offsets,
            acls: m.spec.sync.acls,
            refresh_interval_ms: SyncSettingsValue::default().refresh_interval_ms,
            group_include: m.spec.sync.group_include.clone(),
            group_exclude: m.spec.sync.group_exclude.clone(),
        },
        created_acls: m.created_acls.iter().filter_map(acl_value).collect(),
        replication_throttle_bytes_per_sec: m.spec.replication_throttle_bytes_per_sec,
        topic_include: m.spec.topic_include.clone(),
        // The defaults are written as absent, so a later version's defaults apply to them.
        topic_exclude: Some(m.spec.topic_exclude.clone())
            .filter(|e| *e != crate::domain::topic_policy::default_exclude()),
        approval: (m.spec.approval != super::ApprovalPolicy::default()).then(|| crate::store::ApprovalPolicyValue {
            required_for: m.spec.approval.required_for.iter().map(|a| a.as_str().to_string()).collect(),
            expires_after_seconds: m.spec.approval.expires_after_seconds,
        }),
    };
    write(StateRecord::Mirror(Entry::put(MirrorKey { mirror: m.spec.name.clone() }, value)), n)
}

pub(crate) fn mirror_tombstone(name: &str, n: i32) -> StateWrite {
    write(StateRecord::Mirror(Entry::tombstone(MirrorKey { mirror: name.to_string() })), n)
}

pub(crate) fn topic(
    mirror: &str,
    topic: &str,
    source_topic_id: &str,
    destination_topic_id: &str,
    partition_count: usize,
    created_at: Timestamp,
    n: i32,
) -> StateWrite {
    let value = MirrorTopicValue {
        mirror: mirror.to_string(),
        topic: topic.to_string(),
        source_topic_id: source_topic_id.to_string(),
        destination_topic_id: Some(destination_topic_id.to_string()),
        desired_state: DesiredStateValue::Mirroring,
        truncation: TruncationValue::None,
        partition_count: partition_count as i32,
        created_at: created_at.as_millis(),
        updated_at: created_at.as_millis(),
    };
    write(StateRecord::MirrorTopic(Entry::put(value.key(), value)), n)
}

pub(crate) fn topic_tombstone(mirror: &str, topic: &str, n: i32) -> StateWrite {
    let key = MirrorTopicKey { mirror: mirror.to_string(), topic: topic.to_string() };
    write(StateRecord::MirrorTopic(Entry::tombstone(key)), n)
}

/// Who writes a partition's record in a slot group (DESIGN.md section 10); `None` standalone.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Writer<'a> {
    /// This instance.
    pub instance: &'a str,
    /// The command recorded for the partition's owner to run, when this instance does not own
    /// it (`PartitionStateValue::command`).
    pub command: Option<EventKind>,
}

pub(crate) fn partition_state(
    mirror: &str,
    topic: &str,
    topic_id: &str,
    partition: i32,
    r: &PartitionRecord,
    n: i32,
    writer: Option<Writer<'_>>,
) -> StateWrite {
    let value = PartitionStateValue {
        mirror: mirror.to_string(),
        topic: topic.to_string(),
        topic_id: topic_id.to_string(),
        partition,
        state: r.state.as_str().to_string(),
        state_epoch: r.state_epoch,
        state_since: r.state_since.as_millis(),
        updated_at: r.updated_at.as_millis(),
        previous_state: r.previous_state.map(|s| s.as_str().to_string()),
        position: r.position.as_ref().map(position_value),
        error: r.error.as_ref().map(|e| ErrorValue {
            code: e.code.as_str().to_string(),
            message: e.message.clone(),
            retryable: e.code.is_retryable(),
            since: e.since.as_millis(),
        }),
        retry_count: r.retry_count,
        next_retry_at: r.next_retry_at.map(Timestamp::as_millis),
        stop: r.stop_point.as_ref().map(|s| StopValue {
            last_mirrored_source_offset: s.last_mirrored_source_offset,
            lme: s.last_mirror_epoch,
            destination_stop_offset: s.destination_stop_offset,
        }),
        truncation: truncation_value(r.truncation),
        written_by: writer.map(|w| w.instance.to_string()),
        command: writer.and_then(|w| w.command).map(|k| k.as_str().to_string()),
    };
    write(StateRecord::PartitionState(Entry::put(value.key(), value)), n)
}

pub(crate) fn partition_tombstone(mirror: &str, topic_id: &str, partition: i32, n: i32) -> StateWrite {
    write(StateRecord::PartitionState(Entry::tombstone(PartitionKey::new(mirror, topic_id, partition))), n)
}

/// An instance's heartbeat (the instances view).
pub(crate) fn instance(cluster_name: &str, me: &super::InstanceSnapshot, n: i32) -> StateWrite {
    let value = crate::store::InstanceValue {
        instance: me.id.clone(),
        cluster_name: cluster_name.to_string(),
        advertised_url: me.advertised_url.clone(),
        version: me.version.clone(),
        slots: me.slots.clone(),
        partitions: me.partitions,
        heartbeat_at: me.last_heartbeat.as_millis(),
        started_at: me.started_at.as_millis(),
    };
    let key = crate::store::InstanceKey { instance: me.id.clone() };
    write(StateRecord::Instance(Entry::put(key, value)), n)
}

/// Deletes one OffsetRuns batch (pruned: the destination no longer has its records).
pub(crate) fn offset_runs_tombstone(
    mirror: &str,
    topic_id: &str,
    partition: i32,
    first_destination_offset: i64,
    n: i32,
) -> StateWrite {
    let key = OffsetRunsKey {
        mirror: mirror.to_string(),
        topic_id: topic_id.to_string(),
        partition,
        first_destination_offset,
    };
    write(StateRecord::OffsetRuns(Entry::tombstone(key)), n)
}

/// The seed's LastMirrorEpochs record: one per mirror, holding every topic's partitions, so it
/// is always written whole (the latest record per mirror wins).
pub(crate) fn last_mirror_epochs(mirror: &str, value: &LastMirrorEpochsValue, n: i32) -> StateWrite {
    write(StateRecord::LastMirrorEpochs(Entry::put(MirrorKey { mirror: mirror.to_string() }, value.clone())), n)
}

/// The most bytes an Operation record's per-topic results and topic list may take, encoded. The
/// state topic keeps the brokers' default maximum message size (about 1 MiB, and librdkafka's
/// `message.max.bytes` is 1,000,000), and the record also holds its key and other fields. About
/// 8,000 results of topics with 20-character names fit.
pub(crate) const MAX_OPERATION_RESULT_BYTES: usize = 768 * 1024;

/// A per-topic result as its record stores it.
fn result_value(r: &TopicOutcome) -> TopicResultValue {
    TopicResultValue {
        topic: r.topic.clone(),
        outcome: if r.ok { "ok".into() } else { "error".into() },
        error_code: r.error.as_ref().map(|e| e.kind.slug().to_string()),
        message: r.error.as_ref().map(|e| e.detail.clone()),
    }
}

/// The per-topic results an operation keeps, in their order: what fits its record
/// ([`MAX_OPERATION_RESULT_BYTES`] for the results and the topic list), failures before successes;
/// and how many of each it leaves out. The live instance keeps the same (the audit trail reads
/// the same on every instance and after a restart); counts of the rest are exact.
pub(crate) fn bound_results(results: Vec<TopicOutcome>) -> (Vec<TopicOutcome>, super::OmittedResults) {
    let size = |r: &TopicOutcome| {
        let encoded = serde_json::to_vec(&result_value(r)).map_or(usize::MAX / 4, |v| v.len());
        // The result, the name again in the topic list, quotes and separators.
        encoded + r.topic.len() + 4
    };
    let mut budget = MAX_OPERATION_RESULT_BYTES;
    let mut keep = vec![false; results.len()];
    let mut omitted = super::OmittedResults::default();
    let failures_first =
        (0..results.len()).filter(|i| !results[*i].ok).chain((0..results.len()).filter(|i| results[*i].ok));
    for i in failures_first {
        let n = size(&results[i]);
        if n <= budget {
            budget -= n;
            keep[i] = true;
        } else if results[i].ok {
            omitted.ok += 1;
        } else {
            omitted.failed += 1;
        }
    }
    let kept = results.into_iter().zip(keep).filter(|(_, k)| *k).map(|(r, _)| r).collect();
    (kept, omitted)
}

/// The audit record of one operation (whose results [`bound_results`] bounded).
pub(crate) fn operation(op: &OperationView, n: i32) -> StateWrite {
    operation_with(op, None, n)
}

/// The audit record of one operation with the approval record it carries.
pub(crate) fn operation_with(op: &OperationView, approval: Option<&super::ApprovalRecord>, n: i32) -> StateWrite {
    let omitted = op.results_omitted;
    let value = OperationValue {
        id: op.id.clone(),
        mirror: op.mirror.clone(),
        kind: op.kind.to_string(),
        topics: op.topics.clone(),
        validate_only: false,
        requested_by: op.requested_by.clone(),
        client_address: op.client_address.clone(),
        requested_at: op.requested_at,
        finished_at: op.finished_at,
        results: op.results.iter().map(result_value).collect(),
        accepted_by: op.accepted_by.clone(),
        results_omitted: (omitted.ok > 0 || omitted.failed > 0)
            .then_some(OmittedResultsValue { ok: omitted.ok, failed: omitted.failed }),
        approval: approval.map(super::ApprovalRecord::to_value),
    };
    write(StateRecord::Operation(Entry::put(value.key(), value)), n)
}

/// A drill's record.
pub(crate) fn drill(value: &crate::store::DrillValue, n: i32) -> StateWrite {
    write(StateRecord::Drill(Entry::put(value.key(), value.clone())), n)
}

/// Deletes a drill's record (the oldest beyond what is kept per mirror).
pub(crate) fn drill_tombstone(mirror: &str, id: &str, n: i32) -> StateWrite {
    let key = crate::store::DrillKey { mirror: mirror.to_string(), id: id.to_string() };
    write(StateRecord::Drill(Entry::tombstone(key)), n)
}

/// The approval records of `state`'s operations, by operation ID.
pub(crate) fn approvals_of(state: &MaterializedState) -> HashMap<String, super::ApprovalRecord> {
    state
        .operations()
        .filter_map(|o| {
            let a = o.approval.as_ref()?;
            Some((o.id.clone(), super::ApprovalRecord::from_value(&o.mirror, a)?))
        })
        .collect()
}

/// An operation record as shown in the audit trail.
fn operation_view(v: &OperationValue) -> OperationView {
    OperationView {
        id: v.id.clone(),
        mirror: v.mirror.clone(),
        kind: super::OperationKind::from(v.kind.clone()),
        topics: v.topics.clone(),
        requested_by: v.requested_by.clone(),
        client_address: v.client_address.clone(),
        requested_at: v.requested_at,
        finished_at: v.finished_at,
        results: v
            .results
            .iter()
            .map(|r| TopicOutcome {
                topic: r.topic.clone(),
                ok: r.outcome == "ok",
                error: r.message.as_ref().map(|m| Problem {
                    kind: r.error_code.as_deref().and_then(ProblemKind::from_slug).unwrap_or(ProblemKind::Internal),
                    detail: m.clone(),
                }),
            })
            .collect(),
        results_omitted: v
            .results_omitted
            .map(|o| super::OmittedResults { ok: o.ok, failed: o.failed })
            .unwrap_or_default(),
        accepted_by: v.accepted_by.clone(),
    }
}

/// The most recent operations kept in memory for the audit views.
pub(crate) const MAX_OPERATIONS: usize = 1000;

/// Recorded operations, oldest first, shared with handle readers.
pub(crate) type Operations = Arc<RwLock<std::collections::VecDeque<OperationView>>>;

/// The data path's encoder: one OffsetRuns record (runs + new position) per partition per
/// transaction. `topic_ids` maps topic names to source topic IDs (the records' key).
/// `new_lineage` holds the partitions whose next batch starts a new lineage (after a resync):
/// loading drops their earlier runs.
pub(crate) fn progress_encoder(
    mirror: String,
    topic_ids: Arc<RwLock<HashMap<String, String>>>,
    new_lineage: Arc<RwLock<HashSet<(String, i32)>>>,
    n: i32,
) -> EncodeProgress {
    Box::new(move |p: &PartitionProgress| {
        let Some(topic_id) = topic_ids.read().unwrap_or_else(|e| e.into_inner()).get(&p.topic).cloned() else {
            return Vec::new();
        };
        if p.runs.is_empty() {
            return Vec::new();
        }
        let value = OffsetRunsValue {
            mirror: mirror.clone(),
            topic_id,
            partition: p.partition,
            new_lineage: new_lineage
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .contains(&(p.topic.clone(), p.partition)),
            runs: p.runs.iter().map(|r| RunValue(r.source_start, r.destination_start, r.len)).collect(),
            position: Some(PositionValue {
                next_source_offset: p.next_source_offset,
                source_leader_epoch: p.source_leader_epoch.unwrap_or(-1),
                destination_end_offset: p.destination_end_offset,
            }),
        };
        let Some(key) = value.key() else { return Vec::new() };
        vec![write(StateRecord::OffsetRuns(Entry::put(key, value)), n)]
    })
}

/// Runs per OffsetRuns record when a whole map is written at once (about 30 bytes of JSON each:
/// well below the brokers' default 1 MiB record limit).
const RUNS_PER_BATCH: usize = 5_000;

/// A partition's offset map written whole, as OffsetRuns batches without a position: the
/// history a failback mirror inherits from the mirror that copied the other way (issue 18).
pub(crate) fn offset_map_batches(
    mirror: &str,
    topic_id: &str,
    partition: i32,
    map: &OffsetMap,
    n: i32,
) -> Vec<StateWrite> {
    map.runs()
        .chunks(RUNS_PER_BATCH)
        .filter_map(|runs| {
            let value = OffsetRunsValue {
                mirror: mirror.to_string(),
                topic_id: topic_id.to_string(),
                partition,
                new_lineage: false,
                runs: runs.iter().map(|r| RunValue(r.source_start, r.destination_start, r.len)).collect(),
                position: None,
            };
            let key = value.key()?;
            Some(write(StateRecord::OffsetRuns(Entry::put(key, value)), n))
        })
        .collect()
}

/// The transitions an instance records for a partition another one owns as commands
/// (`PartitionStateValue::command`): the lifecycle calls.
pub(crate) const COMMANDS: [EventKind; 5] =
    [EventKind::Start, EventKind::Pause, EventKind::Resume, EventKind::Stop, EventKind::Recover];

/// The command a record carries for its partition's owner (`PartitionStateValue::command`), as
/// the event its writer applies again when the record lost to a newer one; `None` for a record
/// without one (or with a command this version does not know).
pub(crate) fn command_event(v: &PartitionStateValue) -> Option<Event> {
    let kind = COMMANDS.into_iter().find(|k| v.command.as_deref() == Some(k.as_str()))?;
    match kind {
        EventKind::Start => Some(Event::Start { truncation: truncation_from(v.truncation) }),
        EventKind::Pause => Some(Event::Pause),
        EventKind::Resume => Some(Event::Resume),
        EventKind::Stop => Some(Event::Stop),
        EventKind::Recover => Some(Event::Recover),
        _ => None,
    }
}

fn partition_record(v: &PartitionStateValue) -> Result<PartitionRecord, String> {
    let state = PartitionState::from_str(&v.state).map_err(|e| e.to_string())?;
    let previous_state =
        v.previous_state.as_deref().map(PartitionState::from_str).transpose().map_err(|e| e.to_string())?;
    let error = match &v.error {
        None => None,
        Some(e) => {
            let code: ErrorCode =
                serde_json::from_value(serde_json::Value::String(e.code.clone())).unwrap_or(ErrorCode::Internal);
            Some(PartitionError { code, message: e.message.clone(), since: Timestamp::from_millis(e.since) })
        }
    };
    Ok(PartitionRecord {
        state,
        state_epoch: v.state_epoch,
        state_since: Timestamp::from_millis(v.state_since),
        updated_at: Timestamp::from_millis(v.updated_at),
        previous_state,
        position: v.position.as_ref().map(position_from),
        stop_point: v.stop.as_ref().map(|s| StopPoint {
            last_mirror_epoch: s.lme,
            last_mirrored_source_offset: s.last_mirrored_source_offset,
            destination_stop_offset: s.destination_stop_offset,
        }),
        truncation: truncation_from(v.truncation),
        error,
        retry_count: v.retry_count,
        next_retry_at: v.next_retry_at.map(Timestamp::from_millis),
    })
}

/// Rebuilds the engine's model from the records of `__mirror_state`. Records that cannot be
/// decoded or applied are skipped and described in the returned warnings.
pub(crate) fn load(records: &[LogRecord], sealer: &Sealer) -> (Loaded, Vec<String>) {
    let (state, skipped) = MaterializedState::rebuild(records.iter().map(|r| (r.key.as_deref(), r.value.as_deref())));
    let mut warnings: Vec<String> = skipped
        .iter()
        .map(|s| {
            let r = &records[s.index];
            format!("skipped state record at partition {} offset {}: {}", r.partition, r.offset, s.error)
        })
        .collect();
    let loaded = load_state(&state, &mut warnings, sealer);
    (loaded, warnings)
}

/// The engine's model of everything in `state` (see [`load`]).
pub(crate) fn load_state(state: &MaterializedState, warnings: &mut Vec<String>, sealer: &Sealer) -> Loaded {
    let mut loaded = Loaded {
        operations: state.operations().map(operation_view).collect(),
        approvals: approvals_of(state),
        drills: state.drills().cloned().collect(),
        ..Default::default()
    };
    for mv in state.mirrors() {
        let stored = stored_mirror(mv, sealer);
        let mut topics = Vec::new();
        for tv in state.topics_of(&mv.name) {
            topics.push(loaded_topic(state, &mv.name, tv, Some(&mut loaded.offset_maps), warnings));
        }
        let last_mirror_epochs =
            state.last_mirror_epochs(&mv.name).cloned().unwrap_or(LastMirrorEpochsValue { topics: Vec::new() });
        loaded.mirrors.push(LoadedMirror { stored, topics, last_mirror_epochs });
    }
    loaded
}

/// A mirror's definition as stored, its sealed secret values opened by `sealer`. A value that
/// does not open (sealed under a key this instance does not have) stays sealed: clients built
/// with it fail, and the engine reports that mirror's data path as failed with the reason
/// (`Sealer::unseal_properties` on what is left).
pub(crate) fn stored_mirror(mv: &MirrorValue, sealer: &Sealer) -> StoredMirror {
    StoredMirror {
        spec: MirrorSpec {
            name: mv.name.clone(),
            source: SourceSpec {
                bootstrap_servers: mv.source.bootstrap_servers.clone(),
                properties: sealer.unseal_properties(&mv.name, &mv.source.properties).0,
            },
            expected_source_cluster_id: mv.expected_source_cluster_id.clone(),
            sync: SyncSpec {
                topic_configs: mv.sync.topic_configs,
                group_offsets: mv.sync.consumer_group_offsets,
                acls: mv.sync.acls,
                group_include: mv.sync.group_include.clone(),
                group_exclude: mv.sync.group_exclude.clone(),
            },
            replication_throttle_bytes_per_sec: mv.replication_throttle_bytes_per_sec.filter(|r| *r > 0),
            topic_include: mv.topic_include.clone(),
            topic_exclude: mv.topic_exclude.clone().unwrap_or_else(crate::domain::topic_policy::default_exclude),
            approval: mv
                .approval
                .as_ref()
                .map(|a| super::ApprovalPolicy {
                    required_for: a
                        .required_for
                        .iter()
                        .filter_map(|s| crate::domain::approval::ApprovalAction::parse(s))
                        .collect(),
                    expires_after_seconds: a.expires_after_seconds,
                })
                .unwrap_or_default(),
        },
        created_at: Timestamp::from_millis(mv.created_at),
        updated_at: Timestamp::from_millis(mv.updated_at),
        created_acls: mv.created_acls.iter().filter_map(acl_from).collect(),
    }
}

/// One topic of a mirror with its partitions' records (and, when `maps` is given, their offset
/// maps) as `state` holds them.
pub(crate) fn loaded_topic(
    state: &MaterializedState,
    mirror: &str,
    tv: &MirrorTopicValue,
    mut maps: Option<&mut HashMap<(String, String, i32), OffsetMap>>,
    warnings: &mut Vec<String>,
) -> LoadedTopic {
    let mut partitions = Vec::new();
    for p in 0..tv.partition_count {
        let key = PartitionKey::new(mirror, &tv.source_topic_id, p);
        let Some(rec) = partition_in(state, &key, Timestamp::from_millis(tv.created_at), warnings) else { continue };
        if let Some(maps) = maps.as_deref_mut()
            && let Some(map) = state.offset_map(&key)
        {
            maps.insert((mirror.to_string(), tv.topic.clone(), p), map.clone());
        }
        partitions.push((p, rec));
    }
    LoadedTopic {
        name: tv.topic.clone(),
        source_topic_id: tv.source_topic_id.clone(),
        destination_topic_id: tv.destination_topic_id.clone().unwrap_or_default(),
        created_at: Timestamp::from_millis(tv.created_at),
        partitions,
    }
}

/// A partition's record as `state` holds it: its lifecycle record with the position of its
/// latest position record when that is further (a partition without a record yet is new, as
/// of `created_at`). `None` when its record cannot be read (described in `warnings`).
pub(crate) fn partition_in(
    state: &MaterializedState,
    key: &PartitionKey,
    created_at: Timestamp,
    warnings: &mut Vec<String>,
) -> Option<PartitionRecord> {
    let mut rec = match state.partition(key).map(partition_record) {
        Some(Ok(r)) => r,
        Some(Err(e)) => {
            warnings.push(format!("mirror {} topic ID {} partition {}: {e}", key.mirror, key.topic_id, key.partition));
            return None;
        }
        None => PartitionRecord::new(created_at),
    };
    // The data path's position records are at least as recent as the lifecycle's.
    if let Some(pos) = state.committed_position(key) {
        let pos = position_from(&pos);
        if rec.position.is_none_or(|cur| !pos.is_behind(&cur) && pos != cur) {
            rec.position = Some(pos);
        }
    }
    Some(rec)
}

/// Offset maps shared between the coordinator (writer) and handle readers.
pub(crate) type OffsetMaps = Arc<RwLock<HashMap<(String, String, i32), OffsetMap>>>;

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::domain::PartitionState;
    use crate::store::MAX_PARTITION_COUNT;

    /// An operation about 20,000 topics keeps what fits its record, failures first, in the call's
    /// order; the record stays under librdkafka's and the brokers' default message size, counts
    /// the rest, and reads back the same; a small operation keeps everything.
    #[test]
    fn an_operation_about_thousands_of_topics_keeps_what_fits_its_record() {
        let outcome = |i: usize| {
            let topic = format!("orders-eu-west-{i:06}-payments");
            if i % 1000 == 7 {
                let detail = format!("topic {topic:?}: partition 3 is FAILED: {}", "x".repeat(900));
                TopicOutcome { topic, ok: false, error: Some(Problem { kind: ProblemKind::IllegalTransition, detail }) }
            } else {
                TopicOutcome { topic, ok: true, error: None }
            }
        };
        let results: Vec<TopicOutcome> = (0..20_000).map(outcome).collect();
        let (kept, omitted) = bound_results(results.clone());
        assert_eq!(kept.iter().filter(|r| !r.ok).count(), 20, "every failure is kept");
        assert_eq!(omitted.failed, 0);
        assert_eq!(kept.len() as u64 + omitted.ok, 20_000);
        assert!(omitted.ok > 10_000 && kept.len() > 5_000, "{} kept, {omitted:?}", kept.len());
        let order: Vec<usize> = kept.iter().map(|k| results.iter().position(|r| r.topic == k.topic).unwrap()).collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]), "kept in the call's order");
        let view = OperationView {
            id: "op-1".into(),
            mirror: "m".into(),
            kind: super::super::OperationKind::Stop,
            topics: kept.iter().map(|r| r.topic.clone()).collect(),
            requested_by: "alice".into(),
            client_address: None,
            requested_at: 1,
            finished_at: Some(2),
            results: kept,
            results_omitted: omitted,
            accepted_by: None,
        };
        let w = operation(&view, 16);
        let size = w.key.len() + w.value.as_ref().map_or(0, Vec::len);
        assert!(size < 1_000_000, "the record is {size} bytes");
        assert!(size > 700_000, "the budget is used: {size} bytes");
        let loaded = load(&log(&[w]), &crate::store::seal::Sealer::default()).0;
        assert_eq!(loaded.operations, vec![view], "reads back as kept");

        let few: Vec<TopicOutcome> = (0..50).map(outcome).collect();
        assert_eq!(bound_results(few.clone()), (few, crate::engine::OmittedResults::default()));
    }

    fn log(records: &[StateWrite]) -> Vec<LogRecord> {
        records
            .iter()
            .enumerate()
            .map(|(i, w)| LogRecord {
                partition: w.partition,
                offset: i as i64,
                key: Some(w.key.clone()),
                value: w.value.clone(),
            })
            .collect()
    }

    fn mirror_record() -> StateWrite {
        let value = MirrorValue {
            topic_include: Vec::new(),
            topic_exclude: None,
            name: "m".into(),
            source: SourceClusterValue { bootstrap_servers: "src:9092".into(), properties: BTreeMap::new() },
            expected_source_cluster_id: None,
            created_at: 1,
            updated_at: 1,
            sync: SyncSettingsValue::default(),
            created_acls: Vec::new(),
            replication_throttle_bytes_per_sec: None,
            approval: None,
        };
        write(StateRecord::Mirror(Entry::put(MirrorKey { mirror: "m".into() }, value)), 4)
    }

    fn topic_record(name: &str, topic_id: &str, partition_count: i32) -> StateWrite {
        let value = MirrorTopicValue {
            mirror: "m".into(),
            topic: name.into(),
            source_topic_id: topic_id.into(),
            destination_topic_id: Some(format!("D-{topic_id}")),
            desired_state: DesiredStateValue::Mirroring,
            truncation: TruncationValue::None,
            partition_count,
            created_at: 1,
            updated_at: 1,
        };
        write(StateRecord::MirrorTopic(Entry::put(value.key(), value)), 4)
    }

    /// A Mirror record written before ACLs had a canonical form (each kind as `Debug` text)
    /// loads its created ACLs, so they can still be removed; it is written back in the
    /// canonical lowercase form. A binding of a kind this version does not know is skipped.
    #[test]
    fn created_acls_of_an_old_debug_text_record_load_and_are_rewritten_canonically() {
        use crate::kafka::{AclOperation, AclPermission, PatternType, ResourceType};
        let old = br#"{"type":"Mirror","version":0,"name":"m","source":{"bootstrap_servers":"src:9092",
            "properties":{}},"expected_source_cluster_id":null,"created_at":1,"updated_at":1,"created_acls":[
            {"resource_type":"Topic","name":"ord","pattern_type":"Prefixed","principal":"User:alice","host":"*",
             "operation":"Read","permission":"Allow"},
            {"resource_type":"Group","name":"billing","pattern_type":"Literal","principal":"User:bob","host":"*",
             "operation":"All","permission":"Deny"},
            {"resource_type":"Topic","name":"x","pattern_type":"Literal","principal":"User:c","host":"*",
             "operation":"Any","permission":"Allow"}]}"#;
        let records = [LogRecord {
            partition: 0,
            offset: 0,
            key: Some(br#"{"type":"Mirror","version":0,"mirror":"m"}"#.to_vec()),
            value: Some(old.to_vec()),
        }];
        let (loaded, warnings) = load(&records, &Sealer::default());
        assert!(warnings.is_empty(), "{warnings:?}");
        let stored = &loaded.mirrors[0].stored;
        let binding = |resource_type, name: &str, pattern_type, principal: &str, operation, permission| AclBinding {
            resource_type,
            name: name.into(),
            pattern_type,
            principal: principal.into(),
            host: "*".into(),
            operation,
            permission,
        };
        assert_eq!(
            stored.created_acls,
            [
                binding(
                    ResourceType::Topic,
                    "ord",
                    PatternType::Prefixed,
                    "User:alice",
                    AclOperation::Read,
                    AclPermission::Allow
                ),
                binding(
                    ResourceType::Group,
                    "billing",
                    PatternType::Literal,
                    "User:bob",
                    AclOperation::All,
                    AclPermission::Deny
                ),
            ]
        );
        let written = String::from_utf8(mirror(stored, 4, &Sealer::default()).value.unwrap()).unwrap();
        assert!(
            written.contains(
                r#""created_acls":[{"resource_type":"topic","name":"ord","pattern_type":"prefixed","principal":"User:alice","host":"*","operation":"read","permission":"allow"},{"resource_type":"group","name":"billing","pattern_type":"literal","principal":"User:bob","host":"*","operation":"all","permission":"deny"}]"#
            ),
            "{written}"
        );
        // And the new form loads back to the same bindings.
        let records =
            [LogRecord { partition: 0, offset: 0, key: records[0].key.clone(), value: Some(written.into_bytes()) }];
        assert_eq!(load(&records, &Sealer::default()).0.mirrors[0].stored.created_acls, stored.created_acls);
    }

    /// Every binding kmirror can create survives the store unchanged.
    #[test]
    fn every_acl_kind_round_trips_through_its_record() {
        use crate::kafka::{AclOperation as O, AclPermission as P, PatternType as T, ResourceType as R};
        for resource_type in [R::Topic, R::Group, R::Cluster, R::TransactionalId] {
            for pattern_type in [T::Literal, T::Prefixed] {
                for operation in [
                    O::All,
                    O::Read,
                    O::Write,
                    O::Create,
                    O::Delete,
                    O::Alter,
                    O::Describe,
                    O::ClusterAction,
                    O::DescribeConfigs,
                    O::AlterConfigs,
                    O::IdempotentWrite,
                ] {
                    for permission in [P::Allow, P::Deny] {
                        let b = AclBinding {
                            resource_type,
                            name: "n".into(),
                            pattern_type,
                            principal: "User:p".into(),
                            host: "h".into(),
                            operation,
                            permission,
                        };
                        assert_eq!(acl_value(&b).as_ref().and_then(acl_from), Some(b.clone()), "{b:?}");
                    }
                }
            }
        }
    }

    /// A hostile partition count (2^31 - 1) in a MirrorTopic record: loading reports and skips it
    /// at once, without a partition loop of that length, and keeps everything else.
    #[test]
    fn a_hostile_partition_count_is_reported_and_skipped() {
        let records = log(&[
            mirror_record(),
            topic_record("hostile", "T-hostile", i32::MAX),
            topic_record("negative", "T-negative", -7),
            topic_record("orders", "T-orders", 2),
        ]);
        let started = std::time::Instant::now();
        let (loaded, warnings) = load(&records, &Sealer::default());
        assert!(started.elapsed() < std::time::Duration::from_secs(5), "loading took {:?}", started.elapsed());
        let topics: Vec<(&str, usize)> =
            loaded.mirrors[0].topics.iter().map(|t| (t.name.as_str(), t.partitions.len())).collect();
        assert_eq!(topics, [("orders", 2)]);
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(warnings[0].contains("partition_count is 2147483647"), "{}", warnings[0]);
        assert!(warnings[0].contains(&format!("outside 0..={MAX_PARTITION_COUNT}")), "{}", warnings[0]);
        assert!(warnings[1].contains("partition_count is -7"), "{}", warnings[1]);
    }

    /// The truncation mode of a resync that failed in PREPARING survives the store, so the retry
    /// after a restart redoes the resync (DeleteRecords) instead of mirroring over the records.
    #[test]
    fn a_failed_resync_keeps_its_truncation_mode_across_a_reload() {
        let now = Timestamp::from_millis(10);
        let mut record = PartitionRecord::new(now);
        record.state = PartitionState::Failed;
        record.state_epoch = 3;
        record.previous_state = Some(PartitionState::Preparing);
        record.truncation = Truncation::Resync { quarantine: false };
        record.error = Some(PartitionError {
            code: ErrorCode::DestinationUnavailable,
            message: "resync: DeleteRecords refused".into(),
            since: now,
        });
        record.next_retry_at = Some(Timestamp::from_millis(20));
        assert_eq!(record.validate(), Ok(()));
        let records = log(&[
            mirror_record(),
            topic_record("orders", "T-orders", 1),
            partition_state("m", "orders", "T-orders", 0, &record, 4, None),
        ]);
        let (loaded, warnings) = load(&records, &Sealer::default());
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(loaded.mirrors[0].topics[0].partitions, [(0, record)]);
    }
}
