//! The client properties a mirror may carry, which of them are secrets, and references to secrets
//! kept outside kmirror. One rule for the whole program: the API, the pages, the logs, the state
//! records' `Debug` and every error message ask [`is_secret_property`].
//!
//! # Why an allow list
//!
//! Source and destination properties go straight to librdkafka, and some librdkafka properties
//! load code or run commands (`plugin.library.paths`, `ssl.engine.location`, `ssl.providers`,
//! `sasl.kerberos.kinit.cmd`). Whoever may define a mirror would then run code on kmirror's host.
//! So only the properties listed in [`classify`] are accepted; everything else is refused with an
//! error that names the property (never its value). Properties that kmirror sets itself for
//! correctness (`isolation.level`, `transactional.id`, ...) are refused too: silently overriding
//! them would surprise the operator.
//!
//! # Secrets
//!
//! A property is a secret unless it is on the public list: a typo such as `sasl.passwrd` is
//! treated as a secret (and refused as unknown), never shown.
//!
//! # References
//!
//! A value may be a reference resolved when a client is built, so the secret itself never reaches
//! `__mirror_state`: `${env:NAME}` (an environment variable of the kmirror process) or
//! `${file:/path}` (a file's contents without the trailing newline, e.g. a Docker or Kubernetes
//! secret mount). The whole value is the reference; there is no interpolation inside strings.
//! Which variables and directories may be referenced is kmirror's own configuration
//! ([`ReferencePolicy`]), not the mirror definition's.

use std::collections::BTreeMap;
use std::fmt;

/// The placeholder shown instead of a secret value.
pub const REDACTED: &str = "[redacted]";

/// How a secret value sealed for storage begins (`store::seal`): `${sealed:v1:<key id>:<data>}`.
/// Never accepted from a client (a value starting with `${` must be a reference), so nobody can
/// hand kmirror another mirror's sealed secret.
pub const SEALED_PREFIX: &str = "${sealed:v1:";

/// Whether a stored value is sealed (see [`SEALED_PREFIX`]).
#[must_use]
pub fn is_sealed(value: &str) -> bool {
    value.starts_with(SEALED_PREFIX)
}

/// How kmirror treats one client property name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PropertyClass {
    /// Accepted and shown.
    Public,
    /// Accepted, write-only: never shown, never logged.
    Secret,
    /// Refused: kmirror sets it itself (the reason says why).
    Fixed(&'static str),
    /// Refused: it loads code or runs a command on kmirror's host.
    Forbidden,
    /// Not a property kmirror accepts (unknown, a callback, or not useful to a mirror).
    Unknown,
}

/// Public (non-secret) librdkafka properties a mirror may set. Connection, security settings
/// that are not secrets, and tuning.
const PUBLIC: &[&str] = &[
    // connection and identity
    "client.id",
    "client.rack",
    "client.dns.lookup",
    "broker.address.family",
    "broker.address.ttl",
    "connections.max.idle.ms",
    "reconnect.backoff.jitter.ms",
    "reconnect.backoff.ms",
    "reconnect.backoff.max.ms",
    "retry.backoff.ms",
    "retry.backoff.max.ms",
    "socket.timeout.ms",
    "socket.send.buffer.bytes",
    "socket.receive.buffer.bytes",
    "socket.keepalive.enable",
    "socket.nagle.disable",
    "socket.max.fails",
    "socket.connection.setup.timeout.ms",
    "metadata.max.age.ms",
    "metadata.recovery.strategy",
    "metadata.recovery.rebootstrap.trigger.ms",
    "topic.metadata.refresh.interval.ms",
    "topic.metadata.refresh.fast.interval.ms",
    "topic.metadata.refresh.sparse",
    "topic.metadata.propagation.max.ms",
    "api.version.request",
    "api.version.request.timeout.ms",
    "api.version.fallback.ms",
    "broker.version.fallback",
    "enable.metrics.push",
    "debug",
    "log.connection.close",
    // security (the non-secret parts)
    "security.protocol",
    "sasl.mechanism",
    "sasl.mechanisms",
    "sasl.username",
    "sasl.oauthbearer.method",
    "sasl.oauthbearer.client.id",
    "sasl.oauthbearer.client.credentials.client.id",
    "sasl.oauthbearer.scope",
    "sasl.oauthbearer.extensions",
    "sasl.oauthbearer.token.endpoint.url",
    "sasl.oauthbearer.grant.type",
    "sasl.oauthbearer.assertion.algorithm",
    "sasl.oauthbearer.assertion.private.key.file",
    "sasl.oauthbearer.assertion.file",
    "sasl.oauthbearer.assertion.claim.aud",
    "sasl.oauthbearer.assertion.claim.exp.seconds",
    "sasl.oauthbearer.assertion.claim.iss",
    "sasl.oauthbearer.assertion.claim.jti.include",
    "sasl.oauthbearer.assertion.claim.nbf.seconds",
    "sasl.oauthbearer.assertion.claim.sub",
    "sasl.oauthbearer.assertion.jwt.template.file",
    "sasl.oauthbearer.metadata.authentication.type",
    "ssl.cipher.suites",
    "ssl.curves.list",
    "ssl.sigalgs.list",
    "ssl.key.location",
    "ssl.certificate.location",
    "ssl.certificate.pem",
    "ssl.ca.location",
    "ssl.ca.pem",
    "ssl.ca.certificate.stores",
    "ssl.crl.location",
    "ssl.keystore.location",
    "https.ca.location",
    "https.ca.pem",
    "enable.ssl.certificate.verification",
    "ssl.endpoint.identification.algorithm",
    // tuning (both kinds of client)
    "receive.message.max.bytes",
    "message.max.bytes",
    "message.copy.max.bytes",
    "max.in.flight.requests.per.connection",
    "max.in.flight",
];

/// Public properties librdkafka uses in consumers only (`C` in its CONFIGURATION.md): left out
/// of producers and admin clients (`applies_to`). A test in `kafka::client` checks this list and
/// [`PUBLIC_PRODUCER`] against the linked librdkafka.
const PUBLIC_CONSUMER: &[&str] = &[
    "fetch.wait.max.ms",
    "fetch.queue.backoff.ms",
    "fetch.message.max.bytes",
    "max.partition.fetch.bytes",
    "fetch.max.bytes",
    "fetch.min.bytes",
    "fetch.error.backoff.ms",
    "queued.min.messages",
    "queued.max.messages.kbytes",
    "check.crcs",
];

/// Public properties librdkafka uses in producers (and admin clients) only (`P`): left out of
/// consumers.
const PUBLIC_PRODUCER: &[&str] = &[
    "request.timeout.ms",
    "message.timeout.ms",
    "delivery.timeout.ms",
    "transaction.timeout.ms",
    "queue.buffering.max.messages",
    "queue.buffering.max.kbytes",
    "queue.buffering.max.ms",
    "linger.ms",
    "message.send.max.retries",
    "retries",
    "queue.buffering.backpressure.threshold",
    "compression.codec",
    "compression.type",
    "compression.level",
    "batch.num.messages",
    "batch.size",
    "sticky.partitioning.linger.ms",
];

/// Secret librdkafka properties a mirror may set (write-only).
const SECRET: &[&str] = &[
    "sasl.password",
    "sasl.oauthbearer.config",
    "sasl.oauthbearer.client.secret",
    "sasl.oauthbearer.client.credentials.client.secret",
    "sasl.oauthbearer.assertion.private.key.passphrase",
    "sasl.oauthbearer.assertion.private.key.pem",
    "ssl.key.password",
    "ssl.key.pem",
    "ssl.keystore.password",
];

/// Properties that load code or run commands on kmirror's host.
const FORBIDDEN: &[&str] = &[
    "plugin.library.paths",
    "interceptors",
    "ssl.engine.location",
    "ssl.engine.id",
    "ssl.providers",
    "sasl.kerberos.kinit.cmd",
    // Kerberos needs Cyrus SASL, which kmirror's librdkafka is built without; kinit would run a
    // command. Refused as a family.
    "sasl.kerberos.service.name",
    "sasl.kerberos.principal",
    "sasl.kerberos.keytab",
    "sasl.kerberos.min.time.before.relogin",
    "enable.sasl.oauthbearer.unsecure.jwt",
];

/// Properties the data path sets itself; the reason is shown to the operator.
const FIXED: &[(&str, &str)] = &[
    ("bootstrap.servers", "give the cluster in bootstrap_servers"),
    ("metadata.broker.list", "give the cluster in bootstrap_servers"),
    ("group.id", "kmirror assigns partitions itself and stores positions in __mirror_state"),
    ("group.instance.id", "kmirror assigns partitions itself"),
    ("enable.auto.commit", "positions are committed in the destination transaction"),
    ("auto.commit.enable", "positions are committed in the destination transaction"),
    ("enable.auto.offset.store", "positions are committed in the destination transaction"),
    ("auto.offset.reset", "a lost position is an error, never a silent jump"),
    ("isolation.level", "aborted source transactions are never mirrored (read_committed)"),
    ("enable.partition.eof", "set by the data path"),
    ("allow.auto.create.topics", "kmirror never creates source topics"),
    ("transactional.id", "derived from the instance id (fencing)"),
    ("enable.idempotence", "exactly-once needs it"),
    ("enable.gapless.guarantee", "set by the data path"),
    ("acks", "exactly-once needs acks=all"),
    ("request.required.acks", "exactly-once needs acks=all"),
];

/// How kmirror treats the client property `name` (case-sensitive, as librdkafka is).
#[must_use]
pub fn classify(name: &str) -> PropertyClass {
    if PUBLIC.contains(&name) || PUBLIC_CONSUMER.contains(&name) || PUBLIC_PRODUCER.contains(&name) {
        PropertyClass::Public
    } else if SECRET.contains(&name) {
        PropertyClass::Secret
    } else if FORBIDDEN.contains(&name) {
        PropertyClass::Forbidden
    } else if let Some((_, why)) = FIXED.iter().find(|(n, _)| *n == name) {
        PropertyClass::Fixed(why)
    } else {
        PropertyClass::Unknown
    }
}

/// Whether a client property's value must never be shown: everything that is not on the public
/// list, so an unknown name or a typo (`sasl.passwrd`) is treated as a secret.
#[must_use]
pub fn is_secret_property(name: &str) -> bool {
    classify(name) != PropertyClass::Public
}

/// A copy of `properties` with every secret value replaced by [`REDACTED`]. References
/// (`${env:NAME}`, `${file:/path}`) are shown as they are: they name where the secret is, not
/// the secret, and an operator needs to see which variable a mirror uses.
#[must_use]
pub fn redact<'a, I>(properties: I) -> BTreeMap<String, String>
where
    I: IntoIterator<Item = (&'a String, &'a String)>,
{
    properties
        .into_iter()
        .map(|(k, v)| {
            let shown = if is_secret_property(k) && Reference::parse(v).is_none() { REDACTED } else { v };
            (k.clone(), shown.to_string())
        })
        .collect()
}

/// A value that names where the real value is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reference<'a> {
    /// `${env:NAME}`
    Env(&'a str),
    /// `${file:/absolute/path}`
    File(&'a str),
}

impl<'a> Reference<'a> {
    /// The reference `value` is, if it is one (`${env:...}` or `${file:...}`, the whole value).
    #[must_use]
    pub fn parse(value: &'a str) -> Option<Reference<'a>> {
        let inner = value.strip_prefix("${")?.strip_suffix('}')?;
        if let Some(name) = inner.strip_prefix("env:") {
            Some(Reference::Env(name))
        } else {
            inner.strip_prefix("file:").map(Reference::File)
        }
    }
}

/// Which references kmirror resolves: part of kmirror's own configuration, so a mirror definition
/// (which an admin token can write) cannot read kmirror's own secrets or arbitrary files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReferencePolicy {
    /// Directories whose files `${file:...}` may name (absolute, no `..`).
    pub file_dirs: Vec<String>,
    /// Environment variables `${env:...}` may name: exact names or `*` globs (`DR_*`). Empty by
    /// default: the process environment holds more than mirror secrets (cloud credentials, other
    /// services' passwords), and a mirror definition must not be a way to read it. `KMIRROR_*`
    /// never, whatever the list says.
    pub env_allow: Vec<String>,
    /// Refuse plaintext values of secret properties: every secret must be a reference.
    pub require_references: bool,
}

impl Default for ReferencePolicy {
    fn default() -> ReferencePolicy {
        // Docker's secret mount; Kubernetes users mount theirs where they like and add it.
        ReferencePolicy {
            file_dirs: vec!["/run/secrets".to_string()],
            env_allow: Vec::new(),
            require_references: false,
        }
    }
}

impl ReferencePolicy {
    /// Whether `${env:var}` may resolve: `var` matches an `env_allow` entry (`*` stands for any
    /// run of characters) and is not one of kmirror's own variables.
    #[must_use]
    pub fn allows_env(&self, var: &str) -> bool {
        !var.to_ascii_uppercase().starts_with(ENV_RESERVED_PREFIX) && self.env_allow.iter().any(|p| glob_match(p, var))
    }
}

/// Whole-string match of `text` against `pattern`, where `*` matches any run of characters
/// (including none) and every other character itself.
fn glob_match(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    // The classic two-pointer match with backtracking to the last star: linear in practice,
    // quadratic at worst, on names of at most a few dozen characters.
    let (mut i, mut j, mut star, mut mark) = (0, 0, None, 0);
    while j < t.len() {
        if i < p.len() && p[i] != '*' && p[i] == t[j] {
            i += 1;
            j += 1;
        } else if i < p.len() && p[i] == '*' {
            star = Some(i);
            mark = j;
            i += 1;
        } else if let Some(s) = star {
            i = s + 1;
            mark += 1;
            j = mark;
        } else {
            return false;
        }
    }
    p[i..].iter().all(|c| *c == '*')
}

/// Environment variables a reference may never name: kmirror's own settings hold its API tokens.
const ENV_RESERVED_PREFIX: &str = "KMIRROR_";

/// Why a set of client properties was refused. Names properties, never values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PropertyError {
    /// Not a property kmirror accepts.
    Unknown { name: String },
    /// Set by kmirror itself.
    Fixed { name: String, reason: &'static str },
    /// Loads code or runs commands.
    Forbidden { name: String },
    /// A secret given in plain text while the policy requires references.
    PlaintextSecret { name: String },
    /// A reference that is malformed or not allowed by the policy.
    Reference { name: String, problem: String },
    /// A value that is not allowed (e.g. empty, or too long).
    Value { name: String, problem: String },
}

impl fmt::Display for PropertyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PropertyError::Unknown { name } => write!(
                f,
                "property {name:?} is not accepted (not a librdkafka client property kmirror allows; see the README's list)"
            ),
            PropertyError::Fixed { name, reason } => write!(f, "property {name:?} is set by kmirror: {reason}"),
            PropertyError::Forbidden { name } => {
                write!(f, "property {name:?} is refused: it loads code or runs commands on kmirror's host")
            }
            PropertyError::PlaintextSecret { name } => write!(
                f,
                "property {name:?} is a secret and this kmirror requires references for secrets (${{env:NAME}} or ${{file:/path}})"
            ),
            PropertyError::Reference { name, problem } => write!(f, "property {name:?}: {problem}"),
            PropertyError::Value { name, problem } => write!(f, "property {name:?}: {problem}"),
        }
    }
}

impl std::error::Error for PropertyError {}

/// Longest accepted property value (PEM certificates are a few KiB).
pub const MAX_VALUE_LEN: usize = 64 * 1024;

/// Most properties one client may carry.
pub const MAX_PROPERTIES: usize = 64;

/// Checks a mirror's (or the destination's) client properties before they are stored or used:
/// every name on the allow list, every reference well-formed and allowed by `policy`.
/// Values are never part of the error.
pub fn validate(properties: &BTreeMap<String, String>, policy: &ReferencePolicy) -> Result<(), PropertyError> {
    if properties.len() > MAX_PROPERTIES {
        return Err(PropertyError::Value {
            name: "properties".into(),
            problem: format!("at most {MAX_PROPERTIES} properties, got {}", properties.len()),
        });
    }
    for (name, value) in properties {
        check_name(name)?;
        if value.len() > MAX_VALUE_LEN {
            return Err(PropertyError::Value {
                name: name.clone(),
                problem: format!("value longer than {MAX_VALUE_LEN} bytes"),
            });
        }
        if value.contains('\0') {
            return Err(PropertyError::Value { name: name.clone(), problem: "value contains a NUL byte".into() });
        }
        match Reference::parse(value) {
            // A reference resolves only where a secret belongs: in a public property its value
            // would be shown (on pages, in the API) or sent where the definition says
            // (`client.id` travels in every request header), and librdkafka quotes bad values
            // in its errors (`sasl.mechanism`).
            Some(_) if classify(name) != PropertyClass::Secret => {
                return Err(PropertyError::Reference {
                    name: name.clone(),
                    problem: "references (${env:NAME}, ${file:/path}) are accepted in secret properties only \
                              (sasl.password, ssl.key.password, ...); give this value as it is"
                        .into(),
                });
            }
            Some(r) => check_reference(name, &r, policy)?,
            None if value.starts_with("${") => {
                return Err(PropertyError::Reference {
                    name: name.clone(),
                    problem: "a reference must be the whole value, ${env:NAME} or ${file:/path}".into(),
                });
            }
            None if policy.require_references && classify(name) == PropertyClass::Secret => {
                return Err(PropertyError::PlaintextSecret { name: name.clone() });
            }
            None => {}
        }
    }
    check_aliases(properties)
}

/// The kind of librdkafka client a property is given to. librdkafka's admin clients are
/// producers.
/// The first secret property of `properties` given as a plaintext value (not a reference, not
/// the `[redacted]` placeholder that keeps a stored value): what a deployment without a key for
/// secrets at rest refuses.
#[must_use]
pub fn first_plaintext_secret(properties: &BTreeMap<String, String>) -> Option<&str> {
    properties
        .iter()
        .find(|(k, v)| classify(k) == PropertyClass::Secret && Reference::parse(v).is_none() && v.as_str() != REDACTED)
        .map(|(k, _)| k.as_str())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientKind {
    Consumer,
    Producer,
}

/// Whether librdkafka uses `name` in a client of `kind`. A client given the other kind's
/// property ignores it and logs a CONFWARN warning, once per client: a destination's
/// `compression.type` or `linger.ms` did so in every state reader and group member, a source's
/// `fetch.max.bytes` in every source admin client.
#[must_use]
pub fn applies_to(name: &str, kind: ClientKind) -> bool {
    match kind {
        ClientKind::Consumer => !PUBLIC_PRODUCER.contains(&name),
        ClientKind::Producer => !PUBLIC_CONSUMER.contains(&name),
    }
}

/// librdkafka's aliases: two names of one property (`_RK_C_ALIAS` in its `rdkafka_conf.c`,
/// "Alias for" in CONFIGURATION.md), among the names the lists above know. Both names of a pair
/// are always classified alike. A test in `kafka::client` checks this table against the property
/// table of the librdkafka kmirror links, so an upgrade that adds an alias fails the build's tests
/// instead of letting a property reach librdkafka under two names.
pub const ALIASES: &[(&str, &str)] = &[
    ("bootstrap.servers", "metadata.broker.list"),
    ("max.in.flight", "max.in.flight.requests.per.connection"),
    ("sasl.mechanism", "sasl.mechanisms"),
    ("sasl.oauthbearer.client.credentials.client.id", "sasl.oauthbearer.client.id"),
    ("sasl.oauthbearer.client.credentials.client.secret", "sasl.oauthbearer.client.secret"),
    ("max.partition.fetch.bytes", "fetch.message.max.bytes"),
    ("linger.ms", "queue.buffering.max.ms"),
    ("retries", "message.send.max.retries"),
    ("compression.type", "compression.codec"),
    ("acks", "request.required.acks"),
    ("delivery.timeout.ms", "message.timeout.ms"),
    ("enable.auto.commit", "auto.commit.enable"),
];

/// Whether `a` and `b` name the same librdkafka property.
#[must_use]
pub fn same_property(a: &str, b: &str) -> bool {
    a == b || ALIASES.iter().any(|&(x, y)| (a == x && b == y) || (a == y && b == x))
}

/// A property of `properties` that another one sets under another of librdkafka's names: the
/// error names both. librdkafka would receive both, in the order of a hash map, so which value
/// won would be chance (e.g. `sasl.mechanism` PLAIN beside `sasl.mechanisms` SCRAM-SHA-512).
pub fn check_aliases(properties: &BTreeMap<String, String>) -> Result<(), PropertyError> {
    for (i, a) in properties.keys().enumerate() {
        if let Some(b) = properties.keys().skip(i + 1).find(|b| same_property(a, b)) {
            return Err(PropertyError::Value {
                name: b.clone(),
                problem: format!("names the same librdkafka property as {a:?}; set only one of them"),
            });
        }
    }
    Ok(())
}

/// Checks that `name` is on the allow list (public or secret); the error says why not.
pub fn check_name(name: &str) -> Result<(), PropertyError> {
    match classify(name) {
        PropertyClass::Public | PropertyClass::Secret => Ok(()),
        PropertyClass::Fixed(reason) => Err(PropertyError::Fixed { name: name.to_string(), reason }),
        PropertyClass::Forbidden => Err(PropertyError::Forbidden { name: name.to_string() }),
        PropertyClass::Unknown => Err(PropertyError::Unknown { name: printable(name) }),
    }
}

/// Whether `path` is absolute and has no `.` or `..` component (so a prefix check on it means
/// what it says).
#[must_use]
pub fn is_clean_absolute_path(path: &str) -> bool {
    path.starts_with('/') && !path.split('/').any(|c| c == ".." || c == ".")
}

/// Checks one reference against the policy (syntax, reserved variables, allowed directories).
pub fn check_reference(name: &str, r: &Reference<'_>, policy: &ReferencePolicy) -> Result<(), PropertyError> {
    let problem = |p: String| Err(PropertyError::Reference { name: name.to_string(), problem: p });
    match r {
        Reference::Env(var) => {
            if var.is_empty() || !var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return problem("${env:NAME}: NAME must be letters, digits and underscores".into());
            }
            if var.to_ascii_uppercase().starts_with(ENV_RESERVED_PREFIX) {
                return problem(format!(
                    "${{env:{var}}}: kmirror's own {ENV_RESERVED_PREFIX}* variables cannot be referenced"
                ));
            }
            if !policy.allows_env(var) {
                return problem(format!(
                    "${{env:{var}}}: this kmirror does not allow that variable (list it in [secrets] env_allow, or use a ${{file:/path}} reference)"
                ));
            }
            Ok(())
        }
        Reference::File(path) => {
            if !is_clean_absolute_path(path) {
                return problem("${file:/path}: the path must be absolute, without . or .. components".into());
            }
            let allowed = policy.file_dirs.iter().any(|dir| {
                let dir = dir.trim_end_matches('/');
                !dir.is_empty() && path.strip_prefix(dir).is_some_and(|rest| rest.starts_with('/') && rest.len() > 1)
            });
            if !allowed {
                return problem(format!(
                    "${{file:{path}}}: only files under the configured secret directories can be referenced ({})",
                    if policy.file_dirs.is_empty() {
                        "none configured".to_string()
                    } else {
                        policy.file_dirs.join(", ")
                    }
                ));
            }
            Ok(())
        }
    }
}

/// A property name fit for an error message: names come from requests, so cap and escape them.
fn printable(name: &str) -> String {
    let mut s: String = name.chars().take(80).flat_map(char::escape_default).collect();
    if name.chars().count() > 80 {
        s.push('…');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn secrets_are_recognised_and_redacted() {
        for k in [
            "sasl.password",
            "ssl.key.password",
            "ssl.keystore.password",
            "sasl.oauthbearer.client.secret",
            "ssl.key.pem",
            "sasl.jaas.config",
            "client.secret",
            "SASL.PASSWORD",
            // a typo is not on the public list: treated as a secret
            "sasl.passwrd",
        ] {
            assert!(is_secret_property(k), "{k}");
        }
        for k in ["security.protocol", "sasl.mechanism", "sasl.username", "ssl.ca.location", "client.id"] {
            assert!(!is_secret_property(k), "{k}");
        }
        let p = props(&[("sasl.username", "u"), ("sasl.password", "hunter2"), ("ssl.key.password", "${env:KEY_PW}")]);
        let shown = redact(&p);
        assert_eq!(shown["sasl.username"], "u");
        assert_eq!(shown["sasl.password"], REDACTED);
        assert_eq!(shown["ssl.key.password"], "${env:KEY_PW}", "a reference names no secret");
        assert!(!format!("{shown:?}").contains("hunter2"));
    }

    #[test]
    fn a_property_under_two_of_librdkafkas_names_is_refused() {
        let policy = ReferencePolicy::default();
        let e = validate(&props(&[("linger.ms", "5"), ("queue.buffering.max.ms", "50")]), &policy).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("\"linger.ms\"") && text.contains("\"queue.buffering.max.ms\""), "{text}");
        assert!(!text.contains("50"), "values stay out: {text}");
        // Secrets too, and whichever name comes first.
        let both = props(&[
            ("sasl.oauthbearer.client.secret", "a"),
            ("sasl.oauthbearer.client.credentials.client.secret", "b"),
        ]);
        assert!(validate(&both, &policy).unwrap_err().to_string().contains("set only one"));
        validate(&props(&[("linger.ms", "5"), ("batch.size", "100")]), &policy).unwrap();
        for (a, b) in ALIASES {
            assert_eq!(classify(a), classify(b), "{a} and {b} are one property");
            assert!(same_property(a, b) && same_property(b, a) && same_property(a, a));
        }
        assert!(!same_property("linger.ms", "batch.size"));
    }

    #[test]
    fn code_loading_and_fixed_properties_are_refused_by_name_only() {
        let policy = ReferencePolicy { env_allow: vec!["SRC_*".into()], ..ReferencePolicy::default() };
        for (name, want) in [
            ("plugin.library.paths", "loads code"),
            ("ssl.engine.location", "loads code"),
            ("ssl.providers", "loads code"),
            ("sasl.kerberos.kinit.cmd", "loads code"),
            ("isolation.level", "set by kmirror"),
            ("transactional.id", "set by kmirror"),
            ("allow.auto.create.topics", "set by kmirror"),
            ("sasl.passwrd", "not accepted"),
            ("sasl.jaas.config", "not accepted"),
        ] {
            let e = validate(&props(&[(name, "/tmp/evil-value.so")]), &policy).unwrap_err().to_string();
            assert!(e.contains(want), "{name}: {e}");
            assert!(e.contains(name), "{name}: {e}");
            assert!(!e.contains("evil-value"), "the value must never be in the error: {e}");
        }
        validate(
            &props(&[
                ("security.protocol", "SASL_SSL"),
                ("sasl.mechanism", "SCRAM-SHA-512"),
                ("sasl.username", "u"),
                ("sasl.password", "p"),
                ("ssl.key.password", "${env:SRC_KEY_PW}"),
                ("ssl.ca.location", "/etc/ssl/ca.pem"),
            ]),
            &policy,
        )
        .unwrap();
    }

    #[test]
    fn references_follow_the_policy() {
        let policy = ReferencePolicy {
            file_dirs: vec!["/run/secrets".into(), "/etc/kmirror/".into()],
            env_allow: vec!["SRC_*".into(), "PW".into(), "KMIRROR_*".into()],
            ..Default::default()
        };
        assert_eq!(Reference::parse("${env:PW}"), Some(Reference::Env("PW")));
        assert_eq!(Reference::parse("${file:/run/secrets/pw}"), Some(Reference::File("/run/secrets/pw")));
        assert_eq!(Reference::parse("pre${env:PW}"), None);
        let ok = |v: &str| validate(&props(&[("sasl.password", v)]), &policy);
        ok("${env:SRC_PASSWORD}").unwrap();
        ok("${env:PW}").unwrap();
        ok("${file:/run/secrets/src-password}").unwrap();
        ok("${file:/etc/kmirror/pw}").unwrap();
        for bad in [
            "${env:KMIRROR_ADMIN_TOKEN}",
            // Not on the allow list.
            "${env:HOME}",
            "${env:PWD}",
            "${env:AWS_SECRET_ACCESS_KEY}",
            "${env:kmirror_x}",
            "${env:A-B}",
            "${env:}",
            "${file:/etc/shadow}",
            "${file:/run/secrets/../../etc/shadow}",
            "${file:/run/secretsX/pw}",
            "${file:/run/secrets}",
            "${file:run/secrets/pw}",
            "${vault:pw}",
        ] {
            assert!(matches!(ok(bad), Err(PropertyError::Reference { .. })), "{bad}");
        }
        let strict = ReferencePolicy { require_references: true, ..policy };
        assert!(matches!(
            validate(&props(&[("sasl.password", "plain")]), &strict),
            Err(PropertyError::PlaintextSecret { .. })
        ));
        validate(&props(&[("sasl.password", "${env:PW}"), ("client.id", "plain-is-fine")]), &strict).unwrap();
    }

    #[test]
    fn references_are_refused_outside_secret_properties() {
        let policy = ReferencePolicy { env_allow: vec!["*".into()], ..Default::default() };
        for name in ["sasl.mechanism", "client.id", "sasl.username", "ssl.ca.location", "security.protocol"] {
            for value in ["${env:DR_SASL_PASSWORD}", "${file:/run/secrets/pw}"] {
                let e = validate(&props(&[(name, value)]), &policy).unwrap_err();
                assert!(matches!(&e, PropertyError::Reference { name: n, .. } if n == name), "{name}: {e:?}");
                assert!(e.to_string().contains("secret properties only"), "{e}");
            }
        }
        validate(&props(&[("sasl.password", "${env:DR_SASL_PASSWORD}")]), &policy).unwrap();
    }

    #[test]
    fn environment_variables_resolve_only_by_name_or_glob() {
        let policy = ReferencePolicy { env_allow: vec!["DR_*".into(), "EXACT".into()], ..Default::default() };
        assert!(policy.allows_env("DR_SASL_PASSWORD"));
        assert!(policy.allows_env("DR_"));
        assert!(policy.allows_env("EXACT"));
        assert!(!policy.allows_env("EXACTLY"));
        assert!(!policy.allows_env("XDR_A"));
        assert!(!ReferencePolicy::default().allows_env("DR_SASL_PASSWORD"), "nothing by default");
        let all = ReferencePolicy { env_allow: vec!["*".into()], ..Default::default() };
        assert!(all.allows_env("ANYTHING"));
        assert!(!all.allows_env("KMIRROR_ADMIN_TOKEN") && !all.allows_env("kmirror_x"), "never kmirror's own");
        for (p, t, m) in [("a*b*c", "aXbYc", true), ("a*b*c", "abc", true), ("a*b*c", "acb", false), ("**", "", true)] {
            assert_eq!(glob_match(p, t), m, "{p} {t}");
        }
    }

    #[test]
    fn hostile_names_are_capped_in_errors() {
        let long = "x".repeat(10_000);
        let e = validate(&props(&[(&long, "v")]), &ReferencePolicy::default()).unwrap_err().to_string();
        assert!(e.len() < 300, "{}", e.len());
        let e = validate(&props(&[("a\u{1b}[31m", "v")]), &ReferencePolicy::default()).unwrap_err().to_string();
        assert!(!e.contains('\u{1b}'), "{e}");
    }
}
