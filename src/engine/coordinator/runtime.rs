//! The coordinator's runtime view of the mirrors: per partition, topic, data path and mirror
//! what the loop keeps besides the stored records, and the messages its own tasks send it back.

use super::*;

/// Latest offsets of a partition, refreshed for the snapshot.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Offsets {
    pub(super) source_start: Option<i64>,
    pub(super) source_lso: Option<i64>,
    pub(super) source_hwm: Option<i64>,
    pub(super) destination_hwm: Option<i64>,
    pub(super) destination_start: Option<i64>,
    /// A STOPPED partition's watch on its old source; read with the lag, `None` until then.
    pub(super) source_after_stop: Option<AfterStop>,
}

/// What the lag refresh read of a STOPPED partition's old source (the split-brain watch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct AfterStop {
    /// The failover it is about: the STOPPED state's `state_since`.
    pub(super) since: Timestamp,
    /// The source's first offset whose record time is at or after `since` (`None`: no such
    /// record): writes since the failover, however long ago, also across restarts.
    pub(super) first_by_time: Option<i64>,
    /// The source's last stable offset at this instance's first read after the failover: every
    /// record after it came later, whatever time its producer gave it.
    pub(super) end_first_seen: i64,
}

#[derive(Debug, Clone)]
pub(super) struct PartRt {
    pub(super) record: PartitionRecord,
    pub(super) offsets: Offsets,
    pub(super) records_mirrored: u64,
    pub(super) bytes_mirrored: u64,
    /// When the partition was last seen with no lag (for lag in seconds).
    pub(super) caught_up_at: Option<Timestamp>,
    /// The source consumer's position when it moved past the committed position over records
    /// with nothing to mirror (transaction markers at the log end).
    pub(super) fetch_position: Option<i64>,
    /// The partition's slot (`slots`), computed once: the hash is asked for on every snapshot.
    pub(super) slot: i32,
    /// Last time the partition had something to copy: a commit of its records, a lag refresh
    /// that found it behind, a hand-over to a data path (`idle`).
    pub(super) active_at: tokio::time::Instant,
    /// A MIRRORING partition that no data path holds because its slot's data path was closed
    /// while idle (`idle`); the lag refresh hands it to a new one when its source has records.
    pub(super) idle: bool,
}

impl PartRt {
    pub(super) fn new(record: PartitionRecord, slot: i32) -> PartRt {
        PartRt {
            slot,
            record,
            offsets: Offsets::default(),
            records_mirrored: 0,
            bytes_mirrored: 0,
            caught_up_at: None,
            fetch_position: None,
            active_at: tokio::time::Instant::now(),
            idle: false,
        }
    }
}

#[derive(Debug, Clone)]
pub(super) struct TopicRt {
    pub(super) source_topic_id: String,
    pub(super) destination_topic_id: String,
    pub(super) created_at: Timestamp,
    /// Consecutive metadata refreshes that did not find the source topic.
    pub(super) missing_refreshes: u32,
    pub(super) partitions: BTreeMap<i32, PartRt>,
}

pub(super) struct PipeRt {
    pub(super) tx: std::sync::mpsc::Sender<PipeCommand>,
    pub(super) join: Option<std::thread::JoinHandle<()>>,
}

impl PipeRt {
    /// Asks the data path to end (its open transaction is aborted; committed state is final) and
    /// waits up to 30 s for it, then for its thread when `join` is set.
    pub(super) async fn shut_down(self, join: bool) {
        let (reply, rx) = tokio::sync::oneshot::channel();
        if self.tx.send(PipeCommand::Shutdown { reply }).is_ok() {
            let _ = tokio::time::timeout(Duration::from_secs(30), rx).await;
        }
        if join && let Some(j) = self.join {
            let _ = tokio::task::spawn_blocking(move || j.join()).await;
        }
    }
}

pub(super) struct MirrorRt {
    pub(super) stored: StoredMirror,
    pub(super) source_admin: Admin,
    /// The data path of each slot holding partitions of this mirror (`slots`).
    pub(super) pipes: BTreeMap<i32, PipeRt>,
    pub(super) data_path: DataPathStatus,
    pub(super) fenced: bool,
    pub(super) observed_cluster_id: Option<String>,
    pub(super) cluster_id_status: ClusterIdStatus,
    pub(super) cluster_id_checked_at: Option<Timestamp>,
    pub(super) cluster_id_error: Option<String>,
    pub(super) topics: BTreeMap<String, TopicRt>,
    /// Topic name -> source topic ID, shared with the data path's position encoder.
    pub(super) topic_ids: Arc<RwLock<HashMap<String, String>>>,
    /// Partitions whose next committed batch starts a new lineage (resync).
    pub(super) new_lineage: Arc<RwLock<HashSet<(String, i32)>>>,
    /// Metadata sync health per kind.
    pub(super) sync: Vec<SyncStatus>,
    /// Config values the topic-config sync applied, per (topic, config): tells drift from change.
    pub(super) applied_configs: HashMap<(String, String), String>,
    /// Per-group offset sync outcome.
    pub(super) group_views: Vec<GroupSyncView>,
    /// The mirror's LastMirrorEpochs record (all topics), rewritten whole on every stop.
    pub(super) last_mirror_epochs: crate::store::LastMirrorEpochsValue,
    pub(super) metadata_in_flight: bool,
    /// A refresh was asked for while one was running: run another when it ends, so the caller
    /// sees a refresh that started after its request.
    pub(super) metadata_again: bool,
    pub(super) lag_in_flight: bool,
    /// The next lag refresh is due then (see [`lag_refresh_every`]).
    pub(super) lag_due: tokio::time::Instant,
    /// An offset-map prune (destination log starts) is being read.
    pub(super) prune_in_flight: bool,
    /// A slot's data path that died while the destination was unavailable restarts at this time.
    pub(super) restart_pipe_at: BTreeMap<i32, (tokio::time::Instant, String)>,
    /// Consecutive data-path restarts that found the destination unavailable.
    pub(super) pipe_restarts: u32,
    /// Failed-over topics that a mirror on the old source copies back (a failback), by the last
    /// read of that cluster's state: topic -> that mirror. Explains writes there after the
    /// failover (`spawn_failback_watch`).
    pub(super) failbacks: BTreeMap<String, String>,
    /// The mirror's replication throttle on this instance, shared with its slot data paths
    /// (changed live when the definition changes).
    pub(super) throttle: Arc<crate::domain::throttle::Throttle>,
    pub(super) failback_watch_in_flight: bool,
    /// A secret of the mirror's definition that this instance cannot decrypt (sealed under a key
    /// it does not have): its data path is not started, and reports this.
    pub(super) secret_error: Option<String>,
    /// Why the mirror's source client could not be created (a property the client library
    /// refuses, a certificate file that is gone): `source_admin` is then an `UnusableAdmin` that
    /// fails every call with it, and creating the client is tried again on each metadata refresh
    /// (`retry_source_client`).
    pub(super) source_client_error: Option<String>,
    /// The topic policy carried out (`discovery`).
    pub(super) discovery: discovery::DiscoveryRt,
}

impl MirrorRt {
    /// Whether the mirror copies nothing until an operator acts: fenced, its source now another
    /// cluster, or a secret of its definition this instance cannot open.
    pub(super) fn halted(&self) -> bool {
        self.fenced || self.cluster_id_status == ClusterIdStatus::Mismatch || self.secret_error.is_some()
    }

    /// Failed-over topics whose old source received records after the failover.
    pub(super) fn topics_written_after_stop(&self) -> Vec<String> {
        self.topics
            .iter()
            .filter(|(_, t)| t.partitions.values().any(|rt| source_writes_after_stop(rt).is_some_and(|n| n > 0)))
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// Every STOPPED partition of the mirror with the time it stopped (the failover).
    pub(super) fn stopped_since(&self) -> Vec<((String, i32), Timestamp)> {
        self.topics
            .iter()
            .flat_map(|(t, rt)| {
                rt.partitions
                    .iter()
                    .filter(|(_, p)| p.record.state == PartitionState::Stopped)
                    .map(move |(p, rt)| ((t.clone(), *p), rt.record.state_since))
            })
            .collect()
    }

    /// Every partition of the mirror in `state`, as (topic, partition).
    pub(super) fn partitions_in(&self, state: PartitionState) -> Vec<(String, i32)> {
        self.topics
            .iter()
            .flat_map(|(t, rt)| {
                rt.partitions.iter().filter(|(_, p)| p.record.state == state).map(move |(p, _)| (t.clone(), *p))
            })
            .collect()
    }
}

/// Messages from spawned helpers back to the coordinator.
pub(super) enum Internal {
    /// An event of `mirror`'s data path for a slot.
    Pipe(String, i32, PipeEvent),
    Lag {
        mirror: String,
        offsets: Vec<((String, i32), Offsets)>,
        error: Option<String>,
    },
    Metadata {
        mirror: String,
        report: Box<metadata::RefreshReport>,
    },
    LogStarts {
        mirror: String,
        starts: Vec<((String, i32), i64)>,
    },
    /// A create's source check or a start's source reads, done off the coordinator task.
    OffLoop(Box<off_loop::Done>),
    /// A promote's read of the source's last stable offsets, done off the coordinator task.
    PromoteRead {
        job: Box<promote::PromoteJob>,
        read: promote::StableOffsets,
    },
    /// What the state tail read (group ownership).
    Tail(state_log::TailBatch),
    /// A change of this instance's slots (group ownership).
    Membership(crate::kafka::membership::MembershipEvent),
    /// The periodic heartbeat's write ended (`group::Heartbeat`).
    HeartbeatWritten(Result<(), crate::kafka::state_log::StateWriteError>),
    /// A batch of a discovery run was started (or refused).
    Discovered {
        mirror: String,
        result: Result<OpResult, EngineError>,
    },
    /// Whether a cluster FAILED partitions wait on answered (`cluster_watch`).
    ClusterProbed {
        key: cluster_watch::ClusterKey,
        answered: bool,
    },
    /// The failback watch read the old source's state: topic -> the mirror there copying it
    /// back; `Err` when the state could not be read.
    FailbackWatch {
        mirror: String,
        found: Result<BTreeMap<String, String>, KafkaError>,
    },
}

impl Internal {
    /// What the coordinator's loop logs when handling this took long (`log_slow_step`).
    pub(super) fn name(&self) -> &'static str {
        match self {
            Internal::Pipe(_, _, PipeEvent::Committed(_)) => "data path commit",
            Internal::Pipe(..) => "data path event",
            Internal::Lag { .. } => "lag results",
            Internal::Metadata { .. } => "metadata results",
            Internal::LogStarts { .. } => "log start results",
            Internal::OffLoop(_) => "off-loop result",
            Internal::PromoteRead { .. } => "promote read",
            Internal::Tail(_) => "state tail",
            Internal::Membership(_) => "membership change",
            Internal::HeartbeatWritten(_) => "heartbeat written",
            Internal::ClusterProbed { .. } => "cluster probe",
            Internal::FailbackWatch { .. } => "failback watch",
            Internal::Discovered { .. } => "discovery batch",
        }
    }
}
