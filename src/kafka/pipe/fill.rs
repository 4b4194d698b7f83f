//! Filling a transaction: the records read from the source, sent to the destination, until the
//! transaction is due (size, age, or caught up), and the per-partition faults found on the way.

use super::*;

impl Pipe {
    /// Bytes of the open transaction's data records sent but not yet reported delivered.
    pub(super) fn unacked_bytes(&self) -> usize {
        self.txn_bytes.saturating_sub(self.producer.context().log.reported_bytes.load(Ordering::Relaxed))
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
                near_fetched_end(last.source_offset, part.pending.len(), fetched_end(&self.consumer, topic, *partition))
            }
        })
    }

    /// Consumes and forwards records until it is time to commit. True when it stopped because
    /// the consumer had nothing more for a moment (caught up), because the transaction refuses
    /// more records, or because a command waits (`held`): either way, end the transaction now.
    // rdkafka's `send` hands a refused record back by value (a large `Err`).
    #[allow(clippy::result_large_err)]
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
                self.producer.context().log.wait_reported(enough, (deadline - now).min(MAX_PARK));
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
            match self.consumer.poll(wait) {
                // Caught up, but the previous transaction ended too recently: keep this one open a
                // little longer. Every transaction adds one offset-map run per partition it touched
                // (the commit marker takes an offset), in memory and in the state topic, so the
                // rate of transactions is bounded (at most 1 / `early_commit_interval`).
                None if self.in_txn && !self.may_end_early(Instant::now()) => {}
                None => {
                    return true; // caught up (commit what is open) or idle (back to the commands)
                }
                Some(Ok(msg)) => {
                    let key = (msg.topic().to_string(), msg.partition());
                    let Some(part) = self.parts.get_mut(&key) else {
                        continue; // a prefetched record of a partition that just left
                    };
                    if !part.codec_settled {
                        part.codec_settled = true;
                        self.producer.settle_codec(
                            msg.topic(),
                            message_codec(&msg),
                            &self.config.mirror,
                            self.config.slot,
                        );
                    }
                    if !self.in_txn {
                        if let Err(e) = self.producer.begin_transaction() {
                            // The record just polled must not be skipped: rewind to committed.
                            if matches!(&e, RdError::Transaction(te) if te.is_fatal()) {
                                self.on_fenced(format!("begin transaction: {e}"));
                                return false;
                            }
                            self.emit(PipeEvent::Retrying { attempt: 0, message: format!("begin transaction: {e}") });
                            self.rewind_all();
                            return false;
                        }
                        self.in_txn = true;
                        self.txn_started = Instant::now();
                        self.txn_bytes = 0;
                        self.next_slot = 0;
                        self.producer.context().log.results.lock().unwrap_or_else(|p| p.into_inner()).clear();
                        self.producer.context().log.reported_bytes.store(0, Ordering::Relaxed);
                        self.producer.context().log.timed_out.store(false, Ordering::Relaxed);
                    }
                    let slot = self.next_slot;
                    self.next_slot += 1;
                    let bytes = record_bytes(&msg) as u64;
                    let timestamp = msg.timestamp().to_millis();
                    let epoch = message_leader_epoch(&msg);
                    let source_offset = msg.offset();
                    let mut send_error = None;
                    let mut txn_refuses = false;
                    let mut record: BaseRecord<'_, [u8], [u8], usize> =
                        BaseRecord::with_opaque_to(msg.topic(), slot).partition(msg.partition());
                    if let Some(k) = msg.key() {
                        record = record.key(k);
                    }
                    if let Some(v) = msg.payload() {
                        record = record.payload(v);
                    }
                    if let Some(ts) = timestamp {
                        record = record.timestamp(ts);
                    }
                    if let Some(h) = msg.headers() {
                        record = record.headers(h.detach());
                    }
                    let producer = &self.producer;
                    match send_with_backpressure(|r| producer.send(r), || std::thread::sleep(SERVE_STEP), record) {
                        Ok(()) => {}
                        // The transaction took an abortable error (a record of it was refused)
                        // and takes no more records: not this record's fault.
                        Err(e) if e.rdkafka_error_code() == Some(RDKafkaErrorCode::State) => txn_refuses = true,
                        Err(e) => {
                            send_error = Some(format!("cannot send record at source offset {source_offset}: {e}"))
                        }
                    }
                    drop(msg);
                    if txn_refuses {
                        // End the transaction now: the commit finds the refused record's failed
                        // delivery, aborts and rewinds every partition, so this record is
                        // consumed again.
                        self.next_slot -= 1;
                        return true;
                    }
                    if let Some(message) = send_error {
                        // Unsendable record (too large for the producer, etc.): the partition
                        // cannot progress without an operator. Its slot was never sent: free it,
                        // so the commit does not wait for a report that cannot come.
                        self.next_slot -= 1;
                        let (topic, partition) = key;
                        self.fail_partition(&topic, partition, PartitionFault::DestinationRejected { message });
                        continue;
                    }
                    if let Some(part) = self.parts.get_mut(&key) {
                        part.pending.push(Pending { source_offset, epoch, timestamp, bytes, slot });
                    }
                    self.txn_bytes += bytes as usize;
                    // The loop's `now` (read before the poll) is fine for the bucket: an earlier
                    // instant only refills less. Without a rate this is one atomic load.
                    self.config.throttle.take(bytes, now);
                }
                Some(Err(e)) => self.on_consumer_error(e),
            }
        }
    }

    pub(super) fn on_consumer_error(&mut self, e: RdError) {
        // rdkafka 0.39 drops the partition of a consumer error, so a truncation-class error is
        // attributed by comparing every committed position with the source log's bounds.
        let code = e.rdkafka_error_code();
        let text = e.to_string();
        let truncation = matches!(
            code,
            Some(RDKafkaErrorCode::OffsetOutOfRange)
                | Some(RDKafkaErrorCode::AutoOffsetReset)
                | Some(RDKafkaErrorCode::UnknownTopicOrPartition)
                | Some(RDKafkaErrorCode::UnknownTopic)
        );
        if let Some(what) = crate::kafka::admin::refusal_kind(code, &text) {
            // The source refused the credentials or the TLS handshake: librdkafka keeps
            // reconnecting, and the data path says why it is not mirroring rather than
            // looking idle (or unreachable).
            let message = format!(
                "the source refused the connection: {what} ({}); retrying",
                crate::kafka::client::scrub_secrets(&text)
            );
            tracing::warn!(mirror = %self.config.mirror, "{message}");
            self.emit(PipeEvent::Retrying { attempt: 0, message });
            return;
        }
        if !truncation {
            tracing::debug!(mirror = %self.config.mirror, error = %text, "transient source consumer error");
            return;
        }
        let keys: Vec<Key> = self.parts.keys().cloned().collect();
        let mut requests = Vec::with_capacity(keys.len() * 2);
        for (t, p) in &keys {
            requests.push((t.clone(), *p, OffsetSpec::Earliest));
        }
        let earliest = self.runtime.block_on(self.source_admin.list_offsets(&requests, IsolationLevel::ReadCommitted));
        for r in requests.iter_mut() {
            r.2 = OffsetSpec::Latest;
        }
        let latest = self.runtime.block_on(self.source_admin.list_offsets(&requests, IsolationLevel::ReadUncommitted));
        let (earliest, latest) = match (earliest, latest) {
            (Ok(e), Ok(l)) => (e, l),
            (Err(e), _) | (_, Err(e)) => {
                tracing::warn!(mirror = %self.config.mirror, error = %text, check = %e, "source consumer error; cannot check positions");
                return;
            }
        };
        for (i, key) in keys.iter().enumerate() {
            let Some(part) = self.parts.get(key) else { continue };
            let Some(next) = part.committed_next_source else { continue };
            let (start, end) = (earliest[i].offset, latest[i].offset);
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
