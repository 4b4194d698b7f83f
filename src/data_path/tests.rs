use tokio::sync::oneshot;

use super::*;

fn spec(topic: &str, partition: i32, from: i64) -> AssignSpec {
    AssignSpec {
        topic: topic.into(),
        partition,
        next_source_offset: Some(from),
        source_leader_epoch: None,
        destination_next_offset: 0,
        destination_end_offset: 0,
    }
}

fn unassign(partitions: &[(&str, i32)]) -> PipeCommand {
    let (reply, _) = oneshot::channel();
    PipeCommand::Unassign {
        partitions: partitions.iter().map(|(t, p)| (t.to_string(), *p)).collect(),
        finish: Finish::Abort,
        fence: true,
        sent: Instant::now(),
        reply,
    }
}

/// A command as its kind and (topic, partition, from offset or -1) list.
type Shape = (&'static str, Vec<(String, i32, i64)>);

/// The commands as shapes, in order.
fn shape(cmds: &[PipeCommand]) -> Vec<Shape> {
    cmds.iter()
        .map(|c| match c {
            PipeCommand::Assign(specs) => (
                "assign",
                specs.iter().map(|s| (s.topic.clone(), s.partition, s.next_source_offset.unwrap_or(-1))).collect(),
            ),
            PipeCommand::Unassign { partitions, .. } => {
                ("unassign", partitions.iter().map(|(t, p)| (t.clone(), *p, -1)).collect())
            }
            PipeCommand::Fence { .. } => ("fence", Vec::new()),
            PipeCommand::Shutdown { .. } => ("shutdown", Vec::new()),
        })
        .collect()
}

#[test]
fn queued_assignments_become_one_in_their_order() {
    let cmds = coalesce(vec![
        PipeCommand::Assign(vec![spec("a", 0, 5), spec("a", 1, 6)]),
        PipeCommand::Assign(vec![spec("b", 0, 7)]),
        PipeCommand::Assign(vec![spec("a", 0, 9)]),
    ]);
    // One assignment; a partition assigned twice keeps its first position first (the data
    // path keeps the first and ignores the repeat, as it did command by command).
    let expected =
        vec![("assign", vec![("a".into(), 0, 5), ("a".into(), 1, 6), ("b".into(), 0, 7), ("a".into(), 0, 9)])];
    assert_eq!(shape(&cmds), expected);
}

#[test]
fn a_queued_release_drops_the_assignments_it_would_undo_and_keeps_later_ones() {
    let (fence, _) = oneshot::channel();
    let cmds = coalesce(vec![
        PipeCommand::Assign(vec![spec("a", 0, 1), spec("b", 0, 2)]),
        PipeCommand::Assign(vec![spec("a", 1, 3)]),
        PipeCommand::Fence { reply: fence },
        unassign(&[("a", 0), ("a", 1)]),
        // A restart after the stop: assigned again.
        PipeCommand::Assign(vec![spec("a", 0, 4)]),
    ]);
    let expected = vec![
        ("assign", vec![("b".into(), 0, 2)]),
        ("fence", vec![]),
        ("unassign", vec![("a".into(), 0, -1), ("a".into(), 1, -1)]),
        ("assign", vec![("a".into(), 0, 4)]),
    ];
    assert_eq!(shape(&cmds), expected);
}

#[test]
fn a_stop_after_a_start_storm_is_handled_without_any_assignment() {
    let mut queued: Vec<PipeCommand> =
        (0..100).map(|t| PipeCommand::Assign(vec![spec(&format!("t{t}"), 0, 0)])).collect();
    let all: Vec<(String, i32)> = (0..100).map(|t| (format!("t{t}"), 0)).collect();
    let refs: Vec<(&str, i32)> = all.iter().map(|(t, p)| (t.as_str(), *p)).collect();
    queued.push(unassign(&refs));
    let cmds = coalesce(queued);
    assert_eq!(cmds.len(), 1);
    assert_eq!(shape(&cmds)[0].0, "unassign");
}

#[test]
fn early_ends_are_spaced_from_the_previous_fill_end_and_never_younger_than_half_the_spacing() {
    let ms = Duration::from_millis;
    // The previous transaction's flush and commit (here 20 ms) count towards the 50 ms.
    assert!(early_end_allowed(ms(50), ms(30), ms(50)));
    assert!(!early_end_allowed(ms(49), ms(30), ms(50)));
    // After a slow flush (80 ms) the open transaction still fills for 25 ms.
    assert!(!early_end_allowed(ms(90), ms(10), ms(50)));
    assert!(early_end_allowed(ms(105), ms(25), ms(50)));
}

#[test]
fn a_transaction_ends_early_within_its_own_size_of_the_fetched_end() {
    assert!(near_fetched_end(99, 1, Some(100))); // read to the end
    assert!(near_fetched_end(99, 1, Some(101))); // one short: a commit marker at 100
    assert!(!near_fetched_end(99, 1, Some(102))); // more fetched and unread than the transaction holds
    assert!(near_fetched_end(99, 400, Some(500))); // steady load: one fetch ahead, 400 in the transaction
    assert!(!near_fetched_end(99, 400, Some(1_000_000))); // backlog: keep filling
    assert!(near_fetched_end(99, 0, None)); // no fetch answered yet: nothing known to wait for
}

#[test]
fn once_its_end_was_read_the_first_landing_may_follow_our_marker_and_nothing_else() {
    assert!(landed_where_ours_can(100, 100)); // the marker was already there when read
    assert!(landed_where_ours_can(100, 101)); // the marker came after the read
    assert!(!landed_where_ours_can(100, 102)); // somebody else's record in between
    assert!(!landed_where_ours_can(100, 99)); // below the end: never ours
}

#[test]
fn unacked_limit_keeps_a_batch_per_partition_in_flight_within_a_transaction() {
    let mib = 1 << 20;
    // Few partitions: the flat limit, so a backlog's flush stays short.
    assert_eq!(unacked_limit(1, 64 * mib), 16 * mib);
    assert_eq!(unacked_limit(8, 64 * mib), 16 * mib);
    // Many partitions: a full batch each, so the produce requests stay full.
    assert_eq!(unacked_limit(64, 64 * mib), 64 * PRODUCER_BATCH_BYTES);
    assert_eq!(unacked_limit(10_000, 64 * mib), 64 * mib);
    // Never more than a transaction may hold.
    assert_eq!(unacked_limit(8, mib), mib);
}

#[test]
fn backoff_grows_and_is_capped() {
    // Between half and all of 200 ms doubling per attempt, at most 30 s.
    assert!(backoff(0) <= Duration::from_millis(200));
    assert!(backoff(3) >= Duration::from_millis(800));
    assert!(backoff(30) <= Duration::from_millis(30_000));
}

#[test]
fn a_timed_out_transactional_request_replaces_the_producer_and_a_fence_stops() {
    use TxnErrorKind as K;
    // A timeout: the request may still reach the broker, so only an epoch bump makes it harmless.
    assert_eq!(txn_error_action(K::TimedOut), TxnErrorAction::NewProducer);
    // Re-initialising after a fence would fence the new owner back.
    assert_eq!(txn_error_action(K::Fenced), TxnErrorAction::Fenced);
    // Anything else (an abortable error, a refused record, a lost connection): abort and retry.
    assert_eq!(txn_error_action(K::Other), TxnErrorAction::AbortAndRetry);
    assert_eq!(txn_error_action(K::InvalidState), TxnErrorAction::AbortAndRetry);
}

#[test]
fn an_abort_refused_as_invalid_state_replaces_the_producer_but_a_fenced_one_stops() {
    use TxnErrorKind as K;
    // librdkafka#4849: the abort raced the first AddPartitionsToTxn; a new producer ends it.
    assert!(abort_failure_needs_new_producer(K::InvalidState));
    assert!(abort_failure_needs_new_producer(K::TimedOut));
    // A fence must stop the data path: a new producer would fence the slot's new owner.
    assert!(!abort_failure_needs_new_producer(K::Fenced));
    assert!(!abort_failure_needs_new_producer(K::Other));
}

#[test]
fn position_reports_are_spaced_by_the_assignment_size_only_past_125_partitions() {
    let ms = Duration::from_millis;
    assert_eq!(position_report_every(0), ms(500));
    assert_eq!(position_report_every(125), ms(500));
    assert_eq!(position_report_every(625), ms(2_500));
    assert_eq!(position_report_every(usize::MAX), POSITION_REPORT_PER_PARTITION * u32::MAX);
}
