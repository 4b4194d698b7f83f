//! Shared test support: where the rig's clusters are, a lock that lets a test restart a broker
//! without disturbing the others, unique names, and plain rdkafka producers/consumers to check
//! what is really on the clusters.

use std::collections::BTreeMap;
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Message, OwnedHeaders};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use tokio::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use kmirror::kafka::KafkaAdmin;

/// Which rig cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cluster {
    Source,
    Destination,
}

impl Cluster {
    pub fn name(self) -> &'static str {
        match self {
            Cluster::Source => "source",
            Cluster::Destination => "destination",
        }
    }

    pub fn bootstrap(self) -> String {
        match self {
            Cluster::Source => env_or("KMIRROR_TEST_SOURCE_BOOTSTRAP", "127.0.0.1:19092"),
            Cluster::Destination => env_or("KMIRROR_TEST_DESTINATION_BOOTSTRAP", "127.0.0.1:29092"),
        }
    }

    /// The cluster ID the rig formats this cluster with.
    pub fn expected_cluster_id(self) -> String {
        match self {
            Cluster::Source => env_or("KMIRROR_TEST_SOURCE_CLUSTER_ID", "EEB8QEn5XPmjX3cKvknOpQ"),
            Cluster::Destination => env_or("KMIRROR_TEST_DESTINATION_CLUSTER_ID", "rurTmx9dW7WWA6KnPM7ubQ"),
        }
    }

    pub fn admin(self) -> KafkaAdmin {
        KafkaAdmin::connect(&self.bootstrap(), &BTreeMap::new(), Duration::from_secs(30)).expect("admin client")
    }
}

fn env_or(key: &str, default: &str) -> String {
    std::env::var(key).ok().filter(|v| !v.is_empty()).unwrap_or_else(|| default.to_string())
}

/// Tests that only use the clusters take a shared guard; a test that restarts or kills a broker
/// (or measures process-wide memory) takes the exclusive one, so the others never see it.
static RIG: LazyLock<RwLock<()>> = LazyLock::new(|| RwLock::new(()));

/// Held for the duration of a test: the in-process lock plus a cross-process `flock` on a file
/// next to the rig, so test runs of several checkouts sharing one rig do not disturb each other.
pub struct RigGuard<G> {
    _guard: G,
    _file: std::fs::File,
}

/// `<rig dir>.testlock`: one lock per rig, so a run against a second rig (another Kafka version on
/// offset ports, scripts/test-compat) neither waits for nor blocks the tests on the default rig.
/// For the default rig dir this is the same file as before (`$TMPDIR/kmirror-rig.testlock`).
fn lock_path() -> std::path::PathBuf {
    match std::env::var("KMIRROR_RIG_DIR").ok().filter(|d| !d.is_empty()) {
        Some(dir) => std::path::PathBuf::from(format!("{}.testlock", dir.trim_end_matches('/'))),
        None => std::env::temp_dir().join("kmirror-rig.testlock"),
    }
}

async fn file_lock(exclusive: bool) -> std::fs::File {
    let path = lock_path();
    tokio::task::spawn_blocking(move || {
        let f = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(&path).expect("lock file");
        use std::os::fd::AsRawFd;
        let op = if exclusive { libc::LOCK_EX } else { libc::LOCK_SH };
        // SAFETY: flock on a file descriptor we own; released when the file is closed.
        #[allow(unsafe_code)]
        let rc = unsafe { libc::flock(f.as_raw_fd(), op) };
        assert_eq!(rc, 0, "flock failed");
        f
    })
    .await
    .expect("lock task")
}

pub async fn shared() -> RigGuard<RwLockReadGuard<'static, ()>> {
    let guard = RIG.read().await;
    RigGuard { _guard: guard, _file: file_lock(false).await }
}

pub async fn exclusive() -> RigGuard<RwLockWriteGuard<'static, ()>> {
    let guard = RIG.write().await;
    RigGuard { _guard: guard, _file: file_lock(true).await }
}

/// Runs `scripts/kafka-rig <args>` and panics with its output on failure.
pub fn rig(args: &[&str]) {
    let script =
        std::env::var("KMIRROR_RIG").unwrap_or_else(|_| format!("{}/scripts/kafka-rig", env!("CARGO_MANIFEST_DIR")));
    let out = std::process::Command::new("bash").arg(&script).args(args).output().expect("run kafka-rig");
    assert!(
        out.status.success(),
        "kafka-rig {args:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A name unique to this test run: `<prefix>-<pid>-<counter>`.
pub fn unique(prefix: &str) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    format!("{prefix}-{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed))
}

/// Polls `check` until it returns `Some`, or panics with `what` after `deadline`.
pub async fn eventually<T, F, Fut>(what: &str, deadline: Duration, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    eventually_or(what, deadline, check, || "not recorded".to_string()).await
}

/// [`eventually`], with `said` (what the check last saw) in the failure message.
pub async fn eventually_or<T, F, Fut>(what: &str, deadline: Duration, mut check: F, said: impl Fn() -> String) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(start.elapsed() < deadline, "timed out after {deadline:?} waiting for {what}; last seen: {}", said());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Sets `topic`'s `name` config to `value` on `cluster` and waits until the broker shows it. The
/// AlterConfigs answer comes when the change is in the metadata log, before the broker has applied
/// it: a request right after it (a DeleteRecords the new policy must refuse) can still meet the
/// old value.
pub async fn set_topic_config(cluster: Cluster, topic: &str, name: &str, value: &str) {
    let admin = cluster.admin();
    let op = [(name.to_string(), kmirror::kafka::ConfigOp::Set(value.into()))];
    admin.alter_topic_configs(topic, &op).await.unwrap_or_else(|e| panic!("set {name}={value} on {topic}: {e}"));
    eventually(&format!("{topic}'s {name} at {value}"), Duration::from_secs(30), || async {
        let configs = admin.describe_topic_configs(topic).await.ok()?;
        configs.iter().any(|e| e.name == name && e.value.as_deref() == Some(value)).then_some(())
    })
    .await;
}

/// A topic that is deleted when the test ends (also when it fails).
pub struct TestTopic {
    pub name: String,
    cluster: Cluster,
}

impl TestTopic {
    pub async fn create(cluster: Cluster, prefix: &str, partitions: i32, configs: &[(&str, &str)]) -> TestTopic {
        let name = unique(prefix);
        let configs: Vec<(String, String)> = configs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let admin = cluster.admin();
        admin.create_topic(&name, partitions, 1, &configs).await.expect("create topic");
        // CreateTopics answers before every metadata request sees the topic: a start right
        // after it could be refused as "does not exist on the source cluster".
        eventually(&format!("topic {name} in the metadata"), Duration::from_secs(30), || async {
            let d = admin.describe_topic(&name).await.ok()?;
            (d.partitions.len() == usize::try_from(partitions).unwrap_or(0)).then_some(())
        })
        .await;
        TestTopic { name, cluster }
    }
}

impl Drop for TestTopic {
    fn drop(&mut self) {
        let (name, cluster) = (self.name.clone(), self.cluster);
        // Drop cannot await; delete from a helper thread with its own small runtime.
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
            let _ = rt.block_on(cluster.admin().delete_topic(&name));
        })
        .join();
    }
}

/// The key the test engines seal secrets at rest with (one for every test, so engines that share
/// a state topic open each other's records).
pub fn test_key() -> kmirror::store::seal::SecretKey {
    kmirror::store::seal::SecretKey::from_bytes(&[0x5e; 32])
}

/// A sealer with [`test_key`].
pub fn test_sealer() -> kmirror::store::seal::Sealer {
    kmirror::store::seal::Sealer::new(Some(test_key()), None, false)
}

/// A record to produce: key, value, headers, timestamp.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rec {
    pub partition: i32,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(String, Vec<u8>)>,
    pub timestamp: Option<i64>,
}

pub fn producer(cluster: Cluster, extra: &[(&str, &str)]) -> ThreadedProducer<DefaultProducerContext> {
    let mut cfg = ClientConfig::new();
    cfg.set("bootstrap.servers", cluster.bootstrap()).set("linger.ms", "5").set("message.timeout.ms", "60000");
    for (k, v) in extra {
        cfg.set(*k, *v);
    }
    cfg.create().expect("producer")
}

/// Produces `records` to `topic` and waits until all are acknowledged.
pub fn produce(cluster: Cluster, topic: &str, records: &[Rec]) {
    produce_with(cluster, topic, records, &[])
}

/// [`produce`] with extra producer settings (e.g. `compression.type`).
pub fn produce_with(cluster: Cluster, topic: &str, records: &[Rec], extra: &[(&str, &str)]) {
    let mut settings = vec![("enable.idempotence", "true")];
    settings.extend_from_slice(extra);
    let p = producer(cluster, &settings);
    for r in records {
        let mut headers = OwnedHeaders::new();
        for (k, v) in &r.headers {
            headers = headers.insert(rdkafka::message::Header { key: k, value: Some(v) });
        }
        let mut br: BaseRecord<'_, Vec<u8>, Vec<u8>> = BaseRecord::to(topic).partition(r.partition).headers(headers);
        if let Some(k) = &r.key {
            br = br.key(k);
        }
        if let Some(v) = &r.value {
            br = br.payload(v);
        }
        if let Some(ts) = r.timestamp {
            br = br.timestamp(ts);
        }
        let mut br = br;
        loop {
            match p.send(br) {
                Ok(()) => break,
                Err((e, back)) => {
                    assert!(
                        matches!(e.rdkafka_error_code(), Some(rdkafka::types::RDKafkaErrorCode::QueueFull)),
                        "send failed: {e}"
                    );
                    std::thread::sleep(Duration::from_millis(5));
                    br = back;
                }
            }
        }
    }
    p.flush(Duration::from_secs(60)).expect("flush");
}

/// A record as consumed back, with its offset and the batch's leader epoch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Consumed {
    pub partition: i32,
    pub offset: i64,
    pub leader_epoch: Option<i32>,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(String, Vec<u8>)>,
    pub timestamp: Option<i64>,
}

pub fn consumer(cluster: Cluster, extra: &[(&str, &str)]) -> BaseConsumer {
    let mut cfg = ClientConfig::new();
    cfg.set("bootstrap.servers", cluster.bootstrap())
        .set("group.id", unique("test-reader"))
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "false")
        .set("auto.offset.reset", "earliest")
        .set("isolation.level", "read_committed")
        .set("fetch.queue.backoff.ms", "10");
    for (k, v) in extra {
        cfg.set(*k, *v);
    }
    cfg.create().expect("consumer")
}

/// Reads `count` records from an already-assigned consumer (panics after `deadline`).
pub fn read_n(c: &BaseConsumer, count: usize, deadline: Duration) -> Vec<Consumed> {
    let start = Instant::now();
    let mut out = Vec::with_capacity(count);
    while out.len() < count {
        assert!(start.elapsed() < deadline, "read {} of {count} records within {deadline:?}", out.len());
        match c.poll(Duration::from_millis(100)) {
            None => {}
            Some(Err(e)) => panic!("consume error: {e}"),
            Some(Ok(m)) => {
                use rdkafka::message::Headers;
                let headers = m
                    .headers()
                    .map(|h| h.iter().map(|h| (h.key.to_string(), h.value.unwrap_or_default().to_vec())).collect())
                    .unwrap_or_default();
                out.push(Consumed {
                    partition: m.partition(),
                    offset: m.offset(),
                    leader_epoch: kmirror::kafka::consumer::message_leader_epoch(&m),
                    key: m.key().map(<[u8]>::to_vec),
                    value: m.payload().map(<[u8]>::to_vec),
                    headers,
                    timestamp: m.timestamp().to_millis(),
                });
            }
        }
    }
    out
}

/// Reads every record of `partitions` of `topic` from the beginning up to `count`.
pub fn read_topic(cluster: Cluster, topic: &str, partitions: i32, count: usize) -> Vec<Consumed> {
    let c = consumer(cluster, &[]);
    let mut tpl = rdkafka::TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition_offset(topic, p, rdkafka::Offset::Beginning).expect("tpl");
    }
    c.assign(&tpl).expect("assign");
    read_n(&c, count, Duration::from_secs(60))
}
