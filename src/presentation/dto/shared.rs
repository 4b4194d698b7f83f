//! Shared by several resources: the partition state, per-topic results of lifecycle calls and
//! operations, and what a stop or failback would leave behind.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::domain::PartitionState;
use crate::engine::{Problem, TopicOutcome};

/// A partition's lifecycle state (KIP-1279 seed states).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[schema(as = PartitionState)]
pub enum PartitionStateDto {
    Unknown,
    Preparing,
    Mirroring,
    Pausing,
    Paused,
    Stopping,
    Stopped,
    Failed,
}

impl From<PartitionState> for PartitionStateDto {
    fn from(s: PartitionState) -> Self {
        match s {
            PartitionState::Unknown => Self::Unknown,
            PartitionState::Preparing => Self::Preparing,
            PartitionState::Mirroring => Self::Mirroring,
            PartitionState::Pausing => Self::Pausing,
            PartitionState::Paused => Self::Paused,
            PartitionState::Stopping => Self::Stopping,
            PartitionState::Stopped => Self::Stopped,
            PartitionState::Failed => Self::Failed,
        }
    }
}

impl From<PartitionStateDto> for PartitionState {
    fn from(s: PartitionStateDto) -> Self {
        match s {
            PartitionStateDto::Unknown => Self::Unknown,
            PartitionStateDto::Preparing => Self::Preparing,
            PartitionStateDto::Mirroring => Self::Mirroring,
            PartitionStateDto::Pausing => Self::Pausing,
            PartitionStateDto::Paused => Self::Paused,
            PartitionStateDto::Stopping => Self::Stopping,
            PartitionStateDto::Stopped => Self::Stopped,
            PartitionStateDto::Failed => Self::Failed,
        }
    }
}

/// A problem reported for one topic of a lifecycle call or operation.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TopicProblem {
    /// The stable problem type slug (same table as the problem+json `type`).
    #[serde(rename = "type")]
    pub problem_type: String,
    pub detail: String,
}

impl From<&Problem> for TopicProblem {
    fn from(p: &Problem) -> Self {
        TopicProblem { problem_type: p.kind.slug().to_string(), detail: p.detail.clone() }
    }
}

/// One topic's outcome.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TopicResult {
    pub topic: String,
    pub ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<TopicProblem>,
    /// `truncation: resync` with `quarantine: true`: per partition with divergent records, those copied
    /// to `<topic>.kmirror-diverged` before the resync deleted them (with `validate_only`: the
    /// records it would copy). Absent for other calls.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quarantined: Option<Vec<QuarantineResult>>,
    /// `validate_only` of a start that is an incremental failback (the destination topic holds
    /// what the source's stopped mirror copied from here): the lineage adopted and what each
    /// partition will copy. Absent for other calls; a failback with divergent records answers
    /// `DESTINATION_DIVERGED` instead, with their count and range per partition.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failback: Option<FailbackResult>,
    /// What to know beyond `ok`: e.g. a pause of a topic with FAILED partitions pauses the others
    /// now, and the FAILED ones stay FAILED and pause when they are retried.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// `validate_only` of `topics:stop`: what a stop now would leave unmirrored, per partition
    /// (the numbers the dashboard's failover dialog shows). Absent for other calls.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unmirrored: Option<UnmirroredResult>,
    /// `topics:stop` with `require_caught_up`: the partitions whose source holds records the
    /// destination does not have. With `ok: false` (`not-caught-up`), those still behind when the
    /// timeout passed (nothing was stopped); with `ok: true`, records the source received after
    /// the promote's final check (none when the producers were stopped first). Absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub behind: Option<Vec<PartitionBehindResult>>,
}

/// What a stop of one topic now would leave unmirrored: source records committed on the source
/// and not on the destination yet (its lag).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct UnmirroredResult {
    /// Over all partitions.
    pub records: i64,
    /// The largest of the partitions' `seconds`.
    pub seconds: f64,
    pub partitions: Vec<UnmirroredPartition>,
}

/// What a stop now would leave unmirrored of one partition.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct UnmirroredPartition {
    pub partition: i32,
    pub state: PartitionStateDto,
    /// Source records (offsets) not mirrored yet; 0 for a STOPPED partition.
    pub records: i64,
    /// How long ago the partition last had no lag (about the age of the oldest of those
    /// records); 0 without lag.
    pub seconds: f64,
    /// The source's last stable offset at the last lag refresh.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_last_stable_offset: Option<i64>,
    /// The next source offset to mirror: everything before it is on the destination.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mirrored_source_offset: Option<i64>,
}

impl From<&crate::engine::StopImpact> for UnmirroredResult {
    fn from(i: &crate::engine::StopImpact) -> Self {
        UnmirroredResult {
            records: i.records,
            seconds: i.seconds,
            partitions: i
                .partitions
                .iter()
                .map(|p| UnmirroredPartition {
                    partition: p.partition,
                    state: p.state.into(),
                    records: p.records,
                    seconds: p.seconds,
                    source_last_stable_offset: p.source_last_stable_offset,
                    mirrored_source_offset: p.mirrored_source_offset,
                })
                .collect(),
        }
    }
}

/// A partition whose source holds records the destination does not have (a promote).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct PartitionBehindResult {
    pub partition: i32,
    pub state: PartitionStateDto,
    /// Source records (offsets) not on the destination; absent when the source did not answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lag_records: Option<i64>,
    /// The source's last stable offset, read for the check; absent when the source did not answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_last_stable_offset: Option<i64>,
    /// The next source offset the destination is missing; absent when nothing was mirrored.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mirrored_source_offset: Option<i64>,
}

impl From<&crate::engine::PartitionBehind> for PartitionBehindResult {
    fn from(b: &crate::engine::PartitionBehind) -> Self {
        PartitionBehindResult {
            partition: b.partition,
            state: b.state.into(),
            lag_records: b.lag_records,
            source_last_stable_offset: b.source_last_stable_offset,
            mirrored_source_offset: b.mirrored_source_offset,
        }
    }
}

/// The preview of an incremental failback of one topic.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct FailbackResult {
    /// The mirror on the source cluster that copied this topic from here and was failed over;
    /// its stop points and offset maps are adopted (nothing here is deleted).
    pub from_mirror: String,
    /// Records the failback copies over all partitions.
    pub records_to_copy: i64,
    pub partitions: Vec<FailbackPartitionResult>,
}

/// What an incremental failback copies from one partition of the source.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct FailbackPartitionResult {
    pub partition: i32,
    /// First source offset copied (the other side's stop offset: everything before it is here).
    pub from_offset: i64,
    /// The source's last stable offset now (exclusive).
    pub to_offset: i64,
    /// Records in that range (`read_committed`: transaction markers and aborted records are not
    /// copied).
    pub records: i64,
}

impl From<&crate::domain::lineage::FailbackPreview> for FailbackResult {
    fn from(f: &crate::domain::lineage::FailbackPreview) -> Self {
        FailbackResult {
            from_mirror: f.from_mirror.clone(),
            records_to_copy: f.records(),
            partitions: f
                .partitions
                .iter()
                .map(|p| FailbackPartitionResult {
                    partition: p.partition,
                    from_offset: p.from_offset,
                    to_offset: p.to_offset,
                    records: p.records,
                })
                .collect(),
        }
    }
}

impl From<&TopicOutcome> for TopicResult {
    fn from(o: &TopicOutcome) -> Self {
        TopicResult {
            topic: o.topic.clone(),
            ok: o.ok,
            error: o.error.as_ref().map(TopicProblem::from),
            quarantined: None,
            failback: None,
            note: None,
            unmirrored: None,
            behind: None,
        }
    }
}

/// What a quarantine copied (or would copy) from one partition of the destination topic.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct QuarantineResult {
    pub partition: i32,
    /// Divergent records copied by this call (`validate_only`: that it would copy).
    pub records: i64,
    /// Divergent records already in the quarantine topic (copied by an earlier, interrupted
    /// attempt; never copied twice).
    pub already_quarantined: i64,
    /// First and last divergent offset (inclusive); absent when nothing diverged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_offset: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_offset: Option<i64>,
}

impl From<&crate::domain::quarantine::QuarantinedPartition> for QuarantineResult {
    fn from(q: &crate::domain::quarantine::QuarantinedPartition) -> Self {
        QuarantineResult {
            partition: q.partition,
            records: q.records,
            already_quarantined: q.already_quarantined,
            first_offset: q.offsets.map(|(a, _)| a),
            last_offset: q.offsets.map(|(_, b)| b),
        }
    }
}
