//! kchaos: load generator and checker for `scripts/chaos` (issue 15, faults). Not part of
//! kmirror; built with `cargo build --example kchaos`.
//!
//! - `topic`: creates the source topic (idempotent) and waits until it has its partitions.
//! - `produce`: transactional load on the source. Every record's key is `p<partition>-<seq>` with
//!   a per-partition sequence number, its value names the transaction; every `--abort-every`th
//!   transaction is aborted on purpose and its values say `ABORTED`. Runs until `--duration-s`
//!   or until `--stop-file` exists, surviving source broker restarts (a failed transaction is
//!   aborted; a producer that cannot abort or hit a fatal error is re-created, which fences it).
//! - `verify`: reads every partition of the source and of the destination to its end with
//!   `read_committed` and compares them record for record (key, value, timestamp, in order):
//!   counts, lost (in the source, not in the destination), duplicated (more than once in the
//!   destination), extra (in the destination, not in the source), aborted records visible,
//!   out-of-order pairs, and an order-sensitive hash chain per partition.
//!
//! Every subcommand prints one JSON object on stdout; progress goes to stderr. `verify` exits 1
//! when the two sides differ.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::{Args, Parser, Subcommand};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::{Offset, TopicPartitionList};
use serde_json::{Value, json};

#[derive(Parser)]
#[command(name = "kchaos", about = "Load generator and checker for scripts/chaos")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Create the source topic (idempotent).
    Topic(TopicArgs),
    /// Transactional load with aborted transactions.
    Produce(ProduceArgs),
    /// Compare source and destination record for record.
    Verify(VerifyArgs),
}

#[derive(Args)]
struct TopicArgs {
    #[arg(long)]
    bootstrap: String,
    #[arg(long)]
    topic: String,
    #[arg(long, default_value_t = 4)]
    partitions: i32,
}

#[derive(Args)]
struct ProduceArgs {
    #[arg(long)]
    bootstrap: String,
    #[arg(long)]
    topic: String,
    /// Records per second, over all partitions.
    #[arg(long, default_value_t = 1000)]
    rate: u64,
    /// Records per transaction.
    #[arg(long, default_value_t = 50)]
    txn_records: u64,
    /// Abort every n-th transaction on purpose (0: never).
    #[arg(long, default_value_t = 5)]
    abort_every: u64,
    /// Stop after this many seconds...
    #[arg(long, default_value_t = 60)]
    duration_s: u64,
    /// ...or as soon as this file exists.
    #[arg(long)]
    stop_file: Option<PathBuf>,
    /// Value size in bytes (padding after the header).
    #[arg(long, default_value_t = 100)]
    value_bytes: usize,
}

#[derive(Args)]
struct VerifyArgs {
    #[arg(long)]
    src: String,
    #[arg(long)]
    dst: String,
    #[arg(long)]
    topic: String,
    /// Give up reading one side after this long.
    #[arg(long, default_value_t = 300)]
    timeout_s: u64,
}

fn main() {
    let cli = Cli::parse();
    let out = match cli.cmd {
        Cmd::Topic(a) => topic(a),
        Cmd::Produce(a) => produce(a),
        Cmd::Verify(a) => {
            let v = verify(a);
            let ok = v["ok"] == json!(true);
            println!("{v}");
            std::process::exit(if ok { 0 } else { 1 });
        }
    };
    println!("{out}");
}

fn die(msg: impl std::fmt::Display) -> ! {
    eprintln!("kchaos: {msg}");
    std::process::exit(2)
}

fn base_config(bootstrap: &str) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", bootstrap).set("socket.nagle.disable", "true");
    c
}

// ---------------------------------------------------------------------------------------------
// topic

fn topic(a: TopicArgs) -> Value {
    let admin: AdminClient<DefaultClientContext> =
        base_config(&a.bootstrap).create().unwrap_or_else(|e| die(format!("admin client: {e}")));
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let nt = NewTopic::new(&a.topic, a.partitions, TopicReplication::Fixed(1));
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    match rt.block_on(admin.create_topics([&nt], &opts)) {
        Ok(results) => {
            for r in results {
                if let Err((t, code)) = r
                    && code != RDKafkaErrorCode::TopicAlreadyExists
                {
                    die(format!("create topic {t}: {code}"));
                }
            }
        }
        Err(e) => die(format!("create topic: {e}")),
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(md) = admin.inner().fetch_metadata(Some(&a.topic), Duration::from_secs(5))
            && let Some(t) = md.topics().iter().find(|t| t.name() == a.topic)
            && t.error().is_none()
            && t.partitions().len() == a.partitions as usize
            && t.partitions().iter().all(|p| p.leader() >= 0)
        {
            return json!({"topic": a.topic, "partitions": a.partitions});
        }
        if Instant::now() > deadline {
            die(format!("topic {} has no leaders after 60 s", a.topic));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

// ---------------------------------------------------------------------------------------------
// produce

fn txn_producer(bootstrap: &str, transactional_id: &str) -> Option<ThreadedProducer<DefaultProducerContext>> {
    let mut c = base_config(bootstrap);
    c.set("transactional.id", transactional_id)
        .set("enable.idempotence", "true")
        .set("linger.ms", "5")
        .set("transaction.timeout.ms", "60000");
    let p: ThreadedProducer<DefaultProducerContext> = match c.create() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("kchaos produce: cannot create the producer: {e}");
            return None;
        }
    };
    match p.init_transactions(Duration::from_secs(30)) {
        Ok(()) => Some(p),
        Err(e) => {
            eprintln!("kchaos produce: init_transactions: {e}");
            None
        }
    }
}

fn partitions_of(producer: &ThreadedProducer<DefaultProducerContext>, topic: &str) -> Option<i32> {
    let md = producer.client().fetch_metadata(Some(topic), Duration::from_secs(10)).ok()?;
    let t = md.topics().iter().find(|t| t.name() == topic)?;
    (t.error().is_none() && !t.partitions().is_empty()).then_some(t.partitions().len() as i32)
}

fn produce(a: ProduceArgs) -> Value {
    let transactional_id = format!("kchaos-{}", a.topic);
    let started = Instant::now();
    let deadline = started + Duration::from_secs(a.duration_s);
    let stop = || Instant::now() >= deadline || a.stop_file.as_ref().is_some_and(|f| f.exists());
    let mut producer = None;
    while producer.is_none() {
        if stop() {
            die("stopped before the producer could start");
        }
        producer = txn_producer(&a.bootstrap, &transactional_id);
    }
    let partitions = loop {
        if let Some(n) = partitions_of(producer.as_ref().unwrap(), &a.topic) {
            break n;
        }
        if stop() {
            die(format!("no topic {}", a.topic));
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    // Per-partition sequence numbers of records sent (committed or not: a number is never reused).
    let mut seq = vec![0u64; partitions as usize];
    let (mut committed, mut aborted, mut failed, mut recreated) = (0u64, 0u64, 0u64, 0u64);
    let (mut committed_records, mut aborted_records) = (0u64, 0u64);
    let mut txn: u64 = 0;
    let mut next_partition = 0i32;
    let txn_interval = Duration::from_secs_f64(a.txn_records as f64 / a.rate.max(1) as f64);
    let mut next_txn_at = Instant::now();
    let padding = "x".repeat(a.value_bytes);
    let mut last_log = Instant::now();
    while !stop() {
        let now = Instant::now();
        if now < next_txn_at {
            std::thread::sleep((next_txn_at - now).min(Duration::from_millis(100)));
            continue;
        }
        next_txn_at += txn_interval;
        if next_txn_at < Instant::now() {
            next_txn_at = Instant::now(); // behind (a broker restart): do not burst to catch up
        }
        let Some(p) = producer.as_ref() else {
            producer = txn_producer(&a.bootstrap, &transactional_id);
            recreated += 1;
            continue;
        };
        txn += 1;
        let abort = a.abort_every > 0 && txn.is_multiple_of(a.abort_every);
        let kind = if abort { "ABORTED" } else { "committed" };
        let result = (|| -> Result<(), KafkaError> {
            p.begin_transaction()?;
            for _ in 0..a.txn_records {
                let part = next_partition;
                next_partition = (next_partition + 1) % partitions;
                let s = seq[part as usize];
                seq[part as usize] += 1;
                let key = format!("p{part}-{s}");
                let value = format!("{kind} txn={txn} p={part} seq={s} {padding}");
                let mut record = BaseRecord::to(&a.topic).partition(part).key(&key).payload(&value);
                loop {
                    match p.send(record) {
                        Ok(()) => break,
                        Err((e, r)) if e.rdkafka_error_code() == Some(RDKafkaErrorCode::QueueFull) => {
                            std::thread::sleep(Duration::from_millis(5));
                            record = r;
                        }
                        Err((e, _)) => return Err(e),
                    }
                }
            }
            if abort {
                // Every record acknowledged first: an abort racing the first AddPartitionsToTxn
                // fails fatally with INVALID_TXN_STATE (librdkafka#4849).
                p.flush(Duration::from_secs(30))?;
                p.abort_transaction(Duration::from_secs(30))
            } else {
                p.commit_transaction(Duration::from_secs(30))
            }
        })();
        match result {
            Ok(()) if abort => {
                aborted += 1;
                aborted_records += a.txn_records;
            }
            Ok(()) => {
                committed += 1;
                committed_records += a.txn_records;
            }
            Err(e) => {
                failed += 1;
                eprintln!("kchaos produce: transaction {txn} ({kind}) failed: {e}");
                // Whatever its outcome, a failed transaction is never retried with the same
                // records: the checker compares what the source holds, not what was meant.
                let fatal = matches!(&e, KafkaError::Transaction(te) if te.is_fatal());
                if fatal || p.abort_transaction(Duration::from_secs(30)).is_err() {
                    // A new producer with the same id fences the old one and ends its transaction.
                    producer = None;
                }
            }
        }
        if last_log.elapsed() > Duration::from_secs(10) {
            last_log = Instant::now();
            eprintln!(
                "kchaos produce: {:.0} s: {committed} committed, {aborted} aborted on purpose, {failed} failed transactions",
                started.elapsed().as_secs_f64()
            );
        }
    }
    json!({
        "topic": a.topic, "partitions": partitions, "elapsed_s": started.elapsed().as_secs_f64(),
        "transactions_committed": committed, "transactions_aborted": aborted, "transactions_failed": failed,
        "records_committed": committed_records, "records_aborted": aborted_records,
        "producers_recreated": recreated,
    })
}

// ---------------------------------------------------------------------------------------------
// verify

/// One record as compared: key, value, timestamp.
#[derive(Clone, PartialEq, Eq, Hash)]
struct Rec {
    key: Vec<u8>,
    value: Vec<u8>,
    timestamp: Option<i64>,
}

/// Reads every partition of `topic` from its log start to its end (read_committed) and returns
/// the records per partition, in order.
fn read_all(bootstrap: &str, topic: &str, timeout: Duration) -> Vec<Vec<Rec>> {
    let mut c = base_config(bootstrap);
    c.set("group.id", format!("kchaos-verify-{}", std::process::id()))
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("enable.partition.eof", "true")
        .set("isolation.level", "read_committed")
        .set("auto.offset.reset", "earliest")
        .set("fetch.queue.backoff.ms", "10");
    let consumer: BaseConsumer = c.create().unwrap_or_else(|e| die(format!("consumer: {e}")));
    let md =
        consumer.fetch_metadata(Some(topic), Duration::from_secs(30)).unwrap_or_else(|e| die(format!("metadata: {e}")));
    let t = md.topics().iter().find(|t| t.name() == topic).unwrap_or_else(|| die(format!("no topic {topic}")));
    let n = t.partitions().len();
    if n == 0 {
        die(format!("no topic {topic} at {bootstrap}"));
    }
    // The end to reach: the high watermark now (every transaction is over: read_committed ends
    // at the last stable offset, which is then the high watermark).
    let mut ends = Vec::with_capacity(n);
    let mut tpl = TopicPartitionList::new();
    for p in 0..n as i32 {
        let (low, high) = consumer
            .fetch_watermarks(topic, p, Duration::from_secs(30))
            .unwrap_or_else(|e| die(format!("watermarks {topic}-{p}: {e}")));
        ends.push(high);
        if high > low {
            tpl.add_partition_offset(topic, p, Offset::Beginning).unwrap();
        }
    }
    let mut out = vec![Vec::new(); n];
    let mut done: Vec<bool> = (0..n).map(|p| tpl.find_partition(topic, p as i32).is_none()).collect();
    if done.iter().all(|d| *d) {
        return out;
    }
    consumer.assign(&tpl).unwrap_or_else(|e| die(format!("assign: {e}")));
    let deadline = Instant::now() + timeout;
    while done.iter().any(|d| !*d) {
        if Instant::now() > deadline {
            die(format!("reading {topic} at {bootstrap} timed out (partitions done: {done:?})"));
        }
        match consumer.poll(Duration::from_millis(200)) {
            None => {}
            Some(Ok(m)) => {
                let p = m.partition() as usize;
                out[p].push(Rec {
                    key: m.key().unwrap_or(&[]).to_vec(),
                    value: m.payload().unwrap_or(&[]).to_vec(),
                    timestamp: m.timestamp().to_millis(),
                });
            }
            Some(Err(KafkaError::PartitionEOF(p))) => {
                // EOF is reported at the last stable offset; done once that is the end read above.
                let pos = consumer.position().ok().and_then(|l| {
                    l.find_partition(topic, p).and_then(|e| match e.offset() {
                        Offset::Offset(o) => Some(o),
                        _ => None,
                    })
                });
                if pos.is_some_and(|o| o >= ends[p as usize]) {
                    done[p as usize] = true;
                }
            }
            Some(Err(e)) => eprintln!("kchaos verify: {bootstrap}: {e}"),
        }
    }
    out
}

/// FNV-1a folded over key, value and timestamp of each record in order.
fn chain(records: &[Rec]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut fold = |bytes: &[u8]| {
        for b in bytes {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    };
    for r in records {
        fold(&(r.key.len() as u64).to_le_bytes());
        fold(&r.key);
        fold(&(r.value.len() as u64).to_le_bytes());
        fold(&r.value);
        fold(&r.timestamp.unwrap_or(-1).to_le_bytes());
    }
    h
}

/// Differences between a source partition and its destination copy.
#[derive(Default, Debug, PartialEq, Eq)]
struct Diff {
    lost: u64,
    duplicated: u64,
    extra: u64,
    aborted_visible: u64,
    out_of_order: u64,
}

fn compare(src: &[Rec], dst: &[Rec]) -> Diff {
    let mut d = Diff::default();
    let src_index: HashMap<&Rec, usize> = src.iter().enumerate().map(|(i, r)| (r, i)).collect();
    let mut seen: HashSet<&Rec> = HashSet::new();
    let mut last_index: Option<usize> = None;
    for r in dst {
        if r.value.starts_with(b"ABORTED") {
            d.aborted_visible += 1;
        }
        if !seen.insert(r) {
            d.duplicated += 1;
            continue;
        }
        match src_index.get(r) {
            None => d.extra += 1,
            Some(&i) => {
                if last_index.is_some_and(|l| i < l) {
                    d.out_of_order += 1;
                }
                last_index = Some(i);
            }
        }
    }
    d.lost = src.iter().filter(|r| !seen.contains(r)).count() as u64;
    d
}

fn verify(a: VerifyArgs) -> Value {
    let timeout = Duration::from_secs(a.timeout_s);
    let src = read_all(&a.src, &a.topic, timeout);
    let dst = read_all(&a.dst, &a.topic, timeout);
    let mut per = Vec::new();
    let mut total = Diff::default();
    let (mut src_records, mut dst_records) = (0u64, 0u64);
    let mut equal = src.len() == dst.len();
    for p in 0..src.len().max(dst.len()) {
        let s = src.get(p).map_or(&[][..], |v| &v[..]);
        let t = dst.get(p).map_or(&[][..], |v| &v[..]);
        let d = compare(s, t);
        let same = s == t;
        equal &= same;
        src_records += s.len() as u64;
        dst_records += t.len() as u64;
        per.push(json!({
            "partition": p, "source_records": s.len(), "destination_records": t.len(),
            "source_chain": format!("{:016x}", chain(s)), "destination_chain": format!("{:016x}", chain(t)),
            "equal": same, "lost": d.lost, "duplicated": d.duplicated, "extra": d.extra,
            "aborted_visible": d.aborted_visible, "out_of_order": d.out_of_order,
        }));
        total.lost += d.lost;
        total.duplicated += d.duplicated;
        total.extra += d.extra;
        total.aborted_visible += d.aborted_visible;
        total.out_of_order += d.out_of_order;
    }
    let source_aborted_visible: usize = src.iter().flatten().filter(|r| r.value.starts_with(b"ABORTED")).count();
    json!({
        "ok": equal && source_aborted_visible == 0,
        "topic": a.topic, "partitions": src.len(),
        "source_records": src_records, "destination_records": dst_records,
        "lost": total.lost, "duplicated": total.duplicated, "extra": total.extra,
        "aborted_visible": total.aborted_visible, "out_of_order": total.out_of_order,
        "source_aborted_visible": source_aborted_visible,
        "per_partition": per,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(k: &str) -> Rec {
        Rec { key: k.as_bytes().to_vec(), value: format!("committed {k}").into_bytes(), timestamp: Some(1) }
    }

    #[test]
    fn compare_counts_each_kind_of_difference() {
        let src = vec![r("a"), r("b"), r("c")];
        assert_eq!(compare(&src, &src), Diff::default());
        let d = compare(&src, &[r("a"), r("c"), r("b"), r("c")]);
        assert_eq!((d.lost, d.duplicated, d.out_of_order), (0, 1, 1));
        let aborted = Rec { key: b"x".to_vec(), value: b"ABORTED x".to_vec(), timestamp: None };
        let d = compare(&src, &[r("a"), aborted]);
        assert_eq!((d.lost, d.extra, d.aborted_visible), (2, 1, 1));
        assert_ne!(chain(&[r("a"), r("b")]), chain(&[r("b"), r("a")]));
    }
}
