//! Several instances, one cluster (DESIGN.md section 10): slot ownership through Kafka's group
//! protocol, and every instance's view of what the others write.
//!
//! - **Membership.** Every instance with the same cluster name joins one consumer group on the
//!   destination, subscribed to `__mirror_state` (`kafka::membership`); the partitions assigned
//!   to it are the slots it owns. Kafka is the coordinator: no consensus of kmirror's own.
//! - **The tail.** Every instance follows all of `__mirror_state` (`StateTail`) and applies what
//!   it reads to its model: mirrors, topics and the records of partitions it does not own. So
//!   every instance shows every mirror and partition, and lag is computed by every reader from
//!   the owner's committed positions and its own offset reads (the snapshot's age is the reader's).
//! - **Commands.** A lifecycle call is applied on whichever instance accepts it and recorded
//!   (`written_by` names that instance). The transition's actions run on the owner of the
//!   partition's slot: it sees a record another instance wrote for a partition it owns and, when
//!   the state differs from its own, adopts it and runs it the way a restart would (`Loaded`).
//!   A command for a slot whose owner is gone waits in the state topic for the takeover.
//!   The caller computes the command from its own view, which can be behind the owner's (the
//!   new owner's takeover record not read yet): the command's record then loses to the stored
//!   epoch like any stale write. Optimistic concurrency: the caller reads its own record back,
//!   sees it lost (the record says it is a command, `PartitionStateValue::command`), and applies
//!   the command again to the record that won ([`Coordinator::command_lost`]).
//! - **Takeover.** A slot assigned to this instance is taken over in three steps: its data paths
//!   start (their `init_transactions` fences the previous owner and aborts its open
//!   transaction), the tail reads the slot's partition up to its last stable offset (everything
//!   the previous owner committed), then its partitions are restored from those records.
//! - **Letting go.** A revoked slot's data paths end (open transactions aborted) before the
//!   rebalance goes on; a lost one's (session expired) at once, and a data path fenced by a new
//!   owner lets its slot go instead of starting again, so a zombie never writes to a slot again.

use crate::engine::ports::{Background, GroupMember};
use crate::kafka::membership::MembershipEvent;
use crate::kafka::state_log::TailBatch;
use crate::store::{MaterializedState, PartitionStateValue, StateRecord};

use super::*;

/// The group side of a coordinator (present when `EngineConfig::ownership` is `Group`).
pub(super) struct Group {
    /// Everything the tail has read, materialized (the records other instances write included).
    pub(super) state: MaterializedState,
    /// Per state partition, the next offset the tail reads.
    positions: HashMap<i32, i64>,
    /// Slots assigned to this instance whose takeover waits for the tail to reach this offset.
    /// (`None`: its end is not known yet; asked again on the retry tick.)
    pending: BTreeMap<i32, Option<i64>>,
    pub(super) member: Option<Box<dyn GroupMember>>,
    /// Where a new membership sends its events (a rejoin).
    pub(super) member_tx: Option<mpsc::UnboundedSender<MembershipEvent>>,
    /// The last rejoin, for its pacing.
    rejoined_at: Option<tokio::time::Instant>,
    /// Since when some slot has had no owner (see [`Coordinator::repair_unowned_slots`]).
    unowned_since: Option<tokio::time::Instant>,
    /// The last time this instance asked the group to rebalance, for its pacing.
    nudged_at: Option<tokio::time::Instant>,
    /// This instance's commands that lost to a record in a transient state (a takeover's
    /// PREPARING, most often), by (mirror, source topic id, partition), with when they lost:
    /// tried again once the partition's record leaves that state (see
    /// [`Coordinator::command_lost`]).
    deferred_commands: BTreeMap<(String, String, i32), (PartitionStateValue, tokio::time::Instant)>,
    pub(super) tail: Option<Box<dyn Background>>,
}

impl Group {
    /// Whether a slot's takeover waits for the tail to read its records.
    pub(super) fn takeover_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    pub(super) fn new(state: MaterializedState, start: &[(i32, Option<i64>)]) -> Group {
        let positions = start.iter().filter_map(|(p, o)| o.map(|o| (*p, o))).collect();
        Group {
            state,
            positions,
            pending: BTreeMap::new(),
            member: None,
            member_tx: None,
            rejoined_at: None,
            unowned_since: None,
            nudged_at: None,
            deferred_commands: BTreeMap::new(),
            tail: None,
        }
    }
}

impl Group {
    /// The other instances, by their latest heartbeats. A slot this instance owns is shown as its
    /// own, whatever an older heartbeat of another one says; an instance silent for longer than
    /// [`HEARTBEAT_STALE`] is left out (gone, or cut off from the destination).
    pub(super) fn others(&self, this: &str, owned: &BTreeSet<i32>, t: Timestamp) -> Vec<InstanceSnapshot> {
        self.state
            .instances()
            .filter(|i| i.instance != this)
            .filter(|i| is_live(i, t))
            .map(|i| InstanceSnapshot {
                id: i.instance.clone(),
                advertised_url: i.advertised_url.clone(),
                version: i.version.clone(),
                slots: i.slots.iter().copied().filter(|s| !owned.contains(s)).collect(),
                partitions: i.partitions,
                last_heartbeat: Timestamp::from_millis(i.heartbeat_at),
                started_at: Timestamp::from_millis(i.started_at),
                this: false,
            })
            .collect()
    }
}

/// How long a command that lost to a record in a transient state waits for the partition to
/// leave it (a takeover's PREPARING lasts seconds); dropped with a note after that.
const DEFERRED_COMMAND_FOR: Duration = Duration::from_secs(120);

/// How long a takeover waits for the state tail to reach its slots' ends before it restores the
/// slots the tail has read (see [`Coordinator::await_takeover_tail`]).
const TAKEOVER_TAIL_WAIT: Duration = Duration::from_secs(1);

/// Slots no live instance holds: neither this one (`owned`, or being taken over: `pending`) nor
/// another by its latest heartbeat (`others`).
fn unowned_slots(
    slots: i32,
    owned: &BTreeSet<i32>,
    pending: impl Iterator<Item = i32>,
    others: &[InstanceSnapshot],
) -> BTreeSet<i32> {
    let mut held: BTreeSet<i32> = owned.iter().copied().chain(pending).collect();
    held.extend(others.iter().flat_map(|i| i.slots.iter().copied()));
    (0..slots).filter(|s| !held.contains(s)).collect()
}

/// How long slots may have no owner before the group is asked to rebalance. A vanished
/// instance's slots move one session timeout after its last group heartbeat, and their new owner
/// says so in its next heartbeat record; twice the session timeout plus a heartbeat is longer
/// than any ordinary handover, and a nudge that comes early only costs one more rebalance.
fn unowned_grace(session_timeout: Duration) -> Duration {
    session_timeout.saturating_mul(2).saturating_add(HEARTBEAT_EVERY)
}

/// At most one rejoin of the slot group this often.
const REJOIN_EVERY: Duration = Duration::from_secs(5);

/// How often an instance writes its heartbeat (slots, partitions) to the state topic.
pub(super) const HEARTBEAT_EVERY: Duration = Duration::from_secs(3);
/// A heartbeat older than this is an instance that is gone.
const HEARTBEAT_STALE: Duration = Duration::from_secs(30);

/// Whether `i`'s last heartbeat is recent enough at `t` for a running instance.
fn is_live(i: &crate::store::InstanceValue, t: Timestamp) -> bool {
    t.as_millis() - i.heartbeat_at <= HEARTBEAT_STALE.as_millis() as i64
}

/// The periodic heartbeat, written by its own writer on the blocking pool: the coordinator's loop
/// never waits for it. At most one is in flight; a tick that finds one still going is skipped.
/// Heartbeats written when the slots change (takeover, release, rejoin) still go through the
/// engine's writer on the loop: they must follow the handover's records, and a rejoin uses the
/// write to learn whether this instance was fenced.
#[derive(Default)]
pub(super) struct Heartbeat {
    /// `None`: not opened, or it failed; heartbeats then use the engine's writer.
    pub(super) writer: Option<Arc<dyn StateStore>>,
    /// Cleared by the write itself, not by the loop: a long step serves heartbeats between its
    /// topics (`heartbeat_if_due`) while the loop reads no message.
    in_flight: Arc<std::sync::atomic::AtomicBool>,
    /// When the last periodic heartbeat was sent.
    last: Option<tokio::time::Instant>,
}

impl Coordinator {
    /// The heartbeat tick: off the loop when the heartbeat writer is open (see [`Heartbeat`]).
    pub(super) async fn periodic_heartbeat(&mut self) {
        if self.group.is_none() || self.fenced.is_some() {
            return;
        }
        let Some(writer) = self.heartbeat.writer.clone() else {
            return self.heartbeat().await;
        };
        self.heartbeat.last = Some(tokio::time::Instant::now());
        if self.heartbeat.in_flight.swap(true, std::sync::atomic::Ordering::SeqCst) {
            tracing::debug!("the previous heartbeat is still being written; this one is skipped");
            return;
        }
        let record = self.heartbeat_record();
        let done = self.internal_tx.clone();
        let in_flight = Arc::clone(&self.heartbeat.in_flight);
        tokio::task::spawn_blocking(move || {
            let written = writer.write(&[record]);
            in_flight.store(false, std::sync::atomic::Ordering::SeqCst);
            let _ = done.send(Internal::HeartbeatWritten(written));
        });
    }

    /// The periodic heartbeat, if one is due: served between two topics of a long call, which
    /// holds the loop and its heartbeat tick. Without it a start of 100 topics (93 s on a busy
    /// destination) left the other instances without a heartbeat for longer than
    /// [`HEARTBEAT_STALE`], and their instances view dropped this one.
    pub(super) async fn heartbeat_if_due(&mut self) {
        if self.heartbeat.last.is_some_and(|t| t.elapsed() >= HEARTBEAT_EVERY) {
            self.periodic_heartbeat().await;
        }
    }

    /// This instance's heartbeat as of now, whichever writer takes it.
    pub(super) fn heartbeat_record(&self) -> pipe::StateWrite {
        persist::instance(&self.config.cluster_name, &self.this_instance(now()), self.state_partitions)
    }

    /// The end of a periodic heartbeat's write. An outage only loses this heartbeat (the next
    /// tick tries again; the engine's writer meets the same outage its own way). A writer that
    /// can never write again (fenced by a newer process with this instance id, or broken) hands
    /// heartbeats back to the engine's writer, which reports a fenced instance as such.
    pub(super) fn heartbeat_written(&mut self, result: Result<(), crate::kafka::state_log::StateWriteError>) {
        use crate::kafka::state_log::StateWriteError;
        match result {
            Ok(()) => {}
            Err(StateWriteError::Unavailable(e)) => tracing::debug!("heartbeat not written: {e}"),
            Err(e) => {
                tracing::warn!("heartbeat not written: {e}; heartbeats use the state writer from now on");
                self.heartbeat.writer = None;
            }
        }
    }

    /// Writes this instance's heartbeat: what the instances view of every instance shows.
    pub(super) async fn heartbeat(&mut self) {
        if self.group.is_none() || self.fenced.is_some() {
            return;
        }
        let record = self.heartbeat_record();
        self.writes.push(record);
        if let Err(e) = self.flush().await {
            tracing::debug!("heartbeat not written: {e}");
        }
    }
}

/// Refuses to join instances this one cannot work with (issue 17, "safety at start"): a state
/// topic whose partition count is not the configured slot count (every instance must hash
/// partitions to the same slots), instances of another cluster name on the same state topic (two
/// deployments would mirror the same partitions), or instances of another kmirror release line
/// (major.minor: the state format and the slot layout may differ). Heartbeats older than
/// [`HEARTBEAT_STALE`] are instances that are gone.
pub(super) fn check_compatible(
    config: &EngineConfig,
    actual_slots: i32,
    state: &MaterializedState,
    t: Timestamp,
) -> Result<(), String> {
    if actual_slots != config.state_partitions {
        return Err(format!(
            "the state topic {} has {actual_slots} partitions but this instance is configured with {} \
             (--state-partitions): every instance must use the topic's count",
            config.state_topic, config.state_partitions
        ));
    }
    let live: Vec<&crate::store::InstanceValue> =
        state.instances().filter(|i| i.instance != config.instance_id).filter(|i| is_live(i, t)).collect();
    if let Some(other) = live.iter().find(|i| i.cluster_name != config.cluster_name) {
        return Err(format!(
            "instance {} of cluster {:?} runs on the state topic {}; this instance's cluster name is {:?}: \
             use the same --cluster-name, or another --state-topic for another deployment",
            other.instance, other.cluster_name, config.state_topic, config.cluster_name
        ));
    }
    let mine = release_line(env!("CARGO_PKG_VERSION"));
    if let Some(other) = live.iter().find(|i| release_line(&i.version) != mine) {
        return Err(format!(
            "instance {} runs kmirror {} and this is {}: instances of one cluster must run the same \
             release line (major.minor); upgrade them one at a time within a line, or stop them all first",
            other.instance,
            other.version,
            env!("CARGO_PKG_VERSION")
        ));
    }
    Ok(())
}

/// `major.minor` of a version string.
fn release_line(version: &str) -> (String, String) {
    let mut parts = version.split('.');
    (parts.next().unwrap_or("").to_string(), parts.next().unwrap_or("").to_string())
}

/// Where the tail starts after the first full read: past the last record read of each state
/// partition (`None`: from the partition's beginning).
pub(super) fn tail_start(records: &[state_log::LogRecord], partitions: i32) -> Vec<(i32, Option<i64>)> {
    let mut last: HashMap<i32, i64> = HashMap::new();
    for r in records {
        let e = last.entry(r.partition).or_insert(r.offset);
        *e = (*e).max(r.offset);
    }
    (0..partitions).map(|p| (p, last.get(&p).map(|o| o + 1))).collect()
}

impl Coordinator {
    /// Installs the model of what `loaded` holds without running anything: the view of a
    /// group member before it owns a slot.
    pub(super) fn install(&mut self, loaded: &Loaded) {
        let slots = self.state_partitions;
        for lm in &loaded.mirrors {
            let name = lm.stored.spec.name.clone();
            if !self.mirrors.contains_key(&name) {
                self.add_mirror(lm.stored.clone());
            }
            let Some(m) = self.mirrors.get_mut(&name) else { continue };
            m.last_mirror_epochs = lm.last_mirror_epochs.clone();
            for lt in &lm.topics {
                install_topic(m, &name, lt, slots);
            }
        }
    }

    /// A membership change.
    pub(super) async fn membership(&mut self, ev: MembershipEvent) {
        match ev {
            MembershipEvent::Assigned(slots) => {
                tracing::info!(?slots, "slots assigned: taking them over");
                self.begin_takeover(slots.into_iter().collect()).await;
            }
            MembershipEvent::Revoked { slots, done } => {
                tracing::info!(?slots, "slots revoked: ending their data paths");
                // The rebalance goes on once the data paths have ended (`done`).
                self.give_up(slots, Some(done)).await;
            }
            MembershipEvent::Lost(slots) => {
                tracing::warn!(?slots, "slots lost (session expired?): another instance may own them now");
                self.give_up(slots, None).await;
            }
        }
    }

    /// Lets `slots` go (revoked or lost), forgets their pending takeovers, answers `done`, and
    /// tells the others at once.
    async fn give_up(&mut self, slots: Vec<i32>, done: Option<tokio::sync::oneshot::Sender<()>>) {
        let set: BTreeSet<i32> = slots.into_iter().collect();
        self.let_go(&set).await;
        if let Some(g) = self.group.as_mut() {
            for s in &set {
                g.pending.remove(s);
            }
        }
        if let Some(done) = done {
            let _ = done.send(());
        }
        self.heartbeat().await;
    }

    /// Takeover, steps 1 and 2 (see the module docs): start the slots' data paths (fencing the
    /// previous owner), then note the offset the tail must reach before the partitions restore.
    async fn begin_takeover(&mut self, slots: BTreeSet<i32>) {
        let mut ready = Vec::new();
        for name in &self.mirrors.names() {
            for slot in self.slots_of_mirror(name).intersection(&slots) {
                ready.extend(self.ensure_pipe(name, *slot));
            }
        }
        self.wait_ready(ready).await;
        if let Some(g) = self.group.as_mut() {
            for s in &slots {
                g.pending.insert(*s, None);
            }
        }
        self.read_takeover_ends().await;
        self.await_takeover_tail().await;
    }

    /// Takeover, between steps 2 and 3: waits (at most [`TAKEOVER_TAIL_WAIT`]) for the tail to
    /// read the pending slots up to their ends, then applies what it read and restores every slot
    /// it completed, in one step. The tail is usually a fetch or two behind (the fencing's abort
    /// markers are the newest entries): without the wait, the slots it had already read were
    /// restored first and the others one loop step later, each step with its own state write,
    /// offset reads and heartbeat (on a busy 2-core box 0.3-1.2 s each, seen after `kill -9`).
    /// A slot the tail has not reached by then is restored when it does, as before. The wait
    /// holds the loop (stops and pauses queue behind it) for at most [`TAKEOVER_TAIL_WAIT`];
    /// in the runs logged it took 0-65 ms.
    async fn await_takeover_tail(&mut self) {
        let began = tokio::time::Instant::now();
        let deadline = began + TAKEOVER_TAIL_WAIT;
        let mut read: Option<TailBatch> = None;
        loop {
            let behind: Vec<i32> = {
                let Some(g) = self.group.as_ref() else { return };
                let position = |slot: i32| {
                    read.as_ref()
                        .and_then(|b| b.positions.iter().rev().find(|(p, _)| *p == slot).map(|(_, o)| *o))
                        .or_else(|| g.positions.get(&slot).copied())
                };
                g.pending
                    .iter()
                    .filter(|(s, end)| end.is_some_and(|end| end != 0 && position(**s).is_none_or(|p| p < end)))
                    .map(|(s, _)| *s)
                    .collect()
            };
            if behind.is_empty() {
                let waited_ms = u64::try_from(began.elapsed().as_millis()).unwrap_or(u64::MAX);
                tracing::debug!(waited_ms, "takeover: the state tail has read every slot to its end");
                break;
            }
            let Some(rx) = self.tail_rx.as_mut() else { break };
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some(b)) => match read.as_mut() {
                    Some(r) => r.append(b),
                    None => read = Some(b),
                },
                Ok(None) | Err(_) => {
                    tracing::info!(
                        slots = ?behind,
                        "takeover: the state tail has not read these slots to their end within {} ms; \
                         each is restored once it has",
                        TAKEOVER_TAIL_WAIT.as_millis()
                    );
                    break;
                }
            }
        }
        match read {
            // Applies the records to the model first, then finishes the takeovers.
            Some(batch) => self.tailed(batch).await,
            None => self.finish_takeovers().await,
        }
    }

    /// Reads the end (last stable offset) of every pending slot whose end is not known yet.
    /// Without it a takeover cannot know it has read everything, so a failed read is tried
    /// again on the retry tick; never in a loop here, which would hold every other message of
    /// the coordinator (revokes, stops, shutdown) behind an unavailable destination.
    pub(super) async fn read_takeover_ends(&mut self) {
        let Some(g) = self.group.as_ref() else { return };
        let unknown: Vec<i32> = g.pending.iter().filter(|(_, e)| e.is_none()).map(|(s, _)| *s).collect();
        if unknown.is_empty() {
            return;
        }
        let req: Vec<(String, i32, OffsetSpec)> =
            unknown.iter().map(|s| (self.config.state_topic.clone(), *s, OffsetSpec::Latest)).collect();
        let read = self.destination_admin.list_offsets(&req, IsolationLevel::ReadCommitted);
        match tokio::time::timeout(Duration::from_secs(5), read).await {
            Ok(Ok(ends)) => {
                let Some(g) = self.group.as_mut() else { return };
                for o in ends {
                    if let Some(e) = g.pending.get_mut(&o.partition) {
                        *e = Some(o.offset);
                    }
                }
            }
            Ok(Err(e)) => {
                tracing::warn!(slots = ?unknown, "takeover: cannot read the state topic's end ({e}); trying again")
            }
            Err(_) => {
                tracing::warn!(slots = ?unknown, "takeover: the state topic's end did not come within 5 s; trying again")
            }
        }
    }

    /// The retry tick's part: a membership that ended for good is joined again, unless this
    /// instance was fenced as a whole. A static member whose session expired under load (its
    /// process starved of CPU) and that then rejoined is fenced by the broker as a duplicate of
    /// itself and never comes back by itself; a real duplicate (another process with this
    /// instance id) also fences this instance's state writer, and then it stays out.
    pub(super) async fn rejoin_if_failed(&mut self) {
        if self.fenced.is_some() {
            return;
        }
        let Some(g) = self.group.as_mut() else { return };
        let why = match &g.member {
            Some(m) => match m.failure() {
                Some(why) => why,
                None => return,
            },
            // A rejoin that could not create its consumer: try again.
            None if g.member_tx.is_some() => "no membership".to_string(),
            None => return,
        };
        if g.rejoined_at.is_some_and(|t| t.elapsed() < REJOIN_EVERY) {
            return;
        }
        // A write tells whether this instance is the duplicate: a fenced writer sets `fenced`.
        self.heartbeat().await;
        if self.fenced.is_some() {
            return;
        }
        tracing::warn!("the slot group membership ended ({why}); joining again");
        let all: BTreeSet<i32> = self.owned.clone();
        self.let_go(&all).await;
        let Some(g) = self.group.as_mut() else { return };
        g.rejoined_at = Some(tokio::time::Instant::now());
        g.pending.clear();
        if let Some(old) = g.member.take() {
            let _ = std::thread::Builder::new().name("membership-close".into()).spawn(move || old.close());
        }
        let Some(tx) = g.member_tx.clone() else { return };
        match self.ports.join_group(&self.config, tx) {
            Ok(m) => {
                if let Some(g) = self.group.as_mut() {
                    g.member = Some(m);
                }
            }
            Err(e) => tracing::error!("cannot join the slot group again: {e}"),
        }
    }

    /// The retry tick's part: slots that have had no owner for longer than a handover takes are
    /// stuck, and the group is asked to rebalance (see `kafka::membership`, "Static membership":
    /// a member restarted between the two rounds of a cooperative rebalance gets its old
    /// assignment back, and the slots revoked in the first round are assigned to nobody until
    /// the group rebalances again). One instance asks, the live one with the smallest id; again
    /// after another grace period if the slots are still unowned.
    pub(super) fn repair_unowned_slots(&mut self) {
        let Ownership::Group { session_timeout, .. } = &self.config.ownership else { return };
        let grace = unowned_grace(*session_timeout);
        let Some(g) = self.group.as_ref() else { return };
        let this = &self.config.instance_id;
        let others = g.others(this, &self.owned, now());
        let unowned = unowned_slots(self.state_partitions, &self.owned, g.pending.keys().copied(), &others);
        let asks = others.iter().all(|o| o.id > *this);
        let Some(g) = self.group.as_mut() else { return };
        let member = g.member.as_ref().filter(|m| m.failure().is_none());
        let (Some(member), false) = (member, unowned.is_empty()) else {
            g.unowned_since = None;
            return;
        };
        let since = *g.unowned_since.get_or_insert_with(tokio::time::Instant::now);
        if since.elapsed() < grace || !asks || g.nudged_at.is_some_and(|t| t.elapsed() < grace) {
            return;
        }
        tracing::warn!(
            slots = ?unowned,
            unowned_for = ?since.elapsed(),
            "slots have had no owner for longer than a handover takes; asking the slot group to rebalance"
        );
        if member.nudge() {
            g.nudged_at = Some(tokio::time::Instant::now());
        }
    }

    /// The retry tick's part: pending takeovers whose end is still unknown.
    pub(super) async fn retry_takeovers(&mut self) {
        if self.group.as_ref().is_some_and(|g| g.pending.values().any(Option::is_none)) {
            self.read_takeover_ends().await;
            self.finish_takeovers().await;
        }
    }

    /// Takeover, step 3, for every pending slot the tail has read up to its end.
    async fn finish_takeovers(&mut self) {
        let Some(g) = self.group.as_mut() else { return };
        let done: BTreeSet<i32> = g
            .pending
            .iter()
            .filter(|(s, end)| end.is_some_and(|end| end == 0 || g.positions.get(s).is_some_and(|p| *p >= end)))
            .map(|(s, _)| *s)
            .collect();
        if done.is_empty() {
            return;
        }
        for s in &done {
            g.pending.remove(s);
        }
        self.owned.extend(done.iter().copied());
        tracing::info!(slots = ?done, "slots taken over");
        // Readers see the new owner now: restoring the slots' partitions below asks Kafka per
        // topic (seconds for hundreds of partitions on a busy cluster).
        self.publish();
        let names: Vec<String> = self.mirrors.keys().cloned().collect();
        for mirror in names {
            let mut planned = Planned::default();
            for (topic, p) in self.partitions_of_slots(&mirror, &done) {
                // UNKNOWN, PAUSED and STOPPED have nothing to redo (AlreadyInState).
                if let Ok(actions) = self.apply(&mirror, &topic, p, Event::Loaded) {
                    planned.push(&topic, p, actions);
                }
            }
            for (topic, p) in self.run_actions(&mirror, planned).await {
                tracing::warn!(%mirror, %topic, "takeover: {}", p.detail);
            }
        }
        // The other instances show the new owner at once, not at the next heartbeat.
        self.heartbeat().await;
    }

    /// `mirror`'s partitions in `slots`.
    fn partitions_of_slots(&self, mirror: &str, slots: &BTreeSet<i32>) -> Vec<(String, i32)> {
        let Some(m) = self.mirrors.get(mirror) else { return Vec::new() };
        m.topics
            .iter()
            .flat_map(|(tn, t)| {
                t.partitions.iter().filter(|(_, rt)| slots.contains(&rt.slot)).map(move |(p, _)| (tn.clone(), *p))
            })
            .collect()
    }

    /// What the tail read: applied to the model (see the module docs), then any takeover it
    /// completes.
    pub(super) async fn tailed(&mut self, mut batch: TailBatch) {
        // With the batches read meanwhile: one pass over the model, and the slots whose records
        // they complete are restored in one step (each restore asks Kafka; on a busy
        // destination a takeover spent 3-5 s per batch, one after another).
        while let Some(more) = self.tail_rx.as_mut().and_then(|rx| rx.try_recv().ok()) {
            batch.append(more);
        }
        let Some(g) = self.group.as_mut() else { return };
        for (p, o) in &batch.positions {
            g.positions.insert(*p, *o);
        }
        let mut decoded = Vec::new();
        let mut lost_commands = Vec::new();
        for r in &batch.records {
            // Decoded once: applied to the materialized state, then to the model below.
            let rec = match crate::store::decode(r.key.as_deref(), r.value.as_deref()) {
                Ok(rec) => rec,
                Err(e) => {
                    tracing::warn!(partition = r.partition, offset = r.offset, "tail: skipped state record: {e}");
                    continue;
                }
            };
            if let Err(e) = g.state.apply(rec.clone()) {
                // This instance's command that lost to the stored epoch: recorded again below.
                if let StateRecord::PartitionState(entry) = rec
                    && let Some(v) = entry.value
                    && v.command.is_some()
                    && v.written_by.as_deref() == Some(self.config.instance_id.as_str())
                {
                    tracing::info!(
                        partition = r.partition,
                        offset = r.offset,
                        "tail: this instance's command lost: {e}"
                    );
                    lost_commands.push(v);
                } else {
                    tracing::warn!(partition = r.partition, offset = r.offset, "tail: skipped state record: {e}");
                }
                continue;
            }
            decoded.push(rec);
        }
        // Mirror-level records first: a partition's record may arrive before its topic's (they
        // live in different state partitions).
        let mut new_topics: BTreeSet<(String, String)> = BTreeSet::new();
        let mut operations_changed = false;
        for rec in &decoded {
            match rec {
                StateRecord::Mirror(e) => self.tailed_mirror(&e.key.mirror, e.value.as_ref()).await,
                StateRecord::MirrorTopic(e) => {
                    if self.tailed_topic(&e.key.mirror, &e.key.topic, e.value.as_ref()) {
                        new_topics.insert((e.key.mirror.clone(), e.key.topic.clone()));
                    }
                }
                StateRecord::LastMirrorEpochs(e) => {
                    if let (Some(v), Some(m)) = (&e.value, self.mirrors.get_mut(&e.key.mirror)) {
                        m.last_mirror_epochs = v.clone();
                    }
                }
                StateRecord::Operation(_) => operations_changed = true,
                // Drills another instance runs (and this one's own, read back).
                StateRecord::Drill(e) => {
                    let key = (e.key.mirror.clone(), e.key.id.clone());
                    match &e.value {
                        Some(v) => {
                            self.drills.insert(key, v.clone());
                        }
                        None => {
                            self.drills.remove(&key);
                        }
                    }
                }
                // Heartbeats are read from the materialized state when the snapshot is built.
                StateRecord::PartitionState(_) | StateRecord::OffsetRuns(_) | StateRecord::Instance(_) => {}
            }
        }
        if operations_changed && let Some(g) = self.group.as_ref() {
            let mut warnings = Vec::new();
            // Operations only: no secret is opened.
            let all = persist::load_state(&g.state, &mut warnings, &Default::default()).operations;
            let mut ops = self.operations.write().unwrap_or_else(|e| e.into_inner());
            *ops = all.into_iter().rev().take(persist::MAX_OPERATIONS).rev().collect();
            // The approval records they carry (requests another instance recorded or decided).
            let mut approvals = self.approvals.write().unwrap_or_else(|e| e.into_inner());
            *approvals = persist::approvals_of(&g.state);
            // What this instance wrote and the tail has not read back yet stays visible.
            self.own_writes.overlay(&mut ops, &mut approvals);
        }
        // Partition-level records, and every partition of a topic that just appeared.
        // (mirror, topic, partition) -> whether a lifecycle record of it came (only those can be
        // commands: a position record alone never is, so one command is adopted once).
        let mut touched: BTreeMap<(String, String, i32), bool> = BTreeMap::new();
        for rec in &decoded {
            let (key, lifecycle) = match rec {
                StateRecord::PartitionState(e) => (&e.key, true),
                StateRecord::OffsetRuns(e) => {
                    let k = &e.key;
                    if let Some(t) = self.topic_name(&k.mirror, &k.topic_id) {
                        touched.entry((k.mirror.clone(), t, k.partition)).or_insert(false);
                    }
                    continue;
                }
                _ => continue,
            };
            if let Some(t) = self.topic_name(&key.mirror, &key.topic_id) {
                *touched.entry((key.mirror.clone(), t, key.partition)).or_insert(lifecycle) |= lifecycle;
            }
        }
        for (mirror, topic) in &new_topics {
            if let Ok(t) = self.mirrors.topic(mirror, topic) {
                for p in t.partitions.keys() {
                    touched.insert((mirror.clone(), topic.clone(), *p), true);
                }
            }
        }
        // Records another instance mirrored: its transactions' runs (bytes are not recorded).
        // Only a data path's transactions carry a position; runs without one are a whole offset
        // map a failback inherited (`persist::offset_map_batches`): history, not records copied.
        // Counted, they added the other direction's whole copy to a partition whose slot this
        // instance did not own yet when the tail read them.
        for rec in &decoded {
            if let StateRecord::OffsetRuns(e) = rec
                && let Some(v) = &e.value
                && v.position.is_some()
                && let Some(t) = self.topic_name(&e.key.mirror, &e.key.topic_id)
                && !self.owns_partition(&e.key.mirror, &t, e.key.partition)
                && let Ok(rt) = self.mirrors.partition_mut(&e.key.mirror, &t, e.key.partition)
            {
                rt.records_mirrored += v.runs.iter().map(|r| r.length().max(0) as u64).sum::<u64>();
            }
        }
        let mut adopt: BTreeMap<String, Vec<(String, i32)>> = BTreeMap::new();
        for ((mirror, topic, p), lifecycle) in touched {
            let is_new = new_topics.contains(&(mirror.clone(), topic.clone()));
            if self.tailed_partition(&mirror, &topic, p, is_new, lifecycle) {
                adopt.entry(mirror).or_default().push((topic, p));
            }
        }
        // Commands another instance recorded for partitions this one owns: run them.
        for (mirror, parts) in adopt {
            let mut planned = Planned::default();
            for (topic, p) in parts {
                // PAUSED, STOPPED, UNKNOWN: nothing to run.
                if let Ok(actions) = self.apply(&mirror, &topic, p, Event::Loaded) {
                    planned.push(&topic, p, actions);
                }
            }
            for (topic, p) in self.run_actions(&mirror, planned).await {
                tracing::warn!(%mirror, %topic, "command from another instance: {}", p.detail);
            }
        }
        self.retry_deferred_commands(&decoded).await;
        for command in lost_commands {
            self.command_lost(command).await;
        }
        self.finish_takeovers().await;
    }

    /// Deferred lost commands (see [`Coordinator::command_lost`]) whose partition the tail just
    /// brought a record of: a newer command for it (anyone's) replaces them; otherwise, once the
    /// partition's record has left its transient state, they are applied again (or dropped, if
    /// they no longer apply). Those waiting longer than [`DEFERRED_COMMAND_FOR`] are dropped.
    async fn retry_deferred_commands(&mut self, decoded: &[StateRecord]) {
        let Some(g) = self.group.as_mut() else { return };
        if g.deferred_commands.is_empty() {
            return;
        }
        let mut due = Vec::new();
        for rec in decoded {
            let StateRecord::PartitionState(e) = rec else { continue };
            let key = (e.key.mirror.clone(), e.key.topic_id.clone(), e.key.partition);
            let Some(v) = &e.value else {
                g.deferred_commands.remove(&key);
                continue;
            };
            if v.command.is_some() {
                if g.deferred_commands.remove(&key).is_some() {
                    tracing::info!(mirror = %key.0, partition = key.2, "a deferred command was replaced by a newer one");
                }
                continue;
            }
            let transient = v.state.parse::<PartitionState>().is_ok_and(PartitionState::is_transient);
            if !transient && let Some((cmd, _)) = g.deferred_commands.remove(&key) {
                due.push(cmd);
            }
        }
        g.deferred_commands.retain(|(mirror, _, partition), (v, at)| {
            let keep = at.elapsed() < DEFERRED_COMMAND_FOR;
            if !keep {
                tracing::warn!(
                    %mirror,
                    partition,
                    command = ?v.command,
                    "a command that lost to a takeover was dropped: the partition stayed in a transient state for {} s",
                    DEFERRED_COMMAND_FOR.as_secs()
                );
            }
            keep
        });
        for cmd in due {
            self.command_lost(cmd).await;
        }
    }

    /// A command this instance recorded for a partition another one owns lost to the stored
    /// epoch: it was computed from a view behind the record that won (the three-instance test
    /// lost a pause sent right after a takeover that way: the caller wrote epoch 8 where the new
    /// owner's `loaded` record already stood at 9, and no instance ever paused the partition).
    /// The command is applied again to the record that won and recorded with the next epoch, for
    /// the owner to run; a command that no longer applies (a pause of a partition stopped
    /// meanwhile) is dropped with a note. Each try loses only to a record that was written in
    /// between, so this ends as soon as the partition's owner stops writing transitions.
    async fn command_lost(&mut self, v: PartitionStateValue) {
        let Some(event) = persist::command_event(&v) else { return };
        let Some(topic) = self.topic_name(&v.mirror, &v.topic_id) else { return };
        let (mirror, partition) = (v.mirror.as_str(), v.partition);
        let owned = self.owns_partition(mirror, &topic, partition);
        // The record that won, not this instance's copy of its own command.
        if !owned && !self.show_stored(mirror, &topic, partition) {
            return;
        }
        match self.apply(mirror, &topic, partition, event) {
            Ok(actions) => {
                tracing::info!(%mirror, %topic, partition, command = ?v.command, "recording the command again on top of the record that won");
                let mut planned = Planned::default();
                planned.push(&topic, partition, actions);
                // Records it (and, should this instance own the partition by now, runs it).
                for (topic, p) in self.run_actions(mirror, planned).await {
                    tracing::warn!(%mirror, %topic, "command recorded again: {}", p.detail);
                }
            }
            // The record that won is on its way to another state (a takeover's PREPARING, which
            // refuses a pause, becomes MIRRORING within seconds): the command waits for it, as
            // an operator refused in PREPARING would ask again. Without this, a pause accepted
            // right after a rebalance was dropped for the partitions a takeover had just loaded.
            Err(e)
                if self.mirrors.partition(mirror, &topic, partition).is_ok_and(|rt| rt.record.state.is_transient()) =>
            {
                tracing::info!(%mirror, %topic, partition, command = ?v.command, "a command of this instance lost to a record in a transient state; it is applied again once the partition leaves it ({e})");
                if let Some(g) = self.group.as_mut() {
                    let key = (v.mirror.clone(), v.topic_id.clone(), v.partition);
                    g.deferred_commands.insert(key, (v, tokio::time::Instant::now()));
                }
            }
            Err(e) => {
                tracing::info!(%mirror, %topic, partition, command = ?v.command, "a command of this instance lost to a newer record and no longer applies: {e}")
            }
        }
    }

    fn topic_name(&self, mirror: &str, topic_id: &str) -> Option<String> {
        let m = self.mirrors.get(mirror)?;
        m.topics.iter().find(|(_, t)| t.source_topic_id == topic_id).map(|(n, _)| n.clone())
    }

    /// A Mirror record (or tombstone) another instance may have written.
    async fn tailed_mirror(&mut self, name: &str, value: Option<&crate::store::MirrorValue>) {
        match value {
            None => {
                if self.mirrors.contains_key(name) {
                    self.shut_down_pipes(name, None, false).await;
                    self.mirrors.remove(name);
                    self.lineage_reads.forget(name);
                    self.config_reads.forget(name);
                    tracing::info!(mirror = %name, "mirror deleted by another instance");
                }
            }
            Some(v) => {
                let stored = persist::stored_mirror(v, &self.config.sealer);
                let Some(m) = self.mirrors.get_mut(name) else {
                    self.add_mirror(stored);
                    tracing::info!(mirror = %name, "mirror created by another instance");
                    return;
                };
                // Only a newer definition: this instance's own write comes back too.
                if stored.updated_at <= m.stored.updated_at {
                    return;
                }
                let source_changed = stored.spec.source != m.stored.spec.source;
                m.stored = stored;
                m.throttle.set_rate(m.stored.spec.replication_throttle_bytes_per_sec, std::time::Instant::now());
                self.check_secrets_open(name);
                if source_changed {
                    self.source_changed(name).await;
                }
            }
        }
    }

    /// A MirrorTopic record; true when the topic is new to this instance.
    fn tailed_topic(&mut self, mirror: &str, topic: &str, value: Option<&crate::store::MirrorTopicValue>) -> bool {
        let slots = self.state_partitions;
        let Some(g) = self.group.as_ref() else { return false };
        let Some(m) = self.mirrors.get_mut(mirror) else { return false };
        match value {
            None => {
                m.topics.remove(topic);
                false
            }
            Some(tv) if !m.topics.contains_key(topic) => {
                let mut warnings = Vec::new();
                let lt = persist::loaded_topic(&g.state, mirror, tv, None, &mut warnings);
                install_topic(m, mirror, &lt, slots);
                true
            }
            Some(_) => false,
        }
    }

    /// A partition's record as the state topic holds it: the one that won in the materialized
    /// state (with its key), whichever instance wrote it.
    pub(super) fn stored_partition(
        &self,
        mirror: &str,
        topic: &str,
        partition: i32,
    ) -> Option<(crate::store::PartitionKey, PartitionRecord)> {
        let g = self.group.as_ref()?;
        let t = self.mirrors.topic(mirror, topic).ok()?;
        let key = crate::store::PartitionKey::new(mirror, &t.source_topic_id, partition);
        let mut warnings = Vec::new();
        let rec = persist::partition_in(&g.state, &key, t.created_at, &mut warnings)?;
        Some((key, rec))
    }

    /// Takes the partition's record as the state topic holds it (`stored_partition`) for this
    /// instance's; false if there is no such partition or no slot group.
    pub(super) fn show_stored(&mut self, mirror: &str, topic: &str, partition: i32) -> bool {
        let Some((_, stored)) = self.stored_partition(mirror, topic, partition) else { return false };
        let Ok(rt) = self.mirrors.partition_mut(mirror, topic, partition) else { return false };
        rt.record = stored;
        true
    }

    /// A partition's records changed in the state topic (`lifecycle`: its lifecycle record, not
    /// only its position). A partition of another instance takes them as they are; one this
    /// instance owns adopts a lifecycle record another instance wrote when its state differs
    /// (returns true: run it).
    fn tailed_partition(&mut self, mirror: &str, topic: &str, partition: i32, is_new: bool, lifecycle: bool) -> bool {
        let owned = self.owns_partition(mirror, topic, partition);
        if owned && !lifecycle {
            return false; // this instance's own progress
        }
        let Some((key, rec)) = self.stored_partition(mirror, topic, partition) else { return false };
        let Some(g) = self.group.as_ref() else { return false };
        let Ok(rt) = self.mirrors.partition_mut(mirror, topic, partition) else { return false };
        if !owned {
            rt.record = rec;
            if let Some(map) = g.state.offset_map(&key) {
                self.offset_maps
                    .write()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert((mirror.to_string(), topic.to_string(), partition), map.clone());
            }
            return false;
        }
        let written_by = g.state.partition(&key).and_then(|v| v.written_by.clone());
        let foreign = written_by.as_deref().is_some_and(|w| w != self.config.instance_id);
        if !foreign || (!is_new && rec.state == rt.record.state) {
            return false;
        }
        tracing::info!(
            %mirror, %topic, partition, by = ?written_by, state = ?rec.state,
            "running a transition another instance recorded"
        );
        // Keep the further position: this instance's data path may have committed past the
        // position the other instance saw.
        let position = match (rec.position, rt.record.position) {
            (Some(a), Some(b)) if a.is_behind(&b) => Some(b),
            (a, b) => a.or(b),
        };
        rt.record = rec;
        rt.record.position = position;
        true
    }
}

/// Adds a loaded topic to a mirror's model (no data path is touched).
fn install_topic(m: &mut MirrorRt, mirror: &str, lt: &persist::LoadedTopic, slots: i32) {
    m.topic_ids.write().unwrap_or_else(|e| e.into_inner()).insert(lt.name.clone(), lt.source_topic_id.clone());
    let t = m.topics.entry(lt.name.clone()).or_insert_with(|| TopicRt {
        source_topic_id: lt.source_topic_id.clone(),
        destination_topic_id: lt.destination_topic_id.clone(),
        created_at: lt.created_at,
        missing_refreshes: 0,
        partitions: BTreeMap::new(),
    });
    for (p, rec) in &lt.partitions {
        let slot = slots::slot_of_partition(mirror, &lt.source_topic_id, *p, slots);
        t.partitions.entry(*p).or_insert_with(|| PartRt::new(rec.clone(), slot)).record = rec.clone();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Entry, InstanceKey, InstanceValue};

    fn config() -> EngineConfig {
        let mut c = EngineConfig::new("destination:9092");
        c.state_partitions = 4;
        c.cluster_name = "east".into();
        c.instance_id = "i0".into();
        c
    }

    fn state_with(id: &str, cluster: &str, version: &str, heartbeat_at: i64) -> MaterializedState {
        let mut s = MaterializedState::new();
        let value = InstanceValue {
            instance: id.into(),
            cluster_name: cluster.into(),
            advertised_url: None,
            version: version.into(),
            slots: vec![0, 1],
            partitions: 3,
            heartbeat_at,
            started_at: 0,
        };
        s.apply(StateRecord::Instance(Entry::put(InstanceKey { instance: id.into() }, value))).unwrap();
        s
    }

    const NOW: i64 = 1_000_000;

    #[test]
    fn instances_that_cannot_work_together_are_refused_at_start() {
        let t = Timestamp::from_millis(NOW);
        let v = env!("CARGO_PKG_VERSION");
        // Same cluster, same release line: fine; and an empty state topic.
        assert_eq!(check_compatible(&config(), 4, &state_with("i1", "east", v, NOW - 1000), t), Ok(()));
        assert_eq!(check_compatible(&config(), 4, &MaterializedState::new(), t), Ok(()));
        // Another slot count than the topic's.
        let e = check_compatible(&config(), 8, &MaterializedState::new(), t).unwrap_err();
        assert!(e.contains("has 8 partitions but this instance is configured with 4"), "{e}");
        // Another deployment on the same state topic.
        let e = check_compatible(&config(), 4, &state_with("w0", "west", v, NOW - 1000), t).unwrap_err();
        assert!(e.contains("instance w0 of cluster \"west\""), "{e}");
        // Another release line.
        let e = check_compatible(&config(), 4, &state_with("i1", "east", "99.0.0", NOW - 1000), t).unwrap_err();
        assert!(e.contains("runs kmirror 99.0.0"), "{e}");
        // A patch release of the same line is fine.
        let (major, minor) = release_line(v);
        let patch = format!("{major}.{minor}.999");
        assert_eq!(check_compatible(&config(), 4, &state_with("i1", "east", &patch, NOW - 1000), t), Ok(()));
        // Gone instances (stale heartbeat) and this instance's own earlier heartbeat do not count.
        assert_eq!(check_compatible(&config(), 4, &state_with("w0", "west", v, NOW - 60_000), t), Ok(()));
        assert_eq!(check_compatible(&config(), 4, &state_with("i0", "west", "99.0.0", NOW), t), Ok(()));
    }

    #[test]
    fn unowned_slots_are_those_no_live_instance_holds() {
        let other = |id: &str, slots: &[i32]| InstanceSnapshot {
            id: id.into(),
            advertised_url: None,
            version: String::new(),
            slots: slots.to_vec(),
            partitions: 0,
            last_heartbeat: Timestamp::from_millis(0),
            started_at: Timestamp::from_millis(0),
            this: false,
        };
        let owned: BTreeSet<i32> = [0, 1].into();
        let all_held = [other("b", &[3]), other("c", &[4, 5])];
        assert_eq!(unowned_slots(6, &owned, [2].into_iter(), &all_held), BTreeSet::new());
        assert_eq!(unowned_slots(6, &owned, std::iter::empty(), &all_held), [2].into(), "a takeover holds its slot");
        assert_eq!(unowned_slots(6, &owned, [2].into_iter(), &[other("b", &[3])]), [4, 5].into());
        assert_eq!(unowned_slots(4, &BTreeSet::new(), std::iter::empty(), &[]), [0, 1, 2, 3].into());
        assert_eq!(unowned_grace(Duration::from_secs(10)), Duration::from_secs(23));
        assert_eq!(unowned_grace(Duration::MAX), Duration::MAX, "no overflow");
    }

    #[test]
    fn the_tail_starts_after_the_last_record_read() {
        let rec = |partition, offset| state_log::LogRecord { partition, offset, key: None, value: None };
        let start = tail_start(&[rec(0, 5), rec(0, 9), rec(2, 0)], 3);
        assert_eq!(start, vec![(0, Some(10)), (1, None), (2, Some(1))]);
    }
}
