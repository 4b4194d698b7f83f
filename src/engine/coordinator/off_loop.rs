//! Keeping the coordinator free for stops, pauses and slot changes.
//!
//! The coordinator applies commands one at a time: it is the one writer, every transition is
//! applied and persisted in order by this one task. A command that waits on Kafka therefore holds
//! every other command for as long: a create whose source did not answer held a failover for 20 s,
//! a start of 300 topics for 9 s. Three rules keep a stop, a pause or a slot change within a
//! second of arriving, whatever else is running:
//!
//! 1. **Slow source calls run off the coordinator task.** A create's source check (connect,
//!    DescribeCluster) runs in a [`create_probe`] task; a start's source reads (the listing for a
//!    pattern, DescribeCluster, DescribeTopics of every topic in one request) in a [`start_survey`]
//!    task. Each reports back with an `Internal::OffLoop` message ([`Done`]); meanwhile the
//!    coordinator serves everything else. What they bring back are read-only facts: the
//!    coordinator re-checks its own state when they arrive and applies every transition itself.
//! 2. **Stops and pauses have a lane of their own** (the handle's priority sender). The run loop
//!    serves it first, and a call that works through many topics serves it between two topics
//!    ([`Coordinator::serve_priority`]), where no topic is half-done, so the stop or pause sees
//!    the same state as if it had arrived before the next topic.
//! 3. **So do slot changes** (group ownership), served before the stops and pauses
//!    ([`Coordinator::serve_urgent`]). A start of 100 topics of 100 partitions held the loop
//!    for 93 s on a destination busy with the catch-up; a revoke waiting that long holds every
//!    instance's rebalance (up to the membership's revoke bound, 30 s, after which the slots go
//!    anyway and their data paths learn of it by being fenced), and a slot assigned meanwhile
//!    mirrored nothing. Between two topics a takeover starts its data paths (the fence), the
//!    state tail is applied while a takeover waits for it (it completes once it has read the
//!    slot's records), a revoke ends the slots' data paths and a heartbeat that is due is
//!    written. What the tail
//!    brings may change the call's ground: a mirror deleted by another instance ends the call's
//!    remaining topics with "not found", and a source changed by another one drops the start's
//!    source facts (each topic then asks the new source).
//!
//! A start of topics no mirror has yet also creates their mirror topics in [`start_survey`] (as
//! `start_topic` would: the source's partition count and topic configs), and waits there until
//! they have leaders: that wait was the slowest step of each topic. What still runs on the loop for
//! each topic is short: the destination's answer about the topic and its end offsets, the state
//! writes, and the source's log start offsets in PREPARING.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use tokio::sync::oneshot;

use crate::engine::ports::{Admin, ClusterAdmin, Ports};
use crate::kafka::{ClusterDescription, KafkaResult, TopicDescription};

use super::{Cluster, Coordinator, Internal};
use crate::engine::snapshot::ClusterIdStatus;
use crate::engine::*;

/// How often a long call publishes the snapshot between two of its topics: each publish rebuilds
/// every partition's view (10,000 in the failover benchmark), and readers poll about once a second.
const PUBLISH_BETWEEN_TOPICS_EVERY: Duration = Duration::from_secs(1);

/// How long a create waits for the source to answer its DescribeCluster (the connection check).
const CREATE_PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// The coordinator's bookkeeping for work off the loop and for the priority lane.
#[derive(Default)]
pub(super) struct OffLoop {
    /// A stop or pause is being handled: a lifecycle call inside it does not serve the lane again.
    serving_priority: bool,
    /// Mirrors whose create waits for its source check: a second create of the name is refused.
    creating: HashSet<String>,
    /// The source facts of the start being applied (read by [`start_survey`]), if any.
    survey: Option<Survey>,
}

impl OffLoop {
    /// A stop or pause is being handled now.
    pub(super) fn serving_priority(&self) -> bool {
        self.serving_priority
    }

    pub(super) fn is_creating(&self, name: &str) -> bool {
        self.creating.contains(name)
    }

    /// A mirror's source changed: the start being applied asks the new source from now on.
    pub(super) fn drop_survey(&mut self) {
        self.survey = None;
    }
}

/// A finished off-loop step, back on the coordinator.
pub(super) enum Done {
    /// [`create_probe`]: the new mirror's source answered (its cluster) or not.
    Probed {
        spec: MirrorSpec,
        actor: Actor,
        reply: oneshot::Sender<Result<(), EngineError>>,
        cluster: Result<ClusterDescription, EngineError>,
    },
    /// [`start_survey`]: what the source said about a start's topics.
    Surveyed { job: StartJob, survey: Result<Survey, EngineError> },
}

/// A start (or its `validate_only` check) waiting for its [`start_survey`].
pub(super) struct StartJob {
    call: LifecycleCall,
    /// The source the survey asked: if the mirror's source changed meanwhile, its facts are
    /// dropped and the start asks the new source itself.
    source: SourceSpec,
}

/// A start's mirror topics that [`start_survey`] may create ahead of `start_topic`: topics no
/// mirror has, on a source whose cluster ID is the expected one.
struct Precreate {
    destination: Admin,
    expected_cluster_id: String,
    /// Topics some mirror already has: never created here (a restart, or another mirror's topic
    /// that the start refuses).
    known: HashSet<String>,
}

/// What the source said, read once for a whole start. The start's checks (`resolve`,
/// `validate`, `start_topic`) read these instead of asking the source again.
pub(super) struct Survey {
    cluster: KafkaResult<ClusterDescription>,
    /// The source's topics, for a pattern.
    listing: Option<Vec<String>>,
    topics: HashMap<String, KafkaResult<TopicDescription>>,
}

/// Connects to a new mirror's source and asks for its cluster ID. Runs in its own task: an
/// unreachable source takes [`CREATE_PROBE_TIMEOUT`] to give up.
async fn create_probe(ports: &dyn Ports, source: SourceSpec) -> Result<ClusterDescription, EngineError> {
    let admin =
        ports.connect_source(&source.bootstrap_servers, &source.properties, CREATE_PROBE_TIMEOUT).map_err(|e| {
            EngineError::rejected(ProblemKind::InvalidName, format!("invalid source client properties: {e}"))
        })?;
    let cluster = admin.describe_cluster().await.map_err(|e| source_error(&source, &e));
    // Destroying a client that never reached its brokers can block: not on a runtime worker.
    drop(tokio::task::spawn_blocking(move || drop(admin)));
    cluster
}

/// Why a source did not answer a mirror's client, as an operator reads it: refused credentials
/// (with the mechanism and user, never the password) and a failed TLS handshake are not an
/// unreachable cluster.
pub(super) fn source_error(source: &SourceSpec, e: &crate::kafka::KafkaError) -> EngineError {
    let prop = |names: &[&str]| names.iter().find_map(|n| source.properties.get(*n)).cloned();
    if e.is(crate::kafka::KafkaErrorKind::Authentication) {
        let mechanism = prop(&["sasl.mechanism", "sasl.mechanisms"]).unwrap_or_else(|| "GSSAPI".into());
        let user = prop(&["sasl.username"]).map_or_else(|| "no user".to_string(), |u| format!("user {u:?}"));
        return EngineError::rejected(
            ProblemKind::SourceAuthenticationFailed,
            format!(
                "the source cluster refused the credentials (SASL mechanism {mechanism}, {user}): authentication failed ({e})"
            ),
        );
    }
    if e.is(crate::kafka::KafkaErrorKind::Ssl) {
        return EngineError::rejected(
            ProblemKind::SourceTlsFailed,
            format!(
                "the TLS handshake with the source cluster failed: check ssl.ca.location (does it trust the brokers' certificates?) and the client certificate and key ({e})"
            ),
        );
    }
    EngineError::rejected(Cluster::Source.problem_kind(), format!("the source cluster does not answer: {e}"))
}

/// Reads what a start needs from the source: for a pattern the topic listing (the names it
/// matches, with the mirror's own topics, are described), the cluster ID, and every topic's ID and
/// partitions in one DescribeTopics. Names that break the naming rules or are internal topics are
/// left to the coordinator, which refuses them without asking Kafka.
async fn start_survey(
    source: Admin,
    selector: TopicSelector,
    mirror_topics: Vec<String>,
    state_topic: String,
    precreate: Option<Precreate>,
) -> Result<Survey, EngineError> {
    let (names, listing) = match selector {
        TopicSelector::Names(names) => (names, None),
        // Refused by `begin_start` before the survey.
        TopicSelector::All => (Vec::new(), None),
        TopicSelector::Pattern(p) => {
            let re = crate::domain::name_pattern::NamePattern::new(&p)
                .map_err(|e| EngineError::rejected(ProblemKind::InvalidPattern, e.to_string()))?;
            let listed = source.list_topics().await.map_err(|e| {
                EngineError::rejected(Cluster::Source.problem_kind(), format!("cannot list source topics: {e}"))
            })?;
            let mut names: Vec<String> =
                mirror_topics.into_iter().chain(listed.iter().cloned()).filter(|t| re.is_match(t)).collect();
            names.sort();
            names.dedup();
            (names, Some(listed))
        }
    };
    let names: Vec<String> = names
        .into_iter()
        .filter(|n| validate_topic_name(n).is_ok() && !is_internal_topic(n, &state_topic))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let cluster = source.describe_cluster().await;
    let topics = match &cluster {
        Ok(_) if !names.is_empty() => match source.describe_topics(&names).await {
            Ok(described) => names.into_iter().zip(described).collect(),
            Err(e) => names.into_iter().map(|n| (n, Err(e.clone()))).collect(),
        },
        Ok(_) => HashMap::new(),
        // The source does not answer: every topic fails with that, without asking again.
        Err(e) => names.into_iter().map(|n| (n, Err(e.clone()))).collect(),
    };
    if let (Some(pre), Ok(c)) = (precreate, &cluster)
        && c.cluster_id == pre.expected_cluster_id
    {
        let new: Vec<(String, i32)> = topics
            .iter()
            .filter(|(name, _)| !pre.known.contains(*name))
            .filter_map(|(name, d)| Some((name.clone(), d.as_ref().ok()?.partitions.len() as i32)))
            .filter(|(_, n)| *n > 0 && *n <= crate::store::MAX_PARTITION_COUNT)
            .collect();
        create_mirror_topics(&source, &pre.destination, new).await;
    }
    Ok(Survey { cluster, listing, topics })
}

/// How long [`create_mirror_topics`] waits for new mirror topics to get leaders (as `start_topic`).
const MIRROR_TOPIC_VISIBLE_WITHIN: Duration = Duration::from_secs(10);

/// Creates the mirror topics of `topics` (name, source partition count) that the destination
/// lacks, the way `start_topic` creates one (the source's partition count and dynamic topic
/// configs), and waits until they have leaders. Best effort: whatever fails here, `start_topic`
/// does again and reports.
async fn create_mirror_topics(source: &dyn ClusterAdmin, destination: &dyn ClusterAdmin, topics: Vec<(String, i32)>) {
    if topics.is_empty() {
        return;
    }
    let names: Vec<String> = topics.iter().map(|(t, _)| t.clone()).collect();
    let Ok(described) = destination.describe_topics(&names).await else { return };
    let mut created = Vec::new();
    for ((topic, partitions), d) in topics.into_iter().zip(described) {
        match d {
            Err(e) if e.is(crate::kafka::KafkaErrorKind::UnknownTopicOrPartition) => {}
            _ => continue, // exists (start_topic checks it), or an answer start_topic will report
        }
        let overrides: Vec<(String, String)> = match source.describe_topic_configs(&topic).await {
            Ok(entries) => entries
                .into_iter()
                .filter(|e| e.source == crate::kafka::ConfigSource::DynamicTopic)
                .filter_map(|e| e.value.map(|v| (e.name, v)))
                .collect(),
            Err(_) => continue, // start_topic creates it (with defaults) and says why
        };
        let configs = crate::domain::config_sync::creation_configs(&overrides);
        match destination.create_topic(&topic, partitions, -1, &configs).await {
            Ok(()) => created.push((topic, partitions)),
            Err(e) if e.is(crate::kafka::KafkaErrorKind::TopicAlreadyExists) => {}
            Err(_) => {}
        }
    }
    let deadline = tokio::time::Instant::now() + MIRROR_TOPIC_VISIBLE_WITHIN;
    while !created.is_empty() && tokio::time::Instant::now() < deadline {
        let names: Vec<String> = created.iter().map(|(t, _)| t.clone()).collect();
        if let Ok(described) = destination.describe_topics(&names).await {
            let mut waiting = Vec::new();
            for ((topic, partitions), d) in created.into_iter().zip(described) {
                let ready = d.is_ok_and(|d| {
                    d.partitions.len() as i32 == partitions && d.partitions.iter().all(|p| p.leader.is_some())
                });
                if !ready {
                    waiting.push((topic, partitions));
                }
            }
            created = waiting;
        }
        if !created.is_empty() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// A boxed handler. A stop served between two topics of a start runs `handle` inside `handle`
/// (once: the lane is not served again inside, see `OffLoop::serving_priority`); the box with a
/// named type is what lets the compiler see that recursion through.
type Handled<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

impl Coordinator {
    /// Handles a stop or pause from the priority lane, then any others that queued meanwhile.
    pub(super) fn handle_priority(&mut self, first: Request) -> Handled<'_> {
        Box::pin(async move {
            self.off_loop.serving_priority = true;
            // A stop or pause never reads a start's source facts.
            let survey = self.off_loop.survey.take();
            let mut next = Some(first);
            while let Some(req) = next.take().or_else(|| self.priority_rx.try_recv().ok()) {
                self.handle(req).await;
            }
            self.off_loop.survey = survey;
            self.off_loop.serving_priority = false;
        })
    }

    /// What may not wait for the step in progress, served before each step of the loop: slot
    /// changes first, then stops and pauses.
    pub(super) async fn serve_urgent(&mut self) {
        self.serve_membership().await;
        self.serve_priority().await;
    }

    /// Between two topics of a long call (rule 3 of the module docs), where none is half-done:
    /// slot changes, what the state tail read (a takeover completes once it has read the slot's
    /// records), a heartbeat that is due, then stops and pauses; then the snapshot, at most
    /// every [`PUBLISH_BETWEEN_TOPICS_EVERY`]. Not the tail inside a stop or pause served from the lane: that one
    /// has put the start's source facts aside, and a source change read meanwhile could not
    /// drop them.
    pub(super) async fn serve_between_topics(&mut self) {
        self.serve_membership().await;
        // Only while a takeover waits for it: otherwise the tail brings mostly this instance's
        // own writes (the data paths' progress of thousands of partitions every commit), work
        // the call need not wait for; the loop applies them after the call as before. (Session
        // 24 blamed them for a 30-40 % slower start of 10,000 partitions; side by side in one
        // window, session 25, the lanes as they are cost it 3-9 %: `bench/README.md`.)
        let takeover_waits = self.group.as_ref().is_some_and(|g| g.takeover_pending());
        if !self.off_loop.serving_priority && takeover_waits {
            while let Some(batch) = self.tail_rx.as_mut().and_then(|rx| rx.try_recv().ok()) {
                let began = std::time::Instant::now();
                self.tailed(batch).await;
                super::log_slow_step("state tail (between two topics)", began);
            }
        }
        self.heartbeat_if_due().await;
        self.serve_priority().await;
        // Readers see the call's progress and any slot taken over meanwhile, not the state
        // from before the call until it ends.
        if self.published_between.is_none_or(|t| t.elapsed() >= PUBLISH_BETWEEN_TOPICS_EVERY) {
            self.publish();
            self.published_between = Some(std::time::Instant::now());
        }
    }

    /// Serves the slot changes the group membership sent meanwhile. A revoke holds the whole
    /// group's rebalance (every instance's new slots) until this instance has ended the revoked
    /// slots' data paths; a new slot mirrors nothing until its data paths start.
    async fn serve_membership(&mut self) {
        while let Some(ev) = self.membership_rx.as_mut().and_then(|rx| rx.try_recv().ok()) {
            let began = std::time::Instant::now();
            self.membership(ev).await;
            super::log_slow_step("membership change (queued)", began);
        }
    }

    /// Serves the stops and pauses waiting on the priority lane, unless one is being served.
    pub(super) async fn serve_priority(&mut self) {
        if self.off_loop.serving_priority {
            return;
        }
        if let Ok(first) = self.priority_rx.try_recv() {
            self.handle_priority(first).await;
        }
    }

    /// A create: the checks that need no Kafka, then the source check off the loop.
    pub(super) async fn begin_create(
        &mut self,
        spec: MirrorSpec,
        actor: Actor,
        reply: oneshot::Sender<Result<(), EngineError>>,
    ) {
        if let Err(e) = self.check_create(&spec) {
            let r = Err(e);
            self.record_mirror_change(&spec.name, OperationKind::CreateMirror, &actor, &r).await;
            let _ = reply.send(r);
            return;
        }
        self.off_loop.creating.insert(spec.name.clone());
        let internal = self.internal_tx.clone();
        let ports = std::sync::Arc::clone(&self.ports);
        tokio::spawn(async move {
            let cluster = create_probe(&*ports, spec.source.clone()).await;
            let _ = internal.send(Internal::OffLoop(Box::new(Done::Probed { spec, actor, reply, cluster })));
        });
    }

    /// A start: the checks that need no Kafka, then the source reads off the loop.
    pub(super) fn begin_start(&mut self, call: LifecycleCall) {
        let LifecycleCall { mirror, selector, op, validate_only, .. } = &call;
        let (mirror, op, validate_only) = (mirror.clone(), *op, *validate_only);
        let checked = (|| {
            if !validate_only {
                self.check_writable()?;
            }
            let m = self.mirrors.get(&mirror).ok_or_else(|| EngineError::mirror_not_found(&mirror))?;
            match selector {
                TopicSelector::Names(names) if names.is_empty() => {
                    return Err(EngineError::rejected(ProblemKind::InvalidName, "no topics given"));
                }
                TopicSelector::Names(names) => check_topic_count(names.len())?,
                TopicSelector::All => {
                    return Err(EngineError::rejected(
                        ProblemKind::InvalidName,
                        "a start names its topics or gives a pattern (every topic of the source: \".*\")",
                    ));
                }
                TopicSelector::Pattern(p) => {
                    crate::domain::name_pattern::NamePattern::new(p)
                        .map_err(|e| EngineError::rejected(ProblemKind::InvalidPattern, e.to_string()))?;
                }
            }
            Ok(m)
        })();
        let m = match checked {
            Ok(m) => m,
            Err(e) => {
                let _ = call.reply.send(Err(e));
                return;
            }
        };
        let source = m.source_admin.clone();
        let mirror_topics: Vec<String> = m.topics.keys().cloned().collect();
        // Mirror topics are created ahead only for a start that will create them itself: not
        // for a check (`validate_only`), not for a refused mode, not while the mirror is halted
        // or this instance fenced.
        let precreate = match &m.stored.spec.expected_source_cluster_id {
            Some(expected)
                if !validate_only
                    && !matches!(op, LifecycleOp::Start { truncation: Truncation::Resync { quarantine: true } })
                    && self.fenced.is_none()
                    && !m.fenced
                    && m.cluster_id_status != ClusterIdStatus::Mismatch =>
            {
                Some(Precreate {
                    destination: self.destination_admin.clone(),
                    expected_cluster_id: expected.clone(),
                    known: self.mirrors.values().flat_map(|m| m.topics.keys().cloned()).collect(),
                })
            }
            _ => None,
        };
        let selector = selector.clone();
        let job = StartJob { source: m.stored.spec.source.clone(), call };
        let state_topic = self.config.state_topic.clone();
        let internal = self.internal_tx.clone();
        tokio::spawn(async move {
            let survey = start_survey(source, selector, mirror_topics, state_topic, precreate).await;
            let _ = internal.send(Internal::OffLoop(Box::new(Done::Surveyed { job, survey })));
        });
    }

    /// Finishes a create or a start whose source calls are done.
    pub(super) async fn off_loop_done(&mut self, done: Done) {
        match done {
            Done::Probed { spec, actor, reply, cluster } => {
                self.off_loop.creating.remove(&spec.name);
                let name = spec.name.clone();
                let r = match cluster {
                    Ok(cluster) => self.create_mirror(spec, cluster, &actor).await,
                    Err(e) => Err(e),
                };
                let result = r.clone();
                self.record_mirror_change(&name, OperationKind::CreateMirror, &actor, &result).await;
                // Readers see the mirror as soon as the caller does.
                self.publish();
                // A new mirror has no partitions, so no data path yet: its slots' data paths start
                // when its topics do.
                let _ = reply.send(r);
            }
            Done::Surveyed { job, survey } => {
                let StartJob {
                    call: LifecycleCall { mirror, selector, op, validate_only, actor, reply, origin, .. },
                    source,
                } = job;
                let r = match survey {
                    Err(e) => Err(e),
                    Ok(survey) => {
                        let same_source = self.mirrors.get(&mirror).is_some_and(|m| m.stored.spec.source == source);
                        self.off_loop.survey = same_source.then_some(survey);
                        let r = self.lifecycle(&mirror, selector, op, validate_only, &actor, origin).await;
                        self.off_loop.survey = None;
                        r
                    }
                };
                // Readers see the outcome as soon as the caller does.
                self.publish();
                let _ = reply.send(r);
            }
        }
    }

    /// The source's cluster, for a start: from its survey, or asked now.
    pub(super) async fn source_cluster(&self, source: &dyn ClusterAdmin) -> KafkaResult<ClusterDescription> {
        match &self.off_loop.survey {
            Some(s) => s.cluster.clone(),
            None => source.describe_cluster().await,
        }
    }

    /// A source topic's ID and partitions, for a start: from its survey, or asked now.
    pub(super) async fn source_topic(&self, source: &dyn ClusterAdmin, topic: &str) -> KafkaResult<TopicDescription> {
        match self.off_loop.survey.as_ref().and_then(|s| s.topics.get(topic)) {
            Some(described) => described.clone(),
            None => source.describe_topic(topic).await,
        }
    }

    /// The source's topics, for a start with a pattern: from its survey, or asked now.
    pub(super) async fn source_listing(&self, source: &dyn ClusterAdmin) -> KafkaResult<Vec<String>> {
        match self.off_loop.survey.as_ref().and_then(|s| s.listing.as_ref()) {
            Some(listed) => Ok(listed.clone()),
            None => source.list_topics().await,
        }
    }
}
