//! The dashboard: render tests from constructed snapshots (insta snapshots of the main views,
//! escaping of every untrusted field, 10,000 partitions), and route tests through the real
//! server (`kmirror::app::serve` on 127.0.0.1:0 with a real engine on the rig): sign-in, cookie
//! flags, CSRF, roles, pages without JavaScript, htmx fragments and static files.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kmirror::app::AppState;
use kmirror::auth::{Identity, Role, TokenEntry, TokenStore};
use kmirror::domain::{PartitionState, Timestamp};
use kmirror::engine::{
    ClusterIdStatus, ClusterSnapshot, DataPathStatus, EngineHandle, GroupSyncView, InstanceSnapshot, LifecycleOp,
    MirrorSnapshot, OperationKind, OperationView, PartitionErrorView, PartitionSnapshot, Problem, ProblemKind,
    Snapshot, SyncKind, SyncStatus, TopicOutcome, TopicSnapshot, Truncation,
};
use kmirror::history::{History, HistoryConfig};
use kmirror::ui::pages::{self, Part};
use kmirror::ui::view::UiOp;
use kmirror::ui::{Params, Viewer};

use crate::engine::TestEngine;
use crate::support::*;

// ----- fixtures -------------------------------------------------------------------------------

const NOW: i64 = 1_790_000_000_000;

fn now() -> Timestamp {
    Timestamp::from_millis(NOW)
}

fn viewer(role: Role) -> Viewer {
    Viewer::new(&Identity { name: format!("alice-{}", role.as_str()), role }, "csrf-test-token", false)
}

fn partition(topic: &str, p: i32, state: PartitionState, lag: i64) -> PartitionSnapshot {
    let mirrored = 10_000 + i64::from(p) * 10;
    PartitionSnapshot {
        failed_in: None,
        resync_pending: false,
        idle: false,
        topic: topic.to_string(),
        partition: p,
        state,
        state_since: Timestamp::from_millis(NOW - 65_000 - i64::from(p) * 1_000),
        state_epoch: 3,
        source_log_start_offset: Some(0),
        source_last_stable_offset: Some(mirrored + lag),
        source_high_watermark: Some(mirrored + lag + 2),
        mirrored_source_offset: Some(mirrored),
        destination_high_watermark: Some(mirrored + 1),
        lag_records: lag,
        lag_seconds: if lag > 0 { lag as f64 / 10.0 } else { 0.0 },
        last_mirrored_epoch: Some(4),
        error: None,
        retry_count: 0,
        next_retry_at: None,
        records_mirrored: 1_000,
        bytes_mirrored: 64_000,
        destination_stop_offset: (state == PartitionState::Stopped).then_some(mirrored - 5),
        local_writes: if state == PartitionState::Stopped { 6 } else { 0 },
        source_writes_after_stop: (state == PartitionState::Stopped).then_some(0),
        slot: 0,
        owner: None,
    }
}

fn topic(name: &str, parts: Vec<PartitionSnapshot>) -> TopicSnapshot {
    TopicSnapshot {
        name: name.to_string(),
        state: kmirror::domain::roll_up(parts.iter().map(|p| p.state)),
        source_topic_id: format!("src-{name}"),
        destination_topic_id: format!("dst-{name}"),
        lag_records: parts.iter().map(|p| p.lag_records).sum(),
        lag_seconds: parts.iter().map(|p| p.lag_seconds).fold(0.0, f64::max),
        partitions: parts,
        failback_mirror: None,
    }
}

fn sync_ok(kind: SyncKind) -> SyncStatus {
    SyncStatus {
        last_attempt_at: Some(Timestamp::from_millis(NOW - 20_000)),
        last_success_at: Some(Timestamp::from_millis(NOW - 20_000)),
        last_applied: 3,
        ..SyncStatus::new(kind)
    }
}

fn mirror(name: &str, topics: Vec<TopicSnapshot>) -> MirrorSnapshot {
    MirrorSnapshot {
        topic_include: Vec::new(),
        topic_exclude: kmirror::domain::topic_policy::default_exclude(),
        discovery: Default::default(),
        name: name.to_string(),
        source_bootstrap_servers: "eu-kafka-1:9092,eu-kafka-2:9092".into(),
        source_properties: BTreeMap::from([
            ("security.protocol".to_string(), "SASL_SSL".to_string()),
            ("sasl.password".to_string(), "hunter2".to_string()),
        ]),
        expected_source_cluster_id: Some("EEB8QEn5XPmjX3cKvknOpQ".into()),
        sync_spec: Default::default(),
        observed_source_cluster_id: Some("EEB8QEn5XPmjX3cKvknOpQ".into()),
        cluster_id_status: ClusterIdStatus::Ok,
        cluster_id_checked_at: Some(Timestamp::from_millis(NOW - 12_000)),
        cluster_id_error: None,
        data_path: DataPathStatus::Running,
        replication_throttle_bytes_per_sec: None,
        throttled_seconds: 0.0,
        created_at: Timestamp::from_millis(NOW - 86_400_000),
        sync: SyncKind::ALL.iter().map(|k| sync_ok(*k)).collect(),
        groups: vec![
            GroupSyncView {
                group: "billing-service".into(),
                last_attempt_at: Timestamp::from_millis(NOW - 20_000),
                last_success_at: Some(Timestamp::from_millis(NOW - 20_000)),
                last_error: None,
                partitions_synced: 6,
                topics: vec!["orders".into()],
                partitions_committed: 6,
                partitions_in_sync: 6,
                partitions_not_translated: 0,
            },
            GroupSyncView {
                group: "fraud-scoring".into(),
                last_attempt_at: Timestamp::from_millis(NOW - 20_000),
                last_success_at: None,
                last_error: Some("group is active on the destination: offsets are not overwritten".into()),
                partitions_synced: 0,
                topics: vec!["orders".into(), "payments".into()],
                partitions_committed: 9,
                partitions_in_sync: 0,
                partitions_not_translated: 0,
            },
        ],
        topics,
        approval: Default::default(),
    }
}

fn instance(id: &str, slots: std::ops::Range<i32>, heartbeat_ago_ms: i64) -> InstanceSnapshot {
    InstanceSnapshot {
        id: id.to_string(),
        advertised_url: Some(format!("http://{id}.kmirror:8080")),
        version: "0.9.0".into(),
        partitions: 2 * slots.len() as u64,
        slots: slots.collect(),
        last_heartbeat: Timestamp::from_millis(NOW - heartbeat_ago_ms),
        started_at: Timestamp::from_millis(NOW - 3_600_000),
        this: false,
    }
}

/// Three instances sharing 16 slots in a group, the page served by `kmirror-1`: `kmirror-0`
/// advertises its URL, `kmirror-1` (this one) does not, `kmirror-2` runs an older version, its
/// heartbeat is late and its advertised URL is not a web URL; slot 15 has no owner.
fn cluster() -> ClusterSnapshot {
    let mut this = instance("kmirror-1", 6..12, 800);
    this.this = true;
    this.advertised_url = None;
    let mut old = instance("kmirror-2", 12..15, 14_000);
    old.version = "0.8.2".into();
    old.advertised_url = Some("javascript:alert(1)".into());
    ClusterSnapshot {
        cluster_name: "prod-eu".into(),
        mode: "group".into(),
        this_instance: "kmirror-1".into(),
        slots: 16,
        instances: vec![this, instance("kmirror-0", 0..6, 2_300), old],
        rebalances: 3,
    }
}

/// Gives every partition a slot (by topic name and partition) and the slot's owner.
fn place(mut snap: Snapshot) -> Snapshot {
    let cluster = snap.cluster.clone();
    for p in snap.mirrors.iter_mut().flat_map(|m| &mut m.topics).flat_map(|t| &mut t.partitions) {
        p.slot = (p.topic.len() as i32 + p.partition * 5) % cluster.slots.max(1);
        p.owner = cluster.owner_of(p.slot).map(|i| i.id.clone());
    }
    snap
}

/// Two mirrors: a healthy one with mixed states and lag, and one whose source cluster ID changed.
fn snapshot() -> Snapshot {
    let orders =
        topic("orders", (0..6).map(|p| partition("orders", p, PartitionState::Mirroring, p64(p) * 7)).collect());
    let mut payments_parts: Vec<PartitionSnapshot> =
        (0..3).map(|p| partition("payments", p, PartitionState::Paused, 1_200 + p64(p))).collect();
    payments_parts[2].state = PartitionState::Pausing;
    let payments = topic("payments", payments_parts);
    let stopped = topic("audit.log", (0..2).map(|p| partition("audit.log", p, PartitionState::Stopped, 0)).collect());
    let mut failed_parts: Vec<PartitionSnapshot> =
        (0..2).map(|p| partition("clicks", p, PartitionState::Mirroring, 0)).collect();
    failed_parts[1].state = PartitionState::Failed;
    failed_parts[1].retry_count = 4;
    failed_parts[1].error = Some(PartitionErrorView {
        code: "SOURCE_TOPIC_RECREATED".into(),
        message: "the source topic ID changed from abc to def".into(),
        retryable: false,
        recoverable: true,
    });
    let clicks = topic("clicks", failed_parts);
    let healthy = mirror("eu-west", vec![orders, payments, stopped, clicks]);

    let mut broken =
        mirror("us-east", vec![topic("metrics", vec![partition("metrics", 0, PartitionState::Failed, 90)])]);
    broken.cluster_id_status = ClusterIdStatus::Mismatch;
    broken.observed_source_cluster_id = Some("ZZZZQEn5XPmjX3cKvkn000".into());
    broken.cluster_id_error = Some("the source cluster ID changed: mirroring is halted".into());
    broken.data_path = DataPathStatus::Failed { message: "halted: source cluster ID mismatch".into() };
    broken.sync[1].consecutive_failures = 3;
    broken.sync[1].last_error = Some("GroupAuthorizationFailed: not authorized to describe groups".into());
    broken.sync[2].supported = false;
    place(Snapshot {
        taken_at: Timestamp::from_millis(NOW - 800),
        destination_cluster_id: "rurTmx9dW7WWA6KnPM7ubQ".into(),
        destination_brokers: Vec::new(),
        mirrors: vec![healthy, broken],
        cluster: cluster(),
        ..Default::default()
    })
}

fn p64(p: i32) -> i64 {
    i64::from(p)
}

fn operations() -> Vec<OperationView> {
    vec![
        OperationView {
            id: "op-000002".into(),
            mirror: "eu-west".into(),
            kind: OperationKind::Pause,
            topics: vec!["payments".into(), "clicks".into()],
            requested_by: "alice".into(),
            client_address: Some("10.0.0.7".into()),
            requested_at: NOW - 30_000,
            finished_at: Some(NOW - 29_900),
            results: vec![
                TopicOutcome { topic: "payments".into(), ok: true, error: None },
                TopicOutcome {
                    topic: "clicks".into(),
                    ok: false,
                    error: Some(Problem {
                        kind: ProblemKind::IllegalTransition,
                        detail: "partition 1 is FAILED and cannot be paused".into(),
                    }),
                },
            ],
            results_omitted: Default::default(),
            accepted_by: None,
        },
        OperationView {
            id: "op-000001".into(),
            mirror: "eu-west".into(),
            kind: OperationKind::CreateMirror,
            topics: vec![],
            requested_by: "admin".into(),
            client_address: None,
            requested_at: NOW - 86_400_000,
            finished_at: Some(NOW - 86_399_000),
            results: vec![],
            results_omitted: Default::default(),
            accepted_by: None,
        },
    ]
}

fn params(pairs: &[(&str, &str)]) -> Params {
    Params(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect())
}

/// Drops what changes with every build (the asset cache key).
fn stable(html: String) -> String {
    regex::Regex::new(r"\?v=[0-9a-f]+").unwrap().replace_all(&html, "?v=ASSETS").into_owned()
}

// ----- render tests ---------------------------------------------------------------------------

#[test]
fn overview_renders() {
    let snap = snapshot();
    let live = pages::overview(&snap, &operations(), &viewer(Role::Admin), now(), Part::Live).unwrap();
    insta::assert_snapshot!("overview_live", live);
    let page = pages::overview(&snap, &operations(), &viewer(Role::Admin), now(), Part::Page).unwrap();
    assert!(page.starts_with("<!doctype html>"));
    assert!(page.contains(r#"hx-trigger="every 2s"#), "live refresh");
    assert!(page.contains("New mirror"), "admins may create mirrors");
    // The broken mirror shows expected vs observed, in red.
    assert!(live.contains("ZZZZQEn5XPmjX3cKvkn000") && live.contains("MISMATCH"));
    // eu-west has a lag, all of it on paused partitions: the catch-up says so, not "caught up".
    let card = &live[live.find(r#"id="mc-1""#).unwrap()..live.find(r#"id="mc-2""#).unwrap()];
    assert!(card.contains(r#">Lag</span><span class="value">3,708<"#), "{card}");
    assert!(card.contains(r#"data-eta="paused">paused, 3,603 behind<"#) && !card.contains("caught up"), "{card}");
    let as_viewer = pages::overview(&snap, &[], &viewer(Role::Viewer), now(), Part::Page).unwrap();
    assert!(!as_viewer.contains("New mirror"));
}

#[test]
fn mirror_page_renders() {
    let snap = snapshot();
    let page = pages::mirror(&snap, "eu-west", &params(&[]), &viewer(Role::Operator), now(), Part::Page, None).unwrap();
    insta::assert_snapshot!("mirror_page", stable(page.clone()));
    assert!(page.contains(r#"data-op="pause""#) && page.contains(r#"data-op="failover""#));
    assert!(!page.contains("hunter2"), "secrets are redacted");
    assert!(!page.contains("Delete this mirror"), "operators cannot delete mirrors");
    assert!(!page.contains("throttled to"), "no throttle, nothing said");
    let mut throttled = snapshot();
    throttled.mirrors[0].replication_throttle_bytes_per_sec = Some(10 * 1024 * 1024);
    let page2 =
        pages::mirror(&throttled, "eu-west", &params(&[]), &viewer(Role::Viewer), now(), Part::Page, None).unwrap();
    assert!(page2.contains(">throttled to 10.0 MiB/s per instance</span>"), "{page2}");

    let live = pages::mirror(&snap, "eu-west", &params(&[]), &viewer(Role::Operator), now(), Part::Live, None).unwrap();
    assert!(!live.contains("<html"), "a fragment, not a page");
    assert!(
        live.contains(r#"hx-swap-oob="innerHTML""#) && live.contains(r#"id="freshness""#),
        "summary and freshness ride along"
    );

    let as_viewer =
        pages::mirror(&snap, "eu-west", &params(&[]), &viewer(Role::Viewer), now(), Part::Page, None).unwrap();
    for forbidden in ["data-op=", r#"name="topic""#, "Start mirroring topics", r#"id="sel""#, "Delete this mirror"] {
        assert!(!as_viewer.contains(forbidden), "viewer page contains {forbidden}");
    }
    assert!(as_viewer.contains(">payments<"), "viewers still read everything");

    let missing = pages::mirror(&snap, "nope", &params(&[]), &viewer(Role::Viewer), now(), Part::Page, None);
    assert_eq!(missing.unwrap_err().status, 404);
}

#[test]
fn mirror_topics_filter_sort_and_page() {
    let snap = snapshot();
    let v = kmirror::ui::view::mirror(
        snap.mirror("eu-west").unwrap(),
        None,
        &params(&[("sort", "lag")]),
        now(),
        now(),
        &viewer(Role::Viewer),
    );
    let names: Vec<&str> = v.list.rows.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["payments", "orders", "audit.log", "clicks"], "lag sorts descending first");
    let v = kmirror::ui::view::mirror(
        snap.mirror("eu-west").unwrap(),
        None,
        &params(&[("sort", "state"), ("dir", "asc")]),
        now(),
        now(),
        &viewer(Role::Viewer),
    );
    assert_eq!(v.list.rows[0].name, "clicks", "FAILED first when sorting by state");
    let v = kmirror::ui::view::mirror(
        snap.mirror("eu-west").unwrap(),
        None,
        &params(&[("q", "pay"), ("state", "PAUSING")]),
        now(),
        now(),
        &viewer(Role::Viewer),
    );
    assert_eq!(v.list.rows.len(), 1);
    assert_eq!(v.list.rows[0].mixed, "1 PAUSING · 2 PAUSED");
}

#[test]
fn topic_page_renders() {
    let snap = snapshot();
    let page = pages::partitions(
        &snap,
        "eu-west",
        Some("clicks"),
        &params(&[]),
        &viewer(Role::Operator),
        now(),
        Part::Page,
        None,
    )
    .unwrap();
    insta::assert_snapshot!("topic_page", stable(page.clone()));
    assert!(page.contains("SOURCE_TOPIC_RECREATED") && page.contains("needs an operator"));
    // clicks/0 and clicks/1 are in slots 6 and 11: this instance's (kmirror-1).
    assert!(
        page.contains(">Owner</th>")
            && page.contains(
                r#"<td class="owner"><span class="tag this" title="the instance answering this page">this</span> <span class="owner-id" title="kmirror-1">kmirror-1</span></td>"#
            )
    );
    let live = pages::partitions(
        &snap,
        "eu-west",
        Some("clicks"),
        &params(&[]),
        &viewer(Role::Viewer),
        now(),
        Part::Live,
        None,
    )
    .unwrap();
    insta::assert_snapshot!("topic_partitions_live", live);
    let missing =
        pages::partitions(&snap, "eu-west", Some("nope"), &params(&[]), &viewer(Role::Viewer), now(), Part::Page, None);
    assert_eq!(missing.unwrap_err().status, 404);
}

#[test]
fn writes_to_the_old_source_after_a_failover_are_flagged() {
    let mut snap = snapshot();
    let page = |snap: &Snapshot| {
        pages::mirror(snap, "eu-west", &params(&[]), &viewer(Role::Viewer), now(), Part::Live, None).unwrap()
    };
    assert!(!page(&snap).contains("The old source still receives records"), "nothing written there, nothing to say");

    let audit = snap.mirrors[0].topics.iter_mut().find(|t| t.name == "audit.log").expect("audit.log");
    audit.partitions[0].source_writes_after_stop = Some(1_234);
    let live = page(&snap);
    assert!(
        live.contains("<b>The old source still receives records.</b> After the failover, 1,234 records were written to \
             the old source: <a class=\"mono\" href=\"/mirrors/eu-west/topics/audit.log\">audit.log</a> (1,234 on 1 partition)."),
        "the live summary names the topic and the count: {live}"
    );

    let rows = pages::partitions(
        &snap,
        "eu-west",
        Some("audit.log"),
        &params(&[]),
        &viewer(Role::Viewer),
        now(),
        Part::Live,
        None,
    )
    .unwrap();
    assert_eq!(rows.matches(">old source +1,234</span>").count(), 1, "only the partition written to: {rows}");
    assert_eq!(rows.matches("old source +").count(), 1, "partition 1 (0 written) has no tag");

    // A failback on the old source copies the topic back: expected writes, no note.
    let audit = snap.mirrors[0].topics.iter_mut().find(|t| t.name == "audit.log").expect("audit.log");
    audit.failback_mirror = Some("back-to-eu".into());
    assert!(!page(&snap).contains("The old source still receives records"), "a failback explains them");
}

#[test]
fn partitions_name_their_slot_and_owner() {
    let snap = snapshot();
    let v = viewer(Role::Viewer);
    let page = pages::partitions(&snap, "eu-west", None, &params(&[("prefix", "orders")]), &v, now(), Part::Live, None)
        .unwrap();
    // orders/0..5 are in slots 6, 11, 0, 5, 10, 15: kmirror-1 (this), kmirror-0, and none for 15.
    let model = kmirror::ui::view::partitions(
        snap.mirror("eu-west").unwrap(),
        None,
        None,
        &params(&[("prefix", "orders")]),
        now(),
        now(),
        &v,
        "kmirror-1",
    );
    let owners: Vec<(i32, i32, &str, bool)> =
        model.rows.iter().map(|r| (r.partition, r.slot, r.owner.as_str(), r.owner_this)).collect();
    assert_eq!(
        owners,
        [
            (0, 6, "kmirror-1", true),
            (1, 11, "kmirror-1", true),
            (2, 0, "kmirror-0", false),
            (3, 5, "kmirror-0", false),
            (4, 10, "kmirror-1", true),
            (5, 15, "—", false),
        ]
    );
    assert!(
        page.contains(r#"<td class="owner"><span class="owner-id" title="kmirror-0">kmirror-0</span></td>"#),
        "{page}"
    );
    assert!(page.contains("no instance is known to own this slot"));
    assert_eq!(page.matches(r#"<span class="tag this""#).count(), 3);
    // Sorting by slot.
    let by_slot = kmirror::ui::view::partitions(
        snap.mirror("eu-west").unwrap(),
        None,
        None,
        &params(&[("prefix", "orders"), ("sort", "slot")]),
        now(),
        now(),
        &v,
        "kmirror-1",
    );
    let slots: Vec<i32> = by_slot.rows.iter().map(|r| r.slot).collect();
    assert_eq!(slots, [0, 5, 6, 10, 11, 15]);
}

#[test]
fn an_idle_partition_is_tagged_idle() {
    let mut snap = snapshot();
    let page = |snap: &Snapshot| {
        let v = viewer(Role::Viewer);
        pages::partitions(snap, "eu-west", None, &params(&[("prefix", "orders")]), &v, now(), Part::Live, None).unwrap()
    };
    assert!(!page(&snap).contains(">idle</span>"));
    let orders = snap.mirrors[0].topics.iter_mut().find(|t| t.name == "orders").expect("orders");
    orders.partitions[0].idle = true;
    let html = page(&snap);
    assert_eq!(html.matches(">idle</span>").count(), 1, "{html}");
    assert!(html.contains("its data path is closed"));
}

#[test]
fn instances_render() {
    let snap = snapshot();
    let live = pages::instances(&snap, &viewer(Role::Viewer), now(), Part::Live).unwrap();
    insta::assert_snapshot!("instances_live", live.clone());
    assert!(!live.contains("<html"), "a fragment, not a page");
    assert!(live.contains(r#"id="freshness""#) && live.contains(r#"hx-swap-oob="true""#), "freshness rides along");
    let page = pages::instances(&snap, &viewer(Role::Viewer), now(), Part::Page).unwrap();
    assert!(page.starts_with("<!doctype html>") && page.contains(r#"hx-get="/ui/instances""#));
    assert!(page.contains(r#"<a href="/instances" aria-current="page">Instances</a>"#), "nav entry");
    // Ordered by id; this instance marked; a late heartbeat and an older version stand out.
    let ids: Vec<&str> = ["kmirror-0", "kmirror-1", "kmirror-2"].into_iter().filter(|id| live.contains(id)).collect();
    assert_eq!(ids.len(), 3);
    assert!(live.find(r#"data-instance="kmirror-0""#) < live.find(r#"data-instance="kmirror-1""#));
    assert!(live.contains(r#"<tr data-instance="kmirror-1" class="this-row">"#));
    assert_eq!(live.matches("this instance</span>").count(), 1);
    assert!(live.contains(r#"<a href="http://kmirror-0.kmirror:8080" rel="noopener noreferrer">"#));
    assert!(!live.contains(r#"href="javascript:"#), "a non-web advertised URL is shown, not linked");
    assert!(live.contains(r#"<span class="health warn" title="2026-"#) || live.contains(r#"class="health warn""#));
    assert!(live.contains("14 s ago") && live.contains("2 s ago"));
    assert!(live.contains("0–5") && live.contains("6–11") && live.contains("12–14"));
    assert!(
        live.contains("1 without owner") && live.contains(r#"Slot <span class="mono">15</span> has no known owner"#)
    );
    assert!(live.contains(">group<") && live.contains(">prod-eu<") && live.contains(">3<"), "mode, name, rebalances");

    // A standalone instance: one row with every slot; no snapshot yet: a readable empty page.
    let mut alone = snapshot();
    let mut me = instance("solo", 0..16, 0);
    me.this = true;
    alone.cluster = ClusterSnapshot {
        cluster_name: "kmirror".into(),
        mode: "standalone".into(),
        this_instance: "solo".into(),
        slots: 16,
        instances: vec![me],
        rebalances: 0,
    };
    let v = kmirror::ui::view::instances(&alone, now());
    assert_eq!((v.mode.as_str(), v.unowned_count, v.rows.len()), ("standalone", 0, 1));
    assert_eq!((v.rows[0].slots.as_str(), v.rows[0].slot_count.as_str(), v.rows[0].this), ("0–15", "16", true));
    let empty = pages::instances(&Snapshot::default(), &viewer(Role::Viewer), now(), Part::Page).unwrap();
    assert!(empty.contains("No instance reported yet."));
}

#[test]
fn ten_thousand_partitions_stay_instant() {
    let mut snap = snapshot();
    let topics: Vec<TopicSnapshot> = (0..100)
        .map(|t| {
            let name = format!("bulk.t{t:03}");
            topic(
                &name,
                (0..100)
                    .map(|p| {
                        let mut x =
                            partition(&name, p, PartitionState::Mirroring, i64::from((t * 7919 + p * 104_729) % 5_000));
                        if (t * 100 + p) % 997 == 0 {
                            x.state = PartitionState::Failed;
                        }
                        x
                    })
                    .collect(),
            )
        })
        .collect();
    snap.mirrors[0].topics = topics;
    let all: Vec<&PartitionSnapshot> = snap.mirrors[0].topics.iter().flat_map(|t| &t.partitions).collect();
    assert_eq!(all.len(), 10_000);
    let max_lag = all.iter().map(|p| p.lag_records).max().unwrap();
    let failed = all.iter().filter(|p| p.state == PartitionState::Failed).count();
    let v = viewer(Role::Operator);

    let started = Instant::now();
    let worst = pages::partitions(
        &snap,
        "eu-west",
        None,
        &params(&[("sort", "lag"), ("dir", "desc")]),
        &v,
        now(),
        Part::Page,
        None,
    )
    .unwrap();
    let failed_page =
        pages::partitions(&snap, "eu-west", None, &params(&[("state", "FAILED")]), &v, now(), Part::Live, None)
            .unwrap();
    let prefix_page = pages::partitions(
        &snap,
        "eu-west",
        None,
        &params(&[("prefix", "bulk.t05"), ("page", "3"), ("per", "25")]),
        &v,
        now(),
        Part::Live,
        None,
    )
    .unwrap();
    let mirror_page = pages::mirror(&snap, "eu-west", &params(&[]), &v, now(), Part::Page, None).unwrap();
    let elapsed = started.elapsed();
    // Four renders over 10,000 partitions; generous for a debug build on a 2-core runner.
    assert!(elapsed < Duration::from_secs(2), "rendering took {elapsed:?}");

    let model = kmirror::ui::view::partitions(
        &snap.mirrors[0],
        None,
        None,
        &params(&[("sort", "lag"), ("dir", "desc")]),
        now(),
        now(),
        &v,
        "kmirror-1",
    );
    assert_eq!(model.rows.len(), 100, "one page");
    assert_eq!(model.rows[0].lag_records, kmirror::ui::format::int(max_lag), "worst lag first");
    assert_eq!(model.pager.total_n, 10_000);
    assert!(worst.contains("Worst lag first") && worst.matches("<tr class=").count() == 100);
    assert_eq!(failed_page.matches("<tr class=\"st-failed-row\"").count(), failed);
    assert!(prefix_page.contains("51–75 of 1,000"), "prefix filter (10 topics) and paging");
    // The live summary's count (the static header link carries none: it would go stale).
    let count = kmirror::ui::format::count(failed);
    assert!(mirror_page.contains(&format!("partitions?state=FAILED\">{count}</a>")), "failed count {count}");
}

#[test]
fn confirmations_show_the_impact() {
    let snap = snapshot();
    let v = viewer(Role::Operator);
    let dialog =
        pages::confirm(&snap, "eu-west", UiOp::Failover, &["payments".into()], &v, true, "/mirrors/eu-west").unwrap();
    insta::assert_snapshot!("confirm_failover_dialog", dialog.clone());
    assert!(dialog.contains("3,603 records"), "total lag that would not be mirrored");
    // What a later failback costs: incremental, but the records not mirrored diverge.
    assert!(dialog.contains("Failing back later copies only what is written here after the failover"));
    assert!(dialog.contains("the 3,603 records not mirrored stay on the source only"));
    assert!(dialog.contains(r#"pattern="payments""#) && dialog.contains(r#"data-confirm-word="payments""#));

    let several = pages::confirm(
        &snap,
        "eu-west",
        UiOp::Failover,
        &["orders".into(), "payments".into(), "ghost".into()],
        &v,
        false,
        "/mirrors/eu-west",
    )
    .unwrap();
    assert!(several.contains(r#"data-confirm-word="eu-west""#), "several topics: type the mirror name");
    // The consumer groups of the selected topics, and which would not resume exactly.
    assert!(
        several.contains(
            "<b>Consumer groups</b> of these topics: 1 ready to resume exactly where they are on the \
             destination, <b>1 not ready</b>."
        ),
        "{several}"
    );
    assert!(several.contains(
        r#"<li><span class="mono">fraud-scoring</span>: group is active on the destination: offsets are not overwritten</li>"#
    ));
    assert!(
        dialog.contains("of this topic: 0 ready") && !dialog.contains("billing-service"),
        "payments only: {dialog}"
    );
    let clicks = pages::confirm(&snap, "eu-west", UiOp::Failover, &["clicks".into()], &v, true, "/").unwrap();
    assert!(!clicks.contains("Consumer groups"), "no group consumes clicks: nothing to say");
    assert!(several.contains("ghost") && several.contains("left out"));
    assert!(several.starts_with("<!doctype html>"), "without JavaScript the confirmation is a page");

    let restart = pages::confirm(&snap, "eu-west", UiOp::Restart, &["audit.log".into()], &v, true, "/").unwrap();
    assert!(restart.contains("resync_quarantine") && restart.contains("Local writes since failover"));
    assert!(restart.contains(">6<"), "local writes past the stop offset (HWM - stop offset)");
    let pause = pages::confirm(&snap, "eu-west", UiOp::Pause, &[], &v, true, "/").unwrap();
    assert!(pause.contains("No topic selected"));

    // A recover lists the FAILED partitions it retries, with their errors.
    let recover = pages::confirm(&snap, "eu-west", UiOp::Recover, &["clicks".into()], &v, true, "/").unwrap();
    assert!(recover.contains("Recover failed partitions") && recover.contains("retried now"));
    assert!(
        recover.contains("SOURCE_TOPIC_RECREATED") && recover.contains("the source topic ID changed from abc to def")
    );
    assert_eq!(recover.matches(r#"<th scope="row" class="pnum">"#).count(), 1, "only the FAILED partition: {recover}");
    assert!(!recover.contains("FOREIGN_WRITE"), "no refusal warning without a foreign write");
    let mut foreign = snapshot();
    let m = foreign.mirrors.iter_mut().find(|m| m.name == "eu-west").unwrap();
    let clicks = m.topics.iter_mut().find(|t| t.name == "clicks").unwrap();
    let error = clicks.partitions[1].error.as_mut().unwrap();
    (error.code, error.recoverable) = ("FOREIGN_WRITE".into(), false);
    let refused = pages::confirm(&foreign, "eu-west", UiOp::Recover, &["clicks".into()], &v, true, "/").unwrap();
    assert!(refused.contains("failed with FOREIGN_WRITE") && refused.contains("warn-row"), "{refused}");
}

/// The fixture as it was over the last 10 minutes, recorded into a history (10 s samples) the way
/// the history task does: `orders` catching up (each partition 1,000 records behind now, mirrored
/// at 60 records/s while the source adds 50), `payments` paused, `us-east/metrics` stuck. Returns
/// the last snapshot recorded and the history.
fn trending() -> (Snapshot, History) {
    let history = History::new(HistoryConfig::default(), Timestamp::from_millis(NOW - 7_200_000));
    let mut last = snapshot();
    for i in 0..60i64 {
        let mut snap = snapshot();
        snap.taken_at = Timestamp::from_millis(NOW - 800 - (59 - i) * 10_000);
        for t in snap.mirrors.iter_mut().flat_map(|m| &mut m.topics) {
            for p in &mut t.partitions {
                if t.name == "orders" {
                    p.lag_records = 1_000 + (59 - i) * 100;
                    p.lag_seconds = 40.0;
                    p.source_high_watermark = Some(100_000 + i * 500);
                    p.records_mirrored = 1_000 + i as u64 * 600;
                    p.bytes_mirrored = p.records_mirrored * 64;
                }
            }
            t.lag_records = t.partitions.iter().map(|p| p.lag_records).sum();
            t.lag_seconds = t.partitions.iter().map(|p| p.lag_seconds).fold(0.0, f64::max);
        }
        history.record(&snap);
        last = snap;
    }
    (last, history)
}

#[test]
fn charts_and_catch_up_estimates_render() {
    let (snap, h) = trending();
    let v = viewer(Role::Operator);
    // The mirror page: the estimate in the summary and per topic, both charts.
    let live = pages::mirror_with(&snap, Some(&h), "eu-west", &params(&[]), &v, now(), Part::Live, None).unwrap();
    insta::assert_snapshot!("mirror_live_trends", live.clone());
    assert!(live.contains(r#"<svg class="chart-svg" viewBox="0 0 600 100" preserveAspectRatio="none" role="img" aria-labelledby="mirror-lag-t">"#));
    assert!(live.contains(r#"<title id="mirror-lag-t">Lag over the last hour (60 samples): lag now 9,603 records, peak 45,003 records"#), "{live}");
    assert!(live.contains(
        r#"<title id="mirror-thru-t">Throughput over the last hour (60 samples): mirrored now 360 records/s"#
    ));
    assert!(live.contains("<polyline class=\"line l-lag\" points=\""));
    assert!(live.contains("history kept since 2026-09-21"), "since when");
    // orders: 6,000 behind, 60 records/s net: 100 s.
    let row = |topic: &str| {
        let start = live.find(&format!(r#"<tr data-topic="{topic}">"#)).unwrap();
        live[start..start + live[start..].find("</tr>").unwrap()].to_string()
    };
    assert!(
        row("orders").contains(r#"<span class="eta eta-warn" data-eta="eta">about 2 min</span>"#),
        "{}",
        row("orders")
    );
    // A paused topic says how far behind it is, never just "paused" (or "caught up") next to a lag.
    assert!(row("payments").contains(r#"data-eta="paused">paused, 3,603 behind<"#), "{}", row("payments"));
    assert!(row("clicks").contains(r#"data-eta="caught_up">caught up<"#));
    // The overview: a chart pair per mirror; the stuck mirror is not catching up.
    let overview = pages::overview_with(&snap, Some(&h), &[], &v, now(), Part::Live).unwrap();
    assert_eq!(overview.matches(r#"role="img" aria-labelledby="mc-"#).count(), 4);
    assert!(overview.contains("not catching up (no progress)"), "us-east");
    // The topic page.
    let topic =
        pages::partitions_with(&snap, Some(&h), "eu-west", Some("orders"), &params(&[]), &v, now(), Part::Page, None)
            .unwrap();
    assert!(topic.contains(r#"aria-labelledby="topic-lag-t""#) && topic.contains(r#"data-eta="eta">about 2 min<"#));
    // The failover dialog: what failing over now loses, and how long to wait to lose nothing.
    let dialog =
        pages::confirm_with(&snap, Some(&h), "eu-west", UiOp::Failover, &["orders".into()], &v, true, "/").unwrap();
    assert!(dialog.contains("Fail over now: 6,000 records lost; wait <b>about 2 min</b> to lose none."), "{dialog}");
    let both = pages::confirm_with(
        &snap,
        Some(&h),
        "eu-west",
        UiOp::Failover,
        &["orders".into(), "payments".into()],
        &v,
        true,
        "/",
    )
    .unwrap();
    assert!(!both.contains("to lose none"), "waiting does not help a paused topic");
    assert!(both.contains("Waiting does not help for <span class=\"mono\">payments</span>: paused, 3,603 behind."));
    // The page's own snapshot, newer than the last sample, is the lag line's last point: the line
    // is as live as the page.
    let mut newer = snap.clone();
    newer.taken_at = Timestamp::from_millis(NOW);
    newer.mirrors[0].topics[0].lag_records += 1_000;
    let live = pages::mirror_with(&newer, Some(&h), "eu-west", &params(&[]), &v, now(), Part::Live, None).unwrap();
    assert!(live.contains("Lag over the last hour (61 samples): lag now 10,603 records"), "{live}");
    // Without a history (the other render tests): empty charts that say so.
    let bare = pages::mirror(&snap, "eu-west", &params(&[]), &v, now(), Part::Live, None).unwrap();
    assert!(bare.contains("Lag over the last hour: no samples yet") && bare.contains("not known yet"));
}

#[test]
fn operations_and_audit_render() {
    let snap = snapshot();
    let live =
        pages::operations(&snap, &operations(), &params(&[]), &viewer(Role::Viewer), now(), false, Part::Live).unwrap();
    insta::assert_snapshot!("operations_live", live.clone());
    assert!(!live.contains("Create mirror"), "operations lists lifecycle calls only");
    let audit =
        pages::operations(&snap, &operations(), &params(&[]), &viewer(Role::Viewer), now(), true, Part::Page).unwrap();
    assert!(audit.contains("Create mirror") && audit.contains("10.0.0.7"));
    let filtered = pages::operations(
        &snap,
        &operations(),
        &params(&[("who", "ADM")]),
        &viewer(Role::Viewer),
        now(),
        true,
        Part::Live,
    )
    .unwrap();
    assert!(filtered.contains("Create mirror") && !filtered.contains(">Pause<"));
    let detail = pages::operation(&snap, &operations()[0], &viewer(Role::Viewer), now(), Part::Page).unwrap();
    assert!(detail.contains("Illegal state transition") && detail.contains("partition 1 is FAILED"));
    assert!(detail.contains("2/3 PAUSED"), "per-partition progress from the snapshot");
}

/// Every string that reaches a page from outside (names, error messages, source strings,
/// identities) is escaped. Kafka forbids `<` in topic names, but the UI must not rely on it.
#[test]
fn hostile_strings_are_escaped_everywhere() {
    const X: &str = r#"<script>alert(1)</script>"#;
    const Y: &str = r#""><img src=x onerror=alert(2)>"#;
    let hostile = |tag: &str| format!("{tag}{X}{Y}");
    let tname = hostile("t");
    let mut parts =
        vec![partition(&tname, 0, PartitionState::Failed, 5), partition(&tname, 1, PartitionState::Stopped, 0)];
    parts[0].error =
        Some(PartitionErrorView { code: hostile("CODE"), message: hostile("msg"), retryable: true, recoverable: true });
    let mut m = mirror(&hostile("m"), vec![topic(&tname, parts)]);
    m.source_bootstrap_servers = hostile("bootstrap");
    m.source_properties = BTreeMap::from([(hostile("key"), hostile("value"))]);
    m.expected_source_cluster_id = Some(hostile("expected"));
    m.observed_source_cluster_id = Some(hostile("observed"));
    m.cluster_id_status = ClusterIdStatus::Mismatch;
    m.cluster_id_error = Some(hostile("cid-error"));
    m.data_path = DataPathStatus::Retrying { attempt: 1, message: hostile("datapath") };
    m.sync[0].last_error = Some(hostile("sync-error"));
    m.sync[0].consecutive_failures = 1;
    m.sync[1].warnings = vec![hostile("warning")];
    m.groups[0].group = hostile("group");
    m.groups[1].last_error = Some(hostile("group-error"));
    let mname = m.name.clone();
    let mut other = instance(&hostile("instance"), 0..2, 1_000);
    other.advertised_url = Some(format!("http://x/{X}{Y}"));
    other.version = hostile("version");
    let mut this = instance(&hostile("this"), 2..4, 0);
    this.this = true;
    this.advertised_url = Some(hostile("url"));
    let snap = place(Snapshot {
        taken_at: now(),
        destination_cluster_id: hostile("dest"),
        destination_brokers: Vec::new(),
        mirrors: vec![m],
        cluster: ClusterSnapshot {
            cluster_name: hostile("cluster"),
            mode: hostile("mode"),
            this_instance: this.id.clone(),
            slots: 4,
            instances: vec![other, this],
            rebalances: 0,
        },
        ..Default::default()
    });
    let ops = vec![OperationView {
        id: hostile("op"),
        mirror: mname.clone(),
        kind: OperationKind::Stop,
        topics: vec![tname.clone()],
        requested_by: hostile("who"),
        client_address: Some(hostile("addr")),
        requested_at: NOW - 1_000,
        finished_at: Some(NOW),
        results: vec![TopicOutcome {
            topic: tname.clone(),
            ok: false,
            error: Some(Problem { kind: ProblemKind::Internal, detail: hostile("detail") }),
        }],
        results_omitted: Default::default(),
        accepted_by: None,
    }];
    let mut v = viewer(Role::Admin);
    v.name = hostile("user");
    let results = kmirror::ui::view::results_of(&ops[0]);
    let rendered = vec![
        pages::overview(&snap, &ops, &v, now(), Part::Page).unwrap(),
        pages::overview(&snap, &ops, &v, now(), Part::Live).unwrap(),
        pages::mirror(&snap, &mname, &params(&[("q", X), ("topic", Y)]), &v, now(), Part::Page, Some(results.clone()))
            .unwrap(),
        pages::mirror(&snap, &mname, &params(&[]), &v, now(), Part::Live, None).unwrap(),
        pages::partitions(&snap, &mname, None, &params(&[("prefix", X)]), &v, now(), Part::Page, None).unwrap(),
        pages::partitions(&snap, &mname, None, &params(&[]), &v, now(), Part::Page, None).unwrap(),
        pages::partitions(&snap, &mname, Some(&tname), &params(&[]), &v, now(), Part::Page, None).unwrap(),
        pages::confirm(&snap, &mname, UiOp::Failover, std::slice::from_ref(&tname), &v, true, "/").unwrap(),
        pages::confirm(&snap, &mname, UiOp::Restart, &[tname.clone(), hostile("missing")], &v, false, "/").unwrap(),
        pages::operations(&snap, &ops, &params(&[("who", X)]), &v, now(), false, Part::Page).unwrap(),
        pages::operations(&snap, &ops, &params(&[]), &v, now(), true, Part::Page).unwrap(),
        pages::operation(&snap, &ops[0], &v, now(), Part::Page).unwrap(),
        pages::results(results).unwrap(),
        pages::instances(&snap, &v, now(), Part::Page).unwrap(),
        pages::instances(&snap, &v, now(), Part::Live).unwrap(),
    ];
    for (i, html) in rendered.iter().enumerate() {
        assert!(!html.contains("<script>alert"), "render {i}: raw script tag:\n{html}");
        assert!(!html.contains("<img src=x"), "render {i}: raw img tag");
        assert!(!html.contains(r#""><img"#), "render {i}: attribute breakout");
        // askama writes `<` as `&#60;`; URLs carry it percent-encoded.
        assert!(
            ["&lt;script&gt;", "&#60;script&#62;", "%3Cscript%3E"].iter().any(|escaped| html.contains(escaped)),
            "render {i}: the payload is shown, escaped"
        );
        // The only script tags are ours, from /static.
        for tag in html.match_indices("<script").map(|(i, _)| &html[i..(i + 60).min(html.len())]) {
            assert!(tag.starts_with("<script src=\"/static/"), "render {i}: unexpected {tag}");
        }
    }
    // A template that prints untrusted text through `|safe` would defeat all of this.
    for entry in std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/templates"))
        .unwrap()
        .chain(std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/templates/pages")).unwrap())
        .chain(std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/templates/fragments")).unwrap())
    {
        let path = entry.unwrap().path();
        if path.is_file() {
            let text = std::fs::read_to_string(&path).unwrap();
            assert!(!text.contains("|safe") && !text.contains("| safe"), "{} uses |safe", path.display());
        }
    }
}

// ----- through the real server ------------------------------------------------------------------

const ADMIN: &str = "ui-admin-token-01-0123456789abcdef";
const OPERATOR: &str = "ui-operator-token-01-0123456789abcdef";
const VIEWER: &str = "ui-viewer-token-01-0123456789abcdef";

fn tokens() -> TokenStore {
    let e = |name: &str, token: &str, role| TokenEntry { name: name.into(), token: token.into(), role };
    TokenStore::new(vec![
        e("ui-admin", ADMIN, Role::Admin),
        e("ui-operator", OPERATOR, Role::Operator),
        e("ui-viewer", VIEWER, Role::Viewer),
    ])
}

struct Server {
    base: String,
    client: reqwest::Client,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    _sampler: kmirror::history::HistoryTask,
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(s) = self.shutdown.take() {
            let _ = s.send(());
        }
    }
}

#[derive(Debug)]
struct Resp {
    status: u16,
    headers: reqwest::header::HeaderMap,
    text: String,
}

impl Resp {
    fn header(&self, name: &str) -> &str {
        self.headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("")
    }

    fn set_cookies(&self) -> Vec<String> {
        self.headers.get_all("set-cookie").iter().filter_map(|v| v.to_str().ok()).map(str::to_string).collect()
    }

    /// The value of `name=` in a hidden input.
    fn hidden(&self, name: &str) -> String {
        let re = regex::Regex::new(&format!(r#"name="{name}" value="([^"]*)""#)).unwrap();
        re.captures(&self.text).map(|c| c[1].to_string()).unwrap_or_default()
    }
}

impl Server {
    async fn start(engine: EngineHandle, auth: TokenStore, tls: bool) -> Server {
        let history = kmirror::history::History::new(crate::api::fast_history(), kmirror::clock::now());
        let sampler = kmirror::history::spawn(engine.clone(), history.clone());
        let state = AppState { engine, auth: Arc::new(auth), tls, started_at: Instant::now(), history };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(kmirror::app::serve(listener, state, async move {
            let _ = rx.await;
        }));
        let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
        Server { base, client, shutdown: Some(tx), _sampler: sampler }
    }

    async fn send(&self, req: reqwest::RequestBuilder) -> Resp {
        let r = req.send().await.expect("request");
        let status = r.status().as_u16();
        let headers = r.headers().clone();
        let text = r.text().await.unwrap_or_default();
        Resp { status, headers, text }
    }

    async fn get(&self, path: &str, cookie: Option<&str>, htmx: bool) -> Resp {
        let mut req = self.client.get(format!("{}{path}", self.base));
        if let Some(c) = cookie {
            req = req.header("cookie", c);
        }
        if htmx {
            req = req.header("hx-request", "true");
        }
        self.send(req).await
    }

    async fn post(&self, path: &str, cookie: Option<&str>, form: &[(&str, &str)], headers: &[(&str, &str)]) -> Resp {
        let body: String = form
            .iter()
            .map(|(k, v)| {
                format!("{}={}", kmirror::ui::format::encode_component(k), kmirror::ui::format::encode_component(v))
            })
            .collect::<Vec<_>>()
            .join("&");
        let mut req = self
            .client
            .post(format!("{}{path}", self.base))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body);
        if let Some(c) = cookie {
            req = req.header("cookie", c);
        }
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        self.send(req).await
    }

    /// Signs in through the form; returns the session cookie (`name=value`) and the CSRF token.
    async fn sign_in(&self, token: &str) -> (String, String) {
        let form = self.get("/signin", None, false).await;
        let signin_cookie = cookie_pair(&form.set_cookies(), "kmirror_signin");
        let r = self
            .post(
                "/signin",
                Some(&signin_cookie),
                &[("_csrf", &form.hidden("_csrf")), ("token", token), ("next", "/")],
                &[],
            )
            .await;
        assert_eq!(r.status, 303, "{}", r.text);
        let session = cookie_pair(&r.set_cookies(), "kmirror_session");
        let page = self.get("/", Some(&session), false).await;
        assert_eq!(page.status, 200, "{}", page.text);
        let csrf = regex::Regex::new(r#""X-CSRF-Token": "([0-9a-f]{64})""#).unwrap().captures(&page.text).unwrap()[1]
            .to_string();
        (session, csrf)
    }
}

/// `name=value` of the cookie `name` among `Set-Cookie` values.
fn cookie_pair(set_cookies: &[String], name: &str) -> String {
    set_cookies
        .iter()
        .find(|c| c.starts_with(&format!("{name}=")))
        .map(|c| c.split(';').next().unwrap().to_string())
        .unwrap_or_else(|| panic!("no {name} cookie in {set_cookies:?}"))
}

/// An engine with one mirror mirroring one 2-partition topic.
async fn engine_with_topic() -> (TestEngine, String, TestTopic) {
    let engine = TestEngine::start().await;
    let m = unique("uim");
    engine.create_mirror(&m).await;
    let t = TestTopic::create(Cluster::Source, "uit", 2, &[]).await;
    engine.op_ok(&m, &[&t.name], LifecycleOp::Start { truncation: Truncation::None }).await;
    engine.wait_state(&m, &t.name, PartitionState::Mirroring).await;
    (engine, m, t)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_in_flow_and_cookie_flags() {
    let _rig = shared().await;
    let engine = TestEngine::start().await;
    let s = Server::start(engine.handle.clone(), tokens(), false).await;

    // Strangers go to sign-in, with the page to come back to.
    let r = s.get("/operations?who=x", None, false).await;
    assert_eq!((r.status, r.header("location")), (303, "/signin?next=%2Foperations%3Fwho%3Dx"));
    // Fragments answer htmx with a redirect header instead of a page.
    let r = s.get("/ui/overview", None, true).await;
    assert_eq!(r.status, 401);
    assert!(r.header("hx-redirect").starts_with("/signin"));

    let form = s.get("/signin?next=/audit", None, false).await;
    assert_eq!(form.status, 200);
    let signin_cookie = form.set_cookies().into_iter().find(|c| c.starts_with("kmirror_signin=")).unwrap();
    for flag in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(signin_cookie.contains(flag), "{signin_cookie}");
    }
    let pair = cookie_pair(&form.set_cookies(), "kmirror_signin");
    let csrf = form.hidden("_csrf");
    assert_eq!(csrf.len(), 64);
    assert!(form.header("content-security-policy").contains("script-src 'self'"));

    // The sign-in form itself is protected: no double-submit cookie, no sign-in.
    let r = s.post("/signin", None, &[("_csrf", &csrf), ("token", ADMIN)], &[]).await;
    assert_eq!(r.status, 403);
    assert!(r.set_cookies().iter().all(|c| !c.starts_with("kmirror_session=")));

    let r = s
        .post("/signin", Some(&pair), &[("_csrf", &csrf), ("token", "wrong-token-123"), ("next", "/audit")], &[])
        .await;
    assert_eq!(r.status, 401);
    assert!(r.text.contains("That token is not valid."));
    assert!(!r.text.contains("wrong-token-123"), "the token is not echoed");

    let r = s.post("/signin", Some(&pair), &[("_csrf", &csrf), ("token", OPERATOR), ("next", "/audit")], &[]).await;
    assert_eq!((r.status, r.header("location")), (303, "/audit"));
    let set = r.set_cookies().into_iter().find(|c| c.starts_with("kmirror_session=")).unwrap();
    for flag in ["HttpOnly", "SameSite=Strict", "Path=/", "Max-Age="] {
        assert!(set.contains(flag), "{set}");
    }
    assert!(!set.contains("Secure"), "no Secure flag without TLS: {set}");
    let session = cookie_pair(std::slice::from_ref(&set), "kmirror_session");
    assert_eq!(session.len(), "kmirror_session=".len() + 64, "256-bit session id");

    let page = s.get("/audit", Some(&session), false).await;
    assert_eq!(page.status, 200);
    assert!(page.text.contains("ui-operator") && page.text.contains("Audit trail"));

    // Open redirects are refused.
    let r = s
        .post("/signin", Some(&pair), &[("_csrf", &csrf), ("token", OPERATOR), ("next", "//evil.example/")], &[])
        .await;
    assert_eq!(r.header("location"), "/");

    // Sign-out needs the CSRF token, then ends the session.
    let csrf =
        regex::Regex::new(r#""X-CSRF-Token": "([0-9a-f]{64})""#).unwrap().captures(&page.text).unwrap()[1].to_string();
    let r = s.post("/signout", Some(&session), &[], &[]).await;
    assert_eq!(r.status, 403);
    let r = s.post("/signout", Some(&session), &[("_csrf", &csrf)], &[]).await;
    assert_eq!((r.status, r.header("location")), (303, "/signin"));
    assert!(r.set_cookies().iter().any(|c| c.starts_with("kmirror_session=;") && c.contains("Max-Age=0")));
    assert_eq!(s.get("/", Some(&session), false).await.status, 303, "the old cookie no longer works");

    // Under TLS the cookie is Secure and __Host- prefixed.
    let tls = Server::start(engine.handle.clone(), tokens(), true).await;
    let form = tls.get("/signin", None, false).await;
    let pair = cookie_pair(&form.set_cookies(), "__Host-kmirror_signin");
    let r = tls.post("/signin", Some(&pair), &[("_csrf", &form.hidden("_csrf")), ("token", VIEWER)], &[]).await;
    let set = r.set_cookies().into_iter().find(|c| c.starts_with("__Host-kmirror_session=")).expect("__Host- cookie");
    assert!(set.contains("; Secure") && set.contains("HttpOnly") && set.contains("SameSite=Strict"), "{set}");
    engine.stop().await;
}

/// Wrong tokens on the sign-in form are throttled per client address like bearer tokens: after
/// the burst, 429 with `Retry-After` and a readable message; the right token still signs in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_in_failures_are_throttled() {
    let _rig = shared().await;
    let engine = TestEngine::start().await;
    let s = Server::start(engine.handle.clone(), tokens(), false).await;
    let form = s.get("/signin", None, false).await;
    let pair = cookie_pair(&form.set_cookies(), "kmirror_signin");
    let csrf = form.hidden("_csrf");
    let attempt = |token: String| {
        let (pair, csrf) = (pair.clone(), csrf.clone());
        let s = &s;
        async move { s.post("/signin", Some(&pair), &[("_csrf", &csrf), ("token", &token), ("next", "/")], &[]).await }
    };
    for i in 0..kmirror::auth::FAILURE_BURST {
        let r = attempt(format!("wrong-sign-in-{i}")).await;
        assert_eq!(r.status, 401, "attempt {i}: {}", r.text);
    }
    let mut throttled = None;
    for i in 0..10 {
        let r = attempt(format!("still-wrong-{i}")).await;
        if r.status == 429 {
            throttled = Some(r);
            break;
        }
        assert_eq!(r.status, 401, "{}", r.text);
    }
    let r = throttled.expect("429 after repeated failed sign-ins");
    assert!(r.text.contains("Too many failed sign-ins"), "{}", r.text);
    assert!(r.header("retry-after").parse::<u64>().is_ok_and(|s| s >= 1), "{:?}", r.headers);
    assert!(!r.text.contains("still-wrong"), "the token is not echoed");
    assert_eq!(r.header("x-frame-options"), "DENY");
    let r = attempt(VIEWER.to_string()).await;
    assert_eq!(r.status, 303, "a valid token signs in from a throttled address: {}", r.text);
    assert_eq!(attempt("wrong-again".into()).await.status, 429, "and wrong ones are still throttled");
    engine.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn csrf_roles_and_pages_without_javascript() {
    let _rig = shared().await;
    let (engine, m, t) = engine_with_topic().await;
    let s = Server::start(engine.handle.clone(), tokens(), false).await;
    let (op_cookie, op_csrf) = s.sign_in(OPERATOR).await;
    let (view_cookie, view_csrf) = s.sign_in(VIEWER).await;
    let actions = format!("/mirrors/{m}/actions");
    let mirror_path = format!("/mirrors/{m}");

    // Every page renders fully without JavaScript (and a fragment is only a fragment).
    for path in [
        "/".to_string(),
        mirror_path.clone(),
        format!("/mirrors/{m}/partitions?sort=lag&dir=desc"),
        format!("/mirrors/{m}/topics/{}", t.name),
        "/operations".into(),
        "/audit".into(),
        "/instances".into(),
    ] {
        let r = s.get(&path, Some(&op_cookie), false).await;
        assert_eq!(r.status, 200, "{path}: {}", r.text);
        assert!(r.text.starts_with("<!doctype html>") && r.text.contains("</html>"), "{path}");
        assert!(
            r.text.contains(&t.name)
                || path == "/"
                || path.starts_with("/audit")
                || path == "/operations"
                || path == "/instances",
            "{path}"
        );
        assert_eq!(r.header("cache-control"), "no-store");
        let live = s.get(&format!("/ui{path}"), Some(&op_cookie), true).await;
        if path != "/" {
            assert_eq!(live.status, 200, "/ui{path}");
            assert!(!live.text.contains("<html"), "/ui{path} is a fragment");
            assert!(live.text.contains(r#"id="freshness""#), "/ui{path} carries the freshness indicator");
        }
    }

    // The topic's configs on both clusters: a page without JavaScript, a fragment for htmx.
    let configs = s.get(&format!("/mirrors/{m}/topics/{}/configs", t.name), Some(&view_cookie), false).await;
    assert_eq!(configs.status, 200, "{}", configs.text);
    assert!(
        configs.text.starts_with("<!doctype html>") && configs.text.contains("Every copied config of"),
        "{}",
        configs.text
    );
    assert!(configs.text.contains(r#"<tr data-config="compression.type">"#), "{}", configs.text);
    let fragment = s.get(&format!("/mirrors/{m}/topics/{}/configs", t.name), Some(&view_cookie), true).await;
    assert!(
        fragment.text.starts_with("<div id=\"configs-body\">") && !fragment.text.contains("<html"),
        "{}",
        fragment.text
    );
    assert_eq!(s.get(&format!("/mirrors/{m}/topics/nope/configs"), Some(&view_cookie), false).await.status, 404);

    // A standalone engine is one instance owning every slot, and owns every partition.
    let instances = s.get("/instances", Some(&view_cookie), false).await;
    let me = &engine.config.instance_id;
    assert!(instances.text.contains(&format!(r#"<tr data-instance="{me}" class="this-row">"#)), "{}", instances.text);
    assert!(instances.text.contains(">standalone<") && instances.text.contains("0–3"), "{}", instances.text);
    let parts = s.get(&format!("/mirrors/{m}/topics/{}", t.name), Some(&view_cookie), false).await;
    assert_eq!(
        parts.text.matches(&format!(r#"this</span> <span class="owner-id" title="{me}">{me}</span>"#)).count(),
        2
    );

    // The operator sees actions; the viewer sees none and is refused on POST.
    let op_page = s.get(&mirror_path, Some(&op_cookie), false).await;
    assert!(op_page.text.contains(r#"data-op="pause""#) && op_page.text.contains(r#"name="topic""#));
    let view_page = s.get(&mirror_path, Some(&view_cookie), false).await;
    assert!(!view_page.text.contains("data-op=") && !view_page.text.contains(r#"name="topic""#));
    assert!(!view_page.text.contains("Start mirroring topics"));
    let r =
        s.post(&actions, Some(&view_cookie), &[("_csrf", &view_csrf), ("op", "pause"), ("topic", &t.name)], &[]).await;
    assert_eq!(r.status, 403, "{}", r.text);
    assert!(r.text.contains("viewer") && r.text.contains("<!doctype html>"), "a readable HTML error page");
    let r = s.get(&format!("/mirrors/{m}/confirm?op=pause&topic={}", t.name), Some(&view_cookie), false).await;
    assert_eq!(r.status, 403);
    assert_eq!(s.get("/new-mirror", Some(&op_cookie), false).await.status, 403, "creating mirrors needs admin");

    // CSRF: missing or wrong token is refused, as a page or (htmx) as a toast — never JSON.
    let r = s.post(&actions, Some(&op_cookie), &[("op", "pause"), ("topic", &t.name)], &[]).await;
    assert_eq!(r.status, 403);
    assert!(r.text.contains("This form has expired"));
    let r =
        s.post(&actions, Some(&op_cookie), &[("_csrf", &view_csrf), ("op", "pause"), ("topic", &t.name)], &[]).await;
    assert_eq!(r.status, 403, "another session's token");
    let r = s.post(&actions, Some(&op_cookie), &[("op", "pause"), ("topic", &t.name)], &[("hx-request", "true")]).await;
    assert_eq!((r.status, r.header("hx-retarget")), (403, "#toasts"));
    assert!(r.text.contains(r#"class="toast"#) && !r.text.trim_start().starts_with('{'));
    assert_eq!(engine.states(&m, &t.name), vec![PartitionState::Mirroring; 2], "nothing happened");

    // The no-JavaScript action flow: confirmation page, plain POST, redirect with the results.
    let confirm = s.get(&format!("/mirrors/{m}/confirm?op=pause&topic={}", t.name), Some(&op_cookie), false).await;
    assert_eq!(confirm.status, 200);
    assert!(confirm.text.starts_with("<!doctype html>") && confirm.text.contains(r#"<form method="post""#));
    let csrf_in_form = confirm.hidden("_csrf");
    assert_eq!(csrf_in_form, op_csrf);
    let r = s
        .post(
            &actions,
            Some(&op_cookie),
            &[("_csrf", &csrf_in_form), ("op", "pause"), ("topic", &t.name), ("back", &mirror_path)],
            &[],
        )
        .await;
    assert_eq!(r.status, 303, "{}", r.text);
    let location = r.header("location").to_string();
    assert!(location.starts_with(&format!("{mirror_path}?done=")) && location.ends_with("#results"), "{location}");
    let after = s.get(location.trim_end_matches("#results"), Some(&op_cookie), false).await;
    assert!(after.text.contains("Pause: accepted for 1 topic"), "{}", after.text);
    engine.wait_state(&m, &t.name, PartitionState::Paused).await;

    // htmx: the header token works, the answer is the results fragment plus a refresh trigger.
    let r = s
        .post(
            &actions,
            Some(&op_cookie),
            &[("op", "resume"), ("topic", &t.name)],
            &[("hx-request", "true"), ("x-csrf-token", &op_csrf)],
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.header("hx-trigger"), "kmirror:refresh");
    assert!(r.text.contains("Resume: accepted for 1 topic") && r.text.contains(r#"id="modal" hx-swap-oob"#));
    engine.wait_state(&m, &t.name, PartitionState::Mirroring).await;

    // A confirmed failback start must carry the typed topic name too (the preview's form).
    let r = s
        .post(
            &actions,
            Some(&op_cookie),
            &[
                ("_csrf", &op_csrf),
                ("op", "start"),
                ("names", &t.name),
                ("failback_confirmed", "1"),
                ("confirm", "nope"),
            ],
            &[],
        )
        .await;
    assert_eq!(r.status, 422);
    assert!(r.text.contains("Failback not confirmed"), "{}", r.text);
    // A start with no lineage is not previewed: it runs (here: already mirrored, a harmless repeat).
    let r = s.post(&actions, Some(&op_cookie), &[("_csrf", &op_csrf), ("op", "start"), ("names", &t.name)], &[]).await;
    assert_eq!(r.status, 303, "{}", r.text);

    // Failover must carry the typed topic name.
    let r = s
        .post(
            &actions,
            Some(&op_cookie),
            &[("_csrf", &op_csrf), ("op", "failover"), ("topic", &t.name), ("confirm", "nope")],
            &[],
        )
        .await;
    assert_eq!(r.status, 422);
    assert!(r.text.contains("Failover not confirmed"));
    assert_eq!(engine.states(&m, &t.name), vec![PartitionState::Mirroring; 2]);
    let r = s
        .post(
            &actions,
            Some(&op_cookie),
            &[("_csrf", &op_csrf), ("op", "failover"), ("topic", &t.name), ("confirm", &t.name)],
            &[],
        )
        .await;
    assert_eq!(r.status, 303, "{}", r.text);
    engine.wait_state(&m, &t.name, PartitionState::Stopped).await;

    // Per-topic refusals are readable, and unknown mirrors are a 404 page.
    let r = s
        .post(
            &actions,
            Some(&op_cookie),
            &[("op", "pause"), ("topic", &t.name)],
            &[("hx-request", "true"), ("x-csrf-token", &op_csrf)],
        )
        .await;
    assert_eq!(r.status, 200);
    assert!(r.text.contains("refused for 1 topic") && r.text.contains("Illegal state transition"), "{}", r.text);
    let r = s.get("/mirrors/no-such-mirror", Some(&op_cookie), false).await;
    assert_eq!(r.status, 404);
    assert!(r.text.contains("No such mirror") && r.text.contains("<!doctype html>"));

    // The audit trail names who did it, from where.
    let audit = s.get("/audit", Some(&view_cookie), false).await;
    assert!(audit.text.contains("ui-operator") && audit.text.contains("127.0.0.1"));

    // The incident report: linked from the mirror page, a file for any signed-in viewer, with the
    // operations just done and the failed-over topic; nobody else gets it.
    assert!(view_page.text.contains(&format!(r#"href="/mirrors/{m}/report.md" download"#)), "{}", view_page.text);
    let md = s.get(&format!("/mirrors/{m}/report.md"), Some(&view_cookie), false).await;
    assert_eq!(md.status, 200, "{}", md.text);
    assert_eq!(md.header("content-type"), "text/markdown; charset=utf-8");
    let disposition = md.header("content-disposition").to_string();
    assert!(
        disposition.starts_with(&format!("attachment; filename=\"kmirror-{m}-")) && disposition.ends_with(".md\""),
        "{disposition}"
    );
    assert!(md.text.starts_with(&format!("# kmirror incident report: mirror `{m}`")), "{}", md.text);
    assert!(md.text.contains(&format!("| `{}` | STOPPED | STOPPED 2 |", t.name)), "{}", md.text);
    assert!(md.text.contains("| `stop` |") && md.text.contains("| ui-operator | 127.0.0.1 |"), "{}", md.text);
    let json = s.get(&format!("/mirrors/{m}/report.json"), Some(&view_cookie), false).await;
    assert_eq!(json.status, 200);
    let v: serde_json::Value = serde_json::from_str(&json.text).expect("JSON");
    assert_eq!(v["mirror"]["state_counts"]["STOPPED"], 2, "{v}");
    assert!(v["recent_operations"].as_array().unwrap().iter().any(|o| o["kind"] == "stop"), "{v}");
    assert_eq!(s.get("/mirrors/no-such-mirror/report.md", Some(&view_cookie), false).await.status, 404);
    let anonymous = s.get(&format!("/mirrors/{m}/report.md"), None, false).await;
    assert_eq!(anonymous.status, 303, "sent to sign in, not served");
    engine.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_auth_mode_still_needs_the_csrf_token() {
    let _rig = shared().await;
    let engine = TestEngine::start().await;
    let s = Server::start(engine.handle.clone(), TokenStore::disabled(), false).await;
    let r = s.get("/", None, false).await;
    assert_eq!(r.status, 200);
    assert!(r.text.contains("Authentication is off"));
    let session = cookie_pair(&r.set_cookies(), "kmirror_session");
    let r = s.post("/mirrors", Some(&session), &[("name", "x"), ("bootstrap", "127.0.0.1:1")], &[]).await;
    assert_eq!(r.status, 403, "a page elsewhere cannot post to a --no-auth dashboard");
    assert_eq!(s.get("/signin", None, false).await.status, 303, "nothing to sign in to");
    engine.stop().await;
}

/// Posts the New mirror form for `name` from the rig's source, with `extra` fields.
async fn new_mirror(s: &Server, cookie: &str, csrf: &str, name: &str, extra: &[(&str, &str)]) -> Resp {
    let bootstrap = Cluster::Source.bootstrap();
    let mut form = vec![("_csrf", csrf), ("name", name), ("bootstrap", bootstrap.as_str())];
    form.extend_from_slice(extra);
    s.post("/mirrors", Some(cookie), &form, &[]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_creates_and_deletes_a_mirror_through_forms() {
    let _rig = shared().await;
    let engine = TestEngine::start().await;
    let s = Server::start(engine.handle.clone(), tokens(), false).await;
    let (cookie, csrf) = s.sign_in(ADMIN).await;
    let name = unique("uinew");
    let r = s.get("/new-mirror", Some(&cookie), false).await;
    assert_eq!(r.status, 200);
    let r = new_mirror(&s, &cookie, &csrf, "bad name!", &[]).await;
    assert_eq!(r.status, 400, "invalid-name, as the API answers");
    assert!(r.text.contains("Invalid name") && r.text.contains("bad name!"), "the form comes back with the error");
    // A throttle that is not a number, or below the minimum, comes back with the rule.
    for (typed, says) in [("fast", "a number of MiB per second"), ("0.0001", "at least 1024")] {
        let r = new_mirror(&s, &cookie, &csrf, &name, &[("throttle_mib", typed)]).await;
        assert_eq!(r.status, 400, "{typed}: {}", r.text);
        assert!(
            r.text.contains(says) && r.text.contains(&format!(r#"name="throttle_mib" value="{typed}""#)),
            "{}",
            r.text
        );
    }
    assert!(engine.handle.snapshot().mirror(&name).is_none(), "nothing created");
    let fields = [
        ("properties", "client.id=kmirror-ui-test\n# comment\n"),
        ("sync_topic_configs", "on"),
        ("throttle_mib", "0.5"),
    ];
    let r = new_mirror(&s, &cookie, &csrf, &name, &fields).await;
    assert_eq!((r.status, r.header("location").to_string()), (303, format!("/mirrors/{name}")), "{}", r.text);
    let snap = engine.handle.snapshot();
    let m = snap.mirror(&name).expect("created");
    assert_eq!(m.source_properties.get("client.id").map(String::as_str), Some("kmirror-ui-test"));
    assert_eq!(m.replication_throttle_bytes_per_sec, Some(524_288), "0.5 MiB/s");
    let page = s.get(&format!("/mirrors/{name}"), Some(&cookie), false).await;
    assert!(page.text.contains("Delete this mirror"));
    assert!(page.text.contains(">throttled to 512.0 KiB/s per instance</span>"), "{}", page.text);
    let r =
        s.post(&format!("/mirrors/{name}/delete"), Some(&cookie), &[("_csrf", &csrf), ("confirm", "wrong")], &[]).await;
    assert_eq!(r.status, 422);
    let r =
        s.post(&format!("/mirrors/{name}/delete"), Some(&cookie), &[("_csrf", &csrf), ("confirm", &name)], &[]).await;
    assert_eq!((r.status, r.header("location")), (303, "/"), "{}", r.text);
    assert!(engine.handle.snapshot().mirror(&name).is_none());
    engine.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn static_files_are_embedded_and_cached() {
    let _rig = shared().await;
    let engine = TestEngine::start().await;
    let s = Server::start(engine.handle.clone(), tokens(), false).await;
    let page = s.get("/signin", None, false).await;
    let src = regex::Regex::new(r#"src="(/static/htmx\.min\.js\?v=[0-9a-f]+)""#).unwrap().captures(&page.text).unwrap()
        [1]
    .to_string();
    let r = s.get(&src, None, false).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("cache-control"), "public, max-age=31536000, immutable");
    assert!(r.header("content-type").starts_with("text/javascript"));
    assert!(r.text.starts_with("/*! htmx.org 2.0.11"), "the pinned, vendored htmx");
    let etag = r.header("etag").to_string();
    let r = s.send(s.client.get(format!("{}/static/app.css", s.base)).header("if-none-match", &etag)).await;
    assert_eq!(r.status, 304);
    let r = s.get("/static/app.css", None, false).await;
    assert_eq!((r.status, r.header("cache-control")), (200, "no-cache"), "unversioned URLs revalidate");
    assert_eq!(s.get("/static/nope.js", None, false).await.status, 404);
    assert_eq!(s.get("/static/..%2Fsrc%2Fmain.rs", None, false).await.status, 404);
    engine.stop().await;
}

/// Writes the fixture pages (a mismatched cluster ID, failed partitions, failing syncs) as HTML
/// files for design review: `KMIRROR_UI_DUMP=dir cargo test --test integration ui::dump`.
#[test]
fn dump_fixture_pages() {
    // Without KMIRROR_UI_DUMP the pages still render (and are checked) into a scratch folder.
    let dir = std::env::var("KMIRROR_UI_DUMP")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| std::env::temp_dir().join(format!("kmirror-ui-dump-{}", std::process::id())));
    std::fs::create_dir_all(&dir).unwrap();
    let snap = snapshot();
    let ops = operations();
    let op = viewer(Role::Operator);
    let pages: Vec<(&str, String)> = vec![
        ("overview", pages::overview(&snap, &ops, &viewer(Role::Admin), now(), Part::Page).unwrap()),
        ("mirror", pages::mirror(&snap, "eu-west", &params(&[]), &op, now(), Part::Page, None).unwrap()),
        ("mirror-broken", pages::mirror(&snap, "us-east", &params(&[]), &op, now(), Part::Page, None).unwrap()),
        (
            "topic-failed",
            pages::partitions(&snap, "eu-west", Some("clicks"), &params(&[]), &op, now(), Part::Page, None).unwrap(),
        ),
        (
            "confirm-restart",
            pages::confirm(&snap, "eu-west", UiOp::Restart, &["audit.log".into()], &op, false, "/").unwrap(),
        ),
        ("operation", pages::operation(&snap, &ops[0], &op, now(), Part::Page).unwrap()),
        ("instances", pages::instances(&snap, &op, now(), Part::Page).unwrap()),
    ];
    for (name, html) in pages {
        assert!(html.contains("<html") && html.contains("</html>"), "{name} renders a whole page");
        std::fs::write(dir.join(format!("{name}.html")), html).unwrap();
    }
    if std::env::var("KMIRROR_UI_DUMP").is_err() {
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn the_incident_report_has_what_a_ticket_needs_and_no_secret() {
    use kmirror::api::report;
    let (mut snap, h) = trending();
    // An error text from outside that would break a table or inject HTML where the Markdown is
    // rendered, and a failed-over partition whose old source still receives records.
    let clicks = snap.mirrors[0].topics.iter_mut().find(|t| t.name == "clicks").expect("clicks");
    clicks.partitions[1].error.as_mut().unwrap().message = "broker said | <script>alert(1)</script>\nnext line".into();
    let audit = snap.mirrors[0].topics.iter_mut().find(|t| t.name == "audit.log").expect("audit.log");
    audit.partitions[1].source_writes_after_stop = Some(42);
    let m = snap.mirror("eu-west").unwrap();
    let mut ops = operations();
    let mut elsewhere = ops[0].clone();
    (elsewhere.id, elsewhere.mirror) = ("op-000003".into(), "us-east".into());
    ops.insert(0, elsewhere);
    let r = report::build(&snap, m, &h, &ops, now());

    // What needs attention, in order: FAILED first, then the between-states, then split brain;
    // healthy MIRRORING, PAUSED and STOPPED partitions are left out.
    let attention: Vec<String> = r.attention.items.iter().map(|p| format!("{}/{}", p.topic, p.partition)).collect();
    assert_eq!(attention, ["clicks/1", "payments/2", "audit.log/1"]);
    assert_eq!(r.attention.total, 3);
    // FAILED topics first, then by lag; the largest lags, largest first.
    assert_eq!(
        r.topics.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
        ["clicks", "orders", "payments", "audit.log"]
    );
    let lags: Vec<i64> = r.largest_lag.iter().map(|p| p.lag_records).collect();
    assert_eq!(lags.len(), report::MAX_TOP_LAG.min(9), "{lags:?}");
    assert!(lags.windows(2).all(|w| w[0] >= w[1]), "{lags:?}");
    // Only this mirror's operations, newest first; the deployment; an hour of lag.
    assert_eq!(r.recent_operations.iter().map(|o| o.id.as_str()).collect::<Vec<_>>(), ["op-000002", "op-000001"]);
    assert_eq!((r.instances.instances.len(), r.generated_by.instance.as_str()), (3, "kmirror-1"));
    assert_eq!(r.lag_history.samples.len(), 60);
    assert_eq!(r.health.source_writes_after_failover.len(), 1);

    let json = serde_json::to_string(&r).unwrap();
    let md = report::markdown(&r);
    for text in [&json, &md] {
        assert!(!text.contains("hunter2"), "the source's SASL password never appears");
    }
    assert!(json.contains("\"sasl.password\":\"[redacted]\""), "the property is there, redacted");
    // The hostile error text is one escaped cell: no raw pipe, tag or line break from it.
    let row = md.lines().find(|l| l.starts_with("| `clicks`/1 |")).expect("the FAILED partition's row");
    assert!(
        row.contains("`SOURCE_TOPIC_RECREATED`: broker said \\| &lt;script&gt;alert(1)&lt;/script&gt; next line"),
        "{row}"
    );
    assert!(!md.contains("<script>"), "{md}");
    assert_eq!(
        row.matches(" | ").count() + 2,
        md.lines().find(|l| l.starts_with("| Partition | State")).unwrap().matches('|').count(),
        "{row}"
    );
    insta::assert_snapshot!("incident_report_markdown", md);

    assert_eq!(
        report::file_name("eu-west", now(), report::ReportFormat::Markdown),
        "kmirror-eu-west-20260921T141320Z.md"
    );
}

#[test]
fn groups_a_failover_would_not_resume_are_counted_per_mirror() {
    let mut snap = snapshot();
    snap.mirrors[1].groups.retain(|g| g.group == "billing-service");
    let out = kmirror::api::metrics::render(&snap, now(), &kmirror::api::HttpMetrics::default(), "test");
    assert!(out.contains("# TYPE kmirror_consumer_groups_not_ready gauge\n"), "{out}");
    assert!(out.contains("kmirror_consumer_groups_not_ready{mirror=\"eu-west\"} 1\n"), "fraud-scoring: {out}");
    assert!(out.contains("kmirror_consumer_groups_not_ready{mirror=\"us-east\"} 0\n"), "only a ready group: {out}");
}
