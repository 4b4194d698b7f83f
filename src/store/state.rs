//! The materialised `__mirror_state`: everything the records say, rebuilt by applying them in log
//! order.
//!
//! # Rules
//!
//! - **Last write wins** for Mirror, MirrorTopic, LastMirrorEpochs and Operation records.
//!   Instance records keep the newest heartbeat (by its time, not its offset: an instance writes
//!   them through two writers, so an older one can land last); a tombstone removes the entry.
//! - **State epochs fence writers** for MirrorPartitionState records: a record whose
//!   `state_epoch` is not greater than the stored one is rejected as
//!   [`ApplyError::StaleStateEpoch`] (a deposed writer loses), except that a record identical to
//!   the stored one is accepted without effect, so replaying a log, or a record twice, is harmless.
//! - **Offset runs accumulate** into the partition's [`OffsetMap`]; a batch already in the map is
//!   a replay and changes nothing; a batch with `new_lineage` (the first after a resync) replaces
//!   the map.
//! - **The committed position** of a partition is the position of the last applied record that
//!   carried one, MirrorPartitionState or OffsetRuns: both kinds of a partition share a state
//!   partition, so log order is write order.
//! - **Tombstones delete** the keyed entity (and nothing else: every entity has its own
//!   tombstone). A partition-state tombstone also forgets the partition's committed position; an
//!   OffsetRuns tombstone removes its batch: the mapping from the key's destination offset to the
//!   end of that stretch of consecutive destination offsets (a transaction's records, ended by its
//!   commit marker).
//! - **Operations are bounded**: the newest [`MAX_OPERATIONS`] (by first appearance) are kept.
//! - **Drills**: the last record of each drill wins; a tombstone removes it.
//!
//! [`MaterializedState::apply`] never panics; a record it rejects leaves the state unchanged.

use std::collections::{BTreeMap, HashMap, VecDeque};

use super::records::{
    DecodeError, DrillKey, DrillValue, InstanceValue, LastMirrorEpochsValue, MirrorTopicKey, MirrorTopicValue,
    MirrorValue, OffsetRunsKey, OffsetRunsValue, OperationKey, OperationValue, PartitionKey, PartitionStateValue,
    PositionValue, StateRecord, decode,
};
use crate::domain::offset_map::{OffsetMap, OffsetMapError, Run};

/// How many operations the state keeps by default.
pub const MAX_OPERATIONS: usize = 1_000;

/// Why a decoded record was not applied. The state is unchanged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ApplyError {
    /// A MirrorPartitionState record from a writer with a stale state epoch.
    #[error(
        "stale state for {}/{}/{}: state epoch {record_epoch} is not after the stored {stored_epoch}",
        key.mirror, key.topic_id, key.partition
    )]
    StaleStateEpoch {
        /// The partition.
        key: PartitionKey,
        /// The epoch already stored.
        stored_epoch: u64,
        /// The rejected record's epoch.
        record_epoch: u64,
    },
    /// Offset runs that do not extend the partition's offset map.
    #[error(
        "offset runs of {}/{}/{} at destination offset {}: {error}",
        key.mirror, key.topic_id, key.partition, key.first_destination_offset
    )]
    OffsetRuns {
        /// The batch.
        key: OffsetRunsKey,
        /// Why the map rejected it.
        error: OffsetMapError,
    },
}

/// Why a raw record was skipped while loading.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoadError {
    /// It could not be decoded.
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// It was decoded but not applied.
    #[error(transparent)]
    Apply(#[from] ApplyError),
}

/// A record skipped by [`MaterializedState::rebuild`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedRecord {
    /// Its index in the input sequence.
    pub index: usize,
    /// Why.
    pub error: LoadError,
}

/// The newest operations, in order of first appearance.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Operations {
    capacity: usize,
    by_key: HashMap<OperationKey, OperationValue>,
    order: VecDeque<OperationKey>,
}

impl Operations {
    fn new(capacity: usize) -> Self {
        Self { capacity, by_key: HashMap::new(), order: VecDeque::new() }
    }

    fn put(&mut self, key: OperationKey, value: OperationValue) {
        if let Some(stored) = self.by_key.get_mut(&key) {
            *stored = value;
            return;
        }
        self.order.push_back(key.clone());
        self.by_key.insert(key, value);
        while self.order.len() > self.capacity {
            if let Some(oldest) = self.order.pop_front() {
                self.by_key.remove(&oldest);
            }
        }
    }

    fn remove(&mut self, key: &OperationKey) {
        if self.by_key.remove(key).is_some() {
            self.order.retain(|k| k != key);
        }
    }
}

/// The whole `__mirror_state`, materialised.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MaterializedState {
    mirrors: BTreeMap<String, MirrorValue>,
    topics: BTreeMap<MirrorTopicKey, MirrorTopicValue>,
    partitions: BTreeMap<PartitionKey, PartitionStateValue>,
    positions: BTreeMap<PartitionKey, PositionValue>,
    last_mirror_epochs: BTreeMap<String, LastMirrorEpochsValue>,
    operations: Operations,
    offset_maps: BTreeMap<PartitionKey, OffsetMap>,
    instances: BTreeMap<String, InstanceValue>,
    drills: BTreeMap<DrillKey, DrillValue>,
}

impl Default for MaterializedState {
    fn default() -> Self {
        Self::new()
    }
}

impl MaterializedState {
    /// An empty state keeping [`MAX_OPERATIONS`] operations.
    #[must_use]
    pub fn new() -> Self {
        Self::with_operation_capacity(MAX_OPERATIONS)
    }

    /// An empty state keeping the newest `capacity` operations.
    #[must_use]
    pub fn with_operation_capacity(capacity: usize) -> Self {
        Self {
            mirrors: BTreeMap::new(),
            topics: BTreeMap::new(),
            partitions: BTreeMap::new(),
            positions: BTreeMap::new(),
            last_mirror_epochs: BTreeMap::new(),
            operations: Operations::new(capacity),
            offset_maps: BTreeMap::new(),
            instances: BTreeMap::new(),
            drills: BTreeMap::new(),
        }
    }

    /// Rebuilds the state from raw records in log order, skipping (and returning) those that
    /// cannot be decoded or applied.
    #[must_use]
    pub fn rebuild<'a>(
        records: impl IntoIterator<Item = (Option<&'a [u8]>, Option<&'a [u8]>)>,
    ) -> (Self, Vec<SkippedRecord>) {
        let mut state = Self::new();
        let mut skipped = Vec::new();
        for (index, (key, value)) in records.into_iter().enumerate() {
            if let Err(error) = state.apply_encoded(key, value) {
                skipped.push(SkippedRecord { index, error });
            }
        }
        (state, skipped)
    }

    /// Decodes and applies one raw record.
    ///
    /// # Errors
    ///
    /// [`LoadError`]; the state is unchanged.
    pub fn apply_encoded(&mut self, key: Option<&[u8]>, value: Option<&[u8]>) -> Result<(), LoadError> {
        let record = decode(key, value)?;
        self.apply(record)?;
        Ok(())
    }

    /// Applies one decoded record (module docs for the rules).
    ///
    /// # Errors
    ///
    /// [`ApplyError`]; the state is unchanged.
    pub fn apply(&mut self, record: StateRecord) -> Result<(), ApplyError> {
        match record {
            StateRecord::Mirror(entry) => match entry.value {
                Some(value) => {
                    self.mirrors.insert(entry.key.mirror, value);
                }
                None => {
                    self.mirrors.remove(&entry.key.mirror);
                }
            },
            StateRecord::MirrorTopic(entry) => match entry.value {
                Some(value) => {
                    self.topics.insert(entry.key, value);
                }
                None => {
                    self.topics.remove(&entry.key);
                }
            },
            StateRecord::PartitionState(entry) => match entry.value {
                Some(value) => self.put_partition_state(entry.key, value)?,
                None => {
                    self.partitions.remove(&entry.key);
                    self.positions.remove(&entry.key);
                }
            },
            StateRecord::LastMirrorEpochs(entry) => match entry.value {
                Some(value) => {
                    self.last_mirror_epochs.insert(entry.key.mirror, value);
                }
                None => {
                    self.last_mirror_epochs.remove(&entry.key.mirror);
                }
            },
            StateRecord::Operation(entry) => match entry.value {
                Some(value) => self.operations.put(entry.key, value),
                None => self.operations.remove(&entry.key),
            },
            StateRecord::OffsetRuns(entry) => match entry.value {
                Some(value) => self.put_offset_runs(entry.key, value)?,
                None => self.remove_offset_runs(&entry.key),
            },
            StateRecord::Instance(entry) => match entry.value {
                // An instance writes its heartbeat through two writers (the periodic one off the
                // coordinator's loop, the slot changes through the engine's), so an older one can
                // commit after a newer one: the newest heartbeat wins, not the last written.
                Some(value) => {
                    let held = self.instances.get(&entry.key.instance);
                    if held.is_none_or(|h| h.heartbeat_at <= value.heartbeat_at) {
                        self.instances.insert(entry.key.instance, value);
                    }
                }
                None => {
                    self.instances.remove(&entry.key.instance);
                }
            },
            StateRecord::Drill(entry) => match entry.value {
                Some(value) => {
                    self.drills.insert(entry.key, value);
                }
                None => {
                    self.drills.remove(&entry.key);
                }
            },
        }
        Ok(())
    }

    fn put_partition_state(&mut self, key: PartitionKey, value: PartitionStateValue) -> Result<(), ApplyError> {
        if let Some(stored) = self.partitions.get(&key) {
            if *stored == value {
                return Ok(()); // a replay
            }
            if value.state_epoch <= stored.state_epoch {
                return Err(ApplyError::StaleStateEpoch {
                    key,
                    stored_epoch: stored.state_epoch,
                    record_epoch: value.state_epoch,
                });
            }
        }
        if let Some(position) = value.position {
            self.positions.insert(key.clone(), position);
        }
        self.partitions.insert(key, value);
        Ok(())
    }

    fn put_offset_runs(&mut self, key: OffsetRunsKey, value: OffsetRunsValue) -> Result<(), ApplyError> {
        let partition = key.partition_key();
        let runs: Vec<Run> =
            value.runs.iter().map(|run| Run::new(run.source_start(), run.destination_start(), run.length())).collect();
        let map = self.offset_maps.entry(partition.clone()).or_default();
        // Ok(true) when the batch changed the map, Ok(false) for a replay.
        let result = if value.new_lineage {
            OffsetMap::from_runs(runs).map(|fresh| *map = fresh).map(|()| true)
        } else if runs.iter().all(|run| map.contains_run(run)) {
            Ok(false)
        } else {
            map.extend(runs).map(|()| true)
        };
        if map.is_empty() {
            self.offset_maps.remove(&partition);
        }
        let changed = result.map_err(|error| ApplyError::OffsetRuns { key, error })?;
        // A replayed batch is old news: its position must not move the committed one back.
        if changed && let Some(position) = value.position {
            self.positions.insert(partition, position);
        }
        Ok(())
    }

    fn remove_offset_runs(&mut self, key: &OffsetRunsKey) {
        let partition = key.partition_key();
        let Some(map) = self.offset_maps.get_mut(&partition) else {
            return;
        };
        if let Some(end) = map.destination_stretch_end(key.first_destination_offset) {
            map.remove_destination_range(key.first_destination_offset, end);
        }
        if map.is_empty() {
            self.offset_maps.remove(&partition);
        }
    }

    // --- Reads -----------------------------------------------------------------------------

    /// A mirror.
    #[must_use]
    pub fn mirror(&self, name: &str) -> Option<&MirrorValue> {
        self.mirrors.get(name)
    }

    /// Every mirror, by name.
    pub fn mirrors(&self) -> impl Iterator<Item = &MirrorValue> {
        self.mirrors.values()
    }

    /// A mirror topic.
    #[must_use]
    pub fn topic(&self, mirror: &str, topic: &str) -> Option<&MirrorTopicValue> {
        self.topics.get(&MirrorTopicKey { mirror: mirror.to_owned(), topic: topic.to_owned() })
    }

    /// Every topic of every mirror, by (mirror, topic).
    pub fn topics(&self) -> impl Iterator<Item = &MirrorTopicValue> {
        self.topics.values()
    }

    /// The topics of one mirror, by name.
    pub fn topics_of<'a>(&'a self, mirror: &'a str) -> impl Iterator<Item = &'a MirrorTopicValue> + 'a {
        self.topics.values().filter(move |topic| topic.mirror == mirror)
    }

    /// A partition's state record.
    #[must_use]
    pub fn partition(&self, key: &PartitionKey) -> Option<&PartitionStateValue> {
        self.partitions.get(key)
    }

    /// Every partition state, by key.
    pub fn partitions(&self) -> impl Iterator<Item = (&PartitionKey, &PartitionStateValue)> {
        self.partitions.iter()
    }

    /// A partition's committed position: from the last applied record that carried one.
    #[must_use]
    pub fn committed_position(&self, key: &PartitionKey) -> Option<PositionValue> {
        self.positions.get(key).copied()
    }

    /// A mirror's LastMirrorEpochs record.
    #[must_use]
    pub fn last_mirror_epochs(&self, mirror: &str) -> Option<&LastMirrorEpochsValue> {
        self.last_mirror_epochs.get(mirror)
    }

    /// An operation, if still kept.
    #[must_use]
    pub fn operation(&self, key: &OperationKey) -> Option<&OperationValue> {
        self.operations.by_key.get(key)
    }

    /// The kept operations, oldest first.
    pub fn operations(&self) -> impl DoubleEndedIterator<Item = &OperationValue> {
        self.operations.order.iter().filter_map(|key| self.operations.by_key.get(key))
    }

    /// A partition's offset map.
    #[must_use]
    pub fn offset_map(&self, key: &PartitionKey) -> Option<&OffsetMap> {
        self.offset_maps.get(key)
    }

    /// Every offset map, by partition.
    pub fn offset_maps(&self) -> impl Iterator<Item = (&PartitionKey, &OffsetMap)> {
        self.offset_maps.iter()
    }

    /// The latest heartbeat of an instance.
    #[must_use]
    pub fn instance(&self, id: &str) -> Option<&InstanceValue> {
        self.instances.get(id)
    }

    /// The latest heartbeat of every instance (not shut down by a tombstone), by instance ID. A
    /// heartbeat is kept however old it is: whether an instance is alive is the reader's call
    /// (compare `heartbeat_at` with the clock).
    pub fn instances(&self) -> impl Iterator<Item = &InstanceValue> {
        self.instances.values()
    }

    /// Every drill, by (mirror, ID).
    pub fn drills(&self) -> impl Iterator<Item = &DrillValue> {
        self.drills.values()
    }
}

#[cfg(test)]
mod tests {
    use std::num::NonZeroU32;

    use super::*;
    use crate::domain::offset_map::Translation;
    use crate::store::records::{
        DesiredStateValue, Entry, InstanceKey, LmePartitionValue, LmeTopicValue, MirrorKey, RunValue,
        SourceClusterValue, SyncSettingsValue, TruncationValue,
    };

    fn mirror(name: &str, updated_at: i64) -> StateRecord {
        StateRecord::Mirror(Entry::put(
            MirrorKey { mirror: name.to_owned() },
            MirrorValue {
                topic_include: Vec::new(),
                topic_exclude: None,
                name: name.to_owned(),
                source: SourceClusterValue { bootstrap_servers: "src:9092".to_owned(), properties: BTreeMap::new() },
                expected_source_cluster_id: Some("cluster-a".to_owned()),
                created_at: 1,
                updated_at,
                sync: SyncSettingsValue::default(),
                created_acls: Vec::new(),
                replication_throttle_bytes_per_sec: None,
                approval: None,
            },
        ))
    }

    fn topic(mirror: &str, name: &str, desired: DesiredStateValue) -> StateRecord {
        let value = MirrorTopicValue {
            mirror: mirror.to_owned(),
            topic: name.to_owned(),
            source_topic_id: format!("id-{name}"),
            destination_topic_id: None,
            desired_state: desired,
            truncation: TruncationValue::None,
            partition_count: 3,
            created_at: 1,
            updated_at: 1,
        };
        StateRecord::MirrorTopic(Entry::put(value.key(), value))
    }

    fn key(partition: i32) -> PartitionKey {
        PartitionKey::new("m", "id-orders", partition)
    }

    fn partition_state(partition: i32, state: &str, epoch: u64, next: i64) -> PartitionStateValue {
        PartitionStateValue {
            mirror: "m".to_owned(),
            topic: "orders".to_owned(),
            topic_id: "id-orders".to_owned(),
            partition,
            state: state.to_owned(),
            state_epoch: epoch,
            state_since: 10,
            updated_at: 10,
            previous_state: None,
            position: Some(PositionValue {
                next_source_offset: next,
                source_leader_epoch: 1,
                destination_end_offset: next,
            }),
            error: None,
            retry_count: 0,
            next_retry_at: None,
            stop: None,
            truncation: TruncationValue::None,
            written_by: None,
            command: None,
        }
    }

    fn state_record(value: PartitionStateValue) -> StateRecord {
        StateRecord::PartitionState(Entry::put(value.key(), value))
    }

    fn runs(partition: i32, new_lineage: bool, runs: &[(i64, i64, i64)], next: i64) -> StateRecord {
        let value = OffsetRunsValue {
            mirror: "m".to_owned(),
            topic_id: "id-orders".to_owned(),
            partition,
            new_lineage,
            runs: runs.iter().map(|&(s, d, len)| RunValue(s, d, len)).collect(),
            position: Some(PositionValue {
                next_source_offset: next,
                source_leader_epoch: 1,
                destination_end_offset: runs.last().map_or(0, |r| r.1 + r.2),
            }),
        };
        StateRecord::OffsetRuns(Entry::put(value.key().unwrap(), value))
    }

    fn operation(id: &str, finished_at: Option<i64>) -> StateRecord {
        let value = OperationValue {
            id: id.to_owned(),
            mirror: "m".to_owned(),
            kind: "pause".to_owned(),
            topics: vec!["orders".to_owned()],
            validate_only: false,
            requested_by: "alice".to_owned(),
            client_address: None,
            requested_at: 5,
            finished_at,
            results: Vec::new(),
            accepted_by: None,
            results_omitted: None,
            approval: None,
        };
        StateRecord::Operation(Entry::put(value.key(), value))
    }

    fn encoded(records: &[StateRecord]) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
        let n = NonZeroU32::new(16).unwrap();
        records
            .iter()
            .map(|record| {
                let e = record.encode(n);
                (e.key, e.value)
            })
            .collect()
    }

    fn rebuild(raw: &[(Vec<u8>, Option<Vec<u8>>)]) -> (MaterializedState, Vec<SkippedRecord>) {
        MaterializedState::rebuild(raw.iter().map(|(k, v)| (Some(k.as_slice()), v.as_deref())))
    }

    #[test]
    fn rebuild_applies_a_sequence_in_log_order() {
        let lme = LastMirrorEpochsValue {
            topics: vec![LmeTopicValue {
                name: "orders".to_owned(),
                partitions: vec![LmePartitionValue { partition_index: 0, last_mirrored_epoch: 4 }],
            }],
        };
        let raw = encoded(&[
            mirror("m", 1),
            topic("m", "orders", DesiredStateValue::Mirroring),
            topic("m", "audit", DesiredStateValue::Mirroring),
            state_record(partition_state(0, "PREPARING", 1, 0)),
            state_record(partition_state(0, "MIRRORING", 2, 0)),
            runs(0, false, &[(0, 0, 10)], 10),
            runs(0, false, &[(10, 11, 5), (17, 16, 3)], 20),
            mirror("m", 2),
            topic("m", "orders", DesiredStateValue::Stopped),
            StateRecord::LastMirrorEpochs(Entry::put(MirrorKey { mirror: "m".to_owned() }, lme.clone())),
            operation("op-1", None),
            operation("op-1", Some(9)),
        ]);
        let (state, skipped) = rebuild(&raw);
        assert_eq!(skipped, vec![]);
        assert_eq!(state.mirror("m").unwrap().updated_at, 2);
        assert_eq!(state.mirrors().count(), 1);
        assert_eq!(state.topic("m", "orders").unwrap().desired_state, DesiredStateValue::Stopped);
        assert_eq!(state.topics_of("m").map(|t| t.topic.as_str()).collect::<Vec<_>>(), ["audit", "orders"]);
        assert_eq!(state.partition(&key(0)).unwrap().state, "MIRRORING");
        assert_eq!(state.committed_position(&key(0)).unwrap().next_source_offset, 20);
        assert_eq!(state.last_mirror_epochs("m"), Some(&lme));
        assert_eq!(state.operations().count(), 1);
        assert_eq!(
            state.operation(&OperationKey { mirror: "m".to_owned(), id: "op-1".to_owned() }).unwrap().finished_at,
            Some(9)
        );

        // Replaying the whole log on top changes nothing: the superseded partition states are
        // refused as stale, everything else converges to the same values.
        let mut again = state.clone();
        for (k, v) in &raw {
            if let Err(error) = again.apply_encoded(Some(k), v.as_deref()) {
                assert!(matches!(error, LoadError::Apply(ApplyError::StaleStateEpoch { record_epoch: 1, .. })));
            }
        }
        assert_eq!(again, state);
    }

    #[test]
    fn a_stale_state_epoch_is_rejected_and_a_replay_is_harmless() {
        let mut state = MaterializedState::new();
        state.apply(state_record(partition_state(0, "MIRRORING", 5, 100))).unwrap();
        // The same record again: accepted, no change.
        state.apply(state_record(partition_state(0, "MIRRORING", 5, 100))).unwrap();
        // A different record with the same or an older epoch: a deposed writer.
        let stale = state.apply(state_record(partition_state(0, "PAUSED", 5, 100)));
        assert_eq!(stale, Err(ApplyError::StaleStateEpoch { key: key(0), stored_epoch: 5, record_epoch: 5 }));
        assert_eq!(
            stale.unwrap_err().to_string(),
            "stale state for m/id-orders/0: state epoch 5 is not after the stored 5"
        );
        assert!(state.apply(state_record(partition_state(0, "STOPPING", 3, 100))).is_err());
        assert_eq!(state.partition(&key(0)).unwrap().state, "MIRRORING");
        // The next epoch wins.
        state.apply(state_record(partition_state(0, "PAUSING", 6, 100))).unwrap();
        assert_eq!(state.partition(&key(0)).unwrap().state, "PAUSING");
    }

    #[test]
    fn tombstones_delete_the_keyed_entity() {
        let mut state = MaterializedState::new();
        for record in [
            mirror("m", 1),
            topic("m", "orders", DesiredStateValue::Mirroring),
            state_record(partition_state(0, "MIRRORING", 7, 10)),
            operation("op-1", None),
            runs(0, false, &[(0, 0, 5)], 5),
            runs(0, false, &[(5, 6, 5)], 10),
        ] {
            state.apply(record).unwrap();
        }
        state.apply(StateRecord::Mirror(Entry::tombstone(MirrorKey { mirror: "m".to_owned() }))).unwrap();
        state
            .apply(StateRecord::MirrorTopic(Entry::tombstone(MirrorTopicKey {
                mirror: "m".to_owned(),
                topic: "orders".to_owned(),
            })))
            .unwrap();
        state.apply(StateRecord::PartitionState(Entry::tombstone(key(0)))).unwrap();
        state
            .apply(StateRecord::Operation(Entry::tombstone(OperationKey {
                mirror: "m".to_owned(),
                id: "op-1".to_owned(),
            })))
            .unwrap();
        assert!(state.mirror("m").is_none());
        assert!(state.topic("m", "orders").is_none());
        assert!(state.partition(&key(0)).is_none());
        assert!(state.committed_position(&key(0)).is_none());
        assert_eq!(state.operations().count(), 0);

        // After a tombstone the partition starts over: epoch 1 is accepted again.
        state.apply(state_record(partition_state(0, "PREPARING", 1, 0))).unwrap();

        // An OffsetRuns tombstone removes exactly its batch.
        let batch = OffsetRunsKey {
            mirror: "m".to_owned(),
            topic_id: "id-orders".to_owned(),
            partition: 0,
            first_destination_offset: 0,
        };
        state.apply(StateRecord::OffsetRuns(Entry::tombstone(batch.clone()))).unwrap();
        let map = state.offset_map(&key(0)).unwrap();
        assert_eq!(map.runs(), [Run::new(5, 6, 5)]);
        assert_eq!(map.translate(0), Some(Translation::BeforeFirst(6)));
        // Removing the last batch drops the map; tombstones of unknown batches are harmless.
        state
            .apply(StateRecord::OffsetRuns(Entry::tombstone(OffsetRunsKey {
                first_destination_offset: 6,
                ..batch.clone()
            })))
            .unwrap();
        state.apply(StateRecord::OffsetRuns(Entry::tombstone(batch))).unwrap();
        assert!(state.offset_map(&key(0)).is_none());
    }

    #[test]
    fn unknown_versions_and_garbage_are_skipped_with_an_error() {
        let mut raw = encoded(&[mirror("m", 1), topic("m", "orders", DesiredStateValue::Mirroring)]);
        // A newer kmirror wrote a version-1 value, then a record of a type we do not know.
        raw.insert(
            1,
            (
                br#"{"type":"Mirror","version":0,"mirror":"m"}"#.to_vec(),
                Some(br#"{"type":"Mirror","version":1,"name":"m","shiny":true}"#.to_vec()),
            ),
        );
        raw.push((br#"{"type":"MirrorGroup","version":0}"#.to_vec(), Some(b"{}".to_vec())));
        raw.push((b"\xff\x00not json".to_vec(), None));
        let (state, skipped) = rebuild(&raw);
        assert_eq!(skipped.iter().map(|s| s.index).collect::<Vec<_>>(), [1, 3, 4]);
        assert!(matches!(skipped[0].error, LoadError::Decode(DecodeError::UnknownVersion { version: 1, .. })));
        assert_eq!(
            skipped[0].error.to_string(),
            "Mirror value version 1 is not supported (this kmirror reads up to version 0; written by a newer kmirror)"
        );
        assert!(matches!(skipped[1].error, LoadError::Decode(DecodeError::UnknownType { .. })));
        assert!(matches!(skipped[2].error, LoadError::Decode(DecodeError::Malformed { .. })));
        // Everything else was applied.
        assert_eq!(state.mirror("m").unwrap().updated_at, 1);
        assert!(state.topic("m", "orders").is_some());
    }

    #[test]
    fn offset_runs_accumulate_into_their_partitions_map() {
        let mut state = MaterializedState::new();
        state.apply(runs(0, false, &[(0, 0, 10)], 10)).unwrap();
        state.apply(runs(1, false, &[(0, 0, 3)], 3)).unwrap();
        state.apply(runs(0, false, &[(10, 11, 5), (17, 16, 3)], 20)).unwrap();
        state.apply(runs(1, false, &[(3, 4, 2)], 5)).unwrap();

        let p0 = state.offset_map(&key(0)).unwrap();
        assert_eq!(p0.runs(), [Run::new(0, 0, 10), Run::new(10, 11, 5), Run::new(17, 16, 3)]);
        assert_eq!(p0.translate(15), Some(Translation::NextMirrored(16)));
        let p1 = state.offset_map(&key(1)).unwrap();
        assert_eq!(p1.runs(), [Run::new(0, 0, 3), Run::new(3, 4, 2)]);
        assert_eq!(state.committed_position(&key(1)).unwrap().next_source_offset, 5);
        assert_eq!(state.offset_maps().count(), 2);

        // A replayed batch changes nothing; an overlapping, different one is rejected.
        state.apply(runs(0, false, &[(10, 11, 5), (17, 16, 3)], 20)).unwrap();
        let overlapping = state.apply(runs(0, false, &[(12, 12, 1)], 13));
        assert!(matches!(overlapping, Err(ApplyError::OffsetRuns { .. })));
        assert_eq!(state.offset_map(&key(0)).unwrap().runs().len(), 3);
        assert_eq!(state.committed_position(&key(0)).unwrap().next_source_offset, 20);

        // A resync starts a new lineage: the source starts over, the destination moves on.
        state.apply(runs(0, true, &[(0, 30, 4)], 4)).unwrap();
        assert_eq!(state.offset_map(&key(0)).unwrap().runs(), [Run::new(0, 30, 4)]);
        assert_eq!(state.committed_position(&key(0)).unwrap().next_source_offset, 4);
    }

    #[test]
    fn the_last_record_carrying_a_position_wins() {
        let mut state = MaterializedState::new();
        state.apply(state_record(partition_state(0, "MIRRORING", 2, 0))).unwrap();
        state.apply(runs(0, false, &[(0, 0, 10)], 10)).unwrap();
        assert_eq!(state.committed_position(&key(0)).unwrap().next_source_offset, 10);
        let mut pausing = partition_state(0, "PAUSING", 3, 10);
        pausing.position = None;
        state.apply(state_record(pausing)).unwrap();
        assert_eq!(state.committed_position(&key(0)).unwrap().next_source_offset, 10);
        state.apply(state_record(partition_state(0, "PAUSED", 4, 12))).unwrap();
        assert_eq!(state.committed_position(&key(0)).unwrap().next_source_offset, 12);
    }

    fn heartbeat(id: &str, slots: &[i32], heartbeat_at: i64) -> StateRecord {
        let value = InstanceValue {
            instance: id.to_owned(),
            cluster_name: "c".to_owned(),
            advertised_url: None,
            version: "0.1.0".to_owned(),
            slots: slots.to_vec(),
            partitions: 3,
            heartbeat_at,
            started_at: 1,
        };
        StateRecord::Instance(Entry::put(value.key(), value))
    }

    #[test]
    fn the_latest_heartbeat_per_instance_is_kept_and_a_tombstone_removes_it() {
        let raw = encoded(&[
            heartbeat("b", &[1], 10),
            heartbeat("a", &[0, 2], 10),
            heartbeat("b", &[1, 3], 20),
            mirror("m", 1),
        ]);
        let (mut state, skipped) = rebuild(&raw);
        assert_eq!(skipped, vec![]);
        let ids: Vec<&str> = state.instances().map(|i| i.instance.as_str()).collect();
        assert_eq!(ids, ["a", "b"]);
        let b = state.instance("b").unwrap();
        assert_eq!((b.slots.as_slice(), b.heartbeat_at), ([1, 3].as_slice(), 20));
        assert!(state.mirror("m").is_some());
        // A heartbeat taken before the one held but committed after it (an instance's two
        // writers) does not bring back what it said.
        state.apply(heartbeat("b", &[1], 15)).unwrap();
        assert_eq!(state.instance("b").unwrap().slots, [1, 3]);

        state.apply(StateRecord::Instance(Entry::tombstone(InstanceKey { instance: "b".to_owned() }))).unwrap();
        assert!(state.instance("b").is_none());
        assert_eq!(state.instances().count(), 1);
        // A tombstone of an unknown instance is harmless; a later heartbeat brings it back.
        state.apply(StateRecord::Instance(Entry::tombstone(InstanceKey { instance: "x".to_owned() }))).unwrap();
        state.apply(heartbeat("b", &[1], 30)).unwrap();
        assert_eq!(state.instance("b").unwrap().heartbeat_at, 30);
        assert_eq!(state.instances().count(), 2);
    }

    #[test]
    fn operations_are_bounded_oldest_first() {
        let mut state = MaterializedState::with_operation_capacity(3);
        for i in 0..5 {
            state.apply(operation(&format!("op-{i}"), None)).unwrap();
        }
        // Updating a kept operation keeps its place.
        state.apply(operation("op-2", Some(1))).unwrap();
        let ids: Vec<&str> = state.operations().map(|op| op.id.as_str()).collect();
        assert_eq!(ids, ["op-2", "op-3", "op-4"]);
        assert_eq!(state.operations().next_back().unwrap().id, "op-4");
        assert!(state.operation(&OperationKey { mirror: "m".to_owned(), id: "op-0".to_owned() }).is_none());
    }
}
