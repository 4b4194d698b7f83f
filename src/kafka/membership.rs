//! Slot ownership through Kafka's consumer-group protocol.
//!
//! kmirror runs as N instances. The unit of ownership is a *slot*: one partition of the state
//! topic (`__mirror_state`, 16 partitions by default). Every instance joins one consumer group on
//! the destination cluster (`kmirror-<cluster name>`), subscribed to the state topic; the
//! partitions the group assigns to an instance are the slots it owns. [`Membership`] runs that
//! group member on a dedicated thread and reports every ownership change as a
//! [`MembershipEvent`]. It never reads records: every assigned partition is paused right after it
//! is assigned (another reader reads the state), and no offset is ever committed.
//!
//! # Why these group settings
//!
//! - **Classic group protocol with `partition.assignment.strategy=cooperative-sticky`.**
//!   Incremental rebalancing: a join or a leave moves only the slots that must move, and an
//!   instance keeps writing to the slots it keeps while the group rebalances (only moved slots
//!   are revoked, in a first round, and assigned to their new owner in a second). The session
//!   timeout is chosen by the client (`session.timeout.ms`, default 10 s here, within the
//!   brokers' `group.min.session.timeout.ms` = 6 s / `group.max.session.timeout.ms` = 30 min
//!   defaults), so a crashed instance's slots move after about 10 s.
//!
//!   Not KIP-848 (`group.protocol=consumer`): there the session timeout is the broker's
//!   (`group.consumer.session.timeout.ms`, and `group.consumer.min.session.timeout.ms` defaults to
//!   45 s on Kafka 4.x), so a 10 s takeover would need broker configuration changes, and the
//!   protocol does not exist on Kafka 3.x brokers. Seen on the test rig (Apache Kafka 4.1.1,
//!   librdkafka 2.12.1): librdkafka refuses to create a `group.protocol=consumer` consumer that
//!   sets `session.timeout.ms` ("`session.timeout.ms` is not supported for
//!   `group.protocol=consumer`. It is defined broker side"; the same for
//!   `heartbeat.interval.ms` and `partition.assignment.strategy`), and the broker reports
//!   `group.consumer.session.timeout.ms` = `group.consumer.min.session.timeout.ms` = 45000
//!   (tests `kip848_*`). `group.protocol=classic` and every other group setting are set after the
//!   user's properties (which kmirror's allow list already refuses), so a client property cannot
//!   switch protocols.
//!
//! - **Static membership** (`group.instance.id` = the instance id). A restart with the same id
//!   within the session timeout moves nothing: the coordinator hands the restarted member its
//!   old assignment without a rebalance, and the other instances see no event at all.
//!   Consequence: librdkafka does not send LeaveGroup when a static member closes, so the slots
//!   of an instance that is stopped for good (or crashes) move only when its session times out
//!   (the session timeout after its last heartbeat), unless it comes back before. Measured on the
//!   rig: a closed member's slots reached the other member 5.9 s after `close` with a 6 s session
//!   timeout and 9.8 s with 10 s; a member restarted with the same id had its slots back 0.1 s
//!   after `close`, and the other member saw no event. Two running instances must never share an
//!   instance id: the newer one fences the older, whose consumer then fails fatally (see
//!   [`Membership::failure`]).
//!
//!   Static membership and cooperative rebalancing together leave one gap: a member that goes
//!   away between the two rounds of a rebalance (after its revoke, before the rejoin that starts
//!   the second round) and comes back within its session timeout gets its cached assignment
//!   back without a rebalance, so the slots revoked in the first round stay assigned to nobody
//!   until something else rebalances the group. Seen on the rig under CPU load: instance one was
//!   stopped while instance two joined, restarted in 3 s, and 2 of 4 slots had no owner for as
//!   long as anyone watched. librdkafka has no call that makes a member rejoin, so
//!   [`Membership::nudge`] makes the group rebalance the only way a client can: a short-lived
//!   dynamic member joins (every member rejoins, and the leader assigns the slots nobody owns)
//!   and leaves again (its share goes back to the instances). The engine calls it when slots
//!   have had no owner for longer than a session timeout should allow.
//!
//! - `heartbeat.interval.ms` = session/10 (at most 1 s). A crashed member's session ends one
//!   session timeout after its last heartbeat, so up to one interval before the timeout has
//!   passed since the crash, and the other members hear of the rebalance at their next
//!   heartbeat, up to one interval later: the slots move a session timeout ± one interval after
//!   a crash (6 s ± 0.6 s with a 6 s session; a quarter of the session made it ± 1.5 s).
//! - `enable.auto.commit=false`, `auto.offset.reset=latest`, and a `max.poll.interval.ms` of at least 5 minutes (and above
//!   the revoke bound): the thread polls every 100 ms, except while a revoke waits for its owner
//!   (at most [`MembershipConfig::revoke_timeout`]). The classic protocol also uses
//!   `max.poll.interval.ms` as the rebalance timeout the coordinator waits for members to
//!   rejoin.
//!
//! # Thread model and events
//!
//! One OS thread per [`Membership`] owns the consumer and polls it every 100 ms; librdkafka runs
//! the rebalance callback on that thread, inside `poll`. Heartbeats are sent by librdkafka's own
//! background threads, so a revoke that waits for its owner does not end the session.
//!
//! - Assign: the slots are assigned (incrementally), paused, added to [`Membership::owned`],
//!   then reported as [`MembershipEvent::Assigned`].
//! - Orderly revoke: [`MembershipEvent::Revoked`] is sent and the rebalance callback blocks
//!   until `done` is sent or dropped (or [`MembershipConfig::revoke_timeout`] passes, logged as a
//!   warning); then the slots are unassigned and leave [`Membership::owned`]. A dropped event
//!   receiver counts as done.
//! - Lost (librdkafka's `rd_kafka_assignment_lost`: session expired, `max.poll.interval.ms`
//!   exceeded, unknown member or illegal generation, fenced static member): the slots leave
//!   [`Membership::owned`] first, then [`MembershipEvent::Lost`] is sent, without waiting.
//! - [`Membership::close`] closes the consumer, which revokes every owned slot in an orderly way:
//!   a final `Revoked` that `close` waits for like any other revoke.
//! - A fatal client error (a newer instance with the same instance id fenced this one) is kept in
//!   [`Membership::failure`]; librdkafka reports the assignment lost, and any slot still owned
//!   then is reported as `Lost`. The member stays out of the group until it is started again.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, RebalanceProtocol};
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::types::RDKafkaRespErr;
use rdkafka::{ClientConfig, ClientContext, TopicPartitionList};
use tokio::sync::{mpsc, oneshot};

use super::client::{ClientKind, client_config, create_with_context};
use super::error::{KafkaError, KafkaResult};
use super::ffi;

/// The session timeout when none is configured: a crashed instance's slots move after ~10 s.
pub const DEFAULT_SESSION_TIMEOUT: Duration = Duration::from_secs(10);

/// How long an orderly revoke waits for the owner's `done` by default.
pub const DEFAULT_REVOKE_TIMEOUT: Duration = Duration::from_secs(30);

/// How often the membership thread polls the consumer (it serves rebalances from `poll`).
const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// The largest heartbeat interval, whatever the session timeout.
const MAX_HEARTBEAT: Duration = Duration::from_secs(1);

/// The smallest `max.poll.interval.ms` (librdkafka's default).
const MIN_MAX_POLL: Duration = Duration::from_secs(300);

/// How the membership thread waits for a revoke's `done` (a tokio oneshot, from a plain thread).
const DONE_POLL: Duration = Duration::from_millis(2);

/// Where and how to join the slot group.
#[derive(Clone)]
pub struct MembershipConfig {
    /// Bootstrap servers of the destination cluster.
    pub bootstrap: String,
    /// Client properties, security included (may hold secrets and `${env:..}` / `${file:..}`
    /// references; never logged). kmirror's group settings are applied over them.
    pub properties: BTreeMap<String, String>,
    /// The consumer group, e.g. `kmirror-<cluster name>`.
    pub group_id: String,
    /// This instance's id: `group.instance.id`, and the suffix of `client.id`.
    pub instance_id: String,
    /// The state topic whose partitions are the slots.
    pub topic: String,
    /// `session.timeout.ms`: how long after its last heartbeat a vanished instance's slots move.
    /// Must lie within the brokers' `group.min.session.timeout.ms` (6 s by default) and
    /// `group.max.session.timeout.ms`.
    pub session_timeout: Duration,
    /// How long an orderly revoke waits for the owner's `done` before the slots are given up
    /// anyway.
    pub revoke_timeout: Duration,
}

impl std::fmt::Debug for MembershipConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Property values may be secrets: show their names only.
        f.debug_struct("MembershipConfig")
            .field("bootstrap", &self.bootstrap)
            .field("properties", &self.properties.keys().collect::<Vec<_>>())
            .field("group_id", &self.group_id)
            .field("instance_id", &self.instance_id)
            .field("topic", &self.topic)
            .field("session_timeout", &self.session_timeout)
            .field("revoke_timeout", &self.revoke_timeout)
            .finish()
    }
}

impl MembershipConfig {
    /// A config with the default session timeout (10 s) and revoke bound (30 s).
    pub fn new(
        bootstrap: impl Into<String>,
        properties: BTreeMap<String, String>,
        group_id: impl Into<String>,
        instance_id: impl Into<String>,
        topic: impl Into<String>,
    ) -> MembershipConfig {
        MembershipConfig {
            bootstrap: bootstrap.into(),
            properties,
            group_id: group_id.into(),
            instance_id: instance_id.into(),
            topic: topic.into(),
            session_timeout: DEFAULT_SESSION_TIMEOUT,
            revoke_timeout: DEFAULT_REVOKE_TIMEOUT,
        }
    }

    fn validate(&self) -> KafkaResult<()> {
        let invalid = |message: String| Err(KafkaError::InvalidArgument { operation: "join group", message });
        for (what, value) in [("group id", &self.group_id), ("instance id", &self.instance_id), ("topic", &self.topic)]
        {
            if value.is_empty() {
                return invalid(format!("the {what} is empty"));
            }
        }
        if self.session_timeout < Duration::from_millis(1) || millis(self.session_timeout) > 3_600_000 {
            return invalid(format!("session timeout {:?} is outside 1 ms ..= 1 h", self.session_timeout));
        }
        Ok(())
    }

    /// The consumer's settings: kmirror's connection defaults, the user's properties, then what
    /// the slot group depends on (which the user cannot override).
    fn client_config(&self) -> KafkaResult<ClientConfig> {
        self.validate()?;
        let mut cfg = client_config(Some(ClientKind::Consumer), &self.bootstrap, &self.properties, &[])?;
        let client_id = format!("{}-membership-{}", cfg.get("client.id").unwrap_or("kmirror"), self.instance_id);
        cfg.set("group.id", &self.group_id)
            .set("group.instance.id", &self.instance_id)
            .set("client.id", client_id)
            .set("group.protocol", "classic")
            .set("partition.assignment.strategy", "cooperative-sticky")
            .set("session.timeout.ms", millis(self.session_timeout).to_string())
            .set("heartbeat.interval.ms", millis(heartbeat_interval(self.session_timeout)).to_string())
            .set(
                "max.poll.interval.ms",
                millis(max_poll_interval(self.session_timeout, self.revoke_timeout)).to_string(),
            )
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("auto.offset.reset", "latest")
            .set("enable.partition.eof", "false")
            // Subscribing must never create the state topic (it is created with its own configs).
            .set("allow.auto.create.topics", "false");
        Ok(cfg)
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// `heartbeat.interval.ms`: a tenth of the session, at most 1 s, at least 1 ms (see the module
/// docs: it bounds how far a takeover strays from the session timeout).
fn heartbeat_interval(session: Duration) -> Duration {
    (session / 10).min(MAX_HEARTBEAT).max(Duration::from_millis(1))
}

/// `max.poll.interval.ms`: at least librdkafka's 5-minute default, never below the session
/// timeout (librdkafka refuses that), and a minute above the revoke bound, during which the
/// thread does not poll.
fn max_poll_interval(session: Duration, revoke: Duration) -> Duration {
    MIN_MAX_POLL.max(session).max(revoke.saturating_add(Duration::from_secs(60))).min(Duration::from_secs(86_400))
}

/// A change of this instance's slots.
#[derive(Debug)]
pub enum MembershipEvent {
    /// Slots newly assigned to this instance (incremental).
    Assigned(Vec<i32>),
    /// Slots taken away in an orderly rebalance. The rebalance waits (up to
    /// [`MembershipConfig::revoke_timeout`]) until `done` is sent or dropped, so the owner can end
    /// its open transaction and stop writing first.
    Revoked { slots: Vec<i32>, done: oneshot::Sender<()> },
    /// Slots lost without an orderly revoke (session expired, fenced static member, etc.):
    /// another instance may already own them; stop writing at once.
    Lost(Vec<i32>),
}

/// State shared between the membership thread (the consumer's context) and [`Membership`].
#[derive(Debug, Default)]
struct Shared {
    owned: Mutex<BTreeSet<i32>>,
    rebalances: AtomicU64,
    failure: Mutex<Option<KafkaError>>,
}

impl Shared {
    fn owned(&self) -> MutexGuard<'_, BTreeSet<i32>> {
        self.owned.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The consumer's context: runs the rebalance callback on the membership thread.
struct MembershipContext {
    shared: Arc<Shared>,
    events: mpsc::UnboundedSender<MembershipEvent>,
    topic: String,
    group: String,
    instance: String,
    revoke_timeout: Duration,
}

impl ClientContext for MembershipContext {}

impl ConsumerContext for MembershipContext {
    fn rebalance(&self, consumer: &BaseConsumer<Self>, err: RDKafkaRespErr, tpl: &mut TopicPartitionList) {
        self.shared.rebalances.fetch_add(1, Ordering::Relaxed);
        let cooperative = matches!(consumer.rebalance_protocol(), RebalanceProtocol::Cooperative);
        let slots = slots_of(tpl, &self.topic);
        match err {
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS => self.on_assign(consumer, cooperative, tpl, &slots),
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS => self.on_revoke(consumer, cooperative, tpl, &slots),
            other => {
                // rdkafka only hands assign and revoke to this callback; librdkafka's rule for
                // anything else is to drop the assignment (eager) and let it rejoin.
                tracing::warn!(
                    group = %self.group,
                    instance = %self.instance,
                    error = ?other,
                    "unexpected rebalance event"
                );
                if !cooperative && let Err(e) = consumer.unassign() {
                    tracing::warn!(group = %self.group, error = %e, "unassign after a rebalance error failed");
                }
            }
        }
    }
}

impl MembershipContext {
    fn on_assign(&self, consumer: &BaseConsumer<Self>, cooperative: bool, tpl: &TopicPartitionList, slots: &[i32]) {
        let assigned = if cooperative { consumer.incremental_assign(tpl) } else { consumer.assign(tpl) };
        if let Err(e) = assigned {
            // Only a closed or failed consumer refuses; the group still counts these slots as
            // ours, but nothing may write to them: they are not reported.
            tracing::error!(
                group = %self.group,
                instance = %self.instance,
                ?slots,
                error = %e,
                "cannot take assigned slots"
            );
            return;
        }
        // Nothing is ever fetched: the state is read elsewhere.
        if !slots.is_empty()
            && let Err(e) = consumer.pause(tpl)
        {
            tracing::warn!(group = %self.group, ?slots, error = %e, "cannot pause assigned slots");
        }
        let new = self.shared.owned().assign(slots);
        tracing::info!(group = %self.group, instance = %self.instance, slots = ?new, "slots assigned");
        if !new.is_empty() {
            let _ = self.events.send(MembershipEvent::Assigned(new));
        }
    }

    fn on_revoke(&self, consumer: &BaseConsumer<Self>, cooperative: bool, tpl: &TopicPartitionList, slots: &[i32]) {
        let lost = consumer.assignment_lost();
        let held = self.shared.owned().held(slots);
        if lost {
            // Another instance may own them already: forget them before telling anyone.
            self.shared.owned().release(&held);
            tracing::warn!(group = %self.group, instance = %self.instance, slots = ?held, "slots lost");
            if !held.is_empty() {
                let _ = self.events.send(MembershipEvent::Lost(held.clone()));
            }
        } else if !held.is_empty() {
            tracing::info!(
                group = %self.group,
                instance = %self.instance,
                slots = ?held,
                "slots revoked; waiting for their owner"
            );
            let (done, wait) = oneshot::channel();
            let started = Instant::now();
            // A dropped receiver drops `done` with the event: nothing to wait for.
            let _ = self.events.send(MembershipEvent::Revoked { slots: held.clone(), done });
            match wait_done(wait, self.revoke_timeout) {
                RevokeWait::Done | RevokeWait::Dropped => {
                    tracing::debug!(
                        group = %self.group,
                        slots = ?held,
                        waited = ?started.elapsed(),
                        "revoke acknowledged"
                    )
                }
                RevokeWait::TimedOut => tracing::warn!(
                    group = %self.group,
                    instance = %self.instance,
                    slots = ?held,
                    after = ?self.revoke_timeout,
                    "the owner did not release revoked slots in time; giving them up anyway"
                ),
            }
        }
        let unassigned = if cooperative { consumer.incremental_unassign(tpl) } else { consumer.unassign() };
        if let Err(e) = unassigned {
            tracing::warn!(group = %self.group, instance = %self.instance, error = %e, "unassign failed");
        }
        if !lost {
            self.shared.owned().release(&held);
        }
    }
}

/// Slot bookkeeping, kept apart from the consumer so it can be tested without Kafka.
trait SlotSet {
    /// Adds `slots`; returns those that were not held yet (sorted).
    fn assign(&mut self, slots: &[i32]) -> Vec<i32>;
    /// Those of `slots` that are held (sorted).
    fn held(&self, slots: &[i32]) -> Vec<i32>;
    /// Removes `slots`.
    fn release(&mut self, slots: &[i32]);
}

impl SlotSet for BTreeSet<i32> {
    fn assign(&mut self, slots: &[i32]) -> Vec<i32> {
        let mut new: Vec<i32> = slots.iter().copied().filter(|s| self.insert(*s)).collect();
        new.sort_unstable();
        new
    }

    fn held(&self, slots: &[i32]) -> Vec<i32> {
        let mut held: Vec<i32> = slots.iter().copied().filter(|s| self.contains(s)).collect();
        held.sort_unstable();
        held.dedup();
        held
    }

    fn release(&mut self, slots: &[i32]) {
        for s in slots {
            self.remove(s);
        }
    }
}

/// The partitions of `topic` in a rebalance's list.
fn slots_of(tpl: &TopicPartitionList, topic: &str) -> Vec<i32> {
    tpl.elements().iter().filter(|e| e.topic() == topic).map(|e| e.partition()).collect()
}

#[derive(Debug, PartialEq, Eq)]
enum RevokeWait {
    Done,
    Dropped,
    TimedOut,
}

/// Waits (blocking this thread) until the owner answers `done`, drops it, or `bound` passes.
fn wait_done(mut wait: oneshot::Receiver<()>, bound: Duration) -> RevokeWait {
    let deadline = Instant::now() + bound;
    loop {
        match wait.try_recv() {
            Ok(()) => return RevokeWait::Done,
            Err(oneshot::error::TryRecvError::Closed) => return RevokeWait::Dropped,
            Err(oneshot::error::TryRecvError::Empty) if Instant::now() >= deadline => return RevokeWait::TimedOut,
            Err(oneshot::error::TryRecvError::Empty) => std::thread::sleep(DONE_POLL),
        }
    }
}

/// A member of the slot group: owns the slots the group assigns to this instance.
///
/// Dropping it without [`close`](Membership::close) stops the thread in the background (the
/// consumer is closed there, with the same final revoke).
pub struct Membership {
    shared: Arc<Shared>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    group: String,
    instance: String,
    /// What a nudge joins with (see [`Membership::nudge`]).
    config: MembershipConfig,
    /// Whether a nudge is running: at most one at a time.
    nudging: Arc<AtomicBool>,
}

impl std::fmt::Debug for Membership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Membership")
            .field("group", &self.group)
            .field("instance", &self.instance)
            .field("owned", &self.owned())
            .finish()
    }
}

impl Membership {
    /// Creates the group member and starts its thread; joining the group happens there, in the
    /// background, and every ownership change is sent to `events`.
    ///
    /// Fails when the config is invalid (empty names, a property librdkafka or kmirror's allow
    /// list refuses, an unresolvable secret reference) or the subscription is refused. An
    /// unreachable cluster or a missing topic is not an error here: the member keeps trying
    /// (librdkafka logs why) and owns nothing meanwhile.
    pub fn start(cfg: MembershipConfig, events: mpsc::UnboundedSender<MembershipEvent>) -> KafkaResult<Membership> {
        let client = cfg.client_config()?;
        let shared = Arc::new(Shared::default());
        let context = MembershipContext {
            shared: shared.clone(),
            events,
            topic: cfg.topic.clone(),
            group: cfg.group_id.clone(),
            instance: cfg.instance_id.clone(),
            revoke_timeout: cfg.revoke_timeout,
        };
        let consumer: BaseConsumer<MembershipContext> = create_with_context(&client, context, "slot group member")?;
        consumer.subscribe(&[cfg.topic.as_str()]).map_err(|e| KafkaError::InvalidArgument {
            operation: "subscribe",
            message: format!("topic {:?}: {e}", cfg.topic),
        })?;
        let stop = Arc::new(AtomicBool::new(false));
        let thread = std::thread::Builder::new()
            .name(format!("kmirror-membership-{}", cfg.instance_id))
            .spawn({
                let (stop, shared) = (stop.clone(), shared.clone());
                let (group, instance) = (cfg.group_id.clone(), cfg.instance_id.clone());
                move || run(consumer, &stop, &shared, &group, &instance)
            })
            .map_err(|e| KafkaError::Client(format!("cannot start the membership thread: {e}")))?;
        tracing::info!(
            group = %cfg.group_id,
            instance = %cfg.instance_id,
            topic = %cfg.topic,
            "joining the slot group"
        );
        Ok(Membership {
            shared,
            stop,
            thread: Some(thread),
            group: cfg.group_id.clone(),
            instance: cfg.instance_id.clone(),
            config: cfg,
            nudging: Arc::new(AtomicBool::new(false)),
        })
    }

    /// Makes the group rebalance, in the background: a short-lived dynamic member joins the
    /// group and leaves once it has been assigned (see the module docs for why). Returns at once;
    /// `false` when a nudge is still running.
    pub fn nudge(&self) -> bool {
        if self.nudging.swap(true, Ordering::SeqCst) {
            return false;
        }
        let (cfg, nudging) = (self.config.clone(), Arc::clone(&self.nudging));
        let spawned = std::thread::Builder::new().name(format!("kmirror-membership-nudge-{}", cfg.instance_id)).spawn(
            move || {
                match nudge_group(&cfg, NUDGE_TIMEOUT) {
                    Ok(true) => tracing::info!(group = %cfg.group_id, "the slot group rebalanced"),
                    Ok(false) => tracing::warn!(
                        group = %cfg.group_id,
                        after = ?NUDGE_TIMEOUT,
                        "the slot group did not rebalance in time; asking again later"
                    ),
                    Err(e) => tracing::warn!(group = %cfg.group_id, error = %e, "cannot make the slot group rebalance"),
                }
                nudging.store(false, Ordering::SeqCst);
            },
        );
        if let Err(e) = spawned {
            tracing::warn!(group = %self.group, error = %e, "cannot start the nudge thread");
            self.nudging.store(false, Ordering::SeqCst);
            return false;
        }
        true
    }

    /// The slots this instance owns now, sorted.
    pub fn owned(&self) -> Vec<i32> {
        self.shared.owned().iter().copied().collect()
    }

    /// Rebalance callbacks seen so far (assign and revoke rounds, empty ones included).
    pub fn rebalances(&self) -> u64 {
        self.shared.rebalances.load(Ordering::Relaxed)
    }

    /// The fatal error that took this member out of the group (a newer instance with the same
    /// instance id fenced it), if any. Such a member owns nothing and never rejoins.
    pub fn failure(&self) -> Option<KafkaError> {
        self.shared.failure.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Stops the thread and closes the consumer. Blocking: call it from `spawn_blocking`.
    ///
    /// Closing revokes every owned slot through a final [`MembershipEvent::Revoked`] and waits
    /// for its `done` like any revoke (at most the revoke bound): keep serving the event
    /// receiver, or drop it, while this runs. Being a static member, the instance sends no
    /// LeaveGroup: its slots move to other instances only after the session timeout, unless an
    /// instance with the same id joins before.
    pub fn close(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take()
            && thread.join().is_err()
        {
            tracing::error!(group = %self.group, instance = %self.instance, "membership thread panicked");
        }
    }
}

impl Drop for Membership {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The membership thread: polls until stopped, then closes the consumer (dropping it runs
/// librdkafka's close, whose final revoke comes through the rebalance callback).
fn run(consumer: BaseConsumer<MembershipContext>, stop: &AtomicBool, shared: &Shared, group: &str, instance: &str) {
    let mut last_error: Option<String> = None;
    while !stop.load(Ordering::Relaxed) {
        match consumer.poll(POLL_INTERVAL) {
            None => {}
            Some(Ok(m)) => {
                use rdkafka::message::Message;
                tracing::debug!(group, partition = m.partition(), "record from a paused slot ignored");
            }
            Some(Err(e)) => {
                if let Some((code, reason)) = consumer.client().fatal_error() {
                    on_fatal(shared, consumer.context(), code, reason);
                } else {
                    let text = e.to_string();
                    if last_error.as_deref() != Some(text.as_str()) {
                        tracing::warn!(group, instance, error = %text, "slot group member error");
                        last_error = Some(text);
                    }
                }
            }
        }
    }
    tracing::info!(group, instance, "leaving the slot group (static member: no LeaveGroup)");
    drop(consumer);
    let left = std::mem::take(&mut *shared.owned());
    if !left.is_empty() {
        tracing::warn!(group, instance, slots = ?left, "slots still owned after close");
    }
}

/// Records a fatal client error once, and reports every slot still owned as lost.
/// How long a nudge's member waits for its assignment before it gives up.
const NUDGE_TIMEOUT: Duration = Duration::from_secs(60);

/// Whether the nudge's member has been assigned (an empty assignment counts: the rebalance ran).
#[derive(Default)]
struct NudgeContext {
    assigned: AtomicBool,
}

impl ClientContext for NudgeContext {}

impl ConsumerContext for NudgeContext {
    fn post_rebalance(&self, _consumer: &BaseConsumer<Self>, rebalance: &rdkafka::consumer::Rebalance<'_>) {
        if matches!(rebalance, rdkafka::consumer::Rebalance::Assign(_)) {
            self.assigned.store(true, Ordering::SeqCst);
        }
    }
}

/// Joins `cfg`'s group as a dynamic member (no `group.instance.id`: its close sends
/// LeaveGroup), waits until the rebalance its join started has assigned it, and leaves. Both the
/// join and the leave rebalance the group; slots it was assigned go back to the instances with
/// the leave. Blocking; `Ok(false)` when no assignment came within `timeout`.
pub fn nudge_group(cfg: &MembershipConfig, timeout: Duration) -> KafkaResult<bool> {
    let mut client = cfg.client_config()?;
    client.remove("group.instance.id");
    let client_id = client
        .get("client.id")
        .unwrap_or("kmirror-membership")
        .replace(&format!("-membership-{}", cfg.instance_id), &format!("-membership-nudge-{}", cfg.instance_id));
    client.set("client.id", client_id).set("max.poll.interval.ms", millis(timeout.max(MIN_MAX_POLL)).to_string());
    let consumer: BaseConsumer<NudgeContext> =
        create_with_context(&client, NudgeContext::default(), "slot group nudge")?;
    consumer.subscribe(&[cfg.topic.as_str()]).map_err(|e| KafkaError::InvalidArgument {
        operation: "subscribe",
        message: format!("topic {:?}: {e}", cfg.topic),
    })?;
    let deadline = Instant::now() + timeout;
    while !consumer.context().assigned.load(Ordering::SeqCst) && Instant::now() < deadline {
        // A record of a slot it holds for a moment is dropped, and nothing is committed
        // (`enable.auto.commit=false`): the group's offsets stay as the instances left them.
        let _ = consumer.poll(POLL_INTERVAL);
    }
    let assigned = consumer.context().assigned.load(Ordering::SeqCst);
    // Dropping the consumer closes it: its slots are revoked and LeaveGroup is sent.
    drop(consumer);
    Ok(assigned)
}

fn on_fatal(shared: &Shared, ctx: &MembershipContext, code: RDKafkaErrorCode, reason: String) {
    let mut failure = shared.failure.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if failure.is_some() {
        return;
    }
    tracing::error!(group = %ctx.group, instance = %ctx.instance, error = %reason, "slot group member failed");
    *failure = Some(KafkaError::Kafka {
        operation: "consumer group",
        resource: ctx.group.clone(),
        code: ffi::code_of(code),
        message: reason,
    });
    drop(failure);
    let held = std::mem::take(&mut *shared.owned());
    if !held.is_empty() {
        let _ = ctx.events.send(MembershipEvent::Lost(held.into_iter().collect()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(props: &[(&str, &str)]) -> MembershipConfig {
        let properties = props.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        MembershipConfig::new("127.0.0.1:1", properties, "kmirror-dst", "node-a", "__mirror_state")
    }

    #[test]
    fn group_settings_are_kmirrors() {
        let c = cfg(&[("sasl.password", "hunter2-real"), ("client.id", "edge")]).client_config().unwrap();
        for (k, v) in [
            ("group.id", "kmirror-dst"),
            ("group.instance.id", "node-a"),
            ("client.id", "edge-membership-node-a"),
            ("group.protocol", "classic"),
            ("partition.assignment.strategy", "cooperative-sticky"),
            ("session.timeout.ms", "10000"),
            ("heartbeat.interval.ms", "1000"),
            ("max.poll.interval.ms", "300000"),
            ("enable.auto.commit", "false"),
            ("auto.offset.reset", "latest"),
            ("allow.auto.create.topics", "false"),
            // Secrets reach the client unmasked.
            ("sasl.password", "hunter2-real"),
        ] {
            assert_eq!(c.get(k), Some(v), "{k}");
        }
        assert_eq!(cfg(&[]).client_config().unwrap().get("client.id"), Some("kmirror-membership-node-a"));
        // librdkafka accepts the combination (max.poll.interval.ms >= session.timeout.ms ...).
        c.create_native_config().unwrap();
        // The user's properties cannot change the group's settings: the allow list refuses them
        // (and they are set after the user's anyway).
        for k in ["group.id", "group.instance.id", "enable.auto.commit", "group.protocol", "session.timeout.ms"] {
            let e = cfg(&[(k, "x")]).client_config().unwrap_err();
            assert!(matches!(e, KafkaError::Client(_)) && e.to_string().contains(k), "{e}");
        }
    }

    #[test]
    fn timings_follow_the_session_timeout() {
        let s = |secs| Duration::from_secs(secs);
        assert_eq!(heartbeat_interval(s(6)), Duration::from_millis(600));
        assert_eq!(heartbeat_interval(s(10)), s(1));
        assert_eq!(heartbeat_interval(s(45)), s(1));
        assert_eq!(max_poll_interval(s(10), s(30)), s(300));
        assert_eq!(max_poll_interval(s(10), s(600)), s(660));
        assert_eq!(max_poll_interval(s(400), s(30)), s(400));
        let mut c = cfg(&[]);
        c.session_timeout = s(6);
        c.revoke_timeout = s(300);
        let built = c.client_config().unwrap();
        assert_eq!(built.get("session.timeout.ms"), Some("6000"));
        assert_eq!(built.get("heartbeat.interval.ms"), Some("600"));
        assert_eq!(built.get("max.poll.interval.ms"), Some("360000"));
    }

    #[test]
    fn bad_configs_are_refused_before_joining() {
        let (tx, _rx) = mpsc::unbounded_channel();
        let mut c = cfg(&[]);
        c.instance_id.clear();
        assert!(matches!(Membership::start(c, tx.clone()), Err(KafkaError::InvalidArgument { .. })));
        let mut c = cfg(&[]);
        c.session_timeout = Duration::ZERO;
        assert!(matches!(Membership::start(c, tx.clone()), Err(KafkaError::InvalidArgument { .. })));
        let e = Membership::start(cfg(&[("plugin.library.paths", "/tmp/evil.so")]), tx.clone()).unwrap_err();
        assert!(matches!(e, KafkaError::Client(_)) && !e.to_string().contains("evil"), "{e}");
        let e = Membership::start(cfg(&[("security.protocol", "SASL_HUNTER2")]), tx).unwrap_err();
        assert!(e.to_string().contains("security.protocol") && !e.to_string().contains("HUNTER2"), "{e}");
    }

    #[test]
    fn debug_output_hides_property_values() {
        let text = format!("{:?}", cfg(&[("sasl.password", "hunter2-real")]));
        assert!(text.contains("sasl.password") && !text.contains("hunter2"), "{text}");
    }

    #[test]
    fn kip848_consumer_refuses_a_client_side_session_timeout() {
        // Why the classic protocol: under KIP-848 the session timeout is the broker's.
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", "127.0.0.1:1")
            .set("group.id", "g")
            .set("group.protocol", "consumer")
            .set("session.timeout.ms", "10000");
        let e = c.create::<BaseConsumer>().err().expect("refused").to_string();
        assert!(e.contains("session.timeout.ms") && e.contains("broker side"), "{e}");
        c.set("session.timeout.ms", "45000");
        let e = c.create::<BaseConsumer>().err().expect("refused").to_string();
        assert!(e.contains("session.timeout.ms"), "setting it at all is refused: {e}");
    }

    #[test]
    fn slot_set_reports_only_changes() {
        let mut s = BTreeSet::new();
        assert_eq!(s.assign(&[3, 1, 2]), vec![1, 2, 3]);
        assert_eq!(s.assign(&[2, 5, 4]), vec![4, 5], "eager re-assign of held slots reports only new ones");
        assert_eq!(s.held(&[5, 9, 1, 1]), vec![1, 5]);
        s.release(&[1, 5, 9]);
        assert_eq!(s.iter().copied().collect::<Vec<_>>(), vec![2, 3, 4]);
    }

    #[test]
    fn revoke_wait_ends_on_done_drop_or_bound() {
        let (tx, rx) = oneshot::channel();
        tx.send(()).unwrap();
        assert_eq!(wait_done(rx, Duration::from_secs(5)), RevokeWait::Done);
        let (tx, rx) = oneshot::channel::<()>();
        drop(tx);
        assert_eq!(wait_done(rx, Duration::from_secs(5)), RevokeWait::Dropped);
        let (tx, rx) = oneshot::channel::<()>();
        let answer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            tx.send(()).unwrap();
        });
        assert_eq!(wait_done(rx, Duration::from_secs(5)), RevokeWait::Done);
        answer.join().unwrap();
        let (_tx, rx) = oneshot::channel::<()>();
        let started = Instant::now();
        assert_eq!(wait_done(rx, Duration::from_millis(50)), RevokeWait::TimedOut);
        assert!(started.elapsed() >= Duration::from_millis(50));
    }

    #[test]
    fn an_unreachable_cluster_is_no_error_and_close_returns() {
        let (tx, _rx) = mpsc::unbounded_channel();
        let m = Membership::start(cfg(&[]), tx).unwrap();
        assert!(m.owned().is_empty());
        assert_eq!(m.rebalances(), 0);
        assert!(m.failure().is_none());
        let started = Instant::now();
        m.close();
        assert!(started.elapsed() < Duration::from_secs(10), "close took {:?}", started.elapsed());
    }
}
