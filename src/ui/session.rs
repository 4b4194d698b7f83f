//! Dashboard sessions: sign in once with an API bearer token, then a session cookie.
//!
//! - Session ids and CSRF tokens are 256 random bits from the thread-local CSPRNG (ChaCha,
//!   seeded from the OS), hex encoded. The token itself is never stored in the session.
//! - The cookie is `HttpOnly`, `SameSite=Strict`, `Path=/`, and `Secure` with the `__Host-` name
//!   prefix when the listener uses TLS.
//! - Sessions expire after [`IDLE_TIMEOUT`] without a request and after [`ABSOLUTE_TIMEOUT`] in
//!   any case. The store is in memory: a restart signs everyone out, which is the safe default.
//! - Every POST carries the session's CSRF token (hidden form field or `X-CSRF-Token` header),
//!   compared in constant time. The sign-in form, which has no session yet, uses a
//!   double-submit cookie instead, so a third-party page cannot sign a visitor in either.
//!
//! Time is a parameter (`now: Instant`), so expiry is unit-tested without sleeping.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rand::RngCore;
use subtle::ConstantTimeEq;

use crate::auth::Identity;

/// A session ends after this long without a request (the live refresh counts as a request).
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(8 * 3600);
/// A session ends this long after sign-in, whatever happens.
pub const ABSOLUTE_TIMEOUT: Duration = Duration::from_secs(24 * 3600);
/// At most this many sessions are kept; the least recently used go first.
const MAX_SESSIONS: usize = 10_000;

/// The session cookie's name (`__Host-` prefixed under TLS, which requires `Secure`).
pub fn cookie_name(tls: bool) -> &'static str {
    if tls { "__Host-kmirror_session" } else { "kmirror_session" }
}

/// The sign-in form's double-submit cookie.
pub fn signin_cookie_name(tls: bool) -> &'static str {
    if tls { "__Host-kmirror_signin" } else { "kmirror_signin" }
}

/// 256 random bits, hex encoded.
pub fn random_token() -> String {
    let mut b = [0u8; 32];
    rand::rng().fill_bytes(&mut b);
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Constant-time string comparison (for CSRF tokens).
pub fn same_token(a: &str, b: &str) -> bool {
    !a.is_empty() && a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

/// One signed-in visitor.
#[derive(Debug, Clone)]
pub struct Session {
    pub identity: Identity,
    pub csrf: String,
    created: Instant,
    last_seen: Instant,
}

/// The in-memory session store.
#[derive(Debug)]
pub struct SessionStore {
    sessions: Mutex<HashMap<String, Session>>,
    idle: Duration,
    absolute: Duration,
}

impl Default for SessionStore {
    fn default() -> Self {
        SessionStore::new(IDLE_TIMEOUT, ABSOLUTE_TIMEOUT)
    }
}

impl SessionStore {
    pub fn new(idle: Duration, absolute: Duration) -> SessionStore {
        SessionStore { sessions: Mutex::new(HashMap::new()), idle, absolute }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Session>> {
        // A panic while holding the lock cannot leave a half-written session behind.
        self.sessions.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn alive(&self, s: &Session, now: Instant) -> bool {
        now.saturating_duration_since(s.last_seen) < self.idle
            && now.saturating_duration_since(s.created) < self.absolute
    }

    /// Starts a session for `identity`; returns its id.
    pub fn create(&self, identity: Identity, now: Instant) -> (String, Session) {
        let id = random_token();
        let session = Session { identity, csrf: random_token(), created: now, last_seen: now };
        let mut map = self.lock();
        map.retain(|_, s| now.saturating_duration_since(s.last_seen) < self.idle);
        if map.len() >= MAX_SESSIONS
            && let Some(oldest) = map.iter().min_by_key(|(_, s)| s.last_seen).map(|(k, _)| k.clone())
        {
            map.remove(&oldest);
        }
        map.insert(id.clone(), session.clone());
        (id, session)
    }

    /// The live session with this id (and marks it used), or `None`.
    pub fn get(&self, id: &str, now: Instant) -> Option<Session> {
        if id.len() != 64 {
            return None;
        }
        let mut map = self.lock();
        let alive = map.get(id).map(|s| self.alive(s, now))?;
        if !alive {
            map.remove(id);
            return None;
        }
        let s = map.get_mut(id)?;
        s.last_seen = now;
        Some(s.clone())
    }

    /// Ends a session.
    pub fn remove(&self, id: &str) {
        self.lock().remove(id);
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::Role;

    fn alice() -> Identity {
        Identity { name: "alice".into(), role: Role::Operator }
    }

    #[test]
    fn tokens_are_256_bit_hex_and_differ() {
        let (a, b) = (random_token(), random_token());
        assert_eq!(a.len(), 64);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }

    #[test]
    fn sessions_expire_when_idle_and_absolutely() {
        let store = SessionStore::new(Duration::from_secs(10), Duration::from_secs(25));
        let t0 = Instant::now();
        let (id, s) = store.create(alice(), t0);
        assert_ne!(id, s.csrf);
        assert_eq!(store.get(&id, t0 + Duration::from_secs(9)).unwrap().identity, alice());
        // Used at 9 s, so still alive at 18 s; then idle expiry.
        assert!(store.get(&id, t0 + Duration::from_secs(18)).is_some());
        assert!(store.get(&id, t0 + Duration::from_secs(29)).is_none(), "absolute timeout");
        let (id2, _) = store.create(alice(), t0);
        assert!(store.get(&id2, t0 + Duration::from_secs(11)).is_none(), "idle timeout");
        assert!(store.get("not-a-session", t0).is_none());
    }

    #[test]
    fn removed_sessions_are_gone() {
        let store = SessionStore::default();
        let t0 = Instant::now();
        let (id, _) = store.create(alice(), t0);
        store.remove(&id);
        assert!(store.get(&id, t0).is_none());
        assert!(store.is_empty());
    }

    #[test]
    fn csrf_comparison() {
        assert!(same_token("abc", "abc"));
        assert!(!same_token("abc", "abd"));
        assert!(!same_token("", ""));
        assert!(!same_token("abc", "abcd"));
    }
}
