//! Path parameters.

use serde::Deserialize;
use utoipa::IntoParams;

/// `{mirror}` in a path.
#[derive(Debug, Clone, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct MirrorPath {
    /// Mirror name (`[a-zA-Z0-9._-]{1,249}`, not `.` or `..`).
    #[param(pattern = r"^[a-zA-Z0-9._-]{1,249}$", example = "eu-to-us")]
    pub mirror: String,
}

/// `{mirror}` and `{topic}` in a path.
#[derive(Debug, Clone, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct TopicPath {
    /// Mirror name (`[a-zA-Z0-9._-]{1,249}`, not `.` or `..`).
    #[param(pattern = r"^[a-zA-Z0-9._-]{1,249}$", example = "eu-to-us")]
    pub mirror: String,
    /// Topic name (Kafka's rules: `[a-zA-Z0-9._-]{1,249}`, not `.` or `..`).
    #[param(pattern = r"^[a-zA-Z0-9._-]{1,249}$", example = "orders")]
    pub topic: String,
}
