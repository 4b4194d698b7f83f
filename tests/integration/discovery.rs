//! A mirror's topic policy (`topic_include` / `topic_exclude`) on the real rig: source topics
//! created after the mirror that match it are mirrored exactly, excluded and unmatched ones never
//! reach the destination, a start's pattern is followed, a stop with `exclude` stays stopped
//! across refreshes and restarts, a conflicting destination topic is refused and left alone, and
//! a policy change's preview is what the change then does.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use reqwest::Method;
use serde_json::json;

use kmirror::domain::PartitionState;
use kmirror::engine::{
    Actor, EngineConfig, LifecycleOp, MirrorSpec, OperationKind, ProblemKind, SourceSpec, TopicSelector, Truncation,
};

use crate::api::{ADMIN, OPERATOR, TestServer, tokens};
use crate::engine::{TestEngine, assert_same_content, keyed};
use crate::support::*;

const START: LifecycleOp = LifecycleOp::Start { truncation: Truncation::None };

fn actor() -> Actor {
    Actor { identity: "ci-operator".into(), address: None }
}

/// An engine that refreshes metadata (and so discovers) every second.
fn discovering() -> EngineConfig {
    let mut config = TestEngine::config();
    config.metadata_refresh_interval = Duration::from_secs(1);
    config
}

async fn create_with_policy(eng: &TestEngine, name: &str, include: Vec<String>, exclude: Vec<String>) {
    let spec = MirrorSpec {
        name: name.to_string(),
        source: SourceSpec { bootstrap_servers: Cluster::Source.bootstrap(), properties: BTreeMap::new() },
        expected_source_cluster_id: None,
        sync: Default::default(),
        replication_throttle_bytes_per_sec: None,
        topic_include: include,
        topic_exclude: exclude,
        approval: Default::default(),
    };
    eng.handle.create_mirror(spec, actor()).await.expect("create mirror");
}

/// Discovery runs of `mirror` on this engine so far.
fn runs(eng: &TestEngine, mirror: &str) -> u64 {
    eng.handle.snapshot().mirror(mirror).map_or(0, |m| m.discovery.runs_total)
}

/// Waits until `n` more discovery runs than now have completed.
async fn wait_runs(eng: &TestEngine, mirror: &str, n: u64) {
    let target = runs(eng, mirror) + n;
    eventually(&format!("{n} more discovery runs of {mirror}"), Duration::from_secs(60), || async {
        (runs(eng, mirror) >= target).then_some(())
    })
    .await;
}

/// Whether the destination has a topic of that name.
async fn on_destination(topic: &str) -> bool {
    match Cluster::Destination.admin().describe_topic(topic).await {
        Ok(_) => true,
        Err(e) if e.is(kmirror::kafka::KafkaErrorKind::UnknownTopicOrPartition) => false,
        Err(e) => panic!("describe {topic}: {e}"),
    }
}

/// The topics discovery started (`kind` Start) or stopped (Stop) for `mirror`, one entry per
/// (operation, topic) that succeeded.
fn discovery_topics(eng: &TestEngine, mirror: &str, kind: OperationKind) -> Vec<String> {
    eng.handle
        .operations()
        .into_iter()
        .filter(|o| o.mirror == mirror && o.requested_by == "discovery" && o.kind == kind)
        .flat_map(|o| o.results.into_iter().filter(|r| r.ok).map(|r| r.topic))
        .collect()
}

async fn cleanup(eng: TestEngine, mirror: &str, topics: &[&str]) {
    let _ = eng.handle.lifecycle(mirror, TopicSelector::Pattern(".*".into()), LifecycleOp::Stop, false, actor()).await;
    eng.stop().await;
    for t in topics {
        let _ = Cluster::Destination.admin().delete_topic(t).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topics_created_later_that_match_the_policy_are_mirrored_exactly() {
    let _rig = shared().await;
    let prefix = unique("disc");
    let esc = regex::escape(&prefix);
    let eng = TestEngine::with_config(discovering()).await;
    let mirror = unique("m-disc");
    let mut exclude = kmirror::domain::topic_policy::default_exclude();
    exclude.push(format!(r"{esc}\.orders\.tmp.*"));
    create_with_policy(&eng, &mirror, vec![format!(r"{esc}\.orders\..*")], exclude).await;
    // An idle run writes nothing: nothing matches yet.
    wait_runs(&eng, &mirror, 1).await;
    assert!(discovery_topics(&eng, &mirror, OperationKind::Start).is_empty());

    // Created after the mirror: three that match, one excluded, one that does not match.
    let matching = [
        TestTopic::create(Cluster::Source, &format!("{prefix}.orders.eu"), 3, &[]).await,
        TestTopic::create(Cluster::Source, &format!("{prefix}.orders.us"), 2, &[]).await,
        TestTopic::create(Cluster::Source, &format!("{prefix}.orders.apac"), 1, &[("retention.ms", "7200000")]).await,
    ];
    let excluded = TestTopic::create(Cluster::Source, &format!("{prefix}.orders.tmp"), 1, &[]).await;
    let unmatched = TestTopic::create(Cluster::Source, &format!("{prefix}.payments"), 1, &[]).await;
    for (t, n) in matching.iter().zip([3, 2, 1]) {
        let name = t.name.clone();
        tokio::task::spawn_blocking(move || produce(Cluster::Source, &name, &keyed(300, n, "before"))).await.unwrap();
    }
    for t in [&excluded, &unmatched] {
        let name = t.name.clone();
        tokio::task::spawn_blocking(move || produce(Cluster::Source, &name, &keyed(10, 1, "never"))).await.unwrap();
    }
    for (t, n) in matching.iter().zip([3, 2, 1]) {
        eng.wait_state(&mirror, &t.name, PartitionState::Mirroring).await;
        let name = t.name.clone();
        tokio::task::spawn_blocking(move || produce(Cluster::Source, &name, &keyed(100, n, "after"))).await.unwrap();
        eng.wait_caught_up(&mirror, &t.name, n).await;
        assert_eq!(assert_same_content(&t.name, n).await, 400, "{}", t.name);
    }
    // Created like an operator's start: the source's partition count and its configs.
    let configs = Cluster::Destination.admin().describe_topic_configs(&matching[2].name).await.unwrap();
    assert!(configs.iter().any(|c| c.name == "retention.ms" && c.value.as_deref() == Some("7200000")));

    // Two more runs later the excluded and the unmatched topic are still nowhere.
    wait_runs(&eng, &mirror, 2).await;
    assert!(!on_destination(&excluded.name).await, "an excluded topic reached the destination");
    assert!(!on_destination(&unmatched.name).await, "an unmatched topic reached the destination");
    let snap = eng.handle.snapshot();
    let m = snap.mirror(&mirror).unwrap();
    assert!(m.topic(&excluded.name).is_none() && m.topic(&unmatched.name).is_none());
    let plan = m.discovery.plan.clone().expect("a plan");
    assert!(plan.excluded.iter().any(|(t, why)| *t == excluded.name && why.contains("topic_exclude")), "{plan:?}");
    assert!(plan.start.is_empty(), "nothing left to start: {plan:?}");
    assert!(m.discovery.runs_here);

    // Each discovered topic was started once, by discovery, in the operation log.
    let mut started = discovery_topics(&eng, &mirror, OperationKind::Start);
    started.sort();
    let mut expected: Vec<String> = matching.iter().map(|t| t.name.clone()).collect();
    expected.sort();
    assert_eq!(started, expected);
    assert_eq!(m.discovery.topics_started_total, 3);

    let names: Vec<&str> = matching.iter().map(|t| t.name.as_str()).collect();
    cleanup(eng, &mirror, &names).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_pattern_is_followed_and_a_stop_with_exclude_keeps_topics_stopped() {
    let _rig = shared().await;
    let prefix = unique("follow");
    let esc = regex::escape(&prefix);
    let config = discovering();
    let eng = TestEngine::with_config(config.clone()).await;
    let mirror = unique("m-follow");
    eng.create_mirror(&mirror).await;
    let first = TestTopic::create(Cluster::Source, &format!("{prefix}.pay"), 2, &[]).await;
    let name = first.name.clone();
    tokio::task::spawn_blocking(move || produce(Cluster::Source, &name, &keyed(50, 2, "first"))).await.unwrap();

    // A start with a pattern starts what matches now and saves the pattern.
    let pattern = format!(r"{esc}\.pay.*");
    let r =
        eng.handle.lifecycle(&mirror, TopicSelector::Pattern(pattern.clone()), START, false, actor()).await.unwrap();
    assert!(r.results.iter().all(|o| o.ok) && r.results.len() == 1, "{r:?}");
    let saved = r.saved_pattern.expect("the pattern is saved");
    assert_eq!((saved.list.as_str(), saved.pattern.as_str()), ("topic_include", pattern.as_str()));
    assert_eq!(eng.handle.snapshot().mirror(&mirror).unwrap().topic_include, vec![pattern.clone()]);

    // A topic created later that matches the saved pattern is mirrored.
    let later = TestTopic::create(Cluster::Source, &format!("{prefix}.payouts"), 2, &[]).await;
    let name = later.name.clone();
    tokio::task::spawn_blocking(move || produce(Cluster::Source, &name, &keyed(60, 2, "later"))).await.unwrap();
    eng.wait_state(&mirror, &later.name, PartitionState::Mirroring).await;
    eng.wait_caught_up(&mirror, &later.name, 2).await;
    assert_eq!(assert_same_content(&later.name, 2).await, 60);

    // A stop with `exclude` fails the topic over and keeps it out of discovery.
    let r = eng
        .handle
        .stop_and_exclude(&mirror, TopicSelector::Names(vec![first.name.clone()]), false, actor())
        .await
        .unwrap();
    assert!(r.results.iter().all(|o| o.ok), "{r:?}");
    let saved = r.saved_pattern.expect("the name is saved as an exclusion");
    assert_eq!((saved.list.as_str(), saved.pattern.clone()), ("topic_exclude", regex::escape(&first.name)));
    eng.wait_state(&mirror, &first.name, PartitionState::Stopped).await;
    wait_runs(&eng, &mirror, 2).await;
    assert!(eng.states(&mirror, &first.name).iter().all(|s| *s == PartitionState::Stopped));
    // Named on its own, an excluded topic is refused with the reason.
    let r = eng.op(&mirror, &[&first.name], START).await;
    let e = r.results[0].error.clone().expect("refused");
    assert_eq!(e.kind, ProblemKind::TopicExcluded, "{e:?}");
    assert!(e.detail.contains("topic_exclude"), "{e:?}");

    // After a restart the policy is the stored one: still stopped, and new topics still followed.
    eng.stop().await;
    let eng = TestEngine::with_config(config).await;
    let m = eng.handle.snapshot().mirror(&mirror).cloned().expect("mirror restored");
    assert_eq!(m.topic_include, vec![pattern]);
    assert!(m.topic_exclude.contains(&regex::escape(&first.name)), "{:?}", m.topic_exclude);
    let third = TestTopic::create(Cluster::Source, &format!("{prefix}.payroll"), 1, &[]).await;
    eng.wait_state(&mirror, &third.name, PartitionState::Mirroring).await;
    wait_runs(&eng, &mirror, 2).await;
    assert!(eng.states(&mirror, &first.name).iter().all(|s| *s == PartitionState::Stopped));
    cleanup(eng, &mirror, &[&first.name, &later.name, &third.name]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_matching_ordinary_destination_topic_is_refused_and_left_alone() {
    let _rig = shared().await;
    let prefix = unique("refuse");
    let name = format!("{prefix}.legacy");
    // An ordinary topic on the destination with records of its own, and a source topic of the
    // same name.
    Cluster::Destination.admin().create_topic(&name, 1, -1, &[]).await.unwrap();
    let n = name.clone();
    tokio::task::spawn_blocking(move || produce(Cluster::Destination, &n, &keyed(7, 1, "local"))).await.unwrap();
    Cluster::Source.admin().create_topic(&name, 1, -1, &[]).await.unwrap();
    let n = name.clone();
    tokio::task::spawn_blocking(move || produce(Cluster::Source, &n, &keyed(5, 1, "source"))).await.unwrap();

    let eng = TestEngine::with_config(discovering()).await;
    let mirror = unique("m-refuse");
    let include = vec![format!(r"{}\..*", regex::escape(&prefix))];
    create_with_policy(&eng, &mirror, include, kmirror::domain::topic_policy::default_exclude()).await;
    let refusal = eventually("the start is refused", Duration::from_secs(60), || async {
        let snap = eng.handle.snapshot();
        snap.mirror(&mirror)?.discovery.refused.iter().find(|(t, _)| *t == name).map(|(_, r)| r.clone())
    })
    .await;
    assert_eq!(refusal.kind, ProblemKind::DestinationTopicConflict, "{refusal:?}");
    assert!(refusal.detail.contains("already holds records"), "{refusal:?}");
    // Held back, not retried at every run, and the destination's records are untouched.
    wait_runs(&eng, &mirror, 3).await;
    let snap = eng.handle.snapshot();
    let m = snap.mirror(&mirror).unwrap();
    assert!(m.topic(&name).is_none(), "a refused topic is not the mirror's");
    let r = m.discovery.refused.iter().find(|(t, _)| *t == name).unwrap().1.clone();
    assert_eq!(r.tried_at, refusal.tried_at, "tried again at a routine run");
    assert!(m.discovery.plan.as_ref().unwrap().held_back.contains(&name));
    let n = name.clone();
    let local =
        tokio::task::spawn_blocking(move || crate::engine::read_all(Cluster::Destination, &n, 1)).await.unwrap();
    assert_eq!(local[&0].len(), 7);
    assert!(local[&0].iter().all(|c| c.value.as_deref().is_some_and(|v| v.starts_with(b"local"))));
    // No operation records a run that started nothing but refusals? It does: the refusal is an
    // outcome an operator must see in the log too.
    let ops: Vec<_> = eng.handle.operations().into_iter().filter(|o| o.mirror == mirror).collect();
    assert!(ops.iter().any(|o| o.requested_by == "discovery" && o.results.iter().any(|r| r.topic == name && !r.ok)));

    // An explicit refresh tries it again (and it is refused again, with the same reason).
    eng.handle.refresh_now(&mirror).await.unwrap();
    eventually("tried again after a refresh", Duration::from_secs(60), || async {
        let snap = eng.handle.snapshot();
        let r = snap.mirror(&mirror)?.discovery.refused.iter().find(|(t, _)| *t == name)?.1.clone();
        (r.tried_at > refusal.tried_at && r.since == refusal.since).then_some(())
    })
    .await;
    eng.stop().await;
    let _ = Cluster::Destination.admin().delete_topic(&name).await;
    let _ = Cluster::Source.admin().delete_topic(&name).await;
}

/// The API's view: a PATCH's preview is what the PATCH then does, a stale `If-Match` changes
/// nothing, and `/discovery` shows the policy's facts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_preview_lists_what_the_change_then_does() {
    let _rig = shared().await;
    let prefix = unique("preview");
    let esc = regex::escape(&prefix);
    let eng = TestEngine::with_config(discovering()).await;
    let srv = TestServer::start(eng.handle.clone(), tokens()).await;
    let mirror = unique("m-preview");
    let created = srv
        .post(
            "/api/v1/mirrors",
            ADMIN,
            json!({"name": mirror, "source": {"bootstrap_servers": Cluster::Source.bootstrap()}}),
        )
        .await;
    let created = created.ok(201);
    assert_eq!(created["topic_include"], json!([]));
    assert_eq!(created["topic_exclude"], json!(["__.*", r".*\.kmirror-diverged"]));
    let a1 = TestTopic::create(Cluster::Source, &format!("{prefix}.a1"), 1, &[]).await;
    let a2 = TestTopic::create(Cluster::Source, &format!("{prefix}.a2"), 1, &[]).await;
    let b1 = TestTopic::create(Cluster::Source, &format!("{prefix}.b1"), 1, &[]).await;
    let path = format!("/api/v1/mirrors/{mirror}");
    srv.post(&format!("{path}/topics:start"), OPERATOR, json!({"topics": [b1.name]})).await.ok(200);
    eng.wait_state(&mirror, &b1.name, PartitionState::Mirroring).await;

    let etag = |r: &crate::api::Resp| r.header("etag").to_string();
    let before = srv.get(&path, Some(ADMIN)).await;
    let version = etag(&before);
    let change = json!({
        "topic_include": [format!(r"{esc}\.a.*")],
        "topic_exclude": ["__.*", regex::escape(&b1.name)],
    });
    let mut preview_body = change.clone();
    preview_body["validate_only"] = json!(true);
    let preview = srv.call(Method::PATCH, &path, Some(ADMIN), preview_body).await;
    let p = preview.ok(200)["policy_preview"].clone();
    assert_eq!(p["would_start"], json!([a1.name, a2.name]), "{p}");
    assert_eq!(p["would_stop"], json!([{"topic": b1.name, "pattern": regex::escape(&b1.name)}]), "{p}");
    assert_eq!(p["matched"], json!(2));
    // Nothing changed.
    let after = srv.get(&path, Some(ADMIN)).await;
    assert_eq!((after.json["topic_include"].clone(), etag(&after)), (json!([]), version.clone()));
    assert!(preview.json["topic_include"] == json!([]), "the preview answers the mirror as it is");
    // A bad pattern is refused by the preview as by the change.
    let bad =
        srv.call(Method::PATCH, &path, Some(ADMIN), json!({"topic_include": ["a)|(b"], "validate_only": true})).await;
    assert_eq!((bad.status, bad.json["type"].clone()), (400, json!("invalid-pattern")), "{}", bad.text);

    // Someone changes the mirror in between: a PATCH based on the old version changes nothing.
    srv.call(Method::PATCH, &path, Some(ADMIN), json!({"replication_throttle_bytes_per_sec": 1048576})).await.ok(200);
    let stale =
        srv.send(srv.request(Method::PATCH, &path, Some(ADMIN)).header("If-Match", &version).json(&change)).await;
    assert_eq!((stale.status, stale.json["type"].clone()), (412, json!("precondition-failed")), "{}", stale.text);
    assert_eq!(srv.get(&path, Some(ADMIN)).await.json["topic_include"], json!([]));

    // The change itself does what the preview said.
    let fresh = etag(&srv.get(&path, Some(ADMIN)).await);
    let done = srv.send(srv.request(Method::PATCH, &path, Some(ADMIN)).header("If-Match", &fresh).json(&change)).await;
    assert_eq!(done.ok(200)["topic_include"], change["topic_include"]);
    eng.wait_state(&mirror, &a1.name, PartitionState::Mirroring).await;
    eng.wait_state(&mirror, &a2.name, PartitionState::Mirroring).await;
    eng.wait_state(&mirror, &b1.name, PartitionState::Stopped).await;
    // A discovery run is recorded as one operation when its last batch answers, which can be
    // after its partitions are already mirroring: wait for both operations, then compare.
    let (started, stopped) = eventually("discovery's start and stop operations", Duration::from_secs(60), || async {
        let topics = |kind| discovery_topics(&eng, &mirror, kind).into_iter().collect::<BTreeSet<_>>();
        let (started, stopped) = (topics(OperationKind::Start), topics(OperationKind::Stop));
        // The counters are published just after the run's operation is recorded.
        let counted = eng.handle.snapshot().mirror(&mirror)?.discovery.topics_started_total >= 2;
        (!started.is_empty() && !stopped.is_empty() && counted).then_some((started, stopped))
    })
    .await;
    assert_eq!(started, [a1.name.clone(), a2.name.clone()].into());
    assert_eq!(stopped, [b1.name.clone()].into());

    // The discovery view.
    let d = srv.get(&format!("{path}/discovery"), Some(OPERATOR)).await;
    let d = d.ok(200);
    assert_eq!(d["active"], json!(true));
    assert_eq!(d["matched"], json!([a1.name, a2.name]), "{d}");
    assert_eq!(d["mirrored"], json!([a1.name, a2.name]), "{d}");
    assert_eq!(d["runs_here"], json!(true));
    assert!(d["last_run"]["topics_seen"].as_u64().unwrap() >= 3, "{d}");
    assert!(
        d["topics_started_total"].as_u64().unwrap() >= 2 && d["topics_stopped_total"].as_u64().unwrap() >= 1,
        "{d}"
    );
    let metrics = srv.get("/metrics", Some(OPERATOR)).await.text;
    assert!(metrics.contains(&format!("kmirror_discovery_topics_started_total{{mirror=\"{mirror}\"}} 2")), "{metrics}");
    assert!(metrics.contains(&format!("kmirror_discovery_refused_topics{{mirror=\"{mirror}\"}} 0")));
    // Unknown mirror.
    let missing = srv.get("/api/v1/mirrors/no-such-mirror/discovery", Some(OPERATOR)).await;
    assert_eq!(missing.status, 404);

    srv.stop().await;
    cleanup(eng, &mirror, &[&a1.name, &a2.name, &b1.name]).await;
}
