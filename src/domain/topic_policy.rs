//! A mirror's topic policy (KIP-1279's `topics.include` / `topics.exclude`) and what discovery
//! makes of it.
//!
//! The mirror holds the policy, not a list: source topics whose whole name matches an include
//! pattern and no exclude pattern are mirrored, whenever they appear. Exclusions take precedence,
//! and a topic being mirrored that comes to match them is stopped. An empty include list means
//! "only the topics someone started" (discovery starts nothing), as the KIP's default.
//!
//! Everything here is pure: the engine lists the source's topics, hands them to [`plan`] with
//! what it knows of the mirror's topics, and carries out the answer through the same path as an
//! operator's `topics:start` / `topics:stop`. The API's `validate_only` preview of a policy
//! change calls the same [`plan`], so it cannot disagree with what the run then does.

use std::collections::{BTreeMap, BTreeSet};

use super::name_pattern::{NamePattern, PatternError};

/// Exclusions a mirror has unless it is given others: Kafka's internal topics (`__consumer_offsets`,
/// `__transaction_state`, `__mirror_state`, ...) and kmirror's own quarantine topics.
pub const DEFAULT_EXCLUDE: &[&str] = &["__.*", r".*\.kmirror-diverged"];

/// The most patterns either list may hold.
pub const MAX_PATTERNS: usize = 100;

/// The default exclude list, owned.
#[must_use]
pub fn default_exclude() -> Vec<String> {
    DEFAULT_EXCLUDE.iter().map(|s| (*s).to_string()).collect()
}

/// Why a policy was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    #[error("topic_{list} has {count} patterns; at most {MAX_PATTERNS} are allowed")]
    TooMany { list: &'static str, count: usize },
    #[error("invalid topic_{list} pattern {:?}: {}", .error.pattern, .error.reason)]
    Invalid { list: &'static str, error: PatternError },
    #[error("topic_{list} holds an empty pattern")]
    Empty { list: &'static str },
}

/// A compiled policy.
#[derive(Debug, Clone)]
pub struct TopicPolicy {
    include: Vec<NamePattern>,
    exclude: Vec<NamePattern>,
}

impl TopicPolicy {
    /// Compiles both lists; the first pattern that is refused is the error.
    pub fn new(include: &[String], exclude: &[String]) -> Result<Self, PolicyError> {
        Ok(Self { include: compile("include", include)?, exclude: compile("exclude", exclude)? })
    }

    /// Like [`TopicPolicy::new`], leaving out patterns that do not compile: for a policy that was
    /// checked when it was stored (one that no longer compiles selects and excludes nothing).
    #[must_use]
    pub fn lenient(include: &[String], exclude: &[String]) -> Self {
        let compile = |list: &[String]| list.iter().filter_map(|p| NamePattern::new(p).ok()).collect();
        Self { include: compile(include), exclude: compile(exclude) }
    }

    /// Whether discovery starts anything at all (some include pattern).
    #[must_use]
    pub fn discovers(&self) -> bool {
        !self.include.is_empty()
    }

    /// The exclude pattern that matches `name`, if any.
    #[must_use]
    pub fn excluded_by(&self, name: &str) -> Option<&str> {
        self.exclude.iter().find(|p| p.is_match(name)).map(NamePattern::as_str)
    }

    /// Whether `name` matches an include pattern (exclusions aside).
    #[must_use]
    pub fn included(&self, name: &str) -> bool {
        self.include.iter().any(|p| p.is_match(name))
    }
}

fn compile(list: &'static str, patterns: &[String]) -> Result<Vec<NamePattern>, PolicyError> {
    if patterns.len() > MAX_PATTERNS {
        return Err(PolicyError::TooMany { list, count: patterns.len() });
    }
    patterns
        .iter()
        .map(|p| {
            if p.trim().is_empty() {
                return Err(PolicyError::Empty { list });
            }
            NamePattern::new(p).map_err(|error| PolicyError::Invalid { list, error })
        })
        .collect()
}

/// Adds `pattern` to `list` unless it is there already; whether it was added.
pub fn append(list: &mut Vec<String>, pattern: &str) -> bool {
    if list.iter().any(|p| p == pattern) {
        return false;
    }
    list.push(pattern.to_string());
    true
}

/// What discovery knows of a topic the mirror has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MirrorTopic {
    /// Some partition is not STOPPED: mirroring, paused, preparing, failed, between states.
    Active,
    /// Every partition is STOPPED (failed over): the mirror keeps it, discovery never restarts it.
    Stopped,
}

/// The facts a discovery run (or a preview) decides from.
#[derive(Debug, Clone, Default)]
pub struct Facts<'a> {
    /// The source's topic names, as listed now.
    pub source_topics: &'a [String],
    /// The mirror's own topics.
    pub mirror_topics: BTreeMap<String, MirrorTopic>,
    /// Topics other mirrors of this destination hold: topic -> that mirror.
    pub other_mirrors: BTreeMap<String, String>,
    /// Topics a start refused lately (the engine retries them only when something changes).
    pub refused: BTreeSet<String>,
}

/// What a run does, and what it saw.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Plan {
    /// Source topics to start now, in name order.
    pub start: Vec<String>,
    /// Topics of the mirror to stop because they match an exclusion: (topic, the pattern).
    pub stop: Vec<(String, String)>,
    /// Source topics the include list matches (exclusions aside), in name order.
    pub matched: Vec<String>,
    /// Matched source topics left out by an exclusion or as internal: (topic, why).
    pub excluded: Vec<(String, String)>,
    /// Matched source topics another mirror holds: (topic, that mirror).
    pub taken: Vec<(String, String)>,
    /// Matched topics the mirror has already (in any state).
    pub mirrored: usize,
    /// Matched topics not started because a start refused them lately.
    pub held_back: Vec<String>,
}

/// Decides a run: which source topics to start (included, not excluded, not internal, not the
/// mirror's yet, not another mirror's, not refused lately) and which of the mirror's topics to
/// stop (not yet STOPPED and matching an exclusion). `is_internal` says which names are never
/// mirrored whatever the policy (internal topics, the state topic).
#[must_use]
pub fn plan(policy: &TopicPolicy, facts: &Facts<'_>, is_internal: impl Fn(&str) -> bool) -> Plan {
    let mut out = Plan::default();
    let listed: BTreeSet<&str> = facts.source_topics.iter().map(String::as_str).collect();
    for &name in &listed {
        if !policy.included(name) {
            continue;
        }
        out.matched.push(name.to_string());
        if let Some(p) = policy.excluded_by(name) {
            out.excluded.push((name.to_string(), format!("matches topic_exclude pattern {p:?}")));
            continue;
        }
        if is_internal(name) {
            out.excluded.push((name.to_string(), "an internal topic (never mirrored)".to_string()));
            continue;
        }
        if facts.mirror_topics.contains_key(name) {
            out.mirrored += 1;
            continue;
        }
        if let Some(other) = facts.other_mirrors.get(name) {
            out.taken.push((name.to_string(), other.clone()));
            continue;
        }
        if facts.refused.contains(name) {
            out.held_back.push(name.to_string());
            continue;
        }
        out.start.push(name.to_string());
    }
    for (name, state) in &facts.mirror_topics {
        if *state == MirrorTopic::Active
            && let Some(p) = policy.excluded_by(name)
        {
            out.stop.push((name.clone(), p.to_string()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| (*x).to_string()).collect()
    }

    fn internal(n: &str) -> bool {
        n.starts_with("__")
    }

    #[test]
    fn included_topics_start_unless_excluded_internal_mirrored_taken_or_refused() {
        let policy = TopicPolicy::new(&s(&[r"orders\..*", "pay"]), &s(&[r"orders\.tmp.*", "__.*"])).unwrap();
        let source = s(&[
            "orders.eu",
            "orders.us",
            "orders.tmp1",
            "pay",
            "payroll",
            "other",
            "orders.taken",
            "orders.refused",
            "orders.old",
        ]);
        let facts = Facts {
            source_topics: &source,
            mirror_topics: [("orders.old".to_string(), MirrorTopic::Stopped)].into(),
            other_mirrors: [("orders.taken".to_string(), "m2".to_string())].into(),
            refused: ["orders.refused".to_string()].into(),
        };
        let p = plan(&policy, &facts, internal);
        assert_eq!(p.start, s(&["orders.eu", "orders.us", "pay"]));
        assert_eq!(p.matched.len(), 7, "{p:?}");
        assert_eq!(
            p.excluded,
            vec![("orders.tmp1".to_string(), "matches topic_exclude pattern \"orders\\\\.tmp.*\"".to_string())]
        );
        assert_eq!(p.taken, vec![("orders.taken".to_string(), "m2".to_string())]);
        assert_eq!(p.held_back, s(&["orders.refused"]));
        assert_eq!(p.mirrored, 1, "a STOPPED topic is the mirror's: never restarted");
        assert!(p.stop.is_empty());
    }

    #[test]
    fn exclusions_win_and_stop_active_topics_only() {
        let policy = TopicPolicy::new(&s(&[".*"]), &s(&["secret.*"])).unwrap();
        let source = s(&["secret.a", "secret.b", "public"]);
        let facts = Facts {
            source_topics: &source,
            mirror_topics: [
                ("secret.a".to_string(), MirrorTopic::Active),
                ("secret.b".to_string(), MirrorTopic::Stopped),
                ("public".to_string(), MirrorTopic::Active),
            ]
            .into(),
            ..Facts::default()
        };
        let p = plan(&policy, &facts, internal);
        assert_eq!(p.stop, vec![("secret.a".to_string(), "secret.*".to_string())]);
        assert!(p.start.is_empty());
    }

    #[test]
    fn an_empty_include_list_starts_nothing_and_internal_topics_never_start() {
        let source = s(&["a", "__consumer_offsets"]);
        let none = TopicPolicy::new(&[], &default_exclude()).unwrap();
        assert!(!none.discovers());
        assert_eq!(plan(&none, &Facts { source_topics: &source, ..Facts::default() }, internal), Plan::default());
        let all = TopicPolicy::new(&s(&[".*"]), &[]).unwrap();
        let p = plan(&all, &Facts { source_topics: &source, ..Facts::default() }, internal);
        assert_eq!(p.start, s(&["a"]));
        assert_eq!(p.excluded[0].0, "__consumer_offsets");
    }

    #[test]
    fn default_exclusions_cover_internal_and_quarantine_topics() {
        let p = TopicPolicy::new(&s(&[".*"]), &default_exclude()).unwrap();
        assert!(p.excluded_by("__consumer_offsets").is_some());
        assert!(p.excluded_by("orders.kmirror-diverged").is_some());
        assert!(p.excluded_by("orders").is_none());
    }

    #[test]
    fn bad_policies_are_refused_with_the_list_and_pattern() {
        let e = TopicPolicy::new(&s(&["ok", "bad("]), &[]).unwrap_err();
        assert!(e.to_string().starts_with("invalid topic_include pattern \"bad(\": "), "{e}");
        let e = TopicPolicy::new(&[], &s(&[" "])).unwrap_err();
        assert_eq!(e.to_string(), "topic_exclude holds an empty pattern");
        let many: Vec<String> = (0..=MAX_PATTERNS).map(|i| format!("t{i}")).collect();
        assert!(matches!(TopicPolicy::new(&many, &[]), Err(PolicyError::TooMany { list: "include", .. })));
        // Alternation cannot escape whole-name matching.
        assert!(TopicPolicy::new(&s(&["a)|(b"]), &[]).is_err());
    }

    #[test]
    fn append_adds_once() {
        let mut l = s(&["a"]);
        assert!(!append(&mut l, "a"));
        assert!(append(&mut l, "b"));
        assert_eq!(l, s(&["a", "b"]));
    }
}
