//! One source consumer per mirror and process, shared by the mirror's slot data paths
//! (`engine.source_consumers = "per-mirror"`), in the manner of KIP-1279's replica fetchers: a
//! few fetchers serve many partitions, whoever writes them.
//!
//! Why: librdkafka keeps a partition object for every partition of every topic a consumer
//! knows, assigned or not, and its broker thread walks all of them at each wake-up. A mirror's
//! partitions are spread over the slots by hash, so each of sixteen slot consumers of a
//! 10,000-partition mirror knew all 10,000: memory and idle CPU grew with slots x partitions.
//! Shared, they grow with the partitions.
//!
//! How: each data path gets a [`SlotView`]: a queue of its own on the shared consumer, to which
//! the partitions it assigns are forwarded (before they are assigned, so no record of theirs
//! ever reaches the consumer's own queue). Records, and the fetch errors of its partitions,
//! reach only that data path, and the prefetch limit (`queued.max.messages.kbytes`) applies to
//! each queue, as it did to each slot consumer. Consumer-level errors (no partition: the source
//! refused the connection, every broker down) arrive on the consumer's own queue, which a
//! thread of the shared consumer polls and hands to every view. The transactional writer stays
//! one per slot: it is the slot's fencing unit.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use rdkafka::TopicPartitionList;
use rdkafka::consumer::base_consumer::PartitionQueue;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{BorrowedMessage, Message};

use super::*;
use crate::data_path::{ClientError, FetchError, Key};

/// Consumer-level errors kept per view until it polls: the latest matter, a burst (a refused
/// connection is reported at every reconnect) must not grow without bound.
const ERRORS_KEPT: usize = 8;

/// How long the shared consumer's thread waits on the consumer's own queue per poll: the
/// longest a consumer-level error waits before the views see it, and the thread's stop latency.
const DISPATCH_POLL: Duration = Duration::from_millis(200);

/// What one shared consumer is for: a consumer is shared only by data paths that would have
/// built the same one (a changed source property, e.g. a rotated password, gets a new one).
#[derive(PartialEq, Eq)]
struct SharedKey {
    /// The engine's (two engines in one process never share: their slots are theirs).
    engine: Option<String>,
    mirror: String,
    bootstrap: String,
    properties: BTreeMap<String, String>,
    prefetch_kbytes: usize,
}

struct Entry {
    key: SharedKey,
    shared: Weak<SharedConsumer>,
}

/// The process's shared source consumers, held weakly: the last data path of a mirror to go
/// closes its consumer.
static SHARED: Mutex<Vec<Entry>> = Mutex::new(Vec::new());

/// A view's consumer-level errors, with a flag so that a poll (one per record) looks at them
/// without taking a lock.
#[derive(Default)]
struct Inbox {
    waiting: AtomicBool,
    errors: Mutex<VecDeque<FetchError>>,
}

impl Inbox {
    fn push(&self, error: FetchError) {
        let mut errors = lock(&self.errors);
        if errors.len() == ERRORS_KEPT {
            errors.pop_front();
        }
        errors.push_back(error);
        self.waiting.store(true, Ordering::Release);
    }

    fn pop(&self) -> Option<FetchError> {
        if !self.waiting.load(Ordering::Acquire) {
            return None;
        }
        let mut errors = lock(&self.errors);
        let error = errors.pop_front();
        if errors.is_empty() {
            self.waiting.store(false, Ordering::Release);
        }
        error
    }
}

type Inboxes = Arc<Mutex<HashMap<u64, Arc<Inbox>>>>;

pub(super) struct SharedConsumer {
    consumer: Arc<BaseConsumer>,
    /// Which view each assigned partition belongs to. Held across the consumer calls that change
    /// it, so two data paths' assignments never interleave (a replaced data path's leftovers
    /// against its successor's start).
    owners: Mutex<HashMap<Key, u64>>,
    inboxes: Inboxes,
    next_view: AtomicU64,
    stop: Arc<AtomicBool>,
    dispatcher: Option<std::thread::JoinHandle<()>>,
    mirror: String,
}

impl SharedConsumer {
    /// The shared consumer for `config`'s mirror, created on first use.
    pub(super) fn get(config: &PipeConfig) -> Result<Arc<SharedConsumer>, KafkaError> {
        let key = SharedKey {
            engine: config.shared_source_consumer.clone(),
            mirror: config.mirror.clone(),
            bootstrap: config.source_bootstrap.clone(),
            properties: config.source_properties.clone(),
            prefetch_kbytes: config.prefetch_kbytes,
        };
        let mut registry = lock(&SHARED);
        registry.retain(|e| e.shared.strong_count() > 0);
        if let Some(shared) = registry.iter().find(|e| e.key == key).and_then(|e| e.shared.upgrade()) {
            return Ok(shared);
        }
        let shared = Arc::new(SharedConsumer::open(config)?);
        registry.push(Entry { key, shared: Arc::downgrade(&shared) });
        Ok(shared)
    }

    fn open(config: &PipeConfig) -> Result<SharedConsumer, KafkaError> {
        let mut cfg = consumer_config(config)?;
        cfg.set("client.id", format!("kmirror-{}-source", config.mirror));
        let consumer: Arc<BaseConsumer> = Arc::new(crate::kafka::client::create(&cfg, "source consumer")?);
        let inboxes: Inboxes = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let dispatcher = {
            let (consumer, inboxes, stop) = (Arc::clone(&consumer), Arc::clone(&inboxes), Arc::clone(&stop));
            let mirror = config.mirror.clone();
            std::thread::Builder::new()
                .name(format!("source-{}", config.mirror))
                .spawn(move || dispatch(&consumer, &inboxes, &stop, &mirror))
                .map_err(|e| KafkaError::Client(format!("source consumer thread: {e}")))?
        };
        Ok(SharedConsumer {
            consumer,
            owners: Mutex::default(),
            inboxes,
            next_view: AtomicU64::new(0),
            stop,
            dispatcher: Some(dispatcher),
            mirror: config.mirror.clone(),
        })
    }

    /// A data path's view: its own queue on this consumer.
    pub(super) fn view(self: &Arc<Self>) -> Result<SlotView, KafkaError> {
        let queue = self
            .consumer
            .new_queue()
            .ok_or_else(|| KafkaError::Client("source consumer: cannot create a queue".into()))?;
        let id = self.next_view.fetch_add(1, Ordering::Relaxed);
        let inbox = Arc::new(Inbox::default());
        lock(&self.inboxes).insert(id, Arc::clone(&inbox));
        Ok(SlotView { queue, shared: Arc::clone(self), id, inbox })
    }

    fn owners(&self) -> MutexGuard<'_, HashMap<Key, u64>> {
        lock(&self.owners)
    }
}

impl Drop for SharedConsumer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(handle) = self.dispatcher.take()
            && handle.join().is_err()
        {
            tracing::error!(mirror = %self.mirror, "the shared source consumer's thread panicked");
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The shared consumer's thread: serves the consumer's own queue (its events, and the errors
/// that belong to no partition) and hands those errors to every view.
fn dispatch(consumer: &BaseConsumer, inboxes: &Mutex<HashMap<u64, Arc<Inbox>>>, stop: &AtomicBool, mirror: &str) {
    while !stop.load(Ordering::Relaxed) {
        match consumer.poll(DISPATCH_POLL) {
            None => {}
            Some(Err(e)) => {
                let error = fetch_error(&e);
                for inbox in lock(inboxes).values() {
                    inbox.push(error.clone());
                }
            }
            // Every assigned partition is forwarded to its view before it is assigned, so this
            // is not expected; said loudly, since the record is not mirrored from here.
            Some(Ok(m)) => tracing::error!(
                mirror,
                topic = m.topic(),
                partition = m.partition(),
                offset = m.offset(),
                "a record reached the shared source consumer's own queue"
            ),
        }
    }
}

/// One data path's part of its mirror's shared source consumer.
pub(super) struct SlotView {
    // Before `shared`: the queue handle goes before the consumer can (it holds the consumer too).
    queue: PartitionQueue<rdkafka::consumer::DefaultConsumerContext>,
    shared: Arc<SharedConsumer>,
    id: u64,
    inbox: Arc<Inbox>,
}

impl SlotView {
    pub(super) fn poll(&self, wait: Duration) -> Option<Result<BorrowedMessage<'_>, FetchError>> {
        if let Some(e) = self.inbox.pop() {
            return Some(Err(e));
        }
        self.queue.poll(wait).map(|r| r.map_err(|e| fetch_error(&e)))
    }

    /// Assigns the partitions to the shared consumer with their records going to this view's
    /// queue. A partition another view still holds (the data path this one replaces) is taken
    /// from it first.
    pub(super) fn assign(&self, tpl: &TopicPartitionList, keys: &[Key]) -> Result<(), ClientError> {
        let mut owners = self.shared.owners();
        let taken: Vec<Key> = keys.iter().filter(|k| owners.get(*k).is_some_and(|o| *o != self.id)).cloned().collect();
        if !taken.is_empty() {
            self.unassign_locked(&mut owners, &taken);
        }
        for (topic, partition) in keys {
            if !self.shared.consumer.forward_partition_queue(topic, *partition, &self.queue) {
                return Err(ClientError(format!("cannot read {topic}-{partition}: invalid topic name")));
            }
        }
        self.shared.consumer.incremental_assign(tpl).map_err(|e| ClientError(AssignError::Consumer(e).to_string()))?;
        for key in keys {
            owners.insert(key.clone(), self.id);
        }
        Ok(())
    }

    /// Stops reading those of the partitions this view holds.
    pub(super) fn unassign(&self, keys: &[Key]) {
        let mut owners = self.shared.owners();
        let mine: Vec<Key> = keys.iter().filter(|k| owners.get(*k) == Some(&self.id)).cloned().collect();
        self.unassign_locked(&mut owners, &mine);
    }

    pub(super) fn unassign_all(&self) {
        let mut owners = self.shared.owners();
        let mine = self.mine(&owners);
        self.unassign_locked(&mut owners, &mine);
    }

    fn mine(&self, owners: &HashMap<Key, u64>) -> Vec<Key> {
        let mut mine: Vec<Key> = owners.iter().filter(|(_, o)| **o == self.id).map(|(k, _)| k.clone()).collect();
        mine.sort();
        mine
    }

    /// The partitions this view holds, in order.
    pub(super) fn held(&self) -> Vec<Key> {
        self.mine(&self.shared.owners())
    }

    fn unassign_locked(&self, owners: &mut HashMap<Key, u64>, keys: &[Key]) {
        if keys.is_empty() {
            return;
        }
        crate::kafka::consumer::unassign_partitions(&self.shared.consumer, keys, &self.shared.mirror);
        for key in keys {
            owners.remove(key);
        }
    }

    /// This view's partitions' fetch positions.
    pub(super) fn positions(&self) -> Vec<(Key, i64)> {
        crate::kafka::consumer::positions_of(&self.shared.consumer, &self.held())
    }

    pub(super) fn consumer(&self) -> &BaseConsumer {
        &self.shared.consumer
    }
}

impl Drop for SlotView {
    fn drop(&mut self) {
        self.unassign_all();
        lock(&self.shared.inboxes).remove(&self.id);
    }
}
