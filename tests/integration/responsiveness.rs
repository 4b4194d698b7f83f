//! A failover never waits behind other work: while a start's planning waits on a source that
//! does not answer (here: reading the source's state topic for a quarantine's lineage, through
//! a bootstrap address that accepts connections and never replies), stops and pauses of other
//! topics are carried out at once. And reads asked on request (lineage, topic configs) are
//! bounded.

use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use kmirror::domain::PartitionState;
use kmirror::engine::{Actor, LifecycleOp, MirrorUpdate, SourceSpec, TopicSelector, Truncation};

use crate::engine::{TestEngine, keyed};
use crate::support::*;

const START: LifecycleOp = LifecycleOp::Start { truncation: Truncation::None };
const QUARANTINE: LifecycleOp = LifecycleOp::Start { truncation: Truncation::Resync { quarantine: true } };

fn actor() -> Actor {
    Actor { identity: "test".into(), address: None }
}

/// A TCP proxy in front of `upstream`: while open it forwards every connection (both ways);
/// once closed, connections already forwarded keep working, and new ones are accepted and then
/// never answered (a source that hangs for every new client).
struct HangingProxy {
    addr: String,
    open: Arc<AtomicBool>,
}

impl HangingProxy {
    fn start(upstream: String) -> HangingProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().unwrap().to_string();
        let open = Arc::new(AtomicBool::new(true));
        let flag = Arc::clone(&open);
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for conn in listener.incoming() {
                let Ok(client) = conn else { continue };
                if !flag.load(Ordering::SeqCst) {
                    held.push(client);
                    continue;
                }
                let Ok(server) = TcpStream::connect(&upstream) else { continue };
                let (c2, s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                std::thread::spawn(move || pump(client, server));
                std::thread::spawn(move || pump(s2, c2));
            }
        });
        HangingProxy { addr, open }
    }

    fn hang_new_connections(&self) {
        self.open.store(false, Ordering::SeqCst);
    }
}

fn pump(mut from: TcpStream, mut to: TcpStream) {
    let _ = std::io::copy(&mut from, &mut to);
    let _ = to.shutdown(std::net::Shutdown::Both);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stops_and_pauses_are_served_while_a_start_waits_for_a_hanging_source() {
    let _rig = shared().await;
    let topics: Vec<TestTopic> = futures_util::future::join_all(
        ["resp-planned", "resp-stop", "resp-pause"].map(|p| TestTopic::create(Cluster::Source, p, 2, &[])),
    )
    .await;
    let names: Vec<String> = topics.iter().map(|t| t.name.clone()).collect();
    let ns = names.clone();
    tokio::task::spawn_blocking(move || {
        for t in &ns {
            produce(Cluster::Source, t, &keyed(40, 2, "resp"));
        }
    })
    .await
    .unwrap();
    let mut config = TestEngine::config();
    config.request_timeout = Duration::from_secs(3);
    let eng = TestEngine::with_config(config).await;
    // `m` holds the topic whose start will be planned; `other` the topics stopped and paused
    // meanwhile (its data path talks to the source directly: only the coordinator is shared).
    let (m, other) = (unique("resp"), unique("resp-other"));
    eng.create_mirror(&m).await;
    eng.create_mirror(&other).await;
    eng.op_ok(&m, &[&names[0]], START).await;
    eng.op_ok(&other, &[&names[1], &names[2]], START).await;
    for (mirror, t) in [(&m, &names[0]), (&other, &names[1]), (&other, &names[2])] {
        eng.wait_caught_up(mirror, t, 2).await;
    }
    // The topic whose start will be planned is failed over.
    eng.op_ok(&m, &[&names[0]], LifecycleOp::Stop).await;

    // `m`'s source moves behind the proxy (its clients connect through it), then the proxy stops
    // answering new connections: every new client of that source hangs.
    let proxy = HangingProxy::start(Cluster::Source.bootstrap());
    let source = SourceSpec { bootstrap_servers: proxy.addr.clone(), properties: Default::default() };
    eng.handle
        .update_mirror(&m, MirrorUpdate { source: Some(source), ..Default::default() }, actor())
        .await
        .expect("re-point the source");
    eng.handle.refresh_now(&m).await.expect("the source answers through the proxy");
    proxy.hang_new_connections();

    // The quarantine preview of the failed-over topic reads the source's state topic with a new
    // client: it hangs until its timeout.
    let h = eng.handle.clone();
    let planned = names[0].clone();
    let mirror = m.clone();
    let began = Instant::now();
    let preview = tokio::spawn(async move {
        h.lifecycle(&mirror, TopicSelector::Names(vec![planned]), QUARANTINE, true, actor()).await
    });

    // Meanwhile a failover of one topic and a pause of another, then repeated stops, each
    // answered within a second.
    let call = |topic: String, op: LifecycleOp| {
        let (h, m) = (eng.handle.clone(), other.clone());
        async move {
            let t0 = Instant::now();
            let r = h.lifecycle(&m, TopicSelector::Names(vec![topic.clone()]), op, false, actor()).await;
            let r = r.unwrap_or_else(|e| panic!("{op:?} of {topic}: {e}"));
            assert!(r.results[0].ok, "{op:?} of {topic}: {r:?}");
            t0.elapsed()
        }
    };
    let mut latencies = Vec::new();
    latencies.push(call(names[1].clone(), LifecycleOp::Stop).await);
    latencies.push(call(names[2].clone(), LifecycleOp::Pause).await);
    while !preview.is_finished() {
        latencies.push(call(names[1].clone(), LifecycleOp::Stop).await);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let answered = preview.await.expect("no panic");
    let waited = began.elapsed();
    // The preview really waited on the hanging source (so the calls above ran meanwhile), and
    // says so: it could not read the source's state.
    assert!(waited >= Duration::from_secs(3), "the preview did not wait: {waited:?}");
    let r = answered.expect("answered");
    let e = r.results[0].error.as_ref().expect("the preview cannot read the source's state");
    assert!(e.detail.contains("cannot read the source's"), "{e:?}");
    let slowest = latencies.iter().max().copied().unwrap_or_default();
    assert!(latencies.len() >= 5, "calls made while the start was planned: {latencies:?}");
    assert!(slowest <= Duration::from_secs(1), "a stop or pause waited {slowest:?} behind the start: {latencies:?}");
    eng.wait_state(&other, &names[1], PartitionState::Stopped).await;
    eng.wait_state(&other, &names[2], PartitionState::Paused).await;

    eng.op_ok(&other, &[&names[2]], LifecycleOp::Stop).await;
    eng.stop().await;
    for t in &names {
        let _ = Cluster::Destination.admin().delete_topic(t).await;
    }
}

/// Threads and open files of this process (the engine and the server run in it).
fn threads_and_files() -> (usize, usize) {
    let count = |dir: &str| std::fs::read_dir(dir).map(|d| d.count()).unwrap_or(0);
    (count("/proc/self/task"), count("/proc/self/fd"))
}

/// Reads of Kafka asked by requests are bounded: 200 concurrent lineage and topic-config requests
/// share their reads (one per topic in flight, reused for a few seconds, a few at once over
/// all), so the process's threads and open files stay flat; a topic that is not the mirror's is
/// refused without any read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_lineage_and_config_requests_share_bounded_reads() {
    use crate::api::{TestServer, VIEWER, tokens};
    // Alone: the counts are the whole process's, and other tests would move them.
    let _rig = exclusive().await;
    let topic = TestTopic::create(Cluster::Source, "resp-reads", 2, &[]).await;
    let eng = TestEngine::start().await;
    let m = unique("reads");
    eng.create_mirror(&m).await;
    eng.op_ok(&m, &[&topic.name], START).await;
    eng.wait_state(&m, &topic.name, PartitionState::Mirroring).await;
    // One HTTP/2 connection carries every request: the sockets counted are kmirror's.
    let client = reqwest::Client::builder().http2_prior_knowledge();
    let server = Arc::new(TestServer::start_with(eng.handle.clone(), tokens(), false, client).await);

    // One read first, so the clients kmirror keeps anyway exist before the baseline.
    let lineage = format!("/api/v1/mirrors/{m}/topics/{}/lineage", topic.name);
    let configs = format!("/api/v1/mirrors/{m}/topics/{}/configs", topic.name);
    server.get(&lineage, Some(VIEWER)).await.ok(200);
    server.get(&configs, Some(VIEWER)).await.ok(200);
    let (threads0, files0) = threads_and_files();
    let most = Arc::new(std::sync::Mutex::new((threads0, files0)));
    let sampling = Arc::new(AtomicBool::new(true));
    let sampler = {
        let (most, sampling) = (Arc::clone(&most), Arc::clone(&sampling));
        std::thread::spawn(move || {
            while sampling.load(Ordering::SeqCst) {
                let (t, f) = threads_and_files();
                let mut m = most.lock().unwrap();
                *m = (m.0.max(t), m.1.max(f));
                drop(m);
                std::thread::sleep(Duration::from_millis(10));
            }
        })
    };
    // Twice 200 at once, the second after the cache expired: every request answered.
    for round in 0..2 {
        let calls = (0..200).map(|i| {
            let (server, path) = (Arc::clone(&server), if i % 2 == 0 { lineage.clone() } else { configs.clone() });
            async move { server.get(&path, Some(VIEWER)).await.status }
        });
        let statuses = futures_util::future::join_all(calls).await;
        assert!(statuses.iter().all(|s| *s == 200), "round {round}: {statuses:?}");
        if round == 0 {
            tokio::time::sleep(Duration::from_secs(2)).await; // past the reuse window: a fresh read
        }
    }
    sampling.store(false, Ordering::SeqCst);
    sampler.join().unwrap();
    let (threads, files) = *most.lock().unwrap();
    // One lineage read (an admin client and a state reader) and one config read at a time:
    // a few dozen threads and sockets at most, not hundreds.
    eprintln!("threads {threads0} -> {threads}, files {files0} -> {files}");
    assert!(threads <= threads0 + 60, "threads went from {threads0} to {threads}");
    assert!(files <= files0 + 120, "open files went from {files0} to {files}");

    // A topic that is not the mirror's: 404, and no read.
    server
        .get(&format!("/api/v1/mirrors/{m}/topics/not-mirrored/lineage"), Some(VIEWER))
        .await
        .problem(404, "topic-not-in-mirror");
    server
        .get(&format!("/api/v1/mirrors/{m}/topics/not-mirrored/configs"), Some(VIEWER))
        .await
        .problem(404, "topic-not-in-mirror");

    eng.op_ok(&m, &[&topic.name], LifecycleOp::Stop).await;
    drop(server);
    eng.stop().await;
    let _ = Cluster::Destination.admin().delete_topic(&topic.name).await;
}
