//! Topic and group name patterns: the one way kmirror turns a pattern an operator gives (a topic
//! selector's `pattern`, a mirror's `group_include` / `group_exclude`) into a regex.
//!
//! A pattern matches a *whole* name: `orders\..*` selects `orders.eu` but not `x.orders.eu`, as if
//! written `^(?:orders\..*)$`. Compiled size is limited ([`SIZE_LIMIT`]) so a pattern from an API
//! call cannot make kmirror build a huge automaton; the API, the engine and the metadata sync
//! accept and refuse exactly the same patterns.

use std::fmt;

/// The most memory one compiled pattern may take (bytes).
pub const SIZE_LIMIT: usize = 1 << 20;

/// A compiled whole-name pattern.
#[derive(Clone)]
pub struct NamePattern {
    pattern: String,
    regex: regex::Regex,
}

/// A pattern that does not compile: which one, and why (never truncated).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid pattern {pattern:?}: {reason}")]
pub struct PatternError {
    pub pattern: String,
    pub reason: String,
}

impl NamePattern {
    /// Compiles `pattern` to match whole names.
    pub fn new(pattern: &str) -> Result<Self, PatternError> {
        // The pattern must be a whole expression on its own: wrapped as it is, `a)|(b` would
        // become `^(?:a)|(b)$` and match any name that starts with `a` or ends with `b`.
        regex::RegexBuilder::new(pattern)
            .size_limit(SIZE_LIMIT)
            .build()
            .map_err(|e| PatternError { pattern: pattern.to_string(), reason: e.to_string() })?;
        let regex = regex::RegexBuilder::new(&format!("^(?:{pattern})$"))
            .size_limit(SIZE_LIMIT)
            .build()
            .map_err(|e| PatternError { pattern: pattern.to_string(), reason: e.to_string() })?;
        Ok(Self { pattern: pattern.to_string(), regex })
    }

    /// Whether the pattern matches all of `name`.
    #[must_use]
    pub fn is_match(&self, name: &str) -> bool {
        self.regex.is_match(name)
    }

    /// The pattern as given.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.pattern
    }
}

impl fmt::Debug for NamePattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("NamePattern").field(&self.pattern).finish()
    }
}

/// Names selected by include patterns and not excluded: a mirror's group filter.
#[derive(Debug, Clone, Default)]
pub struct NameFilter {
    include: Vec<NamePattern>,
    exclude: Vec<NamePattern>,
}

impl NameFilter {
    /// Compiles both lists; the first pattern that does not compile is the error.
    pub fn new(include: &[String], exclude: &[String]) -> Result<Self, PatternError> {
        let compile = |list: &[String]| list.iter().map(|p| NamePattern::new(p)).collect::<Result<Vec<_>, _>>();
        Ok(Self { include: compile(include)?, exclude: compile(exclude)? })
    }

    /// Like [`NameFilter::new`], leaving out patterns that do not compile (for patterns checked
    /// when they were stored: one that no longer compiles selects nothing, and excludes nothing).
    #[must_use]
    pub fn lenient(include: &[String], exclude: &[String]) -> Self {
        let compile = |list: &[String]| list.iter().filter_map(|p| NamePattern::new(p).ok()).collect();
        Self { include: compile(include), exclude: compile(exclude) }
    }

    /// Whether `name` matches an include pattern and no exclude pattern.
    #[must_use]
    pub fn matches(&self, name: &str) -> bool {
        self.include.iter().any(|p| p.is_match(name)) && !self.exclude.iter().any(|p| p.is_match(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alternation_cannot_escape_the_whole_name_anchoring() {
        for bad in ["a)|(b", "x)|.*|(y", ")(", "a)"] {
            assert!(NamePattern::new(bad).is_err(), "{bad}");
        }
        let p = NamePattern::new("orders|payments").unwrap();
        assert!(p.is_match("orders") && p.is_match("payments"));
        assert!(!p.is_match("orders.eu") && !p.is_match("x.payments"), "alternation stays whole-name");
    }

    #[test]
    fn a_pattern_matches_whole_names_only() {
        let p = NamePattern::new(r"orders\..*").unwrap();
        assert!(p.is_match("orders.eu"));
        assert!(!p.is_match("x.orders.eu"));
        assert!(!p.is_match("orders"));
        // An alternation is anchored as a whole, not only its first and last branch.
        let p = NamePattern::new("a|b").unwrap();
        assert!(p.is_match("a") && p.is_match("b"));
        assert!(!p.is_match("ab") && !p.is_match("xa") && !p.is_match("bx"));
        assert_eq!(p.as_str(), "a|b");
    }

    #[test]
    fn an_invalid_or_huge_pattern_is_an_error_naming_it() {
        let e = NamePattern::new("orders(").unwrap_err();
        assert_eq!(e.pattern, "orders(");
        assert!(e.to_string().starts_with("invalid pattern \"orders(\": "), "{e}");
        // `\w{1000}{1000}` compiles to far more than the limit.
        assert!(NamePattern::new(r"\w{1000}{1000}").is_err());
    }

    #[test]
    fn a_filter_includes_then_excludes() {
        let f = NameFilter::new(&["billing.*".into(), "pay".into()], &["billing-test".into()]).unwrap();
        assert!(f.matches("billing-eu") && f.matches("pay"));
        assert!(!f.matches("billing-test") && !f.matches("payroll") && !f.matches("other"));
        assert!(!NameFilter::default().matches("anything"), "nothing included, nothing selected");
        assert!(NameFilter::new(&["ok".into()], &["(".into()]).is_err());
        let lenient = NameFilter::lenient(&["ok".into(), "(".into()], &["(".into()]);
        assert!(lenient.matches("ok"));
    }
}
