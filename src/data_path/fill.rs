//! Filling a transaction: the records read from the source, sent to the destination, until the
//! transaction is due (size, age, or caught up), and the per-partition faults found on the way.

use super::*;

impl<S: SourceFetcher, W: TransactionalWriter> Pipe<S, W> {
    /// Bytes of the open transaction's data records sent but not yet reported delivered.
    pub(super) fn unacked_bytes(&self) -> usize {
        self.txn_bytes.saturating_sub(self.writer.reported_bytes())
    }

    pub(super) fn unacked_limit(&self) -> usize {
        unacked_limit(self.parts.len(), self.config.commit_max_bytes)
    }

    pub(super) fn should_commit(&self) -> bool {
        self.txn_started.elapsed() >= self.config.commit_interval || self.txn_bytes >= self.config.commit_max_bytes
    }

    /// Whether the open transaction may end before the commit interval because the mirror keeps
    /// up: once the previous transaction stopped taking records at least `early_commit_interval` ago.
    /// Spacing the ends (not the transactions' ages) keeps the bound of at most one transaction
    /// per `early_commit_interval` (and so the offset map's growth), while the time the previous
    /// transaction spent flushing and committing counts towards it: with the age rule every
    /// record also waited out the previous flush and commit on top of a full 50 ms (none-8:
    /// transactions ~50 ms filling + ~11 ms flushing + ~2 ms committing; none-64: + ~18 ms).
    ///
    /// The open transaction is at least half that old, though: when flushes slow down (a busy
    /// destination) transactions must not shrink to one per flush, which would only add
    /// per-transaction work (a produce request per partition, AddPartitionsToTxn, EndTxn and
    /// markers) where there is least room for it.
    pub(super) fn may_end_early(&self, now: Instant) -> bool {
        early_end_allowed(
            now.saturating_duration_since(self.last_fill_end),
            now.saturating_duration_since(self.txn_started),
            self.config.early_commit_interval,
        )
    }

    /// Whether every partition with records in the open transaction is within one transaction's
    /// worth of the end its last fetch reported (see `near_fetched_end`).
    pub(super) fn near_fetched_ends(&self) -> bool {
        self.parts.iter().all(|((topic, partition), part)| match part.pending.last() {
            None => true,
            Some(last) => {
                near_fetched_end(last.source_offset, part.pending.len(), self.source.fetched_end(topic, *partition))
            }
        })
    }

    /// Consumes and forwards records until it is time to commit. True when it stopped because
    /// the consumer had nothing more for a moment (caught up), because the transaction refuses
    /// more records, or because a command waits (`held`): either way, end the transaction now.
    pub(super) fn fill(&mut self, commands: &Receiver<PipeCommand>) -> bool {
        let deadline = if self.in_txn {
            self.txn_started + self.config.commit_interval
        } else {
            Instant::now() + self.config.commit_interval
        };
        loop {
            let now = Instant::now();
            if now >= deadline || (self.in_txn && self.txn_bytes >= self.config.commit_max_bytes) {
                return false;
            }
            // A command does not wait for the transaction to fill up (a second under a backlog):
            // the transaction commits now and the command runs next, just as it did after a
            // full transaction. Committing (not handing the open transaction to the command,
            // which for a stop or a takeover would abort it) keeps what was read: a failover
            // loses no more than before, only sooner.
            if now.saturating_duration_since(self.last_command_check) >= COMMAND_CHECK_EVERY {
                self.last_command_check = now;
                match commands.try_recv() {
                    Ok(cmd) => {
                        self.held = Some(cmd);
                        return true;
                    }
                    Err(std::sync::mpsc::TryRecvError::Disconnected) => return false,
                    Err(std::sync::mpsc::TryRecvError::Empty) => {}
                }
            }
            // Under a backlog the consumer hands over records far faster than the destination
            // acknowledges them. Without a bound a transaction took everything it could get (up
            // to `commit_max_bytes`) and then waited for all of it, and every record in it
            // became visible only at the end of that wait: a 64 MiB transaction flushed at
            // 100 MiB/s (2 cores under load) kept its first records invisible for ~1 s. Past
            // `MAX_UNACKED_BYTES` the backlog waits in the consumer instead, the transaction
            // still ends on time, and its flush is short. The producer keeps its in-flight
            // window full either way, so throughput does not change.
            if self.in_txn && self.unacked_bytes() > self.unacked_limit() {
                let enough = self.txn_bytes - self.unacked_limit();
                self.writer.wait_reported(enough, (deadline - now).min(MAX_PARK));
                continue;
            }
            // The mirror's replication throttle is in debt: end the open transaction (a throttled
            // mirror holds no transaction open while it waits, so the wait never approaches the
            // transaction timeout and what was copied becomes visible), then wait in short steps
            // that keep answering commands. The consumer's prefetch fills up meanwhile and its
            // fetches stop, so the source's traffic follows the same rate.
            let pause = self.config.throttle.delay(now);
            if !pause.is_zero() {
                if self.in_txn {
                    return true;
                }
                let step = pause.min(MAX_PARK).min(deadline - now);
                std::thread::sleep(step);
                self.config.throttle.waited_for(step);
                continue;
            }
            // A transaction that may end early (see `may_end_early`) ends once every partition it
            // holds records of is within one transaction's worth of where the broker's last fetch
            // response said it ended: the mirror keeps up with the source. Under a steady load the
            // consumer is never empty for long (so the idle test below never fires), and a
            // transaction that waited for the interval kept its first records invisible for all
            // of it (none-8 at 64k records/s: p50 192 ms with the 250 ms interval, 98-115 ms
            // with 100 ms). Under a backlog the fetched end is far ahead and transactions still
            // grow to the interval, so throughput keeps its large transactions.
            // Cheapest test first, all against the loop's `now`: this runs once per record.
            if self.in_txn
                && now.saturating_duration_since(self.last_end_check) >= END_CHECK_EVERY
                && self.may_end_early(now)
            {
                self.last_end_check = now;
                if self.near_fetched_ends() {
                    return true;
                }
            }
            // Inside a transaction, a consumer with nothing more to give for a moment means the
            // mirror has caught up: commit now instead of waiting out the interval, so a lightly
            // loaded mirror shows records within milliseconds. Under a backlog the consumer's
            // prefetch queue is never empty and transactions grow to the interval or byte cap.
            let idle = if self.in_txn { CAUGHT_UP_WAIT } else { Duration::from_millis(50) };
            let wait = (deadline - now).min(idle);
            // The record borrows the source: what needs the whole pipe waits until it is dropped.
            let taken = match self.source.poll(wait) {
                // Caught up, but the previous transaction ended too recently: keep this one open a
                // little longer. Every transaction adds one offset-map run per partition it touched
                // (the commit marker takes an offset), in memory and in the state topic, so the
                // rate of transactions is bounded (at most 1 / `early_commit_interval`).
                None if self.in_txn && !self.may_end_early(Instant::now()) => continue,
                None => {
                    return true; // caught up (commit what is open) or idle (back to the commands)
                }
                Some(Err(e)) => Taken::FetchFailed(e),
                Some(Ok(record)) => {
                    let key = (record.topic().to_string(), record.partition());
                    let Some(part) = self.parts.get_mut(&key) else {
                        continue; // a prefetched record of a partition that just left
                    };
                    if !part.codec_settled {
                        part.codec_settled = true;
                        self.writer.settle_codec(record.topic(), record.codec());
                    }
                    let mut began = Ok(());
                    if !self.in_txn {
                        began = self.writer.begin();
                        if began.is_ok() {
                            self.in_txn = true;
                            self.refused = false;
                            self.txn_started = Instant::now();
                            self.txn_bytes = 0;
                            self.next_slot = 0;
                            self.writer.reset_deliveries();
                        }
                    }
                    match began {
                        // The record just polled must not be skipped: rewind to committed.
                        Err(e) => Taken::BeginFailed(e),
                        Ok(()) => {
                            let slot = self.next_slot;
                            let pending = Pending {
                                source_offset: record.offset(),
                                epoch: record.leader_epoch(),
                                timestamp: record.timestamp(),
                                bytes: record.bytes() as u64,
                                slot,
                            };
                            match self.writer.send(&record, slot) {
                                Ok(()) => {
                                    self.next_slot += 1;
                                    part.pending.push(pending);
                                    self.txn_bytes += pending.bytes as usize;
                                    // The loop's `now` (read before the poll) is fine for the
                                    // bucket: an earlier instant only refills less. Without a rate
                                    // this is one atomic load.
                                    self.config.throttle.take(pending.bytes, now);
                                    continue;
                                }
                                // End the transaction now: the commit finds the refused record's
                                // failed delivery, aborts and rewinds every partition, so this
                                // record is consumed again. It aborts even when no delivery
                                // failed: the record just read was not sent, and committing the
                                // rest would move past it.
                                Err(SendError::TransactionRefuses) => {
                                    self.refused = true;
                                    return true;
                                }
                                Err(SendError::Rejected(e)) => {
                                    Taken::Rejected { key, source_offset: pending.source_offset, e }
                                }
                            }
                        }
                    }
                }
            };
            match taken {
                Taken::FetchFailed(e) => self.on_fetch_error(e),
                Taken::BeginFailed(e) if e.kind == TxnErrorKind::Fenced => {
                    self.on_fenced(format!("begin transaction: {e}"));
                    return false;
                }
                Taken::BeginFailed(e) => {
                    self.emit(PipeEvent::Retrying { attempt: 0, message: format!("begin transaction: {e}") });
                    self.rewind_all();
                    return false;
                }
                Taken::Rejected { key: (topic, partition), source_offset, e } => {
                    // Unsendable record (too large for the producer, etc.): the partition cannot
                    // progress without an operator. Its slot was never sent, so the commit waits
                    // for no report of it.
                    let message = format!("cannot send record at source offset {source_offset}: {e}");
                    self.fail_partition(&topic, partition, PartitionFault::DestinationRejected { message });
                }
            }
        }
    }

    pub(super) fn on_fetch_error(&mut self, e: FetchError) {
        let text = match e {
            FetchError::Refused { .. } => {
                // The source refused the credentials or the TLS handshake: the client keeps
                // reconnecting, and the data path says why it is not mirroring rather than
                // looking idle (or unreachable).
                let message = format!("{e}; retrying");
                tracing::warn!(mirror = %self.config.mirror, "{message}");
                self.emit(PipeEvent::Retrying { attempt: 0, message });
                return;
            }
            FetchError::Transient(text) => {
                tracing::debug!(mirror = %self.config.mirror, error = %text, "transient source consumer error");
                return;
            }
            // The client does not say which partition (rdkafka 0.39 drops it), so every committed
            // position is compared with the source log's bounds.
            FetchError::OutOfLog(text) => text,
        };
        let keys: Vec<Key> = self.parts.keys().cloned().collect();
        let bounds = match self.source.log_bounds(&keys) {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!(mirror = %self.config.mirror, error = %text, check = %e, "source consumer error; cannot check positions");
                return;
            }
        };
        for (key, (start, end)) in keys.iter().zip(bounds) {
            let Some(part) = self.parts.get(key) else { continue };
            let Some(next) = part.committed_next_source else { continue };
            if next < start || next > end {
                let message = format!(
                    "source partition {}-{} now holds offsets [{start}, {end}) but the next offset to mirror is {next} ({text})",
                    key.0, key.1
                );
                self.fail_partition(&key.0, key.1, PartitionFault::SourceTruncated { message });
            }
        }
    }
    /// Drops a partition from the pipe after a fault. Its uncommitted records stay in the open
    /// transaction only if it is committed; to keep "nothing of a failed partition is visible
    /// past its committed position" we abort and rewind everyone.
    pub(super) fn fail_partition(&mut self, topic: &str, partition: i32, fault: PartitionFault) {
        let key = (topic.to_string(), partition);
        if self.in_txn && self.parts.get(&key).is_some_and(|p| !p.pending.is_empty()) {
            self.abort_and_rewind();
        }
        if self.parts.remove(&key).is_some() {
            self.incremental_unassign(std::slice::from_ref(&key));
            self.emit(PipeEvent::PartitionFailed { topic: topic.to_string(), partition, fault });
        }
    }
}

/// What `fill` took from a poll that needs the whole pipe once the record is dropped.
enum Taken {
    FetchFailed(FetchError),
    BeginFailed(TxnError),
    Rejected { key: Key, source_offset: i64, e: String },
}
