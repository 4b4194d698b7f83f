//! Slot ownership through the consumer-group protocol (`kafka::membership`) on the rig's
//! destination cluster: the group splits the state topic's partitions between instances, a
//! closed static member's slots move after the session timeout, a static restart moves nothing,
//! and a join only revokes the slots that move.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, ResourceSpecifier};
use rdkafka::client::DefaultClientContext;
use rdkafka::types::RDKafkaErrorCode;
use tokio::sync::mpsc;

use kmirror::kafka::membership::{Membership, MembershipConfig, MembershipEvent};

use crate::support::*;

/// The brokers' smallest allowed session timeout (`group.min.session.timeout.ms`).
const SESSION: Duration = Duration::from_secs(6);
const SLOTS: i32 = 16;

/// An event as the test saw it (`done` is answered at once).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Ev {
    Assigned(Vec<i32>),
    Revoked(Vec<i32>),
    Lost(Vec<i32>),
}

/// One instance: the membership and the events it sent, answered and recorded by a task.
struct Member {
    id: String,
    membership: Option<Membership>,
    events: Arc<Mutex<Vec<Ev>>>,
}

impl Member {
    fn start(group: &str, topic: &str, id: &str) -> Member {
        Member::start_with(group, topic, id, None)
    }

    /// A member whose revokes are not answered: each revoke's `done` goes to `held` (the
    /// rebalance callback blocks until it is sent or dropped).
    fn start_with(
        group: &str,
        topic: &str,
        id: &str,
        held: Option<Arc<Mutex<Vec<tokio::sync::oneshot::Sender<()>>>>>,
    ) -> Member {
        let mut cfg = MembershipConfig::new(Cluster::Destination.bootstrap(), Default::default(), group, id, topic);
        cfg.session_timeout = SESSION;
        let (tx, mut rx) = mpsc::unbounded_channel();
        let membership = Membership::start(cfg, tx).expect("start membership");
        let events = Arc::new(Mutex::new(Vec::new()));
        tokio::spawn({
            let events = events.clone();
            async move {
                while let Some(ev) = rx.recv().await {
                    let ev = match ev {
                        MembershipEvent::Assigned(s) => Ev::Assigned(s),
                        MembershipEvent::Revoked { slots, done } => {
                            match &held {
                                Some(held) => held.lock().unwrap().push(done),
                                None => {
                                    let _ = done.send(());
                                }
                            }
                            Ev::Revoked(slots)
                        }
                        MembershipEvent::Lost(s) => Ev::Lost(s),
                    };
                    events.lock().unwrap().push(ev);
                }
            }
        });
        Member { id: id.to_string(), membership: Some(membership), events }
    }

    fn owned(&self) -> BTreeSet<i32> {
        self.membership.as_ref().expect("running").owned().into_iter().collect()
    }

    fn events(&self) -> Vec<Ev> {
        self.events.lock().unwrap().clone()
    }

    /// The slots the events add up to.
    fn held_by_events(&self) -> BTreeSet<i32> {
        let mut held = BTreeSet::new();
        for ev in self.events() {
            match ev {
                Ev::Assigned(s) => held.extend(s),
                Ev::Revoked(s) | Ev::Lost(s) => s.iter().for_each(|x| {
                    held.remove(x);
                }),
            }
        }
        held
    }

    /// Owned slots, once `owned()` and the events agree.
    fn settled(&self) -> Option<BTreeSet<i32>> {
        let owned = self.owned();
        (owned == self.held_by_events()).then_some(owned)
    }

    async fn close(&mut self) {
        let m = self.membership.take().expect("running");
        tokio::task::spawn_blocking(move || m.close()).await.expect("close");
    }
}

/// The members' slots once every member owns a non-empty share, the shares are disjoint, cover
/// all slots, and agree with each member's events.
fn split(members: &[&Member]) -> Option<Vec<BTreeSet<i32>>> {
    let sets: Vec<BTreeSet<i32>> = members.iter().map(|m| m.settled()).collect::<Option<_>>()?;
    let total: usize = sets.iter().map(BTreeSet::len).sum();
    let union: BTreeSet<i32> = sets.iter().flatten().copied().collect();
    (sets.iter().all(|s| !s.is_empty()) && total == SLOTS as usize && union == (0..SLOTS).collect()).then_some(sets)
}

async fn until_split(what: &str, members: &[&Member]) -> Vec<BTreeSet<i32>> {
    eventually(what, Duration::from_secs(60), || async { split(members) }).await
}

fn admin() -> AdminClient<DefaultClientContext> {
    ClientConfig::new().set("bootstrap.servers", Cluster::Destination.bootstrap()).create().expect("admin client")
}

/// A consumer group deleted when the test ends. Closed static members stay in the group until
/// their session times out, so deletion retries until then.
struct TestGroup {
    name: String,
}

impl TestGroup {
    fn new() -> TestGroup {
        TestGroup { name: unique("kmirror-membership") }
    }
}

impl Drop for TestGroup {
    fn drop(&mut self) {
        let name = self.name.clone();
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
            rt.block_on(async {
                let admin = admin();
                let deadline = Instant::now() + SESSION + Duration::from_secs(15);
                while Instant::now() < deadline {
                    if let Ok(results) = admin.delete_groups(&[name.as_str()], &AdminOptions::new()).await
                        && matches!(results.first(), Some(Ok(_)) | Some(Err((_, RDKafkaErrorCode::GroupIdNotFound))))
                    {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                eprintln!("consumer group {name} not deleted");
            });
        })
        .join();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_members_split_the_slots() {
    let _rig = shared().await;
    let topic = TestTopic::create(Cluster::Destination, "mstate", SLOTS, &[]).await;
    let group = TestGroup::new();
    let a = Member::start(&group.name, &topic.name, "a");
    let b = Member::start(&group.name, &topic.name, "b");
    let sets = until_split("a and b to split 16 slots", &[&a, &b]).await;
    println!("a owns {:?}, b owns {:?}", sets[0], sets[1]);
    for m in [&a, &b] {
        let rebalances = m.membership.as_ref().unwrap().rebalances();
        assert!(rebalances > 0, "{}: rebalances {rebalances}", m.id);
        assert!(!m.events().iter().any(|e| matches!(e, Ev::Lost(_))), "{}: {:?}", m.id, m.events());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_member_s_slots_move_after_the_session_timeout() {
    let _rig = shared().await;
    let topic = TestTopic::create(Cluster::Destination, "mstate", SLOTS, &[]).await;
    let group = TestGroup::new();
    let mut a = Member::start(&group.name, &topic.name, "a");
    let b = Member::start(&group.name, &topic.name, "b");
    let sets = until_split("a and b to split 16 slots", &[&a, &b]).await;
    let (a_slots, b_slots) = (sets[0].clone(), sets[1].clone());
    let b_seen = b.events().len();

    a.close().await;
    let closed = Instant::now();
    // Closing revokes a's slots locally, in order (a static member sends no LeaveGroup).
    let a_events = a.events();
    assert_eq!(a_events.last(), Some(&Ev::Revoked(a_slots.iter().copied().collect())), "{a_events:?}");

    let all: BTreeSet<i32> = (0..SLOTS).collect();
    eventually("b to own all slots", SESSION + Duration::from_secs(10), || async {
        (b.settled().as_ref() == Some(&all)).then_some(())
    })
    .await;
    let takeover = closed.elapsed();
    println!("takeover after a closed: {takeover:?} (session timeout {SESSION:?})");
    // The session runs from a's last heartbeat (every 1.5 s), not from the close.
    assert!(takeover >= SESSION - Duration::from_secs(2), "a static member's slots moved before its session expired");
    // b kept its own slots throughout and got exactly a's.
    let b_new = &b.events()[b_seen..];
    assert!(b_new.iter().all(|e| matches!(e, Ev::Assigned(_))), "{b_new:?}");
    let gained: BTreeSet<i32> =
        b_new.iter().flat_map(|e| if let Ev::Assigned(s) = e { s.clone() } else { vec![] }).collect();
    assert_eq!(gained, a_slots, "b gained exactly a's slots (b had {b_slots:?})");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_static_restart_moves_nothing() {
    let _rig = shared().await;
    let topic = TestTopic::create(Cluster::Destination, "mstate", SLOTS, &[]).await;
    let group = TestGroup::new();
    let mut a = Member::start(&group.name, &topic.name, "a");
    let b = Member::start(&group.name, &topic.name, "b");
    let sets = until_split("a and b to split 16 slots", &[&a, &b]).await;
    let (a_slots, b_slots) = (sets[0].clone(), sets[1].clone());
    let b_seen = b.events().len();

    a.close().await;
    let closed = Instant::now();
    let a2 = Member::start(&group.name, &topic.name, "a");
    eventually("the restarted a to get its slots back", SESSION, || async {
        (a2.settled().as_ref() == Some(&a_slots)).then_some(())
    })
    .await;
    println!("restarted a owns its {} slots again {:?} after the close", a_slots.len(), closed.elapsed());
    assert!(closed.elapsed() < SESSION, "within the session timeout");
    assert_eq!(a2.events(), vec![Ev::Assigned(a_slots.iter().copied().collect())]);

    // Watch b past the old member's session timeout: its slots never change.
    let watch_until = closed + SESSION + Duration::from_secs(3);
    while Instant::now() < watch_until {
        assert_eq!(b.owned(), b_slots);
        assert_eq!(a2.owned(), a_slots);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(&b.events()[b_seen..], &[] as &[Ev], "b saw no event");
}

/// The gap between static membership and cooperative rebalancing, and its repair: `a` owns every
/// slot, `b` joins, and in the first round of the rebalance `a` is asked to revoke the slots that
/// move to `b` (`b` gets nothing yet). Before `a` rejoins for the second round, `a` is replaced by
/// a restarted `a` (same instance id, within the session timeout): the coordinator hands it the
/// first round's assignment without a rebalance, and the revoked slots belong to nobody, for
/// good. [`Membership::nudge`] makes the group rebalance, and `a` and `b` split every slot again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_between_rebalance_rounds_leaves_slots_unowned_until_a_nudge() {
    let _rig = shared().await;
    let topic = TestTopic::create(Cluster::Destination, "mstate", SLOTS, &[]).await;
    let group = TestGroup::new();
    let held = Arc::new(Mutex::new(Vec::new()));
    let mut a = Member::start_with(&group.name, &topic.name, "a", Some(held.clone()));
    eventually("a to own every slot", Duration::from_secs(60), || async {
        (a.settled()? == (0..SLOTS).collect()).then_some(())
    })
    .await;
    let b = Member::start(&group.name, &topic.name, "b");
    let revoked = eventually("a asked to revoke the slots that move to b", Duration::from_secs(60), || async {
        a.events().iter().find_map(|e| match e {
            Ev::Revoked(s) => Some(s.iter().copied().collect::<BTreeSet<i32>>()),
            _ => None,
        })
    })
    .await;
    let kept: BTreeSet<i32> = (0..SLOTS).filter(|s| !revoked.contains(s)).collect();

    // a is restarted while its revoke is still open (a process stopped between the rounds).
    let a2 = Member::start(&group.name, &topic.name, "a");
    eventually("the restarted a to get the first round's slots", SESSION, || async {
        (a2.settled()? == kept).then_some(())
    })
    .await;
    held.lock().unwrap().clear();
    a.close().await;
    // Past the old member's session timeout: the revoked slots still have no owner.
    let watch_until = Instant::now() + SESSION + Duration::from_secs(2);
    while Instant::now() < watch_until {
        let union: BTreeSet<i32> = a2.owned().union(&b.owned()).copied().collect();
        assert!(revoked.iter().all(|s| !union.contains(s)), "a revoked slot got an owner without a nudge: {union:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    assert!(a2.membership.as_ref().unwrap().nudge(), "the nudge starts");
    let sets = until_split("a and b to split every slot after the nudge", &[&a2, &b]).await;
    println!("revoked {revoked:?} were unowned; after the nudge a {:?}, b {:?}", sets[0], sets[1]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_join_revokes_only_the_slots_that_move() {
    let _rig = shared().await;
    let topic = TestTopic::create(Cluster::Destination, "mstate", SLOTS, &[]).await;
    let group = TestGroup::new();
    let a = Member::start(&group.name, &topic.name, "a");
    let b = Member::start(&group.name, &topic.name, "b");
    let before = until_split("a and b to split 16 slots", &[&a, &b]).await;
    let seen = [a.events().len(), b.events().len()];

    let c = Member::start(&group.name, &topic.name, "c");
    let after = until_split("a, b and c to split 16 slots", &[&a, &b, &c]).await;
    println!("before {before:?}, after {after:?}");
    let mut moved = BTreeSet::new();
    for (i, m) in [&a, &b].into_iter().enumerate() {
        let new = m.events()[seen[i]..].to_vec();
        let mut revoked = BTreeSet::new();
        for e in &new {
            match e {
                Ev::Revoked(s) => revoked.extend(s.iter().copied()),
                other => panic!("{}: only revokes expected after c joined, got {other:?} in {new:?}", m.id),
            }
        }
        assert!(revoked.is_disjoint(&after[i]), "{}: a slot it kept was revoked: {revoked:?} vs {:?}", m.id, after[i]);
        let lost: BTreeSet<i32> = before[i].difference(&after[i]).copied().collect();
        assert_eq!(revoked, lost, "{}: exactly the moved slots are revoked", m.id);
        assert!(after[i].is_subset(&before[i]), "{}", m.id);
        moved.extend(revoked);
    }
    assert_eq!(after[2], moved, "c owns exactly the moved slots");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_static_member_loses_its_slots() {
    let _rig = shared().await;
    let topic = TestTopic::create(Cluster::Destination, "mstate", SLOTS, &[]).await;
    let group = TestGroup::new();
    let a = Member::start(&group.name, &topic.name, "a");
    let b = Member::start(&group.name, &topic.name, "b");
    let sets = until_split("a and b to split 16 slots", &[&a, &b]).await;
    let (a_slots, b_slots) = (sets[0].clone(), sets[1].clone());

    // A second instance with a's id (a misconfiguration) takes a's place and fences it.
    let a2 = Member::start(&group.name, &topic.name, "a");
    eventually("the first a to be fenced", Duration::from_secs(30), || async {
        a.membership.as_ref().unwrap().failure()
    })
    .await;
    let failure = a.membership.as_ref().unwrap().failure().unwrap();
    println!("fenced: {failure}");
    assert!(failure.code().is_some_and(|c| c.name == "FENCED_INSTANCE_ID"), "{failure}");
    eventually("a to hold nothing", Duration::from_secs(10), || async { a.settled().filter(BTreeSet::is_empty) }).await;
    let a_events = a.events();
    assert_eq!(a_events.last(), Some(&Ev::Lost(a_slots.iter().copied().collect())), "{a_events:?}");
    eventually("the new a to own a's slots", Duration::from_secs(30), || async {
        (a2.settled().as_ref() == Some(&a_slots)).then_some(())
    })
    .await;
    assert_eq!(b.owned(), b_slots);
}

/// Why kmirror does not use KIP-848 (`group.protocol=consumer`): its session timeout is the
/// broker's, 45 s at least on Kafka 4.x unless the brokers are reconfigured.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kip848_session_timeout_is_the_broker_s_45_s() {
    let _rig = shared().await;
    let admin = admin();
    let results =
        admin.describe_configs(&[ResourceSpecifier::Broker(1)], &AdminOptions::new()).await.expect("describe broker");
    let resource = results.into_iter().next().expect("one result").expect("broker configs");
    let value = |name: &str| resource.get(name).and_then(|e| e.value.clone());
    println!(
        "group.consumer.session.timeout.ms={:?} group.consumer.min.session.timeout.ms={:?} \
         group.min.session.timeout.ms={:?}",
        value("group.consumer.session.timeout.ms"),
        value("group.consumer.min.session.timeout.ms"),
        value("group.min.session.timeout.ms")
    );
    assert_eq!(value("group.consumer.session.timeout.ms").as_deref(), Some("45000"));
    assert_eq!(value("group.consumer.min.session.timeout.ms").as_deref(), Some("45000"));
    assert_eq!(value("group.min.session.timeout.ms").as_deref(), Some("6000"));
    // librdkafka refuses a client-side session timeout under KIP-848 outright.
    let refused = ClientConfig::new()
        .set("bootstrap.servers", Cluster::Destination.bootstrap())
        .set("group.id", unique("kip848"))
        .set("group.protocol", "consumer")
        .set("session.timeout.ms", "10000")
        .create::<rdkafka::consumer::BaseConsumer>();
    let e = refused.err().expect("refused").to_string();
    assert!(e.contains("session.timeout.ms") && e.contains("broker side"), "{e}");
}
