use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;

fn n16() -> NonZeroU32 {
    NonZeroU32::new(16).unwrap()
}

fn partition_state() -> PartitionStateValue {
    PartitionStateValue {
        mirror: "m".to_owned(),
        topic: "orders".to_owned(),
        topic_id: "T1".to_owned(),
        partition: 2,
        state: "STOPPED".to_owned(),
        state_epoch: 7,
        state_since: 1_000,
        updated_at: 1_001,
        previous_state: Some("STOPPING".to_owned()),
        position: Some(PositionValue { next_source_offset: 100, source_leader_epoch: 4, destination_end_offset: 39 }),
        error: None,
        retry_count: 0,
        next_retry_at: None,
        stop: Some(StopValue { last_mirrored_source_offset: Some(99), lme: 4, destination_stop_offset: 41 }),
        truncation: TruncationValue::None,
        written_by: None,
        command: None,
    }
}

fn offset_runs() -> OffsetRunsValue {
    OffsetRunsValue {
        mirror: "m".to_owned(),
        topic_id: "T1".to_owned(),
        partition: 2,
        new_lineage: false,
        runs: vec![RunValue(10, 41, 3), RunValue(15, 44, 1)],
        position: Some(PositionValue { next_source_offset: 16, source_leader_epoch: 4, destination_end_offset: 45 }),
    }
}

fn instance() -> InstanceValue {
    InstanceValue {
        instance: "kmirror-0".to_owned(),
        cluster_name: "eu-to-us".to_owned(),
        advertised_url: Some("http://kmirror-0:8080".to_owned()),
        version: "0.9.0".to_owned(),
        slots: vec![0, 3, 7],
        partitions: 42,
        heartbeat_at: 1_700_000_005_000,
        started_at: 1_700_000_000_000,
    }
}

/// One record of every kind, with values and as tombstones.
fn samples() -> Vec<StateRecord> {
    let mut properties = BTreeMap::new();
    properties.insert("security.protocol".to_owned(), "SASL_SSL".to_owned());
    properties.insert("client.id".to_owned(), "kmirror".to_owned());
    let mirror = MirrorValue {
        topic_include: Vec::new(),
        topic_exclude: None,
        name: "m".to_owned(),
        source: SourceClusterValue { bootstrap_servers: "a:9092,b:9092".to_owned(), properties },
        expected_source_cluster_id: Some("abc".to_owned()),
        created_at: 1,
        updated_at: 2,
        sync: SyncSettingsValue::default(),
        created_acls: Vec::new(),
        replication_throttle_bytes_per_sec: Some(5_242_880),
        approval: Some(ApprovalPolicyValue {
            required_for: vec!["delete".to_owned(), "stop".to_owned()],
            expires_after_seconds: 900,
        }),
    };
    let topic = MirrorTopicValue {
        mirror: "m".to_owned(),
        topic: "orders".to_owned(),
        source_topic_id: "T1".to_owned(),
        destination_topic_id: Some("D1".to_owned()),
        desired_state: DesiredStateValue::Paused,
        truncation: TruncationValue::Resync { quarantine: true },
        partition_count: 6,
        created_at: 1,
        updated_at: 3,
    };
    let lme = LastMirrorEpochsValue {
        topics: vec![LmeTopicValue {
            name: "orders".to_owned(),
            partitions: vec![LmePartitionValue { partition_index: 0, last_mirrored_epoch: 4 }],
        }],
    };
    let operation = OperationValue {
        id: "op-1".to_owned(),
        mirror: "m".to_owned(),
        kind: "stop".to_owned(),
        topics: vec!["orders".to_owned()],
        validate_only: false,
        requested_by: "alice".to_owned(),
        client_address: Some("10.0.0.1".to_owned()),
        requested_at: 5,
        finished_at: Some(6),
        results: vec![TopicResultValue {
            topic: "orders".to_owned(),
            outcome: "error".to_owned(),
            error_code: Some("DESTINATION_DIVERGED".to_owned()),
            message: Some("3 local records".to_owned()),
        }],
        accepted_by: None,
        results_omitted: Some(OmittedResultsValue { ok: 2, failed: 1 }),
        approval: Some(ApprovalValue {
            request_id: "op-1".to_owned(),
            action: "stop".to_owned(),
            status: "pending".to_owned(),
            reason: "planned DR test".to_owned(),
            requested_by: "alice".to_owned(),
            client_address: None,
            requested_at: 5,
            expires_at: 905,
            decided_by: None,
            decided_at: None,
            decision_reason: None,
            executed_operation_id: None,
            call: ApprovalCallValue { topics: vec!["orders".to_owned()], ..Default::default() },
        }),
    };
    let drill = DrillValue {
        id: "op-2".to_owned(),
        mirror: "m".to_owned(),
        status: "passed".to_owned(),
        requested_by: "alice".to_owned(),
        client_address: None,
        instance: "kmirror-0".to_owned(),
        requested_at: 7,
        finished_at: Some(9),
        canary_topic: "kmirror-drill.m".to_owned(),
        steps: vec![DrillStepValue {
            name: "produce".to_owned(),
            status: "done".to_owned(),
            started_at: Some(7),
            finished_at: Some(8),
            detail: Some("300 records".to_owned()),
        }],
        report: Some("{}".to_owned()),
    };
    let mirror_key = MirrorKey { mirror: "m".to_owned() };
    let state = partition_state();
    let runs = offset_runs();
    let instance = instance();
    vec![
        StateRecord::Mirror(Entry::put(mirror_key.clone(), mirror)),
        StateRecord::Mirror(Entry::tombstone(mirror_key.clone())),
        StateRecord::MirrorTopic(Entry::put(topic.key(), topic.clone())),
        StateRecord::MirrorTopic(Entry::tombstone(topic.key())),
        StateRecord::PartitionState(Entry::put(state.key(), state.clone())),
        StateRecord::PartitionState(Entry::tombstone(state.key())),
        StateRecord::LastMirrorEpochs(Entry::put(mirror_key.clone(), lme)),
        StateRecord::LastMirrorEpochs(Entry::tombstone(mirror_key)),
        StateRecord::Operation(Entry::put(operation.key(), operation.clone())),
        StateRecord::Operation(Entry::tombstone(operation.key())),
        StateRecord::OffsetRuns(Entry::put(runs.key().unwrap(), runs.clone())),
        StateRecord::OffsetRuns(Entry::tombstone(runs.key().unwrap())),
        StateRecord::Instance(Entry::put(instance.key(), instance.clone())),
        StateRecord::Instance(Entry::tombstone(instance.key())),
        StateRecord::Drill(Entry::put(drill.key(), drill.clone())),
        StateRecord::Drill(Entry::tombstone(drill.key())),
    ]
}

fn text(bytes: &[u8]) -> &str {
    std::str::from_utf8(bytes).unwrap()
}

#[test]
fn the_canonical_form_is_fixed() {
    let state = partition_state();
    let e = StateRecord::PartitionState(Entry::put(state.key(), state)).encode(n16());
    assert_eq!(
        text(&e.key),
        r#"{"type":"MirrorPartitionState","version":0,"mirror":"m","topic_id":"T1","partition":2}"#
    );
    assert_eq!(
        text(e.value.as_deref().unwrap()),
        concat!(
            r#"{"type":"MirrorPartitionState","version":0,"mirror":"m","topic":"orders","topic_id":"T1","#,
            r#""partition":2,"state":"STOPPED","state_epoch":7,"state_since":1000,"updated_at":1001,"#,
            r#""previous_state":"STOPPING","position":{"next_source_offset":100,"source_leader_epoch":4,"#,
            r#""destination_end_offset":39},"error":null,"retry_count":0,"next_retry_at":null,"#,
            r#""stop":{"last_mirrored_source_offset":99,"lme":4,"destination_stop_offset":41},"#,
            r#""truncation":{"mode":"none"}}"#
        )
    );

    let runs = offset_runs();
    let e = StateRecord::OffsetRuns(Entry::put(runs.key().unwrap(), runs)).encode(n16());
    assert_eq!(
        text(&e.key),
        r#"{"type":"OffsetRuns","version":0,"mirror":"m","topic_id":"T1","partition":2,"first_destination_offset":41}"#
    );
    assert_eq!(
        text(e.value.as_deref().unwrap()),
        concat!(
            r#"{"type":"OffsetRuns","version":0,"mirror":"m","topic_id":"T1","partition":2,"new_lineage":false,"#,
            r#""runs":[[10,41,3],[15,44,1]],"position":{"next_source_offset":16,"source_leader_epoch":4,"#,
            r#""destination_end_offset":45}}"#
        )
    );

    let lme = &samples()[6];
    let e = lme.encode(n16());
    assert_eq!(text(&e.key), r#"{"type":"LastMirrorEpochs","version":0,"mirror":"m"}"#);
    assert_eq!(
        text(e.value.as_deref().unwrap()),
        r#"{"type":"LastMirrorEpochs","version":0,"topics":[{"name":"orders","partitions":[{"partition_index":0,"last_mirrored_epoch":4}]}]}"#
    );
    // Maps are sorted, so property order never changes the bytes.
    let mirror = samples()[0].encode(n16());
    let value = text(mirror.value.as_deref().unwrap());
    assert!(value.contains(r#""properties":{"client.id":"kmirror","security.protocol":"SASL_SSL"}"#), "{value}");
}

#[test]
fn every_kind_round_trips_byte_for_byte() {
    for record in samples() {
        let e = record.encode(n16());
        let decoded = decode(Some(&e.key), e.value.as_deref()).unwrap();
        assert_eq!(decoded, record);
        assert_eq!(decoded.encode(n16()), e);
        assert_eq!(decoded.kind(), record.kind());
        assert_eq!(decoded.is_tombstone(), e.value.is_none());
        let owner = if record.kind() == RecordKind::Instance { "kmirror-0" } else { "m" };
        assert_eq!(decoded.mirror(), owner);
    }
    let kinds: std::collections::BTreeSet<RecordKind> = samples().iter().map(StateRecord::kind).collect();
    assert_eq!(kinds.len(), RecordKind::ALL.len(), "a sample of every kind");
}

#[test]
fn instance_records_have_a_fixed_form_and_go_to_the_instances_partition() {
    let value = instance();
    let record = StateRecord::Instance(Entry::put(value.key(), value));
    let e = record.encode(n16());
    assert_eq!(text(&e.key), r#"{"type":"Instance","version":1,"instance":"kmirror-0"}"#);
    assert_eq!(
        text(e.value.as_deref().unwrap()),
        concat!(
            r#"{"type":"Instance","version":1,"instance":"kmirror-0","cluster_name":"eu-to-us","#,
            r#""advertised_url":"http://kmirror-0:8080","kmirror_version":"0.9.0","slots":[0,3,7],"partitions":42,"#,
            r#""heartbeat_at":1700000005000,"started_at":1700000000000}"#
        )
    );
    assert_eq!(e.partition, mirror_partition("kmirror-0", n16()));
    assert_eq!(record.state_partition(n16()), mirror_partition("kmirror-0", n16()));
    let tombstone = StateRecord::Instance(Entry::tombstone(InstanceKey { instance: "kmirror-0".to_owned() }));
    assert_eq!(tombstone.encode(n16()).partition, e.partition);
    assert_eq!(tombstone.encode(n16()).value, None);

    // No advertised URL is written as null, and reads back as None.
    let mut bare = instance();
    bare.advertised_url = None;
    let e = StateRecord::Instance(Entry::put(bare.key(), bare.clone())).encode(n16());
    assert!(text(e.value.as_deref().unwrap()).contains(r#""advertised_url":null"#));
    let StateRecord::Instance(entry) = decode(Some(&e.key), e.value.as_deref()).unwrap() else { panic!() };
    assert_eq!(entry.value, Some(bare));
}

#[test]
fn instance_records_are_checked_against_their_key_and_version() {
    let key = br#"{"type":"Instance","version":1,"instance":"kmirror-0"}"#;
    let mut other = instance();
    other.instance = "kmirror-1".to_owned();
    let value = serde_json::to_vec(&Envelope { kind: "Instance", version: 1, body: &other }).unwrap();
    let e = decode_error(key, Some(&value));
    assert_eq!(
        e.to_string(),
        r#"Instance record value does not match its key: instance is "kmirror-0" in the key but "kmirror-1" in the value"#
    );
    let e = decode_error(key, Some(br#"{"type":"Mirror","version":0,"name":"kmirror-0"}"#));
    assert!(matches!(e, DecodeError::KeyValueMismatch { kind: RecordKind::Instance, .. }), "{e}");

    let e = decode_error(br#"{"type":"Instance","version":0,"instance":"kmirror-0"}"#, None);
    assert_eq!(
        e,
        DecodeError::UnknownVersion { part: Part::Key, kind: RecordKind::Instance, version: 0, supported: 1 }
    );
    let e = decode_error(key, Some(br#"{"type":"Instance","version":2,"instance":"kmirror-0"}"#));
    assert!(matches!(e, DecodeError::UnknownVersion { part: Part::Value, version: 2, supported: 1, .. }), "{e}");

    let mut hostile = instance();
    hostile.slots = vec![0, -1];
    let record = StateRecord::Instance(Entry::put(hostile.key(), hostile));
    assert_eq!(out_of_bounds(&record), ("slot", -1, i64::from(MAX_PARTITION_COUNT) - 1));

    // A tombstone decodes to a tombstone.
    assert_eq!(
        decode(Some(key), None),
        Ok(StateRecord::Instance(Entry::tombstone(InstanceKey { instance: "kmirror-0".to_owned() })))
    );
}

#[test]
fn decoding_ignores_member_order_and_unknown_members() {
    let key = br#"{"partition":2,"topic_id":"T1","mirror":"m","version":0,"type":"MirrorPartitionState","extra":1}"#;
    let StateRecord::PartitionState(entry) = decode(Some(key), None).unwrap() else { panic!("wrong kind") };
    assert_eq!(entry.key, PartitionKey::new("m", "T1", 2));
    // Sync settings may gain fields; missing ones take their defaults.
    let value = br#"{"type":"Mirror","version":0,"name":"m","source":{"bootstrap_servers":"a:1","properties":{}},
        "expected_source_cluster_id":null,"created_at":1,"updated_at":1,"sync":{"acls":false}}"#;
    let StateRecord::Mirror(entry) =
        decode(Some(br#"{"type":"Mirror","version":0,"mirror":"m"}"#), Some(value)).unwrap()
    else {
        panic!("wrong kind")
    };
    let sync = entry.value.unwrap().sync;
    assert!(!sync.acls);
    assert!(sync.topic_configs);
}

/// ACL bindings written before the canonical form held the kinds' `Debug` text; they load,
/// and are written back in the lowercase form. An unknown name spoils only its binding.
#[test]
fn old_debug_text_acl_records_load_and_are_written_canonically() {
    let old = br#"{"type":"Mirror","version":0,"name":"m","source":{"bootstrap_servers":"a:1","properties":{}},
        "expected_source_cluster_id":null,"created_at":1,"updated_at":1,"created_acls":[
        {"resource_type":"Topic","name":"orders","pattern_type":"Literal","principal":"User:alice","host":"*",
         "operation":"DescribeConfigs","permission":"Allow"},
        {"resource_type":"TransactionalId","name":"tx","pattern_type":"Prefixed","principal":"User:bob",
         "host":"10.0.0.1","operation":"IdempotentWrite","permission":"Deny"},
        {"resource_type":"DelegationToken","name":"x","pattern_type":"Match","principal":"User:c","host":"*",
         "operation":"Any","permission":"Any"}]}"#;
    let key = br#"{"type":"Mirror","version":0,"mirror":"m"}"#;
    let StateRecord::Mirror(entry) = decode(Some(key), Some(old)).unwrap() else { panic!("wrong kind") };
    let value = entry.value.clone().unwrap();
    let expected = [
        AclBindingValue {
            resource_type: AclResourceTypeValue::Topic,
            name: "orders".to_owned(),
            pattern_type: AclPatternTypeValue::Literal,
            principal: "User:alice".to_owned(),
            host: "*".to_owned(),
            operation: AclOperationValue::DescribeConfigs,
            permission: AclPermissionValue::Allow,
        },
        AclBindingValue {
            resource_type: AclResourceTypeValue::TransactionalId,
            name: "tx".to_owned(),
            pattern_type: AclPatternTypeValue::Prefixed,
            principal: "User:bob".to_owned(),
            host: "10.0.0.1".to_owned(),
            operation: AclOperationValue::IdempotentWrite,
            permission: AclPermissionValue::Deny,
        },
        AclBindingValue {
            resource_type: AclResourceTypeValue::Unknown,
            name: "x".to_owned(),
            pattern_type: AclPatternTypeValue::Unknown,
            principal: "User:c".to_owned(),
            host: "*".to_owned(),
            operation: AclOperationValue::Unknown,
            permission: AclPermissionValue::Unknown,
        },
    ];
    assert_eq!(value.created_acls, expected);
    let written = String::from_utf8(StateRecord::Mirror(entry).encode(n16()).value.unwrap()).unwrap();
    assert!(
        written.contains(
            r#"{"resource_type":"topic","name":"orders","pattern_type":"literal","principal":"User:alice","host":"*","operation":"describe_configs","permission":"allow"}"#
        ),
        "{written}"
    );
    assert!(written.contains(r#""resource_type":"transactional_id""#), "{written}");
    assert!(written.contains(r#""operation":"idempotent_write","permission":"deny""#), "{written}");
    for debug_text in ["\"Topic\"", "\"Literal\"", "\"DescribeConfigs\"", "\"Allow\""] {
        assert!(!written.contains(debug_text), "{debug_text} in {written}");
    }
}

#[test]
fn partition_level_records_of_one_partition_share_a_state_partition() {
    let records = samples();
    let state = records[4].state_partition(n16());
    assert_eq!(records[10].state_partition(n16()), state);
    assert_eq!(state, state_partition("m", "T1", 2, n16()));
    for mirror_level in [&records[0], &records[2], &records[6], &records[8]] {
        assert_eq!(mirror_level.state_partition(n16()), mirror_partition("m", n16()));
    }
}

fn decode_error(key: &[u8], value: Option<&[u8]>) -> DecodeError {
    decode(Some(key), value).unwrap_err()
}

#[test]
fn decode_errors_are_distinguished_and_readable() {
    let mirror_key: &[u8] = br#"{"type":"Mirror","version":0,"mirror":"m"}"#;
    assert_eq!(decode(None, Some(b"{}")), Err(DecodeError::MissingKey));

    let e = decode_error(b"not json", None);
    assert!(matches!(e, DecodeError::Malformed { part: Part::Key, kind: None, .. }));
    assert!(e.to_string().starts_with("malformed state record key: expected ident"), "{e}");

    let e = decode_error(br#"{"type":"Mirror","version":0}"#, None);
    assert_eq!(e.to_string(), "malformed state record key (Mirror): missing field `mirror` at line 1 column 29");

    let e = decode_error(br#"{"type":"Shadow","version":0}"#, None);
    assert_eq!(e, DecodeError::UnknownType { part: Part::Key, type_name: "Shadow".to_owned() });
    assert_eq!(e.to_string(), r#"state record key has unknown type "Shadow" (written by a newer kmirror?)"#);

    let e = decode_error(br#"{"type":"Mirror","version":2,"mirror":"m"}"#, None);
    assert_eq!(e, DecodeError::UnknownVersion { part: Part::Key, kind: RecordKind::Mirror, version: 2, supported: 0 });

    let e = decode_error(mirror_key, Some(br#"{"type":"Mirror","version":1}"#));
    assert!(matches!(e, DecodeError::UnknownVersion { part: Part::Value, version: 1, .. }));

    let e = decode_error(mirror_key, Some(br#"{"type":"MirrorTopic","version":0}"#));
    assert_eq!(e.to_string(), r#"Mirror record value does not match its key: the value's type is "MirrorTopic""#);

    let e = decode_error(mirror_key, Some(br#"{"type":"Banana","version":0}"#));
    assert!(matches!(e, DecodeError::KeyValueMismatch { .. }));

    let mut other = partition_state();
    other.partition = 3;
    let value = serde_json::to_vec(&Envelope { kind: "MirrorPartitionState", version: 0, body: &other }).unwrap();
    let key = br#"{"type":"MirrorPartitionState","version":0,"mirror":"m","topic_id":"T1","partition":2}"#;
    let e = decode_error(key, Some(&value));
    assert_eq!(
        e.to_string(),
        "MirrorPartitionState record value does not match its key: partition is 2 in the key but 3 in the value"
    );

    let e = decode_error(mirror_key, Some(br#"{"type":"Mirror","version":0,"name":"m"}"#));
    assert!(matches!(e, DecodeError::Malformed { part: Part::Value, kind: Some(RecordKind::Mirror), .. }));
}

#[test]
fn offset_runs_must_start_at_the_keys_offset() {
    let key = br#"{"type":"OffsetRuns","version":0,"mirror":"m","topic_id":"T1","partition":2,"first_destination_offset":40}"#;
    let mut runs = offset_runs();
    let value = serde_json::to_vec(&Envelope { kind: "OffsetRuns", version: 0, body: &runs }).unwrap();
    assert!(matches!(decode_error(key, Some(&value)), DecodeError::KeyValueMismatch { .. }));
    runs.runs.clear();
    let value = serde_json::to_vec(&Envelope { kind: "OffsetRuns", version: 0, body: &runs }).unwrap();
    assert_eq!(
        decode_error(key, Some(&value)),
        DecodeError::Invalid { kind: RecordKind::OffsetRuns, detail: "no runs".to_owned() }
    );
    assert_eq!(runs.key(), None);
}

#[test]
fn last_mirror_epochs_merge_per_topic_and_stay_sorted() {
    let mut lme = LastMirrorEpochsValue::default();
    lme.set_epochs("orders", [(1, 4), (0, 3)]);
    lme.set_epochs("audit", [(0, 1)]);
    lme.set_epochs("orders", [(1, 5), (2, 2)]);
    assert_eq!(lme.epoch("orders", 0), Some(3));
    assert_eq!(lme.epoch("orders", 1), Some(5));
    assert_eq!(lme.epoch("orders", 9), None);
    assert_eq!(lme.epoch("audit", 0), Some(1));
    let names: Vec<&str> = lme.topics.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["audit", "orders"]);
    let indexes: Vec<i32> = lme.topics[1].partitions.iter().map(|p| p.partition_index).collect();
    assert_eq!(indexes, [0, 1, 2]);
    assert!(lme.remove_topic("audit"));
    assert!(!lme.remove_topic("audit"));
    assert_eq!(lme.epoch("audit", 0), None);
}

#[test]
fn debug_redacts_secret_looking_properties() {
    let mut properties = BTreeMap::new();
    properties.insert("sasl.password".to_owned(), "hunter2".to_owned());
    properties.insert("ssl.key.pem".to_owned(), "-----BEGIN".to_owned());
    properties.insert("sasl.mechanism".to_owned(), "PLAIN".to_owned());
    let source = SourceClusterValue { bootstrap_servers: "a:1".to_owned(), properties };
    let debug = format!("{source:?}");
    assert!(!debug.contains("hunter2") && !debug.contains("BEGIN"), "{debug}");
    assert!(debug.contains("PLAIN"), "{debug}");
}

#[test]
fn unknown_type_names_are_shortened() {
    let long = "x".repeat(1_000);
    let key = format!(r#"{{"type":"{long}","version":0}}"#);
    let DecodeError::UnknownType { type_name, .. } = decode_error(key.as_bytes(), None) else { panic!() };
    assert_eq!(type_name.len(), 64);
}

fn encoded_samples() -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
    samples()
        .iter()
        .map(|record| {
            let e = record.encode(n16());
            (e.key, e.value)
        })
        .collect()
}

/// Encodes a value as written (encoding does not check bounds) and decodes it back.
fn reread(record: &StateRecord) -> Result<StateRecord, DecodeError> {
    let e = record.encode(n16());
    decode(Some(&e.key), e.value.as_deref())
}

fn out_of_bounds(record: &StateRecord) -> (&'static str, i64, i64) {
    match reread(record) {
        Err(DecodeError::OutOfBounds { field, value, max, .. }) => (field, value, max),
        other => panic!("expected OutOfBounds, got {other:?}"),
    }
}

fn topic_with(partition_count: i32) -> StateRecord {
    let value = MirrorTopicValue {
        mirror: "m".to_owned(),
        topic: "orders".to_owned(),
        source_topic_id: "T1".to_owned(),
        destination_topic_id: None,
        desired_state: DesiredStateValue::Mirroring,
        truncation: TruncationValue::None,
        partition_count,
        created_at: 1,
        updated_at: 1,
    };
    StateRecord::MirrorTopic(Entry::put(value.key(), value))
}

#[test]
fn a_hostile_partition_count_or_index_is_reported_not_acted_on() {
    let max = i64::from(MAX_PARTITION_COUNT);
    // Loading creates a partition for each of 0..partition_count: 2^31 - 1 must never get there.
    assert_eq!(out_of_bounds(&topic_with(i32::MAX)), ("partition_count", i64::from(i32::MAX), max));
    assert_eq!(out_of_bounds(&topic_with(-1)), ("partition_count", -1, max));
    assert_eq!(
        reread(&topic_with(i32::MAX)).unwrap_err().to_string(),
        format!("invalid MirrorTopic record: partition_count is 2147483647, outside 0..={max}")
    );
    assert!(reread(&topic_with(MAX_PARTITION_COUNT)).is_ok(), "the cap itself is allowed");

    let mut state = partition_state();
    state.partition = MAX_PARTITION_COUNT;
    let record = StateRecord::PartitionState(Entry::put(state.key(), state));
    assert_eq!(out_of_bounds(&record), ("partition", max, max - 1));
    let mut runs = offset_runs();
    runs.partition = -3;
    let record = StateRecord::OffsetRuns(Entry::put(runs.key().unwrap(), runs));
    assert_eq!(out_of_bounds(&record), ("partition", -3, max - 1));

    let lme = |partition_index| {
        let value = LastMirrorEpochsValue {
            topics: vec![LmeTopicValue {
                name: "orders".to_owned(),
                partitions: vec![LmePartitionValue { partition_index, last_mirrored_epoch: 1 }],
            }],
        };
        StateRecord::LastMirrorEpochs(Entry::put(MirrorKey { mirror: "m".to_owned() }, value))
    };
    assert_eq!(out_of_bounds(&lme(i32::MIN)), ("partition_index", i64::from(i32::MIN), max - 1));
    assert!(reread(&lme(MAX_PARTITION_COUNT - 1)).is_ok());
}

#[test]
fn lists_above_the_cap_are_reported_not_kept() {
    let max = MAX_RECORD_LIST_LEN as i64;
    let mut runs = offset_runs();
    runs.runs = (0..=MAX_RECORD_LIST_LEN as i64).map(|i| RunValue(2 * i, 41 + i, 1)).collect();
    let record = StateRecord::OffsetRuns(Entry::put(runs.key().unwrap(), runs));
    assert_eq!(out_of_bounds(&record), ("runs", max + 1, max));

    // One entry per partition: a LastMirrorEpochs topic longer than a topic can be.
    let partitions = (0..=MAX_PARTITION_COUNT)
        .map(|p| LmePartitionValue { partition_index: p.min(MAX_PARTITION_COUNT - 1), last_mirrored_epoch: 0 })
        .collect();
    let value = LastMirrorEpochsValue { topics: vec![LmeTopicValue { name: "orders".to_owned(), partitions }] };
    let record = StateRecord::LastMirrorEpochs(Entry::put(MirrorKey { mirror: "m".to_owned() }, value));
    let max_partitions = i64::from(MAX_PARTITION_COUNT);
    assert_eq!(out_of_bounds(&record), ("partitions", max_partitions + 1, max_partitions));

    let Some(StateRecord::Operation(Entry { value: Some(mut operation), .. })) =
        samples().into_iter().find(|r| matches!(r, StateRecord::Operation(Entry { value: Some(_), .. })))
    else {
        panic!("an operation sample")
    };
    operation.topics = vec![String::new(); MAX_RECORD_LIST_LEN + 1];
    let record = StateRecord::Operation(Entry::put(operation.key(), operation));
    assert_eq!(out_of_bounds(&record), ("topics", max + 1, max));
}

proptest! {
    #[test]
    fn decode_never_panics_on_random_bytes(
        key in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..200)),
        value in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..200)),
    ) {
        let _ = decode(key.as_deref(), value.as_deref());
    }

    #[test]
    fn decode_never_panics_on_mutated_records(
        sample in 0_usize..16,
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>(), any::<bool>()), 1..6),
    ) {
        let (mut key, mut value) = encoded_samples().swap_remove(sample);
        for (index, byte, in_key) in flips {
            let target = if in_key { &mut key } else { value.get_or_insert_with(Vec::new) };
            if target.is_empty() {
                target.push(byte);
            } else {
                let i = index.index(target.len());
                target[i] = byte;
            }
        }
        if let Ok(record) = decode(Some(&key), value.as_deref()) {
            // Whatever still decodes re-encodes to something that decodes to the same record.
            let e = record.encode(n16());
            prop_assert_eq!(decode(Some(&e.key), e.value.as_deref()), Ok(record));
        }
    }

    #[test]
    fn partition_states_round_trip(
        mirror in ".{0,20}",
        topic_id in "[A-Za-z0-9_-]{0,22}",
        partition in 0..MAX_PARTITION_COUNT,
        state_epoch in any::<u64>(),
        next in any::<i64>(),
        message in proptest::option::of(".{0,40}"),
    ) {
        let mut value = partition_state();
        value.mirror = mirror;
        value.topic_id = topic_id;
        value.partition = partition;
        value.state_epoch = state_epoch;
        value.position = Some(PositionValue { next_source_offset: next, source_leader_epoch: -1, destination_end_offset: 0 });
        value.error = message.map(|message| ErrorValue { code: "TIMEOUT".to_owned(), message, retryable: true, since: 0 });
        let record = StateRecord::PartitionState(Entry::put(value.key(), value));
        let e = record.encode(n16());
        prop_assert_eq!(decode(Some(&e.key), e.value.as_deref()), Ok(record));
    }
}
