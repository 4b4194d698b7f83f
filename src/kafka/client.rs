//! Every rdkafka client kmirror builds (admin clients, the data path's consumer and producer, the
//! state reader and writer) gets its settings here, from the user's own property map.
//!
//! Why one place: the data path once copied settings with rdkafka's `ClientConfig::config_map()`,
//! which shows secrets (`sasl.password`, `ssl.key.password`, ...) as a placeholder, so the pipe
//! authenticated with the placeholder while the admin client (built from the map) worked. Here
//! the map is applied directly, references (`${env:NAME}`, `${file:/path}`) are resolved at the
//! last moment, and every error names a property, never its value (rdkafka's own config errors end
//! with `<key> <value>`).

use std::collections::BTreeMap;
use std::sync::RwLock;

use rdkafka::ClientConfig;
use rdkafka::config::FromClientConfig;

use super::error::{KafkaError, KafkaResult};
use super::scrub::remember_secret;
pub(crate) use super::scrub::scrub_secrets;
pub(crate) use crate::domain::secrets::ClientKind;
use crate::domain::secrets::{self, PropertyClass, Reference, ReferencePolicy};

static POLICY: RwLock<Option<ReferencePolicy>> = RwLock::new(None);

/// Sets which references this process resolves (from kmirror's configuration `[secrets]`), before
/// any client is built. Until it is called (tests, `demo`) [`ReferencePolicy::default`] applies.
pub fn set_reference_policy(policy: ReferencePolicy) {
    *POLICY.write().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(policy);
}

/// The policy in force.
pub fn reference_policy() -> ReferencePolicy {
    POLICY.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone().unwrap_or_default()
}

/// Builds a client config: bootstrap servers, kmirror's connection defaults, the caller's tuning
/// `defaults`, then the user's `properties` (resolved) over them. The caller sets what its
/// correctness depends on afterwards, so the user cannot override that.
///
/// Properties the allow list refuses (`plugin.library.paths`, ...) are never passed to librdkafka,
/// even when they come from a stored record written before the list existed or by hand: they are
/// an error here.
///
/// `kind` is the client the config is for: the user's properties that librdkafka uses only in
/// the other kind are left out (librdkafka would ignore them with a warning per client). `None`
/// keeps them all, for checking values.
pub(crate) fn client_config(
    kind: Option<ClientKind>,
    bootstrap: &str,
    properties: &BTreeMap<String, String>,
    defaults: &[(&str, &str)],
) -> KafkaResult<ClientConfig> {
    let mut cfg = ClientConfig::new();
    cfg.set("bootstrap.servers", bootstrap);
    // librdkafka leaves Nagle's algorithm on (the Java client does not): small requests such as
    // EndTxn and AddPartitionsToTxn then wait ~40 ms for delayed ACKs, once per transaction.
    // A user property may still turn it back on.
    cfg.set("socket.nagle.disable", "true");
    // librdkafka backs off reconnects exponentially up to 10 s. A client that was idle through
    // a broker outage (the state writer, between lifecycle calls) could then wait up to 10 s
    // after the broker is back before it even tries, longer than the request timeout of the
    // failover-critical stop that needs it (CI saw a stop fail this way). 1 s still spares a
    // broker that is down from a connection storm.
    cfg.set("reconnect.backoff.max.ms", "1000");
    for (k, v) in defaults {
        // A default the user set under another of librdkafka's names for it would otherwise
        // reach librdkafka twice, in the config map's (random) order: which one won was chance.
        if !sets_property(properties, k) {
            cfg.set(*k, *v);
        }
    }
    // One property under two names (a record stored before this check, or written by hand):
    // librdkafka would take them in a hash map's order, so refuse rather than let chance pick.
    secrets::check_aliases(properties).map_err(|e| KafkaError::Client(e.to_string()))?;
    for (name, value) in properties {
        // Not from the allow list: refuse rather than hand it to librdkafka.
        secrets::check_name(name).map_err(|e| KafkaError::Client(e.to_string()))?;
        if kind.is_some_and(|k| !secrets::applies_to(name, k)) {
            continue;
        }
        cfg.set(name, resolve(name, value)?);
    }
    Ok(cfg)
}

/// Whether `properties` set `name`, under any of librdkafka's names for it.
pub(crate) fn sets_property(properties: &BTreeMap<String, String>, name: &str) -> bool {
    properties.keys().any(|k| secrets::same_property(k, name))
}

/// The context of consumers that ask for end-of-partition events (`enable.partition.eof`: the
/// state reader, quarantine and scan readers, the data path's outcome reader). rdkafka 0.39 hands
/// every consumer error event to the context's `error` as well as to `poll`, and its default
/// context logs each at ERROR: one "Global error: PartitionEOF (Broker: No more messages)" line
/// per partition read to its end, sixteen at every start-up, which an operator's log alerting
/// rightly takes for a fault. The reader handles the end of a partition itself, so that event is
/// only traced; every other error is logged as before.
pub(crate) struct EofReaderContext;

impl rdkafka::ClientContext for EofReaderContext {
    fn error(&self, error: rdkafka::error::KafkaError, reason: &str) {
        if error.rdkafka_error_code() == Some(rdkafka::types::RDKafkaErrorCode::PartitionEOF) {
            tracing::trace!(%reason, "end of partition");
        } else {
            tracing::error!("librdkafka: {error}: {reason}");
        }
    }
}

impl rdkafka::consumer::ConsumerContext for EofReaderContext {}

/// The value a property stands for: the value itself, or what its reference names (under the
/// policy in force).
fn resolve(name: &str, value: &str) -> KafkaResult<String> {
    let resolved = resolve_with(name, value, &reference_policy())?;
    if secrets::classify(name) != PropertyClass::Public {
        remember_secret(&resolved);
    }
    Ok(resolved)
}

fn resolve_with(name: &str, value: &str, policy: &ReferencePolicy) -> KafkaResult<String> {
    if secrets::is_sealed(value) {
        // Left sealed because this instance has no key that opens it (the engine says which).
        return Err(KafkaError::Client(format!(
            "property {name:?} is stored encrypted under a key this instance does not have"
        )));
    }
    let Some(reference) = Reference::parse(value) else { return Ok(value.to_string()) };
    secrets::check_reference(name, &reference, policy).map_err(|e| KafkaError::Client(e.to_string()))?;
    match reference {
        Reference::Env(var) => std::env::var(var).map_err(|_| {
            KafkaError::Client(format!("property {name:?}: environment variable {var} is not set (or not UTF-8)"))
        }),
        Reference::File(path) => match std::fs::read_to_string(path) {
            // Secret files usually end with a newline that is not part of the secret.
            Ok(s) => Ok(s.strip_suffix('\n').map(|s| s.strip_suffix('\r').unwrap_or(s)).unwrap_or(&s).to_string()),
            Err(e) => Err(KafkaError::Client(format!("property {name:?}: cannot read {path}: {}", e.kind()))),
        },
    }
}

/// Creates a client from `cfg`. rdkafka's errors quote property values; this one names the
/// property only, and scrubs any secret value librdkafka put into its own message.
pub(crate) fn create<T: FromClientConfig>(cfg: &ClientConfig, what: &str) -> KafkaResult<T> {
    cfg.create().map_err(|e| KafkaError::Client(format!("{what}: {}", describe(cfg, &e))))
}

/// Creates a client with a context; errors as in [`create`].
pub(crate) fn create_with_context<C, T>(cfg: &ClientConfig, context: C, what: &str) -> KafkaResult<T>
where
    C: rdkafka::ClientContext,
    T: rdkafka::config::FromClientConfigAndContext<C>,
{
    cfg.create_with_context(context).map_err(|e| KafkaError::Client(format!("{what}: {}", describe(cfg, &e))))
}

/// Connects a new transactional producer to a broker before its `init_transactions`.
/// librdkafka looks the transaction coordinator up as soon as `init_transactions` starts, and a
/// producer with no broker connection up at that moment asks again only on its coordinator
/// query timer, 500 ms later: on a failback start of 8 slots on the rig, about half the data
/// paths lost those 500 ms. Two metadata requests for `topic` (one the caller writes, so it
/// exists) make the connection: the first is answered over the bootstrap connection, which
/// librdkafka retires once the brokers' own addresses arrive (requests still on it fail at once,
/// "broker handle destroyed"), and the second needs a connection to a broker by its own
/// address, which stays up and is the one the coordinator lookup uses. At most 5 s (or
/// `timeout`): a cluster that does not answer is left to `init_transactions`, which reports the
/// real error within its own timeout.
pub(crate) fn connect_before_transactions<C: rdkafka::ClientContext>(
    client: &rdkafka::client::Client<C>,
    topic: &str,
    timeout: std::time::Duration,
) {
    let deadline = std::time::Instant::now() + timeout.min(std::time::Duration::from_secs(5));
    let mut answered = 0;
    while answered < 2 {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match client.fetch_metadata(Some(topic), left) {
            Ok(_) => answered += 1,
            Err(e) if left.is_zero() => {
                tracing::debug!(%topic, error = %e, "no metadata before init_transactions");
                return;
            }
            // Not a busy loop: the failures seen are immediate only while connections are set
            // up; an unreachable cluster makes each request wait out its timeout.
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(5)),
        }
    }
}

/// An rdkafka client-creation error as text fit for logs, pages and API answers.
fn describe(cfg: &ClientConfig, e: &rdkafka::error::KafkaError) -> String {
    use rdkafka::error::KafkaError as K;
    match e {
        K::ClientConfig(_, desc, key, value) => {
            if secrets::is_secret_property(key) {
                format!("invalid value for property {key:?}")
            } else {
                // A public value may be quoted; still never let a secret slip in.
                format!("invalid value for property {key:?}: {}", scrub(cfg, &desc.replace(value.as_str(), "<value>")))
            }
        }
        other => scrub(cfg, &other.to_string()),
    }
}

/// `text` with every secret value of `cfg` replaced by the placeholder.
fn scrub(cfg: &ClientConfig, text: &str) -> String {
    let mut out = text.to_string();
    for key in cfg.config_map().keys() {
        // Secrets, and anything not on the public list. kmirror's own fixed settings (bootstrap
        // servers, isolation level) stay readable. Values this short would garble the text
        // without hiding anything.
        let hide =
            matches!(secrets::classify(key), PropertyClass::Secret | PropertyClass::Unknown | PropertyClass::Forbidden);
        if let Some(real) = cfg.get(key).filter(|v| hide && v.len() >= 4) {
            out = out.replace(real, secrets::REDACTED);
        }
    }
    out
}

/// Checks client properties before they are stored: the allow list and reference policy
/// ([`secrets::validate`]), that every reference resolves on this host, and that librdkafka
/// accepts every value (without creating a client or connecting).
pub fn check_properties(properties: &BTreeMap<String, String>) -> Result<(), String> {
    secrets::validate(properties, &reference_policy()).map_err(|e| e.to_string())?;
    let cfg = client_config(None, "localhost:9092", properties, &[]).map_err(|e| match e {
        KafkaError::Client(m) => m,
        other => other.to_string(),
    })?;
    cfg.create_native_config().map(drop).map_err(|e| describe(&cfg, &e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn secrets_reach_the_client_config_unmasked() {
        // The bug this module exists for: config_map() masks these, the config itself must not.
        let p = props(&[("sasl.password", "hunter2-real"), ("ssl.key.password", "key-pass-real")]);
        let cfg = client_config(None, "h:1", &p, &[("linger.ms", "5")]).unwrap();
        assert_eq!(cfg.get("sasl.password"), Some("hunter2-real"));
        assert_eq!(cfg.get("ssl.key.password"), Some("key-pass-real"));
        assert_eq!(cfg.get("linger.ms"), Some("5"));
        let over = client_config(None, "h:1", &props(&[("linger.ms", "50")]), &[("linger.ms", "5")]).unwrap();
        assert_eq!(over.get("linger.ms"), Some("50"), "the user's property wins over a tuning default");
    }

    #[test]
    fn a_default_yields_to_the_user_setting_it_under_another_name() {
        let cfg = client_config(
            None,
            "h:1",
            &props(&[("queue.buffering.max.ms", "50"), ("fetch.message.max.bytes", "1048576")]),
            &[("linger.ms", "5"), ("max.partition.fetch.bytes", "8388608"), ("retry.backoff.ms", "10")],
        )
        .unwrap();
        assert_eq!(cfg.get("queue.buffering.max.ms"), Some("50"));
        assert_eq!(cfg.get("linger.ms"), None, "the default must not reach librdkafka beside the user's alias");
        assert_eq!(cfg.get("fetch.message.max.bytes"), Some("1048576"));
        assert_eq!(cfg.get("max.partition.fetch.bytes"), None);
        assert_eq!(cfg.get("retry.backoff.ms"), Some("10"), "defaults the user did not touch stay");
    }

    /// Every alias in the linked librdkafka among the names kmirror classifies is in
    /// `secrets::ALIASES`, both names classified alike, and the table has nothing librdkafka
    /// does not: an upgrade that adds an alias fails here instead of letting a property reach
    /// librdkafka under two names (which one won was a hash map's order).
    #[test]
    fn the_alias_table_matches_the_linked_librdkafka() {
        let found: Vec<(String, String)> =
            super::super::ffi::property_table().into_iter().filter_map(|r| Some((r.name, r.alias_for?))).collect();
        assert!(found.len() >= 10, "the property table's alias rows were not found: {found:?}");
        for (name, target) in &found {
            let known = |n: &str| secrets::classify(n) != PropertyClass::Unknown;
            if known(name) || known(target) {
                assert!(
                    secrets::same_property(name, target),
                    "{name} is librdkafka's alias for {target}: add it to ALIASES"
                );
                assert_eq!(secrets::classify(name), secrets::classify(target), "{name} and {target} are one property");
            }
        }
        for (a, b) in secrets::ALIASES {
            let listed = |x: &str, y: &str| found.iter().any(|(n, t)| n == x && t == y);
            assert!(listed(a, b) || listed(b, a), "{a} / {b} is not an alias in the linked librdkafka");
        }
    }

    /// kmirror's producer/consumer split of properties is librdkafka's (its C/P column) for
    /// every name a user may set (kmirror's own fixed settings never come from the user).
    #[test]
    fn the_client_kind_of_every_property_a_user_may_set_is_librdkafkas() {
        let table = super::super::ffi::property_table();
        let mut checked = 0;
        let settable = |n: &str| matches!(secrets::classify(n), PropertyClass::Public | PropertyClass::Secret);
        for row in table.iter().filter(|r| settable(&r.name)) {
            let (c, p) = (
                secrets::applies_to(&row.name, ClientKind::Consumer),
                secrets::applies_to(&row.name, ClientKind::Producer),
            );
            let want = (row.clients != "P", row.clients != "C");
            assert_eq!((c, p), want, "{} is for {:?} clients in librdkafka", row.name, row.clients);
            checked += 1;
        }
        assert!(checked > 90, "only {checked} settable properties found in librdkafka's table");
    }

    #[test]
    fn each_client_gets_only_the_properties_of_its_kind() {
        let p = props(&[("fetch.max.bytes", "1048576"), ("linger.ms", "20"), ("security.protocol", "SASL_SSL")]);
        let consumer = client_config(Some(ClientKind::Consumer), "h:1", &p, &[]).unwrap();
        assert_eq!(consumer.get("fetch.max.bytes"), Some("1048576"));
        assert_eq!(consumer.get("linger.ms"), None);
        assert_eq!(consumer.get("security.protocol"), Some("SASL_SSL"));
        let producer = client_config(Some(ClientKind::Producer), "h:1", &p, &[]).unwrap();
        assert_eq!(producer.get("fetch.max.bytes"), None);
        assert_eq!(producer.get("linger.ms"), Some("20"));
        assert_eq!(producer.get("security.protocol"), Some("SASL_SSL"));
        let all = client_config(None, "h:1", &p, &[]).unwrap();
        assert!(all.get("fetch.max.bytes").is_some() && all.get("linger.ms").is_some(), "checking sees every value");
    }

    #[test]
    fn a_property_under_two_names_is_refused() {
        for (a, b) in [("sasl.mechanism", "sasl.mechanisms"), ("linger.ms", "queue.buffering.max.ms")] {
            let both = props(&[(a, "PLAIN"), (b, "SCRAM-SHA-512")]);
            let e = client_config(None, "h:1", &both, &[]).unwrap_err().to_string();
            assert!(e.contains(a) && e.contains(b) && e.contains("same librdkafka property"), "{e}");
            assert!(!e.contains("PLAIN") && !e.contains("SCRAM"), "values stay out of the error: {e}");
            let e = check_properties(&both).unwrap_err();
            assert!(e.contains(a) && e.contains(b), "{e}");
            client_config(None, "h:1", &props(&[(a, "PLAIN")]), &[]).unwrap();
        }
    }

    #[test]
    fn config_errors_name_the_property_never_the_value() {
        let e = check_properties(&props(&[("security.protocol", "SASL_HUNTER2")])).unwrap_err();
        assert!(e.contains("security.protocol"), "{e}");
        assert!(!e.contains("HUNTER2"), "{e}");
        let e = check_properties(&props(&[("plugin.library.paths", "/tmp/evil.so")])).unwrap_err();
        assert!(e.contains("plugin.library.paths") && !e.contains("evil"), "{e}");
        check_properties(&props(&[("security.protocol", "SASL_SSL"), ("sasl.password", "x")])).unwrap();
    }

    /// CPU time the calling thread has used, in ns (`/proc/thread-self/schedstat`).
    fn thread_cpu_ns() -> u64 {
        let stat = std::fs::read_to_string("/proc/thread-self/schedstat").expect("schedstat");
        stat.split_whitespace().next().and_then(|n| n.parse().ok()).expect("schedstat's first field")
    }

    /// rdkafka 0.39 truncated a poll's remaining wait to whole milliseconds and spun through the
    /// rest (`vendor/rdkafka/PATCHES.md`): a poll of 1.9 ms slept 1 ms and burned ~0.9 ms, and
    /// every ThreadedProducer's thread spun 1 ms of each 100 ms. With the vendored patch a poll
    /// that times out sleeps. (A busy box can only make a spinning poll look cheaper, never a
    /// sleeping one look expensive: the bound is loose on purpose.)
    #[test]
    fn polls_that_time_out_sleep_instead_of_spinning() {
        use rdkafka::consumer::BaseConsumer;
        use rdkafka::producer::BaseProducer;
        let mut cfg = ClientConfig::new();
        // Nothing listens there: the polls find no messages and time out.
        cfg.set("bootstrap.servers", "127.0.0.1:9").set("group.id", "kmirror-poll-test");
        let consumer: BaseConsumer = cfg.create().unwrap();
        let producer: BaseProducer = cfg.create().unwrap();
        let (wall, cpu) = (std::time::Instant::now(), thread_cpu_ns());
        for _ in 0..40 {
            let _ = consumer.poll(std::time::Duration::from_micros(1_900));
            producer.poll(std::time::Duration::from_micros(1_900));
        }
        let (wall, cpu) = (wall.elapsed().as_nanos() as u64, thread_cpu_ns() - cpu);
        assert!(cpu * 5 < wall, "80 polls of 1.9 ms used {} us of CPU in {} us", cpu / 1000, wall / 1000);
    }

    #[test]
    fn references_resolve_at_build_time() {
        // std::env::set_var is unsafe in edition 2024 (threads): use a variable that is set.
        let path = std::env::var("PATH").unwrap();
        let policy = ReferencePolicy { env_allow: vec!["PATH".into(), "NO_SUCH_*".into()], ..Default::default() };
        assert_eq!(resolve_with("sasl.password", "${env:PATH}", &policy).unwrap(), path);
        let e = resolve_with("sasl.password", "${env:KMIRROR_NO_SUCH_VAR_XYZ}", &policy).unwrap_err();
        assert!(e.to_string().contains("KMIRROR_"), "{e}");
        let e = resolve_with("sasl.password", "${env:NO_SUCH_VAR_XYZ_123}", &policy).unwrap_err();
        assert!(e.to_string().contains("NO_SUCH_VAR_XYZ_123 is not set"), "{e}");
        let e = resolve_with("sasl.password", "${env:HOME}", &policy).unwrap_err();
        assert!(e.to_string().contains("env_allow"), "not allowed by name: {e}");
        let e = resolve_with("sasl.password", "${file:/run/secrets/kmirror-none}", &policy).unwrap_err();
        assert!(e.to_string().contains("cannot read"), "{e}");
    }

    #[test]
    fn secret_values_given_to_clients_are_scrubbed_from_every_kafka_error() {
        let p = props(&[("sasl.password", "scrub-me-hunter2"), ("sasl.username", "alice-public")]);
        client_config(None, "h:1", &p, &[]).unwrap();
        let e = KafkaError::Kafka {
            operation: "DescribeCluster",
            resource: "cluster".into(),
            code: super::super::error::KafkaCode { code: 58, name: "SASL_AUTHENTICATION_FAILED".into() },
            message: "Unsupported SASL mechanism: scrub-me-hunter2 (user alice-public)".into(),
        };
        let text = e.to_string();
        assert!(!text.contains("scrub-me-hunter2"), "{text}");
        assert!(text.contains("[redacted]") && text.contains("alice-public"), "public values stay: {text}");
        assert!(!KafkaError::Client("bad: scrub-me-hunter2".into()).to_string().contains("hunter2"));
        // Short values are not scrubbed (they would garble everything).
        remember_secret("abc");
        assert!(scrub_secrets("abc abc").contains("abc"));
    }
}
