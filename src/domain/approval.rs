//! Two-person approval: which calls on a mirror need a second person, and the rules a request
//! follows from the moment it is asked until it runs (or does not).
//!
//! A mirror's [`ApprovalPolicy`] names the [`ApprovalAction`]s that need approval and how long a
//! request waits. Such a call from one identity is not run: it becomes a *request* (pending,
//! with the caller's reason). Another identity with the operator role approves it (then it runs,
//! as the requester asked it) or rejects it; the requester can never decide on their own request;
//! a request nobody decided in time expires and does nothing. An admin may run a call at once
//! instead, with a break-glass reason that the audit trail keeps.
//!
//! Pure: time is a parameter, identities are names.

use std::collections::BTreeSet;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::Timestamp;

/// A call a policy can put behind a second person.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalAction {
    /// `topics:stop`: a failover.
    Stop,
    /// Deleting the mirror.
    Delete,
    /// A start with `truncation: resync` (destination records are deleted).
    Resync,
    /// A start that the engine recognises as a failback (the topic came from this cluster).
    Failback,
    /// A disaster-recovery drill on a canary topic.
    Drill,
}

impl ApprovalAction {
    /// Every action.
    pub const ALL: [ApprovalAction; 5] = [
        ApprovalAction::Stop,
        ApprovalAction::Delete,
        ApprovalAction::Resync,
        ApprovalAction::Failback,
        ApprovalAction::Drill,
    ];

    /// The stable slug (API, records).
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            ApprovalAction::Stop => "stop",
            ApprovalAction::Delete => "delete",
            ApprovalAction::Resync => "resync",
            ApprovalAction::Failback => "failback",
            ApprovalAction::Drill => "drill",
        }
    }

    /// The action a slug names.
    #[must_use]
    pub fn parse(slug: &str) -> Option<ApprovalAction> {
        ApprovalAction::ALL.into_iter().find(|a| a.as_str() == slug)
    }

    /// What an operator calls it.
    #[must_use]
    pub const fn label(self) -> &'static str {
        match self {
            ApprovalAction::Stop => "Fail over",
            ApprovalAction::Delete => "Delete mirror",
            ApprovalAction::Resync => "Start with resync",
            ApprovalAction::Failback => "Fail back",
            ApprovalAction::Drill => "DR drill",
        }
    }
}

impl fmt::Display for ApprovalAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How long a request waits by default: 15 minutes.
pub const DEFAULT_EXPIRES_AFTER_SECONDS: u64 = 15 * 60;
/// The shortest wait a policy may set.
pub const MIN_EXPIRES_AFTER_SECONDS: u64 = 5;
/// The longest wait a policy may set: 7 days.
pub const MAX_EXPIRES_AFTER_SECONDS: u64 = 7 * 24 * 3600;
/// The longest reason accepted, in characters.
pub const MAX_REASON_CHARS: usize = 1_000;

/// A mirror's approval policy: which calls need a second person, and how long a request waits.
/// The default needs approval for nothing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ApprovalPolicy {
    /// The calls that need a second person.
    pub required_for: BTreeSet<ApprovalAction>,
    /// How long a request waits for a decision, in seconds (5 s to 7 days; default 15 minutes).
    pub expires_after_seconds: u64,
}

impl Default for ApprovalPolicy {
    fn default() -> Self {
        ApprovalPolicy { required_for: BTreeSet::new(), expires_after_seconds: DEFAULT_EXPIRES_AFTER_SECONDS }
    }
}

impl ApprovalPolicy {
    /// Whether `action` needs a second person.
    #[must_use]
    pub fn requires(&self, action: ApprovalAction) -> bool {
        self.required_for.contains(&action)
    }

    /// Whether any call needs a second person.
    #[must_use]
    pub fn is_active(&self) -> bool {
        !self.required_for.is_empty()
    }

    /// Checks the policy's bounds; the error says what to change.
    ///
    /// # Errors
    ///
    /// A wait outside 5 s to 7 days.
    pub fn check(&self) -> Result<(), String> {
        if !(MIN_EXPIRES_AFTER_SECONDS..=MAX_EXPIRES_AFTER_SECONDS).contains(&self.expires_after_seconds) {
            return Err(format!(
                "approval.expires_after_seconds is {}; use {MIN_EXPIRES_AFTER_SECONDS} to {MAX_EXPIRES_AFTER_SECONDS} \
                 (7 days); the default is {DEFAULT_EXPIRES_AFTER_SECONDS} (15 minutes)",
                self.expires_after_seconds
            ));
        }
        Ok(())
    }

    /// When a request asked at `at` expires.
    #[must_use]
    pub fn expires_at(&self, at: Timestamp) -> Timestamp {
        at.saturating_add_millis(self.expires_after_seconds.saturating_mul(1000))
    }
}

/// Where a request stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalStatus {
    /// Waiting for a second person.
    Pending,
    /// Approved; the call is being run.
    Approved,
    /// Approved and run (its outcome is in the operation it ran as).
    Executed,
    /// Approved, but the call could not run (the engine refused it as a whole).
    Failed,
    /// Rejected by a second person: nothing was run.
    Rejected,
    /// Nobody decided in time: nothing was run.
    Expired,
    /// Run at once by an admin with a break-glass reason, without a second person.
    BreakGlass,
}

impl ApprovalStatus {
    /// Every status.
    pub const ALL: [ApprovalStatus; 7] = [
        ApprovalStatus::Pending,
        ApprovalStatus::Approved,
        ApprovalStatus::Executed,
        ApprovalStatus::Failed,
        ApprovalStatus::Rejected,
        ApprovalStatus::Expired,
        ApprovalStatus::BreakGlass,
    ];

    /// The stable slug.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            ApprovalStatus::Pending => "pending",
            ApprovalStatus::Approved => "approved",
            ApprovalStatus::Executed => "executed",
            ApprovalStatus::Failed => "failed",
            ApprovalStatus::Rejected => "rejected",
            ApprovalStatus::Expired => "expired",
            ApprovalStatus::BreakGlass => "break_glass",
        }
    }

    /// The status a slug names.
    #[must_use]
    pub fn parse(slug: &str) -> Option<ApprovalStatus> {
        ApprovalStatus::ALL.into_iter().find(|s| s.as_str() == slug)
    }

    /// What an operator reads.
    #[must_use]
    pub const fn label(self) -> &'static str {
        match self {
            ApprovalStatus::Pending => "awaiting approval",
            ApprovalStatus::Approved => "approved, running",
            ApprovalStatus::Executed => "approved and run",
            ApprovalStatus::Failed => "approved, could not run",
            ApprovalStatus::Rejected => "rejected",
            ApprovalStatus::Expired => "expired",
            ApprovalStatus::BreakGlass => "run with break-glass",
        }
    }
}

impl fmt::Display for ApprovalStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The status a request shows at `now`: a pending request past its expiry is expired, whatever
/// was stored (expiry writes nothing; it only stops the request from ever running).
#[must_use]
pub fn status_at(stored: ApprovalStatus, expires_at: Timestamp, now: Timestamp) -> ApprovalStatus {
    if stored == ApprovalStatus::Pending && now >= expires_at { ApprovalStatus::Expired } else { stored }
}

/// A decision on a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Approve,
    Reject,
}

impl Decision {
    /// The status a request takes with this decision.
    #[must_use]
    pub const fn status(self) -> ApprovalStatus {
        match self {
            Decision::Approve => ApprovalStatus::Approved,
            Decision::Reject => ApprovalStatus::Rejected,
        }
    }

    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Decision::Approve => "approve",
            Decision::Reject => "reject",
        }
    }
}

/// Why a decision is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecisionRefused {
    /// The requester tried to decide on their own request.
    SameIdentity { identity: String },
    /// The request was decided already (or ran, or was a break-glass entry).
    NotPending { status: ApprovalStatus },
    /// Nobody decided in time.
    Expired { expired_at: Timestamp },
}

impl fmt::Display for DecisionRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecisionRefused::SameIdentity { identity } => write!(
                f,
                "{identity:?} asked for this call and cannot decide on it: a second person (another identity with the \
                 operator role) must approve or reject it"
            ),
            DecisionRefused::NotPending { status } => {
                write!(f, "the request is {} ({}), not waiting for a decision", status.as_str(), status.label())
            }
            DecisionRefused::Expired { expired_at } => write!(
                f,
                "the request expired at {expired_at} without a decision and will never run; ask for the call again"
            ),
        }
    }
}

/// Whether `decider` may decide at `now` on a request asked by `requester`, stored as `stored`
/// and expiring at `expires_at`.
///
/// # Errors
///
/// [`DecisionRefused`]: the same identity, a request that is not pending, or one that expired.
pub fn check_decision(
    requester: &str,
    stored: ApprovalStatus,
    expires_at: Timestamp,
    decider: &str,
    now: Timestamp,
) -> Result<(), DecisionRefused> {
    match status_at(stored, expires_at, now) {
        ApprovalStatus::Pending => {}
        ApprovalStatus::Expired => return Err(DecisionRefused::Expired { expired_at: expires_at }),
        status => return Err(DecisionRefused::NotPending { status }),
    }
    if requester == decider {
        return Err(DecisionRefused::SameIdentity { identity: decider.to_string() });
    }
    Ok(())
}

/// A reason as given, trimmed; the error says what is wrong with it. Every request, rejection and
/// break-glass call needs one: it is what the audit trail shows an auditor.
///
/// # Errors
///
/// An empty reason, one longer than [`MAX_REASON_CHARS`], or one with control characters other
/// than line breaks and tabs.
pub fn check_reason(reason: Option<&str>, what: &str) -> Result<String, String> {
    let reason = reason.map(str::trim).unwrap_or_default();
    if reason.is_empty() {
        return Err(format!("{what} needs a reason: say why (`reason`), for the second person and the audit trail"));
    }
    if reason.chars().count() > MAX_REASON_CHARS {
        return Err(format!("the reason is longer than {MAX_REASON_CHARS} characters"));
    }
    if reason.chars().any(|c| c.is_control() && !matches!(c, '\n' | '\t' | '\r')) {
        return Err("the reason holds control characters; use plain text".to_string());
    }
    Ok(reason.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ms: i64) -> Timestamp {
        Timestamp::from_millis(ms)
    }

    #[test]
    fn slugs_round_trip_and_the_default_policy_needs_nothing() {
        for a in ApprovalAction::ALL {
            assert_eq!(ApprovalAction::parse(a.as_str()), Some(a));
            assert_eq!(serde_json::to_value(a).unwrap(), a.as_str());
        }
        for s in ApprovalStatus::ALL {
            assert_eq!(ApprovalStatus::parse(s.as_str()), Some(s));
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
        let p = ApprovalPolicy::default();
        assert!(!p.is_active() && ApprovalAction::ALL.iter().all(|a| !p.requires(*a)));
        assert_eq!(p.expires_after_seconds, 900);
        assert_eq!(p.check(), Ok(()));
        let p: ApprovalPolicy = serde_json::from_str(r#"{"required_for": ["stop", "delete"]}"#).unwrap();
        assert!(p.requires(ApprovalAction::Stop) && p.requires(ApprovalAction::Delete));
        assert!(!p.requires(ApprovalAction::Drill));
        assert_eq!(p.expires_at(t(1_000)), t(901_000));
        assert!(serde_json::from_str::<ApprovalPolicy>(r#"{"required_for": ["reboot"]}"#).is_err());
        assert!(serde_json::from_str::<ApprovalPolicy>(r#"{"wait": 3}"#).is_err());
    }

    #[test]
    fn the_wait_is_bounded() {
        for (secs, ok) in [(4, false), (5, true), (900, true), (604_800, true), (604_801, false), (0, false)] {
            let p = ApprovalPolicy { expires_after_seconds: secs, ..Default::default() };
            assert_eq!(p.check().is_ok(), ok, "{secs}");
        }
        let e = ApprovalPolicy { expires_after_seconds: 1, ..Default::default() }.check().unwrap_err();
        assert!(e.contains("expires_after_seconds is 1") && e.contains("7 days"), "{e}");
    }

    #[test]
    fn a_pending_request_expires_at_its_deadline_and_nothing_else_does() {
        assert_eq!(status_at(ApprovalStatus::Pending, t(100), t(99)), ApprovalStatus::Pending);
        assert_eq!(status_at(ApprovalStatus::Pending, t(100), t(100)), ApprovalStatus::Expired);
        for s in [ApprovalStatus::Executed, ApprovalStatus::Rejected, ApprovalStatus::BreakGlass] {
            assert_eq!(status_at(s, t(100), t(1_000)), s);
        }
    }

    #[test]
    fn only_another_identity_decides_and_only_in_time() {
        let ok = check_decision("alice", ApprovalStatus::Pending, t(100), "bob", t(50));
        assert_eq!(ok, Ok(()));
        let same = check_decision("alice", ApprovalStatus::Pending, t(100), "alice", t(50)).unwrap_err();
        assert_eq!(same, DecisionRefused::SameIdentity { identity: "alice".into() });
        assert!(same.to_string().contains("second person"), "{same}");
        // Expiry wins over the identity check: an expired request is dead for everyone.
        let late = check_decision("alice", ApprovalStatus::Pending, t(100), "alice", t(100)).unwrap_err();
        assert_eq!(late, DecisionRefused::Expired { expired_at: t(100) });
        assert!(late.to_string().contains("will never run"), "{late}");
        for s in [ApprovalStatus::Executed, ApprovalStatus::Rejected, ApprovalStatus::Approved] {
            assert_eq!(
                check_decision("alice", s, t(100), "bob", t(50)),
                Err(DecisionRefused::NotPending { status: s })
            );
        }
        assert_eq!(Decision::Approve.status(), ApprovalStatus::Approved);
        assert_eq!(Decision::Reject.status(), ApprovalStatus::Rejected);
    }

    #[test]
    fn reasons_are_required_and_plain() {
        assert_eq!(check_reason(Some("  planned DR test  "), "x"), Ok("planned DR test".into()));
        assert!(check_reason(None, "A failover").unwrap_err().starts_with("A failover needs a reason"));
        assert!(check_reason(Some("   "), "x").is_err());
        assert!(check_reason(Some(&"r".repeat(MAX_REASON_CHARS + 1)), "x").unwrap_err().contains("longer"));
        assert!(check_reason(Some(&"r".repeat(MAX_REASON_CHARS)), "x").is_ok());
        assert!(check_reason(Some("a\u{1b}[31mred"), "x").unwrap_err().contains("control"));
        assert!(check_reason(Some("line one\nline two"), "x").is_ok());
    }
}
