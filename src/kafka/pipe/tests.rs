use super::*;

/// The typed errors of the data path read as the words operators saw before they were
/// typed: the data-path status and the partition errors show them.
#[test]
fn typed_pipe_errors_keep_their_words() {
    let client = || KafkaError::Client("bad property".into());
    let rd = || RdError::ClientCreation("no brokers".into());
    let texts = [
        (StartError::SourceConsumer(client()).to_string(), "cannot create source consumer: "),
        (StartError::Producer(client()).to_string(), "cannot create destination producer: "),
        (StartError::InitTransactions(rd()).to_string(), "cannot initialise transactions on the destination: "),
        (ReplaceError::Create(client()).to_string(), "cannot re-create producer: "),
        (ReplaceError::Init(rd()).to_string(), "re-init transactions: "),
        (OutcomeError::Reader(client()).to_string(), "cannot create the outcome reader: "),
        (OutcomeError::Assign(rd()).to_string(), "cannot read the destination: "),
        (AssignError::Consumer(rd()).to_string(), ""),
    ];
    for (text, prefix) in texts {
        let inner = if text.contains("Kafka client") { client().to_string() } else { rd().to_string() };
        assert_eq!(text, format!("{prefix}{inner}"));
    }
    let none = OutcomeError::NoAnswer { topic: "t".into(), partition: 3, offset: 42 };
    assert_eq!(none.to_string(), "cannot learn the outcome of the commit in doubt (reading t-3 at 42)");
}

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
fn a_timed_out_transactional_request_replaces_the_producer() {
    use RDKafkaErrorCode as C;
    // Timeouts: the request may still reach the broker, so only an epoch bump makes it harmless.
    for code in [C::OperationTimedOut, C::MessageTimedOut, C::RequestTimedOut, C::TimedOutQueue] {
        assert!(needs_new_producer(Some(code)), "{code:?}");
        assert_eq!(txn_error_action(false, Some(code)), TxnErrorAction::NewProducer, "{code:?}");
    }
    // Fencing wins, timed out or not: re-initialising would fence the new owner back.
    assert_eq!(txn_error_action(true, Some(C::OperationTimedOut)), TxnErrorAction::Fenced);
    for code in [C::ProducerFenced, C::InvalidProducerEpoch, C::Fenced] {
        assert!(!needs_new_producer(Some(code)), "{code:?}");
        assert_eq!(txn_error_action(false, Some(code)), TxnErrorAction::Fenced, "{code:?}");
    }
    // Anything else (an abortable error, a refused record, a lost connection): abort and retry.
    for code in [Some(C::State), Some(C::NotEnoughReplicas), Some(C::BrokerTransportFailure), None] {
        assert!(!needs_new_producer(code), "{code:?}");
        assert_eq!(txn_error_action(false, code), TxnErrorAction::AbortAndRetry, "{code:?}");
    }
}

#[test]
fn an_abort_refused_as_invalid_state_replaces_the_producer_but_a_fenced_one_stops() {
    use RDKafkaErrorCode as C;
    // librdkafka#4849: the abort raced the first AddPartitionsToTxn; a new producer ends it.
    assert!(abort_failure_needs_new_producer(Some(C::InvalidTransactionalState)));
    assert!(abort_failure_needs_new_producer(Some(C::RequestTimedOut)));
    // A fence must stop the data path: a new producer would fence the slot's new owner.
    for code in [Some(C::ProducerFenced), Some(C::InvalidProducerEpoch), Some(C::Fenced), None] {
        assert!(!abort_failure_needs_new_producer(code), "{code:?}");
    }
}

#[test]
fn slot_data_paths_share_the_mirror_prefetch_budget() {
    // One data path keeps what a mirror's single data path had.
    assert_eq!(prefetch_kbytes(1), 64 << 10);
    assert_eq!(prefetch_kbytes(4), 16 << 10);
    // Sixteen slots: 8 MiB each (the floor), 128 MiB for the mirror instead of 1 GiB.
    assert_eq!(prefetch_kbytes(16), 8 << 10);
    assert_eq!(prefetch_kbytes(64), 8 << 10);
    assert_eq!(prefetch_kbytes(0), 64 << 10);
}

#[test]
fn the_outcome_reader_sees_only_committed_records_and_the_end() {
    let config = PipeConfig {
        mirror: "m".into(),
        slot: 0,
        source_bootstrap: "src:9092".into(),
        source_properties: BTreeMap::new(),
        destination_bootstrap: "dst:9092".into(),
        destination_properties: BTreeMap::from([("security.protocol".to_string(), "SASL_SSL".to_string())]),
        transactional_id: "t".into(),
        commit_interval: Duration::from_millis(1000),
        early_commit_interval: Duration::from_millis(50),
        commit_max_bytes: 1 << 20,
        state_topic: "__mirror_state".into(),
        transaction_timeout: Duration::from_secs(10),
        prefetch_kbytes: prefetch_kbytes(1),
        throttle: Default::default(),
    };
    let cfg = outcome_consumer_config(&config).unwrap();
    assert_eq!(cfg.get("bootstrap.servers"), Some("dst:9092"));
    assert_eq!(cfg.get("security.protocol"), Some("SASL_SSL"));
    assert_eq!(cfg.get("isolation.level"), Some("read_committed"));
    assert_eq!(cfg.get("enable.partition.eof"), Some("true"));
    assert_eq!(cfg.get("enable.auto.commit"), Some("false"));
}

#[test]
fn consumer_tuning_defaults_yield_to_the_user_but_correctness_settings_do_not() {
    let config = |props: &[(&str, &str)]| PipeConfig {
        mirror: "m".into(),
        slot: 0,
        source_bootstrap: "src:9092".into(),
        source_properties: props.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        destination_bootstrap: "dst:9092".into(),
        destination_properties: BTreeMap::new(),
        transactional_id: "t".into(),
        commit_interval: Duration::from_millis(1000),
        early_commit_interval: Duration::from_millis(50),
        commit_max_bytes: 1 << 20,
        state_topic: "__mirror_state".into(),
        transaction_timeout: Duration::from_secs(10),
        prefetch_kbytes: prefetch_kbytes(1),
        throttle: Default::default(),
    };
    let defaults = consumer_config(&config(&[])).unwrap();
    assert_eq!(defaults.get("fetch.max.bytes"), Some("16777216"));
    assert_eq!(defaults.get("fetch.wait.max.ms"), Some("500"));
    assert_eq!(defaults.get("max.partition.fetch.bytes"), Some("8388608"));
    assert_eq!(defaults.get("socket.nagle.disable"), Some("true"));
    assert_eq!(defaults.get("bootstrap.servers"), Some("src:9092"));
    assert_eq!(defaults.get("isolation.level"), Some("read_committed"));
    assert_eq!(defaults.get("allow.auto.create.topics"), Some("false"));
    let user = consumer_config(&config(&[
        ("fetch.max.bytes", "1048576"),
        ("fetch.wait.max.ms", "50"),
        ("sasl.password", "hunter2-consumer"),
    ]))
    .unwrap();
    assert_eq!(user.get("fetch.max.bytes"), Some("1048576"));
    assert_eq!(user.get("fetch.wait.max.ms"), Some("50"));
    let alias = consumer_config(&config(&[("fetch.message.max.bytes", "1048576")])).unwrap();
    assert_eq!(alias.get("fetch.message.max.bytes"), Some("1048576"));
    assert_eq!(alias.get("max.partition.fetch.bytes"), None, "the user's alias wins, alone");
    // The secret itself, not rdkafka's config_map() placeholder.
    assert_eq!(user.get("sasl.password"), Some("hunter2-consumer"));
    // What correctness depends on cannot be set by the user at all.
    for fixed in ["isolation.level", "enable.auto.commit", "plugin.library.paths"] {
        let e = consumer_config(&config(&[(fixed, "x")])).unwrap_err().to_string();
        assert!(e.contains(fixed), "{e}");
    }
    let mut pc = config(&[]);
    pc.destination_properties = BTreeMap::from([("ssl.key.password".to_string(), "hunter2-producer".to_string())]);
    let producer = producer_config(&pc).unwrap();
    assert_eq!(producer.get("ssl.key.password"), Some("hunter2-producer"));
    assert_eq!(producer.get("transactional.id"), Some("t"));
    assert_eq!(producer.get("compression.type"), Some("lz4"));
    // The broker aborts a transaction open longer than this.
    assert_eq!(producer.get("transaction.timeout.ms"), Some("60000"));
    pc.destination_properties = BTreeMap::from([("compression.codec".to_string(), "none".to_string())]);
    let producer = producer_config(&pc).unwrap();
    assert_eq!(producer.get("compression.codec"), Some("none"));
    assert_eq!(producer.get("compression.type"), None, "the user's alias wins, alone");
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
fn after_an_abort_the_first_landing_may_follow_the_abort_marker_and_nothing_else() {
    assert!(landed_after_abort(100, 100)); // the marker was already there when read
    assert!(landed_after_abort(100, 101)); // the marker came after the read
    assert!(!landed_after_abort(100, 102)); // somebody else's record in between
    assert!(!landed_after_abort(100, 99)); // below the end: never ours
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
fn batch_codecs_map_to_librdkafka_names_and_unknown_ones_to_none() {
    let names: Vec<_> = (-1..=5).map(codec_name).collect();
    assert_eq!(names, [None, Some("none"), Some("gzip"), Some("snappy"), Some("lz4"), Some("zstd"), None]);
}

#[test]
fn a_codec_in_the_destination_properties_under_either_name_stops_following_the_source() {
    let props = |k: &str| BTreeMap::from([(k.to_string(), "zstd".to_string())]);
    assert!(sets_property(&props("compression.type"), "compression.type"));
    assert!(sets_property(&props("compression.codec"), "compression.type"));
    assert!(!sets_property(&props("compression.level"), "compression.type"));
    assert!(!sets_property(&BTreeMap::new(), "compression.type"));
}

#[test]
fn backoff_grows_and_is_capped() {
    // Between half and all of 200 ms doubling per attempt, at most 30 s.
    assert!(backoff(0) <= Duration::from_millis(200));
    assert!(backoff(3) >= Duration::from_millis(800));
    assert!(backoff(30) <= Duration::from_millis(30_000));
}

#[test]
fn a_waiting_data_path_is_woken_by_the_report_that_reaches_its_target() {
    let log = std::sync::Arc::new(DeliveryLog::default());
    // Reached already: no wait.
    log.reported(10);
    assert!(!log.wait_reported(10, Duration::from_secs(600)));
    assert_eq!(log.wake_at.load(Ordering::SeqCst), 0);
    // Not reached: the report of another thread that reaches the target wakes it.
    let (parked_tx, parked_rx) = std::sync::mpsc::channel();
    let waiter = {
        let log = log.clone();
        std::thread::spawn(move || {
            parked_tx.send(()).unwrap();
            let started = Instant::now();
            // As the data path does: a spurious return only means looking again.
            while log.reported_bytes.load(Ordering::SeqCst) < 100 {
                log.wait_reported(100, Duration::from_secs(600));
            }
            (started.elapsed(), log.reported_bytes.load(Ordering::SeqCst))
        })
    };
    parked_rx.recv().unwrap();
    log.reported(40);
    log.reported(50);
    let (waited, reported) = waiter.join().unwrap();
    assert_eq!(reported, 100);
    // A lost wake-up would park for the full 600 s.
    assert!(waited < Duration::from_secs(300), "woken by the timeout, not by the report: {waited:?}");
    assert_eq!(log.wake_at.load(Ordering::SeqCst), 0, "nobody waits any more");
}
