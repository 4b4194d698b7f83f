//! Identities and roles shared by the REST API (bearer tokens) and the dashboard (sign-in with the
//! same tokens, then a session cookie).
//!
//! Tokens are compared in constant time and never logged: `Identity` carries only the name and
//! role, and `TokenStore`'s `Debug` shows names, not tokens.

use serde::{Deserialize, Serialize};
use subtle::ConstantTimeEq;

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
}

impl std::fmt::Debug for TokenStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.entries.iter().map(|e| e.name.as_str()).collect();
        f.debug_struct("TokenStore").field("identities", &names).field("disabled", &self.disabled).finish()
    }
}

impl TokenStore {
    pub fn new(entries: Vec<TokenEntry>) -> TokenStore {
        TokenStore { entries, disabled: false }
    }

    /// Adds the bootstrap admin token from `KMIRROR_ADMIN_TOKEN`, when set and non-empty.
    pub fn with_env_admin(mut self) -> TokenStore {
        if let Ok(token) = std::env::var("KMIRROR_ADMIN_TOKEN")
            && !token.trim().is_empty()
        {
            self.entries.push(TokenEntry { name: "admin (KMIRROR_ADMIN_TOKEN)".into(), token, role: Role::Admin });
        }
        self
    }

    /// No authentication at all (only for a loopback listener; the caller checks that).
    pub fn disabled() -> TokenStore {
        TokenStore { entries: Vec::new(), disabled: true }
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
    fn disabled_auth_is_an_anonymous_admin() {
        assert_eq!(TokenStore::disabled().authenticate("anything").unwrap().role, Role::Admin);
    }
}
