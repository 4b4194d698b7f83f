//! Retrying at once the FAILED partitions of a cluster that answers again.
//!
//! A partition that failed because a cluster did not answer (`SOURCE_UNREACHABLE`,
//! `DESTINATION_UNAVAILABLE`, `STATE_STORE_UNAVAILABLE`, and `TIMEOUT`: a data path that did not
//! confirm a pause or a stop in time, stuck on the destination) waits for its retry with exponential
//! backoff: after a long outage its next retry can be minutes away (up to 5 min by default) when
//! the cluster comes back, and the partition stays FAILED that long for nothing. While such
//! partitions wait longer than [`PROBE_EVERY`], the coordinator asks their cluster a cheap
//! question (DescribeCluster, off the loop) every [`PROBE_EVERY`]; when it answers after not
//! answering (or on the first question after the failure), they are retried at once
//! ([`Event::RetryEarly`]: an attempt like any other, so a cluster that answers this question but
//! fails the real work keeps backing off). No partition is retried early twice for one return:
//! only a probe that did not answer re-arms it.

use super::*;

/// How often a cluster with FAILED partitions waiting on it is asked whether it answers; also
/// the shortest remaining wait worth probing for (a retry due sooner just runs).
pub(super) const PROBE_EVERY: Duration = Duration::from_secs(5);

/// How long a probe waits for its answer.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// The cluster a failure came from.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum ClusterKey {
    Destination,
    /// A mirror's source.
    Source(String),
}

impl std::fmt::Display for ClusterKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClusterKey::Destination => f.write_str("the destination"),
            ClusterKey::Source(m) => write!(f, "the source of mirror {m}"),
        }
    }
}

/// What the coordinator knows of one cluster that FAILED partitions wait on.
#[derive(Debug)]
pub(super) struct Watch {
    /// The last probe's answer (`None`: none asked yet since partitions started waiting).
    answered: Option<bool>,
    next_probe: tokio::time::Instant,
    in_flight: bool,
}

/// The cluster whose silence failed a partition with `code`, if it is such a failure.
fn cluster_of(code: ErrorCode, mirror: &str) -> Option<ClusterKey> {
    match code {
        ErrorCode::SourceUnreachable => Some(ClusterKey::Source(mirror.to_string())),
        // A data path that did not answer a command in time waits on the destination (its
        // commit, abort or fence); if it was something else, the early retry is one attempt.
        ErrorCode::DestinationUnavailable | ErrorCode::StateStoreUnavailable | ErrorCode::Timeout => {
            Some(ClusterKey::Destination)
        }
        _ => None,
    }
}

impl Coordinator {
    /// Owned FAILED partitions waiting on `key` (every cluster when `None`) whose retry is more
    /// than [`PROBE_EVERY`] away, as (cluster, mirror, topic, partition).
    fn waiting_on(&self, key: Option<&ClusterKey>) -> Vec<(ClusterKey, String, String, i32)> {
        let later = now().saturating_add_millis(PROBE_EVERY.as_millis() as u64);
        self.retry_candidates()
            .filter(|(.., r)| r.next_retry_at.is_some_and(|at| at > later))
            .filter_map(|(mn, tn, p, r)| {
                let k = cluster_of(r.error.as_ref()?.code, mn)?;
                key.is_none_or(|key| *key == k).then(|| (k, mn.to_string(), tn.to_string(), p))
            })
            .collect()
    }

    /// On the retry tick: keeps a watch on every cluster FAILED partitions wait on (and drops
    /// the others'), and asks those due whether they answer.
    pub(super) fn watch_clusters(&mut self) {
        let keys: BTreeSet<ClusterKey> = self.waiting_on(None).into_iter().map(|(k, ..)| k).collect();
        self.cluster_watch.retain(|k, _| keys.contains(k));
        let now_i = tokio::time::Instant::now();
        for key in keys {
            let w = self.cluster_watch.entry(key.clone()).or_insert(Watch {
                answered: None,
                next_probe: now_i,
                in_flight: false,
            });
            if w.in_flight || now_i < w.next_probe {
                continue;
            }
            let admin = match &key {
                ClusterKey::Destination => self.destination_admin.clone(),
                ClusterKey::Source(m) => match self.mirrors.get(m) {
                    Some(m) => m.source_admin.clone(),
                    None => continue,
                },
            };
            w.in_flight = true;
            let internal = self.internal_tx.clone();
            tokio::spawn(async move {
                let answered = matches!(tokio::time::timeout(PROBE_TIMEOUT, admin.describe_cluster()).await, Ok(Ok(_)));
                let _ = internal.send(Internal::ClusterProbed { key, answered });
            });
        }
    }

    /// A probe's answer: a cluster that answers again gets its waiting partitions retried now.
    pub(super) async fn cluster_probed(&mut self, key: ClusterKey, answered: bool) {
        if self.fenced.is_some() {
            return;
        }
        let Some(w) = self.cluster_watch.get_mut(&key) else { return };
        w.in_flight = false;
        w.next_probe = tokio::time::Instant::now() + PROBE_EVERY;
        let back = answered && w.answered != Some(true);
        w.answered = Some(answered);
        if !back {
            return;
        }
        let waiting = self.waiting_on(Some(&key));
        if waiting.is_empty() {
            return;
        }
        tracing::info!(cluster = %key, partitions = waiting.len(), "the cluster answers: retrying its FAILED partitions now");
        let partitions = waiting.into_iter().map(|(_, m, tn, p)| (m, tn, p)).collect();
        self.retry_partitions(partitions, &Event::RetryEarly).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_silent_cluster_is_watched_for() {
        assert_eq!(cluster_of(ErrorCode::SourceUnreachable, "m"), Some(ClusterKey::Source("m".into())));
        assert_eq!(cluster_of(ErrorCode::StateStoreUnavailable, "m"), Some(ClusterKey::Destination));
        assert_eq!(cluster_of(ErrorCode::DestinationUnavailable, "m"), Some(ClusterKey::Destination));
        assert_eq!(cluster_of(ErrorCode::Timeout, "m"), Some(ClusterKey::Destination));
        for code in [ErrorCode::Internal, ErrorCode::ForeignWrite, ErrorCode::AuthorizationFailed] {
            assert_eq!(cluster_of(code, "m"), None, "{code}");
        }
    }
}
