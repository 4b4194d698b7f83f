//! Wall-clock instants as plain values.
//!
//! The domain never reads a clock: every function that needs "now" takes a [`Timestamp`]
//! argument, so transitions are deterministic and tests control time completely.

use std::fmt;

use serde::{Deserialize, Serialize};

const MILLIS_PER_DAY: i64 = 86_400_000;

/// Milliseconds since the Unix epoch (UTC), the same unit Kafka uses for record timestamps.
///
/// Serialised as a bare integer. `Display` renders RFC 3339 (`2026-05-01T12:00:00.000Z`), which
/// is what user-facing messages such as "the next retry is due at …" show.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Timestamp(i64);

impl Timestamp {
    /// The Unix epoch.
    pub const EPOCH: Self = Self(0);

    /// A timestamp `millis` milliseconds after the Unix epoch.
    #[must_use]
    pub const fn from_millis(millis: i64) -> Self {
        Self(millis)
    }

    /// Milliseconds since the Unix epoch.
    #[must_use]
    pub const fn as_millis(self) -> i64 {
        self.0
    }

    /// This instant plus `millis`, saturating at the end of time instead of overflowing.
    #[must_use]
    pub fn saturating_add_millis(self, millis: u64) -> Self {
        let millis = i64::try_from(millis).unwrap_or(i64::MAX);
        Self(self.0.saturating_add(millis))
    }

    /// Milliseconds from `self` until `later`; negative when `later` is in the past.
    #[must_use]
    pub fn millis_until(self, later: Self) -> i64 {
        later.0.saturating_sub(self.0)
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let days = self.0.div_euclid(MILLIS_PER_DAY);
        let millis_of_day = self.0.rem_euclid(MILLIS_PER_DAY);
        let (year, month, day) = civil_from_days(days);
        let hour = millis_of_day / 3_600_000;
        let minute = millis_of_day / 60_000 % 60;
        let second = millis_of_day / 1_000 % 60;
        let millis = millis_of_day % 1_000;
        write!(f, "{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}.{millis:03}Z")
    }
}

/// Proleptic Gregorian (year, month, day) for a count of days since 1970-01-01.
///
/// Howard Hinnant's `civil_from_days`; exact for every day an `i64` of milliseconds can name.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era = (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
    let month = if month_from_march < 10 { month_from_march + 3 } else { month_from_march - 9 };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_is_rfc3339_utc_with_millis() {
        assert_eq!(Timestamp::EPOCH.to_string(), "1970-01-01T00:00:00.000Z");
        // 2026-05-01T12:34:56.789Z
        assert_eq!(Timestamp::from_millis(1_777_638_896_789).to_string(), "2026-05-01T12:34:56.789Z");
        // Leap day and pre-epoch instants.
        assert_eq!(Timestamp::from_millis(951_782_400_000).to_string(), "2000-02-29T00:00:00.000Z");
        assert_eq!(Timestamp::from_millis(-1).to_string(), "1969-12-31T23:59:59.999Z");
    }

    #[test]
    fn arithmetic_saturates() {
        let t = Timestamp::from_millis(i64::MAX - 5);
        assert_eq!(t.saturating_add_millis(u64::MAX), Timestamp::from_millis(i64::MAX));
        assert_eq!(Timestamp::from_millis(10).millis_until(Timestamp::from_millis(4)), -6);
    }

    #[test]
    fn serialises_as_a_bare_integer() {
        let json = serde_json::to_string(&Timestamp::from_millis(42)).unwrap();
        assert_eq!(json, "42");
        assert_eq!(serde_json::from_str::<Timestamp>("42").unwrap(), Timestamp::from_millis(42));
    }
}
