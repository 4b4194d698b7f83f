//! Transactions and their edges: commit (with the state records that make a batch's progress
//! durable), where the records landed, recovery after a failed or timed-out request (replace the
//! producer, learn an in-doubt commit's outcome), abort and rewind, release of partitions, fence.

use super::*;

impl<S: SourceFetcher, W: TransactionalWriter> Pipe<S, W> {
    /// Writes positions, checks and commits the open transaction.
    ///
    /// The state records go out right behind the data, before the data's delivery reports are
    /// in: kmirror is the only writer of its destination partitions, so where each record lands
    /// is known in advance (the next offset after our last batch and its commit marker). One
    /// flush then waits for data and state together, and the delivery reports check the
    /// prediction record by record before anything commits. A record that landed anywhere else
    /// means somebody else wrote to the partition: the transaction is aborted, the partition
    /// fails with a foreign write, and the state records of the aborted transaction are never
    /// read. Waiting for the data first and writing the state after cost one more round trip per
    /// transaction: on 2 loaded cores the step after the data's flush went from ~29 to ~8 ms of
    /// a ~180 ms cycle (end-to-end latency did not move beyond the run-to-run noise, though).
    pub(super) fn commit(&mut self) -> TxnOutcome {
        let started = Instant::now();
        self.last_fill_end = started;
        // A partition whose next destination offset is unknown (the broker did not answer after
        // an abort), or was read when one of our markers may still have been on its way (after
        // an abort, or before the partition was assigned here), learns it from its first
        // delivery before anything is predicted.
        if self
            .parts
            .values()
            .any(|p| !p.pending.is_empty() && (p.expected_next_destination.is_none() || p.marker_may_follow))
        {
            if let Err(e) = self.flush_sent() {
                return self.after_txn_error("flush", e, Vec::new());
            }
            let results = self.writer.deliveries();
            for (key, part) in self.parts.iter_mut().filter(|(_, p)| !p.pending.is_empty()) {
                let Some(Some(Ok(first))) = part.pending.first().and_then(|p| results.get(p.slot)) else { continue };
                match (part.expected_next_destination, part.marker_may_follow) {
                    (None, _) => part.expected_next_destination = Some(*first),
                    (Some(read), true) => {
                        if *first == read + 1 {
                            tracing::debug!(
                                mirror = %self.config.mirror, topic = %key.0, partition = key.1, read,
                                "our marker landed after the destination end was read"
                            );
                        }
                        // Otherwise the prediction stays and the landing check reports a foreign write.
                        if landed_where_ours_can(read, *first) {
                            part.expected_next_destination = Some(*first);
                        }
                    }
                    (Some(_), false) => continue,
                }
                part.after_commit = false;
                part.marker_may_follow = false;
            }
        }
        let progress = match self.predicted_progress() {
            Ok(p) => p,
            Err(e) => {
                self.abort_and_rewind();
                return TxnOutcome::Retry(format!("offset map run rejected: {e}"));
            }
        };
        // A state record the producer refuses (the transaction took an abortable error: one of
        // its data records was refused) ends the sending, not the checks: where the data landed
        // is still judged below, then the transaction aborts.
        let mut state_refused = None;
        'state: for p in &progress {
            for w in (self.encode)(p) {
                if let Err(e) = self.writer.send_state(&self.config.state_topic, &w) {
                    state_refused = Some(format!("cannot write state record: {e}"));
                    break 'state;
                }
            }
        }
        // Data and state records together; the flush inside rdkafka's commit_transaction then
        // finds nothing to wait for.
        if let Err(e) = self.flush_sent() {
            return self.after_txn_error("flush", e, Vec::new());
        }
        let flushed = started.elapsed();
        let results: Vec<Delivered> = self.writer.take_deliveries();
        // Where the records landed first: a partition whose records all landed somewhere else
        // than predicted has a foreign writer, whatever else went wrong in this transaction.
        let landing = self.check_landing(&results);
        if let Landing::Foreign(foreign) = &landing {
            // Never commit records next to somebody else's: abort, then fail those partitions.
            self.abort_and_rewind();
            for ((topic, partition), expected, found) in foreign {
                self.fail_partition(
                    topic,
                    *partition,
                    PartitionFault::ForeignWrite { expected_offset: *expected, found_offset: *found },
                );
            }
            return TxnOutcome::Retry("foreign write detected; transaction aborted".into());
        }
        // Delivery failures: the transaction cannot commit.
        if let Some(Some(Err(message))) = results.iter().find(|r| matches!(r, Some(Err(_)))) {
            let message = format!("delivery failed: {message}");
            if self.writer.delivery_timed_out() {
                // A produce request timed out: it may still reach the broker (see
                // `needs_new_producer`). Nothing was committed, so nothing is in doubt.
                self.break_producer(message.clone(), Vec::new());
            } else {
                self.abort_and_rewind();
            }
            return TxnOutcome::Retry(message);
        }
        // After a successful flush every record has its report; one missing would leave a hole
        // in the offset map, so never commit then.
        if results.len() < self.next_slot || results[..self.next_slot].iter().any(Option::is_none) {
            self.abort_and_rewind();
            return TxnOutcome::Retry("a delivery report is missing after flush".into());
        }
        if std::mem::take(&mut self.refused) {
            self.abort_and_rewind();
            return TxnOutcome::Retry("the transaction refused a record; aborted".into());
        }
        if let Some(message) = state_refused {
            self.abort_and_rewind();
            return TxnOutcome::Retry(message);
        }
        match landing {
            Landing::AsPredicted | Landing::Foreign(_) => {} // foreign: handled above
            Landing::NoMarkers => {
                // librdkafka's mock cluster writes no commit markers: learned once, then
                // predicted without them. The transaction's state records assumed a marker, so
                // it is aborted and its records mirrored again.
                self.markers = Some(false);
                self.abort_and_rewind();
                return TxnOutcome::Again;
            }
            Landing::Unknown => {
                self.abort_and_rewind();
                return TxnOutcome::Retry("the destination offset of a partition is unknown".into());
            }
        }
        // `scripts/chaos` freezes the destination broker on this line, to time out a commit
        // that the broker may still carry out (a commit in doubt, see `recover`).
        tracing::trace!(mirror = %self.config.mirror, records = self.next_slot, "sending EndTxn (commit)");
        match self.writer.commit(self.config.transaction_timeout) {
            Ok(()) => {}
            // The commit was sent: if it timed out, it may still have committed.
            Err(e) => return self.after_txn_error("commit", e, progress),
        }
        self.in_txn = false;
        // Where a transaction's time goes: filling (consume + send), flushing data and state, and
        // committing. `RUST_LOG=kmirror::data_path=trace` when tuning.
        tracing::trace!(
            mirror = %self.config.mirror,
            records = self.next_slot,
            bytes = self.txn_bytes,
            fill_ms = (started - self.txn_started).as_secs_f64() * 1e3,
            flush_ms = flushed.as_secs_f64() * 1e3,
            commit_ms = (started.elapsed() - flushed).as_secs_f64() * 1e3,
            "transaction committed"
        );
        // Our commit marker takes the offset right after our last record (none on a cluster
        // that writes no markers).
        let marker = i64::from(self.markers != Some(false));
        for p in &progress {
            if let Some(part) = self.parts.get_mut(&(p.topic.clone(), p.partition)) {
                part.committed_next_source = Some(p.next_source_offset);
                part.committed_epoch = p.source_leader_epoch;
                part.committed_destination_end = p.destination_end_offset;
                part.expected_next_destination = Some(p.destination_end_offset + marker);
                part.after_commit = true;
            }
        }
        for part in self.parts.values_mut() {
            part.pending.clear();
        }
        if !progress.is_empty() {
            self.emit(PipeEvent::Committed(progress));
        }
        TxnOutcome::Committed
    }

    /// The progress of every partition with records in the open transaction, with destination
    /// offsets as predicted: consecutive from the partition's expected next offset.
    pub(super) fn predicted_progress(
        &self,
    ) -> Result<Vec<PartitionProgress>, crate::domain::offset_map::OffsetMapError> {
        let mut progress = Vec::new();
        for (key, part) in &self.parts {
            let Some(last) = part.pending.last() else { continue };
            // Unknown only when the partition's first delivery failed: that aborts the
            // transaction before anything commits (see `check_landing`).
            let Some(start) = part.expected_next_destination else { continue };
            let mut builder = RunBuilder::new();
            for (i, p) in part.pending.iter().enumerate() {
                // Source offsets out of order would be a consumer bug; never commit a wrong map.
                builder.push(p.source_offset, start + i as i64)?;
            }
            progress.push(PartitionProgress {
                topic: key.0.clone(),
                partition: key.1,
                next_source_offset: last.source_offset + 1,
                source_leader_epoch: last.epoch.or(part.committed_epoch),
                destination_end_offset: start + part.pending.len() as i64,
                last_record_timestamp: last.timestamp,
                records: part.pending.len() as u64,
                bytes: part.pending.iter().map(|p| p.bytes).sum(),
                runs: builder.finish(),
            });
        }
        Ok(progress)
    }

    /// Compares where every record of the open transaction landed with where it was predicted
    /// to land. Learns whether the destination writes commit markers (real Kafka always does).
    pub(super) fn check_landing(&mut self, results: &[Delivered]) -> Landing {
        let mut foreign = Vec::new();
        let mut no_markers = false;
        let mut unknown = false;
        for (key, part) in &self.parts {
            if part.pending.is_empty() {
                continue;
            }
            let landed = |i: usize| match results.get(part.pending[i].slot) {
                Some(Some(Ok(d))) => Some(*d),
                _ => None,
            };
            // Judge the records that landed, up to the first one refused or unreported (the
            // transaction then aborts anyway, and librdkafka fails the rest of it): a
            // foreign writer shows there as well, and the partition fails at once.
            let landed_count = (0..part.pending.len()).take_while(|&i| landed(i).is_some()).count();
            if landed_count == 0 {
                continue;
            }
            let Some(expected) = part.expected_next_destination else {
                unknown = true;
                continue;
            };
            let mismatch = (0..landed_count).find(|&i| landed(i) != Some(expected + i as i64));
            let Some(i) = mismatch else {
                if part.after_commit && self.markers.is_none() {
                    self.markers = Some(true);
                }
                continue;
            };
            // Right after our own commit, a cluster that writes no markers (librdkafka's mock)
            // lands everything one earlier than predicted.
            if part.after_commit
                && self.markers.is_none()
                && landed_count == part.pending.len()
                && (0..part.pending.len()).all(|i| landed(i) == Some(expected - 1 + i as i64))
            {
                no_markers = true;
                continue;
            }
            foreign.push((key.clone(), expected + i as i64, landed(i).unwrap_or(-1)));
        }
        if !foreign.is_empty() {
            Landing::Foreign(foreign)
        } else if unknown {
            Landing::Unknown
        } else if no_markers {
            Landing::NoMarkers
        } else {
            Landing::AsPredicted
        }
    }

    /// Handles a failed flush, commit or other transactional call. `in_doubt` is the progress of a
    /// transaction whose commit was sent (empty otherwise).
    pub(super) fn after_txn_error(&mut self, what: &str, e: TxnError, in_doubt: Vec<PartitionProgress>) -> TxnOutcome {
        let message = format!("{what}: {e}");
        match txn_error_action(e.kind) {
            // A fatal producer error ends this pipe. It usually means another writer with the
            // same transactional id took over; re-initialising here would fence that writer back
            // and the two would take turns duplicating data. The engine decides: it restarts the
            // pipe only when its own state writer proves it is still the owner.
            TxnErrorAction::Fenced => TxnOutcome::Fenced(message),
            TxnErrorAction::NewProducer => {
                self.break_producer(message.clone(), in_doubt);
                TxnOutcome::Retry(message)
            }
            TxnErrorAction::AbortAndRetry => {
                self.abort_and_rewind();
                TxnOutcome::Retry(message)
            }
        }
    }

    /// Gives up on the producer after a transactional request of it timed out (see
    /// [`needs_new_producer`]): no abort, no further transaction on it. `recover` replaces it
    /// before anything else is mirrored; until then the consumer stays where it is (the rewind
    /// needs the destination ends after the old transaction is resolved).
    pub(super) fn break_producer(&mut self, why: String, in_doubt: Vec<PartitionProgress>) {
        tracing::warn!(
            mirror = %self.config.mirror,
            error = %why,
            commit_in_doubt = !in_doubt.is_empty(),
            "transactional request timed out: the producer is re-created (epoch bump) before the next transaction"
        );
        // Forget locally what the old producer still holds; its requests already on their way
        // are fenced by the replacement's init.
        self.writer.purge();
        self.in_txn = false;
        match &mut self.broken {
            // A second timeout while recovering: a doubt, if any, stays.
            Some(b) => {
                b.why = why;
                b.replaced = false;
                if b.in_doubt.is_empty() {
                    b.in_doubt = in_doubt;
                }
            }
            None => self.broken = Some(Broken { why, in_doubt, replaced: false }),
        }
    }

    /// Replaces a broken producer (see `break_producer`): a new producer with the same
    /// transactional id, whose init bumps the epoch (every request of the old one still on its
    /// way is refused from then on) and completes the old transaction. Then learns whether a
    /// commit in doubt happened, reports it if so, and rewinds every partition to its committed
    /// position. An error leaves the pipe broken, to be retried ([`PipeError::InDoubt`]), unless
    /// the old producer was fenced meanwhile ([`PipeError::Fenced`]: the pipe is done).
    pub(super) fn recover(&mut self) -> Result<(), PipeError> {
        let Some(broken) = &self.broken else { return Ok(()) };
        if self.fenced {
            // Another writer took over: re-initialising would fence it back.
            self.broken = None;
            return Ok(());
        }
        let why = broken.why.clone();
        if !broken.replaced
            && let Some(fatal) = self.writer.fatal_error()
        {
            // The old producer learned that another writer with the same transactional id took
            // over (fenced): a new init would fence that writer back. The engine decides, as for
            // any fatal error (see `after_txn_error`).
            self.broken = None;
            let message = format!("after a timeout ({why}): {fatal}");
            self.on_fenced(message.clone());
            return Err(PipeError::Fenced(message));
        }
        if !broken.replaced {
            self.recreate_producer().map_err(|e| PipeError::InDoubt(format!("after a timeout ({why}): {e}")))?;
            if let Some(b) = &mut self.broken {
                b.replaced = true;
            }
        }
        let in_doubt = self.broken.as_ref().map(|b| b.in_doubt.clone()).unwrap_or_default();
        let committed = if in_doubt.is_empty() {
            false
        } else {
            self.txn_committed(&in_doubt).map_err(|e| PipeError::InDoubt(format!("after a timeout ({why}): {e}")))?
        };
        tracing::warn!(
            mirror = %self.config.mirror,
            after = %why,
            outcome = if in_doubt.is_empty() {
                "aborted"
            } else if committed {
                "committed (commit in doubt)"
            } else {
                "aborted (commit in doubt)"
            },
            "producer re-created after a timed-out transactional request; resuming from the committed positions"
        );
        self.broken = None;
        // The replacement's init fenced every other writer with this transactional id: before
        // anything is copied again, the loop checks from the ends this data path committed (the
        // commit in doubt included when it committed) that none of them committed meanwhile
        // (`verify_no_other_writer`). An earlier check still pending keeps its older start.
        let ends: HashMap<Key, i64> = if committed {
            in_doubt.iter().map(|p| ((p.topic.clone(), p.partition), p.destination_end_offset)).collect()
        } else {
            HashMap::new()
        };
        for (key, part) in &self.parts {
            let from = ends.get(key).copied().unwrap_or(part.committed_destination_end);
            self.unverified.entry(key.clone()).or_insert(from);
        }
        if committed {
            let mut progress = Vec::with_capacity(in_doubt.len());
            for p in in_doubt {
                // Partitions leave the pipe only after `handle` recovered, so all are still here.
                let Some(part) = self.parts.get_mut(&(p.topic.clone(), p.partition)) else { continue };
                part.committed_next_source = Some(p.next_source_offset);
                part.committed_epoch = p.source_leader_epoch;
                part.committed_destination_end = p.destination_end_offset;
                progress.push(p);
            }
            if !progress.is_empty() {
                self.emit(PipeEvent::Committed(progress));
            }
        }
        self.rewind_all();
        Ok(())
    }

    /// Before a data path whose producer was re-created copies anything again: whether another
    /// writer committed records to its partitions after its last commit (after the commit in
    /// doubt, when that one committed). Stops the data path as fenced when one did.
    ///
    /// The replacement producer's init fenced every other writer with this transactional id. If
    /// one of them committed meanwhile (this slot's new owner, when this process is the one left
    /// behind, or a writer left behind by this one's previous incarnation), the positions held
    /// here are behind the destination: resuming from them would copy those records a second
    /// time, with the destination ends read afresh so that no append would look foreign. The
    /// data path stops instead, and the engine decides from the committed state.
    ///
    /// The check runs in the loop, before the next fill, and not in `recover` itself: a release
    /// (a pause, a failover) must not fail on a read that only matters to the partitions that
    /// stay; at most it waits for an attempt already under way (the transaction timeout per
    /// topic). A read that fails is retried with backoff like a replacement that failed; nothing
    /// is copied meanwhile.
    pub(super) fn verify_no_other_writer(&mut self) -> Result<(), PipeError> {
        self.unverified.retain(|key, _| self.parts.contains_key(key));
        if self.unverified.is_empty() {
            return Ok(());
        }
        let from: Vec<(Key, i64)> = self.unverified.iter().map(|(k, o)| (k.clone(), *o)).collect();
        let found = self.writer.first_committed_from(&from, self.config.transaction_timeout).map_err(|e| {
            PipeError::InDoubt(format!("checking for another writer's commits after a re-created producer: {e}"))
        })?;
        self.unverified.clear();
        let Some(((topic, partition), at)) = found.into_iter().min() else { return Ok(()) };
        tracing::error!(
            mirror = %self.config.mirror,
            %topic,
            partition,
            offset = at,
            "records this data path did not write were committed after its last commit; it stops"
        );
        let message = format!(
            "records this data path did not write were committed to {topic}-{partition} at offset {at}, after its \
             last commit: another writer with its transactional id took over (or a client wrote to the mirror \
             topic); it stops so that nothing is copied twice"
        );
        self.on_fenced(message.clone());
        Err(PipeError::Fenced(message))
    }

    /// Whether the transaction of `in_doubt` committed, once the replacement producer's init has
    /// completed it: the first record it wrote to one of its partitions is visible to a
    /// `read_committed` reader, or skipped (aborted). A transaction is atomic, so one partition
    /// tells.
    pub(super) fn txn_committed(&self, in_doubt: &[PartitionProgress]) -> Result<bool, ClientError> {
        let Some(p) = in_doubt.iter().find(|p| p.records > 0) else { return Ok(false) };
        let first = p.destination_end_offset - p.records as i64;
        self.writer.committed_at(&p.topic, p.partition, first, self.config.transaction_timeout)
    }

    /// A new producer with the same transactional id; its init bumps the producer epoch and aborts
    /// whatever the old one left open. Used for the deliberate fence of a stop and to replace a
    /// producer whose transactional request timed out (`recover`).
    pub(super) fn recreate_producer(&mut self) -> Result<(), TxnError> {
        self.writer.replace()?;
        self.in_txn = false;
        // The new client creates its topics afresh: settle their codecs again.
        for part in self.parts.values_mut() {
            part.codec_settled = false;
        }
        Ok(())
    }

    /// Waits until every record sent has its delivery reported.
    pub(super) fn flush_sent(&self) -> Result<(), TxnError> {
        self.writer.flush(self.txn_bytes, self.config.transaction_timeout)
    }

    /// Aborts the open transaction and rewinds every partition to its committed position.
    pub(super) fn abort_and_rewind(&mut self) {
        if self.in_txn {
            if let Err(e) = self.writer.abort(self.config.transaction_timeout) {
                if abort_failure_needs_new_producer(e.kind) {
                    // The abort may still be on its way: a new producer completes it (nothing of
                    // this transaction was committed) and rewinds when it is in place.
                    self.break_producer(format!("abort: {e}"), Vec::new());
                    return;
                }
                // The transaction's outcome is now unknown to this producer: stop and let the
                // engine restart the data path from the committed state.
                self.on_fenced(format!("abort failed: {e}"));
                return;
            }
            self.in_txn = false;
        }
        self.rewind_all();
    }

    pub(super) fn rewind_all(&mut self) {
        let keys: Vec<Key> = self.parts.keys().cloned().collect();
        if keys.is_empty() {
            return;
        }
        // The aborted records (and the abort marker) took destination offsets: learn the new end.
        let ends: HashMap<Key, i64> = match self.writer.end_offsets(&keys) {
            Ok(ends) => ends,
            Err(e) => {
                tracing::warn!(mirror = %self.config.mirror, error = %e, "cannot read destination ends after abort");
                HashMap::new()
            }
        };
        self.incremental_unassign(&keys);
        let mut positions = Vec::with_capacity(keys.len());
        for key in &keys {
            let Some(part) = self.parts.get_mut(key) else { continue };
            part.pending.clear();
            part.expected_next_destination = ends.get(key).copied();
            part.after_commit = false;
            part.marker_may_follow = true;
            positions.push(PartitionPosition {
                topic: key.0.clone(),
                partition: key.1,
                offset: part.committed_next_source.unwrap_or(-2),
                leader_epoch: part.committed_epoch,
            });
        }
        if let Err(e) = self.incremental_assign(&positions) {
            tracing::warn!(mirror = %self.config.mirror, error = %e, "re-assign after abort failed");
        }
    }

    /// Aborts the open transaction without rewinding; a failed abort is only logged (the caller
    /// is about to shut down or to re-initialise the producer, which aborts it anyway).
    pub(super) fn abort_quietly(&mut self) {
        if self.in_txn {
            if let Err(e) = self.writer.abort(self.config.transaction_timeout) {
                tracing::debug!(mirror = %self.config.mirror, error = %e, "abort");
            }
            self.in_txn = false;
        }
    }

    pub(super) fn unassign(&mut self, partitions: &[Key], finish: Finish) -> Result<Vec<FinalPosition>, PipeError> {
        if self.in_txn {
            match finish {
                Finish::Commit => match self.commit() {
                    TxnOutcome::Committed => {}
                    TxnOutcome::Again => {
                        tracing::info!(mirror = %self.config.mirror, "commit before unassign aborted; the records are mirrored again")
                    }
                    TxnOutcome::Retry(m) => {
                        tracing::info!(mirror = %self.config.mirror, "commit before unassign failed, aborted: {m}")
                    }
                    TxnOutcome::Fenced(m) => {
                        self.on_fenced(m.clone());
                        return Err(PipeError::Fenced(m));
                    }
                },
                Finish::Abort => self.abort_and_rewind(),
            }
        }
        // A commit (or abort) that just timed out left the producer broken: a commit in doubt may
        // have committed, so the final positions wait for its outcome (see `recover`).
        self.recover()?;
        let mut out = Vec::new();
        let mut removed = Vec::new();
        for key in partitions {
            self.unverified.remove(key);
            if let Some(part) = self.parts.remove(key) {
                out.push(FinalPosition {
                    topic: key.0.clone(),
                    partition: key.1,
                    next_source_offset: part.committed_next_source,
                    source_leader_epoch: part.committed_epoch,
                    destination_end_offset: part.committed_destination_end,
                });
                removed.push(key.clone());
            }
        }
        if !removed.is_empty() {
            self.incremental_unassign(&removed);
        }
        Ok(out)
    }

    /// Fences, unless another instance already fenced this writer (then says so).
    pub(super) fn fence_checked(&mut self) -> Result<(), PipeError> {
        if self.fenced {
            return Err(PipeError::Fenced("this writer was fenced by another kmirror instance".to_string()));
        }
        self.fence().map_err(|e| PipeError::Fence(e.to_string()))
    }

    pub(super) fn fence(&mut self) -> Result<(), TxnError> {
        // Abort first (without rewinding yet): the rewind reads destination ends, which must
        // include the abort markers.
        let aborted = self.in_txn;
        self.abort_quietly();
        // A new init_transactions on the same id bumps the producer epoch: every earlier
        // incarnation (a zombie kmirror, an in-flight request) is fenced from now on. With no
        // transaction open nothing was consumed past the committed positions, so no rewind.
        self.recreate_producer()?;
        if aborted {
            self.rewind_all();
        }
        Ok(())
    }
}
