//! A mirror's replication throttle (KIP-1279's `mirror.replication.throttled.rate`, applied by
//! each kmirror instance to its own data paths of the mirror, as the KIP applies it per broker).
//!
//! A token bucket of record bytes: the data paths take the bytes of every record they copy, and
//! a bucket in debt makes them wait. The bucket holds at most one second of the rate, so a mirror
//! idle for a while starts with a burst of at most one second's worth.
//!
//! Once in debt the data paths wait until the bucket is half full again, not just out of debt:
//! resuming at the first token would copy one record, fall into debt and end the transaction
//! again, turning a throttled mirror into one transaction (and one offset-map run per partition)
//! per record.
//!
//! Time is a parameter (an `Instant` the caller read), like everywhere in the domain.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The lowest rate accepted: below it a single large record would stall a partition for minutes.
pub const MIN_BYTES_PER_SEC: u64 = 1024;

/// Whether `rate` is an acceptable throttle (`None` is no throttle).
pub fn check_rate(rate: Option<u64>) -> Result<(), String> {
    match rate {
        Some(r) if r > 0 && r < MIN_BYTES_PER_SEC => Err(format!(
            "replication_throttle_bytes_per_sec must be at least {MIN_BYTES_PER_SEC} (or 0 / absent for no throttle), \
             got {r}"
        )),
        _ => Ok(()),
    }
}

/// The bucket itself: pure arithmetic over the instants it is given.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    rate: f64,
    tokens: f64,
    last: Instant,
    /// In debt since the last refill to half: wait for half a bucket before taking again.
    draining: bool,
}

impl TokenBucket {
    /// A full bucket for `bytes_per_sec`.
    #[must_use]
    pub fn new(bytes_per_sec: u64, now: Instant) -> TokenBucket {
        let rate = bytes_per_sec.max(1) as f64;
        TokenBucket { rate, tokens: rate, last: now, draining: false }
    }

    /// The bucket's size: one second of the rate.
    fn capacity(&self) -> f64 {
        self.rate
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = self.last.max(now);
        self.tokens = (self.tokens + elapsed * self.rate).min(self.capacity());
        if self.draining && self.tokens >= self.capacity() / 2.0 {
            self.draining = false;
        }
    }

    /// Takes `bytes` (the bucket may go into debt: a record is never split).
    pub fn take(&mut self, bytes: u64, now: Instant) {
        self.refill(now);
        self.tokens -= bytes as f64;
        if self.tokens < 0.0 {
            self.draining = true;
        }
    }

    /// How long to wait before taking more: zero when allowed now.
    pub fn delay(&mut self, now: Instant) -> Duration {
        self.refill(now);
        if !self.draining {
            return Duration::ZERO;
        }
        let missing = self.capacity() / 2.0 - self.tokens;
        Duration::from_secs_f64((missing / self.rate).max(0.001))
    }

    /// Changes the rate, keeping the debt (and capping the tokens at the new size).
    pub fn set_rate(&mut self, bytes_per_sec: u64, now: Instant) {
        self.refill(now);
        self.rate = bytes_per_sec.max(1) as f64;
        self.tokens = self.tokens.min(self.capacity());
        self.draining = self.draining && self.tokens < self.capacity() / 2.0;
    }
}

/// One mirror's throttle on this instance, shared by its slot data paths (threads) and changed
/// live when the mirror's definition changes. No rate: nothing is ever delayed.
#[derive(Debug, Default)]
pub struct Throttle {
    bucket: Mutex<Option<TokenBucket>>,
    rate: AtomicU64,
    /// Nanoseconds the data paths were told to wait, summed over them (a metric).
    waited_nanos: AtomicU64,
}

impl Throttle {
    #[must_use]
    pub fn new(bytes_per_sec: Option<u64>, now: Instant) -> Throttle {
        let t = Throttle::default();
        t.set_rate(bytes_per_sec, now);
        t
    }

    fn bucket(&self) -> std::sync::MutexGuard<'_, Option<TokenBucket>> {
        self.bucket.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Sets (or with `None` / 0 removes) the rate; effective at once.
    pub fn set_rate(&self, bytes_per_sec: Option<u64>, now: Instant) {
        let rate = bytes_per_sec.filter(|r| *r > 0);
        let mut b = self.bucket();
        match (rate, b.as_mut()) {
            (None, _) => *b = None,
            (Some(r), Some(bucket)) => bucket.set_rate(r, now),
            (Some(r), None) => *b = Some(TokenBucket::new(r, now)),
        }
        self.rate.store(rate.unwrap_or(0), Ordering::Relaxed);
    }

    /// The rate in bytes per second, if any.
    pub fn rate(&self) -> Option<u64> {
        Some(self.rate.load(Ordering::Relaxed)).filter(|r| *r > 0)
    }

    /// Counts `bytes` copied.
    pub fn take(&self, bytes: u64, now: Instant) {
        if self.rate.load(Ordering::Relaxed) == 0 {
            return;
        }
        if let Some(b) = self.bucket().as_mut() {
            b.take(bytes, now);
        }
    }

    /// How long a data path should wait before copying more (zero: go on). Waits are counted in
    /// [`Throttle::waited`] by the caller through [`Throttle::waited_for`].
    pub fn delay(&self, now: Instant) -> Duration {
        if self.rate.load(Ordering::Relaxed) == 0 {
            return Duration::ZERO;
        }
        self.bucket().as_mut().map_or(Duration::ZERO, |b| b.delay(now))
    }

    /// Records that a data path waited `d` because of the throttle.
    pub fn waited_for(&self, d: Duration) {
        self.waited_nanos.fetch_add(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    /// Total time the data paths waited, summed over them.
    pub fn waited(&self) -> Duration {
        Duration::from_nanos(self.waited_nanos.load(Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn a_full_bucket_lets_one_second_through_then_holds_the_rate() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(1_000, t0);
        // One second's worth at once.
        b.take(1_000, t0);
        assert_eq!(b.delay(t0), Duration::ZERO, "exactly empty is not debt");
        b.take(1, t0);
        // In debt: wait until half a bucket (500) is back: 501 bytes at 1000/s.
        assert_eq!(b.delay(t0), Duration::from_secs_f64(0.501));
        assert!(b.delay(t0 + 400 * MS) > Duration::ZERO);
        assert_eq!(b.delay(t0 + 501 * MS), Duration::ZERO);
        // Over a long run, bytes copied stay within rate x time + one bucket.
        let mut now = t0 + 501 * MS;
        let mut copied = 0u64;
        while now < t0 + Duration::from_secs(10) {
            if b.delay(now).is_zero() {
                b.take(100, now);
                copied += 100;
            }
            now += 10 * MS;
        }
        assert!((9_000..=10_600).contains(&copied), "{copied} bytes in ~9.5 s at 1000/s");
    }

    #[test]
    fn a_record_larger_than_the_bucket_goes_through_and_is_paid_for_after() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(1_000, t0);
        b.take(5_000, t0);
        // 4000 of debt + half a bucket: 4.5 s.
        assert_eq!(b.delay(t0), Duration::from_secs_f64(4.5));
    }

    #[test]
    fn rates_change_live_and_none_lifts_the_throttle() {
        let t0 = Instant::now();
        let t = Throttle::new(Some(2_048), t0);
        assert_eq!(t.rate(), Some(2_048));
        t.take(10_000, t0);
        assert!(t.delay(t0) > Duration::from_secs(3));
        t.set_rate(Some(1_000_000), t0 + 10 * MS);
        assert!(t.delay(t0 + 20 * MS) < Duration::from_millis(600), "a higher rate pays the debt sooner");
        t.set_rate(None, t0);
        assert_eq!((t.rate(), t.delay(t0)), (None, Duration::ZERO));
        t.take(u64::MAX, t0);
        assert_eq!(t.delay(t0), Duration::ZERO, "no rate, no wait");
        t.set_rate(Some(0), t0);
        assert_eq!(t.rate(), None, "0 is no throttle");
        t.waited_for(Duration::from_millis(1500));
        t.waited_for(Duration::from_millis(500));
        assert_eq!(t.waited(), Duration::from_secs(2));
    }

    #[test]
    fn rates_below_the_minimum_are_refused() {
        assert!(check_rate(None).is_ok() && check_rate(Some(0)).is_ok(), "absent or 0: no throttle");
        assert!(check_rate(Some(MIN_BYTES_PER_SEC)).is_ok());
        let e = check_rate(Some(10)).unwrap_err();
        assert!(e.contains("at least 1024") && e.contains("got 10"), "{e}");
    }
}
