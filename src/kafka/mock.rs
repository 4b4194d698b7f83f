//! Two in-process librdkafka mock clusters with live traffic, for `kmirror demo`.
//!
//! librdkafka's mock cluster serves the data path (produce, fetch, transactions, ListOffsets,
//! OffsetForLeaderEpoch) but not CreateTopics, configs, ACLs or group listing; topics are created
//! here through the mock API, and the engine shows the rest as "not supported by this cluster".
//! `MockCluster` is `!Send`, so both clusters live on one dedicated thread, which also runs the
//! traffic generator and moves partition leaders now and then (each move bumps the leader epoch,
//! so the Last Mirrored Epoch visibly changes).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::mocking::MockCluster;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};

/// What the demo clusters hold and do.
#[derive(Debug, Clone)]
pub struct DemoSpec {
    /// Source topics and their partition counts; each is also created (empty) on the destination.
    pub topics: Vec<(String, i32)>,
    /// Extra (empty) destination topics, e.g. the state topic.
    pub destination_topics: Vec<(String, i32)>,
    /// Records per second across all topics.
    pub rate_per_sec: u32,
    /// How often a source partition leader moves (bumping its leader epoch).
    pub leader_move_every: Duration,
}

/// The running pair. Dropping it stops the traffic and the clusters.
#[derive(Debug)]
pub struct DemoClusters {
    pub source_bootstrap: String,
    pub destination_bootstrap: String,
    produced: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    join: Option<std::thread::JoinHandle<()>>,
}

impl DemoClusters {
    /// Starts both clusters and the traffic; returns once they accept connections.
    pub fn start(spec: DemoSpec) -> Result<DemoClusters, String> {
        let (tx, rx) = std::sync::mpsc::channel::<Result<(String, String), String>>();
        let stop = Arc::new(AtomicBool::new(false));
        let produced = Arc::new(AtomicU64::new(0));
        let (stop2, produced2) = (Arc::clone(&stop), Arc::clone(&produced));
        let join = std::thread::Builder::new()
            .name("demo-clusters".into())
            .spawn(move || run(spec, tx, stop2, produced2))
            .map_err(|e| e.to_string())?;
        match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(Ok((source_bootstrap, destination_bootstrap))) => {
                Ok(DemoClusters { source_bootstrap, destination_bootstrap, produced, stop, join: Some(join) })
            }
            Ok(Err(e)) => Err(e),
            Err(_) => Err("the demo clusters did not start".into()),
        }
    }

    /// Records produced to the source so far.
    pub fn produced(&self) -> u64 {
        self.produced.load(Ordering::Relaxed)
    }
}

impl Drop for DemoClusters {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(j) = self.join.take() {
            let _ = j.join();
        }
    }
}

fn run(
    spec: DemoSpec,
    ready: std::sync::mpsc::Sender<Result<(String, String), String>>,
    stop: Arc<AtomicBool>,
    produced: Arc<AtomicU64>,
) {
    let setup = || -> Result<_, String> {
        let source = MockCluster::new(3).map_err(|e| format!("source mock cluster: {e}"))?;
        let destination = MockCluster::new(3).map_err(|e| format!("destination mock cluster: {e}"))?;
        for (t, p) in &spec.topics {
            source.create_topic(t, *p, 1).map_err(|e| e.to_string())?;
            destination.create_topic(t, *p, 1).map_err(|e| e.to_string())?;
        }
        for (t, p) in &spec.destination_topics {
            destination.create_topic(t, *p, 1).map_err(|e| e.to_string())?;
        }
        let producer: BaseProducer = ClientConfig::new()
            .set("bootstrap.servers", source.bootstrap_servers())
            .set("linger.ms", "5")
            .create()
            .map_err(|e| format!("demo producer: {e}"))?;
        Ok((source, destination, producer))
    };
    let (source, destination, producer) = match setup() {
        Ok(x) => x,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let _ = ready.send(Ok((source.bootstrap_servers(), destination.bootstrap_servers())));
    let started = Instant::now();
    let mut last_move = Instant::now();
    let mut n: u64 = 0;
    let mut moves: u64 = 0;
    let interval = Duration::from_secs_f64(1.0 / f64::from(spec.rate_per_sec.max(1)));
    while !stop.load(Ordering::Relaxed) {
        // Pace to the target rate.
        let due = started + interval.mul_f64(n as f64);
        let now = Instant::now();
        if due > now {
            std::thread::sleep((due - now).min(Duration::from_millis(50)));
            producer.poll(Duration::ZERO);
            continue;
        }
        let (topic, partitions) = &spec.topics[(n as usize) % spec.topics.len()];
        let key = format!("customer-{}", n % 97);
        let value = format!("{{\"order\":{n},\"amount\":{}.{:02}}}", (n * 37) % 500, n % 100);
        let headers = OwnedHeaders::new()
            .insert(Header { key: "source", value: Some("kmirror-demo") })
            .insert(Header { key: "seq", value: Some(&n.to_string()) });
        let partition = ((n / spec.topics.len() as u64) % (*partitions as u64)) as i32;
        let record = BaseRecord::to(topic).key(&key).payload(&value).partition(partition).headers(headers);
        if producer.send(record).is_ok() {
            n += 1;
            produced.store(n, Ordering::Relaxed);
        } else {
            producer.poll(Duration::from_millis(10));
        }
        if last_move.elapsed() >= spec.leader_move_every && !spec.topics.is_empty() {
            last_move = Instant::now();
            moves += 1;
            let (t, p) = &spec.topics[(moves as usize) % spec.topics.len()];
            let partition = (moves % (*p as u64)) as i32;
            let broker = 1 + (moves % 3) as i32;
            if let Err(e) = source.partition_leader(t, partition, Some(broker)) {
                tracing::debug!("demo leader move: {e}");
            } else {
                tracing::info!(topic = %t, partition, broker, "demo: moved a source partition leader (epoch bump)");
            }
        }
    }
    let _ = producer.flush(Duration::from_secs(5));
    drop(producer);
    drop(destination);
    drop(source);
}
