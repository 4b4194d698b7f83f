//! Sending and flushing for kmirror's transactional producers, without rdkafka's built-in waits.
//!
//! rdkafka 0.39's `BaseProducer::poll(timeout)` always runs until its timeout, and its `flush`
//! (also called first by `commit_transaction`) polls in 100 ms steps: every flush and every
//! commit took at least 100 ms, which capped a mirror at a few transactions per second and put
//! 200-400 ms into end-to-end latency. These helpers wait in 1 ms steps instead, while the
//! producer's own thread (a `ThreadedProducer`) serves the delivery reports.

use std::time::{Duration, Instant};

use rdkafka::error::{KafkaError as RdError, RDKafkaErrorCode};
use rdkafka::message::ToBytes;
use rdkafka::producer::BaseRecord;
use rdkafka::util::IntoOpaque;

/// One wait step while records are in flight: long enough to sleep, short enough not to matter.
pub(crate) const SERVE_STEP: Duration = Duration::from_millis(1);

/// Sends `record`, serving delivery reports while the producer queue is full (back-pressure).
pub(crate) fn send_with_backpressure<'a, K, V, D>(
    mut send: impl FnMut(BaseRecord<'a, K, V, D>) -> Result<(), (RdError, BaseRecord<'a, K, V, D>)>,
    mut serve: impl FnMut(),
    mut record: BaseRecord<'a, K, V, D>,
) -> Result<(), RdError>
where
    K: ToBytes + ?Sized,
    V: ToBytes + ?Sized,
    D: IntoOpaque,
{
    loop {
        match send(record) {
            Ok(()) => return Ok(()),
            Err((e, back)) if e.rdkafka_error_code() == Some(RDKafkaErrorCode::QueueFull) => {
                serve();
                record = back;
            }
            Err((e, _)) => return Err(e),
        }
    }
}

/// Waits until nothing is in flight (`in_flight` = rd_kafka_outq_len: queued and unacknowledged
/// records plus unserved delivery reports), calling `serve` between checks.
pub(crate) fn wait_delivered(
    in_flight: impl Fn() -> i32,
    mut serve: impl FnMut(),
    timeout: Duration,
) -> Result<(), RdError> {
    let deadline = Instant::now() + timeout;
    while in_flight() > 0 {
        if Instant::now() >= deadline {
            return Err(RdError::Flush(RDKafkaErrorCode::OperationTimedOut));
        }
        serve();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn waits_until_nothing_is_in_flight_and_times_out_otherwise() {
        let left = Cell::new(3);
        let served = Cell::new(0);
        wait_delivered(
            || left.get(),
            || {
                served.set(served.get() + 1);
                left.set(left.get() - 1);
            },
            Duration::from_secs(5),
        )
        .unwrap();
        assert_eq!(served.get(), 3);
        let e = wait_delivered(|| 1, || std::thread::sleep(SERVE_STEP), Duration::from_millis(20)).unwrap_err();
        assert_eq!(e.rdkafka_error_code(), Some(RDKafkaErrorCode::OperationTimedOut));
    }

    #[test]
    #[allow(clippy::result_large_err)] // the closures mirror rdkafka's `send`
    fn queue_full_is_retried_after_serving_and_other_errors_end_the_send() {
        let mut attempts = 0;
        let mut served = 0;
        let r = send_with_backpressure(
            |rec: BaseRecord<'_, [u8], [u8]>| {
                attempts += 1;
                if attempts < 3 { Err((RdError::MessageProduction(RDKafkaErrorCode::QueueFull), rec)) } else { Ok(()) }
            },
            || served += 1,
            BaseRecord::to("t"),
        );
        assert!(r.is_ok());
        assert_eq!((attempts, served), (3, 2));
        let r = send_with_backpressure(
            |rec: BaseRecord<'_, [u8], [u8]>| {
                Err((RdError::MessageProduction(RDKafkaErrorCode::MessageSizeTooLarge), rec))
            },
            || panic!("not served on a hard error"),
            BaseRecord::to("t"),
        );
        assert_eq!(r.unwrap_err().rdkafka_error_code(), Some(RDKafkaErrorCode::MessageSizeTooLarge));
    }
}
