//! Several `kmirror serve` instances of one cluster (issue 17, DESIGN.md section 10): slots spread
//! over the instances through the consumer group, `kill -9` and SIGSTOP (a zombie) take nothing
//! and duplicate nothing, commands sent to one instance run on the owners, a rolling restart
//! moves nothing. Every instance is a real child process talking to the real rig.

use std::collections::BTreeSet;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rdkafka::message::OwnedHeaders;
use rdkafka::producer::{BaseRecord, Producer};
use serde_json::{Value, json};

use crate::engine::{assert_same_content, read_all};
use crate::support::*;

/// Session timeout of the instances: the brokers' minimum (group.min.session.timeout.ms = 6 s).
const SESSION: Duration = Duration::from_secs(6);
/// What a takeover may take: the session timeout plus the data paths' start (issue 17's bound).
const TAKEOVER_BOUND: Duration = Duration::from_secs(6 + 15);

/// One `kmirror serve` child process.
struct Node {
    id: String,
    port: u16,
    args: Vec<String>,
    log: std::path::PathBuf,
    child: Option<Child>,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

impl Node {
    fn new(cluster: &str, state_topic: &str, id: &str, slots: i32) -> Node {
        Self::with_args(cluster, state_topic, id, slots, &[])
    }

    /// An instance with more `serve` flags.
    fn with_args(cluster: &str, state_topic: &str, id: &str, slots: i32, extra: &[&str]) -> Node {
        let port = free_port();
        let mut args: Vec<String> = [
            "serve",
            "--destination-bootstrap",
            &Cluster::Destination.bootstrap(),
            "--state-topic",
            state_topic,
            "--state-partitions",
            &slots.to_string(),
            "--cluster-name",
            cluster,
            "--instance-id",
            id,
            "--session-timeout-ms",
            &SESSION.as_millis().to_string(),
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--advertised-url",
            &format!("http://127.0.0.1:{port}"),
            "--no-auth",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend(extra.iter().map(|s| s.to_string()));
        let log = std::env::temp_dir().join(format!("{cluster}-{id}.log"));
        let mut n = Node { id: id.to_string(), port, args, log, child: None };
        n.start();
        n
    }

    fn start(&mut self) {
        let log = std::fs::OpenOptions::new().create(true).append(true).open(&self.log).unwrap();
        self.child = Some(
            Command::new(env!("CARGO_BIN_EXE_kmirror"))
                .args(&self.args)
                .env("RUST_LOG", "info,rdkafka=warn")
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .expect("spawn kmirror serve"),
        );
    }

    fn pid(&self) -> String {
        self.child.as_ref().expect("running").id().to_string()
    }

    fn signal(&self, sig: &str) {
        let ok = Command::new("kill").args([sig, &self.pid()]).status().unwrap().success();
        assert!(ok, "kill {sig} {}", self.id);
    }

    /// `kill -9`.
    fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM, then waits for a clean exit.
    fn terminate(&mut self) {
        self.signal("-TERM");
        let mut c = self.child.take().unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = c.try_wait().unwrap() {
                assert!(status.success(), "{} exited with {status} after SIGTERM", self.id);
                return;
            }
            assert!(Instant::now() < deadline, "{} did not exit within 60 s of SIGTERM", self.id);
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}/api/v1{path}", self.port)
    }

    async fn get(&self, path: &str) -> Option<Value> {
        let r = reqwest::Client::new().get(self.url(path)).send().await.ok()?;
        if !r.status().is_success() {
            return None;
        }
        r.json().await.ok()
    }

    async fn post(&self, path: &str, body: Value) -> Value {
        let r = reqwest::Client::new().post(self.url(path)).json(&body).send().await.expect("request");
        let status = r.status();
        let v: Value = r.json().await.unwrap_or(Value::Null);
        assert!(status.is_success(), "POST {path} on {}: {status} {v}", self.id);
        v
    }

    async fn patch(&self, path: &str, body: Value) -> Value {
        let r = reqwest::Client::new().patch(self.url(path)).json(&body).send().await.expect("request");
        let status = r.status();
        let v: Value = r.json().await.unwrap_or(Value::Null);
        assert!(status.is_success(), "PATCH {path} on {}: {status} {v}", self.id);
        v
    }

    /// The slots this instance owns, as it says itself.
    async fn slots(&self) -> Option<BTreeSet<i64>> {
        let v = self.get("/instances").await?;
        let me = v["instances"].as_array()?.iter().find(|i| i["this"] == true)?.clone();
        Some(me["slots"].as_array()?.iter().filter_map(Value::as_i64).collect())
    }

    /// Every partition of `topic` in `mirror`, as this instance shows them.
    async fn partitions(&self, mirror: &str, topic: &str) -> Option<Vec<Value>> {
        let v = self.get(&format!("/mirrors/{mirror}/partitions?page_size=1000")).await?;
        Some(v["items"].as_array()?.iter().filter(|p| p["topic"] == topic).cloned().collect())
    }

    /// The log, for a failure message.
    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if let Some(c) = self.child.as_mut() {
            let _ = Command::new("kill").args(["-CONT", &c.id().to_string()]).status();
        }
        self.kill9();
    }
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64
}

/// Transactional load on the source until finished: batches of 24 records over the partitions
/// of two topics, every fourth transaction aborted. Returns the committed record count.
struct TxnTraffic {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    join: Option<std::thread::JoinHandle<usize>>,
}

impl TxnTraffic {
    fn start(topics: Vec<String>, partitions: i32) -> TxnTraffic {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let s = stop.clone();
        let join = std::thread::spawn(move || {
            let p = producer(Cluster::Source, &[("transactional.id", &unique("txn-load"))]);
            p.init_transactions(Duration::from_secs(30)).unwrap();
            let mut committed = 0;
            let mut n: usize = 0;
            while !s.load(std::sync::atomic::Ordering::Relaxed) {
                p.begin_transaction().unwrap();
                let abort = n % 4 == 3;
                for i in 0..24 {
                    let topic = &topics[i % topics.len()];
                    let part = ((n * 24 + i) % partitions as usize) as i32;
                    let key = format!("k{}", (n * 24 + i) % 101);
                    let value = format!("{}-{n}-{i}", if abort { "aborted" } else { "committed" });
                    let seq = (n * 24 + i).to_string();
                    let headers =
                        OwnedHeaders::new().insert(rdkafka::message::Header { key: "seq", value: Some(&seq) });
                    let rec = BaseRecord::to(topic)
                        .partition(part)
                        .key(&key)
                        .payload(&value)
                        .headers(headers)
                        .timestamp(now_ms());
                    p.send(rec).map_err(|(e, _)| e).unwrap();
                }
                if abort {
                    // Abort only once every record is acknowledged: librdkafka sends the abort's
                    // EndTxn as soon as AddPartitionsToTxn is *sent*, so an abort right after the
                    // first sends can reach the coordinator while the transaction is still empty
                    // and fail fatally with INVALID_TXN_STATE (librdkafka#4849; seen in CI).
                    p.flush(Duration::from_secs(30)).unwrap();
                    p.abort_transaction(Duration::from_secs(30)).unwrap();
                } else {
                    p.commit_transaction(Duration::from_secs(30)).unwrap();
                    committed += 24;
                }
                n += 1;
                std::thread::sleep(Duration::from_millis(25));
            }
            committed
        });
        TxnTraffic { stop, join: Some(join) }
    }

    fn finish(mut self) -> usize {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.join.take().unwrap().join().unwrap()
    }
}

impl Drop for TxnTraffic {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Waits until the live instances together own every slot, each a disjoint set; returns them.
async fn slots_spread(nodes: &[&Node], within: Duration) -> Vec<BTreeSet<i64>> {
    let ids: Vec<&str> = nodes.iter().map(|n| n.id.as_str()).collect();
    eventually(&format!("the 16 slots spread over {ids:?}"), within, || async {
        let mut all = Vec::new();
        for n in nodes {
            all.push(n.slots().await?);
        }
        let union: BTreeSet<i64> = all.iter().flatten().copied().collect();
        let total: usize = all.iter().map(BTreeSet::len).sum();
        (union.len() == 16 && total == 16 && all.iter().all(|s| !s.is_empty())).then_some(all)
    })
    .await
}

/// Waits until `node` shows every partition of `topics` in `state`.
async fn all_in(node: &Node, mirror: &str, topics: &[String], state: &str, within: Duration) {
    eventually(&format!("{} shows {topics:?} {state}", node.id), within, || async {
        for t in topics {
            let parts = node.partitions(mirror, t).await?;
            if parts.len() != 12 || !parts.iter().all(|p| p["state"] == state) {
                return None;
            }
        }
        Some(())
    })
    .await
}

/// Waits until the destination holds as many committed records as the source, per partition.
async fn caught_up(topics: &[String], within: Duration) {
    caught_up_n(topics, 12, within).await
}

async fn caught_up_n(topics: &[String], partitions: i32, within: Duration) {
    eventually("destination caught up with the source", within, || async {
        for t in topics {
            let t = t.clone();
            let (s, d) = tokio::task::spawn_blocking(move || {
                let count = |c| read_all(c, &t, partitions).values().map(Vec::len).collect::<Vec<_>>();
                (count(Cluster::Source), count(Cluster::Destination))
            })
            .await
            .ok()?;
            if s != d {
                return None;
            }
        }
        Some(())
    })
    .await
}

/// Three instances, one mirror of two topics with 12 partitions each under transactional load:
/// the slots spread over all three and every partition mirrors; `kill -9` of one moves its slots
/// to the survivors within the bound; a SIGSTOPped instance past its session timeout is fenced
/// and writes nothing more; pause and stop sent to one instance run on the owners and show on
/// another; a rolling restart moves nothing. The destination equals the source record for
/// record (count, and key, value, headers and timestamp in order): nothing lost, duplicated or
/// aborted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_instances_share_the_work_and_survive_kill_zombie_and_rolling_restart() {
    let _rig = shared().await;
    let a_topic = TestTopic::create(Cluster::Source, "inst-a", 12, &[]).await;
    let b_topic = TestTopic::create(Cluster::Source, "inst-b", 12, &[]).await;
    let topics = vec![a_topic.name.clone(), b_topic.name.clone()];
    let cluster = unique("kmc");
    let state_topic = format!("__mirror_state-{cluster}");
    let mut nodes: Vec<Node> = ["i0", "i1", "i2"].iter().map(|id| Node::new(&cluster, &state_topic, id, 16)).collect();

    // 1. The slots spread over all three; a mirror created and started through i0 mirrors on all.
    let spread = slots_spread(&nodes.iter().collect::<Vec<_>>(), Duration::from_secs(90)).await;
    let mirror = unique("m-inst");
    let traffic = TxnTraffic::start(topics.clone(), 12);
    nodes[0]
        .post("/mirrors", json!({"name": mirror, "source": {"bootstrap_servers": Cluster::Source.bootstrap()}}))
        .await;
    let started = nodes[0].post(&format!("/mirrors/{mirror}/topics:start"), json!({"topics": topics})).await;
    assert!(started["results"].as_array().unwrap().iter().all(|r| r["ok"] == true), "{started}");
    for n in &nodes {
        all_in(n, &mirror, &topics, "MIRRORING", Duration::from_secs(90)).await;
    }
    // Every partition's owner is one of the instances, and each instance owns some of them.
    let parts = nodes[2].partitions(&mirror, &topics[0]).await.unwrap();
    let owners: BTreeSet<String> = parts.iter().filter_map(|p| p["owner"].as_str().map(str::to_string)).collect();
    assert!(owners.len() >= 2, "partitions owned by {owners:?} (slots {spread:?})");
    // The periodic heartbeats (every 3 s, through each instance's own heartbeat writer, off the
    // coordinator's loop) keep reaching the others while no slot moves: i0 sees i1's advance.
    let seen: std::cell::RefCell<BTreeSet<String>> = Default::default();
    eventually("i0 sees three heartbeats of i1", Duration::from_secs(30), || {
        let (node, seen) = (&nodes[0], &seen);
        async move {
            let v = node.get("/instances").await?;
            let i1 = v["instances"].as_array()?.iter().find(|i| i["id"] == "i1")?.clone();
            let mut seen = seen.borrow_mut();
            seen.insert(i1["last_heartbeat"].as_str()?.to_string());
            (seen.len() >= 3).then_some(())
        }
    })
    .await;
    for n in &nodes {
        let log = std::fs::read_to_string(&n.log).unwrap_or_default();
        assert!(!log.contains("heartbeats use the state writer"), "{}: {}", n.id, n.log_tail());
    }

    // 2. kill -9 of i1: its slots move to i0 and i2 within the bound, and mirroring goes on.
    let killed_at = Instant::now();
    nodes[1].kill9();
    let survivors = [&nodes[0], &nodes[2]];
    slots_spread(&survivors, TAKEOVER_BOUND).await;
    let takeover = killed_at.elapsed();
    println!("takeover after kill -9: {:.1} s (session timeout {} s)", takeover.as_secs_f64(), SESSION.as_secs());

    // 3. Zombie: SIGSTOP i2 past its session timeout; i0 takes every slot; SIGCONT: i2 is fenced
    //    where it would write, drops those slots, and rejoins.
    nodes[2].signal("-STOP");
    eventually("i0 owns every slot while i2 is stopped", TAKEOVER_BOUND, || async {
        (nodes[0].slots().await?.len() == 16).then_some(())
    })
    .await;
    nodes[2].signal("-CONT");
    nodes[1].start();
    slots_spread(&nodes.iter().collect::<Vec<_>>(), Duration::from_secs(90)).await;

    // 4. Pause sent to i0 for every partition of topic a (most owned by others) takes effect, as
    //    i2 shows; resume; then a stop of topic b sent to i1.
    // (A takeover passes its partitions through PREPARING, where a pause is refused: wait for
    // the ones the rejoin moved.)
    all_in(&nodes[0], &mirror, &topics, "MIRRORING", Duration::from_secs(60)).await;
    // A rebalance can still move a slot (cooperative rebalances take rounds; a loaded machine
    // misses heartbeats), passing its partitions through PREPARING again, where a pause is
    // refused with a clear error: the operator asks again, and so does the test.
    let r = eventually("the pause accepted", Duration::from_secs(60), || async {
        let url = nodes[0].url(&format!("/mirrors/{mirror}/topics:pause"));
        let r: Value = reqwest::Client::new()
            .post(url)
            .json(&json!({"topics": [topics[0]]}))
            .send()
            .await
            .ok()?
            .json()
            .await
            .ok()?;
        if r["results"][0]["ok"] == true {
            return Some(r);
        }
        assert!(r["results"][0]["error"]["detail"].as_str().is_some_and(|d| d.contains("PREPARING")), "{r}");
        None
    })
    .await;
    all_in(&nodes[2], &mirror, &topics[..1], "PAUSED", Duration::from_secs(60)).await;
    // The operation, with its progress, from another instance: accepted by i0, done everywhere.
    let op_id = r["operation_id"].as_str().expect("operation_id").to_string();
    let op = eventually("the pause operation done, seen from i2", Duration::from_secs(30), || async {
        let op = nodes[2].get(&format!("/operations/{op_id}")).await?;
        (op["progress"]["done"] == true).then_some(op)
    })
    .await;
    assert_eq!(op["progress"]["partitions"].as_array().map(Vec::len), Some(12), "{op}");
    assert_eq!(op["accepted_by"], "i0", "{op}");
    let r = nodes[0].post(&format!("/mirrors/{mirror}/topics:resume"), json!({"topics": [topics[0]]})).await;
    assert!(r["results"][0]["ok"] == true, "{r}");
    all_in(&nodes[1], &mirror, &topics[..1], "MIRRORING", Duration::from_secs(60)).await;

    // 5. Rolling restart: SIGTERM one at a time, same ids.
    for node in nodes.iter_mut() {
        node.terminate();
        node.start();
        let node = &*node;
        eventually(&format!("{} back with slots", node.id), Duration::from_secs(60), || async {
            (!node.slots().await?.is_empty()).then_some(())
        })
        .await;
    }
    // Each restart read the state topic to its end: the end of a partition is the reader's to
    // handle, never an ERROR line in the log (rdkafka's default context logged one per partition,
    // "Global error: PartitionEOF", at every start-up).
    for n in &nodes {
        let log = std::fs::read_to_string(&n.log).unwrap_or_default();
        assert!(!log.contains("PartitionEOF"), "{}: {}", n.id, n.log_tail());
    }

    // 6. The load ends; everything committed is on the destination exactly once.
    let produced = tokio::task::spawn_blocking(move || traffic.finish()).await.unwrap();
    assert!(produced > 0);
    caught_up(&topics, Duration::from_secs(120)).await;
    let mut total = 0;
    for t in &topics {
        total += assert_same_content(t, 12).await;
    }
    assert_eq!(total, produced, "every committed record once, no aborted one");

    // 7. Failover while an instance is dying: i2 is killed, and a stop of topic b sent to i1
    //    right after completes everywhere; i2's partitions once their slots are taken over.
    nodes[2].kill9();
    let r = nodes[1].post(&format!("/mirrors/{mirror}/topics:stop"), json!({"topics": [topics[1]]})).await;
    assert!(r["results"][0]["ok"] == true, "{r}");
    all_in(&nodes[0], &mirror, &topics[1..], "STOPPED", TAKEOVER_BOUND + Duration::from_secs(30)).await;
    let r = nodes[0].post(&format!("/mirrors/{mirror}/topics:stop"), json!({"topics": [topics[0]]})).await;
    assert!(r["results"][0]["ok"] == true, "{r}");
    all_in(&nodes[1], &mirror, &topics[..1], "STOPPED", Duration::from_secs(60)).await;
    // Nothing was mirrored twice on the way (the stop points are the ends of what was there).
    for t in &topics {
        assert_same_content(t, 12).await;
    }
    for n in &nodes {
        if std::thread::panicking() {
            eprintln!("--- {} ---\n{}", n.id, n.log_tail());
        }
    }
    drop(nodes);
    for t in &topics {
        let _ = Cluster::Destination.admin().delete_topic(t).await;
    }
}

/// Migration from the single-pipe-per-mirror layout: state written by one instance, plus an
/// open transaction left on the destination by that layout's data path (transactional id
/// `<instance-id>.mirror.<mirror>`), is taken over by a `kmirror serve` of the slot layout
/// without loss: the old transaction is aborted at once (not after its 60 s timeout, which would
/// hold every `read_committed` reader back), and the destination ends equal to the source.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_single_pipe_layout_is_taken_over_without_loss() {
    let _rig = shared().await;
    let topic = TestTopic::create(Cluster::Source, "migrate", 2, &[]).await;
    let t = topic.name.clone();
    tokio::task::spawn_blocking(move || produce(Cluster::Source, &t, &records(200, 2, "before"))).await.unwrap();
    // A single instance mirrors it, then stops.
    let eng = crate::engine::TestEngine::start().await;
    let config = eng.config.clone();
    let mirror = unique("m-migrate");
    eng.create_mirror(&mirror).await;
    eng.op_ok(
        &mirror,
        &[&topic.name],
        kmirror::engine::LifecycleOp::Start { truncation: kmirror::engine::Truncation::None },
    )
    .await;
    eng.wait_caught_up(&mirror, &topic.name, 2).await;
    eng.stop().await;

    // What that layout's data path would leave behind after a crash: an open transaction.
    let legacy = format!("{}.mirror.{mirror}", config.instance_id);
    let t = topic.name.clone();
    tokio::task::spawn_blocking(move || {
        let p = producer(Cluster::Destination, &[("transactional.id", &legacy), ("transaction.timeout.ms", "60000")]);
        p.init_transactions(Duration::from_secs(30)).unwrap();
        p.begin_transaction().unwrap();
        p.send(BaseRecord::<str, str>::to(&t).partition(0).key("stray").payload("never committed"))
            .map_err(|(e, _)| e)
            .unwrap();
        p.flush(Duration::from_secs(30)).unwrap();
        // Gone without ending it, as a crashed process.
        std::mem::forget(p);
    })
    .await
    .unwrap();

    let t = topic.name.clone();
    tokio::task::spawn_blocking(move || produce(Cluster::Source, &t, &records(100, 2, "after"))).await.unwrap();
    let node = Node::new(&config.cluster_name, &config.state_topic, &config.instance_id, config.state_partitions);
    // Well within the old transaction's 60 s timeout.
    caught_up_n(std::slice::from_ref(&topic.name), 2, Duration::from_secs(40)).await;
    assert_eq!(assert_same_content(&topic.name, 2).await, 300);
    let parts = eventually("partitions shown MIRRORING", Duration::from_secs(30), || async {
        let p = node.partitions(&mirror, &topic.name).await?;
        (p.len() == 2 && p.iter().all(|x| x["state"] == "MIRRORING")).then_some(p)
    })
    .await;
    assert!(parts.iter().all(|p| p["owner"] == config.instance_id.as_str()), "{parts:?}");
    node.post(&format!("/mirrors/{mirror}/topics:stop"), json!({"topics": [topic.name]})).await;
    drop(node);
    let _ = Cluster::Destination.admin().delete_topic(&topic.name).await;
}

fn records(n: usize, partitions: i32, tag: &str) -> Vec<Rec> {
    (0..n)
        .map(|i| Rec {
            partition: (i as i32) % partitions,
            key: Some(format!("{tag}-{i}").into_bytes()),
            value: Some(format!("{tag}-value-{i}").into_bytes()),
            headers: vec![("tag".into(), tag.as_bytes().to_vec())],
            timestamp: Some(now_ms()),
        })
        .collect()
}

/// Starts an instance expected to refuse to start; returns its exit code and log.
fn start_refused(cluster: String, state_topic: String, id: &'static str, slots: i32) -> (Option<i32>, String) {
    let mut n = Node::new(&cluster, &state_topic, id, slots);
    let mut child = n.child.take().unwrap();
    // Generous: the refusal comes after the state topic is read, which a loaded CI box (other
    // tests' brokers and builds on 2 cores) once stretched past 60 s.
    let deadline = Instant::now() + Duration::from_secs(150);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let log = std::fs::read_to_string(&n.log).unwrap_or_default();
            let tail: String =
                log.lines().rev().take(40).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n");
            panic!("{id} did not exit within 150 s; its log ends with:\n{tail}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    (status.code(), std::fs::read_to_string(&n.log).unwrap_or_default())
}

/// Safety at start: an instance of another cluster name on the same state topic, or one with
/// another slot count, refuses to start with one clear error and exit code 2, and the running
/// instance keeps its slots.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_incompatible_instance_refuses_to_start() {
    let _rig = shared().await;
    let cluster = unique("kmc-safe");
    let state_topic = format!("__mirror_state-{cluster}");
    let running = Node::new(&cluster, &state_topic, "i0", 4);
    eventually("i0 owns the 4 slots", Duration::from_secs(60), || async {
        (running.slots().await?.len() == 4).then_some(())
    })
    .await;
    let (other, st) = (unique("kmc-other"), state_topic.clone());
    let (code, log) = tokio::task::spawn_blocking(move || start_refused(other, st, "j0", 4)).await.unwrap();
    assert_eq!(code, Some(2), "{log}");
    assert!(log.contains("incompatible with the running instances") && log.contains(&cluster), "{log}");
    let (c, st) = (cluster.clone(), state_topic.clone());
    let (code, log) = tokio::task::spawn_blocking(move || start_refused(c, st, "i1", 8)).await.unwrap();
    assert_eq!(code, Some(2), "{log}");
    assert!(log.contains("has 4 partitions but this instance is configured with 8"), "{log}");
    assert_eq!(running.slots().await.map(|s| s.len()), Some(4), "the running instance kept its slots");
}

/// Failover with the source down and the partitions spread over two instances (16 partitions
/// over 4 slots: all in one instance's two slots has a chance of 2^-15): the stop sent to
/// one is carried out by both (the destination is all a stop needs) and shows on the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_across_instances_works_while_the_source_is_down() {
    let _rig = exclusive().await;
    let topic = TestTopic::create(Cluster::Source, "inst-down", 16, &[]).await;
    let t = topic.name.clone();
    tokio::task::spawn_blocking(move || produce(Cluster::Source, &t, &records(400, 16, "pre"))).await.unwrap();
    let cluster = unique("kmc-down");
    let state_topic = format!("__mirror_state-{cluster}");
    let nodes: Vec<Node> = ["i0", "i1"].iter().map(|id| Node::new(&cluster, &state_topic, id, 4)).collect();
    eventually("both instances own slots", Duration::from_secs(90), || async {
        let (a, b) = (nodes[0].slots().await?, nodes[1].slots().await?);
        (a.len() + b.len() == 4 && !a.is_empty() && !b.is_empty()).then_some(())
    })
    .await;
    let mirror = unique("m-down");
    nodes[0]
        .post("/mirrors", json!({"name": mirror, "source": {"bootstrap_servers": Cluster::Source.bootstrap()}}))
        .await;
    nodes[0].post(&format!("/mirrors/{mirror}/topics:start"), json!({"topics": [topic.name]})).await;
    caught_up_n(std::slice::from_ref(&topic.name), 16, Duration::from_secs(90)).await;
    let owners = eventually("partitions owned by both", Duration::from_secs(30), || async {
        let parts = nodes[1].partitions(&mirror, &topic.name).await?;
        let owners: BTreeSet<String> = parts.iter().filter_map(|p| p["owner"].as_str().map(str::to_string)).collect();
        (parts.iter().all(|p| p["state"] == "MIRRORING") && owners.len() == 2).then_some(owners)
    })
    .await;
    assert_eq!(owners.len(), 2);

    // A throttle set through one instance reaches the other (it applies it to its own slots'
    // data paths), and so does lifting it.
    for rate in [json!(1_048_576), json!(0)] {
        nodes[0].patch(&format!("/mirrors/{mirror}"), json!({"replication_throttle_bytes_per_sec": rate})).await;
        let shown = if rate == 0 { Value::Null } else { rate };
        eventually("the other instance has the new throttle", Duration::from_secs(30), || async {
            let m = nodes[1].get(&format!("/mirrors/{mirror}")).await?;
            (m["replication_throttle_bytes_per_sec"] == shown).then_some(())
        })
        .await;
    }

    tokio::task::spawn_blocking(|| rig(&["kill", "source"])).await.unwrap();
    let r = reqwest::Client::new()
        .post(nodes[0].url(&format!("/mirrors/{mirror}/topics:stop")))
        .json(&json!({"topics": [topic.name]}))
        .send()
        .await;
    let stopped = async {
        all_in_n(&nodes[1], &mirror, &topic.name, 16, "STOPPED", Duration::from_secs(60)).await;
    };
    let outcome = tokio::time::timeout(Duration::from_secs(90), stopped).await;
    tokio::task::spawn_blocking(|| rig(&["start", "source"])).await.unwrap();
    let r: Value = r.expect("stop answered").json().await.unwrap();
    assert!(r["results"][0]["ok"] == true, "{r}");
    assert!(outcome.is_ok(), "the stop did not complete on both instances");
    assert_same_content(&topic.name, 16).await;
    drop(nodes);
    let _ = Cluster::Destination.admin().delete_topic(&topic.name).await;
}

/// Waits until `node` shows the `n` partitions of `topic` in `state`.
async fn all_in_n(node: &Node, mirror: &str, topic: &str, n: usize, state: &str, within: Duration) {
    eventually(&format!("{} shows {topic} {state}", node.id), within, || async {
        let parts = node.partitions(mirror, topic).await?;
        (parts.len() == n && parts.iter().all(|p| p["state"] == state)).then_some(())
    })
    .await
}

/// Discovery with two instances: exactly one (the owner of the mirror's slot) starts each
/// matching topic, so every discovered topic is started once in the operation log; when it is
/// killed, the survivor takes the slot over and mirrors a matching topic created afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_runs_on_one_instance_and_the_survivor_carries_on() {
    let _rig = shared().await;
    let cluster = unique("kmc-disc");
    let state_topic = format!("__mirror_state-{cluster}");
    let extra = ["--metadata-refresh-interval-ms", "1000"];
    let mut nodes: Vec<Node> =
        ["d0", "d1"].iter().map(|id| Node::with_args(&cluster, &state_topic, id, 4, &extra)).collect();
    eventually("both instances own slots", Duration::from_secs(90), || async {
        let (a, b) = (nodes[0].slots().await?, nodes[1].slots().await?);
        (a.len() + b.len() == 4 && !a.is_empty() && !b.is_empty()).then_some(())
    })
    .await;
    let prefix = unique("inst-disc");
    let include = format!(r"{}\..*", regex::escape(&prefix));
    let mirror = unique("m-disc");
    nodes[0]
        .post(
            "/mirrors",
            json!({"name": mirror, "source": {"bootstrap_servers": Cluster::Source.bootstrap()}, "topic_include": [include]}),
        )
        .await;
    let mut first = Vec::new();
    for n in ["a", "b", "c"] {
        first.push(TestTopic::create(Cluster::Source, &format!("{prefix}.{n}"), 2, &[]).await);
    }
    let names: Vec<String> = first.iter().map(|t| t.name.clone()).collect();
    for t in &names {
        all_in_n(&nodes[1], &mirror, t, 2, "MIRRORING", Duration::from_secs(90)).await;
    }
    // Both instances planned; one started. Every discovered topic is in exactly one discovery
    // start, whichever instance's log is read.
    let discovered = |ops: &Value| -> Vec<String> {
        let mut v: Vec<String> = ops["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|o| o["mirror"] == mirror.as_str() && o["requested_by"] == "discovery" && o["kind"] == "start")
            .flat_map(|o| o["results"].as_array().cloned().unwrap_or_default())
            .filter(|r| r["ok"] == true)
            .filter_map(|r| r["topic"].as_str().map(str::to_string))
            .collect();
        v.sort();
        v
    };
    for node in &nodes {
        let ops = eventually("the discovery operation is in the log", Duration::from_secs(30), || async {
            let ops = node.get(&format!("/audit?mirror={mirror}&page_size=1000")).await?;
            (discovered(&ops) == names).then_some(ops)
        })
        .await;
        assert_eq!(discovered(&ops), names, "on {}", node.id);
    }
    let d = nodes[0].get(&format!("/mirrors/{mirror}/discovery")).await.expect("discovery");
    let runner = d["runs_on"].as_str().expect("an instance runs discovery").to_string();
    let (dead, alive) = if runner == "d0" { (0, 1) } else { (1, 0) };
    assert_eq!(nodes[dead].id, runner);

    // The discovering instance dies; a matching topic created afterwards is mirrored by the
    // survivor once it owns the mirror's slot.
    nodes[dead].kill9();
    let later = TestTopic::create(Cluster::Source, &format!("{prefix}.later"), 2, &[]).await;
    let t = later.name.clone();
    tokio::task::spawn_blocking(move || produce(Cluster::Source, &t, &records(40, 2, "later"))).await.unwrap();
    all_in_n(&nodes[alive], &mirror, &later.name, 2, "MIRRORING", TAKEOVER_BOUND + Duration::from_secs(60)).await;
    caught_up_n(std::slice::from_ref(&later.name), 2, Duration::from_secs(60)).await;
    assert_same_content(&later.name, 2).await;
    let d = nodes[alive].get(&format!("/mirrors/{mirror}/discovery")).await.expect("discovery");
    assert_eq!(d["runs_on"].as_str(), Some(nodes[alive].id.as_str()), "{d}");
    let _ = nodes[alive]
        .post(&format!("/mirrors/{mirror}/topics:stop"), json!({"pattern": format!(r"{}\..*", regex::escape(&prefix))}))
        .await;
    drop(nodes);
    for t in names.iter().chain([&later.name]) {
        let _ = Cluster::Destination.admin().delete_topic(t).await;
    }
}
