//! An in-memory pair of clusters behind the data path's two ports, for the unit tests of its
//! transaction edges (`edges`): a source whose logs hold records at given offsets (gaps are
//! control records or aborted data a `read_committed` reader skips), and a destination that
//! keeps transactional state per record, writes commit and abort markers, and fences a writer
//! whose producer epoch is no longer the newest for its transactional id, as a Kafka
//! transaction coordinator does.
//!
//! Faults are injected up front ([`Fault`]) and each is used by the first call it applies to.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use super::*;

/// A record of the fake source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Record {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub timestamp: Option<i64>,
    pub epoch: Option<i32>,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
}

impl SourceRecord for Record {
    fn topic(&self) -> &str {
        &self.topic
    }
    fn partition(&self) -> i32 {
        self.partition
    }
    fn offset(&self) -> i64 {
        self.offset
    }
    fn key(&self) -> Option<&[u8]> {
        self.key.as_deref()
    }
    fn value(&self) -> Option<&[u8]> {
        self.value.as_deref()
    }
    fn timestamp(&self) -> Option<i64> {
        self.timestamp
    }
    fn leader_epoch(&self) -> Option<i32> {
        self.epoch
    }
    fn codec(&self) -> Option<i32> {
        Some(0)
    }
    fn headers(&self, each: &mut dyn FnMut(&str, Option<&[u8]>)) {
        for (k, v) in &self.headers {
            each(k, v.as_deref());
        }
    }
}

#[derive(Debug, Default)]
struct SourceLog {
    /// The log start offset (records below were deleted).
    start: i64,
    /// The log end offset (the high watermark): after the last record, and after any control
    /// records or aborted data behind it.
    end: i64,
    records: Vec<Record>,
}

/// Where a destination record stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum State {
    /// In an open transaction of (transactional id index, producer epoch).
    Open(usize, u32),
    Committed,
    Aborted,
    /// A commit or abort marker (never read).
    Marker,
}

#[derive(Debug, Clone)]
pub(super) struct Entry {
    pub offset: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
    pub state: State,
}

/// A fault the next matching call meets.
#[derive(Debug, Clone)]
pub(super) enum Fault {
    Begin(TxnErrorKind),
    /// The next data record's delivery fails (`timed_out`: its request timed out).
    Delivery {
        timed_out: bool,
    },
    /// The next data record is refused at once.
    Send(SendError),
    Flush(TxnErrorKind),
    /// The next commit fails with this kind; with `applied` the coordinator commits it anyway
    /// (a commit whose answer was lost: in doubt).
    Commit {
        kind: TxnErrorKind,
        applied: bool,
    },
    Abort(TxnErrorKind),
    /// The next replacement producer's init fails.
    Replace(TxnErrorKind),
    /// The next read for another writer's commits (`first_committed_from`) gets no answer.
    ReadCommitted,
}

#[derive(Debug, Default)]
struct World {
    source: HashMap<Key, SourceLog>,
    destination: HashMap<Key, Vec<Entry>>,
    /// Per transactional id (by index): its newest producer epoch.
    epochs: Vec<(String, u32)>,
    faults: VecDeque<Fault>,
    /// Whether commits and aborts write markers (real Kafka does; librdkafka's mock cluster not).
    no_markers: bool,
}

impl World {
    fn txn_index(&mut self, id: &str) -> usize {
        match self.epochs.iter().position(|(i, _)| i == id) {
            Some(i) => i,
            None => {
                self.epochs.push((id.to_string(), 0));
                self.epochs.len() - 1
            }
        }
    }

    fn fault(&mut self, pick: impl Fn(&Fault) -> bool) -> Option<Fault> {
        let i = self.faults.iter().position(pick)?;
        self.faults.remove(i)
    }

    fn append(&mut self, key: Key, mut entry: Entry) -> i64 {
        let log = self.destination.entry(key).or_default();
        entry.offset = log.last().map_or(0, |e| e.offset + 1);
        let offset = entry.offset;
        log.push(entry);
        offset
    }

    /// Ends every open record of a transactional id as `to`, with a marker per partition.
    fn end_transaction(&mut self, txn: usize, to: State) {
        let mut touched = Vec::new();
        for (key, log) in &mut self.destination {
            let mut any = false;
            for e in log.iter_mut().filter(|e| matches!(e.state, State::Open(t, _) if t == txn)) {
                e.state = to;
                any = true;
            }
            if any {
                touched.push(key.clone());
            }
        }
        if !self.no_markers {
            for key in touched {
                self.append(
                    key,
                    Entry { offset: 0, key: None, value: None, headers: Vec::new(), state: State::Marker },
                );
            }
        }
    }
}

/// The two clusters, shared by a test and the data paths it runs.
#[derive(Clone, Default)]
pub(super) struct FakeKafka(Arc<Mutex<World>>);

impl FakeKafka {
    fn world(&self) -> MutexGuard<'_, World> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Appends `count` records to a source partition (values `v<offset>`), with `gap` offsets
    /// between them that hold nothing a `read_committed` reader sees.
    pub fn produce(&self, topic: &str, partition: i32, count: usize, gap: i64) {
        let mut w = self.world();
        let log = w.source.entry((topic.to_string(), partition)).or_default();
        for _ in 0..count {
            let offset = log.end;
            log.records.push(Record {
                topic: topic.to_string(),
                partition,
                offset,
                key: Some(format!("k{offset}").into_bytes()),
                value: Some(format!("v{offset}").into_bytes()),
                timestamp: Some(1_700_000_000_000 + offset),
                epoch: Some(3),
                headers: vec![("h".to_string(), Some(offset.to_string().into_bytes()))],
            });
            log.end = offset + 1 + gap;
        }
    }

    /// Deletes a source partition's records below `start` (retention, or an unclean election).
    pub fn delete_below(&self, topic: &str, partition: i32, start: i64) {
        let mut w = self.world();
        let log = w.source.entry((topic.to_string(), partition)).or_default();
        log.records.retain(|r| r.offset >= start);
        log.start = start;
        log.end = log.end.max(start);
    }

    /// The source partition's records.
    pub fn source(&self, topic: &str, partition: i32) -> Vec<Record> {
        self.world().source.get(&(topic.to_string(), partition)).map(|l| l.records.clone()).unwrap_or_default()
    }

    /// The destination partition's log, markers included.
    pub fn destination(&self, topic: &str, partition: i32) -> Vec<Entry> {
        self.world().destination.get(&(topic.to_string(), partition)).cloned().unwrap_or_default()
    }

    /// What a `read_committed` reader of the destination partition sees.
    pub fn visible(&self, topic: &str, partition: i32) -> Vec<Entry> {
        self.destination(topic, partition).into_iter().filter(|e| e.state == State::Committed).collect()
    }

    /// Records of open transactions anywhere on the destination.
    pub fn open_records(&self) -> usize {
        self.world().destination.values().flatten().filter(|e| matches!(e.state, State::Open(..))).count()
    }

    /// Somebody else writes a record to a destination partition (committed at once).
    pub fn foreign_write(&self, topic: &str, partition: i32) {
        let entry = Entry {
            offset: 0,
            key: None,
            value: Some(b"foreign".to_vec()),
            headers: Vec::new(),
            state: State::Committed,
        };
        self.world().append((topic.to_string(), partition), entry);
    }

    /// Another writer initialises the same transactional id: the epoch is bumped and what the
    /// old one left open is aborted.
    pub fn fence(&self, transactional_id: &str) {
        let mut w = self.world();
        let t = w.txn_index(transactional_id);
        w.epochs[t].1 += 1;
        w.end_transaction(t, State::Aborted);
    }

    pub fn inject(&self, fault: Fault) {
        self.world().faults.push_back(fault);
    }

    /// Faults not met yet.
    pub fn faults_left(&self) -> usize {
        self.world().faults.len()
    }

    pub fn without_markers(&self) {
        self.world().no_markers = true;
    }

    /// A writer with this transactional id, initialised (its init fences earlier ones).
    pub fn writer(&self, transactional_id: &str) -> FakeWriter {
        self.fence(transactional_id);
        let (txn, epoch) = {
            let mut w = self.world();
            let t = w.txn_index(transactional_id);
            (t, w.epochs[t].1)
        };
        FakeWriter {
            kafka: self.clone(),
            txn,
            epoch,
            fenced: false,
            deliveries: Vec::new(),
            reported: 0,
            timed_out: false,
            replaced: 0,
        }
    }

    pub fn reader(&self) -> FakeSource {
        FakeSource {
            kafka: self.clone(),
            positions: RefCell::new(BTreeMap::new()),
            failed_assign: None,
            delay_per_record: None,
        }
    }
}

/// The fake source reader: round-robin over its assigned partitions, one record per poll.
pub(super) struct FakeSource {
    kafka: FakeKafka,
    positions: RefCell<BTreeMap<Key, i64>>,
    /// Assignments of this topic are refused.
    pub failed_assign: Option<String>,
    /// A slow source: each record takes this long to read.
    pub delay_per_record: Option<Duration>,
}

impl SourceFetcher for FakeSource {
    type Record<'a> = Record;

    fn poll(&self, wait: Duration) -> Option<Result<Record, FetchError>> {
        {
            let w = self.kafka.world();
            let mut positions = self.positions.borrow_mut();
            for (key, position) in positions.iter_mut() {
                let Some(log) = w.source.get(key) else {
                    return Some(Err(FetchError::OutOfLog(format!("unknown partition {}-{}", key.0, key.1))));
                };
                if *position < log.start || *position > log.end {
                    return Some(Err(FetchError::OutOfLog("Broker: Offset out of range".into())));
                }
                let i = log.records.partition_point(|r| r.offset < *position);
                if let Some(r) = log.records.get(i) {
                    *position = r.offset + 1;
                    if let Some(d) = self.delay_per_record {
                        std::thread::sleep(d);
                    }
                    return Some(Ok(r.clone()));
                }
                // Skipped what a read_committed reader does not see, up to the end.
                *position = log.end;
            }
        }
        std::thread::sleep(wait.min(Duration::from_millis(1)));
        None
    }

    fn assign(&self, positions: &[PartitionPosition]) -> Result<(), ClientError> {
        if let Some(topic) = &self.failed_assign
            && positions.iter().any(|p| &p.topic == topic)
        {
            return Err(ClientError(format!("cannot assign {topic}")));
        }
        let w = self.kafka.world();
        let mut mine = self.positions.borrow_mut();
        for p in positions {
            let start = w.source.get(&(p.topic.clone(), p.partition)).map_or(0, |l| l.start);
            mine.insert((p.topic.clone(), p.partition), if p.offset < 0 { start } else { p.offset });
        }
        Ok(())
    }

    fn unassign(&self, partitions: &[Key]) {
        let mut mine = self.positions.borrow_mut();
        for key in partitions {
            mine.remove(key);
        }
    }

    fn unassign_all(&self) {
        self.positions.borrow_mut().clear();
    }

    fn positions(&self) -> Vec<(Key, i64)> {
        self.positions.borrow().iter().map(|(k, p)| (k.clone(), *p)).collect()
    }

    fn fetched_end(&self, topic: &str, partition: i32) -> Option<i64> {
        self.kafka.world().source.get(&(topic.to_string(), partition)).map(|l| l.end)
    }

    fn refresh_metadata(&self, _topics: &[&str]) {}

    fn log_bounds(&self, partitions: &[Key]) -> Result<Vec<(i64, i64)>, ClientError> {
        let w = self.kafka.world();
        Ok(partitions.iter().map(|k| w.source.get(k).map_or((0, 0), |l| (l.start, l.end))).collect())
    }
}

/// The fake transactional writer: deliveries are reported as soon as a record is sent.
pub(super) struct FakeWriter {
    kafka: FakeKafka,
    txn: usize,
    epoch: u32,
    /// A call met the fence (a newer epoch): the producer has failed for good.
    fenced: bool,
    deliveries: Vec<Delivered>,
    reported: usize,
    timed_out: bool,
    /// Replacements so far.
    pub replaced: u32,
}

impl FakeWriter {
    fn check_epoch(&mut self, w: &World) -> Result<(), TxnError> {
        if self.fenced || w.epochs[self.txn].1 != self.epoch {
            self.fenced = true;
            return Err(TxnError::new(
                TxnErrorKind::Fenced,
                "Broker: Producer attempted an operation with an old epoch",
            ));
        }
        Ok(())
    }
}

impl TransactionalWriter for FakeWriter {
    fn begin(&mut self) -> Result<(), TxnError> {
        let kafka = self.kafka.clone();
        let mut w = kafka.world();
        if let Some(Fault::Begin(kind)) = w.fault(|f| matches!(f, Fault::Begin(_))) {
            return Err(TxnError::new(kind, "begin refused (injected)"));
        }
        self.check_epoch(&w)
    }

    fn settle_codec(&mut self, _topic: &str, _source_codec: Option<i32>) {}

    fn send<R: SourceRecord>(&mut self, record: &R, slot: usize) -> Result<(), SendError> {
        let kafka = self.kafka.clone();
        let mut w = kafka.world();
        if let Some(Fault::Send(e)) = w.fault(|f| matches!(f, Fault::Send(_))) {
            return Err(e);
        }
        let delivered = if let Some(Fault::Delivery { timed_out }) = w.fault(|f| matches!(f, Fault::Delivery { .. })) {
            self.timed_out |= timed_out;
            Err(if timed_out {
                "Local: Message timed out".to_string()
            } else {
                "Broker: Not enough replicas".to_string()
            })
        } else if self.check_epoch(&w).is_err() {
            Err("Broker: Producer attempted an operation with an old epoch".to_string())
        } else {
            let mut headers = Vec::new();
            record.headers(&mut |k, v| headers.push((k.to_string(), v.map(<[u8]>::to_vec))));
            let entry = Entry {
                offset: 0,
                key: record.key().map(<[u8]>::to_vec),
                value: record.value().map(<[u8]>::to_vec),
                headers,
                state: State::Open(self.txn, self.epoch),
            };
            Ok(w.append((record.topic().to_string(), record.partition()), entry))
        };
        if self.deliveries.len() <= slot {
            self.deliveries.resize(slot + 1, None);
        }
        self.deliveries[slot] = Some(delivered);
        self.reported += record.bytes();
        Ok(())
    }

    fn send_state(&mut self, topic: &str, record: &StateWrite) -> Result<(), SendError> {
        let kafka = self.kafka.clone();
        let mut w = kafka.world();
        if self.check_epoch(&w).is_ok() {
            let entry = Entry {
                offset: 0,
                key: Some(record.key.clone()),
                value: record.value.clone(),
                headers: Vec::new(),
                state: State::Open(self.txn, self.epoch),
            };
            w.append((topic.to_string(), record.partition), entry);
        }
        Ok(())
    }

    fn reset_deliveries(&mut self) {
        self.deliveries.clear();
        self.reported = 0;
        self.timed_out = false;
    }

    fn reported_bytes(&self) -> usize {
        self.reported
    }

    fn wait_reported(&self, target: usize, _max: Duration) -> bool {
        self.reported < target
    }

    fn deliveries(&self) -> Vec<Delivered> {
        self.deliveries.clone()
    }

    fn take_deliveries(&mut self) -> Vec<Delivered> {
        std::mem::take(&mut self.deliveries)
    }

    fn delivery_timed_out(&self) -> bool {
        self.timed_out
    }

    fn flush(&self, _sent_bytes: usize, _timeout: Duration) -> Result<(), TxnError> {
        let kafka = self.kafka.clone();
        let mut w = kafka.world();
        match w.fault(|f| matches!(f, Fault::Flush(_))) {
            Some(Fault::Flush(kind)) => Err(TxnError::new(kind, "flush failed (injected)")),
            _ => Ok(()),
        }
    }

    fn commit(&mut self, _timeout: Duration) -> Result<(), TxnError> {
        let kafka = self.kafka.clone();
        let mut w = kafka.world();
        let fault = w.fault(|f| matches!(f, Fault::Commit { .. }));
        if let Some(Fault::Commit { kind, applied: false }) = fault {
            return Err(TxnError::new(kind, "commit failed (injected)"));
        }
        self.check_epoch(&w)?;
        w.end_transaction(self.txn, State::Committed);
        match fault {
            Some(Fault::Commit { kind, .. }) => Err(TxnError::new(kind, "commit answer lost (injected)")),
            _ => Ok(()),
        }
    }

    fn abort(&mut self, _timeout: Duration) -> Result<(), TxnError> {
        let kafka = self.kafka.clone();
        let mut w = kafka.world();
        if let Some(Fault::Abort(kind)) = w.fault(|f| matches!(f, Fault::Abort(_))) {
            return Err(TxnError::new(kind, "abort failed (injected)"));
        }
        self.check_epoch(&w)?;
        w.end_transaction(self.txn, State::Aborted);
        Ok(())
    }

    fn purge(&mut self) {}

    fn fatal_error(&self) -> Option<String> {
        self.fenced.then(|| "fenced (fake)".to_string())
    }

    fn replace(&mut self) -> Result<(), TxnError> {
        let kafka = self.kafka.clone();
        let mut w = kafka.world();
        if let Some(Fault::Replace(kind)) = w.fault(|f| matches!(f, Fault::Replace(_))) {
            return Err(TxnError::new(kind, "re-init transactions failed (injected)"));
        }
        w.epochs[self.txn].1 += 1;
        w.end_transaction(self.txn, State::Aborted);
        self.epoch = w.epochs[self.txn].1;
        self.fenced = false;
        self.deliveries.clear();
        self.reported = 0;
        self.timed_out = false;
        self.replaced += 1;
        Ok(())
    }

    fn refresh_metadata(&self, _topics: &[&str]) {}

    fn end_offsets(&self, partitions: &[Key]) -> Result<HashMap<Key, i64>, ClientError> {
        let w = self.kafka.world();
        Ok(partitions
            .iter()
            .map(|k| (k.clone(), w.destination.get(k).and_then(|l| l.last()).map_or(0, |e| e.offset + 1)))
            .collect())
    }

    fn first_committed_from(&self, from: &[(Key, i64)], _timeout: Duration) -> Result<HashMap<Key, i64>, ClientError> {
        let mut w = self.kafka.world();
        if w.fault(|f| matches!(f, Fault::ReadCommitted)).is_some() {
            return Err(ClientError("no answer from the destination (injected)".into()));
        }
        let mut found = HashMap::new();
        for (key, offset) in from {
            let log = w.destination.get(key).map(Vec::as_slice).unwrap_or_default();
            if log.iter().any(|e| e.offset >= *offset && matches!(e.state, State::Open(..))) {
                return Err(ClientError("a transaction is still open".into()));
            }
            if let Some(e) = log.iter().find(|e| e.offset >= *offset && e.state == State::Committed) {
                found.insert(key.clone(), e.offset);
            }
        }
        Ok(found)
    }

    fn committed_at(&self, topic: &str, partition: i32, offset: i64, _timeout: Duration) -> Result<bool, ClientError> {
        let w = self.kafka.world();
        let log = w.destination.get(&(topic.to_string(), partition));
        match log.and_then(|l| l.iter().find(|e| e.offset == offset)).map(|e| e.state) {
            Some(State::Committed) => Ok(true),
            Some(State::Open(..)) => Err(ClientError("the transaction is still open".into())),
            _ => Ok(false),
        }
    }
}
