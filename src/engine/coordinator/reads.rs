//! Reads a page or an API call makes of Kafka on request, bounded.
//!
//! A topic's lineage (the source's whole state topic, read with a client of its own) and its
//! configs on both clusters are read when someone asks, not from the snapshot. Each read is many
//! threads and sockets for a few seconds (librdkafka's clients), and viewers may ask as often as
//! they like: 150 concurrent lineage requests once took the process from 80 to 1,128 threads and
//! 1,834 open files. So, for each kind of read and each (mirror, topic):
//!
//! - at most one read is in flight; requests that arrive meanwhile wait for its answer;
//! - an answer is reused for [`READ_CACHE_FOR`] (a metadata refresh of the mirror forgets it);
//! - over all mirrors and topics at most [`READS_AT_ONCE`] reads run at once; the rest wait.
//!
//! The topic must belong to the mirror (the caller checks), so the number of entries is bounded
//! by the mirrored topics.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use futures_util::future::{BoxFuture, Shared};
use tokio::sync::{Semaphore, oneshot};

/// How long an answer is reused: long enough that a burst of requests (a page reloaded by many
/// viewers, a script in a loop) makes one read, short enough that a page reloaded after a change
/// shows it. A metadata refresh of the mirror (which may change configs) also forgets them.
pub(super) const READ_CACHE_FOR: Duration = Duration::from_secs(1);

/// Reads of either kind running at once, over every mirror.
pub(super) const READS_AT_ONCE: usize = 2;

type Read<T> = Shared<BoxFuture<'static, T>>;

struct Cached<T: Clone> {
    started: Instant,
    read: Read<T>,
}

/// The reads of one kind, by (mirror, topic).
pub(super) struct SharedReads<T: Clone> {
    entries: HashMap<(String, String), Cached<T>>,
    permits: Arc<Semaphore>,
}

impl<T: Clone + Send + Sync + 'static> SharedReads<T> {
    /// Reads sharing `permits` (one semaphore for every kind).
    pub(super) fn new(permits: Arc<Semaphore>) -> SharedReads<T> {
        SharedReads { entries: HashMap::new(), permits }
    }

    /// Answers `reply` with the read of (`mirror`, `topic`): the one in flight, a recent answer,
    /// or a new read made by `read` (which runs once a permit is free).
    pub(super) fn answer(
        &mut self,
        mirror: &str,
        topic: &str,
        now: Instant,
        reply: oneshot::Sender<T>,
        read: impl FnOnce() -> BoxFuture<'static, T>,
    ) {
        let key = (mirror.to_string(), topic.to_string());
        let reusable = self
            .entries
            .get(&key)
            .filter(|c| c.read.peek().is_none() || now.saturating_duration_since(c.started) < READ_CACHE_FOR)
            .map(|c| c.read.clone());
        let shared = match reusable {
            Some(r) => r,
            None => {
                // Forget answers nobody may reuse any more (keeps the map to the topics asked
                // about lately).
                self.entries.retain(|_, c| {
                    c.read.peek().is_none() || now.saturating_duration_since(c.started) < READ_CACHE_FOR
                });
                let permits = Arc::clone(&self.permits);
                let work = read();
                let r = async move {
                    // Closed only when the engine ends; then read anyway rather than hang.
                    let _permit = permits.acquire_owned().await.ok();
                    work.await
                }
                .boxed()
                .shared();
                self.entries.insert(key, Cached { started: now, read: r.clone() });
                r
            }
        };
        tokio::spawn(async move {
            let _ = reply.send(shared.await);
        });
    }

    /// Forgets the reads of `mirror` (deleted, or its source changed).
    pub(super) fn forget(&mut self, mirror: &str) {
        self.entries.retain(|(m, _), _| m != mirror);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test]
    async fn one_read_in_flight_per_topic_answers_everyone_and_is_reused_for_a_while() {
        let reads = Arc::new(AtomicUsize::new(0));
        let mut shared: SharedReads<usize> = SharedReads::new(Arc::new(Semaphore::new(READS_AT_ONCE)));
        let (gate_tx, gate_rx) = tokio::sync::watch::channel(false);
        let make = |reads: &Arc<AtomicUsize>, gate: &tokio::sync::watch::Receiver<bool>| {
            let (reads, mut gate) = (Arc::clone(reads), gate.clone());
            move || {
                async move {
                    let n = reads.fetch_add(1, Ordering::SeqCst) + 1;
                    let _ = gate.wait_for(|open| *open).await;
                    n
                }
                .boxed()
            }
        };
        let t0 = Instant::now();
        let mut answers = Vec::new();
        for _ in 0..50 {
            let (tx, rx) = oneshot::channel();
            shared.answer("m", "orders", t0, tx, make(&reads, &gate_rx));
            answers.push(rx);
        }
        gate_tx.send(true).unwrap();
        for rx in answers {
            assert_eq!(rx.await.unwrap(), 1, "every request got the one read's answer");
        }
        assert_eq!(reads.load(Ordering::SeqCst), 1);
        // Reused while fresh; read again once stale; another topic is its own read.
        let (tx, rx) = oneshot::channel();
        shared.answer("m", "orders", t0 + READ_CACHE_FOR / 2, tx, make(&reads, &gate_rx));
        assert_eq!(rx.await.unwrap(), 1);
        let (tx, rx) = oneshot::channel();
        shared.answer("m", "orders", t0 + READ_CACHE_FOR + Duration::from_secs(1), tx, make(&reads, &gate_rx));
        assert_eq!(rx.await.unwrap(), 2);
        let (tx, rx) = oneshot::channel();
        shared.answer("m", "payments", t0, tx, make(&reads, &gate_rx));
        assert_eq!(rx.await.unwrap(), 3);
        shared.forget("m");
        assert!(shared.entries.is_empty());
    }

    #[tokio::test]
    async fn at_most_so_many_reads_run_at_once() {
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let mut shared: SharedReads<()> = SharedReads::new(Arc::new(Semaphore::new(READS_AT_ONCE)));
        let mut answers = Vec::new();
        for i in 0..10 {
            let (tx, rx) = oneshot::channel();
            let (running, most) = (Arc::clone(&running), Arc::clone(&most));
            shared.answer("m", &format!("t{i}"), Instant::now(), tx, move || {
                async move {
                    let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    running.fetch_sub(1, Ordering::SeqCst);
                }
                .boxed()
            });
            answers.push(rx);
        }
        for rx in answers {
            rx.await.unwrap();
        }
        assert_eq!(most.load(Ordering::SeqCst), READS_AT_ONCE);
    }
}
