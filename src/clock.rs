//! The program's one wall-clock read. The domain never reads a clock (it takes a [`Timestamp`]);
//! the engine, the API and the dashboard ask here, so there is one rounding rule and one place to
//! look. `clippy.toml` forbids `SystemTime::now` everywhere else in the product code.

use crate::domain::Timestamp;

/// Wall-clock now, in milliseconds since the Unix epoch (0 if the clock is before 1970).
#[must_use]
#[allow(clippy::disallowed_methods)] // the one allowed read
pub fn now() -> Timestamp {
    let ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis());
    Timestamp::from_millis(i64::try_from(ms).unwrap_or(i64::MAX))
}
