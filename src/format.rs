//! Display formatting shared by the dashboard, the API's incident report and the catch-up estimates:
//! numbers, durations, instants and query strings.
//!
//! Pure functions, no clock: every relative time takes `now` as an argument, so the same
//! snapshot always renders the same text (render tests depend on it).

use crate::domain::Timestamp;

/// Shown where a value is not known yet.
pub const NONE: &str = "—";

/// `1234567` → `1,234,567`.
pub fn int(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3 + 1);
    if n < 0 {
        out.push('-');
    }
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// [`int`] for counts.
pub fn count(n: usize) -> String {
    int(i64::try_from(n).unwrap_or(i64::MAX))
}

/// [`int`], or [`NONE`].
pub fn opt_int(n: Option<i64>) -> String {
    n.map_or_else(|| NONE.to_string(), int)
}

/// A duration in milliseconds, with at most two units: `0 s`, `850 ms`, `12 s`, `3 min 4 s`,
/// `2 h 5 min`, `3 d 4 h`.
pub fn duration_ms(ms: i64) -> String {
    let ms = ms.max(0);
    if ms == 0 {
        return "0 s".into();
    }
    if ms < 1_000 {
        return format!("{ms} ms");
    }
    let s = ms / 1_000;
    if s < 60 {
        return if ms < 10_000 && ms % 1_000 != 0 {
            format!("{}.{} s", s, (ms % 1_000) / 100)
        } else {
            format!("{s} s")
        };
    }
    let (m, s) = (s / 60, s % 60);
    if m < 60 {
        return if s == 0 { format!("{m} min") } else { format!("{m} min {s} s") };
    }
    let (h, m) = (m / 60, m % 60);
    if h < 24 {
        return if m == 0 { format!("{h} h") } else { format!("{h} h {m} min") };
    }
    let (d, h) = (h / 24, h % 24);
    if h == 0 { format!("{d} d") } else { format!("{d} d {h} h") }
}

/// A lag in seconds as a duration (`0 s` when caught up).
pub fn secs(s: f64) -> String {
    if !s.is_finite() || s <= 0.0 {
        return "0 s".into();
    }
    // Saturating float-to-int conversion; sub-millisecond precision is noise here.
    duration_ms((s * 1000.0).round() as i64)
}

/// How long ago `then` was, seen at `now`: `just now`, `5 s ago`, `3 min ago`, `2 h 5 min ago`.
pub fn ago(now: Timestamp, then: Timestamp) -> String {
    let ms = then.millis_until(now);
    if ms < 1_000 {
        return if ms < -1_000 { format!("in {}", duration_ms(-ms)) } else { "just now".into() };
    }
    // Whole seconds read better in a ticking "ago" than tenths.
    format!("{} ago", duration_ms(ms - ms % 1_000))
}

/// `2026-05-01 12:00:03 UTC`.
pub fn datetime(t: Timestamp) -> String {
    let s = t.to_string(); // 2026-05-01T12:00:03.000Z
    match (s.get(..10), s.get(11..19)) {
        (Some(d), Some(hms)) => format!("{d} {hms} UTC"),
        _ => s,
    }
}

/// `1536` → `1.5 KiB`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 { format!("{n} B") } else { format!("{v:.1} {}", UNITS[unit]) }
}

/// Percent-encodes a query-string component (everything but the RFC 3986 unreserved set).
pub fn encode_component(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Builds `path?k=v&k=v` from pairs, skipping empty values.
pub fn url(path: &str, pairs: &[(&str, String)]) -> String {
    let mut out = path.to_string();
    let mut first = true;
    for (k, v) in pairs {
        if v.is_empty() {
            continue;
        }
        out.push(if first { '?' } else { '&' });
        first = false;
        out.push_str(&encode_component(k));
        out.push('=');
        out.push_str(&encode_component(v));
    }
    out
}

/// A regular expression (HTML `pattern` attribute syntax, which compiles with the `v` flag)
/// matching exactly `s`. Names here use `[a-zA-Z0-9._-]`; anything else is escaped defensively.
pub fn exact_pattern(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 4);
    for c in s.chars() {
        if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
            out.push(c);
        } else if "^$\\.*+?()[]{}|/".contains(c) {
            out.push('\\');
            out.push(c);
        } else {
            // Characters that are special inside `v`-mode classes are harmless outside them, but
            // a code point escape is valid in every mode.
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_get_thousands_separators() {
        assert_eq!(int(0), "0");
        assert_eq!(int(999), "999");
        assert_eq!(int(1_000), "1,000");
        assert_eq!(int(-1_234_567), "-1,234,567");
        assert_eq!(int(i64::MIN), "-9,223,372,036,854,775,808");
        assert_eq!(opt_int(None), NONE);
    }

    #[test]
    fn durations_use_two_units_at_most() {
        assert_eq!(duration_ms(0), "0 s");
        assert_eq!(duration_ms(850), "850 ms");
        assert_eq!(duration_ms(1_450), "1.4 s");
        assert_eq!(duration_ms(12_000), "12 s");
        assert_eq!(duration_ms(184_000), "3 min 4 s");
        assert_eq!(duration_ms(7_500_000), "2 h 5 min");
        assert_eq!(duration_ms(4 * 86_400_000 + 3_600_000), "4 d 1 h");
        assert_eq!(secs(0.0), "0 s");
        assert_eq!(secs(f64::NAN), "0 s");
        assert_eq!(secs(2.5), "2.5 s");
    }

    #[test]
    fn relative_times() {
        let now = Timestamp::from_millis(1_000_000);
        assert_eq!(ago(now, Timestamp::from_millis(999_700)), "just now");
        assert_eq!(ago(now, Timestamp::from_millis(994_500)), "5 s ago");
        assert_eq!(ago(now, Timestamp::from_millis(1_060_000)), "in 1 min");
        assert_eq!(datetime(Timestamp::from_millis(0)), "1970-01-01 00:00:00 UTC");
    }

    #[test]
    fn urls_are_encoded() {
        assert_eq!(
            url("/m", &[("q", "a b&c".into()), ("state", String::new()), ("page", "2".into())]),
            "/m?q=a%20b%26c&page=2"
        );
        assert_eq!(encode_component("<x>"), "%3Cx%3E");
    }

    #[test]
    fn exact_patterns_escape_dots() {
        assert_eq!(exact_pattern("orders.v1-eu_2"), "orders\\.v1-eu_2");
        assert_eq!(exact_pattern("a\"b"), "a\\u{22}b");
    }

    #[test]
    fn byte_sizes() {
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(1536), "1.5 KiB");
    }
}
