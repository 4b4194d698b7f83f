//! Identities and roles shared by the REST API (bearer tokens) and the dashboard (sign-in with the
//! same tokens, then a session cookie).
//!
//! Tokens are compared in constant time and never logged: `Identity` carries only the name and
//! role, and `TokenStore`'s `Debug` shows names, not tokens.
//!
//! # Failed attempts are limited, people are not
//!
//! Every presented credential is first checked against every configured token
//! ([`TokenStore::authenticate`]): a constant-time comparison of fixed-size buffers, so its
//! duration depends on neither which token matched, nor how much of one matched, nor the
//! configured tokens' lengths, and it costs a few microseconds (less than parsing the request).
//! A credential that matches is served, always: the limiter is not even consulted, so no amount
//! of failures from an address (behind an ingress, every client's address) can lock out a valid
//! token, a failover's `topics:stop` included.
//!
//! Only the failing path is limited ([`FailureLimiter`]): a credential that matches nobody costs
//! its client address one attempt of a small bucket (burst [`FAILURE_BURST`], one attempt back
//! every [`FAILURE_REFILL`]) and one attempt of a global bucket shared by every address (burst
//! [`GLOBAL_FAILURE_BURST`], one back every [`GLOBAL_FAILURE_REFILL`]; a guesser with many
//! addresses). Once either is empty, failures answer 429 with `Retry-After` and do no further
//! work: they are not counted again and their log lines are rate-limited
//! ([`LOG_LINES_PER_WINDOW`] per [`LOG_WINDOW`]; client address and path, never the credential).
//!
//! Why this does not let a guesser go faster in any way that matters: no limiter can serve a
//! valid token from an address and also hide from that address whether a token is valid (the
//! answer, 200 or 429, says so). Refusing everything from a throttled address (the old rule) was
//! the only way to slow one address's guesses, at the price of a lockout anybody could trigger,
//! and behind an ingress, for everybody. Guessing is made hopeless instead by the token space,
//! enforced at startup: at least [`MIN_TOKEN_LEN`] printable characters (`openssl rand -hex 32`
//! gives 64, 256 bits; even 32 random hex characters are 128 bits, and finding one of 10 such
//! tokens at a million guesses per second takes more than 10^23 years), and by the constant-time
//! check, which leaks no partial match, so a guess teaches nothing about the next one. What the
//! limiter is still for: a misconfigured or misbehaving client is told to back off (429 with
//! `Retry-After`) rather than answered 401 at full speed, the log stays readable, and a failure
//! costs one comparison plus one bucket update under a short lock that valid requests never take.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use subtle::{Choice, ConditionallySelectable, ConstantTimeEq};

/// The shortest token accepted anywhere (configuration, `KMIRROR_<ROLE>_TOKEN`, token files, the
/// demo).
pub const MIN_TOKEN_LEN: usize = 32;
/// The longest token accepted, in bytes: every comparison covers this many bytes.
pub const MAX_TOKEN_LEN: usize = 512;

/// Checks a token: at least [`MIN_TOKEN_LEN`] characters, at most [`MAX_TOKEN_LEN`], printable
/// ASCII without spaces (all a bearer header carries). The error names the token (`name`), never
/// its value.
pub fn check_token_strength(name: &str, token: &str) -> Result<(), String> {
    if token.chars().count() < MIN_TOKEN_LEN {
        return Err(format!(
            "the token of {name:?} is shorter than {MIN_TOKEN_LEN} characters (generate one with `openssl rand -hex 32`)"
        ));
    }
    if token.len() > MAX_TOKEN_LEN {
        return Err(format!("the token of {name:?} is longer than {MAX_TOKEN_LEN} characters"));
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(format!(
            "the token of {name:?} contains spaces, line breaks or characters outside printable ASCII, which a bearer \
             header cannot carry (generate one with `openssl rand -hex 32`)"
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
    /// Every role, lowest first.
    pub const ALL: [Role; 3] = [Role::Viewer, Role::Operator, Role::Admin];

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

/// A token as compared: zero-padded to [`MAX_TOKEN_LEN`] bytes, with its length.
#[derive(Clone)]
struct Padded {
    bytes: Box<[u8; MAX_TOKEN_LEN]>,
    len: u64,
}

impl Padded {
    /// `None` when `token` is empty or longer than [`MAX_TOKEN_LEN`] (such a token never matches;
    /// the configuration refuses it).
    fn new(token: &[u8]) -> Option<Padded> {
        if token.is_empty() || token.len() > MAX_TOKEN_LEN {
            return None;
        }
        let mut bytes = Box::new([0u8; MAX_TOKEN_LEN]);
        bytes[..token.len()].copy_from_slice(token);
        Some(Padded { bytes, len: token.len() as u64 })
    }

    /// Equal length and equal bytes, in constant time: all [`MAX_TOKEN_LEN`] bytes are compared
    /// whatever the lengths (the padding is zeros on both sides, and the lengths are compared
    /// too, so a token is never equal to a prefix of another).
    fn same(&self, other: &Padded) -> Choice {
        self.len.ct_eq(&other.len) & self.bytes[..].ct_eq(&other.bytes[..])
    }
}

/// The configured identities. With `disabled` (the `--no-auth` flag, loopback only) every caller
/// is an anonymous admin.
#[derive(Clone, Default)]
pub struct TokenStore {
    entries: Vec<TokenEntry>,
    /// `entries`' tokens as compared, in the same order (`None`: can never match).
    padded: Vec<Option<Padded>>,
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
    /// The identities `entries` (the configuration has checked their tokens), with the default
    /// failure throttling.
    pub fn new(entries: Vec<TokenEntry>) -> TokenStore {
        let padded = entries.iter().map(|e| Padded::new(e.token.as_bytes())).collect();
        TokenStore { entries, padded, disabled: false, failures: Arc::default() }
    }

    /// The same identities with another failure throttle (tests that provoke many failures).
    pub fn with_failure_limiter(mut self, limiter: FailureLimiter) -> TokenStore {
        self.failures = Arc::new(limiter);
        self
    }

    /// No authentication at all (only for a loopback listener; the caller checks that).
    pub fn disabled() -> TokenStore {
        TokenStore { disabled: true, ..TokenStore::default() }
    }

    pub fn is_disabled(&self) -> bool {
        self.disabled
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The identity a token belongs to. Compares the token against every entry in constant time
    /// ([`Padded::same`]) and picks the first match without branching on it, so the answer's
    /// timing reveals neither how much of a token matched, nor which entry did, nor the
    /// configured tokens' lengths: it depends only on the number of entries.
    pub fn authenticate(&self, token: &str) -> Option<Identity> {
        if self.disabled {
            return Some(Identity { name: "anonymous (--no-auth)".into(), role: Role::Admin });
        }
        // Depends only on the presented token's length, which the caller knows anyway.
        let presented = Padded::new(token.as_bytes())?;
        let mut found = Choice::from(0);
        let mut index = 0u32;
        for (i, entry) in self.padded.iter().enumerate() {
            let Some(entry) = entry else { continue };
            let same = entry.same(&presented);
            // At most u32::MAX entries: a configuration is far smaller.
            index.conditional_assign(&(i as u32), same & !found);
            found |= same;
        }
        if !bool::from(found) {
            return None;
        }
        self.entries.get(index as usize).map(|e| Identity { name: e.name.clone(), role: e.role })
    }

    /// Authenticates a credential presented by `client` (a bearer token, or the dashboard's
    /// sign-in form). A valid credential is always accepted, whatever failures came from the
    /// same address (see the module documentation); one that matches nobody counts against
    /// `client` and every client ([`FailureLimiter::fail`]): [`AuthFailure::Invalid`] while
    /// attempts are left, [`AuthFailure::Throttled`] once they are used up. Failures are logged
    /// (`path` and the client's address; never the credential), rate-limited.
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
        // The check first, every time, and in constant time: a valid credential never reaches the
        // limiter, so failures from its address (or from everyone) cannot refuse it.
        if let Some(identity) = self.authenticate(token) {
            return Ok(identity);
        }
        if self.disabled {
            return Err(AuthFailure::Invalid);
        }
        let shown = client.map_or_else(|| "unknown".to_string(), |ip| ip.to_string());
        match self.failures.fail(client, now) {
            Ok(left) => {
                if let Some(suppressed) = self.failures.may_log(now) {
                    tracing::warn!(
                        client = %shown,
                        path,
                        attempts_left = left,
                        suppressed,
                        "Authentication failed: unknown token."
                    );
                }
                Err(AuthFailure::Invalid)
            }
            Err((retry_after, scope)) => {
                if let Some(suppressed) = self.failures.may_log(now) {
                    let message = match scope {
                        ThrottleScope::Address => {
                            "Authentication refused: unknown token, and too many failed attempts from this client address \
                             (refused until Retry-After; valid tokens are still accepted)."
                        }
                        ThrottleScope::Everyone => {
                            "Authentication refused: unknown token, and too many failed attempts from all clients together \
                             (refused until Retry-After; valid tokens are still accepted)."
                        }
                    };
                    tracing::warn!(client = %shown, path, retry_after_s = retry_after.as_secs(), suppressed, "{message}");
                }
                Err(AuthFailure::Throttled { retry_after, scope })
            }
        }
    }
}

/// Why [`TokenStore::authenticate_from`] refused a credential.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthFailure {
    /// The credential matches no identity.
    Invalid,
    /// The credential matches no identity, and too many have failed (from this client address or
    /// from everyone): try again after `retry_after`. A valid credential is never refused so.
    Throttled { retry_after: Duration, scope: ThrottleScope },
}

/// Which failure limit a refused attempt ran into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThrottleScope {
    /// Too many failures from the client's address (its /64 for IPv6).
    Address,
    /// Too many failures from all addresses together.
    Everyone,
}

/// Failed attempts a client address may make in a burst.
pub const FAILURE_BURST: u32 = 10;
/// One more failed attempt is allowed after this long.
pub const FAILURE_REFILL: Duration = Duration::from_secs(3);
/// Failed attempts all clients together may make in a burst.
pub const GLOBAL_FAILURE_BURST: u32 = 100;
/// One more failed attempt (of all clients together) is allowed after this long.
pub const GLOBAL_FAILURE_REFILL: Duration = Duration::from_millis(100);
/// At most this many client addresses are tracked; beyond it, forgiven and then the longest
/// quiet ones are dropped.
pub const MAX_TRACKED_CLIENTS: usize = 10_000;
/// At most [`LOG_LINES_PER_WINDOW`] authentication-failure log lines per window.
pub const LOG_WINDOW: Duration = Duration::from_secs(60);
pub const LOG_LINES_PER_WINDOW: u32 = 20;

/// Token buckets of failed authentication attempts: one per client address, with a bounded
/// table, and one for everyone; plus the rate limit of the failure log. IPv6 clients are grouped
/// by /64 (one host usually has a whole /64). Only failures ever reach it (a valid credential is
/// accepted before), so nothing here can refuse a valid token. Time is a parameter, so the rules
/// are unit-tested without sleeping.
#[derive(Debug)]
pub struct FailureLimiter {
    per_client: Rate,
    global: Rate,
    max_clients: usize,
    state: Mutex<LimiterState>,
}

/// A bucket's size and refill period.
#[derive(Debug, Clone, Copy)]
struct Rate {
    burst: f64,
    refill: Duration,
}

impl Rate {
    fn new(burst: u32, refill: Duration) -> Rate {
        Rate { burst: f64::from(burst.max(1)), refill: refill.max(Duration::from_millis(1)) }
    }

    /// Attempts left in `b` at `now` (refilled since its last update).
    fn refilled(self, b: &Bucket, now: Instant) -> f64 {
        let gained = now.saturating_duration_since(b.updated).as_secs_f64() / self.refill.as_secs_f64();
        (b.attempts + gained).min(self.burst)
    }

    /// How long until `left` attempts become one, in whole seconds for `Retry-After` (never 0).
    fn retry_after(self, left: f64) -> Duration {
        let wait = self.refill.mul_f64((1.0 - left).clamp(0.0, 1.0));
        Duration::from_secs(wait.as_secs() + u64::from(wait.subsec_nanos() > 0)).max(Duration::from_secs(1))
    }
}

#[derive(Debug, Default)]
struct LimiterState {
    buckets: HashMap<IpAddr, Bucket>,
    /// Everyone's bucket (`None`: full).
    global: Option<Bucket>,
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
    /// Per client address: `burst` failures, one more every `refill`, at most `max_clients`
    /// addresses remembered; for everyone the defaults ([`GLOBAL_FAILURE_BURST`],
    /// [`GLOBAL_FAILURE_REFILL`]).
    pub fn new(burst: u32, refill: Duration, max_clients: usize) -> FailureLimiter {
        FailureLimiter {
            per_client: Rate::new(burst, refill),
            global: Rate::new(GLOBAL_FAILURE_BURST, GLOBAL_FAILURE_REFILL),
            max_clients: max_clients.max(1),
            state: Mutex::default(),
        }
    }

    /// The same with another limit for all clients together.
    pub fn with_global(mut self, burst: u32, refill: Duration) -> FailureLimiter {
        self.global = Rate::new(burst, refill);
        self
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

    /// Counts one failed attempt of `client`. `Ok(left)`: the attempt was allowed (answer 401),
    /// and the client has `left` whole attempts left. `Err((retry_after, scope))`: the client's
    /// or everyone's attempts are used up (answer 429); a refused attempt costs nothing more, so
    /// attempts keep coming back at the refill rate however fast failures arrive.
    pub fn fail(&self, client: Option<IpAddr>, now: Instant) -> Result<u32, (Duration, ThrottleScope)> {
        let key = Self::key(client);
        let mut state = self.lock();
        let mine = state.buckets.get(&key).map_or(self.per_client.burst, |b| self.per_client.refilled(b, now));
        if mine < 1.0 {
            return Err((self.per_client.retry_after(mine), ThrottleScope::Address));
        }
        let everyone = state.global.as_ref().map_or(self.global.burst, |b| self.global.refilled(b, now));
        if everyone < 1.0 {
            return Err((self.global.retry_after(everyone), ThrottleScope::Everyone));
        }
        state.global = Some(Bucket { attempts: everyone - 1.0, updated: now });
        if !state.buckets.contains_key(&key) && state.buckets.len() >= self.max_clients {
            self.make_room(&mut state.buckets, now);
        }
        let left = mine - 1.0;
        state.buckets.insert(key, Bucket { attempts: left, updated: now });
        // Whole attempts left (0..=burst, so the cast cannot overflow).
        Ok(left.floor() as u32)
    }

    /// Whether `client` would be refused a failed attempt now (`Err(retry_after)`), without
    /// counting one.
    pub fn check(&self, client: Option<IpAddr>, now: Instant) -> Result<(), Duration> {
        let state = self.lock();
        let mine =
            state.buckets.get(&Self::key(client)).map_or(self.per_client.burst, |b| self.per_client.refilled(b, now));
        if mine < 1.0 {
            return Err(self.per_client.retry_after(mine));
        }
        let everyone = state.global.as_ref().map_or(self.global.burst, |b| self.global.refilled(b, now));
        if everyone < 1.0 {
            return Err(self.global.retry_after(everyone));
        }
        Ok(())
    }

    /// Frees table space: first the clients that are forgiven (bucket full again), then, if
    /// that is not enough, the half that failed longest ago.
    fn make_room(&self, buckets: &mut HashMap<IpAddr, Bucket>, now: Instant) {
        buckets.retain(|_, b| self.per_client.refilled(b, now) < self.per_client.burst);
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

    const OP: &str = "op-token-123-0123456789abcdef0123";
    const VIEW: &str = "view-token-456-0123456789abcdef01";

    fn store() -> TokenStore {
        TokenStore::new(vec![
            TokenEntry { name: "ci".into(), token: OP.into(), role: Role::Operator },
            TokenEntry { name: "ro".into(), token: VIEW.into(), role: Role::Viewer },
        ])
    }

    #[test]
    fn tokens_map_to_identities() {
        let s = store();
        assert_eq!(s.authenticate(OP).unwrap(), Identity { name: "ci".into(), role: Role::Operator });
        assert_eq!(s.authenticate(VIEW).unwrap().role, Role::Viewer);
        // Prefixes, extensions, the zero padding and oversized tokens match nothing.
        assert!(s.authenticate(&OP[..OP.len() - 1]).is_none());
        assert!(s.authenticate(&format!("{OP}x")).is_none());
        assert!(s.authenticate(&format!("{OP}\0")).is_none());
        assert!(s.authenticate(&"x".repeat(MAX_TOKEN_LEN + 1)).is_none());
        assert!(s.authenticate("").is_none());
        assert!(!format!("{s:?}").contains(OP), "tokens never appear in Debug");
        // The first entry with a token wins; entries the configuration would refuse never match.
        let long = "l".repeat(MAX_TOKEN_LEN + 1);
        let s = TokenStore::new(vec![
            TokenEntry { name: "long".into(), token: long.clone(), role: Role::Admin },
            TokenEntry { name: "empty".into(), token: String::new(), role: Role::Admin },
            TokenEntry { name: "first".into(), token: OP.into(), role: Role::Viewer },
            TokenEntry { name: "second".into(), token: OP.into(), role: Role::Admin },
        ]);
        assert_eq!(s.authenticate(OP).unwrap().name, "first");
        assert!(s.authenticate(&long).is_none() && s.authenticate("").is_none());
        let longest = "m".repeat(MAX_TOKEN_LEN);
        let s = TokenStore::new(vec![TokenEntry { name: "max".into(), token: longest.clone(), role: Role::Admin }]);
        assert_eq!(s.authenticate(&longest).unwrap().name, "max");
    }

    #[test]
    fn roles_are_ordered() {
        assert!(Role::Admin.allows(Role::Operator));
        assert!(Role::Operator.allows(Role::Viewer));
        assert!(!Role::Viewer.allows(Role::Operator));
        assert_eq!("Admin".parse::<Role>().unwrap(), Role::Admin);
        assert!("root".parse::<Role>().is_err());
        assert_eq!(Role::ALL.map(Role::as_str), ["viewer", "operator", "admin"]);
    }

    #[test]
    fn weak_tokens_are_refused_by_name_not_value() {
        let e = check_token_strength("ci", "short-secret-value").unwrap_err();
        assert!(e.contains("\"ci\"") && e.contains("32"), "{e}");
        assert!(!e.contains("short-secret-value"), "{e}");
        assert!(check_token_strength("ci", &"x".repeat(32)).is_ok());
        assert!(check_token_strength("ci", &"x".repeat(MAX_TOKEN_LEN)).is_ok());
        let e = check_token_strength("ci", &"x".repeat(MAX_TOKEN_LEN + 1)).unwrap_err();
        assert!(e.contains("longer than 512"), "{e}");
        for bad in [
            "with space-0123456789abcdef0123456789",
            "0123456789abcdef0123456789abcdef\n",
            "ünïcödé-0123456789abcdef0123456789",
        ] {
            let e = check_token_strength("ci", bad).unwrap_err();
            assert!(e.contains("printable ASCII") && !e.contains(bad.trim()), "{e}");
        }
    }

    const ONE: Option<IpAddr> = Some(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)));
    const TWO: Option<IpAddr> = Some(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2)));

    fn throttled(scope: ThrottleScope) -> impl Fn(&Result<Identity, AuthFailure>) -> bool {
        move |r| matches!(r, Err(AuthFailure::Throttled { scope: s, .. }) if *s == scope)
    }

    #[test]
    fn a_valid_token_is_served_from_a_throttled_address() {
        let s = store();
        let t0 = Instant::now();
        for i in 0..50 {
            let r = s.authenticate_from_at("wrong", ONE, "/api", t0);
            if i < FAILURE_BURST {
                assert_eq!(r, Err(AuthFailure::Invalid), "attempt {i}");
            } else {
                assert!(throttled(ThrottleScope::Address)(&r), "attempt {i}: {r:?}");
            }
        }
        // Throttled for failures, never for the right token: every time, from that address.
        for _ in 0..3 * FAILURE_BURST {
            assert_eq!(s.authenticate_from_at(OP, ONE, "/api", t0).unwrap().name, "ci");
            assert!(throttled(ThrottleScope::Address)(&s.authenticate_from_at("wrong", ONE, "/api", t0)));
        }
        // Successes cost nothing: another address still has its whole burst.
        for _ in 0..3 * FAILURE_BURST {
            assert!(s.authenticate_from_at(VIEW, TWO, "/api", t0).is_ok());
        }
        assert_eq!(s.authenticate_from_at("wrong", TWO, "/api", t0), Err(AuthFailure::Invalid));
    }

    #[test]
    fn failures_are_throttled_per_client_and_refill() {
        let s = store();
        let t0 = Instant::now();
        for i in 0..FAILURE_BURST {
            assert_eq!(s.authenticate_from_at("wrong", ONE, "/api", t0), Err(AuthFailure::Invalid), "attempt {i}");
        }
        let r = s.authenticate_from_at("wrong", ONE, "/api", t0);
        assert_eq!(r, Err(AuthFailure::Throttled { retry_after: FAILURE_REFILL, scope: ThrottleScope::Address }));
        // Refused attempts cost nothing: one attempt comes back per refill period however many
        // were refused meanwhile.
        let t1 = t0 + FAILURE_REFILL;
        assert_eq!(s.authenticate_from_at("wrong", ONE, "/api", t1), Err(AuthFailure::Invalid));
        assert!(throttled(ThrottleScope::Address)(&s.authenticate_from_at("wrong", ONE, "/api", t1)));
        assert_eq!(s.authenticate_from_at("wrong", TWO, "/api", t1), Err(AuthFailure::Invalid), "per address");
        // No throttling without authentication.
        let open = TokenStore::disabled();
        for _ in 0..3 * FAILURE_BURST {
            assert!(open.authenticate_from_at("", ONE, "/api", t0).is_ok());
        }
    }

    #[test]
    fn the_global_cap_limits_failures_from_everyone_but_never_a_valid_token() {
        let s = store().with_failure_limiter(
            FailureLimiter::new(1000, Duration::from_secs(1), 10_000).with_global(5, Duration::from_secs(10)),
        );
        let t0 = Instant::now();
        let addr = |i: u32| Some(IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + i)));
        for i in 0..5 {
            assert_eq!(s.authenticate_from_at("wrong", addr(i), "/api", t0), Err(AuthFailure::Invalid));
        }
        let r = s.authenticate_from_at("wrong", addr(99), "/api", t0);
        assert_eq!(
            r,
            Err(AuthFailure::Throttled { retry_after: Duration::from_secs(10), scope: ThrottleScope::Everyone })
        );
        for i in 0..20 {
            assert!(s.authenticate_from_at(OP, addr(i), "/api", t0).is_ok(), "a valid token from {i}");
            assert!(throttled(ThrottleScope::Everyone)(&s.authenticate_from_at("wrong", addr(i), "/api", t0)));
        }
        let t1 = t0 + Duration::from_secs(10);
        assert_eq!(s.authenticate_from_at("wrong", addr(7), "/api", t1), Err(AuthFailure::Invalid), "refilled");
        assert!(throttled(ThrottleScope::Everyone)(&s.authenticate_from_at("wrong", addr(8), "/api", t1)));
        // The default cap is far above one address's burst.
        const { assert!(GLOBAL_FAILURE_BURST >= 10 * FAILURE_BURST) };
    }

    #[test]
    fn ipv6_clients_are_grouped_by_64() {
        let l = FailureLimiter::new(2, Duration::from_secs(60), 100);
        let t0 = Instant::now();
        let a: IpAddr = "2001:db8:1:2::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:ffff::9".parse().unwrap();
        let c: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(l.fail(Some(a), t0), Ok(1));
        assert_eq!(l.fail(Some(b), t0), Ok(0));
        assert!(l.check(Some(a), t0).is_err());
        assert_eq!(l.fail(Some(b), t0), Err((Duration::from_secs(60), ThrottleScope::Address)));
        assert!(l.check(Some(c), t0).is_ok());
        let mapped: IpAddr = "::ffff:192.0.2.1".parse().unwrap();
        assert!(l.fail(Some(mapped), t0).is_ok());
        assert!(l.fail(ONE, t0).is_ok());
        assert!(l.check(ONE, t0).is_err(), "IPv4-mapped addresses count as the IPv4 address");
    }

    #[test]
    fn the_table_is_bounded() {
        let l = FailureLimiter::new(3, Duration::from_secs(1), 100).with_global(100_000, Duration::from_millis(1));
        let t0 = Instant::now();
        for i in 0..1000u32 {
            assert!(l.fail(Some(IpAddr::V4(Ipv4Addr::from(i))), t0 + Duration::from_millis(u64::from(i))).is_ok());
            assert!(l.tracked() <= 100);
        }
        // The most recent failures are still remembered.
        let last = Some(IpAddr::V4(Ipv4Addr::from(999u32)));
        let _ = l.fail(last, t0 + Duration::from_millis(999));
        let _ = l.fail(last, t0 + Duration::from_millis(999));
        assert!(l.check(last, t0 + Duration::from_millis(999)).is_err());
        // Forgiven clients are dropped first.
        let l = FailureLimiter::new(3, Duration::from_secs(1), 10);
        for i in 0..10u32 {
            let _ = l.fail(Some(IpAddr::V4(Ipv4Addr::from(i))), t0);
        }
        assert_eq!(l.tracked(), 10);
        let _ = l.fail(Some(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1))), t0 + Duration::from_secs(60));
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
