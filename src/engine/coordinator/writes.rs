//! The state write queue: records queued by transitions and lifecycle steps ([`WriteQueue`]),
//! written together in one state transaction by [`Coordinator::flush`] before anything that
//! depends on them runs (DESIGN.md section 3: the record first, then its actions).

use super::*;

/// The records waiting for the next state transaction, and the partitions whose latest record a
/// failed write did not store (written again on the retry tick, with a backoff).
pub(super) struct WriteQueue {
    pending: Vec<pipe::StateWrite>,
    /// Partitions whose latest record a failed write did not store, and no later write stored
    /// either: written again (as this instance has them now) by `store_again`.
    unstored: BTreeSet<(String, String, i32)>,
    /// When `store_again` may try next, and its failed tries so far: it backs off instead of
    /// trying every tick.
    again_at: (tokio::time::Instant, u32),
}

impl WriteQueue {
    pub(super) fn new(now: tokio::time::Instant) -> WriteQueue {
        WriteQueue { pending: Vec::new(), unstored: BTreeSet::new(), again_at: (now, 0) }
    }

    pub(super) fn push(&mut self, w: pipe::StateWrite) {
        self.pending.push(w);
    }

    pub(super) fn extend(&mut self, ws: impl IntoIterator<Item = pipe::StateWrite>) {
        self.pending.extend(ws);
    }

    /// The queued records, for one transaction; the queue is empty after.
    fn take(&mut self) -> Option<Arc<Vec<pipe::StateWrite>>> {
        (!self.pending.is_empty()).then(|| Arc::new(std::mem::take(&mut self.pending)))
    }

    /// After a write of `batch`: the partitions whose records it did not store are remembered,
    /// those it stored forgotten (a later record of a partition stores what an earlier one did
    /// not).
    fn written(&mut self, batch: &[pipe::StateWrite], stored: bool) {
        if stored && self.unstored.is_empty() {
            return;
        }
        for key in partition_keys(batch) {
            if stored {
                self.unstored.remove(&key);
            } else {
                self.unstored.insert(key);
            }
        }
    }

    /// The partitions to store again, when it is time to try.
    fn due(&self, now: tokio::time::Instant) -> bool {
        !self.unstored.is_empty() && now >= self.again_at.0
    }

    /// A try failed: the next one after a backoff that grows with the tries.
    fn try_later(&mut self, now: tokio::time::Instant) {
        let tries = self.again_at.1;
        self.again_at = (now + crate::domain::backoff::Backoff::PIPE_RESTART.ceiling(tries), tries + 1);
    }

    fn tried(&mut self, now: tokio::time::Instant) {
        self.again_at = (now, 0);
    }
}

/// The (mirror, topic, partition) of every partition state record in `writes`.
fn partition_keys(writes: &[pipe::StateWrite]) -> Vec<(String, String, i32)> {
    writes
        .iter()
        .filter_map(|w| match crate::store::decode(Some(&w.key), w.value.as_deref()) {
            Ok(crate::store::StateRecord::PartitionState(e)) => e.value.map(|v| (v.mirror, v.topic, v.partition)),
            _ => None,
        })
        .collect()
}

impl Coordinator {
    pub(super) fn queue_partition(&mut self, mirror: &str, topic: &str, partition: i32, command: Option<EventKind>) {
        let Some(m) = self.mirrors.get(mirror) else { return };
        let Some(t) = m.topics.get(topic) else { return };
        let Some(p) = t.partitions.get(&partition) else { return };
        // In a group, the record names its writer: the slot's owner runs what another instance
        // recorded (`group`).
        let writer = self.in_group().then_some(persist::Writer { instance: self.config.instance_id.as_str(), command });
        let w = persist::partition_state(
            mirror,
            topic,
            &t.source_topic_id,
            partition,
            &p.record,
            self.state_partitions,
            writer,
        );
        self.writes.push(w);
    }

    /// The retry tick's part: writes again the records of partitions a failed write did not
    /// store, as this instance has them now, if it still owns them. A partition another instance
    /// owns is left alone: its record here was a command, and a command whose write failed was
    /// answered with an error (`unrecorded`), so sending it later would run what the caller was
    /// told did not happen.
    pub(super) async fn store_again(&mut self) {
        if !self.writes.due(tokio::time::Instant::now()) {
            return;
        }
        // A quick question first: while the destination does not answer, a write would hold
        // the loop for up to two request timeouts.
        let probe = tokio::time::timeout(STORE_AGAIN_PROBE, self.destination_admin.describe_cluster()).await;
        if !matches!(probe, Ok(Ok(_))) {
            self.writes.try_later(tokio::time::Instant::now());
            return;
        }
        for (mirror, topic, p) in std::mem::take(&mut self.writes.unstored) {
            if self.owns_partition(&mirror, &topic, p) {
                self.queue_partition(&mirror, &topic, p, None);
            }
        }
        match self.flush().await {
            Ok(()) => self.writes.tried(tokio::time::Instant::now()),
            Err(e) => {
                tracing::debug!("records not stored yet ({e}); tried again later");
                self.writes.try_later(tokio::time::Instant::now());
            }
        }
    }

    pub(super) fn queue_topic(&mut self, mirror: &str, topic: &str) {
        let Some(m) = self.mirrors.get(mirror) else { return };
        let Some(t) = m.topics.get(topic) else { return };
        let w = persist::topic(
            mirror,
            topic,
            &t.source_topic_id,
            &t.destination_topic_id,
            t.partitions.len(),
            t.created_at,
            self.state_partitions,
        );
        self.writes.push(w);
    }

    /// Writes everything queued in one transaction.
    pub(super) async fn flush(&mut self) -> Result<(), EngineError> {
        if self.writes.pending.is_empty() {
            return Ok(());
        }
        self.check_writable()?;
        let Some(writes) = self.writes.take() else { return Ok(()) };
        let mut r = self.write_state(Arc::clone(&writes)).await?;
        if let Err(state_log::StateWriteError::Fatal(e)) = &r {
            // The writer's producer is unusable (a transaction in a state it cannot leave, e.g.
            // after a commit that timed out here but completed on the broker): a new one, with
            // the same transactional id, starts clean, and the write is tried once more. Records
            // are latest-value, so writing one twice is harmless.
            tracing::warn!("state writer failed ({e}); opening a new one");
            match self.ports.open_state_writer(&self.config, WriterRole::Engine).await {
                Ok(w) => {
                    self.writer = w;
                    r = self.write_state(Arc::clone(&writes)).await?;
                }
                Err(e) => tracing::warn!("cannot open a new state writer: {e}"),
            }
        }
        // Partition records the state topic did not take (or now took): so what is stored does
        // not lag what this instance did (other instances show the stored record) until the
        // partition's next transition.
        self.writes.written(&writes, r.is_ok());
        if let Err(e) = r {
            if let state_log::StateWriteError::Fenced(e) = e {
                let why = format!("another kmirror instance took over this destination: {e}");
                tracing::error!("{why}");
                self.fenced = Some(why.clone());
                for m in self.mirrors.values_mut() {
                    m.data_path = DataPathStatus::Fenced { message: why.clone() };
                }
                return Err(EngineError::rejected(ProblemKind::Fenced, why));
            }
            return Err(EngineError::Destination(format!("cannot write {}: {e}", self.config.state_topic)));
        }
        Ok(())
    }

    pub(super) async fn write_state(
        &self,
        writes: Arc<Vec<pipe::StateWrite>>,
    ) -> Result<Result<(), state_log::StateWriteError>, EngineError> {
        let writer = Arc::clone(&self.writer);
        tokio::task::spawn_blocking(move || writer.write(&writes))
            .await
            .map_err(|e| EngineError::Destination(e.to_string()))
    }
}
