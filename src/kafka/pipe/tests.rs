use std::collections::BTreeMap;
use std::time::Duration;

use super::destination::codec_name;
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

/// A data path's settings for the client-settings tests; each test changes what it is about.
fn pipe_config() -> PipeConfig {
    PipeConfig {
        mirror: "m".into(),
        slot: 0,
        source_bootstrap: "src:9092".into(),
        source_properties: BTreeMap::new(),
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
        shared_source_consumer: None,
    }
}

#[test]
fn the_outcome_reader_sees_only_committed_records_and_the_end() {
    let config = PipeConfig {
        destination_properties: BTreeMap::from([("security.protocol".to_string(), "SASL_SSL".to_string())]),
        ..pipe_config()
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
        source_properties: props.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        ..pipe_config()
    };
    let defaults = consumer_config(&config(&[])).unwrap();
    assert_eq!(defaults.get("fetch.max.bytes"), Some("16777216"));
    assert_eq!(defaults.get("fetch.wait.max.ms"), Some("2000"));
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
fn transactional_errors_are_classified_by_code_and_fatality() {
    use RDKafkaErrorCode as C;
    for code in [C::OperationTimedOut, C::MessageTimedOut, C::RequestTimedOut, C::TimedOutQueue] {
        assert!(needs_new_producer(Some(code)), "{code:?}");
        assert_eq!(txn_error_kind(false, Some(code)), TxnErrorKind::TimedOut, "{code:?}");
    }
    // Fatal wins, timed out or not: re-initialising would fence the new owner back.
    assert_eq!(txn_error_kind(true, Some(C::OperationTimedOut)), TxnErrorKind::Fenced);
    assert_eq!(txn_error_kind(true, Some(C::InvalidTransactionalState)), TxnErrorKind::Fenced);
    for code in [C::ProducerFenced, C::InvalidProducerEpoch, C::Fenced] {
        assert!(!needs_new_producer(Some(code)), "{code:?}");
        assert_eq!(txn_error_kind(false, Some(code)), TxnErrorKind::Fenced, "{code:?}");
    }
    assert_eq!(txn_error_kind(false, Some(C::InvalidTransactionalState)), TxnErrorKind::InvalidState);
    for code in [Some(C::State), Some(C::NotEnoughReplicas), Some(C::BrokerTransportFailure), None] {
        assert!(!needs_new_producer(code), "{code:?}");
        assert_eq!(txn_error_kind(false, code), TxnErrorKind::Other, "{code:?}");
    }
}

#[test]
fn a_mirror_s_data_paths_share_one_source_consumer_and_keep_to_their_partitions() {
    use std::sync::Arc;

    use rdkafka::TopicPartitionList;
    use rdkafka::consumer::Consumer;

    use super::shared::SharedConsumer;

    // Nothing here talks to a broker: clients connect lazily and a manual assignment is local.
    let config = |mirror: &str, password: &str| PipeConfig {
        mirror: mirror.into(),
        source_bootstrap: "127.0.0.1:1".into(),
        source_properties: BTreeMap::from([("sasl.password".to_string(), password.to_string())]),
        prefetch_kbytes: prefetch_kbytes(16),
        shared_source_consumer: Some("c/i".into()),
        ..pipe_config()
    };
    let a = SharedConsumer::get(&config("shared-m", "p1")).unwrap();
    let a2 = SharedConsumer::get(&config("shared-m", "p1")).unwrap();
    assert!(Arc::ptr_eq(&a, &a2), "one consumer per mirror and source settings");
    let rotated = SharedConsumer::get(&config("shared-m", "p2")).unwrap();
    assert!(!Arc::ptr_eq(&a, &rotated), "changed source properties get their own consumer");
    let other_mirror = SharedConsumer::get(&config("shared-n", "p1")).unwrap();
    assert!(!Arc::ptr_eq(&a, &other_mirror));
    let mut other_engine_config = config("shared-m", "p1");
    other_engine_config.shared_source_consumer = Some("c/j".into());
    let other_engine = SharedConsumer::get(&other_engine_config).unwrap();
    assert!(!Arc::ptr_eq(&a, &other_engine), "another engine in the process has its own");

    let assign = |view: &super::shared::SlotView, keys: &[(&str, i32)]| {
        let mut tpl = TopicPartitionList::new();
        for (t, p) in keys {
            tpl.add_partition_offset(t, *p, rdkafka::Offset::Beginning).unwrap();
        }
        let keys: Vec<(String, i32)> = keys.iter().map(|(t, p)| (t.to_string(), *p)).collect();
        view.assign(&tpl, &keys).unwrap();
    };
    let key = |t: &str, p: i32| (t.to_string(), p);
    let assigned = |view: &super::shared::SlotView| {
        let mut all: Vec<(String, i32)> =
            view.consumer().assignment().unwrap().elements().iter().map(|e| key(e.topic(), e.partition())).collect();
        all.sort();
        all
    };
    let (slot0, slot1) = (a.view().unwrap(), a2.view().unwrap());
    assign(&slot0, &[("orders", 0), ("orders", 2)]);
    assign(&slot1, &[("orders", 1)]);
    assert_eq!(slot0.held(), vec![key("orders", 0), key("orders", 2)]);
    assert_eq!(slot1.held(), vec![key("orders", 1)]);
    assert_eq!(assigned(&slot0), vec![key("orders", 0), key("orders", 1), key("orders", 2)]);

    // A data path's release, or its end, touches only its own partitions.
    slot0.unassign(&[key("orders", 1), key("orders", 2)]);
    assert_eq!(slot0.held(), vec![key("orders", 0)]);
    assert_eq!(assigned(&slot1), vec![key("orders", 0), key("orders", 1)], "slot 1's partition stays assigned");

    // The data path that replaces another takes over what its predecessor still holds.
    let slot0_next = a.view().unwrap();
    assign(&slot0_next, &[("orders", 0), ("orders", 2)]);
    assert_eq!(slot0.held(), Vec::<(String, i32)>::new());
    drop(slot0);
    assert_eq!(assigned(&slot1), vec![key("orders", 0), key("orders", 1), key("orders", 2)]);
    assert_eq!(slot0_next.held(), vec![key("orders", 0), key("orders", 2)]);

    drop(slot0_next);
    assert_eq!(assigned(&slot1), vec![key("orders", 1)], "a data path's end releases its partitions");

    // The last user of a mirror's consumer closes it.
    let weak = Arc::downgrade(&a);
    drop((slot1, a, a2));
    assert!(weak.upgrade().is_none(), "closed with its last data path");
    assert!(!Arc::ptr_eq(&SharedConsumer::get(&config("shared-m", "p1")).unwrap(), &rotated));
    drop((rotated, other_mirror, other_engine));
}
