//! Secret values kept out of every error text: the values this process handed to a Kafka client
//! (as given, or as their references resolved) are remembered when a client is configured
//! (`client`), and taken out of any text a client library raises before it is shown, logged or
//! stored (`error` applies it to every `KafkaError` it displays).

use std::collections::BTreeSet;
use std::sync::RwLock;

use crate::domain::secrets;

/// Secret values handed to librdkafka by this process (as given, or as their references
/// resolved): whatever error text a client library raises, [`scrub_secrets`] takes them out
/// before it is shown, logged or stored. A set, so a value used by many clients is kept once;
/// values shorter than [`MIN_SCRUBBED_LEN`] are left alone (they would garble every message
/// without hiding anything).
static SECRET_VALUES: RwLock<BTreeSet<String>> = RwLock::new(BTreeSet::new());

/// See [`SECRET_VALUES`].
const MIN_SCRUBBED_LEN: usize = 4;

/// At most this many distinct values are remembered (a long-running process whose secrets
/// rotate): past it the oldest-sorted are dropped, never the newest.
const MAX_SCRUBBED_VALUES: usize = 4_096;

pub(crate) fn remember_secret(value: &str) {
    if value.len() < MIN_SCRUBBED_LEN {
        return;
    }
    let mut set = SECRET_VALUES.write().unwrap_or_else(std::sync::PoisonError::into_inner);
    if set.contains(value) {
        return;
    }
    if set.len() >= MAX_SCRUBBED_VALUES
        && let Some(first) = set.iter().next().cloned()
    {
        set.remove(&first);
    }
    set.insert(value.to_string());
}

/// `text` with every secret value this process handed to a client replaced by the placeholder.
/// Applied to every [`KafkaError`] when it is displayed, so no error text that leaves the Kafka
/// layer (API answers, the audit trail, the state topic, health, the report, logs) carries one.
pub(crate) fn scrub_secrets(text: &str) -> String {
    let set = SECRET_VALUES.read().unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut out = text.to_string();
    // Longest first: a secret that contains another is replaced whole.
    let mut values: Vec<&String> = set.iter().filter(|v| out.contains(v.as_str())).collect();
    values.sort_by_key(|v| std::cmp::Reverse(v.len()));
    for v in values {
        out = out.replace(v.as_str(), secrets::REDACTED);
    }
    out
}
