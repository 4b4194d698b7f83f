//! The one problem table: for every [`ProblemKind`] its stable slug, its HTTP status and its
//! title. The engine records the slug (audit trail), the API answers with all three
//! (`crate::api::ProblemType`), and the dashboard shows the title with the same status, so a
//! problem reads and answers the same wherever it surfaces.
//!
//! The statuses are the API's contract (`openapi/openapi.json` lists them in `ProblemDetails`).

use serde::{Deserialize, Serialize};

macro_rules! problem_kinds {
    ($( $(#[$doc:meta])* $variant:ident => ($slug:literal, $status:literal, $title:literal), )+) => {
        /// A stable, machine-readable problem kind (the API's problem `type` slug).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        pub enum ProblemKind {
            $( $(#[$doc])* #[serde(rename = $slug)] $variant, )+
        }

        impl ProblemKind {
            /// Every kind, in table order.
            pub const ALL: &'static [ProblemKind] = &[$(ProblemKind::$variant,)+];

            /// The stable slug: the API's problem `type`, the audit trail's error code.
            pub const fn slug(self) -> &'static str {
                match self { $(ProblemKind::$variant => $slug,)+ }
            }

            /// The HTTP status the API and the dashboard answer with.
            pub const fn status(self) -> u16 {
                match self { $(ProblemKind::$variant => $status,)+ }
            }

            /// A short, human-readable summary that never changes between occurrences (the API's
            /// problem `title`, the dashboard's heading).
            pub const fn title(self) -> &'static str {
                match self { $(ProblemKind::$variant => $title,)+ }
            }
        }
    };
}

problem_kinds! {
    /// A mirror or topic name breaks the naming rules.
    InvalidName => ("invalid-name", 400, "Invalid name"),
    /// A topic pattern is not a valid regular expression.
    InvalidPattern => ("invalid-pattern", 400, "Invalid topic pattern"),
    /// A mirror setting is out of range (e.g. a replication throttle below 1024 bytes per second).
    InvalidSetting => ("invalid-setting", 400, "Invalid mirror setting"),
    /// A source or destination client property is refused: not on the allow list, loads code,
    /// is set by kmirror itself, a reference the policy does not allow, or a value librdkafka
    /// refuses. Names the property, never its value.
    InvalidProperty => ("invalid-property", 422, "Invalid client property"),
    MirrorNotFound => ("mirror-not-found", 404, "Mirror not found"),
    MirrorExists => ("mirror-exists", 409, "Mirror already exists"),
    /// The topic does not exist on the source cluster.
    TopicNotFound => ("topic-not-found", 404, "Topic not found"),
    /// The topic is not part of the mirror.
    TopicNotInMirror => ("topic-not-in-mirror", 404, "Topic not in mirror"),
    /// The requested lifecycle change is not allowed from the topic's current state.
    IllegalTransition => ("illegal-transition", 409, "Illegal state transition"),
    DestinationDiverged => ("destination-diverged", 409, "Destination diverged"),
    DestinationTopicConflict => ("destination-topic-conflict", 409, "Destination topic conflict"),
    /// The topic matches the mirror's `topic_exclude`: it is never started (remove the pattern
    /// from `topic_exclude` first).
    TopicExcluded => ("topic-excluded", 409, "Topic excluded by the mirror's topic policy"),
    /// `resync` with `quarantine`: the quarantine topic (`<topic>.kmirror-diverged`) holds records
    /// kmirror did not copy there from this topic; nothing was copied or deleted.
    QuarantineConflict => ("quarantine-conflict", 409, "Quarantine topic holds foreign records"),
    SourceClusterIdMismatch => ("source-cluster-id-mismatch", 409, "Source cluster ID mismatch"),
    /// The operator-supplied source does not answer (a problem with the request's source, so 422
    /// rather than a 5xx of kmirror's own).
    SourceUnreachable => ("source-unreachable", 422, "Source cluster unreachable"),
    /// The source refused the mirror's credentials (SASL authentication failed). Names the
    /// mechanism and user, never the password.
    SourceAuthenticationFailed => ("source-authentication-failed", 422, "Source refused the credentials"),
    /// The TLS handshake with the source failed (its certificate is not trusted, or it refused
    /// the client certificate).
    SourceTlsFailed => ("source-tls-failed", 422, "TLS handshake with the source failed"),
    DestinationUnavailable => ("destination-unavailable", 503, "Destination cluster unavailable"),
    MirrorHasActiveTopics => ("mirror-has-active-topics", 409, "Mirror has topics that are not STOPPED"),
    /// A call that needs a second person, a rejection or a break-glass call without a reason.
    ReasonRequired => ("reason-required", 422, "A reason is required"),
    /// No approval request with this ID (or no longer kept: the last 1,000 operations are).
    ApprovalNotFound => ("approval-not-found", 404, "Approval request not found"),
    /// The identity that asked for a call tried to approve or reject it: a second person must.
    ApprovalSameIdentity => ("approval-same-identity", 403, "A second person must decide"),
    /// The request was decided already (approved, rejected) or ran.
    ApprovalNotPending => ("approval-not-pending", 409, "Approval request already decided"),
    /// Nobody decided the request in time: it expired and will never run.
    ApprovalExpired => ("approval-expired", 409, "Approval request expired"),
    /// A break-glass call by an identity below the admin role.
    BreakGlassNotAllowed => ("break-glass-not-allowed", 403, "Break-glass needs the admin role"),
    /// A drill of this mirror is already running.
    DrillRunning => ("drill-running", 409, "A drill is already running"),
    /// The source refused to create the drill's canary topic (the mirror's principal may not
    /// create topics there).
    DrillCanaryRefused => ("drill-canary-refused", 422, "The source refused the canary topic"),
    /// The drill's canary topic already exists (kmirror only ever deletes canaries it created).
    DrillCanaryExists => ("drill-canary-exists", 409, "The canary topic already exists"),
    /// No drill with this ID.
    DrillNotFound => ("drill-not-found", 404, "Drill not found"),
    /// A drill ran and one of its checks failed (its report says which).
    DrillFailed => ("drill-failed", 422, "The drill failed"),
    /// Another kmirror instance with the same instance ID took over; this one no longer writes.
    Fenced => ("fenced", 409, "This instance is fenced"),
    ShuttingDown => ("shutting-down", 503, "Shutting down"),
    Internal => ("internal", 500, "Internal error"),
    /// A call names more topics than [`MAX_TOPICS_PER_CALL`](super::MAX_TOPICS_PER_CALL), or a
    /// mirror lists more group patterns than [`MAX_GROUP_PATTERNS`](super::MAX_GROUP_PATTERNS);
    /// nothing was changed.
    TooManyTopics => ("too-many-topics", 400, "Too many topics in one call"),
    /// A promote (`topics:stop` with `require_caught_up`) timed out with partitions still behind
    /// their source (or a source that did not answer): nothing was stopped.
    NotCaughtUp => ("not-caught-up", 409, "Partitions have not caught up"),
}

impl ProblemKind {
    /// The kind whose slug is `slug` (audit records store slugs).
    pub fn from_slug(slug: &str) -> Option<ProblemKind> {
        ProblemKind::ALL.iter().copied().find(|k| k.slug() == slug)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_a_distinct_kebab_slug_and_an_error_status() {
        let mut seen = std::collections::HashSet::new();
        for k in ProblemKind::ALL {
            assert!(seen.insert(k.slug()), "duplicate slug {}", k.slug());
            assert!(k.slug().bytes().all(|b| b.is_ascii_lowercase() || b == b'-'), "{}", k.slug());
            assert!((400..600).contains(&k.status()), "{}: {}", k.slug(), k.status());
            assert!(!k.title().is_empty(), "{}", k.slug());
            assert_eq!(ProblemKind::from_slug(k.slug()), Some(*k));
        }
        assert_eq!(ProblemKind::from_slug("no-such-problem"), None);
    }

    #[test]
    fn serde_uses_the_slug() {
        for k in ProblemKind::ALL {
            assert_eq!(serde_json::to_value(k).unwrap(), serde_json::Value::String(k.slug().into()));
            assert_eq!(serde_json::from_value::<ProblemKind>(k.slug().into()).unwrap(), *k);
        }
    }
}
