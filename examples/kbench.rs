//! kbench: load generator, plain consumer/producer baselines, drain watcher and latency probe for
//! `scripts/bench` (issue 8: kmirror vs MirrorMaker 2). Not part of kmirror; built with
//! `cargo build --release --examples`.
//!
//! Every subcommand prints one JSON object on stdout (its result); progress goes to stderr.
//!
//! - `topics create|delete|wait`: admin helpers (rdkafka's AdminClient).
//! - `produce`: writes N records of S bytes (16-byte key, semi-compressible JSON-ish value) round
//!   robin over the given topics' partitions, with a plain pipelined `BaseProducer`. Used to preload
//!   the source (fast settings) and to measure **P** (the mirror's producer settings). With `--rate`
//!   it is an open-loop generator (steady load during a failover).
//! - `consume`: drains a topic from the beginning to the end offsets captured at start with a plain
//!   `BaseConsumer` (kmirror's consumer settings), touching every payload byte: **C**.
//! - `watch`: times a mirror's drain (first record visible on the destination → everything
//!   mirrored), sampling the mirror process's CPU time and RSS from /proc: **M** and **MM2**.
//! - `verify`: per-partition record count and order-sensitive content hash, source vs destination.
//! - `latency`: open-loop generator on the source plus a checker on the destination in one process;
//!   reports end-to-end latency percentiles (source ack → visible, and intended send → visible).

// Benchmarks time records against the wall clock themselves (clippy.toml's rule is for kmirror).
#![allow(clippy::disallowed_methods)]

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::{Args, Parser, Subcommand};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::{ClientContext, DefaultClientContext};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::message::{DeliveryResult, Message};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer, ProducerContext};
use rdkafka::{Offset, TopicPartitionList};
use serde_json::{Value, json};

#[derive(Parser)]
#[command(name = "kbench", about = "Benchmark helpers for scripts/bench")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Topic admin helpers.
    #[command(subcommand)]
    Topics(TopicsCmd),
    /// Produce records (preload, P measurement, open-loop load).
    Produce(ProduceArgs),
    /// Drain a topic with a plain consumer (C measurement).
    Consume(ConsumeArgs),
    /// Time a mirror's drain of a preloaded topic (M / MM2 measurement).
    Watch(WatchArgs),
    /// Compare source and destination partition by partition (count + ordered content hash).
    Verify(VerifyArgs),
    /// End-to-end latency through a mirror at a fixed offered rate.
    Latency(LatencyArgs),
    /// Print CPU seconds and RSS of processes from /proc (for the shell script).
    Proc {
        /// Process ids.
        pids: Vec<u32>,
    },
}

#[derive(Subcommand)]
enum TopicsCmd {
    Create {
        #[arg(long)]
        bootstrap: String,
        /// Comma-separated topic names.
        #[arg(long, value_delimiter = ',')]
        names: Vec<String>,
        #[arg(long)]
        partitions: i32,
        /// Topic configs, `key=value`, repeatable.
        #[arg(long = "config")]
        configs: Vec<String>,
    },
    Delete {
        #[arg(long)]
        bootstrap: String,
        /// Delete every topic whose whole name matches this regex.
        #[arg(long)]
        regex: String,
    },
    /// Wait until the topics exist with the given partition count and leaders.
    Wait {
        #[arg(long)]
        bootstrap: String,
        #[arg(long, value_delimiter = ',')]
        names: Vec<String>,
        #[arg(long)]
        partitions: i32,
        #[arg(long, default_value_t = 120)]
        timeout_s: u64,
    },
}

#[derive(Args, Clone)]
struct ProduceArgs {
    #[arg(long)]
    bootstrap: String,
    /// Comma-separated topics; records go round robin over all their partitions.
    #[arg(long, value_delimiter = ',')]
    topics: Vec<String>,
    /// Partitions per topic.
    #[arg(long)]
    partitions: i32,
    /// Records to write (ignored with --secs).
    #[arg(long, default_value_t = 0)]
    records: u64,
    /// Value size in bytes (the key is 16 bytes).
    #[arg(long, default_value_t = 1024)]
    size: usize,
    /// none, lz4, zstd, snappy, gzip.
    #[arg(long, default_value = "none")]
    codec: String,
    #[arg(long, default_value_t = 5)]
    linger_ms: u64,
    /// Producer batch.size in bytes (librdkafka default 1000000).
    #[arg(long, default_value_t = 1_000_000)]
    batch_size: u64,
    /// Transactional: commit a transaction every this many ms (0 = no transactions). The
    /// baseline for an exactly-once copy (`scripts/bench`'s BT): kmirror's transactional work on
    /// the destination without kmirror.
    #[arg(long, default_value_t = 0)]
    txn_ms: u64,
    /// Open loop: records per second (0 = as fast as possible).
    #[arg(long, default_value_t = 0.0)]
    rate: f64,
    /// With --rate: run this long instead of a record count.
    #[arg(long, default_value_t = 0.0)]
    secs: f64,
    /// Extra librdkafka properties, `key=value`, repeatable.
    #[arg(long = "prop")]
    props: Vec<String>,
}

#[derive(Args)]
struct ConsumeArgs {
    #[arg(long)]
    bootstrap: String,
    #[arg(long)]
    topic: String,
    #[arg(long, default_value = "read_committed")]
    isolation: String,
    #[arg(long, default_value_t = 600)]
    timeout_s: u64,
    #[arg(long = "prop")]
    props: Vec<String>,
}

#[derive(Args)]
struct WatchArgs {
    /// Source bootstrap: the end offsets to reach are read from here at start.
    #[arg(long)]
    src: String,
    #[arg(long)]
    dst: String,
    #[arg(long)]
    topic: String,
    /// `hwm`: done when every destination partition's high watermark reaches the source end offset
    /// (identity offsets: MM2 on empty destination topics). `kmirror`: done when kmirror's API reports
    /// `mirrored_source_offset` >= the source end offset for every partition (kmirror writes
    /// transaction markers, so destination offsets run ahead of source offsets). `connect-offsets`:
    /// done when the source offsets a Connect worker committed for the topic (`--offsets-topic` on
    /// the destination, read_committed) reach the source end offsets: MirrorMaker 2 with
    /// exactly-once delivery commits them in the transactions that carry the records, and its
    /// markers also move the destination's offsets ahead of the source's.
    #[arg(long, default_value = "hwm")]
    mode: String,
    /// With `--mode connect-offsets`: the worker's offsets topic on the destination.
    #[arg(long, default_value = "mm2-offsets.src.internal")]
    offsets_topic: String,
    /// kmirror API base URL, e.g. http://127.0.0.1:18080.
    #[arg(long)]
    api: Option<String>,
    #[arg(long, default_value = "bench")]
    mirror: String,
    /// POST this JSON body to `<api>/api/v1/mirrors/<mirror>/topics:start` after the baseline.
    #[arg(long)]
    start_body: Option<String>,
    /// The mirror process(es), comma-separated (several kmirror instances): their CPU time and
    /// RSS are sampled and summed.
    #[arg(long, value_delimiter = ',', required = true)]
    pid: Vec<u32>,
    /// Other processes whose CPU time is reported (brokers), comma-separated.
    #[arg(long, value_delimiter = ',')]
    other_pids: Vec<u32>,
    /// Bytes per record (key + value) to convert records into bytes.
    #[arg(long, default_value_t = 1040)]
    record_bytes: u64,
    #[arg(long, default_value_t = 200)]
    interval_ms: u64,
    #[arg(long, default_value_t = 3600)]
    timeout_s: u64,
    /// Give up when the mirrored record count has not moved for this long (a stalled mirror).
    #[arg(long, default_value_t = 120)]
    stall_s: u64,
}

#[derive(Args)]
struct VerifyArgs {
    #[arg(long)]
    src: String,
    #[arg(long)]
    dst: String,
    /// Comma-separated topics (the same names on both sides).
    #[arg(long = "topic", value_delimiter = ',', required = true)]
    topics: Vec<String>,
    /// exact (an exactly-once copy), dedupe (at least once: repeats counted, left out) or prefix
    /// (the destination holds the first records of each source partition: a copy stopped while the
    /// source still takes writes).
    #[arg(long, default_value = "exact")]
    mode: String,
    /// A file keeping the source side (end offsets, counts, hashes): read when the source has not
    /// changed since, written otherwise (not with --mode prefix).
    #[arg(long)]
    source_summary: Option<String>,
    #[arg(long, default_value_t = 900)]
    timeout_s: u64,
}

#[derive(Args)]
struct LatencyArgs {
    #[arg(long)]
    src: String,
    #[arg(long)]
    dst: String,
    #[arg(long)]
    topic: String,
    #[arg(long)]
    partitions: i32,
    /// Offered load, records per second.
    #[arg(long)]
    rate: f64,
    #[arg(long, default_value_t = 1024)]
    size: usize,
    #[arg(long, default_value = "none")]
    codec: String,
    #[arg(long, default_value_t = 5)]
    linger_ms: u64,
    /// Seconds of load whose latencies are discarded.
    #[arg(long, default_value_t = 10.0)]
    warmup_s: f64,
    /// Seconds of measured load after the warm-up.
    #[arg(long, default_value_t = 60.0)]
    secs: f64,
    /// Checker isolation level on the destination.
    #[arg(long, default_value = "read_committed")]
    isolation: String,
    /// How long to wait for stragglers after the generator stopped.
    #[arg(long, default_value_t = 30.0)]
    drain_s: f64,
}

// ---------------------------------------------------------------------------------------------
// helpers

fn now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
}

fn now_ms_f() -> f64 {
    now_ns() as f64 / 1e6
}

fn die(msg: impl std::fmt::Display) -> ! {
    eprintln!("kbench: error: {msg}");
    std::process::exit(1)
}

fn base_config(bootstrap: &str, props: &[String]) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", bootstrap);
    // As kmirror's clients (src/kafka/admin.rs client_config) and the Java clients: no Nagle.
    c.set("socket.nagle.disable", "true");
    for p in props {
        let Some((k, v)) = p.split_once('=') else { die(format!("--prop {p}: expected key=value")) };
        c.set(k, v);
    }
    c
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime").block_on(f)
}

fn admin(bootstrap: &str) -> AdminClient<DefaultClientContext> {
    base_config(bootstrap, &[]).create().unwrap_or_else(|e| die(format!("admin client: {e}")))
}

fn plain_consumer(bootstrap: &str, isolation: &str, props: &[String]) -> BaseConsumer {
    let mut c = base_config(bootstrap, &[]);
    c.set("group.id", format!("kbench-{}", std::process::id()))
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("enable.partition.eof", "false")
        .set("isolation.level", isolation)
        // kmirror's source consumer settings (src/kafka/pipe.rs), so C is like for like.
        .set("fetch.queue.backoff.ms", "10")
        .set("fetch.wait.max.ms", "500")
        .set("fetch.max.bytes", "16777216")
        .set("max.partition.fetch.bytes", "8388608")
        .set("queued.max.messages.kbytes", "65536");
    for p in props {
        let Some((k, v)) = p.split_once('=') else { die(format!("--prop {p}: expected key=value")) };
        c.set(k, v);
    }
    c.create().unwrap_or_else(|e| die(format!("consumer: {e}")))
}

fn partition_count<C: ClientContext>(client: &rdkafka::client::Client<C>, topic: &str) -> Option<i32> {
    let md = client.fetch_metadata(Some(topic), Duration::from_secs(10)).ok()?;
    let t = md.topics().iter().find(|t| t.name() == topic)?;
    if t.error().is_some() || t.partitions().is_empty() {
        return None;
    }
    Some(t.partitions().len() as i32)
}

/// (low, high) watermarks per partition. Many partitions (a failover's 10,000) are asked in two
/// ListOffsets requests (earliest, latest) instead of two per partition; with read_committed the
/// latest is the last stable offset, the end a read_committed reader reaches.
fn watermarks(consumer: &BaseConsumer, topic: &str, partitions: i32) -> Vec<(i64, i64)> {
    if partitions > 64 {
        let ask = |at: Offset| -> Vec<i64> {
            let mut tpl = TopicPartitionList::new();
            for p in 0..partitions {
                tpl.add_partition_offset(topic, p, at).unwrap();
            }
            let got = consumer
                .offsets_for_times(tpl, Duration::from_secs(60))
                .unwrap_or_else(|e| die(format!("list offsets of {topic}: {e}")));
            let mut out = vec![-1; partitions as usize];
            for el in got.elements() {
                if let Offset::Offset(o) = el.offset() {
                    out[el.partition() as usize] = o;
                }
            }
            if let Some(p) = out.iter().position(|&o| o < 0) {
                die(format!("list offsets of {topic}-{p}: no offset"));
            }
            out
        };
        let (lo, hi) = (ask(Offset::Beginning), ask(Offset::End));
        return lo.into_iter().zip(hi).collect();
    }
    (0..partitions)
        .map(|p| {
            consumer
                .fetch_watermarks(topic, p, Duration::from_secs(10))
                .unwrap_or_else(|e| die(format!("watermarks {topic}-{p}: {e}")))
        })
        .collect()
}

/// CPU seconds (user + system, all threads) of a process, from /proc/<pid>/stat.
fn proc_cpu_s(pid: u32) -> Option<f64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command (which may contain spaces) start after the last ')'.
    let rest = &s[s.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // rest[0] is field 3 (state); utime is field 14, stime field 15.
    let utime: f64 = f.get(11)?.parse().ok()?;
    let stime: f64 = f.get(12)?.parse().ok()?;
    Some((utime + stime) / 100.0) // USER_HZ is 100 on Linux
}

/// (VmRSS, VmHWM) in KiB from /proc/<pid>/status.
fn proc_mem_kib(pid: u32) -> Option<(u64, u64)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| -> Option<u64> {
        s.lines().find(|l| l.starts_with(name))?.split_whitespace().nth(1)?.parse().ok()
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

/// Minimal HTTP/1.1 client for the kmirror API on loopback (no TLS, no auth).
fn http(method: &str, url: &str, body: Option<&str>) -> Result<(u16, String), String> {
    let rest = url.strip_prefix("http://").ok_or("only http:// URLs")?;
    let (host, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let mut s = TcpStream::connect(host).map_err(|e| format!("connect {host}: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(120))).ok();
    let body = body.unwrap_or("");
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nAccept: application/json\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).map_err(|e| e.to_string())?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&buf).into_owned();
    let (head, payload) = text.split_once("\r\n\r\n").ok_or("malformed HTTP response")?;
    let status: u16 = head.split_whitespace().nth(1).and_then(|c| c.parse().ok()).ok_or("no status")?;
    let chunked = head.lines().any(|l| {
        let l = l.to_ascii_lowercase();
        l.starts_with("transfer-encoding:") && l.contains("chunked")
    });
    let payload = if chunked { dechunk(payload) } else { payload.to_string() };
    Ok((status, payload))
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// Deterministic, semi-compressible value bytes: JSON-ish text built from a small vocabulary
/// (lz4 gets roughly 2x on it; random bytes would make lz4 a no-op).
fn payload_pool(size: usize, count: usize) -> Vec<Vec<u8>> {
    const WORDS: &[&str] = &[
        "order",
        "customer",
        "shipped",
        "pending",
        "payment",
        "refund",
        "invoice",
        "warehouse",
        "berlin",
        "paris",
        "tokyo",
        "lisbon",
        "express",
        "standard",
        "priority",
        "blue",
        "green",
        "large",
        "small",
        "widget",
        "gadget",
        "sprocket",
        "bolt",
        "nut",
        "cable",
        "sensor",
        "battery",
        "screen",
        "keyboard",
        "mouse",
        "laptop",
        "phone",
        "tablet",
        "charger",
        "adapter",
        "bracket",
        "valve",
        "pump",
        "filter",
        "gasket",
        "label",
        "carton",
        "pallet",
        "crate",
        "drum",
        "bag",
        "box",
        "tube",
        "sheet",
        "roll",
    ];
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    (0..count)
        .map(|i| {
            let mut s = format!(
                "{{\"id\":{},\"ts\":{},\"amount\":{}.{:02},\"status\":\"{}\",\"city\":\"{}\",\"items\":[",
                i,
                1_700_000_000_000u64 + next() % 1_000_000_000,
                next() % 100_000,
                next() % 100,
                WORDS[(next() % 6) as usize + 1],
                WORDS[(next() % 4) as usize + 8],
            );
            while s.len() < size {
                let w = WORDS[(next() % WORDS.len() as u64) as usize];
                s.push_str(&format!("{{\"sku\":\"{}-{}\",\"qty\":{}}},", w, next() % 10_000, next() % 20));
            }
            let mut b = s.into_bytes();
            b.truncate(size);
            b
        })
        .collect()
}

fn percentiles(mut v: Vec<u64>) -> Value {
    if v.is_empty() {
        return json!(null);
    }
    v.sort_unstable();
    let pick = |q: f64| -> f64 {
        let i = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1;
        v[i] as f64 / 1000.0 // µs → ms
    };
    let mean = v.iter().map(|&x| x as f64).sum::<f64>() / v.len() as f64 / 1000.0;
    json!({
        "count": v.len(),
        "p50_ms": pick(0.50), "p90_ms": pick(0.90), "p99_ms": pick(0.99), "p999_ms": pick(0.999),
        "max_ms": v[v.len() - 1] as f64 / 1000.0, "mean_ms": mean,
    })
}

// ---------------------------------------------------------------------------------------------
// topics

fn topics(cmd: TopicsCmd) -> Value {
    match cmd {
        TopicsCmd::Create { bootstrap, names, partitions, configs } => {
            let a = admin(&bootstrap);
            let kv: Vec<(String, String)> = configs
                .iter()
                .map(|c| c.split_once('=').map(|(k, v)| (k.to_string(), v.to_string())))
                .collect::<Option<_>>()
                .unwrap_or_else(|| die("--config: expected key=value"));
            let mut created = 0;
            // In chunks: one CreateTopics request with thousands of topics is slow to time out.
            for chunk in names.chunks(50) {
                let new: Vec<NewTopic<'_>> = chunk
                    .iter()
                    .map(|n| {
                        let mut t = NewTopic::new(n, partitions, TopicReplication::Fixed(1));
                        for (k, v) in &kv {
                            t = t.set(k, v);
                        }
                        t
                    })
                    .collect();
                let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(120)));
                let res = block_on(a.create_topics(&new, &opts)).unwrap_or_else(|e| die(format!("create: {e}")));
                for r in res {
                    match r {
                        Ok(_) => created += 1,
                        Err((n, RDKafkaErrorCode::TopicAlreadyExists)) => eprintln!("kbench: {n} already exists"),
                        Err((n, e)) => die(format!("create {n}: {e}")),
                    }
                }
            }
            // CreateTopics answers before every broker serves the new partitions.
            let waited = wait_topics(&bootstrap, &names, partitions, 300);
            json!({"created": created, "waited_s": waited})
        }
        TopicsCmd::Delete { bootstrap, regex } => {
            let a = admin(&bootstrap);
            let re = regex::Regex::new(&format!("^(?:{regex})$")).unwrap_or_else(|e| die(e));
            let md = a.inner().fetch_metadata(None, Duration::from_secs(30)).unwrap_or_else(|e| die(e));
            let names: Vec<String> =
                md.topics().iter().map(|t| t.name().to_string()).filter(|n| re.is_match(n)).collect();
            let mut deleted = 0;
            for chunk in names.chunks(50) {
                let refs: Vec<&str> = chunk.iter().map(String::as_str).collect();
                let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(120)));
                let res = block_on(a.delete_topics(&refs, &opts)).unwrap_or_else(|e| die(format!("delete: {e}")));
                deleted += res.iter().filter(|r| r.is_ok()).count();
            }
            json!({"deleted": deleted, "names": names})
        }
        TopicsCmd::Wait { bootstrap, names, partitions, timeout_s } => {
            json!({"waited_s": wait_topics(&bootstrap, &names, partitions, timeout_s)})
        }
    }
}

/// Waits until every topic is in the metadata with `partitions` partitions, each with a leader.
fn wait_topics(bootstrap: &str, names: &[String], partitions: i32, timeout_s: u64) -> f64 {
    let c = plain_consumer(bootstrap, "read_uncommitted", &[]);
    let deadline = Instant::now() + Duration::from_secs(timeout_s);
    let started = Instant::now();
    let mut pending: Vec<String> = names.to_vec();
    while !pending.is_empty() {
        let md = c.fetch_metadata(None, Duration::from_secs(10));
        if let Ok(md) = md {
            pending.retain(|n| {
                !md.topics().iter().any(|t| {
                    t.name() == n
                        && t.error().is_none()
                        && t.partitions().len() as i32 == partitions
                        && t.partitions().iter().all(|p| p.leader() >= 0 && p.error().is_none())
                })
            });
        }
        if pending.is_empty() {
            break;
        }
        if Instant::now() > deadline {
            die(format!("timed out waiting for {} topic(s), e.g. {}", pending.len(), pending[0]));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    started.elapsed().as_secs_f64()
}

// ---------------------------------------------------------------------------------------------
// produce

struct CountingContext {
    acked: AtomicU64,
    first_ack_ns: AtomicU64,
    failed: AtomicU64,
    last_ack_ns: AtomicU64,
    /// Per-record ack time (latency probe only), indexed by the record's sequence number.
    ack_times: Option<Arc<Vec<AtomicU64>>>,
}

impl ClientContext for CountingContext {}

impl ProducerContext for CountingContext {
    type DeliveryOpaque = usize;

    fn delivery(&self, result: &DeliveryResult<'_>, seq: usize) {
        match result {
            Ok(_) => {
                let t = now_ns();
                if self.acked.fetch_add(1, Ordering::Relaxed) == 0 {
                    self.first_ack_ns.store(t, Ordering::Relaxed);
                }
                self.last_ack_ns.store(t, Ordering::Relaxed);
                if let Some(times) = &self.ack_times
                    && let Some(slot) = times.get(seq)
                {
                    slot.store(t, Ordering::Relaxed);
                }
            }
            Err((e, _)) => {
                if self.failed.fetch_add(1, Ordering::Relaxed) < 5 {
                    eprintln!("kbench: delivery failed: {e}");
                }
            }
        }
    }
}

fn make_producer(
    bootstrap: &str,
    codec: &str,
    linger_ms: u64,
    batch_size: u64,
    props: &[String],
    ack_times: Option<Arc<Vec<AtomicU64>>>,
) -> BaseProducer<CountingContext> {
    let mut c = base_config(bootstrap, &[]);
    // kmirror's producer settings (src/kafka/pipe.rs) minus transactions: idempotent, acks=all.
    c.set("enable.idempotence", "true")
        .set("acks", "all")
        .set("linger.ms", linger_ms.to_string())
        .set("batch.size", batch_size.to_string())
        .set("compression.type", codec)
        .set("message.max.bytes", "16777216");
    for p in props {
        let Some((k, v)) = p.split_once('=') else { die(format!("--prop {p}: expected key=value")) };
        c.set(k, v);
    }
    let ctx = CountingContext {
        acked: AtomicU64::new(0),
        first_ack_ns: AtomicU64::new(0),
        failed: AtomicU64::new(0),
        last_ack_ns: AtomicU64::new(0),
        ack_times,
    };
    c.create_with_context(ctx).unwrap_or_else(|e| die(format!("producer: {e}")))
}

/// `k` followed by the sequence number as 15 decimal digits (16 bytes, no allocation).
fn write_key(key: &mut [u8; 16], mut seq: u64) {
    key[0] = b'k';
    for i in (1..16).rev() {
        key[i] = b'0' + (seq % 10) as u8;
        seq /= 10;
    }
}

fn send_retrying(producer: &BaseProducer<CountingContext>, mut rec: BaseRecord<'_, [u8], [u8], usize>) {
    loop {
        match producer.send(rec) {
            Ok(()) => return,
            Err((e, back)) if e.rdkafka_error_code() == Some(RDKafkaErrorCode::QueueFull) => {
                producer.poll(Duration::from_millis(5));
                rec = back;
            }
            Err((e, _)) => die(format!("send: {e}")),
        }
    }
}

fn produce(a: ProduceArgs) -> Value {
    let mut props = a.props.clone();
    if a.txn_ms > 0 {
        props.push(format!("transactional.id=kbench-{}-{}", std::process::id(), now_ms_f() as u64));
    }
    let producer = make_producer(&a.bootstrap, &a.codec, a.linger_ms, a.batch_size, &props, None);
    let txn_every = Duration::from_millis(a.txn_ms);
    let txn_timeout = Duration::from_secs(60);
    let mut txn_started = Instant::now();
    if a.txn_ms > 0 {
        producer.init_transactions(txn_timeout).unwrap_or_else(|e| die(format!("init_transactions: {e}")));
        producer.begin_transaction().unwrap_or_else(|e| die(format!("begin_transaction: {e}")));
    }
    let mut transactions = 0u64;
    for t in &a.topics {
        if partition_count(producer.client(), t).is_none() {
            die(format!("topic {t} does not exist"));
        }
    }
    let targets: Vec<(&str, i32)> =
        a.topics.iter().flat_map(|t| (0..a.partitions).map(move |p| (t.as_str(), p))).collect();
    let pool = payload_pool(a.size, 4096);
    let open_loop = a.rate > 0.0;
    let total = if open_loop && a.secs > 0.0 { (a.rate * a.secs).round() as u64 } else { a.records };
    if total == 0 {
        die("nothing to produce: give --records, or --rate with --secs");
    }
    let start_ms = now_ms_f();
    let t0 = Instant::now();
    let mut key = [0u8; 16];
    let mut last_report = Instant::now();
    for i in 0..total {
        if open_loop {
            let due = Duration::from_secs_f64(i as f64 / a.rate);
            let el = t0.elapsed();
            if due > el {
                producer.poll(Duration::ZERO);
                std::thread::sleep(due - el);
            }
        }
        let (topic, partition) = targets[(i % targets.len() as u64) as usize];
        write_key(&mut key, i);
        let value = &pool[(i % pool.len() as u64) as usize];
        let rec = BaseRecord::with_opaque_to(topic, i as usize).partition(partition).key(&key[..]).payload(&value[..]);
        send_retrying(&producer, rec);
        if a.txn_ms > 0 && i % 64 == 63 && txn_started.elapsed() >= txn_every {
            producer.commit_transaction(txn_timeout).unwrap_or_else(|e| die(format!("commit_transaction: {e}")));
            transactions += 1;
            producer.begin_transaction().unwrap_or_else(|e| die(format!("begin_transaction: {e}")));
            txn_started = Instant::now();
        }
        if i % 1024 == 0 {
            producer.poll(Duration::ZERO);
            if last_report.elapsed() > Duration::from_secs(10) {
                last_report = Instant::now();
                eprintln!(
                    "kbench produce: {i}/{total} sent, {} acked",
                    producer.context().acked.load(Ordering::Relaxed)
                );
            }
        }
    }
    let sent_s = t0.elapsed().as_secs_f64();
    producer.flush(Duration::from_secs(600)).unwrap_or_else(|e| die(format!("flush: {e}")));
    let mut committed_ms = 0.0;
    if a.txn_ms > 0 {
        producer.commit_transaction(txn_timeout).unwrap_or_else(|e| die(format!("commit_transaction: {e}")));
        transactions += 1;
        committed_ms = now_ms_f();
    }
    let ctx = producer.context();
    let acked = ctx.acked.load(Ordering::Relaxed);
    let failed = ctx.failed.load(Ordering::Relaxed);
    // With transactions the copy is done when the last one commits, not at its last ack.
    let end_ms = (ctx.last_ack_ns.load(Ordering::Relaxed) as f64 / 1e6).max(committed_ms);
    let first_ack_ms = ctx.first_ack_ns.load(Ordering::Relaxed) as f64 / 1e6;
    // Steady-state window, like M's (first record on the destination -> done): first ack -> last ack.
    // The first ack carries the producer's start-up (metadata, InitProducerId, first batch).
    let elapsed = ((end_ms - first_ack_ms) / 1000.0).max(1e-9);
    let elapsed_incl_startup = ((end_ms - start_ms) / 1000.0).max(1e-9);
    let bytes = acked * (16 + a.size as u64);
    if failed > 0 {
        die(format!("{failed} records failed"));
    }
    json!({
        "records": acked, "bytes": bytes, "start_ms": start_ms, "first_ms": first_ack_ms, "end_ms": end_ms,
        "elapsed_s": elapsed, "elapsed_incl_startup_s": elapsed_incl_startup,
        "mib_s_incl_startup": bytes as f64 / elapsed_incl_startup / 1048576.0,
        "send_s": sent_s, "mib_s": bytes as f64 / elapsed / 1048576.0, "records_s": acked as f64 / elapsed,
        "codec": a.codec, "linger_ms": a.linger_ms, "batch_size": a.batch_size,
        "offered_rate": a.rate, "txn_ms": a.txn_ms, "transactions": transactions,
    })
}

// ---------------------------------------------------------------------------------------------
// consume

/// FNV-1a-style hash over bytes; touches every byte.
fn fold_bytes(mut h: u64, b: &[u8]) -> u64 {
    let mut chunks = b.chunks_exact(8);
    for c in &mut chunks {
        h = (h ^ u64::from_le_bytes(c.try_into().unwrap())).wrapping_mul(0x100_0000_01b3);
    }
    for &x in chunks.remainder() {
        h = (h ^ u64::from(x)).wrapping_mul(0x100_0000_01b3);
    }
    h
}

const HASH_SEED: u64 = 0xcbf2_9ce4_8422_2325;

/// One record's identity: a hash of its key and value.
fn record_hash(k: &[u8], v: &[u8]) -> u64 {
    // The key's length keeps (k, v) and (k', v') with k + v == k' + v' apart.
    fold_bytes(fold_bytes(HASH_SEED ^ k.len() as u64, k), v)
}

/// A partition's ordered digest: record count and an order-sensitive hash of the record hashes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Digest {
    count: u64,
    hash: u64,
}

impl Digest {
    const EMPTY: Digest = Digest { count: 0, hash: HASH_SEED };
    fn add(&mut self, record: u64) {
        self.count += 1;
        self.hash = (self.hash.rotate_left(5) ^ record).wrapping_mul(0x100_0000_01b3);
    }
}

/// What a drain saw in one partition: every record in order (`all`); with `dedupe`, also the
/// records whose key and value had not been seen before in that partition (`unique`) and how many
/// repeated an earlier one (an at-least-once copy's duplicates); with `prefixes`, the hash after
/// each record, so that the digest of the first n records can be read off once n is known.
#[derive(Clone)]
struct PartitionRead {
    all: Digest,
    unique: Digest,
    duplicates: u64,
    seen: Option<std::collections::HashSet<u64>>,
    prefixes: Option<Vec<u64>>,
}

impl PartitionRead {
    fn new(dedupe: bool, prefixes: bool) -> Self {
        PartitionRead {
            all: Digest::EMPTY,
            unique: Digest::EMPTY,
            duplicates: 0,
            seen: dedupe.then(Default::default),
            prefixes: prefixes.then(Vec::new),
        }
    }
    /// The digest of the partition's first `n` records, if it has that many (and was read with
    /// `prefixes`, or `n` is all of it).
    fn first(&self, n: u64) -> Option<Digest> {
        if n == self.all.count {
            return Some(self.all);
        }
        if n == 0 {
            return Some(Digest::EMPTY);
        }
        let hash = *self.prefixes.as_ref()?.get(usize::try_from(n - 1).ok()?)?;
        Some(Digest { count: n, hash })
    }
    fn add(&mut self, record: u64) {
        self.all.add(record);
        if let Some(p) = self.prefixes.as_mut() {
            p.push(self.all.hash);
        }
        let repeated = self.seen.as_mut().is_some_and(|seen| !seen.insert(record));
        if repeated {
            self.duplicates += 1;
        } else {
            self.unique.add(record);
        }
    }
}

struct Drained {
    records: u64,
    bytes: u64,
    first_ms: f64,
    last_ms: f64,
    start_ms: f64,
    /// Per (topic, partition), in topic then partition order.
    parts: Vec<((String, i32), PartitionRead)>,
    /// The end offsets read at the start, per (topic, partition).
    ends: Vec<i64>,
    /// Partitions given up on (silent before reaching their end): what was read of them is partial.
    unfinished: usize,
}

/// Partitions one consumer reads at a time in [`drain`]. librdkafka's fetcher walks every
/// assigned partition on each wake-up (a lock and a clock read per partition), and a consumer
/// reading wakes up for every fetch response: 10,000 partitions of 20 records each, assigned at
/// once, took 35 s, 33 of them CPU in that walk (perf), where 3,000 took 2.8 s.
const DRAIN_GROUP: usize = 500;

/// How long a group's partitions may stay silent in [`drain`] once records came. A consumer of
/// 10,000 partitions assigned at once went quiet for over 20 s with most of them unread; a group
/// of [`DRAIN_GROUP`] does not.
const DRAIN_SILENCE: Duration = Duration::from_secs(20);

/// Reads every partition of `topics` from its start to the end offsets at call time, up to
/// [`DRAIN_GROUP`] partitions at a time. A partition is done when a record at or past its last
/// offset arrived, or when the consumer's position passed the end (the tail is control records:
/// transaction markers). Gives up on a group's partitions that stay silent for [`DRAIN_SILENCE`]
/// once records came, and says how many it gave up on (`unfinished`).
fn drain(consumer: &BaseConsumer, topics: &[String], timeout: Duration, dedupe: bool, prefixes: bool) -> Drained {
    let mut keys: Vec<(String, i32)> = Vec::new();
    let mut marks: Vec<(i64, i64)> = Vec::new();
    for t in topics {
        let n = partition_count(consumer.client(), t).unwrap_or_else(|| die(format!("no topic {t}")));
        for (p, m) in watermarks(consumer, t, n).into_iter().enumerate() {
            keys.push((t.clone(), p as i32));
            marks.push(m);
        }
    }
    let index: HashMap<(String, i32), usize> = keys.iter().cloned().enumerate().map(|(i, k)| (k, i)).collect();
    let n = keys.len();
    let mut done: Vec<bool> = (0..n).map(|i| marks[i].1 <= marks[i].0).collect();
    let todo: Vec<usize> = (0..n).filter(|&i| !done[i]).collect();
    let start_ms = now_ms_f();
    let mut per: Vec<PartitionRead> = vec![PartitionRead::new(dedupe, prefixes); n];
    let (mut records, mut bytes) = (0u64, 0u64);
    let (mut first_ms, mut last_ms) = (start_ms, start_ms);
    let mut unfinished = 0usize;
    let deadline = Instant::now() + timeout;
    let what = topics.join(",");
    for group in todo.chunks(DRAIN_GROUP) {
        let mut tpl = TopicPartitionList::new();
        for &i in group {
            // From the start offset read above: Offset::Beginning would first look it up once
            // per partition.
            tpl.add_partition_offset(&keys[i].0, keys[i].1, Offset::Offset(marks[i].0)).unwrap();
        }
        consumer.assign(&tpl).unwrap_or_else(|e| die(format!("assign: {e}")));
        let mut remaining = group.len();
        let mut group_records = 0u64;
        let mut last_msg = Instant::now();
        let mut last_position_check = Instant::now();
        while remaining > 0 {
            if Instant::now() > deadline {
                die(format!("drain of {what} timed out with {} partitions unfinished", unfinished + remaining));
            }
            if group_records > 0 && last_msg.elapsed() > DRAIN_SILENCE {
                eprintln!("kbench: {remaining} partition(s) of {what} silent for {DRAIN_SILENCE:?}; stopping");
                break;
            }
            match consumer.poll(Duration::from_millis(100)) {
                None => {}
                Some(Err(e)) => eprintln!("kbench: consumer error: {e}"),
                Some(Ok(m)) => {
                    let now = now_ms_f();
                    if records == 0 {
                        first_ms = now;
                    }
                    last_ms = now;
                    last_msg = Instant::now();
                    let i = if topics.len() == 1 {
                        m.partition() as usize
                    } else {
                        index[&(m.topic().to_string(), m.partition())]
                    };
                    let e = &mut per[i];
                    let k = m.key().unwrap_or(&[]);
                    let v = m.payload().unwrap_or(&[]);
                    e.add(record_hash(k, v));
                    records += 1;
                    group_records += 1;
                    bytes += (k.len() + v.len()) as u64;
                    if !done[i] && m.offset() + 1 >= marks[i].1 {
                        done[i] = true;
                        remaining -= 1;
                    }
                }
            }
            if remaining > 0 && last_position_check.elapsed() > Duration::from_millis(100) {
                last_position_check = Instant::now();
                if let Ok(pos) = consumer.position() {
                    for el in pos.elements() {
                        let Some(&i) = index.get(&(el.topic().to_string(), el.partition())) else { continue };
                        if let Offset::Offset(o) = el.offset()
                            && !done[i]
                            && o >= marks[i].1
                        {
                            done[i] = true;
                            remaining -= 1;
                        }
                    }
                }
            }
        }
        unfinished += remaining;
    }
    if !todo.is_empty() {
        consumer.unassign().unwrap_or_else(|e| die(format!("unassign: {e}")));
    }
    Drained {
        records,
        bytes,
        first_ms,
        last_ms,
        start_ms,
        parts: keys.into_iter().zip(per).collect(),
        ends: marks.iter().map(|m| m.1).collect(),
        unfinished,
    }
}

fn consume(a: ConsumeArgs) -> Value {
    let c = plain_consumer(&a.bootstrap, &a.isolation, &a.props);
    let d = drain(&c, std::slice::from_ref(&a.topic), Duration::from_secs(a.timeout_s), false, false);
    let elapsed = ((d.last_ms - d.first_ms) / 1000.0).max(1e-9);
    json!({
        "records": d.records, "bytes": d.bytes, "start_ms": d.start_ms, "first_ms": d.first_ms,
        "end_ms": d.last_ms, "elapsed_s": elapsed, "mib_s": d.bytes as f64 / elapsed / 1048576.0,
        "records_s": d.records as f64 / elapsed, "startup_s": (d.first_ms - d.start_ms) / 1000.0,
    })
}

/// Per source partition (topic, partition) what was read of it.
type SourceReads = Vec<((String, i32), PartitionRead)>;

/// The source side of a check: per partition its record count and ordered hash, and with
/// `prefixes` the hash after each record (a prefix check compares the destination with the
/// source's first records, however many the destination holds). Without `prefixes` it is kept in
/// a file, so that the runs of one scenario read the source once: per partition its end offset,
/// record count and ordered hash. Returns the reads, whether they came from that file, and how
/// many partitions the read gave up on (see `drain`).
fn source_digests(a: &VerifyArgs, prefixes: bool) -> (SourceReads, bool, usize) {
    let cache = a.source_summary.as_deref().filter(|_| !prefixes);
    let probe = plain_consumer(&a.src, "read_committed", &[]);
    let mut ends = Vec::new();
    for t in &a.topics {
        let n = partition_count(probe.client(), t).unwrap_or_else(|| die(format!("no source topic {t}")));
        ends.extend(watermarks(&probe, t, n).into_iter().map(|m| m.1));
    }
    drop(probe);
    if let Some(path) = cache
        && let Ok(text) = std::fs::read_to_string(path)
        && let Ok(v) = serde_json::from_str::<Value>(&text)
        && v["topics"] == json!(a.topics)
        && v["ends"] == json!(ends)
        && let Some(parts) = v["partitions"].as_array()
    {
        let parsed: Option<Vec<_>> = parts
            .iter()
            .map(|x| {
                let all =
                    Digest { count: x["count"].as_u64()?, hash: u64::from_str_radix(x["hash"].as_str()?, 16).ok()? };
                let read = PartitionRead { all, ..PartitionRead::new(false, false) };
                Some(((x["topic"].as_str()?.to_string(), x["partition"].as_i64()? as i32), read))
            })
            .collect();
        if let Some(parsed) = parsed {
            return (parsed, true, 0);
        }
    }
    let s = plain_consumer(&a.src, "read_committed", &verify_props());
    let d = drain(&s, &a.topics, Duration::from_secs(a.timeout_s), false, prefixes);
    // A partial read is never kept: the next check would take it for the whole source.
    if let Some(path) = cache.filter(|_| d.unfinished == 0) {
        let parts: Vec<Value> = d
            .parts
            .iter()
            .map(|((t, p), r)| {
                json!({"topic": t, "partition": p, "count": r.all.count, "hash": format!("{:016x}", r.all.hash)})
            })
            .collect();
        let v = json!({"topics": a.topics, "ends": d.ends, "partitions": parts});
        if let Err(e) = std::fs::write(path, v.to_string()) {
            eprintln!("kbench: cannot write {path}: {e}");
        }
    }
    (d.parts, false, d.unfinished)
}

/// The consumer settings of a check's reads: [`drain`] reads a group of partitions to its end
/// and then assigns the next, and librdkafka lets go of the finished group only once its fetch
/// returns, which at the end of the data waits out `fetch.wait.max.ms` (500 ms in
/// `plain_consumer`): 10,000 partitions in groups of 250 took 42 s, 33 of them waiting.
fn verify_props() -> Vec<String> {
    vec!["fetch.wait.max.ms=50".to_string()]
}

/// Compares the destination with the source partition by partition: record count and ordered
/// hash of key + value. `exact`: equal. `dedupe` (an at-least-once copy): equal once every record
/// that repeats an earlier one of its partition is left out; the repeats are counted. `prefix`
/// (a copy stopped while the source still takes writes): the destination equals the first records
/// of each source partition.
fn verify(a: VerifyArgs) -> Value {
    let dedupe = a.mode == "dedupe";
    if !matches!(a.mode.as_str(), "exact" | "dedupe" | "prefix") {
        die(format!("unknown --mode {} (exact, dedupe, prefix)", a.mode));
    }
    let t0 = Instant::now();
    let prefix = a.mode == "prefix";
    // Both sides at once, each with its own consumer: a check reads two copies of the data, and
    // one side's fetch waits and group hand-overs (see `drain`) overlap the other's reading. A
    // prefix check reads the whole source (to its end at the start of the check) with the hash
    // after every record, and compares the destination with as many of its first records as the
    // destination holds.
    let (dst, (src, cached, src_unfinished)) = std::thread::scope(|scope| {
        let dst = scope.spawn(|| {
            let d = plain_consumer(&a.dst, "read_committed", &verify_props());
            drain(&d, &a.topics, Duration::from_secs(a.timeout_s), dedupe, false)
        });
        let src = source_digests(&a, prefix);
        (dst.join().unwrap_or_else(|_| die("the destination read failed")), src)
    });
    // A side read only in part proves nothing (in prefix mode a short destination read would
    // compare only the source's first records): partitions given up on fail the check.
    let mut mismatched = Vec::new();
    let mut n_mismatched = 0u64;
    let (mut src_records, mut dst_records, mut dups) = (0u64, 0u64, 0u64);
    let dst_by_key: HashMap<&(String, i32), &PartitionRead> = dst.parts.iter().map(|(k, r)| (k, r)).collect();
    let empty = PartitionRead::new(false, false);
    for (key, s) in &src {
        let d = dst_by_key.get(key).copied().unwrap_or(&empty);
        // What the destination must equal: the whole source partition, or in prefix mode its
        // first records (none when the destination holds more than the source).
        let want = if prefix { s.first(d.all.count) } else { Some(s.all) };
        src_records += want.map_or(s.all.count, |w| w.count);
        dst_records += d.all.count;
        dups += d.duplicates;
        let got = if dedupe { d.unique } else { d.all };
        if want != Some(got) || !dst_by_key.contains_key(key) {
            n_mismatched += 1;
            if mismatched.len() < 20 {
                mismatched.push(json!({"topic": key.0, "partition": key.1, "source_records": s.all.count,
                    "destination_records": d.all.count, "destination_unique_records": d.unique.count,
                    "duplicates": d.duplicates, "hash_equal": want.is_some_and(|w| w.hash == got.hash),
                    "present": dst_by_key.contains_key(key)}));
            }
        }
    }
    let extra = dst.parts.len().saturating_sub(src.len());
    json!({
        "ok": n_mismatched == 0 && extra == 0 && dst.unfinished == 0 && src_unfinished == 0,
        "mode": a.mode, "topics": a.topics,
        "unfinished_partitions": {"source": src_unfinished, "destination": dst.unfinished},
        "source_records": src_records, "destination_records": dst_records, "duplicates": dups,
        "partitions": src.len(), "mismatched_partitions": n_mismatched, "mismatched": mismatched,
        "source_from_cache": cached, "elapsed_s": t0.elapsed().as_secs_f64(),
    })
}

// ---------------------------------------------------------------------------------------------
// watch

fn watch(a: WatchArgs) -> Value {
    let src = plain_consumer(&a.src, "read_committed", &[]);
    let partitions = partition_count(src.client(), &a.topic).unwrap_or_else(|| die("no source topic"));
    let src_marks = watermarks(&src, &a.topic, partitions);
    drop(src);
    let total: i64 = src_marks.iter().map(|(l, h)| h - l).sum();
    let ends: Vec<i64> = src_marks.iter().map(|m| m.1).collect();
    let dst = plain_consumer(&a.dst, "read_uncommitted", &[]);
    let (kmirror, connect) = match a.mode.as_str() {
        "hwm" => (false, false),
        "kmirror" => (true, false),
        "connect-offsets" => (false, true),
        m => die(format!("unknown --mode {m}")),
    };
    // The committed source offsets (the last mirrored offset per partition), once the worker
    // created its offsets topic.
    let offsets_reader =
        connect.then(|| plain_consumer(&a.dst, "read_committed", &["fetch.wait.max.ms=100".to_string()]));
    let mut offsets_assigned = false;
    let mut committed: Vec<i64> = vec![-1; partitions as usize];
    let api = a.api.clone().unwrap_or_default();
    if kmirror && api.is_empty() {
        die("--mode kmirror needs --api");
    }

    let cpu1 = |pid: u32| proc_cpu_s(pid).unwrap_or(f64::NAN);
    let others = |pids: &[u32]| -> Vec<f64> { pids.iter().map(|&p| cpu1(p)).collect() };
    // The mirror's CPU: the sum over its processes (one per kmirror instance).
    let cpu = |pids: &[u32]| -> f64 { pids.iter().map(|&p| cpu1(p)).sum() };
    // (VmRSS, VmHWM) summed over the mirror's processes; None once one of them is gone.
    let mem = |pids: &[u32]| -> Option<(u64, u64)> {
        pids.iter().try_fold((0, 0), |(r, h), &p| proc_mem_kib(p).map(|(r1, h1)| (r + r1, h + h1)))
    };
    let t_start_ms = now_ms_f();
    let t0 = Instant::now();
    let cpu_start = cpu(&a.pid);
    let per_pid_start = others(&a.pid);
    let others_start = others(&a.other_pids);
    let mut start_response = Value::Null;
    if let Some(body) = &a.start_body {
        let url = format!("{api}/api/v1/mirrors/{}/topics:start", a.mirror);
        let (status, text) = http("POST", &url, Some(body)).unwrap_or_else(|e| die(format!("start: {e}")));
        let v: Value = serde_json::from_str(&text).unwrap_or(Value::String(text.clone()));
        let all_ok = v["results"].as_array().is_some_and(|r| r.iter().all(|x| x["ok"] == json!(true)));
        if status != 200 || !all_ok {
            die(format!("start returned {status}: {text}"));
        }
        start_response = json!({"status": status, "elapsed_s": t0.elapsed().as_secs_f64()});
    }

    let mut first: Option<(f64, f64, Vec<f64>)> = None; // (t_ms, cpu, others)
    let mut peak_rss = 0u64;
    let mut complete = vec![false; partitions as usize];
    for (p, e) in ends.iter().enumerate() {
        complete[p] = *e <= src_marks[p].0;
    }
    let deadline = t0 + Duration::from_secs(a.timeout_s);
    let mut last_log = Instant::now();
    let mut progress: i64 = 0;
    let mut last_progress = (0i64, Instant::now());
    let fail = |why: String, progress: i64| -> ! {
        let (rss, hwm) = mem(&a.pid).unwrap_or((0, 0));
        println!(
            "{}",
            json!({"error": why, "records": total, "mirrored_records": progress,
                   "elapsed_s": t0.elapsed().as_secs_f64(), "cpu_s_total": cpu(&a.pid) - cpu_start,
                   "rss_end_kib": rss, "vm_hwm_kib": hwm})
        );
        eprintln!("kbench watch: {why}");
        std::process::exit(3)
    };
    loop {
        if let Some((rss, _)) = mem(&a.pid) {
            peak_rss = peak_rss.max(rss);
        } else {
            let gone: Vec<u32> = a.pid.iter().copied().filter(|&p| proc_mem_kib(p).is_none()).collect();
            fail(format!("the mirror process {gone:?} is gone"), progress);
        }
        if first.is_none() {
            for p in 0..partitions {
                if let Ok((_, h)) = dst.fetch_watermarks(&a.topic, p, Duration::from_secs(2))
                    && h > 0
                {
                    first = Some((now_ms_f(), cpu(&a.pid), others(&a.other_pids)));
                    break;
                }
            }
        }
        if first.is_some() {
            if kmirror {
                let url = format!("{api}/api/v1/mirrors/{}/partitions?topic={}&page_size=1000", a.mirror, a.topic);
                if let Ok((200, text)) = http("GET", &url, None)
                    && let Ok(v) = serde_json::from_str::<Value>(&text)
                    && let Some(items) = v["items"].as_array()
                {
                    progress = 0;
                    for it in items {
                        let p = it["partition"].as_i64().unwrap_or(-1);
                        let m = it["mirrored_source_offset"].as_i64().unwrap_or(0);
                        if p >= 0 && (p as usize) < complete.len() {
                            progress += m - src_marks[p as usize].0;
                            if m >= ends[p as usize] {
                                complete[p as usize] = true;
                            }
                        }
                    }
                }
            } else if let Some(offsets_reader) = &offsets_reader {
                if !offsets_assigned && let Some(n) = partition_count(offsets_reader.client(), &a.offsets_topic) {
                    let mut tpl = TopicPartitionList::new();
                    for p in 0..n {
                        tpl.add_partition_offset(&a.offsets_topic, p, Offset::Beginning).unwrap();
                    }
                    offsets_reader.assign(&tpl).unwrap_or_else(|e| die(format!("assign: {e}")));
                    offsets_assigned = true;
                }
                if offsets_assigned {
                    connect_offsets(offsets_reader, &a.topic, &mut committed);
                }
                progress = 0;
                for p in 0..partitions as usize {
                    if committed[p] >= src_marks[p].0 {
                        progress += (committed[p] + 1).min(ends[p]) - src_marks[p].0;
                    }
                    if committed[p] + 1 >= ends[p] {
                        complete[p] = true;
                    }
                }
            } else {
                progress = 0;
                for p in 0..partitions as usize {
                    if complete[p] {
                        progress += ends[p] - src_marks[p].0;
                        continue;
                    }
                    if let Ok((_, h)) = dst.fetch_watermarks(&a.topic, p as i32, Duration::from_secs(2)) {
                        progress += h - src_marks[p].0;
                        if h >= ends[p] {
                            complete[p] = true;
                        }
                    }
                }
            }
            if complete.iter().all(|c| *c) {
                break;
            }
        }
        if Instant::now() > deadline {
            fail(format!("timed out: {progress}/{total} records mirrored after {}s", a.timeout_s), progress);
        }
        if progress != last_progress.0 {
            last_progress = (progress, Instant::now());
        } else if last_progress.1.elapsed() > Duration::from_secs(a.stall_s) {
            fail(format!("stalled: {progress}/{total} records mirrored, no progress for {}s", a.stall_s), progress);
        }
        if last_log.elapsed() > Duration::from_secs(10) {
            last_log = Instant::now();
            eprintln!("kbench watch: {progress}/{total} records mirrored ({:.0}s)", t0.elapsed().as_secs_f64());
        }
        std::thread::sleep(Duration::from_millis(a.interval_ms));
    }
    let t_done_ms = now_ms_f();
    let cpu_done = cpu(&a.pid);
    let per_pid_done = others(&a.pid);
    let others_done = others(&a.other_pids);
    let (rss_now, hwm) = mem(&a.pid).unwrap_or((0, 0));
    let (t_first_ms, cpu_first, others_first) = first.expect("set before done");
    let bytes = total as u64 * a.record_bytes;
    let gib = bytes as f64 / (1u64 << 30) as f64;
    let drain_s = ((t_done_ms - t_first_ms) / 1000.0).max(1e-9);
    let total_s = (t_done_ms - t_start_ms) / 1000.0;
    json!({
        "records": total, "bytes": bytes, "partitions": partitions,
        "start_ms": t_start_ms, "first_ms": t_first_ms, "end_ms": t_done_ms,
        "drain_s": drain_s, "total_s": total_s, "startup_s": (t_first_ms - t_start_ms) / 1000.0,
        "mib_s": bytes as f64 / drain_s / 1048576.0, "records_s": total as f64 / drain_s,
        "mib_s_incl_startup": bytes as f64 / total_s / 1048576.0,
        "cpu_s_drain": cpu_done - cpu_first, "cpu_s_total": cpu_done - cpu_start,
        "cpu_s_per_gib": (cpu_done - cpu_first) / gib, "cpu_cores_avg": (cpu_done - cpu_first) / drain_s,
        "others_cpu_s_drain": others_done.iter().zip(&others_first).map(|(d, f)| d - f).collect::<Vec<_>>(),
        "others_cpu_s_total": others_done.iter().zip(&others_start).map(|(d, f)| d - f).collect::<Vec<_>>(),
        "rss_peak_sampled_kib": peak_rss, "rss_end_kib": rss_now, "vm_hwm_kib": hwm,
        "processes": a.pid.len(),
        "cpu_s_total_per_process": per_pid_done.iter().zip(&per_pid_start).map(|(d, f)| d - f).collect::<Vec<_>>(),
        "start_call": start_response, "interval_ms": a.interval_ms,
    })
}

/// Reads what is available of a Connect worker's offsets topic and keeps, per partition of
/// `topic`, the last committed source offset. Keys are `["<connector>", {"cluster": .., "topic":
/// .., "partition": ..}]`, values `{"offset": <last mirrored offset>}` (MirrorSourceTask).
fn connect_offsets(reader: &BaseConsumer, topic: &str, committed: &mut [i64]) {
    let until = Instant::now() + Duration::from_millis(100);
    while Instant::now() < until {
        let Some(Ok(m)) = reader.poll(Duration::from_millis(20)) else { continue };
        let (Some(k), Some(v)) = (m.key(), m.payload()) else { continue };
        let (Ok(k), Ok(v)) = (serde_json::from_slice::<Value>(k), serde_json::from_slice::<Value>(v)) else { continue };
        let part = &k[1];
        if part["topic"].as_str() != Some(topic) {
            continue;
        }
        if let (Some(p), Some(o)) = (part["partition"].as_u64(), v["offset"].as_i64())
            && let Some(c) = committed.get_mut(p as usize)
        {
            *c = (*c).max(o);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// latency

/// The latency generator's shortest sleep (see `latency`).
const GENERATOR_TICK: Duration = Duration::from_millis(1);

fn latency(a: LatencyArgs) -> Value {
    let total = ((a.warmup_s + a.secs) * a.rate).round() as u64;
    let ack_times: Arc<Vec<AtomicU64>> = Arc::new((0..total).map(|_| AtomicU64::new(0)).collect());
    let producer = make_producer(&a.src, &a.codec, a.linger_ms, 1_000_000, &[], Some(Arc::clone(&ack_times)));
    if partition_count(producer.client(), &a.topic) != Some(a.partitions) {
        die(format!("source topic {} must exist with {} partitions", a.topic, a.partitions));
    }
    // The checker reads the (fresh) destination topic from the beginning. Before the measured load,
    // one probe record per partition (sequence u64::MAX) must come through: the mirror is then
    // live on every partition, whatever its start-up takes (MM2 task assignment, kmirror's first
    // transaction).
    let checker = plain_consumer(&a.dst, &a.isolation, &["fetch.wait.max.ms=5".to_string()]);
    let deadline = Instant::now() + Duration::from_secs(180);
    while partition_count(checker.client(), &a.topic) != Some(a.partitions) {
        if Instant::now() > deadline {
            die(format!("destination topic {} never showed {} partitions", a.topic, a.partitions));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let mut tpl = TopicPartitionList::new();
    for p in 0..a.partitions {
        tpl.add_partition_offset(&a.topic, p, Offset::Beginning).unwrap();
    }
    checker.assign(&tpl).unwrap_or_else(|e| die(format!("assign: {e}")));
    let probe_started = Instant::now();
    {
        let mut v = vec![0u8; a.size.max(16)];
        v[..8].copy_from_slice(&u64::MAX.to_le_bytes());
        for p in 0..a.partitions {
            let rec = BaseRecord::with_opaque_to(&a.topic, usize::MAX).partition(p).key(&b"probe"[..]).payload(&v[..]);
            send_retrying(&producer, rec);
        }
        producer.flush(Duration::from_secs(30)).unwrap_or_else(|e| die(format!("probe flush: {e}")));
        let mut seen = vec![false; a.partitions as usize];
        let mut left = a.partitions;
        while left > 0 {
            if Instant::now() > deadline {
                die(format!("probe: {left} partition(s) never delivered through the mirror"));
            }
            if let Some(Ok(m)) = checker.poll(Duration::from_millis(50))
                && m.payload().is_some_and(|v| v.len() >= 8 && v[..8] == u64::MAX.to_le_bytes())
                && !std::mem::replace(&mut seen[m.partition() as usize], true)
            {
                left -= 1;
            }
        }
    }
    let probe_s = probe_started.elapsed().as_secs_f64();
    eprintln!("kbench latency: mirror live on all partitions after {probe_s:.1}s; starting the load");

    let t0_ns = now_ns() + 200_000_000;
    let warm_end_ns = t0_ns + (a.warmup_s * 1e9) as u64;
    let gen_done = Arc::new(AtomicBool::new(false));
    let checker_thread = {
        let gen_done = Arc::clone(&gen_done);
        let ack_times = Arc::clone(&ack_times);
        let drain_s = a.drain_s;
        std::thread::spawn(move || {
            let mut from_ack = Vec::with_capacity(total as usize);
            let mut from_send = Vec::with_capacity(total as usize);
            // Worst source-ack → visible latency (µs) per second of visibility after the warm-up:
            // tells periodic stalls (a refresh every N seconds) from spread-out slowness.
            let mut worst_by_second: Vec<u64> = Vec::new();
            let mut received = 0u64;
            let mut seen = vec![false; total as usize];
            let mut dup = 0u64;
            let mut done_at: Option<Instant> = None;
            loop {
                if gen_done.load(Ordering::Relaxed) && done_at.is_none() {
                    done_at = Some(Instant::now());
                }
                if received >= total || done_at.is_some_and(|d| d.elapsed().as_secs_f64() > drain_s) {
                    break;
                }
                let Some(Ok(m)) = checker.poll(Duration::from_millis(20)) else { continue };
                let t = now_ns();
                let v = m.payload().unwrap_or(&[]);
                if v.len() < 16 {
                    continue;
                }
                let seq = u64::from_le_bytes(v[..8].try_into().unwrap());
                let intended = u64::from_le_bytes(v[8..16].try_into().unwrap());
                if seq >= total {
                    continue;
                }
                if std::mem::replace(&mut seen[seq as usize], true) {
                    dup += 1;
                    continue;
                }
                received += 1;
                if intended < warm_end_ns {
                    continue;
                }
                from_send.push(t.saturating_sub(intended) / 1000);
                let ack = ack_times[seq as usize].load(Ordering::Relaxed);
                // An ack not yet processed by the generator thread means it is at most as old as now.
                let latency = if ack == 0 { 0 } else { t.saturating_sub(ack) / 1000 };
                from_ack.push(latency);
                let second = (t.saturating_sub(warm_end_ns) / 1_000_000_000) as usize;
                if second < 3600 {
                    if worst_by_second.len() <= second {
                        worst_by_second.resize(second + 1, 0);
                    }
                    worst_by_second[second] = worst_by_second[second].max(latency);
                }
            }
            let measured_missing = (0..total).filter(|&s| !seen[s as usize]).count() as u64;
            (from_ack, from_send, received, dup, measured_missing, worst_by_second)
        })
    };

    // Open-loop generator: record i is due at t0 + i/rate, whatever happened before. It sleeps
    // until the next record is due, at least GENERATOR_TICK: at 64k records/s a record is due
    // every 16 us, and the spin-wait this loop used to do for such short gaps kept a whole core
    // busy, half of this 2-core box, taken from the brokers and the mirror under test (a
    // per-thread CPU trace showed 0.3-1 s stretches in which the destination broker got almost
    // no CPU while the generator spun; kmirror's p99 fell from ~0.4-0.5 s to ~0.1 s at none-8
    // once it slept, MM2's steady seconds improved too). Records due during a sleep
    // go out together as soon as it ends, at most about one tick late; the latency measured
    // from the source ack does not include that lateness, the one from the intended send does.
    let pool = payload_pool(a.size, 1024);
    let mut buf = vec![0u8; a.size.max(16)];
    let mut key = [0u8; 16];
    let interval_ns = 1e9 / a.rate;
    let mut late_max_ns = 0u64;
    for i in 0..total {
        let due = t0_ns + (i as f64 * interval_ns) as u64;
        let now = now_ns();
        if due > now {
            producer.poll(Duration::ZERO);
            std::thread::sleep(Duration::from_nanos(due - now).max(GENERATOR_TICK));
        } else {
            late_max_ns = late_max_ns.max(now - due);
        }
        let src = &pool[(i % pool.len() as u64) as usize];
        buf[..src.len()].copy_from_slice(src);
        buf[..8].copy_from_slice(&i.to_le_bytes());
        buf[8..16].copy_from_slice(&due.to_le_bytes());
        write_key(&mut key, i);
        let rec = BaseRecord::with_opaque_to(&a.topic, i as usize)
            .partition((i % a.partitions as u64) as i32)
            .key(&key[..])
            .payload(&buf[..a.size])
            .timestamp((due / 1_000_000) as i64);
        send_retrying(&producer, rec);
        producer.poll(Duration::ZERO);
    }
    let _ = producer.flush(Duration::from_secs(60));
    let sent_s = (now_ns() - t0_ns) as f64 / 1e9;
    gen_done.store(true, Ordering::Relaxed);
    let (from_ack, from_send, received, dup, missing, worst_by_second) = checker_thread.join().expect("checker");
    let acked = producer.context().acked.load(Ordering::Relaxed);
    json!({
        "offered_rate": a.rate, "achieved_rate": total as f64 / sent_s, "sent": total, "acked": acked,
        "received": received, "duplicates": dup, "missing": missing, "warmup_s": a.warmup_s,
        "measured_s": a.secs, "generator_late_max_ms": late_max_ns as f64 / 1e6,
        "source_ack_to_visible": percentiles(from_ack),
        "intended_send_to_visible": percentiles(from_send),
        "isolation": a.isolation, "linger_ms": a.linger_ms, "codec": a.codec, "probe_s": probe_s,
        "worst_ms_by_second": worst_by_second.iter().map(|&us| us / 1000).collect::<Vec<_>>(),
    })
}

// ---------------------------------------------------------------------------------------------

fn main() {
    let cli = Cli::parse();
    let out = match cli.cmd {
        Cmd::Topics(t) => topics(t),
        Cmd::Produce(a) => produce(a),
        Cmd::Consume(a) => consume(a),
        Cmd::Watch(a) => watch(a),
        Cmd::Verify(a) => verify(a),
        Cmd::Latency(a) => latency(a),
        Cmd::Proc { pids } => {
            let v: HashMap<String, Value> = pids
                .iter()
                .map(|&p| {
                    let (rss, hwm) = proc_mem_kib(p).unwrap_or((0, 0));
                    (p.to_string(), json!({"cpu_s": proc_cpu_s(p), "rss_kib": rss, "hwm_kib": hwm}))
                })
                .collect();
            json!(v)
        }
    };
    println!("{out}");
}
