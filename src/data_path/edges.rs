//! The data path's transaction edges, each run through the real loop over the in-memory clusters
//! (`fake`): commands in, events out, as the coordinator drives it. Every test ends by comparing
//! what a `read_committed` reader of the destination sees with the source: exactly once, in
//! order, nothing of an aborted or fenced transaction.

use std::sync::Arc;
use std::sync::mpsc::Sender;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot};

use super::fake::{FakeKafka, FakeSource, FakeWriter, Fault, State};
use super::*;
use crate::domain::throttle::Throttle;

const TXN_ID: &str = "m.slot-0";
const STATE_TOPIC: &str = "__mirror_state";
/// How long a test waits for what it expects before it fails (a deadline, not a measurement).
const DEADLINE: Duration = Duration::from_secs(20);

/// A data path running on its own thread over `kafka`, as `kafka::pipe::spawn` runs the real one.
struct Running {
    kafka: FakeKafka,
    commands: Sender<PipeCommand>,
    events: mpsc::UnboundedReceiver<PipeEvent>,
    seen: Vec<PipeEvent>,
    thread: Option<JoinHandle<()>>,
}

fn config(throttle: Arc<Throttle>) -> PipeConfig {
    PipeConfig {
        mirror: "m".into(),
        slot: 0,
        source_bootstrap: "source:9092".into(),
        source_properties: Default::default(),
        destination_bootstrap: "destination:9092".into(),
        destination_properties: Default::default(),
        transactional_id: TXN_ID.into(),
        commit_interval: Duration::from_millis(30),
        early_commit_interval: Duration::from_millis(5),
        commit_max_bytes: 4 << 10,
        state_topic: STATE_TOPIC.into(),
        transaction_timeout: Duration::from_secs(5),
        prefetch_kbytes: 1024,
        throttle,
        shared_source_consumer: None,
    }
}

/// The engine's state record of a partition's progress, reduced to what the tests read back.
fn encode() -> EncodeProgress {
    Box::new(|p: &PartitionProgress| {
        vec![StateWrite {
            partition: 0,
            key: format!("{}/{}", p.topic, p.partition).into_bytes(),
            value: Some(format!("{}/{}", p.next_source_offset, p.destination_end_offset).into_bytes()),
        }]
    })
}

impl Running {
    fn start(kafka: &FakeKafka) -> Running {
        Running::start_with(kafka, Arc::new(Throttle::default()), |_| {})
    }

    fn start_with(kafka: &FakeKafka, throttle: Arc<Throttle>, tune: impl FnOnce(&mut FakeSource)) -> Running {
        let (commands, rx) = std::sync::mpsc::channel();
        let (events_tx, events) = mpsc::unbounded_channel();
        let mut source = kafka.reader();
        tune(&mut source);
        let writer: FakeWriter = kafka.writer(TXN_ID);
        let pipe = Pipe::new(config(throttle), encode(), events_tx, source, writer);
        let thread = std::thread::spawn(move || run(pipe, rx));
        Running { kafka: kafka.clone(), commands, events, seen: Vec::new(), thread: Some(thread) }
    }

    /// Starts mirroring a partition from `next` (None: the log start) into a destination whose
    /// end is where the data path expects its first record.
    fn assign(&self, topic: &str, partition: i32, next: Option<i64>) {
        let end = self.kafka.destination(topic, partition).last().map_or(0, |e| e.offset + 1);
        self.assign_read_at(topic, partition, next, end);
    }

    /// [`Running::assign`] with the destination end as the engine read it (`read_end`), which
    /// may be older than the destination's end now.
    fn assign_read_at(&self, topic: &str, partition: i32, next: Option<i64>, read_end: i64) {
        let spec = AssignSpec {
            topic: topic.into(),
            partition,
            next_source_offset: next,
            source_leader_epoch: None,
            destination_next_offset: read_end,
            destination_end_offset: read_end,
        };
        self.commands.send(PipeCommand::Assign(vec![spec])).unwrap();
    }

    fn release(
        &self,
        partitions: &[(&str, i32)],
        finish: Finish,
        fence: bool,
    ) -> Result<Vec<FinalPosition>, PipeError> {
        let (reply, answer) = oneshot::channel();
        let partitions = partitions.iter().map(|(t, p)| (t.to_string(), *p)).collect();
        self.commands.send(PipeCommand::Unassign { partitions, finish, fence, sent: Instant::now(), reply }).unwrap();
        answer.blocking_recv().expect("the data path answers")
    }

    /// Waits for an event `pick` accepts, among those seen so far too (every event is kept);
    /// fails at the deadline.
    fn wait_for(&mut self, what: &str, pick: impl Fn(&PipeEvent) -> bool) -> &PipeEvent {
        let deadline = Instant::now() + DEADLINE;
        if let Some(i) = self.seen.iter().position(&pick) {
            return &self.seen[i];
        }
        loop {
            while let Ok(e) = self.events.try_recv() {
                let hit = pick(&e);
                self.seen.push(e);
                if hit {
                    return self.seen.last().unwrap();
                }
            }
            assert!(Instant::now() < deadline, "no {what} within {DEADLINE:?}; saw {:#?}", self.seen);
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Waits until a commit reports `topic-partition` mirrored up to `next` (exclusive).
    fn wait_mirrored(&mut self, topic: &str, partition: i32, next: i64) {
        self.wait_for(&format!("commit of {topic}-{partition} up to {next}"), |e| {
            matches!(e, PipeEvent::Committed(ps)
                if ps.iter().any(|p| p.topic == topic && p.partition == partition && p.next_source_offset >= next))
        });
    }

    /// orders-0 and orders-1 with 20 records each, both mirrored by a new data path.
    fn with_two_partitions_mirrored(kafka: &FakeKafka) -> Running {
        kafka.produce("orders", 0, 20, 0);
        kafka.produce("orders", 1, 20, 0);
        let mut dp = Running::start(kafka);
        dp.assign("orders", 0, None);
        dp.assign("orders", 1, None);
        dp.wait_mirrored("orders", 0, 20);
        dp.wait_mirrored("orders", 1, 20);
        dp
    }

    /// Waits for a partition to fail with a foreign write: (topic, partition, expected offset,
    /// found offset).
    fn wait_foreign_write(&mut self) -> (String, i32, i64, i64) {
        let failed = self.wait_for("a foreign write", |e| matches!(e, PipeEvent::PartitionFailed { .. }));
        let PipeEvent::PartitionFailed {
            topic,
            partition,
            fault: PartitionFault::ForeignWrite { expected_offset, found_offset },
        } = failed
        else {
            panic!("{failed:?}");
        };
        (topic.clone(), *partition, *expected_offset, *found_offset)
    }

    fn retries(&self) -> usize {
        self.seen.iter().filter(|e| matches!(e, PipeEvent::Retrying { .. })).count()
    }

    fn shutdown(mut self) -> Vec<PipeEvent> {
        let (reply, answer) = oneshot::channel();
        self.commands.send(PipeCommand::Shutdown { reply }).unwrap();
        let _ = answer.blocking_recv();
        self.thread.take().unwrap().join().unwrap();
        while let Ok(e) = self.events.try_recv() {
            self.seen.push(e);
        }
        std::mem::take(&mut self.seen)
    }
}

/// What a read_committed reader of the destination partition sees equals the source's first
/// `count` records, key, value and headers, in order, once each.
fn assert_copied(kafka: &FakeKafka, topic: &str, partition: i32, count: usize) {
    let source = kafka.source(topic, partition);
    let visible = kafka.visible(topic, partition);
    let want: Vec<_> = source.iter().take(count).map(|r| (r.key.clone(), r.value.clone(), r.headers.clone())).collect();
    let got: Vec<_> = visible.iter().map(|e| (e.key.clone(), e.value.clone(), e.headers.clone())).collect();
    assert_eq!(got.len(), want.len(), "{topic}-{partition}: {} visible, want {}", got.len(), want.len());
    assert_eq!(got, want, "{topic}-{partition}");
}

/// The newest committed state record of a partition: (next source offset, destination end).
fn committed_state(kafka: &FakeKafka, topic: &str, partition: i32) -> Option<(i64, i64)> {
    let key = format!("{topic}/{partition}").into_bytes();
    let last = kafka.visible(STATE_TOPIC, 0).into_iter().rev().find(|e| e.key.as_deref() == Some(&key[..]))?;
    let value = String::from_utf8(last.value?).ok()?;
    let (next, end) = value.split_once('/')?;
    Some((next.parse().ok()?, end.parse().ok()?))
}

#[test]
fn records_and_their_positions_commit_together_exactly_once() {
    let kafka = FakeKafka::default();
    kafka.produce("orders", 0, 300, 0);
    kafka.produce("orders", 1, 200, 0);
    let mut dp = Running::start(&kafka);
    dp.assign("orders", 0, None);
    dp.assign("orders", 1, Some(0));
    dp.wait_mirrored("orders", 0, 300);
    dp.wait_mirrored("orders", 1, 200);
    assert_copied(&kafka, "orders", 0, 300);
    assert_copied(&kafka, "orders", 1, 200);
    // The state record committed with the last batch holds where the next record lands: after
    // the 300 records and the commit markers between the transactions.
    let (next, end) = committed_state(&kafka, "orders", 0).unwrap();
    assert_eq!(next, 300);
    let last_record = kafka.visible("orders", 0).last().unwrap().offset;
    assert_eq!(end, last_record + 1);
    assert_eq!(kafka.open_records(), 0);
    assert_eq!(dp.retries(), 0);
    dp.shutdown();
}

#[test]
fn a_failed_commit_is_aborted_and_its_records_copied_again_once() {
    let kafka = FakeKafka::default();
    kafka.produce("orders", 0, 100, 0);
    kafka.inject(Fault::Commit { kind: TxnErrorKind::Other, applied: false });
    let mut dp = Running::start(&kafka);
    dp.assign("orders", 0, None);
    dp.wait_for("a retry", |e| matches!(e, PipeEvent::Retrying { message, .. } if message.contains("commit")));
    dp.wait_mirrored("orders", 0, 100);
    assert_copied(&kafka, "orders", 0, 100);
    // The aborted copy is on the destination, invisible.
    assert!(kafka.destination("orders", 0).iter().any(|e| e.state == State::Aborted));
    dp.shutdown();
}

#[test]
fn a_commit_whose_answer_was_lost_but_committed_is_learned_not_repeated() {
    let kafka = FakeKafka::default();
    kafka.produce("orders", 0, 100, 0);
    kafka.inject(Fault::Commit { kind: TxnErrorKind::TimedOut, applied: true });
    let mut dp = Running::start(&kafka);
    dp.assign("orders", 0, None);
    dp.wait_mirrored("orders", 0, 100);
    assert_eq!(kafka.faults_left(), 0);
    // The producer was replaced (epoch bump) and the outcome read back: no record twice.
    assert_copied(&kafka, "orders", 0, 100);
    assert!(!kafka.destination("orders", 0).iter().any(|e| e.state == State::Aborted));
    dp.shutdown();
}

#[test]
fn a_commit_that_timed_out_without_committing_is_copied_again_once() {
    let kafka = FakeKafka::default();
    kafka.produce("orders", 0, 100, 0);
    kafka.inject(Fault::Commit { kind: TxnErrorKind::TimedOut, applied: false });
    let mut dp = Running::start(&kafka);
    dp.assign("orders", 0, None);
    dp.wait_mirrored("orders", 0, 100);
    assert_copied(&kafka, "orders", 0, 100);
    // The replacement's init aborted the transaction in doubt.
    assert!(kafka.destination("orders", 0).iter().any(|e| e.state == State::Aborted));
    dp.shutdown();
}

#[test]
fn a_new_owner_fences_the_data_path_and_none_of_its_open_transaction_shows() {
    let kafka = FakeKafka::default();
    kafka.produce("orders", 0, 50, 0);
    let mut dp = Running::start(&kafka);
    dp.assign("orders", 0, None);
    dp.wait_mirrored("orders", 0, 50);
    // Another instance takes the slot over (its init bumps the epoch) while records keep coming.
    kafka.fence(TXN_ID);
    kafka.produce("orders", 0, 50, 0);
    dp.wait_for("the fence", |e| matches!(e, PipeEvent::Fenced { .. }));
    // Exactly what was committed before the fence, nothing after.
    assert_copied(&kafka, "orders", 0, 50);
    assert_eq!(kafka.open_records(), 0);
    // A fenced data path refuses to release with positions it no longer owns.
    let e = dp.release(&[("orders", 0)], Finish::Abort, true).unwrap_err();
    assert!(matches!(e, PipeError::Fenced(_)), "{e:?}");
    dp.shutdown();
}

#[test]
fn a_foreign_write_fails_its_partition_and_the_others_go_on() {
    let kafka = FakeKafka::default();
    let mut dp = Running::with_two_partitions_mirrored(&kafka);
    // Somebody else writes to the mirror topic's partition 0.
    kafka.foreign_write("orders", 0);
    kafka.produce("orders", 0, 20, 0);
    kafka.produce("orders", 1, 20, 0);
    let (topic, partition, expected_offset, found_offset) = dp.wait_foreign_write();
    assert_eq!((topic.as_str(), partition), ("orders", 0));
    assert_eq!(found_offset, expected_offset + 1, "our record landed behind the foreign one");
    dp.wait_mirrored("orders", 1, 40);
    assert_copied(&kafka, "orders", 1, 40);
    // Partition 0: what was committed before, then the foreign record; none of ours after it.
    let visible = kafka.visible("orders", 0);
    assert_eq!(visible.len(), 21);
    assert_eq!(visible[20].value.as_deref(), Some(&b"foreign"[..]));
    dp.shutdown();
}

#[test]
fn a_position_below_the_source_log_start_fails_the_partition_with_the_bounds() {
    let kafka = FakeKafka::default();
    kafka.produce("orders", 0, 30, 0);
    kafka.delete_below("orders", 0, 10);
    let mut dp = Running::start(&kafka);
    dp.assign("orders", 0, Some(4));
    let failed = dp.wait_for("the truncation", |e| matches!(e, PipeEvent::PartitionFailed { .. }));
    let PipeEvent::PartitionFailed { fault: PartitionFault::SourceTruncated { message }, .. } = failed else {
        panic!("{failed:?}");
    };
    assert!(message.contains("holds offsets [10, 30) but the next offset to mirror is 4"), "{message}");
    assert!(kafka.visible("orders", 0).is_empty());
    dp.shutdown();
}

#[test]
fn after_a_failed_delivery_the_abort_is_rewound_and_the_next_records_land_after_its_marker() {
    let kafka = FakeKafka::default();
    kafka.produce("orders", 0, 40, 0);
    let mut dp = Running::start(&kafka);
    dp.assign("orders", 0, None);
    dp.wait_mirrored("orders", 0, 40);
    kafka.inject(Fault::Delivery { timed_out: false });
    kafka.produce("orders", 0, 40, 0);
    dp.wait_for("a retry", |e| matches!(e, PipeEvent::Retrying { message, .. } if message.contains("delivery failed")));
    dp.wait_mirrored("orders", 0, 80);
    assert_copied(&kafka, "orders", 0, 80);
    dp.shutdown();
}

#[test]
fn a_timed_out_delivery_replaces_the_producer_before_anything_else_is_copied() {
    let kafka = FakeKafka::default();
    kafka.produce("orders", 0, 60, 0);
    kafka.inject(Fault::Delivery { timed_out: true });
    let mut dp = Running::start(&kafka);
    dp.assign("orders", 0, None);
    dp.wait_mirrored("orders", 0, 60);
    assert_copied(&kafka, "orders", 0, 60);
    assert!(dp.retries() >= 1);
    dp.shutdown();
}

#[test]
fn a_throttled_data_path_holds_no_transaction_open_and_still_answers_commands() {
    let kafka = FakeKafka::default();
    kafka.produce("orders", 0, 5_000, 0);
    let throttle = Arc::new(Throttle::new(Some(crate::domain::throttle::MIN_BYTES_PER_SEC), Instant::now()));
    let started = Instant::now();
    let mut dp = Running::start_with(&kafka, throttle.clone(), |_| {});
    dp.assign("orders", 0, None);
    dp.wait_mirrored("orders", 0, 1);
    let deadline = Instant::now() + DEADLINE;
    while throttle.waited().is_zero() {
        assert!(Instant::now() < deadline, "never throttled");
        std::thread::sleep(Duration::from_millis(5));
    }
    // A pause while it waits is served, and commits what was read.
    let finals = dp.release(&[("orders", 0)], Finish::Commit, false).unwrap();
    let copied = kafka.visible("orders", 0).len();
    assert_eq!(finals[0].next_source_offset, Some(copied as i64));
    assert_copied(&kafka, "orders", 0, copied);
    assert_eq!(kafka.open_records(), 0);
    // The rate held: no more than the bucket's burst plus the rate over the time it ran.
    let bytes: usize = kafka
        .visible("orders", 0)
        .iter()
        .map(|e| e.key.as_ref().unwrap().len() + e.value.as_ref().unwrap().len())
        .sum();
    let allowed =
        (crate::domain::throttle::MIN_BYTES_PER_SEC as f64 * (started.elapsed().as_secs_f64() + 2.0)) as usize;
    assert!(bytes <= allowed, "{bytes} bytes copied, the rate allows {allowed}");
    assert!(copied < 5_000);
    dp.shutdown();
}

#[test]
fn a_partition_released_mid_batch_keeps_exactly_its_committed_records_and_resumes_there() {
    let kafka = FakeKafka::default();
    kafka.produce("orders", 0, 20_000, 0);
    // A slow source (a backlog that takes seconds to copy).
    let mut dp = Running::start_with(&kafka, Arc::new(Throttle::default()), |s| {
        s.delay_per_record = Some(Duration::from_micros(200));
    });
    dp.assign("orders", 0, None);
    dp.wait_mirrored("orders", 0, 1);
    // A stop arrives while the data path is busy with a backlog: abort the open transaction,
    // fence, and give the final position.
    let finals = dp.release(&[("orders", 0)], Finish::Abort, true).unwrap();
    let next = finals[0].next_source_offset.unwrap();
    assert!(next < 20_000, "the backlog was not copied before the release");
    assert_copied(&kafka, "orders", 0, next as usize);
    assert_eq!(kafka.open_records(), 0);
    assert_eq!(committed_state(&kafka, "orders", 0).map(|s| s.0), Some(next));
    dp.shutdown();
    // Another owner resumes from the final position: the rest once, nothing twice.
    let mut dp = Running::start(&kafka);
    dp.assign("orders", 0, Some(next));
    dp.wait_mirrored("orders", 0, 20_000);
    assert_copied(&kafka, "orders", 0, 20_000);
    dp.shutdown();
}

/// A slot's data path is replaced (an idle slot's rebuild, a new producer) or a partition comes
/// back after a pause: the engine reads the destination end right after the previous
/// transaction's commit returned, but the transaction coordinator writes the commit marker after
/// that, so the end read is the marker's offset and our first record lands one later. That is
/// ours, not a foreign write; a record two later is.
#[test]
fn a_partition_assigned_before_the_previous_commit_s_marker_landed_goes_on_after_it() {
    let kafka = FakeKafka::default();
    let dp = Running::with_two_partitions_mirrored(&kafka);
    let finals = dp.release(&[("orders", 0), ("orders", 1)], Finish::Commit, false).unwrap();
    dp.shutdown();
    let final_of = |p: i32| finals.iter().find(|f| f.partition == p).unwrap().clone();
    let marker = |p: i32| kafka.destination("orders", p).last().unwrap().clone();
    // Both logs end with the last commit's marker, right after the committed records.
    for p in [0, 1] {
        assert_eq!(marker(p).state, State::Marker);
        assert_eq!(marker(p).offset, final_of(p).destination_end_offset);
    }
    kafka.produce("orders", 0, 20, 0);
    kafka.produce("orders", 1, 20, 0);
    // The new data path gets partition 0's end as read before the marker, and partition 1's
    // as read before the marker and a foreign record behind it.
    kafka.foreign_write("orders", 1);
    let mut dp = Running::start(&kafka);
    dp.assign_read_at("orders", 0, final_of(0).next_source_offset, marker(0).offset);
    dp.assign_read_at("orders", 1, final_of(1).next_source_offset, final_of(1).destination_end_offset);
    dp.wait_mirrored("orders", 0, 40);
    assert_copied(&kafka, "orders", 0, 40);
    let (next, end) = committed_state(&kafka, "orders", 0).unwrap();
    assert_eq!((next, end), (40, kafka.visible("orders", 0).last().unwrap().offset + 1));
    let (topic, partition, expected_offset, found_offset) = dp.wait_foreign_write();
    assert_eq!((topic.as_str(), partition), ("orders", 1));
    assert_eq!(found_offset, expected_offset + 2, "our record landed behind the marker and the foreign record");
    assert!(
        !dp.seen.iter().any(|e| matches!(e, PipeEvent::PartitionFailed { partition: 0, .. })),
        "partition 0 failed: {:?}",
        dp.seen
    );
    dp.shutdown();
}

#[test]
fn skipped_source_offsets_move_the_reported_position_to_the_end() {
    let kafka = FakeKafka::default();
    // Each record is followed by a source transaction's commit marker.
    kafka.produce("orders", 0, 10, 1);
    let mut dp = Running::start(&kafka);
    dp.assign("orders", 0, None);
    dp.wait_mirrored("orders", 0, 19);
    dp.wait_for(
        "the position past the last marker",
        |e| matches!(e, PipeEvent::FetchPositions(ps) if ps.iter().any(|p| p.offset == 20)),
    );
    assert_copied(&kafka, "orders", 0, 10);
    dp.shutdown();
}

#[test]
fn a_destination_without_markers_is_learned_and_nothing_is_copied_twice() {
    let kafka = FakeKafka::default();
    kafka.without_markers();
    kafka.produce("orders", 0, 30, 0);
    let mut dp = Running::start(&kafka);
    dp.assign("orders", 0, None);
    dp.wait_mirrored("orders", 0, 30);
    kafka.produce("orders", 0, 30, 0);
    dp.wait_mirrored("orders", 0, 60);
    assert_copied(&kafka, "orders", 0, 60);
    dp.shutdown();
}

#[test]
fn a_fenced_begin_stops_the_data_path_with_nothing_copied() {
    let kafka = FakeKafka::default();
    kafka.produce("orders", 0, 10, 0);
    kafka.inject(Fault::Begin(TxnErrorKind::Fenced));
    let mut dp = Running::start(&kafka);
    dp.assign("orders", 0, None);
    dp.wait_for("the fence", |e| matches!(e, PipeEvent::Fenced { .. }));
    assert!(kafka.visible("orders", 0).is_empty());
    dp.shutdown();
}

#[test]
fn a_record_the_transaction_refuses_is_read_again_after_the_abort() {
    let kafka = FakeKafka::default();
    kafka.produce("orders", 0, 50, 0);
    kafka.inject(Fault::Send(SendError::TransactionRefuses));
    let mut dp = Running::start(&kafka);
    dp.assign("orders", 0, None);
    dp.wait_for(
        "a retry",
        |e| matches!(e, PipeEvent::Retrying { message, .. } if message.contains("refused a record")),
    );
    dp.wait_mirrored("orders", 0, 50);
    assert_copied(&kafka, "orders", 0, 50);
    dp.shutdown();
}

#[test]
fn a_record_the_destination_cannot_take_fails_only_its_partition() {
    let kafka = FakeKafka::default();
    kafka.produce("orders", 0, 10, 0);
    kafka.produce("orders", 1, 10, 0);
    kafka.inject(Fault::Send(SendError::Rejected("Broker: Message size too large".into())));
    let mut dp = Running::start(&kafka);
    dp.assign("orders", 0, None);
    let failed = dp.wait_for("the rejection", |e| matches!(e, PipeEvent::PartitionFailed { .. }));
    let PipeEvent::PartitionFailed { fault: PartitionFault::DestinationRejected { message }, .. } = failed else {
        panic!("{failed:?}");
    };
    assert!(message.contains("cannot send record at source offset 0: Broker: Message size too large"), "{message}");
    assert!(kafka.visible("orders", 0).is_empty());
    dp.assign("orders", 1, None);
    dp.wait_mirrored("orders", 1, 10);
    assert_copied(&kafka, "orders", 1, 10);
    dp.shutdown();
}

#[test]
fn a_failed_flush_aborts_and_the_records_are_copied_again_once() {
    let kafka = FakeKafka::default();
    kafka.produce("orders", 0, 40, 0);
    kafka.inject(Fault::Flush(TxnErrorKind::Other));
    let mut dp = Running::start(&kafka);
    dp.assign("orders", 0, None);
    dp.wait_mirrored("orders", 0, 40);
    assert_eq!(dp.retries(), 1);
    assert_copied(&kafka, "orders", 0, 40);
    dp.shutdown();
}

#[test]
fn an_abort_refused_in_its_state_is_settled_by_a_new_producer() {
    let kafka = FakeKafka::default();
    kafka.produce("orders", 0, 40, 0);
    // The commit fails (abortable), then the abort is refused as INVALID_TXN_STATE.
    kafka.inject(Fault::Commit { kind: TxnErrorKind::Other, applied: false });
    kafka.inject(Fault::Abort(TxnErrorKind::InvalidState));
    let mut dp = Running::start(&kafka);
    dp.assign("orders", 0, None);
    dp.wait_mirrored("orders", 0, 40);
    assert_eq!(kafka.faults_left(), 0);
    assert!(!dp.seen.iter().any(|e| matches!(e, PipeEvent::Fenced { .. })), "{:?}", dp.seen);
    assert_copied(&kafka, "orders", 0, 40);
    dp.shutdown();
}

#[test]
fn a_commit_in_doubt_waits_for_a_replacement_producer_and_is_then_learned() {
    let kafka = FakeKafka::default();
    kafka.produce("orders", 0, 60, 0);
    // The commit's answer is lost (it committed), and the destination does not take the
    // replacement producer's init at first.
    kafka.inject(Fault::Commit { kind: TxnErrorKind::TimedOut, applied: true });
    kafka.inject(Fault::Replace(TxnErrorKind::TimedOut));
    let mut dp = Running::start(&kafka);
    dp.assign("orders", 0, None);
    dp.wait_for(
        "the doubt",
        |e| matches!(e, PipeEvent::Retrying { message, .. } if message.contains("after a timeout")),
    );
    // A release waits for the outcome: its final position counts the commit in doubt.
    dp.wait_mirrored("orders", 0, 60);
    let finals = dp.release(&[("orders", 0)], Finish::Abort, true).unwrap();
    assert_eq!(finals[0].next_source_offset, Some(60));
    assert_copied(&kafka, "orders", 0, 60);
    dp.shutdown();
}

#[test]
fn a_commit_refused_as_fenced_stops_the_data_path_without_re_initialising() {
    let kafka = FakeKafka::default();
    kafka.produce("orders", 0, 30, 0);
    kafka.inject(Fault::Commit { kind: TxnErrorKind::Fenced, applied: false });
    let mut dp = Running::start(&kafka);
    dp.assign("orders", 0, None);
    dp.wait_for("the fence", |e| matches!(e, PipeEvent::Fenced { .. }));
    // A new init would fence the slot's new owner back: the data path stays stopped.
    kafka.produce("orders", 0, 30, 0);
    // It gives no final position for partitions it no longer holds.
    let released = dp.release(&[("orders", 0)], Finish::Commit, false);
    assert!(!matches!(&released, Ok(finals) if !finals.is_empty()), "{released:?}");
    assert!(!dp.seen.iter().any(|e| matches!(e, PipeEvent::Committed(_))), "{:?}", dp.seen);
    assert!(kafka.visible("orders", 0).is_empty());
    dp.shutdown();
}

/// A data path left behind: its commit timed out and its replacement producer is refused for a
/// while, during which the slot's new owner copies and commits the same records. When the
/// replacement finally comes (its init fences the new owner), the data path finds records it did
/// not write committed after its last commit and stops, instead of resuming from its own, older
/// positions and copying them a second time.
#[test]
fn a_replacement_that_finds_another_writer_s_commits_stops_instead_of_copying_them_again() {
    let kafka = FakeKafka::default();
    kafka.produce("orders", 0, 50, 0);
    let mut old = Running::start(&kafka);
    old.assign("orders", 0, None);
    old.wait_mirrored("orders", 0, 50);
    kafka.inject(Fault::Commit { kind: TxnErrorKind::TimedOut, applied: false });
    for _ in 0..3 {
        kafka.inject(Fault::Replace(TxnErrorKind::TimedOut));
    }
    kafka.produce("orders", 0, 10, 0);
    old.wait_for(
        "a refused replacement",
        |e| matches!(e, PipeEvent::Retrying { message, .. } if message.contains("after a timeout")),
    );
    // The new owner: its init fences the old producer; it copies from the committed position.
    let mut new = Running::start(&kafka);
    new.assign("orders", 0, Some(50));
    new.wait_mirrored("orders", 0, 60);
    assert!(kafka.faults_left() > 0, "the old data path was replaced before the new owner committed: nothing tested");
    old.wait_for(
        "the old data path's stop",
        |e| matches!(e, PipeEvent::Fenced { message } if message.contains("did not write")),
    );
    assert_copied(&kafka, "orders", 0, 60);
    old.shutdown();
    new.shutdown();
}

/// The check for another writer's commits after a re-created producer belongs to the partitions
/// that stay: a release does not wait for it, or fail when it gets no answer. The partitions
/// left wait for it (nothing is copied meanwhile) and resume once it passes.
#[test]
fn a_release_does_not_wait_for_the_check_for_another_writer_s_commits() {
    let kafka = FakeKafka::default();
    kafka.produce("orders", 0, 50, 0);
    kafka.produce("orders", 1, 50, 0);
    let mut dp = Running::start(&kafka);
    dp.assign("orders", 0, None);
    dp.assign("orders", 1, None);
    dp.wait_mirrored("orders", 0, 50);
    dp.wait_mirrored("orders", 1, 50);
    kafka.inject(Fault::Commit { kind: TxnErrorKind::TimedOut, applied: false });
    for _ in 0..3 {
        kafka.inject(Fault::ReadCommitted);
    }
    kafka.produce("orders", 0, 10, 0);
    dp.wait_for(
        "a check without an answer",
        |e| matches!(e, PipeEvent::Retrying { message, .. } if message.contains("another writer's commits")),
    );
    assert!(kafka.faults_left() > 0, "every check was answered before the release: nothing tested");
    let finals = dp.release(&[("orders", 1)], Finish::Abort, false).expect("the release does not wait for the check");
    assert_eq!(finals.len(), 1);
    assert_eq!(finals[0].next_source_offset, Some(50));
    // The partition that stays resumes once a check is answered, and copies each record once.
    dp.wait_mirrored("orders", 0, 60);
    assert_eq!(kafka.faults_left(), 0);
    assert_copied(&kafka, "orders", 0, 60);
    assert_copied(&kafka, "orders", 1, 50);
    dp.shutdown();
}
