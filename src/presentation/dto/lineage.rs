//! A topic's lineage on the mirror's source cluster.

use serde::Serialize;
use utoipa::ToSchema;

use super::shared::PartitionStateDto;

/// `GET /api/v1/mirrors/{mirror}/topics/{topic}/lineage`: what the mirror's source cluster says
/// about the topic's way back.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct LineageResponse {
    pub mirror: String,
    pub topic: String,
    /// Absent when no mirror on the source cluster has the topic (a start is an ordinary one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lineage: Option<Lineage>,
}

/// The mirror on the source cluster that copied the topic from this cluster, per partition.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Lineage {
    /// The mirror's name in the source cluster's state.
    pub source_mirror: String,
    /// True when a start of the topic here would adopt it (an incremental failback).
    pub usable: bool,
    /// Why it would not: the refusal a start would answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
    pub partitions: Vec<LineagePartitionDto>,
}

/// One partition of a lineage.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct LineagePartitionDto {
    pub partition: i32,
    /// Its state in the source cluster's mirror (STOPPED once failed over).
    pub state: PartitionStateDto,
    /// The offset here of the last record that mirror copied.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_mirrored_offset: Option<i64>,
    /// The offset on the source cluster where that mirror's writes end (its destination stop
    /// offset): a failback copies from there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_stop_offset: Option<i64>,
    /// The last mirrored leader epoch (LME) recorded at the stop.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_mirror_epoch: Option<i32>,
    /// Runs of that mirror's offset map (about one per transaction).
    pub offset_map_runs: usize,
}

impl From<&crate::engine::TopicLineage> for Lineage {
    fn from(l: &crate::engine::TopicLineage) -> Self {
        Lineage {
            source_mirror: l.source_mirror.clone(),
            usable: l.problem.is_none(),
            problem: l.problem.clone(),
            partitions: l
                .partitions
                .iter()
                .map(|p| LineagePartitionDto {
                    partition: p.partition,
                    state: p.state.into(),
                    last_mirrored_offset: p.last_mirrored_offset,
                    source_stop_offset: p.source_stop_offset,
                    last_mirror_epoch: p.last_mirror_epoch,
                    offset_map_runs: p.offset_map_runs,
                })
                .collect(),
        }
    }
}
