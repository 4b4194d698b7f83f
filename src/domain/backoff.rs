//! Retry delays: exponential backoff, computed purely. Every delay kmirror waits before trying
//! again is one [`Backoff`] here, built once: FAILED partitions ([`Backoff::DEFAULT`], with
//! jitter), the data path's transient failures ([`Backoff::DATA_PATH`]), restarts of a data path
//! that could not start ([`Backoff::PIPE_RESTART`]) and admin requests retried after a stale
//! leader ([`Backoff::ADMIN_REQUEST`]).
//!
//! Randomness is an input ([`Jitter`]), never drawn here, so a delay is a function of
//! (policy, attempt, jitter) and tests can pin it exactly.
//!
//! # Shape
//!
//! The *ceiling* for attempt `n` (0-based) is `min(max, initial × 2ⁿ)`. The delay is drawn from
//! `[ceiling / 2, ceiling]` ("equal jitter"): partitions that failed together spread out instead of
//! retrying in lock-step, yet no retry comes sooner than half its nominal delay. KIP-1279's
//! prototype uses full jitter (`[0, ceiling]`), which can retry a dead source cluster after a few
//! milliseconds; kmirror keeps the floor on purpose.

use std::fmt;
use std::time::Duration;

use super::time::Timestamp;

/// A jitter fraction in `[0, 1]`: 0 picks the shortest delay of an attempt's range, 1 the longest.
///
/// The engine draws it from its RNG (`Jitter::from_random_u32(rng.next_u32())`) and passes it in
/// with the event that may schedule a retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Jitter(u32);

impl Jitter {
    /// The shortest delay of the range (half the ceiling).
    pub const MIN: Self = Self(0);
    /// The longest delay of the range (the ceiling itself).
    pub const MAX: Self = Self(u32::MAX);

    /// A jitter from a fraction; values outside `[0, 1]` are clamped and NaN counts as 1 (the
    /// longest, most conservative delay).
    #[must_use]
    pub fn new(fraction: f64) -> Self {
        if fraction.is_nan() {
            return Self::MAX;
        }
        let scaled = (fraction.clamp(0.0, 1.0) * f64::from(u32::MAX)).round();
        // In range by the clamp above, so the float-to-int cast neither truncates nor wraps.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let value = scaled as u32;
        Self(value)
    }

    /// A jitter from a uniformly random `u32` (every value maps into `[0, 1]`).
    #[must_use]
    pub const fn from_random_u32(value: u32) -> Self {
        Self(value)
    }

    /// The fraction in `[0, 1]`.
    #[must_use]
    pub fn fraction(self) -> f64 {
        f64::from(self.0) / f64::from(u32::MAX)
    }

    /// `span × fraction`, in exact integer arithmetic.
    fn scale(self, span: u64) -> u64 {
        let scaled = u128::from(span) * u128::from(self.0) / u128::from(u32::MAX);
        u64::try_from(scaled).unwrap_or(span)
    }
}

impl fmt::Display for Jitter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.3}", self.fraction())
    }
}

/// Exponential backoff (multiplier 2) between `initial_ms` and `max_ms`, with equal jitter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Backoff {
    initial_ms: u64,
    max_ms: u64,
}

impl Backoff {
    /// 1 s doubling up to 5 min: FAILED partitions.
    pub const DEFAULT: Self = Self { initial_ms: 1_000, max_ms: 300_000 };

    /// 200 ms doubling up to 30 s: the data path's transient failures (a transaction aborted and
    /// rewound, the destination unreachable), with jitter.
    pub const DATA_PATH: Self = Self::new(200, 30_000);

    /// 500 ms doubling up to 30 s: starting again a data path that could not start, or whose
    /// destination was unavailable after a fatal producer error.
    pub const PIPE_RESTART: Self = Self::new(500, 30_000);

    /// 50 ms doubling up to 1 s: an admin request tried again after a retryable error (a stale
    /// leader in the client's metadata cache), within the request's own deadline.
    pub const ADMIN_REQUEST: Self = Self::new(50, 1_000);

    /// A backoff starting at `initial_ms` and capped at `max_ms`.
    ///
    /// `initial_ms` is raised to at least 1 ms (a zero delay would spin) and `max_ms` to at least
    /// `initial_ms`, so every value pair yields a usable policy.
    #[must_use]
    pub const fn new(initial_ms: u64, max_ms: u64) -> Self {
        let initial_ms = if initial_ms == 0 { 1 } else { initial_ms };
        let max_ms = if max_ms < initial_ms { initial_ms } else { max_ms };
        Self { initial_ms, max_ms }
    }

    /// [`Backoff::ceiling_ms`] as a duration: the delay for `attempt` without jitter.
    #[must_use]
    pub fn ceiling(&self, attempt: u32) -> Duration {
        Duration::from_millis(self.ceiling_ms(attempt))
    }

    /// [`Backoff::delay_ms`] as a duration: the delay for `attempt`, placed by `jitter`.
    #[must_use]
    pub fn delay(&self, attempt: u32, jitter: Jitter) -> Duration {
        Duration::from_millis(self.delay_ms(attempt, jitter))
    }

    /// The first attempt's ceiling.
    #[must_use]
    pub const fn initial_ms(&self) -> u64 {
        self.initial_ms
    }

    /// The cap on every ceiling.
    #[must_use]
    pub const fn max_ms(&self) -> u64 {
        self.max_ms
    }

    /// The longest delay for `attempt` (0-based): `min(max, initial × 2^attempt)`, overflow-safe.
    #[must_use]
    pub fn ceiling_ms(&self, attempt: u32) -> u64 {
        let factor = 1_u64.checked_shl(attempt).unwrap_or(u64::MAX);
        self.initial_ms.saturating_mul(factor).min(self.max_ms)
    }

    /// The delay before retry `attempt` (0-based): within `[ceiling / 2, ceiling]`, placed by
    /// `jitter`.
    #[must_use]
    pub fn delay_ms(&self, attempt: u32, jitter: Jitter) -> u64 {
        let ceiling = self.ceiling_ms(attempt);
        let span = ceiling / 2;
        (ceiling - span) + jitter.scale(span)
    }

    /// When retry `attempt` (0-based) is due, counting from `now`.
    #[must_use]
    pub fn retry_at(&self, now: Timestamp, attempt: u32, jitter: Jitter) -> Timestamp {
        now.saturating_add_millis(self.delay_ms(attempt, jitter))
    }
}

impl Default for Backoff {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// How FAILED partitions with a retryable error are retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RetryPolicy {
    /// Delay between attempts.
    pub backoff: Backoff,
    /// Automatic retries allowed before an operator must act (KIP-1279's
    /// `mirror.failed.retry.max.attempts`, default 20). 0 disables automatic retries.
    pub max_attempts: u32,
}

impl RetryPolicy {
    /// [`Backoff::DEFAULT`] and 20 attempts.
    pub const DEFAULT: Self = Self { backoff: Backoff::DEFAULT, max_attempts: 20 };
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self::DEFAULT
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn default_doubles_from_one_second_to_five_minutes() {
        let b = Backoff::DEFAULT;
        let ceilings: Vec<u64> = (0..11).map(|n| b.ceiling_ms(n)).collect();
        assert_eq!(ceilings, [1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 64_000, 128_000, 256_000, 300_000, 300_000]);
        assert_eq!(b.ceiling_ms(u32::MAX), 300_000);
    }

    #[test]
    fn jitter_places_the_delay_between_half_and_full_ceiling() {
        let b = Backoff::DEFAULT;
        assert_eq!(b.delay_ms(0, Jitter::MIN), 500);
        assert_eq!(b.delay_ms(0, Jitter::MAX), 1_000);
        assert_eq!(b.delay_ms(0, Jitter::new(0.5)), 750);
        assert_eq!(b.delay_ms(20, Jitter::MIN), 150_000);
        assert_eq!(b.delay_ms(20, Jitter::MAX), 300_000);
    }

    #[test]
    fn retry_at_adds_the_delay_to_now() {
        let now = Timestamp::from_millis(10_000);
        assert_eq!(Backoff::DEFAULT.retry_at(now, 1, Jitter::MAX), Timestamp::from_millis(12_000));
    }

    #[test]
    fn jitter_constructors_clamp() {
        assert_eq!(Jitter::new(-3.0), Jitter::MIN);
        assert_eq!(Jitter::new(7.0), Jitter::MAX);
        assert_eq!(Jitter::new(f64::NAN), Jitter::MAX);
        assert!((Jitter::new(0.25).fraction() - 0.25).abs() < 1e-9);
        assert_eq!(Jitter::from_random_u32(u32::MAX), Jitter::MAX);
    }

    /// The delays other layers used to compute by hand, each now one constant.
    #[test]
    fn named_backoffs_keep_their_delays() {
        // Data path: 200 ms doubling, capped at 30 s.
        let ceilings: Vec<u64> = (0..10).map(|n| Backoff::DATA_PATH.ceiling_ms(n)).collect();
        assert_eq!(ceilings, [200, 400, 800, 1_600, 3_200, 6_400, 12_800, 25_600, 30_000, 30_000]);
        // Data path restarts: `500 << min(restarts, 6)` capped at 30 s, restarts counted from 1.
        for restarts in 1..20_u32 {
            let by_hand = (500_u64 << restarts.min(6)).min(30_000);
            assert_eq!(Backoff::PIPE_RESTART.ceiling(restarts), Duration::from_millis(by_hand), "{restarts}");
        }
        // Admin requests: 50 ms doubling up to 1 s.
        let ceilings: Vec<u64> = (0..7).map(|n| Backoff::ADMIN_REQUEST.ceiling_ms(n)).collect();
        assert_eq!(ceilings, [50, 100, 200, 400, 800, 1_000, 1_000]);
        assert_eq!(Backoff::DATA_PATH.delay(0, Jitter::MIN), Duration::from_millis(100));
        assert_eq!(Backoff::DATA_PATH.delay(0, Jitter::MAX), Duration::from_millis(200));
    }

    #[test]
    fn new_repairs_degenerate_bounds() {
        let b = Backoff::new(0, 0);
        assert_eq!((b.initial_ms(), b.max_ms()), (1, 1));
        assert_eq!(b.delay_ms(0, Jitter::MIN), 1, "a delay is never zero");
        let b = Backoff::new(5_000, 10);
        assert_eq!((b.initial_ms(), b.max_ms()), (5_000, 5_000));
    }

    proptest! {
        #[test]
        fn delay_is_bounded_and_monotone_in_attempt(
            initial in 1_u64..100_000,
            extra in 0_u64..10_000_000,
            attempt in 0_u32..100,
            jitter in any::<u32>(),
        ) {
            let b = Backoff::new(initial, initial + extra);
            let jitter = Jitter::from_random_u32(jitter);
            let ceiling = b.ceiling_ms(attempt);
            let delay = b.delay_ms(attempt, jitter);
            prop_assert!(delay >= ceiling - ceiling / 2 && delay <= ceiling);
            prop_assert!(delay >= 1);
            prop_assert!(ceiling <= b.ceiling_ms(attempt + 1));
            prop_assert!(b.delay_ms(attempt, Jitter::MIN) <= b.delay_ms(attempt + 1, Jitter::MIN));
        }
    }
}
