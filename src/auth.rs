//! Identities and roles shared by the REST API (bearer tokens) and the dashboard (sign-in with the
//! same tokens, then a session cookie).
//!
//! Tokens are compared in constant time and never logged: `Identity` carries only the name and
//! role, and `TokenStore`'s `Debug` shows names, not tokens.
//!
//! Guessing is throttled per client address ([`FailureLimiter`]): every presented credential
//! that matches no identity costs the client one attempt of a small bucket (burst
//! [`FAILURE_BURST`], one attempt back every [`FAILURE_REFILL`]); an empty bucket answers 429
//! without looking at the credential, so guessing cannot go faster than the refill. Successful
//! authentications cost nothing. Failures are logged (client address and path, never the
//! credential), at most [`LOG_LINES_PER_WINDOW`] lines per [`LOG_WINDOW`].

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use subtle::ConstantTimeEq;

/// The shortest token accepted anywhere (configuration, `KMIRROR_ADMIN_TOKEN`, the demo).
pub const MIN_TOKEN_LEN: usize = 32;

/// Checks a token's length. The error names the token (`name`), never its value.
pub fn check_token_strength(name: &str, token: &str) -> Result<(), String> {
    if token.chars().count() < MIN_TOKEN_LEN {
        return Err(format!(
            "the token of {name:?} is shorter than {MIN_TOKEN_LEN} characters (generate one with `openssl rand -hex 32`)"
        ));
    }
    Ok(())
}

/// What an identity may do. Ordered: each role includes the ones before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Read everything (secrets are redacted for everyone).
    Viewer,
    /// Viewer + lifecycle actions: start, pause, resume, stop (failover), restart.
    Operator,
    /// Operator + create, update and delete mirrors.
    Admin,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Operator => "operator",
            Role::Admin => "admin",
        }
    }

    pub fn allows(self, needed: Role) -> bool {
        self >= needed
    }
}

impl std::str::FromStr for Role {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "viewer" => Ok(Role::Viewer),
            "operator" => Ok(Role::Operator),
            "admin" => Ok(Role::Admin),
            other => Err(format!("unknown role {other:?} (expected viewer, operator or admin)")),
        }
    }
}

/// Who is calling.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    pub name: String,
    pub role: Role,
}

/// A configured bearer token.
#[derive(Clone, Deserialize)]
pub struct TokenEntry {
    pub name: String,
    pub token: String,
    pub role: Role,
}

impl std::fmt::Debug for TokenEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenEntry").field("name", &self.name).field("role", &self.role).finish_non_exhaustive()
    }
}

/// The configured identities. With `disabled` (the `--no-auth` flag, loopback only) every caller
/// is an anonymous admin.
#[derive(Clone, Default)]
pub struct TokenStore {
    entries: Vec<TokenEntry>,
    disabled: bool,
    failures: Arc<FailureLimiter>,
}

impl std::fmt::Debug for TokenStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.entries.iter().map(|e| e.name.as_str()).collect();
        f.debug_struct("TokenStore").field("identities", &names).field("disabled", &self.disabled).finish()
    }
}

impl TokenStore {
    /// The identities `entries` (the configuration has checked their length), with the default
    /// failure throttling.
    pub fn new(entries: Vec<TokenEntry>) -> TokenStore {
        TokenStore { entries, disabled: false, failures: Arc::default() }
    }

    /// The same identities with another failure throttle (tests that provoke many failures).
    pub fn with_failure_limiter(mut self, limiter: FailureLimiter) -> TokenStore {
        self.failures = Arc::new(limiter);
        self
    }

    /// No authentication at all (only for a loopback listener; the caller checks that).
    pub fn disabled() -> TokenStore {
        TokenStore { entries: Vec::new(), disabled: true, failures: Arc::default() }
    }

    pub fn is_disabled(&self) -> bool {
        self.disabled
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The identity a token belongs to. Compares against every entry in constant time, so the
    /// answer's timing does not reveal how much of a token matched or which entry did.
    pub fn authenticate(&self, token: &str) -> Option<Identity> {
        if self.disabled {
            return Some(Identity { name: "anonymous (--no-auth)".into(), role: Role::Admin });
        }
        let mut found: Option<&TokenEntry> = None;
        for e in &self.entries {
            let same_len = e.token.len() == token.len();
            // ct_eq on slices of different lengths returns false without comparing contents;
            // comparing against the entry itself keeps the work per entry constant-ish.
            let eq: bool = if same_len { e.token.as_bytes().ct_eq(token.as_bytes()).into() } else { false };
            if eq && found.is_none() {
                found = Some(e);
            }
        }
        found.map(|e| Identity { name: e.name.clone(), role: e.role })
    }

    /// Authenticates a credential presented by `client` (a bearer token, or the dashboard's
    /// sign-in form) with failure throttling: a client that has used up its failed attempts is
    /// refused with [`AuthFailure::Throttled`] before the credential is even compared, and a
    /// credential that matches nobody costs an attempt and is logged (`path` and the client's
    /// address; never the credential).
    pub fn authenticate_from(&self, token: &str, client: Option<IpAddr>, path: &str) -> Result<Identity, AuthFailure> {
        self.authenticate_from_at(token, client, path, Instant::now())
    }

    fn authenticate_from_at(
        &self,
        token: &str,
        client: Option<IpAddr>,
        path: &str,
        now: Instant,
    ) -> Result<Identity, AuthFailure> {
        if self.disabled {
            return self.authenticate(token).ok_or(AuthFailure::Invalid);
        }
        let shown = client.map_or_else(|| "unknown".to_string(), |ip| ip.to_string());
        if let Err(retry_after) = self.failures.check(client, now) {
            if let Some(suppressed) = self.failures.may_log(now) {
                tracing::warn!(
                    client = %shown,
                    path,
                    retry_after_s = retry_after.as_secs(),
                    suppressed,
                    "Authentication refused: too many failed attempts from this client address."
                );
            }
            return Err(AuthFailure::Throttled { retry_after });
        }
        if !token.is_empty()
            && let Some(identity) = self.authenticate(token)
        {
            return Ok(identity);
        }
        let left = self.failures.record_failure(client, now);
        if let Some(suppressed) = self.failures.may_log(now) {
            tracing::warn!(client = %shown, path, attempts_left = left, suppressed, "Authentication failed: unknown token.");
        }
        Err(AuthFailure::Invalid)
    }
}

/// Why [`TokenStore::authenticate_from`] refused a credential.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthFailure {
    /// The credential matches no identity.
    Invalid,
    /// Too many failures from this client address: try again after `retry_after`.
    Throttled { retry_after: Duration },
}

/// Failed attempts a client may make in a burst.
pub const FAILURE_BURST: u32 = 10;
/// One more failed attempt is allowed after this long.
pub const FAILURE_REFILL: Duration = Duration::from_secs(3);
/// At most this many client addresses are tracked; beyond it, forgiven and then the longest
/// quiet ones are dropped.
pub const MAX_TRACKED_CLIENTS: usize = 10_000;
/// At most [`LOG_LINES_PER_WINDOW`] authentication-failure log lines per window.
pub const LOG_WINDOW: Duration = Duration::from_secs(60);
pub const LOG_LINES_PER_WINDOW: u32 = 20;

/// Per-client-address token buckets of failed authentication attempts, with a bounded table,
/// plus the rate limit of the failure log. IPv6 clients are grouped by /64 (one host usually
/// has a whole /64). Time is a parameter, so the rules are unit-tested without sleeping.
#[derive(Debug)]
pub struct FailureLimiter {
    burst: f64,
    refill: Duration,
    max_clients: usize,
    state: Mutex<LimiterState>,
}

#[derive(Debug, Default)]
struct LimiterState {
    buckets: HashMap<IpAddr, Bucket>,
    log_window_start: Option<Instant>,
    log_lines: u32,
    log_suppressed: u64,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    /// Attempts left at `updated`.
    attempts: f64,
    updated: Instant,
}

impl Default for FailureLimiter {
    fn default() -> Self {
        FailureLimiter::new(FAILURE_BURST, FAILURE_REFILL, MAX_TRACKED_CLIENTS)
    }
}

impl FailureLimiter {
    pub fn new(burst: u32, refill: Duration, max_clients: usize) -> FailureLimiter {
        FailureLimiter {
            burst: f64::from(burst.max(1)),
            refill: refill.max(Duration::from_millis(1)),
            max_clients: max_clients.max(1),
            state: Mutex::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LimiterState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The table key of a client: the address, or its /64 for IPv6; unknown clients share one.
    fn key(client: Option<IpAddr>) -> IpAddr {
        match client.map(|ip| ip.to_canonical()) {
            None => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            Some(IpAddr::V6(v6)) => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & !u128::from(u64::MAX))),
            Some(v4) => v4,
        }
    }

    /// Attempts left in `b` at `now` (refilled since its last update).
    fn refilled(&self, b: &Bucket, now: Instant) -> f64 {
        let gained = now.saturating_duration_since(b.updated).as_secs_f64() / self.refill.as_secs_f64();
        (b.attempts + gained).min(self.burst)
    }

    /// `Err(retry_after)` when `client` has no failed attempt left.
    pub fn check(&self, client: Option<IpAddr>, now: Instant) -> Result<(), Duration> {
        let state = self.lock();
        let Some(b) = state.buckets.get(&Self::key(client)) else {
            return Ok(());
        };
        let left = self.refilled(b, now);
        if left >= 1.0 {
            return Ok(());
        }
        let wait = self.refill.mul_f64(1.0 - left);
        // Whole seconds for Retry-After, never 0.
        Err(Duration::from_secs(wait.as_secs() + u64::from(wait.subsec_nanos() > 0)).max(Duration::from_secs(1)))
    }

    /// Counts one failed attempt of `client`; returns the whole attempts it has left.
    pub fn record_failure(&self, client: Option<IpAddr>, now: Instant) -> u32 {
        let key = Self::key(client);
        let mut state = self.lock();
        if !state.buckets.contains_key(&key) && state.buckets.len() >= self.max_clients {
            self.make_room(&mut state.buckets, now);
        }
        let fresh = Bucket { attempts: self.burst, updated: now };
        let current = state.buckets.get(&key).copied().unwrap_or(fresh);
        let left = (self.refilled(&current, now) - 1.0).max(0.0);
        state.buckets.insert(key, Bucket { attempts: left, updated: now });
        // Whole attempts left (0..=burst, so the cast cannot overflow).
        left.floor() as u32
    }

    /// Frees table space: first the clients that are forgiven (bucket full again), then, if
    /// that is not enough, the half that failed longest ago.
    fn make_room(&self, buckets: &mut HashMap<IpAddr, Bucket>, now: Instant) {
        buckets.retain(|_, b| self.refilled(b, now) < self.burst);
        if buckets.len() < self.max_clients {
            return;
        }
        let mut by_age: Vec<(Instant, IpAddr)> = buckets.iter().map(|(k, b)| (b.updated, *k)).collect();
        let half = by_age.len() / 2;
        by_age.select_nth_unstable(half);
        for (_, k) in &by_age[..=half] {
            buckets.remove(k);
        }
    }

    /// Whether a failure may be logged now; `Some(n)`: yes, and `n` lines were suppressed since
    /// the last one logged.
    pub fn may_log(&self, now: Instant) -> Option<u64> {
        let mut state = self.lock();
        let new_window = state.log_window_start.is_none_or(|s| now.saturating_duration_since(s) >= LOG_WINDOW);
        if new_window {
            state.log_window_start = Some(now);
            state.log_lines = 0;
        }
        if state.log_lines >= LOG_LINES_PER_WINDOW {
            state.log_suppressed += 1;
            return None;
        }
        state.log_lines += 1;
        Some(std::mem::take(&mut state.log_suppressed))
    }

    /// How many client addresses are tracked.
    pub fn tracked(&self) -> usize {
        self.lock().buckets.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> TokenStore {
        TokenStore::new(vec![
            TokenEntry { name: "ci".into(), token: "op-token-123".into(), role: Role::Operator },
            TokenEntry { name: "ro".into(), token: "view-token-456".into(), role: Role::Viewer },
        ])
    }

    #[test]
    fn tokens_map_to_identities() {
        let s = store();
        assert_eq!(s.authenticate("op-token-123").unwrap(), Identity { name: "ci".into(), role: Role::Operator });
        assert_eq!(s.authenticate("view-token-456").unwrap().role, Role::Viewer);
        assert!(s.authenticate("op-token-12").is_none());
        assert!(s.authenticate("").is_none());
        assert!(!format!("{s:?}").contains("op-token-123"), "tokens never appear in Debug");
    }

    #[test]
    fn roles_are_ordered() {
        assert!(Role::Admin.allows(Role::Operator));
        assert!(Role::Operator.allows(Role::Viewer));
        assert!(!Role::Viewer.allows(Role::Operator));
        assert_eq!("Admin".parse::<Role>().unwrap(), Role::Admin);
        assert!("root".parse::<Role>().is_err());
    }

    #[test]
    fn short_tokens_are_refused_by_name_not_value() {
        let e = check_token_strength("ci", "short-secret-value").unwrap_err();
        assert!(e.contains("\"ci\"") && e.contains("32"), "{e}");
        assert!(!e.contains("short-secret-value"), "{e}");
        assert!(check_token_strength("ci", &"x".repeat(32)).is_ok());
    }

    const ONE: Option<IpAddr> = Some(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)));
    const TWO: Option<IpAddr> = Some(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2)));

    #[test]
    fn failures_are_throttled_per_client_and_refill() {
        let s = store();
        let t0 = Instant::now();
        for i in 0..FAILURE_BURST {
            assert_eq!(s.authenticate_from_at("wrong", ONE, "/api", t0), Err(AuthFailure::Invalid), "attempt {i}");
        }
        // The bucket is empty: refused without comparing, even with a valid token.
        let throttled = s.authenticate_from_at("op-token-123", ONE, "/api", t0).unwrap_err();
        assert_eq!(throttled, AuthFailure::Throttled { retry_after: FAILURE_REFILL });
        // Other clients are not affected, and successes cost nothing.
        for _ in 0..3 * FAILURE_BURST {
            assert!(s.authenticate_from_at("op-token-123", TWO, "/api", t0).is_ok());
        }
        // One attempt comes back per refill period.
        let t1 = t0 + FAILURE_REFILL;
        assert!(s.authenticate_from_at("op-token-123", ONE, "/api", t1).is_ok());
        assert_eq!(s.authenticate_from_at("wrong", ONE, "/api", t1), Err(AuthFailure::Invalid));
        assert!(matches!(s.authenticate_from_at("wrong", ONE, "/api", t1), Err(AuthFailure::Throttled { .. })));
        // No throttling without authentication.
        let open = TokenStore::disabled();
        for _ in 0..3 * FAILURE_BURST {
            assert!(open.authenticate_from_at("", ONE, "/api", t0).is_ok());
        }
    }

    #[test]
    fn ipv6_clients_are_grouped_by_64() {
        let l = FailureLimiter::new(2, Duration::from_secs(60), 100);
        let t0 = Instant::now();
        let a: IpAddr = "2001:db8:1:2::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:ffff::9".parse().unwrap();
        let c: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        l.record_failure(Some(a), t0);
        l.record_failure(Some(b), t0);
        assert!(l.check(Some(a), t0).is_err());
        assert!(l.check(Some(c), t0).is_ok());
        let mapped: IpAddr = "::ffff:192.0.2.1".parse().unwrap();
        l.record_failure(Some(mapped), t0);
        l.record_failure(ONE, t0);
        assert!(l.check(ONE, t0).is_err(), "IPv4-mapped addresses count as the IPv4 address");
    }

    #[test]
    fn the_table_is_bounded() {
        let l = FailureLimiter::new(3, Duration::from_secs(1), 100);
        let t0 = Instant::now();
        for i in 0..1000u32 {
            l.record_failure(Some(IpAddr::V4(Ipv4Addr::from(i))), t0 + Duration::from_millis(u64::from(i)));
            assert!(l.tracked() <= 100);
        }
        // The most recent failures are still remembered.
        let last = Some(IpAddr::V4(Ipv4Addr::from(999u32)));
        l.record_failure(last, t0 + Duration::from_millis(999));
        l.record_failure(last, t0 + Duration::from_millis(999));
        assert!(l.check(last, t0 + Duration::from_millis(999)).is_err());
        // Forgiven clients are dropped first.
        let l = FailureLimiter::new(3, Duration::from_secs(1), 10);
        for i in 0..10u32 {
            l.record_failure(Some(IpAddr::V4(Ipv4Addr::from(i))), t0);
        }
        assert_eq!(l.tracked(), 10);
        l.record_failure(Some(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1))), t0 + Duration::from_secs(60));
        assert_eq!(l.tracked(), 1);
    }

    #[test]
    fn the_failure_log_is_rate_limited() {
        let l = FailureLimiter::default();
        let t0 = Instant::now();
        for _ in 0..LOG_LINES_PER_WINDOW {
            assert_eq!(l.may_log(t0), Some(0));
        }
        assert_eq!(l.may_log(t0), None);
        assert_eq!(l.may_log(t0 + Duration::from_secs(1)), None);
        assert_eq!(l.may_log(t0 + LOG_WINDOW), Some(2), "the next window reports what was suppressed");
    }

    #[test]
    fn disabled_auth_is_an_anonymous_admin() {
        assert_eq!(TokenStore::disabled().authenticate("anything").unwrap().role, Role::Admin);
    }
}
