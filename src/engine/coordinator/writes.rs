//! The state write queue: records queued by transitions and lifecycle steps (`pending_writes`),
//! written together in one state transaction by [`Coordinator::flush`] before anything that
//! depends on them runs (DESIGN.md section 3: the record first, then its actions).

use super::*;

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
        self.pending_writes.push(w);
    }

    /// The retry tick's part: writes again the records of partitions a failed write did not
    /// store, as this instance has them now, if it still owns them. A partition another instance
    /// owns is left alone: its record here was a command, and a command whose write failed was
    /// answered with an error (`unrecorded`), so sending it later would run what the caller was
    /// told did not happen.
    pub(super) async fn store_again(&mut self) {
        let (at, tries) = self.store_again_at;
        if self.unstored.is_empty() || tokio::time::Instant::now() < at {
            return;
        }
        // A quick question first: while the destination does not answer, a write would hold
        // the loop for up to two request timeouts.
        let probe = tokio::time::timeout(STORE_AGAIN_PROBE, self.destination_admin.describe_cluster()).await;
        if !matches!(probe, Ok(Ok(_))) {
            let delay = crate::domain::backoff::Backoff::PIPE_RESTART.ceiling(tries);
            self.store_again_at = (tokio::time::Instant::now() + delay, tries + 1);
            return;
        }
        for (mirror, topic, p) in std::mem::take(&mut self.unstored) {
            if self.owns_partition(&mirror, &topic, p) {
                self.queue_partition(&mirror, &topic, p, None);
            }
        }
        self.store_again_at = match self.flush().await {
            Ok(()) => (tokio::time::Instant::now(), 0),
            Err(e) => {
                let delay = crate::domain::backoff::Backoff::PIPE_RESTART.ceiling(tries);
                tracing::debug!("records not stored yet ({e}); next try in {delay:?}");
                (tokio::time::Instant::now() + delay, tries + 1)
            }
        };
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
        self.pending_writes.push(w);
    }

    /// Writes everything queued in one transaction.
    pub(super) async fn flush(&mut self) -> Result<(), EngineError> {
        if self.pending_writes.is_empty() {
            return Ok(());
        }
        self.check_writable()?;
        let writes = Arc::new(std::mem::take(&mut self.pending_writes));
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
        if r.is_err() || !self.unstored.is_empty() {
            // Partition records the state topic did not take (or now took): so what is stored
            // does not lag what this instance did (other instances show the stored record)
            // until the partition's next transition.
            for key in partition_keys(&writes) {
                if r.is_err() {
                    self.unstored.insert(key);
                } else {
                    self.unstored.remove(&key);
                }
            }
        }
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
