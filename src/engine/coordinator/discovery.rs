//! Discovery: a mirror's topic policy (`topic_include` / `topic_exclude`, KIP-1279's
//! `topics.include` / `topics.exclude`) carried out at every metadata refresh.
//!
//! Every instance lists the source's topics with its refresh (one metadata request, whatever the
//! number of topics) while the mirror has an include pattern, and computes the same pure plan
//! (`domain::topic_policy::plan`) for its own view. Only the owner of the mirror's slot acts, as
//! for the metadata sync, so two instances never both start a topic; after a takeover the new
//! owner's next refresh carries on.
//!
//! Acting goes through the operator's paths: a start is a [`LifecycleCall`] like `topics:start`
//! (the same survey off the loop, conflict checks, mirror-topic creation), in batches of
//! [`BATCH`] topics so a stop or pause sent meanwhile is served between two batches as between
//! two topics; an exclusion is a `topics:stop`. A run that starts anything is one operation
//! (actor `discovery`) with a result per topic; an idle run writes nothing.
//!
//! A topic a start refuses (a non-mirror topic of that name on the destination, a partition
//! count that differs, no authorization) is listed with its reason and held back: it is tried
//! again when the policy changes, on an explicit refresh, or after [`RETRY_REFUSED_AFTER`], not
//! at every refresh.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;

use crate::domain::topic_policy::{self, Facts, MirrorTopic, Plan, TopicPolicy};

use super::*;

/// Topics started per lifecycle call of a run.
pub(super) const BATCH: usize = 100;

/// A refused topic is tried again after this long (or at once on a refresh or a policy change).
pub(super) const RETRY_REFUSED_AFTER: Duration = Duration::from_secs(600);

/// A run that is starting topics, batch after batch.
struct Run {
    id: String,
    started_at: Timestamp,
    queue: VecDeque<String>,
    results: Vec<TopicOutcome>,
    /// A batch is being started (its survey or its lifecycle call).
    in_flight: bool,
}

/// A mirror's discovery on this instance.
#[derive(Default)]
pub(super) struct DiscoveryRt {
    /// The last plan (every instance computes it, for its own view).
    plan: Option<Arc<Plan>>,
    last_run_at: Option<Timestamp>,
    last_run_ms: Option<u64>,
    topics_seen: Option<usize>,
    last_error: Option<String>,
    refused: BTreeMap<String, Refusal>,
    /// Refused topics are tried again at the next run (a refresh asked for, a policy change).
    retry_refused: bool,
    run: Option<Run>,
    runs_total: u64,
    started_total: u64,
    stopped_total: u64,
}

impl DiscoveryRt {
    /// A policy change or an explicit refresh: refused topics are tried again at the next run.
    pub(super) fn retry_refused(&mut self) {
        self.retry_refused = true;
    }

    /// What the snapshot shows.
    pub(super) fn snapshot(&self, runs_on: Option<String>, runs_here: bool) -> DiscoverySnapshot {
        DiscoverySnapshot {
            runs_on,
            runs_here,
            last_run_at: self.last_run_at,
            last_run_ms: self.last_run_ms,
            topics_seen: self.topics_seen,
            last_error: self.last_error.clone(),
            plan: self.plan.clone(),
            starting: self.run.as_ref().map(|r| r.queue.len() + usize::from(r.in_flight)),
            refused: self.refused.iter().map(|(t, r)| (t.clone(), r.clone())).collect(),
            runs_total: self.runs_total,
            topics_started_total: self.started_total,
            topics_stopped_total: self.stopped_total,
        }
    }
}

/// What the metadata refresh's listing brought for discovery.
pub(super) struct Listing {
    pub topics: crate::kafka::KafkaResult<Vec<String>>,
    pub took: Duration,
}

impl Coordinator {
    /// The mirror's policy, compiled (patterns were checked when stored).
    fn policy_of(&self, mirror: &str) -> Option<TopicPolicy> {
        let spec = &self.mirrors.get(mirror)?.stored.spec;
        Some(TopicPolicy::lenient(&spec.topic_include, &spec.topic_exclude))
    }

    /// What a plan for `mirror` decides from, besides the source's topics.
    fn facts_of<'a>(&self, mirror: &str, source_topics: &'a [String], refused: BTreeSet<String>) -> Facts<'a> {
        let mirror_topics = self.mirrors.get(mirror).map_or_else(BTreeMap::new, |m| {
            m.topics
                .iter()
                .map(|(name, t)| {
                    let stopped = !t.partitions.is_empty()
                        && t.partitions.values().all(|p| p.record.state == PartitionState::Stopped);
                    (name.clone(), if stopped { MirrorTopic::Stopped } else { MirrorTopic::Active })
                })
                .collect()
        });
        let other_mirrors = self
            .mirrors
            .iter()
            .filter(|(name, _)| name.as_str() != mirror)
            .flat_map(|(name, m)| m.topics.keys().map(move |t| (t.clone(), name.clone())))
            .collect();
        Facts { source_topics, mirror_topics, other_mirrors, refused }
    }

    /// A discovery run, at the end of a metadata refresh: the plan from `listing` (absent while
    /// the mirror has no include pattern), then, on the owner of the mirror's slot only, the
    /// exclusions' stops and the starts.
    pub(super) async fn discover(&mut self, mirror: &str, listing: Option<Listing>) {
        let Some(policy) = self.policy_of(mirror) else { return };
        let t = now();
        let state_topic = self.config.state_topic.clone();
        let Some(m) = self.mirrors.get_mut(mirror) else { return };
        let d = &mut m.discovery;
        // Refused topics are held back unless it is time to try them again. Their entries stay
        // until they are tried: a refusal for the same reason keeps its first time.
        let retry_all = std::mem::take(&mut d.retry_refused);
        let refused: BTreeSet<String> = d
            .refused
            .iter()
            .filter(|(_, r)| !retry_all && r.tried_at.millis_until(t) < RETRY_REFUSED_AFTER.as_millis() as i64)
            .map(|(topic, _)| topic.clone())
            .collect();
        let listed = match listing {
            Some(Listing { topics: Ok(topics), took }) => {
                d.last_run_ms = Some(took.as_millis() as u64);
                d.topics_seen = Some(topics.len());
                d.last_error = None;
                Some(topics)
            }
            Some(Listing { topics: Err(e), .. }) => {
                d.last_error = Some(format!("cannot list the source's topics: {e}"));
                None
            }
            None => {
                if !policy.discovers() {
                    d.plan = None;
                    d.topics_seen = None;
                    d.last_error = None;
                }
                None
            }
        };
        let listed_ok = listed.is_some();
        let source_topics = listed.unwrap_or_default();
        let facts = self.facts_of(mirror, &source_topics, refused);
        let plan = topic_policy::plan(&policy, &facts, |n| is_internal_topic(n, &state_topic));
        let Some(m) = self.mirrors.get_mut(mirror) else { return };
        let d = &mut m.discovery;
        if policy.discovers() && listed_ok {
            d.last_run_at = Some(t);
            // A refusal ends when the topic no longer matches or became the mirror's.
            let matched: BTreeSet<&String> = plan.matched.iter().collect();
            d.refused.retain(|topic, _| matched.contains(topic) && !m.topics.contains_key(topic));
            d.plan = Some(Arc::new(plan.clone()));
        } else if !policy.discovers() {
            d.plan = None;
            d.refused.clear();
        }
        // Only the owner of the mirror's slot acts, and only while it may write and the mirror
        // is not halted.
        let halted = m.halted();
        if !self.owns_mirror(mirror) || self.fenced.is_some() || halted {
            return;
        }
        if policy.discovers()
            && listed_ok
            && let Some(m) = self.mirrors.get_mut(mirror)
        {
            m.discovery.runs_total += 1;
        }
        if !plan.stop.is_empty() {
            self.stop_excluded(mirror, &plan.stop).await;
        }
        if !plan.start.is_empty() {
            self.begin_run(mirror, plan.start);
        }
    }

    /// Stops the mirror's topics that came to match an exclusion, as a `topics:stop` by
    /// discovery (its own operation in the log).
    async fn stop_excluded(&mut self, mirror: &str, stop: &[(String, String)]) {
        let names: Vec<String> = stop.iter().map(|(t, _)| t.clone()).collect();
        for (topic, pattern) in stop {
            tracing::info!(%mirror, %topic, "stopping a mirrored topic that matches topic_exclude pattern {pattern:?}");
        }
        let actor = Actor::discovery();
        let origin = CallOrigin::Single { exclude: false };
        match self.lifecycle(mirror, TopicSelector::Names(names), LifecycleOp::Stop, false, &actor, origin).await {
            Ok(r) => {
                let stopped = r.results.iter().filter(|o| o.ok).count() as u64;
                if let Some(m) = self.mirrors.get_mut(mirror) {
                    m.discovery.stopped_total += stopped;
                }
                for o in r.results.iter().filter(|o| !o.ok) {
                    let detail = o.error.as_ref().map_or("", |p| p.detail.as_str());
                    tracing::warn!(%mirror, topic = %o.topic, "cannot stop an excluded topic: {detail}");
                }
            }
            Err(e) => tracing::warn!(%mirror, "cannot stop excluded topics: {e}"),
        }
        self.publish();
    }

    /// Starts a run of `topics` unless one is running (its topics are the mirror's by the time
    /// the next refresh plans again).
    fn begin_run(&mut self, mirror: &str, topics: Vec<String>) {
        let id = self.next_operation_id();
        let Some(m) = self.mirrors.get_mut(mirror) else { return };
        if m.discovery.run.is_some() {
            return;
        }
        tracing::info!(%mirror, topics = topics.len(), "discovery: starting source topics that match topic_include");
        m.discovery.run =
            Some(Run { id, started_at: now(), queue: topics.into(), results: Vec::new(), in_flight: false });
        self.next_batch(mirror);
    }

    /// Sends the run's next batch as a start (its survey runs off the loop), or records the run
    /// when nothing is left.
    fn next_batch(&mut self, mirror: &str) {
        let Some(run) = self.mirrors.get_mut(mirror).and_then(|m| m.discovery.run.as_mut()) else { return };
        let n = run.queue.len().min(BATCH);
        if n == 0 {
            return;
        }
        let batch: Vec<String> = run.queue.drain(..n).collect();
        run.in_flight = true;
        let (reply, rx) = oneshot::channel();
        let internal = self.internal_tx.clone();
        let name = mirror.to_string();
        tokio::spawn(async move {
            let result = rx.await.unwrap_or(Err(EngineError::ShuttingDown));
            let _ = internal.send(Internal::Discovered { mirror: name, result });
        });
        self.begin_start(LifecycleCall {
            mirror: mirror.to_string(),
            selector: TopicSelector::Names(batch),
            op: LifecycleOp::Start { truncation: Truncation::None },
            validate_only: false,
            actor: Actor::discovery(),
            reply,
            promote: None,
            origin: CallOrigin::DiscoveryBatch,
        });
    }

    /// A batch of a run is done: refusals are held back, the next batch goes, and the run is
    /// recorded as one operation when its last batch is done.
    pub(super) async fn discovered(&mut self, mirror: &str, result: Result<OpResult, EngineError>) {
        let t = now();
        let Some(m) = self.mirrors.get_mut(mirror) else { return };
        let Some(run) = m.discovery.run.as_mut() else { return };
        run.in_flight = false;
        match result {
            Ok(r) => {
                for o in r.results {
                    if o.ok {
                        m.discovery.started_total += 1;
                    } else if let Some(p) = &o.error {
                        let known = m.discovery.refused.get(&o.topic);
                        let same = known.is_some_and(|k| k.kind == p.kind && k.detail == p.detail);
                        if !same {
                            tracing::warn!(%mirror, topic = %o.topic, "discovery cannot start a topic that matches topic_include: {}", p.detail);
                        }
                        let since = known.filter(|_| same).map_or(t, |k| k.since);
                        m.discovery.refused.insert(
                            o.topic.clone(),
                            Refusal { kind: p.kind, detail: p.detail.clone(), since, tried_at: t },
                        );
                    }
                    run.results.push(o);
                }
            }
            Err(e) => {
                // The whole call failed (the source did not answer its survey, this instance was
                // fenced): nothing of the run is held back; the next refresh plans again.
                tracing::warn!(%mirror, "discovery could not start topics: {e}");
                m.discovery.last_error = Some(format!("cannot start topics: {e}"));
                let problem = Problem { kind: e.kind(), detail: e.to_string() };
                let rest: Vec<String> = run.queue.drain(..).collect();
                run.results.extend(rest.into_iter().map(|topic| TopicOutcome {
                    topic,
                    ok: false,
                    error: Some(problem.clone()),
                }));
            }
        }
        let go_on = !run.queue.is_empty() && self.owns_mirror(mirror) && self.fenced.is_none();
        if go_on {
            self.next_batch(mirror);
            return;
        }
        let Some(run) = self.mirrors.get_mut(mirror).and_then(|m| m.discovery.run.take()) else { return };
        let started = run.results.iter().filter(|o| o.ok).count();
        tracing::info!(%mirror, started, refused = run.results.len() - started, "discovery run done");
        if !run.results.is_empty() {
            let actor = Actor::discovery();
            self.record_operation(&run.id, mirror, OperationKind::Start, &actor, run.started_at, run.results).await;
        }
        self.publish();
    }

    /// `validate_only` of a policy change: the plan the new policy makes from the source's topics
    /// as listed now (off the loop), refused topics not held back.
    pub(super) fn preview_policy(
        &mut self,
        mirror: String,
        policy: TopicPolicy,
        reply: oneshot::Sender<Result<Plan, EngineError>>,
    ) {
        let Some(m) = self.mirrors.get(&mirror) else {
            let _ = reply.send(Err(EngineError::mirror_not_found(&mirror)));
            return;
        };
        let source = m.source_admin.clone();
        let facts = self.facts_of(&mirror, &[], BTreeSet::new());
        let (mirror_topics, other_mirrors) = (facts.mirror_topics, facts.other_mirrors);
        let state_topic = self.config.state_topic.clone();
        tokio::spawn(async move {
            let r = match source.list_topics().await {
                Ok(listed) => {
                    let facts =
                        Facts { source_topics: &listed, mirror_topics, other_mirrors, refused: BTreeSet::new() };
                    Ok(topic_policy::plan(&policy, &facts, |n| is_internal_topic(n, &state_topic)))
                }
                Err(e) => Err(EngineError::rejected(
                    Cluster::Source.problem_kind(),
                    format!("cannot list the source's topics for the preview: {e}"),
                )),
            };
            let _ = reply.send(r);
        });
    }
}
