//! The MirrorMetadataManager (DESIGN.md section 7): on every refresh of a mirror, validate the
//! source cluster ID, then sync topic configs, consumer-group offsets and ACLs.
//!
//! A refresh runs in its own task with cheap clones of the admin clients and a copy of the
//! partition positions it needs, and reports a [`RefreshReport`] back to the coordinator, which
//! owns every state change (partition increases, failures, the record of created ACLs). The
//! decision functions (`config_changes`, `mirrored_acls`, `clamp_offset`) are pure and unit
//! tested here; they live next to their only caller because they speak in the Kafka layer's
//! owned types.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::domain::config_sync::{ConfigStatus, compare};
use crate::domain::name_pattern::NameFilter;
use crate::domain::offset_map::Translation;
use crate::domain::{MirrorPosition, PartitionState, Timestamp};
use crate::kafka::{
    AclBinding, AclFilter, AclOperation, AclPermission, ConfigOp, ConfigSource, GroupOffset, GroupState,
    IsolationLevel, OffsetSpec, PatternType, ResourceType,
};

use super::SyncSpec;
use super::persist::OffsetMaps;
use super::snapshot::{GroupSyncView, SyncKind, SyncStatus};

/// A mirrored topic as the refresh needs it.
#[derive(Debug, Clone)]
pub(super) struct TopicInput {
    pub name: String,
    pub partitions: Vec<(i32, PartitionState, Option<MirrorPosition>)>,
}

/// Everything a refresh reads, copied out of the coordinator.
pub(super) struct RefreshInput {
    pub mirror: String,
    pub sync: SyncSpec,
    pub expected_cluster_id: Option<String>,
    pub source: super::ports::Admin,
    pub destination: super::ports::Admin,
    pub topics: Vec<TopicInput>,
    pub offset_maps: OffsetMaps,
    pub created_acls: Vec<AclBinding>,
    /// Config values kmirror applied last time, per (topic, config) — to tell drift from change.
    pub applied_configs: HashMap<(String, String), String>,
    pub now: Timestamp,
    /// List the source's topics for discovery (the mirror has an include pattern).
    pub list_topics: bool,
}

/// The outcome of one sync kind.
#[derive(Debug, Clone, Default)]
pub(super) struct KindOutcome {
    pub ran: bool,
    pub error: Option<String>,
    pub applied: u64,
    pub warnings: Vec<String>,
    pub unsupported: bool,
}

/// One group's sync: what it found, and whether it could write.
type GroupOutcome = (GroupCounts, Result<(), GroupSyncError>);

/// Why a group's offsets were not synced.
#[derive(Debug, thiserror::Error)]
enum GroupSyncError {
    /// Reading the source's offsets or writing the destination's failed.
    #[error("{0}")]
    Kafka(crate::kafka::KafkaError),
    /// Consumers of the group run on the destination: their offsets are never moved under them.
    #[error("group {group} has {members} active member(s) on the destination; offsets not synced")]
    ActiveMembers { group: String, members: usize },
}

/// What one group's sync found, whether or not it could write.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct GroupCounts {
    changed: u64,
    topics: BTreeSet<String>,
    committed: u64,
    in_sync: u64,
    not_translated: u64,
}

/// What a refresh found and did.
pub(super) struct RefreshReport {
    /// The source's cluster ID, or why it could not be read.
    pub cluster_id: Result<String, ClusterIdError>,
    /// Topic -> Some((source topic ID, partition count)), None when the topic is missing.
    pub topics: BTreeMap<String, Option<(String, usize)>>,
    pub configs: KindOutcome,
    pub groups: KindOutcome,
    pub acls: KindOutcome,
    pub group_views: Vec<GroupSyncView>,
    /// The new set of kmirror-created ACLs, when it changed.
    pub created_acls: Option<Vec<AclBinding>>,
    pub applied_configs: HashMap<(String, String), String>,
    /// The source's topic names for discovery (one metadata request), when asked, and how long
    /// listing them took.
    pub listing: Option<(crate::kafka::KafkaResult<Vec<String>>, std::time::Duration)>,
}

/// Why a refresh did not learn the source's cluster ID (and so ran no sync).
#[derive(Debug, thiserror::Error)]
pub(super) enum ClusterIdError {
    /// The refresh ended before the check (it never does today; the report's initial value).
    #[error("not checked")]
    NotChecked,
    /// DescribeCluster failed.
    #[error("{0}")]
    Describe(crate::kafka::KafkaError),
    /// The cluster answered, but describing the mirror's topics failed.
    #[error("describe topics: {0}")]
    DescribeTopics(crate::kafka::KafkaError),
}

impl ClusterIdError {
    /// What the mirror's cluster-ID check shows: a source that refused the credentials or the
    /// TLS handshake is told apart from one that did not answer.
    pub(super) fn status(&self) -> crate::engine::ClusterIdStatus {
        use crate::engine::ClusterIdStatus;
        use crate::kafka::KafkaErrorKind as K;
        match self {
            ClusterIdError::Describe(e) if e.is(K::Authentication) => ClusterIdStatus::AuthenticationFailed,
            ClusterIdError::Describe(e) if e.is(K::Ssl) => ClusterIdStatus::TlsFailed,
            _ => ClusterIdStatus::Unreachable,
        }
    }
}

/// Whether a failed sync call means the cluster does not offer the feature at all (a cluster
/// denying a permission is shown the same way): an explicit "unsupported" answer, or a timeout
/// from a cluster known to serve only the core APIs.
fn unsupported(admin: &dyn super::ports::ClusterAdmin, e: &crate::kafka::KafkaError) -> bool {
    use crate::kafka::KafkaErrorKind as K;
    e.kind().is_some_and(|k| k.is_unsupported() || k == K::SecurityDisabled)
        || (admin.is_limited() && (matches!(e, crate::kafka::KafkaError::Timeout { .. }) || e.is(K::TimedOut)))
}

/// Runs one refresh of a mirror.
pub(super) async fn refresh(input: RefreshInput) -> RefreshReport {
    let mut report = RefreshReport {
        cluster_id: Err(ClusterIdError::NotChecked),
        topics: BTreeMap::new(),
        configs: KindOutcome::default(),
        groups: KindOutcome::default(),
        acls: KindOutcome::default(),
        group_views: Vec::new(),
        created_acls: None,
        applied_configs: input.applied_configs.clone(),
        listing: None,
    };
    match input.source.describe_cluster().await {
        Ok(c) => report.cluster_id = Ok(c.cluster_id),
        Err(e) => {
            report.cluster_id = Err(ClusterIdError::Describe(e));
            return report;
        }
    }
    if let (Some(expected), Ok(observed)) = (&input.expected_cluster_id, &report.cluster_id)
        && expected != observed
    {
        // A mismatch halts the mirror's metadata sync as well as its data.
        return report;
    }
    if input.list_topics {
        let began = std::time::Instant::now();
        let listed = input.source.list_topics().await;
        report.listing = Some((listed, began.elapsed()));
    }
    let names: Vec<String> = input.topics.iter().map(|t| t.name.clone()).collect();
    if !names.is_empty() {
        match input.source.describe_topics(&names).await {
            Ok(ds) => {
                for (t, d) in names.iter().zip(ds) {
                    match d {
                        Ok(d) => {
                            report.topics.insert(t.clone(), Some((d.topic_id.to_string(), d.partitions.len())));
                        }
                        Err(e) if e.is(crate::kafka::KafkaErrorKind::UnknownTopicOrPartition) => {
                            report.topics.insert(t.clone(), None);
                        }
                        Err(e) => {
                            report.cluster_id = Err(ClusterIdError::DescribeTopics(e));
                            return report;
                        }
                    }
                }
            }
            Err(e) => {
                report.cluster_id = Err(ClusterIdError::DescribeTopics(e));
                return report;
            }
        }
    }
    // Topics the metadata manager looks after: still a mirror (not stopped, not failed).
    let active: Vec<&TopicInput> = input
        .topics
        .iter()
        .filter(|t| report.topics.get(&t.name).is_some_and(Option::is_some))
        .filter(|t| {
            t.partitions.iter().any(|(_, s, _)| {
                matches!(s, PartitionState::Mirroring | PartitionState::Paused | PartitionState::Pausing)
            })
        })
        .collect();
    if input.sync.topic_configs {
        report.configs = sync_configs(&input, &active, &mut report.applied_configs).await;
    }
    let mut synced_groups = BTreeSet::new();
    if input.sync.group_offsets {
        let (outcome, views, groups) = sync_groups(&input, &active).await;
        report.groups = outcome;
        report.group_views = views;
        synced_groups = groups;
    }
    if input.sync.acls {
        let topics: BTreeSet<String> = active.iter().map(|t| t.name.clone()).collect();
        let (outcome, created) = sync_acls(&input, &topics, &synced_groups).await;
        report.acls = outcome;
        report.created_acls = created;
    }
    report
}

/// The IncrementalAlterConfigs operations that make a mirror topic's copied configs equal the
/// source's, and drift warnings for values changed directly on the destination.
///
/// `source` and `destination` are the per-topic overrides (name → value). Copied configs absent
/// at the source are deleted on the destination, except `compression.type`, which stays
/// `producer` so the broker keeps the mirrored batches as they are.
pub(super) fn config_changes(
    topic: &str,
    source: &BTreeMap<String, String>,
    destination: &BTreeMap<String, String>,
    applied: &HashMap<(String, String), String>,
) -> (Vec<(String, ConfigOp)>, Vec<String>) {
    let mut ops = Vec::new();
    let mut drift = Vec::new();
    // The same comparison the topic page shows (`config_sync::compare`), applied.
    for row in compare(source, destination).into_iter().filter(|r| r.status == ConfigStatus::Differs) {
        if let Some(h) = &row.destination {
            let ours = applied.get(&(topic.to_string(), row.name.clone()));
            if ours.is_some_and(|o| o != h) {
                drift.push(format!(
                    "{topic}: {} was changed on the destination to {h:?}; reset to the source's {}",
                    row.name,
                    row.wanted.as_ref().map_or("default".to_string(), |w| format!("{w:?}"))
                ));
            }
        }
        ops.push((row.name, row.wanted.map_or(ConfigOp::Delete, ConfigOp::Set)));
    }
    (ops, drift)
}

pub(super) fn overrides(entries: Vec<crate::kafka::ConfigEntry>) -> BTreeMap<String, String> {
    entries
        .into_iter()
        .filter(|e| e.source == ConfigSource::DynamicTopic)
        .filter_map(|e| e.value.map(|v| (e.name, v)))
        .collect()
}

async fn sync_configs(
    input: &RefreshInput,
    topics: &[&TopicInput],
    applied: &mut HashMap<(String, String), String>,
) -> KindOutcome {
    let mut out = KindOutcome { ran: true, ..Default::default() };
    let mut errors = Vec::new();
    for t in topics {
        let src = match input.source.describe_topic_configs(&t.name).await {
            Ok(e) => overrides(e),
            Err(e) => {
                out.unsupported |= unsupported(&input.source, &e);
                errors.push(format!("{}: source configs: {e}", t.name));
                continue;
            }
        };
        let dst = match input.destination.describe_topic_configs(&t.name).await {
            Ok(e) => overrides(e),
            Err(e) => {
                out.unsupported |= unsupported(&input.destination, &e);
                errors.push(format!("{}: destination configs: {e}", t.name));
                continue;
            }
        };
        let (ops, drift) = config_changes(&t.name, &src, &dst, applied);
        out.warnings.extend(drift);
        if ops.is_empty() {
            continue;
        }
        match input.destination.alter_topic_configs(&t.name, &ops).await {
            Ok(()) => {
                out.applied += ops.len() as u64;
                for (name, op) in ops {
                    match op {
                        ConfigOp::Set(v) => {
                            applied.insert((t.name.clone(), name), v);
                        }
                        _ => {
                            applied.remove(&(t.name.clone(), name));
                        }
                    }
                }
            }
            Err(e) => errors.push(format!("{}: {e}", t.name)),
        }
    }
    if !errors.is_empty() {
        out.error = Some(errors.join("; "));
    }
    out
}

/// A translated group offset clamped to what a destination consumer can use: never below the
/// destination log start, never past the mirrored end.
pub(super) fn clamp_offset(t: Translation, log_start: i64, mirrored_end: i64) -> i64 {
    t.offset().clamp(log_start.min(mirrored_end), mirrored_end)
}

async fn sync_groups(
    input: &RefreshInput,
    topics: &[&TopicInput],
) -> (KindOutcome, Vec<GroupSyncView>, BTreeSet<String>) {
    let mut out = KindOutcome { ran: true, ..Default::default() };
    let mut views = Vec::new();
    // Checked when the mirror was stored.
    let filter = NameFilter::lenient(&input.sync.group_include, &input.sync.group_exclude);
    let listed = match input.source.list_consumer_groups().await {
        Ok(l) => l,
        Err(e) => {
            out.unsupported = unsupported(&input.source, &e);
            out.error = Some(format!("list source groups: {e}"));
            return (out, views, BTreeSet::new());
        }
    };
    let groups: BTreeSet<String> = listed.into_iter().map(|g| g.group_id).filter(|g| filter.matches(g)).collect();
    // Partitions whose offsets may be synced: a mirror (not STOPPED) with a position.
    let mut eligible: BTreeMap<(String, i32), MirrorPosition> = BTreeMap::new();
    for t in topics {
        for (p, state, pos) in &t.partitions {
            if matches!(state, PartitionState::Mirroring | PartitionState::Paused | PartitionState::Pausing)
                && let Some(pos) = pos
            {
                eligible.insert((t.name.clone(), *p), *pos);
            }
        }
    }
    let mut errors = Vec::new();
    if eligible.is_empty() {
        return (out, views, groups);
    }
    let starts: HashMap<(String, i32), i64> = {
        let q: Vec<_> = eligible.keys().map(|(t, p)| (t.clone(), *p, OffsetSpec::Earliest)).collect();
        match input.destination.list_offsets(&q, IsolationLevel::ReadUncommitted).await {
            Ok(v) => v.into_iter().map(|o| ((o.topic, o.partition), o.offset)).collect(),
            Err(e) => {
                out.error = Some(format!("destination log start offsets: {e}"));
                return (out, views, groups);
            }
        }
    };
    // One ListConsumerGroupOffsets per group (librdkafka takes one group per request): run a
    // bounded number at once, or a source with hundreds of groups makes every refresh minutes long.
    let list: Vec<&String> = groups.iter().collect();
    let mut results: Vec<(String, GroupOutcome)> = Vec::with_capacity(list.len());
    for chunk in list.chunks(GROUP_SYNC_CONCURRENCY) {
        let futs: Vec<_> = chunk.iter().map(|g| sync_group(input, g, &eligible, &starts)).collect();
        let done = futures_util::future::join_all(futs).await;
        results.extend(chunk.iter().map(|g| (*g).clone()).zip(done));
    }
    for (g, (counts, result)) in results {
        let mut view = GroupSyncView {
            group: g.clone(),
            last_attempt_at: input.now,
            last_success_at: None,
            last_error: None,
            partitions_synced: 0,
            topics: counts.topics.into_iter().collect(),
            partitions_committed: counts.committed,
            partitions_in_sync: counts.in_sync,
            partitions_not_translated: counts.not_translated,
        };
        match result {
            Ok(()) => {
                view.last_success_at = Some(input.now);
                view.partitions_synced = counts.changed;
                out.applied += counts.changed;
            }
            Err(e) => {
                errors.push(format!("{g}: {e}"));
                view.last_error = Some(e.to_string());
            }
        }
        views.push(view);
    }
    if !errors.is_empty() {
        out.error = Some(errors.join("; "));
    }
    (out, views, groups)
}

/// Group-offset requests in flight at once during one refresh.
const GROUP_SYNC_CONCURRENCY: usize = 16;

/// Syncs one group's committed offsets onto the destination; the number of partitions changed.
async fn sync_group(
    input: &RefreshInput,
    g: &String,
    eligible: &BTreeMap<(String, i32), MirrorPosition>,
    starts: &HashMap<(String, i32), i64>,
) -> GroupOutcome {
    let mut counts = GroupCounts::default();
    let committed = match input.source.list_consumer_group_offsets(g, None, true).await {
        Ok(c) => c,
        Err(e) => return (counts, Err(GroupSyncError::Kafka(e))),
    };
    let relevant: Vec<&GroupOffset> =
        committed.iter().filter(|o| o.offset >= 0 && eligible.contains_key(&(o.topic.clone(), o.partition))).collect();
    counts.committed = relevant.len() as u64;
    counts.topics = relevant.iter().map(|o| o.topic.clone()).collect();
    if relevant.is_empty() {
        return (counts, Ok(()));
    }
    // Only for groups with no active members on the destination: never move offsets
    // under a running consumer.
    if let Ok(mut d) = input.destination.describe_consumer_groups(std::slice::from_ref(g)).await
        && let Some(Ok(desc)) = d.pop()
        && !desc.members.is_empty()
        && !matches!(desc.state, GroupState::Empty | GroupState::Dead)
    {
        return (counts, Err(GroupSyncError::ActiveMembers { group: g.clone(), members: desc.members.len() }));
    }
    let parts: Vec<(String, i32)> = relevant.iter().map(|o| (o.topic.clone(), o.partition)).collect();
    let current: HashMap<(String, i32), i64> = input
        .destination
        .list_consumer_group_offsets(g, Some(&parts), false)
        .await
        .map(|v| v.into_iter().map(|o| ((o.topic, o.partition), o.offset)).collect())
        .unwrap_or_default();
    let mut changes = Vec::new();
    {
        let maps = input.offset_maps.read().unwrap_or_else(|e| e.into_inner());
        for o in relevant {
            let key = (o.topic.clone(), o.partition);
            let translated =
                maps.get(&(input.mirror.clone(), o.topic.clone(), o.partition)).and_then(|m| m.translate(o.offset));
            let Some(t) = translated else {
                counts.not_translated += 1;
                continue;
            };
            let pos = eligible[&key];
            let start = starts.get(&key).copied().unwrap_or(0);
            let d = clamp_offset(t, start, pos.destination_end_offset);
            if current.get(&key) == Some(&d) {
                counts.in_sync += 1;
            } else {
                changes.push(GroupOffset {
                    topic: o.topic.clone(),
                    partition: o.partition,
                    offset: d,
                    leader_epoch: None,
                    metadata: o.metadata.clone(),
                });
            }
        }
    }
    if changes.is_empty() {
        return (counts, Ok(()));
    }
    if let Err(e) = input.destination.alter_consumer_group_offsets(g, &changes).await {
        return (counts, Err(GroupSyncError::Kafka(e)));
    }
    counts.changed = changes.len() as u64;
    counts.in_sync += counts.changed;
    (counts, Ok(()))
}

/// Whether an ACL resource pattern covers `name`.
fn covers(b: &AclBinding, name: &str) -> bool {
    match b.pattern_type {
        PatternType::Literal => b.name == name || b.name == "*",
        PatternType::Prefixed => name.starts_with(&b.name),
        _ => false,
    }
}

/// The ACLs a mirror copies from the source: literal and prefixed bindings that cover a mirrored
/// topic or a synced group. A mirror topic is read-only, so on topics ALLOW grants are limited
/// to reading (READ, DESCRIBE, DESCRIBE_CONFIGS; ALL becomes READ + DESCRIBE) and ALLOW WRITE is
/// never copied; DENY bindings are copied as they are.
pub(super) fn mirrored_acls(
    source: &[AclBinding],
    topics: &BTreeSet<String>,
    groups: &BTreeSet<String>,
) -> BTreeSet<AclBinding> {
    let mut out = BTreeSet::new();
    for b in source {
        if !matches!(b.pattern_type, PatternType::Literal | PatternType::Prefixed) {
            continue;
        }
        match b.resource_type {
            ResourceType::Topic if topics.iter().any(|t| covers(b, t)) => match (b.permission, b.operation) {
                (AclPermission::Deny, _) => {
                    out.insert(b.clone());
                }
                (AclPermission::Allow, AclOperation::All) => {
                    for op in [AclOperation::Read, AclOperation::Describe] {
                        out.insert(AclBinding { operation: op, ..b.clone() });
                    }
                }
                (AclPermission::Allow, AclOperation::Read | AclOperation::Describe | AclOperation::DescribeConfigs) => {
                    out.insert(b.clone());
                }
                _ => {}
            },
            ResourceType::Group if groups.iter().any(|g| covers(b, g)) => {
                out.insert(b.clone());
            }
            _ => {}
        }
    }
    out
}

async fn sync_acls(
    input: &RefreshInput,
    topics: &BTreeSet<String>,
    groups: &BTreeSet<String>,
) -> (KindOutcome, Option<Vec<AclBinding>>) {
    let mut out = KindOutcome { ran: true, ..Default::default() };
    let source = match input.source.describe_acls(&AclFilter::default()).await {
        Ok(v) => v,
        Err(e) => {
            out.unsupported = unsupported(&input.source, &e);
            out.error = Some(format!("describe source ACLs: {e}"));
            return (out, None);
        }
    };
    let existing: BTreeSet<AclBinding> = match input.destination.describe_acls(&AclFilter::default()).await {
        Ok(v) => v.into_iter().collect(),
        Err(e) => {
            out.unsupported = unsupported(&input.destination, &e);
            out.error = Some(format!("describe destination ACLs: {e}"));
            return (out, None);
        }
    };
    let desired = mirrored_acls(&source, topics, groups);
    let ours: BTreeSet<AclBinding> = input.created_acls.iter().cloned().collect();
    let to_create: Vec<AclBinding> = desired.difference(&existing).cloned().collect();
    // Only ACLs kmirror created are ever removed.
    let to_delete: Vec<AclBinding> = ours.difference(&desired).cloned().collect();
    let mut created = ours.clone();
    let mut errors = Vec::new();
    if !to_create.is_empty() {
        match input.destination.create_acls(&to_create).await {
            Ok(()) => {
                out.applied += to_create.len() as u64;
                created.extend(to_create.iter().cloned());
            }
            Err(e) => errors.push(format!("create ACLs: {e}")),
        }
    }
    if !to_delete.is_empty() {
        let filters: Vec<AclFilter> = to_delete.iter().map(AclFilter::from).collect();
        match input.destination.delete_acls(&filters).await {
            Ok(_) => {
                out.applied += to_delete.len() as u64;
                for b in &to_delete {
                    created.remove(b);
                }
            }
            Err(e) => errors.push(format!("delete ACLs: {e}")),
        }
    }
    if !errors.is_empty() {
        out.error = Some(errors.join("; "));
    }
    let changed = created != ours;
    (out, changed.then(|| created.into_iter().collect()))
}

/// Folds a kind's outcome into its status.
pub(super) fn update_status(status: &mut SyncStatus, outcome: &KindOutcome, now: Timestamp) {
    if !outcome.ran {
        return;
    }
    status.last_attempt_at = Some(now);
    status.supported = !outcome.unsupported;
    match &outcome.error {
        None => {
            status.last_success_at = Some(now);
            status.last_error = None;
            status.consecutive_failures = 0;
            status.last_applied = outcome.applied;
        }
        Some(e) => {
            status.last_error =
                Some(if outcome.unsupported { format!("not supported by this cluster: {e}") } else { e.clone() });
            status.consecutive_failures += 1;
        }
    }
    status.warnings = outcome.warnings.clone();
}

/// Records, for every enabled sync kind, an attempt that could not run (source unreachable or
/// halted by a cluster-ID mismatch).
pub(super) fn mark_not_run(statuses: &mut [SyncStatus], enabled: &SyncSpec, reason: &str, now: Timestamp) {
    for status in statuses.iter_mut() {
        let on = match status.kind {
            SyncKind::TopicConfigs => enabled.topic_configs,
            SyncKind::GroupOffsets => enabled.group_offsets,
            SyncKind::Acls => enabled.acls,
        };
        if !on {
            continue;
        }
        status.last_attempt_at = Some(now);
        status.last_error = Some(reason.to_string());
        status.consecutive_failures += 1;
    }
}

pub(super) fn status_mut(statuses: &mut [SyncStatus], kind: SyncKind) -> Option<&mut SyncStatus> {
    statuses.iter_mut().find(|s| s.kind == kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cluster-ID check's status follows the Kafka error's kind: refused credentials and a
    /// failed TLS handshake are not an unreachable source, and only DescribeCluster tells.
    #[test]
    fn a_failed_cluster_id_check_says_why_from_the_error_kind() {
        use crate::engine::ClusterIdStatus as S;
        use crate::kafka::{KafkaCode, KafkaError};
        let kafka = |name: &str| KafkaError::Kafka {
            operation: "DescribeCluster",
            resource: "cluster".into(),
            code: KafkaCode { code: -1, name: name.into() },
            message: "refused".into(),
        };
        let table = [
            (ClusterIdError::Describe(kafka("_AUTHENTICATION")), S::AuthenticationFailed),
            (ClusterIdError::Describe(kafka("_SSL")), S::TlsFailed),
            (ClusterIdError::Describe(kafka("_TRANSPORT")), S::Unreachable),
            (ClusterIdError::DescribeTopics(kafka("_AUTHENTICATION")), S::Unreachable),
            (ClusterIdError::NotChecked, S::Unreachable),
        ];
        for (e, status) in table {
            assert_eq!(e.status(), status, "{e}");
        }
        let e = ClusterIdError::DescribeTopics(kafka("_TRANSPORT"));
        assert!(e.to_string().starts_with("describe topics: DescribeCluster failed"), "{e}");
        let busy = GroupSyncError::ActiveMembers { group: "billing".into(), members: 2 };
        assert_eq!(busy.to_string(), "group billing has 2 active member(s) on the destination; offsets not synced");
    }

    fn m(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn configs_follow_the_source_and_drift_is_reported() {
        let src = m(&[("retention.ms", "1000"), ("min.insync.replicas", "2")]);
        let dst = m(&[("compression.type", "producer"), ("retention.ms", "5000"), ("min.insync.replicas", "1")]);
        let (ops, drift) = config_changes("t", &src, &dst, &HashMap::new());
        assert_eq!(ops, vec![("retention.ms".to_string(), ConfigOp::Set("1000".into()))]);
        assert!(drift.is_empty(), "no memory of what kmirror applied: a change, not drift");

        let applied: HashMap<(String, String), String> =
            [(("t".to_string(), "retention.ms".to_string()), "1000".to_string())].into_iter().collect();
        let (_, drift) = config_changes("t", &src, &dst, &applied);
        assert_eq!(drift.len(), 1, "{drift:?}");
        assert!(drift[0].contains("retention.ms"));

        // A copied config removed at the source is deleted on the destination; compression stays.
        let (ops, _) =
            config_changes("t", &m(&[]), &m(&[("compression.type", "producer"), ("segment.ms", "9")]), &HashMap::new());
        assert_eq!(ops, vec![("segment.ms".to_string(), ConfigOp::Delete)]);
    }

    fn acl(rt: ResourceType, name: &str, pt: PatternType, op: AclOperation, perm: AclPermission) -> AclBinding {
        AclBinding {
            resource_type: rt,
            name: name.into(),
            pattern_type: pt,
            principal: "User:alice".into(),
            host: "*".into(),
            operation: op,
            permission: perm,
        }
    }

    #[test]
    fn acls_never_grant_write_on_mirror_topics() {
        use AclOperation::*;
        use AclPermission::*;
        use PatternType::*;
        use ResourceType::*;
        let topics: BTreeSet<String> = ["orders".to_string()].into_iter().collect();
        let groups: BTreeSet<String> = ["billing".to_string()].into_iter().collect();
        let src = vec![
            acl(Topic, "orders", Literal, Read, Allow),
            acl(Topic, "orders", Literal, Write, Allow),
            acl(Topic, "ord", Prefixed, All, Allow),
            acl(Topic, "orders", Literal, Write, Deny),
            acl(Topic, "other", Literal, Read, Allow),
            acl(Group, "billing", Literal, Read, Allow),
            acl(Group, "payroll", Literal, Read, Allow),
        ];
        let got = mirrored_acls(&src, &topics, &groups);
        let expected: BTreeSet<AclBinding> = [
            acl(Topic, "orders", Literal, Read, Allow),
            acl(Topic, "ord", Prefixed, Read, Allow),
            acl(Topic, "ord", Prefixed, Describe, Allow),
            acl(Topic, "orders", Literal, Write, Deny),
            acl(Group, "billing", Literal, Read, Allow),
        ]
        .into_iter()
        .collect();
        assert_eq!(got, expected);
        assert!(
            !got.iter()
                .any(|b| b.resource_type == Topic && b.permission == Allow && matches!(b.operation, Write | All))
        );
    }

    #[test]
    fn group_offsets_are_clamped_to_the_usable_range() {
        assert_eq!(clamp_offset(Translation::Exact(50), 10, 100), 50);
        assert_eq!(clamp_offset(Translation::BeforeFirst(3), 10, 100), 10);
        assert_eq!(clamp_offset(Translation::End(120), 10, 100), 100);
        assert_eq!(clamp_offset(Translation::NextMirrored(7), 0, 100), 7);
    }

    #[test]
    fn a_refresh_that_cannot_run_marks_each_enabled_kind_failed_and_keeps_the_last_success() {
        let t0 = Timestamp::from_millis(1_000);
        let t1 = Timestamp::from_millis(2_000);
        let mut statuses: Vec<SyncStatus> = SyncKind::ALL.iter().map(|k| SyncStatus::new(*k)).collect();
        for s in &mut statuses {
            update_status(s, &KindOutcome { ran: true, ..Default::default() }, t0);
        }
        let spec = SyncSpec { acls: false, ..SyncSpec::default() };
        mark_not_run(&mut statuses, &spec, "source cluster unreachable: timed out", t1);
        let configs = status_mut(&mut statuses, SyncKind::TopicConfigs).unwrap().clone();
        assert_eq!(configs.last_attempt_at, Some(t1));
        assert_eq!(configs.last_success_at, Some(t0), "the last success is kept");
        assert_eq!(configs.last_error.as_deref(), Some("source cluster unreachable: timed out"));
        assert_eq!(configs.consecutive_failures, 1);
        let acls = status_mut(&mut statuses, SyncKind::Acls).unwrap().clone();
        assert_eq!((acls.last_attempt_at, acls.last_error), (Some(t0), None), "a disabled kind is untouched");
    }
}
