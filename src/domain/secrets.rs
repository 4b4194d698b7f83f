//! Which client properties are secrets. Secrets are write-only: stored, used to connect, never
//! shown in API responses, pages or logs.

/// The placeholder shown instead of a secret value.
pub const REDACTED: &str = "[redacted]";

/// Whether a client property holds a secret: anything whose name contains `password` or
/// `secret`, the JAAS config (it embeds credentials), and private-key material (`ssl.key*`).
#[must_use]
pub fn is_secret_property(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    n.contains("password")
        || n.contains("secret")
        || n == "sasl.jaas.config"
        || n.starts_with("ssl.key")
        || n == "sasl.oauthbearer.config"
}

/// A copy of `properties` with every secret value replaced by [`REDACTED`].
#[must_use]
pub fn redact<'a, I>(properties: I) -> std::collections::BTreeMap<String, String>
where
    I: IntoIterator<Item = (&'a String, &'a String)>,
{
    properties
        .into_iter()
        .map(|(k, v)| (k.clone(), if is_secret_property(k) { REDACTED.to_string() } else { v.clone() }))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_recognised_and_redacted() {
        for k in [
            "sasl.password",
            "ssl.key.password",
            "ssl.keystore.password",
            "sasl.jaas.config",
            "ssl.key.pem",
            "client.secret",
            "SASL.PASSWORD",
        ] {
            assert!(is_secret_property(k), "{k}");
        }
        for k in ["security.protocol", "sasl.mechanism", "sasl.username", "ssl.ca.location"] {
            assert!(!is_secret_property(k), "{k}");
        }
        let props: std::collections::BTreeMap<String, String> = [("sasl.username", "u"), ("sasl.password", "hunter2")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let shown = redact(&props);
        assert_eq!(shown["sasl.username"], "u");
        assert_eq!(shown["sasl.password"], REDACTED);
        assert!(!format!("{shown:?}").contains("hunter2"));
    }
}
